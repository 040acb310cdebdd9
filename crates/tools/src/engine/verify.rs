//! `--verify`: read back what was written and compare it with what was read from the source.
//!
//! The check must read the device, not the page cache the write just filled (which holds
//! what the program meant to write, not what landed). In order of preference:
//! 1. `O_DIRECT`: the written file opened again through `/proc/self/fd` with `O_DIRECT`
//!    (the kernel writes dirty pages of the range back first, then reads the device);
//! 2. where the file system refuses `O_DIRECT`: `fdatasync`, then
//!    `posix_fadvise(DONTNEED)` on the range (clean pages are dropped), then plain reads;
//! 3. a file system that lives in memory (tmpfs, ramfs): plain reads, and the report says so
//!    (there is no device to read).
//!
//! The bytes read back go through the same [`RangeHasher`] as the source's did; equal
//! digests mean equal bytes.

use crate::engine::copy::data::{Buffer, DataError, DIRECT_ALIGN};
use crate::engine::digest::{RangeDigest, RangeHasher};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::cell::RefCell;
use std::io;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// `statfs` magic of tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;
/// `statfs` magic of ramfs.
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// The file-system type of a `statfs` (its field's type differs between architectures).
#[allow(clippy::unnecessary_cast)]
fn fs_type(s: &rustix::fs::StatFs) -> i64 {
    s.f_type as i64
}

/// Bytes per read-back call.
const READ_BYTES: usize = 1 << 20;

/// How a range was read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadBack {
    /// With `O_DIRECT`, from the device.
    Direct,
    /// After `fdatasync` and `posix_fadvise(DONTNEED)` dropped it from the page cache.
    Dropped,
    /// From memory: the file system keeps files there (tmpfs, ramfs).
    Memory,
    /// From the page cache: neither `O_DIRECT` nor dropping the range worked here.
    Cached,
}

impl ReadBack {
    /// How it reads in a report.
    pub fn words(self) -> &'static str {
        match self {
            ReadBack::Direct => "O_DIRECT (from the device)",
            ReadBack::Dropped => "after fdatasync + posix_fadvise(DONTNEED) (from the device)",
            ReadBack::Memory => "from memory (tmpfs/ramfs: no device to read)",
            ReadBack::Cached => {
                "from the page cache (the file system refused O_DIRECT and DONTNEED)"
            }
        }
    }
}

/// Ranges read back, by how (counts of ranges), and the bytes read.
#[derive(Debug, Default)]
pub struct Counters {
    /// Ranges read with `O_DIRECT`.
    pub direct: AtomicU64,
    /// Ranges read after dropping them from the page cache.
    pub dropped: AtomicU64,
    /// Ranges read from a file system in memory.
    pub memory: AtomicU64,
    /// Ranges read from the page cache.
    pub cached: AtomicU64,
    /// Bytes read back.
    pub bytes: AtomicU64,
}

impl Counters {
    fn count(&self, how: ReadBack, bytes: u64) {
        let c = match how {
            ReadBack::Direct => &self.direct,
            ReadBack::Dropped => &self.dropped,
            ReadBack::Memory => &self.memory,
            ReadBack::Cached => &self.cached,
        };
        c.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// [direct, dropped, memory, cached, bytes].
    pub fn values(&self) -> [u64; 5] {
        [
            &self.direct,
            &self.dropped,
            &self.memory,
            &self.cached,
            &self.bytes,
        ]
        .map(|c| c.load(Ordering::Relaxed))
    }
}

thread_local! {
    /// The read-back buffer of this thread (aligned for `O_DIRECT`).
    static BUF: RefCell<Buffer> = RefCell::new(Buffer::new(READ_BYTES));
}

/// Reopen the file behind `fd` for reading (its inode, not a name that may have changed).
fn reopen(fd: BorrowedFd<'_>, direct: bool) -> io::Result<OwnedFd> {
    let path = format!("/proc/self/fd/{}", rustix::fd::AsRawFd::as_raw_fd(&fd));
    let mut flags = OFlags::RDONLY | OFlags::CLOEXEC;
    if direct {
        flags |= OFlags::DIRECT;
    }
    Ok(rustix::fs::open(path.as_str(), flags, Mode::empty())?)
}

/// Read back the range `fresh` hashes (a new [`RangeHasher`] of the range that was written)
/// from the file `written` and compare its digest with `expected`, the digest of the bytes
/// read from the source. Returns whether they are equal; counts how the range was read.
pub fn check(
    written: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    mut fresh: RangeHasher,
    expected: &RangeDigest,
    counters: &Counters,
) -> Result<bool, DataError> {
    let how = read_back(written, offset, len, &mut |b| fresh.update(b))?;
    counters.count(how, len);
    Ok(fresh.finish() == *expected)
}

/// Read the `len` bytes at `offset` of `written` into `seen`, from the device where the file
/// system allows. Returns how.
pub fn read_back(
    written: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    seen: &mut dyn FnMut(&[u8]),
) -> Result<ReadBack, DataError> {
    let fail = |op: &'static str| move |e: io::Error| DataError { op, source: e };
    let in_memory = rustix::fs::fstatfs(written)
        .map(|s| matches!(fs_type(&s), TMPFS_MAGIC | RAMFS_MAGIC))
        .unwrap_or(false);
    if in_memory {
        let fd = reopen(written, false).map_err(fail("reopen to verify"))?;
        read_range(fd.as_fd(), offset, len, false, seen)?;
        return Ok(ReadBack::Memory);
    }
    if let Ok(fd) = reopen(written, true) {
        match read_range(fd.as_fd(), offset, len, true, seen) {
            Ok(()) => return Ok(ReadBack::Direct),
            // Refused before any byte was seen (alignment the device wants): the next way.
            Err(Refused::Before) => {}
            Err(Refused::After(e)) => return Err(e),
        }
    }
    rustix::fs::fdatasync(written).map_err(|e| fail("fdatasync (to verify)")(e.into()))?;
    let dropped = rustix::fs::fadvise(
        written,
        offset,
        NonZeroU64::new(len),
        rustix::fs::Advice::DontNeed,
    )
    .is_ok();
    let fd = reopen(written, false).map_err(fail("reopen to verify"))?;
    read_range(fd.as_fd(), offset, len, false, seen)?;
    Ok(if dropped {
        ReadBack::Dropped
    } else {
        ReadBack::Cached
    })
}

/// Why [`read_range`] stopped.
enum Refused {
    /// `O_DIRECT` refused before any byte was handed on.
    Before,
    /// A failure after bytes were handed on (or without `O_DIRECT`).
    After(DataError),
}

impl From<Refused> for DataError {
    fn from(r: Refused) -> DataError {
        match r {
            Refused::Before => DataError {
                op: "read back (to verify)",
                source: io::Error::from_raw_os_error(libc::EINVAL),
            },
            Refused::After(e) => e,
        }
    }
}

/// Read `len` bytes at `offset` of `fd` into `seen`, in calls of [`READ_BYTES`]; `direct`:
/// whole aligned blocks (the range is widened to them and the extra bytes not handed on).
fn read_range(
    fd: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    direct: bool,
    seen: &mut dyn FnMut(&[u8]),
) -> Result<(), Refused> {
    let align = if direct { DIRECT_ALIGN as u64 } else { 1 };
    let start = offset / align * align;
    let end = offset + len;
    BUF.with_borrow_mut(|buf| {
        let b = buf.get();
        let mut pos = start;
        let mut handed = false;
        while pos < end {
            let want = ((end - pos).next_multiple_of(align) as usize).min(b.len());
            let n = match rustix::io::pread(fd, &mut b[..want], pos) {
                Ok(0) => {
                    return Err(Refused::After(DataError {
                        op: "read back (to verify: the file is shorter than what was written)",
                        source: io::Error::from(io::ErrorKind::UnexpectedEof),
                    }))
                }
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                Err(Errno::INVAL) if direct && !handed => return Err(Refused::Before),
                Err(e) => {
                    return Err(Refused::After(DataError {
                        op: "read back (to verify)",
                        source: e.into(),
                    }))
                }
            };
            let lo = offset.saturating_sub(pos) as usize;
            let hi = ((end - pos) as usize).min(n);
            if lo < hi {
                seen(&b[lo..hi]);
                handed = true;
            }
            pos += n as u64;
            if direct && n % DIRECT_ALIGN != 0 && pos < end {
                // A short direct read before the end: the file is shorter.
                return Err(Refused::After(DataError {
                    op: "read back (to verify: the file is shorter than what was written)",
                    source: io::Error::from(io::ErrorKind::UnexpectedEof),
                }));
            }
        }
        Ok(())
    })
}

/// How a run's written ranges were read back, for its report (summed over ranks).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Ranges read with `O_DIRECT`.
    pub direct: u64,
    /// Ranges read after `fdatasync` and `posix_fadvise(DONTNEED)`.
    pub dropped: u64,
    /// Ranges read from a file system in memory (tmpfs, ramfs).
    pub memory: u64,
    /// Ranges read from the page cache (nothing else worked).
    pub cached: u64,
    /// Bytes read back.
    pub bytes: u64,
}

impl Summary {
    /// From [`Counters::values`] (summed).
    pub(crate) fn of([direct, dropped, memory, cached, bytes]: [u64; 5]) -> Summary {
        Summary {
            direct,
            dropped,
            memory,
            cached,
            bytes,
        }
    }

    /// `N ranges (B bytes) read back O_DIRECT (from the device)[, M ...]`.
    pub fn text(&self) -> String {
        let ways = [
            (self.direct, ReadBack::Direct),
            (self.dropped, ReadBack::Dropped),
            (self.memory, ReadBack::Memory),
            (self.cached, ReadBack::Cached),
        ];
        let used: Vec<String> = ways
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, how)| format!("{n} read back {}", how.words()))
            .collect();
        if used.is_empty() {
            return "nothing to read back".to_string();
        }
        format!(
            "{} bytes in {} ranges: {}",
            self.bytes,
            self.direct + self.dropped + self.memory + self.cached,
            used.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::digest::HashKind;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_range_read_back_matches_until_a_byte_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let file = std::fs::File::create(&path).unwrap();
        file.write_all_at(&data, 0).unwrap();
        let counters = Counters::default();
        // An unaligned range of a file written through the page cache.
        let (offset, len) = (5000u64, 200_000u64);
        let digest = |bytes: &[u8]| {
            let mut h = RangeHasher::new(HashKind::Blake3, offset, len, data.len() as u64);
            h.update(bytes);
            h.finish()
        };
        let want = digest(&data[5000..205_000]);
        let fresh = || RangeHasher::new(HashKind::Blake3, offset, len, data.len() as u64);
        let fd = rustix::fd::AsFd::as_fd(&file);
        assert!(check(fd, offset, len, fresh(), &want, &counters).unwrap());
        file.write_all_at(&[data[100_000] ^ 1], 100_000).unwrap();
        assert!(!check(fd, offset, len, fresh(), &want, &counters).unwrap());
        // A change outside the range is not its business.
        file.write_all_at(&[data[100_000]], 100_000).unwrap();
        file.write_all_at(&[data[250_000] ^ 1], 250_000).unwrap();
        assert!(check(fd, offset, len, fresh(), &want, &counters).unwrap());
        let [direct, dropped, memory, cached, bytes] = counters.values();
        assert_eq!(direct + dropped + memory + cached, 3);
        assert_eq!(bytes, 3 * len);
    }
}
