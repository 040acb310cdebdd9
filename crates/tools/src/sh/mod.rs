//! `mfu-rs sh` (dsh): a shell over a file list loaded once (walked, or read from a list file),
//! to look around a large tree and clean it up without walking it again for every question:
//! `ls [-l]`, `cd`, `pwd`, `du`, `find` (the find tool's tests), `sort`, `stat`, `rm`,
//! `write LIST`, `help`, `quit`.
//!
//! Rank 0 reads each command line ([`Input`]) and broadcasts it; every rank runs the command
//! on its part of the list (`commands`) and rank 0 writes the answer through the context's
//! output. A command that fails is named on stderr and the session goes on; the run's exit
//! status is 1 when any command failed.

pub(crate) mod commands;
mod format;

use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::find_expr::expr::Expr;
use crate::engine::find_expr::Primary;
use crate::engine::input::Listed;
use crate::engine::status::Status;
use flist::walk::{walk, WalkOptions};
use flist::{Detail, FileList};
use std::ffi::OsString;
use std::sync::Mutex;
use std::time::Instant;
use steal::{Comm, CommExt};

/// Where rank 0 reads the session's lines: a terminal with line editing, a script, stdin.
pub trait Input: Send {
    /// The next line (without its newline), after showing `prompt` where that makes sense;
    /// `None` at the end of the input.
    fn line(&mut self, prompt: &str) -> Option<Vec<u8>>;
    /// The answer to `question` (a confirmation), which a script reads as its next line;
    /// `None` at the end of the input (taken as no).
    fn answer(&mut self, question: &str) -> Option<Vec<u8>>;
}

/// Turns the words after `find` into an expression (the command line's parser of the find
/// tool, so that the tests are the same); `Err` says what is wrong.
pub type FindParser = fn(&[OsString]) -> Result<Option<Expr<Primary>>, String>;

/// What `sh` loads and where its commands come from.
pub struct Options {
    /// Trees to walk (with stat), or the list to load instead (any list format, or in
    /// memory).
    pub input: crate::engine::input::Input,
    /// The session's lines, read on rank 0 only.
    pub script: Mutex<Box<dyn Input>>,
    /// How `find`'s words are parsed; `None`: `find` only takes no tests (all entries).
    pub find_parser: Option<FindParser>,
    /// Answer yes to `rm`'s confirmation (for scripts).
    pub yes: bool,
    /// Events (the answers are [`Context::output`]), and the stop flag, which ends the session
    /// after the command it interrupts.
    pub context: Context,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("input", &self.input)
            .field("yes", &self.yes)
            .finish_non_exhaustive()
    }
}

/// What a session did; the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Entries loaded.
    pub entries: u64,
    /// Commands run.
    pub commands: u64,
    /// Commands that failed (each named).
    pub failed: u64,
    /// Entries removed by `rm`.
    pub removed: u64,
    /// A stop request ended the session.
    pub interrupted: bool,
    /// Wall-clock seconds of the session.
    pub seconds: f64,
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.commands,
            bytes: 0,
            failed: self.failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(self.failed, 0, self.interrupted)
    }
}

/// Run a session on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let context = &options.context;
    let Some((list, unreadable)) = load(comm, options)? else {
        if comm.rank() == 0 {
            context.error("interrupted by a signal while loading the list: no session");
        }
        return Ok(Report {
            interrupted: true,
            seconds: started.elapsed().as_secs_f64(),
            ..Report::default()
        });
    };
    let mut report = Report {
        entries: comm.sum(list.len() as u64),
        failed: comm.sum(unreadable),
        ..Report::default()
    };
    let mut shell = commands::Shell::new(comm, options, list);
    while let Some(line) = read_line(comm, options, &shell.prompt()) {
        let words = match shlex::bytes::split(&line) {
            Some(w) => w,
            None => {
                report.commands += 1;
                report.failed += 1;
                if comm.rank() == 0 {
                    context.error(format!(
                        "{}: unbalanced quotes",
                        flist::path::display(&line)
                    ));
                }
                continue;
            }
        };
        if words.is_empty() {
            continue;
        }
        report.commands += 1;
        match shell.execute(&words) {
            Ok(commands::Next::Go) => {}
            Ok(commands::Next::Quit) => break,
            Err(message) => {
                report.failed += 1;
                if comm.rank() == 0 {
                    context.error(message);
                }
            }
        }
        if comm.any(context.stopped()) {
            report.interrupted = true;
            if comm.rank() == 0 {
                context.error("interrupted by a signal: the session ends here");
            }
            break;
        }
    }
    report.removed = shell.removed;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The next line, read by rank 0 and broadcast; `None` at the end. Collective.
fn read_line(comm: &dyn Comm, options: &Options, prompt: &str) -> Option<Vec<u8>> {
    let line: Option<serde_bytes::ByteBuf> = comm.bcast_with(0, || {
        let line = crate::engine::locks::lock(&options.script).line(prompt);
        line.map(serde_bytes::ByteBuf::from)
    });
    line.map(serde_bytes::ByteBuf::into_vec)
}

/// Rank 0 asks `question`; every rank gets the answer (true for `y`/`yes`). Collective.
pub fn confirm(comm: &dyn Comm, options: &Options, question: &str) -> bool {
    comm.bcast_with(0, || {
        let line = crate::engine::locks::lock(&options.script)
            .answer(question)
            .unwrap_or_default();
        let word = String::from_utf8_lossy(&line).trim().to_ascii_lowercase();
        word == "y" || word == "yes"
    })
}

/// The list, loaded once: walked with stat, or read; paths absolute and normal; and how many
/// entries could not be read (each reported). `None` when a stop cut the walk short.
/// Collective.
fn load(comm: &dyn Comm, options: &Options) -> Result<Option<(FileList, u64)>, Error> {
    let context = &options.context;
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    if options.input.walk_paths().is_empty() && !options.input.is_list() {
        return Err(Error::new(
            "nothing to load: give a PATH to walk or -i LIST",
        ));
    }
    let walk_paths = |paths: &[Vec<u8>]| {
        let progress = context.progress(comm.rank(), "Walked");
        let opts = WalkOptions {
            detail: Detail::Stat,
            noatime: &context.noatime,
            stop: Some(&context.stop),
            progress: Some(&progress),
            ..WalkOptions::default()
        };
        walk(comm, paths, &opts)
    };
    let walked = match options.input.list(comm, walk_paths)? {
        Listed::Walked(walked) => walked,
        Listed::Read(list) => return Ok(Some((list.normalized(&cwd), 0))),
    };
    for e in &walked.errors {
        context.error(e);
    }
    if walked.interrupted {
        return Ok(None);
    }
    let unreadable = walked.errors.len() as u64;
    Ok(Some((walked.list.normalized(&cwd), unreadable)))
}
