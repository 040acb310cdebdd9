//! The collective operations of flist at several rank counts, on seeded synthetic lists with
//! non-UTF-8 paths, uneven starting distributions and empty ranks.

use flist::chunk::{plan_chunks, plan_striped_chunks, Chunk, Stripes};
use flist::distribute::{by_depth, hash_path, remap, spread};
use flist::filter::{apply, Cmp, Filter, Test};
use flist::path::{basename, depth};
use flist::sort::{parse_keys, sort, Field, Key};
use flist::summary::summarize;
use flist::{Detail, Error, FileList, FileType, IdTable, Meta};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;

/// One record, owned: path, type, metadata.
type Rec = (Vec<u8>, FileType, Option<Meta>);

const N: usize = 3000;

fn users() -> IdTable {
    // Names out of id order; uids 2 and 5 have no name (sorted as "2", "5").
    IdTable {
        entries: vec![
            (b"zed".to_vec(), 0),
            (b"amy".to_vec(), 1),
            (b"bob".to_vec(), 3),
            (b"amy2".to_vec(), 4),
        ],
    }
}

fn groups() -> IdTable {
    IdTable {
        entries: vec![(b"wheel".to_vec(), 0), (b"adm".to_vec(), 2)],
    }
}

fn random_name(rng: &mut SmallRng) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcXYZ._-";
    let len = rng.random_range(1..8);
    let mut name: Vec<u8> = (0..len)
        .map(|_| {
            if rng.random_bool(0.04) {
                [0x80, 0xff, 0xc3][rng.random_range(0..3)]
            } else {
                ALPHABET[rng.random_range(0..ALPHABET.len())]
            }
        })
        .collect();
    if rng.random_bool(0.2) {
        name.extend_from_slice(b".c");
    }
    name
}

/// `n` random records (stat metadata always generated; lite lists drop it), with many ties in
/// every key, a few exact duplicates and a few same-path records with different metadata.
fn records(seed: u64, n: usize) -> Vec<Rec> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out: Vec<Rec> = Vec::with_capacity(n);
    while out.len() < n {
        if out.len() > 10 && rng.random_bool(0.01) {
            let mut r = out[rng.random_range(0..out.len())].clone();
            if rng.random_bool(0.5) {
                if let Some(m) = r.2.as_mut() {
                    m.ino += 1;
                }
            }
            out.push(r);
            continue;
        }
        let mut path = Vec::new();
        for _ in 0..rng.random_range(1..6) {
            path.push(b'/');
            path.extend_from_slice(&random_name(&mut rng));
        }
        let (kind, fmt) = match rng.random_range(0..20) {
            0..12 => (FileType::File, 0o100000),
            12..17 => (FileType::Dir, 0o040000),
            17..19 => (FileType::Symlink, 0o120000),
            _ => (FileType::Fifo, 0o010000),
        };
        let meta = Meta {
            mode: fmt | 0o644,
            uid: rng.random_range(0..6),
            gid: rng.random_range(0..4),
            atime: 1_600_000_000 + rng.random_range(0..20),
            atime_nsec: rng.random_range(0..3),
            mtime: rng.random_range(-5..15),
            mtime_nsec: rng.random_range(0..3),
            ctime: 1_700_000_000 + rng.random_range(0..20),
            ctime_nsec: rng.random_range(0..3),
            size: if rng.random_bool(0.5) {
                rng.random_range(0..5)
            } else {
                rng.random_range(0..100_000)
            },
            nlink: 1,
            ino: rng.random_range(0..1_000_000),
            dev: 7,
        };
        out.push((path, kind, Some(meta)));
    }
    out
}

fn lite(recs: &[Rec]) -> Vec<Rec> {
    recs.iter().map(|(p, k, _)| (p.clone(), *k, None)).collect()
}

/// Uneven split of `total` records over `size` ranks: rank 1 (and every third rank) empty.
fn split(total: usize, size: usize) -> Vec<Range<usize>> {
    let weights: Vec<usize> = (0..size)
        .map(|r| {
            if size > 1 && r % 3 == 1 {
                0
            } else {
                r * 7 % 5 + 1
            }
        })
        .collect();
    let sum: usize = weights.iter().sum();
    let mut start = 0;
    let mut acc = 0;
    weights
        .iter()
        .map(|w| {
            acc += w;
            let end = total * acc / sum;
            let r = start..end;
            start = end;
            r
        })
        .collect()
}

fn build(recs: &[Rec]) -> FileList {
    let detail = if recs.first().is_some_and(|r| r.2.is_none()) {
        Detail::Lite
    } else {
        Detail::Stat
    };
    let mut list = FileList::new(detail);
    list.users = users();
    list.groups = groups();
    for (p, k, m) in recs {
        list.push(p, *k, *m);
    }
    list
}

fn build_as(detail: Detail, recs: &[Rec]) -> FileList {
    let mut list = build(recs);
    if list.is_empty() && detail != list.detail() {
        list = FileList::new(detail);
        list.users = users();
        list.groups = groups();
    }
    list
}

fn recs_of(list: &FileList) -> Vec<Rec> {
    list.iter()
        .map(|e| (e.path.to_vec(), e.kind, e.meta))
        .collect()
}

/// Canonical bytes of a record, to compare multisets.
fn canon(r: &Rec) -> Vec<u8> {
    let mut list = FileList::new(if r.2.is_some() {
        Detail::Stat
    } else {
        Detail::Lite
    });
    list.push(&r.0, r.1, r.2);
    let mut b = Vec::new();
    list.encode_record(0, &mut b);
    b
}

fn multiset(recs: &[Rec]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = recs.iter().map(canon).collect();
    v.sort();
    v
}

/// Rank `r`'s share of `recs` distributed unevenly over `size` ranks, as a list.
fn share(recs: &[Rec], size: usize, rank: usize) -> FileList {
    let detail = if recs.first().is_some_and(|r| r.2.is_none()) {
        Detail::Lite
    } else {
        Detail::Stat
    };
    build_as(detail, &recs[split(recs.len(), size)[rank].clone()])
}

fn assert_balanced(counts: &[usize], total: usize) {
    let size = counts.len();
    for (r, &c) in counts.iter().enumerate() {
        assert_eq!(
            c,
            total / size + usize::from(r < total % size),
            "counts {counts:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// sort

/// Independent statement of the order: the keys, then the path.
fn reference_cmp(a: &Rec, b: &Rec, keys: &[Key]) -> Ordering {
    let name = |t: &IdTable, id: u32| {
        t.name_of(id as u64)
            .map(<[u8]>::to_vec)
            .unwrap_or_else(|| id.to_string().into_bytes())
    };
    for k in keys {
        let o = if k.field == Field::Name {
            a.0.cmp(&b.0)
        } else {
            let (x, y) = (a.2.unwrap(), b.2.unwrap());
            match k.field {
                Field::Name => unreachable!(),
                Field::User => name(&users(), x.uid).cmp(&name(&users(), y.uid)),
                Field::Group => name(&groups(), x.gid).cmp(&name(&groups(), y.gid)),
                Field::Uid => x.uid.cmp(&y.uid),
                Field::Gid => x.gid.cmp(&y.gid),
                Field::Atime => (x.atime, x.atime_nsec).cmp(&(y.atime, y.atime_nsec)),
                Field::Mtime => (x.mtime, x.mtime_nsec).cmp(&(y.mtime, y.mtime_nsec)),
                Field::Ctime => (x.ctime, x.ctime_nsec).cmp(&(y.ctime, y.ctime_nsec)),
                Field::Size => x.size.cmp(&y.size),
            }
        };
        let o = if k.descending { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.0.cmp(&b.0)
}

/// Sort `recs` spread unevenly over `size` ranks; the per-rank results.
fn sorted_at(recs: &[Rec], size: usize, keys: &[Key]) -> Vec<Vec<Rec>> {
    steal::local::run(size, |comm| {
        let list = share(recs, size, comm.rank());
        recs_of(&sort(comm, list, keys).expect("valid keys"))
    })
}

fn check_sort_everywhere(recs: &[Rec], spec: &str) {
    let keys = parse_keys(spec).unwrap();
    let one: Vec<Rec> = sorted_at(recs, 1, &keys).concat();
    assert_eq!(
        multiset(&one),
        multiset(recs),
        "{spec}: records lost or duplicated"
    );
    for w in one.windows(2) {
        assert_ne!(
            reference_cmp(&w[0], &w[1], &keys),
            Ordering::Greater,
            "{spec}: out of order"
        );
    }
    for size in [3, 4, 7] {
        let parts = sorted_at(recs, size, &keys);
        let counts: Vec<usize> = parts.iter().map(Vec::len).collect();
        assert_balanced(&counts, recs.len());
        assert!(
            parts.concat() == one,
            "{spec} at {size} ranks differs from 1 rank"
        );
    }
}

#[test]
fn sort_by_each_field_both_directions_matches_one_rank() {
    let recs = records(1, N);
    for f in Field::ALL {
        check_sort_everywhere(&recs, f.as_str());
        check_sort_everywhere(&recs, &format!("-{}", f.as_str()));
    }
}

#[test]
fn sort_by_several_keys_matches_one_rank() {
    let recs = records(2, N);
    for spec in [
        "-size,name",
        "user,-mtime",
        "group,uid,-atime",
        "gid,-ctime,size",
    ] {
        check_sort_everywhere(&recs, spec);
    }
}

#[test]
fn sort_of_lite_lists_by_name() {
    let recs = lite(&records(3, N));
    check_sort_everywhere(&recs, "name");
    check_sort_everywhere(&recs, "-name");
}

#[test]
fn sort_with_equal_keys_and_empty_ranks_orders_by_path() {
    // Every size equal, and only rank 2 of 4 holds records.
    let mut recs = records(4, 500);
    for r in &mut recs {
        r.2.as_mut().unwrap().size = 42;
    }
    let keys = parse_keys("size").unwrap();
    let parts = steal::local::run(4, |comm| {
        let list = if comm.rank() == 2 {
            build(&recs)
        } else {
            FileList::new(Detail::Stat)
        };
        recs_of(&sort(comm, list, &keys).unwrap())
    });
    assert_balanced(&parts.iter().map(Vec::len).collect::<Vec<_>>(), recs.len());
    let all = parts.concat();
    assert_eq!(multiset(&all), multiset(&recs));
    assert!(
        all.windows(2).all(|w| w[0].0 <= w[1].0),
        "ties broken by path"
    );
    // Nothing anywhere.
    let empty = steal::local::run(3, |comm| {
        sort(comm, FileList::new(Detail::Stat), &keys)
            .unwrap()
            .len()
    });
    assert_eq!(empty, vec![0, 0, 0]);
}

#[test]
fn sort_refuses_metadata_keys_on_lite_lists_on_every_rank() {
    let recs = lite(&records(5, 100));
    let out = steal::local::run(3, |comm| {
        let keys = parse_keys("name,-size").unwrap();
        match sort(comm, share(&recs, 3, comm.rank()), &keys) {
            Err(Error::Invalid(m)) => m,
            other => panic!("expected Invalid, got {:?}", other.map(|l| l.len())),
        }
    });
    assert!(out.iter().all(|m| m.contains("size")), "{out:?}");
    assert!(matches!(parse_keys("name,colour"), Err(Error::Invalid(m)) if m.contains("colour")));
}

// ---------------------------------------------------------------------------------------------
// spread, remap, by_depth

#[test]
fn spread_balances_and_keeps_the_global_order() {
    let recs = records(6, 1000);
    for size in [1, 2, 3, 5, 8] {
        let parts = steal::local::run(size, |comm| {
            recs_of(&spread(comm, share(&recs, size, comm.rank())))
        });
        assert_balanced(&parts.iter().map(Vec::len).collect::<Vec<_>>(), recs.len());
        assert!(parts.concat() == recs, "order changed at {size} ranks");
    }
    // Fewer records than ranks.
    let few = &recs[..3];
    let parts = steal::local::run(5, |comm| recs_of(&spread(comm, share(few, 5, comm.rank()))));
    assert_eq!(
        parts.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![1, 1, 1, 0, 0]
    );
    assert!(parts.concat() == few);
}

#[test]
fn remap_sends_every_record_where_dest_says_in_source_order() {
    let recs = records(7, 2000);
    for size in [1, 3, 4] {
        let dest = |p: &[u8]| (hash_path(p) % size as u64) as usize;
        let parts = steal::local::run(size, |comm| {
            recs_of(&remap(comm, share(&recs, size, comm.rank()), |e| {
                dest(e.path)
            }))
        });
        let ranges = split(recs.len(), size);
        for (me, got) in parts.iter().enumerate() {
            let expected: Vec<Rec> = ranges
                .iter()
                .flat_map(|r| recs[r.clone()].iter().filter(|x| dest(&x.0) == me).cloned())
                .collect();
            assert!(*got == expected, "rank {me} of {size}");
        }
        assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), recs.len());
    }
}

#[test]
fn by_depth_levels_agree_across_ranks() {
    let recs = records(8, 2000);
    let lo = recs.iter().map(|r| depth(&r.0)).min().unwrap();
    let hi = recs.iter().map(|r| depth(&r.0)).max().unwrap();
    for size in [1, 3, 4] {
        let levels = steal::local::run(size, |comm| {
            let list = share(&recs, size, comm.rank());
            by_depth(comm, &list)
                .iter()
                .map(recs_of)
                .collect::<Vec<_>>()
        });
        let ranges = split(recs.len(), size);
        for (r, lv) in levels.iter().enumerate() {
            assert_eq!(lv.len(), hi - lo + 1, "rank {r} of {size}");
            for (k, level) in lv.iter().enumerate() {
                let expected: Vec<Rec> = recs[ranges[r].clone()]
                    .iter()
                    .filter(|x| depth(&x.0) == lo + k)
                    .cloned()
                    .collect();
                assert!(*level == expected, "rank {r} level {k}");
            }
        }
    }
    // Records only at depth 3 on rank 0: one level everywhere; nothing anywhere: no level.
    let deep = vec![(b"/a/b/c".to_vec(), FileType::File, None)];
    let n = steal::local::run(3, |comm| {
        let list = if comm.rank() == 0 {
            build(&deep)
        } else {
            FileList::new(Detail::Lite)
        };
        by_depth(comm, &list).len()
    });
    assert_eq!(n, vec![1, 1, 1]);
    let n = steal::local::run(2, |comm| by_depth(comm, &FileList::new(Detail::Lite)).len());
    assert_eq!(n, vec![0, 0]);
}

#[test]
fn hash_path_is_fnv1a_64() {
    assert_eq!(hash_path(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(hash_path(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(hash_path(b"foobar"), 0x8594_4171_f739_67e8);
}

// ---------------------------------------------------------------------------------------------
// summarize

#[test]
fn summarize_counts_everything_once() {
    let recs = records(9, N);
    let count = |k: FileType| recs.iter().filter(|r| r.1 == k).count() as u64;
    let bytes: u64 = recs
        .iter()
        .filter(|r| r.1 == FileType::File)
        .map(|r| r.2.unwrap().size)
        .sum();
    let max_len = recs.iter().map(|r| r.0.len()).max().unwrap() as u64;
    for size in [1, 4, 7] {
        let ranges = split(recs.len(), size);
        let sums = steal::local::run(size, |comm| {
            summarize(comm, &share(&recs, size, comm.rank()))
        });
        for (r, s) in sums.iter().enumerate() {
            assert_eq!(s.total, N as u64);
            assert_eq!(s.offset, ranges[r].start as u64);
            assert_eq!(s.max_path_len, max_len);
            assert_eq!(
                (s.files, s.dirs, s.links),
                (
                    count(FileType::File),
                    count(FileType::Dir),
                    count(FileType::Symlink)
                )
            );
            assert_eq!(s.others, count(FileType::Fifo));
            assert_eq!(s.bytes, bytes);
        }
    }
    let lite_sums = steal::local::run(2, |comm| {
        summarize(comm, &share(&lite(&recs), 2, comm.rank()))
    });
    assert_eq!(
        (lite_sums[0].bytes, lite_sums[0].files),
        (0, count(FileType::File))
    );
}

// ---------------------------------------------------------------------------------------------
// plan_chunks

/// Files of sizes around the chunk size, empty files, a big file, plus dirs and links.
fn chunk_records(seed: u64) -> Vec<Rec> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut recs = records(seed, 400);
    for (i, r) in recs.iter_mut().enumerate() {
        if let Some(m) = r.2.as_mut() {
            m.size = match i % 7 {
                0 => 0,
                1 => 1000,
                2 => 3000,
                _ => rng.random_range(0..5000),
            };
        }
        r.0.extend_from_slice(format!("#{i}").as_bytes()); // unique paths
    }
    let big = Meta {
        mode: 0o100600,
        size: 600_001,
        ..Meta::default()
    };
    recs.insert(17, (b"/big\xff".to_vec(), FileType::File, Some(big)));
    recs
}

fn expected_chunks(recs: &[Rec], cs: u64) -> Vec<Chunk> {
    let mut out = Vec::new();
    for (p, k, m) in recs {
        let (FileType::File, Some(m)) = (k, m) else {
            continue;
        };
        let mut offset = 0;
        loop {
            let length = cs.min(m.size - offset);
            out.push(Chunk {
                path: p.clone(),
                offset,
                length,
                file_size: m.size,
                meta: *m,
            });
            offset += length;
            if offset >= m.size {
                break;
            }
        }
    }
    out
}

#[test]
fn chunks_cover_every_byte_once_balanced_by_bytes() {
    let recs = chunk_records(10);
    let cs = 1000;
    let expected = expected_chunks(&recs, cs);
    let total: u64 = expected.iter().map(|c| c.length).sum();
    assert!(expected.iter().any(|c| c.file_size == 0 && c.length == 0));
    for size in [1, 3, 4, 7] {
        let plans = steal::local::run(size, |comm| {
            plan_chunks(comm, &share(&recs, size, comm.rank()), cs)
        });
        // Contiguous runs of the global chunk sequence, which covers every byte exactly once.
        assert!(plans.concat() == expected, "chunk sequence at {size} ranks");
        for (r, plan) in plans.iter().enumerate() {
            let bytes: u64 = plan.iter().map(|c| c.length).sum();
            let mean = total as f64 / size as f64;
            assert!(
                (bytes as f64 - mean).abs() <= cs as f64,
                "rank {r} of {size}: {bytes} bytes, mean {mean}"
            );
        }
        if size > 1 {
            let holders = plans
                .iter()
                .filter(|p| p.iter().any(|c| c.path == b"/big\xff"))
                .count();
            assert!(holders > 1, "the big file's chunks are spread");
        }
    }
}

#[test]
fn chunk_size_zero_and_empty_files() {
    let recs = chunk_records(11);
    let whole: Vec<Chunk> = expected_chunks(&recs, u64::MAX);
    let plans = steal::local::run(3, |comm| {
        plan_chunks(comm, &share(&recs, 3, comm.rank()), 0)
    });
    assert!(plans.concat() == whole);
    // Only empty files: one zero-length chunk each, dealt evenly by count.
    let empties: Vec<Rec> = (0..10)
        .map(|i| {
            (
                format!("/e{i}").into_bytes(),
                FileType::File,
                Some(Meta {
                    mode: 0o100644,
                    ..Meta::default()
                }),
            )
        })
        .collect();
    let plans = steal::local::run(4, |comm| {
        let list = if comm.rank() == 3 {
            build(&empties)
        } else {
            FileList::new(Detail::Stat)
        };
        plan_chunks(comm, &list, 1 << 20)
    });
    assert_eq!(
        plans.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![3, 2, 3, 2]
    );
    assert!(plans.concat() == expected_chunks(&empties, 1 << 20));
    // Lite lists carry no sizes: nothing to copy.
    let plans = steal::local::run(2, |comm| {
        plan_chunks(comm, &share(&lite(&recs), 2, comm.rank()), 10)
    });
    assert!(plans.iter().all(Vec::is_empty));
}

/// For every stripe of every file: the ranks whose chunks write a byte of it.
fn stripe_writers(plans: &[Vec<Chunk>], stripe: u64) -> HashMap<(Vec<u8>, u64), Vec<usize>> {
    let mut writers: HashMap<(Vec<u8>, u64), Vec<usize>> = HashMap::new();
    for (r, plan) in plans.iter().enumerate() {
        for c in plan.iter().filter(|c| c.length > 0) {
            for s in c.offset / stripe..=(c.offset + c.length - 1) / stripe {
                let w = writers.entry((c.path.clone(), s)).or_default();
                if !w.contains(&r) {
                    w.push(r);
                }
            }
        }
    }
    writers
}

#[test]
fn striped_files_give_each_rank_whole_objects_and_no_stripe_two_ranks() {
    let stripe = 1000;
    let (count, cs) = (4u64, 1000u64);
    let big = |name: &str, size: u64| {
        let m = Meta {
            mode: 0o100644,
            size,
            ..Meta::default()
        };
        (name.as_bytes().to_vec(), FileType::File, Some(m))
    };
    // Two files of 40 stripes each: 80 chunks, 20 per OST object pair (file, object).
    let recs = vec![big("/a", 40 * stripe), big("/b", 40 * stripe - 1)];
    let layout = Stripes {
        count,
        size: stripe,
    };
    let plan = |size: usize, striped: bool| {
        steal::local::run(size, |comm| {
            let f = |_: &[u8], _: u64| striped.then_some(layout);
            plan_striped_chunks(comm, &share(&recs, size, comm.rank()), cs, &f)
        })
    };
    let object = |c: &Chunk| (c.path.clone(), (c.offset / stripe) % count);
    for size in [2, 3, 4, 8] {
        let plans = plan(size, true);
        let mut all: Vec<Chunk> = plans.concat();
        all.sort_by(|x, y| (&x.path, x.offset).cmp(&(&y.path, y.offset)));
        assert!(
            all == expected_chunks(&recs, cs),
            "every byte once at {size} ranks"
        );
        for (s, w) in stripe_writers(&plans, stripe) {
            assert_eq!(w.len(), 1, "stripe {s:?} written by ranks {w:?}");
        }
        // 8 objects over `size` ranks: an object is split between ranks only at the edges of
        // a rank's share, so each rank touches at most ceil(8 / size) + 1 objects, and exactly
        // one when there are as many ranks as objects.
        for (r, p) in plans.iter().enumerate() {
            let mut objects: Vec<_> = p.iter().map(object).collect();
            objects.sort();
            objects.dedup();
            let limit = if size == 8 {
                1
            } else {
                8usize.div_ceil(size) + 1
            };
            assert!(objects.len() <= limit, "rank {r} of {size}: {objects:?}");
        }
    }
    // Without the layout, contiguous runs put every rank on every object of a file.
    let plans = plan(4, false);
    let objects: std::collections::HashSet<_> = plans[0].iter().map(object).collect();
    assert_eq!(objects.len(), 4);
}

#[test]
fn stripe_periods() {
    let s = |count, size| Stripes { count, size };
    assert_eq!(s(4, 1 << 20).period(1 << 20), 4, "one stripe per chunk");
    assert_eq!(s(4, 1 << 20).period(2 << 20), 2, "two stripes per chunk");
    assert_eq!(
        s(4, 1 << 20).period(4 << 20),
        1,
        "every chunk covers all objects"
    );
    assert_eq!(s(3, 1 << 20).period(2 << 20), 3);
    assert_eq!(s(1, 1 << 20).period(1 << 20), 1);
    assert_eq!(
        s(4, 3 << 20).period(4 << 20),
        1,
        "not a multiple: no grouping"
    );
}

// ---------------------------------------------------------------------------------------------
// filters

fn select(recs: &[Rec], keep: impl Fn(&Rec) -> bool) -> Vec<Rec> {
    recs.iter().filter(|r| keep(r)).cloned().collect()
}

fn filtered(recs: &[Rec], tests: Vec<Test>) -> Vec<Rec> {
    recs_of(&apply(&build(recs), &Filter::new(tests)))
}

#[test]
fn filters_select_exactly_the_expected_records() {
    let mut recs = records(12, N);
    recs.push((b"/d/caf\xe9.c".to_vec(), FileType::File, recs[0].2));
    let size = |r: &Rec| r.2.unwrap().size;
    let name = |r: &Rec| basename(&r.0).to_vec();

    let got = filtered(&recs, vec![Test::Type(FileType::Dir)]);
    assert_eq!(got, select(&recs, |r| r.1 == FileType::Dir));
    assert!(!got.is_empty());
    assert_eq!(
        filtered(&recs, vec![Test::file_type("l").unwrap()]),
        select(&recs, |r| r.1 == FileType::Symlink)
    );

    assert_eq!(
        filtered(&recs, vec![Test::size("+48k").unwrap()]),
        select(&recs, |r| size(r) > 48 * 1024)
    );
    assert_eq!(
        filtered(&recs, vec![Test::size("-3").unwrap()]),
        select(&recs, |r| size(r) < 3)
    );
    assert_eq!(
        filtered(&recs, vec![Test::size("2").unwrap()]),
        select(&recs, |r| size(r) == 2)
    );
    assert!(matches!(
        Test::size("+4MB").unwrap(),
        Test::Size {
            cmp: Cmp::Greater,
            bytes: 4_194_304
        }
    ));

    // `*.c`, with fnmatch's FNM_PERIOD: hidden names need a literal leading dot.
    let c_files = filtered(&recs, vec![Test::name_glob("*.c").unwrap()]);
    assert_eq!(
        c_files,
        select(&recs, |r| name(r).ends_with(b".c") && name(r)[0] != b'.')
    );
    assert!(
        c_files.iter().any(|r| std::str::from_utf8(&r.0).is_err()),
        "non-UTF-8 names match"
    );
    let hidden = filtered(&recs, vec![Test::name_glob(".*").unwrap()]);
    assert_eq!(hidden, select(&recs, |r| name(r)[0] == b'.'));
    assert!(!hidden.is_empty());
    // `?` matches one non-UTF-8 byte.
    assert_eq!(
        filtered(&recs, vec![Test::name_glob("caf?.c").unwrap()]),
        vec![recs.last().unwrap().clone()]
    );

    assert_eq!(
        filtered(&recs, vec![Test::path_glob("/a*").unwrap()]),
        select(&recs, |r| r.0.starts_with(b"/a"))
    );
    assert_eq!(
        filtered(&recs, vec![Test::path_glob("*/X*/*").unwrap()]),
        select(&recs, |r| r
            .0
            .windows(2)
            .enumerate()
            .any(|(i, w)| w == b"/X" && r.0[i + 1..].contains(&b'/')))
    );

    let ff = filtered(&recs, vec![Test::regex("(?-u)\\xff").unwrap()]);
    assert_eq!(ff, select(&recs, |r| r.0.contains(&0xff)));
    assert!(!ff.is_empty());
    assert_eq!(
        filtered(&recs, vec![Test::name_regex("^X").unwrap()]),
        select(&recs, |r| name(r)[0] == b'X')
    );

    // Tests are ANDed; an empty filter keeps everything.
    let and = filtered(
        &recs,
        vec![
            Test::Type(FileType::File),
            Test::name_glob("*.c").unwrap(),
            Test::size("-1000").unwrap(),
        ],
    );
    assert_eq!(
        and,
        select(&recs, |r| r.1 == FileType::File
            && name(r).ends_with(b".c")
            && name(r)[0] != b'.'
            && size(r) < 1000)
    );
    assert!(!and.is_empty());
    assert_eq!(filtered(&recs, vec![]), recs);

    // Size never matches without metadata; bad patterns are Invalid.
    assert!(filtered(&lite(&recs), vec![Test::size("-1000000").unwrap()]).is_empty());
    for bad in [
        Test::name_glob("a[").err(),
        Test::regex("(").err(),
        Test::size("4Q").err(),
    ] {
        assert!(matches!(bad, Some(Error::Invalid(_))));
    }
}
