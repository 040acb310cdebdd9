//! `walk -o`'s checkpoint: each directory the walk read completely is marked, with its records
//! as the payload, so that a rerun takes them instead of reading the directory again.
//!
//! Key: a hash of the directory's path, device and inode (a directory replaced since has another
//! key). Payload (little endian): version `1`, detail (0 lite, 1 stat), the directory's device,
//! inode, mtime (s, ns) and ctime (s, ns) as stamped before its read, its path (u32 length,
//! bytes), then one record per entry in flist's rank-to-rank encoding with the entry's name in
//! place of its path (`u32 length, name, u8 type, [80 bytes of metadata for stat walks]`).
//! A payload is used only when every one of those equals what the rerun finds now: a directory
//! whose entries changed since (its mtime or ctime moved on) is read again.

use crate::engine::checkpoint::{Checkpoint, Prior};
use flist::record::META_BYTES;
use flist::walk::{DirStamp, Resume};
use flist::{Detail, FileList, FileType, Meta};

const VERSION: u8 = 1;

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
pub fn encode(path: &[u8], stamp: &DirStamp, entries: &FileList) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + path.len() + entries.path_bytes() / 2);
    out.push(VERSION);
    out.push(detail_byte(entries.detail()));
    out.extend_from_slice(&stamp.dev.to_le_bytes());
    out.extend_from_slice(&stamp.ino.to_le_bytes());
    out.extend_from_slice(&stamp.mtime.0.to_le_bytes());
    out.extend_from_slice(&stamp.mtime.1.to_le_bytes());
    out.extend_from_slice(&stamp.ctime.0.to_le_bytes());
    out.extend_from_slice(&stamp.ctime.1.to_le_bytes());
    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
    out.extend_from_slice(path);
    for e in entries.iter() {
        let name = flist::path::basename(e.path);
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name);
        out.push(e.kind as u8);
        if let Some(m) = e.meta {
            m.encode(&mut out);
        }
    }
    out
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
    while !r.0.is_empty() {
        let len = r.u32()? as usize;
        let name = r.take(len)?;
        // One component, as a directory's entry is: nothing that leads elsewhere.
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return None;
        }
        let kind = FileType::from_u8(r.u8()?);
        let meta = match detail {
            Detail::Stat => Some(Meta::decode(r.take(META_BYTES)?)),
            Detail::Lite => None,
        };
        child.truncate(base);
        child.extend_from_slice(name);
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

    fn read_all(&self, path: &[u8], stamp: &DirStamp, entries: &FileList) {
        if let Some(c) = self.checkpoint {
            c.mark(
                key(path, stamp.dev, stamp.ino),
                &encode(path, stamp, entries),
            );
        }
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

    #[test]
    fn keys_depend_on_path_and_identity() {
        assert_eq!(key(b"/a", 1, 2), key(b"/a", 1, 2));
        assert_ne!(key(b"/a", 1, 2), key(b"/a", 1, 3));
        assert_ne!(key(b"/a", 1, 2), key(b"/b", 1, 2));
    }
}
