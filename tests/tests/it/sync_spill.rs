//! `sync SRC DEST --memory-limit SIZE` (issue 34): beyond the limit both lists spill and SRC
//! and DEST are paired by a merge join. At a tiny limit, at np 1, `--ranks 3` and `mpirun -np
//! 2`, DEST's tree, the report, the messages, the `--dryrun` actions and the exit status are
//! those of the unlimited run: into an empty DEST, unchanged, and with files changed, added and
//! removed, type conflicts and hard links, with and without `--delete`. Options whose pairing
//! is not out of core keep the lists in memory and say so; a full TMPDIR is an error naming it
//! with DEST unchanged; TMPDIR inside a tree is refused; SIGTERM while spilling exits 1 with no
//! spill file left, and a rerun converges.

use crate::spill::{spill_files_open, term_while_spilling, Mount};
use mfu_tests::tree::{self, Compare};
use mfu_tests::{launches, Tool};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The limit that makes every tree of these tests spill.
const TINY: &str = "4k";

/// Write `data` at `p` (parents made) with a fixed mtime.
fn put(p: &Path, data: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(t0).unwrap();
}

/// SRC under `dir`: `n` files in nested directories, a name that is not UTF-8, symlinks and a
/// group of hard links.
fn source(dir: &Path, n: usize) -> PathBuf {
    let src = dir.join("src");
    for i in 0..n {
        put(
            &src.join(format!("d{}/e{}/file-{i:04}", i % 5, i % 3)),
            format!("content {i}\n").as_bytes(),
        );
    }
    put(
        &src.join(OsStr::from_bytes(b"d1/odd-\xff\xfe")),
        b"odd name\n",
    );
    std::os::unix::fs::symlink("file-0000", src.join("d0/e0/link")).unwrap();
    std::os::unix::fs::symlink("/nowhere", src.join("d1/dangling")).unwrap();
    put(&src.join("links/a"), b"linked\n");
    std::fs::create_dir_all(src.join("links/sub")).unwrap();
    std::fs::hard_link(src.join("links/a"), src.join("links/b")).unwrap();
    std::fs::hard_link(src.join("links/a"), src.join("links/sub/c")).unwrap();
    src
}

/// Make DEST (a synced copy of SRC) differ: data changed (size, mtime), entries only in DEST
/// (a file, a directory with files), entries missing, a mode changed, type conflicts both ways
/// (a file where SRC has a directory, a directory where SRC has a file), a hard link broken.
fn change(dest: &Path) {
    put(&dest.join("d0/e0/file-0000"), b"content 0, longer\n");
    std::fs::File::options()
        .write(true)
        .open(dest.join("d2/e2/file-0002"))
        .unwrap()
        .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_060))
        .unwrap();
    put(&dest.join("d3/only-dest.txt"), b"dest only\n");
    put(&dest.join("extra/deep/x"), b"x\n");
    put(&dest.join("extra/y"), b"y\n");
    for gone in ["d4/e1/file-0004", "d1/e1/file-0001"] {
        std::fs::remove_file(dest.join(gone)).unwrap();
    }
    std::fs::remove_dir_all(dest.join("d2/e0")).unwrap();
    let p = dest.join("d0/e1/file-0010");
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // SRC's directory d4/e2 is a file in DEST; SRC's file d3/e0/file-0003 a directory.
    std::fs::remove_dir_all(dest.join("d4/e2")).unwrap();
    put(&dest.join("d4/e2"), b"a file\n");
    std::fs::remove_file(dest.join("d3/e0/file-0003")).unwrap();
    put(&dest.join("d3/e0/file-0003/inside"), b"in a dir\n");
    std::fs::remove_file(dest.join("links/b")).unwrap();
    put(&dest.join("links/b"), b"linked\n");
    // Extended attributes alone differ (-X): on a file, a directory, none on SRC's side.
    tree::set_xattr(&dest.join("d0/e2/file-0005"), "user.mfu", b"dest");
    tree::set_xattr(&dest.join("d1/e2"), "user.mfu", b"dest");
}

/// A sync of `src` into `dest` by `launch`, with `extra` arguments.
fn sync(launch: impl Fn(Tool) -> Tool, src: &Path, dest: &Path, extra: &[&str]) -> mfu_tests::Run {
    launch(Tool::new("sync"))
        .args(extra)
        .arg(src)
        .arg(dest)
        .run()
}

/// What a run says that must not depend on the limit: stdout without the memory rows and the
/// time, stderr's lines as a set, `dest` written as DEST.
fn said(run: &mfu_tests::Run, dest: &Path) -> (Option<i32>, Vec<String>, BTreeSet<String>) {
    let d = dest.to_str().unwrap();
    let stdout = run
        .stdout_str()
        .lines()
        .filter(|l| !l.starts_with("Memory limit: ") && !l.starts_with("Spilled: "))
        .map(|l| match l.find(" in ") {
            Some(i) if l.starts_with("Synced: ") => l[..i].to_string(),
            _ => l.to_string(),
        })
        .map(|l| l.replace(d, "DEST"))
        .collect::<Vec<_>>();
    let mut lines = stdout;
    // --dryrun's actions come rank by rank: their order depends on who pairs what.
    lines.sort();
    // The tool's messages, not mpirun's (which name its job).
    let stderr = run
        .stderr_str()
        .lines()
        .filter(|l| l.starts_with("mfu-rs "))
        .map(|l| l.replace(d, "DEST"))
        .collect();
    (run.code(), lines, stderr)
}

/// Sync `src` into copies of `before` (absent: into a new DEST) with and without the tiny
/// limit, by every launch, and compare what they did.
fn same_as_unlimited(dir: &Path, src: &Path, before: Option<&Path>, extra: &[&str], what: &str) {
    same_as_unlimited_by(dir, src, before, extra, what, |t| t);
}

/// [`same_as_unlimited`], each run's tool prepared by `prepare` (as nobody...) too.
fn same_as_unlimited_by(
    dir: &Path,
    src: &Path,
    before: Option<&Path>,
    extra: &[&str],
    what: &str,
    prepare: impl Fn(Tool) -> Tool,
) {
    for (name, launch) in launches() {
        let launch = |t: Tool| prepare(launch(t));
        let (unlimited, limited) = (dir.join("unlimited"), dir.join("limited"));
        for d in [&unlimited, &limited] {
            let _ = std::fs::remove_dir_all(d);
            if let Some(b) = before {
                let st = std::process::Command::new("cp")
                    .arg("-a")
                    .arg(b)
                    .arg(d)
                    .status()
                    .unwrap();
                assert!(st.success());
            }
        }
        let want = sync(launch, src, &unlimited, extra);
        let limit = [extra, &["--memory-limit", TINY]].concat();
        let got = sync(launch, src, &limited, &limit);
        let ctx = format!("{what}, {name}");
        // Into a DEST that does not exist too: SRC's list and the plan spill.
        got.stdout_contains("Spilled: ");
        assert_eq!(
            said(&got, &limited),
            said(&want, &unlimited),
            "{ctx}\n--- limited:\n{}{}\n--- unlimited:\n{}{}",
            got.stdout_str(),
            got.stderr_str(),
            want.stdout_str(),
            want.stderr_str()
        );
        if !extra.contains(&"--dryrun") {
            tree::assert_equal_in(
                &ctx,
                &tree::snapshot(&unlimited),
                &tree::snapshot(&limited),
                Compare::META,
            );
        }
    }
}

#[test]
fn a_sync_beyond_the_memory_limit_does_what_the_unlimited_run_does() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 300);
    let synced = tmp.path().join("synced");
    sync(|t| t, &src, &synced, &[]).assert_status(0);
    tree::assert_equal(
        &tree::snapshot(&src),
        &tree::snapshot(&synced),
        Compare::META,
    );
    let changed = tmp.path().join("changed");
    assert!(std::process::Command::new("cp")
        .arg("-a")
        .arg(&synced)
        .arg(&changed)
        .status()
        .unwrap()
        .success());
    change(&changed);
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    same_as_unlimited(&work, &src, None, &[], "into a new DEST");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    same_as_unlimited(&work, &src, Some(&empty), &[], "into an empty DEST");
    same_as_unlimited(
        &work,
        &src,
        Some(&empty),
        &["--link-dest", synced.to_str().unwrap()],
        "into an empty DEST, --link-dest",
    );
    same_as_unlimited(&work, &src, Some(&synced), &[], "unchanged");
    same_as_unlimited(
        &work,
        &src,
        Some(&synced),
        &["--delete"],
        "unchanged, --delete",
    );
    same_as_unlimited(&work, &src, Some(&changed), &[], "changed");
    same_as_unlimited(
        &work,
        &src,
        Some(&changed),
        &["--delete"],
        "changed, --delete",
    );
    same_as_unlimited(
        &work,
        &src,
        Some(&changed),
        &["--delete", "--dryrun"],
        "changed, --delete --dryrun",
    );
    same_as_unlimited(&work, &src, Some(&changed), &["--contents"], "changed, -c");
    same_as_unlimited(
        &work,
        &src,
        Some(&changed),
        &["-X", "all"],
        "changed, -X all",
    );
}

#[test]
fn an_unchanged_sync_beyond_the_limit_changes_nothing_and_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 200);
    let dest = tmp.path().join("dest");
    sync(|t| t, &src, &dest, &[]).assert_status(0);
    for (name, launch) in launches() {
        let before = tree::snapshot(&dest);
        let run = sync(launch, &src, &dest, &["--delete", "--memory-limit", TINY]);
        let run = run.assert_status(0);
        run.stdout_contains("Memory limit: 4.000 KiB per rank (--memory-limit)")
            .stdout_contains("Spilled: ")
            .stdout_contains("Synced: 0 created, 0 updated, 0 deleted, 0 metadata fixed, 0 linked");
        let after = tree::snapshot(&dest);
        tree::assert_equal_in(name, &before, &after, Compare::META);
        assert!(tree::ctime_changes(&before, &after).is_empty(), "{name}");
    }
}

#[test]
fn options_that_need_the_lists_in_memory_say_so_and_sync_as_below_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 100);
    for (name, launch) in launches() {
        let dest = tmp.path().join("dest");
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::create_dir(&dest).unwrap();
        let list = tmp.path().join("only-src.mfu");
        let run = launch(Tool::new("sync"))
            .args(["--memory-limit", TINY, "-o"])
            .arg(format!("EXIST=ONLY_SRC:{}", list.display()))
            .arg(&src)
            .arg(&dest)
            .run();
        let run = run.assert_status(0);
        run.stderr_contains("--memory-limit: --output holds the lists in memory");
        assert_eq!(
            run.stderr_str()
                .matches("holds the lists in memory")
                .count(),
            1,
            "{name}: said once\n{}",
            run.stderr_str()
        );
        assert!(!run.stdout_str().contains("Spilled: "), "{name}");
        assert!(list.exists(), "{name}");
        tree::assert_equal_in(
            name,
            &tree::snapshot(&src),
            &tree::snapshot(&dest),
            Compare::META,
        );
        // A warning, not a failure: the JSON report names no failure.
        let run = launch(Tool::new("sync"))
            .args(["--json", "--memory-limit", TINY, "--state"])
            .arg(tmp.path().join("state"))
            .args(["--verify"])
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        run.stderr_contains("--memory-limit: --state holds the lists in memory");
        let v: serde_json::Value = serde_json::from_str(&run.stdout_str()).unwrap();
        assert_eq!(v["failures"], serde_json::json!([]), "{name}: {v}");
    }
}

#[test]
fn a_full_tmpdir_is_an_error_naming_it_and_dest_is_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 2000);
    let dest = tmp.path().join("dest");
    put(&dest.join("d0/e0/file-0000"), b"old\n");
    put(&dest.join("only-dest"), b"kept\n");
    let full = tmp.path().join("full");
    let _mount = Mount::tmpfs(&full, "64k");
    for (name, launch) in launches() {
        let before = tree::snapshot(&dest);
        let run = sync(
            launch,
            &src,
            &dest,
            &[
                "--delete",
                "--memory-limit",
                "8k",
                "--tmpdir",
                full.to_str().unwrap(),
            ],
        );
        let run = run.assert_status(1);
        run.stderr_contains(&format!("TMPDIR {}", full.display()))
            .stderr_contains("No space left on device");
        run.stdout_contains("Spill failed (named above): nothing changed");
        assert!(!run.stdout_str().contains("Synced: "), "{name}");
        let after = tree::snapshot(&dest);
        tree::assert_equal_in(name, &before, &after, Compare::META);
        assert!(tree::ctime_changes(&before, &after).is_empty(), "{name}");
        assert_eq!(std::fs::read_dir(&full).unwrap().count(), 0, "{name}");
    }
}

#[test]
fn a_tmpdir_inside_a_tree_synced_is_refused_before_any_change() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 50);
    let dest = tmp.path().join("dest");
    put(&dest.join("only-dest"), b"kept\n");
    std::fs::create_dir_all(dest.join("spill")).unwrap();
    std::fs::create_dir_all(src.join("spill")).unwrap();
    let before = tree::snapshot(&dest);
    for inside in [dest.join("spill"), src.join("spill")] {
        // --tmpdir: a usage error; $TMPDIR: the spill refuses it, nothing changed either way.
        let run = Tool::new("sync")
            .args(["--delete", "--memory-limit", TINY, "--tmpdir"])
            .arg(&inside)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(2);
        run.stderr_contains("lies inside");
        let run = Tool::new("sync")
            .args(["--delete", "--memory-limit", TINY])
            .env("TMPDIR", &inside)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(1);
        run.stderr_contains("lies inside");
        let after = tree::snapshot(&dest);
        tree::assert_equal(&before, &after, Compare::META);
        assert!(tree::ctime_changes(&before, &after).is_empty());
    }
}

#[test]
fn sigterm_while_spilling_exits_1_leaves_no_spill_file_and_a_rerun_converges() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 20_000);
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    for (name, launch) in launches() {
        let dest = tmp.path().join("dest");
        let _ = std::fs::remove_dir_all(&dest);
        // An existing DEST: into a new one nothing spills.
        std::fs::create_dir(&dest).unwrap();
        let mut cmd = launch(Tool::new("sync"))
            .args(["--delete", "--memory-limit", TINY, "--tmpdir"])
            .arg(&spill)
            .arg(&src)
            .arg(&dest)
            .command();
        let done = term_while_spilling(&mut cmd, &spill, 120)
            .unwrap_or_else(|| panic!("{name}: ended before spilling"));
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(
            done.status.code(),
            Some(1),
            "{name}: {:?}\n{stderr}",
            done.status
        );
        assert!(stderr.contains("interrupted"), "{name}: {stderr}");
        assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0, "{name}");
        assert_eq!(spill_files_open(&spill), 0, "{name}: spill files open");
        sync(launch, &src, &dest, &["--delete", "--memory-limit", TINY])
            .assert_status(0)
            .stdout_contains("Spilled: ");
        tree::assert_equal_in(
            name,
            &tree::snapshot(&src),
            &tree::snapshot(&dest),
            Compare::META,
        );
    }
}

#[test]
fn delete_after_an_incomplete_source_walk_is_refused_beyond_the_limit_too() {
    let tmp = mfu_tests::nobody_tempdir();
    let src = source(tmp.path(), 200);
    put(&src.join("secret/hidden.txt"), b"hidden\n");
    let dest = tmp.path().join("dest");
    sync(|t| t, &src, &dest, &[]).assert_status(0);
    put(&dest.join("extra.txt"), b"only in dest\n");
    put(&dest.join("secret/old.txt"), b"only in dest too\n");
    put(&dest.join("d1/b.txt"), b"dest only, readable part\n");
    put(&src.join("d2/new.txt"), b"new in src\n");
    // All of it belongs to nobody, so preserving owners is no failure of its own.
    tree::chown_tree(tmp.path(), 65534, 65534);
    tree::chmod(&src.join("secret"), 0o000);
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    tree::chown_tree(&work, 65534, 65534);
    let home = tmp.path().to_path_buf();
    same_as_unlimited_by(
        &work,
        &src,
        Some(&dest),
        &["--delete"],
        "--delete after an incomplete walk",
        |t| t.as_nobody().env("HOME", &home),
    );
    // What the comparison saw: the refusal, and nothing DEST alone has deleted.
    let limited = work.join("limited");
    for f in ["extra.txt", "secret/old.txt", "d1/b.txt"] {
        assert!(
            limited.join(f).exists(),
            "{f} deleted after an incomplete walk"
        );
    }
    assert!(limited.join("d2/new.txt").exists());
}

/// Into a DEST that does not exist, the plan of what is created (all of SRC) waits in spill
/// files, not in memory: at the pause between the plan and the copy, the ranks hold spill files
/// open (the walks' and the join's are gone by then), and the copy, reading its plan back a
/// piece at a time, makes the whole tree.
#[test]
fn a_sync_into_a_new_dest_copies_from_a_plan_that_waits_in_spill_files() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 300);
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let pause = tmp.path().join("pause");
    let (ready, go) = (tmp.path().join("pause.ready"), tmp.path().join("pause.go"));
    for (name, launch) in launches() {
        let dest = tmp.path().join("dest");
        let _ = std::fs::remove_dir_all(&dest);
        let _ = std::fs::remove_file(&ready);
        let _ = std::fs::remove_file(&go);
        let mut cmd = launch(Tool::new("sync"))
            .args(["--memory-limit", TINY, "--tmpdir"])
            .arg(&spill)
            .arg(&src)
            .arg(&dest)
            .command();
        cmd.env("MFU_RS_TEST_PAUSE_AFTER_LISTING", &pause)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = mfu_tests::spawn(&mut cmd);
        let start = std::time::Instant::now();
        while !ready.exists() {
            assert!(start.elapsed().as_secs() < 60, "{name}: no pause");
            std::thread::sleep(Duration::from_millis(5));
        }
        let open = crate::spill::spill_files_open(&spill);
        std::fs::write(&go, b"").unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        assert!(
            open > 0,
            "{name}: no spill file open between the plan and the copy"
        );
        tree::assert_equal_in(
            name,
            &tree::snapshot(&src),
            &tree::snapshot(&dest),
            Compare::META,
        );
        assert_eq!(crate::spill::spill_files_open(&spill), 0, "{name}");
        assert!(
            std::fs::read_dir(&spill).unwrap().next().is_none(),
            "{name}"
        );
    }
}
