//! Files read while a write to them may still have been going on ("racily clean", as git
//! calls its index entries that are no older than the index).
//!
//! A tool compares a file's size, mtime and ctime before and after reading it, to name a file
//! that changed as it was read. That misses one case: the kernel stamps the times when a
//! `write` begins, not when it ends, so a write already under way when the file was listed
//! and still under way when it was read leaves the times as they were, and the copy holds
//! part of the old bytes and part of the new. Such a file has a ctime shortly before the read
//! ended. For those (rare: a file written in the last [`WINDOW`]), the tool waits until
//! [`SETTLE`] has passed since the ctime, checks the times again, and reads the file again to
//! compare with what it stored: a write still going on has moved on since (its bytes differ),
//! one that ended since left its last bytes (they differ from the torn read). Only a write
//! that stood still the whole time goes unseen.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How recent a file's ctime must be, when its read ends, for the file to be read again: as
/// long as one write call may take on a slow file system (a write of gigabytes to a parallel
/// file system takes seconds). Costs one more read of each file written that recently.
pub const WINDOW: Duration = Duration::from_secs(5);

/// How long after a file's ctime its second read waits (at most): a write stalled for a
/// moment moves on in that time. Short, since a freshly written tree copied at once (a
/// workflow's next step, a test) waits it once per worker.
pub const SETTLE: Duration = Duration::from_millis(50);

/// `ctime` (seconds, nanoseconds since the epoch) as a time.
fn time_of(ctime: (i64, u32)) -> SystemTime {
    let nanos = Duration::new(ctime.0.unsigned_abs(), ctime.1.min(999_999_999));
    if ctime.0 >= 0 {
        UNIX_EPOCH + nanos
    } else {
        UNIX_EPOCH - nanos
    }
}

/// Whether a file whose status changed at `ctime` may have been written while it was read, a
/// read that ended `now`: its ctime is less than [`WINDOW`] before `now`, or after it (a
/// clock ahead of this node's, as on a file server).
pub fn racy_at(ctime: (i64, u32), now: SystemTime) -> bool {
    now.duration_since(time_of(ctime))
        .map_or(true, |age| age < WINDOW)
}

/// [`racy_at`] now.
pub fn racy(ctime: (i64, u32)) -> bool {
    racy_at(ctime, SystemTime::now())
}

/// Wait until [`SETTLE`] has passed since `ctime` (at most [`SETTLE`]: a ctime in the
/// future waits that long).
pub fn settle(ctime: (i64, u32)) {
    let until = time_of(ctime) + SETTLE;
    if let Ok(left) = until.duration_since(SystemTime::now()) {
        std::thread::sleep(left.min(SETTLE));
    }
}

/// A descriptor for reading the file `fd` is open on (open for writing only, say), through
/// `/proc/self/fd`: the same inode whatever has become of its name. `O_NOATIME` is kept when
/// `fd` has it (`--noatime`): the second read leaves the access time alone as the first did.
pub fn reopen_for_reading(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use rustix::fs::OFlags;
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let noatime = rustix::fs::fcntl_getfl(fd)? & OFlags::NOATIME;
    let again = rustix::fs::open(
        path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | noatime,
        rustix::fs::Mode::empty(),
    )?;
    let (a, b) = (rustix::fs::fstat(fd)?, rustix::fs::fstat(&again)?);
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
        return Err(io::Error::other("reopened another file"));
    }
    Ok(again)
}

/// Read exactly `buf.len()` bytes of `fd` at `at`; fewer at the end of the file (returns how
/// many).
fn read_at(fd: BorrowedFd<'_>, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], at + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}

/// Bytes compared per read.
const STEP: usize = 1 << 20;

/// Whether `len` bytes of `a` from `a_at` equal `len` bytes of `b` from `b_at` (both read
/// now; a file that ends before its range ends differs, unless both end at the same place).
pub fn same_bytes(a: impl AsFd, a_at: u64, b: impl AsFd, b_at: u64, len: u64) -> io::Result<bool> {
    let (a, b) = (a.as_fd(), b.as_fd());
    let mut x = vec![0u8; STEP.min(len as usize)];
    let mut y = vec![0u8; x.len()];
    let mut off = 0u64;
    while off < len {
        let n = STEP.min((len - off) as usize);
        let got_a = read_at(a, &mut x[..n], a_at + off)?;
        let got_b = read_at(b, &mut y[..n], b_at + off)?;
        if got_a != got_b || x[..got_a] != y[..got_b] {
            return Ok(false);
        }
        if got_a < n {
            return Ok(true);
        }
        off += n as u64;
    }
    Ok(true)
}

/// Whether `data` equals `data.len()` bytes of `fd` from `at` (bytes past the file's end
/// count as zeros, as an archive stores a file that shrank).
pub fn same_as(fd: impl AsFd, at: u64, data: &[u8]) -> io::Result<bool> {
    let fd = fd.as_fd();
    let mut buf = vec![0u8; STEP.min(data.len())];
    for (i, want) in data.chunks(STEP).enumerate() {
        let got = read_at(fd, &mut buf[..want.len()], at + (i * STEP) as u64)?;
        buf[got..want.len()].fill(0);
        if buf[..want.len()] != *want {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_ctime_within_the_window_or_ahead_is_racy() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(racy_at((1_000_000, 0), now));
        assert!(racy_at((999_996, 0), now));
        assert!(racy_at((1_000_050, 0), now), "a ctime ahead of the clock");
        assert!(!racy_at((999_994, 0), now));
        assert!(!racy_at((-5, 0), now));
    }

    /// The second read of a racy file keeps the first's `O_NOATIME` (`--noatime`).
    #[test]
    fn a_reopened_file_keeps_o_noatime() {
        use rustix::fs::OFlags;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        for (flags, kept) in [(OFlags::NOATIME, true), (OFlags::empty(), false)] {
            let fd =
                rustix::fs::open(&p, OFlags::RDONLY | flags, rustix::fs::Mode::empty()).unwrap();
            let again = reopen_for_reading(fd.as_fd()).unwrap();
            let got = rustix::fs::fcntl_getfl(&again).unwrap();
            assert_eq!(got.contains(OFlags::NOATIME), kept);
        }
    }

    #[test]
    fn bytes_are_compared_across_steps_and_files_of_other_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3 * STEP + 17).map(|i| (i * 31 % 251) as u8).collect();
        let mut a = tempfile::tempfile_in(dir.path()).unwrap();
        a.write_all(&data).unwrap();
        let mut b = tempfile::tempfile_in(dir.path()).unwrap();
        b.write_all(&data).unwrap();
        let len = data.len() as u64;
        assert!(same_bytes(&a, 0, &b, 0, len).unwrap());
        assert!(
            same_bytes(&a, 5, &b, 5, len).unwrap(),
            "both end early alike"
        );
        assert!(same_as(&a, 0, &data).unwrap());
        let mut changed = data.clone();
        changed[2 * STEP + 3] ^= 1;
        let mut c = tempfile::tempfile_in(dir.path()).unwrap();
        c.write_all(&changed).unwrap();
        assert!(!same_bytes(&a, 0, &c, 0, len).unwrap());
        assert!(!same_as(&c, 0, &data).unwrap());
        let short = tempfile::tempfile_in(dir.path()).unwrap();
        assert!(!same_bytes(&a, 0, &short, 0, len).unwrap());
        assert!(
            same_as(&short, 0, &[0u8; 10]).unwrap(),
            "past the end reads as zeros"
        );
        let w = std::fs::File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("w"))
            .unwrap();
        let r = reopen_for_reading(w.as_fd()).unwrap();
        (&w).write_all(b"abc").unwrap();
        assert!(same_as(&r, 0, b"abc").unwrap());
    }
}
