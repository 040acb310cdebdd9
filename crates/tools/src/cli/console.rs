//! The terminal: stdout that reports its own failure, stderr lines that never interleave, and
//! the [`Console`] that renders a run's events.

use crate::engine::context::Events;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use steal::progress::Report as ProgressReport;

/// Set once a write to stdout failed.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// Write raw bytes (paths are bytes) to stdout. Any failure is reported once on stderr and
/// remembered, so that the process exits 1 instead of claiming success with its output cut
/// ([`stdout_failed`]); later writes are skipped. That includes a closed pipe (`| head -1`): the
/// output is incomplete whoever stopped reading it, and the list writers (`-o -`) already say so
/// (exit 1, "Broken pipe") — every tool answers a closed pipe the same way.
pub fn stdout_bytes(bytes: &[u8]) {
    if STDOUT_FAILED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|_| out.flush()) {
        if !STDOUT_FAILED.swap(true, Ordering::Relaxed) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                eprintln!("mfu-rs: write standard output: {e}: its reader exited, the output is incomplete");
            } else {
                eprintln!("mfu-rs: write standard output: {e}");
            }
        }
    }
}

/// True when some output to stdout was lost (see [`stdout_bytes`]).
pub fn stdout_failed() -> bool {
    STDOUT_FAILED.load(Ordering::Relaxed)
}

/// Write raw bytes to stderr (messages that must stay out of a list written to stdout).
pub fn stderr_bytes(bytes: &[u8]) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(bytes).and_then(|_| err.flush());
}

/// True when `output` is `-`: the tool writes its list to stdout, so stdout must carry nothing
/// else.
pub fn list_to_stdout(output: Option<&std::ffi::OsStr>) -> bool {
    output.is_some_and(|o| is_stdout(o.as_encoded_bytes()))
}

/// True when a list file name stands for stdout (`-`).
pub fn is_stdout(file: &[u8]) -> bool {
    file == b"-"
}

/// Report one failure on stderr as `mfu-rs TOOL: MESSAGE`.
///
/// The line goes out in one `write` (`eprintln!` may split it into several), so that lines of
/// ranks sharing one stderr pipe never interleave mid-line.
pub fn report_error(tool: &str, message: impl std::fmt::Display) {
    report_line("", tool, message);
}

/// [`report_error`], the line starting with `prefix` (a timestamp).
fn report_line(prefix: &str, tool: &str, message: impl std::fmt::Display) {
    use std::io::Write;
    let line = match tool {
        "" => format!("{prefix}mfu-rs: {message}\n"),
        _ => format!("{prefix}mfu-rs {tool}: {message}\n"),
    };
    // Nothing sensible is left to do when stderr itself fails.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The command line's [`Events`] sink: errors on stderr as `mfu-rs TOOL: ...`; progress lines
/// on stderr; output on stdout, or on stderr when stdout carries a list (`-o -`) or the JSON
/// report; detail on stdout, or on stderr when stdout carries a list
/// (`-o -`) or the JSON report.
#[derive(Debug, Clone)]
pub struct Console {
    /// The tool's canonical name, for the `mfu-rs TOOL:` prefix.
    pub tool: &'static str,
    /// `-q`: only errors.
    pub quiet: bool,
    /// Stdout is reserved (a list written to `-`, or `--json`): everything else goes to stderr.
    pub stdout_reserved: bool,
    /// `--json`: the output the tool was asked for goes to stderr too.
    pub json: bool,
    /// `--timestamps`: progress and error lines start with the time of day.
    pub timestamps: bool,
    /// The previous progress snapshot (for the current rate).
    pub last: std::sync::Arc<crate::cli::progress_line::LastSnapshot>,
}

impl Console {
    /// Human text (a summary, a notice): stdout, or stderr when stdout is reserved.
    pub fn text(&self, text: &str) {
        if self.quiet {
            return;
        }
        if self.stdout_reserved || self.json {
            stderr_bytes(text.as_bytes());
        } else {
            stdout_bytes(text.as_bytes());
        }
    }
}

impl Events for Console {
    fn error(&self, message: &str) {
        // The time first, as on progress lines and in mpiFileUtils' messages.
        let stamp = if self.timestamps {
            crate::cli::progress_line::timestamp()
        } else {
            String::new()
        };
        report_line(&stamp, self.tool, message);
    }
    fn progress(&self, verb: &str, report: &ProgressReport) {
        if !self.quiet {
            let stamp = if self.timestamps {
                crate::cli::progress_line::timestamp()
            } else {
                String::new()
            };
            let line = crate::cli::progress_line::line(verb, report, &self.last);
            stderr_bytes(format!("{stamp}{line}\n").as_bytes());
        }
    }
    fn output(&self, bytes: &[u8]) {
        if self.json || self.stdout_reserved {
            stderr_bytes(bytes);
        } else {
            stdout_bytes(bytes);
        }
    }
    fn info(&self, text: &str) {
        self.text(text);
    }
}

/// `12.0 MiB (12582912 bytes)`.
pub fn bytes_text(n: u64) -> String {
    format!("{} ({n} bytes)", flist::units::human_bytes(n))
}
