//! `mfu-rs stripe`: the command line of [`crate::stripe`].

use crate::cli::args::{size_arg, Common, NoAtimeArg};
use crate::cli::console::{bytes_text, Console};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error, Events};
use crate::engine::select::Rules;
use crate::stripe::{Options, Report};
use clap::Args;
use flist::units::parse_size;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use steal::Comm;

/// Options of `mfu-rs stripe`, named as in dstripe.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Restripe files on Lustre in parallel, or report their layouts (dstripe)",
    after_help = "Each file is copied in parallel into a new file with the target layout. Where \
        Lustre can swap layouts (LL_IOC_LOV_SWAP_LAYOUTS, as lfs migrate), the file takes the \
        new layout and keeps its inode, hard links, open handles and times; a file whose data \
        changed during the copy (its data version moved) is left as it was and named. Elsewhere \
        the new file replaces it (mode, owner, times and xattrs kept; OST indices never \
        copied; hard-linked files skipped). The summary counts the files of each way. \
        Without -c the count follows the size policy: 1 stripe below 1 GiB, \
        floor(sqrt(GiB)) + 1 above, at most the OST count.\n\n\
        Examples:\n  \
        mpirun -np 16 mfu-rs stripe -c -1 -s 4MB /lustre/big/   # all OSTs, 4 MiB stripes\n  \
        mfu-rs stripe -m 1GB /lustre/run42                      # files over 1 GiB, by policy\n  \
        mfu-rs stripe -r /lustre/run42                          # report, change nothing\n\n\
        Exit status: 0 done; 1 some files failed, changed during the copy or were skipped (hard-linked \
        without layout swap); each named on stderr; they keep their old layout; 2 usage error or a PATH not on Lustre, nothing changed."
)]
pub struct StripeToolArgs {
    /// Files and directories (walked) to restripe.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<OsString>,
    /// Stripe count: N OSTs, -1 all, 0 the file-system default [default: by file size].
    #[arg(short = 'c', long = "count", value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-1..=i64::from(lustre_sys::MAX_STRIPE_COUNT)))]
    pub count: Option<i32>,
    /// Stripe size (a multiple of 64 KiB; rounded up).
    #[arg(short = 's', long = "size", value_name = "SIZE", default_value = "1MB", value_parser = size_arg)]
    pub size: u64,
    /// Only files at least this big.
    #[arg(short = 'm', long = "minsize", value_name = "SIZE", value_parser = parse_size)]
    pub minsize: Option<u64>,
    /// Print each file's stripe count and size; change nothing.
    #[arg(short = 'r', long)]
    pub report: bool,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs stripe` (dstripe).
pub struct Stripe;

impl CliTool for Stripe {
    const NAME: &'static str = "stripe";
    const OLD_NAMES: &'static [&'static str] = &["dstripe"];
    const ABOUT: &'static str =
        "Restripe files on Lustre in parallel, or report their layouts (dstripe)";
    type Args = StripeToolArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &StripeToolArgs) -> &Common {
        &args.common
    }
    fn noatime(args: &StripeToolArgs) -> bool {
        args.noatime.noatime
    }
    fn named_files(a: &StripeToolArgs) -> Vec<(&'static str, &OsStr)> {
        a.paths.iter().map(|p| ("PATH", p.as_os_str())).collect()
    }
    fn options(a: &StripeToolArgs, _rules: Rules, mut context: Context) -> Options {
        if a.common.quiet {
            // `-q` prints only errors: not the `--report` lines either.
            context.events = Arc::new(NoOutput(context.events));
        }
        let mut o = Options::new(&a.paths.iter().map(|p| p.as_bytes()).collect::<Vec<_>>());
        o.count = a.count;
        o.size = a.size;
        o.minsize = a.minsize;
        o.report = a.report;
        o.context = context;
        o
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::stripe::run(comm, options)
    }
    fn render(r: &Report, console: &Console) {
        if !r.report {
            console.text(&summary(r));
        }
    }
}

/// `Restriped N files (B) in S s[: X by layout swap, Y by rewrite][; K already had the
/// layout][; L hard-linked files skipped]`.
pub fn summary(r: &Report) -> String {
    let mut line = format!(
        "Restriped {} files ({}) in {:.3} s",
        r.restriped,
        bytes_text(r.bytes),
        r.seconds
    );
    if r.restriped > 0 {
        line.push_str(&format!(
            ": {} by layout swap, {} by rewrite",
            r.swapped, r.rewritten
        ));
    }
    if r.other_names > 0 {
        line.push_str(&format!(
            "; {} further names of hard-linked files done with them",
            r.other_names
        ));
    }
    if r.already > 0 {
        line.push_str(&format!("; {} already had the layout", r.already));
    }
    if r.linked > 0 {
        line.push_str(&format!("; {} hard-linked files skipped", r.linked));
    }
    line.push('\n');
    line
}

/// Events without the output (`-q`).
struct NoOutput(Arc<dyn Events>);

impl Events for NoOutput {
    fn error(&self, message: &str) {
        self.0.error(message);
    }
    fn progress(&self, verb: &str, report: &steal::progress::Report) {
        self.0.progress(verb, report);
    }
    fn output(&self, _: &[u8]) {}
    fn info(&self, text: &str) {
        self.0.info(text);
    }
}
