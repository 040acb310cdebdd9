//! `cargo xtask bench section pfa [--quick] [--fs LIST] [--np LIST] [--launch LIST] [--records K]
//! [--small-files N] [--chunks N] [--runs N]` (issue 36): parallel file aggregation (`mfu-pfa`)
//! against files, with the workloads of `benches/pfa` (the binary `mfu-pfa-bench`, built in
//! release with the feature `pfa`, or `MFU_PFA_BENCH_BIN`).
//!
//! - **records**, the seed's benchmark: each rank writes K records of 272,383 bytes, then reads
//!   them back and checks them; N-N (a file per rank), N-1 plain (one shared file, records
//!   interleaved, `pwrite`), N-1 PFA (an aggregate, a stream per rank) and on disk also PFA
//!   with `O_DIRECT`; at 2, 4, 8 and 16 ranks, under `mpirun` and as thread ranks.
//! - **small**: 10^5 logical files of 1-8 KiB from 2 ranks, as files (1,000 a directory, one
//!   `syncfs` per rank) against the streams of one aggregate: time and file count. On disk each
//!   run's files are moved aside, not removed, until the section ends (ext4 makes files slowly
//!   for a minute after a removal): up to 10 trees of 10^5 files, about 5 GB, at the full size.
//! - **incremental**: 2 ranks each store 40 chunks of 1 MiB, change 5% of them and store the
//!   next version: the bytes the file grew by for it (index included) / the full size.
//! - **tar interop** (when the measured `mfu-rs` has the `pfa` command): the small files as a
//!   tree of 4 KiB files packed once by `mfu-rs pfa pack`; `pfa unpack` then `mfu-rs tar -c`
//!   against GNU `tar -cf` and `mfu-rs tar -c` of the files (`pfa_tar.rs`).
//!
//! Each run's phases are timed inside the binary (from a barrier to the last rank's end, every
//! file synced before the clock stops, the page cache dropped for the written files before the
//! read phase), so `mpirun`'s start-up is not in the numbers. Runs of the layouts compared are
//! interleaved (N-N, N-1, PFA, N-N, ...), `sync(1)` before each run on disk; the tables give
//! medians, and each ratio is the median of the ratios within a round (one run of each
//! layout), so a slow minute of this shared machine slows both sides of a ratio alike. On
//! tmpfs (`/dev/shm`) and the workspace's disk (`target/bench-data`). The tables go to stdout
//! and `target/bench/pfa.md`, with the targets marked ✓ or ✗.

use super::fsutil::{flush_fs, remove};
use super::measure::{loadavg, median};
use super::pfa_table::{self, IncrementalRow, RecordsRow, SmallRow, Spread};
use super::pfa_tar;
use super::workload::Fs;
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// How the ranks of a run are started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launch {
    /// `mpirun -np N mfu-pfa-bench ...`: a process per rank, MPI between them.
    Mpirun,
    /// `mfu-pfa-bench --ranks N ...`: N thread ranks of one process.
    Threads,
}

impl Launch {
    /// The name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Launch::Mpirun => "mpirun",
            Launch::Threads => "threads",
        }
    }

    fn parse(s: &str) -> Option<Launch> {
        [Launch::Mpirun, Launch::Threads]
            .into_iter()
            .find(|l| l.name() == s)
    }
}

/// What the section is asked.
#[derive(Debug, PartialEq)]
pub struct Opts {
    /// Tiny sizes, one run, tmpfs, 2 ranks: a smoke test of the section.
    pub quick: bool,
    /// File systems, in order.
    pub fs: Vec<Fs>,
    /// Rank counts of the records rows.
    pub nps: Vec<usize>,
    /// Launches of every row.
    pub launches: Vec<Launch>,
    /// Records per rank (K).
    pub records: u64,
    /// Logical files of the small rows (all ranks).
    pub small_files: u64,
    /// Chunks of 1 MiB per rank of the incremental rows.
    pub chunks: u64,
    /// Runs of each case (interleaved).
    pub runs: usize,
}

/// The full size: about 35 MB per rank per run (557 MB at 16 ranks).
const FULL: Opts = Opts {
    quick: false,
    fs: Vec::new(),
    nps: Vec::new(),
    launches: Vec::new(),
    records: 128,
    small_files: 100_000,
    chunks: 40,
    runs: 5,
};

fn list<T>(arg: Option<&String>, what: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>> {
    let l = arg.with_context(|| format!("{what} needs a comma list"))?;
    l.split(',')
        .map(|x| parse(x).with_context(|| format!("{what}: unknown {x:?}")))
        .collect()
}

fn count(arg: Option<&String>, what: &str) -> Result<u64> {
    let n = arg.with_context(|| format!("{what} needs a count"))?;
    n.parse()
        .ok()
        .filter(|&n| n > 0)
        .with_context(|| format!("{what}: a count above 0, not {n:?}"))
}

/// Parse the section's options; the others' defaults are the full size's, or `--quick`'s.
pub fn parse(args: &[String]) -> Result<Opts> {
    let quick = args.iter().any(|a| a == "--quick");
    let mut o = Opts {
        fs: if quick {
            vec![Fs::Tmpfs]
        } else {
            Fs::ALL.to_vec()
        },
        nps: if quick { vec![2] } else { vec![2, 4, 8, 16] },
        launches: vec![Launch::Mpirun, Launch::Threads],
        quick,
        ..FULL
    };
    if quick {
        (o.records, o.small_files, o.chunks, o.runs) = (2, 2_000, 20, 1);
    }
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => {}
            "--fs" => o.fs = list(it.next(), "--fs", Fs::parse)?,
            "--np" => {
                o.nps = list(it.next(), "--np", |n| n.parse().ok().filter(|&n| n > 0))?;
            }
            "--launch" => o.launches = list(it.next(), "--launch", Launch::parse)?,
            "--records" => o.records = count(it.next(), "--records")?,
            "--small-files" => o.small_files = count(it.next(), "--small-files")?,
            "--chunks" => o.chunks = count(it.next(), "--chunks")?,
            "--runs" => o.runs = count(it.next(), "--runs")? as usize,
            x => bail!(
                "pfa: unknown option {x:?} (--quick, --fs tmpfs,disk, --np LIST, \
                 --launch mpirun,threads, --records K, --small-files N, --chunks N, --runs N)"
            ),
        }
    }
    Ok(o)
}

/// The options of this section that take a value (for `sections::run`'s split of the
/// arguments).
pub const VALUE_OPTIONS: &[&str] = &[
    "--fs",
    "--np",
    "--launch",
    "--records",
    "--small-files",
    "--chunks",
    "--runs",
];

/// One report line of `mfu-pfa-bench`: its `key=value` fields.
#[derive(Clone, Debug, Default)]
pub struct Fields(BTreeMap<String, String>);

impl Fields {
    /// The fields of `line`.
    pub fn parse(line: &str) -> Fields {
        Fields(
            line.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Field `key` as a number.
    pub fn num(&self, key: &str) -> Result<f64> {
        self.0
            .get(key)
            .with_context(|| format!("no {key} in the bench's report {:?}", self.0))?
            .parse()
            .with_context(|| format!("{key} is not a number"))
    }

    /// Field `key` as text ("" when missing).
    pub fn text(&self, key: &str) -> &str {
        self.0.get(key).map_or("", String::as_str)
    }
}

/// Runs `mfu-pfa-bench` at `np` ranks started by `launch`.
struct Runner {
    bin: PathBuf,
    fs: Fs,
}

impl Runner {
    /// One run of `args` (the workload's, its directory included): its report.
    fn run(&self, launch: Launch, np: usize, args: &[&str]) -> Result<Fields> {
        if self.fs == Fs::Disk {
            // The previous run's data written back before this one starts.
            flush_fs()?;
        }
        let np_s = np.to_string();
        let mut cmd = match launch {
            Launch::Mpirun => {
                let mut c = Command::new("mpirun");
                crate::mpi_env(&mut c).args(["-np", &np_s]).arg(&self.bin);
                c
            }
            Launch::Threads => {
                let mut c = Command::new(&self.bin);
                c.args(["--ranks", &np_s]);
                c
            }
        };
        cmd.args(args).stdin(Stdio::null());
        let out = cmd
            .output()
            .with_context(|| format!("start {}", self.bin.display()))?;
        ensure!(
            out.status.success(),
            "{} {} at {np} ranks ({}) failed: {}\n{}",
            self.bin.display(),
            args.join(" "),
            launch.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
        let line = String::from_utf8_lossy(&out.stdout);
        Ok(Fields::parse(line.lines().last().unwrap_or("")))
    }
}

/// The bench binary: `MFU_PFA_BENCH_BIN`, or built now in release.
fn bench_binary(root: &Path) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("MFU_PFA_BENCH_BIN") {
        let path = std::path::absolute(PathBuf::from(path))?;
        ensure!(
            path.is_file(),
            "MFU_PFA_BENCH_BIN={} is not a file",
            path.display()
        );
        return Ok(path);
    }
    crate::run(crate::cargo().current_dir(root).args([
        "build",
        "--release",
        "-p",
        "mfu-benches",
        "--features",
        "pfa",
        "--bin",
        "mfu-pfa-bench",
    ]))?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|t| root.join(t))
        .unwrap_or_else(|| root.join("target"));
    Ok(target.join("release/mfu-pfa-bench"))
}

/// The section's directory on `fs`.
fn base(fs: Fs, data: &Path) -> PathBuf {
    let me = format!("pfa-{}", std::process::id());
    match fs {
        Fs::Tmpfs => PathBuf::from("/dev/shm/mfu-rs-bench").join(me),
        Fs::Disk => data.join(me),
    }
}

/// Entry point of `cargo xtask bench section pfa ...`; `data` is the sections' directory on the
/// workspace's disk.
pub fn bench_pfa(b: &str, root: &Path, data: &Path, args: &[String]) -> Result<()> {
    let opts = parse(args)?;
    let bin = bench_binary(root)?;
    let started = Instant::now();
    let load_before = loadavg();
    let mut records = Vec::new();
    let mut small = Vec::new();
    let mut incremental = Vec::new();
    let mut tar = Vec::new();
    let mut tar_note = (!pfa_tar::has_pfa(b))
        .then(|| format!("{b} has no `pfa` command (built without the pfa tool): not measured"));
    for &fs in &opts.fs {
        let dir = base(fs, data);
        std::fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        let runner = Runner {
            bin: bin.clone(),
            fs,
        };
        let result = (|| -> Result<()> {
            for &np in &opts.nps {
                for &launch in &opts.launches {
                    records.push(records_row(&runner, &opts, &dir, launch, np)?);
                }
            }
            for &launch in &opts.launches {
                small.push(small_row(&runner, &opts, &dir, launch)?);
            }
            incremental.push(incremental_row(&runner, &opts, &dir)?);
            if tar_note.is_none() {
                // The tool's part: its failure is reported in the table, the rest kept.
                match pfa_tar::run(b, &dir, fs, opts.small_files, opts.runs) {
                    Ok(rows) => tar.push(rows),
                    Err(e) => tar_note = Some(format!("failed on {}: {e:#}", fs.name())),
                }
                eprintln!("bench pfa: tar interop {} done", fs.name());
            }
            Ok(())
        })();
        remove(&dir)?;
        if let Some(parent) = dir.parent() {
            // Fails, as it should, while another run's directory is still there.
            let _ = std::fs::remove_dir(parent);
        }
        result?;
    }
    let md = pfa_table::markdown(&pfa_table::Report {
        context: format!(
            "{} runs each, interleaved; K = {} records of 272,383 bytes per rank; {} small \
             files from 2 ranks; incremental: 2 ranks × {} chunks of 1 MiB{}; load average \
             before {load_before}, after {}; section wall time {:.0} s",
            opts.runs,
            opts.records,
            opts.small_files,
            opts.chunks,
            if opts.quick { " (--quick)" } else { "" },
            loadavg(),
            started.elapsed().as_secs_f64()
        ),
        records,
        small,
        incremental,
        tar,
        tar_note,
    });
    print!("\n{md}");
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("pfa.md"), &md)?;
    eprintln!("bench: wrote {}", out.join("pfa.md").display());
    Ok(())
}

/// The values of field `key` over the runs.
fn spread(runs: &[Fields], key: &str) -> Result<Spread> {
    let v = runs
        .iter()
        .map(|f| f.num(key))
        .collect::<Result<Vec<_>>>()?;
    Ok(Spread::of(v))
}

/// The median of the ratios `a / b` of field `key`, one a round.
fn paired(a: &[Fields], b: &[Fields], key: &str) -> Result<f64> {
    let ratios = a
        .iter()
        .zip(b)
        .map(|(x, y)| Ok(x.num(key)? / y.num(key)?))
        .collect::<Result<Vec<_>>>()?;
    Ok(median(ratios))
}

fn records_row(r: &Runner, o: &Opts, dir: &Path, launch: Launch, np: usize) -> Result<RecordsRow> {
    let mut layouts = vec!["nn", "n1", "pfa"];
    if r.fs == Fs::Disk {
        layouts.push("pfa-direct");
    }
    let (d, k) = (
        dir.to_str().context("UTF-8 bench path")?,
        o.records.to_string(),
    );
    let mut runs: Vec<Vec<Fields>> = vec![Vec::new(); layouts.len()];
    for _ in 0..o.runs {
        for (i, layout) in layouts.iter().enumerate() {
            runs[i].push(r.run(launch, np, &["records", layout, d, &k])?);
        }
    }
    eprintln!(
        "bench pfa: records {} {} np {np} done",
        r.fs.name(),
        launch.name()
    );
    let direct = runs.get(3);
    Ok(RecordsRow {
        fs: r.fs.name(),
        launch: launch.name(),
        np,
        write: runs
            .iter()
            .map(|f| spread(f, "write_mb_s"))
            .collect::<Result<_>>()?,
        read: runs
            .iter()
            .map(|f| spread(f, "read_mb_s"))
            .collect::<Result<_>>()?,
        finish_s: runs
            .iter()
            .map(|f| spread(f, "finish_s"))
            .collect::<Result<_>>()?,
        pfa_vs_nn: paired(&runs[2], &runs[0], "write_mb_s")?,
        pfa_vs_n1: paired(&runs[2], &runs[1], "write_mb_s")?,
        direct_io: direct.map(|f| f[0].text("direct_io") == "true"),
        chunk_size: runs[2][0].num("chunk_size")? as u64,
    })
}

fn small_row(r: &Runner, o: &Opts, dir: &Path, launch: Launch) -> Result<SmallRow> {
    let (d, n) = (
        dir.to_str().context("UTF-8 bench path")?,
        o.small_files.to_string(),
    );
    let (mut files, mut pfa) = (Vec::new(), Vec::new());
    for run in 0..o.runs {
        if r.fs == Fs::Disk {
            // Moved aside, not removed (until the section's end): ext4 makes files slowly for
            // a minute after a tree was removed (it skips the inodes just freed), which would
            // charge each run for the removal of the one before.
            files.push(r.run(launch, 2, &["small", "files", d, &n, "--keep"])?);
            let aside = dir.join(format!("aside-{}-{run}", launch.name()));
            std::fs::rename(dir.join("files"), &aside)
                .with_context(|| format!("move the small files aside to {}", aside.display()))?;
        } else {
            files.push(r.run(launch, 2, &["small", "files", d, &n])?);
        }
        pfa.push(r.run(launch, 2, &["small", "pfa", d, &n])?);
    }
    eprintln!("bench pfa: small {} {} done", r.fs.name(), launch.name());
    Ok(SmallRow {
        fs: r.fs.name(),
        launch: launch.name(),
        logical: o.small_files,
        bytes: files[0].num("bytes")? as u64,
        files_write_s: spread(&files, "write_s")?,
        files_sync_s: spread(&files, "finish_s")?,
        files_read_s: spread(&files, "read_s")?,
        files_entries: files[0].num("files")? as u64,
        pfa_write_s: spread(&pfa, "write_s")?,
        pfa_close_s: spread(&pfa, "finish_s")?,
        pfa_read_s: spread(&pfa, "read_s")?,
        pfa_entries: pfa[0].num("files")? as u64,
        speedup: paired(&files, &pfa, "write_s")?,
    })
}

fn incremental_row(r: &Runner, o: &Opts, dir: &Path) -> Result<IncrementalRow> {
    let (d, c) = (
        dir.to_str().context("UTF-8 bench path")?,
        o.chunks.to_string(),
    );
    let runs = (0..o.runs)
        .map(|_| r.run(Launch::Threads, 2, &["incremental", d, &c]))
        .collect::<Result<Vec<_>>>()?;
    let last = runs.last().context("no run")?;
    Ok(IncrementalRow {
        fs: r.fs.name(),
        full_bytes: last.num("full_bytes")? as u64,
        written_bytes: last.num("written_bytes")? as u64,
        growth_bytes: last.num("growth_bytes")? as u64,
        chunks_written: last.num("chunks_written")? as u64,
        chunks_reused: last.num("chunks_reused")? as u64,
        write1_s: spread(&runs, "write1_s")?,
        write2_s: spread(&runs, "write2_s")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: &[&str]) -> Result<Opts> {
        parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options_default_to_the_full_size_and_quick_to_a_tiny_one() {
        let full = a(&[]).unwrap();
        assert_eq!(full.nps, [2, 4, 8, 16]);
        assert_eq!(full.fs, [Fs::Tmpfs, Fs::Disk]);
        assert_eq!(
            (full.records, full.small_files, full.runs),
            (128, 100_000, 5)
        );
        let q = a(&["--quick", "--runs", "2"]).unwrap();
        assert_eq!(
            (q.fs, q.nps, q.records, q.runs),
            (vec![Fs::Tmpfs], vec![2], 2, 2)
        );
        let o = a(&["--np", "2,8", "--launch", "threads", "--fs", "disk"]).unwrap();
        assert_eq!(
            (o.nps, o.launches, o.fs),
            (vec![2, 8], vec![Launch::Threads], vec![Fs::Disk])
        );
        assert!(a(&["--np", "0"]).is_err());
        assert!(a(&["--launch", "srun"]).is_err());
        assert!(a(&["--bogus"]).is_err());
    }

    #[test]
    fn a_report_line_gives_its_fields() {
        let f = Fields::parse("ranks=2 workload=records write_mb_s=12.5 direct_io=true\n");
        assert_eq!(f.num("write_mb_s").unwrap(), 12.5);
        assert_eq!(f.text("direct_io"), "true");
        assert!(f.num("read_mb_s").is_err());
    }
}
