//! `mfu-rs sync` end to end: fresh copies, change sets with `--delete` at 1, 2 and 4 ranks,
//! `--dryrun` action lists, `--contents`, restart after `kill -9`, refusal to delete after an
//! incomplete walk, `--link-dest`, `--batch-files`, the old name.

use mfu_tests::tree::{self, Compare};
use mfu_tests::{bin, clean_env, expect_status, Tool};
use rand::{Rng, RngCore, SeedableRng};
use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The counts of a `Synced: C created, U updated, D deleted, M metadata fixed, L linked; B bytes
/// copied (HUMAN) in T s` summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    created: u64,
    updated: u64,
    deleted: u64,
    meta: u64,
    linked: u64,
    bytes: u64,
}

fn summary(out: &Output) -> Counts {
    summary_line(out).1
}

fn summary_line(out: &Output) -> (String, Counts) {
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("Synced: "))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "want exactly one `Synced: ` line on stdout (rank 0 only):\n{stdout}"
    );
    let line = lines[0];
    let num = |labels: &[&str]| -> u64 {
        let (at, label) = labels
            .iter()
            .find_map(|l| line.find(l).map(|at| (at, l)))
            .unwrap_or_else(|| panic!("no `{}` in the summary: {line}", labels[0]));
        line[..at]
            .trim_end()
            .rsplit([' ', ':', ',', '('].as_ref())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count before `{label}` in: {line}"))
    };
    let counts = Counts {
        created: num(&[" created"]),
        updated: num(&[" updated"]),
        deleted: num(&[" deleted"]),
        meta: num(&[" metadata fixed"]),
        linked: num(&[" linked"]),
        // The contract's `B bytes copied (HUMAN)`; also read `HUMAN (B bytes) copied`, so that a
        // wrong format fails only the tests that check the format.
        bytes: num(&[" bytes copied", " bytes) copied"]),
    };
    (line.to_string(), counts)
}

/// [`summary`], also checking the contract's format:
/// `Synced: C created, U updated, D deleted, M metadata fixed, L linked; B bytes copied (HUMAN) in T s`.
fn summary_strict(out: &Output) -> Counts {
    let (line, c) = summary_line(out);
    let want = format!(
        "Synced: {} created, {} updated, {} deleted, {} metadata fixed, {} linked; {} bytes copied (",
        c.created, c.updated, c.deleted, c.meta, c.linked, c.bytes
    );
    assert!(
        line.starts_with(&want) && line.ends_with(" s"),
        "summary format: want `{want}HUMAN) in T s`, got `{line}`"
    );
    c
}

const ZERO: Counts = Counts {
    created: 0,
    updated: 0,
    deleted: 0,
    meta: 0,
    linked: 0,
    bytes: 0,
};

/// The `(action, path)` lines of a `--dryrun`, and its `Dry run:` line.
fn dryrun_actions(out: &Output) -> (BTreeSet<(String, Vec<u8>)>, String) {
    let mut set = BTreeSet::new();
    let mut summary = None;
    for line in out.stdout.split(|&b| b == b'\n') {
        if line.starts_with(b"Dry run:") {
            assert!(summary.is_none(), "two `Dry run:` lines");
            summary = Some(text(line));
            continue;
        }
        for action in ["create", "update", "delete", "meta", "link"] {
            if let Some(p) = line.strip_prefix(format!("{action} ").as_bytes()) {
                let fresh = set.insert((action.to_string(), p.to_vec()));
                assert!(fresh, "action listed twice: {}", text(line));
            }
        }
    }
    let summary = summary.unwrap_or_else(|| panic!("no `Dry run:` line:\n{}", text(&out.stdout)));
    (set, summary)
}

fn show_actions(set: &BTreeSet<(String, Vec<u8>)>) -> String {
    set.iter()
        .map(|(a, p)| format!("  {a} {}", tree::lossy(p)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn abs(p: &Path, rel: &str) -> Vec<u8> {
    let mut v = p.as_os_str().as_bytes().to_vec();
    if !rel.is_empty() {
        v.push(b'/');
        v.extend_from_slice(rel.as_bytes());
    }
    v
}

/// A temporary directory that others can traverse (for the tests that drop privileges).
fn open_tempdir() -> tempfile::TempDir {
    mfu_tests::nobody_tempdir()
}

// ---------------------------------------------------------------------------------------------
// (1) Fresh destination

#[test]
fn sync_into_a_fresh_destination_equals_the_source_at_1_and_2_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let aw = tree::make_awkward_tree(&src, false);
    let want = tree::snapshot(&src);
    let mut noop_outputs = Vec::new();
    for np in [1, 2] {
        let dest = tmp.path().join(format!("dest{np}"));
        let out = Tool::new("sync")
            .np(np)
            .arg("-S")
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let c = summary(&out);
        eprintln!("fresh sync np={np}: {c:?}");
        assert_eq!(c.deleted + c.updated + c.linked, 0, "{c:?}");
        let all = tree::file_bytes(&want);
        assert!(
            c.bytes <= all && c.bytes >= all - tree::SPARSE_SIZE + 2 * 65536,
            "np={np}: bytes copied should be the file data ({all} bytes, holes excepted): {c:?}"
        );
        let got = tree::snapshot(&dest);
        tree::assert_equal_in(&format!("fresh sync np={np}"), &want, &got, Compare::FULL);
        assert!(got[&aw.sparse_rel].blocks * 512 <= tree::SPARSE_SIZE / 8);
        // Nothing to do the second time, and nothing written.
        let out = Tool::new("sync")
            .np(np)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        assert_eq!(summary(&out), ZERO, "np={np}: second sync");
        let ct = tree::ctime_changes(&got, &tree::snapshot(&dest));
        assert!(
            ct.is_empty(),
            "np={np}: a sync with nothing to do changed: {ct:?}"
        );
        noop_outputs.push(out);
    }
    // The summary's format last, so that it hides no other failure.
    for out in &noop_outputs {
        summary_strict(out);
    }
}

#[test]
fn sync_keeps_hard_link_groups() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("links/sub")).unwrap();
    tree::make_hard_links(&src, &["links/a", "links/b", "links/sub/c"], b"linked\n");
    std::fs::write(src.join("plain"), b"plain\n").unwrap();
    let dest = tmp.path().join("dest");
    Tool::new("sync")
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    tree::assert_equal_in(
        "hard links",
        &tree::snapshot(&src),
        &tree::snapshot(&dest),
        Compare::META,
    );
}

/// A hard-link group whose DEST copies have the source's size and mtime but other bytes: as
/// separate files (an older DEST, a copy made without -H), or still one group of stale bytes.
/// Every name in DEST ends with the source's bytes, as one group, and a second run does
/// nothing: with -c (every byte compared) and, for the separate files, plain sync too (one
/// inode is what a group is). Found by `cargo xtask torture` (seed 70493): `sync -c` compared
/// only the group's first, exit 0 over a stale member.
#[test]
fn a_hard_link_group_with_stale_members_in_dest_is_made_whole_again() {
    for (launch, tool) in [
        ("1 rank", Tool::new("sync")),
        ("2 ranks", Tool::new("sync").ranks(2)),
        ("3 ranks", Tool::new("sync").ranks(3)),
        ("mpirun 2", Tool::new("sync").mpi(2)),
    ] {
        for (contents, linked_in_dest) in [(true, false), (true, true), (false, false)] {
            let ctx =
                format!("{launch}, -c {contents}, stale group linked in DEST {linked_in_dest}");
            let tmp = tempfile::tempdir().unwrap();
            let (src, dest) = (tmp.path().join("src"), tmp.path().join("dest"));
            let names = ["a one", "b|F", "sub/c"];
            std::fs::create_dir_all(src.join("sub")).unwrap();
            std::fs::create_dir_all(dest.join("sub")).unwrap();
            tree::make_hard_links(&src, &names, &mfu_tests::noise(1, 70_000));
            let stale = mfu_tests::noise(2, 70_000);
            if linked_in_dest {
                tree::make_hard_links(&dest, &names, &stale);
            } else {
                // The first of the group is right; the others are files of their own.
                std::fs::write(dest.join(names[0]), mfu_tests::noise(1, 70_000)).unwrap();
                for n in &names[1..] {
                    std::fs::write(dest.join(n), &stale).unwrap();
                }
            }
            let mtime = tree::mtime_of(&src.join(names[0]));
            for n in names {
                tree::set_mtime(&dest.join(n), mtime);
            }
            for d in ["", "sub"] {
                tree::set_mtime(&dest.join(d), tree::mtime_of(&src.join(d)));
            }
            let mut t = tool.clone();
            if contents {
                t = t.arg("-c");
            }
            let t = t.arg(&src).arg(&dest);
            t.run().assert_status(0);
            tree::assert_equal_in(
                &ctx,
                &tree::snapshot(&src),
                &tree::snapshot(&dest),
                Compare::META,
            );
            let inos: BTreeSet<u64> = names
                .iter()
                .map(|n| std::fs::metadata(dest.join(n)).unwrap().ino())
                .collect();
            assert_eq!(inos.len(), 1, "{ctx}: one group in DEST");
            assert_eq!(
                summary(&t.run().assert_status(0)),
                ZERO,
                "{ctx}: a second run does nothing"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (2), (3), (8), (9) A change set

/// The base tree of the change-set tests.
fn change_base(src: &Path) {
    for d in ["d2f/sub", "dir", "nested/deep"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (f, data) in [
        ("keep.txt", "keep\n"),
        ("del.txt", "to be deleted\n"),
        ("touch.txt", "0123456789"),
        ("mode.txt", "mode\n"),
        ("owner.txt", "owner\n"),
        ("f2d", "file that becomes a directory\n"),
        ("d2f/x.txt", "x\n"),
        ("d2f/sub/y.txt", "y\n"),
        ("dir/inner.txt", "inner\n"),
        ("nested/deep/file.txt", "deep\n"),
    ] {
        std::fs::write(src.join(f), data).unwrap();
    }
    std::os::unix::fs::symlink("keep.txt", src.join("link")).unwrap();
    tree::set_xattr(&src.join("keep.txt"), "user.k", b"v");
}

/// Apply the change set to `src` (the root's mtime is restored, so it is not a change).
fn change_apply(src: &Path) {
    let root_mtime = tree::mtime_of(src);
    std::fs::write(src.join("new.txt"), b"new file\n").unwrap();
    std::fs::create_dir(src.join("newdir")).unwrap();
    std::fs::write(src.join("newdir/a.txt"), b"a\n").unwrap();
    std::fs::remove_file(src.join("del.txt")).unwrap();
    let (s, ns) = tree::mtime_of(&src.join("touch.txt"));
    std::fs::write(src.join("touch.txt"), b"abcdefghij").unwrap();
    tree::set_mtime(&src.join("touch.txt"), (s + 7, (ns + 1) % 1_000_000_000));
    tree::chmod(&src.join("mode.txt"), 0o600);
    std::os::unix::fs::lchown(src.join("owner.txt"), Some(1234), Some(1234)).unwrap();
    tree::chmod(&src.join("dir"), 0o750);
    std::fs::remove_file(src.join("f2d")).unwrap();
    std::fs::create_dir(src.join("f2d")).unwrap();
    std::fs::write(src.join("f2d/child.txt"), b"child\n").unwrap();
    std::fs::remove_dir_all(src.join("d2f")).unwrap();
    std::fs::write(src.join("d2f"), b"directory that became a file\n").unwrap();
    tree::set_mtime(src, root_mtime);
}

/// The `--dryrun --delete` actions the change set calls for, in `dest`.
fn change_expected(dest: &Path) -> BTreeSet<(String, Vec<u8>)> {
    [
        ("create", "new.txt"),
        ("create", "newdir"),
        ("create", "newdir/a.txt"),
        ("delete", "del.txt"),
        ("update", "touch.txt"),
        ("meta", "mode.txt"),
        ("meta", "owner.txt"),
        ("meta", "dir"),
        ("delete", "f2d"),
        ("create", "f2d"),
        ("create", "f2d/child.txt"),
        ("delete", "d2f"),
        ("delete", "d2f/x.txt"),
        ("delete", "d2f/sub"),
        ("delete", "d2f/sub/y.txt"),
        ("create", "d2f"),
    ]
    .iter()
    .map(|(a, p)| (a.to_string(), abs(dest, p)))
    .collect()
}

/// Sync, change, `sync --delete` (with `extra` options, at `np` ranks), then a sync with nothing
/// to do; with the dry run checked before the real one when `dryrun`.
fn change_set(np: usize, extra: &[&str], dryrun: bool) {
    let what = format!("np={np} {extra:?}");
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    change_base(&src);
    let dest = tmp.path().join("dest");
    Tool::new("sync")
        .np(np)
        .args(extra)
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    tree::assert_equal_in(
        &format!("{what}: first sync"),
        &tree::snapshot(&src),
        &tree::snapshot(&dest),
        Compare::META,
    );
    change_apply(&src);
    let want = tree::snapshot(&src);
    if dryrun {
        let before = tree::snapshot(&dest);
        let mut cmd = Tool::new("sync")
            .np(np)
            .args(extra)
            .args(["--dryrun", "--delete"])
            .command();
        if np == 1 {
            cmd.arg(&src).arg(&dest);
        } else {
            // Relative and unnormalised arguments: the listed paths are still absolute, normalised.
            cmd.current_dir(tmp.path()).args(["./src/", "dest/./"]);
        }
        let out = expect_status(&mut cmd, 0);
        let (got, line) = dryrun_actions(&out);
        let expected = change_expected(&dest);
        assert!(
            got == expected,
            "{what}: --dryrun actions differ\n--- listed\n{}\n--- expected\n{}\n--- stdout\n{}",
            show_actions(&got),
            show_actions(&expected),
            text(&out.stdout)
        );
        eprintln!("{what}: {line}");
        let after = tree::snapshot(&dest);
        tree::assert_equal_in(&format!("{what}: --dryrun"), &before, &after, Compare::FULL);
        let ct = tree::ctime_changes(&before, &after);
        assert!(
            ct.is_empty(),
            "{what}: --dryrun changed the destination: {ct:?}"
        );
    }
    let out = Tool::new("sync")
        .np(np)
        .args(extra)
        .arg("--delete")
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    let c = summary(&out);
    eprintln!("{what}: change set: {c:?}");
    assert_eq!(
        (c.updated, c.meta, c.linked),
        (1, 3, 0),
        "{what}: touch.txt is updated, mode.txt owner.txt dir have metadata fixed: {c:?}"
    );
    assert_eq!(c.bytes, 10 + 9 + 2 + 6 + 29, "{what}: bytes copied: {c:?}");
    let got = tree::snapshot(&dest);
    tree::assert_equal_in(
        &format!("{what}: sync --delete"),
        &want,
        &got,
        Compare::META,
    );
    let out = Tool::new("sync")
        .np(np)
        .args(extra)
        .arg("--delete")
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    assert_eq!(summary(&out), ZERO, "{what}: sync with nothing to do");
    let ct = tree::ctime_changes(&got, &tree::snapshot(&dest));
    assert!(
        ct.is_empty(),
        "{what}: a sync with nothing to do changed: {ct:?}"
    );
    // The summary's format last, so that it hides no other failure.
    summary_strict(&out);
}

#[test]
fn change_set_with_delete_one_process() {
    change_set(1, &[], false);
}

#[test]
fn dryrun_lists_exactly_the_change_set_and_changes_nothing() {
    change_set(1, &[], true);
}

#[test]
fn change_set_with_delete_at_2_ranks() {
    change_set(2, &[], true);
}

#[test]
fn change_set_with_delete_at_4_ranks() {
    change_set(4, &[], false);
}

#[test]
fn batch_files_7_gives_the_same_result() {
    change_set(1, &["--batch-files", "7"], false);
    change_set(2, &["-b", "7"], false);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for i in 0..40 {
        let d = src.join(format!("d{}", i % 6));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("f{i}")), vec![i as u8; i * 100]).unwrap();
    }
    let dest = tmp.path().join("dest");
    Tool::new("sync")
        .np(2)
        .args(["-b", "7"])
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    tree::assert_equal_in(
        "-b 7",
        &tree::snapshot(&src),
        &tree::snapshot(&dest),
        Compare::META,
    );
}

// ---------------------------------------------------------------------------------------------
// (4) --contents

#[test]
fn contents_catches_a_same_size_same_mtime_change_and_rewrites_one_chunk() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let mut data = vec![0u8; 1 << 20];
    rand::rngs::SmallRng::seed_from_u64(4).fill_bytes(&mut data);
    let f = src.join("data.bin");
    std::fs::write(&f, &data).unwrap();
    std::fs::write(src.join("other"), b"other\n").unwrap();
    let dest = tmp.path().join("dest");
    Tool::new("sync")
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    let mtime = tree::mtime_of(&f);
    {
        use std::os::unix::fs::FileExt;
        let h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        h.write_all_at(&[!data[(512 << 10) + 17]], (512 << 10) + 17)
            .unwrap();
    }
    tree::set_mtime(&f, mtime);
    let want = tree::snapshot(&src);
    let before = tree::snapshot(&dest);
    // Plain sync compares size and mtime: it misses the change (and writes nothing).
    let out = Tool::new("sync")
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    assert_eq!(summary(&out), ZERO);
    let after = tree::snapshot(&dest);
    assert!(
        !tree::diff(&want, &after, Compare::CONTENT, 5).is_empty(),
        "plain sync found the change: it should compare size+mtime only"
    );
    assert!(tree::ctime_changes(&before, &after).is_empty());
    for np in [1, 2] {
        let d = tmp.path().join(format!("dest{np}"));
        tree::run_tool("cp", &["-a".as_ref(), dest.as_os_str(), d.as_os_str()]);
        let out = Tool::new("sync")
            .np(np)
            .args(["--contents", "--chunksize", "64k"])
            .arg(&src)
            .arg(&d)
            .run()
            .assert_status(0);
        let c = summary(&out);
        assert_eq!(c.updated, 1, "np={np}: {c:?}");
        assert!(
            c.bytes > 0 && c.bytes <= 64 << 10,
            "np={np}: --contents must rewrite only the differing 64 KiB chunk: {c:?}"
        );
        tree::assert_equal_in(
            &format!("--contents np={np}"),
            &want,
            &tree::snapshot(&d),
            Compare::META,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (5) kill -9, then sync

/// 3000 small files in 30 directories, and 4 files of 24 MiB.
fn restart_tree(src: &Path) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    for d in 0..30 {
        let dir = src.join(format!("dir{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..100 {
            let mut b = vec![0u8; rng.random_range(1..4000)];
            rng.fill_bytes(&mut b);
            std::fs::write(dir.join(format!("f{i:03}")), &b).unwrap();
        }
    }
    let mut big = vec![0u8; 24 << 20];
    for i in 0..4 {
        rng.fill_bytes(&mut big);
        std::fs::write(src.join(format!("big{i}.bin")), &big).unwrap();
    }
}

#[test]
fn kill_9_during_cp_then_sync_completes_the_copy() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    restart_tree(&src);
    let want = tree::snapshot(&src);
    let total = tree::file_bytes(&want);
    let launch = |np: usize| Tool::new("cp").np(np).arg("-p");
    for np in [1, 2] {
        // How long a whole copy takes here (launcher included), to kill within it.
        let t0 = Instant::now();
        let full = tmp.path().join("full");
        launch(np).arg(&src).arg(&full).run().assert_status(0);
        let whole = t0.elapsed();
        tree::assert_equal_in(
            &format!("uninterrupted cp -p np={np}"),
            &want,
            &tree::snapshot(&full),
            Compare::META,
        );
        std::fs::remove_dir_all(&full).unwrap();
        eprintln!(
            "kill -9: a whole cp -p of {total} bytes in 3004 files at np={np} takes {whole:?}"
        );
        for seed in 1..=3u64 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed * 10 + np as u64);
            let delay = whole.mul_f64(rng.random_range(0.15..0.85));
            let dest = tmp.path().join(format!("dest_np{np}_seed{seed}"));
            let mut cmd = launch(np).arg(&src).arg(&dest).command();
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .process_group(0);
            let mut child = cmd.spawn().unwrap();
            std::thread::sleep(delay);
            let finished = child.try_wait().unwrap().is_some();
            let pgid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            child.wait().unwrap();
            // Ranks that left mpirun's process group must not keep writing during the sync.
            let needle = dest.as_os_str().as_bytes();
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut stragglers = mfu_tests::processes_mentioning(needle);
            while !stragglers.is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
                stragglers = mfu_tests::processes_mentioning(needle);
            }
            for pid in &stragglers {
                if let Some(p) = rustix::process::Pid::from_raw(*pid) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
            }
            assert!(
                stragglers.is_empty(),
                "np={np} seed={seed}: ranks {stragglers:?} outlived their killed mpirun"
            );
            // Bytes of files already complete (same bytes as the source) when the copy died.
            let partial = if dest.exists() {
                let d = tree::snapshot(&dest);
                want.iter()
                    .filter(|(k, n)| {
                        n.kind == tree::Kind::File
                            && d.get(*k).is_some_and(|m| m.digest == n.digest)
                    })
                    .map(|(_, n)| n.size)
                    .sum::<u64>()
            } else {
                0
            };
            let out = Tool::new("sync")
                .arg(&src)
                .arg(&dest)
                .run()
                .assert_status(0);
            let c = summary(&out);
            eprintln!(
                "kill -9 np={np} seed={seed} after {delay:?}{}: files complete in dest: {partial} bytes; \
                 sync copied {} of {total} bytes ({:.1}%), {c:?}",
                if finished {
                    " (cp had already finished)"
                } else {
                    ""
                },
                c.bytes,
                100.0 * c.bytes as f64 / total as f64
            );
            tree::assert_equal_in(
                &format!("kill -9 np={np} seed={seed}, then sync"),
                &want,
                &tree::snapshot(&dest),
                Compare::META,
            );
            std::fs::remove_dir_all(&dest).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (6) --delete after an incomplete walk

#[test]
fn delete_is_refused_when_the_source_walk_is_incomplete() {
    let tmp = open_tempdir();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("secret")).unwrap();
    std::fs::create_dir_all(src.join("open")).unwrap();
    std::fs::write(src.join("secret/hidden.txt"), b"hidden\n").unwrap();
    std::fs::write(src.join("open/a.txt"), b"a\n").unwrap();
    std::fs::write(src.join("top.txt"), b"top\n").unwrap();
    let dest = tmp.path().join("dest");
    Tool::new("sync")
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    std::fs::write(dest.join("extra.txt"), b"only in dest\n").unwrap();
    std::fs::write(dest.join("secret/old.txt"), b"only in dest too\n").unwrap();
    std::fs::write(dest.join("open/b.txt"), b"dest only, readable part\n").unwrap();
    // All of it belongs to nobody, so preserving owners is no failure of its own.
    tree::chown_tree(&src, 65534, 65534);
    tree::chown_tree(&dest, 65534, 65534);
    tree::chmod(&src.join("secret"), 0o000);
    let _ = tree::run_tool("setpriv", &["--version".as_ref()]);
    for np in [1, 2] {
        let out = Tool::new("sync")
            .np(np)
            .as_nobody()
            .env("HOME", tmp.path())
            .arg("--delete")
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(1);
        let err = text(&out.stderr);
        assert!(
            err.contains(&*src.join("secret").to_string_lossy()),
            "np={np}: stderr must name the unreadable directory:\n{err}"
        );
        assert!(
            err.to_lowercase().contains("delet"),
            "np={np}: stderr must say that deletion was refused:\n{err}"
        );
        for f in ["extra.txt", "secret/old.txt", "open/b.txt"] {
            assert!(
                dest.join(f).exists(),
                "np={np}: {f} was deleted after an incomplete source walk"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (7) --link-dest

#[test]
fn link_dest_hard_links_unchanged_files() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for f in ["a", "b", "sub/c", "sub/d", "changed"] {
        std::fs::write(src.join(f), format!("content of {f}\n")).unwrap();
    }
    let prev = tmp.path().join("prev");
    Tool::new("sync")
        .arg(&src)
        .arg(&prev)
        .run()
        .assert_status(0);
    std::fs::write(src.join("changed"), b"new content, other size\n").unwrap();
    std::fs::write(src.join("sub/added"), b"added\n").unwrap();
    let want = tree::snapshot(&src);
    let unchanged = ["a", "b", "sub/c", "sub/d"];
    for np in [1, 2] {
        let dest = tmp.path().join(format!("dest{np}"));
        let mut link_dest = std::ffi::OsString::from("--link-dest=");
        link_dest.push(&prev);
        // Dry run first: `link` for the unchanged files, `create` for the rest.
        let out = Tool::new("sync")
            .np(np)
            .arg("--dryrun")
            .arg(&link_dest)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let (mut got, _) = dryrun_actions(&out);
        // Whether the absent destination itself is listed as `create` is left open.
        got.remove(&("create".to_string(), abs(&dest, "")));
        let mut expected: BTreeSet<(String, Vec<u8>)> = unchanged
            .iter()
            .map(|p| ("link".to_string(), abs(&dest, p)))
            .collect();
        for p in ["sub", "changed", "sub/added"] {
            expected.insert(("create".to_string(), abs(&dest, p)));
        }
        assert!(
            got == expected,
            "np={np}: --dryrun --link-dest actions differ\n--- listed\n{}\n--- expected\n{}",
            show_actions(&got),
            show_actions(&expected)
        );
        assert!(!dest.exists(), "np={np}: --dryrun created the destination");
        let out = Tool::new("sync")
            .np(np)
            .arg(&link_dest)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let c = summary(&out);
        assert_eq!(c.linked, 4, "np={np}: {c:?}");
        for f in unchanged {
            let (p, d) = (
                std::fs::metadata(prev.join(f)).unwrap(),
                std::fs::metadata(dest.join(f)).unwrap(),
            );
            assert_eq!(
                (p.dev(), p.ino()),
                (d.dev(), d.ino()),
                "np={np}: {f} is not a hard link to the --link-dest copy"
            );
        }
        for f in ["changed", "sub/added"] {
            let d = std::fs::metadata(dest.join(f)).unwrap();
            assert_eq!(d.nlink(), 1, "np={np}: {f} must be a new file");
        }
        assert_eq!(
            std::fs::read(prev.join("changed")).unwrap(),
            b"content of changed\n",
            "np={np}: the --link-dest tree was modified"
        );
        tree::assert_equal_in(
            &format!("--link-dest np={np}"),
            &want,
            &tree::snapshot(&dest),
            Compare::META,
        );
    }
}

/// `--link-dest` with hard-link groups in SRC (rsync -H --link-dest): a group unchanged in
/// the snapshot becomes links of the snapshot's inode, every member (the members may be on
/// different ranks, and the group's first is itself a link into the snapshot); a group partly
/// changed or missing there stays one group in DEST with the source's bytes, never a link to a
/// snapshot file whose bytes differ. The snapshot is not touched.
#[test]
fn link_dest_keeps_hard_link_groups() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("sub dir|x")).unwrap();
    // Group i: three names (spaces, `|`, two directories) of one inode.
    let names = |i: usize| {
        [
            format!("g{i} a|b"),
            format!("sub dir|x/g{i} second name"),
            format!("g{i} | third"),
        ]
    };
    let groups = 12;
    for i in 0..groups {
        let [first, rest @ ..] = names(i);
        std::fs::write(src.join(&first), format!("group {i} bytes\n")).unwrap();
        for n in rest {
            std::fs::hard_link(src.join(&first), src.join(n)).unwrap();
        }
    }
    let prev = tmp.path().join("prev snap");
    Tool::new("sync")
        .arg(&src)
        .arg(&prev)
        .run()
        .assert_status(0);
    // Groups 0-5 stay unchanged in the snapshot. In groups 6-8 one member (each in turn) is
    // another file of another size there; in groups 9-11 one member is missing.
    let mut differ = Vec::new();
    for i in 6..groups {
        let n = &names(i)[i % 3];
        std::fs::remove_file(prev.join(n)).unwrap();
        if i < 9 {
            std::fs::write(prev.join(n), b"other bytes in the snapshot\n").unwrap();
            differ.push(std::fs::metadata(prev.join(n)).unwrap().ino());
        }
    }
    let prev_before = tree::snapshot(&prev);
    let prev_inodes = |root: &Path| -> Vec<(String, u64, u64)> {
        (0..groups)
            .flat_map(names)
            .filter_map(|n| {
                let m = std::fs::metadata(root.join(&n)).ok()?;
                Some((n, m.ino(), m.nlink()))
            })
            .collect()
    };
    let inodes_before = prev_inodes(&prev);
    let want = tree::snapshot(&src);
    let mut ld = std::ffi::OsString::from("--link-dest=");
    ld.push(&prev);
    // How each run is launched: thread ranks in one process, or processes under mpirun.
    type Launch = fn(Tool) -> Tool;
    let launches: [(&str, Launch); 4] = [
        ("--ranks 1", |t| t.ranks(1)),
        ("--ranks 2", |t| t.ranks(2)),
        ("--ranks 3", |t| t.ranks(3)),
        ("mpirun -np 2", |t| t.mpi(2)),
    ];
    for (k, (how, launch)) in launches.iter().enumerate() {
        let dest = tmp.path().join(format!("dest {k}|"));
        launch(Tool::new("sync"))
            .arg(&ld)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        for i in 0..groups {
            let inodes: BTreeSet<u64> = names(i)
                .iter()
                .map(|n| std::fs::metadata(dest.join(n)).unwrap().ino())
                .collect();
            assert_eq!(inodes.len(), 1, "{how}: group {i} is not one inode in DEST");
            let ino = *inodes.first().unwrap();
            if i < 6 {
                let snap = std::fs::metadata(prev.join(&names(i)[0])).unwrap().ino();
                assert_eq!(ino, snap, "{how}: group {i} is not the snapshot's inode");
            } else {
                assert!(
                    !differ.contains(&ino),
                    "{how}: group {i} is linked to a snapshot file with other bytes"
                );
            }
            for n in names(i) {
                assert_eq!(
                    std::fs::read(dest.join(&n)).unwrap(),
                    format!("group {i} bytes\n").into_bytes(),
                    "{how}: {n}"
                );
            }
        }
        tree::assert_equal_in(how, &want, &tree::snapshot(&dest), Compare::META);
        tree::assert_equal_in(
            &format!("{how}: the snapshot"),
            &prev_before,
            &tree::snapshot(&prev),
            Compare::META,
        );
        let moved: Vec<_> = prev_inodes(&prev)
            .into_iter()
            .zip(&inodes_before)
            .filter(|(now, was)| now.0 != was.0 || now.1 != was.1)
            .collect();
        assert!(
            moved.is_empty(),
            "{how}: snapshot inodes changed: {moved:?}"
        );
    }
}

/// `sync -c --link-dest`: a file of DIR with the source's size and mtime but other bytes is
/// not linked (as rsync -c --link-dest): DEST gets the source's bytes in a new inode, DIR keeps
/// its own; a file whose bytes are equal is still linked.
#[test]
fn contents_link_dest_never_links_other_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let (same, other) = ("same | bytes", "other bytes|same size");
    std::fs::write(src.join(same), b"equal in the snapshot\n").unwrap();
    std::fs::write(src.join(other), b"the source's bytes\n").unwrap();
    let prev = tmp.path().join("prev");
    Tool::new("sync")
        .arg(&src)
        .arg(&prev)
        .run()
        .assert_status(0);
    // Same size, same mtime, other bytes (a bit flip, a quick edit with its mtime put back).
    let mtime = std::fs::metadata(src.join(other))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::write(prev.join(other), b"THE SOURCE'S BYTES\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(prev.join(other))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let prev_before = tree::snapshot(&prev);
    let want = tree::snapshot(&src);
    let mut ld = std::ffi::OsString::from("--link-dest=");
    ld.push(&prev);
    for np in [1, 2] {
        let dest = tmp.path().join(format!("dest {np}"));
        Tool::new("sync")
            .np(np)
            .arg("-c")
            .arg(&ld)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(
            ino(&dest.join(same)),
            ino(&prev.join(same)),
            "np={np}: the equal file is not linked"
        );
        assert_ne!(
            ino(&dest.join(other)),
            ino(&prev.join(other)),
            "np={np}: linked to a snapshot file with other bytes"
        );
        tree::assert_equal_in(
            &format!("-c --link-dest np={np}"),
            &want,
            &tree::snapshot(&dest),
            Compare::META,
        );
        tree::assert_equal_in(
            &format!("np={np}: the snapshot"),
            &prev_before,
            &tree::snapshot(&prev),
            Compare::META,
        );
    }
}

/// `sync --manifest --link-dest` into a new DEST: the files linked into the snapshot (and the
/// members of their hard-link groups) are in DEST because of this sync, so the manifest lists
/// them too, with SRC's digests, as it lists the files copied.
#[test]
fn manifest_lists_link_dest_links() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d|ir")).unwrap();
    std::fs::write(src.join("plain | kept"), b"kept in the snapshot\n").unwrap();
    std::fs::write(src.join("grp a"), b"a group kept in the snapshot\n").unwrap();
    std::fs::hard_link(src.join("grp a"), src.join("d|ir/grp b")).unwrap();
    std::fs::write(src.join("changed"), b"old\n").unwrap();
    let prev = tmp.path().join("prev");
    Tool::new("sync")
        .arg(&src)
        .arg(&prev)
        .run()
        .assert_status(0);
    std::fs::write(src.join("changed"), b"new, longer\n").unwrap();
    let files = ["changed", "d|ir/grp b", "grp a", "plain | kept"];
    let mut ld = std::ffi::OsString::from("--link-dest=");
    ld.push(&prev);
    for np in [1, 2] {
        let dest = tmp.path().join(format!("dest {np}"));
        let manifest = tmp.path().join(format!("manifest {np}"));
        Tool::new("sync")
            .np(np)
            .arg(&ld)
            .arg("--manifest")
            .arg(&manifest)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let text = std::fs::read_to_string(&manifest).unwrap();
        let listed: Vec<&str> = text
            .lines()
            .map(|l| l.split_once("  ").map_or(l, |(_, n)| n))
            .collect();
        assert_eq!(listed, files, "np={np}: manifest:\n{text}");
        Tool::new("cmp")
            .arg("--manifest")
            .arg(&manifest)
            .arg(&src)
            .run()
            .assert_status(0);
    }
}

// ---------------------------------------------------------------------------------------------
// (10) Old name, usage errors

#[test]
fn dsync_old_name_and_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    change_base(&src);
    let want = tree::snapshot(&src);
    let link = tmp.path().join("dsync");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let dest = tmp.path().join("d1");
    expect_status(clean_env(&mut Command::new(&link)).arg(&src).arg(&dest), 0);
    tree::assert_equal_in("dsync", &want, &tree::snapshot(&dest), Compare::META);
    let dest = tmp.path().join("d2");
    let out = Tool::new("dsync")
        .arg("-q")
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    assert!(out.stdout.is_empty(), "-q printed: {}", text(&out.stdout));
    tree::assert_equal_in("mfu-rs dsync", &want, &tree::snapshot(&dest), Compare::META);
    Tool::new("dsync").arg("--help").run().assert_status(0);

    let before = tree::snapshot(tmp.path());
    let missing_parent: PathBuf = tmp.path().join("no/such/parent/dest");
    let cases: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        (
            "DEST's parent missing",
            vec![src.clone().into(), missing_parent.clone().into()],
        ),
        (
            "missing source",
            vec![tmp.path().join("nope").into(), tmp.path().join("d3").into()],
        ),
        ("one path", vec![src.clone().into()]),
        (
            "three paths",
            vec![
                src.clone().into(),
                tmp.path().join("d1").into(),
                tmp.path().join("d4").into(),
            ],
        ),
        (
            "bad option",
            vec![
                "--bogus".into(),
                src.clone().into(),
                tmp.path().join("d5").into(),
            ],
        ),
        (
            "bad batch size",
            vec![
                "--batch-files".into(),
                "many".into(),
                src.clone().into(),
                tmp.path().join("d6").into(),
            ],
        ),
    ];
    for np in [1, 2] {
        for (name, args) in &cases {
            let out = Tool::new("sync").np(np).args(args).run().assert_status(2);
            assert!(
                !out.stderr.is_empty(),
                "{name} (np={np}): exit 2 without a message"
            );
            let after = tree::snapshot(tmp.path());
            tree::assert_equal_in(&format!("{name} (np={np})"), &before, &after, Compare::META);
            let ct = tree::ctime_changes(&before, &after);
            assert!(ct.is_empty(), "{name} (np={np}) changed something: {ct:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (11) Safety: nothing removed without -D, shared inodes, honest counts, other file systems,
// races

/// `path` as bytes.
fn b(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

/// Every entry under `root` (relative path → `d`, `f:BYTES`, `l:TARGET`), symlinks not followed.
fn listing(root: &Path) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = b(p.strip_prefix(root).unwrap()).to_vec();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let v = if m.is_dir() {
                todo.push(p.clone());
                b"d".to_vec()
            } else if m.file_type().is_symlink() {
                [b"l:".as_slice(), b(&std::fs::read_link(&p).unwrap())].concat()
            } else {
                [b"f:".as_slice(), &std::fs::read(&p).unwrap()].concat()
            };
            out.insert(rel, v);
        }
    }
    out
}

/// `sync FILE DIR` puts the file into DIR (rsync's rule) and a type conflict without -D is
/// named and left: a directory of DEST is never replaced by a file, nor followed when it is a
/// symlink; a SRC that is a symlink to a directory is synced as that directory.
#[test]
fn without_delete_nothing_in_dest_is_removed() {
    for np in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        // `sync report.txt docs`: docs/report.txt, docs' files untouched.
        std::fs::create_dir(t.join("docs")).unwrap();
        std::fs::write(t.join("docs/a"), b"a").unwrap();
        std::fs::write(t.join("report.txt"), b"report").unwrap();
        let out = Tool::new("sync")
            .np(np)
            .arg(t.join("report.txt"))
            .arg(t.join("docs"))
            .run()
            .assert_status(0);
        assert_eq!(summary(&out).created, 1, "np={np}");
        assert_eq!(std::fs::read(t.join("docs/a")).unwrap(), b"a", "np={np}");
        assert_eq!(
            std::fs::read(t.join("docs/report.txt")).unwrap(),
            b"report",
            "np={np}"
        );
        // A file in SRC where DEST has a directory; a directory in SRC where DEST has a symlink
        // to an outside tree.
        let (src, dest, outside) = (t.join("src"), t.join("dest"), t.join("outside"));
        for d in [&src, &dest, &outside] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(src.join("x"), b"file now").unwrap();
        std::fs::create_dir(dest.join("x")).unwrap();
        std::fs::write(dest.join("x/keep"), b"keep").unwrap();
        std::fs::create_dir(src.join("y")).unwrap();
        std::fs::write(src.join("y/new"), b"new").unwrap();
        std::os::unix::fs::symlink(&outside, dest.join("y")).unwrap();
        std::fs::write(outside.join("o"), b"outside").unwrap();
        std::fs::write(src.join("plain"), b"plain").unwrap();
        let before_outside = listing(&outside);
        let out = Tool::new("sync")
            .np(np)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(1);
        let err = text(&out.stderr);
        for name in ["x", "y"] {
            assert!(
                err.contains(&*dest.join(name).to_string_lossy()),
                "np={np}: the conflict at {name} must be named:\n{err}"
            );
        }
        assert_eq!(
            std::fs::read(dest.join("x/keep")).unwrap(),
            b"keep",
            "np={np}"
        );
        assert!(dest.join("y").is_symlink(), "np={np}");
        assert_eq!(
            listing(&outside),
            before_outside,
            "np={np}: outside changed"
        );
        assert_eq!(
            std::fs::read(dest.join("plain")).unwrap(),
            b"plain",
            "np={np}"
        );
        let c = summary(&out);
        assert_eq!((c.created, c.deleted), (1, 0), "np={np}: {c:?}");
        // With -D the conflicts are replaced, as rsync --delete does; outside stays.
        Tool::new("sync")
            .np(np)
            .arg("-D")
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        assert_eq!(listing(&dest), listing(&src), "np={np}");
        assert_eq!(
            listing(&outside),
            before_outside,
            "np={np}: outside changed"
        );
        // SRC given as a symlink to a directory: synced as that directory, with and without -D.
        let link = t.join("srclink");
        std::os::unix::fs::symlink(&src, &link).unwrap();
        let dest2 = t.join("dest2");
        std::fs::create_dir(&dest2).unwrap();
        std::fs::write(dest2.join("extra"), b"extra").unwrap();
        Tool::new("sync")
            .np(np)
            .arg(&link)
            .arg(&dest2)
            .run()
            .assert_status(0);
        assert!(dest2.is_dir() && !dest2.is_symlink(), "np={np}");
        assert_eq!(std::fs::read(dest2.join("extra")).unwrap(), b"extra");
        assert_eq!(std::fs::read(dest2.join("y/new")).unwrap(), b"new");
        Tool::new("sync")
            .np(np)
            .arg("-D")
            .arg(&link)
            .arg(&dest2)
            .run()
            .assert_status(0);
        assert!(dest2.is_dir() && !dest2.is_symlink(), "np={np}");
        assert_eq!(listing(&dest2), listing(&src), "np={np}");
        // A trailing slash asks for a directory: refused when there is none.
        let out = Tool::new("sync")
            .np(np)
            .arg(t.join("report.txt"))
            .arg(format!("{}/", t.join("nodir").display()))
            .run()
            .assert_status(2);
        assert!(!t.join("nodir").exists(), "np={np}: {}", text(&out.stderr));
    }
}

/// Under `-D` a DEST directory replaced by a SRC entry of another type goes with its subtree,
/// except entries the rules exclude (never deleted): a directory still holding one is left as
/// it is, named as not replaced, and the run exits 1 (rsync: "cannot delete non-empty
/// directory", exit 23). Once the excluded entry is gone, the rerun replaces it.
#[test]
fn a_directory_holding_excluded_entries_is_not_replaced_and_is_named() {
    for np in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dest) = (tmp.path().join("src"), tmp.path().join("dest"));
        for d in ["café5", "lnk"] {
            std::fs::create_dir_all(src.join(d)).unwrap();
            std::fs::write(src.join(d).join("a"), b"a").unwrap();
        }
        std::fs::write(src.join("plain"), b"plain").unwrap();
        Tool::new("sync")
            .np(np)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        // DEST's directories gain an excluded entry; SRC's become a file and a symlink.
        for d in ["café5", "lnk"] {
            std::fs::write(dest.join(d).join("x.tmp"), b"junk").unwrap();
            std::fs::remove_dir_all(src.join(d)).unwrap();
        }
        std::fs::write(src.join("café5"), b"file now").unwrap();
        std::os::unix::fs::symlink("plain", src.join("lnk")).unwrap();
        std::fs::write(src.join("plain"), b"plain, changed").unwrap();
        let sync = || {
            Tool::new("sync")
                .np(np)
                .args(["-D", "--exclude", "*.tmp"])
                .arg(&src)
                .arg(&dest)
                .run()
        };
        let out = sync().assert_status(1);
        let err = text(&out.stderr);
        for d in ["café5", "lnk"] {
            let named = format!("replace directory {}:", dest.join(d).display());
            assert!(err.contains(&named), "np={np}: {d} not named:\n{err}");
            assert!(dest.join(d).is_dir(), "np={np}: {d} replaced:\n{err}");
            assert_eq!(std::fs::read(dest.join(d).join("x.tmp")).unwrap(), b"junk");
        }
        assert!(!err.contains("Is a directory"), "np={np}: {err}");
        assert_eq!(
            std::fs::read(dest.join("plain")).unwrap(),
            b"plain, changed"
        );
        assert_eq!(summary(&out).created, 0, "np={np}: {}", text(&out.stdout));
        // The excluded entries removed by hand, the rerun replaces both directories.
        for d in ["café5", "lnk"] {
            std::fs::remove_file(dest.join(d).join("x.tmp")).unwrap();
        }
        sync().assert_status(0);
        assert_eq!(std::fs::read(dest.join("café5")).unwrap(), b"file now");
        assert_eq!(
            std::fs::read_link(dest.join("lnk")).unwrap(),
            std::path::Path::new("plain")
        );
    }
}

/// `sync -c` never rewrites in place a destination file whose inode has other names (a
/// `--link-dest` snapshot): the snapshot keeps its bytes, DEST gets a new file.
#[test]
fn contents_never_rewrites_a_shared_inode() {
    for np in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let (src, prev, dest) = (
            tmp.path().join("src"),
            tmp.path().join("prev"),
            tmp.path().join("dest"),
        );
        std::fs::create_dir(&src).unwrap();
        let f = src.join("data");
        std::fs::write(&f, b"version one of the data").unwrap();
        Tool::new("sync")
            .arg(&src)
            .arg(&prev)
            .run()
            .assert_status(0);
        let mut ld = std::ffi::OsString::from("--link-dest=");
        ld.push(&prev);
        Tool::new("sync")
            .arg(&ld)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        assert_eq!(std::fs::metadata(prev.join("data")).unwrap().nlink(), 2);
        // Same size, same mtime, other bytes: only --contents sees it.
        let mtime = tree::mtime_of(&f);
        std::fs::write(&f, b"version TWO of the data").unwrap();
        tree::set_mtime(&f, mtime);
        let out = Tool::new("sync")
            .np(np)
            .arg("-c")
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        assert_eq!(summary(&out).updated, 1, "np={np}");
        assert_eq!(
            std::fs::read(prev.join("data")).unwrap(),
            b"version one of the data",
            "np={np}: the --link-dest snapshot changed"
        );
        assert_eq!(
            std::fs::read(dest.join("data")).unwrap(),
            b"version TWO of the data"
        );
        assert_eq!(std::fs::metadata(dest.join("data")).unwrap().nlink(), 1);
    }
}

/// `mfu-rs ARGS` as user nobody (65534) at `np` ranks, with `dir` as its home.
fn as_nobody(dir: &Path, np: usize, args: &[&std::ffi::OsStr]) -> Tool {
    Tool::bare().np(np).as_nobody().env("HOME", dir).args(args)
}

/// The summary counts what happened: nothing created in a read-only DEST, nothing deleted
/// when the unlink failed.
#[test]
fn summary_counts_only_what_succeeded() {
    let tmp = open_tempdir();
    let (src, dest) = (tmp.path().join("src"), tmp.path().join("dest"));
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for i in 0..3 {
        std::fs::write(src.join(format!("f{i}")), b"data").unwrap();
        std::fs::write(src.join(format!("sub/g{i}")), b"data").unwrap();
    }
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("extra"), b"extra").unwrap();
    tree::chown_tree(&src, 65534, 65534);
    tree::chown_tree(&dest, 65534, 65534);
    tree::chmod(&src, 0o555);
    tree::chmod(&dest, 0o555);
    tree::set_mtime(&dest, tree::mtime_of(&src));
    for np in [1, 2] {
        for delete in [false, true] {
            let mut args = vec!["sync".as_ref()];
            if delete {
                args.push("-D".as_ref());
            }
            args.extend([src.as_os_str(), dest.as_os_str()]);
            let out = as_nobody(tmp.path(), np, &args).run().assert_status(1);
            let c = summary(&out);
            assert_eq!(
                (c.created, c.deleted, c.bytes),
                (0, 0, 0),
                "np={np} -D={delete}: counts of what failed:\n{}",
                text(&out.stderr)
            );
            assert!(text(&out.stderr).contains(&*dest.join("f0").to_string_lossy()));
            if delete {
                assert!(text(&out.stderr).contains(&*dest.join("extra").to_string_lossy()));
            }
        }
    }
    assert!(dest.join("extra").exists());
}

/// `--link-dest` on another file system (tmpfs at /dev/shm, DEST on the worktree's disk): a
/// hard link is impossible, so files are copied (as rsync does), counted as created, and a
/// rerun has nothing to do.
#[test]
fn link_dest_on_another_file_system_copies() {
    let shm = tempfile::tempdir_in("/dev/shm").expect("a tmpfs at /dev/shm");
    let here = tempfile::tempdir().unwrap();
    let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
    assert_ne!(dev(shm.path()), dev(here.path()), "need two file systems");
    let src = here.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a"), b"a").unwrap();
    std::fs::write(src.join("b"), b"b").unwrap();
    let prev = shm.path().join("prev");
    Tool::new("sync")
        .arg(&src)
        .arg(&prev)
        .run()
        .assert_status(0);
    let mut ld = std::ffi::OsString::from("--link-dest=");
    ld.push(&prev);
    for np in [1, 2] {
        let dest = here.path().join(format!("dest{np}"));
        let out = Tool::new("sync")
            .np(np)
            .arg(&ld)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let c = summary(&out);
        assert_eq!((c.linked, c.created), (0, 3), "np={np}: {c:?}");
        assert_eq!(listing(&dest), listing(&src), "np={np}");
        let out = Tool::new("sync")
            .np(np)
            .arg(&ld)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        assert_eq!(
            summary(&out),
            ZERO,
            "np={np}: the rerun must find nothing to do"
        );
    }
}

/// A destination directory swapped for a symlink to an outside tree between the listing and
/// the action: sync (the removals of -D, and the unlink that gives a hard-linked file a new
/// inode) does not follow it out of DEST; the entries are named, exit 1.
#[test]
fn a_destination_directory_swapped_for_a_symlink_is_not_followed() {
    for np in [1, 2] {
        for delete in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let t = tmp.path();
            let (src, dest, outside) = (t.join("src"), t.join("dest"), t.join("outside"));
            std::fs::create_dir_all(src.join("d")).unwrap();
            std::fs::write(src.join("d/f"), b"v1").unwrap();
            std::fs::write(src.join("d/keep"), b"keep").unwrap();
            Tool::new("sync")
                .arg(&src)
                .arg(&dest)
                .run()
                .assert_status(0);
            // DEST/d/f has a second name (an update must give it a new inode); DEST/d/extra is
            // what -D removes; SRC/d/f changes. DEST/d keeps SRC/d's metadata.
            std::fs::hard_link(dest.join("d/f"), dest.join("hl")).unwrap();
            std::fs::write(dest.join("d/extra"), b"extra").unwrap();
            tree::set_mtime(&dest.join("d"), tree::mtime_of(&src.join("d")));
            std::fs::write(src.join("d/f"), b"version two").unwrap();
            std::fs::create_dir(&outside).unwrap();
            for name in ["f", "extra", "keep"] {
                std::fs::write(outside.join(name), format!("outside {name}")).unwrap();
            }
            let before = listing(&outside);
            let mut cmd = Tool::new("sync").np(np).command();
            if delete {
                cmd.arg("-D");
            }
            cmd.arg(&src).arg(&dest);
            let out = mfu_tests::with_change_after_listing(&mut cmd, || {
                std::fs::rename(dest.join("d"), t.join("d.moved")).unwrap();
                std::os::unix::fs::symlink(&outside, dest.join("d")).unwrap();
            });
            let ctx = format!("np={np} -D={delete}\n{}", text(&out.stderr));
            assert_eq!(out.status.code(), Some(1), "{ctx}");
            assert_eq!(listing(&outside), before, "outside changed: {ctx}");
            assert!(
                text(&out.stderr).contains(&*dest.join("d/f").to_string_lossy()),
                "{ctx}"
            );
            if delete {
                assert!(
                    text(&out.stderr).contains(&*dest.join("d/extra").to_string_lossy()),
                    "{ctx}"
                );
            }
            if !delete {
                assert_eq!(std::fs::read(dest.join("hl")).unwrap(), b"v1", "{ctx}");
            }
        }
    }
}

/// A hard link made to a DEST file between the listing and the action (nlink 1 when walked):
/// an update writes a new inode, and `-c` (which rewrites chunks in place) checks the inode it
/// writes through and refuses, named, exit 1. The other name keeps its bytes either way.
#[test]
fn an_update_never_writes_into_an_inode_linked_since_the_walk() {
    for np in [1, 2] {
        for contents in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let t = tmp.path();
            let (src, dest) = (t.join("src"), t.join("dest"));
            std::fs::create_dir(&src).unwrap();
            let f = src.join("f");
            std::fs::write(&f, b"old bytes").unwrap();
            Tool::new("sync")
                .arg(&src)
                .arg(&dest)
                .run()
                .assert_status(0);
            let mtime = tree::mtime_of(&f);
            std::fs::write(
                &f,
                if contents {
                    &b"new bytes"[..]
                } else {
                    b"new, longer"
                },
            )
            .unwrap();
            if contents {
                tree::set_mtime(&f, mtime);
            }
            let mut cmd = Tool::new("sync").np(np).command();
            if contents {
                cmd.arg("-c");
            }
            cmd.arg(&src).arg(&dest);
            let snap = t.join("snap");
            let out = mfu_tests::with_change_after_listing(&mut cmd, || {
                std::fs::hard_link(dest.join("f"), &snap).unwrap();
            });
            let ctx = format!("np={np} -c={contents}\n{}", text(&out.stderr));
            assert_eq!(std::fs::read(&snap).unwrap(), b"old bytes", "{ctx}");
            if contents {
                assert_eq!(out.status.code(), Some(1), "{ctx}");
                assert!(
                    text(&out.stderr).contains(&*dest.join("f").to_string_lossy()),
                    "{ctx}"
                );
                assert_eq!(summary(&out).updated, 0, "{ctx}");
            } else {
                assert_eq!(out.status.code(), Some(0), "{ctx}");
                assert_eq!(std::fs::read(dest.join("f")).unwrap(), b"new, longer");
            }
        }
    }
}

/// DEST itself swapped for a symlink to an outside tree after the listing: `-D` removes what
/// it listed in the directory it walked (held open since), never the outside tree's entries.
#[test]
fn delete_acts_on_the_dest_it_walked_when_dest_itself_is_swapped() {
    for np in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let (src, dest, outside) = (t.join("src"), t.join("dest"), t.join("outside"));
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("f"), b"f").unwrap();
        Tool::new("sync")
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        std::fs::write(dest.join("extra"), b"extra").unwrap();
        tree::set_mtime(&dest, tree::mtime_of(&src));
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("extra"), b"outside extra").unwrap();
        std::fs::write(outside.join("f"), b"outside f").unwrap();
        let before = listing(&outside);
        let mut cmd = Tool::new("sync").np(np).command();
        cmd.arg("-D").arg(&src).arg(&dest);
        let out = mfu_tests::with_change_after_listing(&mut cmd, || {
            std::fs::rename(&dest, t.join("walked")).unwrap();
            std::os::unix::fs::symlink(&outside, &dest).unwrap();
        });
        let ctx = format!("np={np}\n{}", text(&out.stderr));
        assert_eq!(listing(&outside), before, "outside changed: {ctx}");
        assert!(!t.join("walked/extra").exists(), "{ctx}");
    }
}

/// The copy engine and cmp work in rounds of a bounded number of files per rank when there are
/// many (memory flat in the number of files); the tests' round of 3 files reaches that path on a
/// small tree: a sync in rounds gives the source's tree at 1 and 2 ranks, and cmp in rounds
/// finds one changed byte in a file of the last round.
#[test]
fn sync_and_cmp_in_rounds_give_the_same_results() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    tree::make_awkward_tree(&src, false);
    let want = tree::snapshot(&src);
    for np in [1, 2] {
        let dest = tmp.path().join(format!("dest{np}"));
        let out = Tool::new("sync")
            .np(np)
            .env("MFU_RS_TEST_ROUND_FILES", "3")
            .arg("-S")
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let c = summary(&out);
        assert_eq!(c.deleted + c.updated, 0, "np={np}: {c:?}");
        tree::assert_equal_in(
            &format!("sync in rounds np={np}"),
            &want,
            &tree::snapshot(&dest),
            Compare::FULL,
        );
        // Every file of DEST compared in rounds: equal; then one byte changed (same size and
        // mtime) in the file that sorts last is found.
        let cmp = |code: i32| {
            Tool::new("cmp")
                .np(np)
                .env("MFU_RS_TEST_ROUND_FILES", "3")
                .arg(&src)
                .arg(&dest)
                .run()
                .assert_status(code)
        };
        cmp(0);
        let last = want
            .iter()
            .filter(|(_, e)| e.kind == tree::Kind::File && e.size > 0)
            .map(|(rel, _)| rel.clone())
            .next_back()
            .expect("a non-empty file");
        let victim = dest.join(std::ffi::OsStr::from_bytes(&last));
        let meta = std::fs::metadata(&victim).unwrap();
        let mut bytes = std::fs::read(&victim).unwrap();
        bytes[0] ^= 0xff;
        std::fs::write(&victim, &bytes).unwrap();
        let f = std::fs::File::options().write(true).open(&victim).unwrap();
        f.set_modified(meta.modified().unwrap()).unwrap();
        drop(f);
        cmp(1);
    }
}

// ---------------------------------------------------------------------------------------------
// The typed API and --json

/// src/ with a (5 bytes), d/b (3 bytes) and a symlink; dst/ with a changed a, an extra file
/// and, where src has the directory d, a regular file (a type conflict without --delete).
fn typed_change_set(root: &Path) -> (PathBuf, PathBuf) {
    let (src, dst) = (root.join("src"), root.join("dst"));
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("a"), b"hello").unwrap();
    std::fs::write(src.join("d/b"), b"abc").unwrap();
    std::os::unix::fs::symlink("a", src.join("l")).unwrap();
    std::fs::create_dir(&dst).unwrap();
    std::fs::write(dst.join("a"), b"old").unwrap();
    std::fs::write(dst.join("extra"), b"x").unwrap();
    std::fs::write(dst.join("d"), b"in the way").unwrap();
    // Fixed times, children before their directories: two trees made one after the other differ
    // in nothing a sync sees (a second boundary between them made one "metadata fixed" more).
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    for path in [
        "src/a",
        "src/d/b",
        "src/d",
        "src",
        "dst/a",
        "dst/extra",
        "dst/d",
        "dst",
    ] {
        let f = std::fs::File::open(root.join(path)).unwrap();
        f.set_times(std::fs::FileTimes::new().set_accessed(t).set_modified(t))
            .unwrap();
    }
    (src, dst)
}

#[test]
fn library_run_reports_counts_and_conflicts_on_every_rank() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::ToolReport;
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = typed_change_set(tmp.path());
    let b = |p: &Path| p.as_os_str().as_bytes().to_vec();
    // Without --delete: the conflict at d is named and left, the rest synced.
    let options = mfu::sync::Options::new(b(&src), b(&dst));
    let reports = steal::local::run(2, |comm| mfu::sync::run(comm, &options).unwrap());
    let messages: Vec<String> = reports.iter().flat_map(|r| r.failures.clone()).collect();
    for r in &reports {
        assert_eq!((r.created, r.updated, r.deleted), (1, 1, 0), "{r:?}");
        assert_eq!((r.conflicts, r.bytes, r.failed), (1, 5, 0), "{r:?}");
        assert_eq!(r.status() as i32, 1);
    }
    assert!(
        messages.iter().any(|m| m.contains("/dst/d: not replaced")),
        "{messages:?}"
    );
    assert_eq!(std::fs::read(dst.join("a")).unwrap(), b"hello");
    // With --delete: the extra file and the file in the way go, d and d/b come.
    let mut options = mfu::sync::Options::new(b(&src), b(&dst));
    options.delete = true;
    let reports = steal::local::run(2, |comm| mfu::sync::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!(
            (r.created, r.deleted, r.conflicts, r.failed),
            (2, 2, 0, 0),
            "{r:?}"
        );
        assert_eq!((r.summary().bytes, r.status() as i32), (3, 0), "{r:?}");
        assert!(r.failures.is_empty(), "{r:?}");
    }
    assert!(!dst.join("extra").exists());
    assert_eq!(std::fs::read(dst.join("d/b")).unwrap(), b"abc");
    // A usage error: the same on every rank.
    let options = mfu::sync::Options::new(b(&tmp.path().join("missing")), b(&dst));
    let results = steal::local::run(2, |comm| mfu::sync::run(comm, &options).map(|_| ()));
    assert!(results.iter().all(|r| r.is_err()), "{results:?}");
}

#[test]
fn json_report_equals_the_text_summary() {
    for delete in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = typed_change_set(&tmp.path().join("t"));
        let (src2, dst2) = typed_change_set(&tmp.path().join("j"));
        let code = i32::from(!delete);
        let flags: &[&str] = if delete { &["-D"] } else { &[] };
        let out = expect_status(
            Tool::new("sync")
                .np(1)
                .command()
                .args(flags)
                .arg(&src)
                .arg(&dst),
            code,
        );
        let (line, c) = summary_line(&out);
        let json = expect_status(
            Tool::new("sync")
                .np(1)
                .command()
                .arg("--json")
                .args(flags)
                .arg(&src2)
                .arg(&dst2),
            code,
        );
        let v: serde_json::Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&json.stdout)));
        assert_eq!(v["tool"], "sync");
        assert_eq!(v["status"], code);
        assert_eq!(
            v["items"],
            c.created + c.updated + c.deleted + c.meta + c.linked,
            "{line}"
        );
        assert_eq!(
            (v["created"].clone(), v["deleted"].clone()),
            (c.created.into(), c.deleted.into()),
            "{line}"
        );
        assert_eq!(v["bytes"], c.bytes, "{line}");
        assert_eq!(v["failed"], 0, "{line}");
        assert_eq!(v["conflicts"], u64::from(!delete));
    }
}

/// `stopped after X of Y bytes` from stderr: (X, Y).
fn stopped_counts(err: &str) -> (u64, u64) {
    let at = err
        .find("stopped after ")
        .unwrap_or_else(|| panic!("no stop line: {err}"));
    let words: Vec<&str> = err[at..].split_whitespace().collect();
    assert_eq!((words[3], words[5]), ("of", "bytes"), "{err}");
    assert!(
        err[at..].contains("run the same command again to continue"),
        "{err}"
    );
    (words[2].parse().unwrap(), words[4].parse().unwrap())
}

/// A SIGTERM in the middle of a sync (each work item slowed), at one process and under mpirun:
/// exit 1 and the stop line (X of the 240 000 bytes planned, X below that); the same sync run
/// again completes it.
#[test]
fn a_stopped_sync_says_how_far_it_got_and_a_rerun_completes_it() {
    use rustix::process::Signal;
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    for d in 0..4 {
        for f in 0..12 {
            let sub = src.join(format!("d{d}"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(
                sub.join(format!("f\n{f}")),
                mfu_tests::noise(d * 100 + f, 256 << 10),
            )
            .unwrap();
        }
    }
    let mut cmd = Tool::new("sync")
        .arg(&src)
        .arg(&dst)
        .args(["--chunksize", "64KB"])
        .env("MFU_RS_TEST_ITEM_DELAY_MS", "150")
        .command();
    let probe = dst.join("d0");
    let out = mfu_tests::signal_when(&mut cmd, Signal::TERM, || probe.exists());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let (done, total) = stopped_counts(&err);
    assert!(total == 12_582_912 && done < total, "{err}");
    Tool::new("sync")
        .arg("-q")
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(0);
    expect_status(
        Command::new(bin()).args(["cmp", "-q"]).arg(&src).arg(&dst),
        0,
    );
}
