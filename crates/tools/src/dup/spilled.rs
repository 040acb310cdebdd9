//! dup's grouping out of core (issue 34): when the list and the grouping tables outgrow the
//! memory limit, the phases 2-4 of [`super`] run through sorted runs in spill files
//! ([`flist::spill::keyed`]) instead of tables in memory, and find the same groups.
//!
//! 1. size: every name of a non-empty regular file goes, in rounds of bounded bytes, to the
//!    rank that owns its size (as in memory: [`size_owner`]), keyed by (size, device, inode),
//!    and spills as sorted runs there. Their merge gives each size whole and in order, the
//!    names of one inode one after the other: a size held by one inode is dropped unhashed.
//! 2. prefix: the other inodes are hashed a batch at a time (work stealing over all ranks, as
//!    in memory) and every name goes to the rank owning its prefix hash ([`hash_owner`]: equal
//!    ranges of hashes, so a group is decided on one rank and ranks concatenate in hash
//!    order), keyed by (hash, size, device, inode). The merge gives each (hash, size) group
//!    whole; a group of files read whole by the prefix is final, the other groups' files go on.
//! 3. full: those are hashed whole, one per work item, and keyed the same way on the rank of
//!    their hash, with the final groups of step 2 (their hash is that of all their bytes, so
//!    they stay on their rank). The merge gives the groups of identical files in (hash, size)
//!    order, each held whole only once it is known: what is printed and listed.
//!
//! Phase 1's names come from the list in memory ([`spill_list`]), or from a v3/v4 list file
//! read a piece at a time, each piece stat'ed again and filtered as a whole list would be
//! ([`read_list`]): then the list is never held whole.
//!
//! Memory: a quarter of the limit buffers the runs being written, a quarter the blocks of
//! the runs being merged, and a quarter (over the ranks) the batch of inodes hashed and sent
//! in a round (up to half the limit for the first piece of a list file); what it keeps beyond
//! that is the groups found (the output), one size's first inode, and the names of one group
//! of equal (hash, size).

use super::hash::PREFIX_BYTES;
use super::inode::{hash_owner, size_owner, Hash, Inode, HASH_BYTES};
use super::{hash_all, Options, Resume};
use crate::engine::context::Stopped;
use flist::restat::{restat, Which};
use flist::spill::keyed::{KeyedMerge, KeyedRuns, KeyedSorted};
use flist::spill::SpillDir;
use flist::{FileList, FileType, Meta};
use std::sync::atomic::Ordering;
use steal::progress::Progress;
use steal::{Comm, CommExt, ReduceOp};

/// What the out-of-core grouping spilled; the same on every rank.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DupSpill {
    /// Sorted runs written by all ranks (by size, by prefix hash, by hash).
    pub runs: u64,
    /// Bytes written to spill files by all ranks together.
    pub spill_bytes: u64,
    /// The most any one rank wrote to its spill files.
    pub spill_bytes_max_rank: u64,
}

/// The groups found out of core, and the counts of [`super::Report`] this rank holds.
pub(super) struct Grouped {
    /// This rank's groups of identical inodes, in (hash, size) order, each sorted by first
    /// name.
    pub done: Vec<Vec<Inode>>,
    /// Inodes of non-empty regular files whose size this rank owns.
    pub files: u64,
    /// Of those, the inodes sharing their size with another.
    pub same_size: u64,
    /// Inodes above the prefix length in a group of equal size and prefix (on this rank).
    pub same_prefix: u64,
    /// A stop cut the hashing short (the same on every rank).
    pub interrupted: bool,
    /// How far the hashing got (over all ranks).
    pub stopped: Stopped,
    /// What spilled (over all ranks).
    pub spill: DupSpill,
}

/// Bytes of a key by size: size, device, inode number (big-endian: they sort as numbers).
const SIZE_KEY: usize = 24;
/// Bytes of a key by hash: the hash, then a key by size.
const HASH_KEY: usize = HASH_BYTES + SIZE_KEY;
/// Bytes of a hash key that make a group: the hash and the size.
const GROUP_KEY: usize = HASH_BYTES + 8;

/// How the memory limit is shared out, in bytes.
struct Budget {
    /// Records buffered before a run spills.
    buffer: u64,
    /// Read blocks of the runs being merged, over all of them.
    blocks: u64,
    /// Bytes a rank sends (or hashes) in a round.
    batch: usize,
}

impl Budget {
    fn of(limit: u64, ranks: usize) -> Budget {
        Budget {
            buffer: limit / 4,
            blocks: limit / 4,
            batch: (limit / 4 / ranks as u64).max(4 << 10) as usize,
        }
    }
}

/// The key by size of an inode's names: size, device, inode number.
fn size_key(size: u64, meta: &Meta) -> [u8; SIZE_KEY] {
    let mut k = [0; SIZE_KEY];
    k[..8].copy_from_slice(&size.to_be_bytes());
    k[8..16].copy_from_slice(&meta.dev.to_be_bytes());
    k[16..].copy_from_slice(&meta.ino.to_be_bytes());
    k
}

/// The key by hash of an inode's names: its hash, then its key by size.
fn hash_key(inode: &Inode) -> [u8; HASH_KEY] {
    let mut k = [0; HASH_KEY];
    k[..HASH_BYTES].copy_from_slice(&inode.hash);
    k[HASH_BYTES..].copy_from_slice(&size_key(inode.size, &inode.names[0].1));
    k
}

/// Bytes an inode takes in memory (about).
fn inode_bytes(i: &Inode) -> usize {
    std::mem::size_of::<Inode>()
        + i.names
            .iter()
            .map(|n| std::mem::size_of::<(Vec<u8>, Meta)>() + n.0.len())
            .sum::<usize>()
}

/// Append every name of `inode` to `out` as keyed records by hash.
fn encode_by_hash(inode: &Inode, out: &mut Vec<u8>) {
    let key = hash_key(inode);
    for (path, meta) in &inode.names {
        KeyedRuns::encode(&key, path, FileType::File, meta, out);
    }
}

/// Group the names of `by_size` ([`spill_list`], [`read_list`]) out of core within `limit`
/// bytes, with spill files in `dir`. Hash failures are reported and counted into `failed`. A
/// spill failure (a full TMPDIR: the error names it) is agreed by all ranks and returned.
/// Collective.
pub(super) fn grouped(
    comm: &dyn Comm,
    options: &Options,
    by_size: KeyedSorted,
    failed: &mut u64,
    resume: Option<Resume<'_>>,
    limit: u64,
    dir: &SpillDir,
) -> flist::error::Result<Grouped> {
    let budget = Budget::of(limit, comm.size());
    let progress = options.context.progress(comm.rank(), "Hashed");
    let mut spilled = [0u64; 2];
    let mut count = |s: &KeyedSorted| {
        spilled[0] += s.runs();
        spilled[1] += s.spilled_bytes();
    };

    // 1. By size (done by the caller).
    count(&by_size);
    let mut sizes = SizeGroups {
        inodes: comm.agree(by_size.merge(budget.blocks))?.into(),
        size: None,
        first: None,
        files: 0,
        same_size: 0,
    };

    // 2. Prefixes of the inodes of shared sizes.
    let mut rounds = Rounds {
        comm,
        options,
        progress: &progress,
        resume,
    };
    let mut by_prefix = KeyedRuns::new(dir, HASH_KEY, budget.buffer);
    let mut interrupted = rounds.hash(
        PREFIX_BYTES,
        16,
        |batch, _| sizes.fill(batch, budget.batch),
        &mut by_prefix,
        failed,
    )?;
    let (files, same_size) = (sizes.files, sizes.same_size);
    drop(sizes);
    drop(by_size);
    let by_prefix = comm.agree(by_prefix.finish())?;
    count(&by_prefix);

    // 3. Whole files of the groups above the prefix length; the others are final.
    let mut prefixes = HashGroups::from(comm.agree(by_prefix.merge(budget.blocks))?);
    let mut same_prefix = 0u64;
    let mut by_hash = KeyedRuns::new(dir, HASH_KEY, budget.buffer);
    let mut pick = |batch: &mut Vec<Inode>, finals: &mut Vec<Inode>| {
        prefixes.fill(batch, finals, budget.batch, &mut same_prefix)
    };
    if !interrupted {
        interrupted = rounds.hash(u64::MAX, 1, pick, &mut by_hash, failed)?;
    } else {
        // Stopped: the final groups are kept (as in memory), the rest is not hashed.
        let local = (|| -> flist::error::Result<()> {
            let (mut batch, mut finals) = (Vec::new(), Vec::new());
            while pick(&mut batch, &mut finals)? {
                batch.clear();
                push_by_hash(&mut by_hash, finals.drain(..))?;
            }
            push_by_hash(&mut by_hash, finals.drain(..))
        })();
        comm.agree(local)?;
    }
    drop(prefixes);
    drop(by_prefix);
    let by_hash = comm.agree(by_hash.finish())?;
    count(&by_hash);

    // The groups of identical files.
    let local = (|| -> flist::error::Result<Vec<Vec<Inode>>> {
        let mut groups = HashGroups::from(by_hash.merge(budget.blocks)?);
        let mut done = Vec::new();
        while let Some(mut g) = groups.next_group()? {
            if g.len() > 1 {
                g.sort_by(|a, b| a.first_path().cmp(b.first_path()));
                done.push(g);
            }
        }
        Ok(done)
    })();
    let done = comm.agree(local)?;

    let stopped = Stopped {
        done: comm.sum(progress.items.load(Ordering::Relaxed)),
        total: progress.total_items.load(Ordering::Relaxed),
        what: "files",
    };
    let mine = spilled[1];
    comm.allreduce(&mut spilled, ReduceOp::Sum);
    Ok(Grouped {
        done,
        files,
        same_size,
        same_prefix,
        interrupted,
        stopped,
        spill: DupSpill {
            runs: spilled[0],
            spill_bytes: spilled[1],
            spill_bytes_max_rank: comm.max(mine),
        },
    })
}

/// Phase 1 from a list in memory: every name of `list` (this rank's non-empty regular files)
/// goes to the rank owning its size, into sorted runs keyed by size there, within `limit`
/// bytes. Collective.
pub(super) fn spill_list(
    comm: &dyn Comm,
    list: FileList,
    dir: &SpillDir,
    limit: u64,
) -> flist::error::Result<KeyedSorted> {
    let mut next = 0;
    by_size(
        comm,
        dir,
        &Budget::of(limit, comm.size()),
        |sends, batch| {
            let mut filled = 0;
            while next < list.len() && filled < batch {
                let e = list.entry(next);
                next += 1;
                if let Some(meta) = e.meta {
                    filled += send_by_size(e.path, &meta, sends);
                }
            }
            Ok(next < list.len())
        },
    )
}

/// What [`read_list`] found.
pub(super) enum Read {
    /// Not a cache list in a file: read it whole, as usual.
    NotCache,
    /// No rank's share outgrew half the limit: this rank's share as read (not stat'ed again),
    /// with the list's id tables.
    Whole(FileList),
    /// The list outgrew it: read a piece at a time into phase 1.
    Streamed(Streamed),
}

/// A list file read a piece at a time into phase 1: its names stat'ed again, filtered and
/// spilled by size, never held whole.
pub(super) struct Streamed {
    /// The names of the non-empty regular files, in runs keyed by size on their size's rank.
    pub by_size: KeyedSorted,
    /// This rank's empty regular files.
    pub empty: u64,
    /// This rank's names that could not be stat'ed again (reported).
    pub failed: u64,
    /// The [`crate::engine::checkpoint::record_sums`] of this rank's non-empty regular
    /// files, and their count: the list's digest.
    pub sums: [u64; 2],
    /// Records those sums are of.
    pub records: u64,
    /// An empty list with the list's id tables (for `-o` in v4).
    pub ids: FileList,
}

/// Read the cache list `path` (`-i`) a piece at a time (collective): whole when no rank's
/// share outgrows half of `limit`, else straight into phase 1, each piece stat'ed again
/// (failures reported), without the checkpoints directory `ours`, its empty files counted.
/// Errors (agreed): the list's, or the spill's.
pub(super) fn read_list(
    comm: &dyn Comm,
    options: &Options,
    path: &[u8],
    cwd: &[u8],
    ours: Option<&[u8]>,
    limit: u64,
    dir: &SpillDir,
) -> Result<Read, ReadFailed> {
    let Some(mut share) = flist::io::open_cache_share(comm, path).map_err(ReadFailed::List)? else {
        return Ok(Read::NotCache);
    };
    let mut ids = FileList::new(flist::Detail::Stat);
    ids.users = std::mem::take(&mut share.users);
    ids.groups = std::mem::take(&mut share.groups);
    let half = limit / 2;
    let rec = share.record_bytes().max(1);
    let chunk = ((4 << 20) / rec).min(half / rec).max(1) as usize;
    let mut buf = FileList::new(flist::Detail::Stat);
    let local = loop {
        if buf.heap_bytes() as u64 >= half {
            break Ok(true);
        }
        match share.read_into(&mut buf, chunk) {
            Ok(0) => break Ok(false),
            Ok(_) => {}
            Err(e) => break Err(e),
        }
    };
    if !comm.any(comm.agree(local).map_err(ReadFailed::List)?) {
        buf.users = ids.users.clone();
        buf.groups = ids.groups.clone();
        return Ok(Read::Whole(buf));
    }
    let budget = Budget::of(limit, comm.size());
    let mut pieces = Pieces {
        options,
        cwd,
        ours,
        per_piece: (budget.batch as u64 / (rec + SIZE_KEY as u64)).max(1) as usize,
        pending: FileList::new(flist::Detail::Stat),
        at: 0,
        empty: 0,
        failed: 0,
        sums: [0; 2],
        records: 0,
    };
    pieces.take(buf);
    let by_size = by_size(comm, dir, &budget, |sends, batch| {
        pieces.fill(&mut share, sends, batch)
    })
    .map_err(|e| {
        if super::about_input(&e, path) {
            ReadFailed::List(e)
        } else {
            ReadFailed::Spill(e)
        }
    })?;
    Ok(Read::Streamed(Streamed {
        by_size,
        empty: pieces.empty,
        failed: pieces.failed,
        sums: pieces.sums,
        records: pieces.records,
        ids,
    }))
}

/// Why [`read_list`] failed.
pub(super) enum ReadFailed {
    /// The list cannot be opened or read, or is damaged (the error names it).
    List(flist::Error),
    /// The spill failed (a full TMPDIR: the error names it).
    Spill(flist::Error),
}

/// The pieces of a list read by [`read_list`], made ready for phase 1.
struct Pieces<'a> {
    options: &'a Options,
    cwd: &'a [u8],
    ours: Option<&'a [u8]>,
    /// Records read a piece.
    per_piece: usize,
    /// The non-empty regular files of the last piece, stat'ed again; the next to send.
    pending: FileList,
    at: usize,
    empty: u64,
    failed: u64,
    sums: [u64; 2],
    records: u64,
}

impl Pieces<'_> {
    /// Stat the names of `raw` again and keep its non-empty regular files to send.
    fn take(&mut self, raw: FileList) {
        let (mut list, errors) = restat(raw.normalized(self.cwd), Which::All, false);
        for e in &errors {
            self.options.context.error(e);
        }
        self.failed += errors.len() as u64;
        crate::engine::checkpoint::without_checkpoints(&mut list, self.ours);
        let (list, empty) = super::regular_files(list);
        self.empty += empty;
        let sums = crate::engine::checkpoint::record_sums(&list);
        self.sums = [
            self.sums[0].wrapping_add(sums[0]),
            self.sums[1].wrapping_add(sums[1]),
        ];
        self.records += list.len() as u64;
        self.pending = list;
        self.at = 0;
    }

    /// Encode names into `sends` (by the rank of their size) until they take `batch` bytes,
    /// reading pieces of `share` as needed; false once the share is read.
    fn fill(
        &mut self,
        share: &mut flist::io::CacheShare,
        sends: &mut [Vec<u8>],
        batch: usize,
    ) -> flist::error::Result<bool> {
        let mut filled = 0;
        while filled < batch {
            if self.at == self.pending.len() {
                let mut raw = FileList::new(flist::Detail::Stat);
                if share.read_into(&mut raw, self.per_piece)? == 0 {
                    return Ok(false);
                }
                self.take(raw);
                continue;
            }
            let e = self.pending.entry(self.at);
            self.at += 1;
            if let Some(meta) = e.meta {
                filled += send_by_size(e.path, &meta, sends);
            }
        }
        Ok(true)
    }
}

/// Encode the name `path` keyed by size into `sends` of the rank owning its size; the bytes
/// added.
fn send_by_size(path: &[u8], meta: &Meta, sends: &mut [Vec<u8>]) -> usize {
    let dest = size_owner(meta.size, sends.len());
    let before = sends[dest].len();
    KeyedRuns::encode(
        &size_key(meta.size, meta),
        path,
        FileType::File,
        meta,
        &mut sends[dest],
    );
    sends[dest].len() - before
}

/// Send the names `fill` encodes (into one buffer per rank, up to a batch of bytes a round;
/// false once it has no more) to their ranks, into sorted runs keyed by size there.
/// Collective; a failure on any rank ends the rounds and is agreed.
fn by_size(
    comm: &dyn Comm,
    dir: &SpillDir,
    budget: &Budget,
    mut fill: impl FnMut(&mut [Vec<u8>], usize) -> flist::error::Result<bool>,
) -> flist::error::Result<KeyedSorted> {
    let mut runs = KeyedRuns::new(dir, SIZE_KEY, budget.buffer);
    let mut local: flist::error::Result<()> = Ok(());
    loop {
        let mut sends = vec![Vec::new(); comm.size()];
        let mut more = false;
        if local.is_ok() {
            match fill(&mut sends, budget.batch) {
                Ok(m) => more = m,
                Err(e) => local = Err(e),
            }
        }
        for part in comm.alltoallv(sends) {
            if local.is_ok() && !part.is_empty() {
                local = runs.push_encoded(&part);
            }
        }
        let mut state = [u64::from(more), u64::from(local.is_err())];
        comm.allreduce(&mut state, ReduceOp::Max);
        if state[0] == 0 || state[1] == 1 {
            break;
        }
    }
    comm.agree(local)?;
    comm.agree(runs.finish())
}

/// Push every name of `inodes` into `runs`, keyed by hash.
fn push_by_hash(
    runs: &mut KeyedRuns<'_>,
    inodes: impl Iterator<Item = Inode>,
) -> flist::error::Result<()> {
    for i in inodes {
        let key = hash_key(&i);
        for (path, meta) in &i.names {
            runs.push(&key, path, FileType::File, meta)?;
        }
    }
    Ok(())
}

/// The inodes of a merge of keyed records: the names of one key (of one inode; a name whose
/// inode number is unknown is an inode of its own) one after the other.
struct Inodes<'a> {
    merge: KeyedMerge<'a>,
    /// An inode read ahead (by [`HashGroups`]), with its key.
    peeked: Option<(Vec<u8>, Inode)>,
}

impl<'a> From<KeyedMerge<'a>> for Inodes<'a> {
    fn from(merge: KeyedMerge<'a>) -> Inodes<'a> {
        Inodes {
            merge,
            peeked: None,
        }
    }
}

impl Inodes<'_> {
    /// The next inode and its key: its names sorted by path bytes, without repeats (as
    /// [`super::inode::inodes_of`] makes them); the hash is the key's, if it has one.
    fn next(&mut self) -> flist::error::Result<Option<(Vec<u8>, Inode)>> {
        if let Some(p) = self.peeked.take() {
            return Ok(Some(p));
        }
        let Some(first) = self.merge.peek() else {
            return Ok(None);
        };
        let key = first.key.to_vec();
        let unknown = first.meta.ino == 0 && first.meta.dev == 0;
        let mut names = vec![(first.path.to_vec(), first.meta)];
        self.merge.advance()?;
        while let Some(r) = self.merge.peek() {
            if r.key != key.as_slice() || (unknown && r.path != names[0].0.as_slice()) {
                break;
            }
            if r.path != names.last().expect("one at least").0.as_slice() {
                names.push((r.path.to_vec(), r.meta));
            }
            self.merge.advance()?;
        }
        let tail = &key[key.len() - SIZE_KEY..];
        let be = |at: usize| u64::from_be_bytes(tail[at..at + 8].try_into().expect("8 bytes"));
        let mut hash: Hash = [0; HASH_BYTES];
        if key.len() == HASH_KEY {
            hash.copy_from_slice(&key[..HASH_BYTES]);
        }
        let inode = Inode {
            size: be(0),
            dev: be(8),
            ino: be(16),
            names,
            hash,
        };
        Ok(Some((key, inode)))
    }
}

/// Sizes in order from the merge by size: the inodes of a size shared by more than one.
struct SizeGroups<'a> {
    inodes: Inodes<'a>,
    /// The size being read.
    size: Option<u64>,
    /// Its first inode, until a second one shows the size is shared.
    first: Option<Inode>,
    /// Inodes read.
    files: u64,
    /// Inodes given out (sharing their size).
    same_size: u64,
}

impl SizeGroups<'_> {
    /// Move inodes of shared sizes into `batch` until they take `bytes`; false once every
    /// size was read.
    fn fill(&mut self, batch: &mut Vec<Inode>, bytes: usize) -> flist::error::Result<bool> {
        let mut held = 0;
        while held < bytes {
            let Some((_, inode)) = self.inodes.next()? else {
                return Ok(false);
            };
            self.files += 1;
            if self.size != Some(inode.size) {
                self.size = Some(inode.size);
                self.first = Some(inode);
                continue;
            }
            for i in self.first.take().into_iter().chain([inode]) {
                self.same_size += 1;
                held += inode_bytes(&i);
                batch.push(i);
            }
        }
        Ok(true)
    }
}

/// Groups of equal (hash, size) in order from a merge by hash.
struct HashGroups<'a> {
    inodes: Inodes<'a>,
}

impl<'a> From<KeyedMerge<'a>> for HashGroups<'a> {
    fn from(merge: KeyedMerge<'a>) -> HashGroups<'a> {
        HashGroups {
            inodes: merge.into(),
        }
    }
}

impl HashGroups<'_> {
    /// The inodes of the next (hash, size), in inode order.
    fn next_group(&mut self) -> flist::error::Result<Option<Vec<Inode>>> {
        let Some((key, first)) = self.inodes.next()? else {
            return Ok(None);
        };
        let mut group = vec![first];
        while let Some((k, i)) = self.inodes.next()? {
            if k[..GROUP_KEY] != key[..GROUP_KEY] {
                self.inodes.peeked = Some((k, i));
                break;
            }
            group.push(i);
        }
        Ok(Some(group))
    }

    /// Move the members of groups of equal size and prefix into `batch` (above the prefix
    /// length: to be hashed whole, counted into `same_prefix`) or `finals` (read whole by the
    /// prefix pass: a group of identical files), until they take `bytes`; false once every
    /// group was read.
    fn fill(
        &mut self,
        batch: &mut Vec<Inode>,
        finals: &mut Vec<Inode>,
        bytes: usize,
        same_prefix: &mut u64,
    ) -> flist::error::Result<bool> {
        let mut held = 0;
        while held < bytes {
            let Some(group) = self.next_group()? else {
                return Ok(false);
            };
            if group.len() < 2 {
                continue;
            }
            held += group.iter().map(inode_bytes).sum::<usize>();
            if group[0].size <= PREFIX_BYTES {
                finals.extend(group);
            } else {
                *same_prefix += group.len() as u64;
                batch.extend(group);
            }
        }
        Ok(true)
    }
}

/// What a round of hashing needs.
struct Rounds<'a> {
    comm: &'a dyn Comm,
    options: &'a Options,
    progress: &'a Progress,
    resume: Option<Resume<'a>>,
}

impl Rounds<'_> {
    /// Hash the first `limit` bytes of the inodes `pick` gives (a batch at a time, `per_item`
    /// inodes a work item, over all ranks) and send every name to the rank owning its hash,
    /// into `into` keyed by hash; `pick`'s finals (already hashed) go into `into` here. Until
    /// no rank's `pick` has more, a stop, or a spill failure (agreed, returned). Returns
    /// whether a stop cut it short. Collective.
    fn hash(
        &mut self,
        limit: u64,
        per_item: usize,
        mut pick: impl FnMut(&mut Vec<Inode>, &mut Vec<Inode>) -> flist::error::Result<bool>,
        into: &mut KeyedRuns<'_>,
        failed: &mut u64,
    ) -> flist::error::Result<bool> {
        let comm = self.comm;
        let context = &self.options.context;
        let mut local: flist::error::Result<()> = Ok(());
        loop {
            let (mut batch, mut finals) = (Vec::new(), Vec::new());
            let mut more = false;
            if local.is_ok() {
                match pick(&mut batch, &mut finals) {
                    Ok(m) => more = m,
                    Err(e) => local = Err(e),
                }
                if local.is_ok() {
                    local = push_by_hash(into, finals.into_iter());
                }
            }
            let mut totals = [
                batch.len() as u64,
                batch.iter().map(|i| i.size.min(limit)).sum(),
            ];
            comm.allreduce(&mut totals, ReduceOp::Sum);
            self.progress
                .total_items
                .fetch_add(totals[0], Ordering::Relaxed);
            self.progress
                .total_bytes
                .fetch_add(totals[1], Ordering::Relaxed);
            let (hashed, errors, cut) = hash_all(
                comm,
                self.options,
                batch,
                limit,
                per_item,
                self.progress,
                self.resume,
            );
            *failed += errors.len() as u64;
            for e in errors {
                context.error(e);
            }
            let mut sends = vec![Vec::new(); comm.size()];
            for i in &hashed {
                encode_by_hash(i, &mut sends[hash_owner(&i.hash, comm.size())]);
            }
            drop(hashed);
            for part in comm.alltoallv(sends) {
                if local.is_ok() && !part.is_empty() {
                    local = into.push_encoded(&part);
                }
            }
            let mut state = [
                u64::from(more && local.is_ok()),
                u64::from(local.is_err()),
                u64::from(cut),
            ];
            comm.allreduce(&mut state, ReduceOp::Max);
            if state[1] == 1 || state[2] == 1 {
                comm.agree(local)?;
                return Ok(true);
            }
            if state[0] == 0 {
                comm.agree(local)?;
                return Ok(false);
            }
        }
    }
}
