//! The tools of mfu-rs, each a library function taking typed options and a [`steal::Comm`], and
//! the multi-call command line that drives them. The crate re-exports the libraries underneath
//! ([`steal`], the runtime; [`flist`], the distributed file list), and [`prelude`] gathers what
//! an embedding program uses most: one dependency is enough.
//!
//! ```
//! use mfu::prelude::*;
//! let tmp = tempfile::tempdir().unwrap();
//! let (tree, list) = (tmp.path().join("tree"), tmp.path().join("list.mfu"));
//! std::fs::create_dir_all(tree.join("sub")).unwrap();
//! std::fs::write(tree.join("sub/a"), b"data").unwrap();
//!
//! // What `mfu-rs walk -q -o list.mfu tree` does, from Rust:
//! let args = ["mfu-rs", "walk", "-q", "-o"].map(std::ffi::OsString::from);
//! let code = mfu::main_with_args([&args[..], &[list.clone().into(), tree.clone().into()]].concat());
//! assert_eq!(code, 0);
//!
//! // The same walk through the libraries, and the list read back: one local rank here (no
//! // launcher); every rank of the job under `mpirun`.
//! let counts = launch::run(None, |comm| {
//!     let walked = walk(comm, &[&tree], &WalkOptions::default()).into_result().unwrap();
//!     let read = io::read(comm, &list).unwrap();
//!     (summarize(comm, &walked).total, summarize(comm, &read).files)
//! });
//! assert_eq!(counts.unwrap(), [(3, 1)]);
//! ```

#![warn(missing_docs)]

pub mod bcast;
pub mod bz2;
pub mod chmod;
pub(crate) mod cli;
pub mod cmp;
pub mod cp;
pub mod du;
pub mod dup;
pub(crate) mod engine;
pub mod filemaker;
pub mod find;
pub mod grep;
pub mod parallel;
pub mod pfa;
pub mod reln;
pub mod rm;
pub mod sh;
pub mod stripe;
pub mod sync;
pub mod tar;
pub mod walk;

pub use cli::dispatch::main_with_args;
pub use engine::input::{Input, Listed};
pub use engine::status::Status;

/// The runtime: ranks over MPI or threads, collectives, work stealing (the `mfu-steal` crate).
pub use steal;

/// The distributed file list: walk, filter, sort, list files (the `mfu-flist` crate).
pub use flist;

/// What a program embedding mfu-rs uses most, in one `use mfu::prelude::*;`: the runtime's
/// [`Comm`](prelude::Comm) and [`launch`](prelude::launch), the file list with its
/// [`walk`](prelude::walk()) and [`io`](prelude::io), and the types the tools report with.
///
/// ```
/// use mfu::prelude::*;
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a"), b"data").unwrap();
/// // One rank here; the same code runs on every rank under `mpirun`.
/// let files = launch::run(None, |comm| {
///     let list = walk(comm, &[dir.path()], &WalkOptions::default()).into_result().unwrap();
///     summarize(comm, &list).files
/// });
/// assert_eq!(files.unwrap(), [1]);
/// ```
pub mod prelude {
    pub use crate::engine::context::{Collect, Context, Discard, Error, Events, ToolReport};
    pub use crate::engine::select::Rules;
    pub use crate::{Input, Status};
    pub use flist::io::{self, Format};
    pub use flist::summary::{summarize, Summary};
    pub use flist::walk::{self, walk, WalkOptions, Walked};
    pub use flist::{Detail, Entry, FileList, FileType, Meta};
    pub use steal::{launch, local, Comm, CommExt, ReduceOp};
}

/// The types the tools' options and reports are made of, shared by several tools (the tool
/// modules hold their own).
pub mod types {
    pub use crate::engine::checkpoint::Choice as CheckpointChoice;
    pub use crate::engine::compare_expr::Output;
    pub use crate::engine::context::Summary;
    pub use crate::engine::copy::drive::IoOptions;
    pub use crate::engine::copy::meta::XattrPolicy;
    pub use crate::engine::digest::HashKind;
    pub use crate::engine::lustre::{LustreHandle, StripeOptions};
    pub use crate::engine::manifest::{ManifestOptions, Summary as ManifestSummary};
    pub use crate::engine::select::{Action, Rules};
    pub use crate::engine::verify::Summary as VerifySummary;
}

/// What the binaries, the integration tests and the benches reach inside the crate: no
/// stable API (it changes with the code, without notice); embedding programs use the tools'
/// `Options`, `run` and `Report`, [`Input`] and the [`prelude`]. The paths mirror the
/// crate's private modules, so a test names an item as the code does.
#[doc(hidden)]
pub mod unstable {
    /// The command line.
    pub mod cli {
        /// The multi-call command line.
        pub mod dispatch {
            pub use crate::cli::dispatch::{
                command, exec_mpi_binary, main_without_mpi, remove_at_exit_in_binaries, TOOLS,
            };
        }
        /// A tool on the command line.
        pub mod tool {
            pub use crate::cli::tool::CliTool;
        }
        /// `mfu-rs tar`.
        pub mod tar {
            pub use crate::cli::tar::{Tar, TarArgs};
        }
        /// `mfu-rs sync`.
        pub mod sync {
            pub use crate::cli::sync::Sync;
        }
        /// `mfu-rs cp`.
        pub mod cp {
            pub use crate::cli::cp::Cp;
        }
        /// `mfu-rs stripe`.
        pub mod stripe {
            pub use crate::cli::stripe::{summary, Stripe, StripeToolArgs};
        }
    }
    /// tar's headers and seek tables, read by the tests and the benches.
    pub mod tar {
        /// tar headers.
        pub mod format {
            pub use crate::tar::format::{decode_entry, Header, Kind};
        }
    }
    /// The frame codecs' seek table (seekable zstd, gzip members, dbz2).
    pub mod codec {
        pub use crate::engine::codec::table::SeekTable;
    }
    /// The engine's test seams and checks.
    pub mod engine {
        /// Lustre stripes of a walked list (`walk -v`).
        pub mod walk_stripes {
            pub use crate::engine::walk_stripes::{stripes, summary};
        }
        /// The copy engine's journals of partial copies.
        pub mod copy {
            pub use crate::engine::copy::journal;
        }
        /// The window within which a change is not seen by a (size, mtime, ctime) check.
        pub mod racy {
            pub use crate::engine::racy::WINDOW;
        }
        /// Changes made at a tool's pause after its listing.
        pub mod test_seam {
            pub use crate::engine::test_seam::change_at_next_pause;
        }
        /// Digests.
        pub mod digest {
            pub use crate::engine::digest::{hex, HashKind};
        }
    }
}
