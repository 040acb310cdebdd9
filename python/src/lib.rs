//! `import mfu`: mfu-rs from Python — the distributed file list (`flist::FList`) and the
//! tools (`tools`) over the typed library, on every rank of an MPI job
//! (`mpirun -np N python script.py`) or as one rank without a launcher.
//!
//! ```python
//! import mfu, os, stat
//! flist = mfu.FList("/path/to/walk")
//! hardlinks = flist.subset(lambda f: f.type == mfu.TYPE_FILE and os.stat(f.name)[stat.ST_NLINK] > 1)
//! hardlinks.write("hardlinks.mfu")
//! ```

mod aggregate;
mod entry;
mod errors;
mod filter;
mod flist;
mod paths;
mod runtime;
mod tools;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

/// This process's rank in the job (0 without a launcher).
#[pyfunction]
fn rank(py: Python<'_>) -> PyResult<usize> {
    Ok(runtime::rank_size(py)?.0)
}

/// The number of ranks in the job (1 without a launcher).
#[pyfunction]
fn size(py: Python<'_>) -> PyResult<usize> {
    Ok(runtime::rank_size(py)?.1)
}

/// Wait until every rank calls it. Collective.
#[pyfunction]
fn barrier(py: Python<'_>) -> PyResult<()> {
    runtime::collective(py, |comm| comm.barrier())
}

/// Every rank's `obj`, as a list indexed by rank (each pickled on its rank, unpickled here):
/// to combine what each rank found in its part of a list, without mpi4py. Collective.
#[pyfunction]
fn allgather<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    let pickle = py.import("pickle")?;
    let mine: Vec<u8> = pickle.call_method1("dumps", (obj,))?.extract()?;
    let all = runtime::collective(py, |comm| comm.allgatherv(&mine))?;
    let out = PyList::empty(py);
    for bytes in all {
        out.append(pickle.call_method1("loads", (PyBytes::new(py, &bytes),))?)?;
    }
    Ok(out)
}

/// Whether this build links MPI (without it, a script always runs as one rank).
#[pyfunction]
fn mpi_built() -> bool {
    cfg!(feature = "mpi")
}

/// The module. Importing it starts the runtime: under a launcher, MPI is initialised (or the
/// MPI mpi4py initialised is used), so import it on every rank.
#[pymodule]
#[pyo3(name = "mfu")]
fn mfu_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("Error", py.get_type::<errors::Error>())?;
    for (name, kind) in entry::TYPES {
        m.add(name, kind as u8)?;
    }
    m.add_class::<flist::FList>()?;
    m.add_class::<entry::Entry>()?;
    m.add_function(wrap_pyfunction!(rank, m)?)?;
    m.add_function(wrap_pyfunction!(size, m)?)?;
    m.add_function(wrap_pyfunction!(barrier, m)?)?;
    m.add_function(wrap_pyfunction!(allgather, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_built, m)?)?;
    m.add_function(wrap_pyfunction!(tools::cp, m)?)?;
    m.add_function(wrap_pyfunction!(tools::sync, m)?)?;
    m.add_function(wrap_pyfunction!(tools::rm, m)?)?;
    m.add_function(wrap_pyfunction!(tools::tar_create, m)?)?;
    m.add_function(wrap_pyfunction!(tools::tar_extract, m)?)?;
    m.add_function(wrap_pyfunction!(tools::cmp, m)?)?;
    m.add_function(wrap_pyfunction!(tools::find, m)?)?;
    aggregate::module(m)?;
    // Start the runtime now, on every rank together (as mpi4py's import does): later calls
    // then know their rank without a collective.
    runtime::rank_size(py)?;
    Ok(())
}
