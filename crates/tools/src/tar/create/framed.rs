//! `tar -c` of a compressed archive (`--zstd`, `-z` gzip, `-j` bzip2): the tar stream cut into
//! frames of one size, each compressed on its own, so that readers decompress them in
//! parallel.
//!
//! Frame `k` holds the stream's bytes `[k x frame, (k + 1) x frame)`, the index member and the
//! end blocks included; rank `r` compresses frames `[n r / size, n (r + 1) / size)` of the `n`,
//! whichever rank laid out the entries they hold: the segments (cut at frame boundaries) travel
//! to the rank of their frame, so a huge file's frames are spread over all ranks, and the work
//! is balanced by bytes. The compressed frames are placed by a prefix sum of their sizes; then
//! what finds them: zstd's seek table (formats.md §6), the gzip end member ([`gzip`]), or the
//! dbz2 table and footer (formats.md §7), each rank writing its frames' entries.

use super::super::Options;
use super::{display, IndexTail, Plan, Temp, Writer, Written};
use crate::engine::codec::gzip;
use crate::engine::codec::kind::Codec;
use crate::engine::codec::zstd::{self as seekable, FrameSizes};
use crate::engine::context::Error;
use crate::engine::copy::data::write_all_at;
use crate::tar::create::segment::Segment;
use crate::tar::format::BLOCK;
use flist::ItemError;
use rayon::prelude::*;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::io::{self, Read, Seek, Write};
use std::sync::atomic::Ordering;
use steal::typed;
use steal::{Comm, CommExt};

/// bzip2's block size level for `-j` (900 kB blocks, bzip2's default).
const BZIP2_LEVEL: u32 = 9;

/// The uncompressed bytes of one frame of a tar stream of `stream_len` bytes cut by `chunk`
/// (`-k`, bytes): the chunk size on whole tar blocks, or half the stream (on whole blocks) when the stream fits one frame.
///
/// An archive is never one frame: one frame of a marked tar stream without what follows it
/// (the seek table, the dbz2 table) is byte for byte another tool's compression of an mfu-rs
/// plain archive, so an archive cut where its index of frames begins could not be told from
/// one. With two frames or more that cut is named truncated ([`crate::engine::codec::zstd::unended`]),
/// and a cut between the two leaves a tar stream without its end blocks (the second frame
/// holds at least both: the stream is at least four blocks, the index member and the end).
pub(super) fn frame_size(chunk: u64, stream_len: u64) -> u64 {
    let frame = chunk.next_multiple_of(BLOCK);
    if stream_len <= frame {
        (stream_len / 2).next_multiple_of(BLOCK).max(BLOCK)
    } else {
        frame
    }
}

/// Frames `[first, end)` that `rank` of `size` compresses, of `n`.
fn my_frames(n: u64, size: usize, rank: usize) -> (u64, u64) {
    let at = |r: usize| (u128::from(n) * r as u128 / size as u128) as u64;
    (at(rank), at(rank + 1))
}

/// Where compressed frames go. Rank 0's part starts the archive, so it writes straight into
/// it (each frame marked done once there); the other ranks' frames wait until their place is
/// known: in memory up to a limit, then in an unnamed temporary file beside the archive.
///
/// Frames an earlier run wrote (`sizes[i]` already known when the run starts) are not
/// compressed again; the others come in order, so when one comes, the sizes of all before it in
/// this rank's part are known.
enum Spool {
    /// Written at their final offsets (this rank's part starts at 0).
    Direct { fd: OwnedFd },
    /// Kept until [`Spool::write_to`]: `(frame of this rank, offset in the spool, bytes)`.
    Held {
        mem: Vec<u8>,
        file: Option<std::fs::File>,
        limit: usize,
        dir: Vec<u8>,
        held: Vec<(usize, u64, u64)>,
        spooled: u64,
    },
}

/// This rank's frames: their sizes (known for those written, by an earlier run or this one).
struct Part {
    /// The frame number of `sizes[0]`.
    first: u64,
    sizes: Vec<Option<FrameSizes>>,
}

impl Part {
    /// Compressed bytes before frame `i` of this part (every frame before it is known).
    fn offset(&self, i: usize) -> u64 {
        self.sizes[..i]
            .iter()
            .map(|f| u64::from(f.expect("frames come in order").compressed))
            .sum()
    }

    fn compressed(&self) -> u64 {
        self.sizes
            .iter()
            .flatten()
            .map(|f| u64::from(f.compressed))
            .sum()
    }
}

impl Spool {
    /// Frame `i` of this rank's part, `bytes`: written at its place (direct, then marked), or
    /// held.
    fn push(&mut self, part: &Part, i: usize, bytes: &[u8], w: &Writer) -> io::Result<()> {
        match self {
            Spool::Direct { fd } => {
                write_all_at(fd.as_fd(), bytes, part.offset(i)).map_err(|e| e.source)?;
                if !w.problems.is_damaged() {
                    let f = part.sizes[i].expect("pushed once known");
                    w.ledger.wrote_frame(part.first + i as u64, f);
                }
                Ok(())
            }
            Spool::Held {
                mem,
                file,
                limit,
                dir,
                held,
                spooled,
            } => {
                if file.is_none() && mem.len() + bytes.len() > *limit {
                    let mut f = tempfile::tempfile_in(flist::path::as_path(dir))?;
                    f.write_all(mem)?;
                    *mem = Vec::new();
                    *file = Some(f);
                }
                match file {
                    Some(f) => f.write_all(bytes)?,
                    None => mem.extend_from_slice(bytes),
                }
                held.push((i, *spooled, bytes.len() as u64));
                *spooled += bytes.len() as u64;
                Ok(())
            }
        }
    }

    /// Write what is held, this rank's part starting at offset `at` of `out`, and mark each
    /// frame (nothing to do for a direct spool).
    fn write_to(
        &mut self,
        out: BorrowedFd<'_>,
        at: u64,
        part: &Part,
        w: &Writer,
    ) -> io::Result<()> {
        let Spool::Held {
            mem, file, held, ..
        } = self
        else {
            return Ok(());
        };
        let mut buf = Vec::new();
        for &(i, off, len) in held.iter() {
            let bytes = match file {
                None => &mem[off as usize..(off + len) as usize],
                Some(f) => {
                    buf.resize(len as usize, 0);
                    f.seek(io::SeekFrom::Start(off))?;
                    f.read_exact(&mut buf)?;
                    &buf[..]
                }
            };
            write_all_at(out, bytes, at + part.offset(i)).map_err(|e| e.source)?;
            if !w.problems.is_damaged() {
                let f = part.sizes[i].expect("held frames are known");
                w.ledger.wrote_frame(part.first + i as u64, f);
            }
        }
        Ok(())
    }
}

/// Compress one frame as `codec` at `level`; returns its bytes and the checksum the zstd seek
/// table records (0 for the others, whose CRCs are inside).
fn compress(codec: Codec, data: &[u8], level: i32) -> io::Result<(Vec<u8>, u32)> {
    match codec {
        Codec::Zstd => seekable::compress_frame(data, level).map(|c| {
            let sum = seekable::frame_checksum(&c);
            (c, sum)
        }),
        Codec::Gzip => gzip::compress_member(data, level.clamp(1, 9) as u32).map(|c| (c, 0)),
        Codec::Bzip2 => crate::engine::codec::bzip2::compress_block(data, BZIP2_LEVEL)
            .map(|c| (c, 0))
            .map_err(io::Error::other),
        Codec::Xz => Err(io::Error::other("xz archives are not written")),
    }
}

/// Compress this rank's frames (the bytes of its segments, which tile them, in order) into
/// frames of `frame` bytes, handing each to `emit` with its sizes and checksum; returns how
/// many. Frames left out (written by an earlier run) are whole frames, so the bytes of the
/// others still cut into frames at multiples of `frame`. Reading the next window
/// of segments overlaps compressing the frames of the previous one. A stop request (SIGINT,
/// SIGTERM) ends it between windows with an error of kind `Interrupted`.
fn compress_part(
    w: &Writer,
    segs: &[Segment],
    frame: usize,
    (codec, level): (Codec, i32),
    emit: &mut dyn FnMut(&[u8], FrameSizes) -> io::Result<()>,
) -> io::Result<u64> {
    let window = (rayon::current_num_threads().max(1) * frame) as u64;
    // Windows of whole segments, each about `window` bytes.
    let mut windows = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let mut j = i;
        let mut bytes = 0;
        while j < segs.len() && (j == i || bytes < window) {
            bytes += segs[j].len();
            j += 1;
        }
        windows.push(&segs[i..j]);
        i = j;
    }
    let read = |part: &[Segment]| -> Vec<Vec<u8>> {
        part.par_iter()
            .map(|s| {
                let mut v = Vec::with_capacity(s.len() as usize);
                w.bytes_of(s, &mut v);
                v
            })
            .collect()
    };
    let squeeze = |data: &[u8]| -> Vec<io::Result<(Vec<u8>, u32, usize)>> {
        data.par_chunks(frame)
            .map(|d| compress(codec, d, level).map(|(c, sum)| (c, sum, d.len())))
            .collect()
    };
    let mut count = 0;
    let mut pending: Vec<u8> = Vec::new();
    let mut next = windows.first().map(|w| read(w)).unwrap_or_default();
    for k in 0..=windows.len() {
        if w.stop.load(Ordering::Relaxed) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        for piece in std::mem::take(&mut next) {
            pending.extend_from_slice(&piece);
        }
        let last = k == windows.len();
        // Whole frames now; the rest waits for more bytes (all of it at the end).
        let cut = if last {
            pending.len()
        } else {
            pending.len() / frame * frame
        };
        let following = windows.get(k + 1).copied();
        let (frames, more) = rayon::join(
            || squeeze(&pending[..cut]),
            || following.map(&read).unwrap_or_default(),
        );
        pending.drain(..cut);
        next = more;
        for f in frames {
            let (c, checksum, d) = f?;
            let sizes = FrameSizes {
                compressed: c.len() as u32,
                decompressed: d as u32,
                checksum,
            };
            emit(&c, sizes)?;
            count += 1;
        }
    }
    Ok(count)
}

/// Cut `seg` where it crosses a multiple of `frame` (bytes of the stream), so that each piece
/// lies in one frame: runs of entries into runs of the entries each frame touches ([`align`]'s
/// windows), anything else into windows of its bytes.
///
/// [`align`]: crate::tar::create::align
fn cut_at_frames(seg: Segment, frame: u64, out: &mut Vec<Segment>) {
    let (at, len) = (seg.at(), seg.len());
    if len == 0 || at / frame == (at + len - 1) / frame {
        out.push(seg);
        return;
    }
    match seg {
        Segment::Run { .. } => out.extend(crate::tar::create::align::windows(vec![seg], frame)),
        Segment::Bytes { at, data } => {
            let mut lo = at;
            while lo < at + len {
                let hi = ((lo / frame + 1) * frame).min(at + len);
                out.push(Segment::Bytes {
                    at: lo,
                    data: data[(lo - at) as usize..(hi - at) as usize].to_vec(),
                });
                lo = hi;
            }
        }
        seg => {
            let seg = Box::new(seg);
            let mut lo = at;
            while lo < at + len {
                let hi = ((lo / frame + 1) * frame).min(at + len);
                out.push(Segment::Window {
                    lo,
                    hi,
                    run: seg.clone(),
                });
                lo = hi;
            }
        }
    }
}

/// Send every segment to the rank that compresses its frame; returns this rank's, in stream
/// order. Collective.
fn balance(
    comm: &dyn Comm,
    segs: Vec<Segment>,
    frame: u64,
    n: u64,
    done: &dyn Fn(u64) -> bool,
) -> Vec<Segment> {
    let size = comm.size();
    let firsts: Vec<u64> = (0..=size).map(|r| my_frames(n, size, r).0).collect();
    let owner = |at: u64| {
        let k = (at / frame).min(n.saturating_sub(1));
        firsts[..size]
            .partition_point(|&f| f <= k)
            .saturating_sub(1)
    };
    let me = comm.rank();
    let mut keep = Vec::new();
    let mut sends = vec![Vec::new(); size];
    let mut pieces = Vec::new();
    for seg in segs {
        cut_at_frames(seg, frame, &mut pieces);
    }
    // The pieces of frames an earlier run wrote are neither sent nor read.
    for seg in pieces.into_iter().filter(|s| !done(s.at() / frame)) {
        match owner(seg.at()) {
            o if o == me => keep.push(seg),
            o => typed::encode_into(&seg, &mut sends[o]),
        }
    }
    for bytes in comm.alltoallv(sends) {
        keep.extend(typed::each::<Segment>(&bytes).map(typed::sent));
    }
    keep.sort_by_key(Segment::at);
    keep
}

/// Bytes after the frames: the seek table, the end member, or the dbz2 table and footer.
fn trailer_len(codec: Codec, n: u64) -> u64 {
    match codec {
        Codec::Gzip => gzip::END_MEMBER as u64,
        Codec::Bzip2 => {
            n * crate::engine::codec::dbz2::ENTRY_LEN + crate::engine::codec::dbz2::FOOTER_LEN
        }
        _ => seekable::table_len(n, true),
    }
}

/// Write a compressed archive under `tmp`: the index member joins the entries as the stream's
/// last segments, every rank compresses its frames ([`balance`]); rank 0 creates the file and
/// writes its frames straight into it, the others spool theirs until [`place`] places every
/// rank's part. Collective.
pub(super) fn write(
    comm: &dyn Comm,
    o: &Options,
    plan: &Plan,
    w: &Writer,
    tmp: &Temp<'_>,
    mut segs: Vec<Segment>,
    codec: Codec,
) -> Result<Written, Error> {
    let rank0 = comm.rank() == 0;
    let frame = frame_size(o.chunksize, plan.stream_len);
    let n = plan.stream_len.div_ceil(frame);
    if codec == Codec::Zstd && !seekable::table_fits(n) {
        return Err(Error::new(format!(
            "{n} zstd frames are more than a seek table holds (use a larger --chunksize)"
        )));
    }
    // The index member and the end blocks: every rank its piece, placed after the entries.
    let last = comm.rank() + 1 == comm.size();
    let tail = IndexTail {
        header: &plan.idx_header,
        count: plan.count,
        data_len: plan.idx_data_len,
        footer: &plan.footer,
    };
    let index = super::index_part(&plan.offsets, rank0, last, &tail);
    let (i_base, _) = comm.offset_and_total(index.len() as u64);
    if !index.is_empty() {
        segs.push(Segment::Bytes {
            at: plan.total + i_base,
            data: index,
        });
    }
    let done = |k: u64| w.ledger.frame(k).is_some();
    let segs = balance(comm, segs, frame, n, &done);
    let (k0, k1) = my_frames(n, comm.size(), comm.rank());
    let mut part = Part {
        first: k0,
        sizes: (k0..k1).map(|k| w.ledger.frame(k)).collect(),
    };
    let todo: Vec<usize> = (0..part.sizes.len())
        .filter(|&i| part.sizes[i].is_none())
        .collect();
    // Rank 0 writes its frames through its own descriptor of the archive it made.
    let created = tmp
        .mine()
        .map(|made| made.map_err(|e| format!("create {}: {e}", display(&w.archive))))
        .transpose();
    let mut spool = match crate::engine::setup::agree_setup(comm, created)? {
        Some(fd) => Spool::Direct { fd },
        None => Spool::Held {
            mem: Vec::new(),
            file: None,
            limit: o.memsize.min(usize::MAX as u64) as usize,
            dir: flist::path::parent(&w.archive).to_vec(),
            held: Vec::new(),
            spooled: 0,
        },
    };
    let mut interrupted = false;
    let level = o.zstd_level;
    let level = if codec == Codec::Gzip {
        o.gzip_level
    } else {
        level
    };
    let mut next = 0;
    let mut emit = |c: &[u8], f: FrameSizes| -> io::Result<()> {
        let i = *todo
            .get(next)
            .ok_or_else(|| io::Error::other("internal: more frames compressed than expected"))?;
        next += 1;
        part.sizes[i] = Some(f);
        spool.push(&part, i, c, w)
    };
    let compressed = compress_part(w, &segs, frame as usize, (codec, level), &mut emit);
    let ok = match compressed {
        Ok(c) if c == todo.len() as u64 => true,
        Ok(c) => {
            let e = io::Error::other(format!(
                "internal: {c} frames compressed, {} expected",
                todo.len()
            ));
            w.problems.damage(ItemError::new(&w.archive, "write", e));
            false
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {
            interrupted = true;
            false
        }
        Err(e) => {
            w.problems.damage(ItemError::new(&w.archive, "write", e));
            false
        }
    };
    drop(segs);
    let mut written = Written {
        complete: false,
        interrupted,
        frames: 0,
        compressed: 0,
    };
    if comm.all(ok) {
        let grid = Grid {
            codec,
            frame,
            n,
            first: k0,
            stream_len: plan.stream_len,
        };
        match place(comm, tmp, &mut spool, &part, w, &grid) {
            Ok(()) => {
                written.frames = part.sizes.len() as u64;
                written.compressed = part.compressed();
            }
            Err(e) => w.problems.damage(ItemError::new(&w.archive, "write", e)),
        }
        written.complete = true;
    }
    Ok(written)
}

/// The frames of the whole archive, and this rank's first.
struct Grid {
    codec: Codec,
    /// Uncompressed bytes of a frame (the last one may hold fewer).
    frame: u64,
    /// Frames in the archive.
    n: u64,
    /// This rank's first frame.
    first: u64,
    /// Bytes of the tar stream.
    stream_len: u64,
}

/// Place every rank's compressed frames (`spool`, this rank's `part`) by an exclusive prefix
/// sum of their sizes, then what finds them after all of them: each rank writes its frames'
/// entries of the zstd seek table or the dbz2 table at their place, rank 0 the table's head and
/// footer or the gzip end member. No rank gathers the others' sizes. Collective.
fn place(
    comm: &dyn Comm,
    tmp: &Temp<'_>,
    spool: &mut Spool,
    part: &Part,
    w: &Writer,
    grid: &Grid,
) -> io::Result<()> {
    let (c_base, c_total) = comm.offset_and_total(part.compressed());
    let end = c_total + trailer_len(grid.codec, grid.n);
    let frames: Vec<FrameSizes> = part
        .sizes
        .iter()
        .map(|f| f.expect("every frame compressed or written before"))
        .collect();
    let frames = &frames[..];
    let opened = match spool {
        Spool::Held { .. } => {
            let fd = tmp.join()?;
            spool.write_to(fd.as_fd(), c_base, part, w)?;
            Some(fd)
        }
        Spool::Direct { .. } => None,
    };
    let fd = match (&opened, &*spool) {
        (Some(fd), _) => fd.as_fd(),
        (None, Spool::Direct { fd, .. }) => {
            rustix::fs::ftruncate(fd, end)?;
            fd.as_fd()
        }
        (None, Spool::Held { .. }) => unreachable!("a held spool was opened above"),
    };
    let put = |bytes: &[u8], at: u64| write_all_at(fd, bytes, at).map_err(|e| e.source);
    let rank0 = comm.rank() == 0;
    match grid.codec {
        Codec::Gzip => {
            if rank0 {
                put(
                    &gzip::end_member(grid.n, grid.frame, grid.stream_len),
                    c_total,
                )?;
            }
        }
        Codec::Bzip2 => {
            use crate::engine::codec::dbz2::{
                encode_entries, Entry, Footer, ENTRY_LEN, FOOTER_LEN,
            };
            let mut at = c_base;
            let entries: Vec<Entry> = frames
                .iter()
                .map(|f| {
                    let e = Entry {
                        offset: at,
                        length: u64::from(f.compressed),
                    };
                    at += e.length;
                    e
                })
                .collect();
            put(&encode_entries(&entries), c_total + grid.first * ENTRY_LEN)?;
            if rank0 {
                let footer = Footer {
                    table_offset: c_total,
                    nblocks: grid.n,
                    block_size: grid.frame,
                    original_size: grid.stream_len,
                };
                put(&footer.encode(), end - FOOTER_LEN)?;
            }
        }
        _ => {
            put(
                &seekable::table_entries(frames, true),
                c_total + seekable::table_entry_at(grid.first),
            )?;
            if rank0 {
                put(&seekable::table_head(grid.n, true), c_total)?;
                put(
                    &seekable::table_footer(grid.n, true),
                    end - seekable::TABLE_FOOTER,
                )?;
            }
        }
    }
    tmp.sync_mine(fd, w);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stream is cut into at least two frames of whole blocks: one that fits a chunk
    /// into two, the second holding both end-of-archive blocks; a longer one into frames of
    /// the chunk size (its last may hold one block: readers name a lone end block).
    #[test]
    fn a_stream_is_never_one_frame() {
        for blocks in [4u64, 5, 6, 7, 100, 2047, 2048, 2049, 10_000] {
            let len = blocks * BLOCK;
            let frame = frame_size(1 << 20, len);
            assert_eq!(frame % BLOCK, 0, "{blocks} blocks");
            let n = len.div_ceil(frame);
            assert!(n >= 2, "{blocks} blocks: {n} frames");
            if len > 1 << 20 {
                assert_eq!(frame, 1 << 20, "{blocks} blocks");
            } else {
                // Halved: the second frame holds both end blocks.
                assert_eq!(n, 2, "{blocks} blocks");
                assert!(len - frame >= 2 * BLOCK, "{blocks} blocks");
            }
        }
    }

    #[test]
    fn frames_are_shared_by_count_and_every_frame_has_one_rank() {
        for n in [0u64, 1, 3, 7, 100] {
            for size in [1usize, 2, 3, 4, 16] {
                let mut next = 0;
                for r in 0..size {
                    let (a, b) = my_frames(n, size, r);
                    assert_eq!(a, next, "n {n} size {size}");
                    assert!(b - a <= n.div_ceil(size as u64));
                    next = b;
                }
                assert_eq!(next, n);
            }
        }
    }
}
