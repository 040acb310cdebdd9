//! A path of any length as a (directory descriptor, name) pair, for the `*at` system calls.
//!
//! Paths shorter than `PATH_MAX` are used as they are (relative to the current directory, no
//! extra open); longer ones are reached by opening their parent piece by piece
//! ([`open_long`]), so a tree with 10 KiB paths is walked, copied and removed like
//! any other.

use crate::path::as_path;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, CWD};
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
        let dir = open_long(parent, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC)?;
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

/// `open` that also works for paths longer than `PATH_MAX`: such a path is opened piece by
/// piece, each piece relative to the descriptor of the one before.
pub fn open_long(path: &[u8], flags: OFlags) -> Result<OwnedFd, Errno> {
    if path.len() < WHOLE_PATH_MAX {
        return rustix::fs::open(as_path(path), flags | OFlags::CLOEXEC, Mode::empty());
    }
    let mut fd: Option<OwnedFd> = None;
    let mut rest = path;
    while !rest.is_empty() {
        let piece_len = if rest.len() < WHOLE_PATH_MAX {
            rest.len()
        } else {
            // Cut at the last '/' that keeps the piece short enough.
            rest[..WHOLE_PATH_MAX]
                .iter()
                .rposition(|&b| b == b'/')
                .filter(|&i| i > 0)
                .ok_or(Errno::NAMETOOLONG)?
        };
        let (piece, tail) = rest.split_at(piece_len);
        let last = tail.iter().all(|&b| b == b'/');
        let piece_flags = if last {
            flags
        } else {
            OFlags::PATH | OFlags::DIRECTORY
        };
        let next = match &fd {
            None => rustix::fs::openat(
                CWD,
                as_path(piece),
                piece_flags | OFlags::CLOEXEC,
                Mode::empty(),
            )?,
            Some(dir) => {
                let rel = trim_slashes(piece);
                rustix::fs::openat(
                    dir,
                    as_path(rel),
                    piece_flags | OFlags::CLOEXEC,
                    Mode::empty(),
                )?
            }
        };
        fd = Some(next);
        rest = tail;
        if last {
            break;
        }
    }
    fd.ok_or(Errno::INVAL)
}

fn trim_slashes(p: &[u8]) -> &[u8] {
    let start = p.iter().position(|&b| b != b'/').unwrap_or(p.len());
    &p[start..]
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
