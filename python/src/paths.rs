//! Paths from Python: `str` (encoded as `os.fsencode` does, so surrogate-escaped names come
//! back as their bytes), `bytes`, or any `os.PathLike`. Paths are bytes from here on.

use crate::errors::error;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// One path as bytes.
pub fn path_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if obj.is_instance_of::<PyBytes>() {
        return obj.extract();
    }
    let py = obj.py();
    let encoded = py
        .import("os")?
        .call_method1("fsencode", (obj,))
        .map_err(|_| {
            let kind = obj
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default();
            error(
                format!("expected a path (str, bytes or os.PathLike), got {kind}"),
                None,
                None,
            )
        })?;
    encoded.extract()
}

/// True when `obj` is one path rather than a collection of them.
fn is_one_path(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyString>()
        || obj.hasattr("__fspath__")?)
}

/// One path or an iterable of paths, as a list of byte paths.
pub fn many_paths(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    if is_one_path(obj)? {
        return Ok(vec![path_bytes(obj)?]);
    }
    obj.try_iter()?
        .map(|p| path_bytes(&p?))
        .collect::<PyResult<Vec<_>>>()
}

/// Optional path argument.
pub fn opt_path(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    obj.filter(|o| !o.is_none()).map(path_bytes).transpose()
}
