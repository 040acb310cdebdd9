//! The seed's benchmark: each rank writes K records of [`RECORD_BYTES`], then reads them back
//! and checks them, in one of three layouts ([`Layout`]).

use crate::data::{drop_cache, err, remove, sync, Pattern};
use crate::phase::{agree, mb_per_s, timed};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;
use steal::{Comm, CommExt};

/// Bytes of one record: the seed's record size (deliberately not a multiple of any block).
pub const RECORD_BYTES: usize = 272_383;

/// Where the records go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// N-N: a file per rank (`DIR/nn.RANK`), its records one after the other.
    PerRank,
    /// N-1 plain: one shared file (`DIR/n1`), record k of rank r at `(k × ranks + r) ×
    /// RECORD_BYTES`, written with `pwrite`.
    Shared,
    /// N-1 with PFA: one aggregate (`DIR/records.pfa`), a stream per rank, each record appended;
    /// its chunks written with `O_DIRECT` when `direct` (where the file system allows it).
    Pfa { direct: bool },
}

impl Layout {
    /// The layout named `nn`, `n1`, `pfa` or `pfa-direct`.
    pub fn parse(name: &str) -> Option<Layout> {
        match name {
            "nn" => Some(Layout::PerRank),
            "n1" => Some(Layout::Shared),
            "pfa" => Some(Layout::Pfa { direct: false }),
            "pfa-direct" => Some(Layout::Pfa { direct: true }),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Layout::PerRank => "nn",
            Layout::Shared => "n1",
            Layout::Pfa { direct: false } => "pfa",
            Layout::Pfa { direct: true } => "pfa-direct",
        }
    }
}

/// The file this rank writes its records to (all ranks share it but in N-N).
fn path(layout: Layout, dir: &Path, rank: usize) -> PathBuf {
    match layout {
        Layout::PerRank => dir.join(format!("nn.{rank}")),
        Layout::Shared => dir.join("n1"),
        Layout::Pfa { .. } => dir.join("records.pfa"),
    }
}

/// Write, read back and check `records` records per rank in `layout` under `dir`: the report's
/// fields (`workload=records layout=.. bytes=.. write_s=.. read_s=..` and bandwidths in MB/s).
pub fn run(comm: &dyn Comm, layout: Layout, dir: &Path, records: u64) -> Result<String, String> {
    let (rank, size) = (comm.rank(), comm.size());
    let file = path(layout, dir, rank);
    let pattern = Pattern::new(rank, RECORD_BYTES);
    // Untimed: what an earlier run may have left, removed before anyone writes.
    if rank == 0 || layout == Layout::PerRank {
        agree(comm, remove(&file))?;
    } else {
        agree(comm, Ok(()))?;
    }
    let ((finish_s, written), write_s) = timed(comm, || match layout {
        Layout::PerRank => write_own(&file, &pattern, records),
        Layout::Shared => write_shared(&file, &pattern, records, rank, size),
        Layout::Pfa { direct } => crate::records_pfa::write(comm, &file, &pattern, records, direct),
    })?;
    // The slowest rank's final sync (nn, n1) or collective close (pfa), within write_s.
    let finish_s = comm.max((finish_s * 1e9) as u64) as f64 / 1e9;
    agree(comm, drop_cache(&file))?;
    let ((), read_s) = timed(comm, || match layout {
        Layout::PerRank => read_own(&file, &pattern, records),
        Layout::Shared => read_shared(&file, &pattern, records, rank, size),
        Layout::Pfa { .. } => crate::records_pfa::read(&file, &pattern, records, rank),
    })?;
    if rank == 0 || layout == Layout::PerRank {
        agree(comm, remove(&file))?;
    } else {
        agree(comm, Ok(()))?;
    }
    let bytes = records * RECORD_BYTES as u64 * size as u64;
    let files = match layout {
        Layout::PerRank => size,
        Layout::Shared | Layout::Pfa { .. } => 1,
    };
    Ok(format!(
        "workload=records layout={} records={records} bytes={bytes} files={files} \
         write_s={write_s:.6} finish_s={finish_s:.6} read_s={read_s:.6} write_mb_s={:.1} \
         read_mb_s={:.1}{written}",
        layout.name(),
        mb_per_s(bytes, write_s),
        mb_per_s(bytes, read_s),
    ))
}

/// Write this rank's records; the seconds of its final sync and extra report fields.
fn write_own(file: &Path, pattern: &Pattern, records: u64) -> Result<(f64, String), String> {
    let mut f = File::create(file).map_err(|e| err("create", file, e))?;
    let mut buf = Vec::new();
    pattern.item(0, RECORD_BYTES, &mut buf);
    for k in 0..records {
        pattern.restamp(k, &mut buf);
        f.write_all(&buf).map_err(|e| err("write", file, e))?;
    }
    let t = Instant::now();
    sync(&f, file)?;
    Ok((t.elapsed().as_secs_f64(), String::new()))
}

fn read_own(file: &Path, pattern: &Pattern, records: u64) -> Result<(), String> {
    let mut f = File::open(file).map_err(|e| err("open", file, e))?;
    let mut buf = vec![0; RECORD_BYTES];
    for k in 0..records {
        f.read_exact(&mut buf).map_err(|e| err("read", file, e))?;
        if !pattern.is_item(k, RECORD_BYTES, &buf) {
            return Err(err("check", file, format!("record {k} differs")));
        }
    }
    Ok(())
}

/// Offset of record `k` of `rank` among `size` ranks in the shared file.
fn offset(k: u64, rank: usize, size: usize) -> u64 {
    (k * size as u64 + rank as u64) * RECORD_BYTES as u64
}

fn write_shared(
    file: &Path,
    pattern: &Pattern,
    records: u64,
    rank: usize,
    size: usize,
) -> Result<(f64, String), String> {
    // Every rank opens (and may create) the one file; none truncates it.
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(file)
        .map_err(|e| err("open", file, e))?;
    let mut buf = Vec::new();
    pattern.item(0, RECORD_BYTES, &mut buf);
    for k in 0..records {
        pattern.restamp(k, &mut buf);
        f.write_all_at(&buf, offset(k, rank, size))
            .map_err(|e| err("pwrite", file, e))?;
    }
    let t = Instant::now();
    sync(&f, file)?;
    Ok((t.elapsed().as_secs_f64(), String::new()))
}

fn read_shared(
    file: &Path,
    pattern: &Pattern,
    records: u64,
    rank: usize,
    size: usize,
) -> Result<(), String> {
    let f = File::open(file).map_err(|e| err("open", file, e))?;
    let mut buf = vec![0; RECORD_BYTES];
    for k in 0..records {
        f.read_exact_at(&mut buf, offset(k, rank, size))
            .map_err(|e| err("pread", file, e))?;
        if !pattern.is_item(k, RECORD_BYTES, &buf) {
            return Err(err(
                "check",
                file,
                format!("record {k} of rank {rank} differs"),
            ));
        }
    }
    Ok(())
}
