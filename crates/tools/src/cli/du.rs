//! `mfu-rs du` on the command line: its options and its text report.

use crate::cli::args::Common;
use crate::cli::console::Console;
use crate::cli::list_args::ListInput;
use crate::cli::tool::CliTool;
use crate::du::{Measure, Options, Owner, PathUsage, Report, Units, Usage};
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use clap::{ArgAction, Args};
use std::ffi::{OsStr, OsString};
use std::fmt::Write;
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

const AFTER_HELP: &str = "\
Counts every entry below the PATHs (walked in parallel; each entry is lstat'ed once and \
counted where it is read, nothing is listed in memory but directories) or every entry of a \
stat list (-i), and prints: the total; usage per user and per group; the directories to \
--depth below each PATH (the PATHs themselves at depth 0), each with its whole subtree; the \
--top largest directories at any depth and the largest files; and the age of the data \
(directories excluded) by modification and by access time, in buckets (< 1 day, < 1 week, \
< 30 days, < 90 days, < 1 year, < 3 years, older) relative to --now. Every table is sorted \
by size, largest first, and is the same at any rank count.\n\n\
Sizes are as `du -s` shows them: allocated space (st_blocks) in 1 KiB blocks, rounded up; \
--apparent-size shows st_size instead, -B/--block-size another unit, -h human-readable \
sizes. An inode with several names (hard links) is counted once, under the name whose bytes \
sort first, in both sizes (as GNU du -s and du -s --apparent-size count it). A list holds no \
allocation: from -i, sizes are apparent sizes, and hard links count once only when the list \
knows inodes (cache v4 lists do not). A lite list (names only) is refused.\n\n\
--svg writes the charts as one SVG picture: usage per user as bars, the two age histograms, \
and the directories right below the PATHs as a treemap (area = size). --html writes a page \
with that picture and every table. Both are written under a temporary name and renamed into \
place. --json prints the report as one JSON object (sizes as bytes and 512-byte blocks).\n\n\
Examples:\n  \
mpirun -np 8 mfu-rs du /lustre/project                 # per user, group, top directories\n  \
mfu-rs du -h --depth 2 --top 20 /scratch/alice\n  \
mfu-rs du --svg usage.svg --html usage.html /data\n  \
mfu-rs walk -o project.mfu /lustre/project && mfu-rs du -i project.mfu --json\n\n\
Exit status: 0 done, 1 some entries could not be read (each on stderr with its path; the \
counts leave them out) or a chart could not be written, 2 usage error.";

/// Options of `mfu-rs du`.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Where the space is: usage per user, group, directory and age, with charts",
    after_help = AFTER_HELP,
    disable_help_flag = true
)]
pub struct DuArgs {
    /// Directories or files to count (directories with everything below them).
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// `-i`: read a stat list instead of walking.
    #[command(flatten)]
    pub input: ListInput,
    /// List the directories down to N levels below each PATH (0: the PATHs only).
    #[arg(
        short = 'd',
        long,
        visible_alias = "max-depth",
        value_name = "N",
        default_value_t = 1
    )]
    pub depth: usize,
    /// How many of the largest directories and files to list.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Measure ages from this time instead of now: seconds since the epoch (`@1700000000`
    /// or `1700000000`), an RFC 3339 time (`2026-12-01T00:00:00Z`), or a local date or date
    /// and time (`2026-12-01`, `2026-12-01T08:30:00`).
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    pub now: Option<i64>,
    /// Print sizes in human-readable form (`4.0K`, `12M`, `1.5G`), as du -h.
    #[arg(short = 'h', long)]
    pub human_readable: bool,
    /// Show and rank by apparent sizes (st_size) rather than allocated space, as du.
    #[arg(long)]
    pub apparent_size: bool,
    /// Show sizes in units of SIZE bytes, rounded up (`1`, `4K`, `1M`, `G`) [default: 1K].
    #[arg(short = 'B', long, value_name = "SIZE", value_parser = block_size)]
    pub block_size: Option<u64>,
    /// As --apparent-size --block-size=1 (du -b).
    #[arg(short = 'b', long = "bytes")]
    pub bytes: bool,
    /// As --block-size=1K.
    #[arg(short = 'k', conflicts_with = "block_size")]
    pub kibibytes: bool,
    /// As --block-size=1M.
    #[arg(short = 'm', conflicts_with_all = ["block_size", "kibibytes"])]
    pub mebibytes: bool,
    /// Write the charts (usage per user, age histograms, treemap of the directories) to
    /// this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<OsString>,
    /// Write a page with the charts and every table to this HTML file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<OsString>,
    /// `--noatime` (the directories walked).
    #[command(flatten)]
    pub noatime: crate::cli::args::NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
    /// Print help (`-h` is --human-readable, as in du).
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
}

/// `-B SIZE`: a size as the other tools read it, or a unit alone (`K`, `M`), as du.
fn block_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = if t.starts_with(|c: char| c.is_ascii_alphabetic()) {
        format!("1{t}")
    } else {
        t.to_string()
    };
    crate::cli::args::size_arg(&t)
}

/// `--now TIME` as seconds since the epoch.
fn parse_now(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let digits = t.strip_prefix('@').unwrap_or(t);
    if let Ok(secs) = digits.parse::<i64>() {
        return Ok(secs);
    }
    if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        return Ok(ts.as_second());
    }
    let local = |dt: jiff::civil::DateTime| {
        jiff::tz::TimeZone::system()
            .to_timestamp(dt)
            .map(|t| t.as_second())
            .map_err(|e| e.to_string())
    };
    if let Ok(dt) = t.parse::<jiff::civil::DateTime>() {
        return local(dt);
    }
    if let Ok(d) = t.parse::<jiff::civil::Date>() {
        return local(d.to_datetime(jiff::civil::Time::midnight()));
    }
    Err(format!(
        "'{text}' is not a time: give seconds since the epoch (@1700000000), an RFC 3339 time \
         (2026-12-01T00:00:00Z) or a date (2026-12-01)"
    ))
}

/// `mfu-rs du`.
pub struct Du;

impl CliTool for Du {
    const NAME: &'static str = "du";
    const OLD_NAMES: &'static [&'static str] = &[];
    const ABOUT: &'static str =
        "Where the space is: usage per user, group, directory and age, with charts";
    type Args = DuArgs;
    type Options = Options;
    type Report = Report;

    fn common(a: &DuArgs) -> &Common {
        &a.common
    }
    fn named_files(a: &DuArgs) -> Vec<(&'static str, &OsStr)> {
        let paths = a.paths.iter().map(|p| ("PATH", p.as_os_str()));
        let input = a.input.named_files();
        let svg = a.svg.iter().map(|f| ("--svg", f.as_os_str()));
        let html = a.html.iter().map(|f| ("--html", f.as_os_str()));
        paths.chain(input).chain(svg).chain(html).collect()
    }
    fn output_files(a: &DuArgs) -> Vec<(&'static str, &[u8])> {
        let svg = a.svg.iter().map(|f| ("--svg", f.as_bytes()));
        let html = a.html.iter().map(|f| ("--html", f.as_bytes()));
        svg.chain(html).collect()
    }
    fn noatime(a: &DuArgs) -> bool {
        a.noatime.noatime
    }
    fn check(a: &DuArgs) -> Result<(), String> {
        let outs = [("--svg", &a.svg), ("--html", &a.html)];
        match outs
            .iter()
            .find(|(_, f)| f.as_deref() == Some(OsStr::new("-")))
        {
            Some((option, _)) => Err(format!("{option} needs a file name, not -")),
            None => Ok(()),
        }
    }
    fn options(a: &DuArgs, _rules: Rules, context: Context) -> Options {
        let block_size = match (a.block_size, a.bytes, a.kibibytes, a.mebibytes) {
            (Some(b), _, _, _) => b,
            (None, _, _, true) => 1 << 20,
            (None, _, true, _) => 1024,
            (None, true, _, _) => 1,
            _ => 1024,
        };
        let measure = if a.apparent_size || a.bytes {
            Measure::Apparent
        } else {
            Measure::Allocated
        };
        Options {
            input: a.input.or_paths(&a.paths),
            depth: a.depth,
            top: a.top,
            now: a.now,
            units: Units {
                block_size,
                human: a.human_readable,
                measure,
            },
            svg: a.svg.as_ref().map(|f| f.as_bytes().to_vec()),
            html: a.html.as_ref().map(|f| f.as_bytes().to_vec()),
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::du::run(comm, options)
    }
    fn render(report: &Report, console: &Console) {
        console.text(&text(report));
    }
}

/// The text report: a line of totals, then one table per view, each sorted by size.
pub fn text(r: &Report) -> String {
    let u = &r.units;
    let heading = u.heading();
    let mut out = String::new();
    let roots: Vec<String> = r
        .roots
        .iter()
        .map(|p| flist::path::display(p).into_owned())
        .collect();
    let unit = if u.human {
        String::new()
    } else {
        format!(" {heading}")
    };
    let _ = writeln!(
        out,
        "Total: {}{unit} in {} entries ({} bytes apparent{}) under {}",
        u.text(&r.total),
        r.total.files,
        r.total.bytes,
        if r.blocks_known {
            format!(", {} bytes allocated", r.total.blocks * 512)
        } else {
            ", allocation not in the list".into()
        },
        roots.join(" ")
    );
    // One table: a title, the size column, the entries column, then the row's name.
    let table = |out: &mut String, title: &str, label: &str, rows: Vec<(&Usage, String)>| {
        let _ = writeln!(out, "\n{title}:\n{heading:>12} {:>12}  {label}", "ENTRIES");
        for (usage, name) in rows {
            let _ = writeln!(out, "{:>12} {:>12}  {name}", u.text(usage), usage.files);
        }
    };
    fn owners(rows: &[Owner]) -> Vec<(&Usage, String)> {
        rows.iter().map(|o| (&o.usage, o.name.clone())).collect()
    }
    fn paths(rows: &[PathUsage]) -> Vec<(&Usage, String)> {
        rows.iter()
            .map(|p| (&p.usage, flist::path::display(&p.path).into_owned()))
            .collect()
    }
    table(&mut out, "By user", "NAME", owners(&r.users));
    table(&mut out, "By group", "NAME", owners(&r.groups));
    let by_dir = format!("By directory (depth {})", r.depth);
    table(&mut out, &by_dir, "PATH", paths(&r.dirs));
    table(
        &mut out,
        "Largest directories",
        "PATH",
        paths(&r.largest_dirs),
    );
    table(&mut out, "Largest files", "PATH", paths(&r.largest_files));
    for (title, ages) in [
        ("Age by modification time (directories excluded)", &r.mtime),
        ("Age by access time (directories excluded)", &r.atime),
    ] {
        let rows = ages
            .iter()
            .map(|a| (&a.usage, a.bucket.to_string()))
            .collect();
        table(&mut out, title, "AGE", rows);
    }
    if !r.written.is_empty() {
        out.push('\n');
    }
    for w in &r.written {
        let _ = writeln!(out, "Wrote {}", flist::path::display(w));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_for_now() {
        assert_eq!(parse_now("@1700000000"), Ok(1_700_000_000));
        assert_eq!(parse_now("1700000000"), Ok(1_700_000_000));
        assert_eq!(parse_now("2023-11-14T22:13:20Z"), Ok(1_700_000_000));
        assert!(parse_now("2026-12-01").is_ok());
        assert!(parse_now("yesterday").is_err());
        assert_eq!(block_size("K"), Ok(1024));
        assert_eq!(block_size("1M"), Ok(1 << 20));
        assert!(block_size("0").is_err());
    }
}
