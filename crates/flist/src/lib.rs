//! `flist` — the distributed file list of mfu-rs.
//!
//! Each rank holds a [`FileList`]: its share of the records of a job, stored compactly (one
//! arena of path bytes plus fixed-size columns: 60 bytes per record beyond the path with stat
//! metadata, which [`packed`] stores losslessly, 5 without). Collective operations work on the
//! lists of all ranks together: [`walk`](walk::walk) fills them in parallel,
//! [`sort`](sort::sort) orders them globally, [`spread`](distribute::spread) and
//! [`remap`](distribute::remap) move records between ranks, [`io`] reads and writes the list
//! files of mpiFileUtils (cache v3/v4, text).
//!
//! ```
//! use flist::walk::{walk, WalkOptions};
//! use flist::{io, FileType};
//! let tmp = tempfile::tempdir().unwrap();
//! let tree = tmp.path().join("tree");
//! std::fs::create_dir_all(tree.join("sub")).unwrap();
//! std::fs::write(tree.join("sub/big"), vec![0u8; 4096]).unwrap();
//! std::fs::write(tree.join("small"), b"x").unwrap();
//! // One local rank (thread); `steal::launch::run` runs the same closure on every MPI rank.
//! let written = steal::local::run(1, |comm| {
//!     // Walk (failures are errors: the walk must be complete), keep the files over 1 KiB
//!     // (tested in parallel), write them as an mpiFileUtils list.
//!     let list = walk(comm, &[&tree], &WalkOptions::default()).into_result().unwrap();
//!     let big = list.filter_par(|e| e.kind == FileType::File && e.meta.unwrap().size > 1024);
//!     io::write(comm, &big, tmp.path().join("big.mfu"), io::Format::V4).unwrap();
//!     io::read(comm, tmp.path().join("big.mfu")).unwrap()
//! });
//! assert_eq!(written[0].path(0), tree.join("sub/big").as_os_str().as_encoded_bytes());
//! ```
//!
//! A list is built record by record too:
//!
//! ```
//! use flist::{FileList, FileType, Detail};
//! let mut list = FileList::new(Detail::Lite);
//! list.push(b"/data/run\xff1", FileType::Dir, None);
//! assert_eq!(list.path(0), b"/data/run\xff1");
//! assert_eq!(list.kind(0), FileType::Dir);
//! ```
//!
//! Paths are bytes everywhere: any name a file system can hold survives every operation.

#![warn(missing_docs)]

pub mod at;
pub mod atomic;
pub mod beneath;
pub mod chunk;
mod deep_dirs;
pub mod distribute;
pub mod error;
pub mod filter;
pub mod ids;
pub mod io;
pub mod noatime;
pub mod packed;
pub mod parent_dir;
pub mod path;
pub mod posix_regex;
pub mod record;
pub mod restat;
pub mod sort;
pub mod spill;
pub mod summary;
pub mod units;
pub mod walk;

pub use error::{Error, ItemError};
pub use ids::IdTable;
pub use record::{Detail, Entry, FileList, FileType, Meta};
