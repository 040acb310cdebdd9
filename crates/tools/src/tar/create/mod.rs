//! `tar -c`: walk, sort by name, encode each header once from the walked record, place every
//! entry by a prefix sum over ranks, then write headers and data at their offsets from all
//! ranks, and the dtar index as the last member.
//!
//! Small files travel in segments (many consecutive entries assembled in memory and written
//! with one `pwrite`); a big file's data is cut into chunks that the work-stealing queue spreads
//! over all ranks (`copy_file_range` from the file into the archive). A file that changes size
//! after the walk keeps its walked size in the archive (zero-filled when it shrank) and is
//! reported, so the archive always stays readable.
//!
//! With `--zstd`, each rank turns its contiguous part of the tar stream into zstd frames (in
//! parallel on its threads), the compressed parts are placed by a second prefix sum; then each
//! rank compresses its piece of the index member (its entries' offsets) into frames placed by a
//! third, and writes its frames' entries of the seek table at their place: no rank holds more
//! of the index or the table than its own part.
//!
//! Nothing that looks like an archive is left unless it is complete: sources that can't be
//! opened are left out before the layout; the archive is written under a temporary name beside
//! it and renamed into place only when every rank wrote its part, no source failed to read
//! and no signal asked to stop; otherwise the temporary is removed.

mod align;
mod framed;
mod ledger;
mod resume;
mod segment;

use super::{index, Done, Options, Report};
use crate::engine::checkpoint::{self, Checkpoint, Durable};
use crate::engine::context::{Context, Error, ToolReport};
use crate::engine::copy::data::{copy_at_seen, write_all_at, Buffer, DataOptions, Seen};
use crate::engine::copy::links;
use crate::engine::copy::meta::{MetaOptions, XattrPolicy};
use crate::engine::copy::Mapping;
use crate::engine::digest::RangeHasher;
use crate::engine::hashing::Hashing;
use crate::engine::racy;
use crate::tar::create::segment::{HeaderBytes, Member, Segment, Stamp};
use crate::tar::format::{round_up, Header, Kind};
use flist::atomic::{Output, Replace, Step};
use flist::noatime::NoAtime;
use flist::path::{display, normalize};
use flist::{FileList, FileType, ItemError, Meta};
use lustre_sys::policy::{self, Decision};
use lustre_sys::SetOutcome;
use rayon::prelude::*;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use serde_bytes::Bytes;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use steal::progress::Progress;
use steal::queue;
use steal::typed;
use steal::{Comm, CommExt};

/// Files up to this size travel whole inside segments (bytes).
const SMALL_FILE: u64 = 1 << 20;
/// Entries per segment, at most.
const SEGMENT_ENTRIES: usize = 1024;
/// The environment variable of the test seam: a shell command rank 0 runs after the layout
/// and before any data is copied (tests use it to change files between walk and copy).
const HOOK: &str = "MFU_TEST_HOOK_AFTER_LAYOUT";
/// The environment variable of the test seam for files changing while read: a shell command
/// run once per process, right after the first chunk of a big file was read and before that
/// read is checked (tests rewrite the file there, deterministically mid-read).
const HOOK_FIRST_CHUNK: &str = "MFU_RS_TEST_HOOK_AFTER_FIRST_CHUNK";

/// Run the [`HOOK_FIRST_CHUNK`] command, if set, the first time this is called in the process.
fn after_first_chunk() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Some(cmd) = std::env::var_os(HOOK_FIRST_CHUNK) {
            let _ = std::process::Command::new("sh").arg("-c").arg(cmd).status();
        }
    });
}

/// What the data phase saw go wrong, by path (one message per file).
#[derive(Default)]
struct Problems {
    by_path: Mutex<HashMap<Vec<u8>, ItemError>>,
    /// Some bytes of the archive are not what their header says (a source that could not be
    /// read, a write to the archive that failed): the archive must not be left in place.
    damaged: std::sync::atomic::AtomicBool,
}

impl Problems {
    fn add(&self, e: ItemError) {
        self.by_path
            .lock()
            .expect("problems")
            .entry(e.path.clone())
            .or_insert(e);
    }
    /// A failure that leaves bytes of the archive wrong.
    fn damage(&self, e: ItemError) {
        self.damaged.store(true, Ordering::Relaxed);
        self.add(e);
    }
    fn is_damaged(&self) -> bool {
        self.damaged.load(Ordering::Relaxed)
    }
    fn changed(&self, src: &[u8], what: String) {
        self.add(ItemError::new(src, "archive", io::Error::other(what)));
    }
    fn into_sorted(self) -> Vec<ItemError> {
        let mut v: Vec<ItemError> = self
            .by_path
            .into_inner()
            .expect("problems")
            .into_values()
            .collect();
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    }
}

/// Context of the data phase on one rank.
struct Writer<'a> {
    /// The archive's path (for messages).
    archive: Vec<u8>,
    /// `--noatime`: how sources are opened.
    noatime: &'a NoAtime,
    problems: Problems,
    progress: &'a Progress,
    /// Set when the run must stop (compression ends between windows).
    stop: &'a AtomicBool,
    data: DataOptions,
    /// `--manifest`: the digests of the data archived.
    hashing: Hashing,
    /// Source paths to stored names (for the manifest).
    names: Mapping,
    /// What earlier runs wrote; the marks of what this one writes.
    ledger: &'a ledger::Ledger<'a>,
}

/// The source `src` opened for reading through `noatime`; `first`: this reads the start of the
/// file (the read that counts it when the kernel refuses `O_NOATIME`).
fn open_source(src: &[u8], noatime: &NoAtime, first: bool) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(noatime.open_part(first, flags, |f| flist::walk::open_long(src, f))?)
}

/// The directory of the source opened last, kept open: a run's members come in name order,
/// so most share it, and opening each name beneath it spares resolving the whole path again.
#[derive(Default)]
struct SourceDir {
    path: Vec<u8>,
    fd: Option<OwnedFd>,
}

impl SourceDir {
    /// `src` opened for reading like [`open_source`] (the parent is resolved the same way, the
    /// name without following a symlink).
    fn open(&mut self, src: &[u8], noatime: &NoAtime, first: bool) -> io::Result<OwnedFd> {
        let (parent, name) = (flist::path::parent(src), flist::path::basename(src));
        if name.len() == src.len() || name == b"." || name == b".." {
            return open_source(src, noatime, first);
        }
        if self.fd.is_none() || self.path != parent {
            self.fd = None;
            self.path.clear();
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            match flist::walk::open_long(parent, flags) {
                Ok(fd) => {
                    self.fd = Some(fd);
                    self.path.extend_from_slice(parent);
                }
                // The whole path again, for the same error as without the cache.
                Err(_) => return open_source(src, noatime, first),
            }
        }
        let dir = self.fd.as_ref().expect("opened above");
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(noatime.open_part(first, flags, |f| {
            rustix::fs::openat(dir, name, f, Mode::empty())
        })?)
    }
}

impl Writer<'_> {
    /// `--manifest`: hash the `len` bytes at `file_at` of `src` (of `size` bytes) that `feed`
    /// hands a hasher, and keep the digest under the name `src` is stored as.
    fn keep(
        &self,
        src: &[u8],
        (file_at, len, size): (u64, u64, u64),
        feed: impl FnOnce(&mut RangeHasher),
    ) {
        if self.hashing.manifest.is_none() {
            return;
        }
        let mut h = self.hashing.range(file_at, len, size);
        feed(&mut h);
        self.hashing.keep(&self.names.dest(src), size, h.finish());
    }

    /// After a piece of `src` was read (a chunk, or a small file whole): report a size, mtime
    /// or ctime different from the walk's. Every piece is checked after its read, whichever
    /// worker and rank read it: a file that changes between the walk and the last check of
    /// any of its pieces is named, so the archive never holds a silent mix of old and new
    /// bytes (GNU tar: "file changed as we read it").
    ///
    /// A file written just before its read ended ([`racy`]) is also read again, once a write
    /// that stamped it had time to move on, and compared with what the archive holds of it
    /// (`stored`): a write under way while it was read shows there, not in its times.
    fn check_unchanged(
        &self,
        fd: BorrowedFd<'_>,
        src: &[u8],
        size: u64,
        stamp: Stamp,
        stored: Stored<'_>,
    ) {
        if self.times_moved(fd, src, size, stamp) || !racy::racy(stamp.ctime) {
            return;
        }
        racy::settle(stamp.ctime);
        if self.times_moved(fd, src, size, stamp) {
            return;
        }
        let same = match stored {
            Stored::Bytes { file_at, data } => racy::same_as(fd, file_at, data),
            Stored::Archive {
                fd: archive,
                at,
                file_at,
                len,
            } => racy::reopen_for_reading(archive)
                .and_then(|a| racy::same_bytes(fd, file_at, &a, at, len)),
        };
        match same {
            Ok(true) => {}
            Ok(false) => self.problems.changed(
                src,
                "file changed as we read it (it was being written: its bytes now differ from \
                 those archived, though its times do not): its data in the archive may mix old \
                 and new"
                    .into(),
            ),
            Err(e) => self.problems.add(ItemError::new(src, "read again", e)),
        }
    }

    /// [`Writer::check_unchanged`]'s check of the times: true (and the file named) when its
    /// size, mtime or ctime is not the walk's.
    fn times_moved(&self, fd: BorrowedFd<'_>, src: &[u8], size: u64, stamp: Stamp) -> bool {
        if let Ok(st) = rustix::fs::fstat(fd) {
            let now = Meta::from_stat(&st);
            if now.size != size {
                let kept = if now.size < size {
                    format!("its {} bytes, then zeros up to the walked size", now.size)
                } else {
                    format!("its first {size} bytes")
                };
                self.problems.changed(
                    src,
                    format!(
                        "file changed as we read it: changed size while being archived \
                         (walked {size} bytes, now {}): the archive holds {kept}",
                        now.size
                    ),
                );
                return true;
            } else if (now.mtime, now.mtime_nsec) != stamp.mtime
                || (now.ctime, now.ctime_nsec) != stamp.ctime
            {
                self.problems.changed(
                    src,
                    "file changed as we read it (its mtime or ctime is no longer the walk's): \
                     its data in the archive may mix old and new"
                        .into(),
                );
                return true;
            }
        }
        false
    }

    /// Append `len` bytes of `src` from `file_at` to `out`; zeros where the file is shorter.
    #[allow(clippy::too_many_arguments)]
    fn read_into(
        &self,
        dir: &mut SourceDir,
        src: &[u8],
        file_at: u64,
        len: u64,
        size: u64,
        stamp: Stamp,
        out: &mut Vec<u8>,
    ) {
        let start = out.len();
        let end = start + len as usize;
        let fd = match dir.open(src, self.noatime, file_at == 0) {
            Ok(fd) => fd,
            Err(e) => {
                self.problems.damage(ItemError::new(src, "open", e));
                out.resize(end, 0);
                return;
            }
        };
        // Read into the spare capacity (no zero fill first); zeros only for what is missing.
        out.reserve(len as usize);
        let mut failed = None;
        while out.len() < end {
            let at = file_at + (out.len() - start) as u64;
            let want = end - out.len();
            match rustix::io::pread(&fd, &mut out.spare_capacity_mut()[..want], at) {
                Ok(([], _)) => break,
                Ok((read, _)) => {
                    let n = read.len();
                    // SAFETY: pread initialised these `n` bytes right after the vector's
                    // length, within its capacity.
                    unsafe { out.set_len(out.len() + n) };
                }
                Err(Errno::INTR) => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let done = out.len() - start;
        out.resize(end, 0);
        // The bytes stored (zeros where the file fell short), for the manifest.
        self.keep(src, (file_at, len, size), |h| h.update(&out[start..end]));
        if let Some(e) = failed {
            self.problems.damage(ItemError::new(src, "read", e.into()));
            return;
        }
        if file_at == 0 && len < size {
            after_first_chunk();
        }
        crate::engine::test_seam::after_chunk_read();
        let stored = Stored::Bytes {
            file_at,
            data: &out[start..end],
        };
        self.check_unchanged(fd.as_fd(), src, size, stamp, stored);
        self.progress.add(0, done as u64);
    }

    /// The bytes of a segment: headers, data, zero padding.
    fn bytes_of(&self, seg: &Segment, out: &mut Vec<u8>) {
        match seg {
            Segment::Run { members, .. } => {
                let mut dir = SourceDir::default();
                for m in members {
                    m.header.write_to(out);
                    if m.inline && !m.src.is_empty() {
                        self.read_into(&mut dir, &m.src, 0, m.size, m.size, m.stamp, out);
                        out.resize(out.len() + (round_up(m.size) - m.size) as usize, 0);
                    }
                    self.progress.add(1, 0);
                }
            }
            Segment::Chunk {
                src,
                file_at,
                len,
                size,
                stamp,
                ..
            } => {
                let mut dir = SourceDir::default();
                self.read_into(&mut dir, src, *file_at, *len, *size, *stamp, out);
                if file_at + len == *size {
                    out.resize(out.len() + (round_up(*size) - size) as usize, 0);
                }
            }
            Segment::Window { lo, hi, run } => {
                let from = out.len();
                self.bytes_of(run, out);
                let skip = (lo - run.at()) as usize;
                out.drain(from..from + skip);
                out.truncate(from + (hi - lo) as usize);
            }
            Segment::Group(segs) => {
                for seg in segs {
                    self.bytes_of(seg, out);
                }
            }
            Segment::Bytes { data, .. } => out.extend_from_slice(data),
        }
    }

    /// Write a segment into the uncompressed archive.
    fn write(&self, archive: BorrowedFd<'_>, seg: Segment, buf: &mut Buffer) {
        // A chunk's range in the stream, its file's padding included (zeros already there).
        let seg_len = seg.len();
        match seg {
            Segment::Group(segs) => {
                for seg in segs {
                    self.write(archive, seg, buf);
                }
            }
            Segment::Run { at, .. }
            | Segment::Window { lo: at, .. }
            | Segment::Bytes { at, .. } => {
                thread_local!(static BYTES: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) });
                BYTES.with_borrow_mut(|bytes| {
                    bytes.clear();
                    // Grown once to its size, not by doublings that copy what is in it.
                    bytes.reserve(seg.len() as usize);
                    self.bytes_of(&seg, bytes);
                    match write_all_at(archive, bytes, at) {
                        Err(e) => {
                            self.problems
                                .damage(ItemError::new(&self.archive, e.op, e.source))
                        }
                        // Marked only when every byte of it is what its header says: a
                        // source that failed to read left zeros, which a rerun must redo.
                        Ok(()) if !self.problems.is_damaged() => {
                            self.ledger.wrote(at, at + bytes.len() as u64)
                        }
                        Ok(()) => {}
                    }
                });
            }
            Segment::Chunk {
                at,
                src,
                file_at,
                len,
                size,
                stamp,
            } => {
                let end = at + seg_len;
                let fd = match open_source(&src, self.noatime, file_at == 0) {
                    Ok(fd) => fd,
                    Err(e) => return self.problems.damage(ItemError::new(&src, "open", e)),
                };
                let mut cfr = true;
                let mut hashed = self
                    .hashing
                    .manifest
                    .is_some()
                    .then(|| self.hashing.range(file_at, len, size));
                let mut see = |b: &[u8]| {
                    if let Some(h) = hashed.as_mut() {
                        h.update(b);
                    }
                };
                let seen: Seen<'_> = self.hashing.manifest.is_some().then_some(&mut see);
                // A short source leaves the rest of the chunk as the zeros the archive was
                // sized with.
                match copy_at_seen(
                    fd.as_fd(),
                    file_at,
                    archive,
                    at,
                    len,
                    &self.data,
                    buf,
                    &mut cfr,
                    seen,
                ) {
                    Ok(n) => {
                        self.progress.add(0, n);
                        if let Some(h) = hashed {
                            self.hashing.keep(&self.names.dest(&src), size, h.finish());
                        }
                        if file_at == 0 && len < size {
                            after_first_chunk();
                        }
                    }
                    // Cut short: the file shrank, which the check below names.
                    Err(e) if e.source.kind() == io::ErrorKind::UnexpectedEof => {}
                    // The archive's side of the copy failed: name the archive.
                    Err(e) if e.op == "write" || archive_errno(&e.source) => self
                        .problems
                        .damage(ItemError::new(&self.archive, "write", e.source)),
                    Err(e) => self.problems.damage(ItemError::new(&src, e.op, e.source)),
                }
                crate::engine::test_seam::after_chunk_read();
                let stored = Stored::Archive {
                    fd: archive,
                    at,
                    file_at,
                    len,
                };
                self.check_unchanged(fd.as_fd(), &src, size, stamp, stored);
                if !self.problems.is_damaged() {
                    self.ledger.wrote(at, end);
                }
            }
        }
    }
}

/// What the archive holds of a piece of a file just read, for [`Writer::check_unchanged`].
enum Stored<'a> {
    /// The bytes read from `file_at` (in memory, still to be written or compressed).
    Bytes { file_at: u64, data: &'a [u8] },
    /// `len` bytes of the file from `file_at`, written at `at` of the archive `fd`.
    Archive {
        fd: BorrowedFd<'a>,
        at: u64,
        file_at: u64,
        len: u64,
    },
}

/// Whether a failed `copy_file_range` into the archive failed on the archive's side (the
/// call does not say which file an error is about; these are only ever the destination's).
fn archive_errno(e: &io::Error) -> bool {
    [Errno::NOSPC, Errno::DQUOT, Errno::FBIG, Errno::ROFS]
        .iter()
        .any(|errno| e.raw_os_error() == Some(errno.raw_os_error()))
}

/// An entry of this rank, laid out.
struct Laid {
    /// Offset of its first header block in the tar stream.
    at: u64,
    member: Member,
}

/// (path on disk, stored name) of each PATH argument.
type Roots = Vec<(Vec<u8>, Vec<u8>)>;

/// The directory the paths are taken relative to (`chdir`, or `cwd`), and the paths, each
/// checked to exist and to have a name that extracts safely.
fn roots(chdir: Option<&[u8]>, paths: &[Vec<u8>], cwd: &[u8]) -> Result<(Vec<u8>, Roots), String> {
    let base = match chdir {
        Some(d) => normalize(d, cwd),
        None => cwd.to_vec(),
    };
    if !crate::engine::setup::is_dir(&base) {
        return Err(format!("-C {}: not a directory", display(&base)));
    }
    let mut pairs = Vec::new();
    for p in paths {
        let abs = normalize(p, &base);
        flist::walk::stat_path(&abs, false)
            .map_err(|e| format!("{}: {}", display(&abs), io::Error::from(e)))?;
        let stored = match crate::tar::extract::beneath::clean(stored_name(p, &abs, &base)) {
            Ok(s) if s.is_empty() => b".".to_vec(),
            Ok(s) => s,
            Err(_) => {
                return Err(format!(
                    "{}: names with '..' would not extract safely; use -C to start from the \
                     directory above",
                    display(p)
                ))
            }
        };
        pairs.push((abs, stored));
    }
    Ok((base, pairs))
}

/// The name a PATH argument is stored under (before cleaning). A relative PATH as given. An
/// absolute PATH inside the base directory (`-C DIR`, or the current directory), compared
/// lexically: relative to it, as dtar stores it (`dtar -cf a.tar /abs/path/dir` run in
/// `/abs/path` stores `dir/...`). Any other absolute PATH: without its leading `/`, as GNU tar
/// stores it (`abs/elsewhere/...`).
fn stored_name<'a>(path: &'a [u8], abs: &'a [u8], base: &[u8]) -> &'a [u8] {
    if path.first() != Some(&b'/') {
        return path;
    }
    if flist::path::is_prefix(base, abs) {
        let rest = &abs[base.len().min(abs.len())..];
        return rest.strip_prefix(b"/").unwrap_or(rest);
    }
    let mut name = path;
    while let Some(rest) = name.strip_prefix(b"/") {
        name = rest;
    }
    name
}

/// For the records of `sorted` on this rank that are extra members of a hard-link group: the
/// source path of the group's first member (the first in name order, so it precedes them in
/// the archive). Collective.
fn link_targets(comm: &dyn Comm, sorted: &FileList) -> HashMap<Vec<u8>, Vec<u8>> {
    let any = sorted
        .iter()
        .any(|e| e.kind == FileType::File && e.meta.is_some_and(|m| m.nlink > 1));
    if !comm.any(any) {
        return HashMap::new();
    }
    let groups = links::group(comm, sorted.clone());
    // Route each (first, member) pair to the rank holding the member in name order.
    let firsts: Vec<Option<Vec<u8>>> = comm
        .allgatherv(&sorted.iter().next().map_or(Vec::new(), |e| {
            let mut v = vec![1];
            v.extend_from_slice(e.path);
            v
        }))
        .into_iter()
        .map(|b| (!b.is_empty()).then(|| b[1..].to_vec()))
        .collect();
    let mut sends = vec![Vec::new(); comm.size()];
    for (first, member) in groups.links {
        let owner = firsts
            .iter()
            .enumerate()
            .filter(|(_, f)| f.as_deref().is_some_and(|f| f <= &member[..]))
            .map(|(r, _)| r)
            .next_back()
            .unwrap_or(0);
        typed::encode_into(
            &(Bytes::new(&member), Bytes::new(&first)),
            &mut sends[owner],
        );
    }
    let mut out = HashMap::new();
    for bytes in comm.alltoallv(sends) {
        for pair in typed::each::<(&Bytes, &Bytes)>(&bytes) {
            let (member, first) = typed::sent(pair);
            out.insert(member.to_vec(), first.to_vec());
        }
    }
    out
}

/// What encoding one record gave.
enum Encoded {
    /// The member, and the error reading its xattrs or project ID (it is archived without
    /// them).
    Member(Member, Option<ItemError>),
    /// It could not be read (a link target): reported and left out.
    Failed(ItemError),
    /// A kind tar does not archive (fifo, socket, device): the message says which.
    Skipped(String),
}

/// Encode this rank's records (sorted by name) as archive members. Entries that can't be
/// archived are reported and left out. The records are encoded in parallel (the headers of a
/// million small files are a second of work for one thread); messages keep the name order.
fn members(
    context: &Context,
    list: &FileList,
    map: &Mapping,
    links: &HashMap<Vec<u8>, Vec<u8>>,
    (xattrs, projids): (&MetaOptions, bool),
    errors: &mut Vec<ItemError>,
    skipped: &mut u64,
) -> Vec<Member> {
    let encoded: Vec<Encoded> = (0..list.len())
        .into_par_iter()
        .with_min_len(256)
        .map(|i| encode_member(list, i, map, links, xattrs, projids))
        .collect();
    let mut out = Vec::with_capacity(encoded.len());
    for e in encoded {
        match e {
            Encoded::Member(m, xattr_error) => {
                errors.extend(xattr_error);
                out.push(m);
            }
            Encoded::Failed(e) => errors.push(e),
            Encoded::Skipped(msg) => {
                context.error(msg);
                *skipped += 1;
            }
        }
    }
    out
}

/// Whether the file `path` may be opened for reading, as the data phase will open it: the
/// kernel's permission check for the effective ids (`faccessat2(AT_EACCESS)`: ACLs and the
/// file system's own check included), one system call where opening and closing took two and
/// a file structure. Where the kernel lacks `faccessat2` and the process runs set-id, it opens
/// the file as before.
fn check_readable(path: &[u8]) -> io::Result<()> {
    use rustix::fs::{Access, AtFlags};
    flist::at::At::with(path, |dir, name| {
        match rustix::fs::accessat(dir, name, Access::READ_OK, AtFlags::EACCESS) {
            Err(Errno::NOSYS) => {
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                rustix::fs::openat(dir, name, flags, Mode::empty()).map(drop)
            }
            r => r,
        }
    })
    .map_err(io::Error::from)
}

/// The archive member of record `i` of `list`; with `projids`, files and directories carry
/// their project IDs.
fn encode_member(
    list: &FileList,
    i: usize,
    map: &Mapping,
    links: &HashMap<Vec<u8>, Vec<u8>>,
    xattrs: &MetaOptions,
    projids: bool,
) -> Encoded {
    let e = list.entry(i);
    let m = &e.meta.expect("stat list");
    let mut h = Header {
        path: map.dest(e.path),
        kind: Kind::File,
        mode: m.mode & 0o7777,
        uid: m.uid as u64,
        gid: m.gid as u64,
        uname: list
            .users
            .name_of(m.uid as u64)
            .unwrap_or_default()
            .to_vec(),
        gname: list
            .groups
            .name_of(m.gid as u64)
            .unwrap_or_default()
            .to_vec(),
        size: 0,
        mtime: m.mtime,
        mtime_nsec: m.mtime_nsec,
        link: Vec::new(),
        dev_major: 0,
        dev_minor: 0,
        xattrs: Vec::new(),
        projid: Default::default(),
    };
    match e.kind {
        FileType::File => {
            // The layout fixes every header before any data is read: a file that can't be
            // opened now is left out (as GNU tar does), not stored with zeros for its data. A
            // hard link's inode is its group's first member's, so it fails with it.
            if let Err(err) = check_readable(e.path) {
                return Encoded::Failed(ItemError::new(e.path, "open", err));
            }
            match links.get(e.path) {
                Some(first) => {
                    h.kind = Kind::HardLink;
                    h.link = map.dest(first);
                }
                None => h.size = m.size,
            }
        }
        FileType::Dir => h.kind = Kind::Dir,
        FileType::Symlink => {
            h.kind = Kind::Symlink;
            match flist::at::At::with(e.path, |dir, name| {
                rustix::fs::readlinkat(dir, name, Vec::new())
            }) {
                Ok(t) => h.link = t.into_bytes(),
                Err(err) => {
                    return Encoded::Failed(ItemError::new(e.path, "read link", err.into()))
                }
            }
        }
        other => {
            return Encoded::Skipped(format!(
                "skipped: {}: a {} is not archived",
                display(e.path),
                match other {
                    FileType::Fifo => "fifo",
                    FileType::Socket => "socket",
                    _ => "device or special file",
                }
            ));
        }
    }
    let mut xattr_error = None;
    if xattrs.xattrs != XattrPolicy::None {
        // Lustre's own (the layout) stay out: restoring them would pin the extracted
        // files to this file system's OSTs.
        match crate::engine::copy::meta::read_xattrs(e.path, xattrs) {
            Ok(x) => h.xattrs = x,
            Err((op, err)) => xattr_error = Some(ItemError::new(e.path, op, err)),
        }
    }
    if projids && matches!(h.kind, Kind::File | Kind::Dir) {
        let read = flist::at::At::new(e.path)
            .and_then(|at| crate::engine::copy::projid::get_at(&at).map_err(io::Error::from));
        match read {
            Ok(p) => h.projid = p.unwrap_or_default(),
            Err(err) => {
                xattr_error.get_or_insert_with(|| ItemError::new(e.path, "read project ID", err));
            }
        }
    }
    // Measured now, encoded when written.
    let len = h.encoded_len();
    let (kind, size) = (h.kind, h.size);
    let member = Member {
        header: HeaderBytes::Lazy {
            header: Box::new(h),
            len,
        },
        src: if kind == Kind::File {
            e.path.to_vec()
        } else {
            Vec::new()
        },
        size,
        stamp: Stamp {
            mtime: (m.mtime, m.mtime_nsec),
            ctime: (m.ctime, m.ctime_nsec),
        },
        inline: true,
    };
    Encoded::Member(member, xattr_error)
}

/// Cut this rank's laid-out entries into segments: runs of small entries and chunks of big
/// files' data. What `ledger` says earlier runs wrote is left out: a member (its header, and
/// its data when small) or a chunk inside the ranges they wrote; a run never spans what is
/// left out, so every segment is bytes still to write.
fn segments(laid: Vec<Laid>, chunk: u64, ledger: &ledger::Ledger<'_>) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut run: Vec<Member> = Vec::new();
    let mut run_at = 0;
    let mut run_len = 0u64;
    let flush = |run: &mut Vec<Member>, run_at: u64, out: &mut Vec<Segment>| {
        if !run.is_empty() {
            out.push(Segment::Run {
                at: run_at,
                members: std::mem::take(run),
            });
        }
    };
    for Laid { at, mut member } in laid {
        let big = member.size > SMALL_FILE.min(chunk);
        let data_at = at + member.header.len() as u64;
        let (size, stamp) = (member.size, member.stamp);
        // Only a big file's chunks need its path beside the member's own.
        let src = if big { member.src.clone() } else { Vec::new() };
        member.inline = !big;
        if ledger.covered(at, at + member.len()) {
            flush(&mut run, run_at, &mut out);
        } else {
            if run.is_empty() {
                run_at = at;
                run_len = 0;
            }
            run_len += member.len();
            run.push(member);
            if big || run.len() >= SEGMENT_ENTRIES || run_len >= chunk {
                flush(&mut run, run_at, &mut out);
            }
        }
        if big {
            // Chunks end on archive offsets that are multiples of the chunk size, so that with
            // the archive striped at that size each chunk is one stripe on one OST.
            let mut file_at = 0;
            while file_at < size {
                let len = (chunk - (data_at + file_at) % chunk).min(size - file_at);
                let seg = Segment::Chunk {
                    at: data_at + file_at,
                    src: src.clone(),
                    file_at,
                    len,
                    size,
                    stamp,
                };
                if !ledger.covered(seg.at(), seg.at() + seg.len()) {
                    out.push(seg);
                }
                file_at += len;
            }
        }
    }
    flush(&mut run, run_at, &mut out);
    out
}

/// Create the archive file `name` (a temporary, or the partial archive in the checkpoint) in
/// `dir` (reached as `dir_path`, for the file system's kind), which must not hold it, readable
/// by all as tar makes it (less the umask). On Lustre it is striped over all OSTs with the
/// chunk size as stripe size (lustre.md), which [`segments`] aligns big files' chunks to,
/// unless `--stripe-count`/`--stripe-size` say otherwise; returns the `-v` line saying so.
fn create_archive(
    dir: BorrowedFd<'_>,
    dir_path: &[u8],
    name: &[u8],
    o: &Options,
) -> io::Result<(OwnedFd, Option<String>)> {
    let api = &o.lustre;
    if api
        .is_lustre(flist::path::as_path(dir_path))
        .unwrap_or(false)
    {
        if let Decision::Set { count, size } = policy::archive_layout(&o.stripe, o.chunksize) {
            let name = std::ffi::CString::new(name)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            let created = api.create_striped_with(
                dir,
                &name,
                libc::O_EXCL | libc::O_NOFOLLOW,
                0o666,
                count,
                size,
            )?;
            let count = match count {
                lustre_sys::STRIPE_COUNT_ALL => "all OSTs".to_string(),
                n => format!("{n} OSTs"),
            };
            let said = match created.outcome {
                SetOutcome::Applied => format!("striped over {count} with {size}-byte stripes"),
                SetOutcome::AlreadyHadLayout => {
                    "an existing file: it keeps its layout (remove it first to restripe)".into()
                }
                SetOutcome::NotPermitted => {
                    "the file system refused a layout: it has its directory's default".into()
                }
            };
            return Ok((
                created.fd,
                Some(format!("The archive is on Lustre: {said}\n")),
            ));
        }
    }
    // A new file: never whatever a symlink already at the temporary name points to.
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(0o666),
    )?)
    .map(|fd| (fd, None))
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// `tar -c` of `paths`. Collective.
pub(super) fn run(comm: &dyn Comm, o: &Options, paths: &[Vec<u8>]) -> Result<Report, Error> {
    let started = Instant::now();
    let setup = setup(comm, o, paths)?;
    let progress = o.context.progress(comm.rank(), "Archived");
    let walked = walk(comm, o, &setup, &progress)?;
    let base = Report {
        mode: Done::Create,
        archive: setup.archive.clone(),
        directory: setup.base.clone(),
        walk_errors: walked.errors,
        ..Report::default()
    };
    let Some(list) = walked.list else {
        return Ok(not_created(comm, o, base, started, true));
    };
    let (mut plan, laid) = plan(comm, o, &setup.archive, &list, &walked.map);
    let (first, count, total) = (plan.first_index, plan.count, plan.total);
    let archive = setup.archive.clone();
    let of = resume::Of {
        archive: &setup.archive,
        base: &setup.base,
        paths,
        list: &list,
        laid: &laid,
    };
    let plain = o.codec().is_none();
    let stream_len = |mtime: i64| {
        if !plain {
            return 0;
        }
        let mut p = Plan::bare(first, count, total);
        p.place_index(&archive, mtime);
        p.stream_len
    };
    let said = Mutex::new(Vec::new());
    let resumed = resume::open(comm, o, &of, stream_len, &said)?;
    if walked.checkpoint_inside && comm.rank() == 0 {
        if let Some(ck) = &resumed.checkpoint {
            let n = format!(
                "the checkpoint {} is inside the sources: its directory changes as this run \
                 goes, so an interrupted run will start over (give --checkpoint a path outside \
                 them, on the archive's file system, to continue instead)",
                display(ck.path())
            );
            o.context.events.error(&n);
            said.lock().expect("notices").push(n);
        }
    }
    let base = Report {
        notices: said.into_inner().expect("notices"),
        ..base
    };
    drop(list);
    // A continued run dates the index member as the first run did: the same bytes.
    let index_mtime = resumed.recorded.map_or(plan.index_mtime, |r| r.index_mtime);
    plan.place_index(&setup.archive, index_mtime);
    if comm.rank() == 0 {
        if let Ok(cmd) = std::env::var(HOOK) {
            let _ = std::process::Command::new("sh").arg("-c").arg(cmd).status();
        }
    }
    comm.barrier();
    let sink = resumed.checkpoint.as_ref().map(|c| c as &dyn ledger::Sink);
    let ledger = ledger::Ledger::new(resumed.prior.iter(), sink);
    let w = Writer {
        archive: setup.archive.clone(),
        noatime: &o.context.noatime,
        problems: Problems::default(),
        progress: &progress,
        stop: &o.context.stop,
        data: DataOptions {
            bufsize: o.bufsize.min(1 << 30) as usize,
            sparse: false,
            direct: false,
        },
        hashing: Hashing::new(false, o.manifest.as_ref().map(|m| m.kind)),
        names: walked.map.clone(),
        ledger: &ledger,
    };
    let segs = cut(comm, o, &setup.archive, plan.stream_len, laid, &ledger);
    // The archive is written under another name and renamed over ARCHIVE only once complete
    // (an [`Output`]): a create that fails or is interrupted leaves nothing that looks like an
    // archive. With a checkpoint, that is a file in it, kept for the rerun that continues;
    // without, a temporary name beside the archive, removed (stale ones of killed runs are
    // removed here).
    let kept = resumed.checkpoint.as_ref().map(|checkpoint| resume::Kept {
        checkpoint,
        resume: resumed.recorded.is_some(),
        index_mtime,
    });
    let tmp = stage(comm, o, &setup.archive, kept)?;
    let written = match o.codec() {
        Some(codec) => framed::write(comm, o, &plan, &w, &tmp, segs, codec)?,
        None => write_plain(comm, o, &plan, &w, &tmp, segs)?,
    };
    let ended = Ended {
        written,
        tmp,
        earlier: if plain {
            ledger.covered_bytes()
        } else {
            ledger.frame_bytes()
        },
        now: ledger.written(),
    };
    // The checkpoint goes right after the rename (see [`Checkpoint::stop_flushing`]).
    if let Some(ck) = &resumed.checkpoint {
        ck.stop_flushing();
    }
    let mut report = finish(comm, o, base, started, plan, w, ended);
    if let Some(ck) = resumed.checkpoint {
        // The archive is whole: a checkpoint not removed (or not kept) is a failure named
        // with the report (exit 1), not a run without one.
        let outcome = checkpoint::Outcome::of_stop(report.stopped.is_some());
        if !ck.finish_told(comm, &o.context, outcome) {
            report.failed += 1;
        }
    }
    Ok(report)
}

/// How the writing ended, for [`finish`].
struct Ended<'c> {
    written: Written,
    tmp: Temp<'c>,
    /// Bytes of the stream earlier runs wrote (the same on every rank).
    earlier: u64,
    /// Bytes of the stream this process wrote.
    now: u64,
}

/// What create works on, checked alike on every rank.
struct Setup {
    /// The archive (absolute path).
    archive: Vec<u8>,
    /// The directory the paths are taken relative to (`-C`, or the current directory).
    base: Vec<u8>,
    /// (path on disk, stored name) of each path.
    pairs: Roots,
    /// Where the checkpoint will be (absolute), if any.
    checkpoint: Option<Vec<u8>>,
}

/// The paths to archive, and the archive's place: checked on every rank, agreed. Collective.
fn setup(comm: &dyn Comm, o: &Options, paths: &[Vec<u8>]) -> Result<Setup, Error> {
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let archive = normalize(&o.archive, &cwd);
    let checked = roots(o.chdir.as_deref(), paths, &cwd).and_then(|(base, pairs)| {
        crate::engine::setup::check_parent(&archive)?;
        check_archive_path(&archive)?;
        Ok(Setup {
            archive: archive.clone(),
            base,
            pairs,
            checkpoint: resume::checkpoint_path(&o.checkpoint, &archive, &cwd),
        })
    });
    crate::engine::setup::agree_setup(comm, checked)
}

/// The sources as walked.
struct Sources {
    /// This rank's records, filtered and sorted by name; `None` when a stop request cut the
    /// walk short.
    list: Option<FileList>,
    /// The walk's failures on all ranks (each told to the context).
    errors: u64,
    /// Source paths to stored names.
    map: Mapping,
    /// The directory that will hold the checkpoint is one of the sources.
    checkpoint_inside: bool,
}

/// Walk the sources (pruned by the rules), leave out the archive and its side index, sort by
/// name. Collective.
fn walk(
    comm: &dyn Comm,
    o: &Options,
    setup: &Setup,
    progress: &Progress,
) -> Result<Sources, Error> {
    let map = Mapping::new(setup.pairs.clone());
    let abs_roots: Vec<Vec<u8>> = setup.pairs.iter().map(|(a, _)| a.clone()).collect();
    // The rules prune the walk: an excluded tree is not read.
    let prune = o.rules.pruner(&map);
    let walked = crate::engine::setup::walk_sources_pruned(
        comm,
        &o.context,
        &abs_roots,
        false,
        progress,
        true,
        prune.as_deref(),
    );
    drop(prune); // it borrows the mapping
    let errors = walked.total_errors;
    if comm.any(walked.interrupted || o.context.stopped()) {
        return Ok(Sources {
            list: None,
            errors,
            map,
            checkpoint_inside: false,
        });
    }
    let mut list = walked.list;
    // The archive (an earlier one the new one replaces) and its side index are never
    // archived, as GNU tar says "file is the archive; not dumped", wherever the walk met them:
    // through a symlinked directory too.
    let archive = &setup.archive;
    let side = index::side_path(archive);
    let own = [
        (walked_at(archive, &abs_roots), "the archive"),
        (walked_at(&side, &abs_roots), "the archive's index"),
    ];
    // The checkpoint (when the archive is inside the sources) and all it holds: its files
    // change with every run and are this run's own work, never the user's data.
    let checkpoint = setup
        .checkpoint
        .as_ref()
        .map(|c| walked_at(c, &abs_roots))
        .unwrap_or_default();
    list.retain(|e| !checkpoint.iter().any(|c| flist::path::is_prefix(c, e.path)));
    list.retain(
        |e| match own.iter().find(|(at, _)| at.iter().any(|p| p == e.path)) {
            Some((_, what)) => {
                o.context.error(format_args!(
                    "{}: file is {what}; not dumped",
                    display(e.path)
                ));
                false
            }
            None => true,
        },
    );
    // The directory that holds the checkpoint, among the sources: it changes when the
    // checkpoint is made, after this walk, so a rerun's list never matches.
    let holder = setup
        .checkpoint
        .as_ref()
        .map(|c| walked_at(flist::path::parent(c), &abs_roots))
        .unwrap_or_default();
    let inside = comm.any(list.iter().any(|e| holder.iter().any(|h| h == e.path)));
    let keys = flist::sort::parse_keys("name").expect("name is a sort key");
    let sorted = flist::sort::sort(comm, list, &keys).map_err(|e| e.to_string());
    let list = crate::engine::setup::agree_setup(comm, sorted)?;
    Ok(Sources {
        list: Some(list),
        errors,
        map,
        checkpoint_inside: inside,
    })
}

/// The paths at which a walk of `roots` meets the file `path`: itself, and beneath each root
/// that holds it once symlinks are resolved, the root's path joined to the rest.
fn walked_at(path: &[u8], roots: &[Vec<u8>]) -> Vec<Vec<u8>> {
    use crate::engine::outputs::resolve;
    let real = resolve(path, true);
    let mut at = vec![path.to_vec()];
    for root in roots {
        let real_root = resolve(root, false);
        if flist::path::is_prefix(&real_root, &real) && real != real_root {
            let rest = match real_root.as_slice() {
                b"/" => &real[1..],
                _ => &real[real_root.len() + 1..],
            };
            let mut p = root.clone();
            if p != b"/" {
                p.push(b'/');
            }
            p.extend_from_slice(rest);
            at.push(p);
        }
    }
    at
}

/// The layout of this rank's part of the archive.
struct Plan {
    /// Offset of each of this rank's entries in the tar stream.
    offsets: Vec<u64>,
    /// Number (in the archive) of this rank's first entry.
    first_index: u64,
    /// Entries in the archive.
    count: u64,
    /// Bytes of all entries: where the index member starts.
    total: u64,
    /// Data bytes of this rank's files.
    data_bytes: u64,
    /// The index member's header.
    idx_header: Vec<u8>,
    /// Where the index member's data starts, and its length.
    idx_data_at: u64,
    idx_data_len: u64,
    /// The footer that ends the index member's data.
    footer: Vec<u8>,
    /// The index member's time (seconds since the epoch).
    index_mtime: i64,
    /// Bytes of the whole tar stream.
    stream_len: u64,
    /// Entries left out (named at the end, with the data phase's problems).
    errors: Vec<ItemError>,
    /// Entries of a type that is not archived (already named).
    skipped: u64,
    /// `--manifest`: this rank's hard links, stored as links to their group's first member:
    /// (its stored name, theirs).
    hard_links: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Plan {
    /// A plan of `count` entries taking `total` bytes, this rank's first being `first`, with
    /// nothing else (to place an index after them).
    fn bare(first: u64, count: u64, total: u64) -> Plan {
        Plan {
            offsets: Vec::new(),
            first_index: first,
            count,
            total,
            data_bytes: 0,
            idx_header: Vec::new(),
            idx_data_at: 0,
            idx_data_len: 0,
            footer: Vec::new(),
            index_mtime: 0,
            stream_len: 0,
            errors: Vec::new(),
            skipped: 0,
            hard_links: Vec::new(),
        }
    }

    /// Place the index member (dated `mtime`, seconds) after the entries, and the end.
    fn place_index(&mut self, archive: &[u8], mtime: i64) {
        self.index_mtime = mtime;
        let mut idx_header = Vec::new();
        index::member_header(
            &[flist::path::basename(archive), b".dtaridx"].concat(),
            self.count,
            mtime,
        )
        .encode(&mut idx_header);
        self.idx_data_at = self.total + idx_header.len() as u64;
        self.idx_data_len = index::data_len(self.count);
        let entry_size = idx_header.len() as u64 + self.idx_data_len;
        self.stream_len = self.total + entry_size + index::END;
        self.footer = index::footer(self.count, self.total, entry_size).to_vec();
        self.idx_header = idx_header;
    }
}

/// The index member's time (seconds since the epoch): `SOURCE_DATE_EPOCH` when set (the
/// reproducible-builds convention: two runs on the same sources give the same bytes), else now.
/// A continued run keeps the first run's.
fn index_mtime() -> i64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or_else(now_secs)
}

/// Encode this rank's members and place them: every entry's offset by a prefix sum over
/// ranks; the index member after them. Collective.
fn plan(
    comm: &dyn Comm,
    o: &Options,
    archive: &[u8],
    list: &FileList,
    map: &Mapping,
) -> (Plan, Vec<Laid>) {
    let links = link_targets(comm, list);
    let hard_links = match o.manifest {
        Some(_) => links
            .iter()
            .map(|(member, first)| (map.dest(first), map.dest(member)))
            .collect(),
        None => Vec::new(),
    };
    let mut errors = Vec::new();
    let mut skipped = 0;
    let mut members = members(
        &o.context,
        list,
        map,
        &links,
        (
            &MetaOptions::new(
                false,
                if o.xattrs {
                    XattrPolicy::NonLustre
                } else {
                    XattrPolicy::None
                },
            ),
            // Where no source's file system has project IDs, none is asked per entry.
            map.source_roots()
                .iter()
                .any(|r| crate::engine::copy::projid::readable_under(r)),
        ),
        &mut errors,
        &mut skipped,
    );
    let (first_index, count) = comm.offset_and_total(members.len() as u64);
    // The archive's first entry carries mfu-rs's mark, before anything is placed (it makes
    // the header longer): a reader then knows the archive must end with its index and
    // end-of-archive blocks, and that one cut at an entry boundary is truncated.
    if first_index == 0 {
        if let Some(first) = members.first_mut() {
            first.header.mark();
        }
    }
    let local: u64 = members
        .iter()
        .map(|m| m.header.len() as u64 + round_up(m.size))
        .sum();
    let (base, total) = comm.offset_and_total(local);
    let mut at = base;
    let mut offsets = Vec::with_capacity(members.len());
    let laid: Vec<Laid> = members
        .into_iter()
        .map(|member| {
            offsets.push(at);
            let l = Laid { at, member };
            at += l.member.header.len() as u64 + round_up(l.member.size);
            l
        })
        .collect();
    let data_bytes: u64 = laid
        .iter()
        .filter(|l| !l.member.src.is_empty())
        .map(|l| l.member.size)
        .sum();
    let mut plan = Plan {
        offsets,
        first_index,
        count,
        total,
        data_bytes,
        idx_data_at: 0,
        idx_data_len: 0,
        stream_len: 0,
        footer: Vec::new(),
        index_mtime: 0,
        idx_header: Vec::new(),
        errors,
        skipped,
        hard_links,
    };
    plan.place_index(archive, index_mtime());
    (plan, laid)
}

/// Cut this rank's laid-out entries into the segments the writers take ([`segments`]). On
/// Lustre, a plain archive's writes align to its stripes (the chunk size made a multiple of
/// the stripe size), so no two ranks write one stripe. Collective.
fn cut(
    comm: &dyn Comm,
    o: &Options,
    archive: &[u8],
    stream_len: u64,
    laid: Vec<Laid>,
    ledger: &ledger::Ledger<'_>,
) -> Vec<Segment> {
    let on_lustre = comm.any(
        o.lustre
            .is_lustre(flist::path::as_path(flist::path::parent(archive)))
            .unwrap_or(false),
    );
    let stripe = match policy::archive_layout(&o.stripe, o.chunksize) {
        Decision::Set { size, .. } if on_lustre && o.codec().is_none() && size > 0 => {
            Some(u64::from(size))
        }
        _ => None,
    };
    match stripe {
        // Compressed, big files' chunks end where frames do.
        None if o.codec().is_some() => {
            segments(laid, framed::frame_size(o.chunksize, stream_len), ledger)
        }
        None => segments(laid, o.chunksize, ledger),
        Some(s) => {
            let segs = segments(laid, o.chunksize.next_multiple_of(s), ledger);
            let region = segs.iter().fold((u64::MAX, 0), |(a, b), seg| {
                (a.min(seg.at()), b.max(seg.at() + seg.len()))
            });
            let region = if region.0 > region.1 { (0, 0) } else { region };
            crate::tar::create::align::align(comm, segs, region, s)
        }
    }
}

/// What writing the archive did on this rank.
struct Written {
    /// Every rank wrote its part (its index slice, its frames' place).
    complete: bool,
    /// A stop request ended the writing.
    interrupted: bool,
    /// zstd frames this rank compressed, and their bytes.
    frames: u64,
    compressed: u64,
}

/// With `-v`, say how the archive was laid out on Lustre.
fn say_layout(o: &Options, said: &Option<String>) {
    if let (Some(line), true) = (said, o.context.verbose) {
        o.context.info(line);
    }
}

/// Write an uncompressed archive into `tmp`: rank 0 creates it at its final size (so
/// unwritten padding reads as zeros), every rank writes its slice of the index, then all
/// write the segments through the work-stealing queue. Collective.
fn write_plain(
    comm: &dyn Comm,
    o: &Options,
    plan: &Plan,
    w: &Writer,
    tmp: &Temp<'_>,
    segs: Vec<Segment>,
) -> Result<Written, Error> {
    let rank0 = comm.rank() == 0;
    // Rank 0 writes through its own descriptor of the temporary it made, sized to the archive
    // (so unwritten padding reads as zeros); the others open it by its path.
    let created = tmp
        .mine()
        .map(|made| {
            made.and_then(|fd| {
                rustix::fs::ftruncate(&fd, plan.stream_len)?;
                Ok(fd)
            })
            .map_err(|e| format!("create {}: {e}", display(&w.archive)))
        })
        .transpose();
    let fd = match crate::engine::setup::agree_setup(comm, created)? {
        Some(fd) => fd,
        None => match tmp.join() {
            Ok(fd) => fd,
            Err(e) => {
                w.problems
                    .damage(ItemError::new(&tmp.path, "open for writing", e));
                // Keep taking part in the collectives below.
                flist::walk::open_long(b"/dev/null", OFlags::WRONLY).expect("/dev/null")
            }
        },
    };
    // Every rank writes its slice of the index; rank 0 the member's header and footer.
    let mut ok = write_all_at(
        fd.as_fd(),
        &index::encode_offsets(&plan.offsets),
        plan.idx_data_at + 8 * plan.first_index,
    )
    .is_ok();
    if rank0 {
        ok &= write_all_at(fd.as_fd(), &plan.idx_header, plan.total).is_ok();
        ok &= write_all_at(
            fd.as_fd(),
            &plan.footer,
            plan.idx_data_at + plan.idx_data_len - index::FOOTER,
        )
        .is_ok();
    }
    if !ok {
        w.problems.damage(ItemError::new(
            &w.archive,
            "write index",
            io::Error::last_os_error(),
        ));
    }
    let config = queue::Config {
        max_batch: 1,
        stop: Some(&o.context.stop),
        progress: Some(w.progress),
        ..queue::Config::default()
    };
    let archive_fd = fd.as_fd();
    let outcome = queue::run(comm, &config, segs, |seg, _spawned| {
        thread_local!(static BUF: RefCell<Option<Buffer>> = const { RefCell::new(None) });
        BUF.with_borrow_mut(|b| {
            let buf = b.get_or_insert_with(|| Buffer::new(w.data.bufsize));
            w.write(archive_fd, seg, buf);
        })
    });
    tmp.sync_mine(fd.as_fd(), w);
    Ok(Written {
        complete: comm.all(ok),
        interrupted: outcome.interrupted,
        frames: 0,
        compressed: 0,
    })
}

/// Keep the archive (rename it into place) if it is complete and no stop was asked, else
/// remove it; name every problem; say the `-v` figures; the report. Collective.
fn finish(
    comm: &dyn Comm,
    o: &Options,
    base: Report,
    started: Instant,
    plan: Plan,
    w: Writer,
    ended: Ended<'_>,
) -> Report {
    let (written, tmp) = (&ended.written, ended.tmp);
    let damaged = comm.any(w.problems.is_damaged() || !written.complete);
    let interrupted = comm.any(written.interrupted || o.context.stopped());
    let complete = !damaged && !interrupted;
    // Stopped with a checkpoint: the partial archive stays for the rerun (a damaged one is
    // not continued: what a failed read left is not marked, but the run had failures to
    // report, so it ends as complete and the checkpoint goes).
    let resumable = interrupted && !comm.any(w.problems.is_damaged()) && tmp.checkpoint.is_some();
    let kept = match tmp.output {
        Some(out) if complete => match out.publish(Replace::Overwrite) {
            Ok(()) => true,
            Err(e) if e.step == Step::SyncDir => {
                // In place, but not known to be on disk: said, and counted as failed.
                w.problems.add(ItemError::new(
                    &w.archive,
                    "sync the directory of",
                    e.source,
                ));
                true
            }
            Err(e) => {
                let op = match e.step {
                    Step::Sync => "sync",
                    _ => "rename into place",
                };
                // The temporary went with the output.
                w.problems.damage(ItemError::new(&w.archive, op, e.source));
                false
            }
        },
        Some(out) if resumable => {
            // Kept in the checkpoint for the rerun: taken apart, so never removed here.
            drop(out.into_parts());
            false
        }
        Some(out) => {
            if let Err(e) = out.discard() {
                o.context.error(ItemError::new(
                    &e.path,
                    "remove the incomplete archive",
                    e.source,
                ));
            }
            false
        }
        None => true,
    };
    let kept = comm.all(kept);
    let mut problems = plan.errors;
    problems.extend(w.problems.into_sorted());
    for e in &problems {
        o.context.error(e);
    }
    let failed = comm.sum(problems.len() as u64);
    if o.context.verbose {
        let line = format!(
            "rank {}: archived {} entries, {} bytes of data; compressed {} {} frames ({} bytes)\n",
            comm.rank(),
            plan.offsets.len(),
            plan.data_bytes,
            written.frames,
            o.codec().map_or("zstd", |c| c.name()),
            written.compressed,
        );
        steal::ordered::in_rank_order(comm, line.into_bytes(), |b| {
            o.context.info(String::from_utf8_lossy(b))
        });
    }
    let report = Report {
        skipped: comm.sum(plan.skipped),
        failed,
        ..base
    };
    let data_total = comm.sum(plan.data_bytes);
    let frames = comm.sum(written.frames);
    let frames_per_rank = if o.codec().is_some() {
        comm.allgather_u64(written.frames)
    } else {
        Vec::new()
    };
    let mut report = if kept {
        Report {
            entries: plan.count,
            archive_entries: plan.count,
            bytes: data_total,
            created: true,
            zstd_frames: frames,
            frames_per_rank,
            compression: o.codec(),
            seconds: started.elapsed().as_secs_f64(),
            failures: o.context.failures(),
            ..report
        }
    } else {
        not_created(comm, o, report, started, interrupted)
    };
    if resumable {
        let done = ended.earlier + comm.sum(ended.now);
        report.stopped = Some(crate::engine::context::Stopped {
            done: done.min(plan.stream_len),
            total: plan.stream_len,
            what: "bytes",
        });
    }
    if let Some(m) = &o.manifest {
        let m = crate::engine::manifest::ManifestOptions {
            base: Vec::new(),
            ..m.clone()
        };
        // Every stored file's data was read into the archive: no file is read again (a
        // SHA-256 file archived in several chunks is read from the source once more).
        let stored = w.names.dest_roots();
        let inverse = Mapping::new(stored.iter().cloned().zip(w.names.source_roots()).collect());
        let reopen = |name: &[u8]| -> io::Result<OwnedFd> {
            if !stored.iter().any(|r| flist::path::is_prefix(r, name)) {
                return Err(io::ErrorKind::NotFound.into());
            }
            open_source(&inverse.dest(name), &o.context.noatime, false)
        };
        let records = w.hashing.take_records();
        let (entries, errors) =
            crate::engine::manifest::entries(comm, &m, records, &plan.hard_links, reopen);
        for e in &errors {
            o.context.error(e);
        }
        let ok =
            report.status() == crate::engine::status::Status::Ok && comm.all(errors.is_empty());
        report.manifest = Some(crate::engine::manifest::publish(
            comm, &o.context, &m, entries, ok,
        ));
    }
    report
}

/// The index member's bytes other than the offsets: its header, the length of its data, the
/// footer that ends the data.
struct IndexTail<'a> {
    header: &'a [u8],
    /// Entries in the whole archive.
    count: u64,
    data_len: u64,
    footer: &'a [u8],
}

/// This rank's piece of the tar stream's index member and end: its entries' offsets, after the
/// member's header on rank 0, before the padding, the footer and the end blocks on the last
/// rank. The pieces of all ranks in rank order are the member and the end blocks, so no rank
/// holds more than its own offsets (formats.md §5).
fn index_part(offsets: &[u64], first: bool, last: bool, tail: &IndexTail<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    if first {
        out.extend_from_slice(tail.header);
    }
    out.extend_from_slice(&index::encode_offsets(offsets));
    if last {
        // Zeros from the last offset to the footer, then the footer and the end blocks.
        let pad = tail.data_len - index::FOOTER - 8 * tail.count;
        out.resize(out.len() + pad as usize, 0);
        out.extend_from_slice(tail.footer);
        out.resize(out.len() + index::END as usize, 0);
    }
    out
}

/// Refuse an archive path that is not a regular file: the archive is renamed over it at the
/// end, which must never replace a device, a directory or a symbolic link (the file it points
/// to would keep its old contents).
fn check_archive_path(archive: &[u8]) -> Result<(), String> {
    match flist::walk::stat_path(archive, false) {
        Err(_) => Ok(()),
        Ok(st) if FileType::from_mode(st.st_mode) == FileType::File => Ok(()),
        Ok(_) => Err(format!(
            "{}: not a regular file; tar -c writes a new archive file (give the path of a \
             regular file, or of one to create)",
            display(archive)
        )),
    }
}

/// Where this run writes the archive until it is complete ([`Output`]): a temporary beside
/// ARCHIVE (`.NAME.HOST.PID.mfu-tmp`, as big as the archive; a run killed outright leaves one
/// behind), or, with a checkpoint, the partial archive in it, kept when the run stops.
struct Temp<'c> {
    /// Its path (every rank).
    path: Vec<u8>,
    /// Its (device, inode), which the other ranks check when they open it.
    id: (u64, u64),
    /// Rank 0's output: published, kept or removed by [`finish`], removed if dropped before.
    output: Option<Output>,
    /// The checkpoint that holds it (`None`: beside the archive).
    checkpoint: Option<&'c Checkpoint>,
}

impl Temp<'_> {
    /// Rank 0: a descriptor of its own on the temporary (`None` on the other ranks).
    fn mine(&self) -> Option<io::Result<OwnedFd>> {
        let out = self.output.as_ref()?;
        let file = out.file().expect("a file output");
        Some(file.try_clone().map(OwnedFd::from))
    }

    /// Another rank: the temporary opened for writing (never through a symlink, and only if
    /// it is still rank 0's file); in a checkpoint, registered so that this rank's marks
    /// follow its writes to the disk.
    fn join(&self) -> io::Result<OwnedFd> {
        let fd = flist::atomic::join(&self.path, OFlags::WRONLY, Some(self.id))
            .map(OwnedFd::from)
            .map_err(|e| e.source)?;
        if let Some(ck) = self.checkpoint {
            ck.durable(Durable::File(Arc::new(fd.try_clone()?)));
        }
        Ok(fd)
    }

    /// Another rank, its writes done: sync them (rank 0's are synced when it publishes), so
    /// that the renamed archive never reads short after a crash; a failure damages it.
    fn sync_mine(&self, fd: BorrowedFd<'_>, w: &Writer) {
        if self.output.is_none() {
            if let Err(e) = rustix::fs::fsync(fd) {
                w.problems
                    .damage(ItemError::new(&w.archive, "sync", e.into()));
            }
        }
    }
}

/// Rank 0 removes what earlier runs killed on this host left beside ARCHIVE (and says so) and
/// creates the temporary archive ([`create_archive`]) beside it, or, given `kept`, creates or
/// adopts the partial archive in the checkpoint ([`resume::partial_output`]); every rank
/// learns its path. A temporary that cannot be made is the same error on every rank.
/// Collective.
fn stage<'c>(
    comm: &dyn Comm,
    o: &Options,
    archive: &[u8],
    kept: Option<resume::Kept<'c>>,
) -> Result<Temp<'c>, Error> {
    let mut output = None;
    let made = if comm.rank() == 0 {
        let (dir_path, base) = flist::atomic::split(archive);
        let mut said = None;
        let created = flist::atomic::open_parent(archive).and_then(|dir| match &kept {
            None => {
                let (out, stale) =
                    Output::in_dir_with(dir.as_fd(), &dir_path, &base, None, |dir, name| {
                        let (fd, s) = create_archive(dir, &dir_path, name, o)?;
                        said = s;
                        Ok(fd)
                    })
                    .map_err(|e| e.source)?;
                say_stale(o, stale);
                Ok(out)
            }
            Some(k) => {
                // A killed run without a checkpoint left its temporary here all the same.
                let stale = flist::atomic::remove_stale(dir.as_fd(), &base);
                say_stale(
                    o,
                    stale
                        .into_iter()
                        .map(|(n, removed)| flist::atomic::Stale {
                            path: flist::atomic::beside(archive, &n),
                            removed,
                        })
                        .collect(),
                );
                let ck_path = k.checkpoint.path();
                resume::partial_output(k, dir.as_fd(), archive, |dir, name| {
                    let (fd, s) = create_archive(dir, ck_path, name, o)?;
                    said = s;
                    Ok(fd)
                })
            }
        });
        created
            .and_then(|out| {
                say_layout(o, &said);
                let shared = (out.path().to_vec(), out.identity()?);
                output = Some(out);
                Ok(Some(shared))
            })
            .map_err(|e| format!("create {}: {e}", display(archive)))
    } else {
        Ok(None)
    };
    let made = crate::engine::setup::agree_setup(comm, made)?;
    let (path, id) = comm.bcast_from(0, &made).expect("rank 0 made it");
    Ok(Temp {
        path,
        id,
        output,
        checkpoint: kept.map(|k| k.checkpoint),
    })
}

/// Tell the user about the temporaries of killed runs that creating the archive's found.
fn say_stale(o: &Options, stale: Vec<flist::atomic::Stale>) {
    for s in stale {
        match s.removed {
            Ok(()) => o.context.error(format_args!(
                "removed {}, the incomplete archive of an earlier run that was killed",
                display(&s.path)
            )),
            Err(e) => o.context.error(ItemError::new(
                &s.path,
                "remove the incomplete archive of an earlier run",
                e,
            )),
        }
    }
}

/// The report of a create that left no archive (no entry counts as archived); rank 0 names
/// the archive as not created, and why.
fn not_created(
    comm: &dyn Comm,
    o: &Options,
    report: Report,
    started: Instant,
    interrupted: bool,
) -> Report {
    if comm.rank() == 0 {
        let why = if interrupted { "interrupted" } else { "failed" };
        o.context.error(format_args!(
            "{}: not created ({why})",
            display(&report.archive)
        ));
    }
    Report {
        created: false,
        interrupted,
        seconds: started.elapsed().as_secs_f64(),
        failures: o.context.failures(),
        ..report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::codec::zstd as seekable;

    fn no_prior() -> ledger::Ledger<'static> {
        ledger::Ledger::new(std::iter::empty(), None)
    }

    fn member(size: u64) -> Member {
        Member {
            header: HeaderBytes::Encoded(vec![0; 512]),
            src: b"/src".to_vec(),
            size,
            stamp: Stamp::default(),
            inline: true,
        }
    }

    /// The archive byte ranges a segment writes.
    fn spans(seg: &Segment, out: &mut Vec<(u64, u64)>) {
        match seg {
            Segment::Group(segs) => segs.iter().for_each(|s| spans(s, out)),
            s => out.push((s.at(), s.at() + s.len())),
        }
    }

    #[test]
    fn absolute_paths_inside_the_base_are_stored_relative_to_it_others_without_the_slash() {
        let name = |p: &str, base: &str| {
            let abs = flist::path::normalize(p.as_bytes(), base.as_bytes());
            let stored = stored_name(p.as_bytes(), &abs, base.as_bytes()).to_vec();
            String::from_utf8(stored).unwrap()
        };
        assert_eq!(name("/abs/path/dir", "/abs/path"), "dir");
        assert_eq!(name("/abs/path/dir/sub/", "/abs/path"), "dir/sub");
        assert_eq!(name("/abs/path", "/abs/path"), "");
        assert_eq!(name("/abs/pathology/x", "/abs/path"), "abs/pathology/x");
        assert_eq!(name("/elsewhere/x", "/abs/path"), "elsewhere/x");
        assert_eq!(name("//elsewhere/x", "/abs/path"), "elsewhere/x");
        assert_eq!(name("/x/y", "/"), "x/y");
        assert_eq!(name("dir/sub", "/abs/path"), "dir/sub");
    }

    #[test]
    fn on_lustre_every_stripe_is_written_by_one_work_item_across_ranks() {
        let stripe = 64 << 10;
        let sizes: Vec<u64> = (0..400u64)
            .map(|i| match i % 10 {
                0 => 200_000,
                1 => 70_000,
                _ => (i * 997) % 9000,
            })
            .collect();
        let mut at = 0;
        let laid_all: Vec<(u64, u64)> = sizes
            .iter()
            .map(|&s| {
                let l = (at, s);
                at += 512 + round_up(s);
                l
            })
            .collect();
        let total = at;
        for ranks in [1, 3, 4] {
            let items = steal::local::run(ranks, |comm| {
                let n = laid_all.len();
                let (a, b) = (n * comm.rank() / ranks, n * (comm.rank() + 1) / ranks);
                let laid: Vec<Laid> = laid_all[a..b]
                    .iter()
                    .map(|&(at, s)| Laid {
                        at,
                        member: Member {
                            inline: s <= SMALL_FILE,
                            ..member(s)
                        },
                    })
                    .collect();
                let segs = segments(laid, stripe, &no_prior());
                let region = segs.iter().fold((u64::MAX, 0), |(x, y), s| {
                    (x.min(s.at()), y.max(s.at() + s.len()))
                });
                let region = if region.0 > region.1 { (0, 0) } else { region };
                crate::tar::create::align::align(comm, segs, region, stripe)
                    .iter()
                    .map(|seg| {
                        let mut v = Vec::new();
                        spans(seg, &mut v);
                        v
                    })
                    .collect::<Vec<_>>()
            });
            let items: Vec<Vec<(u64, u64)>> = items.into_iter().flatten().collect();
            // Every byte written once.
            let mut all: Vec<(u64, u64)> = items.iter().flatten().copied().collect();
            all.sort();
            let mut covered = 0;
            for (a, b) in all {
                assert_eq!(a, covered, "{ranks} ranks: gap or overlap at {a}");
                covered = b;
            }
            assert_eq!(covered, total);
            // Every stripe by one item.
            let mut writer: HashMap<u64, usize> = HashMap::new();
            for (i, item) in items.iter().enumerate() {
                for &(a, b) in item.iter().filter(|(a, b)| a < b) {
                    for k in a / stripe..=(b - 1) / stripe {
                        let w = *writer.entry(k).or_insert(i);
                        assert_eq!(w, i, "{ranks} ranks: stripe {k} in items {w} and {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn big_files_are_cut_at_chunk_aligned_archive_offsets_and_small_ones_batched() {
        let chunk = 4 << 20;
        let sizes = [10, 3 << 20, 9 << 20, 0, 100];
        let mut at = 0;
        let laid: Vec<Laid> = sizes
            .iter()
            .map(|&s| {
                let l = Laid {
                    at,
                    member: member(s),
                };
                at += 512 + round_up(s);
                l
            })
            .collect();
        let segs = segments(laid, chunk, &no_prior());
        let mut chunk_bytes = 0;
        let mut run_members = 0;
        for s in &segs {
            match s {
                Segment::Chunk { at, len, .. } => {
                    chunk_bytes += len;
                    // Every chunk ends on a chunk boundary of the archive or at its file's end.
                    assert!((at + len) % chunk == 0 || *len < chunk, "{at} {len}");
                    assert!(at / chunk == (at + len - 1) / chunk, "one stripe per chunk");
                }
                Segment::Run { members, .. } => run_members += members.len(),
                _ => unreachable!("segments() makes runs and chunks"),
            }
        }
        assert_eq!(
            chunk_bytes,
            (3 << 20) + (9 << 20),
            "the two big files' data"
        );
        assert_eq!(run_members, sizes.len(), "every header goes out in a run");
        // Runs and chunks tile the stream without gaps or overlaps.
        let mut spans: Vec<(u64, u64)> = segs.iter().map(|s| (s.at(), s.at() + s.len())).collect();
        spans.sort();
        let mut covered = 0;
        for (a, b) in spans {
            assert!(a >= covered);
            covered = b;
        }
    }

    #[test]
    fn a_header_kept_unencoded_travels_and_is_written_as_its_encoding() {
        let h = Header {
            path: b"dir/file".to_vec(),
            kind: Kind::File,
            mode: 0o640,
            uid: 5,
            gid: 6,
            uname: b"u".to_vec(),
            gname: b"g".to_vec(),
            size: 3,
            mtime: 1_700_000_000,
            mtime_nsec: 5,
            link: Vec::new(),
            dev_major: 0,
            dev_minor: 0,
            xattrs: Vec::new(),
            projid: Default::default(),
        };
        let mut want = Vec::new();
        let len = h.encode(&mut want);
        let lazy = HeaderBytes::Lazy {
            header: Box::new(h),
            len,
        };
        let mut got = b"before".to_vec();
        lazy.write_to(&mut got);
        assert_eq!(&got[6..], &want[..]);
        let seg = Segment::Run {
            at: 0,
            members: vec![Member {
                header: lazy,
                ..member(3)
            }],
        };
        let wire_bytes = typed::encode(&seg);
        let Segment::Run { members, .. } = typed::decode(&wire_bytes).unwrap() else {
            panic!("a run")
        };
        assert!(matches!(&members[0].header, HeaderBytes::Encoded(b) if *b == want));
        assert_eq!(members[0].len(), (want.len() + 512) as u64);
    }

    #[test]
    fn the_ranks_pieces_of_the_index_member_are_the_whole_member() {
        let offsets: Vec<u64> = (0..1000u64).map(|i| i * 1024).collect();
        let total = 1000 * 1024;
        let mut header = Vec::new();
        index::member_header(b"A.tar.dtaridx", 1000, 7).encode(&mut header);
        let data_len = index::data_len(1000);
        let footer = index::footer(1000, total, header.len() as u64 + data_len);
        let tail = IndexTail {
            header: &header,
            count: 1000,
            data_len,
            footer: &footer,
        };
        // What the last rank wrote before the pieces: the header, the data (offsets, zeros to
        // the footer, the footer), the end blocks.
        let mut whole = header.clone();
        whole.extend_from_slice(&index::encode_offsets(&offsets));
        whole.resize(header.len() + (data_len - index::FOOTER) as usize, 0);
        whole.extend_from_slice(&footer);
        whole.resize(whole.len() + index::END as usize, 0);
        assert_eq!(
            whole.len() as u64,
            header.len() as u64 + data_len + index::END
        );
        for ranks in [1usize, 2, 3, 16, 1500] {
            let mut joined = Vec::new();
            for r in 0..ranks {
                let (a, b) = (1000 * r / ranks, 1000 * (r + 1) / ranks);
                joined.extend(index_part(&offsets[a..b], r == 0, r + 1 == ranks, &tail));
            }
            assert!(joined == whole, "{ranks} ranks");
        }
    }

    #[test]
    fn a_seek_table_written_in_pieces_is_the_table() {
        let frames: Vec<seekable::FrameSizes> = (0..50u32)
            .map(|i| seekable::FrameSizes {
                compressed: i * 3 + 1,
                decompressed: i * 7,
                checksum: i.wrapping_mul(0x9E37_79B9),
            })
            .collect();
        let want = seekable::encode_table(&frames);
        let n = frames.len() as u64;
        let mut got = vec![0xAAu8; seekable::table_len(n, true) as usize];
        got[..8].copy_from_slice(&seekable::table_head(n, true));
        for (k, piece) in frames.chunks(7).enumerate() {
            let at = seekable::table_entry_at(7 * k as u64) as usize;
            let bytes = seekable::table_entries(piece, true);
            got[at..at + bytes.len()].copy_from_slice(&bytes);
        }
        let end = got.len();
        got[end - seekable::TABLE_FOOTER as usize..]
            .copy_from_slice(&seekable::table_footer(n, true));
        assert_eq!(got, want);
        assert!(seekable::table_fits(1 << 20));
        assert!(!seekable::table_fits(1 << 30));
    }

    #[test]
    fn segments_travel_between_ranks_unchanged() {
        let segs = segments(
            vec![Laid {
                at: 0,
                member: member(5),
            }],
            1 << 20,
            &no_prior(),
        );
        let bytes = typed::encode(&segs[0]);
        let back: Segment = typed::decode(&bytes).unwrap();
        assert_eq!(bytes, typed::encode(&back));
        // Garbage or a cut message is an error, never a panic.
        assert!(typed::decode::<Segment>(&bytes[..bytes.len() - 1]).is_err());
        assert!(typed::decode::<Segment>(&[9, 1, 2]).is_err());
        assert_eq!(back.len(), 1024);
    }
}
