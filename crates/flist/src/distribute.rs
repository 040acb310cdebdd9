//! Moving records between ranks: even counts ([`spread`]), to a chosen rank ([`remap`]), and
//! split by depth ([`by_depth`], with [`cross_rank_parents`] saying where ranks going level by
//! level must meet).
//!
//! Records travel in the encoding of [`FileList::encode_record`] through one `alltoallv` (a
//! data format kept by hand for speed: see [`crate::record`]).
//! The id tables of the result are those of the calling rank's input list.

use crate::path;
use crate::record::{Detail, Entry, FileList, META_BYTES};
use steal::{Comm, CommExt, ReduceOp};

/// Global index of the first record rank `rank` holds once `total` records are spread evenly
/// over `size` ranks (the first `total % size` ranks hold one more).
pub fn even_start(total: u64, size: usize, rank: usize) -> u64 {
    let (n, r) = (size as u64, rank as u64);
    let base = total / n;
    let extra = total % n;
    r * base + r.min(extra)
}

/// The rank that holds global index `index` once `total` records are spread evenly over `size`
/// ranks (inverse of [`even_start`]). `index < total`.
fn even_owner(total: u64, size: usize, index: u64) -> usize {
    let n = size as u64;
    let base = total / n;
    let extra = total % n;
    let big = (base + 1) * extra; // records held by the ranks with one more
    if index < big {
        (index / (base + 1)) as usize
    } else {
        (extra + (index - big) / base) as usize
    }
}

/// Rebalance the records so that every rank holds `total / size` records, the first
/// `total % size` ranks one more, keeping the global order (rank order, then local order):
/// concatenating the ranks' results gives the same sequence as before. Collective.
///
/// Records that stay on their rank are not encoded; with one rank the list is returned as is.
pub fn spread(comm: &dyn Comm, list: FileList) -> FileList {
    let size = comm.size();
    if size == 1 {
        return list;
    }
    let (offset, total) = comm.offset_and_total(list.len() as u64);
    let me = comm.rank();
    let mut sends = vec![Vec::new(); size];
    // Local index range that stays on this rank.
    let mut keep = 0..0;
    let end = offset + list.len() as u64;
    let mut g = offset;
    while g < end {
        let dest = even_owner(total, size, g);
        let stop = even_start(total, size, dest + 1).min(end);
        let (lo, hi) = ((g - offset) as usize, (stop - offset) as usize);
        if dest == me {
            keep = lo..hi;
        } else {
            let buf = &mut sends[dest];
            for i in lo..hi {
                list.encode_record(i, buf);
            }
        }
        g = stop;
    }
    let got = comm.alltoallv(sends);
    let mut out = list.empty_like();
    for (src, bytes) in got.iter().enumerate() {
        if src == me {
            for i in keep.clone() {
                out.push_from(&list, i);
            }
        } else {
            out.decode_records(bytes);
        }
    }
    out
}

/// Send every record to the rank `dest` returns for it (`0..size`). On the receiving rank the
/// records of source rank 0 come first, then those of rank 1, ...; the records of one source
/// keep their order. Collective.
///
/// # Panics
/// When `dest` returns a rank `>= comm.size()`.
///
/// Memory: with one rank the list is returned as is. Otherwise records travel in rounds of
/// at most [`REMAP_ROUND_BYTES`] encoded bytes per rank (as many rounds on every rank), and
/// records that stay are copied without being encoded, so a rank holds its input, its output
/// and one round's buffers: about twice its records, not the four times one exchange of
/// everything costs (the encoded sends, the runtime's copies of them and what arrives).
pub fn remap(comm: &dyn Comm, list: FileList, dest: impl Fn(Entry<'_>) -> usize) -> FileList {
    remap_in_rounds(comm, list, dest, REMAP_ROUND_BYTES)
}

/// Encoded bytes a rank sends in one round of [`remap`] (to all ranks together), 16 MiB.
pub const REMAP_ROUND_BYTES: usize = 16 << 20;

fn remap_in_rounds(
    comm: &dyn Comm,
    list: FileList,
    dest: impl Fn(Entry<'_>) -> usize,
    round_bytes: usize,
) -> FileList {
    let size = comm.size();
    if size == 1 {
        for e in list.iter() {
            let d = dest(e);
            assert!(d < size, "remap: destination rank {d} out of 0..{size}");
        }
        return list;
    }
    let me = comm.rank();
    let round_bytes = round_bytes.max(1);
    let meta = match list.detail() {
        Detail::Stat => META_BYTES,
        Detail::Lite => 0,
    };
    // A record's share of a round: its encoding (see `FileList::encode_record`).
    let encoded = |i: usize| 5 + list.path(i).len() + meta;
    // The records of each round, up to `round_bytes` (at least one record).
    let round_end = |from: usize| {
        let (mut i, mut bytes) = (from, 0);
        while i < list.len() && bytes < round_bytes {
            bytes += encoded(i);
            i += 1;
        }
        i
    };
    let mut rounds = 0u64;
    let mut at = 0;
    while at < list.len() {
        at = round_end(at);
        rounds += 1;
    }
    let mut most = [rounds];
    comm.allreduce(&mut most, ReduceOp::Max);
    // What arrives from each rank, in order; joined in rank order at the end.
    let mut from: Vec<FileList> = (0..size).map(|_| list.empty_like()).collect();
    let mut next = 0;
    for _ in 0..most[0] {
        let end = round_end(next);
        let mut sends = vec![Vec::new(); size];
        for i in next..end {
            let d = dest(list.entry(i));
            assert!(d < size, "remap: destination rank {d} out of 0..{size}");
            if d == me {
                from[me].push_from(&list, i);
            } else {
                list.encode_record(i, &mut sends[d]);
            }
        }
        next = end;
        for (src, bytes) in comm.alltoallv(sends).into_iter().enumerate() {
            if src != me {
                from[src].decode_records(&bytes);
            }
        }
    }
    drop(list);
    let mut parts = from.into_iter();
    let mut out = parts.next().expect("a rank at least");
    for part in parts {
        out.append(part);
    }
    out.shrink_to_fit();
    out
}

/// Split this rank's records by path depth ([`path::depth`]): element `k` holds the local
/// records of depth `min + k`, where `min` is the smallest depth on any rank. Every rank returns
/// the same number of levels (`max - min + 1` over all ranks; none when no rank has a record),
/// so ranks can walk the levels together: top-down (mkdir) or bottom-up (rmdir, directory
/// metadata). Records keep their local order within a level. Collective: one all-reduce.
pub fn by_depth(comm: &dyn Comm, list: &FileList) -> Vec<FileList> {
    let depths: Vec<usize> = list.iter().map(|e| path::depth(e.path)).collect();
    // One Max reduction for both ends: [max depth + 1 (0 = no record), u64::MAX - min depth].
    let mut v = [0u64, 0u64];
    if let (Some(lo), Some(hi)) = (depths.iter().min(), depths.iter().max()) {
        v = [*hi as u64 + 1, u64::MAX - *lo as u64];
    }
    comm.allreduce(&mut v, ReduceOp::Max);
    if v[0] == 0 {
        return Vec::new();
    }
    let (lo, hi) = ((u64::MAX - v[1]) as usize, (v[0] - 1) as usize);
    let mut levels: Vec<FileList> = (lo..=hi).map(|_| list.empty_like()).collect();
    for (i, d) in depths.iter().enumerate() {
        levels[d - lo].push_from(list, i);
    }
    levels
}

/// Where ranks that go through directories one level at a time must meet: element `k` is true
/// when some rank holds a directory of level `k` whose parent it does not hold itself.
///
/// `dirs` are this rank's directories, each with its level (`0..levels`, the same range on
/// every rank; a parent is one level above its child): normalised paths, absolute or relative
/// alike, since a parent is found by its path. Each path must be held by one rank only (as
/// in a walk's or a read list's records): a directory held twice could be acted on by one
/// rank while the other still works below it. Going top-down (mkdir), a rank may start level
/// `k` before the others have finished level `k - 1` unless element `k` is true: each parent
/// it needs it made itself, earlier. Going bottom-up (directory metadata), likewise between
/// level `k` and level `k - 1`. A chain of 3,000 directories spread over 64 ranks thus needs
/// about 64 meetings, not 3,000. Collective: one all-reduce of a bit per level.
///
/// ```
/// use flist::distribute::cross_rank_parents;
/// // Rank 0 holds /a and /a/b, rank 1 holds /a/b/c and /a/b/c/d.
/// let meet = steal::local::run(2, |comm| {
///     let mine: &[(usize, &[u8])] = if comm.rank() == 0 {
///         &[(0, b"/a"), (1, b"/a/b")]
///     } else {
///         &[(2, b"/a/b/c"), (3, b"/a/b/c/d")]
///     };
///     cross_rank_parents(comm, 4, mine.iter().copied())
/// });
/// // Level 0's parent is held by no one; /a/b/c's parent is on another rank.
/// assert_eq!(meet[0], [true, false, true, false]);
/// assert_eq!(meet[1], meet[0]);
/// ```
pub fn cross_rank_parents<'a>(
    comm: &dyn Comm,
    levels: usize,
    dirs: impl Iterator<Item = (usize, &'a [u8])>,
) -> Vec<bool> {
    let dirs: Vec<(usize, &[u8])> = dirs.collect();
    let held: std::collections::HashSet<&[u8]> = dirs.iter().map(|&(_, p)| p).collect();
    let mut bits = vec![0u64; levels.div_ceil(64)];
    for &(level, p) in &dirs {
        if !held.contains(path::parent(p)) {
            bits[level / 64] |= 1 << (level % 64);
        }
    }
    comm.allreduce(&mut bits, ReduceOp::Or);
    (0..levels)
        .map(|k| bits[k / 64] & (1 << (k % 64)) != 0)
        .collect()
}

/// [`cross_rank_parents`] of the levels [`by_depth`] made. Collective.
pub fn levels_meet(comm: &dyn Comm, levels: &[FileList]) -> Vec<bool> {
    let dirs = levels
        .iter()
        .enumerate()
        .flat_map(|(k, level)| level.iter().map(move |e| (k, e.path)));
    cross_rank_parents(comm, levels.len(), dirs)
}

/// FNV-1a, 64 bits (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`) of `bytes`.
///
/// Fixed forever and independent of the platform, the process and the run, so every rank (and
/// every tool run) maps a relative path to the same rank: `remap(comm, list, |e|
/// (hash_path(rel(e.path)) % size as u64) as usize)` brings the source and destination entries
/// of one path together.
pub fn hash_path(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_owner_inverts_even_start() {
        for total in [0u64, 1, 5, 17, 100] {
            for size in 1..9 {
                for r in 0..size {
                    for g in even_start(total, size, r)..even_start(total, size, r + 1) {
                        assert_eq!(even_owner(total, size, g), r, "total {total} size {size}");
                    }
                }
                assert_eq!(even_start(total, size, size), total);
            }
        }
    }

    #[test]
    fn even_splits_cover_everything_once_in_order() {
        for size in 1..9 {
            for n in [0u64, 1, 5, 44, 1000, u64::MAX / 2] {
                let mut next = 0;
                for rank in 0..size {
                    let first = even_start(n, size, rank);
                    assert_eq!(first, next);
                    next += even_start(n, size, rank + 1) - first;
                }
                assert_eq!(next, n);
            }
        }
        assert_eq!(even_start(44, 3, 2), 30);
        assert_eq!(even_start(44, 3, 3) - even_start(44, 3, 2), 14);
        assert_eq!(even_start(44, 3, 1), 15);
    }

    #[test]
    fn remap_in_small_rounds_gives_what_one_exchange_gives() {
        use crate::record::{FileType, Meta};
        // Uneven lists (rank r holds 7 * r + 3 records), all kinds of destinations, rounds of
        // a record or two: the same records in the same order as one round of everything.
        for detail in [Detail::Lite, Detail::Stat] {
            let lists = |round: usize| {
                steal::local::run(3, |comm| {
                    let mut list = FileList::new(detail);
                    for i in 0..7 * comm.rank() + 3 {
                        let path = format!("/r{}/{}{i}", comm.rank(), "x".repeat(i % 5));
                        let meta = Meta {
                            mode: 0o100600,
                            size: i as u64,
                            ..Meta::default()
                        };
                        list.push(path.as_bytes(), FileType::File, Some(meta));
                    }
                    let to = |e: Entry<'_>| (hash_path(e.path) % 3) as usize;
                    let out = remap_in_rounds(comm, list, to, round);
                    assert!(out.iter().all(|e| to(e) == comm.rank()));
                    out.iter()
                        .map(|e| (e.path.to_vec(), e.kind, e.meta))
                        .collect::<Vec<_>>()
                })
            };
            let once = lists(usize::MAX);
            assert_eq!(once.iter().map(Vec::len).sum::<usize>(), 3 + 10 + 17);
            for round in [1, 20, 150] {
                assert_eq!(lists(round), once, "{detail:?}, rounds of {round} bytes");
            }
        }
    }

    /// A chain of 200 directories (with a sibling at every level) spread evenly over 4 ranks:
    /// ranks must meet only where a level's directory has its parent on another rank, the
    /// three places the chain crosses from one rank to the next (and level 0, whose parent
    /// no rank holds).
    #[test]
    fn a_spread_chain_meets_only_where_it_crosses_ranks() {
        use crate::FileType;
        let out = steal::local::run(4, |comm| {
            let mut list = FileList::new(Detail::Lite);
            if comm.rank() == 0 {
                let mut path = b"/top".to_vec();
                for level in 0..200 {
                    list.push(&path, FileType::Dir, None);
                    list.push(&[&path[..], b"/side"].concat(), FileType::Dir, None);
                    path.extend_from_slice(format!("/d{level}").as_bytes());
                }
            }
            let list = spread(comm, list);
            let levels = by_depth(comm, &list);
            // The deepest level this rank holds whose parent is on the rank before.
            let first = list.iter().map(|e| path::depth(e.path)).min();
            (levels_meet(comm, &levels), first.map(|d| d - 1))
        });
        let meet = &out[0].0;
        assert!(out.iter().all(|(m, _)| m == meet), "every rank agrees");
        // Level k holds depth k + 1; 400 records spread 100 per rank: ranks 1, 2, 3 start
        // with a chain directory whose parent is on the rank before.
        let crossings: Vec<usize> = (0..meet.len()).filter(|&k| meet[k]).collect();
        let want: Vec<usize> = std::iter::once(0)
            .chain(out[1..].iter().map(|(_, first)| first.expect("records")))
            .collect();
        assert_eq!(crossings, want);
        assert_eq!(meet.len(), 201);
    }

    #[test]
    fn fnv1a_reference_values() {
        assert_eq!(hash_path(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash_path(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash_path(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
