//! `mfu-pfa-bench`: the workloads of `cargo xtask bench section pfa` (issue 36), run as every rank
//! of one launch: under `mpirun -np N`, or as `--ranks N` thread ranks of this one process.
//!
//! ```text
//! mfu-pfa-bench [--ranks N] records nn|n1|pfa|pfa-direct DIR K
//! mfu-pfa-bench [--ranks N] small files|pfa DIR FILES [--keep]
//! mfu-pfa-bench [--ranks N] incremental DIR CHUNKS
//! ```
//!
//! - `records`: the seed's benchmark. Each rank writes K records of 272,383 bytes, then reads
//!   them back and checks every byte: `nn`, a file per rank; `n1`, one shared file with the
//!   records of all ranks interleaved (`pwrite` at offsets each rank computes); `pfa`, one
//!   aggregate with a stream per rank ([`pfa`]); `pfa-direct`, the same with `O_DIRECT`.
//! - `small`: FILES logical files of 1-8 KiB spread over the ranks, written as files
//!   (1,000 a directory) or as the streams of one aggregate, then read back and checked;
//!   `--keep` leaves them in DIR (`files` or `small.pfa`) for the caller to move aside: on ext4,
//!   files made within a minute of removing a tree skip its freed inodes and are slower to
//!   make, which would charge the next run for this one's removal.
//! - `incremental`: each rank's stream of CHUNKS chunks of 1 MiB, stored, then 5% of its chunks
//!   changed and stored again as the aggregate's next version; both versions read back.
//!
//! Every written file is synced before its phase's clock stops, and dropped from the page cache
//! before the read phase (`posix_fadvise(DONTNEED)`; nothing on tmpfs). Each phase is timed on
//! rank 0 from a barrier to the moment every rank is done. Rank 0 prints one line of
//! `key=value` fields on stdout; exit 0 when every rank read back what it wrote, 1 otherwise
//! (the rank's error on stderr), 2 on a usage error. The directory is emptied of what the run
//! wrote before it exits (but with `--keep`).

mod data;
mod incremental;
mod pfa_close;
mod phase;
mod records;
mod records_pfa;
mod small;
mod small_pfa;

use std::path::PathBuf;
use steal::Comm;

const USAGE: &str = "usage: mfu-pfa-bench [--ranks N] records nn|n1|pfa|pfa-direct DIR K
       mfu-pfa-bench [--ranks N] small files|pfa DIR FILES [--keep]
       mfu-pfa-bench [--ranks N] incremental DIR CHUNKS";

/// What one run does.
#[derive(Clone, Debug)]
enum Workload {
    Records(records::Layout, u64),
    /// The store, the logical files, whether to keep them.
    Small(small::Store, u64, bool),
    Incremental(u64),
}

fn usage(why: &str) -> ! {
    eprintln!("mfu-pfa-bench: {why}\n{USAGE}");
    std::process::exit(2)
}

fn parse(args: &[String]) -> (Option<usize>, Workload, PathBuf) {
    let mut args = args;
    let mut ranks = None;
    if args.first().map(String::as_str) == Some("--ranks") {
        let n = args.get(1).and_then(|n| n.parse().ok()).filter(|&n| n > 0);
        ranks = Some(n.unwrap_or_else(|| usage("--ranks needs a count above 0")));
        args = &args[2..];
    }
    let count = |s: Option<&String>| -> u64 {
        s.and_then(|n| n.parse().ok())
            .unwrap_or_else(|| usage("the last argument is a count"))
    };
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["records", layout, dir, _] => {
            let layout = records::Layout::parse(layout)
                .unwrap_or_else(|| usage(&format!("unknown records layout {layout:?}")));
            (
                ranks,
                Workload::Records(layout, count(args.get(3))),
                dir.into(),
            )
        }
        ["small", store, dir, _] | ["small", store, dir, _, "--keep"] => {
            let store = small::Store::parse(store)
                .unwrap_or_else(|| usage(&format!("unknown small-file store {store:?}")));
            let keep = args.len() == 5;
            (
                ranks,
                Workload::Small(store, count(args.get(3)), keep),
                dir.into(),
            )
        }
        ["incremental", dir, _] => (ranks, Workload::Incremental(count(args.get(2))), dir.into()),
        _ => usage("unknown arguments"),
    }
}

/// This rank's part of `w` in `dir`: rank 0's report line, or what went wrong.
fn run(comm: &dyn Comm, w: &Workload, dir: &std::path::Path) -> Result<String, String> {
    let fields = match *w {
        Workload::Records(layout, k) => records::run(comm, layout, dir, k)?,
        Workload::Small(store, n, keep) => small::run(comm, store, dir, n, keep)?,
        Workload::Incremental(chunks) => incremental::run(comm, dir, chunks)?,
    };
    Ok(format!("ranks={} {fields}", comm.size()))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (ranks, workload, dir) = parse(&args);
    let results = steal::launch::run(ranks, |comm| {
        let r = run(comm, &workload, &dir);
        if let Err(e) = &r {
            eprintln!("mfu-pfa-bench: rank {}: {e}", comm.rank());
        }
        if comm.rank() == 0 {
            if let Ok(line) = &r {
                println!("{line}");
            }
        }
        r.is_ok()
    })
    .unwrap_or_else(|e| {
        eprintln!("mfu-pfa-bench: launch: {e}");
        std::process::exit(1)
    });
    std::process::exit(if results.iter().all(|&ok| ok) { 0 } else { 1 });
}
