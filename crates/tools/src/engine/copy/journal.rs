//! Resume inside huge files: a journal per destination file of the chunks already complete.
//!
//! A copy of a file of at least [`MIN_BYTES`] split over several chunks keeps, beside the
//! destination `DIR/NAME`, a side file `DIR/.NAME.mfu-partial`: a header naming the source
//! (path, device, inode, size, mtime and ctime in s and ns), the destination's (device, inode),
//! the chunk size and a random nonce, then one 8-byte slot per chunk. A rerun (`sync`, or `cp`
//! onto the same destination) that finds a journal it can trust copies only the chunks whose
//! slot is not marked; the journal is removed just before the file gets its final metadata.
//!
//! Why a side file and not an extended attribute: user xattrs are missing on some file systems
//! (NFS before 4.2, Lustre without `user_xattr`, older tmpfs), ext4 caps a value at one block
//! (4 KiB: 32 Ki chunks as a bitmap, while a 4 TiB file of 4 MiB Lustre stripes has 1 Mi
//! chunks), and an xattr is rewritten whole, so ranks on several nodes completing chunks of one
//! file would have to read-modify-write it in turn. In the side file every chunk has its own
//! slot at a fixed offset, written once by the one rank that copied the chunk: no lock, no
//! read-modify-write, any number of ranks and nodes at once, any file system.
//!
//! Order and durability: a slot is marked only after the destination's data is durable
//! (`fdatasync` of the destination, then the mark). A marker thread per process does both, off
//! the workers' path (one `fdatasync` per file for the marks queued together), so a copy does
//! not wait for the disk chunk by chunk; it runs at most `MARKS_QUEUED` chunks ahead of it. A mark that is lost (a crash before it
//! reached the disk) only makes a rerun copy that chunk again; a mark can never precede its
//! data. The header and the marks themselves are not synced: a journal left torn by a crash
//! fails its checksum or has unmarked slots, which again only costs copying more. A mark is
//! not a constant: it is a hash of the chunk's number keyed by the journal's nonce, so stale
//! blocks (another journal's marks, a file system that shows old data after a crash) never
//! read as "done".
//!
//! Trust: a journal is used only when it is a regular file with one link, owned by the user
//! running the copy, whose header checksum holds and names this very source path with the
//! source's current (device, inode, size, mtime, ctime); and when the destination is a regular
//! file with one link, owned by that user, whose (device, inode) is the header's, no larger
//! than the source, and holding every byte the marks claim. Anything else is copied whole: a
//! source changed since (a rewrite that kept size and mtime, as `touch -r`, `cp -p`, `tar -x`
//! or `rsync --inplace` do, still moves the ctime, which no user can set back), a journal
//! planted beside an unrelated file or copied with a tree, a destination hard-linked
//! elsewhere, a journal of an older format (version 1 did not record the ctime). A file whose
//! journal is not trusted behaves as without one. Failures to write a journal or a mark are
//! not failures of the copy (the data is right; only a later resume would have less to go
//! on): they are silent.
//!
//! Any name can be a user's: a source tree may hold `NAME` and `.NAME.mfu-partial` both (a tree
//! copied with its journals, or by chance). The engine then keeps no journal for `NAME`
//! (`super::resume::users_name`): the name is the user's file's, copied as any other, and
//! never created, read, marked, rewritten or removed as a journal.
//!
//! The partial file never carries the source's size and mtime before it is complete: it is
//! created with new times and gets the source's mtime only with its final metadata, so sync's
//! size+mtime test always sees it as different.

use flist::at::At;
use flist::Meta;
use rustix::fs::OFlags;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Files smaller than this (bytes) keep no journal: copying them again costs little.
pub const MIN_BYTES: u64 = 64 << 20;

/// The smallest file (bytes) that keeps a journal in this process: [`MIN_BYTES`], or the value
/// of the test knob `MFU_RS_TEST_JOURNAL_MIN_BYTES` (read once), which lets tests and the
/// torture harness journal small files (copies of a few MiB instead of hundreds).
pub fn min_bytes() -> u64 {
    static MIN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MIN.get_or_init(|| {
        std::env::var("MFU_RS_TEST_JOURNAL_MIN_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(MIN_BYTES)
    })
}

/// The first bytes of a journal (format version 2: the source's ctime recorded).
const MAGIC: &[u8; 8] = b"MFUPART\x02";

/// The first bytes of a journal of format version 1 (no ctime): never trusted, but known as a
/// journal (of its source path) so that it is removed or replaced like a stale one.
const MAGIC_V1: &[u8; 8] = b"MFUPART\x01";

/// What a journal's name ends with.
pub const SUFFIX: &[u8] = b".mfu-partial";

/// Bytes of the fixed part of the header: the magic and 14 little-endian u64 (header length,
/// chunk size, chunks, nonce, source device, inode, size, mtime s, mtime ns, destination device,
/// inode, source path length, ctime s, ctime ns); the path follows (padded to 8 bytes), then
/// an XXH64 of all that.
const FIXED: usize = 8 + 14 * 8;

/// [`FIXED`] of version 1: the same without the two ctime fields.
const FIXED_V1: usize = 8 + 12 * 8;

/// Largest header read (bytes): a path of any length the engine handles fits.
const MAX_HEADER: u64 = 1 << 20;

/// The journal of the destination file `dst` (absolute, normalised): `.NAME.mfu-partial`
/// beside it.
pub fn path_of(dst: &[u8]) -> Vec<u8> {
    let mut p = flist::path::parent(dst).to_vec();
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.push(b'.');
    p.extend_from_slice(flist::path::basename(dst));
    p.extend_from_slice(SUFFIX);
    p
}

/// What identifies the version of a source file a journal was written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// Size, bytes.
    pub size: u64,
    /// Modification time, seconds.
    pub mtime: i64,
    /// Modification time, nanoseconds.
    pub mtime_nsec: u32,
    /// Status change time, seconds: moves with every write (and every chmod, chown, link),
    /// and, unlike the mtime, cannot be set back by the user.
    pub ctime: i64,
    /// Status change time, nanoseconds.
    pub ctime_nsec: u32,
}

impl SourceId {
    /// The identity in a stat record.
    pub fn of(m: &Meta) -> SourceId {
        SourceId {
            dev: m.dev,
            ino: m.ino,
            size: m.size,
            mtime: m.mtime,
            mtime_nsec: m.mtime_nsec,
            ctime: m.ctime,
            ctime_nsec: m.ctime_nsec,
        }
    }
}

/// A journal's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Bytes per chunk.
    pub chunk_size: u64,
    /// Chunks of the file (slots in the journal).
    pub chunks: u64,
    /// Keys the marks (random per journal).
    pub nonce: u64,
    /// The source's identity.
    pub source: SourceId,
    /// The destination's (device, inode).
    pub dest: (u64, u64),
    /// The source's path.
    pub path: Vec<u8>,
    /// Read from a journal of format version 1 (no ctime: its `source` can't be checked).
    pub old: bool,
}

impl Header {
    /// A new journal's header (a fresh nonce) for copying `src` (`path`) in chunks of
    /// `chunk_size` bytes to the file `dest` ((device, inode)).
    pub fn new(path: &[u8], src: SourceId, dest: (u64, u64), chunk_size: u64) -> Header {
        Header {
            chunk_size,
            chunks: src.size.div_ceil(chunk_size.max(1)),
            nonce: nonce(dest),
            source: src,
            dest,
            path: path.to_vec(),
            old: false,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let padded = self.path.len().div_ceil(8) * 8;
        let len = FIXED + padded + 8;
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(MAGIC);
        let s = &self.source;
        for v in [
            len as u64,
            self.chunk_size,
            self.chunks,
            self.nonce,
            s.dev,
            s.ino,
            s.size,
            s.mtime as u64,
            u64::from(s.mtime_nsec),
            self.dest.0,
            self.dest.1,
            self.path.len() as u64,
            s.ctime as u64,
            u64::from(s.ctime_nsec),
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.path);
        out.resize(FIXED + padded, 0);
        let sum = xxhash_rust::xxh64::xxh64(&out, 0);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// The header at the start of `bytes` and its length, when it is one (magic, sizes,
    /// checksum); a version 1 header reads with `old` set and no ctime.
    fn decode(bytes: &[u8]) -> Option<(Header, usize)> {
        let num = |i: usize| -> Option<u64> {
            let at = 8 + 8 * i;
            Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
        };
        let old = match bytes.get(..8)? {
            m if m == MAGIC => false,
            m if m == MAGIC_V1 => true,
            _ => return None,
        };
        let fixed = if old { FIXED_V1 } else { FIXED };
        let len = usize::try_from(num(0)?).ok()?;
        let path_len = usize::try_from(num(11)?).ok()?;
        if len != fixed + path_len.div_ceil(8) * 8 + 8 || bytes.len() < len {
            return None;
        }
        let sum = u64::from_le_bytes(bytes[len - 8..len].try_into().ok()?);
        if xxhash_rust::xxh64::xxh64(&bytes[..len - 8], 0) != sum {
            return None;
        }
        let h = Header {
            chunk_size: num(1)?,
            chunks: num(2)?,
            nonce: num(3)?,
            source: SourceId {
                dev: num(4)?,
                ino: num(5)?,
                size: num(6)?,
                mtime: num(7)? as i64,
                mtime_nsec: u32::try_from(num(8)?).ok()?,
                ctime: if old { 0 } else { num(12)? as i64 },
                ctime_nsec: if old {
                    0
                } else {
                    u32::try_from(num(13)?).ok()?
                },
            },
            dest: (num(9)?, num(10)?),
            path: bytes[fixed..fixed + path_len].to_vec(),
            old,
        };
        let sane = h.chunk_size > 0 && h.chunks == h.source.size.div_ceil(h.chunk_size);
        sane.then_some((h, len))
    }

    /// The slot value that marks chunk `k` complete (never 0, the value of an unmarked slot).
    fn mark(&self, k: u64) -> u64 {
        xxhash_rust::xxh64::xxh64(&k.to_le_bytes(), self.nonce) | 1
    }

    /// Byte range of chunk `k`.
    fn range(&self, k: u64) -> (u64, u64) {
        let start = k * self.chunk_size;
        (start, (start + self.chunk_size).min(self.source.size))
    }
}

/// A random 64-bit value: std's per-process random hash keys (each `RandomState` differs),
/// mixed with the time and the destination's identity.
fn nonce(dest: (u64, u64)) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.write_u64(dest.0);
    h.write_u64(dest.1);
    h.write_u32(std::process::id());
    h.finish()
}

/// A journal opened and read: its file, header, header length and its marked chunks' byte
/// ranges (merged, ascending).
struct Read {
    file: File,
    header: Header,
    len: usize,
}

impl Read {
    /// The byte ranges of the chunks marked complete, merged and ascending.
    fn done(&self) -> io::Result<Vec<(u64, u64)>> {
        let h = &self.header;
        let end = self.file.metadata()?.len();
        let slots = end.saturating_sub(self.len as u64) / 8;
        let n = slots.min(h.chunks);
        let mut raw = vec![0u8; (n * 8) as usize];
        self.file.read_exact_at(&mut raw, self.len as u64)?;
        let mut done: Vec<(u64, u64)> = Vec::new();
        for (k, slot) in raw.chunks_exact(8).enumerate() {
            let k = k as u64;
            if u64::from_le_bytes(slot.try_into().expect("8 bytes")) != h.mark(k) {
                continue;
            }
            let (s, e) = h.range(k);
            match done.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => done.push((s, e)),
            }
        }
        Ok(done)
    }
}

/// The current user: journals and partial files are theirs.
fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Open the journal at `at` and read its header, when it looks like one (a regular file with
/// one link, owned by the current user, magic and checksum right). `Ok(None)`: nothing there,
/// or not a journal.
fn read(at: &At, write: bool) -> io::Result<Option<Read>> {
    let access = if write { OFlags::RDWR } else { OFlags::RDONLY };
    let fd = match at.open(access | OFlags::NOFOLLOW | OFlags::NONBLOCK, 0) {
        Ok(fd) => fd,
        // Nothing there, or nothing this user's copy made (a symlink, a directory, another
        // user's file): not a journal, left alone.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(
                    libc::ENOENT
                        | libc::ELOOP
                        | libc::EACCES
                        | libc::EPERM
                        | libc::EISDIR
                        | libc::ENXIO
                        | libc::ENOTDIR
                        | libc::ENAMETOOLONG
                )
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let st = rustix::fs::fstat(&fd)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_nlink != 1 || st.st_uid != euid() {
        return Ok(None);
    }
    let file = File::from(fd);
    let mut first = [0u8; 16];
    if (st.st_size as u64) < FIXED_V1 as u64 || file.read_exact_at(&mut first, 0).is_err() {
        return Ok(None);
    }
    let len = u64::from_le_bytes(first[8..16].try_into().expect("8 bytes"));
    let magic = &first[..8];
    if (magic != MAGIC && magic != MAGIC_V1) || len > MAX_HEADER || len > st.st_size as u64 {
        return Ok(None);
    }
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(Header::decode(&bytes).map(|(header, len)| Read { file, header, len }))
}

/// What a rerun may keep of a partial destination file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumable {
    /// Byte ranges already copied (merged, ascending, each `[start, end)`).
    pub done: Vec<(u64, u64)>,
    /// The destination file's (device, inode) the journal was written for.
    pub dest: (u64, u64),
}

impl Resumable {
    /// Bytes already copied.
    pub fn bytes(&self) -> u64 {
        self.done.iter().map(|(s, e)| e - s).sum()
    }
}

/// What is beside a destination file.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// No journal (or something else under its name: left alone).
    Nothing,
    /// A journal of a copy of this source that can't be trusted (source changed, destination
    /// replaced or hard-linked, ...): copy whole, the journal may go.
    Stale,
    /// A journal to resume from.
    Trusted(Resumable),
}

/// Look at the journal (`journal`) of the destination `dest` copied from the source `path`
/// whose walked identity is `src`.
pub fn probe(dest: &At, journal: &At, path: &[u8], src: SourceId) -> Found {
    let Ok(Some(j)) = read(journal, false) else {
        return Found::Nothing;
    };
    if j.header.path != path {
        return Found::Nothing;
    }
    if j.header.old || j.header.source != src {
        return Found::Stale;
    }
    let Ok(st) = dest.lstat() else {
        return Found::Stale;
    };
    let dest_ok = st.st_mode & libc::S_IFMT == libc::S_IFREG
        && st.st_nlink == 1
        && st.st_uid == euid()
        && (st.st_dev, st.st_ino) == j.header.dest
        && st.st_size as u64 <= src.size;
    if !dest_ok {
        return Found::Stale;
    }
    match j.done() {
        Ok(done) if done.iter().all(|&(_, e)| e <= st.st_size as u64) => {
            Found::Trusted(Resumable {
                done,
                dest: j.header.dest,
            })
        }
        _ => Found::Stale,
    }
}

/// Write the journal `journal` with `header`, the chunks wholly inside `done` marked: created,
/// or rewritten when a journal of the same source path is there already. Anything else under
/// the name is left alone (an error).
pub fn write(journal: &At, header: &Header, done: &[(u64, u64)]) -> io::Result<()> {
    let create = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
    let file = match journal.open(create, 0o600) {
        Ok(fd) => File::from(fd),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => match read(journal, true)? {
            Some(old) if old.header.path == header.path => old.file,
            _ => return Err(io::Error::from_raw_os_error(libc::EEXIST)),
        },
        Err(e) => return Err(e),
    };
    let mut bytes = header.encode();
    let len = bytes.len();
    bytes.resize(len + 8 * header.chunks as usize, 0);
    for k in 0..header.chunks {
        let (s, e) = header.range(k);
        if done.iter().any(|&(ds, de)| ds <= s && e <= de) {
            let at = len + 8 * k as usize;
            bytes[at..at + 8].copy_from_slice(&header.mark(k).to_le_bytes());
        }
    }
    file.set_len(0)?;
    file.write_all_at(&bytes, 0)
}

/// A chunk whose mark waits for its data to be durable: the destination and journal open,
/// where the mark goes and what it is.
pub struct Mark {
    dest: File,
    journal: File,
    at: u64,
    value: u64,
}

/// Chunk `k` of the copy of `path` (identity `src`, chunk size `chunk_size`) landed in `dest`:
/// its mark, if `journal` is the journal of this copy (`Ok(None)` otherwise), to be written by
/// [`Mark::submit`] once the data is durable.
pub fn mark(
    dest: &At,
    journal: &At,
    (path, src): (&[u8], SourceId),
    chunk_size: u64,
    k: u64,
) -> io::Result<Option<Mark>> {
    let d = File::from(dest.open(OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK, 0)?);
    let st = rustix::fs::fstat(&d)?;
    let Some(j) = read(journal, true)? else {
        return Ok(None);
    };
    let h = &j.header;
    if h.old
        || h.path != path
        || h.source != src
        || h.dest != (st.st_dev, st.st_ino)
        || h.chunk_size != chunk_size
        || k >= h.chunks
    {
        return Ok(None);
    }
    Ok(Some(Mark {
        dest: d,
        at: j.len as u64 + 8 * k,
        value: h.mark(k),
        journal: j.file,
    }))
}

/// Marks waiting for the marker thread at most: a worker that would queue more waits (so the
/// copy runs at most this many chunks ahead of the disk; 2 descriptors each).
const MARKS_QUEUED: usize = 16;

/// The marker thread's queue and how many marks it has not finished.
struct Marker {
    queue: std::sync::mpsc::SyncSender<Mark>,
    busy: std::sync::Mutex<u64>,
    idle: std::sync::Condvar,
}

/// The marker thread of this process, started on first use: it makes each chunk's data
/// durable (`fdatasync`, once per file for the marks queued together) and then writes its
/// mark, off the workers' path, so that a copy does not wait for the disk chunk by chunk.
fn marker() -> &'static Marker {
    static MARKER: std::sync::OnceLock<Marker> = std::sync::OnceLock::new();
    MARKER.get_or_init(|| {
        let (queue, rx) = std::sync::mpsc::sync_channel::<Mark>(MARKS_QUEUED);
        std::thread::Builder::new()
            .name("mfu-journal".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let batch: Vec<Mark> = std::iter::once(first).chain(rx.try_iter()).collect();
                    write_marks(&batch);
                    let m = marker();
                    let mut busy = m.busy.lock().unwrap_or_else(|p| p.into_inner());
                    *busy -= batch.len() as u64;
                    m.idle.notify_all();
                }
            })
            .expect("start the journal's marker thread");
        Marker {
            queue,
            busy: std::sync::Mutex::new(0),
            idle: std::sync::Condvar::new(),
        }
    })
}

/// Sync each destination of `batch` once, then write the marks of those that synced. A
/// journal removed meanwhile (its file completed) is skipped.
fn write_marks(batch: &[Mark]) {
    let mut synced: std::collections::HashMap<(u64, u64), bool> = Default::default();
    for m in batch {
        let live = rustix::fs::fstat(&m.journal).is_ok_and(|st| st.st_nlink > 0);
        let Ok(st) = rustix::fs::fstat(&m.dest) else {
            continue;
        };
        let ok = *synced
            .entry((st.st_dev, st.st_ino))
            .or_insert_with(|| live && m.dest.sync_data().is_ok());
        if ok && live && m.journal.write_all_at(&m.value.to_le_bytes(), m.at).is_ok() {
            kill_seam();
        }
    }
}

impl Mark {
    /// Queue the mark: written once the destination's data is durable (the data before the
    /// word that it is there). Waits while `MARKS_QUEUED` marks are queued.
    pub fn submit(self) {
        let m = marker();
        *m.busy.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        if m.queue.send(self).is_err() {
            *m.busy.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        }
    }
}

/// Wait until every mark queued is written (or dropped): after an interruption, so that a
/// rerun finds all the chunks that landed.
pub fn flush() {
    let m = marker();
    let mut busy = m.busy.lock().unwrap_or_else(|p| p.into_inner());
    while *busy > 0 {
        busy = m.idle.wait(busy).unwrap_or_else(|p| p.into_inner());
    }
}

/// Whether `journal` is a journal (any version) of the source `path`.
pub fn is_of(journal: &At, path: &[u8]) -> io::Result<bool> {
    Ok(read(journal, false)?.is_some_and(|j| j.header.path == path))
}

/// Remove the journal `journal` if it is one of a copy of `path` (a file's data is complete,
/// or it is copied again whole). Nothing there is not an error.
pub fn remove(journal: &At, path: &[u8]) -> io::Result<()> {
    match read(journal, false)? {
        Some(j) if j.header.path == path => match journal.remove(false) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r,
        },
        _ => Ok(()),
    }
}

/// The part of the chunk `[offset, offset + length)` not inside `done` (merged, ascending),
/// as one range from its first missing byte to its last; `None` when all of it is done.
pub fn narrow(offset: u64, length: u64, done: &[(u64, u64)]) -> Option<(u64, u64)> {
    let end = offset + length;
    let mut first = None;
    let mut last = offset;
    let mut at = offset;
    for &(s, e) in done {
        if e <= at || s >= end {
            continue;
        }
        if s > at {
            first.get_or_insert(at);
            last = s.min(end);
        }
        at = at.max(e);
        if at >= end {
            break;
        }
    }
    if at < end {
        first.get_or_insert(at);
        last = end;
    }
    first.map(|f| (f, last - f))
}

/// What a journal says, for tests and tools that look at one (`journal`: its path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Bytes per chunk.
    pub chunk_size: u64,
    /// Chunks of the file.
    pub chunks: u64,
    /// Chunks marked complete.
    pub done: u64,
}

/// Read the journal at `journal` (a path). `Ok(None)`: not a journal.
pub fn inspect(journal: &[u8]) -> io::Result<Option<Summary>> {
    let Some(j) = read(&At::new(journal)?, false)? else {
        return Ok(None);
    };
    let done = j
        .done()?
        .iter()
        .map(|&(s, e)| (e - s).div_ceil(j.header.chunk_size))
        .sum();
    Ok(Some(Summary {
        chunk_size: j.header.chunk_size,
        chunks: j.header.chunks,
        done,
    }))
}

/// The test seam: with `MFU_RS_TEST_KILL_AFTER_MARKS=N` in the environment, the process kills
/// itself with SIGKILL (as `kill -9` would, no clean-up) right after its N-th mark, so tests
/// and the bench leave a partial file at a known point.
fn kill_seam() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LIMIT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    static MARKS: AtomicU64 = AtomicU64::new(0);
    let limit = LIMIT.get_or_init(|| {
        std::env::var("MFU_RS_TEST_KILL_AFTER_MARKS")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(n) = limit {
        if MARKS.fetch_add(1, Ordering::SeqCst) + 1 >= *n {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_sits_beside_its_file_hidden() {
        assert_eq!(path_of(b"/d/big"), b"/d/.big.mfu-partial");
        assert_eq!(path_of(b"/big"), b"/.big.mfu-partial");
    }

    #[test]
    fn a_header_reads_back_and_a_changed_byte_is_refused() {
        let src = SourceId {
            dev: 1,
            ino: 2,
            size: 10 << 20,
            mtime: -5,
            mtime_nsec: 999,
            ctime: 7,
            ctime_nsec: 8,
        };
        let h = Header::new(b"/src/a file", src, (3, 4), 1 << 20);
        assert_eq!(h.chunks, 10);
        let bytes = h.encode();
        assert_eq!(bytes.len() % 8, 0);
        assert_eq!(Header::decode(&bytes), Some((h.clone(), bytes.len())));
        for i in [0, 9, 40, FIXED + 3, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert_eq!(Header::decode(&bad), None, "byte {i} changed");
        }
        assert_ne!(h.mark(0), 0);
        assert_ne!(h.mark(0), h.mark(1));
        let other = Header::new(b"/src/a file", src, (3, 4), 1 << 20);
        assert_ne!(h.mark(0), other.mark(0), "each journal keys its marks");
    }

    /// The bytes of a version 1 header (no ctime) for `h`, as the previous format wrote it.
    fn encode_v1(h: &Header) -> Vec<u8> {
        let padded = h.path.len().div_ceil(8) * 8;
        let len = FIXED_V1 + padded + 8;
        let mut out = MAGIC_V1.to_vec();
        let s = &h.source;
        for v in [
            len as u64,
            h.chunk_size,
            h.chunks,
            h.nonce,
            s.dev,
            s.ino,
            s.size,
            s.mtime as u64,
            u64::from(s.mtime_nsec),
            h.dest.0,
            h.dest.1,
            h.path.len() as u64,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&h.path);
        out.resize(FIXED_V1 + padded, 0);
        let sum = xxhash_rust::xxh64::xxh64(&out, 0);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// A journal of format 1 (which did not record the ctime) is never trusted, not even with
    /// every chunk marked, but is known as this copy's: removed, or replaced by a new one.
    #[test]
    fn a_journal_of_the_old_format_is_stale_and_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().as_os_str().as_encoded_bytes().to_vec();
        let dst = [dir.as_slice(), b"/big"].concat();
        let jpath = path_of(&dst);
        std::fs::write(flist::path::as_path(&dst), vec![7u8; 2 << 20]).unwrap();
        let st = rustix::fs::stat(flist::path::as_path(&dst)).unwrap();
        let id = (st.st_dev, st.st_ino);
        let src = SourceId {
            dev: 9,
            ino: 9,
            size: 2 << 20,
            mtime: 1,
            mtime_nsec: 2,
            ctime: 0,
            ctime_nsec: 0,
        };
        let h = Header::new(b"/s/big", src, id, 1 << 20);
        let mut bytes = encode_v1(&h);
        let (back, len) = Header::decode(&bytes).expect("a version 1 header reads");
        assert!(back.old && back.path == h.path && len == bytes.len());
        for k in 0..2 {
            bytes.extend_from_slice(&h.mark(k).to_le_bytes());
        }
        std::fs::write(flist::path::as_path(&jpath), &bytes).unwrap();
        let (d, j) = (At::new(&dst).unwrap(), At::new(&jpath).unwrap());
        assert_eq!(probe(&d, &j, b"/s/big", src), Found::Stale);
        assert!(mark(&d, &j, (b"/s/big", src), 1 << 20, 0)
            .unwrap()
            .is_none());
        // Rewritten in the new format (this copy's own journal), then trusted.
        write(&j, &h, &[(0, 1 << 20)]).unwrap();
        let want = Resumable {
            done: vec![(0, 1 << 20)],
            dest: id,
        };
        assert_eq!(probe(&d, &j, b"/s/big", src), Found::Trusted(want));
        std::fs::write(flist::path::as_path(&jpath), &bytes).unwrap();
        remove(&j, b"/s/big").unwrap();
        assert!(!flist::path::as_path(&jpath).exists());
    }

    #[test]
    fn narrowing_keeps_only_the_missing_span() {
        let done = [(0, 10), (20, 30)];
        assert_eq!(narrow(0, 10, &done), None);
        assert_eq!(narrow(0, 20, &done), Some((10, 10)));
        assert_eq!(narrow(5, 30, &done), Some((10, 25)));
        assert_eq!(narrow(20, 10, &done), None);
        assert_eq!(narrow(30, 10, &done), Some((30, 10)));
        assert_eq!(narrow(25, 10, &[]), Some((25, 10)));
        assert_eq!(narrow(8, 14, &done), Some((10, 10)));
    }

    #[test]
    fn marks_are_found_only_for_their_journal_and_data_that_is_there() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().as_os_str().as_encoded_bytes().to_vec();
        let dst = [dir.as_slice(), b"/big"].concat();
        let jpath = path_of(&dst);
        std::fs::write(flist::path::as_path(&dst), vec![7u8; 3 << 20]).unwrap();
        let st = rustix::fs::stat(flist::path::as_path(&dst)).unwrap();
        let id = (st.st_dev, st.st_ino);
        let src = SourceId {
            dev: 9,
            ino: 9,
            size: 5 << 20,
            mtime: 1,
            mtime_nsec: 2,
            ctime: 3,
            ctime_nsec: 4,
        };
        let (d, j) = (At::new(&dst).unwrap(), At::new(&jpath).unwrap());
        assert_eq!(probe(&d, &j, b"/s/big", src), Found::Nothing);
        let h = Header::new(b"/s/big", src, id, 1 << 20);
        write(&j, &h, &[]).unwrap();
        for k in [0, 2] {
            mark(&d, &j, (b"/s/big", src), 1 << 20, k)
                .unwrap()
                .expect("this copy's journal")
                .submit();
        }
        flush();
        let want = Resumable {
            done: vec![(0, 1 << 20), (2 << 20, 3 << 20)],
            dest: id,
        };
        assert_eq!(probe(&d, &j, b"/s/big", src), Found::Trusted(want.clone()));
        assert_eq!(
            inspect(&jpath).unwrap(),
            Some(Summary {
                chunk_size: 1 << 20,
                chunks: 5,
                done: 2
            })
        );
        // Another source path: not this copy's journal. A changed source: stale.
        assert_eq!(probe(&d, &j, b"/s/other", src), Found::Nothing);
        let changed = SourceId { mtime: 3, ..src };
        assert_eq!(probe(&d, &j, b"/s/big", changed), Found::Stale);
        assert!(mark(&d, &j, (b"/s/big", changed), 1 << 20, 1)
            .unwrap()
            .is_none());
        // Rewritten in place with size and mtime kept (`touch -r`): the ctime moved, stale.
        for changed in [
            SourceId { ctime: 4, ..src },
            SourceId {
                ctime_nsec: 5,
                ..src
            },
        ] {
            assert_eq!(probe(&d, &j, b"/s/big", changed), Found::Stale);
            assert!(mark(&d, &j, (b"/s/big", changed), 1 << 20, 1)
                .unwrap()
                .is_none());
        }
        // A mark beyond the data there: stale. A second link to the file: stale.
        mark(&d, &j, (b"/s/big", src), 1 << 20, 4)
            .unwrap()
            .expect("this copy's journal")
            .submit();
        flush();
        assert_eq!(probe(&d, &j, b"/s/big", src), Found::Stale);
        write(&j, &h, &want.done).unwrap();
        assert_eq!(probe(&d, &j, b"/s/big", src), Found::Trusted(want));
        let link = [dir.as_slice(), b"/link"].concat();
        std::fs::hard_link(flist::path::as_path(&dst), flist::path::as_path(&link)).unwrap();
        assert_eq!(probe(&d, &j, b"/s/big", src), Found::Stale);
        std::fs::remove_file(flist::path::as_path(&link)).unwrap();
        // Another file under the journal's name is neither overwritten nor removed.
        remove(&j, b"/s/big").unwrap();
        assert!(!flist::path::as_path(&jpath).exists());
        std::fs::write(flist::path::as_path(&jpath), b"mine").unwrap();
        assert!(write(&j, &h, &[]).is_err());
        remove(&j, b"/s/big").unwrap();
        assert_eq!(
            std::fs::read(flist::path::as_path(&jpath)).unwrap(),
            b"mine"
        );
    }
}
