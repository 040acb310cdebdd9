//! Checkpoints: a long run records the units of work it finished, durably and cheaply, so that
//! the same command run again (after a job's time limit, a kill, a lost node) continues instead
//! of starting over.
//!
//! One mechanism for every tool: a directory (`DIR/.NAME.mfu-checkpoint/` beside the output
//! `DIR/NAME`, a state directory for a tool without an output file, or `--checkpoint PATH`)
//! holding the inputs the run was made for ([`Inputs`]: paths, options that change the result,
//! the digest of the list the work is planned from) and append-only logs of marks. A tool marks
//! a unit (a member, a chunk, a directory, a file) with a global key, the same at any rank count,
//! and the payload a rerun needs to skip it, once the unit's output is written.
//!
//! Durability, in two steps. A kill (-9, a time limit's SIGKILL) loses nothing a process wrote:
//! the kernel keeps it in its page cache and writes it back; only a crash or reboot of the node
//! loses what was not yet synced. So a flusher thread writes the marks every twentieth of the
//! run so far (25 ms to 2 s, [`next_wait`]) without waiting for any sync (a kill loses at most
//! about one interval of work), and a syncer thread syncs the outputs registered with
//! [`Checkpoint::durable`] every [`OUTPUT_SYNC_INTERVAL`] (30 s) or more, then records how far
//! the marks are backed by synced data and syncs the log. Each log names its kernel's boot
//! ([`boot_id`]): a rerun trusts every mark of a log written on the boot of one of its ranks,
//! and only the synced marks of any other (see `store`). A run thus goes at the pace of its
//! page cache, as GNU tar and cp do, not of its disk; a stop (SIGTERM) syncs its outputs and
//! its log before it exits. A sync that fails (a writeback error) fails the run and is
//! recorded in the log, whose unsynced marks are then trusted by no rerun. The log of a run
//! without outputs is synced on the outputs' schedule (its marks carry their data).
//!
//! Trust: a rerun continues only from a checkpoint of this user (a 0700 directory, regular files
//! with one link, nothing followed), of the same tool, whose every input is equal; its marks
//! count only when their check, keyed by the checkpoint's random nonce, holds. Anything else is
//! not used: a damaged or stale checkpoint of ours is removed and the run starts over, saying
//! why; something else at the default name is left alone and the run goes on without a
//! checkpoint (a warning); at a `--checkpoint PATH` it is refused before any work.

mod inputs;
mod prior;
mod store;

pub use inputs::{add_record_sum, digest_of_sums, list_digest, record_sums, Inputs};
pub use prior::Prior;

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use steal::{Comm, CommExt};
use store::Found;

/// Where a run keeps its checkpoint (`--checkpoint PATH`, `--no-checkpoint`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Choice {
    /// The default: `DIR/.NAME.mfu-checkpoint` beside the output `DIR/NAME`, or, for a tool
    /// without an output file, `$XDG_STATE_HOME/mfu-rs/checkpoints/TOOL-DIGEST`
    /// (`~/.local/state/...` without it).
    #[default]
    Beside,
    /// At this path (a directory the run creates).
    At(#[serde(with = "serde_bytes")] Vec<u8>),
    /// No checkpoint: a rerun starts over.
    Off,
}

/// A failure to keep a checkpoint, naming the path and the operation.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize, PartialEq, Eq)]
#[error("{0}")]
pub struct CheckpointError(pub String);

/// What a tool tells [`open`] about its run.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The run's final output file, beside which the default checkpoint lives; `None` (or `-`,
    /// standard output) for a tool without one: its default checkpoint is then named after
    /// the tool and the fields that name the job ([`Inputs::short_name`]).
    pub output: Option<&'a [u8]>,
    /// What the result depends on.
    pub inputs: Inputs,
}

/// What [`open`] found.
#[derive(Debug)]
pub struct Opened {
    /// The checkpoint this run records into; `None` with [`Choice::Off`] or when the default
    /// name holds something that is not a checkpoint of this user's.
    pub checkpoint: Option<Checkpoint>,
    /// What earlier runs finished (empty when starting fresh); the same on every rank.
    pub prior: Prior,
    /// A line for the user (through `Context::info` on rank 0): continuing, starting over and
    /// why, or running without a checkpoint and why.
    pub notice: Option<String>,
}

impl Opened {
    /// Tell the notice (continuing, starting over and why, or running without a checkpoint), on
    /// rank 0, as a line of `context`'s detail.
    pub fn tell(&self, comm: &dyn Comm, context: &crate::engine::context::Context) {
        if let (0, Some(notice)) = (comm.rank(), &self.notice) {
            context.info(format!("{}\n", notice.trim_end()));
        }
    }
}

/// How a run ended, for [`Checkpoint::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The run went to its end (items that failed included): the checkpoint is removed.
    Complete,
    /// A signal stopped it: marks made durable, the checkpoint kept for the rerun.
    Stopped,
    /// It ended early on an error: the checkpoint is kept (a rerun after the cause is fixed
    /// continues).
    Failed,
}

impl Outcome {
    /// The outcome of a run that went to its end, or that a signal `stopped`.
    pub fn of_stop(stopped: bool) -> Outcome {
        if stopped {
            Outcome::Stopped
        } else {
            Outcome::Complete
        }
    }
}

/// Output data that must be durable before any mark is written.
#[derive(Debug, Clone)]
pub enum Durable {
    /// `fdatasync` this file.
    File(Arc<OwnedFd>),
    /// `syncfs` the file system of this open file (for a tool writing many files).
    FileSystem(Arc<OwnedFd>),
}

/// A file's identity and state, as marks record it to tell whether what they describe is
/// still there unchanged: device, inode, size (bytes), mtime (s, ns), ctime (s, ns). Equal
/// stamps before and after a read: the file did not change while read.
pub type Stamp = [u64; 7];

/// The [`Stamp`] of a `stat` result.
pub fn stamp_of(st: &rustix::fs::Stat) -> Stamp {
    [
        st.st_dev,
        st.st_ino,
        st.st_size as u64,
        st.st_mtime as u64,
        st.st_mtime_nsec as _,
        st.st_ctime as u64,
        st.st_ctime_nsec as _,
    ]
}

/// The [`Stamp`] of a list record's metadata (a walk's `stat`): equal to [`stamp_of`] of the
/// same `stat`.
pub fn stamp_of_meta(m: &flist::Meta) -> Stamp {
    [
        m.dev,
        m.ino,
        m.size,
        m.mtime as u64,
        u64::from(m.mtime_nsec),
        m.ctime as u64,
        u64::from(m.ctime_nsec),
    ]
}

/// The fixed flush interval `MFU_RS_CHECKPOINT_INTERVAL_MS` asks for (tests), if any.
fn fixed_interval() -> Option<Duration> {
    static EVERY: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        std::env::var("MFU_RS_CHECKPOINT_INTERVAL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
    })
}

/// Whether a write of the marks syncs the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncLog {
    /// Now (a flush asked for: a stop, an early end, a plan recorded).
    Now,
    /// No: the syncer does it (see [`sync_every`]); the flusher never waits for the disk.
    Later,
}

/// [`Shared::log`]: this rank's log of marks and what of it is synced.
struct Log {
    /// The log, opened at its first write (which is its [`store::BOOT`] record); shared with
    /// the syncer, which syncs it without holding the lock.
    file: Option<Arc<std::fs::File>>,
    /// Bytes written to the log so far: the offset a [`store::SYNCED`] record names.
    written: u64,
    /// The offset the last [`store::SYNCED`] record named.
    synced_to: u64,
    /// Bytes of the log known to be on disk (synced).
    log_synced: u64,
}

impl Log {
    fn new() -> Log {
        Log {
            file: None,
            written: 0,
            synced_to: 0,
            log_synced: 0,
        }
    }
}

/// The syncer syncs the registered outputs this long after the checkpoint opened and after
/// its last sync (30 s), or, when a sync takes longer, four times its duration: what a crash
/// of the node can lose beyond the marks' interval (the kernel's own writeback leaves data
/// unwritten up to 30 s by default, `vm.dirty_expire_centisecs`). Not shorter: a process
/// cannot end while one of its threads is in a sync, so a sync under way as the run ends
/// makes the run wait for its disk, which a run without a checkpoint leaves to the kernel
/// (every 2 s, tar -x of 2.2 GiB on this VM's disk took 3.5 s where it took 1.8-3.3 s without
/// one). A run shorter than this syncs nothing before its end.
const OUTPUT_SYNC_INTERVAL: Duration = Duration::from_secs(30);

/// A sync of the outputs is followed by at least this many times its duration without one.
const WAIT_PER_SYNC_TIME: u32 = 4;

/// Flushes are this share of the run so far apart (1/20): the share of its work a short run
/// loses to a kill. (A tenth left a kill -9 at three quarters of a 0.6 s tar -x redoing 1.16
/// times the work; the flusher's cost does not grow with it on tmpfs, and on disk the writeback
/// of outputs begun after each flush leaves each sync less to do.)
const RUN_SHARE_PER_INTERVAL: u32 = 20;
/// Flushes are at most this far apart (s): the work a crash can lose in a long run.
const LONGEST_INTERVAL: Duration = Duration::from_secs(2);
/// Flushes are at least this far apart (ms).
const SHORTEST_INTERVAL: Duration = Duration::from_millis(25);
/// A flush (a write of the marks) or a tick of the syncer is followed by a wait of at least
/// this many times its own duration.
const WAIT_PER_FLUSH_TIME: u32 = 1;

/// How long the flusher waits before its next flush, `since` after the checkpoint was opened,
/// the last flush having taken `last`: a twentieth of the run so far
/// ([`RUN_SHARE_PER_INTERVAL`]), at least `last`, between [`SHORTEST_INTERVAL`] and
/// [`LONGEST_INTERVAL`]. A kill then loses at most about a twentieth of the work done (a fixed
/// 2 s would lose all of a short run's first 2 s; a fixed 0.2 s, all of a 0.2 s run), and a
/// run longer than 40 s flushes every 2 s.
fn next_wait(since: Duration, last: Duration) -> Duration {
    schedule(since, last, fixed_interval())
}

/// [`next_wait`] with the test knob's interval, `fixed`, as an argument.
fn schedule(since: Duration, last: Duration, fixed: Option<Duration>) -> Duration {
    fixed.unwrap_or_else(|| {
        (since / RUN_SHARE_PER_INTERVAL)
            .max(last.saturating_mul(WAIT_PER_FLUSH_TIME))
            .clamp(SHORTEST_INTERVAL, LONGEST_INTERVAL)
    })
}

/// The test knobs, read once: stop (as a SIGTERM does) after this process's N-th mark
/// (`MFU_RS_TEST_CHECKPOINT_STOP_AFTER`), SIGKILL this process once its N-th mark is durable
/// (`..._DIE_AFTER`), sleep this many ms after each mark (`..._SLOW_MS`); and, read when used,
/// SIGKILL it before [`remove_completed`] removes anything (`..._DIE_AT_EXIT`) or before
/// [`Checkpoint::finish`] removes a complete checkpoint (`..._DIE_BEFORE_REMOVAL`).
fn knob(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn stop_after() -> Option<u64> {
    static V: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *V.get_or_init(|| knob("MFU_RS_TEST_CHECKPOINT_STOP_AFTER"))
}

fn die_after() -> Option<u64> {
    static V: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *V.get_or_init(|| knob("MFU_RS_TEST_CHECKPOINT_DIE_AFTER"))
}

fn slow_ms() -> Option<u64> {
    static V: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *V.get_or_init(|| knob("MFU_RS_TEST_CHECKPOINT_SLOW_MS"))
}

/// Marks made by this process (all checkpoints, all thread ranks): what the knobs count.
static MARKS_MADE: AtomicU64 = AtomicU64::new(0);

/// A run's open checkpoint (one per rank). Marks may come from any thread.
pub struct Checkpoint {
    shared: Arc<Shared>,
    /// Rank 0's descriptor holding the run's lock (see [`lock`]): here, not in [`Shared`],
    /// so that the syncer, which is not waited for, never keeps it after the run.
    held: Option<OwnedFd>,
    /// Taken by the first of [`Checkpoint::stop_flushing`] and [`Checkpoint::finish`].
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// [`Checkpoint::finish`] ran: nothing is left for [`Drop`] to flush.
    ended: bool,
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint")
            .field("path", &flist::path::display(&self.shared.path))
            .field("fresh", &self.shared.fresh)
            .finish_non_exhaustive()
    }
}

struct Shared {
    path: Vec<u8>,
    dir: OwnedFd,
    id: (u64, u64),
    fresh: bool,
    nonce: u64,
    /// This rank's kernel's boot id ([`boot_id`]), the first record of its log.
    boot: Vec<u8>,
    /// Every rank of the run shares one kernel (one known boot id): one page cache.
    one_kernel: bool,
    log_name: Vec<u8>,
    log: Mutex<Log>,
    /// Encoded marks not yet written, and how many.
    pending: Mutex<(Vec<u8>, u64)>,
    durables: Mutex<Vec<Durable>>,
    /// The flusher's and the syncer's wake-up: set to end them.
    done: (Mutex<bool>, Condvar),
    /// The first failure to write marks or sync the outputs (later marks are then not
    /// written: the run goes on, a rerun redoes more).
    failed: Mutex<Option<String>>,
    /// A sync of the outputs failed (a writeback error): the run's data may not be on disk,
    /// which [`Checkpoint::finish`] tells whatever the outcome.
    output_failed: Mutex<Option<String>>,
    /// The buffer `pending` takes at the next flush (see [`Shared::flush`]).
    spare: Mutex<Vec<u8>>,
    /// Removed as soon as the run completes, never at the process's end (see
    /// [`Checkpoint::remove_on_completion`]).
    eager: AtomicBool,
    /// [`OUTPUT_SYNC_INTERVAL`] in ms (tests shorten it).
    output_sync_ms: AtomicU64,
}

/// What rank 0 decided, for every rank.
#[derive(Serialize, Deserialize)]
struct Decision {
    /// `None`: no checkpoint for this run.
    path: Option<serde_bytes::ByteBuf>,
    id: (u64, u64),
    fresh: bool,
    nonce: u64,
    attempt: u64,
    prior: Prior,
    notice: Option<String>,
}

/// The directory of the default checkpoints of tools without an output file,
/// `$XDG_STATE_HOME/mfu-rs/checkpoints` (`~/.local/state/...` without it), created (mode 0700)
/// if missing. A tool that walks a tree leaves it out of the walk.
pub fn state_dir() -> Result<std::path::PathBuf, String> {
    let dir = state_dir_path()?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Where [`state_dir`] is, not created (a tool that must not create it in its target looks
/// first).
pub fn state_dir_path() -> Result<std::path::PathBuf, String> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|s| !s.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| std::path::PathBuf::from(h).join(".local/state"))
        })
        .ok_or("neither XDG_STATE_HOME nor HOME is set")?;
    Ok(state.join("mfu-rs").join("checkpoints"))
}

/// The directory that holds the checkpoints `choice` names, normalised against `cwd`: the
/// `--checkpoint PATH`, or `mfu-rs/checkpoints` in the state directory (`$XDG_STATE_HOME`, or
/// `~/.local/state`) that holds the default ones; `None` with `--no-checkpoint`. A tree read
/// for a run is read without it: its marks change as the run goes, so a rerun would find
/// another listing, and start over, every time (`dup ~`). The default one is created here
/// (0700, as the checkpoint would create it), before the tree is read: the directories that
/// lead to it are then the same for the first run and its reruns.
pub fn checkpoints_dir(choice: &Choice, cwd: &[u8]) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    match choice {
        Choice::Off => None,
        Choice::At(p) => Some(flist::path::normalize(p, cwd)),
        // A failure is the checkpoint's to report, when it is opened.
        Choice::Beside => state_dir()
            .ok()
            .map(|dir| flist::path::normalize(dir.as_os_str().as_bytes(), cwd)),
    }
}

/// Drop from `list` what lies in the checkpoints directory `dir` (see [`checkpoints_dir`]).
pub fn without_checkpoints(list: &mut flist::FileList, dir: Option<&[u8]>) {
    if let Some(dir) = dir {
        list.retain(|e| !flist::path::is_prefix(dir, e.path));
    }
}

/// `path` made absolute against the working directory (normalised: no `.`, `..` or `//`).
fn absolute(path: &[u8]) -> Vec<u8> {
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    flist::path::normalize(path, &cwd)
}

/// The checkpoint's path for `choice` and `plan`; `None` when there is none.
fn location(choice: &Choice, plan: &Plan<'_>) -> Result<Option<Vec<u8>>, String> {
    match choice {
        Choice::Off => Ok(None),
        // Absolute: the checkpoint is removed through its parent directory at the end, and
        // every rank must name the same directory whatever its working directory.
        Choice::At(p) => Ok(Some(absolute(p))),
        Choice::Beside => match plan.output {
            Some(out) if out != b"-" && !out.is_empty() => {
                let out = absolute(out);
                let name = beside_name(flist::path::basename(&out));
                Ok(Some(flist::atomic::beside(&out, &name)))
            }
            _ => {
                use std::os::unix::ffi::OsStrExt;
                let dir = state_dir()?;
                let cwd = std::env::current_dir().unwrap_or_default();
                let name = plan.inputs.short_name(cwd.as_os_str().as_bytes());
                Ok(Some(dir.join(name).as_os_str().as_bytes().to_vec()))
            }
        },
    }
}

use std::os::unix::fs::DirBuilderExt;

/// The end of a default checkpoint's name.
const SUFFIX: &[u8] = b".mfu-checkpoint";

/// The default checkpoint's name for the output named `base`: `.BASE.mfu-checkpoint`, or, when
/// that would be longer than a file name may be (255 bytes), BASE cut and followed by `~` and
/// the XXH64 of the whole of it (two long names that share their beginning never share a
/// checkpoint).
pub(crate) fn beside_name(base: &[u8]) -> Vec<u8> {
    const NAME_MAX: usize = 255;
    if 1 + base.len() + SUFFIX.len() <= NAME_MAX {
        return [b".", base, SUFFIX].concat();
    }
    let digest = format!("~{:016x}", xxhash_rust::xxh64::xxh64(base, 0));
    let mut keep = NAME_MAX - 1 - digest.len() - SUFFIX.len();
    // Not inside a UTF-8 character (a name shown in a terminal stays readable).
    while keep > 1 && base[keep] & 0xc0 == 0x80 {
        keep -= 1;
    }
    [b".", &base[..keep], digest.as_bytes(), SUFFIX].concat()
}

/// A random 64-bit value (std's per-process random hash keys).
pub fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// Hold `dir` for this run (an exclusive `flock`, released when the descriptor is closed or
/// the process ends): two runs of one command at once would race on its output and its marks.
fn lock(dir: &OwnedFd, shown: &str) -> Result<(), CheckpointError> {
    use rustix::fs::{flock, FlockOperation};
    match flock(dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(CheckpointError(format!(
            "checkpoint {shown} is in use by another run of this command (nothing done): wait \
             for it to end, or give this run another --checkpoint"
        ))),
        // A file system without locks: nothing to hold.
        Err(_) => Ok(()),
    }
}

/// The boot id of this process's kernel (`/proc/sys/kernel/random/boot_id`, or, in tests,
/// `MFU_RS_TEST_BOOT_ID`): what tells a rerun whether the page cache that held an earlier
/// run's unsynced data is the one it runs on. Empty when unknown: it then matches no log.
pub(crate) fn boot_id() -> Vec<u8> {
    static ID: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let id = std::env::var_os("MFU_RS_TEST_BOOT_ID")
            .map(|v| std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str()).to_vec())
            .or_else(|| std::fs::read("/proc/sys/kernel/random/boot_id").ok())
            .unwrap_or_default();
        id.trim_ascii().to_vec()
    })
    .clone()
}

/// Rank 0's part of [`open`]: find, trust or replace, create. Also returns the checkpoint
/// directory, locked for this run. `boots`: every rank's [`boot_id`].
fn decide(
    choice: &Choice,
    plan: &Plan<'_>,
    boots: &[Vec<u8>],
) -> Result<(Decision, Option<OwnedFd>), CheckpointError> {
    let none = |notice: Option<String>| Decision {
        path: None,
        id: (0, 0),
        fresh: true,
        nonce: 0,
        attempt: 0,
        prior: Prior::default(),
        notice,
    };
    let path = match location(choice, plan) {
        Ok(Some(p)) => p,
        Ok(None) => return Ok((none(None), None)),
        Err(why) => {
            return Ok((
                none(Some(format!(
                    "running without a checkpoint: {why} (an interrupted run will start over)"
                ))),
                None,
            ))
        }
    };
    let shown = flist::path::display(&path).to_string();
    let mut notice = None;
    match store::inspect(&path)? {
        Found::Ours(dir, header) => match plan.inputs.differs_from(&header.inputs) {
            None => {
                lock(&dir, &shown)?;
                let read = store::read_marks(dir.as_fd(), header.nonce, boots)
                    .map_err(|e| CheckpointError(format!("read checkpoint {shown}: {e}")))?;
                let attempt = read.next;
                let prior = Prior::from_marks(read.marks);
                let untrusted = match read.untrusted {
                    0 => String::new(),
                    n => format!(
                        "; {n} more, marked on another node or before a reboot with their data \
                         not yet synced, are done again"
                    ),
                };
                let id = flist::atomic::identity(dir.as_fd())
                    .map_err(|e| CheckpointError(format!("stat {shown}: {e}")))?;
                let decision = Decision {
                    path: Some(path.into()),
                    id,
                    fresh: false,
                    nonce: header.nonce,
                    attempt,
                    notice: Some(format!(
                        "continuing from checkpoint {shown}: {} units done by earlier runs{untrusted}",
                        prior.len()
                    )),
                    prior,
                };
                return Ok((decision, Some(dir)));
            }
            Some(why) => {
                lock(&dir, &shown)?;
                notice = Some(format!(
                    "checkpoint {shown} not used ({why}): starting over"
                ));
                store::remove(&path, dir.as_fd())?;
            }
        },
        Found::Damaged(dir, why) => {
            lock(&dir, &shown)?;
            notice = Some(format!(
                "checkpoint {shown} not used ({why}): starting over"
            ));
            store::remove(&path, dir.as_fd())?;
        }
        Found::Foreign(why) => {
            if let Choice::At(_) = choice {
                return Err(CheckpointError(format!(
                    "--checkpoint {shown}: not a checkpoint of this user's ({why}): refusing to use \
                     or remove it (nothing done)"
                )));
            }
            return Ok((
                none(Some(format!(
                    "running without a checkpoint: {shown} is not one of this user's ({why}); it \
                     is left alone (an interrupted run will start over)"
                ))),
                None,
            ));
        }
        Found::Absent => {}
    }
    let header = store::Header {
        inputs: plan.inputs.clone(),
        nonce: random(),
    };
    let dir = store::create(&path, &header)?;
    lock(&dir, &shown)?;
    let id = flist::atomic::identity(dir.as_fd())
        .map_err(|e| CheckpointError(format!("stat {shown}: {e}")))?;
    let decision = Decision {
        path: Some(path.into()),
        id,
        fresh: true,
        nonce: header.nonce,
        attempt: 0,
        prior: Prior::default(),
        notice,
    };
    Ok((decision, Some(dir)))
}

/// Open the checkpoint of this run (see the module). Collective: rank 0 looks, decides and
/// creates; every rank then opens the same directory (checked by identity: the checkpoint
/// must be on a file system every rank sees, as the output is) and gets the same [`Prior`].
pub fn open(comm: &dyn Comm, choice: &Choice, plan: Plan<'_>) -> Result<Opened, CheckpointError> {
    let mut held = None;
    let boot = boot_id();
    let boots = match choice {
        Choice::Off => Vec::new(),
        _ => comm.all_gather(&boot),
    };
    let decided: Result<Decision, CheckpointError> = comm.bcast_with(0, || {
        decide(choice, &plan, &boots).map(|(d, dir)| {
            held = dir;
            d
        })
    });
    let d = decided?;
    let Some(path) = d.path else {
        return Ok(Opened {
            checkpoint: None,
            prior: d.prior,
            notice: d.notice,
        });
    };
    let path = path.into_vec();
    let opened = (|| {
        let dir = rustix::fs::open(
            flist::path::as_path(&path),
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| {
            CheckpointError(format!(
                "open checkpoint {}: {e}",
                flist::path::display(&path)
            ))
        })?;
        let id = flist::atomic::identity(dir.as_fd())
            .map_err(|e| CheckpointError(format!("stat {}: {e}", flist::path::display(&path))))?;
        if id != d.id {
            return Err(CheckpointError(format!(
                "checkpoint {}: rank {} sees another directory than rank 0 (it must be on a file \
                 system every rank shares; choose one with --checkpoint)",
                flist::path::display(&path),
                comm.rank()
            )));
        }
        Ok(dir)
    })();
    let dir = comm.agree(opened)?;
    let one_kernel = !boot.is_empty() && boots.iter().all(|b| *b == boot);
    let shared = Arc::new(Shared {
        log_name: store::log_name(d.attempt, comm.rank()),
        path,
        dir,
        id: d.id,
        fresh: d.fresh,
        nonce: d.nonce,
        boot,
        one_kernel,
        log: Mutex::new(Log::new()),
        pending: Mutex::new((Vec::new(), 0)),
        durables: Mutex::new(Vec::new()),
        done: (Mutex::new(false), Condvar::new()),
        failed: Mutex::new(None),
        output_failed: Mutex::new(None),
        spare: Mutex::new(Vec::new()),
        eager: AtomicBool::new(false),
        output_sync_ms: AtomicU64::new(OUTPUT_SYNC_INTERVAL.as_millis() as u64),
    });
    let flusher = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("mfu-checkpoint".into())
            .spawn(move || shared.flush_every(Instant::now()))
            .ok()
    };
    // Not joined: a sync in progress at the run's end is not waited for (it would cost the
    // run the disk time a run without a checkpoint leaves to the kernel). It ends with the
    // process, or on its own, and only ever appends a true record to its log.
    {
        let shared = Arc::downgrade(&shared);
        let _ = std::thread::Builder::new()
            .name("mfu-checkpoint-sync".into())
            .spawn(move || sync_every(&shared, Instant::now()));
    }
    Ok(Opened {
        checkpoint: Some(Checkpoint {
            shared,
            held,
            flusher: Mutex::new(flusher),
            ended: false,
        }),
        prior: d.prior,
        notice: d.notice,
    })
}

/// The syncer's loop (see the module), on the flusher's schedule ([`next_wait`]): with
/// outputs registered, [`Shared::sync_outputs`] when due ([`OUTPUT_SYNC_INTERVAL`],
/// [`WAIT_PER_SYNC_TIME`]) and [`Shared::start_writeback`] in between; without, a sync of the
/// log on the same schedule. Every wait for the disk is here, never in the flusher, so that marks
/// keep being written while a sync lasts. Ends with the checkpoint (it holds it only while it
/// works).
fn sync_every(shared: &std::sync::Weak<Shared>, opened: Instant) {
    let (mut tick, mut sync_cost) = (Duration::ZERO, Duration::ZERO);
    let mut synced_at = opened;
    loop {
        let Some(s) = shared.upgrade() else { return };
        let wait = next_wait(opened.elapsed(), tick);
        {
            let (lock, wake) = &s.done;
            let done = lock.lock().unwrap_or_else(|p| p.into_inner());
            let (done, _) = wake
                .wait_timeout_while(done, wait, |d| !*d)
                .unwrap_or_else(|p| p.into_inner());
            if *done {
                return;
            }
        }
        let began = Instant::now();
        let outputs = !s.registered().is_empty();
        if synced_at.elapsed() >= s.output_sync_interval().max(sync_cost * WAIT_PER_SYNC_TIME) {
            // Without outputs the log is all there is to sync: its marks carry their data (a
            // walk's directories, a compare's findings). Synced as often as outputs are, not
            // more: what a crash of the node loses is the same ~30 s as with outputs, and a
            // run shorter than that sends its log to no disk (it is removed at the end; once a
            // second, walk -o's log, 26 bytes a file, was written to the disk beside its list:
            // +7.4% at np 1 on disk).
            let _ = if outputs {
                s.sync_outputs()
            } else {
                s.sync_log()
            };
            sync_cost = began.elapsed();
            synced_at = Instant::now();
        } else if outputs {
            s.start_writeback();
        }
        tick = began.elapsed();
    }
}

impl Shared {
    fn flush_every(&self, opened: Instant) {
        let (lock, wake) = &self.done;
        let mut done = lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut last = Duration::ZERO;
        while !*done {
            let wait = next_wait(opened.elapsed(), last);
            done = wake
                .wait_timeout(done, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if !*done {
                let began = Instant::now();
                let _ = self.write_pending(SyncLog::Later);
                last = began.elapsed();
            }
        }
    }

    /// What a failed flush, `e`, says: the checkpoint and the operation.
    fn write_failed(&self, e: &io::Error) -> String {
        format!("write checkpoint {}: {e}", flist::path::display(&self.path))
    }

    /// The outputs registered with [`Checkpoint::durable`] so far (a snapshot: the lock is not
    /// held while they are synced).
    fn registered(&self) -> Vec<Durable> {
        self.durables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Start the writeback of what the registered files hold unsynced, without waiting for it
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`): the disk then works while the run goes on,
    /// and the syncs (the syncer's, the run's own before it publishes its output) have less
    /// left to do. Advice only: a failure is for a sync to find.
    fn start_writeback(&self) {
        for d in &self.registered() {
            if let Durable::File(fd) = d {
                // SAFETY: a valid open descriptor, whole-file range, flags libc defines.
                unsafe {
                    libc::sync_file_range(
                        std::os::fd::AsRawFd::as_raw_fd(fd.as_ref()),
                        0,
                        0,
                        libc::SYNC_FILE_RANGE_WRITE,
                    );
                }
            }
        }
    }

    /// Every mark made so far durable, even against a crash of the node: written, the
    /// registered outputs synced, that recorded, and the log synced.
    fn flush(&self) -> io::Result<()> {
        self.write_pending(SyncLog::Later)?;
        self.sync_outputs()?;
        self.write_pending(SyncLog::Now)
    }

    /// [`OUTPUT_SYNC_INTERVAL`] (shorter in tests).
    fn output_sync_interval(&self) -> Duration {
        Duration::from_millis(self.output_sync_ms.load(Ordering::Relaxed))
    }

    /// Sync the log if it holds records not yet synced, without holding its lock meanwhile
    /// (the flusher goes on writing marks).
    fn sync_log(&self) -> io::Result<()> {
        let (file, to) = {
            let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            match &log.file {
                Some(f) if log.written > log.log_synced => (Arc::clone(f), log.written),
                _ => return Ok(()),
            }
        };
        let synced = rustix::fs::fdatasync(file.as_fd()).map_err(io::Error::from);
        match &synced {
            Ok(()) => {
                let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
                log.log_synced = log.log_synced.max(to);
            }
            Err(e) => self.fail(e),
        }
        synced
    }

    /// The first failure recorded, as an error: a write that failed before (a full file
    /// system) fails every flush after it, marks pending or not, so that a stopped run says
    /// its checkpoint lacks work it did.
    fn failure(&self) -> io::Result<()> {
        match self
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(why) => Err(io::Error::other(why.clone())),
            None => Ok(()),
        }
    }

    /// Record `e`, the first failure (the path is said by whoever reports it: see
    /// [`Checkpoint::finish`]).
    fn fail(&self, e: &io::Error) {
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| e.to_string());
    }

    /// Write the pending marks to the log (no sync of the outputs: see the module), then sync
    /// the log as `sync` says. Marks made while no output was registered need none: they are
    /// recorded as synced at once. One write at a time (the log's lock is held throughout),
    /// so marks reach the log in order.
    fn write_pending(&self, sync: SyncLog) -> io::Result<()> {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        // Two buffers swapped at each flush, each keeping its memory: marks are appended to
        // pages already touched (a fresh buffer growing to megabytes cost a walk -o several
        // per cent of its time in copies and page faults).
        let mut spare = std::mem::take(&mut *self.spare.lock().unwrap_or_else(|p| p.into_inner()));
        spare.clear();
        let (mut bytes, count) = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let count = std::mem::take(&mut pending.1);
            (std::mem::replace(&mut pending.0, spare), count)
        };
        // After a failure the marks taken are dropped (not kept in memory for the rest of the
        // run): a rerun redoes their units.
        if let Err(e) = self.failure() {
            bytes.clear();
            *self.spare.lock().unwrap_or_else(|p| p.into_inner()) = bytes;
            return Err(e);
        }
        // Looked at after the marks were taken: a tool registers an output before it writes
        // to it, so a mark taken while none is registered has no unsynced data.
        if count > 0 && self.registered().is_empty() {
            if let Err(e) = self.open_log(&mut log) {
                self.fail(&e);
                return Err(e);
            }
            let to = log.written + bytes.len() as u64;
            store::encode_control(store::SYNCED, &to.to_le_bytes(), self.nonce, &mut bytes);
        }
        let written = self.append(&mut log, &bytes).and_then(|()| {
            match (&log.file, sync) {
                (Some(file), SyncLog::Now) if log.written > log.log_synced => {
                    rustix::fs::fdatasync(file.as_fd())?;
                    log.log_synced = log.written;
                }
                _ => {}
            }
            Ok(())
        });
        if let Err(e) = &written {
            self.fail(e);
        }
        bytes.clear();
        *self.spare.lock().unwrap_or_else(|p| p.into_inner()) = bytes;
        written
    }

    /// Append `bytes` (whole records) to the log (see [`Shared::open_log`]).
    fn append(&self, log: &mut Log, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.open_log(log)?;
        log.file.as_deref().expect("opened").write_all(bytes)?;
        log.written += bytes.len() as u64;
        Ok(())
    }

    /// Create the log if it is not yet, and write its [`store::BOOT`] record.
    fn open_log(&self, log: &mut Log) -> io::Result<()> {
        if log.file.is_none() {
            let fd = rustix::fs::openat(
                &self.dir,
                self.log_name.as_slice(),
                rustix::fs::OFlags::WRONLY
                    | rustix::fs::OFlags::CREATE
                    | rustix::fs::OFlags::EXCL
                    | rustix::fs::OFlags::NOFOLLOW
                    | rustix::fs::OFlags::APPEND
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::from_raw_mode(0o600),
            )?;
            let mut boot = Vec::new();
            store::encode_control(store::BOOT, &self.boot, self.nonce, &mut boot);
            let file = std::fs::File::from(fd);
            (&file).write_all(&boot)?;
            log.written = boot.len() as u64;
            log.file = Some(Arc::new(file));
        }
        Ok(())
    }

    /// Sync the registered outputs, then record that every mark written before the sync
    /// began is backed by synced data (a [`store::SYNCED`] record). A failed sync (a
    /// writeback error: data may be lost) is recorded instead (a [`store::DOUBT`] record):
    /// no rerun trusts the marks it leaves unsynced. The log's lock is not held while the
    /// outputs are synced: marks go on being written meanwhile.
    fn sync_outputs(&self) -> io::Result<()> {
        let to = {
            let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            self.failure()?;
            if log.written <= log.synced_to {
                return Ok(());
            }
            log.written
        };
        let durables = self.registered();
        if durables.is_empty() {
            return Ok(());
        }
        let synced = durables.iter().try_for_each(|d| match d {
            Durable::File(fd) => rustix::fs::fdatasync(fd.as_fd()),
            Durable::FileSystem(fd) => rustix::fs::syncfs(fd.as_fd()),
        });
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let mut record = Vec::new();
        match &synced {
            Ok(()) => {
                store::encode_control(store::SYNCED, &to.to_le_bytes(), self.nonce, &mut record)
            }
            Err(_) => store::encode_control(store::DOUBT, &[], self.nonce, &mut record),
        }
        let written = match synced {
            Ok(()) => self.append(&mut log, &record).map(|()| {
                log.synced_to = log.synced_to.max(to);
            }),
            Err(e) => {
                let _ = self.append(&mut log, &record);
                let e = io::Error::from(e);
                self.output_failed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert_with(|| e.to_string());
                Err(io::Error::new(
                    e.kind(),
                    format!("sync the run's output: {e}"),
                ))
            }
        };
        drop(log);
        if let Err(e) = &written {
            self.fail(e);
        }
        // The record on disk too, at once: it is what a rerun elsewhere goes by.
        written.and_then(|()| self.sync_log())
    }
}

impl Checkpoint {
    /// The checkpoint directory's path.
    pub fn path(&self) -> &[u8] {
        &self.shared.path
    }

    /// The checkpoint directory, open: a 0700 directory of this user in which a tool may keep
    /// files of its own (a partial output to continue, a plan). Create them with `openat`
    /// and `O_CREAT | O_EXCL | O_NOFOLLOW`; they are removed with the checkpoint.
    pub fn dir(&self) -> BorrowedFd<'_> {
        self.shared.dir.as_fd()
    }

    /// (device, inode) of the checkpoint directory: a walk of a tree that holds it skips it.
    pub fn identity(&self) -> (u64, u64) {
        self.shared.id
    }

    /// True when no earlier run left anything to continue.
    pub fn fresh(&self) -> bool {
        self.shared.fresh
    }

    /// Every rank of the run shares one kernel, so one page cache: what one rank wrote is
    /// lost to no other rank's kill (a unit written by several ranks needs no sync before
    /// one of them marks it).
    pub fn one_kernel(&self) -> bool {
        self.shared.one_kernel
    }

    /// Register output data that marks stand for (before any of it is written): the syncer
    /// syncs it, and a rerun after a crash of the node trusts only the marks made before a
    /// sync (see the module).
    pub fn durable(&self, what: Durable) {
        self.shared
            .durables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(what);
    }

    /// Unit `key` is finished: its output is written (by this process). `payload` is what a
    /// rerun needs to skip it. Cheap: the mark is written at the next flush. A payload longer
    /// than [`store::MAX_PAYLOAD`] is not recorded (the unit is done again by a rerun).
    pub fn mark(&self, key: u64, payload: &[u8]) {
        self.mark_with(key, |out| out.extend_from_slice(payload));
    }

    /// [`Checkpoint::mark`] with the payload appended to the log's buffer by `payload` (no
    /// buffer of its own: for payloads encoded from large records, a walked directory's).
    /// Other marks wait while it runs.
    pub fn mark_with(&self, key: u64, payload: impl FnOnce(&mut Vec<u8>)) {
        {
            let mut pending = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if store::encode_mark_with(key, self.shared.nonce, &mut pending.0, payload) {
                pending.1 += 1;
            }
        }
        let made = MARKS_MADE.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(ms) = slow_ms() {
            // A run that takes long on a tiny input: a real signal or a job's time limit can
            // reach it at a chosen share of its work (the Slurm recipe's test).
            std::thread::sleep(Duration::from_millis(ms));
        }
        if stop_after() == Some(made) {
            steal::signals::stop_flag().store(true, Ordering::SeqCst);
        }
        if die_after().is_some_and(|n| made >= n) {
            // As a kill finds it: the marks written, their data not synced.
            let _ = self.shared.write_pending(SyncLog::Later);
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            std::thread::sleep(Duration::from_secs(60));
        }
    }

    /// Make every mark made so far durable now, against a crash of the node too (the
    /// registered outputs synced). The error names the checkpoint.
    pub fn flush(&self) -> io::Result<()> {
        self.shared
            .flush()
            .map_err(|e| io::Error::new(e.kind(), self.shared.write_failed(&e)))
    }

    fn stop_flusher(&self) {
        let (lock, wake) = &self.shared.done;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        let flusher = self
            .flusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(t) = flusher {
            let _ = t.join();
        }
    }

    /// Write every mark made so far, then no more flushes on the schedule (marks made from
    /// now on are written by [`Checkpoint::flush`], [`Checkpoint::finish`] or the drop).
    /// Called once a run's writes are done, before it publishes its output (a rename) on a
    /// checkpoint removed on completion: a kill while the output is synced for the rename
    /// (tenths of a second on a disk) then finds every unit marked, and the removal follows
    /// the rename at once instead of waiting for a flush in progress, the window in which a
    /// kill leaves the checkpoint of a complete run behind. A failure to write the marks only
    /// costs a rerun work: it is not told here.
    pub fn stop_flushing(&self) {
        let _ = self.shared.write_pending(SyncLog::Later);
        self.stop_flusher();
    }

    /// The run's completion publishes an output that a rerun would refuse or make again (an
    /// archive, a compressed file, a copy): the checkpoint is then of no use to a rerun, so
    /// [`Checkpoint::finish`] removes it at once, not at the process's end.
    pub fn remove_on_completion(&self) {
        self.shared.eager.store(true, Ordering::SeqCst);
    }

    /// [`Checkpoint::finish`], a failure told on rank 0 through `context` (an error: the
    /// message names the checkpoint and the operation, removing or keeping it), never dropped
    /// without a word. Collective. `false` on every rank when it failed: a caller whose run
    /// had not failed yet counts it as a failure, as every resumable tool does (the data is
    /// not affected, but a checkpoint is left behind, or a rerun will redo work).
    pub fn finish_told(
        self,
        comm: &dyn Comm,
        context: &crate::engine::context::Context,
        outcome: Outcome,
    ) -> bool {
        match self.finish(comm, outcome) {
            Ok(()) => true,
            Err(e) => {
                if comm.rank() == 0 {
                    context.error(e);
                }
                false
            }
        }
    }

    /// End the run's use of the checkpoint. Collective. [`Outcome::Complete`]: every rank's
    /// marks are done with, and rank 0 removes the checkpoint (with the tool's own files in
    /// it). Otherwise the marks are made durable and the checkpoint is kept; an error says a
    /// rerun will redo more than it needs (the work itself is not affected).
    ///
    /// Under [`remove_at_exit`] (a command line run), a complete checkpoint gets its last
    /// marks written (not synced: a run without a checkpoint leaves its data to the kernel
    /// too) and is removed only by [`remove_completed`] once the process has printed its
    /// report and left MPI: a kill in between (a time limit's SIGKILL during MPI's shutdown)
    /// leaves every unit marked, so the rerun redoes nothing instead of everything.
    pub fn finish(mut self, comm: &dyn Comm, outcome: Outcome) -> Result<(), CheckpointError> {
        self.stop_flusher();
        self.ended = true;
        let mut deferred = outcome == Outcome::Complete
            && REMOVE_AT_EXIT.load(Ordering::SeqCst)
            && !self.shared.eager.load(Ordering::SeqCst);
        let flushed = match outcome {
            Outcome::Complete if !deferred => Ok(()),
            Outcome::Complete => self.shared.write_pending(SyncLog::Later),
            Outcome::Stopped | Outcome::Failed => self.shared.flush(),
        }
        .map_err(|e| CheckpointError(self.shared.write_failed(&e)));
        let flushed = comm.agree(flushed);
        if outcome != Outcome::Complete {
            return flushed.and_then(|()| comm.agree(self.output_sync()));
        }
        // A complete run whose last marks could not be written: its checkpoint would not say
        // the work is done, so it is removed now, as without deferral (the run is not failed).
        deferred &= flushed.is_ok();
        // Every rank is done writing before rank 0 removes it.
        comm.barrier();
        let removed = match comm.rank() {
            0 if deferred => {
                // The duplicates keep the directory and the run's lock (the same open file
                // description) until it is removed: no other run takes it meanwhile.
                let held = self.held.as_ref().map(OwnedFd::try_clone).transpose();
                match (self.shared.dir.try_clone(), held) {
                    (Ok(dir), Ok(held)) => {
                        completed().push(Completed {
                            path: self.shared.path.clone(),
                            dir,
                            _held: held,
                        });
                        Ok(())
                    }
                    _ => store::remove(&self.shared.path, self.shared.dir.as_fd()),
                }
            }
            0 => {
                if knob("MFU_RS_TEST_CHECKPOINT_DIE_BEFORE_REMOVAL").is_some() {
                    // The test knob: a kill -9 after the run published its output, before
                    // the checkpoint's removal.
                    let _ = rustix::process::kill_process(
                        rustix::process::getpid(),
                        rustix::process::Signal::KILL,
                    );
                }
                store::remove(&self.shared.path, self.shared.dir.as_fd())
            }
            _ => Ok(()),
        };
        comm.agree(removed)?;
        comm.agree(self.output_sync())
    }

    /// A failed sync of the outputs, as the error [`Checkpoint::finish`] tells: the data the
    /// run wrote may not have reached the disk (a writeback error), though every write
    /// succeeded.
    fn output_sync(&self) -> Result<(), CheckpointError> {
        match &*self
            .shared
            .output_failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        {
            None => Ok(()),
            Some(e) => Err(CheckpointError(format!(
                "sync the output of this run (checkpoint {}): {e}: some of the data written \
                 may not be on disk",
                flist::path::display(&self.shared.path)
            ))),
        }
    }
}

/// Whether complete checkpoints wait for [`remove_completed`] (see [`Checkpoint::finish`]).
static REMOVE_AT_EXIT: AtomicBool = AtomicBool::new(false);

/// A complete checkpoint waiting for [`remove_completed`].
struct Completed {
    path: Vec<u8>,
    dir: OwnedFd,
    /// The run's lock, held until the removal.
    _held: Option<OwnedFd>,
}

/// The complete checkpoints waiting for [`remove_completed`].
fn completed() -> std::sync::MutexGuard<'static, Vec<Completed>> {
    static COMPLETED: Mutex<Vec<Completed>> = Mutex::new(Vec::new());
    COMPLETED.lock().unwrap_or_else(|p| p.into_inner())
}

/// While `on`, complete checkpoints are removed only by [`remove_completed`]: what a command
/// line run asks, which calls it once the report is printed and MPI is finalized, then turns
/// this off. Library callers, which never turn it on, get them removed by
/// [`Checkpoint::finish`].
pub fn remove_at_exit(on: bool) {
    REMOVE_AT_EXIT.store(on, Ordering::SeqCst);
}

/// Keep the complete checkpoints [`Checkpoint::finish`] left for the end of the process
/// (their marks are written): a rerun finds every unit done. Returns their paths.
pub fn keep_completed() -> Vec<Vec<u8>> {
    std::mem::take(&mut *completed())
        .into_iter()
        .map(|c| c.path)
        .collect()
}

/// Remove the complete checkpoints [`Checkpoint::finish`] left for the end of the process
/// (see [`remove_at_exit`]). Returns what could not be removed.
pub fn remove_completed() -> Vec<CheckpointError> {
    let done = std::mem::take(&mut *completed());
    if !done.is_empty() && knob("MFU_RS_TEST_CHECKPOINT_DIE_AT_EXIT").is_some() {
        // The test knob: a kill -9 after the report, before the removal.
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
    done.into_iter()
        .filter_map(|c| store::remove(&c.path, c.dir.as_fd()).err())
        .collect()
}

impl Drop for Checkpoint {
    /// A run that ended without [`Checkpoint::finish`] (an early return, a panic) keeps the
    /// checkpoint and its marks: they never precede their data.
    fn drop(&mut self) {
        if !self.ended {
            self.stop_flusher();
            let _ = self.shared.flush();
        }
    }
}

#[cfg(test)]
mod tests;
