//! How an aggregate is written, and the chunk size policy.

use crate::error::{Error, Result};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The chunk size where nothing better is known: 1 MiB (bytes).
pub const DEFAULT_CHUNK_SIZE: u64 = 1 << 20;

/// The smallest preferred I/O size of a file system ([`chunk_size_policy`]) taken as the chunk
/// size: 64 KiB (bytes). Below it (4 KiB on most local file systems), 1 MiB.
pub const MIN_POLICY_CHUNK: u64 = 64 << 10;

/// Alignment of chunk sizes, chunk offsets and `O_DIRECT` buffers: 4096 bytes.
pub(crate) const ALIGN: u64 = 4096;

/// How an aggregate is written. `Options::default()`: the policy's chunk size, buffered I/O,
/// never replacing an existing file, mode 0o644.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Chunk size (bytes; a multiple of 4096). `None`: [`chunk_size_policy`] of the
    /// aggregate's directory. A new version always keeps the chunk size of the aggregate's
    /// header (its pieces must line up with the previous version's); this is then ignored.
    pub chunk_size: Option<u64>,
    /// Write chunks with `O_DIRECT` (no double caching of data that is written once). Where
    /// the file system refuses it, the writes fall back to buffered I/O and
    /// [`crate::Written::direct_io_fallback`] says why.
    pub direct_io: bool,
    /// [`crate::Aggregate::create`] replaces a file already at the path (at close, by rename:
    /// a symbolic link there is replaced, never followed). Default: such a file is left alone
    /// and the close fails.
    pub overwrite: bool,
    /// Permission bits of a new aggregate (cut by the umask).
    pub mode: u32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            chunk_size: None,
            direct_io: false,
            overwrite: false,
            mode: 0o644,
        }
    }
}

/// The chunk size for a new aggregate in the directory `dir` (bytes): on Lustre, the stripe
/// size of lustre-sys's archive policy ([`lustre_sys::archive_layout`]: the aggregate is
/// created striped over all OSTs with that stripe size, so each chunk is one stripe);
/// elsewhere the directory's preferred I/O size (`st_blksize`) when it is at least
/// [`MIN_POLICY_CHUNK`] and a multiple of 4096, else [`DEFAULT_CHUNK_SIZE`].
pub fn chunk_size_policy(dir: &Path) -> u64 {
    if lustre_sys::is_lustre(dir).unwrap_or(false) {
        return lustre_stripe(DEFAULT_CHUNK_SIZE).map_or(DEFAULT_CHUNK_SIZE, u64::from);
    }
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    match rustix::fs::stat(dir) {
        Ok(st) => {
            let blksize = st.st_blksize as u64;
            if blksize >= MIN_POLICY_CHUNK && blksize % ALIGN == 0 {
                blksize
            } else {
                DEFAULT_CHUNK_SIZE
            }
        }
        Err(_) => DEFAULT_CHUNK_SIZE,
    }
}

/// The stripe size lustre-sys's archive policy gives an aggregate of `chunk` bytes chunks
/// (bytes), `None` when it says to inherit the directory's layout.
pub(crate) fn lustre_stripe(chunk: u64) -> Option<u32> {
    match lustre_sys::archive_layout(&lustre_sys::Overrides::default(), chunk) {
        lustre_sys::Decision::Set { size, .. } if size > 0 => Some(size),
        _ => None,
    }
}

/// The chunk size of a new aggregate at `path` with `options` (bytes), checked.
pub(crate) fn chunk_size_for(path: &Path, options: &Options) -> Result<u64> {
    let chunk = match options.chunk_size {
        Some(c) => c,
        None => chunk_size_policy(parent(path)),
    };
    check_chunk_size(chunk)?;
    Ok(chunk)
}

/// A chunk size is a positive multiple of 4096 bytes below 2^40.
pub(crate) fn check_chunk_size(chunk: u64) -> Result<()> {
    if chunk == 0 || chunk % ALIGN != 0 || chunk >= 1 << 40 {
        return Err(Error::Options(format!(
            "chunk size {chunk} bytes: must be a positive multiple of {ALIGN} below 1 TiB"
        )));
    }
    Ok(())
}

/// The directory of `path` (empty for a bare name: the current directory).
pub(crate) fn parent(path: &Path) -> &Path {
    let bytes = path.as_os_str().as_bytes();
    match bytes.iter().rposition(|&b| b == b'/') {
        Some(0) => Path::new("/"),
        Some(i) => Path::new(std::ffi::OsStr::from_bytes(&bytes[..i])),
        None => Path::new(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_checked() {
        assert!(check_chunk_size(4096).is_ok());
        assert!(check_chunk_size(1 << 20).is_ok());
        assert!(check_chunk_size(0).is_err());
        assert!(check_chunk_size(1000).is_err());
        assert!(check_chunk_size(4096 + 512).is_err());
    }

    #[test]
    fn policy_off_lustre_is_blksize_or_one_mib() {
        let dir = tempfile::tempdir().unwrap();
        let st = rustix::fs::stat(dir.path()).unwrap();
        let got = chunk_size_policy(dir.path());
        let blksize = st.st_blksize as u64;
        if blksize >= MIN_POLICY_CHUNK {
            assert_eq!(got, blksize);
        } else {
            assert_eq!(got, DEFAULT_CHUNK_SIZE);
        }
        assert_eq!(lustre_stripe(DEFAULT_CHUNK_SIZE), Some(1 << 20));
    }

    #[test]
    fn parent_of_paths() {
        assert_eq!(parent(Path::new("/a/b")), Path::new("/a"));
        assert_eq!(parent(Path::new("/b")), Path::new("/"));
        assert_eq!(parent(Path::new("b")), Path::new(""));
    }
}
