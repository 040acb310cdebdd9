//! Distributed work stealing with termination detection.
//!
//! Each rank keeps a deque of work items. Its main thread (the only one that talks to the
//! [`Comm`]) hands batches to rayon workers, answers steal requests with half of its queued items,
//! and, when it runs dry, asks a random victim for work. Nothing in the polling loop blocks on a
//! send (the libcircle deadlock), so a rank always answers its peers. A rank that is alone
//! leaves the work to rayon's own stealing (`alone.rs`).
//!
//! An idle rank that is refused waits twice as long before each next request, up to a cap that
//! grows with the number of ranks, and sleeps in between until a message wakes it (the token, a
//! peer's request, the end): with many more ranks than cores (`--ranks 64` on 2), idle ranks
//! would otherwise flood the busy ones with requests that are almost never served.
//!
//! Termination is Safra's algorithm (EWD998): each rank counts work messages sent minus received
//! and turns black when it receives one; a token circulates from rank 0 while ranks are idle and
//! sums the counts. When the token comes back white with a zero sum to an idle rank 0, no work
//! exists anywhere and none is in flight. Steal requests and empty replies carry no work and are
//! not counted; a closing non-blocking barrier ensures each of them has been answered before
//! [`run`] returns, so no message is left behind for the next phase.

use crate::comm::{Comm, CommExt, ReduceOp, Tag};
use crate::progress::{Progress, ProgressBoard};
use crate::typed;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const TAG_REQUEST: Tag = 101;
const TAG_WORK: Tag = 102;
const TAG_NONE: Tag = 103;
const TAG_TOKEN: Tag = 104;
const TAG_DONE: Tag = 105;
const TAG_PROGRESS: Tag = 106;
/// Work sent unasked to a rank refused earlier (counted like a reply with work).
const TAG_GIFT: Tag = 107;

mod alone;

/// Longest sleep of a rank's main thread while its workers run and no message wakes it: how
/// late it may notice the stop flag or a progress tick.
const SLEEP_MAX: Duration = Duration::from_millis(20);

/// Longest wait for a batch to end while peers may be asking for work (200 µs), with a
/// backend that cannot wake this rank when a message arrives (MPI; see [`Comm::park`]).
const PEER_POLL: Duration = Duration::from_micros(200);

/// Longest wait in the drain after termination for a message or the closing barrier, with a
/// backend that wakes the rank when either comes (thread ranks): a safety net only.
const DRAIN_WAIT: Duration = Duration::from_millis(2);

/// Longest nap of an idle rank between looks for a message, with a backend that cannot wake it
/// when one arrives (500 µs; the naps grow from 10 µs to this while nothing happens).
const IDLE_POLL: Duration = Duration::from_micros(500);

/// Wait before the next steal request after the first refusal (50 µs); it doubles with each
/// refusal in a row, up to [`steal_backoff_cap`].
const STEAL_BACKOFF_MIN: Duration = Duration::from_micros(50);

/// The longest wait between steal requests of a rank that keeps being refused: 500 µs per rank,
/// from 1 ms to 50 ms. Idle ranks then send at most about `size / cap` = 2 requests per
/// millisecond in all, however many they are, so the ranks that have work spend little
/// time refusing. Work that turns up late still reaches waiting ranks soon: a rank gives some
/// unasked to the ranks it refused (see `feed_hungry`).
fn steal_backoff_cap(size: usize) -> Duration {
    (Duration::from_micros(500) * size as u32)
        .clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// Bytes of encoded items in one steal reply, at most (64 MiB; the rest stays for later thieves).
const STEAL_REPLY_BYTES: usize = 64 << 20;

/// Test seam: with `MFU_RS_TEST_ITEM_DELAY_MS=N` in the environment every work item waits N ms
/// before it is processed, so that the signal tests can interrupt any tool in the middle of its
/// work on a small tree. Read once; without the variable it costs nothing per item.
pub const ITEM_DELAY_VAR: &str = "MFU_RS_TEST_ITEM_DELAY_MS";

fn test_item_delay() -> Option<Duration> {
    static DELAY: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *DELAY.get_or_init(|| {
        std::env::var(ITEM_DELAY_VAR)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis)
    })
}

/// A unit of work that can travel to another rank: any type that derives serde's `Serialize`
/// and `Deserialize` (in the [`typed`] encoding). Derive them and write nothing else.
pub trait WorkItem: Serialize + DeserializeOwned + Send + 'static {}

impl<T: Serialize + DeserializeOwned + Send + 'static> WorkItem for T {}

/// How [`run`] behaves.
pub struct Config<'a> {
    /// Items handed to a worker at once, at most. Small batches keep items stealable. (A rank
    /// that is alone hands out no batches: its workers share adaptively, see `alone.rs`.)
    pub max_batch: usize,
    /// Batches in flight on this rank's workers at once; 0 means twice the rayon pool size.
    /// (Not used by a rank that is alone.)
    pub max_inflight: usize,
    /// Seed of the victim choice (combined with the rank).
    pub seed: u64,
    /// When set to true (by a signal handler), ranks drop queued items and finish what is in flight.
    pub stop: Option<&'a AtomicBool>,
    /// Progress counters of this rank, reported to rank 0 while the queue runs.
    pub progress: Option<&'a Progress>,
}

impl Default for Config<'_> {
    fn default() -> Self {
        Config {
            max_batch: 16,
            max_inflight: 0,
            seed: 0x5eed,
            stop: None,
            progress: None,
        }
    }
}

/// What a [`run`] did, summed over all ranks unless noted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Items processed by this rank.
    pub processed_here: u64,
    /// Items processed by all ranks.
    pub processed: u64,
    /// Items dropped unprocessed because of a stop request.
    pub dropped: u64,
    /// Successful steals (work messages).
    pub steals: u64,
    /// True on every rank if any rank was asked to stop.
    pub interrupted: bool,
}

/// Safra's token.
#[derive(Serialize, serde::Deserialize)]
struct Token {
    black: bool,
    count: i64,
}

/// Process `initial` (the items this rank starts with) and everything they spawn, on all ranks.
///
/// `work(item, spawned)` runs on a rayon worker; it pushes new items onto `spawned`. Every item is
/// processed exactly once, on some rank. Collective: every rank calls `run`, each with its own
/// (possibly empty) `initial`.
///
/// ```
/// use std::os::unix::ffi::{OsStrExt, OsStringExt};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use steal::queue::{self, Config};
/// use steal::CommExt;
/// let tmp = tempfile::tempdir().unwrap();
/// for d in ["a/b", "a/c", "d"] {
///     std::fs::create_dir_all(tmp.path().join(d)).unwrap();
/// }
/// std::fs::write(tmp.path().join("a/b/f"), b"").unwrap();
/// let root = tmp.path().as_os_str().as_bytes().to_vec();
/// // Walk the tree on 3 thread ranks: a directory is an item; reading it spawns its
/// // subdirectories, which idle ranks steal.
/// let totals = steal::local::run(3, |comm| {
///     let entries = AtomicU64::new(0);
///     let initial = if comm.rank() == 0 { vec![root.clone()] } else { Vec::new() };
///     let outcome = queue::run(comm, &Config::default(), initial, |dir: Vec<u8>, spawned| {
///         for e in std::fs::read_dir(std::ffi::OsStr::from_bytes(&dir)).unwrap() {
///             let e = e.unwrap();
///             entries.fetch_add(1, Ordering::Relaxed);
///             if e.file_type().unwrap().is_dir() {
///                 spawned.push(e.path().into_os_string().into_vec());
///             }
///         }
///     });
///     (outcome.processed, comm.sum(entries.into_inner()))
/// });
/// // 5 directories read (the root, a, a/b, a/c, d), 5 entries seen; every rank knows it.
/// assert!(totals.iter().all(|&t| t == (5, 5)));
/// ```
pub fn run<T, F>(comm: &dyn Comm, config: &Config, initial: Vec<T>, work: F) -> Outcome
where
    T: WorkItem,
    F: Fn(T, &mut Vec<T>) + Sync,
{
    let started = Instant::now();
    let delay = test_item_delay();
    let work = |item: T, spawned: &mut Vec<T>| {
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        work(item, spawned)
    };
    let mut initial: VecDeque<T> = initial.into();
    let inline = if comm.size() == 1 {
        start_inline(&mut initial, &work, config.stop)
    } else {
        0
    };
    let mut state = Rank {
        comm,
        rank: comm.rank(),
        size: comm.size(),
        local: initial,
        inflight: 0,
        // Only read when there is work left (a lone rank that finished inline never starts
        // the rayon pool).
        max_inflight: config.max_inflight,
        max_batch: config.max_batch.max(1),
        rng: SmallRng::seed_from_u64(
            config.seed ^ (comm.rank() as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ),
        outstanding_request: false,
        refusals: 0,
        next_request: None,
        backoff_cap: steal_backoff_cap(comm.size()),
        hungry: VecDeque::new(),
        work_balance: 0,
        black: false,
        token: None,
        token_round_started: false,
        done: false,
        processed: inline,
        dropped: 0,
        steals: 0,
        progress: config.progress,
        progress_sent: 0,
        board: (comm.rank() == 0).then(|| ProgressBoard::new(comm.size())),
        stop: config.stop,
        stopped: false,
        stats: crate::stats::enabled().then(QueueCounts::default),
    };
    if state.rank == 0 && state.size > 1 {
        state.token = Some(Token {
            black: false,
            count: 0,
        });
    }
    if state.size == 1 {
        // Alone, rayon's own stealing does the work (see `alone`); an empty queue (a tree
        // walked inline) never starts the pool.
        if !state.local.is_empty() {
            state.run_alone(&work);
        }
        state.check_stop();
        state.record_stats(started);
        return state.outcome();
    }
    if state.max_inflight == 0 {
        state.max_inflight = 2 * rayon::current_num_threads();
    }
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<BatchResult<T>>();
    // Workers unpark this thread when a batch ends: it sleeps in the kernel while batches run
    // instead of competing with the workers for the cores.
    let main_thread = std::thread::current();
    let work = &work;
    rayon::in_place_scope(|scope| {
        let mut idle_spins: u32 = 0;
        loop {
            let mut progressed = state.poll_messages();
            while let Ok((n, result)) = done_rx.try_recv() {
                state.finish_batch(n, result);
                progressed = true;
            }
            state.check_stop();
            while state.inflight < state.max_inflight && !state.local.is_empty() {
                let take = (state.local.len() / (2 * state.max_inflight)).clamp(1, state.max_batch);
                // Newest items first: depth-first order keeps the deque short while the
                // oldest (usually largest) items stay at the front for thieves.
                let at = state.local.len() - take;
                let batch: Vec<T> = state.local.drain(at..).collect();
                state.inflight += 1;
                let tx = done_tx.clone();
                let waker = main_thread.clone();
                scope.spawn(move |_| {
                    let n = batch.len() as u64;
                    // A panicking item must not leave the loop waiting for this batch forever:
                    // the panic travels back and is resumed on the rank's main thread.
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let mut spawned = Vec::new();
                        for item in batch {
                            work(item, &mut spawned);
                        }
                        spawned
                    }));
                    // The receiver outlives the scope; a failed send means the loop is gone.
                    let _ = tx.send((n, result));
                    waker.unpark();
                });
                progressed = true;
            }
            progressed |= state.feed_hungry();
            state.report_progress();
            state.track_idle();
            if state.is_passive() {
                progressed |= state.pass_token();
                if state.done {
                    break;
                }
                progressed |= state.request_work();
            }
            if progressed {
                idle_spins = 0;
            } else {
                idle_spins = idle_spins.saturating_add(1);
                // Wake as soon as a batch ends (the worker unparks us; an unpark that comes
                // first is not lost) or a message arrives (where the backend can tell), else
                // after SLEEP_MAX at the latest, for the stop flag and progress ticks. A
                // backend that cannot tell of arrivals is polled: often while batches run
                // (peers want answers), less and less often while idle.
                let (timeout, poll) = if state.inflight > 0 {
                    (SLEEP_MAX, PEER_POLL)
                } else {
                    (
                        state.until_next_request().min(SLEEP_MAX),
                        (Duration::from_micros(10) * idle_spins).min(IDLE_POLL),
                    )
                };
                comm.park(timeout, poll);
            }
        }
    });
    // The loop ends passive: the open idle interval covers the drain too.
    state.drain();
    state.record_stats(started);
    state.outcome()
}

/// A lone rank processes items on its own thread while there is only one (a walk's root, a
/// chain of single subdirectories): nothing could run beside it, and a walk of an empty or
/// tiny tree then finishes without starting the rayon pool's threads. Returns, with two or
/// more items queued or none, how many it processed.
fn start_inline<T, F>(items: &mut VecDeque<T>, work: &F, stop: Option<&AtomicBool>) -> u64
where
    F: Fn(T, &mut Vec<T>),
{
    let mut spawned = Vec::new();
    let mut processed = 0;
    while items.len() == 1 && !stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
        let item = items.pop_front().expect("one item");
        work(item, &mut spawned);
        processed += 1;
        items.extend(spawned.drain(..));
    }
    processed
}

/// Items a batch processed, and what it spawned (or the panic that stopped it).
type BatchResult<T> = (u64, std::thread::Result<Vec<T>>);

struct Rank<'a, T> {
    comm: &'a dyn Comm,
    rank: usize,
    size: usize,
    local: VecDeque<T>,
    inflight: usize,
    max_inflight: usize,
    max_batch: usize,
    rng: SmallRng,
    outstanding_request: bool,
    /// Steal requests refused in a row since this rank last received work.
    refusals: u32,
    /// Not before this instant is the next steal request sent (back-off after refusals).
    next_request: Option<Instant>,
    /// The longest back-off ([`steal_backoff_cap`]).
    backoff_cap: Duration,
    /// Ranks this rank refused since, oldest first: they get work unasked when some turns up.
    hungry: VecDeque<usize>,
    /// Work messages sent minus received (Safra's counter).
    work_balance: i64,
    /// Received work since the token last passed (Safra's colour).
    black: bool,
    token: Option<Token>,
    /// Rank 0 only: a token round is under way.
    token_round_started: bool,
    done: bool,
    processed: u64,
    dropped: u64,
    steals: u64,
    progress: Option<&'a Progress>,
    progress_sent: u64,
    board: Option<ProgressBoard>,
    stop: Option<&'a AtomicBool>,
    stopped: bool,
    /// The protocol's costs, measured only with `MFU_RS_STATS` ([`crate::stats`]).
    stats: Option<QueueCounts>,
}

/// What [`crate::stats`] counts on one rank while the queue runs.
#[derive(Default)]
struct QueueCounts {
    requests_sent: u64,
    requests_served: u64,
    requests_refused: u64,
    gifts: u64,
    token_rounds: u64,
    idle_ns: u64,
    /// Since when this rank has had nothing queued and nothing running.
    idle_since: Option<Instant>,
}

impl<T: WorkItem> Rank<'_, T> {
    fn is_passive(&self) -> bool {
        self.local.is_empty() && self.inflight == 0
    }

    fn finish_batch(&mut self, n: u64, result: std::thread::Result<Vec<T>>) {
        let spawned = result.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        self.inflight -= 1;
        self.processed += n;
        if self.stopped {
            self.dropped += spawned.len() as u64;
        } else {
            self.local.extend(spawned);
        }
    }

    fn check_stop(&mut self) {
        if !self.stopped && self.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            self.stopped = true;
            self.dropped += self.local.len() as u64;
            self.local.clear();
        }
    }

    /// Handle every message that has arrived. Returns true if any did.
    fn poll_messages(&mut self) -> bool {
        let mut any = false;
        while let Some((src, tag, bytes)) = self.comm.try_recv(None) {
            any = true;
            self.handle(src, tag, bytes);
        }
        any
    }

    fn handle(&mut self, src: usize, tag: Tag, bytes: Vec<u8>) {
        match tag {
            TAG_REQUEST => {
                let give = if self.done { 0 } else { self.local.len() / 2 };
                if let Some(s) = &mut self.stats {
                    *if give == 0 {
                        &mut s.requests_refused
                    } else {
                        &mut s.requests_served
                    } += 1;
                }
                if give == 0 {
                    self.comm.send(src, TAG_NONE, Vec::new());
                    // Remembered: when work turns up here, some goes to `src` unasked.
                    if !self.done && !self.hungry.contains(&src) {
                        self.hungry.push_back(src);
                    }
                } else {
                    self.send_work(src, TAG_WORK, give);
                }
            }
            TAG_WORK | TAG_GIFT => {
                if tag == TAG_WORK {
                    self.outstanding_request = false;
                }
                self.refusals = 0;
                self.next_request = None;
                self.hungry.retain(|&r| r != src);
                self.work_balance -= 1;
                self.black = true;
                self.steals += 1;
                assert!(!self.done, "work arrived after termination was detected");
                let (n, items) = typed::decode_prefix::<u64>(&bytes)
                    .unwrap_or_else(|e| panic!("work queue: {e}"));
                let mut input = items;
                for _ in 0..n {
                    let (item, rest) = typed::decode_prefix::<T>(input)
                        .unwrap_or_else(|e| panic!("work queue: {e}"));
                    input = rest;
                    if self.stopped {
                        self.dropped += 1;
                    } else {
                        self.local.push_back(item);
                    }
                }
            }
            TAG_NONE => {
                self.outstanding_request = false;
                self.back_off();
            }
            TAG_TOKEN => self.token = Some(typed::expect(&bytes)),
            TAG_DONE => self.done = true,
            TAG_PROGRESS => {
                if let (Some(board), Some(p)) = (&mut self.board, self.progress) {
                    board.update(src, typed::expect(&bytes));
                    board.publish(p);
                }
            }
            other => panic!("work queue: unexpected message tag {other} from rank {src}"),
        }
    }

    /// Send `give` of the oldest queued items to `dest` as a work message (`tag`: a reply or a
    /// gift), counted for Safra.
    fn send_work(&mut self, dest: usize, tag: Tag, give: usize) {
        // Count first, items after; stop early at STEAL_REPLY_BYTES so that one message stays
        // far below MPI's i32 message limit however big the deque is.
        let mut items = Vec::new();
        let mut given = 0u64;
        while (given as usize) < give && items.len() < STEAL_REPLY_BYTES {
            let item = self.local.pop_front().expect("give <= len");
            typed::encode_into(&item, &mut items);
            given += 1;
        }
        // The count, then the items as they were encoded, one after another.
        let mut out = Vec::with_capacity(10 + items.len());
        typed::encode_into(&given, &mut out);
        out.extend_from_slice(&items);
        self.work_balance += 1;
        self.comm.send(dest, tag, out);
    }

    /// Give work, unasked, to ranks this rank refused earlier, while it has at least two items
    /// queued: they wait (backed off) instead of asking again and again. Returns true if
    /// anything was sent.
    fn feed_hungry(&mut self) -> bool {
        let mut any = false;
        while !self.stopped && !self.done && self.local.len() >= 2 {
            let Some(dest) = self.hungry.pop_front() else {
                break;
            };
            let give = self.local.len() / 2;
            self.send_work(dest, TAG_GIFT, give);
            if let Some(s) = &mut self.stats {
                s.gifts += 1;
            }
            any = true;
        }
        any
    }

    /// After a refusal: wait twice as long as after the previous one (from
    /// [`STEAL_BACKOFF_MIN`] up to the cap), between half and all of that at random so that
    /// ranks refused together do not ask again together.
    fn back_off(&mut self) {
        self.refusals = self.refusals.saturating_add(1);
        let full = STEAL_BACKOFF_MIN
            .saturating_mul(1 << (self.refusals - 1).min(20))
            .min(self.backoff_cap);
        let wait = full / 2 + full.mul_f64(self.rng.random::<f64>() / 2.0);
        self.next_request = Some(Instant::now() + wait);
    }

    /// How long an idle rank may sleep before it has to send its next steal request (long when
    /// it waits for a reply or has nothing more to ask: a message will wake it).
    fn until_next_request(&self) -> Duration {
        if self.outstanding_request || self.done || self.stopped {
            return Duration::MAX;
        }
        self.next_request.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(Instant::now())
        })
    }

    fn request_work(&mut self) -> bool {
        if self.outstanding_request || self.done || self.stopped {
            return false;
        }
        if self.next_request.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        let mut victim = self.rng.random_range(0..self.size - 1);
        if victim >= self.rank {
            victim += 1;
        }
        self.comm.send(victim, TAG_REQUEST, Vec::new());
        self.outstanding_request = true;
        if let Some(s) = &mut self.stats {
            s.requests_sent += 1;
        }
        true
    }

    /// Safra's token step, called while this rank is passive. Returns true if anything moved.
    fn pass_token(&mut self) -> bool {
        let Some(token) = self.token.take() else {
            return false;
        };
        let next = (self.rank + 1) % self.size;
        if self.rank == 0 {
            if self.token_round_started {
                let total = token.count + self.work_balance;
                if !token.black && !self.black && total == 0 {
                    self.done = true;
                    for r in 1..self.size {
                        self.comm.send(r, TAG_DONE, Vec::new());
                    }
                    return true;
                }
            }
            self.token_round_started = true;
            if let Some(s) = &mut self.stats {
                s.token_rounds += 1;
            }
            self.black = false;
            self.comm.send_value(
                next,
                TAG_TOKEN,
                &Token {
                    black: false,
                    count: 0,
                },
            );
        } else {
            let out = Token {
                black: token.black || self.black,
                count: token.count + self.work_balance,
            };
            self.black = false;
            self.comm.send_value(next, TAG_TOKEN, &out);
        }
        true
    }

    /// Statistics and the live status: open or close this rank's idle interval.
    fn track_idle(&mut self) {
        let passive = self.is_passive();
        if let Some(p) = self.progress {
            p.set_idle(passive);
        }
        let Some(s) = &mut self.stats else { return };
        match (passive, s.idle_since) {
            (true, None) => s.idle_since = Some(Instant::now()),
            (false, Some(t)) => {
                s.idle_ns += t.elapsed().as_nanos() as u64;
                s.idle_since = None;
            }
            _ => {}
        }
    }

    /// Statistics: close the idle interval and gather this run's counts to rank 0. Collective
    /// when the statistics are on (on every rank alike).
    fn record_stats(&mut self, started: Instant) {
        let Some(s) = &mut self.stats else { return };
        if let Some(t) = s.idle_since.take() {
            s.idle_ns += t.elapsed().as_nanos() as u64;
        }
        let counts = crate::stats::RankCounts {
            processed: self.processed,
            requests_sent: s.requests_sent,
            requests_served: s.requests_served,
            requests_refused: s.requests_refused,
            gifts: s.gifts,
            idle_ns: s.idle_ns,
            wall_ns: started.elapsed().as_nanos() as u64,
            token_rounds: s.token_rounds,
        };
        crate::stats::gather(self.comm, counts);
    }

    /// Rank 0 starts its drawing once the first interval has passed (the progress runtime's
    /// timer draws from then on); the other ranks send rank 0 a snapshot every interval.
    fn report_progress(&mut self) {
        let Some(p) = self.progress else { return };
        if self.board.is_some() {
            p.poll();
        } else if p.due() {
            self.comm.send_value(0, TAG_PROGRESS, &p.snapshot());
            self.progress_sent += 1;
        }
    }

    /// After termination: answer every steal request still coming until all ranks have their
    /// replies, then collect the last progress messages on rank 0.
    fn drain(&mut self) {
        if self.size == 1 {
            return;
        }
        // Waits park rather than sleep: a thread rank is woken by a message or by the
        // barrier's completion (64 ranks on 2 cores each napping 50 µs at a time kept the
        // cores busy with wake-ups); under MPI a park naps `poll`, as the sleeps did.
        while self.outstanding_request {
            if !self.poll_messages() {
                self.comm.park(DRAIN_WAIT, Duration::from_micros(20));
            }
        }
        {
            let comm = self.comm;
            let mut barrier = comm.ibarrier();
            while !barrier.test() {
                if !self.poll_messages() {
                    self.comm.park(DRAIN_WAIT, Duration::from_micros(50));
                }
            }
        }
        // The queue run is over: what follows is this rank's own work, not idle time.
        if let Some(p) = self.progress {
            p.set_idle(false);
        }
        // The last snapshot of each sending rank, so that rank 0's last line has every
        // rank's final counts (not those of its last interval).
        if let Some(p) = self.progress.filter(|p| self.board.is_none() && p.sends()) {
            self.comm.send_value(0, TAG_PROGRESS, &p.snapshot());
            self.progress_sent += 1;
        }
        let sent = self.comm.allgather_u64(self.progress_sent);
        if self.rank == 0 {
            let received = self.board.as_ref().map_or(0, |b| b.received_remote());
            let mut missing: u64 = sent.iter().sum::<u64>() - received;
            while missing > 0 {
                match self.comm.try_recv(Some(TAG_PROGRESS)) {
                    Some((src, _, bytes)) => {
                        if let (Some(board), Some(p)) = (&mut self.board, self.progress) {
                            board.update(src, typed::expect(&bytes));
                            board.publish(p);
                        }
                        missing -= 1;
                    }
                    None => self.comm.park(DRAIN_WAIT, Duration::from_micros(20)),
                }
            }
        }
        self.comm.flush_sends();
    }

    fn outcome(&self) -> Outcome {
        let mut v = [
            self.processed,
            self.dropped,
            self.steals,
            self.stopped as u64,
        ];
        // One reduction: the count of stopped ranks is > 0 when any rank stopped.
        self.comm.allreduce(&mut v, ReduceOp::Sum);
        let interrupted = v[3] != 0;
        Outcome {
            processed_here: self.processed,
            processed: v[0],
            dropped: v[1],
            steals: v[2],
            interrupted,
        }
    }
}

#[cfg(test)]
mod message_tests {
    use super::*;
    use crate::stats::RankCounts;

    #[test]
    fn every_queue_message_round_trips_and_garbage_is_an_error() {
        let token = Token {
            black: true,
            count: -3,
        };
        let back: Token = typed::decode(&typed::encode(&token)).unwrap();
        assert_eq!((back.black, back.count), (true, -3));
        let counts = RankCounts {
            processed: 1,
            idle_ns: u64::MAX,
            token_rounds: 7,
            ..RankCounts::default()
        };
        assert_eq!(
            typed::decode::<RankCounts>(&typed::encode(&counts)).unwrap(),
            counts
        );
        let snap = [1u64, u64::MAX, 0, 7];
        assert_eq!(
            typed::decode::<[u64; 4]>(&typed::encode(&snap)).unwrap(),
            snap
        );
        // A work message: the count, then the items one after another.
        let items: Vec<Vec<u8>> = vec![b"a\n|b".to_vec(), Vec::new(), vec![0xff; 1000]];
        let mut body = Vec::new();
        items.iter().for_each(|i| typed::encode_into(i, &mut body));
        let mut msg = typed::encode(&(items.len() as u64));
        msg.extend_from_slice(&body);
        let (n, rest) = typed::decode_prefix::<u64>(&msg).unwrap();
        let got: Vec<Vec<u8>> = typed::each(rest).map(Result::unwrap).collect();
        assert_eq!((n, got), (items.len() as u64, items));
        // Cut short anywhere: an error, never a panic.
        let whole = typed::encode(&counts);
        for n in 0..whole.len() {
            assert!(typed::decode::<RankCounts>(&whole[..n]).is_err());
        }
        assert!(typed::decode::<Token>(&[1]).is_err());
        assert!(typed::decode::<Token>(&[2, 0]).is_err(), "a bool is 0 or 1");
    }
}
