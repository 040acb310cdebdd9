//! Parallel decompression of a dbz2 file by its table: block `i` lands at `i x block_size`, so no
//! rank needs another's result. Blocks are split evenly over ranks (contiguous ranges) and handled
//! in waves of one block per rayon thread but at most 256 MiB of output per rank (one block if
//! blocks are bigger), which bounds memory and lets all ranks stop together after a damaged
//! block.

use super::blocks_per_wave;
use crate::engine::checkpoint::{Checkpoint, Prior};
use crate::engine::codec::bzip2::decompress_block;
use crate::engine::codec::dbz2::{self, Footer};
use rayon::prelude::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use steal::progress::Progress;
use steal::{Comm, CommExt, ReduceOp};

/// What to decompress.
pub struct Job<'a> {
    /// Set by a signal: every rank stops after the wave in flight.
    pub stop: &'a std::sync::atomic::AtomicBool,
    /// The dbz2 input, open for reading on this rank.
    pub input: &'a File,
    /// Input name, for messages.
    pub input_name: &'a str,
    /// The (temporary) output, open for writing on this rank.
    pub output: &'a File,
    /// Output name, for messages.
    pub output_name: &'a str,
    /// The input's footer (checked against its size).
    pub footer: Footer,
    /// Blocks an earlier run wrote into this output: not decompressed again.
    pub prior: &'a Prior,
    /// Where each block written is marked (after its write), if the run keeps a checkpoint.
    pub checkpoint: Option<&'a Checkpoint>,
}

/// Decompress collectively; `Err` holds this rank's first error (naming file and block; empty:
/// a stop request, after the wave in flight was written and marked). `done` gets the bytes of
/// output whose blocks are written (earlier runs' included), the same on every rank.
pub fn run(comm: &dyn Comm, job: &Job, progress: &Progress, done: &mut u64) -> Result<(), String> {
    let n = job.footer.nblocks;
    let (p, r) = (comm.size() as u64, comm.rank() as u64);
    let first = n * r / p;
    let last = n * (r + 1) / p;
    let mut failed = None;
    let entries = read_table(job, first, last).unwrap_or_else(|e| {
        failed = Some(e);
        Vec::new()
    });
    let k = blocks_per_wave(job.footer.block_size, rayon::current_num_threads());
    // Same number of waves on every rank, so the per-wave reductions match up.
    let waves = comm.max((last - first).div_ceil(k));
    // What earlier runs wrote counts: the report covers the whole job.
    let mut done_bytes: u64 = (first..last)
        .filter(|&i| job.prior.done(i))
        .map(|i| job.footer.block_len(i))
        .sum();
    for wave in 0..waves {
        let lo = (first + wave * k).min(last);
        let hi = (lo + k).min(last);
        if failed.is_none() && lo < hi {
            let result: Result<u64, String> = (lo..hi)
                .into_par_iter()
                .filter(|&i| !job.prior.done(i))
                .map(|i| decompress_one(job, i, entries[(i - first) as usize]))
                .try_reduce(|| 0, |a, b| Ok(a + b));
            match result {
                Ok(bytes) => done_bytes += bytes,
                Err(e) => failed = Some(e),
            }
        }
        let stopped = job.stop.load(std::sync::atomic::Ordering::Relaxed);
        let mut sums = [u64::from(failed.is_some()), done_bytes, u64::from(stopped)];
        comm.allreduce(&mut sums, ReduceOp::Sum);
        if sums[0] > 0 {
            break;
        }
        *done = sums[1];
        // Cheap: the progress runtime's timer draws what was handed over last.
        progress.report_sums(0, sums[1], 0);
        if sums[2] > 0 {
            // The wave is written and marked; the caller sees the flag (set on some rank)
            // and reports the stop.
            return Err(String::new());
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn read_table(job: &Job, first: u64, last: u64) -> Result<Vec<dbz2::Entry>, String> {
    let at = job.footer.table_offset + first * dbz2::ENTRY_LEN;
    let mut raw = vec![0u8; ((last - first) * dbz2::ENTRY_LEN) as usize];
    job.input
        .read_exact_at(&mut raw, at)
        .map_err(|e| format!("read {} table at byte {at}: {e}", job.input_name))?;
    dbz2::decode_entries(&raw, first, job.footer.table_offset)
        .map_err(|e| format!("{}: {e}", job.input_name))
}

fn decompress_one(job: &Job, index: u64, entry: dbz2::Entry) -> Result<u64, String> {
    let mut z = vec![0u8; entry.length as usize];
    job.input.read_exact_at(&mut z, entry.offset).map_err(|e| {
        format!(
            "read {} block {index} at byte {}: {e}",
            job.input_name, entry.offset
        )
    })?;
    let data = decompress_block(&z, job.footer.block_len(index) as usize).map_err(|e| {
        format!(
            "{}: block {index} of {} (bytes {}..{}): {e}",
            job.input_name,
            job.footer.nblocks,
            entry.offset,
            entry.offset + entry.length
        )
    })?;
    let at = index * job.footer.block_size;
    job.output
        .write_all_at(&data, at)
        .map_err(|e| format!("write {} at byte {at}: {e}", job.output_name))?;
    if let Some(c) = job.checkpoint {
        c.mark(index, &[]);
    }
    Ok(data.len() as u64)
}
