//! Resume inside huge files: a copy of a multi-GiB file killed with SIGKILL (by the test seam
//! after K chunks; by the test at a random point under `--ranks 2` and under `mpirun -np 2`),
//! then `sync` copies only the chunks its journal does not record as done (asserted on the
//! bytes it reports), and the result is byte-identical, with the source's size and mtime and
//! no journal left. A source changed since, a destination replaced, hard-linked or missing its
//! journal, and a journal beside an unrelated file are copied whole; a rerun of cp resumes
//! too.
//!
//! The data lives on /dev/shm (tmpfs: the fastest file system here, and it has what the
//! journal needs, nothing more). Costs about 20 s.

use mfu::unstable::engine::copy::journal;
use mfu_tests::{expect_status, Tool};
use rand::{Rng, RngCore, SeedableRng};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// The big file of the kill tests: 2 GiB in 128 chunks of 16 MiB.
const BIG: u64 = 2048 * MIB;
const BIG_CHUNK: u64 = 16 * MIB;
/// The file of the trust tests: 256 MiB in 32 chunks of 8 MiB.
const MID: u64 = 256 * MIB;
const MID_CHUNK: u64 = 8 * MIB;

/// A generator seeded from the clock (the seed is printed, to replay a failure).
fn random() -> rand::rngs::SmallRng {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("random seed {seed}");
    rand::rngs::SmallRng::seed_from_u64(seed)
}

fn shm_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("mfu-rs-resume-")
        .tempdir_in("/dev/shm")
        .expect("a directory in /dev/shm")
}

/// Write `size` bytes to `path`: a random MiB, each copy stamped with its number (so a chunk
/// written at the wrong place, or left out, shows).
fn make_file(path: &Path, size: u64, seed: u64) {
    use std::io::Write;
    let mut block = vec![0u8; MIB as usize];
    rand::rngs::SmallRng::seed_from_u64(seed).fill_bytes(&mut block);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..size / MIB {
        block[..8].copy_from_slice(&i.to_le_bytes());
        f.write_all(&block).unwrap();
    }
    f.flush().unwrap();
}

/// Panics unless `a` and `b` hold the same bytes.
fn assert_same_bytes(a: &Path, b: &Path) {
    use std::io::Read;
    let (mut fa, mut fb) = (
        std::fs::File::open(a).unwrap(),
        std::fs::File::open(b).unwrap(),
    );
    assert_eq!(
        fa.metadata().unwrap().len(),
        fb.metadata().unwrap().len(),
        "{} and {} differ in size",
        a.display(),
        b.display()
    );
    let (mut ba, mut bb) = (vec![0u8; 4 << 20], vec![0u8; 4 << 20]);
    let mut at = 0u64;
    loop {
        let n = fa.read(&mut ba).unwrap();
        if n == 0 {
            return;
        }
        fb.read_exact(&mut bb[..n]).unwrap();
        if ba[..n] != bb[..n] {
            let i = (0..n).find(|&i| ba[i] != bb[i]).unwrap();
            panic!(
                "{} and {} differ at byte {}",
                a.display(),
                b.display(),
                at + i as u64
            );
        }
        at += n as u64;
    }
}

fn journal_of(dst: &Path) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(&journal::path_of(
        dst.as_os_str().as_bytes(),
    )))
}

/// Chunks the journal of `dst` records as done (`None`: no journal).
fn done_chunks(dst: &Path) -> Option<journal::Summary> {
    journal::inspect(journal_of(dst).as_os_str().as_bytes())
        .ok()
        .flatten()
}

/// `mfu-rs sync --json --chunksize CHUNK SRC DST` (one process); its JSON report.
fn sync(src: &Path, dst: &Path, chunk: u64) -> serde_json::Value {
    let out = Tool::new("sync")
        .arg("--json")
        .arg("--chunksize")
        .arg(chunk.to_string())
        .arg(src)
        .arg(dst)
        .run()
        .assert_status(0);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The result of a sync is the source: same bytes, size and mtime, no journal.
fn assert_finished(src: &Path, dst: &Path) {
    assert_same_bytes(src, dst);
    let (s, d) = (src.metadata().unwrap(), dst.metadata().unwrap());
    assert_eq!(
        (s.len(), s.mtime(), s.mtime_nsec()),
        (d.len(), d.mtime(), d.mtime_nsec())
    );
    assert!(
        !journal_of(dst).exists(),
        "the journal of {} is left",
        dst.display()
    );
}

/// After an interrupted copy whose journal records `done` chunks of `chunk` bytes: sync
/// resumes, copying exactly the other chunks, and finishes the file.
fn assert_resumes(src: &Path, dst: &Path, chunk: u64, done: u64) {
    let size = src.metadata().unwrap().len();
    let d = dst.metadata().unwrap();
    let s = src.metadata().unwrap();
    assert_ne!(
        (d.mtime(), d.mtime_nsec()),
        (s.mtime(), s.mtime_nsec()),
        "a partial file carries the source's mtime"
    );
    let v = sync(src, dst, chunk);
    eprintln!(
        "resume: {done} of {} chunks were done; sync wrote {} bytes, kept {}",
        size.div_ceil(chunk),
        v["bytes"],
        v["resumed_bytes"]
    );
    assert_eq!(v["resumed"], 1, "{v}");
    assert_eq!(v["resumed_bytes"], done * chunk, "{v}");
    assert_eq!(v["bytes"], size - done * chunk, "{v}");
    assert_finished(src, dst);
    // Done: nothing more to copy.
    assert_eq!(sync(src, dst, chunk)["bytes"], 0);
}

/// Copy `src` to `dst` with cp at `--chunksize chunk` on `tool` (ranks or mpirun), killed by
/// the test seam right after its `k`-th mark; returns the chunks its journal records.
fn cp_killed_after(tool: Tool, src: &Path, dst: &Path, chunk: u64, k: u64) -> u64 {
    let out = tool
        .env("MFU_RS_TEST_KILL_AFTER_MARKS", k.to_string())
        .arg("--chunksize")
        .arg(chunk.to_string())
        .arg(src)
        .arg(dst)
        .run();
    assert_ne!(out.code(), Some(0), "the copy was not killed");
    let j = done_chunks(dst).expect("a journal beside the partial file");
    assert_eq!(j.chunk_size, chunk);
    assert!(
        j.done >= k && j.done < j.chunks,
        "killed after {k} marks: {j:?}"
    );
    j.done
}

/// Start `tool` copying `src` to `dst`, `kill -9` all of it (its process group, then any rank
/// that left it) once the journal records at least `k` chunks; returns the chunks recorded.
fn cp_kill_9_at(tool: Tool, src: &Path, dst: &Path, chunk: u64, k: u64) -> u64 {
    use std::os::unix::process::CommandExt;
    let mut cmd = tool
        .arg("--chunksize")
        .arg(chunk.to_string())
        .arg(src)
        .arg(dst)
        .command();
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while done_chunks(dst).is_none_or(|j| j.done < k) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the copy ended before {k} chunks were recorded"
        );
        assert!(start.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    let pgid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    child.wait().unwrap();
    let needle = dst.as_os_str().as_bytes();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = mfu_tests::processes_mentioning(needle);
        if left.is_empty() {
            break;
        }
        for pid in &left {
            if let Some(p) = rustix::process::Pid::from_raw(*pid) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        }
        assert!(
            Instant::now() < deadline,
            "ranks {left:?} outlived the kill"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let j = done_chunks(dst).expect("a journal beside the partial file");
    assert!(j.done >= k && j.done < j.chunks, "killed at {k}: {j:?}");
    j.done
}

#[test]
fn kill_9_of_a_copy_then_sync_copies_only_the_missing_chunks() {
    let tmp = shm_dir();
    let (src, dst) = (tmp.path().join("big"), tmp.path().join("copy"));
    make_file(&src, BIG, 1);
    let chunks = BIG / BIG_CHUNK;
    let mut rng = random();
    // Killed by the test seam right after its k-th chunk is recorded.
    let k = rng.random_range(1..=chunks / 2);
    let done = cp_killed_after(Tool::new("cp").ranks(2), &src, &dst, BIG_CHUNK, k);
    assert_resumes(&src, &dst, BIG_CHUNK, done);
    // Killed by the test, at a random point.
    for (name, tool) in [
        ("--ranks 2", Tool::new("cp").ranks(2)),
        ("mpirun -np 2", Tool::new("cp").mpi(2)),
    ] {
        std::fs::remove_file(&dst).unwrap();
        let k = rng.random_range(2..=chunks / 2);
        let done = cp_kill_9_at(tool, &src, &dst, BIG_CHUNK, k);
        eprintln!("{name}: killed once {k} chunks were recorded: {done} recorded");
        assert_resumes(&src, &dst, BIG_CHUNK, done);
    }
}

/// A source tree `src/mid` of [`MID`] bytes and a copy to `dst/mid` killed after `k` marks.
fn killed_mid_copy(tmp: &Path, k: u64) -> (PathBuf, PathBuf, u64) {
    let (src, dst) = (tmp.join("src"), tmp.join("dst"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    if !src.join("mid").exists() {
        make_file(&src.join("mid"), MID, 3);
    }
    let _ = std::fs::remove_file(dst.join("mid"));
    let done = cp_killed_after(
        Tool::new("cp").ranks(2),
        &src.join("mid"),
        &dst.join("mid"),
        MID_CHUNK,
        k,
    );
    (src, dst, done)
}

/// A sync of `src` to `dst` copies `mid` whole and finishes it.
fn assert_copied_whole(src: &Path, dst: &Path, what: &str) {
    let v = sync(src, dst, MID_CHUNK);
    assert_eq!(v["resumed"], 0, "{what}: {v}");
    assert_eq!(v["bytes"], MID, "{what}: {v}");
    assert_finished(&src.join("mid"), &dst.join("mid"));
}

#[test]
fn what_the_journal_does_not_vouch_for_is_copied_whole() {
    let tmp = shm_dir();
    let t = tmp.path();

    // A rerun of cp onto the same destination resumes too.
    let (src, dst, done) = killed_mid_copy(t, 10);
    let out = Tool::new("cp")
        .arg("--json")
        .arg("-p")
        .arg("--chunksize")
        .arg(MID_CHUNK.to_string())
        .arg(src.join("mid"))
        .arg(dst.join("mid"))
        .run()
        .assert_status(0);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["resumed"], 1, "{v}");
    assert_eq!(v["bytes"], MID - done * MID_CHUNK, "{v}");
    assert_finished(&src.join("mid"), &dst.join("mid"));

    // A source changed since the copy: whole (chunk 0, done before, changed).
    let (src, dst, _) = killed_mid_copy(t, 10);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(src.join("mid"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"changed", 100).unwrap();
    drop(f);
    assert_copied_whole(&src, &dst, "changed source");

    // A partial file whose mtime equals the source's (timestamps come from a coarse clock: a
    // source written in the tick of the copy's last write has the same one): its journal still
    // says it is incomplete, and it is resumed, not taken for synced.
    let (src, dst, done) = killed_mid_copy(t, 10);
    expect_status(
        std::process::Command::new("touch")
            .arg("-r")
            .arg(src.join("mid"))
            .arg(dst.join("mid")),
        0,
    );
    let v = sync(&src, &dst, MID_CHUNK);
    assert_eq!(v["resumed"], 1, "same mtime: {v}");
    assert_eq!(v["bytes"], MID - done * MID_CHUNK, "same mtime: {v}");
    assert_finished(&src.join("mid"), &dst.join("mid"));

    // No journal (as before journals): whole.
    let (src, dst, _) = killed_mid_copy(t, 10);
    std::fs::remove_file(journal_of(&dst.join("mid"))).unwrap();
    assert_copied_whole(&src, &dst, "journal removed");

    // The destination replaced by another file (the journal names the old inode): whole.
    let (src, dst, _) = killed_mid_copy(t, 10);
    let partial = dst.join("mid");
    std::fs::copy(&partial, t.join("elsewhere")).unwrap();
    std::fs::rename(t.join("elsewhere"), &partial).unwrap();
    assert_copied_whole(&src, &dst, "destination replaced");

    // The destination hard-linked elsewhere: whole, into a new inode (the other name keeps
    // the partial data).
    let (src, dst, _) = killed_mid_copy(t, 10);
    let link = t.join("link");
    std::fs::hard_link(dst.join("mid"), &link).unwrap();
    let before = std::fs::read(&link).unwrap();
    assert_copied_whole(&src, &dst, "destination hard-linked");
    assert_eq!(
        std::fs::read(&link).unwrap(),
        before,
        "the other link changed"
    );
    std::fs::remove_file(&link).unwrap();

    // A journal planted beside an unrelated file (another source path, another inode):
    // not trusted, copied whole, the planted file left alone.
    let (src, dst, _) = killed_mid_copy(t, 10);
    let unrelated = dst.join("other");
    make_file(&src.join("other"), MID, 4);
    make_file(&unrelated, MID, 5);
    let planted = journal_of(&unrelated);
    std::fs::rename(journal_of(&dst.join("mid")), &planted).unwrap();
    let v = sync(&src, &dst, MID_CHUNK);
    assert_eq!(v["resumed"], 0, "{v}");
    assert_eq!(v["bytes"], 2 * MID, "{v}");
    assert_same_bytes(&src.join("other"), &unrelated);
    assert_finished(&src.join("mid"), &dst.join("mid"));
    assert!(
        planted.exists(),
        "a file that is not this copy's journal was removed"
    );
}

/// The small files of the issue-31 tests: 40 MiB in 40 chunks of 1 MiB, journaled thanks to
/// the test knob that lowers the journal threshold.
const SMALL: u64 = 40 * MIB;
const SMALL_CHUNK: u64 = MIB;
const KNOB: (&str, &str) = ("MFU_RS_TEST_JOURNAL_MIN_BYTES", "8388608");

/// `mfu-rs TOOL --chunksize 1MiB ARGS...` (2 ranks) with journals for files of 8 MiB or more.
fn small_tool(tool: &str, args: &[&std::ffi::OsStr]) -> Tool {
    Tool::new(tool)
        .ranks(2)
        .env(KNOB.0, KNOB.1)
        .arg("--chunksize")
        .arg(SMALL_CHUNK.to_string())
        .args(args)
}

/// Rewrite `path` in place with other bytes (`seed`), keeping its size and mtime, as
/// `cp -p`, `tar -x`, `rsync --inplace` or a write then `touch -r` do: only its ctime shows it.
fn rewrite_keeping_size_and_mtime(path: &Path, seed: u64) {
    let before = path.metadata().unwrap();
    let tmp = path.with_extension("new");
    make_file(&tmp, before.len(), seed);
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &std::fs::read(&tmp).unwrap(), 0).unwrap();
    drop(f);
    std::fs::remove_file(&tmp).unwrap();
    let times = std::fs::FileTimes::new().set_modified(before.modified().unwrap());
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_times(times)
        .unwrap();
    let after = path.metadata().unwrap();
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec()),
        (before.len(), before.mtime(), before.mtime_nsec())
    );
    assert_ne!(
        (after.ctime(), after.ctime_nsec()),
        (before.ctime(), before.ctime_nsec())
    );
}

/// Issue 31, item 1: a copy killed with a journal, then the source rewritten in place with its
/// size and mtime kept. A rerun of cp and a plain sync copy it whole (the journal records the
/// source's ctime, which moved): the destination holds the new bytes, never a mix.
#[test]
fn a_source_rewritten_with_size_and_mtime_kept_is_not_resumed() {
    let tmp = shm_dir();
    let t = tmp.path();
    let (src, dst) = (t.join("src"), t.join("dst"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    make_file(&src.join("big"), SMALL, 21);
    for (round, rerun) in ["cp", "sync"].into_iter().enumerate() {
        let _ = std::fs::remove_file(dst.join("big"));
        let tool = Tool::new("cp").ranks(2).env(KNOB.0, KNOB.1);
        let done = cp_killed_after(tool, &src.join("big"), &dst.join("big"), SMALL_CHUNK, 2);
        eprintln!("{rerun}: killed with {done} chunks recorded");
        rewrite_keeping_size_and_mtime(&src.join("big"), 100 + round as u64);
        let out = match rerun {
            "cp" => small_tool(
                "cp",
                &[
                    "--json".as_ref(),
                    "-p".as_ref(),
                    src.join("big").as_os_str(),
                    dst.join("big").as_os_str(),
                ],
            ),
            _ => small_tool(
                "sync",
                &["--json".as_ref(), src.as_os_str(), dst.as_os_str()],
            ),
        }
        .run()
        .assert_status(0);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["resumed"], 0, "{rerun}: {v}");
        assert_eq!(v["bytes"], SMALL, "{rerun}: {v}");
        assert_finished(&src.join("big"), &dst.join("big"));
    }
}

/// A copy killed with a journal, then the source replaced by a file too small to keep one
/// (below the journal threshold; one chunk, and several): a rerun of cp, and a sync, copy it
/// and remove the journal the killed run left, which named the same source path. Before, the
/// rerun left `.big.mfu-partial` in DEST for good (`cargo xtask torture` seed 1796521575,
/// issue 31). A journal of another source path is not touched.
#[test]
fn a_journal_left_beside_a_file_that_became_small_is_removed_by_the_rerun() {
    let tmp = shm_dir();
    let t = tmp.path();
    let (src, dst) = (t.join("src"), t.join("dst"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    // 4 KiB: one chunk; 3 MiB: three chunks of 1 MiB, still below the 8 MiB threshold.
    for (round, (rerun, small)) in [
        ("cp", 4096u64),
        ("cp", 3 * MIB),
        ("sync", 4096),
        ("sync", 3 * MIB),
    ]
    .into_iter()
    .enumerate()
    {
        let ctx = format!("{rerun} of {small} bytes");
        let (s, d) = (src.join("big"), dst.join("big"));
        let _ = std::fs::remove_file(&d);
        make_file(&s, SMALL, 30 + round as u64);
        let tool = Tool::new("cp").ranks(2).env(KNOB.0, KNOB.1);
        cp_killed_after(tool, &s, &d, SMALL_CHUNK, 2);
        std::fs::remove_file(&s).unwrap();
        let bytes: Vec<u8> = (0..small).map(|i| (i * 7 + round as u64) as u8).collect();
        std::fs::write(&s, &bytes).unwrap();
        let tool = match rerun {
            "cp" => small_tool("cp", &["-p".as_ref(), s.as_os_str(), d.as_os_str()]),
            _ => small_tool("sync", &[src.as_os_str(), dst.as_os_str()]),
        };
        tool.run().assert_status(0);
        assert_eq!(std::fs::read(&d).unwrap(), bytes, "{ctx}");
        assert!(!journal_of(&d).exists(), "{ctx}: the journal is left");
        let names: Vec<_> = std::fs::read_dir(&dst)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["big"], "{ctx}");
    }
    // A journal under the name whose recorded source is another path stays.
    let (s, d) = (src.join("big"), dst.join("big"));
    std::fs::remove_file(&d).unwrap();
    make_file(&s, SMALL, 40);
    let tool = Tool::new("cp").ranks(2).env(KNOB.0, KNOB.1);
    cp_killed_after(tool, &s, &d, SMALL_CHUNK, 2);
    let other = src.join("other");
    std::fs::write(&other, b"small").unwrap();
    small_tool("cp", &[other.as_os_str(), d.as_os_str()])
        .run()
        .assert_status(0);
    assert!(
        journal_of(&d).exists(),
        "the journal of {} was removed",
        s.display()
    );
}

/// What a killed copy's source file is swapped for before the rerun.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SwappedIn {
    Symlink,
    Fifo,
    /// A hard link to `a`, another file of the tree, which sorts first: `big` is the group's
    /// member, linked to `a`'s copy.
    HardLink,
    Dir,
}

/// Torture seed 800432 (class swap): `cp -p` killed with a journal beside a partial file,
/// then the source file swapped for a symlink; the rerun replaced the partial file by the
/// symlink, exited 0 and left `.big.mfu-partial` in DEST for good. For each type swapped in
/// (symlink, fifo, hard link, directory) and each rerun (cp, cp -p, sync, sync --delete): a
/// rerun that replaces the partial file removes its journal with it (exit 0, DEST holds exactly
/// SRC's names); one that refuses (cp: a directory over a file, as GNU cp; sync without
/// --delete: another type) exits 1 naming the file, which stays the partial file with its
/// journal, still saying it is incomplete.
#[test]
fn a_partial_file_replaced_by_another_type_takes_its_journal_along() {
    use std::os::unix::fs::FileTypeExt;
    let tmp = shm_dir();
    let t = tmp.path();
    let swaps = [
        SwappedIn::Symlink,
        SwappedIn::Fifo,
        SwappedIn::HardLink,
        SwappedIn::Dir,
    ];
    let reruns: [(&str, &[&str]); 4] = [
        ("cp", &[]),
        ("cp", &["-p"]),
        ("sync", &[]),
        ("sync", &["--delete"]),
    ];
    let mut n = 0;
    let mut wrong = Vec::new();
    for swap in swaps {
        for (tool, opts) in reruns {
            n += 1;
            let ctx = format!("{swap:?}, then {tool} {opts:?}");
            // cp s TOP makes TOP/s, as the killed copy did; sync s TOP/s.
            let (src, top) = (t.join(format!("s{n}")), t.join(format!("d{n}")));
            let dst = top.join(src.file_name().unwrap());
            std::fs::create_dir_all(&src).unwrap();
            std::fs::create_dir_all(&dst).unwrap();
            make_file(&src.join("big"), SMALL, 50 + n);
            std::fs::write(src.join("a"), b"the first of the hard-link group").unwrap();
            let killer = Tool::new("cp").ranks(2).env(KNOB.0, KNOB.1);
            cp_killed_after(killer, &src.join("big"), &dst.join("big"), SMALL_CHUNK, 2);
            std::fs::remove_file(src.join("big")).unwrap();
            let big = src.join("big");
            match swap {
                SwappedIn::Symlink => std::os::unix::fs::symlink("a", &big).unwrap(),
                SwappedIn::Fifo => assert!(std::process::Command::new("mkfifo")
                    .arg(&big)
                    .status()
                    .unwrap()
                    .success()),
                SwappedIn::HardLink => std::fs::hard_link(src.join("a"), &big).unwrap(),
                SwappedIn::Dir => {
                    std::fs::create_dir(&big).unwrap();
                    std::fs::write(big.join("inner"), b"inner").unwrap();
                }
            }
            let mut args: Vec<&std::ffi::OsStr> = opts.iter().map(|o| o.as_ref()).collect();
            args.push(src.as_os_str());
            args.push(if tool == "cp" {
                top.as_os_str()
            } else {
                dst.as_os_str()
            });
            let out = small_tool(tool, &args).run();
            let refused = match tool {
                "cp" => swap == SwappedIn::Dir,
                _ => opts.is_empty() && swap != SwappedIn::HardLink,
            };
            let d = dst.join("big");
            let kind = std::fs::symlink_metadata(&d).unwrap().file_type();
            let mut check = |ok: bool, what: &str| {
                if !ok {
                    wrong.push(format!("{ctx}: {what}\n{}", out.stderr_str()));
                }
            };
            if refused {
                check(
                    out.code() == Some(1),
                    &format!("exit {:?}, not 1", out.code()),
                );
                check(
                    out.stderr_str().contains(d.to_str().unwrap()),
                    "the refused file is not named",
                );
                check(kind.is_file(), "the partial file was replaced");
                check(
                    done_chunks(&d).is_some(),
                    "the partial file that stays lost its journal",
                );
                continue;
            }
            check(
                out.code() == Some(0),
                &format!("exit {:?}, not 0", out.code()),
            );
            let replaced = match swap {
                SwappedIn::Symlink => kind.is_symlink(),
                SwappedIn::Fifo => kind.is_fifo(),
                SwappedIn::HardLink => {
                    kind.is_file()
                        && d.metadata().unwrap().ino() == dst.join("a").metadata().unwrap().ino()
                }
                SwappedIn::Dir => kind.is_dir(),
            };
            check(replaced, &format!("DEST's big is {kind:?}"));
            check(!journal_of(&d).exists(), "the journal is left");
            let mut names: Vec<_> = std::fs::read_dir(&dst)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            check(names == ["a", "big"], &format!("DEST holds {names:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Issue 31, item 1: a source tree holding `big` and a file named like its journal,
/// `.big.mfu-partial` (here a real journal of a copy of `big`, as a tree copied with its
/// journals has). The user's file is copied intact, by an interrupted copy and its rerun, by
/// sync and by sync --delete; no journal is ever kept, read, marked or removed under its name.
#[test]
fn a_source_file_named_like_a_journal_is_the_users_and_arrives_intact() {
    let tmp = shm_dir();
    let t = tmp.path();
    // cp s TOP makes TOP/s: TOP exists, so that a rerun copies onto the same files.
    let (src, top) = (t.join("s"), t.join("d"));
    let dst = top.join("s");
    std::fs::create_dir_all(&src).unwrap();
    make_file(&src.join("big"), SMALL, 31);
    // A real journal of a copy of s/big: what a tree copied with its journals holds.
    std::fs::create_dir_all(t.join("x")).unwrap();
    let tool = Tool::new("cp").ranks(2).env(KNOB.0, KNOB.1);
    cp_killed_after(tool, &src.join("big"), &t.join("x/big"), SMALL_CHUNK, 2);
    let users = src.join(".big.mfu-partial");
    std::fs::copy(journal_of(&t.join("x/big")), &users).unwrap();
    let users_bytes = std::fs::read(&users).unwrap();
    let assert_intact = |what: &str| {
        assert_eq!(
            std::fs::read(dst.join(".big.mfu-partial")).unwrap_or_default(),
            users_bytes,
            "{what}: the user's .big.mfu-partial"
        );
        assert_same_bytes(&src.join("big"), &dst.join("big"));
    };
    for round in 0..2 {
        let _ = std::fs::remove_dir_all(&top);
        std::fs::create_dir(&top).unwrap();
        // Killed (if it keeps a journal at all: it must not, the name is the user's), then
        // run again.
        let killed = small_tool("cp", &["-p".as_ref(), src.as_os_str(), top.as_os_str()])
            .env("MFU_RS_TEST_KILL_AFTER_MARKS", "2")
            .run();
        eprintln!("round {round}: first cp exited {:?}", killed.code());
        small_tool("cp", &["-p".as_ref(), src.as_os_str(), top.as_os_str()])
            .run()
            .assert_status(0);
        assert_intact("cp, killed then run again");
    }
    // A plain copy (a journal at the user's name shared its inode with the user's copy, and
    // marks landed in it: one run in three).
    for _ in 0..3 {
        std::fs::remove_dir_all(&top).unwrap();
        std::fs::create_dir(&top).unwrap();
        small_tool("cp", &["-p".as_ref(), src.as_os_str(), top.as_os_str()])
            .run()
            .assert_status(0);
        assert_intact("cp");
    }
    // Sync: big changed (new mtime), the user's file kept; then with --delete.
    make_file(&src.join("big"), SMALL, 32);
    small_tool("sync", &[src.as_os_str(), dst.as_os_str()])
        .run()
        .assert_status(0);
    assert_intact("sync");
    make_file(&src.join("big"), SMALL, 33);
    small_tool(
        "sync",
        &["--delete".as_ref(), src.as_os_str(), dst.as_os_str()],
    )
    .run()
    .assert_status(0);
    assert_intact("sync --delete");
    // A sync killed while copying big, then run again.
    make_file(&src.join("big"), SMALL, 34);
    small_tool("sync", &[src.as_os_str(), dst.as_os_str()])
        .env("MFU_RS_TEST_KILL_AFTER_MARKS", "2")
        .run();
    small_tool(
        "sync",
        &["--delete".as_ref(), src.as_os_str(), dst.as_os_str()],
    )
    .run()
    .assert_status(0);
    assert_intact("sync killed, then sync --delete");
    // Nothing left to do: the user's file is not taken for a journal saying big is partial.
    let v: serde_json::Value = serde_json::from_slice(
        &small_tool(
            "sync",
            &["--json".as_ref(), src.as_os_str(), dst.as_os_str()],
        )
        .run()
        .assert_status(0)
        .stdout,
    )
    .unwrap();
    assert_eq!(v["bytes"], 0, "{v}");
}

/// Issue 31, item 2: `sync -c` compares every byte, the chunks a trusted journal marks done
/// too: a byte changed in a done chunk of the partial file is repaired, whether the partial
/// file is shorter than the source (copied again) or as long (compared in place), with and
/// without --verify; the journal is gone after and a plain sync has nothing left to do.
#[test]
fn sync_contents_compares_the_chunks_a_journal_marks_done() {
    let tmp = shm_dir();
    let t = tmp.path();
    let (src, dst) = (t.join("src"), t.join("dst"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    make_file(&src.join("big"), SMALL, 41);
    for (full, verify) in [(false, false), (true, false), (false, true), (true, true)] {
        let what = format!("full size {full}, --verify {verify}");
        let _ = std::fs::remove_file(dst.join("big"));
        let tool = Tool::new("cp").ranks(2).env(KNOB.0, KNOB.1);
        cp_killed_after(tool, &src.join("big"), &dst.join("big"), SMALL_CHUNK, 2);
        // Bytes of every chunk there (so of each one marked done) changed in place: same
        // inode, the journal still trusted.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dst.join("big"))
            .unwrap();
        let there = f.metadata().unwrap().len();
        for k in 0..SMALL / SMALL_CHUNK {
            let at = k * SMALL_CHUNK + 4096;
            if at + 7 <= there {
                std::os::unix::fs::FileExt::write_all_at(&f, b"CHANGED", at).unwrap();
            }
        }
        if full {
            f.set_len(SMALL).unwrap();
        }
        drop(f);
        let j = done_chunks(&dst.join("big")).expect("the journal is still there");
        assert!(j.done >= 2, "{what}: {j:?}");
        let mut args: Vec<&std::ffi::OsStr> = vec!["-c".as_ref()];
        if verify {
            args.push("--verify".as_ref());
        }
        args.extend([src.as_os_str(), dst.as_os_str()]);
        small_tool("sync", &args).run().assert_status(0);
        assert_finished(&src.join("big"), &dst.join("big"));
        let v: serde_json::Value = serde_json::from_slice(
            &small_tool(
                "sync",
                &["--json".as_ref(), src.as_os_str(), dst.as_os_str()],
            )
            .run()
            .assert_status(0)
            .stdout,
        )
        .unwrap();
        assert_eq!(v["bytes"], 0, "{what}: {v}");
    }
}

/// `--verify` vouches for every byte of a resumed copy: a copy killed with a journal, then
/// bytes of a chunk the journal marks done changed in the destination (another program
/// writing into the partial file). A rerun of `cp --verify`, and `sync --verify` (which gives
/// the copy the source's mtime, so that no later sync would look again), verified only the
/// chunks they copied and left the other bytes, exit 0. With --verify nothing resumes (as with
/// sync -c): the file is copied whole and read back whole.
#[test]
fn verify_after_a_kill_reads_back_the_chunks_a_journal_marks_done() {
    let tmp = shm_dir();
    let t = tmp.path();
    let (src, dst) = (t.join("src"), t.join("dst"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    make_file(&src.join("big"), SMALL, 31);
    for rerun in ["cp", "sync"] {
        let _ = std::fs::remove_file(dst.join("big"));
        let tool = Tool::new("cp").ranks(2).env(KNOB.0, KNOB.1);
        let done = cp_killed_after(tool, &src.join("big"), &dst.join("big"), SMALL_CHUNK, 4);
        // Damage the first chunk that holds the source's bytes (one the journal vouches for).
        let (s, d) = (
            std::fs::read(src.join("big")).unwrap(),
            std::fs::read(dst.join("big")).unwrap(),
        );
        let chunk = (0..SMALL / SMALL_CHUNK)
            .find(|&i| {
                let r = (i * SMALL_CHUNK) as usize..((i + 1) * SMALL_CHUNK) as usize;
                s[r.clone()] == d[r]
            })
            .expect("a chunk copied before the kill");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dst.join("big"))
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, b"NOT THE SOURCE", chunk * SMALL_CHUNK + 100)
            .unwrap();
        drop(f);
        eprintln!("{rerun}: killed with {done} chunks recorded; chunk {chunk} damaged");
        let args: Vec<&std::ffi::OsStr> = match rerun {
            "cp" => vec![
                "--json".as_ref(),
                "--verify".as_ref(),
                "-p".as_ref(),
                src.join("big").into_os_string().leak(),
                dst.join("big").into_os_string().leak(),
            ],
            _ => vec![
                "--json".as_ref(),
                "--verify".as_ref(),
                src.as_os_str(),
                dst.as_os_str(),
            ],
        };
        let out = small_tool(rerun, &args).run().assert_status(0);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_finished(&src.join("big"), &dst.join("big"));
        assert_eq!(v["resumed"], 0, "{rerun}: {v}");
        assert_eq!(
            v["verify"]["bytes"], SMALL,
            "{rerun}: every byte read back: {v}"
        );
    }
}
