//! The walk's own output out of core (issue 34): `walk TREE -o OUT --memory-limit SIZE` spills
//! the walked records to sorted runs and writes the list from them by a merge: the records and
//! counts of the unlimited walk (with `-s name`, its order too), at np 1, `--ranks 3` and under
//! mpirun; cmp's walks spill the same way and its checkpoints hold across both. A full TMPDIR and a
//! stop mid-walk leave no output and no spill file; a spilling walk killed or stopped continues
//! from its checkpoint to the list of an uninterrupted walk.

use crate::spill::{names, spill_files_open, term_while_spilling, Mount};
use flist::{io, FileList};
use mfu_tests::{launches, Run, Tool};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Hostile names: spaces, a newline, `|`, a non-UTF-8 byte.
const NAMES: [&[u8]; 4] = [b"plain", b"with space", b"new\nline|bar", b"bin\xff"];

/// A tree of `dirs` directories (a third of them nested) with `files` files each (sizes by
/// name), a symlink in each, under `dir/tree`.
fn tree(dir: &Path, dirs: usize, files: usize) -> PathBuf {
    let root = dir.join("tree");
    for d in 0..dirs {
        let sub = if d % 3 == 0 {
            root.join(format!("d{d}"))
        } else {
            root.join(format!("d{}", d - d % 3)).join(format!("s{d}"))
        };
        fs::create_dir_all(&sub).unwrap();
        for i in 0..files {
            let name = [NAMES[i % 4], format!("-{i}").as_bytes()].concat();
            fs::write(sub.join(OsStr::from_bytes(&name)), vec![b'x'; i % 7]).unwrap();
        }
        std::os::unix::fs::symlink("plain-0", sub.join("link")).unwrap();
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

/// The paths of a list, in its order.
fn paths_in_order(list: &Path) -> Vec<Vec<u8>> {
    let list: FileList = steal::local::run(1, |c| {
        io::read(c, list.as_os_str().as_bytes()).expect("read list")
    })
    .remove(0);
    list.iter().map(|e| e.path.to_vec()).collect()
}

/// The count lines of a walk's summary (items, types, data).
fn counts(run: &Run) -> Vec<String> {
    run.stdout_str()
        .lines()
        .filter(|l| {
            ["Items:", "  Directories:", "  Files:", "  Links:", "Data:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(str::to_string)
        .collect()
}

fn walk_o(root: &Path, out: &Path) -> Tool {
    Tool::new("walk")
        .args(["--no-checkpoint", "-o"])
        .arg(out)
        .arg(root)
}

#[test]
fn walk_o_at_a_tiny_limit_spills_and_writes_the_records_and_counts_of_the_unlimited_walk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 60, 20);
    let spill = tmp.path().join("spill");
    fs::create_dir(&spill).unwrap();
    let want_list = tmp.path().join("want.mfu");
    let unlimited = walk_o(&root, &want_list).run().assert_status(0);
    // The default limit: nothing spills, and the report is the one of before.
    let said = unlimited.stdout_str();
    assert!(
        !said.contains("Spilled") && !said.contains("Memory limit"),
        "{said}"
    );
    let want = records(&want_list);
    assert_eq!(want.len(), 1 + 60 * 22);
    let want_counts = counts(&unlimited);
    for (name, launch) in launches() {
        let got = tmp.path().join("got.mfu");
        let run = launch(walk_o(&root, &got))
            .args(["--memory-limit", "4k", "--tmpdir"])
            .arg(&spill)
            .run()
            .assert_status(0);
        run.stdout_contains("Memory limit: 4.000 KiB per rank (--memory-limit)")
            .stdout_contains("Spilled: ")
            .stdout_contains(&format!("to {}", spill.display()));
        assert_eq!(counts(&run), want_counts, "{name}");
        assert_eq!(
            records(&got),
            want,
            "{name}: the records of the unlimited walk"
        );
        assert_eq!(
            names(&spill),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );
        assert_eq!(
            names(tmp.path()),
            [got.clone(), spill.clone(), root.clone(), want_list.clone()],
            "{name}: nothing else beside the list (no temporary)"
        );
        fs::remove_file(&got).unwrap();
    }
    // `-s name`: the order of the in-memory sort, over the ranks.
    let want_sorted = tmp.path().join("want-sorted.mfu");
    walk_o(&root, &want_sorted)
        .args(["-s", "name"])
        .run()
        .assert_status(0);
    let want_order = paths_in_order(&want_sorted);
    fs::remove_file(&want_sorted).unwrap();
    for (name, launch) in launches() {
        let got = tmp.path().join("got.mfu");
        let run = launch(walk_o(&root, &got))
            .args(["-s", "name", "--memory-limit", "4k", "--tmpdir"])
            .arg(&spill)
            .run()
            .assert_status(0);
        run.stdout_contains("Spilled: ");
        assert_eq!(counts(&run), want_counts, "{name}");
        assert_eq!(paths_in_order(&got), want_order, "{name}: -s name's order");
        assert_eq!(
            records(&got),
            want,
            "{name}: the records of the unlimited walk"
        );
        assert_eq!(
            names(&spill),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );
        fs::remove_file(&got).unwrap();
    }
    // The spill in the JSON report.
    let got = tmp.path().join("got.mfu");
    let run = walk_o(&root, &got)
        .args(["--json", "--memory-limit", "4k", "--tmpdir"])
        .arg(&spill)
        .run()
        .assert_status(0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout_str()).unwrap();
    assert_eq!(v["memory_limit"], "4.000 KiB per rank (--memory-limit)");
    assert_eq!(v["spilled"]["records"], want.len());
    assert_eq!(v["items"], want.len());
    assert!(v["spilled"]["runs"].as_u64().unwrap() > 10, "{v}");
    assert_eq!(v["tmpdir"], spill.to_str().unwrap());
    // What needs the whole list keeps it in memory: nothing spills.
    for extra in [&["-p"][..], &["-d", "size:4"], &["-f"], &["-s", "size"]] {
        let run = walk_o(&root, &got)
            .args(["--memory-limit", "4k", "--tmpdir"])
            .arg(&spill)
            .args(extra)
            .run()
            .assert_status(0);
        assert!(!run.stdout_str().contains("Spilled"), "{extra:?}");
    }
}

#[test]
fn walk_o_with_a_full_tmpdir_is_an_error_naming_it_and_leaves_no_output() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 60, 20);
    let full = tmp.path().join("full");
    let _mount = Mount::tmpfs(&full, "64k");
    for (name, launch) in launches() {
        let out = tmp.path().join("out.mfu");
        let run = launch(walk_o(&root, &out))
            .args(["--memory-limit", "8k", "--tmpdir"])
            .arg(&full)
            .run()
            .assert_status(1);
        run.stderr_contains(&format!("TMPDIR {}", full.display()))
            .stderr_contains("no room")
            .stderr_contains("not written");
        run.stdout_contains("Walk could not spill its list (named above): no list written");
        assert!(!out.exists(), "{name}: an output after a failed spill");
        assert_eq!(
            names(tmp.path()),
            [full.clone(), root.clone()],
            "{name}: nothing beside the tree (no temporary list)"
        );
        assert_eq!(
            names(&full),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );
    }
}

#[test]
fn sigterm_while_a_walk_spills_leaves_no_spill_file_and_no_output() {
    let tmp = tempfile::tempdir().unwrap();
    let spill = tmp.path().join("spill");
    fs::create_dir(&spill).unwrap();
    let out = tmp.path().join("out.mfu");
    let mut dirs = 300;
    for (name, launch) in launches() {
        loop {
            let sub = tmp.path().join(format!("t{dirs}"));
            let root = match fs::create_dir(&sub) {
                Ok(()) => tree(&sub, dirs, 40),
                Err(_) => sub.join("tree"),
            };
            let mut cmd = launch(walk_o(&root, &out))
                .args(["--memory-limit", "4k", "--tmpdir"])
                .arg(&spill)
                .command();
            let done = term_while_spilling(&mut cmd, &spill, 60);
            let Some(done) = done.filter(|d| d.status.code() != Some(0)) else {
                // Done before the signal: a bigger tree.
                assert!(
                    dirs < 20_000,
                    "{name}: every walk finished before its SIGTERM"
                );
                let _ = fs::remove_file(&out);
                dirs *= 3;
                continue;
            };
            let stderr = String::from_utf8_lossy(&done.stderr);
            assert_eq!(done.status.code(), Some(1), "{name}: {stderr}");
            assert!(stderr.contains("interrupted"), "{name}: {stderr}");
            assert!(!out.exists(), "{name}: an output after a stop");
            assert_eq!(names(&spill), Vec::<PathBuf>::new(), "{name}");
            assert_eq!(
                spill_files_open(&spill),
                0,
                "{name}: spill files still open"
            );
            let beside: Vec<PathBuf> = names(tmp.path())
                .into_iter()
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.as_bytes().windows(7).any(|w| w == b"out.mfu"))
                })
                .collect();
            assert!(beside.is_empty(), "{name}: {beside:?}");
            break;
        }
    }
}

/// The three launches of the checkpoint tests, marks made often.
fn launch(name: &str) -> Tool {
    let t = Tool::new("walk").env("MFU_RS_CHECKPOINT_INTERVAL_MS", "10");
    match name {
        "np1" => t,
        "ranks3" => t.ranks(3),
        "mpi2" => t.mpi(2),
        _ => unreachable!("{name}"),
    }
}

#[test]
fn a_spilling_walk_o_killed_then_stopped_continues_to_the_list_of_an_uninterrupted_walk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tree(tmp.path(), 45, 8);
    let want_list = tmp.path().join("want.mfu");
    walk_o(&root, &want_list).run().assert_status(0);
    let want = records(&want_list);
    let spill = tmp.path().join("spill");
    fs::create_dir(&spill).unwrap();
    for (a, b, c) in [("np1", "ranks3", "mpi2"), ("mpi2", "np1", "ranks3")] {
        let out = tmp.path().join(format!("out-{a}.mfu"));
        let ck = tmp.path().join(format!(".out-{a}.mfu.mfu-checkpoint"));
        let walk = |l: &str| {
            launch(l)
                .arg("-o")
                .arg(&out)
                .arg(&root)
                .args(["--memory-limit", "4k", "--tmpdir"])
                .arg(&spill)
        };
        let killed = walk(a).env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "4").run();
        assert_ne!(killed.code(), Some(0), "{a}: killed");
        assert!(!out.exists(), "{a}: a killed walk writes no list");
        assert!(ck.is_dir(), "{a}: the checkpoint is kept");
        let stopped = walk(b)
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
            .run()
            .assert_status(1);
        stopped.stderr_contains("interrupted");
        assert!(!out.exists(), "{b}: a stopped walk writes no list");
        let done = walk(c).run().assert_status(0);
        let said = format!("{}{}", done.stdout_str(), done.stderr_str());
        assert!(said.contains("continuing from checkpoint"), "{c}: {said}");
        assert!(said.contains("Spilled: "), "{c}: {said}");
        assert_eq!(
            records(&out),
            want,
            "{a} {b} {c}: the list of an uninterrupted walk"
        );
        assert!(!ck.exists(), "{c}: a complete walk removes its checkpoint");
        assert_eq!(names(&spill), Vec::<PathBuf>::new());
    }
}

// ------------------------------------------------------------------------------ cmp's walks

/// `SRC` and `DST` of 30 files of 64 KiB in 10 directories; three files differ in one byte.
fn cmp_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    for d in 0..10 {
        for root in [&src, &dst] {
            fs::create_dir_all(root.join(format!("d{d}"))).unwrap();
        }
        for f in 0..3 {
            let rel = format!("d{d}/f{f}");
            let body = mfu_tests::noise((d * 3 + f) as u64, 64 << 10);
            fs::write(src.join(&rel), &body).unwrap();
            let mut other = body;
            if f == 1 && d % 4 == 0 {
                other[40_000] ^= 1;
            }
            fs::write(dst.join(&rel), &other).unwrap();
        }
    }
    (src, dst)
}

/// The report without the lines only a limited run has, nor the rows of times a read moves.
fn cmp_report(run: &Run) -> String {
    run.stdout_str()
        .lines()
        .filter(|l| !l.starts_with("Memory limit: ") && !l.starts_with("Spilled: "))
        .filter(|l| !l.trim_start().starts_with("ATIME "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A compare stopped after its walks spilled continues from its checkpoint in a run that holds
/// its lists in memory, and the other way round: the digests of the listings (the
/// checkpoint's inputs) of a spilling walk are those of the walk in memory.
#[test]
fn cmp_on_spilling_walks_and_in_memory_continue_each_others_checkpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = cmp_pair(tmp.path());
    let spill = tmp.path().join("spill");
    fs::create_dir(&spill).unwrap();
    let cmp = |tool: Tool, ck: &Path, limited: bool| {
        let t = tool
            .args(["-k", "16K", "-b", "--noatime", "--checkpoint"])
            .arg(ck)
            .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "10")
            .env("XDG_STATE_HOME", tmp.path().join("state"));
        let t = if limited {
            t.args(["--memory-limit", "4k", "--tmpdir"]).arg(&spill)
        } else {
            t
        };
        t.arg(&src).arg(&dst)
    };
    let want = cmp(Tool::new("cmp"), &tmp.path().join("ck-ref"), false)
        .run()
        .assert_status(1);
    let spilled = cmp(Tool::new("cmp").ranks(3), &tmp.path().join("ck-s"), true)
        .run()
        .assert_status(1);
    spilled.stdout_contains("Spilled: ");
    assert_eq!(cmp_report(&spilled), cmp_report(&want));
    for (n, (first_limited, first, rerun)) in [
        (true, Tool::new("cmp"), Tool::new("cmp").mpi(2)),
        (false, Tool::new("cmp").mpi(2), Tool::new("cmp").ranks(3)),
    ]
    .into_iter()
    .enumerate()
    {
        let ck = tmp.path().join(format!("ck{n}"));
        let cut = cmp(first, &ck, first_limited)
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "3")
            .run()
            .assert_status(1);
        cut.stderr_contains("run the same command again");
        if first_limited {
            cut.stdout_contains("Spilled: ");
        }
        let again = cmp(rerun, &ck, !first_limited).run().assert_status(1);
        again.stderr_contains("continuing from checkpoint");
        assert_eq!(cmp_report(&again), cmp_report(&want), "case {n}");
        assert!(!ck.exists(), "case {n}: the checkpoint outlived the run");
        assert_eq!(names(&spill), Vec::<PathBuf>::new());
    }
}
