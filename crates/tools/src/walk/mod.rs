//! `mfu-rs walk` (dwalk): walk trees or read a list, then summarise, sort, print and save it.

use crate::cli::{message_sink, report_error, Common};
use crate::engine::status::Status;
use clap::Args;
use flist::io::{self, Format};
use flist::record::Entry;
use flist::sort;
use flist::summary::summarize;
use flist::units::parse_size;
use flist::walk::{walk, WalkOptions};
use flist::{Detail, FileList, FileType};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::progress::human_bytes;
use steal::{Comm, ReduceOp};

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
    /// Read this list (v3/v4 cache, `path|T` text, one path per line, or NUL-separated) instead
    /// of walking; `-` reads it from stdin.
    #[arg(short, long, value_name = "FILE")]
    pub input: Option<OsString>,
    /// Write the list to FILE: cache v4 for stat lists, text for lite lists (see --text).
    /// `-` writes it to stdout (the summary then goes to stderr), for `| mfu-rs find -i -`.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<OsString>,
    /// With --output, write the text format (`path|T` per line) even for a stat list.
    #[arg(short, long, requires = "output")]
    pub text: bool,
    /// Lite walk: names and types only, no stat (much faster on Lustre and NFS).
    #[arg(short, long)]
    pub lite: bool,
    /// Sort by FIELDS, a comma list of name,user,group,uid,gid,atime,mtime,ctime,size; a `-`
    /// before a field sorts it descending (e.g. `-size,name`).
    #[arg(short, long, value_name = "FIELDS", allow_hyphen_values = true)]
    pub sort: Option<String>,
    /// Print the size distribution of regular files over bins: `size:SEP,SEP,...` with sizes
    /// such as 4k, 1MB (bins are [0,SEP1], (SEP1,SEP2], ..., (SEPn,inf)).
    #[arg(short, long, value_name = "size:SEPS")]
    pub distribution: Option<String>,
    /// Print a histogram of regular-file sizes in power-of-two bins.
    #[arg(short = 'f', long = "file-histogram", alias = "file_histogram")]
    pub file_histogram: bool,
    /// Print every item (mode, owner, group, size, mtime, path) in list order.
    #[arg(short, long)]
    pub print: bool,
    /// Don't update directories' access times while walking (O_NOATIME where permitted).
    #[arg(long = "no-atime")]
    pub no_atime: bool,
    /// Follow symbolic links (directory cycles are reported and not followed).
    #[arg(short = 'L', long)]
    pub dereference: bool,
    /// The Lustre calls behind `-v`'s stripe information (set by embedding programs and tests).
    #[arg(skip)]
    pub api: crate::engine::lustre::LustreHandle,
    #[command(flatten)]
    pub common: Common,
}

/// Run `walk` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, args: &WalkArgs) -> Status {
    let rank0 = comm.rank() == 0;
    // With `-o -` the list owns stdout: the summary and `-p` go to stderr.
    let out = message_sink(args.output.as_deref());
    let say = |msg: &str| {
        if rank0 && !args.common.quiet {
            out(format!("{msg}\n").as_bytes());
        }
    };
    // Check every argument before touching the file system.
    let keys = match args.sort.as_deref().map(sort::parse_keys).transpose() {
        Ok(k) => k,
        Err(e) => return Status::usage(comm, "walk", e),
    };
    let bins = match args
        .distribution
        .as_deref()
        .map(parse_distribution)
        .transpose()
    {
        Ok(b) => b,
        Err(e) => return Status::usage(comm, "walk", e),
    };
    let started = Instant::now();
    let mut status = Status::Ok;
    let mut interrupted = false;
    let (mut list, what) = match &args.input {
        Some(input) => match io::read(comm, input.as_bytes()) {
            Ok(list) => (list, "Read"),
            Err(e) => {
                if rank0 {
                    report_error("walk", e);
                }
                return Status::Usage.agree(comm);
            }
        },
        None => {
            let roots: Vec<Vec<u8>> = args.paths.iter().map(|p| p.as_bytes().to_vec()).collect();
            let progress = args.common.progress(comm.rank(), "Walked");
            steal::signals::install();
            let opts = WalkOptions {
                detail: if args.lite {
                    Detail::Lite
                } else {
                    Detail::Stat
                },
                dereference: args.dereference,
                no_atime: args.no_atime,
                seed: 0x5eed,
                stop: Some(steal::signals::stop_flag()),
                progress: Some(&progress),
                visit: None,
                // Names are printed, sorted by or written to v4 lists; a summary needs none.
                id_tables: args.print || args.output.is_some() || args.sort.is_some(),
            };
            let walked = walk(comm, &roots, &opts);
            for e in &walked.errors {
                report_error("walk", e);
            }
            if !walked.complete {
                status = Status::ItemsFailed;
                interrupted = walked.interrupted;
                if rank0 && walked.interrupted {
                    report_error("walk", "interrupted by a signal: the walk stopped early");
                }
                if rank0 && walked.total_errors > 0 {
                    report_error(
                        "walk",
                        format!(
                            "walk incomplete: {} paths could not be read (listed above)",
                            walked.total_errors
                        ),
                    );
                }
            }
            (walked.list, "Walked")
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    if let Some(keys) = &keys {
        let t = Instant::now();
        list = match sort::sort(comm, list, keys) {
            Ok(l) => l,
            Err(e) => return Status::usage(comm, "walk", e),
        };
        if args.common.verbose {
            say(&format!("Sorted in {:.3} s", t.elapsed().as_secs_f64()));
        }
    }
    let summary = summarize(comm, &list);
    say(&format!(
        "{what} {} items in {:.3} s ({:.0} items/s){}",
        summary.total,
        elapsed,
        summary.total as f64 / elapsed.max(1e-9),
        if interrupted {
            ", then interrupted: the tree holds more"
        } else {
            ""
        }
    ));
    say(&format!("Items: {}", summary.total));
    say(&format!("  Directories: {}", summary.dirs));
    say(&format!("  Files: {}", summary.files));
    say(&format!("  Links: {}", summary.links));
    if summary.others > 0 {
        say(&format!("  Other: {}", summary.others));
    }
    if list.detail() == Detail::Stat {
        let per_file = summary.bytes.checked_div(summary.files).unwrap_or(0);
        say(&format!(
            "Data: {} ({} per file)",
            human_bytes(summary.bytes),
            human_bytes(per_file)
        ));
    }
    // -v on Lustre: stripe count and size of each file (with -p) and files by stripe count.
    let stripes = (args.common.verbose && list.detail() == Detail::Stat)
        .then(|| crate::engine::walk_stripes::stripes(comm, &list, &args.api))
        .flatten();
    if let Some(s) = &stripes {
        say(&crate::engine::walk_stripes::summary(comm, &list, s));
    }
    if let Some(bins) = &bins {
        print_distribution(comm, &list, bins, &say);
    }
    if args.file_histogram {
        print_histogram(comm, &list, &say);
    }
    if args.print {
        let mut text = Vec::new();
        for (i, e) in list.iter().enumerate() {
            format_entry(&list, e, &mut text);
            if let Some(s) = stripes.as_ref().map(|s| s[i].suffix()) {
                if !s.is_empty() {
                    // Before the newline: `... /path [4 x 1.000 MiB]`.
                    text.pop();
                    text.extend_from_slice(s.as_bytes());
                    text.push(b'\n');
                }
            }
        }
        in_rank_order(comm, text, out);
    }
    if let (Some(out), true) = (&args.output, interrupted) {
        // A list written now would look complete and drive a later sync, find or rm.
        if rank0 {
            report_error(
                "walk",
                format!(
                    "{}: not written: the walk was interrupted",
                    flist::path::display(out.as_bytes())
                ),
            );
        }
    } else if let Some(out) = &args.output {
        let format = if args.text {
            Format::Text
        } else {
            io::default_format(&list)
        };
        let t = Instant::now();
        match io::write(comm, &list, out.as_bytes(), format) {
            Ok(()) => {
                if args.common.verbose {
                    say(&format!(
                        "Wrote {} in {:.3} s",
                        flist::path::display(out.as_bytes()),
                        t.elapsed().as_secs_f64()
                    ));
                }
            }
            Err(e) => {
                if rank0 {
                    report_error("walk", e);
                }
                status = status.worst(Status::ItemsFailed);
            }
        }
    }
    status.agree(comm)
}

/// `size:0,4k,1M` → `[0, 4096, 1048576]` (ascending, deduplicated).
fn parse_distribution(spec: &str) -> Result<Vec<u64>, String> {
    let seps = spec.strip_prefix("size:").ok_or_else(|| {
        format!("invalid --distribution '{spec}': expected size:SEP,SEP,... (e.g. size:0,4k,1M)")
    })?;
    let mut v = seps
        .split(',')
        .map(parse_size)
        .collect::<Result<Vec<u64>, String>>()?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

fn file_sizes<'a>(list: &'a FileList) -> impl Iterator<Item = u64> + 'a {
    list.iter()
        .filter(|e| e.kind == FileType::File)
        .filter_map(|e| e.meta.map(|m| m.size))
}

fn print_distribution(comm: &dyn Comm, list: &FileList, seps: &[u64], say: &dyn Fn(&str)) {
    let mut counts = vec![0u64; seps.len() + 1];
    for size in file_sizes(list) {
        // Bin i holds (seps[i-1], seps[i]]; bin 0 holds [0, seps[0]].
        counts[seps.partition_point(|&s| s < size)] += 1;
    }
    comm.allreduce(&mut counts, ReduceOp::Sum);
    let rows: Vec<(String, u64)> = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let range = match i {
                0 => format!("[0, {}]", seps[0]),
                i if i == seps.len() => format!("({}, inf)", seps[i - 1]),
                i => format!("({}, {}]", seps[i - 1], seps[i]),
            };
            (range, n)
        })
        .collect();
    say("Size distribution of regular files (bytes):");
    for line in histogram_table(&rows) {
        say(&line);
    }
}

fn print_histogram(comm: &dyn Comm, list: &FileList, say: &dyn Fn(&str)) {
    // Bin b holds sizes in [2^(b-1), 2^b); bin 0 holds empty files.
    let mut counts = vec![0u64; 65];
    for size in file_sizes(list) {
        counts[(64 - size.leading_zeros()) as usize] += 1;
    }
    comm.allreduce(&mut counts, ReduceOp::Sum);
    let rows: Vec<(String, u64)> = counts
        .iter()
        .enumerate()
        .filter(|&(_, &n)| n > 0)
        .map(|(b, &n)| {
            let range = if b == 0 {
                "0 B".to_string()
            } else {
                let hi = if b == 64 {
                    "16.000 EiB".to_string()
                } else {
                    human_bytes(1u64 << b)
                };
                format!("[{}, {})", human_bytes(1u64 << (b - 1)), hi)
            };
            (range, n)
        })
        .collect();
    say("File size histogram:");
    for line in histogram_table(&rows) {
        say(&line);
    }
}

/// Width of the longest bar of a histogram, in characters.
const BAR_WIDTH: u64 = 40;

/// The rows of a histogram as table lines: the bin, its count, its share of all counts and a
/// bar of `#` as long as the count relative to the largest bin (a bin with any count gets at
/// least one `#`, so small bins stay visible).
fn histogram_table(rows: &[(String, u64)]) -> Vec<String> {
    let total: u64 = rows.iter().map(|r| r.1).sum();
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0);
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(3);
    let mut lines = vec![format!(
        "  {:>width$}  {:>12}  {:>6}",
        "Bin", "Files", "Share"
    )];
    for (range, n) in rows {
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
            "  {range:>width$}  {n:>12}  {share:>5.1}%  {}",
            "#".repeat(bar as usize)
        ));
    }
    lines
}

/// One `-p` line: `drwxr-xr-x root root 4.000 KiB 2020-09-13 12:26:40 /path` for stat lists,
/// `D /path` for lite lists.
fn format_entry(list: &FileList, e: Entry<'_>, out: &mut Vec<u8>) {
    match e.meta {
        Some(m) => {
            let user = list
                .users
                .name_of(m.uid as u64)
                .map_or(m.uid.to_string(), |n| String::from_utf8_lossy(n).into());
            let group = list
                .groups
                .name_of(m.gid as u64)
                .map_or(m.gid.to_string(), |n| String::from_utf8_lossy(n).into());
            out.extend_from_slice(
                format!(
                    "{} {user:<8} {group:<8} {:>12} {} ",
                    mode_string(m.mode),
                    human_bytes(m.size),
                    utc_time(m.mtime)
                )
                .as_bytes(),
            );
        }
        None => {
            out.push(e.kind.text_letter());
            out.push(b' ');
        }
    }
    out.extend_from_slice(e.path);
    out.push(b'\n');
}

/// `ls -l` style mode: `-rw-r--r--`, with s/t bits.
pub fn mode_string(mode: u32) -> String {
    let kind = match FileType::from_mode(mode) {
        FileType::Dir => 'd',
        FileType::Symlink => 'l',
        FileType::Fifo => 'p',
        FileType::Socket => 's',
        FileType::BlockDev => 'b',
        FileType::CharDev => 'c',
        _ => '-',
    };
    let bit = |m: u32, c: char| if mode & m != 0 { c } else { '-' };
    let special = |x: u32, s: u32, set: char, unset_exec: char| match (mode & x != 0, mode & s != 0)
    {
        (true, true) => set,
        (false, true) => unset_exec,
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        kind,
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(0o100, 0o4000, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(0o010, 0o2000, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(0o001, 0o1000, 't', 'T'),
    ]
    .iter()
    .collect()
}

/// `YYYY-MM-DD HH:MM:SS` in UTC (days-from-civil, no time-zone database needed).
pub fn utc_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_times_print_like_ls() {
        assert_eq!(mode_string(0o100644), "-rw-r--r--");
        assert_eq!(mode_string(0o040755), "drwxr-xr-x");
        assert_eq!(mode_string(0o104755), "-rwsr-xr-x");
        assert_eq!(mode_string(0o041777), "drwxrwxrwt");
        assert_eq!(mode_string(0o120777), "lrwxrwxrwx");
        assert_eq!(utc_time(0), "1970-01-01 00:00:00");
        assert_eq!(utc_time(1_600_001_000), "2020-09-13 12:43:20");
        assert_eq!(utc_time(-1), "1969-12-31 23:59:59");
    }

    #[test]
    fn histograms_are_tables_with_a_bar_per_bin() {
        let rows = [
            ("[0, 4096]".to_string(), 30),
            ("(4096, inf)".to_string(), 10),
            ("empty".to_string(), 0),
        ];
        let t = histogram_table(&rows);
        assert_eq!(t.len(), 4);
        assert!(t[0].contains("Bin") && t[0].contains("Files") && t[0].contains("Share"));
        assert!(
            t[1].ends_with(&format!("30   75.0%  {}", "#".repeat(40))),
            "{}",
            t[1]
        );
        assert!(
            t[2].ends_with(&format!("10   25.0%  {}", "#".repeat(14))),
            "{}",
            t[2]
        );
        assert!(t[3].ends_with("0    0.0%  "), "{}", t[3]);
        // Columns line up.
        assert_eq!(t[1].find("30"), t[2].find("10"));
    }

    #[test]
    fn distribution_specs() {
        assert_eq!(
            parse_distribution("size:1M,0,4k"),
            Ok(vec![0, 4096, 1 << 20])
        );
        assert!(parse_distribution("mtime:0").is_err());
        assert!(parse_distribution("size:4q").is_err());
    }
}
