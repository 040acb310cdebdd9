//! `mfu-rs chmod` end to end: the result on a tree equals GNU `chmod -R` / `chown -R` on an
//! identical tree, for octal and symbolic modes, owners and groups, at 1, 2 and 4 ranks;
//! --match/--exclude/--name select what changes; usage errors change nothing; a caller who is
//! not root still reaches every entry (`u-x`) and gets into directories the new mode opens.

use mfu_tests::{bin, expect_status, mfu, mpirun, Tool};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Relative path (the root is "") → (full mode, uid, gid).
type Snapshot = BTreeMap<String, (u32, u32, u32)>;

/// Files of assorted modes (set-ID and sticky bits too), directories with a set-group-ID one,
/// a nested directory without any permission holding a subtree, a symlink and a dangling one.
fn make_tree(root: &Path) {
    let dirs = [
        ("", 0o755),
        ("d", 0o755),
        ("d/e", 0o700),
        ("sg", 0o2775),
        ("tmp", 0o1777),
        ("noperm", 0o000),
        ("noperm/sub", 0o750),
    ];
    let files = [
        ("f644", 0o644),
        ("f755", 0o755),
        ("f600", 0o600),
        ("f000", 0o000),
        ("f070", 0o070),
        ("suid", 0o4755),
        ("sgid", 0o2750),
        ("d/f640", 0o640),
        ("d/e/g444", 0o444),
        ("sg/h664", 0o664),
        ("tmp/t666", 0o666),
        ("noperm/in", 0o644),
        ("noperm/sub/x", 0o711),
    ];
    for (d, _) in dirs {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    for (f, _) in files {
        fs::write(root.join(f), f).unwrap();
    }
    symlink("f644", root.join("link")).unwrap();
    symlink("nowhere", root.join("d/dangling")).unwrap();
    // Files first, directories deepest first, so that no mode locks out a later one.
    for (p, mode) in files.iter().chain(dirs.iter().rev()) {
        fs::set_permissions(root.join(p), fs::Permissions::from_mode(*mode)).unwrap();
    }
}

fn snapshot(root: &Path) -> Snapshot {
    fn walk(dir: &Path, rel: &str, out: &mut Snapshot) {
        let m = fs::symlink_metadata(dir).unwrap();
        out.insert(rel.to_string(), (m.mode(), m.uid(), m.gid()));
        if m.is_dir() {
            for e in fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let name = e.file_name().into_string().unwrap();
                let sub = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                walk(&e.path(), &sub, out);
            }
        }
    }
    let mut out = Snapshot::new();
    walk(root, "", &mut out);
    out
}

/// Two identical trees `gnu` and `mfu` in a fresh directory.
fn twin_trees() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = mfu_tests::nobody_tempdir();
    let (a, b) = (tmp.path().join("gnu"), tmp.path().join("mfu"));
    make_tree(&a);
    make_tree(&b);
    assert_eq!(snapshot(&a), snapshot(&b));
    (tmp, a, b)
}

/// `sh -c 'umask U; exec PROGRAM ARGS'`.
fn with_umask(umask: &str, program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("umask {umask}; exec \"$@\""))
        .arg("sh")
        .arg(program)
        .args(args);
    cmd
}

fn run_gnu(umask: &str, tool: &str, args: &[&str]) {
    let chmod = which(tool);
    expect_status(&mut with_umask(umask, &chmod, args), 0);
}

fn which(tool: &str) -> PathBuf {
    for dir in ["/usr/bin", "/bin"] {
        let p = Path::new(dir).join(tool);
        if p.is_file() {
            return p;
        }
    }
    panic!("{tool} not found");
}

/// `mfu-rs chmod ARGS` at `np` ranks (1 = one process) with `umask`.
fn run_mfu(np: usize, umask: &str, args: &[&str]) -> Output {
    let umask = u32::from_str_radix(umask, 8).expect("an octal umask");
    Tool::new("chmod")
        .np(np)
        .umask(umask)
        .arg("-q")
        .args(args)
        .run()
        .assert_status(0)
        .into()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// GNU `chmod -R MODE` and `mfu-rs chmod -m MODE` give the same tree.
fn same_as_gnu_chmod(np: usize, mode: &str, umask: &str) {
    let (_tmp, a, b) = twin_trees();
    run_gnu(umask, "chmod", &["-R", "--", mode, path(&a)]);
    run_mfu(np, umask, &["-m", mode, path(&b)]);
    assert_eq!(
        snapshot(&a),
        snapshot(&b),
        "mode {mode}, umask {umask}, {np} ranks"
    );
}

const MODES: &[&str] = &[
    "755",
    "0640",
    "2775",
    "1777",
    "00755",
    "u+rwX,go-w",
    "a+X",
    "g=u",
    "go=u,u-w",
    "o=",
    "u-x",
    "a-x",
    "ug+s,o+t",
    "g-s",
    "u=rwX,g=rX,o=",
    "=r",
    "-w",
];

#[test]
fn modes_equal_gnu_chmod_one_process() {
    for mode in MODES {
        same_as_gnu_chmod(1, mode, "022");
    }
    // Without ugoa the umask limits the change.
    for mode in ["+x", "+rwX", "=rw", "-r"] {
        same_as_gnu_chmod(1, mode, "027");
    }
}

#[test]
fn modes_equal_gnu_chmod_two_ranks() {
    for mode in ["u+rwX,go-w", "g=u", "u-x", "2775"] {
        same_as_gnu_chmod(2, mode, "022");
    }
    same_as_gnu_chmod(2, "+x", "027");
}

#[test]
fn modes_equal_gnu_chmod_four_ranks() {
    for mode in ["0640", "a+X", "o=", "a-x"] {
        same_as_gnu_chmod(4, mode, "022");
    }
    same_as_gnu_chmod(4, "+x", "077");
}

/// GNU `chown -R SPEC` (then `chmod -R MODE` if given) and `mfu-rs chmod ARGS` agree.
fn same_as_gnu_chown(np: usize, spec: &str, mode: Option<&str>, args: &[&str]) {
    let (_tmp, a, b) = twin_trees();
    run_gnu("022", "chown", &["-R", spec, path(&a)]);
    let mut full = args.to_vec();
    if let Some(m) = mode {
        run_gnu("022", "chmod", &["-R", m, path(&a)]);
        full.extend(["-m", m]);
    }
    full.push(path(&b));
    run_mfu(np, "022", &full);
    let (sa, sb) = (snapshot(&a), snapshot(&b));
    assert_eq!(sa, sb, "chown {spec} / {args:?}, {np} ranks");
    // The symlinks themselves changed owner (lchown), as chown -R does by default.
    assert_ne!(sb["link"].1, 0, "{spec}: {:?}", sb["link"]);
}

#[test]
fn owners_equal_gnu_chown_one_process() {
    same_as_gnu_chown(1, "1234:5678", None, &["-u", "1234", "-g", "5678"]);
    same_as_gnu_chown(1, "nobody", None, &["-u", "nobody"]);
    same_as_gnu_chown(1, "+4321", None, &["--owner", "+4321"]);
    // The mode is applied after the owner: set-ID bits chown clears come back.
    same_as_gnu_chown(1, "1234", Some("u+s,g+s"), &["-u", "1234"]);
}

#[test]
fn group_names_equal_gnu_chgrp() {
    let (_tmp, a, b) = twin_trees();
    run_gnu("022", "chgrp", &["-R", "daemon", path(&a)]);
    run_mfu(1, "022", &["-g", "daemon", path(&b)]);
    let sb = snapshot(&b);
    assert_eq!(snapshot(&a), sb);
    assert!(sb.values().all(|&(_, uid, gid)| uid == 0 && gid == 1));
}

#[test]
fn owners_equal_gnu_chown_two_and_four_ranks() {
    same_as_gnu_chown(2, "1234:daemon", None, &["-u", "1234", "-g", "daemon"]);
    same_as_gnu_chown(
        4,
        "nobody:5678",
        Some("g=u"),
        &["-u", "nobody", "-g", "5678"],
    );
}

/// Apply GNU `chmod MODE` to the entries of `a` whose relative path `pick` selects (links
/// excluded: GNU would follow them) and `mfu-rs chmod -m MODE FILTER` to `b`; compare.
fn filtered(np: usize, mode: &str, filter: &[&str], pick: impl Fn(&str) -> bool) {
    let (_tmp, a, b) = twin_trees();
    let before = snapshot(&a);
    // Deepest first, so that GNU is not locked out by its own changes (it runs as root anyway).
    let mut chosen: Vec<String> = before
        .iter()
        .filter(|(rel, m)| pick(rel) && m.0 & 0o170000 != 0o120000)
        .map(|(rel, _)| path(&a.join(rel)).trim_end_matches('/').to_string())
        .collect();
    chosen.reverse();
    assert!(!chosen.is_empty());
    let mut args = vec!["--", mode];
    args.extend(chosen.iter().map(String::as_str));
    run_gnu("022", "chmod", &args);
    let mut full = vec!["-m", mode];
    full.extend_from_slice(filter);
    full.push(path(&b));
    run_mfu(np, "022", &full);
    let sb = snapshot(&b);
    assert_eq!(snapshot(&a), sb, "{mode} {filter:?}, {np} ranks");
    assert_ne!(before, sb, "{mode} {filter:?} changed nothing");
}

#[test]
fn match_exclude_and_name_select_what_changes() {
    filtered(1, "700", &["--match", "/d/"], |rel| rel.starts_with("d/"));
    filtered(1, "a+rwx", &["--exclude", "/(d|noperm)(/|$)"], |rel| {
        !(rel == "d" || rel.starts_with("d/") || rel == "noperm" || rel.starts_with("noperm/"))
    });
    filtered(1, "go-rwx", &["-n", "--match", "^f[0-9]"], |rel| {
        rel.rsplit('/').next().unwrap().starts_with('f')
            && rel
                .rsplit('/')
                .next()
                .unwrap()
                .as_bytes()
                .get(1)
                .is_some_and(u8::is_ascii_digit)
    });
    filtered(
        1,
        "u=rwx",
        &["--name", "--match", "6", "--exclude", "^sg"],
        |rel| {
            let base = rel.rsplit('/').next().unwrap();
            base.contains('6') && !base.starts_with("sg")
        },
    );
}

#[test]
fn filters_under_mpirun() {
    filtered(2, "g+w", &["--name", "--exclude", "^f"], |rel| {
        !rel.rsplit('/').next().unwrap().starts_with('f')
    });
    filtered(4, "o+w", &["--match", "noperm"], |rel| {
        rel.starts_with("noperm")
    });
}

#[test]
fn usage_errors_exit_2_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    make_tree(&t);
    let before = snapshot(&t);
    let p = path(&t);
    let cases: &[&[&str]] = &[
        &["-m", "u+q", p],
        &["-m", "8", p],
        &["-m", "u+r,", p],
        &["-m", "g=ur", p],
        &["-m", "755", "-u", "no-such-user-mfu", p],
        &["-m", "755", "-g", "no-such-group-mfu", p],
        &["-m", "755", "--match", "(", p],
        &[p],
        &["-m", "755"],
        &["-m", "755", "-i", "/nonexistent/list", p],
    ];
    for args in cases {
        let mut full = vec!["chmod"];
        full.extend_from_slice(args);
        let out = expect_status(&mut mfu(&full), 2);
        assert!(!out.stderr.is_empty(), "{args:?}: no message");
        assert_eq!(snapshot(&t), before, "{args:?} changed something");
    }
    for np in [2, 4] {
        let out = expect_status(
            mpirun(np, &bin()).args(["chmod", "-m", "u+rwz", "-u", "0", p]),
            2,
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("invalid mode: 'u+rwz'"));
        expect_status(
            mpirun(np, &bin()).args(["chmod", "-u", "no-such-user-mfu", p]),
            2,
        );
        assert_eq!(snapshot(&t), before);
    }
}

#[test]
fn force_calls_chmod_even_where_nothing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("f");
    fs::write(&f, "x").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
    let ctime = |p: &Path| {
        let m = fs::metadata(p).unwrap();
        (m.ctime(), m.ctime_nsec())
    };
    let before = ctime(&f);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let out = expect_status(&mut mfu(&["chmod", "-m", "644", path(&f)]), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Changed 0 items (1 unchanged"));
    assert_eq!(ctime(&f), before, "an unchanged file was touched");
    let out = expect_status(&mut mfu(&["chmod", "-f", "-m", "644", path(&f)]), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Changed 1 items"));
    assert_ne!(ctime(&f), before, "--force did not call chmod");
}

#[test]
fn input_list_changes_what_it_names_from_the_current_mode() {
    let (tmp, a, b) = twin_trees();
    let names = ["f644", "d/e", "d/e/g444", "link", "noperm/sub/x"];
    let list = tmp.path().join("list.txt");
    let text: String = names
        .iter()
        .map(|n| format!("{}\n", path(&b.join(n))))
        .collect();
    fs::write(&list, text).unwrap();
    let gnu: Vec<String> = names
        .iter()
        .filter(|n| **n != "link")
        .map(|n| path(&a.join(n)).to_string())
        .collect();
    let mut args = vec!["u+x,g=u"];
    args.extend(gnu.iter().map(String::as_str));
    run_gnu("022", "chmod", &args);
    for np in [1, 2] {
        // The second run finds everything right already: idempotent.
        run_mfu(np, "022", &["-m", "u+x,g=u", "-i", path(&list)]);
        assert_eq!(snapshot(&a), snapshot(&b), "{np} ranks");
    }
}

/// `mfu-rs chmod ARGS` as the unprivileged user nobody.
fn as_nobody(args: &[&str], code: i32) -> Output {
    Tool::new("chmod")
        .as_nobody()
        .args(args)
        .run()
        .assert_status(code)
        .into()
}

/// Twin trees owned by nobody, in a directory nobody can enter; `noperm/` gets `noperm_mode`.
fn nobody_trees(noperm_mode: u32) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (tmp, a, b) = twin_trees();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    for t in [&a, &b] {
        fs::set_permissions(t.join("noperm"), fs::Permissions::from_mode(noperm_mode)).unwrap();
        expect_status(
            Command::new("chown")
                .args(["-R", "-h", "65534:65534"])
                .arg(t),
            0,
        );
    }
    (tmp, a, b)
}

#[test]
fn unprivileged_caller_is_never_locked_out() {
    // u-x: GNU (run as root here, so it cannot lock itself out) gives the intended result;
    // nobody gets it too because directories lose their execute bit last, deepest first.
    for mode in ["u-x", "a-rwx", "u-r"] {
        let (_tmp, a, b) = nobody_trees(0o700);
        run_gnu("022", "chmod", &["-R", mode, path(&a)]);
        as_nobody(&["-q", "-m", mode, path(&b)], 0);
        assert_eq!(snapshot(&a), snapshot(&b), "{mode} as nobody");
    }
}

#[test]
fn unprivileged_caller_opens_directories_the_new_mode_grants() {
    // noperm/ is 000 and owned by nobody: u+rwX (and 750) let the owner in, so the walk
    // opens it first and changes what is inside.
    for mode in ["u+rwX", "750"] {
        let (_tmp, a, b) = nobody_trees(0o000);
        run_gnu("022", "chmod", &["-R", mode, path(&a)]);
        as_nobody(&["-q", "-m", mode, path(&b)], 0);
        let sb = snapshot(&b);
        assert_eq!(snapshot(&a), sb, "{mode} as nobody");
    }
    // go-w does not grant the owner anything: noperm/ stays closed, which is reported with
    // its path and the operation, and the exit status is 1.
    let (_tmp, _a, b) = nobody_trees(0o000);
    let out = as_nobody(&["-q", "-m", "go-w", path(&b)], 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "open directory {}/noperm: Permission denied",
            path(&b)
        )),
        "{err}"
    );
}

#[test]
fn silent_hides_not_permitted_but_still_fails() {
    let tmp = mfu_tests::nobody_tempdir();
    let t = tmp.path().join("t");
    fs::create_dir(&t).unwrap();
    for n in ["a", "b", "c"] {
        fs::write(t.join(n), n).unwrap(); // owned by root: nobody may not chmod them
    }
    let loud = as_nobody(&["-m", "600", path(&t)], 1);
    let loud = String::from_utf8_lossy(&loud.stderr);
    assert!(
        loud.contains(&format!("chmod {}/a: Operation not permitted", path(&t))),
        "{loud}"
    );
    let quiet = as_nobody(&["-s", "-m", "600", path(&t)], 1);
    let quiet = String::from_utf8_lossy(&quiet.stderr);
    assert!(!quiet.contains("/a:"), "{quiet}");
    assert!(
        quiet.contains("4 items could not be changed: 0 listed above, 4 not listed (-s): Operation not permitted"),
        "{quiet}"
    );
}

/// A list (one path per line) naming `names` under `root`, and one entry that does not exist.
fn list_with_a_missing_entry(dir: &Path, root: &Path, names: &[&str]) -> PathBuf {
    let list = dir.join("list.txt");
    let mut text: String = names
        .iter()
        .map(|n| format!("{}\n", path(&root.join(n))))
        .collect();
    text.push_str(&format!("{}\n", path(&root.join("missing"))));
    fs::write(&list, text).unwrap();
    list
}

#[test]
fn library_run_reports_counts_and_failures() {
    let _serial = mfu_tests::serial();
    let (tmp, a, b) = twin_trees();
    let before = snapshot(&a);
    let mut options = mfu::chmod::Options::new(vec![path(&a).as_bytes().to_vec()]);
    options.mode = Some("go-w".into());
    let reports = steal::local::run(2, |comm| mfu::chmod::run(comm, &options).unwrap());
    // Entries with a group or other write bit, links excluded (their mode is never changed).
    let writable = before
        .values()
        .filter(|m| m.0 & 0o170000 != 0o120000 && m.0 & 0o022 != 0)
        .count() as u64;
    for r in &reports {
        assert_eq!(r.listed, before.len() as u64);
        assert_eq!(r.changed, writable);
        assert_eq!(r.unchanged, before.len() as u64 - writable);
        assert_eq!((r.failed, r.silenced, r.interrupted), (0, 0, false));
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        assert_eq!(mfu::prelude::ToolReport::status(r), mfu::Status::Ok);
    }
    assert!(snapshot(&a)
        .values()
        .all(|m| m.0 & 0o170000 == 0o120000 || m.0 & 0o022 == 0));
    // A listed entry that is gone is counted and named; the others are changed.
    let list = list_with_a_missing_entry(tmp.path(), &b, &["f644", "d/f640"]);
    let mut options = mfu::chmod::Options::new(Vec::new());
    options.input = mfu::Input::file(path(&list).as_bytes());
    options.mode = Some("600".into());
    let reports = steal::local::run(2, |comm| mfu::chmod::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!((r.changed, r.unchanged, r.failed), (2, 0, 1));
        assert_eq!(
            mfu::prelude::ToolReport::status(r),
            mfu::Status::ItemsFailed
        );
    }
    let failures: Vec<&String> = reports.iter().flat_map(|r| &r.failures).collect();
    assert!(
        failures
            .iter()
            .any(|f| f.contains(&format!("{}/missing", path(&b)))),
        "{failures:?}"
    );
    // A usage error is an error on every rank, and nothing changes.
    let mut bad = mfu::chmod::Options::new(vec![path(&b).as_bytes().to_vec()]);
    bad.mode = Some("u+q".into());
    let before = snapshot(&b);
    for r in steal::local::run(2, |comm| mfu::chmod::run(comm, &bad)) {
        assert_eq!(r.unwrap_err().message, "invalid mode: 'u+q'");
    }
    assert_eq!(snapshot(&b), before);
}

/// The numbers of `Changed N items (U unchanged, F failed) in ...`.
fn text_counts(stdout: &[u8]) -> (u64, u64, u64) {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("Changed "))
        .unwrap_or_else(|| panic!("no summary in {text:?}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .take(3)
        .map(|w| w.parse().unwrap())
        .collect();
    (n[0], n[1], n[2])
}

#[test]
fn json_report_has_the_text_summary_counts() {
    let (tmp, a, b) = twin_trees();
    for (code, lists) in [(0, false), (1, true)] {
        let target = |t: &Path| {
            if lists {
                let dir = tmp
                    .path()
                    .join(t.file_name().unwrap().to_str().unwrap().to_owned() + "-l");
                fs::create_dir_all(&dir).unwrap();
                vec![
                    "-i".to_string(),
                    path(&list_with_a_missing_entry(&dir, t, &["f644", "sg"])).to_string(),
                ]
            } else {
                vec![path(t).to_string()]
            }
        };
        let mode = if lists { "o+w" } else { "g=u" };
        let mut text_args = vec!["chmod".to_string(), "-m".into(), mode.into()];
        text_args.extend(target(&a));
        let mut json_args = vec![
            "chmod".to_string(),
            "--json".into(),
            "-m".into(),
            mode.into(),
        ];
        json_args.extend(target(&b));
        let text = expect_status(mfu(&[]).args(&text_args), code);
        let json = expect_status(mfu(&[]).args(&json_args), code);
        let (changed, _unchanged, failed) = text_counts(&text.stdout);
        let v: serde_json::Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json.stdout)));
        assert_eq!(v["tool"], "chmod");
        assert_eq!(v["status"], code);
        assert_eq!(v["items"], changed);
        assert_eq!(v["bytes"], 0);
        assert_eq!(v["failed"], failed);
        assert_eq!(v["changed"], changed);
        assert_eq!(failed, u64::from(lists));
        assert!(changed > 0);
        assert_eq!(snapshot(&a), snapshot(&b));
    }
}

/// A SIGTERM in the middle of a chmod (each work item slowed): exit 1 and the stop line (X of
/// the 489 entries selected, X below that); the same chmod run again changes the rest.
#[test]
fn a_stopped_chmod_says_how_far_it_got_and_a_rerun_finishes() {
    use rustix::process::Signal;
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path().join("top");
    let mut files = Vec::new();
    for d in 0..8 {
        let sub = top.join(format!("d {d}"));
        fs::create_dir_all(&sub).unwrap();
        for f in 0..60 {
            let p = sub.join(format!("f{f}"));
            fs::write(&p, b"").unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o666)).unwrap();
            files.push(p);
        }
    }
    let changed = |p: &PathBuf| fs::metadata(p).unwrap().mode() & 0o777 == 0o600;
    let mut cmd = mfu(&["chmod", "-m", "go-rwx"]);
    cmd.arg(&top).env("MFU_RS_TEST_ITEM_DELAY_MS", "400");
    let out = mfu_tests::signal_when(&mut cmd, Signal::TERM, || files.iter().any(changed));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let at = err
        .find("stopped after ")
        .unwrap_or_else(|| panic!("{err}"));
    let words: Vec<&str> = err[at..].split_whitespace().collect();
    assert_eq!(
        (words[3], words[4], words[5]),
        ("of", "489", "entries"),
        "{err}"
    );
    let done: u64 = words[2].parse().unwrap();
    assert!(done < 489, "{err}");
    assert!(!files.iter().all(changed), "not everything changed");
    expect_status(mfu(&["chmod", "-q", "-m", "go-rwx"]).arg(&top), 0);
    assert!(files.iter().all(changed));
}
