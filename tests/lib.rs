//! Harness of the end-to-end tests: find the binaries, run them ([`Tool`]: one process, thread
//! ranks, under mpirun, without MPI, as nobody), build the vector trees.
//!
//! The binaries are built by `cargo xtask test` and named by `MFU_RS_BIN` / `MFU_RS_NOMPI_BIN`;
//! without those variables, `target/debug/mfu-rs` is used. A missing binary fails the test with
//! instructions: nothing is skipped silently.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

pub mod tree;
/// The workspace root: `MFU_TESTS_ROOT` when set (`cargo xtask private-clone` runs the built
/// tests against a copy of the checkout elsewhere), else the checkout these tests were built in.
pub fn root() -> PathBuf {
    std::env::var_os("MFU_TESTS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("tests/ is in the workspace")
                .to_path_buf()
        })
}

/// A vector file in `tests/vectors/` (written by mpiFileUtils), e.g. `vector("tree.mfu")`.
pub fn vector(name: &str) -> PathBuf {
    let p = root().join("tests/vectors").join(name);
    assert!(
        p.is_file(),
        "{} is missing: the interop vectors live in tests/vectors",
        p.display()
    );
    p
}

fn binary(var: &str, default: PathBuf) -> PathBuf {
    let p = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    assert!(
        p.is_file(),
        "{} not found: build it (`cargo build -p mfu-rs`) or run the suite with `cargo xtask test` (sets {var})",
        p.display()
    );
    p
}

/// The mfu-rs binary built with MPI.
pub fn bin() -> PathBuf {
    binary("MFU_RS_BIN", root().join("target/debug/mfu-rs"))
}

/// The mfu-rs binary built without MPI.
pub fn nompi_bin() -> PathBuf {
    binary("MFU_RS_NOMPI_BIN", root().join("target/nompi/debug/mfu-rs"))
}

/// A directory every user can enter: the system's temporary directory when each of its
/// ancestors lets others through (a private `TMPDIR`, e.g. under a 0700 home, does not), else
/// `/tmp`. Tests that run tools as nobody put their trees and binaries here, never beside the
/// clone, whose path may be private.
pub fn reachable_root() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let tmp = std::env::temp_dir();
    let open = tmp.ancestors().all(|a| {
        std::fs::metadata(a).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o001 != 0)
    });
    if open {
        tmp
    } else {
        PathBuf::from("/tmp")
    }
}

/// A fresh temporary directory (mode 0755) in [`reachable_root`], for a test that runs a tool
/// as nobody.
pub fn nobody_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::Builder::new()
        .prefix("mfu-rs-nobody-")
        .tempdir_in(reachable_root())
        .expect("a temporary directory nobody can reach");
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    t
}

/// `program` (an mfu-rs binary, with `mfu-rs-mpi` beside it when there is one) as a path
/// nobody can execute: hard links (copies across file systems) in a directory of
/// [`reachable_root`] named after the binary's device, inode and mtime, so one build is placed
/// once whatever the number of test processes, and a rebuild gets a new directory (older ones
/// of this user are removed).
pub fn reachable_program(program: &Path) -> PathBuf {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    static PLACED: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());
    let mut placed = PLACED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, to)) = placed.iter().find(|(from, _)| from == program) {
        return to.clone();
    }
    let m = std::fs::metadata(program).expect("the mfu-rs binary");
    let base = reachable_root().join(format!("mfu-rs-tests-bin-{}", unsafe { libc::geteuid() }));
    let _ = std::fs::create_dir(&base);
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let name = format!(
        "{}-{}-{}",
        m.dev(),
        m.ino(),
        m.mtime_nsec() + m.mtime() * 1_000_000_000
    );
    let dir = base.join(&name);
    if !dir.join("done").exists() {
        // Made under a temporary name and renamed: a concurrent test process sees either
        // nothing or the whole directory.
        let part = base.join(format!("{name}.part-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&part);
        std::fs::create_dir(&part).unwrap();
        std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755)).unwrap();
        for exe in ["mfu-rs", "mfu-rs-mpi"] {
            let from = program.with_file_name(exe);
            if !from.is_file() {
                continue;
            }
            let to = part.join(exe);
            if std::fs::hard_link(&from, &to).is_err() {
                std::fs::copy(&from, &to).unwrap();
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        std::fs::write(part.join("done"), b"").unwrap();
        if std::fs::rename(&part, &dir).is_err() {
            // Another process placed it first.
            let _ = std::fs::remove_dir_all(&part);
        }
        // Builds placed by earlier runs are of no use any more.
        for old in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let stale = old
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|e| e.as_secs() > 3600));
            if old.file_name() != name.as_str() && stale {
                let _ = std::fs::remove_dir_all(old.path());
            }
        }
    }
    let to = dir.join(program.file_name().expect("a binary's name"));
    placed.push((program.to_path_buf(), to.clone()));
    to
}

/// The state directory every tool run by the tests gets (`XDG_STATE_HOME`): the default
/// checkpoints of tools without an output file go there, not into the user's home, and no
/// checkpoint a test leaves behind is found by a run of another test binary. One per test
/// process, world-writable and sticky as `/tmp` (runs as nobody share it).
pub fn state_home() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("mfu-rs-tests-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the tests' state directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777))
            .expect("open the tests' state directory to every user");
        dir
    })
}

/// Remove launcher variables inherited from an outer job (so a test decides how it is launched),
/// and give the run the tests' own state directory ([`state_home`]).
pub fn clean_env(cmd: &mut Command) -> &mut Command {
    cmd.env("XDG_STATE_HOME", state_home());
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().to_string();
        if k.starts_with("OMPI_COMM_WORLD")
            || k.starts_with("PMI")
            || k.starts_with("SLURM_")
            || k == "MFU_RANKS"
        {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// `mfu-rs ARGS` as one process.
pub fn mfu(args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    clean_env(&mut cmd).args(args);
    cmd
}

/// The environment `mpirun` needs here: allowed to run as root, oversubscribed (2 cores),
/// shared memory without single-copy (containers), launcher variables of an outer job removed,
/// and a session directory of its own ([`own_session_dir`]).
pub fn mpi_env(cmd: &mut Command) -> &mut Command {
    clean_env(cmd)
        .env("OMPI_MCA_orte_tmpdir_base", own_session_dir())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("OMPI_MCA_btl", "self,vader")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        // PMIx's security by Unix credentials, not munge: with munge installed (for Slurm) but
        // no munged on the system socket, each mpirun retried it for 2.3 s before starting.
        .env("PMIX_MCA_psec", "native")
}

/// A new directory for one `mpirun` to keep its session directory in (Open MPI's
/// `orte_tmpdir_base`). Without it every `mpirun` of the machine creates `/tmp/ompi.HOST.UID`
/// when it starts and removes it when it ends (if empty): two that start and end at the same
/// time (tests in parallel, the stages of a pipeline) race, and one dies before starting its
/// ranks ("A call to mkdir was unable to create the desired directory ... File exists",
/// open-mpi/ompi#8510), so that the next stage of a pipeline reads an empty list. World-writable
/// and sticky (as `/tmp`), for the tests that run `mpirun` as another user. The directories are
/// left empty under `TMPDIR/mfu-tests-ompi.PID/`.
pub fn own_session_dir() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = session_parent().join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// `TMPDIR/mfu-tests-ompi.PID/`, created once per test process, with the script that `shell`'s
/// `$R` starts `mpirun` through (`own-session LAUNCHER ARGS`: each `mpirun` of a script gets a
/// session directory of its own, as [`own_session_dir`]).
fn session_parent() -> &'static Path {
    use std::os::unix::fs::PermissionsExt;
    static PARENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PARENT.get_or_init(|| {
        // `$M` and `$R` are this directory's scripts, used unquoted by the test scripts: its
        // path must be one shell word (a TMPDIR with a blank would split it).
        let tmp = std::env::temp_dir();
        let tmp = if tmp
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .any(u8::is_ascii_whitespace)
        {
            PathBuf::from("/tmp")
        } else {
            tmp
        };
        let dir = tmp.join(format!("mfu-tests-ompi.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = dir.join("own-session");
        std::fs::write(
            &script,
            "#!/bin/sh\n\
             d=$(mktemp -d \"${0%/*}/s.XXXXXX\") && chmod 1777 \"$d\" || exit 1\n\
             OMPI_MCA_orte_tmpdir_base=$d exec \"$@\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        // `$M` and `$R`: the binary alone, and under the launcher with 2 ranks. Scripts, so
        // that a binary whose path holds a blank (a clone under "a b/") is still one word.
        let bin = shell_quote(&bin());
        for (name, body) in [
            ("mfu", format!("exec {bin} \"$@\"\n")),
            (
                "mfu-np2",
                format!(
                    "exec \"${{0%/*}}/own-session\" {} -np 2 {bin} \"$@\"\n",
                    shell_quote(Path::new(&launcher()))
                ),
            ),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        dir
    })
}

/// `path` as one word of a POSIX shell: in single quotes, each `'` written `'\''`.
pub fn shell_quote(path: &Path) -> String {
    format!(
        "'{}'",
        path.as_os_str().to_string_lossy().replace('\'', "'\\''")
    )
}

/// A script (one shell word) that runs the mfu-rs binary: `shell`'s `$M`.
pub fn shell_binary() -> PathBuf {
    session_parent().join("mfu")
}

/// A script (one shell word) that runs mfu-rs under the launcher with 2 ranks, each launch
/// with a session directory of its own: `shell`'s `$R`.
pub fn shell_launcher() -> String {
    session_parent().join("mfu-np2").display().to_string()
}

/// The MPI launcher the tests start ranks with: `mpirun` (Open MPI, the system's default), or
/// `MFU_TEST_MPIRUN` (`cargo xtask test` runs the multi-rank tests again with MPICH's
/// `mpiexec.mpich` and an mfu-rs built against MPICH).
pub fn launcher() -> String {
    std::env::var("MFU_TEST_MPIRUN").unwrap_or_else(|_| "mpirun".to_string())
}

/// `mpirun -np N PROGRAM ARGS` (see [`mpi_env`], [`launcher`]).
pub fn mpirun(np: usize, program: &Path) -> Command {
    let mut cmd = Command::new(launcher());
    mpi_env(&mut cmd)
        .args(["-np", &np.to_string()])
        .arg(program);
    cmd
}

/// Every path below `root`, relative to it (without the root itself), as bytes.
pub fn listing(root: &Path) -> std::collections::BTreeSet<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    fn walk(dir: &Path, base: usize, out: &mut std::collections::BTreeSet<Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            out.insert(p.as_os_str().as_bytes()[base..].to_vec());
            if std::fs::symlink_metadata(&p).unwrap().is_dir() {
                walk(&p, base, out);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(root, root.as_os_str().len() + 1, &mut out);
    out
}

/// Run the shell pipeline `script` (`sh -c`, with `set -e`) where `$M` is the mfu-rs binary
/// and `$R` runs it under `mpirun -np 2`; expect exit `code` (the status of the script's last
/// pipeline) and return the output.
pub fn shell(script: &str, code: i32) -> Output {
    let mut cmd = Command::new("sh");
    mpi_env(&mut cmd)
        .env("M", shell_binary())
        .env("R", shell_launcher())
        .args(["-c", &format!("set -e; {script}")]);
    expect_status(&mut cmd, code)
}

/// The temporary name (`.BASE.HOST.PID.mfu-tmp`, [`flist::atomic`]) of a process of this host
/// that is gone: what a run killed outright leaves behind for the output `base`.
pub fn dead_process_temporary(base: &str) -> String {
    let mut child = Command::new("true").spawn().expect("run true");
    let pid = child.id();
    child.wait().expect("wait for true");
    let name = flist::atomic::temp_name_of(base.as_bytes(), &flist::atomic::host(), pid);
    String::from_utf8(name).expect("a UTF-8 host name")
}

/// The temporary name of a process of this host that is running (init, pid 1).
pub fn live_process_temporary(base: &str) -> String {
    let name = flist::atomic::temp_name_of(base.as_bytes(), &flist::atomic::host(), 1);
    String::from_utf8(name).expect("a UTF-8 host name")
}

/// Wait until every entry under `dir` changed (ctime) more than `mfu::unstable::engine::racy::WINDOW`
/// ago: tools then take the files as settled and do not read them again after copying them
/// (for tests whose damage to a copy only a later check may see).
pub fn wait_until_settled(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let mut newest = (0i64, 0i64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        newest = newest.max((m.ctime(), m.ctime_nsec()));
        if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    let settled = std::time::UNIX_EPOCH
        + std::time::Duration::new(newest.0 as u64, newest.1 as u32)
        + mfu::unstable::engine::racy::WINDOW
        + std::time::Duration::from_millis(100);
    if let Ok(left) = settled.duration_since(std::time::SystemTime::now()) {
        std::thread::sleep(left);
    }
}

/// `len` pseudo-random bytes (xorshift64), the same for the same `seed`: file contents that
/// differ from file to file and do not compress.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Run `cmd` with the race-test pause (`MFU_RS_TEST_PAUSE_AFTER_LISTING`): once the tool has
/// listed its entries and before it acts on them, `change` runs (swap a directory for a
/// symlink, ...); then the tool goes on. Returns the output; panics when the tool never
/// reaches the pause (within 60 s) or `change` panics.
pub fn with_change_after_listing(cmd: &mut Command, change: impl FnOnce()) -> Output {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("pause");
    cmd.env("MFU_RS_TEST_PAUSE_AFTER_LISTING", &base)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let ready = dir.path().join("pause.ready");
    let start = Instant::now();
    while !ready.exists() {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} ended before the pause after its listing\n--- stderr\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{cmd:?} never reached the pause after its listing"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    change();
    std::fs::write(dir.path().join("pause.go"), b"").unwrap();
    child.wait_with_output().unwrap()
}

/// The processes a batch system signals for the job started as `child`: `child` itself, or,
/// when it is a launcher (`mpirun`, MPICH's `mpiexec` and its proxies), the rank processes it
/// started (as `scancel` and a time limit signal every task). Signalling `mpirun` instead makes
/// Open MPI abort the job: it passes SIGTERM on, then kills the ranks after a grace period that
/// a loaded machine can exceed.
pub fn job_pids(child: u32) -> Vec<i32> {
    const LAUNCHERS: &[&str] = &[
        "mpirun",
        "mpiexec",
        "orterun",
        "prterun",
        "orted",
        "prted",
        "hydra_pmi_proxy",
    ];
    let comm = std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
    if !LAUNCHERS.iter().any(|l| comm.trim_end().starts_with(l)) {
        return vec![child as i32];
    }
    let children: Vec<u32> = std::fs::read_dir(format!("/proc/{child}/task"))
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
                .flat_map(|c| {
                    c.split_whitespace()
                        .filter_map(|p| p.parse().ok())
                        .collect::<Vec<u32>>()
                })
                .collect()
        })
        .unwrap_or_default();
    children.into_iter().flat_map(job_pids).collect()
}

/// Start `cmd`, wait until `ready()` holds (polled every 5 ms, up to 60 s: the work is under
/// way, say its temporary file exists), send it `signal` and return its output. Panics when
/// the command ends before (make its input bigger).
pub fn signal_when(
    cmd: &mut Command,
    signal: rustix::process::Signal,
    ready: impl Fn() -> bool,
) -> Output {
    use std::time::{Duration, Instant};
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let start = Instant::now();
    while !ready() {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} ended before it could be signalled\n--- stderr\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{cmd:?}: not ready for the signal after 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a child's pid");
    rustix::process::kill_process(pid, signal).expect("signal the child");
    child.wait_with_output().unwrap()
}

/// For the tests that run a tool inside the test process (ranks as threads, through
/// `steal::local::run`): hold it for the whole test. All the end-to-end tests share one process
/// (one test binary), and such runs share process-wide state: the stop flag that SIGINT sets
/// (`steal::signals::stop_flag`, read by the tools that install the handlers) and the pause
/// after the listing (`mfu::unstable::engine::test_seam::change_at_next_pause`). Holding the lock, a test
/// that raises SIGINT or queues a change knows that no other in-process run sees the signal or
/// takes the change. Tests that only start the binary need not take it.
pub fn serial() -> MutexGuard<'static, ()> {
    static IN_PROCESS: Mutex<()> = Mutex::new(());
    // A test that failed while holding it has poisoned it; the next one still runs.
    IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner())
}

/// `cmd.output()`, trying again while the program is busy being written (ETXTBSY): a binary
/// this process has just copied (to run it as another user, or alone) may still be open for
/// writing in a child that another test forked at that moment, until that child's exec.
pub fn output_of(cmd: &mut Command) -> Output {
    let mut tries = 0;
    loop {
        match cmd.output() {
            Ok(out) => return out,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("start {cmd:?}: {e}"),
        }
    }
}

/// Run and return the output, failing with stdout/stderr shown when the status differs from `code`.
pub fn expect_status(cmd: &mut Command, code: i32) -> Output {
    let out = output_of(cmd);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{cmd:?}\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// How a [`Tool`] is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launch {
    /// The MPI build as one process; `Some(n)`: `--ranks n` thread ranks.
    Process(Option<usize>),
    /// The MPI build under `mpirun -np N` (see [`mpirun`]).
    Mpi(usize),
    /// The build without MPI as one process; `Some(n)`: `--ranks n`.
    NoMpi(Option<usize>),
}

/// One run of mfu-rs, built step by step and then [run](Tool::run):
///
/// ```no_run
/// use mfu_tests::Tool;
/// let out = Tool::new("cp").np(2).args(["-p", "/a", "/b"]).run().assert_status(0);
/// assert!(out.stdout_str().contains("Copied "));
/// ```
///
/// Launcher variables of an outer job are removed (see [`clean_env`]); under `mpirun` the
/// environment of [`mpi_env`] is set. Variables given with [`Tool::env`] go to the child only:
/// the test process's environment is never changed (tests share one process).
#[derive(Debug, Clone)]
pub struct Tool {
    words: Vec<OsString>,
    launch: Launch,
    env: Vec<(OsString, Option<OsString>)>,
    stdin: Option<Vec<u8>>,
    dir: Option<PathBuf>,
    umask: Option<u32>,
    nobody: bool,
    program: Option<PathBuf>,
}

impl Tool {
    /// `mfu-rs NAME` (a tool, or an old name such as `dcp`), as one process.
    pub fn new(name: &str) -> Tool {
        let mut t = Tool::bare();
        t.words.push(name.into());
        t
    }

    /// `mfu-rs` with no tool word (for `--version`, `--help`, a missing tool, ...).
    pub fn bare() -> Tool {
        Tool {
            words: Vec::new(),
            launch: Launch::Process(None),
            env: Vec::new(),
            stdin: None,
            dir: None,
            umask: None,
            nobody: false,
            program: None,
        }
    }

    /// Run with `n` thread ranks in one process (`mfu-rs --ranks N`).
    pub fn ranks(mut self, n: usize) -> Tool {
        self.launch = match self.launch {
            Launch::NoMpi(_) => Launch::NoMpi(Some(n)),
            _ => Launch::Process(Some(n)),
        };
        self
    }

    /// Run under `mpirun -np N`.
    pub fn mpi(mut self, n: usize) -> Tool {
        self.launch = Launch::Mpi(n);
        self
    }

    /// `np` ranks the way most tests want them: 1 is one process without a launcher, more run
    /// under `mpirun -np N`.
    pub fn np(self, np: usize) -> Tool {
        if np == 1 {
            Tool {
                launch: Launch::Process(None),
                ..self
            }
        } else {
            self.mpi(np)
        }
    }

    /// Run the binary built without MPI ([`nompi_bin`]), one process.
    pub fn nompi(mut self) -> Tool {
        self.launch = match self.launch {
            Launch::Process(r) | Launch::NoMpi(r) => Launch::NoMpi(r),
            Launch::Mpi(_) => Launch::NoMpi(None),
        };
        self
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Tool {
        self.words.push(arg.as_ref().to_owned());
        self
    }

    /// More arguments.
    pub fn args<I, S>(mut self, args: I) -> Tool
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.words
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Set `key=value` in the child's environment.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Tool {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Remove `key` from the child's environment.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Tool {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Feed `bytes` to the child's stdin (without it, stdin is empty).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Tool {
        self.stdin = Some(bytes.into());
        self
    }

    /// Run in `dir`.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Tool {
        self.dir = Some(dir.as_ref().to_owned());
        self
    }

    /// Start the child (and so mpirun and its ranks) with this umask.
    pub fn umask(mut self, umask: u32) -> Tool {
        self.umask = Some(umask);
        self
    }

    /// Run as the unprivileged user nobody (uid and gid 65534, no supplementary groups), through
    /// `setpriv` (around `mpirun` when there is one), in `/` unless [`Tool::current_dir`] says
    /// otherwise. The binary runs from [`reachable_program`]; the test's trees must be where
    /// nobody can reach them too ([`nobody_tempdir`]).
    pub fn as_nobody(mut self) -> Tool {
        self.nobody = true;
        self
    }

    /// Run this copy of the mfu-rs binary instead of [`bin`] (or [`nompi_bin`]).
    pub fn program(mut self, path: impl AsRef<Path>) -> Tool {
        self.program = Some(path.as_ref().to_owned());
        self
    }

    /// The command this run is (to spawn it yourself: signals, pauses, pipes).
    pub fn command(&self) -> Command {
        let ranks = |cmd: &mut Command, r: Option<usize>| {
            if let Some(n) = r {
                cmd.args(["--ranks", &n.to_string()]);
            }
        };
        let program = match (&self.program, self.launch) {
            (Some(p), _) => p.clone(),
            (None, Launch::NoMpi(_)) => nompi_bin(),
            (None, _) => bin(),
        };
        let program = if self.nobody {
            reachable_program(&program)
        } else {
            program
        };
        let mut cmd = if self.nobody {
            let mut c = Command::new("setpriv");
            clean_env(&mut c).args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
            // The test's own working directory is in the clone, which nobody may not enter
            // (mpirun gives up when it cannot read it).
            c.current_dir("/");
            c
        } else {
            let mut c = Command::new(&program);
            clean_env(&mut c);
            c
        };
        match self.launch {
            Launch::Process(r) | Launch::NoMpi(r) => {
                if self.nobody {
                    cmd.arg(&program);
                }
                ranks(&mut cmd, r);
            }
            Launch::Mpi(n) => {
                if self.nobody {
                    cmd.arg(launcher());
                } else {
                    cmd = Command::new(launcher());
                }
                mpi_env(&mut cmd)
                    .args(["-np", &n.to_string()])
                    .arg(&program);
            }
        }
        cmd.args(&self.words);
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        if let Some(mask) = self.umask {
            use std::os::unix::process::CommandExt;
            // SAFETY: umask is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    libc::umask(mask as libc::mode_t);
                    Ok(())
                });
            }
        }
        cmd
    }

    /// Run to the end and return the output, whatever the exit status.
    pub fn run(&self) -> Run {
        let mut cmd = self.command();
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = spawn(&mut cmd);
        let feeder = match (child.stdin.take(), &self.stdin) {
            (Some(mut pipe), Some(bytes)) => {
                let bytes = bytes.clone();
                Some(std::thread::spawn(move || {
                    use std::io::Write;
                    // The tool may exit without reading it all: a broken pipe is its business.
                    let _ = pipe.write_all(&bytes);
                }))
            }
            _ => None,
        };
        let output = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("wait for {cmd:?}: {e}"));
        if let Some(f) = feeder {
            f.join().expect("stdin feeder");
        }
        Run {
            what: format!("{cmd:?}"),
            output,
        }
    }

    /// Run and check the exit status (see [`Run::assert_status`]).
    pub fn expect(&self, code: i32) -> Run {
        self.run().assert_status(code)
    }
}

/// Spawn `cmd`, trying again while the program is busy being written (ETXTBSY: a file this
/// process just wrote, whose descriptor a child forked by another test at that moment still
/// holds until its own exec).
pub fn spawn(cmd: &mut Command) -> std::process::Child {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Ok(child) => return child,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("start {cmd:?}: {e}"),
        }
    }
}

/// Whether process `pid` has exited but is not reaped yet (state Z in `/proc`).
pub fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| s.contains("State:\tZ"))
}

/// Start `cmd`, wait until `started_work` says it has begun (a temporary is there), SIGKILL it
/// and wait until it is a zombie: dead, and left unreaped (as a killed `mpirun`'s rank is until
/// init reaps it) until the caller waits for the returned child. Panics after 60 s.
pub fn kill_leaving_a_zombie(
    cmd: &mut Command,
    started_work: impl Fn() -> bool,
) -> std::process::Child {
    use std::time::{Duration, Instant};
    let mut child = spawn(cmd);
    let started = Instant::now();
    while !started_work() {
        assert!(child.try_wait().unwrap().is_none(), "ended before the kill");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "did not start its work"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let pid = child.id();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    while !is_zombie(pid) {
        assert!(started.elapsed() < Duration::from_secs(60), "not dead");
        std::thread::sleep(Duration::from_millis(2));
    }
    child
}

/// The output of a finished [`Tool`] run (it dereferences to [`Output`]).
#[derive(Debug)]
pub struct Run {
    /// Status, stdout and stderr.
    pub output: Output,
    what: String,
}

impl std::ops::Deref for Run {
    type Target = Output;
    fn deref(&self) -> &Output {
        &self.output
    }
}

impl From<Run> for Output {
    fn from(r: Run) -> Output {
        r.output
    }
}

impl Run {
    /// The exit code (`None` when a signal ended it).
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    /// Stdout as text (lossily).
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Stderr as text (lossily).
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn shown(&self) -> String {
        format!(
            "{}\n--- stdout\n{}\n--- stderr\n{}",
            self.what,
            self.stdout_str(),
            self.stderr_str()
        )
    }

    /// Panic, showing the command, stdout and stderr, unless it exited with `code`.
    #[track_caller]
    pub fn assert_status(self, code: i32) -> Run {
        assert_eq!(self.code(), Some(code), "{}", self.shown());
        self
    }

    /// Panic unless stdout holds `needle`.
    #[track_caller]
    pub fn stdout_contains(&self, needle: &str) -> &Run {
        assert!(
            self.stdout_str().contains(needle),
            "want {needle:?} on stdout\n{}",
            self.shown()
        );
        self
    }

    /// Panic unless stderr holds `needle`.
    #[track_caller]
    pub fn stderr_contains(&self, needle: &str) -> &Run {
        assert!(
            self.stderr_str().contains(needle),
            "want {needle:?} on stderr\n{}",
            self.shown()
        );
        self
    }
}

/// Build the tree a vector describes (seed 1: `tree.mfu`; seed 3, ASCII names: the dtar
/// archive) under `dir` with the project's generator, and return its manifest (the JSON of
/// `tests/vectors/manifest-*.json`).
pub fn make_vector_tree(dir: &Path, seed: u32, ascii: bool) -> serde_json::Value {
    let entries = vectree::build(dir, seed, ascii).unwrap_or_else(|e| panic!("vector tree: {e}"));
    serde_json::from_str(&vectree::manifest_json(&entries)).expect("manifest JSON")
}

/// What the tar tests share: mfu-rs tar at N ranks, and the reference tools (GNU tar, bsdtar).
pub mod tar_tools {
    use std::process::{Command, Stdio};

    pub const SETUP_HINT: &str = "install it with `cargo xtask setup`";

    /// Bytes (a tool's output) as text, lossily.
    pub fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    /// `mfu-rs tar` as one process (np = 1) or under `mpirun -np N`.
    pub fn tar_np(np: usize) -> Command {
        super::Tool::new("tar").np(np).command()
    }

    /// An external program that must exist (a missing one fails the test with the setup hint).
    pub fn tool(program: &str) -> Command {
        let ok = Command::new(program)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Err(e) = ok {
            panic!("`{program}` is needed by this test and could not start ({e}): {SETUP_HINT}");
        }
        Command::new(program)
    }

    /// GNU tar with UTC times, the C locale and names printed as raw bytes.
    pub fn gnu_tar() -> Command {
        let v = tool("tar").arg("--version").output().unwrap();
        assert!(
            text(&v.stdout).contains("GNU tar"),
            "`tar` must be GNU tar ({SETUP_HINT}): {}",
            text(&v.stdout)
        );
        let mut c = Command::new("tar");
        c.env("TZ", "UTC")
            .env("LC_ALL", "C")
            .arg("--quoting-style=literal");
        c
    }
}

/// Pids of the processes (other than this one) whose command line holds `needle`: ranks a
/// launcher left behind, a tool still running.
pub fn processes_mentioning(needle: &[u8]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if cmd.windows(needle.len()).any(|w| w == needle) {
                out.push(pid);
            }
        }
    }
    out
}

/// How a test starts a tool, by name: one process, three thread ranks, `mpirun -np 2`.
pub type NamedLaunch = (&'static str, fn(Tool) -> Tool);

/// The three launches every parallel tool is tested at: one process, `--ranks 3` and
/// `mpirun -np 2`.
pub fn launches() -> Vec<NamedLaunch> {
    vec![
        ("np 1", |t| t),
        ("--ranks 3", |t| t.ranks(3)),
        ("mpirun -np 2", |t| t.mpi(2)),
    ]
}

#[cfg(test)]
mod harness_tests {
    use super::*;

    fn words(cmd: &Command) -> Vec<String> {
        std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn each_launch_builds_its_command_line() {
        let b = bin().display().to_string();
        let n = nompi_bin().display().to_string();
        assert_eq!(words(&Tool::new("cp").arg("a").command()), [&b, "cp", "a"]);
        assert_eq!(
            words(&Tool::new("cp").ranks(3).args(["a", "b"]).command()),
            [&b, "--ranks", "3", "cp", "a", "b"]
        );
        assert_eq!(words(&Tool::new("cp").np(1).command()), [&b, "cp"]);
        assert_eq!(
            words(&Tool::new("cp").np(2).command()),
            ["mpirun", "-np", "2", &b, "cp"]
        );
        assert_eq!(
            words(&Tool::new("walk").nompi().ranks(2).command()),
            [&n, "--ranks", "2", "walk"]
        );
        // As nobody: the binary from a place nobody reaches, started in `/`.
        let reachable = reachable_program(&bin());
        assert!(
            reachable.starts_with(reachable_root()),
            "{}",
            reachable.display()
        );
        let nobody = Tool::new("rm").mpi(4).as_nobody().command();
        assert_eq!(
            words(&nobody),
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                "mpirun",
                "-np",
                "4",
                &reachable.display().to_string(),
                "rm"
            ]
        );
        assert_eq!(nobody.get_current_dir(), Some(Path::new("/")));
        let cmd = Tool::new("cp").env("A", "1").env_remove("B").command();
        let envs: Vec<_> = cmd.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("A"), Some(OsStr::new("1")))));
        assert!(envs.contains(&(OsStr::new("B"), None)));
    }

    #[test]
    fn a_run_feeds_stdin_and_checks_the_status() {
        // `walk -i -` reads a list from stdin: an empty one is a usage error or an empty walk;
        // whichever, the status and the output come back and are checked.
        let out = Tool::bare().arg("--version").run().assert_status(0);
        assert!(!out.stdout_str().is_empty());
        let out = Tool::new("no-such-tool").stdin("ignored").run();
        assert_eq!(out.code(), Some(2), "{}", out.shown());
        out.stderr_contains("no-such-tool");
    }
}
