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
    let (mut list, opened) = list(comm, options, opened, &mut report)?;
    report.walk_seconds = started.elapsed().as_secs_f64();
    report.ranks = options.context.verbose.then(|| comm.size());
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
    if let Some(c) = opened.and_then(|o| o.checkpoint) {
        // Kept when the list was not written: a rerun takes the directories read from it.
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
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = options.context.failures();
    Ok(report)
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
fn list(
    comm: &dyn Comm,
    options: &Options,
    opened: Option<checkpoint::Opened>,
    report: &mut Report,
) -> Result<(FileList, Option<checkpoint::Opened>), Error> {
    let context = &options.context;
    let rank0 = comm.rank() == 0;
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
            return Ok((list, opened));
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
    Ok((walked.list, opened))
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
    match io::write(comm, list, out, format) {
        Ok(()) => {
            if context.verbose {
                let shown = flist::path::display(out).into_owned();
                report.written = Some((shown, t.elapsed().as_secs_f64()));
            }
        }
        Err(e) => {
            if rank0 {
                context.error(e);
            }
            report.list_failed = true;
        }
    }
    // The same error on every rank from the collective write; agreed all the same.
    report.list_failed = comm.any(report.list_failed);
}
