//! `dup --memory-limit` (issue 34): at a limit of a few KB the grouping by size and hash runs
//! through spill files and prints, lists and reports exactly what the run in memory does, at
//! np 1, `--ranks 3` and `mpirun -np 2`; a full TMPDIR is an error naming it.

use super::dup::{dup_outcome, expected, has_marks, parse, resumable_dup, resumable_tree, tree};
use super::spill::Mount;
use mfu_tests::{launches, Tool};
use std::fs;
use std::path::{Path, PathBuf};

/// [`tree`] under `dir/t` (groups small and above the prefix, hard links, empty files, unique
/// sizes, a name that is not UTF-8) and, beside it, 40 contents in 3 copies each and 60 files
/// of sizes of their own: enough names that a few KB hold a small part of them.
fn big_tree(dir: &Path) -> PathBuf {
    let root = dir.join("t");
    tree(&root);
    let many = root.join("many");
    fs::create_dir_all(&many).unwrap();
    for i in 0..40u64 {
        let data = mfu_tests::noise(100 + i, 50 + (i % 7) as usize * 3);
        for copy in 0..3 {
            fs::write(many.join(format!("c{i}-{copy}")), &data).unwrap();
        }
    }
    for i in 0..60u64 {
        fs::write(
            many.join(format!("u{i}")),
            mfu_tests::noise(500 + i, 1000 + i as usize),
        )
        .unwrap();
    }
    root
}

fn dup(root: &Path) -> Tool {
    Tool::new("dup").arg(root)
}

fn names(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// The counts of a `--json` report.
fn counts(v: &serde_json::Value) -> Vec<serde_json::Value> {
    [
        "files",
        "empty",
        "same_size",
        "same_prefix",
        "groups",
        "redundant",
        "reclaimable",
        "unreadable",
        "status",
    ]
    .iter()
    .map(|k| v[*k].clone())
    .collect()
}

#[test]
fn a_grouping_at_a_tiny_limit_spills_and_gives_the_output_of_the_run_in_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let root = big_tree(tmp.path());
    let groups = expected(&root);
    assert_eq!(groups.len(), 44, "the tree's groups");
    let spill = tmp.path().join("spill");
    fs::create_dir(&spill).unwrap();
    let list = tmp.path().join("all.mfu");
    Tool::new("walk")
        .args(["-q", "-o"])
        .arg(&list)
        .arg(&root)
        .run()
        .assert_status(0);
    // Read every file once, so that the listings of the runs compared are the same (atime).
    dup(&root).run().assert_status(0);

    // The run in memory (the default limit): nothing spills.
    let want_v4 = tmp.path().join("want.mfu");
    let want_txt = tmp.path().join("want.txt");
    let want = dup(&root).arg("-o").arg(&want_v4).run().assert_status(0);
    assert!(
        !want.stderr_str().contains("Spilled"),
        "{}",
        want.stderr_str()
    );
    assert_eq!(parse(&want.output.stdout), groups);
    dup(&root)
        .args(["-t", "-o"])
        .arg(&want_txt)
        .run()
        .assert_status(0);
    let want_json = dup(&root).arg("--json").run().assert_status(0);
    let want_json: serde_json::Value = serde_json::from_slice(&want_json.output.stdout).unwrap();
    assert!(want_json["spilled"].is_null(), "{want_json}");

    for (name, launch) in launches() {
        let tiny = |t: Tool| {
            launch(t)
                .args(["--memory-limit", "4k", "--tmpdir"])
                .arg(&spill)
        };
        // The sets printed and the redundant-copy list (v4), byte for byte.
        let got_v4 = tmp.path().join("got.mfu");
        let got = tiny(dup(&root).arg("-v").arg("-o").arg(&got_v4))
            .run()
            .assert_status(0);
        assert!(
            got.output.stdout == want.output.stdout,
            "{name}: the groups printed differ\n{}",
            got.stdout_str()
        );
        assert!(
            fs::read(&got_v4).unwrap() == fs::read(&want_v4).unwrap(),
            "{name}: the -o list differs"
        );
        got.stderr_contains("Memory limit: 4.000 KiB per rank (--memory-limit)")
            .stderr_contains("Spilled: ")
            .stderr_contains(&format!("to {}", spill.display()));
        assert_eq!(
            names(&spill),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );

        // The text list.
        let got_txt = tmp.path().join("got.txt");
        tiny(dup(&root).args(["-t", "-o"]).arg(&got_txt))
            .run()
            .assert_status(0);
        assert!(
            fs::read(&got_txt).unwrap() == fs::read(&want_txt).unwrap(),
            "{name}: the text list differs"
        );

        // The report's counts, and what spilled.
        let json = tiny(dup(&root).arg("--json")).run().assert_status(0);
        let v: serde_json::Value = serde_json::from_slice(&json.output.stdout).unwrap();
        assert_eq!(counts(&v), counts(&want_json), "{name}: {v}");
        assert_eq!(v["memory_limit"], "4.000 KiB per rank (--memory-limit)");
        assert_eq!(v["tmpdir"], spill.to_str().unwrap());
        let s = &v["spilled"];
        assert!(s["runs"].as_u64().unwrap() > 10, "{name}: {s}");
        // Every name of a regular file went through the runs by size at least once.
        assert!(
            s["spill_bytes"].as_u64().unwrap() > 150 * 100,
            "{name}: {s}"
        );
        assert!(
            s["spill_bytes_max_rank"].as_u64().unwrap() > 0,
            "{name}: {s}"
        );
        // With the groups on stderr (--json owns stdout), the same groups.
        assert_eq!(parse(&json.output.stderr), groups, "{name}");

        // --verify of the list written in memory: the same names kept, in the same order.
        let verify = |t: Tool, out: &Path| t.arg("--verify").arg(&want_v4).arg("-o").arg(out);
        let (sure_want, sure_got) = (
            tmp.path().join("sure-want.mfu"),
            tmp.path().join("sure.mfu"),
        );
        launch(verify(dup(&root), &sure_want))
            .run()
            .assert_status(0);
        tiny(verify(dup(&root), &sure_got)).run().assert_status(0);
        assert!(
            fs::read(&sure_got).unwrap() == fs::read(&sure_want).unwrap(),
            "{name}: the --verify list differs"
        );

        // A list as input, read a piece at a time: the groups, the list and the counts.
        let from_list = tiny(
            Tool::new("dup")
                .args(["-v", "-o"])
                .arg(&got_v4)
                .arg("-i")
                .arg(&list),
        )
        .run()
        .assert_status(0);
        assert!(
            from_list.output.stdout == want.output.stdout,
            "{name}: the groups of -i LIST differ"
        );
        from_list.stderr_contains("the list was read a piece at a time");
        assert!(
            fs::read(&got_v4).unwrap() == fs::read(&want_v4).unwrap(),
            "{name}: the -o list of -i LIST differs"
        );
        let json = tiny(Tool::new("dup").arg("--json").arg("-i").arg(&list))
            .run()
            .assert_status(0);
        let v: serde_json::Value = serde_json::from_slice(&json.output.stdout).unwrap();
        assert_eq!(counts(&v), counts(&want_json), "{name}, -i LIST: {v}");
        assert_eq!(v["list_in_pieces"], true, "{name}");
    }
}

#[test]
fn a_grouping_that_fills_its_tmpdir_fails_naming_it_and_prints_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = big_tree(tmp.path());
    let full = tmp.path().join("full");
    let _mount = Mount::tmpfs(&full, "8k");
    let out = tmp.path().join("out.mfu");
    let list = tmp.path().join("all.mfu");
    Tool::new("walk")
        .args(["-q", "-o"])
        .arg(&list)
        .arg(&root)
        .run()
        .assert_status(0);
    for (name, launch) in launches() {
        let run = launch(dup(&root).arg("-o").arg(&out))
            .args(["--memory-limit", "4k", "--tmpdir"])
            .arg(&full)
            .run()
            .assert_status(1);
        run.stderr_contains(&format!("TMPDIR {}", full.display()))
            .stderr_contains("no room")
            .stderr_contains("the comparison was not finished");
        // Groups printed then would look like all there are.
        assert!(run.output.stdout.is_empty(), "{name}: {}", run.stdout_str());
        assert!(!out.exists(), "{name}: a list after a failed grouping");
        assert_eq!(
            names(&full),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );

        // The same with a list read a piece at a time.
        let run = launch(Tool::new("dup").arg("-i").arg(&list).arg("-o").arg(&out))
            .args(["--memory-limit", "4k", "--tmpdir"])
            .arg(&full)
            .run()
            .assert_status(1);
        run.stderr_contains(&format!("TMPDIR {}", full.display()))
            .stderr_contains("the comparison was not finished");
        assert!(run.output.stdout.is_empty(), "{name}: {}", run.stdout_str());
        assert!(!out.exists(), "{name}: a list after a failed grouping");
        assert_eq!(
            names(&full),
            Vec::<PathBuf>::new(),
            "{name}: spill files left"
        );
    }
}

/// A spilling dup stopped in its prefix pass continues from its checkpoint at another launch,
/// spilling again, and gives what an uninterrupted run in memory gives.
#[test]
fn a_stopped_spilling_dup_continues_from_its_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    resumable_tree(dir);
    let spill = dir.join("spill");
    fs::create_dir(&spill).unwrap();
    let want = dup_outcome(&resumable_dup(Tool::new("dup"), dir, None).run(), dir);
    assert_eq!(want.0, Some(0));
    let tiny = |t: Tool| {
        t.args(["-v", "--memory-limit", "1k", "--tmpdir"])
            .arg(&spill)
    };
    let cases = [
        (Tool::new("dup"), Tool::new("dup").ranks(3)),
        (Tool::new("dup").mpi(2), Tool::new("dup")),
    ];
    for (n, (first, rerun)) in cases.into_iter().enumerate() {
        let ckpt = dir.join(format!("ckpt {n}"));
        let cut = tiny(resumable_dup(first, dir, Some(&ckpt)))
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
            .run();
        let err = cut.stderr_str();
        assert_eq!(cut.code(), Some(1), "case {n}: {err}");
        assert!(
            err.contains("run the same command again"),
            "case {n}: {err}"
        );
        assert!(err.contains("Spilled: "), "case {n}: {err}");
        assert_eq!(
            dup_outcome(&cut, dir).2,
            None,
            "case {n}: a cut-short run wrote its list"
        );
        assert!(has_marks(&ckpt), "case {n}: no marks kept");
        let again = tiny(resumable_dup(rerun, dir, Some(&ckpt))).run();
        again
            .stderr_contains("continuing from checkpoint")
            .stderr_contains("Spilled: ");
        assert_eq!(dup_outcome(&again, dir), want, "case {n}");
        assert!(!ckpt.exists(), "case {n}: the checkpoint outlived the run");
        assert_eq!(
            names(&spill),
            Vec::<PathBuf>::new(),
            "case {n}: spill files left"
        );
    }
}

/// A list read a piece at a time has the digest of the list read whole: a dup of `-i LIST`
/// stopped in memory continues from its checkpoint when the rerun reads the list in pieces
/// (and the other way round), with the result of an uninterrupted run.
#[test]
fn a_list_read_in_pieces_continues_a_checkpoint_of_the_list_read_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    resumable_tree(dir);
    let list = dir.join("all.mfu");
    Tool::new("walk")
        .args(["-q", "-o"])
        .arg(&list)
        .arg(dir.join("t"))
        .run()
        .assert_status(0);
    let spill = dir.join("spill");
    fs::create_dir(&spill).unwrap();
    let from_list = |t: Tool, ckpt: &Path, tiny: bool| {
        let t = t
            .args(["-v", "-t", "-o"])
            .arg(dir.join("extra.txt"))
            .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20")
            .arg("--checkpoint")
            .arg(ckpt)
            .arg("-i")
            .arg(&list);
        if tiny {
            t.args(["--memory-limit", "1k", "--tmpdir"]).arg(&spill)
        } else {
            t
        }
    };
    let want_ckpt = dir.join("unused");
    let want = dup_outcome(&from_list(Tool::new("dup"), &want_ckpt, false).run(), dir);
    assert_eq!(want.0, Some(0));
    assert!(!want_ckpt.exists());
    for (n, (first, rerun, tiny_first)) in [
        (Tool::new("dup"), Tool::new("dup").ranks(3), false),
        (Tool::new("dup").mpi(2), Tool::new("dup"), true),
    ]
    .into_iter()
    .enumerate()
    {
        let ckpt = dir.join(format!("ckpt {n}"));
        let cut = from_list(first, &ckpt, tiny_first)
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
            .run();
        assert_eq!(cut.code(), Some(1), "case {n}: {}", cut.stderr_str());
        assert_eq!(
            cut.stderr_str().contains("read a piece at a time"),
            tiny_first,
            "case {n}: {}",
            cut.stderr_str()
        );
        assert_eq!(dup_outcome(&cut, dir).2, None, "case {n}");
        let again = from_list(rerun, &ckpt, !tiny_first).run();
        again.stderr_contains("continuing from checkpoint");
        assert_eq!(
            again.stderr_str().contains("read a piece at a time"),
            !tiny_first,
            "case {n}: {}",
            again.stderr_str()
        );
        assert_eq!(dup_outcome(&again, dir), want, "case {n}");
        assert!(!ckpt.exists(), "case {n}: the checkpoint outlived the run");
    }
}
