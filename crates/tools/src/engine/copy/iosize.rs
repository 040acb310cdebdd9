//! Self-adaptive I/O sizes for the `pread`/`pwrite` path of the copy engine.
//!
//! [`IoSizer`] is a pure controller (no I/O, no clock): it is told how many bytes each
//! `pread`+`pwrite` pair moved and how long the pair took ([`IoSizer::record`]), and answers how
//! many bytes the next pair should ask for ([`IoSizer::size`]). In the adaptive mode it climbs
//! the throughput curve by doublings, from [`START`] (1 MiB):
//!
//! - **warm-up**: the first [`WARMUP_BYTES`] (64 MiB) run at 1 MiB unmeasured: the start of a
//!   copy is slow for reasons unrelated to the size of its calls;
//! - throughput is measured over **windows** of at least [`WINDOW_CALLS`] calls and
//!   [`WINDOW_BYTES`] bytes at one size, never over single calls;
//! - each step is a **block** of four windows comparing the incumbent size with a challenger
//!   (twice as large), in the order incumbent, challenger, challenger, incumbent, each size
//!   scored by the better of its two windows. Comparing sizes measured side by side rather than
//!   one after the other is what makes the search usable on a shared machine: throughput drifts
//!   over a run (by 2× or more over the first 100 MiB per thread here, and in phases of a
//!   neighbour's load), and a search comparing each size with the one before takes any upward
//!   drift for "bigger is better" (it ran to 64 MiB here, where 1 to 4 MiB are best). The
//!   symmetric order cancels a steady drift; the better of two windows discards a hiccup in
//!   one (noise only ever slows a window down);
//! - challenger more than [`MARGIN`] (5 %) faster: it becomes the incumbent and the search
//!   doubles again (**growing**);
//! - otherwise the decision stops (or turns) the search for good, so it waits for a second
//!   block and decides on each size's best window over both blocks:
//!   - challenger more than 5 % slower: **settle** on the incumbent ("throughput dropped at
//!     X");
//!   - within ±5 %: **settle** on the larger of the two ("plateau": the same throughput with
//!     fewer system calls, i.e. less CPU per byte);
//! - when the very first doubling (2 MiB) is already slower than 1 MiB, the start was above
//!   the peak: the search turns and challenges with **halves** of the incumbent instead, by the
//!   same rules;
//! - bounds: [`MIN`] (64 KiB) ..= [`MAX`] (64 MiB): a curve still rising at a bound settles
//!   there;
//! - calls cut short by the ranges they copy (chunk or file ends) say nothing about the size:
//!   they are left out of the windows; when [`SHORT_BYTES`] of them go by while a larger
//!   challenger waits for its window, the work does not fill buffers that big, and the search
//!   settles on the incumbent;
//! - a settled size stays for good; a change of the access [`Pattern`] (direct I/O, sparse,
//!   compare) switches to that pattern's own search, started afresh from 1 MiB the first time.
//!
//! The fixed mode ([`IoSizer::fixed`], `--bufsize` given) never changes its size.
//!
//! `copy_file_range` is not steered: the kernel moves the data without a user buffer, in calls
//! as large as the chunk. The controller only sees the `pread`/`pwrite` fallback (across file
//! systems, `O_DIRECT`, file systems without `copy_file_range`) and the comparisons of
//! `sync --contents`.
//!
//! [`chosen`] summarises, for `-v`, the sizes this process's threads ended up with.

use std::fmt;
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::Duration;

/// Bytes per call an adaptive search starts at (1 MiB: Lustre's RPC size, and a size no local
/// file system is badly served by).
pub const START: usize = 1 << 20;
/// Smallest bytes per call the adaptive search goes down to (64 KiB).
pub const MIN: usize = 64 << 10;
/// Largest bytes per call the adaptive search goes up to (64 MiB; each worker thread holds one
/// buffer this big at most, two when comparing).
pub const MAX: usize = 64 << 20;
/// Calls a measurement window needs at least (full-size calls): one call slowed by a hiccup
/// (a scheduling delay, a writeback burst) weighs a quarter of the window at most.
pub const WINDOW_CALLS: u32 = 4;
/// Bytes a measurement window needs at least (16 MiB): small sizes average over many calls (256
/// calls at 64 KiB), and a window lasts long enough (16 ms at a GB/s per thread) to span a few
/// of the scheduler's time slices. With [`WINDOW_CALLS`], a window is max(4 calls, 16 MiB). The
/// cost of a search, at sizes that may be the wrong ones: about 0.5 GiB per thread up to 8 MiB,
/// 1.6 GiB all the way to 64 MiB (four windows per doubling, the large sizes' windows being 4
/// calls), little beside the terabytes this tool is for, and nothing on the files too small to
/// fill a window.
pub const WINDOW_BYTES: u64 = 16 << 20;
/// Relative throughput difference (fraction) below which two sizes count as equal (5 %): about
/// the spread of the best-of-two scores of one size in a calm phase here, and below the gains a
/// doubling is worth taking for (the gains reported on Lustre, +45..73 % over a few doublings,
/// are 10 % and more per doubling).
pub const MARGIN: f64 = 0.05;
/// Bytes of calls shorter than a larger challenger (64 MiB) that, going by before one of its
/// windows completes, settle the search on the incumbent: the chunks or files copied do not
/// fill the larger buffer.
pub const SHORT_BYTES: u64 = 4 * WINDOW_BYTES;
/// Bytes a new search moves at [`START`] before measuring (64 MiB): the first calls of a copy
/// run slower for reasons that have nothing to do with their size (fresh page-cache pages,
/// caches and file-system state warming up; measured here at a tenth to a half of the later
/// throughput over the first 50 to 100 MiB per thread).
pub const WARMUP_BYTES: u64 = 4 * WINDOW_BYTES;

/// How the data is accessed: each pattern has its own search, since what a call costs differs
/// between them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pattern {
    /// `O_DIRECT`: every call is device I/O, not a copy through the page cache.
    pub direct: bool,
    /// Sparse copy: data regions between holes, found with `SEEK_DATA`/`SEEK_HOLE`.
    pub sparse: bool,
    /// Compare before rewriting (`sync --contents`): two reads per step, rare writes.
    pub compare: bool,
}

impl Pattern {
    fn index(self) -> usize {
        usize::from(self.direct) | usize::from(self.sparse) << 1 | usize::from(self.compare) << 2
    }
}

/// Why an [`IoSizer`] is at its size. Sizes inside are bytes per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Set by `--bufsize`; never changes.
    Fixed,
    /// At [`START`], warming up ([`WARMUP_BYTES`]): nothing measured yet.
    Measuring,
    /// Comparing the incumbent with twice its size; every doubling so far was faster.
    Growing,
    /// Comparing the incumbent with half its size: 2 MiB was slower than 1 MiB, and smaller
    /// sizes were faster so far.
    Shrinking,
    /// Settled one step back from `at`, where throughput dropped.
    Dropped {
        /// The size (bytes) that was slower.
        at: usize,
    },
    /// Settled on `high`: `low` and `high` were within the margin.
    Plateau {
        /// The smaller size (bytes).
        low: usize,
        /// The larger size (bytes), the one kept.
        high: usize,
    },
    /// Settled on [`MAX`]: throughput rose all the way.
    AtMaximum,
    /// Settled on [`MIN`]: smaller sizes were faster all the way.
    AtMinimum,
    /// Settled back from `at`: calls of that size were cut short by chunk or file ends.
    CutShort {
        /// The size (bytes) the copied ranges did not fill.
        at: usize,
    },
}

impl Reason {
    /// The search is over (or there was none).
    pub fn settled(self) -> bool {
        !matches!(
            self,
            Reason::Measuring | Reason::Growing | Reason::Shrinking
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::Fixed => write!(f, "--bufsize"),
            Reason::Measuring => write!(f, "warming up, nothing measured yet"),
            Reason::Growing => write!(f, "doubling while throughput rises"),
            Reason::Shrinking => write!(f, "halving while throughput rises"),
            Reason::Dropped { at } => write!(f, "throughput dropped at {}", human(at)),
            Reason::Plateau { low, high } => {
                write!(f, "throughput flat from {} to {}", human(low), human(high))
            }
            Reason::AtMaximum => write!(f, "throughput rose up to the {} maximum", human(MAX)),
            Reason::AtMinimum => write!(
                f,
                "smaller calls were faster down to the {} minimum",
                human(MIN)
            ),
            Reason::CutShort { at } => {
                write!(f, "chunks or files too small to fill {}", human(at))
            }
        }
    }
}

/// `4 MiB`, `512 KiB`, `1000 B` (bytes; exact when a power of two).
fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b => format!("{b} B"),
    }
}

/// One measurement window: full-size calls at one size, and the bytes of short ones.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    calls: u32,
    bytes: u64,
    elapsed: Duration,
    short_bytes: u64,
}

/// The search of one pattern.
#[derive(Clone, Copy, Debug)]
struct Search {
    /// Bytes per call now: the incumbent or the challenger, as the block's order says.
    size: usize,
    /// The incumbent: the size accepted so far (bytes).
    cur: usize,
    /// The challenger: twice the incumbent when growing, half when shrinking (bytes).
    next: usize,
    reason: Reason,
    /// Bytes still to move before measuring starts (the warm-up).
    warmup: u64,
    /// Throughputs (bytes/s) of the windows of the current block, in the order of [`ORDER`].
    block: [f64; 4],
    /// Windows of the current block done.
    done: usize,
    /// A doubling was accepted (else a drop at the first doubling turns the search downwards).
    grew: bool,
    /// The scores (incumbent, challenger; bytes/s) of a block that would have stopped or turned
    /// the search: such a decision waits for a second block.
    doubt: Option<(f64, f64)>,
    window: Window,
}

/// The order of a block's windows: incumbent, challenger, challenger, incumbent (`true`: the
/// challenger). Symmetric in time, so a steady drift of throughput (caches warming, a
/// neighbour's job starting) weighs on both sizes alike instead of passing for an effect of
/// the size.
const ORDER: [bool; 4] = [false, true, true, false];

impl Search {
    fn new() -> Search {
        Search {
            size: START,
            cur: START,
            next: 2 * START,
            reason: Reason::Measuring,
            warmup: WARMUP_BYTES,
            block: [0.0; 4],
            done: 0,
            grew: false,
            doubt: None,
            window: Window::default(),
        }
    }

    fn settle(&mut self, size: usize, reason: Reason) {
        self.size = size;
        self.cur = size;
        self.next = size;
        self.reason = reason;
    }

    /// Start a new block comparing the incumbent with `next`.
    fn challenge(&mut self, next: usize, reason: Reason) {
        if next != self.next {
            self.doubt = None;
        }
        self.next = next;
        self.reason = reason;
        self.done = 0;
        self.size = self.cur;
        self.window = Window::default();
    }

    fn record(&mut self, bytes: u64, elapsed: Duration) {
        if self.reason.settled() {
            return;
        }
        if self.reason == Reason::Measuring {
            self.warmup = self.warmup.saturating_sub(bytes);
            if self.warmup == 0 {
                self.challenge(2 * START, Reason::Growing);
            }
            return;
        }
        if bytes < self.size as u64 {
            // Short calls only tell something while a larger challenger is measured: the
            // ranges copied do not fill it.
            if ORDER[self.done] && self.next > self.cur {
                self.window.short_bytes += bytes;
                if self.window.short_bytes >= SHORT_BYTES {
                    self.settle(self.cur, Reason::CutShort { at: self.next });
                }
            }
            return;
        }
        let w = &mut self.window;
        w.calls += 1;
        w.bytes += bytes;
        w.elapsed += elapsed;
        if w.calls < WINDOW_CALLS || w.bytes < WINDOW_BYTES {
            return;
        }
        self.block[self.done] = w.bytes as f64 / w.elapsed.as_secs_f64().max(1e-9);
        self.window = Window::default();
        self.done += 1;
        if self.done < ORDER.len() {
            self.size = if ORDER[self.done] {
                self.next
            } else {
                self.cur
            };
            return;
        }
        // Each size's throughput: the better of its two windows (noise only slows down).
        let best = |challenger: bool| {
            (0..ORDER.len())
                .filter(|&i| ORDER[i] == challenger)
                .map(|i| self.block[i])
                .fold(0.0, f64::max)
        };
        self.decide(best(false), best(true));
    }

    /// A block closed: the incumbent ran at `inc`, the challenger at `cha` (bytes/s).
    fn decide(&mut self, inc: f64, cha: f64) {
        // A second block: each size's best over both.
        let second = self.doubt.is_some();
        let (inc, cha) = match self.doubt.take() {
            Some((i, c)) => (inc.max(i), cha.max(c)),
            None => (inc, cha),
        };
        let better = cha > inc * (1.0 + MARGIN);
        if !better && !second {
            // Stopping (or turning) is for good: only on a second block's word.
            self.doubt = Some((inc, cha));
            self.challenge(self.next, self.reason);
            return;
        }
        let worse = cha < inc * (1.0 - MARGIN);
        let (cur, next) = (self.cur, self.next);
        let growing = self.reason == Reason::Growing;
        match (growing, better, worse) {
            (true, true, _) => {
                self.cur = next;
                self.grew = true;
                if next >= MAX {
                    self.settle(MAX, Reason::AtMaximum);
                } else {
                    self.challenge(2 * next, Reason::Growing);
                }
            }
            (false, true, _) => {
                self.cur = next;
                if next <= MIN {
                    self.settle(MIN, Reason::AtMinimum);
                } else {
                    self.challenge(next / 2, Reason::Shrinking);
                }
            }
            // The first doubling was slower: the peak may be below START.
            (true, _, true) if !self.grew && cur > MIN => {
                self.challenge(cur / 2, Reason::Shrinking)
            }
            (_, _, true) => self.settle(cur, Reason::Dropped { at: next }),
            // Equal within the margin: the larger size, for fewer calls.
            (true, _, false) => self.settle(
                next,
                Reason::Plateau {
                    low: cur,
                    high: next,
                },
            ),
            (false, _, false) => self.settle(
                cur,
                Reason::Plateau {
                    low: next,
                    high: cur,
                },
            ),
        }
    }
}

/// Chooses the bytes per `pread`/`pwrite` call of one worker thread: fixed, or searched for
/// by measuring throughput (see the [module documentation](self) for the rules).
#[derive(Clone, Debug)]
pub struct IoSizer {
    /// `Some(bytes)`: fixed mode.
    fixed: Option<usize>,
    pattern: Pattern,
    search: Search,
    /// The searches of the other patterns seen (indexed by [`Pattern::index`]).
    others: [Option<Search>; 8],
}

impl Default for IoSizer {
    fn default() -> IoSizer {
        IoSizer::adaptive()
    }
}

impl IoSizer {
    /// An adaptive controller at [`START`] bytes per call, for the default [`Pattern`] (plain
    /// buffered copy).
    pub fn adaptive() -> IoSizer {
        IoSizer {
            fixed: None,
            pattern: Pattern::default(),
            search: Search::new(),
            others: [None; 8],
        }
    }

    /// A controller that always answers `bytes` bytes per call (`--bufsize`).
    pub fn fixed(bytes: usize) -> IoSizer {
        IoSizer {
            fixed: Some(bytes),
            ..IoSizer::adaptive()
        }
    }

    /// Bytes the next call should move.
    pub fn size(&self) -> usize {
        self.fixed.unwrap_or(self.search.size)
    }

    /// Why [`size`](Self::size) is what it is.
    pub fn reason(&self) -> Reason {
        if self.fixed.is_some() {
            Reason::Fixed
        } else {
            self.search.reason
        }
    }

    /// The search is over: fixed, or settled for the current pattern.
    pub fn settled(&self) -> bool {
        self.reason().settled()
    }

    /// The current access pattern (for the tests' checks).
    #[cfg(test)]
    pub fn current_pattern(&self) -> Pattern {
        self.pattern
    }

    /// Switch to access pattern `p`. A pattern not seen before starts its own search at
    /// [`START`]; a pattern seen before resumes its search (or settled size) where it was, the
    /// comparison under way started over. The searches of all patterns are kept (eight at
    /// most): `sync` alternates copying new files and comparing existing ones within one run,
    /// on the same file systems, and each would otherwise start over every time.
    pub fn pattern(&mut self, p: Pattern) {
        if p == self.pattern {
            return;
        }
        let mut old = self.search;
        if !old.reason.settled() && old.reason != Reason::Measuring {
            // A block half done would compare windows measured apart: start it again.
            old.challenge(old.next, old.reason);
        }
        self.others[self.pattern.index()] = Some(old);
        self.search = self.others[p.index()].take().unwrap_or_else(Search::new);
        self.pattern = p;
    }

    /// Account one `pread`+`pwrite` pair that asked for [`size`](Self::size) bytes and moved
    /// `bytes` bytes in `elapsed`. Pairs moving fewer bytes (the end of a chunk or file) are
    /// not measured (see [`SHORT_BYTES`]). Returns whether the size or the reason changed
    /// (during a search, the size alternates between the incumbent and the challenger).
    pub fn record(&mut self, bytes: u64, elapsed: Duration) -> bool {
        if self.fixed.is_some() {
            return false;
        }
        let before = (self.search.size, self.search.reason);
        self.search.record(bytes, elapsed);
        before != (self.search.size, self.search.reason)
    }
}

/// What this process's threads use: the summary behind `-v`'s buffer-size line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// Smallest bytes per call among the threads that copied through `pread`/`pwrite` (0: none
    /// did; `copy_file_range` moved all the data, or there was none).
    pub min_bytes: u64,
    /// Largest bytes per call among those threads (0: none).
    pub max_bytes: u64,
    /// Every one of those threads has stopped searching (or had a fixed size).
    pub settled: bool,
    threads: usize,
    fixed: bool,
    /// The reason of a thread at `max_bytes`.
    reason: Option<Reason>,
}

impl fmt::Display for Chosen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(reason) = self.reason else {
            return write!(
                f,
                "buffer size: unused (no data went through read/write calls)"
            );
        };
        let (lo, hi) = (
            human(self.min_bytes as usize),
            human(self.max_bytes as usize),
        );
        let range = if self.min_bytes == self.max_bytes {
            hi.clone()
        } else {
            format!("{lo}..{hi} over {} threads", self.threads)
        };
        let why = if self.min_bytes == self.max_bytes {
            reason.to_string()
        } else {
            format!("at {hi}: {reason}")
        };
        if self.fixed {
            write!(f, "buffer size fixed: {range} (--bufsize)")
        } else if self.settled {
            write!(f, "buffer size adaptive: settled at {range} ({why})")
        } else {
            write!(
                f,
                "buffer size adaptive: still searching, at {range} ({why})"
            )
        }
    }
}

/// The latest (bytes per call, reason) of each thread that published.
static THREADS: Mutex<Vec<(ThreadId, usize, Reason)>> = Mutex::new(Vec::new());

/// Publish the calling thread's controller state for [`chosen`] (done by the copy engine when
/// it first uses the thread's controller and whenever its size or reason changes: a few times
/// per thread).
pub(crate) fn publish(sizer: &IoSizer) {
    let me = std::thread::current().id();
    let mut all = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let entry = (me, sizer.size(), sizer.reason());
    match all.iter_mut().find(|(id, ..)| *id == me) {
        Some(e) => *e = entry,
        None => all.push(entry),
    }
}

/// What the threads of this process chose so far (each thread's latest size and reason), for
/// the `-v` line: `buffer size adaptive: settled at 4 MiB (throughput dropped at 8 MiB)` or
/// `buffer size fixed: 4 MiB (--bufsize)`. Threads that never copied through
/// `pread`/`pwrite` are not counted. Cheap; call it after the copy.
pub fn chosen() -> Chosen {
    let all = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    summarize(all.iter().map(|&(_, size, reason)| (size, reason)))
}

fn summarize(entries: impl Iterator<Item = (usize, Reason)>) -> Chosen {
    let mut c = Chosen {
        min_bytes: 0,
        max_bytes: 0,
        settled: true,
        threads: 0,
        fixed: true,
        reason: None,
    };
    for (size, reason) in entries {
        let size = size as u64;
        if c.threads == 0 || size < c.min_bytes {
            c.min_bytes = size;
        }
        if c.threads == 0 || size > c.max_bytes {
            c.max_bytes = size;
            c.reason = Some(reason);
        }
        c.threads += 1;
        c.settled &= reason.settled();
        c.fixed &= reason == Reason::Fixed;
    }
    if c.threads == 0 {
        c.settled = false;
        c.fixed = false;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;
    const KIB: usize = 1 << 10;

    /// Feed `sizer` `calls` full-size calls, each taking the time `curve` (size → MB/s) gives
    /// it; the sizes used, repeats collapsed.
    fn drive(sizer: &mut IoSizer, mut curve: impl FnMut(usize) -> f64, calls: usize) -> Vec<usize> {
        let mut seen = vec![sizer.size()];
        for _ in 0..calls {
            let size = sizer.size();
            let secs = size as f64 / (curve(size) * 1e6);
            sizer.record(size as u64, Duration::from_secs_f64(secs));
            if sizer.size() != *seen.last().unwrap() {
                seen.push(sizer.size());
            }
        }
        seen
    }

    fn log2(size: usize) -> f64 {
        (size as f64).log2()
    }

    /// Rises all the way: +20 % at the first doubling, +10 % at the last.
    fn rising(size: usize) -> f64 {
        200.0 * (log2(size) - 15.0)
    }

    /// Rises until 8 MiB, falls after: 100 MB/s per doubling.
    fn peak_at_8m(size: usize) -> f64 {
        1000.0 - 100.0 * (log2(size) - log2(8 * MIB)).abs()
    }

    #[test]
    fn rising_then_falling_curve_settles_at_the_peak() {
        let mut s = IoSizer::adaptive();
        assert_eq!((s.size(), s.reason()), (START, Reason::Measuring));
        let seen = drive(&mut s, peak_at_8m, 2000);
        // Each step: incumbent, challenger (twice), incumbent; 16 MiB is slower, twice: back
        // to 8.
        let m = |v: &[usize]| v.iter().map(|x| x * MIB).collect::<Vec<_>>();
        assert_eq!(seen, m(&[1, 2, 1, 2, 4, 2, 4, 8, 4, 8, 16, 8, 16, 8]));
        assert_eq!(s.reason(), Reason::Dropped { at: 16 * MIB });
        assert!(s.settled());
        assert_eq!(drive(&mut s, |_| 1.0, 500), [8 * MIB], "settled stays");
    }

    #[test]
    fn rising_curve_ends_at_the_maximum() {
        let mut s = IoSizer::adaptive();
        let seen = drive(&mut s, rising, 2000);
        assert_eq!(seen.iter().max(), Some(&MAX));
        assert!(seen.iter().all(|&x| (START..=MAX).contains(&x)));
        assert_eq!((s.size(), s.reason()), (MAX, Reason::AtMaximum));
    }

    #[test]
    fn falling_from_the_start_halves_once_and_stays() {
        // Falls from 1 MiB upwards, peaks at 512 KiB (slower again below: per-call costs).
        let curve = |size: usize| 1000.0 - 100.0 * (log2(size) - log2(512 * KIB)).abs();
        let mut s = IoSizer::adaptive();
        let seen = drive(&mut s, curve, 3000);
        assert_eq!(
            seen,
            [
                MIB,
                2 * MIB,
                MIB,
                2 * MIB,
                MIB,
                512 * KIB,
                MIB,
                512 * KIB,
                256 * KIB,
                512 * KIB,
                256 * KIB,
                512 * KIB
            ]
        );
        assert_eq!(s.reason(), Reason::Dropped { at: 256 * KIB });
        assert_eq!(drive(&mut s, curve, 1000), [512 * KIB]);
    }

    #[test]
    fn falling_everywhere_ends_at_the_minimum() {
        let mut s = IoSizer::adaptive();
        let seen = drive(&mut s, |size| 3000.0 - 100.0 * log2(size), 5000);
        assert_eq!(seen.iter().min(), Some(&MIN));
        assert_eq!(seen.iter().max(), Some(&(2 * MIB)), "one doubling tried");
        assert_eq!((s.size(), s.reason()), (MIN, Reason::AtMinimum));
    }

    #[test]
    fn plateau_settles_on_the_larger_size() {
        // +20 % per doubling up to 4 MiB, then +2 % (within the margin).
        let curve = |size: usize| {
            if size <= 4 * MIB {
                500.0 * 1.2f64.powf(log2(size) - 20.0)
            } else {
                500.0 * 1.2f64.powi(2) * 1.02f64.powf(log2(size) - 22.0)
            }
        };
        let mut s = IoSizer::adaptive();
        drive(&mut s, curve, 2000);
        assert_eq!(
            (s.size(), s.reason()),
            (
                8 * MIB,
                Reason::Plateau {
                    low: 4 * MIB,
                    high: 8 * MIB
                }
            )
        );
        // Flat from the start: settles on the first doubling.
        let mut s = IoSizer::adaptive();
        let seen = drive(&mut s, |_| 800.0, 2000);
        assert_eq!(seen, [MIB, 2 * MIB, MIB, 2 * MIB, MIB, 2 * MIB]);
        assert!(s.settled());
    }

    #[test]
    fn one_slow_window_does_not_decide() {
        // The first window of each size in the 4 MiB / 8 MiB comparison runs at a third of its
        // speed (a neighbour's burst); the second one of each does not.
        let mut s = IoSizer::adaptive();
        for _ in 0..2000 {
            let size = s.size();
            let mut secs = size as f64 / (peak_at_8m(size) * 1e6);
            if s.search.cur == 4 * MIB && s.search.done < 2 {
                secs *= 3.0;
            }
            s.record(size as u64, Duration::from_secs_f64(secs));
        }
        assert_eq!(
            (s.size(), s.reason()),
            (8 * MIB, Reason::Dropped { at: 16 * MIB })
        );
    }

    #[test]
    fn a_drift_over_time_does_not_pass_for_a_gain() {
        // The same throughput at every size, rising by 10 % per 16 MiB moved (caches warming
        // up, a neighbour's job ending): compared one after the other, every doubling would
        // look 10 % faster, all the way to the maximum.
        let mut s = IoSizer::adaptive();
        let mut moved = 0usize;
        drive(
            &mut s,
            |size| {
                moved += size;
                1000.0 * (1.0 + 0.1 * (moved as f64 / (16 * MIB) as f64))
            },
            5000,
        );
        assert!(s.settled());
        assert!(s.size() <= 2 * MIB, "{} ({})", human(s.size()), s.reason());
    }

    #[test]
    fn no_change_before_a_window_completes() {
        let mut s = IoSizer::adaptive();
        let fast = Duration::from_millis(1);
        // The warm-up: 64 MiB at 1 MiB, unmeasured.
        for _ in 0..WARMUP_BYTES / MIB as u64 - 1 {
            assert!(!s.record(MIB as u64, fast));
        }
        assert!(s.record(MIB as u64, fast));
        assert_eq!((s.size(), s.reason()), (START, Reason::Growing));
        // 1 MiB calls: 16 of them make the first window (the incumbent's).
        for i in 0..15 {
            assert!(!s.record(MIB as u64, fast), "call {i}");
            assert_eq!(s.size(), START);
        }
        assert!(s.record(MIB as u64, fast));
        assert_eq!(s.size(), 2 * MIB, "the challenger's window");
        // Calls shorter than the size are not measured (short of SHORT_BYTES of them).
        for _ in 0..SHORT_BYTES / MIB as u64 - 1 {
            assert!(!s.record(MIB as u64, Duration::from_nanos(1)));
        }
        assert_eq!((s.size(), s.search.done), (2 * MIB, 1));
        // Each window needs WINDOW_CALLS calls even when their bytes suffice: 64 MiB calls.
        let mut s = IoSizer::adaptive();
        for _ in 0..2000 {
            if s.size() == MAX {
                break;
            }
            drive(&mut s, rising, 1);
        }
        assert_eq!((s.size(), s.search.done), (MAX, 1));
        for _ in 0..WINDOW_CALLS - 1 {
            s.record(64 << 20, Duration::from_millis(1));
        }
        assert_eq!(s.search.done, 1);
        s.record(64 << 20, Duration::from_millis(1));
        assert_eq!(s.search.done, 2);
    }

    #[test]
    fn calls_cut_short_settle_on_the_incumbent() {
        // Chunks of 4 MiB: calls never move more, whatever the size.
        let mut s = IoSizer::adaptive();
        for _ in 0..1000 {
            let n = s.size().min(4 * MIB);
            s.record(
                n as u64,
                Duration::from_secs_f64(n as f64 / (rising(n) * 1e6)),
            );
        }
        assert_eq!(
            (s.size(), s.reason()),
            (4 * MIB, Reason::CutShort { at: 8 * MIB })
        );
        // Small files only: nothing is measured, nothing settles.
        let mut s = IoSizer::adaptive();
        for _ in 0..100_000 {
            s.record(4096, Duration::from_micros(5));
        }
        assert_eq!((s.size(), s.reason()), (START, Reason::Growing));
    }

    #[test]
    fn pattern_change_restarts_and_returning_resumes() {
        let mut s = IoSizer::adaptive();
        drive(&mut s, peak_at_8m, 2000);
        assert_eq!(s.size(), 8 * MIB);
        let direct = Pattern {
            direct: true,
            ..Pattern::default()
        };
        s.pattern(direct);
        assert_eq!((s.size(), s.reason()), (START, Reason::Measuring));
        assert_eq!(s.current_pattern(), direct);
        // The new pattern searches on its own curve.
        drive(&mut s, rising, 2000);
        assert_eq!(s.size(), MAX);
        // Back to the first: its settled size, no new search.
        s.pattern(Pattern::default());
        assert_eq!(
            (s.size(), s.reason()),
            (8 * MIB, Reason::Dropped { at: 16 * MIB })
        );
        // Switching mid-comparison keeps the progress but starts the comparison over.
        let compare = Pattern {
            compare: true,
            ..Pattern::default()
        };
        s.pattern(compare);
        drive(&mut s, rising, 64 + 16);
        assert_eq!((s.size(), s.search.done), (2 * MIB, 1));
        s.pattern(Pattern::default());
        s.pattern(compare);
        assert_eq!(
            (s.size(), s.reason(), s.search.done),
            (START, Reason::Growing, 0)
        );
    }

    #[test]
    fn fixed_never_moves() {
        let mut s = IoSizer::fixed(4 * MIB);
        for curve in [peak_at_8m as fn(usize) -> f64, rising] {
            assert_eq!(drive(&mut s, curve, 1000), [4 * MIB]);
        }
        s.pattern(Pattern {
            direct: true,
            sparse: true,
            compare: true,
        });
        assert_eq!((s.size(), s.reason()), (4 * MIB, Reason::Fixed));
        assert!(s.settled());
    }

    #[test]
    fn summary_lines() {
        let none = summarize(std::iter::empty());
        assert_eq!((none.max_bytes, none.settled), (0, false));
        assert!(none.to_string().contains("unused"), "{none}");
        let fixed = summarize([(4 * MIB, Reason::Fixed), (4 * MIB, Reason::Fixed)].into_iter());
        assert_eq!(fixed.to_string(), "buffer size fixed: 4 MiB (--bufsize)");
        let one = summarize([(4 * MIB, Reason::Dropped { at: 8 * MIB })].into_iter());
        assert_eq!(
            one.to_string(),
            "buffer size adaptive: settled at 4 MiB (throughput dropped at 8 MiB)"
        );
        assert!(one.settled);
        let two = summarize(
            [
                (512 * KIB, Reason::AtMinimum),
                (2 * MIB, Reason::Growing),
                (MIB, Reason::Dropped { at: 2 * MIB }),
            ]
            .into_iter(),
        );
        assert_eq!(
            (two.min_bytes, two.max_bytes, two.settled),
            (512 << 10, 2 << 20, false)
        );
        assert_eq!(
            two.to_string(),
            "buffer size adaptive: still searching, at 512 KiB..2 MiB over 3 threads (at 2 MiB: doubling while throughput rises)"
        );
    }
}
