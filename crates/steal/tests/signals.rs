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
        // A second signal, later than the same stop delivered twice would come.
        std::thread::sleep(steal::signals::SAME_STOP_WITHIN + Duration::from_millis(200));
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

/// One stop delivered twice at once (Slurm signals every task at a time limit, and mpirun
/// passes its own signal on) is one stop: the process goes on to finish safely.
#[test]
fn the_same_stop_delivered_twice_at_once_does_not_end_the_process() {
    if std::env::var_os("MFU_STEAL_SIGNAL_TWICE_CHILD").is_some() {
        steal::signals::install();
        // SAFETY: sending a signal to our own process, twice.
        unsafe { libc_kill_self_sigint() };
        let started = Instant::now();
        while !steal::signals::stop_flag().load(Ordering::SeqCst) {
            assert!(started.elapsed() < Duration::from_secs(5), "no flag");
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: as above.
        unsafe { libc_kill_self_sigint() };
        std::thread::sleep(Duration::from_millis(500));
        std::process::exit(4); // the run finished safely
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_same_stop_delivered_twice_at_once_does_not_end_the_process",
        ])
        .args(["--nocapture", "--test-threads", "1"])
        .env("MFU_STEAL_SIGNAL_TWICE_CHILD", "1")
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(4));
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

/// True while `pid` runs (a zombie nobody reaped does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
    })
}

/// A process that crashes takes the groups it registered with it, through its supervisor, and
/// only those: a group whose guard was dropped lives on. Run in a child process (this test
/// binary again), which aborts.
#[test]
fn a_crash_kills_the_registered_groups_through_the_supervisor() {
    use std::os::unix::process::CommandExt;
    if let Some(file) = std::env::var_os("MFU_STEAL_SUPERVISOR_CHILD") {
        steal::signals::supervise().unwrap();
        let start = |name: &str| {
            let script = format!("sleep 300 & echo {name} $! >> \"$PIDS\"; wait");
            let child = std::process::Command::new("/bin/sh")
                .args(["-c", &script])
                .env("PIDS", &file)
                .process_group(0)
                .spawn()
                .unwrap();
            (
                steal::signals::kill_on_exit(child.id() as i32).unwrap(),
                child,
            )
        };
        let kept = start("kept");
        let (forgotten, _child) = start("forgotten");
        drop(forgotten);
        let started = Instant::now();
        while std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .count()
            < 2
        {
            assert!(started.elapsed() < Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(5));
        }
        std::mem::forget(kept);
        std::process::abort();
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_crash_kills_the_registered_groups_through_the_supervisor",
        ])
        .args(["--nocapture", "--test-threads", "1"])
        .env("MFU_STEAL_SUPERVISOR_CHILD", &file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child was to crash");
    let pids: Vec<(String, i32)> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| {
            let (name, pid) = l.split_once(' ').unwrap();
            (name.to_string(), pid.parse().unwrap())
        })
        .collect();
    let pid = |want: &str| pids.iter().find(|(n, _)| n == want).unwrap().1;
    let (kept, forgotten) = (pid("kept"), pid("forgotten"));
    let started = Instant::now();
    while alive(kept) && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let forgotten_alive = alive(forgotten);
    // SAFETY: signals the test's own leftovers, by pid.
    unsafe {
        libc::kill(kept, libc::SIGKILL);
        libc::kill(forgotten, libc::SIGKILL);
    }
    assert!(!alive(kept), "a registered group outlived the crash");
    assert!(
        forgotten_alive,
        "the supervisor killed a group it was told to forget"
    );
}
