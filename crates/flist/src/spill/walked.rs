//! A walk's records beyond a budget: while a rank's list outgrows a quarter of its memory
//! limit, the walk sorts it by path and writes it as a run ([`super::sort`]'s reading, with weighted
//! samples), so that a walk of any size holds at most about the limit. What it spilled
//! ([`WalkRuns`]) is written to a list file by a merge ([`WalkRuns::write_v4`]) or joined with
//! another tree ([`WalkRuns::into_join_side`], for [`super::join()`]).

use super::dir::{SpillDir, SpillFile};
use super::join::{JoinSide, BY_PATH};
use super::merge::Merge;
use super::run::{Run, RunCursor};
use super::sort::{
    block_bytes, distribute_and_write, held_bytes, samples_per_rank, Reading, SortFileOptions,
    SortedRuns, SpillReport,
};
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io;
use crate::path::{display, PathLike};
use crate::record::{Detail, FileList};
use crate::sort::Order;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Mutex;
use steal::{Comm, CommExt};

/// Where a walk may spill its records ([`crate::walk::WalkOptions::spill`]).
#[derive(Clone, Copy, Debug)]
pub struct WalkSpill<'a> {
    /// Bytes of memory this rank may hold for records (see [`super::MemoryLimit`]): the walk
    /// spills a run whenever its list reaches a quarter of it (a list is filled while the last
    /// one is sorted and written).
    pub limit: u64,
    /// Where spill files go.
    pub dir: &'a SpillDir,
}

/// The records a walk spilled on this rank: runs sorted by path in a spill file, with their
/// samples and counts (see [`crate::walk::Walked::spilled`]). Dropped, the file is gone.
#[derive(Debug)]
pub struct WalkRuns {
    file: SpillFile,
    runs: Vec<Run>,
    samples: FileList,
    weights: Vec<u64>,
    limit: u64,
    /// Where the exchange of a sort spills ([`WalkRuns::write_sorted_by_name`]).
    dir: SpillDir,
    longest: Option<u64>,
    /// Records, files, dirs, links, others, bytes of this rank's runs.
    sums: [u64; 6],
    /// The user table of the walk (for the list written).
    pub users: IdTable,
    /// The group table of the walk.
    pub groups: IdTable,
}

/// The spilling side of a walk, shared by its workers: the runs written so far.
pub(crate) struct Spiller<'a> {
    reading: Mutex<Reading<'a>>,
    /// The most samples held (thinned beyond: see [`Reading::thin`]).
    cap: usize,
    limit: u64,
    /// Bytes the list may hold before it is spilled: a quarter of the limit, as the workers
    /// fill a new list while the full one is sorted and written (two at once).
    budget: u64,
    /// A spill failed (its error is in `error`): later parts are dropped, not held.
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
}

impl<'a> Spiller<'a> {
    /// A spiller of a walk over `ranks` ranks.
    pub(crate) fn new(spill: &WalkSpill<'a>, ranks: usize) -> Spiller<'a> {
        // The samples are held (and gathered from every rank) too: at most about an eighth of
        // the limit of them, taking a record for 128 bytes (as `spill_side`).
        let cap = (samples_per_rank(ranks) as u64).min((spill.limit / 8 / 128).max(16)) as usize;
        // The runs are not known in advance: 16 samples a run to start with, fewer as the
        // samples reach `cap`.
        let per_run = (cap / 16).max(1);
        fix_the_mmap_threshold();
        Spiller {
            reading: Mutex::new(Reading::with(spill.dir, spill.limit / 4, per_run)),
            cap,
            limit: spill.limit,
            budget: spill.limit / 4,
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
        }
    }

    /// `list` (the walk's list, with a part just added) reached its budget: it is to be
    /// taken and given to [`Spiller::spill`]. Also true after a failure, so that nothing more
    /// is held.
    pub(crate) fn full(&self, list: &FileList) -> bool {
        self.failed.load(AtomicOrdering::Relaxed) || held_bytes(list) >= self.budget
    }

    /// Sort `part` by path and write it as a run (nothing, after a failure: the walk's result
    /// is then that failure).
    pub(crate) fn spill(&self, part: FileList) {
        if self.failed.load(AtomicOrdering::Relaxed) {
            return;
        }
        let none = IdTable::default();
        let order = Order::new(&BY_PATH, &none, &none);
        let mut reading = self.reading.lock().expect("walk spill");
        reading.buf = part;
        let done = reading.spill(&order);
        reading.thin(self.cap);
        if let Err(e) = done {
            self.failed.store(true, AtomicOrdering::Relaxed);
            *self.error.lock().expect("walk spill error") = Some(e);
        }
    }

    /// The walk ended with `rest` in memory on this rank (collective): when any rank spilled
    /// (or failed to), `rest` is spilled too and the runs are returned, with the tables of the
    /// list; otherwise `rest` comes back as it was, nothing having been written. A failure on
    /// any rank is every rank's error.
    pub(crate) fn finish(self, comm: &dyn Comm, rest: FileList) -> Finished {
        let failed = self.failed.into_inner();
        let mut reading = self.reading.into_inner().expect("walk spill");
        if !comm.any(failed || reading.spill.is_some()) {
            return Finished::Kept(rest);
        }
        let (users, groups) = (rest.users.clone(), rest.groups.clone());
        let local = match self.error.into_inner().expect("walk spill error") {
            Some(e) => Err(e),
            None if rest.is_empty() => Ok(()),
            None => {
                let none = IdTable::default();
                let order = Order::new(&BY_PATH, &none, &none);
                reading.buf = rest;
                reading.spill(&order)
            }
        };
        // A rank whose share was empty still takes part, with no run.
        let local = local.and_then(|()| match reading.spill.take() {
            Some(f) => Ok(f),
            None => reading.dir.create(),
        });
        let file = match comm.agree(local) {
            Ok(f) => f,
            Err(e) => return Finished::Spilled(Err(e)),
        };
        give_back_freed_memory();
        let s = reading.sums;
        Finished::Spilled(Ok(WalkRuns {
            file,
            runs: std::mem::take(&mut reading.runs),
            samples: std::mem::replace(&mut reading.samples, FileList::new(Detail::Stat)),
            weights: std::mem::take(&mut reading.weights),
            limit: self.limit,
            dir: reading.dir.clone(),
            longest: reading.longest,
            sums: [s[0], s[1], s[2], s[3], s[4], s[5]],
            users,
            groups,
        }))
    }
}

/// How a spilling walk ended on a rank ([`Spiller::finish`]); the same variant on every rank.
// Made once per walk and taken apart at once: boxing the list would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Finished {
    /// No rank spilled: the list, as it was.
    Kept(FileList),
    /// Every record of the rank in runs, or the failure (every rank's).
    Spilled(Result<WalkRuns>),
}

impl WalkRuns {
    /// Records in this rank's runs.
    pub fn records(&self) -> u64 {
        self.sums[0]
    }

    /// Regular files, directories, symbolic links, other records, and bytes of the regular
    /// files, in this rank's runs.
    pub fn counts(&self) -> [u64; 5] {
        [
            self.sums[1],
            self.sums[2],
            self.sums[3],
            self.sums[4],
            self.sums[5],
        ]
    }

    /// Runs written on this rank.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Bytes written to this rank's spill file: its disk use.
    pub fn spill_bytes(&self) -> u64 {
        self.file.len()
    }

    /// Call `f` with every record of this rank's runs (a list and an index into it), run
    /// after run: in no order across runs (for sums over the records, as a list's digest).
    /// Holds one block of a run at a time.
    pub fn for_each(&self, mut f: impl FnMut(&FileList, usize)) -> Result<()> {
        let block = block_bytes(self.limit, 1);
        for run in &self.runs {
            let mut cursor = RunCursor::new(run.clone(), Detail::Stat, block);
            cursor.load(&self.file)?;
            while let Some((list, i)) = cursor.current() {
                f(list, i);
                cursor.advance(&self.file)?;
            }
        }
        Ok(())
    }

    /// This rank's records as one side of a [`super::join()`] of the tree `root` (each path
    /// `root` or below it).
    pub fn into_join_side(self, root: &[u8]) -> JoinSide {
        JoinSide {
            root: root.to_vec(),
            file: Some(self.file),
            runs: self.runs,
            samples: self.samples,
            weights: self.weights,
            users: self.users,
            groups: self.groups,
        }
    }

    /// Write every rank's records to the v4 list file `output` (not `-`; collective) sorted by
    /// name over all ranks, as `walk -s name` sorts in memory (the same records in the same
    /// order): the ranks' runs exchanged by splitters from their samples in bounded rounds,
    /// then merged into each rank's region ([`super::sort_list_file`]'s last phases).
    /// Published under `output` only when every rank finished (a failure, or `stop`, leaves
    /// no output).
    pub fn write_sorted_by_name(
        self,
        comm: &dyn Comm,
        output: impl PathLike,
        stop: Option<&AtomicBool>,
    ) -> Result<SpillReport> {
        let output = output.path_bytes();
        let none = IdTable::default();
        let order = Order::new(&BY_PATH, &none, &none);
        let options = SortFileOptions {
            keys: &BY_PATH,
            limit: self.limit,
            dir: &self.dir,
            stop,
        };
        let stopped = || stop.is_some_and(|s| s.load(AtomicOrdering::Relaxed));
        let interrupted = || interrupted(output);
        let spilled = SortedRuns {
            file: self.file,
            runs: self.runs,
            samples: self.samples,
            weights: self.weights,
            longest: self.longest,
            sums: self.sums,
        };
        let tables = (&self.users, &self.groups);
        let ends = (
            &stopped as &dyn Fn() -> bool,
            &interrupted as &dyn Fn() -> Error,
        );
        distribute_and_write(comm, spilled, &order, tables, output, &options, ends)
    }

    /// Write every rank's records to the v4 list file `output` (not `-`; collective), each
    /// rank's region in path order, merged from its runs a block at a time: the records of the
    /// list [`crate::io::write`] writes for the walk in memory, in another order. Published
    /// under `output` only when every rank finished (a failure, or `stop`, leaves no output).
    pub fn write_v4(
        self,
        comm: &dyn Comm,
        output: impl PathLike,
        stop: Option<&AtomicBool>,
    ) -> Result<SpillReport> {
        let output = output.path_bytes();
        let longest = comm.max(self.longest.map_or(0, |l| l + 1)).checked_sub(1);
        let block = block_bytes(self.limit, self.runs.len());
        let cursors = self
            .runs
            .iter()
            .map(|r| RunCursor::new(r.clone(), Detail::Stat, block))
            .collect();
        let none = IdTable::default();
        let order = Order::new(&BY_PATH, &none, &none);
        let tables = (&self.users, &self.groups);
        io::write_v4_stream(comm, output, tables, longest, self.sums[0], |sink| {
            let mut merge = Merge::new(&self.file, &order, cursors)?;
            let mut n = 0u64;
            while let Some((list, i)) = merge.peek() {
                let meta = list.meta(i).expect("a stat list");
                sink.push(list.path(i), &meta)?;
                merge.advance()?;
                n += 1;
                if n % 4096 == 0 && stop.is_some_and(|s| s.load(AtomicOrdering::Relaxed)) {
                    return Err(interrupted(output));
                }
            }
            Ok(())
        })?;
        let runs = self.runs.len() as u64;
        Ok(SpillReport::over_ranks(
            comm,
            self.sums,
            runs,
            self.file.len(),
        ))
    }
}

/// Have big allocations (a list's columns, over 128 KiB) mapped on their own and unmapped when
/// freed, for the rest of the process. glibc raises its threshold for that as such blocks
/// are freed (up to 32 MiB), after which lists that come and go, as the walk's do between
/// its runs, are carved from its arenas, which keep what they free: at a 64 MiB limit over
/// 10^6 files, the peak went from 68-106 MB to 44 MB with the threshold fixed (and cmp's
/// from 109 to 54 MB), at the same speed.
fn fix_the_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// Return the memory the walk's lists freed to the system. The walk's workers allocated
/// them in their own malloc arenas, which the merge that follows (on another thread) does not
/// reuse: without this the peak is the walk's lists and the merge's blocks together.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The error of a walk's list stopped while it was written.
fn interrupted(output: &[u8]) -> Error {
    Error::Invalid(format!(
        "walk interrupted by a signal: {} not written",
        display(output)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::walk::{walk, WalkOptions};
    use std::os::unix::ffi::OsStrExt;

    /// A tree of 600 files in 20 directories (some names not UTF-8).
    fn tree(root: &std::path::Path) {
        for d in 0..20 {
            let dir = root.join(format!("d{d:02}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..30 {
                let mut name = format!("f{f:03}").into_bytes();
                if f % 7 == 0 {
                    name.push(0xff);
                }
                let path = dir.join(std::ffi::OsStr::from_bytes(&name));
                std::fs::write(path, vec![b'x'; f]).unwrap();
            }
        }
    }

    fn sorted_paths(list: &FileList) -> Vec<(Vec<u8>, u64)> {
        let mut v: Vec<_> = list
            .iter()
            .map(|e| (e.path.to_vec(), e.meta.map_or(0, |m| m.size)))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_spilling_walk_writes_the_records_of_the_walk_in_memory_at_1_2_3_ranks() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        std::fs::create_dir(&root).unwrap();
        tree(&root);
        let spill_at = tmp.path().join("spill");
        std::fs::create_dir(&spill_at).unwrap();
        let dir = SpillDir::new(Some(spill_at.as_os_str().as_bytes()));
        let want = steal::local::run(1, |comm| {
            let w = walk(comm, &[&root], &WalkOptions::default());
            assert!(w.spilled.is_none());
            sorted_paths(&w.list)
        })
        .remove(0);
        assert_eq!(want.len(), 621);
        for ranks in [1, 2, 3] {
            let out = tmp.path().join(format!("out{ranks}.mfu"));
            let reports = steal::local::run(ranks, |comm| {
                let opts = WalkOptions {
                    spill: Some(WalkSpill {
                        limit: 8 << 10,
                        dir: &dir,
                    }),
                    ..WalkOptions::default()
                };
                let w = walk(comm, &[&root], &opts);
                assert!(w.complete && w.list.is_empty());
                assert_eq!(w.total_items, 621);
                let runs = w.spilled.expect("spilled").unwrap();
                runs.write_v4(comm, &out, None).unwrap()
            });
            let r = &reports[0];
            assert!(reports.iter().all(|x| x == r), "the same report everywhere");
            assert_eq!((r.records, r.dirs, r.files), (621, 21, 600));
            assert_eq!(r.bytes, 20 * (0..30).sum::<u64>());
            assert!(r.runs > 5 && r.spill_bytes > 0, "{r:?}");
            let got = steal::local::run(1, |comm| crate::io::read(comm, &out).unwrap());
            assert_eq!(sorted_paths(&got[0]), want, "at {ranks} ranks");
            // Sorted by name over the ranks: the order of the in-memory sort.
            let by_name = tmp.path().join(format!("name{ranks}.mfu"));
            steal::local::run(ranks, |comm| {
                let opts = WalkOptions {
                    spill: Some(WalkSpill {
                        limit: 8 << 10,
                        dir: &dir,
                    }),
                    ..WalkOptions::default()
                };
                let runs = walk(comm, &[&root], &opts).spilled.unwrap().unwrap();
                runs.write_sorted_by_name(comm, &by_name, None).unwrap()
            });
            let got = steal::local::run(1, |comm| crate::io::read(comm, &by_name).unwrap());
            let paths: Vec<&[u8]> = got[0].iter().map(|e| e.path).collect();
            let mut sorted = paths.clone();
            sorted.sort();
            assert_eq!(paths, sorted, "sorted by name at {ranks} ranks");
            assert_eq!(sorted_paths(&got[0]), want);
            assert_eq!(std::fs::read_dir(&spill_at).unwrap().count(), 0);
        }
        // Below a quarter of the limit on every rank: nothing spills.
        let kept = steal::local::run(2, |comm| {
            let opts = WalkOptions {
                spill: Some(WalkSpill {
                    limit: 64 << 20,
                    dir: &dir,
                }),
                ..WalkOptions::default()
            };
            let w = walk(comm, &[&root], &opts);
            assert!(w.spilled.is_none());
            w.list.len()
        });
        assert_eq!(kept.iter().sum::<usize>(), 621);
    }

    #[test]
    fn a_spill_that_fails_on_one_rank_is_every_ranks_error_naming_tmpdir() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        std::fs::create_dir(&root).unwrap();
        tree(&root);
        let dir = SpillDir::new(Some(b"/nonexistent/spill"));
        let errs = steal::local::run(2, |comm| {
            let opts = WalkOptions {
                spill: Some(WalkSpill {
                    limit: 8 << 10,
                    dir: &dir,
                }),
                ..WalkOptions::default()
            };
            let w = walk(comm, &[&root], &opts);
            assert!(!w.complete);
            w.spilled.expect("spilled").unwrap_err().to_string()
        });
        assert!(errs[0].contains("/nonexistent/spill"), "{errs:?}");
        assert_eq!(errs[0], errs[1]);
    }
}
