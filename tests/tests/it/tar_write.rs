//! `mfu-rs tar -c` under faults, end to end: sources it cannot read (as an unprivileged user),
//! a full file system (a small tmpfs the test mounts), SIGINT during the create, `-f -`, and
//! zstd archives whose frames were damaged afterwards. The promise pinned here: a create that
//! did not complete leaves nothing that looks like an archive (GNU tar must not read it back),
//! exits 1 and names the archive; what is in an archive is what its headers say.
//!
//! Needs root (mount, setpriv) like the rest of the fault tests; GNU tar and zstd must exist.

use mfu_tests::{bin, expect_status, mfu, noise, Tool};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `mfu-rs tar ARGS` as one process (np = 1) or under `mpirun -np 2`.
fn tar_np(np: usize) -> Command {
    Tool::new("tar").np(np).command()
}

/// GNU tar in the C locale (its messages in English).
fn gnu_tar() -> Command {
    let mut c = Command::new("tar");
    c.env("LC_ALL", "C");
    c
}

fn all_output(out: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Entries of `dir` (names), sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A failed create: exit 1, the archive named on stderr, no "Archived" summary, and no archive
/// (nor a temporary one) in `dir`, or only `kept` as it was before: `tar -tf` of what remains
/// must fail.
fn assert_not_created(ctx: &str, out: &Output, dir: &Path, archive: &str, kept: Option<&[u8]>) {
    let all = all_output(out);
    assert_eq!(out.status.code(), Some(1), "{ctx}: exit 1\n{all}");
    assert!(
        text(&out.stderr).contains(archive),
        "{ctx}: stderr must name the archive {archive}\n{all}"
    );
    assert!(
        !text(&out.stdout).contains("Archived"),
        "{ctx}: the summary must not claim entries were archived\n{all}"
    );
    let path = dir.join(archive);
    match kept {
        None => {
            assert!(
                entries(dir).is_empty(),
                "{ctx}: nothing may be left in {}: {:?}\n{all}",
                dir.display(),
                entries(dir)
            );
            let t = gnu_tar().arg("-tf").arg(&path).output().unwrap();
            assert!(!t.status.success(), "{ctx}: GNU tar read the remains");
        }
        Some(old) => {
            assert_eq!(
                entries(dir),
                vec![archive.to_string()],
                "{ctx}: only the old archive may be there\n{all}"
            );
            assert_eq!(
                std::fs::read(&path).unwrap(),
                old,
                "{ctx}: the old archive must be untouched"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Unreadable sources (as an unprivileged user)

const NOBODY: u32 = 65534;

/// `mfu-rs tar ARGS` as uid/gid 65534 with no groups, at np 1 or 2.
fn tar_as_nobody(np: usize) -> Command {
    let mut c = Command::new("setpriv");
    mfu_tests::mpi_env(&mut c).args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    if np > 1 {
        c.args(["mpirun", "--oversubscribe", "-np", &np.to_string()]);
    }
    // Run from a place nobody can reach (the clone and the test's working directory may not
    // be).
    c.current_dir("/");
    c.arg(mfu_tests::reachable_program(&bin())).arg("tar");
    c
}

/// A tree owned by nobody: `a`, `d/c`, `d/big` (2 MiB: travels in chunks), `d/secret`
/// (mode 000) and `d/h` a hard link of `d/secret`; the work directory is open to nobody.
fn unreadable_fixture(work: &Path) -> PathBuf {
    let src = work.join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("a"), b"alpha\n").unwrap();
    std::fs::write(src.join("d/c"), b"charlie\n").unwrap();
    std::fs::write(src.join("d/big"), noise(7, 2 << 20)).unwrap();
    std::fs::write(src.join("d/secret"), b"classified\n").unwrap();
    std::fs::hard_link(src.join("d/secret"), src.join("d/h")).unwrap();
    std::fs::create_dir(work.join("out")).unwrap();
    for p in [
        work.to_path_buf(),
        work.join("out"),
        src.clone(),
        src.join("d"),
        src.join("a"),
        src.join("d/c"),
        src.join("d/big"),
        src.join("d/secret"),
    ] {
        std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(src.join("d/secret"), std::fs::Permissions::from_mode(0o000)).unwrap();
    src
}

#[test]
fn an_unreadable_source_is_left_out_and_named_and_the_rest_is_intact_at_np_1_and_2() {
    for np in [1, 2] {
        for zstd in [false, true] {
            let ctx = format!("np {np}, zstd {zstd}");
            let tmp = mfu_tests::nobody_tempdir();
            let work = tmp.path();
            let src = unreadable_fixture(work);
            let name = if zstd { "A.tar.zst" } else { "A.tar" };
            let mut cmd = tar_as_nobody(np);
            cmd.arg("-c");
            if zstd {
                cmd.arg("--zstd");
            }
            cmd.args(["-k", "1MB", "-f"])
                .arg(work.join("out").join(name))
                .arg("-C")
                .arg(&src)
                .arg(".");
            let out = cmd.output().unwrap();
            let all = all_output(&out);
            assert_eq!(out.status.code(), Some(1), "{ctx}: exit 1\n{all}");
            for f in ["d/secret", "d/h"] {
                assert!(
                    text(&out.stderr)
                        .lines()
                        .any(|l| l.contains(f) && l.contains("Permission denied")),
                    "{ctx}: stderr must name {f}\n{all}"
                );
            }
            // GNU tar reads the archive; it holds everything but the unreadable inode.
            let plain = work.join("plain.tar");
            if zstd {
                let d = Command::new("zstd")
                    .arg("-dc")
                    .arg(work.join("out").join(name))
                    .output()
                    .unwrap();
                assert!(d.status.success(), "{ctx}: zstd -dc");
                std::fs::write(&plain, d.stdout).unwrap();
            } else {
                std::fs::copy(work.join("out").join(name), &plain).unwrap();
            }
            let listed = gnu_tar().arg("-tf").arg(&plain).output().unwrap();
            assert!(listed.status.success(), "{ctx}: GNU tar -t");
            let listed = text(&listed.stdout);
            for gone in ["./d/secret", "./d/h"] {
                assert!(
                    !listed.lines().any(|l| l == gone),
                    "{ctx}: {gone} must not be archived:\n{listed}"
                );
            }
            let x = work.join("x");
            std::fs::create_dir(&x).unwrap();
            let ok = gnu_tar()
                .arg("-xf")
                .arg(&plain)
                .arg("-C")
                .arg(&x)
                .status()
                .unwrap();
            assert!(ok.success(), "{ctx}: GNU tar -x");
            for f in ["a", "d/c", "d/big"] {
                assert_eq!(
                    std::fs::read(x.join(f)).unwrap(),
                    std::fs::read(src.join(f)).unwrap(),
                    "{ctx}: {f}"
                );
            }
            assert!(!x.join("d/secret").exists() && !x.join("d/h").exists());
            assert!(
                text(&out.stdout).contains("Archived 5 entries"),
                "{ctx}: the summary counts what is in the archive (., a, d, d/big, d/c)\n{all}"
            );
        }
    }
}

#[test]
fn a_source_made_unreadable_after_the_layout_fails_the_create_and_leaves_no_archive() {
    for zstd in [false, true] {
        let ctx = format!("zstd {zstd}");
        let tmp = mfu_tests::nobody_tempdir();
        let work = tmp.path();
        let src = unreadable_fixture(work);
        std::fs::remove_file(src.join("d/h")).unwrap();
        std::fs::set_permissions(src.join("d/secret"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        let mut cmd = tar_as_nobody(1);
        cmd.arg("-c");
        if zstd {
            cmd.arg("--zstd");
        }
        cmd.args(["-k", "1MB", "-f"])
            .arg(work.join("out/A.tar"))
            .arg("-C")
            .arg(&src)
            .arg(".")
            .env(
                "MFU_TEST_HOOK_AFTER_LAYOUT",
                format!(
                    "chmod 000 '{}' '{}'",
                    src.join("d/secret").display(),
                    src.join("d/big").display()
                ),
            );
        let out = cmd.output().unwrap();
        assert_not_created(&ctx, &out, &work.join("out"), "A.tar", None);
        assert!(
            text(&out.stderr).contains("d/secret"),
            "{ctx}: the source is named\n{}",
            all_output(&out)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// A full file system

/// A tmpfs of `size` mounted on `dir`, unmounted when dropped (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(
            ok.success(),
            "mount a tmpfs on {} (needs root)",
            dir.display()
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_create_onto_a_full_file_system_leaves_no_archive_and_names_it_at_np_1_and_2() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..6 {
        std::fs::write(src.join(format!("f{i}")), noise(i, 700_000)).unwrap();
    }
    std::fs::write(src.join("small"), b"small\n").unwrap();
    let fs = Tmpfs::mount(&tmp.path().join("fs"), "2m");
    for np in [1, 2] {
        for zstd in [false, true] {
            for old in [None, Some(&b"an older archive\n"[..])] {
                let ctx = format!("np {np}, zstd {zstd}, old archive {}", old.is_some());
                if let Some(old) = old {
                    std::fs::write(fs.0.join("A.tar"), old).unwrap();
                }
                let mut cmd = tar_np(np);
                cmd.arg("-c");
                if zstd {
                    cmd.arg("--zstd");
                }
                cmd.args(["-k", "256KB", "-f"])
                    .arg(fs.0.join("A.tar"))
                    .arg("-C")
                    .arg(tmp.path())
                    .arg("src");
                let out = cmd.output().unwrap();
                assert_not_created(&ctx, &out, &fs.0, "A.tar", old);
                assert!(
                    text(&out.stderr).contains("No space left"),
                    "{ctx}: the cause is said\n{}",
                    all_output(&out)
                );
                assert!(
                    !text(&out.stderr)
                        .lines()
                        .any(|l| l.contains("/src/") && l.contains("No space left")),
                    "{ctx}: the write target is the archive, not a source\n{}",
                    all_output(&out)
                );
                let _ = std::fs::remove_file(fs.0.join("A.tar"));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Signals

#[test]
fn sigint_during_a_create_leaves_no_archive_and_an_honest_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..4 {
        std::fs::write(src.join(format!("f{i}")), noise(i, 1 << 20)).unwrap();
    }
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    // SIGINT after the layout, before any data is copied (deterministic).
    for zstd in [false, true] {
        let ctx = format!("signal after the layout, zstd {zstd}");
        // Without a checkpoint (tests/it/checkpoint_tar.rs has a stop that keeps one).
        let mut cmd = mfu(&["tar", "-c", "--no-checkpoint"]);
        if zstd {
            cmd.arg("--zstd");
        }
        cmd.arg("-f")
            .arg(out_dir.join("A.tar"))
            .arg("-C")
            .arg(tmp.path())
            .arg("src")
            .env("MFU_TEST_HOOK_AFTER_LAYOUT", "kill -INT $PPID");
        let out = cmd.output().unwrap();
        assert_not_created(&ctx, &out, &out_dir, "A.tar", None);
        assert!(
            text(&out.stdout).contains("Interrupted"),
            "{ctx}: the summary says it was interrupted\n{}",
            all_output(&out)
        );
    }
    // SIGINT while frames are being compressed (slow: level 19, small frames; 32 MiB, so that
    // the compression lasts well beyond the signal's delivery on a loaded machine).
    for i in 0..8 {
        std::fs::write(src.join(format!("g{i}")), noise(10 + i, 4 << 20)).unwrap();
    }
    let mut child = mfu(&[
        "tar",
        "-c",
        "--no-checkpoint",
        "--zstd",
        "--zstd-level",
        "19",
        "-k",
        "128KB",
        "-f",
    ])
    .arg(out_dir.join("A.tar"))
    .arg("-C")
    .arg(tmp.path())
    .arg("src")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let start = Instant::now();
    while entries(&out_dir).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the create ended before its temporary archive appeared"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no temporary archive"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let tmp_name = entries(&out_dir)[0].clone();
    assert!(
        tmp_name.starts_with(".A.tar.") && tmp_name.ends_with(".mfu-tmp"),
        "{tmp_name}"
    );
    // SAFETY: kill(2) on the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_not_created("signal while compressing", &out, &out_dir, "A.tar", None);
    assert!(text(&out.stdout).contains("Interrupted"));
}

#[test]
fn the_temporary_archive_of_a_killed_create_is_removed_by_the_next_one() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..4 {
        std::fs::write(src.join(format!("g{i}")), noise(20 + i, 2 << 20)).unwrap();
    }
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    // The temporary of a run that is still going (this test's own pid) stays.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let live = format!(".A.tar.{}.{}.mfu-tmp", host.trim(), std::process::id());
    std::fs::write(out_dir.join(&live), b"in progress").unwrap();
    let create = |level: &str| {
        // The temporary beside the archive is a run's without a checkpoint.
        let mut c = mfu(&[
            "tar",
            "-c",
            "--no-checkpoint",
            "--zstd",
            "--zstd-level",
            level,
            "-k",
            "128KB",
            "-f",
        ]);
        c.arg(out_dir.join("A.tar"))
            .arg("-C")
            .arg(tmp.path())
            .arg("src")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let mut child = create("19").spawn().unwrap();
    let start = Instant::now();
    while entries(&out_dir).len() < 2 {
        assert!(child.try_wait().unwrap().is_none(), "ended too soon");
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no temporary archive"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: kill(2) on the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let stale = format!(".A.tar.{}.{}.mfu-tmp", host.trim(), child.id());
    assert_eq!(entries(&out_dir), {
        let mut v = vec![live.clone(), stale.clone()];
        v.sort();
        v
    });
    let out = expect_status(&mut create("1"), 0);
    assert!(
        text(&out.stderr).contains(&stale) && text(&out.stderr).contains("removed"),
        "{}",
        all_output(&out)
    );
    assert_eq!(entries(&out_dir), {
        let mut v = vec!["A.tar".to_string(), live];
        v.sort();
        v
    });
}

// ---------------------------------------------------------------------------------------------
// -f -

#[test]
fn create_to_dash_is_refused_and_makes_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), b"x").unwrap();
    let out = expect_status(
        mfu(&["tar", "-c", "-f", "-", "f"]).current_dir(tmp.path()),
        2,
    );
    assert!(
        text(&out.stderr).contains("standard output"),
        "{}",
        all_output(&out)
    );
    assert_eq!(entries(tmp.path()), vec!["f".to_string()]);
    // A file named `-` is still possible.
    expect_status(
        mfu(&["tar", "-c", "-f", "./-", "f"]).current_dir(tmp.path()),
        0,
    );
    assert!(tmp.path().join("-").is_file());
}

#[test]
fn archive_names_of_255_bytes_and_odd_bytes_are_created() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), b"x").unwrap();
    let long = format!("{}.tar", "a".repeat(251));
    let odd = std::ffi::OsStr::from_bytes(b"we\nird\xff.tar");
    for name in [std::ffi::OsStr::new(&long), odd] {
        expect_status(
            mfu(&["tar", "-c", "-f"])
                .arg(name)
                .arg("f")
                .current_dir(tmp.path()),
            0,
        );
        let t = gnu_tar()
            .arg("-tf")
            .arg(tmp.path().join(name))
            .output()
            .unwrap();
        assert!(t.status.success() && text(&t.stdout).starts_with("f\n"));
    }
    assert_eq!(entries(tmp.path()).len(), 3, "{:?}", entries(tmp.path()));
}

#[test]
fn an_archive_path_that_is_not_a_regular_file_is_refused_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f"), b"x").unwrap();
    std::fs::write(tmp.path().join("real.tar"), b"keep").unwrap();
    std::os::unix::fs::symlink("real.tar", tmp.path().join("link.tar")).unwrap();
    std::fs::create_dir(tmp.path().join("dir.tar")).unwrap();
    for name in ["link.tar", "dir.tar"] {
        expect_status(
            mfu(&["tar", "-c", "-f", name, "f"]).current_dir(tmp.path()),
            2,
        );
    }
    assert_eq!(std::fs::read(tmp.path().join("real.tar")).unwrap(), b"keep");
    assert!(tmp.path().join("link.tar").is_symlink());
    assert_eq!(entries(&tmp.path().join("dir.tar")), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// zstd checksums

fn le32(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// (compressed offset, compressed length) of each frame, from the seek table.
fn frames_of(z: &[u8]) -> Vec<(usize, usize)> {
    let n = z.len();
    let count = le32(z, n - 9);
    let entry = if z[n - 5] & 0x80 != 0 { 12 } else { 8 };
    let table = n - 8 - 9 - count * entry;
    let mut at = 0;
    (0..count)
        .map(|i| {
            let len = le32(z, table + 8 + i * entry);
            let f = (at, len);
            at += len;
            f
        })
        .collect()
}

#[test]
fn a_flipped_bit_in_a_zstd_archive_is_found_on_extract_and_list_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    // Noise: zstd stores it in raw blocks, where a flipped bit decodes to a wrong byte.
    let data = noise(3, 300_000);
    std::fs::write(src.join("data.bin"), &data).unwrap();
    std::fs::write(src.join("small"), b"small\n").unwrap();
    // An mtime no extraction can produce by itself.
    std::fs::File::options()
        .write(true)
        .open(src.join("data.bin"))
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .unwrap();
    let archive = tmp.path().join("A.tar.zst");
    expect_status(
        mfu(&["tar", "-c", "--zstd", "-k", "64KB", "-f"])
            .arg(&archive)
            .arg("-C")
            .arg(tmp.path())
            .arg("src"),
        0,
    );
    let mut z = std::fs::read(&archive).unwrap();
    let n = z.len();
    assert_eq!(z[n - 5] & 0x80, 0x80, "the seek table must carry checksums");
    expect_status(Command::new("zstd").arg("-t").arg(&archive), 0);
    let frames = frames_of(&z);
    assert!(frames.len() >= 4, "{} frames", frames.len());
    // The middle of frame 2 is the middle of data.bin.
    let (at, len) = frames[2];
    z[at + len / 2] ^= 0x10;
    std::fs::write(&archive, &z).unwrap();
    // zstd itself sees it.
    let t = Command::new("zstd")
        .arg("-t")
        .arg(&archive)
        .output()
        .unwrap();
    assert!(!t.status.success(), "zstd -t must fail on a corrupt frame");
    for np in [1, 2] {
        let x = tmp.path().join(format!("x{np}"));
        std::fs::create_dir(&x).unwrap();
        let out = tar_np(np)
            .args(["-x", "-f"])
            .arg(&archive)
            .arg("-C")
            .arg(&x)
            .output()
            .unwrap();
        let all = all_output(&out);
        assert_eq!(out.status.code(), Some(1), "np {np}: exit 1\n{all}");
        assert!(
            text(&out.stderr).contains("src/data.bin") && text(&out.stderr).contains("checksum"),
            "np {np}: the member and the cause are named\n{all}"
        );
        assert_eq!(
            std::fs::read(x.join("src/small")).unwrap(),
            b"small\n",
            "np {np}: other members are extracted"
        );
        // No file carries wrong bytes with the member's metadata.
        let got = x.join("src/data.bin");
        if let Ok(bytes) = std::fs::read(&got) {
            let src_mtime = std::fs::metadata(src.join("data.bin")).unwrap().mtime();
            assert!(
                bytes == data || std::fs::metadata(&got).unwrap().mtime() != src_mtime,
                "np {np}: data.bin has wrong bytes and the archived mtime"
            );
        }
    }
    // A frame holding headers: listing reads it and fails by name.
    let mut z2 = std::fs::read(&archive).unwrap();
    z2[frames[2].0 + frames[2].1 / 2] ^= 0x10; // undo
    let (at, len) = frames[0];
    z2[at + len - 8] ^= 0x01;
    std::fs::write(&archive, &z2).unwrap();
    let out = tar_np(1).args(["-t", "-f"]).arg(&archive).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "list of a corrupt header frame\n{}",
        all_output(&out)
    );
    assert!(
        text(&out.stderr).contains("zstd frame 0"),
        "{}",
        all_output(&out)
    );
}

// ---------------------------------------------------------------------------------------------
// The index and the seek table at many ranks

/// The archive `bytes` with its index member's header block zeroed (it carries the time of the
/// create), found through the DTAR_IDX footer; panics when there is none.
fn without_index_time(ctx: &str, mut bytes: Vec<u8>) -> Vec<u8> {
    let n = bytes.len();
    assert!(n >= 1024 + 48, "{ctx}: {n} bytes");
    let footer = &bytes[n - 1024 - 48..n - 1024];
    assert_eq!(&footer[40..], b"DTAR_IDX", "{ctx}: no DTAR_IDX footer");
    let entries_end = u64::from_be_bytes(footer[8..16].try_into().unwrap()) as usize;
    bytes[entries_end..entries_end + 512].fill(0);
    bytes
}

/// `-z` places every rank's piece of the index and of the seek table itself (no rank gathers
/// the others' offsets or frame sizes): at 1, 2, 4 and 16 ranks the plain archive is the same
/// bytes, the `-z` archive decompresses (with zstd, and frame by frame through its seek table)
/// to those bytes, the index member lists every entry, and mfu-rs extracts the `-z` archive
/// through its index to the source tree.
#[test]
fn the_index_and_the_seek_table_are_the_same_at_1_2_4_and_16_ranks() {
    use rustix::fd::AsFd;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    // 300 entries over a few directories, sizes from 0 to ~200 KiB: many 64 KiB frames.
    for i in 0..260u64 {
        let dir = src.join(format!("d{}", i % 7));
        std::fs::create_dir_all(&dir).unwrap();
        let len = (i * i * 37) % 200_000 * (i % 3);
        std::fs::write(dir.join(format!("f{i:03}")), noise(i, len as usize)).unwrap();
    }
    std::os::unix::fs::symlink("d0/f000", src.join("link")).unwrap();
    let mut reference: Option<Vec<u8>> = None;
    for np in [1, 2, 4, 16] {
        let ctx = format!("np {np}");
        let out_dir = tmp.path().join(format!("out{np}"));
        std::fs::create_dir(&out_dir).unwrap();
        let plain = out_dir.join("A.tar");
        let zst = out_dir.join("A.tar.zst");
        for (archive, z) in [(&plain, false), (&zst, true)] {
            let mut c = tar_np(np);
            c.arg("-c");
            if z {
                c.arg("--zstd");
            }
            c.args(["-k", "64KB", "-f"])
                .arg(archive)
                .arg("-C")
                .arg(tmp.path())
                .arg("src");
            expect_status(&mut c, 0);
        }
        let plain_bytes = std::fs::read(&plain).unwrap();
        let masked = without_index_time(&ctx, plain_bytes.clone());
        match &reference {
            None => reference = Some(masked.clone()),
            Some(r) => assert!(*r == masked, "{ctx}: the plain archive differs from np 1's"),
        }
        // GNU tar reads the plain archive: every entry and the index member.
        let t = gnu_tar().arg("-tf").arg(&plain).output().unwrap();
        assert!(t.status.success(), "{ctx}: GNU tar -t\n{}", all_output(&t));
        assert_eq!(
            text(&t.stdout).lines().count(),
            1 + 7 + 260 + 1 + 1,
            "{ctx}"
        );
        // zstd decodes the whole stream to a tar archive like the plain one.
        let d = Command::new("zstd").arg("-dc").arg(&zst).output().unwrap();
        assert!(d.status.success(), "{ctx}: zstd -dc");
        assert!(
            without_index_time(&ctx, d.stdout.clone()) == masked,
            "{ctx}: the -z archive does not decompress to the plain archive"
        );
        // The seek table covers the file and the stream, and every frame decodes to its part.
        let file = std::fs::File::open(&zst).unwrap();
        let len = file.metadata().unwrap().len();
        let table = mfu::unstable::codec::SeekTable::read(file.as_fd(), len)
            .unwrap()
            .unwrap_or_else(|| panic!("{ctx}: no seek table"));
        assert_eq!(table.decompressed_len(), d.stdout.len() as u64, "{ctx}");
        assert!(
            table.frames.len() > np,
            "{ctx}: {} frames",
            table.frames.len()
        );
        let mut at = 0u64;
        for (i, f) in table.frames.iter().enumerate() {
            assert_eq!(f.c_at, at, "{ctx}: frame {i} is not where the table says");
            at += u64::from(f.c_len);
            let part = table.decompress(file.as_fd(), i).unwrap();
            assert!(
                part[..] == d.stdout[f.d_at as usize..(f.d_at + u64::from(f.d_len)) as usize],
                "{ctx}: frame {i}"
            );
        }
        // The index member lists every entry's offset, in order.
        let n = d.stdout.len();
        let footer = &d.stdout[n - 1024 - 48..n - 1024];
        assert_eq!(
            u64::from_be_bytes(footer[0..8].try_into().unwrap()),
            269,
            "{ctx}"
        );
        // Extraction through the index gives the source tree.
        let x = tmp.path().join(format!("x{np}"));
        std::fs::create_dir(&x).unwrap();
        let out = expect_status(
            tar_np(np)
                .arg("-x")
                .arg("-v")
                .arg("-f")
                .arg(&zst)
                .arg("-C")
                .arg(&x),
            0,
        );
        let diff = Command::new("diff")
            .arg("-r")
            .arg("--no-dereference")
            .arg(&src)
            .arg(x.join("src"))
            .output()
            .unwrap();
        assert!(
            diff.status.success(),
            "{ctx}: extracted tree differs\n{}\n{}",
            text(&diff.stdout),
            all_output(&out)
        );
    }
}

/// A file rewritten in place while `tar -c` reads it, between two of its chunks (same size, its
/// mtime set back, as a hostile user can): named on stderr as GNU tar names it ("file changed
/// as we read it"), exit 1, and the archive is still written (as GNU tar). Uncompressed and
/// with -z, at one rank and under mpirun. The rewrite happens at a test seam right after the
/// first chunk is read, so the test does not depend on timing.
#[test]
fn a_file_rewritten_while_tar_c_reads_it_is_named_and_the_create_exits_1() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let src = w.join("tree");
    std::fs::create_dir(&src).unwrap();
    let big = src.join("big file |x");
    let (old, new) = (noise(7, 3 << 20), noise(8, 3 << 20));
    let fresh = w.join("new-bytes");
    std::fs::write(&fresh, &new).unwrap();
    std::fs::write(src.join("small"), b"unchanged\n").unwrap();
    let set_back = |p: &Path| {
        let st = Command::new("touch")
            .arg("-d")
            .arg("@1600000000")
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success());
    };
    let hook = format!(
        "cat '{}' > '{}' && touch -d @1600000000 '{}'",
        fresh.display(),
        big.display(),
        big.display()
    );
    for compress in [false, true] {
        for mpi in [false, true] {
            let ctx = format!("--zstd {compress}, mpirun {mpi}");
            std::fs::write(&big, &old).unwrap();
            set_back(&big);
            let archive = w.join(if compress { "a.tar.zst" } else { "a.tar" });
            let _ = std::fs::remove_file(&archive);
            let tool = if mpi {
                Tool::new("tar").mpi(2)
            } else {
                Tool::new("tar").ranks(1)
            };
            let run = tool
                .arg("-c")
                .args(if compress { &["--zstd"][..] } else { &[][..] })
                .arg("-k")
                .arg("1M")
                .arg("-f")
                .arg(&archive)
                .arg("-C")
                .arg(w)
                .arg("tree")
                .env("MFU_RS_TEST_HOOK_AFTER_FIRST_CHUNK", &hook)
                .expect(1);
            assert_eq!(std::fs::read(&big).unwrap(), new, "{ctx}: the hook ran");
            let mtime = std::fs::metadata(&big).unwrap().mtime();
            assert_eq!(mtime, 1_600_000_000, "{ctx}: the mtime was set back");
            let err = run.stderr_str();
            assert!(
                err.lines().any(|l| l.starts_with("mfu-rs tar: ")
                    && l.contains("tree/big file |x")
                    && l.contains("file changed as we read it")),
                "{ctx}: the file is named:\n{err}"
            );
            assert!(
                !err.contains("tree/small"),
                "{ctx}: only the file that changed:\n{err}"
            );
            assert!(
                archive.exists(),
                "{ctx}: the archive is written, as GNU tar"
            );
        }
    }
}

/// An archive in the tree it archives is never archived (an earlier archive there is the file
/// the new one replaces), as GNU tar says "file is the archive; not dumped": met under its
/// own path, and through a symlink to the tree. Exit 0; the rest is archived.
#[test]
fn an_archive_inside_the_tree_it_archives_is_not_dumped_even_through_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    std::fs::create_dir(&t).unwrap();
    std::fs::write(t.join("f"), noise(3, 5000)).unwrap();
    std::os::unix::fs::symlink(&t, tmp.path().join("link")).unwrap();
    for (np, archive) in [(1, "t/a.tar"), (2, "link/a.tar"), (1, "link/a.tar")] {
        // An earlier archive at that place (what a rerun meets).
        std::fs::write(t.join("a.tar"), b"an earlier archive").unwrap();
        let out = tar_np(np)
            .args(["-cf", archive, "t"])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        let all = all_output(&out);
        assert_eq!(out.status.code(), Some(0), "{archive} at np {np}\n{all}");
        assert!(
            text(&out.stderr).contains("t/a.tar: file is the archive; not dumped"),
            "{archive} at np {np}\n{all}"
        );
        let listed = gnu_tar()
            .args(["-tf", "t/a.tar"])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(listed.status.success(), "{}", all_output(&listed));
        let names = text(&listed.stdout);
        assert!(names.contains("t/f"), "{archive} at np {np}: {names}");
        assert!(
            !names.lines().any(|l| l == "t/a.tar"),
            "{archive} at np {np}: {names}"
        );
    }
}

/// A wrapper that runs mfu-rs under `strace -f -y`, tracing the syncs and renames into `log`
/// (the descriptors shown with their paths).
fn traced_program(dir: &Path, log: &Path) -> PathBuf {
    let script = dir.join("traced.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec strace -f -y -qq -o '{}' -e trace=fsync,fdatasync,rename,renameat,renameat2 '{}' \"$@\"\n",
            log.display(),
            bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// Defect: the archive was renamed into place with no sync at all, so a crash soon after a
/// create that said it succeeded could leave an archive that reads short (or empty) under
/// its name. Now every rank syncs what it wrote into the temporary before rank 0 renames it,
/// and the directory is synced after the rename: the temporary beside the archive
/// (`--no-checkpoint`) and the partial archive in the checkpoint (renamed from the
/// checkpoint's directory into the archive's) alike. Needs strace.
#[test]
fn the_archive_is_synced_before_its_rename_and_its_directory_after() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), noise(3, 300 << 10)).unwrap();
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    for (checkpoint, zstd) in [(false, false), (false, true), (true, false), (true, true)] {
        let what = format!("checkpoint {checkpoint}, zstd {zstd}");
        let log = tmp.path().join(format!("strace-{checkpoint}-{zstd}.log"));
        let mut tool = Tool::new("tar")
            .ranks(2)
            .program(traced_program(tmp.path(), &log))
            .arg("-c");
        if zstd {
            tool = tool.arg("--zstd");
        }
        // How strace -y shows a descriptor of the temporary, and its name in the rename.
        let (temp, name) = if checkpoint {
            (
                "/.A.tar.mfu-checkpoint/partial-archive>",
                "\"partial-archive\"",
            )
        } else {
            tool = tool.arg("--no-checkpoint");
            (".mfu-tmp>", ".mfu-tmp\"")
        };
        tool.arg("-f")
            .arg(out_dir.join("A.tar"))
            .arg("-C")
            .arg(tmp.path())
            .arg("src")
            .run()
            .assert_status(0);
        let calls = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = calls.lines().collect();
        let renamed = lines
            .iter()
            .position(|l| l.contains("rename") && l.contains("A.tar\""))
            .unwrap_or_else(|| panic!("{what}: no rename to A.tar in\n{calls}"));
        assert!(
            lines[renamed].contains(name),
            "{what}: the rename is of the temporary:\n{calls}"
        );
        // Each rank its own fsync of its descriptor (the checkpoint's flushes are fdatasyncs).
        let syncers: std::collections::BTreeSet<&str> = lines[..renamed]
            .iter()
            .filter(|l| l.contains("fsync(") && l.contains(temp))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(
            syncers.len() >= 2,
            "{what}: the temporary archive synced by both ranks before its rename:\n{calls}"
        );
        let dir = format!("<{}>)", out_dir.display());
        assert!(
            lines[renamed..]
                .iter()
                .any(|l| l.contains("fsync(") && l.contains(&dir)),
            "{what}: the directory synced after the rename:\n{calls}"
        );
        assert_eq!(entries(&out_dir), ["A.tar"]);
        std::fs::remove_file(out_dir.join("A.tar")).unwrap();
    }
}
