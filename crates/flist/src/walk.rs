//! The parallel tree walk: directories are work items of the distributed work-stealing queue,
//! read by rayon workers on every rank.
//!
//! Entries are stat'ed relative to their directory's descriptor (`fstatat`), which is both
//! cheaper than resolving a full path per file and what makes paths longer than `PATH_MAX` work.
//! A failure on one path (permission denied, vanished entry) is recorded with the path and the
//! operation; the walk goes on, and the caller learns that the walk was incomplete.

use crate::error::ItemError;
use crate::ids::IdTable;
use crate::noatime::NoAtime;
use crate::path::{normalize, PathLike};
use crate::record::{Detail, FileList, FileType, Meta};
use crate::spill::walked::{Finished, Spiller};
use crate::spill::{WalkRuns, WalkSpill};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use steal::progress::Progress;
use steal::queue;
use steal::{Comm, CommExt};

pub use crate::at::open_long;
use crate::at::At;

/// How to walk.
#[derive(Clone, Copy)]
pub struct WalkOptions<'a> {
    /// `Stat`: full metadata for every entry. `Lite`: types from `d_type` only (stat only when
    /// the file system does not report a type).
    pub detail: Detail,
    /// Follow symbolic links (`-L`): record and descend into what links point to. Directory
    /// cycles through links are detected and reported, not followed.
    pub dereference: bool,
    /// Read directories with `O_NOATIME` (where permitted) when asked, so the walk leaves
    /// their access times alone; directories the kernel refuses it for are read anyway and
    /// counted there ([`NoAtime`]).
    pub noatime: &'a NoAtime,
    /// Seed of the work-stealing victim choice.
    pub seed: u64,
    /// Set (by a signal handler) to stop early; the result then says `interrupted`.
    pub stop: Option<&'a AtomicBool>,
    /// Counters to report progress with (items = entries recorded or consumed by `visit`).
    pub progress: Option<&'a Progress>,
    /// Called on a walk worker for each entry read from a directory, before it is recorded:
    /// `visit(dir, name, path, kind)` with `dir` the open directory the entry was read from,
    /// `name` the entry's name in it (one component, no `/`), `path` its full normalised path
    /// (the same bytes the record would carry) and `kind` its type (from `d_type`, or from
    /// `stat` when the walk stats). Returning `true` consumes the entry: it is not recorded and,
    /// if it is a directory, not descended. Roots are recorded without a call (they are not
    /// read from a directory). `rm --aggressive` unlinks files here, while their directory is
    /// open, instead of listing them for later.
    pub visit: Option<&'a Visit<'a>>,
    /// Stat walks: read the passwd and group databases into the list's
    /// [`FileList::users`]/[`FileList::groups`] (needed to print names, sort by them or write
    /// v4 lists). Reading them goes through NSS, which costs about a millisecond, more with a
    /// directory service: a tool that needs no names leaves the tables empty.
    pub id_tables: bool,
    /// Stat walks: keep at most about this budget of records in memory on each rank, spilling
    /// the rest to sorted runs ([`Walked::spilled`]). `None` (or a lite walk): every record is
    /// in [`Walked::list`]. A walk that stays below a quarter of the limit on every rank is the
    /// walk without it: nothing is written.
    pub spill: Option<WalkSpill<'a>>,
}

/// The entry hook of [`WalkOptions::visit`]: `(dir, name, path, kind) -> consumed`.
pub type Visit<'a> = dyn Fn(BorrowedFd<'_>, &[u8], &[u8], FileType) -> bool + Sync + 'a;

impl Default for WalkOptions<'_> {
    fn default() -> Self {
        WalkOptions {
            detail: Detail::Stat,
            dereference: false,
            noatime: &crate::noatime::OFF,
            seed: 1,
            stop: None,
            progress: None,
            visit: None,
            id_tables: true,
            spill: None,
        }
    }
}

/// What a walk produced on this rank, and what all ranks agree on.
///
/// A walk goes on past the paths it cannot read, so its list may be partial: the failures are
/// in [`errors`](Walked::errors) (this rank's, each with its path and operation) and counted in
/// [`total_errors`](Walked::total_errors). [`into_result`](Walked::into_result) gives the list
/// only when the walk is complete, and an [`Incomplete`] error otherwise.
#[derive(Debug)]
#[must_use = "a walk's failures are in `errors`: check `complete` or use `into_result()`"]
pub struct Walked {
    /// This rank's records (with the system's user and group tables for stat walks); empty
    /// (with the tables) when the walk spilled.
    pub list: FileList,
    /// With [`WalkOptions::spill`], when any rank's records outgrew a quarter of the limit: every
    /// record of this rank, in sorted runs (the same variant on every rank; a failure to
    /// spill on any rank, a full TMPDIR, is every rank's error, and the walk is then not
    /// complete). `None`: the records are in `list`.
    pub spilled: Option<Result<WalkRuns, crate::Error>>,
    /// Failures seen by this rank, each with its path and operation.
    pub errors: Vec<ItemError>,
    /// Failures on all ranks.
    pub total_errors: u64,
    /// Records on all ranks.
    pub total_items: u64,
    /// True (on every rank) when no failure happened anywhere and the walk was not interrupted:
    /// only then may a tool act on what is *absent* from the list (e.g. `sync --delete`).
    pub complete: bool,
    /// True when a stop request cut the walk short.
    pub interrupted: bool,
    /// Directories read (or taken from an earlier walk) on all ranks.
    pub dirs_read: u64,
    /// Directories found but left unread by a stop request, on all ranks.
    pub dirs_left: u64,
}

impl Walked {
    /// This rank's list when the walk is complete (no failure on any rank, not interrupted);
    /// otherwise an [`Incomplete`] error holding the whole result (the partial list and this
    /// rank's failures). Every rank gets the same variant.
    ///
    /// ```
    /// use flist::walk::{walk, WalkOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a"), b"a").unwrap();
    /// let missing = dir.path().join("missing");
    /// let ok = steal::local::run(1, |comm| walk(comm, &[dir.path()], &WalkOptions::default()).into_result());
    /// assert_eq!(ok[0].as_ref().unwrap().len(), 2);
    /// let failed = steal::local::run(1, |comm| walk(comm, &[&missing], &WalkOptions::default()).into_result());
    /// let incomplete = failed[0].as_ref().unwrap_err();
    /// assert_eq!(incomplete.walked.errors[0].op, "stat");
    /// assert!(incomplete.to_string().starts_with("walk incomplete: 1 path could not be read"));
    /// ```
    pub fn into_result(self) -> Result<FileList, Incomplete> {
        if self.complete {
            Ok(self.list)
        } else {
            Err(Incomplete {
                walked: Box::new(self),
            })
        }
    }

    /// True when no failure happened on any rank and the walk was not interrupted (the same on
    /// every rank).
    pub fn is_complete(&self) -> bool {
        self.complete
    }
}

/// A walk that did not see everything: some paths could not be read (on some rank), or a stop
/// request cut it short. [`Walked::into_result`] returns it; it holds the whole result.
#[derive(Debug)]
pub struct Incomplete {
    /// The walk's result on this rank: the partial list and this rank's failures.
    pub walked: Box<Walked>,
}

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = &self.walked;
        write!(f, "walk incomplete:")?;
        if w.total_errors > 0 {
            let s = if w.total_errors == 1 {
                " path could not be read"
            } else {
                " paths could not be read"
            };
            write!(f, " {}{s}", w.total_errors)?;
            if let Some(first) = w.errors.first() {
                write!(f, " (first here: {first})")?;
            }
        }
        if w.interrupted {
            let and = if w.total_errors > 0 { ";" } else { "" };
            write!(f, "{and} interrupted")?;
        }
        Ok(())
    }
}

impl std::error::Error for Incomplete {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.walked
            .errors
            .first()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// A directory to read, with the identities of its ancestors when links are followed (to
/// detect cycles). A work-queue item (steal's typed encoding).
#[derive(serde::Serialize, serde::Deserialize)]
struct DirItem {
    #[serde(with = "serde_bytes")]
    path: Vec<u8>,
    /// `(device, inode)` of each ancestor directory.
    ancestors: Vec<(u64, u64)>,
    /// For a resuming walk: the directory's stamp from a `stat` this walk made of it before
    /// reading it (its parent's read, or the root's), which saves an `fstat` per directory; `None`
    /// takes one when it is opened. (Replaced between that `stat` and the read, the directory read
    /// is recorded under the stamp of the one replaced: a later walk finds another inode there,
    /// or, moved back, a ctime the rename moved on; either way it reads the directory again.)
    stamp: Option<DirStamp>,
}

/// Walk `roots` (the same list on every rank) on all ranks. Collective.
///
/// Each root is recorded itself, and directories are descended. Relative roots are taken from the
/// current directory; every recorded path is absolute and normalised. Roots are any
/// [`PathLike`]: byte strings, `Path`s, `OsStr`s or `str`s. A path that cannot be read is
/// recorded in [`Walked::errors`] and the walk goes on: see [`Walked::into_result`].
///
/// ```
/// use flist::walk::{walk, WalkOptions};
/// use flist::FileType;
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir(dir.path().join("sub")).unwrap();
/// std::fs::write(dir.path().join("sub/file"), b"data").unwrap();
/// // Two thread ranks in this process; under `steal::launch::run` the same code runs on MPI.
/// let counts = steal::local::run(2, |comm| {
///     let walked = walk(comm, &[dir.path()], &WalkOptions::default());
///     assert!(walked.complete, "{:?}", walked.errors);
///     let files = walked.list.iter().filter(|e| e.kind == FileType::File).count();
///     (walked.total_items, files)
/// });
/// // Every rank knows the total (root, sub, sub/file); each holds its share of the records.
/// assert!(counts.iter().all(|&(total, _)| total == 3));
/// assert_eq!(counts.iter().map(|&(_, files)| files).sum::<usize>(), 1);
/// ```
pub fn walk<R: PathLike>(comm: &dyn Comm, roots: &[R], opts: &WalkOptions) -> Walked {
    let roots: Vec<&[u8]> = roots.iter().map(|r| r.path_bytes()).collect();
    walk_bytes(comm, &roots, opts)
}

/// A directory's identity and times as a walk found them when it opened the directory, before
/// reading its entries: an entry added, removed or renamed since moves `mtime` and `ctime` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DirStamp {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Last modification: seconds since the epoch, nanoseconds.
    pub mtime: (i64, u32),
    /// Last status change: seconds since the epoch, nanoseconds.
    pub ctime: (i64, u32),
}

impl DirStamp {
    fn of_meta(m: &Meta) -> DirStamp {
        DirStamp {
            dev: m.dev,
            ino: m.ino,
            mtime: (m.mtime, m.mtime_nsec),
            ctime: (m.ctime, m.ctime_nsec),
        }
    }

    fn of(st: &rustix::fs::Stat) -> DirStamp {
        DirStamp {
            dev: st.st_dev,
            ino: st.st_ino,
            mtime: (st.st_mtime, st.st_mtime_nsec as u32),
            ctime: (st.st_ctime, st.st_ctime_nsec as u32),
        }
    }
}

/// What an earlier walk of the same trees recorded, and where this walk records the directories
/// it reads completely: [`walk_resuming`] calls it from its workers.
pub trait Resume: Sync {
    /// The records (full paths, of the walk's detail) an earlier walk read from the directory
    /// `path`, now stamped `stamp`, when it read every entry of that very directory with the
    /// same stamp; `None` reads the directory.
    fn recorded(&self, path: &[u8], stamp: &DirStamp) -> Option<FileList>;
    /// A record of the directory `path` (stamped `stamp` before its read) that this walk is
    /// about to read, to be given each entry as it is read ([`DirRecord`]); `None` records
    /// nothing. Entry by entry, while each entry's fields are at hand: reading them back from
    /// the directory's list afterwards was a third of a checkpointed walk's extra time.
    fn record(&self, path: &[u8], stamp: &DirStamp) -> Option<Box<dyn DirRecord + '_>>;
    /// `(dev, ino)` of a directory that is neither recorded nor descended when found in a tree
    /// (the checkpoint directory when it lies inside the tree walked).
    fn skip(&self) -> Option<(u64, u64)>;
}

/// The record of one directory being read (see [`Resume::record`]).
pub trait DirRecord {
    /// The entry `name` of the directory, of type `kind`, with its metadata on a stat walk:
    /// the walk's record of it, in the order the walk made them.
    fn entry(&mut self, name: &[u8], kind: FileType, meta: Option<&Meta>);
    /// Every entry of the directory was read and given (nothing failed, nothing was consumed
    /// by a visitor). A record dropped without this call records nothing.
    fn read_all(self: Box<Self>);
}

/// [`walk`], taking the directories an earlier walk read completely from `resume` instead of
/// reading them again (their subdirectories are walked: loaded or read), and handing every
/// directory it reads completely to `resume`. Collective.
pub fn walk_resuming<R: PathLike>(
    comm: &dyn Comm,
    roots: &[R],
    opts: &WalkOptions,
    resume: &dyn Resume,
) -> Walked {
    let roots: Vec<&[u8]> = roots.iter().map(|r| r.path_bytes()).collect();
    walk_with(comm, &roots, opts, Some(resume))
}

fn walk_bytes(comm: &dyn Comm, roots: &[&[u8]], opts: &WalkOptions) -> Walked {
    walk_with(comm, roots, opts, None)
}

fn walk_with(
    comm: &dyn Comm,
    roots: &[&[u8]],
    opts: &WalkOptions,
    resume: Option<&dyn Resume>,
) -> Walked {
    let cwd = crate::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let sink = Sink {
        list: Mutex::new(FileList::new(opts.detail)),
        errors: Mutex::new(Vec::new()),
        deep: Mutex::default(),
        spill: opts
            .spill
            .filter(|_| opts.detail == Detail::Stat)
            .map(|s| Spiller::new(&s, comm.size())),
    };
    let mut initial = Vec::new();
    // Roots are shared round-robin, so many roots start on many ranks.
    for (i, root) in roots.iter().enumerate() {
        if i % comm.size() != comm.rank() {
            continue;
        }
        let path = normalize(root, &cwd);
        let mut local = FileList::new(opts.detail);
        match stat_path(&path, opts.dereference) {
            Ok(st) => {
                let meta = Meta::from_stat(&st);
                local.push(&path, meta.file_type(), Some(meta));
                if meta.file_type() == FileType::Dir {
                    let ancestors = if opts.dereference {
                        vec![(meta.dev, meta.ino)]
                    } else {
                        Vec::new()
                    };
                    let stamp = resume.map(|_| DirStamp::of_meta(&meta));
                    initial.push(DirItem {
                        path,
                        ancestors,
                        stamp,
                    });
                }
            }
            Err(e) => sink.error(ItemError::new(&path, "stat", e.into())),
        }
        sink.add(local);
    }
    let cfg = queue::Config {
        seed: opts.seed,
        stop: opts.stop,
        progress: opts.progress,
        ..queue::Config::default()
    };
    let outcome = queue::run(comm, &cfg, initial, |dir: DirItem, spawned| {
        read_dir(dir, opts, resume, &sink, spawned)
    });
    let Sink {
        list,
        errors,
        spill,
        ..
    } = sink;
    let mut list = list.into_inner().expect("walk list");
    let errors = errors.into_inner().expect("walk errors");
    list.shrink_to_fit();
    if opts.detail == Detail::Stat && opts.id_tables {
        (list.users, list.groups) = system_tables(comm);
    }
    let mut spilled = None;
    if let Some(spill) = spill {
        let tables = (list.users.clone(), list.groups.clone());
        match spill.finish(comm, list) {
            Finished::Kept(rest) => list = rest,
            Finished::Spilled(runs) => {
                list = FileList::new(opts.detail);
                (list.users, list.groups) = tables;
                spilled = Some(runs);
            }
        }
    }
    let in_runs = spilled
        .as_ref()
        .and_then(|r| r.as_ref().ok())
        .map_or(0, |r| r.records());
    let mut counts = [errors.len() as u64, list.len() as u64 + in_runs];
    comm.allreduce(&mut counts, steal::ReduceOp::Sum);
    let spill_failed = matches!(spilled, Some(Err(_)));
    Walked {
        list,
        spilled,
        errors,
        total_errors: counts[0],
        total_items: counts[1],
        complete: counts[0] == 0 && !outcome.interrupted && !spill_failed,
        interrupted: outcome.interrupted,
        dirs_read: outcome.processed,
        dirs_left: outcome.dropped,
    }
}

/// The passwd and group databases, read once on rank 0 and broadcast (so 256 ranks don't ask
/// the directory service 256 times).
fn system_tables(comm: &dyn Comm) -> (IdTable, IdTable) {
    comm.bcast_with(0, || (IdTable::system_users(), IdTable::system_groups()))
}

/// Where workers put what they find. One lock per directory read, not per entry.
struct Sink<'a> {
    list: Mutex<FileList>,
    errors: Mutex<Vec<ItemError>>,
    /// Deep directories read, held open by path: see [`Sink::open_dir`].
    deep: Mutex<HashMap<Vec<u8>, Arc<OwnedFd>>>,
    /// Where the list goes when it reaches a quarter of the memory limit ([`WalkOptions::spill`]).
    spill: Option<Spiller<'a>>,
}

/// A directory with more components than this is a deep one ([`Sink::open_dir`]).
const DEEP_COMPONENTS: usize = 64;
/// Deep directories held open at most in one walk (all are closed when full).
const DEEP_HELD: usize = 64;

impl Sink<'_> {
    fn add(&self, part: FileList) {
        if part.is_empty() {
            return;
        }
        let mut list = self.list.lock().expect("walk list");
        list.append(part);
        let Some(spill) = &self.spill else {
            return;
        };
        if spill.full(&list) {
            // Taken under the lock, spilled outside it: the other workers go on adding to a
            // new list while this one is sorted and written.
            let full = std::mem::replace(&mut *list, FileList::new(Detail::Stat));
            drop(list);
            spill.spill(full);
        }
    }
    fn error(&self, e: ItemError) {
        self.errors.lock().expect("walk errors").push(e);
    }

    /// Open the directory `path` to read it. A deep one (more than [`DEEP_COMPONENTS`]
    /// components) is opened by name in its parent when the walk still holds that open, and
    /// is then held itself: opened by its whole path, every directory of a tree 3,000 levels
    /// deep would cost a lookup of thousands of components. A directory that cannot be opened
    /// in its parent is opened by its path (which reports the error, if any).
    fn open_dir(&self, path: &[u8], opts: &WalkOptions) -> Result<OwnedFd, Errno> {
        if path.iter().filter(|&&b| b == b'/').count() <= DEEP_COMPONENTS {
            return open_dir(path, opts.noatime);
        }
        let parent = self
            .deep
            .lock()
            .expect("walk deep dirs")
            .get(crate::path::parent(path))
            .cloned();
        let in_parent = parent.and_then(|dir| {
            // Not through a symlink put there since the parent was read, unless the walk
            // follows them.
            let nofollow = if opts.dereference {
                OFlags::empty()
            } else {
                OFlags::NOFOLLOW
            };
            open_dir_at(
                dir.as_fd(),
                crate::path::basename(path),
                nofollow,
                opts.noatime,
            )
            .ok()
        });
        let fd = match in_parent {
            Some(fd) => fd,
            None => open_dir(path, opts.noatime)?,
        };
        if let Ok(held) = fd.try_clone() {
            let mut deep = self.deep.lock().expect("walk deep dirs");
            if deep.len() >= DEEP_HELD {
                deep.clear();
            }
            deep.insert(path.to_vec(), Arc::new(held));
        }
        Ok(fd)
    }
}

fn read_dir(
    dir: DirItem,
    opts: &WalkOptions,
    resume: Option<&dyn Resume>,
    sink: &Sink,
    spawned: &mut Vec<DirItem>,
) {
    let fd = match sink.open_dir(&dir.path, opts) {
        Ok(fd) => fd,
        Err(e) => return sink.error(ItemError::new(&dir.path, "open directory", e.into())),
    };
    // Stamped before the read: an entry changed during it moves the times past the stamp, so
    // that a later walk reads the directory again.
    let stamp = match (resume, dir.stamp) {
        (None, _) => None,
        (Some(_), Some(stamp)) => Some(stamp),
        (Some(_), None) => match rustix::fs::fstat(&fd) {
            Ok(st) => Some(DirStamp::of(&st)),
            Err(e) => return sink.error(ItemError::new(&dir.path, "stat directory", e.into())),
        },
    };
    let skip = resume.and_then(|r| r.skip());
    if let (Some(r), Some(stamp)) = (resume, &stamp) {
        if let Some(recorded) = r.recorded(&dir.path, stamp) {
            return take_recorded(&dir, fd.as_fd(), recorded, skip, opts, sink, spawned);
        }
    }
    // Dir::new takes the descriptor as is (read_from would re-open "." for every directory).
    let mut entries = match rustix::fs::Dir::new(fd) {
        Ok(d) => d,
        Err(e) => return sink.error(ItemError::new(&dir.path, "read directory", e.into())),
    };
    let mut local = FileList::new(opts.detail);
    let mut consumed = 0u64;
    // An entry failed: the directory was not read completely (not handed to `resume`).
    let mut failed = false;
    let mut record = match (resume, &stamp) {
        (Some(r), Some(stamp)) => r.record(&dir.path, stamp),
        _ => None,
    };
    let mut child = dir.path.clone();
    let base_len = child.len() + usize::from(child != b"/");
    if child != b"/" {
        child.push(b'/');
    }
    while let Some(entry) = entries.read() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                sink.error(ItemError::new(&dir.path, "read directory", e.into()));
                failed = true;
                break;
            }
        };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        child.truncate(base_len);
        child.extend_from_slice(name);
        let d_type = from_dirent_type(entry.file_type());
        let need_meta = opts.detail == Detail::Stat
            || d_type == FileType::Unknown
            || (opts.dereference && d_type == FileType::Symlink);
        // A directory with the inode of the one to skip: is it that one (same device)?
        let need_stat =
            need_meta || skip.is_some_and(|(_, ino)| entry.ino() == ino && d_type == FileType::Dir);
        let (kind, meta) = if need_stat {
            let dirfd = match entries.fd() {
                Ok(fd) => fd,
                Err(e) => return sink.error(ItemError::new(&dir.path, "read directory", e.into())),
            };
            match stat_at(dirfd, name, opts.dereference) {
                Ok(st) => {
                    let m = Meta::from_stat(&st);
                    (m.file_type(), Some(m))
                }
                Err(e) => {
                    let op = if e == Errno::NOENT {
                        "stat (vanished during the walk)"
                    } else {
                        "stat"
                    };
                    sink.error(ItemError::new(&child, op, e.into()));
                    failed = true;
                    continue;
                }
            }
        } else {
            (d_type, None)
        };
        if skip.is_some_and(|s| kind == FileType::Dir && meta.is_some_and(|m| (m.dev, m.ino) == s))
        {
            continue;
        }
        // A stat made only to tell the directory to skip leaves the record as it was.
        let meta = if need_meta { meta } else { None };
        if let Some(visit) = opts.visit {
            let dirfd = match entries.fd() {
                Ok(fd) => fd,
                Err(e) => {
                    // Keep what was read so far (recorded below), like a failed read does.
                    sink.error(ItemError::new(&dir.path, "read directory", e.into()));
                    failed = true;
                    break;
                }
            };
            if visit(dirfd, name, &child, kind) {
                consumed += 1;
                continue;
            }
        }
        local.push(&child, kind, meta);
        if let Some(r) = record.as_mut() {
            r.entry(name, kind, meta.as_ref());
        }
        if kind == FileType::Dir {
            let fresh = resume.and_then(|_| meta.as_ref().map(DirStamp::of_meta));
            descend(&dir, &child, meta, fresh, opts, sink, spawned);
        }
    }
    if let Some(p) = opts.progress {
        p.add(local.len() as u64 + consumed, 0);
    }
    if let (Some(r), false, 0) = (record, failed, consumed) {
        r.read_all();
    }
    sink.add(local);
}

/// The directory `dir` (open as `fd`) as an earlier walk recorded it, `recorded`, taken instead
/// of reading it: its subdirectories are stat'ed again (their own times move with their
/// entries) and queued, the one to `skip` left out.
#[allow(clippy::too_many_arguments)]
fn take_recorded(
    dir: &DirItem,
    fd: BorrowedFd,
    recorded: FileList,
    skip: Option<(u64, u64)>,
    opts: &WalkOptions,
    sink: &Sink,
    spawned: &mut Vec<DirItem>,
) {
    let mut local = FileList::new(opts.detail);
    for e in recorded.iter() {
        if skip
            .is_some_and(|s| e.kind == FileType::Dir && e.meta.is_some_and(|m| (m.dev, m.ino) == s))
        {
            continue;
        }
        if e.kind == FileType::Dir && opts.detail == Detail::Stat {
            // A subdirectory's record is made again: its own times move with its
            // entries (which this walk may read again), not with this directory's.
            let name = crate::path::basename(e.path);
            let m = match stat_at(fd, name, opts.dereference) {
                Ok(st) => Meta::from_stat(&st),
                Err(err) => {
                    let op = if err == Errno::NOENT {
                        "stat (vanished during the walk)"
                    } else {
                        "stat"
                    };
                    sink.error(ItemError::new(e.path, op, err.into()));
                    continue;
                }
            };
            if skip.is_some_and(|s| (m.dev, m.ino) == s) {
                continue;
            }
            local.push(e.path, m.file_type(), Some(m));
            if m.file_type() == FileType::Dir {
                let fresh = Some(DirStamp::of_meta(&m));
                descend(dir, e.path, Some(m), fresh, opts, sink, spawned);
            }
            continue;
        }
        local.push(e.path, e.kind, e.meta);
        if e.kind == FileType::Dir {
            // Its record is an earlier walk's: its stamp is taken when it is opened.
            descend(dir, e.path, e.meta, None, opts, sink, spawned);
        }
    }
    if let Some(p) = opts.progress {
        p.add(local.len() as u64, 0);
    }
    sink.add(local);
}

/// Queue the directory `child` (found in `dir`, with `meta` when stat'ed) to be read, unless
/// following links leads back to one of its ancestors (a cycle, reported).
#[allow(clippy::too_many_arguments)]
fn descend(
    dir: &DirItem,
    child: &[u8],
    meta: Option<Meta>,
    stamp: Option<DirStamp>,
    opts: &WalkOptions,
    sink: &Sink,
    spawned: &mut Vec<DirItem>,
) {
    let mut ancestors = Vec::new();
    if opts.dereference {
        let m = meta.expect("dereferencing walks stat directories");
        if dir.ancestors.contains(&(m.dev, m.ino)) {
            sink.error(ItemError::new(
                child,
                "follow link (directory cycle, not descended)",
                io::Error::from_raw_os_error(libc::ELOOP),
            ));
            return;
        }
        ancestors = dir.ancestors.clone();
        ancestors.push((m.dev, m.ino));
    }
    spawned.push(DirItem {
        path: child.to_vec(),
        ancestors,
        stamp,
    });
}

fn from_dirent_type(t: rustix::fs::FileType) -> FileType {
    use rustix::fs::FileType as T;
    match t {
        T::RegularFile => FileType::File,
        T::Directory => FileType::Dir,
        T::Symlink => FileType::Symlink,
        T::Fifo => FileType::Fifo,
        T::Socket => FileType::Socket,
        T::BlockDevice => FileType::BlockDev,
        T::CharacterDevice => FileType::CharDev,
        _ => FileType::Unknown,
    }
}

/// `stat` (following links) or `lstat` of `name` in the directory `dir`. When following, a
/// dangling link is recorded as the link itself (as `find -L` does).
fn stat_at(dir: BorrowedFd<'_>, name: &[u8], follow: bool) -> Result<rustix::fs::Stat, Errno> {
    if follow {
        match rustix::fs::statat(dir, name, AtFlags::empty()) {
            Err(Errno::NOENT) | Err(Errno::LOOP) => {}
            r => return r,
        }
    }
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// Stat a whole path, of any length.
pub fn stat_path(path: &[u8], follow: bool) -> Result<rustix::fs::Stat, Errno> {
    At::with(path, |dir, name| stat_at(dir, name, follow))
}

/// Open a directory for reading, with `O_NOATIME` when asked and permitted ([`NoAtime`]).
pub fn open_dir(path: &[u8], noatime: &NoAtime) -> Result<OwnedFd, Errno> {
    noatime.open_path(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC)
}

/// [`open_dir`] of `name` in the directory `dir`, with `extra` flags.
fn open_dir_at(
    dir: BorrowedFd<'_>,
    name: &[u8],
    extra: OFlags,
    noatime: &NoAtime,
) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | extra;
    noatime.open(flags, |f| {
        rustix::fs::openat(dir, name, f, rustix::fs::Mode::empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A deep directory is opened in its parent, held since the walk read it (not by its whole
    /// path): moved away after the parent was opened, the child is still found in it.
    #[test]
    fn deep_directories_are_opened_in_their_parent_held_open() {
        let t = tempfile::tempdir().unwrap();
        let levels = DEEP_COMPONENTS + 4;
        let rel = vec!["d"; levels].join("/");
        std::fs::create_dir_all(t.path().join(&rel)).unwrap();
        let sink = Sink {
            list: Mutex::new(FileList::new(Detail::Lite)),
            errors: Mutex::new(Vec::new()),
            deep: Mutex::default(),
            spill: None,
        };
        let opts = WalkOptions::default();
        let parent = t.path().join(vec!["d"; levels - 1].join("/"));
        let parent = parent.as_os_str().as_bytes();
        assert!(parent.iter().filter(|&&b| b == b'/').count() > DEEP_COMPONENTS);
        sink.open_dir(parent, &opts).unwrap();
        assert_eq!(sink.deep.lock().unwrap().len(), 1);
        std::fs::rename(OsStr::from_bytes(parent), t.path().join("moved")).unwrap();
        let child = [parent, b"/d"].concat();
        assert_eq!(
            open_dir(&child, &crate::noatime::OFF).unwrap_err(),
            Errno::NOENT
        );
        let fd = sink.open_dir(&child, &opts).unwrap();
        let moved_child = std::fs::metadata(t.path().join("moved/d")).unwrap();
        assert_eq!(
            rustix::fs::fstat(&fd).unwrap().st_ino,
            std::os::unix::fs::MetadataExt::ino(&moved_child)
        );
        // Shallow directories are opened by path and never held.
        sink.open_dir(t.path().as_os_str().as_bytes(), &opts)
            .unwrap();
        assert_eq!(sink.deep.lock().unwrap().len(), 2);
    }

    /// Sorted paths of every rank's records, relative to `root`.
    fn relative(lists: Vec<FileList>, root: &[u8]) -> Vec<Vec<u8>> {
        let mut paths: Vec<Vec<u8>> = lists
            .iter()
            .flat_map(|l| l.iter().map(|e| e.path[root.len()..].to_vec()))
            .collect();
        paths.sort();
        paths
    }

    #[test]
    fn roots_may_be_bytes_paths_os_strings_or_strs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(OsStr::from_bytes(b"r\xff"));
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/f"), b"").unwrap();
        let bytes = root.as_os_str().as_bytes().to_vec();
        let want: Vec<Vec<u8>> = vec![b"".to_vec(), b"/d".to_vec(), b"/d/f".to_vec()];
        let opts = WalkOptions::default();
        type WalkWith<'a> = &'a (dyn Fn(&dyn Comm) -> Walked + Sync);
        let walks: [WalkWith; 5] = [
            &|c| walk(c, std::slice::from_ref(&bytes), &opts),
            &|c| walk(c, &[bytes.as_slice()], &opts),
            &|c| walk(c, &[root.as_path()], &opts),
            &|c| walk(c, std::slice::from_ref(&root), &opts),
            &|c| walk(c, &[root.as_os_str()], &opts),
        ];
        for (i, w) in walks.iter().enumerate() {
            let lists = steal::local::run(2, |c| w(c).into_result().unwrap());
            assert_eq!(relative(lists, &bytes), want, "form {i}");
        }
        // A UTF-8 root as a str.
        let plain = tmp.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        let s = plain.to_str().unwrap();
        let lists = steal::local::run(1, |c| walk(c, &[s], &opts).into_result().unwrap());
        assert_eq!(relative(lists, s.as_bytes()), [b"".to_vec()]);
    }

    #[test]
    fn an_incomplete_walk_is_an_error_on_every_rank_with_the_failures_and_partial_list() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("here"), b"").unwrap();
        let missing = tmp.path().join("missing");
        let results = steal::local::run(2, |c| {
            walk(c, &[tmp.path(), missing.as_path()], &WalkOptions::default()).into_result()
        });
        let mut failures = Vec::new();
        let mut partial = 0;
        for r in results {
            let incomplete = r.expect_err("a root is missing: incomplete on every rank");
            let w = &incomplete.walked;
            assert!(!w.is_complete() && !w.interrupted);
            assert_eq!(w.total_errors, 1);
            assert_eq!(w.total_items, 2, "the root and its file were still listed");
            partial += w.list.len();
            let text = incomplete.to_string();
            assert!(
                text.starts_with("walk incomplete: 1 path could not be read"),
                "{text}"
            );
            if let Some(e) = w.errors.first() {
                assert!(text.contains("(first here: stat "), "{text}");
                let source = std::error::Error::source(&incomplete).expect("the first failure");
                assert_eq!(source.to_string(), e.to_string());
                failures.push((e.op, e.path.clone()));
            }
        }
        assert_eq!(partial, 2);
        assert_eq!(
            failures,
            [("stat", missing.as_os_str().as_bytes().to_vec())],
            "the failure is held by the rank that saw it, with its path and operation"
        );
        // Interrupted before it starts: incomplete too, and said so.
        let stop = AtomicBool::new(true);
        let results = steal::local::run(1, |c| {
            let opts = WalkOptions {
                stop: Some(&stop),
                ..WalkOptions::default()
            };
            walk(c, &[tmp.path()], &opts).into_result()
        });
        let err = results.into_iter().next().unwrap().unwrap_err();
        assert!(err.walked.interrupted);
        assert_eq!(err.to_string(), "walk incomplete: interrupted");
    }

    /// Records what a walk read; gives back a chosen directory's records (changed, to see
    /// them used) while its stamp is the one recorded.
    type ReadDirs = HashMap<Vec<u8>, (DirStamp, Vec<Vec<u8>>)>;

    #[derive(Default)]
    struct Recorder {
        read: Mutex<ReadDirs>,
        give: Mutex<HashMap<Vec<u8>, (DirStamp, FileList)>>,
        skip: Option<(u64, u64)>,
    }

    impl Resume for Recorder {
        fn recorded(&self, path: &[u8], stamp: &DirStamp) -> Option<FileList> {
            let give = self.give.lock().unwrap();
            let (s, list) = give.get(path)?;
            (s == stamp).then(|| {
                let mut l = FileList::new(list.detail());
                for e in list.iter() {
                    l.push(e.path, e.kind, e.meta);
                }
                l
            })
        }
        fn record(&self, path: &[u8], stamp: &DirStamp) -> Option<Box<dyn DirRecord + '_>> {
            Some(Box::new(Recording {
                into: &self.read,
                path: path.to_vec(),
                stamp: *stamp,
                paths: Vec::new(),
            }))
        }
        fn skip(&self) -> Option<(u64, u64)> {
            self.skip
        }
    }

    /// One directory's entries as given, kept as full paths once all were read.
    struct Recording<'a> {
        into: &'a Mutex<ReadDirs>,
        path: Vec<u8>,
        stamp: DirStamp,
        paths: Vec<Vec<u8>>,
    }

    impl DirRecord for Recording<'_> {
        fn entry(&mut self, name: &[u8], _kind: FileType, _meta: Option<&Meta>) {
            let sep: &[u8] = if self.path == b"/" { b"" } else { b"/" };
            self.paths.push([&self.path[..], sep, name].concat());
        }
        fn read_all(self: Box<Self>) {
            let Recording {
                into,
                path,
                stamp,
                paths,
            } = *self;
            into.lock().unwrap().insert(path, (stamp, paths));
        }
    }

    #[test]
    fn a_resuming_walk_takes_recorded_directories_and_reads_changed_ones_again() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("r");
        for d in ["a/deep", "b", "ck"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("a/f"), b"").unwrap();
        std::fs::write(root.join("a/deep/g"), b"").unwrap();
        std::fs::write(root.join("ck/mark"), b"").unwrap();
        let rb = root.as_os_str().as_bytes().to_vec();
        let p = |rel: &str| [rb.as_slice(), rel.as_bytes()].concat();
        let ck = std::fs::metadata(root.join("ck")).unwrap();
        let skip = Some((
            std::os::unix::fs::MetadataExt::dev(&ck),
            std::os::unix::fs::MetadataExt::ino(&ck),
        ));
        for detail in [Detail::Lite, Detail::Stat] {
            let opts = WalkOptions {
                detail,
                ..WalkOptions::default()
            };
            let first = Recorder {
                skip,
                ..Recorder::default()
            };
            let lists = steal::local::run(2, |c| {
                let w = walk_resuming(c, std::slice::from_ref(&rb), &opts, &first);
                assert!(w.complete);
                w.list
            });
            // The checkpoint directory is neither recorded nor descended.
            let want: Vec<Vec<u8>> = ["", "/a", "/a/deep", "/a/deep/g", "/a/f", "/b"]
                .iter()
                .map(|r| r.as_bytes().to_vec())
                .collect();
            assert_eq!(relative(lists, &rb), want, "{detail:?}");
            let read = first.read.into_inner().unwrap();
            let mut dirs: Vec<_> = read.keys().cloned().collect();
            dirs.sort();
            assert_eq!(dirs, [p(""), p("/a"), p("/a/deep"), p("/b")]);
            assert_eq!(read[&p("/a")].1.len(), 2);
            // Rerun: `a` recorded (with a phantom entry, to see the record used), its
            // subdirectory `deep` still walked; `b` recorded but changed since: read again.
            let second = Recorder {
                skip,
                ..Recorder::default()
            };
            let mut phantom = FileList::new(detail);
            let meta = |kind: u32| {
                (detail == Detail::Stat).then(|| Meta {
                    mode: kind,
                    ..Meta::default()
                })
            };
            phantom.push(&p("/a/deep"), FileType::Dir, meta(libc::S_IFDIR));
            phantom.push(&p("/a/phantom"), FileType::File, meta(libc::S_IFREG));
            let mut b = FileList::new(detail);
            b.push(&p("/b/stale"), FileType::File, meta(libc::S_IFREG));
            {
                let mut give = second.give.lock().unwrap();
                give.insert(p("/a"), (read[&p("/a")].0, phantom));
                give.insert(p("/b"), (read[&p("/b")].0, b));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::write(root.join("b/new"), b"").unwrap();
            let lists = steal::local::run(3, |c| {
                walk_resuming(c, std::slice::from_ref(&rb), &opts, &second).list
            });
            let want: Vec<Vec<u8>> = [
                "",
                "/a",
                "/a/deep",
                "/a/deep/g",
                "/a/phantom",
                "/b",
                "/b/new",
            ]
            .iter()
            .map(|r| r.as_bytes().to_vec())
            .collect();
            assert_eq!(relative(lists, &rb), want, "{detail:?}");
            let read = second.read.into_inner().unwrap();
            assert!(
                !read.contains_key(&p("/a")),
                "a recorded directory is not read"
            );
            assert!(read.contains_key(&p("/b")) && read.contains_key(&p("/a/deep")));
            std::fs::remove_file(root.join("b/new")).unwrap();
        }
    }

    #[test]
    fn visit_consumes_entries_before_they_are_recorded_or_descended() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("r");
        std::fs::create_dir_all(root.join("keep/sub")).unwrap();
        std::fs::create_dir_all(root.join("skip/below")).unwrap();
        std::fs::write(root.join("keep/sub/c"), b"").unwrap();
        std::fs::write(root.join("skip/below/d"), b"").unwrap();
        std::fs::write(root.join("a"), b"").unwrap();
        std::fs::write(root.join(OsStr::from_bytes(b"keep/b\xff")), b"").unwrap();
        let root_bytes = root.as_os_str().as_bytes().to_vec();
        let unlinked = AtomicU64::new(0);
        // Unlink the files `a` and `b\xff` through the directory descriptor; consume `skip`.
        let visit = |dir: BorrowedFd<'_>, name: &[u8], path: &[u8], kind: FileType| {
            assert!(path.ends_with(name) && path[path.len() - name.len() - 1] == b'/');
            assert_eq!(
                rustix::fs::fstat(dir).unwrap().st_mode & libc::S_IFMT,
                libc::S_IFDIR
            );
            match name {
                b"a" | b"b\xff" => {
                    assert_eq!(kind, FileType::File);
                    rustix::fs::unlinkat(dir, name, AtFlags::empty()).unwrap();
                    unlinked.fetch_add(1, Ordering::Relaxed);
                    true
                }
                b"skip" => true,
                _ => false,
            }
        };
        for detail in [Detail::Lite, Detail::Stat] {
            let lists = steal::local::run(3, |comm| {
                let opts = WalkOptions {
                    detail,
                    visit: Some(&visit),
                    ..WalkOptions::default()
                };
                let walked = walk(comm, std::slice::from_ref(&root_bytes), &opts);
                assert!(walked.complete);
                walked
                    .list
                    .iter()
                    .map(|e| e.path.to_vec())
                    .collect::<Vec<_>>()
            });
            let mut paths: Vec<Vec<u8>> = lists.into_iter().flatten().collect();
            paths.sort();
            let rel: Vec<&[u8]> = paths.iter().map(|p| &p[root_bytes.len()..]).collect();
            let want: [&[u8]; 4] = [b"", b"/keep", b"/keep/sub", b"/keep/sub/c"];
            assert_eq!(rel, want, "{detail:?}");
        }
        assert_eq!(unlinked.load(Ordering::Relaxed), 2);
        assert!(!root.join("a").exists());
        assert!(
            root.join("skip/below/d").exists(),
            "consumed directories are not descended"
        );
    }
}
