//! `steal` — the parallel runtime of mfu-rs.
//!
//! A job runs as `size()` ranks. Each rank is either an MPI process (feature `mpi`, started by
//! `mpirun`/`srun`) or a thread of one process (the `local` backend, used by tests and by runs
//! without a launcher). Algorithms are written once against [`Comm`] and run on both.
//!
//! ```
//! use steal::{local, Comm, ReduceOp};
//! let sums = local::run(4, |comm: &dyn Comm| {
//!     let mut v = [comm.rank() as u64 + 1];
//!     comm.allreduce(&mut v, ReduceOp::Sum);
//!     v[0]
//! });
//! assert_eq!(sums, vec![10; 4]);
//! ```
//!
//! [`launch::run`] picks the backend from the environment (MPI under a launcher, thread ranks
//! otherwise) and may be called any number of times per process: MPI is initialised once and
//! finalised at exit.
//!
//! On top of [`Comm`]: typed messages ([`typed`]: `CommExt::bcast_from`, `all_gather`,
//! `gather_to`, `agree`, `send_value`, over serde and postcard), [`queue::run`] (distributed work stealing with termination detection),
//! [`progress`] (periodic progress lines from rank 0), [`status`] (the live status of a run,
//! served over HTTP and written to a file) and [`signals`] (SIGINT/SIGTERM as a flag); [`stats`] measures the queue's protocol on request
//! (`MFU_RS_STATS=1`).

#![warn(missing_docs)]

pub mod comm;
pub mod launch;
pub mod launch_error;
pub mod local;
#[cfg(feature = "mpi")]
pub mod mpi_comm;
pub mod ordered;
pub mod progress;
pub mod queue;
pub mod signals;
pub mod stats;
pub mod status;
mod status_server;
pub mod typed;

pub use comm::{Comm, CommExt, ReduceOp, Tag};
pub use launch::{Backend, LaunchError, Launcher};
pub use typed::{decode, DecodeError};
