//! `mfu-rs parallel` (dparallel): the command line of [`crate::parallel`].

use crate::cli::args::Common;
use crate::cli::console::{stderr_bytes, Console};
use crate::cli::list_args::Routed;
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use crate::parallel::{Options, Report, Resume};
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use steal::Comm;

/// Options of `mfu-rs parallel`, named as in GNU parallel.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Run shell commands in parallel over all ranks",
    after_help = AFTER_HELP,
    mut_arg("input", |a| a.value_name("LIST").help(
        "Fill the template with every entry of this list (v3/v4 cache, `path|T` text, one path \
         per line, or NUL-separated; `-` = stdin), so that `mfu-rs find ... -o - | mfu-rs \
         parallel -i - CMD` works"
    ))
)]
pub struct ParallelArgs {
    /// The command template: its words joined by spaces make a `/bin/sh -c` command line for
    /// each entry of the list (-i), with `{}` the path, `{/}` its last component, `{//}` its
    /// directory, `{.}` the path without extension, `{/.}` the last component without it (each
    /// quoted for the shell); without any of them the path is appended. Without a template, each
    /// line of the input (-a FILE or stdin) is a command.
    #[arg(value_name = "COMMAND", trailing_var_arg = true)]
    pub command: Vec<OsString>,
    /// `-i`, `--input-format`: the list that fills the template.
    #[command(flatten)]
    pub input: crate::cli::list_args::ListInput,
    /// Read the commands, one per line, from FILE instead of stdin (no template).
    #[arg(short = 'a', long, value_name = "FILE", conflicts_with_all = ["input", "command"])]
    pub arg_file: Option<OsString>,
    /// Commands running at once on each rank. Default: one per core shared by this process's
    /// ranks when started directly, 1 per rank under a launcher (which places one rank per core).
    #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Write the outputs in input order. Output is then written when every command has ended.
    #[arg(short, long)]
    pub keep_order: bool,
    /// Append a line per finished command to FILE, GNU parallel's columns: Seq Host Starttime
    /// JobRuntime Send Receive Exitval Signal Command. Emptied first unless --resume.
    #[arg(long, value_name = "FILE")]
    pub joblog: Option<OsString>,
    /// Skip the commands the --joblog records as finished (whatever their exit status), by
    /// their number in the input (Seq), and append to it.
    #[arg(long, requires = "joblog", conflicts_with = "resume_failed")]
    pub resume: bool,
    /// Skip the commands the --joblog records as succeeded (exit 0): failed ones run again.
    #[arg(long, requires = "joblog")]
    pub resume_failed: bool,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

const AFTER_HELP: &str = "\
Each command runs with /bin/sh -c, stdin from /dev/null. Its standard output and error are \
captured and written whole (never mixed with another command's), as they end; with \
--keep-order, or when the ranks are several processes (under a launcher), at the end of the run.

Examples:
  mfu-rs parallel -a commands.txt                       # one command per line
  mfu-rs walk -o - /data/in | mfu-rs parallel -i - gzip -9 {}
  mpirun -np 64 mfu-rs parallel -i files.mfu convert {} {.}.png --joblog run.log
  mpirun -np 64 mfu-rs parallel -i files.mfu convert {} {.}.png --joblog run.log --resume

Exit status: 0 every command exited 0, 1 some command failed (each named on stderr with its \
exit status) or a signal stopped the run (the running commands are waited for), 2 usage \
error (nothing run), 130 a second signal (the running commands are killed).

Commands start in input order (at -j 1 on one rank, one after the other); --resume skips the \
commands the joblog records by their number in the input (Seq), as GNU parallel.";

/// `mfu-rs parallel` (dparallel).
pub struct Parallel;

impl CliTool for Parallel {
    const NAME: &'static str = "parallel";
    const OLD_NAMES: &'static [&'static str] = &["dparallel"];
    const ABOUT: &'static str = "Run shell commands in parallel over all ranks (dparallel)";
    type Args = ParallelArgs;
    type Options = Options;
    type Report = Report;

    fn common(a: &ParallelArgs) -> &Common {
        &a.common
    }
    fn named_files(a: &ParallelArgs) -> Vec<(&'static str, &OsStr)> {
        let input = a.input.named_files();
        let arg_file = a.arg_file.iter().map(|f| ("-a", f.as_os_str()));
        let joblog = a.joblog.iter().map(|f| ("--joblog", f.as_os_str()));
        input.chain(arg_file).chain(joblog).collect()
    }
    fn output_files(a: &ParallelArgs) -> Vec<(&'static str, &[u8])> {
        a.joblog
            .iter()
            .map(|f| ("--joblog", f.as_bytes()))
            .collect()
    }
    fn check(a: &ParallelArgs) -> Result<(), String> {
        if a.command.is_empty() && a.input.input.is_some() {
            return Err("-i LIST fills a command template: give the COMMAND too".into());
        }
        if !a.command.is_empty() && a.input.input.is_none() {
            return Err(
                "a COMMAND template is filled from a list: give -i LIST (- for stdin); \
                 commands one per line come from -a FILE or stdin without a COMMAND"
                    .into(),
            );
        }
        Ok(())
    }
    fn options(a: &ParallelArgs, _rules: Rules, mut context: Context) -> Options {
        // Stdout carries the commands' output: -v's lines go to stderr.
        context.events = Arc::new(Routed {
            inner: context.events,
            output_to_stderr: false,
            info_to_stderr: true,
            quiet: a.common.quiet,
        });
        Options {
            template: a.command.iter().map(|w| w.as_bytes().to_vec()).collect(),
            input: a.input.list(),
            commands: a.arg_file.as_ref().map(|f| f.as_bytes().to_vec()),
            jobs: a.jobs.map_or(0, usize::from),
            keep_order: a.keep_order,
            joblog: a.joblog.as_ref().map(|f| f.as_bytes().to_vec()),
            resume: match (a.resume, a.resume_failed) {
                (true, _) => Resume::Finished,
                (_, true) => Resume::Succeeded,
                _ => Resume::No,
            },
            stderr: Some(Arc::new(stderr_bytes)),
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::parallel::run(comm, options)
    }
    /// Stdout carries the commands' output: the summary is -v's detail, on stderr.
    fn render(_: &Report, _: &Console) {}
}
