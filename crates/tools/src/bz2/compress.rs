//! Parallel compression into the dbz2 layout.
//!
//! The blocks are handled in waves: in each wave every rank compresses up to `k` consecutive
//! blocks (its rayon threads in parallel), one exclusive prefix sum of the compressed sizes
//! places them, and each rank writes its streams back to back at that offset with `pwrite`. A
//! wave bounds memory to `k` blocks in and out per rank, whatever the file size. At the end every
//! rank writes the table entries of its blocks and rank 0 the footer.

use super::blocks_per_wave;
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
}

/// Compress collectively. Returns the footer written, or this rank's first error (then every
/// rank has stopped at the same wave and the output is incomplete).
pub fn run(comm: &dyn Comm, job: &Job, progress: &Progress) -> Result<Footer, String> {
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
        let streams: Vec<Vec<u8>> = if failed.is_some() {
            Vec::new()
        } else {
            let results: Vec<Result<Vec<u8>, String>> = (first..last)
                .into_par_iter()
                .map(|i| compress_one(job, i))
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
        let my_len: u64 = streams.iter().map(|z| z.len() as u64).sum();
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
        if sums[3] > 0 {
            // The caller sees the flag (set on some rank) and reports the interruption.
            return Err(String::new());
        }
        let mut at = base + offset[0];
        for (i, z) in (first..last).zip(&streams) {
            if let Err(e) = job.output.write_all_at(z, at) {
                failed.get_or_insert(format!("write {} at byte {at}: {e}", job.output_name));
            }
            mine.push((
                i,
                Entry {
                    offset: at,
                    length: z.len() as u64,
                },
            ));
            at += z.len() as u64;
        }
        base += sums[0];
        // Cheap: the progress runtime's timer draws what was handed over last.
        progress.report_sums(0, sums[2], 0);
        wave_start += p * k;
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
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(footer),
    }
}

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
