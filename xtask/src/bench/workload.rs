//! The workloads of the comparison: what trees are made, where, and how big.

use super::fsutil::{flush_fs, remove, s, tree_stats};
use super::gen::{write_layout, Fill, Group};
use anyhow::{ensure, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// A kind of tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Many small files: 20,000 × 4 KiB in about 240 directories, by `mfu-rs filemaker`.
    Small,
    /// Mixed sizes with a long tail: many tiny and small files, fewer and fewer big ones
    /// (6,222 files, 512 B to 64 MiB, 0.5 GiB).
    Mixed,
    /// A few big files (2 × 1 GiB by default).
    Big,
    /// A real tree: a copy of `/usr/include` (headers, nested directories, symbolic links).
    Real,
    /// A deep tree: 3,000 nested directories with a small file each, paths far beyond
    /// `PATH_MAX` (copied and extracted only).
    Deep,
}

impl Kind {
    /// Every kind, in the order they run.
    pub const ALL: [Kind; 5] = [Kind::Small, Kind::Mixed, Kind::Big, Kind::Real, Kind::Deep];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Small => "small",
            Kind::Mixed => "mixed",
            Kind::Big => "big",
            Kind::Real => "real",
            Kind::Deep => "deep",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Where a workload lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    /// `/dev/shm`: memory only, so the tools' own costs show.
    Tmpfs,
    /// The file system of the workspace (`target/bench-data`).
    Disk,
}

impl Fs {
    /// Both, in the order they run.
    pub const ALL: [Fs; 2] = [Fs::Tmpfs, Fs::Disk];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Fs::Tmpfs => "tmpfs",
            Fs::Disk => "disk",
        }
    }

    /// The fs named `name`.
    pub fn parse(name: &str) -> Option<Fs> {
        Fs::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The bench's directory on this file system (one per bench process: two runs at once,
    /// such as the test suite's smoke run beside a real one, must not share workloads).
    pub fn base(self, root: &Path) -> PathBuf {
        let me = format!("matrix-{}", std::process::id());
        match self {
            Fs::Tmpfs => PathBuf::from("/dev/shm/mfu-rs-bench").join(me),
            Fs::Disk => root.join("target/bench-data").join(me),
        }
    }
}

/// A tree made for the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    /// Its kind.
    pub kind: Kind,
    /// What it is, for tables (`20,000 × 4 KiB`).
    pub label: String,
    /// Its root directory.
    #[serde(skip)]
    pub src: PathBuf,
    /// Entries (directories, files, links; the root included).
    pub entries: u64,
    /// Bytes of regular files.
    pub bytes: u64,
    /// Regular files.
    pub files: u64,
}

/// Sizes of the workloads: full, or `--quick` (a smoke run of the harness itself).
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Files of the small tree.
    pub small_files: u64,
    /// Divisor of the mixed layout's counts (1 full, 10 quick).
    pub mixed_div: usize,
    /// Bytes of each of the two big files.
    pub big_bytes: u64,
    /// The real tree copied.
    pub real: &'static str,
    /// Levels of the deep tree, and the name of each of its directories.
    pub deep: (usize, &'static str),
    /// Empty files of the memory rows' tree.
    pub memory_files: u64,
}

impl Scale {
    /// The full sizes.
    pub const FULL: Scale = Scale {
        small_files: 20_000,
        mixed_div: 1,
        big_bytes: 1 << 30,
        real: "/usr/include",
        deep: (3_000, "d"),
        memory_files: 1_000_000,
    };
    /// A smoke run: every path of the harness, seconds instead of minutes.
    pub const QUICK: Scale = Scale {
        small_files: 2_000,
        mixed_div: 20,
        big_bytes: 32 << 20,
        real: "/usr/include/linux",
        // Fewer levels, longer names: still paths beyond PATH_MAX (4,100 bytes).
        deep: (100, "dddddddddddddddddddddddddddddddddddddddd"),
        memory_files: 5_000,
    };
}

/// The mixed tree: a long tail of sizes (counts fall as sizes rise), about 0.5 GiB (on this
/// VM's disk, writing back each run's copy costs about 3 s).
fn mixed_layout(div: usize) -> Vec<Group> {
    [
        ("tiny", 20, 100, 512),
        ("small", 40, 100, 16 << 10),
        ("medium", 2, 100, 1 << 20),
        ("large", 1, 20, 8 << 20),
        ("huge", 1, 2, 64 << 20),
    ]
    .into_iter()
    .map(|(kind, dirs, files, bytes)| {
        if div == 1 {
            return Group {
                kind,
                dirs,
                files,
                bytes,
            };
        }
        // Scaled down: a 1/div share of each group's files, in one directory, big sizes too.
        Group {
            kind,
            dirs: 1,
            files: (dirs * files / div).max(1),
            bytes: if bytes > 1 << 20 {
                bytes / div as u64
            } else {
                bytes
            },
        }
    })
    .collect()
}

/// Make (once per directory: a `.ok` marker beside it says it is whole) the workload `kind`
/// under `base`, with `bin` for the generator of the small tree.
pub fn make(kind: Kind, base: &Path, bin: &Path, scale: Scale) -> Result<Workload> {
    std::fs::create_dir_all(base).with_context(|| format!("mkdir {}", base.display()))?;
    let src = base.join(kind.name());
    let marker = base.join(format!("{}.ok", kind.name()));
    let t = Instant::now();
    if !marker.exists() {
        remove(&src)?;
        match kind {
            Kind::Small => {
                // 1% of the items are directories (about 200 files each), two levels deep.
                let items = scale.small_files * 100 / 99;
                crate::run(Command::new(bin).args([
                    "filemaker",
                    "-q",
                    "-n",
                    &items.to_string(),
                    "-d",
                    "2",
                    "--files",
                    "99",
                    "--links",
                    "0",
                    "-s",
                    "4k-4k",
                    s(&src),
                ]))?;
                flush_fs()?;
            }
            Kind::Mixed => {
                write_layout(&src, &mixed_layout(scale.mixed_div), 0x313, Fill::Random)?;
            }
            Kind::Big => {
                let big = [Group {
                    kind: "big",
                    dirs: 1,
                    files: 2,
                    bytes: scale.big_bytes,
                }];
                write_layout(&src, &big, 0xB16, Fill::Random)?;
            }
            Kind::Real => {
                ensure!(
                    Path::new(scale.real).is_dir(),
                    "{} is missing: the real-tree workload copies it",
                    scale.real
                );
                crate::run(Command::new("cp").args(["-a", scale.real, s(&src)]))?;
                flush_fs()?;
            }
            Kind::Deep => {
                super::deep::make(&src, scale.deep.0, scale.deep.1)?;
                flush_fs()?;
            }
        }
        std::fs::write(&marker, b"").with_context(|| format!("create {}", marker.display()))?;
        eprintln!(
            "bench: made {} in {:.1} s",
            src.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let (entries, bytes, files) = if kind == Kind::Deep {
        // No path reaches its bottom: counted, not walked.
        let levels = scale.deep.0 as u64;
        (
            levels as usize + 1 + levels as usize + 1,
            (levels + 1) * 100,
            levels + 1,
        )
    } else {
        tree_stats(&src)?
    };
    let label = match kind {
        Kind::Small => format!("{} × 4 KiB", thousands(files)),
        Kind::Mixed => format!("{} files, 512 B–64 MiB, {}", thousands(files), size(bytes)),
        Kind::Big => format!("2 × {}", size(scale.big_bytes)),
        Kind::Real => format!(
            "{} ({} entries, {})",
            scale.real,
            thousands(entries as u64),
            size(bytes)
        ),
        Kind::Deep => format!(
            "{} levels, {}-byte paths",
            thousands(scale.deep.0 as u64),
            scale.deep.0 * (scale.deep.1.len() + 1)
        ),
    };
    Ok(Workload {
        kind,
        label,
        src,
        entries: entries as u64,
        bytes,
        files,
    })
}

/// `n` with thousands separators (`20,000`).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && i % 3 == digits.len() % 3 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units, one decimal (`1.0 GiB`).
pub fn size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_the_tables() {
        assert_eq!(thousands(20_000), "20,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(2 << 30), "2.0 GiB");
    }

    /// Files and bytes of a layout.
    fn layout_size(layout: &[Group]) -> (u64, u64) {
        layout.iter().fold((0, 0), |(n, b), g| {
            let k = (g.dirs * g.files) as u64;
            (n + k, b + k * g.bytes)
        })
    }

    #[test]
    fn the_mixed_tree_has_a_long_tail_at_both_scales() {
        for div in [1, 20] {
            let l = mixed_layout(div);
            let counts: Vec<usize> = l.iter().map(|g| g.dirs * g.files).collect();
            assert!(
                counts.windows(2).skip(1).all(|w| w[0] >= w[1]),
                "{counts:?}"
            );
            assert!(l.iter().all(|g| g.dirs * g.files > 0));
        }
        let (files, bytes) = layout_size(&mixed_layout(1));
        assert_eq!(files, 6_222);
        assert!(bytes > 1 << 29 && bytes < 3 << 28, "{bytes}");
    }
}
