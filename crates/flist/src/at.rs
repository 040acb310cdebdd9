//! A path of any length as a (directory descriptor, name) pair, for the `*at` system calls.
//!
//! Paths shorter than `PATH_MAX` are used as they are (relative to the current directory, no
//! extra open); longer ones are reached by opening their parent piece by piece
//! ([`crate::walk::open_long`]), so a tree with 10 KiB paths is walked, copied and removed like
//! any other.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, OFlags, CWD};
use rustix::io::Errno;
use std::borrow::Cow;
use std::io;

/// Longest path handed to one system call as a whole (Linux `PATH_MAX` is 4096 with the NUL).
pub const WHOLE_PATH_MAX: usize = 4000;

/// Where a path lives: a directory (the current one for short paths) and a name in it.
pub struct At<'p> {
    dir: Dir<'p>,
    name: Cow<'p, [u8]>,
}

/// The directory of an [`At`].
enum Dir<'p> {
    /// The current directory (the name is the whole path).
    Cwd,
    /// The parent of a long path, opened for this `At`.
    Owned(OwnedFd),
    /// A directory the caller holds open.
    Borrowed(BorrowedFd<'p>),
}

impl<'p> At<'p> {
    /// Locate `path` (absolute or relative), opening its parent when the path is too long.
    pub fn new(path: &'p [u8]) -> io::Result<At<'p>> {
        if path.len() < WHOLE_PATH_MAX {
            return Ok(At {
                dir: Dir::Cwd,
                name: Cow::Borrowed(path),
            });
        }
        let cut = path.iter().rposition(|&b| b == b'/').unwrap_or(0);
        let parent: &[u8] = if cut == 0 { b"/" } else { &path[..cut] };
        let dir =
            crate::walk::open_long(parent, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC)?;
        Ok(At {
            dir: Dir::Owned(dir),
            name: Cow::Borrowed(&path[cut + 1..]),
        })
    }

    /// The entry `name` (one component) of the open directory `dir`: calls on it look up one
    /// component instead of a whole path.
    pub fn in_dir(dir: BorrowedFd<'p>, name: &'p [u8]) -> At<'p> {
        At {
            dir: Dir::Borrowed(dir),
            name: Cow::Borrowed(name),
        }
    }

    /// The entry `name` (one component) of the directory `dir`, which the `At` keeps open.
    pub fn in_owned_dir(dir: OwnedFd, name: &'p [u8]) -> At<'p> {
        At {
            dir: Dir::Owned(dir),
            name: Cow::Borrowed(name),
        }
    }

    /// `op(dir, name)` for `path`, with the system's error code (for callers working in
    /// [`Errno`]s).
    pub fn with<R>(
        path: &[u8],
        op: impl FnOnce(BorrowedFd<'_>, &[u8]) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let at = At::new(path).map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
        op(at.dir(), at.name())
    }

    /// The directory to pass to `*at` calls.
    pub fn dir(&self) -> BorrowedFd<'_> {
        match &self.dir {
            Dir::Owned(fd) => fd.as_fd(),
            Dir::Borrowed(fd) => *fd,
            Dir::Cwd => CWD,
        }
    }

    /// The name to pass to `*at` calls (the whole path when no directory was opened).
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// A path naming the same file that fits in one system call, for calls without an `*at`
    /// form (the `l*xattr` family): the path itself, or `/proc/self/fd/N/NAME`.
    pub fn short_path(&self) -> Cow<'_, [u8]> {
        match &self.dir {
            Dir::Cwd => Cow::Borrowed(&self.name),
            Dir::Owned(_) | Dir::Borrowed(_) => {
                use rustix::fd::AsRawFd;
                let mut p = format!("/proc/self/fd/{}/", self.dir().as_raw_fd()).into_bytes();
                p.extend_from_slice(&self.name);
                Cow::Owned(p)
            }
        }
    }

    /// Open with `flags` (and `mode` when creating).
    pub fn open(&self, flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
        Ok(rustix::fs::openat(
            self.dir(),
            self.name(),
            flags | OFlags::CLOEXEC,
            rustix::fs::Mode::from_raw_mode(mode),
        )?)
    }

    /// `lstat`.
    pub fn lstat(&self) -> io::Result<rustix::fs::Stat> {
        Ok(rustix::fs::statat(
            self.dir(),
            self.name(),
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// Remove a non-directory, or an (empty) directory when `dir` is true.
    pub fn remove(&self, dir: bool) -> io::Result<()> {
        let flags = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        Ok(rustix::fs::unlinkat(self.dir(), self.name(), flags)?)
    }
}

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
                .then(|| crate::walk::open_long(dir, OFlags::PATH | OFlags::DIRECTORY).ok())
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

    /// `at`'s short path (through /proc/self/fd) reaches the entry (an xattr set by path), and
    /// `remove` removes it.
    fn short_path_reaches_then_remove(at: &At) {
        let short = at.short_path().into_owned();
        assert!(short.starts_with(b"/proc/self/fd/"));
        rustix::fs::setxattr(
            short.as_slice(),
            "user.k",
            b"v",
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
        at.remove(false).unwrap();
    }

    #[test]
    fn entries_of_an_open_directory_are_reached_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = rustix::fs::open(
            tmp.path(),
            OFlags::PATH | OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let at = At::in_dir(dir.as_fd(), b"f");
        drop(at.open(OFlags::WRONLY | OFlags::CREATE, 0o600).unwrap());
        assert_eq!(at.lstat().unwrap().st_mode & 0o777, 0o600);
        assert!(tmp.path().join("f").exists());
        short_path_reaches_then_remove(&at);
        assert!(!tmp.path().join("f").exists());
    }

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

    #[test]
    fn long_paths_are_reached_through_their_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let mut path = tmp.path().as_os_str().as_bytes().to_vec();
        // 50 levels of 100-byte names: about 5 KiB.
        for i in 0..50 {
            let at = At::new(&path).unwrap();
            let _ = at;
            path.push(b'/');
            path.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, 100));
            let at = At::new(&path).unwrap();
            rustix::fs::mkdirat(at.dir(), at.name(), rustix::fs::Mode::from_raw_mode(0o755))
                .unwrap();
        }
        assert!(path.len() > 5000);
        let file = [path.as_slice(), b"/f"].concat();
        let at = At::new(&file).unwrap();
        assert!(matches!(at.dir, Dir::Owned(_)));
        drop(at.open(OFlags::WRONLY | OFlags::CREATE, 0o600).unwrap());
        assert!(at.lstat().unwrap().st_size == 0);
        short_path_reaches_then_remove(&at);
        assert!(at.lstat().is_err());
    }
}
