//! Rows of mfu-rs at many ranks (`--ranks 64`: thread ranks of one process) against
//! `--ranks 2` on the same workloads and operations, with the work queue's own statistics
//! (`MFU_RS_STATS=1`, see `steal::stats`): steal requests sent and served, idle time per rank,
//! token rounds of the termination detection. On 2 cores 64 ranks cannot be faster than 2;
//! what they lose beyond that is the protocol's cost.

use super::measure::{measure, median};
use super::ops::{contestants, Op, Role, Setup};
use anyhow::{ensure, Result};
use serde::Serialize;

/// The operations run at many ranks.
pub const OPS: [Op; 6] = [
    Op::Walk,
    Op::Cp,
    Op::SyncUnchanged,
    Op::Rm,
    Op::TarCreate,
    Op::TarExtract,
];

/// The operations run at many ranks in a quick run.
pub const QUICK_OPS: [Op; 3] = [Op::Walk, Op::Cp, Op::TarExtract];

/// The work queue's statistics of one command, summed over its queue runs.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct QueueTotals {
    /// Queue runs (one per parallel phase).
    pub queue_runs: u64,
    /// Work items processed.
    pub items: u64,
    /// Steal requests sent.
    pub steal_requests: u64,
    /// Of which answered with work.
    pub served: u64,
    /// Token rounds of the termination detection.
    pub token_rounds: u64,
    /// Wall time inside the queues (the slowest rank of each), ms.
    pub wall_ms: f64,
    /// Idle time of the median rank, summed over the queue runs, ms.
    pub idle_ms_median: f64,
    /// Idle time of the most idle rank, summed over the queue runs, ms.
    pub idle_ms_max: f64,
}

/// Sum the `mfu-rs TOOL stats: queue: key=value ...` lines of `stderr`.
pub fn parse(stderr: &str) -> QueueTotals {
    let mut t = QueueTotals::default();
    for line in stderr.lines() {
        let Some((_, rest)) = line.split_once(" stats: queue: ") else {
            continue;
        };
        t.queue_runs += 1;
        for word in rest.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else {
                continue;
            };
            let f: f64 = v.parse().unwrap_or(0.0);
            match k {
                "items" => t.items += f as u64,
                "steal_requests" => t.steal_requests += f as u64,
                "served" => t.served += f as u64,
                "token_rounds" => t.token_rounds += f as u64,
                "wall_ms" => t.wall_ms += f,
                "idle_ms_median" => t.idle_ms_median += f,
                "idle_ms_max" => t.idle_ms_max += f,
                _ => {}
            }
        }
    }
    t
}

/// One operation on one workload at few and many ranks.
#[derive(Clone, Debug, Serialize)]
pub struct RanksRow {
    /// The workload's kind.
    pub workload: String,
    /// The file system.
    pub fs: String,
    /// The operation.
    pub op: String,
    /// (ranks, median wall seconds, queue statistics of the first timed run), few ranks first.
    pub runs: Vec<(usize, f64, QueueTotals)>,
}

/// Time `op` with mfu-rs at each of `ranks` thread ranks (`runs` interleaved runs each).
pub fn row(op: Op, st: &Setup, fs: &str, runs: usize) -> Result<RanksRow> {
    let cs: Vec<_> = contestants(op, st)?
        .into_iter()
        .filter(|c| matches!(c.role, Role::Mfu { .. }))
        .collect();
    let cases: Vec<_> = cs.iter().map(|c| &c.case).collect();
    let (times, warnings) = measure(&cases, runs, false)?;
    ensure!(warnings.is_empty(), "{}", warnings[0].1);
    let runs = cs
        .iter()
        .zip(times)
        .map(|(c, t)| {
            let Role::Mfu { np } = c.role else {
                unreachable!("filtered")
            };
            let stats = parse(&t[0].stderr);
            (
                np as usize,
                median(t.iter().map(|r| r.secs).collect()),
                stats,
            )
        })
        .collect();
    Ok(RanksRow {
        workload: st.w.kind.name().into(),
        fs: fs.into(),
        op: op.name().into(),
        runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stats_lines_of_every_queue_run_are_summed() {
        let err = "mfu-rs cp stats: queue: ranks=64 items=21 steal_requests=100 served=2 refused=98 \
                   token_rounds=2 wall_ms=10.5 idle_ms_min=1.0 idle_ms_median=5.0 idle_ms_max=9.5 idle_ms_sum=300.0\n\
                   something else\n\
                   mfu-rs cp stats: queue: ranks=64 items=64 steal_requests=50 served=0 refused=50 \
                   token_rounds=1 wall_ms=20.0 idle_ms_min=1.0 idle_ms_median=2.0 idle_ms_max=3.0 idle_ms_sum=30.0\n";
        let t = parse(err);
        assert_eq!(
            t,
            QueueTotals {
                queue_runs: 2,
                items: 85,
                steal_requests: 150,
                served: 2,
                token_rounds: 3,
                wall_ms: 30.5,
                idle_ms_median: 7.0,
                idle_ms_max: 12.5,
            }
        );
    }
}
