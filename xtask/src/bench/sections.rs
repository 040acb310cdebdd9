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
//!   `mfu-rs tar -c --zstd -f A.tar.zst TREE`, and `zstd -dc A.tar.zst | tar -xf - -C OUT` against
//!   `mfu-rs tar -x -f A.tar.zst -C OUT` (the archives extracted made as above).
//!
//! - tar-gz: the mixed tree as `.tar.gz`: `tar -czf` and `tar -I pigz -cf` against `mfu-rs tar
//!   -c --gzip`; `tar -xzf`, `tar -I pigz -xf` and `mfu-rs tar -x` of GNU tar's archive (one
//!   gzip stream), and `mfu-rs tar -x` of its own `--gzip` archive (members in parallel); see
//!   [`super::tar_gz`].
//! - resume: a 4 GiB file whose copy was killed half-way, finished by a sync that resumes from
//!   its journal against one that copies it again (journal removed), and a whole copy; on
//!   tmpfs and on the workspace's file system (see `resume.rs`).
//! - verify: `mfu-rs cp --verify`, `--manifest` (BLAKE3, SHA-256) and both against plain `cp`
//!   and against `cp` followed by `mfu-rs cmp`, at np 1 and `--ranks 2` (see `verify.rs`).
//! - resume-all (issue 33; options `--quick`, `--tools LIST`, `--fs tmpfs|disk`, `--pairs N`,
//!   `--np LIST`, `--overhead-only`): every tool stopped by kill -9
//!   and SIGTERM at 25, 50 and 75% of an uninterrupted run and run again until it completes:
//!   the work redone and whether the result equals the uninterrupted run's; writes
//!   `target/bench/resume-all.md` (see `resume_all/mod.rs`).
//!
//! Each tar section also prints the sizes of the GNU and mfu-rs archives (tar-zstd: compressed
//! and not, with the compression ratios).
//! - pfa (issue 36; options `--quick`, `--fs LIST`, `--np LIST`, `--launch LIST`, `--records
//!   K`, `--small-files N`, `--chunks N`, `--runs N`): parallel file aggregation against N-N
//!   and plain N-1 files, small files as files, an incremental store; writes
//!   `target/bench/pfa.md` (see `pfa.rs`).
//! - tar-select: extracting 1% of a 1000 MiB archive (one directory of 100) against all of it,
//!   GNU tar against mfu-rs, with the bytes each 1% run reads (`super::tar_select`).
//!
//! Each tar section but tar-select also prints the sizes of the GNU and mfu-rs archives
//! (tar-zstd: compressed and not, with the compression ratios).
//!
//! `cp` selects cp-small and cp-big (not cp-bufsize), `tar` selects tar-small, tar-mixed and
//! tar-zstd. Before each timed run an untimed step prepares it (removes the destination or
//! archive, or recreates the tree to remove with `rsync -a`) and runs `sync(1)`, so that
//! writeback of the previous run's data does not land in the next run. The data for cp, sync, rm and tar lives in
//! `target/bench-data` (the file system of the workspace) and is removed at the end.
//!
//! The binary measured is `target/release/mfu-rs`, built first; `MFU_RS_BENCH_BIN=PATH` measures
//! that binary instead (not built, e.g. one built from another tree).

use super::fsutil::{
    archive_ok, changed_since, extracted_ok, flush_fs, free_bytes, remove, s, same_tree, tree_stats,
};
use super::gen::{make_list, make_random_tree, make_tree, write_layout, Fill, Group};
use super::measure::{case, loadavg, measure, median, Case};
use crate::setup::have;
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

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
pub const SECTIONS: &[&str] = &[
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
    "tar-gz",
    "resume",
    "tar-select",
    "verify",
    "resume-all",
    "pfa",
];

pub(super) fn compare(
    title: &str,
    notes: &[&str],
    cases: &[Case],
    peers: &[usize],
    runs: usize,
) -> Result<()> {
    let load_before = loadavg();
    let start = Instant::now();
    let medians: Vec<f64> = measure_secs(cases, runs)?.into_iter().map(median).collect();
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

/// [`measure`], seconds only; a failed check is also printed into the report.
fn measure_secs(cases: &[Case], runs: usize) -> Result<Vec<Vec<f64>>> {
    let (times, warnings) = measure(cases, runs, true)?;
    for (_, w) in warnings {
        println!("(warning: {w})");
    }
    Ok(times
        .into_iter()
        .map(|t| t.iter().map(|r| r.secs).collect())
        .collect())
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
/// [walk|sort|cp|cp-small|cp-big|cp-bufsize|sync|rm|tar|tar-small|tar-mixed|tar-zstd|tar-gz|resume|tar-select|verify]...`.
pub fn run(args: &[String], bin: &Path, root: &Path) -> Result<()> {
    let mut want: Vec<&str> = Vec::new();
    // Options of resume-all (`--quick`, `--tools LIST`, `--fs tmpfs|disk`, `--pairs N`,
    // `--np LIST`, `--overhead-only`): see `super::resume_all`.
    let mut resume_all_args: Vec<String> = Vec::new();
    let mut args = args.iter();
    while let Some(a) = args.next() {
        if a.starts_with("--") {
            resume_all_args.push(a.clone());
            if ["--tools", "--fs", "--pairs", "--np"].contains(&a.as_str())
                || super::pfa::VALUE_OPTIONS.contains(&a.as_str())
            {
                resume_all_args.extend(args.next().cloned());
            }
            continue;
        }
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
    ensure!(
        resume_all_args.is_empty() || want.contains(&"resume-all") || want.contains(&"pfa"),
        "{} only apply to the sections resume-all and pfa",
        resume_all_args.join(" ")
    );
    let started = Instant::now();
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
            "tar-gz" => super::tar_gz::bench_tar_gz(b, &data),
            "resume" => super::resume::bench_resume(b, &data),
            "tar-select" => super::tar_select::bench_tar_select(b, &data),
            "verify" => super::verify::bench_verify(b, &data),
            "resume-all" => super::resume_all::bench_resume_all(b, &data, &resume_all_args),
            "pfa" => super::pfa::bench_pfa(b, root, &data, &resume_all_args),
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
    let (_, bytes, _) = tree_stats(src)?;
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
    let times = measure_secs(&cases, runs)?;
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
pub(super) fn mixed_tree(data: &Path) -> Result<PathBuf> {
    const LAYOUT: &[Group] = &[
        Group {
            kind: "small",
            dirs: 40,
            files: 100,
            bytes: 16 << 10,
        },
        Group {
            kind: "medium",
            dirs: 4,
            files: 100,
            bytes: 1 << 20,
        },
        Group {
            kind: "large",
            dirs: 1,
            files: 40,
            bytes: 8 << 20,
        },
        Group {
            kind: "huge",
            dirs: 1,
            files: 2,
            bytes: 128 << 20,
        },
    ];
    const NEED: u64 = 8 << 30;
    std::fs::create_dir_all(data)?;
    let src = data.join("mixed-src");
    let free = free_bytes(data)?;
    ensure!(
        free >= NEED,
        "the mixed tar tree needs 8 GiB free on the file system of {} (1 GiB of sources, 4 archives or extractions of 1 GiB, margin); df says {:.1} GiB",
        data.display(),
        free as f64 / (1u64 << 30) as f64
    );
    let t = Instant::now();
    if write_layout(&src, LAYOUT, 0x7A2, Fill::Hex)? {
        eprintln!(
            "bench: made {} (4,000 × 16 KiB, 400 × 1 MiB, 40 × 8 MiB, 2 × 128 MiB) in {:.1} s",
            src.display(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(src)
}

/// `mfu-rs` at np 1, as 2 thread ranks and under `mpirun -np 2`: (case name for `what`, MPI,
/// command line up to mfu-rs's subcommand).
pub(super) fn mfu_launches<'a>(b: &'a str, what: &str) -> Vec<(String, bool, Vec<&'a str>)> {
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
        v.push("--zstd");
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
    let (entries, data_bytes, _) = tree_stats(tree)?;
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
        let what_c = if zstd { "tar -c --zstd" } else { "tar -c" };
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
            rows.push(("mfu-rs tar -c --zstd", mfu_bytes));
        } else {
            rows.push(("GNU tar -cf", gnu_bytes));
            rows.push(("mfu-rs tar -c", mfu_bytes));
        }
        print_sizes(what, data_bytes, &rows);
        if let Some((g, m)) = plain {
            println!(
                "\ncompression ratio (uncompressed / compressed): `tar -cf - | zstd -T0` {:.2}, `mfu-rs tar -c --zstd` {:.2}",
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

pub(super) const MIXED: &str =
    "1 GiB mixed (4,000 × 16 KiB, 400 × 1 MiB, 40 × 8 MiB, 2 × 128 MiB; hex text)";

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
