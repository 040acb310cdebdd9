//! `mfu-rs dup` (ddup) on the command line: its options.

use crate::cli::args::{CheckpointArgs, Common, MemoryArgs, NoAtimeArg};
use crate::cli::console::Console;
use crate::cli::list_args::{ListInput, ListOutput, Routed};
use crate::cli::tool::CliTool;
use crate::dup::{Options, Report};
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use steal::Comm;

/// Options of `mfu-rs dup` (ddup).
#[derive(Args, Clone, Debug)]
#[command(
    about = "Find files with identical contents",
    after_help = "Prints every group of identical non-empty regular files as lines `PATH HASH` \
        (HASH: lower-case hex blake3 of the contents), one line per name. Groups come in HASH \
        order, names sorted by path bytes within a group; the output is the same at any rank \
        count. Empty files are ignored (as by ddup). Hard links are one file: names of one \
        inode are never duplicates of each other; when their inode has a duplicate, every name \
        is printed in the group. The files of a list given with -i are stat'ed again; with -o - \
        the list goes to stdout and the groups are not printed.\n\n\
        Examples:\n  \
        mpirun -np 8 mfu-rs dup /data/projects            # print groups of identical files\n  \
        mfu-rs dup -o extra.mfu /data/a /data/b            # also list the redundant copies\n  \
        mfu-rs dup --verify extra.mfu -o sure.mfu /data/a /data/b \\\n      \
        && mfu-rs rm -i sure.mfu                           # check again right before removing\n  \
        mfu-rs walk -o tree.mfu /data && mfu-rs dup -i tree.mfu\n  \
        mfu-rs dup --memory-limit 256M --tmpdir /local/tmp /data   # group out of core\n\n\
        The --output list holds, for every group, all names of every inode except the first \
        (the inode whose first name sorts first): removing them keeps exactly one copy of each \
        content and frees the space of the others. Files change: a file that changes while dup \
        runs is left out (named, exit 1), and --verify LIST (an earlier -o list) runs the \
        comparison again and writes to -o only the names of LIST that are still redundant \
        copies, so that rm -i removes nothing whose content exists nowhere else now.\n\n\
        Memory: when the list and the grouping tables outgrow --memory-limit on a rank, the \
        grouping runs out of core: names keyed by size, then by hash, spill as sorted runs to \
        --tmpdir and are merged so that each size and each group comes out whole; only files \
        sharing their size are hashed, and the output is that of a run in memory. A v3/v4 list \
        given with -i is then read a piece at a time, never whole; a walked tree or a text \
        list is still held whole while it is made. With -v, the \
        limit is shown and, when anything spilled, how much (`Spilled: ...`; in --json: \
        `spilled`). A full TMPDIR is an error naming it (exit 1, no \
        groups printed, no list written).\n\n\
        Exit status: 0 done, 1 some files could not be listed or read, changed while dup ran, or \
        (--verify) are no longer redundant copies (each on stderr with its path; they are left \
        out), 2 usage error."
)]
pub struct DupArgs {
    /// Files and directories to search (directories with everything below them).
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// `-i`: read a list instead of walking.
    #[command(flatten)]
    pub input: ListInput,
    /// `-o`, `-t`: write the list.
    #[command(flatten)]
    pub output: ListOutput,
    /// With --output: write to it only the names this earlier `-o` list holds that are still
    /// redundant copies now (after a full comparison of PATHs again); the others are named on
    /// stderr (exit 1). Files that became redundant since are not added.
    #[arg(long, value_name = "LIST", requires = "output")]
    pub verify: Option<OsString>,
    /// `--checkpoint PATH`, `--no-checkpoint`: where the files already hashed are recorded,
    /// so that a stopped run continues.
    #[command(flatten)]
    pub checkpoint: CheckpointArgs,
    /// `--memory-limit`, `--tmpdir`: beyond the limit the grouping by size and hash runs
    /// through sorted runs spilled to TMPDIR.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs dup`.
pub struct Dup;

impl CliTool for Dup {
    const NAME: &'static str = "dup";
    const OLD_NAMES: &'static [&'static str] = &["ddup"];
    const ABOUT: &'static str = "Find files with identical contents (ddup)";
    type Args = DupArgs;
    type Options = Options;
    type Report = Report;

    fn common(a: &DupArgs) -> &Common {
        &a.common
    }
    fn noatime(a: &DupArgs) -> bool {
        a.noatime.noatime
    }
    fn named_files(a: &DupArgs) -> Vec<(&'static str, &OsStr)> {
        let paths = a.paths.iter().map(|p| ("PATH", p.as_os_str()));
        let input = a.input.named_files();
        let output = a.output.output.iter().map(|f| ("-o", f.as_os_str()));
        paths.chain(input).chain(output).collect()
    }
    fn output_files(a: &DupArgs) -> Vec<(&'static str, &[u8])> {
        a.output.output_files()
    }
    fn options(a: &DupArgs, _rules: Rules, mut context: Context) -> Options {
        // Stdout carries the groups (or the list): -v's line goes to stderr.
        context.events = Arc::new(Routed {
            inner: context.events,
            output_to_stderr: false,
            info_to_stderr: true,
            quiet: a.common.quiet,
        });
        Options {
            input: a.input.or_paths(&a.paths),
            output: a.output.file(),
            verify: a.verify.as_ref().map(|v| v.as_bytes().to_vec()),
            text: a.output.text,
            checkpoint: a.checkpoint.choice(),
            memory_limit: a.memory.memory_limit,
            tmpdir: a.memory.tmpdir(),
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::dup::run(comm, options)
    }
    /// dup prints no summary of its own: the groups are the result, and -v's line comes as
    /// detail.
    fn render(_: &Report, _: &Console) {}
}
