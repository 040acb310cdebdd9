//! Two probes besides the comparison: start-up (walking an empty directory) and peak memory
//! of a walk of a million files.

use super::fsutil::{remove, s};
use super::measure::{case, measure, median, time_once};
use super::report::{Memory, Startup};
use anyhow::{Context, Result};
use std::path::Path;
use std::process::Command;

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

/// Peak resident memory of `mfu-rs walk` (one rank) over `dirs` × 1000 empty files whose paths
/// are 60 bytes long, made under `base` and removed after.
pub fn memory(bin: &Path, base: &Path, dirs: usize) -> Result<Memory> {
    const FILES_PER_DIR: usize = 1000;
    const PATH_BYTES: usize = 60;
    let tree = base.join("mem");
    remove(&tree)?;
    // DIR/dNNN/fNNNNNN-xxx..: padded so that every file's path is PATH_BYTES long.
    let prefix = s(&tree).len() + "/d000/f000000-".len();
    let pad = "x".repeat(PATH_BYTES.saturating_sub(prefix).max(1));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| -> Result<()> {
        let jobs: Vec<_> = (0..threads)
            .map(|t| {
                let (tree, pad) = (&tree, &pad);
                scope.spawn(move || -> Result<()> {
                    for d in (t..dirs).step_by(threads) {
                        let dir = tree.join(format!("d{d:03}"));
                        std::fs::create_dir_all(&dir)
                            .with_context(|| format!("mkdir {}", dir.display()))?;
                        for f in 0..FILES_PER_DIR {
                            let p = dir.join(format!("f{:06}-{pad}", d * FILES_PER_DIR + f));
                            std::fs::File::create(&p)
                                .with_context(|| format!("create {}", p.display()))?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for j in jobs {
            j.join().expect("a file-making thread panicked")?;
        }
        Ok(())
    })?;
    let files = (dirs * FILES_PER_DIR) as u64;
    let run = time_once(&case("walk", false, &[s(bin), "walk", "-q", s(&tree)]))?;
    // Removed by mfu-rs itself: a million unlinks take a while one at a time.
    crate::run(Command::new(bin).args(["rm", "-q", s(&tree)]))?;
    Ok(Memory {
        name: "mfu-rs walk (np 1)".into(),
        files,
        path_bytes: (prefix + pad.len()) as u64,
        max_rss_kib: run.max_rss_kib,
        mib_per_million: run.max_rss_kib as f64 / 1024.0 * 1e6 / files as f64,
    })
}
