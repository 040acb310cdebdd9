//! Progress of long collective work: per-rank atomic counters, summed on rank 0.
//!
//! Workers bump the counters of a [`Progress`]; while a [`crate::queue::run`] is under way each
//! rank sends a snapshot to rank 0 every interval (piggy-backed on the queue's polling loop, never
//! a blocking collective), and rank 0 hands the sum to the progress's reporter. The library only
//! computes; the binary decides what a user sees (its one progress line is the tools' crate's
//! `cli::progress_line`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sums over all ranks at one moment, handed to the reporter on rank 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Items done.
    pub items: u64,
    /// Bytes done.
    pub bytes: u64,
    /// Items that failed.
    pub errors: u64,
    /// Items expected in all (0 = unknown).
    pub total_items: u64,
    /// Bytes expected in all (0 = unknown).
    pub total_bytes: u64,
    /// Time since the work started.
    pub elapsed: Duration,
}

/// `1536` → `1.500 KiB`; binary units, three decimals above bytes.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.3} {}", UNITS[u])
    }
}

/// Seconds as `42 s`, `3 min 20 s` or `2 h 5 min`.
pub fn human_duration(secs: f64) -> String {
    let s = secs.round() as u64;
    if secs < 10.0 {
        format!("{secs:.1} s")
    } else if s < 120 {
        format!("{s} s")
    } else if s < 7200 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} h {} min", s / 3600, (s % 3600) / 60)
    }
}

/// The reporter a binary installs: called on rank 0 with the global sums.
pub type Reporter = Box<dyn Fn(&Report) + Send + Sync>;

/// Per-rank progress counters of one phase of work. Shared by reference with the workers.
pub struct Progress {
    /// Items done on this rank.
    pub items: AtomicU64,
    /// Bytes done on this rank.
    pub bytes: AtomicU64,
    /// Failed items on this rank.
    pub errors: AtomicU64,
    /// Expected items over all ranks (0 = unknown); set it before the work starts.
    pub total_items: AtomicU64,
    /// Expected bytes over all ranks (0 = unknown).
    pub total_bytes: AtomicU64,
    start: Instant,
    /// Reporting interval (zero: never due).
    interval: Duration,
    /// The last interval number [`Progress::due`] answered for.
    seen_tick: AtomicU64,
    reporter: Option<Reporter>,
}

impl Progress {
    /// Counters that report every `interval` (none if `interval` is zero or `reporter` is `None`).
    /// Only rank 0's reporter is ever called.
    pub fn new(interval: Duration, reporter: Option<Reporter>) -> Progress {
        // Due-ness is computed from the clock when asked (a vDSO call), not kept by a timer
        // thread: a run pays for no thread it does not need.
        let interval = if reporter.is_some() {
            interval
        } else {
            Duration::ZERO
        };
        Progress {
            items: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            total_items: AtomicU64::new(0),
            total_bytes: AtomicU64::new(0),
            start: Instant::now(),
            interval,
            seen_tick: AtomicU64::new(0),
            reporter,
        }
    }

    /// Counters that never report.
    pub fn silent() -> Progress {
        Progress::new(Duration::ZERO, None)
    }

    /// Add to the counters (called by workers).
    pub fn add(&self, items: u64, bytes: u64) {
        self.items.fetch_add(items, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// True once per elapsed interval (called by the rank's main thread).
    pub fn due(&self) -> bool {
        if self.interval.is_zero() {
            return false;
        }
        let now = (self.start.elapsed().as_nanos() / self.interval.as_nanos()) as u64;
        self.seen_tick.swap(now, Ordering::Relaxed) != now
    }

    /// Time since these counters were made.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Hand sums over all ranks that the caller gathered itself (collective work outside a
    /// queue run, e.g. after each wave of a loop of collectives, when [`Progress::due`]) to the
    /// reporter, with these counters' totals and elapsed time. Without a reporter (ranks other
    /// than 0, silent counters) nothing happens.
    pub fn report_sums(&self, items: u64, bytes: u64, errors: u64) {
        let Some(reporter) = &self.reporter else {
            return;
        };
        reporter(&Report {
            items,
            bytes,
            errors,
            total_items: self.total_items.load(Ordering::Relaxed),
            total_bytes: self.total_bytes.load(Ordering::Relaxed),
            elapsed: self.elapsed(),
        });
    }

    /// This rank's counters (items, bytes, errors), as sent to rank 0's [`ProgressBoard`].
    pub(crate) fn snapshot(&self) -> [u64; 3] {
        [&self.items, &self.bytes, &self.errors].map(|a| a.load(Ordering::Relaxed))
    }
}

/// Rank 0's view of every rank's latest counters.
pub(crate) struct ProgressBoard {
    latest: Vec<[u64; 3]>,
    received_remote: u64,
}

impl ProgressBoard {
    pub(crate) fn new(size: usize) -> ProgressBoard {
        ProgressBoard {
            latest: vec![[0; 3]; size],
            received_remote: 0,
        }
    }

    /// Rank `src`'s latest counters (items, bytes, errors).
    pub(crate) fn update(&mut self, src: usize, counts: [u64; 3]) {
        if src != 0 {
            self.received_remote += 1;
        }
        self.latest[src] = counts;
    }

    /// Progress messages received from ranks other than 0.
    pub(crate) fn received_remote(&self) -> u64 {
        self.received_remote
    }

    pub(crate) fn report(&self, p: &Progress) {
        let sum = |i: usize| self.latest.iter().map(|v| v[i]).sum();
        p.report_sums(sum(0), sum(1), sum(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_as_people_write_them() {
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(3 << 30), "3.000 GiB");
        assert_eq!(human_duration(7300.0), "2 h 1 min");
    }
}
