//! Chunk buffers aligned for `O_DIRECT`, and the descriptor a rank writes its chunks through:
//! opened with `O_DIRECT` when asked, falling back to buffered writes where the file system
//! refuses it (at the open, or at the first write), and saying why.

use crate::options::ALIGN;
use rustix::fd::OwnedFd;
use rustix::fs::OFlags;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// A zeroed buffer of `len` bytes whose start is aligned on [`ALIGN`] (what `O_DIRECT` asks
/// of memory), carved out of a slightly larger vector: no unsafe allocation.
pub(crate) struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + ALIGN as usize];
        // The vector is never grown, so its bytes never move.
        let start = raw.as_ptr().align_offset(ALIGN as usize);
        AlignedBuf { raw, start, len }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// A rank's descriptor for its chunks.
pub(crate) struct DataFile {
    pub file: File,
    /// Whether writes go through `O_DIRECT` now.
    pub direct: bool,
    /// Why `O_DIRECT` was asked for and is not used.
    pub fallback: Option<String>,
}

/// Open the data descriptor with `open(flags)`: with `O_DIRECT` when `want_direct`, and
/// without when the open refuses it (`EINVAL`: the file system does not do direct I/O).
pub(crate) fn open_data(
    want_direct: bool,
    open: impl Fn(OFlags) -> io::Result<OwnedFd>,
) -> io::Result<DataFile> {
    let base = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if want_direct {
        match open(base | OFlags::DIRECT) {
            Ok(fd) => {
                return Ok(DataFile {
                    file: File::from(fd),
                    direct: true,
                    fallback: None,
                })
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let fd = open(base)?;
                return Ok(DataFile {
                    file: File::from(fd),
                    direct: false,
                    fallback: Some(format!("open with O_DIRECT refused ({e}): buffered writes")),
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(DataFile {
        file: File::from(open(base)?),
        direct: false,
        fallback: None,
    })
}

impl DataFile {
    /// Write `bytes` (aligned, a multiple of [`ALIGN`] long when direct) at `offset`. A direct
    /// write refused with `EINVAL` (a file system that accepted the flag but not the I/O)
    /// turns `O_DIRECT` off on the descriptor and writes again, buffered.
    pub fn write_at(&mut self, bytes: &[u8], offset: u64) -> io::Result<()> {
        match self.file.write_all_at(bytes, offset) {
            Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                let flags = rustix::fs::fcntl_getfl(&self.file)?;
                rustix::fs::fcntl_setfl(&self.file, flags - OFlags::DIRECT)?;
                self.direct = false;
                self.fallback = Some(format!(
                    "a write with O_DIRECT refused ({e}): buffered writes"
                ));
                self.file.write_all_at(bytes, offset)
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::Mode;

    #[test]
    fn buffers_are_aligned() {
        for len in [4096usize, 8192, 1 << 20] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.bytes().as_ptr() as usize % ALIGN as usize, 0);
            assert_eq!(b.bytes_mut().len(), len);
            assert!(b.bytes().iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn an_open_refusing_o_direct_falls_back_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"").unwrap();
        // A file system that refuses O_DIRECT at the open (tmpfs before Linux 6.6, FUSE...).
        let refusing = |flags: OFlags| {
            if flags.contains(OFlags::DIRECT) {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                Ok(rustix::fs::open(&path, flags, Mode::empty())?)
            }
        };
        let mut d = open_data(true, refusing).unwrap();
        assert!(!d.direct);
        assert!(d.fallback.as_deref().unwrap().contains("O_DIRECT refused"));
        d.write_at(b"abc", 0).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
        // Another error is not taken for a refusal of O_DIRECT.
        let failing =
            |_: OFlags| -> io::Result<OwnedFd> { Err(io::Error::from_raw_os_error(libc::EACCES)) };
        assert!(open_data(true, failing).is_err());
    }

    #[test]
    fn a_direct_write_refused_turns_o_direct_off() {
        // On a disk file system a direct write of a misaligned length is refused (EINVAL):
        // the descriptor falls back. Under /work (a disk), not /tmp (maybe tmpfs).
        let dir = tempfile::tempdir_in(disk_dir()).unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"").unwrap();
        let mut d = open_data(true, |flags| {
            Ok(rustix::fs::open(&path, flags, Mode::empty())?)
        })
        .unwrap();
        assert!(d.direct, "the disk accepts O_DIRECT at the open");
        d.write_at(b"not aligned", 0).unwrap();
        assert!(!d.direct);
        assert!(d
            .fallback
            .as_deref()
            .unwrap()
            .contains("write with O_DIRECT"));
        assert_eq!(std::fs::read(&path).unwrap(), b"not aligned");
    }

    /// A directory on a disk file system for the tests (the crate's target dir's parent is on
    /// the same disk as the sources).
    pub(crate) fn disk_dir() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }
}
