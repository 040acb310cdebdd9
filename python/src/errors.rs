//! The Python exception of the module, `mfu.Error`, and how Rust errors become one.
//!
//! Every error names the path and the operation in its message (the house rule); when the Rust
//! error keeps them apart (a list that cannot be read or written, a walk that failed on a
//! path), the exception carries them as the attributes `path` (str, surrogateescape) and
//! `operation` too, `None` otherwise.

use mfu::flist::walk::Incomplete;
use mfu::prelude::launch::LaunchError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

create_exception!(
    mfu,
    Error,
    PyException,
    "A usage or setup error (nothing was done), or a list operation that failed. The message \
     names the path and the operation; the attributes `path` and `operation` hold them when \
     known (else None)."
);

/// `mfu.Error(message)` with its `path` and `operation` attributes.
pub fn error(
    message: impl std::fmt::Display,
    path: Option<&[u8]>,
    operation: Option<&str>,
) -> PyErr {
    let err = Error::new_err(message.to_string());
    Python::attach(|py| {
        let value = err.value(py);
        let path = path.map(|p| OsStr::from_bytes(p).to_os_string());
        // Setting attributes on a fresh exception instance cannot fail.
        let _ = value.setattr("path", path);
        let _ = value.setattr("operation", operation);
    });
    err
}

/// A tool's usage or setup error (the message names the path and the operation).
pub fn tool_error(e: &mfu::prelude::Error) -> PyErr {
    error(&e.message, None, None)
}

/// An error of the file list library, with its path and operation when it has them.
pub fn flist_error(e: &mfu::flist::Error) -> PyErr {
    match e {
        mfu::flist::Error::Item(item) => error(e, Some(&item.path), Some(item.op)),
        mfu::flist::Error::BadList { path, .. } => error(e, Some(path), Some("read list")),
        mfu::flist::Error::Invalid(_) => error(e, None, None),
    }
}

/// A walk that could not read everything: the first failure's path and operation.
pub fn incomplete_error(e: &Incomplete) -> PyErr {
    let first = e.walked.errors.first();
    error(e, first.map(|i| i.path.as_slice()), first.map(|i| i.op))
}

/// The runtime could not start (MPI, launcher and build disagree).
pub fn launch_error(e: &LaunchError) -> PyErr {
    error(e, None, Some("start the runtime"))
}
