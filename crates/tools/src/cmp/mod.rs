//! `mfu-rs cmp` (dcmp): compare two trees, field by field and byte by byte, and report what
//! differs.
//!
//! Both trees are walked; each record goes to the rank that owns its path relative to its root
//! ([`crate::engine::pairing`], shared with `sync`), where the pair is compared field by field
//! (existence, type, size, owner, group, times, permissions, ACL). The data of same-size
//! regular files is compared in chunks dealt over all ranks ([`content`]), and each file's
//! verdict comes back to the rank holding its pair. Then every rank counts its pairs against
//! the report's expressions and the `-o` outputs, writes the matching records into the lists,
//! and rank 0 prints the summed report ([`report`]).

pub mod content;
pub mod report;

use crate::cli::args::size_arg;
use crate::cli::{report_error, stdout_bytes, Common};
use crate::engine::compare_expr::{Field, Output, State, States};
use crate::engine::copy::Mapping;
use crate::engine::pairing::{bring_home, index_by_rel, pair_states};
use crate::engine::status::Status;
use clap::Args;
use content::{ReadOptions, Verdict};
use flist::io::Format;
use flist::path::{display, normalize};
use flist::walk::stat_path;
use flist::FileList;
use report::{Side, Tally};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;
use steal::progress::human_bytes;
use steal::{Comm, ReduceOp};

/// Bytes per read call when `--bufsize` is not given (dcmp's default).
const DEFAULT_BUFSIZE: u64 = 4 << 20;

/// Options of `mfu-rs cmp`, named as in dcmp.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Compare two trees (or files): existence, type, size, owner, group, times, permissions, ACL and contents (dcmp)",
    after_help = "Paths are paired by their path relative to SRC and DEST (the roots themselves \
        form a pair). Fields: EXIST TYPE SIZE UID GID ATIME MTIME CTIME PERM ACL CONTENT; states: \
        COMMON DIFFER, and for EXIST also ONLY_SRC ONLY_DEST (EXIST=DIFFER: on one side only). \
        EXPR is FIELD=STATE conditions joined by '@' (AND, binds tighter) and ',' (OR). CONTENT \
        of regular files of equal size is compared byte by byte, in chunks spread over all ranks \
        (--lite: equal when size and mtime are equal, no data read); symbolic links compare \
        their targets, devices their numbers; SIZE is not compared for directories.\n\n\
        Without -o (and with -o when -b or -v is given) rank 0 prints dcmp's default report, the \
        counts of EXIST=COMMON, EXIST=DIFFER, EXIST=COMMON@TYPE=COMMON, \
        EXIST=COMMON@TYPE=DIFFER, EXIST=COMMON@CONTENT=COMMON and EXIST=COMMON@CONTENT=DIFFER \
        as `Number of items that ...: N (Src: S Dest: D)`, then a table of every field (same / \
        different, over the paths both sides have) and a Result line; -v adds timings. Each -o \
        prints its own `Number of items that ...` line. With `-o EXPR:-` the list goes to \
        stdout and the report to stderr.\n\n\
        Examples:\n  \
        mpirun -np 64 mfu-rs cmp /lustre/project /lustre/backup/project\n  \
        mfu-rs cmp -o EXIST=ONLY_SRC:missing.mfu -o CONTENT=DIFFER:changed.mfu src dst\n  \
        mfu-rs cmp -t -o EXIST=COMMON@TYPE=DIFFER,EXIST=ONLY_SRC:fix.txt src dst\n  \
        mfu-rs cmp --lite src dst                  # sizes and mtimes only, reads no data\n\n\
        Exit status: 0 the trees are equal in every judged field (all but ATIME and CTIME, \
        which are reported but never equal after a copy); 1 they differ, or some items could \
        not be compared (each named on stderr); 2 usage error (missing SRC or DEST, bad EXPR)."
)]
pub struct CmpArgs {
    /// The source tree or file.
    #[arg(value_name = "SRC")]
    pub src: OsString,
    /// The destination tree or file to compare with SRC.
    #[arg(value_name = "DEST")]
    pub dest: OsString,
    /// Write the entries matching EXPR to FILE (repeatable; `-` is stdout): source entries,
    /// and destination entries of paths only DEST has. E.g. `EXIST=ONLY_SRC:missing.mfu`,
    /// `EXIST=COMMON@CONTENT=DIFFER:changed.mfu`.
    #[arg(short, long, value_name = "EXPR:FILE", value_parser = Output::value_parser())]
    pub output: Vec<Output>,
    /// Write the -o lists as text (`path|T` lines) instead of the stat list format (v4).
    #[arg(short, long)]
    pub text: bool,
    /// With -o, also print the default report (dcmp's base checks).
    #[arg(short, long)]
    pub base: bool,
    /// Bytes per read call, for each of the two files [default: 4MB].
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub bufsize: Option<u64>,
    /// Bytes per chunk: files are compared in chunks spread over all ranks [default: 4MB,
    /// grown up to 1GB for big data sets so that every thread still gets two chunks].
    #[arg(short = 'k', long, value_name = "SIZE", value_parser = size_arg)]
    pub chunksize: Option<u64>,
    /// Read with O_DIRECT (where the file system supports it).
    #[arg(short = 's', long)]
    pub direct: bool,
    /// Don't update access times (O_NOATIME where permitted).
    #[arg(long = "open-noatime")]
    pub open_noatime: bool,
    /// Judge contents by size and modification time only; read no data.
    #[arg(short, long)]
    pub lite: bool,
    #[command(flatten)]
    pub common: Common,
}

/// Files per rank whose data is compared in one round (see `run`).
const ROUND_FILES: usize = 1 << 16;

/// [`ROUND_FILES`], or the tests' smaller round.
fn round_files() -> usize {
    crate::engine::test_seam::round_files(ROUND_FILES)
}

/// One path of this rank: its records and how the fields compare.
struct Pair {
    src: Option<u32>,
    dest: Option<u32>,
    states: States,
}

/// Run `cmp` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, args: &CmpArgs) -> Status {
    let rank0 = comm.rank() == 0;
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let src = normalize(args.src.as_bytes(), &cwd);
    let dest = normalize(args.dest.as_bytes(), &cwd);
    let checked = [&src, &dest].iter().try_for_each(|p| {
        stat_path(p, false)
            .map(|_| ())
            .map_err(|e| format!("stat {}: {}", display(p), std::io::Error::from(e)))
    });
    if let Err(s) = crate::engine::setup::agree_setup_reported(comm, "cmp", checked) {
        return s;
    }
    steal::signals::install();
    let started = Instant::now();
    let mut status = Status::Ok;

    let walk_progress = args.common.progress(comm.rank(), "Walked");
    // Walk failures of this rank (reported by the walk): what lies below an unreadable
    // directory was not compared.
    let mut walk_errors = 0;
    let mut walk = |root: &[u8]| {
        let w = crate::engine::setup::walk_sources(
            comm,
            &args.common.legacy_context("cmp", false),
            &[root.to_vec()],
            false,
            &walk_progress,
        );
        if !w.complete {
            status = Status::ItemsFailed;
        }
        walk_errors += w.errors.len() as u64;
        (w.list, w.total_items)
    };
    let (src_list, src_items) = walk(&src);
    let (dest_list, dest_items) = walk(&dest);
    crate::engine::test_seam::after_listing(comm);
    let walked = started.elapsed().as_secs_f64();
    let map = Mapping::new(vec![(src.clone(), dest.clone())]);
    let dest_map = Mapping::new(vec![(dest.clone(), dest.clone())]);
    let src_list = bring_home(comm, src_list, &map);
    let dest_list = bring_home(comm, dest_list, &dest_map);

    let defaults = report::default_outputs();
    let exprs: Vec<&Output> = defaults.iter().chain(&args.output).collect();
    let mut tally = Tally::new(&exprs);
    tally.fail_items(walk_errors);
    let (mut pairs, to_read) = pair_up(&src_list, &dest_list, &map, &dest_map, args, &mut tally);

    let compare_started = Instant::now();
    let opts = ReadOptions {
        chunk_size: args.chunksize.unwrap_or(0),
        bufsize: args.bufsize.unwrap_or(DEFAULT_BUFSIZE).min(1 << 30) as usize,
        direct: args.direct,
        open_noatime: args.open_noatime,
    };
    let mut compared = None;
    // Pairs whose data a signal kept from being compared: neither same nor different.
    let mut not_compared = std::collections::HashSet::new();
    if !args.lite {
        let progress = args.common.progress(comm.rank(), "Compared");
        // In rounds of at most ROUND_FILES files per rank (as many rounds on every rank): the
        // chunks of a round, and the copy of its records, are all the comparison holds.
        let round = round_files();
        let mut rounds = [to_read.len().div_ceil(round) as u64];
        comm.allreduce(&mut rounds, ReduceOp::Max);
        let mut c = content::Compared {
            verdicts: Vec::new(),
            chunk_size: 0,
            bytes_read: 0,
            interrupted: false,
        };
        let mut verdicts = Vec::with_capacity(to_read.len());
        for r in 0..rounds[0] as usize {
            let lo = (r * round).min(to_read.len());
            let hi = ((r + 1) * round).min(to_read.len());
            let round = &to_read[lo..hi];
            if c.interrupted {
                // Stopped in an earlier round: these were never compared.
                verdicts.extend(round.iter().map(|_| Verdict::NotCompared));
                continue;
            }
            let files = src_list.select(
                round
                    .iter()
                    .map(|&k| pairs[k as usize].src.expect("read pairs have a source") as usize),
            );
            let got = content::compare_files(comm, &files, &map, &opts, &progress);
            verdicts.extend(got.verdicts);
            c.chunk_size = c.chunk_size.max(got.chunk_size);
            // Counted from the start of the comparison (the progress counters are not reset).
            c.bytes_read = got.bytes_read;
            c.interrupted = got.interrupted;
        }
        for (&k, &verdict) in to_read.iter().zip(&verdicts) {
            let k = k as usize;
            match verdict {
                Verdict::Same => {}
                Verdict::Differ => pairs[k].states.set(Field::Content, State::Differ),
                Verdict::Failed => {
                    pairs[k].states.set(Field::Content, State::Differ);
                    tally.fail();
                }
                Verdict::NotCompared => {
                    not_compared.insert(k);
                    tally.fail();
                }
            }
        }
        let skipped = steal::CommExt::sum(comm, not_compared.len() as u64);
        if c.interrupted && rank0 {
            report_error(
                "cmp",
                format!(
                    "interrupted by a signal: {skipped} files were not compared (counted as \
                     items that could not be compared, neither same nor different)"
                ),
            );
        }
        compared = Some(c);
    }
    let compare_secs = compare_started.elapsed().as_secs_f64();

    // Count, and gather each -o output's records.
    let mut matched: Vec<FileList> = args.output.iter().map(|_| src_list.empty_like()).collect();
    for (k, p) in pairs.iter().enumerate() {
        if not_compared.contains(&k) {
            continue;
        }
        let (side, list, i) = match (p.src, p.dest) {
            (Some(i), Some(_)) => (Side::Both, &src_list, i as usize),
            (Some(i), None) => (Side::OnlySrc, &src_list, i as usize),
            (None, Some(j)) => (Side::OnlyDest, &dest_list, j as usize),
            (None, None) => unreachable!("a pair has a side"),
        };
        tally.count(side, &p.states, &exprs);
        for (o, out) in args.output.iter().zip(matched.iter_mut()) {
            if o.matches(&p.states) {
                out.push_from(list, i);
            }
        }
    }
    let format = if args.text { Format::Text } else { Format::V4 };
    // Whether each -o list was written. A failed write is the same error on every rank:
    // reported and counted once, by rank 0.
    let mut written = vec![true; args.output.len()];
    for ((o, list), ok) in args.output.iter().zip(&matched).zip(&mut written) {
        if let Err(e) = flist::io::write(comm, list, &o.file, format) {
            *ok = false;
            if rank0 {
                report_error("cmp", e);
                tally.fail_list();
            }
        }
    }
    comm.allreduce(tally.as_mut_slice(), ReduceOp::Sum);

    if rank0 && !args.common.quiet {
        let to_stdout = !args.output.iter().any(|o| crate::cli::is_stdout(&o.file));
        let mut text = String::new();
        if args.common.verbose {
            text.push_str(&format!(
                "Walked {src_items} items in {} and {dest_items} in {} in {walked:.3} s\n",
                display(&src),
                display(&dest)
            ));
        }
        let base = args.output.is_empty() || args.base || args.common.verbose;
        for (e, o) in exprs.iter().enumerate() {
            if e < defaults.len() && !base {
                continue;
            }
            text.push_str(&tally.expr_line(e, o));
            let was_written = e.checked_sub(defaults.len()).is_some_and(|k| written[k]);
            if was_written {
                text.push_str(&format!(", dumped to \"{}\"", display(&o.file)));
            }
            text.push('\n');
        }
        if base {
            text.push_str(&tally.table(&display(&src), &display(&dest)));
        }
        if args.lite {
            text.push_str("Contents judged by size and modification time (--lite): no data read\n");
        }
        if let (true, Some(c)) = (args.common.verbose, &compared) {
            let rate = c.bytes_read as f64 / compare_secs.max(1e-9);
            text.push_str(&format!(
                "Compared in {compare_secs:.3} s: read {} ({} bytes, {}/s) in chunks of {} bytes, \
                 buffers of {} bytes, {} ranks\n",
                human_bytes(c.bytes_read),
                c.bytes_read,
                human_bytes(rate as u64),
                c.chunk_size,
                opts.bufsize,
                comm.size()
            ));
        }
        text.push_str(&tally.verdict());
        if args.common.verbose {
            text.push_str(&format!("Total {:.3} s\n", started.elapsed().as_secs_f64()));
        }
        if to_stdout {
            stdout_bytes(text.as_bytes());
        } else {
            eprint!("{text}");
        }
    }
    if tally.differing() > 0
        || tally.failures() > 0
        || tally.lists_failed() > 0
        || compared.is_some_and(|c| c.interrupted)
    {
        status = Status::ItemsFailed;
    }
    status.agree(comm)
}

/// Pair this rank's source and destination records by relative path and compare their fields.
/// Returns the pairs (source paths first, then paths only the destination has) and the
/// indices of the pairs whose data must be read. Contents are judged here by
/// size and mtime with `--lite`.
fn pair_up(
    src_list: &FileList,
    dest_list: &FileList,
    map: &Mapping,
    dest_map: &Mapping,
    args: &CmpArgs,
    tally: &mut Tally,
) -> (Vec<Pair>, Vec<u32>) {
    let by_rel = index_by_rel(dest_list, dest_map);
    let dest_rel = |j: usize| dest_map.rel(dest_list.path(j));
    // Indices fit in 32 bits ([`index_by_rel`] checked the destination's).
    let narrow = |i: usize| u32::try_from(i).expect("more than 2^32 records on one rank");
    let mut seen = vec![false; dest_list.len()];
    let mut pairs = Vec::with_capacity(src_list.len());
    let mut to_read = Vec::new();
    for i in 0..src_list.len() {
        let path = src_list.path(i);
        let Some(j) = by_rel.find(map.rel(path), dest_rel) else {
            pairs.push(Pair {
                src: Some(narrow(i)),
                dest: None,
                states: States::only(State::OnlySrc),
            });
            continue;
        };
        seen[j] = true;
        let (Some(s), Some(d)) = (src_list.meta(i), dest_list.meta(j)) else {
            unreachable!("walks give stat lists")
        };
        let c = pair_states(path, dest_list.path(j), s, d);
        for e in &c.errors {
            report_error("cmp", e);
        }
        if !c.errors.is_empty() {
            tally.fail();
        }
        let mut states = c.states;
        if c.needs_data {
            if args.lite {
                let mtime_differs = (s.mtime, s.mtime_nsec) != (d.mtime, d.mtime_nsec);
                states.differ_if(Field::Content, mtime_differs);
            } else {
                to_read.push(narrow(pairs.len()));
            }
        }
        pairs.push(Pair {
            src: Some(narrow(i)),
            dest: Some(narrow(j)),
            states,
        });
    }
    for (j, _) in seen.iter().enumerate().filter(|(_, s)| !**s) {
        pairs.push(Pair {
            src: None,
            dest: Some(narrow(j)),
            states: States::only(State::OnlyDest),
        });
    }
    (pairs, to_read)
}
