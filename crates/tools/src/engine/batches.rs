//! Work on a list's records over all ranks with work stealing, a batch of records per work item
//! (rm's removal, chmod's changes, reln's rewrites).

use flist::FileList;
use std::sync::atomic::AtomicBool;
use steal::progress::Progress;
use steal::{queue, Comm};

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
