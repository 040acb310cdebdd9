//! Project IDs (the quota project of XFS, ext4 with the `project` feature, Lustre, f2fs) and
//! the `PROJINHERIT` flag of directories: read with `FS_IOC_FSGETXATTR`, set with
//! `FS_IOC_FSSETXATTR` on an open descriptor of the entry itself.
//!
//! Only regular files and directories are asked: the ioctl on a device node's descriptor would
//! go to the device's driver, and a symlink can't be opened without following it. Callers open
//! entries beneath their roots with `O_NOFOLLOW` and check the type on the descriptor
//! ([`open_entry`]).
//!
//! Neither libc nor rustix defines the ioctl numbers or `struct fsxattr`: both are written out
//! here from `include/uapi/linux/fs.h`.

use flist::at::At;
use flist::FileType;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::OFlags;
use rustix::io::Errno;
use std::sync::Mutex;

/// `struct fsxattr` of `linux/fs.h` (28 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FsXattr {
    /// `fsx_xflags`: `FS_XFLAG_*`.
    xflags: u32,
    /// `fsx_extsize`: extent size hint (bytes).
    extsize: u32,
    /// `fsx_nextents`: extents (read only).
    nextents: u32,
    /// `fsx_projid`: the project ID.
    projid: u32,
    /// `fsx_cowextsize`: copy-on-write extent size hint (bytes).
    cowextsize: u32,
    /// `fsx_pad[8]`.
    pad: [u8; 8],
}

/// `FS_IOC_FSGETXATTR`: `_IOR('X', 31, struct fsxattr)` (linux/fs.h).
const FS_IOC_FSGETXATTR: rustix::ioctl::Opcode = rustix::ioctl::opcode::read::<FsXattr>(b'X', 31);
/// `FS_IOC_FSSETXATTR`: `_IOW('X', 32, struct fsxattr)` (linux/fs.h).
const FS_IOC_FSSETXATTR: rustix::ioctl::Opcode = rustix::ioctl::opcode::write::<FsXattr>(b'X', 32);
/// `FS_XFLAG_PROJINHERIT` (linux/fs.h): new entries in the directory get its project ID.
const FS_XFLAG_PROJINHERIT: u32 = 0x0000_0200;

/// An entry's project ID, and for a directory whether new entries inherit it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProjectId {
    /// The project ID (0: none).
    pub id: u32,
    /// `FS_XFLAG_PROJINHERIT` (directories).
    pub inherit: bool,
}

impl ProjectId {
    /// Nothing to keep: project 0 (what a file system without project IDs gives), no
    /// inheritance.
    pub fn is_none(&self) -> bool {
        *self == ProjectId::default()
    }
}

/// The errors of a file system (or a file type) without `FS_IOC_FS[GS]ETXATTR`, or that
/// refuses a non-zero project ID (ext4 without the `project` feature: `EOPNOTSUPP`).
pub fn unsupported(e: Errno) -> bool {
    matches!(
        e,
        Errno::NOTTY | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL
    )
}

fn get_raw(fd: BorrowedFd<'_>) -> Result<FsXattr, Errno> {
    // SAFETY: FS_IOC_FSGETXATTR writes one `struct fsxattr`, which `FsXattr` is laid out as.
    unsafe {
        rustix::ioctl::ioctl(
            fd,
            rustix::ioctl::Getter::<{ FS_IOC_FSGETXATTR }, FsXattr>::new(),
        )
    }
}

/// The project ID of the open regular file or directory `fd`; `None` where the file system
/// has none ([`unsupported`]).
pub fn get(fd: BorrowedFd<'_>) -> Result<Option<ProjectId>, Errno> {
    match get_raw(fd) {
        Ok(x) => Ok(Some(ProjectId {
            id: x.projid,
            inherit: x.xflags & FS_XFLAG_PROJINHERIT != 0,
        })),
        Err(e) if unsupported(e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What [`set`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Set {
    /// The entry had it already: nothing written.
    Already,
    /// Changed.
    Changed,
    /// The file system keeps no project IDs (or not this one): left as it was.
    Unsupported,
}

/// Give the open entry `fd` the project ID `want` (the inheritance flag only on a directory,
/// `dir`), keeping its other flags; nothing is written when it has it already.
pub fn set(fd: BorrowedFd<'_>, want: ProjectId, dir: bool) -> Result<Set, Errno> {
    let mut x = match get_raw(fd) {
        Ok(x) => x,
        Err(e) if unsupported(e) => return Ok(Set::Unsupported),
        Err(e) => return Err(e),
    };
    let mut flags = x.xflags;
    if dir {
        flags &= !FS_XFLAG_PROJINHERIT;
        if want.inherit {
            flags |= FS_XFLAG_PROJINHERIT;
        }
    }
    if x.projid == want.id && x.xflags == flags {
        return Ok(Set::Already);
    }
    (x.projid, x.xflags) = (want.id, flags);
    // SAFETY: FS_IOC_FSSETXATTR reads one `struct fsxattr`.
    let r = unsafe {
        rustix::ioctl::ioctl(
            fd,
            rustix::ioctl::Setter::<{ FS_IOC_FSSETXATTR }, FsXattr>::new(x),
        )
    };
    match r {
        Ok(()) => Ok(Set::Changed),
        Err(e) if unsupported(e) => Ok(Set::Unsupported),
        Err(e) => Err(e),
    }
}

/// Open the entry `at` names (never following a symlink there, never blocking on a fifo) for
/// the ioctls, when it is a regular file or a directory: `Ok(None)` for any other type.
pub fn open_entry(at: &At<'_>) -> Result<Option<OwnedFd>, Errno> {
    let fd = match at.open(OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK, 0) {
        Ok(fd) => fd,
        // A symlink (O_NOFOLLOW) or a socket: neither has a project ID to keep here.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENXIO)) => return Ok(None),
        Err(e) => return Err(Errno::from_io_error(&e).unwrap_or(Errno::IO)),
    };
    let st = rustix::fs::fstat(&fd)?;
    Ok(matches!(
        FileType::from_mode(st.st_mode),
        FileType::File | FileType::Dir
    )
    .then_some(fd))
}

/// The project ID of the entry `at` names (`None` for other types than files and directories,
/// or where the file system has none).
pub fn get_at(at: &At<'_>) -> Result<Option<ProjectId>, Errno> {
    match open_entry(at)? {
        Some(fd) => get(fd.as_fd()),
        None => Ok(None),
    }
}

/// Whether the file system of the directory or file `path` has project IDs to read (a
/// `FS_IOC_FSGETXATTR` answered, and not one of the [`NEVER_STORED`] types): where it has
/// none, nothing is read per entry.
pub fn readable_under(path: &[u8]) -> bool {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    match flist::walk::open_long(path, flags) {
        Ok(fd) => {
            // `f_type`'s integer type differs between architectures.
            #[allow(clippy::unnecessary_cast)]
            let stored =
                rustix::fs::fstatfs(&fd).map_or(true, |st| stores_project_ids(st.f_type as i64));
            stored && matches!(get(fd.as_fd()), Ok(Some(_)))
        }
        Err(_) => false,
    }
}

/// `statfs` types (`f_type`, linux/magic.h) whose file systems answer `FS_IOC_FSGETXATTR`
/// (for its flags) but keep no project ID: it reads 0 on every entry and cannot be set.
/// Asking each entry there was an open, an `fstat`, an ioctl and a close on both sides of a
/// sync (2.5 times the time of a sync of an unchanged tree of 10^6 files on tmpfs).
const NEVER_STORED: [i64; 2] = [
    0x0102_1994, // tmpfs (and /dev/shm): its fileattr has flags only
    0x8584_58f6, // ramfs
];

/// Whether a file system of `statfs` type `f_type` may keep project IDs.
fn stores_project_ids(f_type: i64) -> bool {
    !NEVER_STORED.contains(&f_type)
}

/// The first destination (a path) whose file system kept no project ID that a source had:
/// said once per run, not per file.
#[derive(Debug, Default)]
pub struct Unkept(Mutex<Option<Vec<u8>>>);

impl Unkept {
    /// Note that `dst` could not get the project ID `want` (nothing when `want` is none).
    pub fn note(&self, dst: &[u8], want: ProjectId) {
        if want.id == 0 {
            return;
        }
        let mut first = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(dst.to_vec());
        }
    }

    /// The first destination noted, if any (taken: a second call gives `None`).
    pub fn take(&self) -> Option<Vec<u8>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// The warning for a run whose destination `dst` kept no project IDs.
pub fn unkept_warning(dst: &[u8]) -> String {
    format!(
        "warning: {}: the destination file system keeps no project IDs: entries copied there \
         lost theirs (said once, for the first such entry)",
        flist::path::display(dst)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tmpfs answers `FS_IOC_FSGETXATTR` (for its flags) with project 0 on every entry: its
    /// trees are not read per entry; xfs and ext4 are.
    #[test]
    fn tmpfs_is_not_read_for_project_ids() {
        assert!(!stores_project_ids(0x0102_1994));
        assert!(stores_project_ids(0x5846_5342), "xfs");
        assert!(stores_project_ids(0xef53), "ext4");
        // /dev/shm is a tmpfs on Linux (and in containers).
        let st = rustix::fs::statfs("/dev/shm").expect("statfs /dev/shm");
        assert_eq!(
            st.f_type as i64, 0x0102_1994,
            "/dev/shm is not a tmpfs here"
        );
        assert!(!readable_under(b"/dev/shm"));
    }

    #[test]
    fn the_ioctl_numbers_are_those_of_linux_fs_h() {
        assert_eq!(std::mem::size_of::<FsXattr>(), 28);
        // _IOR('X', 31, struct fsxattr) and _IOW('X', 32, ...) on x86_64 and aarch64.
        assert_eq!(FS_IOC_FSGETXATTR as u64, 0x801c_581f);
        assert_eq!(FS_IOC_FSSETXATTR as u64, 0x401c_5820);
    }

    #[test]
    fn an_unsupporting_file_system_is_not_an_error() {
        // /proc answers ENOTTY.
        let fd = rustix::fs::open(
            "/proc/self/status",
            OFlags::RDONLY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        assert_eq!(get(fd.as_fd()), Ok(None));
        let want = ProjectId {
            id: 5,
            inherit: false,
        };
        assert_eq!(set(fd.as_fd(), want, false), Ok(Set::Unsupported));
        let u = Unkept::default();
        u.note(b"/a", ProjectId::default());
        assert_eq!(u.take(), None, "project 0 is nothing lost");
        u.note(b"/b", want);
        u.note(b"/c", want);
        assert_eq!(u.take(), Some(b"/b".to_vec()));
    }
}
