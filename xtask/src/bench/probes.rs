//! A probe besides the comparison: start-up (walking an empty directory).

use super::fsutil::{remove, s};
use super::measure::{case, measure, median};
use super::report::Startup;
use anyhow::{Context, Result};
use std::path::Path;

/// Median wall time of `mfu-rs walk` and of `find` on an empty directory under `base`, `runs`
/// interleaved runs each.
pub fn startup(bin: &Path, base: &Path, runs: usize) -> Result<Vec<Startup>> {
    let empty = base.join("empty");
    remove(&empty)?;
    std::fs::create_dir_all(&empty).with_context(|| format!("mkdir {}", empty.display()))?;
    let e = s(&empty);
    let cases = [
        case("mfu-rs walk (np 1)", false, &[s(bin), "walk", "-q", e]),
        case("find", false, &["find", e]),
    ];
    let (times, _) = measure(&cases, runs, true)?;
    Ok(cases
        .iter()
        .zip(times)
        .map(|(c, t)| Startup {
            name: c.name.clone(),
            median_ms: median(t.iter().map(|r| r.secs).collect()) * 1e3,
            runs,
        })
        .collect())
}
