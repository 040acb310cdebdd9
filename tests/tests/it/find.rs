//! `mfu-rs find` end to end: every test alone and combined (with --not, --or and groups) gives
//! the same paths as GNU find on a generated tree (sizes, types, odd names, set times and
//! owners), at 1, 2 and 4 ranks; --exec runs once per match; lists in and out; the purge
//! pipeline walk → find → rm; exit statuses.

use mfu::prelude::Collect as Kept;
use mfu_tests::{bin, expect_status, mfu, mpirun, Tool};
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Build the tree at `dir/t` and a reference file `dir/ref` (modified 2 days ago); returns
/// the tree's root. Times are set relative to now: minute ages sit in the middle of GNU's
/// one-minute windows and day ages in the middle of its one-day windows, so that a test
/// taking a few seconds sees the same matches from both tools. Directories keep current
/// access times (reading them would move old ones under relatime).
fn tree(dir: &Path) -> PathBuf {
    let script = r#"
import os, socket, sys, time
dir = sys.argv[1].encode()
root = dir + b'/t'
now = time.time_ns()
M, D = 60 * 10**9, 86400 * 10**9
def ago(minutes=0, days=0):
    return now - int(minutes * M) - int(days * D)
# name: (size, mtime age, atime age, uid, gid); ages as ago() values
files = {
    b'a.c': (0, ago(minutes=0.5), ago(minutes=1.5), 1000, 2000),
    b'b.h': (1, ago(minutes=1.5), ago(minutes=2.5), 0, 0),
    b'.hidden.c': (511, ago(minutes=2.5), ago(days=0.5), 0, 0),
    b'with space.txt': (512, ago(minutes=45.5), ago(days=1.5), 1001, 2001),
    b'n\xff.bin': (513, ago(days=0.5), ago(days=2.5), 0, 0),
    b'A{b,c}': (1023, ago(days=1.5), ago(days=181.5), 1, 1),
    b'core': (1024, ago(days=2.5), ago(days=200.5), 0, 0),
    b'd1/x.c': (1025, ago(days=10.5), ago(minutes=0.5), 1001, 0),
    b'd1/y.h': (4096, ago(days=181.5), ago(minutes=0.5), 0, 2000),
    b'd1/sub/z.c': (1048576, ago(days=200.5), ago(days=0.5), 0, 2001),
    b'd1/sub/big.bin': (1048577, ago(minutes=-60), ago(minutes=0.5), 1000, 1),
    b'd2/deep/e.txt': (3000, ago(days=1.5), ago(days=181.5), 0, 0),
    b'caf\xe9/f\xfe.c': (7, ago(days=0.5), ago(days=0.5), 0, 0),
    b'sp ace dir/q r.h': (100, ago(minutes=0.5), ago(minutes=0.5), 0, 0),
}
os.mkdir(root)
for name, (size, mtime, atime, uid, gid) in files.items():
    path = root + b'/' + name
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(b'x' * size)
    os.chown(path, uid, gid)
    os.utime(path, ns=(atime, mtime))
os.symlink(b'a.c', root + b'/link-file')
os.utime(root + b'/link-file', ns=(ago(days=1.5), ago(days=1.5)), follow_symlinks=False)
os.symlink(b'nowhere', root + b'/link-dangling')
os.chown(root + b'/link-dangling', 1000, 2000, follow_symlinks=False)
os.symlink(b'..', root + b'/d1/link-dir')
os.mkfifo(root + b'/fifo')
s = socket.socket(socket.AF_UNIX)
s.bind(root + b'/sock')
s.close()
# Directories last (filling them moved their mtimes); atimes stay current.
os.utime(root + b'/d2', ns=(now, ago(days=3.5)))
os.utime(root + b'/d1/sub', ns=(now, ago(minutes=1.5)))
open(dir + b'/ref', 'wb').close()
os.utime(dir + b'/ref', ns=(now, ago(days=2)))
"#;
    expect_status(
        Command::new("python3")
            .args(["-c", script])
            .arg(dir.as_os_str()),
        0,
    );
    dir.join("t")
}

/// The paths in `out`, split at `sep`.
fn paths(out: &[u8], sep: u8) -> BTreeSet<Vec<u8>> {
    out.split(|&b| b == sep)
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn show(set: &BTreeSet<Vec<u8>>) -> String {
    set.iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// What GNU find prints for `find ROOT ARGS` (C locale: patterns match bytes).
fn gnu(root: &Path, args: &[OsString]) -> BTreeSet<Vec<u8>> {
    let out = expect_status(
        Command::new("find").env("LC_ALL", "C").arg(root).args(args),
        0,
    );
    paths(&out.stdout, b'\n')
}

/// `mfu-rs find ROOT ARGS` at `np` ranks (1: one process, no launcher).
fn ours_at(np: usize, root: &Path, args: &[OsString]) -> BTreeSet<Vec<u8>> {
    let out = Tool::new("find").np(np).arg(root).args(args).run();
    paths(&out.assert_status(0).stdout, b'\n')
}

/// Each pair of (ours, GNU's) arguments selects the same paths.
fn same_as_gnu<'a, A: AsRef<[&'a str]>, B: AsRef<[&'a str]>>(
    np: usize,
    root: &Path,
    cases: &[(A, B)],
) {
    for (ours, theirs) in cases {
        let (ours, theirs) = (ours.as_ref(), theirs.as_ref());
        let want = gnu(root, &os(theirs));
        let got = ours_at(np, root, &os(ours));
        assert_eq!(
            show(&got),
            show(&want),
            "np {np}: mfu-rs find {ours:?} against find {theirs:?}"
        );
    }
}

#[test]
fn names_paths_regexes_sizes_and_types_equal_gnu_find() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let mut cases: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for t in ["b", "c", "d", "f", "l", "p", "s"] {
        cases.push((vec!["--type", t], vec!["-type", t]));
    }
    same_as_gnu(1, &root, &cases);
    let cases: &[(&[&str], &[&str])] = &[
        (&[], &[]),
        (&["--name", "*.c"], &["-name", "*.c"]),
        (&["--name", "*"], &["-name", "*"]),
        (&["--name", ".*"], &["-name", ".*"]),
        (&["--name", "A{b,c}"], &["-name", "A{b,c}"]),
        (&["--name", "caf?"], &["-name", "caf?"]),
        (&["--name", "[a-c].[!c]"], &["-name", "[a-c].[!c]"]),
        (&["--name", "*[[:space:]]*"], &["-name", "*[[:space:]]*"]),
        (&["--path", "*/d1/*"], &["-path", "*/d1/*"]),
        (&["--path", "*sp ace*"], &["-path", "*sp ace*"]),
        (
            &["--regex", ".*/[a-z]\\.[ch]"],
            &["-regextype", "posix-extended", "-regex", ".*/[a-z]\\.[ch]"],
        ),
        (
            &["--regex", ".*d1.*|.*\\.txt"],
            &["-regextype", "posix-extended", "-regex", ".*d1.*|.*\\.txt"],
        ),
        // Anchored like GNU's: a piece of the path is not enough.
        (
            &["--regex", "d1"],
            &["-regextype", "posix-extended", "-regex", "d1"],
        ),
        (&["--size", "0"], &["-size", "0c"]),
        (&["--size", "+1KB"], &["-size", "+1024c"]),
        (&["--size", "-513"], &["-size", "-513c"]),
        (&["--size", "1024"], &["-size", "1024c"]),
        (&["--size", "1MB"], &["-size", "1048576c"]),
        (&["--size", "+1MB"], &["-size", "+1048576c"]),
        (&["--type", "f,l"], &["-type", "f,l"]),
    ];
    same_as_gnu(1, &root, cases);
    // A pattern that is not UTF-8.
    let pattern = OsString::from_vec(b"n\xff.*".to_vec());
    let got = ours_at(1, &root, &[OsString::from("--name"), pattern.clone()]);
    assert_eq!(got.len(), 1);
    assert_eq!(got, gnu(&root, &[OsString::from("-name"), pattern]));
}

/// `--regextype posix-basic` reads dfind's dialect (POSIX `regcomp` without `REG_EXTENDED`)
/// and selects what GNU find's `-regextype posix-basic -regex` selects: escaped operators,
/// bare literals, brackets with their own rules, the whole path. One process and 3 thread
/// ranks.
#[test]
fn regextype_posix_basic_equals_gnu_find() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let basic = |re: &'static str| -> (Vec<&'static str>, Vec<&'static str>) {
        (
            vec!["--regextype", "posix-basic", "--regex", re],
            vec!["-regextype", "posix-basic", "-regex", re],
        )
    };
    let cases = [
        basic(r".*/[a-z]\.[ch]"),
        basic(r".*/d1/\(x\|y\)\.[ch]"),
        basic(r".*\.c\|.*\.h"),
        // Bare braces, `+`, `|` are literals in a basic expression.
        basic(r".*/A{b,c}"),
        basic(r".*/A{b,c}\|.*/core"),
        basic(r".*/link-[a-z]\+"),
        basic(r".*/link-[a-z]+"),
        basic(r".*/[[:alpha:]]\{4\}"),
        basic(r".*/[^]./]*"),
        basic(r".*/n[^[:alnum:]]\.bin"),
        basic(r"*.c"),
        // Anchored at both ends: a piece of the path is not enough.
        basic("d1"),
        basic(r".*d1.*"),
    ];
    same_as_gnu(1, &root, &cases);
    for (ours, theirs) in &cases[..4] {
        let out = Tool::new("find").ranks(3).arg(&root).args(ours).expect(0);
        assert_eq!(
            show(&paths(&out.stdout, b'\n')),
            show(&gnu(&root, &os(theirs))),
            "--ranks 3 {ours:?}"
        );
    }
    // The same selection as the default (extended) syntax's spelling of it.
    assert_eq!(
        ours_at(1, &root, &os(&["--regex", r".*/d1/(x|y)\.[ch]"])),
        ours_at(1, &root, &os(&cases[1].0))
    );
    // Back-references are refused by name, as a usage error: nothing is searched.
    let out = Tool::new("find")
        .arg(&root)
        .args(["--regextype", "posix-basic", "--regex", r".*/\(.\)\1.*"])
        .expect(2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r"--regex: bad regex '.*/\(.\)\1.*' (posix-basic)")
            && err.contains("back-references"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let out = Tool::new("find")
        .arg(&root)
        .args(["--regextype", "posix-ext", "--regex", "x"])
        .expect(2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("posix-basic"));
}

#[test]
fn times_owners_and_reference_files_equal_gnu_find() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let reference = dir.path().join("ref");
    let reference = reference.to_str().unwrap();
    let mut cases: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for (ours, theirs, values) in [
        (
            "--mmin",
            "-mmin",
            &[
                "1", "-1", "+1", "2", "3", "+2", "-3", "+45", "46", "0", "-0",
            ][..],
        ),
        ("--amin", "-amin", &["2", "+2", "-2", "1"]),
        ("--cmin", "-cmin", &["-5", "+5"]),
        (
            "--mtime",
            "-mtime",
            &[
                "0", "1", "2", "-1", "-2", "+0", "+1", "+2", "+10", "10", "+180", "181", "-181",
                "3",
            ],
        ),
        ("--atime", "-atime", &["0", "+0", "+180", "-1", "1", "2"]),
        ("--ctime", "-ctime", &["0", "+0", "-1"]),
        ("--uid", "-uid", &["1000", "+999", "-1000", "1"]),
        ("--gid", "-gid", &["2000", "-1", "+1", "1"]),
        ("--user", "-user", &["daemon", "root", "1000"]),
        ("--group", "-group", &["daemon", "root", "2001"]),
    ] {
        for v in values {
            cases.push((vec![ours, v], vec![theirs, v]));
        }
    }
    for (ours, theirs) in [
        ("--newer", "-newer"),
        ("--anewer", "-anewer"),
        ("--cnewer", "-cnewer"),
    ] {
        cases.push((vec![ours, reference], vec![theirs, reference]));
    }
    same_as_gnu(1, &root, &cases);
}

/// Combined tests, the operators and --maxdepth (GNU wants its -maxdepth first).
const COMBINED: &[(&[&str], &[&str])] = &[
    (
        &["--type", "f", "--name", "*.c", "--mtime", "+1"],
        &["-type", "f", "-name", "*.c", "-mtime", "+1"],
    ),
    (&["--not", "--type", "d"], &["!", "-type", "d"]),
    (&["!", "--type", "f"], &["!", "-type", "f"]),
    (
        &["--type", "f", "--or", "--type", "l"],
        &["-type", "f", "-o", "-type", "l"],
    ),
    (
        &["--name", "*.c", "--or", "--name", "*.h", "--size", "+100"],
        &["-name", "*.c", "-o", "-name", "*.h", "-size", "+100c"],
    ),
    (
        &[
            "(", "--name", "*.c", "--or", "--name", "*.h", ")", "--size", "+100",
        ],
        &[
            "(", "-name", "*.c", "-o", "-name", "*.h", ")", "-size", "+100c",
        ],
    ),
    (
        &["--not", "(", "--type", "d", "--or", "--mtime", "-1", ")"],
        &["!", "(", "-type", "d", "-o", "-mtime", "-1", ")"],
    ),
    (
        &[
            "--open", "--uid", "1000", "--or", "--gid", "1", "--close", "--and", "--not", "--name",
            "*.c",
        ],
        &[
            "(", "-uid", "1000", "-o", "-gid", "1", ")", "-a", "!", "-name", "*.c",
        ],
    ),
    (
        &[
            "--mmin", "+1", "--mmin", "-3", "--or", "--atime", "+180", "--not", "--size", "+2000",
        ],
        &[
            "-mmin", "+1", "-mmin", "-3", "-o", "-atime", "+180", "!", "-size", "+2000c",
        ],
    ),
    (
        &["--maxdepth", "1", "--type", "d"],
        &["-maxdepth", "1", "-type", "d"],
    ),
    (&["--maxdepth", "0"], &["-maxdepth", "0"]),
    (
        &["--maxdepth", "2", "--name", "*.c"],
        &["-maxdepth", "2", "-name", "*.c"],
    ),
];

#[test]
fn combined_expressions_equal_gnu_find() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    same_as_gnu(1, &root, COMBINED);
    // The same through the thread ranks of one process.
    let mut cmd = mfu(&["--ranks", "3", "find"]);
    cmd.arg(&root)
        .args(["--name", "*.c", "--or", "--type", "l"]);
    assert_eq!(
        paths(&expect_status(&mut cmd, 0).stdout, b'\n'),
        gnu(&root, &os(&["-name", "*.c", "-o", "-type", "l"]))
    );
}

#[test]
fn combined_expressions_equal_gnu_find_under_mpirun() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let some = [
        COMBINED[0],
        COMBINED[5],
        COMBINED[6],
        COMBINED[8],
        COMBINED[9],
    ];
    same_as_gnu(2, &root, &some);
    same_as_gnu(4, &root, &some[1..3]);
}

#[test]
fn print0_ends_paths_with_nul() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let out = expect_status(
        mfu(&["find"])
            .arg(&root)
            .args(["--name", "*.c", "--print0"]),
        0,
    );
    let theirs = expect_status(
        Command::new("find")
            .env("LC_ALL", "C")
            .arg(&root)
            .args(["-name", "*.c", "-print0"]),
        0,
    );
    assert!(out.stdout.ends_with(b"\0"));
    assert!(!out.stdout.contains(&b'\n'));
    assert_eq!(paths(&out.stdout, 0), paths(&theirs.stdout, 0));
}

/// Run `--exec sh -c 'echo x >> "$1.seen"' sh {} ;` after `expr` at `np` ranks, and check that
/// exactly the paths GNU find selects with `gnu_expr` got one line each.
fn exec_runs_once_per_match(np: usize, expr: &[&str], gnu_expr: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let want = gnu(&root, &os(gnu_expr));
    assert!(want.len() > 3);
    let mut cmd = if np == 1 {
        mfu(&[])
    } else {
        mpirun(np, &bin())
    };
    cmd.arg("find").arg(&root).args(expr).args([
        "--exec",
        "sh",
        "-c",
        "echo x >> \"$1.seen\"",
        "sh",
        "{}",
        ";",
    ]);
    let out = expect_status(&mut cmd, 0);
    assert!(
        out.stdout.is_empty(),
        "an --exec expression prints nothing itself"
    );
    // The root's mark lands beside it.
    let seen = gnu(dir.path(), &os(&["-name", "*.seen"]));
    let expected: BTreeSet<Vec<u8>> = want
        .iter()
        .map(|p| [p.as_slice(), b".seen"].concat())
        .collect();
    assert_eq!(show(&seen), show(&expected), "np {np}");
    for s in &seen {
        let body = fs::read(OsStr::from_bytes(s)).unwrap();
        assert_eq!(body, b"x\n", "{}", String::from_utf8_lossy(s));
    }
}

#[test]
fn exec_runs_once_per_match_in_one_process() {
    exec_runs_once_per_match(1, &["--type", "f"], &["-type", "f"]);
    exec_runs_once_per_match(
        1,
        &["(", "--name", "*.c", "--or", "--type", "d", ")"],
        &["(", "-name", "*.c", "-o", "-type", "d", ")"],
    );
}

#[test]
fn exec_runs_once_per_match_under_mpirun() {
    exec_runs_once_per_match(2, &["--type", "f"], &["-type", "f"]);
    exec_runs_once_per_match(
        4,
        &["--not", "--type", "d", "--not", "--type", "p"],
        &["!", "-type", "d", "!", "-type", "p"],
    );
}

#[test]
fn exec_results_feed_the_expression_and_failures_set_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    // `test -s` is true for non-empty files: the --print after it prints only those.
    let out = expect_status(
        mfu(&["find"])
            .arg(&root)
            .args(["--type", "f", "--exec", "test", "-s", "{}", ";", "--print"]),
        1,
    );
    assert_eq!(
        paths(&out.stdout, b'\n'),
        gnu(&root, &os(&["-type", "f", "-size", "+0c"]))
    );
    // The empty file's test failed: reported with its path, exit status 1.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/t/a.c: exit status 1"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = expect_status(
        mfu(&["find"])
            .arg(&root)
            .args(["--name", "*.h", "--exec", "/no/such/command", "{}", ";"]),
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(err.contains("q r.h: cannot run"), "{err}");
}

#[test]
fn malformed_expressions_and_bad_setups_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    for (args, says) in [
        (&["--exec", "rm", "{}"][..], "needs a ';'"),
        (&["(", "--name", "x"], "unbalanced '('"),
        (&["--name", "x", ")"], "unbalanced ')'"),
        (&["--or", "--name", "x"], "--or needs a test before"),
        (&["--not"], "--not needs a test after"),
        (&["--type", "q"], "bad type"),
        (&["--mtime", "x"], "bad time"),
        (&["--user", "no-such-user-here"], "unknown user"),
        (&["--group", "no-such-group-here"], "unknown group"),
        (&["--newer", "/no/such/reference"], "/no/such/reference"),
        (&["--print", "-o", "-"], "cannot go to stdout"),
        (&["-i", "list.mfu"], "cannot be combined"),
    ] {
        let out = expect_status(mfu(&["find"]).arg(&root).args(args), 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Usage errors are also 2 under mpirun, printed once.
    let out = expect_status(
        mpirun(2, &bin())
            .arg("find")
            .arg(&root)
            .args(["(", "--name", "x"]),
        2,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("unbalanced").count(), 1, "{err}");
    // A list that is not there.
    expect_status(&mut mfu(&["find", "-i", "/no/such/list.mfu"]), 2);
}

/// `walk -o list.mfu DIR`, `find -i list.mfu --mtime +180 -o purge.mfu`, `rm -i purge.mfu`
/// at `np` ranks: exactly the entries GNU's `-mtime +180` names are gone.
fn purge_pipeline(np: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let all = gnu(&root, &[]);
    let old = gnu(&root, &os(&["-mtime", "+180"]));
    assert_eq!(old.len(), 2, "{}", show(&old));
    let list = dir.path().join("list.mfu");
    let purge = dir.path().join("purge.mfu");
    let run = |args: &[&OsStr]| {
        let mut cmd = if np == 1 {
            mfu(&[])
        } else {
            mpirun(np, &bin())
        };
        expect_status(cmd.args(args), 0)
    };
    let s = |x: &str| OsStr::new(x).to_owned();
    run(&[
        &s("walk"),
        &s("-q"),
        &s("-o"),
        list.as_os_str(),
        root.as_os_str(),
    ]);
    let out = run(&[
        &s("find"),
        &s("-i"),
        list.as_os_str(),
        &s("--mtime"),
        &s("+180"),
        &s("-o"),
        purge.as_os_str(),
    ]);
    assert!(out.stdout.is_empty(), "-o without --print prints nothing");
    // The purge list is a v4 list of exactly the old files.
    let listed = expect_status(mfu(&["find", "-i"]).arg(&purge), 0);
    assert_eq!(paths(&listed.stdout, b'\n'), old);
    run(&[&s("rm"), &s("-q"), &s("-i"), purge.as_os_str()]);
    let left = gnu(&root, &[]);
    let expected: BTreeSet<Vec<u8>> = all.difference(&old).cloned().collect();
    assert_eq!(show(&left), show(&expected), "np {np}");
}

#[test]
fn purge_pipeline_through_files() {
    purge_pipeline(1);
}

#[test]
fn purge_pipeline_through_files_under_mpirun() {
    purge_pipeline(2);
    purge_pipeline(4);
}

#[test]
fn text_lists_are_stat_ed_again_and_maxdepth_counts_from_their_top() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    // A plain list of paths (GNU find's output): no types, no metadata.
    let plain = dir.path().join("plain.txt");
    let listed = expect_status(Command::new("find").env("LC_ALL", "C").arg(&root), 0);
    fs::write(&plain, &listed.stdout).unwrap();
    for (ours, theirs) in [
        (
            &["--mtime", "+1", "--type", "f"][..],
            &["-mtime", "+1", "-type", "f"][..],
        ),
        (&["--type", "l"], &["-type", "l"]),
        (
            &["--size", "-600", "--uid", "0"],
            &["-size", "-600c", "-uid", "0"],
        ),
        (
            &["--maxdepth", "1", "--name", "*.*"],
            &["-maxdepth", "1", "-name", "*.*"],
        ),
    ] {
        for np in [1, 2] {
            let mut cmd = if np == 1 {
                mfu(&[])
            } else {
                mpirun(np, &bin())
            };
            cmd.arg("find").arg("-i").arg(&plain).args(ours);
            let got = paths(&expect_status(&mut cmd, 0).stdout, b'\n');
            assert_eq!(
                show(&got),
                show(&gnu(&root, &os(theirs))),
                "np {np} {ours:?}"
            );
        }
    }
    // A v4 list written by find itself, read back, with --maxdepth from the list's top.
    let out = dir.path().join("out.mfu");
    expect_status(
        mfu(&["find"])
            .arg(&root)
            .args(["--type", "f,d", "-o"])
            .arg(&out),
        0,
    );
    let got = expect_status(mfu(&["find", "--maxdepth", "1", "-i"]).arg(&out), 0);
    assert_eq!(
        paths(&got.stdout, b'\n'),
        gnu(&root, &os(&["-maxdepth", "1", "-type", "f,d"]))
    );
    // Gone entries are reported and make the status 1.
    fs::remove_file(root.join("core")).unwrap();
    let out = expect_status(mfu(&["find", "--size", "+0", "-i"]).arg(&plain), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stat ") && err.contains("/t/core"), "{err}");
}

#[test]
fn verbose_summary_goes_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let out = expect_status(
        mfu(&["find", "-v", "--progress", "0.001"])
            .arg(&root)
            .args(["--name", "*.c"]),
        0,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Examined"), "{err}");
    assert!(err.contains("5 matched"), "{err}");
    assert_eq!(paths(&out.stdout, b'\n').len(), 5);
}

#[test]
fn patterns_may_begin_with_a_dash() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    std::fs::create_dir(&root).unwrap();
    for f in ["-rf", "-x.log", "plain", "a-b"] {
        std::fs::write(root.join(f), f).unwrap();
    }
    same_as_gnu(
        1,
        &root,
        &[
            (&["--name", "-*"][..], &["-name", "-*"][..]),
            (&["--path", "*/-x*"], &["-path", "*/-x*"]),
            (&["--regex", ".*/-r.*"], &["-regex", ".*/-r.*"]),
            (&["--not", "--name", "-*"], &["!", "-name", "-*"]),
        ],
    );
}

#[test]
fn find_as_a_library_function_reports_counts_and_failures() {
    let _serial = mfu_tests::serial();
    use mfu::find::expr::Expr;
    use mfu::find::Primary;
    use mfu::prelude::{Context, ToolReport};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    fs::create_dir_all(root.join("d")).unwrap();
    for f in ["a.c", "b.h", "d/c.c", "d/e.txt"] {
        fs::write(root.join(f), f).unwrap();
    }
    let name = |glob: &[u8]| {
        Expr::Leaf(Primary::Test(
            flist::filter::Test::fnmatch_name(glob).unwrap(),
        ))
    };
    let kept = Arc::new(Kept::default());
    let mut options = mfu::find::Options::new([root.as_os_str().as_bytes()], Some(name(b"*.c")));
    options.context = Context::new(kept.clone());
    let reports = steal::local::run(2, |comm| mfu::find::run(comm, &options).expect("searched"));
    for r in &reports {
        // t, t/d and the four files.
        assert_eq!((r.entries, r.examined, r.matched), (6, 6, 2), "{r:?}");
        assert_eq!(r.status(), mfu::Status::Ok);
        assert_eq!(r.summary().items, 6);
        assert_eq!(r.summary().failed, 0);
    }
    // Without an action the matches are the output, in list order.
    assert_eq!(
        paths(&kept.output.lock().unwrap(), b'\n'),
        [root.join("a.c"), root.join("d/c.c")]
            .iter()
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .collect()
    );

    // A command that fails is a failure of its entry, counted and named.
    let kept = Arc::new(Kept::default());
    let exec = Expr::Leaf(Primary::Exec(vec!["false".into(), "{}".into()]));
    let mut options = mfu::find::Options::new(
        [root.as_os_str().as_bytes()],
        Some(Expr::And(vec![name(b"*.c"), exec])),
    );
    options.context = Context::new(kept.clone());
    let reports = steal::local::run(2, |comm| mfu::find::run(comm, &options).expect("searched"));
    for r in &reports {
        assert_eq!((r.matched, r.commands_failed), (0, 2), "{r:?}");
        assert_eq!(r.summary().failed, 2);
        assert_eq!(r.status(), mfu::Status::ItemsFailed);
        assert!(
            r.failures.iter().all(|f| f.contains("--exec false on")),
            "{:?}",
            r.failures
        );
        assert_eq!(r.failures.len(), 2);
    }
    assert!(kept.output.lock().unwrap().is_empty());
    assert_eq!(kept.errors.lock().unwrap().len(), 2);
}

#[test]
fn json_report_has_the_counts_of_the_verbose_summary() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let text = expect_status(mfu(&["find", "-v"]).arg(&root).args(["--name", "*.c"]), 0);
    let err = String::from_utf8_lossy(&text.stderr).into_owned();
    let out = expect_status(
        mfu(&["find", "--json"]).arg(&root).args(["--name", "*.c"]),
        0,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["tool"], "find");
    assert_eq!(v["status"], 0);
    assert_eq!(v["failed"], 0);
    assert_eq!(v["bytes"], 0);
    assert!(v["seconds"].is_number());
    let (items, matched) = (v["items"].as_u64().unwrap(), v["matched"].as_u64().unwrap());
    assert_eq!(matched, 5);
    assert!(
        err.contains(&format!("Examined {items} items in ")),
        "{items}:\n{err}"
    );
    assert!(err.contains(&format!(": {matched} matched;")), "{err}");
    // With --json the matches go to stderr, stdout is the report alone.
    assert_eq!(paths(&out.stderr, b'\n').len(), 5);

    // A failed command: counted, status 1.
    let out = expect_status(
        mfu(&["find", "--json"])
            .arg(&root)
            .args(["--name", "*.c", "--exec", "false", ";"]),
        1,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["status"].as_u64(), v["failed"].as_u64()),
        (Some(1), Some(5))
    );
    assert_eq!(v["commands_failed"], 5);
}
