//! The tar-gz section of `cargo xtask bench`: gzip-compressed archives of the mixed tree
//! (about 1 GiB of hex text, which gzip compresses about 2:1).
//!
//! - create: `tar -czf` (GNU tar through gzip, one core), `tar -I pigz -cf` (pigz on every
//!   core), and `mfu-rs tar -c --gzip` (independent members, compressed on every rank and
//!   thread) at np 1, `--ranks 2` and `mpirun -np 2`;
//! - extract GNU tar's archive (one gzip stream, which only decompresses front to back):
//!   `tar -xzf`, `tar -I pigz -xf` (pigz decompresses on one thread, with reading, writing
//!   and checking on others) and `mfu-rs tar -x` (a decoder thread beside the extraction) at
//!   np 1;
//! - extract mfu-rs's `--gzip` archive: `tar -xzf` of it, and `mfu-rs tar -x` at np 1,
//!   `--ranks 2` and `mpirun -np 2` (members decompressed in parallel).
//!
//! Then the sizes of the archives. Medians of interleaved runs, warm cache, as every section.

use super::fsutil::{archive_ok, extracted_ok, flush_fs, remove, s, tree_stats};
use super::measure::{case, Case};
use super::sections::{compare, mfu_launches, mixed_tree, MIXED};
use crate::setup::have;
use anyhow::{ensure, Result};
use std::path::Path;
use std::process::Command;

/// Runs of each command (each compresses or extracts 1 GiB).
const RUNS: usize = 3;

/// `cargo xtask bench tar-gz`.
pub fn bench_tar_gz(b: &str, data: &Path) -> Result<()> {
    ensure!(
        have("pigz"),
        "pigz is not on PATH: install it with `cargo xtask setup`"
    );
    let tree = mixed_tree(data)?;
    let name = "mixed-src";
    let (entries, data_bytes, _) = tree_stats(&tree)?;
    let new = data.join("gz-new.tar.gz");
    let gnu = data.join("gz-gnu.tar.gz");
    let mfu = data.join("gz-mfu.tar.gz");
    let out = data.join("gz-out");
    let result = (|| {
        let (dp, np) = (s(data), s(&new));
        let mut create = vec![
            case("tar -czf", false, &["tar", "-czf", np, "-C", dp, name]),
            case(
                "tar -I pigz -cf",
                false,
                &["tar", "-I", "pigz", "-cf", np, "-C", dp, name],
            ),
        ];
        for (n, mpi, mut argv) in mfu_launches(b, "tar -c --gzip") {
            argv.extend(["tar", "-c", "-q", "--gzip", "-f", np, "-C", dp, name]);
            create.push(case(&n, mpi, &argv));
        }
        let create: Vec<Case> = create
            .into_iter()
            .map(|c| {
                let (n1, n2, d2) = (new.clone(), new.clone(), data.to_path_buf());
                c.prep(move || {
                    remove(&n1)?;
                    flush_fs()
                })
                .check(move || archive_ok(&n2, &d2, entries))
            })
            .collect();
        compare(
            &format!("tar.gz create, {MIXED}"),
            &[
                "Each run writes a fresh archive from the data directory (`-C`); its removal and a `sync` before each run are not timed; no tool fsyncs.",
                "gzip level 6 everywhere (gzip's, pigz's and mfu-rs's default).",
                "Checked once: GNU `tar -tf` lists every entry of the tree and `tar -d` finds no difference with the tree.",
            ],
            &create,
            &[0, 1],
            RUNS,
        )?;
        remove(&new)?;

        // The archives extracted, made once, untimed.
        remove(&gnu)?;
        remove(&mfu)?;
        crate::run(Command::new("tar").args(["-czf", s(&gnu), "-C", dp, name]))?;
        crate::run(Command::new(b).args([
            "tar",
            "-c",
            "-q",
            "--gzip",
            "-f",
            s(&mfu),
            "-C",
            dp,
            name,
        ]))?;
        flush_fs()?;
        let (gp, mp, op) = (s(&gnu), s(&mfu), s(&out));
        let mut extract = vec![
            case(
                "tar -xzf (GNU's archive)",
                false,
                &["tar", "-xzf", gp, "-C", op],
            ),
            case(
                "tar -I pigz -xf (GNU's archive)",
                false,
                &["tar", "-I", "pigz", "-xf", gp, "-C", op],
            ),
            case(
                "mfu-rs tar -x np1 (GNU's archive, one stream)",
                false,
                &[b, "tar", "-x", "-q", "-f", gp, "-C", op],
            ),
            case(
                "tar -xzf (mfu-rs's --gzip archive)",
                false,
                &["tar", "-xzf", mp, "-C", op],
            ),
        ];
        for (n, mpi, mut argv) in mfu_launches(b, "tar -x (its --gzip archive)") {
            argv.extend(["tar", "-x", "-q", "-f", mp, "-C", op]);
            extract.push(case(&n, mpi, &argv));
        }
        let extract: Vec<Case> = extract
            .into_iter()
            .map(|c| {
                let (o1, o2, t2) = (out.clone(), out.clone(), tree.clone());
                // GNU tar extracts the dtar index member of mfu-rs's archive as a file.
                let gnu_of_mfu = c.name.starts_with("tar -xzf (mfu-rs");
                let c = c.prep(move || {
                    remove(&o1)?;
                    std::fs::create_dir_all(&o1)?;
                    flush_fs()
                });
                if gnu_of_mfu {
                    c
                } else {
                    c.check(move || extracted_ok(&t2, &o2))
                }
            })
            .collect();
        compare(
            &format!("tar.gz extract, {MIXED}"),
            &[
                "Each run extracts into a fresh empty directory; its removal, creation and a `sync` before each run are not timed; no tool fsyncs.",
                "GNU's archive is one gzip stream (`tar -czf`); mfu-rs's is independent members with an end member (`--gzip`).",
                "Checked once (not GNU tar's extraction of mfu-rs's archive, which holds the dtar index member as a file): the same entries, types and bytes as the tree, and nothing else.",
            ],
            &extract,
            &[0, 1],
            RUNS,
        )?;
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len());
        let (g, m) = (size(&gnu)?, size(&mfu)?);
        println!("\n### archive sizes, {MIXED}\n");
        println!("file data: {data_bytes} bytes\n");
        println!("| archive | bytes | archive / file data |\n|---|---|---|");
        for (n, v) in [("GNU tar -czf", g), ("mfu-rs tar -c --gzip", m)] {
            println!("| {n} | {v} | {:.3} |", v as f64 / data_bytes as f64);
        }
        Ok(())
    })();
    for p in [&new, &gnu, &mfu, &out] {
        remove(p)?;
    }
    result
}
