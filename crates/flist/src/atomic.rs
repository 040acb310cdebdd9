//! Outputs that appear whole or not at all: written under a temporary name beside the final
//! name, then renamed over it. One naming scheme for every tool, `.NAME.HOST.PID.mfu-tmp`
//! (the writing process's host and pid; NAME cut, with a digest of the whole, when the whole
//! would be longer than a file name may be), so that:
//!
//! - the temporary is created new (`O_CREAT | O_EXCL | O_NOFOLLOW`) in the final name's
//!   directory, reached by an open descriptor: never an inode that was already there, never
//!   through a symlink;
//! - a run killed outright (SIGKILL, a node lost) leaves its temporary behind, as big as the
//!   output (on a node-local `/dev/shm`, that is RAM): the next run for the same final name on
//!   that host removes the ones whose process is gone, reaped or not ([`remove_stale`]), and
//!   never one of a run still going (or of another host, which it cannot ask).
//!
//! [`Output`] is the one way every tool writes such an output (a list, a manifest, an archive,
//! a side index, a broadcast or compressed file, a symbolic link): it creates the temporary,
//! publishes it (data synced, renamed, directory synced) and removes it when it is dropped
//! unpublished.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use std::fs::File;
use std::io;

/// The end of every temporary's name.
pub const SUFFIX: &[u8] = b".mfu-tmp";

/// Bytes of the longest file name (NAME_MAX).
const NAME_MAX: usize = 255;

/// This host's name (uname's nodename), with any `/` made `_` for a file name.
pub fn host() -> Vec<u8> {
    this_host().to_vec()
}

/// [`host`], asked of the kernel once per process: a tool that writes 10^5 files through
/// temporaries names one each (`uname` was a system call per file), and every temporary of
/// one run then carries the same host.
fn this_host() -> &'static [u8] {
    static HOST: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        rustix::system::uname()
            .nodename()
            .to_bytes()
            .iter()
            .map(|&b| if b == b'/' { b'_' } else { b })
            .collect()
    })
}

/// The temporary name (one component) for the final name `base`, written by process `pid` on
/// `host`: `.BASE.HOST.PID.mfu-tmp`. When that would be longer than a file name may be, BASE
/// is cut and followed by `~` and the XXH64 of the whole of it (16 hex digits), so that two
/// long names that share their beginning never share a temporary.
pub fn temp_name_of(base: &[u8], host: &[u8], pid: u32) -> Vec<u8> {
    let tail = [b".", host, format!(".{pid}").as_bytes(), SUFFIX].concat();
    let room = NAME_MAX.saturating_sub(1 + tail.len());
    if base.len() <= room {
        return [b".", base, &tail].concat();
    }
    let digest = format!("~{:016x}", xxhash_rust::xxh64::xxh64(base, 0));
    let keep = room.saturating_sub(digest.len()).clamp(1, base.len());
    [b".", &base[..keep], digest.as_bytes(), &tail].concat()
}

/// The temporary name (one component) of this process for the final name `base`.
pub fn temp_name(base: &[u8]) -> Vec<u8> {
    temp_name_of(base, this_host(), std::process::id())
}

/// The path of `name` (one component) in the directory of `path`.
pub fn beside(path: &[u8], name: &[u8]) -> Vec<u8> {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => [&path[..=i], name].concat(),
        None => name.to_vec(),
    }
}

/// The temporary path of this process for the final path `path`, beside it.
pub fn temp_path(path: &[u8]) -> Vec<u8> {
    beside(path, &temp_name(crate::path::basename(path)))
}

/// The pid in a name shaped like a temporary's (`.….PID.mfu-tmp`).
fn pid_of(name: &[u8]) -> Option<u32> {
    let stem = name.strip_prefix(b".")?.strip_suffix(SUFFIX)?;
    let dot = stem.iter().rposition(|&b| b == b'.')?;
    let digits = &stem[dot + 1..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Whether `name` (one component) is shaped like a temporary of this scheme, of any final
/// name, host and process (tools that walk a tree leave such files alone: another run may be
/// writing it).
pub fn is_temp_name(name: &[u8]) -> bool {
    pid_of(name).is_some()
}

/// Whether process `pid` is gone (on this host): there is no such process, or it has exited
/// and waits to be reaped (a zombie: its files are closed, it never writes again). kill(2)
/// still finds a zombie: a rank killed with its launcher is handed to init, which may reap it
/// only seconds later, after the next run has looked.
fn gone(pid: u32) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Err(Errno::SRCH) => true,
        _ => exited(pid),
    }
}

/// Whether `/proc` shows `pid` as a process that has exited and is not yet reaped: state Z
/// (or X) with one thread left. A thread-group leader that exited while other threads run
/// shows Z too, but more threads: that process is alive. `false` when `/proc` cannot tell,
/// or is not of this process's pid namespace (its numbers would name other processes).
fn exited(pid: u32) -> bool {
    let ours = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str()?.parse::<u32>().ok());
    if ours != Some(std::process::id()) {
        return false;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let state = field("State:").and_then(|s| s.chars().next());
    matches!(state, Some('Z' | 'X')) && field("Threads:") == Some("1")
}

/// Remove from `dir` the temporaries of the final name `base` that earlier runs on this host
/// left and whose process is gone (exited, even if not yet reaped): regular files of the
/// pattern, owned by this user, never
/// followed. Returns each one found, with what removing it gave.
pub fn remove_stale(dir: BorrowedFd<'_>, base: &[u8]) -> Vec<(Vec<u8>, io::Result<()>)> {
    remove_stale_owned(dir, base, None)
}

/// [`remove_stale`], also removing those owned by `also` (a tool that gives its temporary
/// the owner of the file it stands for, as stripe's restriped copy, names that owner).
pub fn remove_stale_owned(
    dir: BorrowedFd<'_>,
    base: &[u8],
    also: Option<u32>,
) -> Vec<(Vec<u8>, io::Result<()>)> {
    remove_stale_of(dir, &[base], also)
}

/// [`remove_stale_owned`] for many final names of one directory at once, `bases`, in one
/// reading of it (a tool that writes many files there, each under a temporary, as `pfa
/// unpack` does, sweeps what a killed run of it left once per directory).
pub fn remove_stale_of(
    dir: BorrowedFd<'_>,
    bases: &[&[u8]],
    also: Option<u32>,
) -> Vec<(Vec<u8>, io::Result<()>)> {
    let mut found = Vec::new();
    if bases.is_empty() {
        return found;
    }
    let Ok(listing) = rustix::fs::Dir::read_from(dir.as_fd()) else {
        return found;
    };
    let (host, me) = (this_host(), rustix::process::geteuid().as_raw());
    // Temporaries of processes that are gone, by process: most directories have none, and a
    // killed run has one process per rank on this host.
    let mut dead: Vec<(u32, Vec<Vec<u8>>)> = Vec::new();
    let mut alive = vec![std::process::id()];
    for entry in listing.flatten() {
        let name = entry.file_name().to_bytes();
        let Some(pid) = pid_of(name) else {
            continue;
        };
        if alive.contains(&pid) {
            continue;
        }
        match dead.iter_mut().find(|(p, _)| *p == pid) {
            Some((_, names)) => names.push(name.to_vec()),
            None if gone(pid) => dead.push((pid, vec![name.to_vec()])),
            None => alive.push(pid),
        }
    }
    for (pid, names) in dead {
        let names: std::collections::HashSet<Vec<u8>> = names.into_iter().collect();
        for base in bases {
            let name = temp_name_of(base, host, pid);
            if !names.contains(&name) {
                continue;
            }
            let Ok(st) = rustix::fs::statat(dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            if st.st_mode & libc::S_IFMT != libc::S_IFREG
                || (st.st_uid != me && Some(st.st_uid) != also)
            {
                continue;
            }
            match rustix::fs::unlinkat(dir, name.as_slice(), AtFlags::empty()) {
                Err(Errno::NOENT) => {}
                removed => found.push((name, removed.map_err(io::Error::from))),
            }
        }
    }
    found
}

/// The directory of `path` (`.` when it has none) opened for `*at` calls (never following a
/// symlink at its last component is not asked: the directory is the one the user named).
pub fn open_parent(path: &[u8]) -> io::Result<OwnedFd> {
    // Not `path::parent`, which takes a name without a `/` for one in `/`.
    let (dir, _) = split(path);
    Ok(crate::walk::open_long(
        &dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
    )?)
}

/// Remove the temporary `temp` (one component, in `dir`), this process's and never complete;
/// gone already is fine.
fn discard(dir: BorrowedFd<'_>, temp: &[u8]) -> io::Result<()> {
    match rustix::fs::unlinkat(dir, temp, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `path` split into its directory (`.` when it has none) and last component.
pub fn split(path: &[u8]) -> (Vec<u8>, Vec<u8>) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/".to_vec(), path[1..].to_vec()),
        Some(i) => (path[..i].to_vec(), path[i + 1..].to_vec()),
        None => (b".".to_vec(), path.to_vec()),
    }
}

/// Open the directory `dir` by its path (as the user named it) and check that it is the
/// directory `id` (device, inode) the work was planned in: a directory replaced since, or a
/// symlink swapped in for it, is refused with a message naming it.
pub fn open_dir_checked(dir: &[u8], id: (u64, u64)) -> Result<OwnedFd, String> {
    let fd = rustix::fs::open(
        crate::path::as_path(dir),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open directory {}: {e}", crate::path::display(dir)))?;
    let now =
        identity(fd.as_fd()).map_err(|e| format!("stat {}: {e}", crate::path::display(dir)))?;
    if now != id {
        return Err(format!(
            "{} is not the directory it was when the work was planned (replaced, or a symbolic \
             link swapped in): nothing written there",
            crate::path::display(dir)
        ));
    }
    Ok(fd)
}

/// (device, inode) of an open file: what tells two names of one file apart from two files.
pub fn identity(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// When a file came to be, as far as its file system tells: what tells a file from a later one
/// given the same (device, inode) after it was removed (ext4 reuses inode numbers at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Born {
    /// Its birth time (`statx`'s `btime`: seconds and nanoseconds since the epoch), which no
    /// write, rename or chmod changes.
    Birth(i64, u32),
    /// Its change time (seconds, nanoseconds), on a file system that keeps no birth time: every
    /// write changes it, so a stamp of this kind matches only a file untouched since.
    Change(i64, u32),
}

/// (device, inode) and [`Born`] of a file: what a resumable writer records of the temporary it
/// keeps, and what [`Output::adopt`] checks before taking it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// (device, inode), as [`identity`] gives them.
    pub id: (u64, u64),
    /// When it came to be.
    pub born: Born,
}

impl Stamp {
    /// The stamp of an open file: its birth time when its file system keeps one, otherwise
    /// its change time.
    pub fn of(fd: BorrowedFd<'_>) -> io::Result<Stamp> {
        let id = identity(fd)?;
        let sx = rustix::fs::statx(
            fd,
            c"",
            AtFlags::EMPTY_PATH,
            rustix::fs::StatxFlags::BTIME | rustix::fs::StatxFlags::CTIME,
        )?;
        let born = if sx.stx_mask & rustix::fs::StatxFlags::BTIME.bits() != 0 {
            Born::Birth(sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec)
        } else {
            Born::Change(sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec)
        };
        Ok(Stamp { id, born })
    }

    /// The stamp as 33 bytes (device, inode, the kind of time, seconds, nanoseconds; integers
    /// big-endian), for a record.
    pub fn encode(&self) -> [u8; STAMP_LEN] {
        let (kind, sec, nsec) = match self.born {
            Born::Birth(s, n) => (b'B', s, n),
            Born::Change(s, n) => (b'C', s, n),
        };
        let mut b = [0u8; STAMP_LEN];
        b[..8].copy_from_slice(&self.id.0.to_be_bytes());
        b[8..16].copy_from_slice(&self.id.1.to_be_bytes());
        b[16] = kind;
        b[17..25].copy_from_slice(&sec.to_be_bytes());
        b[25..29].copy_from_slice(&nsec.to_be_bytes());
        b
    }

    /// A stamp from [`Stamp::encode`]'s bytes (`None` when they are not one).
    pub fn decode(b: &[u8]) -> Option<Stamp> {
        if b.len() != STAMP_LEN || b[29..] != [0; STAMP_LEN - 29] {
            return None;
        }
        let word = |at: usize| <[u8; 8]>::try_from(&b[at..at + 8]).expect("8 bytes");
        let id = (u64::from_be_bytes(word(0)), u64::from_be_bytes(word(8)));
        let sec = i64::from_be_bytes(word(17));
        let nsec = u32::from_be_bytes(b[25..29].try_into().expect("4 bytes"));
        let born = match b[16] {
            b'B' => Born::Birth(sec, nsec),
            b'C' => Born::Change(sec, nsec),
            _ => return None,
        };
        Some(Stamp { id, born })
    }
}

/// Bytes of an encoded [`Stamp`] (the last four reserved, zero).
pub const STAMP_LEN: usize = 33;

/// Whether publishing an [`Output`] may replace a file already at its final name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    /// Replace whatever is at the final name (`rename(2)`; a symlink there is replaced, never
    /// followed).
    Overwrite,
    /// Refuse with `EEXIST` if anything is at the final name (`renameat2` with
    /// `RENAME_NOREPLACE`; on a file system without it, look and then rename: a narrow window).
    NoReplace,
}

/// The step of an [`Output`] that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Opening the final name's directory (the error names the directory).
    OpenDir,
    /// Creating the temporary (the error names the temporary).
    Create,
    /// Opening the temporary by its path on another rank ([`join`]; names the temporary).
    Join,
    /// Writing the temporary (its writer's own step, named alike: names the temporary).
    Write,
    /// Syncing the temporary's data (names the temporary).
    Sync,
    /// Renaming the temporary over the final name (names both).
    Rename,
    /// Syncing the directory after the rename (names the final path: the output is in place).
    SyncDir,
    /// Removing the temporary (names it).
    Remove,
}

/// A step of an [`Output`] failed: which, on what path, and the system's reason.
#[derive(Debug, thiserror::Error)]
pub struct OutputError {
    /// What was being done.
    pub step: Step,
    /// The path the step names (see [`Step`]).
    pub path: Vec<u8>,
    /// The final path, for [`Step::Rename`] (empty otherwise).
    pub to: Vec<u8>,
    /// The system's reason (`EEXIST` from [`Replace::NoReplace`] when the final name is taken).
    #[source]
    pub source: io::Error,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = crate::path::display(&self.path);
        match self.step {
            Step::OpenDir => write!(f, "open directory {path}: {}", self.source),
            Step::Create => write!(f, "create {path}: {}", self.source),
            Step::Join => write!(f, "open {path}: {}", self.source),
            Step::Write => write!(f, "write {path}: {}", self.source),
            Step::Sync => write!(f, "fsync {path}: {}", self.source),
            Step::Rename => write!(
                f,
                "rename {path} to {}: {}",
                crate::path::display(&self.to),
                self.source
            ),
            Step::SyncDir => write!(f, "fsync the directory of {path}: {}", self.source),
            Step::Remove => write!(f, "remove {path}: {}", self.source),
        }
    }
}

impl OutputError {
    fn new(step: Step, path: &[u8], source: impl Into<io::Error>) -> OutputError {
        OutputError {
            step,
            path: path.to_vec(),
            to: Vec::new(),
            source: source.into(),
        }
    }
}

/// A temporary left by an earlier run that [`Output`]'s creation found (and removed, or failed
/// to remove): callers tell the user, each in its own words.
#[derive(Debug)]
pub struct Stale {
    /// Its path (beside the final path).
    pub path: Vec<u8>,
    /// What removing it gave.
    pub removed: io::Result<()>,
}

/// One output that appears whole under its final name or not at all: a temporary of this
/// process beside the final name ([`temp_name`]), created new (`O_CREAT | O_EXCL |
/// O_NOFOLLOW`) in the final name's directory reached by a descriptor, then [`publish`]ed
/// (data synced, renamed over the final name in that same directory, directory synced).
///
/// Only this value removes the temporary: [`discard`](Output::discard), or dropping it
/// unpublished (an error path, a panic, a stop request that returns early). Other ranks of a
/// collective writer open the temporary by its [`path`](Output::path) ([`join`]) and never
/// remove it; they sync what they wrote themselves before the creator publishes. A run killed
/// outright leaves the temporary under its temporary name, never under the final one; the
/// next run for that final name on this host removes it ([`remove_stale`]). A temporary kept on
/// purpose (a resumable run) is taken out with [`into_parts`](Output::into_parts).
///
/// [`publish`]: Output::publish
///
/// ```
/// # let t = tempfile::tempdir().unwrap();
/// # use std::os::unix::ffi::OsStrExt;
/// # let list = [t.path().as_os_str().as_bytes(), b"/list.txt"].concat();
/// use flist::atomic::{Output, Replace};
/// use std::io::Write;
/// let (out, stale) = Output::beside(&list, 0o644).unwrap();
/// assert!(stale.is_empty());
/// out.file().unwrap().write_all(b"a|f\n").unwrap();
/// out.publish(Replace::Overwrite).unwrap();
/// ```
#[derive(Debug)]
pub struct Output {
    /// The pieces (always `Some` until [`Output::into_parts`] takes them).
    parts: Option<Parts>,
    /// The process that created the temporary: only it removes it (a forked child that
    /// drops a copy of this value leaves it alone).
    creator: u32,
    /// Whether dropping this value removes the temporary.
    armed: bool,
}

/// An [`Output`]'s pieces, taken out so that its temporary outlives it (a resumable writer
/// keeps a partial output across runs); [`Output::from_parts`] makes it an output again.
#[derive(Debug)]
pub struct Parts {
    /// The final name's directory: every step is an `*at` call on it.
    pub dir: OwnedFd,
    /// The final name (one component).
    pub base: Vec<u8>,
    /// The temporary's name (one component).
    pub name: Vec<u8>,
    /// The temporary's path (its directory as the caller named it).
    pub path: Vec<u8>,
    /// The final path.
    pub final_path: Vec<u8>,
    /// The temporary's descriptor (`None` for a symbolic link).
    pub file: Option<File>,
    /// The final name's directory when it is not `dir` ([`Output::named`]: the temporary
    /// kept in a directory of its own); `None`: `dir`.
    pub final_dir: Option<OwnedFd>,
}

/// What [`Output::named`] does with a file already at the temporary's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Continue it (a resumable writer's earlier partial output, which the caller has checked
    /// is the one it means): opened with `access`, never through a symbolic link, refused
    /// unless a regular file.
    Adopt(OFlags),
    /// Remove it (what a run killed before it could say anything about it left, in the
    /// writer's own directory) and make a new file.
    Replace,
}

impl Output {
    /// A new output for the final path `path`: its directory opened ([`open_parent`]), the
    /// stale temporaries of that final name removed (returned, to be told), a temporary
    /// created write only with `mode` (cut by the umask).
    pub fn beside(path: &[u8], mode: u32) -> Result<(Output, Vec<Stale>), OutputError> {
        let dir =
            open_parent(path).map_err(|e| OutputError::new(Step::OpenDir, &split(path).0, e))?;
        let base = crate::path::basename(path);
        let name = temp_name(base);
        let parts = Parts {
            dir,
            base: base.to_vec(),
            path: beside(path, &name),
            name,
            final_path: path.to_vec(),
            file: None,
            final_dir: None,
        };
        Output::make(parts, None, |dir, name| {
            create_file(dir, name, OFlags::WRONLY, mode)
        })
    }

    /// A new output for the final name `base` in the open directory `dir` (reached as
    /// `dir_path`, for messages and other ranks: already checked by the caller, as
    /// [`open_dir_checked`] does), as [`Output::beside`]; `access` is read and write or write
    /// only.
    pub fn in_dir(
        dir: BorrowedFd<'_>,
        dir_path: &[u8],
        base: &[u8],
        access: OFlags,
        mode: u32,
    ) -> Result<(Output, Vec<Stale>), OutputError> {
        Output::in_dir_with(dir, dir_path, base, None, |dir, name| {
            create_file(dir, name, access, mode)
        })
    }

    /// [`Output::in_dir`] with the temporary made by `make(dir, name)`, which must create a
    /// new file (`O_CREAT | O_EXCL | O_NOFOLLOW`, as on Lustre with a layout); stale
    /// temporaries owned by `stale_owner` (besides this user's) are removed too
    /// ([`remove_stale_owned`]).
    pub fn in_dir_with(
        dir: BorrowedFd<'_>,
        dir_path: &[u8],
        base: &[u8],
        stale_owner: Option<u32>,
        make: impl FnOnce(BorrowedFd<'_>, &[u8]) -> io::Result<OwnedFd>,
    ) -> Result<(Output, Vec<Stale>), OutputError> {
        Output::make(in_dir(dir, dir_path, base)?, stale_owner, make)
    }

    /// A new symbolic link to `target` for the final name `base` in `dir` (reached as
    /// `dir_path`), under this process's temporary name: a symbolic link is complete once
    /// made, so it is never synced, and no stale temporary is looked for (a listing of the
    /// directory per link would cost a large directory O(n²); a killed run's temporary link
    /// is refused here as taken, and left alone).
    pub fn symlink(
        dir: BorrowedFd<'_>,
        dir_path: &[u8],
        base: &[u8],
        target: &[u8],
    ) -> Result<Output, OutputError> {
        let parts = in_dir(dir, dir_path, base)?;
        rustix::fs::symlinkat(target, &parts.dir, parts.name.as_slice())
            .map_err(|e| OutputError::new(Step::Create, &parts.path, e))?;
        Ok(Output::from_parts(parts))
    }

    /// An output whose temporary has the exact name `name` in the directory `dir` (reached as
    /// `dir_path`), not one of [`temp_name`]'s: a resumable writer's partial output, kept in a
    /// directory of its own (a checkpoint's) across runs, adopted or made new as `existing`
    /// says (`make(dir, name)` must create a new file: `O_CREAT | O_EXCL | O_NOFOLLOW`). It is
    /// published into ANOTHER directory, `final_dir`, as the last component of `final_path`
    /// (`renameat` between the two descriptors: both must be on one file system, else
    /// `EXDEV`), and that directory synced. No stale temporary is looked for (the name is the
    /// writer's own). Dropped unpublished, it is removed as any output is: a writer that keeps
    /// it for a rerun takes it apart ([`Output::into_parts`]).
    pub fn named(
        dir: BorrowedFd<'_>,
        dir_path: &[u8],
        name: &[u8],
        final_dir: BorrowedFd<'_>,
        final_path: &[u8],
        existing: Existing,
        make: impl FnOnce(BorrowedFd<'_>, &[u8]) -> io::Result<OwnedFd>,
    ) -> Result<Output, OutputError> {
        let path = join_path(dir_path, name);
        let owned = |fd: BorrowedFd<'_>, shown: &[u8]| {
            fd.try_clone_to_owned()
                .map_err(|e| OutputError::new(Step::OpenDir, shown, e))
        };
        let mut parts = Parts {
            dir: owned(dir, dir_path)?,
            base: crate::path::basename(final_path).to_vec(),
            name: name.to_vec(),
            path: path.clone(),
            final_path: final_path.to_vec(),
            file: None,
            final_dir: Some(owned(final_dir, &split(final_path).0)?),
        };
        let fd = match existing {
            Existing::Adopt(access) => {
                let flags = access | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let fd = rustix::fs::openat(&parts.dir, name, flags, Mode::empty())
                    .map_err(|e| OutputError::new(Step::Create, &path, e))?;
                let st =
                    rustix::fs::fstat(&fd).map_err(|e| OutputError::new(Step::Create, &path, e))?;
                if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                    let why = io::Error::other("not a regular file");
                    return Err(OutputError::new(Step::Create, &path, why));
                }
                fd
            }
            Existing::Replace => {
                discard(parts.dir.as_fd(), name)
                    .map_err(|e| OutputError::new(Step::Remove, &path, e))?;
                make(parts.dir.as_fd(), name)
                    .map_err(|e| OutputError::new(Step::Create, &path, e))?
            }
        };
        parts.file = Some(File::from(fd));
        Ok(Output::from_parts(parts))
    }

    /// Take over, for the final name `base` in `dir` (reached as `dir_path`), the temporary
    /// `name` (one component) that an interrupted earlier run of a resumable writer kept
    /// ([`Output::into_parts`]) and recorded with its [`Stamp`] `was`: only when it still is
    /// that file, a regular file of this user with one link, reached without following a
    /// symbolic link, of the same (device, inode) and the same birth (or change) time (an inode
    /// number freed by a removal is soon given to another file). It is opened for `access`,
    /// renamed to this process's temporary name (never over a file there), so that
    /// [`remove_stale`] leaves it alone and a later run knows it by that name, and checked
    /// again after the rename (renamed back if another file came in between). Then the stale
    /// temporaries of `base` go (returned, to be told), as on creation. `None`, with nothing
    /// changed, when it is gone, is not that file or cannot be renamed: the caller starts over
    /// (the stale one then goes with the others when it makes a new output).
    pub fn adopt(
        dir: BorrowedFd<'_>,
        dir_path: &[u8],
        base: &[u8],
        name: &[u8],
        was: &Stamp,
        access: OFlags,
    ) -> Option<(Output, Vec<Stale>)> {
        // A forged record must not reach out of the directory nor name someone's file.
        if name.is_empty() || name.contains(&b'/') || !is_temp_name(name) {
            return None;
        }
        // NONBLOCK: a FIFO put at the name must not hang the open.
        let flags = access | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?;
        let st = rustix::fs::fstat(&fd).ok()?;
        let whole = st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_nlink == 1
            && st.st_uid == rustix::process::geteuid().as_raw();
        if !whole || Stamp::of(fd.as_fd()).ok()? != *was {
            return None;
        }
        let mut parts = in_dir(dir, dir_path, base).ok()?;
        if parts.name != name {
            let moved = RenameFlags::NOREPLACE;
            rustix::fs::renameat_with(dir, name, dir, parts.name.as_slice(), moved).ok()?;
            // Swapped between the check and the rename: put back what was moved, start over.
            let now = rustix::fs::statat(dir, parts.name.as_slice(), AtFlags::SYMLINK_NOFOLLOW);
            if !now.is_ok_and(|st| (st.st_dev, st.st_ino) == was.id) {
                let _ = rustix::fs::renameat_with(dir, parts.name.as_slice(), dir, name, moved);
                return None;
            }
        }
        parts.file = Some(File::from(fd));
        let stale = remove_stale(parts.dir.as_fd(), base)
            .into_iter()
            .map(|(n, removed)| Stale {
                path: beside(&parts.path, &n),
                removed,
            })
            .collect();
        Some((Output::from_parts(parts), stale))
    }

    fn make(
        mut parts: Parts,
        stale_owner: Option<u32>,
        make: impl FnOnce(BorrowedFd<'_>, &[u8]) -> io::Result<OwnedFd>,
    ) -> Result<(Output, Vec<Stale>), OutputError> {
        let stale = remove_stale_owned(parts.dir.as_fd(), &parts.base, stale_owner)
            .into_iter()
            .map(|(n, removed)| Stale {
                path: beside(&parts.path, &n),
                removed,
            })
            .collect();
        let fd = make(parts.dir.as_fd(), &parts.name)
            .map_err(|e| OutputError::new(Step::Create, &parts.path, e))?;
        parts.file = Some(File::from(fd));
        Ok((Output::from_parts(parts), stale))
    }

    fn parts(&self) -> &Parts {
        self.parts
            .as_ref()
            .expect("an output has its parts until taken apart")
    }

    /// The temporary's descriptor (`None` for a symbolic link).
    pub fn file(&self) -> Option<&File> {
        self.parts().file.as_ref()
    }

    /// The temporary's path (its directory as the caller named it): other ranks open it
    /// with [`join`].
    pub fn path(&self) -> &[u8] {
        &self.parts().path
    }

    /// The temporary's name (one component, in [`Output::dir`]).
    pub fn name(&self) -> &[u8] {
        &self.parts().name
    }

    /// The final path.
    pub fn final_path(&self) -> &[u8] {
        &self.parts().final_path
    }

    /// The final name's directory.
    pub fn dir(&self) -> BorrowedFd<'_> {
        self.parts().dir.as_fd()
    }

    /// (device, inode) of the temporary, for other ranks to check what they [`join`]ed.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let p = self.parts();
        match &p.file {
            Some(f) => identity(f.as_fd()),
            None => {
                let st = rustix::fs::statat(&p.dir, p.name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)?;
                Ok((st.st_dev, st.st_ino))
            }
        }
    }

    /// Put the output under its final name: sync the temporary's data (this process's
    /// descriptor: other ranks sync theirs first), rename it over the final name as `replace`
    /// says, sync the directory (not for a symbolic link). A failure before the rename removes
    /// the temporary; a failure to sync the directory leaves the output in place (the error
    /// says so: [`Step::SyncDir`]).
    pub fn publish(mut self, replace: Replace) -> Result<(), OutputError> {
        let p = self.parts.as_ref().expect("an output has its parts");
        if let Some(f) = &p.file {
            rustix::fs::fsync(f).map_err(|e| OutputError::new(Step::Sync, &p.path, e))?;
        }
        let to_dir = p.final_dir.as_ref().unwrap_or(&p.dir).as_fd();
        let renamed = rename_over(p.dir.as_fd(), &p.name, to_dir, &p.base, replace);
        renamed.map_err(|e| OutputError {
            to: p.final_path.clone(),
            ..OutputError::new(Step::Rename, &p.path, e)
        })?;
        self.armed = false;
        let p = self.parts.as_ref().expect("an output has its parts");
        if p.file.is_some() {
            // The directory that now holds the final name (the one the temporary left need
            // not be: the rename is one change of the file system's).
            rustix::fs::fsync(p.final_dir.as_ref().unwrap_or(&p.dir))
                .map_err(|e| OutputError::new(Step::SyncDir, &p.final_path, e))?;
        }
        Ok(())
    }

    /// Remove the temporary (never complete); gone already is fine.
    pub fn discard(mut self) -> Result<(), OutputError> {
        self.armed = false;
        let p = self.parts();
        discard(p.dir.as_fd(), &p.name).map_err(|e| OutputError::new(Step::Remove, &p.path, e))
    }

    /// Take the output apart, its temporary kept (dropping the parts leaves it in place).
    pub fn into_parts(mut self) -> Parts {
        self.armed = false;
        self.parts.take().expect("an output has its parts")
    }

    /// An output again from its [`Parts`] (a temporary this process now answers for:
    /// dropping it unpublished removes it).
    pub fn from_parts(parts: Parts) -> Output {
        Output {
            parts: Some(parts),
            creator: std::process::id(),
            armed: true,
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let (true, Some(p)) = (
            self.armed && self.creator == std::process::id(),
            &self.parts,
        ) {
            let _ = discard(p.dir.as_fd(), &p.name);
        }
    }
}

/// The parts of a new output for `base` in `dir` (reached as `dir_path`), its file not made.
fn in_dir(dir: BorrowedFd<'_>, dir_path: &[u8], base: &[u8]) -> Result<Parts, OutputError> {
    let dir = dir
        .try_clone_to_owned()
        .map_err(|e| OutputError::new(Step::OpenDir, dir_path, e))?;
    let name = temp_name(base);
    Ok(Parts {
        dir,
        base: base.to_vec(),
        path: join_path(dir_path, &name),
        name,
        final_path: join_path(dir_path, base),
        file: None,
        final_dir: None,
    })
}

/// Rename `from` (one component, in `from_dir`) over `to` (in `to_dir`: the same directory,
/// maybe through another descriptor) as `replace` says: the one rename of every complete
/// output, [`Output::publish`]'s, and of the writers whose temporaries are made by many
/// processes (stripe's restriped copies, made by the copy engine).
pub fn rename_over(
    from_dir: BorrowedFd<'_>,
    from: &[u8],
    to_dir: BorrowedFd<'_>,
    to: &[u8],
    replace: Replace,
) -> io::Result<()> {
    let renamed = match replace {
        Replace::Overwrite => rustix::fs::renameat(from_dir, from, to_dir, to),
        Replace::NoReplace => {
            match rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
                // A file system (or kernel) without RENAME_NOREPLACE: look, then rename.
                Err(Errno::INVAL | Errno::NOSYS) => {
                    match rustix::fs::statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(_) => Err(Errno::EXIST),
                        Err(_) => rustix::fs::renameat(from_dir, from, to_dir, to),
                    }
                }
                r => r,
            }
        }
    };
    Ok(renamed?)
}

/// On another rank of a collective writer: open the temporary at `path` (an
/// [`Output::path`]) for `access`, never through a symbolic link, and, given its creator's
/// `id` ([`Output::identity`]), check that it is that file (a directory swapped since would
/// give another).
pub fn join(path: &[u8], access: OFlags, id: Option<(u64, u64)>) -> Result<File, OutputError> {
    let fd = crate::walk::open_long(path, access | OFlags::NOFOLLOW | OFlags::CLOEXEC)
        .map_err(|e| OutputError::new(Step::Join, path, e))?;
    if let Some(id) = id {
        let got = identity(fd.as_fd()).map_err(|e| OutputError::new(Step::Join, path, e))?;
        if got != id {
            let why = "not the temporary file its creator made (its directory changed)";
            return Err(OutputError::new(Step::Join, path, io::Error::other(why)));
        }
    }
    Ok(File::from(fd))
}

/// A new regular file `name` in `dir`: never one already there, never through a symlink.
fn create_file(dir: BorrowedFd<'_>, name: &[u8], access: OFlags, mode: u32) -> io::Result<OwnedFd> {
    let flags = access | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(mode),
    )?)
}

/// `name` in the directory `dir_path`.
fn join_path(dir_path: &[u8], name: &[u8]) -> Vec<u8> {
    match dir_path {
        b"" => name.to_vec(),
        b"/" => [b"/", name].concat(),
        _ => [dir_path, b"/", name].concat(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::as_path;

    #[test]
    fn names_fit_a_file_name_and_give_back_their_pid() {
        for len in [1, 10, 200, 251, 255] {
            let name = vec![b'a'; len];
            let t = temp_name_of(&name, b"node17.cluster", 4_194_304);
            assert!(t.len() <= NAME_MAX, "{len}: {}", t.len());
            assert_eq!(pid_of(&t), Some(4_194_304));
            assert!(t.ends_with(b".node17.cluster.4194304.mfu-tmp"));
        }
        // Long names that differ only past the cut never share a temporary.
        let (mut a, mut b) = (vec![b'x'; 250], vec![b'x'; 250]);
        a.push(b'1');
        b.push(b'2');
        let (ta, tb) = (temp_name_of(&a, b"h", 7), temp_name_of(&b, b"h", 7));
        assert_ne!(ta, tb);
        assert!(ta.len() <= NAME_MAX && tb.len() <= NAME_MAX);
        assert_eq!(temp_name_of(&a, b"h", 7), ta, "the same name every time");
        assert_eq!(pid_of(b".A.tar.host.12.mfu-tmp"), Some(12));
        assert_eq!(pid_of(b".A.tar.host.x12.mfu-tmp"), None);
        assert_eq!(pid_of(b"A.tar.host.12.mfu-tmp"), None);
        assert_eq!(pid_of(b".A.tar.host.12.mfu-tmp.x"), None);
        assert_eq!(
            temp_path(b"d/e/f"),
            [b"d/e/".as_slice(), &temp_name(b"f")].concat()
        );
        assert_eq!(temp_path(b"f"), temp_name(b"f"));
    }

    fn dir_bytes(t: &tempfile::TempDir) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        t.path().as_os_str().as_bytes().to_vec()
    }

    fn names_in(t: &tempfile::TempDir) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn write(out: &Output, bytes: &[u8]) {
        use std::io::Write;
        out.file().unwrap().write_all(bytes).unwrap();
    }

    /// Publishing over an existing file replaces it whole; the temporary is gone and its
    /// directory synced (nothing else is left beside it).
    #[test]
    fn publish_overwrite_replaces_the_final_file() {
        let t = tempfile::tempdir().unwrap();
        let path = [dir_bytes(&t).as_slice(), b"/out"].concat();
        std::fs::write(t.path().join("out"), b"old").unwrap();
        let (out, stale) = Output::beside(&path, 0o644).unwrap();
        assert!(stale.is_empty());
        assert_eq!(out.path(), temp_path(&path).as_slice());
        assert_eq!(out.final_path(), path.as_slice());
        assert_eq!(
            std::fs::read(t.path().join("out")).unwrap(),
            b"old",
            "not yet"
        );
        write(&out, b"new");
        out.publish(Replace::Overwrite).unwrap();
        assert_eq!(std::fs::read(t.path().join("out")).unwrap(), b"new");
        assert_eq!(names_in(&t), ["out"]);
    }

    /// NoReplace refuses a final name that is taken (even by a dangling symlink), removes
    /// its temporary and leaves what is there alone; a free name is published.
    #[test]
    fn publish_no_replace_refuses_a_taken_name_and_takes_a_free_one() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let dir_path = dir_bytes(&t);
        std::fs::write(t.path().join("taken"), b"theirs").unwrap();
        std::os::unix::fs::symlink("nowhere", t.path().join("link")).unwrap();
        for base in ["taken", "link"] {
            let (out, _) =
                Output::in_dir(dir.as_fd(), &dir_path, base.as_bytes(), OFlags::RDWR, 0o600)
                    .unwrap();
            write(&out, b"mine");
            let e = out.publish(Replace::NoReplace).unwrap_err();
            assert_eq!(e.step, Step::Rename);
            assert_eq!(e.source.raw_os_error(), Some(libc::EEXIST), "{base}");
            assert_eq!(
                e.path,
                temp_path(&[&dir_path[..], b"/", base.as_bytes()].concat())
            );
            assert!(e.to.ends_with(base.as_bytes()));
        }
        assert_eq!(std::fs::read(t.path().join("taken")).unwrap(), b"theirs");
        assert_eq!(names_in(&t), ["link", "taken"], "temporaries removed");
        let (out, _) =
            Output::in_dir(dir.as_fd(), &dir_path, b"free", OFlags::WRONLY, 0o600).unwrap();
        write(&out, b"mine");
        out.publish(Replace::NoReplace).unwrap();
        assert_eq!(std::fs::read(t.path().join("free")).unwrap(), b"mine");
        assert_eq!(names_in(&t), ["free", "link", "taken"]);
    }

    /// An output discarded, or dropped unpublished (an error path, a stop), leaves nothing;
    /// one taken apart keeps its temporary, which it answers for again once put together.
    #[test]
    fn discard_drop_and_keep() {
        let t = tempfile::tempdir().unwrap();
        let path = [dir_bytes(&t).as_slice(), b"/a.tar"].concat();
        let (out, _) = Output::beside(&path, 0o644).unwrap();
        write(&out, b"half");
        out.discard().unwrap();
        assert!(names_in(&t).is_empty());
        {
            let (out, _) = Output::beside(&path, 0o644).unwrap();
            write(&out, b"half");
            assert_eq!(names_in(&t).len(), 1);
        }
        assert!(names_in(&t).is_empty(), "dropped unpublished: removed");
        let (out, _) = Output::beside(&path, 0o644).unwrap();
        write(&out, b"half");
        let parts = out.into_parts();
        drop(Output::from_parts(parts).into_parts());
        let temp = String::from_utf8(temp_name(b"a.tar")).unwrap();
        assert_eq!(names_in(&t), std::slice::from_ref(&temp), "kept on purpose");
        assert_eq!(std::fs::read(t.path().join(&temp)).unwrap(), b"half");
        // Another process's copy of the value (a forked child) never removes it.
        let parts = Parts {
            dir: open_parent(&path).unwrap(),
            base: b"a.tar".to_vec(),
            name: temp.clone().into_bytes(),
            path: temp_path(&path),
            final_path: path.clone(),
            file: None,
            final_dir: None,
        };
        let mut other = Output::from_parts(parts);
        other.creator = std::process::id() + 1;
        drop(other);
        assert_eq!(
            names_in(&t),
            std::slice::from_ref(&temp),
            "not the creator: left"
        );
        let parts = Parts {
            dir: open_parent(&path).unwrap(),
            base: b"a.tar".to_vec(),
            name: temp.into_bytes(),
            path: temp_path(&path),
            final_path: path.clone(),
            file: None,
            final_dir: None,
        };
        drop(Output::from_parts(parts));
        assert!(names_in(&t).is_empty(), "the creator's drop removes it");
    }

    /// A temporary kept by a killed run is taken over (renamed to this process's name, its
    /// bytes kept, other stale temporaries removed) only while it is the recorded file: the
    /// same (device, inode) with another birth time (an inode number reused after a removal),
    /// a second link, a symlink, a name that is not a temporary's or out of the directory are
    /// all refused with nothing changed.
    #[test]
    fn adopt_takes_over_only_the_recorded_file() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let dir_path = dir_bytes(&t);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let kept = temp_name_of(b"f.bz2", &host(), dead);
        let kept_s = String::from_utf8(kept.clone()).unwrap();
        std::fs::write(t.path().join(&kept_s), b"half").unwrap();
        let fd = std::fs::File::open(t.path().join(&kept_s)).unwrap();
        let was = Stamp::of(fd.as_fd()).unwrap();
        assert_eq!(Stamp::decode(&was.encode()), Some(was));
        assert_eq!(Stamp::decode(&was.encode()[..32]), None);
        let rw = OFlags::RDWR;
        let adopt = |name: &[u8], was: &Stamp| {
            Output::adopt(dir.as_fd(), &dir_path, b"f.bz2", name, was, rw)
        };
        // The same inode born at another time: another file.
        let other_time = |born: Born| match born {
            Born::Birth(s, n) => Born::Birth(s - 1, n),
            Born::Change(s, n) => Born::Change(s, n ^ 1),
        };
        let reborn = Stamp {
            born: other_time(was.born),
            ..was
        };
        assert!(adopt(&kept, &reborn).is_none());
        let moved = Stamp {
            id: (was.id.0, was.id.1 + 1),
            ..was
        };
        assert!(adopt(&kept, &moved).is_none());
        assert!(adopt(b"f.bz2", &was).is_none(), "not a temporary's name");
        assert!(adopt(&[b"../", kept.as_slice()].concat(), &was).is_none());
        std::fs::hard_link(t.path().join(&kept_s), t.path().join("link")).unwrap();
        assert!(adopt(&kept, &was).is_none(), "two links");
        std::fs::remove_file(t.path().join("link")).unwrap();
        assert_eq!(
            names_in(&t),
            std::slice::from_ref(&kept_s),
            "nothing changed"
        );
        // Another dead run's temporary of that name goes once the kept one is taken over.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_too = child.id();
        child.wait().unwrap();
        let older = String::from_utf8(temp_name_of(b"f.bz2", &host(), dead_too)).unwrap();
        std::fs::write(t.path().join(&older), b"older").unwrap();
        let (out, stale) = adopt(&kept, &was).unwrap();
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].path, beside(out.path(), older.as_bytes()));
        assert_eq!(out.name(), temp_name(b"f.bz2").as_slice());
        assert_eq!(out.identity().unwrap(), was.id);
        std::os::unix::fs::FileExt::write_all_at(out.file().unwrap(), b"+rest", 4).unwrap();
        out.publish(Replace::NoReplace).unwrap();
        assert_eq!(std::fs::read(t.path().join("f.bz2")).unwrap(), b"half+rest");
        assert_eq!(names_in(&t), ["f.bz2"]);
        // A symlink at the recorded name is never followed.
        std::os::unix::fs::symlink(t.path().join("f.bz2"), t.path().join(&kept_s)).unwrap();
        let target = std::fs::File::open(t.path().join("f.bz2")).unwrap();
        let target = Stamp::of(target.as_fd()).unwrap();
        assert!(adopt(&kept, &target).is_none());
    }

    /// Something planted at the (predictable) temporary name, a symlink to someone's file or
    /// a hard link to it, is refused: that file is neither truncated, written nor removed.
    #[test]
    fn a_link_planted_at_the_temporary_name_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let path = [dir_bytes(&t).as_slice(), b"/list"].concat();
        let temp = temp_path(&path);
        std::os::unix::fs::symlink(&victim, as_path(&temp)).unwrap();
        let e = Output::beside(&path, 0o644).unwrap_err();
        assert_eq!((e.step, e.path.clone()), (Step::Create, temp.clone()));
        assert_eq!(e.source.raw_os_error(), Some(libc::EEXIST));
        assert!(e.to_string().starts_with("create "), "{e}");
        std::fs::remove_file(as_path(&temp)).unwrap();
        std::fs::hard_link(&victim, as_path(&temp)).unwrap();
        let e = Output::beside(&path, 0o644).unwrap_err();
        assert_eq!(e.source.raw_os_error(), Some(libc::EEXIST));
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(
            std::fs::symlink_metadata(as_path(&temp)).is_ok(),
            "left alone"
        );
        assert!(!t.path().join("list").exists());
    }

    /// Creating an output removes (and reports) the temporary a dead process of this host
    /// left for that final name, never a live process's.
    #[test]
    fn creating_removes_a_dead_process_temporary_and_not_a_live_one() {
        let t = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let host = host();
        let name = |pid: u32| String::from_utf8(temp_name_of(b"m.b3", &host, pid)).unwrap();
        std::fs::write(t.path().join(name(dead)), b"killed run").unwrap();
        std::fs::write(t.path().join(name(1)), b"a live run").unwrap();
        let path = [dir_bytes(&t).as_slice(), b"/m.b3"].concat();
        let (out, stale) = Output::beside(&path, 0o644).unwrap();
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].path, beside(&path, name(dead).as_bytes()));
        assert!(stale[0].removed.is_ok());
        let mut want = vec![name(1), String::from_utf8(out.name().to_vec()).unwrap()];
        want.sort();
        assert_eq!(names_in(&t), want);
        out.publish(Replace::Overwrite).unwrap();
        assert!(t.path().join(name(1)).exists());
    }

    /// Defect (torture bz2-kill): a rank killed with its launcher is a zombie until init reaps
    /// it, which may be seconds later; kill(2) still finds it, so the next run took its
    /// temporary for a live run's and left it behind for good. A process that has exited is
    /// gone, reaped or not; a live one (this process, init) never is.
    #[test]
    fn a_zombie_process_temporary_is_stale() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let zombie = child.id();
        // Not reaped: wait until it has exited (a zombie, still found by kill(2)).
        let status = format!("/proc/{zombie}/status");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read_to_string(&status)
            .unwrap()
            .contains("State:\tZ")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never exited"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pid = rustix::process::Pid::from_raw(zombie as i32).unwrap();
        assert!(
            rustix::process::test_kill_process(pid).is_ok(),
            "kill(2) finds a zombie"
        );
        assert!(gone(zombie));
        assert!(!gone(1) && !gone(std::process::id()), "live processes");
        let name = String::from_utf8(temp_name_of(b"f.bz2", &host(), zombie)).unwrap();
        std::fs::write(t.path().join(&name), b"killed rank").unwrap();
        let removed = remove_stale(dir.as_fd(), b"f.bz2");
        child.wait().unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].0, name.as_bytes());
        assert!(names_in(&t).is_empty());
    }

    /// A final name as long as a file name may be: the temporary's name is cut to fit, and
    /// the output is published under the whole final name.
    #[test]
    fn a_longest_final_name_is_published() {
        let t = tempfile::tempdir().unwrap();
        let base = vec![b'n'; NAME_MAX];
        let path = [dir_bytes(&t).as_slice(), b"/", &base].concat();
        let (out, _) = Output::beside(&path, 0o644).unwrap();
        assert!(out.name().len() <= NAME_MAX);
        write(&out, b"long");
        out.publish(Replace::NoReplace).unwrap();
        assert_eq!(std::fs::read(as_path(&path)).unwrap(), b"long");
        assert_eq!(names_in(&t).len(), 1);
    }

    /// A final path with no `/` is in the current directory (not in `/`).
    #[test]
    fn a_bare_name_is_beside_in_the_current_directory() {
        let cwd = std::fs::File::open(".").unwrap();
        let dir = open_parent(b"no-such-list.mfu").unwrap();
        assert_eq!(
            identity(dir.as_fd()).unwrap(),
            identity(cwd.as_fd()).unwrap()
        );
        let dir = open_parent(b"/no-such-list.mfu").unwrap();
        let root = std::fs::File::open("/").unwrap();
        assert_eq!(
            identity(dir.as_fd()).unwrap(),
            identity(root.as_fd()).unwrap()
        );
    }

    /// A symbolic link is made under the temporary name and renamed over the old link.
    #[test]
    fn a_symlink_output_replaces_a_link() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        std::os::unix::fs::symlink("old/target", t.path().join("l")).unwrap();
        let out = Output::symlink(dir.as_fd(), &dir_bytes(&t), b"l", b"new/target").unwrap();
        assert!(out.file().is_none());
        assert_eq!(
            std::fs::read_link(as_path(out.path())).unwrap().as_os_str(),
            "new/target"
        );
        out.publish(Replace::Overwrite).unwrap();
        assert_eq!(
            std::fs::read_link(t.path().join("l")).unwrap().as_os_str(),
            "new/target"
        );
        assert_eq!(names_in(&t), ["l"]);
        // Dropped unpublished: the temporary link goes.
        drop(Output::symlink(dir.as_fd(), &dir_bytes(&t), b"l", b"x").unwrap());
        assert_eq!(names_in(&t), ["l"]);
    }

    /// Other ranks open the temporary by its path and check it is the creator's; a file put
    /// in its place since is refused, a symlink never followed.
    #[test]
    fn joining_checks_the_creator_file() {
        let t = tempfile::tempdir().unwrap();
        let path = [dir_bytes(&t).as_slice(), b"/shared"].concat();
        let (out, _) = Output::beside(&path, 0o600).unwrap();
        let id = out.identity().unwrap();
        let other = join(out.path(), OFlags::WRONLY, Some(id)).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&other, b"rank 1", 6).unwrap();
        other.sync_all().unwrap();
        write(&out, b"rank 0");
        let temp = out.path().to_vec();
        out.publish(Replace::Overwrite).unwrap();
        assert_eq!(std::fs::read(as_path(&path)).unwrap(), b"rank 0rank 1");
        std::fs::write(t.path().join("elsewhere"), b"x").unwrap();
        std::os::unix::fs::symlink(t.path().join("elsewhere"), as_path(&temp)).unwrap();
        let e = join(&temp, OFlags::WRONLY, None).unwrap_err();
        assert_eq!(e.step, Step::Join);
        assert_eq!(e.source.raw_os_error(), Some(libc::ELOOP));
        std::fs::remove_file(as_path(&temp)).unwrap();
        std::fs::write(as_path(&temp), b"").unwrap();
        let e = join(&temp, OFlags::WRONLY, Some(id)).unwrap_err();
        assert!(e.to_string().contains("not the temporary file"), "{e}");
    }

    /// Many final names of one directory at once: the temporaries of each, of every process
    /// that is gone, go (a long name's too, cut with its digest); those of names not given, of
    /// a live process and of this one stay.
    #[test]
    fn stale_temporaries_of_many_names_go_in_one_sweep() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let dead: Vec<u32> = (0..2)
            .map(|_| {
                let mut child = std::process::Command::new("true").spawn().unwrap();
                let pid = child.id();
                child.wait().unwrap();
                pid
            })
            .collect();
        let host = host();
        let long = vec![b'x'; 250];
        let bases: [&[u8]; 4] = [b"a", b"b\xff", &long, b"never-made"];
        let put = |base: &[u8], pid: u32| {
            let n = temp_name_of(base, &host, pid);
            std::fs::write(t.path().join(as_path(&n)), b"part").unwrap();
            n
        };
        let mut gone_ones = vec![
            put(b"a", dead[0]),
            put(b"b\xff", dead[1]),
            put(&long, dead[0]),
        ];
        gone_ones.sort();
        let stay = [put(b"not-asked", dead[0]), put(b"a", 1), temp_name(b"a")];
        std::fs::write(t.path().join(as_path(&stay[2])), b"mine").unwrap();
        let mut removed: Vec<Vec<u8>> = remove_stale_of(dir.as_fd(), &bases, None)
            .into_iter()
            .map(|(n, r)| {
                r.unwrap();
                n
            })
            .collect();
        removed.sort();
        assert_eq!(removed, gone_ones);
        for n in &stay {
            assert!(
                t.path().join(as_path(n)).exists(),
                "{}",
                crate::path::display(n)
            );
        }
        assert!(remove_stale_of(dir.as_fd(), &[], None).is_empty());
    }

    /// Only a regular file of this user, named for this base and host, whose process is gone,
    /// is stale: a live process's temporary, another base's, a symlink and another name stay.
    #[test]
    fn stale_temporaries_of_dead_processes_go_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let host = host();
        let name =
            |base: &[u8], pid: u32| String::from_utf8(temp_name_of(base, &host, pid)).unwrap();
        let stale = name(b"f.bz2", dead);
        std::fs::write(t.path().join(&stale), b"old").unwrap();
        std::fs::write(t.path().join(name(b"f.bz2", 1)), b"init's: alive").unwrap();
        std::fs::write(t.path().join(name(b"g.bz2", dead)), b"another base").unwrap();
        let dir_path = dir_bytes(&t);
        // This process's own temporary (a run still going) is never stale.
        let mine = temp_name(b"f.bz2");
        std::fs::write(t.path().join(as_path(&mine)), b"mine").unwrap();
        let link = String::from_utf8(temp_name_of(b"h", &host, dead)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", t.path().join(&link)).unwrap();
        let removed = remove_stale(dir.as_fd(), b"f.bz2");
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].0, stale.as_bytes());
        assert!(
            remove_stale(dir.as_fd(), b"h").is_empty(),
            "a symlink stays"
        );
        let mut left: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want = vec![
            name(b"f.bz2", 1),
            name(b"g.bz2", dead),
            link,
            String::from_utf8(mine.clone()).unwrap(),
        ];
        want.sort();
        assert_eq!(left, want);
        // This process's temporary name is taken: refused, never reused.
        let again = Output::in_dir(dir.as_fd(), &dir_path, b"f.bz2", OFlags::WRONLY, 0o600);
        assert_eq!(again.unwrap_err().source.raw_os_error(), Some(libc::EEXIST));
        assert_eq!(
            std::fs::read(t.path().join(as_path(&mine))).unwrap(),
            b"mine"
        );
    }

    /// A temporary of an exact name in a directory of its own (a checkpoint's): made new
    /// (what was at the name removed), kept across a "run" by taking it apart, adopted by the
    /// next one with its bytes, published into the other directory (the final name replaced,
    /// the checkpoint left empty); a symlink or directory at the name is never adopted, and
    /// nothing it points to is touched.
    #[test]
    fn a_named_temporary_is_adopted_and_published_into_another_directory() {
        let t = tempfile::tempdir().unwrap();
        let ck = t.path().join("ck");
        let out_dir = t.path().join("out");
        std::fs::create_dir(&ck).unwrap();
        std::fs::create_dir(&out_dir).unwrap();
        let (ckd, outd) = (File::open(&ck).unwrap(), File::open(&out_dir).unwrap());
        let ck_path = [dir_bytes(&t).as_slice(), b"/ck"].concat();
        let final_path = [dir_bytes(&t).as_slice(), b"/out/a.tar"].concat();
        std::fs::write(ck.join("partial"), b"left by a killed run").unwrap();
        std::fs::write(out_dir.join("a.tar"), b"old").unwrap();
        let make = |d: BorrowedFd<'_>, n: &[u8]| create_file(d, n, OFlags::WRONLY, 0o644);
        let named = |existing| {
            Output::named(
                ckd.as_fd(),
                &ck_path,
                b"partial",
                outd.as_fd(),
                &final_path,
                existing,
                make,
            )
        };
        let out = named(Existing::Replace).unwrap();
        assert_eq!(out.path(), [ck_path.as_slice(), b"/partial"].concat());
        assert_eq!(std::fs::read(ck.join("partial")).unwrap(), b"", "made new");
        write(&out, b"first ");
        drop(out.into_parts());
        let out = named(Existing::Adopt(OFlags::WRONLY | OFlags::APPEND)).unwrap();
        write(&out, b"second");
        out.publish(Replace::Overwrite).unwrap();
        assert_eq!(
            std::fs::read(out_dir.join("a.tar")).unwrap(),
            b"first second"
        );
        assert_eq!(std::fs::read_dir(&ck).unwrap().count(), 0);
        // Dropped unpublished: removed from the checkpoint, the final name untouched.
        drop(named(Existing::Replace).unwrap());
        assert_eq!(std::fs::read_dir(&ck).unwrap().count(), 0);
        assert_eq!(
            std::fs::read(out_dir.join("a.tar")).unwrap(),
            b"first second"
        );
        // Nothing to adopt, a symlink or a directory: refused.
        let e = named(Existing::Adopt(OFlags::WRONLY)).unwrap_err();
        assert_eq!(e.step, Step::Create);
        std::os::unix::fs::symlink(out_dir.join("a.tar"), ck.join("partial")).unwrap();
        assert!(named(Existing::Adopt(OFlags::WRONLY)).is_err());
        std::fs::remove_file(ck.join("partial")).unwrap();
        std::fs::create_dir(ck.join("partial")).unwrap();
        assert!(named(Existing::Adopt(OFlags::WRONLY)).is_err());
        assert_eq!(
            std::fs::read(out_dir.join("a.tar")).unwrap(),
            b"first second"
        );
    }
}
