//! A lone rank's queue: rayon's own work stealing, without the rank's main thread in the loop.
//!
//! With peers, the rank's main thread must stay in charge: only it talks to the [`Comm`], so it
//! hands batches to the workers and takes back what they spawn. Alone, there is no one to talk
//! to, and that hand-off is pure cost: a walk of 64 directories of 100 names woke the main
//! thread once per batch, 62 context switches, which took back most of what the second core
//! gave (walk-lite 5.6 ms against find's 5.4). Here the workers keep what they spawn and steal
//! from each other; the main thread only sleeps, wakes for progress ticks and the stop flag
//! every [`SLEEP_MAX`], and is woken once, by the last task.
//!
//! A worker holds its items in hand and keeps exactly one share of them stealable: whenever its
//! rayon deque is empty (a thief took the last share, or none was made yet) and it holds more
//! than one item, it splits the older half off as a new task. Shares are thus made only as
//! fast as they are stolen, a handful per thief instead of one per item, and an idle worker
//! always finds one while anyone holds two items or more. Items in hand are processed newest
//! first (depth first: a walk's list of pending directories stays short), and thieves take the
//! oldest, usually biggest, work.
//!
//! [`Comm`]: crate::comm::Comm

use super::{Rank, WorkItem, SLEEP_MAX};
use std::any::Any;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::Thread;

/// What the workers of a lone rank share.
struct Shared<'a, F> {
    work: &'a F,
    /// The caller's stop request.
    stop: Option<&'a AtomicBool>,
    /// Set when an item panicked: the other workers drop what they hold.
    halt: AtomicBool,
    /// The first panic's payload, resumed on the calling thread once every task has ended.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Tasks spawned and not yet ended.
    pending: AtomicUsize,
    processed: AtomicU64,
    dropped: AtomicU64,
    /// The calling thread, unparked by the task that ends last.
    caller: Thread,
}

impl<F> Shared<'_, F> {
    fn stopping(&self) -> bool {
        self.halt.load(Ordering::Relaxed) || self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

impl<T: WorkItem> Rank<'_, T> {
    /// Process every queued item, and all they spawn, on this rank's rayon pool (the rank is
    /// alone: see the module's comment). On return the queue is empty; `processed`, `dropped`
    /// and `stopped` say what happened. A panicking item is resumed here once the other
    /// workers have stopped.
    pub(super) fn run_alone<F>(&mut self, work: &F)
    where
        F: Fn(T, &mut Vec<T>) + Sync,
    {
        let shared = Shared {
            work,
            stop: self.stop,
            halt: AtomicBool::new(false),
            panic: Mutex::new(None),
            pending: AtomicUsize::new(0),
            processed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            caller: std::thread::current(),
        };
        let items: Vec<T> = std::mem::take(&mut self.local).into();
        // Called on a rayon worker (inside the caller's own pool), this thread must not sleep:
        // it may be the pool's only one. The scope's end then waits by working, without
        // progress ticks.
        let on_worker = rayon::current_thread_index().is_some();
        rayon::in_place_scope(|scope| {
            spawn_share(scope, &shared, items);
            while !on_worker && shared.pending.load(Ordering::Acquire) > 0 {
                // The last task unparks this thread (an unpark that comes first is not lost);
                // the timeout is for progress ticks only, since workers read the stop flag.
                std::thread::park_timeout(SLEEP_MAX);
                self.report_progress();
            }
        });
        self.processed += shared.processed.into_inner();
        self.dropped += shared.dropped.into_inner();
        if let Some(panic) = shared.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
            std::panic::resume_unwind(panic);
        }
        self.check_stop();
    }
}

/// Make `items` a task of their own, which any worker may take.
fn spawn_share<'s, T, F>(scope: &rayon::Scope<'s>, shared: &'s Shared<'s, F>, items: Vec<T>)
where
    T: WorkItem,
    F: Fn(T, &mut Vec<T>) + Sync,
{
    shared.pending.fetch_add(1, Ordering::AcqRel);
    scope.spawn(move |scope| {
        process(scope, shared, items.into());
        if shared.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            shared.caller.unpark();
        }
    });
}

/// Process `hand` and what it spawns, newest first, keeping one share stealable.
fn process<'s, T, F>(scope: &rayon::Scope<'s>, shared: &'s Shared<'s, F>, mut hand: VecDeque<T>)
where
    T: WorkItem,
    F: Fn(T, &mut Vec<T>) + Sync,
{
    let mut spawned = Vec::new();
    let mut processed = 0u64;
    loop {
        if shared.stopping() {
            shared
                .dropped
                .fetch_add(hand.len() as u64, Ordering::Relaxed);
            break;
        }
        // One share stays on this worker's deque for a thief: made again when one is taken.
        if hand.len() > 1 && rayon_core::current_thread_has_pending_tasks() == Some(false) {
            let keep = hand.len() - hand.len() / 2;
            let share: Vec<T> = hand.drain(..hand.len() - keep).collect();
            spawn_share(scope, shared, share);
        }
        let Some(item) = hand.pop_back() else { break };
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| (shared.work)(item, &mut spawned)));
        processed += 1;
        if let Err(panic) = ran {
            shared.halt.store(true, Ordering::Relaxed);
            let mut first = shared.panic.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert(panic);
            spawned.clear();
            continue;
        }
        hand.extend(spawned.drain(..));
    }
    shared.processed.fetch_add(processed, Ordering::Relaxed);
}
