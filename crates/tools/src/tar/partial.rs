//! The temporary file a new archive is written as, beside it, until it is complete:
//! `.NAME.HOST.PID.mfu-tmp` (rank 0's host and pid; NAME shortened when the whole would be
//! longer than a file name may be). A run killed outright (SIGKILL, a node lost) leaves one
//! behind, as big as the archive; the next create of the same archive on that host removes it
//! once its process is gone.

use flist::{FileType, ItemError};
use rustix::fs::{AtFlags, OFlags};
use rustix::io::Errno;
use std::io;

/// Bytes of the longest file name (NAME_MAX).
const NAME_MAX: usize = 255;
/// Last bytes of every temporary name.
const SUFFIX: &[u8] = b".mfu-tmp";

/// This host's name (uname's nodename), with any `/` made `_` for a file name.
fn host() -> Vec<u8> {
    let name = rustix::system::uname();
    name.nodename()
        .to_bytes()
        .iter()
        .map(|&b| if b == b'/' { b'_' } else { b })
        .collect()
}

/// The temporary name (a file name, no directory) for the archive named `name`, written by
/// process `pid` on `host`.
fn temp_name(name: &[u8], host: &[u8], pid: u32) -> Vec<u8> {
    let tail = [b".", host, format!(".{pid}").as_bytes(), SUFFIX].concat();
    // Never shorter than one byte of NAME, even with an absurd host name.
    let keep = name
        .len()
        .min(NAME_MAX.saturating_sub(1 + tail.len()).max(1));
    [b".", &name[..keep], &tail].concat()
}

/// The temporary path of `archive` for this process.
pub(super) fn temp_path(archive: &[u8]) -> Vec<u8> {
    let name = temp_name(flist::path::basename(archive), &host(), std::process::id());
    let mut path = flist::path::parent(archive).to_vec();
    if path != b"/" {
        path.push(b'/');
    }
    path.extend_from_slice(&name);
    path
}

/// Whether process `pid` is gone (on this host).
fn gone(pid: u32) -> bool {
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Remove the temporary archives that earlier runs on this host left for `archive` and whose
/// process is gone; returns the paths removed and the removals that failed.
pub(super) fn remove_stale(archive: &[u8]) -> (Vec<Vec<u8>>, Vec<ItemError>) {
    let (mut removed, mut failed) = (Vec::new(), Vec::new());
    let dir_path = flist::path::parent(archive);
    let name = flist::path::basename(archive);
    let host = host();
    let Ok(dir) = flist::walk::open_long(
        dir_path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
    ) else {
        return (removed, failed);
    };
    let Ok(entries) = rustix::fs::Dir::read_from(&dir) else {
        return (removed, failed);
    };
    for entry in entries.flatten() {
        let candidate = entry.file_name().to_bytes();
        let Some(pid) = pid_of(candidate) else {
            continue;
        };
        if pid == std::process::id() || temp_name(name, &host, pid) != candidate || !gone(pid) {
            continue;
        }
        let mut path = dir_path.to_vec();
        if path != b"/" {
            path.push(b'/');
        }
        path.extend_from_slice(candidate);
        // Only a regular file, never followed.
        let regular = rustix::fs::statat(&dir, candidate, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| FileType::from_mode(st.st_mode) == FileType::File);
        if !regular {
            continue;
        }
        match rustix::fs::unlinkat(&dir, candidate, AtFlags::empty()) {
            Ok(()) => removed.push(path),
            Err(Errno::NOENT) => {}
            Err(e) => failed.push(ItemError::new(
                &path,
                "remove the incomplete archive of an earlier run",
                e.into(),
            )),
        }
    }
    (removed, failed)
}

/// The pid in a name shaped like a temporary archive's (`.….PID.mfu-tmp`).
fn pid_of(name: &[u8]) -> Option<u32> {
    let stem = name.strip_prefix(b".")?.strip_suffix(SUFFIX)?;
    let dot = stem.iter().rposition(|&b| b == b'.')?;
    let digits = &stem[dot + 1..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Remove the temporary archive `tmp` (it was never complete). `Ok` when it is gone.
pub(super) fn remove(tmp: &[u8]) -> Result<(), ItemError> {
    match rustix::fs::unlink(flist::path::as_path(tmp)) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(ItemError::new(
            tmp,
            "remove the incomplete archive",
            e.into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_a_file_name_and_give_back_their_pid() {
        for len in [1, 10, 200, 251, 255] {
            let name = vec![b'a'; len];
            let t = temp_name(&name, b"node17.cluster", 4_194_304);
            assert!(t.len() <= NAME_MAX, "{len}: {}", t.len());
            assert_eq!(pid_of(&t), Some(4_194_304));
            assert!(t.ends_with(b".node17.cluster.4194304.mfu-tmp"));
        }
        assert_eq!(pid_of(b".A.tar.host.12.mfu-tmp"), Some(12));
        assert_eq!(pid_of(b".A.tar.host.x12.mfu-tmp"), None);
        assert_eq!(pid_of(b"A.tar.host.12.mfu-tmp"), None);
        assert_eq!(pid_of(b".A.tar.host.12.mfu-tmp.x"), None);
    }
}
