//! One command: what travels between ranks, and its run by `/bin/sh -c` with its output
//! captured whole.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use steal::queue::WorkItem;
use steal::wire::{put_bytes, put_u64, Reader};

/// A command to run, with its number in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Its place in the input, 1 first (the joblog's Seq, the order of `--keep-order`).
    pub seq: u64,
    /// The shell command line.
    pub command: Vec<u8>,
}

impl WorkItem for Job {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.seq);
        put_bytes(out, &self.command);
    }
    fn decode(input: &mut Reader<'_>) -> Self {
        Job {
            seq: input.u64(),
            command: input.bytes().to_vec(),
        }
    }
}

/// A command that ran (or could not start).
#[derive(Debug, Clone, PartialEq)]
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
    pub stdout: Vec<u8>,
    /// Its standard error, whole (or why it could not start).
    pub stderr: Vec<u8>,
}

impl Done {
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

    /// Encode for the trip to rank 0.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.job.encode(out);
        put_u64(out, self.start.to_bits());
        put_u64(out, self.runtime.to_bits());
        put_u64(out, self.exitval as i64 as u64);
        put_u64(out, self.signal as i64 as u64);
        put_bytes(out, &self.stdout);
        put_bytes(out, &self.stderr);
    }

    /// Decode what [`Done::encode`] wrote.
    pub fn decode(input: &mut Reader<'_>) -> Done {
        Done {
            job: Job::decode(input),
            start: f64::from_bits(input.u64()),
            runtime: f64::from_bits(input.u64()),
            exitval: input.u64() as i64 as i32,
            signal: input.u64() as i64 as i32,
            stdout: input.bytes().to_vec(),
            stderr: input.bytes().to_vec(),
        }
    }
}

/// Run `job` with `/bin/sh -c`, standard input from /dev/null, and wait for it.
pub fn run(job: Job) -> Done {
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let t = Instant::now();
    let output = Command::new("/bin/sh")
        .arg("-c")
        .arg(OsStr::from_bytes(&job.command))
        .stdin(Stdio::null())
        .output();
    let runtime = t.elapsed().as_secs_f64();
    match output {
        Ok(o) => Done {
            job,
            start,
            runtime,
            exitval: o.status.code().unwrap_or(-1),
            signal: o.status.signal().unwrap_or(0),
            stdout: o.stdout,
            stderr: o.stderr,
        },
        Err(e) => Done {
            job,
            start,
            runtime,
            exitval: -1,
            signal: 0,
            stdout: Vec::new(),
            stderr: format!("/bin/sh: {e}").into_bytes(),
        },
    }
}
