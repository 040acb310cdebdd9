//! Reads at known offsets of a compressed file, shared by the frame codecs.

use rustix::fd::BorrowedFd;
use rustix::io::Errno;
use std::io;

/// An error of damaged data, saying `what`.
pub(crate) fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Read exactly `buf.len()` bytes of `fd` at offset `at` (bytes), retrying short reads and
/// interrupted calls; the end of the file first is `UnexpectedEof`.
pub(crate) fn pread_exact(fd: BorrowedFd<'_>, buf: &mut [u8], mut at: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], at) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                done += n;
                at += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
