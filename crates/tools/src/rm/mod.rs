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
//! parent's descriptor, opened piece by piece ([`open_long`]).
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

use crate::cli::{message_sink, report_error, Common};
use crate::engine::batches::run_batches;
use crate::engine::locks::lock;
use crate::engine::regex_select::RegexSelector;
use crate::engine::status::Status;
use clap::Args;
use flist::at::ParentDir;
use flist::beneath::{list_tops, Roots};
use flist::distribute::{by_depth, hash_path, remap, spread};
use flist::io::{self, Format};
use flist::path::{display, normalize, parent};
use flist::record::Entry;
use flist::restat::{restat, Which};
use flist::walk::{walk, Visit, WalkOptions};
use flist::{Detail, FileList, FileType, ItemError, Meta};
use rustix::fd::BorrowedFd;
use rustix::fs::AtFlags;
use rustix::io::Errno;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::progress::Progress;
use steal::wire::{self, Reader};
use steal::{Comm, CommExt, ReduceOp};

/// Options of `mfu-rs rm`, named as in drm.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Remove files and trees in parallel",
    after_help = "Examples:\n  \
        mpirun -np 16 mfu-rs rm /lustre/scratch/old-run          # remove a tree\n  \
        mfu-rs rm --dryrun --match '\\.tmp$' /data/run             # list what would go\n  \
        mfu-rs rm --exclude '/keep(/|$)' -o removed.txt /data/run  # remove all but keep/, save a list\n  \
        mfu-rs rm -i old.mfu                                       # remove what a list names\n\n\
        Exit status: 0 all removed, 1 something could not be removed (each listed on stderr), \
        2 usage error (nothing removed)."
)]
pub struct RmArgs {
    /// Files and directories to remove (directories with everything below them). `/` is refused.
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// Remove what this list names (v3/v4 cache, `path|T` text, one path per line, or
    /// NUL-separated; `-` = stdin) instead of walking PATHs. Directories are removed only if the list also
    /// names everything they hold.
    #[arg(short, long, value_name = "FILE")]
    pub input: Option<OsString>,
    /// Write the list of what was removed (with --dryrun: of what would be) to FILE: cache v4
    /// for stat lists, text for lite lists and with --aggressive. `-` writes it to stdout (the
    /// summary then goes to stderr).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<OsString>,
    /// With --output, write the text format (`path|T` per line) even for a stat list.
    #[arg(short, long, requires = "output")]
    pub text: bool,
    /// Walk without stat, names and types only (the default).
    #[arg(short, long, conflicts_with = "stat")]
    pub lite: bool,
    /// Stat every entry while walking (so that --output writes a v4 list with metadata).
    #[arg(long)]
    pub stat: bool,
    /// Keep entries whose path matches REGEX (Rust regex syntax, unanchored; the path relative
    /// to its PATH, as with --match); directories that hold kept entries stay too.
    // Own ids: `select::Rules` reads the rsync-style `exclude` globs of other tools' matches.
    #[arg(long = "exclude", id = "rm_exclude", value_name = "REGEX")]
    pub exclude: Option<String>,
    /// Remove only entries whose path matches REGEX (unanchored). The path matched is relative
    /// to the PATH it was found under (`a/b.tmp` for PATH/a/b.tmp, `.` for PATH itself); with
    /// --input, relative to the list's topmost entries (those with no ancestor in the list).
    #[arg(long = "match", id = "rm_match", value_name = "REGEX")]
    pub matching: Option<String>,
    /// Apply --match and --exclude to the last path component instead of the whole path.
    #[arg(long)]
    pub name: bool,
    /// Print every path that would be removed, one per line, and change nothing.
    #[arg(long)]
    pub dryrun: bool,
    /// Unlink files while walking, as soon as their directory is read, instead of after the
    /// walk (directories still go bottom-up at the end).
    #[arg(long, conflicts_with_all = ["input", "dryrun"])]
    pub aggressive: bool,
    /// Restore the access and modification times of the parent directories that remain.
    #[arg(short = 'T', long)]
    pub traceless: bool,
    /// Do not descend into directories on another file system than their PATH (mount points
    /// below it): each is named on stderr and stays, with the directories above it (exit 1).
    #[arg(long, conflicts_with = "input")]
    pub one_file_system: bool,
    #[command(flatten)]
    pub common: Common,
}

/// Run `rm` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, args: &RmArgs) -> Status {
    let timing = |msg: &str| timing(comm, args, msg);
    // Check every argument before touching the file system.
    let selector =
        match RegexSelector::new(args.matching.as_deref(), args.exclude.as_deref(), args.name) {
            Ok(s) => s,
            Err(e) => return Status::usage(comm, "rm", e),
        };
    let cwd = match flist::path::current_dir() {
        Ok(d) => d,
        Err(e) => return Status::usage(comm, "rm", format!("current directory: {e}")),
    };
    let roots = match roots(&args.paths, &cwd) {
        Ok(r) => r,
        Err(e) => return Status::usage(comm, "rm", e),
    };
    // Opened before the walk, so that what is removed is reached from the directories walked.
    let opened = Arc::new(Roots::open_dirs(roots.iter().map(|r| r.as_slice())));
    steal::signals::install();
    let stop = steal::signals::stop_flag();
    let started = Instant::now();
    let mut rm = Remover {
        selector: selector.relative_to(roots.iter().cloned()),
        roots: opened.clone(),
        devices: if args.one_file_system {
            devices(&opened)
        } else {
            Vec::new()
        },
        files: AtomicU64::new(0),
        dirs: AtomicU64::new(0),
        kept: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        held: AtomicU64::new(0),
        errors: Mutex::new(Vec::new()),
        other_errors: Mutex::new(Vec::new()),
        removed: args
            .output
            .as_ref()
            .map(|_| Mutex::new(FileList::new(Detail::Lite))),
        parent_times: (args.aggressive && args.traceless).then(|| Mutex::new(HashMap::new())),
        progress: Progress::silent(),
    };

    // 1. The candidates, and the failures that leave entries in place.
    let t = Instant::now();
    let (mut list, list_errors, mut interrupted) =
        match candidates(comm, args, &rm, &roots, &cwd, stop) {
            Ok(c) => c,
            Err(e) => return Status::usage(comm, "rm", e),
        };
    if args.input.is_some() {
        let tops = list_tops(comm, list.iter().map(|e| e.path));
        rm.roots = Arc::new(Roots::of_list_tops(&tops));
        rm.selector = std::mem::take(&mut rm.selector).relative_to(tops);
    }
    crate::engine::test_seam::after_listing(comm);
    let listed = comm.sum(list.len() as u64);
    let what = if args.input.is_some() {
        "Read"
    } else {
        "Walked"
    };
    timing(&format!(
        "{what} {listed} items in {:.3} s",
        t.elapsed().as_secs_f64()
    ));
    if let Some(removed) = &mut rm.removed {
        if !args.aggressive {
            // Same detail and id tables as the list, so that -o can write v4.
            *removed.get_mut().expect("removed list") = list.empty_like();
        }
    }
    // Entries that stay make their ancestors stay: `kept` for unselected entries, `blocked`
    // for entries that failed (whose failure is reported once, not again for every ancestor).
    let mut kept = HashSet::new();
    let mut blocked = HashSet::new();
    let mut status = rm.report(list_errors, &mut blocked);
    if interrupted {
        return rm.end(comm, args, status, true, started);
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
    let mut dirs = list.empty_like();
    list.retain(|e| {
        if e.kind == FileType::Dir {
            dirs.push(e.path, e.kind, e.meta.copied());
        }
        e.kind != FileType::Dir
    });
    let files = list;
    if args.dryrun {
        let dirs = holders(comm, dirs, &kept, &blocked);
        rm.dry_run(comm, &files, dirs, message_sink(args.output.as_deref()));
        return rm.end(comm, args, status, false, started);
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
    status = status.worst(rm.report(Vec::new(), &mut HashSet::new()));
    // Counted from here, so that the rate and ETA are the removal's, not the walk's.
    rm.progress = args.common.progress(comm.rank(), "Removed");
    rm.progress.total_items.store(
        comm.sum((files.len() + dirs.len()) as u64),
        Ordering::Relaxed,
    );

    // 3. Non-directories, balanced over all ranks.
    let t = Instant::now();
    let files = spread(comm, files);
    interrupted = run_batches(comm, Some(stop), Some(&rm.progress), &files, |chunk| {
        rm.unlink_batch(chunk)
    });
    drop(files);
    status = status.worst(rm.report(Vec::new(), &mut blocked));
    timing(&format!(
        "Removed {} files in {:.3} s",
        comm.sum(rm.files.load(Ordering::Relaxed)),
        t.elapsed().as_secs_f64()
    ));

    // 4. Directories, deepest first.
    interrupted = interrupted || comm.any(stop.load(Ordering::Relaxed));
    if !interrupted {
        let t = Instant::now();
        let dirs = holders(comm, dirs, &kept, &blocked);
        let levels;
        (interrupted, levels) = rm.remove_dirs(comm, dirs, stop);
        status = status.worst(rm.report(Vec::new(), &mut HashSet::new()));
        timing(&format!(
            "Removed {} directories in {levels} levels in {:.3} s",
            comm.sum(rm.dirs.load(Ordering::Relaxed)),
            t.elapsed().as_secs_f64()
        ));
    }

    // 5. Parents' times back (also after an interruption: what remains keeps its times).
    if let Some(parents) = parents {
        let t = Instant::now();
        run_batches(comm, None, None, &parents, |chunk| rm.restore_times(chunk));
        status = status.worst(rm.report(Vec::new(), &mut HashSet::new()));
        timing(&format!(
            "Restored times of parent directories in {:.3} s",
            t.elapsed().as_secs_f64()
        ));
    }
    rm.end(comm, args, status, interrupted, started)
}

/// Phase 1: the candidates (walked, or read from `--input`), the failures that leave entries
/// in place, and whether a stop request cut the walk short. With `--aggressive` the walk
/// already unlinks the selected non-directories. `Err` is a usage error, the same on every
/// rank. Collective.
fn candidates(
    comm: &dyn Comm,
    args: &RmArgs,
    rm: &Remover,
    roots: &[Vec<u8>],
    cwd: &[u8],
    stop: &AtomicBool,
) -> Result<(FileList, Vec<ItemError>, bool), String> {
    if let Some(input) = &args.input {
        let list = io::read(comm, input.as_bytes())
            .map_err(|e| e.to_string())?
            .normalized(cwd);
        if comm.any(list.iter().any(|e| e.path == b"/")) {
            return Err(format!(
                "refusing to remove '/' (named in {})",
                display(input.as_bytes())
            ));
        }
        let (list, errors) = resolve_types(list);
        return Ok((list, errors, false));
    }
    let progress = args.common.progress(comm.rank(), "Walked");
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
        // -T: reading a directory must not move its atime either.
        no_atime: args.traceless,
        seed: 0x5eed,
        stop: Some(stop),
        progress: Some(&progress),
        visit: (args.aggressive || args.one_file_system).then_some(hook),
        ..WalkOptions::default()
    };
    let walked = walk(comm, roots, &opts);
    Ok((walked.list, walked.errors, walked.interrupted))
}

/// A summary line on stdout (stderr with `-o -`), from rank 0, unless -q.
fn say(comm: &dyn Comm, args: &RmArgs, msg: &str) {
    if comm.rank() == 0 && !args.common.quiet {
        message_sink(args.output.as_deref())(format!("{msg}\n").as_bytes());
    }
}

/// A per-phase timing line (-v).
fn timing(comm: &dyn Comm, args: &RmArgs, msg: &str) {
    if args.common.verbose {
        say(comm, args, msg);
    }
}

/// The PATHs normalised, in component order, without duplicates and without paths inside
/// another PATH (the walk of the outer one reaches them). Refuses `/` (however spelled) and
/// empty paths, which `normalize` would turn into the current directory.
fn roots(paths: &[OsString], cwd: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut roots = Vec::with_capacity(paths.len());
    for p in paths {
        let p = p.as_bytes();
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

/// Add every ancestor of `path` to `set` (stopping at the first one already there: its own
/// ancestors are too).
fn add_ancestors(set: &mut HashSet<Vec<u8>>, path: &[u8]) {
    let mut p = path;
    while p != b"/" {
        p = parent(p);
        if set.contains(p) {
            break;
        }
        set.insert(p.to_vec());
    }
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
            let buf = &mut sends[owner(p)];
            buf.push(why);
            wire::put_bytes(buf, p);
        }
    }
    let got = comm.alltoallv(sends);
    let mut why: HashMap<&[u8], u8> = HashMap::new();
    for part in &got {
        let mut input = Reader::new(part);
        while !input.is_empty() {
            let w = input.u8();
            *why.entry(input.bytes()).or_default() |= w;
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

/// Counts summed over all ranks.
struct Totals {
    files: u64,
    dirs: u64,
    kept: u64,
    failed: u64,
    held: u64,
}

/// The counters of [`Remover`] summed over all ranks. Collective.
fn totals(comm: &dyn Comm, rm: &Remover) -> Totals {
    let mut v =
        [&rm.files, &rm.dirs, &rm.kept, &rm.failed, &rm.held].map(|a| a.load(Ordering::Relaxed));
    comm.allreduce(&mut v, ReduceOp::Sum);
    Totals {
        files: v[0],
        dirs: v[1],
        kept: v[2],
        failed: v[3],
        held: v[4],
    }
}

/// What one rank's workers share while removing.
struct Remover {
    selector: RegexSelector,
    /// Where entries are reached from (see the module's comment).
    roots: Arc<Roots>,
    /// `--one-file-system`: the device of each directory root.
    devices: Vec<(Vec<u8>, u64)>,
    /// Non-directories removed.
    files: AtomicU64,
    /// Directories removed.
    dirs: AtomicU64,
    /// Selected directories kept because they hold entries not selected.
    kept: AtomicU64,
    /// Entries that failed to go.
    failed: AtomicU64,
    /// Selected directories left because they hold entries that failed.
    held: AtomicU64,
    /// Failures of the current phase that leave an entry in place, reported at its end.
    errors: Mutex<Vec<ItemError>>,
    /// Other failures of the current phase (times of parents), reported at its end.
    other_errors: Mutex<Vec<ItemError>>,
    /// What was removed (`-o` only).
    removed: Option<Mutex<FileList>>,
    /// Times of directories, taken before `--aggressive` first unlinked in them (`-T` only).
    parent_times: Option<Mutex<HashMap<Vec<u8>, Meta>>>,
    progress: Progress,
}

impl Remover {
    fn note_removed(&self, e: Entry<'_>) {
        if let Some(list) = &self.removed {
            lock(list).push(e.path, e.kind, e.meta.copied());
        }
    }

    fn fail(&self, path: &[u8], op: &'static str, e: Errno) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.progress.errors.fetch_add(1, Ordering::Relaxed);
        let why = flist::beneath::explain(e.into());
        lock(&self.errors).push(ItemError::new(path, op, why));
    }

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
                self.failed.fetch_add(1, Ordering::Relaxed);
                lock(&self.errors).push(ItemError::new(path, "skip", why));
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
                self.files.fetch_add(1, Ordering::Relaxed);
                self.note_removed(e);
            }
            Err(Errno::NOENT) => {}
            Err(err) => self.fail(path, "unlink", err),
        }
        true
    }

    fn unlink_batch(&self, chunk: &FileList) {
        let mut parent = ParentDir::beneath(self.roots.clone());
        for e in chunk.iter() {
            match in_parent(&mut parent, e.path, |d, n| {
                rustix::fs::unlinkat(d, n, AtFlags::empty())
            }) {
                Ok(()) => {
                    self.files.fetch_add(1, Ordering::Relaxed);
                    self.note_removed(e);
                }
                // Gone already (listed twice, or removed by someone else): nothing to do.
                Err(Errno::NOENT) => {}
                Err(err) => self.fail(e.path, "unlink", err),
            }
        }
    }

    /// `rmdir` one batch of a level; directories in `blocked` hold entries that failed and are
    /// skipped. Paths of directories that fail are appended (wire-encoded) to `failed_here`.
    fn rmdir_batch(
        &self,
        chunk: &FileList,
        blocked: &HashSet<Vec<u8>>,
        failed_here: &Mutex<Vec<u8>>,
    ) {
        let mut parent = ParentDir::beneath(self.roots.clone());
        for e in chunk.iter() {
            if blocked.contains(e.path) {
                self.held.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            match in_parent(&mut parent, e.path, |d, n| {
                rustix::fs::unlinkat(d, n, AtFlags::REMOVEDIR)
            }) {
                Ok(()) => {
                    self.dirs.fetch_add(1, Ordering::Relaxed);
                    self.note_removed(e);
                }
                Err(Errno::NOENT) => {}
                // Under a filter, a directory still holding unselected entries stays by design
                // (e.g. entries a list did not name, or created since the walk).
                Err(Errno::NOTEMPTY | Errno::EXIST) if self.selector.active() => {
                    self.kept.fetch_add(1, Ordering::Relaxed);
                }
                Err(err) => {
                    self.fail(e.path, "rmdir", err);
                    wire::put_bytes(&mut lock(failed_here), e.path);
                }
            }
        }
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
            let mut parent = ParentDir::beneath(self.roots.clone());
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
        let mut parent = ParentDir::beneath(self.roots.clone());
        for e in chunk.iter() {
            let m = e.meta.expect("a stat list");
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

    /// Report `errors` (and this phase's) on stderr; their paths stay, so their ancestors are
    /// added to `blocked`. Returns the status they imply on this rank.
    fn report(&self, mut errors: Vec<ItemError>, blocked: &mut HashSet<Vec<u8>>) -> Status {
        errors.append(&mut lock(&self.errors));
        for e in &errors {
            add_ancestors(blocked, &e.path);
            report_error("rm", e);
        }
        let others = std::mem::take(&mut *lock(&self.other_errors));
        for e in &others {
            report_error("rm", e);
        }
        if errors.is_empty() && others.is_empty() {
            Status::Ok
        } else {
            Status::ItemsFailed
        }
    }

    /// `--dryrun`: print what would go, in the order it would go (files, then directories
    /// deepest first) through `print` (stdout, or stderr when the list goes there), and count
    /// it. Collective.
    fn dry_run(
        &self,
        comm: &dyn Comm,
        files: &FileList,
        (dirs, kept, _): (FileList, u64, u64),
        print: fn(&[u8]),
    ) {
        self.files.store(files.len() as u64, Ordering::Relaxed);
        self.dirs.store(dirs.len() as u64, Ordering::Relaxed);
        self.kept.store(kept, Ordering::Relaxed);
        let mut order: Vec<usize> = (0..dirs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(flist::path::depth(dirs.path(i))));
        let mut text = Vec::new();
        for e in files.iter().chain(order.into_iter().map(|i| dirs.entry(i))) {
            text.extend_from_slice(e.path);
            text.push(b'\n');
            self.note_removed(e);
        }
        in_rank_order(comm, text, print);
    }

    /// Phase 4: `rmdir` the directories that can go, one depth level at a time, deepest first
    /// (a barrier per level: a directory goes only once everything below it has). Returns
    /// whether a stop request cut it short, and the number of levels. Collective.
    fn remove_dirs(
        &self,
        comm: &dyn Comm,
        (dirs, kept, held): (FileList, u64, u64),
        stop: &AtomicBool,
    ) -> (bool, usize) {
        self.kept.fetch_add(kept, Ordering::Relaxed);
        self.held.fetch_add(held, Ordering::Relaxed);
        let stays = comm.sum(kept + held);
        self.progress
            .total_items
            .fetch_sub(stays, Ordering::Relaxed);
        let levels = by_depth(comm, &dirs);
        drop(dirs);
        let mut blocked = HashSet::new();
        for level in levels.iter().rev() {
            let failed_here = Mutex::new(Vec::new());
            let interrupted = run_batches(comm, Some(stop), Some(&self.progress), level, |chunk| {
                self.rmdir_batch(chunk, &blocked, &failed_here)
            });
            // A directory that failed keeps its ancestors: skip them quietly in the levels
            // above (its own failure is reported).
            let mine = failed_here.into_inner().expect("failed directories");
            for part in comm.allgatherv(&mine) {
                let mut input = Reader::new(&part);
                while !input.is_empty() {
                    add_ancestors(&mut blocked, input.bytes());
                }
            }
            if interrupted {
                return (true, levels.len());
            }
        }
        (false, levels.len())
    }

    /// Print the summary (stdout, rank 0, not with -q) and the count of failures (stderr), write
    /// `-o`, and agree on the status. Collective.
    fn end(
        &self,
        comm: &dyn Comm,
        args: &RmArgs,
        mut status: Status,
        interrupted: bool,
        started: Instant,
    ) -> Status {
        let say = |msg: &str| say(comm, args, msg);
        let n = totals(comm, self);
        let items = n.files + n.dirs;
        if args.dryrun {
            say(&format!(
                "Would remove {items} items ({} files, {} directories)",
                n.files, n.dirs
            ));
        } else {
            let secs = started.elapsed().as_secs_f64();
            say(&format!(
                "Removed {items} items ({} files, {} directories) in {secs:.2} s ({:.0} items/s)",
                n.files,
                n.dirs,
                items as f64 / secs.max(1e-9)
            ));
        }
        if self.selector.active() {
            let verb = if args.dryrun { "Would keep" } else { "Kept" };
            say(&format!(
                "{verb} {} directories that hold entries not selected",
                n.kept
            ));
        }
        let rank0 = comm.rank() == 0;
        if rank0 && n.failed > 0 {
            let held = match n.held {
                0 => String::new(),
                h => format!(", nor the {h} directories that hold them"),
            };
            report_error(
                "rm",
                format!(
                    "{} items could not be removed (listed above){held}",
                    n.failed
                ),
            );
        }
        if interrupted {
            status = Status::ItemsFailed;
            if rank0 {
                report_error("rm", "interrupted by a signal: not everything was removed");
            }
        }
        self.finish(comm, args, status)
    }

    /// Write `-o` and agree on the status. Collective.
    fn finish(&self, comm: &dyn Comm, args: &RmArgs, mut status: Status) -> Status {
        if let (Some(out), Some(removed)) = (&args.output, &self.removed) {
            let removed = lock(removed);
            let format = if args.text {
                Format::Text
            } else {
                io::default_format(&removed)
            };
            let t = Instant::now();
            match io::write(comm, &removed, out.as_bytes(), format) {
                Ok(()) => timing(
                    comm,
                    args,
                    &format!(
                        "Wrote {} in {:.3} s",
                        display(out.as_bytes()),
                        t.elapsed().as_secs_f64()
                    ),
                ),
                Err(e) => {
                    if comm.rank() == 0 {
                        report_error("rm", e);
                    }
                    status = status.worst(Status::ItemsFailed);
                }
            }
        }
        status.agree(comm)
    }
}

/// `op(dir, name)` for `path`, by name in its parent held open by `parent` (see
/// [`ParentDir`]), with the system's error code.
fn in_parent<R>(
    parent: &mut ParentDir,
    path: &[u8],
    op: impl FnOnce(BorrowedFd<'_>, &[u8]) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let at = parent
        .at(path)
        .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
    op(at.dir(), at.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_refuse_slash_and_drop_nested_paths() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
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
    fn ancestors_stop_at_the_root() {
        let mut set = HashSet::new();
        add_ancestors(&mut set, b"/a/b/c");
        add_ancestors(&mut set, b"/a/x");
        let mut v: Vec<_> = set.into_iter().collect();
        v.sort();
        assert_eq!(v, vec![b"/".to_vec(), b"/a".to_vec(), b"/a/b".to_vec()]);
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
