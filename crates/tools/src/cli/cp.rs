//! `mfu-rs cp`: the command line of [`crate::cp`].

use crate::cli::args::Common;
use crate::cli::console::{bytes_text, Console};
use crate::cli::copy_args::{CheckArgs, CopyIoArgs, FilterArgs, StripeArgs};
use crate::cli::tool::CliTool;
use crate::cp::{Options, Report};
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs cp`, named as in dcp.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Copy files and directory trees in parallel (dcp)",
    after_help = "Path rules (as cp and rsync): DEST absent → DEST becomes the copy; DEST an existing \
        directory → DEST/NAME; SRC/ with a trailing slash → the contents of SRC go into DEST; \
        several SRCs → DEST must be a directory.\n\n\
        Examples:\n  \
        mpirun -np 64 mfu-rs cp -p /lustre/run42 /lustre/archive/     # tree into a directory\n  \
        mfu-rs cp -p --exclude '*.tmp' --exclude '/scratch/' src/ dst  # contents, filtered\n  \
        mfu-rs cp -S sparse.img copy.img                               # keep holes\n\n\
        Safety: a destination that is the source itself (same file, hard link, snapshot made \
        with cp -al) is never written; nothing is created through a symlink already in DEST \
        (the entry is named and left); a file with other hard links is replaced, not written \
        through.\n\n\
        Exit status: 0 all copied; 1 some items failed or were refused (each named on stderr; \
        after cp -p, `mfu-rs sync SRC DEST/NAME` finishes the job; without -p, rerun the cp); \
        2 usage error, nothing copied.",
    mut_arg("bufsize", |a| a.short('b')),
    mut_arg("chunksize", |a| a.short('k')),
    mut_arg("input", |a| a.help(
        "Copy the entries of this list (v3/v4, text, plain or NUL-separated) instead of \
         walking; entries are stat'ed again and only those under a SRC are kept"
    ))
)]
pub struct CpArgs {
    /// Files or directories to copy.
    #[arg(value_name = "SRC", required = true, num_args = 1..)]
    pub sources: Vec<OsString>,
    /// Where they go (see the path rules below).
    #[arg(value_name = "DEST", required = true)]
    pub dest: OsString,
    /// Copy I/O: buffer and chunk sizes, direct I/O, sparse files, extended attributes.
    #[command(flatten)]
    pub io: CopyIoArgs,
    /// `-i`, `--input-format`: the list to copy instead of walking.
    #[command(flatten)]
    pub input: crate::cli::list_args::ListInput,
    /// Follow symbolic links in sources (copy what they point to).
    #[arg(short = 'L', long, overrides_with = "no_dereference")]
    pub dereference: bool,
    /// Copy symbolic links as links (the default).
    #[arg(short = 'P', long = "no-dereference")]
    pub no_dereference: bool,
    /// Keep owner, group, mode, times (ns), extended attributes (ACLs included) and project IDs
    /// (with directories' PROJINHERIT flag; one warning where DEST's file system has none).
    #[arg(short, long)]
    pub preserve: bool,
    /// Copy as this user id (needs root).
    #[arg(short = 'U', long, value_name = "ID")]
    pub uid: Option<u32>,
    /// Copy as this group id (needs root).
    #[arg(short = 'G', long, value_name = "ID")]
    pub gid: Option<u32>,
    /// Lustre layouts of the files this run creates.
    #[command(flatten)]
    pub stripe: StripeArgs,
    /// Include and exclude rules, in command-line order.
    #[command(flatten)]
    pub filters: FilterArgs,
    /// --verify, --manifest.
    #[command(flatten)]
    pub checks: CheckArgs,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs cp` (dcp).
pub struct Cp;

impl CliTool for Cp {
    const NAME: &'static str = "cp";
    const OLD_NAMES: &'static [&'static str] = &["dcp"];
    const ABOUT: &'static str = "Copy files and trees in parallel (dcp)";
    type Args = CpArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &CpArgs) -> &Common {
        &args.common
    }
    fn noatime(args: &CpArgs) -> bool {
        args.io.io.noatime.noatime
    }
    fn named_files(args: &CpArgs) -> Vec<(&'static str, &OsStr)> {
        let sources = args.sources.iter().map(|p| ("SRC", p.as_os_str()));
        let paths = sources.chain([("DEST", args.dest.as_os_str())]);
        let input = args.input.named_files();
        paths.chain(input).collect()
    }
    fn output_files(args: &CpArgs) -> Vec<(&'static str, &[u8])> {
        args.checks.output_files()
    }
    fn options(args: &CpArgs, rules: Rules, context: Context) -> Options {
        let mut o = Options::new(&bytes_of(&args.sources), args.dest.as_bytes());
        o.input = args.input.list();
        o.dereference = args.dereference;
        o.uid = args.uid;
        o.gid = args.gid;
        o.io = args.io.options(args.preserve, 0, args.stripe.options());
        args.checks.apply(&mut o.io);
        o.rules = rules;
        o.context = context;
        o
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::cp::run(comm, options)
    }
    fn render(r: &Report, console: &Console) {
        console.text(&summary(r));
        if r.resumed > 0 {
            console.text(&resumed_line(false, r.resumed, r.resumed_bytes));
        }
    }
}

fn bytes_of(paths: &[OsString]) -> Vec<&[u8]> {
    paths.iter().map(|p| p.as_bytes()).collect()
}

/// `Resumed N files inside, skipped B already copied` (cp and sync; `dryrun`: to resume).
pub fn resumed_line(dryrun: bool, files: u64, bytes: u64) -> String {
    let (verb, kept) = if dryrun {
        ("To resume", "to skip")
    } else {
        ("Resumed", "skipped")
    };
    format!(
        "{verb} {files} partial files from their journals; {kept}: {} already copied\n",
        bytes_text(bytes)
    )
}

/// `Copied N items (...) and B in S s (R/s)[; K skipped][; F failed]`.
pub fn summary(r: &Report) -> String {
    let secs = r.seconds;
    let mut line = format!(
        "Copied {} items ({} files, {} directories, {} links, {} hard links, {} other) and {} in {secs:.3} s ({}/s)",
        r.items(),
        r.files,
        r.dirs,
        r.symlinks,
        r.hardlinks,
        r.others,
        bytes_text(r.bytes),
        flist::units::human_bytes((r.bytes as f64 / secs.max(1e-9)) as u64),
    );
    if r.skipped > 0 {
        line.push_str(&format!("; {} skipped", r.skipped));
    }
    if r.failed > 0 {
        line.push_str(&format!("; {} failed", r.failed));
    }
    line.push('\n');
    line + &crate::cli::checks::checks_lines(r.verify.as_ref(), r.manifest.as_ref())
}
