//! The live status of a long run, for people and programs watching it: rank 0 serves it over
//! HTTP while the run lasts (`GET /status` as JSON, `GET /metrics` in Prometheus's text format)
//! and rewrites a file with it every interval and once at the end.
//!
//! A [`Live`] holds what the status says: the tool, the phase under way and its counters
//! (rank 0's [`Progress`](crate::progress::Progress) of the phase, read live: see
//! [`Progress::with_status`](crate::progress::Progress::with_status)), the rate over the last
//! interval, each rank's idle time. [`Live::start`] binds the listening socket (before any
//! work: a bind failure is the caller's setup error) and starts the server and the interval's
//! task on the progress [`runtime`]; [`Live::finish`] stops them and
//! writes the file's last state. A run without a live status starts neither.
//!
//! The library computes and serves; what the text says (JSON, Prometheus) is the caller's
//! [`Renderer`]: the binary's `cli::status` in mfu-rs.

use crate::progress::{on_runtime, runtime, Counters, Report};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Under way.
    Running,
    /// Ended having done everything asked.
    Done,
    /// Ended with failed items or an error.
    Failed,
    /// Ended early: stopped by a signal (or the caller's stop flag).
    Stopped,
}

impl State {
    /// `running`, `done`, `failed` or `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Done => "done",
            State::Failed => "failed",
            State::Stopped => "stopped",
        }
    }
}

/// What the status says at one moment. Counts are of the current phase (the last one while
/// none runs), summed over ranks; at the end, the run's own totals.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The tool (`cp`).
    pub tool: String,
    /// Where the run stands.
    pub state: State,
    /// The phase under way, as progress lines name it (`Walked`, `Copied`), or `starting`
    /// before the first.
    pub phase: String,
    /// Ranks of the run.
    pub ranks: usize,
    /// Time since the run started.
    pub elapsed: Duration,
    /// Time since the phase started.
    pub phase_elapsed: Duration,
    /// Items done.
    pub items: u64,
    /// Items expected in all (0 = unknown).
    pub total_items: u64,
    /// Bytes done.
    pub bytes: u64,
    /// Bytes expected in all (0 = unknown).
    pub total_bytes: u64,
    /// Items that failed.
    pub failed: u64,
    /// Items per second over the last interval (the phase's average before one has passed).
    pub items_per_second: f64,
    /// Bytes per second over the last interval (as `items_per_second`).
    pub bytes_per_second: f64,
    /// Items per second since the phase started.
    pub items_per_second_average: f64,
    /// Bytes per second since the phase started.
    pub bytes_per_second_average: f64,
    /// Time left at the average rate, by bytes when their total is known, else by items;
    /// `None` when unknown.
    pub eta: Option<Duration>,
    /// Each rank's time without work in the run's work queues so far, by rank.
    pub idle: Vec<Duration>,
}

/// The two texts a status is served as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object (`GET /status`, the status file).
    Json,
    /// Prometheus's text exposition format (`GET /metrics`).
    Prometheus,
}

/// Writes a [`Snapshot`] as text; the caller's (called on the progress runtime's thread).
pub type Renderer = Box<dyn Fn(&Snapshot, Format) -> String + Send + Sync>;

/// Why a status could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The address could not be resolved or bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address as given.
        addr: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The progress runtime could not start (no thread left).
    #[error("cannot start the status server's thread")]
    Runtime,
}

/// A counts sample of the interval's task, for the rate over the last interval.
#[derive(Clone, Copy, Debug)]
struct Sample {
    phase: u64,
    at: Duration,
    items: u64,
    bytes: u64,
}

/// What the status holds between reads.
struct Shared {
    state: State,
    ranks: usize,
    phase: String,
    /// Counts up with each phase.
    phase_id: u64,
    phase_start: Duration,
    /// The current phase's counters (rank 0's), read live; `None` between phases.
    live: Option<Arc<Counters>>,
    /// The sums of the last phase that ended, shown while no phase runs.
    ended: Report,
    /// Idle nanoseconds of the phases that ended, by rank.
    idle_before: Vec<u64>,
    /// The current phase's idle nanoseconds by rank as last read (kept when it ends).
    idle_now: Vec<u64>,
    /// The two latest samples, oldest first.
    samples: [Option<Sample>; 2],
    /// The run's totals once it ended: items, bytes, failed.
    totals: Option<[u64; 3]>,
}

/// The live status of one run: see the [module](self).
pub struct Live {
    tool: String,
    start: Instant,
    every: Duration,
    file: Option<Vec<u8>>,
    render: Renderer,
    shared: Mutex<Shared>,
    /// The server's and the interval's tasks, stopped by [`Live::finish`].
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The first failure to write the file, told by [`Live::finish`].
    file_error: Mutex<Option<String>>,
    /// Temporary files written so far (their names differ).
    writes: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("tool", &self.tool)
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn per_second(n: u64, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        n as f64 / d.as_secs_f64()
    }
}

impl Live {
    /// The status of a run of `tool`, sampled (and `file` rewritten) every `every`; `file` is
    /// a path (bytes). Nothing runs before [`Live::start`].
    pub fn new(tool: &str, every: Duration, file: Option<Vec<u8>>, render: Renderer) -> Arc<Live> {
        Arc::new(Live {
            tool: tool.to_string(),
            start: Instant::now(),
            every: every.max(Duration::from_millis(1)),
            file,
            render,
            shared: Mutex::new(Shared {
                state: State::Running,
                ranks: 1,
                phase: "starting".into(),
                phase_id: 0,
                phase_start: Duration::ZERO,
                live: None,
                ended: Report::default(),
                idle_before: Vec::new(),
                idle_now: Vec::new(),
                samples: [None, None],
                totals: None,
            }),
            tasks: Mutex::new(Vec::new()),
            file_error: Mutex::new(None),
            writes: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Start serving (rank 0, before any work) a run of `ranks` ranks: bind `listen` (an
    /// address such as `127.0.0.1:9464` or `[::1]:0`) when given, start the progress runtime,
    /// the server and the interval's task (which writes the file at once). Returns the bound
    /// address (the port chosen for port 0).
    pub fn start(
        self: &Arc<Self>,
        ranks: usize,
        listen: Option<&str>,
    ) -> Result<Option<SocketAddr>, StartError> {
        lock(&self.shared).ranks = ranks.max(1);
        let listener = match listen {
            None => None,
            Some(addr) => {
                let bound = std::net::TcpListener::bind(addr)
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .map_err(|source| StartError::Listen {
                        addr: addr.to_string(),
                        source,
                    })?;
                Some(bound)
            }
        };
        let bound = listener.as_ref().and_then(|l| l.local_addr().ok());
        let rt = runtime().ok_or(StartError::Runtime)?;
        let mut tasks = lock(&self.tasks);
        if let Some(listener) = listener {
            let me = Arc::clone(self);
            // Made a tokio listener on the runtime (it registers with the runtime's reactor).
            let addr = listen.unwrap_or_default().to_string();
            let listener = on_runtime(async move { tokio::net::TcpListener::from_std(listener) })
                .ok_or(StartError::Runtime)?
                .map_err(|source| StartError::Listen { addr, source })?;
            tasks.push(rt.spawn(crate::status_server::serve(listener, me)));
        }
        let me = Arc::clone(self);
        tasks.push(rt.spawn(async move {
            let mut ticks = tokio::time::interval(me.every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                me.sample();
                me.write_file();
            }
        }));
        Ok(bound)
    }

    /// The phase `name` begins, its counters read live from now on (rank 0's).
    pub(crate) fn begin_phase(&self, name: &str, counters: Arc<Counters>) {
        let now = self.start.elapsed();
        let mut s = lock(&self.shared);
        s.phase = name.to_string();
        s.phase_id += 1;
        s.phase_start = now;
        s.live = Some(counters);
        s.idle_now.clear();
    }

    /// The phase whose counters these are ended: keep its final sums and idle time.
    pub(crate) fn end_phase(&self, counters: &Arc<Counters>) {
        let mut s = lock(&self.shared);
        if !s.live.as_ref().is_some_and(|c| Arc::ptr_eq(c, counters)) {
            return;
        }
        s.ended = counters.report();
        let idle = counters.idle_by_rank(s.ranks);
        let before = &mut s.idle_before;
        before.resize(idle.len().max(before.len()), 0);
        for (b, i) in before.iter_mut().zip(&idle) {
            *b += i;
        }
        s.idle_now.clear();
        s.live = None;
    }

    /// Keep a sample of the counts, for the rate over the last interval.
    fn sample(&self) {
        let at = self.start.elapsed();
        let mut s = lock(&self.shared);
        let r = match &s.live {
            Some(c) => c.report(),
            None => s.ended.clone(),
        };
        let new = Sample {
            phase: s.phase_id,
            at,
            items: r.items,
            bytes: r.bytes,
        };
        s.samples = [s.samples[1], Some(new)];
    }

    /// What the status says now.
    pub fn snapshot(&self) -> Snapshot {
        let elapsed = self.start.elapsed();
        let mut s = lock(&self.shared);
        let ranks = s.ranks;
        let (report, phase_elapsed) = match s.live.clone() {
            Some(c) => {
                let r = c.report();
                s.idle_now = c.idle_by_rank(ranks);
                (r, elapsed.saturating_sub(s.phase_start))
            }
            None => (s.ended.clone(), s.ended.elapsed),
        };
        let (mut items, mut bytes, mut failed) = (report.items, report.bytes, report.errors);
        let (mut total_items, mut total_bytes) = (report.total_items, report.total_bytes);
        // At the end, the run's own totals: what was done is all there was.
        if let Some([i, b, f]) = s.totals {
            (items, bytes, failed, total_items, total_bytes) = (i, b, f, i, b);
        }
        let items_avg = per_second(items, phase_elapsed);
        let bytes_avg = per_second(bytes, phase_elapsed);
        // Over the last interval: from the latest sample that is about an interval old.
        let since = s
            .samples
            .iter()
            .rev()
            .flatten()
            .filter(|x| x.phase == s.phase_id && s.live.is_some())
            .find(|x| elapsed.saturating_sub(x.at) >= self.every.mul_f64(0.9))
            .copied();
        let (items_now, bytes_now) = match since {
            Some(x) => {
                let d = elapsed.saturating_sub(x.at);
                (
                    per_second(items.saturating_sub(x.items), d),
                    per_second(bytes.saturating_sub(x.bytes), d),
                )
            }
            None => (items_avg, bytes_avg),
        };
        let left = |done: u64, total: u64, rate: f64| {
            (total > 0 && done > 0 && rate > 0.0)
                .then(|| Duration::from_secs_f64(total.saturating_sub(done) as f64 / rate))
        };
        let eta = if s.state != State::Running {
            None
        } else if total_bytes > 0 {
            left(bytes, total_bytes, bytes_avg)
        } else {
            left(items, total_items, items_avg)
        };
        let mut idle = s.idle_before.clone();
        idle.resize(ranks.max(idle.len()), 0);
        for (total, now) in idle.iter_mut().zip(&s.idle_now) {
            *total += now;
        }
        Snapshot {
            tool: self.tool.clone(),
            state: s.state,
            phase: s.phase.clone(),
            ranks,
            elapsed,
            phase_elapsed,
            items,
            total_items,
            bytes,
            total_bytes,
            failed,
            items_per_second: items_now,
            bytes_per_second: bytes_now,
            items_per_second_average: items_avg,
            bytes_per_second_average: bytes_avg,
            eta,
            idle: idle.into_iter().map(Duration::from_nanos).collect(),
        }
    }

    /// The status now as `format`.
    pub fn render(&self, format: Format) -> String {
        (self.render)(&self.snapshot(), format)
    }

    /// Rewrite the status file, if any, atomically; keep the first failure for
    /// [`Live::finish`].
    fn write_file(&self) {
        let Some(path) = &self.file else { return };
        let text = self.render(Format::Json);
        let n = self
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Err(e) = write_atomically(path, text.as_bytes(), n) {
            let mut kept = lock(&self.file_error);
            if kept.is_none() {
                *kept = Some(e);
            }
        }
    }

    /// The run ended in `state` with these totals (summed over ranks): stop the server and the
    /// interval's task, and write the file's last state. Returns the first failure to write
    /// the file (naming it and the operation), if any.
    pub fn finish(&self, state: State, items: u64, bytes: u64, failed: u64) -> Result<(), String> {
        let tasks = std::mem::take(&mut *lock(&self.tasks));
        if !tasks.is_empty() {
            // Stopped and waited for, so that no write of theirs follows the last one.
            on_runtime(async move {
                for t in tasks {
                    t.abort();
                    let _ = t.await;
                }
            });
        }
        {
            let mut s = lock(&self.shared);
            if let Some(c) = s.live.take() {
                s.ended = c.report();
            }
            s.state = state;
            s.totals = Some([items, bytes, failed]);
        }
        self.write_file();
        match lock(&self.file_error).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Write `bytes` to `path` through a temporary in the same directory (created anew, never
/// an existing file) renamed over it: a reader sees the old text or the new one, whole.
/// `n` makes the temporary's name unique in this process.
fn write_atomically(path: &[u8], bytes: &[u8], n: u64) -> Result<(), String> {
    use std::ffi::OsStr;
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    let target = std::path::Path::new(OsStr::from_bytes(path));
    let shown = target.display();
    let name = target
        .file_name()
        .ok_or_else(|| format!("write {shown}: not a file name"))?;
    let mut tmp_name = b".".to_vec();
    tmp_name.extend_from_slice(name.as_bytes());
    tmp_name.extend_from_slice(format!(".mfu-status.{}.{n}", std::process::id()).as_bytes());
    let tmp = target.with_file_name(OsStr::from_bytes(&tmp_name));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("write {}: {e}", tmp.display()));
    }
    std::fs::rename(&tmp, target).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("rename {} to {shown}: {e}", tmp.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_like() -> Renderer {
        Box::new(|s: &Snapshot, _| format!("{} {} {}", s.state.as_str(), s.phase, s.items))
    }

    #[test]
    fn a_status_starts_with_no_phase_and_ends_with_the_totals_given() {
        let live = Live::new("cp", Duration::from_secs(10), None, json_like());
        let s = live.snapshot();
        assert_eq!(
            (s.phase.as_str(), s.items, s.state),
            ("starting", 0, State::Running)
        );
        let p = crate::progress::Progress::silent().with_status(Arc::clone(&live), "Copied");
        p.add(3, 300);
        let s = live.snapshot();
        assert_eq!((s.phase.as_str(), s.items, s.bytes), ("Copied", 3, 300));
        drop(p);
        assert_eq!(live.snapshot().items, 3, "the last phase's sums stay");
        live.finish(State::Done, 5, 500, 0).unwrap();
        assert_eq!(live.render(Format::Json), "done Copied 5");
    }

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.json");
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes().to_vec();
        for n in 0..3 {
            write_atomically(&bytes, format!("{n}").as_bytes(), n).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "2");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let missing = dir.path().join("no/such/dir/status.json");
        let e = write_atomically(missing.as_os_str().as_bytes(), b"x", 0).unwrap_err();
        assert!(e.starts_with("write ") && e.contains("no/such/dir"), "{e}");
    }

    #[test]
    fn a_used_port_is_a_start_error_naming_the_address() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let live = Live::new("cp", Duration::from_secs(10), None, json_like());
        let e = live.start(1, Some(&addr)).unwrap_err();
        assert!(e.to_string().contains(&addr), "{e}");
    }
}
