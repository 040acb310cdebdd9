//! `mfu-rs grep` (dgrep) on the command line: GNU grep's options. Two of them take the
//! letters every other tool gives to the common options: `-v` is `--invert-match` here (verbose
//! is `--verbose` only) and `-h` is `--no-filename` (help is `--help` only); `-q` is grep's
//! quiet, which also silences progress and detail.

use crate::cli::args::{size_arg, Common, NoAtimeArg};
use crate::cli::console::{stderr_bytes, Console};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error, Events};
use crate::engine::select::Rules;
use crate::grep::{FileGlob, Options, Output, Report, Syntax, CHUNK_SIZE, CHUNK_VAR};
use clap::{ArgAction, Args};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use steal::progress::Report as ProgressReport;
use steal::Comm;

const AFTER_HELP: &str = "Searches every regular file below each PATH (recursion is the \
    default; symbolic links below a PATH are not followed unless -R, a PATH that is a link to a \
    file is searched) or every regular file of an --input list, in parallel: files bigger than \
    --chunk-size are searched in pieces cut at line ends, so that one huge file uses every rank.\n\n\
    Output is GNU grep's (`PATH:LINE`, `PATH:NUMBER:LINE`, `PATH:COUNT`, names with -l/-L), \
    file after file in the order grep -r would print them if every directory listed its \
    entries sorted by name bytes: PATHs in command-line order, then depth first, the entries \
    of a directory by name bytes (`a/z` before `a.txt`). --unordered leaves out that sort. \
    Names are printed unless the only PATH is a file (-H, -h force them on or off); without \
    PATH grep searches `.` and prints names without `./`.\n\n\
    Patterns are GNU grep's basic regular expressions (-E extended, -F fixed strings; a \
    newline in a pattern separates patterns) matched on bytes as by GNU grep with LC_ALL=C: \
    `.` is any byte, -i and -w know ASCII letters only. Back-references are not supported. A \
    file with a NUL byte is binary: its lines are not printed, `mfu-rs grep: NAME: binary \
    file matches` goes to stderr instead (GNU grep prints the lines it matched before a NUL \
    that it meets past its first buffer; mfu-rs prints none).\n\n\
    Examples:\n  \
    mpirun -np 16 mfu-rs grep -rn 'ERROR [0-9]*' /scratch/logs\n  \
    mfu-rs grep -l -F --include '*.log' 'Segmentation fault' /scratch/jobs\n  \
    mfu-rs find --name '*.out' -o - /scratch | mfu-rs grep -c -i timeout --input -\n\n\
    Exit status: 0 a line was selected, 1 none was, 2 an error (a file or directory that \
    could not be read, a bad pattern) even when lines were selected, unless -q and a line \
    was selected.";

/// Options of `mfu-rs grep` (dgrep).
#[derive(Args, Clone, Debug)]
#[command(
    about = "Search file contents in parallel, as grep -r",
    after_help = AFTER_HELP,
    disable_help_flag = true,
    mut_arg("verbose", |a| a.short(None)),
    // The shared `-i/--input`, without its `-i`: grep's is --ignore-case.
    mut_arg("input", |a| a.short(None).value_name("LIST").help_heading("Files").help(
        "Search the regular files of this list (v3/v4 cache, `path|T` text, one path per \
         line, NUL-separated; `-`: stdin) instead of PATHs, names printed as listed"
    )),
    mut_arg("quiet", |a| a.visible_alias("silent").help(
        "Print nothing: the exit status says whether a line was selected (0, even when a \
         file could not be read), and errors still go to stderr"
    ))
)]
pub struct GrepArgs {
    /// The pattern, then the files and directories to search (every PATH is a pattern's
    /// neighbour only: with -e or -f all of them are PATHs).
    #[arg(value_name = "PATTERN] [PATH")]
    pub words: Vec<OsString>,
    /// Search for PATTERN (repeatable; with it, no positional pattern).
    #[arg(
        short = 'e',
        long = "regexp",
        value_name = "PATTERN",
        allow_hyphen_values = true
    )]
    pub regexp: Vec<OsString>,
    /// Read patterns from FILE, one per line (repeatable; an empty file matches nothing).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Vec<OsString>,
    /// Patterns are extended regular expressions (egrep).
    #[arg(short = 'E', long, overrides_with_all = ["fixed_strings", "basic_regexp"], help_heading = "Patterns")]
    pub extended_regexp: bool,
    /// Patterns are fixed strings (fgrep).
    #[arg(short = 'F', long, overrides_with_all = ["extended_regexp", "basic_regexp"], help_heading = "Patterns")]
    pub fixed_strings: bool,
    /// Patterns are basic regular expressions (the default).
    #[arg(short = 'G', long, overrides_with_all = ["extended_regexp", "fixed_strings"], help_heading = "Patterns")]
    pub basic_regexp: bool,
    /// Ignore the case of ASCII letters.
    #[arg(
        short = 'i',
        long,
        overrides_with = "no_ignore_case",
        help_heading = "Patterns"
    )]
    pub ignore_case: bool,
    /// Do not ignore case (the default).
    #[arg(long, overrides_with = "ignore_case", help_heading = "Patterns")]
    pub no_ignore_case: bool,
    /// Select the lines that do not match.
    #[arg(short = 'v', long, help_heading = "Patterns")]
    pub invert_match: bool,
    /// Match whole words only.
    #[arg(short = 'w', long, help_heading = "Patterns")]
    pub word_regexp: bool,
    /// Match whole lines only.
    #[arg(short = 'x', long, help_heading = "Patterns")]
    pub line_regexp: bool,

    /// Print only the number of selected lines of every file.
    #[arg(short = 'c', long, help_heading = "Output")]
    pub count: bool,
    /// Print only the names of files with a selected line.
    #[arg(
        short = 'l',
        long,
        overrides_with = "files_without_match",
        help_heading = "Output"
    )]
    pub files_with_matches: bool,
    /// Print only the names of files without a selected line.
    #[arg(
        short = 'L',
        long,
        overrides_with = "files_with_matches",
        help_heading = "Output"
    )]
    pub files_without_match: bool,
    /// Put the line number (from 1) before each line.
    #[arg(short = 'n', long, help_heading = "Output")]
    pub line_number: bool,
    /// Put the file name before each line (default unless the only PATH is a file).
    #[arg(
        short = 'H',
        long,
        overrides_with = "no_filename",
        help_heading = "Output"
    )]
    pub with_filename: bool,
    /// Never put the file name before lines.
    #[arg(
        short = 'h',
        long,
        overrides_with = "with_filename",
        help_heading = "Output"
    )]
    pub no_filename: bool,
    /// Stop reading a file after NUM selected lines (0: search nothing, exit 1).
    #[arg(short = 'm', long, value_name = "NUM", help_heading = "Output")]
    pub max_count: Option<u64>,
    /// Do not report files that cannot be read (the exit status still says 2).
    #[arg(short = 's', long, help_heading = "Output")]
    pub no_messages: bool,
    /// Print files in the order they are searched (faster: no sort).
    #[arg(long, help_heading = "Output")]
    pub unordered: bool,

    /// Accepted for grep's sake: recursion is the default.
    #[arg(short = 'r', long, help_heading = "Files")]
    pub recursive: bool,
    /// Like -r, and follow every symbolic link (links to directories are descended, loops
    /// reported).
    #[arg(short = 'R', long, help_heading = "Files")]
    pub dereference_recursive: bool,
    /// Search only files whose name (last component) matches GLOB (see --exclude).
    #[arg(long = "include", id = "grep_include", value_name = "GLOB",
          value_parser = in_order, help_heading = "Files")]
    pub include: Vec<(u64, String)>,
    /// Skip files whose name matches GLOB; with several --include and --exclude the last
    /// that matches decides, and a file none matches is searched unless the first is an
    /// --include (GNU grep).
    #[arg(long = "exclude", id = "grep_exclude", value_name = "GLOB",
          value_parser = in_order, help_heading = "Files")]
    pub exclude: Vec<(u64, String)>,
    /// `--input` (no `-i`: grep's is --ignore-case) and `--input-format`.
    #[command(flatten)]
    pub input: crate::cli::list_args::ListInput,
    /// Search files bigger than SIZE in pieces of about SIZE (units KB, MB, GB...).
    #[arg(long, value_name = "SIZE", env = CHUNK_VAR, value_parser = size_arg,
          default_value_t = CHUNK_SIZE, help_heading = "Files")]
    pub chunk_size: u64,
    /// `--checkpoint PATH`, `--no-checkpoint`: where the chunks searched are recorded with
    /// their findings, so that a rerun after a stop searches only the others.
    #[command(flatten)]
    pub checkpoint: crate::cli::args::CheckpointArgs,

    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
    /// Print help (`-h` is --no-filename, as in grep).
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
}

/// The order in which --include and --exclude values were given: clap parses the command line
/// from left to right, and the two options land in two fields.
static GLOB_ORDER: AtomicU64 = AtomicU64::new(0);

fn in_order(text: &str) -> Result<(u64, String), String> {
    Ok((GLOB_ORDER.fetch_add(1, Ordering::Relaxed), text.to_string()))
}

/// `mfu-rs grep`.
pub struct Grep;

impl GrepArgs {
    /// The patterns given as words (the first positional, or -e's), each split at newlines.
    fn patterns(&self) -> Vec<Vec<u8>> {
        let words: Vec<&OsString> = if self.regexp.is_empty() && self.file.is_empty() {
            self.words.iter().take(1).collect()
        } else {
            self.regexp.iter().collect()
        };
        words
            .into_iter()
            .flat_map(|w| w.as_bytes().split(|&b| b == b'\n').map(<[u8]>::to_vec))
            .collect()
    }

    fn paths(&self) -> &[OsString] {
        if self.regexp.is_empty() && self.file.is_empty() {
            self.words.get(1..).unwrap_or(&[])
        } else {
            &self.words
        }
    }
}

impl CliTool for Grep {
    const NAME: &'static str = "grep";
    const OLD_NAMES: &'static [&'static str] = &["dgrep"];
    const ABOUT: &'static str = "Search file contents in parallel, as grep -r (dgrep)";
    type Args = GrepArgs;
    type Options = Options;
    type Report = Report;

    fn common(a: &GrepArgs) -> &Common {
        &a.common
    }
    fn noatime(a: &GrepArgs) -> bool {
        a.noatime.noatime
    }
    fn named_files(a: &GrepArgs) -> Vec<(&'static str, &OsStr)> {
        let paths = a.paths().iter().map(|p| ("PATH", p.as_os_str()));
        let files = a.file.iter().map(|f| ("-f", f.as_os_str()));
        let input = a.input.input.iter().map(|f| ("--input", f.as_os_str()));
        paths.chain(files).chain(input).collect()
    }
    fn check(a: &GrepArgs) -> Result<(), String> {
        if a.words.is_empty() && a.regexp.is_empty() && a.file.is_empty() {
            return Err("no PATTERN given (mfu-rs grep PATTERN [PATH...], or -e PATTERN)".into());
        }
        if a.input.input.is_some() && !a.paths().is_empty() {
            return Err("--input searches the files of a list: give no PATH with it".into());
        }
        if a.paths().iter().any(|p| p.as_bytes() == b"-") {
            return Err(
                "PATH - (standard input) is not supported: name files, or give a list \
                        with --input -"
                    .into(),
            );
        }
        Ok(())
    }
    fn options(a: &GrepArgs, _rules: Rules, mut context: Context) -> Options {
        context.events = Arc::new(Notices {
            inner: context.events,
            quiet: a.common.quiet,
        });
        let syntax = if a.fixed_strings {
            Syntax::Fixed
        } else if a.extended_regexp {
            Syntax::Extended
        } else {
            Syntax::Basic
        };
        let output = if a.common.quiet {
            Output::Quiet
        } else if a.files_with_matches {
            Output::FilesWithMatches
        } else if a.files_without_match {
            Output::FilesWithoutMatch
        } else if a.count {
            Output::Count
        } else {
            Output::Lines
        };
        let mut globs: Vec<(u64, FileGlob)> = Vec::new();
        for (include, values) in [(true, &a.include), (false, &a.exclude)] {
            for (seq, glob) in values {
                globs.push((
                    *seq,
                    FileGlob {
                        include,
                        glob: glob.as_bytes().to_vec(),
                    },
                ));
            }
        }
        globs.sort_by_key(|g| g.0);
        Options {
            patterns: a.patterns(),
            pattern_files: a.file.iter().map(|f| f.as_bytes().to_vec()).collect(),
            syntax,
            ignore_case: a.ignore_case,
            invert: a.invert_match,
            word: a.word_regexp,
            whole_line: a.line_regexp,
            output,
            line_numbers: a.line_number,
            with_filename: if a.with_filename {
                Some(true)
            } else if a.no_filename {
                Some(false)
            } else {
                None
            },
            max_count: a.max_count,
            globs: globs.into_iter().map(|g| g.1).collect(),
            input: a.input.or_paths(a.paths()),
            dereference: a.dereference_recursive,
            unordered: a.unordered,
            no_messages: a.no_messages,
            chunk_size: a.chunk_size,
            checkpoint: a.checkpoint.choice(),
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::grep::run(comm, options)
    }
    /// grep prints no summary: the lines are the result (-v's line comes as detail).
    fn render(_: &Report, _: &Console) {}
}

/// The console's events, with detail (binary-file notices, -v's line) on stderr as
/// `mfu-rs grep: ...` lines, as grep writes its notices, and none with -q.
struct Notices {
    inner: Arc<dyn Events>,
    quiet: bool,
}

impl Events for Notices {
    fn error(&self, message: &str) {
        self.inner.error(message);
    }
    fn progress(&self, verb: &str, report: &ProgressReport) {
        self.inner.progress(verb, report);
    }
    fn output(&self, bytes: &[u8]) {
        self.inner.output(bytes);
    }
    fn info(&self, text: &str) {
        if self.quiet {
            return;
        }
        let mut lines = String::new();
        for line in text.lines() {
            lines.push_str("mfu-rs grep: ");
            lines.push_str(line);
            lines.push('\n');
        }
        stderr_bytes(lines.as_bytes());
    }
}
