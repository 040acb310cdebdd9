//! Work on a list's records over all ranks with work stealing, a batch of records per work item
//! (rm's removal, chmod's changes, reln's rewrites), and on directories one depth level at a
//! time ([`run_levels`]).

use flist::distribute::levels_meet;
use flist::FileList;
use std::sync::atomic::{AtomicBool, Ordering};
use steal::progress::Progress;
use steal::{queue, Comm, ReduceOp};

/// Records per work item: enough to amortise the queue's bookkeeping, few enough that idle
/// ranks find work to steal.
const BATCH: usize = 64;

/// Records per work item for a rank holding `len` records: [`BATCH`], or fewer when that would
/// leave worker threads idle (at least two items per thread), so that a few records are worked
/// side by side: four big files are unlinked at once by two threads (the kernel frees a
/// file's pages in the `unlink` call), not one after the other.
fn batch_len(len: usize) -> usize {
    if len <= 1 {
        return 1;
    }
    len.div_ceil(2 * rayon::current_num_threads().max(1))
        .clamp(1, BATCH)
}

/// Run `work` on `list`'s records on all ranks, up to `BATCH` records per call (see
/// `batch_len`), each batch as a list of `list`'s detail; `progress` counts records. Returns
/// true (on every rank) when a stop request cut the work short. Collective.
pub fn run_batches(
    comm: &dyn Comm,
    stop: Option<&AtomicBool>,
    progress: Option<&Progress>,
    list: &FileList,
    work: impl Fn(&FileList) + Sync,
) -> bool {
    let per_item = batch_len(list.len());
    let initial: Vec<Vec<u8>> = (0..list.len())
        .step_by(per_item)
        .map(|first| {
            let mut batch = Vec::new();
            for i in first..(first + per_item).min(list.len()) {
                list.encode_record(i, &mut batch);
            }
            batch
        })
        .collect();
    let detail = list.detail();
    let cfg = queue::Config {
        stop,
        progress,
        ..queue::Config::default()
    };
    let outcome = queue::run(comm, &cfg, initial, |batch: Vec<u8>, _| {
        let mut chunk = FileList::new(detail);
        chunk.decode_records(&batch);
        work(&chunk);
        if let Some(p) = progress {
            p.add(chunk.len() as u64, 0);
        }
    });
    outcome.interrupted
}

/// Which way [`run_levels`] goes: parents first (a directory must be changed before what is
/// in it can be reached) or children first (a directory goes, or loses access, only after
/// what is in it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Shallowest level first.
    ParentsFirst,
    /// Deepest level first.
    ChildrenFirst,
}

/// A level of which no rank holds more records than this is worked by each rank on its own in
/// [`run_levels`]: a queue run (a round of termination detection over all ranks) costs more.
pub const LOCAL_LEVEL: usize = 64;

/// What a tool's [`run_levels`] does besides its work: `work` runs on rayon workers (many at
/// once on a shared level), `after_local` after this rank worked a level on its own, `meet`
/// where ranks meet.
pub trait LevelWork: Sync {
    /// Work on `chunk`, records of one level.
    fn work(&self, chunk: &FileList);
    /// After this rank worked a whole level on its own (e.g. take note of its failures).
    fn after_local(&mut self) {}
    /// Ranks meet (collective, at the same points on every rank): exchange what the tool
    /// needs, and return true when any rank's `flag` is set (`comm.any(flag)` at least).
    fn meet(&mut self, comm: &dyn Comm, flag: bool) -> bool;
}

/// Work on `levels` (one [`FileList`] per depth, as [`flist::distribute::by_depth`] makes
/// them) one level at a time, in `order`. Returns true (on every rank) when a stop request cut
/// the work short. Collective.
///
/// A level of which some rank holds more than [`LOCAL_LEVEL`] records is shared by work
/// stealing ([`run_batches`]), which all ranks end together, and ranks meet after it. Any
/// other level each rank works on its own, in one call, and ranks meet before it only where a
/// directory's parent (or, children first, a child) is on another rank ([`levels_meet`]): a
/// chain 3,000 directories deep spread over 64 ranks then costs about 64 meetings, not 3,000
/// queue runs (rm of such a chain at `--ranks 64`: 33 s before). At each meeting ranks say
/// whether a stop request came; after one, no rank starts another level.
pub fn run_levels(
    comm: &dyn Comm,
    levels: &[FileList],
    order: Order,
    stop: &AtomicBool,
    progress: Option<&Progress>,
    tool: &mut impl LevelWork,
) -> bool {
    let elsewhere = levels_meet(comm, levels);
    let mut most: Vec<u64> = levels.iter().map(|l| l.len() as u64).collect();
    comm.allreduce(&mut most, ReduceOp::Max);
    let n = levels.len();
    let ks: Box<dyn Iterator<Item = usize>> = match order {
        Order::ParentsFirst => Box::new(0..n),
        Order::ChildrenFirst => Box::new((0..n).rev()),
    };
    // A stop request made this rank leave a level of its own undone.
    let mut cut = false;
    for k in ks {
        let level = &levels[k];
        let shared = most[k] > LOCAL_LEVEL as u64;
        let must_meet = match order {
            Order::ParentsFirst => k > 0 && elsewhere[k],
            Order::ChildrenFirst => k + 1 < n && elsewhere[k + 1],
        };
        if (shared || must_meet) && tool.meet(comm, stop.load(Ordering::Relaxed)) {
            return true;
        }
        if shared {
            let interrupted = run_batches(comm, Some(stop), progress, level, |c| tool.work(c));
            if tool.meet(comm, interrupted) {
                return true;
            }
        } else if level.is_empty() {
            // Other ranks' level: nothing to do here (and nothing to allocate: 64 thread ranks
            // allocating for nothing at every level of a deep chain contend for malloc's
            // locks).
        } else if !cut && !stop.load(Ordering::Relaxed) {
            tool.work(level);
            if let Some(p) = progress {
                p.add(level.len() as u64, 0);
            }
            tool.after_local();
        } else {
            cut = true;
        }
    }
    tool.meet(comm, cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::{Detail, FileType};
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn every_record_is_worked_once_at_several_rank_counts() {
        for ranks in [1, 2, 4] {
            let seen = AtomicU64::new(0);
            let sum = AtomicU64::new(0);
            steal::local::run(ranks, |comm| {
                let mut list = FileList::new(Detail::Lite);
                if comm.rank() == 0 {
                    for i in 0..300u64 {
                        list.push(format!("/x/{i}").as_bytes(), FileType::File, None);
                    }
                }
                let interrupted = run_batches(comm, None, None, &list, |chunk| {
                    for e in chunk.iter() {
                        let n: u64 = std::str::from_utf8(&e.path[3..]).unwrap().parse().unwrap();
                        seen.fetch_add(1, Ordering::Relaxed);
                        sum.fetch_add(n, Ordering::Relaxed);
                    }
                });
                assert!(!interrupted);
            });
            assert_eq!(seen.into_inner(), 300, "ranks {ranks}");
            assert_eq!(sum.into_inner(), 299 * 300 / 2, "ranks {ranks}");
        }
    }

    /// Records the order in which records were worked, and counts meetings.
    struct Stamps {
        next: AtomicU64,
        at: std::sync::Mutex<std::collections::HashMap<Vec<u8>, u64>>,
        meetings: u64,
    }

    impl LevelWork for Stamps {
        fn work(&self, chunk: &FileList) {
            for e in chunk.iter() {
                let t = self.next.fetch_add(1, Ordering::SeqCst);
                self.at.lock().unwrap().insert(e.path.to_vec(), t);
            }
        }
        fn meet(&mut self, comm: &dyn Comm, flag: bool) -> bool {
            self.meetings += 1;
            // A shared clock, so that stamps compare across ranks.
            let mut t = [self.next.load(Ordering::SeqCst)];
            comm.allreduce(&mut t, ReduceOp::Max);
            self.next.store(t[0], Ordering::SeqCst);
            steal::CommExt::any(comm, flag)
        }
    }

    /// A chain of 200 directories spread over 4 ranks, and a level of 300 directories on one
    /// rank: parents first, every directory is worked after its parent (children first,
    /// before it), each once, with a meeting where the chain crosses ranks and around the
    /// wide level (shared by stealing), not one per level.
    #[test]
    fn levels_go_in_order_across_ranks_and_meet_only_where_they_must() {
        use flist::distribute::{by_depth, spread};
        for order in [Order::ParentsFirst, Order::ChildrenFirst] {
            let out = steal::local::run(4, |comm| {
                let mut list = FileList::new(Detail::Lite);
                if comm.rank() == 0 {
                    let mut path = b"/c".to_vec();
                    for level in 0..200 {
                        list.push(&path, FileType::Dir, None);
                        if level == 100 {
                            for w in 0..300 {
                                let wide = [&path[..], format!("/w{w}").as_bytes()].concat();
                                list.push(&wide, FileType::Dir, None);
                            }
                        }
                        path.extend_from_slice(b"/d");
                    }
                }
                let list = spread(comm, list);
                let levels = by_depth(comm, &list);
                let mut stamps = Stamps {
                    next: AtomicU64::new(0),
                    at: Default::default(),
                    meetings: 0,
                };
                let stop = AtomicBool::new(false);
                assert!(!run_levels(comm, &levels, order, &stop, None, &mut stamps));
                // Comparable across ranks: the clock is shared at every meeting.
                let at: Vec<(Vec<u8>, u64)> = stamps.at.into_inner().unwrap().into_iter().collect();
                (at, stamps.meetings)
            });
            let mut at = std::collections::HashMap::new();
            for (part, _) in &out {
                for (p, t) in part {
                    assert!(
                        at.insert(p.clone(), *t).is_none(),
                        "{order:?}: worked twice"
                    );
                }
            }
            assert_eq!(at.len(), 500, "{order:?}");
            for (p, t) in &at {
                if let Some(parent_t) = at.get(flist::path::parent(p)) {
                    match order {
                        Order::ParentsFirst => assert!(parent_t < t, "{order:?}: {p:?}"),
                        Order::ChildrenFirst => assert!(parent_t > t, "{order:?}: {p:?}"),
                    }
                }
            }
            // Around the wide level (before and after it), where the chain crosses ranks
            // (there too, as it happens) and at the end: a handful, not 200.
            for (_, meetings) in &out {
                assert!(
                    (3..=10).contains(meetings),
                    "{order:?}: {meetings} meetings"
                );
            }
        }
    }

    #[test]
    fn a_few_records_are_worked_side_by_side_many_in_full_batches() {
        let workers = rayon::current_num_threads();
        assert_eq!(batch_len(0), 1);
        assert_eq!(batch_len(1), 1);
        // Four big files on a rank of two threads: one per item.
        assert!(batch_len(4) <= 4usize.div_ceil(2 * workers));
        assert_eq!(batch_len(2 * workers), 1);
        assert_eq!(batch_len(1_000_000), BATCH);
        // Every thread gets at least two items while the list allows it.
        for len in [2usize, 7, 64, 300, 5000] {
            let items = len.div_ceil(batch_len(len));
            assert!(
                items >= (2 * workers).min(len),
                "{len} records in {items} items"
            );
        }
    }

    #[test]
    fn four_records_of_one_rank_are_worked_by_several_threads() {
        if rayon::current_num_threads() < 2 {
            return; // one CPU: nothing to run beside
        }
        let threads = std::sync::Mutex::new(std::collections::HashSet::new());
        steal::local::run(1, |comm| {
            let mut list = FileList::new(Detail::Lite);
            for i in 0..4 {
                list.push(format!("/big/{i}").as_bytes(), FileType::File, None);
            }
            run_batches(comm, None, None, &list, |chunk| {
                // Long enough that a second thread takes the next item meanwhile.
                std::thread::sleep(std::time::Duration::from_millis(100 * chunk.len() as u64));
                threads.lock().unwrap().insert(std::thread::current().id());
            });
        });
        assert!(threads.into_inner().unwrap().len() >= 2);
    }
}
