//! The job log of GNU parallel's `--joblog`: a header, then one tab-separated line per finished
//! command (`Seq Host Starttime JobRuntime Send Receive Exitval Signal Command`), and what a
//! `--resume` reads back from it.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;

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

/// What a log records of one command number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// The command, escaped as in the log.
    pub command: Vec<u8>,
    /// Some line of it says it exited 0 without a signal.
    pub succeeded: bool,
}

/// The commands that `log` records, by their number (Seq). A missing log records nothing. A
/// number logged twice (a failed command run again by `--resume-failed`) succeeded if either
/// run did; lines whose Seq is not a number (the header, a line cut by a crash) are skipped.
pub fn finished(log: &[u8]) -> io::Result<HashMap<u64, Logged>> {
    let bytes = match std::fs::read(std::ffi::OsStr::from_bytes(log)) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e),
    };
    let mut done: HashMap<u64, Logged> = HashMap::new();
    // The last piece has no newline: a line cut short by a kill, whose command may be cut.
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    lines.pop();
    for line in lines {
        let fields: Vec<&[u8]> = line.splitn(9, |&b| b == b'\t').collect();
        let [seq, _, _, _, _, _, exitval, signal, command] = fields[..] else {
            continue;
        };
        let Some(seq) = std::str::from_utf8(seq).ok().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let succeeded = exitval == b"0" && signal == b"0";
        done.entry(seq)
            .and_modify(|l| l.succeeded |= succeeded)
            .or_insert_with(|| Logged {
                command: command.to_vec(),
                succeeded,
            });
    }
    Ok(done)
}

/// Create the log for a new run: emptied and given its header, or with `resume` kept as it is
/// (the header added when it is new or empty), but for a last line cut short.
///
/// A cut line (a crash or a full disk in the middle of its write: no newline) is what
/// [`finished`] does not count, so its command runs again; it is cut off here, because the
/// lines appended next would otherwise continue it: one line holding two records, the second
/// command's record lost (it would run a third time) and the first's command garbled, so that
/// every later `--resume` refused the log as another input's.
pub fn create(log: &[u8], resume: bool) -> io::Result<()> {
    let path = std::ffi::OsStr::from_bytes(log);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(!resume)
        .open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if whole < bytes.len() {
        file.set_len(whole as u64)?;
    }
    if whole == 0 {
        file.write_all_at(HEADER, 0)?;
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
    use std::io::Write;

    #[test]
    fn lines_read_back_as_finished_commands() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let log = log.as_os_str().as_bytes();
        assert!(finished(log).unwrap().is_empty());
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
        let all = finished(log).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[&1].command, b"echo a\tb");
        assert!(all[&1].succeeded);
        assert_eq!(all[&2].command, escape(b"printf 'x\ny'"));
        assert!(!all[&2].succeeded);
        // A rerun that succeeded makes the number succeeded.
        f.write_all(&line(2, 0, b"printf 'x\ny'").bytes()).unwrap();
        assert!(finished(log).unwrap()[&2].succeeded);
        let text = std::fs::read(std::ffi::OsStr::from_bytes(log)).unwrap();
        // Resuming keeps the lines and does not repeat the header.
        create(log, true).unwrap();
        assert_eq!(
            std::fs::read(std::ffi::OsStr::from_bytes(log)).unwrap(),
            text
        );
    }
}
