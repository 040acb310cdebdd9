//! Counting the calls made through the [`Lustre`] trait, to prove, for example, that no layout
//! call reaches a file system that is not Lustre.

use std::ffi::CStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::api::{Created, Lustre};
use crate::layout::Layout;

/// How many times each [`Lustre`] method was called (counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// Calls of [`Lustre::is_lustre`].
    pub is_lustre: u64,
    /// Calls of [`Lustre::ost_count`].
    pub ost_count: u64,
    /// Calls of [`Lustre::layout_of`] and [`Lustre::layout_at`].
    pub layout_of: u64,
    /// Calls of [`Lustre::create_striped`].
    pub create_striped: u64,
    /// Calls of [`Lustre::mdt_index`], [`Lustre::data_version`] and [`Lustre::swap_layouts`].
    pub other: u64,
}

impl CallCounts {
    /// Calls that only make sense on Lustre: every call but `is_lustre`.
    pub fn layout_calls(&self) -> u64 {
        self.ost_count + self.layout_of + self.create_striped + self.other
    }
}

/// Thread-safe call counters behind [`CallCounts`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) is_lustre: AtomicU64,
    pub(crate) ost_count: AtomicU64,
    pub(crate) layout_of: AtomicU64,
    pub(crate) create_striped: AtomicU64,
    pub(crate) other: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`. Relaxed: the counts are statistics, not synchronisation.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub(crate) fn snapshot(&self) -> CallCounts {
        CallCounts {
            is_lustre: self.is_lustre.load(Ordering::Relaxed),
            ost_count: self.ost_count.load(Ordering::Relaxed),
            layout_of: self.layout_of.load(Ordering::Relaxed),
            create_striped: self.create_striped.load(Ordering::Relaxed),
            other: self.other.load(Ordering::Relaxed),
        }
    }
}

/// Wraps a [`Lustre`] implementation (typically the real [`crate::System`]) and counts the
/// calls that go through it.
#[derive(Debug)]
pub struct Counting<L> {
    inner: L,
    counters: Counters,
}

impl<L: Lustre> Counting<L> {
    /// Counts the calls made to `inner`, starting from zero.
    pub fn new(inner: L) -> Self {
        Counting {
            inner,
            counters: Counters::default(),
        }
    }

    /// How many times each method was called so far.
    pub fn calls(&self) -> CallCounts {
        self.counters.snapshot()
    }

    /// Calls that only make sense on Lustre so far: every call but `is_lustre`.
    pub fn layout_calls(&self) -> u64 {
        self.calls().layout_calls()
    }

    /// The wrapped implementation.
    pub fn inner(&self) -> &L {
        &self.inner
    }
}

impl<L: Lustre> Lustre for Counting<L> {
    fn is_lustre(&self, path: &Path) -> io::Result<bool> {
        Counters::bump(&self.counters.is_lustre);
        self.inner.is_lustre(path)
    }

    fn ost_count(&self, path: &Path) -> io::Result<u32> {
        Counters::bump(&self.counters.ost_count);
        self.inner.ost_count(path)
    }

    fn layout_of(&self, fd: BorrowedFd<'_>) -> io::Result<Option<Layout>> {
        Counters::bump(&self.counters.layout_of);
        self.inner.layout_of(fd)
    }

    fn layout_at(&self, path: &Path) -> io::Result<Option<Layout>> {
        Counters::bump(&self.counters.layout_of);
        self.inner.layout_at(path)
    }

    fn mdt_index(&self, fd: BorrowedFd<'_>) -> io::Result<u32> {
        Counters::bump(&self.counters.other);
        self.inner.mdt_index(fd)
    }

    fn data_version(&self, fd: BorrowedFd<'_>) -> io::Result<u64> {
        Counters::bump(&self.counters.other);
        self.inner.data_version(fd)
    }

    fn swap_layouts(
        &self,
        fd1: BorrowedFd<'_>,
        fd2: BorrowedFd<'_>,
        dv1: u64,
        dv2: u64,
        flags: u64,
    ) -> io::Result<()> {
        Counters::bump(&self.counters.other);
        self.inner.swap_layouts(fd1, fd2, dv1, dv2, flags)
    }

    fn create_striped_with(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        flags: i32,
        mode: u32,
        stripe_count: u16,
        stripe_size: u32,
    ) -> io::Result<Created> {
        Counters::bump(&self.counters.create_striped);
        self.inner
            .create_striped_with(dir, name, flags, mode, stripe_count, stripe_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::System;
    use std::fs::File;
    use std::os::fd::AsFd;

    #[test]
    fn counting_system_counts_each_method() {
        let dir = tempfile::tempdir().unwrap();
        let lustre = Counting::new(System);
        assert!(!lustre.is_lustre(dir.path()).unwrap());
        assert!(!lustre.is_lustre(dir.path()).unwrap());
        assert_eq!(lustre.layout_calls(), 0, "detection is not a layout call");
        assert!(lustre.ost_count(dir.path()).is_err());
        let d = File::open(dir.path()).unwrap();
        assert_eq!(lustre.layout_of(d.as_fd()).unwrap(), None);
        assert!(lustre
            .create_striped(d.as_fd(), c"f", 0o600, 1, 1 << 20)
            .is_err());
        assert_eq!(
            lustre.calls(),
            CallCounts {
                is_lustre: 2,
                ost_count: 1,
                layout_of: 1,
                create_striped: 1,
                other: 0
            }
        );
        assert_eq!(lustre.layout_calls(), 3);
        assert_eq!(lustre.calls().layout_calls(), 3);
    }

    #[test]
    fn counts_are_shared_across_threads() {
        let dir = tempfile::tempdir().unwrap();
        let lustre = Counting::new(System);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..25 {
                        lustre.is_lustre(dir.path()).unwrap();
                    }
                });
            }
        });
        assert_eq!(lustre.calls().is_lustre, 100);
    }
}
