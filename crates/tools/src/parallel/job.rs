//! One command: what travels between ranks, and its run by `/bin/sh -c` with its output
//! captured whole.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A command to run, with its number in the input. A rank message (and so a work item).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Job {
    /// Its place in the input, 1 first (the joblog's Seq, the order of `--keep-order`).
    pub seq: u64,
    /// The shell command line.
    #[serde(with = "serde_bytes")]
    pub command: Vec<u8>,
}

/// A command that ran (or could not start). A rank message (to rank 0, for the output).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Done {
    /// The command.
    pub job: Job,
    /// When it started, in seconds since the epoch.
    pub start: f64,
    /// How long it ran, in seconds.
    pub runtime: f64,
    /// Its exit status; -1 when killed by a signal or not started.
    pub exitval: i32,
    /// The signal that killed it, or 0.
    pub signal: i32,
    /// Its standard output, whole.
    #[serde(with = "serde_bytes")]
    pub stdout: Vec<u8>,
    /// Its standard error, whole (or why it could not start).
    #[serde(with = "serde_bytes")]
    pub stderr: Vec<u8>,
}

impl Done {
    /// A command that could not start (`why`), begun at `start` (seconds since the epoch) and
    /// `began`: exit value -1, `why` on its standard error as the shell would say it.
    fn not_started(job: Job, start: f64, began: Instant, why: String) -> Done {
        Done {
            job,
            start,
            runtime: began.elapsed().as_secs_f64(),
            exitval: -1,
            signal: 0,
            stdout: Vec::new(),
            stderr: format!("/bin/sh: {why}").into_bytes(),
        }
    }

    /// True when it exited 0.
    pub fn succeeded(&self) -> bool {
        self.exitval == 0 && self.signal == 0
    }

    /// Why it failed, for the error line: `exit status 3`, `killed by signal 9`.
    pub fn failure(&self) -> String {
        if self.signal != 0 {
            format!("killed by signal {}", self.signal)
        } else if self.exitval < 0 {
            format!("could not start: {}", String::from_utf8_lossy(&self.stderr))
        } else {
            format!("exit status {}", self.exitval)
        }
    }
}

/// A command started by [`start`] and not yet waited for.
#[derive(Debug)]
pub struct Running {
    job: Job,
    start: f64,
    began: Instant,
    child: Child,
    /// A second SIGINT/SIGTERM, or this process's end, kills the command's process group while
    /// this lives.
    group: steal::signals::KillOnExit,
}

/// Start `job` with `/bin/sh -c`, standard input from /dev/null, its outputs captured, in a
/// process group of its own: a second signal kills the group (the command and whatever it
/// started), as does this process's supervisor when this process ends however it does (see
/// [`steal::signals::supervise`], started before), and a terminal's Ctrl-C reaches only
/// `parallel`, which lets the running commands finish. `Err`: it could not start (the
/// [`Done`] says why).
pub fn start(job: Job) -> Result<Running, Done> {
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let began = Instant::now();
    let mut command = Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(OsStr::from_bytes(&job.command))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: the hook runs in the child between fork and exec and makes one system call.
    unsafe {
        command.pre_exec(|| {
            // The supervisor learns the group only once spawn returns: should the rank die
            // in between, the shell dies with it (its parent thread) before starting much.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match command.spawn() {
        Ok(mut child) => {
            // The group's id is the child's pid (process_group(0)).
            match steal::signals::kill_on_exit(child.id() as i32) {
                Ok(group) => Ok(Running {
                    job,
                    start,
                    began,
                    child,
                    group,
                }),
                Err(e) => {
                    // Nothing would stop it should this rank die: it does not run.
                    // SAFETY: the group is this child's, not yet reaped.
                    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                    let _ = child.wait();
                    Err(Done::not_started(
                        job,
                        start,
                        began,
                        format!("tell the supervisor of the commands: {e}"),
                    ))
                }
            }
        }
        Err(e) => Err(Done::not_started(job, start, began, e.to_string())),
    }
}

impl Running {
    /// Read the command's outputs to their end and wait for it to exit.
    pub fn wait(mut self) -> Done {
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let (out_pipe, err_pipe) = (self.child.stdout.take(), self.child.stderr.take());
        std::thread::scope(|s| {
            if let Some(mut p) = err_pipe {
                let stderr = &mut stderr;
                s.spawn(move || p.read_to_end(stderr));
            }
            if let Some(mut p) = out_pipe {
                let _ = p.read_to_end(&mut stdout);
            }
        });
        // Wait for the exit without reaping, so that the group is unregistered while its id
        // is still this command's; only then reap it.
        let pid = self.child.id();
        loop {
            // SAFETY: waitid writes only into `info`, which lives on this stack.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
        drop(self.group);
        let status = self.child.wait();
        let runtime = self.began.elapsed().as_secs_f64();
        match status {
            Ok(st) => Done {
                job: self.job,
                start: self.start,
                runtime,
                exitval: st.code().unwrap_or(-1),
                signal: st.signal().unwrap_or(0),
                stdout,
                stderr,
            },
            Err(e) => Done {
                job: self.job,
                start: self.start,
                runtime,
                exitval: -1,
                signal: 0,
                stdout,
                stderr: format!("wait for /bin/sh: {e}").into_bytes(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job and its result travel whole between ranks: a command line and output of any bytes.
    #[test]
    fn jobs_and_their_results_round_trip_between_ranks() {
        let job = Job {
            seq: u64::MAX,
            command: b"echo 'a b' \xff | cat\n".to_vec(),
        };
        let done = Done {
            job: job.clone(),
            start: 1.5e9,
            runtime: f64::MIN_POSITIVE,
            exitval: -1,
            signal: 9,
            stdout: vec![0, 255, b'\n'],
            stderr: Vec::new(),
        };
        let bytes = steal::typed::encode(&done);
        assert_eq!(steal::typed::decode::<Done>(&bytes).unwrap(), done);
        let bytes = steal::typed::encode(&job);
        assert_eq!(steal::typed::decode::<Job>(&bytes).unwrap(), job);
        assert!(steal::typed::decode::<Job>(&bytes[..bytes.len() - 1]).is_err());
    }
}
