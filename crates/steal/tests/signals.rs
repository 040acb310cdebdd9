//! SIGINT and SIGTERM become the stop flag, and the stop flag stops a queue with `interrupted`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use steal::queue::{self, Config};

#[test]
fn sigint_sets_the_stop_flag_and_a_running_queue_stops() {
    steal::signals::install();
    steal::signals::install(); // twice is harmless
    assert!(!steal::signals::stop_flag().load(Ordering::SeqCst));
    let processed = AtomicU64::new(0);
    let outcome = steal::local::run(2, |c| {
        let init = if c.rank() == 0 { vec![0u64] } else { vec![] };
        let cfg = Config {
            stop: Some(steal::signals::stop_flag()),
            ..Config::default()
        };
        queue::run(c, &cfg, init, |id, spawned| {
            if processed.fetch_add(1, Ordering::Relaxed) == 100 {
                // SAFETY: sending a signal to our own process.
                unsafe { libc_kill_self_sigint() };
            }
            std::thread::sleep(Duration::from_micros(50));
            // An endless tree: only the signal can end this run.
            spawned.extend((1..=2).map(|k| id.wrapping_mul(2).wrapping_add(k)));
        })
    });
    let started = Instant::now();
    while !steal::signals::stop_flag().load(Ordering::SeqCst)
        && started.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(steal::signals::stop_flag().load(Ordering::SeqCst));
    assert!(outcome.iter().all(|o| o.interrupted && o.dropped > 0));
}

/// The second signal ends the process with status 130, whatever the work is doing. Run in a
/// child process (this test binary again), since the process exits.
#[test]
fn a_second_signal_ends_the_process_with_status_130() {
    if std::env::var_os("MFU_STEAL_SIGNAL_CHILD").is_some() {
        steal::signals::install();
        // SAFETY: sending a signal to our own process.
        unsafe { libc_kill_self_sigint() };
        // Another thread of the process may take the signal: wait for its handler.
        let started = Instant::now();
        while !steal::signals::stop_flag().load(Ordering::SeqCst) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the first signal set no flag"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: as above.
        unsafe { libc_kill_self_sigint() };
        std::thread::sleep(Duration::from_secs(10));
        std::process::exit(3); // not reached when the second signal ended the process
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_second_signal_ends_the_process_with_status_130",
        ])
        .args(["--nocapture", "--test-threads", "1"])
        .env("MFU_STEAL_SIGNAL_CHILD", "1")
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(steal::signals::SECOND_SIGNAL_STATUS));
}

unsafe fn libc_kill_self_sigint() {
    extern "C" {
        fn getpid() -> i32;
        fn kill(pid: i32, sig: i32) -> i32;
    }
    const SIGINT: i32 = 2;
    // SAFETY: plain libc calls with valid arguments.
    unsafe {
        kill(getpid(), SIGINT);
    }
}
