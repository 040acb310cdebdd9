//! `mfu-rs bz2` on the command line: [`Bz2Args`] and the rendering of [`crate::bz2::Report`]
//! (nothing but, with `-v`, how it was done, on stderr).

use crate::bz2::{Options, Report};
use crate::cli::args::{Common, NoAtimeArg};
use crate::cli::console::{stderr_bytes, Console};
use crate::cli::tool::CliTool;
use crate::engine::codec::dbz2;
use crate::engine::context::{Context, Error, ToolReport};
use crate::engine::select::Rules;
use crate::engine::status::Status;
use clap::Args;
use flist::path::display;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs bz2`, named as in dbz2 (and bzip2).
#[derive(Args, Clone, Debug)]
#[command(
    about = "Compress or decompress a file with parallel bzip2",
    after_help = "Compression cuts FILE into blocks of ~10 MB (the largest multiple of the -b block \
        under 10 MiB), compresses them on all ranks as independent bzip2 streams and appends \
        dbz2's block table and footer; plain bunzip2 decompresses the result (it ignores the \
        table as trailing garbage). Decompression of such a file is parallel over its blocks; a \
        file from plain bzip2 (one or several concatenated streams) is decompressed by rank 0 \
        alone. A dbz2 table that does not match its streams is not used: the streams are then \
        decoded one after another (as bunzip2 does) and the output must have the footer's size. \
        SIGINT/SIGTERM stop the work after the blocks in flight and keep the input (exit 1); the \
        blocks written are recorded in a checkpoint (.OUTPUT.mfu-checkpoint beside the output, or \
        --checkpoint PATH) and the partial output is kept beside the output: the same command run \
        again (after a stop or a kill, at any rank count) writes only the missing blocks, and the \
        result is byte-identical to an uninterrupted run's. A checkpoint made for another input \
        (changed since), other options, or whose partial output is gone or not the file it wrote \
        is not used: the run starts over and says so. With --no-checkpoint (and for a file from \
        plain bzip2) a stop removes the temporary output. A temporary .NAME.HOST.PID.mfu-tmp that \
        a killed earlier run on this host left is removed.\n\n\
        Examples:\n  \
        mpirun -np 64 mfu-rs bz2 -z /lustre/big.dat        # -> big.dat.bz2, big.dat removed\n  \
        mpirun -np 64 mfu-rs bz2 -d -k /lustre/big.dat.bz2 # -> big.dat, keep the .bz2\n  \
        bunzip2 -k big.dat.bz2                             # the output is plain bzip2 too\n\n\
        Exit status: 0 done, 1 the work failed (damaged input, read or write error, the input \
        changed while being read or its directory replaced, a signal; the output is not created, \
        the input kept), 2 usage error \
        (no FILE, an input some rank cannot open, output exists without -f, not a bzip2 file; \
        nothing changed)."
)]
pub struct Bz2Args {
    /// The file to compress (to FILE.bz2) or decompress (FILE.bz2, .dbz2 -> FILE; .tbz2, .tbz
    /// -> .tar; other names -> FILE.out).
    #[arg(value_name = "FILE")]
    pub file: OsString,
    /// Compress (the default).
    #[arg(short = 'z', long, conflicts_with = "decompress")]
    pub compress: bool,
    /// Decompress.
    #[arg(short, long)]
    pub decompress: bool,
    /// Keep the input file (by default it is removed after success).
    #[arg(short, long)]
    pub keep: bool,
    /// Overwrite the output file if it exists.
    #[arg(short, long)]
    pub force: bool,
    /// bzip2 block size in units of 100 kB (1-9), as in bzip2; also sets the stream size
    /// (the largest multiple of it below 10 MiB).
    #[arg(short = 'b', long = "blocksize", value_name = "1-9", default_value_t = 9,
          value_parser = clap::value_parser!(u32).range(1..=9))]
    pub blocksize: u32,
    /// Bytes of input per stream instead of dbz2's ~10 MB (tests use small blocks).
    #[arg(long, hide = true, value_name = "SIZE", value_parser = stream_bytes_arg)]
    pub stream_bytes: Option<u64>,
    /// Where the blocks done are recorded, so that the same command continues after a stop.
    #[command(flatten)]
    pub checkpoint: crate::cli::args::CheckpointArgs,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `--stream-bytes`: more than 0 and at most [`dbz2::MAX_BLOCK`], the largest block this tool
/// decompresses (a bigger one would make a file it refuses to read back).
fn stream_bytes_arg(text: &str) -> Result<u64, String> {
    match crate::cli::args::size_arg(text)? {
        n if n > dbz2::MAX_BLOCK => Err(format!(
            "'{text}': at most {} bytes (1 GiB) per stream",
            dbz2::MAX_BLOCK
        )),
        n => Ok(n),
    }
}

/// `mfu-rs bz2` (dbz2).
pub struct Bz2;

impl CliTool for Bz2 {
    const NAME: &'static str = "bz2";
    const OLD_NAMES: &'static [&'static str] = &["dbz2"];
    const ABOUT: &'static str =
        "Compress or decompress files with parallel bzip2, compatible with bzip2 (dbz2)";
    type Args = Bz2Args;
    type Options = Options;
    type Report = Report;

    fn common(args: &Bz2Args) -> &Common {
        &args.common
    }
    fn noatime(args: &Bz2Args) -> bool {
        args.noatime.noatime
    }

    fn named_files(args: &Bz2Args) -> Vec<(&'static str, &OsStr)> {
        vec![("FILE", args.file.as_os_str())]
    }

    fn options(args: &Bz2Args, _rules: Rules, context: Context) -> Options {
        Options {
            file: args.file.as_bytes().to_vec(),
            decompress: args.decompress,
            keep: args.keep,
            force: args.force,
            level: args.blocksize,
            stream_bytes: args.stream_bytes,
            checkpoint: args.checkpoint.choice(),
            context,
        }
    }

    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::bz2::run(comm, options)
    }

    /// bzip2 says nothing on success; `-v` tells how it was done, on stderr.
    fn render(report: &Report, _console: &Console) {
        if report.verbose && report.status() == Status::Ok {
            stderr_bytes(
                format!(
                    "{} -> {}: {} in {:.2} s\n",
                    display(&report.input),
                    display(&report.output),
                    report.detail,
                    report.seconds
                )
                .as_bytes(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_bytes_are_capped_at_the_largest_block() {
        assert_eq!(stream_bytes_arg("1GiB"), Ok(dbz2::MAX_BLOCK));
        assert_eq!(stream_bytes_arg("50000"), Ok(50_000));
        assert!(stream_bytes_arg("2GiB").is_err());
        assert!(stream_bytes_arg("0").is_err());
    }
}
