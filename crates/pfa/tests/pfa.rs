//! The crate's behaviour end to end, at 1, 2, 3 and 5 thread ranks (`steal::local`): round
//! trips, reading with another rank count, refusals (duplicates, cut and bit-flipped
//! aggregates, symbolic links, hard links, an existing path), versions and incremental stores,
//! recovery, `O_DIRECT` on disk and on tmpfs, seek and eof.

use pfa::{Aggregate, Error, Index, Options};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The test chunk size: a page, so that streams span many chunks cheaply.
const CHUNK: u64 = 4096;

fn options() -> Options {
    Options {
        chunk_size: Some(CHUNK),
        ..Options::default()
    }
}

/// Streams by name: (meta, data).
type Streams = BTreeMap<Vec<u8>, (Vec<u8>, Vec<u8>)>;

/// Deterministic bytes for (`seed`, `len`): a xorshift stream.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// What one rank writes in the round trip at `ranks` ranks: name -> (meta, data). Rank 1 of
/// three or more writes nothing; the others write an empty stream, a non-UTF-8 name, a stream
/// of many chunks (not a whole number of them) and small streams.
fn streams_of(rank: usize, ranks: usize) -> Streams {
    let mut m = BTreeMap::new();
    if ranks >= 3 && rank == 1 {
        return m;
    }
    let r = rank as u64;
    m.insert(
        format!("r{rank}/empty").into_bytes(),
        (b"e".to_vec(), Vec::new()),
    );
    m.insert(
        [format!("r{rank}/").as_bytes(), b"\xff\xfe-not-utf8\n"].concat(),
        (vec![0, 1, 2], bytes(r + 100, 777)),
    );
    m.insert(
        format!("r{rank}/big").into_bytes(),
        (Vec::new(), bytes(r + 200, (CHUNK * 9 + 123) as usize)),
    );
    for i in 0..20u64 {
        let len = (i * 37 + r * 11) as usize % 3000;
        m.insert(
            format!("r{rank}/small/{i}").into_bytes(),
            (i.to_le_bytes().to_vec(), bytes(r * 1000 + i, len)),
        );
    }
    m
}

/// Write `streams` on this rank, alternating `append` in odd pieces and the buffer API.
fn write_streams(agg: &mut Aggregate<'_>, streams: &Streams) {
    for (k, (name, (meta, data))) in streams.iter().enumerate() {
        let mut w = agg.stream(name, meta).unwrap();
        if k % 2 == 0 {
            for part in data.chunks(1000 + k) {
                w.append(part).unwrap();
            }
        } else {
            for part in data.chunks(CHUNK as usize * 2 + 5) {
                let buf = w.buffer(part.len() + 10);
                buf[..part.len()].copy_from_slice(part);
                w.commit(part.len()).unwrap();
            }
        }
        assert_eq!(w.len(), data.len() as u64);
        w.finish().unwrap();
    }
}

fn all_streams(ranks: usize) -> Streams {
    (0..ranks).flat_map(|r| streams_of(r, ranks)).collect()
}

/// Check every stream of `version` against `want`, reading with `readers` thread ranks (each
/// its own `Index`, a share of the streams).
fn check_version(path: &Path, version: u64, want: &Streams, readers: usize) {
    let index = Index::open(path).unwrap();
    let listed: Vec<_> = index
        .streams(version)
        .unwrap()
        .map(|s| s.name.to_vec())
        .collect();
    assert_eq!(listed, want.keys().cloned().collect::<Vec<_>>());
    let checked = steal::local::run(readers, |comm| {
        let index = Index::open(path).unwrap();
        let mut n = 0;
        for (i, (name, (meta, data))) in want.iter().enumerate() {
            if i % comm.size() != comm.rank() {
                continue;
            }
            let info = index.stream(name, version).unwrap();
            assert_eq!(info.meta, meta.as_slice());
            assert_eq!(info.size, data.len() as u64);
            assert_eq!(info.chunks, (data.len() as u64).div_ceil(CHUNK));
            assert_eq!(&index.read_stream(name, version).unwrap(), data);
            let mut r = index.open_stream(name, version).unwrap();
            let mut got = Vec::new();
            r.read_to_end(&mut got).unwrap();
            assert_eq!(&got, data, "stream {}", name.escape_ascii());
            assert!(r.eof());
            n += 1;
        }
        n
    });
    assert_eq!(checked.iter().sum::<usize>(), want.len());
}

fn write_round_trip(path: &Path, ranks: usize) -> Vec<pfa::Written> {
    steal::local::run(ranks, |comm| {
        let mut agg = Aggregate::create(comm, path, &options()).unwrap();
        write_streams(&mut agg, &streams_of(comm.rank(), comm.size()));
        agg.close().unwrap()
    })
}

#[test]
fn round_trip_at_1_2_3_5_ranks_read_at_other_rank_counts() {
    for (ranks, readers) in [(1, 2), (2, 3), (3, 1), (5, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("agg{ranks}.pfa"));
        let written = write_round_trip(&path, ranks);
        let want = all_streams(ranks);
        let w = &written[0];
        assert!(written
            .iter()
            .all(|x| x.file_len == w.file_len && x.version == 1));
        assert_eq!(w.streams, want.len() as u64);
        let logical: u64 = want.values().map(|(_, d)| d.len() as u64).sum();
        assert_eq!(w.logical_bytes, logical);
        assert_eq!(
            w.bytes_written, logical,
            "a first version writes everything"
        );
        assert_eq!(w.chunks_reused, 0);
        assert_eq!(
            written.iter().map(|x| x.rank_bytes_written).sum::<u64>(),
            logical
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), w.file_len);
        // Nothing but the aggregate is left in the directory (no temporary).
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        check_version(&path, 1, &want, readers);
        let index = Index::open(&path).unwrap();
        assert_eq!(index.latest(), 1);
        assert_eq!(index.chunk_size(), CHUNK);
        assert_eq!(index.versions()[0].ranks, ranks as u32);
        // Every chunk slot is chunk aligned: the region starts at a chunk boundary.
        assert_eq!(index.file_len(), w.file_len);
    }
}

#[test]
fn duplicate_names_across_ranks_are_refused_at_close() {
    for ranks in [2, 3, 5] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dup.pfa");
        let results = steal::local::run(ranks, |comm| {
            let mut agg = Aggregate::create(comm, &path, &options()).unwrap();
            agg.write_stream(format!("own{}", comm.rank()).as_bytes(), b"", b"x")
                .unwrap();
            if comm.rank() == 0 || comm.rank() == comm.size() - 1 {
                agg.write_stream(b"same\xff", b"", &bytes(comm.rank() as u64, 5000))
                    .unwrap();
            }
            agg.close()
        });
        for (r, res) in results.iter().enumerate() {
            let e = res.as_ref().expect_err("a duplicate fails every rank");
            let text = e.to_string();
            assert!(text.contains("same\\xff"), "rank {r}: {text}");
            if r == 0 {
                assert!(
                    matches!(e, Error::DuplicateStream { ranks: (0, last), .. } if *last == ranks - 1)
                );
                assert!(text.contains(&path.display().to_string()), "{text}");
            }
        }
        assert!(!path.exists(), "no aggregate at the path");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no temporary left"
        );
    }
    // The same name twice on one rank is refused at once.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dup1.pfa");
    steal::local::run(1, |comm| {
        let mut agg = Aggregate::create(comm, &path, &options()).unwrap();
        agg.write_stream(b"a", b"", b"1").unwrap();
        let e = agg.stream(b"a", b"").err().expect("refused");
        assert!(matches!(e, Error::DuplicateStream { ranks: (0, 0), .. }));
        agg.close().unwrap();
    });
    assert_eq!(
        Index::open(&path).unwrap().read_stream(b"a", 1).unwrap(),
        b"1"
    );
}

/// Where things are in an aggregate written by [`write_round_trip`] at 2 ranks.
struct Layout {
    path: PathBuf,
    len: u64,
    footer_offset: u64,
    footer_len: u64,
}

fn written_at_two(dir: &Path) -> Layout {
    let path = dir.join("whole.pfa");
    write_round_trip(&path, 2);
    let index = Index::open(&path).unwrap();
    let v = &index.versions()[0];
    Layout {
        len: index.file_len(),
        footer_offset: v.footer_offset,
        footer_len: v.footer_len,
        path,
    }
}

fn copy_as(from: &Path, to: &Path) -> PathBuf {
    std::fs::copy(from, to).unwrap();
    to.to_path_buf()
}

#[test]
fn cut_aggregates_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let l = written_at_two(dir.path());
    let cuts = [
        ("empty", 0),
        ("inside the header", 20),
        ("inside the data", CHUNK + 100),
        ("at the footer", l.footer_offset),
        ("inside the footer", l.footer_offset + l.footer_len / 2),
        ("inside the trailer", l.len - 50),
        ("one byte short", l.len - 1),
    ];
    for (what, at) in cuts {
        let p = copy_as(&l.path, &dir.path().join("cut.pfa"));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(at)
            .unwrap();
        let e = Index::open(&p)
            .err()
            .unwrap_or_else(|| panic!("cut {what} read"));
        assert!(matches!(e, Error::Cut { .. }), "cut {what}: {e}");
        assert!(e.is_damage());
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        // No new version is appended to it either.
        let r = steal::local::run(1, |comm| Aggregate::new_version(comm, &p, &options()).err());
        assert!(
            matches!(r[0], Some(Error::Cut { .. })),
            "cut {what}: {:?}",
            r[0]
        );
    }
    // A file that is no aggregate at all.
    let p = dir.path().join("other");
    std::fs::write(&p, vec![7u8; 500]).unwrap();
    assert!(matches!(Index::open(&p), Err(Error::NotAggregate { .. })));
}

/// Flip one bit at `at` of a copy of `from`.
fn flipped(from: &Path, to: &Path, at: u64) -> PathBuf {
    let p = copy_as(from, to);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x04;
    f.write_all_at(&b, at).unwrap();
    p
}

#[test]
fn bit_flips_in_data_footer_trailer_and_header_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let l = written_at_two(dir.path());
    let want = all_streams(2);
    // Data: rank 0's first chunk (the region starts at one chunk), rank 1's first chunk.
    for at in [CHUNK + 10, 2 * CHUNK + 4000] {
        let p = flipped(&l.path, &dir.path().join("data.pfa"), at);
        let index = Index::open(&p).unwrap();
        let mut bad = Vec::new();
        for (name, (_, data)) in &want {
            match index.read_stream(name, 1) {
                Ok(got) => assert_eq!(&got, data),
                Err(e) => {
                    assert!(matches!(e, Error::ChunkChecksum { .. }), "{e}");
                    let text = e.to_string();
                    assert!(text.contains(&p.display().to_string()), "{text}");
                    assert!(text.contains(&name.escape_ascii().to_string()), "{text}");
                    assert!(text.contains("version 1"), "{text}");
                    // Through Read too: InvalidData carrying the error.
                    let mut r = index.open_stream(name, 1).unwrap();
                    let io = r.read_to_end(&mut Vec::new()).unwrap_err();
                    assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
                    let inner = io.get_ref().unwrap().downcast_ref::<Error>().unwrap();
                    assert!(matches!(inner, Error::ChunkChecksum { .. }));
                    bad.push(name.clone());
                }
            }
        }
        assert_eq!(bad.len(), 1, "exactly the stream holding offset {at}");
    }
    // Footer and trailer (not its magic: a damaged trailer) and header.
    let places = [
        ("footer", l.footer_offset + 3),
        ("footer", l.footer_offset + l.footer_len / 2),
        ("footer", l.footer_offset + l.footer_len - 1),
        ("trailer", l.len - 60),
        ("trailer", l.len - 12),
        ("header", 17),
    ];
    for (what, at) in places {
        let p = flipped(&l.path, &dir.path().join("meta.pfa"), at);
        let e = Index::open(&p)
            .err()
            .unwrap_or_else(|| panic!("{what} flip read"));
        assert!(matches!(e, Error::Corrupt { .. }), "{what} at {at}: {e}");
        assert!(e.to_string().contains(what), "{e}");
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
    }
    // The trailer's end magic damaged: the end is no trailer at all.
    let p = flipped(&l.path, &dir.path().join("end.pfa"), l.len - 3);
    assert!(matches!(Index::open(&p), Err(Error::Cut { .. })));
}

/// Version `v`'s content at `ranks` ranks: v1 as the round trip; later versions change one
/// small stream per rank (small/1), drop one, add one, and change one chunk of the big stream.
fn version_content(v: u64, ranks: usize) -> Vec<Streams> {
    (0..ranks)
        .map(|r| {
            let mut m = streams_of(r, ranks);
            if m.is_empty() {
                return m;
            }
            for later in 2..=v {
                m.get_mut(format!("r{r}/small/1").as_bytes()).unwrap().1 =
                    bytes(later * 7 + r as u64, 1500 + later as usize);
                m.remove(format!("r{r}/small/{later}").as_bytes());
                m.insert(
                    format!("r{r}/new{later}").into_bytes(),
                    (b"n".to_vec(), bytes(later + 50, 5000)),
                );
                let big = &mut m.get_mut(format!("r{r}/big").as_bytes()).unwrap().1;
                big[(CHUNK * later + 7) as usize] ^= 0xff;
            }
            m
        })
        .collect()
}

#[test]
fn versions_1_to_3_read_back_exactly_at_changing_rank_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ckpt.pfa");
    // Each version read back at 1, 2 and 3 ranks.
    let mut wants = Vec::new();
    for (v, ranks) in [(1u64, 2usize), (2, 2), (3, 2)] {
        let content = version_content(v, ranks);
        let written = steal::local::run(ranks, |comm| {
            let mut agg = if v == 1 {
                Aggregate::create(comm, &path, &options()).unwrap()
            } else {
                Aggregate::new_version(comm, &path, &options()).unwrap()
            };
            assert_eq!(agg.version(), v);
            write_streams(&mut agg, &content[comm.rank()]);
            agg.close().unwrap()
        });
        let w = &written[0];
        assert_eq!(w.version, v);
        if v > 1 {
            // Per rank: small/1 (1 piece), new (2 pieces), one piece of big: 4 pieces written.
            assert_eq!(w.chunks_written, 4 * ranks as u64, "v{v}");
            assert!(w.chunks_reused > 0);
        }
        wants.push(content.into_iter().flatten().collect::<BTreeMap<_, _>>());
    }
    let index = Index::open(&path).unwrap();
    assert_eq!(index.latest(), 3);
    for (i, want) in wants.iter().enumerate() {
        check_version(&path, i as u64 + 1, want, 1 + i % 3);
    }
    assert!(matches!(
        index.streams(4).err(),
        Some(Error::NoSuchVersion {
            version: 4,
            latest: 3,
            ..
        })
    ));
    assert!(matches!(
        index.open_stream(b"nope", 1).err(),
        Some(Error::NoSuchStream { .. })
    ));
}

#[test]
fn new_versions_from_other_rank_counts_reuse_chunks() {
    // Streams written by 3 ranks, the next version by 5 then by 1: names move between ranks,
    // unchanged pieces are referenced all the same.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moving.pfa");
    let content: BTreeMap<Vec<u8>, Vec<u8>> = (0..12u64)
        .map(|i| {
            (
                format!("s{i}").into_bytes(),
                bytes(i, (CHUNK * 3 + i * 100) as usize),
            )
        })
        .collect();
    for (v, ranks) in [(1, 3), (2, 5), (3, 1)] {
        let written = steal::local::run(ranks, |comm| {
            let mut agg = if v == 1 {
                Aggregate::create(comm, &path, &options()).unwrap()
            } else {
                Aggregate::new_version(comm, &path, &options()).unwrap()
            };
            for (i, (name, data)) in content.iter().enumerate() {
                if i % comm.size() == comm.rank() {
                    agg.write_stream(name, b"", data).unwrap();
                }
            }
            agg.close().unwrap()
        });
        if v > 1 {
            assert_eq!(written[0].chunks_written, 0, "v{v}: nothing changed");
            assert_eq!(written[0].bytes_written, 0);
            let pieces: u64 = content
                .values()
                .map(|d| (d.len() as u64).div_ceil(CHUNK))
                .sum();
            assert_eq!(written[0].chunks_reused, pieces);
        }
    }
    // Version 4 at 2 ranks: s0 grows by 2.5 chunks (its first pieces compared, the rest
    // written as they come), s1 shrinks by 1.5 chunks, s2's last piece grows by a byte.
    let mut v4 = content.clone();
    v4.get_mut(b"s0".as_slice())
        .unwrap()
        .extend(bytes(99, (CHUNK * 5 / 2) as usize));
    let s1 = v4.get_mut(b"s1".as_slice()).unwrap();
    s1.truncate(s1.len() - (CHUNK * 3 / 2) as usize);
    v4.get_mut(b"s2".as_slice()).unwrap().push(1);
    let w = steal::local::run(2, |comm| {
        let mut agg = Aggregate::new_version(comm, &path, &options()).unwrap();
        for (i, (name, data)) in v4.iter().enumerate() {
            if i % 2 == comm.rank() {
                let mut w = agg.stream(name, b"").unwrap();
                for part in data.chunks(1000) {
                    w.append(part).unwrap();
                }
                w.finish().unwrap();
            }
        }
        agg.close().unwrap()
    });
    // Written: s0's 3 new pieces (it was 3 whole chunks); s1's (shorter) last piece; s2's
    // last piece. Everything else referenced.
    assert_eq!(w[0].chunks_written, 3 + 1 + 1);
    let pieces: u64 = v4.values().map(|d| (d.len() as u64).div_ceil(CHUNK)).sum();
    assert_eq!(w[0].chunks_reused, pieces - 5);
    let index = Index::open(&path).unwrap();
    for v in 1..=3 {
        for (name, data) in &content {
            assert_eq!(&index.read_stream(name, v).unwrap(), data);
        }
    }
    for (name, data) in &v4 {
        assert_eq!(&index.read_stream(name, 4).unwrap(), data);
    }
}

#[test]
fn five_percent_of_chunks_changed_writes_at_most_ten_percent_of_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inc.pfa");
    // 2 ranks x 4 streams x 50 chunks = 400 chunks; 20 of them (5%) change.
    let v1: Vec<Vec<u8>> = (0..8u64).map(|i| bytes(i, (CHUNK * 50) as usize)).collect();
    let mut v2 = v1.clone();
    for k in 0..20u64 {
        let (s, c) = ((k * 3) % 8, (k * 7) % 50);
        v2[s as usize][(c * CHUNK + 99) as usize] ^= 0x5a;
    }
    let changed: std::collections::BTreeSet<_> =
        (0..20u64).map(|k| ((k * 3) % 8, (k * 7) % 50)).collect();
    assert_eq!(changed.len(), 20);
    let write = |data: &Vec<Vec<u8>>, first: bool| {
        steal::local::run(2, |comm| {
            let mut agg = if first {
                Aggregate::create(comm, &path, &options()).unwrap()
            } else {
                Aggregate::new_version(comm, &path, &options()).unwrap()
            };
            for (i, d) in data.iter().enumerate() {
                if i % 2 == comm.rank() {
                    agg.write_stream(format!("s{i}").as_bytes(), b"", d)
                        .unwrap();
                }
            }
            agg.close().unwrap()
        })
    };
    let w1 = write(&v1, true).remove(0);
    let before = std::fs::metadata(&path).unwrap();
    let w2 = write(&v2, false).remove(0);
    let after = std::fs::metadata(&path).unwrap();
    let logical = w2.logical_bytes;
    assert_eq!(logical, 400 * CHUNK);
    assert_eq!(w2.chunks_written, 20);
    assert_eq!(w2.chunks_reused, 380);
    assert_eq!(w2.bytes_written, 20 * CHUNK);
    // Bytes counted three ways, each at most 10% of the version's bytes.
    let stored = w2.bytes_written + w2.index_bytes;
    assert!(stored * 10 <= logical, "stored {stored} of {logical}");
    let grown = after.len() - before.len();
    assert!(grown * 10 <= logical, "file grew {grown} of {logical}");
    let allocated = (after.blocks() - before.blocks()) * 512;
    assert!(
        allocated * 10 <= logical,
        "allocated {allocated} of {logical}"
    );
    assert_eq!(w1.file_len, before.len());
    let index = Index::open(&path).unwrap();
    for i in 0..8 {
        let name = format!("s{i}");
        assert_eq!(index.read_stream(name.as_bytes(), 1).unwrap(), v1[i]);
        assert_eq!(index.read_stream(name.as_bytes(), 2).unwrap(), v2[i]);
    }
}

#[test]
fn a_version_cut_mid_write_is_refused_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let l = written_at_two(dir.path());
    let want = all_streams(2);
    let content = version_content(2, 2);
    steal::local::run(2, |comm| {
        let mut agg = Aggregate::new_version(comm, &l.path, &options()).unwrap();
        write_streams(&mut agg, &content[comm.rank()]);
        agg.close().unwrap()
    });
    let index = Index::open(&l.path).unwrap();
    let v2 = &index.versions()[1];
    // Cut inside version 2's data, footer, trailer: version 1 is back after recovery.
    for at in [l.len + CHUNK, v2.footer_offset + 10, index.file_len() - 20] {
        let p = copy_as(&l.path, &dir.path().join("cut2.pfa"));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(at)
            .unwrap();
        assert!(matches!(Index::open(&p), Err(Error::Cut { .. })));
        let r = pfa::recover(&p).unwrap();
        assert_eq!(r.version, 1);
        assert_eq!(r.len_after, l.len);
        assert_eq!(r.dropped(), at - l.len);
        check_version(&p, 1, &want, 1);
        // And a new version goes on from there.
        steal::local::run(3, |comm| {
            let mut agg = Aggregate::new_version(comm, &p, &options()).unwrap();
            assert_eq!(agg.version(), 2);
            if comm.rank() == 2 {
                agg.write_stream(b"after", b"", b"recovered").unwrap();
            }
            agg.close().unwrap()
        });
        assert_eq!(
            Index::open(&p).unwrap().read_stream(b"after", 2).unwrap(),
            b"recovered"
        );
    }
    // A damaged (not cut) end is refused by recovery, unchanged.
    let p = flipped(
        &l.path,
        &dir.path().join("damaged.pfa"),
        index.file_len() - 40,
    );
    assert!(matches!(pfa::recover(&p), Err(Error::Corrupt { .. })));
    assert_eq!(std::fs::read(&p).unwrap().len() as u64, index.file_len());
    // An earlier version's footer is read when that version is used: damaged, it fails
    // there, by name, and the latest version still reads.
    let p = flipped(&l.path, &dir.path().join("old.pfa"), l.footer_offset + 5);
    let damaged = Index::open(&p).unwrap();
    assert_eq!(damaged.versions().len(), 2);
    assert_eq!(damaged.versions()[0].streams, want.len() as u64);
    let e = damaged.read_stream(b"r0/big", 1).unwrap_err();
    assert!(
        matches!(e, Error::Corrupt { .. }) && e.to_string().contains("version 1"),
        "{e}"
    );
    assert!(damaged.read_stream(b"r0/big", 2).is_ok());
    // An earlier trailer damaged: the chain is checked at open.
    let p = flipped(&l.path, &dir.path().join("chain.pfa"), l.len - 30);
    let e = Index::open(&p).err().unwrap();
    assert!(
        matches!(e, Error::Corrupt { .. }) && e.to_string().contains("trailer"),
        "{e}"
    );
    // A whole file is left as it is; one with no complete version is refused, unchanged.
    let r = pfa::recover(&l.path).unwrap();
    assert_eq!((r.version, r.dropped()), (2, 0));
    let p = copy_as(&l.path, &dir.path().join("short.pfa"));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(CHUNK + 5)
        .unwrap();
    assert!(matches!(pfa::recover(&p), Err(Error::Cut { .. })));
    assert_eq!(std::fs::metadata(&p).unwrap().len(), CHUNK + 5);
}

#[test]
fn symlinks_hard_links_and_existing_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let l = written_at_two(dir.path());
    let link = dir.path().join("link.pfa");
    std::os::unix::fs::symlink(&l.path, &link).unwrap();
    assert!(matches!(Index::open(&link), Err(Error::Refused { .. })));
    assert!(matches!(pfa::recover(&link), Err(Error::Refused { .. })));
    let r = steal::local::run(2, |comm| {
        Aggregate::new_version(comm, &link, &options()).err()
    });
    assert!(r.iter().all(|e| e.is_some()));
    assert!(matches!(r[0], Some(Error::Refused { .. })));
    // A second hard link: appending would change it too.
    let hard = dir.path().join("hard.pfa");
    std::fs::hard_link(&l.path, &hard).unwrap();
    let r = steal::local::run(2, |comm| {
        Aggregate::new_version(comm, &l.path, &options()).err()
    });
    assert!(matches!(&r[0], Some(Error::Refused { why, .. }) if why.contains("hard links")));
    assert!(matches!(pfa::recover(&hard), Err(Error::Refused { .. })));
    std::fs::remove_file(&hard).unwrap();
    // An existing path: kept unless overwrite.
    let r = steal::local::run(2, |comm| Aggregate::create(comm, &l.path, &options()).err());
    assert!(matches!(r[0], Some(Error::Refused { .. })));
    assert!(matches!(r[1], Some(Error::OtherRank { rank: 0, .. })));
    assert_eq!(std::fs::metadata(&l.path).unwrap().len(), l.len);
    // With overwrite, a symbolic link at the path is replaced, never followed.
    let target = dir.path().join("target");
    std::fs::write(&target, b"keep me").unwrap();
    let at = dir.path().join("at.pfa");
    std::os::unix::fs::symlink(&target, &at).unwrap();
    let o = Options {
        overwrite: true,
        ..options()
    };
    steal::local::run(2, |comm| {
        let mut agg = Aggregate::create(comm, &at, &o).unwrap();
        agg.write_stream(format!("{}", comm.rank()).as_bytes(), b"", b"new")
            .unwrap();
        agg.close().unwrap()
    });
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    assert!(std::fs::symlink_metadata(&at).unwrap().is_file());
    assert_eq!(
        Index::open(&at).unwrap().read_stream(b"1", 1).unwrap(),
        b"new"
    );
}

#[test]
fn abort_drop_and_abandon_leave_nothing_that_looks_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.pfa");
    // A new aggregate aborted (and one dropped): nothing at the path, no temporary.
    steal::local::run(3, |comm| {
        let mut agg = Aggregate::create(comm, &path, &options()).unwrap();
        agg.write_stream(b"x", b"", &bytes(1, 10_000)).err();
        agg.abort().unwrap();
    });
    steal::local::run(2, |comm| {
        let mut agg = Aggregate::create(comm, &path, &options()).unwrap();
        agg.write_stream(
            format!("{}", comm.rank()).as_bytes(),
            b"",
            &bytes(1, 10_000),
        )
        .unwrap();
        comm.barrier();
        drop(agg);
    });
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A new version aborted: the file is as it was.
    let l = written_at_two(dir.path());
    let before = std::fs::read(&l.path).unwrap();
    steal::local::run(2, |comm| {
        let mut agg = Aggregate::new_version(comm, &l.path, &options()).unwrap();
        agg.write_stream(
            format!("v2-{}", comm.rank()).as_bytes(),
            b"",
            &bytes(9, 50_000),
        )
        .unwrap();
        agg.abort().unwrap();
    });
    assert_eq!(std::fs::read(&l.path).unwrap(), before);
    assert_eq!(Index::open(&l.path).unwrap().latest(), 1);
    // An abandoned stream gets no entry; its name may be used again.
    steal::local::run(2, |comm| {
        let mut agg = Aggregate::new_version(comm, &l.path, &options()).unwrap();
        let mut w = agg.stream(b"gone", b"").unwrap();
        w.append(&bytes(3, 9000)).unwrap();
        w.abandon();
        if comm.rank() == 1 {
            agg.write_stream(b"gone", b"m", b"second try").unwrap();
        }
        let mut w = agg
            .stream(format!("dropped{}", comm.rank()).as_bytes(), b"")
            .unwrap();
        // Through std::io::Write too.
        w.write_all(b"finished ").unwrap();
        std::io::copy(&mut &b"by drop"[..], &mut w).unwrap();
        drop(w);
        agg.close().unwrap()
    });
    let index = Index::open(&l.path).unwrap();
    assert_eq!(index.read_stream(b"gone", 2).unwrap(), b"second try");
    assert_eq!(
        index.read_stream(b"dropped0", 2).unwrap(),
        b"finished by drop"
    );
}

/// A directory on a disk file system: the target dir's scratch space (under /work), never
/// `/tmp`, which may be tmpfs.
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn is_tmpfs(path: &Path) -> bool {
    rustix::fs::statfs(path).unwrap().f_type as i64 == 0x0102_1994
}

#[test]
fn direct_io_on_disk_and_its_fallback_on_tmpfs() {
    let disk = disk_dir();
    assert!(!is_tmpfs(disk.path()));
    let o = Options {
        direct_io: true,
        chunk_size: Some(64 << 10),
        ..Options::default()
    };
    let run = |dir: &Path| {
        let path = dir.join("direct.pfa");
        let mut written = steal::local::run(2, |comm| {
            let mut agg = Aggregate::create(comm, &path, &o).unwrap();
            for i in 0..5u64 {
                let name = format!("r{}-{i}", comm.rank());
                agg.write_stream(name.as_bytes(), b"", &bytes(i, (i * 50_000) as usize))
                    .unwrap();
            }
            agg.close().unwrap()
        });
        let index = Index::open(&path).unwrap();
        for r in 0..2 {
            for i in 0..5u64 {
                let name = format!("r{r}-{i}");
                assert_eq!(
                    index.read_stream(name.as_bytes(), 1).unwrap(),
                    bytes(i, (i * 50_000) as usize)
                );
            }
        }
        written.remove(0)
    };
    let w = run(disk.path());
    assert!(w.direct_io, "a disk file system takes O_DIRECT");
    assert_eq!(w.direct_io_fallback, None);
    // tmpfs: before Linux 6.6 it refuses O_DIRECT at the open and the writes fall back
    // (saying so); from 6.6 on it accepts it. Either way the data is whole; the fallback
    // itself is forced in the crate's unit tests (direct.rs).
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    assert!(is_tmpfs(shm.path()));
    let probe = shm.path().join("probe");
    let accepts = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let w = run(shm.path());
    assert_eq!(w.direct_io, accepts);
    assert_eq!(
        w.direct_io_fallback.is_some(),
        !accepts,
        "{:?}",
        w.direct_io_fallback
    );
}

#[test]
fn seek_and_eof_behave_as_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seek.pfa");
    let data = bytes(42, (CHUNK * 3 + CHUNK / 2) as usize);
    steal::local::run(1, |comm| {
        let mut agg = Aggregate::create(comm, &path, &options()).unwrap();
        agg.write_stream(b"s", b"", &data).unwrap();
        agg.write_stream(b"empty", b"", b"").unwrap();
        agg.close().unwrap()
    });
    let index = Index::open(&path).unwrap();
    let mut r = index.open_stream(b"s", 1).unwrap();
    assert_eq!(r.size(), data.len() as u64);
    assert!(!r.eof());
    // Across a chunk boundary.
    let at = CHUNK - 10;
    assert_eq!(r.seek(SeekFrom::Start(at)).unwrap(), at);
    let mut b = [0u8; 30];
    r.read_exact(&mut b).unwrap();
    assert_eq!(&b[..], &data[at as usize..at as usize + 30]);
    assert_eq!(r.position(), at + 30);
    // From the end and from here, backwards.
    assert_eq!(r.seek(SeekFrom::End(-5)).unwrap(), data.len() as u64 - 5);
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, &data[data.len() - 5..]);
    assert!(r.eof());
    assert_eq!(r.read(&mut b).unwrap(), 0);
    let p = r.seek(SeekFrom::Current(-(CHUNK as i64) - 1)).unwrap();
    assert_eq!(p, data.len() as u64 - CHUNK - 1);
    assert!(!r.eof());
    r.read_exact(&mut b[..1]).unwrap();
    assert_eq!(b[0], data[p as usize]);
    // Past the end: allowed, reads nothing; before the start: refused, position kept.
    assert_eq!(r.seek(SeekFrom::End(100)).unwrap(), data.len() as u64 + 100);
    assert!(r.eof());
    assert_eq!(r.read(&mut b).unwrap(), 0);
    let e = r
        .seek(SeekFrom::Current(-(data.len() as i64) - 101))
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(r.position(), data.len() as u64 + 100);
    r.rewind().unwrap();
    let mut all = Vec::new();
    r.read_to_end(&mut all).unwrap();
    assert_eq!(all, data);
    // An empty stream is at its end at once.
    let mut e = index.open_stream(b"empty", 1).unwrap();
    assert!(e.eof());
    assert_eq!(e.read(&mut b).unwrap(), 0);
    assert_eq!(r.name(), b"s");
    assert_eq!(r.version(), 1);
}

#[test]
fn index_and_reader_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Index>();
    send::<pfa::Reader>();
    send::<pfa::Error>();
    // One Index shared by reference among threads (as unpack's workers do), all reading an
    // earlier version whose footer is read on first use (by whichever thread comes first).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.pfa");
    for v in 1..=2u64 {
        steal::local::run(2, |comm| {
            let mut agg = if v == 1 {
                Aggregate::create(comm, &path, &options()).unwrap()
            } else {
                Aggregate::new_version(comm, &path, &options()).unwrap()
            };
            for i in (comm.rank()..40).step_by(2) {
                let data = bytes(i as u64 * v, 3000 + i * 100);
                agg.write_stream(format!("f{i}").as_bytes(), b"", &data)
                    .unwrap();
            }
            agg.close().unwrap()
        });
    }
    let index = Index::open(&path).unwrap();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let index = &index;
            s.spawn(move || {
                for i in (t..40).step_by(4) {
                    for v in [1u64, 2] {
                        let got = index.read_stream(format!("f{i}").as_bytes(), v).unwrap();
                        assert_eq!(got, bytes(i as u64 * v, 3000 + i * 100));
                    }
                }
            });
        }
    });
}

#[test]
fn chunk_size_policy_and_invalid_options() {
    let dir = tempfile::tempdir().unwrap();
    let got = pfa::chunk_size_policy(dir.path());
    assert!(got == pfa::DEFAULT_CHUNK_SIZE || got >= pfa::MIN_POLICY_CHUNK);
    let path = dir.path().join("default.pfa");
    let w = steal::local::run(1, |comm| {
        let mut agg = Aggregate::create(comm, &path, &Options::default()).unwrap();
        agg.write_stream(b"a", b"", b"1").unwrap();
        agg.close().unwrap()
    });
    assert_eq!(w[0].chunk_size, got);
    let bad = Options {
        chunk_size: Some(1000),
        ..Options::default()
    };
    let r = steal::local::run(2, |comm| {
        Aggregate::create(comm, &dir.path().join("bad.pfa"), &bad).err()
    });
    assert!(matches!(r[0], Some(Error::Options(_))));
    assert!(matches!(r[1], Some(Error::OtherRank { .. })));
}

/// The bytes of `tests/data/format1.pfa`'s streams (written by this crate at format version
/// 1, chunk size 4096, two thread ranks).
fn format1_pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 7 + seed * 13) % 251) as u8)
        .collect()
}

/// What `tests/data/format1.pfa` holds: version 1, rank r: `r{r}/big` (10,000 bytes, meta
/// `m`), `r{r}/small` (100 bytes), `r{r}/empty`; version 2: `big` with bytes 4096..8192
/// inverted (meta `m2`) and `small` unchanged.
fn format1_content(version: u64) -> Streams {
    let mut m = BTreeMap::new();
    for r in 0..2 {
        let mut big = format1_pattern(r, 10_000);
        let meta = if version == 1 {
            b"m".to_vec()
        } else {
            big[4096..8192].iter_mut().for_each(|b| *b ^= 0xff);
            b"m2".to_vec()
        };
        m.insert(format!("r{r}/big").into_bytes(), (meta, big));
        let small = format1_pattern(r + 5, 100);
        m.insert(format!("r{r}/small").into_bytes(), (Vec::new(), small));
        if version == 1 {
            m.insert(format!("r{r}/empty").into_bytes(), (Vec::new(), Vec::new()));
        }
    }
    m
}

#[test]
fn a_format_1_file_reads_and_takes_new_versions_in_format_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_as(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format1.pfa"),
        &dir.path().join("old.pfa"),
    );
    let index = Index::open(&path).unwrap();
    assert_eq!((index.format(), index.latest()), (1, 2));
    assert_eq!(index.versions()[1].chunks_reused, 6);
    drop(index);
    for v in 1..=2 {
        check_version(&path, v, &format1_content(v), 3);
    }
    // A damaged piece of a format-1 file is still found (its BLAKE3 checked).
    let bad = flipped(&path, &dir.path().join("bad.pfa"), 4096 + 10);
    let err = Index::open(&bad)
        .unwrap()
        .read_stream(b"r0/big", 1)
        .unwrap_err();
    assert!(matches!(err, Error::ChunkChecksum { .. }), "{err}");
    // Version 3 from three ranks: the file stays format 1 (BLAKE3 digests compared), the
    // unchanged pieces referenced.
    let mut v3 = format1_content(2);
    v3.get_mut(b"r1/small".as_slice()).unwrap().1[0] ^= 1;
    let written = steal::local::run(3, |comm| {
        let mut agg = Aggregate::new_version(comm, &path, &options()).unwrap();
        let mine: Streams = v3
            .iter()
            .enumerate()
            .filter(|(i, _)| i % comm.size() == comm.rank())
            .map(|(_, (k, v))| (k.clone(), v.clone()))
            .collect();
        write_streams(&mut agg, &mine);
        agg.close().unwrap()
    });
    // big: 3 pieces each, none changed; small: r0's the same, r1's changed.
    assert_eq!(
        (written[0].chunks_reused, written[0].chunks_written),
        (7, 1)
    );
    let index = Index::open(&path).unwrap();
    assert_eq!((index.format(), index.latest()), (1, 3));
    for v in 1..=3 {
        let want = if v == 3 {
            v3.clone()
        } else {
            format1_content(v)
        };
        check_version(&path, v, &want, 2);
    }
}

#[test]
fn new_aggregates_are_of_the_newest_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.pfa");
    write_round_trip(&path, 2);
    assert_eq!(Index::open(&path).unwrap().format(), pfa::FORMAT);
    assert_eq!(pfa::FORMAT, 2);
}

#[test]
fn large_appends_written_from_the_caller_s_memory_read_back_at_other_rank_counts() {
    // With buffered writes, runs of 64 KiB or more go from the caller's bytes to the file and
    // smaller ones through the chunk buffer; mixed in one chunk, across chunk boundaries, and
    // over the streams of one rank, the bytes land where the index says.
    const BIG_CHUNK: u64 = 256 << 10;
    let o = Options {
        chunk_size: Some(BIG_CHUNK),
        ..Options::default()
    };
    let parts = [1000usize, 70_000, 10, 300_000, 65_536, 65_535, 200_000, 3];
    let streams_of = |rank: usize| -> Vec<(Vec<u8>, Vec<Vec<u8>>)> {
        (0..3)
            .map(|s| {
                let seed = (rank * 10 + s) as u64;
                let data: Vec<Vec<u8>> = parts
                    .iter()
                    .cycle()
                    .skip(s * 3)
                    .take(5 + s)
                    .enumerate()
                    .map(|(k, &len)| bytes(seed * 100 + k as u64, len))
                    .collect();
                (format!("r{rank}/s{s}").into_bytes(), data)
            })
            .collect()
    };
    for (ranks, readers) in [(1, 2), (3, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.pfa");
        steal::local::run(ranks, |comm| {
            let mut agg = Aggregate::create(comm, &path, &o).unwrap();
            for (name, data) in streams_of(comm.rank()) {
                let mut w = agg.stream(&name, b"").unwrap();
                for part in &data {
                    w.append(part).unwrap();
                }
                w.finish().unwrap();
            }
            agg.close().unwrap()
        });
        let want: BTreeMap<Vec<u8>, Vec<u8>> = (0..ranks)
            .flat_map(streams_of)
            .map(|(n, d)| (n, d.concat()))
            .collect();
        let got = steal::local::run(readers, |comm| {
            let index = Index::open(&path).unwrap();
            want.iter()
                .enumerate()
                .filter(|(i, _)| i % comm.size() == comm.rank())
                .all(|(_, (name, data))| &index.read_stream(name, 1).unwrap() == data)
        });
        assert!(got.iter().all(|&ok| ok), "{ranks} ranks");
        // The next version of the same bytes references every piece (compared byte by byte).
        let w = steal::local::run(2, |comm| {
            let mut agg = Aggregate::new_version(comm, &path, &o).unwrap();
            for (i, (name, data)) in want.iter().enumerate() {
                if i % 2 == comm.rank() {
                    agg.write_stream(name, b"", data).unwrap();
                }
            }
            agg.close().unwrap()
        });
        assert_eq!(w[0].chunks_written, 0, "{ranks} ranks");
        let index = Index::open(&path).unwrap();
        for (name, data) in &want {
            assert_eq!(&index.read_stream(name, 2).unwrap(), data);
        }
    }
}

/// A tmpfs of `size` mounted on a new temporary directory while it lives (root only: `None`
/// where mounting is not allowed, and the test says it was skipped).
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: cannot mount a tmpfs (not root?)");
            return None;
        }
        Some(SmallFs { dir })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn a_full_file_system_is_an_error_naming_the_file_and_leaves_nothing_complete_looking() {
    let Some(fs) = SmallFs::mount("1m") else {
        return;
    };
    let dir = fs.dir.path();
    let o = Options {
        chunk_size: Some(64 << 10),
        ..Options::default()
    };
    let path = dir.join("full.pfa");
    // 2 ranks × 800 KB into 1 MiB: big appends (written from the caller's memory) and small
    // ones (through the chunk buffer).
    let outcomes = steal::local::run(2, |comm| {
        let mut agg = Aggregate::create(comm, &path, &o).unwrap();
        let mut w = agg
            .stream(format!("r{}", comm.rank()).as_bytes(), b"")
            .unwrap();
        let mut appended = Ok(());
        for k in 0..100u64 {
            let len = if k % 2 == 0 { 100_000 } else { 500 };
            appended = appended.and_then(|()| w.append(&bytes(k, len)));
        }
        drop(w);
        (appended.err(), agg.close().unwrap_err())
    });
    for (r, (appended, closed)) in outcomes.iter().enumerate() {
        let text = closed.to_string();
        assert!(text.contains("No space left"), "rank {r}: {text}");
        assert!(text.contains(dir.to_str().unwrap()), "rank {r}: {text}");
        if let Some(e) = appended {
            assert!(e.to_string().contains("No space left"), "rank {r}: {e}");
        }
    }
    // No aggregate, no temporary: the space is free again.
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0);
    // A new version that does not fit: refused, the file as it was before.
    steal::local::run(2, |comm| {
        let mut agg = Aggregate::create(comm, &path, &o).unwrap();
        agg.write_stream(format!("r{}", comm.rank()).as_bytes(), b"", &bytes(1, 1000))
            .unwrap();
        agg.close().unwrap()
    });
    let before = std::fs::read(&path).unwrap();
    let outcomes = steal::local::run(2, |comm| {
        let mut agg = Aggregate::new_version(comm, &path, &o).unwrap();
        let big = bytes(7, 900_000);
        let _ = agg.write_stream(format!("r{}", comm.rank()).as_bytes(), b"", &big);
        agg.close().unwrap_err()
    });
    for e in &outcomes {
        assert!(e.to_string().contains("No space left"), "{e}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let index = Index::open(&path).unwrap();
    assert_eq!(index.latest(), 1);
    assert_eq!(index.read_stream(b"r1", 1).unwrap(), bytes(1, 1000));
}
