//! The writers' brake: a run whose outputs must be synced before their marks (a checkpoint
//! with [`super::Durable`] outputs) never gets far ahead of its disk.
//!
//! Why: a tool writes into the page cache much faster than a disk takes the data (this
//! machine: 2 GB/s against 0.35 GB/s). Without a brake, a `tar -c` wrote its whole archive
//! in the first half of its run and spent the second half in the final `fsync`; the marks
//! follow the syncs, so a kill -9 at 75% of the run found a third of the archive marked and
//! the rerun wrote the rest again (1.7 times the work). With the brake, the marks trail the
//! work by about one flush interval on any disk, and the run takes no longer: the data has
//! to reach the disk before the run ends in either case.
//!
//! How: while the flusher syncs the outputs, a mark made more than a set time after the sync
//! began waits for it to end, provided the process wrote more than [`AHEAD_BYTES`] since the
//! sync began (it is running ahead of the disk). A sync slow for other reasons (a busy
//! server's latency) with little written meanwhile holds nobody.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Bytes the process may write while a sync of its outputs is in progress before its marks
/// wait for the sync (when the sync has also lasted its allowance): 64 MiB, a fraction of a
/// second of a disk's writeback.
pub(super) const AHEAD_BYTES: u64 = 64 << 20;

/// No brake engaged (see [`Brake::at`]).
const NONE: u64 = u64::MAX;

/// One checkpoint's brake (each rank's flusher has its own).
pub(super) struct Brake {
    /// When the brake was made: [`Brake::at`] counts from it.
    made: Instant,
    /// Nanoseconds after `made` past which a mark may wait for the sync in progress;
    /// [`NONE`] when no sync is in progress. Read on every mark (the fast path).
    at: AtomicU64,
    state: Mutex<State>,
    /// Signalled when a sync ends.
    ended: Condvar,
    /// Bytes the process has written so far ([`written_bytes`]; a counter in tests).
    written: fn() -> Option<u64>,
}

#[derive(Default)]
struct State {
    /// Syncs begun so far: the one a waiting mark waits for.
    sync: u64,
    /// A sync is in progress.
    syncing: bool,
    /// Bytes the process had written (`wchar`) when the sync began.
    written_then: Option<u64>,
    /// Whether this sync holds marks, decided by the first mark past its allowance.
    holds: Option<bool>,
}

impl Brake {
    pub(super) fn new() -> Brake {
        Brake::counting(written_bytes)
    }

    /// A brake that counts bytes written with `written`.
    fn counting(written: fn() -> Option<u64>) -> Brake {
        Brake {
            made: Instant::now(),
            at: AtomicU64::new(NONE),
            state: Mutex::new(State::default()),
            ended: Condvar::new(),
            written,
        }
    }

    /// The flusher begins syncing the outputs: marks made after `allowed` from now may wait
    /// for [`Brake::release`].
    pub(super) fn engage(&self, allowed: Duration) {
        let written = (self.written)();
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.sync += 1;
        s.syncing = true;
        s.written_then = written;
        s.holds = None;
        let at = (self.made.elapsed() + allowed).as_nanos();
        self.at
            .store(u64::try_from(at).unwrap_or(NONE - 1), Ordering::SeqCst);
    }

    /// The sync ended: waiting marks go on.
    pub(super) fn release(&self) {
        self.at.store(NONE, Ordering::SeqCst);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.syncing = false;
        drop(s);
        self.ended.notify_all();
    }

    /// Whether a sync is in progress (engaged and not yet released).
    #[cfg(test)]
    pub(super) fn syncing(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).syncing
    }

    /// A mark is being made: wait for the sync in progress if it has lasted its allowance
    /// and the process is running ahead of it. Returns how long it waited.
    pub(super) fn hold(&self) -> Duration {
        let at = self.at.load(Ordering::Relaxed);
        if at == NONE || (self.made.elapsed().as_nanos() as u64) < at {
            return Duration::ZERO;
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !s.syncing {
            return Duration::ZERO;
        }
        let since = s.written_then;
        // Without /proc (no count of bytes written), hold: the bound on lost work is kept.
        let holds = *s
            .holds
            .get_or_insert_with(|| match (since, (self.written)()) {
                (Some(then), Some(now)) => now.saturating_sub(then) > AHEAD_BYTES,
                _ => true,
            });
        if !holds {
            return Duration::ZERO;
        }
        let began = Instant::now();
        let sync = s.sync;
        while s.syncing && s.sync == sync {
            s = self.ended.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        began.elapsed()
    }
}

/// Bytes this process has written through system calls so far (`wchar` of
/// `/proc/self/io`), or `None` where it cannot be read.
fn written_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;

    /// Bytes the marker of [`longest_hold`] "wrote" (a test's own count: the process's
    /// `wchar` also counts the writes of tests running beside it).
    static WRITTEN: AtomicU64 = AtomicU64::new(0);

    fn counted() -> Option<u64> {
        Some(WRITTEN.load(Ordering::SeqCst))
    }

    /// A marker that writes `per_mark` bytes before each mark, every millisecond for 0.6 s,
    /// while the flusher syncs for 300 ms, 30 ms allowed: the longest time a mark waited.
    fn longest_hold(per_mark: u64) -> Duration {
        let brake = Arc::new(Brake::counting(counted));
        let marker = {
            let brake = Arc::clone(&brake);
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut longest = Duration::ZERO;
                while start.elapsed() < Duration::from_millis(600) {
                    WRITTEN.fetch_add(per_mark, Ordering::SeqCst);
                    longest = longest.max(brake.hold());
                    std::thread::sleep(Duration::from_millis(1));
                }
                longest
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        brake.engage(Duration::from_millis(30));
        std::thread::sleep(Duration::from_millis(300));
        brake.release();
        marker.join().unwrap()
    }

    #[test]
    fn a_run_writing_ahead_of_a_slow_sync_waits_for_it_and_a_slow_sync_alone_holds_nobody() {
        // 4 MiB per ms: far ahead of the sync; the marks wait until it ends (~270 ms).
        let held = longest_hold(4 << 20);
        assert!(
            held >= Duration::from_millis(150),
            "a run writing 4 MiB per mark during a 300 ms sync was held {held:?}"
        );
        // 1 KiB per ms: the sync is slow, but not because of this run: nobody waits.
        let held = longest_hold(1 << 10);
        assert!(
            held < Duration::from_millis(50),
            "a run writing little was held {held:?}"
        );
    }

    #[test]
    fn no_sync_in_progress_holds_nobody() {
        let brake = Brake::new();
        assert_eq!(brake.hold(), Duration::ZERO);
        brake.engage(Duration::ZERO);
        brake.release();
        assert_eq!(brake.hold(), Duration::ZERO);
    }

    #[test]
    fn the_count_of_bytes_written_grows_with_writes() {
        let before = written_bytes().expect("/proc/self/io");
        std::fs::File::options()
            .write(true)
            .open("/dev/null")
            .unwrap()
            .write_all(&[0u8; 4096])
            .unwrap();
        assert!(written_bytes().unwrap() >= before + 4096);
    }
}
