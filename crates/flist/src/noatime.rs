//! Reads that leave access times alone (`--noatime`): the one place where a file or a directory
//! is opened for reading with `O_NOATIME` when asked.
//!
//! Linux lets `O_NOATIME` only to a file's owner or a process with `CAP_FOWNER`; anyone else's
//! open fails with `EPERM`. The read must still happen, so [`NoAtime::open`] opens the file
//! again without the flag and counts it: the caller tells the user once, at the end, how many
//! files were read without it (their access times may have changed), never once per file, and
//! never fails a read because of it.

use rustix::fs::OFlags;
use rustix::io::Errno;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether reads should leave access times alone, and how many files they could not (the kernel
/// refused `O_NOATIME`). Shared by every thread (and thread rank) of a run; each MPI process has
/// its own count.
#[derive(Debug, Default)]
pub struct NoAtime {
    asked: bool,
    refused: AtomicU64,
}

/// Reads that update access times as usual (nothing asked, nothing counted).
pub static OFF: NoAtime = NoAtime::new(false);

/// An open error that can say whether it is `EPERM`, the kernel's refusal of `O_NOATIME`.
pub trait OpenError {
    /// True for `EPERM`.
    fn is_eperm(&self) -> bool;
}

impl OpenError for Errno {
    fn is_eperm(&self) -> bool {
        *self == Errno::PERM
    }
}

impl OpenError for io::Error {
    fn is_eperm(&self) -> bool {
        self.raw_os_error() == Some(libc::EPERM)
    }
}

impl NoAtime {
    /// Reads with `O_NOATIME` (where permitted) when `asked`; a count of 0.
    pub const fn new(asked: bool) -> NoAtime {
        NoAtime {
            asked,
            refused: AtomicU64::new(0),
        }
    }

    /// True when reads should leave access times alone.
    pub fn asked(&self) -> bool {
        self.asked
    }

    /// Open for reading with `open(flags)`, adding `O_NOATIME` when asked. Refused (`EPERM`: the
    /// caller is not the owner and lacks `CAP_FOWNER`), the file is opened again without it and
    /// counted in [`NoAtime::refused`] when that open succeeds. Any other error is the open's.
    pub fn open<T, E: OpenError>(
        &self,
        flags: OFlags,
        open: impl FnMut(OFlags) -> Result<T, E>,
    ) -> Result<T, E> {
        self.open_part(true, flags, open)
    }

    /// [`NoAtime::open`] for a reader of one part of a file (a chunk, a segment): the file is
    /// counted only by the reader of its first part (`first`), so that a file read in many
    /// parts, by many ranks, counts once.
    pub fn open_part<T, E: OpenError>(
        &self,
        first: bool,
        flags: OFlags,
        mut open: impl FnMut(OFlags) -> Result<T, E>,
    ) -> Result<T, E> {
        if !self.asked {
            return open(flags);
        }
        match open(flags | OFlags::NOATIME) {
            Err(e) if e.is_eperm() => {}
            r => return r,
        }
        let r = open(flags);
        if r.is_ok() && first {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// [`NoAtime::open`] of a whole path, of any length ([`crate::at::open_long`]).
    pub fn open_path(&self, path: &[u8], flags: OFlags) -> Result<rustix::fd::OwnedFd, Errno> {
        self.open(flags, |f| crate::at::open_long(path, f))
    }

    /// [`NoAtime::open_path`] read-only, as a [`std::fs::File`].
    pub fn open_file(&self, path: &[u8]) -> io::Result<std::fs::File> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        Ok(self.open_path(path, flags)?.into())
    }

    /// Files (and directories) read without `O_NOATIME` because the kernel refused it, so far,
    /// by this process.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// [`NoAtime::refused`], and the count set back to 0. Each thread rank of a process takes
    /// the count when its own reads are over and adds it to the sum over ranks: every file is
    /// counted by exactly one of them (the first to take after it was read).
    pub fn take_refused(&self) -> u64 {
        self.refused.swap(0, Ordering::Relaxed)
    }

    /// The warning for `n` files read without `O_NOATIME` (`n` > 0), for the end of a run.
    pub fn warning(n: u64) -> String {
        let files = if n == 1 { "file" } else { "files" };
        format!(
            "{n} {files} read without O_NOATIME (not their owner): their access time may have \
             changed"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// An `open` that records the flags it is called with and answers from `answers`.
    fn opener<'a>(
        calls: &'a RefCell<Vec<OFlags>>,
        answers: &'a RefCell<Vec<Result<u8, Errno>>>,
    ) -> impl FnMut(OFlags) -> Result<u8, Errno> + 'a {
        move |f| {
            calls.borrow_mut().push(f);
            answers.borrow_mut().remove(0)
        }
    }

    #[test]
    fn not_asked_opens_once_without_the_flag() {
        let calls = RefCell::new(Vec::new());
        let answers = RefCell::new(vec![Ok(1)]);
        assert_eq!(OFF.open(OFlags::RDONLY, opener(&calls, &answers)), Ok(1));
        assert_eq!(*calls.borrow(), vec![OFlags::RDONLY]);
        assert_eq!(OFF.refused(), 0);
    }

    #[test]
    fn asked_and_allowed_opens_once_with_the_flag() {
        let n = NoAtime::new(true);
        let calls = RefCell::new(Vec::new());
        let answers = RefCell::new(vec![Ok(1)]);
        assert_eq!(n.open(OFlags::RDONLY, opener(&calls, &answers)), Ok(1));
        assert_eq!(*calls.borrow(), vec![OFlags::RDONLY | OFlags::NOATIME]);
        assert_eq!(n.refused(), 0);
    }

    #[test]
    fn refused_opens_again_without_the_flag_and_counts_the_file() {
        let n = NoAtime::new(true);
        let calls = RefCell::new(Vec::new());
        let answers = RefCell::new(vec![Err(Errno::PERM), Ok(2)]);
        assert_eq!(n.open(OFlags::RDONLY, opener(&calls, &answers)), Ok(2));
        assert_eq!(
            *calls.borrow(),
            vec![OFlags::RDONLY | OFlags::NOATIME, OFlags::RDONLY]
        );
        assert_eq!(n.refused(), 1);
        // Later parts of the same file are not counted again.
        let answers = RefCell::new(vec![Err(Errno::PERM), Ok(3)]);
        assert_eq!(
            n.open_part(false, OFlags::RDONLY, opener(&calls, &answers)),
            Ok(3)
        );
        assert_eq!(n.take_refused(), 1);
        assert_eq!(n.refused(), 0);
    }

    #[test]
    fn other_errors_are_the_opens_and_are_not_counted() {
        let n = NoAtime::new(true);
        let calls = RefCell::new(Vec::new());
        // Not found: no second try.
        let answers = RefCell::new(vec![Err(Errno::NOENT)]);
        assert_eq!(
            n.open(OFlags::RDONLY, opener(&calls, &answers)),
            Err(Errno::NOENT)
        );
        assert_eq!(calls.borrow().len(), 1);
        // Refused, then the plain open fails too: its error, nothing counted.
        let answers = RefCell::new(vec![Err(Errno::PERM), Err(Errno::ACCESS)]);
        assert_eq!(
            n.open(OFlags::RDONLY, opener(&calls, &answers)),
            Err(Errno::ACCESS)
        );
        assert_eq!(n.refused(), 0);
    }

    /// The real kernel: a file of one's own opens with `O_NOATIME` and nothing is counted.
    #[test]
    fn own_files_open_with_the_flag() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let n = NoAtime::new(true);
        let fd = n
            .open_path(p.as_os_str().as_encoded_bytes(), OFlags::RDONLY)
            .unwrap();
        let flags = rustix::fs::fcntl_getfl(&fd).unwrap();
        assert!(flags.contains(OFlags::NOATIME));
        assert_eq!(n.refused(), 0);
    }

    #[test]
    fn the_warning_counts_files() {
        assert_eq!(
            NoAtime::warning(3),
            "3 files read without O_NOATIME (not their owner): their access time may have changed"
        );
        assert!(NoAtime::warning(1).starts_with("1 file read"));
    }
}
