//! `mfu-rs bz2` end to end: round trips at 1, 2 and 4 ranks, interchange with plain
//! `bzip2`/`bunzip2`, bzip2's naming and safety rules (-k, -f, refusal to overwrite), and damaged
//! input that must never leave an output under the final name.
//!
//! dbz2 cuts streams of ~10 MB (`-b 1`: 10.4 MB), which the debug build compresses at about
//! 1 MB/s; the tests pass the hidden `--stream-bytes` to get several streams from a few hundred
//! kB, and `-b 1` for bzip2's smallest internal block.

use mfu_tests::{bin, expect_status, mfu, mpirun};
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
    let mut cmd = if np == 1 {
        mfu(&["bz2"])
    } else {
        let mut c = mpirun(np, &bin());
        c.arg("bz2");
        c
    };
    cmd.args(args);
    cmd
}

fn run(np: usize, args: &[&str], code: i32) -> Output {
    expect_status(&mut bz2(np, args), code)
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

    // A table that points outside the streams is caught before any block is decoded.
    fs::write(&file, data(230_001)).unwrap();
    run(1, &["-z", "-f", "--stream-bytes", STREAM, s(&file)], 0);
    let mut z = fs::read(&packed).unwrap();
    let table = u64::from_be_bytes(z[z.len() - 48..z.len() - 40].try_into().unwrap()) as usize;
    z[table + 16 * 3] = 0x01; // block 3's offset far beyond the table
    fs::write(&packed, z).unwrap();
    let out = run(2, &["-d", s(&packed)], 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("block 3"));
    assert_eq!(names(dir.path()), ["f.bz2", "p.bz2"]);
}
