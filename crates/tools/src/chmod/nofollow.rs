//! chmod that never follows a symbolic link, even one swapped in after the walk.
//!
//! `fchmodat(dir, name, mode, 0)` follows a symlink. Between the walk and the change someone
//! may replace a listed file with a link to `/etc/shadow`, and a chmod run by root would then
//! change the link's target. `AT_SYMLINK_NOFOLLOW` for fchmodat needs the fchmodat2 system call
//! (Linux 6.6), and `fchmod` refuses `O_PATH` descriptors, so: open the name itself with
//! `O_PATH | O_NOFOLLOW` (a symlink is opened as the link, not followed), refuse it if it is a
//! link now, and change the mode through the descriptor's `/proc/self/fd` entry, which names
//! exactly the inode that was checked.

use rustix::fd::{AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Gid, Mode, OFlags, Uid, CWD};
use rustix::io::Errno;
use std::io;

/// A listed entry opened `O_PATH | O_NOFOLLOW` (a symlink is opened as the link) and found to
/// be of the type it was listed with: changes through it reach exactly that inode, whatever
/// happens to its name afterwards.
pub struct Checked {
    fd: OwnedFd,
    symlink: bool,
}

impl Checked {
    /// Open `name` in `dir` and check that it still is a `listed`; a different type (a file
    /// swapped for a symlink, a directory for a file) is an error saying so.
    pub fn open(dir: BorrowedFd<'_>, name: &[u8], listed: flist::FileType) -> io::Result<Checked> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let now = flist::FileType::from_mode(rustix::fs::fstat(&fd)?.st_mode);
        if now != listed && listed != flist::FileType::Unknown {
            return Err(io::Error::other(format!(
                "changed since it was listed (a {} then, a {} now): left alone",
                what(listed),
                what(now)
            )));
        }
        Ok(Checked {
            fd,
            symlink: now == flist::FileType::Symlink,
        })
    }

    /// `lchown` the entry (`None` leaves that id).
    pub fn chown(&self, uid: Option<u32>, gid: Option<u32>) -> Result<(), Errno> {
        rustix::fs::chownat(
            &self.fd,
            c"",
            uid.map(Uid::from_raw),
            gid.map(Gid::from_raw),
            AtFlags::EMPTY_PATH,
        )
    }

    /// Set the permission bits; a symlink has none ([`Errno::LOOP`]).
    pub fn chmod(&self, mode: u32) -> Result<(), Errno> {
        if self.symlink {
            return Err(Errno::LOOP);
        }
        let via = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        rustix::fs::chmodat(
            CWD,
            via.as_str(),
            Mode::from_raw_mode(mode),
            AtFlags::empty(),
        )
    }
}

/// A type in words, for messages.
fn what(t: flist::FileType) -> &'static str {
    use flist::FileType::*;
    match t {
        File => "file",
        Dir => "directory",
        Symlink => "symlink",
        Fifo => "fifo",
        Socket => "socket",
        BlockDev => "block device",
        CharDev => "character device",
        Unknown => "file of unknown type",
    }
}

/// Set the permission bits of `name` in `dir` to `mode` without following a symlink: a
/// symlink found there gives [`Errno::LOOP`] and is left alone.
pub fn chmod_nofollow(dir: BorrowedFd<'_>, name: &[u8], mode: u32) -> Result<(), Errno> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
        return Err(Errno::LOOP);
    }
    let via = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::chmodat(
        CWD,
        via.as_str(),
        Mode::from_raw_mode(mode),
        AtFlags::empty(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_symlink_is_refused_and_its_target_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("target");
        std::fs::write(&target, "secret").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&target, tmp.path().join("link")).unwrap();
        std::fs::write(tmp.path().join("file"), "x").unwrap();
        let dir = std::fs::File::open(tmp.path()).unwrap();
        let dir = rustix::fd::AsFd::as_fd(&dir);

        assert_eq!(chmod_nofollow(dir, b"link", 0o600), Err(Errno::LOOP));
        let mode = |p: &str| {
            std::fs::symlink_metadata(tmp.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("target"), 0o644, "the link's target is untouched");

        chmod_nofollow(dir, b"file", 0o640).unwrap();
        assert_eq!(mode("file"), 0o640);
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        chmod_nofollow(dir, b"sub", 0o2750).unwrap();
        assert_eq!(mode("sub"), 0o2750);
        assert_eq!(chmod_nofollow(dir, b"missing", 0o600), Err(Errno::NOENT));
    }

    /// A listed entry whose type changed is refused before anything is done; a symlink is
    /// lchown'ed through its own `O_PATH` descriptor and never given a mode.
    #[test]
    fn checked_entries_keep_their_listed_type() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("target"), "secret").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("target"), tmp.path().join("link")).unwrap();
        std::fs::create_dir(tmp.path().join("dir")).unwrap();
        let dir = std::fs::File::open(tmp.path()).unwrap();
        let dir = rustix::fd::AsFd::as_fd(&dir);
        let listed_file = Checked::open(dir, b"link", flist::FileType::File);
        let err = listed_file
            .err()
            .expect("a file swapped for a symlink is refused");
        assert!(
            err.to_string().contains("a file then, a symlink now"),
            "{err}"
        );
        assert!(Checked::open(dir, b"dir", flist::FileType::File).is_err());
        let link = Checked::open(dir, b"link", flist::FileType::Symlink).unwrap();
        assert_eq!(link.chmod(0o777), Err(Errno::LOOP));
        if rustix::process::geteuid().is_root() {
            link.chown(Some(65534), None).unwrap();
            let meta = |p: &str| std::fs::symlink_metadata(tmp.path().join(p)).unwrap();
            assert_eq!(meta("link").uid(), 65534);
            assert_eq!(meta("target").uid(), 0, "the target keeps its owner");
        }
        let d = Checked::open(dir, b"dir", flist::FileType::Dir).unwrap();
        d.chmod(0o700).unwrap();
        let mode = std::fs::metadata(tmp.path().join("dir"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o700);
    }
}
