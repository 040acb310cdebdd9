//! Checksum manifests (`--manifest`) of cp, sync, tar -c and tar -x: accepted by `b3sum
//! --check` and `sha256sum -c`, byte-identical however many ranks wrote them, right for a file
//! copied in many chunks and for awkward names; `cmp --manifest` finds what changed.

use mfu_tests::tar_tools::{text, tool};
use mfu_tests::{noise, Tool};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

/// Names b3sum and sha256sum both check (b3sum refuses names that are not UTF-8).
const NAMES: &[&[u8]] = &[
    b"plain",
    b"with space",
    b"new\nline",
    b"back\\slash",
    b"carriage\rreturn",
    b"d/e/deep",
];

/// A tree under `root`: the awkward names, an empty file, a file of many 64 KiB chunks with
/// an unaligned tail, a hard link; with `raw`, a name that is not UTF-8.
fn make_tree(root: &Path, raw: bool) {
    std::fs::create_dir_all(root.join("d/e")).unwrap();
    for (i, name) in NAMES.iter().enumerate() {
        let p = root.join(OsStr::from_bytes(name));
        std::fs::write(&p, noise(i as u64 + 1, 100 + i * 3000)).unwrap();
    }
    std::fs::write(root.join("empty"), b"").unwrap();
    std::fs::write(root.join("big"), noise(99, (3 << 20) + 1234)).unwrap();
    std::fs::hard_link(root.join("plain"), root.join("plain.link")).unwrap();
    if raw {
        std::fs::write(root.join(OsStr::from_bytes(b"raw\xff\xfe")), b"bytes").unwrap();
    }
}

/// Run `checker` (`b3sum --check` or `sha256sum -c`) on `manifest` in `dir`: it must pass
/// every line and list `lines` files.
fn check_with(checker: &str, flag: &str, manifest: &Path, dir: &Path, lines: usize) {
    let out = tool(checker)
        .arg(flag)
        .arg(manifest)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{checker} {flag} failed:\n{}\n{}\nmanifest:\n{}",
        text(&out.stdout),
        text(&out.stderr),
        text(&std::fs::read(manifest).unwrap())
    );
    let written = std::fs::read(manifest).unwrap();
    assert_eq!(written.iter().filter(|&&b| b == b'\n').count(), lines);
}

fn cp(launch: impl Fn(Tool) -> Tool, src: &Path, dst: &Path, manifest: &Path, hash: &str) {
    launch(Tool::new("cp"))
        .args([
            "-p",
            "--chunksize",
            "64K",
            "--manifest-hash",
            hash,
            "--manifest",
        ])
        .arg(manifest)
        .arg(src)
        .arg(dst)
        .expect(0);
}

/// Regular files of [`make_tree`]: the names, empty, big, the hard link.
const FILES: usize = NAMES.len() + 3;

#[test]
fn cp_manifests_pass_b3sum_and_sha256sum_and_are_the_same_at_any_rank_count() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    make_tree(&src, false);
    let mut first: Option<Vec<u8>> = None;
    let launches: [(&str, &dyn Fn(Tool) -> Tool); 4] = [
        ("1", &|t| t),
        ("ranks 2", &|t| t.ranks(2)),
        ("ranks 4", &|t| t.ranks(4)),
        ("mpirun 2", &|t| t.mpi(2)),
    ];
    for (what, launch) in launches {
        let dst = tmp.path().join(format!("b3 {what}"));
        let manifest = tmp.path().join(format!("{what}.b3"));
        cp(launch, &src, &dst, &manifest, "blake3");
        check_with("b3sum", "--check", &manifest, &dst, FILES);
        let bytes = std::fs::read(&manifest).unwrap();
        match &first {
            None => first = Some(bytes),
            Some(f) => assert!(*f == bytes, "{what}: another manifest than at 1 rank"),
        }
    }
    // SHA-256: the big file, copied in 49 chunks over 4 ranks, is hashed from its source.
    for (what, launch) in [
        ("1", &(|t| t) as &dyn Fn(Tool) -> Tool),
        ("4", &|t: Tool| t.ranks(4)),
    ] {
        let dst = tmp.path().join(format!("sha {what}"));
        let manifest = tmp.path().join(format!("{what}.sha256"));
        cp(launch, &src, &dst, &manifest, "sha256");
        check_with("sha256sum", "-c", &manifest, &dst, FILES);
    }
    // Sorted by path, as `sort` in the C locale would (escaped lines by their name).
    let m = first.unwrap();
    let names: Vec<&[u8]> = m
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| &l[l.iter().position(|&b| b == b' ').unwrap() + 2..])
        .collect();
    assert!(names.contains(&&b"new\\nline"[..]), "{}", text(&m));
    assert!(names.contains(&&b"big"[..]), "{}", text(&m));
}

#[test]
fn sync_lists_what_it_copied_or_with_manifest_all_the_whole_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    make_tree(&src, false);
    let dst = tmp.path().join("dst");
    let all = tmp.path().join("all.b3");
    Tool::new("sync")
        .ranks(2)
        .args(["--chunksize", "64K", "--manifest"])
        .arg(&all)
        .arg(&src)
        .arg(&dst)
        .expect(0);
    check_with("b3sum", "--check", &all, &dst, FILES);
    // One file changes: a plain --manifest lists it alone; --manifest-all every file (those
    // left as they were read from SRC).
    std::fs::write(src.join("d/e/deep"), b"changed").unwrap();
    let changed = tmp.path().join("changed.b3");
    Tool::new("sync")
        .ranks(2)
        .arg("--manifest")
        .arg(&changed)
        .arg(&src)
        .arg(&dst)
        .expect(0);
    check_with("b3sum", "--check", &changed, &dst, 1);
    assert!(std::fs::read(&changed).unwrap().ends_with(b"  d/e/deep\n"));
    Tool::new("sync")
        .ranks(4)
        .args(["--manifest-all", "--manifest-hash", "sha256", "--manifest"])
        .arg(&all)
        .arg(&src)
        .arg(&dst)
        .expect(0);
    check_with("sha256sum", "-c", &all, &dst, FILES);
}

#[test]
fn tar_manifests_name_members_as_stored_and_match_at_any_rank_count() {
    let tmp = tempfile::tempdir().unwrap();
    make_tree(&tmp.path().join("src"), false);
    let mut made: Vec<Vec<u8>> = Vec::new();
    for (np, z) in [(1usize, false), (4, false), (2, true)] {
        let archive = tmp.path().join(format!("a{np}{z}.tar"));
        let created = tmp.path().join(format!("c{np}{z}.b3"));
        let mut create = Tool::new("tar")
            .ranks(np)
            .args(["-c", "-k", "64K", "--manifest"])
            .arg(&created)
            .arg("-f")
            .arg(&archive);
        if z {
            create = create.arg("--zstd");
        }
        create.arg("src").current_dir(tmp.path()).expect(0);
        // Paths as stored: `src/...`, checked from the directory the archive was made in.
        check_with("b3sum", "--check", &created, tmp.path(), FILES);
        let out = tmp.path().join(format!("x{np}{z}"));
        std::fs::create_dir(&out).unwrap();
        let extracted = tmp.path().join(format!("x{np}{z}.b3"));
        Tool::new("tar")
            .ranks(np)
            .args(["-x", "-k", "64K", "--manifest"])
            .arg(&extracted)
            .arg("-f")
            .arg(&archive)
            .arg("-C")
            .arg(&out)
            .expect(0);
        check_with("b3sum", "--check", &extracted, &out, FILES);
        made.push(std::fs::read(&created).unwrap());
    }
    assert!(
        made.windows(2).all(|w| w[0] == w[1]),
        "tar -c manifests differ by rank count"
    );
}

#[test]
fn names_that_are_not_utf8_are_written_raw_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    make_tree(&src, true);
    let dst = tmp.path().join("dst");
    let manifest = tmp.path().join("m.sha256");
    cp(|t| t.ranks(2), &src, &dst, &manifest, "sha256");
    check_with("sha256sum", "-c", &manifest, &dst, FILES + 1);
    assert!(std::fs::read(&manifest)
        .unwrap()
        .windows(6)
        .any(|w| w == b"raw\xff\xfe\n"));
    let b3 = tmp.path().join("m.b3");
    cp(
        |t| t.ranks(2),
        &src,
        &tmp.path().join("dst2"),
        &b3,
        "blake3",
    );
    // b3sum refuses such names; mfu-rs checks them (and finds the hash by itself).
    for m in [&manifest, &b3] {
        Tool::new("cmp")
            .ranks(2)
            .arg("--manifest")
            .arg(m)
            .arg(if m == &b3 {
                tmp.path().join("dst2")
            } else {
                dst.clone()
            })
            .expect(0)
            .stdout_contains(&format!("Checked {} files", FILES + 1));
    }
}

#[test]
fn cmp_manifest_names_every_changed_and_missing_file() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    make_tree(&src, false);
    let dst = tmp.path().join("dst");
    let manifest = tmp.path().join("m.b3");
    cp(|t| t, &src, &dst, &manifest, "blake3");
    Tool::new("cmp")
        .ranks(4)
        .args(["--manifest-hash", "blake3", "--manifest"])
        .arg(&manifest)
        .arg(&dst)
        .expect(0)
        .stdout_contains("the tree matches the manifest");
    // A byte changed in the big file, a file removed.
    let mut big = std::fs::read(dst.join("big")).unwrap();
    big[2 << 20] ^= 1;
    std::fs::write(dst.join("big"), big).unwrap();
    std::fs::remove_file(dst.join("with space")).unwrap();
    let run = Tool::new("cmp")
        .ranks(4)
        .arg("--manifest")
        .arg(&manifest)
        .arg(&dst)
        .expect(1);
    run.stderr_contains("big: FAILED");
    run.stderr_contains("with space: missing");
    run.stdout_contains("1 differ, 1 missing");
    // The same verdict as b3sum's.
    let b3 = Command::new("b3sum")
        .arg("--check")
        .arg(&manifest)
        .current_dir(&dst)
        .output()
        .unwrap();
    assert!(!b3.status.success());
}

/// An archive in one compressed stream (`tar -czf`) is read front to back, which neither hashes
/// nor reads back what it writes: `--manifest` and `--verify` are refused before anything is
/// written (exit 2, the archive named), never silently not done.
#[test]
fn checks_on_an_archive_in_one_compressed_stream_are_refused_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    make_tree(&t.join("src"), false);
    let archive = t.join("a.tar.gz");
    let made = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(t)
        .arg("src")
        .status()
        .unwrap();
    assert!(made.success());
    for check in [&["--manifest", "m.b3"][..], &["--verify"][..]] {
        let out_dir = t.join("out");
        let _ = std::fs::remove_dir_all(&out_dir);
        std::fs::create_dir(&out_dir).unwrap();
        let out = Tool::new("tar")
            .arg("-x")
            .arg("-f")
            .arg(&archive)
            .arg("-C")
            .arg(&out_dir)
            .args(check)
            .current_dir(t)
            .run();
        assert_eq!(out.code(), Some(2), "{check:?}: {}", out.stderr_str());
        assert!(
            out.stderr_str().contains("a.tar.gz") && out.stderr_str().contains("not supported"),
            "{check:?}: {}",
            out.stderr_str()
        );
        assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 0, "{check:?}");
        assert!(!t.join("m.b3").exists());
    }
}

/// Start `cmd`; its output once it ends, or `None` when it still runs after `secs` seconds
/// (then it is killed): a check that blocks or reads forever must fail the test, not hang it.
fn output_within(cmd: &mut Command, secs: u64) -> Option<std::process::Output> {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() >= secs {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Some(child.wait_with_output().unwrap())
}

#[test]
fn cmp_manifest_with_no_checksum_line_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("f"), b"x").unwrap();
    for (name, body) in [
        ("empty", &b""[..]),
        ("garbage", b"not a manifest\n\nat all\n"),
    ] {
        let manifest = tmp.path().join(name);
        std::fs::write(&manifest, body).unwrap();
        for tool in [Tool::new("cmp"), Tool::new("cmp").ranks(2)] {
            let run = tool.arg("--manifest").arg(&manifest).arg(&dir).expect(1);
            run.stderr_contains("no properly formatted checksum lines");
            assert!(
                !run.stdout_str().contains("matches"),
                "{name}: {}",
                run.stdout_str()
            );
        }
    }
}

#[test]
fn cmp_manifest_reads_only_regular_files_beneath_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for f in ["swapped", "zero", "fifo", "d/in"] {
        std::fs::write(src.join(f), b"same content\n").unwrap();
    }
    let dst = tmp.path().join("dst");
    let manifest = tmp.path().join("m.b3");
    cp(|t| t, &src, &dst, &manifest, "blake3");
    // Outside the tree, files equal to the listed ones.
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("in"), b"same content\n").unwrap();
    std::fs::write(outside.join("swapped"), b"same content\n").unwrap();
    let swap = |rel: &str, to: &Path| {
        let p = dst.join(rel);
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
        std::os::unix::fs::symlink(to, &p).unwrap();
    };
    swap("swapped", &outside.join("swapped"));
    swap("zero", Path::new("/dev/zero"));
    swap("d", &outside);
    std::fs::remove_file(dst.join("fifo")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dst.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    for tool in [Tool::new("cmp"), Tool::new("cmp").ranks(2)] {
        let out = output_within(
            &mut tool.arg("--manifest").arg(&manifest).arg(&dst).command(),
            30,
        )
        .expect("cmp --manifest still ran after 30 s (it read /dev/zero or waited on the FIFO)");
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        for (rel, what) in [
            ("swapped", "a symlink (not followed)"),
            ("zero", "a symlink (not followed)"),
            ("fifo", "a FIFO"),
            ("d/in", "a directory on the way is a symlink"),
        ] {
            assert!(
                stderr.contains(&format!("{rel}: FAILED: {what}")),
                "{rel}:\n{stderr}"
            );
        }
        assert!(stdout.contains("0 match, 4 differ"), "{stdout}");
    }
}

#[test]
fn cmp_manifest_stops_on_the_first_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    std::fs::create_dir(&dir).unwrap();
    // A sparse file far too big to hash in the test's time.
    std::fs::File::create(dir.join("huge"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let manifest = tmp.path().join("m.b3");
    std::fs::write(&manifest, format!("{}  huge\n", "0".repeat(64))).unwrap();
    let mut cmd = Tool::new("cmp")
        .args(["--manifest-hash", "blake3", "--manifest"])
        .arg(&manifest)
        .arg(&dir)
        .command();
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() >= 20 {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("cmp --manifest still read 20 s after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("interrupted by a signal: listed files not checked: 1"),
        "{stderr}"
    );
    assert!(!stdout.contains("matches"), "{stdout}");
}

#[test]
fn cmp_names_odd_files_on_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    make_tree(&src, false);
    let dst = tmp.path().join("dst");
    let manifest = tmp.path().join("m.b3");
    cp(|t| t, &src, &dst, &manifest, "blake3");
    std::fs::write(dst.join("new\nline"), b"changed").unwrap();
    std::fs::remove_file(dst.join("carriage\rreturn")).unwrap();
    let run = Tool::new("cmp")
        .arg("--manifest")
        .arg(&manifest)
        .arg(&dst)
        .expect(1);
    let err = run.stderr_str();
    assert!(err.contains("mfu-rs cmp: new\\nline: FAILED"), "{err}");
    assert!(
        err.contains("mfu-rs cmp: carriage\\rreturn: missing"),
        "{err}"
    );
    for line in err.lines() {
        assert!(
            line.starts_with("mfu-rs cmp: ") || line.is_empty(),
            "a line cut by a name: {line:?}\n{err}"
        );
    }
}

#[test]
fn cmp_manifest_json_names_the_manifest_not_a_dest() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    make_tree(&src, false);
    let dst = tmp.path().join("dst");
    let manifest = tmp.path().join("m.b3");
    cp(|t| t, &src, &dst, &manifest, "blake3");
    let run = Tool::new("cmp")
        .args(["--json", "--manifest"])
        .arg(&manifest)
        .arg(&dst)
        .expect(0);
    let json: serde_json::Value = serde_json::from_str(&run.stdout_str()).unwrap();
    assert!(json.get("dest").is_none(), "{json}");
    assert_eq!(json["src"], dst.display().to_string());
    assert_eq!(json["manifest"]["manifest"], manifest.display().to_string());
}

/// The digest of `path`'s bytes as `hash` (`blake3`, `sha256`), in hex.
fn digest_of(hash: &str, path: &Path) -> String {
    use mfu::unstable::engine::digest::{hex, HashKind};
    let kind = if hash == "sha256" {
        HashKind::Sha256
    } else {
        HashKind::Blake3
    };
    hex(&kind.of(&std::fs::read(path).unwrap()))
}

/// The checker of `hash`'s manifests: (program, its check flag).
fn checker(hash: &str) -> (&'static str, &'static str) {
    if hash == "sha256" {
        ("sha256sum", "-c")
    } else {
        ("b3sum", "--check")
    }
}

/// A copy damaged after its write (the test seam flips a byte of each range of `big` once
/// written) is not certified: the manifest holds the digest of the source's bytes as they
/// were read, so the checker finds the damage, SHA-256 (a file of 49 chunks, over 1 and 3
/// ranks and under mpirun) as BLAKE3.
#[test]
fn a_copy_damaged_after_its_write_fails_the_check_of_its_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    make_tree(&src, false);
    // Sources written in the last seconds are read again after their copy and compared with
    // it (engine::racy), which would name the damage as a change of the source: the damage
    // this test makes must be one only the manifest's check can see.
    mfu_tests::wait_until_settled(&src);
    for hash in ["sha256", "blake3"] {
        let launches: [(&str, &dyn Fn(Tool) -> Tool); 3] = [
            ("1", &|t| t),
            ("ranks 3", &|t| t.ranks(3)),
            ("mpirun 2", &|t| t.mpi(2)),
        ];
        for (ranks, launch) in launches {
            let dst = tmp.path().join(format!("{hash} {ranks}"));
            let manifest = tmp.path().join(format!("{hash} {ranks}.sum"));
            launch(Tool::new("cp"))
                .env("MFU_RS_TEST_CORRUPT_BEFORE_VERIFY", "big")
                .args(["--chunksize", "64K", "--manifest-hash", hash, "--manifest"])
                .arg(&manifest)
                .arg(&src)
                .arg(&dst)
                .expect(0);
            assert!(
                std::fs::read(src.join("big")).unwrap() != std::fs::read(dst.join("big")).unwrap(),
                "{hash} {ranks}: the seam did not damage the copy"
            );
            let text_of = text(&std::fs::read(&manifest).unwrap());
            let line = format!("{}  big\n", digest_of(hash, &src.join("big")));
            assert!(
                text_of.contains(&line),
                "{hash} {ranks}: no {line:?} in\n{text_of}"
            );
            let (program, flag) = checker(hash);
            let out = tool(program)
                .arg(flag)
                .arg(&manifest)
                .current_dir(&dst)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{hash} {ranks}: the damage passed");
            assert!(
                text(&out.stdout).contains("big: FAILED"),
                "{}",
                text(&out.stdout)
            );
        }
    }
}

/// A copy of `src/` into `dst` (`big` journaled: any file of 1 byte or more keeps one; 65
/// chunks) killed by the test seam after its second chunk mark, leaving `big` partial.
fn killed_copy(src: &Path, dst: &Path) {
    let out = Tool::new("cp")
        .env("MFU_RS_TEST_JOURNAL_MIN_BYTES", "1")
        .env("MFU_RS_TEST_KILL_AFTER_MARKS", "2")
        .args(["--chunksize", "256K"])
        .arg(src.join(""))
        .arg(dst)
        .run();
    assert_ne!(out.code(), Some(0), "the copy was not killed");
    assert!(dst.join(".big.mfu-partial").exists(), "no journal left");
}

/// After a resume (cp run again, sync, sync --manifest-all), every file copied is in the
/// manifest, the resumed one included, with the digest of the source's whole bytes (its
/// journaled chunks were not read in that run: they are read from the source for it).
#[test]
fn after_a_resume_every_file_copied_is_in_the_manifest() {
    let shm = tempfile::Builder::new()
        .prefix("mfu-rs-manifest-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let src = shm.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("big"), noise(7, (16 << 20) + 777)).unwrap();
    std::fs::write(src.join("small"), noise(8, 1000)).unwrap();
    let runs: [(&str, &[&str]); 3] = [("cp", &[]), ("sync", &[]), ("sync", &["--manifest-all"])];
    for hash in ["blake3", "sha256"] {
        for (n, (what, extra)) in runs.iter().enumerate() {
            let dst = shm.path().join(format!("{hash} {n}"));
            killed_copy(&src, &dst);
            let manifest = shm.path().join(format!("{hash} {n}.sum"));
            let out = Tool::new(what)
                .env("MFU_RS_TEST_JOURNAL_MIN_BYTES", "1")
                .args(["--json", "--chunksize", "256K", "--manifest-hash", hash])
                .args(*extra)
                .arg("--manifest")
                .arg(&manifest)
                .arg(if *what == "cp" {
                    src.join("")
                } else {
                    src.clone()
                })
                .arg(&dst)
                .expect(0);
            let v: serde_json::Value = serde_json::from_slice(&out.output.stdout).unwrap();
            assert_eq!(v["resumed"], 1, "{hash} {what} {extra:?}: {v}");
            let got = text(&std::fs::read(&manifest).unwrap());
            for name in ["big", "small"] {
                let line = format!("{}  {name}\n", digest_of(hash, &src.join(name)));
                assert!(
                    got.contains(&line),
                    "{hash} {what} {extra:?}: no {line:?} in\n{got}"
                );
            }
            let (program, flag) = checker(hash);
            check_with(program, flag, &manifest, &dst, 2);
        }
    }
}

/// An output that lies inside the tree a run writes is refused before anything is done (exit
/// 2, both paths named): `sync --manifest d/plain s d` renamed its manifest over the file it
/// had just synced. Found through a symlink too; outside the tree, or in a dry run, it is
/// written.
#[test]
fn an_output_inside_the_tree_being_written_is_refused_with_nothing_done() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("s");
    make_tree(&src, false);
    let dst = tmp.path().join("d");
    Tool::new("sync").arg(&src).arg(&dst).expect(0);
    std::fs::write(src.join("plain"), b"changed in SRC").unwrap();
    std::os::unix::fs::symlink(&dst, tmp.path().join("link")).unwrap();
    let before = mfu_tests::listing(&dst);
    let plain = std::fs::read(dst.join("plain")).unwrap();
    let refused = |tool: Tool, output: &str, tree: &str| {
        let out = tool.run().assert_status(2);
        out.stderr_contains(output)
            .stderr_contains(tree)
            .stderr_contains("lies inside");
        assert_eq!(mfu_tests::listing(&dst), before, "{output}: DEST changed");
        assert_eq!(std::fs::read(dst.join("plain")).unwrap(), plain);
    };
    let in_dst = dst.join("plain");
    let via_link = tmp.path().join("link/plain");
    for m in [&in_dst, &via_link] {
        let sync = Tool::new("sync")
            .arg("--manifest")
            .arg(m)
            .arg(&src)
            .arg(&dst);
        refused(sync, &m.display().to_string(), &dst.display().to_string());
        let cp = Tool::new("cp")
            .arg("--manifest")
            .arg(m)
            .arg(src.join(""))
            .arg(&dst);
        refused(cp, &m.display().to_string(), &dst.display().to_string());
    }
    let list = dst.join("new.mfu");
    let sync = Tool::new("sync")
        .arg("-o")
        .arg(format!("EXIST=ONLY_SRC:{}", list.display()))
        .args(["--delete"])
        .arg(&src)
        .arg(&dst);
    refused(
        sync,
        &list.display().to_string(),
        &dst.display().to_string(),
    );
    // tar -x: the manifest inside the target directory.
    let archive = tmp.path().join("a.tar");
    Tool::new("tar")
        .arg("-cf")
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .arg(".")
        .expect(0);
    let tar = Tool::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&dst)
        .arg("--manifest")
        .arg(&via_link);
    refused(
        tar,
        &via_link.display().to_string(),
        &dst.display().to_string(),
    );
    // A dry run writes no tree; outside the tree the manifest is written.
    Tool::new("sync")
        .arg("--dryrun")
        .arg("--manifest")
        .arg(&in_dst)
        .arg(&src)
        .arg(&dst)
        .expect(0);
    assert_eq!(std::fs::read(dst.join("plain")).unwrap(), plain);
    let outside = tmp.path().join("m.b3");
    Tool::new("sync")
        .arg("--manifest")
        .arg(&outside)
        .arg(&src)
        .arg(&dst)
        .expect(0);
    assert_eq!(std::fs::read(dst.join("plain")).unwrap(), b"changed in SRC");
    // plain and its hard link plain.link.
    check_with("b3sum", "--check", &outside, &dst, 2);
}
