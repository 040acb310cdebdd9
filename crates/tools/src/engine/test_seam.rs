//! A pause between a tool's listing (walk or list read) and its action, for the race tests.
//!
//! The tree can change between the two phases; the race tests change it there on purpose (a
//! directory swapped for a symlink to an outside tree) and check that nothing outside changes.
//! With `MFU_RS_TEST_PAUSE_AFTER_LISTING=FILE` in the environment, rank 0 creates `FILE.ready`
//! once the listing is done and waits (up to 60 s) until `FILE.go` exists; every rank waits for
//! it. Without the variable this is one environment look-up.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use steal::Comm;

/// A change queued by [`change_at_next_pause`] (in-process tests).
type Change = Box<dyn FnOnce() + Send>;
static CHANGE: Mutex<Option<Change>> = Mutex::new(None);
/// Set once a change was ever queued: from then on every pause synchronises the ranks, so that
/// all ranks of a run agree on whether there is a pause.
static IN_PROCESS: AtomicBool = AtomicBool::new(false);

/// For tests that run a tool in-process (ranks as threads): run `change` once, on rank 0, at
/// the next pause after a listing, before any rank goes on.
pub fn change_at_next_pause(change: impl FnOnce() + Send + 'static) {
    *CHANGE.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(change));
    IN_PROCESS.store(true, Ordering::SeqCst);
}

/// The environment variable that enables the pause.
pub const PAUSE_VAR: &str = "MFU_RS_TEST_PAUSE_AFTER_LISTING";

/// Pause here if the race tests asked for it (collective: every rank calls it).
pub fn after_listing(comm: &dyn Comm) {
    if IN_PROCESS.load(Ordering::SeqCst) {
        if comm.rank() == 0 {
            let change = CHANGE.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(change) = change {
                change();
            }
        }
        comm.barrier();
    }
    let Some(base) = std::env::var_os(PAUSE_VAR) else {
        return;
    };
    if comm.rank() == 0 {
        let base = PathBuf::from(base);
        let ready = with_suffix(&base, ".ready");
        let go = with_suffix(&base, ".go");
        let _ = std::fs::write(&ready, b"");
        let start = Instant::now();
        while !go.exists() && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    comm.barrier();
}

fn with_suffix(base: &std::path::Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Files per rank that the copy engine and cmp handle in one round: `default`, or
/// `MFU_RS_TEST_ROUND_FILES` when set (tests use a few files to reach the rounds path on a small
/// tree). Read once per process.
pub fn round_files(default: usize) -> usize {
    static FROM_ENV: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    FROM_ENV
        .get_or_init(|| {
            std::env::var("MFU_RS_TEST_ROUND_FILES")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n: &usize| n > 0)
        })
        .unwrap_or(default)
}

/// The environment variable of [`corrupt_before_verify`]: a file name.
pub const CORRUPT_VAR: &str = "MFU_RS_TEST_CORRUPT_BEFORE_VERIFY";

/// For the `--verify` and `--manifest` tests: when `MFU_RS_TEST_CORRUPT_BEFORE_VERIFY` names the
/// file name of `path`, flip the first byte of the range at `offset` (of `len` bytes) of the
/// file behind `written`, between the write and the read-back that must catch it (without
/// `--verify`: a copy damaged after its write, which a manifest must not certify). Without
/// the variable this is one load of a value read once per process.
pub fn corrupt_before_verify(
    written: rustix::fd::BorrowedFd<'_>,
    path: &[u8],
    offset: u64,
    len: u64,
) {
    use std::os::unix::ffi::OsStrExt;
    // Read once: every chunk of every copy passes here.
    static NAME: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
    let Some(name) = NAME.get_or_init(|| std::env::var_os(CORRUPT_VAR)) else {
        return;
    };
    if len == 0 || flist::path::basename(path) != name.as_bytes() {
        return;
    }
    let fd = rustix::fd::AsRawFd::as_raw_fd(&written);
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/self/fd/{fd}"))
    else {
        return;
    };
    let mut byte = [0u8];
    if std::os::unix::fs::FileExt::read_exact_at(&file, &mut byte, offset).is_ok() {
        byte[0] ^= 0xff;
        let _ = std::os::unix::fs::FileExt::write_all_at(&file, &byte, offset);
    }
}

/// The environment variable of [`after_chunk_read`]: a file name.
pub const PAUSE_CHUNK_VAR: &str = "MFU_RS_TEST_PAUSE_AFTER_CHUNK";

/// Pause after the first chunk this process copied, for the tests of a source that changes
/// while it is read: with `MFU_RS_TEST_PAUSE_AFTER_CHUNK=FILE` in the environment, the first
/// worker to finish a chunk creates `FILE.ready` and waits (up to 60 s) until `FILE.go`
/// exists; other workers go on. Without the variable this is one look-up (cached).
pub fn after_chunk_read() {
    static BASE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    static DONE: AtomicBool = AtomicBool::new(false);
    let Some(base) = BASE.get_or_init(|| std::env::var_os(PAUSE_CHUNK_VAR).map(PathBuf::from))
    else {
        return;
    };
    if DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    let _ = std::fs::write(with_suffix(base, ".ready"), b"");
    let go = with_suffix(base, ".go");
    let start = Instant::now();
    while !go.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The environment variable of [`fake_lustre`]: the roots of a pretend Lustre, `:`-separated.
pub const FAKE_LUSTRE_VAR: &str = "MFU_RS_TEST_FAKE_LUSTRE";
/// With [`FAKE_LUSTRE_VAR`]: set (to anything) to model layout swap in the pretend Lustre.
pub const FAKE_LUSTRE_SWAP_VAR: &str = "MFU_RS_TEST_FAKE_LUSTRE_SWAP";

/// For the tests of the Lustre paths run as separate programs (under `mpirun`): with
/// `MFU_RS_TEST_FAKE_LUSTRE=ROOT[:ROOT...]` every Lustre call of the process goes to
/// `lustre_sys::fake::Fake` holding those roots (8 OSTs), which reads the layouts the test
/// stored on the files (`Fake::store`). There is no Lustre on the build machines. Without the
/// variable this is one environment look-up per handle made.
pub fn fake_lustre() -> Option<crate::engine::lustre::LustreHandle> {
    use std::os::unix::ffi::OsStrExt;
    let roots = std::env::var_os(FAKE_LUSTRE_VAR)?;
    let roots = roots
        .as_bytes()
        .split(|&b| b == b':')
        .filter(|r| !r.is_empty())
        .map(|r| PathBuf::from(std::ffi::OsStr::from_bytes(r)))
        .collect();
    let swap = std::env::var_os(FAKE_LUSTRE_SWAP_VAR).is_some();
    Some(crate::engine::lustre::LustreHandle::new(
        lustre_sys::fake::Fake::new(roots, 8).with_swap(swap),
    ))
}

/// The environment variable of [`no_seek_data`]: any value.
pub const NO_SEEK_DATA_VAR: &str = "MFU_RS_TEST_NO_SEEK_DATA";

thread_local! {
    /// [`no_seek_data`] for the unit tests of the calling thread only.
    static NO_SEEK_DATA_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// For the tests of the fallback of sparse copies: with `MFU_RS_TEST_NO_SEEK_DATA` in the
/// environment (or [`set_no_seek_data_here`] on this thread), `lseek(SEEK_DATA)` is taken to
/// answer `EOPNOTSUPP`, as on a file system without it, and the data is copied whole. Without
/// the variable this is a thread-local read and one load of a value read once per process.
pub fn no_seek_data() -> bool {
    static FROM_ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    NO_SEEK_DATA_HERE.get()
        || *FROM_ENV.get_or_init(|| std::env::var_os(NO_SEEK_DATA_VAR).is_some())
}

/// Make [`no_seek_data`] true (or false again) on the calling thread (unit tests).
#[cfg(test)]
pub fn set_no_seek_data_here(on: bool) {
    NO_SEEK_DATA_HERE.set(on);
}
