//! `cargo xtask bench section resume-all [--quick] [--tools LIST] [--fs tmpfs|disk]` (issue 33):
//! how much work a tool redoes when it is stopped (kill -9, or SIGTERM as at a job's time limit)
//! and run again until it completes, and whether the result then equals an uninterrupted run's.
//!
//! For each tool of [`tools::all`] (cp and sync, resumable by rerun, and the tools issue 33
//! makes resumable), on tmpfs (`/dev/shm`) and on the workspace's disk, at np 1 and under
//! `mpirun -np 2`: one uninterrupted run (its time T, its bytes B, its result kept); then for
//! SIGKILL and SIGTERM at 25, 50 and 75% of T: the same command, signalled at that point, then
//! run again (no signal) until it exits as the uninterrupted run did and says nothing of being
//! stopped (at most [`MAX_RUNS`] runs). Reported per row: the redone work, bytes of all those
//! runs / B, and whether the result equals the uninterrupted run's (archives and files
//! byte-identical, trees equal, lists equal after sorting, reports equal); and, per tool, the
//! checkpoint's overhead on an uninterrupted run (the median of the ratios of 9 pairs of runs,
//! or `--pairs N`, with and without `--no-checkpoint`, in alternating order, wall time and CPU
//! time of every process, each pair printed on stderr, when the tool has that flag; else n/a).
//! This VM's speed drifts by tens of percent over a minute: 9 pairs can fall on the changes,
//! and a claim of 3% wants 31. `--np LIST` keeps those rank counts; `--overhead-only` skips the
//! signalled runs (a row per tool and rank count with the overhead alone). A tool that does not
//! resume shows about 1 + the point.
//!
//! Bytes are the processes' logical I/O, `rchar + wchar` of `/proc/PID/io` (read/write-family
//! calls, `copy_file_range` and `sendfile` included; mmap not; the same on tmpfs, where
//! `read_bytes`/`write_bytes` stay 0). They are taken exactly, kill -9 included: the harness
//! is a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every process of a run (mpirun, the
//! ranks, the commands of find --exec) ends as its descendant and is reaped by it, and the
//! kernel adds a reaped child's counters to its parent's; the harness's own `/proc/self/io`
//! before and after a run gives the run's bytes. The signal goes to every process of the run
//! at once, as Slurm's step daemon does at a time limit (mpirun and the ranks alike).
//!
//! Inputs are made per tool and sized so that an uninterrupted run at np 1 takes 2-4 s on this
//! machine (calibrated: one run at the tool's base scale, then the scale grown to aim at 3 s, up
//! to what tmpfs holds: [`tools::Input::max_scale`]).
//! `--quick`: tiny inputs, no calibration, tmpfs only, np 1, both signals at 50% only: a
//! smoke test of the harness. The table goes to stdout and `target/bench/resume-all.md`.

pub mod tools;

use super::fsutil::{flush_fs, remove};
use super::measure::{loadavg, median};
use anyhow::{bail, ensure, Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tools::Tool;

/// Runs of one sequence at most (the signalled one included).
pub const MAX_RUNS: usize = 8;
/// Time a run has to end after SIGTERM before it is killed (a time limit's `KillWait` is 30 s).
const TERM_GRACE: Duration = Duration::from_secs(30);
/// What an uninterrupted run at np 1 should take after calibration (s), unless the tool asks
/// otherwise ([`tools::Tool::aim_secs`]).
pub const AIM_SECS: f64 = 3.0;
/// Pairs of uninterrupted runs, with and without the checkpoint, whose ratios' median is the
/// overhead: sub-second runs swing by tens of percent, one pair at a time.
const OVERHEAD_PAIRS: usize = 9;

/// What the section is asked.
#[derive(Debug, PartialEq)]
pub struct Opts {
    /// One point, tmpfs, np 1, no calibration.
    pub quick: bool,
    /// Only these tools (names of [`tools::all`]).
    pub tools: Option<Vec<String>>,
    /// Only this file system (`tmpfs` or `disk`).
    pub fs: Option<String>,
    /// Pairs of uninterrupted runs for the overhead (default [`OVERHEAD_PAIRS`]).
    pub pairs: usize,
    /// Only these rank counts (default 1 and 2).
    pub nps: Option<Vec<usize>>,
    /// The overhead only: no signalled runs.
    pub overhead_only: bool,
}

/// Parse the section's options (`--quick`, `--tools a,b`, `--fs tmpfs|disk`, `--pairs N`,
/// `--np 1,2`, `--overhead-only`).
pub fn parse(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        quick: false,
        tools: None,
        fs: None,
        pairs: OVERHEAD_PAIRS,
        nps: None,
        overhead_only: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--overhead-only" => o.overhead_only = true,
            "--pairs" => {
                let n = it.next().context("--pairs needs a count")?;
                o.pairs = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .with_context(|| format!("--pairs: a count above 0, not {n:?}"))?;
            }
            "--np" => {
                let l = it.next().context("--np needs a list of rank counts")?;
                let nps = l
                    .split(',')
                    .map(|n| n.parse().ok().filter(|&n: &usize| n > 0))
                    .collect::<Option<Vec<usize>>>()
                    .with_context(|| format!("--np: rank counts above 0, not {l:?}"))?;
                o.nps = Some(nps);
            }
            "--fs" => {
                let f = it.next().context("--fs needs tmpfs or disk")?;
                ensure!(
                    f == "tmpfs" || f == "disk",
                    "--fs: tmpfs or disk, not {f:?}"
                );
                o.fs = Some(f.clone());
            }
            "--tools" => {
                let l = it.next().context("--tools needs a list")?;
                let names: Vec<String> = l.split(',').map(str::to_string).collect();
                let known: Vec<&str> = tools::all().iter().map(|t| t.name).collect();
                for n in &names {
                    ensure!(
                        known.contains(&n.as_str()),
                        "--tools: unknown tool {n:?} (tools: {})",
                        known.join(",")
                    );
                }
                o.tools = Some(names);
            }
            x => bail!(
                "resume-all: unknown option {x:?} (--quick, --tools LIST, --fs tmpfs|disk, \
                 --pairs N, --np LIST, --overhead-only)"
            ),
        }
    }
    Ok(o)
}

/// The logical I/O of processes, bytes (`/proc/PID/io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Io {
    /// Bytes asked of read-family calls.
    pub rchar: u64,
    /// Bytes given to write-family calls.
    pub wchar: u64,
    /// Bytes fetched from storage.
    pub read_bytes: u64,
    /// Bytes sent to storage.
    pub write_bytes: u64,
}

impl Io {
    /// `rchar + wchar`: the measure of work.
    pub fn work(&self) -> u64 {
        self.rchar + self.wchar
    }

    fn since(&self, before: &Io) -> Io {
        Io {
            rchar: self.rchar.saturating_sub(before.rchar),
            wchar: self.wchar.saturating_sub(before.wchar),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(before.write_bytes),
        }
    }

    fn add(&mut self, o: &Io) {
        self.rchar += o.rchar;
        self.wchar += o.wchar;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
    }
}

/// Parse the text of `/proc/PID/io`.
pub fn parse_io(text: &str) -> Option<Io> {
    let mut io = Io::default();
    let mut seen = 0;
    for line in text.lines() {
        let (k, v) = line.split_once(':')?;
        let v: u64 = v.trim().parse().ok()?;
        match k {
            "rchar" => io.rchar = v,
            "wchar" => io.wchar = v,
            "read_bytes" => io.read_bytes = v,
            "write_bytes" => io.write_bytes = v,
            _ => continue,
        }
        seen += 1;
    }
    (seen == 4).then_some(io)
}

/// This process's I/O, its reaped descendants' included.
fn self_io() -> Result<Io> {
    let text = std::fs::read_to_string("/proc/self/io").context("read /proc/self/io")?;
    parse_io(&text).context("/proc/self/io has no rchar/wchar/read_bytes/write_bytes")
}

/// A signal sent at a point of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stop {
    /// The signal.
    pub signal: i32,
    /// After this long.
    pub after: Duration,
}

/// One run of a command.
pub struct Outcome {
    /// Wall time from spawn to the exit of the command (s).
    pub secs: f64,
    /// Its exit code (`None`: a signal ended it).
    pub code: Option<i32>,
    /// The signal was sent while it ran.
    pub signalled: bool,
    /// It did not stop within [`TERM_GRACE`] of SIGTERM and was killed.
    pub term_ignored: bool,
    /// Bytes of all its processes.
    pub io: Io,
    /// CPU time (user + system) of all its processes (s).
    pub cpu: f64,
    /// Its stdout.
    pub stdout: Vec<u8>,
    /// Its stderr.
    pub stderr: String,
}

/// The processes below this one (as a subreaper, every process a run started).
fn descendants() -> Vec<libc::pid_t> {
    let me = std::process::id() as libc::pid_t;
    let mut parent = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // The name may hold spaces and parentheses: the fields follow the last ')'.
            let ppid = stat.rfind(')').and_then(|i| {
                stat[i + 1..]
                    .split_whitespace()
                    .nth(1)?
                    .parse::<libc::pid_t>()
                    .ok()
            });
            if let Some(ppid) = ppid {
                parent.push((pid, ppid));
            }
        }
    }
    let mut found = vec![me];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// Send `sig` to every process of the run, once each.
fn signal_all(sig: i32) {
    for pid in descendants() {
        // SAFETY: kill(2) with a pid read from /proc; a process gone since is ESRCH.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Become a child subreaper (once): orphans of a run (ranks whose mpirun died first) are
/// reparented here and reaped here, so that their I/O is counted.
fn subreaper() -> Result<()> {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
    });
    ensure!(ok, "prctl(PR_SET_CHILD_SUBREAPER) failed");
    Ok(())
}

/// Reap every child there is (waiting at most `limit`, then killing what is left); the
/// exit status of `main` if it is among them.
fn reap_all(main: Option<libc::pid_t>, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    let mut status_of_main = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid for any child, status into a live local.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r > 0 {
            if Some(r) == main {
                status_of_main = Some(status);
            }
            continue;
        }
        if r < 0 {
            return status_of_main; // ECHILD: none left
        }
        if start.elapsed() > limit {
            signal_all(libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// CPU time (user + system, s) of the children reaped so far, theirs included: as a
/// subreaper, every process a run started.
fn children_cpu() -> f64 {
    // SAFETY: getrusage into a zeroed local of the right type.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Run `cmd` once (under mpirun's environment when `mpi`), sending `stop` when given; every
/// process it started is reaped before this returns.
pub fn run_once(cmd: &[String], mpi: bool, stop: Option<Stop>) -> Result<Outcome> {
    subreaper()?;
    reap_all(None, Duration::from_secs(10));
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("mfu-rs-resume-all-{}-{n}", std::process::id()));
    let (out_path, err_path) = (base.with_extension("out"), base.with_extension("err"));
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?)
        // tar -c's index member carries the archive's creation time: a resumed archive keeps
        // its first run's, so the uninterrupted run must share it to compare byte for byte.
        .env("SOURCE_DATE_EPOCH", "1700000000");
    if mpi {
        crate::mpi_env(&mut c);
    }
    let before = self_io()?;
    let cpu_before = children_cpu();
    let t = Instant::now();
    let child = c.spawn().with_context(|| format!("start {}", cmd[0]))?;
    let pid = child.id() as libc::pid_t;
    // Reaped below with waitpid: std's handle is not waited on.
    drop(child);
    let (mut signalled, mut term_ignored) = (false, false);
    let status = loop {
        let mut status = 0;
        // SAFETY: waitpid for our own child, status into a live local.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break status;
        }
        ensure!(r == 0, "waitpid: {}", std::io::Error::last_os_error());
        let now = t.elapsed();
        if let Some(s) = stop {
            if !signalled && now >= s.after {
                signal_all(s.signal);
                signalled = true;
            }
            if signalled
                && !term_ignored
                && s.signal == libc::SIGTERM
                && now >= s.after + TERM_GRACE
            {
                signal_all(libc::SIGKILL);
                term_ignored = true;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let secs = t.elapsed().as_secs_f64();
    // The rest of the run (ranks that outlived mpirun, find's commands) ends too.
    reap_all(None, Duration::from_secs(if signalled { 10 } else { 60 }));
    let io = self_io()?.since(&before);
    let cpu = children_cpu() - cpu_before;
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let stdout = std::fs::read(&out_path)?;
    let stderr = String::from_utf8_lossy(&std::fs::read(&err_path)?).into_owned();
    std::fs::remove_file(&out_path)?;
    std::fs::remove_file(&err_path)?;
    Ok(Outcome {
        secs,
        code,
        signalled,
        term_ignored,
        io,
        cpu,
        stdout,
        stderr,
    })
}

/// What a run that stopped before completing says: issue 33's words, and those of the tools
/// before it (cp and sync, tar). Not "interrupted" alone: a run that completes may mention
/// the temporary file an earlier interrupted run left.
const STOPPED: &[&str] = &[
    "run the same command again",
    "stopped after",
    "interrupted by a signal",
    "Interrupted:",
];

/// True when `o` completed the work as the uninterrupted run did (exit code `want`): the same
/// exit code and no word of having been stopped.
/// A signal that came after the work was done (the run's last phase, or as it exited) makes
/// the run say so and exit 1: its work is complete, and that is what the rerun loop asks.
pub fn finished(o: &Outcome, want: Option<i32>) -> bool {
    let mut late = false;
    let stopped = o.stderr.lines().any(|l| {
        if LATE_SIGNAL.iter().any(|w| l.contains(w)) {
            late = true;
            return false;
        }
        STOPPED.iter().any(|w| l.contains(w))
    });
    let code_ok = o.code.is_some() && (o.code == want || (late && o.code == Some(1)));
    code_ok && !stopped
}

/// What a run says when a signal came after everything asked for was done: the tool, or the
/// binary as it keeps the complete checkpoint of a run a signal reached as it ended.
const LATE_SIGNAL: &[&str] = &[
    "interrupted by a signal at the end of the run: everything asked for was done",
    "interrupted by a signal as the run ended: its complete checkpoint",
];

/// The first line of `text` that says something, shortened for a table cell.
fn first_line(text: &str) -> String {
    let l = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    l.chars().take(160).collect()
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    /// Tool.
    pub tool: String,
    /// File system.
    pub fs: String,
    /// Ranks.
    pub np: usize,
    /// `SIGKILL` or `SIGTERM`.
    pub signal: String,
    /// Point of the uninterrupted run's time the signal was sent at (%).
    pub point: u32,
    /// Runs until completion (the signalled one included).
    pub runs: usize,
    /// Bytes of all runs / bytes of one uninterrupted run.
    pub redone: f64,
    /// `yes`, or why not.
    pub equal: String,
    /// Checkpoint overhead on an uninterrupted run, or n/a.
    pub overhead: String,
    /// The uninterrupted run's time (s) and bytes.
    pub base_secs: f64,
    /// Bytes of the uninterrupted run.
    pub base_bytes: u64,
    /// Notes: finished before the signal, SIGTERM not obeyed, did not finish.
    pub note: String,
}

/// The table, as markdown.
pub fn markdown(rows: &[Row], context: &[(String, String)]) -> String {
    let mut s = String::from("## resume-all: work redone after kill -9 and SIGTERM (issue 33)\n\n");
    for (k, v) in context {
        let _ = writeln!(s, "{k}: {v}  ");
    }
    s.push_str(
        "\nredone = (rchar + wchar of every process of every run, until one completes) / (the \
         same of one uninterrupted run); target <= 1.15. overhead = uninterrupted time with the \
         checkpoint / with `--no-checkpoint` - 1, wall (and CPU of every process) (n/a: no such \
         flag); target <= 3%.\n\n",
    );
    s.push_str(
        "| tool | fs | np | signal | point | runs | redone | equal? | overhead | uninterrupted | note |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        // A row of `--overhead-only`: no signal, no reruns.
        let (point, redone) = if r.runs == 0 {
            ("-".to_string(), "-".to_string())
        } else {
            (format!("{}%", r.point), format!("{:.2}", r.redone))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} s, {} | {} |",
            r.tool,
            r.fs,
            r.np,
            r.signal,
            point,
            r.runs,
            redone,
            r.equal,
            r.overhead,
            r.base_secs,
            super::workload::size(r.base_bytes),
            r.note
        );
    }
    s
}

/// A file system measured: its name and the directory the work goes in.
struct Place {
    name: &'static str,
    dir: PathBuf,
}

/// Hold an exclusive lock on the file `path` (created if missing) while the result lives;
/// refused when another process holds it.
fn exclusive(path: &Path) -> Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    // SAFETY: flock(2) on a descriptor we own.
    let r = unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    };
    ensure!(
        r == 0,
        "another resume-all bench is running (it holds {}): wait for it to end",
        path.display()
    );
    Ok(f)
}

/// Entry point of the section (`data`: the bench's directory on the workspace's disk).
pub fn bench_resume_all(bin: &str, data: &Path, args: &[String]) -> Result<()> {
    let opts = parse(args)?;
    let started = Instant::now();
    // The work directories are fixed names: a second run at once (another worktree's) would
    // remove the first's inputs under it.
    let _lock = exclusive(Path::new("/dev/shm/mfu-rs-bench-resume-all.lock"))?;
    let mut places = vec![Place {
        name: "tmpfs",
        dir: PathBuf::from("/dev/shm/mfu-rs-bench-resume-all"),
    }];
    if !opts.quick {
        places.push(Place {
            name: "disk",
            dir: data.join("resume-all"),
        });
    }
    places.retain(|p| opts.fs.as_ref().is_none_or(|f| f == p.name));
    let nps: Vec<usize> = match (&opts.nps, opts.quick) {
        (Some(l), _) => l.clone(),
        (None, true) => vec![1],
        (None, false) => vec![1, 2],
    };
    let points: &[u32] = if opts.quick { &[50] } else { &[25, 50, 75] };
    let signals: &[(i32, &str)] = if opts.overhead_only {
        &[]
    } else {
        &[(libc::SIGKILL, "SIGKILL"), (libc::SIGTERM, "SIGTERM")]
    };
    let pairs = if opts.quick { 1 } else { opts.pairs };
    let all = tools::all();
    let chosen: Vec<&Tool> = all
        .iter()
        .filter(|t| {
            opts.tools
                .as_ref()
                .is_none_or(|l| l.iter().any(|n| n == t.name))
        })
        .collect();
    let load_before = loadavg();
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for place in &places {
        for tool in &chosen {
            let w = place.dir.join(tool.name);
            let r = bench_tool(
                bin, tool, &w, place.name, &nps, points, signals, pairs, opts.quick,
            );
            remove(&w)?;
            match r {
                Ok(mut r) => rows.append(&mut r),
                Err(e) => {
                    eprintln!("resume-all: {} on {}: {e:#}", tool.name, place.name);
                    failed.push(format!("{} on {}: {e:#}", tool.name, place.name));
                }
            }
        }
        remove(&place.dir)?;
    }
    let context = vec![
        ("binary".to_string(), bin.to_string()),
        (
            "mode".into(),
            if opts.quick {
                "--quick (tmpfs, np 1, 50% only, tiny inputs)".into()
            } else {
                "full".to_string()
            },
        ),
        ("load average before".into(), load_before),
        ("load average after".into(), loadavg()),
        (
            "wall time".into(),
            format!("{:.0} s", started.elapsed().as_secs_f64()),
        ),
    ];
    let mut md = markdown(&rows, &context);
    for f in &failed {
        let _ = writeln!(md, "\nFAILED: {f}");
    }
    print!("\n{md}");
    let out = crate::root().join("target/bench");
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("resume-all.md"), &md)?;
    eprintln!("resume-all: wrote {}", out.join("resume-all.md").display());
    ensure!(
        failed.is_empty(),
        "{} tool(s) could not be measured",
        failed.len()
    );
    Ok(())
}

/// The command line of `tool` in `w` at `np` ranks.
fn command(bin: &str, tool: &Tool, w: &Path, scale: u64, np: usize) -> (Vec<String>, bool) {
    let mut cmd = Vec::new();
    if np > 1 {
        cmd.extend(["mpirun".to_string(), "-np".into(), np.to_string()]);
    }
    cmd.push(bin.to_string());
    cmd.extend((tool.args)(w, scale));
    (cmd, np > 1)
}

/// An uninterrupted run from nothing; an error unless it completes.
fn uninterrupted(cmd: &[String], mpi: bool, w: &Path) -> Result<Outcome> {
    tools::reset(w)?;
    flush_fs()?;
    let o = run_once(cmd, mpi, None)?;
    ensure!(
        finished(&o, o.code),
        "{} did not complete: exit {:?}\n{}",
        cmd.join(" "),
        o.code,
        o.stderr
    );
    Ok(o)
}

/// Whether `mfu-rs SUB --help` offers `--no-checkpoint`.
fn has_no_checkpoint(bin: &str, sub: &str) -> bool {
    Command::new(bin)
        .args([sub, "--help"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--no-checkpoint"))
}

/// The checkpoint's overhead on an uninterrupted run of `cmd`: the medians of `pairs` pairs'
/// ratios, with the checkpoint / with `--no-checkpoint`, wall time and CPU time of every
/// process, as `+1.2% (+0.8% CPU)`. Each pair is printed on stderr under `label`.
fn overhead(cmd: &[String], mpi: bool, w: &Path, pairs: usize, label: &str) -> Result<String> {
    let mut without = cmd.to_vec();
    without.push("--no-checkpoint".into());
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for i in 0..pairs {
        // Each pair in turn order, the other way every second time: whatever a run leaves
        // the next (freed pages, writeback) falls on both sides alike.
        let (with, bare) = if i % 2 == 0 {
            let with = uninterrupted(cmd, mpi, w)?;
            (with, uninterrupted(&without, mpi, w)?)
        } else {
            let bare = uninterrupted(&without, mpi, w)?;
            (uninterrupted(cmd, mpi, w)?, bare)
        };
        eprintln!(
            "resume-all: {label}: pair {i}: with {:.3} s ({:.3} s CPU), without {:.3} s \
             ({:.3} s CPU)",
            with.secs, with.cpu, bare.secs, bare.cpu
        );
        wall.push(with.secs / bare.secs.max(1e-9));
        cpu.push(with.cpu / bare.cpu.max(1e-9));
    }
    Ok(format!(
        "{:+.1}% ({:+.1}% CPU)",
        (median(wall) - 1.0) * 100.0,
        (median(cpu) - 1.0) * 100.0
    ))
}

/// The rows of one tool on one file system.
#[allow(clippy::too_many_arguments)]
fn bench_tool(
    bin: &str,
    tool: &Tool,
    w: &Path,
    fs: &str,
    nps: &[usize],
    points: &[u32],
    signals: &[(i32, &str)],
    pairs: usize,
    quick: bool,
) -> Result<Vec<Row>> {
    std::fs::create_dir_all(w)?;
    // Calibrate at np 1: the input grown until an uninterrupted run takes about AIM_SECS.
    let mut scale = if quick { 1 } else { tool.base_scale };
    tools::make_input(bin, tool, w, scale)?;
    if !quick {
        for _ in 0..3 {
            let (cmd, mpi) = command(bin, tool, w, scale, 1);
            let secs = uninterrupted(&cmd, mpi, w)?.secs;
            let max = tool.input.max_scale();
            if secs >= tool.aim_secs * 2.0 / 3.0 || scale >= max {
                break;
            }
            let grown = ((scale as f64) * tool.aim_secs / secs.max(0.05)).ceil() as u64;
            scale = grown.clamp(scale + 1, max);
            eprintln!(
                "resume-all: {} on {fs}: {secs:.2} s, input scale now {scale}",
                tool.name
            );
            tools::make_input(bin, tool, w, scale)?;
        }
    }
    let overhead_flag = has_no_checkpoint(bin, tool.sub);
    let mut rows = Vec::new();
    for &np in nps {
        let (cmd, mpi) = command(bin, tool, w, scale, np);
        let base = uninterrupted(&cmd, mpi, w)?;
        let kept = tools::keep(bin, tool, w, &[&base.stdout], &np.to_string())?;
        eprintln!(
            "resume-all: {} on {fs} np {np}: uninterrupted {:.2} s, {} bytes (rchar {} wchar {})",
            tool.name,
            base.secs,
            base.io.work(),
            base.io.rchar,
            base.io.wchar
        );
        let label = format!("{} on {fs} np {np}", tool.name);
        let overhead = if overhead_flag {
            overhead(&cmd, mpi, w, pairs, &label)?
        } else {
            "n/a".to_string()
        };
        eprintln!("resume-all: {label}: overhead {overhead}");
        if signals.is_empty() {
            rows.push(Row {
                tool: tool.name.to_string(),
                fs: fs.to_string(),
                np,
                signal: "-".into(),
                point: 0,
                runs: 0,
                redone: f64::NAN,
                equal: "-".into(),
                overhead: overhead.clone(),
                base_secs: base.secs,
                base_bytes: base.io.work(),
                note: format!(
                    "overhead only ({pairs} pair{})",
                    if pairs == 1 { "" } else { "s" }
                ),
            });
        }
        // Finished: as the uninterrupted run (see [`finished`]), or reached by the signal once its
        // whole report was out (see [`tools::whole_report`]).
        let done_by = |o: &Outcome, base: &Outcome| {
            finished(o, base.code)
                || (o.signalled && tools::whole_report(tool, &o.stdout, &base.stdout))
        };
        for &(signal, sig_name) in signals {
            for &point in points {
                let stop = Stop {
                    signal,
                    after: Duration::from_secs_f64(base.secs * f64::from(point) / 100.0),
                };
                tools::reset(w)?;
                flush_fs()?;
                let mut outs: Vec<Outcome> = vec![run_once(&cmd, mpi, Some(stop))?];
                while !done_by(outs.last().expect("a run"), &base) && outs.len() < MAX_RUNS {
                    outs.push(run_once(&cmd, mpi, None)?);
                }
                let mut io = Io::default();
                for o in &outs {
                    io.add(&o.io);
                }
                let first = &outs[0];
                let last = outs.last().expect("a run");
                let mut notes = Vec::new();
                if !first.signalled {
                    notes.push("finished before the signal".to_string());
                } else if finished(first, base.code) {
                    notes.push("finished as the signal came".to_string());
                } else if done_by(first, &base) {
                    notes.push("its report was whole as the signal came".to_string());
                }
                if first.term_ignored {
                    notes.push(format!(
                        "still running {} s after SIGTERM",
                        TERM_GRACE.as_secs()
                    ));
                }
                let done = done_by(last, &base);
                if !done {
                    notes.push(format!(
                        "did not finish in {MAX_RUNS} runs (last exit {:?})",
                        last.code
                    ));
                }
                // What the reruns that did not finish said (once each).
                for o in outs.iter().skip(1).filter(|o| !done_by(o, &base)) {
                    let said = first_line(&o.stderr);
                    if !notes.contains(&said) {
                        notes.push(said);
                    }
                }
                let stdouts: Vec<&[u8]> = outs.iter().map(|o| o.stdout.as_slice()).collect();
                let equal = if done {
                    match tools::equal(bin, tool, w, &stdouts, &kept) {
                        Ok(()) => "yes".to_string(),
                        Err(e) => format!("NO: {e:#}").replace('|', "/"),
                    }
                } else {
                    "NO (unfinished)".to_string()
                };
                rows.push(Row {
                    tool: tool.name.to_string(),
                    fs: fs.to_string(),
                    np,
                    signal: sig_name.to_string(),
                    point,
                    runs: outs.len(),
                    redone: io.work() as f64 / base.io.work().max(1) as f64,
                    equal,
                    overhead: overhead.clone(),
                    base_secs: base.secs,
                    base_bytes: base.io.work(),
                    note: notes.join("; ").replace('|', "/"),
                });
                eprintln!("resume-all: {:?}", rows.last().expect("a row"));
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_io_parses_and_a_missing_field_is_refused() {
        let text = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 0\ncancelled_write_bytes: 0\n";
        let io = parse_io(text).unwrap();
        assert_eq!(
            (io.rchar, io.wchar, io.read_bytes, io.write_bytes),
            (10, 20, 4096, 0)
        );
        assert_eq!(io.work(), 30);
        assert_eq!(parse_io("rchar: 10\nwchar: 20\n"), None);
    }

    #[test]
    fn options_take_quick_and_a_list_of_known_tools() {
        let a = |s: &[&str]| parse(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(
            a(&["--quick", "--tools", "cp,tar-c"]).unwrap(),
            Opts {
                quick: true,
                tools: Some(vec!["cp".into(), "tar-c".into()]),
                fs: None,
                pairs: OVERHEAD_PAIRS,
                nps: None,
                overhead_only: false,
            }
        );
        assert!(a(&["--tools", "cp,nope"]).is_err());
        assert!(a(&["--slow"]).is_err());
        assert_eq!(a(&["--fs", "disk"]).unwrap().fs.as_deref(), Some("disk"));
        assert!(a(&["--fs", "nfs"]).is_err());
        let o = a(&["--pairs", "21", "--np", "2", "--overhead-only"]).unwrap();
        assert_eq!((o.pairs, o.nps, o.overhead_only), (21, Some(vec![2]), true));
        assert!(a(&["--pairs", "0"]).is_err());
        assert!(a(&["--np", "1,x"]).is_err());
    }

    /// A run a signal reached after its work was done is finished (the rerun loop stops);
    /// a run stopped before is not, whatever else it says.
    #[test]
    fn a_signal_after_the_work_was_done_finishes_the_run() {
        let run = |code: Option<i32>, stderr: &str| Outcome {
            secs: 1.0,
            code,
            signalled: true,
            term_ignored: false,
            io: Io::default(),
            cpu: 0.0,
            stdout: Vec::new(),
            stderr: stderr.to_string(),
        };
        let late = format!("mfu-rs cmp: {}\n", LATE_SIGNAL[0]);
        assert!(finished(&run(Some(1), &late), Some(0)));
        // The complete checkpoint kept for the rerun a signal as the run ended asks for (walk
        // -o's list is whole): finished too.
        let kept = format!(
            "mfu-rs walk: {late}mfu-rs walk: interrupted by a signal as the run ended: its \
             complete checkpoint /w/.l.mfu-checkpoint is kept, so that the same command run \
             again finds its work done\n"
        );
        assert!(finished(&run(Some(1), &kept), Some(0)));
        assert!(finished(
            &run(
                Some(1),
                "mfu-rs walk: interrupted by a signal as the run ended: its complete checkpoint \
                 /w/c is kept, so that the same command run again finds its work done\n"
            ),
            Some(0)
        ));
        assert!(finished(&run(Some(1), &late), Some(1)));
        assert!(!finished(&run(Some(2), &late), Some(0)));
        assert!(!finished(&run(None, &late), Some(0)));
        let stopped = format!("{late}mfu-rs cmp: stopped after 1 of 2 bytes (50%); run the same command again to continue\n");
        assert!(!finished(&run(Some(1), &stopped), Some(0)));
        assert!(!finished(
            &run(Some(1), "mfu-rs cp: interrupted by a signal\n"),
            Some(0)
        ));
        assert!(finished(&run(Some(0), ""), Some(0)));
    }

    /// The I/O of a killed process and of its orphaned child is counted: the harness reaps
    /// them (subreaper) and the kernel adds their counters to its own. Run in a process of its
    /// own (this test binary again, one test, one thread): a subreaper reaps every child of
    /// the process, and `/proc/self/io` counts every thread's reads, so other tests running
    /// beside it would disturb it and be disturbed.
    #[test]
    fn a_run_counts_the_bytes_of_every_process_it_started_killed_or_orphaned() {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "bench::resume_all::tests::counted_in_a_process_of_its_own",
                "--ignored",
                "--test-threads=1",
                "--nocapture",
            ])
            .env("MFU_RS_XTASK_SUBREAPER_TEST", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The body of the test above, run only by it (`--ignored` with its variable set).
    #[test]
    #[ignore = "run by a_run_counts_the_bytes_of_every_process_it_started_killed_or_orphaned"]
    fn counted_in_a_process_of_its_own() {
        assert!(std::env::var_os("MFU_RS_XTASK_SUBREAPER_TEST").is_some());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, vec![7u8; 4 << 20]).unwrap();
        let script = format!(
            "cat {0} > /dev/null; (cat {0} > /dev/null; sleep 30) & cat {0} >/dev/null; sleep 30",
            f.display()
        );
        let cmd: Vec<String> = ["sh", "-c", &script]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let stop = Stop {
            signal: libc::SIGKILL,
            after: Duration::from_millis(500),
        };
        let o = run_once(&cmd, false, Some(stop)).unwrap();
        assert!(o.signalled && o.code.is_none());
        assert!(o.io.rchar >= 3 * (4 << 20), "{:?}", o.io);
        assert!(o.io.rchar < 4 * (4 << 20), "{:?}", o.io);
        assert!(descendants().is_empty());
        let done = run_once(&["true".to_string()], false, None).unwrap();
        assert!(finished(&done, Some(0)) && !done.signalled);
    }

    #[test]
    fn a_run_that_says_it_stopped_has_not_finished() {
        let o = |code, stderr: &str| Outcome {
            secs: 1.0,
            code,
            signalled: false,
            term_ignored: false,
            io: Io::default(),
            cpu: 0.0,
            stdout: Vec::new(),
            stderr: stderr.into(),
        };
        assert!(finished(&o(Some(1), ""), Some(1)));
        assert!(!finished(
            &o(
                Some(1),
                "stopped after 5 of 10 (50%); run the same command again to continue"
            ),
            Some(1)
        ));
        assert!(!finished(&o(Some(1), ""), Some(0)));
        assert!(finished(
            &o(
                Some(0),
                "removed .x.mfu-tmp, a temporary file an earlier interrupted run left"
            ),
            Some(0)
        ));
        assert!(!finished(
            &o(
                Some(1),
                "interrupted by a signal: rerun the same sync to finish"
            ),
            Some(1)
        ));
        assert!(!finished(&o(None, ""), Some(0)));
    }

    #[test]
    fn the_table_has_a_row_per_measurement() {
        let r = Row {
            tool: "cp".into(),
            fs: "tmpfs".into(),
            np: 2,
            signal: "SIGTERM".into(),
            point: 50,
            runs: 2,
            redone: 1.5,
            equal: "yes".into(),
            overhead: "n/a".into(),
            base_secs: 3.0,
            base_bytes: 1 << 30,
            note: String::new(),
        };
        let only = Row {
            signal: "-".into(),
            point: 0,
            runs: 0,
            redone: f64::NAN,
            equal: "-".into(),
            overhead: "+1.0% (+0.5% CPU)".into(),
            ..r.clone()
        };
        let md = markdown(&[r.clone(), r, only], &[]);
        assert_eq!(
            md.matches("| cp | tmpfs | 2 | SIGTERM | 50% | 2 | 1.50 | yes | n/a |")
                .count(),
            2
        );
        // An `--overhead-only` row: no point, no redone work (not `0%`, not `NaN`).
        assert!(md.contains("| cp | tmpfs | 2 | - | - | 0 | - | - | +1.0% (+0.5% CPU) |"));
    }
}
