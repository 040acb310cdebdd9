//! `mfu-rs rm`: the command line of [`crate::rm`].

use crate::cli::args::{Common, MemoryArgs};
use crate::cli::console::Console;
use crate::cli::list_args::{ListInput, ListOutput};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use crate::rm::{Options, Report};
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs rm`, named as in drm.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Remove files and trees in parallel",
    after_help = "Examples:\n  \
        mpirun -np 16 mfu-rs rm /lustre/scratch/old-run          # remove a tree\n  \
        mfu-rs rm --dryrun --match '\\.tmp$' /data/run             # list what would go\n  \
        mfu-rs rm --exclude '/keep(/|$)' -o removed.txt /data/run  # remove all but keep/, save a list\n  \
        mfu-rs rm -i old.mfu                                       # remove what a list names\n\n\
        Exit status: 0 all removed, 1 something could not be removed (each listed on stderr), \
        2 usage error (nothing removed).",
    mut_arg("input", |a| a.help(
        "Remove what this list names (v3/v4 cache, `path|T` text, one path per line, or \
         NUL-separated; `-` = stdin) instead of walking PATHs. Directories are removed only if \
         the list also names everything they hold"
    )),
    mut_arg("output", |a| a.help(
        "Write the list of what was removed (with --dryrun: of what would be) to FILE: cache v4 \
         for stat lists, text for lite lists and with --aggressive. `-` writes it to stdout \
         (the summary then goes to stderr). FILE inside a PATH being removed is refused"
    ))
)]
pub struct RmArgs {
    /// Files and directories to remove (directories with everything below them). `/` is refused.
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// `-i`, `--input-format`: the list to remove.
    #[command(flatten)]
    pub input: ListInput,
    /// `-o`, `-t`: the list of what was removed.
    #[command(flatten)]
    pub output: ListOutput,
    /// Walk without stat, names and types only (the default).
    #[arg(short, long, conflicts_with = "stat")]
    pub lite: bool,
    /// Stat every entry while walking (so that --output writes a v4 list with metadata).
    #[arg(long)]
    pub stat: bool,
    /// Keep entries whose path matches REGEX (Rust regex syntax, unanchored; the path relative
    /// to its PATH, as with --match); directories that hold kept entries stay too.
    // Own ids: `select::Rules` reads the rsync-style `exclude` globs of other tools' matches.
    #[arg(long = "exclude", id = "rm_exclude", value_name = "REGEX")]
    pub exclude: Option<String>,
    /// Remove only entries whose path matches REGEX (unanchored). The path matched is relative
    /// to the PATH it was found under (`a/b.tmp` for PATH/a/b.tmp, `.` for PATH itself); with
    /// --input, relative to the list's topmost entries (those with no ancestor in the list).
    #[arg(long = "match", id = "rm_match", value_name = "REGEX")]
    pub matching: Option<String>,
    /// Apply --match and --exclude to the last path component instead of the whole path.
    #[arg(long)]
    pub name: bool,
    /// Print every path that would be removed, one per line, and change nothing.
    #[arg(long)]
    pub dryrun: bool,
    /// Unlink files while walking, as soon as their directory is read, instead of after the
    /// walk (directories still go bottom-up at the end).
    #[arg(long, conflicts_with_all = ["input", "dryrun"])]
    pub aggressive: bool,
    /// Restore the access and modification times of the parent directories that remain.
    #[arg(short = 'T', long)]
    pub traceless: bool,
    /// Do not descend into directories on another file system than their PATH (mount points
    /// below it): each is named on stderr and stays, with the directories above it (exit 1).
    #[arg(long, conflicts_with = "input")]
    pub one_file_system: bool,
    /// `--memory-limit`, `--tmpdir`: a v3/v4 list read with `-i` that outgrows the limit is
    /// removed a piece at a time (its directories spill by depth; not with -o or -T).
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs rm` (drm).
pub struct Rm;

impl CliTool for Rm {
    const NAME: &'static str = "rm";
    const OLD_NAMES: &'static [&'static str] = &["drm"];
    const ABOUT: &'static str = "Remove files and trees in parallel (drm)";
    type Args = RmArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &RmArgs) -> &Common {
        &args.common
    }
    fn named_files(a: &RmArgs) -> Vec<(&'static str, &OsStr)> {
        let paths = a.paths.iter().map(|p| ("PATH", p.as_os_str()));
        let input = a.input.named_files();
        let output = a.output.output.iter().map(|p| ("-o", p.as_os_str()));
        paths.chain(input).chain(output).collect()
    }
    fn output_files(a: &RmArgs) -> Vec<(&'static str, &[u8])> {
        a.output.output_files()
    }
    fn check(a: &RmArgs) -> Result<(), String> {
        refuse_dot(&a.paths)
    }
    fn options(a: &RmArgs, _rules: Rules, context: Context) -> Options {
        Options {
            input: a.input.or_paths(&a.paths),
            output: a.output.file(),
            text: a.output.text,
            stat: a.stat,
            exclude: a.exclude.clone(),
            matching: a.matching.clone(),
            name: a.name,
            dryrun: a.dryrun,
            aggressive: a.aggressive,
            traceless: a.traceless,
            one_file_system: a.one_file_system,
            memory_limit: a.memory.memory_limit,
            tmpdir: a.memory.tmpdir(),
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::rm::run(comm, options)
    }
    fn render(r: &Report, console: &Console) {
        console.text(&summary(r));
    }
}

/// The summary lines: `Removed N items (...) in S s (R items/s)` (dry run: `Would remove
/// ...`), and with a selection the directories kept.
pub fn summary(r: &Report) -> String {
    let items = r.files + r.dirs;
    let mut text = if r.dryrun {
        format!(
            "Would remove {items} items ({} files, {} directories)\n",
            r.files, r.dirs
        )
    } else {
        let secs = r.seconds;
        format!(
            "Removed {items} items ({} files, {} directories) in {secs:.2} s ({:.0} items/s)\n",
            r.files,
            r.dirs,
            items as f64 / secs.max(1e-9)
        )
    };
    if r.selective {
        let verb = if r.dryrun { "Would keep" } else { "Kept" };
        text.push_str(&format!(
            "{verb} {} directories that hold entries not selected\n",
            r.kept
        ));
    }
    // Only when the list outgrew it: the in-memory run's summary is as it was.
    if let (Some(limit), Some(s), Some(dir)) = (&r.memory_limit, &r.spilled, &r.tmpdir) {
        text.push_str(&format!("Memory limit: {limit}\n"));
        text.push_str(&s.describe(dir));
        text.push('\n');
    }
    text
}

/// `rm` of `.` or `..` is refused (GNU rm refuses it; here nothing at all is removed, exit 2, as
/// for every usage error).
fn refuse_dot(paths: &[OsString]) -> Result<(), String> {
    for p in paths {
        let p = p.as_bytes();
        let trimmed = match p.iter().rposition(|&b| b != b'/') {
            Some(end) => &p[..=end],
            None => continue, // `/`: rm refuses it itself
        };
        if matches!(flist::path::basename(trimmed), b"." | b"..") {
            return Err(format!(
                "refusing to remove '.' or '..' directory: '{}' (nothing removed)",
                flist::path::display(p)
            ));
        }
    }
    Ok(())
}
