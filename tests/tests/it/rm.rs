//! `mfu-rs rm` end to end: whole trees (odd names, paths beyond PATH_MAX) at 1, 2 and 4 ranks,
//! filters, dry runs, aggressive mode, traceless mode, lists in and out, and exit statuses.

use flist::{io, FileList};
use mfu_tests::{bin, clean_env, expect_status, mfu, mpirun};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

/// Build at `root`: 4 directories of 10 files, a directory and a file with non-UTF-8 names, a
/// dangling link, a fifo and a chain of 30 directories of 200-byte names (about 6 KB of path,
/// beyond PATH_MAX) ending in a file. Returns (non-directories, directories), root included.
fn odd_tree(root: &Path) -> (u64, u64) {
    // Python's dir_fd calls reach depths that std::fs (whole paths only) cannot.
    let script = "import os, sys\n\
         root = sys.argv[1].encode()\n\
         os.mkdir(root)\n\
         for d in range(4):\n\
         \x20   os.mkdir(b'%s/d%d' % (root, d))\n\
         \x20   for f in range(10):\n\
         \x20       open(b'%s/d%d/f%d' % (root, d, f), 'wb').write(b'x' * f)\n\
         os.mkdir(root + b'/caf\\xe9')\n\
         open(root + b'/caf\\xe9/n\\xff|F', 'wb').close()\n\
         os.symlink(b'nowhere', root + b'/link')\n\
         os.mkfifo(root + b'/fifo')\n\
         fd = os.open(root, os.O_RDONLY)\n\
         for i in range(31):\n\
         \x20   n = b'deep' if i == 0 else ((b'd%02d' % i) * 70)[:200]\n\
         \x20   os.mkdir(n, dir_fd=fd)\n\
         \x20   fd = os.open(n, os.O_RDONLY, dir_fd=fd)\n\
         os.close(os.open('leaf', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))\n";
    expect_status(
        Command::new("python3")
            .args(["-c", script])
            .arg(root.as_os_str()),
        0,
    );
    (40 + 1 + 1 + 1 + 1, 1 + 4 + 1 + 31)
}

/// A tree of short paths from relative names; names ending in `/` are directories.
fn make(root: &Path, names: &[&str]) {
    fs::create_dir(root).unwrap();
    for n in names {
        match n.strip_suffix('/') {
            Some(d) => fs::create_dir_all(root.join(d)).unwrap(),
            None => fs::write(root.join(n), n.as_bytes()).unwrap(),
        }
    }
}

fn set(names: &[&str]) -> BTreeSet<Vec<u8>> {
    names
        .iter()
        .map(|n| n.trim_end_matches('/').as_bytes().to_vec())
        .collect()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn read_list(path: &Path) -> FileList {
    steal::local::run(1, |c| {
        io::read(c, path.as_os_str().as_bytes()).expect("read list")
    })
    .remove(0)
}

/// The names a filter test starts from.
const FILTER_TREE: &[&str] = &[
    "a.log",
    "a.txt",
    "sub/",
    "sub/b.log",
    "sub/b.txt",
    "sub/deeper/",
    "sub/deeper/c.log",
    "keep/",
    "keep/k.log",
    "keep/inner/",
    "keep/inner/k2.txt",
    "tmpdir/",
    "tmpdir/x",
    "tmp1",
    "sub/tmp2",
];

#[test]
fn removes_whole_trees_with_odd_names_and_long_paths_at_1_2_and_4_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    for np in [1, 2, 4] {
        let root = tmp.path().join(format!("tree{np}"));
        let (files, dirs) = odd_tree(&root);
        let mut cmd = if np == 1 {
            mfu(&["rm"])
        } else {
            let mut c = mpirun(np, &bin());
            c.arg("rm");
            c
        };
        let out = expect_status(cmd.arg(&root), 0);
        assert!(
            fs::symlink_metadata(&root).is_err(),
            "np={np}: {} still exists",
            root.display()
        );
        let text = stdout(&out);
        let want = format!(
            "Removed {} items ({files} files, {dirs} directories) in ",
            files + dirs
        );
        assert!(text.contains(&want), "np={np}: want {want:?} in:\n{text}");
        assert!(text.contains(" items/s)"), "np={np}: {text}");
        assert!(stderr(&out).is_empty(), "np={np}: {}", stderr(&out));
    }
}

#[test]
fn match_removes_exactly_the_matching_subset() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    make(&root, FILTER_TREE);
    let before = mfu_tests::listing(&root);
    let out = expect_status(mfu(&["rm", "--match", r"\.log$"]).arg(&root), 0);
    let gone = set(&["a.log", "sub/b.log", "sub/deeper/c.log", "keep/k.log"]);
    let want: BTreeSet<_> = before.difference(&gone).cloned().collect();
    assert_eq!(mfu_tests::listing(&root), want);
    assert!(
        stdout(&out).contains("Removed 4 items (4 files, 0 directories)"),
        "{}",
        stdout(&out)
    );
    // A matching directory goes with everything below it (their paths match too), at 2 ranks.
    expect_status(
        mpirun(2, &bin())
            .args(["rm", "-q", "--match", "^sub(/|$)"])
            .arg(&root),
        0,
    );
    let gone: BTreeSet<_> = want
        .iter()
        .filter(|p| p.starts_with(b"sub"))
        .cloned()
        .collect();
    assert_eq!(gone.len(), 4, "sub, sub/b.txt, sub/deeper, sub/tmp2");
    let want: BTreeSet<_> = want.difference(&gone).cloned().collect();
    assert_eq!(mfu_tests::listing(&root), want);
}

#[test]
fn exclude_keeps_exactly_the_excluded_entries_and_their_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    make(&root, FILTER_TREE);
    let out = expect_status(
        mpirun(2, &bin())
            .args(["rm", "--exclude", "^keep(/|$)"])
            .arg(&root),
        0,
    );
    assert_eq!(
        mfu_tests::listing(&root),
        set(&["keep/", "keep/k.log", "keep/inner/", "keep/inner/k2.txt"])
    );
    let text = stdout(&out);
    // Removed: a.log a.txt tmp1 tmpdir/x sub/{b.log,b.txt,tmp2,deeper/c.log} + tmpdir sub sub/deeper.
    assert!(
        text.contains("Removed 11 items (8 files, 3 directories)"),
        "{text}"
    );
    assert!(
        text.contains("Kept 1 directories that hold entries not selected"),
        "the root holds keep/: {text}"
    );
    assert!(
        stderr(&out).is_empty(),
        "kept directories are no failure: {}",
        stderr(&out)
    );
}

#[test]
fn name_applies_the_regex_to_the_last_component() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    make(&root, FILTER_TREE);
    let before = mfu_tests::listing(&root);
    // tmpdir matches but holds x, which does not: it stays, counted as kept.
    let out = expect_status(mfu(&["rm", "--name", "--match", "^tmp"]).arg(&root), 0);
    let want: BTreeSet<_> = before
        .difference(&set(&["tmp1", "sub/tmp2"]))
        .cloned()
        .collect();
    assert_eq!(mfu_tests::listing(&root), want);
    assert!(
        stdout(&out).contains("Kept 1 directories"),
        "{}",
        stdout(&out)
    );
    // Without --name the regex sees the path relative to PATH: tmpdir and tmpdir/x match
    // (but not sub/tmp2, gone already, nor the root, whatever its absolute path holds).
    expect_status(mfu(&["rm", "-q", "--match", "^tmp"]).arg(&root), 0);
    let want: BTreeSet<_> = want
        .difference(&set(&["tmpdir/", "tmpdir/x"]))
        .cloned()
        .collect();
    assert_eq!(mfu_tests::listing(&root), want);
    // --name with --exclude: everything goes except names starting with k (and their parents).
    expect_status(
        mfu(&["rm", "-q", "--name", "--exclude", "^k"]).arg(&root),
        0,
    );
    assert_eq!(
        mfu_tests::listing(&root),
        set(&["keep/", "keep/k.log", "keep/inner/", "keep/inner/k2.txt"]),
        "keep/inner matches no ^k but holds k2.txt"
    );
}

#[test]
fn dryrun_prints_exactly_what_would_go_and_removes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    make(&root, FILTER_TREE);
    fs::write(root.join(OsStr::from_bytes(b"caf\xe9")), b"").unwrap();
    let before = mfu_tests::listing(&root);
    let prefix = [root.as_os_str().as_bytes(), b"/"].concat();
    let printed = |out: &Output| -> BTreeSet<Vec<u8>> {
        out.stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                l.strip_prefix(prefix.as_slice())
                    .unwrap_or_else(|| panic!("{} is outside the tree", String::from_utf8_lossy(l)))
                    .to_vec()
            })
            .collect()
    };
    for np in [1, 3] {
        let out = expect_status(
            mpirun(np, &bin())
                .args(["rm", "-q", "--dryrun"])
                .arg(root.join("sub"))
                .arg(root.join(OsStr::from_bytes(b"caf\xe9"))),
            0,
        );
        let lines = out
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        let want: BTreeSet<_> = before
            .iter()
            .filter(|p| p.starts_with(b"sub") || p.as_slice() == b"caf\xe9")
            .cloned()
            .collect();
        assert_eq!(printed(&out), want, "np={np}");
        assert_eq!(lines, want.len(), "np={np}: each path once");
        assert_eq!(
            mfu_tests::listing(&root),
            before,
            "np={np}: a dry run changed the tree"
        );
    }
    // With a filter, directories that would keep unselected entries are not listed.
    let out = expect_status(
        mfu(&["rm", "--dryrun", "--exclude", "^keep(/|$)"]).arg(&root),
        0,
    );
    let text = stdout(&out);
    assert!(
        text.contains("Would remove 12 items (9 files, 3 directories)"),
        "{text}"
    );
    assert!(text.contains("Would keep 1 directories"), "{text}");
    let paths: BTreeSet<Vec<u8>> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"/"))
        .map(|l| l.to_vec())
        .collect();
    assert!(
        !paths.contains(root.as_os_str().as_bytes()),
        "the root stays"
    );
    assert_eq!(paths.len(), 12);
    assert_eq!(mfu_tests::listing(&root), before);
}

#[test]
fn aggressive_removes_trees_and_respects_filters() {
    let tmp = tempfile::tempdir().unwrap();
    for np in [1, 2] {
        let root = tmp.path().join(format!("odd{np}"));
        let (files, dirs) = odd_tree(&root);
        let mut cmd = mpirun(np, &bin());
        let out = expect_status(cmd.args(["rm", "--aggressive"]).arg(&root), 0);
        assert!(fs::symlink_metadata(&root).is_err(), "np={np}");
        assert!(
            stdout(&out).contains(&format!("({files} files, {dirs} directories)")),
            "np={np}: {}",
            stdout(&out)
        );
    }
    let root = tmp.path().join("t");
    make(&root, FILTER_TREE);
    let before = mfu_tests::listing(&root);
    let list = tmp.path().join("removed.txt");
    expect_status(
        mfu(&[
            "rm",
            "-q",
            "--aggressive",
            "--exclude",
            "^keep(/|$)",
            "--match",
            r"\.(log|txt)$",
            "-o",
        ])
        .arg(&list)
        .arg(&root),
        0,
    );
    let gone = set(&[
        "a.log",
        "a.txt",
        "sub/b.log",
        "sub/b.txt",
        "sub/deeper/c.log",
    ]);
    let want: BTreeSet<_> = before.difference(&gone).cloned().collect();
    assert_eq!(mfu_tests::listing(&root), want);
    let removed: BTreeSet<Vec<u8>> = read_list(&list)
        .iter()
        .map(|e| e.path[root.as_os_str().len() + 1..].to_vec())
        .collect();
    assert_eq!(removed, gone, "-o lists what the walk unlinked");
}

/// Set a directory's atime and mtime (whole seconds in the past).
fn age(dir: &Path, atime: SystemTime, mtime: SystemTime) {
    let times = fs::FileTimes::new().set_accessed(atime).set_modified(mtime);
    fs::File::open(dir).unwrap().set_times(times).unwrap();
}

#[test]
fn traceless_restores_the_parents_times() {
    let tmp = tempfile::tempdir().unwrap();
    let atime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_400_000_000);
    for (flags, restored) in [
        (&["rm", "-q"][..], false),
        (&["rm", "-q", "-T"][..], true),
        (&["rm", "-q", "-T", "--aggressive"][..], true),
        (&["rm", "-q", "--traceless", "--match", "(^|/)b$"][..], true),
    ] {
        let parent = tmp.path().join("p");
        make(
            &parent,
            &["victim/", "victim/a", "victim/sub/", "victim/sub/b", "stay"],
        );
        age(&parent, atime, mtime);
        age(&parent.join("victim/sub"), atime, mtime);
        age(&parent.join("victim"), atime, mtime);
        expect_status(mpirun(2, &bin()).args(flags).arg(parent.join("victim")), 0);
        let m = fs::metadata(&parent).unwrap();
        let filtered = flags.contains(&"--match");
        if filtered {
            // Only victim/sub/b went: victim/sub's times are back, victim kept its own.
            assert!(!parent.join("victim/sub/b").exists());
            assert!(parent.join("victim/a").exists());
            let sub = fs::metadata(parent.join("victim/sub")).unwrap();
            assert_eq!(sub.modified().unwrap(), mtime);
            assert_eq!(sub.accessed().unwrap(), atime);
            assert_eq!(
                fs::metadata(parent.join("victim"))
                    .unwrap()
                    .modified()
                    .unwrap(),
                mtime
            );
        } else {
            assert!(!parent.join("victim").exists(), "{flags:?}");
        }
        if restored {
            assert_eq!(m.modified().unwrap(), mtime, "{flags:?}");
            assert_eq!(m.accessed().unwrap(), atime, "{flags:?}");
        } else {
            assert_ne!(
                m.modified().unwrap(),
                mtime,
                "without -T the parent's mtime moves"
            );
        }
        fs::remove_dir_all(&parent).unwrap();
    }
}

#[test]
fn output_lists_what_was_removed_readably_by_walk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    make(&root, FILTER_TREE);
    let before = mfu_tests::listing(&root);
    let text_list = tmp.path().join("removed.txt");
    expect_status(
        mpirun(2, &bin())
            .args(["rm", "-q", "--exclude", "^keep(/|$)", "-o"])
            .arg(&text_list)
            .arg(&root),
        0,
    );
    let after = mfu_tests::listing(&root);
    let list = read_list(&text_list);
    let removed: BTreeSet<Vec<u8>> = list
        .iter()
        .map(|e| e.path[root.as_os_str().len() + 1..].to_vec())
        .collect();
    assert_eq!(removed, before.difference(&after).cloned().collect());
    let out = expect_status(mfu(&["walk", "-i"]).arg(&text_list), 0);
    assert!(stdout(&out).contains("Items: 11"), "{}", stdout(&out));
    assert!(stdout(&out).contains("Directories: 3"), "{}", stdout(&out));

    // --stat writes a v4 list (with metadata); -t forces text.
    for (flags, v4) in [
        (&["--stat"][..], true),
        (&["--stat", "-t"][..], false),
        (&[][..], false),
    ] {
        let root = tmp.path().join("s");
        make(&root, &["x", "d/", "d/y"]);
        let out_list = tmp.path().join("s.list");
        expect_status(
            mfu(&["rm", "-q"])
                .args(flags)
                .arg("-o")
                .arg(&out_list)
                .arg(&root),
            0,
        );
        let bytes = fs::read(&out_list).unwrap();
        assert_eq!(bytes[..8] == 4u64.to_be_bytes(), v4, "{flags:?}");
        let out = expect_status(mfu(&["walk", "-i"]).arg(&out_list), 0);
        assert!(
            stdout(&out).contains("Items: 4"),
            "{flags:?}: {}",
            stdout(&out)
        );
    }
}

#[test]
fn input_lists_are_removed_without_walking() {
    let tmp = tempfile::tempdir().unwrap();
    // A v4 list from walk.
    let root = tmp.path().join("t");
    make(&root, FILTER_TREE);
    let list = tmp.path().join("t.mfu");
    expect_status(mfu(&["walk", "-q", "-o"]).arg(&list).arg(&root), 0);
    let out = expect_status(mpirun(2, &bin()).args(["rm", "-i"]).arg(&list), 0);
    assert!(!root.exists());
    assert!(
        stdout(&out).contains("Removed 16 items (10 files, 6 directories)"),
        "{}",
        stdout(&out)
    );
    // A plain list, one relative path per line, types unknown; a listed directory whose
    // contents the list does not name cannot go.
    make(&root, &["a", "b/", "b/c", "d/", "d/e"]);
    let plain = tmp.path().join("plain.txt");
    fs::write(&plain, b"t/a\nt/b/c\nt/b\nt/d\n").unwrap();
    let out = expect_status(mfu(&["rm", "-i"]).arg(&plain).current_dir(tmp.path()), 1);
    assert_eq!(mfu_tests::listing(&root), set(&["d/", "d/e"]));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("rmdir {}/d: Directory not empty", root.display())),
        "{err}"
    );
    // The same list under a filter: the directory that holds unnamed entries is kept.
    make(&tmp.path().join("u"), &["a", "d/", "d/e"]);
    fs::write(&plain, b"u/a\nu/d\n").unwrap();
    let out = expect_status(
        mfu(&["rm", "--exclude", "nothing-matches", "-i"])
            .arg(&plain)
            .current_dir(tmp.path()),
        0,
    );
    assert!(
        stdout(&out).contains("Kept 1 directories"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        mfu_tests::listing(&tmp.path().join("u")),
        set(&["d/", "d/e"])
    );
}

#[test]
fn slash_and_missing_paths_are_usage_errors_that_remove_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    make(&root, &["a", "d/", "d/b"]);
    let before = mfu_tests::listing(&root);
    let up = format!("{}/../../../../../../../../..", root.display());
    for slash in ["/", "//", "/.", "/..", "/tmp/..", up.as_str()] {
        let out = expect_status(mfu(&["rm"]).arg(&root).arg(slash), 2);
        assert!(
            stderr(&out).contains("refusing to remove"),
            "{}",
            stderr(&out)
        );
        assert_eq!(mfu_tests::listing(&root), before, "{slash}");
    }
    expect_status(mpirun(2, &bin()).args(["rm", "/"]), 2);
    expect_status(&mut mfu(&["rm"]), 2);
    expect_status(&mut mfu(&["rm", "-q"]), 2);
    expect_status(mfu(&["rm", ""]).arg(&root), 2);
    expect_status(mfu(&["rm", "--match", "("]).arg(&root), 2);
    expect_status(mfu(&["rm", "--aggressive", "--dryrun"]).arg(&root), 2);
    expect_status(&mut mfu(&["rm", "-i", "/nonexistent/list.mfu"]), 2);
    // A list naming / is refused as a whole.
    let list = tmp.path().join("l.txt");
    fs::write(&list, format!("{}/a\n//\n", root.display())).unwrap();
    expect_status(mfu(&["rm", "-i"]).arg(&list), 2);
    assert_eq!(mfu_tests::listing(&root), before);
}

#[test]
fn a_missing_path_is_reported_and_the_rest_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    make(&root, &["a", "d/", "d/b"]);
    let missing = tmp.path().join("no-such-thing");
    let out = expect_status(mpirun(2, &bin()).arg("rm").arg(&missing).arg(&root), 1);
    assert!(!root.exists());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "mfu-rs rm: stat {}: No such file or directory",
            missing.display()
        )),
        "{err}"
    );
}

/// `chattr -i` on drop, so a failing test leaves no immutable file behind.
struct Immutable(PathBuf);

impl Immutable {
    fn new(path: PathBuf) -> Immutable {
        let out = Command::new("chattr")
            .arg("+i")
            .arg(&path)
            .output()
            .expect("chattr is needed for this test (e2fsprogs), and must run as root");
        assert!(
            out.status.success(),
            "chattr +i {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Immutable(path)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

#[test]
fn a_file_that_cannot_be_removed_fails_with_status_1_and_one_message() {
    let tmp = tempfile::tempdir().unwrap();
    for (np, aggressive) in [(1, false), (2, false), (2, true)] {
        let root = tmp.path().join(format!("t{np}{aggressive}"));
        make(&root, &["d/", "d/stuck", "d/other", "e/", "e/f", "g"]);
        let _guard = Immutable::new(root.join("d/stuck"));
        let mut cmd = mpirun(np, &bin());
        cmd.arg("rm");
        if aggressive {
            cmd.arg("--aggressive");
        }
        let out = expect_status(cmd.arg(&root), 1);
        assert_eq!(
            mfu_tests::listing(&root),
            set(&["d/", "d/stuck"]),
            "np={np}"
        );
        let err = stderr(&out);
        let want = format!(
            "mfu-rs rm: unlink {}/d/stuck: Operation not permitted",
            root.display()
        );
        assert!(err.contains(&want), "np={np}: want {want:?} in:\n{err}");
        assert!(
            !err.contains("rmdir"),
            "the directories holding it are not errors of their own:\n{err}"
        );
        assert!(
            err.contains(
                "1 items could not be removed (listed above), nor the 2 directories that hold them"
            ),
            "{err}"
        );
        assert!(
            stdout(&out).contains("Removed 4 items (3 files, 1 directories)"),
            "np={np}: {}",
            stdout(&out)
        );
    }
}

#[test]
fn progress_lines_count_towards_a_total() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    fs::create_dir(&root).unwrap();
    for d in 0..30 {
        let dir = root.join(format!("d{d}"));
        fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            fs::write(dir.join(format!("f{f}")), b"").unwrap();
        }
    }
    let out = expect_status(
        mfu(&["--ranks", "2", "rm", "--progress", "0.0005"]).arg(&root),
        0,
    );
    assert!(!root.exists());
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("Removed ")).collect();
    assert!(!lines.is_empty(), "no progress line in:\n{err}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" of 3031 items (") && l.contains("items/s")),
        "{err}"
    );
}

#[test]
fn help_exits_zero_and_the_old_name_dispatches() {
    let out = expect_status(&mut mfu(&["rm", "--help"]), 0);
    for option in [
        "--input",
        "--output",
        "--text",
        "--lite",
        "--stat",
        "--exclude",
        "--match",
        "--name",
        "--dryrun",
        "--aggressive",
        "--traceless",
        "--one-file-system",
        "--progress",
    ] {
        assert!(stdout(&out).contains(option), "{option} missing from help");
    }
    expect_status(&mut mfu(&["drm", "--help"]), 0);
    let tmp = tempfile::tempdir().unwrap();
    let link = tmp.path().join("drm");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let root = tmp.path().join("t");
    make(&root, &["a", "d/", "d/b"]);
    let out = expect_status(clean_env(&mut Command::new(&link)).arg(&root), 0);
    assert!(!root.exists());
    assert!(stdout(&out).contains("Removed 4 items (2 files, 2 directories)"));
    make(&root, &["a"]);
    expect_status(mfu(&["drm", "-q"]).arg(&root), 0);
    assert!(!root.exists());
}

/// `--match` sees the path relative to PATH (or, with `-i`, to the list's topmost entries):
/// under /tmp, `--match tmp` selects what is named tmp below the root, not the whole tree
/// because every absolute path holds /tmp.
#[test]
fn match_is_relative_to_the_root_or_the_lists_top() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(tmp.path().to_str().unwrap().contains("tmp"));
    let root = tmp.path().join("t");
    let tree = ["a", "tmpfile", "d/", "d/x", "d/tmp/", "d/tmp/y"];
    let left = set(&["a", "d/", "d/x"]);
    make(&root, &tree);
    expect_status(mfu(&["rm", "-q", "--match", "tmp"]).arg(&root), 0);
    assert_eq!(mfu_tests::listing(&root), left);
    fs::remove_dir_all(&root).unwrap();
    make(&root, &tree);
    let list = tmp.path().join("list.mfu");
    expect_status(mfu(&["walk", "-q", "-o"]).arg(&list).arg(&root), 0);
    expect_status(
        mpirun(2, &bin())
            .args(["rm", "-q", "--match", "tmp", "-i"])
            .arg(&list),
        0,
    );
    assert_eq!(mfu_tests::listing(&root), left);
    // The root itself is matched as `.`.
    expect_status(mfu(&["rm", "-q", "--match", r"^\.$|^a$"]).arg(&root), 0);
    assert_eq!(
        mfu_tests::listing(&root),
        set(&["d/", "d/x"]),
        "the root holds d: kept"
    );
}

/// `--one-file-system`: a file system mounted below the root is named, not descended, and
/// stays with the directories above it (exit 1), as with GNU rm.
#[test]
fn one_file_system_skips_mount_points() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    make(&root, &["a", "d/", "d/mnt/", "d/b", "e/", "e/c"]);
    let mnt = root.join("d/mnt");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&mnt)
        .status()
        .expect("run mount");
    assert!(mounted.success(), "mount a tmpfs (the tests run as root)");
    /// Unmounts even when an assertion fails.
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    fs::write(mnt.join("precious"), b"keep").unwrap();
    for np in [1, 2] {
        let mut cmd = if np == 1 {
            mfu(&[])
        } else {
            mpirun(np, &bin())
        };
        let out = expect_status(cmd.args(["rm", "--one-file-system"]).arg(&root), 1);
        assert_eq!(fs::read(mnt.join("precious")).unwrap(), b"keep", "np {np}");
        assert!(
            stderr(&out).contains(&format!("{}: on another file system", mnt.display())),
            "np {np}: {}",
            stderr(&out)
        );
        assert_eq!(
            mfu_tests::listing(&root),
            set(&["d/", "d/mnt/", "d/mnt/precious"])
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The typed API and --json

/// `root` with a (file), d/b and d/c (files), k/keep.txt.
fn typed_tree(root: &Path) {
    fs::create_dir_all(root.join("d")).unwrap();
    fs::create_dir_all(root.join("k")).unwrap();
    for f in ["a", "d/b", "d/c", "k/keep.txt"] {
        fs::write(root.join(f), b"x").unwrap();
    }
}

#[test]
fn library_run_reports_counts_and_failures_on_every_rank() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::ToolReport;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    typed_tree(&root);
    let options = mfu::rm::Options::new(&[root.as_os_str().as_bytes()]);
    let reports = steal::local::run(2, |comm| mfu::rm::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!((r.files, r.dirs, r.failed), (4, 3, 0), "{r:?}");
        assert_eq!((r.summary().items, r.status() as i32), (7, 0), "{r:?}");
        assert!(r.failures.is_empty(), "{r:?}");
    }
    assert!(!root.exists());

    // A selection keeps what it does not select, and the directories holding it.
    typed_tree(&root);
    let mut options = mfu::rm::Options::new(&[root.as_os_str().as_bytes()]);
    options.exclude = Some("keep".into());
    let reports = steal::local::run(2, |comm| mfu::rm::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!(
            (r.files, r.dirs, r.kept, r.selective),
            (3, 1, 2, true),
            "{r:?}"
        );
    }
    assert!(root.join("k/keep.txt").exists() && !root.join("d").exists());

    // A list naming an entry that is not there: the rest goes, the entry is counted and named.
    let list = tmp.path().join("list.txt");
    fs::write(
        &list,
        format!(
            "{}\n{}\n",
            root.join("a").display(),
            root.join("missing").display()
        ),
    )
    .unwrap();
    fs::write(root.join("a"), b"x").unwrap();
    let options = mfu::rm::Options {
        input: mfu::Input::file(list.as_os_str().as_bytes()),
        ..Default::default()
    };
    let reports = steal::local::run(2, |comm| mfu::rm::run(comm, &options).unwrap());
    let messages: Vec<String> = reports.iter().flat_map(|r| r.failures.clone()).collect();
    for r in &reports {
        assert_eq!(
            (r.files, r.list_failed, r.status() as i32),
            (1, 1, 1),
            "{r:?}"
        );
        assert_eq!(r.summary().failed, 1);
    }
    assert!(
        messages.iter().any(|m| m.contains("/missing")),
        "{messages:?}"
    );
    assert!(!root.join("a").exists());

    // A usage error: the same on every rank, nothing removed.
    let options = mfu::rm::Options::new(&[b"/"]);
    let results = steal::local::run(2, |comm| mfu::rm::run(comm, &options).map(|_| ()));
    assert!(results.iter().all(|r| r.is_err()), "{results:?}");
}

#[test]
fn json_report_equals_the_text_summary() {
    for filter in [&[][..], &["--exclude", "keep"][..]] {
        let tmp = tempfile::tempdir().unwrap();
        let (t, j) = (tmp.path().join("t"), tmp.path().join("j"));
        typed_tree(&t);
        typed_tree(&j);
        let out = expect_status(mfu(&["rm"]).args(filter).arg(&t), 0);
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        let json = expect_status(mfu(&["rm", "--json"]).args(filter).arg(&j), 0);
        let v: serde_json::Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json.stdout)));
        assert_eq!(v["tool"], "rm");
        assert_eq!(v["status"], 0);
        let items: u64 = line
            .strip_prefix("Removed ")
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert_eq!(v["items"], items, "{line}");
        assert!(
            line.contains(&format!(
                "({} files, {} directories)",
                v["files"], v["dirs"]
            )),
            "{line}"
        );
        assert_eq!(
            (v["bytes"].as_u64(), v["failed"].as_u64()),
            (Some(0), Some(0))
        );
        if !filter.is_empty() {
            assert!(
                line.contains(&format!("Kept {} directories", v["kept"])),
                "{line}"
            );
        }
    }
}

/// `-o` inside a tree being removed would be removed with it (an earlier list) or have no
/// directory left to go in: refused before anything goes (exit 2, both paths named), found
/// through a symlink too; outside the tree, or with --dryrun, the list is written.
#[test]
fn an_output_list_inside_the_tree_being_removed_is_refused_with_nothing_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("r");
    make(&r, &["a/", "a/x", "y"]);
    std::os::unix::fs::symlink(r.join("a"), tmp.path().join("link")).unwrap();
    let listing = mfu_tests::listing(&r);
    for list in [r.join("a/list"), tmp.path().join("link/list")] {
        let out = expect_status(
            mfu(&["rm", "-o"])
                .arg(&list)
                .arg(&r)
                .current_dir(tmp.path()),
            2,
        );
        let err = stderr(&out);
        assert!(err.contains(&*list.to_string_lossy()), "{err}");
        assert!(err.contains("tree being removed"), "{err}");
        assert_eq!(mfu_tests::listing(&r), listing, "nothing removed");
    }
    let inside = r.join("list");
    expect_status(mfu(&["rm", "--dryrun", "-o"]).arg(&inside).arg(&r), 0);
    assert!(read_list(&inside).len() >= 4);
    let outside = tmp.path().join("list");
    expect_status(mfu(&["rm", "-o"]).arg(&outside).arg(&r), 0);
    assert!(!r.exists());
    assert!(read_list(&outside).len() >= 4);
}

#[test]
fn an_in_memory_list_is_removed_exactly_and_no_list_file_is_written() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::*;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    fs::create_dir_all(root.join("d")).unwrap();
    // Odd names: a newline and a `|T`-like end would be misread from a text list.
    let names: [&[u8]; 5] = [
        b"a.tmp",
        b"new\nline.tmp",
        b"pipe|F.tmp",
        b"d/keep",
        b"keep",
    ];
    for n in names {
        fs::write(root.join(OsStr::from_bytes(n)), b"x").unwrap();
    }
    let before: BTreeSet<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let reports = steal::local::run(2, |comm| {
        let walked = walk(comm, &[&root], &WalkOptions::default())
            .into_result()
            .unwrap();
        // This rank's part of the list: the .tmp files only.
        let mut chosen = walked.empty_like();
        for e in walked.iter().filter(|e| e.path.ends_with(b".tmp")) {
            chosen.push(e.path, e.kind, e.meta);
        }
        let options = mfu::rm::Options {
            input: Input::List(chosen),
            ..Default::default()
        };
        mfu::rm::run(comm, &options).unwrap()
    });
    for r in &reports {
        assert_eq!(
            (r.files, r.dirs, r.failed, r.list_failed),
            (3, 0, 0, 0),
            "{r:?}"
        );
    }
    let left: BTreeSet<Vec<u8>> = walk_names(&root);
    let expected: BTreeSet<Vec<u8>> = [&b""[..], b"d", b"d/keep", b"keep"]
        .iter()
        .map(|n| n.to_vec())
        .collect();
    assert_eq!(left, expected);
    // Nothing was written beside the tree (no temporary list).
    let after: BTreeSet<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(before, after);
}

/// The names under `root`, relative to it (`""` for the root itself).
fn walk_names(root: &Path) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let rel = dir
            .strip_prefix(root)
            .unwrap()
            .as_os_str()
            .as_bytes()
            .to_vec();
        out.insert(rel);
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(
                    p.strip_prefix(root)
                        .unwrap()
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                );
            }
        }
    }
    out
}

/// A SIGTERM in the middle of a removal (each work item slowed): exit 1 and the stop line (X
/// of the 489 entries selected, X below that); the same rm run again removes the rest.
#[test]
fn a_stopped_rm_says_how_far_it_got_and_a_rerun_finishes() {
    use rustix::process::Signal;
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path().join("top dir|x");
    for d in 0..8 {
        let sub = top.join(format!("d{d}"));
        fs::create_dir_all(&sub).unwrap();
        for f in 0..60 {
            fs::write(sub.join(format!("f{f}")), b"").unwrap();
        }
    }
    let mut cmd = mfu(&["rm"]);
    cmd.arg(&top).env("MFU_RS_TEST_ITEM_DELAY_MS", "250");
    let some_gone =
        || (0..8).any(|d| fs::read_dir(top.join(format!("d{d}"))).map_or(true, |r| r.count() < 60));
    let out = mfu_tests::signal_when(&mut cmd, Signal::TERM, some_gone);
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
    assert!(top.exists(), "not everything removed");
    expect_status(mfu(&["rm", "-q"]).arg(&top), 0);
    assert!(!top.exists());
}
