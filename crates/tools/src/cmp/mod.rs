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

use crate::engine::compare_expr::{Field, Output, State, States};
use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::copy::Mapping;
use crate::engine::pairing::{bring_home, index_by_rel, pair_states};
use crate::engine::setup::{agree_setup, walk_sources};
use crate::engine::status::Status;
use content::{ReadOptions, Verdict};
use flist::io::Format;
use flist::path::{display, normalize};
use flist::walk::stat_path;
use flist::FileList;
use report::{Side, Tally};
use std::collections::HashSet;
use std::time::Instant;
use steal::{Comm, ReduceOp};

/// Bytes per read call when `bufsize` is not given (dcmp's default).
pub const DEFAULT_BUFSIZE: u64 = 4 << 20;

/// What `cmp` does: compare `src` with `dest`, field by field and byte by byte, and write the
/// entries matching each of `outputs` to its list.
#[derive(Debug, Clone)]
pub struct Options {
    /// The source tree or file.
    pub src: Vec<u8>,
    /// The destination tree or file.
    pub dest: Vec<u8>,
    /// Write the entries matching each expression to its file (`-`: stdout): source
    /// entries, and destination entries of paths only `dest` has.
    pub outputs: Vec<Output>,
    /// Write the `outputs` lists as text (`path|T` lines) instead of cache v4.
    pub text: bool,
    /// With `outputs`, also report the default expressions and the table of fields.
    pub base: bool,
    /// Bytes per read call, for each of the two files (default [`DEFAULT_BUFSIZE`]).
    pub bufsize: Option<u64>,
    /// Bytes per chunk dealt over ranks (default: chosen from the total, 4 MiB to 1 GiB).
    pub chunksize: Option<u64>,
    /// Read with O_DIRECT (where the file system supports it).
    pub direct: bool,
    /// Don't update access times (O_NOATIME where permitted).
    pub open_noatime: bool,
    /// Judge contents by size and modification time only; read no data.
    pub lite: bool,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Compare `src` with `dest`, everything else as on the command line.
    pub fn new(src: impl AsRef<[u8]>, dest: impl AsRef<[u8]>) -> Options {
        Options {
            src: src.as_ref().to_vec(),
            dest: dest.as_ref().to_vec(),
            outputs: Vec::new(),
            text: false,
            base: false,
            bufsize: None,
            chunksize: None,
            direct: false,
            open_noatime: false,
            lite: false,
            context: Context::default(),
        }
    }
}

/// Timings and sizes of a comparison, reported with verbose.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Detail {
    /// Items walked under `src`.
    pub src_items: u64,
    /// Items walked under `dest`.
    pub dest_items: u64,
    /// Seconds the two walks took.
    pub walk_seconds: f64,
    /// Seconds the data comparison took (`None` with `lite`).
    pub compare_seconds: Option<f64>,
    /// The chunk size used, in bytes.
    pub chunk_size: u64,
    /// Bytes per read call.
    pub bufsize: u64,
    /// Ranks that compared.
    pub ranks: usize,
}

/// What a `cmp` found; counts over all ranks, the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The source as compared (absolute), as shown.
    pub src: String,
    /// The destination as compared (absolute), as shown.
    pub dest: String,
    /// Paths compared: pairs plus one-sided paths.
    pub paths: u64,
    /// Paths both sides have.
    pub both: u64,
    /// Paths only the source has.
    pub only_src: u64,
    /// Paths only the destination has.
    pub only_dest: u64,
    /// Paths that differ in a judged field or exist on one side only.
    pub differing: u64,
    /// Items that could not be compared (walk and read errors, a stop; each reported).
    pub not_compared: u64,
    /// `outputs` lists that could not be written (reported).
    pub lists_failed: u64,
    /// Bytes of file data read (both sides).
    pub bytes_read: u64,
    /// Contents were judged by size and modification time (`lite`).
    pub lite: bool,
    /// The default expressions and the table of fields belong in the report (no `outputs`,
    /// or `base`, or verbose).
    pub base: bool,
    /// Whether each `outputs` list was written.
    pub written: Vec<bool>,
    /// A walk was incomplete (errors or a stop): what lies below was not compared.
    pub incomplete: bool,
    /// With verbose: timings and sizes.
    pub detail: Option<Detail>,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// A stop request cut the comparison short.
    pub interrupted: bool,
    /// This process's sample of failure messages.
    pub failures: Vec<String>,
    /// The counts per field and per expression, for the text report.
    #[serde(skip)]
    pub tally: Tally,
    /// The default expressions, then `outputs`, in report order.
    #[serde(skip)]
    pub expressions: Vec<Output>,
}

impl Report {
    /// The number of default expressions at the start of [`Report::expressions`].
    pub fn defaults(&self) -> usize {
        report::DEFAULT_EXPRS.len()
    }
}

impl ToolReport for Report {
    /// Items: the paths compared; bytes: the data read.
    fn summary(&self) -> Summary {
        Summary {
            items: self.paths,
            bytes: self.bytes_read,
            failed: self.not_compared + self.lists_failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(
            self.differing + self.not_compared + self.lists_failed,
            0,
            self.incomplete || self.interrupted,
        )
    }
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

/// The two trees walked and brought to the ranks owning their relative paths.
struct Trees {
    src: FileList,
    dest: FileList,
    map: Mapping,
    dest_map: Mapping,
}

/// Run `cmp` on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let context = &options.context;
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let src = normalize(&options.src, &cwd);
    let dest = normalize(&options.dest, &cwd);
    let checked = [&src, &dest].iter().try_for_each(|p| {
        stat_path(p, false)
            .map(|_| ())
            .map_err(|e| format!("stat {}: {}", display(p), std::io::Error::from(e)))
    });
    agree_setup(comm, checked)?;
    let started = Instant::now();
    let mut report = Report {
        src: display(&src).into_owned(),
        dest: display(&dest).into_owned(),
        lite: options.lite,
        base: options.outputs.is_empty() || options.base || context.verbose,
        ..Report::default()
    };
    let expressions: Vec<Output> = report::default_outputs()
        .into_iter()
        .chain(options.outputs.iter().cloned())
        .collect();
    let exprs: Vec<&Output> = expressions.iter().collect();
    let mut tally = Tally::new(&exprs);

    // Walk both trees; pairs meet on the rank owning their relative path.
    let (trees, mut detail) = walk(comm, context, src, dest, &mut tally, &mut report);
    let (mut pairs, to_read) = pair_up(&trees, options, &mut tally);

    // Compare the data of same-size files.
    let compare_started = Instant::now();
    let bufsize = options.bufsize.unwrap_or(DEFAULT_BUFSIZE).min(1 << 30) as usize;
    let not_compared = if options.lite {
        HashSet::new()
    } else {
        let (not_compared, chunk_size) = compare(
            comm,
            options,
            &trees,
            &mut pairs,
            &to_read,
            &mut tally,
            &mut report,
        );
        detail.compare_seconds = Some(compare_started.elapsed().as_secs_f64());
        detail.chunk_size = chunk_size;
        not_compared
    };
    detail.bufsize = bufsize as u64;
    detail.ranks = comm.size();

    // Count, and write each output's records.
    count_and_write(
        comm,
        options,
        &trees,
        &pairs,
        &not_compared,
        &exprs,
        &mut tally,
        &mut report,
    );
    comm.allreduce(tally.as_mut_slice(), ReduceOp::Sum);
    report.paths = tally.paths();
    report.both = tally.both();
    report.only_src = tally.only_src();
    report.only_dest = tally.only_dest();
    report.differing = tally.differing();
    report.not_compared = tally.failures();
    report.lists_failed = tally.lists_failed();
    report.tally = tally;
    report.expressions = expressions;
    report.detail = context.verbose.then_some(detail);
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = context.failures();
    Ok(report)
}

/// Walk `src` and `dest` and bring every record to the rank owning its relative path. Walk
/// failures are counted in `tally` (what lies below was not compared). Collective.
fn walk(
    comm: &dyn Comm,
    context: &Context,
    src: Vec<u8>,
    dest: Vec<u8>,
    tally: &mut Tally,
    report: &mut Report,
) -> (Trees, Detail) {
    let started = Instant::now();
    let progress = context.progress(comm.rank(), "Walked");
    // Walk failures of this rank (reported by the walk).
    let mut walk_errors = 0;
    let mut walk = |root: &[u8]| {
        let w = walk_sources(comm, context, &[root.to_vec()], false, &progress);
        if !w.complete {
            report.incomplete = true;
        }
        walk_errors += w.errors.len() as u64;
        (w.list, w.total_items)
    };
    let (src_list, src_items) = walk(&src);
    let (dest_list, dest_items) = walk(&dest);
    crate::engine::test_seam::after_listing(comm);
    let detail = Detail {
        src_items,
        dest_items,
        walk_seconds: started.elapsed().as_secs_f64(),
        ..Detail::default()
    };
    tally.fail_items(walk_errors);
    let map = Mapping::new(vec![(src.clone(), dest.clone())]);
    let dest_map = Mapping::new(vec![(dest.clone(), dest)]);
    let trees = Trees {
        src: bring_home(comm, src_list, &map),
        dest: bring_home(comm, dest_list, &dest_map),
        map,
        dest_map,
    };
    (trees, detail)
}

/// Compare the data of the pairs `to_read` over all ranks, in rounds, and mark what differs
/// in `pairs`. Returns the pairs a stop kept from being compared (neither same nor different)
/// and the chunk size used. Collective.
fn compare(
    comm: &dyn Comm,
    options: &Options,
    trees: &Trees,
    pairs: &mut [Pair],
    to_read: &[u32],
    tally: &mut Tally,
    report: &mut Report,
) -> (HashSet<usize>, u64) {
    let context = &options.context;
    let opts = ReadOptions {
        chunk_size: options.chunksize.unwrap_or(0),
        bufsize: options.bufsize.unwrap_or(DEFAULT_BUFSIZE).min(1 << 30) as usize,
        direct: options.direct,
        open_noatime: options.open_noatime,
    };
    let mut not_compared = HashSet::new();
    let progress = context.progress(comm.rank(), "Compared");
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
        let files = trees.src.select(
            round
                .iter()
                .map(|&k| pairs[k as usize].src.expect("read pairs have a source") as usize),
        );
        let got = content::compare_files(comm, context, &files, &trees.map, &opts, &progress);
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
    if c.interrupted && comm.rank() == 0 {
        context.error(format!(
            "interrupted by a signal: {skipped} files were not compared (counted as \
             items that could not be compared, neither same nor different)"
        ));
    }
    report.bytes_read = c.bytes_read;
    report.interrupted = c.interrupted;
    (not_compared, c.chunk_size)
}

/// Count every pair against the fields and expressions, and write each output's matching
/// records to its list (a failed write is reported and counted once, by rank 0).
/// Collective.
#[allow(clippy::too_many_arguments)]
fn count_and_write(
    comm: &dyn Comm,
    options: &Options,
    trees: &Trees,
    pairs: &[Pair],
    not_compared: &HashSet<usize>,
    exprs: &[&Output],
    tally: &mut Tally,
    report: &mut Report,
) {
    let mut matched: Vec<FileList> = options
        .outputs
        .iter()
        .map(|_| trees.src.empty_like())
        .collect();
    for (k, p) in pairs.iter().enumerate() {
        if not_compared.contains(&k) {
            continue;
        }
        let (side, list, i) = match (p.src, p.dest) {
            (Some(i), Some(_)) => (Side::Both, &trees.src, i as usize),
            (Some(i), None) => (Side::OnlySrc, &trees.src, i as usize),
            (None, Some(j)) => (Side::OnlyDest, &trees.dest, j as usize),
            (None, None) => unreachable!("a pair has a side"),
        };
        tally.count(side, &p.states, exprs);
        for (o, out) in options.outputs.iter().zip(matched.iter_mut()) {
            if o.matches(&p.states) {
                out.push_from(list, i);
            }
        }
    }
    let format = if options.text {
        Format::Text
    } else {
        Format::V4
    };
    // A failed write is the same error on every rank: reported and counted once, by rank 0.
    report.written = vec![true; options.outputs.len()];
    for ((o, list), ok) in options
        .outputs
        .iter()
        .zip(&matched)
        .zip(&mut report.written)
    {
        if let Err(e) = flist::io::write(comm, list, &o.file, format) {
            *ok = false;
            if comm.rank() == 0 {
                options.context.error(e);
                tally.fail_list();
            }
        }
    }
}

/// Pair this rank's source and destination records by relative path and compare their fields.
/// Returns the pairs (source paths first, then paths only the destination has) and the
/// indices of the pairs whose data must be read. Contents are judged here by
/// size and mtime with `--lite`.
fn pair_up(trees: &Trees, options: &Options, tally: &mut Tally) -> (Vec<Pair>, Vec<u32>) {
    let Trees {
        src: src_list,
        dest: dest_list,
        map,
        dest_map,
    } = trees;
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
            options.context.error(e);
        }
        if !c.errors.is_empty() {
            tally.fail();
        }
        let mut states = c.states;
        if c.needs_data {
            if options.lite {
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
