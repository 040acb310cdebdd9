//! Removing a list of paths: non-directories in parallel, then directories deepest first.
//!
//! Entries are reached from the roots the tool was given ([`Roots`]) without following
//! symlinks: a directory swapped for a symlink after the walk makes its entries fail (named),
//! never reaches the tree the symlink points to.

use flist::beneath::{is_symlink_error, Roots};
use flist::distribute::by_depth;
use flist::{FileList, FileType, ItemError};
use rayon::prelude::*;
use rustix::io::Errno;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use steal::Comm;

/// What [`remove`] did on this rank.
#[derive(Debug, Default)]
pub struct Removed {
    /// Entries removed.
    pub removed: u64,
    /// Directories left in place because they still hold entries that were not to be removed.
    pub kept_dirs: u64,
    /// Failures, each with path and operation.
    pub errors: Vec<ItemError>,
}

/// Remove this rank's entries of `list`, each reached beneath its root in `roots` (entries
/// beneath no root are reached by their path). Collective (one barrier per directory level).
pub fn remove(comm: &dyn Comm, list: &FileList, roots: &Roots) -> Removed {
    let removed = AtomicU64::new(0);
    let kept = AtomicU64::new(0);
    let errors = Mutex::new(Vec::new());
    let fail = |e: ItemError| errors.lock().expect("errors").push(e);
    let op = |e: &io::Error, plain: &'static str| {
        if is_symlink_error(e) {
            "reach (a directory on the way was replaced since the walk; not followed)"
        } else {
            plain
        }
    };
    (0..list.len()).into_par_iter().for_each(|i| {
        if list.kind(i) == FileType::Dir {
            return;
        }
        let path = list.path(i);
        match roots.at(path).and_then(|a| a.remove(false)) {
            Ok(()) => {
                removed.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => fail(ItemError::new(path, op(&e, "unlink"), e)),
        }
    });
    let dirs = list.select((0..list.len()).filter(|&i| list.kind(i) == FileType::Dir));
    for level in by_depth(comm, &dirs).into_iter().rev() {
        (0..level.len()).into_par_iter().for_each(|i| {
            let path = level.path(i);
            match roots.at(path).and_then(|a| a.remove(true)) {
                Ok(()) => {
                    removed.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) if e.raw_os_error() == Some(Errno::NOTEMPTY.raw_os_error()) => {
                    kept.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => fail(ItemError::new(path, op(&e, "rmdir"), e)),
            }
        });
        comm.barrier();
    }
    Removed {
        removed: removed.into_inner(),
        kept_dirs: kept.into_inner(),
        errors: errors.into_inner().expect("errors"),
    }
}
