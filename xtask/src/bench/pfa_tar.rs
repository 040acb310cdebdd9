//! The tar interop of `mfu-rs pfa` (asked for by the tool's author): an aggregate of small files
//! becomes a tar by `pfa unpack` then `tar -c` of the tree it made, measured against archiving
//! the files themselves, and the unpack alone. A part of `cargo xtask bench section pfa`.

use super::fsutil::{flush_fs, remove, s, same_tree};
use super::gen::make_random_tree;
use super::measure::{case, measure, median, Case};
use super::workload::Fs;
use anyhow::{ensure, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Files a directory of the tree.
const PER_DIR: u64 = 1_000;
/// Bytes of each file.
const FILE_BYTES: usize = 4 << 10;

/// The medians of one file system's cases: (what, seconds).
#[derive(Clone, Debug)]
pub struct TarRows {
    /// `tmpfs` or `disk`.
    pub fs: &'static str,
    /// Files of the tree.
    pub files: u64,
    /// (case, median seconds), the first being GNU tar of the files.
    pub cases: Vec<(String, f64)>,
}

/// Whether `b` has the `pfa` command with `unpack` (a build without the pfa tool does not).
pub fn has_pfa(b: &str) -> bool {
    Command::new(b)
        .args(["pfa", "--help"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("unpack"))
}

/// Measure the cases on a tree of `files` files of 4 KiB under `dir` (on `fs`), packed once
/// (untimed) by `mpirun -np 2 mfu-rs pfa pack`.
pub fn run(b: &str, dir: &Path, fs: Fs, files: u64, runs: usize) -> Result<TarRows> {
    let (tree, agg) = (dir.join("tar-src"), dir.join("tar-src.pfa"));
    let (out, archive) = (dir.join("tar-unpacked"), dir.join("tar-out.tar"));
    let dirs = files.div_ceil(PER_DIR) as usize;
    make_random_tree(&tree, dirs, (files / dirs as u64) as usize, FILE_BYTES)?;
    remove(&agg)?;
    let mut pack = Command::new("mpirun");
    crate::mpi_env(&mut pack)
        .args(["-np", "2", b, "pfa", "pack", "-q", s(&tree), s(&agg)])
        .stdin(Stdio::null());
    crate::run(&mut pack)?;
    let (t, a, o, ar) = (s(&tree), s(&agg), s(&out), s(&archive));
    let unpack_then_tar = r#"mpirun -np 2 "$1" pfa unpack -q "$2" "$3" && mpirun -np 2 "$1" tar -c -q -f "$4" -C "$3" ."#;
    let cases = vec![
        case(
            "GNU tar -cf of the files",
            false,
            &["tar", "-cf", ar, "-C", t, "."],
        ),
        case(
            "mpirun -np 2 mfu-rs tar -c of the files",
            true,
            &[
                "mpirun", "-np", "2", b, "tar", "-c", "-q", "-f", ar, "-C", t, ".",
            ],
        ),
        case(
            "mpirun -np 2 mfu-rs pfa unpack",
            true,
            &["mpirun", "-np", "2", b, "pfa", "unpack", "-q", a, o],
        )
        .check({
            let (tree, out) = (tree.clone(), out.clone());
            move || same_tree(&tree, &out, false)
        }),
        case(
            "pfa unpack, then mfu-rs tar -c (mpirun -np 2 each)",
            true,
            &["sh", "-c", unpack_then_tar, "sh", b, a, o, ar],
        ),
    ];
    let cases: Vec<Case> = cases
        .into_iter()
        .map(|c| {
            let (o, ar) = (out.clone(), archive.clone());
            c.prep(move || {
                remove(&o)?;
                remove(&ar)?;
                if fs == Fs::Disk {
                    flush_fs()?;
                }
                Ok(())
            })
        })
        .collect();
    let measured = measure(&cases, runs, true);
    for p in [&tree, &agg, &out, &archive] {
        remove(p)?;
    }
    let (times, warnings) = measured?;
    ensure!(
        warnings.is_empty(),
        "pfa unpack made a tree unlike the one packed: {:?}",
        warnings
    );
    Ok(TarRows {
        fs: fs.name(),
        files,
        cases: cases
            .iter()
            .zip(times)
            .map(|(c, t)| (c.name.clone(), median(t.iter().map(|r| r.secs).collect())))
            .collect(),
    })
}
