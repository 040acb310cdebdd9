//! A directory held open while the entries of one directory are reached one after the other.

use crate::at::At;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::OFlags;
use std::io;

/// The parent directory of the last path asked for, held open: entries of one directory, met
/// one after the other (a walk's order), are reached by name in it, one component to look up
/// instead of a whole path.
///
/// Made with [`ParentDir::beneath`], parents are reached from the tool's roots without
/// following symlinks ([`crate::beneath`]): a directory swapped for a symlink after the walk is
/// not followed.
#[derive(Default)]
pub struct ParentDir {
    held: Option<(Vec<u8>, Option<OwnedFd>)>,
    roots: Option<std::sync::Arc<crate::beneath::Roots>>,
}

impl ParentDir {
    /// A `ParentDir` that reaches every parent beneath `roots` (paths beneath no root are
    /// reached by their path).
    pub fn beneath(roots: std::sync::Arc<crate::beneath::Roots>) -> ParentDir {
        ParentDir {
            held: None,
            roots: Some(roots),
        }
    }

    /// Hold the directory `dir` (absolute, normalised) open, unless it is the one held.
    /// Returns true when it was not (a directory that can't be opened is held as "none").
    pub fn hold(&mut self, dir: &[u8]) -> bool {
        if self.held.as_ref().is_some_and(|(p, _)| p == dir) {
            return false;
        }
        let confined = self.roots.as_ref().and_then(|r| {
            // The parent of an entry beneath a root: `dir` itself is then that parent.
            let probe = [dir, b"/x"].concat();
            r.parent_dir(&probe).map(|fd| fd.ok())
        });
        let fd = match confined {
            Some(fd) => fd,
            None => dir
                .starts_with(b"/")
                .then(|| crate::at::open_long(dir, OFlags::PATH | OFlags::DIRECTORY).ok())
                .flatten(),
        };
        self.held = Some((dir.to_vec(), fd));
        true
    }

    /// Where `path` is: by name in the directory held, if that is its parent, or as
    /// [`At::new`] gives it (relative paths, and parents that can't be opened: the call on the
    /// whole path then reports the error).
    pub fn entry<'a>(&'a self, path: &'a [u8]) -> io::Result<At<'a>> {
        match &self.held {
            Some((p, Some(fd))) if path != b"/" && p == crate::path::parent(path) => {
                Ok(At::in_dir(fd.as_fd(), crate::path::basename(path)))
            }
            _ => match &self.roots {
                Some(r) => r.at(path),
                None => At::new(path),
            },
        }
    }

    /// [`Self::hold`] the parent of `path`, then its [`Self::entry`].
    pub fn at<'a>(&'a mut self, path: &'a [u8]) -> io::Result<At<'a>> {
        self.hold(crate::path::parent(path));
        self.entry(path)
    }

    /// The directory held open, if any.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.held
            .as_ref()
            .and_then(|(_, fd)| fd.as_ref().map(|f| f.as_fd()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_held_parent_serves_its_entries_and_follows_the_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().as_os_str().as_bytes().to_vec();
        for d in ["a", "b"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
            std::fs::write(tmp.path().join(d).join("f"), d).unwrap();
        }
        let mut parent = ParentDir::default();
        for d in ["a", "a", "b", "missing"] {
            let path = [base.as_slice(), b"/", d.as_bytes(), b"/f"].concat();
            let at = parent.at(&path).unwrap();
            match d {
                "missing" => assert!(at.lstat().is_err()),
                _ => assert_eq!(at.lstat().unwrap().st_size, 1, "{d}"),
            }
        }
        assert!(
            parent.fd().is_none(),
            "a parent that can't be opened is not held"
        );
        assert!(parent.at(b"relative/f").unwrap().lstat().is_err());
    }
}
