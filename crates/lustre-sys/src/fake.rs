//! A test double for [`Lustre`]: pretends that paths under some roots are on Lustre, creates
//! real (unstriped) files, and records what layouts were asked for. Public so that code
//! embedding mfu-rs can test its Lustre paths without Lustre; not for production use.
//!
//! Layouts are recorded per inode (`st_dev`, `st_ino`), so a renamed file keeps its layout. An
//! inode number the file system reuses for a file created behind the fake's back can show a
//! stale layout; tests that delete and recreate files should create them through the fake.
//!
//! A layout can also be stored on the file itself ([`Fake::store`]: the extended attribute
//! [`FAKE_LAYOUT_XATTR`], and [`FAKE_MDT_XATTR`] for the MDT index), which any process's fake
//! reads when it recorded nothing for the inode: that is how a test gives files layouts for a
//! tool run as a separate program (under `mpirun`).
//!
//! Layout swap (`LL_IOC_DATA_VERSION`, `LL_IOC_LOV_SWAP_LAYOUTS`) is modelled when enabled
//! ([`Fake::with_swap`]); otherwise the fake answers `ENOTTY` as a Lustre without it would.
//! The data version is a hash of the inode's size, modification and change times, so a write
//! behind the fake's back changes it. A swap exchanges the two files' bytes (read whole into
//! memory: small test files only) and their layouts, each inode keeping its number, names and
//! open handles.

use std::collections::HashMap;
use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::fs::{
    fgetxattr, fstat, futimens, lgetxattr, lsetxattr, openat, Mode, OFlags, Timespec, Timestamps,
    XattrFlags,
};
use rustix::io::Errno;

use crate::api::{Created, Lustre, SetOutcome};
use crate::consts::{
    SWAP_LAYOUTS_CHECK_DV1, SWAP_LAYOUTS_CHECK_DV2, SWAP_LAYOUTS_KEEP_ATIME,
    SWAP_LAYOUTS_KEEP_MTIME,
};
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

/// Extended attribute a test stores a file's layout in ([`Fake::store`]), encoded as in
/// `lustre.lov`; read when the fake recorded no layout for the inode.
pub const FAKE_LAYOUT_XATTR: &str = "user.mfu-test.lustre.lov";
/// Extended attribute holding a file's MDT index as decimal text ([`Fake::store_mdt`]).
pub const FAKE_MDT_XATTR: &str = "user.mfu-test.lustre.mdt";

/// Something a test runs inside the next swap, before its checks (a write to the file).
type Hook = Box<dyn FnOnce() + Send>;

/// What the fake remembers between calls.
#[derive(Default)]
struct Recorded {
    layouts: HashMap<InodeKey, Layout>,
    mdts: HashMap<InodeKey, u32>,
    creates: Vec<FakeCreate>,
    swaps: u64,
    before_swap: Option<Hook>,
}

impl std::fmt::Debug for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("layouts", &self.layouts)
            .field("mdts", &self.mdts)
            .field("creates", &self.creates)
            .field("swaps", &self.swaps)
            .finish_non_exhaustive()
    }
}

/// A pretend Lustre: paths under its roots are "on Lustre" with `osts` OSTs. Files are created
/// for real on the underlying file system; their requested layouts are only recorded.
#[derive(Debug)]
pub struct Fake {
    roots: Vec<PathBuf>,
    osts: u32,
    swap: bool,
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

/// The fake's data version of `fd`: a hash of its inode number, size, modification and change
/// times (any write changes the times).
fn data_version_of(fd: BorrowedFd<'_>) -> io::Result<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let st = fstat(fd).map_err(|e| op_error("fake: get data version", e))?;
    let mut h = DefaultHasher::new();
    (
        st.st_ino as u64,
        st.st_size as i64,
        st.st_mtime as i64,
        st.st_mtime_nsec as i64,
        st.st_ctime as i64,
        st.st_ctime_nsec as i64,
    )
        .hash(&mut h);
    Ok(h.finish())
}

/// Every byte of the file behind `fd` (read from offset 0; the offset is left alone).
fn read_all(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = rustix::io::pread(fd, &mut buf[..], out.len() as u64)
            .map_err(|e| op_error("fake: swap layouts: read", e))?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Makes `bytes` the whole content of the file behind `fd`.
fn write_all(fd: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<()> {
    let write = |e| op_error("fake: swap layouts: write", e);
    rustix::fs::ftruncate(fd, bytes.len() as u64).map_err(write)?;
    let mut at = 0;
    while at < bytes.len() {
        at += rustix::io::pwrite(fd, &bytes[at..], at as u64).map_err(write)?;
    }
    Ok(())
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
            swap: false,
            recorded: Mutex::new(Recorded::default()),
            counters: Counters::default(),
        }
    }

    /// The same fake with layout swap modelled (`swap`) or refused with `ENOTTY` (the
    /// default: a Lustre whose clients lack `LL_IOC_LOV_SWAP_LAYOUTS`).
    pub fn with_swap(mut self, swap: bool) -> Fake {
        self.swap = swap;
        self
    }

    /// Stores `layout` on the file or directory at `path` itself ([`FAKE_LAYOUT_XATTR`], a
    /// symlink not followed), where every process's fake finds it.
    pub fn store(path: &Path, layout: &Layout) -> io::Result<()> {
        lsetxattr(
            path,
            FAKE_LAYOUT_XATTR,
            &layout.encode(),
            XattrFlags::empty(),
        )
        .map_err(|e| op_error(format!("fake: store a layout on {}", path.display()), e))
    }

    /// Stores the MDT index `mdt` on the file or directory at `path` ([`FAKE_MDT_XATTR`]).
    pub fn store_mdt(path: &Path, mdt: u32) -> io::Result<()> {
        lsetxattr(
            path,
            FAKE_MDT_XATTR,
            mdt.to_string().as_bytes(),
            XattrFlags::empty(),
        )
        .map_err(|e| op_error(format!("fake: store an MDT index on {}", path.display()), e))
    }

    /// Runs `hook` inside the next [`Lustre::swap_layouts`], before it checks the data
    /// versions: a test's write to the file "during the copy".
    pub fn before_next_swap(&self, hook: impl FnOnce() + Send + 'static) {
        self.recorded().before_swap = Some(Box::new(hook));
    }

    /// How many swaps succeeded so far.
    pub fn swaps(&self) -> u64 {
        self.recorded().swaps
    }

    /// The layout of inode `key`: recorded, else stored on the file (read by `stored`).
    fn effective(
        &self,
        key: InodeKey,
        stored: impl FnOnce(&mut [u8]) -> Result<usize, Errno>,
    ) -> io::Result<Option<Layout>> {
        if let Some(l) = self.recorded().layouts.get(&key) {
            return Ok(Some(l.clone()));
        }
        let mut buf = vec![0u8; 64 << 10];
        match stored(&mut buf) {
            Ok(n) => Layout::decode(&buf[..n]).map(Some).map_err(|e| {
                op_error(
                    "fake: decode a stored layout",
                    io::Error::new(io::ErrorKind::InvalidData, e),
                )
            }),
            Err(Errno::NODATA | Errno::OPNOTSUPP) => Ok(None),
            Err(e) => Err(op_error("fake: read a stored layout", e)),
        }
    }

    /// `ENOTTY` unless swap is modelled.
    fn swap_enabled(&self, op: &str) -> io::Result<()> {
        if self.swap {
            Ok(())
        } else {
            Err(op_error(
                format!("fake: {op} (layout swap not modelled)"),
                io::Error::from_raw_os_error(libc::ENOTTY),
            ))
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
    /// to `set_default`), else the one stored on it ([`Fake::store`]), else `None`.
    fn layout_of(&self, fd: BorrowedFd<'_>) -> io::Result<Option<Layout>> {
        Counters::bump(&self.counters.layout_of);
        let key = inode_of_fd(fd)?;
        self.effective(key, |buf| fgetxattr(fd, FAKE_LAYOUT_XATTR, buf))
    }

    /// As [`Lustre::layout_of`], by path; a symlink has none.
    fn layout_at(&self, path: &Path) -> io::Result<Option<Layout>> {
        Counters::bump(&self.counters.layout_of);
        let meta = std::fs::symlink_metadata(path)
            .map_err(|e| op_error(format!("fake: read layout of {}", path.display()), e))?;
        if meta.file_type().is_symlink() {
            return Ok(None);
        }
        self.effective((meta.dev(), meta.ino()), |buf| {
            lgetxattr(path, FAKE_LAYOUT_XATTR, buf)
        })
    }

    /// The index stored on the inode ([`Fake::store_mdt`]), else 0.
    fn mdt_index(&self, fd: BorrowedFd<'_>) -> io::Result<u32> {
        Counters::bump(&self.counters.other);
        let key = inode_of_fd(fd)?;
        if let Some(&mdt) = self.recorded().mdts.get(&key) {
            return Ok(mdt);
        }
        let mut buf = [0u8; 16];
        match fgetxattr(fd, FAKE_MDT_XATTR, &mut buf[..]) {
            Ok(n) => std::str::from_utf8(&buf[..n])
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| {
                    op_error(
                        "fake: read a stored MDT index",
                        io::Error::from(io::ErrorKind::InvalidData),
                    )
                }),
            Err(Errno::NODATA | Errno::OPNOTSUPP) => Ok(0),
            Err(e) => Err(op_error("fake: read a stored MDT index", e)),
        }
    }

    /// A hash of the inode's number, size, modification and change times (`ENOTTY` unless
    /// swap is modelled).
    fn data_version(&self, fd: BorrowedFd<'_>) -> io::Result<u64> {
        Counters::bump(&self.counters.other);
        self.swap_enabled("get data version")?;
        data_version_of(fd)
    }

    /// Exchanges the bytes and layouts of the two files (`ENOTTY` unless swap is modelled):
    /// runs the hook of [`Fake::before_next_swap`], refuses with `EAGAIN` when a checked data
    /// version changed and with `EBADF` when a file is not open for writing, and keeps each
    /// file's own times under `SWAP_LAYOUTS_KEEP_MTIME` / `_KEEP_ATIME`.
    fn swap_layouts(
        &self,
        fd1: BorrowedFd<'_>,
        fd2: BorrowedFd<'_>,
        dv1: u64,
        dv2: u64,
        flags: u64,
    ) -> io::Result<()> {
        Counters::bump(&self.counters.other);
        self.swap_enabled("swap layouts")?;
        const OP: &str = "fake: swap layouts";
        let hook = self.recorded().before_swap.take();
        if let Some(hook) = hook {
            hook();
        }
        for fd in [fd1, fd2] {
            let mode = rustix::fs::fcntl_getfl(fd).map_err(|e| op_error(OP, e))?;
            if mode & OFlags::RWMODE == OFlags::RDONLY {
                return Err(op_error(OP, io::Error::from_raw_os_error(libc::EBADF)));
            }
        }
        let changed = (flags & SWAP_LAYOUTS_CHECK_DV1 != 0 && data_version_of(fd1)? != dv1)
            || (flags & SWAP_LAYOUTS_CHECK_DV2 != 0 && data_version_of(fd2)? != dv2);
        if changed {
            return Err(op_error(OP, io::Error::from_raw_os_error(libc::EAGAIN)));
        }
        let (st1, st2) = (
            fstat(fd1).map_err(|e| op_error(OP, e))?,
            fstat(fd2).map_err(|e| op_error(OP, e))?,
        );
        let (bytes1, bytes2) = (read_all(fd1)?, read_all(fd2)?);
        write_all(fd1, &bytes2)?;
        write_all(fd2, &bytes1)?;
        let (key1, key2) = (inode_of_fd(fd1)?, inode_of_fd(fd2)?);
        let layout1 = self.effective(key1, |buf| fgetxattr(fd1, FAKE_LAYOUT_XATTR, buf))?;
        let layout2 = self.effective(key2, |buf| fgetxattr(fd2, FAKE_LAYOUT_XATTR, buf))?;
        {
            let mut recorded = self.recorded();
            for (key, layout) in [(key1, layout2), (key2, layout1)] {
                match layout {
                    Some(l) => recorded.layouts.insert(key, l),
                    None => recorded.layouts.remove(&key),
                };
            }
            recorded.swaps += 1;
        }
        let keep = |t: Timespec, flag: u64| {
            if flags & flag != 0 {
                t
            } else {
                Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_OMIT,
                }
            }
        };
        for (fd, st) in [(fd1, &st1), (fd2, &st2)] {
            let times = Timestamps {
                last_access: keep(
                    Timespec {
                        tv_sec: st.st_atime as _,
                        tv_nsec: st.st_atime_nsec as _,
                    },
                    SWAP_LAYOUTS_KEEP_ATIME,
                ),
                last_modification: keep(
                    Timespec {
                        tv_sec: st.st_mtime as _,
                        tv_nsec: st.st_mtime_nsec as _,
                    },
                    SWAP_LAYOUTS_KEEP_MTIME,
                ),
            };
            futimens(fd, &times).map_err(|e| op_error(OP, e))?;
        }
        Ok(())
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
                create_striped: 0,
                other: 0
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
                create_striped: 1,
                other: 0
            }
        );
        let counted = Counting::new(fake.clone());
        counted.is_lustre(root.path()).unwrap();
        assert_eq!(counted.calls().is_lustre, 1);
        assert_eq!(fake.calls().is_lustre, 2);
    }

    #[test]
    fn swap_exchanges_bytes_and_layouts_keeping_inodes_links_and_times() {
        use crate::consts::*;
        use std::os::unix::fs::MetadataExt;
        let root = tempfile::tempdir().unwrap();
        let fake = Fake::new(vec![root.path().to_path_buf()], 8).with_swap(true);
        let dir = File::open(root.path()).unwrap();
        let (orig, link, new) = (
            root.path().join("orig"),
            root.path().join("link"),
            root.path().join("new"),
        );
        File::from(
            fake.create_striped(dir.as_fd(), c"orig", 0o600, 1, 1 << 20)
                .unwrap()
                .fd,
        )
        .write_all(b"old data")
        .unwrap();
        std::fs::hard_link(&orig, &link).unwrap();
        File::from(
            fake.create_striped(dir.as_fd(), c"new", 0o600, 4, 2 << 20)
                .unwrap()
                .fd,
        )
        .write_all(b"old data")
        .unwrap();
        let past = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        File::options()
            .write(true)
            .open(&orig)
            .unwrap()
            .set_modified(past)
            .unwrap();
        let before = std::fs::metadata(&orig).unwrap();
        let rw = |p: &Path| File::options().read(true).write(true).open(p).unwrap();
        let (f1, f2) = (rw(&orig), rw(&new));
        let dv1 = fake.data_version(f1.as_fd()).unwrap();
        assert_eq!(fake.data_version(f1.as_fd()).unwrap(), dv1, "stable");
        let flags = SWAP_LAYOUTS_CHECK_DV1 | SWAP_LAYOUTS_KEEP_MTIME | SWAP_LAYOUTS_KEEP_ATIME;
        fake.swap_layouts(f1.as_fd(), f2.as_fd(), dv1, 0, flags)
            .unwrap();
        assert_eq!(fake.swaps(), 1);
        let after = std::fs::metadata(&link).unwrap();
        assert_eq!(
            (after.ino(), after.nlink()),
            (before.ino(), 2),
            "same inode, both names"
        );
        assert_eq!(after.mtime(), before.mtime(), "kept mtime");
        assert_eq!(
            fake.layout_recorded(&link),
            Some(Layout::request(4, 2 << 20))
        );
        assert_eq!(
            fake.layout_recorded(&new),
            Some(Layout::request(1, 1 << 20))
        );
        assert_eq!(std::fs::read(&link).unwrap(), b"old data");

        // A write during the copy: the checked version differs, nothing is swapped.
        let dv1 = fake.data_version(f1.as_fd()).unwrap();
        let during = orig.clone();
        fake.before_next_swap(move || {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&during)
                .unwrap()
                .write_all(b"!")
                .unwrap();
        });
        let err = fake
            .swap_layouts(f1.as_fd(), f2.as_fd(), dv1, 0, flags)
            .unwrap_err();
        assert_eq!(crate::api::os_errno(&err), Some(libc::EAGAIN), "{err}");
        assert_eq!(std::fs::read(&orig).unwrap(), b"old data!");
        assert_eq!(
            fake.layout_recorded(&orig),
            Some(Layout::request(4, 2 << 20))
        );
        assert_eq!(fake.swaps(), 1);
        // Unchecked, the swap goes through; a read-only descriptor is refused.
        let ro = File::open(&new).unwrap();
        let err = fake
            .swap_layouts(f1.as_fd(), ro.as_fd(), 0, 0, 0)
            .unwrap_err();
        assert_eq!(crate::api::os_errno(&err), Some(libc::EBADF), "{err}");
        fake.swap_layouts(f1.as_fd(), f2.as_fd(), 0, 0, 0).unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"old data!");
    }

    #[test]
    fn without_swap_the_calls_say_enotty() {
        let root = tempfile::tempdir().unwrap();
        let fake = Fake::new(vec![root.path().to_path_buf()], 8);
        let f = File::create(root.path().join("f")).unwrap();
        let err = fake.data_version(f.as_fd()).unwrap_err();
        assert_eq!(crate::api::os_errno(&err), Some(libc::ENOTTY), "{err}");
        let err = fake
            .swap_layouts(f.as_fd(), f.as_fd(), 0, 0, 0)
            .unwrap_err();
        assert_eq!(crate::api::os_errno(&err), Some(libc::ENOTTY), "{err}");
    }

    #[test]
    fn stored_layouts_and_mdts_are_read_by_any_fake() {
        let root = tempfile::tempdir().unwrap();
        let f = root.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let fake = Fake::new(vec![root.path().to_path_buf()], 8);
        assert_eq!(fake.layout_at(&f).unwrap(), None);
        let file = File::open(&f).unwrap();
        assert_eq!(fake.mdt_index(file.as_fd()).unwrap(), 0);
        let layout = Layout::request(3, 4 << 20);
        Fake::store(&f, &layout).unwrap();
        Fake::store_mdt(&f, 2).unwrap();
        Fake::store(root.path(), &Layout::request(2, 1 << 20)).unwrap();
        let other = Fake::new(vec![root.path().to_path_buf()], 8);
        assert_eq!(other.layout_at(&f).unwrap(), Some(layout.clone()));
        assert_eq!(other.layout_of(file.as_fd()).unwrap(), Some(layout));
        assert_eq!(other.mdt_index(file.as_fd()).unwrap(), 2);
        assert_eq!(
            other.layout_at(root.path()).unwrap(),
            Some(Layout::request(2, 1 << 20))
        );
        std::os::unix::fs::symlink(&f, root.path().join("l")).unwrap();
        assert_eq!(other.layout_at(&root.path().join("l")).unwrap(), None);
        // What the fake records wins over what is stored.
        let dir = File::open(root.path()).unwrap();
        other
            .create_striped(dir.as_fd(), c"f", 0o600, 5, 1 << 20)
            .unwrap();
        assert_eq!(
            other.layout_at(&f).unwrap(),
            Some(Layout::request(5, 1 << 20))
        );
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
