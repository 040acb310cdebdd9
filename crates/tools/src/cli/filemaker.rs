//! `mfu-rs filemaker` on the command line: [`FilemakerArgs`] and the rendering of
//! [`crate::filemaker::Report`].

use crate::cli::args::Common;
use crate::cli::console::{bytes_text, Console};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use crate::filemaker::{Fill, Options, Report, Spec};
use clap::Args;
use flist::path::display;
use flist::units::parse_size;
use std::ffi::{OsStr, OsString};
use std::ops::RangeInclusive;
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs filemaker` (dfilemaker).
#[derive(Args, Clone, Debug)]
#[command(
    about = "Generate a reproducible random tree of files",
    after_help = "The seed picks the number of levels from --depth and of items from --nitems; \
        items are spread over the levels (deeper levels hold more), each level's items over the \
        directories of the level above; each file's size comes from --size. Items are named \
        dir_NNNNNNNN, file_NNNNNNNN and link_NNNNNNNN (their number in the tree); directories \
        get mode 0700, files 0600 (less what the umask removes), links point to a random item \
        by a relative path. Names, types, sizes, contents and link targets depend only on the \
        options and the seed, never on the number of ranks; times are those of the run.\n\n\
        Examples:\n  \
        mfu-rs filemaker /tmp/tree                               # 3000 items, 5 levels, seed 1\n  \
        mpirun -np 8 mfu-rs filemaker -i 42 -n 100000-100000 -d 3-6 -s 4k-1MB /lustre/bench\n  \
        mfu-rs filemaker -f alternate --files 100 --links 0 -s 1GB -n 4 -d 1 /scratch/big\n\n\
        Fills: random = pseudo-random bytes (blake3 stream keyed by seed and file number), \
        true = 0xFF bytes, false = 0x00 bytes, alternate = 0xAA bytes (as dfilemaker).\n\n\
        SIGINT/SIGTERM stop the run (exit 1); the files finished are recorded in a checkpoint \
        (.DIR.mfu-checkpoint beside DIR, or --checkpoint PATH), and the same command run again \
        (at any rank count) writes into DIR without --force, makes only the files not finished \
        (a file is finished when all its bytes were written and it still is that file) and the \
        links, and leaves the tree an uninterrupted run would have made.\n\n\
        Exit status: 0 tree made, 1 some items could not be made (each on stderr) or a signal \
        (SIGINT/SIGTERM) stopped the run, 2 usage error or DIR not empty (nothing written)."
)]
pub struct FilemakerArgs {
    /// Directory to fill: created if absent (its parent must exist); must be empty unless
    /// --force.
    #[arg(value_name = "DIR")]
    pub dir: OsString,
    /// Seed of every random choice.
    #[arg(short = 'i', long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// What files hold.
    #[arg(short, long, value_enum, default_value_t = Fill::Random)]
    pub fill: Fill,
    /// Levels of items below DIR (1: all directly in DIR); the seed picks one in MIN-MAX.
    #[arg(short, long, value_name = "MIN-MAX", default_value = "5-5", value_parser = count_range)]
    pub depth: RangeInclusive<u64>,
    /// Items in the tree (directories, files, links; DIR not counted); the seed picks one in
    /// MIN-MAX.
    #[arg(short, long, value_name = "MIN-MAX", default_value = "3000-3000", value_parser = count_range)]
    pub nitems: RangeInclusive<u64>,
    /// Bytes per file, each file drawn in MIN-MAX; units allowed (4k, 1.5MB, 2GiB).
    #[arg(short, long, value_name = "MIN-MAX", default_value = "0-2000", value_parser = size_range)]
    pub size: RangeInclusive<u64>,
    /// Percent of items that are regular files.
    #[arg(long, value_name = "PCT", default_value_t = 34, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub files: u8,
    /// Percent of items that are symbolic links (the rest are directories; each level but the
    /// last gets at least one directory).
    #[arg(long, value_name = "PCT", default_value_t = 33, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub links: u8,
    /// Write into DIR even if it is not empty: items of the plan that exist with the planned
    /// type are replaced (a file by a new file, never rewritten in place, so hard links
    /// elsewhere keep their data; links remade; directories reused). An entry of another type
    /// in an item's place (a user's file where a link goes, a symbolic link where a file or
    /// directory goes...) is never replaced nor followed: that item fails, named (exit 1).
    /// Nothing else is touched.
    #[arg(long)]
    pub force: bool,
    /// Where the files made are recorded, so that the same command continues after a stop.
    #[command(flatten)]
    pub checkpoint: crate::cli::args::CheckpointArgs,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `MIN-MAX` (or `N` for `N-N`) of plain counts.
fn count_range(text: &str) -> Result<RangeInclusive<u64>, String> {
    range(text, |t| {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("'{t}' is not a count"))
    })
}

/// `MIN-MAX` (or `N`) of sizes with units.
fn size_range(text: &str) -> Result<RangeInclusive<u64>, String> {
    range(text, parse_size)
}

fn range(
    text: &str,
    parse: impl Fn(&str) -> Result<u64, String>,
) -> Result<RangeInclusive<u64>, String> {
    let (lo, hi) = match text.split_once('-') {
        Some((lo, hi)) => (parse(lo)?, parse(hi)?),
        None => {
            let n = parse(text)?;
            (n, n)
        }
    };
    if lo > hi {
        return Err(format!("'{text}': MIN is above MAX"));
    }
    Ok(lo..=hi)
}

impl FilemakerArgs {
    /// The library's description of the tree these options ask for.
    pub fn spec(&self) -> Spec {
        Spec {
            seed: self.seed,
            fill: self.fill,
            depth: self.depth.clone(),
            nitems: self.nitems.clone(),
            size: self.size.clone(),
            file_percent: self.files,
            link_percent: self.links,
        }
    }
}

/// `mfu-rs filemaker` (dfilemaker).
pub struct Filemaker;

impl CliTool for Filemaker {
    const NAME: &'static str = "filemaker";
    const OLD_NAMES: &'static [&'static str] = &["dfilemaker"];
    const ABOUT: &'static str =
        "Generate a reproducible random tree of files in parallel (dfilemaker)";
    type Args = FilemakerArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &FilemakerArgs) -> &Common {
        &args.common
    }

    fn named_files(args: &FilemakerArgs) -> Vec<(&'static str, &OsStr)> {
        vec![("DIR", args.dir.as_os_str())]
    }

    fn options(args: &FilemakerArgs, _rules: Rules, context: Context) -> Options {
        Options {
            dir: args.dir.as_bytes().to_vec(),
            spec: args.spec(),
            force: args.force,
            checkpoint: args.checkpoint.choice(),
            context,
        }
    }

    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::filemaker::run(comm, options)
    }

    fn render(report: &Report, console: &Console) {
        console.text(&format!(
            "{} {} items in {}: {} directories, {} files, {} links, {} in {:.3} s\n",
            if report.interrupted {
                "Interrupted after making"
            } else {
                "Made"
            },
            report.dirs + report.files + report.links,
            display(&report.dir),
            report.dirs,
            report.files,
            report.links,
            bytes_text(report.bytes),
            report.seconds
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_take_units_and_single_values() {
        assert_eq!(size_range("4k-1.5MB"), Ok(4096..=(3 << 19)));
        assert_eq!(size_range("0-2000"), Ok(0..=2000));
        assert_eq!(count_range("7"), Ok(7..=7));
        assert!(count_range("3-x").is_err());
        assert!(count_range("5-3").is_err());
        assert!(size_range("1q-2").is_err());
    }
}
