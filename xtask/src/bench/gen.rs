//! Workload generators: trees of files of given sizes and contents, and text lists.

use super::fsutil::flush_fs;
use anyhow::{Context, Result};
use mfu_benches::Rng;
use std::path::Path;

/// `files` files of up to 4 KiB (`x` bytes) in directories of 100, made once (a `.complete`
/// marker says the tree is whole).
pub fn make_tree(dir: &Path, files: usize) -> Result<()> {
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

/// A text list of `records` paths of about 60 bytes (`path|F` lines), made once.
pub fn make_list(path: &Path, records: usize) -> Result<()> {
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

/// `dirs` directories of `files` files of `size` random bytes each, then `sync`.
pub fn make_random_tree(dir: &Path, dirs: usize, files: usize, size: usize) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let mut rng = Rng(0x5EED ^ size as u64);
    let mut buf = vec![0u8; size.min(4 << 20)];
    for d in 0..dirs {
        let sub = dir.join(format!("d{d:03}"));
        std::fs::create_dir_all(&sub)?;
        for f in 0..files {
            write_file(&sub.join(format!("f{f:03}.dat")), size, &mut buf, |b| {
                rng.fill(b)
            })?;
        }
    }
    flush_fs()
}

/// Write `size` bytes to a new file at `path`, `buf` at a time, each filled by `fill`.
pub fn write_file(
    path: &Path,
    size: usize,
    buf: &mut [u8],
    mut fill: impl FnMut(&mut [u8]),
) -> Result<()> {
    let mut out = std::io::BufWriter::with_capacity(
        buf.len(),
        std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?,
    );
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len());
        fill(&mut buf[..n]);
        std::io::Write::write_all(&mut out, &buf[..n])?;
        left -= n;
    }
    std::io::Write::flush(&mut out)?;
    Ok(())
}

/// What a generated file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Incompressible pseudo-random bytes.
    Random,
    /// Lower-case hex text (compresses about 2:1).
    Hex,
}

/// One group of a [`Layout`]: `dirs` directories `KIND/dNN` of `files` files `fNNN.dat` of
/// `bytes` bytes each.
#[derive(Clone, Copy, Debug)]
pub struct Group {
    /// Name of the group's top directory.
    pub kind: &'static str,
    /// Directories in the group.
    pub dirs: usize,
    /// Files per directory.
    pub files: usize,
    /// Bytes per file.
    pub bytes: u64,
}

/// A tree described by groups of equal files; several groups of falling counts and rising
/// sizes make a long tail.
pub type Layout = [Group];

/// Write `layout` under `dir` (made once: the last file at its full size means the tree is
/// whole), with contents from the seeded generator, then `sync`. Returns true when it wrote.
pub fn write_layout(dir: &Path, layout: &Layout, seed: u64, fill: Fill) -> Result<bool> {
    let last = layout.iter().rev().find(|g| g.dirs * g.files > 0);
    if let Some(g) = last {
        let p = dir.join(format!(
            "{}/d{:02}/f{:03}.dat",
            g.kind,
            g.dirs - 1,
            g.files - 1
        ));
        if std::fs::metadata(p).is_ok_and(|m| m.len() == g.bytes) {
            return Ok(false);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    let mut rng = Rng(seed);
    let mut buf = vec![0u8; 4 << 20];
    for g in layout {
        for d in 0..g.dirs {
            let sub = dir.join(format!("{}/d{d:02}", g.kind));
            std::fs::create_dir_all(&sub).with_context(|| format!("mkdir {}", sub.display()))?;
            for f in 0..g.files {
                write_file(
                    &sub.join(format!("f{f:03}.dat")),
                    g.bytes as usize,
                    &mut buf,
                    |b| match fill {
                        Fill::Random => rng.fill(b),
                        Fill::Hex => rng.fill_hex(b),
                    },
                )?;
            }
        }
    }
    flush_fs()?;
    Ok(true)
}
