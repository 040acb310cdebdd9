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

use crate::tar::extract::beneath::clean;
use crate::tar::extract::entries::Entries;
use crate::tar::format::Kind;
use crate::tar::index::scan::Parts;
use serde::{Deserialize, Serialize};
use serde_bytes::Bytes;
use std::collections::{HashMap, HashSet};
use steal::{typed, Comm, CommExt};

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
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
}

/// A hard link as the rank of its target's name sees it: (its start, its name).
type LinkRef<'a> = (u64, &'a [u8]);

/// Each name's entries (start, class) on the rank of its hash, in archive order once sorted;
/// borrowed from the messages that brought them.
type Versions<'a> = HashMap<&'a [u8], Vec<(u64, Class)>>;

/// A decision about a hard link to a replaced version (step 4), shared with every rank.
#[derive(Serialize, Deserialize)]
enum Decision {
    /// The replaced entry at `at` is extracted under the name `rel`.
    Carried {
        at: u64,
        #[serde(with = "serde_bytes")]
        rel: Vec<u8>,
    },
    /// The hard link at `at` carries a replaced version: it is not linked.
    Carrier { at: u64 },
    /// The hard link at `at` links to `rel`, which carries its version.
    Relinked {
        at: u64,
        #[serde(with = "serde_bytes")]
        rel: Vec<u8>,
    },
    /// The hard link at `at` is not made, for the reason `why`.
    Refused { at: u64, why: String },
}

/// The entries (on any rank) that a later entry of the same name replaces, and what becomes of
/// the hard links that refer to them. `entries` are this rank's (those it owns take part), the
/// stream split as `parts`. Collective.
pub(super) fn superseded(comm: &dyn Comm, parts: &Parts, entries: &Entries) -> Superseded {
    let candidates = shared_hashes(comm, entries);
    let received = names_of(comm, parts, entries, candidates);
    let mut of_name: Versions<'_> = HashMap::new();
    for bytes in &received {
        for record in typed::each::<(&Bytes, u64, Class)>(bytes) {
            let (rel, at, class) = typed::sent(record);
            of_name.entry(rel).or_default().push((at, class));
        }
    }
    let mut losers = Vec::new();
    for versions in of_name.values_mut() {
        versions.sort_unstable_by_key(|&(at, _)| at);
        // All but the last (a lone name is a hash collision's, and replaces nothing).
        losers.extend(versions[..versions.len() - 1].iter().map(|&(at, _)| at));
    }
    let dropped: HashSet<u64> = comm.all_gather(&losers).into_iter().flatten().collect();
    let mut out = Superseded {
        dropped,
        ..Superseded::default()
    };
    if out.dropped.is_empty() {
        // Nothing replaced (the same on every rank): no link can refer to a replaced version,
        // and the links' names need not travel.
        return out;
    }
    let decided = links_to_replaced(comm, entries, &out.dropped, &of_name);
    for d in comm.all_gather(&decided).into_iter().flatten() {
        match d {
            Decision::Carried { at, rel } => {
                out.dropped.remove(&at);
                out.carried.insert(at, rel);
            }
            Decision::Carrier { at } => {
                out.carriers.insert(at);
            }
            Decision::Relinked { at, rel } => {
                out.relinked.insert(at, rel);
            }
            Decision::Refused { at, why } => {
                out.refused.insert(at, why);
            }
        }
    }
    out
}

/// Step 1: (hash, start) of every entry this rank owns to the hash's rank, which sorts what it
/// received and keeps the starts that share a hash with another entry. Collective.
fn shared_hashes(comm: &dyn Comm, entries: &Entries) -> Vec<u64> {
    let records = hashes_here(comm, entries);
    duplicate_starts(records)
}

/// Step 1's exchange: the (hash, start) of every entry owned on any rank whose hash picks this
/// rank. Each record is encoded straight into its message and decoded from it (no list of
/// them beside the messages), each message dropped once read; one rank sends nothing. At 10^6
/// entries on one rank, 16 MB where the list, its encoding and its decoding held 48.
/// Collective.
pub(super) fn hashes_here(comm: &dyn Comm, entries: &Entries) -> Vec<(u64, u64)> {
    let size = comm.size();
    let mine = (0..entries.len()).filter(|&i| entries.own(i)).map(|i| {
        let hash = flist::distribute::hash_path(entries.rel(i));
        (hash, entries.start(i))
    });
    if size == 1 {
        let mut records = Vec::with_capacity(entries.len());
        records.extend(mine);
        return records;
    }
    let mut sends = vec![Vec::new(); size];
    for (hash, start) in mine {
        typed::encode_into(&(hash, start), &mut sends[rank_of(hash, size)]);
    }
    let mut records: Vec<(u64, u64)> = Vec::new();
    for bytes in comm.alltoallv(sends) {
        records.extend(typed::each::<(u64, u64)>(&bytes).map(typed::sent));
    }
    records
}

/// The starts of `records` (hash, start) that share their hash with another record.
pub(super) fn duplicate_starts(mut records: Vec<(u64, u64)>) -> Vec<u64> {
    records.sort_unstable();
    records
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|run| run.len() > 1)
        .flatten()
        .map(|&(_, start)| start)
        .collect()
}

/// Steps 2 and 3: the `candidates` (starts) to the ranks that own them, which send their
/// names (name, start, class) to the name's hash's rank. Returns the messages received there.
/// Collective.
fn names_of(
    comm: &dyn Comm,
    parts: &Parts,
    entries: &Entries,
    candidates: Vec<u64>,
) -> Vec<Vec<u8>> {
    let size = comm.size();
    let mut asks = vec![Vec::new(); size];
    for at in candidates {
        asks[parts.owner(at)].push(at);
    }
    let asks = asks.iter().map(typed::encode).collect();
    let mut names = vec![Vec::new(); size];
    for bytes in comm.alltoallv(asks) {
        for at in typed::sent(typed::decode::<Vec<u64>>(&bytes)) {
            let i = entries
                .find(at)
                .expect("a rank owns the entries whose start lies in its part");
            let rel = entries.rel(i);
            let to = &mut names[rank_of(flist::distribute::hash_path(rel), size)];
            typed::encode_into(&(Bytes::new(rel), at, Class::of(entries.kind(i))), to);
        }
    }
    comm.alltoallv(names)
}

/// Step 4: every hard link this rank owns that is not replaced itself to the rank of its
/// target's name, which decides, for each replaced version links refer to, which link carries
/// it and what becomes of the others. Collective.
fn links_to_replaced(
    comm: &dyn Comm,
    entries: &Entries,
    dropped: &HashSet<u64>,
    of_name: &Versions<'_>,
) -> Vec<Decision> {
    let size = comm.size();
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
        typed::encode_into(
            &(
                Bytes::new(&to),
                entries.start(i),
                Bytes::new(entries.rel(i)),
            ),
            dest,
        );
    }
    let received = comm.alltoallv(links);
    // The links to each replaced version (its start and class).
    let mut to_version: HashMap<(u64, Class), Vec<LinkRef<'_>>> = HashMap::new();
    for bytes in &received {
        for link in typed::each::<(&Bytes, u64, &Bytes)>(bytes) {
            let (to, at, rel) = typed::sent(link);
            let Some(versions) = of_name.get(&to[..]) else {
                // A name of one entry: the link gets that entry, as it is.
                continue;
            };
            // The version the link refers to: the last of its name before it.
            let n = versions.partition_point(|&(v, _)| v < at);
            if n == 0 || n == versions.len() {
                // None before it (it links to whatever is there, as GNU tar), or the last.
                continue;
            }
            to_version
                .entry(versions[n - 1])
                .or_default()
                .push((at, rel));
        }
    }
    let mut decided = Vec::new();
    for ((v, class), mut links) in to_version {
        links.sort_unstable_by_key(|&(at, _)| at);
        let (first_at, first_rel) = links[0];
        let what = match class {
            Class::Carried => {
                decided.push(Decision::Carried {
                    at: v,
                    rel: first_rel.to_vec(),
                });
                decided.push(Decision::Carrier { at: first_at });
                decided.extend(links[1..].iter().map(|&(at, _)| Decision::Relinked {
                    at,
                    rel: first_rel.to_vec(),
                }));
                continue;
            }
            Class::Dir => "a directory",
            Class::Link => "a hard link",
            Class::Other => "an entry of a type that is not extracted",
        };
        decided.extend(links.iter().map(|&(at, _)| Decision::Refused {
            at,
            why: format!(
                "not linked: the entry it refers to (the one of that name before it, at byte \
                 {v}) is {what} that a later entry of the same name replaces"
            ),
        }));
    }
    decided
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::format::{Decoded, Header};

    fn entry(path: &str, start: u64) -> Decoded {
        Decoded {
            header: Header {
                path: path.as_bytes().to_vec(),
                kind: Kind::File,
                mode: 0o644,
                uid: 0,
                gid: 0,
                uname: Vec::new(),
                gname: Vec::new(),
                size: 0,
                mtime: 0,
                mtime_nsec: 0,
                link: Vec::new(),
                dev_major: 0,
                dev_minor: 0,
                xattrs: Vec::new(),
                projid: Default::default(),
            },
            start,
            data: start + 512,
            next: start + 512,
            sparse: None,
        }
    }

    /// Rank `rank`'s entries of an archive of 3,000 entries where every 100th entry from the
    /// 1,000th on is named as the one 1,000 before would be; the first entry of each rank's part is the tail of the
    /// entry before (not its own).
    fn entries_of(rank: u64, ranks: u64) -> Entries {
        let per = 3000 / ranks;
        let mut e = Entries::with_capacity(per as usize + 1);
        let name = |i: u64| {
            let n = if i % 100 == 0 && i >= 1000 {
                i - 1000
            } else {
                i
            };
            format!("d/f{n}")
        };
        let first = rank * per;
        if first > 0 {
            e.push(
                name(first - 1).as_bytes(),
                &entry(&name(first - 1), (first - 1) * 512),
                false,
            );
        }
        for i in first..first + per {
            e.push(name(i).as_bytes(), &entry(&name(i), i * 512), true);
        }
        e
    }

    #[test]
    fn one_rank_keeps_one_exact_list_of_hashes_and_any_number_finds_the_same_duplicates() {
        let one = steal::local::run(1, |comm| {
            let e = entries_of(0, 1);
            let records = hashes_here(comm, &e);
            (records.len(), records.capacity(), duplicate_starts(records))
        });
        let (len, capacity, mut want) = one.into_iter().next().unwrap();
        assert_eq!(len, 3000);
        assert_eq!(capacity, 3000, "sized once, no list beside it");
        want.sort_unstable();
        // Names f0, f100, ... f900 are entries i and i + 1000 (entry 2000 + i is named
        // f{1000 + i}, which no other entry is).
        let expected: Vec<u64> = (0..1000)
            .step_by(100)
            .flat_map(|i| [i * 512, (i + 1000) * 512])
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(want, expected);
        let three = steal::local::run(3, |comm| {
            let e = entries_of(comm.rank() as u64, 3);
            let records = hashes_here(comm, &e);
            let here = records
                .iter()
                .all(|&(hash, _)| rank_of(hash, 3) == comm.rank());
            (here, records.len(), duplicate_starts(records))
        });
        assert!(
            three.iter().all(|(here, _, _)| *here),
            "each hash on its rank"
        );
        assert_eq!(
            three.iter().map(|(_, n, _)| n).sum::<usize>(),
            3000,
            "owned only"
        );
        let mut got: Vec<u64> = three.into_iter().flat_map(|(_, _, d)| d).collect();
        got.sort_unstable();
        assert_eq!(got, want);
    }
}
