//! Parallel compression into the dbz2 layout.
//!
//! The blocks are handled in waves: in each wave every rank compresses up to `k` consecutive
//! blocks (its rayon threads in parallel), one exclusive prefix sum of the compressed sizes
//! places them, and each rank writes its streams back to back at that offset with `pwrite`. A
//! wave bounds memory to `k` blocks in and out per rank, whatever the file size. At the end every
//! rank writes the table entries of its blocks and rank 0 the footer.

use super::blocks_per_wave;
use super::resume;
use crate::engine::checkpoint::{Checkpoint, Prior};
use crate::engine::codec::bzip2::compress_block;
use crate::engine::codec::dbz2::{self, Entry, Footer};
use rayon::prelude::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use steal::progress::Progress;
use steal::{Comm, ReduceOp};

/// What to compress and how.
pub struct Job<'a> {
    /// Set by a signal: every rank stops after the wave in flight.
    pub stop: &'a std::sync::atomic::AtomicBool,
    /// The input, open for reading on this rank.
    pub input: &'a File,
    /// Input name, for messages.
    pub input_name: &'a str,
    /// The (temporary) output, open for writing on this rank.
    pub output: &'a File,
    /// Output name, for messages.
    pub output_name: &'a str,
    /// Bytes of input.
    pub size: u64,
    /// Bytes of input per stream.
    pub block_size: u64,
    /// bzip2 level (blocks of level x 100 kB inside each stream).
    pub level: u32,
    /// Blocks an earlier run wrote into this output (payload: their offset and length).
    pub prior: &'a Prior,
    /// Where each block written is marked (after its write), if the run keeps a checkpoint.
    pub checkpoint: Option<&'a Checkpoint>,
}

/// How far a compression got: bytes of input whose blocks are in the output (earlier runs'
/// included), the same on every rank.
#[derive(Debug, Default, Clone, Copy)]
pub struct Done {
    /// Uncompressed bytes of the blocks written.
    pub bytes: u64,
}

/// Compress collectively. Returns the footer written, or this rank's first error (then every
/// rank has stopped at the same wave and the output is incomplete; an empty error: a stop
/// request, after the wave in flight was written and marked). Blocks of `job.prior` are not
/// compressed again: their recorded length places the blocks after them, and their recorded
/// offset must be where the prefix sum puts them (compression is deterministic), or the
/// partial output is not this run's and the run fails. `done` tells how far it got.
pub fn run(
    comm: &dyn Comm,
    job: &Job,
    progress: &Progress,
    done: &mut Done,
) -> Result<Footer, String> {
    let n = dbz2::block_count(job.size, job.block_size);
    // Every rank must cut the waves alike: the smallest rank's choice.
    let mut k = [blocks_per_wave(
        job.block_size,
        rayon::current_num_threads(),
    )];
    comm.allreduce(&mut k, ReduceOp::Min);
    let k = k[0];
    let (p, r) = (comm.size() as u64, comm.rank() as u64);
    let mut base = 0u64;
    let mut mine: Vec<(u64, Entry)> = Vec::new();
    let mut failed: Option<String> = None;
    let mut done_bytes = 0u64;
    let mut wave_start = 0u64;
    while wave_start < n {
        let first = (wave_start + r * k).min(n);
        let last = (wave_start + (r + 1) * k).min(n);
        let streams: Vec<Stream> = if failed.is_some() {
            Vec::new()
        } else {
            let results: Vec<Result<Stream, String>> = (first..last)
                .into_par_iter()
                .map(
                    |i| match job.prior.payload(i).and_then(resume::decode_entry) {
                        Some(entry) => Ok(Err(entry)),
                        None => compress_one(job, i).map(Ok),
                    },
                )
                .collect();
            let mut ok = Vec::with_capacity(results.len());
            for res in results {
                match res {
                    Ok(z) => ok.push(z),
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
            if failed.is_some() {
                ok.clear();
            }
            ok
        };
        let len_of = |z: &Stream| match z {
            Ok(z) => z.len() as u64,
            Err((_, length)) => *length,
        };
        let my_len: u64 = streams.iter().map(len_of).sum();
        if failed.is_none() {
            done_bytes += (first..last).map(|i| block_len(job, i)).sum::<u64>();
        }
        let mut offset = [my_len];
        comm.exscan(&mut offset);
        let stopped = job.stop.load(std::sync::atomic::Ordering::Relaxed);
        let mut sums = [
            my_len,
            u64::from(failed.is_some()),
            done_bytes,
            u64::from(stopped),
        ];
        comm.allreduce(&mut sums, ReduceOp::Sum);
        if sums[1] > 0 {
            return Err(failed.unwrap_or_default());
        }
        let mut at = base + offset[0];
        for (i, z) in (first..last).zip(&streams) {
            let length = len_of(z);
            match z {
                Ok(z) => match job.output.write_all_at(z, at) {
                    Ok(()) => {
                        if let Some(c) = job.checkpoint {
                            c.mark(i, &resume::encode_entry(at, length));
                        }
                    }
                    Err(e) => {
                        failed
                            .get_or_insert(format!("write {} at byte {at}: {e}", job.output_name));
                    }
                },
                Err((offset, _)) if *offset != at => {
                    failed.get_or_insert(format!(
                        "{}: block {i} of the partial output lies at byte {offset}, this run \
                         places it at byte {at}: the partial output is not this run's",
                        job.output_name
                    ));
                }
                Err(_) => {}
            }
            mine.push((i, Entry { offset: at, length }));
            at += length;
        }
        base += sums[0];
        done.bytes = sums[2];
        // Cheap: the progress runtime's timer draws what was handed over last.
        progress.report_sums(0, sums[2], 0);
        wave_start += p * k;
        if sums[3] > 0 {
            // The wave is written (and marked); the caller sees the flag (set on some rank)
            // and reports the stop.
            return Err(failed.unwrap_or_default());
        }
    }
    let footer = Footer {
        table_offset: base,
        nblocks: n,
        block_size: job.block_size,
        original_size: job.size,
    };
    // Each wave gave this rank one run of consecutive blocks: one write per run.
    for run in mine.chunk_by(|a, b| b.0 == a.0 + 1) {
        let entries: Vec<Entry> = run.iter().map(|(_, e)| *e).collect();
        let at = base + run[0].0 * dbz2::ENTRY_LEN;
        if let Err(e) = job.output.write_all_at(&dbz2::encode_entries(&entries), at) {
            failed.get_or_insert(format!("write {} at byte {at}: {e}", job.output_name));
        }
    }
    if comm.rank() == 0 {
        let at = base + n * dbz2::ENTRY_LEN;
        if let Err(e) = job.output.write_all_at(&footer.encode(), at) {
            failed.get_or_insert(format!("write {} at byte {at}: {e}", job.output_name));
        }
        // A partial output taken over may be longer (a rerun must equal an uninterrupted run).
        let end = at + dbz2::FOOTER_LEN;
        if let Err(e) = job.output.set_len(end) {
            failed.get_or_insert(format!("truncate {} at byte {end}: {e}", job.output_name));
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(footer),
    }
}

/// A block's compressed stream, or, for a block an earlier run wrote, `Err((offset, length))`
/// (nothing to write).
type Stream = Result<Vec<u8>, (u64, u64)>;

fn block_len(job: &Job, index: u64) -> u64 {
    job.size
        .saturating_sub(index * job.block_size)
        .min(job.block_size)
}

fn compress_one(job: &Job, index: u64) -> Result<Vec<u8>, String> {
    let at = index * job.block_size;
    let mut data = vec![0u8; block_len(job, index) as usize];
    job.input
        .read_exact_at(&mut data, at)
        .map_err(|e| format!("read {} at byte {at}: {e}", job.input_name))?;
    compress_block(&data, job.level)
        .map_err(|e| format!("compress {} block {index}: {e}", job.input_name))
}
