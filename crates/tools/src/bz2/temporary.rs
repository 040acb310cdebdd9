//! Temporary files beside a final name, `.NAME.XXXXXX.mfu-tmp` (six random letters or digits),
//! shared by `bz2` and `bcast`. They are made in the final name's directory, reached by an open
//! descriptor, with `O_CREAT | O_EXCL | O_NOFOLLOW`: never an inode that was already there.
//!
//! A run that is killed (SIGKILL, a node crash) cannot remove its temporary, and one can be as
//! big as the file (on a node-local `/dev/shm` that is RAM): the next run for the same final
//! name removes the ones it finds ([`remove_stale`]), by the same pattern, when they are regular
//! files owned by the user running it.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::hash::{BuildHasher, Hasher};
use std::io;

/// The end of every temporary's name.
pub(crate) const SUFFIX: &[u8] = b".mfu-tmp";
/// Random letters and digits between `.NAME.` and [`SUFFIX`] (as `tempfile` made them).
const RANDOM_LEN: usize = 6;

/// True when `name` is a temporary of the final name `base`: `.BASE.XXXXXX.mfu-tmp`.
pub(crate) fn is_temporary_of(name: &[u8], base: &[u8]) -> bool {
    let Some(rest) = name
        .strip_prefix(b".")
        .and_then(|n| n.strip_prefix(base))
        .and_then(|n| n.strip_prefix(b"."))
        .and_then(|n| n.strip_suffix(SUFFIX))
    else {
        return false;
    };
    rest.len() == RANDOM_LEN && rest.iter().all(u8::is_ascii_alphanumeric)
}

/// A fresh name `.BASE.XXXXXX.mfu-tmp`.
fn fresh_name(base: &[u8], attempt: u64) -> Vec<u8> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(attempt);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let mut r = h.finish();
    let mut name = [b".", base, b"."].concat();
    for _ in 0..RANDOM_LEN {
        name.push(LETTERS[(r % LETTERS.len() as u64) as usize]);
        r /= LETTERS.len() as u64;
    }
    name.extend_from_slice(SUFFIX);
    name
}

/// Create a new temporary for the final name `base` in `dir` (open for reading and writing,
/// mode 0600 while written). Returns its name (one component) and descriptor.
pub(crate) fn create(dir: BorrowedFd<'_>, base: &[u8]) -> io::Result<(Vec<u8>, OwnedFd)> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut last = Errno::EXIST;
    for attempt in 0..100 {
        let name = fresh_name(base, attempt);
        match rustix::fs::openat(dir, name.as_slice(), flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.into())
}

/// Remove from `dir` the temporaries of the final name `base` left by an earlier run that was
/// killed: regular files named by the pattern and owned by this user. Returns each one found,
/// with what removing it gave.
pub(crate) fn remove_stale(dir: BorrowedFd<'_>, base: &[u8]) -> Vec<(Vec<u8>, io::Result<()>)> {
    let mut found = Vec::new();
    let Ok(listing) = rustix::fs::Dir::read_from(dir.as_fd()) else {
        return found;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in listing.flatten() {
        let name = entry.file_name().to_bytes();
        if !is_temporary_of(name, base) {
            continue;
        }
        let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != me {
            continue;
        }
        let removed = rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(io::Error::from);
        found.push((name.to_vec(), removed));
    }
    found
}

/// `path` split into its directory (`.` when it has none) and last component.
pub(crate) fn split(path: &[u8]) -> (Vec<u8>, Vec<u8>) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/".to_vec(), path[1..].to_vec()),
        Some(i) => (path[..i].to_vec(), path[i + 1..].to_vec()),
        None => (b".".to_vec(), path.to_vec()),
    }
}

/// Open the directory `dir` by its path (as the user named it) and check that it is the
/// directory `id` (device, inode) the work was planned in: a directory replaced since, or a
/// symlink swapped in for it, is refused with a message naming it.
pub(crate) fn open_dir_checked(dir: &[u8], id: (u64, u64)) -> Result<OwnedFd, String> {
    let fd = rustix::fs::open(
        flist::path::as_path(dir),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open directory {}: {e}", flist::path::display(dir)))?;
    let now =
        identity(fd.as_fd()).map_err(|e| format!("stat {}: {e}", flist::path::display(dir)))?;
    if now != id {
        return Err(format!(
            "{} is not the directory it was when the work was planned (replaced, or a symbolic \
             link swapped in): nothing written there",
            flist::path::display(dir)
        ));
    }
    Ok(fd)
}

/// (device, inode) of an open file: what tells two names of one file apart from two files.
pub(crate) fn identity(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_pattern_and_stale_ones_go() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let (name, _fd) = create(dir.as_fd(), b"f.bz2").unwrap();
        assert!(is_temporary_of(&name, b"f.bz2"), "{name:?}");
        assert!(!is_temporary_of(&name, b"f"));
        assert!(!is_temporary_of(b".f.bz2.abc.mfu-tmp", b"f.bz2"));
        assert!(!is_temporary_of(b".f.bz2.abc/de.mfu-tmp", b"f.bz2"));
        // Not a regular file: kept.
        std::os::unix::fs::symlink("/etc/passwd", t.path().join(".f.bz2.AAAAAA.mfu-tmp")).unwrap();
        std::fs::write(t.path().join("f.bz2"), b"keep").unwrap();
        std::fs::write(t.path().join(".g.bz2.BBBBBB.mfu-tmp"), b"keep").unwrap();
        let removed = remove_stale(dir.as_fd(), b"f.bz2");
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].0, name);
        let mut left: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".f.bz2.AAAAAA.mfu-tmp", ".g.bz2.BBBBBB.mfu-tmp", "f.bz2"]
        );
    }
}
