//! `mfu-rs tar` (dtar): parallel archive create, extract and list.
//!
//! Archives are POSIX pax tar files that GNU tar, bsdtar and Python read, with dtar's index
//! (DTAR_IDX) as their last member, so that extraction and listing start in parallel at once.
//! - create ([`create`]): walk, sort by name, encode every header once from the walked record,
//!   place entries by a prefix sum over ranks, write headers and data at their offsets on all
//!   ranks (big files in chunks over the work-stealing queue), then the index;
//! - extract ([`extract`]): find the index (side file, xattr, footer) or, without one,
//!   walk the chain of headers ([`scan`]), split the stream by bytes over ranks, then directories, files, data,
//!   links and metadata, never writing outside the target ([`beneath`]);
//! - list ([`list`]).
//!
//! With `-z` the tar stream is cut into independent zstd frames with a seek table
//! ([`seekable`]); extraction and listing read such archives in parallel too ([`stream`]).

mod align;
pub mod beneath;
pub mod create;
pub mod extract;
pub mod header;
pub mod index;
pub mod list;
mod partial;
pub mod scan;
pub mod seekable;
pub mod stream;

use crate::cli::args::size_arg;
use crate::cli::copy_args::FilterArgs;
use crate::cli::{report_error, Common};
use crate::engine::select::Rules;
use crate::engine::status::Status;
use clap::Args;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// `mfu-rs tar` / `dtar`.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Create, extract or list tar archives in parallel (dtar)",
    long_about = "Create, extract or list tar archives in parallel (dtar).\n\n\
        Archives are POSIX pax tar files that GNU tar, bsdtar and Python read, with dtar's index \
        as their last member (`ARCHIVE-NAME.dtaridx`), so that extraction and listing run in \
        parallel from the start. For archives without an index (GNU tar's, bsdtar's...) rank 0 \
        first walks the chain of headers; --save-index keeps what the walk found. With -z the archive is a \
        seekable zstd stream that `zstd -dc A.tar.zst | tar -x` also reads.\n\n\
        Extraction never writes outside the target directory: absolute names, `..` and paths \
        through symbolic links are refused.",
    after_help = "Examples:\n  \
        mpirun -np 64 mfu-rs tar -c -f /lustre/run42.tar -C /lustre/scratch run42\n  \
        mpirun -np 64 mfu-rs tar -x -f /lustre/run42.tar -C /lustre/restore\n  \
        mfu-rs tar -t -v -f run42.tar\n  \
        mfu-rs tar -c -z -f run42.tar.zst run42"
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
    /// Create a seekable zstd archive (independent frames and a seek table). Extract and list
    /// recognise one without this option.
    #[arg(short = 'z', long = "zstd")]
    pub zstd: bool,
    /// zstd compression level (1-19).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=19))]
    pub zstd_level: i32,
    /// Keep owners, permissions (no umask), times and xattrs: all the --preserve-* below.
    #[arg(short = 'p', long)]
    pub preserve: bool,
    /// Extract: give entries their archived owner and group (default when run as root).
    #[arg(long)]
    pub preserve_owner: bool,
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
    /// Create: don't update sources' access times (O_NOATIME where permitted).
    #[arg(long = "open-noatime")]
    pub open_noatime: bool,
    /// Bytes per read/write call when data is copied through memory.
    #[arg(short, long, value_name = "SIZE", default_value = "4MB", value_parser = size_arg)]
    pub bufsize: u64,
    /// Bytes per chunk of file data (the unit of parallel work), and the uncompressed size of
    /// one zstd frame.
    #[arg(short = 'k', long, value_name = "SIZE", default_value = "4MB", value_parser = size_arg)]
    pub chunksize: u64,
    /// The largest window of archive the header-chain walk of an archive without an index
    /// reads at once (used up to 1 MiB, 8 KiB at least).
    #[arg(long, value_name = "SIZE", default_value = "256MB", value_parser = size_arg)]
    pub memsize: u64,
    /// After extract or list had to scan (no index found), save the index as the side file
    /// ARCHIVE.dtaridx so the next run starts in parallel at once.
    #[arg(long)]
    pub save_index: bool,
    /// Create: files and directories to archive.
    #[arg(value_name = "PATH")]
    pub paths: Vec<OsString>,
    #[command(flatten)]
    pub stripe: crate::cli::copy_args::StripeArgs,
    #[command(flatten)]
    pub filters: FilterArgs,
    #[command(flatten)]
    pub common: Common,
}

impl TarArgs {
    /// Whether xattrs are stored and restored.
    pub fn xattrs(&self) -> bool {
        self.preserve || self.preserve_xattrs || self.preserve_acls
    }
}

/// Rank 0's closing line: `WHAT, N of data, into PLACE in T s (R/s)[; S skipped][; F failed]`.
fn print_summary(
    what: &str,
    bytes: u64,
    place: &[u8],
    started: std::time::Instant,
    skipped: u64,
    failed: u64,
) {
    let secs = started.elapsed().as_secs_f64();
    let mut line = format!(
        "{what}, {} of data, into {} in {secs:.3} s ({}/s)",
        crate::cli::bytes_text(bytes),
        flist::path::display(place),
        steal::progress::human_bytes((bytes as f64 / secs.max(1e-9)) as u64),
    );
    if skipped > 0 {
        line.push_str(&format!("; {skipped} skipped"));
    }
    if failed > 0 {
        line.push_str(&format!("; {failed} failed"));
    }
    line.push('\n');
    crate::cli::stdout_bytes(line.as_bytes());
}

/// Run `mfu-rs tar` on this rank. Collective.
pub fn run(comm: &dyn Comm, args: &TarArgs, rules: &Rules) -> Status {
    let modes = [args.create, args.extract, args.list];
    let usage = |msg: &str| {
        if comm.rank() == 0 {
            report_error("tar", msg);
        }
        Status::Usage
    };
    if modes.iter().filter(|&&m| m).count() != 1 {
        return usage("give exactly one of -c (create), -x (extract), -t (list)");
    }
    if args.create && args.paths.is_empty() {
        return usage("-c needs at least one PATH to archive");
    }
    if !args.create && !args.paths.is_empty() {
        return usage("extracting or listing selected members is not supported: give no PATH");
    }
    if args.create && args.file.as_bytes() == b"-" {
        return usage(
            "-c -f -: writing the archive to standard output is not supported (it is written \
             in parallel at known offsets): give a file name (./- for a file named '-')",
        );
    }
    if args.create && args.chunksize >= 1 << 32 {
        return usage("-k/--chunksize must be below 4GiB (it is the size of a zstd frame)");
    }
    steal::signals::install();
    if args.create {
        create::run(comm, args, rules)
    } else if args.extract {
        extract::run(comm, args)
    } else {
        list::run(comm, args)
    }
}
