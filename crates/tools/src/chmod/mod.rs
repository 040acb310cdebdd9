//! `mfu-rs chmod` (dchmod): change the mode, owner and group of trees in parallel.
//!
//! The phases, each collective:
//! 1. check every argument (mode string, owner and group looked up on rank 0, regexes) before
//!    touching anything: a mistake exits 2 with nothing changed;
//! 2. list: walk the PATHs with stat, or read `--input` and stat what it names. A selected
//!    directory its owner (the caller) cannot read or search, and whose new mode lets the owner
//!    do both, gets its new mode as the walk meets it, so that the walk gets in;
//! 3. select (`--match`/`--exclude`) and work out what each entry needs: only what differs is
//!    changed, unless `--force`;
//! 4. change, in an order that never locks the caller out of what is left to do: directories
//!    that keep their execute bits, top-down, one depth level at a time; then everything that
//!    is not a directory; then directories that lose an execute bit, deepest first.
//!
//! Symbolic links: their mode is never changed (Linux has none to change) and they are never
//! followed; `-u`/`-g` change the link itself (`lchown`), as `chown -R` does by default (`-P`).
//! When both are asked, the owner changes first and the new mode is worked out from the mode
//! `chown` leaves (it clears the set-ID bits of non-directories), so the result is that of
//! `chown -R` followed by `chmod -R`.
//!
//! The tree may change between the listing and the change (a directory swapped for a symlink
//! to anywhere, a file for a symlink). Each entry's parent is reached from a root's descriptor
//! without following symlinks ([`flist::beneath`]); the entry itself is opened `O_PATH |
//! O_NOFOLLOW`, its type checked against the listed one, and changed through that descriptor
//! (`nofollow`). The roots are the PATHs (opened before the walk), or for `--input` the
//! parents of the list's topmost entries (entries with no ancestor in the list), whose own
//! paths are trusted as PATHs typed on the command line would be. An entry whose path or type
//! changed is named and left alone.

pub(crate) mod mode;
pub(crate) mod nofollow;
pub(crate) mod owner;

use crate::engine::batches::{run_batches, run_levels, LevelWork, Order};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::input::{Input, Listed};
use crate::engine::regex_select::RegexSelector;
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use flist::at::At;
use flist::beneath::{list_tops, Roots};
use flist::distribute::{by_depth, spread};
use flist::parent_dir::ParentDir;
use flist::path::normalize;
use flist::record::Entry;
use flist::restat::{restat, Which};
use flist::walk::{walk, Visit, WalkOptions};
use flist::{Detail, FileList, FileType, ItemError, Meta};
use mode::ModeChange;
use nofollow::{chmod_nofollow, Checked};
use owner::Owner;
use rustix::fd::BorrowedFd;
use rustix::fs::AtFlags;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use steal::progress::Progress;
use steal::{Comm, CommExt, ReduceOp};

/// Set-user-ID and set-group-ID: `chown` clears them on non-directories.
const SUID: u32 = 0o4000;
const SGID: u32 = 0o2000;
/// Owner read and search.
const OWNER_RX: u32 = 0o500;

/// What `chmod` is to change, and where.
///
/// ```no_run
/// // mfu-rs chmod -m g+rX,o-rwx -g proj /data/run
/// let mut options = mfu::chmod::Options::new(vec![b"/data/run".to_vec()]);
/// options.mode = Some("g+rX,o-rwx".into());
/// options.group = Some("proj".into());
/// let reports = steal::local::run(2, |comm| mfu::chmod::run(comm, &options));
/// assert_eq!(reports[0].as_ref().map(|r| r.failed), Ok(0));
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Files and directories to change (directories with everything below them; relative
    /// paths start at the current directory), or the list of what to change instead (v3/v4
    /// cache, `path|T` text, one path per line, or NUL-separated; or in memory). Every listed
    /// entry is stat'ed again: the change starts from the current mode, not the list's.
    pub input: Input,
    /// New owner: a user name or a numeric uid (`+N` is always a number). `None`: unchanged.
    pub owner: Option<String>,
    /// New group: a group name or a numeric gid. `None`: unchanged.
    pub group: Option<String>,
    /// New mode, octal (`2775`) or symbolic as in chmod(1) (`u+rwX,g=u,o-w`). `None`:
    /// unchanged.
    pub mode: Option<String>,
    /// Call chmod/chown on every selected entry, even where nothing would change.
    pub force: bool,
    /// Do not report entries that fail with "Operation not permitted"; they are still
    /// counted (`failed`, `silenced`).
    pub silent: bool,
    /// Leave entries whose path matches this regex alone (Rust regex syntax, unanchored).
    pub exclude: Option<String>,
    /// Change only entries whose path matches this regex (unanchored).
    pub matching: Option<String>,
    /// Apply `matching` and `exclude` to the last path component instead of the whole path.
    pub name: bool,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Change `paths` (nothing yet: set `mode`, `owner` or `group`); every other field as on
    /// the command line.
    pub fn new(paths: Vec<Vec<u8>>) -> Options {
        Options {
            input: Input::Paths(paths),
            owner: None,
            group: None,
            mode: None,
            force: false,
            silent: false,
            exclude: None,
            matching: None,
            name: false,
            context: Context::default(),
        }
    }
}

/// What a `chmod` run did: counts over all ranks.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Entries listed (walked, or read from the list and stat'ed).
    pub listed: u64,
    /// Entries selected to be changed (0 when the listing was cut short): what a stopped run's
    /// `done` counts towards.
    pub selected: u64,
    /// Entries changed (every call they needed succeeded).
    pub changed: u64,
    /// Selected entries that already had what was asked.
    pub unchanged: u64,
    /// Entries that failed (listing, stat or change).
    pub failed: u64,
    /// Of `failed`, those not reported because of [`Options::silent`] (Operation not
    /// permitted).
    pub silenced: u64,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// A stop request cut the run short: not everything was changed.
    pub interrupted: bool,
    /// A sample of this process's failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    /// `items` are the entries changed.
    fn summary(&self) -> Summary {
        Summary {
            items: self.changed,
            bytes: 0,
            failed: self.failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(self.failed, 0, self.interrupted)
    }
    /// Entries changed, found as asked or failed, of those selected: a rerun of the same chmod
    /// finds the ones done unchanged.
    fn stopped(&self) -> Option<Stopped> {
        self.interrupted.then(|| Stopped {
            done: (self.changed + self.unchanged + self.failed).min(self.selected),
            total: self.selected,
            what: "entries",
        })
    }
}

/// Run `chmod` on this rank. Collective: every rank returns the same counts, or the same
/// error when nothing was changed (a bad mode, an unknown user, an unreadable list).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let Setup { plan, cwd, roots } = setup(comm, options)?;
    let mut ch = Changer {
        plan: &plan,
        // Opened before the walk, so that what is changed is reached from the directories
        // walked.
        roots: Arc::new(Roots::open_dirs(roots.iter().map(|r| r.as_slice()))),
        context: &options.context,
        silent: options.silent,
        changed: AtomicU64::new(0),
        unchanged: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        hushed: AtomicU64::new(0),
        selected: 0,
        progress: Progress::silent(),
    };
    let (list, listed, interrupted) = ch.list(comm, options, &roots, &cwd)?;
    let interrupted = interrupted || ch.change(comm, options, list);
    Ok(ch.end(comm, listed, interrupted, started))
}

/// What phase 1 found: the plan, the current directory and the outermost roots (absolute).
struct Setup {
    plan: Plan,
    cwd: Vec<u8>,
    roots: Vec<Vec<u8>>,
}

/// Phase 1: the plan (every argument checked, owner and group looked up), the current
/// directory and the outermost roots; `Err` on every rank when anything is wrong. Collective.
fn setup(comm: &dyn Comm, options: &Options) -> Result<Setup, Error> {
    let plan = Plan::new(comm, options);
    let checked = plan.and_then(|plan| {
        let cwd = flist::path::current_dir().map_err(|e| format!("current directory: {e}"))?;
        let paths = options.input.walk_paths();
        let mut roots = Vec::with_capacity(paths.len());
        for p in paths {
            if p.is_empty() {
                return Err("an empty PATH names no file".to_string());
            }
            roots.push(normalize(p, &cwd));
        }
        let roots = flist::path::outermost(roots);
        Ok(Setup { plan, cwd, roots })
    });
    agree_setup(comm, checked)
}

/// What to do, checked and resolved before anything is touched.
struct Plan {
    mode: Option<ModeChange>,
    owner: Owner,
    /// The process's umask (limits symbolic clauses without `ugoa`).
    umask: u32,
    force: bool,
    selector: RegexSelector,
    /// The caller's effective uid (whose directories may be opened up during the walk).
    euid: u32,
}

/// What one entry needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Change {
    /// Call `lchown` with the plan's owner.
    chown: bool,
    /// Call `chmod` with this mode.
    chmod: Option<u32>,
    /// A directory that loses an execute bit: changed after everything below it.
    late: bool,
}

impl Plan {
    /// Parse and resolve the arguments; `Err` (the same on every rank) is a usage error.
    /// Collective: the owner look-up broadcasts.
    fn new(comm: &dyn Comm, options: &Options) -> Result<Plan, String> {
        if options.mode.is_none() && options.owner.is_none() && options.group.is_none() {
            return Err("nothing to do: give -m MODE, -u USER or -g GROUP".into());
        }
        let mode = options.mode.as_deref().map(ModeChange::parse).transpose()?;
        let selector = RegexSelector::new(
            options.matching.as_deref(),
            options.exclude.as_deref(),
            options.name,
        )
        .map_err(|e| e.to_string())?;
        let owner = owner::resolve(comm, options.owner.as_deref(), options.group.as_deref())?;
        Ok(Plan {
            mode,
            owner,
            umask: crate::engine::umask::current(),
            force: options.force,
            selector,
            euid: rustix::process::geteuid().as_raw(),
        })
    }

    /// What an entry of type `kind` and metadata `m` needs.
    fn change(&self, kind: FileType, m: &Meta) -> Change {
        let old = m.mode & 0o7777;
        let dir = kind == FileType::Dir;
        let chown = !self.owner.is_none()
            && (self.force
                || self.owner.uid.is_some_and(|u| u != m.uid)
                || self.owner.gid.is_some_and(|g| g != m.gid));
        // chown clears set-ID bits of non-directories: the mode is worked out from what it
        // leaves, as `chown -R` then `chmod -R` would.
        let base = if chown && !dir { after_chown(old) } else { old };
        let new = match &self.mode {
            Some(mc) if kind != FileType::Symlink => Some(mc.apply(base, dir, self.umask)),
            _ => None,
        };
        let chmod = new.filter(|&n| self.force || n != base);
        Change {
            chown,
            chmod,
            late: dir && new.is_some_and(|n| old & 0o111 & !n != 0),
        }
    }
}

/// The permission bits of a non-directory of bits `old` after `chown(2)`: Linux clears
/// set-user-ID, and set-group-ID when group execute is set (without it the bit marks
/// mandatory locking and stays).
fn after_chown(old: u32) -> u32 {
    let mut bits = old & !SUID;
    if bits & 0o010 != 0 {
        bits &= !SGID;
    }
    bits
}

/// What one rank's workers share while changing.
struct Changer<'a> {
    plan: &'a Plan,
    /// Where entries are reached from (see the module's comment).
    roots: Arc<Roots>,
    context: &'a Context,
    silent: bool,
    /// Entries changed (every call succeeded).
    changed: AtomicU64,
    /// Selected entries that already had what was asked.
    unchanged: AtomicU64,
    /// Entries that failed (listing, stat or change).
    failed: AtomicU64,
    /// Failures not listed because of `--silent`.
    hushed: AtomicU64,
    /// Entries selected to be changed, over all ranks.
    selected: u64,
    progress: Progress,
}

impl Changer<'_> {
    /// Phase 2, the entries as they are now: the list, how many entries were listed (over all
    /// ranks), and whether a stop request cut the walk short. Failures are reported and
    /// counted; `Err` (on every rank) is an unreadable `--input`. Collective.
    fn list(
        &mut self,
        comm: &dyn Comm,
        options: &Options,
        roots: &[Vec<u8>],
        cwd: &[u8],
    ) -> Result<(FileList, u64, bool), Error> {
        let t = Instant::now();
        let found = self.candidates(comm, options, roots, cwd);
        let (list, errors, interrupted) = agree_setup(comm, found)?;
        for e in &errors {
            self.failed.fetch_add(1, Ordering::Relaxed);
            self.context.error(e);
        }
        if options.input.is_list() {
            let tops = list_tops(comm, list.iter().map(|e| e.path));
            self.roots = Arc::new(Roots::of_list_tops(&tops));
        }
        crate::engine::test_seam::after_listing(comm);
        let listed = comm.sum(list.len() as u64);
        self.timing(
            comm,
            &format!(
                "{} {listed} items in {:.3} s",
                if options.input.is_list() {
                    "Read and stat'ed"
                } else {
                    "Walked"
                },
                t.elapsed().as_secs_f64()
            ),
        );
        Ok((list, listed, interrupted))
    }

    /// Phases 3 and 4: work out what each selected entry of `list` needs, then change
    /// directories that stay searchable top-down, the rest, then the other directories
    /// bottom-up. Returns true (on every rank) when a stop request cut it short. Collective.
    fn change(&mut self, comm: &dyn Comm, options: &Options, list: FileList) -> bool {
        let (early, files, late) = self.classify(list);
        self.progress = options.context.progress(comm.rank(), "Changed");
        self.selected = comm.sum((early.len() + files.len() + late.len()) as u64);
        self.progress
            .total_items
            .store(self.selected, Ordering::Relaxed);
        let t = Instant::now();
        let levels = by_depth(comm, &early);
        drop(early);
        let mut interrupted = self.change_levels(comm, &levels, Order::ParentsFirst);
        drop(levels);
        if !interrupted {
            interrupted = self.change_all(comm, files);
        }
        if !interrupted {
            let levels = by_depth(comm, &late);
            drop(late);
            interrupted = self.change_levels(comm, &levels, Order::ChildrenFirst);
        }
        self.timing(
            comm,
            &format!("Changed items in {:.3} s", t.elapsed().as_secs_f64()),
        );
        interrupted
    }

    /// A verbose timing line (rank 0, `-v`).
    fn timing(&self, comm: &dyn Comm, line: &str) {
        if self.context.verbose && comm.rank() == 0 {
            self.context.info(format!("{line}\n"));
        }
    }

    /// The entries with their current metadata, the failures, and whether a stop request cut
    /// the walk short; `Err` is an unreadable `--input`. Collective.
    fn candidates(
        &self,
        comm: &dyn Comm,
        options: &Options,
        roots: &[Vec<u8>],
        cwd: &[u8],
    ) -> Result<(FileList, Vec<ItemError>, bool), String> {
        // The walk's paths are `roots`: the PATHs checked, normalised, outermost only.
        let walk_roots = |_: &[Vec<u8>]| {
            // The roots are not read from a directory, so the walk hook never sees them.
            if comm.rank() == 0 {
                for root in roots {
                    let _ = At::with(root, |dir, name| {
                        self.open_up(dir, name, root);
                        Ok(())
                    });
                }
            }
            comm.barrier();
            let progress = options.context.progress(comm.rank(), "Walked");
            let hook = |dir: BorrowedFd<'_>, name: &[u8], path: &[u8], kind: FileType| {
                if kind == FileType::Dir {
                    self.open_up(dir, name, path);
                }
                false
            };
            let hook: &Visit = &hook;
            let opts = WalkOptions {
                detail: Detail::Stat,
                seed: 0xc4a0d,
                stop: Some(&options.context.stop),
                progress: Some(&progress),
                visit: self.plan.mode.is_some().then_some(hook),
                ..WalkOptions::default()
            };
            walk(comm, roots, &opts)
        };
        let list = match options
            .input
            .list(comm, walk_roots)
            .map_err(|e| e.message)?
        {
            Listed::Walked(w) => return Ok((w.list, w.errors, w.interrupted)),
            Listed::Read(list) => list,
        };
        let (list, refused) = list.refuse_dot_dot();
        let (list, errors) = restat(list.normalized(cwd), Which::All, false);
        Ok((list, refused.into_iter().chain(errors).collect(), false))
    }

    /// Give the selected directory `name` in `dir` its new mode now if the caller owns it (or
    /// is root), cannot read or search it yet, and the new mode lets the owner do both: the
    /// walk can then read it. A failure here is reported later, by the walk (open) and by the
    /// change itself (chmod).
    fn open_up(&self, dir: BorrowedFd<'_>, name: &[u8], path: &[u8]) {
        let Some(mc) = &self.plan.mode else { return };
        let e = Entry {
            path,
            kind: FileType::Dir,
            meta: None,
        };
        if !self.plan.selector.selects(e) {
            return;
        }
        let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            return;
        };
        let euid = self.plan.euid;
        if FileType::from_mode(st.st_mode) != FileType::Dir || (st.st_uid != euid && euid != 0) {
            return;
        }
        let old = st.st_mode & 0o7777;
        if old & OWNER_RX == OWNER_RX {
            return;
        }
        let new = mc.apply(old, true, self.plan.umask);
        if new & OWNER_RX == OWNER_RX {
            let _ = chmod_nofollow(dir, name, new);
        }
    }

    /// Phase 3: the selected entries that need a change, as (directories that keep their
    /// execute bits, everything but directories, directories that lose one). Counts the
    /// unchanged.
    fn classify(&self, list: FileList) -> (FileList, FileList, FileList) {
        let (mut early, mut files, mut late) =
            (list.empty_like(), list.empty_like(), list.empty_like());
        let mut unchanged = 0;
        for (i, e) in list.iter().enumerate() {
            if !self.plan.selector.selects(e) {
                continue;
            }
            let m = &e.meta.expect("a stat list");
            let c = self.plan.change(e.kind, m);
            if !c.chown && c.chmod.is_none() {
                unchanged += 1;
            } else if e.kind != FileType::Dir {
                files.push_from(&list, i);
            } else if c.late {
                late.push_from(&list, i);
            } else {
                early.push_from(&list, i);
            }
        }
        self.unchanged.store(unchanged, Ordering::Relaxed);
        (early, files, late)
    }

    /// Change every entry of `list` (balanced over all ranks first). Returns true (on every
    /// rank) when a stop request cut it short. Collective.
    fn change_all(&self, comm: &dyn Comm, list: FileList) -> bool {
        let list = spread(comm, list);
        let stop = Some(&*self.context.stop);
        run_batches(comm, stop, Some(&self.progress), &list, |chunk| {
            self.change_chunk(chunk)
        })
    }

    /// Change directories one level at a time, in `order` ([`run_levels`]: ranks meet between
    /// levels only where they must). Returns true (on every rank) when a stop request cut it
    /// short. Collective.
    fn change_levels(&self, comm: &dyn Comm, levels: &[FileList], order: Order) -> bool {
        let progress = Some(&self.progress);
        run_levels(
            comm,
            levels,
            order,
            &self.context.stop,
            progress,
            &mut &*self,
        )
    }

    fn change_chunk(&self, chunk: &FileList) {
        let mut parent = ParentDir::beneath(self.roots.clone());
        for e in chunk.iter() {
            self.change_one(&mut parent, e);
        }
    }

    fn change_one(&self, parent: &mut ParentDir, e: Entry<'_>) {
        let m = &e.meta.expect("a stat list");
        let c = self.plan.change(e.kind, m);
        let op = if c.chown { "chown" } else { "chmod" };
        let entry = match parent.at(e.path) {
            Ok(at) => Checked::open(at.dir(), at.name(), e.kind),
            Err(err) => Err(err),
        };
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => return self.fail(e.path, op, err),
        };
        if c.chown {
            if let Err(err) = entry.chown(self.plan.owner.uid, self.plan.owner.gid) {
                return self.fail(e.path, "chown", err.into());
            }
        }
        if let Some(mode) = c.chmod {
            if let Err(err) = entry.chmod(mode) {
                return self.fail(e.path, "chmod", err.into());
            }
        }
        self.changed.fetch_add(1, Ordering::Relaxed);
    }

    fn fail(&self, path: &[u8], op: &'static str, err: std::io::Error) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.progress.errors.fetch_add(1, Ordering::Relaxed);
        if self.silent && err.raw_os_error() == Some(libc::EPERM) {
            self.hushed.fetch_add(1, Ordering::Relaxed);
        } else {
            let why = flist::beneath::explain(err);
            self.context.error(ItemError::new(path, op, why));
        }
    }

    /// Phase 5: the counts over all ranks; rank 0 tells how many failed and whether the run
    /// was cut short. Collective.
    fn end(&self, comm: &dyn Comm, listed: u64, interrupted: bool, started: Instant) -> Report {
        let mut n = [&self.changed, &self.unchanged, &self.failed, &self.hushed]
            .map(|a| a.load(Ordering::Relaxed));
        comm.allreduce(&mut n, ReduceOp::Sum);
        let [changed, unchanged, failed, hushed] = n;
        let seconds = started.elapsed().as_secs_f64();
        if comm.rank() == 0 {
            // Messages about the whole run: not in the report's sample of failed items.
            let events = &self.context.events;
            if failed > 0 {
                events.error(&match hushed {
                    0 => format!("{failed} items could not be changed (listed above)"),
                    h => format!(
                        "{failed} items could not be changed: {} listed above, {h} not listed \
                         (-s): Operation not permitted",
                        failed - h
                    ),
                });
            }
            if interrupted {
                events.error("interrupted by a signal: not everything was changed");
            }
        }
        Report {
            listed,
            selected: self.selected,
            changed,
            unchanged,
            failed,
            silenced: hushed,
            seconds,
            interrupted,
            failures: self.context.failures(),
        }
    }
}

/// chmod's part in [`run_levels`]: a change needs nothing from the other ranks but their
/// stop requests.
impl LevelWork for &Changer<'_> {
    fn work(&self, chunk: &FileList) {
        self.change_chunk(chunk);
    }

    fn meet(&mut self, comm: &dyn Comm, flag: bool) -> bool {
        comm.any(flag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(mode: Option<&str>, uid: Option<u32>, gid: Option<u32>, force: bool) -> Plan {
        Plan {
            mode: mode.map(|m| ModeChange::parse(m).unwrap()),
            owner: Owner { uid, gid },
            umask: 0o022,
            force,
            selector: RegexSelector::default(),
            euid: 0,
        }
    }

    fn meta(mode: u32, uid: u32, gid: u32) -> Meta {
        Meta {
            mode,
            uid,
            gid,
            ..Meta::default()
        }
    }

    #[test]
    fn only_differences_are_changed_unless_forced() {
        let p = plan(Some("755"), Some(5), None, false);
        let same = p.change(FileType::File, &meta(0o100755, 5, 9));
        assert_eq!((same.chown, same.chmod), (false, None));
        let other = p.change(FileType::File, &meta(0o100644, 6, 9));
        assert_eq!((other.chown, other.chmod), (true, Some(0o755)));
        let forced =
            plan(Some("755"), Some(5), None, true).change(FileType::File, &meta(0o100755, 5, 9));
        assert_eq!((forced.chown, forced.chmod), (true, Some(0o755)));
    }

    #[test]
    fn links_keep_their_mode_and_set_id_bits_survive_chown() {
        let p = plan(Some("a+rwx"), Some(7), None, false);
        let link = p.change(FileType::Symlink, &meta(0o120777, 0, 0));
        assert_eq!((link.chown, link.chmod), (true, None));
        // chown will clear set-user-ID (and set-group-ID with group execute): u+s puts it
        // back, g=u does not, as chown then chmod would.
        let suid = plan(Some("u+s"), Some(7), None, false);
        let c = suid.change(FileType::File, &meta(0o104755, 0, 0));
        assert_eq!((c.chown, c.chmod), (true, Some(0o4755)));
        let copy = plan(Some("g=u"), Some(7), None, false);
        let c = copy.change(FileType::File, &meta(0o106755, 0, 0));
        assert_eq!((c.chown, c.chmod), (true, Some(0o775)));
        let c =
            plan(Some("o+r"), Some(7), None, false).change(FileType::File, &meta(0o102700, 0, 0));
        assert_eq!((c.chown, c.chmod), (true, Some(0o2704)));
        // Directories keep their set-ID bits through chown.
        let c = copy.change(FileType::Dir, &meta(0o46755, 0, 0));
        assert_eq!((c.chown, c.chmod), (true, Some(0o6775)));
    }

    #[test]
    fn directories_losing_execute_go_last() {
        let p = plan(Some("u-x"), None, None, false);
        assert!(p.change(FileType::Dir, &meta(0o40755, 0, 0)).late);
        assert!(!p.change(FileType::File, &meta(0o100755, 0, 0)).late);
        let keep =
            plan(Some("go-w"), None, None, false).change(FileType::Dir, &meta(0o40777, 0, 0));
        assert!(!keep.late && keep.chmod == Some(0o755));
    }
}
