//! `mfu-rs sync` (dsync): make DEST equal to SRC, moving only what differs.
//!
//! Both trees are walked; records of both are brought together by a hash of their path relative
//! to the root, so each rank compares its share of paths locally. Beyond `--memory-limit` both
//! lists spill to sorted runs and are paired by a merge join instead (`spilled`), each pair
//! decided by the same code. Files differ when their type,
//! size or mtime (seconds and nanoseconds) differ (`--contents`: or their bytes); entries whose
//! data is equal but whose mode, owner, mtime or project ID (`projids`) differ (with `-X`: or
//! their extended attributes, `xattrs`) get their metadata fixed only. Because the
//! copy engine gives a file the source's mtime only once all of its data has landed, a sync after
//! an interrupted copy or sync recopies exactly the files left incomplete; of a huge file whose
//! journal it can trust, only the chunks the journal does not record
//! ([`crate::engine::copy::journal`]).

mod classify;
mod decide;
mod projids;
mod spilled;
mod state;
mod xattrs;

pub use state::Summary as StateSummary;

use crate::engine::compare_expr::{Field, Output, States};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::copy::drive::IoOptions;
use crate::engine::copy::journal::{self, Found, Resumable, SourceId};
use crate::engine::copy::resume::{self, Journals};
use crate::engine::copy::{links, Mapping, Plan};
use crate::engine::pairing::{self, bring_home, contents_differ, exchange_pairs, home};
use crate::engine::remove::{remove, Remover, Wording};
use crate::engine::select::Rules;
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use crate::engine::verify_state;
use decide::{decide, Inputs};
use flist::path::{is_prefix, normalize};
use flist::spill::{MemoryLimit, OverflowList, SpillDir, WalkSpill};
use flist::walk::stat_path;
use flist::{Detail, FileList, FileType, Meta};
use std::os::unix::ffi::OsStringExt;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::{Comm, CommExt, ReduceOp};

/// What `sync` makes equal and how. [`Options::new`] gives the command line's defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// The source: a directory, whose contents are synced (as `rsync -a SRC/ DEST/`), or one
    /// file.
    pub src: Vec<u8>,
    /// The destination (created if absent; its parent must exist).
    pub dest: Vec<u8>,
    /// Plan only: every planned action (`create PATH`, `update`, `delete`, `meta`, `link`) is
    /// sent as output, nothing changes.
    pub dryrun: bool,
    /// Also compare the bytes of files of equal size; rewrite only the chunks that differ.
    pub contents: bool,
    /// Remove from DEST what SRC lacks, and replace entries of another type than SRC's
    /// (refused when the source walk was incomplete).
    pub delete: bool,
    /// Follow symbolic links in SRC (default: copy links as links).
    pub dereference: bool,
    /// Hard-link files that are unchanged in this directory instead of copying them.
    pub link_dest: Option<Vec<u8>>,
    /// Before syncing, write the entries whose comparison matches each expression to its file
    /// (dcmp syntax).
    pub output: Vec<Output>,
    /// How data and metadata move (metadata is always preserved: `io.preserve` is true).
    pub io: IoOptions,
    /// Include/exclude rules: excluded entries are neither compared, copied nor deleted.
    pub rules: Rules,
    /// With `io.verify`: the state file of what was verified (`sync::state`): files unchanged
    /// since it (sources and destinations) are not read again; rewritten after the run.
    pub state: Option<Vec<u8>>,
    /// `--memory-limit`: bytes of records a rank may hold before the walked lists spill and
    /// SRC and DEST are paired by a merge join (`None`: the default share of the node's
    /// memory, [`flist::spill::MemoryLimit::resolve`]).
    pub memory_limit: Option<u64>,
    /// `--tmpdir`: where spill files go (`None`: `$TMPDIR`, else `/tmp`).
    pub tmpdir: Option<Vec<u8>>,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Sync `src` into `dest` with the command line's defaults: nothing deleted, files compared
    /// by size and mtime, metadata preserved, events discarded.
    pub fn new(src: impl AsRef<[u8]>, dest: impl AsRef<[u8]>) -> Options {
        Options {
            src: src.as_ref().to_vec(),
            dest: dest.as_ref().to_vec(),
            dryrun: false,
            contents: false,
            delete: false,
            dereference: false,
            link_dest: None,
            output: Vec::new(),
            io: IoOptions {
                preserve: true,
                ..IoOptions::default()
            },
            rules: Rules::default(),
            state: None,
            memory_limit: None,
            tmpdir: None,
            context: Context::default(),
        }
    }
}

/// What a `sync` run did (or, with `dryrun`, would do): counts summed over all ranks.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The run only planned (`dryrun`): the counts are what it would do.
    pub dryrun: bool,
    /// Actions planned (creations, updates, deletions, metadata fixes, links): what a stopped
    /// run's `handled` counts towards.
    pub planned: u64,
    /// Actions that happened or failed, as the engines counted them (not the plan's word):
    /// with a stop, how far the run got.
    pub handled: u64,
    /// Bytes of file data planned to be copied (`bytes` counts those written): what a stopped
    /// run's report counts when there are any.
    pub planned_bytes: u64,
    /// Entries created in DEST.
    pub created: u64,
    /// Entries whose data was replaced.
    pub updated: u64,
    /// Entries removed from DEST.
    pub deleted: u64,
    /// Entries whose metadata alone was fixed.
    pub meta_fixed: u64,
    /// Entries hard-linked (hard-link groups, `link_dest`).
    pub linked: u64,
    /// File data bytes copied (dry run: to copy).
    pub bytes: u64,
    /// Partial files of an interrupted copy resumed from their journals: only their missing
    /// chunks were copied (dry run: to resume).
    pub resumed: u64,
    /// Bytes of resumed files not copied again (dry run: planned to be kept).
    pub resumed_bytes: u64,
    /// DEST entries of another type than SRC's, left alone without `delete` (each named).
    pub conflicts: u64,
    /// DEST entries `delete` would remove but kept because the source walk was incomplete.
    pub refused_deletes: u64,
    /// `delete` was refused (incomplete source walk).
    pub delete_refused: bool,
    /// Items whose copy or removal failed (each named).
    pub failed: u64,
    /// Entries skipped (device nodes without privilege; each named).
    pub skipped: u64,
    /// Entries that could not be walked (each named).
    pub list_failed: u64,
    /// A walk was incomplete.
    pub list_incomplete: bool,
    /// An `output` list could not be written.
    pub output_failed: bool,
    /// Wall-clock seconds from the end of the setup to the end of the run.
    pub seconds: f64,
    /// A stop request cut the run short.
    pub interrupted: bool,
    /// This process's sample of the failure messages.
    pub failures: Vec<String>,
    /// With `--verify`: how the written data was read back.
    pub verify: Option<crate::engine::verify::Summary>,
    /// With `--manifest`: the manifest written (or not).
    pub manifest: Option<crate::engine::manifest::Summary>,
    /// With `--state`: what was verified, what the state spared, and the state written.
    pub state: Option<state::Summary>,
    /// With `--memory-limit`, or when the lists spilled: the memory limit per rank, as shown.
    pub memory_limit: Option<String>,
    /// The lists outgrew the memory limit: what spilled (SRC and DEST were paired by a merge
    /// join of sorted runs).
    pub spilled: Option<spilled::Spilled>,
    /// The lists could not be spilled (a full TMPDIR, named on stderr): nothing was changed.
    pub spill_failed: bool,
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.created + self.updated + self.deleted + self.meta_fixed + self.linked,
            bytes: self.bytes,
            failed: self.failed + self.list_failed + u64::from(self.spill_failed),
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        let left = self.list_incomplete
            || self.list_failed > 0
            || self.conflicts > 0
            || self.delete_refused
            || self.output_failed
            || self.spill_failed
            || self.manifest.as_ref().is_some_and(|m| !m.written)
            || self
                .state
                .as_ref()
                .is_some_and(|s| !s.written || s.differ > 0 || s.not_verified > 0);
        let left = if left {
            Status::ItemsFailed
        } else {
            Status::Ok
        };
        left.worst(Status::of_work(self.failed, self.skipped, self.interrupted))
    }
    /// Bytes copied of those planned (actions handled, when no data is to be copied): a rerun
    /// of the same sync plans only what is left.
    fn stopped(&self) -> Option<Stopped> {
        if !self.interrupted {
            return None;
        }
        Some(match self.planned_bytes {
            0 => Stopped {
                done: self.handled,
                total: self.planned,
                what: "entries",
            },
            total => Stopped {
                done: self.bytes.min(total),
                total,
                what: "bytes",
            },
        })
    }
}

/// One planned action, for `--dryrun` lines and the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Create,
    Update,
    Delete,
    Meta,
    Link,
}

impl Action {
    fn word(self) -> &'static [u8] {
        match self {
            Action::Create => b"create",
            Action::Update => b"update",
            Action::Delete => b"delete",
            Action::Meta => b"meta",
            Action::Link => b"link",
        }
    }
}

/// The planned actions of this rank, each with its destination path: the paths relative to
/// DEST (whose root is not repeated on every record) in a lite list's arena, so a record
/// costs its relative path plus 6 bytes, no heap object of its own; beyond the memory limit,
/// held up to a budget and the rest written out ([`OverflowList`]).
struct Actions {
    /// DEST: every planned path lies beneath it.
    root: Vec<u8>,
    kinds: Vec<Action>,
    rels: OverflowList,
    /// Bytes of spill read at a time.
    block: usize,
}

impl Actions {
    fn new(root: &[u8]) -> Actions {
        Actions {
            root: root.to_vec(),
            kinds: Vec::new(),
            rels: OverflowList::in_memory(Detail::Lite),
            block: 0,
        }
    }

    /// Actions held up to `budget` bytes of paths, the rest in a spill file of `dir`.
    fn spilling(root: &[u8], budget: u64, dir: &SpillDir) -> Actions {
        Actions {
            rels: OverflowList::spilling(Detail::Lite, budget, dir),
            block: budget as usize,
            ..Actions::new(root)
        }
    }

    fn push(&mut self, action: Action, path: &[u8]) {
        let rel = beneath(&self.root, path).expect("a planned path lies beneath DEST");
        self.rels.push(rel, FileType::Unknown, None);
        self.kinds.push(action);
    }

    /// Bytes of the paths written out.
    fn spill_bytes(&self) -> u64 {
        self.rels.spill_bytes()
    }

    /// The first failure to write the paths out (a full TMPDIR).
    fn finish(&mut self) -> flist::error::Result<()> {
        self.rels.finish()
    }

    /// The actions, in order, without their paths.
    fn kinds(&self) -> impl Iterator<Item = Action> + '_ {
        self.kinds.iter().copied()
    }

    /// Call `f` with each action and its destination path, in order (a failure to read the
    /// paths spilled ends it).
    fn each(&self, mut f: impl FnMut(Action, &[u8])) -> flist::error::Result<()> {
        let mut path = Vec::new();
        let mut i = 0;
        self.rels.for_each(self.block, |rels, at| {
            path.clear();
            path.extend_from_slice(&self.root);
            let rel = rels.path(at);
            if !rel.is_empty() {
                if !path.ends_with(b"/") {
                    path.push(b'/');
                }
                path.extend_from_slice(rel);
            }
            f(self.kinds[i], &path);
            i += 1;
        })
    }
}

/// A destination entry of another type than its source, left alone because replacing it
/// would remove it (and, for a directory, its subtree) and `--delete` was not given.
struct Conflict {
    /// The destination path.
    dest: Vec<u8>,
    src_kind: FileType,
    dest_kind: FileType,
}

/// This rank's plan: what the copy engine does, what is deleted, and the action list.
struct Decisions {
    /// The plan, but for `create`, which is taken from the lists by `create_from`.
    plan: Plan,
    /// The records to create: indices in the source list, then in the members list.
    create_from: [Vec<u32>; 2],
    /// Destination entries to remove (`--delete`, and entries of another type that `--delete`
    /// lets the source's replace); counted as deleted.
    delete: FileList,
    /// Destination files whose data changes, unlinked before a new file is written under the
    /// name: rewriting in place would change every other name of the inode (an older
    /// `--link-dest` snapshot). Part of an update, not counted as deleted.
    unlink_first: FileList,
    /// Journals an interrupted copy left beside files of `unlink_first` (destination path,
    /// source path): removed with them when they are journals of that source, since a file
    /// copied whole as a new inode is no longer the partial file they describe (the engine
    /// only sees to the journals of files big enough to keep one).
    stale_journals: Vec<(Vec<u8>, Vec<u8>)>,
    /// DEST directories this rank replaces by a source entry of another type (`--delete`):
    /// the new entry is made only once the directory is gone.
    replaced_dirs: Vec<Vec<u8>>,
    /// Type conflicts left alone (without `--delete`); nothing beneath them is synced.
    conflicts: Vec<Conflict>,
    actions: Actions,
    /// Data bytes the plan copies (file sizes of creates and updates).
    bytes: u64,
    /// Destination entries --delete would remove but may not (incomplete source walk).
    refused_deletes: u64,
    /// For each `-o EXPR:FILE`, the entries that match (source records, or destination
    /// records for paths only the destination has).
    matched: Vec<FileList>,
}

/// Run `sync` on this rank. Collective: every rank calls it with the same options and gets the
/// same report, or the same [`Error`] when nothing was changed (a usage or setup error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let o = options;
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let link_dest = o.link_dest.as_ref().map(|d| normalize(d, &cwd));
    let checked = check_paths(&o.src, &o.dest, &cwd, link_dest.as_deref(), o.dereference);
    let paths = agree_setup(comm, checked)?;
    if o.state.is_some() {
        let usable = match (o.io.verify, o.dryrun) {
            (false, _) => Err("--state records what --verify verified: give --verify too"),
            (true, true) => Err("--state: a dry run verifies nothing (drop --dryrun or --state)"),
            (true, false) => Ok(()),
        };
        agree_setup(comm, usable.map_err(String::from))?;
    }
    // Lists are written before the sync and the manifest renamed into place after it: inside
    // DEST either would replace a file synced (or be replaced, or deleted by --delete). A dry
    // run writes no tree.
    if !o.dryrun {
        let outputs: Vec<(&str, &[u8])> =
            o.io.manifest
                .iter()
                .map(|m| ("--manifest", &m.path[..]))
                .chain(o.output.iter().map(|out| ("--output", &out.file[..])))
                .chain(o.state.iter().map(|s| ("--state", &s[..])))
                .collect();
        let trees = [("destination", &paths.dest[..])];
        agree_setup(
            comm,
            crate::engine::outputs::refuse_inside(&outputs, &trees),
        )?;
    }
    let started = Instant::now();
    let mut report = Report {
        dryrun: o.dryrun,
        ..Report::default()
    };
    // The state is read before anything changes (and trusted or not for this pair of trees).
    let state = o.state.as_ref().map(|file| {
        let kind = o.io.manifest.as_ref().map(|m| m.kind).unwrap_or_default();
        let scope = state::scope(&paths, o.dereference, kind);
        let loaded = state::load(comm, &o.context, file, &scope);
        (scope, loaded)
    });
    // Beyond the memory limit the lists spill and are paired by a merge join.
    let limit = MemoryLimit::resolve(comm, o.memory_limit);
    let spill_dir = SpillDir::new(o.tmpdir.as_deref());
    if o.memory_limit.is_some() {
        report.memory_limit = Some(limit.describe());
    }
    let spill_to = (limit.bytes, &spill_dir);
    let listed = list(comm, o, &paths, spill_to, &mut report);
    if matches!(listed.lists, Lists::Spilled(..)) {
        report.memory_limit = Some(limit.describe());
    }
    let planned = plan(
        comm,
        o,
        &paths,
        link_dest.as_deref(),
        listed,
        spill_to,
        &mut report,
    );
    if let Some(d) = planned {
        act(comm, o, &paths, d, state, &mut report);
    }
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = o.context.failures();
    Ok(report)
}

/// Both trees listed and filtered: brought to the ranks that compare them, or spilled.
struct Listed {
    lists: Lists,
    map: Mapping,
    dest_map: Mapping,
    /// The source walk was complete: what SRC lacks may be deleted.
    src_complete: bool,
}

/// The walked records, ready to be paired.
// Made once per run and taken apart at once.
#[allow(clippy::large_enum_variant)]
enum Lists {
    /// In memory, each record on the rank its relative path hashes to (`home`).
    InMemory(Table),
    /// Beyond the memory limit: spilled to sorted runs, for the merge join.
    Spilled(spilled::Sides),
    /// The spill failed (named on stderr): nothing may change.
    Failed,
}

/// Both trees' records on the ranks owning their relative paths, hard links grouped.
struct Table {
    src: FileList,
    members: FileList,
    firsts: Vec<(Vec<u8>, Vec<u8>)>,
    dest: FileList,
}

/// The option that keeps the lists in memory beyond the memory limit (its pairing is not out
/// of core yet): what it needs is a list of every entry, or a walk through symlinks.
fn held_in_memory(o: &Options) -> Option<&'static str> {
    if !o.output.is_empty() {
        Some("--output")
    } else if o.state.is_some() {
        Some("--state")
    } else if o.io.manifest.is_some() {
        Some("--manifest")
    } else if o.dereference {
        Some("--dereference")
    } else {
        None
    }
}

/// Phase 2: walk both trees, apply the rules, group hard links and bring every record to the
/// rank its relative path hashes to; beyond `spill_to`'s limit, the lists spill to sorted runs
/// of its directory instead, for the merge join. The walks spill as they go (past a quarter of
/// the limit of records on any rank, as `cmp`'s), unless TMPDIR lies in a tree: then a tree
/// walked into memory is spilled when it outgrows half of the limit (SRC's as soon as it is
/// walked). Collective.
fn list(
    comm: &dyn Comm,
    o: &Options,
    paths: &Paths,
    spill_to: (u64, &SpillDir),
    report: &mut Report,
) -> Listed {
    let (src, dest) = (&paths.src, &paths.dest);
    let trees = (&src[..], &dest[..]);
    let walk_progress = o.context.progress(comm.rank(), "Walked");
    let mut map = Mapping::new(vec![(src.clone(), dest.clone())]);
    if o.dereference {
        map = map.following_sources(); // -L: the walk went through symlinks
    }
    let dest_map = Mapping::new(vec![(dest.clone(), dest.clone())]);
    // Names only for the lists that --output writes.
    let names = !o.output.is_empty();
    // The rules prune both walks: excluded entries are neither compared, copied nor deleted,
    // and an excluded tree is not read.
    let (prune, dest_prune) = (o.rules.pruner(&map), o.rules.pruner(&dest_map));
    let held = held_in_memory(o);
    // Into a DEST that does not exist too: SRC's runs are joined with nothing, and what is
    // created spills with the plan (read back a piece at a time by the copy engine).
    let may_spill = held.is_none();
    let walk_spill = (may_spill
        && crate::cmp::spilled::refuse_tmpdir_inside(spill_to.1.path(), src, dest).is_ok())
    .then_some(WalkSpill {
        limit: spill_to.0,
        dir: spill_to.1,
    });
    let walk = |root: &[u8], dereference: bool, prune: Option<&flist::walk::Visit>| {
        crate::engine::setup::walk_sources_with(
            comm,
            &o.context,
            &[root.to_vec()],
            (dereference, names),
            &walk_progress,
            prune,
            walk_spill,
        )
    };
    let walked = walk(src, o.dereference, prune.as_deref());
    let mut failed = walked.errors.len() as u64;
    let src_complete = walked.complete;
    let mut incomplete = !walked.complete;
    let budget = spill_to.0 / 2;
    let over = |bytes: usize| comm.any(bytes as u64 > budget);
    // SRC spills before DEST is walked: the two lists are never in memory together. (Each
    // branch is taken on every rank: a walk spilled on one rank spilled on all.)
    let mut src_list = FileList::new(Detail::Stat);
    let spilled_src = match walked.spilled {
        Some(runs) => Some(
            runs.map_err(|e| e.to_string())
                .and_then(|runs| spilled::walked_src(comm, runs, src)),
        ),
        None if may_spill && over(walked.list.heap_bytes()) => {
            Some(spilled::spill_src(comm, walked.list, trees, spill_to))
        }
        None => {
            src_list = walked.list;
            None
        }
    };
    let mut dest_list = FileList::new(Detail::Stat);
    let mut spilled_dest = None;
    if paths.dest_exists {
        let walked = walk(dest, false, dest_prune.as_deref());
        failed += walked.errors.len() as u64;
        incomplete |= !walked.complete;
        match walked.spilled {
            Some(runs) => {
                spilled_dest = Some(
                    runs.map(|runs| runs.into_join_side(dest))
                        .map_err(|e| e.to_string()),
                )
            }
            None => dest_list = walked.list,
        }
    }
    drop((prune, dest_prune)); // they borrow the mappings
    report.list_failed = comm.sum(failed);
    report.list_incomplete = comm.any(incomplete);
    let beyond = || over(src_list.heap_bytes() + dest_list.heap_bytes());
    let lists = if spilled_src.is_some() || spilled_dest.is_some() || (may_spill && beyond()) {
        let src_side =
            spilled_src.unwrap_or_else(|| spilled::spill_src(comm, src_list, trees, spill_to));
        let sides = src_side.and_then(|(src, links)| {
            let dest = match spilled_dest {
                Some(side) => side?,
                None => spilled::spill(comm, dest_list, dest, trees, spill_to)?,
            };
            Ok(spilled::Sides { src, dest, links })
        });
        match sides {
            Ok(sides) => Lists::Spilled(sides),
            Err(e) => {
                if comm.rank() == 0 {
                    o.context.error(e);
                }
                report.spill_failed = true;
                Lists::Failed
            }
        }
    } else {
        if let Some(option) = held.filter(|_| beyond()) {
            // A warning, not a failure: the sync is done as below the limit (and the
            // message stays out of the report's failures).
            if comm.rank() == 0 {
                o.context.events.error(&format!(
                    "--memory-limit: {option} holds the lists in memory (beyond the limit of \
                     {} per rank)",
                    flist::units::human_bytes(spill_to.0)
                ));
            }
        }
        Lists::InMemory(table(comm, o, src_list, dest_list, &map, &dest_map))
    };
    Listed {
        lists,
        map,
        dest_map,
        src_complete,
    }
}

/// Group SRC's hard links and bring every record to the rank its relative path hashes to.
/// Collective.
fn table(
    comm: &dyn Comm,
    o: &Options,
    src_list: FileList,
    dest_list: FileList,
    map: &Mapping,
    dest_map: &Mapping,
) -> Table {
    let groups = if o.dereference {
        links::Groups {
            list: src_list,
            members: FileList::new(Detail::Stat),
            links: Vec::new(),
        }
    } else {
        links::group(comm, src_list)
    };
    let size = comm.size();
    Table {
        src: bring_home(comm, groups.list, map),
        members: bring_home(comm, groups.members, map),
        firsts: exchange_pairs(comm, groups.links, |(_, m)| home(map.rel(m), size)),
        dest: bring_home(comm, dest_list, dest_map),
    }
}

/// Phase 3: compare and plan; name the type conflicts, refuse `delete` after an incomplete
/// source walk, write the `output` lists. Collective.
fn plan(
    comm: &dyn Comm,
    o: &Options,
    paths: &Paths,
    link_dest: Option<&[u8]>,
    l: Listed,
    spill_to: (u64, &SpillDir),
    report: &mut Report,
) -> Option<Planned> {
    let rank0 = comm.rank() == 0;
    let context = &o.context;
    let Listed {
        lists,
        map,
        dest_map,
        src_complete,
    } = l;
    let empty = FileList::new(Detail::Stat);
    // The lists are the table's in memory; the merge join streams its records instead.
    let streamed = Inputs {
        src: &empty,
        members: &empty,
        firsts: &[],
        dest: &empty,
        map: &map,
        dest_map: &dest_map,
        dest_root: &paths.dest,
        link_dest,
        dest_dev: paths.dest_dev,
        dest_roots: &paths.roots,
        delete_allowed: src_complete,
        args: o,
    };
    let (d, pairs) = match lists {
        Lists::InMemory(t) => {
            let inputs = Inputs {
                src: &t.src,
                members: &t.members,
                firsts: &t.firsts,
                dest: &t.dest,
                ..streamed
            };
            let d = decide(comm, &inputs);
            from_table(o, paths, &map, t, d)
        }
        Lists::Spilled(sides) => match spilled::decide(comm, &streamed, sides, spill_to) {
            // What is created was streamed into the plan; no option that needs the lists
            // (--manifest, --state) takes this path.
            Ok((d, spilled)) => {
                report.spilled = Some(spilled);
                (d, None)
            }
            Err(e) => {
                if rank0 {
                    context.error(e);
                }
                report.spill_failed = true;
                return None;
            }
        },
        Lists::Failed => return None,
    };
    // Everything below acts on what was listed; the race tests change the trees here.
    crate::engine::test_seam::after_listing(comm);
    for c in &d.conflicts {
        context.error(format_args!(
            "{}: not replaced: SRC has a {} here, DEST a {} (sync removes nothing without \
             -D/--delete); nothing beneath it was synced",
            flist::path::display(&c.dest),
            kind_word(c.src_kind),
            kind_word(c.dest_kind)
        ));
    }
    report.conflicts = comm.sum(d.conflicts.len() as u64);
    // Never delete on the word of a partial walk (mpiFileUtils #587).
    report.refused_deletes = comm.sum(d.refused_deletes);
    if report.refused_deletes > 0 || (o.delete && !src_complete) {
        report.delete_refused = true;
        if rank0 {
            context.error(format!(
                "--delete refused: the source walk was incomplete (errors above); {} \
                 destination entries that SRC may still have were kept",
                report.refused_deletes
            ));
        }
    }
    for (out, list) in o.output.iter().zip(&d.matched) {
        let format = flist::io::default_format(list);
        if let Err(e) = flist::io::write(comm, list, &out.file, format) {
            if rank0 {
                context.error(e);
            }
            report.output_failed = true;
        }
    }
    report.output_failed = comm.any(report.output_failed);
    Some(Planned { d, map, pairs })
}

/// Complete the plan `d` decided from the table `t` in memory: what is created is taken from
/// the lists (all of the source list, in a sync into an empty DEST, is moved, not copied),
/// with `--manifest` the files hashed without being copied, with `--state` every regular
/// file of SRC and whether the plan copies it.
fn from_table(
    o: &Options,
    paths: &Paths,
    map: &Mapping,
    t: Table,
    mut d: Decisions,
) -> (Decisions, Option<Vec<state::Pair>>) {
    let [from_src, from_members] = std::mem::take(&mut d.create_from);
    let Table { src, members, .. } = t;
    match &o.io.manifest {
        Some(m) if m.all => {
            d.plan.hash_only = left_as_they_are(&src, &from_src, &members, &from_members, &d.plan)
        }
        // A --link-dest link is a file this sync puts in DEST without reading it: hashed from
        // SRC for the manifest, as a copy's bytes are (and its group's other members, linked
        // to it, get its digest).
        Some(_) => d.plan.hash_only = linked_outside(&src, &members, &d.plan),
        None => {}
    }
    let pairs = o.state.as_ref().map(|_| {
        let lists = [(&src, &from_src[..]), (&members, &from_members[..])];
        // A hard link made this run to a file copied this run has that file's bytes.
        let linked = d.plan.links.iter().map(|(_, m)| m.as_slice()).collect();
        state::pairs(lists, &linked, map, &state::base(paths))
    });
    d.plan.create = take_records(src, &from_src);
    d.plan
        .create
        .append(members.select(from_members.iter().map(|&i| i as usize)));
    (d, pairs)
}

/// The plan of this rank and the mapping it copies through.
struct Planned {
    d: Decisions,
    map: Mapping,
    /// With `--state`: this rank's regular files ([`state::pairs`]).
    pairs: Option<Vec<state::Pair>>,
}

/// Phase 4: a dry run sends its actions as output and counts them; a real run removes, copies
/// and counts what happened. Collective.
fn act(
    comm: &dyn Comm,
    o: &Options,
    paths: &Paths,
    p: Planned,
    state: Option<(verify_state::Scope, verify_state::Loaded)>,
    report: &mut Report,
) {
    let Planned { d, map, pairs } = p;
    let context = &o.context;
    let rank0 = comm.rank() == 0;
    let mut counts = [0u64; 6];
    for a in d.actions.kinds() {
        counts[a as usize] += 1;
    }
    counts[5] = d.bytes;
    comm.allreduce(&mut counts, ReduceOp::Sum);
    report.planned = counts[..5].iter().sum();
    report.planned_bytes = counts[5];
    if let Journals::Planned(resumes) = &d.plan.journals {
        let mut planned = [
            resumes.len() as u64,
            resumes.values().map(Resumable::bytes).sum(),
        ];
        comm.allreduce(&mut planned, ReduceOp::Sum);
        [report.resumed, report.resumed_bytes] = planned;
    }
    if o.dryrun {
        dry_run(comm, context, &d.actions, counts, report);
        return;
    }
    // Removals reach entries from the DEST root, opened before its walk, without following
    // symlinks: a directory swapped for a symlink since the walk is not followed out of DEST
    // (nor is DEST itself, swapped after this).
    let (src, dest) = (&paths.src, &paths.dest);
    let remover = |verb| {
        let mut r = Remover::new(paths.roots.clone(), Wording::Reach);
        r.keep_nonempty = true;
        r.progress = context.progress(comm.rank(), verb);
        r
    };
    let (deleting, unlinking) = (remover("Deleted"), remover("Unlinked"));
    let mut interrupted = remove(comm, &d.delete, &deleting, &context.stop);
    interrupted |= remove(comm, &d.unlink_first, &unlinking, &context.stop);
    let removed = deleting.take_errors();
    let unlinked = unlinking.take_errors();
    let unreplaced = still_dirs(&paths.roots, &d.replaced_dirs);
    for e in removed.iter().chain(&unlinked).chain(&unreplaced) {
        context.error(e);
    }
    let mut journal_errors = 0u64;
    for (dst, src) in &d.stale_journals {
        let jpath = journal::path_of(dst);
        let gone = paths
            .roots
            .at(&jpath)
            .and_then(|j| journal::remove(&j, src));
        if let Err(e) = gone {
            context.error(flist::ItemError::new(&jpath, "remove journal", e));
            journal_errors += 1;
        }
    }
    if context.verbose && rank0 {
        let secs = paths.started.elapsed().as_secs_f64();
        context.info(format!("Planned in {secs:.3} s\n"));
    }
    let Decisions {
        mut plan, actions, ..
    } = d;
    // A file that kept its old inode must not be written in place, and a directory that is
    // still there is not replaced: leave both as they are.
    leave_alone(&mut plan, &map, unlinked.iter().chain(&unreplaced));
    let (io, internal) = copy_io(o, paths, state.is_some());
    let (copied, _, checked) = crate::engine::copy::drive::copy_checked(
        comm,
        context,
        plan,
        &map,
        &io,
        "run `mfu-rs sync SRC DEST` to finish it",
    );
    let remove_errors =
        comm.sum((removed.len() + unlinked.len() + unreplaced.len()) as u64 + journal_errors);
    report.failed = copied.total_errors + remove_errors;
    report.skipped = copied.skipped;
    report.interrupted = copied.interrupted || comm.any(interrupted);
    if copied.interrupted && rank0 {
        context.error("interrupted by a signal: rerun the same sync to finish");
    }
    // Each action is counted once it has happened: those whose entry failed are not, nor
    // fixes of a project ID alone that DEST's file system could not keep.
    let failed = failed_paths(
        comm,
        copied
            .errors
            .iter()
            .chain(&unlinked)
            .chain(&unreplaced)
            .map(|e| &e.path[..])
            .chain(copied.unmade.iter().map(|p| &p[..])),
        src,
        dest,
    );
    let ([created, updated, deleted, meta, linked], unread) =
        done(comm, context, &actions, &failed, &deleting);
    report.failed += unread;
    // Made, fixed or removed by the engines, or failed: what happened, even when stopped.
    let happened = copied.dirs
        + copied.files
        + copied.symlinks
        + copied.hardlinks
        + copied.others
        + copied.meta_fixed
        + copied.compare_meta
        + comm.sum(copied.unmade.len() as u64)
        + deleted
        + report.failed;
    report.handled = happened.min(report.planned);
    // Compared files (--contents) are counted by what the engine found.
    report.created = created;
    report.updated = updated + copied.rewritten;
    report.deleted = deleted;
    report.meta_fixed = meta + copied.compare_meta;
    report.linked = linked;
    report.bytes = copied.bytes;
    report.resumed = copied.resumed;
    report.resumed_bytes = copied.resumed_bytes;
    report.verify = checked.verify;
    let mut entries = checked.manifest;
    let digests = match (&state, internal) {
        (None, _) => Vec::new(),
        (Some(_), true) => entries.take().unwrap_or_default(),
        (Some(_), false) => entries.clone().unwrap_or_default(),
    };
    if let (Some(m), Some(entries)) = (&io.manifest, entries) {
        let ok = report.status() == Status::Ok;
        report.manifest = Some(crate::engine::manifest::publish(
            comm, context, m, entries, ok,
        ));
    }
    if let (Some((scope, loaded)), Some(file)) = (state, &o.state) {
        let finish = state::Finish {
            path: file,
            scope,
            loaded,
            pairs: pairs.unwrap_or_default(),
            failed: &failed,
            digests,
            interrupted: report.interrupted,
        };
        let (summary, stopped) = state::finish(comm, context, paths, &map, finish);
        report.interrupted |= stopped;
        report.state = Some(summary);
    }
}

/// A dry run's output: each planned action and its path, rank by rank, and its counts.
/// Collective.
fn dry_run(
    comm: &dyn Comm,
    context: &Context,
    actions: &Actions,
    counts: [u64; 6],
    report: &mut Report,
) {
    let mut text = Vec::new();
    let listed = actions.each(|a, path| {
        text.extend_from_slice(a.word());
        text.push(b' ');
        text.extend_from_slice(path);
        text.push(b'\n');
    });
    in_rank_order(comm, text, |b| context.output(b));
    if let Err(e) = &listed {
        context.error(e);
    }
    report.failed += comm.sum(u64::from(listed.is_err()));
    let [created, updated, deleted, meta, linked, bytes] = counts;
    (report.created, report.updated, report.deleted) = (created, updated, deleted);
    (report.meta_fixed, report.linked, report.bytes) = (meta, linked, bytes);
}

/// The copy's I/O options: the command line's, the manifest's paths relative to DEST (or to
/// DEST's directory, when one file is synced). With `--state` and no `--manifest`, an internal
/// manifest (true) makes the digests of what is copied as a manifest's are; it is never
/// written.
fn copy_io(o: &Options, paths: &Paths, state: bool) -> (IoOptions, bool) {
    let mut io = o.io.clone();
    let internal = state && io.manifest.is_none();
    if internal {
        io.manifest = Some(crate::engine::manifest::ManifestOptions::new(
            b"",
            crate::engine::digest::HashKind::Blake3,
        ));
    }
    if let Some(m) = &mut io.manifest {
        // A single file synced to DEST: its name, beside DEST's other entries.
        m.base = state::base(paths);
    }
    (io, internal)
}

/// The actions that happened, by kind (all but those whose entry failed, at the `failed`
/// destination paths; deletions as the remover counted them), summed over ranks. Actions
/// spilled that cannot be read back are not counted, and the failure is named (and counted,
/// the second value, over ranks). Collective.
fn done(
    comm: &dyn Comm,
    context: &Context,
    actions: &Actions,
    failed: &std::collections::HashSet<Vec<u8>>,
    deleting: &Remover,
) -> ([u64; 5], u64) {
    let mut done = [0u64; 5];
    let mut unread = 0;
    if failed.is_empty() {
        for a in actions.kinds() {
            done[a as usize] += 1;
        }
    } else {
        let read = actions.each(|a, path| {
            if !failed.contains(path) {
                done[a as usize] += 1;
            }
        });
        if let Err(e) = read {
            context.error(e);
            unread = 1;
        }
    }
    done[Action::Delete as usize] = deleting.files.load(std::sync::atomic::Ordering::Relaxed)
        + deleting.dirs.load(std::sync::atomic::Ordering::Relaxed);
    comm.allreduce(&mut done, ReduceOp::Sum);
    (done, comm.sum(unread))
}

/// SRC and DEST as the sync uses them, after [`check_paths`].
struct Paths {
    /// The source: a directory (its contents are synced) or a single entry.
    src: Vec<u8>,
    /// The destination of `src` itself.
    dest: Vec<u8>,
    /// `dest` exists (and is a directory when `src` is one).
    dest_exists: bool,
    /// The device (`st_dev`) of the file system new entries of DEST land on: DEST's, or its
    /// parent's when DEST does not exist yet.
    dest_dev: u64,
    /// DEST's root, opened before its walk: removals reach entries beneath it.
    roots: std::sync::Arc<flist::beneath::Roots>,
    /// When the setup ended.
    started: Instant,
}

/// Check SRC, DEST and --link-dest and settle what they mean (rsync's rules):
///
/// - a SRC that is a symlink to a directory is synced as that directory (`rsync -a SRC/
///   DEST/`), never as a symlink that replaces DEST;
/// - a SRC that is not a directory goes into DEST when DEST is a directory (`rsync -a FILE
///   DIR`: `DIR/FILE`), and is DEST otherwise; `DEST/` with a trailing slash must then be an
///   existing directory.
///
/// Errors are usage errors (exit 2, nothing changed).
fn check_paths(
    src_arg: &[u8],
    dest_arg: &[u8],
    cwd: &[u8],
    link_dest: Option<&[u8]>,
    follow: bool,
) -> Result<Paths, String> {
    let show = flist::path::display;
    let mut src = normalize(src_arg, cwd);
    let mut dest = normalize(dest_arg, cwd);
    let st = stat_path(&src, follow)
        .map_err(|e| format!("stat {}: {}", show(&src), std::io::Error::from(e)))?;
    let mut src_is_dir = FileType::from_mode(st.st_mode) == FileType::Dir;
    if FileType::from_mode(st.st_mode) == FileType::Symlink && crate::engine::setup::is_dir(&src) {
        // The user named a link to a directory as the tree to sync: sync that tree.
        let real = std::fs::canonicalize(flist::path::as_path(&src))
            .map_err(|e| format!("resolve {}: {e}", show(&src)))?;
        src = real.into_os_string().into_vec();
        src_is_dir = true;
    }
    if !src_is_dir {
        if crate::engine::setup::is_dir(&dest) {
            let name = flist::path::basename(&src);
            dest = [dest.as_slice(), b"/", name].concat();
            if dest.starts_with(b"//") {
                dest.remove(0);
            }
        } else if dest_arg.ends_with(b"/") {
            return Err(format!(
                "{}: not a directory (a trailing / asks for an existing directory to copy {} into)",
                show(dest_arg),
                show(&src)
            ));
        }
    }
    if src_is_dir && (is_prefix(&src, &dest) || is_prefix(&dest, &src)) {
        return Err(format!(
            "{} and {} overlap: one is inside the other",
            show(&src),
            show(&dest)
        ));
    }
    let (dest_exists, dest_dev) = match stat_path(&dest, false) {
        Ok(d) => {
            if src_is_dir && FileType::from_mode(d.st_mode) != FileType::Dir {
                return Err(format!("{} is not a directory", show(&dest)));
            }
            (true, d.st_dev)
        }
        Err(_) => {
            crate::engine::setup::check_parent(&dest)?;
            let parent = stat_path(flist::path::parent(&dest), true)
                .map_err(|e| format!("stat {}: {}", show(&dest), std::io::Error::from(e)))?;
            (false, parent.st_dev)
        }
    };
    if let Some(l) = link_dest {
        if !crate::engine::setup::is_dir(l) {
            return Err(format!("--link-dest {}: not a directory", show(l)));
        }
    }
    let roots = std::sync::Arc::new(flist::beneath::Roots::open_dirs([dest.as_slice()]));
    Ok(Paths {
        src,
        dest,
        dest_exists,
        dest_dev,
        roots,
        started: Instant::now(),
    })
}

/// True when the DEST entry at `path` (not followed) is the inode `d` describes: the same
/// device and inode number.
fn same_inode(path: &[u8], d: &Meta) -> bool {
    stat_path(path, false).is_ok_and(|st| st.st_dev == d.dev && st.st_ino == d.ino)
}

/// Whether an interrupted copy's journal lies beside the destination file `dst` (trusted or
/// not: either way the file's data is incomplete).
/// A journal's name that a source entry has too holds the user's synced file, not a journal.
fn has_journal(roots: &flist::beneath::Roots, map: &Mapping, dst: &[u8]) -> bool {
    let jpath = journal::path_of(dst);
    roots.at(&jpath).is_ok_and(|j| j.lstat().is_ok()) && !users_name(map, dst)
}

/// Whether the name of the journal of `dst` is a source entry's ([`resume::users_name`]).
fn users_name(map: &Mapping, dst: &[u8]) -> bool {
    resume::users_name(map, dst, |s| {
        flist::walk::stat_path(s, false)
            .map(|_| ())
            .map_err(std::io::Error::from)
    })
}

/// What the journal beside the destination `dst` of `src` (walked as `m`) lets a rerun keep,
/// when it can be trusted.
fn resumable(
    roots: &flist::beneath::Roots,
    map: &Mapping,
    dst: &[u8],
    src: &[u8],
    m: &Meta,
) -> Option<Resumable> {
    if users_name(map, dst) {
        return None;
    }
    let jpath = journal::path_of(dst);
    let (d, j) = (roots.at(dst).ok()?, roots.at(&jpath).ok()?);
    match journal::probe(&d, &j, src, SourceId::of(m)) {
        Found::Trusted(r) => Some(r),
        Found::Stale | Found::Nothing => None,
    }
}

/// `--manifest-all`: the regular files of the source and members lists that the plan neither
/// creates (`created` indices, ascending), compares nor links, hashed for the manifest.
fn left_as_they_are(
    src: &FileList,
    created: &[u32],
    members: &FileList,
    created_members: &[u32],
    plan: &Plan,
) -> FileList {
    let compared: std::collections::HashSet<&[u8]> = plan.compare.iter().map(|e| e.path).collect();
    let linked: std::collections::HashSet<&[u8]> =
        plan.links.iter().map(|(_, m)| m.as_slice()).collect();
    let mut out = src.empty_like();
    for (list, made) in [(src, created), (members, created_members)] {
        let mut made = made.iter().peekable();
        for i in 0..list.len() {
            if made.next_if(|&&m| m as usize == i).is_some() {
                continue;
            }
            let e = list.entry(i);
            if e.kind == FileType::File && !compared.contains(e.path) && !linked.contains(e.path) {
                out.push(e.path, e.kind, e.meta);
            }
        }
    }
    out
}

/// The records of the source and members lists that the plan links into `--link-dest`'s
/// directory ([`Plan::external_links`]), hashed for the manifest.
fn linked_outside(src: &FileList, members: &FileList, plan: &Plan) -> FileList {
    let linked: std::collections::HashSet<&[u8]> = plan
        .external_links
        .iter()
        .map(|(_, m)| m.as_slice())
        .collect();
    let mut out = src.empty_like();
    for list in [src, members] {
        for e in list.iter().filter(|e| linked.contains(e.path)) {
            out.push(e.path, e.kind, e.meta);
        }
    }
    out
}

/// The records of `list` at `indices` (ascending): the list itself when that is all of them.
fn take_records(list: FileList, indices: &[u32]) -> FileList {
    if indices.len() == list.len() {
        list
    } else {
        list.select(indices.iter().map(|&i| i as usize))
    }
}

/// Take out of `plan` the entries to create at the DEST paths of `errors`.
fn leave_alone<'a>(
    plan: &mut Plan,
    map: &Mapping,
    errors: impl Iterator<Item = &'a flist::ItemError>,
) {
    let kept: std::collections::HashSet<&[u8]> = errors.map(|e| e.path.as_slice()).collect();
    if kept.is_empty() {
        return;
    }
    let create = &plan.create;
    plan.create = create
        .select((0..create.len()).filter(|&i| !kept.contains(map.dest(create.path(i)).as_slice())));
    // What was spilled is left out as it is read back.
    if plan.create_more.is_some() {
        plan.left_alone = kept.iter().map(|p| p.to_vec()).collect();
    }
}

/// The directories of `dirs` (DEST directories a source entry of another type replaces) that
/// are still directories after the removals: the remover keeps a directory that still holds
/// entries, those the sync's rules exclude (not deleted, as rsync), made since the walk, or
/// whose removal failed (named by the remover).
/// Each is an error naming it; its new entry is not made (rsync: "cannot delete non-empty
/// directory", exit 23).
fn still_dirs(roots: &flist::beneath::Roots, dirs: &[Vec<u8>]) -> Vec<flist::ItemError> {
    dirs.iter()
        .filter(|dir| {
            roots
                .at(dir)
                .and_then(|a| a.lstat())
                .is_ok_and(|st| FileType::from_mode(st.st_mode) == FileType::Dir)
        })
        .map(|dir| {
            let why = std::io::Error::new(
                std::io::ErrorKind::DirectoryNotEmpty,
                "it still holds entries (excluded from the sync, made since its walk, or \
                 not removed: see above); left as it is, SRC's entry of another type not synced",
            );
            flist::ItemError::new(dir, "replace directory", why)
        })
        .collect()
}

/// The destination paths of items that did not happen (failed, or a fix that could not be
/// made), on the rank that planned them (the home of their path relative to DEST), for
/// counting only what happened. `paths` are source or destination paths. Collective.
fn failed_paths<'a>(
    comm: &dyn Comm,
    paths: impl Iterator<Item = &'a [u8]>,
    src: &[u8],
    dest: &[u8],
) -> std::collections::HashSet<Vec<u8>> {
    let size = comm.size();
    let mut sends = vec![Vec::new(); size];
    for p in paths {
        let Some(rel) = beneath(src, p).or_else(|| beneath(dest, p)) else {
            continue;
        };
        let path = if rel.is_empty() {
            dest.to_vec()
        } else {
            [dest, b"/", rel].concat()
        };
        steal::typed::encode_into(serde_bytes::Bytes::new(&path), &mut sends[home(rel, size)]);
    }
    let mut failed = std::collections::HashSet::new();
    for bytes in comm.alltoallv(sends) {
        for path in steal::typed::each::<&serde_bytes::Bytes>(&bytes) {
            failed.insert(steal::typed::sent(path).to_vec());
        }
    }
    failed
}

/// `path` relative to `root` (`""` for the root itself) when it is or lies beneath it.
fn beneath<'a>(root: &[u8], path: &'a [u8]) -> Option<&'a [u8]> {
    if !is_prefix(root, path) {
        return None;
    }
    let rest = &path[root.len().min(path.len())..];
    Some(rest.strip_prefix(b"/").unwrap_or(rest))
}

/// A type's name for messages.
fn kind_word(kind: FileType) -> &'static str {
    match kind {
        FileType::Dir => "directory",
        FileType::File => "regular file",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharDev | FileType::BlockDev => "device",
        FileType::Unknown => "file of unknown type",
    }
}

/// How each field of a source entry and its destination compare (for `-o`): CONTENT of
/// same-size files by mtime, or, with `--contents`, by reading both.
fn pair_states(src: &[u8], dst: &[u8], s: &Meta, d: &Meta, contents: bool) -> States {
    let c = pairing::pair_states(src, dst, s, d);
    let mut states = c.states;
    if c.needs_data {
        let differs = if contents {
            contents_differ(src, dst).unwrap_or(true)
        } else {
            (s.mtime, s.mtime_nsec) != (d.mtime, d.mtime_nsec)
        };
        states.differ_if(Field::Content, differs);
    }
    states
}
