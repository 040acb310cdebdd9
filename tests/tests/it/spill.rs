//! Lists larger than memory (issue 34): `walk -i LIST -s KEYS -o OUT --memory-limit SIZE`
//! sorts through spill files at a tiny limit and writes the bytes of the unlimited sort; a
//! full TMPDIR and a stop mid-spill leave no output, no spill file, and the input as it was.

use flist::{io, Detail, FileList, FileType, Meta};
use mfu_tests::{launches, Tool};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A v4 list of `n` records (sizes and times with many ties, a few names not UTF-8).
fn write_list(path: &Path, n: u64) {
    let mut l = FileList::new(Detail::Stat);
    for i in 0..n {
        let k = i * 7919 % n;
        let mut p = format!("/data/d{}/file-{k:07}", k % 41).into_bytes();
        if k.is_multiple_of(19) {
            p.extend_from_slice(b"-\xff");
        }
        let meta = Meta {
            mode: if k.is_multiple_of(23) {
                0o040755
            } else {
                0o100644
            },
            size: k % 101,
            mtime: 1_700_000_000 + (k % 37) as i64,
            mtime_nsec: (k % 3) as u32,
            ..Meta::default()
        };
        l.push(&p, meta.file_type(), Some(meta));
    }
    steal::local::run(1, |c| io::write(c, &l, path, io::Format::V4).unwrap());
}

fn sort(input: &Path, key: &str, out: &Path) -> Tool {
    Tool::new("walk")
        .args(["-s", key, "-i"])
        .arg(input)
        .arg("-o")
        .arg(out)
}

pub(crate) fn names(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_sort_at_a_tiny_limit_spills_and_writes_the_bytes_of_the_unlimited_sort() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.mfu");
    write_list(&input, 3000);
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    for key in ["name", "-size", "mtime"] {
        let want = tmp.path().join("want.mfu");
        let run = sort(&input, key, &want).run().assert_status(0);
        // The default limit: nothing spills, and the report says what the limit is.
        run.stdout_contains("Memory limit: ")
            .stdout_contains("(default: 1/2 of the node's");
        assert!(
            !run.stdout_str().contains("Spilled"),
            "{}",
            run.stdout_str()
        );
        for (name, launch) in launches() {
            let got = tmp.path().join("got.mfu");
            let run = launch(sort(&input, key, &got))
                .args(["--memory-limit", "4k", "--tmpdir"])
                .arg(&spill)
                .run()
                .assert_status(0);
            run.stdout_contains("Memory limit: 4.000 KiB per rank (--memory-limit)")
                .stdout_contains("Spilled: ")
                .stdout_contains(&format!("to {}", spill.display()))
                .stdout_contains("Items: 3000");
            assert!(
                std::fs::read(&want).unwrap() == std::fs::read(&got).unwrap(),
                "key {key}, {name}: the spilled sort's list differs from the unlimited sort's"
            );
            assert_eq!(
                names(&spill),
                Vec::<PathBuf>::new(),
                "{name}: spill files left"
            );
        }
    }
    // The spill's disk use in the JSON report too.
    let got = tmp.path().join("got.mfu");
    let run = sort(&input, "name", &got)
        .args(["--json", "--memory-limit", "4k", "--tmpdir"])
        .arg(&spill)
        .run()
        .assert_status(0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout_str()).unwrap();
    assert_eq!(v["memory_limit"], "4.000 KiB per rank (--memory-limit)");
    assert_eq!(v["spilled"]["records"], 3000);
    assert!(
        v["spilled"]["spill_bytes"].as_u64().unwrap() > 3000 * 80,
        "{v}"
    );
    assert!(v["spilled"]["runs"].as_u64().unwrap() > 10, "{v}");
    assert_eq!(v["tmpdir"], spill.to_str().unwrap());
}

/// A small tmpfs mounted for one test, unmounted when dropped.
pub(crate) struct Mount(PathBuf);

impl Mount {
    pub(crate) fn tmpfs(at: &Path, size: &str) -> Mount {
        std::fs::create_dir_all(at).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .unwrap();
        assert!(
            st.success(),
            "mount a tmpfs at {} (the tests run as root)",
            at.display()
        );
        Mount(at.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_tmpdir_is_an_error_naming_it_and_leaves_no_output() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.mfu");
    write_list(&input, 3000);
    let before = std::fs::read(&input).unwrap();
    let full = tmp.path().join("full");
    let _mount = Mount::tmpfs(&full, "64k");
    for (name, launch) in launches() {
        let out = tmp.path().join("out.mfu");
        let run = launch(sort(&input, "name", &out))
            .args(["--memory-limit", "8k", "--tmpdir"])
            .arg(&full)
            .run()
            .assert_status(1);
        run.stderr_contains(&format!("TMPDIR {}", full.display()))
            .stderr_contains("no room")
            .stderr_contains("No space left on device");
        // No counts of records never all read: only why nothing was written.
        run.stdout_contains("Sort failed (named above): no list written");
        assert!(
            !run.stdout_str().contains("Read 0 items"),
            "{name}: {}",
            run.stdout_str()
        );
        assert!(!out.exists(), "{name}: an output after a failed sort");
        assert_eq!(
            names(tmp.path()),
            [full.clone(), input.clone()],
            "{name}: nothing beside the input (no temporary list)"
        );
        assert!(
            std::fs::read(&input).unwrap() == before,
            "{name}: input changed"
        );
        assert_eq!(
            names(&full),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );
    }
}

/// Spill files open in `dir` by any process (a rank of `mpirun` is not the test's child):
/// unnamed, `/proc/PID/fd` shows them as `DIR/#N (deleted)`.
pub(crate) fn spill_files_open(dir: &Path) -> usize {
    let dir = dir.as_os_str().as_bytes();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .filter_map(|p| std::fs::read_dir(p.ok()?.path().join("fd")).ok())
        .flat_map(|fds| fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok()))
        .filter(|t| t.as_os_str().as_bytes().starts_with(dir))
        .count()
}

/// Start `cmd` (its output piped), wait until one of its processes holds a spill file open in
/// `spill` (polled every 2 ms, up to `secs` seconds), send SIGTERM to every rank (as a time
/// limit signals every task) and return the output. `None` when the run ended before it
/// spilled (its output is then dropped: give it more to do).
pub(crate) fn term_while_spilling(
    cmd: &mut std::process::Command,
    spill: &Path,
    secs: u64,
) -> Option<std::process::Output> {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while spill_files_open(spill) == 0 {
        if child.try_wait().unwrap().is_some() {
            let _ = child.wait_with_output();
            return None;
        }
        assert!(
            start.elapsed().as_secs() < secs,
            "{cmd:?}: no spill file after {secs} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    for pid in mfu_tests::job_pids(child.id()) {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            // A rank may have ended meanwhile.
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
    Some(child.wait_with_output().unwrap())
}

#[test]
fn sigterm_while_spilling_leaves_no_spill_file_and_no_output() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.mfu");
    write_list(&input, 200_000);
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let out = tmp.path().join("out.mfu");
    for (name, launch) in launches() {
        let mut cmd = launch(sort(&input, "-size", &out))
            .args(["--memory-limit", "64k", "--tmpdir"])
            .arg(&spill)
            .command();
        let done = term_while_spilling(&mut cmd, &spill, 60)
            .unwrap_or_else(|| panic!("{name}: ended before spilling"));
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(
            done.status.code(),
            Some(1),
            "{name}: {:?}\n{stderr}",
            done.status
        );
        assert!(stderr.contains("interrupted"), "{name}: {stderr}");
        assert!(!out.exists(), "{name}: an output after a stop");
        assert_eq!(names(tmp.path()), [input.clone(), spill.clone()], "{name}");
        assert_eq!(names(&spill), Vec::<PathBuf>::new(), "{name}");
        assert_eq!(
            spill_files_open(&spill),
            0,
            "{name}: spill files still open"
        );
    }
}

/// A rank whose share of the list is empty makes its spill file only after the others have
/// spilled; when it cannot (here: the TMPDIR has no inode left for it), that is every rank's
/// error, not a rank gone while the others wait for it in the exchange.
#[test]
fn a_rank_that_cannot_make_its_spill_file_is_every_rank_s_error() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.mfu");
    // Two records over three ranks, each bigger than half the limit: two ranks spill one
    // record each, the third has none.
    let mut l = FileList::new(Detail::Stat);
    for i in 0..2 {
        let p = format!("/data/{}{i}", "x".repeat(3000));
        let meta = Meta {
            mode: 0o100644,
            ..Meta::default()
        };
        l.push(p.as_bytes(), FileType::File, Some(meta));
    }
    steal::local::run(1, |c| io::write(c, &l, &input, io::Format::V4).unwrap());
    // The file system's root and two unnamed files: the third spill file finds no inode.
    let full = tmp.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1M,nr_inodes=3", "tmpfs"])
        .arg(&full)
        .status()
        .unwrap();
    assert!(st.success(), "mount a tmpfs (the tests run as root)");
    let _mounted = Mount(full.clone());
    let out = tmp.path().join("out.mfu");
    let mut cmd = Tool::new("walk")
        .ranks(3)
        .args(["-s", "name", "-i"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .args(["--memory-limit", "1k", "--tmpdir"])
        .arg(&full)
        .command();
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() > 60 {
            let _ = child.kill();
            panic!("the ranks still wait for each other after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("TMPDIR {}", full.display())),
        "{stderr}"
    );
    assert!(!out.exists(), "an output after a failed sort");
}
