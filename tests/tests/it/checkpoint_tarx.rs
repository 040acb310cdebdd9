//! `tar -x` continued after a kill or a stop (issue 33): the rerun of the same command skips
//! the entries an earlier run extracted and writes only the ranges of a partial file that its
//! checkpoint does not mark, at any rank count; the tree is an uninterrupted run's. A changed
//! archive, a tampered partial file or a forged checkpoint are not trusted.
//!
//! The test knobs of the checkpoint core stop (`MFU_RS_TEST_CHECKPOINT_STOP_AFTER=N`, as a
//! SIGTERM does) or SIGKILL (`MFU_RS_TEST_CHECKPOINT_DIE_AFTER=N`) a process at its N-th mark.
//! Every test has its own state directory (`XDG_STATE_HOME`), where the checkpoint lives.

use mfu_tests::{noise, Tool};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const DIE: &str = "MFU_RS_TEST_CHECKPOINT_DIE_AFTER";
const STOP: &str = "MFU_RS_TEST_CHECKPOINT_STOP_AFTER";

/// Sources: 150 small files (names with spaces, `|` and a newline), two big ones (cut into
/// 1 MiB chunks on extraction), a hard link, a symlink, an empty directory; dated in the past.
fn sources(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("small files")).unwrap();
    std::fs::create_dir_all(src.join("big")).unwrap();
    std::fs::create_dir_all(src.join("empty")).unwrap();
    for i in 0..150u64 {
        let name = format!("f {i}|x");
        std::fs::write(
            src.join("small files").join(name),
            noise(i, (i * 53) as usize),
        )
        .unwrap();
    }
    std::fs::write(src.join("big/one"), noise(7, 5_000_000)).unwrap();
    std::fs::write(src.join("big/two\nlines"), noise(8, 3_300_000)).unwrap();
    std::fs::hard_link(src.join("big/one"), src.join("big/hard")).unwrap();
    std::os::unix::fs::symlink("../big/one", src.join("small files/link")).unwrap();
    let out = std::process::Command::new("chmod")
        .args(["-R", "go-w,u+w"])
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success());
    age(&src);
    src
}

/// Date everything in `src` in the past (a partial file, dated now, is told from it).
fn age(src: &Path) {
    let out = std::process::Command::new("find")
        .arg(src)
        .args([
            "-exec",
            "touch",
            "-h",
            "-d",
            "2001-02-03 04:05:06",
            "{}",
            "+",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
}

/// The archive of `src` as `NAME` in `dir` (`codec`: tar -c options).
fn archive(dir: &Path, name: &str, codec: &[&str]) -> PathBuf {
    Tool::new("tar")
        .args(["-c", "-k", "1M"])
        .args(codec)
        .args(["-f", name, "src"])
        .current_dir(dir)
        .expect(0);
    dir.join(name)
}

/// `ARCHIVE.gz` beside `plain`: one gzip stream (as `tar -czf` makes), read front to back.
fn gzipped(plain: &Path) -> PathBuf {
    let out = std::process::Command::new("gzip")
        .args(["-k", "-1"])
        .arg(plain)
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut name = plain.as_os_str().to_owned();
    name.push(".gz");
    PathBuf::from(name)
}

/// `tar -x -k 1M -v -f ARCHIVE -C DEST` with the state directory `state`.
fn extract(archive: &Path, dest: &Path, state: &Path) -> Tool {
    Tool::new("tar")
        .args(["-x", "-k", "1M", "-v", "-f"])
        .arg(archive)
        .arg("-C")
        .arg(dest)
        .env("XDG_STATE_HOME", state)
}

/// What an extracted tree is: every entry below the root with its type, mode, mtime (ns),
/// size and contents (a symlink's target).
fn tree(root: &Path) -> BTreeMap<PathBuf, (u32, i64, i64, u64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let contents = if m.file_type().is_symlink() {
                use std::os::unix::ffi::OsStrExt;
                std::fs::read_link(&p)
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            } else if m.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                todo.push(p.clone());
                Vec::new()
            };
            let mtime = m.mtime() * 1_000_000_000 + m.mtime_nsec();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            out.insert(rel, (m.mode(), mtime, m.nlink() as i64, m.len(), contents));
        }
    }
    out
}

#[track_caller]
fn assert_tree(got: &Path, want: &Path, what: &str) {
    let (g, w) = (tree(got), tree(want));
    assert_eq!(
        g.keys().collect::<Vec<_>>(),
        w.keys().collect::<Vec<_>>(),
        "{what}: names"
    );
    for (k, v) in &w {
        let h = &g[k];
        assert!(
            h.0 == v.0 && h.1 == v.1 && h.2 == v.2 && h.3 == v.3 && h.4 == v.4,
            "{what}: {k:?} differs (mode {:o}/{:o}, mtime {}/{}, links {}/{}, size {}/{}, \
             same contents {})",
            h.0,
            v.0,
            h.1,
            v.1,
            h.2,
            v.2,
            h.3,
            v.3,
            h.4 == v.4
        );
    }
}

/// The checkpoints in the state directory `state`.
fn checkpoints(state: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(state.join("mfu-rs/checkpoints")) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Data bytes this run wrote: the sum of the `-v` lines `rank N: extracted E entries, B bytes`
/// (on stdout, or on stderr with `--json`).
fn written(run: &mfu_tests::Run) -> u64 {
    [run.stdout_str(), run.stderr_str()]
        .concat()
        .lines()
        .filter(|l| l.starts_with("rank "))
        .filter_map(|l| {
            let (_, rest) = l.split_once(" entries, ")?;
            rest.split(' ').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// The uninterrupted extraction of `archive`, in `dir/ref-NAME`.
fn reference(dir: &Path, archive: &Path) -> PathBuf {
    let name = archive.file_name().unwrap().to_str().unwrap();
    let at = dir.join(format!("ref-{name}"));
    std::fs::create_dir(&at).unwrap();
    let state = dir.join("ref-state");
    extract(archive, &at, &state).expect(0);
    assert!(
        checkpoints(&state).is_empty(),
        "an uninterrupted run left its checkpoint"
    );
    at
}

/// Interrupt (`knob` = N) an extraction launched as `first`, rerun it as `again`: the tree
/// equals an uninterrupted run's, the rerun wrote less than the whole and reports the whole,
/// the checkpoint is gone.
fn interrupted_then_continued(
    dir: &Path,
    archive: &Path,
    want: &Path,
    (knob, n): (&str, u32),
    first: impl Fn(Tool) -> Tool,
    again: impl Fn(Tool) -> Tool,
) {
    let what = format!("{} {knob}={n}", archive.display());
    let dest = dir.join("out");
    let state = dir.join("state");
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir(&dest).unwrap();
    let run = first(extract(archive, &dest, &state))
        .env(knob, n.to_string())
        .run();
    assert_ne!(run.code(), Some(0), "{what}: {}", run.stderr_str());
    assert_eq!(checkpoints(&state).len(), 1, "{what}: no checkpoint kept");
    if knob == STOP {
        assert_eq!(run.code(), Some(1), "{what}: {}", run.stderr_str());
        run.stderr_contains("stopped after")
            .stderr_contains("run the same command again to continue");
    }
    let rerun = again(extract(archive, &dest, &state))
        .args(["--json"])
        .run();
    assert_eq!(rerun.code(), Some(0), "{what}: {}", rerun.stderr_str());
    rerun.stderr_contains("continuing from checkpoint");
    assert_tree(&dest, want, &what);
    let report: serde_json::Value = serde_json::from_str(&rerun.stdout_str()).unwrap();
    let whole = 150 * 149 / 2 * 53 + 5_000_000 + 3_300_000;
    assert_eq!(
        report["bytes"], whole,
        "{what}: the report covers the whole job"
    );
    assert_eq!(report["entries"], report["archive_entries"], "{what}");
    let wrote = written(&rerun);
    assert!(
        wrote < whole,
        "{what}: the rerun wrote {wrote} bytes of {whole}"
    );
    assert!(
        checkpoints(&state).is_empty(),
        "{what}: the checkpoint stayed"
    );
}

#[test]
fn extract_killed_or_stopped_continues_to_an_uninterrupted_tree_plain_and_compressed() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    // Marks: plain, the small files are written whole (one mark each) and the big ones in
    // ranges; compressed, every file is first created (one mark each, 151), then its data
    // comes in ranges: a rerun writes less only once some ranges are marked.
    let plain: [u32; 4] = [20, 6, 5, 40];
    let zstd: [u32; 4] = [260, 200, 160, 180];
    for (name, codec, n) in [
        ("a.tar", &[][..], plain),
        ("a.tar.zst", &["--zstd"][..], zstd),
    ] {
        let a = archive(t.path(), name, codec);
        let want = reference(t.path(), &a);
        let d = t.path();
        // kill -9 at np 1, continued with 3 ranks; stopped with 3 ranks, continued at np 1.
        interrupted_then_continued(d, &a, &want, (DIE, n[0]), |c| c, |c| c.ranks(3));
        interrupted_then_continued(d, &a, &want, (STOP, n[1]), |c| c.ranks(3), |c| c);
        // Under mpirun -np 2, continued by mpirun -np 2 and by one process.
        interrupted_then_continued(d, &a, &want, (DIE, n[2]), |c| c.mpi(2), |c| c.mpi(2));
        interrupted_then_continued(d, &a, &want, (STOP, n[3]), |c| c.mpi(2), |c| c);
    }
}

/// One big file written in ranges by three ranks, stopped mid-file: the partial file carries
/// its size but not the archive's mtime; a rerun at another rank count writes only the ranges
/// that were not marked.
#[test]
fn a_big_file_split_over_ranks_resumes_mid_file() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let big = noise(11, 12_000_000);
    std::fs::write(src.join("big"), &big).unwrap();
    age(&src);
    let a = archive(t.path(), "a.tar", &[]);
    let want = reference(t.path(), &a);
    // At np 1 an uncompressed file is written whole (and marked whole): split over ranks.
    type Launch = fn(Tool) -> Tool;
    let runs: [(&str, Launch, Launch); 2] = [
        ("--ranks 3, then np 1", |c| c.ranks(3), |c| c),
        ("mpirun -np 2, then --ranks 3", |c| c.mpi(2), |c| c.ranks(3)),
    ];
    for (what, first, again) in runs {
        let (dest, state) = (t.path().join("out"), t.path().join("state"));
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::create_dir(&dest).unwrap();
        let run = first(extract(&a, &dest, &state)).env(STOP, "5").expect(1);
        run.stderr_contains("stopped after");
        let partial = std::fs::metadata(dest.join("src/big")).unwrap();
        let archived = std::fs::metadata(want.join("src/big")).unwrap();
        assert_eq!(partial.len(), big.len() as u64);
        assert_ne!(
            partial.mtime(),
            archived.mtime(),
            "a partial file has the archive's mtime"
        );
        assert_ne!(std::fs::read(dest.join("src/big")).unwrap(), big);
        let rerun = again(extract(&a, &dest, &state)).expect(0);
        rerun.stderr_contains("continuing from checkpoint");
        let wrote = written(&rerun);
        assert!(
            wrote > 0 && wrote + (2 << 20) <= big.len() as u64,
            "{what}: the rerun wrote {wrote} bytes\n{}",
            rerun.stderr_str()
        );
        assert_tree(&dest, &want, "mid-file");
        assert!(checkpoints(&state).is_empty());
    }
}

/// The archive touched or rewritten between runs: its checkpoint is not used, the run says
/// why and starts over, and the tree is right.
#[test]
fn a_changed_archive_starts_over_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    let a = archive(t.path(), "a.tar", &[]);
    let want = reference(t.path(), &a);
    let (dest, state) = (t.path().join("out"), t.path().join("state"));
    for change in ["touch", "rewrite"] {
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::create_dir(&dest).unwrap();
        let run = extract(&a, &dest, &state).env(DIE, "30").run();
        assert_eq!(run.code(), None, "killed: {}", run.stderr_str());
        let bytes = std::fs::read(&a).unwrap();
        if change == "touch" {
            let out = std::process::Command::new("touch")
                .arg(&a)
                .output()
                .unwrap();
            assert!(out.status.success());
        } else {
            std::fs::remove_file(&a).unwrap();
            std::fs::write(&a, &bytes).unwrap();
        }
        let rerun = extract(&a, &dest, &state).expect(0);
        rerun
            .stderr_contains("not used (the archive's identity")
            .stderr_contains("starting over");
        assert!(!rerun.stderr_str().contains("continuing"), "{change}");
        assert_tree(&dest, &want, change);
        assert!(checkpoints(&state).is_empty());
    }
}

/// A partial file tampered with between runs (replaced by another inode of the same size, a
/// symlink planted at its name, appended to): that entry is extracted from scratch, nothing
/// is written through the symlink.
#[test]
fn a_tampered_partial_file_is_extracted_from_scratch() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let big = noise(12, 9_000_000);
    std::fs::write(src.join("big"), &big).unwrap();
    std::fs::write(src.join("small"), b"small").unwrap();
    age(&src);
    let a = archive(t.path(), "a.tar", &[]);
    let want = reference(t.path(), &a);
    let victim = t.path().join("victim");
    for tamper in ["replaced", "symlink", "appended"] {
        let (dest, state) = (t.path().join("out"), t.path().join("state"));
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::create_dir(&dest).unwrap();
        extract(&a, &dest, &state).ranks(3).env(STOP, "4").expect(1);
        let partial = dest.join("src/big");
        let len = std::fs::metadata(&partial).unwrap().len() as usize;
        std::fs::write(&victim, vec![0x5A; len]).unwrap();
        match tamper {
            // Another inode, same size, other bytes: the marked ranges are not of it.
            "replaced" => {
                std::fs::remove_file(&partial).unwrap();
                std::fs::write(&partial, vec![0xA5; len]).unwrap();
            }
            "symlink" => {
                std::fs::remove_file(&partial).unwrap();
                std::os::unix::fs::symlink(&victim, &partial).unwrap();
            }
            _ => {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&partial)
                    .unwrap();
                f.write_all(b"appended").unwrap();
            }
        }
        let rerun = extract(&a, &dest, &state).ranks(2).expect(0);
        rerun.stderr_contains("continuing from checkpoint");
        assert_tree(&dest, &want, tamper);
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            vec![0x5A; len],
            "{tamper}: written through"
        );
        assert!(checkpoints(&state).is_empty());
    }
}

/// Forged checkpoints: garbage in its files, a symlink at its name, another archive's
/// checkpoint copied there. None is trusted or followed; the tree is an uninterrupted run's.
#[test]
fn a_forged_or_foreign_checkpoint_is_not_trusted() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    let a = archive(t.path(), "a.tar", &[]);
    let want = reference(t.path(), &a);
    let (dest, state) = (t.path().join("out"), t.path().join("state"));
    let fresh = || {
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::create_dir(&dest).unwrap();
    };
    let killed = |archive: &Path, dest: &Path, n: &str| {
        let run = extract(archive, dest, &state).env(DIE, n).run();
        assert_eq!(run.code(), None, "killed: {}", run.stderr_str());
        let c = checkpoints(&state);
        assert_eq!(c.len(), 1);
        c[0].clone()
    };

    // Garbage in every file of it.
    fresh();
    let ck = killed(&a, &dest, "40");
    for e in std::fs::read_dir(&ck).unwrap() {
        std::fs::write(e.unwrap().path(), b"\x00garbage\xff").unwrap();
    }
    let run = extract(&a, &dest, &state).expect(0);
    let err = run.stderr_str();
    assert!(
        err.contains("starting over") || err.contains("running without a checkpoint"),
        "{err}"
    );
    assert!(!err.contains("continuing"), "{err}");
    assert_tree(&dest, &want, "garbage");
    if ck.exists() {
        std::fs::remove_dir_all(&ck).unwrap();
    }

    // A symlink at its name: never followed, what it points to untouched.
    fresh();
    let elsewhere = t.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &ck).unwrap();
    extract(&a, &dest, &state)
        .expect(0)
        .stderr_contains("running without a checkpoint");
    assert_tree(&dest, &want, "symlink");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(ck.symlink_metadata().unwrap().file_type().is_symlink());
    std::fs::remove_file(&ck).unwrap();

    // The checkpoint of another archive (its other extraction), copied to this one's name.
    let other = t.path().join("other");
    std::fs::create_dir_all(other.join("src")).unwrap();
    std::fs::write(other.join("src/x"), noise(3, 3_000_000)).unwrap();
    let b = archive(&other, "b.tar", &[]);
    let bdest = other.join("out");
    std::fs::create_dir(&bdest).unwrap();
    let theirs = killed(&b, &bdest, "1");
    fresh();
    let ours = {
        // This run's checkpoint name: made by a stopped run, then replaced by theirs.
        extract(&a, &dest, &state).env(STOP, "2").expect(1);
        let c: Vec<_> = checkpoints(&state)
            .into_iter()
            .filter(|c| *c != theirs)
            .collect();
        assert_eq!(c.len(), 1);
        c[0].clone()
    };
    std::fs::remove_dir_all(&ours).unwrap();
    let out = std::process::Command::new("cp")
        .arg("-a")
        .arg(&theirs)
        .arg(&ours)
        .output()
        .unwrap();
    assert!(out.status.success());
    fresh();
    let run = extract(&a, &dest, &state).expect(0);
    run.stderr_contains("not used")
        .stderr_contains("starting over");
    assert_tree(&dest, &want, "foreign");
}

/// A real SIGTERM from outside once some marks are on disk (each mark slowed): exit 1 with the
/// stopped line, the checkpoint kept; the rerun continues to an uninterrupted run's tree.
#[test]
fn a_sigterm_stops_extract_and_the_same_command_continues() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    let a = archive(t.path(), "a.tar", &[]);
    let want = reference(t.path(), &a);
    let (dest, state) = (t.path().join("out"), t.path().join("state"));
    std::fs::create_dir(&dest).unwrap();
    let has_marks = || {
        checkpoints(&state).iter().any(|c| {
            std::fs::read_dir(c).is_ok_and(|d| {
                d.flatten().any(|e| {
                    e.file_name().to_string_lossy().starts_with("log.")
                        && e.metadata().is_ok_and(|m| m.len() > 0)
                })
            })
        })
    };
    let mut cmd = extract(&a, &dest, &state)
        .env("MFU_RS_TEST_CHECKPOINT_SLOW_MS", "20")
        .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "50")
        .command();
    let out = mfu_tests::signal_when(&mut cmd, rustix::process::Signal::TERM, has_marks);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("stopped after"), "{err}");
    assert_eq!(checkpoints(&state).len(), 1);
    let rerun = extract(&a, &dest, &state).expect(0);
    rerun.stderr_contains("continuing from checkpoint");
    assert_tree(&dest, &want, "SIGTERM");
    assert!(checkpoints(&state).is_empty());
}

/// An archive in one gzip stream (read front to back): a rerun skips writing the entries done,
/// reading their data past.
#[test]
fn a_serial_archive_continues_skipping_the_entries_done() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    let plain = archive(t.path(), "p.tar", &[]);
    let a = gzipped(&plain);
    let want = reference(t.path(), &a);
    interrupted_then_continued(t.path(), &a, &want, (STOP, 60), |c| c, |c| c.ranks(2));
    interrupted_then_continued(t.path(), &a, &want, (DIE, 100), |c| c.mpi(2), |c| c);
}

/// Entries an earlier run extracted, then removed or changed before the rerun (the target
/// cleaned by hand, a file edited with its size and mtime kept, a symlink replaced): the rerun
/// extracts them again, never reports as extracted what is not there. Plain archives (entries
/// checked by rank) and a gzip stream (read front to back).
#[test]
fn entries_done_then_removed_or_changed_are_extracted_again() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    let plain = archive(t.path(), "c.tar", &[]);
    let gz = gzipped(&plain);
    let dest = t.path().join("out");
    let state = t.path().join("state");
    let mut hard_edits = 0;
    for (n, (a, first, again)) in [(&plain, 1, 3), (&plain, 2, 1), (&gz, 1, 2), (&gz, 2, 1)]
        .into_iter()
        .enumerate()
    {
        let refs = t.path().join(format!("ref{n}"));
        std::fs::create_dir(&refs).unwrap();
        let want = reference(&refs, a);
        let what = format!("{} np {first} then {again}", a.display());
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::create_dir(&dest).unwrap();
        let launch = |c: Tool, np: usize| if np == 2 { c.mpi(2) } else { c.ranks(np) };
        let run = launch(extract(a, &dest, &state), first)
            .env(STOP, "40")
            .run();
        assert_eq!(run.code(), Some(1), "{what}: {}", run.stderr_str());
        // Between the runs: some files go, some change (same size and mtime), the symlink
        // becomes a file.
        let small = dest.join("src/small files");
        let (mut gone, mut edited) = (0, 0);
        for i in 0..150u64 {
            let f = small.join(format!("f {i}|x"));
            let Ok(m) = std::fs::symlink_metadata(&f) else {
                continue;
            };
            if i % 3 == 0 {
                std::fs::remove_file(&f).unwrap();
                gone += 1;
            } else if i % 3 == 1 && m.len() > 0 {
                let mut bytes = std::fs::read(&f).unwrap();
                bytes[0] ^= 0xff;
                std::fs::write(&f, bytes).unwrap();
                let file = std::fs::File::options().write(true).open(&f).unwrap();
                file.set_modified(m.modified().unwrap()).unwrap();
                edited += 1;
            }
        }
        assert!(
            gone > 5 && edited > 5,
            "{what}: {gone} removed, {edited} edited"
        );
        // The hard-linked big file, when complete (the archive's mtime, which a partial file
        // never has), edited the same way: the hard links every run makes again change its
        // ctime, and the rerun must still see the edit.
        let one = dest.join("src/big/one");
        let want_mtime = std::fs::metadata(want.join("src/big/one"))
            .unwrap()
            .modified()
            .unwrap();
        let mut hard_edited = false;
        if std::fs::metadata(&one).is_ok_and(|m| m.modified().unwrap() == want_mtime) {
            let mut bytes = std::fs::read(&one).unwrap();
            bytes[4096] ^= 0xff;
            std::fs::write(&one, bytes).unwrap();
            let file = std::fs::File::options().write(true).open(&one).unwrap();
            file.set_modified(want_mtime).unwrap();
            hard_edited = true;
        }
        hard_edits += u32::from(hard_edited);
        let link = small.join("link");
        if std::fs::symlink_metadata(&link).is_ok() {
            std::fs::remove_file(&link).unwrap();
            std::fs::write(&link, b"not a link").unwrap();
        }
        let rerun = launch(extract(a, &dest, &state), again).run();
        assert_eq!(rerun.code(), Some(0), "{what}: {}", rerun.stderr_str());
        rerun.stderr_contains("continuing from checkpoint");
        assert_tree(&dest, &want, &what);
    }
    assert!(
        hard_edits > 0,
        "the hard-linked file was never complete when stopped"
    );
}

/// The checkpoint never lies in the tree being written: a `--checkpoint` inside the target is
/// refused with nothing done; the default place inside it (`-C ~`) is not used (a notice), and
/// nothing is made there.
#[test]
fn a_checkpoint_inside_the_target_is_refused_or_not_used() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    let a = archive(t.path(), "a.tar", &[]);
    let want = reference(t.path(), &a);
    let dest = t.path().join("out");
    std::fs::create_dir(&dest).unwrap();
    let state = t.path().join("state");
    extract(&a, &dest, &state)
        .arg("--checkpoint")
        .arg(dest.join("ck"))
        .expect(2)
        .stderr_contains("lies inside the target directory");
    assert_eq!(std::fs::read_dir(&dest).unwrap().count(), 0, "nothing done");
    let inside = dest.join("home/.local/state");
    extract(&a, &dest, &inside)
        .expect(0)
        .stderr_contains("running without a checkpoint");
    assert!(!dest.join("home").exists(), "made inside the target");
    assert_tree(&dest, &want, "state inside");
}

/// A kill -9 leaves marks whose data is in the page cache, not yet synced (a run shorter than
/// the syncer's 2 s syncs nothing): a rerun on another node or after a reboot (another boot
/// id, `MFU_RS_TEST_BOOT_ID`) trusts none of them, says so, writes every byte again and makes
/// an uninterrupted run's tree; on the same boot the rerun writes less (the tests above).
#[test]
fn a_rerun_on_another_boot_trusts_only_synced_marks() {
    let t = tempfile::tempdir().unwrap();
    sources(t.path());
    let a = archive(t.path(), "a.tar", &[]);
    let want = reference(t.path(), &a);
    type Launch = fn(Tool) -> Tool;
    let runs: [(&str, Launch); 2] = [("np 1", |c| c), ("mpirun -np 2", |c| c.mpi(2))];
    for (what, launch) in runs {
        let (dest, state) = (t.path().join("out"), t.path().join("state"));
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::create_dir(&dest).unwrap();
        let run = launch(extract(&a, &dest, &state)).env(DIE, "20").run();
        assert_ne!(run.code(), Some(0), "{what}: {}", run.stderr_str());
        let rerun = launch(extract(&a, &dest, &state))
            .env("MFU_RS_TEST_BOOT_ID", "another-node")
            .args(["--json"])
            .run();
        assert_eq!(rerun.code(), Some(0), "{what}: {}", rerun.stderr_str());
        rerun
            .stderr_contains("continuing from checkpoint")
            .stderr_contains("0 units done by earlier runs; ")
            .stderr_contains("more, marked on another node or before a reboot");
        let whole = 150 * 149 / 2 * 53 + 5_000_000 + 3_300_000;
        assert_eq!(written(&rerun), whole, "{what}: every byte written again");
        assert_tree(&dest, &want, what);
        assert!(checkpoints(&state).is_empty(), "{what}");
    }
}
