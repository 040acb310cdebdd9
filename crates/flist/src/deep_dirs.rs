//! Descriptors of directories far beneath a root, held so that reaching an entry thousands of
//! levels down is a short lookup from a directory near it, not one from the root.
//!
//! Every entry is reached from its root ([`crate::beneath`]); the kernel then looks up each
//! component of the path again, so a tree 3,000 levels deep cost O(depth) per entry and
//! O(depth²) in all (cp of such a tree: 3 s, all of it in path lookups). Here the directories
//! at every [`STRIDE`]-th level of a deep path ("checkpoints") are opened once, `O_PATH`, each
//! reached from the one above it exactly as it would be from the root (beneath it, no
//! symlinks), and kept: a deep entry is then reached from its nearest checkpoint, at most
//! `STRIDE` components away, in any order (a copy creates directories top-down and sets their
//! metadata bottom-up).
//!
//! A held directory is used as a held working directory is (rsync and GNU tar work from
//! directories they hold open): if it is renamed meanwhile, entries are reached where it now
//! is; if it is removed, lookups through it fail and the path is reached from the root again.
//! Paths shallower than `STRIDE` components never come here.

use crate::beneath::dir_at;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::OFlags;
use rustix::io::Errno;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// Components between checkpoints: a deep entry is reached with one lookup of at most this
/// many components.
pub(crate) const STRIDE: usize = 64;

/// Checkpoint descriptors held per root at most (a chain 64 × 64 = 4,096 levels deep fits);
/// when full, all are closed and the cache starts again.
const HELD: usize = 64;

/// The checkpoints of one root (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct DeepDirs {
    held: Mutex<HashMap<Vec<u8>, Arc<OwnedFd>>>,
}

impl DeepDirs {
    /// The directory `rel` (relative, normalised, without `..`) beneath `root`, opened with
    /// `flags` (and made, with `create`, as [`dir_at`] does) from its nearest checkpoint; the
    /// checkpoints on the way are opened and held. `None` when `rel` is shallow: the caller
    /// reaches it from the root. A lookup that fails from a held checkpoint is made again from
    /// the root, whose answer stands: if the root reaches `rel`, a held directory was stale
    /// (removed, or moved with its contents) and every checkpoint is closed; if not, `rel` is
    /// missing (or blocked) and the checkpoints stay, so a compare that meets many missing
    /// deep entries does not reopen them each time.
    pub(crate) fn open(
        &self,
        root: BorrowedFd<'_>,
        rel: &[u8],
        create: bool,
        flags: OFlags,
        openat2: &AtomicBool,
    ) -> Option<Result<OwnedFd, Errno>> {
        let ends = checkpoint_ends(rel)?;
        // The deepest checkpoint held, and the byte where the rest of `rel` starts after it.
        let (mut base, mut next, mut from) = {
            let held = self.held.lock().expect("deep dirs");
            match (0..ends.len())
                .rev()
                .find_map(|k| held.get(&rel[..ends[k]]).map(|fd| (k, fd.clone())))
            {
                Some((k, fd)) => (Some(fd), k + 1, ends[k] + 1),
                None => (None, 0, 0),
            }
        };
        let from_held = base.is_some();
        let step = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let reached = (|| {
            while next < ends.len() {
                let piece = &rel[from..ends[next]];
                let at = base.as_ref().map_or(root, |fd| fd.as_fd());
                let fd = Arc::new(dir_at(at, piece, create, step, openat2)?);
                self.hold(&rel[..ends[next]], fd.clone());
                base = Some(fd);
                from = ends[next] + 1;
                next += 1;
            }
            let at = base.as_ref().map_or(root, |fd| fd.as_fd());
            dir_at(at, &rel[from..], create, flags, openat2)
        })();
        match reached {
            Err(_) if from_held => {
                let again = dir_at(root, rel, create, flags, openat2);
                if again.is_ok() {
                    self.forget();
                }
                Some(again)
            }
            r => Some(r),
        }
    }

    fn hold(&self, checkpoint: &[u8], fd: Arc<OwnedFd>) {
        let mut held = self.held.lock().expect("deep dirs");
        if held.len() >= HELD {
            held.clear();
        }
        held.insert(checkpoint.to_vec(), fd);
    }

    /// Checkpoints held (tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.lock().expect("deep dirs").len()
    }

    /// Close every checkpoint (one was stale).
    fn forget(&self) {
        self.held.lock().expect("deep dirs").clear();
    }
}

/// The byte offsets of the `/` ending each checkpoint of `rel` (after component STRIDE,
/// 2 × STRIDE, ...), provided one component at least follows the last; `None` when there is
/// none, or when `rel` is not plainly normalised (empty components, `.`): such paths go the
/// usual way.
fn checkpoint_ends(rel: &[u8]) -> Option<Vec<usize>> {
    let mut ends = Vec::new();
    let mut components = 0;
    let mut start = 0;
    for (i, &b) in rel.iter().enumerate() {
        if b == b'/' {
            let c = &rel[start..i];
            if c.is_empty() || c == b"." {
                return None;
            }
            components += 1;
            if components % STRIDE == 0 {
                ends.push(i);
            }
            start = i + 1;
        }
    }
    // The last component must not be empty either (a trailing slash).
    if start == rel.len() || &rel[start..] == b"." {
        return None;
    }
    (!ends.is_empty()).then_some(ends)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beneath::Root;
    use std::os::unix::ffi::OsStrExt;

    fn chain(levels: usize) -> Vec<u8> {
        vec!["d"; levels].join("/").into_bytes()
    }

    #[test]
    fn checkpoints_fall_every_stride_components_and_odd_paths_have_none() {
        assert_eq!(checkpoint_ends(&chain(STRIDE)), None);
        assert_eq!(
            checkpoint_ends(&chain(STRIDE + 1)),
            Some(vec![2 * STRIDE - 1])
        );
        let ends = checkpoint_ends(&chain(3 * STRIDE + 5)).unwrap();
        assert_eq!(ends.len(), 3);
        assert_eq!(ends[2], 2 * 3 * STRIDE - 1);
        let mut odd = chain(STRIDE + 3);
        odd.extend_from_slice(b"/");
        assert_eq!(checkpoint_ends(&odd), None);
        let dotted = [chain(STRIDE).as_slice(), b"/./x"].concat();
        assert_eq!(checkpoint_ends(&dotted), None);
        let double = [chain(STRIDE).as_slice(), b"//x"].concat();
        assert_eq!(checkpoint_ends(&double), None);
    }

    /// A deep directory is reached from a held checkpoint, in any order; one removed since is
    /// reached from the root again; and a symlink swapped in beneath a checkpoint is refused
    /// as it is from the root.
    #[test]
    fn deep_paths_are_reached_from_checkpoints_and_never_through_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::open(t.path().as_os_str().as_bytes()).unwrap();
        let deep = chain(3 * STRIDE + 10);
        root.dir(&deep, true).unwrap();
        assert!(t.path().join(std::str::from_utf8(&deep).unwrap()).is_dir());
        assert_eq!(root.deep_dirs_held(), 3);
        // Upward, as a copy sets directories' metadata.
        for levels in (1..=3 * STRIDE + 10).rev() {
            let fd = root.dir(&chain(levels), false).unwrap();
            let st = rustix::fs::fstat(&fd).unwrap();
            let by_path =
                std::fs::metadata(t.path().join(std::str::from_utf8(&chain(levels)).unwrap()));
            // PATH_MAX stops std beyond ~2,000 levels; compare where it can tell.
            if let Ok(m) = by_path {
                assert_eq!(st.st_ino, std::os::unix::fs::MetadataExt::ino(&m));
            }
        }
        // A missing deep entry is an error from the root too: the checkpoints stay.
        let held = root.deep_dirs_held();
        assert_eq!(held, 3);
        let missing = [chain(2 * STRIDE + 3).as_slice(), b"/no-such-dir"].concat();
        assert_eq!(root.dir(&missing, false).unwrap_err(), Errno::NOENT);
        assert_eq!(root.deep_dirs_held(), held);
        // Replace the directory at level STRIDE + 5 by a symlink to elsewhere.
        let outside = tempfile::tempdir().unwrap();
        let at = t
            .path()
            .join(std::str::from_utf8(&chain(STRIDE + 5)).unwrap());
        let moved = t.path().join("moved");
        std::fs::rename(&at, &moved).unwrap();
        std::os::unix::fs::symlink(outside.path(), &at).unwrap();
        assert_eq!(
            root.dir(&chain(STRIDE + 20), true).unwrap_err(),
            Errno::LOOP
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        // Removed beneath a held checkpoint: reached from the root (and made again).
        std::fs::remove_file(&at).unwrap();
        std::fs::remove_dir_all(&moved).unwrap();
        root.dir(&chain(3 * STRIDE + 2), true).unwrap();
        assert!(at.is_dir());
    }
}
