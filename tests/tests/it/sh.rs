//! `mfu-rs sh` end to end: scripted sessions (`-c` and stdin) on a generated tree at one rank
//! and under mpirun -np 2: ls, cd, pwd, du, find, stat, sort, rm with its confirmation
//! answered, write; failed commands named with the session going on.

use mfu_tests::Tool;
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `root/a/{f1,f2,f3}.tmp` (1000, 2000, 3000 bytes), `root/a/b/big.dat` (5000),
/// `root/c/x.txt` (3), `root/c/odd 'name\xff.tmp` (7).
fn tree(root: &Path) {
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::create_dir_all(root.join("c")).unwrap();
    for i in 1..=3 {
        fs::write(root.join(format!("a/f{i}.tmp")), vec![b'x'; i * 1000]).unwrap();
    }
    fs::write(root.join("a/b/big.dat"), vec![0; 5000]).unwrap();
    fs::write(root.join("c/x.txt"), b"hi\n").unwrap();
    let odd = root.join(std::ffi::OsStr::from_bytes(b"c/odd 'name\xff.tmp"));
    fs::write(odd, b"1234567").unwrap();
}

fn setups() -> [(&'static str, Tool); 2] {
    [("np1", Tool::new("sh")), ("np2", Tool::new("sh").mpi(2))]
}

#[test]
fn a_scripted_session_answers_from_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let r = root.display().to_string();
    for (name, tool) in setups() {
        let out = tool
            .arg(&root)
            .arg("-c")
            .arg("pwd; ls; cd a; pwd; ls -l; sort -size; ls; cd b; cd ..; du ..; cd; stat c/x.txt")
            .expect(0);
        let text = out.stdout_str();
        let mut lines = text.lines();
        let mut next = || lines.next().unwrap_or_default().to_string();
        assert_eq!(next(), r, "{name}: pwd\n{text}");
        assert_eq!([next(), next()], ["a/", "c/"], "{name}: ls\n{text}");
        assert_eq!(next(), format!("{r}/a"), "{name}: cd a\n{text}");
        let long: Vec<String> = (0..4).map(|_| next()).collect();
        assert!(
            long[0].starts_with('d') && long[0].ends_with(" b/"),
            "{name}: {long:?}"
        );
        assert!(
            long[3].starts_with("-rw")
                && long[3].contains(" 3000 ")
                && long[3].ends_with(" f3.tmp"),
            "{name}: {long:?}"
        );
        // sort -size: the directory's own size first (a dir is 4096 bytes on ext4 and tmpfs
        // varies), so only the files' order is checked.
        let sorted: Vec<String> = (0..4)
            .map(|_| next())
            .filter(|l| l.ends_with(".tmp"))
            .collect();
        assert_eq!(sorted, ["f3.tmp", "f2.tmp", "f1.tmp"], "{name}\n{text}");
        // du ..: a/ holds 11000 bytes in 6 entries (itself included), c/ 10 bytes in 3;
        // biggest first.
        let du: Vec<Vec<String>> = (0..3)
            .map(|_| next().split_whitespace().map(String::from).collect())
            .collect();
        assert_eq!(du[0][2..], ["11000", "6", "a/"], "{name}\n{text}");
        assert_eq!(du[1][2..], ["10", "3", "c/"], "{name}\n{text}");
        assert_eq!(du[2][2..], ["11010", "9", "total"], "{name}\n{text}");
        assert_eq!(next(), format!("  File: {r}/c/x.txt"), "{name}\n{text}");
        assert!(text.contains("  Size: 3\n"), "{name}\n{text}");
    }
}

#[test]
fn rm_removes_exactly_what_find_selected_after_confirmation() {
    for (name, tool) in setups() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        tree(&root);
        let before = mfu_tests::listing(&root);
        // Commands from stdin; the first rm is declined, the second confirmed.
        let script = "find --name '*.tmp' --not --name 'f1*'\nrm\nno\nls a\nrm\ny\n";
        let out = tool.arg(&root).stdin(script).expect(0);
        let text = out.stdout_str();
        let found: Vec<&str> = text.lines().take(3).collect();
        let r = root.display().to_string();
        assert_eq!(
            found,
            [
                format!("{r}/a/f2.tmp"),
                format!("{r}/a/f3.tmp"),
                format!("{r}/c/odd 'name\u{fffd}.tmp")
            ],
            "{name}\n{text}"
        );
        let err = out.stderr_str();
        assert!(
            err.contains("rm: remove 3 entries (") && err.contains(", 5007 bytes)? [y/N] no"),
            "{name}: {err}"
        );
        assert!(text.contains("rm: nothing removed\n"), "{name}\n{text}");
        // ls after the declined rm still shows the files.
        assert!(text.contains("f2.tmp\nf3.tmp\n"), "{name}\n{text}");
        assert!(
            text.contains("Removed 3 entries (3 files, 0 directories)"),
            "{name}\n{text}"
        );
        let gone: BTreeSet<Vec<u8>> = before
            .difference(&mfu_tests::listing(&root))
            .cloned()
            .collect();
        let want: BTreeSet<Vec<u8>> = [&b"a/f2.tmp"[..], b"a/f3.tmp", b"c/odd 'name\xff.tmp"]
            .iter()
            .map(|p| p.to_vec())
            .collect();
        assert_eq!(gone, want, "{name}");
    }
}

#[test]
fn rm_of_paths_write_and_failures() {
    for (name, tool) in setups() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        tree(&root);
        let list = dir.path().join("left.txt");
        let script = format!(
            "rm -f a/b; bogus; cd nowhere; find --bogus; cd c; find --type f; write {}; cd ..; ls a",
            list.display()
        );
        let out = tool.arg(&root).arg("-c").arg(&script).expect(1);
        let (text, err) = (out.stdout_str(), out.stderr_str());
        assert!(
            text.contains("Removed 2 entries (1 files, 1 directories)"),
            "{name}\n{text}"
        );
        assert!(
            !root.join("a/b").exists() && root.join("a/f1.tmp").exists(),
            "{name}"
        );
        assert!(err.contains("bogus: unknown command"), "{name}: {err}");
        assert!(
            err.contains("cd ") && err.contains("/nowhere: no such directory in the list"),
            "{name}: {err}"
        );
        assert!(
            err.contains("find: unexpected argument '--bogus'"),
            "{name}: {err}"
        );
        // The session went on: the list written holds what find selected in c/.
        assert!(text.contains("Wrote 2 entries to "), "{name}\n{text}");
        assert!(text.ends_with("f1.tmp\nf2.tmp\nf3.tmp\n"), "{name}\n{text}");
        let written = Tool::new("walk")
            .args(["-i"])
            .arg(&list)
            .args(["--print", "-q"])
            .run();
        let w = written.stdout_str();
        assert!(
            w.contains("/c/x.txt") && w.contains("/c/odd") && !w.contains("/a/"),
            "{name}: {w}"
        );
    }
}

/// A session in a real terminal (tmux): the prompt, a line recalled from the history with the
/// Up arrow, and rm's confirmation answered at the keyboard.
#[test]
fn a_terminal_session_has_a_prompt_history_and_a_confirmation() {
    use std::process::Command;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let session = format!("mfu-sh-test-{}", std::process::id());
    let status = dir.path().join("status");
    let shell_line = format!(
        "{} sh '{}'; echo $? > '{}'",
        mfu_tests::shell_quote(&mfu_tests::bin()),
        root.display(),
        status.display()
    );
    let tmux = |args: &[&str]| {
        let out = Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux (cargo xtask setup installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "150",
        "-y",
        "50",
        &shell_line,
    ]);
    let screen = || tmux(&["capture-pane", "-p", "-t", &session]);
    // Wait for `want` on the screen (the load and each command take their time under load).
    let wait_for = |want: &str| {
        let start = Instant::now();
        loop {
            let s = screen();
            if s.contains(want) {
                return s;
            }
            if start.elapsed() > Duration::from_secs(60) {
                tmux(&["kill-session", "-t", &session]);
                panic!("not on the screen after 60 s: {want:?}\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let keys = |k: &[&str]| {
        let mut args = vec!["send-keys", "-t", &session];
        args.extend_from_slice(k);
        tmux(&args);
    };
    let r = root.display().to_string();
    // (capture-pane drops the spaces that end a line.)
    wait_for(&format!("mfu-rs sh:{r}>"));
    keys(&["cd a", "Enter"]);
    wait_for(&format!("mfu-rs sh:{r}/a>"));
    keys(&["cd ..", "Enter"]);
    wait_for(&format!("mfu-rs sh:{r}/a> cd ..\nmfu-rs sh:{r}>"));
    // Up Up: `cd a` again, from the history.
    keys(&["Up", "Up", "Enter"]);
    wait_for(&format!("mfu-rs sh:{r}> cd a\nmfu-rs sh:{r}/a>\n"));
    keys(&["find --name f1.tmp", "Enter"]);
    wait_for(&format!("{r}/a/f1.tmp\n"));
    keys(&["rm", "Enter"]);
    wait_for("rm: remove 1 entry (1000 B, 1000 bytes)? [y/N]");
    keys(&["y", "Enter"]);
    wait_for("Removed 1 entry (1 files, 0 directories)");
    keys(&["quit", "Enter"]);
    let start = Instant::now();
    while !status.exists() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux(&["kill-session", "-t", &session]);
    assert_eq!(fs::read_to_string(&status).unwrap_or_default().trim(), "0");
    assert!(!root.join("a/f1.tmp").exists() && root.join("a/f2.tmp").exists());
}

#[test]
fn rm_of_a_directory_that_gained_entries_says_so_and_exits_1() {
    for (name, tool) in setups() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        tree(&root);
        // The list is loaded, then a file appears under a/b.
        let list = dir.path().join("list.mfu");
        Tool::new("walk").arg("-o").arg(&list).arg(&root).expect(0);
        fs::write(root.join("a/b/new.txt"), b"keep me").unwrap();
        let out = tool
            .arg("-i")
            .arg(&list)
            .args(["-c", &format!("rm {}/a; y", root.display())])
            .expect(1);
        let (text, err) = (out.stdout_str(), out.stderr_str());
        let b = root.join("a/b").display().to_string();
        assert!(
            err.contains(&format!("rmdir {b}: Directory not empty")),
            "{name}: {err}"
        );
        assert!(
            err.contains(
                "rm: 1 entry could not be removed (named above), nor the directory that holds them"
            ),
            "{name}: {err}"
        );
        assert!(err.contains("rm: remove 6 entries ("), "{name}: {err}");
        assert!(
            text.contains("Removed 4 entries (4 files, 0 directories)\n") && !text.contains("Kept"),
            "{name}\n{text}"
        );
        assert_eq!(fs::read(root.join("a/b/new.txt")).unwrap(), b"keep me");
        assert!(!root.join("a/f1.tmp").exists() && !root.join("a/b/big.dat").exists());
    }
}

#[test]
fn rm_refuses_dot_and_dotdot() {
    for (name, tool) in setups() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        tree(&root);
        let before = mfu_tests::listing(&root);
        let out = tool
            .arg(&root)
            .args([
                "-y",
                "-c",
                "cd a; rm .; rm b/..; rm ..; rm ../; rm -f f1.tmp ..",
            ])
            .expect(1);
        let err = out.stderr_str();
        assert_eq!(
            err.matches("refusing to remove '.' or '..'").count(),
            5,
            "{name}: {err}"
        );
        assert!(
            !out.stdout_str().contains("Removed"),
            "{name}: {}",
            out.stdout_str()
        );
        // An empty name is no name (it would resolve to the current directory).
        let out = Tool::new("sh")
            .arg(&root)
            .args(["-y", "-c", "cd a; rm ''"])
            .expect(1);
        assert!(
            out.stderr_str()
                .contains("rm '': No such file or directory"),
            "{}",
            out.stderr_str()
        );
        assert_eq!(
            mfu_tests::listing(&root),
            before,
            "{name}: something was removed"
        );
    }
}

#[test]
fn rm_of_one_entry_says_1_entry() {
    for (name, tool) in setups() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        tree(&root);
        let out = tool.arg(&root).args(["-c", "rm c/x.txt; y"]).expect(0);
        let (text, err) = (out.stdout_str(), out.stderr_str());
        assert!(
            err.contains("rm: remove 1 entry (3 B, 3 bytes)? [y/N]"),
            "{name}: {err}"
        );
        assert!(
            text.contains("Removed 1 entry (1 files, 0 directories)"),
            "{name}: {text}"
        );
        assert!(!root.join("c/x.txt").exists());
    }
}

#[test]
fn rm_of_a_find_selection_whose_directory_gained_entries_says_so_and_exits_1() {
    // The selection of `find` under `a` holds every listed entry beneath a and a/b; a file
    // appears under a/b after loading. Those directories were asked to go and are not empty
    // because of an entry nobody listed: "Directory not empty", exit 1, as with PATHs. A
    // directory kept for a listed entry the selection left out (c, whose x.txt is not
    // selected) stays quietly, as before.
    for (name, tool) in setups() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        tree(&root);
        let list = dir.path().join("list.mfu");
        Tool::new("walk").arg("-o").arg(&list).arg(&root).expect(0);
        fs::write(root.join("a/b/new.txt"), b"keep me").unwrap();
        let r = root.display();
        let script = format!("cd {r}/a; find; rm; y; cd {r}/c; find --not --name x.txt; rm; y");
        let out = tool.arg("-i").arg(&list).args(["-c", &script]).expect(1);
        let (text, err) = (out.stdout_str(), out.stderr_str());
        let b = root.join("a/b").display().to_string();
        assert!(
            err.contains(&format!("rmdir {b}: Directory not empty")),
            "{name}: {err}"
        );
        assert!(
            err.contains(
                "rm: 1 entry could not be removed (named above), nor the directory that holds them"
            ),
            "{name}: {err}"
        );
        assert!(
            text.contains("Removed 4 entries (4 files, 0 directories)\n"),
            "{name}\n{text}"
        );
        assert_eq!(fs::read(root.join("a/b/new.txt")).unwrap(), b"keep me");
        assert!(!root.join("a/f1.tmp").exists() && !root.join("a/b/big.dat").exists());
        assert!(
            text.contains("Kept 1 directory that still holds entries not selected\n"),
            "{name}\n{text}"
        );
        assert!(root.join("c/x.txt").exists(), "{name}");
        assert!(!root
            .join(std::ffi::OsStr::from_bytes(b"c/odd 'name\xff.tmp"))
            .exists());
    }
}
