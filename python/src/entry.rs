//! `mfu.Entry`: one record of a file list, as Python sees it while iterating over its rank's
//! part (a copy: the list may change or go away afterwards).

use mfu::prelude::{FileType, Meta};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// The file types, as the module's `TYPE_*` constants (the values of `Entry.type`).
pub const TYPES: [(&str, FileType); 8] = [
    ("TYPE_UNKNOWN", FileType::Unknown),
    ("TYPE_FILE", FileType::File),
    ("TYPE_DIR", FileType::Dir),
    ("TYPE_LINK", FileType::Symlink),
    ("TYPE_FIFO", FileType::Fifo),
    ("TYPE_SOCKET", FileType::Socket),
    ("TYPE_BLOCK", FileType::BlockDev),
    ("TYPE_CHAR", FileType::CharDev),
];

/// One entry of a file list: its path, type and (for a stat list) its metadata.
///
/// The metadata attributes are `None` for an entry without metadata (a list walked with
/// `stat=False`, or read from a text list). A list read from a v4 file has no link count,
/// inode or device (the format does not store them): `nlink` and `inode` are 0 there.
#[pyclass(module = "mfu", name = "Entry", frozen)]
pub struct Entry {
    path: Vec<u8>,
    kind: FileType,
    meta: Option<Meta>,
}

impl Entry {
    /// An entry holding a copy of one record.
    pub fn new(path: &[u8], kind: FileType, meta: Option<Meta>) -> Entry {
        Entry {
            path: path.to_vec(),
            kind,
            meta,
        }
    }

    fn with_meta<T>(&self, f: impl FnOnce(&Meta) -> T) -> Option<T> {
        self.meta.as_ref().map(f)
    }
}

/// Seconds since the epoch, with the fraction.
fn seconds(secs: i64, nsecs: u32) -> f64 {
    secs as f64 + f64::from(nsecs) / 1e9
}

/// Nanoseconds since the epoch.
fn nanos(secs: i64, nsecs: u32) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nsecs)
}

#[pymethods]
impl Entry {
    /// The path as str, decoded as `os.fsdecode` does (undecodable bytes as surrogates, so
    /// `os.fsencode(entry.name) == entry.name_bytes`): what `os.stat` and `open` take.
    #[getter]
    fn name<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(OsStr::from_bytes(&self.path).into_pyobject(py)?.into_any())
    }

    /// The path as bytes, exactly as the file system holds it.
    #[getter]
    fn name_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.path)
    }

    /// The type: one of the module's `TYPE_*` constants.
    #[getter(r#type)]
    fn kind(&self) -> u8 {
        self.kind as u8
    }

    /// `st_mode`: type and permission bits.
    #[getter]
    fn mode(&self) -> Option<u32> {
        self.with_meta(|m| m.mode)
    }

    /// Owner's user id.
    #[getter]
    fn uid(&self) -> Option<u32> {
        self.with_meta(|m| m.uid)
    }

    /// Group id.
    #[getter]
    fn gid(&self) -> Option<u32> {
        self.with_meta(|m| m.gid)
    }

    /// Size in bytes.
    #[getter]
    fn size(&self) -> Option<u64> {
        self.with_meta(|m| m.size)
    }

    /// Last access, seconds since the epoch (float).
    #[getter]
    fn atime(&self) -> Option<f64> {
        self.with_meta(|m| seconds(m.atime, m.atime_nsec))
    }

    /// Last data modification, seconds since the epoch (float).
    #[getter]
    fn mtime(&self) -> Option<f64> {
        self.with_meta(|m| seconds(m.mtime, m.mtime_nsec))
    }

    /// Last status change, seconds since the epoch (float).
    #[getter]
    fn ctime(&self) -> Option<f64> {
        self.with_meta(|m| seconds(m.ctime, m.ctime_nsec))
    }

    /// Last access, nanoseconds since the epoch (int, exact).
    #[getter]
    fn atime_ns(&self) -> Option<i128> {
        self.with_meta(|m| nanos(m.atime, m.atime_nsec))
    }

    /// Last data modification, nanoseconds since the epoch (int, exact).
    #[getter]
    fn mtime_ns(&self) -> Option<i128> {
        self.with_meta(|m| nanos(m.mtime, m.mtime_nsec))
    }

    /// Last status change, nanoseconds since the epoch (int, exact).
    #[getter]
    fn ctime_ns(&self) -> Option<i128> {
        self.with_meta(|m| nanos(m.ctime, m.ctime_nsec))
    }

    /// Number of hard links (0 when read from a v4 list, which does not store it).
    #[getter]
    fn nlink(&self) -> Option<u64> {
        self.with_meta(|m| m.nlink)
    }

    /// Inode number (0 when read from a v4 list, which does not store it).
    #[getter]
    fn inode(&self) -> Option<u64> {
        self.with_meta(|m| m.ino)
    }

    /// The path, for `os.fspath(entry)`: `os.stat(entry)` works.
    fn __fspath__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.name(py)
    }

    fn __repr__(&self) -> String {
        let name = String::from_utf8_lossy(&self.path);
        match &self.meta {
            Some(m) => format!(
                "Entry({name:?}, type={}, size={}, mode=0o{:o})",
                self.kind as u8, m.size, m.mode
            ),
            None => format!("Entry({name:?}, type={})", self.kind as u8),
        }
    }
}
