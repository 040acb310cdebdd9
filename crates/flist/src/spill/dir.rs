//! Where spill files go (`TMPDIR`, or `--tmpdir`), and the spill files themselves: created
//! unlinked, so that no way out of the process (an error, a panic, a signal, `kill -9`) leaves
//! one behind, and counted, so that their disk use can be reported.

use crate::error::{ItemError, Result};
use crate::path::{as_path, display};
use std::cell::Cell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The operation named when a spill file cannot be created.
pub const OP_SPILL_CREATE: &str = "create a spill file in TMPDIR";
/// The operation named when writing a spill file fails (other than for space).
pub const OP_SPILL_WRITE: &str = "write a spill file in TMPDIR";
/// The operation named when TMPDIR is full (or the quota is reached): what to do about it.
pub const OP_SPILL_FULL: &str =
    "spill sorted runs (no room left: raise --memory-limit, or set --tmpdir to a bigger file system) to TMPDIR";
/// The operation named when reading a spill file back fails.
pub const OP_SPILL_READ: &str = "read a spill file in TMPDIR";
/// The operation named when TMPDIR lies inside a tree the run works on.
pub const OP_SPILL_INSIDE: &str = "spill to TMPDIR (it is inside a tree this run works on)";

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

    /// Refuse (an error naming TMPDIR and the tree) a spill directory that is one of `trees`
    /// or beneath one: spill files must never land in a tree being walked, copied or removed.
    /// Both sides are resolved through symlinks; a tree that does not exist (yet) is compared
    /// as written.
    pub fn refuse_inside(&self, trees: &[&[u8]]) -> Result<()> {
        let resolve = |p: &[u8]| {
            std::fs::canonicalize(as_path(p))
                .map_or_else(|_| p.to_vec(), |c| c.into_os_string().into_encoded_bytes())
        };
        let dir = resolve(&self.path);
        for tree in trees {
            let tree = resolve(tree);
            let inside = dir.starts_with(&tree)
                && (dir.len() == tree.len() || tree.ends_with(b"/") || dir[tree.len()] == b'/');
            if inside {
                let why = io::Error::other(format!("inside {}", display(&tree)));
                return Err(ItemError::new(&self.path, OP_SPILL_INSIDE, why).into());
            }
        }
        Ok(())
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
            len: Cell::new(0),
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
    len: Cell<u64>,
}

impl SpillFile {
    /// Append `bytes`; returns the offset they start at.
    pub fn append(&self, bytes: &[u8]) -> Result<u64> {
        let at = self.len.get();
        self.file.write_all_at(bytes, at).map_err(|e| {
            SpillDir {
                path: self.dir.clone(),
            }
            .write_error(e)
        })?;
        self.len.set(at + bytes.len() as u64);
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
        self.len.get()
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len.get() == 0
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

    #[test]
    fn a_spill_directory_inside_a_worked_tree_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::create_dir_all(tmp.path().join("treeish")).unwrap();
        let b = |p: &std::path::Path| p.as_os_str().as_bytes().to_vec();
        let inside = SpillDir::new(Some(&b(&tree.join("sub"))));
        let e = inside.refuse_inside(&[&b(&tree)]).unwrap_err().to_string();
        assert!(e.contains("inside a tree") && e.contains("/tree"), "{e}");
        assert!(SpillDir::new(Some(&b(&tree)))
            .refuse_inside(&[&b(&tree)])
            .is_err());
        let beside = SpillDir::new(Some(&b(&tmp.path().join("treeish"))));
        beside.refuse_inside(&[&b(&tree)]).unwrap();
    }
}
