//! Writing only beneath the extraction directory.
//!
//! Every entry is reached from the target directory's descriptor without following any
//! symlink: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has it, a
//! component-by-component `openat(O_NOFOLLOW)` walk otherwise. So neither a symlink the archive
//! created (`a -> /tmp`, then `a/file`) nor one already in the target can carry a write outside
//! it. Entry names are checked first by [`clean`]: no absolute paths, no `..`.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why an entry name is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsafe {
    /// It starts with `/`.
    Absolute,
    /// A component is `..`.
    DotDot,
}

impl std::fmt::Display for Unsafe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unsafe::Absolute => {
                "refusing an absolute path (it would be written outside the target)"
            }
            Unsafe::DotDot => "refusing a path with '..' (it could be written outside the target)",
        })
    }
}

/// The entry name relative to the target, without `.` components, empty components or a
/// trailing `/` (`""` for the target itself), or why it is refused.
pub fn clean(name: &[u8]) -> Result<Vec<u8>, Unsafe> {
    if name.starts_with(b"/") {
        return Err(Unsafe::Absolute);
    }
    let mut out = Vec::with_capacity(name.len());
    for c in name.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err(Unsafe::DotDot),
            c => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(c);
            }
        }
    }
    Ok(out)
}

/// (parent, last component) of a cleaned relative path (`parent` may be empty).
pub fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&b""[..], rel),
    }
}

/// The extraction directory, opened once.
pub struct Target {
    root: OwnedFd,
    /// Cleared when the kernel lacks `openat2`.
    openat2: AtomicBool,
}

impl Target {
    /// Open the directory `path`.
    pub fn open(path: &[u8]) -> std::io::Result<Target> {
        let root =
            flist::walk::open_long(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC)?;
        Ok(Target {
            root,
            openat2: AtomicBool::new(true),
        })
    }

    /// The target directory itself.
    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// The directory `rel` (cleaned, relative) opened without following symlinks; with
    /// `create`, missing directories on the way are made (mode 0777 less the umask, as tar makes
    /// parents the archive does not list; listed ones get their own mode at the end).
    /// `ELOOP` means a symlink is in the way.
    pub fn dir(&self, rel: &[u8], create: bool) -> Result<OwnedFd, Errno> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if rel.is_empty() {
            return rustix::fs::openat(self.root(), c".", flags, Mode::empty());
        }
        if self.openat2.load(Ordering::Relaxed) {
            let how =
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
            match rustix::fs::openat2(self.root(), rel, flags, Mode::empty(), how) {
                Ok(fd) => return Ok(fd),
                Err(Errno::NOSYS) => self.openat2.store(false, Ordering::Relaxed),
                Err(Errno::NOENT) if create => {}
                // Paths longer than PATH_MAX: walk them component by component.
                Err(Errno::NAMETOOLONG) => {}
                Err(Errno::AGAIN) => {}
                Err(e) => return Err(e),
            }
        }
        self.walk(rel, create)
    }

    fn walk(&self, rel: &[u8], create: bool) -> Result<OwnedFd, Errno> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut fd = rustix::fs::openat(self.root(), c".", flags, Mode::empty())?;
        for c in rel.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            let next = match rustix::fs::openat(&fd, c, flags, Mode::empty()) {
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&fd, c, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(e),
                    }
                    rustix::fs::openat(&fd, c, flags, Mode::empty())
                }
                // O_NOFOLLOW|O_DIRECTORY on a symlink: ENOTDIR on some kernels, ELOOP on others.
                Err(Errno::NOTDIR) if is_symlink(fd.as_fd(), c) => Err(Errno::LOOP),
                r => r,
            }?;
            fd = next;
        }
        Ok(fd)
    }
}

fn is_symlink(dir: BorrowedFd<'_>, name: &[u8]) -> bool {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

/// The message for an error resolving or creating an entry beneath the target.
pub fn explain(e: Errno) -> String {
    match e {
        Errno::LOOP | Errno::XDEV => {
            "refusing to write through a symbolic link (it could lead outside the target)".into()
        }
        e => std::io::Error::from(e).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_or_refused() {
        assert_eq!(clean(b"a/./b//c/").unwrap(), b"a/b/c");
        assert_eq!(clean(b"./").unwrap(), b"");
        assert_eq!(clean(b"/etc/passwd"), Err(Unsafe::Absolute));
        assert_eq!(clean(b"a/../../x"), Err(Unsafe::DotDot));
        assert_eq!(clean(b"..").unwrap_err(), Unsafe::DotDot);
        assert_eq!(clean(b"a..b/c..").unwrap(), b"a..b/c..");
        assert_eq!(split(b"a/b/c"), (&b"a/b"[..], &b"c"[..]));
        assert_eq!(split(b"c"), (&b""[..], &b"c"[..]));
    }

    #[test]
    fn symlinks_are_never_followed_and_missing_dirs_are_made() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("a")).unwrap();
        let target = Target::open(t.path().as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(target.dir(b"a", true).unwrap_err(), Errno::LOOP);
        assert_eq!(target.dir(b"a/b", true).unwrap_err(), Errno::LOOP);
        assert_eq!(target.walk(b"a/b", true).unwrap_err(), Errno::LOOP);
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        target.dir(b"x/y/z", true).unwrap();
        assert!(t.path().join("x/y/z").is_dir());
        target.walk(b"p/q", true).unwrap();
        assert!(t.path().join("p/q").is_dir());
        assert_eq!(target.dir(b"nope/n", false).unwrap_err(), Errno::NOENT);
    }
}
