//! `mfu-rs filemaker` end to end: the same seed makes byte-identical trees at 1, 2 and 4 ranks
//! (paths, types, sizes, contents, modes, link targets), another seed another tree; fills give
//! the documented bytes; depth, item count and sizes stay in their bounds; a non-empty DIR is
//! refused unless --force.

use mfu::filemaker::Fill;
use mfu_tests::{bin, expect_status, mfu, mpirun, Tool};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// One entry of a tree as compared: type, mode bits, and contents or link target.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    Dir(u32),
    File(u32, Vec<u8>),
    Link(Vec<u8>),
}

/// Every entry below `root` by relative path (links not followed).
fn snapshot(root: &Path) -> BTreeMap<Vec<u8>, Entry> {
    fn walk(dir: &Path, base: usize, out: &mut BTreeMap<Vec<u8>, Entry>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            let rel = p.as_os_str().as_bytes()[base..].to_vec();
            let entry = if m.is_dir() {
                walk(&p, base, out);
                Entry::Dir(mode)
            } else if m.is_symlink() {
                Entry::Link(fs::read_link(&p).unwrap().as_os_str().as_bytes().to_vec())
            } else {
                Entry::File(mode, fs::read(&p).unwrap())
            };
            out.insert(rel, entry);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root.as_os_str().len() + 1, &mut out);
    out
}

fn make(np: usize, dir: &Path, args: &[&str]) -> String {
    Tool::new("filemaker")
        .np(np)
        .args(args)
        .arg(dir)
        .run()
        .assert_status(0)
        .stdout_str()
}

fn files(tree: &BTreeMap<Vec<u8>, Entry>) -> impl Iterator<Item = (&Vec<u8>, &Vec<u8>)> {
    tree.iter().filter_map(|(p, e)| match e {
        Entry::File(_, data) => Some((p, data)),
        _ => None,
    })
}

#[test]
fn same_seed_makes_byte_identical_trees_at_1_2_and_4_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    // Sizes up to 300 KiB: files are split between ranks at 2 and 4 ranks.
    let args = [
        "-i", "17", "-n", "150-250", "-d", "2-4", "-s", "0-300k", "-q",
    ];
    let one = tmp.path().join("np1");
    assert_eq!(make(1, &one, &args), "");
    let tree = snapshot(&one);
    assert!((150..=250).contains(&tree.len()), "{} items", tree.len());
    assert!(tree.values().any(|e| matches!(e, Entry::Dir(0o700))));
    assert!(tree.values().any(|e| matches!(e, Entry::Link(_))));
    assert!(files(&tree).any(|(_, d)| d.len() > 100_000));
    for e in tree.values() {
        if let Entry::File(mode, _) = e {
            assert_eq!(*mode, 0o600);
        }
    }
    // Every link points at an item of the tree.
    for (p, e) in &tree {
        if let Entry::Link(t) = e {
            let from = one.join(OsStr::from_bytes(p));
            let target = from.parent().unwrap().join(OsStr::from_bytes(t));
            assert!(fs::symlink_metadata(&target).is_ok(), "{target:?}");
        }
    }
    for np in [2, 4] {
        let dir = tmp.path().join(format!("np{np}"));
        make(np, &dir, &args);
        let other = snapshot(&dir);
        assert!(other == tree, "{np} ranks made another tree");
    }
    let seed = tmp.path().join("seed18");
    let mut args18 = args;
    args18[1] = "18";
    make(2, &seed, &args18);
    assert!(snapshot(&seed) != tree);
}

#[test]
fn fills_give_the_documented_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    for (fill, byte) in [
        ("true", Some(0xFF)),
        ("false", Some(0x00)),
        ("alternate", Some(0xAA)),
        ("random", None),
    ] {
        let dir = tmp.path().join(fill);
        make(
            2,
            &dir,
            &["-f", fill, "-n", "30-30", "-d", "2", "-s", "1-100k", "-q"],
        );
        let tree = snapshot(&dir);
        let mut n = 0;
        for (p, data) in files(&tree) {
            n += 1;
            match byte {
                Some(b) => assert!(data.iter().all(|&x| x == b), "{fill}: {p:?}"),
                None => {
                    // The blake3 stream of (seed, file number), as the library documents.
                    let num: u64 = std::str::from_utf8(&p[p.len() - 8..])
                        .unwrap()
                        .parse()
                        .unwrap();
                    let mut want = vec![0; data.len()];
                    Fill::Random.fill(1, num, 0, &mut want);
                    assert_eq!(data, &want, "{p:?}");
                }
            }
        }
        assert!(n > 0, "{fill}: no files");
    }
}

#[test]
fn depth_items_and_sizes_stay_in_bounds() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in ["1", "2", "3"] {
        let dir = tmp.path().join(seed);
        let out = make(
            1,
            &dir,
            &["-i", seed, "-d", "2-3", "-n", "20-40", "-s", "100-1k", "-v"],
        );
        assert!(out.contains("Made "), "{out}");
        let tree = snapshot(&dir);
        assert!(
            (20..=40).contains(&tree.len()),
            "seed {seed}: {} items",
            tree.len()
        );
        let depth = tree
            .keys()
            .map(|p| p.iter().filter(|&&b| b == b'/').count() + 1)
            .max()
            .unwrap();
        assert!((2..=3).contains(&depth), "seed {seed}: depth {depth}");
        for (p, data) in files(&tree) {
            assert!((100..=1024).contains(&data.len()), "{p:?}: {}", data.len());
        }
    }
    // Only files, one level.
    let flat = tmp.path().join("flat");
    make(
        1,
        &flat,
        &[
            "--files", "100", "--links", "0", "-n", "7", "-d", "1", "-s", "3", "-q",
        ],
    );
    let tree = snapshot(&flat);
    assert_eq!(tree.len(), 7);
    assert!(files(&tree).all(|(p, d)| d.len() == 3 && !p.contains(&b'/')));
}

#[test]
fn a_non_empty_dir_is_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("keep"), b"mine").unwrap();
    let out = expect_status(mfu(&["filemaker", "-n", "10", "-d", "2"]).arg(&dir), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
    // Bad ranges and a missing parent are usage errors too, with nothing written.
    expect_status(
        mfu(&["filemaker", "-d", "3-2"]).arg(tmp.path().join("x")),
        2,
    );
    expect_status(
        mfu(&["filemaker", "-n", "2", "-d", "3"]).arg(tmp.path().join("x")),
        2,
    );
    expect_status(mfu(&["filemaker", "-s", "1q"]).arg(tmp.path().join("x")), 2);
    expect_status(mfu(&["filemaker"]).arg(tmp.path().join("no/x")), 2);
    assert!(!tmp.path().join("x").exists());
    // --force writes beside what is there; a second run over the same tree is a no-op.
    let args = ["filemaker", "--force", "-n", "10", "-d", "2", "-q"];
    expect_status(mfu(&args).arg(&dir), 0);
    let first = snapshot(&dir);
    expect_status(mpirun(2, &bin()).args(args).arg(&dir), 0);
    assert!(snapshot(&dir) == first);
    assert_eq!(fs::read(dir.join("keep")).unwrap(), b"mine");
    assert_eq!(first.len(), 11);
}

#[test]
fn totals_beyond_the_largest_file_offset_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("big");
    let args = [
        "filemaker",
        "-v",
        "-n",
        "4-4",
        "-d",
        "1-1",
        "--files",
        "100",
        "--links",
        "0",
        "-s",
        "8E-8E",
    ];
    let out = expect_status(mfu(&args).arg(&dir), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--size") && err.contains("8 EiB"), "{err}");
    assert!(!dir.exists(), "nothing written");
}

#[test]
fn force_never_follows_a_symbolic_link_in_a_planned_files_place() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let outside = tmp.path().join("outside");
    fs::write(&outside, b"precious").unwrap();
    fs::create_dir(&dir).unwrap();
    // Three files of 100 bytes directly in DIR: file_00000000..file_00000002.
    let link = dir.join("file_00000001");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let args = [
        "filemaker",
        "--force",
        "-n",
        "3",
        "-d",
        "1",
        "--files",
        "100",
        "--links",
        "0",
        "-s",
        "100",
    ];
    for np in [1, 2] {
        let mut cmd = match np {
            1 => mfu(&args),
            n => {
                let mut c = mpirun(n, &bin());
                c.args(args);
                c
            }
        };
        let out = expect_status(cmd.arg(&dir), 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "create {}: a symbolic link is in the way",
                link.display()
            )),
            "{err}"
        );
        assert_eq!(fs::read(&outside).unwrap(), b"precious", "{np} ranks");
        assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(fs::read(dir.join("file_00000002")).unwrap().len(), 100);
    }
}

/// `mfu-rs filemaker ARGS DIR` with `np` ranks, not run yet.
fn filemaker_cmd(np: usize, args: &[&str], dir: &Path) -> std::process::Command {
    Tool::new("filemaker").np(np).args(args).arg(dir).command()
}

/// Defect: `--force` rewrote existing files in place (a hard link outside DIR received the
/// generated bytes) and replaced a user's regular file where the plan puts a symlink, exit 0.
/// Now a planned file is a new inode (the outside name keeps its bytes), and an entry of
/// another type in an item's place (a user's file where a link goes, a user's directory where
/// a file goes) is left alone and named, exit 1. np 1 and 2.
#[test]
fn force_never_writes_into_an_existing_inode_nor_replaces_another_type() {
    // Seed 3 makes file_00000000, file_00000005 and link_00000001..4, all directly in DIR.
    let args = [
        "--force", "-q", "-n", "6", "-d", "1", "--files", "50", "--links", "50", "-s", "100", "-i",
        "3",
    ];
    let tmp = tempfile::tempdir().unwrap();
    let reference = tmp.path().join("reference");
    make(1, &reference, &args);
    let want = snapshot(&reference);
    assert!(matches!(
        want.get(b"link_00000003".as_slice()),
        Some(Entry::Link(_))
    ));
    assert!(matches!(
        want.get(b"file_00000005".as_slice()),
        Some(Entry::File(..))
    ));
    for np in [1, 2] {
        let dir = tmp.path().join(format!("t{np}"));
        fs::create_dir(&dir).unwrap();
        let outside = tmp.path().join(format!("outside{np}"));
        fs::write(&outside, b"precious, hard linked into DIR").unwrap();
        fs::hard_link(&outside, dir.join("file_00000000")).unwrap();
        fs::write(dir.join("link_00000003"), b"mine").unwrap();
        fs::create_dir(dir.join("file_00000005")).unwrap();
        fs::write(dir.join("file_00000005/x"), b"mine too").unwrap();
        let out = expect_status(&mut filemaker_cmd(np, &args, &dir), 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            fs::read(&outside).unwrap(),
            b"precious, hard linked into DIR",
            "np={np}: the outside name is not written"
        );
        let got = snapshot(&dir);
        assert_eq!(
            got.get(b"file_00000000".as_slice()),
            want.get(b"file_00000000".as_slice()),
            "np={np}: the planned file is made anew"
        );
        assert_eq!(fs::read(dir.join("link_00000003")).unwrap(), b"mine");
        assert_eq!(fs::read(dir.join("file_00000005/x")).unwrap(), b"mine too");
        for (name, what) in [
            ("link_00000003", "a regular file is in the way"),
            ("file_00000005", "a directory is in the way"),
        ] {
            assert!(
                err.contains(&format!("{}: {what}", dir.join(name).display())),
                "np={np}: {name} named: {err}"
            );
        }
    }
}

/// Defect: filemaker died on SIGINT/SIGTERM with no summary and no exit 1. Now it stops within
/// a MiB of writing, says the tree is incomplete, exits 1. Two 1 GB files of random bytes:
/// many seconds of work for the debug build. Without a checkpoint (with one: see below).
#[test]
fn a_signal_stops_the_run_with_exit_1() {
    use rustix::process::Signal;
    for signal in [Signal::INT, Signal::TERM] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        let args = [
            "-n", "2", "-d", "1", "--files", "100", "--links", "0", "-s", "1GB",
        ];
        let mut args = args.to_vec();
        args.push("--no-checkpoint");
        let mut cmd = filemaker_cmd(1, &args, &dir);
        let started = std::time::Instant::now();
        let out = mfu_tests::signal_when(&mut cmd, signal, || {
            fs::read_dir(&dir)
                .is_ok_and(|d| d.flatten().any(|e| e.metadata().is_ok_and(|m| m.len() > 0)))
        });
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{signal:?}: {err}");
        assert!(
            err.contains("interrupted") && err.contains("incomplete"),
            "{signal:?}: {err}"
        );
        let written: u64 = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(
            written < 2_000_000_000,
            "{signal:?}: stopped early ({written} bytes)"
        );
        assert!(
            started.elapsed().as_secs() < 30,
            "{signal:?}: stopped promptly"
        );
    }
}

fn bytes_of(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

#[test]
fn library_run_reports_counts_and_failures() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::ToolReport;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let mut options = mfu::filemaker::Options::new(bytes_of(&dir));
    options.spec.seed = 9;
    options.spec.nitems = 40..=40;
    options.spec.depth = 2..=2;
    options.spec.size = 10..=1000;
    let reports = steal::local::run(2, |comm| mfu::filemaker::run(comm, &options).unwrap());
    let tree = snapshot(&dir);
    let count = |f: fn(&Entry) -> bool| tree.values().filter(|e| f(e)).count() as u64;
    let data: u64 = files(&tree).map(|(_, d)| d.len() as u64).sum();
    for r in &reports {
        assert_eq!(r.dir, bytes_of(&dir));
        assert_eq!(r.dirs, count(|e| matches!(e, Entry::Dir(_))));
        assert_eq!(r.files, count(|e| matches!(e, Entry::File(..))));
        assert_eq!(r.links, count(|e| matches!(e, Entry::Link(_))));
        assert_eq!(r.dirs + r.files + r.links, 40);
        assert_eq!(r.bytes, data);
        assert_eq!((r.failed, r.interrupted), (0, false));
        assert_eq!(r.status(), mfu::Status::Ok);
    }
    // Not empty: an error on every rank, nothing written.
    for r in steal::local::run(2, |comm| mfu::filemaker::run(comm, &options)) {
        assert!(r.unwrap_err().message.contains("is not empty"));
    }
    // --force with a symbolic link where a file goes: that item fails, named.
    let link = dir.join("file_00000001");
    let forced = tmp.path().join("f");
    fs::create_dir(&forced).unwrap();
    let link_in_way = forced.join("file_00000001");
    std::os::unix::fs::symlink(&link, &link_in_way).unwrap();
    let mut options = mfu::filemaker::Options::new(bytes_of(&forced));
    options.force = true;
    options.spec.nitems = 3..=3;
    options.spec.depth = 1..=1;
    options.spec.file_percent = 100;
    options.spec.link_percent = 0;
    options.spec.size = 100..=100;
    let reports = steal::local::run(2, |comm| mfu::filemaker::run(comm, &options).unwrap());
    // The file in the way spans both ranks' shares (each file weighs 64 KiB more than its
    // size): the rank that creates it and the one that writes a part of it both fail.
    for r in &reports {
        assert_eq!(
            (r.files, r.bytes, r.failed),
            (2, 200, 2),
            "{:?}",
            r.failures
        );
        assert_eq!(r.status(), mfu::Status::ItemsFailed);
    }
    let failures: Vec<&String> = reports.iter().flat_map(|r| &r.failures).collect();
    assert!(
        failures
            .iter()
            .any(|f| f.contains(&format!("create {}", link_in_way.display()))),
        "{failures:?}"
    );
}

/// The numbers of `Made N items in DIR: D directories, F files, L links, X (B bytes) in ...`:
/// (N, B).
fn text_counts(stdout: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Made "))
        .unwrap_or_else(|| panic!("no summary in {stdout:?}"));
    let items = line.split(' ').nth(1).unwrap().parse().unwrap();
    let bytes = line.split('(').nth(1).unwrap().split(' ').next().unwrap();
    (items, bytes.parse().unwrap())
}

#[test]
fn json_report_has_the_text_summary_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["-i", "5", "-n", "30", "-d", "2", "-s", "1-3000"];
    let text = make(1, &tmp.path().join("text"), &args);
    let json_dir = tmp.path().join("json");
    let mut cmd = mfu(&["filemaker", "--json"]);
    cmd.args(args).arg(&json_dir);
    let json = expect_status(&mut cmd, 0);
    let (items, bytes) = text_counts(&text);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json.stdout)));
    assert_eq!(v["tool"], "filemaker");
    assert_eq!(v["status"], 0);
    assert_eq!(v["items"], items);
    assert_eq!(v["bytes"], bytes);
    assert_eq!(v["failed"], 0);
    assert_eq!(v["dir"], json_dir.to_str().unwrap());
    assert_eq!(items, 30);
    assert!(bytes > 0);
}

/// How a run is launched in the checkpoint tests.
#[derive(Clone, Copy, Debug)]
enum Launch {
    One,
    Ranks(usize),
    Mpi(usize),
}

fn filemaker_at(launch: Launch, args: &[&str], dir: &Path) -> Tool {
    let t = Tool::new("filemaker")
        .args(args)
        .arg(dir)
        .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20");
    match launch {
        Launch::One => t,
        Launch::Ranks(n) => t.ranks(n),
        Launch::Mpi(n) => t.mpi(n),
    }
}

/// An interrupted filemaker continues: after a stop (the core's knob: a SIGTERM after the N-th
/// file part marked) or a kill -9 (its die knob), at one process, `--ranks 3` and `mpirun -np
/// 2`, the same command run again (at another rank count, without --force) exits 0, does not
/// make again the files finished (their inodes are kept) and leaves the tree an uninterrupted
/// run makes; the checkpoint beside DIR is gone at the end.
#[test]
fn an_interrupted_run_continues_to_the_same_tree() {
    let args = [
        "-i", "7", "-n", "120", "-d", "3", "-s", "0-300k", "--files", "60",
    ];
    let want_dir = tempfile::tempdir().unwrap();
    make(1, &want_dir.path().join("t"), &args);
    let want = snapshot(&want_dir.path().join("t"));
    let cases = [
        (
            Launch::One,
            "MFU_RS_TEST_CHECKPOINT_STOP_AFTER",
            "10",
            Launch::Ranks(2),
        ),
        (
            Launch::Ranks(3),
            "MFU_RS_TEST_CHECKPOINT_STOP_AFTER",
            "10",
            Launch::Mpi(2),
        ),
        (
            Launch::Mpi(2),
            "MFU_RS_TEST_CHECKPOINT_STOP_AFTER",
            "5",
            Launch::One,
        ),
        (
            Launch::One,
            "MFU_RS_TEST_CHECKPOINT_DIE_AFTER",
            "10",
            Launch::Ranks(3),
        ),
        (
            Launch::Mpi(2),
            "MFU_RS_TEST_CHECKPOINT_DIE_AFTER",
            "5",
            Launch::One,
        ),
    ];
    for (first, knob, n, then) in cases {
        let what = format!("{first:?} {knob}={n}, rerun {then:?}");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        let out = filemaker_at(first, &args, &dir).env(knob, n).run();
        let err = out.stderr_str();
        if knob.ends_with("STOP_AFTER") {
            assert_eq!(out.code(), Some(1), "{what}\n{err}");
            assert!(
                err.contains("stopped after ") && err.contains(" files ("),
                "{what}: the stop line\n{err}"
            );
        } else {
            assert_ne!(out.code(), Some(0), "{what}\n{err}");
        }
        let checkpoint = tmp.path().join(".t.mfu-checkpoint");
        assert!(checkpoint.is_dir(), "{what}: checkpoint kept");
        // The complete files of the first run (their inodes must survive the rerun).
        let before: Vec<(std::path::PathBuf, u64)> = walk_files(&dir);
        let again = filemaker_at(then, &args, &dir).run().assert_status(0);
        let said = again.stdout_str() + &again.stderr_str();
        assert!(said.contains("continuing"), "{what}\n{said}");
        assert_eq!(snapshot(&dir), want, "{what}: the uninterrupted run's tree");
        assert!(!checkpoint.exists(), "{what}: checkpoint removed");
        let kept = before
            .iter()
            .filter(|(p, ino)| {
                fs::symlink_metadata(p).is_ok_and(|m| {
                    use std::os::unix::fs::MetadataExt;
                    m.ino() == *ino
                })
            })
            .count();
        assert!(kept > 0, "{what}: some finished files were not made again");
    }
}

/// Regular files below `dir` with their inode.
fn walk_files(dir: &Path) -> Vec<(std::path::PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let m = fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                out.push((e.path(), m.ino()));
            }
        }
    }
    out
}

/// A checkpoint is not used for other options (another seed: the run starts over, refuses the
/// non-empty DIR without --force and says so), and a file the marks call finished but that was
/// replaced since is made again.
#[test]
fn a_changed_plan_or_a_replaced_file_is_not_trusted() {
    let args = [
        "-i", "7", "-n", "60", "-d", "2", "-s", "0-200k", "--files", "60",
    ];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    filemaker_at(Launch::One, &args, &dir)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "10")
        .run()
        .assert_status(1);
    let mut other = args.to_vec();
    other[1] = "8";
    let out = filemaker_at(Launch::One, &other, &dir)
        .run()
        .assert_status(2);
    let said = out.stdout_str() + &out.stderr_str();
    assert!(said.contains("not empty"), "{said}");

    // Replace every finished file with one of the same size (another inode).
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    filemaker_at(Launch::One, &args, &dir)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "10")
        .run()
        .assert_status(1);
    for (p, _) in walk_files(&dir) {
        let len = fs::metadata(&p).unwrap().len() as usize;
        fs::remove_file(&p).unwrap();
        fs::write(&p, vec![b'x'; len]).unwrap();
    }
    filemaker_at(Launch::Ranks(2), &args, &dir)
        .run()
        .assert_status(0);
    let want_dir = tempfile::tempdir().unwrap();
    make(1, &want_dir.path().join("t"), &args);
    assert_eq!(snapshot(&dir), snapshot(&want_dir.path().join("t")));
}

/// A real SIGTERM while the files are written (a file holds data): exit 1 and the stop line;
/// the same command, run again, finishes the tree an uninterrupted run makes (even when the
/// stop came before any file was finished).
#[test]
fn a_real_sigterm_then_a_rerun_finishes_the_tree() {
    use rustix::process::Signal;
    let args = [
        "-n", "3", "-d", "1", "--files", "100", "--links", "0", "-s", "40MB",
    ];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let mut cmd = filemaker_cmd(1, &args, &dir);
    let out = mfu_tests::signal_when(&mut cmd, Signal::TERM, || {
        fs::read_dir(&dir)
            .is_ok_and(|d| d.flatten().any(|e| e.metadata().is_ok_and(|m| m.len() > 0)))
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("stopped after "), "{err}");
    filemaker_at(Launch::Ranks(2), &args, &dir)
        .run()
        .assert_status(0);
    let want_dir = tempfile::tempdir().unwrap();
    make(1, &want_dir.path().join("t"), &args);
    assert!(
        snapshot(&dir) == snapshot(&want_dir.path().join("t")),
        "the same tree"
    );
    assert!(!tmp.path().join(".t.mfu-checkpoint").exists());
}
