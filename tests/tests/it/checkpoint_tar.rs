//! `tar -c` continued after a kill or a stop (issue 33): the rerun of the same command writes
//! what its checkpoint does not mark, and the archive is byte for byte an uninterrupted run's,
//! plain and compressed, at any rank count; a changed source, a forged checkpoint or a
//! replaced partial archive make it start over.
//!
//! The test knobs of the checkpoint core stop (`MFU_RS_TEST_CHECKPOINT_STOP_AFTER=N`, as a
//! SIGTERM does) or SIGKILL (`MFU_RS_TEST_CHECKPOINT_DIE_AFTER=N`) a process at its N-th mark;
//! mark 1 is the record of the partial archive, the others ranges of the stream or frames.
//! `SOURCE_DATE_EPOCH` dates the index member, so that two runs can be compared.

use mfu_tests::{noise, Tool};
use std::path::{Path, PathBuf};

const EPOCH: &str = "1000000000";

/// Sources: 200 small files (names with spaces, `|` and a newline), two big ones cut into
/// 1 MiB chunks, a symlink, an empty directory.
fn sources(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("small files")).unwrap();
    std::fs::create_dir_all(src.join("big")).unwrap();
    std::fs::create_dir_all(src.join("empty")).unwrap();
    for i in 0..200u64 {
        let name = format!("f {i}|x");
        std::fs::write(
            src.join("small files").join(name),
            noise(i, (i * 53) as usize),
        )
        .unwrap();
    }
    std::fs::write(src.join("big/one"), noise(7, 5_000_000)).unwrap();
    std::fs::write(src.join("big/two\nlines"), noise(8, 3_300_000)).unwrap();
    std::os::unix::fs::symlink("../big/one", src.join("small files/link")).unwrap();
    src
}

/// `tar -c -k 1M [codec] -f NAME src` run in `dir`, with the index member dated [`EPOCH`].
fn create(dir: &Path, codec: &[&str]) -> Tool {
    Tool::new("tar")
        .args(["-c", "-k", "1M"])
        .args(codec)
        .args(["-f", "a.tar", "src"])
        .current_dir(dir)
        .env("SOURCE_DATE_EPOCH", EPOCH)
}

/// The archive an uninterrupted run makes of `src` (in a directory of its own, under the same
/// name: the index member holds it).
fn reference(src: &Path, codec: &[&str]) -> Vec<u8> {
    let at = src.parent().unwrap().join(format!("ref{}", codec.join("")));
    std::fs::create_dir_all(&at).unwrap();
    copy_tree(src, &at.join("src"));
    create(&at, codec).expect(0);
    let bytes = std::fs::read(at.join("a.tar")).unwrap();
    std::fs::remove_dir_all(&at).unwrap();
    bytes
}

/// A copy of a tree with the same names, contents and mtimes (what tar stores).
fn copy_tree(from: &Path, to: &Path) {
    let out = std::process::Command::new("cp")
        .args(["-a"])
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp -a: {out:?}");
}

fn checkpoint(dir: &Path) -> PathBuf {
    dir.join(".a.tar.mfu-checkpoint")
}

#[track_caller]
fn assert_same(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: the archive is not an uninterrupted run's ({} bytes, want {}; first \
             difference at {at:?})",
            got.len(),
            want.len()
        );
    }
}

/// Interrupt (`knob` = N) a run launched as `first`, rerun it as `again`: the archive equals
/// an uninterrupted run's, the checkpoint is gone.
fn interrupted_then_continued(
    dir: &Path,
    codec: &[&str],
    want: &[u8],
    (knob, n): (&str, u32),
    first: impl Fn(Tool) -> Tool,
    again: impl Fn(Tool) -> Tool,
) {
    let what = format!("{codec:?} {knob}={n}");
    let run = first(create(dir, codec)).env(knob, n.to_string()).run();
    assert_ne!(run.code(), Some(0), "{what}: {}", run.stderr_str());
    assert!(!dir.join("a.tar").exists(), "{what}: an incomplete archive");
    assert!(checkpoint(dir).is_dir(), "{what}: no checkpoint kept");
    if knob.ends_with("STOP_AFTER") {
        // Stopped as by SIGTERM: exit 1, nothing that looks like an archive, how far it got.
        assert_eq!(run.code(), Some(1), "{what}: {}", run.stderr_str());
        run.stderr_contains("bytes (")
            .stderr_contains("run the same command again to continue");
    }
    let rerun = again(create(dir, codec)).run();
    assert_eq!(rerun.code(), Some(0), "{what}: {}", rerun.stderr_str());
    rerun.stderr_contains("continuing from checkpoint");
    assert_same(&std::fs::read(dir.join("a.tar")).unwrap(), want, &what);
    assert!(!checkpoint(dir).exists(), "{what}: the checkpoint stayed");
    std::fs::remove_file(dir.join("a.tar")).unwrap();
}

#[test]
fn create_killed_or_stopped_continues_to_the_same_archive_plain_and_compressed() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    for codec in [&[][..], &["--zstd"], &["-z"]] {
        let want = reference(&src, codec);
        let die = "MFU_RS_TEST_CHECKPOINT_DIE_AFTER";
        let stop = "MFU_RS_TEST_CHECKPOINT_STOP_AFTER";
        // kill -9 at np 1, continued with 3 ranks; stopped with 3 ranks, continued at np 1.
        interrupted_then_continued(t.path(), codec, &want, (die, 4), |c| c, |c| c.ranks(3));
        interrupted_then_continued(t.path(), codec, &want, (stop, 3), |c| c.ranks(3), |c| c);
        // Under mpirun -np 2, continued by mpirun -np 2 and by one process.
        interrupted_then_continued(t.path(), codec, &want, (die, 3), |c| c.mpi(2), |c| c.mpi(2));
        interrupted_then_continued(t.path(), codec, &want, (stop, 5), |c| c.mpi(2), |c| c);
    }
}

#[test]
fn create_of_dbz2_frames_continues_to_the_same_archive() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let want = reference(&src, &["-j"]);
    let die = "MFU_RS_TEST_CHECKPOINT_DIE_AFTER";
    interrupted_then_continued(t.path(), &["-j"], &want, (die, 4), |c| c.ranks(2), |c| c);
}

/// What the rerun skips is what the marks say: bytes of the partial archive that an earlier
/// run marked are not written again (overwritten here, they stay overwritten), the others are.
/// How far the killed run got depends on the machine's timing (a slow disk's flush lets more
/// be written and marked before the N-th mark), so the check is exact rather than a share: a
/// byte may stay overwritten only where the killed run had already written it right.
#[test]
fn a_rerun_writes_only_what_is_not_marked() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let want = reference(&src, &[]);
    let run = create(t.path(), &[])
        .env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "6")
        .run();
    assert_eq!(run.code(), None, "killed: {}", run.stderr_str());
    let partial = checkpoint(t.path()).join("partial-archive");
    let before = std::fs::read(&partial).unwrap();
    // Where the killed run's bytes were already right: the only places a mark may cover
    // (zeros it never wrote count too, where the archive has zeros: a superset is enough).
    let written: Vec<bool> = (0..want.len())
        .map(|i| before.get(i) == Some(&want[i]))
        .collect();
    // The same file (the marks are about its inode), every byte rewritten.
    std::fs::write(&partial, vec![0xA5u8; before.len()]).unwrap();
    create(t.path(), &[]).expect(0);
    let got = std::fs::read(t.path().join("a.tar")).unwrap();
    assert_eq!(got.len(), want.len());
    let mut kept = 0usize;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if g == w {
            continue;
        }
        assert_eq!(
            *g, 0xA5,
            "byte {i} is neither the archive's nor the overwritten partial's"
        );
        assert!(
            written[i],
            "byte {i}: the killed run had not written it, yet the rerun did not write it \
             (kept as overwritten)"
        );
        kept += 1;
    }
    assert!(
        kept > 0,
        "every byte was written again: the marks were not used"
    );
    assert!(
        kept < want.len(),
        "nothing was written again: the rerun trusted marks for the whole archive"
    );
}

#[test]
fn a_source_changed_between_runs_starts_over_and_says_so() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let run = create(t.path(), &["--zstd"])
        .env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "4")
        .run();
    assert_eq!(run.code(), None, "killed: {}", run.stderr_str());
    // Same size, other bytes: only its times tell.
    std::fs::write(src.join("small files/f 9|x"), noise(99, 9 * 53)).unwrap();
    let want = reference(&src, &["--zstd"]);
    let rerun = create(t.path(), &["--zstd"]).expect(0);
    rerun.stderr_contains("not used (the list of sources changed");
    rerun.stderr_contains("starting over");
    assert_same(
        &std::fs::read(t.path().join("a.tar")).unwrap(),
        &want,
        "after a change",
    );
}

/// The partial archive replaced (another inode) or cut: its marks are about another file, so
/// the run starts over, and says why.
#[test]
fn a_replaced_or_cut_partial_archive_is_not_continued() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let want = reference(&src, &[]);
    for damage in ["replaced", "cut"] {
        let run = create(t.path(), &[])
            .env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "5")
            .run();
        assert_eq!(run.code(), None, "killed: {}", run.stderr_str());
        let partial = checkpoint(t.path()).join("partial-archive");
        let bytes = std::fs::read(&partial).unwrap();
        match damage {
            // The same bytes in a new file.
            "replaced" => {
                std::fs::remove_file(&partial).unwrap();
                std::fs::write(&partial, &bytes).unwrap();
            }
            // The same file, shorter.
            _ => std::fs::OpenOptions::new()
                .write(true)
                .open(&partial)
                .and_then(|f| f.set_len(bytes.len() as u64 / 2))
                .unwrap(),
        }
        let rerun = create(t.path(), &[]).expect(0);
        rerun.stderr_contains("starting over");
        rerun.stderr_contains("partial archive");
        assert_same(
            &std::fs::read(t.path().join("a.tar")).unwrap(),
            &want,
            damage,
        );
        std::fs::remove_file(t.path().join("a.tar")).unwrap();
    }
}

/// Forged checkpoints: garbage in its files, a symlink at its name, another run's checkpoint
/// copied there. None is trusted or followed; the archive is an uninterrupted run's.
#[test]
fn a_forged_or_foreign_checkpoint_is_not_trusted() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let want = reference(&src, &[]);
    let ck = checkpoint(t.path());
    let killed = |tool: Tool| {
        let run = tool.env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "4").run();
        assert_eq!(run.code(), None, "killed: {}", run.stderr_str());
    };
    let check = |what: &str| {
        assert_same(&std::fs::read(t.path().join("a.tar")).unwrap(), &want, what);
        std::fs::remove_file(t.path().join("a.tar")).unwrap();
    };

    // Garbage in every file of it.
    killed(create(t.path(), &[]));
    for e in std::fs::read_dir(&ck).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() != "partial-archive" {
            std::fs::write(&p, b"\x00garbage\xff").unwrap();
        }
    }
    // Not trusted: removed and started over, or (not recognisably a checkpoint of ours) left
    // alone and the run goes on without one.
    let run = create(t.path(), &[]).expect(0);
    let err = run.stderr_str();
    assert!(
        err.contains("starting over") || err.contains("running without a checkpoint"),
        "{err}"
    );
    assert!(!err.contains("continuing"), "{err}");
    check("garbage");
    if ck.exists() {
        std::fs::remove_dir_all(&ck).unwrap();
    }

    // A symlink at its name: never followed, the target untouched.
    let elsewhere = t.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &ck).unwrap();
    create(t.path(), &[]).expect(0);
    check("symlink");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(ck.symlink_metadata().unwrap().file_type().is_symlink());
    std::fs::remove_file(&ck).unwrap();

    // The checkpoint of another archive of other sources, copied to this one's name.
    let other = t.path().join("other");
    std::fs::create_dir_all(other.join("src")).unwrap();
    std::fs::write(other.join("src/x"), noise(3, 3_000_000)).unwrap();
    killed(create(&other, &[]));
    copy_tree(&checkpoint(&other), &ck);
    create(t.path(), &[]).expect(0).stderr_contains("not used");
    check("foreign");
}

/// A real SIGTERM from outside while the data is being written (the first chunk read waits
/// for it): exit 1, the checkpoint kept; the rerun continues to an uninterrupted run's archive.
#[test]
fn a_sigterm_stops_create_and_the_same_command_continues() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let want = reference(&src, &[]);
    let flag = t.path().join("first chunk read");
    let partial = checkpoint(t.path()).join("partial-archive");
    let mut cmd = create(t.path(), &[])
        .env(
            "MFU_RS_TEST_HOOK_AFTER_FIRST_CHUNK",
            format!("touch '{}'; sleep 1", flag.display()),
        )
        .command();
    let out = mfu_tests::signal_when(&mut cmd, rustix::process::Signal::TERM, || {
        flag.exists() && partial.exists()
    });
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!t.path().join("a.tar").exists());
    let stopped = String::from_utf8_lossy(&out.stderr);
    assert!(stopped.contains("stopped after"), "{stopped}");
    let rerun = create(t.path(), &[]).expect(0);
    rerun.stderr_contains("continuing from checkpoint");
    assert_same(
        &std::fs::read(t.path().join("a.tar")).unwrap(),
        &want,
        "SIGTERM",
    );
}

/// The checkpoint lives beside the archive, here inside the tree archived: it is never
/// archived (its files change with every run); its directory changes when it is made, so the
/// run says that an interrupted run will start over, and the rerun does.
#[test]
fn the_checkpoint_inside_the_sources_is_not_archived() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let inside = Tool::new("tar")
        .args(["-c", "-k", "1M", "-f", "src/a.tar", "src"])
        .current_dir(t.path())
        .env("SOURCE_DATE_EPOCH", EPOCH);
    let run = inside
        .clone()
        .env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "4")
        .run();
    assert_eq!(run.code(), None, "killed: {}", run.stderr_str());
    run.stderr_contains("is inside the sources");
    let rerun = inside.expect(0);
    rerun.stderr_contains("starting over");
    let listed = Tool::new("tar")
        .args(["-t", "-f"])
        .arg(src.join("a.tar"))
        .expect(0)
        .stdout_str();
    assert!(!listed.contains("mfu-checkpoint"), "{listed}");
    assert!(!listed.contains("a.tar"), "{listed}");
    assert!(listed.contains("src/big/one"), "{listed}");
    assert!(!src.join(".a.tar.mfu-checkpoint").exists());
}

/// `--checkpoint PATH`, relative: killed, continued from it, and it is gone at the end; a
/// `--checkpoint` on another file system than the archive's is refused with nothing done (the
/// partial archive in it is renamed into place at the end).
#[test]
fn a_checkpoint_given_by_a_relative_path_is_continued_and_removed() {
    use std::os::unix::fs::MetadataExt;
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let want = reference(&src, &["--zstd"]);
    let at = |tool: Tool| tool.args(["--checkpoint", "my ck"]);
    let run = at(create(t.path(), &["--zstd"]))
        .env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "3")
        .run();
    assert_eq!(run.code(), None, "killed: {}", run.stderr_str());
    assert!(t.path().join("my ck/partial-archive").is_file());
    at(create(t.path(), &["--zstd"]))
        .expect(0)
        .stderr_contains("continuing from checkpoint");
    assert_same(
        &std::fs::read(t.path().join("a.tar")).unwrap(),
        &want,
        "--checkpoint",
    );
    assert!(!t.path().join("my ck").exists(), "the checkpoint stayed");

    let shm = Path::new("/dev/shm");
    let other_fs =
        std::fs::metadata(shm).is_ok_and(|m| m.dev() != std::fs::metadata(t.path()).unwrap().dev());
    if other_fs {
        let ck = tempfile::tempdir_in(shm).unwrap();
        let elsewhere = ck.path().join("ck");
        create(t.path(), &[])
            .arg("--checkpoint")
            .arg(&elsewhere)
            .expect(2)
            .stderr_contains("must be on the archive's file system");
        assert!(!elsewhere.exists());
    }
}

/// An archive whose name is near 255 bytes has the core's default checkpoint beside it (the
/// name cut, a digest added): kept when stopped, continued by the rerun; and a file of someone
/// else's planted at that name is warned about and left alone, the archive made without a
/// checkpoint (not refused, as it was when tar shortened the name itself into a
/// `--checkpoint PATH`).
#[test]
fn a_long_archive_name_has_the_default_checkpoint_and_a_foreign_thing_there_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), noise(1, 3_000_000)).unwrap();
    let long = format!("{}.tar", "a".repeat(251));
    let run = |knob: Option<&str>| {
        let mut t = Tool::new("tar")
            .args(["-c", "-k", "1M", "-f", &long, "src"])
            .current_dir(tmp.path());
        if let Some(n) = knob {
            t = t.env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", n);
        }
        t.run()
    };
    let stopped = run(Some("2"));
    assert_eq!(stopped.code(), Some(1), "{}", stopped.stderr_str());
    let kept: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".mfu-checkpoint"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let ck = tmp.path().join(&kept[0]);
    assert!(kept[0].len() <= 255 && kept[0].starts_with(".aaaa") && ck.is_dir());
    let again = run(None);
    assert_eq!(again.code(), Some(0), "{}", again.stderr_str());
    again.stderr_contains("continuing from checkpoint");
    assert!(!ck.exists(), "the checkpoint stayed");
    std::fs::remove_file(tmp.path().join(&long)).unwrap();
    std::fs::write(&ck, b"someone else's").unwrap();
    let planted = run(None);
    assert_eq!(planted.code(), Some(0), "{}", planted.stderr_str());
    planted
        .stderr_contains("running without a checkpoint")
        .stderr_contains("left alone");
    assert_eq!(std::fs::read(&ck).unwrap(), b"someone else's");
    assert!(tmp.path().join(&long).is_file());
}

/// A kill -9 leaves marks whose data is in the page cache, not yet synced (a run shorter than
/// the syncer's 2 s syncs nothing): a rerun on the same boot trusts them (the tests above); one
/// on another node or after a reboot (another boot id, `MFU_RS_TEST_BOOT_ID`) trusts only what
/// was synced (the plan, synced as it is recorded), says how many it does again, and still
/// makes an uninterrupted run's archive.
#[test]
fn a_rerun_on_another_boot_trusts_only_synced_marks() {
    let t = tempfile::tempdir().unwrap();
    let src = sources(t.path());
    let want = reference(&src, &[]);
    type Launch = fn(Tool) -> Tool;
    let runs: [(&str, Launch); 2] = [("np 1", |c| c), ("mpirun -np 2", |c| c.mpi(2))];
    for (what, launch) in runs {
        let run = launch(create(t.path(), &[]))
            .env("MFU_RS_TEST_CHECKPOINT_DIE_AFTER", "5")
            .run();
        assert_ne!(run.code(), Some(0), "{what}: {}", run.stderr_str());
        let rerun = launch(create(t.path(), &[]))
            .env("MFU_RS_TEST_BOOT_ID", "another-node")
            .run();
        assert_eq!(rerun.code(), Some(0), "{what}: {}", rerun.stderr_str());
        rerun
            .stderr_contains("continuing from checkpoint")
            .stderr_contains("more, marked on another node or before a reboot with their data not yet synced, are done again");
        assert_same(&std::fs::read(t.path().join("a.tar")).unwrap(), &want, what);
        assert!(
            !checkpoint(t.path()).exists(),
            "{what}: the checkpoint stayed"
        );
        std::fs::remove_file(t.path().join("a.tar")).unwrap();
    }
}
