//! Moving the bytes of one chunk: `copy_file_range` where the kernel can, `pread`/`pwrite`
//! otherwise; holes skipped with `SEEK_DATA`/`SEEK_HOLE` when sparse copies are asked for;
//! compare-then-rewrite for `sync --contents`.
//!
//! Holes are found with `lseek(SEEK_DATA/SEEK_HOLE)` only, never with `FS_IOC_FIEMAP`: every
//! Linux file system answers `lseek` (those without their own implementation through the VFS's
//! generic one, which calls the whole file data: the copy is then whole and correct), Lustre
//! natively since 2.14 for every layout, PFL and composite files included, on which FIEMAP fails
//! (`EOPNOTSUPP`); FIEMAP also needs `FIEMAP_FLAG_SYNC` to see data not yet
//! allocated (delayed allocation), which writes it out first. Where `SEEK_DATA` itself is refused
//! (`EINVAL`, `EOPNOTSUPP`, `ENOSYS`: an old kernel, a FUSE or network file system that passes
//! it on), the range is copied whole, zeros included: the same bytes, without the holes.
//!
//! Bytes per `pread`/`pwrite` call: fixed by `--bufsize`, or, when [`DataOptions::bufsize`] is
//! 0, chosen by an [`IoSizer`] per worker thread, which times every pair of calls and grows the
//! size while throughput improves (see [`super::iosize`]). `copy_file_range` calls are not
//! sized by it: the kernel moves the data, without a user buffer, a whole range per call.

use super::iosize::{self, IoSizer, Pattern};
use rustix::fd::BorrowedFd;
use rustix::fs::SeekFrom;
use rustix::io::Errno;
use std::cell::RefCell;
use std::io;
use std::time::Instant;

/// Alignment of `O_DIRECT` buffers, offsets and lengths (bytes).
pub const DIRECT_ALIGN: usize = 4096;

/// How chunk data moves.
#[derive(Clone, Copy, Debug)]
pub struct DataOptions {
    /// Bytes read or written per system call on the `pread`/`pwrite` path (the size of the
    /// [`Buffer`]s handed in, rounded up to [`DIRECT_ALIGN`]). 0: adaptive, chosen per worker
    /// thread by an [`IoSizer`] (from 1 MiB, between 64 KiB and 64 MiB, growing while
    /// throughput improves); the [`Buffer`]s handed in are then made with `Buffer::new(0)` and
    /// the thread's own buffers are used instead.
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
    /// Made by `Buffer::new(0)`: the copy functions use the thread's adaptive buffers instead.
    adaptive: bool,
}

impl Buffer {
    /// A buffer of `len` bytes (rounded up to the direct-I/O alignment); 0 (an adaptive
    /// [`DataOptions::bufsize`]) stands for the calling thread's adaptive buffers, sized by its
    /// [`IoSizer`], and allocates nothing itself.
    pub fn new(len: usize) -> Buffer {
        Buffer {
            raw: Vec::new(),
            start: 0,
            len: if len == 0 { iosize::START } else { len }
                .max(DIRECT_ALIGN)
                .next_multiple_of(DIRECT_ALIGN),
            adaptive: len == 0,
        }
    }

    pub(crate) fn get(&mut self) -> &mut [u8] {
        if self.raw.is_empty() {
            self.raw = vec![0u8; self.len + DIRECT_ALIGN];
            self.start = self.raw.as_ptr().align_offset(DIRECT_ALIGN);
        }
        &mut self.raw[self.start..self.start + self.len]
    }

    /// Use `len` bytes (a multiple of [`DIRECT_ALIGN`]) from now on: the allocation is replaced
    /// when too small, or, with `trim`, when larger (a settled size frees what the search
    /// tried). A new allocation is touched at once, so that page faults do not land in the
    /// next timed call.
    fn resize(&mut self, len: usize, trim: bool) {
        let have = self.raw.len().saturating_sub(DIRECT_ALIGN);
        self.len = len;
        if have == len || (have > len && !trim) {
            return;
        }
        self.raw = Vec::new();
        let b = self.get();
        for page in (0..b.len()).step_by(4096) {
            // SAFETY: `page` is inside `b`; a volatile write, so the store is not elided
            // (the allocator's pages are known to be zero).
            unsafe { std::ptr::write_volatile(b.as_mut_ptr().add(page), 0) };
        }
    }
}

/// The adaptive state of one worker thread: its controller and the buffers it sizes. It lives
/// as long as the thread (rayon's workers live as long as the process), so a search spans
/// work items and batches instead of starting over with each; per thread, because every
/// thread times its own calls and needs no lock to do so.
struct Adaptive {
    sizer: IoSizer,
    buf: Buffer,
    /// The second buffer of comparisons.
    other: Buffer,
    /// (size, reason) last published for [`iosize::chosen`].
    published: Option<(usize, iosize::Reason)>,
}

impl Adaptive {
    /// Switch to `p` and size the buffers (`two`: both) for the next call.
    fn prepare(&mut self, p: Pattern, two: bool) {
        self.sizer.pattern(p);
        self.publish();
        let (size, trim) = (self.sizer.size(), self.sizer.settled());
        self.buf.resize(size, trim);
        if two {
            self.other.resize(size, trim);
        }
    }

    fn publish(&mut self) {
        let now = (self.sizer.size(), self.sizer.reason());
        if self.published != Some(now) {
            iosize::publish(&self.sizer);
            self.published = Some(now);
        }
    }
}

thread_local! {
    static ADAPTIVE: RefCell<Adaptive> = RefCell::new(Adaptive {
        sizer: IoSizer::adaptive(),
        buf: Buffer::new(iosize::START),
        other: Buffer::new(iosize::START),
        published: None,
    });
    /// The fixed size this thread last published for [`iosize::chosen`] (0: none).
    static FIXED_PUBLISHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Publish a fixed size for [`iosize::chosen`], once per thread and size.
fn publish_fixed(len: usize) {
    if FIXED_PUBLISHED.get() != len {
        FIXED_PUBLISHED.set(len);
        iosize::publish(&IoSizer::fixed(len));
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

/// Where the bytes of a range go as they are read (a hasher), in order: every byte of the
/// range once, holes skipped by a sparse copy as zeros.
pub type Seen<'a> = Option<&'a mut dyn FnMut(&[u8])>;

/// Zeros handed to a [`Seen`] for the holes a sparse copy skips.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

fn see_zeros(seen: &mut Seen<'_>, mut len: u64) {
    if let Some(s) = seen {
        while len > 0 {
            let n = len.min(ZEROS.len() as u64);
            s(&ZEROS[..n as usize]);
            len -= n;
        }
    }
}

/// Copy `len` bytes at `offset` from `src` to the same offset of `dst`; returns bytes written.
///
/// With `sparse`, only the data regions are copied (the destination must already have its
/// final size so that skipped ranges read as zeros). `cfr_ok` says whether `copy_file_range`
/// may be tried; it is cleared when the kernel refuses, so later chunks go straight to
/// `pread`/`pwrite`. With `seen`, every byte read is handed to it (`copy_file_range`, which
/// moves bytes without showing them, is not used).
#[allow(clippy::too_many_arguments)]
pub fn copy_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    opts: &DataOptions,
    buf: &mut Buffer,
    cfr_ok: &mut bool,
    mut seen: Seen<'_>,
) -> Result<u64, DataError> {
    let end = offset + len;
    if !opts.sparse {
        return copy_at_seen(src, offset, dst, offset, len, opts, buf, cfr_ok, seen);
    }
    let mut pos = offset;
    let mut written = 0;
    while pos < end {
        let data = match seek_data(src, pos) {
            Ok(d) => d,
            // No data after `pos`: the rest is a hole.
            Err(Errno::NXIO) => {
                see_zeros(&mut seen, end - pos);
                break;
            }
            // No SEEK_DATA here: all of it is data (copied whole).
            Err(Errno::INVAL | Errno::NOTSUP | Errno::NOSYS) => {
                let s = seen.as_mut().map(|s| &mut **s as &mut dyn FnMut(&[u8]));
                return Ok(
                    written + copy_at_seen(src, pos, dst, pos, end - pos, opts, buf, cfr_ok, s)?
                );
            }
            Err(e) => return Err(fail("seek data")(e)),
        };
        if data >= end {
            see_zeros(&mut seen, end - pos);
            break;
        }
        see_zeros(&mut seen, data - pos);
        let hole = match rustix::fs::seek(src, SeekFrom::Hole(data)) {
            Ok(h) => h.min(end),
            Err(_) => end,
        };
        let s = seen.as_mut().map(|s| &mut **s as &mut dyn FnMut(&[u8]));
        written += copy_at_seen(src, data, dst, data, hole - data, opts, buf, cfr_ok, s)?;
        pos = hole;
    }
    Ok(written)
}

/// `lseek(src, pos, SEEK_DATA)`; `EOPNOTSUPP` when the test seam says so
/// ([`crate::engine::test_seam::no_seek_data`]).
fn seek_data(src: BorrowedFd<'_>, pos: u64) -> Result<u64, Errno> {
    if crate::engine::test_seam::no_seek_data() {
        return Err(Errno::NOTSUP);
    }
    rustix::fs::seek(src, SeekFrom::Data(pos))
}

/// Copy `len` bytes from `src` at `src_at` to `dst` at `dst_at` (the offsets may differ: tar
/// moves file data into and out of an archive); returns bytes written. `cfr_ok` as in
/// [`copy_range`]. Only the tests copy between different offsets now.
#[cfg(test)]
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
    copy_at_seen(src, src_at, dst, dst_at, len, opts, buf, cfr_ok, None)
}

/// [`copy_at`], handing every byte read to `seen` (then on the `pread`/`pwrite` path).
#[allow(clippy::too_many_arguments)]
pub fn copy_at_seen(
    src: BorrowedFd<'_>,
    src_at: u64,
    dst: BorrowedFd<'_>,
    dst_at: u64,
    len: u64,
    opts: &DataOptions,
    buf: &mut Buffer,
    cfr_ok: &mut bool,
    mut seen: Seen<'_>,
) -> Result<u64, DataError> {
    // `done` counts bytes moved; source and destination advance together.
    let mut done = 0u64;
    if *cfr_ok && !opts.direct && seen.is_none() {
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
    if opts.bufsize == 0 || buf.adaptive {
        let p = Pattern {
            direct: opts.direct,
            sparse: opts.sparse,
            compare: false,
        };
        return ADAPTIVE.with_borrow_mut(|a| {
            while done < len {
                a.prepare(p, false);
                let t = Instant::now();
                let s = seen.as_mut().map(|s| &mut **s as &mut dyn FnMut(&[u8]));
                let n = read_write(
                    src,
                    src_at,
                    dst,
                    dst_at,
                    len,
                    done,
                    opts.direct,
                    &mut a.buf,
                    s,
                )?;
                // Pairs cut short by the range's end are not measured (see `IoSizer::record`).
                if a.sizer.record(n as u64, t.elapsed()) {
                    a.publish();
                }
                done += n as u64;
            }
            Ok(done)
        });
    }
    publish_fixed(buf.len);
    while done < len {
        let s = seen.as_mut().map(|s| &mut **s as &mut dyn FnMut(&[u8]));
        done += read_write(src, src_at, dst, dst_at, len, done, opts.direct, buf, s)? as u64;
    }
    Ok(done)
}

/// One `pread` of up to `buf.len` bytes at `src_at + done` (of the `len` to copy) and its
/// `pwrite` at `dst_at + done`; the bytes moved (0 when interrupted before reading). The bytes
/// read go to `seen` before they are written.
#[allow(clippy::too_many_arguments)]
fn read_write(
    src: BorrowedFd<'_>,
    src_at: u64,
    dst: BorrowedFd<'_>,
    dst_at: u64,
    len: u64,
    done: u64,
    direct: bool,
    buf: &mut Buffer,
    seen: Seen<'_>,
) -> Result<usize, DataError> {
    let want = ((len - done) as usize).min(buf.len);
    // O_DIRECT reads ask for whole blocks (the file's end shortens the answer).
    let ask = if direct {
        want.next_multiple_of(DIRECT_ALIGN).min(buf.len)
    } else {
        want
    };
    let b = buf.get();
    let n = match rustix::io::pread(src, &mut b[..ask], src_at + done) {
        Ok(0) => return Err(shrank()),
        Ok(n) => n.min(want),
        Err(Errno::INTR) => return Ok(0),
        Err(e) => return Err(fail("read")(e)),
    };
    if let Some(s) = seen {
        s(&b[..n]);
    }
    write_all_at(dst, &b[..n], dst_at + done)?;
    Ok(n)
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
///
/// With adaptive buffers (`Buffer::new(0)`), the piece size is the thread's [`IoSizer`]'s for
/// the compare pattern, measured on the pieces found equal: the two reads and the comparison,
/// which is what a resync mostly does; a rewrite's cost depends on how much differs, not on the
/// size of the calls, and would only add noise to the measurement.
///
/// With `seen`, every byte read from the source is handed to it, in order.
pub fn sync_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    buf: &mut Buffer,
    other: &mut Buffer,
    mut seen: Seen<'_>,
) -> Result<u64, DataError> {
    if buf.adaptive {
        let p = Pattern {
            compare: true,
            ..Pattern::default()
        };
        return ADAPTIVE.with_borrow_mut(|a| {
            let (mut pos, mut rewritten) = (offset, 0);
            while pos < offset + len {
                a.prepare(p, true);
                let t = Instant::now();
                let s = seen.as_mut().map(|s| &mut **s as &mut dyn FnMut(&[u8]));
                let (n, same) =
                    compare_piece(src, dst, pos, offset + len, &mut a.buf, &mut a.other, s)?;
                if same && a.sizer.record(n, t.elapsed()) {
                    a.publish();
                }
                if !same {
                    rewritten += n;
                }
                pos += n;
            }
            Ok(rewritten)
        });
    }
    publish_fixed(buf.len);
    let (mut pos, mut rewritten) = (offset, 0);
    while pos < offset + len {
        let s = seen.as_mut().map(|s| &mut **s as &mut dyn FnMut(&[u8]));
        let (n, same) = compare_piece(src, dst, pos, offset + len, buf, other, s)?;
        if !same {
            rewritten += n;
        }
        pos += n;
    }
    Ok(rewritten)
}

/// Compare the piece of up to `buf.len` bytes at `pos` (before `end`) of `src` and `dst`,
/// rewriting it when it differs: (bytes, whether it was equal).
fn compare_piece(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    pos: u64,
    end: u64,
    buf: &mut Buffer,
    other: &mut Buffer,
    seen: Seen<'_>,
) -> Result<(u64, bool), DataError> {
    let want = ((end - pos) as usize).min(buf.len);
    let a = &mut buf.get()[..want];
    read_exact_at(src, a, pos, true)?;
    if let Some(s) = seen {
        s(a);
    }
    let b = &mut other.get()[..want];
    let same = read_exact_at(dst, b, pos, false).is_ok() && a == b;
    if !same {
        own_inode(dst)?;
        write_all_at(dst, a, pos)?;
    }
    Ok((want as u64, same))
}

/// Refuse to rewrite in place a destination that is not a regular file with one name: the
/// bytes would change under its other names too (an older `--link-dest` snapshot). Checked on
/// the descriptor written through, so a hard link made since the listing counts.
fn own_inode(dst: BorrowedFd<'_>) -> Result<(), DataError> {
    let st = rustix::fs::fstat(dst).map_err(fail("stat destination"))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_nlink != 1 {
        return Err(DataError {
            op: "rewrite in place (the destination file has other hard links now, which would \
                 change too; left as it was, rerun the sync)",
            source: io::Error::from_raw_os_error(libc::EMLINK),
        });
    }
    Ok(())
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
                None,
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
                None,
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
            None,
        )
        .unwrap_err();
        assert!(e.op.contains("shorter"), "{}", e.op);
    }

    /// A file of `size` bytes at `path` whose data is `data` ((offset, length) pairs, bytes of
    /// 7); the rest holes.
    pub(crate) fn sparse_file(path: &std::path::Path, size: u64, data: &[(u64, u64)]) {
        use std::os::unix::fs::FileExt;
        let f = File::create(path).unwrap();
        f.set_len(size).unwrap();
        for &(at, len) in data {
            f.write_all_at(&vec![7u8; len as usize], at).unwrap();
        }
    }

    /// Bytes allocated to `path` (`st_blocks` of 512 bytes).
    fn allocated(path: &std::path::Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    /// Holes at the start, in the middle, at the end, everywhere, nowhere: a sparse copy keeps
    /// them (as many bytes allocated); where SEEK_DATA is refused (the test seam) the copy is
    /// whole, with the same bytes.
    #[test]
    fn sparse_copies_keep_holes_and_copy_whole_without_seek_data() {
        const M: u64 = 1 << 20;
        let tmp = tempfile::tempdir().unwrap();
        let shapes: [(&str, &[(u64, u64)]); 5] = [
            ("hole at the start", &[(2 * M, 2 * M)]),
            ("hole in the middle", &[(0, M), (3 * M, M)]),
            ("hole at the end", &[(0, M)]),
            ("all hole", &[]),
            ("no hole", &[(0, 4 * M)]),
        ];
        let size = 4 * M;
        for (i, (what, data)) in shapes.iter().enumerate() {
            let src_path = tmp.path().join(format!("s{i}"));
            sparse_file(&src_path, size, data);
            let src = File::open(&src_path).unwrap();
            let want: u64 = data.iter().map(|d| d.1).sum();
            if allocated(&src_path) > want + 64 * 1024 {
                panic!("{what}: this file system allocated the holes of the source");
            }
            for seam in [false, true] {
                let dst_path = tmp.path().join(format!("d{i}{seam}"));
                let dst = File::create(&dst_path).unwrap();
                dst.set_len(size).unwrap();
                crate::engine::test_seam::set_no_seek_data_here(seam);
                let mut cfr_ok = false;
                let n = copy_range(
                    src.as_fd(),
                    dst.as_fd(),
                    0,
                    size,
                    &opts(true),
                    &mut Buffer::new(64 << 10),
                    &mut cfr_ok,
                    None,
                )
                .unwrap();
                crate::engine::test_seam::set_no_seek_data_here(false);
                assert!(
                    std::fs::read(&dst_path).unwrap() == std::fs::read(&src_path).unwrap(),
                    "{what}, without SEEK_DATA {seam}: other bytes"
                );
                if seam {
                    assert_eq!(n, size, "{what}: copied whole");
                    assert!(
                        allocated(&dst_path) >= size,
                        "{what}: no holes without SEEK_DATA"
                    );
                } else {
                    assert_eq!(n, want, "{what}: only the data copied");
                    assert_eq!(
                        allocated(&dst_path),
                        allocated(&src_path),
                        "{what}: same holes"
                    );
                }
            }
        }
    }

    /// `dir/s` holding `data` (opened to read) and `dir/d`, the same bytes but one flipped at
    /// `at` (opened to read and write).
    fn source_and_changed_copy(dir: &std::path::Path, data: &[u8], at: usize) -> (File, File) {
        std::fs::write(dir.join("s"), data).unwrap();
        let mut changed = data.to_vec();
        changed[at] ^= 0xff;
        std::fs::write(dir.join("d"), &changed).unwrap();
        let src = File::open(dir.join("s")).unwrap();
        let dst = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join("d"))
            .unwrap();
        (src, dst)
    }

    #[test]
    fn sync_rewrites_only_what_differs() {
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let (src, dst) = source_and_changed_copy(tmp.path(), &data, 200_000);
        let (mut a, mut b) = (Buffer::new(65536), Buffer::new(65536));
        let mut sync = || {
            sync_range(
                src.as_fd(),
                dst.as_fd(),
                0,
                data.len() as u64,
                &mut a,
                &mut b,
                None,
            )
            .unwrap()
        };
        assert_eq!(sync(), 65536, "one 64 KiB piece differs");
        assert_eq!(std::fs::read(tmp.path().join("d")).unwrap(), data);
        assert_eq!(sync(), 0, "nothing left to rewrite");
    }

    /// A destination inode with another name (a `--link-dest` snapshot) is never rewritten in
    /// place: the other name keeps its bytes.
    #[test]
    fn sync_refuses_to_rewrite_a_file_with_other_names() {
        let tmp = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let (src, dst) = source_and_changed_copy(tmp.path(), &data, 50_000);
        std::fs::hard_link(tmp.path().join("d"), tmp.path().join("snapshot")).unwrap();
        let before = std::fs::read(tmp.path().join("snapshot")).unwrap();
        let (mut a, mut b) = (Buffer::new(65536), Buffer::new(65536));
        let err = sync_range(
            src.as_fd(),
            dst.as_fd(),
            0,
            data.len() as u64,
            &mut a,
            &mut b,
            None,
        )
        .expect_err("refused");
        assert!(err.op.starts_with("rewrite in place"), "{}", err.op);
        assert_eq!(std::fs::read(tmp.path().join("snapshot")).unwrap(), before);
    }

    /// Pseudo-random bytes (xorshift), so that misplaced pieces show.
    fn noise(len: usize, seed: u64) -> Vec<u8> {
        crate::engine::test_rng::noise(seed, len)
    }

    fn adaptive_state() -> (usize, iosize::Reason) {
        ADAPTIVE.with_borrow(|a| (a.sizer.size(), a.sizer.reason()))
    }

    #[test]
    fn adaptive_copies_keep_bytes_and_the_search_spans_calls() {
        // A thread of its own: a fresh controller, whatever else ran on the test threads.
        std::thread::spawn(|| {
            let tmp = tempfile::tempdir().unwrap();
            let data = noise((80 << 20) + 12345, 7);
            std::fs::write(tmp.path().join("s"), &data).unwrap();
            let src = File::open(tmp.path().join("s")).unwrap();
            let opts = DataOptions {
                bufsize: 0,
                sparse: false,
                direct: false,
            };
            let mut buf = Buffer::new(0);
            assert_eq!(adaptive_state(), (iosize::START, iosize::Reason::Measuring));
            // Without copy_file_range: the read/write path. The whole file, then 3 MiB of it.
            for (name, len) in [("d1", data.len()), ("d2", 3 << 20)] {
                let dst = File::create(tmp.path().join(name)).unwrap();
                let mut cfr_ok = false;
                let n = copy_at(
                    src.as_fd(),
                    0,
                    dst.as_fd(),
                    0,
                    len as u64,
                    &opts,
                    &mut buf,
                    &mut cfr_ok,
                )
                .unwrap();
                assert_eq!(n, len as u64);
                assert!(std::fs::read(tmp.path().join(name)).unwrap() == data[..len]);
                // 64 MiB of warm-up, then 16 calls of 1 MiB made the first window (the tail is
                // not measured): the challenger's turn, 2 MiB, whatever the timings. The second
                // copy goes on at 2 MiB (one full call, no window) instead of starting over.
                assert_eq!(adaptive_state(), (2 << 20, iosize::Reason::Growing));
            }
            // The caller's buffer stood for the thread's: never allocated.
            assert!(buf.raw.is_empty());
            assert!(iosize::chosen().max_bytes >= iosize::MIN as u64);

            // O_DIRECT (where the file system takes it): whole blocks, unaligned tail.
            use rustix::fs::{Mode, OFlags};
            let direct = (
                rustix::fs::open(
                    tmp.path().join("s"),
                    OFlags::RDONLY | OFlags::DIRECT,
                    Mode::empty(),
                ),
                rustix::fs::open(
                    tmp.path().join("d3"),
                    OFlags::WRONLY | OFlags::CREATE,
                    Mode::from_raw_mode(0o600),
                ),
            );
            if let (Ok(s), Ok(d)) = direct {
                let opts = DataOptions {
                    direct: true,
                    ..opts
                };
                let mut cfr_ok = true;
                let n = copy_at(
                    s.as_fd(),
                    0,
                    d.as_fd(),
                    0,
                    data.len() as u64,
                    &opts,
                    &mut buf,
                    &mut cfr_ok,
                )
                .unwrap();
                assert_eq!(n, data.len() as u64);
                assert!(std::fs::read(tmp.path().join("d3")).unwrap() == data);
                // Its own pattern, its own search.
                assert_eq!(adaptive_state(), (2 << 20, iosize::Reason::Growing));
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn adaptive_sync_compares_in_pieces_of_the_thread_size() {
        std::thread::spawn(|| {
            let tmp = tempfile::tempdir().unwrap();
            let data = noise(3 << 20, 11);
            let (src, dst) = source_and_changed_copy(tmp.path(), &data, (5 << 20) / 2);
            let (mut a, mut b) = (Buffer::new(0), Buffer::new(0));
            let mut sync = || {
                sync_range(
                    src.as_fd(),
                    dst.as_fd(),
                    0,
                    data.len() as u64,
                    &mut a,
                    &mut b,
                    None,
                )
                .unwrap()
            };
            // A fresh thread compares in pieces of START (1 MiB): the third differs.
            assert_eq!(sync(), 1 << 20);
            assert!(std::fs::read(tmp.path().join("d")).unwrap() == data);
            assert_eq!(sync(), 0);
            let compare = ADAPTIVE.with_borrow(|a| a.sizer.current_pattern());
            assert!(compare.compare);
        })
        .join()
        .unwrap();
    }
}
