//! An incremental store: each rank's stream of CHUNKS chunks stored, 5% of its chunks changed,
//! and stored again as the aggregate's next version, which should write little more than the
//! changed chunks. Both versions are then read back and checked.

use crate::data::{drop_cache, err, remove};
use crate::phase::{agree, timed};
use mfu_benches::Rng;
use std::path::Path;
use steal::Comm;

/// The chunk size of the incremental store: 1 MiB (bytes), fixed so that the changed chunks
/// are known.
pub const CHUNK: usize = 1 << 20;
/// One chunk in this many is changed between the versions (5%).
pub const CHANGED_ONE_IN: u64 = 20;

/// The stream of `rank`.
fn name(rank: usize) -> String {
    format!("rank{rank}/state")
}

/// Store version 1 and 2 of every rank's `chunks` chunks at `dir/state.pfa`, read both back:
/// the report's fields (`full_bytes`, `written_bytes` of version 2, `growth_bytes`: how much
/// the file grew for it, index included).
pub fn run(comm: &dyn Comm, dir: &Path, chunks: u64) -> Result<String, String> {
    let rank = comm.rank();
    let file = dir.join("state.pfa");
    agree(comm, if rank == 0 { remove(&file) } else { Ok(()) })?;
    let mut v1 = vec![0u8; chunks as usize * CHUNK];
    Rng(0x1AC_0000 + rank as u64).fill(&mut v1);
    let mut v2 = v1.clone();
    for c in (0..chunks).filter(|c| c % CHANGED_ONE_IN == 0) {
        v2[c as usize * CHUNK + 100] ^= 0xFF;
    }
    let options = pfa::Options {
        chunk_size: Some(CHUNK as u64),
        ..Default::default()
    };
    let store = |data: &[u8], first: bool| -> Result<(f64, String), String> {
        let agg = if first {
            pfa::Aggregate::create(comm, &file, &options)
        } else {
            pfa::Aggregate::new_version(comm, &file, &options)
        };
        let mut agg = agg.map_err(|e| e.to_string())?;
        let written = agg
            .write_stream(name(rank).as_bytes(), b"", data)
            .map_err(|e| e.to_string());
        crate::pfa_close::close(comm, agg, written)
    };
    let ((_, _), write1_s) = timed(comm, || store(&v1, true))?;
    let len1 = agree(
        comm,
        std::fs::metadata(&file).map_err(|e| err("stat", &file, e)),
    )?
    .len();
    let ((_, fields2), write2_s) = timed(comm, || store(&v2, false))?;
    let len2 = agree(
        comm,
        std::fs::metadata(&file).map_err(|e| err("stat", &file, e)),
    )?
    .len();
    agree(comm, drop_cache(&file))?;
    let ((), read_s) = timed(comm, || {
        let index = pfa::Index::open(&file).map_err(|e| e.to_string())?;
        for (version, want) in [(1, &v1), (2, &v2)] {
            let got = index
                .read_stream(name(rank).as_bytes(), version)
                .map_err(|e| e.to_string())?;
            if got != *want {
                return Err(err(
                    "check",
                    &file,
                    format!("version {version} of rank {rank} differs"),
                ));
            }
        }
        Ok(())
    })?;
    agree(comm, if rank == 0 { remove(&file) } else { Ok(()) })?;
    let full = chunks * CHUNK as u64 * comm.size() as u64;
    Ok(format!(
        "workload=incremental chunks={chunks} full_bytes={full} growth_bytes={} \
         write1_s={write1_s:.6} write2_s={write2_s:.6} read_s={read_s:.6} versions_checked=2{fields2}",
        len2 - len1
    ))
}
