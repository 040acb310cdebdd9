//! `find -i LIST` and `rm -i LIST` on lists larger than `--memory-limit` (issue 34): find
//! searches the list a piece at a time and writes the bytes (and prints the paths) of the
//! unlimited run; rm removes a piece at a time, directories deepest first from a spill, and
//! removes exactly what the unlimited run removes. At np 1, `--ranks 3` and `mpirun -np 2`.

use flist::{io, Detail, FileList, Meta};
use mfu_tests::{launches, listing, Tool};
use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A v4 list of `n` files and their directories, (`/data/dK` at depth 2, files at depth 3),
/// with sizes and names of every kind, a few names not UTF-8.
fn write_list(path: &Path, n: u64) {
    let mut l = FileList::new(Detail::Stat);
    for d in 0..7u64 {
        let meta = Meta {
            mode: 0o040755,
            size: 4096,
            mtime: 1_700_000_000,
            ..Meta::default()
        };
        l.push(
            format!("/data/d{d}").as_bytes(),
            meta.file_type(),
            Some(meta),
        );
    }
    for i in 0..n {
        let k = i * 7919 % n;
        let mut p = format!("/data/d{}/file-{k:05}", k % 7).into_bytes();
        if k.is_multiple_of(19) {
            p.extend_from_slice(b"-\xff");
        }
        let meta = Meta {
            mode: if k.is_multiple_of(23) {
                0o040700
            } else {
                0o100644
            },
            size: k % 101,
            uid: (k % 3) as u32,
            mtime: 1_700_000_000 + (k % 37) as i64,
            ..Meta::default()
        };
        l.push(&p, meta.file_type(), Some(meta));
    }
    steal::local::run(1, |c| io::write(c, &l, path, io::Format::V4).unwrap());
}

fn names(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn find(input: &Path, expr: &[&str]) -> Tool {
    Tool::new("find").arg("-i").arg(input).args(expr)
}

#[test]
fn find_at_a_tiny_limit_writes_and_prints_what_the_unlimited_run_does() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.mfu");
    write_list(&input, 2000);
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let expressions: [&[&str]; 5] = [
        &["--name", "*7*"],
        &["--type", "d"],
        &[
            "(", "--size", "-10", "--or", "--uid", "1", ")", "--not", "--name", "*3",
        ],
        &["--regex", ".*0$", "--or", "--path", "/data/d2/*"],
        &["--maxdepth", "0"],
    ];
    for expr in expressions {
        // Unlimited: nothing spills (the default limit, in the JSON report).
        let want_list = tmp.path().join("want.mfu");
        let run = find(&input, expr)
            .arg("-o")
            .arg(&want_list)
            .arg("--json")
            .run()
            .assert_status(0);
        let v: serde_json::Value = serde_json::from_str(&run.stdout_str()).unwrap();
        assert!(v["spilled"].is_null(), "{expr:?}: {v}");
        assert!(v["memory_limit"].as_str().unwrap().contains("default"));
        let matched = v["matched"].as_u64().unwrap();
        assert!(matched > 0 || expr[0] == "--maxdepth", "{expr:?}: {v}");
        let want_printed = find(&input, expr).run().assert_status(0).stdout.clone();
        let want_print0 = find(&input, expr)
            .args(["--print0", "-o"])
            .arg(tmp.path().join("also.mfu"))
            .run()
            .assert_status(0)
            .stdout
            .clone();
        for (name, launch) in launches() {
            let limited = |t: Tool| {
                launch(t)
                    .args(["--memory-limit", "4k", "--tmpdir"])
                    .arg(&spill)
            };
            let got_list = tmp.path().join("got.mfu");
            let run = limited(find(&input, expr).arg("-o").arg(&got_list).arg("-v"))
                .run()
                .assert_status(0);
            run.stderr_contains("Memory limit: 4.000 KiB per rank (--memory-limit)")
                .stderr_contains("Spilled: ")
                .stderr_contains(&format!("to {}", spill.display()));
            assert!(
                std::fs::read(&want_list).unwrap() == std::fs::read(&got_list).unwrap(),
                "{expr:?}, {name}: the list differs from the unlimited run's"
            );
            let run = limited(find(&input, expr)).run().assert_status(0);
            assert!(
                run.stdout == want_printed,
                "{expr:?}, {name}: printed paths differ\n{}",
                run.stdout_str()
            );
            let run = limited(
                find(&input, expr)
                    .args(["--print0", "-o"])
                    .arg(tmp.path().join("also2.mfu")),
            )
            .run()
            .assert_status(0);
            assert!(
                run.stdout == want_print0,
                "{expr:?}, {name}: --print0 differs"
            );
            assert_eq!(
                names(&spill),
                Vec::<PathBuf>::new(),
                "{name}: spill files left"
            );
        }
    }
    // The JSON report says what spilled.
    let run = find(&input, &["--name", "*1*", "-o"])
        .arg(tmp.path().join("j.mfu"))
        .args(["--json", "--memory-limit", "4k", "--tmpdir"])
        .arg(&spill)
        .run()
        .assert_status(0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout_str()).unwrap();
    assert_eq!(v["memory_limit"], "4.000 KiB per rank (--memory-limit)");
    assert!(v["spilled"]["pieces"].as_u64().unwrap() > 10, "{v}");
    assert!(
        v["spilled"]["spill_bytes"].as_u64().unwrap() > 100 * 80,
        "{v}"
    );
    assert_eq!(v["tmpdir"], spill.to_str().unwrap());
}

#[test]
fn find_at_a_tiny_limit_runs_each_exec_once_and_refuses_what_cannot_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.mfu");
    write_list(&input, 2000);
    let expr = ["--name", "file-001*", "--exec", "echo", "ran {}", ";"];
    let want: BTreeSet<Vec<u8>> = find(&input, &expr)
        .args(["--no-checkpoint"])
        .run()
        .assert_status(0)
        .stdout
        .split(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    assert!(want.len() > 50, "{}", want.len());
    for (name, launch) in launches() {
        let run = launch(find(&input, &expr))
            .args(["--no-checkpoint", "--memory-limit", "4k", "--tmpdir"])
            .arg(tmp.path())
            .run()
            .assert_status(0);
        let lines: Vec<&[u8]> = run.stdout.split(|&b| b == b'\n').collect();
        let got: BTreeSet<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
        assert_eq!(got, want, "{name}");
        assert_eq!(lines.len(), want.len(), "{name}: a command ran twice");
    }
    // -o - and --text cannot be written piece by piece: refused, nothing written.
    for out in [&["-o", "-"][..], &["-t", "-o", "out.txt"]] {
        let run = find(&input, &["--name", "*1*"])
            .args(out)
            .args(["--memory-limit", "4k"])
            .current_dir(tmp.path())
            .run()
            .assert_status(2);
        run.stderr_contains("larger than the memory limit");
        assert!(!tmp.path().join("out.txt").exists());
    }
}

/// A tree under `base/t` (nested directories six deep, files in each, names not UTF-8, a
/// symlink to a directory outside the tree), the directory `base/outside` it points to, and
/// `base/list.mfu`, the walk of the tree. Returns the tree's root.
fn tree(base: &Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(base);
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/precious"), b"x").unwrap();
    let root = base.join("t");
    let odd = std::ffi::OsStr::from_bytes(b"d\xfe");
    let mut dirs = vec![root.clone()];
    for a in 0..3 {
        for b in 0..3 {
            let d = root.join(format!("a{a}")).join(format!("b{b}"));
            dirs.push(d.join("c/d/e"));
            dirs.push(d.join(odd).join("f"));
        }
    }
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    for d in listing(&root)
        .iter()
        .map(|p| root.join(std::ffi::OsStr::from_bytes(p)))
    {
        for f in ["f0", "keep1", "f2"] {
            std::fs::write(d.join(f), b"data").unwrap();
        }
        std::fs::write(d.join(std::ffi::OsStr::from_bytes(b"n\xff")), b"x").unwrap();
    }
    std::os::unix::fs::symlink(base.join("outside"), root.join("a1/to-outside")).unwrap();
    Tool::new("walk")
        .arg("-o")
        .arg(base.join("list.mfu"))
        .arg(&root)
        .run()
        .assert_status(0);
    root
}

/// What is left under `base` (the tree, the directory outside, the list).
fn left(base: &Path) -> BTreeSet<Vec<u8>> {
    listing(base)
}

#[test]
fn rm_at_a_tiny_limit_removes_what_the_unlimited_run_removes() {
    let tmp = tempfile::tempdir().unwrap();
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let base = tmp.path().join("b");
    for select in [
        &[][..],
        &["--exclude", "keep"],
        &["--match", "a1|f2", "--name"],
    ] {
        // The unlimited run: what it leaves, and what --dryrun says it would remove.
        tree(&base);
        let list = base.join("list.mfu");
        let dry = |t: Tool| t.arg("-i").arg(&list).args(select).arg("--dryrun");
        let would = |out: &[u8]| -> BTreeSet<Vec<u8>> {
            out.split(|&b| b == b'\n')
                .filter(|l| l.starts_with(b"/"))
                .map(<[u8]>::to_vec)
                .collect()
        };
        let want_dry = would(&dry(Tool::new("rm")).run().assert_status(0).stdout);
        assert!(want_dry.len() > 50, "{select:?}: {}", want_dry.len());
        let run = Tool::new("rm")
            .arg("-i")
            .arg(&list)
            .args(select)
            .run()
            .assert_status(0);
        assert!(
            !run.stdout_str().contains("Spilled"),
            "{}",
            run.stdout_str()
        );
        let want = left(&base);
        assert!(want.contains(&b"outside/precious"[..]));
        for (name, launch) in launches() {
            let root = tree(&base);
            let before = left(&base);
            let limited = |t: Tool| {
                launch(t)
                    .args(["--memory-limit", "4k", "--tmpdir"])
                    .arg(&spill)
            };
            let run = limited(dry(Tool::new("rm"))).run().assert_status(0);
            assert_eq!(would(&run.stdout), want_dry, "{select:?}, {name}: --dryrun");
            assert_eq!(left(&base), before, "{select:?}, {name}: --dryrun removed");
            let run = limited(Tool::new("rm").arg("-i").arg(&list).args(select))
                .run()
                .assert_status(0);
            run.stdout_contains("Memory limit: 4.000 KiB per rank (--memory-limit)")
                .stdout_contains("Spilled: ")
                .stdout_contains(&format!("to {}", spill.display()));
            assert_eq!(left(&base), want, "{select:?}, {name}: left differs");
            assert_eq!(select.is_empty(), !root.exists(), "{select:?}, {name}");
            assert_eq!(
                names(&spill),
                Vec::<PathBuf>::new(),
                "{name}: spill files left"
            );
        }
    }
}

/// A small tmpfs mounted for one test, unmounted when dropped.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Mount {
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
fn rm_with_a_full_tmpdir_names_it_and_removes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let full = tmp.path().join("full");
    let _mount = Mount::tmpfs(&full, "4k");
    let base = tmp.path().join("b");
    for (name, launch) in launches() {
        tree(&base);
        let before = left(&base);
        let run = launch(Tool::new("rm").arg("-i").arg(base.join("list.mfu")))
            .args(["--memory-limit", "4k", "--tmpdir"])
            .arg(&full)
            .run()
            .assert_status(1);
        run.stderr_contains(&format!("TMPDIR {}", full.display()))
            .stderr_contains("no room")
            .stderr_contains("nothing removed");
        assert_eq!(left(&base), before, "{name}: removed with a full TMPDIR");
        assert_eq!(
            names(&full),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );
    }
    // What cannot be kept piece by piece is refused before anything is removed.
    tree(&base);
    let before = left(&base);
    for refused in [&["-o", "removed.txt"][..], &["-T"]] {
        let run = Tool::new("rm")
            .arg("-i")
            .arg(base.join("list.mfu"))
            .args(refused)
            .args(["--memory-limit", "4k"])
            .current_dir(tmp.path())
            .run()
            .assert_status(2);
        run.stderr_contains("larger than the memory limit");
        assert_eq!(left(&base), before, "{refused:?}");
    }
}

#[test]
fn rm_at_a_tiny_limit_never_goes_through_a_directory_swapped_for_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("b");
    // After the listing, t/a2 is moved out of the tree and a symlink to it takes its place.
    let swap = |base: &Path| {
        std::fs::rename(base.join("t/a2"), base.join("moved")).unwrap();
        std::os::unix::fs::symlink(base.join("moved"), base.join("t/a2")).unwrap();
    };
    tree(&base);
    swap(&base);
    let run = Tool::new("rm")
        .arg("-i")
        .arg(base.join("list.mfu"))
        .run()
        .assert_status(1);
    run.stderr_contains("t/a2/");
    let want = left(&base);
    assert!(want.contains(&b"moved/b1/f0"[..]), "{want:?}");
    for (name, launch) in launches() {
        tree(&base);
        swap(&base);
        let run = launch(Tool::new("rm").arg("-i").arg(base.join("list.mfu")))
            .args(["--memory-limit", "4k", "--tmpdir"])
            .arg(tmp.path())
            .run()
            .assert_status(1);
        run.stdout_contains("Spilled: ").stderr_contains("t/a2/");
        assert_eq!(
            left(&base),
            want,
            "{name}: left differs from the unlimited run's"
        );
    }
}

/// A list rewritten between the streamed rm's readings (after its first pass, which removes
/// nothing) is not trusted: named, exit 1, nothing removed.
#[test]
fn rm_at_a_tiny_limit_stops_when_the_list_changes_between_its_readings() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("b");
    tree(&base);
    let list = base.join("list.mfu");
    let before = left(&base);
    let pause = tmp.path().join("pause");
    let mut cmd = Tool::new("rm").command();
    cmd.arg("-i")
        .arg(&list)
        .args(["--memory-limit", "4k", "--tmpdir"])
        .arg(tmp.path())
        .env("MFU_RS_TEST_PAUSE_AFTER_LISTING", &pause)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let ready = tmp.path().join("pause.ready");
    let start = std::time::Instant::now();
    while !ready.exists() {
        assert!(start.elapsed().as_secs() < 60, "rm never paused");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The same bytes written again: a new mtime and ctime.
    let bytes = std::fs::read(&list).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&list, &bytes).unwrap();
    std::fs::write(tmp.path().join("pause.go"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("changed while it was being read"), "{err}");
    assert_eq!(left(&base), before, "nothing removed");
}

/// SIGTERM to a streamed rm once its directories are spilled (at the pause after its first
/// pass): it stops (exit 1, said), removes no directory, and leaves no spill file in TMPDIR.
#[test]
fn rm_at_a_tiny_limit_stopped_mid_spill_leaves_its_directories_and_no_spill_file() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("b");
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    tree(&base);
    let dirs_before: BTreeSet<Vec<u8>> = listing(&base)
        .into_iter()
        .filter(|p| base.join(std::ffi::OsStr::from_bytes(p)).is_dir())
        .collect();
    let pause = tmp.path().join("pause");
    let mut cmd = Tool::new("rm").command();
    cmd.arg("-i")
        .arg(base.join("list.mfu"))
        .args(["--memory-limit", "4k", "--tmpdir"])
        .arg(&spill)
        .env("MFU_RS_TEST_PAUSE_AFTER_LISTING", &pause)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while !tmp.path().join("pause.ready").exists() {
        assert!(start.elapsed().as_secs() < 60, "rm never paused");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    std::fs::write(tmp.path().join("pause.go"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    for d in &dirs_before {
        assert!(
            base.join(std::ffi::OsStr::from_bytes(d)).is_dir(),
            "{} removed after the stop",
            String::from_utf8_lossy(d)
        );
    }
    assert_eq!(
        std::fs::read_dir(&spill).unwrap().count(),
        0,
        "spill files left"
    );
    assert!(base.join("outside/precious").exists());
}
