//! The results of a comparison run: what is kept (JSON), and the markdown tables made of it.

use super::memory::MemRow;
use super::ops::Role;
use super::ranks::RanksRow;
use super::workload::{thousands, Workload};
use serde::Serialize;
use std::fmt::Write;

/// One contestant's runs of one operation.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// Its name in tables (`cp -a`, `mfu-rs np 1`).
    pub name: String,
    /// Who it is.
    pub role: Role,
    /// The command line.
    pub cmd: String,
    /// Wall seconds of each timed run, in run order.
    pub runs: Vec<f64>,
    /// Median of `runs`, seconds.
    pub median: f64,
    /// Largest peak resident set of the process started over the runs, KiB (under `mpirun`:
    /// mpirun's own).
    pub max_rss_kib: u64,
}

/// One operation on one workload on one file system.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The workload's kind (`small`).
    pub workload: String,
    /// What the workload is (`20,000 × 4 KiB`).
    pub label: String,
    /// `tmpfs` or `disk`.
    pub fs: String,
    /// The operation (`cp`).
    pub op: String,
    /// Every contestant, mfu-rs first.
    pub timings: Vec<Timing>,
    /// Checks of results that failed (the timing went on).
    pub warnings: Vec<String>,
    /// mfu-rs's best median over the reference peer's (the fastest peer when `reference` is
    /// `None`); `None` without a peer.
    pub ratio: Option<f64>,
    /// The peer the ratio is taken against (GNU tar on a GNU-made archive), if not the fastest.
    pub reference: Option<String>,
    /// The ratio must be at most this.
    pub target: f64,
}

impl Row {
    /// Make a row, computing its ratio.
    pub fn new(
        w: &Workload,
        fs: &str,
        op: &str,
        timings: Vec<Timing>,
        target: f64,
        reference: Option<&str>,
    ) -> Row {
        let mut row = Row {
            workload: w.kind.name().into(),
            label: w.label.clone(),
            fs: fs.into(),
            op: op.into(),
            timings,
            warnings: Vec::new(),
            ratio: None,
            reference: None,
            target,
        };
        let named = reference.and_then(|n| {
            row.timings
                .iter()
                .find(|t| t.role == Role::Peer && t.name == n)
        });
        row.reference = named.map(|t| t.name.clone());
        let peer = named.or_else(|| row.best(false));
        row.ratio = match (row.best(true), peer) {
            (Some(m), Some(p)) => Some(m.median / p.median),
            _ => None,
        };
        row
    }

    /// The fastest mfu-rs run (`mfu`) or the fastest peer.
    pub fn best(&self, mfu: bool) -> Option<&Timing> {
        self.timings
            .iter()
            .filter(|t| match t.role {
                Role::Mfu { .. } => mfu,
                Role::Peer => !mfu,
                Role::Floor => false,
            })
            .min_by(|a, b| a.median.total_cmp(&b.median))
    }

    /// The C floor's timing, if it ran.
    pub fn floor(&self) -> Option<&Timing> {
        self.timings.iter().find(|t| t.role == Role::Floor)
    }

    /// True when the ratio meets the target (or there is nothing to compare with).
    pub fn passes(&self) -> bool {
        self.ratio.is_none_or(|r| r <= self.target)
    }
}

/// System calls of one contestant copying the small tree (`strace -f -c`).
#[derive(Clone, Debug, Serialize)]
pub struct Syscalls {
    /// The contestant.
    pub name: String,
    /// Calls, all threads and processes.
    pub total: u64,
    /// Calls per file copied.
    pub per_file: f64,
    /// The most frequent calls: (name, count).
    pub top: Vec<(String, u64)>,
}

/// Start-up: the median of many runs of each command on an empty directory.
#[derive(Clone, Debug, Serialize)]
pub struct Startup {
    /// The command.
    pub name: String,
    /// Median wall time, milliseconds.
    pub median_ms: f64,
    /// Runs.
    pub runs: usize,
}

/// Everything one `cargo xtask bench` run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// When and where: date, commit, machine, load.
    pub context: Vec<(String, String)>,
    /// Timed runs per contestant.
    pub runs: usize,
    /// The comparison.
    pub rows: Vec<Row>,
    /// System calls per file of the small-file copy.
    pub syscalls: Vec<Syscalls>,
    /// Start-up on an empty directory.
    pub startup: Vec<Startup>,
    /// Peak memory of the process tree over many empty files.
    pub memory: Vec<MemRow>,
    /// mfu-rs at many thread ranks against 2: the runtime's own costs.
    pub ranks: Vec<RanksRow>,
}

/// mfu-rs's small-file copy over the C floor's, at most.
pub const FLOOR_TARGET: f64 = 1.1;

/// `≤ target ✓` or `≤ target ✗`.
pub fn holds(x: f64, target: f64) -> String {
    format!("≤ {target} {}", if x <= target { "✓" } else { "✗" })
}

fn secs(s: f64) -> String {
    if s < 0.1 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

impl Report {
    /// The report as markdown: the comparison table, then syscalls, start-up, memory, and the
    /// targets missed.
    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let ctx: Vec<String> = self
            .context
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(o, "{}.\n", ctx.join("; "));
        let _ = writeln!(
            o,
            "Medians of {} interleaved runs, 21 on rows whose fastest tool takes under 50 ms \
             (each tool's result checked after its first run; the sources are in the page \
             cache); ratio = \
             mfu-rs's better of np 1 and `mpirun -np 2` over the fastest peer, or over GNU tar \
             on `tar-extract` (< 1: mfu-rs is faster); target ≤ 0.8 × GNU tar on `tar-extract` \
             (every tool extracts the same archive, made by GNU tar in its default format, no \
             index), ≤ 1.0 × the fastest peer on every other row. `tar-extract-indexed`: mfu-rs \
             extracting its own indexed archive, against GNU tar extracting GNU tar's.\n",
            self.runs
        );
        let _ = writeln!(
            o,
            "| workload | fs | operation | mfu-rs np 1 | mfu-rs np 2 | fastest peer | other peers | ratio | target |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
        for r in &self.rows {
            let np = |n: u32| {
                r.timings
                    .iter()
                    .find(|t| t.role == Role::Mfu { np: n })
                    .map_or("–".into(), |t| secs(t.median))
            };
            let best = r.best(false);
            let others: Vec<String> = r
                .timings
                .iter()
                .filter(|t| t.role == Role::Peer && best.is_none_or(|b| b.name != t.name))
                .map(|t| format!("{} {}", t.name, secs(t.median)))
                .collect();
            let _ = writeln!(
                o,
                "| {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.workload,
                r.label,
                r.fs,
                r.op,
                np(1),
                np(2),
                best.map_or("–".into(), |b| format!("{} {}", b.name, secs(b.median))),
                others.join(", "),
                r.ratio.map_or("–".into(), |x| match &r.reference {
                    Some(p) => format!("**{x:.2}** (vs {p})"),
                    None => format!("**{x:.2}**"),
                }),
                match r.ratio {
                    Some(x) => holds(x, r.target),
                    None => format!("≤ {} (no peer)", r.target),
                },
            );
        }
        for r in self.rows.iter().filter(|r| !r.warnings.is_empty()) {
            for w in &r.warnings {
                let _ = writeln!(o, "\nwarning ({} {} {}): {w}", r.workload, r.fs, r.op);
            }
        }
        let floors: Vec<&Row> = self.rows.iter().filter(|r| r.floor().is_some()).collect();
        if !floors.is_empty() || !self.syscalls.is_empty() {
            let _ = writeln!(o, "\n**Small-file copy against the C floor** (`benches/floor/copy_floor.c`: walk, then open/copy_file_range/fchmod/futimens/close on 2 threads):\n");
            let _ = writeln!(o, "| fs | mfu-rs best | floor | mfu-rs / floor | target |");
            let _ = writeln!(o, "|---|---|---|---|---|");
            for r in floors {
                let (m, f) = (r.best(true), r.floor());
                if let (Some(m), Some(f)) = (m, f) {
                    let x = m.median / f.median;
                    let _ = writeln!(
                        o,
                        "| {} | {} ({}) | {} | **{x:.2}** | {} |",
                        r.fs,
                        secs(m.median),
                        m.name,
                        secs(f.median),
                        holds(x, FLOOR_TARGET)
                    );
                }
            }
        }
        if !self.syscalls.is_empty() {
            let _ = writeln!(
                o,
                "\nSystem calls of the small-file copy (`strace -f -c`, one run each):\n"
            );
            let _ = writeln!(o, "| command | calls | per file | most frequent |");
            let _ = writeln!(o, "|---|---|---|---|");
            for s in &self.syscalls {
                let top: Vec<String> = s.top.iter().map(|(n, c)| format!("{n} {c}")).collect();
                let _ = writeln!(
                    o,
                    "| {} | {} | {:.1} | {} |",
                    s.name,
                    thousands(s.total),
                    s.per_file,
                    top.join(", ")
                );
            }
        }
        if !self.startup.is_empty() {
            let _ = writeln!(o, "\nStart-up, walking an empty directory:\n");
            let _ = writeln!(o, "| command | median | runs |");
            let _ = writeln!(o, "|---|---|---|");
            for s in &self.startup {
                let _ = writeln!(o, "| {} | {:.2} ms | {} |", s.name, s.median_ms, s.runs);
            }
        }
        if !self.memory.is_empty() {
            memory_table(&mut o, &self.memory);
        }
        if !self.ranks.is_empty() {
            ranks_table(&mut o, &self.ranks);
        }
        deep_line(&mut o, &self.rows);
        let missed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| !r.passes())
            .map(|r| {
                format!(
                    "{} {} {}: {:.2} (target {})",
                    r.workload,
                    r.fs,
                    r.op,
                    r.ratio.unwrap_or(f64::NAN),
                    r.target
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "\nTargets missed: {} of {} rows{}",
            missed.len(),
            self.rows.len(),
            if missed.is_empty() {
                ".".to_string()
            } else {
                format!(": {}.", missed.join("; "))
            }
        );
        o
    }
}

/// mfu-rs's extraction of the deep tree over its copy of it, at most (issue 17).
pub const DEEP_TARGET: f64 = 2.0;

/// The memory rows' table (markdown) appended to `o`.
pub fn memory_table(o: &mut String, rows: &[MemRow]) {
    let files = rows.first().map_or(0, |r| r.files);
    let _ = writeln!(
        o,
        "\n**Peak memory** over a tree of {} empty files (60-byte paths, 1,000 per directory), \
         MB = 10^6 bytes: the sum of every rank's own peak resident set (each rank runs under a \
         wrapper that reads its `ru_maxrss` from `wait4`; at np 2 the sum is an upper bound, \
         `mpirun` itself not counted), per 10^6 files against the targets, which are for one \
         rank holding every file (np 1; np 2 is shown beside them) with no memory limit, \
         issue 34's: walk 100 MB, sync into an empty destination, sync unchanged and cmp 200, \
         tar -x 150; GNU tar and bsdtar \
         extracting the same archive (made by GNU tar) for comparison. The rows with \
         `--memory-limit` (issue 34: 64M at 10^6 files, in proportion for other sizes) are \
         those of the operations whose lists go out of core, each run just after the same \
         command without a limit: every peak ≤ {} MB at 10^6 files and each time ≤ {}× the \
         unlimited one's, with the same result. Lists larger than memory also have their own \
         opt-in rows, `cargo xtask bench spill-sort`: a synthetic list sorted within \
         `--memory-limit` against the in-memory sort:\n",
        thousands(files),
        super::memory::LIMITED_TARGET_MB,
        super::memory::LIMITED_TIME_RATIO,
    );
    let _ = writeln!(
        o,
        "| operation | command | ranks' peaks | total | per 10^6 files | target | time | time ÷ no limit |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    for r in rows {
        let peaks: Vec<String> = r
            .per_rank_kib
            .iter()
            .map(|k| format!("{:.1}", *k as f64 * 1024.0 / 1e6))
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} MB | {:.1} MB | **{:.1} MB** | {} | {} | {} |",
            r.op,
            r.name,
            peaks.join(" + "),
            r.mb,
            r.mb_per_million,
            r.target_mb.map_or("–".into(), |t| if r.files < 1_000_000 {
                // The fixed start-up memory dominates a small tree.
                format!("≤ {t} (at 10^6 files)")
            } else {
                holds(r.mb_per_million, t)
            }),
            secs(r.secs),
            r.vs_unlimited.map_or("–".into(), |x| format!(
                "{x:.2} {}",
                if x <= super::memory::LIMITED_TIME_RATIO {
                    "✓"
                } else {
                    "✗"
                }
            ))
        );
    }
}

fn ranks_table(o: &mut String, rows: &[RanksRow]) {
    let many = rows
        .iter()
        .flat_map(|r| r.runs.iter().map(|x| x.0))
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        o,
        "\n**The runtime at {many} ranks**: mfu-rs as {many} thread ranks of one process \
         (`--ranks {many}`) against `--ranks 2`, same workloads (tmpfs), with the work queue's \
         statistics (`MFU_RS_STATS=1`, first timed run, summed over the command's queue runs): \
         steal requests sent (answered with work), token rounds of the termination detection, \
         idle time of the median and of the most idle rank, and the time inside the queues. \
         On 2 cores {many} ranks cannot be faster than 2; what they lose beyond that is the \
         protocol's cost.\n"
    );
    let _ = writeln!(
        o,
        "| workload | operation | --ranks 2 | --ranks {many} | ratio | steal requests (served) | token rounds | idle per rank, median / max | in queues | steal requests at 2 ranks |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let (Some(lo), Some(hi)) = (r.runs.first(), r.runs.last()) else {
            continue;
        };
        let q = &hi.2;
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | **{:.2}** | {} ({}) | {} | {:.1} / {:.1} ms | {:.1} ms | {} ({}) |",
            r.workload,
            r.op,
            secs(lo.1),
            secs(hi.1),
            hi.1 / lo.1,
            thousands(q.steal_requests),
            thousands(q.served),
            q.token_rounds,
            q.idle_ms_median,
            q.idle_ms_max,
            q.wall_ms,
            thousands(lo.2.steal_requests),
            thousands(lo.2.served),
        );
    }
}

/// The deep tree's line: mfu-rs's extraction over its copy (and GNU tar's over `cp -a`).
fn deep_line(o: &mut String, rows: &[Row]) {
    let find = |op: &str| rows.iter().find(|r| r.workload == "deep" && r.op == op);
    let (Some(cp), Some(x)) = (find("cp"), find("tar-extract")) else {
        return;
    };
    let (Some(mc), Some(mx)) = (cp.best(true), x.best(true)) else {
        return;
    };
    let ratio = mx.median / mc.median;
    let peer = |r: &Row, name: &str| r.timings.iter().find(|t| t.name == name).map(|t| t.median);
    let gnu = match (peer(cp, "cp -a"), peer(x, super::ops::GNU_TAR_X)) {
        (Some(c), Some(t)) => format!("; GNU tar -x over cp -a: {:.2}", t / c),
        _ => String::new(),
    };
    let _ = writeln!(
        o,
        "\n**Deep tree** ({}, {}): mfu-rs tar -x of the GNU-made archive {} over mfu-rs cp {}: \
         **{ratio:.2}** ({}){gnu}.",
        cp.label,
        cp.fs,
        secs(mx.median),
        secs(mc.median),
        holds(ratio, DEEP_TARGET)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::workload::Kind;

    fn t(name: &str, role: Role, median: f64) -> Timing {
        Timing {
            name: name.into(),
            role,
            cmd: name.into(),
            runs: vec![median],
            median,
            max_rss_kib: 1,
        }
    }

    #[test]
    fn the_ratio_is_the_best_mfu_rs_over_the_fastest_peer_and_the_floor_is_no_peer() {
        let w = Workload {
            kind: Kind::Small,
            label: "20,000 × 4 KiB".into(),
            src: "/x".into(),
            entries: 20_001,
            bytes: 1,
            files: 20_000,
        };
        let row = Row::new(
            &w,
            "tmpfs",
            "cp",
            vec![
                t("mfu-rs np 1", Role::Mfu { np: 1 }, 0.3),
                t("mfu-rs mpirun -np 2", Role::Mfu { np: 2 }, 0.6),
                t("cp -a", Role::Peer, 0.5),
                t("xcp -r", Role::Peer, 0.25),
                t("C floor, 2 threads", Role::Floor, 0.1),
            ],
            0.8,
            None,
        );
        assert!((row.ratio.unwrap() - 1.2).abs() < 1e-9);
        assert!(!row.passes());
        let report = Report {
            runs: 5,
            rows: vec![row],
            ..Report::default()
        };
        let md = report.markdown();
        assert!(
            md.contains("| xcp -r 0.250 s | cp -a 0.500 s | **1.20** | ≤ 0.8 ✗ |"),
            "{md}"
        );
        assert!(
            md.contains("| tmpfs | 0.300 s (mfu-rs np 1) | 0.100 s | **3.00** | ≤ 1.1 ✗ |"),
            "{md}"
        );
        assert!(md.contains("Targets missed: 1 of 1 rows: small tmpfs cp: 1.20 (target 0.8)."));
    }
}
