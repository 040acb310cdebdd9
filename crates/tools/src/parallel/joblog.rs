//! The job log of GNU parallel's `--joblog`: a header, then one tab-separated line per finished
//! command (`Seq Host Starttime JobRuntime Send Receive Exitval Signal Command`), and what a
//! `--resume` reads back from it.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;

/// The first line of a job log, as GNU parallel writes it.
pub const HEADER: &[u8] =
    b"Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n";

/// One finished command, as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    /// The command's number in the input (1 first).
    pub seq: u64,
    /// When it started, in seconds since the epoch.
    pub start: f64,
    /// How long it ran, in seconds.
    pub runtime: f64,
    /// Bytes of output it wrote (standard output and error).
    pub received: u64,
    /// Its exit status (-1 when it could not be started).
    pub exitval: i32,
    /// The signal that killed it, or 0.
    pub signal: i32,
    /// The command as run by `/bin/sh -c`.
    pub command: &'a [u8],
}

impl Line<'_> {
    /// The line's bytes, newline included. Host is `:` (this machine, as GNU parallel writes
    /// for local jobs).
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "{}\t:\t{:.3}\t{:.3}\t0\t{}\t{}\t{}\t",
            self.seq, self.start, self.runtime, self.received, self.exitval, self.signal
        )
        .into_bytes();
        out.extend_from_slice(&escape(self.command));
        out.push(b'\n');
        out
    }
}

/// `command` as it stands in the log: a newline (a quoted name may hold one) written `\n`, so
/// that each command stays on its line.
pub fn escape(command: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(command.len());
    for &b in command {
        if b == b'\n' {
            out.extend_from_slice(b"\\n");
        } else {
            out.push(b);
        }
    }
    out
}

/// The (escaped) commands that `log` records: all of them, or with `succeeded_only` those that
/// exited 0 without a signal. A missing log records nothing.
pub fn finished(log: &[u8], succeeded_only: bool) -> io::Result<HashSet<Vec<u8>>> {
    let bytes = match std::fs::read(std::ffi::OsStr::from_bytes(log)) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e),
    };
    let mut done = HashSet::new();
    for line in bytes.split(|&b| b == b'\n') {
        let fields: Vec<&[u8]> = line.splitn(9, |&b| b == b'\t').collect();
        let [seq, _, _, _, _, _, exitval, signal, command] = fields[..] else {
            continue;
        };
        if seq == b"Seq" {
            continue;
        }
        if !succeeded_only || (exitval == b"0" && signal == b"0") {
            done.insert(command.to_vec());
        }
    }
    Ok(done)
}

/// Create the log for a new run: emptied and given its header, or with `resume` kept as it is
/// (the header added when it is new or empty).
pub fn create(log: &[u8], resume: bool) -> io::Result<()> {
    let path = std::ffi::OsStr::from_bytes(log);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(!resume)
        .append(resume)
        .open(path)?;
    if file.metadata()?.len() == 0 {
        file.write_all(HEADER)?;
    }
    Ok(())
}

/// The log opened for appending by one rank: each line goes in one `write` at the end of the
/// file (`O_APPEND`), so that the ranks' lines never mix (on local file systems and Lustre).
pub fn open(log: &[u8]) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .open(std::ffi::OsStr::from_bytes(log))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_finished_commands() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let log = log.as_os_str().as_bytes();
        assert!(finished(log, false).unwrap().is_empty());
        create(log, false).unwrap();
        let mut f = open(log).unwrap();
        let line = |seq, exitval, command: &'static [u8]| Line {
            seq,
            start: 1.5,
            runtime: 0.25,
            received: 3,
            exitval,
            signal: 0,
            command,
        };
        f.write_all(&line(1, 0, b"echo a\tb").bytes()).unwrap();
        f.write_all(&line(2, 3, b"printf 'x\ny'").bytes()).unwrap();
        let text = std::fs::read(std::ffi::OsStr::from_bytes(log)).unwrap();
        assert!(text.starts_with(HEADER));
        assert!(text.ends_with(b"2\t:\t1.500\t0.250\t0\t3\t3\t0\tprintf 'x\\ny'\n"));
        let all = finished(log, false).unwrap();
        assert!(all.contains(&b"echo a\tb"[..]) && all.contains(&escape(b"printf 'x\ny'")));
        assert_eq!(finished(log, true).unwrap().len(), 1);
        // Resuming keeps the lines and does not repeat the header.
        create(log, true).unwrap();
        assert_eq!(
            std::fs::read(std::ffi::OsStr::from_bytes(log)).unwrap(),
            text
        );
    }
}
