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
//! 4. A hard link refers to the version of its target that precedes it in the archive (GNU tar
//!    and bsdtar extract in order): `a/f`, then `l` linked to it, then a newer `a/f` leave `l`
//!    with the first `a/f`. So every hard link that is not replaced itself goes to the rank of
//!    its target's name, which knows that name's entries: when the version it refers to is
//!    replaced, that version is extracted under the first such link's name (it *carries* it)
//!    and the other links to that version link to that name. The (rare) decisions are shared
//!    with every rank, as the losers are.

use super::beneath::clean;
use super::entries::Entries;
use super::format::Kind;
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

/// What becomes of the entries that a later entry of the same name replaces, and of the hard
/// links to them. Every map is keyed by an entry's start offset (bytes), the same on every rank.
#[derive(Debug, Default)]
pub(super) struct Superseded {
    /// Entries replaced by a later entry of their name that no hard link keeps: not extracted.
    pub dropped: HashSet<u64>,
    /// Entries replaced by a later entry of their name that a hard link between the two refers
    /// to: extracted under that link's name (the value), which then holds them.
    pub carried: HashMap<u64, Vec<u8>>,
    /// The hard links whose names carry an earlier version ([`Superseded::carried`]): not linked,
    /// that version is extracted under their name.
    pub carriers: HashSet<u64>,
    /// Hard links to a replaced version that another link carries: linked to that link's name
    /// (the value) instead of their target's.
    pub relinked: HashMap<u64, Vec<u8>>,
    /// Hard links to a replaced version that cannot be kept (a directory, or a hard link
    /// itself): not made, and why.
    pub refused: HashMap<u64, String>,
}

impl Superseded {
    /// No entry is replaced, and no link refers to a replaced version.
    pub fn is_empty(&self) -> bool {
        self.dropped.is_empty()
            && self.carried.is_empty()
            && self.carriers.is_empty()
            && self.relinked.is_empty()
            && self.refused.is_empty()
    }
}

/// What an entry of a name may be to a hard link that refers to it (sent with its start).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A file, symlink, fifo or device: it can be extracted under the link's name.
    Carried = 0,
    /// A directory: no hard link to it is made (GNU tar refuses it too).
    Dir = 1,
    /// A hard link: it would have to be resolved once more (not done: refused, named).
    Link = 2,
    /// An entry of a type that is not extracted.
    Other = 3,
}

impl Class {
    fn of(kind: Kind) -> Class {
        match kind {
            Kind::File | Kind::Symlink | Kind::Fifo | Kind::Char | Kind::Block => Class::Carried,
            Kind::Dir => Class::Dir,
            Kind::HardLink => Class::Link,
            Kind::Other(_) => Class::Other,
        }
    }

    fn from_byte(b: u8) -> Class {
        match b {
            0 => Class::Carried,
            1 => Class::Dir,
            2 => Class::Link,
            _ => Class::Other,
        }
    }
}

/// A hard link as the rank of its target's name sees it: (its start, its name).
type LinkRef<'a> = (u64, &'a [u8]);

/// Tags of the decisions shared with every rank (step 4).
const CARRIED: u8 = 0;
const CARRIER: u8 = 1;
const RELINKED: u8 = 2;
const REFUSED: u8 = 3;

/// The entries (on any rank) that a later entry of the same name replaces, and what becomes of
/// the hard links that refer to them. `entries` are this rank's (those it owns take part), the
/// stream split as `parts`. Collective.
pub(super) fn superseded(comm: &dyn Comm, parts: &Parts, entries: &Entries) -> Superseded {
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
            to.push(Class::of(entries.kind(i)) as u8);
        }
    }
    drop(asked);
    let received = comm.alltoallv(names);
    // Each name's entries (start, class), in archive order once sorted.
    let mut of_name: HashMap<&[u8], Vec<(u64, Class)>> = HashMap::new();
    for bytes in &received {
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            let rel = r.bytes();
            let at = r.u64();
            let class = Class::from_byte(r.u8());
            of_name.entry(rel).or_default().push((at, class));
        }
    }
    let mut losers = Vec::new();
    for versions in of_name.values_mut() {
        versions.sort_unstable_by_key(|&(at, _)| at);
        // All but the last (a lone name is a hash collision's, and replaces nothing).
        losers.extend(versions[..versions.len() - 1].iter().map(|&(at, _)| at));
    }
    let dropped: HashSet<u64> = comm
        .allgatherv(&index::encode_offsets(&losers))
        .iter()
        .flat_map(|b| index::decode_offsets(b).unwrap_or_default())
        .collect();
    if dropped.is_empty() {
        // Nothing replaced (the same on every rank): no link can refer to a replaced version,
        // and the links' names need not travel.
        return Superseded {
            dropped,
            ..Superseded::default()
        };
    }
    // 4. The hard links that stay, to the rank of their target's name.
    let mut links = vec![Vec::new(); size];
    for i in (0..entries.len()).filter(|&i| entries.own(i)) {
        if entries.kind(i) != Kind::HardLink || dropped.contains(&entries.start(i)) {
            continue;
        }
        // A target that cannot be cleaned is refused when the link is made.
        let Ok(to) = clean(entries.get(i).link) else {
            continue;
        };
        let dest = &mut links[rank_of(flist::distribute::hash_path(&to), size)];
        wire::put_bytes(dest, &to);
        wire::put_u64(dest, entries.start(i));
        wire::put_bytes(dest, entries.rel(i));
    }
    let received_links = comm.alltoallv(links);
    // The links to each replaced version (its start and class).
    let mut to_version: HashMap<(u64, u8), Vec<LinkRef<'_>>> = HashMap::new();
    for bytes in &received_links {
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            let to = r.bytes();
            let at = r.u64();
            let rel = r.bytes();
            let Some(versions) = of_name.get(to) else {
                // A name of one entry: the link gets that entry, as it is.
                continue;
            };
            // The version the link refers to: the last of its name before it.
            let n = versions.partition_point(|&(v, _)| v < at);
            if n == 0 || n == versions.len() {
                // None before it (it links to whatever is there, as GNU tar), or the last.
                continue;
            }
            let (v, class) = versions[n - 1];
            to_version
                .entry((v, class as u8))
                .or_default()
                .push((at, rel));
        }
    }
    let mut decided = Vec::new();
    for ((v, class), mut links) in to_version {
        links.sort_unstable_by_key(|&(at, _)| at);
        let (first_at, first_rel) = links[0];
        match Class::from_byte(class) {
            Class::Carried => {
                decided.push(CARRIED);
                wire::put_u64(&mut decided, v);
                wire::put_bytes(&mut decided, first_rel);
                decided.push(CARRIER);
                wire::put_u64(&mut decided, first_at);
                for &(at, _) in &links[1..] {
                    decided.push(RELINKED);
                    wire::put_u64(&mut decided, at);
                    wire::put_bytes(&mut decided, first_rel);
                }
            }
            other => {
                let what = match other {
                    Class::Dir => "a directory",
                    Class::Link => "a hard link",
                    _ => "an entry of a type that is not extracted",
                };
                for &(at, _) in &links {
                    decided.push(REFUSED);
                    wire::put_u64(&mut decided, at);
                    wire::put_bytes(
                        &mut decided,
                        format!(
                            "not linked: the entry it refers to (the one of that name before \
                             it, at byte {v}) is {what} that a later entry of the same name \
                             replaces"
                        )
                        .as_bytes(),
                    );
                }
            }
        }
    }
    drop(received_links);
    drop(of_name);
    drop(received);
    let mut out = Superseded {
        dropped,
        ..Superseded::default()
    };
    for bytes in comm.allgatherv(&decided) {
        let mut r = Reader::new(&bytes);
        while !r.is_empty() {
            let tag = r.u8();
            let at = r.u64();
            match tag {
                CARRIED => {
                    out.dropped.remove(&at);
                    out.carried.insert(at, r.bytes().to_vec());
                }
                CARRIER => {
                    out.carriers.insert(at);
                }
                RELINKED => {
                    out.relinked.insert(at, r.bytes().to_vec());
                }
                _ => {
                    let why = String::from_utf8_lossy(r.bytes()).into_owned();
                    out.refused.insert(at, why);
                }
            }
        }
    }
    out
}
