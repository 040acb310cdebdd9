//! Options every tool shares, and the console reporting of one run.

use clap::Args;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use steal::progress::{Progress, Report};

/// `--progress`, `-v`, `-q`: the same on every tool.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// Print a progress line every N seconds (0 = never; fractions such as 0.5 allowed); rank 0
    /// prints it on stderr.
    #[arg(long, value_name = "N", default_value_t = 10.0, value_parser = parse_seconds)]
    pub progress: f64,
    /// Say more: per-rank detail, chosen sizes, timings.
    #[arg(short, long)]
    pub verbose: bool,
    /// Print only errors.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
}

impl Common {
    /// Progress counters that print `verb ...` lines on rank 0 (stderr) every `--progress` s.
    pub fn progress(&self, rank: usize, verb: &'static str) -> Progress {
        let reporter = (rank == 0 && !self.quiet).then(|| {
            Box::new(move |r: &Report| {
                eprintln!("{}", r.line(verb));
            }) as steal::progress::Reporter
        });
        Progress::new(Duration::from_secs_f64(self.progress), reporter)
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=1e9).contains(&s) => Ok(s),
        _ => Err(format!("'{text}' is not a number of seconds")),
    }
}

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

/// Where a tool's human-readable output goes: stdout, or stderr when the list goes to stdout
/// (`-o -`), so that `mfu-rs walk -o - DIR | mfu-rs rm -i -` passes only the list.
pub fn message_sink(output: Option<&std::ffi::OsStr>) -> fn(&[u8]) {
    if list_to_stdout(output) {
        stderr_bytes
    } else {
        stdout_bytes
    }
}

/// Report one failure on stderr as `mfu-rs TOOL: MESSAGE`.
///
/// The line goes out in one `write` (`eprintln!` may split it into several), so that lines of
/// ranks sharing one stderr pipe never interleave mid-line.
pub fn report_error(tool: &str, message: impl std::fmt::Display) {
    use std::io::Write;
    let line = format!("mfu-rs {tool}: {message}\n");
    // Nothing sensible is left to do when stderr itself fails.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
