//! The list input and output options that the tools reading or writing file lists share
//! (`-i`, `-o`, `-t`, `-l`), declared once and flattened into each of them, and the routing of
//! a run's events when stdout carries a list or results.

use crate::cli::console::stderr_bytes;
use crate::engine::context::Events;
use crate::engine::input::Input;
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use steal::progress::Report as ProgressReport;

/// `-i FILE`: read a list instead of walking.
#[derive(Args, Clone, Debug, Default)]
pub struct ListInput {
    /// Read this list (v3/v4 cache, `path|T` text, one path per line, or NUL-separated) instead
    /// of walking PATHs; `-` reads it from stdin.
    #[arg(short, long, value_name = "FILE")]
    pub input: Option<OsString>,
    /// `--input-format`.
    #[command(flatten)]
    pub format: ListInputFormat,
}

impl ListInput {
    /// What the tool acts on: the list of `-i`, read as `--input-format` says, else `paths`
    /// to walk.
    pub fn or_paths(&self, paths: &[OsString]) -> Input {
        self.list()
            .unwrap_or_else(|| Input::Paths(paths.iter().map(|p| p.as_bytes().to_vec()).collect()))
    }

    /// The list of `-i`, read as `--input-format` says; `None` without `-i`.
    pub fn list(&self) -> Option<Input> {
        self.input.as_ref().map(|file| Input::File {
            path: file.as_bytes().to_vec(),
            format: self.format.get(),
        })
    }

    /// `-i` as a file named in messages before the run.
    pub fn named_files(&self) -> impl Iterator<Item = (&'static str, &OsStr)> {
        self.input.iter().map(|f| ("-i", f.as_os_str()))
    }
}

/// `--input-format`: how the lines of the `--input` list are read. Shared by every tool that
/// reads a list, so that each says the same.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct ListInputFormat {
    /// How the lines of a text --input list are read: `auto` reads `path|T` lines when the
    /// first line is mfu-rs' header `#mfu-rs typed list v1` (the list must then end with its
    /// trailer `#mfu-rs end N`), else one whole path per line, even one that ends in `|F`;
    /// `typed` reads every line as `path|T` (dwalk -l's lists, which have no header); `plain`
    /// reads every line as a path. Cache (v3/v4) and NUL-separated lists are recognised
    /// whatever this says.
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value_t = InputFormatArg::Auto,
        requires = "input"
    )]
    pub input_format: InputFormatArg,
}

impl ListInputFormat {
    /// The format as the list reader takes it.
    pub fn get(&self) -> flist::io::InputFormat {
        match self.input_format {
            InputFormatArg::Auto => flist::io::InputFormat::Auto,
            InputFormatArg::Typed => flist::io::InputFormat::Typed,
            InputFormatArg::Plain => flist::io::InputFormat::Plain,
        }
    }
}

/// The values of `--input-format` ([`flist::io::InputFormat`]).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputFormatArg {
    /// Typed when the list starts with mfu-rs' header, else plain.
    #[default]
    Auto,
    /// Every line is `path|T`.
    Typed,
    /// Every line is a path.
    Plain,
}

/// `-o FILE` and `-t`: write the resulting list.
#[derive(Args, Clone, Debug, Default)]
pub struct ListOutput {
    /// Write the list to FILE: cache v4 for stat lists, text for lite lists (see --text).
    /// `-` writes it to stdout (messages then go to stderr), for `| mfu-rs rm -i -`.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<OsString>,
    /// With --output, write the text format (`path|T` per line) even for a stat list.
    #[arg(short, long, requires = "output")]
    pub text: bool,
}

impl ListOutput {
    /// The list file as bytes.
    pub fn file(&self) -> Option<Vec<u8>> {
        self.output.as_ref().map(|f| f.as_bytes().to_vec())
    }

    /// `-o` as an output file of the run (checked before it starts).
    pub fn output_files(&self) -> Vec<(&'static str, &[u8])> {
        self.output.iter().map(|o| ("-o", o.as_bytes())).collect()
    }

    /// True for `-o -`: the list owns stdout.
    pub fn to_stdout(&self) -> bool {
        crate::cli::console::list_to_stdout(self.output.as_deref())
    }
}

/// `-l`: walk names and types only.
#[derive(Args, Clone, Debug, Default)]
pub struct ListLite {
    /// Lite walk: names and types only, no stat (much faster on Lustre and NFS).
    #[arg(short, long)]
    pub lite: bool,
}

/// The console's events with some moved to stderr: the output a tool was asked for, when
/// stdout already carries a list (`walk -p -o -`), or the detail lines, when stdout carries
/// the tool's results (`find`'s paths, `dup`'s groups).
pub struct Routed {
    /// The console (or any sink) everything else goes to.
    pub inner: Arc<dyn Events>,
    /// Output goes to stderr (always, as the list it would corrupt does not care for `-q`).
    pub output_to_stderr: bool,
    /// Detail goes to stderr, unless `quiet`.
    pub info_to_stderr: bool,
    /// `-q`.
    pub quiet: bool,
}

impl Events for Routed {
    fn error(&self, message: &str) {
        self.inner.error(message);
    }
    fn progress(&self, verb: &str, report: &ProgressReport) {
        self.inner.progress(verb, report);
    }
    fn output(&self, bytes: &[u8]) {
        if self.output_to_stderr {
            stderr_bytes(bytes);
        } else {
            self.inner.output(bytes);
        }
    }
    fn info(&self, text: &str) {
        if !self.info_to_stderr {
            self.inner.info(text);
        } else if !self.quiet {
            stderr_bytes(text.as_bytes());
        }
    }
}
