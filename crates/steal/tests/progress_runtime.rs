//! The progress runtime is started lazily: a run that ends within its first progress interval
//! never starts it; a longer one draws its lines from the runtime's own thread, and ends each
//! phase with one last line (the final sums). One test in its own process: the runtime is
//! process-wide, and another test starting it would hide a start.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use steal::local;
use steal::progress::{self, Progress, Report};
use steal::queue::{self, Config};

/// The reports drawn, each with the name of the thread that drew it.
type Drawn = Arc<Mutex<Vec<(Report, String)>>>;

/// A reporter that keeps each report with the name of the thread that drew it.
fn recording() -> (Drawn, progress::Reporter) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&lines);
    let reporter: progress::Reporter = Box::new(move |r: &Report| {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        kept.lock().unwrap().push((r.clone(), thread));
    });
    (lines, reporter)
}

/// A queue run on `ranks` thread ranks over `items` items taking `each` apiece, rank 0's
/// progress reporting every `interval`.
fn run(ranks: usize, items: u64, each: Duration, interval: Duration) -> Vec<(Report, String)> {
    let (lines, reporter) = recording();
    let reporter = Mutex::new(Some(reporter));
    local::run(ranks, |comm| {
        let progress = if comm.rank() == 0 {
            Progress::new(interval, reporter.lock().unwrap().take())
        } else {
            Progress::silent()
        };
        progress
            .total_items
            .store(items, std::sync::atomic::Ordering::Relaxed);
        let config = Config {
            progress: Some(&progress),
            ..Config::default()
        };
        let initial: Vec<u64> = if comm.rank() == 0 {
            (0..items).collect()
        } else {
            Vec::new()
        };
        queue::run(comm, &config, initial, |_, _| {
            std::thread::sleep(each);
            progress.add(1, 0);
        });
    });
    let lines = lines.lock().unwrap().clone();
    lines
}

#[test]
fn the_runtime_starts_only_once_a_progress_interval_has_passed() {
    assert_eq!(progress::runtime_starts(), 0);
    // Ends well within its first interval: no line, no runtime.
    let lines = run(2, 20, Duration::ZERO, Duration::from_secs(3600));
    assert!(lines.is_empty(), "{lines:?}");
    assert_eq!(
        progress::runtime_starts(),
        0,
        "a short run started the runtime"
    );
    // Silent counters never start it either, however long the run.
    let silent = Progress::new(Duration::from_millis(1), None);
    std::thread::sleep(Duration::from_millis(5));
    silent.report_sums(1, 2, 3);
    drop(silent);
    assert_eq!(progress::runtime_starts(), 0);

    // 200 items of 1 ms, a line every 10 ms: lines from the runtime's thread. (One rank: only
    // rank 0's counters are counted, the others' counters being silent.)
    let lines = run(1, 200, Duration::from_millis(1), Duration::from_millis(10));
    assert_eq!(progress::runtime_starts(), 1);
    assert!(lines.len() >= 2, "{lines:?}");
    assert!(
        lines.iter().all(|(_, thread)| thread == "mfu-progress"),
        "{lines:?}"
    );
    assert!(lines.iter().all(|(r, _)| r.total_items == 200), "{lines:?}");
    // The last line, drawn when the counters went, has the final sums.
    let (last, _) = lines.last().unwrap();
    assert_eq!(last.items, 200, "{lines:?}");
    assert!(lines.windows(2).all(|w| w[0].0.items <= w[1].0.items));

    // A second phase reuses the runtime.
    let again = run(1, 50, Duration::from_millis(1), Duration::from_millis(5));
    assert!(!again.is_empty());
    assert_eq!(progress::runtime_starts(), 1);
}
