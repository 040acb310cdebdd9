//! A test double for [`Lustre`]: pretends that paths under some roots are on Lustre, creates
//! real (unstriped) files, and records what layouts were asked for. Public so that code
//! embedding mfu-rs can test its Lustre paths without Lustre; not for production use.
//!
//! Layouts are recorded per inode (`st_dev`, `st_ino`), so a renamed file keeps its layout. An
//! inode number the file system reuses for a file created behind the fake's back can show a
//! stale layout; tests that delete and recreate files should create them through the fake.

use std::collections::HashMap;
use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::fs::{fstat, openat, Mode, OFlags};
use rustix::io::Errno;

use crate::api::{Created, Lustre, SetOutcome};
use crate::counting::Counters;
pub use crate::counting::{CallCounts, Counting};
use crate::layout::Layout;
use crate::sys::op_error;

/// An inode: (`st_dev`, `st_ino`).
type InodeKey = (u64, u64);

/// One call of [`Fake::create_striped`], as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeCreate {
    /// The directory (resolved through `/proc/self/fd`) joined with the name.
    pub path: PathBuf,
    /// Requested stripe count (0 = default, 0xFFFF = all).
    pub stripe_count: u16,
    /// Requested stripe size (bytes).
    pub stripe_size: u32,
    /// Requested permission bits.
    pub mode: u32,
}

/// What the fake remembers between calls.
#[derive(Debug, Default)]
struct Recorded {
    layouts: HashMap<InodeKey, Layout>,
    creates: Vec<FakeCreate>,
}

/// A pretend Lustre: paths under its roots are "on Lustre" with `osts` OSTs. Files are created
/// for real on the underlying file system; their requested layouts are only recorded.
#[derive(Debug)]
pub struct Fake {
    roots: Vec<PathBuf>,
    osts: u32,
    recorded: Mutex<Recorded>,
    counters: Counters,
}

/// `path` with symlinks and `..` resolved as far as it exists: canonical if it exists, else its
/// canonical parent joined with its last component, else as given.
fn resolve(path: &Path) -> PathBuf {
    if let Ok(canonical) = path.canonicalize() {
        return canonical;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => match parent.canonicalize() {
            Ok(parent) => parent.join(name),
            Err(_) => path.to_path_buf(),
        },
        _ => path.to_path_buf(),
    }
}

/// The inode of an open descriptor.
fn inode_of_fd(fd: BorrowedFd<'_>) -> io::Result<InodeKey> {
    let st = fstat(fd).map_err(|e| op_error("fake: fstat", e))?;
    // `st_dev` / `st_ino` are u64 on 64-bit Linux but narrower on some 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// The inode at `path` (following symlinks).
fn inode_of_path(path: &Path) -> io::Result<InodeKey> {
    let meta = std::fs::metadata(path)?;
    Ok((meta.dev(), meta.ino()))
}

impl Fake {
    /// A fake Lustre holding every path under `roots` (compared component-wise after
    /// resolving symlinks; a root that does not exist compares as given), with `osts` OSTs.
    pub fn new(roots: Vec<PathBuf>, osts: u32) -> Fake {
        Fake {
            roots,
            osts,
            recorded: Mutex::new(Recorded::default()),
            counters: Counters::default(),
        }
    }

    /// The state, even if a test thread panicked while holding the lock.
    fn recorded(&self) -> MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `path` lies under one of the roots. Roots are resolved at each call, so a root
    /// created after [`Fake::new`] is found under its canonical name too.
    fn holds(&self, path: &Path) -> bool {
        let path = resolve(path);
        self.roots
            .iter()
            .any(|root| path.starts_with(resolve(root)))
    }

    /// Sets the default layout of directory `dir`, which [`Lustre::layout_of`] then returns for
    /// it (keyed by the directory's inode).
    pub fn set_default(&self, dir: &Path, layout: Layout) -> io::Result<()> {
        let key = inode_of_path(dir)
            .map_err(|e| op_error(format!("fake: set default layout of {}", dir.display()), e))?;
        self.recorded().layouts.insert(key, layout);
        Ok(())
    }

    /// Every [`Lustre::create_striped`] call so far, in call order.
    pub fn creates(&self) -> Vec<FakeCreate> {
        self.recorded().creates.clone()
    }

    /// How many times each [`Lustre`] method was called so far.
    pub fn calls(&self) -> CallCounts {
        self.counters.snapshot()
    }

    /// The layout [`Lustre::create_striped`] recorded for the file at `path` (or the default
    /// set on a directory), if any. Follows the inode, so renames keep it.
    pub fn layout_recorded(&self, path: &Path) -> Option<Layout> {
        let key = inode_of_path(path).ok()?;
        self.recorded().layouts.get(&key).cloned()
    }
}

impl Lustre for Fake {
    /// True for paths under a root; never fails.
    fn is_lustre(&self, path: &Path) -> io::Result<bool> {
        Counters::bump(&self.counters.is_lustre);
        Ok(self.holds(path))
    }

    /// The configured OST count under a root; `ENOTTY` elsewhere, as off real Lustre.
    fn ost_count(&self, path: &Path) -> io::Result<u32> {
        Counters::bump(&self.counters.ost_count);
        if self.holds(path) {
            Ok(self.osts)
        } else {
            Err(op_error(
                format!(
                    "fake: count OSTs of {} (not under a fake Lustre root)",
                    path.display()
                ),
                io::Error::from_raw_os_error(libc::ENOTTY),
            ))
        }
    }

    /// The layout recorded for this inode (a file made by `create_striped`, a directory given
    /// to `set_default`), else `None`.
    fn layout_of(&self, fd: BorrowedFd<'_>) -> io::Result<Option<Layout>> {
        Counters::bump(&self.counters.layout_of);
        let key = inode_of_fd(fd)?;
        Ok(self.recorded().layouts.get(&key).cloned())
    }

    /// Records the call, then creates or truncates the file with a plain `openat` (with
    /// `flags` added). A file that already existed with a recorded layout keeps it
    /// ([`SetOutcome::AlreadyHadLayout`]); otherwise `Layout::request(stripe_count,
    /// stripe_size)` is recorded ([`SetOutcome::Applied`]). A directory of `AT_FDCWD` stands
    /// for the current directory.
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
        let shown = name.to_string_lossy();
        let dir_path = if dir.as_raw_fd() == libc::AT_FDCWD {
            std::env::current_dir()
        } else {
            std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))
        }
        .map_err(|e| op_error(format!("fake: create {shown}: resolve its directory"), e))?;
        self.recorded().creates.push(FakeCreate {
            path: dir_path.join(OsStr::from_bytes(name.to_bytes())),
            stripe_count,
            stripe_size,
            mode,
        });

        // O_EXCL first tells a new file from an existing one without a racy stat.
        let flags = OFlags::CREATE
            | OFlags::WRONLY
            | OFlags::CLOEXEC
            | OFlags::from_bits_retain(flags as u32);
        let mode = Mode::from_raw_mode(mode);
        let create_error = |e| op_error(format!("fake: create {shown}"), e);
        let (fd, existed) = match openat(dir, name, flags | OFlags::EXCL, mode) {
            Ok(fd) => (fd, false),
            Err(Errno::EXIST) if !flags.contains(OFlags::EXCL) => (
                openat(dir, name, flags | OFlags::TRUNC, mode).map_err(create_error)?,
                true,
            ),
            Err(e) => return Err(create_error(e)),
        };
        let key = inode_of_fd(fd.as_fd())?;
        let mut recorded = self.recorded();
        let outcome = if existed && recorded.layouts.contains_key(&key) {
            SetOutcome::AlreadyHadLayout
        } else {
            recorded
                .layouts
                .insert(key, Layout::request(stripe_count, stripe_size));
            SetOutcome::Applied
        };
        Ok(Created { fd, outcome })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::System;
    use std::fs::File;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn types_are_send_and_sync() {
        assert_send_sync::<Fake>();
        assert_send_sync::<Counting<System>>();
        assert_send_sync::<Counting<Arc<Fake>>>();
        assert_send_sync::<System>();
        assert_send_sync::<Created>();
    }

    #[test]
    fn create_striped_records_the_call_and_creates_a_real_file() {
        let root = tempfile::tempdir().unwrap();
        let fake = Fake::new(vec![root.path().to_path_buf()], 8);
        let dir = File::open(root.path()).unwrap();
        let created = fake
            .create_striped(dir.as_fd(), c"big.dat", 0o640, 3, 4 << 20)
            .unwrap();
        assert_eq!(created.outcome, SetOutcome::Applied);
        let mut file = File::from(created.fd);
        file.write_all(b"data").unwrap();
        let path = root.path().join("big.dat");
        assert_eq!(std::fs::read(&path).unwrap(), b"data");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o640, 0, "created with at most the requested bits");
        assert_eq!(
            fake.creates(),
            vec![FakeCreate {
                path: root.path().canonicalize().unwrap().join("big.dat"),
                stripe_count: 3,
                stripe_size: 4 << 20,
                mode: 0o640,
            }]
        );
        let expected = Layout::request(3, 4 << 20);
        assert_eq!(
            fake.layout_of(file.as_fd()).unwrap(),
            Some(expected.clone())
        );
        assert_eq!(fake.layout_recorded(&path), Some(expected.clone()));
        let renamed = root.path().join("renamed.dat");
        std::fs::rename(&path, &renamed).unwrap();
        assert_eq!(fake.layout_recorded(&renamed), Some(expected));
        assert_eq!(fake.layout_recorded(&path), None);
    }

    #[test]
    fn recreating_keeps_the_first_layout() {
        let root = tempfile::tempdir().unwrap();
        let fake = Fake::new(vec![root.path().to_path_buf()], 8);
        let dir = File::open(root.path()).unwrap();
        let first = fake
            .create_striped(dir.as_fd(), c"f", 0o600, 2, 1 << 20)
            .unwrap();
        File::from(first.fd).write_all(b"old").unwrap();
        let again = fake
            .create_striped(dir.as_fd(), c"f", 0o600, 4, 2 << 20)
            .unwrap();
        assert_eq!(again.outcome, SetOutcome::AlreadyHadLayout);
        let path = root.path().join("f");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "truncated");
        assert_eq!(
            fake.layout_recorded(&path),
            Some(Layout::request(2, 1 << 20))
        );
        assert_eq!(fake.creates().len(), 2);
        assert_eq!(fake.creates()[1].stripe_count, 4);
        // After an unlink the name is a new file again.
        std::fs::remove_file(&path).unwrap();
        let fresh = fake
            .create_striped(dir.as_fd(), c"f", 0o600, 4, 2 << 20)
            .unwrap();
        assert_eq!(fresh.outcome, SetOutcome::Applied);
        assert_eq!(
            fake.layout_recorded(&path),
            Some(Layout::request(4, 2 << 20))
        );
    }

    #[test]
    fn an_existing_file_without_a_recorded_layout_gets_one() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("plain"), b"x").unwrap();
        let fake = Fake::new(vec![root.path().to_path_buf()], 8);
        let dir = File::open(root.path()).unwrap();
        let c = fake
            .create_striped(dir.as_fd(), c"plain", 0o600, 1, 1 << 20)
            .unwrap();
        assert_eq!(c.outcome, SetOutcome::Applied);
    }

    #[test]
    fn set_default_is_returned_for_the_directory() {
        let root = tempfile::tempdir().unwrap();
        let sub = root.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let fake = Fake::new(vec![root.path().to_path_buf()], 8);
        let d = File::open(&sub).unwrap();
        assert_eq!(fake.layout_of(d.as_fd()).unwrap(), None);
        let default = Layout::request(4, 1 << 20);
        fake.set_default(&sub, default.clone()).unwrap();
        assert_eq!(fake.layout_of(d.as_fd()).unwrap(), Some(default.clone()));
        assert_eq!(fake.layout_recorded(&sub), Some(default));
        let top = File::open(root.path()).unwrap();
        assert_eq!(fake.layout_of(top.as_fd()).unwrap(), None);
        assert!(fake
            .set_default(&root.path().join("missing"), Layout::request(1, 0))
            .is_err());
    }

    #[test]
    fn is_lustre_and_ost_count_follow_the_roots() {
        let root = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("a")).unwrap();
        // A root spelled with `..` still matches canonical paths below it.
        let spelled = root.path().join("a").join("..");
        let fake = Fake::new(vec![spelled, PathBuf::from("/no/such/root")], 6);
        assert!(fake.is_lustre(root.path()).unwrap());
        assert!(fake.is_lustre(&root.path().join("a")).unwrap());
        assert!(fake.is_lustre(&root.path().join("not-yet")).unwrap());
        assert!(fake.is_lustre(Path::new("/no/such/root/x")).unwrap());
        assert!(!fake.is_lustre(other.path()).unwrap());
        assert!(
            !fake.is_lustre(Path::new("/no/such/rootless")).unwrap(),
            "component-wise"
        );
        assert_eq!(fake.ost_count(&root.path().join("a")).unwrap(), 6);
        let err = fake.ost_count(other.path()).unwrap_err();
        assert_eq!(crate::api::os_errno(&err), Some(libc::ENOTTY), "{err}");
        assert_eq!(
            fake.calls(),
            CallCounts {
                is_lustre: 6,
                ost_count: 2,
                layout_of: 0,
                create_striped: 0
            }
        );
        // Through a reference, counted by both the wrapper and the fake.
        let by_ref = Counting::new(&fake);
        assert!(by_ref.is_lustre(root.path()).unwrap());
        assert_eq!(by_ref.calls().is_lustre, 1);
        assert_eq!(fake.calls().is_lustre, 7);
    }

    #[test]
    fn fake_counts_every_method_and_works_as_a_trait_object() {
        let root = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake::new(vec![root.path().to_path_buf()], 2));
        let lustre: Arc<dyn Lustre> = fake.clone();
        let dir = File::open(root.path()).unwrap();
        lustre.is_lustre(root.path()).unwrap();
        lustre.ost_count(root.path()).unwrap();
        lustre.layout_of(dir.as_fd()).unwrap();
        lustre
            .create_striped(dir.as_fd(), c"x", 0o600, 1, 1 << 20)
            .unwrap();
        assert_eq!(
            fake.calls(),
            CallCounts {
                is_lustre: 1,
                ost_count: 1,
                layout_of: 1,
                create_striped: 1
            }
        );
        let counted = Counting::new(fake.clone());
        counted.is_lustre(root.path()).unwrap();
        assert_eq!(counted.calls().is_lustre, 1);
        assert_eq!(fake.calls().is_lustre, 2);
    }

    #[test]
    fn create_failure_is_an_error_but_still_recorded() {
        let root = tempfile::tempdir().unwrap();
        let fake = Fake::new(vec![root.path().to_path_buf()], 2);
        let dir = File::open(root.path()).unwrap();
        let err = fake
            .create_striped(dir.as_fd(), c"missing/x", 0o600, 1, 1 << 20)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(fake.creates().len(), 1);
    }
}
