//! `mfu-rs reln` on the command line: [`RelnArgs`] and the rendering of
//! [`crate::reln::Report`].

use crate::cli::args::{Common, NoAtimeArg};
use crate::cli::console::Console;
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use crate::reln::{Options, Report};
use clap::Args;
use flist::path::display;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs reln`, named as in dreln.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Rewrite symlink targets that start with an old prefix",
    after_help = "Examples:\n  \
        mv /lustre/old/proj /lustre/new/proj\n  \
        mpirun -np 8 mfu-rs reln /lustre/old/proj /lustre/new/proj /home /lustre/new/proj\n  \
        mfu-rs reln -r -p /old/data /new/data /new/data     # relative targets, keep link times\n  \
        mfu-rs reln --dryrun /old /new /links               # print `link: old -> new`, change nothing\n\n\
        Only absolute targets are rewritten; relative ones stay as they are.\n\n\
        Exit status: 0 all done, 1 some links could not be read or rewritten (each listed on \
        stderr), 2 usage error (nothing changed).",
    mut_arg("input", |a| a.help(
        "Look at the links this list names (v3/v4 cache, `path|T` text, one path per line, or \
         NUL-separated) instead of walking PATHs"
    ))
)]
pub struct RelnArgs {
    /// The prefix the targets start with now (made absolute from the current directory).
    #[arg(value_name = "OLDPATH")]
    pub oldpath: OsString,
    /// The prefix to put in its place.
    #[arg(value_name = "NEWPATH")]
    pub newpath: OsString,
    /// Trees to look for links in.
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// `-i`, `--input-format`: the list of links to look at.
    #[command(flatten)]
    pub input: crate::cli::list_args::ListInput,
    /// Keep the access and modification times of the links rewritten.
    #[arg(short, long)]
    pub preserve: bool,
    /// Write the new targets relative to the link's directory.
    #[arg(short, long)]
    pub relative: bool,
    /// Print `link: old -> new` for every link that would change, and change nothing.
    #[arg(long)]
    pub dryrun: bool,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs reln` (dreln).
pub struct Reln;

impl CliTool for Reln {
    const NAME: &'static str = "reln";
    const OLD_NAMES: &'static [&'static str] = &["dreln"];
    const ABOUT: &'static str = "Rewrite symlink targets that start with an old prefix (dreln)";
    type Args = RelnArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &RelnArgs) -> &Common {
        &args.common
    }
    fn noatime(args: &RelnArgs) -> bool {
        args.noatime.noatime
    }

    fn named_files(args: &RelnArgs) -> Vec<(&'static str, &OsStr)> {
        let prefixes = [
            ("OLDPATH", args.oldpath.as_os_str()),
            ("NEWPATH", args.newpath.as_os_str()),
        ];
        prefixes
            .into_iter()
            .chain(args.paths.iter().map(|p| ("PATH", p.as_os_str())))
            .chain(args.input.named_files())
            .collect()
    }

    fn options(args: &RelnArgs, _rules: Rules, context: Context) -> Options {
        let bytes = |p: &OsString| p.as_bytes().to_vec();
        Options {
            oldpath: bytes(&args.oldpath),
            newpath: bytes(&args.newpath),
            input: args.input.or_paths(&args.paths),
            preserve: args.preserve,
            relative: args.relative,
            dryrun: args.dryrun,
            context,
        }
    }

    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::reln::run(comm, options)
    }

    fn render(report: &Report, console: &Console) {
        let verb = if report.dryrun {
            "Would rewrite"
        } else {
            "Rewrote"
        };
        console.text(&format!(
            "{verb} {} of {} links from {} to {} in {:.2} s\n",
            report.rewritten,
            report.links,
            display(&report.oldpath),
            display(&report.newpath),
            report.seconds
        ));
    }
}
