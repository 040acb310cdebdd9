//! The comparison itself: every operation on every workload on every file system, mfu-rs
//! against the peers found on the machine, runs interleaved, medians.

use super::fsutil::{clear, free_bytes, fs_type, remove};
use super::measure::{measure, median, time_once};
use super::ops::{contestants, Contestant, Op, Role, Setup};
use super::ranks::{self, RanksRow};
use super::report::{Row, Syscalls, Timing};
use super::syscalls;
use super::workload::{self, Fs, Kind, Scale, Workload};
use crate::setup::have;
use anyhow::{ensure, Context, Result};
use std::path::Path;
use std::time::Instant;

/// What to run.
pub struct Plan {
    /// The workloads, in order.
    pub workloads: Vec<Kind>,
    /// The file systems, in order.
    pub fs: Vec<Fs>,
    /// The operations, in order.
    pub ops: Vec<Op>,
    /// Timed runs per contestant.
    pub runs: usize,
    /// Run the mixed and big workloads on disk too (long: the writeback before each run).
    pub all_on_disk: bool,
    /// Workload sizes.
    pub scale: Scale,
    /// Run mfu-rs under `mpirun -np 2` too.
    pub mpi: bool,
    /// Count system calls of the small-file copy (`strace`).
    pub strace: bool,
    /// A result that fails its check is an error, not a warning (the smoke run in the tests).
    pub strict: bool,
    /// Also run mfu-rs at this many thread ranks against 2 (`--ranks N`, with the work queue's
    /// statistics) on the tmpfs workloads: all of them, or with `ranks_small_only` the small one.
    pub ranks: Option<usize>,
    /// See `ranks`.
    pub ranks_small_only: bool,
}

/// Everything the matrix measured.
pub struct Results {
    /// One row per (workload, fs, operation).
    pub rows: Vec<Row>,
    /// System calls of the small-file copy, per contestant (first file system only).
    pub syscalls: Vec<Syscalls>,
    /// The file systems used: (name, type, directory).
    pub fs: Vec<(String, String, String)>,
    /// mfu-rs at many thread ranks against 2.
    pub ranks: Vec<RanksRow>,
}

/// Bytes of room a workload needs on its file system: the source plus two copies (cp and
/// sync destinations, or archive and extraction), with a margin.
fn room(kind: Kind, scale: Scale) -> u64 {
    match kind {
        Kind::Big => 5 * scale.big_bytes,
        _ => 4 << 30,
    }
}

/// Run the plan with `bin`, data under `root`'s target directory and `/dev/shm`; `floor` is
/// the C floor's binary when built.
pub fn run(plan: &Plan, bin: &Path, root: &Path, floor: Option<&Path>) -> Result<Results> {
    let mut results = Results {
        rows: Vec::new(),
        syscalls: Vec::new(),
        fs: Vec::new(),
        ranks: Vec::new(),
    };
    for &fs in &plan.fs {
        let base = fs.base(root);
        // On disk, a timed row's set-up moves the previous run's output aside instead of
        // removing it: on ext4, for 60 s after a tree is removed, creating files costs far
        // more CPU (the inode allocator skips the recently deleted inodes, re-reading their
        // inode table blocks, and two threads spin on its lock): measured, a small-file copy
        // took 0.5 s after a rename and 3-5 s after an `rm -rf`, for every tool. Emptied when
        // the file system's rows are done.
        let aside = (fs == Fs::Disk).then(|| base.join("set-aside"));
        std::fs::create_dir_all(&base).with_context(|| format!("mkdir {}", base.display()))?;
        let kind_of_fs = fs_type(&base)?;
        if fs == Fs::Tmpfs {
            ensure!(
                kind_of_fs == "tmpfs",
                "{} is on {kind_of_fs}, not tmpfs: run with --fs disk",
                base.display()
            );
        }
        results
            .fs
            .push((fs.name().into(), kind_of_fs, base.display().to_string()));
        for &kind in &plan.workloads {
            if matches!(kind, Kind::Big | Kind::Mixed | Kind::Deep)
                && fs == Fs::Disk
                && !plan.all_on_disk
            {
                eprintln!(
                    "bench: {} on disk skipped (--all-on-disk runs it)",
                    kind.name()
                );
                continue;
            }
            let need = room(kind, plan.scale);
            let free = free_bytes(&base)?;
            if free < need {
                eprintln!(
                    "bench: skipping {} on {}: {} free, {} needed",
                    kind.name(),
                    fs.name(),
                    workload::size(free),
                    workload::size(need)
                );
                continue;
            }
            let w = workload::make(kind, &base, bin, plan.scale)?;
            let runs = plan.runs;
            for &op in plan.ops.iter().filter(|o| o.applies_to(kind)) {
                let st = Setup {
                    bin,
                    w: &w,
                    scratch: base.join(format!("{}-scratch", kind.name())),
                    mpi: plan.mpi,
                    floor,
                    ranks: None,
                    aside: aside.clone(),
                };
                let t = Instant::now();
                let (row, mfu_wrong) = run_op(op, &st, fs, runs, !plan.strict)
                    .with_context(|| format!("{} on {} ({})", op.name(), kind.name(), fs.name()))?;
                // A peer's odd result is reported, not fatal: rsync -a, for one, now and then
                // leaves a directory's mtime unset after renaming a big file into it.
                ensure!(
                    !plan.strict || mfu_wrong.is_empty(),
                    "{} on {} ({}): {}",
                    op.name(),
                    kind.name(),
                    fs.name(),
                    mfu_wrong.join("; ")
                );
                eprintln!(
                    "bench: {} {} {}: ratio {} ({:.0} s)",
                    kind.name(),
                    fs.name(),
                    op.name(),
                    row.ratio.map_or("–".into(), |r| format!("{r:.2}")),
                    t.elapsed().as_secs_f64()
                );
                results.rows.push(row);
                if plan.strace && op == Op::Cp && kind == Kind::Small && results.syscalls.is_empty()
                {
                    if have("strace") {
                        results.syscalls = count_syscalls(&st, &w)?;
                    } else {
                        eprintln!("bench: strace is not installed: no system-call counts");
                    }
                }
                clear(&st.scratch, st.aside.as_deref())?;
                if op == Op::Rm && st.aside.is_some() && !plan.strict {
                    // rm's timed runs removed trees: let their inodes age out of ext4's
                    // "recently deleted" window before the next rows create files.
                    eprintln!(
                        "bench: waiting {} s after rm on disk (ext4 skips inodes deleted in \
                         the last 60 s when it allocates)",
                        RECENTLY_DELETED.as_secs()
                    );
                    std::thread::sleep(RECENTLY_DELETED);
                }
            }
            let many = plan
                .ranks
                .filter(|_| fs == Fs::Tmpfs && (kind == Kind::Small || !plan.ranks_small_only));
            if let Some(n) = many {
                let counts = [2, n];
                let ops: &[Op] = if plan.ranks_small_only {
                    &ranks::QUICK_OPS
                } else {
                    &ranks::OPS
                };
                for &op in ops
                    .iter()
                    .filter(|o| plan.ops.contains(o) && o.applies_to(kind))
                {
                    let st = Setup {
                        bin,
                        w: &w,
                        scratch: base.join(format!("{}-scratch", kind.name())),
                        mpi: false,
                        floor: None,
                        ranks: Some(&counts),
                        aside: None,
                    };
                    let t = Instant::now();
                    let row = ranks::row(op, &st, fs.name(), plan.runs).with_context(|| {
                        format!("{} on {} at {n} ranks", op.name(), kind.name())
                    })?;
                    eprintln!(
                        "bench: {} {} {} at --ranks 2 and {n}: {} ({:.0} s)",
                        kind.name(),
                        fs.name(),
                        op.name(),
                        row.runs
                            .iter()
                            .map(|r| format!("{:.3} s", r.1))
                            .collect::<Vec<_>>()
                            .join(" and "),
                        t.elapsed().as_secs_f64()
                    );
                    results.ranks.push(row);
                    remove(&st.scratch)?;
                }
            }
        }
        if let Some(aside) = &aside {
            remove(aside)?;
        }
    }
    Ok(results)
}

/// How long ext4 keeps a removed inode from being reused (`recently_deleted` in its inode
/// allocator: 60 s), and a second.
const RECENTLY_DELETED: std::time::Duration = std::time::Duration::from_secs(61);

/// A row whose fastest contestant's median is under this (seconds) is short: see
/// [`SHORT_ROW_RUNS`].
const SHORT_ROW_SECS: f64 = 0.05;
/// Runs of every contestant of a short row (medians of a few ms need many).
const SHORT_ROW_RUNS: usize = 21;

/// Time every contestant of `op` and make its row; also the failed checks of mfu-rs's results.
/// `more_if_short`: give a short row [`SHORT_ROW_RUNS`] runs (not in `--quick`, whose rows are
/// all short and whose numbers mean little).
fn run_op(
    op: Op,
    st: &Setup,
    fs: Fs,
    runs: usize,
    more_if_short: bool,
) -> Result<(Row, Vec<String>)> {
    let mut cs: Vec<Contestant> = contestants(op, st)?;
    let mut dropped = Vec::new();
    if st.w.kind == Kind::Deep {
        // Paths beyond PATH_MAX defeat some peers (GNU cp and tar: "File name too long"): a
        // peer that fails an untimed trial is left out of the row, and the row says so.
        cs.retain(|c| {
            if c.role != Role::Peer {
                return true;
            }
            match time_once(&c.case) {
                Ok(_) => true,
                Err(e) => {
                    let e = format!("{e:#}");
                    let cut: String = e.chars().take(160).collect();
                    dropped.push(format!(
                        "{} fails on this tree, left out: {cut}…",
                        c.case.name
                    ));
                    false
                }
            }
        });
    }
    let cases: Vec<_> = cs.iter().map(|c| &c.case).collect();
    let (mut times, warnings) = measure(&cases, runs, false)?;
    // A row whose fastest contestant takes a few milliseconds (a walk of a small tree) is
    // decided by scheduler noise in three runs: such rows get more runs, every contestant
    // alike, still interleaved.
    let fastest = times
        .iter()
        .map(|t| median(t.iter().map(|r| r.secs).collect()))
        .fold(f64::INFINITY, f64::min);
    if more_if_short && fastest < SHORT_ROW_SECS && runs < SHORT_ROW_RUNS {
        let (more, _) = measure(&cases, SHORT_ROW_RUNS - runs, false)?;
        for (t, m) in times.iter_mut().zip(more) {
            t.extend(m);
        }
    }
    let timings = cs
        .iter()
        .zip(times)
        .map(|(c, t)| Timing {
            name: c.case.name.clone(),
            role: c.role,
            cmd: c.case.cmd.join(" "),
            median: median(t.iter().map(|r| r.secs).collect()),
            max_rss_kib: t.iter().map(|r| r.max_rss_kib).max().unwrap_or(0),
            runs: t.iter().map(|r| r.secs).collect(),
        })
        .collect();
    let mut row = Row::new(
        st.w,
        fs.name(),
        op.name(),
        timings,
        op.target(),
        op.reference(),
    );
    let mfu_wrong = warnings
        .iter()
        .filter(|(i, _)| matches!(cs[*i].role, Role::Mfu { .. }))
        .map(|(_, w)| w.clone())
        .collect();
    row.warnings = dropped;
    row.warnings.extend(warnings.into_iter().map(|(_, w)| w));
    Ok((row, mfu_wrong))
}

/// System calls of every contestant of the small-file copy, except `mpirun` (its own calls
/// and its daemons' would be counted).
fn count_syscalls(st: &Setup, w: &Workload) -> Result<Vec<Syscalls>> {
    let files = w.files;
    let mut out = Vec::new();
    for c in contestants(Op::Cp, st)? {
        if c.role == (Role::Mfu { np: 2 }) {
            continue;
        }
        out.push(syscalls::count(&c.case, files, &st.scratch)?);
    }
    Ok(out)
}
