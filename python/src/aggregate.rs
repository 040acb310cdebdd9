//! `mfu.pfa`: aggregates of the PFA library (many named logical streams in one shared file)
//! from Python.
//!
//! ```python
//! import mfu.pfa
//! w = mfu.pfa.create("run.pfa")                 # on every rank
//! w.append(f"rank{mfu.rank()}/log", b"step 1\n")  # this rank's streams
//! w.append(f"rank{mfu.rank()}/log", b"step 2\n")
//! w.close()                                     # collective: the aggregate appears whole
//! idx = mfu.pfa.open("run.pfa")                 # any rank, any rank count
//! idx.read("rank0/log")                         # b"step 1\nstep 2\n"
//! ```
//!
//! Writing is collective only at `close`: a Python call is one run of the runtime, and the
//! aggregate's ranks exist only within a run, so a [`Writer`] keeps this rank's streams (in
//! memory, in the order they were begun) and `close` writes them all in one collective call.

use crate::errors::error;
use crate::paths::path_bytes;
use crate::runtime::collective;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A library error as `mfu.Error` (its message names the aggregate and what is wrong).
fn pfa_error(e: &pfa::Error, operation: &str, path: &[u8]) -> PyErr {
    error(e, Some(path), Some(operation))
}

fn as_path(p: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(p))
}

/// An aggregate being written by every rank: this rank's streams, written at [`Writer::close`].
#[pyclass(module = "mfu.pfa", name = "Writer")]
pub struct Writer {
    path: Vec<u8>,
    options: pfa::Options,
    new_version: bool,
    /// (name, meta, data) in the order the streams were begun.
    streams: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    by_name: HashMap<Vec<u8>, usize>,
    closed: bool,
}

#[pymethods]
impl Writer {
    /// Append `data` to this rank's stream `name` (str or bytes), beginning it if new; `meta`
    /// (bytes kept in the index with the stream) is taken when the stream is begun.
    #[pyo3(signature = (name, data, meta=None))]
    fn append(
        &mut self,
        name: &Bound<'_, PyAny>,
        data: &[u8],
        meta: Option<&[u8]>,
    ) -> PyResult<()> {
        if self.closed {
            return Err(error(
                "append to a closed aggregate writer",
                Some(&self.path),
                Some("append"),
            ));
        }
        let name = path_bytes(name)?;
        let i = match self.by_name.get(&name) {
            Some(&i) => i,
            None => {
                self.streams
                    .push((name.clone(), meta.unwrap_or_default().to_vec(), Vec::new()));
                self.by_name.insert(name, self.streams.len() - 1);
                self.streams.len() - 1
            }
        };
        self.streams[i].2.extend_from_slice(data);
        Ok(())
    }

    /// The names of this rank's streams so far (bytes), in the order they were begun.
    fn names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.streams.iter().map(|s| PyBytes::new(py, &s.0)))
    }

    /// Write every rank's streams and complete the aggregate (collective: every rank calls it).
    /// Returns a dict: `version`, `streams`, `logical_bytes`, `bytes_written`,
    /// `chunks_written`, `chunks_reused`, `direct_io` (over all ranks). A name written by two
    /// ranks, or any failure, raises `mfu.Error` and leaves no aggregate (or no new version).
    fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.closed {
            return Err(error(
                "the aggregate writer is closed already",
                Some(&self.path),
                Some("close"),
            ));
        }
        self.closed = true;
        let streams = std::mem::take(&mut self.streams);
        let (path, options, new_version) = (&self.path, &self.options, self.new_version);
        let written = collective(py, |comm| {
            let mut agg = if new_version {
                pfa::Aggregate::new_version(comm, as_path(path), options)
            } else {
                pfa::Aggregate::create(comm, as_path(path), options)
            }?;
            for (name, meta, data) in &streams {
                agg.write_stream(name, meta, data)?;
            }
            agg.close()
        })?
        .map_err(|e| pfa_error(&e, "close", path))?;
        let d = PyDict::new(py);
        d.set_item("version", written.version)?;
        d.set_item("streams", written.streams)?;
        d.set_item("logical_bytes", written.logical_bytes)?;
        d.set_item("bytes_written", written.bytes_written)?;
        d.set_item("chunks_written", written.chunks_written)?;
        d.set_item("chunks_reused", written.chunks_reused)?;
        d.set_item("direct_io", written.direct_io)?;
        Ok(d)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the writer when the block ends without an exception (collective); after an
    /// exception nothing is written.
    fn __exit__(
        &mut self,
        py: Python<'_>,
        kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if kind.is_none() && !self.closed {
            self.close(py)?;
        }
        self.closed = true;
        Ok(false)
    }
}

/// Begin writing the aggregate at `path` (on every rank; nothing is written before
/// `close()`). `new_version=True` adds a version to an existing aggregate, storing only the
/// chunks whose contents changed; `chunk_size` in bytes (default: the file system's policy);
/// `direct_io` writes chunks with O_DIRECT where the file system allows it.
#[pyfunction]
#[pyo3(signature = (path, *, new_version=false, chunk_size=None, direct_io=false))]
pub fn create(
    path: &Bound<'_, PyAny>,
    new_version: bool,
    chunk_size: Option<u64>,
    direct_io: bool,
) -> PyResult<Writer> {
    Ok(Writer {
        path: path_bytes(path)?,
        options: pfa::Options {
            chunk_size,
            direct_io,
            ..pfa::Options::default()
        },
        new_version,
        streams: Vec::new(),
        by_name: HashMap::new(),
        closed: false,
    })
}

/// A complete aggregate, opened for reading (by this process alone: not collective).
#[pyclass(module = "mfu.pfa", name = "Index", unsendable)]
pub struct Index {
    index: pfa::Index,
    path: Vec<u8>,
}

impl Index {
    fn version(&self, version: Option<u64>) -> u64 {
        version.unwrap_or_else(|| self.index.latest())
    }
}

#[pymethods]
impl Index {
    /// The version numbers, oldest first.
    fn versions(&self) -> Vec<u64> {
        self.index.versions().iter().map(|v| v.version).collect()
    }

    /// The latest version's number.
    #[getter]
    fn latest(&self) -> u64 {
        self.index.latest()
    }

    /// The streams of `version` (default: the latest), by name: a list of dicts with `name`
    /// (bytes), `meta` (bytes), `size` (bytes) and `chunks`.
    #[pyo3(signature = (version=None))]
    fn streams<'py>(&self, py: Python<'py>, version: Option<u64>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        let streams = self
            .index
            .streams(self.version(version))
            .map_err(|e| pfa_error(&e, "list streams", &self.path))?;
        for s in streams {
            let d = PyDict::new(py);
            d.set_item("name", PyBytes::new(py, s.name))?;
            d.set_item("meta", PyBytes::new(py, s.meta))?;
            d.set_item("size", s.size)?;
            d.set_item("chunks", s.chunks)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// The whole stream `name` (str or bytes) of `version` (default: the latest), every chunk
    /// checked against its checksum.
    #[pyo3(signature = (name, version=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'_, PyAny>,
        version: Option<u64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let name = path_bytes(name)?;
        let data = self
            .index
            .read_stream(&name, self.version(version))
            .map_err(|e| pfa_error(&e, "read stream", &self.path))?;
        Ok(PyBytes::new(py, &data))
    }
}

/// Open the aggregate at `path` for reading: its versions and streams, checked (a cut or
/// damaged aggregate raises `mfu.Error` naming it).
#[pyfunction]
pub fn open(path: &Bound<'_, PyAny>) -> PyResult<Index> {
    let path = path_bytes(path)?;
    let index = pfa::Index::open(as_path(&path)).map_err(|e| pfa_error(&e, "open", &path))?;
    Ok(Index { index, path })
}

/// The submodule `mfu.pfa`, registered in `sys.modules` so that `import mfu.pfa` works.
pub fn module(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = parent.py();
    let m = PyModule::new(py, "pfa")?;
    m.add_class::<Writer>()?;
    m.add_class::<Index>()?;
    m.add_function(wrap_pyfunction!(create, &m)?)?;
    m.add_function(wrap_pyfunction!(open, &m)?)?;
    parent.add_submodule(&m)?;
    py.import("sys")?
        .getattr("modules")?
        .set_item("mfu.pfa", &m)?;
    Ok(())
}
