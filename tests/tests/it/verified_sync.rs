//! Incremental verified sync (`sync --verify --state FILE`) and `cmp --manifest M
//! --update-manifest`, at one rank, `--ranks 3` and under `mpirun -np 2`.

use mfu_tests::{launches, noise, Tool};
use std::path::Path;

fn tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    for i in 0..12u64 {
        let dir = ["", "sub/", "sub/deeper/"][i as usize % 3];
        let len = [0, 1, 5000, 70_000][i as usize % 4];
        std::fs::write(root.join(format!("{dir}f{i}")), noise(i, len)).unwrap();
    }
    std::fs::write(root.join("big"), noise(99, (1 << 20) + 3)).unwrap();
}

/// Regular files of `tree`.
const FILES: u64 = 13;

fn json(run: &mfu_tests::Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout_str()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout_str()))
}

/// Rewrite `path` with other bytes of the same length, and give it back its mtime (as `touch
/// -d` would): only the ctime tells.
fn rewrite_keeping_mtime(path: &Path) {
    let before = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(path, &bytes).unwrap();
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(before).unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().modified().unwrap(), before);
}

fn sync(launch: fn(Tool) -> Tool, state: &Path, src: &Path, dst: &Path) -> Tool {
    launch(Tool::new("sync"))
        .args(["--verify", "--json", "--state"])
        .arg(state)
        .arg(src)
        .arg(dst)
}

/// The counts of the `state` report: (files, verified, copied, read, unchanged, differ,
/// written).
fn counts(run: &mfu_tests::Run) -> [u64; 7] {
    let s = &json(run)["state"];
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k}: {s}"));
    [
        n("files"),
        n("verified"),
        n("copied"),
        n("read"),
        n("unchanged"),
        n("differ"),
        u64::from(s["written"].as_bool().unwrap()),
    ]
}

#[test]
fn a_second_run_reads_nothing_and_a_change_that_kept_size_and_mtime_is_caught() {
    let mut first_state = None;
    for (name, launch) in launches() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst, state) = (
            tmp.path().join("src"),
            tmp.path().join("dst"),
            tmp.path().join("state"),
        );
        tree(&src);
        // First run: everything copied and read back.
        let run = sync(launch, &state, &src, &dst).expect(0);
        assert_eq!(counts(&run), [FILES, FILES, FILES, 0, 0, 0, 1], "{name}");
        // Nothing changed: nothing read.
        let run = sync(launch, &state, &src, &dst).expect(0);
        assert_eq!(counts(&run), [FILES, 0, 0, 0, FILES, 0, 1], "{name}");
        let text = launch(Tool::new("sync"))
            .args(["--verify", "--state"])
            .arg(&state)
            .arg(&src)
            .arg(&dst)
            .expect(0);
        assert!(
            text.stdout_str().contains(&format!(
                "verified 0 of {FILES} ({FILES} unchanged since the state"
            )),
            "{name}: {}",
            text.stdout_str()
        );
        // A destination rewritten with its size and mtime kept (damage a sync alone never
        // sees): found by its ctime, named, exit 1, not recorded.
        rewrite_keeping_mtime(&dst.join("sub/f1"));
        let run = sync(launch, &state, &src, &dst).expect(1);
        run.stderr_contains("sub/f1: its content differs from the source's");
        assert_eq!(counts(&run), [FILES, 1, 0, 1, FILES - 1, 1, 1], "{name}");
        // Left without the source's mtime: the next sync copies it again.
        let run = sync(launch, &state, &src, &dst).expect(0);
        assert_eq!(counts(&run), [FILES, 1, 1, 0, FILES - 1, 0, 1], "{name}");
        assert_eq!(
            std::fs::read(dst.join("sub/f1")).unwrap(),
            std::fs::read(src.join("sub/f1")).unwrap()
        );
        // A source rewritten the same way: read again, the copy differs.
        rewrite_keeping_mtime(&src.join("big"));
        let run = sync(launch, &state, &src, &dst).expect(1);
        run.stderr_contains("big: its content differs from the source's");
        let run = sync(launch, &state, &src, &dst).expect(0);
        assert_eq!(counts(&run), [FILES, 1, 1, 0, FILES - 1, 0, 1], "{name}");
        assert_eq!(
            std::fs::read(dst.join("big")).unwrap(),
            std::fs::read(src.join("big")).unwrap()
        );
        // The state's bytes do not depend on the rank count: the first launch's state, taken
        // up by each other launch over the same trees, is trusted and written back the same.
        match &first_state {
            None => first_state = Some((tmp, src, dst, std::fs::read(&state).unwrap())),
            Some((_, src0, dst0, bytes0)) => {
                let again = tmp.path().join("state0");
                std::fs::write(&again, bytes0).unwrap();
                let run = sync(launch, &again, src0, dst0).expect(0);
                assert_eq!(counts(&run), [FILES, 0, 0, 0, FILES, 0, 1], "{name}");
                assert_eq!(&std::fs::read(&again).unwrap(), bytes0, "{name}");
            }
        }
    }
}

#[test]
fn a_foreign_truncated_or_damaged_state_is_not_trusted() {
    for (name, launch) in launches() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst, state) = (
            tmp.path().join("src"),
            tmp.path().join("dst"),
            tmp.path().join("state"),
        );
        tree(&src);
        sync(launch, &state, &src, &dst).expect(0);
        let good = std::fs::read(&state).unwrap();
        // A state of another pair of trees (same relative paths, same files).
        let (src2, dst2) = (tmp.path().join("src2"), tmp.path().join("dst2"));
        std::fs::create_dir(&src2).unwrap();
        let mut damaged = good.clone();
        damaged[good.len() / 2] ^= 1;
        let cases: Vec<(&str, Vec<u8>, &Path, &Path)> = vec![
            ("made for", good.clone(), &src2, &dst2),
            ("truncated", good[..good.len() - 5].to_vec(), &src, &dst),
            ("damaged", damaged, &src, &dst),
            ("not a state file", b"hello\n".repeat(20), &src, &dst),
        ];
        for (why, bytes, s, d) in cases {
            if s == src2.as_path() {
                Tool::new("cp")
                    .args(["-p"])
                    .arg(format!("{}/", src.display()))
                    .arg(s)
                    .expect(0);
            }
            std::fs::write(&state, &bytes).unwrap();
            let run = sync(launch, &state, s, d).expect(0);
            run.stderr_contains("not trusted");
            run.stderr_contains(why);
            let [files, verified, _, _, unchanged, _, written] = counts(&run);
            assert_eq!(
                (files, verified, unchanged, written),
                (FILES, FILES, 0, 1),
                "{name} {why}"
            );
            // Rewritten: trusted by the next run.
            let run = sync(launch, &state, s, d).expect(0);
            assert_eq!(counts(&run)[1], 0, "{name} {why}");
        }
    }
}

#[test]
fn a_state_inside_dest_or_without_verify_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    tree(&src);
    std::fs::create_dir(&dst).unwrap();
    let run = Tool::new("sync")
        .args(["--verify", "--state"])
        .arg(dst.join("state"))
        .arg(&src)
        .arg(&dst)
        .expect(2);
    run.stderr_contains("--state");
    run.stderr_contains("lies inside the destination");
    assert_eq!(std::fs::read_dir(&dst).unwrap().count(), 0, "nothing done");
    let run = Tool::new("sync")
        .arg("--state")
        .arg(tmp.path().join("state"))
        .arg(&src)
        .arg(&dst)
        .expect(2);
    run.stderr_contains("--verify");
    let run = Tool::new("sync")
        .args(["--verify", "--dryrun", "--state"])
        .arg(tmp.path().join("state"))
        .arg(&src)
        .arg(&dst)
        .expect(2);
    run.stderr_contains("--dryrun");
}

/// `cmp --update-manifest` (or `--manifest-hash`) with two trees and no `--manifest` is a
/// usage error, not a compare of the trees that updates nothing (clap lets a `requires` pass
/// when the option required conflicts with one given, DEST).
#[test]
fn update_manifest_without_a_manifest_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    tree(&src);
    tree(&dst);
    for option in [&["--update-manifest"][..], &["--manifest-hash", "blake3"]] {
        let run = Tool::new("cmp")
            .args(option.iter().copied())
            .arg(&src)
            .arg(&dst)
            .expect(2);
        run.stderr_contains(option[0]);
        run.stderr_contains("needs --manifest");
    }
}

/// `cmp --manifest M --update-manifest DIR` after a change, an addition and a removal gives
/// the manifest `cp --manifest` writes for the tree as it is now, in its hash.
#[test]
fn an_updated_manifest_is_the_one_written_fresh_for_the_new_tree() {
    for (name, launch) in launches() {
        for hash in ["blake3", "sha256"] {
            let tmp = tempfile::tempdir().unwrap();
            let (src, dir) = (tmp.path().join("src"), tmp.path().join("dir"));
            tree(&src);
            let m = tmp.path().join("m");
            Tool::new("cp")
                .args(["-p", "--manifest-hash", hash, "--manifest"])
                .arg(&m)
                .arg(&src)
                .arg(&dir)
                .expect(0);
            let before = std::fs::read(&m).unwrap();
            // Nothing changed: left as it is, exit 0.
            let run = launch(Tool::new("cmp"))
                .args(["--update-manifest", "--manifest"])
                .arg(&m)
                .arg(&dir)
                .expect(0);
            assert!(
                run.stdout_str().contains("unchanged"),
                "{}",
                run.stdout_str()
            );
            rewrite_keeping_mtime(&dir.join("sub/f7"));
            std::fs::write(dir.join("sub/added"), b"new file").unwrap();
            std::fs::write(dir.join("sub/deeper/new\nline"), b"escaped name").unwrap();
            std::fs::remove_file(dir.join("f3")).unwrap();
            let run = launch(Tool::new("cmp"))
                .args(["--json", "--update-manifest", "--manifest"])
                .arg(&m)
                .arg(&dir)
                .expect(1);
            run.stderr_contains("sub/f7: FAILED");
            run.stderr_contains("f3: missing");
            run.stderr_contains("sub/added: not in the manifest");
            let j = json(&run);
            let u = &j["manifest"]["update"];
            assert_eq!(u["written"], true, "{name} {hash}: {j}");
            assert_eq!(
                (&u["changed"], &u["added"], &u["removed"]),
                (&1.into(), &2.into(), &1.into()),
                "{name} {hash}: {j}"
            );
            assert_eq!(j["manifest"]["hash"], hash);
            assert_ne!(std::fs::read(&m).unwrap(), before);
            // The manifest cp writes for the tree as it is now.
            let fresh = tmp.path().join("fresh");
            Tool::new("cp")
                .args(["-p", "--manifest-hash", hash, "--manifest"])
                .arg(&fresh)
                .arg(&dir)
                .arg(tmp.path().join("again"))
                .expect(0);
            assert_eq!(
                String::from_utf8_lossy(&std::fs::read(&m).unwrap()),
                String::from_utf8_lossy(&std::fs::read(&fresh).unwrap()),
                "{name} {hash}"
            );
            // And the tree now matches it.
            launch(Tool::new("cmp"))
                .args(["--update-manifest", "--manifest"])
                .arg(&m)
                .arg(&dir)
                .expect(0);
            // Nothing beside it.
            let names: Vec<_> = std::fs::read_dir(tmp.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names.len(), 5, "{names:?}");
        }
    }
}

/// A manifest inside the tree it lists (`b3sum` run in the tree) is not added to itself;
/// `./` names stay `./` names; a line that is no manifest line leaves it as it was.
#[test]
fn a_manifest_in_its_tree_keeps_its_conventions_and_a_bad_line_stops_the_update() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dir");
    tree(&dir);
    let m = dir.join("SUMS");
    let listed = Tool::new("cp")
        .args(["-p", "--manifest"])
        .arg(tmp.path().join("plain"))
        .arg(&dir)
        .arg(tmp.path().join("copy"))
        .expect(0);
    drop(listed);
    let plain = std::fs::read_to_string(tmp.path().join("plain")).unwrap();
    let dotted: String = plain
        .lines()
        .map(|l| l.replacen("  ", "  ./", 1) + "\n")
        .collect();
    std::fs::write(&m, &dotted).unwrap();
    std::fs::write(dir.join("zz-added"), b"more").unwrap();
    Tool::new("cmp")
        .ranks(2)
        .args(["--update-manifest", "--manifest"])
        .arg(&m)
        .arg(&dir)
        .expect(1);
    let now = std::fs::read_to_string(&m).unwrap();
    assert!(now.starts_with(&dotted), "{now}");
    assert!(now[dotted.len()..].ends_with("  ./zz-added\n"), "{now}");
    assert_eq!(now.lines().count(), dotted.lines().count() + 1);
    // Its digests are right (the manifest itself is not listed).
    Tool::new("cmp")
        .arg("--manifest")
        .arg(&m)
        .arg(&dir)
        .expect(0);
    // A line that is no manifest line: not updated, named.
    std::fs::write(dir.join("zz-second"), b"x").unwrap();
    let broken = format!("{now}garbage\n");
    std::fs::write(&m, &broken).unwrap();
    let run = Tool::new("cmp")
        .args(["--update-manifest", "--manifest"])
        .arg(&m)
        .arg(&dir)
        .expect(1);
    run.stderr_contains("not updated (1 of its lines are not manifest lines)");
    assert_eq!(std::fs::read_to_string(&m).unwrap(), broken);
}

/// A check stopped by SIGTERM rewrites nothing; its rerun takes the digests the checkpoint
/// recorded, reads the rest, and rewrites the manifest as an uninterrupted run would have.
#[test]
fn a_stopped_update_writes_nothing_and_its_rerun_updates_the_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dir");
    tree(&dir);
    let m = tmp.path().join("m");
    Tool::new("cp")
        .args(["-p", "--manifest"])
        .arg(&m)
        .arg(&dir)
        .arg(tmp.path().join("copy"))
        .expect(0);
    // A sparse file far too big to hash in the test's time, listed with a wrong digest.
    std::fs::File::create(dir.join("huge"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let mut listed = std::fs::read_to_string(&m).unwrap();
    listed.push_str(&format!("{}  huge\n", "0".repeat(64)));
    std::fs::write(&m, &listed).unwrap();
    rewrite_keeping_mtime(&dir.join("sub/f7"));
    let checkpoints = tmp.path().join("ck");
    let cmp = || {
        Tool::new("cmp")
            .args([
                "--update-manifest",
                "--manifest-hash",
                "blake3",
                "--checkpoint",
            ])
            .arg(&checkpoints)
            .arg("--manifest")
            .arg(&m)
            .arg(&dir)
    };
    let mut cmd = cmp().command();
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not updated (the check was stopped"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&m).unwrap(), listed);
    // The huge file shrinks (a new identity: read again); the others come from the
    // checkpoint.
    std::fs::File::options()
        .write(true)
        .open(dir.join("huge"))
        .unwrap()
        .set_len(10)
        .unwrap();
    cmp().expect(1).stderr_contains("sub/f7: FAILED");
    let fresh = tmp.path().join("fresh");
    Tool::new("cp")
        .args(["-p", "--manifest"])
        .arg(&fresh)
        .arg(&dir)
        .arg(tmp.path().join("again"))
        .expect(0);
    assert_eq!(
        std::fs::read_to_string(&m).unwrap(),
        std::fs::read_to_string(&fresh).unwrap()
    );
}

/// Both names of a hard-linked file made by this run are verified by the read-back of its
/// one copy: neither is read again.
#[test]
fn a_hard_link_made_by_the_run_takes_its_first_members_verified_digest() {
    for (name, launch) in launches() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst, state) = (
            tmp.path().join("src"),
            tmp.path().join("dst"),
            tmp.path().join("state"),
        );
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("x"), noise(5, 9000)).unwrap();
        std::fs::hard_link(src.join("x"), src.join("y")).unwrap();
        let run = sync(launch, &state, &src, &dst).expect(0);
        assert_eq!(counts(&run), [2, 2, 2, 0, 0, 0, 1], "{name}");
        let run = sync(launch, &state, &src, &dst).expect(0);
        assert_eq!(counts(&run), [2, 0, 0, 0, 2, 0, 1], "{name}");
    }
}
