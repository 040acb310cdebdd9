//! Entries that a later entry of the same name replaces (tar keeps the last), found with
//! 16 bytes per entry in flight rather than its name.
//!
//! 1. Every rank sends (hash of the name, start offset) of each entry whose header it owns to
//!    the rank the hash picks; each rank sorts what it received, in place, and picks out the
//!    starts that share a hash with another entry (duplicates, and the rare hash collision).
//! 2. Those candidates go back to the ranks that own them (the owner of a start is the rank
//!    whose part of the stream holds it: [`Parts::owner`]), which send the candidates' names to
//!    the hash's rank;
//! 3. there the names decide exactly: of each name, all but the last entry are replaced. The
//!    (rare) losers are shared with every rank, since a loser's data may span several ranks'
//!    parts.

use super::entries::Entries;
use super::index;
use super::scan::Parts;
use std::collections::{HashMap, HashSet};
use steal::wire::{self, Reader};
use steal::Comm;

/// Bytes of one (hash, start) record: both big-endian, so that sorting the records' bytes
/// sorts by hash, then start.
const RECORD: usize = 16;

/// The rank a name's hash picks.
fn rank_of(hash: u64, size: usize) -> usize {
    (hash % size as u64) as usize
}

/// Start offsets of the entries (on any rank) that a later entry of the same name replaces.
/// `entries` are this rank's (those it owns take part), the stream split as `parts`.
/// Collective.
pub(super) fn superseded(comm: &dyn Comm, parts: &Parts, entries: &Entries) -> HashSet<u64> {
    let size = comm.size();
    // 1. (hash, start) to the hash's rank.
    let mut sends = vec![Vec::new(); size];
    for i in (0..entries.len()).filter(|&i| entries.own(i)) {
        let hash = flist::distribute::hash_path(entries.rel(i));
        let to = &mut sends[rank_of(hash, size)];
        to.extend_from_slice(&hash.to_be_bytes());
        to.extend_from_slice(&entries.start(i).to_be_bytes());
    }
    let mut received = comm.alltoallv(sends);
    let mut all = if received.len() == 1 {
        received.pop().expect("one")
    } else {
        let mut all = Vec::with_capacity(received.iter().map(Vec::len).sum());
        for b in received {
            all.extend_from_slice(&b);
        }
        all
    };
    assert!(all.len() % RECORD == 0, "whole (hash, start) records");
    // SAFETY: `[u8; RECORD]` has the size of RECORD bytes and the alignment of `u8`, so the
    // buffer's bytes are exactly `all.len() / RECORD` such arrays; the slice borrows `all`
    // mutably for its lifetime. (`<[u8]>::as_chunks_mut` does this from Rust 1.88, above the
    // workspace's MSRV.) Sorted in place: no second copy of the records.
    let records: &mut [[u8; RECORD]] = unsafe {
        std::slice::from_raw_parts_mut(all.as_mut_ptr().cast::<[u8; RECORD]>(), all.len() / RECORD)
    };
    records.sort_unstable();
    let hash = |r: &[u8; RECORD]| u64::from_be_bytes(r[..8].try_into().expect("8 bytes"));
    let start = |r: &[u8; RECORD]| u64::from_be_bytes(r[8..].try_into().expect("8 bytes"));
    // 2. The starts sharing a hash, to their owners.
    let mut asks = vec![Vec::new(); size];
    for run in records.chunk_by(|a, b| hash(a) == hash(b)) {
        if run.len() > 1 {
            for r in run {
                let at = start(r);
                let owner = parts.owner(at);
                wire::put_u64(&mut asks[owner], at);
            }
        }
    }
    drop(all);
    let asked = comm.alltoallv(asks);
    // 3. Their names, to the hash's rank, where the names decide.
    let mut names = vec![Vec::new(); size];
    for bytes in &asked {
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            let at = r.u64();
            let i = entries
                .find(at)
                .expect("a rank owns the entries whose start lies in its part");
            let rel = entries.rel(i);
            let to = &mut names[rank_of(flist::distribute::hash_path(rel), size)];
            wire::put_bytes(to, rel);
            wire::put_u64(to, at);
        }
    }
    drop(asked);
    let received = comm.alltoallv(names);
    let mut last: HashMap<&[u8], u64> = HashMap::new();
    let mut losers = Vec::new();
    for bytes in &received {
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            let rel = r.bytes();
            let at = r.u64();
            match last.get_mut(&rel) {
                Some(prev) => {
                    losers.push((*prev).min(at));
                    *prev = (*prev).max(at);
                }
                None => {
                    last.insert(rel, at);
                }
            }
        }
    }
    comm.allgatherv(&index::encode_offsets(&losers))
        .iter()
        .flat_map(|b| index::decode_offsets(b).unwrap_or_default())
        .collect()
}
