//! Rank 0's progress lines count every rank's work: the other ranks' counters send their
//! snapshots to rank 0 every interval ([`Progress::sending`]), and the last line of a queue
//! run has the sums of all ranks. (Before, the other ranks had silent counters and rank 0's
//! lines counted its own work only.) Its own process: the progress runtime is process-wide.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use steal::local;
use steal::progress::{self, Progress, Report};
use steal::queue::{self, Config};

#[test]
fn the_last_line_sums_the_work_of_every_rank() {
    let drawn: Arc<Mutex<Vec<Report>>> = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&drawn);
    let reporter: progress::Reporter =
        Box::new(move |r: &Report| kept.lock().unwrap().push(r.clone()));
    let reporter = Mutex::new(Some(reporter));
    let interval = Duration::from_millis(5);
    let items = 120u64;
    let done = local::run(3, |comm| {
        let progress = if comm.rank() == 0 {
            Progress::new(interval, reporter.lock().unwrap().take())
        } else {
            Progress::sending(interval)
        };
        let config = Config {
            progress: Some(&progress),
            ..Config::default()
        };
        // All the work starts on the last rank; rank 0 only gets what it steals.
        let initial: Vec<u64> = if comm.rank() == 2 {
            (0..items).collect()
        } else {
            Vec::new()
        };
        let mine = std::sync::atomic::AtomicU64::new(0);
        queue::run(comm, &config, initial, |_, _| {
            std::thread::sleep(Duration::from_millis(1));
            progress.add(1, 10);
            mine.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        mine.into_inner()
    });
    assert_eq!(done.iter().sum::<u64>(), items);
    assert!(done[0] < items, "rank 0 did all the work: {done:?}");
    let drawn = drawn.lock().unwrap();
    let last = drawn.last().expect("lines were drawn");
    assert_eq!(
        (last.items, last.bytes),
        (items, items * 10),
        "the last line counts every rank's work (rank 0 did {}): {drawn:?}",
        done[0]
    );
}
