//! SIGINT/SIGTERM as a flag.
//!
//! The handlers only store to an atomic (async-signal-safe, through `signal-hook`): no thread
//! and no event loop is started for them, which keeps a short run's start-up to what the work
//! needs. The rank's main thread (the only one that calls MPI) reads the flag between work items.

use std::sync::atomic::{AtomicBool, Ordering};
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
/// the process at once with status [`SECOND_SIGNAL_STATUS`]. The handlers are in place when this
/// returns; calling it again does nothing.
pub fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        use signal_hook::flag;
        for sig in [SIGINT, SIGTERM] {
            // The order matters: the shutdown action runs first and sees the flag as the
            // previous signal left it, so only a second signal ends the process.
            let _ =
                flag::register_conditional_shutdown(sig, SECOND_SIGNAL_STATUS, shared_stop_flag());
            let _ = flag::register(sig, shared_stop_flag());
        }
    });
}
