//! `tar -x` beyond the memory limit: the entries a piece at a time, in archive order.
//!
//! A rank holds a record and the name of each of its entries while it extracts them (about
//! 120 bytes an entry at 10^6 entries of 60-byte names, measured; up to [`ENTRY_BYTES`] while
//! they are read). When that outgrows half the limit on any rank, the entries found are cut, in archive order, into pieces of at most
//! [`per_rank`] entries per rank; each piece is spread over the ranks by its entries
//! ([`piece`]) and extracted with every phase of the unlimited run, one piece after another.
//! Directories' metadata wait for the end (a later piece's entries would change their
//! times): spilled by depth ([`DirsLater`]) and set deepest first, each directory's header
//! decoded again from the archive.
//!
//! A piece's parts end at entries' headers, so no file's data reaches into the next piece
//! (a big file is written by the rank that has its header). Before the first piece, the names
//! are hashed a piece at a time (16 bytes an entry at the hash's rank, freed before the
//! extraction): tar keeps the last entry of a name, and a piece extracted cannot be taken
//! back, so an archive with a name twice is extracted whole, in memory (said on stderr); so is
//! a compressed archive (its ranks' parts fall on frames).
//!
//! Still held beyond the limit: the offsets of the rank's entries (8 bytes each, as found by
//! the index or the scan), and a piece's entries.

use crate::tar::index::scan::{Located, Parts};
use flist::spill::groups::{Grouped, Groups};
use flist::spill::SpillDir;
use flist::{Detail, FileList, FileType, Meta};
use steal::{Comm, CommExt};

/// Bytes a rank holds per entry of a piece while it extracts it, names included: measured at
/// 10^6 entries of 60-byte paths in 3 pieces (heaptrack: 87 MB of heap at peak for 493,447
/// entries, the name arena grown by doubling).
pub(super) const ENTRY_BYTES: u64 = 176;

/// The share of the memory limit a piece's entries take (the rest: the offsets, buffers, and
/// what the allocator keeps of the piece before).
const PIECE_SHARE: u64 = 2;

/// This rank's own offsets (those in its part: the one before it, first when there, is the
/// previous rank's).
fn own(located: &Located, rank: usize) -> &[u64] {
    let start = located.parts.of(rank).0;
    let from = located.offsets.partition_point(|&o| o < start);
    &located.offsets[from..]
}

/// Entries per rank in a piece when the entries of some rank outgrow their share of `limit`
/// bytes ([`PIECE_SHARE`], at [`ENTRY_BYTES`] each); `None` when every rank's fit. Collective.
pub(super) fn per_rank(comm: &dyn Comm, located: &Located, limit: u64) -> Option<u64> {
    let mine = own(located, comm.rank()).len() as u64;
    let most = comm.max(mine);
    let fit = (limit / PIECE_SHARE / ENTRY_BYTES).max(1);
    (most > fit).then_some(fit)
}

/// The pieces of `per_rank` entries per rank the archive's entries make. Collective.
pub(super) fn count(comm: &dyn Comm, located: &Located, per_rank: u64) -> u64 {
    let total = comm.sum(own(located, comm.rank()).len() as u64);
    total.div_ceil(per_rank * comm.size() as u64).max(1)
}

/// The entries of piece `s` (of `per_rank` entries per rank) that are this rank's, with the
/// entry before them (its data may reach into them), and how the piece is split over the
/// ranks: a [`Located`] as [`super::run`] extracts it. Collective.
pub(super) fn piece(comm: &dyn Comm, located: &Located, per_rank: u64, s: u64) -> Located {
    let (rank, size) = (comm.rank(), comm.size());
    let mine = own(located, rank);
    let first = comm
        .allgather_u64(mine.len() as u64)
        .iter()
        .take(rank)
        .sum::<u64>();
    let stream = (located.parts.of(0).0, located.parts.of(size - 1).1);
    // The piece's bounds: the offset of global entry `s * K * n + q * K`, for q in 0..=n
    // (the stream's end past the last entry), gathered from the ranks that hold them.
    let at = |q: usize| s * per_rank * size as u64 + q as u64 * per_rank;
    let held: Vec<(u64, u64)> = (0..=size)
        .filter_map(|q| {
            let g = at(q).checked_sub(first)?;
            mine.get(g as usize).map(|&o| (q as u64, o))
        })
        .collect();
    let mut bounds = vec![stream.1; size + 1];
    for (q, o) in comm.all_gather(&held).into_iter().flatten() {
        bounds[q as usize] = o;
    }
    if s == 0 {
        bounds[0] = stream.0;
    }
    let parts = Parts::from_bounds(bounds.clone());
    // This rank's offsets in the piece, after the last of its own before it.
    let a = mine.partition_point(|&o| o < bounds[0]);
    let b = mine.partition_point(|&o| o < bounds[size]);
    let from = a.saturating_sub(usize::from(a > 0));
    let offsets = crate::tar::index::scan::to_parts(comm, &parts, &mine[from..b]);
    Located {
        offsets,
        parts,
        globals: located.globals.clone(),
        total: located.total,
        cut: located.cut,
        source: located.source,
        member: located.member,
        damage: None,
        rejected: Vec::new(),
        end: located.end,
    }
}

/// Directories whose metadata waits for the end, spilled by depth: each a record whose path
/// is its cleaned name and whose size is its header's offset.
pub(super) struct DirsLater<'a> {
    groups: Groups<'a>,
    one: FileList,
}

/// Bytes of directory records buffered before they are written out: this share of the
/// memory limit, within [`DIRS_BUDGET`].
const DIRS_SHARE: u64 = 16;
/// See [`DIRS_SHARE`] (bytes).
const DIRS_BUDGET: (u64, u64) = (1 << 10, 1 << 20);

impl<'a> DirsLater<'a> {
    /// Records to spill in `dir`, buffered in a share of `limit` (bytes).
    pub fn new(dir: &'a SpillDir, limit: u64) -> DirsLater<'a> {
        let budget = (limit / DIRS_SHARE).clamp(DIRS_BUDGET.0, DIRS_BUDGET.1);
        DirsLater {
            groups: Groups::new(dir, Detail::Stat, budget as usize),
            one: FileList::new(Detail::Stat),
        }
    }

    /// Make the spill file now (an error names the directory; a full one says so).
    pub fn open(&mut self) -> flist::error::Result<()> {
        self.groups.open()
    }

    /// Keep the directory `rel` whose header is at `start` for the end.
    pub fn push(&mut self, rel: &[u8], start: u64) -> flist::error::Result<()> {
        self.one = FileList::new(Detail::Stat);
        let meta = Meta {
            size: start,
            ..Meta::default()
        };
        self.one.push(rel, FileType::Dir, Some(meta));
        let depth = flist::path::depth(rel) as u64;
        self.groups.push(depth, &self.one, 0)
    }

    /// The records, ready to be read back by depth.
    pub fn finish(self) -> flist::error::Result<Grouped> {
        self.groups.finish()
    }
}
