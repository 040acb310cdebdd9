//! One tool as the command line sees it ([`CliTool`]): its clap options, the library options
//! they become, the run, and the rendering of its report. The dispatcher's table holds one row
//! per tool ([`crate::cli::run_tool::row`]).

use crate::cli::args::Common;
use crate::cli::console::Console;
use crate::engine::context::{Context, Error, ToolReport};
use crate::engine::select::Rules;
use std::ffi::OsStr;
use steal::Comm;

/// A tool's command-line face. Implemented once per tool in `cli/`; the library function it
/// wraps (`run`) knows nothing of argv or the terminal.
pub trait CliTool: 'static {
    /// The canonical name (`cp`).
    const NAME: &'static str;
    /// The mpiFileUtils names that also reach it (`dcp`).
    const OLD_NAMES: &'static [&'static str];
    /// Its line in `mfu-rs --help`.
    const ABOUT: &'static str;
    /// The clap options.
    type Args: clap::Args + clap::FromArgMatches + Send + Sync;
    /// The library's options.
    type Options: Sync;
    /// The library's report.
    type Report: ToolReport + Send;

    /// The `--progress`, `-v`, `-q`, `--json` group of `args`.
    fn common(args: &Self::Args) -> &Common;
    /// The operands and options that name files or directories, with the name users see
    /// (`PATH`, `-o`...), checked for empty names before anything runs. Filters (`--match`)
    /// and expressions are not names.
    fn named_files(args: &Self::Args) -> Vec<(&'static str, &OsStr)>;
    /// Files this run creates to hold its results (lists, reports, an archive), with the
    /// option that names them; `-` stands for stdout. Checked before the run.
    fn output_files(_args: &Self::Args) -> Vec<(&'static str, &[u8])> {
        Vec::new()
    }
    /// `--noatime` (or an older spelling of it): the run's reads should leave access times
    /// alone. Tools that read no file data and no directories keep the default.
    fn noatime(_args: &Self::Args) -> bool {
        false
    }
    /// Refusals of the command line beyond clap's, before any work (`rm .`).
    fn check(_args: &Self::Args) -> Result<(), String> {
        Ok(())
    }
    /// The library options for `args`; `rules` are the include/exclude options in
    /// command-line order; `context` carries the console and the stop flag.
    fn options(args: &Self::Args, rules: Rules, context: Context) -> Self::Options;
    /// Run the tool on this rank. Collective.
    fn run(comm: &dyn Comm, options: &Self::Options) -> Result<Self::Report, Error>;
    /// The human summary of a finished run (rank 0, not `-q`, not `--json`), through
    /// `Console::text`.
    fn render(report: &Self::Report, console: &Console);
}
