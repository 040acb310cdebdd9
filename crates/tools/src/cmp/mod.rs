//! `mfu-rs cmp` (dcmp): compare two trees, field by field and byte by byte, and report what
//! differs.
//!
//! Both trees are walked; each record goes to the rank that owns its path relative to its root
//! (`crate::engine::pairing`, shared with `sync`), where the pair is compared field by field
//! (existence, type, size, owner, group, times, permissions, ACL). The data of same-size
//! regular files is compared in chunks dealt over all ranks (`content`), and each file's
//! verdict comes back to the rank holding its pair. Then every rank counts its pairs against
//! the report's expressions and the `-o` outputs, writes the matching records into the lists,
//! and rank 0 prints the summed report (`report`).
//!
//! Beyond `--memory-limit`, the walked lists spill to sorted runs and are paired by a merge
//! join instead (`spilled`): the same counts, report and `-o` lists, in bounded memory.
//!
//! A stopped comparison continues: each chunk's verdict is marked in a checkpoint whose inputs
//! are the two trees, the digests of their listings and the options that decide the chunks, so a
//! rerun reads only the chunks not marked and reports what an uninterrupted run would. A stopped
//! run writes no `-o` list (it would look complete).

pub(crate) mod content;
pub(crate) mod manifest;
pub(crate) mod report;
pub(crate) mod spilled;

use crate::engine::checkpoint::{self, Checkpoint, Choice, Inputs, Outcome, Plan, Prior};
use crate::engine::compare_expr::{Field, Output, State, States, FIELDS};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::copy::Mapping;
use crate::engine::pairing::{bring_home, index_by_rel, pair_states};
use crate::engine::setup::{agree_setup, walk_sources_spilling};
use crate::engine::status::Status;
use content::{ReadOptions, Resume, Verdict};
use flist::io::Format;
use flist::path::{display, normalize};
use flist::spill::{MemoryLimit, SpillDir, WalkSpill};
use flist::walk::stat_path;
use flist::FileList;
pub use manifest::Checked;
pub use report::{Side, Tally};
use std::time::Instant;
use steal::{Comm, CommExt, ReduceOp};

/// Events whose error messages are kept on one line each: a control character (a newline in
/// a name, say) is written escaped, as `char::escape_debug` writes it (`\n`, `\r`, `\t`,
/// `\u{1b}`), the way flist names odd entries in its messages. A name can then neither forge a
/// line of its own in the errors nor cut one in two.
pub struct OneLineErrors {
    /// Where the events go.
    pub inner: std::sync::Arc<dyn crate::engine::context::Events>,
}

impl crate::engine::context::Events for OneLineErrors {
    fn error(&self, message: &str) {
        if !message.chars().any(char::is_control) {
            return self.inner.error(message);
        }
        let mut one = String::with_capacity(message.len() + 8);
        for c in message.chars() {
            if c.is_control() {
                one.extend(c.escape_debug());
            } else {
                one.push(c);
            }
        }
        self.inner.error(&one);
    }
    fn progress(&self, verb: &str, report: &steal::progress::Report) {
        self.inner.progress(verb, report);
    }
    fn output(&self, bytes: &[u8]) {
        self.inner.output(bytes);
    }
    fn info(&self, text: &str) {
        self.inner.info(text);
    }
}

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
    /// Write the entries matching each expression to its file (`-`: stdout), as dcmp does:
    /// the entries of both trees (a path both have is listed twice, once from each side).
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
    /// Judge contents by size and modification time only; read no data.
    pub lite: bool,
    /// `--manifest FILE`: check the tree `src` against this manifest instead of comparing two
    /// trees (`dest` is not used).
    pub manifest: Option<Vec<u8>>,
    /// The manifest's hash (`None`: found by hashing both ways).
    pub manifest_hash: Option<crate::engine::digest::HashKind>,
    /// With `manifest`: rewrite it for the tree as it is (new digests, added files, removed
    /// lines), atomically, in its hash and format (`manifest::update`).
    pub update_manifest: bool,
    /// Where the verdicts of compared chunks (files, with `manifest`) are recorded, so that a
    /// stopped run continues (`--checkpoint PATH`, `--no-checkpoint`).
    pub checkpoint: Choice,
    /// `--memory-limit`: bytes of records a rank may hold before its lists spill (`None`: the
    /// default share of the node's memory, [`flist::spill::MemoryLimit::resolve`]).
    pub memory_limit: Option<u64>,
    /// `--tmpdir`: where spill files go (`None`: `$TMPDIR`, else `/tmp`).
    pub tmpdir: Option<Vec<u8>>,
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
            lite: false,
            manifest: None,
            manifest_hash: None,
            update_manifest: false,
            checkpoint: Choice::default(),
            memory_limit: None,
            tmpdir: None,
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
    /// The destination as compared (absolute), as shown; empty with `--manifest` (the
    /// manifest is named in [`Report::manifest`]), and then left out of the JSON.
    #[serde(skip_serializing_if = "String::is_empty")]
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
    /// With `interrupted`: how far the comparison got, over this run and the earlier ones it
    /// continues (bytes of file data compared; files with `--manifest`).
    #[serde(skip)]
    pub stopped: Option<Stopped>,
    /// The checkpoint could not be kept (stopped) or removed (complete) (reported).
    pub checkpoint_failed: bool,
    /// This process's sample of failure messages.
    pub failures: Vec<String>,
    /// With `--manifest`: what the check against it found (the rest of the report then
    /// counts its files: `paths` listed, `differing` differ or missing).
    pub manifest: Option<manifest::Checked>,
    /// With `--memory-limit`, or when the lists spilled: the memory limit per rank, as shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    /// The lists outgrew the memory limit: what spilled (they were paired by a merge join of
    /// sorted runs, never held whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spilled: Option<spilled::Spilled>,
    /// Spilling failed (a full TMPDIR, reported): nothing was compared.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub spill_failed: bool,
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
            failed: self.not_compared
                + self.lists_failed
                + u64::from(self.checkpoint_failed)
                + u64::from(self.spill_failed),
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(
            self.differing
                + self.not_compared
                + self.lists_failed
                + u64::from(self.checkpoint_failed)
                + u64::from(self.spill_failed),
            0,
            self.incomplete || self.interrupted,
        )
    }
    fn stopped(&self) -> Option<Stopped> {
        self.stopped
    }
}

/// Files per rank whose data is compared in one round (see `run`).
const ROUND_FILES: usize = 1 << 16;

/// [`ROUND_FILES`], or the tests' smaller round.
fn round_files() -> usize {
    crate::engine::test_seam::round_files(ROUND_FILES)
}

/// In [`Pairs::flags`]: the destination has the path too.
const BOTH: u16 = 1 << 13;
/// In [`Pairs::flags`]: the pair's data is still to be compared.
const NEEDS_DATA: u16 = 1 << 14;
/// In [`Pairs::flags`]: a stop kept the pair's data from being compared (neither same nor
/// different; left out of the counts and lists).
const NOT_COMPARED: u16 = 1 << 15;

/// The paths of this rank and how their fields compare, in 2 bytes a source record (6 with
/// `-o`; a struct per path took 28): bit `b` of `flags[i]` says field [`FIELDS`]`[b]` of
/// source record `i` and its destination differs, [`BOTH`] that the destination has the path;
/// with `-o`, `dest_of[i]` is the destination's record (the lists name both). The destination
/// records no source record pairs with follow in `only_dest`.
struct Pairs {
    flags: Vec<u16>,
    /// Empty without `-o`.
    dest_of: Vec<u32>,
    only_dest: Vec<u32>,
}

impl Pairs {
    /// How the fields of source record `i` and its destination compare.
    fn states(&self, i: usize) -> States {
        if self.flags[i] & BOTH == 0 {
            return States::only(State::OnlySrc);
        }
        both_states(self.flags[i])
    }
}

/// The states of a pair with both sides whose differing fields are the bits of `flags` (as
/// [`differ_bits`] sets them).
fn both_states(flags: u16) -> States {
    let mut states = States::both_common();
    for (b, &f) in FIELDS.iter().enumerate() {
        states.differ_if(f, flags & (1 << b) != 0);
    }
    states
}

/// The [`Pairs::flags`] bits of the fields that differ in `states` (of a pair with both
/// sides, whose fields are `Common` or `Differ`).
fn differ_bits(states: &States) -> u16 {
    FIELDS
        .iter()
        .enumerate()
        .filter(|&(_, &f)| states.get(f) == State::Differ)
        .fold(0, |bits, (b, _)| bits | 1 << b)
}

/// What the walks gave: both lists in memory, brought to the ranks owning their relative
/// paths; or, beyond the memory limit, both spilled to sorted runs; or a failed spill.
// Made once per run and taken apart at once.
#[allow(clippy::large_enum_variant)]
enum Listed {
    InMemory(Trees),
    Spilled(flist::spill::JoinSide, flist::spill::JoinSide),
    Failed,
}

/// The pairs of this rank, and what is known of them: in memory, or spilled.
// Made once per run.
#[allow(clippy::large_enum_variant)]
enum Work {
    InMemory(Trees, Pairs),
    Spilled(spilled::Paired),
    Failed,
}

/// How the walks are prepared for the rest of the run.
struct WalkPlan<'a> {
    /// The checkpoints' directory, left out of both lists.
    ours: Option<&'a [u8]>,
    /// Compute the digests of the listings (a checkpoint's inputs).
    digests: bool,
    /// Bytes of records per rank beyond which the lists spill.
    limit: u64,
    /// Where they spill.
    dir: &'a SpillDir,
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
    if let Some(file) = &options.manifest {
        let dir = normalize(&options.src, &cwd);
        return manifest::run(comm, options, file, &dir);
    }
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

    // Beyond the memory limit the lists spill and are paired by a merge join.
    let limit = MemoryLimit::resolve(comm, options.memory_limit);
    let spill_dir = SpillDir::new(options.tmpdir.as_deref());
    if options.memory_limit.is_some() {
        report.memory_limit = Some(limit.describe());
    }

    // Walk both trees; pairs meet on the rank owning their relative path.
    // Rank 0 creates the default place, as it creates the checkpoint (`--lite` keeps none).
    let ours = steal::CommExt::bcast_with(comm, 0, || {
        (!options.lite)
            .then(|| crate::engine::checkpoint::checkpoints_dir(&options.checkpoint, &cwd))
            .flatten()
    });
    let plan = WalkPlan {
        ours: ours.as_deref(),
        digests: !options.lite && !matches!(options.checkpoint, Choice::Off),
        limit: limit.bytes,
        dir: &spill_dir,
    };
    let (listed, mut detail, digests) = walk(
        comm,
        context,
        src.clone(),
        dest.clone(),
        &mut tally,
        &mut report,
        &plan,
    );
    let mut work = match listed {
        Listed::InMemory(trees) => {
            let pairs = pair_up(&trees, options, &mut tally);
            Work::InMemory(trees, pairs)
        }
        Listed::Spilled(a, b) => {
            report.memory_limit = Some(limit.describe());
            let map = Mapping::new(vec![(src.clone(), dest.clone())]);
            let paired = spilled::pair_up(
                comm,
                options,
                (a, b),
                map,
                &exprs,
                &mut tally,
                (limit.bytes, &spill_dir),
            );
            match paired {
                Ok(p) => Work::Spilled(p),
                Err(e) => spilled::failed(comm, context, e, &mut report),
            }
        }
        Listed::Failed => Work::Failed,
    };
    if matches!(work, Work::Failed) {
        // Nothing was compared: no partial counts.
        tally = Tally::new(&exprs);
    }
    // The checkpoint, once the listings (inputs) are known. `--lite` reads no data: nothing to
    // record.
    let opened = if options.lite || matches!(work, Work::Failed) {
        None
    } else {
        open_checkpoint(comm, options, &src, &dest, digests)?
    };
    let resume = opened.as_ref().map(|(checkpoint, prior)| Resume {
        checkpoint: checkpoint.as_ref(),
        prior,
    });
    if let (Work::InMemory(trees, _), true) = (&mut work, options.outputs.is_empty()) {
        // Only `-o` lists read the destination's records again: free them for the rest.
        trees.dest = FileList::new(flist::Detail::Stat);
    }

    // Compare the data of same-size files.
    let compare_started = Instant::now();
    let bufsize = options.bufsize.unwrap_or(DEFAULT_BUFSIZE).min(1 << 30) as usize;
    if !options.lite {
        let chunk_size = match &mut work {
            Work::InMemory(trees, pairs) => Some(compare(
                comm,
                options,
                trees,
                pairs,
                &mut tally,
                &mut report,
                resume,
            )),
            Work::Spilled(p) => {
                Some(p.compare(comm, options, &exprs, &mut tally, &mut report, resume))
            }
            Work::Failed => None,
        };
        if let Some(chunk_size) = chunk_size {
            detail.compare_seconds = Some(compare_started.elapsed().as_secs_f64());
            detail.chunk_size = chunk_size;
        }
    }
    detail.bufsize = bufsize as u64;
    detail.ranks = comm.size();

    // Count, and write each output's records.
    match work {
        Work::InMemory(trees, pairs) => count_and_write(
            comm,
            options,
            &trees,
            &pairs,
            &exprs,
            &mut tally,
            &mut report,
        ),
        Work::Spilled(p) => p.write(comm, options, &mut tally, &mut report),
        Work::Failed => report.written = vec![false; options.outputs.len()],
    }
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
    if let Some((Some(c), _)) = opened {
        report.checkpoint_failed =
            !c.finish_told(comm, context, Outcome::of_stop(report.interrupted));
    }
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = context.failures();
    Ok(report)
}

/// Open the checkpoint of a comparison of `src` with `dest` (as compared: absolute) whose
/// listings have `digests` ([`checkpoint::list_digest`], SRC's then DEST's): its inputs are the two trees, the digests of their listings and the
/// options that decide how files are cut into chunks. `None` with `--no-checkpoint`, or when a
/// stop came during the walks (nothing of the comparison to record). Rank 0 tells the notice
/// (continuing, or not used and why). Collective.
fn open_checkpoint(
    comm: &dyn Comm,
    options: &Options,
    src: &[u8],
    dest: &[u8],
    digests: Option<[[u8; 16]; 2]>,
) -> Result<Option<(Option<Checkpoint>, Prior)>, Error> {
    let context = &options.context;
    // Every rank takes the same way (a signal reaches each process at its own time).
    if matches!(options.checkpoint, Choice::Off) || steal::CommExt::any(comm, context.stopped()) {
        return Ok(None);
    }
    let [src_digest, dest_digest] = digests.expect("digests are made for a checkpoint");
    let inputs = Inputs::new("cmp")
        .field(
            "the trees compared",
            &(serde_bytes::Bytes::new(src), serde_bytes::Bytes::new(dest)),
        )
        .state("the listing of SRC", &src_digest)
        .state("the listing of DEST", &dest_digest)
        .field("--chunksize", &options.chunksize)
        .field("--direct", &options.direct);
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

/// A tree's list on this rank after its walk: in memory, or spilled to sorted runs by the walk.
// Made once per tree and taken apart at once.
#[allow(clippy::large_enum_variant)]
enum Walk {
    InMemory(FileList),
    Spilled(flist::spill::JoinSide),
}

/// Walk `src` and `dest` and bring every record to the rank owning its relative path; with
/// `plan.digests`, the digests of the two listings too. The walks spill their records to
/// sorted runs as they go, past a quarter of `plan.limit` on any rank, unless a checkpoints'
/// directory or TMPDIR lies in a tree (then a tree is walked into memory and spilled at once
/// when it outgrows half of it, SRC's before DEST is walked). Spilled lists are paired by the merge
/// join. Walk failures are counted in `tally` (what lies below was not compared). Collective.
fn walk(
    comm: &dyn Comm,
    context: &Context,
    src: Vec<u8>,
    dest: Vec<u8>,
    tally: &mut Tally,
    report: &mut Report,
    plan: &WalkPlan<'_>,
) -> (Listed, Detail, Option<[[u8; 16]; 2]>) {
    let started = Instant::now();
    let progress = context.progress(comm.rank(), "Walked");
    // Walk failures of this rank (reported by the walk).
    let mut walk_errors = 0;
    // What the walks leave out afterwards (the checkpoints) cannot be left out of runs, and
    // spill files never go in a tree compared.
    let apart = |dir: &[u8]| {
        [&src, &dest]
            .iter()
            .all(|t| !flist::path::is_prefix(t, dir) && !flist::path::is_prefix(dir, t))
    };
    let spill = (plan.ours.is_none_or(apart)
        && spilled::refuse_tmpdir_inside(plan.dir.path(), &src, &dest).is_ok())
    .then_some(WalkSpill {
        limit: plan.limit,
        dir: plan.dir,
    });
    let mut walk = |root: &[u8]| {
        let w = walk_sources_spilling(comm, context, &[root.to_vec()], &progress, spill);
        if !w.complete {
            report.incomplete = true;
        }
        walk_errors += w.errors.len() as u64;
        let side = match w.spilled {
            None => {
                let mut list = w.list;
                crate::engine::checkpoint::without_checkpoints(&mut list, plan.ours);
                let digest = plan.digests.then(|| checkpoint::list_digest(comm, &list));
                return (Ok(Walk::InMemory(list)), w.total_items, digest);
            }
            Some(runs) => runs.map_err(|e| e.to_string()),
        };
        // The digest of the runs, read back once: the sums do not depend on the order.
        let digested = side.and_then(|runs| {
            let mut sum = [0u64; 2];
            if plan.digests {
                let mut bytes = Vec::new();
                let read =
                    runs.for_each(|l, i| checkpoint::add_record_sum(&mut sum, l, i, &mut bytes));
                comm.agree(read).map_err(|e| e.to_string())?;
            }
            Ok((runs, sum))
        });
        match digested {
            Ok((runs, sum)) => {
                let digest = plan
                    .digests
                    .then(|| checkpoint::digest_of_sums(comm, sum, runs.records()));
                (
                    Ok(Walk::Spilled(runs.into_join_side(root))),
                    w.total_items,
                    digest,
                )
            }
            Err(e) => (Err(e), w.total_items, None),
        }
    };
    let budget = plan.limit / 2;
    let over = |bytes: usize| steal::CommExt::any(comm, bytes as u64 > budget);
    // A tree walked into memory (not spilling) is spilled when it outgrows the budget.
    let to_side = |side: Walk, root: &[u8]| match side {
        Walk::Spilled(s) => Ok(s),
        Walk::InMemory(list) => spilled::spill(comm, list, root, (&src, &dest), plan),
    };
    let (src_side, src_items, src_digest) = walk(&src);
    let src_side = src_side.and_then(|side| match side {
        Walk::InMemory(list) if over(list.heap_bytes()) => {
            to_side(Walk::InMemory(list), &src).map(Walk::Spilled)
        }
        side => Ok(side),
    });
    let (dest_side, dest_items, dest_digest) = walk(&dest);
    crate::engine::test_seam::after_listing(comm);
    let detail = Detail {
        src_items,
        dest_items,
        walk_seconds: started.elapsed().as_secs_f64(),
        ..Detail::default()
    };
    tally.fail_items(walk_errors);
    let digests = src_digest.zip(dest_digest).map(|(s, d)| [s, d]);
    let listed = match (src_side, dest_side) {
        (Err(e), _) | (_, Err(e)) => {
            spilled::failed(comm, context, e, report);
            Listed::Failed
        }
        (Ok(Walk::InMemory(src_list)), Ok(Walk::InMemory(dest_list)))
            if !over(src_list.heap_bytes() + dest_list.heap_bytes()) =>
        {
            let map = Mapping::new(vec![(src.clone(), dest.clone())]);
            let dest_map = Mapping::new(vec![(dest.clone(), dest.clone())]);
            Listed::InMemory(Trees {
                src: bring_home(comm, src_list, &map),
                dest: bring_home(comm, dest_list, &dest_map),
                map,
                dest_map,
            })
        }
        (Ok(a), Ok(b)) => {
            let sides = to_side(a, &src).and_then(|a| Ok((a, to_side(b, &dest)?)));
            match sides {
                Ok((a, b)) => Listed::Spilled(a, b),
                Err(e) => {
                    spilled::failed(comm, context, e, report);
                    Listed::Failed
                }
            }
        }
    };
    (listed, detail, digests)
}

/// Compare the data of the pairs flagged [`NEEDS_DATA`] over all ranks, in rounds, and mark
/// what differs in `pairs` (a pair a stop kept from being compared is flagged
/// [`NOT_COMPARED`]: neither same nor different). Returns the chunk size used. Collective.
fn compare(
    comm: &dyn Comm,
    options: &Options,
    trees: &Trees,
    pairs: &mut Pairs,
    tally: &mut Tally,
    report: &mut Report,
    resume: Option<Resume<'_>>,
) -> u64 {
    let context = &options.context;
    let needs_data = |flags: u16| flags & NEEDS_DATA != 0;
    // Bytes to compare (each of the two files), and the threads of all ranks.
    let mut totals = [
        pairs
            .flags
            .iter()
            .enumerate()
            .filter(|&(_, &f)| needs_data(f))
            .filter_map(|(i, _)| trees.src.meta(i).map(|m| m.size))
            .sum::<u64>(),
        rayon::current_num_threads() as u64,
    ];
    comm.allreduce(&mut totals, ReduceOp::Sum);
    let opts = read_options(options, resume, totals);
    let progress = context.progress(comm.rank(), "Compared");
    // In rounds of at most ROUND_FILES files per rank (as many rounds on every rank): the
    // chunks of a round, and the copy of its records, are all the comparison holds.
    let round = round_files();
    let to_read = pairs.flags.iter().filter(|&&f| needs_data(f)).count();
    let mut rounds = [to_read.div_ceil(round) as u64];
    comm.allreduce(&mut rounds, ReduceOp::Max);
    let (mut chunk_size, mut bytes_read, mut interrupted) = (0, 0, false);
    let mut not_compared = 0u64;
    // The source records still to read, in order, from `next` on.
    let mut next = 0;
    for _ in 0..rounds[0] {
        let mut picked = Vec::with_capacity(round.min(to_read));
        while picked.len() < round && next < pairs.flags.len() {
            if needs_data(pairs.flags[next]) {
                picked.push(next);
            }
            next += 1;
        }
        let verdicts = if interrupted {
            // Stopped in an earlier round: these were never compared.
            vec![Verdict::NotCompared; picked.len()]
        } else {
            let files = trees.src.select(picked.iter().copied());
            let got =
                content::compare_files(comm, context, &files, &trees.map, &opts, &progress, resume);
            chunk_size = chunk_size.max(got.chunk_size);
            // Counted from the start of the comparison (the progress counters are not reset).
            bytes_read = got.bytes_read;
            interrupted = got.interrupted;
            got.verdicts
        };
        for (&k, verdict) in picked.iter().zip(verdicts) {
            let flags = &mut pairs.flags[k];
            *flags &= !NEEDS_DATA;
            *flags |= verdict_bits(verdict, tally);
            not_compared += u64::from(*flags & NOT_COMPARED != 0);
        }
    }
    finish_compare(
        comm,
        options,
        report,
        (bytes_read, interrupted),
        not_compared,
        totals[0],
    );
    chunk_size
}

/// How the data of the files to compare is read: the chunk size for `totals` (bytes to
/// compare, threads, over all ranks) and the options.
fn read_options<'a>(
    options: &'a Options,
    resume: Option<Resume<'_>>,
    totals: [u64; 2],
) -> ReadOptions<'a> {
    // Recorded chunks are keyed by the chunk size: with a checkpoint it is chosen once for the
    // whole comparison (not per round, whose files depend on the rank count), or taken from
    // the marks of the run this one continues.
    let chosen = match (options.chunksize, resume) {
        (Some(c), _) => c,
        (None, Some(r)) => content::recorded_chunk_size(r.prior)
            .unwrap_or_else(|| crate::engine::copy::auto_chunk_size(totals[0], totals[1])),
        (None, None) => 0,
    };
    ReadOptions {
        chunk_size: chosen,
        bufsize: options.bufsize.unwrap_or(DEFAULT_BUFSIZE).min(1 << 30) as usize,
        direct: options.direct,
        noatime: &options.context.noatime,
        ranges: None,
    }
}

/// The [`Pairs::flags`] bits a pair's data comparison sets: CONTENT when it differs or could
/// not be read (a failure, counted in `tally`), [`NOT_COMPARED`] when a stop kept it from
/// being compared (counted too).
fn verdict_bits(verdict: Verdict, tally: &mut Tally) -> u16 {
    let content = 1
        << FIELDS
            .iter()
            .position(|&f| f == Field::Content)
            .expect("CONTENT");
    match verdict {
        Verdict::Same => 0,
        Verdict::Differ => content,
        Verdict::Failed => {
            tally.fail();
            content
        }
        Verdict::NotCompared => {
            tally.fail();
            NOT_COMPARED
        }
    }
}

/// What the data comparison tells once its rounds are over: `read` (bytes read, and whether a
/// stop interrupted it), the files a stop kept from being compared on this rank, and the bytes
/// there were to compare (`total`, all ranks). Collective.
fn finish_compare(
    comm: &dyn Comm,
    options: &Options,
    report: &mut Report,
    read: (u64, bool),
    not_compared: u64,
    total: u64,
) {
    let (bytes_read, interrupted) = read;
    let context = &options.context;
    let skipped = steal::CommExt::sum(comm, not_compared);
    if interrupted && comm.rank() == 0 {
        context.error(format!(
            "interrupted by a signal: {skipped} files were not compared (counted as \
             items that could not be compared, neither same nor different)"
        ));
    }
    report.bytes_read = bytes_read;
    report.interrupted = interrupted;
    if interrupted {
        report.stopped = Some(Stopped {
            done: bytes_read / 2,
            total,
            what: "bytes",
        });
    }
}

/// Count every pair against the fields and expressions, and write each output's matching
/// records to its list (a failed write is reported and counted once, by rank 0). As dcmp
/// writes them, a list holds both trees' records of a matching path: each rank's source
/// records, then its destination records (those of common paths, then of paths only the
/// destination has). Collective.
fn count_and_write(
    comm: &dyn Comm,
    options: &Options,
    trees: &Trees,
    pairs: &Pairs,
    exprs: &[&Output],
    tally: &mut Tally,
    report: &mut Report,
) {
    let mut matched: Vec<FileList> = options
        .outputs
        .iter()
        .map(|_| trees.src.empty_like())
        .collect();
    let compared = |i: usize| pairs.flags[i] & NOT_COMPARED == 0;
    let both = |i: usize| pairs.flags[i] & BOTH != 0;
    for i in (0..pairs.flags.len()).filter(|&i| compared(i)) {
        let states = pairs.states(i);
        let side = if both(i) { Side::Both } else { Side::OnlySrc };
        tally.count(side, &states, exprs);
        for (o, out) in options.outputs.iter().zip(matched.iter_mut()) {
            if o.matches(&states) {
                out.push_from(&trees.src, i);
            }
        }
    }
    if !options.outputs.is_empty() {
        for i in (0..pairs.flags.len()).filter(|&i| compared(i) && both(i)) {
            let states = pairs.states(i);
            for (o, out) in options.outputs.iter().zip(matched.iter_mut()) {
                if o.matches(&states) {
                    out.push_from(&trees.dest, pairs.dest_of[i] as usize);
                }
            }
        }
    }
    let only_dest = States::only(State::OnlyDest);
    for &j in &pairs.only_dest {
        tally.count(Side::OnlyDest, &only_dest, exprs);
        for (o, out) in options.outputs.iter().zip(matched.iter_mut()) {
            if o.matches(&only_dest) {
                out.push_from(&trees.dest, j as usize);
            }
        }
    }
    let format = if options.text {
        Format::Text
    } else {
        Format::V4
    };
    if report.interrupted {
        // A list without the files not compared would look complete: none is written (a rerun
        // writes them all).
        report.written = vec![false; options.outputs.len()];
        if comm.rank() == 0 {
            for o in &options.outputs {
                options.context.error(format!(
                    "{}: not written: the comparison was stopped before its end",
                    display(&o.file)
                ));
            }
        }
        return;
    }
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
/// Pairs whose data must be read are flagged [`NEEDS_DATA`]; contents are judged here by
/// size and mtime with `--lite`.
fn pair_up(trees: &Trees, options: &Options, tally: &mut Tally) -> Pairs {
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
    // One bit a destination record: paired with a source record.
    let mut seen = vec![0u64; dest_list.len().div_ceil(64)];
    // Only -o lists name the destination's record of a pair.
    let keep_dest = !options.outputs.is_empty();
    let mut pairs = Pairs {
        flags: Vec::with_capacity(src_list.len()),
        dest_of: Vec::with_capacity(if keep_dest { src_list.len() } else { 0 }),
        only_dest: Vec::new(),
    };
    for i in 0..src_list.len() {
        let path = src_list.path(i);
        let Some(j) = by_rel.find(map.rel(path), dest_rel) else {
            pairs.flags.push(0);
            if keep_dest {
                pairs.dest_of.push(u32::MAX);
            }
            continue;
        };
        seen[j / 64] |= 1 << (j % 64);
        let (Some(s), Some(d)) = (src_list.meta(i), dest_list.meta(j)) else {
            unreachable!("walks give stat lists")
        };
        let c = pair_states(path, dest_list.path(j), &s, &d);
        for e in &c.errors {
            options.context.error(e);
        }
        if !c.errors.is_empty() {
            tally.fail();
        }
        let mut states = c.states;
        let mut flags = 0;
        if c.needs_data {
            if options.lite {
                let mtime_differs = (s.mtime, s.mtime_nsec) != (d.mtime, d.mtime_nsec);
                states.differ_if(Field::Content, mtime_differs);
            } else {
                flags = NEEDS_DATA;
            }
        }
        if keep_dest {
            pairs.dest_of.push(narrow(j));
        }
        pairs.flags.push(BOTH | flags | differ_bits(&states));
    }
    drop(by_rel);
    pairs.only_dest = (0..dest_list.len())
        .filter(|&j| seen[j / 64] & (1 << (j % 64)) == 0)
        .map(narrow)
        .collect();
    pairs
}
