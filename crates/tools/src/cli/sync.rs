//! `mfu-rs sync`: the command line of [`crate::sync`].

use crate::cli::args::{Common, MemoryArgs};
use crate::cli::console::{bytes_text, Console};
use crate::cli::copy_args::{CheckArgs, CopyIoArgs, FilterArgs, StripeArgs};
use crate::cli::tool::CliTool;
use crate::engine::compare_expr::Output;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use crate::sync::{Options, Report};
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs sync`, named as in dsync.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Make DEST equal to SRC, copying only what differs (dsync; like rsync -a SRC/ DEST/)",
    after_help = "Entries differ when type, size or modification time (ns) differ (--contents: or \
        their bytes); mode, owner and group differences are fixed without copying data. Access \
        times are ignored. A sync after an interrupted cp or sync copies only what is missing or \
        incomplete.\n\n\
        Paths (as rsync): a SRC that is a symlink to a directory is synced as that directory; a \
        SRC that is not a directory goes into DEST when DEST is a directory (DEST/NAME), and is \
        DEST otherwise (DEST/ must then be a directory). Without -D nothing in DEST is removed: \
        an entry whose type differs from SRC's is named and left, with everything beneath it \
        (exit 1); -D replaces it.\n\n\
        Beyond --memory-limit (per rank) the walked lists spill to sorted runs in --tmpdir and \
        SRC and DEST are paired by a merge join: the same result; the report adds `Memory \
        limit: ...` and `Spilled: ...`. What must change is still planned in memory.\n\n\
        Examples:\n  \
        mpirun -np 64 mfu-rs sync -D /lustre/project /lustre/backup/project\n  \
        mfu-rs sync --dryrun -D src dst          # list what would change, change nothing\n  \
        mfu-rs sync --link-dest /backup/monday /data /backup/tuesday\n\n\
        Exit status: 0 equal now; 1 some items failed, were left (type conflicts without -D) or \
        deletions were refused, or (--verify --state) a file's destination differs from its \
        source or the state was not written (each named on stderr); 2 usage error, nothing \
        changed."
)]
pub struct SyncArgs {
    /// The source: a directory, whose contents are synced (as `rsync -a SRC/ DEST/`), or one
    /// file.
    #[arg(value_name = "SRC")]
    pub src: OsString,
    /// The destination (created if absent; its parent must exist).
    #[arg(value_name = "DEST")]
    pub dest: OsString,
    /// Print every planned action (create, update, delete, meta, link) and change nothing.
    #[arg(long)]
    pub dryrun: bool,
    /// Copy in batches of N files, each complete (with metadata) before the next starts.
    #[arg(
        short = 'b',
        long = "batch-files",
        value_name = "N",
        default_value_t = 0
    )]
    pub batch_files: u64,
    /// Copy I/O: buffer and chunk sizes, direct I/O, sparse files, extended attributes.
    #[command(flatten)]
    pub io: CopyIoArgs,
    /// Also compare the bytes of files of equal size; rewrite only the chunks that differ.
    #[arg(short = 'c', long)]
    pub contents: bool,
    /// Remove from DEST what SRC lacks, and replace entries of another type than SRC's
    /// (refused when the source walk was incomplete).
    #[arg(short = 'D', long)]
    pub delete: bool,
    /// Follow symbolic links in SRC.
    #[arg(short = 'L', long, overrides_with = "no_dereference")]
    pub dereference: bool,
    /// Copy symbolic links as links (the default).
    #[arg(short = 'P', long = "no-dereference")]
    pub no_dereference: bool,
    /// Hard-link files that are unchanged in DIR (same size, mtime, mode, owner) instead of
    /// copying them; copied when DIR is on another file system than DEST.
    #[arg(long = "link-dest", value_name = "DIR")]
    pub link_dest: Option<OsString>,
    /// Before syncing, write the entries whose comparison matches EXPR to FILE (dcmp syntax,
    /// repeatable): e.g. `MTIME=DIFFER@SIZE=COMMON:touched.mfu`, `EXIST=ONLY_DEST:extra.mfu`.
    /// CONTENT of same-size files is judged by mtime unless --contents is given.
    #[arg(short, long, value_name = "EXPR:FILE", value_parser = Output::value_parser())]
    pub output: Vec<Output>,
    /// Lustre layouts of the files this run creates.
    #[command(flatten)]
    pub stripe: StripeArgs,
    /// Include and exclude rules, in command-line order.
    #[command(flatten)]
    pub filters: FilterArgs,
    /// --verify, --manifest.
    #[command(flatten)]
    pub checks: CheckArgs,
    /// With --manifest: list every regular file of the tree, not only those copied (the
    /// files left as they are are read from SRC to hash them).
    #[arg(long = "manifest-all", requires = "manifest", help_heading = "Checks")]
    pub manifest_all: bool,
    /// With --verify: remember in FILE what was verified (per file: the identities of source
    /// and destination, and their digest); the next run with the same FILE reads again only
    /// what it copies or what changed since (a rewrite that kept size and mtime is caught by
    /// the ctime). A state of another SRC/DEST, damaged or truncated, is not trusted (said on
    /// stderr): everything is verified and FILE rewritten. Written after the run, atomically;
    /// never inside DEST.
    #[arg(
        long,
        value_name = "FILE",
        requires = "verify",
        help_heading = "Checks"
    )]
    pub state: Option<OsString>,
    /// `--memory-limit`, `--tmpdir`: beyond the limit (half of it as records on any rank) the
    /// walked lists spill to sorted runs in TMPDIR and SRC and DEST are paired by a merge join
    /// of the two sorted streams instead of a table in memory: a sync with nothing to do then
    /// holds its directories, not its files. What must be copied, deleted or fixed is still
    /// planned in memory (the copy engine takes its plan in memory). -o, --state, --manifest
    /// and -L keep the lists in memory (said on stderr when the lists outgrow the limit).
    /// TMPDIR inside SRC or DEST is refused.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs sync` (dsync).
pub struct Sync;

impl CliTool for Sync {
    const NAME: &'static str = "sync";
    const OLD_NAMES: &'static [&'static str] = &["dsync"];
    const ABOUT: &'static str = "Make DEST equal to SRC, copying only what differs (dsync)";
    type Args = SyncArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &SyncArgs) -> &Common {
        &args.common
    }
    fn noatime(args: &SyncArgs) -> bool {
        args.io.io.noatime.noatime
    }
    fn named_files(a: &SyncArgs) -> Vec<(&'static str, &OsStr)> {
        vec![("SRC", a.src.as_os_str()), ("DEST", a.dest.as_os_str())]
            .into_iter()
            .chain(a.link_dest.iter().map(|l| ("--link-dest", l.as_os_str())))
            .collect()
    }
    fn output_files(a: &SyncArgs) -> Vec<(&'static str, &[u8])> {
        let lists = a.output.iter().map(|o| ("-o", &o.file[..]));
        let state = a.state.iter().map(|s| ("--state", s.as_bytes()));
        lists.chain(a.checks.output_files()).chain(state).collect()
    }
    fn check(a: &SyncArgs) -> Result<(), String> {
        match a.memory.tmpdir() {
            Some(dir) => {
                crate::cmp::spilled::refuse_tmpdir_inside(&dir, a.src.as_bytes(), a.dest.as_bytes())
                    .map_err(|e| e.replacen("TMPDIR", "--tmpdir", 1))
            }
            None => Ok(()),
        }
    }
    fn options(args: &SyncArgs, rules: Rules, context: Context) -> Options {
        let mut o = Options::new(args.src.as_bytes(), args.dest.as_bytes());
        o.dryrun = args.dryrun;
        o.contents = args.contents;
        o.delete = args.delete;
        o.dereference = args.dereference;
        o.link_dest = args.link_dest.as_ref().map(|l| l.as_bytes().to_vec());
        o.output = args.output.clone();
        o.io = args
            .io
            .options(true, args.batch_files, args.stripe.options());
        args.checks.apply(&mut o.io);
        if let Some(m) = &mut o.io.manifest {
            m.all = args.manifest_all;
        }
        o.state = args.state.as_ref().map(|s| s.as_bytes().to_vec());
        o.memory_limit = args.memory.memory_limit;
        o.tmpdir = args.memory.tmpdir();
        o.rules = rules;
        o.context = context;
        o
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::sync::run(comm, options)
    }
    fn render(r: &Report, console: &Console) {
        console.text(&crate::cli::cmp::memory_lines(
            r.memory_limit.as_deref(),
            r.spilled.as_ref(),
        ));
        if r.spill_failed {
            console.text("Spill failed (named above): nothing changed\n");
            return;
        }
        console.text(&summary(r));
        if r.resumed > 0 {
            console.text(&crate::cli::cp::resumed_line(
                r.dryrun,
                r.resumed,
                r.resumed_bytes,
            ));
        }
    }
}

/// The last line of a run: `Synced: ...`, or `Dry run: ...`.
pub fn summary(r: &Report) -> String {
    if r.dryrun {
        format!(
            "Dry run: {} to create, {} to update, {} to delete, {} metadata to fix, {} to link; {} to copy\n",
            r.created,
            r.updated,
            r.deleted,
            r.meta_fixed,
            r.linked,
            bytes_text(r.bytes)
        )
    } else {
        format!(
            "Synced: {} created, {} updated, {} deleted, {} metadata fixed, {} linked; {} bytes copied ({}) in {:.3} s\n",
            r.created,
            r.updated,
            r.deleted,
            r.meta_fixed,
            r.linked,
            r.bytes,
            flist::units::human_bytes(r.bytes),
            r.seconds
        ) + &crate::cli::checks::checks_lines(r.verify.as_ref(), r.manifest.as_ref())
            + &r.state.as_ref().map(state_line).unwrap_or_default()
    }
}

/// `State FILE: verified V of N (U unchanged since the state, C copied and read back, R read
/// in full), D differ; written (E files)`.
fn state_line(s: &crate::sync::StateSummary) -> String {
    let mut text = format!(
        "State {}: verified {} of {} ({} unchanged since the state, {} copied and read back, {} \
         read in full)",
        s.path, s.verified, s.files, s.unchanged, s.copied, s.read
    );
    if s.differ > 0 {
        text.push_str(&format!(", {} differ", s.differ));
    }
    if s.not_verified > 0 {
        text.push_str(&format!(", {} not verified", s.not_verified));
    }
    if s.written {
        text.push_str(&format!("; written ({} files)\n", s.entries));
    } else {
        text.push_str("; not written\n");
    }
    text
}
