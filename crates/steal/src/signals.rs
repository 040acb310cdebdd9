//! SIGINT/SIGTERM as a flag.
//!
//! The handlers only store to an atomic (async-signal-safe, through `signal-hook`): no thread
//! and no event loop is started for them, which keeps a short run's start-up to what the work
//! needs. The rank's main thread (the only one that calls MPI) reads the flag between work items.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Exit status of a process ended by a second SIGINT or SIGTERM (128 + SIGINT, as shells report
/// an interrupted command).
pub const SECOND_SIGNAL_STATUS: i32 = 130;

/// The process-wide stop flag: set when SIGINT or SIGTERM arrives after [`install`].
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

/// The same flag as [`stop_flag`], as a handle to hand to a run's options.
pub fn shared_stop_flag() -> Arc<AtomicBool> {
    Arc::clone(&STOP)
}

/// Clear the stop flag: a new run in the same process starts unstopped (a signal that stopped
/// the previous run does not stop this one).
pub fn reset() {
    STOP.store(false, Ordering::SeqCst);
}

/// Catch SIGINT and SIGTERM: the first sets [`stop_flag`] (work stops being taken, what is in
/// flight finishes, the summary is printed and the exit status is non-zero); a second one ends
/// the process at once with status [`SECOND_SIGNAL_STATUS`], after sending SIGKILL to every
/// process group registered with [`kill_on_exit`] (the commands `parallel` runs, which would
/// otherwise live on as orphans). The handlers are in place when this
/// returns; calling it again does nothing.
pub fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        use signal_hook::flag;
        for sig in [SIGINT, SIGTERM] {
            // The order matters: the shutdown action runs first and sees the flag as the
            // previous signal left it, so only a second signal ends the process.
            // SAFETY: the action only loads atomics and calls kill(2) and _exit(2), which are
            // async-signal-safe; it allocates nothing and takes no lock.
            let _ = unsafe {
                signal_hook::low_level::register(sig, || {
                    if STOP.load(Ordering::SeqCst) {
                        kill_groups();
                        signal_hook::low_level::exit(SECOND_SIGNAL_STATUS);
                    }
                })
            };
            let _ = flag::register(sig, shared_stop_flag());
        }
    });
}

/// Process-group ids that a second signal kills, in slots of fixed chunks chained from
/// [`GROUPS`]: the handler walks them without allocating or locking. Chunks are never freed
/// (a handful for the most commands a process ever runs at once).
struct Chunk {
    slots: [AtomicI32; 64],
    next: AtomicPtr<Chunk>,
}

static GROUPS: AtomicPtr<Chunk> = AtomicPtr::new(std::ptr::null_mut());

/// A process group registered with [`kill_on_exit`]; dropping it unregisters the group.
#[derive(Debug)]
pub struct KillOnExit {
    slot: &'static AtomicI32,
}

impl Drop for KillOnExit {
    fn drop(&mut self) {
        self.slot.store(0, Ordering::SeqCst);
    }
}

/// Have a second SIGINT/SIGTERM send SIGKILL to process group `pgid` (> 0) before the process
/// exits, for as long as the returned guard lives. Drop the guard before the group's leader
/// is reaped, so that the id is never killed once the system may give it to another process.
pub fn kill_on_exit(pgid: i32) -> KillOnExit {
    assert!(pgid > 0, "a process group id is positive");
    loop {
        let mut chunk = GROUPS.load(Ordering::SeqCst);
        // SAFETY: chunks are leaked boxes, never freed: every pointer in the chain stays valid.
        while let Some(c) = unsafe { chunk.as_ref() } {
            for slot in &c.slots {
                if slot
                    .compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return KillOnExit { slot };
                }
            }
            chunk = c.next.load(Ordering::SeqCst);
        }
        // Every slot is taken: chain a new chunk at the head, and look again.
        let head = GROUPS.load(Ordering::SeqCst);
        let fresh = Box::into_raw(Box::new(Chunk {
            slots: std::array::from_fn(|_| AtomicI32::new(0)),
            next: AtomicPtr::new(head),
        }));
        if GROUPS
            .compare_exchange(head, fresh, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            // SAFETY: `fresh` was never published; it is still this thread's box.
            drop(unsafe { Box::from_raw(fresh) });
        }
    }
}

/// SIGKILL to every registered group. Async-signal-safe: atomic loads and kill(2) only.
fn kill_groups() {
    let mut chunk = GROUPS.load(Ordering::SeqCst);
    // SAFETY: as in `kill_on_exit`, every chunk in the chain lives for the whole process.
    while let Some(c) = unsafe { chunk.as_ref() } {
        for slot in &c.slots {
            let pgid = slot.load(Ordering::SeqCst);
            if pgid > 0 {
                // SAFETY: kill(2) with a negative pid signals the group; nothing is borrowed.
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
            }
        }
        chunk = c.next.load(Ordering::SeqCst);
    }
}
