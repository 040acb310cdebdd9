//! `walk -o`'s checkpoint: each directory the walk read completely is marked, with its records
//! as the payload, so that a rerun takes them instead of reading the directory again.
//!
//! Key: a hash of the directory's path, device and inode (a directory replaced since has another
//! key). Payload (little endian): version `3`, detail (0 lite, 1 stat), the directory's device,
//! inode, mtime (s, ns) and ctime (s, ns) as stamped before its read, its path (u32 length,
//! bytes), then one record per entry: its name as the length of the prefix it shares with the
//! entry before's name and the rest (two LEB128 lengths, the bytes), its type (u8) and, for
//! stat walks, its metadata as differences (see [`MetaDeltas`]): a 16-bit mask of the fields
//! that differ, then each of those as a zigzag LEB128 number. A payload is used only when
//! every one of those equals what the rerun finds now: a directory whose entries changed since
//! (its mtime or ctime moved on) is read again.
//!
//! The records are as big as the list's in a fixed layout (80 bytes of metadata per entry): a
//! rerun reads back all of them and a 10^9-entry walk writes them twice. As differences from
//! the entry before (owner, mode, device, inode, mtime) and from the entry's own mtime (atime,
//! ctime), the entries of a directory take 10-20 bytes each; with the mask, only the fields
//! that differ cost a byte or more to write (most of a typical directory's do not), and the
//! names' shared prefixes (`file-0001`, `file-0002`) are written once. Each walked entry is
//! encoded once: its cost is the checkpoint's cost on a walk.

use crate::engine::checkpoint::{Checkpoint, Prior};
use flist::walk::{DirRecord, DirStamp, Resume};
use flist::{Detail, FileList, FileType, Meta};
use integer_encoding::VarInt;

const VERSION: u8 = 3;

/// The walk's side of a checkpoint: what earlier runs read, and where this run marks.
pub struct Marks<'a> {
    /// Directories earlier runs read completely.
    pub prior: &'a Prior,
    /// Where this run marks the directories it reads (`None`: it marks nothing).
    pub checkpoint: Option<&'a Checkpoint>,
    /// The walk's detail: payloads of another detail are not used.
    pub detail: Detail,
}

/// The key of the directory `path` with the identity `(dev, ino)`: the same at any rank count.
pub fn key(path: &[u8], dev: u64, ino: u64) -> u64 {
    let mut h = xxhash_rust::xxh64::Xxh64::new(0x3a1c_5eed);
    h.update(&(path.len() as u64).to_le_bytes());
    h.update(path);
    h.update(&dev.to_le_bytes());
    h.update(&ino.to_le_bytes());
    h.digest()
}

fn detail_byte(d: Detail) -> u8 {
    match d {
        Detail::Lite => 0,
        Detail::Stat => 1,
    }
}

/// The payload of the directory `path` stamped `stamp` whose entries are `entries` (full paths
/// below `path`).
#[cfg(test)]
pub fn encode(path: &[u8], stamp: &DirStamp, entries: &FileList) -> Vec<u8> {
    let mut e = Encoder::new(path, stamp, entries.detail());
    for x in entries.iter() {
        e.entry(flist::path::basename(x.path), x.kind, x.meta.as_ref());
    }
    e.finish()
}

/// A directory's payload, made entry by entry as the walk reads them.
struct Encoder {
    /// The payload's first `len` bytes; beyond them, room written into directly (see
    /// [`Encoder::entry`]) and cut off by [`Encoder::finish`].
    out: Vec<u8>,
    len: usize,
    deltas: MetaDeltas,
    /// The name of the entry before, its first `before_len` bytes (its prefix shared with the
    /// next is written once).
    before: [u8; NAME_MAX],
    before_len: usize,
}

/// The most bytes of an entry's record besides its name's rest: two lengths, the type and
/// the metadata.
const RECORD_MAX_BUT_NAME: usize = 20 + 1 + MetaDeltas::MAX;

/// Largest payload buffer a walk worker keeps between directories (bytes): one directory of
/// about 100,000 entries. Bigger ones are freed, so a worker's memory does not keep the
/// biggest directory it ever read.
const KEPT_BUFFER: usize = 2 << 20;

std::thread_local! {
    /// The payload buffer of the last directory this walk worker marked, kept for the next:
    /// a fresh one grown entry by entry was a chain of reallocations per directory.
    static SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Encoder {
    fn new(path: &[u8], stamp: &DirStamp, detail: Detail) -> Encoder {
        let mut out = SPARE.with(std::cell::Cell::take);
        out.clear();
        out.push(VERSION);
        out.push(detail_byte(detail));
        out.extend_from_slice(&stamp.dev.to_le_bytes());
        out.extend_from_slice(&stamp.ino.to_le_bytes());
        out.extend_from_slice(&stamp.mtime.0.to_le_bytes());
        out.extend_from_slice(&stamp.mtime.1.to_le_bytes());
        out.extend_from_slice(&stamp.ctime.0.to_le_bytes());
        out.extend_from_slice(&stamp.ctime.1.to_le_bytes());
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        out.extend_from_slice(path);
        Encoder {
            len: out.len(),
            out,
            deltas: MetaDeltas::from(stamp),
            before: [0; NAME_MAX],
            before_len: 0,
        }
    }

    /// Append the record of the entry `name` of type `kind` (with `meta` in stat walks).
    ///
    /// Written straight into the buffer's room, field by field: appended one at a time, each
    /// with its capacity check, they were most of the checkpoint's cost on a walk; put
    /// together aside and copied in, the copy read back bytes just stored one by one, which
    /// the processor cannot forward (a stall per entry, issue 33's profile).
    fn entry(&mut self, name: &[u8], kind: FileType, meta: Option<&Meta>) {
        let shared = shared_prefix(name, &self.before[..self.before_len]);
        let rest = &name[shared..];
        let need = self.len + rest.len() + RECORD_MAX_BUT_NAME;
        if self.out.len() < need {
            let grown = need.max(self.out.len() * 2);
            self.out.resize(grown, 0);
        }
        let buf = &mut self.out[self.len..];
        let mut n = uvar_into(shared as u64, buf);
        n += uvar_into(rest.len() as u64, &mut buf[n..]);
        buf[n..n + rest.len()].copy_from_slice(rest);
        n += rest.len();
        buf[n] = kind as u8;
        n += 1;
        if let Some(m) = meta {
            n += self.deltas.encode_into(m, &mut buf[n..]);
        }
        self.len += n;
        if name.len() <= NAME_MAX {
            self.before[shared..name.len()].copy_from_slice(rest);
            self.before_len = name.len();
        } else {
            // No file system here gives such a name; the next one shares nothing with it.
            self.before_len = 0;
        }
    }

    /// The payload.
    fn finish(mut self) -> Vec<u8> {
        self.out.truncate(self.len);
        self.out
    }

    /// Give the payload buffer back to this thread for the next directory (see [`SPARE`]).
    fn recycle(out: Vec<u8>) {
        if out.capacity() <= KEPT_BUFFER {
            SPARE.with(|s| s.set(out));
        }
    }
}

/// The longest name of a directory entry on Linux (bytes): the one after a longer one, which
/// no file system here gives, is written whole.
const NAME_MAX: usize = 255;

/// The length of the prefix `a` and `b` share, compared eight bytes at a time.
fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let mut i = 0;
    while i + 8 <= n {
        let x = word(a, i) ^ word(b, i);
        if x != 0 {
            // Little endian: the lowest set bit is in the first byte that differs.
            return i + x.trailing_zeros() as usize / 8;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// A directory the walk reads, recorded in the checkpoint once every entry was read.
struct Recording<'a> {
    checkpoint: &'a Checkpoint,
    key: u64,
    payload: Encoder,
}

impl DirRecord for Recording<'_> {
    fn entry(&mut self, name: &[u8], kind: FileType, meta: Option<&Meta>) {
        self.payload.entry(name, kind, meta);
    }

    fn read_all(self: Box<Self>) {
        let payload = self.payload.finish();
        self.checkpoint.mark(self.key, &payload);
        Encoder::recycle(payload);
    }
}

/// The metadata of a directory's entries, each as differences: mode, owner, group, size, links,
/// inode, device and mtime from the entry before (the first from the directory: its device,
/// inode and mtime), atime and ctime from the entry's own mtime. A 16-bit mask says which
/// differences are not zero; each of those follows as a zigzag LEB128 number (wrapping).
struct MetaDeltas {
    before: Meta,
}

impl From<&DirStamp> for MetaDeltas {
    fn from(stamp: &DirStamp) -> Self {
        MetaDeltas {
            before: Meta {
                dev: stamp.dev,
                ino: stamp.ino,
                mtime: stamp.mtime.0,
                mtime_nsec: stamp.mtime.1,
                ..Meta::default()
            },
        }
    }
}

/// Write `u` as a LEB128 number at the start of `buf` (at least 10 bytes), the bytes
/// `integer-encoding` writes for a `u64` (checked by a test), byte by byte on the stack: once per
/// field of every entry of every directory walked, where the generic encoder's buffer and copy
/// were most of the checkpoint's cost. Returns its length.
fn uvar_into(mut u: u64, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while u >= 0x80 {
        buf[n] = u as u8 | 0x80;
        u >>= 7;
        n += 1;
    }
    buf[n] = u as u8;
    n + 1
}

/// Write `v` as a zigzag LEB128 number at the start of `buf` (at least 10 bytes), the bytes
/// `integer-encoding` writes for an `i64` (checked by a test). Returns its length.
fn zigzag_into(v: i64, buf: &mut [u8]) -> usize {
    uvar_into(((v << 1) ^ (v >> 63)) as u64, buf)
}

/// `a - b` as a signed difference (wrapping: any two values have one).
fn diff(a: u64, b: u64) -> i64 {
    a.wrapping_sub(b) as i64
}

/// Inverse of [`diff`]: the value `d` away from `b`.
fn undiff(d: i64, b: u64) -> u64 {
    b.wrapping_add(d as u64)
}

impl MetaDeltas {
    /// The most bytes [`MetaDeltas::encode_into`] writes: the mask and 13 fields of at most 10.
    const MAX: usize = 2 + 13 * 10;

    /// Write the differences of `m` at the start of `buf` (at least [`MetaDeltas::MAX`] bytes);
    /// returns their length.
    fn encode_into(&mut self, m: &Meta, buf: &mut [u8]) -> usize {
        let b = &self.before;
        let fields = [
            diff(u64::from(m.mode), u64::from(b.mode)),
            diff(u64::from(m.uid), u64::from(b.uid)),
            diff(u64::from(m.gid), u64::from(b.gid)),
            diff(m.size, b.size),
            diff(m.nlink, b.nlink),
            diff(m.ino, b.ino),
            diff(m.dev, b.dev),
            diff(m.mtime as u64, b.mtime as u64),
            diff(u64::from(m.mtime_nsec), u64::from(b.mtime_nsec)),
            diff(m.atime as u64, m.mtime as u64),
            diff(u64::from(m.atime_nsec), u64::from(m.mtime_nsec)),
            diff(m.ctime as u64, m.mtime as u64),
            diff(u64::from(m.ctime_nsec), u64::from(m.mtime_nsec)),
        ];
        let (mut mask, mut n) = (0u16, 2);
        for (i, f) in fields.into_iter().enumerate() {
            if f != 0 {
                mask |= 1 << i;
                n += zigzag_into(f, &mut buf[n..]);
            }
        }
        buf[..2].copy_from_slice(&mask.to_le_bytes());
        self.before = *m;
        n
    }

    /// The next entry's metadata from `r`; `None` when cut, or when a 32-bit field is out of
    /// range (damage).
    fn decode(&mut self, r: &mut Reader<'_>) -> Option<Meta> {
        let mask = u16::from_le_bytes(r.take(2)?.try_into().expect("2 bytes"));
        if mask >> 13 != 0 {
            return None;
        }
        let mut f = [0i64; 13];
        for (i, x) in f.iter_mut().enumerate() {
            if mask & (1 << i) != 0 {
                *x = r.varint()?;
            }
        }
        let b = &self.before;
        let narrow = |d: i64, b: u32| u32::try_from(undiff(d, u64::from(b))).ok();
        let mtime = undiff(f[7], b.mtime as u64);
        let mtime_nsec = narrow(f[8], b.mtime_nsec)?;
        let m = Meta {
            mode: narrow(f[0], b.mode)?,
            uid: narrow(f[1], b.uid)?,
            gid: narrow(f[2], b.gid)?,
            size: undiff(f[3], b.size),
            nlink: undiff(f[4], b.nlink),
            ino: undiff(f[5], b.ino),
            dev: undiff(f[6], b.dev),
            mtime: mtime as i64,
            mtime_nsec,
            atime: undiff(f[9], mtime) as i64,
            atime_nsec: narrow(f[10], mtime_nsec)?,
            ctime: undiff(f[11], mtime) as i64,
            ctime_nsec: narrow(f[12], mtime_nsec)?,
        };
        self.before = m;
        Some(m)
    }
}

/// Reads a payload front to back; `None` at the first byte missing.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn i64(&mut self) -> Option<i64> {
        self.take(8)
            .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    /// A LEB128 number (zigzag for a signed one).
    fn varint<T: VarInt>(&mut self) -> Option<T> {
        let (v, n) = T::decode_var(self.0)?;
        self.0 = &self.0[n..];
        Some(v)
    }
}

/// The records of `payload` when it was made for the directory `path` stamped `stamp` by a walk
/// of `detail`; `None` for any difference or damage (the directory is then read again).
pub fn decode(payload: &[u8], path: &[u8], stamp: &DirStamp, detail: Detail) -> Option<FileList> {
    let mut r = Reader(payload);
    if r.u8()? != VERSION || r.u8()? != detail_byte(detail) {
        return None;
    }
    let recorded = DirStamp {
        dev: r.u64()?,
        ino: r.u64()?,
        mtime: (r.i64()?, r.u32()?),
        ctime: (r.i64()?, r.u32()?),
    };
    let len = r.u32()? as usize;
    if recorded != *stamp || r.take(len)? != path {
        return None;
    }
    let mut list = FileList::new(detail);
    let mut child = path.to_vec();
    if child != b"/" {
        child.push(b'/');
    }
    let base = child.len();
    let mut deltas = MetaDeltas::from(stamp);
    let mut name = Vec::new();
    while !r.0.is_empty() {
        let shared = usize::try_from(r.varint::<u64>()?).ok()?;
        let len = usize::try_from(r.varint::<u64>()?).ok()?;
        if shared > name.len() {
            return None;
        }
        name.truncate(shared);
        name.extend_from_slice(r.take(len)?);
        // One component, as a directory's entry is: nothing that leads elsewhere.
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return None;
        }
        let kind = FileType::from_u8(r.u8()?);
        let meta = match detail {
            Detail::Stat => Some(deltas.decode(&mut r)?),
            Detail::Lite => None,
        };
        child.truncate(base);
        child.extend_from_slice(&name);
        list.push(&child, kind, meta);
    }
    Some(list)
}

impl Resume for Marks<'_> {
    fn recorded(&self, path: &[u8], stamp: &DirStamp) -> Option<FileList> {
        if self.prior.is_empty() {
            return None;
        }
        let payload = self.prior.payload(key(path, stamp.dev, stamp.ino))?;
        decode(payload, path, stamp, self.detail)
    }

    fn record(&self, path: &[u8], stamp: &DirStamp) -> Option<Box<dyn DirRecord + '_>> {
        let checkpoint = self.checkpoint?;
        Some(Box::new(Recording {
            checkpoint,
            key: key(path, stamp.dev, stamp.ino),
            payload: Encoder::new(path, stamp, self.detail),
        }))
    }

    fn skip(&self) -> Option<(u64, u64)> {
        self.checkpoint.map(Checkpoint::identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> DirStamp {
        DirStamp {
            dev: 7,
            ino: 42,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_001, 6),
        }
    }

    #[test]
    fn a_payload_comes_back_only_for_the_same_directory_unchanged() {
        let mut entries = FileList::new(Detail::Stat);
        let meta = Meta {
            mode: libc::S_IFREG | 0o644,
            size: 12,
            ino: 9,
            ..Meta::default()
        };
        entries.push(b"/t/d/a b\n|c", FileType::File, Some(meta));
        entries.push(
            b"/t/d/sub",
            FileType::Dir,
            Some(Meta {
                mode: libc::S_IFDIR | 0o755,
                ..Meta::default()
            }),
        );
        let p = encode(b"/t/d", &stamp(), &entries);
        let back = decode(&p, b"/t/d", &stamp(), Detail::Stat).unwrap();
        let got: Vec<_> = back
            .iter()
            .map(|e| (e.path.to_vec(), e.kind, e.meta))
            .collect();
        let want: Vec<_> = entries
            .iter()
            .map(|e| (e.path.to_vec(), e.kind, e.meta))
            .collect();
        assert_eq!(got, want);
        // Another path, time, identity or detail: not used.
        assert!(decode(&p, b"/t/e", &stamp(), Detail::Stat).is_none());
        let later = DirStamp {
            mtime: (1_700_000_000, 6),
            ..stamp()
        };
        assert!(decode(&p, b"/t/d", &later, Detail::Stat).is_none());
        let touched = DirStamp {
            ctime: (1_700_000_002, 6),
            ..stamp()
        };
        assert!(decode(&p, b"/t/d", &touched, Detail::Stat).is_none());
        assert!(decode(&p, b"/t/d", &stamp(), Detail::Lite).is_none());
        // Cut anywhere, or with a name that leads elsewhere: not used, no panic.
        for n in 0..p.len() {
            let cut = decode(&p[..n], b"/t/d", &stamp(), Detail::Stat);
            assert!(cut.is_none() || cut.unwrap().len() < 2, "cut at {n}");
        }
        let mut up = FileList::new(Detail::Lite);
        up.push(b"/t/d/..", FileType::Dir, None);
        let p = encode(b"/t/d", &stamp(), &up);
        assert!(decode(&p, b"/t/d", &stamp(), Detail::Lite).is_none());
        // The root directory's children.
        let mut root = FileList::new(Detail::Lite);
        root.push(b"/x", FileType::File, None);
        let p = encode(b"/", &stamp(), &root);
        let back = decode(&p, b"/", &stamp(), Detail::Lite).unwrap();
        assert_eq!(back.path(0), b"/x");
    }

    /// Names written as the prefix shared with the name before and the rest come back
    /// exactly, whatever their bytes and lengths; a shared prefix longer than the name before
    /// (damage) is refused.
    #[test]
    fn names_sharing_prefixes_come_back_exactly() {
        let names: [&[u8]; 7] = [b"abc", b"abcdef", b"ab", b"x", b"x\xff\n", b"abc", b"\x01"];
        let mut entries = FileList::new(Detail::Lite);
        for n in names {
            entries.push(&[b"/t/d/".as_slice(), n].concat(), FileType::File, None);
        }
        let p = encode(b"/t/d", &stamp(), &entries);
        let back = decode(&p, b"/t/d", &stamp(), Detail::Lite).unwrap();
        let got: Vec<_> = back.iter().map(|e| e.path.to_vec()).collect();
        let want: Vec<_> = entries.iter().map(|e| e.path.to_vec()).collect();
        assert_eq!(got, want);
        // The header (version, detail, device, inode, mtime, ctime, the path's length, the
        // path), then the first entry: shared 0, length 3.
        let first = 2 + 8 + 8 + (8 + 4) * 2 + 4 + 4;
        assert_eq!(&p[first..first + 2], &[0, 3]);
        let mut forged = p.clone();
        forged[first] = 1;
        assert!(decode(&forged, b"/t/d", &stamp(), Detail::Lite).is_none());
        // Names longer than NAME_MAX (the name after one is written whole), before and after
        // short ones.
        let (long, longer) = (vec![b'n'; 300], [vec![b'n'; 290], vec![b'm'; 20]].concat());
        let mut entries = FileList::new(Detail::Stat);
        let meta = Meta {
            mode: libc::S_IFREG | 0o600,
            size: 1 << 40,
            ..Meta::default()
        };
        for n in [&b"a"[..], &long, &longer, b"b"] {
            entries.push(
                &[b"/t/d/".as_slice(), n].concat(),
                FileType::File,
                Some(meta),
            );
        }
        let p = encode(b"/t/d", &stamp(), &entries);
        let back = decode(&p, b"/t/d", &stamp(), Detail::Stat).unwrap();
        let got: Vec<_> = back.iter().map(|e| (e.path.to_vec(), e.meta)).collect();
        let want: Vec<_> = entries.iter().map(|e| (e.path.to_vec(), e.meta)).collect();
        assert_eq!(got, want);
    }

    /// A payload buffer a walk worker keeps between directories ([`SPARE`]) gives the next
    /// directory exactly its own payload, nothing of the one before; one above
    /// [`KEPT_BUFFER`] is not kept.
    #[test]
    fn a_kept_buffer_gives_the_next_directory_exactly_its_own_payload() {
        // A thread of its own: its kept buffer starts empty.
        std::thread::spawn(|| {
            let list = |names: &[Vec<u8>]| {
                let mut entries = FileList::new(Detail::Stat);
                for (i, n) in names.iter().enumerate() {
                    let meta = Meta {
                        mode: libc::S_IFREG | 0o644,
                        size: i as u64 * 4099,
                        ino: 1000 + i as u64,
                        ..Meta::default()
                    };
                    entries.push(
                        &[b"/t/d/", n.as_slice()].concat(),
                        FileType::File,
                        Some(meta),
                    );
                }
                entries
            };
            let small = list(&[b"a".to_vec(), b"ab".to_vec(), b"b\xfe".to_vec()]);
            let big_names: Vec<Vec<u8>> = (0..3000)
                .map(|i| format!("{i:0>200}-entry").into_bytes())
                .collect();
            let big = list(&big_names);
            let fresh = encode(b"/t/d", &stamp(), &small);
            let large = encode(b"/t/d", &stamp(), &big);
            let large_len = large.len();
            Encoder::recycle(large);
            let reused = encode(b"/t/d", &stamp(), &small);
            assert!(reused.capacity() >= large_len, "the kept buffer was taken");
            assert_eq!(reused, fresh);
            let back = decode(&reused, b"/t/d", &stamp(), Detail::Stat).unwrap();
            let got: Vec<_> = back.iter().map(|e| (e.path.to_vec(), e.meta)).collect();
            let want: Vec<_> = small.iter().map(|e| (e.path.to_vec(), e.meta)).collect();
            assert_eq!(got, want);
            Encoder::recycle(Vec::with_capacity(KEPT_BUFFER + 1));
            assert_eq!(SPARE.with(std::cell::Cell::take).capacity(), 0);
        })
        .join()
        .unwrap();
    }

    /// Any metadata comes back exactly (extremes included: the differences wrap), the entries
    /// of a typical directory take a few bytes each, and damage is refused, never a panic.
    #[test]
    fn metadata_comes_back_exactly_in_few_bytes() {
        let file = |i: u64| Meta {
            mode: libc::S_IFREG | 0o644,
            uid: 1000,
            gid: 100,
            size: 0,
            nlink: 1,
            ino: 5_000 + i,
            dev: 7,
            mtime: 1_700_000_100,
            mtime_nsec: 123_000_000 + (i as u32) * 1_000,
            atime: 1_700_000_100,
            atime_nsec: 123_000_000 + (i as u32) * 1_000,
            ctime: 1_700_000_100,
            ctime_nsec: 123_000_000 + (i as u32) * 1_000,
        };
        let mut typical = FileList::new(Detail::Stat);
        for i in 0..250 {
            typical.push(
                format!("/t/d/f{i:03}.dat").as_bytes(),
                FileType::File,
                Some(file(i)),
            );
        }
        let p = encode(b"/t/d", &stamp(), &typical);
        let per_entry = (p.len() - 64) / 250;
        assert!(
            per_entry <= 16,
            "{per_entry} bytes per entry (the fixed layout took 93, differences without a \
             mask and shared prefixes 25)"
        );
        let back = decode(&p, b"/t/d", &stamp(), Detail::Stat).unwrap();
        assert!(back
            .iter()
            .zip(typical.iter())
            .all(|(a, b)| a.meta == b.meta && a.path == b.path));
        // Extremes, one after the other.
        let extreme = [
            Meta {
                mode: u32::MAX,
                uid: u32::MAX,
                gid: 0,
                size: u64::MAX,
                nlink: u64::MAX,
                ino: u64::MAX,
                dev: 0,
                mtime: i64::MIN,
                mtime_nsec: 999_999_999,
                atime: i64::MAX,
                atime_nsec: 0,
                ctime: -1,
                ctime_nsec: u32::MAX,
            },
            Meta::default(),
            Meta {
                mtime: i64::MAX,
                atime: i64::MIN,
                ctime: 0,
                size: 1 << 63,
                ..Meta::default()
            },
        ];
        let mut odd = FileList::new(Detail::Stat);
        for (i, m) in extreme.iter().enumerate() {
            odd.push(format!("/t/d/{i}").as_bytes(), FileType::Fifo, Some(*m));
        }
        let p = encode(b"/t/d", &stamp(), &odd);
        let back = decode(&p, b"/t/d", &stamp(), Detail::Stat).unwrap();
        let got: Vec<Meta> = back.iter().filter_map(|e| e.meta).collect();
        assert_eq!(got, extreme);
        // Every byte of the typical payload flipped: refused or some list, never a panic.
        let p = encode(b"/t/d", &stamp(), &typical);
        for i in 0..p.len() {
            let mut bad = p.clone();
            bad[i] ^= 0xff;
            let _ = decode(&bad, b"/t/d", &stamp(), Detail::Stat);
        }
        // A 32-bit field (the mode) pushed out of range: refused; in range, taken.
        let entry = |mode_delta: i64| {
            let mut p = encode(b"/t/d", &stamp(), &FileList::new(Detail::Stat));
            p.extend_from_slice(&0u64.encode_var_vec());
            p.extend_from_slice(&1u64.encode_var_vec());
            p.push(b'x');
            p.push(FileType::File as u8);
            // The mask: the mode alone differs.
            p.extend_from_slice(&1u16.to_le_bytes());
            p.extend_from_slice(&mode_delta.encode_var_vec());
            decode(&p, b"/t/d", &stamp(), Detail::Stat)
        };
        assert_eq!(entry(0o644).unwrap().meta(0).unwrap().mode, 0o644);
        assert!(entry(1 << 40).is_none());
        // A mask with a field beyond the thirteen: refused.
        let mut p = encode(b"/t/d", &stamp(), &FileList::new(Detail::Stat));
        p.extend_from_slice(&[0, 1, b'x', FileType::File as u8]);
        p.extend_from_slice(&(1u16 << 13).to_le_bytes());
        p.push(0);
        assert!(decode(&p, b"/t/d", &stamp(), Detail::Stat).is_none());
    }

    /// The generic encoder's bytes for `v` (zigzag for a signed one).
    fn push_var<T: VarInt>(v: T, out: &mut Vec<u8>) {
        let mut buf = [0u8; 10];
        let n = v.encode_var(&mut buf);
        out.extend_from_slice(&buf[..n]);
    }

    #[test]
    fn shared_prefixes_are_found_across_words() {
        let long = b"0123456789abcdef0123456789";
        for a in 0..long.len() {
            for cut in 0..=a {
                let mut b = long[..a].to_vec();
                if cut < a {
                    b[cut] ^= 0x80;
                }
                let want = (0..a).take_while(|&i| long[i] == b[i]).count();
                assert_eq!(shared_prefix(long, &b), want, "{a} {cut}");
                assert_eq!(shared_prefix(&b, long), want, "{a} {cut}");
            }
        }
        assert_eq!(shared_prefix(b"", b"abc"), 0);
    }

    #[test]
    fn varint_bytes_are_the_generic_encoder_s() {
        for v in [0u64, 1, 127, 128, 255, 16_383, 16_384, 1 << 35, u64::MAX] {
            let (mut fast, mut generic) = ([0u8; 10], Vec::new());
            let n = uvar_into(v, &mut fast);
            push_var(v, &mut generic);
            assert_eq!(&fast[..n], &generic[..], "{v}");
        }
    }

    #[test]
    fn zigzag_bytes_are_the_generic_encoder_s() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            -65,
            1 << 20,
            -(1 << 40),
            i64::MAX,
            i64::MIN,
        ] {
            let (mut fast, mut generic) = ([0u8; 10], Vec::new());
            let n = zigzag_into(v, &mut fast);
            push_var(v, &mut generic);
            assert_eq!(&fast[..n], &generic[..], "{v}");
        }
    }

    #[test]
    fn keys_depend_on_path_and_identity() {
        assert_eq!(key(b"/a", 1, 2), key(b"/a", 1, 2));
        assert_ne!(key(b"/a", 1, 2), key(b"/a", 1, 3));
        assert_ne!(key(b"/a", 1, 2), key(b"/b", 1, 2));
    }
}
