//! `mfu-rs chmod` on the command line: [`ChmodArgs`] and the rendering of
//! [`crate::chmod::Report`].

use crate::chmod::{Options, Report};
use crate::cli::args::Common;
use crate::cli::console::Console;
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use clap::Args;
use std::ffi::{OsStr, OsString};
use steal::Comm;

/// Options of `mfu-rs chmod`, named as in dchmod.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Change the mode, owner and group of trees in parallel",
    after_help = "Examples:\n  \
        mpirun -np 16 mfu-rs chmod -m g+rX,o-rwx /lustre/project   # share with the group only\n  \
        mfu-rs chmod -u alice -g proj /data/run                     # chown -R alice:proj\n  \
        mfu-rs chmod -m 2775 -g proj -n --match '^shared$' /data   # only entries named shared\n  \
        mfu-rs chmod -m u-x -i list.mfu                             # change what a list names\n\n\
        MODE is octal (755, 2775) or symbolic as in chmod(1): [ugoa]*[-+=][rwxXst]*|[ugo], \
        comma lists (u+rwX,g=u,o-w); without ugoa the umask limits the change.\n\n\
        Exit status: 0 all changed, 1 something could not be changed (each listed on stderr), \
        2 usage error (nothing changed).",
    mut_arg("input", |a| a.help(
        "Change what this list names (v3/v4 cache, `path|T` text, one path per line, or \
         NUL-separated) instead of walking PATHs. Every entry is stat'ed again: the change \
         starts from the current mode, not the list's"
    ))
)]
pub struct ChmodArgs {
    /// Files and directories to change (directories with everything below them).
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// `-i`, `--input-format`: the list of what to change.
    #[command(flatten)]
    pub input: crate::cli::list_args::ListInput,
    /// New owner: a user name or a numeric uid (`+N` is always a number).
    #[arg(short = 'u', long = "owner", value_name = "USER")]
    pub owner: Option<String>,
    /// New group: a group name or a numeric gid.
    #[arg(short = 'g', long = "group", value_name = "GROUP")]
    pub group: Option<String>,
    /// New mode, octal or symbolic (see below).
    #[arg(
        short = 'm',
        long = "mode",
        value_name = "MODE",
        allow_hyphen_values = true
    )]
    pub mode: Option<String>,
    /// Call chmod/chown on every selected entry, even where nothing would change.
    #[arg(short, long)]
    pub force: bool,
    /// Do not list entries that fail with "Operation not permitted" (e.g. files of other
    /// users); they are still counted and still make the exit status 1.
    #[arg(short, long)]
    pub silent: bool,
    /// Leave entries whose path matches REGEX alone (Rust regex syntax, unanchored).
    // Own ids: `select::Rules` reads the rsync-style `exclude` globs of other tools' matches.
    #[arg(long = "exclude", id = "chmod_exclude", value_name = "REGEX")]
    pub exclude: Option<String>,
    /// Change only entries whose path matches REGEX (unanchored).
    #[arg(long = "match", id = "chmod_match", value_name = "REGEX")]
    pub matching: Option<String>,
    /// Apply --match and --exclude to the last path component instead of the whole path.
    #[arg(short, long)]
    pub name: bool,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs chmod` (dchmod).
pub struct Chmod;

impl CliTool for Chmod {
    const NAME: &'static str = "chmod";
    const OLD_NAMES: &'static [&'static str] = &["dchmod"];
    const ABOUT: &'static str = "Change owner, group and mode of trees in parallel (dchmod)";
    type Args = ChmodArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &ChmodArgs) -> &Common {
        &args.common
    }

    fn named_files(args: &ChmodArgs) -> Vec<(&'static str, &OsStr)> {
        let paths = args.paths.iter().map(|p| ("PATH", p.as_os_str()));
        paths.chain(args.input.named_files()).collect()
    }

    fn options(args: &ChmodArgs, _rules: Rules, context: Context) -> Options {
        Options {
            input: args.input.or_paths(&args.paths),
            owner: args.owner.clone(),
            group: args.group.clone(),
            mode: args.mode.clone(),
            force: args.force,
            silent: args.silent,
            exclude: args.exclude.clone(),
            matching: args.matching.clone(),
            name: args.name,
            context,
        }
    }

    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::chmod::run(comm, options)
    }

    fn render(report: &Report, console: &Console) {
        let secs = report.seconds;
        console.text(&format!(
            "Changed {} items ({} unchanged, {} failed) in {secs:.2} s ({:.0} items/s)\n",
            report.changed,
            report.unchanged,
            report.failed,
            (report.changed + report.unchanged) as f64 / secs.max(1e-9)
        ));
    }
}
