//! Memory rows (issue 17): peak resident memory of mfu-rs's walk, sync into an empty
//! destination, sync of an unchanged destination, cmp and tar -x over a tree of empty files
//! (10^6 by default), at np 1 and under `mpirun -np 2`, per 10^6 files, against the targets.
//!
//! How the peak of a process tree is measured: each rank runs under a tiny wrapper (`cargo
//! xtask rss-wrap DIR CMD...`, [`rss_wrap`]) that starts the rank, waits for it with `wait4`
//! and writes the rank's own peak (`ru_maxrss` of that one child) to a file of DIR; the row
//! is the sum over the ranks (at np 2 an upper bound of the simultaneous peak: the two ranks
//! may peak at different moments). `mpirun`'s own memory is not counted. `ru_maxrss` of
//! `RUSAGE_CHILDREN` would be the largest of the ranks, not their sum, and polling
//! `/proc/PID/status` could miss a rank's last moments. Linux counts in a process's
//! `ru_maxrss` the memory of what it was before `exec` (here the wrapper, a few MB): peaks
//! below that are not resolved, which matters only for tiny trees.

use super::fsutil::{extracted_ok, remove, s, same_tree};
use super::measure::{case, time_once};
use super::workload::thousands;
use crate::setup::have;
use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One measured command.
#[derive(Clone, Debug, Serialize)]
pub struct MemRow {
    /// The operation (`walk`, `sync-empty`, `sync-unchanged`, `cmp`, `tar-extract`).
    pub op: String,
    /// Who ran it (`mfu-rs np 1`, `mfu-rs mpirun -np 2`, `GNU tar -x`).
    pub name: String,
    /// mfu-rs's ranks (0 for a peer).
    pub np: u32,
    /// Files in the tree.
    pub files: u64,
    /// Each rank's peak resident set, KiB.
    pub per_rank_kib: Vec<u64>,
    /// Their sum, MB (10^6 bytes).
    pub mb: f64,
    /// Per 10^6 files, MB.
    pub mb_per_million: f64,
    /// The target per 10^6 files, MB (None for peers).
    pub target_mb: Option<f64>,
    /// Wall seconds of the run.
    pub secs: f64,
    /// `--memory-limit` of the run (None: no limit).
    pub limit: Option<String>,
    /// Its time over the same command's without a limit (limited rows only).
    pub vs_unlimited: Option<f64>,
}

/// The memory targets per 10^6 files on one rank with no memory limit, MB (issue 34's, which
/// tightened issue 17's 150/350/300/300/150).
pub fn target_mb(op: &str) -> f64 {
    match op {
        "walk" | "walk-o" => 100.0,
        "sync-empty" | "sync-unchanged" | "cmp" => 200.0,
        _ => 150.0,
    }
}

/// Issue 34's targets for the rows with `--memory-limit` (64 MB per 10^6 files, the limit the
/// issue sets at 10^6): every peak at most this, MB at 10^6 files...
pub const LIMITED_TARGET_MB: f64 = 100.0;
/// ...and each time at most this many times the same command's without a limit.
pub const LIMITED_TIME_RATIO: f64 = 1.5;

/// The memory limit of the limited rows for `files` files: issue 34's 64M (MiB) at 10^6
/// files, in proportion (so that a small tree, `--quick`, spills too), at least 64 KiB.
fn limit_for(files: u64) -> String {
    let kib = (files * 65536 / 1_000_000).max(64);
    if kib.is_multiple_of(1024) {
        format!("{}M", kib / 1024)
    } else {
        format!("{kib}k")
    }
}

/// `cargo xtask rss-wrap DIR CMD ARGS...`: run CMD, wait for it, write its peak resident set
/// (KiB, `ru_maxrss` of `wait4`) to `DIR/rss.PID`, and exit with its status.
pub fn rss_wrap(args: &[String]) -> Result<i32> {
    let [dir, cmd, rest @ ..] = args else {
        bail!("usage: cargo xtask rss-wrap DIR CMD [ARGS...]");
    };
    let child = Command::new(cmd)
        .args(rest)
        .spawn()
        .with_context(|| format!("start {cmd}"))?;
    let (status, usage) = super::measure::wait4(child.id())?;
    let path = Path::new(dir).join(format!("rss.{}", child.id()));
    std::fs::write(&path, format!("{}\n", usage.ru_maxrss.max(0)))
        .with_context(|| format!("write {}", path.display()))?;
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    })
}

/// The rows within issue 34's memory limit, at one rank, each beside the same command's
/// without a limit: walk -o, sync (into a DEST that does not exist: nothing to pair, its plan
/// is held whole; unchanged: paired by a merge join), cmp and tar -x (a piece of entries at
/// a time, directories' metadata spilled for the end).
struct Limited<'a> {
    /// `--memory-limit` ([`limit_for`]).
    limit: String,
    /// `--tmpdir`, emptied before each run and checked empty after it.
    spill: PathBuf,
    /// The list the limited walk -o writes (removed before it).
    list: &'a Path,
    strict: bool,
}

impl Limited<'_> {
    /// `args` within the limit: its row, with its time over `free`'s (the same command's
    /// without a limit, run just before it: the tree's atimes are the same for both).
    fn row(&self, ctx: &Ctx<'_>, free: &MemRow, args: &[&str]) -> Result<MemRow> {
        let mut args = args.to_vec();
        args.extend(["--memory-limit", &self.limit, "--tmpdir", s(&self.spill)]);
        let mut row = ctx.mfu(&free.op, 1, &args, || {
            remove(self.list)?;
            remove(&self.spill)?;
            std::fs::create_dir_all(&self.spill)?;
            Ok(())
        })?;
        row.name = format!("mfu-rs np 1 --memory-limit {}", self.limit);
        row.target_mb = Some(LIMITED_TARGET_MB);
        row.vs_unlimited = Some(row.secs / free.secs.max(1e-9));
        row.limit = Some(self.limit.clone());
        // Spill files are unnamed: nothing may be left, whatever the run did.
        let left = std::fs::read_dir(&self.spill)?.count();
        ensure!(
            left == 0 || !self.strict,
            "memory rows: {} within {} left {left} files in {}",
            free.op,
            self.limit,
            self.spill.display()
        );
        Ok(row)
    }
}

/// The lists `a` and `b` hold the same records (each sorted by name with mfu-rs, then compared
/// byte for byte: the order of a walk's records is not fixed).
fn same_list(bin: &Path, a: &Path, b: &Path) -> Result<()> {
    let sorted = |p: &Path| -> Result<Vec<u8>> {
        let out = p.with_extension("sorted");
        crate::run(
            Command::new(bin)
                .args(["walk", "-q", "-s", "name", "-i"])
                .arg(p)
                .arg("-o")
                .arg(&out),
        )?;
        let bytes = std::fs::read(&out).with_context(|| out.display().to_string())?;
        remove(&out)?;
        Ok(bytes)
    };
    ensure!(
        sorted(a)? == sorted(b)?,
        "{} and {} differ after sorting",
        a.display(),
        b.display()
    );
    Ok(())
}

/// Make `files` empty files under `tree`, 1000 per directory, every path `PATH_BYTES` long.
fn make_tree(tree: &Path, files: u64) -> Result<()> {
    const FILES_PER_DIR: u64 = 1000;
    const PATH_BYTES: usize = 60;
    remove(tree)?;
    let prefix = s(tree).len() + "/d0000/f0000000-".len();
    let pad = "x".repeat(PATH_BYTES.saturating_sub(prefix).max(1));
    let dirs = files.div_ceil(FILES_PER_DIR);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    std::thread::scope(|scope| -> Result<()> {
        let jobs: Vec<_> = (0..threads)
            .map(|t| {
                let pad = &pad;
                scope.spawn(move || -> Result<()> {
                    for d in (t..dirs).step_by(threads as usize) {
                        let dir = tree.join(format!("d{d:04}"));
                        std::fs::create_dir_all(&dir)
                            .with_context(|| format!("mkdir {}", dir.display()))?;
                        let end = ((d + 1) * FILES_PER_DIR).min(files);
                        for f in d * FILES_PER_DIR..end {
                            let p = dir.join(format!("f{f:07}-{pad}"));
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
    })
}

/// Everything the memory rows need.
pub(super) struct Ctx<'a> {
    pub(super) bin: &'a Path,
    /// A private copy of this xtask binary, the wrapper (a rebuild of xtask during the run
    /// must not take it away).
    pub(super) wrapper: PathBuf,
    /// Where the wrappers write their files.
    pub(super) rss: PathBuf,
    pub(super) files: u64,
    pub(super) mpi: bool,
}

impl Ctx<'_> {
    /// Run `args` of mfu-rs at `np` ranks (1: no launcher; 2: `mpirun -np 2`), each rank
    /// under the wrapper, after `prep`; its row.
    pub(super) fn mfu(
        &self,
        op: &str,
        np: u32,
        args: &[&str],
        prep: impl Fn() -> Result<()>,
    ) -> Result<MemRow> {
        let mut cmd: Vec<&str> = Vec::new();
        if np > 1 {
            cmd.extend(["mpirun", "-np", "2"]);
        }
        cmd.push(s(self.bin));
        cmd.extend(args);
        let name = if np > 1 {
            "mfu-rs mpirun -np 2"
        } else {
            "mfu-rs np 1"
        };
        // The targets are for one rank holding every file (issue 17): np 2 is shown beside.
        let target = (np == 1).then(|| target_mb(op));
        self.run(op, np, name, &cmd, prep, target)
    }

    /// Run `cmd` (`mpirun -np N PROGRAM ...` or `PROGRAM ...`) with the wrapper put before
    /// the program, after `prep`; its row.
    fn run(
        &self,
        op: &str,
        np: u32,
        name: &str,
        cmd: &[&str],
        prep: impl Fn() -> Result<()>,
        target_mb: Option<f64>,
    ) -> Result<MemRow> {
        let at = if cmd[0] == "mpirun" { 3 } else { 0 };
        let mut wrapped: Vec<&str> = cmd[..at].to_vec();
        wrapped.extend([s(&self.wrapper), "rss-wrap", s(&self.rss)]);
        wrapped.extend(&cmd[at..]);
        let c = case(name, np > 1, &wrapped);
        prep()?;
        remove(&self.rss)?;
        std::fs::create_dir_all(&self.rss)?;
        let run = time_once(&c).with_context(|| format!("memory row {op}, {}", c.name))?;
        let mut per_rank_kib = Vec::new();
        for e in std::fs::read_dir(&self.rss)? {
            let p = e?.path();
            let text = std::fs::read_to_string(&p)?;
            per_rank_kib.push(
                text.trim()
                    .parse::<u64>()
                    .with_context(|| p.display().to_string())?,
            );
        }
        let expected = if np > 1 { np as usize } else { 1 };
        ensure!(
            per_rank_kib.len() == expected,
            "memory row {op}, {}: {} ranks reported their peak, expected {expected}",
            c.name,
            per_rank_kib.len()
        );
        let mb = per_rank_kib.iter().sum::<u64>() as f64 * 1024.0 / 1e6;
        eprintln!(
            "bench: memory {op} {}: {mb:.1} MB over {} files ({:.1} s)",
            c.name,
            thousands(self.files),
            run.secs
        );
        Ok(MemRow {
            op: op.into(),
            name: c.name.clone(),
            np,
            files: self.files,
            per_rank_kib,
            mb,
            mb_per_million: mb * 1e6 / self.files as f64,
            target_mb,
            secs: run.secs,
            limit: None,
            vs_unlimited: None,
        })
    }
}

/// The memory rows over `files` empty files made under `base` (once), with mfu-rs at np 1 and,
/// when `mpi`, under `mpirun -np 2`; GNU tar's and bsdtar's extraction of the same archive
/// for comparison. Results are checked when `strict`.
pub fn run(bin: &Path, base: &Path, files: u64, mpi: bool, strict: bool) -> Result<Vec<MemRow>> {
    let tree = base.join("mem-src");
    let marker = base.join("mem-src.ok");
    if !marker.exists() {
        let t = std::time::Instant::now();
        make_tree(&tree, files)?;
        std::fs::write(&marker, b"")?;
        eprintln!(
            "bench: made {} ({} empty files) in {:.1} s",
            tree.display(),
            thousands(files),
            t.elapsed().as_secs_f64()
        );
    }
    let (dst, out, archive) = (
        base.join("mem-dst"),
        base.join("mem-out"),
        base.join("mem.tar"),
    );
    let wrapper = base.join("xtask-rss-wrap");
    // /proc/self/exe: this very binary, even when cargo has replaced the file since.
    std::fs::copy("/proc/self/exe", &wrapper)
        .with_context(|| format!("copy this xtask binary to {}", wrapper.display()))?;
    let ctx = Ctx {
        bin,
        wrapper: wrapper.clone(),
        rss: base.join("mem-rss"),
        files,
        mpi,
    };
    // Big trees go faster with mfu-rs rm than one unlink at a time (untimed).
    let rm = |p: &Path| -> Result<()> {
        if p.exists() {
            crate::run(Command::new(bin).args(["rm", "-q", s(p)]))?;
        }
        Ok(())
    };
    let fresh_out = || -> Result<()> {
        rm(&out)?;
        std::fs::create_dir_all(&out)?;
        Ok(())
    };
    if !archive.exists() {
        let parent = s(base);
        crate::run(
            Command::new("tar")
                .arg("-cf")
                .arg(&archive)
                .args(["-C", parent, "mem-src"]),
        )?;
    }
    let (t, d, o, a) = (s(&tree), s(&dst), s(&out), s(&archive));
    let (list, list_limited) = (base.join("mem-list.mfu"), base.join("mem-list-limited.mfu"));
    let limited = Limited {
        limit: limit_for(files),
        spill: base.join("mem-spill"),
        list: &list_limited,
        strict,
    };
    let mut rows = Vec::new();
    let nps: &[u32] = if ctx.mpi { &[1, 2] } else { &[1] };
    for &np in nps {
        rows.push(ctx.mfu("walk", np, &["walk", "-q", t], || Ok(()))?);
        if np == 1 {
            let args = ["walk", "-q", t, "-o", s(&list)];
            let free = ctx.mfu("walk-o", np, &args, || remove(&list))?;
            let args = ["walk", "-q", t, "-o", s(&list_limited)];
            rows.push(limited.row(&ctx, &free, &args)?);
            if strict {
                same_list(bin, &list, &list_limited)
                    .context("memory rows: walk -o within the limit")?;
            }
            rows.insert(rows.len() - 1, free);
        }
        rows.push(ctx.mfu("sync-empty", np, &["sync", "-q", t, d], || rm(&dst))?);
        if np == 1 {
            let free = rows.last().expect("the sync row").clone();
            rm(&dst)?;
            rows.push(limited.row(&ctx, &free, &["sync", "-q", t, d])?);
        }
        if strict {
            same_tree(&tree, &dst, true).context("memory rows: sync into an empty destination")?;
        }
        rows.push(ctx.mfu("sync-unchanged", np, &["sync", "-q", t, d], || Ok(()))?);
        if np == 1 {
            let free = rows.last().expect("the sync row").clone();
            rows.push(limited.row(&ctx, &free, &["sync", "-q", t, d])?);
        }
        rows.push(ctx.mfu("cmp", np, &["cmp", "-q", t, d], || Ok(()))?);
        if np == 1 {
            let free = rows.last().expect("the cmp row").clone();
            rows.push(limited.row(&ctx, &free, &["cmp", "-q", t, d])?);
        }
        let extract = ["tar", "-x", "-q", "-f", a, "-C", o];
        rows.push(ctx.mfu("tar-extract", np, &extract, fresh_out)?);
        if strict {
            extracted_ok(&tree, &out).context("memory rows: tar -x")?;
        }
        if np == 1 {
            let free = rows.last().expect("the tar -x row").clone();
            fresh_out()?;
            rows.push(limited.row(&ctx, &free, &extract)?);
            if strict {
                extracted_ok(&tree, &out).context("memory rows: tar -x within the limit")?;
            }
        }
    }
    for p in [&list, &list_limited, &limited.spill] {
        remove(p)?;
    }
    let peers: Vec<(&str, Vec<&str>)> = [
        ("GNU tar -x", vec!["tar", "-xf", a, "-C", o]),
        ("bsdtar -x", vec!["bsdtar", "-xf", a, "-C", o]),
    ]
    .into_iter()
    .filter(|(_, c)| have(c[0]))
    .collect();
    for (name, cmd) in peers {
        rows.push(ctx.run("tar-extract", 0, name, &cmd, fresh_out, None)?);
    }
    for p in [&dst, &out, &tree] {
        rm(p)?;
    }
    remove(&marker)?;
    remove(&archive)?;
    remove(&ctx.rss)?;
    remove(&wrapper)?;
    Ok(rows)
}
