//! Where spill files go (`TMPDIR`, or `--tmpdir`), and the spill files themselves: created
//! unlinked, so that no way out of the process (an error, a panic, a signal, `kill -9`) leaves
//! one behind, and counted, so that their disk use can be reported.

use crate::error::{ItemError, Result};
use crate::path::as_path;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The operation named when a spill file cannot be created.
pub const OP_SPILL_CREATE: &str = "create a spill file in TMPDIR";
/// The operation named when writing a spill file fails (other than for space).
pub const OP_SPILL_WRITE: &str = "write a spill file in TMPDIR";
/// The operation named when TMPDIR is full (or the quota is reached): what to do about it.
pub const OP_SPILL_FULL: &str =
    "spill sorted runs (no room left: raise --memory-limit, or set --tmpdir to a bigger file system) to TMPDIR";
/// The operation named when reading a spill file back fails.
pub const OP_SPILL_READ: &str = "read a spill file in TMPDIR";

/// The directory spill files are created in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpillDir {
    path: Vec<u8>,
}

impl SpillDir {
    /// `given` (`--tmpdir`), else `$TMPDIR`, else `/tmp`.
    pub fn new(given: Option<&[u8]>) -> SpillDir {
        use std::os::unix::ffi::OsStrExt;
        let path = match given {
            Some(p) => p.to_vec(),
            None => std::env::var_os("TMPDIR")
                .filter(|v| !v.is_empty())
                .map_or_else(|| b"/tmp".to_vec(), |v| v.as_bytes().to_vec()),
        };
        SpillDir { path }
    }

    /// The directory, as given.
    pub fn path(&self) -> &[u8] {
        &self.path
    }

    /// A new, empty spill file with no name (`O_TMPFILE`, or created and unlinked at once
    /// where the file system lacks it).
    pub fn create(&self) -> Result<SpillFile> {
        let file = tempfile::tempfile_in(as_path(&self.path)).map_err(|e| {
            let full = matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT));
            let op = if full { OP_SPILL_FULL } else { OP_SPILL_CREATE };
            ItemError::new(&self.path, op, e)
        })?;
        Ok(SpillFile {
            file,
            dir: self.path.clone(),
            len: AtomicU64::new(0),
        })
    }

    /// The error for a failed write of a spill file: a full file system or quota says so.
    fn write_error(&self, e: io::Error) -> ItemError {
        let full = matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT));
        let op = if full { OP_SPILL_FULL } else { OP_SPILL_WRITE };
        ItemError::new(&self.path, op, e)
    }
}

/// An unnamed file in the spill directory, written by appending and read at offsets. Its
/// blocks go back to the file system when it is dropped.
#[derive(Debug)]
pub struct SpillFile {
    file: File,
    dir: Vec<u8>,
    /// Bytes appended. Atomic only so that a file can sit in results shared across threads
    /// (a walk's [`crate::walk::Walked`]): appends go through `&self` of one owner.
    len: AtomicU64,
}

impl SpillFile {
    /// Append `bytes`; returns the offset they start at.
    pub fn append(&self, bytes: &[u8]) -> Result<u64> {
        let at = self.len.load(Ordering::Relaxed);
        self.file.write_all_at(bytes, at).map_err(|e| {
            SpillDir {
                path: self.dir.clone(),
            }
            .write_error(e)
        })?;
        self.len.store(at + bytes.len() as u64, Ordering::Relaxed);
        Ok(at)
    }

    /// Fill `buf` from byte `offset` (written before).
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| ItemError::new(&self.dir, OP_SPILL_READ, e).into())
    }

    /// Bytes written to the file: its disk use.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn spill_files_have_no_name_and_read_back_what_was_appended() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SpillDir::new(Some(tmp.path().as_os_str().as_bytes()));
        let f = dir.create().unwrap();
        assert_eq!(f.append(b"hello ").unwrap(), 0);
        assert_eq!(f.append(b"world").unwrap(), 6);
        assert_eq!(f.len(), 11);
        let mut buf = [0u8; 5];
        f.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(&buf, b"world");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "no name");
        let missing = SpillDir::new(Some(b"/nonexistent/spill"));
        let e = missing.create().unwrap_err().to_string();
        assert!(e.contains("TMPDIR /nonexistent/spill"), "{e}");
    }
}
