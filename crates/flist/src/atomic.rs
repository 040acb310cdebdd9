//! Outputs that appear whole or not at all: written under a temporary name beside the final
//! name, then renamed over it. One naming scheme for every tool, `.NAME.HOST.PID.mfu-tmp`
//! (the writing process's host and pid; NAME cut, with a digest of the whole, when the whole
//! would be longer than a file name may be), so that:
//!
//! - the temporary is created new (`O_CREAT | O_EXCL | O_NOFOLLOW`) in the final name's
//!   directory, reached by an open descriptor: never an inode that was already there, never
//!   through a symlink;
//! - a run killed outright (SIGKILL, a node lost) leaves its temporary behind, as big as the
//!   output (on a node-local `/dev/shm`, that is RAM): the next run for the same final name on
//!   that host removes the ones whose process is gone ([`remove_stale`]), and never one of a
//!   run still going (or of another host, which it cannot ask).

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::io;

/// The end of every temporary's name.
pub const SUFFIX: &[u8] = b".mfu-tmp";

/// Bytes of the longest file name (NAME_MAX).
const NAME_MAX: usize = 255;

/// This host's name (uname's nodename), with any `/` made `_` for a file name.
pub fn host() -> Vec<u8> {
    rustix::system::uname()
        .nodename()
        .to_bytes()
        .iter()
        .map(|&b| if b == b'/' { b'_' } else { b })
        .collect()
}

/// The temporary name (one component) for the final name `base`, written by process `pid` on
/// `host`: `.BASE.HOST.PID.mfu-tmp`. When that would be longer than a file name may be, BASE
/// is cut and followed by `~` and the XXH64 of the whole of it (16 hex digits), so that two
/// long names that share their beginning never share a temporary.
pub fn temp_name_of(base: &[u8], host: &[u8], pid: u32) -> Vec<u8> {
    let tail = [b".", host, format!(".{pid}").as_bytes(), SUFFIX].concat();
    let room = NAME_MAX.saturating_sub(1 + tail.len());
    if base.len() <= room {
        return [b".", base, &tail].concat();
    }
    let digest = format!("~{:016x}", xxhash_rust::xxh64::xxh64(base, 0));
    let keep = room.saturating_sub(digest.len()).clamp(1, base.len());
    [b".", &base[..keep], digest.as_bytes(), &tail].concat()
}

/// The temporary name (one component) of this process for the final name `base`.
pub fn temp_name(base: &[u8]) -> Vec<u8> {
    temp_name_of(base, &host(), std::process::id())
}

/// The path of `name` (one component) in the directory of `path`.
pub fn beside(path: &[u8], name: &[u8]) -> Vec<u8> {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => [&path[..=i], name].concat(),
        None => name.to_vec(),
    }
}

/// The temporary path of this process for the final path `path`, beside it.
pub fn temp_path(path: &[u8]) -> Vec<u8> {
    beside(path, &temp_name(crate::path::basename(path)))
}

/// The pid in a name shaped like a temporary's (`.….PID.mfu-tmp`).
fn pid_of(name: &[u8]) -> Option<u32> {
    let stem = name.strip_prefix(b".")?.strip_suffix(SUFFIX)?;
    let dot = stem.iter().rposition(|&b| b == b'.')?;
    let digits = &stem[dot + 1..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Whether `name` (one component) is shaped like a temporary of this scheme, of any final
/// name, host and process (tools that walk a tree leave such files alone: another run may be
/// writing it).
pub fn is_temp_name(name: &[u8]) -> bool {
    pid_of(name).is_some()
}

/// Whether process `pid` is gone (on this host).
fn gone(pid: u32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    rustix::process::test_kill_process(pid) == Err(Errno::SRCH)
}

/// Create this process's temporary for the final name `base` in `dir`, new, open for
/// `access` (read and write, or write only) with `mode` (cut by the umask) until it is
/// renamed. Returns its name (one component) and descriptor. A file already at that name (a
/// symlink or a hard link planted there, this process's own leftover) is refused: `EEXIST`.
pub fn create_in(
    dir: BorrowedFd<'_>,
    base: &[u8],
    access: OFlags,
    mode: u32,
) -> io::Result<(Vec<u8>, OwnedFd)> {
    let name = temp_name(base);
    let flags = access | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name.as_slice(), flags, Mode::from_raw_mode(mode))?;
    Ok((name, fd))
}

/// Remove from `dir` the temporaries of the final name `base` that earlier runs on this host
/// left and whose process is gone: regular files of the pattern, owned by this user, never
/// followed. Returns each one found, with what removing it gave.
pub fn remove_stale(dir: BorrowedFd<'_>, base: &[u8]) -> Vec<(Vec<u8>, io::Result<()>)> {
    remove_stale_owned(dir, base, None)
}

/// [`remove_stale`], also removing those owned by `also` (a tool that gives its temporary
/// the owner of the file it stands for, as stripe's restriped copy, names that owner).
pub fn remove_stale_owned(
    dir: BorrowedFd<'_>,
    base: &[u8],
    also: Option<u32>,
) -> Vec<(Vec<u8>, io::Result<()>)> {
    let mut found = Vec::new();
    let Ok(listing) = rustix::fs::Dir::read_from(dir.as_fd()) else {
        return found;
    };
    let (host, me) = (host(), rustix::process::geteuid().as_raw());
    for entry in listing.flatten() {
        let name = entry.file_name().to_bytes();
        let Some(pid) = pid_of(name) else {
            continue;
        };
        if pid == std::process::id() || temp_name_of(base, &host, pid) != name || !gone(pid) {
            continue;
        }
        let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG
            || (st.st_uid != me && Some(st.st_uid) != also)
        {
            continue;
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Err(Errno::NOENT) => {}
            removed => found.push((name.to_vec(), removed.map_err(io::Error::from))),
        }
    }
    found
}

/// The directory of `path` (`.` when it has none) opened for `*at` calls (never following a
/// symlink at its last component is not asked: the directory is the one the user named).
pub fn open_parent(path: &[u8]) -> io::Result<OwnedFd> {
    let dir = crate::path::parent(path);
    let dir = if dir.is_empty() { &b"."[..] } else { dir };
    Ok(crate::walk::open_long(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
    )?)
}

/// Rename the temporary `temp` (one component, in `dir`) over the final name `base` there,
/// after its data is durable (`file`, when given, is synced first).
pub fn publish(
    dir: BorrowedFd<'_>,
    temp: &[u8],
    base: &[u8],
    file: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    if let Some(f) = file {
        rustix::fs::fsync(f)?;
    }
    rustix::fs::renameat(dir, temp, dir, base)?;
    Ok(())
}

/// Remove the temporary `temp` (one component, in `dir`), this process's and never complete;
/// gone already is fine.
pub fn discard(dir: BorrowedFd<'_>, temp: &[u8]) -> io::Result<()> {
    match rustix::fs::unlinkat(dir, temp, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `path` split into its directory (`.` when it has none) and last component.
pub fn split(path: &[u8]) -> (Vec<u8>, Vec<u8>) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/".to_vec(), path[1..].to_vec()),
        Some(i) => (path[..i].to_vec(), path[i + 1..].to_vec()),
        None => (b".".to_vec(), path.to_vec()),
    }
}

/// Open the directory `dir` by its path (as the user named it) and check that it is the
/// directory `id` (device, inode) the work was planned in: a directory replaced since, or a
/// symlink swapped in for it, is refused with a message naming it.
pub fn open_dir_checked(dir: &[u8], id: (u64, u64)) -> Result<OwnedFd, String> {
    let fd = rustix::fs::open(
        crate::path::as_path(dir),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open directory {}: {e}", crate::path::display(dir)))?;
    let now =
        identity(fd.as_fd()).map_err(|e| format!("stat {}: {e}", crate::path::display(dir)))?;
    if now != id {
        return Err(format!(
            "{} is not the directory it was when the work was planned (replaced, or a symbolic \
             link swapped in): nothing written there",
            crate::path::display(dir)
        ));
    }
    Ok(fd)
}

/// (device, inode) of an open file: what tells two names of one file apart from two files.
pub fn identity(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_a_file_name_and_give_back_their_pid() {
        for len in [1, 10, 200, 251, 255] {
            let name = vec![b'a'; len];
            let t = temp_name_of(&name, b"node17.cluster", 4_194_304);
            assert!(t.len() <= NAME_MAX, "{len}: {}", t.len());
            assert_eq!(pid_of(&t), Some(4_194_304));
            assert!(t.ends_with(b".node17.cluster.4194304.mfu-tmp"));
        }
        // Long names that differ only past the cut never share a temporary.
        let (mut a, mut b) = (vec![b'x'; 250], vec![b'x'; 250]);
        a.push(b'1');
        b.push(b'2');
        let (ta, tb) = (temp_name_of(&a, b"h", 7), temp_name_of(&b, b"h", 7));
        assert_ne!(ta, tb);
        assert!(ta.len() <= NAME_MAX && tb.len() <= NAME_MAX);
        assert_eq!(temp_name_of(&a, b"h", 7), ta, "the same name every time");
        assert_eq!(pid_of(b".A.tar.host.12.mfu-tmp"), Some(12));
        assert_eq!(pid_of(b".A.tar.host.x12.mfu-tmp"), None);
        assert_eq!(pid_of(b"A.tar.host.12.mfu-tmp"), None);
        assert_eq!(pid_of(b".A.tar.host.12.mfu-tmp.x"), None);
        assert_eq!(
            temp_path(b"d/e/f"),
            [b"d/e/".as_slice(), &temp_name(b"f")].concat()
        );
        assert_eq!(temp_path(b"f"), temp_name(b"f"));
    }

    /// Only a regular file of this user, named for this base and host, whose process is gone,
    /// is stale: a live process's temporary, another base's, a symlink and another name stay.
    #[test]
    fn stale_temporaries_of_dead_processes_go_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let host = host();
        let name =
            |base: &[u8], pid: u32| String::from_utf8(temp_name_of(base, &host, pid)).unwrap();
        let stale = name(b"f.bz2", dead);
        std::fs::write(t.path().join(&stale), b"old").unwrap();
        std::fs::write(t.path().join(name(b"f.bz2", 1)), b"init's: alive").unwrap();
        std::fs::write(t.path().join(name(b"g.bz2", dead)), b"another base").unwrap();
        let (mine, _fd) = create_in(dir.as_fd(), b"f.bz2", OFlags::WRONLY, 0o600).unwrap();
        let link = String::from_utf8(temp_name_of(b"h", &host, dead)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", t.path().join(&link)).unwrap();
        let removed = remove_stale(dir.as_fd(), b"f.bz2");
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].0, stale.as_bytes());
        assert!(
            remove_stale(dir.as_fd(), b"h").is_empty(),
            "a symlink stays"
        );
        let mut left: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want = vec![
            name(b"f.bz2", 1),
            name(b"g.bz2", dead),
            link,
            String::from_utf8(mine.clone()).unwrap(),
        ];
        want.sort();
        assert_eq!(left, want);
        // This process's temporary name is taken: refused, never reused.
        let again = create_in(dir.as_fd(), b"f.bz2", OFlags::WRONLY, 0o600);
        assert_eq!(again.unwrap_err().raw_os_error(), Some(libc::EEXIST));
        publish(dir.as_fd(), &mine, b"f.bz2", None).unwrap();
        assert!(t.path().join("f.bz2").exists());
        discard(dir.as_fd(), &mine).unwrap();
    }
}
