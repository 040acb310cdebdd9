//! `cargo xtask bench tar-select`: extracting 1% of a large archive (one directory of 100)
//! against extracting all of it, GNU tar and mfu-rs in the same run (interleaved, medians).
//!
//! The tree: 100 directories × 20 files × 512 KiB of random bytes (1000 MiB). GNU tar extracts
//! its own archive (no index: it reads every header in turn, and skips the data of the members
//! it does not take by seeking, or reading, as it decides); mfu-rs extracts its own archive
//! (indexed) at np 1, `--ranks 2` and `mpirun -np 2`, and GNU tar's archive at np 1 (no index:
//! rank 0 walks the chain of headers first). After the timings, one untimed run of each 1% case
//! under `strace -f` counts the bytes its read calls returned (`read`, `pread64`, `preadv`,
//! `copy_file_range`, `sendfile`, `splice`), against the archive's size: what "reads about 1%
//! of it" means, counted without timing noise.

use super::fsutil::{flush_fs, remove, s, same_tree};
use super::gen::make_random_tree;
use super::measure::{case, Case};
use super::sections::{compare, mfu_launches};
use anyhow::{ensure, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Runs of each command (each extracts up to 1000 MiB).
const RUNS: usize = 5;
/// Directories and files per directory of the tree, and the size of each file (bytes).
const TREE: (usize, usize, usize) = (100, 20, 512 << 10);
/// The directory selected: one of the 100.
const MEMBER: &str = "sel/d042";

/// The section.
pub fn bench_tar_select(b: &str, data: &Path) -> Result<()> {
    let tree = data.join("sel");
    if !tree.join("d099/f019.dat").exists() {
        let t = Instant::now();
        make_random_tree(&tree, TREE.0, TREE.1, TREE.2)?;
        eprintln!(
            "bench: made {} (100 × 20 × 512 KiB) in {:.1} s",
            tree.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let gnu = data.join("sel-gnu.tar");
    let mfu = data.join("sel-mfu.tar");
    let out = data.join("sel-out");
    let result = (|| {
        for a in [&gnu, &mfu] {
            remove(a)?;
        }
        crate::run(
            Command::new("tar")
                .args(["-cf", s(&gnu), "-C", s(data), "sel"])
                .stdout(Stdio::null()),
        )?;
        crate::run(Command::new(b).args(["tar", "-c", "-q", "-f", s(&mfu), "-C", s(data), "sel"]))?;
        flush_fs()?;
        let size = std::fs::metadata(&mfu)?.len();
        let (gp, mp, op) = (s(&gnu), s(&mfu), s(&out));
        let mut cases = Vec::new();
        for member in [None, Some(MEMBER)] {
            let label = if member.is_some() { "1%" } else { "all" };
            let mut g = vec!["tar", "-xf", gp, "-C", op];
            g.extend(member);
            cases.push(case(&format!("tar -xf, {label}"), false, &g));
            for (n, mpi, mut argv) in mfu_launches(b, "tar -x") {
                argv.extend(["tar", "-x", "-q", "-f", mp, "-C", op]);
                argv.extend(member);
                cases.push(case(&format!("{n}, {label}"), mpi, &argv));
            }
            let mut argv = vec![b, "tar", "-x", "-q", "-f", gp, "-C", op];
            argv.extend(member);
            cases.push(case(
                &format!("mfu-rs tar -x np1, GNU's archive (no index), {label}"),
                false,
                &argv,
            ));
        }
        let tree_c = tree.clone();
        let cases: Vec<Case> = cases
            .into_iter()
            .map(|c| {
                let (o1, o2, t2) = (out.clone(), out.clone(), tree_c.clone());
                let one = c.name.ends_with("1%");
                c.prep(move || {
                    remove(&o1)?;
                    std::fs::create_dir_all(&o1)?;
                    flush_fs()
                })
                .check(move || extracted(&t2, &o2, one))
            })
            .collect();
        compare(
            "tar extract: 1% of a 1000 MiB archive (one directory of 100) against all of it",
            &[
                "100 directories × 20 files × 512 KiB of random bytes; the 1% is `sel/d042`.",
                "GNU tar extracts its own archive; mfu-rs its own (indexed), and GNU tar's at np 1.",
                "Each run extracts into a fresh empty directory; its removal, creation and a `sync` before each run are not timed; no tool fsyncs.",
                "Checked once: the entries, types and bytes of the tree (or of `sel/d042`), and nothing else.",
            ],
            &cases,
            &[0, 5],
            RUNS,
        )?;
        println!(
            "\n### bytes read by one run of each 1% case (strace -f, untimed)\n\n\
             archive: {size} bytes ({:.1} MiB)\n\n\
             | command | bytes read | MiB | of the archive |\n|---|---|---|---|",
            size as f64 / (1 << 20) as f64
        );
        for c in cases.iter().filter(|c| c.name.ends_with("1%") && !c.mpi) {
            let read = bytes_read(c, data)?;
            println!(
                "| {} | {read} | {:.1} | {:.2}% |",
                c.name,
                read as f64 / (1 << 20) as f64,
                100.0 * read as f64 / size as f64
            );
        }
        Ok(())
    })();
    for p in [&gnu, &mfu, &out] {
        remove(p)?;
    }
    result
}

/// `out` holds `sel` with all of `tree` (`one`: only `d042` of it), same entries, types and
/// bytes.
fn extracted(tree: &Path, out: &Path, one: bool) -> Result<()> {
    let sel = out.join("sel");
    if !one {
        return same_tree(tree, &sel, false);
    }
    let top: Vec<_> = std::fs::read_dir(&sel)?
        .map(|e| Ok(e?.file_name()))
        .collect::<Result<_>>()?;
    ensure!(top == ["d042"], "{} holds {top:?}", sel.display());
    same_tree(&tree.join("d042"), &sel.join("d042"), false)
}

/// Bytes the read calls of one run of `c` returned, under `strace -f` (its prep first).
fn bytes_read(c: &Case, scratch: &Path) -> Result<u64> {
    if let Some(prep) = &c.prep {
        prep()?;
    }
    let log = scratch.join("strace-reads.txt");
    let inner = c.command();
    let status = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=read,pread64,readv,preadv,preadv2,copy_file_range,sendfile,splice",
            "-e",
            "status=successful",
            "-s",
            "0",
            "-o",
        ])
        .arg(&log)
        .arg(inner.get_program())
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("start strace")?;
    ensure!(status.success(), "strace -f {} failed: {status}", c.name);
    let text = std::fs::read_to_string(&log).with_context(|| format!("read {}", log.display()))?;
    remove(&log)?;
    Ok(sum_returns(&text))
}

/// The sum of the return values of the completed calls of an `strace` log (a call cut by
/// another thread's is counted on its `resumed` line, which carries the result; strace pads
/// short calls before their ` = `).
fn sum_returns(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.rsplit_once(" = ").map(|(_, r)| r))
        .filter_map(|r| r.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_logs_sum_the_bytes_returned() {
        let log = "\
123 read(3, \"\"..., 832)               = 832
123 pread64(4, \"\"..., 4096, 0) = 4096
124 copy_file_range(5, [512], 6, NULL, 1048576, 0 <unfinished ...>
124 <... copy_file_range resumed>) = 1048576
123 read(7, \"\", 10) = 0
";
        assert_eq!(sum_returns(log), 832 + 4096 + 1_048_576);
    }
}
