//! Global counts of a distributed list: how many records, where mine start, what kinds.
//!
//! ```
//! use flist::{summary::summarize, Detail, FileList, FileType};
//! let sums = steal::local::run(2, |comm| {
//!     let mut list = FileList::new(Detail::Lite);
//!     list.push(if comm.rank() == 0 { b"/a" } else { b"/bc" }, FileType::Dir, None);
//!     summarize(comm, &list)
//! });
//! assert_eq!((sums[1].total, sums[1].offset, sums[1].max_path_len, sums[1].dirs), (2, 1, 3, 2));
//! ```

use crate::record::{FileList, FileType};
use steal::{Comm, ReduceOp};

/// Global facts about a list, the same on every rank except [`Summary::offset`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records on all ranks together.
    pub total: u64,
    /// Global index of this rank's first record (records of ranks `0..rank` come before).
    pub offset: u64,
    /// Longest path on any rank, in bytes (0 for an empty list).
    pub max_path_len: u64,
    /// Regular files on all ranks.
    pub files: u64,
    /// Directories on all ranks.
    pub dirs: u64,
    /// Symbolic links on all ranks.
    pub links: u64,
    /// Records of any other type (fifos, sockets, devices, unknown) on all ranks.
    pub others: u64,
    /// Sum of the sizes of the regular files on all ranks, in bytes (0 for lite lists, which
    /// carry no sizes).
    pub bytes: u64,
}

/// Count the records of every rank's `list`. Collective: one exclusive scan and one
/// all-reduce, whatever the list size.
///
/// Counts are taken from each record's type column ([`FileList::kind`]); `bytes` adds the
/// `size` of the regular files of stat lists.
pub fn summarize(comm: &dyn Comm, list: &FileList) -> Summary {
    // Local sums: records, files, dirs, links, others, bytes.
    let mut sums = [0u64; 6];
    let mut max_len = 0u64;
    sums[0] = list.len() as u64;
    for e in list.iter() {
        max_len = max_len.max(e.path.len() as u64);
        match e.kind {
            FileType::File => {
                sums[1] += 1;
                sums[5] += e.meta.map_or(0, |m| m.size);
            }
            FileType::Dir => sums[2] += 1,
            FileType::Symlink => sums[3] += 1,
            _ => sums[4] += 1,
        }
    }
    let mut before = sums;
    comm.exscan(&mut before);
    // Inclusive prefix sums never decrease from rank to rank, so their maximum over ranks is
    // the total: one Max reduction gives the totals and the longest path together.
    let mut reduced = [0u64; 7];
    for (r, (b, s)) in reduced.iter_mut().zip(before.iter().zip(&sums)) {
        *r = b.wrapping_add(*s);
    }
    reduced[6] = max_len;
    comm.allreduce(&mut reduced, ReduceOp::Max);
    Summary {
        total: reduced[0],
        offset: before[0],
        max_path_len: reduced[6],
        files: reduced[1],
        dirs: reduced[2],
        links: reduced[3],
        others: reduced[4],
        bytes: reduced[5],
    }
}
