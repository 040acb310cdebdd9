//! Hot paths other than the sort (see `flist.rs`), each as a throughput:
//! - records: encode and decode of the inter-rank record encoding (records/s);
//! - lists: write and read a cache v4 list and a text list of 100,000 records (records/s);
//! - chunks: planning 4 MiB chunks of 100,000 files of mixed sizes (files/s);
//! - tar headers: ustar and pax header encoding (headers/s);
//! - queue: the work-stealing queue moving trivial items at 1, 2 and 8 local ranks (items/s);
//! - paths: normalise, prefix test, basename and depth (paths/s).
//!
//! Run: `cargo bench -p mfu-benches --bench hot` (`-- queue` for one group).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use flist::io::{self, Format};
use flist::{path, Detail, FileList, FileType, Meta};
use mfu::unstable::tar::format::{Header, Kind};
use mfu_benches::Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const RECORDS: usize = 100_000;

/// `n` stat records with 60-byte paths three directories deep and sizes with a long tail
/// (most below 64 KiB, one in 1,000 up to 1 GiB).
fn records(n: usize) -> FileList {
    let mut rng = Rng(7);
    let mut list = FileList::new(Detail::Stat);
    let mut p = Vec::with_capacity(64);
    for i in 0..n {
        p.clear();
        p.extend_from_slice(format!("/lustre/project/d{:02}/e{:02}/", i % 32, i % 7).as_bytes());
        while p.len() < 60 {
            p.push(b'a' + (rng.next_u64() % 26) as u8);
        }
        let r = rng.next_u64();
        let size = if r.is_multiple_of(1000) {
            r % (1 << 30)
        } else {
            r % (64 << 10)
        };
        let meta = Meta {
            mode: 0o100644,
            size,
            mtime: 1_600_000_000 + (r % 1_000_000) as i64,
            ..Meta::default()
        };
        list.push(&p, FileType::File, Some(meta));
    }
    list
}

fn bench_records(c: &mut Criterion) {
    let list = records(RECORDS);
    let mut encoded = Vec::new();
    for i in 0..list.len() {
        list.encode_record(i, &mut encoded);
    }
    let mut g = c.benchmark_group("records");
    g.throughput(Throughput::Elements(RECORDS as u64));
    g.bench_function("encode_100k", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(encoded.len());
            for i in 0..list.len() {
                list.encode_record(i, &mut out);
            }
            out.len()
        })
    });
    g.bench_function("decode_100k", |b| {
        b.iter(|| {
            let mut back = FileList::new(Detail::Stat);
            back.decode_records(&encoded);
            back.len()
        })
    });
    g.finish();
}

fn bench_lists(c: &mut Criterion) {
    let list = records(RECORDS);
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut g = c.benchmark_group("lists");
    g.throughput(Throughput::Elements(RECORDS as u64))
        .sample_size(20);
    for (name, format) in [("v4", Format::V4), ("text", Format::Text)] {
        let file = dir.path().join(format!("list.{name}"));
        let file = file.as_os_str().as_encoded_bytes().to_vec();
        let write = || {
            steal::local::run(1, |comm| {
                io::write(comm, &list, &file, format).expect("write")
            });
        };
        g.bench_function(format!("write_{name}_100k"), |b| b.iter(write));
        write();
        g.bench_function(format!("read_{name}_100k"), |b| {
            b.iter(|| steal::local::run(1, |comm| io::read(comm, &file).expect("read").len()))
        });
    }
    g.finish();
}

fn bench_chunks(c: &mut Criterion) {
    let list = records(RECORDS);
    let mut g = c.benchmark_group("chunks");
    g.throughput(Throughput::Elements(RECORDS as u64));
    g.bench_function("plan_4MiB_100k_files", |b| {
        b.iter(|| {
            steal::local::run(1, |comm| {
                flist::chunk::plan_chunks(comm, &list, 4 << 20).len()
            })
        })
    });
    g.finish();
}

fn bench_tar_headers(c: &mut Criterion) {
    let header = |path: &[u8]| Header {
        path: path.to_vec(),
        kind: Kind::File,
        mode: 0o644,
        uid: 1000,
        gid: 1000,
        uname: b"user".to_vec(),
        gname: b"group".to_vec(),
        size: 4096,
        mtime: 1_600_000_000,
        mtime_nsec: 0,
        link: Vec::new(),
        dev_major: 0,
        dev_minor: 0,
        xattrs: Vec::new(),
        projid: Default::default(),
    };
    let ustar = header(b"project/run/output/step-000123.dat");
    // Over 100 bytes with no usable split and not ASCII: a pax record is needed.
    let mut long = b"project/".to_vec();
    long.extend(std::iter::repeat_n(b'\xc3', 150));
    let mut pax = header(&long);
    pax.mtime_nsec = 123_456_789;
    let mut g = c.benchmark_group("tar_headers");
    g.throughput(Throughput::Elements(1));
    for (name, h) in [("ustar", &ustar), ("pax", &pax)] {
        g.bench_function(name, |b| {
            let mut out = Vec::with_capacity(4096);
            b.iter(|| {
                out.clear();
                h.encode(&mut out)
            })
        });
    }
    g.finish();
}

fn bench_queue(c: &mut Criterion) {
    const ITEMS: u64 = 100_000;
    let mut g = c.benchmark_group("queue");
    g.throughput(Throughput::Elements(ITEMS))
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for ranks in [1usize, 2, 8] {
        g.bench_function(format!("{ranks}_ranks_100k_items"), |b| {
            b.iter_batched(
                || AtomicU64::new(0),
                |done| {
                    steal::local::run(ranks, |comm| {
                        // All items start on rank 0: the others must steal them.
                        let initial: Vec<u64> = if comm.rank() == 0 {
                            (0..ITEMS).collect()
                        } else {
                            Vec::new()
                        };
                        let config = steal::queue::Config::default();
                        steal::queue::run(comm, &config, initial, |item: u64, _| {
                            done.fetch_add(item & 1, Ordering::Relaxed);
                        })
                    });
                    assert_eq!(done.load(Ordering::Relaxed), ITEMS / 2);
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn bench_paths(c: &mut Criterion) {
    let list = records(10_000);
    let raw: Vec<Vec<u8>> = list
        .iter()
        .map(|e| {
            // What users type: relative, with `.`, `..` and doubled slashes.
            let mut p = b"./a//b/../".to_vec();
            p.extend_from_slice(&e.path[1..]);
            p
        })
        .collect();
    let mut g = c.benchmark_group("paths");
    g.throughput(Throughput::Elements(raw.len() as u64));
    g.bench_function("normalize_10k", |b| {
        b.iter(|| {
            raw.iter()
                .map(|p| path::normalize(p, b"/home/user").len())
                .sum::<usize>()
        })
    });
    g.bench_function("prefix_basename_depth_10k", |b| {
        b.iter(|| {
            list.iter()
                .map(|e| {
                    usize::from(path::is_prefix(b"/lustre/project/d07", e.path))
                        + path::basename(e.path).len()
                        + path::depth(e.path)
                })
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_records,
    bench_lists,
    bench_chunks,
    bench_tar_headers,
    bench_queue,
    bench_paths
);
criterion_main!(benches);
