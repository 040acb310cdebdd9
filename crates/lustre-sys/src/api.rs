//! The Lustre calls mfu-rs makes, behind the [`Lustre`] trait so callers can substitute a test
//! double ([`crate::fake::Fake`]) or count calls ([`crate::fake::Counting`]).
//!
//! [`System`] makes the real calls: `statfs` for detection, `fgetxattr("lustre.lov")` to read a
//! layout, a delayed-create `openat` plus `LL_IOC_LOV_SETSTRIPE` to create a striped file.
//! On a file system that is not Lustre these fail cleanly (`ENOTTY`, `EOPNOTSUPP`), which the
//! tests check; the Lustre side itself is untested on a live Lustre system.

use std::ffi::{c_int, c_long, CStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{
    fgetxattr, fgetxattr_query, lgetxattr, lgetxattr_query, openat, statfs, Mode, OFlags, CWD,
};
use rustix::io::Errno;

use crate::consts::{
    IOC_DATA_VERSION_SIZE, LL_DV_RD_FLUSH, LL_IOC_DATA_VERSION, LL_IOC_GETOBDCOUNT,
    LL_IOC_GET_MDTIDX, LL_IOC_GROUP_LOCK, LL_IOC_GROUP_UNLOCK, LL_IOC_LOV_GETSTRIPE,
    LL_IOC_LOV_SETSTRIPE, LL_IOC_LOV_SWAP_LAYOUTS, LL_SUPER_MAGIC, LOV_USER_MAGIC_COMP_V1,
    LOV_USER_MAGIC_V3, LOV_USER_MD_V3_SIZE, LOV_USER_OST_DATA_SIZE, LUSTRE_SWAP_LAYOUTS_SIZE,
    O_LOV_DELAY_CREATE, XATTR_LUSTRE_LOV,
};
use crate::fields::{get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::layout::Layout;
use crate::sys::{ioctl_long, ioctl_ptr, op_error};

pub use crate::sys::os_errno;

/// What `LL_IOC_LOV_SETSTRIPE` did to a newly created file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOutcome {
    /// The requested layout is in place.
    Applied,
    /// The file already had a layout (`EEXIST` / `EALREADY`): it keeps it. Unlink first to
    /// restripe.
    AlreadyHadLayout,
    /// An administrator restricted setstripe (`EACCES`): the file gets the default layout.
    NotPermitted,
}

/// A file created by [`Lustre::create_striped`]: open for writing, and what became of its layout.
#[derive(Debug)]
pub struct Created {
    /// The file, open `O_WRONLY | O_CLOEXEC`, truncated.
    pub fd: OwnedFd,
    /// Whether the requested layout was applied.
    pub outcome: SetOutcome,
}

/// The Lustre operations mfu-rs needs. [`System`] makes the real calls; tests substitute
/// [`crate::fake::Fake`].
pub trait Lustre: Send + Sync + std::fmt::Debug {
    /// Whether `path` is on a Lustre file system (`statfs` type `LL_SUPER_MAGIC`).
    fn is_lustre(&self, path: &Path) -> io::Result<bool>;

    /// Number of OSTs of the file system holding `path` (a count; includes inactive OSTs).
    fn ost_count(&self, path: &Path) -> io::Result<u32>;

    /// Layout of an open file, or a directory's default layout; `None` when there is none.
    fn layout_of(&self, fd: BorrowedFd<'_>) -> io::Result<Option<Layout>>;

    /// Layout of the file at `path` (a symlink is not followed: it has none), or a
    /// directory's default layout; `None` when there is none or the file system has no Lustre
    /// layouts. Needs no read permission on the file. The default opens it (`O_RDONLY |
    /// O_NOFOLLOW | O_NONBLOCK`) and asks [`Lustre::layout_of`].
    fn layout_at(&self, path: &Path) -> io::Result<Option<Layout>> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        match openat(CWD, path, flags, Mode::empty()) {
            Ok(fd) => self.layout_of(fd.as_fd()),
            Err(Errno::LOOP) => Ok(None),
            Err(e) => Err(op_error(
                format!("open {} to read its layout", path.display()),
                e,
            )),
        }
    }

    /// Index of the MDT holding the inode of `fd` (`LL_IOC_GET_MDTIDX`). The default fails
    /// with `ENOTTY`, as off Lustre.
    fn mdt_index(&self, fd: BorrowedFd<'_>) -> io::Result<u32> {
        let _ = fd;
        Err(not_supported("get MDT index (LL_IOC_GET_MDTIDX)"))
    }

    /// The data version of the open file `fd` (`LL_IOC_DATA_VERSION` with `LL_DV_RD_FLUSH`):
    /// an opaque number that changes whenever the file's data does. The default fails with
    /// `ENOTTY`, as off Lustre.
    fn data_version(&self, fd: BorrowedFd<'_>) -> io::Result<u64> {
        let _ = fd;
        Err(not_supported("get data version (LL_IOC_DATA_VERSION)"))
    }

    /// Swaps the layouts, and so the data, of the open files `fd1` and `fd2`
    /// (`LL_IOC_LOV_SWAP_LAYOUTS`): each keeps its inode, names and open handles. `flags` are
    /// `SWAP_LAYOUTS_*`; with `SWAP_LAYOUTS_CHECK_DV1` (`_DV2`) the swap is refused with
    /// `EAGAIN` unless the data version of `fd1` (`fd2`) is still `dv1` (`dv2`). Both files
    /// must be open for writing. The default fails with `ENOTTY`, as off Lustre.
    fn swap_layouts(
        &self,
        fd1: BorrowedFd<'_>,
        fd2: BorrowedFd<'_>,
        dv1: u64,
        dv2: u64,
        flags: u64,
    ) -> io::Result<()> {
        let _ = (fd1, fd2, dv1, dv2, flags);
        Err(not_supported("swap layouts (LL_IOC_LOV_SWAP_LAYOUTS)"))
    }

    /// Creates (or truncates) `name` in `dir` with permission bits `mode`, striped over
    /// `stripe_count` OSTs (0 = default, 0xFFFF = all) in stripes of `stripe_size` bytes.
    fn create_striped(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        mode: u32,
        stripe_count: u16,
        stripe_size: u32,
    ) -> io::Result<Created> {
        self.create_striped_with(dir, name, 0, mode, stripe_count, stripe_size)
    }

    /// [`Lustre::create_striped`] with `flags` added to the open (`O_EXCL` to refuse an
    /// existing name, `O_NOFOLLOW` to refuse a symlink: what an extraction needs).
    fn create_striped_with(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        flags: i32,
        mode: u32,
        stripe_count: u16,
        stripe_size: u32,
    ) -> io::Result<Created>;
}

/// Forwards every call to the referenced implementation.
macro_rules! forward_lustre {
    ($($ty:ty),*) => {$(
        impl<L: Lustre + ?Sized> Lustre for $ty {
            fn is_lustre(&self, path: &Path) -> io::Result<bool> {
                (**self).is_lustre(path)
            }
            fn ost_count(&self, path: &Path) -> io::Result<u32> {
                (**self).ost_count(path)
            }
            fn layout_of(&self, fd: BorrowedFd<'_>) -> io::Result<Option<Layout>> {
                (**self).layout_of(fd)
            }
            fn layout_at(&self, path: &Path) -> io::Result<Option<Layout>> {
                (**self).layout_at(path)
            }
            fn mdt_index(&self, fd: BorrowedFd<'_>) -> io::Result<u32> {
                (**self).mdt_index(fd)
            }
            fn data_version(&self, fd: BorrowedFd<'_>) -> io::Result<u64> {
                (**self).data_version(fd)
            }
            fn swap_layouts(
                &self,
                fd1: BorrowedFd<'_>,
                fd2: BorrowedFd<'_>,
                dv1: u64,
                dv2: u64,
                flags: u64,
            ) -> io::Result<()> {
                (**self).swap_layouts(fd1, fd2, dv1, dv2, flags)
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
                (**self).create_striped_with(dir, name, flags, mode, stripe_count, stripe_size)
            }
        }
    )*};
}

forward_lustre!(&L, Box<L>, Arc<L>);

/// The real system calls. Untested on a live Lustre system.
#[derive(Debug, Default, Clone, Copy)]
pub struct System;

impl Lustre for System {
    fn is_lustre(&self, path: &Path) -> io::Result<bool> {
        is_lustre(path)
    }

    fn ost_count(&self, path: &Path) -> io::Result<u32> {
        ost_count(path)
    }

    fn layout_of(&self, fd: BorrowedFd<'_>) -> io::Result<Option<Layout>> {
        layout_of(fd)
    }

    fn layout_at(&self, path: &Path) -> io::Result<Option<Layout>> {
        layout_at(path)
    }

    fn mdt_index(&self, fd: BorrowedFd<'_>) -> io::Result<u32> {
        mdt_index(fd)
    }

    fn data_version(&self, fd: BorrowedFd<'_>) -> io::Result<u64> {
        data_version(fd)
    }

    fn swap_layouts(
        &self,
        fd1: BorrowedFd<'_>,
        fd2: BorrowedFd<'_>,
        dv1: u64,
        dv2: u64,
        flags: u64,
    ) -> io::Result<()> {
        swap_layouts(fd1, fd2, dv1, dv2, flags)
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
        create_striped_with(dir, name, flags, mode, stripe_count, stripe_size)
    }
}

/// Whether `f_type` from `statfs` is Lustre's (`f_type`'s type differs between targets).
fn is_lustre_magic(f_type: impl Into<i128>) -> bool {
    f_type.into() == i128::from(LL_SUPER_MAGIC)
}

/// Whether `path` is on a Lustre file system: `statfs(path).f_type == LL_SUPER_MAGIC`.
pub fn is_lustre(path: &Path) -> io::Result<bool> {
    let fs = statfs(path).map_err(|e| op_error(format!("statfs {}", path.display()), e))?;
    Ok(is_lustre_magic(fs.f_type))
}

/// Opens `path` for `LL_IOC_GETOBDCOUNT`, which Lustre handles on directories only: a
/// directory is opened itself, a file through its parent directory.
fn open_for_obd_count(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let open = |p: &Path| {
        openat(CWD, p, flags, Mode::empty())
            .map_err(|e| op_error(format!("open {} to count OSTs", p.display()), e))
    };
    match openat(CWD, path, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOTDIR) => match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => open(parent),
            _ => open(Path::new(".")),
        },
        Err(e) => Err(op_error(
            format!("open {} to count OSTs", path.display()),
            e,
        )),
    }
}

/// Number of OSTs of the Lustre file system holding `path`: `LL_IOC_GETOBDCOUNT` with the
/// `int` argument set to 0 (non-zero would ask for the MDT count). Fails with `ENOTTY` off
/// Lustre.
pub fn ost_count(path: &Path) -> io::Result<u32> {
    let dir = open_for_obd_count(path)?;
    let op = || format!("count OSTs (LL_IOC_GETOBDCOUNT) of {}", path.display());
    let mut count = [0u8; std::mem::size_of::<c_int>()];
    ioctl_ptr(dir.as_fd(), LL_IOC_GETOBDCOUNT, &mut count).map_err(|e| op_error(op(), e))?;
    let count = c_int::from_ne_bytes(count);
    u32::try_from(count).map_err(|_| {
        op_error(
            op(),
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("negative count {count}"),
            ),
        )
    })
}

/// Whether a `fgetxattr("lustre.lov")` errno means "no layout here" rather than a failure:
/// `ENODATA` (Lustre, no layout yet) or `EOPNOTSUPP` (not Lustre: no `lustre.` namespace).
fn xattr_absent(errno: Errno) -> bool {
    errno == Errno::NODATA || errno == Errno::OPNOTSUPP
}

/// First buffer size for `lustre.lov` (bytes): holds a plain layout of 168 stripes or a
/// typical PFL layout in one call.
const LAYOUT_XATTR_FIRST_TRY: usize = 4096;

/// The layout in `lustre.lov` as `read` (an `fgetxattr` or `lgetxattr`, with a zero-length
/// buffer asking for the size) returns it; `Ok(None)` when there is none.
fn layout_xattr(
    op: &str,
    read: impl Fn(&mut [u8]) -> Result<usize, Errno>,
) -> io::Result<Option<Layout>> {
    let mut len = LAYOUT_XATTR_FIRST_TRY;
    // The attribute can grow between the size query and the read (a layout change); retry a
    // few times rather than loop forever.
    for _ in 0..8 {
        let mut buf = vec![0u8; len];
        match read(&mut buf[..]) {
            Ok(n) => {
                buf.truncate(n);
                return Layout::decode(&buf)
                    .map(Some)
                    .map_err(|e| op_error(op, io::Error::new(io::ErrorKind::InvalidData, e)));
            }
            Err(Errno::RANGE) => match read(&mut []) {
                Ok(needed) => len = needed.max(len * 2),
                Err(e) if xattr_absent(e) => return Ok(None),
                Err(e) => return Err(op_error(op, e)),
            },
            Err(e) if xattr_absent(e) => return Ok(None),
            Err(e) => return Err(op_error(op, e)),
        }
    }
    Err(op_error(
        op,
        io::Error::other("the attribute kept growing while being read"),
    ))
}

/// The layout of an open file, or the default layout of an open directory, from the
/// `lustre.lov` extended attribute. `Ok(None)` when there is none (`ENODATA`) or the file
/// system has no `lustre.` attributes (`EOPNOTSUPP`).
pub fn layout_of(fd: BorrowedFd<'_>) -> io::Result<Option<Layout>> {
    layout_xattr("read layout (fgetxattr lustre.lov)", |buf| {
        if buf.is_empty() {
            fgetxattr_query(fd, XATTR_LUSTRE_LOV)
        } else {
            fgetxattr(fd, XATTR_LUSTRE_LOV, buf)
        }
    })
}

/// The layout of the file at `path` (a symlink's own: none), or a directory's default layout,
/// from `lgetxattr(path, "lustre.lov")`: no open, no read permission needed. `Ok(None)` as
/// for [`layout_of`].
pub fn layout_at(path: &Path) -> io::Result<Option<Layout>> {
    let op = format!("read layout of {} (lgetxattr lustre.lov)", path.display());
    layout_xattr(&op, |buf| {
        if buf.is_empty() {
            lgetxattr_query(path, XATTR_LUSTRE_LOV)
        } else {
            lgetxattr(path, XATTR_LUSTRE_LOV, buf)
        }
    })
}

/// An `ENOTTY` error naming `op`: what the Lustre ioctls give off Lustre.
fn not_supported(op: &str) -> io::Error {
    op_error(op, io::Error::from_raw_os_error(libc::ENOTTY))
}

/// Index of the MDT holding the inode of `fd` (`LL_IOC_GET_MDTIDX`). `ENOTTY` off Lustre.
pub fn mdt_index(fd: BorrowedFd<'_>) -> io::Result<u32> {
    const OP: &str = "get MDT index (LL_IOC_GET_MDTIDX)";
    let mut index = [0u8; std::mem::size_of::<c_int>()];
    ioctl_ptr(fd, LL_IOC_GET_MDTIDX, &mut index).map_err(|e| op_error(OP, e))?;
    let index = c_int::from_ne_bytes(index);
    u32::try_from(index).map_err(|_| {
        op_error(
            OP,
            io::Error::new(io::ErrorKind::InvalidData, format!("index {index}")),
        )
    })
}

/// The data version of the open file `fd`: `LL_IOC_DATA_VERSION` with `LL_DV_RD_FLUSH` (dirty
/// pages of every client are flushed first, as `lfs migrate` asks). `ENOTTY` off Lustre.
pub fn data_version(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut idv = [0u8; IOC_DATA_VERSION_SIZE];
    put_u32(&mut idv, 12, LL_DV_RD_FLUSH);
    ioctl_ptr(fd, LL_IOC_DATA_VERSION, &mut idv)
        .map_err(|e| op_error("get data version (LL_IOC_DATA_VERSION)", e))?;
    Ok(get_u64(&idv, 0))
}

/// The `struct lustre_swap_layouts` argument: flags, the second descriptor, no group lock
/// (gid 0), the two data versions.
fn swap_request(
    fd2: BorrowedFd<'_>,
    dv1: u64,
    dv2: u64,
    flags: u64,
) -> [u8; LUSTRE_SWAP_LAYOUTS_SIZE] {
    let mut req = [0u8; LUSTRE_SWAP_LAYOUTS_SIZE];
    put_u64(&mut req, 0, flags);
    put_u32(&mut req, 8, fd2.as_raw_fd() as u32);
    put_u64(&mut req, 16, dv1);
    put_u64(&mut req, 24, dv2);
    req
}

/// Swaps the layouts of `fd1` and `fd2` (`LL_IOC_LOV_SWAP_LAYOUTS` on `fd1`); see
/// [`Lustre::swap_layouts`]. `EAGAIN`: a checked data version changed. `ENOTTY` off Lustre.
pub fn swap_layouts(
    fd1: BorrowedFd<'_>,
    fd2: BorrowedFd<'_>,
    dv1: u64,
    dv2: u64,
    flags: u64,
) -> io::Result<()> {
    let mut req = swap_request(fd2, dv1, dv2, flags);
    ioctl_ptr(fd1, LL_IOC_LOV_SWAP_LAYOUTS, &mut req)
        .map(drop)
        .map_err(|e| op_error("swap layouts (LL_IOC_LOV_SWAP_LAYOUTS)", e))
}

/// How a failed `LL_IOC_LOV_SETSTRIPE` ends: `Some` for the errnos that still leave a usable
/// file, `None` for real failures.
fn setstripe_outcome(errno: Option<i32>) -> Option<SetOutcome> {
    match errno? {
        libc::EEXIST | libc::EALREADY => Some(SetOutcome::AlreadyHadLayout),
        libc::EACCES => Some(SetOutcome::NotPermitted),
        _ => None,
    }
}

/// Bytes of the `LL_IOC_LOV_SETSTRIPE` buffer. The kernel reads the request (32 bytes for v1)
/// and, on success, writes the resulting layout header back into the same buffer; the slack
/// guards against a kernel writing back more than the header.
const SETSTRIPE_BUFFER: usize = 4096;

/// Sets the layout of `fd`, which was opened with `O_LOV_DELAY_CREATE` and has no objects yet.
fn set_stripe(fd: BorrowedFd<'_>, stripe_count: u16, stripe_size: u32) -> io::Result<SetOutcome> {
    let mut lum = Layout::request(stripe_count, stripe_size).encode();
    lum.resize(lum.len().max(SETSTRIPE_BUFFER), 0);
    match ioctl_ptr(fd, LL_IOC_LOV_SETSTRIPE, &mut lum) {
        Ok(_) => Ok(SetOutcome::Applied),
        Err(e) => setstripe_outcome(e.raw_os_error()).ok_or(e),
    }
}

/// Creates (or truncates) `name` in `dir` with permission bits `mode` and the layout
/// `lfs setstripe -c stripe_count -S stripe_size` would give it (`stripe_count` 0 = default,
/// 0xFFFF = all; `stripe_size` in bytes).
///
/// Opens with `O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC | O_LOV_DELAY_CREATE`, then always
/// issues `LL_IOC_LOV_SETSTRIPE` (a delayed-create file must get its layout set or written to).
/// `EEXIST`/`EALREADY` give [`SetOutcome::AlreadyHadLayout`], `EACCES`
/// [`SetOutcome::NotPermitted`]; any other error is returned (the file stays created) with a
/// message naming "set stripe". Off Lustre that error is `ENOTTY`.
pub fn create_striped(
    dir: BorrowedFd<'_>,
    name: &CStr,
    mode: u32,
    stripe_count: u16,
    stripe_size: u32,
) -> io::Result<Created> {
    create_striped_with(dir, name, 0, mode, stripe_count, stripe_size)
}

/// [`create_striped`] with `extra` open flags (`O_EXCL`, `O_NOFOLLOW`...).
pub fn create_striped_with(
    dir: BorrowedFd<'_>,
    name: &CStr,
    extra: i32,
    mode: u32,
    stripe_count: u16,
    stripe_size: u32,
) -> io::Result<Created> {
    let flags = OFlags::CREATE
        | OFlags::WRONLY
        | OFlags::TRUNC
        | OFlags::CLOEXEC
        | OFlags::from_bits_retain(O_LOV_DELAY_CREATE as u32)
        | OFlags::from_bits_retain(extra as u32);
    let shown = name.to_string_lossy();
    let fd = openat(dir, name, flags, Mode::from_raw_mode(mode))
        .map_err(|e| op_error(format!("create {shown} (delayed layout)"), e))?;
    let outcome = set_stripe(fd.as_fd(), stripe_count, stripe_size).map_err(|e| {
        op_error(
            format!(
                "set stripe (LL_IOC_LOV_SETSTRIPE, count {stripe_count}, size {stripe_size} bytes) on {shown}"
            ),
            e,
        )
    })?;
    Ok(Created { fd, outcome })
}

/// Takes a Lustre group lock with group id `gid` on `fd` (`LL_IOC_GROUP_LOCK`): all holders of
/// the same gid share the extent locks instead of bouncing them. Untested on Lustre.
pub fn group_lock(fd: BorrowedFd<'_>, gid: i64) -> io::Result<()> {
    ioctl_long(fd, LL_IOC_GROUP_LOCK, gid as c_long)
        .map(drop)
        .map_err(|e| op_error(format!("take group lock {gid} (LL_IOC_GROUP_LOCK)"), e))
}

/// Releases the group lock `gid` on `fd` (`LL_IOC_GROUP_UNLOCK`). Untested on Lustre.
pub fn group_unlock(fd: BorrowedFd<'_>, gid: i64) -> io::Result<()> {
    ioctl_long(fd, LL_IOC_GROUP_UNLOCK, gid as c_long)
        .map(drop)
        .map_err(|e| op_error(format!("release group lock {gid} (LL_IOC_GROUP_UNLOCK)"), e))
}

/// Slack after the announced capacity of a `LL_IOC_LOV_GETSTRIPE` buffer (bytes): a composite
/// layout may be written back whole, whatever capacity the v3 header announced, and 64 KiB is
/// the largest ordinary extended attribute.
const GETSTRIPE_SLACK: usize = 64 << 10;

/// The layout of an open file via `LL_IOC_LOV_GETSTRIPE`, with room for `max_stripes` stripes:
/// the buffer is pre-filled with magic V3 and stripe count = capacity, as the ioctl expects.
/// Fails (`EOVERFLOW`) when the file has more stripes. Prefer [`layout_of`]; this is the older
/// interface, untested on Lustre.
pub fn getstripe_ioctl(fd: BorrowedFd<'_>, max_stripes: u16) -> io::Result<Layout> {
    const OP: &str = "get stripe (LL_IOC_LOV_GETSTRIPE)";
    let announced = LOV_USER_MD_V3_SIZE + LOV_USER_OST_DATA_SIZE * usize::from(max_stripes);
    let mut buf = vec![0u8; announced + GETSTRIPE_SLACK];
    put_u32(&mut buf, 0, LOV_USER_MAGIC_V3);
    put_u16(&mut buf, 28, max_stripes);
    ioctl_ptr(fd, LL_IOC_LOV_GETSTRIPE, &mut buf).map_err(|e| op_error(OP, e))?;
    // Plain answers stop at their stripe count; only the announced capacity can hold stripes.
    let answer = if get_u32(&buf, 0) == LOV_USER_MAGIC_COMP_V1 {
        &buf[..]
    } else {
        &buf[..announced]
    };
    Layout::decode_buffer(answer)
        .map_err(|e| op_error(OP, io::Error::new(io::ErrorKind::InvalidData, e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    fn errno(err: &io::Error) -> Option<i32> {
        os_errno(err)
    }

    #[test]
    fn lustre_magic_is_recognised_whatever_the_field_width() {
        assert!(is_lustre_magic(0x0BD0_0BD0i64));
        assert!(is_lustre_magic(0x0BD0_0BD0u32));
        assert!(is_lustre_magic(0x0BD0_0BD0i32));
        assert!(!is_lustre_magic(0xEF53i64), "ext4");
        assert!(!is_lustre_magic(0x0102_1994i64), "tmpfs");
    }

    #[test]
    fn setstripe_errnos_map_to_outcomes() {
        assert_eq!(
            setstripe_outcome(Some(libc::EEXIST)),
            Some(SetOutcome::AlreadyHadLayout)
        );
        assert_eq!(
            setstripe_outcome(Some(libc::EALREADY)),
            Some(SetOutcome::AlreadyHadLayout)
        );
        assert_eq!(
            setstripe_outcome(Some(libc::EACCES)),
            Some(SetOutcome::NotPermitted)
        );
        assert_eq!(setstripe_outcome(Some(libc::ENOTTY)), None);
        assert_eq!(setstripe_outcome(Some(libc::EINVAL)), None);
        assert_eq!(setstripe_outcome(None), None);
    }

    #[test]
    fn missing_layout_errnos() {
        assert!(xattr_absent(Errno::NODATA));
        assert!(xattr_absent(Errno::OPNOTSUPP));
        assert!(!xattr_absent(Errno::ACCESS));
        assert!(!xattr_absent(Errno::RANGE));
    }

    #[test]
    fn is_lustre_is_false_here() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_lustre(dir.path()).unwrap());
        assert!(!System.is_lustre(dir.path()).unwrap());
    }

    #[test]
    fn is_lustre_on_a_missing_path_names_statfs() {
        let dir = tempfile::tempdir().unwrap();
        let err = is_lustre(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("statfs"), "{err}");
    }

    #[test]
    fn ost_count_off_lustre_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = ost_count(dir.path()).unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        assert!(err.to_string().contains("LL_IOC_GETOBDCOUNT"), "{err}");
        // A file is asked through its directory: same answer, no ENOTDIR.
        let file = dir.path().join("f");
        File::create(&file).unwrap();
        let err = System.ost_count(&file).unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        let err = ost_count(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn layout_of_off_lustre_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        assert_eq!(layout_of(file.as_fd()).unwrap(), None);
        let d = File::open(dir.path()).unwrap();
        assert_eq!(System.layout_of(d.as_fd()).unwrap(), None);
    }

    #[test]
    fn create_striped_off_lustre_fails_naming_set_stripe_and_leaves_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = File::open(dir.path()).unwrap();
        let err = create_striped(d.as_fd(), c"data.bin", 0o640, 4, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("set stripe"), "{err}");
        assert!(err.to_string().contains("data.bin"), "{err}");
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        assert!(dir.path().join("data.bin").is_file());
        // The trait method is the same call.
        let err = System
            .create_striped(d.as_fd(), c"data.bin", 0o640, 1, 1 << 20)
            .unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
    }

    #[test]
    fn create_striped_open_failure_names_create() {
        let dir = tempfile::tempdir().unwrap();
        let d = File::open(dir.path()).unwrap();
        let err = create_striped(d.as_fd(), c"no/such/dir", 0o600, 1, 1 << 20).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().starts_with("create "), "{err}");
    }

    #[test]
    fn group_lock_and_getstripe_off_lustre_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        let err = group_lock(file.as_fd(), 7).unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        assert!(err.to_string().contains("group lock 7"), "{err}");
        let err = group_unlock(file.as_fd(), 7).unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        let err = getstripe_ioctl(file.as_fd(), 16).unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        assert!(err.to_string().contains("LL_IOC_LOV_GETSTRIPE"), "{err}");
    }

    #[test]
    fn layout_at_and_the_swap_calls_off_lustre() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::create(&path).unwrap();
        assert_eq!(layout_at(&path).unwrap(), None);
        assert_eq!(System.layout_at(dir.path()).unwrap(), None);
        std::os::unix::fs::symlink(&path, dir.path().join("l")).unwrap();
        assert_eq!(System.layout_at(&dir.path().join("l")).unwrap(), None);
        let err = layout_at(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        let err = data_version(file.as_fd()).unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        assert!(err.to_string().contains("LL_IOC_DATA_VERSION"), "{err}");
        let other = File::create(dir.path().join("g")).unwrap();
        let err = swap_layouts(file.as_fd(), other.as_fd(), 1, 2, 3).unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        assert!(err.to_string().contains("LL_IOC_LOV_SWAP_LAYOUTS"), "{err}");
        let err = System.mdt_index(file.as_fd()).unwrap_err();
        assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
    }

    #[test]
    fn swap_request_bytes_follow_the_header() {
        let file = File::open("/").unwrap();
        let req = swap_request(file.as_fd(), 0x1122, 0x3344, 0b101);
        assert_eq!(get_u64(&req, 0), 0b101);
        assert_eq!(get_u32(&req, 8), file.as_raw_fd() as u32);
        assert_eq!(get_u32(&req, 12), 0, "no group lock");
        assert_eq!(get_u64(&req, 16), 0x1122);
        assert_eq!(get_u64(&req, 24), 0x3344);
    }

    #[test]
    fn the_trait_defaults_say_not_supported() {
        #[derive(Debug)]
        struct Minimal;
        impl Lustre for Minimal {
            fn is_lustre(&self, _: &Path) -> io::Result<bool> {
                Ok(true)
            }
            fn ost_count(&self, _: &Path) -> io::Result<u32> {
                Ok(1)
            }
            fn layout_of(&self, _: BorrowedFd<'_>) -> io::Result<Option<Layout>> {
                Ok(Some(Layout::request(3, 1 << 20)))
            }
            fn create_striped_with(
                &self,
                _: BorrowedFd<'_>,
                _: &CStr,
                _: i32,
                _: u32,
                _: u16,
                _: u32,
            ) -> io::Result<Created> {
                Err(io::Error::other("no"))
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        // layout_at opens the file and asks layout_of; a symlink has none.
        assert_eq!(
            Minimal.layout_at(&dir.path().join("f")).unwrap(),
            Some(Layout::request(3, 1 << 20))
        );
        std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
        assert_eq!(Minimal.layout_at(&dir.path().join("l")).unwrap(), None);
        for err in [
            Minimal.data_version(file.as_fd()).unwrap_err(),
            Minimal.mdt_index(file.as_fd()).map(u64::from).unwrap_err(),
            Minimal
                .swap_layouts(file.as_fd(), file.as_fd(), 0, 0, 0)
                .map(|()| 0)
                .unwrap_err(),
        ] {
            assert_eq!(errno(&err), Some(libc::ENOTTY), "{err}");
        }
    }

    #[test]
    fn the_trait_works_through_boxes_and_arcs() {
        let dir = tempfile::tempdir().unwrap();
        let boxed: Box<dyn Lustre> = Box::new(System);
        let shared: Arc<dyn Lustre> = Arc::new(System);
        assert!(!boxed.is_lustre(dir.path()).unwrap());
        assert!(!shared.is_lustre(dir.path()).unwrap());
    }
}
