//! `MFU_RS_STATS=1`: at the end of a run, rank 0 prints one line per work-queue run to stderr
//! (steal requests sent and served, idle time per rank, termination rounds; see
//! [`steal::stats`]), e.g. `mfu-rs walk stats: queue: ranks=64 items=20200 steal_requests=...`.
//! `cargo xtask bench` reads them for its `--ranks 64` rows. After them, a line says whether the
//! progress runtime was started (`mfu-rs walk stats: progress: runtime_started=0`): a run that
//! ends within its first progress interval must not start it.

/// Print the work-queue statistics this process gathered (rank 0's), if any.
pub fn print(tool: &str) {
    use std::io::Write;
    let mut lines: String = steal::stats::take()
        .iter()
        .map(|q| format!("mfu-rs {tool} stats: {}\n", q.line()))
        .collect();
    // After rank 0's queue lines (the process that has them: under mpirun the others print none).
    if !lines.is_empty() {
        lines += &format!(
            "mfu-rs {tool} stats: progress: runtime_started={}\n",
            steal::progress::runtime_starts()
        );
    }
    if !lines.is_empty() {
        // Nothing sensible is left to do when stderr itself fails.
        let _ = std::io::stderr().lock().write_all(lines.as_bytes());
    }
}
