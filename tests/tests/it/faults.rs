//! Fault injection: the tools run into a full file system (a small tmpfs the test mounts), a
//! read-only destination, a low open-file limit, unreadable sources as an unprivileged user,
//! and `kill -9` at several points. After each, whatever the tool left behind must not lie:
//!
//! - the exit status is non-zero when something was not done;
//! - no file in DEST carries its source's size and mtime with other bytes (a rerun of `sync`
//!   would take it for complete and never fix it);
//! - a rerun (with the fault gone) converges to an exact copy.
//!
//! Mounting needs root, which the test suite has (CI runs as root); a test that cannot mount
//! fails rather than skipping, so a lost privilege is seen.

use mfu_tests::tree::{self, Compare, Kind, Tree};
use mfu_tests::{output_of, Tool};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

/// A tmpfs of `size` mounted at `dir` for the test's lifetime (lazily unmounted on drop, also
/// when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0777"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mount tmpfs at {} (the fault tests need root): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir.to_path_buf())
    }

    fn remount(&self, opts: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "remount {opts} {}: {}",
            self.0.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A source tree of `files` files of 1 KiB to ~600 KiB (seeded) in a few directories, with
/// mtimes in the past (so a copy that kept the source's mtime is told apart from a fresh one).
fn make_source(src: &Path, files: usize, seed: u64) -> Tree {
    for i in 0..files {
        let dir = src.join(format!("d{}", i % 4));
        std::fs::create_dir_all(&dir).unwrap();
        let len = 1024 + (seed as usize * 7919 + i * 104_729) % (600 << 10);
        let path = dir.join(format!("f{i:03}"));
        std::fs::write(&path, mfu_tests::noise(seed * 1000 + i as u64, len)).unwrap();
        tree::set_mtime(&path, (1_600_000_000 + i as i64, 123_456_789));
    }
    tree::snapshot(src)
}

/// The invariant of every fault: a regular file of `dest` whose size and mtime are its
/// source's has its source's bytes.
fn assert_no_lying_files(context: &str, src: &Tree, dest_root: &Path) {
    if !dest_root.exists() {
        return;
    }
    let dest = tree::snapshot(dest_root);
    let liars: Vec<String> = dest
        .iter()
        .filter(|(_, d)| d.kind == Kind::File)
        .filter_map(|(k, d)| {
            let s = src.get(k)?;
            (s.kind == Kind::File && s.size == d.size && s.mtime == d.mtime && s.digest != d.digest)
                .then(|| tree::lossy(k))
        })
        .collect();
    assert!(
        liars.is_empty(),
        "{context}: files carrying their source's size and mtime with other bytes: {liars:?}"
    );
}

fn assert_failed_with(context: &str, out: &Output, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{context}: want exit 1\n--- stdout\n{}\n--- stderr\n{err}",
        text(&out.stdout)
    );
    assert!(
        err.contains(needle),
        "{context}: stderr should name the failure ({needle:?}):\n{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// A full file system

/// cp and sync into a tmpfs too small for the source: exit 1 naming ENOSPC, no lying file,
/// and after the file system grows a sync completes the copy.
#[test]
fn enospc_fails_loudly_leaves_no_lying_file_and_a_rerun_converges() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let want = make_source(&src, 24, 3);
    assert!(tree::file_bytes(&want) > 4 << 20, "the source must not fit");
    for (np, op) in [(1, "cp"), (2, "cp"), (1, "sync"), (2, "sync")] {
        let context = format!("{op} np={np} onto a full tmpfs");
        let mnt = tmp.path().join(format!("small-{op}-{np}"));
        let fs = Tmpfs::mount(&mnt, "2m");
        let dest = mnt.join("dest");
        let args: Vec<&str> = match op {
            "cp" => vec!["cp", "-p"],
            _ => vec!["sync"],
        };
        let out = Tool::bare().np(np).args(&args).arg(&src).arg(&dest).run();
        assert_failed_with(&context, &out, "No space left on device");
        assert_no_lying_files(&context, &want, &dest);
        if op == "sync" {
            let stdout = text(&out.stdout);
            let summary = stdout
                .lines()
                .find(|l| l.starts_with("Synced: "))
                .unwrap_or_else(|| panic!("{context}: no summary:\n{stdout}"));
            // What the summary says was created must be there, whole.
            let created: u64 = summary
                .trim_start_matches("Synced: ")
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let complete = tree::snapshot(&dest)
                .iter()
                .filter(|(k, d)| {
                    want.get(*k)
                        .is_some_and(|s| s.kind == d.kind && s.digest == d.digest)
                })
                .count() as u64;
            assert!(
                created <= complete,
                "{context}: the summary claims {created} created, {complete} entries are complete: {summary}"
            );
        }
        fs.remount("size=64m");
        Tool::new("sync")
            .np(np)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        tree::assert_equal_in(
            &format!("{context}, then sync"),
            &want,
            &tree::snapshot(&dest),
            Compare::META,
        );
    }
}

/// tar -x into a tmpfs too small for the archive, at 1, 2 and 4 ranks: exit 1 naming ENOSPC, and
/// no file carries its archived size and mtime over bytes that did not land — also when the
/// piece that failed was another rank's than the one that sets the file's metadata (each file's
/// data is written by the ranks its bytes span). After the file system grows, extracting again
/// gives the tree.
#[test]
fn tar_x_onto_a_full_file_system_leaves_no_file_looking_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let want = make_source(&src, 24, 5);
    let archive = tmp.path().join("a.tar");
    Tool::new("tar")
        .arg("-c")
        .arg("-f")
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .arg(".")
        .expect(0);
    for ranks in [1, 2, 4] {
        let context = format!("tar -x --ranks {ranks} onto a full tmpfs");
        let mnt = tmp.path().join(format!("small-tar-{ranks}"));
        let fs = Tmpfs::mount(&mnt, "2m");
        let out = Tool::new("tar")
            .ranks(ranks)
            .arg("-x")
            .arg("-f")
            .arg(&archive)
            .arg("-C")
            .arg(&mnt)
            .run();
        assert_failed_with(&context, &out.output, "No space left on device");
        assert_no_lying_files(&context, &want, &mnt);
        fs.remount("size=64m");
        Tool::new("tar")
            .ranks(ranks)
            .arg("-x")
            .arg("-f")
            .arg(&archive)
            .arg("-C")
            .arg(&mnt)
            .expect(0);
        tree::assert_equal_in(
            &format!("{context}, then tar -x again"),
            &want,
            &tree::snapshot(&mnt),
            Compare::CONTENT,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// A read-only destination

/// sync and rm on a read-only file system: exit 1, nothing changed, and no summary counts an
/// action that did not happen.
#[test]
fn read_only_destination_changes_nothing_and_claims_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let want = make_source(&src, 12, 5);
    let mnt = tmp.path().join("ro");
    let fs = Tmpfs::mount(&mnt, "64m");
    let dest = mnt.join("dest");
    // Half the tree is there already; one file differs.
    Tool::new("sync")
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    std::fs::remove_dir_all(dest.join("d1")).unwrap();
    std::fs::write(dest.join("d0/f000"), b"changed").unwrap();
    std::fs::write(dest.join("extra"), b"only in dest").unwrap();
    let before = tree::snapshot(&dest);
    fs.remount("ro");
    for np in [1, 2] {
        let context = format!("sync -D np={np} onto a read-only fs");
        let out = Tool::new("sync")
            .np(np)
            .arg("-D")
            .arg(&src)
            .arg(&dest)
            .run();
        assert_failed_with(&context, &out, "Read-only file system");
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("Synced: 0 created, 0 updated, 0 deleted"),
            "{context}: the summary must count nothing done:\n{stdout}"
        );
        tree::assert_equal_in(&context, &before, &tree::snapshot(&dest), Compare::META);

        let context = format!("rm np={np} on a read-only fs");
        let out = Tool::new("rm").np(np).arg(dest.join("d2")).run();
        assert_failed_with(&context, &out, "Read-only file system");
        let stdout = text(&out.stdout);
        assert!(
            !stdout.lines().any(|l| l.starts_with("Removed ")
                && l.split(' ').nth(1).is_some_and(|n| n != "0")),
            "{context}: a summary claims removals:\n{stdout}"
        );
        tree::assert_equal_in(&context, &before, &tree::snapshot(&dest), Compare::META);
    }
    fs.remount("rw");
    Tool::new("sync")
        .args(["-D"])
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    tree::assert_equal_in(
        "read-only, then rw and sync -D",
        &want,
        &tree::snapshot(&dest),
        Compare::META,
    );
}

// ---------------------------------------------------------------------------------------------
// Too few file descriptors

/// cp with an open-file limit far below what it would like: it may fail (exit 1 or 2, never a
/// crash), must not lie, and a rerun with the normal limit converges.
#[test]
fn emfile_never_crashes_or_lies_and_a_rerun_converges() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let want = make_source(&src, 40, 7);
    for limit in [12u64, 24, 48] {
        let context = format!("cp -p with RLIMIT_NOFILE={limit}");
        let dest = tmp.path().join(format!("dest-{limit}"));
        let mut cmd = Tool::new("cp").arg("-p").arg(&src).arg(&dest).command();
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = output_of(&mut cmd);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0..=2)),
            "{context}: exit {:?} (a crash?)\n--- stderr\n{}",
            out.status,
            text(&out.stderr)
        );
        if code == Some(0) {
            tree::assert_equal_in(&context, &want, &tree::snapshot(&dest), Compare::META);
        } else {
            assert!(
                !out.stderr.is_empty(),
                "{context}: a failure must be named on stderr"
            );
        }
        assert_no_lying_files(&context, &want, &dest);
        Tool::new("sync")
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        tree::assert_equal_in(
            &format!("{context}, then sync"),
            &want,
            &tree::snapshot(&dest),
            Compare::META,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Unreadable sources

/// cp, sync and tar -c of a tree with an unreadable file and an unreadable directory, as an
/// unprivileged user: exit 1 naming both, everything else copied or archived whole, nothing
/// carrying the unreadable file's size and mtime.
#[test]
fn unreadable_sources_are_named_and_never_copied_as_something_else() {
    let tmp = mfu_tests::nobody_tempdir();
    let src = tmp.path().join("src");
    let want = make_source(&src, 8, 11);
    std::fs::create_dir(src.join("closed")).unwrap();
    std::fs::write(src.join("closed/inside"), b"inside").unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    tree::chown_tree(&src, 65534, 65534);
    tree::chown_tree(&work, 65534, 65534);
    tree::chmod(&src.join("d0/f000"), 0o000);
    tree::chmod(&src.join("closed"), 0o000);
    for op in ["cp", "sync"] {
        let context = format!("{op} as nobody with unreadable entries");
        let dest = work.join(format!("dest-{op}"));
        let args: Vec<&str> = if op == "cp" {
            vec!["cp", "-p"]
        } else {
            vec!["sync"]
        };
        let out = Tool::bare()
            .as_nobody()
            .args(&args)
            .arg(&src)
            .arg(&dest)
            .run();
        assert_failed_with(&context, &out, "f000");
        assert!(
            text(&out.stderr).contains("closed"),
            "{context}: the unreadable directory must be named:\n{}",
            text(&out.stderr)
        );
        assert_no_lying_files(&context, &want, &dest);
        let got = tree::snapshot(&dest);
        for (k, n) in &want {
            if n.kind == Kind::File && k.as_slice() != b"d0/f000" {
                assert_eq!(
                    got.get(k).and_then(|g| g.digest),
                    n.digest,
                    "{context}: {} must be copied whole",
                    tree::lossy(k)
                );
            }
        }
    }
    // tar -c: the unreadable file is left out, everything else is intact.
    let archive = work.join("a.tar");
    let out = Tool::new("tar")
        .as_nobody()
        .args(["-c", "-f"])
        .arg(&archive)
        .arg("-C")
        .arg(tmp.path())
        .arg("src")
        .run();
    assert_failed_with("tar -c as nobody with unreadable entries", &out, "f000");
    let listing = Command::new("tar")
        .arg("-tf")
        .arg(&archive)
        .output()
        .unwrap();
    assert!(listing.status.success(), "GNU tar -tf of the archive");
    let names = text(&listing.stdout);
    assert!(
        !names.lines().any(|l| l.ends_with("d0/f000")),
        "tar -c must leave out a file it could not read:\n{names}"
    );
    let x = work.join("x");
    std::fs::create_dir(&x).unwrap();
    let gnu = Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&x)
        .status()
        .unwrap();
    assert!(gnu.success(), "GNU tar extracts the archive");
    assert_no_lying_files("tar -c as nobody, extracted", &want, &x.join("src"));
}

// ---------------------------------------------------------------------------------------------
// kill -9

/// sync and tar -c killed with SIGKILL at several points: what is left never lies (no file
/// with its source's size and mtime and other bytes; no archive that GNU tar reads as
/// complete under the final name), and a rerun converges.
#[test]
fn kill_9_at_several_points_leaves_nothing_that_lies() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let want = make_source(&src, 60, 13);
    // How long a whole sync takes here, to kill within it.
    let t0 = Instant::now();
    let full = tmp.path().join("full");
    Tool::new("sync")
        .arg(&src)
        .arg(&full)
        .run()
        .assert_status(0);
    let whole = t0.elapsed();
    std::fs::remove_dir_all(&full).unwrap();
    for (i, frac) in [0.1, 0.3, 0.5, 0.8].into_iter().enumerate() {
        let dest = tmp.path().join(format!("dest{i}"));
        let mut cmd = Tool::new("sync").command();
        cmd.arg(&src)
            .arg(&dest)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(whole.mul_f64(frac));
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
        child.wait().unwrap();
        let context = format!("sync killed at {:.0}% of its time", frac * 100.0);
        assert_no_lying_files(&context, &want, &dest);
        Tool::new("sync")
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        tree::assert_equal_in(
            &format!("{context}, then sync"),
            &want,
            &tree::snapshot(&dest),
            Compare::META,
        );
    }
    // tar -c: an archive killed before it was finished must not pass for a complete one.
    let t0 = Instant::now();
    let probe = tmp.path().join("probe.tar");
    Tool::new("tar")
        .args(["-c", "-f"])
        .arg(&probe)
        .arg(&src)
        .run()
        .assert_status(0);
    let whole = t0.elapsed();
    for (i, frac) in [0.2, 0.5, 0.8].into_iter().enumerate() {
        let archive = tmp.path().join(format!("killed{i}.tar"));
        let mut cmd = Tool::new("tar").args(["-c", "-f"]).command();
        cmd.arg(&archive)
            .arg(&src)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(whole.mul_f64(frac));
        let finished = child.try_wait().unwrap().is_some();
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
        child.wait().unwrap();
        if finished || !archive.exists() {
            continue;
        }
        // Whatever is there under the final name must be an archive GNU tar reads whole.
        let x = tmp.path().join(format!("x{i}"));
        std::fs::create_dir(&x).unwrap();
        let gnu = Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&x)
            .output()
            .unwrap();
        if gnu.status.success() {
            let inner = find_src_copy(&x, "src").unwrap_or_else(|| {
                panic!("tar -c killed at {:.0}%: GNU tar reads the archive without error, but it holds no source tree", frac * 100.0)
            });
            tree::assert_equal_in(
                &format!(
                    "tar -c killed at {:.0}%: an archive GNU tar reads without error must be complete",
                    frac * 100.0
                ),
                &want,
                &tree::snapshot(&inner),
                Compare::CONTENT,
            );
        }
    }
}

/// The directory named `name` at or below `dir` (GNU tar extracts the archive's stored path).
fn find_src_copy(dir: &Path, name: &str) -> Option<PathBuf> {
    if dir.file_name().is_some_and(|n| n == name) {
        return Some(dir.to_path_buf());
    }
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        if e.file_type().ok()?.is_dir() {
            if let Some(p) = find_src_copy(&e.path(), name) {
                return Some(p);
            }
        }
    }
    None
}
