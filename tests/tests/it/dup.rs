//! `mfu-rs dup` end to end: the groups equal those found by hashing every file with
//! `sha256sum`, at 1, 2 and 4 ranks, with the same bytes of output at every rank count; hard
//! links, empty files, files that differ only after the prefix; `-o` lists; exit statuses.

use mfu::prelude::Collect as Kept;
use mfu_tests::{bin, expect_status, mfu, mpirun, Tool};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

type Groups = BTreeSet<BTreeSet<Vec<u8>>>;

fn path(root: &Path, name: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(name))
}

/// A tree with several duplicate groups and every trap: same size other content, same first
/// 64 KiB other tail, files above the prefix, empty files, hard links, spaces and non-UTF-8.
pub(crate) fn tree(root: &Path) {
    fs::create_dir_all(root.join("sub dir/deeper")).unwrap();
    let write = |name: &[u8], data: &[u8]| fs::write(path(root, name), data).unwrap();
    // Small duplicates, odd names.
    write(b"a", b"hello world\n");
    write(b"sub dir/a copy", b"hello world\n");
    write(b"sub dir/deeper/caf\xe9", b"hello world\n");
    write(b"same size", b"hello worle\n");
    // Big files: equal, same prefix other tail, same size other data.
    let big = mfu_tests::noise(1, 200_000);
    write(b"big1", &big);
    write(b"sub dir/big2", &big);
    let mut tail = big.clone();
    tail[150_000] ^= 1;
    write(b"big3 tail", &tail);
    write(b"sub dir/deeper/big3 twin", &tail);
    write(b"big4", &mfu_tests::noise(2, 200_000));
    // A group where one member has two names.
    let other = mfu_tests::noise(3, 300_000);
    write(b"x1", &other);
    write(b"sub dir/x2", &other);
    fs::hard_link(root.join("x1"), root.join("sub dir/deeper/x1 link")).unwrap();
    // Two names of one file and nothing else: not duplicates.
    write(b"solo", b"only one inode");
    fs::hard_link(root.join("solo"), root.join("solo link")).unwrap();
    // Empty files are ignored.
    write(b"empty1", b"");
    write(b"sub dir/empty2", b"");
    // Unique files of unique sizes.
    write(b"u1", &mfu_tests::noise(4, 10));
    write(b"u2", &mfu_tests::noise(5, 70_000));
    std::os::unix::fs::symlink("a", root.join("link to a")).unwrap();
}

/// Every regular non-empty file below `dir`, with its inode.
fn files(dir: &Path, out: &mut Vec<(PathBuf, u64)>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let m = fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            files(&p, out);
        } else if m.is_file() && m.len() > 0 {
            out.push((p, m.ino()));
        }
    }
}

/// The groups by `sha256sum`: files with equal digests, when they are more than one inode.
pub(crate) fn expected(root: &Path) -> Groups {
    let mut all = Vec::new();
    files(root, &mut all);
    let mut by_digest: BTreeMap<Vec<u8>, Vec<(Vec<u8>, u64)>> = BTreeMap::new();
    for (p, ino) in all {
        let out = Command::new("sha256sum")
            .stdin(Stdio::from(fs::File::open(&p).unwrap()))
            .output()
            .unwrap();
        assert!(out.status.success());
        let digest = out.stdout[..64].to_vec();
        by_digest
            .entry(digest)
            .or_default()
            .push((p.as_os_str().as_bytes().to_vec(), ino));
    }
    by_digest
        .into_values()
        .filter(|g| g.iter().map(|m| m.1).collect::<BTreeSet<_>>().len() > 1)
        .map(|g| g.into_iter().map(|m| m.0).collect())
        .collect()
}

/// `path hash` lines into groups by hash; checks the format and order on the way.
pub(crate) fn parse(stdout: &[u8]) -> Groups {
    let mut groups: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>> = BTreeMap::new();
    let mut last: Option<(Vec<u8>, Vec<u8>)> = None;
    for line in stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let at = line.iter().rposition(|&b| b == b' ').expect("a space");
        let (p, h) = (line[..at].to_vec(), line[at + 1..].to_vec());
        assert_eq!(h.len(), 64, "{}", String::from_utf8_lossy(line));
        assert!(h
            .iter()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        if let Some((lh, lp)) = &last {
            // Hash order, then path order within a group.
            assert!(
                (lh, lp) < (&h, &p),
                "out of order: {}",
                String::from_utf8_lossy(line)
            );
        }
        last = Some((h.clone(), p.clone()));
        groups.entry(h).or_default().insert(p);
    }
    groups.into_values().collect()
}

fn run_dup(np: usize, args: &[&OsStr]) -> Vec<u8> {
    Tool::new("dup")
        .np(np)
        .args(args)
        .run()
        .assert_status(0)
        .output
        .stdout
}

#[test]
fn groups_equal_sha256sum_groups_at_1_2_and_4_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let want = expected(&root);
    assert_eq!(want.len(), 4, "the tree has four groups: {want:?}");
    let one = run_dup(1, &[root.as_os_str()]);
    assert_eq!(parse(&one), want);
    // Lines are `PATH HASH` with the path as walked (absolute); the hash is blake3 of the
    // contents (checked against the blake3 crate by the unit tests of dup::hash).
    let a = format!("\n{} ", root.join("a").display());
    assert!(String::from_utf8_lossy(&[b"\n", &one[..]].concat()).contains(&a));
    for np in [2, 4] {
        assert_eq!(run_dup(np, &[root.as_os_str()]), one, "{np} ranks");
    }
}

#[test]
fn output_list_keeps_one_copy_of_each_content() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let list = dir.path().join("dups.txt");
    let out = run_dup(
        2,
        &[
            OsStr::new("-o"),
            list.as_os_str(),
            OsStr::new("-t"),
            root.as_os_str(),
        ],
    );
    assert!(!out.is_empty());
    let file = list.as_os_str().as_bytes().to_vec();
    let lists = steal::local::run(1, |comm| flist::io::read(comm, &file).expect("read list"));
    assert!(lists[0].iter().all(|e| e.kind == flist::FileType::File));
    let listed: BTreeSet<Vec<u8>> = lists[0].iter().map(|e| e.path.to_vec()).collect();
    let r = |n: &[u8]| path(&root, n).as_os_str().as_bytes().to_vec();
    // All names but those of each group's first inode (first name in byte order).
    let want: BTreeSet<Vec<u8>> = [
        &b"sub dir/a copy"[..],
        b"sub dir/deeper/caf\xe9",
        b"sub dir/big2",
        b"sub dir/deeper/big3 twin",
        b"sub dir/x2",
    ]
    .iter()
    .map(|n| r(n))
    .collect();
    assert_eq!(listed, want);
    // Removing them leaves no duplicate, and every content once.
    expect_status(mfu(&["rm", "-q", "-i"]).arg(&list), 0);
    assert!(run_dup(1, &[root.as_os_str()]).is_empty());
    assert!(expected(&root).is_empty());
    assert_eq!(fs::read(root.join("big3 tail")).unwrap().len(), 200_000);

    // A list as input: only the files it names are compared.
    let all = dir.path().join("all.mfu");
    expect_status(mfu(&["walk", "-q", "-o"]).arg(&all).arg(&root), 0);
    fs::write(root.join("a again"), b"hello world\n").unwrap();
    let again = dir.path().join("again.txt");
    let mut cmd = mfu(&["dup", "-i"]);
    cmd.arg(&all).args(["-t", "-o"]).arg(&again);
    let out = expect_status(&mut cmd, 0);
    // "a again" was not in the list: no group.
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(text_list(&again).is_empty());
    let out = expect_status(mfu(&["dup"]).arg(&root), 0);
    assert_eq!(parse(&out.stdout).len(), 1);
}

#[test]
fn unreadable_files_fail_with_status_1_and_usage_errors_with_2() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let list = dir.path().join("list.txt");
    let gone = root.join("gone");
    let mut text = Vec::new();
    for n in [&b"a"[..], b"sub dir/a copy", b"gone"] {
        text.extend_from_slice(path(&root, n).as_os_str().as_bytes());
        text.push(b'\n');
    }
    fs::write(&list, &text).unwrap();
    let out = expect_status(mfu(&["dup", "-i"]).arg(&list), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&gone.display().to_string()));
    // The readable pair is still reported.
    assert_eq!(parse(&out.stdout).len(), 1);
    expect_status(&mut mfu(&["dup"]), 2);
    expect_status(mfu(&["dup", "-i"]).arg(dir.path().join("no list")), 2);
}

/// Three copies of one content (a, b, c) and one of another of the same size (d).
fn copies(root: &Path) {
    fs::create_dir_all(root).unwrap();
    for name in ["a", "b", "c"] {
        fs::write(root.join(name), b"the same bytes\n").unwrap();
    }
    fs::write(root.join("d"), b"other bytes!!!\n").unwrap();
}

/// The paths of a text list, in order.
fn text_list(list: &Path) -> Vec<String> {
    // Read as the tools read it: typed by its header, whole by its trailer.
    let file = list.as_os_str().as_bytes().to_vec();
    let lists = steal::local::run(1, |comm| flist::io::read(comm, &file).expect("read list"));
    lists[0]
        .iter()
        .map(|e| String::from_utf8(e.path.to_vec()).unwrap())
        .collect()
}

#[test]
fn a_file_changed_after_it_was_hashed_is_left_out_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    for np in [1, 2] {
        let root = tmp.path().join(format!("np{np}"));
        copies(&root);
        let list = tmp.path().join(format!("extra{np}.txt"));
        let mut cmd = if np == 1 {
            mfu(&[])
        } else {
            mpirun(np, &bin())
        };
        cmd.args(["dup", "-t", "-o"]).arg(&list).arg(&root);
        // After the comparison and before the output, `b` gets other bytes of the same size:
        // the only other copy of `a`'s content is then `c`.
        let out = mfu_tests::with_change_after_listing(&mut cmd, || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            fs::write(root.join("b"), b"THE SAME BYTES\n").unwrap();
        });
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "np {np}: {err}");
        assert!(
            err.contains(&format!(
                "{}: modified while dup ran",
                root.join("b").display()
            )),
            "np {np}: {err}"
        );
        // b is neither in a printed group nor in the list of copies to remove; c still is.
        let groups = parse(&out.stdout);
        assert!(
            groups
                .iter()
                .all(|g| !g.contains(root.join("b").as_os_str().as_bytes())),
            "np {np}: {groups:?}"
        );
        assert_eq!(
            text_list(&list),
            vec![root.join("c").display().to_string()],
            "np {np}"
        );
    }
}

#[test]
fn verify_keeps_only_names_that_are_still_redundant_copies() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    copies(&root);
    let extra = tmp.path().join("extra.txt");
    expect_status(mfu(&["dup", "-q", "-t", "-o"]).arg(&extra).arg(&root), 0);
    let r = |n: &str| root.join(n).display().to_string();
    assert_eq!(text_list(&extra), vec![r("b"), r("c")]);
    // Since the list was made, `a` (the copy it keeps) and `b` changed: `c` is the only file
    // left with its content, and `b` is another content now: neither may be removed.
    fs::write(root.join("a"), b"new a content!\n").unwrap();
    fs::write(root.join("b"), b"new b content!\n").unwrap();
    let sure = tmp.path().join("sure.txt");
    for np in [1, 2] {
        let mut cmd = if np == 1 {
            mfu(&[])
        } else {
            mpirun(np, &bin())
        };
        let out = expect_status(
            cmd.args(["dup", "-q", "-t", "--verify"])
                .arg(&extra)
                .arg("-o")
                .arg(&sure)
                .arg(&root),
            1,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        for gone in ["b", "c"] {
            assert!(
                err.contains(&format!("{}: no longer a redundant copy", r(gone))),
                "np {np}: {err}"
            );
        }
        assert!(
            text_list(&sure).is_empty(),
            "np {np}: {:?}",
            text_list(&sure)
        );
    }
    // `a` and `d` now hold `c`'s content: `c` and `d` are redundant copies in the new run, but
    // only what the reviewed list names (`c`) is written.
    fs::write(root.join("a"), b"the same bytes\n").unwrap();
    fs::write(root.join("d"), b"the same bytes\n").unwrap();
    fs::write(&extra, format!("{}\n", r("c"))).unwrap();
    let out = expect_status(
        mpirun(2, &bin())
            .args(["dup", "-q", "-t", "--verify"])
            .arg(&extra)
            .arg("-o")
            .arg(&sure)
            .arg(&root),
        0,
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text_list(&sure), vec![r("c")]);
    // And `rm -i` of the verified list keeps every content.
    expect_status(mfu(&["rm", "-q", "-i"]).arg(&sure), 0);
    assert!(!root.join("c").exists() && root.join("a").exists() && root.join("d").exists());
}

#[test]
fn dup_as_a_library_function_reports_counts_and_failures() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::{Context, ToolReport};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let want = expected(&root);
    let kept = Arc::new(Kept::default());
    let mut options = mfu::dup::Options::new([root.as_os_str().as_bytes()]);
    options.context = Context::new(kept.clone());
    let reports = steal::local::run(2, |comm| mfu::dup::run(comm, &options).expect("searched"));
    let redundant: u64 = want.iter().map(|g| g.len() as u64 - 1).sum();
    for r in &reports {
        assert_eq!(r.groups, want.len() as u64, "{r:?}");
        // Hard links are one inode: a group of names may hold fewer redundant inodes.
        assert!(r.redundant > 0 && r.redundant <= redundant, "{r:?}");
        assert!(r.reclaimable > 0);
        assert_eq!(r.unreadable, 0);
        assert_eq!(r.status(), mfu::Status::Ok);
        assert_eq!(r.summary().items, r.files);
        assert_eq!(r.summary().bytes, r.reclaimable);
    }
    // The groups are the output, as the command line prints them.
    assert_eq!(parse(&kept.output.lock().unwrap()), want);

    // A path that does not exist is a failure, counted and named.
    let missing = dir.path().join("missing");
    let kept = Arc::new(Kept::default());
    let mut options =
        mfu::dup::Options::new([root.as_os_str().as_bytes(), missing.as_os_str().as_bytes()]);
    options.context = Context::new(kept.clone());
    let reports = steal::local::run(2, |comm| mfu::dup::run(comm, &options).expect("searched"));
    for r in &reports {
        assert_eq!(r.unreadable, 1, "{r:?}");
        assert_eq!(r.summary().failed, 1);
        assert_eq!(r.status(), mfu::Status::ItemsFailed);
        assert!(
            r.failures.iter().any(|f| f.contains("missing")),
            "{:?}",
            r.failures
        );
    }
    assert_eq!(parse(&kept.output.lock().unwrap()), want);
}

#[test]
fn json_report_has_the_counts_of_the_verbose_summary() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let text = expect_status(mfu(&["dup", "-v"]).arg(&root), 0);
    let err = String::from_utf8_lossy(&text.stderr).into_owned();
    let out = expect_status(mfu(&["dup", "--json"]).arg(&root), 0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["tool"], "dup");
    assert_eq!(v["status"], 0);
    assert_eq!(v["failed"], 0);
    assert!(v["seconds"].is_number());
    let (items, bytes) = (v["items"].as_u64().unwrap(), v["bytes"].as_u64().unwrap());
    assert!(err.contains(&format!("{items} files (")), "{items}:\n{err}");
    assert!(
        err.contains(&format!(" ({bytes} bytes) reclaimable")),
        "{bytes}:\n{err}"
    );
    assert!(
        err.contains(&format!(
            "{} groups of duplicates, {} redundant copies",
            v["groups"], v["redundant"]
        )),
        "{v}\n{err}"
    );
    // With --json the groups go to stderr, stdout is the report alone.
    assert_eq!(parse(&out.stderr), expected(&root));

    // A failure: counted, status 1.
    let missing = dir.path().join("missing");
    let out = expect_status(mfu(&["dup", "--json"]).arg(&root).arg(&missing), 1);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["status"].as_u64(), v["failed"].as_u64()),
        (Some(1), Some(1))
    );
}

// A stopped or killed dup continues from its checkpoint (issue 33): the rerun hashes only the
// files not recorded, and its groups, list and exit status are an uninterrupted run's.

/// What a `dup` run gave: exit code (`None`: killed), the groups on stdout, and the sorted
/// paths of its `-o` list (`None`: not written; the list is removed, for the next run).
pub(crate) type Outcome = (Option<i32>, Vec<u8>, Option<Vec<Vec<u8>>>);

/// [`tree`] under `dir/t`, with six more copies of a file above the prefix length (more work
/// for both hash passes).
pub(crate) fn resumable_tree(dir: &Path) {
    let root = dir.join("t");
    tree(&root);
    fs::create_dir_all(root.join("more")).unwrap();
    let data = mfu_tests::noise(9, 150_000);
    for i in 0..6 {
        fs::write(root.join(format!("more/c {i}")), &data).unwrap();
    }
}

/// `dup -t -o LIST` of the tree of [`resumable_tree`] through `tool` (its launch), with the
/// checkpoint at `ckpt` (`None`: `--no-checkpoint`).
pub(crate) fn resumable_dup(tool: Tool, dir: &Path, ckpt: Option<&Path>) -> Tool {
    let tool = tool
        .args(["-t", "-o"])
        .arg(dir.join("extra.txt"))
        .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20")
        .env("XDG_STATE_HOME", dir.join("state"));
    let tool = match ckpt {
        Some(c) => tool.arg("--checkpoint").arg(c),
        None => tool.arg("--no-checkpoint"),
    };
    tool.arg(dir.join("t"))
}

/// The [`Outcome`] of `run` (see [`resumable_dup`]).
pub(crate) fn dup_outcome(run: &mfu_tests::Run, dir: &Path) -> Outcome {
    let list = dir.join("extra.txt");
    let paths = list.exists().then(|| {
        let file = list.as_os_str().as_bytes().to_vec();
        let lists = steal::local::run(1, |comm| flist::io::read(comm, &file).expect("read list"));
        let mut paths: Vec<Vec<u8>> = lists[0].iter().map(|e| e.path.to_vec()).collect();
        paths.sort();
        paths
    });
    let _ = fs::remove_file(&list);
    (run.code(), run.stdout.clone(), paths)
}

/// Whether the checkpoint at `ckpt` holds a mark (a log file with bytes).
pub(crate) fn has_marks(ckpt: &Path) -> bool {
    fs::read_dir(ckpt).is_ok_and(|d| {
        d.flatten().any(|e| {
            e.file_name().as_bytes().starts_with(b"log.") && e.metadata().is_ok_and(|m| m.len() > 0)
        })
    })
}

/// A stop (the knob that sets the stop flag after a process's N-th mark, as a SIGTERM does)
/// or a kill -9 (the knob that kills the process once its N-th mark is durable), in the prefix
/// pass or in the whole-file pass, at one rank count; the rerun at another continues and gives
/// what an uninterrupted run gives.
#[test]
fn a_stopped_or_killed_dup_continues_at_another_rank_count() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_tree(dir);
    let want = dup_outcome(&resumable_dup(Tool::new("dup"), dir, None).run(), dir);
    assert_eq!(want.0, Some(0));
    assert_eq!(parse(&want.1).len(), 5, "five groups");
    let stop = "MFU_RS_TEST_CHECKPOINT_STOP_AFTER";
    let die = "MFU_RS_TEST_CHECKPOINT_DIE_AFTER";
    let cases = [
        (Tool::new("dup"), stop, "4", Tool::new("dup").ranks(3)),
        (
            Tool::new("dup").ranks(3),
            stop,
            "20",
            Tool::new("dup").mpi(2),
        ),
        (Tool::new("dup").mpi(2), die, "3", Tool::new("dup")),
        (Tool::new("dup"), die, "21", Tool::new("dup").ranks(2)),
    ];
    for (n, (first, knob, after, rerun)) in cases.into_iter().enumerate() {
        let ckpt = dir.join(format!("ckpt {n}"));
        let cut = resumable_dup(first, dir, Some(&ckpt))
            .env(knob, after)
            .run();
        let what = format!("case {n} ({knob}={after})");
        let err = cut.stderr_str();
        if knob == stop {
            assert_eq!(cut.code(), Some(1), "{what}: {err}");
            assert!(err.contains("run the same command again"), "{what}: {err}");
        } else {
            assert_ne!(cut.code(), Some(0), "{what}: {err}");
        }
        assert_eq!(
            dup_outcome(&cut, dir).2,
            None,
            "{what}: a cut-short run wrote its list"
        );
        assert!(has_marks(&ckpt), "{what}: no marks kept");
        let again = resumable_dup(rerun, dir, Some(&ckpt)).run();
        again.stderr_contains("continuing from checkpoint");
        assert_eq!(dup_outcome(&again, dir), want, "{what}");
        assert!(!ckpt.exists(), "{what}: the checkpoint outlived the run");
    }
}

/// A checkpoint is trusted only when it is this run's: after a file changed (the list's
/// digest differs), with garbage in its files, or made by another tool, the rerun says it
/// starts over and gives a fresh run's result; a symlink at `--checkpoint` is refused, never
/// followed.
#[test]
fn a_dup_starts_over_when_its_checkpoint_is_not_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_tree(dir);
    let ckpt = dir.join("ckpt");
    let stopped = || {
        let run = resumable_dup(Tool::new("dup"), dir, Some(&ckpt))
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "15")
            .run();
        assert_eq!(run.code(), Some(1), "{}", run.stderr_str());
        dup_outcome(&run, dir);
        assert!(has_marks(&ckpt));
    };

    // A copy changed since (same size, its own content now): another list.
    stopped();
    fs::write(dir.join("t/more/c 3"), mfu_tests::noise(10, 150_000)).unwrap();
    let fresh = dup_outcome(&resumable_dup(Tool::new("dup"), dir, None).run(), dir);
    let again = resumable_dup(Tool::new("dup"), dir, Some(&ckpt)).run();
    again.stderr_contains("the list of files changed");
    again.stderr_contains("starting over");
    assert_eq!(dup_outcome(&again, dir), fresh);
    assert!(
        !String::from_utf8_lossy(&fresh.1).contains("more/c 3"),
        "the changed copy is no duplicate"
    );

    // Garbage in every file of the checkpoint.
    stopped();
    for e in fs::read_dir(&ckpt).unwrap() {
        fs::write(e.unwrap().path(), b"\x00garbage\xffMFU").unwrap();
    }
    let again = resumable_dup(Tool::new("dup").ranks(2), dir, Some(&ckpt)).run();
    again.stderr_contains("not used");
    assert!(!again.stderr_str().contains("continuing"));
    assert_eq!(dup_outcome(&again, dir), fresh);

    // Another tool's checkpoint (a stopped cmp of part of the tree) at the same path.
    let cmp = Tool::new("cmp")
        .args(["-k", "4096", "--checkpoint"])
        .arg(&ckpt)
        .arg(dir.join("t/more"))
        .arg(dir.join("t/more"))
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "2")
        .run();
    assert_eq!(cmp.code(), Some(1), "{}", cmp.stderr_str());
    assert!(has_marks(&ckpt));
    let again = resumable_dup(Tool::new("dup"), dir, Some(&ckpt)).run();
    again.stderr_contains("made by 'cmp'");
    assert_eq!(dup_outcome(&again, dir), fresh);

    // A symlink at the checkpoint's name, to a directory of the user's.
    let elsewhere = dir.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::write(elsewhere.join("keep"), b"mine").unwrap();
    std::os::unix::fs::symlink(&elsewhere, &ckpt).unwrap();
    let refused = resumable_dup(Tool::new("dup"), dir, Some(&ckpt)).run();
    assert!(
        matches!(refused.code(), Some(c) if c != 0),
        "{}",
        refused.stderr_str()
    );
    refused.stderr_contains("not a checkpoint");
    assert_eq!(dup_outcome(&refused, dir).2, None, "no list written");
    assert!(fs::symlink_metadata(&ckpt).unwrap().is_symlink());
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 1);
    assert_eq!(fs::read(elsewhere.join("keep")).unwrap(), b"mine");
}

/// A real SIGTERM while files are hashed: exit 1, "run the same command again", and the rerun
/// continues to an uninterrupted run's result.
#[test]
fn a_dup_stopped_by_sigterm_continues() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_tree(dir);
    let want = dup_outcome(&resumable_dup(Tool::new("dup"), dir, None).run(), dir);
    let ckpt = dir.join("ckpt");
    let mut cmd = resumable_dup(Tool::new("dup"), dir, Some(&ckpt))
        .env("MFU_RS_TEST_ITEM_DELAY_MS", "150")
        .command();
    let out = mfu_tests::signal_when(&mut cmd, rustix::process::Signal::TERM, || has_marks(&ckpt));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("run the same command again"), "{err}");
    assert!(
        !dir.join("extra.txt").exists(),
        "a stopped run wrote its list"
    );
    let again = resumable_dup(Tool::new("dup"), dir, Some(&ckpt)).run();
    again.stderr_contains("continuing from checkpoint");
    assert_eq!(dup_outcome(&again, dir), want);
}

/// The rerun hashes only the files not recorded. It marks each hash it computes, and the stop
/// knob set one past the hashes left lets it end unstopped; were it hashing again what the
/// first run recorded, it would make more marks and be stopped.
#[test]
fn a_rerun_hashes_only_the_files_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_tree(dir);
    // Hashes of an uninterrupted run: every candidate's prefix, and the whole of those above
    // the prefix length still paired.
    let json = resumable_dup(Tool::new("dup"), dir, None)
        .arg("--json")
        .run()
        .assert_status(0);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let hashes = v["same_size"].as_u64().unwrap() + v["same_prefix"].as_u64().unwrap();
    let _ = fs::remove_file(dir.join("extra.txt"));
    let want = dup_outcome(&resumable_dup(Tool::new("dup"), dir, None).run(), dir);
    let ckpt = dir.join("ckpt");
    let knob = "MFU_RS_TEST_CHECKPOINT_STOP_AFTER";
    for (n, after) in ["5", "19"].into_iter().enumerate() {
        let cut = resumable_dup(Tool::new("dup"), dir, Some(&ckpt))
            .env(knob, after)
            .run();
        let err = cut.stderr_str();
        assert_eq!(cut.code(), Some(1), "{err}");
        let at = err
            .find("stopped after ")
            .unwrap_or_else(|| panic!("{err}"));
        let done: u64 = err[at..]
            .split_whitespace()
            .nth(2)
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            done >= after.parse().unwrap() && done < hashes,
            "case {n}: {err}"
        );
        let again = resumable_dup(Tool::new("dup").ranks(2), dir, Some(&ckpt))
            .env(knob, (hashes - done + 1).to_string())
            .run();
        again.stderr_contains(&format!("{done} units done by earlier runs"));
        assert!(
            !again.stderr_str().contains("stopped after"),
            "case {n}: the rerun hashed recorded files again: {}",
            again.stderr_str()
        );
        assert_eq!(dup_outcome(&again, dir), want, "case {n}");
    }
}

/// A checkpoint inside the tree searched (`--checkpoint` there, or the default one when the
/// state directory is in it, as with `dup ~`) is not searched itself: its files change as the
/// run goes, and a rerun would find another list and start over every time.
#[test]
fn a_checkpoint_inside_the_tree_searched_is_left_out_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_tree(dir);
    let want = dup_outcome(&resumable_dup(Tool::new("dup"), dir, None).run(), dir);
    let inside = dir.join("t/sub dir/ckpt");
    let knob = "MFU_RS_TEST_CHECKPOINT_STOP_AFTER";
    let cut = resumable_dup(Tool::new("dup"), dir, Some(&inside))
        .env(knob, "6")
        .run();
    assert_eq!(cut.code(), Some(1), "{}", cut.stderr_str());
    assert!(has_marks(&inside));
    let again = resumable_dup(Tool::new("dup"), dir, Some(&inside)).run();
    again.stderr_contains("continuing from checkpoint");
    assert_eq!(dup_outcome(&again, dir), want);
    // The default place, in a state directory inside the tree.
    let state = dir.join("t/state");
    let default = |tool: Tool| {
        tool.args(["-t", "-o"])
            .arg(dir.join("extra.txt"))
            .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20")
            .env("XDG_STATE_HOME", &state)
            .arg(dir.join("t"))
    };
    let cut = default(Tool::new("dup")).env(knob, "6").run();
    assert_eq!(cut.code(), Some(1), "{}", cut.stderr_str());
    let kept = state.join("mfu-rs/checkpoints");
    assert_eq!(
        fs::read_dir(&kept).unwrap().count(),
        1,
        "one checkpoint kept"
    );
    let again = default(Tool::new("dup").ranks(2)).run();
    again.stderr_contains("continuing from checkpoint");
    assert_eq!(dup_outcome(&again, dir), want);
    assert_eq!(
        fs::read_dir(&kept).unwrap().count(),
        0,
        "the checkpoint is removed"
    );
}
