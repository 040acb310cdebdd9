//! The tree changes between a tool's listing and its action: a directory swapped for a
//! symlink to an outside tree, a file for a symlink to an outside file, a directory for a file.
//! Whatever the tool (rm, chmod, stripe, tar -x), at 1 and 2 ranks, after a walk or a read of
//! the archive (the test seam pauses the tool there) or with a list naming what has since
//! changed: nothing outside the tree changes
//! (contents, modes, owners, existence), the entries whose path changed are named on stderr,
//! and the exit status is 1.

use mfu_tests::{expect_status, mfu, with_change_after_listing, Tool};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A tree to act on and an outside tree that must not change.
struct Scene {
    _tmp: tempfile::TempDir,
    tree: PathBuf,
    outside: PathBuf,
    /// Contents, mode, owner and group of every outside entry, taken before the run.
    before: BTreeMap<PathBuf, (Vec<u8>, u32, u32, u32)>,
}

/// tree/d/f0..f9 (a directory to swap for a symlink to `outside`), tree/x (a file to swap for
/// a symlink to outside/secret), tree/e/g0..g2 (a directory to swap for a file), tree/keep;
/// outside/f0..f9 and outside/secret, mode 0600.
fn scene() -> Scene {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(tree.join("d")).unwrap();
    fs::create_dir_all(tree.join("e")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    for i in 0..10 {
        fs::write(tree.join(format!("d/f{i}")), b"inside").unwrap();
        fs::write(outside.join(format!("f{i}")), format!("outside {i}")).unwrap();
    }
    for i in 0..3 {
        fs::write(tree.join(format!("e/g{i}")), b"inside").unwrap();
    }
    fs::write(tree.join("x"), b"inside").unwrap();
    fs::write(tree.join("keep"), b"inside").unwrap();
    fs::write(outside.join("secret"), b"secret").unwrap();
    for e in fs::read_dir(&outside).unwrap() {
        fs::set_permissions(e.unwrap().path(), fs::Permissions::from_mode(0o600)).unwrap();
    }
    fs::set_permissions(&outside, fs::Permissions::from_mode(0o700)).unwrap();
    let before = snapshot(&outside);
    Scene {
        _tmp: tmp,
        tree,
        outside,
        before,
    }
}

fn snapshot(outside: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32, u32, u32)> {
    let mut out = BTreeMap::new();
    let m = fs::symlink_metadata(outside).unwrap();
    out.insert(
        outside.to_path_buf(),
        (Vec::new(), m.mode(), m.uid(), m.gid()),
    );
    for e in fs::read_dir(outside).unwrap() {
        let p = e.unwrap().path();
        let m = fs::symlink_metadata(&p).unwrap();
        out.insert(
            p.clone(),
            (fs::read(&p).unwrap(), m.mode(), m.uid(), m.gid()),
        );
    }
    out
}

impl Scene {
    /// The three swaps.
    fn swap(&self) {
        let d = self.tree.join("d");
        fs::remove_dir_all(&d).unwrap();
        symlink(&self.outside, &d).unwrap();
        let x = self.tree.join("x");
        fs::remove_file(&x).unwrap();
        symlink(self.outside.join("secret"), &x).unwrap();
        let e = self.tree.join("e");
        fs::remove_dir_all(&e).unwrap();
        fs::write(&e, b"now a file").unwrap();
    }

    /// Nothing outside changed.
    fn assert_outside_intact(&self, out: &Output) {
        assert_eq!(
            snapshot(&self.outside),
            self.before,
            "the outside tree changed\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A list of the tree written by `mfu-rs walk -o` (with types), before the swaps.
    fn list(&self) -> PathBuf {
        let list = self.tree.parent().unwrap().join("list.mfu");
        expect_status(
            &mut mfu(&[
                "walk",
                "-q",
                "-o",
                list.to_str().unwrap(),
                self.tree.to_str().unwrap(),
            ]),
            0,
        );
        list
    }
}

fn tool(np: usize, args: &[&str]) -> Command {
    Tool::bare().np(np).args(args).command()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_exit_1(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(1),
        "exit status\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    );
}

/// Each entry reached through a swapped path is named on stderr: d's files (through the
/// symlink) and e's (through the file). The path must not go on with `/` (`e` is not named by
/// `e/g0`); what follows it may be another rank's message (stderr lines of several processes
/// can interleave, but a path is written at once).
fn assert_named(s: &Scene, out: &Output, names: &[&str]) {
    let err = stderr(out);
    for n in names {
        let p = s.tree.join(n).display().to_string();
        let named = err
            .match_indices(&p)
            .any(|(i, _)| err.as_bytes().get(i + p.len()) != Some(&b'/'));
        assert!(named, "{p} not named\n--- stderr\n{err}");
    }
}

/// rm after a walk: the swapped directory's files are not removed through the symlink; the
/// symlink swapped in for a file is removed as the link it now is (its target stays, as with
/// GNU rm -r); nothing outside changes.
fn rm_after_walk(np: usize) {
    let s = scene();
    let out = with_change_after_listing(&mut tool(np, &["rm", s.tree.to_str().unwrap()]), || {
        s.swap()
    });
    s.assert_outside_intact(&out);
    assert_exit_1(&out);
    assert_named(&s, &out, &["d/f0", "d/f9", "e/g0"]);
    assert!(
        stderr(&out).contains("changed since it was listed"),
        "{}",
        stderr(&out)
    );
    assert!(!s.tree.join("keep").exists(), "the rest is removed");
    assert!(s.tree.join("e").is_file(), "the file swapped in stays");
}

#[test]
fn rm_after_walk_np1() {
    rm_after_walk(1);
}

#[test]
fn rm_after_walk_np2() {
    rm_after_walk(2);
}

/// chmod/chown after a walk: nothing outside changes mode or owner; every swapped entry (d,
/// x, e, and what was beneath d and e) is named.
fn chmod_after_walk(np: usize) {
    let s = scene();
    let args = [
        "chmod",
        "-m",
        "777",
        "-u",
        "65534",
        s.tree.to_str().unwrap(),
    ];
    let out = with_change_after_listing(&mut tool(np, &args), || s.swap());
    s.assert_outside_intact(&out);
    assert_exit_1(&out);
    assert_named(&s, &out, &["d", "x", "e", "d/f0", "d/f9", "e/g0"]);
    let keep = fs::metadata(s.tree.join("keep")).unwrap();
    assert_eq!(
        (keep.mode() & 0o7777, keep.uid()),
        (0o777, 65534),
        "the rest is changed"
    );
    // The symlinks swapped in are not changed either (not even lchown'ed).
    assert_eq!(fs::symlink_metadata(s.tree.join("x")).unwrap().uid(), 0);
}

#[test]
fn chmod_after_walk_np1() {
    chmod_after_walk(1);
}

#[test]
fn chmod_after_walk_np2() {
    chmod_after_walk(2);
}

/// A list naming a directory that has since become a symlink to an outside tree (and the other
/// swaps): deterministic, no pause needed.
#[test]
fn rm_and_chmod_of_a_list_do_not_follow_what_changed() {
    for np in [1, 2] {
        let s = scene();
        let list = s.list();
        s.swap();
        let out = expect_status(
            &mut tool(
                np,
                &[
                    "chmod",
                    "-m",
                    "777",
                    "-u",
                    "65534",
                    "-i",
                    list.to_str().unwrap(),
                ],
            ),
            1,
        );
        s.assert_outside_intact(&out);
        assert_named(&s, &out, &["d/f0", "d/f9", "e/g0"]);
        let out = expect_status(&mut tool(np, &["rm", "-i", list.to_str().unwrap()]), 1);
        s.assert_outside_intact(&out);
        assert_named(&s, &out, &["d/f0", "d/f9", "e/g0"]);
        assert!(
            !s.tree.join("keep").exists(),
            "np {np}: the rest is removed"
        );
    }
}

#[derive(clap::Parser)]
struct Cmd<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

/// stripe (in-process, over a fake Lustre: the binary needs a real one) after its walk: a
/// directory swapped for a symlink to an outside tree, and a file swapped for a symlink to an
/// outside file. The outside files keep their inode, data and mode (never restriped by
/// rewrite), the run fails (exit 1); the rest of the tree is restriped.
#[test]
fn stripe_after_walk_np1_and_np2() {
    let _serial = mfu_tests::serial();
    use clap::Parser;
    use lustre_sys::fake::Fake;
    use mfu::Status;
    use std::sync::Arc;
    for np in [1, 2] {
        let s = scene();
        let outside_inodes: Vec<(PathBuf, u64)> = s
            .before
            .keys()
            .map(|p| (p.clone(), fs::metadata(p).unwrap().ino()))
            .collect();
        // The attacker gives the inside files the size and mtime of the outside ones (theirs
        // to set), so that only reaching decides.
        for (inside, outside) in (0..10)
            .map(|i| (format!("d/f{i}"), format!("f{i}")))
            .chain([("x".to_string(), "secret".to_string())])
        {
            let (inside, outside) = (s.tree.join(inside), s.outside.join(outside));
            let len = fs::metadata(&outside).unwrap().len() as usize;
            fs::write(&inside, vec![b'i'; len]).unwrap();
            let mtime = fs::metadata(&outside).unwrap().modified().unwrap();
            let f = fs::File::options().write(true).open(&inside).unwrap();
            f.set_modified(mtime).unwrap();
        }
        // The fake Lustre holds both trees, so that only reaching decides.
        let fake = Arc::new(Fake::new(vec![s.tree.clone(), s.outside.clone()], 4));
        let argv = ["mfu-rs", "-q", "-c", "2", s.tree.to_str().unwrap()];
        let args = Cmd::<mfu::unstable::cli::stripe::StripeToolArgs>::parse_from(argv).args;
        let mut args =
            <mfu::unstable::cli::stripe::Stripe as mfu::unstable::cli::tool::CliTool>::options(
                &args,
                Default::default(),
                Default::default(),
            );
        args.api = mfu::types::LustreHandle(fake.clone() as Arc<dyn lustre_sys::Lustre>);
        let keep_ino = fs::metadata(s.tree.join("keep")).unwrap().ino();
        let (tree, outside) = (s.tree.clone(), s.outside.clone());
        mfu::unstable::engine::test_seam::change_at_next_pause(move || {
            fs::remove_dir_all(tree.join("d")).unwrap();
            symlink(&outside, tree.join("d")).unwrap();
            fs::remove_file(tree.join("x")).unwrap();
            symlink(outside.join("secret"), tree.join("x")).unwrap();
        });
        let st = steal::local::run(np, |comm| mfu::stripe::run(comm, &args));
        let st: Vec<Status> = st
            .into_iter()
            .map(|r| r.map_or(Status::Usage, |r| mfu::prelude::ToolReport::status(&r)))
            .collect();
        assert!(
            st.iter().all(|s| *s == Status::ItemsFailed),
            "np {np}: {st:?}"
        );
        let out = Output {
            status: std::os::unix::process::ExitStatusExt::from_raw(0),
            stdout: Vec::new(),
            stderr: Vec::new(),
        };
        s.assert_outside_intact(&out);
        for (p, ino) in outside_inodes {
            assert_eq!(
                fs::metadata(&p).unwrap().ino(),
                ino,
                "np {np}: {} rewritten",
                p.display()
            );
        }
        assert_ne!(
            fs::metadata(s.tree.join("keep")).unwrap().ino(),
            keep_ino,
            "np {np}: the rest is restriped"
        );
    }
}

/// tar -x of a GNU-made archive into the tree (its directories already there), after the
/// archive was read and before anything is extracted: the swapped directory's files are not
/// written through the symlink nor the directory-turned-file's through the file (both named,
/// exit 1); the file turned symlink is replaced by the archive's file or refused, never written
/// through; nothing outside changes.
fn tar_x_after_listing(np: usize) {
    let s = scene();
    let src = s.tree.parent().unwrap().join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::create_dir_all(src.join("e")).unwrap();
    for i in 0..10 {
        fs::write(src.join(format!("d/f{i}")), b"from the archive").unwrap();
    }
    for i in 0..3 {
        fs::write(src.join(format!("e/g{i}")), b"from the archive").unwrap();
    }
    fs::write(src.join("x"), b"from the archive").unwrap();
    fs::write(src.join("keep"), b"from the archive").unwrap();
    let archive = s.tree.parent().unwrap().join("a.tar");
    let made = std::process::Command::new("tar")
        .arg("-cf")
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .args(["d", "e", "x", "keep"])
        .status()
        .unwrap();
    assert!(made.success());
    let args = [
        "tar",
        "-x",
        "-f",
        archive.to_str().unwrap(),
        "-C",
        s.tree.to_str().unwrap(),
    ];
    let out = with_change_after_listing(&mut tool(np, &args), || s.swap());
    s.assert_outside_intact(&out);
    assert_exit_1(&out);
    // tar names entries as the archive does (relative to the target).
    let err = stderr(&out);
    for member in ["d", "d/f0", "e", "e/g0"] {
        assert!(
            err.contains(&format!("mfu-rs tar: {member}: ")),
            "{member} not named\n--- stderr\n{err}"
        );
    }
    // What nothing got in the way of is extracted.
    assert_eq!(fs::read(s.tree.join("keep")).unwrap(), b"from the archive");
}

#[test]
fn tar_x_after_listing_np1() {
    tar_x_after_listing(1);
}

#[test]
fn tar_x_after_listing_np2() {
    tar_x_after_listing(2);
}

/// Run `cmd` with the test seam that pauses the copy after the first chunk it read
/// (`MFU_RS_TEST_PAUSE_AFTER_CHUNK`): `change` runs there, then the copy goes on.
fn with_change_after_first_chunk(cmd: &mut Command, change: impl FnOnce()) -> Output {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("pause");
    cmd.env("MFU_RS_TEST_PAUSE_AFTER_CHUNK", &base)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let start = Instant::now();
    while !dir.path().join("pause.ready").exists() {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} ended before it read a chunk\n--- stderr\n{}",
                stderr(&out)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{cmd:?}: no pause"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    change();
    fs::write(dir.path().join("pause.go"), b"").unwrap();
    child.wait_with_output().unwrap()
}

/// Rewrite `path` in place with other bytes of the same size and set its mtime back, as
/// `cp -p` or `rsync --inplace` onto it would: only the ctime shows the change.
fn rewrite_in_place(path: &Path) {
    let before = fs::metadata(path).unwrap();
    let new: Vec<u8> = mfu_tests::noise(99, before.len() as usize);
    let f = fs::OpenOptions::new().write(true).open(path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &new, 0).unwrap();
    f.set_times(fs::FileTimes::new().set_modified(before.modified().unwrap()))
        .unwrap();
}

/// Issue 31, item 9: a source rewritten (same size, mtime set back) while cp or sync reads it,
/// between its chunks. The copy would mix old and new chunks: the file is named ("file changed
/// as we read it"), the exit status is 1, and the copy does not get the source's mtime, so
/// that the next sync copies it again. For a file of several chunks and of one, with
/// `--ranks 2`, `mpirun -np 2`, `--verify`, and sync (new copy, and `-c` onto an existing one).
#[test]
fn a_source_changed_while_read_is_named_and_not_given_its_mtime() {
    let runs: &[(&str, Tool, &[&str], bool)] = &[
        ("cp", Tool::new("cp"), &["-p"], false),
        ("cp --ranks 2", Tool::new("cp").ranks(2), &["-p"], false),
        ("cp mpirun -np 2", Tool::new("cp").mpi(2), &["-p"], false),
        ("cp --verify", Tool::new("cp"), &["-p", "--verify"], false),
        ("sync", Tool::new("sync").ranks(2), &[], false),
        ("sync -c", Tool::new("sync").ranks(2), &["-c"], true),
        (
            "sync -c --verify",
            Tool::new("sync"),
            &["-c", "--verify"],
            true,
        ),
    ];
    for (name, tool, args, existing) in runs {
        for size in [64 << 10, 8 << 20] {
            let what = format!("{name}, {size} bytes");
            let tmp = tempfile::Builder::new()
                .prefix("mfu-rs-changed-")
                .tempdir_in("/dev/shm")
                .unwrap();
            let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
            fs::create_dir_all(&src).unwrap();
            fs::create_dir_all(&dst).unwrap();
            let f = src.join("a file | odd\nname");
            fs::write(&f, mfu_tests::noise(7, size)).unwrap();
            if *existing {
                // Same size and mtime, other bytes: only -c looks.
                let d = dst.join("a file | odd\nname");
                fs::write(&d, mfu_tests::noise(8, size)).unwrap();
                let m = fs::metadata(&f).unwrap().modified().unwrap();
                fs::File::options()
                    .write(true)
                    .open(&d)
                    .unwrap()
                    .set_times(fs::FileTimes::new().set_modified(m))
                    .unwrap();
            }
            let mut cmd = tool
                .clone()
                .args(*args)
                .args(["--chunksize", "1048576"])
                .arg(&src)
                .arg(&dst)
                .command();
            // cp makes DEST a copy of SRC when DEST is not there (sync always does).
            if name.starts_with("cp") {
                fs::remove_dir(&dst).unwrap();
            }
            let out = with_change_after_first_chunk(&mut cmd, || rewrite_in_place(&f));
            assert_exit_1(&out);
            let err = stderr(&out);
            assert!(
                err.contains("file changed as we read it") && err.contains("odd"),
                "{what}: not named\n--- stderr\n{err}"
            );
            let copy = dst.join("a file | odd\nname");
            let (s, d) = (fs::metadata(&f).unwrap(), fs::metadata(&copy).unwrap());
            assert_ne!(
                (s.mtime(), s.mtime_nsec()),
                (d.mtime(), d.mtime_nsec()),
                "{what}: the copy carries the source's mtime"
            );
            // The next sync copies it again.
            let out = Tool::new("sync").arg(&src).arg(&dst).run();
            assert_eq!(out.code(), Some(0), "{what}: {}", out.stderr_str());
            assert!(
                fs::read(&f).unwrap() == fs::read(&copy).unwrap(),
                "{what}: the next sync left the copy as it was"
            );
        }
    }
}

/// A shared, writable mapping of a file on tmpfs whose every page was written once through it
/// (which stamps the file's times then): writes through it later change the file's bytes
/// without stamping its times again, as a `write` call still going on after the kernel stamped
/// the times when it began.
struct Mapped {
    ptr: *mut u8,
    len: usize,
}

impl Mapped {
    fn new(path: &Path) -> Mapped {
        use std::os::fd::AsRawFd;
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a fresh shared mapping of a file this test owns, checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap {}", path.display());
        let ptr = ptr.cast::<u8>();
        for p in (0..len).step_by(4096) {
            // SAFETY: within the mapping.
            unsafe { ptr.add(p).write_volatile(ptr.add(p).read_volatile()) };
        }
        Mapped { ptr, len }
    }

    /// Write `data` (the file's length) through the mapping.
    fn overwrite(&self, data: &[u8]) {
        assert_eq!(data.len(), self.len);
        // SAFETY: `len` bytes of the mapping, which nothing else in this process touches.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, self.len) };
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A source whose bytes change while cp, sync or tar -c reads it, with its size, mtime and
/// ctime as they were when it was listed (a `write` still going on when it was listed leaves
/// exactly that: the kernel stamps the times when a write begins). Its times cannot tell, but
/// it was written moments before: it is read again and compared, and named ("file changed as
/// we read it", exit 1); the copy does not get the source's mtime. Before, exit 0 with a copy
/// or archive member mixing two versions (`cargo xtask torture --only changed-while-read`
/// found it in about 3% of its iterations; issue 31, item 9). Files of one chunk and of
/// several, `--ranks 2` and `mpirun -np 2`.
#[test]
fn a_source_written_while_read_without_new_times_is_named() {
    let runs: &[(&str, Tool, &[&str])] = &[
        ("cp", Tool::new("cp"), &["-p"]),
        ("cp mpirun -np 2", Tool::new("cp").mpi(2), &["-p"]),
        ("sync", Tool::new("sync").ranks(2), &[]),
        ("tar -c", Tool::new("tar").ranks(2), &["-c"]),
        ("tar -c --zstd", Tool::new("tar"), &["-c", "--zstd"]),
    ];
    for (name, tool, args) in runs {
        for size in [64 << 10, 8 << 20] {
            let what = format!("{name}, {size} bytes");
            let tmp = tempfile::Builder::new()
                .prefix("mfu-rs-racy-")
                .tempdir_in("/dev/shm")
                .unwrap();
            let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
            fs::create_dir_all(&src).unwrap();
            let f = src.join("a file | odd\nname");
            fs::write(&f, mfu_tests::noise(7, size)).unwrap();
            let map = Mapped::new(&f);
            let listed = fs::metadata(&f).unwrap();
            let mut cmd = tool.clone().args(*args).args(["--chunksize", "1048576"]);
            cmd = if name.starts_with("tar") {
                cmd.arg("-f").arg(&dst).arg("-C").arg(tmp.path()).arg("src")
            } else {
                cmd.arg(&src).arg(&dst)
            };
            let mut cmd = cmd.command();
            let out = with_change_after_first_chunk(&mut cmd, || {
                map.overwrite(&mfu_tests::noise(8, size));
                let now = fs::metadata(&f).unwrap();
                // What makes this case: the times are those the tool listed.
                assert_eq!(
                    (
                        now.len(),
                        now.mtime(),
                        now.mtime_nsec(),
                        now.ctime(),
                        now.ctime_nsec()
                    ),
                    (
                        listed.len(),
                        listed.mtime(),
                        listed.mtime_nsec(),
                        listed.ctime(),
                        listed.ctime_nsec()
                    ),
                    "{what}: the write through the mapping stamped the times"
                );
            });
            assert_exit_1(&out);
            let err = stderr(&out);
            assert!(
                err.contains("file changed as we read it") && err.contains("odd"),
                "{what}: not named\n--- stderr\n{err}"
            );
            if !name.starts_with("tar") {
                let copy = dst.join("a file | odd\nname");
                let (s, d) = (fs::metadata(&f).unwrap(), fs::metadata(&copy).unwrap());
                assert_ne!(
                    (s.mtime(), s.mtime_nsec()),
                    (d.mtime(), d.mtime_nsec()),
                    "{what}: the copy carries the source's mtime"
                );
                // Older than the source as listed, so that no later time of a source still
                // being written can equal it (before: "now", equal within a clock tick to the
                // time a write still going on stamped; the torture found that).
                assert!(
                    (d.mtime(), d.mtime_nsec()) < (listed.mtime(), listed.mtime_nsec()),
                    "{what}: the copy's mtime is not older than the source's"
                );
            }
        }
    }
}
