//! `mfu-rs tar`, reading side, end to end: GNU sparse archives in every format, indexes that no
//! longer match their archive, numeric fields as GNU tar parses them, entries that cannot be
//! extracted, SIGINT during extraction, archives written by other implementations (the
//! corpus, GNU incremental dumpdirs included), and a seeded mutation driver over damaged
//! archives.
//!
//! The reference is GNU tar's extraction of the same archive (`TZ=UTC`, `LC_ALL=C`). A missing
//! external tool fails the test with a hint to run `cargo xtask setup`.

use mfu_tests::tar_tools::{gnu_tar, tar_np, text, tool};
use mfu_tests::tree::{self, Compare, Tree};
use mfu_tests::{expect_status, noise, with_change_after_listing, Tool};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory `name` under `work`.
fn fresh(work: &Path, name: &str) -> PathBuf {
    let d = work.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Snapshot of an extraction target, without its root (made by the test, not the archive).
fn extracted(dir: &Path) -> Tree {
    let mut t = tree::snapshot(dir);
    t.remove(&b""[..]);
    t
}

/// Extract `archive` with GNU tar into a fresh `work/name`; returns the directory and GNU tar's
/// output (its status may be non-zero for a damaged archive).
fn gnu_extract(archive: &Path, work: &Path, name: &str) -> (PathBuf, Output) {
    let d = fresh(work, name);
    let out = gnu_tar()
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(&d)
        .output()
        .unwrap();
    (d, out)
}

/// Extract `archive` with mfu-rs at `np` ranks into a fresh `work/name`, expecting `code`.
fn mfu_extract(np: usize, archive: &Path, work: &Path, name: &str, code: i32) -> (PathBuf, Output) {
    let d = fresh(work, name);
    let out = expect_status(
        tar_np(np)
            .arg("-x")
            .arg("-f")
            .arg(archive)
            .arg("-C")
            .arg(&d),
        code,
    );
    (d, out)
}

/// Names `tar -t` prints, sorted.
fn names(out: &[u8]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = out
        .split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    v.sort();
    v
}

/// `(size, name)` of each `tar -tv` line (the size is the column before the date).
fn sizes(out: &[u8]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = text(out)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[2].to_string(), f[5..].join(" "))
        })
        .collect();
    v.sort();
    v
}

// ---- 1. GNU sparse archives ---------------------------------------------------------------

/// A sparse file: `segments` runs of data (4 KiB apart from 96 KiB), then a hole to `size`.
fn write_sparse(path: &Path, seed: u64, runs: usize, size: u64) {
    let f = std::fs::File::create(path).unwrap();
    for i in 0..runs as u64 {
        f.write_all_at(&noise(seed + i, 3000 + 100 * i as usize), i * 96 * 1024)
            .unwrap();
    }
    f.set_len(size).unwrap();
}

/// The tree the sparse tests archive: sparse files with 1, 3 and 9 data runs (9 needs old GNU
/// extension headers: a header holds 4), one that is all hole, one with data at its very end,
/// and plain files and a directory after them (so a misread sparse entry shows in what follows).
fn sparse_tree(dir: &Path) {
    std::fs::create_dir_all(dir.join("s/sub")).unwrap();
    write_sparse(&dir.join("s/a_one"), 1, 1, 1 << 20);
    write_sparse(&dir.join("s/b_three"), 10, 3, 3 << 20);
    write_sparse(&dir.join("s/c_nine"), 20, 9, 2 << 20);
    std::fs::File::create(dir.join("s/d_hole"))
        .unwrap()
        .set_len(5 << 20)
        .unwrap();
    let f = std::fs::File::create(dir.join("s/e_tail")).unwrap();
    f.write_all_at(b"the end", (4 << 20) - 7).unwrap();
    std::fs::write(dir.join("s/sub/plain"), noise(99, 70_000)).unwrap();
    std::fs::write(dir.join("s/z_after"), b"after the sparse files\n").unwrap();
}

#[test]
fn gnu_sparse_archives_of_every_format_extract_and_list_like_gnu_tar() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let src = fresh(w, "src");
    sparse_tree(&src);
    // Each format at 1 rank, and most at 2 too (a sparse entry's data then spans the ranks'
    // parts), within the test's time budget.
    let formats: [(&str, &[&str], &[usize]); 5] = [
        ("oldgnu", &["--format=oldgnu"], &[1, 2]),
        ("gnu", &["--format=gnu"], &[1]),
        (
            "posix-0.0",
            &["--format=posix", "--sparse-version=0.0"],
            &[2],
        ),
        (
            "posix-0.1",
            &["--format=posix", "--sparse-version=0.1"],
            &[1],
        ),
        (
            "posix-1.0",
            &["--format=posix", "--sparse-version=1.0"],
            &[1, 2],
        ),
    ];
    for (label, opts, nps) in formats {
        let archive = w.join(format!("{label}.tar"));
        expect_status(
            gnu_tar()
                .arg("--sparse")
                .args(opts)
                .arg("-cf")
                .arg(&archive)
                .arg("-C")
                .arg(&src)
                .arg("s"),
            0,
        );
        let (want_dir, out) = gnu_extract(&archive, w, &format!("{label}.gnu"));
        assert!(out.status.success(), "{label}: GNU tar -x: {out:?}");
        let want = extracted(&want_dir);
        for &np in nps {
            let (got_dir, _) = mfu_extract(np, &archive, w, &format!("{label}.np{np}"), 0);
            // Bytes, metadata and the data/hole map, against GNU tar's extraction.
            tree::assert_equal_in(
                &format!("{label} at np {np}"),
                &extracted(&got_dir),
                &want,
                Compare::FULL,
            );
            let all_hole = std::fs::metadata(got_dir.join("s/d_hole")).unwrap();
            assert_eq!(all_hole.len(), 5 << 20);
            assert!(
                all_hole.blocks() < 64,
                "{label}: a file that is all hole takes {} blocks",
                all_hole.blocks()
            );
        }
        // -t shows the real names, -tv the real sizes, as GNU tar does.
        let gnu_t = gnu_tar().arg("-tf").arg(&archive).output().unwrap();
        let ours = expect_status(tar_np(1).arg("-t").arg("-f").arg(&archive), 0);
        assert_eq!(names(&ours.stdout), names(&gnu_t.stdout), "{label}: -t");
        let gnu_tv = gnu_tar().arg("-tvf").arg(&archive).output().unwrap();
        let ours = expect_status(tar_np(1).arg("-t").arg("-v").arg("-f").arg(&archive), 0);
        assert_eq!(sizes(&ours.stdout), sizes(&gnu_tv.stdout), "{label}: -tv");
    }
}

// ---- 2. Indexes that no longer match their archive ----------------------------------------

/// Files `f1`..`fN` of distinct contents in `dir/src`.
fn small_files(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    for i in 1..=n {
        std::fs::write(
            dir.join(format!("src/f{i}")),
            noise(i as u64, 700 + i * 100),
        )
        .unwrap();
    }
}

/// Offsets (bytes) of the entries of a GNU tar archive of plain files without extensions.
fn plain_offsets(archive: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 512 <= archive.len() && archive[at..at + 512].iter().any(|&b| b != 0) {
        out.push(at as u64);
        let size_field = text(&archive[at + 124..at + 136]);
        let size = u64::from_str_radix(size_field.trim_matches(['\0', ' ']), 8).unwrap();
        at += 512 + size.div_ceil(512) as usize * 512;
    }
    out
}

fn packed(offsets: &[u64]) -> Vec<u8> {
    offsets.iter().flat_map(|o| o.to_be_bytes()).collect()
}

#[test]
fn an_index_that_does_not_hold_against_the_archive_is_set_aside_for_a_scan() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    small_files(w, 7);
    let archive = w.join("a.tar");
    let side = w.join("a.tar.dtaridx");
    let five: Vec<String> = (1..=5).map(|i| format!("src/f{i}")).collect();
    expect_status(
        gnu_tar()
            .arg("-cf")
            .arg(&archive)
            .arg("-C")
            .arg(w)
            .args(&five),
        0,
    );
    // An index saved by a scan, then two members appended by `tar -r`: the index is stale.
    let (_, out) = mfu_extract(1, &archive, w, "first", 0);
    assert!(!side.exists(), "no index is saved without --save-index");
    let _ = out;
    expect_status(
        tar_np(1)
            .args(["-x", "--save-index", "-f"])
            .arg(&archive)
            .arg("-C")
            .arg(fresh(w, "save")),
        0,
    );
    assert!(side.exists(), "--save-index saved {}", side.display());
    expect_status(
        gnu_tar()
            .arg("-rf")
            .arg(&archive)
            .arg("-C")
            .arg(w)
            .args(["src/f6", "src/f7"]),
        0,
    );
    // `src` itself is not archived: only its files are compared.
    let files_of = |dir: &Path| {
        let mut t = extracted(dir);
        t.remove(&b"src"[..]);
        t
    };
    let want = files_of(&gnu_extract(&archive, w, "gnu").0);
    assert_eq!(want.len(), 7, "GNU tar sees 7 files");
    let bytes = std::fs::read(&archive).unwrap();
    let all = plain_offsets(&bytes);
    assert_eq!(all.len(), 7);
    let check = |label: &str, np: usize, notes: &[&str]| {
        let (got, out) = mfu_extract(np, &archive, w, &format!("{label}.np{np}"), 0);
        tree::assert_equal_in(label, &files_of(&got), &want, Compare::META);
        let err = text(&out.stderr);
        for n in notes {
            assert!(err.contains(n), "{label}: stderr lacks {n:?}:\n{err}");
        }
        let summary = text(&out.stdout);
        assert!(
            summary.contains("Extracted 7 of 7 entries"),
            "{label}: {summary}"
        );
    };
    for np in [1, 2] {
        check(
            "stale side file",
            np,
            &["not using the index", "a.tar.dtaridx"],
        );
    }
    // A side file cut short (early dtar layout: bare offsets), listing 5 of the 7 entries.
    std::fs::write(&side, packed(&all[..5])).unwrap();
    check(
        "cut side file",
        2,
        &["not using the index", "goes on at byte"],
    );
    // Offsets into the middle of the data.
    std::fs::write(&side, packed(&[0, 1024, 2048])).unwrap();
    check("offsets into data", 1, &["not using the index"]);
    // The right offsets but a recorded end that is not the archive's.
    let mut idx = packed(&all);
    idx.resize(1024 - 48, 0);
    for v in [7u64, 512, 0, 0, 1, 0x4454_4152_5F49_4458] {
        idx.extend_from_slice(&v.to_be_bytes());
    }
    std::fs::write(&side, &idx).unwrap();
    check(
        "wrong recorded end",
        1,
        &["records that the entries end at byte 512"],
    );
    // The xattr index, stale in the same way (no side file).
    std::fs::remove_file(&side).unwrap();
    rustix::fs::setxattr(
        &archive,
        "user.dtar.idx",
        &packed(&all[..5]),
        rustix::fs::XattrFlags::empty(),
    )
    .expect("user xattrs on the test's file system");
    check(
        "stale xattr",
        2,
        &["not using the index in the xattr user.dtar.idx"],
    );
    rustix::fs::removexattr(&archive, "user.dtar.idx").unwrap();
    // A good index is used (no scan), and one saved by mfu-rs records the archive's end.
    expect_status(
        tar_np(1).args(["-t", "--save-index", "-f"]).arg(&archive),
        0,
    );
    let saved = std::fs::read(&side).unwrap();
    assert_eq!(saved.len(), 1024, "7 offsets and the footer block");
    assert_eq!(&saved[saved.len() - 8..], b"DTAR_IDX");
    let end = u64::from_be_bytes(saved[1024 - 40..1024 - 32].try_into().unwrap());
    // f7 holds 700 + 7 * 100 bytes: 3 blocks after its header.
    assert_eq!(end, *all.last().unwrap() + 512 + 1536, "the entries' end");
    let (got, out) = mfu_extract(2, &archive, w, "good", 0);
    tree::assert_equal_in("good index", &files_of(&got), &want, Compare::META);
    let err = text(&out.stderr);
    assert!(!err.contains("scan") && !err.contains("not using"), "{err}");
}

#[test]
fn the_mpifileutils_vector_is_extracted_by_its_own_index() {
    let work = tempfile::tempdir().unwrap();
    let (_, out) = mfu_extract(
        2,
        &mfu_tests::vector("tartree.dtar.tar"),
        work.path(),
        "x",
        0,
    );
    let err = text(&out.stderr);
    assert!(!err.contains("scan") && !err.contains("not using"), "{err}");
}

// ---- 3. Numeric fields ----------------------------------------------------------------------

fn octal(field: &mut [u8], v: u64) {
    let w = field.len() - 1;
    let s = format!("{v:0w$o}");
    field[..w].copy_from_slice(s.as_bytes());
    field[w] = 0;
}

/// A ustar member built by hand; `edit` changes the header block before its checksum.
fn member(
    name: &[u8],
    typeflag: u8,
    data: &[u8],
    link: &[u8],
    edit: impl Fn(&mut [u8]),
) -> Vec<u8> {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    octal(
        &mut h[100..108],
        if typeflag == b'5' { 0o755 } else { 0o644 },
    );
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], data.len() as u64);
    octal(&mut h[136..148], 1_600_000_000);
    h[156] = typeflag;
    h[157..157 + link.len()].copy_from_slice(link);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[265..269].copy_from_slice(b"root");
    h[297..301].copy_from_slice(b"root");
    edit(&mut h);
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn archive_of(members: &[Vec<u8>]) -> Vec<u8> {
    let mut a = members.concat();
    a.extend_from_slice(&[0u8; 1024]);
    a
}

#[test]
fn numeric_fields_with_leading_nuls_and_blanks_read_as_gnu_tar_reads_them() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // "\0\0\0\0\0\0\0 0016": GNU tar and bsdtar read 0 (one leading NUL is skipped, the next
    // ends the number), not 14. In the size field of `a`, the wrong reading swallows `b`.
    let nuls = |f: &mut [u8]| {
        f.fill(0);
        let n = f.len();
        f[n - 5..].copy_from_slice(b" 0016");
    };
    let archive = archive_of(&[
        member(b"a", b'0', b"", b"", |h| nuls(&mut h[124..136])),
        member(b"b", b'0', b"bee\n", b"", |h| nuls(&mut h[136..148])),
        member(b"c", b'0', b"sea\n", b"", |h| {
            // One NUL, blanks, digits: 0o644; a space-terminated mtime.
            h[100..108].copy_from_slice(b"\0  644 \0");
            h[136..148].copy_from_slice(b"  1234567 \0\0");
        }),
    ]);
    let path = w.join("nuls.tar");
    std::fs::write(&path, &archive).unwrap();
    let (want_dir, out) = gnu_extract(&path, w, "gnu");
    assert!(out.status.success(), "GNU tar: {out:?}");
    let want = extracted(&want_dir);
    assert_eq!(want.len(), 3, "GNU tar: {want:?}");
    for np in [1, 2] {
        let (got, _) = mfu_extract(np, &path, w, &format!("np{np}"), 0);
        tree::assert_equal_in(&format!("np {np}"), &extracted(&got), &want, Compare::META);
    }
    let gnu_tv = gnu_tar().arg("-tvf").arg(&path).output().unwrap();
    let ours = expect_status(tar_np(1).arg("-tvf").arg(&path), 0);
    assert_eq!(sizes(&ours.stdout), sizes(&gnu_tv.stdout));
}

// ---- 4. Entries that cannot be extracted ------------------------------------------------------

#[test]
fn unsupported_entries_and_hard_links_to_directories_exit_1_naming_them() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let archive = archive_of(&[
        member(b"d/", b'5', b"", b"", |_| {}),
        member(b"d/f", b'0', b"file\n", b"", |_| {}),
        member(b"weird", b'Z', b"unknown type data\n", b"", |_| {}),
        member(b"dlink", b'1', b"", b"d", |_| {}),
        member(b"last", b'0', b"last\n", b"", |_| {}),
    ]);
    let path = w.join("odd.tar");
    std::fs::write(&path, &archive).unwrap();
    for np in [1, 2] {
        let (got, out) = mfu_extract(np, &path, w, &format!("np{np}"), 1);
        let err = text(&out.stderr);
        for name in ["weird", "dlink"] {
            assert!(
                err.lines().any(|l| l.contains(name)),
                "np {np}: {name} is not named on stderr:\n{err}"
            );
        }
        assert_eq!(std::fs::read(got.join("d/f")).unwrap(), b"file\n");
        assert_eq!(std::fs::read(got.join("last")).unwrap(), b"last\n");
        assert!(!got.join("weird").exists() && !got.join("dlink").exists());
        let summary = text(&out.stdout);
        assert!(summary.contains("Extracted 3 of 5 entries"), "{summary}");
    }
    // A GNU volume label is no file: nothing to extract, exit 0 (as GNU tar).
    let labelled = w.join("label.tar");
    let src = fresh(w, "lsrc");
    std::fs::write(src.join("f"), b"x\n").unwrap();
    expect_status(
        gnu_tar()
            .args(["--label", "VOLUME-1", "-cf"])
            .arg(&labelled)
            .arg("-C")
            .arg(&src)
            .arg("f"),
        0,
    );
    let (got, _) = mfu_extract(1, &labelled, w, "label", 0);
    assert_eq!(std::fs::read(got.join("f")).unwrap(), b"x\n");
}

// ---- 5. SIGINT --------------------------------------------------------------------------------

/// An archive of `n` files of 4 KiB (distinct bytes) and one of 8 MiB, all with mtime
/// 1_000_000_000, made by GNU tar; returns it and the source directory.
fn many_files(w: &Path, n: usize) -> (PathBuf, PathBuf) {
    let src = fresh(w, "src");
    std::fs::create_dir(src.join("t")).unwrap();
    let bytes = noise(7, n * 4096 + (8 << 20));
    for i in 0..n {
        std::fs::write(src.join(format!("t/f{i:05}")), &bytes[i * 4096..][..4096]).unwrap();
    }
    std::fs::write(src.join("t/big"), &bytes[n * 4096..]).unwrap();
    let archive = w.join("many.tar");
    expect_status(
        gnu_tar()
            .args(["--mtime=@1000000000", "--sort=name", "-cf"])
            .arg(&archive)
            .arg("-C")
            .arg(&src)
            .arg("t"),
        0,
    );
    (archive, src)
}

/// No file of `got` carries the archive's mtime (1_000_000_000) with bytes other than its
/// source's; returns how many files carry it.
fn complete_files_are_right(got: &Path, src: &Path) -> usize {
    let mut n = 0;
    let Ok(dir) = std::fs::read_dir(got.join("t")) else {
        return 0;
    };
    for e in dir {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        if m.is_file() && m.mtime() == 1_000_000_000 {
            let name = e.file_name();
            assert_eq!(
                std::fs::read(e.path()).unwrap(),
                std::fs::read(src.join("t").join(&name)).unwrap(),
                "{name:?} carries the archive's mtime but not its bytes"
            );
            n += 1;
        }
    }
    n
}

#[test]
fn sigint_during_extraction_stops_it_honestly_with_exit_1() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (archive, src) = many_files(w, 2000);
    let total = 2000 + 1 + 1;
    // Mid-way: once some files are out.
    let got = fresh(w, "mid");
    let mut child = tar_np(1)
        .args(["-x", "-f"])
        .arg(&archive)
        .arg("-C")
        .arg(&got)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let n = std::fs::read_dir(got.join("t")).map_or(0, |d| d.count());
        if n >= 20 {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before the signal"
        );
        assert!(start.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains("interrupted"), "{err}");
    assert!(text(&out.stdout).contains("(interrupted)"), "{out:?}");
    let complete = complete_files_are_right(&got, &src);
    assert!(
        complete < total - 1,
        "the extraction was not stopped ({complete} of {total} complete)"
    );
    // Before any work (the signal comes while the tool pauses after finding the entries), at
    // 1 and 2 ranks: nothing is extracted.
    for np in [1, 2] {
        let got = fresh(w, &format!("before{np}"));
        let mut cmd = tar_np(np);
        cmd.arg("-x").arg("-f").arg(&archive).arg("-C").arg(&got);
        let out = with_change_after_listing(&mut cmd, || {
            for pid in pids_of_ranks(&got) {
                rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
            }
        });
        assert_eq!(out.status.code(), Some(1), "np {np}: {out:?}");
        assert!(
            text(&out.stderr).contains("interrupted"),
            "np {np}: {out:?}"
        );
        assert_eq!(complete_files_are_right(&got, &src), 0, "np {np}");
    }
}

/// The processes running `mfu-rs tar ... -C target` (the ranks, not mpirun).
fn pids_of_ranks(target: &Path) -> Vec<rustix::process::Pid> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_rank = args.first().is_some_and(|a| a.ends_with(b"mfu-rs"))
            && args.iter().any(|a| *a == target.as_os_str().as_bytes());
        if is_rank {
            out.push(rustix::process::Pid::from_raw(pid).unwrap());
        }
    }
    assert!(!out.is_empty(), "no rank found for {}", target.display());
    out
}

// ---- The corpus: archives written by other implementations ----------------------------------

/// The corpus tree under `dir/top`: names longer than 100 bytes and paths longer than 255, a
/// non-UTF-8 name, a newline in a name, symlinks (short, long target, dangling), a hard-link
/// pair, empty directory and file, a sparse file, modes; every mtime a whole second.
fn corpus_tree(dir: &Path) {
    let top = dir.join("top");
    let long = "L".repeat(150);
    let deep = ["a".repeat(90), "b".repeat(90), "c".repeat(90)].join("/");
    std::fs::create_dir_all(top.join("empty")).unwrap();
    std::fs::create_dir_all(top.join(&deep)).unwrap();
    std::fs::create_dir_all(top.join("d")).unwrap();
    std::fs::write(top.join(format!("d/{long}")), b"long name\n").unwrap();
    std::fs::write(top.join(format!("{deep}/{}", "f".repeat(80))), b"deep\n").unwrap();
    tree::write_file_named(&top, b"caf\xe9.txt", b"latin-1\n");
    tree::write_file_named(&top, b"new\nline", b"newline\n");
    std::fs::write(top.join("with space"), noise(3, 5000)).unwrap();
    std::fs::write(top.join("target.txt"), b"target\n").unwrap();
    std::os::unix::fs::symlink("target.txt", top.join("link")).unwrap();
    std::os::unix::fs::symlink("nowhere/at/all", top.join("dangling")).unwrap();
    std::os::unix::fs::symlink("T".repeat(150), top.join("longlink")).unwrap();
    std::fs::write(top.join("hard1"), b"hard linked\n").unwrap();
    std::fs::hard_link(top.join("hard1"), top.join("hard2")).unwrap();
    std::fs::write(top.join("empty.txt"), b"").unwrap();
    std::fs::write(top.join("exec"), b"#!/bin/sh\n").unwrap();
    tree::chmod(&top.join("exec"), 0o755);
    std::fs::write(top.join("readonly"), b"ro\n").unwrap();
    tree::chmod(&top.join("readonly"), 0o444);
    write_sparse(&top.join("sparse.bin"), 5, 3, 1 << 20);
    // Whole seconds everywhere, deepest first (so a directory's is not changed afterwards).
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut stack = vec![top.clone()];
    while let Some(p) = stack.pop() {
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
        paths.push(p);
    }
    paths.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    for (i, p) in paths.iter().enumerate() {
        tree::set_mtime(p, (1_500_000_000 + i as i64 * 3600, 0));
    }
}

/// Python's tarfile in `format` (GNU_FORMAT, PAX_FORMAT, USTAR_FORMAT): each entry added on its
/// own, names that format cannot hold left out (as tarfile refuses them).
const PYTHON_CORPUS: &str = r#"
import os, sys, tarfile
base, fmt, out = sys.argv[1], sys.argv[2], sys.argv[3]
with tarfile.open(out, "w", format=getattr(tarfile, fmt), encoding="utf-8",
                  errors="surrogateescape") as t:
    for root, dirs, files in os.walk(os.path.join(base, "top")):
        dirs.sort()
        for name in [""] + sorted(dirs + files):
            p = os.path.join(root, name) if name else root
            if name in dirs:
                continue
            rel = os.path.relpath(p, base)
            try:
                t.add(p, rel, recursive=False)
            except ValueError:
                pass
        for d in dirs:
            pass
"#;

#[test]
fn archives_of_other_implementations_extract_as_gnu_tar_extracts_them() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let src = fresh(w, "src");
    corpus_tree(&src);
    let mut archives: Vec<(String, PathBuf, usize)> = Vec::new();
    let mut make = |label: &str, np: usize, cmd: &mut Command| {
        let archive = w.join(format!("{label}.tar"));
        let out = cmd.output().unwrap_or_else(|e| panic!("{label}: {e}"));
        // Formats that cannot hold some names make their writer complain: what they wrote is
        // still an archive that both readers must agree on.
        assert!(
            archive.exists(),
            "{label}: no archive written: {}",
            text(&out.stderr)
        );
        archives.push((label.to_string(), archive, np));
    };
    for (fmt, np) in [
        ("gnu", 1),
        ("oldgnu", 1),
        ("posix", 2),
        ("ustar", 1),
        ("v7", 1),
    ] {
        let archive = w.join(format!("gnu-{fmt}.tar"));
        let mut c = gnu_tar();
        c.arg(format!("--format={fmt}"));
        if matches!(fmt, "gnu" | "oldgnu" | "posix") {
            c.arg("--sparse");
        }
        make(
            &format!("gnu-{fmt}"),
            np,
            c.arg("-cf").arg(&archive).arg("-C").arg(&src).arg("top"),
        );
    }
    // GNU incremental: directories are dumpdirs ('D').
    let archive = w.join("gnu-incremental.tar");
    make(
        "gnu-incremental",
        1,
        gnu_tar()
            .arg("--listed-incremental")
            .arg(w.join("snapshot"))
            .arg("-cf")
            .arg(&archive)
            .arg("-C")
            .arg(&src)
            .arg("top"),
    );
    for (fmt, np) in [("ustar", 1), ("pax", 2), ("restricted", 1), ("gnutar", 1)] {
        let archive = w.join(format!("bsdtar-{fmt}.tar"));
        let mut c = tool("bsdtar");
        if fmt != "restricted" {
            c.args(["--format", fmt]);
        }
        make(
            &format!("bsdtar-{fmt}"),
            np,
            c.arg("-cf").arg(&archive).arg("-C").arg(&src).arg("top"),
        );
    }
    for (fmt, np) in [("GNU_FORMAT", 1), ("PAX_FORMAT", 2), ("USTAR_FORMAT", 1)] {
        let archive = w.join(format!("python-{fmt}.tar"));
        make(
            &format!("python-{fmt}"),
            np,
            tool("python3")
                .args(["-c", PYTHON_CORPUS])
                .arg(&src)
                .arg(fmt)
                .arg(&archive),
        );
    }
    for (label, archive, np) in &archives {
        let (want_dir, gnu_out) = gnu_extract(archive, w, &format!("{label}.gnu"));
        let want = extracted(&want_dir);
        assert!(
            want.len() > 10,
            "{label}: GNU tar extracted only {} entries: {}",
            want.len(),
            text(&gnu_out.stderr)
        );
        let d = fresh(w, &format!("{label}.mfu"));
        let out = tar_np(*np)
            .arg("-x")
            .arg("-f")
            .arg(archive)
            .arg("-C")
            .arg(&d)
            .output()
            .unwrap();
        let mut got = extracted(&d);
        // GNU tar leaves a directory's mtime unrestored when the archive comes back into it
        // after another directory (bsdtar's order); every time in the tree is older than the
        // test, so those are recognised and not compared.
        for (k, n) in got.iter_mut() {
            if let Some(w) = want.get(k) {
                if w.kind == tree::Kind::Dir && w.mtime.0 >= started {
                    n.mtime = w.mtime;
                }
            }
        }
        let diffs = tree::diff(&got, &want, Compare::META, 50);
        eprintln!(
            "corpus: {label}: {} entries, mfu-rs exit {:?}, {} differences",
            want.len(),
            out.status.code(),
            diffs.len()
        );
        match out.status.code() {
            Some(0) => assert!(
                diffs.is_empty(),
                "{label}: mfu-rs (exit 0) and GNU tar differ:\n  {}\n{}",
                diffs.join("\n  "),
                text(&out.stderr)
            ),
            // Refused entries are named; everything else is as GNU tar has it.
            Some(1) => {
                let err = text(&out.stderr);
                for line in &diffs {
                    // "differs: PATH: what" or "only in right:  PATH (Kind)".
                    let rest = line.split_once(':').map_or("", |(_, r)| r.trim_start());
                    let path = rest.split([':', '(']).next().unwrap_or("").trim_end();
                    assert!(
                        !path.is_empty() && err.contains(path),
                        "{label}: {line} is not named on stderr:\n{err}"
                    );
                }
            }
            other => panic!("{label}: exit {other:?}: {out:?}"),
        }
    }
}

// ---- Fuzz: damaged archives extracted by the real binary --------------------------------------

/// (start, end of data) of each entry of an undamaged archive, by mfu-rs's own decoder.
fn entry_spans(a: &[u8]) -> Vec<(u64, u64)> {
    let mut read = |at: u64, n: usize| -> std::io::Result<Vec<u8>> {
        let from = (at as usize).min(a.len());
        Ok(a[from..][..n.min(a.len() - from)].to_vec())
    };
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok(Some(d)) = mfu::unstable::tar::format::decode_entry(&mut read, at) {
        out.push((at, d.data + d.stored_len()));
        at = d.next;
    }
    out
}

/// Every entry of `dir` (recursively), as paths relative to it.
fn entries_of(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p != dir {
            out.push(p.strip_prefix(dir).unwrap().to_path_buf());
        }
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn fuzz_damaged_archives_never_crash_hang_write_outside_or_end_silently_short() {
    let seed: u64 = std::env::var("MFU_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7A2_F022);
    let iterations = 48;
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let src = fresh(w, "src");
    corpus_tree(&src);
    // A symlink to outside the target, then a file through it: refused, whatever the damage.
    std::os::unix::fs::symlink("../outside", src.join("top/escape")).unwrap();
    let archive = w.join("base.tar");
    expect_status(
        gnu_tar()
            .args(["--format=posix", "--sparse", "--sort=name", "-cf"])
            .arg(&archive)
            .arg("-C")
            .arg(&src)
            .arg("top"),
        0,
    );
    let base = std::fs::read(&archive).unwrap();
    if let Some(keep) = std::env::var_os("MFU_FUZZ_KEEP") {
        std::fs::write(keep, &base).unwrap();
    }
    let spans = entry_spans(&base);
    let entries_end = spans.last().unwrap().1;
    let outside = fresh(w, "outside");
    std::fs::write(outside.join("canary"), b"untouched\n").unwrap();
    let mut x = seed | 1;
    let mut rng = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n.max(1)
    };
    let (mut silent_ok, mut refused) = (0, 0);
    for i in 0..iterations {
        let mut a = base.clone();
        let (what, cut) = match rng(3) {
            0 => {
                // Half the cuts at an entry's start (then exit 0 is right), half anywhere.
                let t = if rng(2) == 0 {
                    spans[rng(spans.len() as u64) as usize].0
                } else {
                    rng(entries_end + 1)
                };
                a.truncate(t as usize);
                (format!("truncated at {t}"), Some(t))
            }
            1 => {
                // A bit flipped in a header block.
                let (start, _) = spans[rng(spans.len() as u64) as usize];
                let at = start as usize + rng(512) as usize;
                a[at] ^= 1 << rng(8);
                (format!("bit flipped at {at}"), None)
            }
            _ => {
                let at = rng(a.len() as u64) as usize;
                let len = (rng(2048) as usize).min(a.len() - at);
                let from = rng((a.len() - len) as u64) as usize;
                let piece = a[from..from + len].to_vec();
                a[at..at + len].copy_from_slice(&piece);
                (format!("{len} bytes from {from} spliced at {at}"), None)
            }
        };
        let ctx = format!("seed {seed}, iteration {i}: {what}");
        let damaged = w.join("damaged.tar");
        std::fs::write(&damaged, &a).unwrap();
        let target = fresh(w, "target");
        let mut child = tar_np(1)
            .arg("-x")
            .arg("-f")
            .arg(&damaged)
            .arg("-C")
            .arg(&target)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("{ctx}: mfu-rs hangs");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let out = child.wait_with_output().unwrap();
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 1)),
            "{ctx}: exit {code:?} (a crash?)\n{}",
            text(&out.stderr)
        );
        assert_eq!(
            entries_of(&outside),
            vec![PathBuf::from("canary")],
            "{ctx}: something was written outside the target"
        );
        assert_eq!(
            std::fs::read(outside.join("canary")).unwrap(),
            b"untouched\n",
            "{ctx}"
        );
        if code == Some(1) {
            refused += 1;
        }
        if let (Some(t), Some(0)) = (cut, code) {
            // Exit 0 after a cut: only at an entry's boundary, with every entry before it.
            silent_ok += 1;
            let whole = spans.iter().filter(|s| s.1 <= t).count();
            assert!(
                spans.iter().any(|s| s.0 == t) || t >= entries_end,
                "{ctx}: exit 0 for an archive cut inside an entry\n{}",
                text(&out.stdout)
            );
            assert!(
                text(&out.stdout).contains(&format!("Extracted {whole} of {whole} entries")),
                "{ctx}: {}",
                text(&out.stdout)
            );
        }
    }
    eprintln!(
        "fuzz (binary): {iterations} damaged archives, {refused} exit 1, {silent_ok} cut at an \
         entry boundary and accepted, seed {seed}"
    );
}

// ---- The chain walk: archives without an index ---------------------------------------------

/// Archives of the corpus tree without an index, from GNU tar (every --format, every sparse
/// version, GNU incremental), bsdtar (every format) and Python's tarfile, under `w`.
fn walk_corpus(w: &Path, src: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut make = |label: String, cmd: &mut Command| {
        let archive = w.join(format!("{label}.tar"));
        let o = cmd.arg("-cf").arg(&archive).arg("-C").arg(src).arg("top");
        let r = o.output().unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(archive.exists(), "{label}: {}", text(&r.stderr));
        out.push((label, archive));
    };
    for fmt in ["gnu", "oldgnu", "posix", "ustar", "v7"] {
        let mut c = gnu_tar();
        c.arg(format!("--format={fmt}"));
        if matches!(fmt, "gnu" | "oldgnu" | "posix") {
            c.arg("--sparse");
        }
        make(format!("gnu-{fmt}"), &mut c);
    }
    for v in ["0.0", "0.1", "1.0"] {
        make(
            format!("gnu-sparse-{v}"),
            gnu_tar().args([
                "--format=posix",
                "--sparse",
                &format!("--sparse-version={v}"),
            ]),
        );
    }
    make(
        "gnu-incremental".into(),
        gnu_tar()
            .arg("--listed-incremental")
            .arg(w.join("snapshot")),
    );
    for fmt in ["ustar", "pax", "restricted", "gnutar"] {
        let mut c = tool("bsdtar");
        if fmt != "restricted" {
            c.args(["--format", fmt]);
        }
        make(format!("bsdtar-{fmt}"), &mut c);
    }
    for fmt in ["GNU_FORMAT", "PAX_FORMAT", "USTAR_FORMAT"] {
        let archive = w.join(format!("python-{fmt}.tar"));
        let r = tool("python3")
            .args(["-c", PYTHON_CORPUS])
            .arg(src)
            .arg(fmt)
            .arg(&archive)
            .output()
            .unwrap();
        assert!(archive.exists(), "python {fmt}: {}", text(&r.stderr));
        out.push((format!("python-{fmt}"), archive));
    }
    out
}

/// `tar -t` lines in archive order (directories end with `/`, as both print them).
fn lines(out: &[u8]) -> Vec<Vec<u8>> {
    out.split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

#[test]
fn the_chain_walk_lists_exactly_the_entries_gnu_tar_lists_at_any_number_of_ranks() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let src = fresh(w, "src");
    corpus_tree(&src);
    for (label, archive) in walk_corpus(w, &src) {
        let want = gnu_tar().arg("-tf").arg(&archive).output().unwrap();
        assert!(want.status.success(), "{label}: {}", text(&want.stderr));
        let want = lines(&want.stdout);
        assert!(want.len() > 10, "{label}: {want:?}");
        // Every archive at 1 and 2 ranks; the distribution of the walk at 4 and 16 on some.
        let nps: &[usize] = match label.as_str() {
            "gnu-posix" => &[1, 2, 4, 16],
            "bsdtar-pax" | "python-GNU_FORMAT" => &[1, 2, 4],
            _ => &[1, 2],
        };
        for &np in nps {
            let out = tar_np(np)
                .arg("-t")
                .arg("-f")
                .arg(&archive)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{label} np {np}: {out:?}");
            let got = lines(&out.stdout);
            // GNU tar prints a GNU incremental dumpdir as a directory, mfu-rs too.
            assert_eq!(
                got.iter().map(|l| text(l)).collect::<Vec<_>>(),
                want.iter().map(|l| text(l)).collect::<Vec<_>>(),
                "{label} np {np}: the entries listed differ from GNU tar's"
            );
            let err = text(&out.stderr);
            assert_eq!(
                err.matches("has no index").count(),
                1,
                "{label} np {np}: said once: {err}"
            );
        }
    }
}

/// An archive of `n` small files `top/fNN` (GNU tar, `format`), their names and contents.
fn small_archive(w: &Path, format: &str, n: usize) -> (PathBuf, Vec<(String, Vec<u8>)>) {
    let src = fresh(w, "small-src");
    std::fs::create_dir(src.join("top")).unwrap();
    let mut files = Vec::new();
    for i in 0..n {
        let name = format!("top/f{i:02}");
        let data = noise(i as u64 + 7, 700 + i * 300);
        std::fs::write(src.join(&name), &data).unwrap();
        files.push((name, data));
    }
    let archive = w.join(format!("small-{format}.tar"));
    expect_status(
        gnu_tar()
            .arg(format!("--format={format}"))
            .args(["--sort=name", "-cf"])
            .arg(&archive)
            .arg("-C")
            .arg(&src)
            .arg("top"),
        0,
    );
    (archive, files)
}

#[test]
fn damaged_archives_stop_the_walk_at_the_damage_named_with_its_offset_and_what_precedes_is_extracted(
) {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    for format in ["gnu", "posix", "ustar"] {
        let (archive, files) = small_archive(w, format, 6);
        let base = std::fs::read(&archive).unwrap();
        let spans = entry_spans(&base);
        // Entries: top/, then f00..f05.
        assert_eq!(spans.len(), 7, "{format}");
        let header_of = |k: usize| spans[k].0 as usize;
        // (label, damaged bytes, entries before the damage, entries seen in all, where)
        let mut cases: Vec<(&str, Vec<u8>, usize, usize, u64)> = Vec::new();
        // Cut in the middle of f01's data: 2 entries whole, f01 seen but cut.
        let mid = (spans[2].1 - 100) as usize;
        cases.push(("cut mid-data", base[..mid].to_vec(), 2, 3, spans[2].0));
        // Cut inside f03's header (its pax or ustar block).
        let cut = header_of(4) + 300;
        cases.push(("cut mid-header", base[..cut].to_vec(), 4, 4, spans[4].0));
        // A flipped byte in the checksum field of f02's last header block.
        let mut flipped = base.clone();
        // f02's ustar block: just before its data (1300 bytes), after any pax header.
        let h = (spans[3].1 - 1300 - 512) as usize;
        flipped[h + 148] ^= 0x01;
        cases.push(("flipped checksum", flipped, 3, 3, h as u64));
        // Garbage after the first 5 entries (instead of f04 and the rest).
        let mut garbage = base[..header_of(5)].to_vec();
        garbage.extend(noise(99, 4096));
        cases.push(("garbage", garbage, 5, 5, spans[5].0));
        for (label, bytes, whole, seen, at) in cases {
            let damaged = w.join("damaged.tar");
            std::fs::write(&damaged, &bytes).unwrap();
            for np in [1, 2] {
                let ctx = format!("{format} {label} np {np}");
                let (d, out) = mfu_extract(np, &damaged, w, "damaged-out", 1);
                let err = text(&out.stderr);
                assert!(
                    err.contains(&damaged.display().to_string())
                        && err.contains(&format!("byte {at}")),
                    "{ctx}: the damage is named with the archive and offset {at}:\n{err}"
                );
                assert_eq!(err.matches("has no index").count(), 1, "{ctx}: {err}");
                let summary = text(&out.stdout);
                assert!(
                    summary.contains(&format!("Extracted {whole} of {seen} entries")),
                    "{ctx}: {summary}\n{err}"
                );
                // What precedes the damage is extracted, byte for byte; nothing after it.
                for (k, (name, data)) in files.iter().enumerate() {
                    let p = d.join(name);
                    if k + 1 < whole {
                        assert_eq!(&std::fs::read(&p).unwrap(), data, "{ctx}: {name}");
                    } else {
                        assert!(!p.exists(), "{ctx}: {name} is past the damage");
                    }
                }
                let listed = tar_np(np)
                    .arg("-t")
                    .arg("-f")
                    .arg(&damaged)
                    .output()
                    .unwrap();
                assert_eq!(listed.status.code(), Some(1), "{ctx}: -t exit 1");
                assert_eq!(
                    lines(&listed.stdout).len(),
                    whole,
                    "{ctx}: -t lists {whole}"
                );
            }
        }
    }
}

/// The directory entry of a tree `depth` levels deep, in tar order, as an archive: `d` at every
/// level holding a file `f` with the level's number.
fn deep_archive(depth: usize) -> Vec<u8> {
    use mfu::unstable::tar::format::{Header, Kind};
    let mut bytes = Vec::new();
    let mut path = Vec::new();
    for level in 0..depth {
        if level > 0 {
            path.push(b'/');
        }
        path.push(b'd');
        let mut h = Header {
            path: path.clone(),
            kind: Kind::Dir,
            mode: 0o750,
            uid: 0,
            gid: 0,
            uname: Vec::new(),
            gname: Vec::new(),
            size: 0,
            mtime: 1_600_000_000 + level as i64,
            mtime_nsec: 0,
            link: Vec::new(),
            dev_major: 0,
            dev_minor: 0,
            xattrs: Vec::new(),
            projid: Default::default(),
        };
        h.encode(&mut bytes);
        let data = level.to_string().into_bytes();
        h.path = [&path[..], b"/f"].concat();
        h.kind = Kind::File;
        h.mode = 0o640;
        h.size = data.len() as u64;
        h.encode(&mut bytes);
        bytes.extend_from_slice(&data);
        bytes.resize(bytes.len().next_multiple_of(512), 0);
    }
    bytes.resize(bytes.len() + 1024, 0);
    bytes
}

#[test]
fn a_tree_3000_levels_deep_extracts_whole_at_1_and_2_ranks() {
    use rustix::fs::{Mode, OFlags};
    let depth = 3000;
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let archive = w.join("deep.tar");
    std::fs::write(&archive, deep_archive(depth)).unwrap();
    for np in [1, 2] {
        let (d, out) = mfu_extract(np, &archive, w, "deep-out", 0);
        assert!(
            text(&out.stdout).contains(&format!(
                "Extracted {} of {} entries",
                2 * depth,
                2 * depth
            )),
            "np {np}: {}",
            text(&out.stdout)
        );
        // Walk down level by level (the paths are longer than PATH_MAX).
        let mut dir =
            rustix::fs::open(&d, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        for level in 0..depth {
            let next = rustix::fs::openat(
                &dir,
                "d",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
                Mode::empty(),
            )
            .unwrap_or_else(|e| panic!("np {np}: level {level}: {e}"));
            let st = rustix::fs::fstat(&next).unwrap();
            assert_eq!(st.st_mode & 0o7777, 0o750, "np {np}: level {level}");
            assert_eq!(
                st.st_mtime,
                1_600_000_000 + level as i64,
                "np {np}: level {level}"
            );
            let f =
                rustix::fs::openat(&next, "f", OFlags::RDONLY | OFlags::NOFOLLOW, Mode::empty())
                    .unwrap_or_else(|e| panic!("np {np}: level {level} file: {e}"));
            let mut buf = [0u8; 16];
            let n = rustix::io::read(&f, &mut buf).unwrap();
            assert_eq!(
                &buf[..n],
                level.to_string().as_bytes(),
                "np {np}: level {level}"
            );
            dir = next;
        }
        let _ = std::process::Command::new("rm").arg("-rf").arg(&d).status();
    }
}

/// Issue 17, item 6: an index (the DTAR_IDX member of a plain or a zstd archive, or a side
/// file) is read by each rank in an even stretch and its offsets go to the ranks whose parts
/// hold them; the extraction is the same whatever the number of ranks, threads (`--ranks`) or
/// processes (`mpirun`), including big files whose data spans parts without a header.
#[test]
fn an_index_shared_out_over_ranks_extracts_the_same_at_1_2_4_and_16_ranks() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let src = fresh(w, "src");
    corpus_tree(&src);
    for i in 0..6u64 {
        let data = noise(40 + i, 150_000 + i as usize * 7000);
        std::fs::write(src.join(format!("top/big{i}")), data).unwrap();
    }
    for i in 0..40u64 {
        let data = noise(90 + i, 100 + i as usize * 37);
        std::fs::write(src.join(format!("top/d/s{i:02}")), data).unwrap();
    }
    let plain = w.join("A.tar");
    let zst = w.join("A.tar.zst");
    let gnu = w.join("gnu.tar");
    expect_status(
        tar_np(1)
            .args(["-c", "-f"])
            .arg(&plain)
            .arg("-C")
            .arg(&src)
            .arg("top"),
        0,
    );
    expect_status(
        tar_np(1)
            .args(["-c", "--zstd", "-f"])
            .arg(&zst)
            .arg("-C")
            .arg(&src)
            .arg("top"),
        0,
    );
    expect_status(
        gnu_tar()
            .args(["--format=posix", "-cf"])
            .arg(&gnu)
            .arg("-C")
            .arg(&src)
            .arg("top"),
        0,
    );
    // The side file of the GNU archive, saved by a scan.
    expect_status(tar_np(1).args(["-t", "--save-index", "-f"]).arg(&gnu), 0);
    assert!(w.join("gnu.tar.dtaridx").exists());
    for (label, archive) in [
        ("member", &plain),
        ("zstd member", &zst),
        ("side file", &gnu),
    ] {
        let want = extracted(&gnu_extract(&gnu, w, &format!("{label}-gnu")).0);
        let runs: Vec<(String, Command)> = [1, 2, 4, 16]
            .into_iter()
            .map(|n| (format!("--ranks {n}"), Tool::new("tar").ranks(n).command()))
            .chain([2, 4].map(|n| (format!("mpirun -np {n}"), tar_np(n))))
            .collect();
        for (how, mut cmd) in runs {
            let d = fresh(w, &format!("{label}-{how}"));
            let out = expect_status(cmd.arg("-x").arg("-f").arg(archive).arg("-C").arg(&d), 0);
            let err = text(&out.stderr);
            assert!(
                !err.contains("scan") && !err.contains("not using"),
                "{label}, {how}: the index is used: {err}"
            );
            tree::assert_equal_in(
                &format!("{label}, {how}"),
                &extracted(&d),
                &want,
                Compare::META,
            );
        }
    }
}

/// Of several entries with one name (`tar -r` of a changed file), the last is extracted, as
/// GNU tar does, at any number of ranks: the names meet by their hashes and are compared
/// where hashes meet (issue 17: 16 bytes per entry exchanged, not names). The replaced ones
/// are counted apart, not as extracted (issue 31).
#[test]
fn the_last_of_several_entries_with_one_name_wins_at_any_number_of_ranks() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    small_files(w, 30);
    let src = w.join("src");
    // `src` itself is not archived (made by the extraction, its times are now): only its
    // files are compared.
    let files_of = |dir: &Path| {
        let mut t = extracted(dir);
        t.remove(&b"src"[..]);
        t
    };
    let archive = w.join("dup.tar");
    let names: Vec<String> = (1..=30).map(|i| format!("src/f{i}")).collect();
    expect_status(
        gnu_tar()
            .arg("-cf")
            .arg(&archive)
            .arg("-C")
            .arg(w)
            .args(&names),
        0,
    );
    // f3 twice more, changed each time (bigger, so its data spans blocks), f17 once more.
    for (round, f) in [(1u64, "f3"), (2, "f17"), (3, "f3")] {
        std::fs::write(src.join(f), noise(round, 20_000 * round as usize)).unwrap();
        expect_status(
            gnu_tar()
                .arg("-rf")
                .arg(&archive)
                .arg("-C")
                .arg(w)
                .arg(format!("src/{f}")),
            0,
        );
    }
    let want = files_of(&gnu_extract(&archive, w, "gnu").0);
    let runs: Vec<(String, Command)> = [1, 4, 16]
        .into_iter()
        .map(|n| (format!("--ranks {n}"), Tool::new("tar").ranks(n).command()))
        .chain([2, 4].map(|n| (format!("mpirun -np {n}"), tar_np(n))))
        .collect();
    for (how, mut cmd) in runs {
        let d = fresh(w, &how);
        let out = expect_status(cmd.arg("-x").arg("-f").arg(&archive).arg("-C").arg(&d), 0);
        tree::assert_equal_in(&how, &files_of(&d), &want, Compare::META);
        // Replaced entries are not counted as extracted: they are said apart.
        let summary = text(&out.stdout);
        assert!(
            summary.contains("Extracted 30 of 33 entries, ")
                && summary.contains("; 3 replaced by a later entry of the same name"),
            "{how}: {summary}"
        );
    }
}

/// A hard link gets the version of its target that precedes it in the archive, as GNU tar and
/// bsdtar extract in order: `a/f`, then `l` and `m` linked to it, then a newer `a/f` (a file
/// or a symlink, appended by `tar -r`) leave `l` and `m` one inode with the first version's
/// bytes and metadata, and `a/f` the newer one. At any number of ranks (the first version's
/// data spanning several ranks' parts), and through `--strip-components`. Every entry is
/// counted as extracted: none is dropped.
#[test]
fn a_hard_link_keeps_the_version_of_its_target_that_a_later_entry_of_that_name_replaces() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let first = noise(41, 600_000);
    for newer in ["file", "symlink"] {
        for strip in [false, true] {
            let label = format!("newer {newer}, strip {strip}");
            let src = fresh(w, "src");
            std::fs::create_dir_all(src.join("top/a")).unwrap();
            std::fs::write(src.join("top/a/f"), &first).unwrap();
            std::fs::hard_link(src.join("top/a/f"), src.join("top/l")).unwrap();
            std::fs::hard_link(src.join("top/a/f"), src.join("top/m")).unwrap();
            std::fs::write(src.join("top/pad"), noise(42, 70_000)).unwrap();
            let archive = w.join("relinked.tar");
            let _ = std::fs::remove_file(&archive);
            // `pad` between the two links: they are not neighbours in the archive.
            expect_status(
                gnu_tar()
                    .arg("-cf")
                    .arg(&archive)
                    .arg("-C")
                    .arg(&src)
                    .args(["top/a/f", "top/l", "top/pad", "top/m"]),
                0,
            );
            std::fs::remove_file(src.join("top/a/f")).unwrap();
            if newer == "file" {
                std::fs::write(src.join("top/a/f"), noise(43, 300_000)).unwrap();
            } else {
                std::os::unix::fs::symlink("elsewhere", src.join("top/a/f")).unwrap();
            }
            expect_status(
                gnu_tar()
                    .arg("-rf")
                    .arg(&archive)
                    .arg("-C")
                    .arg(&src)
                    .arg("top/a/f"),
                0,
            );
            let strip_args: &[&str] = if strip {
                &["--strip-components=1"]
            } else {
                &[]
            };
            let prefix = if strip { "" } else { "top/" };
            // Directories are not in the archive (their times are the extraction's).
            let leaves = |dir: &Path| {
                let mut t = extracted(dir);
                t.retain(|_, n| n.kind != tree::Kind::Dir);
                t
            };
            let g = fresh(w, "gnu");
            expect_status(
                gnu_tar()
                    .arg("-xf")
                    .arg(&archive)
                    .args(strip_args)
                    .arg("-C")
                    .arg(&g),
                0,
            );
            let want = leaves(&g);
            // The reference itself: GNU tar gives the links the first version.
            let l = format!("{prefix}l");
            assert_eq!(
                std::fs::read(g.join(&l)).unwrap(),
                first,
                "{label}: GNU tar"
            );
            let runs: Vec<(String, Command)> = [1, 2, 4, 16]
                .into_iter()
                .map(|n| (format!("--ranks {n}"), Tool::new("tar").ranks(n).command()))
                .chain([2].map(|n| (format!("mpirun -np {n}"), tar_np(n))))
                .collect();
            for (how, mut cmd) in runs {
                let ctx = format!("{label}, {how}");
                let d = fresh(w, "mfu");
                let out = expect_status(
                    cmd.arg("-x")
                        .arg("-f")
                        .arg(&archive)
                        .args(strip_args)
                        .arg("-C")
                        .arg(&d),
                    0,
                );
                let got = leaves(&d);
                assert_eq!(std::fs::read(d.join(&l)).unwrap(), first, "{ctx}: l");
                let (lm, mm) = (
                    std::fs::metadata(d.join(&l)).unwrap(),
                    std::fs::metadata(d.join(format!("{prefix}m"))).unwrap(),
                );
                assert_eq!((lm.ino(), lm.nlink()), (mm.ino(), 2), "{ctx}: l and m");
                tree::assert_equal_in(&ctx, &got, &want, Compare::META);
                assert!(
                    text(&out.stdout).contains("Extracted 5 of 5 entries, "),
                    "{ctx}: {}",
                    text(&out.stdout)
                );
            }
        }
    }
}

/// `--json`: the notices of a run that succeeds (the archive had no index and was scanned, an
/// index set aside, the index saved) are under `notices`, never under `failures`, on extract
/// and list; stderr still says them.
#[test]
fn json_reports_of_a_scan_list_its_notices_apart_from_failures() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    small_files(w, 3);
    let archive = w.join("n.tar");
    expect_status(
        gnu_tar()
            .arg("-cf")
            .arg(&archive)
            .arg("-C")
            .arg(w)
            .args(["src/f1", "src/f2"]),
        0,
    );
    let json = |args: &[&str], say: &str| {
        let out = expect_status(
            tar_np(1)
                .arg("--json")
                .args(args)
                .arg("-f")
                .arg(&archive)
                .arg("-C")
                .arg(fresh(w, "json-out")),
            0,
        );
        let ctx = format!("{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{ctx}: {e}: {}", text(&out.stdout)));
        assert_eq!(v["status"], 0, "{ctx}: {v}");
        assert_eq!(v["failures"], serde_json::json!([]), "{ctx}: {v}");
        let notices = v["notices"].as_array().expect("notices");
        assert!(
            notices.iter().any(|n| n.as_str().unwrap().contains(say)),
            "{ctx}: notices lack {say:?}: {v}"
        );
        assert!(
            text(&out.stderr).contains(say),
            "{ctx}: stderr lacks {say:?}"
        );
    };
    json(&["-x"], "has no index; scanned it");
    json(&["-t"], "has no index; scanned it");
    json(&["-x", "--save-index"], "saved the index of 2 entries");
    // The saved index, now stale: set aside, and said.
    expect_status(
        gnu_tar()
            .arg("-rf")
            .arg(&archive)
            .arg("-C")
            .arg(w)
            .arg("src/f3"),
        0,
    );
    json(&["-x"], "not using the index");
}

/// A hard link to a replaced version that is itself a hard link (`x`, `a/f` linked to `x`, `l`
/// linked to `a/f`, then a newer `a/f`: only a hand-made archive has it) is not made as a link
/// to the newer `a/f`: it is refused and named, exit 1, at any number of ranks; the rest is
/// extracted.
#[test]
fn a_hard_link_to_a_replaced_hard_link_is_refused_and_named_never_linked_to_the_newer_one() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let archive = w.join("chain.tar");
    let none = |_: &mut [u8]| {};
    std::fs::write(
        &archive,
        archive_of(&[
            member(b"x", b'0', b"first\n", b"", none),
            member(b"a/f", b'1', b"", b"x", none),
            member(b"l", b'1', b"", b"a/f", none),
            member(b"a/f", b'0', b"newer\n", b"", none),
        ]),
    )
    .unwrap();
    for np in [1, 2] {
        let (d, out) = mfu_extract(np, &archive, w, "chain", 1);
        let err = text(&out.stderr);
        assert!(
            err.lines()
                .any(|l| l.starts_with("mfu-rs tar: l: hard link to a/f: not linked")),
            "np {np}: {err}"
        );
        assert!(
            !d.join("l").exists(),
            "np {np}: l must not be the newer a/f"
        );
        assert_eq!(std::fs::read(d.join("x")).unwrap(), b"first\n", "np {np}");
        assert_eq!(std::fs::read(d.join("a/f")).unwrap(), b"newer\n", "np {np}");
    }
}
