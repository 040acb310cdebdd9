//! chmod that never follows a symbolic link, even one swapped in after the walk.
//!
//! `fchmodat(dir, name, mode, 0)` follows a symlink. Between the walk and the change someone
//! may replace a listed file with a link to `/etc/shadow`, and a chmod run by root would then
//! change the link's target. `AT_SYMLINK_NOFOLLOW` for fchmodat needs the fchmodat2 system call
//! (Linux 6.6), and `fchmod` refuses `O_PATH` descriptors, so: open the name itself with
//! `O_PATH | O_NOFOLLOW` (a symlink is opened as the link, not followed), refuse it if it is a
//! link now, and change the mode through the descriptor's `/proc/self/fd` entry, which names
//! exactly the inode that was checked.

use rustix::fd::{AsRawFd, BorrowedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, CWD};
use rustix::io::Errno;

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
}
