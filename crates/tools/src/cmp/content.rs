//! Comparing the data of same-size regular files, in chunks spread over all ranks.
//!
//! The files to read (source records, each on the rank that holds its pair) are cut into
//! chunks and dealt over ranks by bytes ([`flist::chunk::plan_chunks`]), so one huge file is
//! read by every rank; idle ranks steal chunks ([`steal::queue`]). Each chunk's verdict goes
//! back to the rank holding the pair, which calls a file equal only when every one of its
//! chunks was read and found equal.
//!
//! With a checkpoint, each chunk's verdict (same or different) is marked as soon as it is
//! known, under a key made of the file's path relative to the source root, the chunk's first
//! byte and the chunk size (the same at any rank count); a rerun takes the recorded verdicts
//! of those chunks instead of reading them again. A chunk that could not be read is not
//! marked: a rerun tries it again (and names it again).

use crate::engine::checkpoint::{Checkpoint, Prior};
use crate::engine::context::Context;
use crate::engine::copy::Mapping;
use crate::engine::pairing::{home, PathIndex};
use flist::at::At;
use flist::chunk::plan_chunks;
use flist::noatime::NoAtime;
use flist::{FileList, ItemError};
use rustix::fd::OwnedFd;
use rustix::fs::OFlags;
use rustix::io::Errno;
use serde_bytes::Bytes;
use std::cell::RefCell;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use steal::progress::Progress;
use steal::{queue, Comm, ReduceOp};

/// Alignment of `O_DIRECT` buffers and lengths (bytes).
const DIRECT_ALIGN: usize = 4096;

/// How file data is read.
#[derive(Clone, Copy, Debug)]
pub struct ReadOptions<'a> {
    /// Bytes per chunk, the unit of work dealt over ranks; 0: chosen from the total
    /// ([`crate::engine::copy::auto_chunk_size`]).
    pub chunk_size: u64,
    /// Bytes per read call (each of the two files).
    pub bufsize: usize,
    /// Open with `O_DIRECT` where the file system takes it.
    pub direct: bool,
    /// Read with `O_NOATIME` when asked, where permitted (the owner or a privileged user).
    pub noatime: &'a NoAtime,
    /// Where each file's verdict goes, the rank holding its pair: with `Some`, the rank whose
    /// range of relative paths holds it ([`flist::spill::rank_of`] of these splitters: the
    /// merge join of a spilled `cmp`); with `None`, [`home`] (`pairing::bring_home`).
    pub ranges: Option<&'a [Option<Vec<u8>>]>,
}

/// What the comparison of a file's data found.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Verdict {
    /// Every byte is equal.
    Same = 0,
    /// Some byte differs (or one file grew or shrank while being read).
    Differ = 1,
    /// Some chunk could not be read (reported on stderr by the rank that tried): equality is
    /// unknown.
    Failed = 2,
    /// Some chunk was never compared (a signal stopped the run) and none compared differs:
    /// equality is unknown.
    NotCompared = 3,
}

/// What [`compare_files`] found for the files of this rank, and what it cost.
pub struct Compared {
    /// The verdict for each record of this rank's `files`, in their order (`Failed` for a
    /// record without metadata, which is not compared).
    pub verdicts: Vec<Verdict>,
    /// The chunk size used (bytes).
    pub chunk_size: u64,
    /// Bytes read on all ranks (both files), as counted by the progress given (from its start,
    /// over every call that shared it).
    pub bytes_read: u64,
    /// A signal stopped the comparison; files not finished are `NotCompared` (or `Differ` when
    /// a chunk compared already differs).
    pub interrupted: bool,
}

/// One chunk to compare: the source path and its byte range. A work-queue item.
#[derive(serde::Serialize, serde::Deserialize)]
struct Piece {
    #[serde(with = "serde_bytes")]
    path: Vec<u8>,
    offset: u64,
    length: u64,
    file_size: u64,
}

/// What earlier runs of the same comparison recorded, and where this run records the verdict of
/// each chunk it compares. Chunks are keyed by the chunk size too: pass the same chunk size
/// (`ReadOptions::chunk_size`, not 0) to every call of a run, and the one a rerun recorded.
#[derive(Clone, Copy)]
pub struct Resume<'a> {
    /// Where verdicts are marked (`None`: recorded nowhere, only `prior` is read).
    pub checkpoint: Option<&'a Checkpoint>,
    /// The verdicts earlier runs recorded.
    pub prior: &'a Prior,
}

/// Bytes of a chunk's mark payload: the verdict (1), the chunk size (8), a second digest of the
/// chunk's identity (8) that a key shared by two chunks (64 bits) does not pass.
const PAYLOAD_BYTES: usize = 17;

/// The key (`seed` 0) or the check digest (another seed) of the chunk of the file `rel`
/// (relative to the source root) starting at `offset`, in chunks of `chunk_size` bytes.
fn chunk_digest(rel: &[u8], offset: u64, chunk_size: u64, seed: u64) -> u64 {
    let mut bytes = Vec::with_capacity(rel.len() + 24);
    bytes.extend_from_slice(&(rel.len() as u64).to_le_bytes());
    bytes.extend_from_slice(rel);
    bytes.extend_from_slice(&offset.to_le_bytes());
    bytes.extend_from_slice(&chunk_size.to_le_bytes());
    xxhash_rust::xxh64::xxh64(&bytes, seed)
}

/// The seed of [`chunk_digest`]'s check digest.
const CHECK_SEED: u64 = 0x636d_702d_6368_6b31;

/// A chunk's key: the same for the same chunk at any rank count.
fn chunk_key(rel: &[u8], offset: u64, chunk_size: u64) -> u64 {
    chunk_digest(rel, offset, chunk_size, 0)
}

/// The payload marked for a chunk of `chunk_size` bytes whose comparison found `verdict`.
fn chunk_payload(
    rel: &[u8],
    offset: u64,
    chunk_size: u64,
    verdict: Verdict,
) -> [u8; PAYLOAD_BYTES] {
    let mut out = [0u8; PAYLOAD_BYTES];
    out[0] = verdict as u8;
    out[1..9].copy_from_slice(&chunk_size.to_le_bytes());
    out[9..].copy_from_slice(&chunk_digest(rel, offset, chunk_size, CHECK_SEED).to_le_bytes());
    out
}

/// The verdict an earlier run recorded for this chunk, if it recorded one that is whole and
/// is this chunk's (same chunk size, same check digest); anything else is compared again.
fn recorded(prior: &Prior, rel: &[u8], offset: u64, chunk_size: u64) -> Option<Verdict> {
    let p = prior.payload(chunk_key(rel, offset, chunk_size))?;
    let p: &[u8; PAYLOAD_BYTES] = p.try_into().ok()?;
    if *p != chunk_payload(rel, offset, chunk_size, Verdict::Same)
        && *p != chunk_payload(rel, offset, chunk_size, Verdict::Differ)
    {
        return None;
    }
    Some(if p[0] == Verdict::Same as u8 {
        Verdict::Same
    } else {
        Verdict::Differ
    })
}

/// The chunk size the marks of `prior` were made with, when they are chunk marks made with one
/// chosen automatically (a whole number of MiB, 4 MiB to 1 GiB, as
/// [`crate::engine::copy::auto_chunk_size`] chooses): a rerun cuts files the same way, whatever
/// its rank count, so that the chunks it finds recorded are its own.
pub fn recorded_chunk_size(prior: &Prior) -> Option<u64> {
    const MIB: u64 = 1 << 20;
    let (_, p) = prior.iter().find(|(_, p)| p.len() == PAYLOAD_BYTES)?;
    let cs = u64::from_le_bytes(p[1..9].try_into().expect("8 bytes"));
    (cs % MIB == 0 && (4 * MIB..=1024 * MIB).contains(&cs)).then_some(cs)
}

/// Compare the data of every regular file of `files` (source records of this rank, each the
/// same size as its destination through `map`) with its destination. Failures are reported to
/// `context` by the rank that meets them; its stop flag stops the comparison. With `resume`,
/// chunks recorded by an earlier run are not read again (their verdicts and bytes count as
/// this run's), and each chunk compared is marked. Collective.
pub fn compare_files(
    comm: &dyn Comm,
    context: &Context,
    files: &FileList,
    map: &Mapping,
    opts: &ReadOptions,
    progress: &Progress,
    resume: Option<Resume<'_>>,
) -> Compared {
    let mut totals = [
        files.iter().filter_map(|e| e.meta).map(|m| m.size).sum(),
        rayon::current_num_threads() as u64,
    ];
    comm.allreduce(&mut totals, ReduceOp::Sum);
    let cs = match opts.chunk_size {
        0 => crate::engine::copy::auto_chunk_size(totals[0], totals[1]),
        c => c,
    };
    // O_DIRECT reads start at whole blocks: so must every chunk.
    let cs = if opts.direct {
        cs.next_multiple_of(DIRECT_ALIGN as u64)
    } else {
        cs
    };
    // Added: a comparison may run in rounds, each a call.
    progress.total_bytes.fetch_add(totals[0], Ordering::Relaxed);
    // Built (exactly sized) while the chunks go: not in place, where the pieces would keep
    // the chunks' larger slots.
    let chunks = plan_chunks(comm, files, cs);
    // Each chunk's verdict, encoded for the rank holding the pair as soon as it is known (the
    // piece and its path are dropped then).
    let size = comm.size();
    let owner = |rel: &[u8]| match opts.ranges {
        Some(splitters) => flist::spill::rank_of(splitters, rel),
        None => home(rel, size),
    };
    let mut found: Vec<Vec<u8>> = vec![Vec::new(); size];
    let mut pieces: Vec<Piece> = Vec::with_capacity(chunks.len());
    for c in chunks {
        let rel = map.rel(&c.path);
        if let Some(v) = resume.and_then(|r| recorded(r.prior, rel, c.offset, cs)) {
            // Compared by an earlier run: its verdict and bytes count as if read now.
            progress.add(u64::from(c.offset == 0), c.length);
            steal::typed::encode_into(&(Bytes::new(&c.path), v), &mut found[owner(rel)]);
            continue;
        }
        pieces.push(Piece {
            path: c.path,
            offset: c.offset,
            length: c.length,
            file_size: c.file_size,
        });
    }
    let found = Mutex::new(found);
    let checkpoint = resume.and_then(|r| r.checkpoint);
    let cfg = queue::Config {
        max_batch: 2,
        stop: Some(&context.stop),
        progress: Some(progress),
        ..queue::Config::default()
    };
    let outcome = queue::run(comm, &cfg, pieces, |p: Piece, _| {
        let dst = map.dest(&p.path);
        let verdict = match compare_range(&p.path, &dst, p.offset, p.length, p.file_size, opts) {
            Ok(true) => Verdict::Same,
            Ok(false) => Verdict::Differ,
            Err(e) => {
                context.error(e);
                Verdict::Failed
            }
        };
        let rel = map.rel(&p.path);
        if let (Some(c), Verdict::Same | Verdict::Differ) = (checkpoint, verdict) {
            c.mark(
                chunk_key(rel, p.offset, cs),
                &chunk_payload(rel, p.offset, cs, verdict),
            );
        }
        progress.add(u64::from(p.offset == 0), p.length);
        let mut found = found.lock().expect("verdicts");
        let out = &mut found[owner(rel)];
        steal::typed::encode_into(&(Bytes::new(&p.path), verdict), out);
    });
    // Each chunk's verdict to the rank holding the pair, counted there per record of `files`
    // (found by path: 12 bytes per record, no path copied).
    let index = PathIndex::new(files.len(), |i| files.path(i));
    // Chunks seen and the worst verdict among them, per record.
    let mut chunks: Vec<(u64, Verdict)> = vec![(0, Verdict::Same); files.len()];
    for bytes in comm.alltoallv(found.into_inner().expect("verdicts")) {
        for found in steal::typed::each::<(&Bytes, Verdict)>(&bytes) {
            let (path, v) = steal::typed::sent(found);
            if let Some(i) = index.find(path, |i| files.path(i)) {
                let e = &mut chunks[i];
                e.0 += 1;
                e.1 = e.1.max(v);
            }
        }
    }
    drop(index);
    let chunks_of = |size: u64| size.div_ceil(cs).max(1);
    let verdicts = files
        .iter()
        .zip(&chunks)
        .map(|(e, &(n, v))| match e.meta {
            None => Verdict::Failed,
            Some(m) if n > 0 && n == chunks_of(m.size) => v,
            // A chunk never compared (the run was stopped): a difference already found
            // stands, otherwise equality is unknown.
            Some(_) if n > 0 && v != Verdict::Same => v,
            Some(_) => Verdict::NotCompared,
        })
        .collect();
    let mut bytes_read = [2 * progress.bytes.load(Ordering::Relaxed)];
    comm.allreduce(&mut bytes_read, ReduceOp::Sum);
    Compared {
        verdicts,
        chunk_size: cs,
        bytes_read: bytes_read[0],
        interrupted: outcome.interrupted,
    }
}

thread_local! {
    /// The two read buffers of this worker thread, kept between chunks.
    static BUFFERS: RefCell<(Aligned, Aligned)> = RefCell::new((Aligned::default(), Aligned::default()));
}

/// A buffer aligned for `O_DIRECT`.
#[derive(Default)]
struct Aligned {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn get(&mut self, len: usize) -> &mut [u8] {
        let len = len.next_multiple_of(DIRECT_ALIGN);
        if self.len < len {
            self.raw = vec![0u8; len + DIRECT_ALIGN];
            self.start = self.raw.as_ptr().align_offset(DIRECT_ALIGN);
            self.len = len;
        }
        &mut self.raw[self.start..self.start + len]
    }
}

/// Compare `length` bytes at `offset` of the files `src` and `dst` (both `file_size` bytes
/// long when listed): true when equal. The chunk that ends the file also checks that neither
/// file has grown since. A file that can't be opened or read is an error naming it, never
/// "equal".
pub fn compare_range(
    src: &[u8],
    dst: &[u8],
    offset: u64,
    length: u64,
    file_size: u64,
    opts: &ReadOptions,
) -> Result<bool, ItemError> {
    // The reader of a file's first chunk counts it when the kernel refuses O_NOATIME.
    let first = offset == 0;
    let mut a = open(src, opts, first)?;
    let mut b = open(dst, opts, first)?;
    // Direct reads move whole blocks: each read starts where the last one ended, so on a
    // block boundary (chunks start on one, see `compare_files`).
    let piece = opts.bufsize.clamp(DIRECT_ALIGN, 1 << 30);
    let piece = if opts.direct {
        piece.next_multiple_of(DIRECT_ALIGN)
    } else {
        piece
    };
    BUFFERS.with_borrow_mut(|(ba, bb)| {
        let (ba, bb) = (ba.get(piece), bb.get(piece));
        let (mut pos, end) = (offset, offset + length);
        while pos < end {
            let want = ((end - pos) as usize).min(piece);
            let na = a.read_at(ba, pos, want).map_err(|e| fail(src, e))?;
            let nb = b.read_at(bb, pos, want).map_err(|e| fail(dst, e))?;
            if na != nb || ba[..na] != bb[..nb] {
                return Ok(false);
            }
            if na < want {
                // Both shrank alike since the walk: equal as far as both go.
                return Ok(true);
            }
            pos += want as u64;
        }
        if end == file_size {
            let na = a.read_at(ba, end, 1).map_err(|e| fail(src, e))?;
            let nb = b.read_at(bb, end, 1).map_err(|e| fail(dst, e))?;
            if na != nb || ba[..na] != bb[..nb] {
                return Ok(false);
            }
        }
        Ok(true)
    })
}

fn fail(path: &[u8], e: io::Error) -> ItemError {
    ItemError::new(path, "read", e)
}

/// A file open for reading, and whether its reads are direct (`O_DIRECT`).
struct Source {
    fd: OwnedFd,
    direct: bool,
}

impl Source {
    /// Read up to `want` bytes at `at` into `buf`, stopping early only at the end of the file;
    /// returns the bytes read. Direct reads ask for whole blocks (the file's end shortens
    /// them); a read that can't be direct (an offset off a block boundary, or a file system
    /// that wants larger blocks: `EINVAL`) goes through the page cache from then on.
    fn read_at(&mut self, buf: &mut [u8], at: u64, want: usize) -> io::Result<usize> {
        let mut done = 0;
        while done < want {
            let from = at + done as u64;
            if self.direct && from % DIRECT_ALIGN as u64 != 0 {
                self.buffered()?;
            }
            let ask = if self.direct {
                (want - done)
                    .next_multiple_of(DIRECT_ALIGN)
                    .min(buf.len() - done)
            } else {
                want - done
            };
            match rustix::io::pread(&self.fd, &mut buf[done..done + ask], from) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(Errno::INVAL) if self.direct => self.buffered()?,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(done.min(want))
    }

    /// Drop `O_DIRECT` from the descriptor: later reads go through the page cache.
    fn buffered(&mut self) -> io::Result<()> {
        let flags = rustix::fs::fcntl_getfl(&self.fd)?;
        rustix::fs::fcntl_setfl(&self.fd, flags - OFlags::DIRECT)?;
        self.direct = false;
        Ok(())
    }
}

/// Open `path` for reading: `O_DIRECT` if asked and the file system takes it, `O_NOATIME`
/// if asked and permitted (see [`NoAtime::open_part`]; `first`: the file's first chunk).
fn open(path: &[u8], opts: &ReadOptions, first: bool) -> Result<Source, ItemError> {
    let err = |e: io::Error| ItemError::new(path, "open", e);
    let at = At::new(path).map_err(err)?;
    let open = |direct: bool| {
        let flags = if direct {
            OFlags::RDONLY | OFlags::DIRECT
        } else {
            OFlags::RDONLY
        };
        opts.noatime.open_part(first, flags, |f| at.open(f, 0))
    };
    if opts.direct {
        match open(true) {
            Ok(fd) => return Ok(Source { fd, direct: true }),
            // Not supported (O_DIRECT on tmpfs): read through the page cache.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(err(e)),
        }
    }
    let fd = open(false).map_err(err)?;
    Ok(Source { fd, direct: false })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::{Detail, FileType, Meta};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    static ASKED: NoAtime = NoAtime::new(true);

    fn opts(chunk_size: u64) -> ReadOptions<'static> {
        ReadOptions {
            chunk_size,
            bufsize: 4096,
            direct: false,
            noatime: &ASKED,
            ranges: None,
        }
    }

    fn b(p: &Path) -> Vec<u8> {
        p.as_os_str().as_bytes().to_vec()
    }

    /// `O_DIRECT` reads with `bufsize` bytes per read and chunks of `chunk_size` bytes.
    fn direct(chunk_size: u64, bufsize: usize) -> ReadOptions<'static> {
        ReadOptions {
            chunk_size,
            bufsize,
            direct: true,
            noatime: &ASKED,
            ranges: None,
        }
    }

    /// A source tree with one file of `size` bytes and a destination copy with the bytes at
    /// `flip` changed; compared at `ranks` ranks with chunks of 10000 bytes.
    fn compare_copy(size: usize, flip: &[usize], ranks: usize) -> Verdict {
        compare_copy_with(size, flip, ranks, &opts(10_000))
    }

    /// [`compare_copy`] with the read options `read`. The files are in the temporary directory
    /// (on a disk file system here, which takes `O_DIRECT`).
    fn compare_copy_with(size: usize, flip: &[usize], ranks: usize, read: &ReadOptions) -> Verdict {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("s"), dir.path().join("d"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&dst).unwrap();
        let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(src.join("f"), &data).unwrap();
        let mut other = data.clone();
        for &i in flip {
            other[i] ^= 0x20;
        }
        std::fs::write(dst.join("f"), &other).unwrap();
        let map = Mapping::new(vec![(b(&src), b(&dst))]);
        let path = b(&src.join("f"));
        let found = steal::local::run(ranks, |comm| {
            let mut files = FileList::new(Detail::Stat);
            // The pair is held by its home rank.
            if comm.rank() == home(b"f", comm.size()) {
                let meta = Meta {
                    mode: 0o100644,
                    size: size as u64,
                    ..Meta::default()
                };
                files.push(&path, FileType::File, Some(meta));
            }
            let c = compare_files(
                comm,
                &Context::default(),
                &files,
                &map,
                read,
                &Progress::silent(),
                None,
            );
            // One record on the home rank, none elsewhere.
            c.verdicts.first().copied()
        });
        let held: Vec<Verdict> = found.into_iter().flatten().collect();
        assert_eq!(held.len(), 1, "one rank holds the verdict");
        held[0]
    }

    #[test]
    fn a_difference_in_any_chunk_is_found_at_any_rank_count() {
        let size = 95_000; // ten chunks, the last one short
        for ranks in [1, 3, 4] {
            assert_eq!(compare_copy(size, &[], ranks), Verdict::Same);
            for at in [0, 9_999, 10_000, 45_123, 89_999, 90_000, size - 1] {
                assert_eq!(
                    compare_copy(size, &[at], ranks),
                    Verdict::Differ,
                    "byte {at}"
                );
            }
        }
        assert_eq!(compare_copy(0, &[], 2), Verdict::Same, "empty files");
    }

    #[test]
    fn a_vanished_file_is_an_error_not_equal() {
        let dir = tempfile::tempdir().unwrap();
        let (a, gone) = (dir.path().join("a"), dir.path().join("gone"));
        std::fs::write(&a, b"0123456789").unwrap();
        let e = compare_range(&b(&a), &b(&gone), 0, 10, 10, &opts(0)).unwrap_err();
        assert_eq!(e.op, "open");
        assert_eq!(e.path, b(&gone));
        assert!(e.to_string().contains("No such file"), "{e}");
        // Through the whole machinery: the verdict is Failed.
        let map = Mapping::new(vec![(b(dir.path()), b(&dir.path().join("nowhere")))]);
        let verdict = steal::local::run(2, |comm| {
            let mut files = FileList::new(Detail::Stat);
            if comm.rank() == home(b"a", comm.size()) {
                let meta = Meta {
                    mode: 0o100644,
                    size: 10,
                    ..Meta::default()
                };
                files.push(&b(&a), FileType::File, Some(meta));
            }
            compare_files(
                comm,
                &Context::default(),
                &files,
                &map,
                &opts(4),
                &Progress::silent(),
                None,
            )
            .verdicts
            .first()
            .copied()
        });
        assert_eq!(
            verdict.into_iter().flatten().collect::<Vec<_>>(),
            vec![Verdict::Failed]
        );
    }

    #[test]
    fn a_file_grown_since_the_walk_differs() {
        let dir = tempfile::tempdir().unwrap();
        let (a, c) = (dir.path().join("a"), dir.path().join("c"));
        std::fs::write(&a, b"0123456789").unwrap();
        std::fs::write(&c, b"0123456789+").unwrap();
        assert!(!compare_range(&b(&a), &b(&c), 0, 10, 10, &opts(0)).unwrap());
        assert!(compare_range(&b(&a), &b(&c), 0, 5, 10, &opts(0)).unwrap());
    }

    #[test]
    fn direct_reads_take_sizes_off_the_block_size() {
        // Chunks of 10000 (rounded to 12288) and reads of 5000 (rounded to 8192) bytes: every
        // direct read starts on a block boundary; the file's unaligned end is read too.
        let size = 95_000;
        for read in [direct(10_000, 5000), direct(0, 5000), direct(5000, 4096)] {
            for ranks in [1, 3] {
                assert_eq!(compare_copy_with(size, &[], ranks, &read), Verdict::Same);
                for at in [0, 4_999, 12_288, 94_999] {
                    assert_eq!(
                        compare_copy_with(size, &[at], ranks, &read),
                        Verdict::Differ,
                        "byte {at} {read:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_file_grown_since_the_walk_differs_with_direct_reads() {
        let dir = tempfile::tempdir().unwrap();
        let (a, c) = (dir.path().join("a"), dir.path().join("c"));
        std::fs::write(&a, b"0123456789").unwrap();
        std::fs::write(&c, b"0123456789+").unwrap();
        let read = direct(0, 5000);
        // The end-of-file check reads at byte 10, off a block boundary.
        assert!(!compare_range(&b(&a), &b(&c), 0, 10, 10, &read).unwrap());
        assert!(!compare_range(&b(&c), &b(&a), 0, 10, 10, &read).unwrap());
        assert!(compare_range(&b(&a), &b(&a), 0, 10, 10, &read).unwrap());
    }
}
