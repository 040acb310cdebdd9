//! `tar -x`: extract in parallel.
//!
//! The stream is split by bytes over ranks ([`scan::share`]; on frame boundaries when
//! compressed). A rank handles the entries whose headers start in its part and writes the data
//! bytes that lie in its part, including the tail of an entry that started before it, so a big
//! file's data is written by every rank its bytes span. Phases, each closed by a barrier:
//! 1. symlinks (so that a later path through one is refused, never followed);
//! 2. directories;
//! 3. files created empty at their final size (an existing non-directory is replaced);
//! 4. data: `copy_file_range` from the archive in chunks, or, compressed, one zstd frame per
//!    task, decompressed once and written to every file it holds;
//! 5. hard links, fifos and devices;
//! 6. metadata of files and links; then directories' metadata, deepest first.
//!
//! Every write goes through [`Target`], which never follows a symlink, and every name through
//! [`clean`], which refuses absolute paths and `..`.

pub mod beneath;
mod entries;
mod owners;
mod pieces;
mod resume;
mod serial;
mod superseded;

use super::{Done, Options, Report};
use crate::engine::context::{Error, ToolReport};
use crate::engine::copy::data::{copy_at_seen, write_all_at, Buffer, DataOptions, Seen};
use crate::engine::copy::meta::{write_xattrs, MetaOptions, Target as XattrTarget, XattrPolicy};
use crate::engine::copy::projid;
use crate::engine::copy::striping::Striping;
use crate::engine::digest::{HashKind, RangeDigest, RangeHasher};
use crate::engine::hashing::Hashing;
use crate::tar::archive::Archive;
use crate::tar::extract::beneath::{clean, explain, split, Target};
use crate::tar::extract::entries::{Entries as Store, Item};
use crate::tar::extract::owners::Owners;
use crate::tar::extract::superseded::superseded;
use crate::tar::format::{Decoded, Kind, Segment};
use crate::tar::index::scan::{self, Located};
use crate::tar::index::{self, Source};
use crate::tar::select::{self, Matcher};
use flist::atomic::{Output, OutputError, Replace, Stale, Step};
use flist::path::{display, normalize};
use rayon::prelude::*;
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Gid, Mode, OFlags, Timespec, Timestamps, Uid};
use rustix::io::Errno;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use steal::{Comm, CommExt};

/// How metadata is restored.
struct Restore {
    /// Give entries their archived owner.
    owner: bool,
    /// Modes (exact, or less the umask) through the copy engine's rule.
    modes: MetaOptions,
    /// Restore archived xattrs.
    xattrs: bool,
}

impl Restore {
    fn mode(&self, mode: u32) -> u32 {
        self.modes.mode_of(mode)
    }

    /// Give the open entry `fd` (a regular file or a directory, `dir`) the archived project ID
    /// of `h`, with the owner (`--same-owner`, or as root): an entry without one keeps what its
    /// directory gave it. A target file system without project IDs is noted once, under the
    /// target directory `dest`; a refusal fails the entry, except `EPERM` when not root (as a
    /// chown's).
    fn projid(&self, fd: BorrowedFd<'_>, h: &Item, dir: bool, dest: &[u8]) -> Result<(), String> {
        if !self.owner || h.projid.is_none() {
            return Ok(());
        }
        match projid::set(fd, h.projid, dir) {
            Ok(projid::Set::Unsupported) => {
                self.modes.unkept.note(dest, h.projid);
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(Errno::PERM) if !self.modes.root => Ok(()),
            Err(e) => Err(format!("set project ID: {}", explain(e))),
        }
    }
}

/// Failures of this rank, each naming the entry.
#[derive(Default)]
struct Failures(Mutex<Vec<String>>, Mutex<Vec<u64>>);

impl Failures {
    fn add(&self, path: &[u8], what: impl std::fmt::Display) {
        self.0
            .lock()
            .expect("failures")
            .push(format!("{}: {what}", display(path)));
    }
    /// A file's data could not be written (a full file system, a damaged zstd frame, a failed
    /// read-back): whichever rank owns the entry must not give it its archived metadata.
    /// `start` is the entry's header offset.
    fn data_failed(&self, start: u64, path: &[u8], what: impl std::fmt::Display) {
        self.add(path, what);
        self.1.lock().expect("failures").push(start);
    }
    /// Header offsets of the entries whose data failed on any rank. Collective.
    fn data_failed_anywhere(&self, comm: &dyn Comm) -> HashSet<u64> {
        let mine = self.1.lock().expect("failures").clone();
        comm.all_gather(&mine).into_iter().flatten().collect()
    }
    /// True while nothing failed on this rank.
    fn none(&self) -> bool {
        self.0.lock().expect("failures").is_empty()
    }
    /// The failures so far, taken.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("failures"))
    }
}

/// Open the existing file `rel` for writing, without following symlinks.
fn open_file(target: &Target, rel: &[u8]) -> Result<OwnedFd, Errno> {
    let (parent, name) = split(rel);
    let dir = target.dir(parent, false)?;
    rustix::fs::openat(
        &dir,
        name,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Open the existing file `rel` for writing its data (as [`open_file`]), refused when it is a
/// file the target keeps (the archive being read, its index): the file phase made a new
/// file of that name, so that would be someone else's doing, and the archive is never
/// written.
fn open_data(target: &Target, rel: &[u8]) -> Result<OwnedFd, String> {
    let fd = open_file(target, rel).map_err(explain)?;
    let st = rustix::fs::fstat(&fd).map_err(explain)?;
    match target.kept(&st) {
        Some(what) => Err(format!("refusing to write {what}")),
        None => Ok(fd),
    }
}

/// Run `make` in the parent of `rel` (created if missing) for the name; when the name is
/// taken by a non-directory, remove that and try once more.
fn replace_at<T>(
    target: &Target,
    rel: &[u8],
    make: impl Fn(BorrowedFd<'_>, &[u8]) -> Result<T, Errno>,
) -> Result<T, String> {
    let (parent, name) = split(rel);
    let dir = target.dir(parent, true).map_err(explain)?;
    replace_in(target, dir.as_fd(), name, make)
}

/// [`replace_at`] for `name` in the directory `dir` (beneath `target`). What the name holds is
/// removed only when it is not a file the target keeps ([`Target::keep`]): the archive being
/// read (`cd D && tar -xf a.tar` of an archive holding `a.tar`, or a hard link to it) would
/// be gone once the run ends, as would its side index.
fn replace_in<T>(
    target: &Target,
    dir: BorrowedFd<'_>,
    name: &[u8],
    make: impl Fn(BorrowedFd<'_>, &[u8]) -> Result<T, Errno>,
) -> Result<T, String> {
    match make(dir, name) {
        Err(Errno::EXIST) => {
            let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(explain)?;
            if let Some(what) = target.kept(&st) {
                return Err(format!("refusing to overwrite {what}"));
            }
            if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                return Err("a directory of that name is in the way".into());
            }
            rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(explain)?;
            make(dir, name).map_err(explain)
        }
        r => r.map_err(explain),
    }
}

/// The parent directory of the file created last on this worker, kept open: files come in
/// archive order, so most share it, and a directory lookup per file is spared. Only for the
/// file phase, in which no directory is removed or replaced.
#[derive(Default)]
struct DirCache {
    rel: Vec<u8>,
    fd: Option<OwnedFd>,
    /// The directory's group, once asked for.
    gid: Option<u32>,
}

impl DirCache {
    /// The directory `rel` beneath `target`, created if missing (as [`Target::dir`]).
    fn get(&mut self, target: &Target, rel: &[u8]) -> Result<BorrowedFd<'_>, Errno> {
        if self.fd.is_none() || self.rel != rel {
            self.fd = None;
            self.gid = None;
            self.rel.clear();
            self.fd = Some(target.dir(rel, true)?);
            self.rel.extend_from_slice(rel);
        }
        Ok(self.fd.as_ref().expect("opened above").as_fd())
    }

    /// The group of the directory last given by [`DirCache::get`] (one `fstat` per
    /// directory); `None` if it cannot be told.
    fn group(&mut self) -> Option<u32> {
        if self.gid.is_none() {
            let st = rustix::fs::fstat(self.fd.as_ref()?).ok()?;
            self.gid = Some(st.st_gid);
        }
        self.gid
    }
}

/// Archive bytes read ahead for the small files that follow one another in a rank's part:
/// one read for many files, then one write each, in place of a `copy_file_range` each (on
/// tmpfs the splice behind `copy_file_range` costs more than the copy of a few KiB).
#[derive(Default)]
struct Ahead {
    /// Archive offset of `buf[0]`.
    at: u64,
    buf: Vec<u8>,
    /// Bytes of `buf` read.
    filled: usize,
}

/// Bytes [`Ahead`] reads at once.
const AHEAD: usize = 1 << 20;
/// Files up to this size (bytes) are written from [`Ahead`]'s window.
const AHEAD_FILE: u64 = 64 << 10;

impl Ahead {
    /// The data of `item` (a plain file of at most [`AHEAD_FILE`] bytes in an uncompressed
    /// archive) from the window, read anew at its data when it is not inside, never past
    /// `limit` (the end of this rank's part); `None` for any other entry, or when the archive
    /// could not be read (the caller's copy then says why).
    fn bytes(&mut self, archive: &Archive, item: &Item, limit: u64) -> Option<&[u8]> {
        let (from, len) = (item.data, item.size);
        if archive.table().is_some() || item.sparse.is_some() || len == 0 || len > AHEAD_FILE {
            return None;
        }
        let end = from.checked_add(len)?;
        if from < self.at || end > self.at + self.filled as u64 {
            if self.buf.is_empty() {
                self.buf = vec![0; AHEAD];
            }
            let want = (limit.saturating_sub(from).max(len) as usize).min(AHEAD);
            self.at = from;
            self.filled = 0;
            while self.filled < want {
                match rustix::io::pread(
                    archive.fd(),
                    &mut self.buf[self.filled..want],
                    from + self.filled as u64,
                ) {
                    Ok(0) => break,
                    Ok(n) => self.filled += n,
                    Err(Errno::INTR) => {}
                    Err(_) => break,
                }
            }
            if end > self.at + self.filled as u64 {
                return None;
            }
        }
        let at = (from - self.at) as usize;
        Some(&self.buf[at..at + len as usize])
    }
}

/// Where new files go and how they are laid out on Lustre.
struct Layouts<'a> {
    stripes: &'a Striping<'a>,
    /// The target directory.
    dest: &'a [u8],
    /// `--chunksize`, which the policy's stripe size derives from (bytes).
    chunk: u64,
}

impl Layouts<'_> {
    /// The stripe size data writes align to, on Lustre (bytes).
    fn align(&self) -> Option<u64> {
        self.stripes
            .is_on()
            .then(|| u64::from(self.stripes.stripe_size(self.chunk)))
    }
}

/// Create the file of `item` (parents made if missing; a non-directory in the way replaced),
/// exclusively and without following links; on Lustre with the layout the policy gives its
/// size.
fn open_new(
    dirs: &mut DirCache,
    target: &Target,
    item: &Item,
    lay: &Layouts,
) -> Result<OwnedFd, String> {
    let (parent, name) = split(item.rel);
    let dir = dirs.get(target, parent).map_err(explain)?;
    // The full path only matters on Lustre (the layout policy may look at it).
    let full = if lay.stripes.is_on() {
        [lay.dest, b"/", item.rel].concat()
    } else {
        Vec::new()
    };
    replace_in(target, dir, name, |dir, name| {
        let plain = || {
            rustix::fs::openat(
                dir,
                name,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .map_err(io::Error::from)
        };
        lay.stripes
            .create_in(
                dir.as_fd(),
                name,
                &full,
                item.size,
                lay.chunk,
                libc::O_EXCL | libc::O_NOFOLLOW,
                plain,
            )
            .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))
    })
}

/// Create the file of `item` empty at its size (its data comes in phase 4); returns it open.
fn create_file(
    dirs: &mut DirCache,
    target: &Target,
    item: &Item,
    lay: &Layouts,
) -> Result<OwnedFd, String> {
    let fd = open_new(dirs, target, item, lay)?;
    rustix::fs::ftruncate(&fd, item.size).map_err(explain)?;
    Ok(fd)
}

fn make_other(target: &Target, item: &Item) -> Result<(), String> {
    let h = item;
    match h.kind {
        Kind::Symlink => replace_at(target, item.rel, |dir, name| {
            rustix::fs::symlinkat(OsStr::from_bytes(h.link), dir, name)
        }),
        Kind::HardLink => {
            // The link's directory first, whether its target is there or not (GNU tar makes it
            // too; with member selection the target may not have been extracted).
            target.dir(split(item.rel).0, true).map_err(explain)?;
            let to = clean(h.link).map_err(|e| format!("hard link to {}: {e}", display(h.link)))?;
            let (tp, tn) = split(&to);
            let tdir = target
                .dir(tp, false)
                .map_err(|e| format!("hard link to {}: {}", display(h.link), explain(e)))?;
            let is_dir = rustix::fs::statat(&tdir, tn, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
            if is_dir {
                return Err(format!(
                    "hard link to {}: it is a directory (not extracted; GNU tar refuses it too)",
                    display(h.link)
                ));
            }
            replace_at(target, item.rel, |dir, name| {
                rustix::fs::linkat(&tdir, tn, dir, name, AtFlags::empty())
            })
            .map_err(|e| format!("hard link to {}: {e}", display(h.link)))
        }
        Kind::Fifo | Kind::Char | Kind::Block => {
            let (ty, dev) = match h.kind {
                Kind::Fifo => (rustix::fs::FileType::Fifo, 0),
                Kind::Char => (
                    rustix::fs::FileType::CharacterDevice,
                    rustix::fs::makedev(h.dev_major, h.dev_minor),
                ),
                _ => (
                    rustix::fs::FileType::BlockDevice,
                    rustix::fs::makedev(h.dev_major, h.dev_minor),
                ),
            };
            replace_at(target, item.rel, |dir, name| {
                rustix::fs::mknodat(dir, name, ty, Mode::from_raw_mode(0o600), dev)
            })
        }
        _ => Ok(()),
    }
}

/// What an abandoned file is told when a signal stopped the extraction.
const INTERRUPTED: &str = "interrupted before its data was complete: left without the \
                           archive's times";

/// Write the data of the file entry `d` into `fd` (a new, empty file): its bytes, or for a
/// sparse file each segment at its place, leaving holes, and then its real size. Copies
/// `chunk` bytes at a time and stops with an error once `stop` is set (SIGINT/SIGTERM on the
/// command line). Returns the data bytes written.
/// With `hashed`, every byte of the file (holes as zeros) goes through it, in order.
fn write_contents(
    archive: &Archive,
    d: &Item,
    fd: BorrowedFd<'_>,
    (data, buf, cfr): (&DataOptions, &mut Buffer, &mut bool),
    chunk: u64,
    stop: &AtomicBool,
    mut hashed: Option<&mut RangeHasher>,
) -> Result<u64, String> {
    let whole = [Segment { at: 0, len: d.size }];
    let segments = d.sparse.unwrap_or(&whole);
    let chunk = chunk.max(1 << 20);
    let mut from = d.data;
    let mut written = 0u64;
    // Where the hashed bytes have got to (holes before it are hashed as zeros).
    let mut hashed_to = 0u64;
    for seg in segments {
        if let Some(h) = hashed.as_deref_mut() {
            hash_zeros(h, seg.at.saturating_sub(hashed_to));
            hashed_to = hashed_to.max(seg.at + seg.len);
        }
        let mut done = 0u64;
        while done < seg.len {
            if stop.load(Ordering::Relaxed) {
                return Err(INTERRUPTED.into());
            }
            let len = chunk.min(seg.len - done);
            let to = seg.at + done;
            if archive.table().is_none() {
                let hashing = hashed.is_some();
                let mut see = |b: &[u8]| {
                    if let Some(h) = hashed.as_deref_mut() {
                        h.update(b);
                    }
                };
                let seen: Seen<'_> = hashing.then_some(&mut see);
                copy_at_seen(archive.fd(), from, fd, to, len, data, buf, cfr, seen)
                    .map_err(from_archive)?;
            } else {
                let bytes = archive
                    .read_at(from, len as usize)
                    .map_err(|e| format!("read the archive: {e}"))?;
                if (bytes.len() as u64) < len {
                    return Err("truncated archive: the entry's data is cut short".into());
                }
                if let Some(h) = hashed.as_deref_mut() {
                    h.update(&bytes);
                }
                write_all_at(fd, &bytes, to).map_err(|e| format!("{}: {}", e.op, e.source))?;
            }
            from += len;
            done += len;
            written += len;
        }
    }
    if d.sparse.is_some() {
        // The holes at the end: the file's real size.
        rustix::fs::ftruncate(fd, d.size).map_err(|e| format!("truncate: {}", explain(e)))?;
    }
    if let Some(h) = hashed {
        hash_zeros(h, d.size.saturating_sub(hashed_to));
    }
    Ok(written)
}

/// Hash `len` zero bytes (a sparse file's holes).
fn hash_zeros(h: &mut RangeHasher, mut len: u64) {
    let zeros = [0u8; 64 << 10];
    while len > 0 {
        let n = len.min(zeros.len() as u64);
        h.update(&zeros[..n as usize]);
        len -= n;
    }
}

/// `--verify`, `--manifest`: after the `len` bytes at `offset` of the file `rel` (of
/// `size` bytes, open as `fd`) landed, check them and keep their digest.
fn landed(
    hashing: &Hashing,
    fd: BorrowedFd<'_>,
    rel: &[u8],
    size: u64,
    range: (u64, u64),
    hashed: Option<RangeHasher>,
) -> Result<(), String> {
    match hashed {
        Some(h) => hashing
            .landed(fd, rel, size, range, h)
            .map_err(|e| format!("{}: {}", e.op, e.source)),
        None => Ok(()),
    }
}

/// The message for a failed copy out of the archive.
fn from_archive(e: crate::engine::copy::data::DataError) -> String {
    if e.source.kind() == io::ErrorKind::UnexpectedEof {
        "truncated archive: the entry's data is cut short".to_string()
    } else {
        format!("{}: {}", e.op, e.source)
    }
}

/// Access time now, modification time from the archive.
fn times_of(h: &Item) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        last_modification: Timespec {
            tv_sec: h.mtime,
            tv_nsec: h.mtime_nsec as _,
        },
    }
}

/// Owner, mode, mtime and xattrs of an extracted entry (not for hard links: their inode got
/// its metadata as a file).
///
/// The entry is opened with `O_PATH | O_NOFOLLOW` and checked to be what the archive says
/// before anything changes: `chmod` has no form that refuses to follow a symlink, so it goes
/// through that descriptor and can never reach what a symlink points to. With `identity`,
/// returns the entry's `stat` once done (for a checkpoint's mark).
fn set_meta(
    (target, dest): (&Target, &[u8]),
    item: &Item,
    how: &Restore,
    identity: bool,
) -> Result<Option<rustix::fs::Stat>, String> {
    let h = item;
    let want = match h.kind {
        Kind::Dir => libc::S_IFDIR,
        Kind::File => libc::S_IFREG,
        Kind::Symlink => libc::S_IFLNK,
        Kind::Fifo => libc::S_IFIFO,
        Kind::Char => libc::S_IFCHR,
        Kind::Block => libc::S_IFBLK,
        Kind::HardLink | Kind::Other(_) => return Ok(None),
    };
    let (parent, name) = split(item.rel);
    let dir = if item.rel.is_empty() {
        None
    } else {
        Some(target.dir(parent, false).map_err(explain)?)
    };
    let (dir_fd, name): (_, &[u8]) = match &dir {
        Some(d) => (d.as_fd(), name),
        None => (target.root(), b"."),
    };
    let step = |op: &str, r: Result<(), Errno>| r.map_err(|e| format!("{op}: {}", explain(e)));
    let fd = rustix::fs::openat(
        dir_fd,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open: {}", explain(e)))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("stat: {}", explain(e)))?;
    if st.st_mode & libc::S_IFMT != want {
        return Err(
            "is no longer what the archive holds (another entry of that name replaced it); \
             its metadata was not set"
                .into(),
        );
    }
    let fd_path = |fd: BorrowedFd<'_>, name: &[u8]| {
        let mut p = format!("/proc/self/fd/{}", fd.as_raw_fd()).into_bytes();
        if !name.is_empty() {
            p.push(b'/');
            p.extend_from_slice(name);
        }
        p
    };
    if how.xattrs && !h.xattrs.is_empty() {
        write_xattrs(XattrTarget::Path(&fd_path(dir_fd, name)), h.xattrs)
            .map_err(|e| format!("set xattr: {e}"))?;
    }
    if how.owner {
        let r = rustix::fs::chownat(
            &fd,
            "",
            Some(Uid::from_raw(h.uid)),
            Some(Gid::from_raw(h.gid)),
            AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
        );
        step("chown", r)?;
    }
    if how.owner && !h.projid.is_none() && matches!(h.kind, Kind::Dir | Kind::File) {
        // The O_PATH descriptor takes no ioctl: the entry it pins (checked above to be of
        // its type, so never a symlink) is opened through it.
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let open = rustix::fs::open(
            OsStr::from_bytes(&fd_path(fd.as_fd(), b"")),
            flags,
            Mode::empty(),
        )
        .map_err(|e| format!("open: {}", explain(e)))?;
        how.projid(open.as_fd(), h, h.kind == Kind::Dir, dest)?;
    }
    if h.kind != Kind::Symlink {
        let r = rustix::fs::chmod(
            OsStr::from_bytes(&fd_path(fd.as_fd(), b"")),
            Mode::from_raw_mode(how.mode(h.mode)),
        );
        step("chmod", r)?;
    }
    step(
        "set times",
        rustix::fs::utimensat(dir_fd, name, &times_of(h), AtFlags::SYMLINK_NOFOLLOW),
    )?;
    // With `identity`: what was made, as a checkpoint's mark records it (see
    // `resume::Earlier::still_done`); a system call only then.
    Ok(identity.then(|| rustix::fs::fstat(&fd).ok()).flatten())
}

/// What becomes of a decoded entry before it is kept: renamed (`--strip-components`), given
/// the owner its names have here; `Ok(false)` leaves it out, `Err` names why it cannot be
/// extracted.
type Adjust<'a> = dyn FnMut(&mut Decoded) -> Result<bool, String> + 'a;

/// The entries of this rank's part of the stream: those whose headers start in `[start, end)`
/// and the one before whose data reaches into it, as `adjust` makes them.
fn my_items(
    archive: &Archive,
    path: &[u8],
    found: &Located,
    (start, end): (u64, u64),
    fail: &Failures,
    adjust: &mut Adjust<'_>,
) -> Store {
    let first = found.offsets.partition_point(|&o| o < start);
    let last = found.offsets.partition_point(|&o| o < end);
    let from = first.saturating_sub(usize::from(first > 0));
    // At most one record per offset: sized once (growing by doubling would hold up to twice).
    let mut out = Store::with_capacity(last - from);
    // Decoded a run at a time, each entry kept as a compact record (its name once, cleaned,
    // in one arena; no owner names): a rank's state stays near its entries' count times a
    // small record, with no decoded header kept.
    for (run, offsets) in found.offsets[from..last].chunks(DECODE_RUN).enumerate() {
        for (j, d) in scan::decode_in(archive, offsets, &found.globals)
            .into_iter()
            .enumerate()
        {
            let own = from + run * DECODE_RUN + j >= first;
            let mut d = match d {
                Ok(d) => d,
                Err(e) => {
                    if own {
                        fail.add(path, e);
                    }
                    continue;
                }
            };
            // A sparse file is written whole by the rank that has its header (its data is not
            // laid out as the file is).
            if !own
                && (!d.header.has_data() || d.sparse.is_some() || d.data + d.header.size <= start)
            {
                continue;
            }
            match adjust(&mut d) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    if own {
                        fail.add(&d.header.path, e);
                    }
                    continue;
                }
            }
            match clean(&d.header.path) {
                Ok(rel) => out.push(&rel, &d, own),
                Err(e) => {
                    if own {
                        fail.add(&d.header.path, e);
                    }
                }
            }
        }
    }
    out.shrink_to_fit();
    out
}

/// Entries per rank in a piece when the entries of `located` (in `archive`, at `path`, as
/// `m` takes them) outgrow the memory `limit` (bytes) on some rank and can be extracted a piece
/// at a time: not a compressed archive, no name twice (each said on stderr). Collective.
fn piecewise(
    comm: &dyn Comm,
    archive: &Archive,
    path: &[u8],
    located: &Located,
    m: &Matcher,
    o: &Options,
    limit: u64,
) -> Option<u64> {
    let per_rank = pieces::per_rank(comm, located, limit).filter(|_| {
        // A compressed archive's parts fall on its frames, not on entries.
        let framed = archive.table().is_some();
        if framed && comm.rank() == 0 {
            o.context.events.error(&format!(
                "{}: a compressed archive is extracted with all its entries in memory, \
                 beyond --memory-limit",
                display(path)
            ));
        }
        !framed
    });
    // Tar keeps the last entry of a name, and an extraction in pieces could not take back an
    // earlier piece's version: an archive with a name twice is extracted whole.
    per_rank.filter(|&k| {
        let repeats = names_repeat(comm, archive, path, located, k, m, o);
        if repeats && comm.rank() == 0 {
            o.context.events.error(&format!(
                "{}: some names occur more than once (tar keeps the last): extracted with \
                 all its entries in memory, beyond --memory-limit",
                display(path)
            ));
        }
        !repeats
    })
}

/// Whether a name occurs twice among the entries of `located` (as [`my_items`] names them),
/// found a piece of `per_rank` entries per rank at a time: the (hash, start) of each entry
/// at the rank of its hash (16 bytes an entry). Collective.
fn names_repeat(
    comm: &dyn Comm,
    archive: &Archive,
    path: &[u8],
    located: &Located,
    per_rank: u64,
    m: &Matcher,
    o: &Options,
) -> bool {
    let by_name = (o.preserve_owner || rustix::process::geteuid().is_root()) && !o.numeric_owner;
    let mut adjust = adjuster(m, by_name);
    // Failures are said by the extraction itself.
    let unsaid = Failures::default();
    let mut records = Vec::new();
    for s in 0..pieces::count(comm, located, per_rank) {
        let l = pieces::piece(comm, located, per_rank, s);
        let part = l.parts.of(comm.rank());
        let items = my_items(archive, path, &l, part, &unsaid, &mut adjust);
        records.extend(superseded::hashes_here(comm, &items));
    }
    comm.any(!superseded::duplicate_starts(records).is_empty())
}

/// Entries decoded at once by [`my_items`].
const DECODE_RUN: usize = 1 << 14;

/// For each of `items` (in archive order), the end (bytes) of the run of entries that follow
/// one another in the archive from it: where the data of the last ends, before a gap of
/// entries not kept.
fn run_ends(items: &Store) -> Vec<u64> {
    let n = items.len();
    let mut ends = vec![0; n];
    for i in (0..n).rev() {
        let it = items.get(i);
        let stored = it
            .sparse
            .map_or(it.size, |m| m.iter().map(|s| s.len).sum::<u64>());
        let own_end = it.data + if it.kind == Kind::File { stored } else { 0 };
        let next_follows = i + 1 < n && items.start(i + 1) <= own_end.next_multiple_of(512);
        ends[i] = if next_follows { ends[i + 1] } else { own_end };
    }
    ends
}

/// The [`Adjust`] of a run: `--strip-components` on names and hard-link targets, and with
/// `owner` (owners restored, not `--numeric-owner`) the ids the archived names have here.
fn adjuster<'a>(
    m: &'a Matcher<'a>,
    owner: bool,
) -> impl FnMut(&mut Decoded) -> Result<bool, String> + 'a {
    let mut owners = owner.then(Owners::default);
    move |d: &mut Decoded| {
        let h = &mut d.header;
        if m.strips() {
            match m.strip(&h.path) {
                Some(p) => h.path = p.to_vec(),
                None => return Ok(false),
            }
            if h.kind == Kind::HardLink {
                match m.strip(&h.link) {
                    Some(l) => h.link = l.to_vec(),
                    None => {
                        return Err(format!(
                            "hard link to {}: --strip-components leaves nothing of its target",
                            display(&h.link)
                        ))
                    }
                }
            }
        }
        if let Some(owners) = owners.as_mut() {
            owners.resolve(h);
        }
        Ok(true)
    }
}

/// The archive bytes of the file whose data is `[data, data + size)` that the rank owning
/// `[start, end)` writes: the overlap, or with `align` the overlap with both ends moved up to
/// the next multiple of `align` from the file's start (the ranks' pieces still tile the file,
/// and each stripe of it falls in one piece).
fn file_share(data: u64, size: u64, (start, end): (u64, u64), align: Option<u64>) -> (u64, u64) {
    match align {
        None => (data.max(start), (data + size).min(end)),
        Some(s) => {
            let edge = |x: u64| data + x.saturating_sub(data).next_multiple_of(s).min(size);
            (edge(start), edge(end))
        }
    }
}

/// What [`find_entries`] found, and what a report says about it.
pub(super) struct Found {
    /// The entries.
    pub located: Located,
    /// The archive is damaged (said through the context).
    pub damaged: bool,
    /// `--save-index` was asked and the index could not be saved (said through the context).
    pub index_not_saved: bool,
    /// Notices said through the context that are no failure (rank 0's): an index set aside,
    /// the archive had no index and was scanned, the index was saved.
    pub notices: Vec<String>,
}

impl Found {
    /// A report of `archive` with what finding the entries told.
    pub fn report(&self, archive: Vec<u8>) -> Report {
        Report {
            archive,
            scanned: self.located.source == Source::Scan,
            damaged: self.damaged,
            index_not_saved: self.index_not_saved,
            notices: self.notices.clone(),
            ..Report::default()
        }
    }
}

/// Find the entries and say how (an index that did not hold against the archive is named, with
/// why, and the archive is scanned instead); with [`Options::save_index`] keep a scanned index.
/// Rank 0 tells `o.context`. Collective.
pub(super) fn find_entries(comm: &dyn Comm, archive: &Archive, path: &[u8], o: &Options) -> Found {
    let found = scan::locate(comm, archive, path, o.memsize, o.save_index);
    let rank0 = comm.rank() == 0;
    let say = |text: String| o.context.error(text);
    let mut notices = Vec::new();
    // Said on stderr as a failure is, but not kept among the report's failures: the run may
    // well succeed (a JSON report with status 0 lists no failure).
    let mut note = |text: String| {
        o.context.events.error(&text);
        notices.push(text);
    };
    if rank0 {
        // An index set aside is no failure: the archive is scanned instead.
        for why in &found.rejected {
            note(format!("not using {why}"));
        }
    }
    if let (Some(d), true) = (&found.damage, rank0) {
        say(format!("{}: {d}", display(path)));
    }
    let mut index_not_saved = false;
    if found.source == Source::Scan && rank0 {
        let side = index::side_path(path);
        if o.save_index && found.damage.is_some() {
            say(format!(
                "the index of a damaged archive is not saved as {}",
                display(&side)
            ));
        } else if o.save_index {
            match save_index(&found, &side) {
                Err(e) => {
                    say(format!("save index {}: {e}", display(&side)));
                    index_not_saved = true;
                }
                Ok((n, stale)) => {
                    for s in &stale {
                        note(crate::engine::outputs::stale_note(s, "temporary index"));
                    }
                    if o.index_notices {
                        note(format!(
                            "saved the index of {} as {}",
                            crate::engine::wording::entries(n as u64),
                            display(&side)
                        ));
                    }
                }
            }
        } else if o.index_notices {
            let how = if found.rejected.is_empty() {
                "has no index; scanned it"
            } else {
                "scanned instead"
            };
            note(format!(
                "{} {how} and found {} (--save-index keeps the index as {} for the next run)",
                display(path),
                crate::engine::wording::entries(found.total),
                display(&side)
            ));
        }
    }
    Found {
        damaged: found.damage.is_some(),
        index_not_saved,
        notices,
        located: found,
    }
}

/// Say (rank 0, on stderr through the events sink) that the index of `archive`'s frames was
/// set aside (damaged or missing), if it was: the archive is read front to back instead,
/// every frame still checked by its own CRC or checksum. A notice, no failure (the run may
/// well succeed): returned for [`Report::notices`] (rank 0's; empty elsewhere).
pub(super) fn say_set_aside(
    comm: &dyn Comm,
    archive: &Archive,
    path: &[u8],
    o: &Options,
) -> Vec<String> {
    match (archive.set_aside(), comm.rank()) {
        (Some(why), 0) => {
            let text = format!(
                "{}: not using its index of compressed frames ({why}): reading the archive \
                 front to back instead, each frame checked by its own checksum",
                display(path)
            );
            o.context.events.error(&text);
            vec![text]
        }
        _ => Vec::new(),
    }
}

/// Save the index a scan found as the side file `side` (an [`Output`]: a new name, synced,
/// then a rename: a reader never sees half an index; whatever already has the predictable
/// temporary name, someone's file or a link to one, is refused, never truncated, written
/// through or removed); returns the entries it holds and the temporaries of killed earlier
/// runs it removed.
fn save_index(found: &Located, side: &[u8]) -> Result<(usize, Vec<Stale>), OutputError> {
    use std::io::Write;
    let mut offsets = found.offsets.clone();
    if let Some(m) = found.member {
        offsets.push(m);
    }
    let (out, stale) = Output::beside(side, 0o666)?;
    let mut file = out.file().expect("a file output");
    file.write_all(&index::encode_index(&offsets, found.end))
        .map_err(|source| OutputError {
            step: Step::Write,
            path: out.path().to_vec(),
            to: Vec::new(),
            source,
        })?;
    out.publish(Replace::Overwrite)?;
    Ok((offsets.len(), stale))
}

/// Keep `target` from replacing or writing the archive `archive` (at `path`) and its side
/// index, when there is one, whatever names they have beneath it (compared by device and
/// inode, on each rank as it sees them).
pub(super) fn protect(target: &Target, archive: &Archive, path: &[u8]) {
    let mut kept = Vec::new();
    if let Ok(st) = rustix::fs::fstat(archive.fd()) {
        kept.push(((st.st_dev, st.st_ino), "the archive being read"));
    }
    let side = index::side_path(path);
    if let Ok(st) = rustix::fs::stat(OsStr::from_bytes(&side)) {
        kept.push((
            (st.st_dev, st.st_ino),
            "the index of the archive being read",
        ));
    }
    target.keep(kept);
}

/// The archive and the target directory, opened alike on every rank. Collective.
fn setup(comm: &dyn Comm, o: &Options) -> Result<(Vec<u8>, Vec<u8>, Archive, Target), Error> {
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let path = normalize(&o.archive, &cwd);
    let dest = o.chdir.as_ref().map_or(cwd.clone(), |d| normalize(d, &cwd));
    // The manifest is renamed into place at the end: inside the target it would replace a
    // member just extracted (or be replaced by one).
    // So is a `--checkpoint PATH`: the extraction could replace its files.
    let mut outputs: Vec<(&str, &[u8])> = o
        .manifest
        .iter()
        .map(|m| ("--manifest", &m.path[..]))
        .collect();
    if let crate::engine::checkpoint::Choice::At(p) = &o.checkpoint {
        outputs.push(("--checkpoint", p));
    }
    // Spill files are never written in the tree being extracted (the default TMPDIR is
    // checked when the entries spill).
    if let Some(t) = &o.tmpdir {
        outputs.push(("--tmpdir", t));
    }
    let trees = [("target directory", &dest[..])];
    crate::engine::setup::agree_setup(
        comm,
        crate::engine::outputs::refuse_inside(&outputs, &trees),
    )?;
    let opened = Archive::open_with(&path, &o.context.noatime, comm.rank() == 0)
        .map_err(|e| format!("open {}: {e}", display(&path)))
        .and_then(|a| {
            Target::open(&dest)
                .map(|t| (a, t))
                .map_err(|e| format!("open the target directory {}: {e}", display(&dest)))
        });
    let (archive, target) = crate::engine::setup::agree_setup(comm, opened)?;
    Ok((path, dest, archive, target))
}

/// `tar -x`. Collective.
pub(super) fn run(comm: &dyn Comm, o: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let (path, dest, archive, target) = setup(comm, o)?;
    let aside = say_set_aside(comm, &archive, &path, o);
    if let Some(codec) = archive.serial() {
        // Refused before anything is written: the front-to-back read does not hash or read
        // back what it writes, and a check asked for must not silently not happen.
        if o.verify || o.manifest.is_some() {
            return Err(Error::new(format_args!(
                "{}: --verify and --manifest are not supported for an archive in one {} \
                 stream (read front to back); extract it without them, or recompress it with \
                 mfu-rs tar -z, -j or --zstd, whose archives extract in parallel with them",
                display(&path),
                codec.name()
            )));
        }
        return serial::run(comm, o, started, path, dest, archive, target, codec).map(|r| Report {
            notices: [aside, r.notices.clone()].concat(),
            ..r
        });
    }
    let found = find_entries(comm, &archive, &path, o);
    crate::engine::test_seam::after_listing(comm);
    let stripes = Striping::detect(&*o.lustre, std::slice::from_ref(&dest), o.stripe);
    let total_entries = found.located.total + found.located.cut;
    let base = found.report(path);
    let mut located = found.located;
    // Member selection: only the entries taken go on, split over ranks by their bytes.
    let matcher = Matcher::new(o);
    let mut credited = vec![false; matcher.members()];
    if matcher.filters() {
        select::choose(comm, &archive, &mut located, &matcher, &mut credited);
    }
    let part = located.parts.of(comm.rank());
    // What earlier runs of this command finished (issue 33): skipped, and counted.
    let mut resumed = resume::open(comm, o, &base.archive, &archive, &dest, &target)?;
    // Beyond the memory limit, an archive whose data is not compressed is extracted a piece
    // of entries at a time.
    let limit = flist::spill::MemoryLimit::resolve(comm, o.memory_limit);
    let per_rank = piecewise(
        comm,
        &archive,
        &base.archive,
        &located,
        &matcher,
        o,
        limit.bytes,
    );
    let spill = flist::spill::SpillDir::new(o.tmpdir.as_deref());
    if per_rank.is_some() {
        crate::engine::setup::agree_setup(
            comm,
            crate::engine::outputs::refuse_inside(
                &[("TMPDIR", spill.path())],
                &[("target directory", &dest[..])],
            ),
        )?;
    }
    let x = Extraction::new(o, &archive, &target, &dest, &stripes, part, &resumed);
    let progress = o.context.progress(comm.rank(), "Extracted");
    let mut tally = Tally::default();
    let mut pieces_done = None;
    match per_rank {
        None => {
            x.piece(comm, &base.archive, located, &matcher, None, &mut tally);
        }
        Some(k) => {
            let p = x.in_pieces(
                comm,
                &base.archive,
                located,
                &matcher,
                k,
                (&spill, limit.bytes),
                &mut tally,
            );
            pieces_done = Some(p);
        }
    }
    progress.add(0, x.bytes.load(Ordering::Relaxed));
    crate::engine::copy::drive::warn_projid_unkept(comm, &o.context, x.how.modes.unkept.take());
    let spill_failed = x.say_spill_failure(comm, &spill);

    let interrupted = comm.any(x.stopped());
    let checked = x.checks(comm);
    x.report(comm, tally.owned);
    // MEMBERs that named nothing, after the rest was extracted (as GNU tar says them).
    let not_found = matcher.not_found(comm, o, &credited);
    let extracted = comm.sum(tally.extracted);
    let bytes = comm.sum(x.bytes.load(Ordering::Relaxed) + x.credited.load(Ordering::Relaxed));
    // Stopped with a checkpoint: how far the whole job got, in data bytes.
    let resumable = interrupted && resumed.checkpoint.is_some();
    let stopped = resumable.then(|| crate::engine::context::Stopped {
        done: bytes,
        total: comm.sum(tally.data_bytes),
        what: "bytes of file data",
    });
    let report = Report {
        mode: Done::Extract,
        directory: dest.clone(),
        entries: extracted.min(total_entries),
        archive_entries: total_entries,
        bytes,
        skipped: comm.sum(tally.skipped),
        superseded: comm.sum(tally.replaced),
        failed: comm.sum(x.failed.load(Ordering::Relaxed)) + u64::from(spill_failed),
        memory_limit: (o.memory_limit.is_some() || pieces_done.is_some()).then(|| limit.describe()),
        pieces: pieces_done,
        zstd_frames: comm.sum(archive.frames_decoded.load(Ordering::Relaxed)),
        frames_per_rank: match archive.table() {
            Some(_) => comm.allgather_u64(archive.frames_decoded.load(Ordering::Relaxed)),
            None => Vec::new(),
        },
        compression: archive.table().map(|t| t.codec),
        interrupted,
        stopped,
        not_found,
        notices: [base.notices.clone(), resumed.notices.clone()].concat(),
        ..base
    };
    if comm.rank() == 0 && interrupted {
        o.context.error(format_args!(
            "interrupted (SIGINT/SIGTERM): stopped extracting {}; {} of {total_entries} \
             entries were extracted completely, the others are missing or incomplete (those \
             carry no archive times)",
            display(&report.archive),
            report.entries
        ));
    }
    let mut report = Report {
        verify: checked.verify,
        ..report
    };
    if let (Some(m), Some(entries)) = (&o.manifest, checked.manifest) {
        let ok = report.status() == crate::engine::status::Status::Ok;
        report.manifest = Some(crate::engine::manifest::publish(
            comm, &o.context, m, entries, ok,
        ));
    }
    drop(x);
    // Kept for the rerun when stopped; removed when the run went to its end (failures
    // included: a rerun would not continue them, it would start over).
    if !resumed.finish(comm, o, interrupted) {
        report.failed += 1;
    }
    Ok(Report {
        seconds: started.elapsed().as_secs_f64(),
        failures: o.context.failures(),
        ..report
    })
}

/// What this rank's entries came to, over the pieces.
#[derive(Default)]
struct Tally {
    /// Entries extracted completely (a carried version counts for itself and its link).
    extracted: u64,
    /// Entries replaced by a later entry of their name.
    replaced: u64,
    /// Entries skipped for their type.
    skipped: u64,
    /// Data bytes of the files (stored bytes of a sparse file).
    data_bytes: u64,
    /// Entries whose headers this rank owned.
    owned: u64,
}

impl Tally {
    /// Count the entries `e` of a piece (or of the whole run), `skipped` of them for their type.
    fn add(&mut self, e: &Entries, skipped: u64) {
        let done = |i: usize| e.done[i].load(Ordering::Relaxed);
        self.extracted += e
            .items
            .iter()
            .enumerate()
            .filter(|(i, it)| it.own && done(*i))
            .count() as u64
            + e.carried.iter().filter(|&&i| done(i)).count() as u64;
        self.replaced += e.replaced;
        self.skipped += skipped;
        self.data_bytes += e.data_bytes();
        self.owned += e.items.iter().filter(|it| it.own).count() as u64;
    }
}

/// Directories' records read back at once at the end of an extraction in pieces.
const DIRS_AT_ONCE: usize = 1024;

/// This rank's entries and how far each got.
struct Entries {
    items: Store,
    /// The entry was created (entries whose creation failed get no data and no metadata).
    ok: Vec<AtomicBool>,
    /// The entry was completely extracted, metadata included.
    done: Vec<AtomicBool>,
    /// The file was created empty at its size, waiting for its data (phase 4).
    created: Vec<AtomicBool>,
    /// Entries of this rank that a later entry of the same name replaced and that no hard link
    /// keeps: not extracted (tar keeps the last).
    replaced: u64,
    /// Entries of this rank that a later entry of the same name replaced, extracted under the
    /// name of a hard link that refers to them: each stands for two entries (itself and that
    /// link) once done.
    carried: Vec<usize>,
    /// With a selection: for each entry, where the run of entries kept one after another in
    /// the archive from it ends (bytes), so that reading ahead stops short of data that was not
    /// selected. `None`: everything is kept, reading ahead stops at the part's end.
    run_ends: Option<Vec<u64>>,
    /// Files of this rank that an earlier run created and left partial, continued by this
    /// run (see [`resume::Earlier::reusable`]): entry → the generation of their ranges.
    reused: Mutex<std::collections::HashMap<usize, u64>>,
}

/// The files of other ranks whose data this rank writes a part of, ready for it: by header
/// offset, the generation of their ranges and whether they were continued (an earlier run's
/// ranges then count). A file missing here was not created by its owner in this run (failed,
/// stopped, or done by an earlier run): nothing is written into whatever has its name.
type Ready = std::collections::HashMap<u64, (u64, bool)>;

/// A file a frame holds data of: the entry, the generation of its ranges, and its parts
/// (offset, bytes) in the frame still to write.
type Touched<'a> = (Item<'a>, u64, Vec<(u64, u64)>);

impl Entries {
    /// How far reading ahead from entry `i`'s data may go, within the part ending at `end`.
    fn ahead_limit(&self, i: usize, end: u64) -> u64 {
        self.run_ends.as_ref().map_or(end, |r| r[i].min(end))
    }

    /// The entries of this rank whose headers it owns, of one of these kinds.
    fn own_of(&self, kinds: &[Kind]) -> Vec<usize> {
        (0..self.items.len())
            .filter(|&i| self.items.own(i) && kinds.contains(&self.items.kind(i)))
            .collect()
    }

    /// Data bytes of this rank's files (stored bytes for a sparse file): the whole job's
    /// share of this rank.
    fn data_bytes(&self) -> u64 {
        self.items
            .iter()
            .filter(|it| it.own && it.kind == Kind::File)
            .map(|it| stored(&it))
            .sum()
    }

    /// Owned, created, and not yet complete.
    fn pending(&self, i: usize) -> bool {
        self.items.own(i)
            && self.ok[i].load(Ordering::Relaxed)
            && !self.done[i].load(Ordering::Relaxed)
    }
}

/// Bytes of data an entry holds in the archive (a sparse file's segments; 0 but for files).
fn stored(it: &Item) -> u64 {
    match (it.kind, it.sparse) {
        (Kind::File, Some(m)) => m.iter().map(|s| s.len).sum(),
        (Kind::File, None) => it.size,
        _ => 0,
    }
}

/// One rank's extraction: what every phase uses.
struct Extraction<'a> {
    o: &'a Options,
    archive: &'a Archive,
    target: &'a Target,
    how: Restore,
    data: DataOptions,
    lay: Layouts<'a>,
    /// This rank's part of the stream ([`share`]), or of the piece being extracted:
    /// [`Extraction::part`].
    part: [AtomicU64; 2],
    /// A record of the directories whose metadata waits for the end could not be spilled
    /// (why): the pieces stop.
    spill_error: Mutex<Option<String>>,
    stop: &'a AtomicBool,
    fail: Failures,
    /// Failures named so far (see [`Extraction::report`]).
    failed: AtomicU64,
    /// Data bytes written by this rank.
    bytes: AtomicU64,
    /// Data bytes earlier runs wrote that this rank skipped (counted in the report: it covers
    /// the whole job).
    credited: AtomicU64,
    /// The checkpoint and what earlier runs finished.
    resume: &'a resume::Resume,
    /// This process's effective user and group: the owner of the files it creates.
    ids: (u32, u32),
    /// `--verify`, `--manifest`: what file data is hashed and checked.
    hashing: Hashing,
    /// `--manifest`: the hard links made, (target, link), relative to the target directory.
    links: Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
    /// `--manifest` with SHA-256, which can't be assembled from the digests of ranges: the
    /// files written in several ranges whose first range this rank wrote, (name, offset of
    /// the data in the tar stream, size in bytes). Their data is read again from the archive
    /// for their digest, never from the files written (a copy damaged after its write must
    /// fail the manifest's check).
    again: Mutex<Vec<(Vec<u8>, u64, u64)>>,
    /// The archive's (size, mtime, ctime) before any data was read: the data read again for a
    /// digest is only hashed from the archive as it was.
    archive_key: Option<ArchiveKey>,
}

/// What tells an archive file changed: its size, mtime and ctime (seconds, nanoseconds).
type ArchiveKey = (i64, i64, i64, i64, i64);

fn archive_key(archive: &Archive) -> Option<ArchiveKey> {
    let st = rustix::fs::fstat(archive.fd()).ok()?;
    Some((
        st.st_size,
        st.st_mtime,
        st.st_mtime_nsec as i64,
        st.st_ctime,
        st.st_ctime_nsec as i64,
    ))
}

/// Bytes read at once when a member's data is read again for its digest.
const READ_AGAIN: u64 = 1 << 20;

/// The digest (`kind`) of the `size` bytes at `data` of the tar stream of `archive` (a
/// compressed archive's frames decoded again), read in order; stops with an error once
/// `stop` is set.
fn hash_member(
    archive: &Archive,
    (data, size): (u64, u64),
    kind: HashKind,
    stop: &AtomicBool,
) -> io::Result<[u8; 32]> {
    let mut h = RangeHasher::new(kind, 0, size, size);
    let mut buf = Vec::new();
    let mut at = 0;
    while at < size {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        let want = (size - at).min(READ_AGAIN) as usize;
        let n = archive.read_into(data + at, want, &mut buf)?;
        if n < want {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the archive is shorter than when the member was extracted",
            ));
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    match h.finish() {
        RangeDigest::Whole(d) => Ok(d),
        RangeDigest::Pieces(_) => unreachable!("a whole range gives a whole digest"),
    }
}

impl<'a> Extraction<'a> {
    fn new(
        o: &'a Options,
        archive: &'a Archive,
        target: &'a Target,
        dest: &'a [u8],
        stripes: &'a Striping<'a>,
        part: (u64, u64),
        resume: &'a resume::Resume,
    ) -> Extraction<'a> {
        let root = rustix::process::geteuid().is_root();
        Extraction {
            o,
            archive,
            target,
            how: Restore {
                owner: o.preserve_owner || root,
                modes: MetaOptions::new(o.preserve_perms || root, XattrPolicy::None),
                xattrs: o.xattrs,
            },
            data: DataOptions {
                bufsize: o.bufsize.min(1 << 30) as usize,
                sparse: false,
                direct: false,
            },
            lay: Layouts {
                stripes,
                dest,
                chunk: o.chunksize,
            },
            part: [AtomicU64::new(part.0), AtomicU64::new(part.1)],
            spill_error: Mutex::default(),
            stop: &o.context.stop,
            fail: Failures::default(),
            failed: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            credited: AtomicU64::new(0),
            resume,
            ids: (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            ),
            hashing: Hashing::new(o.verify, o.manifest.as_ref().map(|m| m.kind)),
            links: Mutex::default(),
            again: Mutex::default(),
            archive_key: archive_key(archive),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// This rank's part of the stream, or of the piece being extracted (bytes).
    fn part(&self) -> (u64, u64) {
        (
            self.part[0].load(Ordering::Relaxed),
            self.part[1].load(Ordering::Relaxed),
        )
    }

    /// Extract the piece whose part this rank has is `part` next.
    fn set_part(&self, part: (u64, u64)) {
        self.part[0].store(part.0, Ordering::Relaxed);
        self.part[1].store(part.1, Ordering::Relaxed);
    }

    /// A directory's record could not be spilled on this rank.
    fn spill_failed(&self) -> bool {
        self.spill_error.lock().expect("spill error").is_some()
    }

    /// Keep the first failure to spill, `why`.
    fn note_spill_failure(&self, why: String) {
        self.spill_error
            .lock()
            .expect("spill error")
            .get_or_insert(why);
    }

    /// Say (each rank its own) that the directories' records could not be spilled to `dir`:
    /// the pieces after it were not extracted and no directory got its archived metadata.
    /// Whether that happened on any rank. Collective.
    fn say_spill_failure(&self, comm: &dyn Comm, dir: &flist::spill::SpillDir) -> bool {
        if let Some(why) = self.spill_error.lock().expect("spill error").as_ref() {
            self.o.context.error(format_args!(
                "TMPDIR {}: {why}: the directories' metadata could not be kept for the end \
                 (beyond --memory-limit): the entries after it were not extracted and no \
                 directory has its archived metadata",
                display(dir.path())
            ));
        }
        comm.any(self.spill_failed())
    }

    /// The range `(at, len)` of the file `it` landed: with a SHA-256 manifest, a file written
    /// in several ranges is hashed by reading its data again from the archive, by the rank
    /// that wrote its first range.
    fn landed_range(&self, it: &Item, (at, len): (u64, u64)) {
        if at == 0 && len < it.size && self.hashing.manifest == Some(HashKind::Sha256) {
            let file = (it.rel.to_vec(), it.data, it.size);
            self.again.lock().expect("again").push(file);
        }
    }

    /// Hash the files of [`Extraction::again`] from the archive and keep their digests, unless
    /// the run failed or stopped on any rank (no manifest follows: nothing is read again).
    /// Collective.
    fn hash_again(&self, comm: &dyn Comm, kind: HashKind) {
        let again = std::mem::take(&mut *self.again.lock().expect("again"));
        if comm.any(!self.fail.none() || self.stopped()) {
            return;
        }
        let same =
            || archive_key(self.archive).is_some() && archive_key(self.archive) == self.archive_key;
        let changed = "the archive changed while it was read (size, mtime or ctime): the \
                       member's data can't be read again to hash it for the manifest";
        if !same() {
            for (rel, _, _) in &again {
                self.fail.add(rel, changed);
            }
            return;
        }
        again.par_iter().for_each(|(rel, data, size)| {
            match hash_member(self.archive, (*data, *size), kind, self.stop) {
                Ok(d) => self.hashing.keep(rel, *size, RangeDigest::Whole(d)),
                Err(e) => self.fail.add(
                    rel,
                    format_args!("read the archive (to hash for the manifest): {e}"),
                ),
            }
        });
        if !same() {
            for (rel, _, _) in &again {
                self.fail.add(rel, changed);
            }
        }
    }

    /// Entry `i` failed: named, and it gets no data and no metadata.
    fn failed_at(&self, e: &Entries, i: usize, why: String) {
        self.fail.add(e.items.get(i).rel, why);
        e.ok[i].store(false, Ordering::Relaxed);
    }

    /// This rank's entries ([`my_items`]) less those a later entry of the same name replaces.
    /// Collective.
    fn entries(&self, comm: &dyn Comm, path: &[u8], mut found: Located, m: &Matcher) -> Entries {
        let by_name = self.how.owner && !self.o.numeric_owner;
        let items = my_items(
            self.archive,
            path,
            &found,
            self.part(),
            &self.fail,
            &mut adjuster(m, by_name),
        );
        // The offsets are no longer needed (only their count).
        found.offsets = Vec::new();
        // Tar keeps the last of several entries with one name: those replaced are no longer
        // this rank's, and get neither data nor metadata (marked, not removed: no second
        // copy of the entries); one that a hard link before the replacement refers to is
        // extracted under that link's name (GNU tar gives the link that version).
        let s = superseded(comm, &found.parts, &items);
        let mut items = items;
        let ok: Vec<AtomicBool> = (0..items.len()).map(|_| AtomicBool::new(true)).collect();
        let (mut replaced, mut carried) = (0, Vec::new());
        // Nothing replaced (the common case): no look-up per entry.
        let all = if s.is_empty() { 0 } else { items.len() };
        for (i, ok) in ok.iter().enumerate().take(all) {
            let start = items.start(i);
            if let Some(rel) = s.carried.get(&start) {
                items.rename(i, rel);
                if items.own(i) {
                    carried.push(i);
                }
            } else if s.dropped.contains(&start) {
                replaced += u64::from(items.own(i));
                items.disown(i);
                ok.store(false, Ordering::Relaxed);
            } else if s.carriers.contains(&start) {
                // Its name is made by the version it refers to (counted with that entry).
                items.disown(i);
                ok.store(false, Ordering::Relaxed);
            } else if let Some(to) = s.relinked.get(&start) {
                items.relink(i, to);
            } else if let Some(why) = s.refused.get(&start) {
                if items.own(i) {
                    let link = items.get(i).link.to_vec();
                    self.fail.add(
                        items.rel(i),
                        format_args!("hard link to {}: {why}", display(&link)),
                    );
                }
                items.disown(i);
                ok.store(false, Ordering::Relaxed);
            }
        }
        drop(s);
        let flags = |v: bool| (0..items.len()).map(|_| AtomicBool::new(v)).collect();
        let run_ends = m.filters().then(|| run_ends(&items));
        Entries {
            ok,
            done: flags(false),
            created: flags(false),
            items,
            replaced,
            carried,
            run_ends,
            reused: Mutex::default(),
        }
    }

    /// The entries of this rank that earlier runs extracted completely: done, and their data
    /// counted, without being touched. Directories are never skipped: every run sets their
    /// metadata at its end.
    fn skip_done(&self, e: &Entries) {
        let earlier = &self.resume.earlier;
        if earlier.done.is_empty() {
            return;
        }
        for i in 0..e.items.len() {
            if !e.items.own(i) || e.items.kind(i) == Kind::Dir {
                continue;
            }
            if let Some(bytes) = earlier.still_done(self.target, &e.items.get(i)) {
                e.done[i].store(true, Ordering::Relaxed);
                self.credited.fetch_add(bytes, Ordering::Relaxed);
            }
        }
    }

    /// Mark entry `i` extracted completely. Not a directory (see [`Extraction::skip_done`]),
    /// nor a hard link: made again by every run, it then names the inode its target has now
    /// (a partial target an earlier run linked to may have been extracted anew since).
    /// `made`: what the entry is now (see [`resume::Made`]).
    fn mark_done(&self, e: &Entries, i: usize, made: Option<resume::Made>) {
        if !matches!(e.items.kind(i), Kind::Dir | Kind::HardLink) {
            let it = e.items.get(i);
            self.resume.done(it.start, stored(&it), made);
        }
    }

    /// Which files whose data this rank writes in phase 4 are ready for it, and how: those
    /// of other ranks gathered from their owners ([`Ready`]). Collective.
    fn ready(&self, comm: &dyn Comm, e: &Entries) -> Ready {
        let reused = e.reused.lock().expect("reused").clone();
        let end = self.part().1;
        let mine: Vec<(u64, u64, bool)> = (0..e.items.len())
            .filter(|&i| e.items.own(i) && e.created[i].load(Ordering::Relaxed))
            .filter_map(|i| {
                let it = e.items.get(i);
                (it.data + it.size > end).then(|| match reused.get(&i) {
                    Some(&gen) => (it.start, gen, true),
                    None => (it.start, self.resume.gen, false),
                })
            })
            .collect();
        comm.all_gather(&mine)
            .into_iter()
            .flatten()
            .map(|(start, gen, reused)| (start, (gen, reused)))
            .collect()
    }

    /// Whether the data of entry `i` is to be written by this run, and how: the generation
    /// of its ranges and whether an earlier run's ranges count.
    fn writing(&self, e: &Entries, ready: &Ready, i: usize) -> Option<(u64, bool)> {
        if e.items.own(i) {
            if !e.created[i].load(Ordering::Relaxed) {
                return None;
            }
            Some(match e.reused.lock().expect("reused").get(&i) {
                Some(&gen) => (gen, true),
                None => (self.resume.gen, false),
            })
        } else {
            ready.get(&e.items.start(i)).copied()
        }
    }

    /// The parts of `(at, len)` of the file of entry `start` to write, given how it is
    /// written ([`Extraction::writing`]); the rest, landed in an earlier run, is counted.
    fn to_write(
        &self,
        start: u64,
        (gen, reused): (u64, bool),
        range: (u64, u64),
    ) -> Vec<(u64, u64)> {
        if !reused {
            return vec![range];
        }
        let (parts, covered) = self.resume.earlier.uncovered(start, gen, range);
        self.credited.fetch_add(covered, Ordering::Relaxed);
        parts
    }

    /// Phase 1: symlinks (a later path through one of them is then refused, never followed).
    fn symlinks(&self, e: &Entries) {
        e.own_of(&[Kind::Symlink]).par_iter().for_each(|&i| {
            if self.stopped() || e.done[i].load(Ordering::Relaxed) {
                return;
            }
            if let Err(why) = make_other(self.target, &e.items.get(i)) {
                self.failed_at(e, i, why);
            }
        });
    }

    /// Phase 2: directories. Parents are made on the way, so directories need no order among
    /// themselves.
    fn directories(&self, e: &Entries) {
        e.own_of(&[Kind::Dir]).par_iter().for_each(|&i| {
            if self.stopped() {
                return;
            }
            if let Err(err) = self.target.dir(e.items.get(i).rel, true) {
                self.failed_at(e, i, explain(err));
            }
        });
    }

    /// Phase 3: files. Those whose data is all in this rank's part of an uncompressed
    /// archive, and sparse files, are extracted whole, with their metadata; the others are
    /// created empty at their final size.
    fn files(&self, e: &Entries) {
        let (start, end) = self.part();
        let whole = |i: usize| {
            let d = e.items.get(i);
            d.sparse.is_some()
                || (self.archive.table().is_none() && d.data >= start && d.data + d.size <= end)
        };
        e.own_of(&[Kind::File]).par_iter().for_each_init(
            || {
                let dirs = (DirCache::default(), Ahead::default());
                (Buffer::new(self.data.bufsize), true, dirs)
            },
            |(buf, cfr, (dirs, ahead)), &i| {
                if self.stopped() || e.done[i].load(Ordering::Relaxed) {
                    return;
                }
                let it = e.items.get(i);
                // A file an earlier run created and partly wrote: continued when it is still
                // that very file (its data then comes in phase 4, only what is missing).
                if it.sparse.is_none() && it.size > 0 {
                    if let Some(c) = self.resume.earlier.reusable(self.target, &it) {
                        e.reused.lock().expect("reused").insert(i, c.gen);
                        e.created[i].store(true, Ordering::Relaxed);
                        return;
                    }
                }
                if whole(i) {
                    let limit = e.ahead_limit(i, end);
                    match self.extract_whole((dirs, ahead), &it, (buf, cfr), limit) {
                        Ok((n, made)) => {
                            self.bytes.fetch_add(n, Ordering::Relaxed);
                            e.done[i].store(true, Ordering::Relaxed);
                            self.resume.done(it.start, n, made);
                        }
                        Err(why) => self.failed_at(e, i, why),
                    }
                } else {
                    match create_file(dirs, self.target, &it, &self.lay) {
                        Ok(fd) => {
                            e.created[i].store(true, Ordering::Relaxed);
                            if it.size > 0 {
                                self.resume.created(it.start, &fd);
                            }
                            // No data phase for an empty file: its digest is the empty one.
                            if let (Some(kind), 0) = (self.hashing.manifest, it.size) {
                                let empty = crate::engine::digest::RangeDigest::Whole(kind.of(b""));
                                self.hashing.keep(it.rel, 0, empty);
                            }
                        }
                        Err(why) => self.failed_at(e, i, why),
                    }
                }
            },
        );
    }

    /// Extract a file whose data lies wholly in this rank's part, in one go: create it, copy
    /// its data, give it its metadata through the descriptor just created (the common case:
    /// one open per file, in a directory most often already open).
    /// Reading ahead of the archive stops at `limit` (bytes).
    fn extract_whole(
        &self,
        (dirs, ahead): (&mut DirCache, &mut Ahead),
        item: &Item,
        (buf, cfr): (&mut Buffer, &mut bool),
        limit: u64,
    ) -> Result<(u64, Option<resume::Made>), String> {
        let (how, lay) = (&self.how, &self.lay);
        let h = item;
        let fd = open_new(dirs, self.target, item, lay)?;
        let mut hashed = self
            .hashing
            .on()
            .then(|| self.hashing.range(0, h.size, h.size));
        let n = match ahead.bytes(self.archive, item, limit) {
            Some(bytes) => {
                if let Some(hashed) = &mut hashed {
                    hashed.update(bytes);
                }
                write_all_at(fd.as_fd(), bytes, 0)
                    .map_err(|e| format!("{}: {}", e.op, e.source))?;
                item.size
            }
            None => write_contents(
                self.archive,
                item,
                fd.as_fd(),
                (&self.data, buf, cfr),
                lay.chunk,
                self.stop,
                hashed.as_mut(),
            )?,
        };
        landed(
            &self.hashing,
            fd.as_fd(),
            h.rel,
            h.size,
            (0, h.size),
            hashed,
        )?;
        let step = |op: &str, r: Result<(), Errno>| r.map_err(|e| format!("{op}: {}", explain(e)));
        if self.o.fsync {
            step("fsync", rustix::fs::fsync(&fd))?;
        }
        if how.xattrs {
            write_xattrs(XattrTarget::Fd(fd.as_fd()), h.xattrs)
                .map_err(|e| format!("set xattr: {e}"))?;
        }
        // A file this process just created is already its own (fsuid, and fsgid unless the
        // directory hands down its group): when the archive names the same owner and the
        // directory's group is that group too, the chown would change nothing.
        let unchanged = self.ids == (h.uid, h.gid) && dirs.group() == Some(self.ids.1);
        if how.owner && !unchanged {
            step(
                "chown",
                rustix::fs::fchown(&fd, Some(Uid::from_raw(h.uid)), Some(Gid::from_raw(h.gid))),
            )?;
        }
        how.projid(fd.as_fd(), h, false, lay.dest)?;
        step(
            "chmod",
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(how.mode(h.mode))),
        )?;
        step("set times", rustix::fs::futimens(&fd, &times_of(h)))?;
        // What was made, for the checkpoint's mark (only when one is kept: a system call).
        let made = self
            .resume
            .on()
            .then(|| rustix::fs::fstat(&fd).ok().map(|st| resume::made_of(&st)))
            .flatten();
        Ok((n, made))
    }

    /// Phase 4: the data of the files created at their size (their tails on other ranks
    /// too); then a file whose data failed on any rank loses its metadata. Collective.
    fn data(&self, comm: &dyn Comm, e: &Entries, ready: &Ready) {
        let writable: Vec<usize> = (0..e.items.len())
            .filter(|&i| {
                e.ok[i].load(Ordering::Relaxed)
                    && !e.done[i].load(Ordering::Relaxed)
                    && e.items.get(i).sparse.is_none()
            })
            .collect();
        let before = self.bytes.load(Ordering::Relaxed);
        if self.archive.table().is_some() {
            self.write_frames(e, ready, &writable);
        } else {
            self.copy_data(e, ready, &writable);
        }
        drop(writable);
        let other_kernels = self
            .resume
            .checkpoint
            .as_ref()
            .is_some_and(|c| !c.one_kernel());
        if other_kernels && self.bytes.load(Ordering::Relaxed) > before {
            // The owner of a file marks it done in phase 6 once every rank wrote its part:
            // this rank's parts are on disk first (another node's syncer can't sync them).
            // Ranks that share one kernel share its page cache: nothing to sync (see
            // `checkpoint`).
            let _ = rustix::fs::syncfs(self.target.root());
        }
        // A file whose data is incomplete never carries its archived metadata (mtime, size...).
        let data_failed = self.fail.data_failed_anywhere(comm);
        for i in 0..e.items.len() {
            if data_failed.contains(&e.items.start(i)) {
                e.ok[i].store(false, Ordering::Relaxed);
            }
        }
    }

    /// Write the data of the entries `which` of `items` that lies in this rank's part of an
    /// uncompressed archive. On
    /// Lustre (the stripe size of files known), a file's share boundaries move up to the next
    /// stripe boundary of the file, so no stripe is written by two ranks.
    fn copy_data(&self, e: &Entries, ready: &Ready, which: &[usize]) {
        let items = &e.items;
        let (chunk, align) = (self.o.chunksize, self.lay.align());
        let mut pieces = Vec::new();
        for &i in which {
            let it = items.get(i);
            if it.kind != Kind::File || it.size == 0 {
                continue;
            }
            let Some(how) = self.writing(e, ready, i) else {
                continue;
            };
            let (a, b) = file_share(it.data, it.size, self.part(), align);
            let mut x = a;
            while x < b {
                let len = chunk.min(b - x);
                // Continued: only what earlier runs did not land.
                for (at, len) in self.to_write(it.start, how, (x - it.data, len)) {
                    pieces.push((i, it.data + at, len, how.0));
                }
                x += len;
            }
        }
        pieces.par_iter().for_each_init(
            || (Buffer::new(self.data.bufsize), true),
            |(buf, cfr), &(i, x, len, gen)| {
                if self.stopped() {
                    return;
                }
                let it = items.get(i);
                let at = x - it.data;
                let r = open_data(self.target, it.rel).and_then(|fd| {
                    let mut hashed = self
                        .hashing
                        .on()
                        .then(|| self.hashing.range(at, len, it.size));
                    let n = {
                        let mut see = |b: &[u8]| {
                            if let Some(h) = hashed.as_mut() {
                                h.update(b);
                            }
                        };
                        let seen: Seen<'_> = self.hashing.on().then_some(&mut see);
                        let archive = self.archive.fd();
                        copy_at_seen(archive, x, fd.as_fd(), at, len, &self.data, buf, cfr, seen)
                            .map_err(from_archive)?
                    };
                    landed(
                        &self.hashing,
                        fd.as_fd(),
                        it.rel,
                        it.size,
                        (at, len),
                        hashed,
                    )?;
                    Ok(n)
                });
                match r {
                    Ok(n) => {
                        self.landed_range(&it, (at, len));
                        self.bytes.fetch_add(n, Ordering::Relaxed);
                        if n == len {
                            self.resume.range(it.start, gen, (at, len));
                        }
                    }
                    // Whichever rank failed a piece, the owner must not give the file its
                    // archived size and mtime: it would look complete.
                    Err(e) => self.fail.data_failed(it.start, it.rel, e),
                }
            },
        );
    }

    /// Decompress the frames of this rank's part of a compressed archive, each once, and write
    /// the file data they hold.
    fn write_frames(&self, e: &Entries, ready: &Ready, which: &[usize]) {
        let items = &e.items;
        let (start, end) = self.part();
        let archive = self.archive;
        let table = archive.table().expect("compressed");
        let files: Vec<usize> = which
            .iter()
            .copied()
            .filter(|&i| items.kind(i) == Kind::File && items.get(i).size > 0)
            .collect();
        let frames: Vec<usize> = (0..table.frames.len())
            .filter(|&i| table.frames[i].d_at >= start && table.frames[i].d_at < end)
            .collect();
        frames.par_iter().for_each(|&i| {
            if self.stopped() {
                return;
            }
            let f = table.frames[i];
            let (fa, fb) = (f.d_at, f.d_at + f.d_len as u64);
            let first = files.partition_point(|&i| {
                let it = items.get(i);
                it.data + it.size <= fa
            });
            // Each file's parts in this frame still to write (continued files: what earlier
            // runs did not land), with the generation of its ranges.
            let touched: Vec<Touched> = files[first..]
                .iter()
                .map(|&i| (i, items.get(i)))
                .take_while(|(_, it)| it.data < fb)
                .filter_map(|(i, it)| {
                    let how = self.writing(e, ready, i)?;
                    let a = it.data.max(fa);
                    let b = (it.data + it.size).min(fb);
                    let parts = self.to_write(it.start, how, (a - it.data, b - a));
                    (!parts.is_empty()).then_some((it, how.0, parts))
                })
                .collect();
            if touched.is_empty() {
                // Nothing to write from it: not even decompressed.
                return;
            }
            let data = match archive.frame(i) {
                Ok(d) => d,
                Err(err) => {
                    for (it, _, _) in touched {
                        self.fail
                            .data_failed(it.start, it.rel, format_args!("decompress: {err}"));
                    }
                    return;
                }
            };
            for (it, gen, parts) in touched {
                for (at, len) in parts {
                    let a = it.data + at;
                    let b = a + len;
                    let bytes = &data[(a - fa) as usize..(b - fa) as usize];
                    let hashed = self.hashing.on().then(|| {
                        let mut h = self.hashing.range(at, b - a, it.size);
                        h.update(bytes);
                        h
                    });
                    let r = open_data(self.target, it.rel).and_then(|fd| {
                        write_all_at(fd.as_fd(), bytes, at)
                            .map_err(|e| format!("{}: {}", e.op, e.source))?;
                        landed(
                            &self.hashing,
                            fd.as_fd(),
                            it.rel,
                            it.size,
                            (at, b - a),
                            hashed,
                        )
                    });
                    match r {
                        Ok(()) => {
                            self.landed_range(&it, (at, b - a));
                            self.bytes.fetch_add(b - a, Ordering::Relaxed);
                            self.resume.range(it.start, gen, (at, b - a));
                        }
                        // Whichever rank failed a piece, the owner must not give the file its
                        // archived size and mtime: it would look complete.
                        Err(e) => self.fail.data_failed(it.start, it.rel, e),
                    }
                }
            }
        });
    }

    /// Phase 5: hard links, fifos and devices; entries of unsupported types are named and
    /// counted (returned) as skipped.
    fn others(&self, e: &Entries) -> u64 {
        e.own_of(&[Kind::HardLink, Kind::Fifo, Kind::Char, Kind::Block])
            .par_iter()
            .for_each(|&i| {
                if self.stopped() || e.done[i].load(Ordering::Relaxed) {
                    return;
                }
                match make_other(self.target, &e.items.get(i)) {
                    Err(why) => self.failed_at(e, i, why),
                    Ok(()) if e.items.kind(i) == Kind::HardLink => {
                        e.done[i].store(true, Ordering::Relaxed);
                        self.resume.linked(self.target, &e.items.get(i));
                        if self.o.manifest.is_some() {
                            // Listed with its target's digest.
                            let it = e.items.get(i);
                            if let Ok(to) = clean(it.link) {
                                let link = (to, it.rel.to_vec());
                                self.links.lock().expect("links").push(link);
                            }
                        }
                    }
                    Ok(()) => {}
                }
            });
        let mut skipped = 0;
        for (i, it) in e.items.iter().enumerate().filter(|(_, it)| it.own) {
            if it.kind == Kind::Other(b'V') {
                // A GNU volume label names the archive, not a file: nothing to extract (as GNU
                // tar).
                e.done[i].store(true, Ordering::Relaxed);
                self.mark_done(e, i, Some([0; 7]));
            } else if let Kind::Other(t) = it.kind {
                self.o.context.error(format_args!(
                    "{}: not extracted: entries of type '{}' are not supported",
                    display(it.rel),
                    t.escape_ascii()
                ));
                skipped += 1;
            }
        }
        skipped
    }

    /// Extract the entries of `located` (the whole run's, or one piece's: then `later` keeps
    /// the directories for [`Extraction::dirs_at_end`]), every phase, and count them into
    /// `tally`. A piece's parts end at entries' headers: no file's data reaches into the next
    /// piece. Collective.
    fn piece(
        &self,
        comm: &dyn Comm,
        path: &[u8],
        located: Located,
        m: &Matcher,
        later: Option<&mut pieces::DirsLater<'_>>,
        tally: &mut Tally,
    ) {
        let entries = self.entries(comm, path, located, m);
        // The side index rank 0 may have saved is there for every rank to see.
        comm.barrier();
        protect(self.target, self.archive, path);
        self.skip_done(&entries);
        // 1. Symlinks first: a later path through one of them is then refused, never followed.
        self.symlinks(&entries);
        comm.barrier();
        // 2. Directories.
        self.directories(&entries);
        comm.barrier();
        // 3. Files, whole or created at their size (or continued).
        self.files(&entries);
        let ready = self.ready(comm, &entries);
        comm.barrier();
        // 4. Data of the others (their tails on other ranks too).
        self.data(comm, &entries, &ready);
        // 5. Hard links, fifos, devices.
        let skipped = self.others(&entries);
        // 6. Metadata: files and links now, directories deepest first (or at the end).
        self.metadata(comm, &entries, later);
        self.name_incomplete(&entries, comm.any(self.stopped()));
        tally.add(&entries, skipped);
    }

    /// Extract the entries of `located` a piece of `per_rank` entries per rank at a time, the
    /// directories' metadata spilled to `spill` (buffered in a share of `limit` bytes) and set
    /// at the end; counted into `tally`. Collective.
    #[allow(clippy::too_many_arguments)]
    fn in_pieces(
        &self,
        comm: &dyn Comm,
        path: &[u8],
        located: Located,
        m: &Matcher,
        k: u64,
        (spill, limit): (&flist::spill::SpillDir, u64),
        tally: &mut Tally,
    ) -> super::Pieces {
        let n = pieces::count(comm, &located, k);
        let mut later = pieces::DirsLater::new(spill, limit);
        // A TMPDIR where no spill file can be made stops the run before anything is
        // extracted.
        if let Err(e) = later.open() {
            self.note_spill_failure(e.to_string());
        }
        for s in 0..n {
            if comm.any(self.stopped()) || comm.any(self.spill_failed()) {
                break;
            }
            let l = pieces::piece(comm, &located, k, s);
            self.set_part(l.parts.of(comm.rank()));
            let later = Some(&mut later);
            self.piece(comm, path, l, m, later, tally);
        }
        let globals = located.globals.clone();
        drop(located);
        let grouped = later.finish().map_err(|e| e.to_string());
        let grouped = match grouped {
            Ok(g) => Some(g),
            Err(e) => {
                self.note_spill_failure(e);
                None
            }
        };
        let bytes = grouped.as_ref().map_or(0, |g| g.spill_bytes());
        self.dirs_at_end(comm, grouped.as_ref(), &globals, m, tally);
        let (spill_bytes, most) = (comm.sum(bytes), comm.max(bytes));
        super::Pieces {
            pieces: n,
            entries_per_rank: k,
            spill_bytes,
            spill_bytes_max_rank: most,
            tmpdir: display(spill.path()).into_owned(),
        }
    }

    /// The metadata of the directories `grouped` kept for the end of an extraction in pieces,
    /// deepest first, each directory's header decoded again (`globals` applied, names and
    /// owners as `m` makes them); each counted into `tally`. Nothing is set after a signal or
    /// a failed spill on any rank. Collective.
    fn dirs_at_end(
        &self,
        comm: &dyn Comm,
        grouped: Option<&flist::spill::groups::Grouped>,
        globals: &crate::tar::format::Globals,
        m: &Matcher,
        tally: &mut Tally,
    ) {
        if comm.any(self.stopped()) || comm.any(self.spill_failed()) {
            return;
        }
        let deepest = comm.max(grouped.and_then(|g| g.max_key()).map_or(0, |d| d + 1));
        let mut adjust = adjuster(m, self.how.owner && !self.o.numeric_owner);
        let mut records = flist::FileList::new(flist::Detail::Stat);
        for level in (0..deepest).rev() {
            let mut reader = grouped.map(|g| g.reader(level, 1 << 16));
            loop {
                records = flist::FileList::new(flist::Detail::Stat);
                let read = match reader
                    .as_mut()
                    .map(|r| r.read_into(&mut records, DIRS_AT_ONCE))
                {
                    None | Some(Ok(0)) => break,
                    Some(Ok(n)) => n,
                    Some(Err(e)) => {
                        self.note_spill_failure(e.to_string());
                        break;
                    }
                };
                let starts: Vec<u64> = (0..read)
                    .map(|i| records.meta(i).map_or(0, |meta| meta.size))
                    .collect();
                let mut dirs = Store::with_capacity(read);
                for d in scan::decode_in(self.archive, &starts, globals) {
                    let Ok(mut d) = d else { continue };
                    if !matches!(adjust(&mut d), Ok(true)) {
                        continue;
                    }
                    if let Ok(rel) = clean(&d.header.path) {
                        dirs.push(&rel, &d, true);
                    }
                }
                let set: u64 = (0..dirs.len())
                    .into_par_iter()
                    .map(|i| {
                        if self.stopped() {
                            return 0;
                        }
                        let it = dirs.get(i);
                        let how = (self.target, self.lay.dest);
                        match set_meta(how, &it, &self.how, self.resume.on()) {
                            Ok(_) => 1,
                            Err(why) => {
                                self.fail.add(it.rel, why);
                                0
                            }
                        }
                    })
                    .sum();
                tally.extracted += set;
            }
            comm.barrier();
        }
        drop(records);
    }

    /// Phase 6: metadata of files and links, then of directories, deepest first (or, with
    /// `later`, kept there for the end). A signal on any rank before this point leaves files
    /// of phase 4 possibly incomplete: they get no metadata (so no archive mtime on wrong
    /// bytes), and nothing more is done. Collective.
    fn metadata(&self, comm: &dyn Comm, e: &Entries, later: Option<&mut pieces::DirsLater<'_>>) {
        let interrupted_early = comm.any(self.stopped());
        let set = |i: usize| {
            if self.stopped() {
                return;
            }
            let it = &e.items.get(i);
            if self.o.fsync && it.kind == Kind::File {
                if let Err(err) =
                    open_file(self.target, it.rel).and_then(|fd| rustix::fs::fsync(&fd))
                {
                    self.fail
                        .add(it.rel, format_args!("fsync: {}", explain(err)));
                    return;
                }
            }
            match set_meta(
                (self.target, self.lay.dest),
                it,
                &self.how,
                self.resume.on(),
            ) {
                Ok(st) => {
                    e.done[i].store(true, Ordering::Relaxed);
                    self.mark_done(e, i, st.as_ref().map(resume::made_of));
                }
                Err(why) => self.fail.add(it.rel, why),
            }
        };
        let leaves: Vec<usize> = if interrupted_early {
            Vec::new()
        } else {
            e.own_of(&[
                Kind::File,
                Kind::Symlink,
                Kind::Fifo,
                Kind::Char,
                Kind::Block,
            ])
            .into_iter()
            .filter(|&i| e.pending(i))
            .collect()
        };
        leaves.par_iter().for_each(|&i| set(i));
        let dirs: Vec<usize> = if interrupted_early {
            Vec::new()
        } else {
            e.own_of(&[Kind::Dir])
                .into_iter()
                .filter(|&i| e.pending(i))
                .collect()
        };
        if let Some(later) = later {
            // Their times would change with the entries of the pieces after this one.
            for i in dirs {
                if let Err(err) = later.push(e.items.rel(i), e.items.start(i)) {
                    self.note_spill_failure(err.to_string());
                    break;
                }
            }
            comm.barrier();
            return;
        }
        // Deepest first: each level's directories are a run of `dirs` sorted by depth
        // (computed once: a deep tree has thousands of levels). Ranks meet between two levels
        // only where some rank's directory has its parent on another rank, and once at the end.
        let mut dirs: Vec<(u64, usize)> = dirs
            .into_iter()
            .map(|i| (flist::path::depth(e.items.get(i).rel) as u64, i))
            .collect();
        dirs.sort_unstable_by_key(|&(d, _)| std::cmp::Reverse(d));
        let deepest = comm.max(dirs.first().map_or(0, |&(d, _)| d + 1));
        let meet = flist::distribute::cross_rank_parents(
            comm,
            deepest as usize,
            dirs.iter().map(|&(d, i)| (d as usize, e.items.get(i).rel)),
        );
        let mut rest = &dirs[..];
        for level in (0..deepest).rev() {
            let n = rest.partition_point(|&(d, _)| d >= level);
            let (this, after) = rest.split_at(n);
            rest = after;
            this.par_iter().for_each(|&(_, i)| set(i));
            if level > 0 && meet[level as usize] {
                comm.barrier();
            }
        }
        comm.barrier();
    }

    /// What `--verify` and `--manifest` found (manifest paths relative to the target `dest`).
    /// Collective.
    fn checks(&self, comm: &dyn Comm) -> crate::engine::copy::drive::Checked {
        let mut checked = crate::engine::copy::drive::Checked::default();
        if self.hashing.verify {
            let mut v = self.hashing.counters.values();
            comm.allreduce(&mut v, steal::ReduceOp::Sum);
            checked.verify = Some(crate::engine::verify::Summary::of(v));
        }
        if let Some(m) = &self.o.manifest {
            // Digests are of the archive's bytes only, never of the files written: nothing is
            // opened again (SHA-256 files written in several ranges were hashed from the
            // archive above, and their ranges' digests are left out).
            let reopen = |_: &[u8]| -> io::Result<OwnedFd> {
                Err(io::Error::other(
                    "tar -x hashes the archive's bytes, never the files written",
                ))
            };
            let m = crate::engine::manifest::ManifestOptions {
                base: Vec::new(),
                ..m.clone()
            };
            self.hash_again(comm, m.kind);
            let mut records = self.hashing.take_records();
            if m.kind == HashKind::Sha256 {
                records.retain(|r| matches!(r.digest, RangeDigest::Whole(_)));
            }
            let links = std::mem::take(&mut *self.links.lock().expect("links"));
            let (entries, errors) =
                crate::engine::manifest::entries(comm, &m, records, &links, reopen);
            for e in errors {
                self.fail
                    .add(&e.path, format_args!("{}: {}", e.op, e.source));
            }
            checked.manifest = Some(entries);
        }
        checked
    }

    /// Name this rank's failures (with `interrupted`, the files left incomplete too) and say
    /// the `-v` detail: each rank's figures in rank order, rank 0 the Lustre layouts.
    /// Collective.
    /// Files created at their size that did not get all their data or their metadata, when
    /// the run was `interrupted`: named, so nobody takes them for complete.
    fn name_incomplete(&self, e: &Entries, interrupted: bool) {
        if interrupted {
            for (i, it) in e.items.iter().enumerate() {
                if it.own
                    && e.created[i].load(Ordering::Relaxed)
                    && !e.done[i].load(Ordering::Relaxed)
                {
                    self.fail.add(it.rel, INTERRUPTED);
                }
            }
        }
    }

    /// Say the failures, and with `-v` what this rank extracted (`owned` entries).
    fn report(&self, comm: &dyn Comm, owned: u64) {
        let failures = self.fail.take();
        for f in &failures {
            self.o.context.error(f);
        }
        self.failed.store(failures.len() as u64, Ordering::Relaxed);
        let context = &self.o.context;
        if context.verbose {
            let line = format!(
                "rank {}: extracted {} entries, {} bytes of data; decompressed {} {} frames ({} bytes)\n",
                comm.rank(),
                owned,
                self.bytes.load(Ordering::Relaxed),
                self.archive.frames_decoded.load(Ordering::Relaxed),
                self.archive.table().map_or("zstd", |t| t.codec.name()),
                self.archive.bytes_decoded.load(Ordering::Relaxed),
            );
            steal::ordered::in_rank_order(comm, line.into_bytes(), |b| {
                context.info(String::from_utf8_lossy(b))
            });
        }
        let stripes = self.lay.stripes;
        if stripes.is_on() {
            let mut counts = stripes.counts();
            counts.sum(comm);
            if comm.rank() == 0 && context.verbose {
                context.info(crate::engine::copy::drive::lustre_line(
                    stripes.ost_count(),
                    &counts,
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The side index is written under a predictable temporary name: a hard link planted
    /// there to someone's file is refused, and that file is neither truncated, written nor
    /// removed (nor is the side index made).
    #[test]
    fn a_file_planted_at_the_side_index_temporary_name_is_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("a.tar");
        std::fs::write(&archive, vec![0u8; 1024]).unwrap();
        let side = [archive.as_os_str().as_bytes(), b".dtaridx"].concat();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let tmp = flist::atomic::temp_path(&side);
        std::fs::hard_link(&victim, flist::path::as_path(&tmp)).unwrap();
        let opened = Archive::open(archive.as_os_str().as_bytes()).unwrap();
        let found = Located {
            offsets: vec![0],
            parts: scan::Parts::even(&opened, 1),
            globals: Default::default(),
            total: 1,
            cut: 0,
            source: Source::Scan,
            member: None,
            damage: None,
            rejected: Vec::new(),
            end: 512,
        };
        let e = save_index(&found, &side).expect_err("refused");
        assert_eq!(e.source.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(
            std::fs::read(flist::path::as_path(&tmp)).unwrap(),
            b"precious"
        );
        assert!(!flist::path::as_path(&side).exists());
    }

    /// A killed earlier run's temporary side index (this host, its process gone) is removed
    /// and returned to be named; the index is saved whole.
    #[test]
    fn a_killed_run_temporary_side_index_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("a.tar");
        std::fs::write(&archive, vec![0u8; 1024]).unwrap();
        let side = [archive.as_os_str().as_bytes(), b".dtaridx"].concat();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = flist::atomic::temp_name_of(b"a.tar.dtaridx", &flist::atomic::host(), dead);
        let stale = dir.path().join(flist::path::as_path(&stale));
        std::fs::write(&stale, b"half an index").unwrap();
        let opened = Archive::open(archive.as_os_str().as_bytes()).unwrap();
        let found = Located {
            offsets: vec![0],
            parts: scan::Parts::even(&opened, 1),
            globals: Default::default(),
            total: 1,
            cut: 0,
            source: Source::Scan,
            member: None,
            damage: None,
            rejected: Vec::new(),
            end: 512,
        };
        let (n, removed) = save_index(&found, &side).unwrap();
        assert_eq!(n, 1);
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].path, stale.as_os_str().as_bytes());
        assert!(!stale.exists());
        let index = std::fs::read(flist::path::as_path(&side)).unwrap();
        assert_eq!(index, index::encode_index(&[0], 512));
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "archive, index"
        );
    }

    #[test]
    fn stripe_aligned_shares_tile_each_file_and_never_split_a_stripe() {
        let stripe = 1000;
        // Rank boundaries of an archive, and files at awkward offsets and sizes.
        let bounds = [0u64, 1234, 5000, 5001, 9999, 20_000];
        for (data, size) in [(512u64, 19_000u64), (1536, 3000), (4900, 200), (7000, 1)] {
            let pieces: Vec<(u64, u64)> = bounds
                .windows(2)
                .map(|w| file_share(data, size, (w[0], w[1]), Some(stripe)))
                .filter(|(a, b)| a < b)
                .collect();
            let mut at = data;
            for &(a, b) in &pieces {
                assert_eq!(a, at, "contiguous: {pieces:?}");
                assert!((a - data) % stripe == 0, "starts on a stripe: {pieces:?}");
                assert!((b - data) % stripe == 0 || b == data + size, "{pieces:?}");
                at = b;
            }
            assert_eq!(at, data + size, "covers the file: {pieces:?}");
        }
        // Unaligned, rank boundaries fall inside stripes.
        assert_eq!(file_share(512, 19_000, (0, 1234), None), (512, 1234));
    }
}
