//! The signal contract, end to end: SIGINT or SIGTERM in the middle of a tool's work stops it
//! taking new work; what is in flight finishes or is abandoned safely; the summary says it was
//! interrupted; the exit status is 1. For cp and sync no file in DEST carries the source's size
//! and mtime with other bytes, and a rerun of sync converges.
//!
//! The trees are small: the runtime's test seam (`MFU_RS_TEST_ITEM_DELAY_MS`) makes each work
//! item wait, so every tool is still working when its first progress line for the phase under
//! test appears, and the signal is sent then. (tar, bcast, bz2 and filemaker have their own
//! signal tests in their files.)

use mfu_tests::{job_pids, mfu, Tool};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Each work item of the tool waits this long (ms): a phase of a few dozen items lasts seconds.
const ITEM_DELAY_MS: u64 = 150;

/// Chunk size for the data tools: each file of [`trees`] is 4 work items.
const CHUNK: &str = "64KB";

/// `DIR/src`: 4 directories of 12 files of 256 KiB of distinct bytes, and an identical copy
/// `DIR/same` (for cmp and dup).
fn trees(dir: &Path) {
    for (d, f) in (0..4).flat_map(|d| (0..12).map(move |f| (d, f))) {
        let bytes = mfu_tests::noise(d * 100 + f + 1, 256 << 10);
        for top in ["src", "same"] {
            let sub = dir.join(format!("{top}/d{d}"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join(format!("f{f}")), &bytes).unwrap();
        }
    }
}

/// `DIR/src`: 8 directories of 60 empty files (rm and chmod work on 64 entries per item).
fn many(dir: &Path) {
    for d in 0..8 {
        let sub = dir.join(format!("src/d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..60 {
            std::fs::write(sub.join(format!("f{f}")), b"").unwrap();
        }
    }
}

/// Run `cmd` with [`ITEM_DELAY_MS`]; once a stderr line starts with `verb` (the phase under test is
/// under way), send `signal` to the tool (every rank under mpirun). Returns the output, with
/// stderr complete. Panics when the tool ends before the phase starts.
fn interrupt_when(cmd: &mut Command, verb: &str, signal: i32) -> Output {
    interrupt_slowed(cmd, verb, signal, ITEM_DELAY_MS)
}

/// [`interrupt_when`] with each work item delayed `delay_ms`.
fn interrupt_slowed(cmd: &mut Command, verb: &str, signal: i32, delay_ms: u64) -> Output {
    cmd.env("MFU_RS_TEST_ITEM_DELAY_MS", delay_ms.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut v = Vec::new();
        stdout.read_to_end(&mut v).unwrap();
        v
    });
    let (started, wait_start) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let verb = verb.to_string();
    let stderr = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in stderr.split(b'\n') {
            let line = line.unwrap();
            if line.starts_with(verb.as_bytes()) {
                let _ = started.send(());
            }
            all.extend_from_slice(&line);
            all.push(b'\n');
        }
        all
    });
    let reached = wait_start.recv_timeout(Duration::from_secs(60)).is_ok();
    if reached {
        for pid in job_pids(child.id()) {
            // SAFETY: kill(2) with a pid of our child (or its ranks) and a signal number.
            unsafe { libc::kill(pid, signal) };
        }
    }
    let status = child.wait().unwrap();
    let out = Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    assert!(
        reached,
        "{cmd:?} never started the phase under test ({:?})\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Exit 1 and a summary that says the run was interrupted.
fn assert_interrupted(what: &str, out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: exit status\n{err}");
    assert!(
        err.contains("interrupted"),
        "{what}: no word of the interruption\n{err}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// No file in `dst` has the size and mtime of its source in `src` with other bytes (a rerun of
/// sync would trust it and never finish it). Returns how many files were complete.
fn assert_no_false_complete(src: &Path, dst: &Path) -> usize {
    let mut complete = 0;
    let mut stack = vec![std::path::PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in std::fs::read_dir(src.join(&rel)).unwrap() {
            let e = e.unwrap();
            let rel = rel.join(e.file_name());
            let s = std::fs::symlink_metadata(src.join(&rel)).unwrap();
            if s.is_dir() {
                stack.push(rel);
                continue;
            }
            let Ok(d) = std::fs::symlink_metadata(dst.join(&rel)) else {
                continue;
            };
            if d.is_file()
                && d.size() == s.size()
                && d.mtime() == s.mtime()
                && d.mtime_nsec() == s.mtime_nsec()
            {
                assert_eq!(
                    std::fs::read(src.join(&rel)).unwrap(),
                    std::fs::read(dst.join(&rel)).unwrap(),
                    "{} carries the source's size and mtime but not its bytes",
                    dst.join(&rel).display()
                );
                complete += 1;
            }
        }
    }
    complete
}

fn tool(np: usize) -> Command {
    Tool::bare().np(np).command()
}

#[test]
fn walk_stops_and_writes_no_list_that_looks_complete() {
    for np in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        trees(tmp.path());
        let list = tmp.path().join("src.mfu");
        let mut cmd = tool(np);
        cmd.args(["walk", "--progress", "0.1", "-o"])
            .arg(&list)
            .arg(tmp.path().join("src"));
        let out = interrupt_when(&mut cmd, "Walked ", libc::SIGINT);
        assert_interrupted(&format!("walk np {np}"), &out);
        assert!(
            !list.exists(),
            "walk np {np}: an interrupted walk wrote a list"
        );
    }
}

#[test]
fn cp_stops_and_leaves_no_file_that_looks_complete() {
    let tmp = tempfile::tempdir().unwrap();
    trees(tmp.path());
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    let mut cmd = mfu(&["cp", "-p", "--progress", "0.1", "--chunksize", CHUNK]);
    cmd.arg(&src).arg(&dst);
    let out = interrupt_when(&mut cmd, "Copied ", libc::SIGINT);
    assert_interrupted("cp", &out);
    let complete = assert_no_false_complete(&src, &dst);
    assert!(
        complete < 48,
        "cp went on to the end ({complete} files complete)"
    );
}

#[test]
fn sync_stops_safely_and_a_rerun_converges() {
    for (np, signal) in [(1, libc::SIGTERM), (2, libc::SIGINT)] {
        let tmp = tempfile::tempdir().unwrap();
        trees(tmp.path());
        let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
        let mut cmd = tool(np);
        cmd.args(["sync", "--progress", "0.1", "--chunksize", CHUNK])
            .arg(&src)
            .arg(&dst);
        let out = interrupt_when(&mut cmd, "Copied ", signal);
        assert_interrupted(&format!("sync np {np}"), &out);
        assert!(
            assert_no_false_complete(&src, &dst) < 48,
            "sync np {np} went on to the end"
        );
        let mut again = mfu(&["sync", "-q"]);
        mfu_tests::expect_status(again.arg(&src).arg(&dst), 0);
        assert_eq!(
            assert_no_false_complete(&src, &dst),
            48,
            "the rerun did not converge"
        );
        mfu_tests::expect_status(mfu(&["cmp", "-q"]).arg(&src).arg(&dst), 0);
    }
}

#[test]
fn rm_stops_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    many(tmp.path());
    let mut cmd = mfu(&["rm", "--progress", "0.1"]);
    cmd.arg(tmp.path().join("src"));
    let out = interrupt_slowed(&mut cmd, "Removed ", libc::SIGINT, 250);
    assert_interrupted("rm", &out);
    assert!(tmp.path().join("src").exists(), "rm went on to the end");
}

#[test]
fn cmp_stops_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    trees(tmp.path());
    let mut cmd = mfu(&["cmp", "--progress", "0.1", "--chunksize", CHUNK]);
    cmd.arg(tmp.path().join("src")).arg(tmp.path().join("same"));
    // The checkpoint the stop keeps stays in the test's directory.
    cmd.env("XDG_STATE_HOME", tmp.path().join("state"));
    let out = interrupt_when(&mut cmd, "Compared ", libc::SIGTERM);
    assert_interrupted("cmp", &out);
}

#[test]
fn find_exec_stops_running_commands_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    trees(tmp.path());
    let ran = tmp.path().join("ran");
    let list = tmp.path().join("found.mfu");
    let mut cmd = mfu(&["find", "--progress", "0.1", "-o"]);
    cmd.arg(&list)
        .arg(tmp.path().join("src"))
        .args([
            "--type",
            "f",
            "--exec",
            "sh",
            "-c",
            "echo >> \"$1\"; sleep 0.05",
            "sh",
        ])
        .arg(&ran)
        .arg(";");
    let out = interrupt_when(&mut cmd, "Examined ", libc::SIGINT);
    assert_interrupted("find --exec", &out);
    let runs = std::fs::read(&ran).map(|v| v.len()).unwrap_or(0);
    assert!(
        runs < 48,
        "find --exec ran its command for every file ({runs})"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("Examined 53 items"),
        "the summary claims every entry: {err}"
    );
    assert!(!list.exists(), "an interrupted find wrote a list");
}

#[test]
fn chmod_stops_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    many(tmp.path());
    let mut cmd = mfu(&["chmod", "--progress", "0.1", "-m", "go-rwx"]);
    cmd.arg(tmp.path().join("src"));
    let out = interrupt_slowed(&mut cmd, "Changed ", libc::SIGTERM, 400);
    assert_interrupted("chmod", &out);
}

#[test]
fn dup_stops_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    trees(tmp.path());
    let list = tmp.path().join("dups.txt");
    let mut cmd = mfu(&["dup", "--progress", "0.1", "-o"]);
    cmd.arg(&list)
        .arg(tmp.path().join("src"))
        .arg(tmp.path().join("same"))
        // The checkpoint the stop keeps stays in the test's directory.
        .env("XDG_STATE_HOME", tmp.path().join("state"));
    let out = interrupt_when(&mut cmd, "Hashed ", libc::SIGINT);
    assert_interrupted("dup", &out);
    assert!(
        !list.exists(),
        "an interrupted dup wrote a list of redundant copies"
    );
}

#[test]
fn a_signal_after_the_last_work_still_ends_in_exit_1_and_is_named() {
    // walk -p prints after the walk: with stdout a pipe nobody reads yet, the printing blocks
    // (far more than a pipe holds), and the signal arrives when no work is left to stop.
    let tmp = tempfile::tempdir().unwrap();
    let long = "n".repeat(150);
    for i in 0..1000 {
        std::fs::write(tmp.path().join(format!("{long}{i}")), b"").unwrap();
    }
    let mut child = mfu(&["walk", "-p"])
        .arg(tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    // SAFETY: kill(2) of our child with a signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(200));
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let printed = 1 + rest.len();
    assert!(printed > 150 * 1000, "the listing was cut: {printed} bytes");
    assert_interrupted("walk -p", &out);
}

/// stripe (in-process over the fake Lustre: the binary needs a real one). SIGINT arrives after
/// the walk, before any file is rewritten: nothing is restriped, every file keeps its inode and
/// bytes, no sibling (`.NAME.HOST.PID.mfu-tmp`) is left, the status is 1; once the stop is over, a rerun
/// restripes everything.
#[test]
fn stripe_stops_before_rewriting_and_leaves_no_sibling() {
    let _serial = mfu_tests::serial();
    use clap::Parser;
    use lustre_sys::fake::Fake;
    use mfu::Status;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: mfu::unstable::cli::stripe::StripeToolArgs,
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    std::fs::create_dir_all(root.join("d")).unwrap();
    let names = ["a", "b", "d/c", "d/e"];
    for (i, n) in names.iter().enumerate() {
        std::fs::write(root.join(n), vec![i as u8 + 1; 20_000]).unwrap();
    }
    let inode = |n: &str| std::fs::metadata(root.join(n)).unwrap().ino();
    let before: Vec<u64> = names.iter().map(|n| inode(n)).collect();
    let fake = Arc::new(Fake::new(vec![root.clone()], 8));
    let argv = ["mfu-rs", "-q", "-c", "4", root.to_str().unwrap()];
    let args = Cmd::parse_from(argv).args;
    // The binary installs the handlers and passes their stop flag; so does this test.
    steal::signals::install();
    let context = {
        let mut c = mfu::prelude::Context::default();
        c.stop = steal::signals::shared_stop_flag();
        c
    };
    let mut args =
        <mfu::unstable::cli::stripe::Stripe as mfu::unstable::cli::tool::CliTool>::options(
            &args,
            Default::default(),
            context,
        );
    args.api = mfu::types::LustreHandle(fake.clone() as Arc<dyn lustre_sys::Lustre>);
    let status = |r: Result<mfu::stripe::Report, mfu::prelude::Error>| {
        r.map_or(Status::Usage, |r| mfu::prelude::ToolReport::status(&r))
    };

    mfu::unstable::engine::test_seam::change_at_next_pause(|| {
        // stripe has installed its handlers by now: this is the signal a user's Ctrl-C sends.
        unsafe { libc::raise(libc::SIGINT) };
        let flag = steal::signals::stop_flag();
        let start = std::time::Instant::now();
        while !flag.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(flag.load(Ordering::SeqCst), "the handler saw the signal");
    });
    let st = steal::local::run(2, |comm| status(mfu::stripe::run(comm, &args)));
    assert!(st.iter().all(|s| *s == Status::ItemsFailed), "{st:?}");
    for (i, n) in names.iter().enumerate() {
        assert_eq!(inode(n), before[i], "{n}: rewritten after the signal");
        assert_eq!(
            std::fs::read(root.join(n)).unwrap(),
            vec![i as u8 + 1; 20_000]
        );
    }
    let siblings = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".mfu-tmp"))
            .collect()
    };
    assert!(siblings(&root).is_empty() && siblings(&root.join("d")).is_empty());

    // The stop is over (a new run in this process): the rerun does the whole job.
    steal::signals::stop_flag().store(false, Ordering::SeqCst);
    let st = steal::local::run(2, |comm| status(mfu::stripe::run(comm, &args)));
    assert!(st.iter().all(|s| *s == Status::Ok), "{st:?}");
    for (i, n) in names.iter().enumerate() {
        assert_ne!(inode(n), before[i], "{n}: restriped by the rerun");
        assert_eq!(
            std::fs::read(root.join(n)).unwrap(),
            vec![i as u8 + 1; 20_000]
        );
    }
}
