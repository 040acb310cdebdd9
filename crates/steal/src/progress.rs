//! Progress of long collective work: per-rank atomic counters, summed on rank 0, drawn by a
//! timer task of the progress runtime.
//!
//! Workers bump the counters of a [`Progress`]; while a [`crate::queue::run`] is under way each
//! rank sends a snapshot to rank 0 every interval (piggy-backed on the queue's polling loop, never
//! a blocking collective), and rank 0 keeps the latest of each. The timer and the drawing are not
//! the ranks' business: once the first interval has passed, rank 0 starts a task on the progress
//! [`runtime`] (tokio, current-thread, on a thread of its own) that hands the sums to the
//! progress's reporter every interval, and once more when the counters are dropped (the final
//! rates). A run that ends within its first interval never starts that runtime. The library
//! only computes; the binary decides what a user sees (its one progress line is the tools'
//! crate's `cli::progress_line`).
//!
//! A run with a live status ([`crate::status`]) attaches rank 0's counters of each phase to
//! it ([`Progress::with_status`]): the status reads them live. Every rank then also measures
//! its idle time in queue runs ([`Progress::tracking_idle`]) and sends it with its snapshot.

use std::future::Future;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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

/// The reporter a binary installs: called on rank 0 with the global sums (on the progress
/// runtime's thread, or on the rank's own when that runtime could not start).
pub type Reporter = Box<dyn Fn(&Report) + Send + Sync>;

/// The progress runtime: a current-thread tokio runtime (timers and sockets) on a thread of
/// its own, started by the first call. Progress timers run on it, and so do the live status's
/// tasks (its server and its file, [`crate::status`]). `None` when it could not be started (no thread left): progress is
/// then drawn by the ranks' own polling, as before there was a runtime.
pub fn runtime() -> Option<&'static tokio::runtime::Handle> {
    static RUNTIME: OnceLock<Option<tokio::runtime::Handle>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            RUNTIME_STARTS.fetch_add(1, Ordering::Relaxed);
            // I/O for the status server's sockets: an epoll descriptor, no thread.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .enable_io()
                .build()
                .ok()?;
            let handle = rt.handle().clone();
            // The thread lives as long as the process: a current-thread runtime runs its tasks
            // only inside `block_on`, here on a future that never ends.
            std::thread::Builder::new()
                .name("mfu-progress".into())
                .spawn(move || rt.block_on(std::future::pending::<()>()))
                .ok()?;
            Some(handle)
        })
        .as_ref()
}

/// Times the progress [`runtime`] was started in this process (0 or 1): a run that ended
/// within its first progress interval (or without progress) never started it.
pub fn runtime_starts() -> u64 {
    RUNTIME_STARTS.load(Ordering::Relaxed)
}

static RUNTIME_STARTS: AtomicU64 = AtomicU64::new(0);

/// Run `task` on the progress [`runtime`] (starting it) and wait for its result; `None` when the
/// runtime could not start.
pub(crate) fn on_runtime<T: Send + 'static>(
    task: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        let _ = tx.send(task.await);
    });
    rx.recv().ok()
}

/// The counters of a [`Progress`], shared with its timer task.
pub struct Counters {
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
    /// Rank 0: the latest (items, bytes, errors) summed over the other ranks.
    remote: [AtomicU64; 3],
    /// Sums over all ranks handed over by [`Progress::report_sums`], which then replace
    /// `remote` plus this rank's counters.
    gathered: [AtomicU64; 3],
    has_gathered: AtomicBool,
    /// The (items, bytes, errors) of the last line the timer drew.
    drawn: Mutex<Option<[u64; 3]>>,
    start: Instant,
    /// This rank's idle time in closed intervals, nanoseconds (measured only when tracking).
    idle_ns: AtomicU64,
    /// Since when this rank has been idle, nanoseconds after `start`; [`NOT_IDLE`] when busy.
    idle_since: AtomicU64,
    /// Rank 0: the latest idle time of every rank, nanoseconds, by rank (its own is read live).
    remote_idle: Mutex<Vec<u64>>,
}

/// `Counters::idle_since` of a rank that is busy.
const NOT_IDLE: u64 = u64::MAX;

impl Counters {
    /// Hand the sums as they stand to `reporter`, unless `only_if_new` and the last line drawn
    /// showed the same counts (a last line that says nothing new would show a rate of 0 now).
    fn draw(&self, reporter: &Reporter, only_if_new: bool) {
        let r = self.report();
        let counts = Some([r.items, r.bytes, r.errors]);
        if std::mem::replace(&mut *lock(&self.drawn), counts) == counts && only_if_new {
            return;
        }
        reporter(&r);
    }

    /// This rank's idle time so far, nanoseconds (the open interval included).
    fn idle_now(&self) -> u64 {
        let closed = self.idle_ns.load(Ordering::Relaxed);
        match self.idle_since.load(Ordering::Relaxed) {
            NOT_IDLE => closed,
            since => closed + (self.start.elapsed().as_nanos() as u64).saturating_sub(since),
        }
    }

    /// Rank 0: the idle time of each of `ranks` ranks so far, nanoseconds, by rank (0 for a
    /// rank that has sent none yet).
    pub(crate) fn idle_by_rank(&self, ranks: usize) -> Vec<u64> {
        let mut idle = lock(&self.remote_idle).clone();
        idle.resize(ranks.max(1), 0);
        idle[0] = self.idle_now();
        idle
    }

    /// The sums as they stand.
    pub(crate) fn report(&self) -> Report {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let [items, bytes, errors] = if self.has_gathered.load(Ordering::Acquire) {
            self.gathered.each_ref().map(load)
        } else {
            let mine = [&self.items, &self.bytes, &self.errors].map(load);
            let remote = self.remote.each_ref().map(load);
            [0, 1, 2].map(|i| mine[i] + remote[i])
        };
        Report {
            items,
            bytes,
            errors,
            total_items: load(&self.total_items),
            total_bytes: load(&self.total_bytes),
            elapsed: self.start.elapsed(),
        }
    }
}

/// How rank 0's sums are drawn.
enum Drawing {
    /// Not yet: the first interval has not passed.
    Idle,
    /// By this task of the progress runtime, every interval.
    Timer(tokio::task::JoinHandle<()>),
    /// By the rank's own polling ([`Progress::due`]): the runtime could not start.
    Inline,
}

/// Per-rank progress counters of one phase of work. Shared by reference with the workers; its
/// counters are reached through `Deref` (`progress.items`, ...).
pub struct Progress {
    counters: Arc<Counters>,
    /// Reporting interval (zero: never due).
    interval: Duration,
    /// The last interval number [`Progress::due`] answered for.
    seen_tick: AtomicU64,
    reporter: Option<Arc<Reporter>>,
    /// Rank 0's drawing, started once the first interval has passed.
    drawing: Mutex<Drawing>,
    /// `drawing` left `Idle` (checked without the lock in the polling loop).
    started: AtomicBool,
    /// `drawing` is `Inline` (checked without the lock in the polling loop).
    inline: AtomicBool,
    /// Measure idle time in queue runs ([`Progress::set_idle`]): only for a live status.
    track_idle: bool,
    /// Rank 0: the live status these counters are the current phase of.
    status: Option<Arc<crate::status::Live>>,
}

impl Deref for Progress {
    type Target = Counters;
    fn deref(&self) -> &Counters {
        &self.counters
    }
}

impl Progress {
    /// Counters that report every `interval` (none if `interval` is zero or `reporter` is `None`).
    /// Only rank 0's reporter is ever called.
    pub fn new(interval: Duration, reporter: Option<Reporter>) -> Progress {
        // No timer runs before the first interval has passed: whether it has is read from the
        // clock when the rank polls (a vDSO call), so a short run pays for no thread.
        let interval = if reporter.is_some() {
            interval
        } else {
            Duration::ZERO
        };
        let zero = || AtomicU64::new(0);
        Progress {
            counters: Arc::new(Counters {
                items: zero(),
                bytes: zero(),
                errors: zero(),
                total_items: zero(),
                total_bytes: zero(),
                remote: [zero(), zero(), zero()],
                gathered: [zero(), zero(), zero()],
                has_gathered: AtomicBool::new(false),
                drawn: Mutex::new(None),
                start: Instant::now(),
                idle_ns: zero(),
                idle_since: AtomicU64::new(NOT_IDLE),
                remote_idle: Mutex::new(Vec::new()),
            }),
            interval,
            seen_tick: zero(),
            reporter: reporter.map(Arc::new),
            drawing: Mutex::new(Drawing::Idle),
            started: AtomicBool::new(false),
            inline: AtomicBool::new(false),
            track_idle: false,
            status: None,
        }
    }

    /// These counters as the current phase of the live status `live` (rank 0), called
    /// `phase` (the verb of progress lines, `Copied`): the status reads them live from now on
    /// and keeps their final sums when they are dropped. Idle time is measured.
    pub fn with_status(mut self, live: Arc<crate::status::Live>, phase: &str) -> Progress {
        live.begin_phase(phase, Arc::clone(&self.counters));
        self.status = Some(live);
        self.track_idle = true;
        self
    }

    /// Measure this rank's idle time in queue runs and send it with the snapshots (the ranks
    /// other than 0 of a run with a live status).
    pub fn tracking_idle(mut self) -> Progress {
        self.track_idle = true;
        self
    }

    /// Counters that never report.
    pub fn silent() -> Progress {
        Progress::new(Duration::ZERO, None)
    }

    /// The counters of a rank other than 0 while rank 0 reports every `interval`: they draw
    /// nothing, and a queue run sends their snapshot to rank 0 every `interval`, so that rank
    /// 0's lines sum the work of every rank.
    pub fn sending(interval: Duration) -> Progress {
        let mut p = Progress::new(Duration::ZERO, None);
        p.interval = interval;
        p
    }

    /// Add to the counters (called by workers).
    pub fn add(&self, items: u64, bytes: u64) {
        self.items.fetch_add(items, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// True once per elapsed interval (called by the rank's main thread): time for a rank to
    /// send its snapshot to rank 0.
    pub fn due(&self) -> bool {
        if self.interval.is_zero() {
            return false;
        }
        let now = (self.start.elapsed().as_nanos() / self.interval.as_nanos()) as u64;
        self.seen_tick.swap(now, Ordering::Relaxed) != now
    }

    /// Whether these are a rank's counters that send snapshots to rank 0 ([`Progress::sending`]).
    pub(crate) fn sends(&self) -> bool {
        self.reporter.is_none() && !self.interval.is_zero()
    }

    /// Time since these counters were made.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Hand sums over all ranks that the caller gathered itself (collective work outside a
    /// queue run, e.g. after each wave of a loop of collectives) to the drawing, with these
    /// counters' totals and elapsed time. Cheap: call it as often as sums are known. Without a
    /// reporter or a live status (ranks other than 0, silent counters) nothing happens.
    pub fn report_sums(&self, items: u64, bytes: u64, errors: u64) {
        if self.reporter.is_none() && self.status.is_none() {
            return;
        }
        for (a, v) in self.gathered.iter().zip([items, bytes, errors]) {
            a.store(v, Ordering::Relaxed);
        }
        self.has_gathered.store(true, Ordering::Release);
        self.poll();
    }

    /// Rank 0's part in a polling loop: start the drawing once the first interval has passed
    /// (or, without a runtime, draw when due). Cheap before and after.
    pub(crate) fn poll(&self) {
        let Some(reporter) = &self.reporter else {
            return;
        };
        if self.interval.is_zero() {
            return;
        }
        if !self.started.load(Ordering::Relaxed) {
            if self.start.elapsed() < self.interval {
                return;
            }
            self.start_drawing();
        }
        if self.inline.load(Ordering::Relaxed) && self.due() {
            reporter(&self.counters.report());
        }
    }

    /// Start the timer task that draws the sums every interval, its first line at once.
    fn start_drawing(&self) {
        let mut drawing = lock(&self.drawing);
        if !matches!(*drawing, Drawing::Idle) {
            return;
        }
        self.started.store(true, Ordering::Relaxed);
        let (Some(reporter), Some(rt)) = (self.reporter.clone(), runtime()) else {
            *drawing = Drawing::Inline;
            self.inline.store(true, Ordering::Relaxed);
            return;
        };
        let counters = Arc::clone(&self.counters);
        let interval = self.interval;
        *drawing = Drawing::Timer(rt.spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            // A late tick is not made up for: one line per interval at most.
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                counters.draw(&reporter, false);
            }
        }));
    }

    /// Rank 0: the latest (items, bytes, errors) of the other ranks, summed, and the idle
    /// time of every rank by rank.
    pub(crate) fn set_remote(&self, sums: [u64; 3], idle: &[u64]) {
        for (a, v) in self.remote.iter().zip(sums) {
            a.store(v, Ordering::Relaxed);
        }
        if self.track_idle {
            let mut kept = lock(&self.remote_idle);
            kept.clear();
            kept.extend_from_slice(idle);
        }
    }

    /// This rank's counters (items, bytes, errors, idle nanoseconds), as sent to rank 0's
    /// [`ProgressBoard`].
    pub(crate) fn snapshot(&self) -> [u64; 4] {
        let [items, bytes, errors] =
            [&self.items, &self.bytes, &self.errors].map(|a| a.load(Ordering::Relaxed));
        [items, bytes, errors, self.idle_now()]
    }

    /// Open (`idle`) or close this rank's idle interval (the queue's main thread, each turn
    /// of its loop). Nothing unless idle time is tracked; a clock read only when it changes.
    pub(crate) fn set_idle(&self, idle: bool) {
        if !self.track_idle {
            return;
        }
        let since = self.idle_since.load(Ordering::Relaxed);
        let now = || self.start.elapsed().as_nanos() as u64;
        match (idle, since) {
            (true, NOT_IDLE) => self.idle_since.store(now(), Ordering::Relaxed),
            (false, NOT_IDLE) | (true, _) => {}
            (false, since) => {
                self.idle_ns
                    .fetch_add(now().saturating_sub(since), Ordering::Relaxed);
                self.idle_since.store(NOT_IDLE, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for Progress {
    /// A phase that drew progress ends with one last line, the final sums and rates, drawn by
    /// the timer's task once it has stopped (so that no line of this phase follows it); not
    /// when the timer's last line showed them already.
    fn drop(&mut self) {
        if let Some(live) = &self.status {
            live.end_phase(&self.counters);
        }
        let drawing = std::mem::replace(&mut *lock(&self.drawing), Drawing::Idle);
        let Some(reporter) = self.reporter.clone() else {
            return;
        };
        match drawing {
            Drawing::Idle => {}
            Drawing::Inline => reporter(&self.counters.report()),
            Drawing::Timer(timer) => {
                let counters = Arc::clone(&self.counters);
                on_runtime(async move {
                    timer.abort();
                    let _ = timer.await;
                    counters.draw(&reporter, true);
                });
            }
        }
    }
}

/// `m` locked, even if a reporter panicked while holding it (the state stays usable).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Rank 0's view of every rank's latest counters (items, bytes, errors, idle nanoseconds).
pub(crate) struct ProgressBoard {
    latest: Vec<[u64; 4]>,
    received_remote: u64,
}

impl ProgressBoard {
    pub(crate) fn new(size: usize) -> ProgressBoard {
        ProgressBoard {
            latest: vec![[0; 4]; size],
            received_remote: 0,
        }
    }

    /// Keep rank `src`'s latest counters (items, bytes, errors, idle nanoseconds); not 0's,
    /// which rank 0 reads live.
    pub(crate) fn update(&mut self, src: usize, counts: [u64; 4]) {
        self.received_remote += 1;
        self.latest[src] = counts;
    }

    /// Progress messages received from ranks other than 0.
    pub(crate) fn received_remote(&self) -> u64 {
        self.received_remote
    }

    /// Hand the other ranks' sums to rank 0's counters, for its drawing.
    pub(crate) fn publish(&self, p: &Progress) {
        let idle: Vec<u64> = self.latest.iter().map(|v| v[3]).collect();
        p.set_remote(
            [0, 1, 2].map(|i| self.latest.iter().map(|v| v[i]).sum()),
            &idle,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_as_people_write_them() {
        assert_eq!(human_duration(7300.0), "2 h 1 min");
    }
}
