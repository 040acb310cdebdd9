//! What every tool run receives besides its own options (where its events go, how often it
//! reports progress, the flag that stops it, whether its reads leave access times alone) and what every run gives back (a report with the
//! common counts, or an error when nothing was done).
//!
//! Tools never print: they tell an [`Events`] sink about failed items, progress and the output
//! the caller asked for (a listing, matching paths), and return a report. The command line's
//! console renders both (`crate::cli`); an embedder may collect them, or pass
//! [`Context::default`], which discards events and keeps a sample of the failures in the report.

use crate::engine::status::Status;
use flist::noatime::NoAtime;
use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use steal::progress::{Progress, Report as ProgressReport};

/// Where a running tool's events go. Called from any rank and any thread of the process.
pub trait Events: Send + Sync {
    /// One item failed or was refused (or a warning about one): `message` names the path and
    /// the operation, e.g. `open /a/b: Permission denied`. The item is also counted in the
    /// report's `failed` (or the tool's own count of skipped items).
    fn error(&self, message: &str);
    /// A progress snapshot (rank 0 only, every [`Context::progress`]): counts summed over ranks;
    /// `verb` says what is being done (`Copied`, `Walked`).
    fn progress(&self, verb: &str, report: &ProgressReport);
    /// Output the caller asked for, as raw bytes (paths are bytes): a listing (`walk --print`,
    /// `tar -t`), matching paths (`find`), differences (`cmp`), ... In global order when the
    /// tool promises one (it is sent by rank 0).
    fn output(&self, bytes: &[u8]);
    /// Human-readable detail that is not the result: verbose per-rank figures, the sizes chosen,
    /// notices such as "nothing to do". One or more whole lines.
    fn info(&self, text: &str);
}

/// An [`Events`] sink that drops everything (the report still counts the failures).
#[derive(Debug, Default, Clone, Copy)]
pub struct Discard;

impl Events for Discard {
    fn error(&self, _: &str) {}
    fn progress(&self, _: &str, _: &ProgressReport) {}
    fn output(&self, _: &[u8]) {}
    fn info(&self, _: &str) {}
}

/// An [`Events`] sink that keeps what it is told, for a caller that wants the messages and the
/// output after the run (progress is dropped).
#[derive(Debug, Default)]
pub struct Collect {
    /// Every [`Events::error`] message, in the order they came.
    pub errors: Mutex<Vec<String>>,
    /// Every [`Events::output`] byte, in the order they came.
    pub output: Mutex<Vec<u8>>,
    /// Every [`Events::info`] text, concatenated.
    pub info: Mutex<String>,
}

impl Events for Collect {
    fn error(&self, message: &str) {
        if let Ok(mut e) = self.errors.lock() {
            e.push(message.to_string());
        }
    }
    fn progress(&self, _: &str, _: &ProgressReport) {}
    fn output(&self, bytes: &[u8]) {
        if let Ok(mut o) = self.output.lock() {
            o.extend_from_slice(bytes);
        }
    }
    fn info(&self, text: &str) {
        if let Ok(mut i) = self.info.lock() {
            i.push_str(text);
        }
    }
}

/// Failure messages kept for a report: at most this many per process.
pub const FAILURE_SAMPLE: usize = 100;

/// What a run needs besides its tool's options. Cheap to clone; one per run (the failure
/// sample starts empty, the stop flag is the caller's).
#[derive(Clone)]
pub struct Context {
    /// Where events go.
    pub events: Arc<dyn Events>,
    /// How often rank 0 reports progress; `None`: never.
    pub progress: Option<Duration>,
    /// Compute and report verbose detail (per-rank figures, chosen sizes).
    pub verbose: bool,
    /// Set it to stop the run: work stops being handed out, what is in flight finishes, the
    /// report says `interrupted`. The command line passes the flag SIGINT/SIGTERM set
    /// ([`steal::signals::stop_flag`]); a library caller its own.
    pub stop: Arc<AtomicBool>,
    /// The run's live status, if one is served (`--status-listen`, `--status-file`): rank 0's
    /// counters of each phase are attached to it and every rank measures its idle time.
    pub status: Option<LiveStatus>,
    /// `--noatime`: read files and directories with `O_NOATIME` where the kernel permits it
    /// (their owner, or `CAP_FOWNER`), and count those read without it. Every tool that reads
    /// file data or directories opens them through it. The count is this process's (thread
    /// ranks share it); the command line sums it over ranks and warns once at the end.
    pub noatime: Arc<NoAtime>,
    failures: Arc<Mutex<Vec<String>>>,
}

/// A live status the run's counters feed (see [`steal::status`]).
#[derive(Clone, Debug)]
pub struct LiveStatus {
    /// How often the other ranks send their counts to rank 0 (and the status is sampled).
    pub every: Duration,
    /// The status, served by rank 0.
    pub live: Arc<steal::status::Live>,
}

impl Default for Context {
    /// Events discarded, no progress, not verbose, a fresh stop flag, access times updated.
    fn default() -> Context {
        Context::new(Arc::new(Discard))
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("progress", &self.progress)
            .field("verbose", &self.verbose)
            .field("stop", &self.stop)
            .field("status", &self.status)
            .field("noatime", &self.noatime)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context sending events to `events`; no progress, not verbose, a fresh stop flag,
    /// reads that update access times as usual.
    pub fn new(events: Arc<dyn Events>) -> Context {
        Context {
            events,
            progress: None,
            verbose: false,
            stop: Arc::new(AtomicBool::new(false)),
            status: None,
            noatime: Arc::new(NoAtime::new(false)),
            failures: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Report a failed item (see [`Events::error`]) and keep its message for the report.
    pub fn error(&self, message: impl fmt::Display) {
        let message = message.to_string();
        if let Ok(mut kept) = self.failures.lock() {
            if kept.len() < FAILURE_SAMPLE {
                kept.push(message.clone());
            }
        }
        self.events.error(&message);
    }

    /// Send output (see [`Events::output`]).
    pub fn output(&self, bytes: &[u8]) {
        self.events.output(bytes);
    }

    /// Send human-readable detail (see [`Events::info`]).
    pub fn info(&self, text: impl AsRef<str>) {
        self.events.info(text.as_ref());
    }

    /// True once the run was asked to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Progress counters whose snapshots go to [`Events::progress`] as `verb ...`, on rank 0,
    /// every [`Context::progress`]; silent counters when progress is off or on other ranks.
    /// With a live [`Context::status`], rank 0's are the status's phase `verb` and the other
    /// ranks send their counts (and idle time) at least every status interval.
    pub fn progress(&self, rank: usize, verb: &'static str) -> Progress {
        let status_every = self.status.as_ref().map(|s| s.every);
        let send_every = match (self.progress, status_every) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let counters = match (self.progress, send_every) {
            (Some(every), _) if rank == 0 => {
                let events = Arc::clone(&self.events);
                Progress::new(
                    every,
                    Some(Box::new(move |r: &ProgressReport| events.progress(verb, r))),
                )
            }
            // The other ranks send rank 0 their counts every interval.
            (_, Some(every)) if rank != 0 => Progress::sending(every),
            _ => Progress::silent(),
        };
        match &self.status {
            Some(s) if rank == 0 => counters.with_status(Arc::clone(&s.live), verb),
            Some(_) => counters.tracking_idle(),
            None => counters,
        }
    }

    /// The failure messages kept so far by this process (at most `FAILURE_SAMPLE`).
    pub fn failures(&self) -> Vec<String> {
        self.failures.lock().map(|f| f.clone()).unwrap_or_default()
    }
}

/// Why a run did nothing: a usage or setup error found before any work (a missing source, an
/// option the source does not allow, an output that cannot be created). Every rank returns
/// the same error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// What is wrong, naming the path and the operation.
    pub message: String,
}

impl Error {
    /// An error with this message.
    pub fn new(message: impl fmt::Display) -> Error {
        Error {
            message: message.to_string(),
        }
    }
}

/// The counts every tool's report has, for the console's last line and `--json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Items (files, directories, links, entries) the tool handled, summed over ranks.
    pub items: u64,
    /// Bytes of file data read or written, summed over ranks.
    pub bytes: u64,
    /// Items that failed, were refused or skipped for a reason that is not the user's choice.
    pub failed: u64,
    /// Wall-clock time of the run, in seconds.
    pub seconds: f64,
}

/// A tool's report: serialisable, with the common counts and an exit status.
pub trait ToolReport: serde::Serialize {
    /// The common counts.
    fn summary(&self) -> Summary;
    /// The exit status this report stands for (0 done, 1 something failed or differs).
    fn status(&self) -> Status;
    /// How far the run got when a stop (a signal, the context's flag) ended it before its
    /// end, for the "stopped after X of Y; run the same command again to continue" line;
    /// `None` when it ran to its end.
    fn stopped(&self) -> Option<Stopped> {
        None
    }
}

/// How far a stopped run got: `done` of `total` units (`what`: `"files"`, `"bytes"`,
/// `"members"`), counting the units earlier runs of the same command finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Stopped {
    /// Units finished, by this run and the earlier ones it continued.
    pub done: u64,
    /// Units of the whole job.
    pub total: u64,
    /// What a unit is, plural.
    pub what: &'static str,
}

impl fmt::Display for Stopped {
    /// `stopped after 120 of 480 files (25%); run the same command again to continue`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let percent = if self.total == 0 {
            0
        } else {
            (u128::from(self.done) * 100 / u128::from(self.total)) as u64
        };
        write!(
            f,
            "stopped after {} of {} {} ({percent}%); run the same command again to continue",
            self.done, self.total, self.what
        )
    }
}

#[cfg(test)]
mod stopped_tests {
    use super::Stopped;

    #[test]
    fn the_stopped_line_names_the_counts_the_share_and_what_to_do() {
        let s = Stopped {
            done: 120,
            total: 480,
            what: "files",
        };
        assert_eq!(
            s.to_string(),
            "stopped after 120 of 480 files (25%); run the same command again to continue"
        );
        let none = Stopped {
            done: 0,
            total: 0,
            what: "bytes",
        };
        assert!(none.to_string().contains("(0%)"));
    }
}
