//! `cargo xtask bench`: whole-tool comparisons with the classic tools, measured side by side in
//! one run (runs interleaved, median of each), on a warm page cache.
//!
//! - walk: a 20,000-file tree; `mfu-rs walk` (stat) at np 1 and np 2 against `find -printf`
//!   (which stats every entry), and `mfu-rs walk -l` (no stat) against plain `find`.
//! - sort: a text list of 1,000,000 paths; `mfu-rs walk -i LIST -s name -o OUT` at np 1 and np 2
//!   against `LC_ALL=C sort LIST -o OUT`.

use crate::{mpi_env, root};
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Runs of each command.
const RUNS: usize = 7;

struct Case {
    name: String,
    cmd: Vec<String>,
    mpi: bool,
}

fn case(name: &str, mpi: bool, cmd: &[&str]) -> Case {
    Case {
        name: name.into(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        mpi,
    }
}

fn time_once(c: &Case) -> Result<f64> {
    let mut cmd = Command::new(&c.cmd[0]);
    cmd.args(&c.cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if c.mpi {
        mpi_env(&mut cmd);
    }
    let t = Instant::now();
    let status = cmd.status()?;
    let secs = t.elapsed().as_secs_f64();
    anyhow::ensure!(status.success(), "{} failed: {status}", c.cmd.join(" "));
    Ok(secs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Run every case RUNS times, interleaved, after one warm-up each; print medians and ratios to
/// the case at index `peer`.
fn compare(title: &str, cases: &[Case], peer: usize) -> Result<()> {
    for c in cases {
        time_once(c)?;
    }
    let mut times = vec![Vec::new(); cases.len()];
    for _ in 0..RUNS {
        for (i, c) in cases.iter().enumerate() {
            times[i].push(time_once(c)?);
        }
    }
    let medians: Vec<f64> = times.into_iter().map(median).collect();
    println!("\n## {title} (median of {RUNS} interleaved runs, warm cache)\n");
    println!(
        "| command | median s | speed vs {} (>1 = faster) |",
        cases[peer].name
    );
    println!("|---|---|---|");
    for (c, m) in cases.iter().zip(&medians) {
        println!("| {} | {m:.3} | {:.2} |", c.name, medians[peer] / m);
    }
    Ok(())
}

fn make_tree(dir: &Path, files: usize) -> Result<()> {
    if dir.join(".complete").exists() {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(dir);
    let per_dir = 100;
    for i in 0..files / per_dir {
        let d = dir.join(format!("top{:02}/dir{:04}", i % 20, i));
        std::fs::create_dir_all(&d)?;
        for f in 0..per_dir {
            std::fs::write(
                d.join(format!("file{f:03}.dat")),
                vec![b'x'; (f * 41) % 4096],
            )?;
        }
    }
    std::fs::write(dir.join(".complete"), b"")?;
    Ok(())
}

fn make_list(path: &Path, records: usize) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    // Paths of about 60 bytes in a pseudo-random order (a multiplicative hash of the index).
    let mut text = Vec::with_capacity(records * 64);
    for i in 0..records as u64 {
        let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        text.extend_from_slice(
            format!(
                "/lustre/project/run{:03}/step{:05}/output-{:016x}.h5|F\n",
                h % 997,
                (h >> 20) % 99_991,
                h
            )
            .as_bytes(),
        );
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// Entry point of `cargo xtask bench [walk|sort]`.
pub fn run(args: &[String]) -> Result<()> {
    crate::setup::ensure()?;
    let root = root();
    crate::run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(&root)
            .args(["build", "--release", "-p", "mfu-rs"]),
    )?;
    let bin: PathBuf = root.join("target/release/mfu-rs");
    let b = bin.to_str().expect("UTF-8 target path");
    let work = std::env::temp_dir().join("mfu-rs-bench");
    std::fs::create_dir_all(&work)?;
    let which = args.first().map(String::as_str);
    if which.is_none() || which == Some("walk") {
        let tree = work.join("tree20k");
        make_tree(&tree, 20_000)?;
        let t = tree.to_str().expect("UTF-8 temp path");
        compare(
            "walk with stat, 20,000 files",
            &[
                case(
                    "find -printf (stats)",
                    false,
                    &["find", t, "-printf", "%s %T@ %m\\n"],
                ),
                case("mfu-rs walk np1", false, &[b, "walk", "-q", t]),
                case(
                    "mpirun -np 2 mfu-rs walk",
                    true,
                    &["mpirun", "-np", "2", b, "walk", "-q", t],
                ),
            ],
            0,
        )?;
        compare(
            "lite walk (no stat), 20,000 files",
            &[
                case("find", false, &["find", t]),
                case("mfu-rs walk -l np1", false, &[b, "walk", "-q", "-l", t]),
                case(
                    "mpirun -np 2 mfu-rs walk -l",
                    true,
                    &["mpirun", "-np", "2", b, "walk", "-q", "-l", t],
                ),
            ],
            0,
        )?;
    }
    if which.is_none() || which == Some("sort") {
        let list = work.join("list1m.txt");
        make_list(&list, 1_000_000)?;
        let l = list.to_str().expect("UTF-8 temp path");
        let out = work.join("sorted.txt");
        let o = out.to_str().expect("UTF-8 temp path");
        compare(
            "sort 1,000,000 paths by name",
            &[
                case(
                    "LC_ALL=C sort",
                    false,
                    &["env", "LC_ALL=C", "sort", l, "-o", o],
                ),
                case(
                    "mfu-rs walk -s name np1",
                    false,
                    &[b, "walk", "-q", "-i", l, "-s", "name", "-o", o],
                ),
                case(
                    "mpirun -np 2 mfu-rs walk -s name",
                    true,
                    &[
                        "mpirun", "-np", "2", b, "walk", "-q", "-i", l, "-s", "name", "-o", o,
                    ],
                ),
            ],
            0,
        )?;
    }
    Ok(())
}
