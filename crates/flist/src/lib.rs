//! `flist` — the distributed file list of mfu-rs.
//!
//! Each rank holds a [`FileList`]: its share of the records of a job, stored compactly (one
//! arena of path bytes plus a fixed-size metadata column, about 89 bytes per record beyond the
//! path). Collective operations work on the lists of all ranks together:
//! [`walk`](walk::walk) fills them in parallel, [`sort`](sort::sort) orders them globally,
//! [`spread`](distribute::spread) and [`remap`](distribute::remap) move records between ranks,
//! [`io`] reads and writes the list files of mpiFileUtils (cache v3/v4, text).
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

pub mod at;
pub mod beneath;
pub mod chunk;
pub mod distribute;
pub mod error;
pub mod filter;
pub mod ids;
pub mod io;
pub mod path;
pub mod record;
pub mod restat;
pub mod sort;
pub mod summary;
pub mod units;
pub mod walk;

pub use error::{Error, ItemError};
pub use ids::IdTable;
pub use record::{Detail, Entry, FileList, FileType, Meta};
