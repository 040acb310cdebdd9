//! Removing listed entries, for rm and for sync's deletions (`-D`, and the old inode of a file
//! whose data changes): non-directories over all ranks with work stealing, then directories
//! deepest level first (ranks meet between levels where they must), with progress counts and
//! the stop flag.
//!
//! Entries are reached from the roots the tool was given ([`Roots`]) without following
//! symlinks, each removed with `unlinkat` in its parent held open ([`ParentDir`]): a directory
//! swapped for a symlink after the walk makes its entries fail (named), never reaches the tree
//! the symlink points to. A non-directory is removed by its name without a type check (as GNU
//! `rm -r` does): a symlink swapped in for a listed file is removed as the link it is.

use crate::engine::batches::{run_batches, run_levels, LevelWork, Order};
use crate::engine::locks::lock;
use flist::beneath::{is_symlink_error, Roots};
use flist::distribute::by_depth;
use flist::parent_dir::ParentDir;
use flist::record::Entry;
use flist::{FileList, FileType, ItemError};
use rustix::fd::BorrowedFd;
use rustix::fs::AtFlags;
use rustix::io::Errno;
use std::collections::HashSet;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use steal::progress::Progress;
use steal::{Comm, CommExt, ReduceOp};

/// How a failure on a path that changed since the walk is worded (each tool keeps its words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wording {
    /// `unlink PATH: ...: the path changed since it was listed (...)` (rm).
    Explained,
    /// `reach (a directory on the way was replaced since the walk; not followed) PATH: ...`
    /// (sync).
    Reach,
}

/// One removal's shared state: where entries are reached from, the counts, the failures, the
/// list of what went (when asked for) and the progress counters.
pub struct Remover {
    /// Where entries are reached from.
    pub roots: Arc<Roots>,
    /// A directory that still holds entries (not selected, or created since the walk) stays
    /// and is counted in `kept`, instead of failing.
    pub keep_nonempty: bool,
    /// With `keep_nonempty`: when set, only these directories may stay that way (those holding
    /// listed entries that were not to be removed); any other that is not empty holds entries
    /// created since the list was made, a failure ("Directory not empty").
    pub keep_only: Option<HashSet<Vec<u8>>>,
    wording: Wording,
    /// Non-directories removed.
    pub files: AtomicU64,
    /// Directories removed.
    pub dirs: AtomicU64,
    /// Directories kept because they hold entries that were not to be removed.
    pub kept: AtomicU64,
    /// Entries that failed to go.
    pub failed: AtomicU64,
    /// Directories left because they hold entries that failed.
    pub held: AtomicU64,
    errors: Mutex<Vec<ItemError>>,
    /// What was removed, when a list of it was asked for.
    pub removed: Option<Mutex<FileList>>,
    /// Progress counters (entries removed, failures).
    pub progress: Progress,
}

/// Counts of a [`Remover`] summed over all ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Non-directories removed.
    pub files: u64,
    /// Directories removed.
    pub dirs: u64,
    /// Directories kept (they hold entries not to be removed).
    pub kept: u64,
    /// Entries that failed to go.
    pub failed: u64,
    /// Directories left because they hold entries that failed.
    pub held: u64,
}

impl Remover {
    /// A removal reaching entries beneath `roots`; failures worded as `wording`; silent
    /// progress, no list of what went.
    pub fn new(roots: Arc<Roots>, wording: Wording) -> Remover {
        Remover {
            roots,
            keep_nonempty: false,
            keep_only: None,
            wording,
            files: AtomicU64::new(0),
            dirs: AtomicU64::new(0),
            kept: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            held: AtomicU64::new(0),
            errors: Mutex::new(Vec::new()),
            removed: None,
            progress: Progress::silent(),
        }
    }

    /// Add `e` to the list of what was removed (if one is kept).
    pub fn note_removed(&self, e: Entry<'_>) {
        if let Some(list) = &self.removed {
            lock(list).push(e.path, e.kind, e.meta);
        }
    }

    /// Count and keep the failure of `op` on `path`.
    pub fn fail(&self, path: &[u8], op: &'static str, e: Errno) {
        let e = io::Error::from(e);
        let error = match self.wording {
            Wording::Explained => ItemError::new(path, op, flist::beneath::explain(e)),
            Wording::Reach if is_symlink_error(&e) => ItemError::new(
                path,
                "reach (a directory on the way was replaced since the walk; not followed)",
                e,
            ),
            Wording::Reach => ItemError::new(path, op, e),
        };
        self.push_failure(error);
    }

    /// Count and keep a failure that leaves an entry in place.
    pub fn push_failure(&self, e: ItemError) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.progress.errors.fetch_add(1, Ordering::Relaxed);
        lock(&self.errors).push(e);
    }

    /// The failures kept since the last call.
    pub fn take_errors(&self) -> Vec<ItemError> {
        std::mem::take(&mut *lock(&self.errors))
    }

    /// The counts summed over all ranks. Collective.
    pub fn totals(&self, comm: &dyn Comm) -> Totals {
        let mut v = [
            &self.files,
            &self.dirs,
            &self.kept,
            &self.failed,
            &self.held,
        ]
        .map(|a| a.load(Ordering::Relaxed));
        comm.allreduce(&mut v, ReduceOp::Sum);
        Totals {
            files: v[0],
            dirs: v[1],
            kept: v[2],
            failed: v[3],
            held: v[4],
        }
    }

    /// Unlink the non-directories of one batch.
    pub fn unlink_batch(&self, chunk: &FileList) {
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

    /// Unlink the non-directories `files` over all ranks; true when a stop request cut it
    /// short. Collective.
    pub fn unlink_files(&self, comm: &dyn Comm, files: &FileList, stop: &AtomicBool) -> bool {
        run_batches(comm, Some(stop), Some(&self.progress), files, |chunk| {
            self.unlink_batch(chunk)
        })
    }

    /// `rmdir` one batch of a level; directories in `blocked` hold entries that failed and are
    /// skipped. Paths of directories that fail are appended to `failed_here`. (rm's removal of
    /// a list larger than memory calls it level by level itself.)
    pub fn rmdir_batch(
        &self,
        chunk: &FileList,
        blocked: &HashSet<Vec<u8>>,
        failed_here: &Mutex<Vec<Vec<u8>>>,
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
                // A directory still holding entries that were not to go stays by design (e.g.
                // entries a list did not name, or created since the walk).
                Err(Errno::NOTEMPTY | Errno::EXIST)
                    if self.keep_nonempty
                        && self.keep_only.as_ref().is_none_or(|k| k.contains(e.path)) =>
                {
                    self.kept.fetch_add(1, Ordering::Relaxed);
                }
                Err(err) => {
                    self.fail(e.path, "rmdir", err);
                    lock(failed_here).push(e.path.to_vec());
                }
            }
        }
    }

    /// `rmdir` the directories `dirs`, one depth level at a time, deepest first: a directory
    /// goes only once everything below it has ([`run_levels`]: ranks meet between levels only
    /// where they must). `kept` and `held` are the selected directories that stay on this rank
    /// (not in `dirs`). At each meeting ranks tell each other which directories failed: their
    /// ancestors then stay, quietly. Returns whether a stop request cut it short, and the
    /// number of levels. Collective.
    pub fn remove_dirs(
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
        let mut rmdirs = RmdirLevels {
            remover: self,
            blocked: HashSet::new(),
            failed_here: Mutex::new(Vec::new()),
            unsaid: Vec::new(),
        };
        let interrupted = run_levels(
            comm,
            &levels,
            Order::ChildrenFirst,
            stop,
            Some(&self.progress),
            &mut rmdirs,
        );
        (interrupted, levels.len())
    }
}

/// [`Remover::remove_dirs`]'s part in [`run_levels`].
struct RmdirLevels<'a> {
    remover: &'a Remover,
    /// Ancestors of directories that failed: they stay, quietly.
    blocked: HashSet<Vec<u8>>,
    /// Directories that failed in the level under way.
    failed_here: Mutex<Vec<Vec<u8>>>,
    /// Directories that failed here since ranks last met.
    unsaid: Vec<Vec<u8>>,
}

impl LevelWork for RmdirLevels<'_> {
    fn work(&self, chunk: &FileList) {
        self.remover
            .rmdir_batch(chunk, &self.blocked, &self.failed_here);
    }

    fn after_local(&mut self) {
        let mine = std::mem::take(self.failed_here.get_mut().expect("failed directories"));
        // Their ancestors here are skipped at once; other ranks learn at the next meeting,
        // which comes before any level of theirs that holds one.
        for p in &mine {
            add_ancestors(&mut self.blocked, p);
        }
        self.unsaid.extend(mine);
    }

    fn meet(&mut self, comm: &dyn Comm, flag: bool) -> bool {
        let shared_level = std::mem::take(self.failed_here.get_mut().expect("failed directories"));
        self.unsaid.extend(shared_level);
        meet_ranks(comm, &mut self.unsaid, &mut self.blocked, flag)
    }
}

/// Ranks meet: each tells the others the directories that failed on it since the last meeting
/// (`failed`, emptied; every rank adds their ancestors to `blocked`) and `flag`. Returns true
/// when any rank's flag is set. Collective.
fn meet_ranks(
    comm: &dyn Comm,
    failed: &mut Vec<Vec<u8>>,
    blocked: &mut HashSet<Vec<u8>>,
    flag: bool,
) -> bool {
    let mine = Meeting {
        flag,
        failed: std::mem::take(failed),
    };
    let mut any = false;
    for theirs in comm.all_gather(&mine) {
        any |= theirs.flag;
        for p in &theirs.failed {
            add_ancestors(blocked, p);
        }
    }
    any
}

/// What a rank tells the others when ranks meet between levels.
#[derive(serde::Serialize, serde::Deserialize)]
struct Meeting {
    flag: bool,
    /// Directories that failed on this rank since the last meeting.
    #[serde(with = "steal::typed::byte_list")]
    failed: Vec<Vec<u8>>,
}

/// Remove this rank's entries of `list` (non-directories, then directories deepest first)
/// with `remover`; true when a stop request cut it short. Collective.
pub fn remove(comm: &dyn Comm, list: &FileList, remover: &Remover, stop: &AtomicBool) -> bool {
    let files = list.select((0..list.len()).filter(|&i| list.kind(i) != FileType::Dir));
    let dirs = list.select((0..list.len()).filter(|&i| list.kind(i) == FileType::Dir));
    let mut total = [list.len() as u64];
    comm.allreduce(&mut total, ReduceOp::Sum);
    remover
        .progress
        .total_items
        .fetch_add(total[0], Ordering::Relaxed);
    let interrupted = remover.unlink_files(comm, &files, stop);
    let interrupted = comm.any(interrupted || stop.load(Ordering::Relaxed));
    if interrupted {
        return true;
    }
    remover.remove_dirs(comm, (dirs, 0, 0), stop).0
}

/// Add every ancestor of `path` to `set` (stopping at the first one already there: its own
/// ancestors are too).
pub fn add_ancestors(set: &mut HashSet<Vec<u8>>, path: &[u8]) {
    let mut p = path;
    while p != b"/" {
        p = flist::path::parent(p);
        if set.contains(p) {
            break;
        }
        set.insert(p.to_vec());
    }
}

/// `op(dir, name)` for `path`, by name in its parent held open by `parent` (see
/// [`ParentDir`]), with the system's error code.
pub fn in_parent<R>(
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
    fn ancestors_stop_at_the_root() {
        let mut set = HashSet::new();
        add_ancestors(&mut set, b"/a/b/c");
        add_ancestors(&mut set, b"/a/x");
        let mut v: Vec<_> = set.into_iter().collect();
        v.sort();
        assert_eq!(v, vec![b"/".to_vec(), b"/a".to_vec(), b"/a/b".to_vec()]);
    }

    #[test]
    fn removes_files_then_directories_and_keeps_a_nonempty_one() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("t");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("k")).unwrap();
        std::fs::write(root.join("a/b/f"), b"x").unwrap();
        std::fs::write(root.join("k/stay"), b"x").unwrap();
        let p = |s: &str| {
            [
                tmp.path().as_os_str().as_encoded_bytes(),
                b"/t/",
                s.as_bytes(),
            ]
            .concat()
        };
        let out = steal::local::run(2, |comm| {
            let mut list = FileList::new(flist::Detail::Lite);
            if comm.rank() == 0 {
                list.push(&p("a/b/f"), FileType::File, None);
                list.push(&p("a/b"), FileType::Dir, None);
                list.push(&p("a"), FileType::Dir, None);
                list.push(&p("k"), FileType::Dir, None);
            }
            let root = [tmp.path().as_os_str().as_encoded_bytes(), b"/t"].concat();
            let roots = Arc::new(Roots::open_dirs([root.as_slice()]));
            let mut r = Remover::new(roots, Wording::Reach);
            r.keep_nonempty = true;
            let stop = AtomicBool::new(false);
            let interrupted = remove(comm, &list, &r, &stop);
            (interrupted, r.totals(comm))
        });
        for (interrupted, t) in out {
            assert!(!interrupted);
            assert_eq!((t.files, t.dirs, t.kept, t.failed), (1, 2, 1, 0), "{t:?}");
        }
        assert!(!root.join("a").exists());
        assert!(root.join("k/stay").exists());
    }

    /// A chain of 120 directories spread over 4 ranks, one of them (level 60) holding a file
    /// no list names: that one fails, its 60 ancestors stay quietly (held, wherever they
    /// are), and everything below it goes, though ranks meet only where the chain crosses
    /// from one to the next.
    #[test]
    fn a_failure_in_a_spread_chain_holds_its_ancestors_on_every_rank() {
        use std::os::unix::ffi::OsStrExt;
        let os = |b: &[u8]| std::path::Path::new(std::ffi::OsStr::from_bytes(b)).to_path_buf();
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().as_os_str().as_encoded_bytes().to_vec();
        let mut paths = Vec::new();
        let mut dir = [&base[..], b"/c"].concat();
        for level in 0..120 {
            std::fs::create_dir(os(&dir)).unwrap();
            std::fs::write(os(&dir).join("f"), b"x").unwrap();
            if level == 60 {
                std::fs::write(os(&dir).join("unlisted"), b"x").unwrap();
            }
            paths.push(dir.clone());
            dir.extend_from_slice(b"/d");
        }
        let out = steal::local::run(4, |comm| {
            let mut list = FileList::new(flist::Detail::Lite);
            if comm.rank() == 0 {
                for d in &paths {
                    list.push(d, FileType::Dir, None);
                    list.push(&[&d[..], b"/f"].concat(), FileType::File, None);
                }
            }
            let list = flist::distribute::spread(comm, list);
            let roots = Arc::new(Roots::open_dirs([base.as_slice()]));
            let r = Remover::new(roots, Wording::Reach);
            let stop = AtomicBool::new(false);
            let interrupted = remove(comm, &list, &r, &stop);
            (interrupted, r.totals(comm))
        });
        for (interrupted, t) in out {
            assert!(!interrupted);
            assert_eq!(
                (t.files, t.dirs, t.failed, t.held, t.kept),
                (120, 59, 1, 60, 0),
                "{t:?}"
            );
        }
        assert!(os(&paths[60]).join("unlisted").exists());
        assert!(!os(&paths[61]).exists());
    }
}
