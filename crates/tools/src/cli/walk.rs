//! `mfu-rs walk` (dwalk) on the command line: its options and the rendering of its report.

use crate::cli::args::{Common, MemoryArgs, NoAtimeArg};
use crate::cli::console::Console;
use crate::cli::list_args::{ListInput, ListLite, ListOutput, Routed};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::lustre::LustreHandle;
use crate::engine::select::Rules;
use crate::walk::{Bin, Options, Report};
use clap::Args;
use flist::units::human_bytes;
use std::ffi::{OsStr, OsString};
use std::sync::Arc;
use steal::Comm;

/// Options of `mfu-rs walk`, named as in dwalk.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Walk trees in parallel (or read a list) and summarise, sort, print or save the list",
    after_help = "Examples:\n  \
        mpirun -np 8 mfu-rs walk -o data.mfu /lustre/project     # save a stat list (mpiFileUtils v4 format)\n  \
        mfu-rs walk -i data.mfu -s -size,name -p | head           # biggest files first\n  \
        mfu-rs walk -l -t -o names.txt /scratch/run               # lite walk, text list (path|T per line)\n  \
        mfu-rs walk -d size:0,4k,1M,1G /data                      # file size distribution"
)]
pub struct WalkArgs {
    /// Directories or files to walk (not with --input).
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// `-i`: read a list instead of walking.
    #[command(flatten)]
    pub input: ListInput,
    /// `-o`, `-t`: write the list.
    #[command(flatten)]
    pub output: ListOutput,
    /// `-l`: walk without stat.
    #[command(flatten)]
    pub lite: ListLite,
    /// Sort by FIELDS, a comma list of name,user,group,uid,gid,atime,mtime,ctime,size; a `-`
    /// before a field sorts it descending (e.g. `-size,name`).
    #[arg(short, long, value_name = "FIELDS", allow_hyphen_values = true)]
    pub sort: Option<String>,
    // The help text shows intervals, not links.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Print the size distribution over bins: `size:SEP,SEP,...` with sizes such as 4k, 1MB
    /// (bins are [0,SEP1], (SEP1,SEP2], ..., (SEPn,inf)). Each bin counts its regular files
    /// and its items: every entry at its own size, directories and links included, as dwalk
    /// counts.
    #[arg(short, long, value_name = "size:SEPS")]
    pub distribution: Option<String>,
    /// Print a size histogram in power-of-two bins, counting regular files and (as dwalk)
    /// every item, directories and links included.
    #[arg(short = 'f', long = "file-histogram", alias = "file_histogram")]
    pub file_histogram: bool,
    /// Print every item (mode, owner, group, size, mtime, path) in list order.
    #[arg(short, long)]
    pub print: bool,
    /// Follow symbolic links (directory cycles are reported and not followed).
    #[arg(short = 'L', long)]
    pub dereference: bool,
    /// `--checkpoint PATH`, `--no-checkpoint`: where a walk with `-o` records the directories
    /// it read, so that a rerun after a stop reads only the others.
    #[command(flatten)]
    pub checkpoint: crate::cli::args::CheckpointArgs,
    /// `--memory-limit`, `--tmpdir`: a list file sorted into a list file (`-i LIST -s KEYS
    /// -o OUT`), and a walk of PATHs into a v4 list file (`-o OUT`, with no `-s` or `-s name`,
    /// without `-p`, `-d`, `-f`, `-t`, `--lite`, which hold the list in memory), hold at most
    /// this much a rank and spill the rest.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs walk`.
pub struct Walk;

impl CliTool for Walk {
    const NAME: &'static str = "walk";
    const OLD_NAMES: &'static [&'static str] = &["dwalk"];
    const ABOUT: &'static str =
        "Walk trees (or read a list) and summarise, sort, print or save the list (dwalk)";
    type Args = WalkArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &WalkArgs) -> &Common {
        &args.common
    }
    fn noatime(args: &WalkArgs) -> bool {
        args.noatime.noatime
    }
    fn named_files(a: &WalkArgs) -> Vec<(&'static str, &OsStr)> {
        let paths = a.paths.iter().map(|p| ("PATH", p.as_os_str()));
        let input = a.input.named_files();
        let output = a.output.output.iter().map(|f| ("-o", f.as_os_str()));
        paths.chain(input).chain(output).collect()
    }
    fn output_files(a: &WalkArgs) -> Vec<(&'static str, &[u8])> {
        a.output.output_files()
    }
    fn options(a: &WalkArgs, _rules: Rules, mut context: Context) -> Options {
        if a.output.to_stdout() {
            // The list owns stdout: the listing goes to stderr with the messages.
            context.events = Arc::new(Routed {
                inner: context.events,
                output_to_stderr: true,
                info_to_stderr: false,
                quiet: a.common.quiet,
            });
        }
        Options {
            input: a.input.or_paths(&a.paths),
            output: a.output.file(),
            text: a.output.text,
            lite: a.lite.lite,
            sort: a.sort.clone(),
            distribution: a.distribution.clone(),
            file_histogram: a.file_histogram,
            print: a.print,
            dereference: a.dereference,
            checkpoint: a.checkpoint.choice(),
            memory_limit: a.memory.memory_limit,
            tmpdir: a.memory.tmpdir(),
            lustre: LustreHandle::default(),
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::walk::run(comm, options)
    }
    fn render(r: &Report, console: &Console) {
        console.text(&summary_text(r));
    }
}

/// The summary of a walk: the sort's time, counts, data, stripes, the distribution and
/// histogram tables, the list written.
pub fn summary_text(r: &Report) -> String {
    let mut t = String::new();
    if let Some(secs) = r.sort_seconds {
        t.push_str(&format!("Sorted in {secs:.3} s\n"));
    }
    if r.sort_failed {
        // The records were not all read: no counts to show, only why nothing was written.
        if let Some(limit) = &r.memory_limit {
            t.push_str(&format!("Memory limit: {limit}\n"));
        }
        t.push_str("Sort failed (named above): no list written\n");
        return t;
    }
    if r.spill_failed {
        // The records that could not spill are gone: no counts, only why nothing was written.
        if let Some(limit) = &r.memory_limit {
            t.push_str(&format!("Memory limit: {limit}\n"));
        }
        t.push_str("Walk could not spill its list (named above): no list written\n");
        return t;
    }
    let by = r.ranks.map_or(String::new(), |n| {
        format!(" by {}", crate::engine::wording::ranks(n))
    });
    t.push_str(&format!(
        "{} {} items{by} in {:.3} s ({:.0} items/s){}\n",
        if r.read { "Read" } else { "Walked" },
        r.items,
        r.walk_seconds,
        r.items as f64 / r.walk_seconds.max(1e-9),
        if r.interrupted {
            ", then interrupted: the tree holds more"
        } else {
            ""
        }
    ));
    t.push_str(&format!("Items: {}\n", r.items));
    t.push_str(&format!("  Directories: {}\n", r.dirs));
    t.push_str(&format!("  Files: {}\n", r.files));
    t.push_str(&format!("  Links: {}\n", r.links));
    if r.others > 0 {
        t.push_str(&format!("  Other: {}\n", r.others));
    }
    if r.stat {
        let per_file = r.bytes.checked_div(r.files).unwrap_or(0);
        t.push_str(&format!(
            "Data: {} ({} per file)\n",
            human_bytes(r.bytes),
            human_bytes(per_file)
        ));
    }
    if let Some(s) = &r.stripes {
        t.push_str(s);
        t.push('\n');
    }
    let tables = [
        ("Size distribution (bytes):", &r.distribution),
        ("Size histogram:", &r.histogram),
    ];
    for (title, bins) in tables {
        let Some(bins) = bins else { continue };
        t.push_str(title);
        t.push('\n');
        for line in histogram_table(bins) {
            t.push_str(&line);
            t.push('\n');
        }
        t.push_str(COUNTS_NOTE);
        t.push('\n');
    }
    if let Some(limit) = &r.memory_limit {
        t.push_str(&format!("Memory limit: {limit}\n"));
    }
    if let (Some(s), Some(dir)) = (&r.spilled, &r.tmpdir) {
        t.push_str(&format!(
            "Spilled: {} in {} sorted runs to {dir} (at most {} on one rank; removed)\n",
            human_bytes(s.spill_bytes),
            s.runs,
            human_bytes(s.spill_bytes_max_rank)
        ));
    }
    if let Some((file, secs)) = &r.written {
        t.push_str(&format!("Wrote {file} in {secs:.3} s\n"));
    }
    t
}

/// Width of the longest bar of a histogram, in characters.
const BAR_WIDTH: u64 = 40;

/// What the two counts of a size table mean, printed under it: the Items column is dwalk's
/// count, so a dwalk user comparing numbers finds them there.
const COUNTS_NOTE: &str = "  (Files: regular files. Items: every entry at its own size, \
    directories and links included, as dwalk counts.)";

/// The bins of a histogram as table lines: the bin, its regular files, their share of all
/// files, its items of any type (dwalk's count) and a bar of `#` as long as the files relative
/// to the largest bin (a bin with any file gets at least one `#`, so small bins stay visible).
fn histogram_table(rows: &[Bin]) -> Vec<String> {
    let total: u64 = rows.iter().map(|r| r.files).sum();
    let max = rows.iter().map(|r| r.files).max().unwrap_or(0);
    let width = rows.iter().map(|r| r.range.len()).max().unwrap_or(0).max(3);
    let mut lines = vec![format!(
        "  {:>width$}  {:>12}  {:>6}  {:>12}",
        "Bin", "Files", "Share", "Items"
    )];
    for Bin {
        range,
        files: n,
        items,
    } in rows
    {
        let bar = match n {
            0 => 0,
            n => ((n * BAR_WIDTH).div_ceil(max)).max(1),
        };
        let share = if total == 0 {
            0.0
        } else {
            100.0 * *n as f64 / total as f64
        };
        lines.push(format!(
            "  {range:>width$}  {n:>12}  {share:>5.1}%  {items:>12}  {}",
            "#".repeat(bar as usize)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_tables_with_a_bar_per_bin() {
        let bin = |range: &str, files, items| Bin {
            range: range.into(),
            files,
            items,
        };
        let rows = [
            bin("[0, 4096]", 30, 45),
            bin("(4096, inf)", 10, 10),
            bin("empty", 0, 3),
        ];
        let t = histogram_table(&rows);
        assert_eq!(t.len(), 4);
        for column in ["Bin", "Files", "Share", "Items"] {
            assert!(t[0].contains(column), "{}", t[0]);
        }
        let ends = |line: &str, end: String| assert!(line.ends_with(&end), "{line}");
        ends(
            &t[1],
            format!("30   75.0%            45  {}", "#".repeat(40)),
        );
        ends(
            &t[2],
            format!("10   25.0%            10  {}", "#".repeat(14)),
        );
        // Only directories or links in a bin: its items are counted, it has no bar.
        ends(&t[3], "0    0.0%             3  ".into());
        // Columns line up.
        assert_eq!(t[1].find("30"), t[2].find("10"));
        assert_eq!(t[1].find("45"), t[0].find("Items").map(|i| i + 3));
    }
}
