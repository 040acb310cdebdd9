//! `mfu-rs walk` (dwalk): walk trees or read a list, then summarise, sort, print and save it.
//!
//! The phases, each collective: check the options; walk the PATHs or read the list; sort it;
//! count it (summary, stripes, size distribution, histogram); send the `print` listing in
//! list order; write the list.

mod bins;
mod listing;
mod resume;

pub use bins::Bin;
pub use listing::format_entry;

use crate::engine::checkpoint::{self, Choice, Inputs, Outcome, Plan};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::input::{Input, Listed};
use crate::engine::lustre::LustreHandle;
use crate::engine::status::Status;
use flist::io::{self, Format};
use flist::sort::{self, Key};
use flist::spill::{
    sort_list_file, MemoryLimit, SortFileOptions, Sorted, SpillDir, SpillReport, WalkRuns,
    WalkSpill,
};
use flist::summary::summarize;
use flist::walk::{walk, walk_resuming, WalkOptions};
use flist::{Detail, FileList};
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::{Comm, CommExt};

/// What `walk` does: walk the paths of `input` (or read its list), then count, sort, print and
/// save the list.
#[derive(Debug, Clone)]
pub struct Options {
    /// Directories or files to walk, or the list to read instead (v3/v4 cache, `path|T` text,
    /// one path per line, NUL-separated; `-`: stdin), or a list in memory.
    pub input: Input,
    /// Write the list to this file (`-`: stdout): cache v4 for stat lists, text for lite ones.
    pub output: Option<Vec<u8>>,
    /// With `output`, write the text format (`path|T` per line) even for a stat list.
    pub text: bool,
    /// Walk names and types only, no stat.
    pub lite: bool,
    /// Sort by these fields: a comma list of name,user,group,uid,gid,atime,mtime,ctime,size,
    /// each optionally with a leading `-` (descending).
    pub sort: Option<String>,
    /// Count by size over bins: `size:SEP,SEP,...` (sizes such as 4k, 1MB); each bin counts
    /// regular files and, as dwalk does, every item (see [`Bin`]).
    pub distribution: Option<String>,
    /// Count by size in power-of-two bins: regular files and every item (see [`Bin`]).
    pub file_histogram: bool,
    /// Send every item as a line (mode, owner, group, size, mtime, path) to the context's
    /// output, in list order.
    pub print: bool,
    /// Follow symbolic links (directory cycles are reported and not followed).
    pub dereference: bool,
    /// The Lustre calls behind the verbose stripe information.
    pub lustre: LustreHandle,
    /// With `output` and PATHs to walk: where the walk records the directories it read
    /// completely, so that a rerun after a stop reads only the others (default: beside the
    /// output, `DIR/.NAME.mfu-checkpoint`).
    pub checkpoint: Choice,
    /// Bytes of records a rank may hold when a list file is sorted into a list file (`-i LIST
    /// -s KEYS -o OUT`, a v3/v4 list, nothing printed or counted by size), or when PATHs are
    /// walked into a v4 list file (`-o OUT`, not `-`, without `-p`, `-d`, `-f`, `-t`, `--lite`,
    /// with no `-s` or `-s name`): beyond it, sorted runs spill to `tmpdir` and are merged. `None`: the default
    /// of [`flist::spill::MemoryLimit::resolve`] (half the node's memory over its ranks).
    pub memory_limit: Option<u64>,
    /// Where spill files go (`None`: `$TMPDIR`, else `/tmp`).
    pub tmpdir: Option<Vec<u8>>,
    /// Events, progress, verbosity, the stop flag, and whether directories are read with
    /// `O_NOATIME` (`--noatime`).
    pub context: Context,
}

impl Options {
    /// Walk `paths`, with everything else as on the command line without options.
    pub fn new<P: AsRef<[u8]>>(paths: impl IntoIterator<Item = P>) -> Options {
        Options {
            input: Input::Paths(paths.into_iter().map(|p| p.as_ref().to_vec()).collect()),
            ..Options::default()
        }
    }
}

impl Default for Options {
    /// Nothing to walk yet (set `input`), no sorting, printing or saving.
    fn default() -> Options {
        Options {
            input: Input::default(),
            output: None,
            text: false,
            lite: false,
            sort: None,
            distribution: None,
            file_histogram: false,
            print: false,
            dereference: false,
            lustre: LustreHandle::default(),
            checkpoint: Choice::default(),
            memory_limit: None,
            tmpdir: None,
            context: Context::default(),
        }
    }
}

/// What a `walk` found; the counts are over all ranks, the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// True when the list was read (a list `input`), false when walked.
    pub read: bool,
    /// Items in the list.
    pub items: u64,
    /// Directories.
    pub dirs: u64,
    /// Regular files.
    pub files: u64,
    /// Symbolic links.
    pub links: u64,
    /// Items of any other type.
    pub others: u64,
    /// Bytes of the regular files (0 for lite lists).
    pub bytes: u64,
    /// The list has metadata (sizes, owners, times): not a lite list.
    pub stat: bool,
    /// Seconds the walk (or read) took.
    pub walk_seconds: f64,
    /// Paths the walk could not read (each reported), and other failures.
    pub walk_errors: u64,
    /// The walk was not complete (failures, cycles or a stop): the tree holds more.
    pub incomplete: bool,
    /// The output list could not be written (reported), or was not because of a stop.
    pub list_failed: bool,
    /// A list file's sort out of core failed or was stopped (reported): no list written, and
    /// the counts are not known (the records were never all read).
    pub sort_failed: bool,
    /// With verbose on Lustre: files and bytes by stripe count, as one line.
    pub stripes: Option<String>,
    /// The `distribution` asked for.
    pub distribution: Option<Vec<Bin>>,
    /// The `file_histogram` asked for (the bins holding any item).
    pub histogram: Option<Vec<Bin>>,
    /// With verbose: the ranks that walked (or read) the list.
    pub ranks: Option<usize>,
    /// With verbose: seconds the sort took.
    pub sort_seconds: Option<f64>,
    /// With verbose: the list written (as shown) and the seconds it took.
    pub written: Option<(String, f64)>,
    /// A list file sorted into a list file: the memory limit per rank, as shown.
    pub memory_limit: Option<String>,
    /// The sort or the walk outgrew the memory limit: what it spilled (the list was written
    /// from the spill files, never held whole).
    pub spilled: Option<SpillReport>,
    /// Where spill files went (with `spilled`).
    pub tmpdir: Option<String>,
    /// The walk could not spill its records (reported: a full TMPDIR): no list written, and
    /// the counts are not known.
    pub spill_failed: bool,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// A stop request cut the walk short.
    pub interrupted: bool,
    /// This process's sample of failure messages.
    pub failures: Vec<String>,
    /// A stop cut the walk short: the directories read (by this run and the earlier ones whose
    /// checkpoint it continued) of those found.
    #[serde(skip)]
    pub stopped: Option<Stopped>,
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.items,
            bytes: self.bytes,
            failed: self.walk_errors + u64::from(self.list_failed),
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(
            self.walk_errors + u64::from(self.list_failed),
            0,
            self.incomplete || self.interrupted,
        )
    }
    fn stopped(&self) -> Option<Stopped> {
        self.stopped
    }
}

/// The options checked before any work.
struct Checked {
    keys: Option<Vec<Key>>,
    bins: Option<Vec<u64>>,
}

/// Run `walk` on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let checked = check(options)?;
    let started = Instant::now();
    let mut report = Report::default();
    let opened = open_checkpoint(comm, options)?;
    report.ranks = options.context.verbose.then(|| comm.size());
    let read = match out_of_core(options, &checked) {
        Some(sort) => sort_file(comm, options, sort, &mut report)?,
        None => None,
    };
    let (mut list, opened, spilled) = match read {
        Some(FileSorted::Done) => {
            report.seconds = started.elapsed().as_secs_f64();
            report.failures = options.context.failures();
            return Ok(report);
        }
        Some(FileSorted::Read(list)) => {
            report.read = true;
            (list, opened, None)
        }
        Some(FileSorted::NotCache) | None => list(comm, options, &checked, opened, &mut report)?,
    };
    report.walk_seconds = started.elapsed().as_secs_f64();
    if let Some(spilled) = spilled {
        write_spilled(comm, options, spilled, &mut report);
        finish(comm, options, opened, &mut report);
        report.seconds = started.elapsed().as_secs_f64();
        report.failures = options.context.failures();
        return Ok(report);
    }
    if let Some(keys) = &checked.keys {
        let t = Instant::now();
        list = sort::sort(comm, list, keys).map_err(Error::new)?;
        if options.context.verbose {
            report.sort_seconds = Some(t.elapsed().as_secs_f64());
        }
    }
    let stripes = count(comm, options, &checked, &list, &mut report);
    if options.print {
        print(comm, options, &list, stripes.as_deref());
    }
    write(comm, options, &list, &mut report);
    finish(comm, options, opened, &mut report);
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = options.context.failures();
    Ok(report)
}

/// Close the checkpoint `opened`: removed when the list was written, kept otherwise (a rerun
/// takes the directories read from it). Collective.
fn finish(
    comm: &dyn Comm,
    options: &Options,
    opened: Option<checkpoint::Opened>,
    report: &mut Report,
) {
    if let Some(c) = opened.and_then(|o| o.checkpoint) {
        let outcome = if report.interrupted {
            Outcome::Stopped
        } else if report.list_failed {
            Outcome::Failed
        } else {
            Outcome::Complete
        };
        if !c.finish_told(comm, &options.context, outcome) {
            report.walk_errors += 1;
        }
    }
}

/// The walk of PATHs whose list may spill: its v4 list written to a file (not `-`), unsorted
/// or sorted by name (`-s name`), with nothing asked of the whole list (print, size tables,
/// text). Anything else holds the list in memory.
fn walk_spills(options: &Options, checked: &Checked) -> bool {
    let to_file = options
        .output
        .as_ref()
        .is_some_and(|o| o.as_slice() != b"-");
    matches!(options.input, Input::Paths(_))
        && to_file
        && checked.keys.as_deref().is_none_or(by_name)
        && !options.lite
        && !options.text
        && !options.print
        && options.distribution.is_none()
        && !options.file_histogram
}

/// The keys are `name` alone, ascending: the order the walk's runs are in.
fn by_name(keys: &[Key]) -> bool {
    matches!(
        keys,
        [Key {
            field: sort::Field::Name,
            descending: false
        }]
    )
}

/// Count and write the records of a walk that spilled (collective): the counts from its runs,
/// the list merged from them into the output (unless the walk was stopped, or could not
/// spill: then no list, and the failure reported).
fn write_spilled(
    comm: &dyn Comm,
    options: &Options,
    spilled: Result<WalkRuns, flist::Error>,
    report: &mut Report,
) {
    let context = &options.context;
    let rank0 = comm.rank() == 0;
    let Some(out) = &options.output else {
        return;
    };
    let dir = SpillDir::new(options.tmpdir.as_deref());
    report.stat = true;
    let runs = match spilled {
        Ok(runs) => runs,
        Err(e) => {
            if rank0 {
                context.error(e);
                context.error(format!(
                    "{}: not written: the walk could not spill its list",
                    flist::path::display(out)
                ));
            }
            report.spill_failed = true;
            report.list_failed = true;
            return;
        }
    };
    let mut counts = runs.counts().to_vec();
    counts.push(runs.records());
    comm.allreduce(&mut counts, steal::ReduceOp::Sum);
    (report.files, report.dirs, report.links, report.others) =
        (counts[0], counts[1], counts[2], counts[3]);
    report.bytes = counts[4];
    report.items = counts[5];
    if report.interrupted {
        if rank0 {
            context.error(format!(
                "{}: not written: the walk was interrupted",
                flist::path::display(out)
            ));
        }
        return;
    }
    let t = Instant::now();
    // `-s name` (the only sort that lets the walk spill): sorted over the ranks.
    let written = if options.sort.is_some() {
        runs.write_sorted_by_name(comm, out, Some(&context.stop))
    } else {
        runs.write_v4(comm, out, Some(&context.stop))
    };
    if let Some(s) = written_to(comm, options, out, t, written, report) {
        report.spilled = Some(s);
        report.tmpdir = Some(flist::path::display(dir.path()).into_owned());
    }
}

/// The outcome of writing the list `out` (collective), begun at `t`: with `-v` its time kept
/// for the report; a failure reported (rank 0) and agreed on as `list_failed`.
fn written_to<T, E: std::fmt::Display>(
    comm: &dyn Comm,
    options: &Options,
    out: &[u8],
    t: Instant,
    result: Result<T, E>,
    report: &mut Report,
) -> Option<T> {
    let context = &options.context;
    let kept = match result {
        Ok(v) => {
            if context.verbose {
                let shown = flist::path::display(out).into_owned();
                report.written = Some((shown, t.elapsed().as_secs_f64()));
            }
            Some(v)
        }
        Err(e) => {
            if comm.rank() == 0 {
                context.error(e);
            }
            None
        }
    };
    // The same error on every rank from the collective write; agreed all the same.
    report.list_failed = comm.any(kept.is_none() || report.list_failed);
    kept
}

/// A list file to sort into a list file: the input, the output and the keys.
struct FileSort<'a> {
    input: &'a [u8],
    output: &'a [u8],
    keys: &'a [Key],
}

/// The sort of a list file into a list file that may go out of core: `-i LIST -s KEYS -o OUT`
/// (files, not `-`) with nothing else asked of the list (no print, size distribution,
/// histogram, text output). Anything else holds the list in memory.
fn out_of_core<'a>(options: &'a Options, checked: &'a Checked) -> Option<FileSort<'a>> {
    let Input::File { path, .. } = &options.input else {
        return None;
    };
    let (Some(keys), Some(output)) = (&checked.keys, &options.output) else {
        return None;
    };
    let plain = !options.print
        && !options.text
        && options.distribution.is_none()
        && !options.file_histogram;
    (plain && path.as_slice() != b"-" && output.as_slice() != b"-").then_some(FileSort {
        input: path,
        output,
        keys,
    })
}

/// What [`sort_file`] did.
// Made once per run and taken apart at once: boxing the list would buy nothing.
#[allow(clippy::large_enum_variant)]
enum FileSorted {
    /// The list was sorted out of core and written, or that failed (reported): the report is
    /// filled.
    Done,
    /// Nothing spilled: this rank's share of the list, read, for the usual path.
    Read(FileList),
    /// A text list, to be read as usual.
    NotCache,
}

/// Sort a list file into a list file within the memory limit (collective). A list that
/// cannot be read is an error (as every `-i`); a failure of the sort itself (a full TMPDIR, the
/// output, a stop) is reported and counted (exit 1), with no list written.
fn sort_file(
    comm: &dyn Comm,
    options: &Options,
    sort: FileSort<'_>,
    report: &mut Report,
) -> Result<Option<FileSorted>, Error> {
    let limit = MemoryLimit::resolve(comm, options.memory_limit);
    report.memory_limit = Some(limit.describe());
    let dir = SpillDir::new(options.tmpdir.as_deref());
    let started = Instant::now();
    let sorted = sort_list_file(
        comm,
        sort.input,
        sort.output,
        &SortFileOptions {
            keys: sort.keys,
            limit: limit.bytes,
            dir: &dir,
            stop: Some(&options.context.stop),
        },
    );
    let sorted = match sorted {
        Ok(Sorted::Spilled(s)) => s,
        Ok(Sorted::InMemory(list)) => return Ok(Some(FileSorted::Read(list))),
        Ok(Sorted::NotCache) => return Ok(Some(FileSorted::NotCache)),
        Err(e) if about_input(&e, sort.input) => return Err(Error::new(e)),
        Err(e) => {
            if comm.rank() == 0 {
                options.context.error(e);
            }
            report.read = true;
            report.list_failed = true;
            report.sort_failed = true;
            return Ok(Some(FileSorted::Done));
        }
    };
    let s = sorted;
    let secs = started.elapsed().as_secs_f64();
    report.read = true;
    report.stat = true;
    report.items = s.records;
    report.dirs = s.dirs;
    report.files = s.files;
    report.links = s.links;
    report.others = s.others;
    report.bytes = s.bytes;
    report.walk_seconds = secs;
    report.spilled = Some(s);
    report.tmpdir = Some(flist::path::display(dir.path()).into_owned());
    if options.context.verbose {
        report.sort_seconds = Some(secs);
        let shown = flist::path::display(sort.output).into_owned();
        report.written = Some((shown, secs));
    }
    Ok(Some(FileSorted::Done))
}

/// The error is the input list's (it cannot be opened or read, or is damaged): a refusal of
/// the `-i` list as every tool's (exit 2), not a failure of the sort.
fn about_input(e: &flist::Error, input: &[u8]) -> bool {
    match e {
        flist::Error::BadList { path, .. } => path == input,
        flist::Error::Item(item) => item.path == input,
        flist::Error::Invalid(_) => false,
    }
}

/// The checkpoint of a walk whose list is written (`-o`); `None` when the list is read, not
/// walked, or not written. Collective.
fn open_checkpoint(
    comm: &dyn Comm,
    options: &Options,
) -> Result<Option<checkpoint::Opened>, Error> {
    let (Some(out), Input::Paths(paths)) = (&options.output, &options.input) else {
        return Ok(None);
    };
    if options.checkpoint == Choice::Off {
        return Ok(None);
    }
    // The records hold absolute paths: relative PATHs count as the directories they name now.
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let roots: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| flist::path::normalize(p, &cwd))
        .collect();
    let inputs = Inputs::new("walk")
        .field("paths", &roots)
        .field("lite", &options.lite)
        .field("dereference", &options.dereference)
        .field("sort", &options.sort)
        .field("text", &options.text);
    // Absolute, so that the checkpoint beside it is named by a path that holds its directory
    // (the core's removal looks for a bare name's parent in `/`).
    let out = if out.as_slice() == b"-" {
        out.clone()
    } else {
        flist::path::normalize(out, &cwd)
    };
    let plan = Plan {
        output: Some(out.as_slice()),
        inputs,
    };
    let opened = checkpoint::open(comm, &options.checkpoint, plan).map_err(Error::new)?;
    opened.tell(comm, &options.context);
    Ok(Some(opened))
}

/// Check the sort keys and the distribution before touching the file system.
fn check(options: &Options) -> Result<Checked, Error> {
    let keys = options
        .sort
        .as_deref()
        .map(sort::parse_keys)
        .transpose()
        .map_err(Error::new)?;
    let bins = options
        .distribution
        .as_deref()
        .map(bins::parse_distribution)
        .transpose()
        .map_err(Error::new)?;
    Ok(Checked { keys, bins })
}

/// Read the input list, or walk the paths (reporting what could not be read), continuing
/// from the checkpoint `opened` when there is one (given back).
/// A walk whose list outgrew the memory limit gives its runs instead of the list (the third
/// part: see [`walk_spills`]).
#[allow(clippy::type_complexity)]
fn list(
    comm: &dyn Comm,
    options: &Options,
    checked: &Checked,
    opened: Option<checkpoint::Opened>,
    report: &mut Report,
) -> Result<
    (
        FileList,
        Option<checkpoint::Opened>,
        Option<Result<WalkRuns, flist::Error>>,
    ),
    Error,
> {
    let context = &options.context;
    let rank0 = comm.rank() == 0;
    // The limit (collective) only where the walk may spill; shown when given.
    let limit =
        walk_spills(options, checked).then(|| MemoryLimit::resolve(comm, options.memory_limit));
    if let (Some(l), Some(_)) = (&limit, options.memory_limit) {
        report.memory_limit = Some(l.describe());
    }
    let dir = SpillDir::new(options.tmpdir.as_deref());
    let walk_paths = |paths: &[Vec<u8>]| {
        let progress = context.progress(comm.rank(), "Walked");
        let opts = WalkOptions {
            detail: if options.lite {
                Detail::Lite
            } else {
                Detail::Stat
            },
            dereference: options.dereference,
            noatime: &context.noatime,
            seed: 0x5eed,
            stop: Some(&context.stop),
            progress: Some(&progress),
            visit: None,
            // Names are printed, sorted by or written to v4 lists; a summary needs none.
            id_tables: options.print || options.output.is_some() || options.sort.is_some(),
            spill: limit.map(|l| WalkSpill {
                limit: l.bytes,
                dir: &dir,
            }),
        };
        let detail = opts.detail;
        match opened
            .as_ref()
            .and_then(|o| o.checkpoint.as_ref().map(|c| (c, &o.prior)))
        {
            Some((c, prior)) => {
                let marks = resume::Marks {
                    prior,
                    checkpoint: Some(c),
                    detail,
                };
                walk_resuming(comm, paths, &opts, &marks)
            }
            None => walk(comm, paths, &opts),
        }
    };
    let walked = match options.input.list(comm, walk_paths)? {
        Listed::Walked(walked) => walked,
        Listed::Read(list) => {
            report.read = true;
            return Ok((list, opened, None));
        }
    };
    for e in &walked.errors {
        context.error(e);
    }
    report.walk_errors = walked.total_errors;
    if !walked.complete {
        report.incomplete = true;
        report.interrupted = walked.interrupted;
        if walked.interrupted {
            report.stopped = Some(Stopped {
                done: walked.dirs_read,
                total: walked.dirs_read + walked.dirs_left,
                what: "directories",
            });
        }
        if rank0 && walked.interrupted {
            context.error("interrupted by a signal: the walk stopped early");
        }
        if rank0 && walked.total_errors > 0 {
            context.error(format!(
                "walk incomplete: {} paths could not be read (listed above)",
                walked.total_errors
            ));
        }
    }
    if walked.spilled.is_some() {
        if let Some(l) = &limit {
            report.memory_limit = Some(l.describe());
        }
    }
    Ok((walked.list, opened, walked.spilled))
}

/// Count the list into the report: types and bytes, stripes (verbose), the distribution and
/// the histogram. Returns this rank's stripes, for the listing.
fn count(
    comm: &dyn Comm,
    options: &Options,
    checked: &Checked,
    list: &FileList,
    report: &mut Report,
) -> Option<Vec<crate::engine::walk_stripes::Striped>> {
    let summary = summarize(comm, list);
    report.items = summary.total;
    report.dirs = summary.dirs;
    report.files = summary.files;
    report.links = summary.links;
    report.others = summary.others;
    report.bytes = summary.bytes;
    report.stat = list.detail() == Detail::Stat;
    // Verbose on Lustre: stripe count and size of each file (with print) and files by count.
    let stripes = (options.context.verbose && report.stat)
        .then(|| crate::engine::walk_stripes::stripes(comm, list, &options.lustre))
        .flatten();
    report.stripes = stripes
        .as_ref()
        .map(|s| crate::engine::walk_stripes::summary(comm, list, s));
    report.distribution = checked
        .bins
        .as_ref()
        .map(|b| bins::distribution(comm, list, b));
    if options.file_histogram {
        report.histogram = Some(bins::histogram(comm, list));
    }
    stripes
}

/// Send every item as a line to the output, in list order over ranks.
fn print(
    comm: &dyn Comm,
    options: &Options,
    list: &FileList,
    stripes: Option<&[crate::engine::walk_stripes::Striped]>,
) {
    let mut text = Vec::new();
    for (i, e) in list.iter().enumerate() {
        format_entry(list, e, &mut text);
        if let Some(s) = stripes.map(|s| s[i].suffix()) {
            if !s.is_empty() {
                // Before the newline: `... /path [4 x 1.000 MiB]`.
                text.pop();
                text.extend_from_slice(s.as_bytes());
                text.push(b'\n');
            }
        }
    }
    in_rank_order(comm, text, |b| options.context.output(b));
}

/// Write the list to `output`, unless the walk was interrupted (a list written then would
/// look complete and drive a later sync, find or rm).
fn write(comm: &dyn Comm, options: &Options, list: &FileList, report: &mut Report) {
    let Some(out) = &options.output else {
        return;
    };
    let context = &options.context;
    let rank0 = comm.rank() == 0;
    if report.interrupted {
        if rank0 {
            context.error(format!(
                "{}: not written: the walk was interrupted",
                flist::path::display(out)
            ));
        }
        return;
    }
    let format = if options.text {
        Format::Text
    } else {
        io::default_format(list)
    };
    let t = Instant::now();
    let written = io::write(comm, list, out, format);
    written_to(comm, options, out, t, written, report);
}
