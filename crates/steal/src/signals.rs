//! SIGINT/SIGTERM as a flag.
//!
//! The handlers only store to an atomic (async-signal-safe, through `signal-hook`): no thread
//! and no event loop is started for them, which keeps a short run's start-up to what the work
//! needs. The rank's main thread (the only one that calls MPI) reads the flag between work items.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// When the first signal came (CLOCK_MONOTONIC, ns; 0: none yet).
static FIRST_AT: AtomicU64 = AtomicU64::new(0);

/// A signal this soon after the first is the same stop delivered twice, not a second one: at a
/// job's time limit Slurm signals every task of a step, and `mpirun` (signalled too) passes its
/// own SIGTERM on to the ranks, so each rank gets one signal from each within milliseconds.
pub const SAME_STOP_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// CLOCK_MONOTONIC in ns (async-signal-safe: clock_gettime(2)).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec on this stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

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
    FIRST_AT.store(0, Ordering::SeqCst);
}

/// Catch SIGINT and SIGTERM: the first sets [`stop_flag`] (work stops being taken, what is in
/// flight finishes, the summary is printed and the exit status is non-zero); a second one (at
/// least [`SAME_STOP_WITHIN`] after the first: the same stop delivered twice is one) ends
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
            // SAFETY: the action only uses atomics and calls clock_gettime(2), kill(2) and
            // _exit(2), which are async-signal-safe; it allocates nothing and takes no lock.
            let _ = unsafe {
                signal_hook::low_level::register(sig, || {
                    let now = monotonic_ns().max(1);
                    if !STOP.load(Ordering::SeqCst) {
                        FIRST_AT.store(now, Ordering::SeqCst);
                        return;
                    }
                    let first = FIRST_AT.load(Ordering::SeqCst);
                    let window = SAME_STOP_WITHIN.as_nanos() as u64;
                    if first != 0 && now.saturating_sub(first) < window {
                        return;
                    }
                    kill_groups();
                    signal_hook::low_level::exit(SECOND_SIGNAL_STATUS);
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
        let pgid = self.slot.swap(0, Ordering::SeqCst);
        if pgid > 0 {
            // The supervisor forgets it too, before the caller reaps the leader. A failure
            // means the supervisor is gone: nothing is left to forget there.
            let _ = tell_supervisor(-pgid);
        }
    }
}

/// Have a second SIGINT/SIGTERM send SIGKILL to process group `pgid` (> 0) before the process
/// exits, for as long as the returned guard lives; and, once [`supervise`] has started this
/// process's supervisor, have the supervisor SIGKILL it when this process ends in any way
/// while the guard lives. Drop the guard before the group's leader is reaped, so that the id
/// is never killed once the system may give it to another process.
///
/// `Err`: the supervisor was started but can no longer be told (it died); the group is then
/// not registered anywhere, and the caller must not let it run on unsupervised.
pub fn kill_on_exit(pgid: i32) -> std::io::Result<KillOnExit> {
    assert!(pgid > 0, "a process group id is positive");
    tell_supervisor(pgid)?;
    Ok(register(pgid))
}

/// Put `pgid` in a free slot of [`GROUPS`].
fn register(pgid: i32) -> KillOnExit {
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
    signal_groups(libc::SIGKILL);
}

/// Send `signal` to every process group registered with [`kill_on_exit`] now (a rank that its
/// launcher is about to kill stops its commands first). Async-signal-safe: atomic loads and
/// kill(2) only. Returns how many groups were signalled.
pub fn signal_groups(signal: i32) -> usize {
    let mut sent = 0;
    let mut chunk = GROUPS.load(Ordering::SeqCst);
    // SAFETY: as in `kill_on_exit`, every chunk in the chain lives for the whole process.
    while let Some(c) = unsafe { chunk.as_ref() } {
        for slot in &c.slots {
            let pgid = slot.load(Ordering::SeqCst);
            if pgid > 0 {
                // SAFETY: kill(2) with a negative pid signals the group; nothing is borrowed.
                unsafe {
                    libc::kill(-pgid, signal);
                }
                sent += 1;
            }
        }
        chunk = c.next.load(Ordering::SeqCst);
    }
    sent
}

// The supervisor.
//
// The signal handlers above cover a process that gets the chance to run them. A rank under a
// launcher often does not: mpirun sends SIGTERM then SIGKILL to the rank's process group, srun
// likewise, and a rank may crash or be SIGKILLed by hand. The commands run in process groups
// of their own (so that a terminal's Ctrl-C reaches only `parallel`), so none of that reaches
// them, and they would run on as orphans, unlogged, and be started again by a `--resume`.
//
// So [`supervise`] forks, before any command starts, a small process that outlives the rank
// by design: it sits in a process group of its own (the launcher's group kill misses it),
// ignores the terminal and termination signals, and holds the read end of a pipe whose write
// end only this process holds (close-on-exec: no command inherits it). Over that pipe the
// process tells it each command group as it starts (its id) and ends (minus its id, sent
// before the leader is reaped). The pipe reaches end-of-file exactly when this process is
// gone, however it went (exit, crash, SIGKILL); the supervisor then reads every message left,
// SIGKILLs each group still registered and exits. PR_SET_PDEATHSIG alone would not do: it
// reaches only the shell, not what the shell started (the `sleep 300 &` of `sleep 300 & wait`),
// and fires when the forking thread ends, not the process.
//
// The child of fork() in a multi-threaded process may only make async-signal-safe calls: the
// supervisor uses raw system calls only, and its table is mapped memory, not the heap.

/// The write end of the supervisor's pipe; -1 before [`supervise`] started it.
static SUPERVISOR: AtomicI32 = AtomicI32::new(-1);

/// Most command groups the supervisor tracks at once (a 4 MiB mapping, touched only as far as
/// used); one more is killed at once rather than left unsupervised.
const SUPERVISOR_SLOTS: usize = 1 << 20;

/// Start this process's supervisor, once (later calls return the first one's result): from
/// then on, every group registered with [`kill_on_exit`] is SIGKILLed when this process ends
/// while it is registered, even by SIGKILL. Call it before starting the commands it must
/// cover. `Err`: no pipe or no fork; commands would not be supervised.
pub fn supervise() -> Result<(), String> {
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    STARTED.get_or_init(start_supervisor).clone()
}

fn start_supervisor() -> Result<(), String> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "create the supervisor's pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    let [read_end, write_end] = fds;
    // SAFETY: the child runs only `supervisor`, which makes async-signal-safe calls and never
    // returns.
    match unsafe { libc::fork() } {
        -1 => {
            let e = std::io::Error::last_os_error();
            // SAFETY: both descriptors are ours and used nowhere else.
            unsafe {
                libc::close(read_end);
                libc::close(write_end);
            }
            Err(format!("start the supervisor of the commands (fork): {e}"))
        }
        0 => supervisor(read_end, write_end),
        _ => {
            // SAFETY: the read end is the supervisor's alone now.
            unsafe { libc::close(read_end) };
            SUPERVISOR.store(write_end, Ordering::SeqCst);
            Ok(())
        }
    }
}

/// Send one message (a group id; negative: forget it) to the supervisor, if it was started.
/// One write of 4 bytes is atomic on a pipe, whatever thread writes beside it.
fn tell_supervisor(message: i32) -> std::io::Result<()> {
    let fd = SUPERVISOR.load(Ordering::SeqCst);
    if fd < 0 {
        return Ok(());
    }
    let bytes = message.to_ne_bytes();
    loop {
        // SAFETY: writes 4 bytes from a live array. The binary ignores SIGPIPE (Rust's
        // default), so a gone reader is EPIPE, not death.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n == bytes.len() as isize {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if n < 0 && e.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return Err(if n < 0 {
            e
        } else {
            std::io::Error::other("short write to the supervisor")
        });
    }
}

/// The supervisor's whole life, in the child of fork(): raw system calls only.
fn supervisor(read_end: libc::c_int, write_end: libc::c_int) -> ! {
    // SAFETY: every call below is a system call on this process's own state or memory it maps;
    // nothing touches the heap, locks or the parent's threads.
    unsafe {
        libc::close(write_end);
        // Out of the launcher's and the terminal's reach: their group signals miss it.
        libc::setpgid(0, 0);
        // Named for `ps`, not after the thread that forked it.
        libc::prctl(libc::PR_SET_NAME, c"mfu-supervisor".as_ptr());
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // Hold none of the rank's descriptors: not its output (a launcher or a pipe reader
        // would wait for this process to let go), not its files, not its MPI sockets.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        close_all_but(read_end);
        let table = libc::mmap(
            std::ptr::null_mut(),
            SUPERVISOR_SLOTS * 4,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if table == libc::MAP_FAILED {
            // The rank's next registration fails (EPIPE): no command runs unsupervised.
            libc::_exit(1);
        }
        let table = std::slice::from_raw_parts_mut(table.cast::<i32>(), SUPERVISOR_SLOTS);
        let mut used = 0usize;
        let mut buf = [0u8; 4096];
        let mut partial = [0u8; 4];
        let mut have = 0usize;
        loop {
            let n = libc::read(read_end, buf.as_mut_ptr().cast(), buf.len());
            if n == 0 {
                break;
            }
            if n < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            for &b in &buf[..n as usize] {
                partial[have] = b;
                have += 1;
                if have < 4 {
                    continue;
                }
                have = 0;
                let message = i32::from_ne_bytes(partial);
                if message > 0 {
                    match table[..used].iter().position(|&g| g == 0) {
                        Some(i) => table[i] = message,
                        None if used < SUPERVISOR_SLOTS => {
                            table[used] = message;
                            used += 1;
                        }
                        None => {
                            libc::kill(-message, libc::SIGKILL);
                        }
                    }
                } else if message < 0 {
                    if let Some(i) = table[..used].iter().position(|&g| g == -message) {
                        table[i] = 0;
                    }
                    while used > 0 && table[used - 1] == 0 {
                        used -= 1;
                    }
                }
            }
        }
        // The process is gone: what it still ran must not outlive it.
        for &pgid in &table[..used] {
            if pgid > 0 {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
        libc::_exit(0)
    }
}

/// Close every descriptor above 2 but `keep` (in the supervisor, which uses no other one).
fn close_all_but(keep: libc::c_int) {
    let close_range = |low: libc::c_int, high: libc::c_uint| {
        // SAFETY: closes descriptors only; no memory is passed.
        unsafe { libc::syscall(libc::SYS_close_range, low as libc::c_uint, high, 0) == 0 }
    };
    let below = keep <= 3 || close_range(3, (keep - 1) as libc::c_uint);
    let above = close_range(keep + 1, libc::c_uint::MAX);
    if below && above {
        return;
    }
    // A kernel before close_range (5.9): one by one, up to the descriptor limit.
    // SAFETY: getrlimit writes only into `limit`; close takes a number.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            1024
        };
        for fd in 3..max {
            if fd != keep {
                libc::close(fd);
            }
        }
    }
}
