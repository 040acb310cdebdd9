//! Work on a list's records over all ranks with work stealing, a batch of records per work item
//! (rm's removal, chmod's changes, reln's rewrites).

use flist::FileList;
use std::sync::atomic::AtomicBool;
use steal::progress::Progress;
use steal::{queue, Comm};

/// Records per work item: enough to amortise the queue's bookkeeping, few enough that idle
/// ranks find work to steal.
const BATCH: usize = 64;

/// Run `work` on `list`'s records on all ranks, [`BATCH`] records per call, each batch as a
/// list of `list`'s detail; `progress` counts records. Returns true (on every rank) when a stop
/// request cut the work short. Collective.
pub fn run_batches(
    comm: &dyn Comm,
    stop: Option<&AtomicBool>,
    progress: Option<&Progress>,
    list: &FileList,
    work: impl Fn(&FileList) + Sync,
) -> bool {
    let initial: Vec<Vec<u8>> = (0..list.len())
        .step_by(BATCH)
        .map(|first| {
            let mut batch = Vec::new();
            for i in first..(first + BATCH).min(list.len()) {
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
}
