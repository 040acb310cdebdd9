//! How a Python call becomes a collective run: this process's rank of the job, on the backend
//! the environment calls for (MPI under a launcher, one local rank otherwise), with the GIL
//! released while Rust works.
//!
//! MPI is a session of the process ([`steal::launch::run`]): the first run under a launcher
//! initialises it (the module does one at import, as mpi4py's import does), later runs reuse
//! it; MPI that mpi4py (or any host) initialised is used and never finalised here. Every run
//! works on its own duplicate of `MPI_COMM_WORLD`, so a call is collective: every rank makes
//! the same calls in the same order, as with any MPI library.

use crate::errors::launch_error;
use mfu::prelude::{launch, Comm};
use pyo3::prelude::*;
use std::sync::OnceLock;

/// This process's rank and the job's size, found by the first run (at import).
static RANK_SIZE: OnceLock<(usize, usize)> = OnceLock::new();

/// Run `f` as this process's rank and return its result. Collective under MPI. Called from the
/// thread that imported the module (MPI is funneled: Python's main thread in practice).
pub fn collective<R, F>(py: Python<'_>, f: F) -> PyResult<R>
where
    R: Send,
    F: Fn(&dyn Comm) -> R + Sync + Send,
{
    let mut results = py
        .detach(|| launch::run(None, f))
        .map_err(|e| launch_error(&e))?;
    // One result per rank of this process: exactly one (no thread ranks are asked for).
    Ok(results.remove(0))
}

/// This process's rank and the job's size, starting the runtime (and MPI, under a launcher)
/// on the first call. Collective the first time.
pub fn rank_size(py: Python<'_>) -> PyResult<(usize, usize)> {
    if let Some(&rs) = RANK_SIZE.get() {
        return Ok(rs);
    }
    let rs = collective(py, |comm| (comm.rank(), comm.size()))?;
    Ok(*RANK_SIZE.get_or_init(|| rs))
}
