//! `tar -x --memory-limit SIZE --tmpdir DIR` (issue 34): beyond the limit the entries are
//! extracted a piece at a time and the directories' metadata wait in a spill file for the end.
//! At a 4 KiB limit, at np 1, `--ranks 3` and `mpirun -np 2`, with the archive's index and
//! with a scan, all entries and a selection: the tree (contents, modes, mtimes, symlinks, hard
//! links), the summary line and the exit status are the unlimited run's. A full TMPDIR is an
//! error naming it (exit 1); TMPDIR inside the target is refused; SIGTERM while spilling stops
//! the run with no spill file left (exit 1).

use crate::cmp_spill::Mount;
use crate::spill::{names, spill_files_open, term_while_spilling};
use mfu_tests::tar_tools::gnu_tar;
use mfu_tests::tree::{self, Compare, Tree};
use mfu_tests::{launches, Tool};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A tree under `dir`: `n` small files over nested directories with their own modes and
/// mtimes, a file big enough to span pieces and ranks, symlinks, hard links (one across
/// directories) and a name that is not UTF-8.
fn source(dir: &Path, n: usize) -> PathBuf {
    let src = dir.join("src");
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    let put = |rel: &[u8], data: &[u8]| {
        let p = src.join(OsStr::from_bytes(rel));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(t0 + Duration::from_secs(rel.len() as u64))
            .unwrap();
    };
    for i in 0..n {
        put(
            format!("d{}/e{}/f{i:04}", i % 7, i % 4).as_bytes(),
            format!("file {i}\n").as_bytes(),
        );
    }
    put(b"big/data.bin", &mfu_tests::noise(3, 300 << 10));
    put(b"d1/odd-\xff\xfe", b"odd\n");
    std::os::unix::fs::symlink("../big/data.bin", src.join("d2/to-big")).unwrap();
    std::os::unix::fs::symlink("nowhere", src.join("dangling")).unwrap();
    std::fs::hard_link(src.join("d0/e0/f0000"), src.join("d3/hard")).unwrap();
    std::fs::hard_link(src.join("d0/e0/f0000"), src.join("d0/e0/hard2")).unwrap();
    // Directories last, deepest first: their modes and times are what the archive keeps.
    for (k, (rel, n)) in tree::snapshot(&src).into_iter().rev().enumerate() {
        if n.kind == tree::Kind::Dir {
            let p = src.join(OsStr::from_bytes(&rel));
            let mode = if k % 3 == 0 { 0o750 } else { 0o755 };
            std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .unwrap();
            tree::set_mtime(&p, (1_500_000_000 + k as i64 * 1000, 0));
        }
    }
    src
}

/// The archives of `src` under `dir`: mfu-rs's (with its index) and GNU tar's (scanned).
fn archives(dir: &Path, src: &Path) -> Vec<(&'static str, PathBuf)> {
    let indexed = dir.join("mfu.tar");
    Tool::new("tar")
        .args(["-c", "-q", "-f"])
        .arg(&indexed)
        .arg("-C")
        .arg(dir)
        .arg("src")
        .expect(0);
    let scanned = dir.join("gnu.tar");
    let st = gnu_tar()
        .arg("-cf")
        .arg(&scanned)
        .arg("-C")
        .arg(src.parent().unwrap())
        .arg("src")
        .status()
        .unwrap();
    assert!(st.success());
    vec![("index", indexed), ("scan", scanned)]
}

/// A fresh, empty directory `name` under `dir`.
fn fresh(dir: &Path, name: &str) -> PathBuf {
    let d = dir.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `tar -x -f ARCHIVE -C OUT [MEMBERS...]`.
fn extract(archive: &Path, out: &Path, members: &[&str]) -> Tool {
    Tool::new("tar")
        .args(["-x", "-p", "-f"])
        .arg(archive)
        .arg("-C")
        .arg(out)
        .args(members)
}

/// The extracted tree, without its root.
fn extracted(out: &Path) -> Tree {
    let mut t = tree::snapshot(out);
    t.remove(&b""[..]);
    t
}

/// The summary line of a run's stdout, less its target directory, time and rate.
fn summary(stdout: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Extracted "))
        .unwrap_or_else(|| panic!("no summary line in {stdout}"));
    let (head, tail) = line.split_once(" into ").unwrap();
    let tail = tail.split_once(")").map_or("", |(_, t)| t);
    format!("{head}{tail}")
}

/// mfu-rs's lines of a run's stderr (not mpirun's), its target directory `out` written `OUT`,
/// sorted (ranks say theirs in any order).
fn messages(stderr: &str, out: &Path) -> Vec<String> {
    let out = out.display().to_string();
    let mut lines: Vec<String> = stderr
        .lines()
        .filter(|l| l.starts_with("mfu-rs "))
        .map(|l| l.replace(&out, "OUT"))
        .collect();
    lines.sort();
    lines
}

#[test]
fn within_a_tiny_limit_the_tree_summary_and_status_are_the_unlimited_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 240);
    let spill = fresh(tmp.path(), "spill");
    for (how, archive) in archives(tmp.path(), &src) {
        for members in [&[][..], &["src/d1", "src/big", "src/d3/hard"][..]] {
            for (name, launch) in launches() {
                let what = format!("{name}, {how}, members {members:?}");
                let free = fresh(tmp.path(), "free");
                let want = launch(extract(&archive, &free, members)).run();
                let out = fresh(tmp.path(), "out");
                let got = launch(extract(&archive, &out, members))
                    .args(["--memory-limit", "4k", "--tmpdir"])
                    .arg(&spill)
                    .run();
                assert_eq!(got.code(), want.code(), "{what}: {}", got.stderr_str());
                assert_eq!(
                    summary(&got.stdout_str()),
                    summary(&want.stdout_str()),
                    "{what}"
                );
                assert_eq!(
                    messages(&got.stderr_str(), &out),
                    messages(&want.stderr_str(), &free),
                    "{what}"
                );
                got.stdout_contains("Memory limit: 4.000 KiB per rank (--memory-limit)")
                    .stdout_contains(&format!(" to {} (at most ", spill.display()))
                    .stdout_contains(" pieces of at most 11 entries per rank");
                assert!(!want.stdout_str().contains("Spilled:"), "{what}");
                let (mut a, mut b) = (extracted(&free), extracted(&out));
                if !members.is_empty() {
                    // Parents made on the way, not selected: their mtimes are the run's.
                    for t in [&mut a, &mut b] {
                        t.remove(&b"src"[..]);
                        t.remove(&b"src/d3"[..]);
                    }
                }
                assert!(
                    a.len() > if members.is_empty() { 250 } else { 20 },
                    "{what}"
                );
                tree::assert_equal_in(&what, &a, &b, Compare::META);
                assert_eq!(names(&spill), Vec::<PathBuf>::new(), "{what}");
            }
        }
    }
}

#[test]
fn below_the_limit_nothing_spills_and_the_json_report_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 20);
    let (_, archive) = archives(tmp.path(), &src).remove(0);
    let out = fresh(tmp.path(), "out");
    let run = extract(&archive, &out, &[])
        .args(["--memory-limit", "64M", "--json"])
        .expect(0);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(
        json["memory_limit"], "64.000 MiB per rank (--memory-limit)",
        "{json}"
    );
    assert!(json["pieces"].is_null(), "{json}");
    let out = fresh(tmp.path(), "out2");
    let run = extract(&archive, &out, &[])
        .args(["--memory-limit", "1k", "--json"])
        .expect(0);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(json["pieces"]["pieces"].as_u64().unwrap() > 1, "{json}");
}

#[test]
fn an_archive_with_a_name_twice_is_extracted_whole_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 60);
    let (_, archive) = archives(tmp.path(), &src).remove(1);
    // A second version of a file, and a directory where a symlink was (tar keeps the last).
    std::fs::write(src.join("d0/e0/f0000"), b"second version\n").unwrap();
    std::fs::remove_file(src.join("dangling")).unwrap();
    std::fs::create_dir(src.join("dangling")).unwrap();
    let st = gnu_tar()
        .arg("-rf")
        .arg(&archive)
        .arg("-C")
        .arg(tmp.path())
        .args(["src/d0/e0/f0000", "src/dangling"])
        .status()
        .unwrap();
    assert!(st.success());
    for (name, launch) in launches() {
        let free = fresh(tmp.path(), "free");
        let want = launch(extract(&archive, &free, &[])).run();
        let out = fresh(tmp.path(), "out");
        let got = launch(extract(&archive, &out, &[]))
            .args(["--memory-limit", "4k"])
            .run();
        assert_eq!(got.code(), want.code(), "{name}: {}", got.stderr_str());
        got.stderr_contains("some names occur more than once (tar keeps the last)");
        assert_eq!(summary(&got.stdout_str()), summary(&want.stdout_str()));
        tree::assert_equal_in(name, &extracted(&free), &extracted(&out), Compare::META);
        assert_eq!(
            std::fs::read(out.join("src/d0/e0/f0000")).unwrap(),
            b"second version\n"
        );
    }
}

#[test]
fn a_tmpdir_inside_the_target_is_refused_before_anything_is_extracted() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 20);
    let (_, archive) = archives(tmp.path(), &src).remove(0);
    for (name, launch) in launches() {
        let out = fresh(tmp.path(), "out");
        let inside = out.join("spill");
        std::fs::create_dir(&inside).unwrap();
        let run = launch(extract(&archive, &out, &[]))
            .args(["--memory-limit", "4k", "--tmpdir"])
            .arg(&inside)
            .run();
        assert_ne!(run.code(), Some(0), "{name}");
        run.stderr_contains("--tmpdir");
        assert_eq!(names(&out), [inside.clone()], "{name}");
    }
}

#[test]
fn a_full_tmpdir_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 1200);
    // Directories enough for their records to outgrow the tmpfs.
    for i in 0..1500 {
        std::fs::create_dir_all(src.join(format!("many/dir-with-a-long-name-{i:05}"))).unwrap();
    }
    let (_, archive) = archives(tmp.path(), &src).remove(0);
    let full = tmp.path().join("full");
    let _mount = Mount::tmpfs(&full, "64k");
    for (name, launch) in launches() {
        let out = fresh(tmp.path(), "out");
        let run = launch(extract(&archive, &out, &[]))
            .args(["--memory-limit", "4k", "--tmpdir"])
            .arg(&full)
            .run()
            .assert_status(1);
        run.stderr_contains(&format!("TMPDIR {}", full.display()))
            .stderr_contains("No space left on device")
            .stderr_contains("no directory has its archived metadata");
        assert_eq!(names(&full), Vec::<PathBuf>::new(), "{name}");
    }
}

#[test]
fn sigterm_while_spilling_stops_with_no_spill_file_left() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), 4000);
    let (_, archive) = archives(tmp.path(), &src).remove(0);
    let spill = fresh(tmp.path(), "spill");
    for (name, launch) in launches() {
        let out = fresh(tmp.path(), "out");
        let mut cmd = launch(extract(&archive, &out, &[]))
            .args(["--memory-limit", "1k", "--tmpdir"])
            .arg(&spill)
            .command();
        let Some(done) = term_while_spilling(&mut cmd, &spill, 60) else {
            panic!("{name}: ended before spilling");
        };
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains("interrupted"), "{name}: {stderr}");
        assert_eq!(names(&spill), Vec::<PathBuf>::new(), "{name}");
        assert_eq!(
            spill_files_open(&spill),
            0,
            "{name}: spill files still open"
        );
    }
}
