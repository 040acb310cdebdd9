//! flist hot paths: the distributed sort of 1,000,000 records by name (1 and 2 local ranks), and
//! the memory a record costs beyond its path (printed before the benches run).
//!
//! Run: `cargo bench -p mfu-benches --bench flist`.

use criterion::{criterion_group, BatchSize, Criterion};
use flist::sort::{parse_keys, sort, Key};
use flist::{Detail, FileList, FileType, Meta};
use mfu_benches::Rng;
use std::sync::Mutex;
use std::time::Duration;

const RECORDS: usize = 1_000_000;
const PATH_LEN: usize = 60;

/// `n` stat records with random `PATH_LEN`-byte paths (a few directory levels, as a walk of a
/// project tree gives: shared prefixes, random leaves).
fn records(n: usize, seed: u64) -> FileList {
    let mut rng = Rng(seed);
    let mut list = FileList::new(Detail::Stat);
    let mut path = Vec::with_capacity(PATH_LEN);
    for _ in 0..n {
        path.clear();
        path.extend_from_slice(b"/lustre/project/");
        let r = rng.next_u64();
        for level in 0..3 {
            path.extend_from_slice(format!("d{:02}/", (r >> (8 * level)) % 32).as_bytes());
        }
        while path.len() < PATH_LEN {
            path.push(b'a' + (rng.next_u64() % 26) as u8);
        }
        let meta = Meta {
            mode: 0o100644,
            size: rng.next_u64() % (1 << 20),
            ..Meta::default()
        };
        list.push(&path, FileType::File, Some(meta));
    }
    list
}

/// Split `list` into `parts` lists of consecutive records.
fn split(list: &FileList, parts: usize) -> Vec<FileList> {
    (0..parts)
        .map(|p| list.select(p * list.len() / parts..(p + 1) * list.len() / parts))
        .collect()
}

fn sort_on(ranks: usize, lists: Vec<FileList>, keys: &[Key]) -> usize {
    let slots = Mutex::new(lists.into_iter().map(Some).collect::<Vec<_>>());
    let lens = steal::local::run(ranks, |comm| {
        let list = slots.lock().expect("slots")[comm.rank()]
            .take()
            .expect("one list per rank");
        sort(comm, list, keys).expect("sort by name").len()
    });
    lens.iter().sum()
}

fn bench_sort(c: &mut Criterion) {
    let keys = parse_keys("name").expect("name is a key");
    let list = records(RECORDS, 1);
    let mut group = c.benchmark_group("sort_1M_by_name");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for ranks in [1, 2] {
        group.bench_function(format!("{ranks}_rank"), |b| {
            b.iter_batched(
                || split(&list, ranks),
                |lists| assert_eq!(sort_on(ranks, lists, &keys), RECORDS),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// Bytes a record costs beyond its path, after `shrink_to_fit`.
fn memory_report() {
    for detail in [Detail::Stat, Detail::Lite] {
        let mut list = records(RECORDS, 2);
        if detail == Detail::Lite {
            let mut lite = FileList::new(Detail::Lite);
            for e in list.iter() {
                lite.push(e.path, e.kind, None);
            }
            list = lite;
        }
        list.shrink_to_fit();
        let beyond = (list.heap_bytes() - list.path_bytes()) as f64 / list.len() as f64;
        println!(
            "flist memory ({detail:?}): {} records of {PATH_LEN}-byte paths, {} heap bytes, \
             {beyond:.1} bytes per record beyond the path",
            list.len(),
            list.heap_bytes()
        );
    }
}

criterion_group!(benches, bench_sort);

fn main() {
    memory_report();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
