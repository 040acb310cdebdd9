//! Lists larger than memory: a per-rank memory budget, spill files, sorted runs and their
//! merge, and the operations built on them.
//!
//! - [`MemoryLimit`]: how much a rank may hold (`--memory-limit`, or a share of the node's
//!   memory over the ranks on it);
//! - [`SpillDir`], [`SpillFile`]: unnamed files in `TMPDIR` (or `--tmpdir`), gone whatever
//!   way the process ends; a full file system is an error naming the directory;
//! - [`run`]: sorted runs of records in the list's own record encoding
//!   ([`crate::FileList::encode_record`]), written through a buffer and read back by block;
//! - `merge`: the k-way merge of runs in the order of [`crate::sort`] (crate-private while that
//!   order is);
//! - [`groups`]: records spilled into groups by a small key (a depth) and read back a group
//!   at a time (rm's directories, deepest first);
//! - [`keyed`]: records in the order of a byte key of their own (dup's grouping by size and
//!   inode, then by hash), through the same runs and merge;
//! - [`join`](mod@join): two lists paired by path relative to their roots (a merge join of two sorted
//!   streams, each rank a range of relative paths): `cmp`'s pairing of SRC and DEST;
//! - [`overflow`]: a list made and read back in order, held up to a budget and the rest
//!   written out (sync's plan of what to create, and its actions);
//! - [`walked`]: a walk's own records beyond the limit, spilled as it goes
//!   ([`crate::walk::WalkOptions::spill`]), written to a list by a merge or joined;
//! - [`sort_list_file`]: a list file sorted into another at bounded memory per rank, the
//!   first operation out of core (the rest of issue 34, sync's merge join, cmp, tar's plan,
//!   dup, reuse these pieces).
//!
//! ```
//! use flist::spill::{sort_list_file, SortFileOptions, SpillDir, Sorted};
//! use flist::{io, sort::parse_keys, Detail, FileList, FileType, Meta};
//! let tmp = tempfile::tempdir().unwrap();
//! let (input, output) = (tmp.path().join("in.mfu"), tmp.path().join("out.mfu"));
//! let dir = SpillDir::new(Some(tmp.path().as_os_str().as_encoded_bytes()));
//! let keys = parse_keys("-size").unwrap();
//! let runs = steal::local::run(2, |comm| {
//!     let mut list = FileList::new(Detail::Stat);
//!     for i in 0..200u64 {
//!         let meta = Meta { mode: 0o100644, size: i * 7 % 200, ..Meta::default() };
//!         list.push(format!("/d/r{}f{i}", comm.rank()).as_bytes(), FileType::File, Some(meta));
//!     }
//!     io::write(comm, &list, &input, io::Format::V4).unwrap();
//!     // 8 KiB a rank: the records spill.
//!     let opts = SortFileOptions { keys: &keys, limit: 8 << 10, dir: &dir, stop: None };
//!     match sort_list_file(comm, &input, &output, &opts).unwrap() {
//!         Sorted::Spilled(report) => report.runs,
//!         _ => panic!("should spill"),
//!     }
//! });
//! assert!(runs[0] > 2);
//! let sorted = steal::local::run(1, |comm| io::read(comm, &output).unwrap());
//! let sizes: Vec<u64> = sorted[0].iter().map(|e| e.meta.unwrap().size).collect();
//! assert_eq!(sizes.len(), 400);
//! assert!(sizes.windows(2).all(|w| w[0] >= w[1]));
//! ```

pub mod dir;
pub mod groups;
pub mod join;
pub mod keyed;
pub mod limit;
pub(crate) mod merge;
pub mod overflow;
pub mod run;
pub mod sort;
pub mod walked;

pub use dir::{SpillDir, SpillFile};
pub use join::{join, rank_of, spill_side, JoinOptions, JoinSide, Joined, Joint};
pub use limit::{LimitSource, MemoryLimit};
pub use overflow::{OverflowList, Pieces};
pub use sort::{sort_list_file, SortFileOptions, Sorted, SpillReport};
pub use walked::{WalkRuns, WalkSpill};
