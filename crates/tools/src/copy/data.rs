//! Moving the bytes of one chunk: `copy_file_range` where the kernel can, `pread`/`pwrite`
//! otherwise; holes skipped with `SEEK_DATA`/`SEEK_HOLE` when sparse copies are asked for;
//! compare-then-rewrite for `sync --contents`.

use rustix::fd::BorrowedFd;
use rustix::fs::SeekFrom;
use rustix::io::Errno;
use std::io;

/// Alignment of `O_DIRECT` buffers, offsets and lengths (bytes).
pub const DIRECT_ALIGN: usize = 4096;

/// How chunk data moves.
#[derive(Clone, Copy, Debug)]
pub struct DataOptions {
    /// Bytes read or written per system call on the `pread`/`pwrite` path (the size of the
    /// [`Buffer`]s handed in, rounded up to [`DIRECT_ALIGN`]).
    pub bufsize: usize,
    /// Copy only the data regions of the source, leaving holes in the destination.
    pub sparse: bool,
    /// The source was opened with `O_DIRECT`: no `copy_file_range`, reads of whole blocks.
    pub direct: bool,
}

/// A reusable I/O buffer aligned for `O_DIRECT`, allocated on first use (chunks that
/// `copy_file_range` moves never need one).
pub struct Buffer {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl Buffer {
    /// A buffer of `len` bytes (rounded up to the direct-I/O alignment).
    pub fn new(len: usize) -> Buffer {
        Buffer {
            raw: Vec::new(),
            start: 0,
            len: len.max(DIRECT_ALIGN).next_multiple_of(DIRECT_ALIGN),
        }
    }

    fn get(&mut self) -> &mut [u8] {
        if self.raw.is_empty() {
            self.raw = vec![0u8; self.len + DIRECT_ALIGN];
            self.start = self.raw.as_ptr().align_offset(DIRECT_ALIGN);
        }
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// Why a chunk could not be copied: the operation and the system's reason.
#[derive(Debug)]
pub struct DataError {
    /// `read`, `write`, `seek data`...
    pub op: &'static str,
    /// The reason.
    pub source: io::Error,
}

fn fail(op: &'static str) -> impl FnOnce(Errno) -> DataError {
    move |e| DataError {
        op,
        source: e.into(),
    }
}

/// The source ended before the bytes the list promised: it changed since the walk.
fn shrank() -> DataError {
    DataError {
        op: "read (the source is shorter than when it was listed)",
        source: io::Error::from(io::ErrorKind::UnexpectedEof),
    }
}

/// Copy `len` bytes at `offset` from `src` to the same offset of `dst`; returns bytes written.
///
/// With `sparse`, only the data regions are copied (the destination must already have its
/// final size so that skipped ranges read as zeros). `cfr_ok` says whether `copy_file_range`
/// may be tried; it is cleared when the kernel refuses, so later chunks go straight to
/// `pread`/`pwrite`.
pub fn copy_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    opts: &DataOptions,
    buf: &mut Buffer,
    cfr_ok: &mut bool,
) -> Result<u64, DataError> {
    let end = offset + len;
    if !opts.sparse {
        return copy_at(src, offset, dst, offset, len, opts, buf, cfr_ok);
    }
    let mut pos = offset;
    let mut written = 0;
    while pos < end {
        let data = match rustix::fs::seek(src, SeekFrom::Data(pos)) {
            Ok(d) => d,
            // No data after `pos`: the rest is a hole.
            Err(Errno::NXIO) => break,
            Err(Errno::INVAL | Errno::NOTSUP) => pos, // no SEEK_DATA here: all data
            Err(e) => return Err(fail("seek data")(e)),
        };
        if data >= end {
            break;
        }
        let hole = match rustix::fs::seek(src, SeekFrom::Hole(data)) {
            Ok(h) => h.min(end),
            Err(_) => end,
        };
        written += copy_at(src, data, dst, data, hole - data, opts, buf, cfr_ok)?;
        pos = hole;
    }
    Ok(written)
}

/// Copy `len` bytes from `src` at `src_at` to `dst` at `dst_at` (the offsets may differ: tar
/// moves file data into and out of an archive); returns bytes written. `cfr_ok` as in
/// [`copy_range`].
#[allow(clippy::too_many_arguments)]
pub fn copy_at(
    src: BorrowedFd<'_>,
    src_at: u64,
    dst: BorrowedFd<'_>,
    dst_at: u64,
    len: u64,
    opts: &DataOptions,
    buf: &mut Buffer,
    cfr_ok: &mut bool,
) -> Result<u64, DataError> {
    // `done` counts bytes moved; source and destination advance together.
    let mut done = 0u64;
    if *cfr_ok && !opts.direct {
        while done < len {
            let (mut off_in, mut off_out) = (src_at + done, dst_at + done);
            let want = (len - done).min(1 << 30) as usize;
            match rustix::fs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want)
            {
                Ok(0) => return Err(shrank()),
                Ok(n) => done += n as u64,
                // The kernel can't do it for this pair of files: fall back for good.
                Err(Errno::XDEV | Errno::NOSYS | Errno::OPNOTSUPP | Errno::INVAL) if done == 0 => {
                    *cfr_ok = false;
                    break;
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(fail("copy_file_range")(e)),
            }
        }
        if *cfr_ok {
            return Ok(done);
        }
    }
    while done < len {
        let want = ((len - done) as usize).min(buf.len);
        // O_DIRECT reads ask for whole blocks (the file's end shortens the answer).
        let ask = if opts.direct {
            want.next_multiple_of(DIRECT_ALIGN).min(buf.len)
        } else {
            want
        };
        let b = buf.get();
        let n = match rustix::io::pread(src, &mut b[..ask], src_at + done) {
            Ok(0) => return Err(shrank()),
            Ok(n) => n.min(want),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(fail("read")(e)),
        };
        write_all_at(dst, &b[..n], dst_at + done)?;
        done += n as u64;
    }
    Ok(done)
}

/// Write all of `bytes` at offset `at` of `dst` (bytes).
pub fn write_all_at(dst: BorrowedFd<'_>, mut bytes: &[u8], mut at: u64) -> Result<(), DataError> {
    while !bytes.is_empty() {
        match rustix::io::pwrite(dst, bytes, at) {
            Ok(0) => {
                return Err(DataError {
                    op: "write",
                    source: io::Error::from(io::ErrorKind::WriteZero),
                })
            }
            Ok(n) => {
                bytes = &bytes[n..];
                at += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(fail("write")(e)),
        }
    }
    Ok(())
}

/// Compare `len` bytes at `offset` of `src` and `dst` and rewrite the pieces (of a buffer's
/// size) that differ; returns the bytes rewritten (0 when the range was already equal).
pub fn sync_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    buf: &mut Buffer,
    other: &mut Buffer,
) -> Result<u64, DataError> {
    let end = offset + len;
    let mut pos = offset;
    let mut rewritten = 0;
    while pos < end {
        let want = ((end - pos) as usize).min(buf.len);
        let a = &mut buf.get()[..want];
        read_exact_at(src, a, pos, true)?;
        let b = &mut other.get()[..want];
        let same = read_exact_at(dst, b, pos, false).is_ok() && a == b;
        if !same {
            write_all_at(dst, a, pos)?;
            rewritten += want as u64;
        }
        pos += want as u64;
    }
    Ok(rewritten)
}

fn read_exact_at(
    fd: BorrowedFd<'_>,
    mut out: &mut [u8],
    mut at: u64,
    source: bool,
) -> Result<(), DataError> {
    while !out.is_empty() {
        match rustix::io::pread(fd, &mut *out, at) {
            Ok(0) if source => return Err(shrank()),
            Ok(0) => {
                return Err(DataError {
                    op: "read destination",
                    source: io::Error::from(io::ErrorKind::UnexpectedEof),
                })
            }
            Ok(n) => {
                out = &mut std::mem::take(&mut out)[n..];
                at += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(fail(if source { "read" } else { "read destination" })(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fd::AsFd;
    use std::fs::File;
    use std::io::{Seek, Write};

    fn opts(sparse: bool) -> DataOptions {
        DataOptions {
            bufsize: 64 << 10,
            sparse,
            direct: false,
        }
    }

    #[test]
    fn dense_and_sparse_copies_keep_bytes_and_holes() {
        let tmp = tempfile::tempdir().unwrap();
        let mut src = File::create(tmp.path().join("s")).unwrap();
        src.write_all(&[1u8; 5000]).unwrap();
        src.seek(std::io::SeekFrom::Start(4 << 20)).unwrap();
        src.write_all(&[2u8; 100]).unwrap();
        let size = (4 << 20) + 100;
        let src = File::open(tmp.path().join("s")).unwrap();
        for (sparse, cfr) in [(false, true), (false, false), (true, true), (true, false)] {
            let path = tmp.path().join(format!("d{sparse}{cfr}"));
            let dst = File::create(&path).unwrap();
            dst.set_len(size).unwrap();
            let mut buf = Buffer::new(64 << 10);
            let mut cfr_ok = cfr;
            // Two chunks, the second starting mid-hole.
            let mid = 3 << 20;
            let a = copy_range(
                src.as_fd(),
                dst.as_fd(),
                0,
                mid,
                &opts(sparse),
                &mut buf,
                &mut cfr_ok,
            )
            .unwrap();
            let b = copy_range(
                src.as_fd(),
                dst.as_fd(),
                mid,
                size - mid,
                &opts(sparse),
                &mut buf,
                &mut cfr_ok,
            )
            .unwrap();
            if sparse {
                assert!(a + b < size / 2, "sparse copy wrote {}", a + b);
            } else {
                assert_eq!(a + b, size);
            }
            assert_eq!(
                std::fs::read(&path).unwrap(),
                std::fs::read(tmp.path().join("s")).unwrap()
            );
        }
        // A source shorter than promised is an error, not a silent short copy.
        let dst = File::create(tmp.path().join("short")).unwrap();
        let mut buf = Buffer::new(4096);
        let mut cfr_ok = true;
        let e = copy_range(
            src.as_fd(),
            dst.as_fd(),
            0,
            size + 10,
            &opts(false),
            &mut buf,
            &mut cfr_ok,
        )
        .unwrap_err();
        assert!(e.op.contains("shorter"), "{}", e.op);
    }

    #[test]
    fn sync_rewrites_only_what_differs() {
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(tmp.path().join("s"), &data).unwrap();
        let mut changed = data.clone();
        changed[200_000] ^= 0xff;
        std::fs::write(tmp.path().join("d"), &changed).unwrap();
        let src = File::open(tmp.path().join("s")).unwrap();
        let dst = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(tmp.path().join("d"))
            .unwrap();
        let (mut a, mut b) = (Buffer::new(65536), Buffer::new(65536));
        let mut sync = || {
            sync_range(
                src.as_fd(),
                dst.as_fd(),
                0,
                data.len() as u64,
                &mut a,
                &mut b,
            )
            .unwrap()
        };
        assert_eq!(sync(), 65536, "one 64 KiB piece differs");
        assert_eq!(std::fs::read(tmp.path().join("d")).unwrap(), data);
        assert_eq!(sync(), 0, "nothing left to rewrite");
    }
}
