//! `mfu-rs tar` (dtar) on the command line: its options, the library options they become, and
//! the closing line of a create or an extract.

use crate::cli::args::{size_arg, Common, IoArgs, MemoryArgs};
use crate::cli::console::{bytes_text, Console};
use crate::cli::copy_args::{CheckArgs, FilterArgs, StripeArgs};
use crate::cli::tool::CliTool;
use crate::engine::codec::kind::Codec;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use crate::tar::select::Select;
use crate::tar::{Done, Mode, Options, Report};
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// The `4MB` default of tar's `-b` and `-k` (clap always sets it; this is for arguments made
/// without clap's defaults).
const DEFAULT_IO_SIZE: u64 = 4 << 20;

/// `mfu-rs tar` / `dtar`.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Create, extract or list tar archives in parallel (dtar)",
    long_about = "Create, extract or list tar archives in parallel (dtar).\n\n\
        Archives are POSIX pax tar files that GNU tar, bsdtar and Python read, with dtar's index \
        as their last member (`ARCHIVE-NAME.dtaridx`), so that extraction and listing run in \
        parallel from the start. For archives without an index (GNU tar's, bsdtar's...) rank 0 \
        first walks the chain of headers; --save-index keeps what the walk found. The compression \
        flags are GNU tar's: with -z (--gzip) the archive is gzip members that `gzip -dc` \
        reads, with -j (--bzip2) bzip2 streams that `bzip2 -dc` reads, with --zstd a seekable \
        zstd stream that `zstd -dc` reads, all three extracted in parallel; -a picks one by \
        the archive's suffix (.gz, .bz2, .zst); xz (-J) is not written. Extract and list also read .tar.gz, .tar.bz2, .tar.xz and .tar.zst \
        archives made by other tools (recognised by their first bytes): one compressed stream \
        decompresses front to back, beside the extraction.\n\n\
        Extraction never writes outside the target directory: absolute names, `..` and paths \
        through symbolic links are refused.",
    after_help = "Examples:\n  \
        mpirun -np 64 mfu-rs tar -c -f /lustre/run42.tar -C /lustre/scratch run42\n  \
        mpirun -np 64 mfu-rs tar -x -f /lustre/run42.tar -C /lustre/restore\n  \
        mpirun -np 64 mfu-rs tar -x -f /lustre/run42.tar -C /lustre/restore run42/input\n  \
        mfu-rs tar -x -f run42.tar --wildcards '*.log' --strip-components 1\n  \
        mfu-rs tar -t -v -f run42.tar\n  \
        mfu-rs tar -c -z -f run42.tar.gz run42\n  \
        mfu-rs tar -c -a -f run42.tar.zst run42\n\n\
        Continuing: a run stopped by SIGTERM or SIGINT (a job's time limit), or killed, \
        continues when the same command is run again: -c from a checkpoint beside the \
        archive, -x from one in $XDG_STATE_HOME/mfu-rs/checkpoints (never inside the target): \
        the entries extracted are skipped, a partial file that is still the same inode gets \
        only its missing ranges. --checkpoint PATH puts it elsewhere, --no-checkpoint keeps \
        none.",
    mut_arg("noatime", |a| a.help(
        "Leave access times alone: read the sources and their directories (-c) or the archive \
         (-x, -t) with O_NOATIME. Linux allows it only to a file's owner (or root); other files \
         are read anyway, counted, and named in one warning at the end (noatime_refused in \
         --json)"
    )),
    mut_arg("bufsize", |a| a.short('b').default_value("4MB").help(
        "Bytes per read/write call when data is copied through memory"
    )),
    mut_arg("checkpoint", |a| a.help(
        "Keep the checkpoint that lets the same command continue an interrupted run in this \
         directory: -c instead of DIR/.NAME.mfu-checkpoint beside the archive (on its file \
         system), -x instead of $XDG_STATE_HOME/mfu-rs/checkpoints (outside the target)"
    )),
    mut_arg("chunksize", |a| a.short('k').default_value("4MB").help(
        "Bytes per chunk of file data (the unit of parallel work), and the uncompressed size \
         of one zstd frame"
    ))
)]
pub struct TarArgs {
    /// Create an archive of PATH... (names stored as given, relative to -C).
    #[arg(short = 'c', long, group = "mode")]
    pub create: bool,
    /// Extract the archive into -C DIR (default: the current directory).
    #[arg(short = 'x', long, group = "mode")]
    pub extract: bool,
    /// List the archive's entries (with -v, like `tar -tv`).
    #[arg(short = 't', long, group = "mode")]
    pub list: bool,
    /// The archive. Create writes it under a temporary name beside it
    /// (`.NAME.HOST.PID.mfu-tmp`) and renames it into place when complete; `-` (standard
    /// output) is refused.
    #[arg(short = 'f', long = "file", value_name = "ARCHIVE", required = true)]
    pub file: OsString,
    /// Create: take PATHs relative to DIR. Extract: extract into DIR (it must exist).
    #[arg(short = 'C', long = "chdir", value_name = "DIR")]
    pub chdir: Option<OsString>,
    /// Create a gzip archive (as GNU tar's -z): independent gzip members plus an end member
    /// that indexes them; any gunzip reads it (`gzip -dc A.tar.gz | tar -t`), mfu-rs extracts
    /// it in parallel. Extract and list recognise gzip archives without this option.
    #[arg(short = 'z', long, conflicts_with_all = ["zstd", "bzip2", "xz", "auto_compress"])]
    pub gzip: bool,
    /// gzip compression level (1-9).
    #[arg(long, value_name = "N", default_value_t = 6, value_parser = clap::value_parser!(i32).range(1..=9))]
    pub gzip_level: i32,
    /// Create a bzip2 archive (as GNU tar's -j): independent streams with dbz2's table; any
    /// bunzip2 reads it, mfu-rs extracts it in parallel. Extract and list recognise bzip2
    /// archives without this option.
    #[arg(short = 'j', long, conflicts_with_all = ["zstd", "xz", "auto_compress"])]
    pub bzip2: bool,
    /// Create a seekable zstd archive (as GNU tar's --zstd): independent frames and a seek
    /// table; any zstd decoder reads it, mfu-rs extracts it in parallel. Extract and list
    /// recognise zstd archives without this option.
    #[arg(long = "zstd", conflicts_with_all = ["xz", "auto_compress"])]
    pub zstd: bool,
    /// zstd compression level (1-19).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=19))]
    pub zstd_level: i32,
    /// Create: pick the compression by the archive's suffix, as GNU tar: .gz/.tgz/.taz gzip,
    /// .bz2/.tbz/.tbz2/.tb2 bzip2, .zst/.tzst zstd, anything else none (.xz/.txz, .lzma,
    /// .lz, .lzo and .Z are refused: not written). Extract and list: accepted, the
    /// compression is recognised by the archive's first bytes.
    #[arg(short = 'a', long = "auto-compress", conflicts_with = "xz")]
    pub auto_compress: bool,
    /// Extract and list: accepted for GNU tar's habit (xz archives are recognised by their
    /// first bytes, and read front to back); create refuses it (xz archives are not written).
    #[arg(short = 'J', long)]
    pub xz: bool,
    /// Keep owners, permissions (no umask), times and xattrs: all the --preserve-* below.
    #[arg(short = 'p', long)]
    pub preserve: bool,
    /// Extract: give entries their archived owner and group (default when run as root): the
    /// ids their user and group names have here, the archived numbers for unknown names; and
    /// their archived project IDs (create stores them always, as MFURS.projid pax records).
    #[arg(long)]
    pub preserve_owner: bool,
    /// Extract: restore owners by the archived numbers, never by name. List: show numbers.
    #[arg(long)]
    pub numeric_owner: bool,
    /// Extract: set archived mtimes (always done; accepted for dtar compatibility).
    #[arg(long)]
    pub preserve_times: bool,
    /// Extract: set archived permissions exactly, without applying the umask.
    #[arg(long)]
    pub preserve_perms: bool,
    /// Store (create) and restore (extract) extended attributes.
    #[arg(long)]
    pub preserve_xattrs: bool,
    /// Store and restore ACLs (they are xattrs: same as --preserve-xattrs).
    #[arg(long)]
    pub preserve_acls: bool,
    /// Accepted for dtar compatibility; file flags are not archived.
    #[arg(long)]
    pub preserve_flags: bool,
    /// Extract: fsync every file before setting its metadata.
    #[arg(long)]
    pub fsync: bool,
    /// `--noatime`, `-b/--bufsize`, `-k/--chunksize` (4MB each unless given).
    #[command(flatten)]
    pub io: IoArgs,
    /// The largest window of archive the header-chain walk of an archive without an index
    /// reads at once (used up to 64 KiB, 2 KiB at least).
    #[arg(long, value_name = "SIZE", default_value = "256MB", value_parser = size_arg)]
    pub memsize: u64,
    /// After extract or list had to scan (no index found), save the index as the side file
    /// ARCHIVE.dtaridx so the next run starts in parallel at once.
    #[arg(long)]
    pub save_index: bool,
    /// Extract: `--memory-limit`, `--tmpdir`. Beyond the limit the entries are extracted a
    /// piece at a time in archive order (each piece's entries over all ranks), and the
    /// directories' metadata wait in a spill file in TMPDIR for the end, deepest first.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// Create: files and directories to archive. Extract and list: the MEMBERs to take, each
    /// with what is below it (all by default); a MEMBER that names nothing is reported and the
    /// run fails (exit 1) after the others.
    #[arg(value_name = "PATH")]
    pub paths: Vec<OsString>,
    /// Extract and list: MEMBERs are patterns (`*`, `?`, `[...]`, as fnmatch(3) and GNU tar).
    #[arg(long, overrides_with = "no_wildcards")]
    pub wildcards: bool,
    /// Extract and list: MEMBERs are exact names (the default).
    #[arg(long, overrides_with = "wildcards")]
    pub no_wildcards: bool,
    /// With --wildcards: pattern characters match `/` too (the default).
    #[arg(long, overrides_with = "no_wildcards_match_slash")]
    pub wildcards_match_slash: bool,
    /// With --wildcards: pattern characters do not match `/`.
    #[arg(long, overrides_with = "wildcards_match_slash")]
    pub no_wildcards_match_slash: bool,
    /// Extract and list: MEMBERs match from the start of names (the default).
    #[arg(long, overrides_with = "no_anchored")]
    pub anchored: bool,
    /// Extract and list: MEMBERs may also match after any `/` of a name.
    #[arg(long, overrides_with = "anchored")]
    pub no_anchored: bool,
    /// Extract: drop N leading components of each name (`.` counts as one) and of hard-link
    /// targets; entries with no more than N are skipped.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub strip_components: u32,
    /// Lustre layouts of the files this run creates.
    #[command(flatten)]
    pub stripe: StripeArgs,
    /// Include and exclude rules, in command-line order.
    #[command(flatten)]
    pub filters: FilterArgs,
    /// --verify (-x), --manifest (-c, -x).
    #[command(flatten)]
    pub checks: CheckArgs,
    /// --checkpoint PATH, --no-checkpoint: how an interrupted run continues.
    #[command(flatten)]
    pub checkpoint: crate::cli::args::CheckpointArgs,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

impl TarArgs {
    /// Whether xattrs are stored and restored.
    pub fn xattrs(&self) -> bool {
        self.preserve || self.preserve_xattrs || self.preserve_acls
    }
}

/// `mfu-rs tar`.
pub struct Tar;

impl CliTool for Tar {
    const NAME: &'static str = "tar";
    const OLD_NAMES: &'static [&'static str] = &["dtar"];
    const ABOUT: &'static str =
        "Create, extract or list tar archives in parallel, dtar-compatible (dtar)";
    type Args = TarArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &TarArgs) -> &Common {
        &args.common
    }
    fn noatime(args: &TarArgs) -> bool {
        args.io.noatime.noatime
    }

    fn named_files(args: &TarArgs) -> Vec<(&'static str, &OsStr)> {
        let mut named = vec![("-f", args.file.as_os_str())];
        named.extend(args.chdir.iter().map(|d| ("-C", d.as_os_str())));
        named.extend(args.paths.iter().map(|p| ("PATH", p.as_os_str())));
        named
    }

    fn output_files(args: &TarArgs) -> Vec<(&'static str, &[u8])> {
        let mut files = args.checks.output_files();
        if args.create {
            files.push(("-f", args.file.as_bytes()));
        }
        files
    }

    fn check(args: &TarArgs) -> Result<(), String> {
        let modes = [args.create, args.extract, args.list];
        if modes.iter().filter(|&&m| m).count() != 1 {
            return Err("give exactly one of -c (create), -x (extract), -t (list)".into());
        }
        if args.checks.verify && !args.extract {
            return Err("--verify checks the files an extraction writes: use it with -x".into());
        }
        if args.list && args.checks.manifest.is_some() {
            return Err("--manifest lists the files archived (-c) or extracted (-x)".into());
        }
        if args.create {
            compression(args)?;
        }
        if !args.extract && (args.memory.memory_limit.is_some() || args.memory.tmpdir.is_some()) {
            return Err("--memory-limit and --tmpdir are for -x".into());
        }
        let selecting = args.wildcards
            || args.no_wildcards
            || args.wildcards_match_slash
            || args.no_wildcards_match_slash
            || args.anchored
            || args.no_anchored
            || args.strip_components > 0
            || args.numeric_owner;
        if args.create && selecting {
            return Err(
                "--wildcards, --anchored, --strip-components and --numeric-owner (and \
                        their --no- forms) are for -x and -t"
                    .into(),
            );
        }
        Ok(())
    }

    fn options(args: &TarArgs, rules: Rules, context: Context) -> Options {
        // Checked by `check` before: only a create writes a compression.
        let codec = if args.create {
            compression(args).ok().flatten()
        } else {
            None
        };
        let mode = if args.create {
            Mode::Create {
                paths: bytes(&args.paths),
            }
        } else if args.extract {
            Mode::Extract
        } else {
            Mode::List
        };
        Options {
            chdir: args.chdir.as_ref().map(|d| d.as_bytes().to_vec()),
            zstd: codec == Some(Codec::Zstd),
            zstd_level: args.zstd_level,
            gzip: codec == Some(Codec::Gzip),
            gzip_level: args.gzip_level,
            bzip2: codec == Some(Codec::Bzip2),
            preserve_owner: args.preserve || args.preserve_owner,
            numeric_owner: args.numeric_owner,
            select: Select {
                members: if args.create {
                    Vec::new()
                } else {
                    bytes(&args.paths)
                },
                wildcards: args.wildcards,
                wildcards_given: args.wildcards || args.no_wildcards,
                wildcards_match_slash: !args.no_wildcards_match_slash,
                anchored: !args.no_anchored,
                strip_components: args.strip_components,
            },
            preserve_perms: args.preserve || args.preserve_perms,
            xattrs: args.xattrs(),
            fsync: args.fsync,
            bufsize: args.io.bufsize.unwrap_or(DEFAULT_IO_SIZE),
            chunksize: args.io.chunksize.unwrap_or(DEFAULT_IO_SIZE),
            memsize: args.memsize,
            save_index: args.save_index,
            memory_limit: args.memory.memory_limit,
            tmpdir: args.memory.tmpdir(),
            long: args.common.verbose,
            index_notices: !args.common.quiet,
            stripe: args.stripe.overrides(),
            lustre: args.stripe.api.clone(),
            rules,
            verify: args.checks.verify,
            manifest: args.checks.manifest.as_ref().map(|m| {
                crate::engine::manifest::ManifestOptions::new(
                    m.as_bytes(),
                    args.checks.manifest_hash,
                )
            }),
            checkpoint: args.checkpoint.choice(),
            context,
            ..Options::new(mode, &args.file)
        }
    }

    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::tar::run(comm, options)
    }

    fn render(report: &Report, console: &Console) {
        if let Some(line) = summary_line(report) {
            console.text(&line);
        }
        console.text(&memory_lines(report));
        console.text(&crate::cli::checks::checks_lines(
            report.verify.as_ref(),
            report.manifest.as_ref(),
        ));
    }
}

/// `Memory limit: ...` (when shown) and `Spilled: ...` (when the entries were extracted a
/// piece at a time), as cmp and sync show them.
fn memory_lines(report: &Report) -> String {
    let mut text = crate::cli::cmp::memory_lines(report.memory_limit.as_deref(), None);
    if let Some(p) = &report.pieces {
        text.push_str(&format!(
            "Spilled: {} of directories' metadata to {} (at most {} on one rank; removed); \
             extracted in {} pieces of at most {} entries per rank\n",
            flist::units::human_bytes(p.spill_bytes),
            p.tmpdir,
            flist::units::human_bytes(p.spill_bytes_max_rank),
            p.pieces,
            p.entries_per_rank
        ));
    }
    text
}

/// What an archive's name says of its compression (`-a`, as GNU tar reads suffixes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suffix {
    /// A suffix of a compression mfu-rs writes.
    Writes(Codec),
    /// A suffix of a compression mfu-rs does not write (its name: `xz`, `lzma`, ...).
    Unwritten(&'static str),
    /// No compression suffix.
    Plain,
}

/// The compression GNU tar's `-a` picks for the archive named `name` (bytes), by its suffix.
pub fn suffix_of(name: &[u8]) -> Suffix {
    const SUFFIXES: &[(&str, Suffix)] = &[
        (".gz", Suffix::Writes(Codec::Gzip)),
        (".tgz", Suffix::Writes(Codec::Gzip)),
        (".taz", Suffix::Writes(Codec::Gzip)),
        (".bz2", Suffix::Writes(Codec::Bzip2)),
        (".tbz", Suffix::Writes(Codec::Bzip2)),
        (".tbz2", Suffix::Writes(Codec::Bzip2)),
        (".tb2", Suffix::Writes(Codec::Bzip2)),
        (".zst", Suffix::Writes(Codec::Zstd)),
        (".tzst", Suffix::Writes(Codec::Zstd)),
        (".xz", Suffix::Unwritten("xz")),
        (".txz", Suffix::Unwritten("xz")),
        (".lzma", Suffix::Unwritten("lzma")),
        (".tlz", Suffix::Unwritten("lzma")),
        (".lz", Suffix::Unwritten("lzip")),
        (".lzo", Suffix::Unwritten("lzop")),
        (".tzo", Suffix::Unwritten("lzop")),
        (".Z", Suffix::Unwritten("compress")),
    ];
    SUFFIXES
        .iter()
        .find(|(s, _)| name.ends_with(s.as_bytes()) && name.len() > s.len())
        .map_or(Suffix::Plain, |(_, k)| *k)
}

/// The compression a create writes, from `-z`, `-j`, `--zstd`, `-J` and `-a` (GNU tar's
/// meanings): `None` for a plain archive. An error (nothing is written) for `-J` or a suffix
/// of a compression mfu-rs does not write, and for a flag that contradicts the archive's
/// compression suffix: `-z` meant zstd in mfu-rs before it meant gzip (GNU tar's), and a
/// script's `-czf A.tar.zst` must not silently become gzip in a file named zstd.
fn compression(args: &TarArgs) -> Result<Option<Codec>, String> {
    let unwritten = |what: &str| {
        format!(
            "{what} compression is not supported for writing (its streams cannot be read in \
             parallel): use -z (gzip), -j (bzip2) or --zstd"
        )
    };
    if args.xz {
        return Err(unwritten("xz"));
    }
    let suffix = suffix_of(args.file.as_bytes());
    if args.auto_compress {
        return match suffix {
            Suffix::Writes(c) => Ok(Some(c)),
            Suffix::Unwritten(what) => Err(unwritten(what)),
            Suffix::Plain => Ok(None),
        };
    }
    let (flag, asked) = if args.gzip {
        ("-z/--gzip", Some(Codec::Gzip))
    } else if args.bzip2 {
        ("-j/--bzip2", Some(Codec::Bzip2))
    } else if args.zstd {
        ("--zstd", Some(Codec::Zstd))
    } else {
        ("", None)
    };
    match (asked, suffix) {
        (Some(a), Suffix::Writes(s)) if a != s => Err(format!(
            "{flag} writes {} but {} is named for {}: give {} (-z is gzip, as in GNU tar), or \
             -a to pick the compression by the suffix",
            a.name(),
            flist::path::display(args.file.as_bytes()),
            s.name(),
            match s {
                Codec::Gzip => "-z",
                Codec::Bzip2 => "-j",
                _ => "--zstd",
            }
        )),
        (Some(a), Suffix::Unwritten(s)) => Err(format!(
            "{flag} writes {} but {} is named for {s}: rename the archive, or give the \
             compression its name says (not written by mfu-rs)",
            a.name(),
            flist::path::display(args.file.as_bytes()),
        )),
        _ => Ok(asked),
    }
}

/// Operands as bytes.
fn bytes(words: &[OsString]) -> Vec<Vec<u8>> {
    words.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// The closing line of a create or an extract (a listing has none):
/// `WHAT, N of data, into PLACE in T s (R/s)[; D replaced by a later entry of the same name]
/// [; S skipped][; F failed][; M not found]`, or for
/// a create that left no archive `Failed|Interrupted: nothing archived, ARCHIVE not created,
/// after T s[; F failed]`.
pub fn summary_line(report: &Report) -> Option<String> {
    let secs = report.seconds;
    let (what, place) = match report.mode {
        Done::List => return None,
        Done::Create if !report.created => {
            let mut line = format!(
                "{}: nothing archived, {} not created, after {secs:.3} s",
                if report.interrupted {
                    "Interrupted"
                } else {
                    "Failed"
                },
                flist::path::display(&report.archive),
            );
            if report.failed > 0 {
                line.push_str(&format!("; {} failed", report.failed));
            }
            line.push('\n');
            return Some(line);
        }
        Done::Create => (
            format!("Archived {} entries", report.archive_entries),
            &report.archive,
        ),
        Done::Extract => (
            format!(
                "Extracted {} of {} entries{}",
                report.entries,
                report.archive_entries,
                if report.interrupted {
                    " (interrupted)"
                } else {
                    ""
                }
            ),
            &report.directory,
        ),
    };
    let mut line = format!(
        "{what}, {} of data, into {} in {secs:.3} s ({}/s)",
        bytes_text(report.bytes),
        flist::path::display(place),
        flist::units::human_bytes((report.bytes as f64 / secs.max(1e-9)) as u64),
    );
    if report.superseded > 0 {
        // Not extracted, and no failure: tar keeps the last entry of a name.
        line.push_str(&format!(
            "; {} replaced by a later entry of the same name",
            report.superseded
        ));
    }
    if report.skipped > 0 {
        line.push_str(&format!("; {} skipped", report.skipped));
    }
    if report.failed > 0 {
        line.push_str(&format!("; {} failed", report.failed));
    }
    if report.not_found > 0 {
        line.push_str(&format!("; {} not found", report.not_found));
    }
    line.push('\n');
    Some(line)
}
