//! `mfu-rs pfa ls|cat|unpack|pack` on the command line: [`PfaArgs`] and the rendering of
//! [`crate::pfa::Report`].

use crate::cli::args::{size_arg, Common, NoAtimeArg};
use crate::cli::console::{bytes_text, Console};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use crate::pfa::{cat, ls, pack, recover, unpack, Action, Options, Report};
use clap::{Args, Subcommand};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs pfa`.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Aggregates of many logical files in one shared file (PFA): list, print, unpack, pack, recover",
    after_help = "An aggregate (the mfu-pfa library's format) holds named streams, written by \
        many ranks at once into one file, each rank's data in chunks at offsets it alone owns; \
        its index is at the end, with a checksum per chunk. A version adds the streams of a later \
        store, keeping only the chunks whose contents changed. An aggregate cut short or \
        damaged is refused by name when read; `recover` drops the incomplete last version of \
        one cut mid-write, so that its complete versions read again.\n\n\
        `pack` stores one stream per regular file, directory and symbolic link of the SRCs, \
        named by its path relative to its SRC (a SRC that is a file: its name), with its kind, \
        mode, owner and mtime; `unpack` makes them again.\n\n\
        Examples:\n  \
        mpirun -np 8 mfu-rs pfa pack /scratch/run42 run42.pfa\n  \
        mfu-rs pfa ls run42.pfa\n  \
        mfu-rs pfa cat run42.pfa out/step1.txt | head\n  \
        mpirun -np 8 mfu-rs pfa pack --new-version /scratch/run42 run42.pfa\n  \
        mpirun -np 16 mfu-rs pfa unpack --version 1 run42.pfa /scratch/restore\n  \
        mfu-rs pfa unpack run42.pfa tree && mfu-rs tar -cf run42.tar tree   # as a tar\n\n\
        Exit status: 0 done; 1 something asked for did not happen (an aggregate refused as cut \
        or damaged, a stream not written, a file not packed or changed while read), each named \
        on stderr; 2 usage error, nothing done."
)]
pub struct PfaArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: PfaCommand,
}

/// The actions of `mfu-rs pfa`.
#[derive(Subcommand, Clone, Debug)]
pub enum PfaCommand {
    /// List the streams of each version: kind (f file, d directory, l symbolic link), size in
    /// bytes, chunks, name.
    // `--version V` is the aggregate's version here, not mfu-rs's.
    #[command(
        disable_version_flag = true,
        after_help = "Prints, for each version, `version V: N streams, B bytes`, then one \
        line per stream, sorted by name: `KIND SIZE CHUNKS NAME`. With --json the versions and \
        their streams are in the report instead.\n\n\
        Exit status: 0 done, 1 the aggregate could not be read (cut, damaged, missing: named), \
        2 usage error."
    )]
    Ls(LsArgs),
    /// Write one stream's bytes to standard output.
    #[command(
        disable_version_flag = true,
        after_help = "Exit status: 0 done, 1 the aggregate or the stream could not be \
        read (named on stderr; the bytes before a damaged chunk were written), 2 usage error."
    )]
    Cat(CatArgs),
    /// Unpack every stream of a version into a tree under DEST, in parallel over the ranks.
    #[command(
        disable_version_flag = true,
        after_help = "DEST is made if missing (its parent must exist); a DEST that is a \
        symbolic link is refused. Every entry is made beneath DEST without following a symbolic \
        link; stream names that are absolute or hold `..` are refused (named). Each file is \
        written under a temporary name, given its mode (exact as root, less the umask \
        otherwise), owner (as root) and mtime, then renamed into place: a file whose data can't \
        be read whole (a damaged chunk) never appears; the temporaries of an unpack killed \
        outright are removed by the next unpack into DEST (named). Something already at an \
        entry's name is \
        left alone (named, exit 1) unless --overwrite. Streams not written by `pack` (no \
        recorded metadata) become regular files.\n\n\
        Exit status: 0 done, 1 some entries were not made (each named) or the aggregate could \
        not be read (nothing made), 2 usage error (DEST a symbolic link or not a directory)."
    )]
    Unpack(UnpackArgs),
    /// Pack the files, directories and symbolic links under each SRC into the aggregate AGG.
    #[command(
        after_help = "Each rank packs the entries of its part of the walk as its own \
        streams. A file that changed while it was read (size, mtime or ctime before and after) \
        is named and left out (exit 1); fifos, sockets and devices are named and left out. AGG \
        appears only once every rank has written its part (a temporary name until then); with \
        --new-version it gains a version instead, which stores only the chunks whose contents \
        changed. A name two SRCs hold is named and no AGG is written. AGG must not lie inside \
        a SRC.\n\n\
        Exit status: 0 done, 1 some entries were not packed (each named) or AGG could not be \
        written, 2 usage error (a SRC missing, AGG inside a SRC or not creatable; nothing done)."
    )]
    Pack(PackArgs),
    /// Drop the incomplete last version of an aggregate cut mid-write (a run killed before
    /// its close), so that its complete versions read again.
    #[command(
        after_help = "Searches back from the end for the last complete version (its \
        trailer, footer and header checked) and truncates the file right after it. An \
        aggregate that ends with a complete version is left as it is. One whose last version is \
        complete but damaged (its trailer or footer fails its checksum) is refused, unchanged: \
        recovery never drops a version that was written whole. A symbolic link is not followed; \
        a file with more than one hard link is refused. Readers and `pack --new-version` never \
        recover on their own.\n\n\
        Exit status: 0 done (or nothing to drop), 1 not recovered (named; the file unchanged), \
        2 usage error."
    )]
    Recover(RecoverArgs),
}

/// `pfa recover`.
#[derive(Args, Clone, Debug)]
pub struct RecoverArgs {
    /// The aggregate.
    #[arg(value_name = "AGG")]
    pub agg: OsString,
    /// The options every tool has.
    #[command(flatten)]
    pub common: Common,
}

/// `pfa ls`.
#[derive(Args, Clone, Debug)]
pub struct LsArgs {
    /// The aggregate.
    #[arg(value_name = "AGG")]
    pub agg: OsString,
    /// Only this version [default: all].
    #[arg(long, value_name = "V")]
    pub version: Option<u64>,
    /// The options every tool has.
    #[command(flatten)]
    pub common: Common,
}

/// `pfa cat`.
#[derive(Args, Clone, Debug)]
pub struct CatArgs {
    /// The aggregate.
    #[arg(value_name = "AGG")]
    pub agg: OsString,
    /// The stream's name (as `pfa ls` shows it).
    #[arg(value_name = "NAME")]
    pub name: OsString,
    /// The version to read [default: the last].
    #[arg(long, value_name = "V")]
    pub version: Option<u64>,
    /// The options every tool has.
    #[command(flatten)]
    pub common: Common,
}

/// `pfa unpack`.
#[derive(Args, Clone, Debug)]
pub struct UnpackArgs {
    /// The aggregate.
    #[arg(value_name = "AGG")]
    pub agg: OsString,
    /// The directory to unpack into.
    #[arg(value_name = "DEST")]
    pub dest: OsString,
    /// The version to unpack [default: the last].
    #[arg(long, value_name = "V")]
    pub version: Option<u64>,
    /// Replace files and symbolic links already in DEST (by a rename: never written through;
    /// directories are never replaced).
    #[arg(long)]
    pub overwrite: bool,
    /// The options every tool has.
    #[command(flatten)]
    pub common: Common,
}

/// `pfa pack`.
#[derive(Args, Clone, Debug)]
pub struct PackArgs {
    /// The trees (or files) to pack, then the aggregate to write.
    #[arg(value_name = "SRC... AGG", required = true, num_args = 2..)]
    pub paths: Vec<OsString>,
    /// Add a version to the existing AGG, storing only the chunks whose contents changed
    /// since its last version.
    #[arg(long)]
    pub new_version: bool,
    /// Bytes per chunk [default: the Lustre stripe size on Lustre, else the file system's
    /// preferred I/O size when at least 64 KiB, else 1 MiB].
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub chunk_size: Option<u64>,
    /// Write chunks with O_DIRECT (on a file system that refuses it, e.g. tmpfs, the write
    /// falls back to buffered I/O and says so with -v).
    #[arg(long)]
    pub direct: bool,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has.
    #[command(flatten)]
    pub common: Common,
}

impl PackArgs {
    /// (SRCs, AGG).
    fn split(&self) -> (&[OsString], &OsString) {
        let (agg, srcs) = self.paths.split_last().expect("clap: at least two");
        (srcs, agg)
    }
}

/// `mfu-rs pfa`.
pub struct Pfa;

impl CliTool for Pfa {
    const NAME: &'static str = "pfa";
    const OLD_NAMES: &'static [&'static str] = &[];
    const ABOUT: &'static str =
        "Aggregates of many logical files in one shared file (PFA): list, print, unpack, pack, recover";
    type Args = PfaArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &PfaArgs) -> &Common {
        match &args.action {
            PfaCommand::Ls(a) => &a.common,
            PfaCommand::Cat(a) => &a.common,
            PfaCommand::Unpack(a) => &a.common,
            PfaCommand::Pack(a) => &a.common,
            PfaCommand::Recover(a) => &a.common,
        }
    }
    fn noatime(args: &PfaArgs) -> bool {
        matches!(&args.action, PfaCommand::Pack(a) if a.noatime.noatime)
    }
    fn named_files(args: &PfaArgs) -> Vec<(&'static str, &OsStr)> {
        match &args.action {
            PfaCommand::Ls(a) => vec![("AGG", a.agg.as_os_str())],
            PfaCommand::Cat(a) => vec![("AGG", a.agg.as_os_str())],
            PfaCommand::Recover(a) => vec![("AGG", a.agg.as_os_str())],
            PfaCommand::Unpack(a) => vec![("AGG", a.agg.as_os_str()), ("DEST", &a.dest)],
            PfaCommand::Pack(a) => {
                let (srcs, agg) = a.split();
                let mut v: Vec<(&'static str, &OsStr)> =
                    srcs.iter().map(|s| ("SRC", s.as_os_str())).collect();
                v.push(("AGG", agg.as_os_str()));
                v
            }
        }
    }
    fn output_files(args: &PfaArgs) -> Vec<(&'static str, &[u8])> {
        match &args.action {
            // A new aggregate is created beside its name: its directory must take it.
            PfaCommand::Pack(a) if !a.new_version => vec![("AGG", a.split().1.as_bytes())],
            _ => Vec::new(),
        }
    }
    fn check(args: &PfaArgs) -> Result<(), String> {
        match &args.action {
            PfaCommand::Cat(a) if a.common.json => {
                Err("cat writes the stream on stdout: --json has no place there".into())
            }
            _ => Ok(()),
        }
    }
    fn options(args: &PfaArgs, _rules: Rules, context: Context) -> Options {
        let bytes = |s: &OsString| s.as_bytes().to_vec();
        let action = match &args.action {
            PfaCommand::Ls(a) => Action::Ls(ls::Options {
                agg: bytes(&a.agg),
                version: a.version,
                print: !a.common.json,
            }),
            PfaCommand::Cat(a) => Action::Cat(cat::Options {
                agg: bytes(&a.agg),
                name: bytes(&a.name),
                version: a.version,
            }),
            PfaCommand::Unpack(a) => Action::Unpack(unpack::Options {
                agg: bytes(&a.agg),
                dest: bytes(&a.dest),
                version: a.version,
                overwrite: a.overwrite,
            }),
            PfaCommand::Pack(a) => {
                let (srcs, agg) = a.split();
                Action::Pack(pack::Options {
                    srcs: srcs.iter().map(bytes).collect(),
                    agg: bytes(agg),
                    new_version: a.new_version,
                    chunk_size: a.chunk_size,
                    direct_io: a.direct,
                })
            }
            PfaCommand::Recover(a) => Action::Recover(recover::Options { agg: bytes(&a.agg) }),
        };
        Options { action, context }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::pfa::run(comm, options)
    }
    fn render(report: &Report, console: &Console) {
        match report {
            // The listing and the stream are the output itself.
            Report::Ls(_) | Report::Cat(_) => {}
            Report::Unpack(r) => console.text(&format!(
                "Unpacked version {}: {} files, {} directories, {} symbolic links, {} in \
                 {:.3} s{}\n",
                r.version,
                r.files,
                r.dirs,
                r.symlinks,
                bytes_text(r.bytes),
                r.seconds,
                not_done(&[
                    (r.existing, "already there"),
                    (r.refused, "refused"),
                    (r.failed, "failed")
                ]),
            )),
            Report::Pack(r) => console.text(&format!(
                "Packed {} files, {} directories, {} symbolic links, {} as version {} in \
                 {:.3} s: {} chunks written ({}), {} reused{}{}\n",
                r.files,
                r.dirs,
                r.symlinks,
                bytes_text(r.bytes),
                r.version,
                r.seconds,
                r.chunks_written,
                bytes_text(r.bytes_written),
                r.chunks_reused,
                if r.direct_io { ", O_DIRECT" } else { "" },
                not_done(&[(r.changed, "changed while read"), (r.failed, "failed")]),
            )),
            Report::Recover(r) if r.failed => {}
            Report::Recover(r) if r.dropped == 0 => console.text(&format!(
                "Nothing to recover: version {} is complete and last ({} bytes)\n",
                r.version, r.len_before
            )),
            Report::Recover(r) => console.text(&format!(
                "Recovered: dropped {} of an incomplete version; version {} is now the last\n",
                bytes_text(r.dropped),
                r.version
            )),
        }
    }
}

/// `; 2 already there, 1 failed` for the counts that are not 0.
fn not_done(counts: &[(u64, &str)]) -> String {
    let parts: Vec<String> = counts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
}
