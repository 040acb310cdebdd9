//! The results of a comparison run: what is kept (JSON), and the markdown tables made of it.

use super::ops::Role;
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
    /// mfu-rs's best median over the fastest peer's; `None` without a peer.
    pub ratio: Option<f64>,
    /// The ratio must be at most this.
    pub target: f64,
}

impl Row {
    /// Make a row, computing its ratio.
    pub fn new(w: &Workload, fs: &str, op: &str, timings: Vec<Timing>, target: f64) -> Row {
        let mut row = Row {
            workload: w.kind.name().into(),
            label: w.label.clone(),
            fs: fs.into(),
            op: op.into(),
            timings,
            warnings: Vec::new(),
            ratio: None,
            target,
        };
        row.ratio = match (row.best(true), row.best(false)) {
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

/// Peak memory of a walk.
#[derive(Clone, Debug, Serialize)]
pub struct Memory {
    /// The command.
    pub name: String,
    /// Files walked.
    pub files: u64,
    /// Mean path length, bytes.
    pub path_bytes: u64,
    /// Peak resident set, KiB.
    pub max_rss_kib: u64,
    /// Peak resident set per million files, MiB.
    pub mib_per_million: f64,
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
    /// Peak memory of walks.
    pub memory: Vec<Memory>,
    /// The peak-memory target, MiB per million files.
    pub memory_target_mib: f64,
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
            "Medians of {} interleaved runs (each tool's result checked after its first run; the \
             sources are in the page cache); ratio = \
             mfu-rs's better of np 1 and `mpirun -np 2` over the fastest peer (< 1: mfu-rs is \
             faster); target ≤ 0.8 on tmpfs, ≤ 1.0 on disk.\n",
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
                r.ratio.map_or("–".into(), |x| format!("**{x:.2}**")),
                if r.passes() {
                    format!("≤ {} ✓", r.target)
                } else {
                    format!("≤ {} ✗", r.target)
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
            let _ = writeln!(o, "\n**Small-file copy against the C floor** (`benches/floor/copy_floor.c`: walk, then open/copy_file_range/fchmod/futimens/close on 2 threads; target ≤ 1.3):\n");
            let _ = writeln!(o, "| fs | mfu-rs best | floor | mfu-rs / floor |");
            let _ = writeln!(o, "|---|---|---|---|");
            for r in floors {
                let (m, f) = (r.best(true), r.floor());
                if let (Some(m), Some(f)) = (m, f) {
                    let _ = writeln!(
                        o,
                        "| {} | {} ({}) | {} | **{:.2}** |",
                        r.fs,
                        secs(m.median),
                        m.name,
                        secs(f.median),
                        m.median / f.median
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
            let _ = writeln!(
                o,
                "\nPeak memory of a walk, one rank (target ≤ {} MiB per million files):\n",
                self.memory_target_mib
            );
            let _ = writeln!(
                o,
                "| command | files | path bytes | peak RSS | per million files |"
            );
            let _ = writeln!(o, "|---|---|---|---|---|");
            for m in &self.memory {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {:.1} MiB | **{:.1} MiB** |",
                    m.name,
                    thousands(m.files),
                    m.path_bytes,
                    m.max_rss_kib as f64 / 1024.0,
                    m.mib_per_million
                );
            }
        }
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
            md.contains("| tmpfs | 0.300 s (mfu-rs np 1) | 0.100 s | **3.00** |"),
            "{md}"
        );
        assert!(md.contains("Targets missed: 1 of 1 rows: small tmpfs cp: 1.20 (target 0.8)."));
    }
}
