//! `cargo xtask bench section resume`: finishing a 4 GiB file whose copy was killed half-way,
//! with its journal (only the missing chunks are copied) against without it (copied again
//! whole, as before journals), and a whole copy for reference; on tmpfs (`/dev/shm`, when it
//! has room) and on the workspace's file system.
//!
//! The half-done state is made before each timed run, untimed: `mfu-rs --ranks 2 cp
//! --chunksize 64MiB` of the 64-chunk file, killed with SIGKILL by the test seam right after
//! its 32nd chunk is recorded (`MFU_RS_TEST_KILL_AFTER_MARKS`), then `sync(1)`.

use super::fsutil::{flush_fs, free_bytes, remove, s};
use super::gen::write_file;
use super::measure::{case, loadavg, measure, median, Case};
use anyhow::{ensure, Context, Result};
use mfu_benches::Rng;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The file: 4 GiB in 64 chunks of 64 MiB.
const SIZE: u64 = 4 << 30;
const CHUNK: &str = "64MiB";
const CHUNKS: u64 = 64;
/// Runs of each case.
const RUNS: usize = 5;

/// Entry point of the section.
pub fn bench_resume(b: &str, data: &Path) -> Result<()> {
    let shm = Path::new("/dev/shm");
    let mut places: Vec<(PathBuf, &str)> = Vec::new();
    if free_bytes(shm).unwrap_or(0) >= 3 * SIZE {
        places.push((shm.join("mfu-rs-bench-resume"), "tmpfs (/dev/shm)"));
    } else {
        println!("\n(resume: /dev/shm has less than 12 GiB free: tmpfs not measured)");
    }
    std::fs::create_dir_all(data)?;
    ensure!(
        free_bytes(data)? >= 3 * SIZE,
        "resume needs 12 GiB free on the file system of {}",
        data.display()
    );
    places.push((data.join("resume"), "the workspace's file system"));
    for (dir, what) in &places {
        let result = bench_in(b, dir, what);
        remove(dir)?;
        result?;
    }
    Ok(())
}

/// The journal of `dst`.
fn journal_of(dst: &Path) -> PathBuf {
    let name = dst.file_name().expect("a file name").to_string_lossy();
    dst.with_file_name(format!(".{name}.mfu-partial"))
}

/// Copy `src` to `dst` and let the test seam kill it half-way; the journal must be there.
fn half_copy(b: &str, src: &Path, dst: &Path) -> Result<()> {
    remove(dst)?;
    remove(&journal_of(dst))?;
    let status = Command::new(b)
        .args(["--ranks", "2", "cp", "-q", "--chunksize", CHUNK])
        .arg(src)
        .arg(dst)
        .env("MFU_RS_TEST_KILL_AFTER_MARKS", (CHUNKS / 2).to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("start the copy to kill")?;
    ensure!(!status.success(), "the copy to kill half-way finished");
    ensure!(
        journal_of(dst).exists(),
        "no journal beside the half-done {}",
        dst.display()
    );
    flush_fs()
}

fn bench_in(b: &str, dir: &Path, what: &str) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let (src, dst) = (dir.join("big"), dir.join("copy"));
    let t = Instant::now();
    let mut rng = Rng(0x4E5);
    let mut buf = vec![0u8; 4 << 20];
    write_file(&src, SIZE as usize, &mut buf, |b| rng.fill(b))?;
    flush_fs()?;
    eprintln!(
        "bench: made {} (4 GiB) in {:.1} s",
        src.display(),
        t.elapsed().as_secs_f64()
    );
    let sync_cmd = [
        b,
        "--ranks",
        "2",
        "sync",
        "-q",
        "--chunksize",
        CHUNK,
        s(&src),
        s(&dst),
    ];
    let check = |src: &Path, dst: &Path| {
        let (src, dst) = (src.to_path_buf(), dst.to_path_buf());
        move || {
            let same = Command::new("cmp")
                .arg("-s")
                .arg(&src)
                .arg(&dst)
                .status()
                .is_ok_and(|s| s.success());
            ensure!(same, "{} differs from {}", dst.display(), src.display());
            Ok(())
        }
    };
    let (bb, s1, d1) = (b.to_string(), src.clone(), dst.clone());
    let (bb2, s2, d2) = (b.to_string(), src.clone(), dst.clone());
    let d3 = dst.clone();
    let cases: Vec<Case> = vec![
        case(
            "sync, resuming (journal: 32 of 64 chunks)",
            false,
            &sync_cmd,
        )
        .prep(move || half_copy(&bb, &s1, &d1))
        .check(check(&src, &dst)),
        case("sync, copying again (journal removed)", false, &sync_cmd)
            .prep(move || {
                half_copy(&bb2, &s2, &d2)?;
                remove(&journal_of(&d2))
            })
            .check(check(&src, &dst)),
        case(
            "cp into a fresh destination",
            false,
            &[
                b,
                "--ranks",
                "2",
                "cp",
                "-q",
                "--chunksize",
                CHUNK,
                s(&src),
                s(&dst),
            ],
        )
        .prep(move || {
            remove(&d3)?;
            flush_fs()
        })
        .check(check(&src, &dst)),
    ];
    let load_before = loadavg();
    let started = Instant::now();
    let (times, warnings) = measure(&cases, RUNS, false)?;
    let medians: Vec<f64> = times
        .iter()
        .map(|t| median(t.iter().map(|r| r.secs).collect()))
        .collect();
    println!("\n## resume: a 4 GiB file killed half-way, on {what} (median of {RUNS} interleaved runs)\n");
    println!("`mfu-rs --ranks 2`, chunks of 64 MiB; the half-done copy is made before each run, untimed.  ");
    for (_, w) in warnings {
        println!("(warning: {w})  ");
    }
    println!("\n| case | median s | vs copying again (>1 = faster) |\n|---|---|---|");
    for (c, m) in cases.iter().zip(&medians) {
        println!("| {} | {m:.3} | {:.2} |", c.name, medians[1] / m);
    }
    // What a resuming sync wrote and kept (one more run, untimed).
    half_copy(b, &src, &dst)?;
    let out = Command::new(b)
        .args(["--ranks", "2", "sync", "--json", "--chunksize", CHUNK])
        .arg(&src)
        .arg(&dst)
        .output()
        .context("start sync --json")?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("sync --json's report")?;
    println!(
        "\nA resuming sync wrote {} bytes and kept {} of {SIZE} (the chunks recorded when the copy was killed).",
        v["bytes"], v["resumed_bytes"]
    );
    println!(
        "(section wall time {:.0} s, load average before: {load_before}, after: {})",
        started.elapsed().as_secs_f64(),
        loadavg()
    );
    Ok(())
}
