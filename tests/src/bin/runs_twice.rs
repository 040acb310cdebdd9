//! Several runs in one process, as an embedding service makes them: `launch::run` twice, then
//! the `cp` tool twice through `mfu::main_with_args`, then `launch::run` once more. Under a
//! launcher, MPI is initialised by the first run and reused by every later one.
//!
//! `mfu-runs-twice SRC DST1 DST2`: copies SRC to DST1 and to DST2; rank 0 prints
//! `ok 5 runs on N ranks`. With `--own-mpi` first, the program initialises MPI itself (as
//! mpi4py or a C host would) and finalises it at the end: the runs use that MPI and never
//! finalise it themselves.

use std::ffi::OsString;
use steal::{Comm, CommExt};

/// One run of the runtime: its ranks agree on a value from every rank. Returns this process's
/// first rank and the number of ranks.
fn collective_run(round: u64) -> Result<(usize, usize), String> {
    let results = steal::launch::run(None, |comm: &dyn Comm| {
        let sum = comm.sum(round + comm.rank() as u64);
        let n = comm.size() as u64;
        (sum == round * n + n * (n - 1) / 2, comm.rank(), comm.size())
    })
    .map_err(|e| format!("run {round}: {e}"))?;
    match results.as_slice() {
        [(true, rank, size), ..] => Ok((*rank, *size)),
        _ => Err(format!("run {round}: the ranks disagree: {results:?}")),
    }
}

/// `mfu-rs cp SRC DST` through the library's command line.
fn cp(src: &OsString, dst: &OsString) -> Result<(), String> {
    let args = vec!["mfu-rs".into(), "cp".into(), src.clone(), dst.clone()];
    match mfu::main_with_args(args) {
        0 => Ok(()),
        code => Err(format!("cp to {}: exit {code}", dst.to_string_lossy())),
    }
}

fn runs(paths: &[OsString]) -> Result<(usize, usize), String> {
    let [src, dst1, dst2] = paths else {
        return Err("usage: mfu-runs-twice [--own-mpi] SRC DST1 DST2".into());
    };
    collective_run(1)?;
    collective_run(2)?;
    cp(src, dst1)?;
    cp(src, dst2)?;
    collective_run(3)
}

fn main() {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let own = args.first().is_some_and(|a| a == "--own-mpi");
    if own {
        args.remove(0);
    }
    // The host's MPI, finalised when it is dropped at the end of main.
    let universe = if own {
        Some(mpi::initialize().expect("MPI initialised by the host first"))
    } else {
        None
    };
    let code = match runs(&args) {
        Ok((rank, size)) => {
            if rank == 0 {
                println!("ok 5 runs on {size} ranks");
            }
            0
        }
        Err(e) => {
            eprintln!("mfu-runs-twice: {e}");
            1
        }
    };
    drop(universe);
    std::process::exit(code);
}
