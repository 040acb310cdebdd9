//! One timed command ([`Case`]), its runs interleaved with other cases', and medians.

use crate::mpi_env;
use anyhow::{ensure, Context, Result};
use std::borrow::Borrow;
use std::process::{Command, Stdio};
use std::time::Instant;

/// An untimed step run around a timed command.
pub type Step = Box<dyn Fn() -> Result<()>>;

/// A command to time, with what must happen around each run.
pub struct Case {
    /// How the case is named in tables (`cp -a`, `mfu-rs np 1`).
    pub name: String,
    /// The command line, program first.
    pub cmd: Vec<String>,
    /// Run under Open MPI's `mpirun` (its environment is set).
    pub mpi: bool,
    /// Untimed, before every run (the warm-up included).
    pub prep: Option<Step>,
    /// Untimed, once after the warm-up run: a sanity check of the result (a failure is a
    /// warning, the timing goes on).
    pub check: Option<Step>,
    /// Extra environment of the command.
    pub env: Vec<(String, String)>,
    /// Keep each run's stderr ([`Run::stderr`]).
    pub capture: bool,
}

/// A case named `name` running `cmd`, under `mpirun`'s environment when `mpi`.
pub fn case<S: AsRef<str>>(name: &str, mpi: bool, cmd: &[S]) -> Case {
    Case {
        name: name.into(),
        cmd: cmd.iter().map(|s| s.as_ref().to_string()).collect(),
        mpi,
        prep: None,
        check: None,
        env: Vec::new(),
        capture: false,
    }
}

impl Case {
    /// Run `f` (untimed) before every run.
    pub fn prep(mut self, f: impl Fn() -> Result<()> + 'static) -> Case {
        self.prep = Some(Box::new(f));
        self
    }

    /// Check the result with `f` after the warm-up run.
    pub fn check(mut self, f: impl Fn() -> Result<()> + 'static) -> Case {
        self.check = Some(Box::new(f));
        self
    }

    /// Run with `key=value` in the environment.
    pub fn env(mut self, key: &str, value: &str) -> Case {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Keep each run's stderr.
    pub fn capture(mut self) -> Case {
        self.capture = true;
        self
    }

    /// The command with its MPI environment, output discarded, stderr to a temporary file.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.cmd[0]);
        cmd.args(&self.cmd[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if self.mpi {
            mpi_env(&mut cmd);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }
}

/// One run of a command: wall time and the peak resident set of the process started (not of
/// its children: under `mpirun` that is mpirun's own).
#[derive(Clone, Debug)]
pub struct Run {
    /// Wall-clock seconds from spawn to exit.
    pub secs: f64,
    /// Peak resident set size, KiB (`ru_maxrss`).
    pub max_rss_kib: u64,
    /// Its stderr, when the case captures it (empty otherwise).
    pub stderr: String,
}

/// Prepare and run `c` once; an error if it fails (with its stderr).
pub fn time_once(c: &Case) -> Result<Run> {
    if let Some(prep) = &c.prep {
        prep().with_context(|| format!("prepare the run of {}", c.name))?;
    }
    let mut err = tempfile_for_stderr()?;
    let mut cmd = c.command();
    cmd.stderr(err.try_clone()?);
    let t = Instant::now();
    let child = cmd.spawn().with_context(|| format!("start {}", c.cmd[0]))?;
    let (status, rusage) = wait4(child.id())?;
    let secs = t.elapsed().as_secs_f64();
    ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{} failed (wait status {status:#x}):\n{}",
        c.cmd.join(" "),
        read_back(&mut err)
    );
    Ok(Run {
        secs,
        max_rss_kib: rusage.ru_maxrss.max(0) as u64,
        stderr: if c.capture {
            read_back(&mut err)
        } else {
            String::new()
        },
    })
}

/// An anonymous file for a child's stderr (a pipe could fill and block it).
fn tempfile_for_stderr() -> Result<std::fs::File> {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("mfu-rs-bench-stderr-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .with_context(|| format!("create {}", path.display()))?;
    std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
    Ok(f)
}

fn read_back(f: &mut std::fs::File) -> String {
    use std::io::{Read, Seek};
    let mut s = String::new();
    let _ = f.rewind();
    let _ = f.read_to_string(&mut s);
    s.trim_end().to_string()
}

/// Reap `pid` with `wait4`: its wait status and resource usage (std's `Child::wait` drops the
/// latter).
pub fn wait4(pid: u32) -> Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our own child, not yet reaped; the pointers are to live locals.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if r == pid as libc::pid_t {
            return Ok((status, usage));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("wait4 for a benchmarked command");
        }
    }
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Run every case `runs` times, interleaved (case 1, 2, ..., 1, 2, ...: noise hits every case
/// alike), after one untimed warm-up run each when `warmup`; the runs of each case. Each case's
/// check runs once, after its first run; a failed check is a warning (printed, and returned
/// with the case's index).
#[allow(clippy::type_complexity)]
pub fn measure<C: Borrow<Case>>(
    cases: &[C],
    runs: usize,
    warmup: bool,
) -> Result<(Vec<Vec<Run>>, Vec<(usize, String)>)> {
    let mut warnings = Vec::new();
    let mut check = |i: usize, c: &Case| {
        if let Some(check) = &c.check {
            if let Err(e) = check() {
                let w = format!("{}: the result differs from the source: {e:#}", c.name);
                eprintln!("warning: {w}");
                warnings.push((i, w));
            }
        }
    };
    if warmup {
        for (i, c) in cases.iter().enumerate() {
            time_once(c.borrow())?;
            check(i, c.borrow());
        }
    }
    let mut times = vec![Vec::new(); cases.len()];
    for r in 0..runs {
        for (i, c) in cases.iter().enumerate() {
            times[i].push(time_once(c.borrow())?);
            if r == 0 && !warmup {
                check(i, c.borrow());
            }
        }
    }
    Ok((times, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_takes_the_middle_of_sorted_times() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
    }

    #[test]
    fn a_run_reports_its_time_and_peak_memory_and_a_failure_its_stderr() {
        let ok = time_once(&case("true", false, &["sh", "-c", "exit 0"])).unwrap();
        assert!(ok.secs > 0.0 && ok.max_rss_kib > 0);
        let e = time_once(&case(
            "false",
            false,
            &["sh", "-c", "echo boom >&2; exit 3"],
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("boom"), "{e}");
    }
}
