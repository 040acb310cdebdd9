//! `cargo xtask bench [SECTION...]`: whole-tool comparisons with the classic tools, measured side
//! by side in one run (runs interleaved, median of each), on a warm page cache. Sections (default:
//! all, in this order):
//!
//! - walk: a 20,000-file tree; `mfu-rs walk` (stat) at np 1 and np 2 against `find -printf`
//!   (which stats every entry), and `mfu-rs walk -l` (no stat) against plain `find`.
//! - sort: a text list of 1,000,000 paths; `mfu-rs walk -i LIST -s name -o OUT` at np 1 and np 2
//!   against `LC_ALL=C sort LIST -o OUT`.
//! - cp-small: copy 20,000 files of 4 KiB (100 dirs × 200) into a fresh destination:
//!   `cp -a`, `rsync -a`, (`xcp -r` when on PATH), `mfu-rs cp -p` at np 1 and np 2.
//! - cp-big: the same cases on 4 files of 512 MiB (fewer runs).
//! - cp-bufsize: `mfu-rs cp` alone on 4 files of 512 MiB (random bytes) where its read/write path
//!   moves the data, with the adaptive buffer size (no `-b`) against `-b 64KiB`, `1MiB`, `4MiB`
//!   and `16MiB`: (a) from tmpfs (`/dev/shm`) to the workspace's file system (across file
//!   systems: no `copy_file_range`), (b) within the workspace's file system with `-s`
//!   (`O_DIRECT`). Medians, MiB/s and the ratio to the best fixed size; then the `-v` lines of
//!   one adaptive run that mention the buffer size, if the binary prints any.
//! - sync: an unchanged 20,000-file tree already synced once: `rsync -a SRC/ DST/` against
//!   `mfu-rs sync SRC DST` at np 1 and np 2.
//! - rm: remove a 20,000-file tree: `rm -rf` against `mfu-rs rm` at np 1 and np 2.
//! - tar-small: the cp-small tree (20,000 files of 4 KiB, random bytes). Create: `tar -cf A.tar
//!   TREE` against `mfu-rs tar -c -f A.tar TREE` at np 1, `--ranks 2` and `mpirun -np 2` (both
//!   from the data directory, via `-C`). Extract: `tar -xf A.tar -C OUT` against `mfu-rs tar -x
//!   -f A.tar -C OUT` (same three launches); the archive extracted is made once, untimed, by GNU
//!   tar for the GNU case and by `mfu-rs tar -c` (np 1) for the mfu-rs cases.
//! - tar-mixed: the same cases on about 1 GiB of mixed sizes (4,000 × 16 KiB, 400 × 1 MiB,
//!   40 × 8 MiB, 2 × 128 MiB) of hex text from a PRNG (compresses about 2:1); fewer runs.
//! - tar-zstd: both trees compressed: `tar -cf - TREE | zstd -T0 -q -o A.tar.zst` against
//!   `mfu-rs tar -c -z -f A.tar.zst TREE`, and `zstd -dc A.tar.zst | tar -xf - -C OUT` against
//!   `mfu-rs tar -x -f A.tar.zst -C OUT` (the archives extracted made as above).
//!
//! Each tar section also prints the sizes of the GNU and mfu-rs archives (tar-zstd: compressed
//! and not, with the compression ratios).
//!
//! `cp` selects cp-small and cp-big (not cp-bufsize), `tar` selects tar-small, tar-mixed and
//! tar-zstd. Before each timed run an untimed step prepares it (removes the destination or
//! archive, or recreates the tree to remove with `rsync -a`) and runs `sync(1)`, so that
//! writeback of the previous run's data does not land in the next run. The data for cp, sync, rm and tar lives in
//! `target/bench-data` (the file system of the workspace) and is removed at the end.
//!
//! The binary measured is `target/release/mfu-rs`, built first; `MFU_RS_BENCH_BIN=PATH` measures
//! that binary instead (not built, e.g. one built from another tree).

use crate::{mpi_env, root};
use anyhow::{bail, ensure, Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Runs of each command.
const RUNS: usize = 7;
/// Runs of each command on the big files (each copies 2 GiB, or archives or extracts 1 GiB).
const BIG_RUNS: usize = 3;
/// Runs of each variant of cp-bufsize (2 GiB each), from tmpfs and with O_DIRECT: the variants
/// differ by less than the noise of single runs on a shared machine (the same command varies
/// 2-4× from run to run there), so more runs than BIG_RUNS; the tmpfs case, under a second a
/// run, gets the most.
const BUFSIZE_RUNS: (usize, usize) = (11, 7);
/// Every section, in the order they run.
const SECTIONS: &[&str] = &[
    "walk",
    "sort",
    "cp-small",
    "cp-big",
    "cp-bufsize",
    "sync",
    "rm",
    "tar-small",
    "tar-mixed",
    "tar-zstd",
];

type Step = Box<dyn Fn() -> Result<()>>;

struct Case {
    name: String,
    cmd: Vec<String>,
    mpi: bool,
    /// Untimed, before every run (the warm-up included).
    prep: Option<Step>,
    /// Untimed, once after the warm-up run: a sanity check of the result (a failure is a
    /// warning, the timing goes on).
    check: Option<Step>,
}

fn case(name: &str, mpi: bool, cmd: &[&str]) -> Case {
    Case {
        name: name.into(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        mpi,
        prep: None,
        check: None,
    }
}

impl Case {
    fn prep(mut self, f: impl Fn() -> Result<()> + 'static) -> Case {
        self.prep = Some(Box::new(f));
        self
    }

    fn check(mut self, f: impl Fn() -> Result<()> + 'static) -> Case {
        self.check = Some(Box::new(f));
        self
    }
}

fn time_once(c: &Case) -> Result<f64> {
    if let Some(prep) = &c.prep {
        prep().with_context(|| format!("prepare the run of {}", c.name))?;
    }
    let mut cmd = Command::new(&c.cmd[0]);
    cmd.args(&c.cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if c.mpi {
        mpi_env(&mut cmd);
    }
    let t = Instant::now();
    let out = cmd
        .output()
        .with_context(|| format!("start {}", c.cmd[0]))?;
    let secs = t.elapsed().as_secs_f64();
    ensure!(
        out.status.success(),
        "{} failed: {}\n{}",
        c.cmd.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim_end()
    );
    Ok(secs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Run every case `runs` times, interleaved, after one warm-up each (followed by the case's
/// check); print medians and ratios to the cases at indices `peers` (peer time / case time).
fn compare(
    title: &str,
    notes: &[&str],
    cases: &[Case],
    peers: &[usize],
    runs: usize,
) -> Result<()> {
    let load_before = loadavg();
    let start = Instant::now();
    let medians: Vec<f64> = measure(cases, runs)?.into_iter().map(median).collect();
    println!("\n## {title} (median of {runs} interleaved runs, warm cache)\n");
    for n in notes {
        println!("{n}  ");
    }
    if !notes.is_empty() {
        println!();
    }
    print!("| command | median s |");
    for &p in peers {
        print!(" speed vs {} (>1 = faster) |", cases[p].name);
    }
    print!("\n|---|---|");
    for _ in peers {
        print!("---|");
    }
    println!();
    for (c, m) in cases.iter().zip(&medians) {
        print!("| {} | {m:.3} |", c.name);
        for &p in peers {
            print!(" {:.2} |", medians[p] / m);
        }
        println!();
    }
    println!(
        "\n(section wall time {:.0} s, load average before: {load_before}, after: {})",
        start.elapsed().as_secs_f64(),
        loadavg()
    );
    Ok(())
}

/// Run every case once (the warm-up, followed by the case's check), then `runs` times,
/// interleaved (case 1, 2, ..., 1, 2, ...: noise hits every case alike); the times of each case
/// (seconds).
fn measure(cases: &[Case], runs: usize) -> Result<Vec<Vec<f64>>> {
    for c in cases {
        time_once(c)?;
        if let Some(check) = &c.check {
            if let Err(e) = check() {
                eprintln!(
                    "warning: {}: the result differs from the source: {e:#}",
                    c.name
                );
                println!(
                    "(warning: {}: result differs from the source: {e:#})",
                    c.name
                );
            }
        }
    }
    let mut times = vec![Vec::new(); cases.len()];
    for _ in 0..runs {
        for (i, c) in cases.iter().enumerate() {
            times[i].push(time_once(c)?);
        }
    }
    Ok(times)
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

/// splitmix64: incompressible bytes, fast, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }

    /// Lower-case hex digits, a newline every 64: 4 bits of entropy per byte, so a compressor
    /// gets about 2:1 out of it and no more.
    fn fill_hex(&mut self, buf: &mut [u8]) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for line in buf.chunks_mut(65) {
            for c in line.chunks_mut(16) {
                let v = self.next();
                for (i, b) in c.iter_mut().enumerate() {
                    *b = HEX[(v >> (4 * i)) as usize & 15];
                }
            }
            if line.len() == 65 {
                line[64] = b'\n';
            }
        }
    }
}

/// `dirs` directories of `files` files of `size` random bytes each, then `sync`.
fn make_random_tree(dir: &Path, dirs: usize, files: usize, size: usize) -> Result<()> {
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
fn write_file(
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

/// `sync(1)`: write back every dirty page, so the next timed run does not pay for the last one.
fn flush_fs() -> Result<()> {
    let status = Command::new("sync").status().context("start sync")?;
    ensure!(status.success(), "sync failed: {status}");
    Ok(())
}

fn remove(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("stat {}", path.display())),
        Ok(m) if m.is_dir() => {
            std::fs::remove_dir_all(path).with_context(|| format!("remove {}", path.display()))
        }
        Ok(_) => std::fs::remove_file(path).with_context(|| format!("remove {}", path.display())),
    }
}

/// Bytes free for an unprivileged user on the file system holding `dir` (`df -Pk`).
fn free_bytes(dir: &Path) -> Result<u64> {
    let out = Command::new("df")
        .arg("-Pk")
        .arg(dir)
        .output()
        .context("start df")?;
    ensure!(out.status.success(), "df {} failed", dir.display());
    let text = String::from_utf8_lossy(&out.stdout);
    let kib: u64 = text
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(3))
        .context("df printed no `Available` column")?
        .parse()
        .context("df's `Available` column")?;
    Ok(kib * 1024)
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Compare `dst` with `src`: same entries and types, same bytes in regular files, and when
/// `meta`, same mode, owner, group and modification time (ns) on every entry.
fn same_tree(src: &Path, dst: &Path, meta: bool) -> Result<()> {
    let mut diffs = Vec::new();
    let mut entries = 0usize;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        entries += 1;
        let (s, d) = (src.join(&rel), dst.join(&rel));
        let sm = std::fs::symlink_metadata(&s)?;
        let Ok(dm) = std::fs::symlink_metadata(&d) else {
            diffs.push(format!("{}: missing", rel.display()));
            continue;
        };
        if sm.file_type() != dm.file_type() {
            diffs.push(format!("{}: type", rel.display()));
            continue;
        }
        if meta {
            if (sm.mode(), sm.uid(), sm.gid()) != (dm.mode(), dm.uid(), dm.gid()) {
                diffs.push(format!("{}: mode/owner", rel.display()));
            }
            if (sm.mtime(), sm.mtime_nsec()) != (dm.mtime(), dm.mtime_nsec()) {
                diffs.push(format!("{}: mtime", rel.display()));
            }
        }
        if sm.is_dir() {
            for e in std::fs::read_dir(&s)? {
                stack.push(rel.join(e?.file_name()));
            }
            let n = std::fs::read_dir(&d)?.count();
            if n != std::fs::read_dir(&s)?.count() {
                diffs.push(format!("{}: {n} entries", rel.display()));
            }
        } else if sm.is_file() && (sm.len() != dm.len() || std::fs::read(&s)? != std::fs::read(&d)?)
        {
            diffs.push(format!("{}: contents", rel.display()));
        }
    }
    ensure!(
        diffs.is_empty(),
        "{} of {entries} entries differ, e.g. {}",
        diffs.len(),
        diffs[..diffs.len().min(3)].join(", ")
    );
    Ok(())
}

/// Entries under `dir` whose inode changed (ctime) at or after `since`.
fn changed_since(dir: &Path, since: SystemTime) -> Result<usize> {
    let t = since.duration_since(UNIX_EPOCH)?;
    let t = (t.as_secs() as i64, t.subsec_nanos() as i64);
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p)?;
        if (m.ctime(), m.ctime_nsec()) >= t {
            n += 1;
        }
        if m.is_dir() {
            for e in std::fs::read_dir(&p)? {
                stack.push(e?.path());
            }
        }
    }
    Ok(n)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 bench path")
}

/// The copy cases of the cp sections: each into `dst`, removed (and `sync` run) before each run.
fn cp_cases(b: &str, src: &Path, dst: &Path) -> Vec<Case> {
    let (sp, dp) = (s(src), s(dst));
    let (src_slash, dst_slash) = (format!("{sp}/"), format!("{dp}/"));
    let mut cases = vec![
        case("cp -a", false, &["cp", "-a", sp, dp]),
        case("rsync -a", false, &["rsync", "-a", &src_slash, &dst_slash]),
        case("mfu-rs cp -p np1", false, &[b, "cp", "-q", "-p", sp, dp]),
        // Two ranks as threads of one process: np 2 without MPI's start-up (~0.3 s here).
        case(
            "mfu-rs --ranks 2 cp -p",
            false,
            &[b, "--ranks", "2", "cp", "-q", "-p", sp, dp],
        ),
        case(
            "mpirun -np 2 mfu-rs cp -p",
            true,
            &["mpirun", "-np", "2", b, "cp", "-q", "-p", sp, dp],
        ),
    ];
    if have("xcp") {
        // xcp keeps the mode but not the times: compare the bytes only.
        let (src, dst) = (src.to_path_buf(), dst.to_path_buf());
        cases.push(
            case("xcp -r", false, &["xcp", "-r", sp, dp])
                .check(move || same_tree(&src, &dst, false)),
        );
    }
    cases
        .into_iter()
        .map(|c| {
            let (d1, s2, d2) = (dst.to_path_buf(), src.to_path_buf(), dst.to_path_buf());
            let c = c.prep(move || {
                remove(&d1)?;
                flush_fs()
            });
            if c.check.is_some() {
                c
            } else {
                c.check(move || same_tree(&s2, &d2, true))
            }
        })
        .collect()
}

fn xcp_note() -> &'static str {
    if have("xcp") {
        "xcp is on PATH: measured with `xcp -r` (it keeps modes, not times)."
    } else {
        "xcp is not on PATH: not measured."
    }
}

/// Entry point of `cargo xtask bench
/// [walk|sort|cp|cp-small|cp-big|cp-bufsize|sync|rm|tar|tar-small|tar-mixed|tar-zstd]...`.
pub fn run(args: &[String]) -> Result<()> {
    let mut want: Vec<&str> = Vec::new();
    for a in args {
        match a.as_str() {
            "all" => want.extend(SECTIONS),
            "cp" => want.extend(["cp-small", "cp-big"]),
            "tar" => want.extend(["tar-small", "tar-mixed", "tar-zstd"]),
            x if SECTIONS.contains(&x) => want.push(x),
            x => bail!(
                "unknown bench section {x:?}; sections: {} (cp = cp-small cp-big, tar = tar-small tar-mixed tar-zstd; default all)",
                SECTIONS.join(" ")
            ),
        }
    }
    if want.is_empty() {
        want = SECTIONS.to_vec();
    }
    let started = Instant::now();
    crate::setup::ensure()?;
    let root = root();
    let bin: PathBuf = match std::env::var_os("MFU_RS_BENCH_BIN") {
        Some(path) => {
            let path = std::path::absolute(PathBuf::from(path))?;
            ensure!(
                path.is_file(),
                "MFU_RS_BENCH_BIN={} is not a file",
                path.display()
            );
            eprintln!("bench: measuring {} (MFU_RS_BENCH_BIN)", path.display());
            path
        }
        None => {
            crate::run(
                Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                    .current_dir(&root)
                    .args(["build", "--release", "-p", "mfu-rs"]),
            )?;
            root.join("target/release/mfu-rs")
        }
    };
    let b = bin.to_str().expect("UTF-8 binary path");
    let work = std::env::temp_dir().join("mfu-rs-bench");
    std::fs::create_dir_all(&work)?;
    let data = root.join("target/bench-data");
    let mut failed = Vec::new();
    for section in SECTIONS.iter().filter(|s| want.contains(s)) {
        let result = match *section {
            "walk" => bench_walk(b, &work),
            "sort" => bench_sort(b, &work),
            "cp-small" => bench_cp_small(b, &data),
            "cp-big" => bench_cp_big(b, &data),
            "cp-bufsize" => bench_cp_bufsize(b, &data),
            "sync" => bench_sync(b, &data),
            "rm" => bench_rm(b, &data),
            "tar-small" => bench_tar_small(b, &data),
            "tar-mixed" => bench_tar_mixed(b, &data),
            "tar-zstd" => bench_tar_zstd(b, &data),
            _ => unreachable!("SECTIONS lists the sections"),
        };
        if let Err(e) = result {
            eprintln!("xtask bench: section {section} failed: {e:#}");
            println!("\n## {section}: FAILED\n\n{e:#}");
            failed.push(*section);
        }
    }
    if data.exists() {
        std::fs::remove_dir_all(&data).with_context(|| format!("remove {}", data.display()))?;
    }
    println!(
        "\ntotal bench time: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("failed sections: {}", failed.join(" "));
    }
    Ok(())
}

fn bench_walk(b: &str, work: &Path) -> Result<()> {
    let tree = work.join("tree20k");
    make_tree(&tree, 20_000)?;
    let t = tree.to_str().expect("UTF-8 temp path");
    compare(
        "walk with stat, 20,000 files",
        &[],
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
        &[0],
        RUNS,
    )?;
    compare(
        "lite walk (no stat), 20,000 files",
        &[],
        &[
            case("find", false, &["find", t]),
            case("mfu-rs walk -l np1", false, &[b, "walk", "-q", "-l", t]),
            case(
                "mpirun -np 2 mfu-rs walk -l",
                true,
                &["mpirun", "-np", "2", b, "walk", "-q", "-l", t],
            ),
        ],
        &[0],
        RUNS,
    )
}

fn bench_sort(b: &str, work: &Path) -> Result<()> {
    let list = work.join("list1m.txt");
    make_list(&list, 1_000_000)?;
    let l = list.to_str().expect("UTF-8 temp path");
    let out = work.join("sorted.txt");
    let o = out.to_str().expect("UTF-8 temp path");
    compare(
        "sort 1,000,000 paths by name",
        &[],
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
        &[0],
        RUNS,
    )
}

/// The 20,000 × 4 KiB tree that cp-small, sync and rm share (made once per bench run).
fn small_tree(data: &Path) -> Result<PathBuf> {
    let src = data.join("small-src");
    if !src.join("d099/f199.dat").exists() {
        let t = Instant::now();
        make_random_tree(&src, 100, 200, 4096)?;
        eprintln!(
            "bench: made {} (20,000 × 4 KiB) in {:.1} s",
            src.display(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(src)
}

fn bench_cp_small(b: &str, data: &Path) -> Result<()> {
    let src = small_tree(data)?;
    let dst = data.join("small-dst");
    let cases = cp_cases(b, &src, &dst);
    let result = compare(
        "cp, 20,000 files × 4 KiB (100 dirs × 200)",
        &[
            "Each run copies into a fresh destination; its removal and a `sync` before each run are not timed; no tool fsyncs.",
            xcp_note(),
        ],
        &cases,
        &[0, 1],
        RUNS,
    );
    remove(&dst)?;
    result
}

fn bench_cp_big(b: &str, data: &Path) -> Result<()> {
    const NEED: u64 = 8 << 30;
    std::fs::create_dir_all(data)?;
    let free = free_bytes(data)?;
    ensure!(
        free >= NEED,
        "cp-big needs 8 GiB free on the file system of {} (2 GiB of sources, 2 GiB of copy, margin); df says {:.1} GiB",
        data.display(),
        free as f64 / (1u64 << 30) as f64
    );
    let src = data.join("big-src");
    let t = Instant::now();
    make_random_tree(&src, 1, 4, 512 << 20)?;
    eprintln!(
        "bench: made {} (4 × 512 MiB) in {:.1} s",
        src.display(),
        t.elapsed().as_secs_f64()
    );
    let dst = data.join("big-dst");
    let cases = cp_cases(b, &src, &dst);
    let result = compare(
        "cp, 4 files × 512 MiB",
        &[
            "Warm page cache: the source (2 GiB) was written just before and stays cached; the copy lands in the page cache (no tool fsyncs), so this times the copy into the cache, not the disk.",
            "Each run copies into a fresh destination; its removal and a `sync` before each run are not timed.",
            xcp_note(),
        ],
        &cases,
        &[0, 1],
        BIG_RUNS,
    );
    remove(&dst)?;
    remove(&src)?;
    result
}

/// The variants of cp-bufsize: (name, `-b` argument; `None`: adaptive, no `-b`).
const BUFSIZES: &[(&str, Option<&str>)] = &[
    ("adaptive (no -b)", None),
    ("-b 64KiB", Some("64KiB")),
    ("-b 1MiB", Some("1MiB")),
    ("-b 4MiB", Some("4MiB")),
    ("-b 16MiB", Some("16MiB")),
];

fn bench_cp_bufsize(b: &str, data: &Path) -> Result<()> {
    const FILES: usize = 4;
    const FILE_BYTES: usize = 512 << 20;
    const TOTAL: u64 = (FILES * FILE_BYTES) as u64;
    std::fs::create_dir_all(data)?;
    let shm = Path::new("/dev/shm").join("mfu-rs-bench-bufsize");
    let (shm_src, src, dst) = (
        shm.join("src"),
        data.join("bufsize-src"),
        data.join("bufsize-dst"),
    );
    let result = (|| {
        // ext4: a source (case b) and a copy at a time; tmpfs: a source (case a), in RAM.
        let need = 3 * TOTAL;
        let free = free_bytes(data)?;
        ensure!(
            free >= need,
            "cp-bufsize needs {} GiB free on the file system of {}; df says {:.1} GiB",
            need >> 30,
            data.display(),
            free as f64 / (1u64 << 30) as f64
        );
        std::fs::create_dir_all(&shm)?;
        let free = free_bytes(&shm)?;
        ensure!(
            free >= TOTAL + (1 << 30),
            "cp-bufsize needs {} GiB free in /dev/shm; df says {:.1} GiB",
            (TOTAL >> 30) + 1,
            free as f64 / (1u64 << 30) as f64
        );
        let t = Instant::now();
        make_random_tree(&shm_src, 1, FILES, FILE_BYTES)?;
        eprintln!(
            "bench: made {} (4 × 512 MiB) in {:.1} s",
            shm_src.display(),
            t.elapsed().as_secs_f64()
        );
        bufsize_case(
            b,
            &shm_src,
            &dst,
            false,
            BUFSIZE_RUNS.0,
            "cp buffer sizes, 4 files × 512 MiB, tmpfs → ext4 (pread/pwrite: copy_file_range refuses across file systems)",
        )?;
        // Free the RAM before the second case.
        remove(&shm)?;
        let t = Instant::now();
        make_random_tree(&src, 1, FILES, FILE_BYTES)?;
        eprintln!(
            "bench: made {} (4 × 512 MiB) in {:.1} s",
            src.display(),
            t.elapsed().as_secs_f64()
        );
        bufsize_case(
            b,
            &src,
            &dst,
            true,
            BUFSIZE_RUNS.1,
            "cp buffer sizes, 4 files × 512 MiB, ext4 → ext4 with -s (O_DIRECT: pread/pwrite)",
        )
    })();
    for p in [&shm, &src, &dst] {
        remove(p)?;
    }
    result
}

/// One case of cp-bufsize: `mfu-rs cp -q [-s] [-b SIZE] SRC DST` for each of [`BUFSIZES`].
fn bufsize_case(
    b: &str,
    src: &Path,
    dst: &Path,
    direct: bool,
    runs: usize,
    title: &str,
) -> Result<()> {
    let (sp, dp) = (s(src), s(dst));
    let (_, bytes) = tree_stats(src)?;
    let argv = |extra: &[&str]| -> Vec<String> {
        let mut v = vec![b, "cp"];
        if direct {
            v.push("-s");
        }
        v.extend(extra);
        v.extend([sp, dp]);
        v.into_iter().map(String::from).collect()
    };
    let fresh = || {
        let d = dst.to_path_buf();
        move || {
            remove(&d)?;
            flush_fs()
        }
    };
    let cases: Vec<Case> = BUFSIZES
        .iter()
        .map(|&(name, size)| {
            let mut extra = vec!["-q"];
            if let Some(size) = size {
                extra.extend(["-b", size]);
            }
            let (s2, d2) = (src.to_path_buf(), dst.to_path_buf());
            let argv = argv(&extra);
            case(
                name,
                false,
                &argv.iter().map(String::as_str).collect::<Vec<_>>(),
            )
            .prep(fresh())
            .check(move || same_tree(&s2, &d2, false))
        })
        .collect();
    let load_before = loadavg();
    let start = Instant::now();
    let times = measure(&cases, runs)?;
    let medians: Vec<f64> = times.iter().cloned().map(median).collect();
    let best_fixed = (1..cases.len())
        .min_by(|&i, &j| medians[i].total_cmp(&medians[j]))
        .expect("fixed variants");
    println!("\n## {title} (median of {runs} interleaved runs)\n");
    println!("Each run copies into a fresh destination; its removal and a `sync` before each run are not timed; no fsync. np 1 (one process, its rayon threads). Checked once: the same bytes as the source.  ");
    println!("The adaptive variant passes no `-b` (the default: sizes chosen per thread by measuring throughput).\n");
    println!(
        "| variant | median s | MiB/s | runs (s) | speed vs best fixed ({}) |",
        cases[best_fixed].name
    );
    println!("|---|---|---|---|---|");
    for ((c, m), t) in cases.iter().zip(&medians).zip(&times) {
        let runs: Vec<String> = t.iter().map(|x| format!("{x:.2}")).collect();
        println!(
            "| {} | {m:.3} | {:.0} | {} | {:.2} |",
            c.name,
            bytes as f64 / (1 << 20) as f64 / m,
            runs.join(" "),
            medians[best_fixed] / m
        );
    }
    println!(
        "\n(wall time {:.0} s, load average before: {load_before}, after: {})",
        start.elapsed().as_secs_f64(),
        loadavg()
    );
    // Where the adaptive sizes went: one more run with -v, its lines about the buffer size.
    fresh()()?;
    let out = Command::new(b)
        .args(&argv(&["-v"])[1..])
        .stdin(Stdio::null())
        .output()
        .context("start mfu-rs cp -v")?;
    ensure!(out.status.success(), "mfu-rs cp -v failed: {}", out.status);
    let text = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).into_owned();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains("buffer size"))
        .collect();
    if lines.is_empty() {
        println!("\n(`mfu-rs cp -v` printed no buffer-size line)");
    } else {
        println!("\n`mfu-rs cp -v` (adaptive, one more run):\n");
        for l in lines {
            println!("    {l}");
        }
    }
    remove(dst)
}

fn bench_sync(b: &str, data: &Path) -> Result<()> {
    let src = small_tree(data)?;
    let (dst_rsync, dst_mfu) = (data.join("sync-rsync"), data.join("sync-mfu"));
    remove(&dst_rsync)?;
    remove(&dst_mfu)?;
    // The first sync of each destination, by the tool that will then resync it.
    crate::run(
        Command::new("rsync")
            .arg("-a")
            .arg(format!("{}/", s(&src)))
            .arg(format!("{}/", s(&dst_rsync))),
    )?;
    crate::run(Command::new(b).args(["sync", "-q"]).arg(&src).arg(&dst_mfu))?;
    flush_fs()?;
    let synced = SystemTime::now();
    std::thread::sleep(Duration::from_millis(50));
    // After the warm-up resync: equal to the source, and nothing rewritten or touched.
    let check = |dst: &Path| {
        let (src, dst) = (src.clone(), dst.to_path_buf());
        move || {
            same_tree(&src, &dst, true)?;
            let n = changed_since(&dst, synced)?;
            ensure!(
                n == 0,
                "{n} entries of the destination changed (ctime) in an unchanged resync"
            );
            Ok(())
        }
    };
    let (sp, dr, dm) = (s(&src), s(&dst_rsync), s(&dst_mfu));
    let (src_slash, dr_slash) = (format!("{sp}/"), format!("{dr}/"));
    let result = compare(
        "sync of an unchanged tree, 20,000 files × 4 KiB",
        &["The destination was synced once before (rsync's by rsync, mfu-rs's by mfu-rs); each run finds nothing to copy."],
        &[
            case("rsync -a", false, &["rsync", "-a", &src_slash, &dr_slash]).check(check(&dst_rsync)),
            case("mfu-rs sync np1", false, &[b, "sync", "-q", sp, dm]).check(check(&dst_mfu)),
            case("mfu-rs --ranks 2 sync", false, &[b, "--ranks", "2", "sync", "-q", sp, dm])
                .check(check(&dst_mfu)),
            case(
                "mpirun -np 2 mfu-rs sync",
                true,
                &["mpirun", "-np", "2", b, "sync", "-q", sp, dm],
            )
            .check(check(&dst_mfu)),
        ],
        &[0],
        RUNS,
    );
    remove(&dst_rsync)?;
    remove(&dst_mfu)?;
    result
}

fn bench_rm(b: &str, data: &Path) -> Result<()> {
    let src = small_tree(data)?;
    let victim = data.join("rm-victim");
    let recreate = || {
        let (src, victim) = (src.clone(), victim.clone());
        move || {
            remove(&victim)?;
            // rsync rather than `cp -a`: same tree, but cp's create-as-you-go order is about 4×
            // slower on ext4 here (see the cp section), and this runs before every run.
            let status = Command::new("rsync")
                .arg("-a")
                .arg(format!("{}/", s(&src)))
                .arg(format!("{}/", s(&victim)))
                .status()
                .context("start rsync")?;
            ensure!(
                status.success(),
                "rsync -a {}/ {}/ failed",
                src.display(),
                victim.display()
            );
            flush_fs()
        }
    };
    let gone = || {
        let victim = victim.clone();
        move || {
            ensure!(!victim.exists(), "{} still exists", victim.display());
            Ok(())
        }
    };
    let v = s(&victim);
    let result = compare(
        "rm of a tree of 20,000 files × 4 KiB (100 dirs × 200)",
        &["Before each run the tree is recreated by `rsync -a` and written back by `sync` (not timed)."],
        &[
            case("rm -rf", false, &["rm", "-rf", v]).prep(recreate()).check(gone()),
            case("mfu-rs rm np1", false, &[b, "rm", "-q", v]).prep(recreate()).check(gone()),
            case("mfu-rs --ranks 2 rm", false, &[b, "--ranks", "2", "rm", "-q", v])
                .prep(recreate())
                .check(gone()),
            case(
                "mpirun -np 2 mfu-rs rm",
                true,
                &["mpirun", "-np", "2", b, "rm", "-q", v],
            )
            .prep(recreate())
            .check(gone()),
        ],
        &[0],
        RUNS,
    );
    remove(&victim)?;
    result
}

/// The mixed tree of tar-mixed and tar-zstd (made once per bench run): about 1 GiB of hex text,
/// `KIND/dNN/fNNN.dat`.
fn mixed_tree(data: &Path) -> Result<PathBuf> {
    // (kind, directories, files per directory, bytes per file)
    const LAYOUT: &[(&str, usize, usize, usize)] = &[
        ("small", 40, 100, 16 << 10),
        ("medium", 4, 100, 1 << 20),
        ("large", 1, 40, 8 << 20),
        ("huge", 1, 2, 128 << 20),
    ];
    const NEED: u64 = 8 << 30;
    std::fs::create_dir_all(data)?;
    let src = data.join("mixed-src");
    // Written in LAYOUT order: the last file at its full size means the tree is complete.
    if std::fs::metadata(src.join("huge/d00/f001.dat")).is_ok_and(|m| m.len() == 128 << 20) {
        return Ok(src);
    }
    let free = free_bytes(data)?;
    ensure!(
        free >= NEED,
        "the mixed tar tree needs 8 GiB free on the file system of {} (1 GiB of sources, 4 archives or extractions of 1 GiB, margin); df says {:.1} GiB",
        data.display(),
        free as f64 / (1u64 << 30) as f64
    );
    let t = Instant::now();
    let _ = std::fs::remove_dir_all(&src);
    let mut rng = Rng(0x7A2);
    let mut buf = vec![0u8; 4 << 20];
    for &(kind, dirs, files, size) in LAYOUT {
        for d in 0..dirs {
            let sub = src.join(format!("{kind}/d{d:02}"));
            std::fs::create_dir_all(&sub)?;
            for f in 0..files {
                write_file(&sub.join(format!("f{f:03}.dat")), size, &mut buf, |b| {
                    rng.fill_hex(b)
                })?;
            }
        }
    }
    flush_fs()?;
    eprintln!(
        "bench: made {} (4,000 × 16 KiB, 400 × 1 MiB, 40 × 8 MiB, 2 × 128 MiB) in {:.1} s",
        src.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(src)
}

/// Entries under `dir` (itself included) and the bytes of its regular files.
fn tree_stats(dir: &Path) -> Result<(usize, u64)> {
    let (mut entries, mut bytes) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p)?;
        entries += 1;
        if m.is_file() {
            bytes += m.len();
        } else if m.is_dir() {
            for e in std::fs::read_dir(&p)? {
                stack.push(e?.path());
            }
        }
    }
    Ok((entries, bytes))
}

/// Check of an archive of `data/NAME`: GNU `tar -tf` lists `entries` members besides the dtar
/// index member, and `tar -d` (compare with the file system: data, size, mode, owner, mtime)
/// finds no difference.
fn archive_ok(archive: &Path, data: &Path, entries: usize) -> Result<()> {
    let out = Command::new("tar")
        .arg("-tf")
        .arg(archive)
        .output()
        .context("start tar -tf")?;
    ensure!(
        out.status.success(),
        "tar -tf {} failed: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr).trim_end()
    );
    let n = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.ends_with(".dtaridx"))
        .count();
    ensure!(
        n == entries,
        "tar -tf {} lists {n} members (the dtar index not counted), the tree has {entries} entries",
        archive.display()
    );
    let out = Command::new("tar")
        .args(["--exclude=*.dtaridx", "-d", "-f"])
        .arg(archive)
        .arg("-C")
        .arg(data)
        .output()
        .context("start tar -d")?;
    ensure!(
        out.status.success(),
        "tar -d -f {} -C {}: {}\n{}",
        archive.display(),
        data.display(),
        out.status,
        String::from_utf8_lossy(&[out.stdout, out.stderr].concat())
            .lines()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(())
}

/// Check of an extraction of `src` into `out`: `out` holds only `src`'s name (no dtar index
/// member), with the same entries, types and bytes.
fn extracted_ok(src: &Path, out: &Path) -> Result<()> {
    let name = src.file_name().context("tree without a name")?;
    let top = std::fs::read_dir(out)?
        .map(|e| Ok(e?.file_name()))
        .collect::<Result<Vec<_>>>()?;
    ensure!(
        top == [name],
        "{} holds {top:?}, expected only {name:?}",
        out.display()
    );
    same_tree(src, &out.join(name), false)
}

/// `mfu-rs` at np 1, as 2 thread ranks and under `mpirun -np 2`: (case name for `what`, MPI,
/// command line up to mfu-rs's subcommand).
fn mfu_launches<'a>(b: &'a str, what: &str) -> Vec<(String, bool, Vec<&'a str>)> {
    vec![
        (format!("mfu-rs {what} np1"), false, vec![b]),
        // Two ranks as threads of one process: np 2 without MPI's start-up.
        (
            format!("mfu-rs --ranks 2 {what}"),
            false,
            vec![b, "--ranks", "2"],
        ),
        (
            format!("mpirun -np 2 mfu-rs {what}"),
            true,
            vec!["mpirun", "-np", "2", b],
        ),
    ]
}

/// GNU tar's command line that archives `data/NAME` into `archive`, through `zstd -T0` when
/// `zstd`.
fn gnu_create(data: &str, name: &str, archive: &str, zstd: bool) -> Vec<String> {
    let v: Vec<&str> = if zstd {
        vec![
            "sh",
            "-c",
            r#"tar -cf - -C "$1" "$2" | zstd -T0 -q -o "$3""#,
            "sh",
            data,
            name,
            archive,
        ]
    } else {
        vec!["tar", "-cf", archive, "-C", data, name]
    };
    v.into_iter().map(String::from).collect()
}

/// mfu-rs tar's arguments that archive `data/NAME` into `archive`, seekable zstd when `zstd`.
fn mfu_create<'a>(data: &'a str, name: &'a str, archive: &'a str, zstd: bool) -> Vec<&'a str> {
    let mut v = vec!["tar", "-c", "-q"];
    if zstd {
        v.push("-z");
    }
    v.extend(["-f", archive, "-C", data, name]);
    v
}

/// Make `gnu` with GNU tar and `mfu` with `mfu-rs tar -c` at np 1 from `data/NAME` (untimed);
/// their sizes.
fn make_archives(
    b: &str,
    data: &Path,
    name: &str,
    zstd: bool,
    gnu: &Path,
    mfu: &Path,
) -> Result<(u64, u64)> {
    remove(gnu)?;
    remove(mfu)?;
    let g = gnu_create(s(data), name, s(gnu), zstd);
    crate::run(Command::new(&g[0]).args(&g[1..]))?;
    crate::run(Command::new(b).args(mfu_create(s(data), name, s(mfu), zstd)))?;
    flush_fs()?;
    Ok((std::fs::metadata(gnu)?.len(), std::fs::metadata(mfu)?.len()))
}

fn print_sizes(what: &str, data_bytes: u64, rows: &[(&str, u64)]) {
    println!("\n### archive sizes, {what}\n");
    println!(
        "file data: {data_bytes} bytes ({:.1} MiB)\n",
        data_bytes as f64 / (1 << 20) as f64
    );
    println!("| archive | bytes | MiB | archive / file data |\n|---|---|---|---|");
    for (n, size) in rows {
        println!(
            "| {n} | {size} | {:.1} | {:.3} |",
            *size as f64 / (1 << 20) as f64,
            *size as f64 / data_bytes as f64
        );
    }
}

/// The tar benchmarks of one tree, `data/NAME` (`what` describes it): create, then extract, `runs`
/// each, then the archive sizes; compressed with zstd when `zstd`.
fn bench_tar_tree(
    b: &str,
    data: &Path,
    tree: &Path,
    what: &str,
    zstd: bool,
    runs: usize,
) -> Result<()> {
    let name = tree
        .file_name()
        .and_then(|n| n.to_str())
        .context("tree without a UTF-8 name")?;
    let (entries, data_bytes) = tree_stats(tree)?;
    let ext = if zstd { "tar.zst" } else { "tar" };
    let new = data.join(format!("tar-new.{ext}"));
    let gnu = data.join(format!("tar-gnu.{ext}"));
    let mfu = data.join(format!("tar-mfu.{ext}"));
    let out = data.join("tar-out");
    let result = (|| {
        // The uncompressed sizes, for the compression ratio.
        let plain = if zstd {
            let (g, m) = (data.join("tar-gnu.tar"), data.join("tar-mfu.tar"));
            let sizes = make_archives(b, data, name, false, &g, &m);
            remove(&g)?;
            remove(&m)?;
            Some(sizes?)
        } else {
            None
        };
        let (dp, np) = (s(data), s(&new));
        let g = gnu_create(dp, name, np, zstd);
        let mut create = vec![case(
            if zstd {
                "tar -cf - \\| zstd -T0"
            } else {
                "tar -cf"
            },
            false,
            &g.iter().map(String::as_str).collect::<Vec<_>>(),
        )];
        let what_c = if zstd { "tar -c -z" } else { "tar -c" };
        for (n, mpi, mut argv) in mfu_launches(b, what_c) {
            argv.extend(mfu_create(dp, name, np, zstd));
            create.push(case(&n, mpi, &argv));
        }
        let create: Vec<Case> = create
            .into_iter()
            .map(|c| {
                let (n1, n2, d2) = (new.clone(), new.clone(), data.to_path_buf());
                c.prep(move || {
                    remove(&n1)?;
                    remove(Path::new(&format!("{}.dtaridx", s(&n1))))?;
                    flush_fs()
                })
                .check(move || archive_ok(&n2, &d2, entries))
            })
            .collect();
        compare(
            &format!("tar create, {what}{}", if zstd { ", zstd" } else { "" }),
            &[
                "Each run writes a fresh archive from the data directory (`-C`); its removal and a `sync` before each run are not timed; no tool fsyncs.",
                "Checked once: GNU `tar -tf` lists every entry of the tree (the dtar index member aside) and `tar -d` finds no difference with the tree.",
            ],
            &create,
            &[0],
            runs,
        )?;
        remove(&new)?;

        let (gnu_bytes, mfu_bytes) = make_archives(b, data, name, zstd, &gnu, &mfu)?;
        let (gp, mp, op) = (s(&gnu), s(&mfu), s(&out));
        let gnu_x: Vec<&str> = if zstd {
            vec![
                "sh",
                "-c",
                r#"zstd -dc "$1" | tar -xf - -C "$2""#,
                "sh",
                gp,
                op,
            ]
        } else {
            vec!["tar", "-xf", gp, "-C", op]
        };
        let mut extract = vec![case(
            if zstd {
                "zstd -dc \\| tar -xf -"
            } else {
                "tar -xf"
            },
            false,
            &gnu_x,
        )];
        for (n, mpi, mut argv) in mfu_launches(b, "tar -x") {
            argv.extend(["tar", "-x", "-q", "-f", mp, "-C", op]);
            extract.push(case(&n, mpi, &argv));
        }
        let extract: Vec<Case> = extract
            .into_iter()
            .map(|c| {
                let (o1, o2, t2) = (out.clone(), out.clone(), tree.to_path_buf());
                c.prep(move || {
                    remove(&o1)?;
                    std::fs::create_dir_all(&o1)?;
                    flush_fs()
                })
                .check(move || extracted_ok(&t2, &o2))
            })
            .collect();
        compare(
            &format!("tar extract, {what}{}", if zstd { ", zstd" } else { "" }),
            &[
                "The archive extracted was made once, untimed: by GNU tar for the GNU case, by `mfu-rs tar -c` (np 1) for the mfu-rs cases.",
                "Each run extracts into a fresh empty directory; its removal, creation and a `sync` before each run are not timed; no tool fsyncs.",
                "Checked once: the same entries, types and bytes as the tree, and nothing else (no dtar index member).",
            ],
            &extract,
            &[0],
            runs,
        )?;

        let mut rows = Vec::new();
        if let Some((g, m)) = plain {
            rows.push(("GNU tar -cf (uncompressed)", g));
            rows.push(("GNU tar -cf - \\| zstd -T0", gnu_bytes));
            rows.push(("mfu-rs tar -c (uncompressed)", m));
            rows.push(("mfu-rs tar -c -z", mfu_bytes));
        } else {
            rows.push(("GNU tar -cf", gnu_bytes));
            rows.push(("mfu-rs tar -c", mfu_bytes));
        }
        print_sizes(what, data_bytes, &rows);
        if let Some((g, m)) = plain {
            println!(
                "\ncompression ratio (uncompressed / compressed): `tar -cf - | zstd -T0` {:.2}, `mfu-rs tar -c -z` {:.2}",
                g as f64 / gnu_bytes as f64,
                m as f64 / mfu_bytes as f64
            );
        }
        Ok(())
    })();
    for p in [&new, &gnu, &mfu, &out] {
        remove(p)?;
    }
    result
}

fn bench_tar_small(b: &str, data: &Path) -> Result<()> {
    let src = small_tree(data)?;
    bench_tar_tree(
        b,
        data,
        &src,
        "20,000 files × 4 KiB (100 dirs × 200, random bytes)",
        false,
        RUNS,
    )
}

const MIXED: &str = "1 GiB mixed (4,000 × 16 KiB, 400 × 1 MiB, 40 × 8 MiB, 2 × 128 MiB; hex text)";

fn bench_tar_mixed(b: &str, data: &Path) -> Result<()> {
    let src = mixed_tree(data)?;
    bench_tar_tree(b, data, &src, MIXED, false, BIG_RUNS)
}

fn bench_tar_zstd(b: &str, data: &Path) -> Result<()> {
    let small = small_tree(data).and_then(|small| {
        bench_tar_tree(
            b,
            data,
            &small,
            "20,000 files × 4 KiB (100 dirs × 200, random bytes)",
            true,
            RUNS,
        )
    });
    // The mixed tree even when the small one failed.
    let mixed =
        mixed_tree(data).and_then(|mixed| bench_tar_tree(b, data, &mixed, MIXED, true, BIG_RUNS));
    match (small, mixed) {
        (Err(a), Err(b)) => bail!("small tree: {a:#}\nmixed tree: {b:#}"),
        (r, Ok(())) | (Ok(()), r) => r,
    }
}
