//! Raw system calls and the errors they return.
//!
//! rustix has no typed wrapper for Lustre's ioctls, so they go through `libc::ioctl` in the two
//! small `unsafe` blocks below. Every error names the operation that failed and keeps the
//! `io::ErrorKind` of the underlying errno; [`os_errno`] recovers the errno itself.

use std::ffi::{c_long, c_void};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// A failed system call and the operation it was part of. The message includes the cause, so
/// the cause is not also reported as `source()` (error reporters would print it twice).
#[derive(Debug)]
struct OpError {
    op: String,
    cause: io::Error,
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.cause)
    }
}

impl std::error::Error for OpError {}

/// Wraps `cause` in an `io::Error` of the same kind whose message starts with `op`.
pub(crate) fn op_error(op: impl Into<String>, cause: impl Into<io::Error>) -> io::Error {
    let cause = cause.into();
    io::Error::new(
        cause.kind(),
        OpError {
            op: op.into(),
            cause,
        },
    )
}

/// The errno behind an error from this crate (or any `io::Error` carrying one directly).
pub fn os_errno(err: &io::Error) -> Option<i32> {
    err.raw_os_error().or_else(|| {
        err.get_ref()?
            .downcast_ref::<OpError>()
            .and_then(|op| os_errno(&op.cause))
    })
}

/// `ioctl(fd, request, ptr)`: the kernel reads and may write the memory behind `arg`.
pub(crate) fn ioctl_ptr(fd: BorrowedFd<'_>, request: u32, arg: &mut [u8]) -> io::Result<i32> {
    // SAFETY: `fd` is a live descriptor for the duration of the call and `arg` is a valid,
    // exclusively borrowed buffer; the Lustre ioctls passed here read and write within the
    // size their layout header announces, which callers size `arg` for (see each caller).
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            request as _,
            arg.as_mut_ptr().cast::<c_void>(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `ioctl(fd, request, value)`: the argument is a plain `long`, not a pointer.
pub(crate) fn ioctl_long(fd: BorrowedFd<'_>, request: u32, value: c_long) -> io::Result<i32> {
    // SAFETY: `fd` is a live descriptor for the duration of the call; the argument is passed by
    // value, so no memory is shared with the kernel.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, value) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_error_names_the_operation_and_keeps_kind_and_errno() {
        let err = op_error(
            "set stripe on x",
            io::Error::from_raw_os_error(libc::ENOTTY),
        );
        assert!(err.to_string().starts_with("set stripe on x: "), "{err}");
        assert_eq!(os_errno(&err), Some(libc::ENOTTY));
        let nested = op_error("outer", err);
        assert_eq!(os_errno(&nested), Some(libc::ENOTTY));
        let denied = op_error("open", io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(denied.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(os_errno(&io::Error::other("no errno")), None);
    }
}
