//! `cmp SRC DEST --memory-limit SIZE` (issue 34): beyond the limit both lists spill and are
//! paired by a merge join; at a tiny limit, at np 1, `--ranks 3` and `mpirun -np 2`, the
//! report, the JSON report, the exit status and the `-o` lists (as sets: their order differs)
//! are those of the unlimited run. A full TMPDIR is an error naming it (exit 1); TMPDIR inside
//! a tree compared is refused.

use mfu_tests::{launches, Tool};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// SRC and DEST under `dir`: `n` files in nested directories, equal in both but for one of
/// each kind of difference (only in SRC, only in DEST, size, mtime, content of the same size,
/// type, permissions) and names that are not UTF-8.
fn trees(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for root in [&src, &dst] {
        for i in 0..n {
            let d = root.join(format!("d{}/e{}", i % 5, i % 3));
            std::fs::create_dir_all(&d).unwrap();
            let f = d.join(format!("file-{i:04}"));
            std::fs::write(&f, format!("content {i}\n")).unwrap();
            let file = std::fs::File::options().write(true).open(&f).unwrap();
            file.set_modified(t0).unwrap();
        }
        let odd = root.join(OsStr::from_bytes(b"d1/odd-\xff\xfe"));
        std::fs::write(&odd, b"odd name\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&odd)
            .unwrap()
            .set_modified(t0)
            .unwrap();
    }
    let put = |p: PathBuf, data: &[u8]| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(t0).unwrap();
    };
    put(src.join("only/in/src.txt"), b"src only\n");
    put(src.join(OsStr::from_bytes(b"d2/only-src-\xff")), b"x\n");
    put(dst.join("d3/only-dest.txt"), b"dest only\n");
    // Size, content (same size), mtime, type, permissions.
    put(dst.join("d0/e0/file-0000"), b"content 0, longer\n");
    put(dst.join("d1/e1/file-0001"), b"CONTENT 1\n");
    let m = dst.join("d2/e2/file-0002");
    std::fs::File::options()
        .write(true)
        .open(&m)
        .unwrap()
        .set_modified(t0 + Duration::from_secs(60))
        .unwrap();
    let t = dst.join("d3/e0/file-0003");
    std::fs::remove_file(&t).unwrap();
    std::fs::create_dir(&t).unwrap();
    std::fs::set_permissions(
        dst.join("d4/e1/file-0004"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    put(
        dst.join(OsStr::from_bytes(b"d1/odd-\xff\xfe")),
        b"ODD NAME\n",
    );
    // Directories' times last: their entries are written.
    for root in [&src, &dst] {
        for e in walkdir(root) {
            if e.is_dir() {
                std::fs::File::open(&e).unwrap().set_modified(t0).unwrap();
            }
        }
    }
    (src, dst)
}

/// Every path under `root` (itself included).
fn walkdir(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if out[i].is_dir() && !out[i].is_symlink() {
            let mut kids: Vec<PathBuf> = std::fs::read_dir(&out[i])
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            kids.sort();
            out.extend(kids);
        }
        i += 1;
    }
    out
}

/// A list's records, path and metadata, as a set (the order of a spilled run's list differs).
fn records(path: &Path) -> BTreeSet<(Vec<u8>, Option<flist::Meta>)> {
    let file = path.as_os_str().as_bytes().to_vec();
    let lists = steal::local::run(1, |comm| flist::io::read(comm, &file).expect("read list"));
    lists[0].iter().map(|e| (e.path.to_vec(), e.meta)).collect()
}

/// The report without the lines only a limited run has, nor the row of access times (which
/// the reads of each run may change).
fn without_spill_lines(report: &str) -> String {
    report
        .lines()
        .filter(|l| !l.starts_with("Memory limit: ") && !l.starts_with("Spilled: "))
        .filter(|l| !l.trim_start().starts_with("ATIME "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The JSON report without what differs between runs (times) or only a limited run has.
fn json_core(stdout: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(stdout).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["seconds", "memory_limit", "spilled", "elapsed"] {
        o.remove(k);
    }
    if let Some(s) = o.get_mut("summary").and_then(|s| s.as_object_mut()) {
        s.remove("seconds");
    }
    v
}

/// `cmp` of `src` and `dst` with three `-o` lists named `tag` in `dir`.
fn cmp(src: &Path, dst: &Path, dir: &Path, tag: &str, text: bool) -> Tool {
    let out = |name: &str| dir.join(format!("{tag}-{name}"));
    let mut t = Tool::new("cmp").args(["-b", "--no-checkpoint", "--noatime"]);
    if text {
        t = t.arg("-t");
    }
    for (expr, name) in [
        ("EXIST=ONLY_SRC", "only-src"),
        ("EXIST=ONLY_DEST", "only-dest"),
        (
            "EXIST=COMMON@CONTENT=DIFFER,SIZE=DIFFER,TYPE=DIFFER",
            "changed",
        ),
        ("MTIME=DIFFER,PERM=DIFFER", "meta"),
    ] {
        let mut o = std::ffi::OsString::from(format!("{expr}:"));
        o.push(out(name));
        t = t.arg("-o").arg(o);
    }
    t.arg(src).arg(dst)
}

fn names(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_compare_beyond_the_memory_limit_reports_and_lists_what_the_unlimited_run_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = trees(tmp.path(), 240);
    let lists = tmp.path().join("lists");
    std::fs::create_dir(&lists).unwrap();
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    for text in [false, true] {
        let want = cmp(&src, &dst, &lists, "want", text).run().assert_status(1);
        let want_out = want.stdout_str();
        assert!(!want_out.contains("Spilled"), "{want_out}");
        for needle in [
            "Number of items that exist only in source directory: N/A (Src: 4 Dest: 0)",
            "Number of items that exist only in destination directory: N/A (Src: 0 Dest: 1)",
        ] {
            assert!(want_out.contains(needle), "{needle}: {want_out}");
        }
        // Below the limit: the in-memory path, its limit shown.
        let roomy = cmp(&src, &dst, &lists, "roomy", text)
            .args(["--memory-limit", "1G"])
            .run()
            .assert_status(1);
        roomy.stdout_contains("Memory limit: 1.000 GiB per rank (--memory-limit)");
        assert!(!roomy.stdout_str().contains("Spilled"));
        for (name, launch) in launches() {
            let got = launch(cmp(&src, &dst, &lists, "got", text))
                .args(["--memory-limit", "4k", "--tmpdir"])
                .arg(&spill)
                .run()
                .assert_status(1);
            got.stdout_contains("Memory limit: 4.000 KiB per rank (--memory-limit)")
                .stdout_contains(&format!("to {} (at most", spill.display()));
            assert_eq!(
                without_spill_lines(&got.stdout_str()).replace("/got-", "/want-"),
                without_spill_lines(&want_out),
                "{name}, text {text}: the reports differ"
            );
            if !name.starts_with("mpirun") {
                // (mpirun adds its own words on a nonzero exit.)
                assert_eq!(got.stderr_str(), want.stderr_str(), "{name}");
            }
            for list in ["only-src", "only-dest", "changed", "meta"] {
                let (w, g) = (
                    records(&lists.join(format!("want-{list}"))),
                    records(&lists.join(format!("got-{list}"))),
                );
                assert!(!w.is_empty(), "{list}: nothing selected");
                assert_eq!(w, g, "{name}, text {text}: list {list} differs");
            }
            assert_eq!(
                names(&spill),
                Vec::<PathBuf>::new(),
                "{name}: spill files left"
            );
        }
    }
    // The JSON report: the unlimited run's, and what spilled.
    let want = cmp(&src, &dst, &lists, "want", false)
        .arg("--json")
        .run()
        .assert_status(1);
    for (name, launch) in launches() {
        let got = launch(cmp(&src, &dst, &lists, "got", false))
            .args(["--json", "--memory-limit", "4k", "--tmpdir"])
            .arg(&spill)
            .run()
            .assert_status(1);
        let v: serde_json::Value = serde_json::from_str(&got.stdout_str()).unwrap();
        assert_eq!(v["memory_limit"], "4.000 KiB per rank (--memory-limit)");
        assert!(v["spilled"]["runs"].as_u64().unwrap() > 10, "{v}");
        assert!(
            v["spilled"]["spill_bytes"].as_u64().unwrap() > 240 * 2 * 80,
            "{v}"
        );
        assert_eq!(v["spilled"]["tmpdir"], spill.to_str().unwrap());
        assert_eq!(
            json_core(&got.stdout_str()),
            json_core(&want.stdout_str()),
            "{name}"
        );
    }
    // --lite: contents by size and mtime, through the join as well.
    let want = Tool::new("cmp")
        .args(["--lite", "-b"])
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1);
    let got = Tool::new("cmp")
        .args(["--lite", "-b", "--memory-limit", "4k", "--tmpdir"])
        .arg(&spill)
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1);
    got.stdout_contains("Spilled: ");
    assert_eq!(
        without_spill_lines(&got.stdout_str()),
        without_spill_lines(&want.stdout_str())
    );
}

#[test]
fn equal_trees_beyond_the_limit_exit_0() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, _) = trees(tmp.path(), 60);
    let copy = tmp.path().join("copy");
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    for (name, launch) in launches() {
        let run = launch(Tool::new("cmp").args(["--no-checkpoint", "--memory-limit", "4k"]))
            .arg(&src)
            .arg(&copy)
            .run();
        assert_eq!(run.code(), Some(0), "{name}: {}", run.stderr_str());
        run.stdout_contains("Spilled: ");
    }
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
        assert!(st.success(), "mount a tmpfs at {}", at.display());
        Mount(at.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_tmpdir_is_an_error_naming_it_and_no_list_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = trees(tmp.path(), 1500);
    let full = tmp.path().join("full");
    let _mount = Mount::tmpfs(&full, "64k");
    let lists = tmp.path().join("lists");
    std::fs::create_dir(&lists).unwrap();
    for (name, launch) in launches() {
        let run = launch(cmp(&src, &dst, &lists, "got", false))
            .args(["--memory-limit", "8k", "--tmpdir"])
            .arg(&full)
            .run()
            .assert_status(1);
        run.stderr_contains(&format!("TMPDIR {}", full.display()))
            .stderr_contains("No space left on device");
        run.stdout_contains("Spill failed (named above): nothing compared, no list written");
        assert!(
            !run.stdout_str().contains("Number of items"),
            "{name}: counts of a comparison that did not happen"
        );
        assert_eq!(
            names(&lists),
            Vec::<PathBuf>::new(),
            "{name}: a list written"
        );
        assert_eq!(
            names(&full),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );
    }
}

#[test]
fn a_tmpdir_inside_a_tree_compared_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = trees(tmp.path(), 30);
    let inside = dst.join("d1");
    let before = mfu_tests::listing(&dst);
    // Named with --tmpdir: a usage error, before any work.
    let run = Tool::new("cmp")
        .args(["--memory-limit", "4k", "--tmpdir"])
        .arg(&inside)
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(2);
    run.stderr_contains(&format!("--tmpdir {} lies inside DEST", inside.display()));
    // Through $TMPDIR: refused when the lists would spill there.
    let inside = src.join("d2");
    for (name, launch) in launches() {
        let run = launch(Tool::new("cmp").args(["--no-checkpoint", "--memory-limit", "4k"]))
            .env("TMPDIR", &inside)
            .arg(&src)
            .arg(&dst)
            .run()
            .assert_status(1);
        run.stderr_contains(&format!("TMPDIR {} lies inside SRC", inside.display()));
        run.stdout_contains("Spill failed");
        assert!(!run.stdout_str().contains("Number of items"), "{name}");
    }
    assert_eq!(mfu_tests::listing(&dst), before, "DEST changed");
}

/// `cmp` of `src` and `dst` that pauses once both trees are listed and gets SIGINT there.
fn interrupted(
    src: &Path,
    dst: &Path,
    dir: &Path,
    extra: &[&str],
) -> (Option<i32>, String, String) {
    let pause = dir.join("pause");
    let _ = std::fs::remove_file(dir.join("pause.ready"));
    let _ = std::fs::remove_file(dir.join("pause.go"));
    let mut o = std::ffi::OsString::from("EXIST=COMMON:");
    o.push(dir.join("common.mfu"));
    let mut child = Tool::new("cmp")
        .args(["--no-checkpoint", "-b", "-o"])
        .arg(o)
        .args(extra)
        .arg(src)
        .arg(dst)
        .env("MFU_RS_TEST_PAUSE_AFTER_LISTING", &pause)
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !dir.join("pause.ready").exists() {
        assert!(
            start.elapsed().as_secs() < 60,
            "cmp never reached the pause"
        );
        assert!(child.try_wait().unwrap().is_none(), "cmp ended early");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    std::fs::write(dir.join("pause.go"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_stop_after_the_walks_compares_nothing_more_and_writes_no_list_as_below_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = trees(tmp.path(), 40);
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let want = interrupted(&src, &dst, tmp.path(), &[]);
    let spill_arg = spill.to_str().unwrap();
    let got = interrupted(
        &src,
        &dst,
        tmp.path(),
        &["--memory-limit", "4k", "--tmpdir", spill_arg],
    );
    assert_eq!(want.0, Some(1), "{}", want.2);
    assert_eq!(got.0, Some(1), "{}", got.2);
    assert!(got.1.contains("Spilled: "), "{}", got.1);
    assert_eq!(without_spill_lines(&got.1), without_spill_lines(&want.1));
    assert_eq!(got.2, want.2);
    assert!(got.2.contains("files were not compared"), "{}", got.2);
    assert!(got.2.contains("not written"), "{}", got.2);
    assert!(!tmp.path().join("common.mfu").exists());
    assert_eq!(names(&spill), Vec::<PathBuf>::new(), "spill files left");
}
