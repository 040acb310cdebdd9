//! `mfu-rs bz2` end to end: round trips at 1, 2 and 4 ranks, interchange with plain
//! `bzip2`/`bunzip2`, bzip2's naming and safety rules (-k, -f, refusal to overwrite), and damaged
//! input that must never leave an output under the final name.
//!
//! dbz2 cuts streams of ~10 MB (`-b 1`: 10.4 MB), which the debug build compresses at about
//! 1 MB/s; the tests pass the hidden `--stream-bytes` to get several streams from a few hundred
//! kB, and `-b 1` for bzip2's smallest internal block.

use mfu_tests::{expect_status, Tool};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

/// Bytes per stream in these tests: 4 full streams and a short one for the 230 001-byte file.
const STREAM: &str = "50000";

/// Half incompressible, half text, so that streams differ in compressed size.
fn data(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|i| {
            if (i / 7000) % 2 == 0 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            } else {
                b"line of text 0123456789\n"[i % 24]
            }
        })
        .collect()
}

/// `mfu-rs bz2 ARGS` with `np` ranks: 1 = one process, else under mpirun.
fn bz2(np: usize, args: &[&str]) -> Command {
    Tool::new("bz2").np(np).args(args).command()
}

fn run(np: usize, args: &[&str], code: i32) -> Output {
    Tool::new("bz2")
        .np(np)
        .args(args)
        .run()
        .assert_status(code)
        .into()
}

/// A temporary directory holding `f`, `len` bytes of [`data`]: (the directory, `f`, its bytes).
fn input_file(len: usize) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    let content = data(len);
    fs::write(&file, &content).unwrap();
    (dir, file, content)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn with_ext(p: &Path, ext: &str) -> PathBuf {
    PathBuf::from(format!("{}{ext}", p.display()))
}

/// Names in `dir`, sorted (to see that no temporary file stays behind).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn bunzip2_stdout(p: &Path) -> Vec<u8> {
    let out = Command::new("bunzip2").arg("-c").arg(p).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "bunzip2 -c {}: {}",
        p.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn round_trip(np: usize) {
    let dir = tempfile::tempdir().unwrap();
    // Empty, a few bytes, one stream exactly, several streams with a short last one.
    for (name, len) in [("empty", 0), ("few", 5), ("one", 50_000), ("many", 230_001)] {
        let file = dir.path().join(name);
        let content = data(len);
        fs::write(&file, &content).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
        let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
        fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        run(
            np,
            &["-z", "-b", "1", "--stream-bytes", STREAM, s(&file)],
            0,
        );
        let packed = with_ext(&file, ".bz2");
        assert!(!file.exists(), "{name}: input removed without -k");
        let meta = fs::metadata(&packed).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o640, "{name}: mode kept");
        assert_eq!(meta.mtime(), 1_500_000_000, "{name}: mtime kept");
        assert_eq!(bunzip2_stdout(&packed), content, "{name}: bunzip2 reads it");
        run(np, &["-d", s(&packed)], 0);
        assert!(!packed.exists(), "{name}: .bz2 removed without -k");
        assert_eq!(fs::read(&file).unwrap(), content, "{name}: round trip");
        assert_eq!(fs::metadata(&file).unwrap().mtime(), 1_500_000_000);
    }
    assert_eq!(names(dir.path()), ["empty", "few", "many", "one"]);
}

#[test]
fn round_trip_one_process() {
    round_trip(1);
}

#[test]
fn round_trip_np2() {
    round_trip(2);
}

#[test]
fn round_trip_np4() {
    round_trip(4);
}

#[test]
fn layout_is_dbz2s() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, data(230_001)).unwrap();
    run(2, &["-z", "-k", "--stream-bytes", STREAM, s(&file)], 0);
    let z = fs::read(with_ext(&file, ".bz2")).unwrap();
    let word = |at: usize| u64::from_be_bytes(z[at..at + 8].try_into().unwrap());
    let footer = z.len() - 48;
    let (table, nblocks) = (word(footer) as usize, word(footer + 8) as usize);
    assert_eq!(nblocks, 5);
    assert_eq!(word(footer + 16), 50_000, "block size");
    assert_eq!(word(footer + 24), 230_001, "original size");
    assert_eq!(word(footer + 32), 1, "version");
    assert_eq!(word(footer + 40), 0x3141_3141_3141_3141, "magic");
    assert_eq!(table + nblocks * 16, footer);
    let mut next = 0;
    for i in 0..nblocks {
        let (off, len) = (
            word(table + 16 * i) as usize,
            word(table + 16 * i + 8) as usize,
        );
        assert_eq!(off, next, "streams back to back");
        assert_eq!(&z[off..off + 4], b"BZh9", "block {i} is a bzip2 stream");
        next = off + len;
    }
    assert_eq!(next, table);
}

#[test]
fn default_block_rule_single_stream() {
    // Below dbz2's 9 900 000-byte block: one stream, block size recorded as dbz2 computes it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, data(20_000)).unwrap();
    run(1, &["-k", s(&file)], 0);
    let z = fs::read(with_ext(&file, ".bz2")).unwrap();
    let f = z.len() - 48;
    assert_eq!(&z[f + 16..f + 24], &9_900_000u64.to_be_bytes());
    assert_eq!(bunzip2_stdout(&with_ext(&file, ".bz2")), data(20_000));
}

#[test]
fn decompresses_dbz2s_empty_file() {
    // dbz2 writes no stream at all for an empty file: only the footer.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e.dbz2");
    let mut footer = Vec::new();
    for w in [0u64, 0, 9_900_000, 0, 1, 0x3141_3141_3141_3141] {
        footer.extend(w.to_be_bytes());
    }
    fs::write(&file, footer).unwrap();
    run(2, &["-d", s(&file)], 0);
    assert_eq!(fs::read(dir.path().join("e")).unwrap(), b"");
}

#[test]
fn decompresses_plain_bzip2_and_concatenated_streams() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    fs::write(&a, data(120_000)).unwrap();
    fs::write(&b, b"second member\n").unwrap();
    expect_status(Command::new("bzip2").args(["-k", "-1"]).arg(&a).arg(&b), 0);
    for np in [1, 2] {
        let single = dir.path().join(format!("single{np}.bz2"));
        fs::copy(with_ext(&a, ".bz2"), &single).unwrap();
        run(np, &["-d", s(&single)], 0);
        assert_eq!(
            fs::read(dir.path().join(format!("single{np}"))).unwrap(),
            data(120_000)
        );

        let cat = dir.path().join(format!("cat{np}.bz2"));
        let mut bytes = fs::read(with_ext(&a, ".bz2")).unwrap();
        bytes.extend(fs::read(with_ext(&b, ".bz2")).unwrap());
        bytes.extend(fs::read(with_ext(&a, ".bz2")).unwrap());
        fs::write(&cat, bytes).unwrap();
        run(np, &["-d", "-k", s(&cat)], 0);
        let mut want = data(120_000);
        want.extend(b"second member\n");
        want.extend(data(120_000));
        assert_eq!(fs::read(dir.path().join(format!("cat{np}"))).unwrap(), want);
        assert!(cat.exists(), "-k keeps the input");
    }
}

#[test]
fn keep_force_and_refusal_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    let packed = with_ext(&file, ".bz2");
    fs::write(&file, data(1000)).unwrap();
    fs::write(&packed, b"precious").unwrap();
    let out = run(2, &["-z", s(&file)], 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exists") && err.contains("f.bz2"), "{err}");
    assert_eq!(fs::read(&packed).unwrap(), b"precious", "nothing written");
    assert!(file.exists(), "input untouched");
    assert_eq!(names(dir.path()), ["f", "f.bz2"]);

    run(2, &["-z", "-f", "-k", s(&file)], 0);
    assert!(file.exists(), "-k keeps the input");
    assert_eq!(bunzip2_stdout(&packed), data(1000));

    // Decompressing onto the kept input is refused too, then forced.
    run(1, &["-d", s(&packed)], 2);
    assert!(packed.exists());
    fs::write(&file, b"other").unwrap();
    run(1, &["-d", "-f", s(&packed)], 0);
    assert_eq!(fs::read(&file).unwrap(), data(1000));
    assert!(!packed.exists());
    assert_eq!(names(dir.path()), ["f"]);
}

#[test]
fn usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    run(1, &["-z", s(&missing)], 2);
    let text = dir.path().join("t.bz2");
    fs::write(&text, b"plain text, not bzip2").unwrap();
    let out = run(2, &["-d", s(&text)], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a bzip2 file"));
    run(1, &["-z", s(&text)], 2); // already has .bz2
    run(1, &["-b", "0", s(&text)], 2);
    // Streams above the largest block this tool decompresses (1 GiB) are refused.
    let out = run(1, &["-z", "--stream-bytes", "2GiB", s(&text)], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 1073741824 bytes"));
    assert_eq!(names(dir.path()), ["t.bz2"]);
}

/// Flip one byte in the middle of stream `block` of a dbz2 file.
fn damage_block(path: &Path, block: usize) {
    let mut z = fs::read(path).unwrap();
    let word = |z: &[u8], at: usize| u64::from_be_bytes(z[at..at + 8].try_into().unwrap()) as usize;
    let table = word(&z, z.len() - 48);
    let (off, len) = (
        word(&z, table + 16 * block),
        word(&z, table + 16 * block + 8),
    );
    z[off + len / 2] ^= 0xff;
    fs::write(path, z).unwrap();
}

#[test]
fn damaged_input_fails_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, data(230_001)).unwrap();
    run(1, &["-z", "--stream-bytes", STREAM, s(&file)], 0);
    let packed = with_ext(&file, ".bz2");
    damage_block(&packed, 2);
    for np in [1, 2, 4] {
        let out = run(np, &["-d", s(&packed)], 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("f.bz2") && err.contains("block 2"), "{err}");
        assert_eq!(names(dir.path()), ["f.bz2"], "no output, no temporary file");
    }

    // A damaged plain bzip2 file (no table) fails the same way.
    let plain = dir.path().join("p");
    fs::write(&plain, data(100_000)).unwrap();
    expect_status(Command::new("bzip2").arg(&plain), 0);
    let plain_z = with_ext(&plain, ".bz2");
    let mut z = fs::read(&plain_z).unwrap();
    let mid = z.len() / 2;
    z[mid] ^= 0xff;
    fs::write(&plain_z, z).unwrap();
    let out = run(2, &["-d", s(&plain_z)], 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("p.bz2"));
    assert_eq!(names(dir.path()), ["f.bz2", "p.bz2"]);

    // A table that points outside the streams is caught before any block is decoded, and not
    // used: the streams are decoded one after another, as bunzip2 does.
    fs::write(&file, data(230_001)).unwrap();
    run(1, &["-z", "-f", "--stream-bytes", STREAM, s(&file)], 0);
    let mut z = fs::read(&packed).unwrap();
    let table = u64::from_be_bytes(z[z.len() - 48..z.len() - 40].try_into().unwrap()) as usize;
    z[table + 16 * 3] = 0x01; // block 3's offset far beyond the table
    fs::write(&packed, z).unwrap();
    let out = run(2, &["-d", "-k", s(&packed)], 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("block 3") && err.contains("table"), "{err}");
    assert_eq!(fs::read(&file).unwrap(), data(230_001));
    assert_eq!(names(dir.path()), ["f", "f.bz2", "p.bz2"]);
}

/// Where the block table of the dbz2 file `z` starts.
fn table_of(z: &[u8]) -> usize {
    u64::from_be_bytes(z[z.len() - 48..z.len() - 40].try_into().unwrap()) as usize
}

/// Defect: `bz2 -d` trusted the block table. With two entries swapped (the streams of two
/// full blocks exchanged in the table), it wrote each block where the other belongs, exit 0,
/// and removed the input. bunzip2 decodes the same file right; so must we (the table is
/// checked, and not used when it does not match the streams), at 1 and 2 ranks.
#[test]
fn a_table_with_entries_swapped_or_duplicated_is_not_trusted() {
    let (dir, file, content) = input_file(230_001);
    run(1, &["-z", "-k", "--stream-bytes", STREAM, s(&file)], 0);
    let packed = with_ext(&file, ".bz2");
    let good = fs::read(&packed).unwrap();
    let table = table_of(&good);
    let swap = |z: &mut Vec<u8>, a: usize, b: usize| {
        for k in 0..16 {
            z.swap(table + 16 * a + k, table + 16 * b + k);
        }
    };
    let mut swapped = good.clone();
    swap(&mut swapped, 0, 1);
    let mut duplicated = good.clone();
    duplicated.copy_within(table + 16..table + 32, table + 32); // entry 2 := entry 1
    for (what, z) in [("swapped", &swapped), ("duplicated", &duplicated)] {
        for np in [1, 2] {
            fs::remove_file(&file).unwrap_or(());
            fs::write(&packed, z).unwrap();
            let out = bz2(np, &["-d", s(&packed)]).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            match out.status.code() {
                // Decoded in file order, as bunzip2 does: the original bytes.
                Some(0) => {
                    assert!(
                        fs::read(&file).unwrap() == content,
                        "{what} np={np}: wrong output with exit 0: {err}"
                    );
                    assert!(
                        err.contains("table"),
                        "{what} np={np}: the table is named: {err}"
                    );
                }
                // Or refused: the input stays, no output.
                Some(1) => {
                    assert_eq!(fs::read(&packed).unwrap(), *z, "{what} np={np}: input kept");
                    assert!(!file.exists(), "{what} np={np}: no output");
                }
                c => panic!("{what} np={np}: exit {c:?}: {err}"),
            }
        }
    }
    assert_eq!(
        bunzip2_stdout_of(&swapped, dir.path()),
        content,
        "bunzip2 agrees"
    );
}

/// bunzip2's output for the bytes `z` (written beside the test's files).
fn bunzip2_stdout_of(z: &[u8], dir: &Path) -> Vec<u8> {
    let p = dir.join("reference.bz2");
    fs::write(&p, z).unwrap();
    let out = bunzip2_stdout(&p);
    fs::remove_file(&p).unwrap();
    out
}

/// Temporaries of `name` in `dir` (`.NAME.HOST.PID.mfu-tmp`).
fn temporaries(dir: &Path, name: &str) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with(&format!(".{name}.")) && n.ends_with(".mfu-tmp"))
        .collect()
}

/// True once a temporary of `name` in `dir` holds data.
fn temporary_has_data(dir: &Path, name: &str) -> bool {
    temporaries(dir, name)
        .iter()
        .any(|t| fs::metadata(dir.join(t)).is_ok_and(|m| m.len() > 0))
}

/// Defect: bz2 died on SIGINT/SIGTERM with no word and left its full-size temporary behind.
/// Now: it stops, removes its temporary, says it was interrupted, exits 1; the input stays.
/// Compression (SIGINT) and decompression (SIGTERM, serial and by the table), without a
/// checkpoint (with one, the partial output is kept for the next run: see below).
#[test]
fn a_signal_stops_cleanly_without_a_temporary() {
    use rustix::process::Signal;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    // Incompressible: the debug build compresses ~0.5 MB/s here, so this runs for seconds.
    let content = mfu_tests::noise(7, 3_000_000);
    fs::write(&file, &content).unwrap();
    let mut cmd = bz2(
        1,
        &[
            "-z",
            "--no-checkpoint",
            "--stream-bytes",
            "100000",
            s(&file),
        ],
    );
    let out = mfu_tests::signal_when(&mut cmd, Signal::INT, || {
        temporary_has_data(dir.path(), "f.bz2")
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "SIGINT while compressing: {err}"
    );
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(
        names(dir.path()),
        ["f"],
        "input kept, no output, no temporary"
    );
    assert_eq!(fs::read(&file).unwrap(), content);

    // Decompression, serial (a plain bzip2 file) and parallel (dbz2 by its table).
    expect_status(Command::new("bzip2").args(["-1", "-k"]).arg(&file), 0);
    let plain = dir.path().join("plain.bz2");
    fs::rename(with_ext(&file, ".bz2"), &plain).unwrap();
    let dbz2 = dir.path().join("blocks.bz2");
    fs::write(&dbz2, dbz2_of(&content, 100_000)).unwrap();
    for (packed, base) in [(&plain, "plain"), (&dbz2, "blocks")] {
        let before = fs::read(packed).unwrap();
        let mut cmd = bz2(1, &["-d", "--no-checkpoint", s(packed)]);
        let out = mfu_tests::signal_when(&mut cmd, Signal::TERM, || {
            temporary_has_data(dir.path(), base)
        });
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "SIGTERM while decompressing {base}: {err}"
        );
        assert!(err.contains("interrupted"), "{err}");
        assert_eq!(temporaries(dir.path(), base), Vec::<String>::new());
        assert!(!dir.path().join(base).exists(), "no output");
        assert_eq!(fs::read(packed).unwrap(), before, "input kept");
    }
}

/// A dbz2 file of `content` in blocks of `block` bytes, each compressed by `bzip2 -1` (fast,
/// whatever this build's speed).
fn dbz2_of(content: &[u8], block: usize) -> Vec<u8> {
    use std::io::Write;
    let mut z = Vec::new();
    let mut table = Vec::new();
    for chunk in content.chunks(block) {
        let mut child = Command::new("bzip2")
            .args(["-1", "-c"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let chunk = chunk.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&chunk).unwrap());
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        table.extend((z.len() as u64).to_be_bytes());
        table.extend((out.stdout.len() as u64).to_be_bytes());
        z.extend(out.stdout);
    }
    let nblocks = (table.len() / 16) as u64;
    let table_offset = z.len() as u64;
    z.extend(table);
    for w in [
        table_offset,
        nblocks,
        block as u64,
        content.len() as u64,
        1,
        0x3141_3141_3141_3141,
    ] {
        z.extend(w.to_be_bytes());
    }
    z
}

/// A temporary left by an earlier run that was killed (SIGKILL: no chance to clean up) is
/// removed by the next run for the same output, and named; others' (another output's, a run
/// still going) are not touched.
#[test]
fn the_next_run_removes_a_stale_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, data(1000)).unwrap();
    let stale_name = mfu_tests::dead_process_temporary("f.bz2");
    let stale = dir.path().join(&stale_name);
    fs::write(&stale, vec![0u8; 100_000]).unwrap();
    let other = dir.path().join(mfu_tests::dead_process_temporary("g.bz2"));
    fs::write(&other, b"another file's").unwrap();
    let live = dir.path().join(mfu_tests::live_process_temporary("f.bz2"));
    fs::write(&live, b"a run still going").unwrap();
    for np in [1, 2] {
        let out = run(np, &["-z", "-k", "-f", s(&file)], 0);
        let err = String::from_utf8_lossy(&out.stderr);
        if np == 1 {
            assert!(err.contains(&stale_name), "named: {err}");
        }
        assert!(!stale.exists(), "np={np}: stale temporary removed");
        assert!(other.exists(), "another output's temporary kept");
        assert!(live.exists(), "a running process's temporary kept");
        assert_eq!(bunzip2_stdout(&with_ext(&file, ".bz2")), data(1000));
        fs::write(&stale, b"again").unwrap();
    }
}

/// Defect class #1: the directory of the input and output swapped for a symlink to an outside
/// directory after bz2 made its plan: before, it read the outside file, wrote its output there
/// and removed the outside input. Now every rank checks it still reaches the planned files;
/// nothing outside changes, the input is named, exit 1. Also an output that appears (a symlink
/// to an outside file) after the plan is not replaced without -f. np 1 and 2.
#[test]
fn a_symlink_swapped_in_after_the_plan_is_not_followed() {
    use mfu_tests::with_change_after_listing;
    for np in [1, 2] {
        let base = tempfile::tempdir().unwrap();
        let (d, outside) = (base.path().join("d"), base.path().join("outside"));
        fs::create_dir_all(&d).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(d.join("f"), data(5000)).unwrap();
        fs::write(outside.join("f"), b"outside, must not be read or removed").unwrap();
        let f = d.join("f");
        let out = with_change_after_listing(&mut bz2(np, &["-z", s(&f)]), || {
            fs::rename(&d, base.path().join("d.moved")).unwrap();
            std::os::unix::fs::symlink(&outside, &d).unwrap();
        });
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "np={np}: {err}");
        assert!(err.contains("d/f"), "np={np}: named: {err}");
        assert_eq!(names(&outside), ["f"], "np={np}: nothing written outside");
        assert_eq!(
            fs::read(outside.join("f")).unwrap(),
            b"outside, must not be read or removed"
        );
        assert_eq!(
            names(&base.path().join("d.moved")),
            ["f"],
            "np={np}: input kept"
        );

        // The output appears as a symlink to an outside file after the plan.
        let d2 = base.path().join("d2");
        fs::create_dir(&d2).unwrap();
        let f2 = d2.join("f");
        fs::write(&f2, data(5000)).unwrap();
        let target = outside.join("victim");
        fs::write(&target, b"victim").unwrap();
        let out = with_change_after_listing(&mut bz2(np, &["-z", s(&f2)]), || {
            std::os::unix::fs::symlink(&target, d2.join("f.bz2")).unwrap();
        });
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "np={np}: {err}");
        assert!(err.contains("f.bz2"), "np={np}: named: {err}");
        assert_eq!(fs::read(&target).unwrap(), b"victim");
        assert_eq!(
            names(&d2),
            ["f", "f.bz2"],
            "np={np}: input kept, no temporary"
        );
        assert!(fs::symlink_metadata(d2.join("f.bz2"))
            .unwrap()
            .file_type()
            .is_symlink());
    }
}

fn path_bytes(p: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes().to_vec()
}

#[test]
fn library_run_reports_counts_and_failures() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::ToolReport;
    let (dir, file, content) = input_file(230_001);
    let mut options = mfu::bz2::Options::new(path_bytes(&file));
    options.stream_bytes = Some(50_000);
    options.keep = true;
    let reports = steal::local::run(2, |comm| mfu::bz2::run(comm, &options).unwrap());
    let packed = with_ext(&file, ".bz2");
    for r in &reports {
        assert_eq!((r.bytes, r.failed, r.interrupted), (230_001, 0, false));
        assert_eq!(
            (r.input.clone(), r.output.clone()),
            (path_bytes(&file), path_bytes(&packed))
        );
        assert!(
            r.detail.starts_with("5 blocks of 50000 bytes"),
            "{}",
            r.detail
        );
        assert_eq!(r.summary().items, 1);
        assert_eq!(r.status(), mfu::Status::Ok);
    }
    assert_eq!(bunzip2_stdout(&packed), content);
    // A damaged block: the run fails, named, without an output; the input stays.
    damage_block(&packed, 2);
    fs::remove_file(&file).unwrap();
    let mut options = mfu::bz2::Options::new(path_bytes(&packed));
    options.decompress = true;
    let reports = steal::local::run(2, |comm| mfu::bz2::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!((r.bytes, r.failed), (0, 1));
        assert_eq!(r.summary().items, 0);
        assert_eq!(r.status(), mfu::Status::ItemsFailed);
    }
    let failures: Vec<&String> = reports.iter().flat_map(|r| &r.failures).collect();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("f.bz2") && f.contains("block 2")),
        "{failures:?}"
    );
    assert_eq!(names(dir.path()), ["f.bz2"]);
    // A usage error is an error on every rank.
    let missing = mfu::bz2::Options::new(path_bytes(&dir.path().join("nothing")));
    for r in steal::local::run(2, |comm| mfu::bz2::run(comm, &missing)) {
        assert!(r.unwrap_err().message.starts_with("stat "));
    }
}

#[test]
fn json_report_has_the_counts_and_the_verbose_detail() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    fs::write(&a, data(120_000)).unwrap();
    fs::write(&b, data(120_000)).unwrap();
    // bzip2 says nothing on success; -v tells how, on stderr.
    let text = run(1, &["-v", "-k", "--stream-bytes", STREAM, s(&a)], 0);
    assert!(text.stdout.is_empty());
    let json = run(1, &["--json", "-k", "--stream-bytes", STREAM, s(&b)], 0);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json.stdout)));
    assert_eq!(v["tool"], "bz2");
    assert_eq!(v["status"], 0);
    assert_eq!(
        (v["items"].clone(), v["bytes"].clone(), v["failed"].clone()),
        (1.into(), 120_000.into(), 0.into())
    );
    let err = String::from_utf8_lossy(&text.stderr);
    let detail = v["detail"].as_str().unwrap();
    assert!(
        err.contains(&format!("{} -> {}.bz2: {detail} in ", s(&a), s(&a))),
        "{err} / {detail}"
    );
    assert_eq!(v["output"], format!("{}.bz2", s(&b)));
    assert_eq!(
        fs::read(with_ext(&a, ".bz2")).unwrap(),
        fs::read(with_ext(&b, ".bz2")).unwrap()
    );
    // A failed run: status 1, the same counts with and without --json.
    damage_block(&with_ext(&a, ".bz2"), 1);
    damage_block(&with_ext(&b, ".bz2"), 1);
    let text = run(1, &["-d", "-f", s(&with_ext(&a, ".bz2"))], 1);
    assert!(text.stdout.is_empty());
    let json = run(1, &["-d", "-f", "--json", s(&with_ext(&b, ".bz2"))], 1);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        (v["status"].clone(), v["items"].clone(), v["failed"].clone()),
        (1.into(), 0.into(), 1.into())
    );
    assert!(String::from_utf8_lossy(&json.stderr).contains("block 1"));
}

/// How a run is launched in the checkpoint tests: one process, thread ranks, or mpirun.
#[derive(Clone, Copy, Debug)]
enum Launch {
    One,
    Ranks(usize),
    Mpi(usize),
}

/// `mfu-rs bz2 ARGS` launched as `launch`, marks flushed every 20 ms.
fn bz2_at(launch: Launch, args: &[&str]) -> Tool {
    let t = Tool::new("bz2")
        .args(args)
        .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20");
    match launch {
        Launch::One => t,
        Launch::Ranks(n) => t.ranks(n),
        Launch::Mpi(n) => t.mpi(n),
    }
}

/// The checkpoint `bz2` keeps beside `output` by default.
fn checkpoint_of(output: &Path) -> PathBuf {
    let name = output.file_name().unwrap().to_str().unwrap();
    output.with_file_name(format!(".{name}.mfu-checkpoint"))
}

/// The (device, inode) of the one temporary of `base` in `dir` (the partial output).
fn partial_of(dir: &Path, base: &str) -> (u64, u64) {
    let t = temporaries(dir, base);
    assert_eq!(t.len(), 1, "one partial output of {base}: {t:?}");
    let m = fs::metadata(dir.join(&t[0])).unwrap();
    (m.dev(), m.ino())
}

/// The output of an uninterrupted `bz2 ARGS` of `content` (in a directory of its own).
fn uninterrupted(content: &[u8], args: &[&str], out_ext: &str, name: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    fs::write(&file, content).unwrap();
    let mut words = args.to_vec();
    words.push(s(&file));
    run(1, &words, 0);
    let out = if out_ext.is_empty() {
        dir.path().join(name.trim_end_matches(".bz2"))
    } else {
        with_ext(&file, out_ext)
    };
    fs::read(out).unwrap()
}

/// Compression and decompression continue after a stop (the checkpoint core's stop knob: a
/// SIGTERM after the N-th block marked) and after a kill -9 (its die knob), at one process,
/// `--ranks 3` and `mpirun -np 2`, the rerun at another rank count: the stopped run exits 1,
/// keeps its checkpoint and partial output, the rerun takes the partial output over (the final
/// file is that inode) and its result is byte-identical to an uninterrupted run's.
#[test]
fn an_interrupted_run_continues_and_equals_an_uninterrupted_one() {
    let content = data(420_000);
    let zargs = ["-z", "-k", "-b", "1", "--stream-bytes", STREAM];
    let want_z = uninterrupted(&content, &zargs, ".bz2", "f");
    let cases = [
        (
            Launch::One,
            "MFU_RS_TEST_CHECKPOINT_STOP_AFTER",
            "2",
            Launch::Ranks(2),
        ),
        (
            Launch::Ranks(3),
            "MFU_RS_TEST_CHECKPOINT_STOP_AFTER",
            "1",
            Launch::One,
        ),
        (
            Launch::Mpi(2),
            "MFU_RS_TEST_CHECKPOINT_STOP_AFTER",
            "1",
            Launch::Ranks(3),
        ),
        (
            Launch::One,
            "MFU_RS_TEST_CHECKPOINT_DIE_AFTER",
            "3",
            Launch::Mpi(2),
        ),
        (
            Launch::Ranks(3),
            "MFU_RS_TEST_CHECKPOINT_DIE_AFTER",
            "2",
            Launch::One,
        ),
        (
            Launch::Mpi(2),
            "MFU_RS_TEST_CHECKPOINT_DIE_AFTER",
            "1",
            Launch::One,
        ),
    ];
    for (first, knob, n, then) in cases {
        let what = format!("{first:?} {knob}={n}, rerun {then:?}");
        for decompress in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (input, output, args, want) = if decompress {
                let packed = dir.path().join("f.bz2");
                fs::write(&packed, &want_z).unwrap();
                (packed, dir.path().join("f"), vec!["-d", "-k"], &content)
            } else {
                let file = dir.path().join("f");
                fs::write(&file, &content).unwrap();
                (
                    file.clone(),
                    with_ext(&file, ".bz2"),
                    zargs.to_vec(),
                    &want_z,
                )
            };
            let what = format!("{what}, decompress {decompress}");
            let mut words = args.clone();
            words.push(s(&input));
            let out = bz2_at(first, &words).env(knob, n).run();
            let err = out.stderr_str();
            if knob.ends_with("STOP_AFTER") {
                assert_eq!(out.code(), Some(1), "{what}: a stop exits 1\n{err}");
                assert!(
                    err.contains("stopped after ") && err.contains("run the same command again"),
                    "{what}: says how far it got\n{err}"
                );
            } else {
                assert_ne!(out.code(), Some(0), "{what}: killed\n{err}");
            }
            assert!(!output.exists(), "{what}: no output yet");
            assert!(checkpoint_of(&output).is_dir(), "{what}: checkpoint kept");
            let base = output.file_name().unwrap().to_str().unwrap();
            let partial = partial_of(dir.path(), base);
            let again = bz2_at(then, &words).run().assert_status(0);
            let err = again.stdout_str() + &again.stderr_str();
            assert!(err.contains("continuing"), "{what}: continues\n{err}");
            assert_eq!(&fs::read(&output).unwrap(), want, "{what}: byte-identical");
            let m = fs::metadata(&output).unwrap();
            assert_eq!(
                (m.dev(), m.ino()),
                partial,
                "{what}: the partial output finished"
            );
            assert!(
                !checkpoint_of(&output).exists(),
                "{what}: checkpoint removed"
            );
            assert_eq!(temporaries(dir.path(), base), Vec::<String>::new());
            let kept = if decompress { &want_z } else { &content };
            assert_eq!(
                &fs::read(&input).unwrap(),
                kept,
                "{what}: -k keeps the input"
            );
        }
    }
}

/// A real SIGTERM while compressing (the temporary holds data): exit 1, "stopped", the
/// checkpoint and the partial output kept; the same command then finishes, byte-identical.
#[test]
fn a_real_sigterm_then_a_rerun_finishes_the_same_archive() {
    use rustix::process::Signal;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    // Incompressible: the debug build compresses ~0.5 MB/s here, so this runs for seconds.
    let content = mfu_tests::noise(11, 3_000_000);
    fs::write(&file, &content).unwrap();
    let args = ["-z", "-k", "--stream-bytes", "100000"];
    let want = uninterrupted(&content, &args, ".bz2", "f");
    let mut words = args.to_vec();
    words.push(s(&file));
    let mut cmd = bz2(1, &words);
    let out = mfu_tests::signal_when(&mut cmd, Signal::TERM, || {
        temporary_has_data(dir.path(), "f.bz2")
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("stopped"), "{err}");
    assert!(checkpoint_of(&with_ext(&file, ".bz2")).is_dir(), "{err}");
    let again = run(2, &words, 0);
    let err = String::from_utf8_lossy(&again.stdout) + String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("continuing"), "{err}");
    assert_eq!(fs::read(with_ext(&file, ".bz2")).unwrap(), want);
    assert_eq!(names(dir.path()), ["f", "f.bz2"]);
}

/// A checkpoint is not used when the input changed since (the run starts over and says so),
/// nor when its record of the partial output is garbage or names a file that is not the one it
/// wrote (a hard-linked file is never written); the result is an uninterrupted run's.
#[test]
fn a_changed_input_or_a_forged_record_starts_over() {
    let content = data(300_000);
    let args = ["-z", "-k", "-b", "1", "--stream-bytes", STREAM];
    let stop = |file: &Path| -> Vec<String> {
        let mut words: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        words.push(s(file).to_string());
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        bz2_at(Launch::One, &refs)
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "2")
            .run()
            .assert_status(1);
        words
    };
    // The input changed.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, &content).unwrap();
    let words = stop(&file);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let mut changed = content.clone();
    changed[10] ^= 0xff;
    fs::write(&file, &changed).unwrap();
    let again = bz2_at(Launch::Ranks(2), &words).run().assert_status(0);
    let err = again.stdout_str() + &again.stderr_str();
    assert!(err.contains("changed"), "says why it starts over: {err}");
    assert!(!err.contains("continuing"), "{err}");
    assert_eq!(
        fs::read(with_ext(&file, ".bz2")).unwrap(),
        uninterrupted(&changed, &args, ".bz2", "f")
    );
    assert_eq!(names(dir.path()), ["f", "f.bz2"]);

    let want = uninterrupted(&content, &args, ".bz2", "f");
    // Garbage in the record, then in every file of the checkpoint.
    for everything in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, &content).unwrap();
        let words = stop(&file);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let cp = checkpoint_of(&with_ext(&file, ".bz2"));
        for e in fs::read_dir(&cp).unwrap() {
            let e = e.unwrap();
            if everything || e.file_name() == "bz2-output" {
                fs::write(e.path(), b"garbage\x00\xff").unwrap();
            }
        }
        bz2_at(Launch::One, &words).run().assert_status(0);
        assert_eq!(
            fs::read(with_ext(&file, ".bz2")).unwrap(),
            want,
            "{everything}"
        );
        // The partial output is gone (not taken over, then removed as stale); a checkpoint
        // whose header is garbage is not one of ours and stays (the core warns about it).
        assert_eq!(temporaries(dir.path(), "f.bz2"), Vec::<String>::new());
        if !everything {
            assert!(!cp.exists(), "a checkpoint of ours is removed at the end");
        }
    }
    // The record names a file with another link (the partial output hard-linked elsewhere):
    // it is not taken over, and the other name keeps its bytes.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, &content).unwrap();
    let words = stop(&file);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let t = temporaries(dir.path(), "f.bz2");
    let other = dir.path().join("precious");
    fs::hard_link(dir.path().join(&t[0]), &other).unwrap();
    let before = fs::read(&other).unwrap();
    bz2_at(Launch::One, &words).run().assert_status(0);
    assert_eq!(fs::read(with_ext(&file, ".bz2")).unwrap(), want);
    assert_eq!(
        fs::read(&other).unwrap(),
        before,
        "the other name untouched"
    );
}

/// A partial output removed and replaced by another file that got the same inode number (ext4
/// gives a freed one out again at once; here the record is made to name the new file's
/// (device, inode) with the old file's birth time) is not taken over: the run starts over and
/// the output is an uninterrupted run's, not the new file's bytes.
#[test]
fn a_partial_output_replaced_under_a_reused_inode_number_starts_over() {
    let content = data(300_000);
    let args = ["-z", "-k", "-b", "1", "--stream-bytes", STREAM];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, &content).unwrap();
    let mut words = args.to_vec();
    words.push(s(&file));
    bz2_at(Launch::One, &words)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "2")
        .run()
        .assert_status(1);
    let t = temporaries(dir.path(), "f.bz2");
    assert_eq!(t.len(), 1, "{t:?}");
    let partial = dir.path().join(&t[0]);
    let len = fs::metadata(&partial).unwrap().len() as usize;
    assert!(len > 0, "the partial output holds blocks");
    // Removed, then a new file under its name, as long (every recorded block fits in it).
    fs::remove_file(&partial).unwrap();
    fs::write(&partial, vec![0x5a; len]).unwrap();
    let m = fs::metadata(&partial).unwrap();
    let record = checkpoint_of(&with_ext(&file, ".bz2")).join("bz2-output");
    let mut r = fs::read(&record).unwrap();
    // The record: device and inode (8 bytes each, big-endian), then the birth time and name.
    r[..8].copy_from_slice(&m.dev().to_be_bytes());
    r[8..16].copy_from_slice(&m.ino().to_be_bytes());
    fs::write(&record, &r).unwrap();
    let again = bz2_at(Launch::One, &words).run().assert_status(0);
    let err = again.stdout_str() + &again.stderr_str();
    assert!(err.contains("starting over"), "says why: {err}");
    assert_eq!(
        fs::read(with_ext(&file, ".bz2")).unwrap(),
        uninterrupted(&content, &args, ".bz2", "f"),
        "none of the new file's bytes"
    );
    assert_eq!(temporaries(dir.path(), "f.bz2"), Vec::<String>::new());
    assert!(!checkpoint_of(&with_ext(&file, ".bz2")).exists());
}

/// A complete bz2 removes its checkpoint as its output is renamed into place, not at the
/// process's end as the tools whose rerun can use a complete checkpoint do: a rerun would
/// refuse the output that exists, so a checkpoint kept by a kill at the end would only be left
/// behind. The knob that kills a process before it removes the checkpoints it kept to the end
/// finds none.
#[test]
fn a_complete_run_leaves_no_checkpoint_even_if_killed_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, data(230_001)).unwrap();
    let run = Tool::new("bz2")
        .args(["-z", "-k", "--stream-bytes", STREAM])
        .arg(&file)
        .env("MFU_RS_TEST_CHECKPOINT_DIE_AT_EXIT", "1")
        .run();
    assert_eq!(run.code(), Some(0), "{}", run.stderr_str());
    assert!(!checkpoint_of(&with_ext(&file, ".bz2")).exists());
    assert_eq!(temporaries(dir.path(), "f.bz2"), Vec::<String>::new());
}

/// A kill after the rename, before the checkpoint's removal, leaves a whole output and the
/// checkpoint of a complete run: the same command forced (the output exists) does not trust
/// it, makes the same output and leaves nothing behind.
#[test]
fn a_kill_between_the_rename_and_the_checkpoint_removal_leaves_nothing_a_forced_rerun_trusts() {
    let (dir, file, content) = input_file(230_001);
    let args = ["-z", "-k", "-b", "1", "--stream-bytes", STREAM];
    let mut words = args.to_vec();
    words.push(s(&file));
    let killed = bz2_at(Launch::One, &words)
        .env("MFU_RS_TEST_CHECKPOINT_DIE_BEFORE_REMOVAL", "1")
        .run();
    assert_eq!(killed.code(), None, "killed: {}", killed.stderr_str());
    let want = uninterrupted(&content, &args, ".bz2", "f");
    let output = with_ext(&file, ".bz2");
    assert_eq!(fs::read(&output).unwrap(), want, "whole at its name");
    assert!(
        checkpoint_of(&output).exists(),
        "the knob kills before the removal"
    );
    let mut forced = vec!["-f"];
    forced.extend(&words);
    bz2_at(Launch::One, &forced).run().assert_status(0);
    assert_eq!(fs::read(&output).unwrap(), want);
    assert!(!checkpoint_of(&output).exists());
    assert_eq!(temporaries(dir.path(), "f.bz2"), Vec::<String>::new());
}

/// A symlink at the checkpoint's name is never followed: the run goes on without it, and what
/// it points to is untouched.
#[test]
fn a_symlink_at_the_checkpoint_name_is_not_followed() {
    let (dir, file, content) = input_file(120_000);
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, checkpoint_of(&with_ext(&file, ".bz2"))).unwrap();
    let args = ["-z", "-k", "-b", "1", "--stream-bytes", STREAM];
    let mut words = args.to_vec();
    words.push(s(&file));
    // A stop request: whatever the run does without its checkpoint, nothing goes through it.
    let out = bz2_at(Launch::One, &words)
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "1")
        .run();
    assert_eq!(
        names(&elsewhere),
        Vec::<String>::new(),
        "nothing written through the link"
    );
    if out.code() == Some(0) {
        fs::remove_file(with_ext(&file, ".bz2")).unwrap();
    }
    bz2_at(Launch::One, &words).run().assert_status(0);
    assert_eq!(
        fs::read(with_ext(&file, ".bz2")).unwrap(),
        uninterrupted(&content, &args, ".bz2", "f")
    );
    assert_eq!(names(&elsewhere), Vec::<String>::new());
}

/// Defect (torture bz2-kill, seeds 950393, 950881, 951132): a rank of an `mpirun` killed with
/// -9 is a zombie until init reaps it, which may be seconds later; kill(2) still finds a
/// zombie, so the rerun took its temporary for a live run's, finished, and left it behind for
/// good. Now a process that has exited is gone, reaped or not. Here the killed run is this
/// test's child, left unreaped until the rerun (one process, then `mpirun -np 2`) is done;
/// killed before any block is marked durably (marks flushed every 10 minutes), so the rerun
/// starts over with a fresh output: byte-identical, no temporary, no checkpoint left.
#[test]
fn a_killed_run_not_yet_reaped_leaves_no_temporary_after_the_rerun() {
    use std::process::Stdio;
    let content = data(420_000);
    let args = ["-z", "-k", "-b", "1", "--stream-bytes", STREAM];
    let want = uninterrupted(&content, &args, ".bz2", "f");
    for rerun in [Launch::One, Launch::Mpi(2)] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, &content).unwrap();
        let mut words = args.to_vec();
        words.push(s(&file));
        let mut cmd = bz2_at(Launch::One, &words)
            .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "600000")
            .env("MFU_RS_TEST_CHECKPOINT_SLOW_MS", "300")
            .command();
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = mfu_tests::kill_leaving_a_zombie(&mut cmd, || {
            !temporaries(dir.path(), "f.bz2").is_empty()
        });
        let pid = child.id();
        let left = temporaries(dir.path(), "f.bz2");
        assert_eq!(left.len(), 1, "{rerun:?}: the killed run's temporary");
        assert!(left[0].ends_with(&format!(".{pid}.mfu-tmp")), "{left:?}");
        let again = bz2_at(rerun, &words).run().assert_status(0);
        let zombie = mfu_tests::is_zombie(pid);
        child.wait().unwrap();
        assert!(
            zombie,
            "{rerun:?}: the killed run was a zombie throughout the rerun"
        );
        let err = again.stderr_str();
        assert!(err.contains(&left[0]), "{rerun:?}: named: {err}");
        assert_eq!(
            fs::read(with_ext(&file, ".bz2")).unwrap(),
            want,
            "{rerun:?}"
        );
        assert_eq!(names(dir.path()), ["f", "f.bz2"], "{rerun:?}: nothing left");
    }
}

/// Defect: when the run failed, bz2 removed its checkpoint with `let _ = c.finish(..)`: a
/// checkpoint that could not be removed was left without a word. Here the directory holding
/// `--checkpoint PATH` is moved away while the run goes (removing PATH then fails), and in the
/// first case the input changes too (the run fails: no output): the checkpoint left is told by
/// its path and the operation; exit 1 in both cases, as every resumable tool does, though in
/// the second the output is whole.
#[test]
fn a_checkpoint_not_removed_is_told_and_exits_1() {
    let content = data(420_000);
    let args = ["-z", "-k", "-b", "1", "--stream-bytes", STREAM];
    let want = uninterrupted(&content, &args, ".bz2", "f");
    for change_input in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, &content).unwrap();
        let sub = dir.path().join("ck dir");
        fs::create_dir(&sub).unwrap();
        let ck = sub.join("ck");
        let mut words = args.to_vec();
        words.extend(["--checkpoint", s(&ck), s(&file)]);
        let mut cmd = bz2_at(Launch::One, &words)
            .env("MFU_RS_TEST_CHECKPOINT_SLOW_MS", "400")
            .command();
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = mfu_tests::spawn(&mut cmd);
        // Once a mark is on disk: the run is under way, its checkpoint in use.
        let started = std::time::Instant::now();
        let marked = || {
            fs::read_dir(&ck).is_ok_and(|d| {
                d.flatten().any(|e| {
                    e.file_name().to_string_lossy().starts_with("log.")
                        && e.metadata().is_ok_and(|m| m.len() > 0)
                })
            })
        };
        while !marked() {
            assert!(started.elapsed() < Duration::from_secs(60), "no mark");
            std::thread::sleep(Duration::from_millis(2));
        }
        let moved = dir.path().join("moved");
        fs::rename(&sub, &moved).unwrap();
        if change_input {
            let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
            std::io::Write::write_all(&mut f, b"more").unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let what = format!("input changed: {change_input}: {err}");
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert!(
            err.contains(&format!("open the directory of {}", s(&ck))),
            "the checkpoint not removed is told: {what}"
        );
        let output = with_ext(&file, ".bz2");
        if change_input {
            assert!(err.contains("changed"), "{what}");
            assert!(!output.exists(), "no output: {what}");
        } else {
            assert_eq!(fs::read(&output).unwrap(), want, "{what}");
        }
        assert_eq!(temporaries(dir.path(), "f.bz2"), Vec::<String>::new());
        assert!(moved.join("ck").is_dir(), "left where it went");
    }
}
