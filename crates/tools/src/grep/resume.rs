//! `grep`'s checkpoint: each chunk searched is marked with what it found as the payload, so
//! that a rerun takes the findings instead of reading the chunk again, and prints the whole
//! output in order (a stopped run prints nothing: the rerun's output is the whole output).
//!
//! Key: a hash of the file's path and the chunk's number and byte range. Payload: version `1`,
//! the file's [`Stamp`] (device, inode, size, mtime, ctime: the walk's, or for a file from a
//! list the same before and after the read, else no mark), then the findings ([`Found`],
//! steal's typed encoding). A payload is used only when the file's stamp now is the same: a
//! file changed since is searched again.

use super::search::{stamp_of, Chunk, Found, Searching, Stamp};
use crate::engine::checkpoint::{Checkpoint, Prior};
use std::sync::atomic::{AtomicU64, Ordering};

const VERSION: u8 = 1;

/// The chunks earlier runs searched, and where this run marks those it searches.
pub struct Marks<'a> {
    /// What earlier runs recorded.
    pub prior: &'a Prior,
    /// Where this run marks.
    pub checkpoint: &'a Checkpoint,
}

/// The key of `chunk` (the same at any rank count and in any order of the files).
pub fn key(chunk: &Chunk) -> u64 {
    let mut h = xxhash_rust::xxh64::Xxh64::new(0x93e9_c4c4);
    h.update(&(chunk.path.len() as u64).to_le_bytes());
    h.update(&chunk.path);
    for v in [chunk.chunk, chunk.start, chunk.end] {
        h.update(&v.to_le_bytes());
    }
    h.digest()
}

#[cfg(test)]
fn encode(stamp: &Stamp, found: &Found) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(stamp, found, &mut out);
    out
}

/// [`encode`], appended to `out`: once per chunk searched, straight into the checkpoint's
/// buffer (a payload of its own, grown from one byte, was a third of the checkpoint's cost).
fn encode_into(stamp: &Stamp, found: &Found, out: &mut Vec<u8>) {
    out.reserve(1 + 56 + 32);
    out.push(VERSION);
    for v in stamp {
        out.extend_from_slice(&v.to_le_bytes());
    }
    steal::typed::encode_into(found, out);
}

/// The findings `payload` records, with the stamp of the file they were found in.
fn decode(payload: &[u8]) -> Option<(Stamp, Found)> {
    let (&version, rest) = payload.split_first()?;
    if version != VERSION || rest.len() < 56 {
        return None;
    }
    let (head, rest) = rest.split_at(56);
    let mut stamp = [0u64; 7];
    for (v, b) in stamp.iter_mut().zip(head.chunks_exact(8)) {
        *v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
    }
    let found = steal::typed::decode::<Found>(rest).ok()?;
    Some((stamp, found))
}

/// Search `item` (with `marks`: take what an earlier run found in it, counted in `recorded`;
/// or search it and mark it).
pub fn search(
    marks: Option<&Marks<'_>>,
    searching: &Searching,
    item: &Chunk,
    recorded: &AtomicU64,
) -> Found {
    let Some(m) = marks else {
        return searching.search(item);
    };
    if let Some(f) = m.recorded(item) {
        recorded.fetch_add(1, Ordering::Relaxed);
        return f;
    }
    let (f, stamp) = searching.search_stamped(item);
    // A chunk that could not be read, or whose file changed while read, is searched again (and
    // reported again) by a rerun.
    if let (Some(stamp), None) = (stamp, &f.error) {
        m.mark(item, &stamp, &f);
    }
    f
}

impl Marks<'_> {
    /// What an earlier run found in `chunk`, when the file is the same now (one `stat`).
    pub fn recorded(&self, chunk: &Chunk) -> Option<Found> {
        if self.prior.is_empty() {
            return None;
        }
        let (stamp, mut found) = decode(self.prior.payload(key(chunk))?)?;
        if found.chunk != chunk.chunk || found.error.is_some() {
            return None;
        }
        let now = rustix::fs::stat(flist::path::as_path(&chunk.path)).ok()?;
        if stamp_of(&now) != stamp {
            return None;
        }
        // Its place in this run's order (another rank count, or --unordered, moves it).
        found.file = chunk.file;
        Some(found)
    }

    /// `chunk` was searched (its file stamped `stamp` by the walk, or the same before and
    /// after the read): `found`.
    pub fn mark(&self, chunk: &Chunk, stamp: &Stamp, found: &Found) {
        self.checkpoint
            .mark_with(key(chunk), |out| encode_into(stamp, found, out));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_damage_is_refused() {
        let found = Found {
            file: 3,
            chunk: 1,
            newlines: 4,
            bytes: 99,
            selected: 2,
            binary: false,
            numbers: vec![1, 3],
            lines: b"a|b\nc d\n".to_vec(),
            error: None,
        };
        let stamp = [1, 2, 3, 4, 5, 6, 7];
        let p = encode(&stamp, &found);
        assert_eq!(decode(&p), Some((stamp, found)));
        for n in 0..p.len() {
            assert!(decode(&p[..n]).is_none(), "cut at {n}");
        }
        let mut v2 = p.clone();
        v2[0] = 2;
        assert!(decode(&v2).is_none());
    }
}
