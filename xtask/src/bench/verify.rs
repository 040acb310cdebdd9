//! `cargo xtask bench section verify`: what `--verify` and `--manifest` cost on a copy, against
//! a plain copy and against what users do today (a copy, then a separate comparison that reads
//! both trees again).
//!
//! Data: 2 files of 256 MiB and 2,000 files of 64 KiB (random bytes, about 0.6 GiB) in
//! `target/bench-data`, on the workspace's file system. Cases, each into a fresh destination
//! (removed and `sync`ed before each run, untimed), interleaved, median of each:
//! `mfu-rs cp` (plain: copy_file_range), `cp --verify`, `cp --manifest` (BLAKE3), `cp
//! --manifest --manifest-hash sha256`, `cp --verify --manifest`, and `cp` then `mfu-rs cmp
//! SRC DST`; at np 1 and `--ranks 2`. `--verify` reads the copy back with O_DIRECT here (ext4),
//! so it includes the device writes the plain copy leaves to writeback: the ratio is the price
//! of a copy that is known to be on the disk.

use super::fsutil::{flush_fs, free_bytes, remove, s, same_tree};
use super::gen::make_random_tree;
use super::measure::case;
use super::sections::compare;
use anyhow::{ensure, Result};
use std::path::Path;
use std::time::Instant;

/// Runs of each case.
const RUNS: usize = 5;

/// Measure the verify section with the binary `b`; data under `data`.
pub fn bench_verify(b: &str, data: &Path) -> Result<()> {
    const NEED: u64 = 3 << 30;
    std::fs::create_dir_all(data)?;
    let free = free_bytes(data)?;
    ensure!(
        free >= NEED,
        "verify needs 3 GiB free on the file system of {}; df says {:.1} GiB",
        data.display(),
        free as f64 / (1u64 << 30) as f64
    );
    let src = data.join("verify-src");
    let t = Instant::now();
    make_random_tree(&src.join("big"), 1, 2, 256 << 20)?;
    make_random_tree(&src.join("small"), 20, 100, 64 << 10)?;
    eprintln!(
        "bench: made {} (2 × 256 MiB, 2,000 × 64 KiB) in {:.1} s",
        src.display(),
        t.elapsed().as_secs_f64()
    );
    let dst = data.join("verify-dst");
    let manifest = data.join("verify.manifest");
    let (sp, dp, mp) = (s(&src), s(&dst), s(&manifest));
    let mut cases = Vec::new();
    for (launch, ranks) in [("np1", None), ("--ranks 2", Some("2"))] {
        let mut base = vec![b.to_string()];
        if let Some(n) = ranks {
            base.extend(["--ranks".to_string(), n.to_string()]);
        }
        let cmd = |extra: &[&str]| -> Vec<String> {
            let mut c = base.clone();
            c.extend(["cp", "-q", "-p"].iter().map(|s| s.to_string()));
            c.extend(extra.iter().map(|s| s.to_string()));
            c.extend([sp.to_string(), dp.to_string()]);
            c
        };
        let both = format!(
            "{} && {} cmp -q {sp} {dp}",
            cmd(&[]).join(" "),
            base.join(" ")
        );
        cases.extend([
            case(&format!("cp {launch}"), false, &cmd(&[])),
            case(&format!("cp --verify {launch}"), false, &cmd(&["--verify"])),
            case(
                &format!("cp --manifest {launch}"),
                false,
                &cmd(&["--manifest", mp]),
            ),
            case(
                &format!("cp --manifest sha256 {launch}"),
                false,
                &cmd(&["--manifest-hash", "sha256", "--manifest", mp]),
            ),
            case(
                &format!("cp --verify --manifest {launch}"),
                false,
                &cmd(&["--verify", "--manifest", mp]),
            ),
            case(
                &format!("cp + cmp {launch}"),
                false,
                &["sh".to_string(), "-c".to_string(), both],
            ),
        ]);
    }
    let cases = cases
        .into_iter()
        .map(|c| {
            let (d1, m1, s2, d2) = (dst.clone(), manifest.clone(), src.clone(), dst.clone());
            c.prep(move || {
                remove(&d1)?;
                remove(&m1)?;
                flush_fs()
            })
            .check(move || same_tree(&s2, &d2, true))
        })
        .collect::<Vec<_>>();
    let result = compare(
        "cp --verify and --manifest, 2 × 256 MiB + 2,000 × 64 KiB",
        &[
            "Plain cp moves data with copy_file_range; --verify and --manifest read and write it (pread/pwrite) to hash it as it passes.",
            "--verify reads every written range back with O_DIRECT (from the device: the copy's writeback is part of its time); cp + cmp reads both trees again from the page cache.",
            "Speed columns: >1 = faster than `cp np1` and than `cp + cmp np1`.",
        ],
        &cases,
        &[0, 5],
        RUNS,
    );
    remove(&dst)?;
    remove(&manifest)?;
    remove(&src)?;
    result
}
