//! Byte ranges of regular files to copy, balanced by bytes over ranks.
//!
//! Every regular file of a stat list is cut into chunks of `chunk_size` bytes (the last one
//! shorter; an empty file gives one chunk of length 0). The global chunk sequence (rank order,
//! then local record order, then offset) is dealt in contiguous runs: each rank gets the chunks
//! whose byte midpoint falls in its `1/size` share of the total bytes, so a big file's chunks
//! land on many ranks and every rank gets within one `chunk_size` of `total / size` bytes.
//!
//! ```
//! use flist::chunk::plan_chunks;
//! use flist::{Detail, FileList, FileType, Meta};
//! let plans = steal::local::run(2, |comm| {
//!     let mut list = FileList::new(Detail::Stat);
//!     if comm.rank() == 0 {
//!         let meta = Meta { mode: 0o100644, size: 10, ..Meta::default() };
//!         list.push(b"/big", FileType::File, Some(meta));
//!     }
//!     plan_chunks(comm, &list, 4)
//! });
//! let spans = |r: usize| plans[r].iter().map(|c| (c.offset, c.length)).collect::<Vec<_>>();
//! assert_eq!(spans(0), vec![(0, 4)]);
//! assert_eq!(spans(1), vec![(4, 4), (8, 2)]);
//! ```

use crate::record::{FileList, FileType, Meta, META_BYTES};
use steal::{Comm, ReduceOp};

/// One byte range of one file, to be copied by the rank that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Path of the file.
    pub path: Vec<u8>,
    /// First byte of the range, from the start of the file.
    pub offset: u64,
    /// Bytes in the range (`chunk_size`, less for a file's last chunk, 0 for an empty file).
    pub length: u64,
    /// Size of the whole file in bytes, so the rank of the last chunk knows it is the last.
    pub file_size: u64,
    /// The file's metadata from the list, so whichever rank completes the file can apply it.
    pub meta: Meta,
}

/// Cut every regular file of `list` (stat lists; records without metadata are skipped) into
/// chunks of `chunk_size` bytes and deal the global chunk sequence over the ranks: rank `r`
/// gets, in global order, the contiguous run of chunks whose midpoint byte (in the prefix sum of
/// all chunks' bytes over ranks) lies in `[r * total / size, (r + 1) * total / size)`. Each
/// rank's bytes are then within `chunk_size` of `total / size`. When all files are empty, chunks
/// are dealt evenly by count instead. `chunk_size == 0` means no cutting: one chunk per file.
///
/// Collective: one exclusive scan, one all-reduce and one `alltoallv` (a run of consecutive
/// chunks of one file for one rank travels as one message item, whatever its length).
pub fn plan_chunks(comm: &dyn Comm, list: &FileList, chunk_size: u64) -> Vec<Chunk> {
    plan_striped_chunks(comm, list, chunk_size, &|_, _| None)
}

/// How a file's destination is striped (Lustre RAID0): `count` objects, `size` bytes per stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stripes {
    /// Stripes (OST objects) the file is spread over.
    pub count: u64,
    /// Bytes per stripe.
    pub size: u64,
}

impl Stripes {
    /// The period of a file's chunks over its objects: chunks `j` and `j + period` start in the
    /// same OST object and cover the same objects. 1 when every chunk covers all objects (or
    /// the chunk size is not a multiple of the stripe size, when no grouping is possible).
    pub fn period(&self, chunk_size: u64) -> u64 {
        if self.count <= 1 || self.size == 0 || chunk_size % self.size != 0 {
            return 1;
        }
        let k = chunk_size / self.size;
        self.count / gcd(self.count, k)
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// [`plan_chunks`] for destinations striped over several OSTs: `stripes(path, size)` says how
/// the destination of a file of several chunks is striped (`None`: not striped, or unknown).
///
/// A striped file's chunks are ordered by the object they fall in before being dealt (object
/// `o`'s chunks `o, o + p, o + 2p...` for the [`Stripes::period`] `p`), so a rank's contiguous
/// share of the sequence is whole OST objects where the counts allow: ranks then don't contend
/// for one object's extent locks. With `chunk_size` a multiple of the stripe size (callers
/// ensure it), no stripe is ever split between two ranks, whatever the order.
pub fn plan_striped_chunks(
    comm: &dyn Comm,
    list: &FileList,
    chunk_size: u64,
    stripes: &dyn Fn(&[u8], u64) -> Option<Stripes>,
) -> Vec<Chunk> {
    let cs = if chunk_size == 0 {
        u64::MAX
    } else {
        chunk_size
    };
    let chunks_of = |size: u64| if size == 0 { 1 } else { (size - 1) / cs + 1 };
    let files: Vec<(usize, u64)> = (0..list.len())
        .filter(|&i| list.kind(i) == FileType::File)
        .filter_map(|i| list.meta(i).map(|m| (i, m.size)))
        .collect();
    let mine = [
        files.iter().map(|f| f.1).sum::<u64>(),
        files.iter().map(|f| chunks_of(f.1)).sum::<u64>(),
    ];
    let mut before = mine;
    comm.exscan(&mut before);
    let mut totals = mine;
    comm.allreduce(&mut totals, ReduceOp::Sum);
    let (total_bytes, total_chunks) = (totals[0] as u128, totals[1] as u128);
    let size = comm.size();
    let n = size as u128;
    // The rank of a chunk starting at global byte `at` with `len` bytes, number `index`.
    let owner = |at: u64, len: u64, index: u64| -> usize {
        let r = if total_bytes > 0 {
            (2 * at as u128 + len as u128) * n / (2 * total_bytes)
        } else {
            index as u128 * n / total_chunks.max(1)
        };
        (r as usize).min(size - 1)
    };

    let mut sends = vec![Vec::new(); size];
    let (mut at, mut index) = (before[0], before[1]);
    for &(i, file_size) in &files {
        let path = list.path(i);
        let meta = &list.meta(i).expect("files with a size have metadata");
        let count = chunks_of(file_size);
        let period = match count {
            1 => 1,
            _ => stripes(path, file_size)
                .map_or(1, |s| s.period(cs))
                .min(count),
        };
        // Runs of chunks with one owner, consecutive in the (object-major) order: (owner, first
        // chunk, chunks, step between them).
        let mut run: Option<Run> = None;
        for first in 0..period {
            for j in (first..count).step_by(period as usize) {
                let offset = j * cs;
                let len = cs.min(file_size - offset);
                let r = owner(at, len, index);
                at += len;
                index += 1;
                match &mut run {
                    Some(x) if x.dest == r && x.first + x.count * period == j => x.count += 1,
                    _ => {
                        if let Some(done) = run.take() {
                            encode_run(&mut sends, path, meta, file_size, done);
                        }
                        run = Some(Run {
                            dest: r,
                            first: j,
                            count: 1,
                            step: period,
                        });
                    }
                }
            }
        }
        if let Some(done) = run {
            encode_run(&mut sends, path, meta, file_size, done);
        }
    }
    drop(files);
    let mut got = comm.alltoallv(sends);
    // Sized exactly (no regrowth, no slack), each buffer dropped once decoded.
    let mut out = Vec::with_capacity(got.iter().map(|b| count_runs(b)).sum());
    for bytes in got.iter_mut() {
        decode_runs(bytes, cs, &mut out);
        *bytes = Vec::new();
    }
    out
}

/// The chunks encoded in `bytes` (see [`encode_run`]).
fn count_runs(mut bytes: &[u8]) -> usize {
    let mut chunks = 0;
    while !bytes.is_empty() {
        let n = u32::from_le_bytes(bytes[..4].try_into().expect("path length")) as usize;
        let at = 4 + n + META_BYTES;
        chunks += u64::from_le_bytes(bytes[at + 16..at + 24].try_into().expect("u64")) as usize;
        bytes = &bytes[at + 32..];
    }
    chunks
}

/// Chunks `first, first + step, ...` (`count` of them) of one file, for rank `dest`.
struct Run {
    dest: usize,
    first: u64,
    count: u64,
    step: u64,
}

/// `u32 LE path length, path, metadata, u64 LE file size, first chunk number, chunk count,
/// step`: the bulk record format of [`crate::record`] (kept by hand for speed), one run of
/// chunks per record.
fn encode_run(sends: &mut [Vec<u8>], path: &[u8], meta: &Meta, file_size: u64, run: Run) {
    let buf = &mut sends[run.dest];
    buf.extend_from_slice(&(path.len() as u32).to_le_bytes());
    buf.extend_from_slice(path);
    meta.encode(buf);
    for v in [file_size, run.first, run.count, run.step] {
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

fn decode_runs(mut bytes: &[u8], cs: u64, out: &mut Vec<Chunk>) {
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("u64"));
    while !bytes.is_empty() {
        let n = u32::from_le_bytes(bytes[..4].try_into().expect("path length")) as usize;
        let path = &bytes[4..4 + n];
        let meta = Meta::decode(&bytes[4 + n..4 + n + META_BYTES]);
        let at = 4 + n + META_BYTES;
        let [file_size, first, count, step] = [0, 8, 16, 24].map(|o| u64_at(bytes, at + o));
        for i in 0..count {
            let offset = (first + i * step) * cs;
            out.push(Chunk {
                path: path.to_vec(),
                offset,
                length: cs.min(file_size - offset),
                file_size,
                meta,
            });
        }
        bytes = &bytes[at + 32..];
    }
}
