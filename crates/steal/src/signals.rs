//! SIGINT/SIGTERM as a flag, and interval ticks, both driven by one small tokio runtime.
//!
//! The runtime lives on its own thread, so the rank's main thread (the only one that calls MPI)
//! never blocks on it: it only reads atomics.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));
static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

fn runtime() -> &'static tokio::runtime::Runtime {
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mfu-timer")
            .enable_all()
            .build()
            .expect("start the timer/signal runtime")
    })
}

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
/// the process at once with status 130. The handlers are in place when this returns; calling it
/// again does nothing.
pub fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        use tokio::signal::unix::{signal, SignalKind};
        let rt = runtime();
        // Register now, on this thread, so that no signal slips in before the handler exists.
        let _context = rt.enter();
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        rt.spawn(async move {
            let mut count = 0;
            loop {
                tokio::select! {
                    _ = int.recv() => {},
                    _ = term.recv() => {},
                }
                count += 1;
                STOP.store(true, Ordering::SeqCst);
                if count > 1 {
                    std::process::exit(130);
                }
            }
        });
    });
}

/// A counter that goes up by one every `interval`, for as long as the process runs.
pub fn ticker(interval: Duration) -> Arc<AtomicU64> {
    let tick = Arc::new(AtomicU64::new(0));
    let t = Arc::downgrade(&tick);
    runtime().spawn(async move {
        let mut iv = tokio::time::interval(interval);
        iv.tick().await; // the first tick is immediate
        loop {
            iv.tick().await;
            match t.upgrade() {
                Some(t) => t.fetch_add(1, Ordering::Relaxed),
                None => return,
            };
        }
    });
    tick
}
