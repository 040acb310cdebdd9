//! The out-of-core sort's memory rows (issue 34), opt-in: a synthetic v4 list of N records
//! (`cargo xtask gen-list`, no tree) sorted by name under `mpirun -np 2` with
//! `--memory-limit` (512M by default), each rank's peak resident set measured as the memory
//! rows measure it ([`super::memory`]); beside it the in-memory sort (no limit that binds) of
//! min(N, 10^7) records and the limited sort of the same list, whose outputs must be
//! byte-identical, and the time per record of both.
//!
//! `cargo xtask bench spill-sort [--records N] [--limit SIZE] [--dir DIR]`; the whole bench
//! adds the rows with `--spill-sort-records N`. Disk: the list is N × 144 bytes, written
//! once, and the run needs as much again for the output and twice that in spill files
//! (10^8 records: about 58 GB free on DIR, default `target/bench-spill` on the workspace's
//! disk, so that tmpfs does not count in memory). Time: at 10^6 records (`--limit 8M`, the
//! same runs per rank as 10^8 at 512M) the rows take 32 s with a debug build on this 2-core VM;
//! 10^8 (not run here: 16 GB free) writes and reads about 58 GB, so expect it to be bound by
//! the disk: at this VM's ~180 MB/s writeback, about an hour.

use super::fsutil::{remove, s};
use super::memory::{Ctx, MemRow};
use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;
use std::path::Path;

/// Records above which the in-memory comparison is not run (it holds the list in memory).
pub const COMPARE_MAX: u64 = 10_000_000;

/// The rows and the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct SpillSort {
    /// The memory limit given to the limited sorts.
    pub limit: String,
    /// The limited sort of N records, the in-memory sort and the limited sort of the compared
    /// list (when N is above [`COMPARE_MAX`]).
    pub rows: Vec<MemRow>,
    /// Records of the list sorted both ways.
    pub compared: u64,
    /// The two outputs are byte-identical.
    pub equal: bool,
    /// The limited sort spilled (its report says "Spilled").
    pub spilled: bool,
}

/// Run the rows: `records` records, `limit` per rank, lists and spill files under `dir`.
pub fn run(bin: &Path, dir: &Path, records: u64, limit: &str) -> Result<SpillSort> {
    std::fs::create_dir_all(dir)?;
    let wrapper = dir.join("xtask-rss-wrap");
    std::fs::copy("/proc/self/exe", &wrapper)
        .with_context(|| format!("copy this xtask binary to {}", wrapper.display()))?;
    let ctx = Ctx {
        bin,
        wrapper: wrapper.clone(),
        rss: dir.join("rss"),
        files: records,
        mpi: true,
    };
    let spill = dir.join("spill");
    std::fs::create_dir_all(&spill)?;
    let sp = s(&spill);
    let list = |n: u64| -> Result<std::path::PathBuf> {
        let p = dir.join(format!("in-{n}.mfu"));
        if !p.exists() {
            crate::gen_list::write_list(&p, n, 0)?;
        }
        Ok(p)
    };
    let sort = |ctx: &Ctx, op: &str, input: &Path, out: &Path, lim: &str| -> Result<MemRow> {
        let args = [
            "walk",
            "-i",
            s(input),
            "-s",
            "name",
            "-o",
            s(out),
            "--memory-limit",
            lim,
            "--tmpdir",
            sp,
        ];
        ctx.mfu(op, 2, &args, || remove(out))
    };
    let mut rows = Vec::new();
    let input = list(records)?;
    let limited = dir.join("out-limited.mfu");
    rows.push(sort(&ctx, "sort, limited", &input, &limited, limit)?);
    let compared = records.min(COMPARE_MAX);
    let small = Ctx {
        files: compared,
        ..ctx
    };
    let small_input = list(compared)?;
    let spilled = spilled_by(bin, &small_input, limit, sp)?;
    let small_limited = if compared == records {
        limited.clone()
    } else {
        let out = dir.join("out-limited-small.mfu");
        rows.push(sort(&small, "sort, limited", &small_input, &out, limit)?);
        out
    };
    let in_memory = dir.join("out-in-memory.mfu");
    rows.push(sort(
        &small,
        "sort, in memory",
        &small_input,
        &in_memory,
        "1T",
    )?);
    let equal = same_bytes(&small_limited, &in_memory)? && same_bytes(&in_memory, &small_limited)?;
    for p in [&limited, &small_limited, &in_memory, &input, &small_input] {
        remove(p)?;
    }
    remove(&small.rss)?;
    remove(&wrapper)?;
    Ok(SpillSort {
        limit: limit.to_string(),
        rows,
        compared,
        equal,
        spilled,
    })
}

/// Whether the limited sort of `input` (the compared list: N's spills if it does) spills: one
/// untimed run under `mpirun -np 2` with the same limit, whose report says so.
fn spilled_by(bin: &Path, input: &Path, limit: &str, tmpdir: &str) -> Result<bool> {
    let out = input.with_extension("probe.mfu");
    let o = crate::mpi_env(&mut std::process::Command::new("mpirun"))
        .args(["-np", "2"])
        .arg(bin)
        .args(["walk", "-i", s(input), "-s", "name", "-o", s(&out)])
        .args(["--memory-limit", limit, "--tmpdir", tmpdir])
        .output()?;
    remove(&out)?;
    ensure!(
        o.status.success(),
        "the limited sort failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(String::from_utf8_lossy(&o.stdout).contains("Spilled:"))
}

/// Two files hold the same bytes (compared in pieces: they may be larger than memory).
fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    use std::io::Read;
    let (mut x, mut y) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    if x.metadata()?.len() != y.metadata()?.len() {
        return Ok(false);
    }
    let (mut p, mut q) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = x.read(&mut p)?;
        if n == 0 {
            return Ok(true);
        }
        y.read_exact(&mut q[..n])?;
        if p[..n] != q[..n] {
            return Ok(false);
        }
    }
}

/// The rows as markdown.
pub fn markdown(r: &SpillSort) -> String {
    let mut o =
        format!(
        "\n**Out-of-core sort** (issue 34): a synthetic v4 list (`cargo xtask gen-list`, 60-byte \
         paths) sorted by name (`walk -i LIST -s name -o OUT`) under `mpirun -np 2`, each rank's \
         own peak resident set; the limited sort {} at `--memory-limit {}` (target: each rank ≤ \
         600 MB at 512M, time per record within 2× of the in-memory sort); its output of {} \
         records {} the in-memory sort's:\n\n",
        if r.spilled { "spilled" } else { "did NOT spill" },
        r.limit,
        r.compared,
        if r.equal { "is byte-identical to" } else { "DIFFERS from" },
    );
    o.push_str(
        "| sort | records | ranks' peaks | time | per 10^6 records |\n|---|---|---|---|---|\n",
    );
    for row in &r.rows {
        let peaks: Vec<String> = row
            .per_rank_kib
            .iter()
            .map(|k| format!("{:.1}", *k as f64 * 1024.0 / 1e6))
            .collect();
        o.push_str(&format!(
            "| {} | {} | {} MB | {:.1} s | {:.2} s |\n",
            row.op,
            row.files,
            peaks.join(" + "),
            row.secs,
            row.secs * 1e6 / row.files.max(1) as f64
        ));
    }
    o
}

/// `cargo xtask bench spill-sort [--records N] [--limit SIZE] [--dir DIR]`.
pub fn main(args: &[String], bin: &Path, root: &Path) -> Result<()> {
    let (mut records, mut limit) = (100_000_000u64, "512M".to_string());
    let mut dir = root.join("target/bench-spill");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--records" => records = value()?.parse().context("--records")?,
            "--limit" => limit = value()?.clone(),
            "--dir" => dir = value()?.into(),
            x => bail!("unknown option {x:?}: cargo xtask bench spill-sort [--records N] [--limit SIZE] [--dir DIR]"),
        }
    }
    let t = std::time::Instant::now();
    let r = run(bin, &dir, records, &limit);
    // Whatever happened: the lists are as big as the records asked for.
    let _ = std::fs::remove_dir_all(&dir);
    let r = r?;
    print!("{}", markdown(&r));
    eprintln!("bench: spill-sort took {:.0} s", t.elapsed().as_secs_f64());
    ensure!(
        r.equal,
        "the limited sort's output differs from the in-memory sort's"
    );
    Ok(())
}
