//! Checkpoints of `walk -o`, `find --exec` and `grep` (issue 33): a run killed (`kill -9` at a
//! known mark: MFU_RS_TEST_CHECKPOINT_DIE_AFTER) or stopped (a SIGTERM at a known mark:
//! MFU_RS_TEST_CHECKPOINT_STOP_AFTER; and a real one) continues when run again, at another rank
//! count too (one process, `--ranks 3`, `mpirun -np 2`), and ends with the result of an
//! uninterrupted run: the same list (sorted), each command run once, the same output. A changed
//! input starts over and says so; a forged or foreign checkpoint is not trusted.

use flist::{io, FileList};
use mfu_tests::{listing, Tool};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Marks reach the disk this often (ms) in these runs.
const INTERVAL: &str = "10";

/// The three ways of starting ranks the issue asks for, by name.
fn launch(name: &str, tool: &str) -> Tool {
    let t = Tool::new(tool).env("MFU_RS_CHECKPOINT_INTERVAL_MS", INTERVAL);
    match name {
        "np1" => t,
        "ranks3" => t.ranks(3),
        "mpi2" => t.mpi(2),
        _ => unreachable!("{name}"),
    }
}

/// Hostile names: spaces, a newline, `|`, a non-UTF-8 byte.
const NAMES: [&[u8]; 4] = [b"plain", b"with space", b"new\nline|bar", b"bin\xff"];

/// A tree of `dirs` directories (some nested) with a few files each, under `dir/tree`.
fn tree(dir: &Path, dirs: usize) -> PathBuf {
    let root = dir.join("tree");
    for d in 0..dirs {
        let sub = if d % 3 == 0 {
            root.join(format!("d{d}"))
        } else {
            root.join(format!("d{}", d - d % 3)).join(format!("s{d}"))
        };
        fs::create_dir_all(&sub).unwrap();
        for (i, n) in NAMES.iter().enumerate() {
            let name = [*n, format!("-{i}").as_bytes()].concat();
            let body = format!("line one\nneedle {d} {i}\nline three\n").repeat(1 + i);
            fs::write(sub.join(OsStr::from_bytes(&name)), body).unwrap();
        }
    }
    root
}

/// The records of a list: path, type letter, mode, size, mtime; sorted.
type Record = (Vec<u8>, u8, u32, u64, i64);

fn records(list: &Path) -> Vec<Record> {
    let list: FileList = steal::local::run(1, |c| {
        io::read(c, list.as_os_str().as_bytes()).expect("read list")
    })
    .remove(0);
    let mut v: Vec<Record> = list
        .iter()
        .map(|e| {
            let m = e.meta.unwrap_or_default();
            (
                e.path.to_vec(),
                e.kind.text_letter(),
                m.mode,
                m.size,
                m.mtime,
            )
        })
        .collect();
    v.sort();
    v
}

/// Both streams, for looking for a notice wherever the tool sends it.
fn said(r: &mfu_tests::Run) -> String {
    format!("{}{}", r.stdout_str(), r.stderr_str())
}

/// Files in `dir` and below, with their contents (to show that nothing was touched).
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for rel in listing(dir) {
        let p = dir.join(OsStr::from_bytes(&rel));
        if let Ok(b) = fs::read(&p) {
            out.insert(p, b);
        }
    }
    out
}

/// Overwrite every file of the checkpoint `ck` with garbage of the same size.
fn garble(ck: &Path) {
    for e in fs::read_dir(ck).unwrap() {
        let p = e.unwrap().path();
        let n = fs::metadata(&p).unwrap().len() as usize;
        fs::write(&p, vec![0xa5; n.max(16)]).unwrap();
    }
}

/// Start `tool`, wait until `ready()` (the work is under way: marks are on disk), send it a
/// real SIGTERM. `None` when it finished before: the caller makes the input bigger.
fn term_when(tool: &Tool, ready: impl Fn() -> bool) -> Option<std::process::Output> {
    let mut cmd = tool.command();
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = mfu_tests::spawn(&mut cmd);
    let start = Instant::now();
    while !ready() {
        if child.try_wait().unwrap().is_some() {
            let _ = child.wait_with_output();
            return None;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not ready after 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    Some(child.wait_with_output().unwrap())
}

/// The checkpoint holds a mark on disk (a log file with bytes).
fn has_marks(ck: &Path) -> bool {
    fs::read_dir(ck).is_ok_and(|d| {
        d.flatten().any(|e| {
            e.file_name().as_bytes().starts_with(b"log.") && e.metadata().is_ok_and(|m| m.len() > 0)
        })
    })
}

// ---------------------------------------------------------------------------------------- walk

fn walk_reference(tmp: &Path, root: &Path) -> Vec<Record> {
    let out = tmp.join("ref.mfu");
    Tool::new("walk")
        .args(["-q", "--no-checkpoint", "-o"])
        .arg(&out)
        .arg(root)
        .expect(0);
    records(&out)
}

#[test]
fn walk_o_continues_after_kill_9_and_stop_at_any_rank_count_with_the_list_of_an_uninterrupted_walk()
{
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 45);
    let want = walk_reference(tmp.path(), &root);
    // (first run, rerun that stops, run that completes): every one at another rank count.
    for (a, b, c) in [
        ("np1", "ranks3", "mpi2"),
        ("mpi2", "np1", "ranks3"),
        ("ranks3", "mpi2", "np1"),
    ] {
        let out = tmp.path().join(format!("out-{a}.mfu"));
        let ck = tmp.path().join(format!(".out-{a}.mfu.mfu-checkpoint"));
        let walk = |l: &str| launch(l, "walk").arg("-o").arg(&out).arg(&root);
        let killed = walk(a).env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "4").run();
        assert_ne!(killed.code(), Some(0), "{a}: killed\n{}", said(&killed));
        assert!(!out.exists(), "{a}: a killed walk writes no list");
        assert!(has_marks(&ck), "{a}: marks on disk at {}", ck.display());
        let stopped = walk(b)
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
            .expect(1);
        assert!(
            said(&stopped).contains("continuing from checkpoint"),
            "{b}\n{}",
            said(&stopped)
        );
        assert!(!out.exists(), "{b}: a stopped walk writes no list");
        assert!(ck.is_dir());
        let done = walk(c).expect(0);
        assert!(
            said(&done).contains("continuing from checkpoint"),
            "{c}\n{}",
            said(&done)
        );
        assert_eq!(
            records(&out),
            want,
            "{a} {b} {c}: the list of an uninterrupted walk"
        );
        assert!(!ck.exists(), "{c}: a complete walk removes its checkpoint");
    }
}

#[test]
fn walk_o_reads_again_directories_changed_since_they_were_marked_and_starts_over_on_other_options()
{
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 30);
    let out = tmp.path().join("out.mfu");
    let ck = tmp.path().join(".out.mfu.mfu-checkpoint");
    let walk = || launch("np1", "walk").arg("-o").arg(&out).arg(&root);
    walk()
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "12")
        .expect(1);
    assert!(has_marks(&ck));
    // A new file in every directory, one removed in some: the marked ones changed since (a
    // second later: the lists compare mtimes in seconds, and a subdirectory's record in its
    // unchanged parent's must show its new time).
    std::thread::sleep(Duration::from_millis(1100));
    for rel in listing(&root) {
        let p = root.join(OsStr::from_bytes(&rel));
        if p.is_dir() {
            fs::write(p.join("added later"), b"x").unwrap();
            let gone = p.join("plain-0");
            if rel.len() % 2 == 0 && gone.exists() {
                fs::remove_file(gone).unwrap();
            }
        }
    }
    let want = walk_reference(tmp.path(), &root);
    let done = walk().expect(0);
    assert!(
        said(&done).contains("continuing from checkpoint"),
        "{}",
        said(&done)
    );
    assert_eq!(records(&out), want, "changed directories were read again");
    // Another option (-L): the checkpoint is not used, the walk starts over and says why.
    walk()
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "5")
        .expect(1);
    let other = launch("ranks3", "walk")
        .args(["-L", "-o"])
        .arg(&out)
        .arg(&root)
        .expect(0);
    let text = said(&other);
    assert!(text.contains("not used (dereference changed)"), "{text}");
    assert!(text.contains("starting over"), "{text}");
    assert_eq!(records(&out), want, "no links: the same list");
    assert!(!ck.exists());
}

#[test]
fn walk_o_skips_its_checkpoint_inside_the_tree_and_trusts_no_forged_or_foreign_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 24);
    // The list and its checkpoint inside the tree walked: the checkpoint is not listed (the
    // list itself is written after the walk).
    let inner = root.join("d0").join("in tree.mfu");
    let inner_ck = root.join("d0").join(".in tree.mfu.mfu-checkpoint");
    let walk_inner = || launch("np1", "walk").arg("-o").arg(&inner).arg(&root);
    walk_inner()
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "6")
        .expect(1);
    assert!(has_marks(&inner_ck));
    launch("ranks3", "walk")
        .arg("-o")
        .arg(&inner)
        .arg(&root)
        .expect(0);
    let mut got = records(&inner);
    fs::remove_file(&inner).unwrap();
    let want_inner = walk_reference(tmp.path(), &root);
    // d0's mtime moved (the checkpoint came and went): compare without directory times.
    let strip = |v: Vec<Record>| -> Vec<(Vec<u8>, u8, u64)> {
        v.into_iter()
            .map(|(p, k, _, s, _)| (p, k, if k == b'd' { 0 } else { s }))
            .collect()
    };
    got.retain(|r| !r.0.ends_with(b"in tree.mfu"));
    assert_eq!(
        strip(got),
        strip(want_inner.clone()),
        "no record of the checkpoint"
    );
    // The walks below list d0 with the time the inner list and checkpoint left it (a list
    // taken before them was flaky: d0's mtime moved when a second boundary fell between).
    let want = want_inner;

    let out = tmp.path().join("out.mfu");
    let ck = tmp.path().join(".out.mfu.mfu-checkpoint");
    let walk = |l: &str| launch(l, "walk").arg("-o").arg(&out).arg(&root);
    // Garbage in every file of a stopped walk's checkpoint.
    walk("np1")
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "6")
        .expect(1);
    garble(&ck);
    let r = walk("mpi2").expect(0);
    assert!(!said(&r).contains("continuing"), "{}", said(&r));
    assert_eq!(records(&out), want);
    // A symbolic link at its name, to a valid checkpoint elsewhere: not followed, left alone.
    walk("np1")
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "6")
        .expect(1);
    let elsewhere = tmp.path().join("elsewhere");
    fs::rename(&ck, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &ck).unwrap();
    let before = contents(&elsewhere);
    let r = walk("ranks3").expect(0);
    assert!(!said(&r).contains("continuing"), "{}", said(&r));
    assert_eq!(records(&out), want);
    assert!(fs::symlink_metadata(&ck).unwrap().file_type().is_symlink());
    assert_eq!(
        contents(&elsewhere),
        before,
        "the link's target is untouched"
    );
    fs::remove_file(&ck).unwrap();
    // A checkpoint of another tool at its name (find --exec writing the same list, stopped).
    let log = tmp.path().join("cmds");
    launch("np1", "find")
        .arg(&root)
        .args([
            "--type",
            "f",
            "--exec",
            "sh",
            "-c",
            "printf x >> \"$0\"",
            &log.to_string_lossy(),
            ";",
            "-o",
        ])
        .arg(&out)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "3")
        .expect(1);
    assert!(has_marks(&ck));
    let r = walk("np1").expect(0);
    assert!(said(&r).contains("not used"), "{}", said(&r));
    assert_eq!(records(&out), want);
    assert!(!ck.exists());
}

#[test]
fn walk_o_and_find_exec_o_to_a_relative_list_leave_no_checkpoint_and_run_again() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 3);
    for _ in 0..2 {
        launch("np1", "walk")
            .current_dir(tmp.path())
            .args(["-q", "-o", "rel.mfu", "tree"])
            .expect(0);
        launch("np1", "find")
            .current_dir(tmp.path())
            .arg(&root)
            .args([
                "--type",
                "f",
                "--exec",
                "true",
                "{}",
                ";",
                "-o",
                "found.mfu",
            ])
            .expect(0);
    }
    let left: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.as_bytes().ends_with(b".mfu-checkpoint"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn walk_o_stopped_by_a_real_sigterm_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.mfu");
    let ck = tmp.path().join(".out.mfu.mfu-checkpoint");
    for dirs in [3000, 12000, 40000] {
        let sub = tmp.path().join(format!("t{dirs}"));
        fs::create_dir(&sub).unwrap();
        let root = tree(&sub, dirs);
        let walk = || {
            launch("np1", "walk")
                .arg("-o")
                .arg(&out)
                .arg(&root)
                .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "1")
        };
        let Some(stopped) = term_when(&walk(), || has_marks(&ck)) else {
            // Finished before the signal: a bigger tree.
            fs::remove_file(&out).unwrap();
            continue;
        };
        if stopped.status.code() == Some(0) {
            fs::remove_file(&out).unwrap();
            continue;
        }
        assert_eq!(
            stopped.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&stopped.stderr)
        );
        assert!(!out.exists() && has_marks(&ck));
        let done = launch("ranks3", "walk")
            .arg("-o")
            .arg(&out)
            .arg(&root)
            .expect(0);
        assert!(said(&done).contains("continuing from checkpoint"));
        assert_eq!(records(&out), walk_reference(&sub, &root));
        return;
    }
    panic!("every walk finished before its SIGTERM");
}

// ---------------------------------------------------------------------------------------- find

/// `find ROOT --type f --exec sh -c 'printf "%s\0" "$1" >> LOG; test ...' sh {} ; --print`: each
/// command logs its path (NUL-separated: names hold newlines), and fails for the `-1` files.
fn find_exec(l: &str, root: &Path, log: &Path, state: &Path) -> Tool {
    let script = "printf '%s\\0' \"$1\" >> \"$0\"; case \"$1\" in *-1) exit 3;; esac";
    launch(l, "find")
        .env("XDG_STATE_HOME", state)
        .arg(root)
        .args(["--type", "f", "--exec", "sh", "-c", script])
        .arg(log)
        .args(["{}", ";", "--print"])
}

/// The paths a command log holds, with how many times each.
fn logged(log: &Path) -> BTreeMap<Vec<u8>, usize> {
    let mut m = BTreeMap::new();
    for p in fs::read(log)
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
    {
        *m.entry(p.to_vec()).or_default() += 1;
    }
    m
}

/// The lines of `out`, sorted.
fn lines(out: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
    v.sort();
    v
}

/// Lines of stderr naming a failed command, sorted (the earlier-run suffix removed).
fn failed_commands(stderr: &str) -> Vec<String> {
    let mut v: Vec<String> = stderr
        .split("--exec ")
        .skip(1)
        .filter_map(|s| s.split(": exit status 3").next().map(|s| s.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn find_exec_does_not_run_again_commands_that_completed_after_a_stop_or_kill_9() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 12);
    let state = tmp.path().join("state");
    // Uninterrupted.
    let ref_log = tmp.path().join("ref-log");
    let reference = find_exec("np1", &root, &ref_log, &state)
        .arg("--no-checkpoint")
        .expect(1);
    let all = logged(&ref_log);
    assert!(all.len() > 40 && all.values().all(|&n| n == 1));
    let ref_failed = failed_commands(&reference.stderr_str());
    assert_eq!(
        ref_failed.len(),
        all.keys().filter(|p| p.ends_with(b"-1")).count()
    );
    for (a, b, c) in [("np1", "ranks3", "mpi2"), ("mpi2", "ranks3", "np1")] {
        let log = tmp.path().join(format!("log-{a}"));
        // Stopped after its 5th command: nothing printed, the commands done are not run again.
        let stopped = find_exec(a, &root, &log, &state)
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "5")
            .expect(1);
        assert!(
            stopped.stdout.is_empty(),
            "a stopped run prints nothing: {}",
            stopped.stdout_str()
        );
        let first = logged(&log);
        assert!(
            first.len() >= 5 && first.len() < all.len(),
            "{}",
            first.len()
        );
        // Killed after its 3rd mark of this run.
        let killed = find_exec(b, &root, &log, &state)
            .env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "3")
            .run();
        assert_ne!(killed.code(), Some(0));
        let second = logged(&log);
        for (p, n) in &first {
            assert_eq!(
                second[p],
                *n,
                "{}: a command that completed ran again",
                String::from_utf8_lossy(p)
            );
        }
        let done = find_exec(c, &root, &log, &state).expect(1);
        assert!(
            said(&done).contains("continuing from checkpoint"),
            "{}",
            said(&done)
        );
        let last = logged(&log);
        assert_eq!(
            last.keys().collect::<Vec<_>>(),
            all.keys().collect::<Vec<_>>()
        );
        for (p, n) in &first {
            assert_eq!(last[p], *n, "recorded commands are not run again");
        }
        // Only commands in flight when the kill came may have run twice (at most one per
        // worker thread of the killed run).
        let twice: usize = last.values().map(|n| n - 1).sum();
        assert!(twice <= 8, "{twice} commands ran again");
        // The output and the failures of an uninterrupted run, earlier runs' included.
        // (In walk order, which depends on the rank count: compared sorted.)
        assert_eq!(lines(&done.stdout), lines(&reference.stdout), "{a} {b} {c}");
        assert_eq!(failed_commands(&done.stderr_str()), ref_failed);
        assert!(done.stderr_str().contains("(in an earlier run)"));
        assert!(
            fs::read_dir(state.join("mfu-rs/checkpoints"))
                .unwrap()
                .next()
                .is_none(),
            "removed"
        );
    }
}

#[test]
fn find_exec_keeps_another_expression_apart_and_trusts_no_forged_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 6);
    let state = tmp.path().join("state");
    let log = tmp.path().join("log");
    find_exec("np1", &root, &log, &state)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
        .expect(1);
    let n = logged(&log).values().sum::<usize>();
    // Another expression (a --name test added): another job, with a checkpoint of its own
    // (this one's marks are neither used nor discarded).
    let other = find_exec("ranks3", &root, &log, &state)
        .args(["--name", "*"])
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
        .expect(1);
    assert!(!said(&other).contains("continuing"), "{}", said(&other));
    assert!(
        logged(&log).values().sum::<usize>() >= n + 4,
        "its commands ran again"
    );
    // Garbage in the (stopped) checkpoints' files: not trusted, every command runs again.
    let dirs: Vec<PathBuf> = fs::read_dir(state.join("mfu-rs/checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 2);
    dirs.iter().for_each(|d| garble(d));
    // The first command again (its checkpoint garbled): each of its commands runs once more.
    let before = logged(&log);
    let r = find_exec("np1", &root, &log, &state).expect(1);
    assert!(said(&r).contains("not used"), "{}", said(&r));
    let after = logged(&log);
    assert!(after.len() > 20);
    for (p, n) in &after {
        assert_eq!(n - before.get(p).copied().unwrap_or(0), 1, "{p:?}");
    }
}

/// Defect: the default checkpoint's name was a digest of the paths only, so `find D --exec A ;`
/// and `find D --exec B ;` shared one: B took A's for a changed run of its own, started over
/// in it and removed it at its end, and A, run again, ran every command again (and the two at
/// once were refused as "in use"). Now every option and command names the checkpoint: A
/// stopped, B run to its end, A run again continues from its own marks.
#[test]
fn find_exec_with_another_command_on_the_same_tree_keeps_its_own_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 6);
    let state = tmp.path().join("state");
    // The log is a word of the command: two logs, two commands.
    let (log_a, log_b) = (tmp.path().join("log a"), tmp.path().join("log|b"));
    find_exec("np1", &root, &log_a, &state)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
        .expect(1);
    let first = logged(&log_a);
    assert!(first.len() >= 4, "{}", first.len());
    let b = find_exec("ranks3", &root, &log_b, &state).expect(1);
    assert!(!said(&b).contains("not used"), "{}", said(&b));
    assert!(!said(&b).contains("continuing"), "{}", said(&b));
    let all = logged(&log_b);
    assert!(all.len() > 20 && all.values().all(|&n| n == 1));
    let a = find_exec("mpi2", &root, &log_a, &state).expect(1);
    assert!(
        said(&a).contains("continuing from checkpoint"),
        "{}",
        said(&a)
    );
    let last = logged(&log_a);
    assert_eq!(
        last.keys().collect::<Vec<_>>(),
        all.keys().collect::<Vec<_>>()
    );
    for (p, n) in &first {
        assert_eq!(last[p], *n, "a command A completed ran again");
    }
    assert_eq!(lines(&a.stdout), lines(&b.stdout));
    assert!(
        fs::read_dir(state.join("mfu-rs/checkpoints"))
            .unwrap()
            .next()
            .is_none(),
        "both removed"
    );
}

#[test]
fn find_exec_stopped_by_a_real_sigterm_runs_each_command_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 6);
    let state = tmp.path().join("state");
    let log = tmp.path().join("log");
    let slow = |l: &str| {
        launch(l, "find")
            .env("XDG_STATE_HOME", &state)
            .arg(&root)
            .args([
                "--type",
                "f",
                "--exec",
                "sh",
                "-c",
                "printf '%s\\0' \"$1\" >> \"$0\"; sleep 0.05",
            ])
            .arg(&log)
            .args(["{}", ";"])
    };
    let stopped = term_when(&slow("np1"), || logged(&log).len() >= 4).expect("still running");
    assert_eq!(
        stopped.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    let before = logged(&log).len();
    let done = slow("ranks3").expect(0);
    assert!(said(&done).contains("continuing from checkpoint"));
    let all = logged(&log);
    assert!(all.len() > before && all.len() == NAMES.len() * 6);
    assert!(
        all.values().all(|&n| n == 1),
        "each command ran once: {all:?}"
    );
}

// ---------------------------------------------------------------------------------------- grep

fn grep(l: &str, root: &Path, state: &Path) -> Tool {
    launch(l, "grep")
        .env("XDG_STATE_HOME", state)
        .env("MFU_RS_TEST_GREP_CHUNK", "24")
        .args(["-n", "needle"])
        .arg(root)
}

#[test]
fn grep_continues_after_kill_9_and_stop_and_prints_the_whole_output_once_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 15);
    let state = tmp.path().join("state");
    let reference = grep("np1", &root, &state).arg("--no-checkpoint").expect(0);
    assert!(reference.stdout.len() > 1000);
    let checkpoints = state.join("mfu-rs/checkpoints");
    for (a, b, c) in [("np1", "ranks3", "mpi2"), ("mpi2", "np1", "ranks3")] {
        let killed = grep(a, &root, &state)
            .env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "6")
            .run();
        assert_ne!(killed.code(), Some(0));
        assert!(killed.stdout.is_empty());
        let stopped = grep(b, &root, &state)
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "6")
            .run();
        assert!(
            said(&stopped).contains("continuing from checkpoint"),
            "{}",
            said(&stopped)
        );
        assert_ne!(stopped.code(), Some(0), "a stopped grep is no success");
        // Interrupted run plus rerun = uninterrupted run: the stopped run printed nothing.
        assert!(stopped.stdout.is_empty(), "{}", stopped.stdout_str());
        let done = grep(c, &root, &state).expect(0);
        assert!(said(&done).contains("continuing from checkpoint"));
        assert_eq!(done.stdout, reference.stdout, "{a} {b} {c}");
        assert!(
            fs::read_dir(&checkpoints).unwrap().next().is_none(),
            "removed"
        );
    }
}

#[test]
fn grep_searches_again_files_changed_since_and_trusts_no_forged_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 9);
    let state = tmp.path().join("state");
    grep("np1", &root, &state)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "30")
        .run();
    // Every file changed since (a line added): what the checkpoint holds of them is stale.
    std::thread::sleep(Duration::from_millis(20));
    for rel in listing(&root) {
        let p = root.join(OsStr::from_bytes(&rel));
        if p.is_file() {
            let mut b = fs::read(&p).unwrap();
            b.splice(0..0, b"needle added first\n".iter().copied());
            fs::write(&p, b).unwrap();
        }
    }
    let reference = grep("np1", &root, &state).arg("--no-checkpoint").expect(0);
    let done = grep("ranks3", &root, &state).expect(0);
    assert!(said(&done).contains("continuing from checkpoint"));
    assert_eq!(
        done.stdout, reference.stdout,
        "changed files searched again"
    );
    // Another pattern: not this checkpoint (the run starts over, says so, and completes).
    grep("np1", &root, &state)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "30")
        .run();
    let other = launch("np1", "grep")
        .env("XDG_STATE_HOME", &state)
        .env("MFU_RS_TEST_GREP_CHUNK", "24")
        .args(["-n", "line"])
        .arg(&root)
        .expect(0);
    // Another job: a checkpoint of its own, the stopped one's kept (continued below).
    assert!(!said(&other).contains("continuing"), "{}", said(&other));
    let plain = launch("np1", "grep")
        .env("MFU_RS_TEST_GREP_CHUNK", "24")
        .args(["--no-checkpoint", "-n", "line"])
        .arg(&root)
        .expect(0);
    assert_eq!(other.stdout, plain.stdout);
    // Garbage in a stopped one: not trusted.
    grep("np1", &root, &state)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "30")
        .run();
    let dirs: Vec<PathBuf> = fs::read_dir(state.join("mfu-rs/checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1);
    garble(&dirs[0]);
    let r = grep("mpi2", &root, &state).expect(0);
    assert!(said(&r).contains("not used"), "{}", said(&r));
    assert_eq!(r.stdout, reference.stdout);
}

#[test]
fn grep_stopped_by_a_real_sigterm_continues() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let checkpoints = state.join("mfu-rs/checkpoints");
    let marked =
        || fs::read_dir(&checkpoints).is_ok_and(|d| d.flatten().any(|e| has_marks(&e.path())));
    for mib in [8usize, 32, 96] {
        let root = tmp.path().join(format!("big{mib}"));
        fs::create_dir(&root).unwrap();
        let line = b"some text and a needle here\nfiller filler filler filler filler\n";
        fs::write(root.join("big"), line.repeat((mib << 20) / line.len())).unwrap();
        let run = |l: &str| {
            launch(l, "grep")
                .env("XDG_STATE_HOME", &state)
                .env("MFU_RS_TEST_GREP_CHUNK", "65536")
                .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "1")
                .args(["-c", "needle"])
                .arg(&root)
        };
        let Some(stopped) = term_when(&run("np1"), marked) else {
            continue;
        };
        if stopped.status.code() == Some(0) {
            continue;
        }
        assert!(stopped.stdout.is_empty());
        let done = run("ranks3").expect(0);
        assert!(said(&done).contains("continuing from checkpoint"));
        let count = format!(":{}\n", (mib << 20) / line.len());
        assert!(done.stdout_str().ends_with(&count), "{}", done.stdout_str());
        return;
    }
    panic!("every grep finished before its SIGTERM");
}
