//! A timed phase of a workload: every rank starts after a barrier and the clock stops when the
//! last rank is done.

use std::time::Instant;
use steal::{Comm, CommExt};

/// Run `f` on every rank from a barrier; its seconds on rank 0 from the barrier to the moment
/// every rank had finished (the slowest rank's time), or this rank's error, or a note that
/// another rank failed.
pub fn timed<T>(
    comm: &dyn Comm,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<(T, f64), String> {
    comm.barrier();
    let t = Instant::now();
    let r = f();
    let all_ok = comm.all(r.is_ok());
    let secs = t.elapsed().as_secs_f64();
    let v = r?;
    if !all_ok {
        return Err("another rank failed (see its message)".into());
    }
    Ok((v, secs))
}

/// Every rank agrees that `r` is Ok on all of them (a collective): this rank's error, or a note
/// that another rank failed.
pub fn agree<T>(comm: &dyn Comm, r: Result<T, String>) -> Result<T, String> {
    let all_ok = comm.all(r.is_ok());
    let v = r?;
    if !all_ok {
        return Err("another rank failed (see its message)".into());
    }
    Ok(v)
}

/// Megabytes (10^6 bytes) a second.
pub fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / 1e6 / secs.max(1e-9)
}
