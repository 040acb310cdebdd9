//! `mfu-rs dup` (ddup): find files with identical contents.
//!
//! The phases, each collective:
//! 1. list: walk the PATHs with stat, or read `--input` and stat what it names;
//! 2. size: keep non-empty regular files; bring every size to one rank (by a hash of the size)
//!    and join hard links into one inode; sizes held by one inode drop out;
//! 3. prefix: blake3 of the first 64 KiB of every candidate, hashed over all ranks with work
//!    stealing; candidates meet again on the rank that owns their hash range and are grouped by
//!    (size, prefix hash). A file of at most 64 KiB was read whole: its group is final;
//! 4. full: blake3 of all bytes of the files still paired, with work stealing (one file per
//!    item), grouped again by (size, hash);
//! 5. check: every member of every group is `lstat`ed again and compared with its listing
//!    (each hash pass also compares `fstat` before and after reading); a file that changed is
//!    left out and named, exit 1;
//! 6. output: every rank owns one range of hashes, so printing rank by rank, each rank's groups
//!    sorted, gives the same output at any rank count. With `--verify`, the redundant-copy list
//!    keeps only the names an earlier list (reviewed by the user) holds.
//!
//! When the list and the grouping tables outgrow `--memory-limit` on some rank, phases 2-4 run out
//! of core instead (the `spilled` module): sorted runs in spill files in place of tables, merged so
//! that each size, then each (hash, size), comes out whole and in order; the groups, counts and
//! output are the same. A v3/v4 list (`-i`) that outgrows half the limit is read a piece at a time
//! straight into those runs (phase 1 included); a walk is still held whole. Below the limit nothing
//! spills.
//!
//! A stopped run continues: each hash (prefix or whole file) is marked in a checkpoint whose
//! inputs are the paths and the digest of the list (so a file changed since, in size, times or
//! inode, means starting over); a rerun hashes only the files not marked, and its groups,
//! counts and output are those of an uninterrupted run.

mod hash;
mod inode;
mod spilled;
mod unchanged;

use crate::engine::checkpoint::{self, Checkpoint, Choice, Inputs, Outcome, Plan, Prior};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::input::{Input, Listed};
use crate::engine::locks::lock;
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use flist::distribute::{hash_path, remap};
use flist::io::{self, Format};
use flist::path::{display, normalize};
use flist::restat::{restat, Which};
use flist::spill::keyed::KeyedSorted;
use flist::spill::{MemoryLimit, SpillDir};
use flist::walk::{walk, WalkOptions};
use flist::FileList;
use flist::FileType;
use hash::{hash_file, hex, PREFIX_BYTES};
use inode::{exchange, hash_groups, hash_owner, inodes_of, same_size, size_owner, Hash, Inode};
pub use spilled::DupSpill;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::progress::Progress;
use steal::{queue, Comm, CommExt, ReduceOp};

/// What `dup` does: find the groups of identical files among the paths of `input` (or the
/// files its list names), send them to the context's output, and optionally list the
/// redundant copies.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Files and directories to search (directories with everything below them), or the list
    /// of files to search instead (v3/v4 cache, `path|T` text, one path per line,
    /// NUL-separated; `-`: stdin; or in memory): each listed file is stat'ed again.
    pub input: Input,
    /// Write the redundant copies (every name of every inode of a group but the first) to
    /// this list, cache v4 (`-`: stdout, and the groups are then not sent to the output).
    pub output: Option<Vec<u8>>,
    /// With `output`: write to it only the names this earlier `output` list holds that are
    /// still redundant copies now; the others are reported (and make the status 1).
    pub verify: Option<Vec<u8>>,
    /// With `output`, write the text format (`path|T` per line).
    pub text: bool,
    /// Where the hashes of files done are recorded, so that a stopped run continues
    /// (`--checkpoint PATH`, `--no-checkpoint`).
    pub checkpoint: Choice,
    /// Bytes of memory per rank for the list and the grouping tables (`--memory-limit`);
    /// beyond it the grouping runs out of core, through sorted runs in `tmpdir`. `None`: the
    /// default of [`MemoryLimit::resolve`] (half the node's memory over its ranks).
    pub memory_limit: Option<u64>,
    /// Where spill files go (`--tmpdir`; `None`: `$TMPDIR`, else `/tmp`).
    pub tmpdir: Option<Vec<u8>>,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Search `paths`, everything else as on the command line.
    pub fn new<P: AsRef<[u8]>>(paths: impl IntoIterator<Item = P>) -> Options {
        Options {
            input: Input::Paths(paths.into_iter().map(|p| p.as_ref().to_vec()).collect()),
            ..Options::default()
        }
    }
}

/// What a `dup` found; counts over all ranks, the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Non-empty regular files (inodes: hard links counted once).
    pub files: u64,
    /// Empty regular files, ignored.
    pub empty: u64,
    /// Inodes that share their size with another.
    pub same_size: u64,
    /// Inodes above the prefix length that share size and prefix with another.
    pub same_prefix: u64,
    /// Groups of identical files.
    pub groups: u64,
    /// Inodes in groups beyond the first of each (the redundant copies).
    pub redundant: u64,
    /// Bytes those redundant copies hold.
    pub reclaimable: u64,
    /// Files that could not be listed or read, or changed while dup ran (reported, left out).
    pub unreadable: u64,
    /// With `verify`: names of the earlier list that are no longer redundant copies
    /// (reported, not written).
    pub no_longer_redundant: u64,
    /// The output list could not be written, or was not because of a stop (reported).
    pub list_failed: bool,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// A stop request cut the run short: the groups are incomplete.
    pub interrupted: bool,
    /// With `interrupted`: the files hashed (prefix and whole-file passes, this run and the
    /// earlier ones it continues) of those known to need it.
    #[serde(skip)]
    pub stopped: Option<Stopped>,
    /// The checkpoint could not be kept (stopped) or removed (complete) (reported).
    pub checkpoint_failed: bool,
    /// The memory limit per rank, described (`--memory-limit`, or the default).
    pub memory_limit: Option<String>,
    /// The grouping outgrew the memory limit: what it spilled.
    pub spilled: Option<DupSpill>,
    /// Where spill files went (with `spilled`).
    pub tmpdir: Option<String>,
    /// The `-i` list outgrew the limit and was read a piece at a time, never whole.
    pub list_in_pieces: bool,
    /// The out-of-core grouping failed (a full TMPDIR; reported): nothing was printed or
    /// written.
    pub spill_failed: bool,
    /// This process's sample of failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    /// Items: the files compared; bytes: what the redundant copies hold.
    fn summary(&self) -> Summary {
        Summary {
            items: self.files,
            bytes: self.reclaimable,
            failed: self.failed(),
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(self.failed(), 0, self.interrupted)
    }
    fn stopped(&self) -> Option<Stopped> {
        self.stopped
    }
}

impl Report {
    /// Files, lists and the checkpoint that failed.
    fn failed(&self) -> u64 {
        self.unreadable
            + self.no_longer_redundant
            + u64::from(self.list_failed)
            + u64::from(self.checkpoint_failed)
            + u64::from(self.spill_failed)
    }
}

/// Run `dup` on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let context = &options.context;
    let started = Instant::now();
    let cwd =
        flist::path::current_dir().map_err(|e| Error::new(format!("current directory: {e}")))?;
    if options.input.walk_paths().iter().any(|p| p.is_empty()) {
        return Err(Error::new("an empty PATH names no file"));
    }
    let to_stdout = options.output.as_deref() == Some(b"-");
    let reviewed = match &options.verify {
        Some(list) => Some(
            agree_setup(comm, io::read(comm, list).map_err(|e| e.to_string()))?.normalized(&cwd),
        ),
        None => None,
    };
    let mut report = Report::default();
    let limit = MemoryLimit::resolve(comm, options.memory_limit);
    report.memory_limit = Some(limit.describe());

    // 1. The list, with fresh metadata; its regular files (directories do not matter, and
    // change as a checkpoint is made in them).
    let ours = comm.bcast_with(0, || {
        crate::engine::checkpoint::checkpoints_dir(&options.checkpoint, &cwd)
    });
    let dir = SpillDir::new(options.tmpdir.as_deref());
    let (mut list, mut failed, streamed) = listing(
        comm,
        options,
        (&cwd, ours.as_deref()),
        (limit.bytes, &dir),
        &mut report,
    )?;
    crate::engine::checkpoint::without_checkpoints(&mut list, ours.as_deref());
    let held = list.heap_bytes() as u64;
    let (list, mut empty) = regular_files(list);
    empty += streamed.as_ref().map_or(0, |s| s.empty);
    // The checkpoint, once the files (an input) are known.
    let opened = if report.spill_failed {
        None
    } else {
        match &streamed {
            Some(s) => open_checkpoint(comm, options, &cwd, || {
                checkpoint::digest_of_sums(comm, s.sums, s.records)
            })?,
            None => open_checkpoint(comm, options, &cwd, || checkpoint::list_digest(comm, &list))?,
        }
    };
    let resume = opened.as_ref().map(|(c, prior)| Resume {
        checkpoint: c.as_ref(),
        prior,
    });
    // Same id tables as the list, so that -o can write v4.
    let mut redundant = list.empty_like();

    let files = match streamed {
        Some(s) => Files::BySize(s.by_size),
        None if report.spill_failed => Files::None,
        None => {
            let over = held + grouping_bytes(&list) >= limit.bytes;
            Files::List(list, over)
        }
    };
    let (mut done, files, same_size_n, same_prefix_n, interrupted, stopped) = group(
        comm,
        options,
        files,
        (limit.bytes, &dir),
        (&mut failed, resume),
        &mut report,
    );

    // 5. The groups are known; a race test changes files here. Every member is checked
    // against its listing once more, as late as possible before the output.
    crate::engine::test_seam::after_listing(comm);
    for msg in unchanged::drop_changed(&mut done) {
        context.error(msg);
        failed += 1;
    }

    // 6. Output, in hash order over ranks.
    let mut counts = [files, empty, same_size_n, same_prefix_n, 0, 0, 0];
    let mut lines = Vec::new();
    for group in &done {
        counts[4] += 1;
        counts[5] += group.len() as u64 - 1;
        counts[6] += (group.len() as u64 - 1) * group[0].size;
        let h = hex(&group[0].hash);
        let mut names: Vec<&[u8]> = group
            .iter()
            .flat_map(|i| i.names.iter().map(|n| n.0.as_slice()))
            .collect();
        names.sort();
        for n in names {
            lines.extend_from_slice(n);
            lines.push(b' ');
            lines.extend_from_slice(h.as_bytes());
            lines.push(b'\n');
        }
        for i in &group[1..] {
            for (path, meta) in &i.names {
                redundant.push(path, FileType::File, Some(*meta));
            }
        }
    }
    if !to_stdout {
        in_rank_order(comm, lines, |b| context.output(b));
    }
    if let Some(reviewed) = reviewed {
        let (still, gone) = still_redundant(
            comm,
            context,
            redundant,
            reviewed,
            options.output.as_deref(),
        );
        redundant = still;
        report.no_longer_redundant = comm.sum(gone);
    }
    report.interrupted = comm.any(interrupted);
    report.stopped = stopped.filter(|_| report.interrupted);
    write(comm, options, &redundant, &mut report);
    if let Some((Some(c), _)) = opened {
        // After a failed spill the hashes done are kept: a rerun with room continues.
        let outcome = if report.spill_failed {
            Outcome::Failed
        } else {
            Outcome::of_stop(report.interrupted)
        };
        report.checkpoint_failed = !c.finish_told(comm, context, outcome);
    }

    comm.allreduce(&mut counts, ReduceOp::Sum);
    let [files, empty, same_size, same_prefix, groups, redundant, reclaimable] = counts;
    report = Report {
        files,
        empty,
        same_size,
        same_prefix,
        groups,
        redundant,
        reclaimable,
        unreadable: comm.sum(failed),
        seconds: started.elapsed().as_secs_f64(),
        ..report
    };
    if comm.rank() == 0 {
        tell(context, &report);
    }
    report.failures = context.failures();
    Ok(report)
}

/// What phases 2-4 give: this rank's groups in (hash, size) order, its counts of files, of
/// inodes sharing a size and of those sharing a prefix too, whether a stop cut the hashing
/// short, and how far it got.
type Grouping = (Vec<Vec<Inode>>, u64, u64, u64, bool, Option<Stopped>);

/// Phase 1: the list, with fresh metadata, and this rank's count of names that could not be
/// listed (reported). A cache list (`-i`) that outgrows half the `limit` on some rank is read
/// a piece at a time straight into runs by size in `dir` ([`spilled::read_list`]): then the
/// list returned is empty (with the id tables) and the runs come apart. A failure of that
/// spill is reported into `report`. Collective.
fn listing(
    comm: &dyn Comm,
    options: &Options,
    (cwd, ours): (&[u8], Option<&[u8]>),
    (limit, dir): (u64, &SpillDir),
    report: &mut Report,
) -> Result<(FileList, u64, Option<spilled::Streamed>), Error> {
    let context = &options.context;
    let read = match &options.input {
        Input::File { path, .. } => {
            match spilled::read_list(comm, options, path, cwd, ours, limit, dir) {
                Ok(r) => Some(r),
                Err(spilled::ReadFailed::List(e)) => return Err(Error::new(list_error(path, &e))),
                Err(spilled::ReadFailed::Spill(e)) => {
                    spill_failed(comm, context, &e, report);
                    None
                }
            }
        }
        _ => Some(spilled::Read::NotCache),
    };
    let mut streamed = None;
    let (list, failed) = match read {
        Some(spilled::Read::NotCache) => list(comm, options, cwd)?,
        Some(spilled::Read::Whole(l)) => restated(context, l, cwd),
        Some(spilled::Read::Streamed(mut s)) => {
            // The names went to phase 2: what is left is the list's id tables.
            let ids = std::mem::replace(&mut s.ids, FileList::new(flist::Detail::Stat));
            let failed = s.failed;
            streamed = Some(s);
            report.list_in_pieces = true;
            (ids, failed)
        }
        None => (FileList::new(flist::Detail::Stat), 0),
    };
    Ok((list, failed, streamed))
}

/// Rank 0's messages at the end of a run: the summary (with -v), the failures, a stop.
fn tell(context: &Context, report: &Report) {
    if context.verbose {
        context.info(format!(
            "{} files ({} empty ignored, hard links counted once); {} of the same size as \
             another; {} above {} KiB also with the same first {} KiB; {} groups of duplicates, \
             {} redundant copies, {} reclaimable; {:.3} s\n",
            report.files,
            report.empty,
            report.same_size,
            report.same_prefix,
            PREFIX_BYTES >> 10,
            PREFIX_BYTES >> 10,
            report.groups,
            report.redundant,
            bytes_text(report.reclaimable),
            report.seconds
        ));
        if let Some(limit) = &report.memory_limit {
            context.info(format!("Memory limit: {limit}\n"));
        }
        if let (Some(s), Some(dir)) = (&report.spilled, &report.tmpdir) {
            context.info(format!(
                "Spilled: {} in {} sorted runs to {dir} (at most {} on one rank; removed){}\n",
                flist::units::human_bytes(s.spill_bytes),
                s.runs,
                flist::units::human_bytes(s.spill_bytes_max_rank),
                if report.list_in_pieces {
                    "; the list was read a piece at a time"
                } else {
                    ""
                }
            ));
        }
    }
    if report.unreadable > 0 {
        context.error(format!(
            "{} files could not be listed or read, or changed while dup ran (listed above), and were left out",
            report.unreadable
        ));
    }
    if report.interrupted {
        context.error("interrupted by a signal: the groups are incomplete");
    }
}

/// The files phases 2-4 group.
// Made once per run and taken apart at once: boxing the list would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Files {
    /// This rank's non-empty regular files, and whether they and their grouping tables reach
    /// the memory limit on this rank.
    List(FileList, bool),
    /// Their names already in runs keyed by size (a list read a piece at a time).
    BySize(KeyedSorted),
    /// None: the listing failed (reported).
    None,
}

/// Phases 2-4 on `files`: in memory, or out of core when they are in runs already or reach
/// the limit on any rank; what spilled (or why the spill failed: reported, nothing grouped)
/// goes into `report`. `space`: the memory limit in bytes and the spill directory; `tally`:
/// the count of failures to add to, what earlier runs hashed. Collective.
fn group(
    comm: &dyn Comm,
    options: &Options,
    files: Files,
    space: (u64, &SpillDir),
    tally: (&mut u64, Option<Resume<'_>>),
    report: &mut Report,
) -> Grouping {
    let ((limit, dir), (failed, resume)) = (space, tally);
    let none = (Vec::new(), 0, 0, 0, false, None);
    let by_size = match files {
        Files::None => return none,
        Files::BySize(runs) => Ok(runs),
        Files::List(list, over) if comm.any(over) => spilled::spill_list(comm, list, dir, limit),
        Files::List(list, _) => {
            // 2. Sizes: each size on one rank.
            let (inodes, files) = by_size(comm, list);
            let same_size = inodes.len() as u64;
            // 3 and 4. Prefixes, then whole files; groups in hash order.
            let (done, same_prefix, interrupted, stopped) =
                groups(comm, options, inodes, failed, resume);
            return (done, files, same_size, same_prefix, interrupted, stopped);
        }
    };
    // 2-4 through spill files.
    match by_size.and_then(|runs| spilled::grouped(comm, options, runs, failed, resume, limit, dir))
    {
        Ok(g) => {
            report.spilled = Some(g.spill);
            report.tmpdir = Some(display(dir.path()).into_owned());
            let (d, f, s, p) = (g.done, g.files, g.same_size, g.same_prefix);
            (d, f, s, p, g.interrupted, Some(g.stopped))
        }
        Err(e) => {
            spill_failed(comm, &options.context, &e, report);
            none
        }
    }
}

/// The out-of-core grouping failed with `e` (agreed by all ranks): rank 0 says so; nothing
/// is printed or written.
fn spill_failed(comm: &dyn Comm, context: &Context, e: &flist::Error, report: &mut Report) {
    if comm.rank() == 0 {
        context.error(format!("{e}; the comparison was not finished"));
    }
    report.spill_failed = true;
}

/// The message of the unreadable `-i` list `path` (as [`Input::list`] says it): the reader's
/// when it names the file, else prefixed with `read list FILE: `.
fn list_error(path: &[u8], e: &flist::Error) -> String {
    let shown = display(path);
    let msg = e.to_string();
    if msg.contains(shown.as_ref()) {
        msg
    } else {
        format!("read list {shown}: {msg}")
    }
}

/// The error is the input list's (it cannot be opened or read, or is damaged): a refusal of
/// the `-i` list as every tool's, not a failure of the spill.
fn about_input(e: &flist::Error, input: &[u8]) -> bool {
    match e {
        flist::Error::BadList { path, .. } => path == input,
        flist::Error::Item(item) => item.path == input,
        flist::Error::Invalid(_) => false,
    }
}

/// Open the checkpoint of this run: its inputs are the paths (or the list) searched, as
/// absolute paths, and `digest` (collective): that of the list of the regular files with their
/// fresh metadata ([`checkpoint::list_digest`]). `None` with
/// `--no-checkpoint`, or when a stop came during the listing. Rank 0 tells the notice.
/// Collective.
fn open_checkpoint(
    comm: &dyn Comm,
    options: &Options,
    cwd: &[u8],
    digest: impl FnOnce() -> [u8; 16],
) -> Result<Option<(Option<Checkpoint>, Prior)>, Error> {
    let context = &options.context;
    // Every rank takes the same way (a signal reaches each process at its own time).
    if matches!(options.checkpoint, Choice::Off) || comm.any(context.stopped()) {
        return Ok(None);
    }
    let searched: Vec<serde_bytes::ByteBuf> = match &options.input {
        Input::Paths(paths) => paths
            .iter()
            .map(|p| serde_bytes::ByteBuf::from(normalize(p, cwd)))
            .collect(),
        Input::File { path, .. } if path.as_slice() == b"-" => vec![path.clone().into()],
        Input::File { path, .. } => vec![normalize(path, cwd).into()],
        // A list in memory is named by its digest alone.
        Input::List(_) => Vec::new(),
    };
    let digest = digest();
    let inputs = Inputs::new("dup").field("the files searched", &searched);
    // A list in memory is named by its digest alone: then it names the checkpoint too.
    let inputs = if searched.is_empty() {
        inputs.field("the list of files", &digest)
    } else {
        inputs.state("the list of files", &digest)
    };
    let opened = checkpoint::open(
        comm,
        &options.checkpoint,
        Plan {
            output: None,
            inputs,
        },
    )
    .map_err(Error::new)?;
    opened.tell(comm, context);
    Ok(Some((opened.checkpoint, opened.prior)))
}

/// What earlier runs recorded, and where this run records each hash it computes.
#[derive(Clone, Copy)]
struct Resume<'a> {
    checkpoint: Option<&'a Checkpoint>,
    prior: &'a Prior,
}

/// The key (`seed` 0) or the check digest (another seed) of the hash of the first `limit` bytes
/// of `inode`: its size, device, inode number and first name (the same at any rank count).
fn hash_digest(inode: &Inode, limit: u64, seed: u64) -> u64 {
    let first = inode.first_path();
    let mut bytes = Vec::with_capacity(first.len() + 32);
    for v in [limit, inode.size, inode.dev, inode.ino] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.extend_from_slice(first);
    xxhash_rust::xxh64::xxh64(&bytes, seed)
}

/// The seed of [`hash_digest`]'s check digest.
const CHECK_SEED: u64 = 0x6475_702d_6368_6b31;

/// A hash's mark payload: the check digest, then the hash.
fn hash_payload(inode: &Inode, limit: u64) -> [u8; 40] {
    let mut out = [0u8; 40];
    out[..8].copy_from_slice(&hash_digest(inode, limit, CHECK_SEED).to_le_bytes());
    out[8..].copy_from_slice(&inode.hash);
    out
}

/// The hash of the first `limit` bytes of `inode` an earlier run recorded, if whole and its own.
fn recorded(prior: &Prior, inode: &Inode, limit: u64) -> Option<Hash> {
    let p = prior.payload(hash_digest(inode, limit, 0))?;
    let check = hash_digest(inode, limit, CHECK_SEED).to_le_bytes();
    (p.len() == 40 && p[..8] == check).then(|| p[8..].try_into().expect("32 bytes"))
}

/// `12.0 MiB (12582912 bytes)`.
fn bytes_text(n: u64) -> String {
    format!("{} ({n} bytes)", flist::units::human_bytes(n))
}

/// The files to compare, with fresh metadata: the input list stat'ed again, or the walk of the
/// paths; what could not be read is reported. Collective.
fn list(comm: &dyn Comm, options: &Options, cwd: &[u8]) -> Result<(FileList, u64), Error> {
    let context = &options.context;
    let listed = options.input.list(comm, |paths| {
        let roots: Vec<Vec<u8>> = paths.iter().map(|p| normalize(p, cwd)).collect();
        let progress = context.progress(comm.rank(), "Walked");
        let opts = WalkOptions {
            noatime: &context.noatime,
            stop: Some(&context.stop),
            progress: Some(&progress),
            ..WalkOptions::default()
        };
        walk(comm, &flist::path::outermost(roots), &opts)
    })?;
    Ok(match listed {
        Listed::Read(list) => restated(context, list, cwd),
        Listed::Walked(walked) => {
            for e in &walked.errors {
                context.error(e);
            }
            (walked.list, walked.errors.len() as u64)
        }
    })
}

/// `list` (read, not walked) with fresh metadata; the names that could not be stat'ed again
/// are reported and counted.
fn restated(context: &Context, list: FileList, cwd: &[u8]) -> (FileList, u64) {
    let (list, errors) = restat(list.normalized(cwd), Which::All, false);
    for e in &errors {
        context.error(e);
    }
    (list, errors.len() as u64)
}

/// The non-empty regular files of `list`, and this rank's count of empty ones.
fn regular_files(mut list: FileList) -> (FileList, u64) {
    let empty = list
        .iter()
        .filter(|e| e.kind == FileType::File && e.meta.is_some_and(|m| m.size == 0))
        .count() as u64;
    list.retain(|e| e.kind == FileType::File && e.meta.is_some_and(|m| m.size > 0));
    (list, empty)
}

/// Bytes (about) the in-memory grouping of the non-empty regular files `list` takes beyond
/// the list: the inodes (their names copied) and the hash groups.
fn grouping_bytes(list: &FileList) -> u64 {
    let per_name = std::mem::size_of::<Inode>() + std::mem::size_of::<(Vec<u8>, flist::Meta)>();
    list.iter().map(|e| per_name + e.path.len()).sum::<usize>() as u64
}

/// Bring every size of the non-empty regular files `list` to one rank and join hard links
/// into inodes; sizes held by one inode drop out. Returns those inodes, and this rank's count
/// of files (inodes). Collective.
fn by_size(comm: &dyn Comm, list: FileList) -> (Vec<Inode>, u64) {
    let size = comm.size();
    let list = remap(comm, list, |e| {
        size_owner(e.meta.map_or(0, |m| m.size), size)
    });
    let inodes = inodes_of(&list);
    drop(list);
    let files = inodes.len() as u64;
    (same_size(inodes), files)
}

/// Hash the prefixes of `inodes`, then the whole of those still paired above the prefix
/// length, over all ranks; group them by (size, hash), in hash order. Returns the groups of
/// this rank, how many inodes went on to the whole-file pass, whether a stop cut it short, and
/// how far the hashing got (over all ranks). Failures are reported and counted into `failed`.
/// Collective.
fn groups(
    comm: &dyn Comm,
    options: &Options,
    inodes: Vec<Inode>,
    failed: &mut u64,
    resume: Option<Resume<'_>>,
) -> (Vec<Vec<Inode>>, u64, bool, Option<Stopped>) {
    let context = &options.context;
    let size = comm.size();
    let progress = context.progress(comm.rank(), "Hashed");
    let total_bytes: u64 = inodes.iter().map(|i| i.size.min(PREFIX_BYTES)).sum();
    progress.total_items.store(
        comm.sum(inodes.len() as u64),
        std::sync::atomic::Ordering::Relaxed,
    );
    progress
        .total_bytes
        .store(comm.sum(total_bytes), std::sync::atomic::Ordering::Relaxed);
    let pass = |inodes: Vec<Inode>, limit: u64, batch: usize, failed: &mut u64| {
        let (hashed, errors, interrupted) =
            hash_all(comm, options, inodes, limit, batch, &progress, resume);
        *failed += errors.len() as u64;
        for e in errors {
            context.error(e);
        }
        (
            exchange(comm, hashed, |i| hash_owner(&i.hash, size)),
            interrupted,
        )
    };
    let (hashed, mut interrupted) = pass(inodes, PREFIX_BYTES, 16, failed);
    let mut done = Vec::new();
    let mut rest = Vec::new();
    for group in hash_groups(hashed) {
        if group[0].size <= PREFIX_BYTES {
            done.push(group);
        } else {
            rest.extend(group);
        }
    }
    let same_prefix = rest.len() as u64;

    // Whole files, one per work item (they may be large).
    if !comm.any(interrupted) {
        let total_bytes: u64 = rest.iter().map(|i| i.size).sum();
        progress
            .total_items
            .fetch_add(comm.sum(same_prefix), std::sync::atomic::Ordering::Relaxed);
        progress
            .total_bytes
            .fetch_add(comm.sum(total_bytes), std::sync::atomic::Ordering::Relaxed);
        let (hashed, cut) = pass(rest, u64::MAX, 1, failed);
        interrupted = cut;
        done.extend(hash_groups(hashed));
    } else {
        interrupted = true;
    }
    done.sort_by(|a, b| (a[0].hash, a[0].size).cmp(&(b[0].hash, b[0].size)));
    let stopped = Stopped {
        done: comm.sum(progress.items.load(std::sync::atomic::Ordering::Relaxed)),
        total: progress
            .total_items
            .load(std::sync::atomic::Ordering::Relaxed),
        what: "files",
    };
    (done, same_prefix, interrupted, Some(stopped))
}

/// Write the redundant copies to `output`, unless the run was interrupted or its grouping
/// failed (a list written then would look complete, and `rm -i` of it is the next step).
/// Collective.
fn write(comm: &dyn Comm, options: &Options, redundant: &FileList, report: &mut Report) {
    let Some(out) = &options.output else { return };
    let context = &options.context;
    if report.interrupted || report.spill_failed {
        if comm.rank() == 0 {
            context.error(format!(
                "{}: not written: {}",
                flist::path::display(out),
                if report.interrupted {
                    "the run was interrupted"
                } else {
                    "the comparison was not finished"
                }
            ));
        }
        return;
    }
    let format = if options.text {
        Format::Text
    } else {
        Format::V4
    };
    if let Err(e) = io::write(comm, redundant, out, format) {
        if comm.rank() == 0 {
            context.error(e);
        }
        report.list_failed = true;
    }
    report.list_failed = comm.any(report.list_failed);
}

/// `--verify`: the entries of `redundant` (this run's redundant copies) that the earlier list
/// `reviewed` also names, sorted by path on each rank; the names of `reviewed` that are not
/// redundant copies now are named on stderr (left out of `output`). Returns the list and the
/// count of those names on this rank. Collective.
fn still_redundant(
    comm: &dyn Comm,
    context: &Context,
    redundant: FileList,
    reviewed: FileList,
    output: Option<&[u8]>,
) -> (FileList, u64) {
    let size = comm.size() as u64;
    let owner = |p: &[u8]| (hash_path(p) % size) as usize;
    let now = remap(comm, redundant, |e| owner(e.path));
    let reviewed = remap(comm, reviewed, |e| owner(e.path));
    let asked: HashSet<&[u8]> = reviewed.iter().map(|e| e.path).collect();
    let current: HashSet<&[u8]> = now.iter().map(|e| e.path).collect();
    let mut order: Vec<usize> = (0..now.len())
        .filter(|&i| asked.contains(now.entry(i).path))
        .collect();
    order.sort_by(|&a, &b| now.entry(a).path.cmp(now.entry(b).path));
    let mut still = now.empty_like();
    for i in order {
        still.push_from(&now, i);
    }
    let out = output.map_or_else(Default::default, |o| display(o).into_owned());
    let mut gone = 0;
    for e in reviewed.iter() {
        if !current.contains(e.path) {
            gone += 1;
            context.error(format!(
                "{}: no longer a redundant copy (it changed, or no other file holds its content now); not written to {out}",
                display(e.path)
            ));
        }
    }
    (still, gone)
}

/// Hash the first `limit` bytes of every inode over all ranks with work stealing, `batch`
/// inodes per work item. Returns the inodes hashed on this rank (wherever they started), the
/// failures, and whether a stop request cut the pass short. With `resume`, the hashes an
/// earlier run recorded are taken (counted as hashed now), and each one computed is marked.
/// Collective.
fn hash_all(
    comm: &dyn Comm,
    options: &Options,
    mut inodes: Vec<Inode>,
    limit: u64,
    batch: usize,
    progress: &Progress,
    resume: Option<Resume<'_>>,
) -> (Vec<Inode>, Vec<String>, bool) {
    // Hashed by an earlier run: taken as they are, without a read.
    let mut earlier = Vec::new();
    if let Some(r) = resume {
        let mut todo = Vec::with_capacity(inodes.len());
        for mut i in inodes {
            match recorded(r.prior, &i, limit) {
                Some(h) => {
                    i.hash = h;
                    progress.add(1, i.size.min(limit));
                    earlier.push(i);
                }
                None => todo.push(i),
            }
        }
        inodes = todo;
    }
    let checkpoint = resume.and_then(|r| r.checkpoint);
    let hashed = Mutex::new(earlier);
    let errors = Mutex::new(Vec::new());
    let cfg = queue::Config {
        max_batch: batch,
        stop: Some(&options.context.stop),
        progress: Some(progress),
        ..queue::Config::default()
    };
    let outcome = queue::run(comm, &cfg, inodes, |mut i: Inode, _| {
        let bytes = i.size.min(limit);
        // Each file is read first by the prefix pass (the whole pass reads some again).
        let first = limit == PREFIX_BYTES;
        let noatime = &options.context.noatime;
        match hash_file(i.first_path(), &i.names[0].1, limit, noatime, first) {
            Ok(h) => {
                i.hash = h;
                if let Some(c) = checkpoint {
                    c.mark(hash_digest(&i, limit, 0), &hash_payload(&i, limit));
                }
                lock(&hashed).push(i);
            }
            Err(e) => lock(&errors).push(format!(
                "{} {}: {}",
                e.op,
                display(i.first_path()),
                e.source
            )),
        }
        progress.add(1, bytes);
    });
    (
        hashed.into_inner().unwrap_or_else(|p| p.into_inner()),
        errors.into_inner().unwrap_or_else(|p| p.into_inner()),
        outcome.interrupted,
    )
}
