//! `mfu-rs rm` (drm): remove files and trees in parallel.
//!
//! The phases, each collective:
//! 1. list: walk the PATHs (lite by default) or read `--input`; with `--aggressive` the walk
//!    unlinks selected non-directories as it reads their directory, so they are never listed;
//! 2. select: `--match` / `--exclude`; the ancestors of every entry that stays (not selected,
//!    or failed) are remembered, because a directory holding one cannot go;
//! 3. unlink the selected non-directories over all ranks with work stealing (progress with ETA);
//! 4. decide which selected directories stay (one hash-partitioned exchange), then `rmdir` the
//!    others bottom-up, one depth level at a time;
//! 5. `-T`: put back the times of the parent directories that remain; `-o`: write the list of
//!    what was removed.
//!
//! Paths of any length work: a path too long for one system call is reached through its
//! parent's descriptor, opened piece by piece ([`flist::walk::open_long`]).
//!
//! `rm -i LIST` of a v3/v4 list file larger than `--memory-limit` removes it a piece at a
//! time instead (the `stream` module).
//!
//! The tree may change between the listing and the removal (a directory swapped for a symlink
//! to anywhere). Every entry is reached from a root's descriptor without following symlinks
//! ([`flist::beneath`]) and removed with `unlinkat` in its parent: the roots are the PATHs
//! (opened before the walk), or for `--input` the parents of the list's topmost entries
//! (entries with no ancestor in the list, [`list_tops`]), whose own paths are trusted as
//! PATHs typed on the command line would be. An entry whose path changed is named, and stays.
//! A non-directory is removed by its name without a type check (as GNU `rm -r` does; a check
//! would cost a stat per file): a symlink swapped in for a listed file is removed as the link
//! it is, never followed.

use crate::engine::batches::run_batches;
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::input::{Input, Listed};
use crate::engine::locks::lock;
use crate::engine::regex_select::RegexSelector;
use crate::engine::remove::{add_ancestors, in_parent, Remover, Wording};
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use flist::beneath::{list_tops, Roots};
use flist::distribute::{hash_path, remap, spread};
use flist::io::{self, Format};
use flist::parent_dir::ParentDir;
use flist::path::{display, normalize, parent};
use flist::record::Entry;
use flist::restat::{restat, Which};
use flist::walk::{walk, Visit, WalkOptions};
use flist::{Detail, FileList, FileType, ItemError, Meta};
use rustix::fd::BorrowedFd;
use rustix::fs::AtFlags;
use rustix::io::Errno;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::{Comm, CommExt};

mod stream;

pub use stream::RmSpill;

/// What `rm` removes and how. [`Options::new`] gives the command line's defaults.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Files and directories to remove (directories with everything below them; `/` is
    /// refused), or the list of what to remove instead (v3/v4 cache, `path|T` text, one path
    /// per line, or NUL-separated; `-` = stdin; or in memory). Directories of a list are
    /// removed only if the list also names everything they hold.
    pub input: Input,
    /// Write the list of what was removed (with `dryrun`: of what would be) to this file
    /// (`-`: stdout).
    pub output: Option<Vec<u8>>,
    /// With `output`, write the text format (`path|T` per line) even for a stat list.
    pub text: bool,
    /// Stat every entry while walking (so that `output` is a v4 list with metadata); default:
    /// names and types only.
    pub stat: bool,
    /// Keep entries whose path (relative to its PATH) matches this regex.
    pub exclude: Option<String>,
    /// Remove only entries whose path (relative to its PATH) matches this regex.
    pub matching: Option<String>,
    /// Apply `matching` and `exclude` to the last path component instead.
    pub name: bool,
    /// Plan only: every path that would go is sent as output, nothing changes.
    pub dryrun: bool,
    /// Unlink files while walking, as soon as their directory is read.
    pub aggressive: bool,
    /// Restore the access and modification times of the parent directories that remain.
    pub traceless: bool,
    /// Do not descend into directories on another file system than their PATH.
    pub one_file_system: bool,
    /// With a v3/v4 `input` file: bytes of memory a rank may hold for the list. A list one of
    /// whose ranks' shares takes more than half of it is removed a piece at a time (its
    /// directories spill to `tmpdir` by depth until they are removed, deepest first).
    /// `None`: the default of [`flist::spill::MemoryLimit::resolve`].
    pub memory_limit: Option<u64>,
    /// Where spill files go (`None`: `$TMPDIR`, else `/tmp`).
    pub tmpdir: Option<Vec<u8>>,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Remove `paths` (and everything below them) with the command line's defaults.
    pub fn new<S: AsRef<[u8]>>(paths: &[S]) -> Options {
        Options {
            input: Input::paths(paths),
            ..Options::default()
        }
    }
}

/// What an `rm` run removed (or, with `dryrun`, would remove): counts summed over all ranks.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The run only planned (`dryrun`).
    pub dryrun: bool,
    /// Entries selected for removal (0 when the listing was cut short): what a stopped run's
    /// `done` counts towards.
    pub selected: u64,
    /// Non-directories removed.
    pub files: u64,
    /// Directories removed.
    pub dirs: u64,
    /// A selection (`matching`/`exclude`) was in force.
    pub selective: bool,
    /// Selected directories kept because they hold entries not selected.
    pub kept: u64,
    /// Entries that could not be removed (each named).
    pub failed: u64,
    /// Selected directories left because they hold entries that failed.
    pub held: u64,
    /// Entries that could not be listed (walk errors, listed names that do not exist).
    pub list_failed: u64,
    /// Other failures (times of parent directories with `traceless`).
    pub other_failed: u64,
    /// The `output` list could not be written.
    pub output_failed: bool,
    /// With a list file: the memory limit per rank, described (`--memory-limit`).
    pub memory_limit: Option<String>,
    /// The list outgrew the memory limit and was removed a piece at a time: what spilled.
    pub spilled: Option<RmSpill>,
    /// Where spill files went (with `spilled`).
    pub tmpdir: Option<String>,
    /// Removing a list piece by piece failed as a whole (a full TMPDIR, the list unreadable
    /// midway; named): what was not reached stays.
    pub spill_failed: bool,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// A stop request cut the run short.
    pub interrupted: bool,
    /// This process's sample of the failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.files + self.dirs,
            bytes: 0,
            failed: self.failed + self.list_failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        let other =
            self.list_failed + self.other_failed > 0 || self.output_failed || self.spill_failed;
        let other = if other {
            Status::ItemsFailed
        } else {
            Status::Ok
        };
        other.worst(Status::of_work(self.failed, 0, self.interrupted))
    }
    /// Entries removed or failed of those selected: a rerun of the same rm finds only what is
    /// left.
    fn stopped(&self) -> Option<Stopped> {
        self.interrupted.then(|| Stopped {
            done: (self.files + self.dirs + self.failed).min(self.selected),
            total: self.selected,
            what: "entries",
        })
    }
}

/// Run `rm` on this rank. Collective: every rank calls it with the same options and gets the
/// same report, or the same [`Error`] when nothing was removed (a usage error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let args = options;
    let context = &args.context;
    let stop: &AtomicBool = &context.stop;
    let timing = |msg: &str| timing(comm, args, msg);
    // Check every argument before touching the file system.
    let checked = check(args);
    let (selector, cwd, roots) = agree_setup(comm, checked)?;
    // Opened before the walk, so that what is removed is reached from the directories walked.
    let opened = Arc::new(Roots::open_dirs(roots.iter().map(|r| r.as_slice())));
    let started = Instant::now();
    let mut engine = Remover::new(opened.clone(), Wording::Explained);
    engine.removed = args
        .output
        .as_ref()
        .map(|_| Mutex::new(FileList::new(Detail::Lite)));
    let mut rm = Rm {
        engine,
        selector: selector.relative_to(roots.iter().cloned()),
        devices: if args.one_file_system {
            devices(&opened)
        } else {
            Vec::new()
        },
        other_errors: Mutex::new(Vec::new()),
        other_failed: 0,
        list_failed: 0,
        selected: 0,
        parent_times: (args.aggressive && args.traceless).then(|| Mutex::new(HashMap::new())),
        memory_limit: None,
        spilled: None,
        tmpdir: None,
        spill_failed: false,
    };

    // 0. A list file larger than the memory limit is removed a piece at a time.
    match stream::plan(comm, args)? {
        stream::Plan::Stream(share, limit) => {
            let interrupted = stream::run(comm, args, &mut rm, *share, limit, &cwd)?;
            return Ok(rm.end(comm, args, interrupted, started));
        }
        stream::Plan::InMemory(limit) => rm.memory_limit = limit,
    }

    // 1. The candidates, and the failures that leave entries in place.
    let t = Instant::now();
    let (mut list, list_errors, mut interrupted) =
        agree_setup(comm, candidates(comm, args, &rm, &roots, &cwd, stop))?;
    if args.input.is_list() {
        let tops = list_tops(comm, list.iter().map(|e| e.path));
        rm.engine.roots = Arc::new(Roots::of_list_tops(&tops));
        rm.selector = std::mem::take(&mut rm.selector).relative_to(tops);
    }
    crate::engine::test_seam::after_listing(comm);
    let listed = comm.sum(list.len() as u64);
    let what = if args.input.is_list() {
        "Read"
    } else {
        "Walked"
    };
    timing(&format!(
        "{what} {listed} items in {:.3} s",
        t.elapsed().as_secs_f64()
    ));
    if let Some(removed) = &mut rm.engine.removed {
        if !args.aggressive {
            // Same detail and id tables as the list, so that -o can write v4.
            *removed.get_mut().expect("removed list") = list.empty_like();
        }
    }
    // Entries that stay make their ancestors stay: `kept` for unselected entries, `blocked`
    // for entries that failed (whose failure is reported once, not again for every ancestor).
    let mut kept = HashSet::new();
    let mut blocked = HashSet::new();
    rm.list_failed = list_errors.len() as u64;
    rm.report(context, list_errors, &mut blocked);
    if interrupted {
        return Ok(rm.end(comm, args, true, started));
    }
    if rm.selector.active() {
        for e in list.iter().filter(|e| !rm.selector.selects(*e)) {
            add_ancestors(&mut kept, e.path);
        }
        list.retain(|e| rm.selector.selects(e));
        timing(&format!(
            "Selected {} of {listed} items",
            comm.sum(list.len() as u64)
        ));
    }
    rm.engine.keep_nonempty = rm.selector.active();
    let mut dirs = list.empty_like();
    list.retain(|e| {
        if e.kind == FileType::Dir {
            dirs.push(e.path, e.kind, e.meta);
        }
        e.kind != FileType::Dir
    });
    let files = list;
    if args.dryrun {
        let dirs = holders(comm, dirs, &kept, &blocked);
        rm.dry_run(comm, context, &files, dirs);
        return Ok(rm.end(comm, args, false, started));
    }

    // 2. Parents' times, before anything in them changes (-T).
    let parents = args.traceless.then(|| {
        let t = Instant::now();
        let parents = rm.parent_times(comm, &files, &dirs);
        timing(&format!(
            "Recorded times of {} parent directories in {:.3} s",
            comm.sum(parents.len() as u64),
            t.elapsed().as_secs_f64()
        ));
        parents
    });
    rm.report(context, Vec::new(), &mut HashSet::new());
    // Counted from here, so that the rate and ETA are the removal's, not the walk's.
    rm.engine.progress = context.progress(comm.rank(), "Removed");
    rm.selected = comm.sum((files.len() + dirs.len()) as u64);
    rm.engine
        .progress
        .total_items
        .store(rm.selected, Ordering::Relaxed);

    // 3. Non-directories, balanced over all ranks.
    let t = Instant::now();
    let files = spread(comm, files);
    interrupted = rm.engine.unlink_files(comm, &files, stop);
    drop(files);
    rm.report(context, Vec::new(), &mut blocked);
    timing(&format!(
        "Removed {} files in {:.3} s",
        comm.sum(rm.engine.files.load(Ordering::Relaxed)),
        t.elapsed().as_secs_f64()
    ));

    // 4. Directories, deepest first.
    interrupted = interrupted || comm.any(stop.load(Ordering::Relaxed));
    if !interrupted {
        let t = Instant::now();
        let dirs = holders(comm, dirs, &kept, &blocked);
        let levels;
        (interrupted, levels) = rm.engine.remove_dirs(comm, dirs, stop);
        rm.report(context, Vec::new(), &mut HashSet::new());
        timing(&format!(
            "Removed {} directories in {levels} levels in {:.3} s",
            comm.sum(rm.engine.dirs.load(Ordering::Relaxed)),
            t.elapsed().as_secs_f64()
        ));
    }

    // 5. Parents' times back (also after an interruption: what remains keeps its times).
    if let Some(parents) = parents {
        let t = Instant::now();
        run_batches(comm, None, None, &parents, |chunk| rm.restore_times(chunk));
        rm.report(context, Vec::new(), &mut HashSet::new());
        timing(&format!(
            "Restored times of parent directories in {:.3} s",
            t.elapsed().as_secs_f64()
        ));
    }
    Ok(rm.end(comm, args, interrupted, started))
}

/// The selector, the working directory and the roots to remove.
type Checked = (RegexSelector, Vec<u8>, Vec<Vec<u8>>);

/// Every argument checked before the file system is touched: the selector, the working
/// directory and the roots to remove (none with `--input`). `Err`: a usage error.
fn check(args: &Options) -> Result<Checked, String> {
    RegexSelector::new(args.matching.as_deref(), args.exclude.as_deref(), args.name)
        .map_err(|e| e.to_string())
        .and_then(|selector| {
            let cwd = flist::path::current_dir().map_err(|e| format!("current directory: {e}"))?;
            let roots = if args.input.is_list() {
                Vec::new()
            } else if args.input.walk_paths().is_empty() {
                return Err("no PATH to remove".to_string());
            } else {
                roots(args.input.walk_paths(), &cwd)?
            };
            // The list is written once the removal is done: inside a tree being removed it
            // would be removed with it (an earlier one) or have no directory left to go in.
            if !args.dryrun {
                let outputs: Vec<(&str, &[u8])> =
                    args.output.iter().map(|o| ("--output", &o[..])).collect();
                let trees: Vec<(&str, &[u8])> = roots
                    .iter()
                    .map(|r| ("tree being removed", &r[..]))
                    .collect();
                crate::engine::outputs::refuse_inside(&outputs, &trees)?;
            }
            Ok((selector, cwd, roots))
        })
}

/// Phase 1: the candidates (walked, or read from `--input`), the failures that leave entries
/// in place, and whether a stop request cut the walk short. With `--aggressive` the walk
/// already unlinks the selected non-directories. `Err` is a usage error, the same on every
/// rank. Collective.
fn candidates(
    comm: &dyn Comm,
    args: &Options,
    rm: &Rm,
    roots: &[Vec<u8>],
    cwd: &[u8],
    stop: &AtomicBool,
) -> Result<(FileList, Vec<ItemError>, bool), String> {
    // -T: reading a directory must not move its atime either (where the kernel allows it).
    let noatime = flist::noatime::NoAtime::new(args.traceless);
    // The walk's paths are `roots`: the PATHs checked and normalised.
    let walk_roots = |_: &[Vec<u8>]| {
        let progress = args.context.progress(comm.rank(), "Walked");
        let hook = |dir: BorrowedFd<'_>, name: &[u8], path: &[u8], kind: FileType| {
            (args.one_file_system && rm.elsewhere(dir, name, path, kind))
                || (args.aggressive && rm.unlink_while_walking(dir, name, path, kind))
        };
        let hook: &Visit = &hook;
        let opts = WalkOptions {
            detail: if args.stat {
                Detail::Stat
            } else {
                Detail::Lite
            },
            noatime: &noatime,
            seed: 0x5eed,
            stop: Some(stop),
            progress: Some(&progress),
            visit: (args.aggressive || args.one_file_system).then_some(hook),
            ..WalkOptions::default()
        };
        walk(comm, roots, &opts)
    };
    let list = match args.input.list(comm, walk_roots).map_err(|e| e.message)? {
        Listed::Walked(walked) => return Ok((walked.list, walked.errors, walked.interrupted)),
        Listed::Read(list) => list,
    };
    let (list, refused) = list.refuse_dot_dot();
    let list = list.normalized(cwd);
    if comm.any(list.iter().any(|e| e.path == b"/")) {
        let named = args.input.list_file().map_or("the list".into(), display);
        return Err(format!("refusing to remove '/' (named in {named})"));
    }
    let (list, errors) = resolve_types(list);
    Ok((list, refused.into_iter().chain(errors).collect(), false))
}

/// A per-phase timing line (-v), from rank 0.
fn timing(comm: &dyn Comm, args: &Options, msg: &str) {
    if args.context.verbose && comm.rank() == 0 {
        args.context.info(format!("{msg}\n"));
    }
}

/// The PATHs normalised, in component order, without duplicates and without paths inside
/// another PATH (the walk of the outer one reaches them). Refuses `/` (however spelled) and
/// empty paths, which `normalize` would turn into the current directory.
fn roots(paths: &[Vec<u8>], cwd: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut roots = Vec::with_capacity(paths.len());
    for p in paths {
        if p.is_empty() {
            return Err("refusing to remove '': an empty PATH names no file".into());
        }
        let n = normalize(p, cwd);
        if n == b"/" {
            return Err(format!("refusing to remove '{}': it is /", display(p)));
        }
        roots.push(n);
    }
    Ok(flist::path::outermost(roots))
}

/// Every listed entry `lstat`ed: entries of unknown type (plain path lists) get their type;
/// entries that do not exist are dropped and returned as failures (a name that is not there
/// is a list that does not describe this tree: say so, exit 1).
fn resolve_types(list: FileList) -> (FileList, Vec<ItemError>) {
    restat(list, Which::Present, false)
}

/// The device of each directory root (`--one-file-system`), deepest first as [`Roots`] keeps
/// them.
fn devices(roots: &Roots) -> Vec<(Vec<u8>, u64)> {
    roots
        .iter()
        .filter_map(|r| Some((r.path().to_vec(), rustix::fs::fstat(r.fd()).ok()?.st_dev)))
        .collect()
}

/// Why a selected directory stays (bits, as exchanged between ranks).
const HOLDS_UNSELECTED: u8 = 1;
const HOLDS_FAILED: u8 = 2;

/// The selected directories `dirs` that can go, and how many stay on this rank because they
/// hold an unselected entry (`kept` holds the ancestors of those) or one that failed
/// (`blocked`). The directories come back on the rank that their path hashes to, where the
/// ancestor paths were sent. Collective.
fn holders(
    comm: &dyn Comm,
    dirs: FileList,
    kept: &HashSet<Vec<u8>>,
    blocked: &HashSet<Vec<u8>>,
) -> (FileList, u64, u64) {
    if !comm.any(!kept.is_empty() || !blocked.is_empty()) {
        return (dirs, 0, 0);
    }
    let size = comm.size();
    let owner = |p: &[u8]| (hash_path(p) % size as u64) as usize;
    let mut sends = vec![Vec::new(); size];
    for (set, why) in [(kept, HOLDS_UNSELECTED), (blocked, HOLDS_FAILED)] {
        for p in set {
            steal::typed::encode_into(&(why, serde_bytes::Bytes::new(p)), &mut sends[owner(p)]);
        }
    }
    let got = comm.alltoallv(sends);
    let mut why: HashMap<&[u8], u8> = HashMap::new();
    for part in &got {
        for held in steal::typed::each::<(u8, &serde_bytes::Bytes)>(part) {
            let (w, path) = steal::typed::sent(held);
            *why.entry(&path[..]).or_default() |= w;
        }
    }
    let dirs = remap(comm, dirs, |e| owner(e.path));
    let mut out = dirs.empty_like();
    let (mut kept_n, mut blocked_n) = (0, 0);
    for (i, e) in dirs.iter().enumerate() {
        match why.get(e.path) {
            None => out.push_from(&dirs, i),
            Some(w) if w & HOLDS_UNSELECTED != 0 => kept_n += 1,
            Some(_) => blocked_n += 1,
        }
    }
    (out, kept_n, blocked_n)
}

/// What one rank's workers share while removing: the removal engine and what only rm has
/// (selection, `--one-file-system`, `-T`).
struct Rm {
    engine: Remover,
    selector: RegexSelector,
    /// `--one-file-system`: the device of each directory root.
    devices: Vec<(Vec<u8>, u64)>,
    /// Other failures of the current phase (times of parents), reported at its end.
    other_errors: Mutex<Vec<ItemError>>,
    /// Other failures so far on this rank.
    other_failed: u64,
    /// Entries that could not be listed, on this rank.
    list_failed: u64,
    /// Entries selected for removal, over all ranks (set when the removal starts).
    selected: u64,
    /// Times of directories, taken before `--aggressive` first unlinked in them (`-T` only).
    parent_times: Option<Mutex<HashMap<Vec<u8>, Meta>>>,
    /// The memory limit described, with a list file.
    memory_limit: Option<String>,
    /// What a removal piece by piece spilled, and where.
    spilled: Option<RmSpill>,
    tmpdir: Option<String>,
    /// A removal piece by piece failed as a whole (named).
    spill_failed: bool,
}

impl Rm {
    /// The `--one-file-system` walk hook: true (the directory is skipped, named, and not
    /// descended) for a directory on another device than its root, as GNU `rm
    /// --one-file-system` does.
    fn elsewhere(&self, dir: BorrowedFd<'_>, name: &[u8], path: &[u8], kind: FileType) -> bool {
        if kind != FileType::Dir {
            return false;
        }
        let Some((_, root_dev)) = self
            .devices
            .iter()
            .find(|(r, _)| flist::path::is_prefix(r, path))
        else {
            return false;
        };
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if st.st_dev == *root_dev => false,
            Ok(_) => {
                let why = std::io::Error::other(
                    "on another file system than its PATH (--one-file-system): not descended, \
                     left in place",
                );
                self.engine.push_failure(ItemError::new(path, "skip", why));
                true
            }
            // Reported by the walk when it reads it.
            Err(_) => false,
        }
    }

    /// The `--aggressive` walk hook: unlink a selected non-directory right away. Returns
    /// whether the entry was consumed (removed, vanished or failed: nothing left to list).
    fn unlink_while_walking(
        &self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        path: &[u8],
        kind: FileType,
    ) -> bool {
        let e = Entry {
            path,
            kind,
            meta: None,
        };
        if kind == FileType::Dir || !self.selector.selects(e) {
            return false;
        }
        if let Some(times) = &self.parent_times {
            let dir_path = parent(path);
            let mut times = lock(times);
            if !times.contains_key(dir_path) {
                match rustix::fs::fstat(dir) {
                    Ok(st) => {
                        times.insert(dir_path.to_vec(), Meta::from_stat(&st));
                    }
                    Err(err) => {
                        lock(&self.other_errors).push(ItemError::new(dir_path, "stat", err.into()))
                    }
                }
            }
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) => {
                self.engine.files.fetch_add(1, Ordering::Relaxed);
                self.engine.note_removed(e);
            }
            Err(Errno::NOENT) => {}
            Err(err) => self.engine.fail(path, "unlink", err),
        }
        true
    }

    /// The parents of every selected entry with their current times (`-T`), as a stat list;
    /// with `--aggressive`, the times taken before the walk's first unlink win. Collective:
    /// when it returns, every rank has taken its times, so removal may start.
    fn parent_times(&self, comm: &dyn Comm, files: &FileList, dirs: &FileList) -> FileList {
        let taken = self
            .parent_times
            .as_ref()
            .map(|m| std::mem::take(&mut *lock(m)))
            .unwrap_or_default();
        let mut wanted = HashSet::new();
        let mut to_stat = FileList::new(Detail::Lite);
        for e in files.iter().chain(dirs.iter()) {
            let p = parent(e.path);
            if !taken.contains_key(p) && wanted.insert(p) {
                to_stat.push(p, FileType::Dir, None);
            }
        }
        let out = Mutex::new(FileList::new(Detail::Stat));
        for (p, m) in &taken {
            lock(&out).push(p, FileType::Dir, Some(*m));
        }
        run_batches(comm, None, None, &to_stat, |chunk| {
            let mut stated = FileList::new(Detail::Stat);
            let mut parent = ParentDir::beneath(self.engine.roots.clone());
            for e in chunk.iter() {
                match in_parent(&mut parent, e.path, |d, n| {
                    rustix::fs::statat(d, n, AtFlags::SYMLINK_NOFOLLOW)
                }) {
                    Ok(st) => stated.push(e.path, FileType::Dir, Some(Meta::from_stat(&st))),
                    Err(Errno::NOENT) => {}
                    Err(err) => {
                        lock(&self.other_errors).push(ItemError::new(e.path, "stat", err.into()))
                    }
                }
            }
            lock(&out).append(stated);
        });
        out.into_inner().expect("parent times")
    }

    fn restore_times(&self, chunk: &FileList) {
        let mut parent = ParentDir::beneath(self.engine.roots.clone());
        for e in chunk.iter() {
            let m = &e.meta.expect("a stat list");
            let times = crate::engine::copy::meta::timestamps(m);
            let set = |d: BorrowedFd<'_>, n: &[u8]| {
                rustix::fs::utimensat(d, n, &times, AtFlags::SYMLINK_NOFOLLOW)
            };
            match in_parent(&mut parent, e.path, set) {
                // Removed after all (it was selected too): nothing to restore.
                Ok(()) | Err(Errno::NOENT) => {}
                Err(err) => {
                    lock(&self.other_errors).push(ItemError::new(e.path, "set times", err.into()))
                }
            }
        }
    }

    /// Report `errors` (and this phase's) as error events; their paths stay, so their
    /// ancestors are added to `blocked`.
    fn report(
        &mut self,
        context: &Context,
        mut errors: Vec<ItemError>,
        blocked: &mut HashSet<Vec<u8>>,
    ) {
        errors.append(&mut self.engine.take_errors());
        for e in &errors {
            add_ancestors(blocked, &e.path);
            context.error(e);
        }
        let others = std::mem::take(&mut *lock(&self.other_errors));
        for e in &others {
            context.error(e);
        }
        self.other_failed += others.len() as u64;
    }

    /// `--dryrun`: send what would go as output, in the order it would go (files, then
    /// directories deepest first), and count it. Collective.
    fn dry_run(
        &self,
        comm: &dyn Comm,
        context: &Context,
        files: &FileList,
        (dirs, kept, _): (FileList, u64, u64),
    ) {
        let e = &self.engine;
        e.files.store(files.len() as u64, Ordering::Relaxed);
        e.dirs.store(dirs.len() as u64, Ordering::Relaxed);
        e.kept.store(kept, Ordering::Relaxed);
        let mut order: Vec<usize> = (0..dirs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(flist::path::depth(dirs.path(i))));
        let mut text = Vec::new();
        for entry in files.iter().chain(order.into_iter().map(|i| dirs.entry(i))) {
            text.extend_from_slice(entry.path);
            text.push(b'\n');
            e.note_removed(entry);
        }
        in_rank_order(comm, text, |b| context.output(b));
    }

    /// Name the count of failures, write `-o`, and build the report. Collective.
    fn end(&self, comm: &dyn Comm, args: &Options, interrupted: bool, started: Instant) -> Report {
        let context = &args.context;
        let n = self.engine.totals(comm);
        let mut other = [self.list_failed, self.other_failed];
        comm.allreduce(&mut other, steal::ReduceOp::Sum);
        let rank0 = comm.rank() == 0;
        if rank0 && n.failed > 0 {
            let held = match n.held {
                0 => String::new(),
                h => format!(", nor the {h} directories that hold them"),
            };
            context.error(format!(
                "{} items could not be removed (listed above){held}",
                n.failed
            ));
        }
        if interrupted && rank0 {
            context.error("interrupted by a signal: not everything was removed");
        }
        let output_failed = self.write_output(comm, args);
        Report {
            dryrun: args.dryrun,
            selected: self.selected,
            files: n.files,
            dirs: n.dirs,
            selective: self.selector.active(),
            kept: n.kept,
            failed: n.failed,
            held: n.held,
            list_failed: other[0],
            other_failed: other[1],
            output_failed,
            memory_limit: self.memory_limit.clone(),
            spilled: self.spilled.clone(),
            tmpdir: self.tmpdir.clone(),
            spill_failed: comm.any(self.spill_failed),
            seconds: started.elapsed().as_secs_f64(),
            interrupted,
            failures: context.failures(),
        }
    }

    /// Write `-o`; true (on every rank) when it failed. Collective.
    fn write_output(&self, comm: &dyn Comm, args: &Options) -> bool {
        let (Some(out), Some(removed)) = (&args.output, &self.engine.removed) else {
            return false;
        };
        let removed = lock(removed);
        let format = if args.text {
            Format::Text
        } else {
            io::default_format(&removed)
        };
        let t = Instant::now();
        let failed = match io::write(comm, &removed, out, format) {
            Ok(()) => {
                timing(
                    comm,
                    args,
                    &format!(
                        "Wrote {} in {:.3} s",
                        display(out),
                        t.elapsed().as_secs_f64()
                    ),
                );
                false
            }
            Err(e) => {
                if comm.rank() == 0 {
                    args.context.error(e);
                }
                true
            }
        };
        comm.any(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_refuse_slash_and_drop_nested_paths() {
        let os = |v: &[&str]| v.iter().map(|p| p.as_bytes().to_vec()).collect::<Vec<_>>();
        for slash in ["/", "//", "/.", "/..", "/a/..", "../../../../../../.."] {
            assert!(roots(&os(&[slash]), b"/w").is_err(), "{slash}");
        }
        assert!(roots(&os(&[""]), b"/w").is_err());
        assert_eq!(
            roots(&os(&["/a/b", "/a-b", "x", "/a", "/a/", "/a/b/c"]), b"/w").unwrap(),
            vec![b"/a".to_vec(), b"/a-b".to_vec(), b"/w/x".to_vec()]
        );
    }

    #[test]
    fn holders_keep_directories_with_staying_entries_at_several_rank_counts() {
        for ranks in [1, 2, 5] {
            let out = steal::local::run(ranks, |comm| {
                let mut dirs = FileList::new(Detail::Lite);
                if comm.rank() == 0 {
                    for d in [&b"/t"[..], b"/t/a", b"/t/a/k", b"/t/b", b"/t/c"] {
                        dirs.push(d, FileType::Dir, None);
                    }
                }
                let mut kept = HashSet::new();
                let mut blocked = HashSet::new();
                if comm.rank() + 1 == comm.size() {
                    add_ancestors(&mut kept, b"/t/a/k/file");
                    add_ancestors(&mut blocked, b"/t/b/bad");
                }
                let (go, k, b) = holders(comm, dirs, &kept, &blocked);
                let paths: Vec<Vec<u8>> = go.iter().map(|e| e.path.to_vec()).collect();
                (paths, k, b)
            });
            let mut go: Vec<Vec<u8>> = out.iter().flat_map(|o| o.0.clone()).collect();
            go.sort();
            assert_eq!(go, vec![b"/t/c".to_vec()], "ranks {ranks}");
            // /t holds both: counted as kept (the filter's doing), not as a failure.
            assert_eq!(out.iter().map(|o| o.1).sum::<u64>(), 3, "ranks {ranks}");
            assert_eq!(out.iter().map(|o| o.2).sum::<u64>(), 1, "ranks {ranks}");
        }
    }
}
