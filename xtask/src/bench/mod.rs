//! `cargo xtask bench`: mfu-rs against the tools users would otherwise pick, side by side in one
//! run, with reproducible workloads; and `cargo xtask bench section NAME...`, the older detailed
//! studies (see `sections.rs`).
//!
//! The comparison (`matrix.rs`) makes four workloads (`workload.rs`) on tmpfs and on the
//! workspace's disk, runs eight operations on each (`ops.rs`) with mfu-rs at np 1 and under
//! `mpirun -np 2` and with every peer found (`cp -a`, `rsync -a`, `xcp`, GNU `tar`, `rm -rf`,
//! `find`, `du`), interleaving the runs and taking medians (`measure.rs`). It also counts the
//! system calls of the small-file copy (`syscalls.rs`), times start-up and measures a walk's
//! peak memory per million files (`probes.rs`). It writes `target/bench/bench.md` (the tables,
//! also printed), `bench.json` (every run) and `bench.svg` (`chart.rs`); with `--publish` it
//! copies them to `docs/bench/` and puts the table into the README between its bench markers.

mod chart;
mod deep;
mod fsutil;
mod gen;
mod matrix;
mod measure;
mod memory;
mod ops;
mod pfa;
mod pfa_table;
mod pfa_tar;
mod probes;
mod ranks;
mod report;
mod resume;
mod resume_all;
mod sections;
mod spill_sort;
mod syscalls;
mod tar_gz;
mod tar_select;
mod verify;
mod workload;

use crate::root;
use anyhow::{bail, ensure, Context, Result};
use ops::Op;
use report::Report;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use workload::{Fs, Kind, Scale};

const USAGE: &str = "\
usage: cargo xtask bench [OPTIONS]
       cargo xtask bench spill-sort [--records N] [--limit SIZE] [--dir DIR]
       cargo xtask bench memory [--files N] [--no-mpi] [--quick]
       cargo xtask bench section [walk|sort|cp|cp-small|cp-big|cp-bufsize|sync|rm|tar|tar-small|tar-mixed|tar-zstd|tar-gz|resume|tar-select|verify|resume-all [--quick] [--tools LIST] [--fs tmpfs|disk] [--pairs N] [--np LIST] [--overhead-only]|pfa [--quick] [--fs LIST] [--np LIST] [--launch mpirun,threads] [--records K] [--small-files N] [--chunks N] [--runs N]]...

Compare mfu-rs with cp -a, rsync -a, xcp, GNU tar, bsdtar, rm -rf, find and du on five
workloads (small: 20,000 x 4 KiB; mixed: a long tail of sizes, 0.5 GiB; big: 2 x 1 GiB; real:
a copy of /usr/include; deep: 3,000 nested directories, cp and tar -x only), on tmpfs
(/dev/shm), and small and real also on the workspace's disk (all with --all-on-disk); every
tar -x extracts the same GNU-made archive (mfu-rs's indexed archive is its own row); then
memory rows, and mfu-rs at 64 thread ranks; write target/bench/bench.{md,json,svg}.

options:
  --runs N             timed runs per contestant, interleaved (default 3)
  --workloads LIST     comma list of small,mixed,big,real,deep (default all)
  --fs LIST            comma list of tmpfs,disk (default both)
  --all-on-disk        also the mixed and big workloads on disk (not by default: at this VM's
                       ~180 MB/s writeback, the sync before each run adds ~2 and ~15 minutes)
  --ops LIST           comma list of walk,walk-lite,cp,sync-unchanged,sync-1%,rm,tar-create,
                       tar-extract,tar-extract-indexed
  --quick              tiny workloads, one run, every result checked strictly (a wrong result
                       is an error): tests the harness and the tools; the numbers mean little
  --no-mpi             mfu-rs at np 1 only (no mpirun)
  --no-probes          skip start-up and system-call counts
  --memory-files N     files of the memory rows' tree (default 1000000; --quick 5000): peak
                       RSS of mfu-rs walk, sync (empty and unchanged destination), cmp and
                       tar -x at np 1 and np 2, per 10^6 files, against the targets
  --no-memory          skip the memory rows

`bench memory`: the memory rows alone (as in the whole bench: --files N as --memory-files,
--quick checks every result strictly), table to target/bench/memory.md.

`bench spill-sort` (opt-in, not part of the whole bench): the out-of-core sort's memory rows
(issue 34): a synthetic v4 list of N records (default 10^8; `cargo xtask gen-list`) sorted by
name under mpirun -np 2 with --memory-limit SIZE (default 512M), each rank's peak RSS, time
per record against the in-memory sort of min(N, 10^7) records, and the two outputs compared
byte for byte. Needs about 4 x N x 144 bytes free in DIR (default target/bench-spill: 58 GB at
10^8) and, at 10^8, about an hour here (see bench/spill_sort.rs).
  --ranks N            also mfu-rs --ranks N against --ranks 2 on the tmpfs workloads (walk,
                       cp, sync-unchanged, rm, tar-create, tar-extract) with the work queue's
                       statistics (default 64; --quick: small workload only)
  --no-ranks           skip those rows
  --publish            copy the results to docs/bench/ and the table into README.md
";

struct Options {
    plan: matrix::Plan,
    probes: bool,
    /// Files of the memory rows' tree (None: the scale's; Some(0): no memory rows).
    memory_files: Option<u64>,
    publish: bool,
}

fn list<T>(arg: Option<&String>, parse: impl Fn(&str) -> Option<T>, what: &str) -> Result<Vec<T>> {
    let arg = arg.with_context(|| format!("{what} needs a value\n\n{USAGE}"))?;
    arg.split(',')
        .map(|x| parse(x).with_context(|| format!("unknown {what} {x:?}\n\n{USAGE}")))
        .collect()
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        plan: matrix::Plan {
            workloads: Kind::ALL.to_vec(),
            fs: Fs::ALL.to_vec(),
            ops: Op::ALL.to_vec(),
            runs: 3,
            scale: Scale::FULL,
            all_on_disk: false,
            mpi: true,
            strace: true,
            strict: false,
            ranks: Some(64),
            ranks_small_only: false,
        },
        probes: true,
        memory_files: None,
        publish: false,
    };
    let mut runs = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => {
                let n: usize = it
                    .next()
                    .context("--runs needs a number")?
                    .parse()
                    .context("--runs")?;
                ensure!(n >= 1, "--runs must be at least 1");
                runs = Some(n);
            }
            "--workloads" => o.plan.workloads = list(it.next(), Kind::parse, "workload")?,
            "--fs" => o.plan.fs = list(it.next(), Fs::parse, "file system")?,
            "--ops" => o.plan.ops = list(it.next(), Op::parse, "operation")?,
            "--quick" => {
                o.plan.scale = Scale::QUICK;
                o.plan.runs = 1;
                o.plan.strict = true;
                o.plan.ranks_small_only = true;
            }
            "--ranks" => {
                let n: usize = it
                    .next()
                    .context("--ranks needs a number")?
                    .parse()
                    .context("--ranks")?;
                ensure!((3..=256).contains(&n), "--ranks must be 3 to 256");
                o.plan.ranks = Some(n);
            }
            "--no-ranks" => o.plan.ranks = None,
            "--memory-files" => {
                let n: u64 = it
                    .next()
                    .context("--memory-files needs a number")?
                    .parse()
                    .context("--memory-files")?;
                o.memory_files = Some(n);
            }
            "--no-memory" => o.memory_files = Some(0),
            "--no-mpi" => o.plan.mpi = false,
            "--all-on-disk" => o.plan.all_on_disk = true,
            "--no-probes" => {
                o.probes = false;
                o.plan.strace = false;
            }
            "--publish" => o.publish = true,
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            x => bail!("unknown option {x:?}\n\n{USAGE}"),
        }
    }
    if let Some(n) = runs {
        o.plan.runs = n;
    }
    Ok(o)
}

pub use memory::rss_wrap;

/// `cargo xtask bench memory`: the memory rows alone, on tmpfs; their table printed and
/// written to `target/bench/memory.md`.
fn memory_only(args: &[String], bin: &Path, root: &Path) -> Result<()> {
    let (mut files, mut mpi, mut strict) = (Scale::FULL.memory_files, true, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--files" => {
                files = it
                    .next()
                    .context("--files needs a number")?
                    .parse()
                    .context("--files")?;
            }
            "--no-mpi" => mpi = false,
            "--quick" => {
                files = Scale::QUICK.memory_files;
                strict = true;
            }
            other => anyhow::bail!("bench memory: unknown option {other}\n{USAGE}"),
        }
    }
    let base = Fs::Tmpfs.base(root);
    let rows = memory::run(bin, &base, files, mpi, strict);
    remove_base(&base)?;
    let mut md = String::new();
    report::memory_table(&mut md, &rows?);
    print!("\n{md}");
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("memory.md"), &md)?;
    Ok(())
}

/// Entry point of `cargo xtask bench ...`.
pub fn run(args: &[String]) -> Result<()> {
    if args.first().map(String::as_str) == Some("spill-sort") {
        crate::setup::ensure()?;
        let bin = binary()?;
        return spill_sort::main(&args[1..], &bin, &root());
    }
    if args.first().map(String::as_str) == Some("memory") {
        crate::setup::ensure()?;
        let bin = binary()?;
        return memory_only(&args[1..], &bin, &root());
    }
    if args.first().map(String::as_str) == Some("section") {
        crate::setup::ensure()?;
        let bin = binary()?;
        return sections::run(&args[1..], &bin, &root());
    }
    let opts = parse(args)?;
    let started = Instant::now();
    crate::setup::ensure()?;
    let root = root();
    let bin = binary()?;
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out).with_context(|| format!("mkdir {}", out.display()))?;
    let floor = build_floor(&root, &out)
        .map_err(|e| eprintln!("bench: the C floor is not measured: {e:#}"))
        .ok();
    let mut report = Report {
        runs: opts.plan.runs,
        ..Report::default()
    };
    report.context = context(&root, &bin);
    let results = matrix::run(&opts.plan, &bin, &root, floor.as_deref());
    // Whatever happened, the workloads are removed: tmpfs holds them in memory.
    for fs in &opts.plan.fs {
        remove_base(&fs.base(&root))?;
    }
    let results = results?;
    report.rows = results.rows;
    report.syscalls = results.syscalls;
    report.ranks = results.ranks;
    for (name, kind, dir) in results.fs {
        report.context.push((name, format!("{kind} ({dir})")));
    }
    let quick = opts.plan.scale.small_files < Scale::FULL.small_files;
    let files = opts.memory_files.unwrap_or(opts.plan.scale.memory_files);
    if opts.probes || files > 0 {
        let base = Fs::Tmpfs.base(&root);
        let probed = (|| -> Result<()> {
            if opts.probes {
                report.startup = probes::startup(&bin, &base, if quick { 11 } else { 51 })?;
            }
            if files > 0 {
                report.memory = memory::run(&bin, &base, files, opts.plan.mpi, opts.plan.strict)?;
            }
            Ok(())
        })();
        remove_base(&base)?;
        probed?;
    }
    report
        .context
        .push(("load average after".into(), measure::loadavg()));
    report.context.push((
        "bench wall time".into(),
        format!("{:.0} s", started.elapsed().as_secs_f64()),
    ));
    let md = report.markdown();
    print!("\n{md}");
    std::fs::write(out.join("bench.md"), &md)?;
    std::fs::write(
        out.join("bench.json"),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    chart::svg(&report.rows, &out.join("bench.svg"))?;
    eprintln!(
        "bench: wrote {}/bench.{{md,json,svg}} in {:.0} s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
    if opts.publish {
        publish(&root, &out, &md)?;
    }
    Ok(())
}

/// Remove a bench directory, and its parent when no other bench run uses it.
fn remove_base(base: &Path) -> Result<()> {
    if base.exists() {
        std::fs::remove_dir_all(base).with_context(|| format!("remove {}", base.display()))?;
    }
    if let Some(parent) = base.parent() {
        // Fails, as it should, while another run's directory is still there.
        let _ = std::fs::remove_dir(parent);
    }
    Ok(())
}

/// The binary measured: `MFU_RS_BENCH_BIN`, or `target/release/mfu-rs` built now.
fn binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("MFU_RS_BENCH_BIN") {
        let path = std::path::absolute(PathBuf::from(path))?;
        ensure!(
            path.is_file(),
            "MFU_RS_BENCH_BIN={} is not a file",
            path.display()
        );
        eprintln!("bench: measuring {} (MFU_RS_BENCH_BIN)", path.display());
        return Ok(path);
    }
    let root = root();
    crate::run(
        crate::cargo()
            .current_dir(&root)
            .args(["build", "--release", "-p", "mfu-rs"]),
    )?;
    Ok(root.join("target/release/mfu-rs"))
}

/// Compile the C floor (`benches/floor/copy_floor.c`) into `out`.
fn build_floor(root: &Path, out: &Path) -> Result<PathBuf> {
    let exe = out.join("copy_floor");
    crate::run(
        Command::new("cc")
            .args(["-O2", "-pthread", "-o"])
            .arg(&exe)
            .arg(root.join("benches/floor/copy_floor.c")),
    )?;
    Ok(exe)
}

/// Date, commit, machine and load, for the report's first line.
fn context(root: &Path, bin: &Path) -> Vec<(String, String)> {
    let sh = |cmd: &mut Command| {
        cmd.output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "?".into())
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or("?".into(), |kib| workload::size(kib * 1024));
    vec![
        (
            "date".into(),
            sh(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"])),
        ),
        (
            "commit".into(),
            sh(Command::new("git")
                .current_dir(root)
                .args(["describe", "--always", "--dirty"])),
        ),
        ("binary".into(), bin.display().to_string()),
        (
            "machine".into(),
            format!(
                "{cores} cores, {mem}, Linux {}",
                sh(Command::new("uname").arg("-r"))
            ),
        ),
        ("load average before".into(), measure::loadavg()),
    ]
}

const README_BEGIN: &str = "<!-- bench:begin (cargo xtask bench --publish writes this) -->";
const README_END: &str = "<!-- bench:end -->";

/// Copy the results to `docs/bench/` and the table into README.md between its markers.
fn publish(root: &Path, out: &Path, md: &str) -> Result<()> {
    let docs = root.join("docs/bench");
    std::fs::create_dir_all(&docs)?;
    for f in ["bench.md", "bench.json", "bench.svg"] {
        std::fs::copy(out.join(f), docs.join(f))
            .with_context(|| format!("copy {f} to {}", docs.display()))?;
    }
    let readme = root.join("README.md");
    let text = std::fs::read_to_string(&readme)?;
    let replaced = between_markers(
        &text,
        &format!("{md}\n![mfu-rs against the peers](docs/bench/bench.svg)\n"),
    )
    .context("README.md has no bench markers")?;
    std::fs::write(&readme, replaced)?;
    eprintln!("bench: published to {} and README.md", docs.display());
    Ok(())
}

/// `text` with what lies between the bench markers replaced by `body`.
fn between_markers(text: &str, body: &str) -> Option<String> {
    let a = text.find(README_BEGIN)? + README_BEGIN.len();
    let b = a + text[a..].find(README_END)?;
    Some(format!("{}\n{body}{}", &text[..a], &text[b..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_select_workloads_file_systems_and_operations() {
        let a: Vec<String> = [
            "--workloads",
            "small,real",
            "--fs",
            "tmpfs",
            "--ops",
            "cp,sync-1%",
            "--runs",
            "3",
        ]
        .map(String::from)
        .to_vec();
        let o = parse(&a).unwrap();
        assert_eq!(o.plan.workloads, [Kind::Small, Kind::Real]);
        assert_eq!(o.plan.fs, [Fs::Tmpfs]);
        assert_eq!(o.plan.ops, [Op::Cp, Op::SyncChanged]);
        assert_eq!(o.plan.runs, 3);
        assert!(parse(&["--ops".into(), "copy".into()]).is_err());
        let q = parse(&["--quick".into(), "--runs".into(), "2".into()]).unwrap();
        assert_eq!((q.plan.runs, q.plan.scale.small_files), (2, 2_000));
    }

    #[test]
    fn publishing_replaces_only_what_lies_between_the_markers() {
        let text = format!("# x\n{README_BEGIN}\nold table\n{README_END}\nrest\n");
        let new = between_markers(&text, "new table\n").unwrap();
        assert_eq!(
            new,
            format!("# x\n{README_BEGIN}\nnew table\n{README_END}\nrest\n")
        );
        assert!(between_markers("no markers", "x").is_none());
    }
}
