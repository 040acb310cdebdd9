//! Runtime statistics of the work queue, on request: with `MFU_RS_STATS=1` in the environment
//! (of every rank), each [`queue::run`](crate::queue::run) measures what its protocol cost —
//! steal requests sent and served, idle time per rank, Safra token rounds — and gathers it to
//! rank 0, which keeps one [`QueueStats`] per queue run for the program to print at its end
//! ([`take`]). Without the variable nothing is measured and nothing is exchanged.
//!
//! The library prints nothing; `mfu-rs` prints [`QueueStats::line`] for each run to stderr.

use crate::comm::{Comm, CommExt};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The environment variable that turns the statistics on (`1`; read once per process).
pub const STATS_VAR: &str = "MFU_RS_STATS";

/// True when [`STATS_VAR`] is set to something other than `0` or nothing.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(STATS_VAR).is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// What one rank's queue run did (before the gather).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RankCounts {
    /// Items processed by this rank.
    pub processed: u64,
    /// Steal requests this rank sent.
    pub requests_sent: u64,
    /// Steal requests this rank answered with work.
    pub requests_served: u64,
    /// Steal requests this rank answered with nothing.
    pub requests_refused: u64,
    /// Work messages this rank sent unasked to ranks it had refused.
    pub gifts: u64,
    /// Time this rank had nothing queued and nothing running (waiting for a steal reply, the
    /// token or the end), nanoseconds; the closing drain included.
    pub idle_ns: u64,
    /// Wall time of the queue run on this rank, nanoseconds.
    pub wall_ns: u64,
    /// Token rounds rank 0 started (Safra's termination detection); 0 elsewhere.
    pub token_rounds: u64,
}

/// One queue run over all ranks (kept on rank 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStats {
    /// Ranks.
    pub ranks: usize,
    /// Each rank's counts, in rank order.
    pub per_rank: Vec<RankCounts>,
}

impl QueueStats {
    /// Sum of `f` over the ranks.
    fn sum(&self, f: impl Fn(&RankCounts) -> u64) -> u64 {
        self.per_rank.iter().map(f).sum()
    }

    /// The summary line printed by `mfu-rs` (parsed by `cargo xtask bench`: `key=value` words):
    /// `queue: ranks=R items=N steal_requests=S served=W refused=E gifts=G token_rounds=T wall_ms=X
    /// idle_ms_min=A idle_ms_median=B idle_ms_max=C idle_ms_sum=D`.
    pub fn line(&self) -> String {
        let mut idle: Vec<u64> = self.per_rank.iter().map(|r| r.idle_ns).collect();
        idle.sort_unstable();
        let ms = |ns: u64| Duration::from_nanos(ns).as_secs_f64() * 1e3;
        let pick = |i: usize| idle.get(i).copied().unwrap_or(0);
        format!(
            "queue: ranks={} items={} steal_requests={} served={} refused={} gifts={} token_rounds={} \
             wall_ms={:.1} idle_ms_min={:.1} idle_ms_median={:.1} idle_ms_max={:.1} idle_ms_sum={:.1}",
            self.ranks,
            self.sum(|r| r.processed),
            self.sum(|r| r.requests_sent),
            self.sum(|r| r.requests_served),
            self.sum(|r| r.requests_refused),
            self.sum(|r| r.gifts),
            self.sum(|r| r.token_rounds),
            ms(self.per_rank.iter().map(|r| r.wall_ns).max().unwrap_or(0)),
            ms(pick(0)),
            ms(pick(idle.len() / 2)),
            ms(idle.last().copied().unwrap_or(0)),
            ms(self.sum(|r| r.idle_ns)),
        )
    }
}

static KEPT: Mutex<Vec<QueueStats>> = Mutex::new(Vec::new());

/// Gather `mine` from every rank to rank 0 and keep the result there. Collective; call only
/// when [`enabled`] (on every rank alike).
pub(crate) fn gather(comm: &dyn Comm, mine: RankCounts) {
    let Some(per_rank) = comm.gather_to(0, &mine) else {
        return;
    };
    KEPT.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(QueueStats {
            ranks: comm.size(),
            per_rank,
        });
}

/// The queue runs recorded so far in this process (on rank 0), oldest first; the record is
/// emptied.
pub fn take() -> Vec<QueueStats> {
    std::mem::take(&mut *KEPT.lock().unwrap_or_else(|e| e.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_sums_the_ranks_and_spreads_idle_time() {
        let r = |idle_ms: u64, sent: u64| RankCounts {
            processed: 10,
            requests_sent: sent,
            requests_served: 1,
            requests_refused: sent - 1,
            gifts: 2,
            idle_ns: idle_ms * 1_000_000,
            wall_ns: 50_000_000,
            token_rounds: 0,
        };
        let mut first = r(1, 3);
        first.token_rounds = 4;
        let s = QueueStats {
            ranks: 3,
            per_rank: vec![first, r(9, 2), r(5, 1)],
        };
        assert_eq!(
            s.line(),
            "queue: ranks=3 items=30 steal_requests=6 served=3 refused=3 gifts=6 token_rounds=4 \
             wall_ms=50.0 idle_ms_min=1.0 idle_ms_median=5.0 idle_ms_max=9.0 idle_ms_sum=15.0"
        );
    }
}
