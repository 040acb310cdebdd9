use super::*;

fn inputs(chunk: u64) -> Inputs {
    Inputs::new("test-tool")
        .field("the sources", &b"/src".to_vec())
        .field("--chunk", &chunk)
}

fn out_in(dir: &tempfile::TempDir) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    dir.path().join("out").as_os_str().as_bytes().to_vec()
}

/// Open at `ranks` thread ranks with the default location beside `out`; each rank marks the
/// keys `k` with `k % ranks == rank` from `marks` and finishes with `outcome`. Returns rank 0's
/// prior and notice.
fn run(
    out: &[u8],
    ranks: usize,
    chunk: u64,
    marks: std::ops::Range<u64>,
    outcome: Outcome,
) -> (Prior, Option<String>) {
    let got = steal::local::run(ranks, |comm| {
        let plan = Plan {
            output: Some(out),
            inputs: inputs(chunk),
        };
        let opened = open(comm, &Choice::Beside, plan).expect("open");
        let cp = opened.checkpoint.expect("a checkpoint");
        for k in marks.clone() {
            if k as usize % comm.size() == comm.rank() {
                cp.mark(k, &k.to_le_bytes());
            }
        }
        cp.finish(comm, outcome).expect("finish");
        (opened.prior, opened.notice)
    });
    assert!(
        got.windows(2).all(|w| w[0].0 == w[1].0),
        "every rank has the same prior"
    );
    got.into_iter().next().unwrap()
}

fn checkpoint_path(out: &[u8]) -> std::path::PathBuf {
    let p = std::path::PathBuf::from(flist::path::as_path(out));
    p.with_file_name(".out.mfu-checkpoint")
}

#[test]
fn a_rerun_at_another_rank_count_gets_every_mark_and_completion_removes_it() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    let (prior, notice) = run(&out, 3, 4, 0..10, Outcome::Stopped);
    assert!(prior.is_empty() && notice.is_none());
    let cp = checkpoint_path(&out);
    let meta = std::fs::symlink_metadata(&cp).unwrap();
    assert!(meta.is_dir());
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o700
    );
    let (prior, notice) = run(&out, 2, 4, 10..15, Outcome::Stopped);
    assert_eq!(prior.len(), 10);
    assert!(notice.unwrap().contains("continuing from checkpoint"));
    assert_eq!(prior.payload(7), Some(&7u64.to_le_bytes()[..]));
    let (prior, _) = run(&out, 1, 4, 0..0, Outcome::Complete);
    assert_eq!(prior.len(), 15);
    assert!(!cp.exists(), "a completed run leaves no checkpoint");
}

#[test]
fn changed_inputs_or_a_damaged_header_start_over_and_say_why() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    run(&out, 1, 4, 0..5, Outcome::Stopped);
    let (prior, notice) = run(&out, 2, 8, 0..3, Outcome::Stopped);
    assert!(prior.is_empty());
    assert!(
        notice.unwrap().contains("--chunk changed"),
        "the changed option is named"
    );
    let header = checkpoint_path(&out).join("header");
    let mut bytes = std::fs::read(&header).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&header, bytes).unwrap();
    let (prior, notice) = run(&out, 1, 8, 0..1, Outcome::Stopped);
    assert!(prior.is_empty());
    assert!(notice.unwrap().contains("damaged"));
}

#[test]
fn forged_logs_and_a_foreign_checkpoint_are_not_trusted() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    run(&out, 1, 4, 0..4, Outcome::Stopped);
    let cp = checkpoint_path(&out);
    // A log of garbage, and a log planted as a symbolic link to a copy of a real one: neither
    // adds a unit.
    std::fs::write(cp.join("log.0000000005.000000"), vec![0xa5; 300]).unwrap();
    let real = std::fs::read_dir(&cp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("log.0000000000")
        })
        .unwrap();
    let elsewhere = t.path().join("copy");
    let mut bytes = std::fs::read(&real).unwrap();
    // The copy's marks are re-keyed by hand: their checks no longer hold.
    bytes[0] = 99;
    std::fs::write(&elsewhere, bytes).unwrap();
    std::os::unix::fs::symlink(&elsewhere, cp.join("log.0000000006.000000")).unwrap();
    let (prior, _) = run(&out, 1, 4, 0..0, Outcome::Stopped);
    assert_eq!(
        prior.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );

    // A symbolic link at the default name: never followed, the run goes on without one.
    let t2 = tempfile::tempdir().unwrap();
    let out2 = out_in(&t2);
    let target = t2.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&target, checkpoint_path(&out2)).unwrap();
    let got = steal::local::run(1, |comm| {
        let plan = Plan {
            output: Some(&out2),
            inputs: inputs(4),
        };
        let o = open(comm, &Choice::Beside, plan).unwrap();
        (o.checkpoint.is_none(), o.notice)
    });
    assert!(got[0].0);
    assert!(got[0].1.as_ref().unwrap().contains("symbolic link"));
    assert_eq!(
        std::fs::read_dir(&target).unwrap().count(),
        0,
        "nothing written through it"
    );

    // A user's directory at --checkpoint PATH: refused, left alone.
    let mine = t2.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), b"keep").unwrap();
    let at = {
        use std::os::unix::ffi::OsStrExt;
        mine.as_os_str().as_bytes().to_vec()
    };
    let err = steal::local::run(1, |comm| {
        let plan = Plan {
            output: None,
            inputs: inputs(4),
        };
        open(comm, &Choice::At(at.clone()), plan).unwrap_err()
    });
    assert!(err[0].0.contains("not a checkpoint"), "{}", err[0]);
    assert_eq!(std::fs::read(mine.join("notes.txt")).unwrap(), b"keep");
}

#[test]
fn off_keeps_nothing_and_finds_nothing() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    run(&out, 1, 4, 0..3, Outcome::Stopped);
    let got = steal::local::run(1, |comm| {
        let plan = Plan {
            output: Some(&out),
            inputs: inputs(4),
        };
        let o = open(comm, &Choice::Off, plan).unwrap();
        (o.checkpoint.is_none(), o.prior.len(), o.notice)
    });
    assert_eq!(got[0], (true, 0, None));
}

#[test]
fn a_second_run_of_the_same_command_at_once_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    steal::local::run(1, |comm| {
        let plan = Plan {
            output: Some(&out),
            inputs: inputs(4),
        };
        let first = open(comm, &Choice::Beside, plan).unwrap();
        let again = steal::local::run(1, |comm| {
            let plan = Plan {
                output: Some(&out),
                inputs: inputs(4),
            };
            open(comm, &Choice::Beside, plan).unwrap_err()
        });
        assert!(again[0].0.contains("in use by another run"), "{}", again[0]);
        assert!(
            again[0].0.contains("wait for it to end, or give"),
            "one space between words: {}",
            again[0]
        );
        first
            .checkpoint
            .unwrap()
            .finish(comm, Outcome::Stopped)
            .unwrap();
    });
    // Once the first has ended, the same command continues.
    let (_, notice) = run(&out, 1, 4, 0..0, Outcome::Complete);
    assert!(notice.unwrap().contains("continuing"));
}

#[test]
fn the_default_name_fits_a_file_name_and_long_names_never_share_one() {
    assert_eq!(beside_name(b"a.tar"), b".a.tar.mfu-checkpoint");
    let (mut a, mut b) = (vec![b'x'; 254], vec![b'x'; 254]);
    a.push(b'1');
    b.push(b'2');
    let (na, nb) = (beside_name(&a), beside_name(&b));
    assert!(na.len() <= 255 && nb.len() <= 255);
    assert!(na.ends_with(b".mfu-checkpoint"));
    assert_ne!(na, nb);
    // A name of 3-byte characters (whose cut would fall inside one) is cut between two.
    let wide = format!("a{}", "€".repeat(90)).into_bytes();
    let nw = beside_name(&wide);
    assert!(nw.len() <= 255);
    let kept = &nw[1..nw.iter().position(|&b| b == b'~').unwrap()];
    assert!(std::str::from_utf8(kept).is_ok(), "cut inside a character");
    // And a run with such an output keeps its checkpoint.
    let t = tempfile::tempdir().unwrap();
    let out = {
        use std::os::unix::ffi::OsStrExt;
        t.path()
            .join(std::ffi::OsStr::from_bytes(&a))
            .as_os_str()
            .as_bytes()
            .to_vec()
    };
    run(&out, 1, 4, 0..2, Outcome::Stopped);
    let (prior, _) = run(&out, 1, 4, 0..0, Outcome::Complete);
    assert_eq!(prior.len(), 2);
}

#[test]
fn a_damaged_checkpoint_holding_a_tools_own_files_is_removed_and_a_relative_path_works() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    run(&out, 1, 4, 0..3, Outcome::Stopped);
    let cp = checkpoint_path(&out);
    // The tool's own file, and a header whose body is damaged after its magic.
    std::fs::write(cp.join("partial-archive"), b"data").unwrap();
    let header = cp.join("header");
    let mut bytes = std::fs::read(&header).unwrap();
    for b in &mut bytes[8..] {
        *b ^= 0x5a;
    }
    std::fs::write(&header, bytes).unwrap();
    let (prior, notice) = run(&out, 1, 4, 0..0, Outcome::Complete);
    assert!(prior.is_empty());
    assert!(notice.unwrap().contains("damaged"));
    assert!(!cp.exists(), "removed with the tool's file once complete");

    // A relative --checkpoint names the same directory on every rank, and is removed through
    // its real parent: it is made absolute.
    let plan = Plan {
        output: Some(b"rel/out"),
        inputs: inputs(4),
    };
    let cwd = flist::path::current_dir().unwrap();
    let at = location(&Choice::At(b"ck".to_vec()), &plan)
        .unwrap()
        .unwrap();
    assert_eq!(at, [cwd.as_slice(), b"/ck"].concat());
    let beside = location(&Choice::Beside, &plan).unwrap().unwrap();
    assert_eq!(
        beside,
        [cwd.as_slice(), b"/rel/.out.mfu-checkpoint"].concat()
    );
}

/// The flusher's waits: a twentieth of the run so far, at least as long as the last flush took,
/// between 25 ms and 2 s, so that a kill early in a short run loses little (a fixed 2 s lost
/// all of a 3 s run's first two thirds, a floor of 0.2 s all of a 0.2 s run's work) and a slow
/// sync cannot take more than half the time; the test knob fixes it.
#[test]
fn flushes_come_a_twentieth_of_the_run_so_far_apart_and_no_closer_than_their_cost() {
    let ms = Duration::from_millis;
    let fast = Duration::from_micros(50);
    assert_eq!(schedule(ms(0), fast, None), ms(25));
    assert_eq!(schedule(ms(100), fast, None), ms(25));
    assert_eq!(schedule(ms(400), fast, None), ms(25));
    assert_eq!(schedule(ms(1_000), fast, None), ms(50));
    assert_eq!(schedule(ms(5_000), fast, None), ms(250));
    assert_eq!(schedule(ms(20_000), fast, None), ms(1_000));
    assert_eq!(schedule(ms(40_000), fast, None), ms(2_000));
    assert_eq!(schedule(ms(3_600_000), fast, None), ms(2_000));
    assert_eq!(schedule(ms(3_600_000), fast, Some(ms(20))), ms(20));
    // A flush that took 300 ms (a disk's sync): the next one waits as long; a sync slower than
    // the longest interval, the longest interval.
    assert_eq!(schedule(ms(100), ms(300), None), ms(300));
    assert_eq!(schedule(ms(10_000), ms(300), None), ms(500));
    assert_eq!(schedule(ms(10_000), ms(700), None), ms(700));
    assert_eq!(schedule(ms(100), ms(9_000), None), ms(2_000));
    // Over a 3 s run the marks of everything but the last ~0.15 s are on disk, and those of
    // a 0.3 s run's all but the last 25 ms.
    let flushes = |until: Duration| {
        let (mut t, mut n) = (ms(0), 0);
        while t < until {
            t += schedule(t, fast, None);
            n += 1;
        }
        n
    };
    assert!(
        (40..=90).contains(&flushes(ms(3_000))),
        "{} flushes in 3 s",
        flushes(ms(3_000))
    );
    assert!(
        (10..=14).contains(&flushes(ms(300))),
        "{} flushes in 0.3 s",
        flushes(ms(300))
    );
}

/// A fresh checkpoint beside `out` (inputs of chunk 1), opened on `comm`.
fn opened_beside(comm: &dyn steal::Comm, out: &[u8]) -> Checkpoint {
    let plan = Plan {
        output: Some(out),
        inputs: inputs(1),
    };
    open(comm, &Choice::Beside, plan)
        .expect("open")
        .checkpoint
        .expect("a checkpoint")
}

/// Bytes of marks written so far in the logs of the checkpoint beside `out`.
fn logged_bytes(out: &[u8]) -> u64 {
    std::fs::read_dir(checkpoint_path(out))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"log."))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// A mark made as the run starts is on disk well before the longest interval (2 s): the
/// flusher's first flush comes after 25 ms (1.5 s allowed: a loaded machine's fsync).
#[test]
fn a_mark_made_at_the_start_is_durable_before_the_longest_interval() {
    assert!(
        fixed_interval().is_none(),
        "this test needs the default schedule"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = out_in(&dir);
    steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        cp.mark(7, b"seven");
        let logged = || logged_bytes(&out);
        let start = Instant::now();
        while logged() == 0 && start.elapsed() < Duration::from_millis(1_500) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(logged() > 0, "no mark on disk 1.5 s after it was made");
        cp.finish(comm, Outcome::Stopped).expect("finish");
    });
}

/// Stopping the flusher once the writes are done (before the output is synced and renamed)
/// first makes every mark durable: a kill during the final sync finds every unit done. A
/// mark made just after the checkpoint opened is on disk at once, not at a flush 25 ms later.
#[test]
fn stopping_the_flusher_first_makes_every_mark_durable() {
    let dir = tempfile::tempdir().unwrap();
    let out = out_in(&dir);
    steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        for k in 0..100 {
            cp.mark(k, &k.to_le_bytes());
        }
        cp.stop_flushing();
        assert!(
            logged_bytes(&out) > 0,
            "the marks were not written when the flusher stopped"
        );
        // What a rerun finds: every unit (the checkpoint kept, as after a kill).
        cp.finish(comm, Outcome::Stopped).expect("finish");
    });
    let (prior, notice) = run(&out, 1, 1, 0..0, Outcome::Complete);
    assert_eq!(prior.len(), 100, "{notice:?}");
}

/// A checkpoint that cannot be removed (the directory it is in moved away from its path) is
/// told through the run's context, naming it and the operation, once (rank 0), and
/// `finish_told` says so on every rank.
#[test]
fn a_checkpoint_not_removed_is_told_through_the_context() {
    use crate::engine::context::{Collect, Context};
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("sub")).unwrap();
    let at = t.path().join("sub/ck").as_os_str().as_bytes().to_vec();
    let events = std::sync::Arc::new(Collect::default());
    let context = Context::new(events.clone());
    let told = steal::local::run(2, |comm| {
        let plan = Plan {
            output: None,
            inputs: inputs(4),
        };
        let opened = open(comm, &Choice::At(at.clone()), plan).expect("open");
        let cp = opened.checkpoint.expect("a checkpoint");
        cp.mark(comm.rank() as u64, b"done");
        comm.barrier();
        if comm.rank() == 0 {
            std::fs::rename(t.path().join("sub"), t.path().join("moved")).unwrap();
        }
        comm.barrier();
        cp.finish_told(comm, &context, Outcome::Complete)
    });
    assert_eq!(told, [false, false]);
    let errors = events.errors.lock().unwrap().clone();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let shown = flist::path::display(&at).into_owned();
    assert!(errors[0].contains(&shown), "{errors:?}");
    assert!(errors[0].contains("open the directory of"), "{errors:?}");
    assert_eq!(context.failures(), errors, "in the report's sample");
    assert!(t.path().join("moved/ck").is_dir(), "left, and told");
}

/// A payload too long for a mark (a walked directory of millions of entries, a grep chunk of
/// matching lines bigger than 64 MiB) is left out: the marks after it in the same log are
/// still read back (a reader takes an over-long mark for damage and stops there).
#[test]
fn an_over_long_payload_is_left_out_and_the_marks_after_it_are_kept() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        cp.mark(1, b"before");
        cp.mark(2, &vec![7u8; store::MAX_PAYLOAD + 1]);
        cp.mark_with(3, |o| o.resize(o.len() + store::MAX_PAYLOAD + 1, 9));
        cp.mark_with(4, |o| o.extend_from_slice(b"after"));
        cp.finish(comm, Outcome::Stopped).expect("finish");
    });
    let (prior, _) = run(&out, 1, 1, 0..0, Outcome::Complete);
    assert_eq!(prior.len(), 2, "the marks before and after the long ones");
    assert_eq!(prior.payload(1), Some(&b"before"[..]));
    assert_eq!(prior.payload(2), None);
    assert_eq!(prior.payload(3), None);
    assert_eq!(prior.payload(4), Some(&b"after"[..]));
}

/// A write of the log that failed during the run (a full file system) is said when a stopped
/// run keeps its checkpoint, even when no mark was pending then: the rerun will redo what the
/// log lacks.
#[test]
fn a_failed_write_is_reported_when_a_stopped_run_keeps_its_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    let told = steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        cp.mark(1, b"one");
        cp.flush().expect("the first flush");
        // What the flusher records when a write fails (ENOSPC), the failed marks then gone.
        *cp.shared.failed.lock().unwrap() =
            Some("write checkpoint X: No space left on device (os error 28)".into());
        cp.finish(comm, Outcome::Stopped).map_err(|e| e.to_string())
    });
    let err = told.into_iter().next().unwrap().unwrap_err();
    assert!(err.contains("No space left"), "{err}");
}

/// The flusher writes marks but never syncs the log (it never waits for the disk): the
/// syncer syncs the log of a run without outputs on the outputs' schedule
/// ([`OUTPUT_SYNC_INTERVAL`], shortened here), not sooner (a short run sends its log to no
/// disk), and with outputs right after each sync of them; a flush asked for (a stop) syncs
/// it at once.
#[test]
fn the_log_is_synced_on_the_outputs_schedule_or_with_the_outputs_and_at_a_stop() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        let unsynced = || {
            let log = cp.shared.log.lock().unwrap();
            log.written > log.log_synced
        };
        cp.mark(1, b"one");
        cp.shared.write_pending(SyncLog::Later).unwrap();
        assert!(logged_bytes(&out) > 0, "the mark was written");
        // Many ticks of the syncer, and longer than a second: no sync before the interval.
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            unsynced(),
            "the log was synced before the outputs' interval"
        );
        cp.shared.flush().unwrap();
        assert!(!unsynced(), "an asked flush syncs the log");
        cp.mark(2, b"two");
        cp.shared.write_pending(SyncLog::Later).unwrap();
        assert!(unsynced());
        // The interval passes: the syncer's next tick syncs it.
        cp.shared.output_sync_ms.store(100, Ordering::Relaxed);
        let start = Instant::now();
        while unsynced() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!unsynced(), "a due sync did not come");
        cp.stop_flusher();
        // With an output: synced with it, whenever that comes.
        let file = std::fs::File::create(t.path().join("data")).unwrap();
        cp.durable(Durable::File(Arc::new(file.into())));
        cp.mark(3, b"three");
        cp.shared.write_pending(SyncLog::Later).unwrap();
        assert!(unsynced());
        cp.shared.sync_outputs().unwrap();
        assert!(!unsynced(), "the log was not synced with the outputs");
        cp.finish(comm, Outcome::Stopped).expect("finish");
    });
}

/// What a rerun reads from the checkpoint beside `out`, its ranks running on `boots`.
fn read_back(out: &[u8], boots: &[Vec<u8>]) -> (Vec<u64>, u64) {
    let dir = std::fs::File::open(checkpoint_path(out)).unwrap();
    let header = store::read_header_of(dir.as_fd()).unwrap();
    let read = store::read_marks(dir.as_fd(), header.nonce, boots).unwrap();
    (read.marks.iter().map(|(k, _)| *k).collect(), read.untrusted)
}

/// A checkpoint left as a kill leaves it: marks written by the flusher, no sync since.
fn killed(cp: Checkpoint) {
    let mut cp = cp;
    cp.stop_flusher();
    cp.ended = true;
}

/// Marks are written without waiting for a sync of the outputs: a rerun on the same boot
/// (a kill, a time limit) trusts them all; one on another boot (a crash of the node, another
/// node) only those the syncer recorded as synced. Marks of a run with no output to sync are
/// synced as written.
#[test]
fn unsynced_marks_are_trusted_on_their_boot_only() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    let data = t.path().join("data");
    steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        cp.stop_flusher();
        let file = std::fs::File::create(&data).unwrap();
        cp.durable(Durable::File(Arc::new(file.into())));
        cp.mark(1, b"one");
        cp.mark(2, b"two");
        cp.shared.write_pending(SyncLog::Later).unwrap();
        cp.shared.sync_outputs().unwrap();
        cp.mark(3, b"three");
        cp.shared.write_pending(SyncLog::Later).unwrap();
        killed(cp);
    });
    let here = vec![boot_id()];
    assert!(!here[0].is_empty(), "this machine's boot id is known");
    assert_eq!(read_back(&out, &here), (vec![1, 2, 3], 0));
    assert_eq!(read_back(&out, &[b"another".to_vec()]), (vec![1, 2], 1));
    // What a rerun elsewhere is told.
    let notice = steal::local::run(1, |comm| {
        let plan = Plan {
            output: Some(&out),
            inputs: inputs(1),
        };
        let (d, _dir) = decide(&Choice::Beside, &plan, &[b"another".to_vec()]).unwrap();
        let _ = comm;
        d.notice.unwrap()
    });
    assert!(
        notice[0].contains("2 units done by earlier runs; 1 more, marked on another node"),
        "{}",
        notice[0]
    );
    std::fs::remove_dir_all(checkpoint_path(&out)).unwrap();

    // No output registered: synced as written.
    steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        cp.stop_flusher();
        cp.mark(1, b"one");
        cp.shared.write_pending(SyncLog::Later).unwrap();
        killed(cp);
    });
    assert_eq!(read_back(&out, &[b"another".to_vec()]), (vec![1], 0));
}

/// A stop (SIGTERM) syncs the outputs before it keeps the checkpoint: its marks hold on any
/// boot. A sync that fails (here an output that cannot be synced, a pipe) is told, and no
/// rerun, even on the same boot, trusts the marks it leaves unsynced.
#[test]
fn a_stop_syncs_the_outputs_and_a_failed_sync_is_told_and_doubted() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    let data = t.path().join("data");
    steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        let file = std::fs::File::create(&data).unwrap();
        cp.durable(Durable::File(Arc::new(file.into())));
        cp.mark(1, b"one");
        cp.finish(comm, Outcome::Stopped).expect("finish");
    });
    assert_eq!(read_back(&out, &[b"another".to_vec()]), (vec![1], 0));
    std::fs::remove_dir_all(checkpoint_path(&out)).unwrap();

    let told = steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        let (_r, w) = std::io::pipe().unwrap();
        cp.durable(Durable::File(Arc::new(std::os::fd::OwnedFd::from(w))));
        cp.mark(1, b"one");
        cp.shared.write_pending(SyncLog::Later).unwrap();
        cp.finish(comm, Outcome::Stopped).map_err(|e| e.to_string())
    });
    let err = told.into_iter().next().unwrap().unwrap_err();
    assert!(
        err.contains("write checkpoint") && err.contains("sync the run's output"),
        "{err}"
    );
    assert_eq!(read_back(&out, &[boot_id()]), (vec![], 1));
}

/// The syncer runs on its own: marks written, then, once its interval (30 s, 0.1 s here) has
/// passed, synced and recorded as synced, with no flush asked for.
#[test]
fn the_syncer_records_synced_marks_within_its_interval() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    let data = t.path().join("data");
    steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        let file = std::fs::File::create(&data).unwrap();
        cp.shared.output_sync_ms.store(100, Ordering::Relaxed);
        cp.durable(Durable::File(Arc::new(file.into())));
        cp.mark(1, b"one");
        let start = Instant::now();
        while read_back(&out, &[b"another".to_vec()]).0.is_empty()
            && start.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(read_back(&out, &[b"another".to_vec()]), (vec![1], 0));
        killed(cp);
    });
}

/// A sync of the outputs that failed during a run that then completed (a writeback error: its
/// data may not be on disk, though every write succeeded) fails the run's end, naming the
/// checkpoint: a run with a checkpoint never hides it.
#[test]
fn a_failed_sync_of_the_outputs_fails_a_complete_run() {
    let t = tempfile::tempdir().unwrap();
    let out = out_in(&t);
    let told = steal::local::run(1, |comm| {
        let cp = opened_beside(comm, &out);
        let (_r, w) = std::io::pipe().unwrap();
        cp.durable(Durable::File(Arc::new(std::os::fd::OwnedFd::from(w))));
        cp.mark(1, b"one");
        cp.shared.write_pending(SyncLog::Later).unwrap();
        assert!(cp.shared.sync_outputs().is_err(), "a pipe cannot be synced");
        cp.finish(comm, Outcome::Complete)
            .map_err(|e| e.to_string())
    });
    let err = told.into_iter().next().unwrap().unwrap_err();
    assert!(
        err.contains("sync the output of this run") && err.contains("may not be on disk"),
        "{err}"
    );
    assert!(
        !checkpoint_path(&out).exists(),
        "the checkpoint of a complete run stayed"
    );
}
