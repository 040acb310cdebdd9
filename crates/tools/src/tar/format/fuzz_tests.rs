//! Seeded mutation fuzzing of the reading side, bounded so that it runs in `cargo test`: tar
//! header decoding ([`decode_entry`]), the archive scanner ([`scan::scan`]) and index checking
//! ([`scan::check_index`]). Valid archives (the fixtures of `testdata/`, archives made by
//! [`Header::encode`], hand-made GNU sparse entries) are mutated by bit flips, truncations,
//! byte splices and numeric-field edits (re-sealed so they pass the checksum). A panic, a
//! decoder that does not move forward or lets data run past the entry, and an index accepted
//! that is not exactly the archive's chain of entries are failures; each names its seed and
//! iteration so `MFU_FUZZ_SEED=S` reproduces it.

use super::*;
use crate::engine::test_rng::Rng;
use crate::tar::archive::Archive;
use crate::tar::index::scan;
use crate::tar::index::{Found, Source};

/// Iterations per driver (each well under a millisecond, the scan ones a little more).
const ITERATIONS: u64 = 4000;

/// The seed: `MFU_FUZZ_SEED` or a fixed default (printed with every failure).
fn seed() -> u64 {
    std::env::var("MFU_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_7A12)
}

fn file_header(path: &[u8], size: u64) -> Header {
    Header {
        path: path.to_vec(),
        kind: Kind::File,
        mode: 0o644,
        uid: 0,
        gid: 0,
        uname: b"root".to_vec(),
        gname: b"root".to_vec(),
        size,
        mtime: 1_600_000_000,
        mtime_nsec: 250,
        link: Vec::new(),
        dev_major: 0,
        dev_minor: 0,
        xattrs: Vec::new(),
        projid: Default::default(),
    }
}

/// An old GNU sparse (`S`) entry with `segments` (file offset, length) and one extension
/// block when there are more than 4; data bytes are `b'D'`.
fn old_gnu_sparse(name: &[u8], segments: &[(u64, u64)], real_size: u64) -> Vec<u8> {
    let stored: u64 = segments.iter().map(|s| s.1).sum();
    let mut h = [0u8; BLOCK_USIZE];
    h[..name.len()].copy_from_slice(name);
    put_number(field_mut(&mut h, MODE), 0o644);
    put_number(field_mut(&mut h, UID), 0);
    put_number(field_mut(&mut h, GID), 0);
    put_number(field_mut(&mut h, SIZE), i128::from(stored));
    put_number(field_mut(&mut h, MTIME), 1_600_000_000);
    h[TYPEFLAG] = b'S';
    h[257..265].copy_from_slice(MAGIC_GNU);
    let pair = |b: &mut [u8], at: usize, s: (u64, u64)| {
        put_number(&mut b[at..at + 12], i128::from(s.0));
        put_number(&mut b[at + 12..at + 24], i128::from(s.1));
    };
    for (i, s) in segments.iter().take(4).enumerate() {
        pair(&mut h, OLD_GNU_SPARSE + 24 * i, *s);
    }
    h[OLD_GNU_ISEXTENDED] = u8::from(segments.len() > 4);
    put_number(field_mut(&mut h, OLD_GNU_REALSIZE), i128::from(real_size));
    seal(&mut h);
    let mut out = h.to_vec();
    if segments.len() > 4 {
        let mut ext = [0u8; BLOCK_USIZE];
        for (i, s) in segments[4..].iter().take(21).enumerate() {
            pair(&mut ext, 24 * i, *s);
        }
        out.extend_from_slice(&ext);
    }
    out.resize(out.len() + round_up(stored) as usize, 0);
    let n = out.len();
    out[n - round_up(stored) as usize..][..stored as usize].fill(b'D');
    out
}

/// A pax 1.0 sparse entry: the map at the start of its data.
fn pax_sparse_1_0(name: &[u8], segments: &[(u64, u64)], real_size: u64) -> Vec<u8> {
    let mut map = format!("{}\n", segments.len());
    for s in segments {
        map.push_str(&format!("{}\n{}\n", s.0, s.1));
    }
    let map_len = round_up(map.len() as u64);
    let stored: u64 = segments.iter().map(|s| s.1).sum();
    let mut records = Vec::new();
    pax_record(&mut records, b"GNU.sparse.major", b"1");
    pax_record(&mut records, b"GNU.sparse.minor", b"0");
    pax_record(&mut records, b"GNU.sparse.name", name);
    pax_record(
        &mut records,
        b"GNU.sparse.realsize",
        real_size.to_string().as_bytes(),
    );
    let mut h = file_header(b"GNUSparseFile.0/x", map_len + stored);
    let mut out = Vec::new();
    extension(&mut out, b'x', b"PaxHeaders/x", &records, &h);
    h.size = map_len + stored;
    h.encode(&mut out);
    let data_at = out.len();
    out.extend_from_slice(map.as_bytes());
    out.resize(data_at + map_len as usize, 0);
    out.resize(out.len() + stored as usize, b'P');
    out.resize(out.len().next_multiple_of(BLOCK_USIZE), 0);
    out
}

/// The valid archives the mutations start from.
fn corpus() -> Vec<Vec<u8>> {
    let mut made = Vec::new();
    for i in 0..6u64 {
        let name = if i % 2 == 0 {
            format!("dir/{}/f{i}", "n".repeat(120))
        } else {
            format!("f{i}")
        };
        let h = file_header(name.as_bytes(), i * 300);
        h.encode(&mut made);
        made.resize(made.len() + round_up(i * 300) as usize, b'a' + i as u8);
    }
    let segs: Vec<(u64, u64)> = (0..7).map(|i| (i * 10_000, 100 + i)).collect();
    let mut sparse = old_gnu_sparse(b"old", &segs, 80_000);
    sparse.extend(pax_sparse_1_0(b"new", &segs[..3], 40_000));
    file_header(b"after", 5).encode(&mut sparse);
    sparse.extend_from_slice(b"five!");
    sparse.resize(sparse.len().next_multiple_of(BLOCK_USIZE), 0);
    let mut out = vec![
        include_bytes!("../testdata/gnu.tar").to_vec(),
        include_bytes!("../testdata/pax.tar").to_vec(),
        include_bytes!("../testdata/ustar.tar").to_vec(),
        include_bytes!("../testdata/python.tar").to_vec(),
        made,
        sparse,
    ];
    for a in &mut out[4..] {
        a.extend_from_slice(&[0; 1024]);
    }
    out
}

/// Offsets of the header blocks of `a`'s entries as a plain decoder follows them.
fn chain(a: &[u8]) -> Vec<u64> {
    let mut read = |at: u64, n: usize| {
        Ok(a[(at as usize).min(a.len())..][..n.min(a.len().saturating_sub(at as usize))].to_vec())
    };
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok(Some(d)) = decode_entry(&mut read, at) {
        out.push(at);
        at = d.next;
    }
    out
}

/// One mutation of `a` (with `others` for splices); returns a description.
fn mutate(rng: &mut Rng, a: &mut Vec<u8>, others: &[Vec<u8>]) -> String {
    let headers = chain(a);
    match rng.below(6) {
        0 => {
            let n = 1 + rng.below(4);
            for _ in 0..n {
                let at = rng.below(a.len());
                a[at] ^= 1 << rng.below(8);
            }
            format!("{n} bit flips")
        }
        1 => {
            let at = rng.below(a.len());
            a.truncate(at);
            format!("truncated at {at}")
        }
        2 => {
            let src = &others[rng.below(others.len())];
            let from = rng.below(src.len());
            let len = rng.below(1024).min(src.len() - from);
            let to = rng.below(a.len());
            let end = (to + len).min(a.len());
            a[to..end].copy_from_slice(&src[from..from + (end - to)]);
            format!("spliced {len} bytes at {to}")
        }
        _ => {
            // A numeric field of a header, rewritten and re-sealed (so the checksum passes).
            let Some(&h) = headers.get(rng.below(headers.len())) else {
                return "no header to edit".into();
            };
            let h = h as usize;
            let fields = [
                MODE,
                UID,
                GID,
                SIZE,
                MTIME,
                DEVMAJOR,
                DEVMINOR,
                OLD_GNU_REALSIZE,
            ];
            let f = fields[rng.below(fields.len())];
            let bytes = &mut a[h + f.0..h + f.0 + f.1];
            let what = match rng.below(5) {
                0 => {
                    bytes.fill(0);
                    let n = bytes.len();
                    let v = format!("{:o}", rng.next() % 0o7777777);
                    let k = v.len().min(n - 1);
                    bytes[n - k..].copy_from_slice(&v.as_bytes()[..k]);
                    "leading NULs"
                }
                1 => {
                    put_number(bytes, i128::from(rng.next() >> rng.below(64)));
                    "big value"
                }
                2 => {
                    put_number(bytes, -i128::from(rng.next() >> 3));
                    "negative"
                }
                3 => {
                    bytes.fill(b' ');
                    "blanks"
                }
                _ => {
                    let at = rng.below(bytes.len());
                    bytes[at] = rng.next() as u8;
                    "a random byte"
                }
            };
            let mut block = [0u8; BLOCK_USIZE];
            block.copy_from_slice(&a[h..h + BLOCK_USIZE]);
            seal(&mut block);
            a[h..h + BLOCK_USIZE].copy_from_slice(&block);
            format!("field at {} of the header at {h}: {what}", f.0)
        }
    }
}

#[test]
fn fuzz_header_decoding_never_panics_and_keeps_data_inside_its_entry() {
    let seed = seed();
    let base = corpus();
    let mut rng = Rng::seeded(seed | 1);
    let mut decoded = 0u64;
    for i in 0..ITERATIONS {
        let mut a = base[rng.below(base.len())].clone();
        let what = mutate(&mut rng, &mut a, &base);
        let ctx = format!("seed {seed}, iteration {i}: {what}");
        let mut read = |at: u64, n: usize| -> io::Result<Vec<u8>> {
            let from = (at as usize).min(a.len());
            Ok(a[from..][..n.min(a.len() - from)].to_vec())
        };
        let mut at = 0u64;
        for _ in 0..10_000 {
            match decode_entry(&mut read, at) {
                Ok(Some(d)) => {
                    decoded += 1;
                    assert!(d.next > at && d.data > at, "{ctx}: no progress at {at}");
                    assert!(
                        d.data + d.stored_len() <= d.next,
                        "{ctx}: data of the entry at {at} runs past it: {d:?}"
                    );
                    if let Some(map) = &d.sparse {
                        let mut end = 0;
                        for s in map {
                            assert!(s.at >= end && s.at + s.len <= d.header.size, "{ctx}");
                            end = s.at + s.len;
                        }
                    }
                    at = d.next;
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
    assert!(
        decoded > ITERATIONS,
        "the mutations left too little to decode: {decoded} entries in {ITERATIONS} \
         iterations, seed {seed}"
    );
}

/// The archive `bytes` as a file, opened.
fn archive_file(dir: &std::path::Path, bytes: &[u8]) -> Archive {
    let p = dir.join("a.tar");
    std::fs::write(&p, bytes).unwrap();
    Archive::open(p.as_os_str().as_encoded_bytes()).unwrap()
}

#[test]
fn fuzz_the_scanner_never_finds_overlapping_entries_or_reports_damage() {
    let seed = seed();
    let base = corpus();
    let dir = tempfile::tempdir().unwrap();
    let damaged = steal::local::run(1, |comm| {
        let mut rng = Rng::seeded(seed ^ 0x00C0_FFEE | 1);
        let mut damaged = 0;
        let mut undecodable = 0;
        for i in 0..ITERATIONS / 4 {
            let mut a = base[rng.below(base.len())].clone();
            let what = mutate(&mut rng, &mut a, &base);
            let ctx = format!("seed {seed}, iteration {i}: {what}");
            let archive = archive_file(dir.path(), &a);
            let (offsets, damage, end) = scan::scan(comm, &archive, 4096);
            assert!(end <= a.len() as u64 || damage.is_some(), "{ctx}");
            if damage.is_some() {
                damaged += 1;
                continue;
            }
            // No damage reported: the entries found do not overlap (an entry's data never runs
            // into the next header) and lie in the archive. One that does not decode (a bad
            // field the scan does not read) is reported by name when extracted.
            let decoded = scan::decode(&archive, &offsets);
            for (k, d) in decoded.iter().enumerate() {
                let Ok(d) = d else {
                    undecodable += 1;
                    continue;
                };
                let limit = offsets.get(k + 1).copied().unwrap_or(end);
                assert!(
                    d.next <= limit && d.next <= a.len() as u64,
                    "{ctx}: the entry at {} ends at {}, past {limit}",
                    d.start,
                    d.next
                );
            }
        }
        (damaged, undecodable)
    })[0];
    // Both outcomes must occur, or half of the checks above never ran.
    assert!(
        damaged.0 > 0 && damaged.0 < ITERATIONS / 4,
        "scanner: {} iterations, {} reported damage ({} entries found that do not decode), \
         seed {seed}: the mutations must give both damaged and undamaged archives",
        ITERATIONS / 4,
        damaged.0,
        damaged.1
    );
}

#[test]
fn fuzz_an_accepted_index_is_exactly_the_archives_chain() {
    let seed = seed();
    let base = corpus();
    let dir = tempfile::tempdir().unwrap();
    // Both ranks draw the same mutations (the same seed), as the collective checks need.
    let accepted = steal::local::run(2, |comm| {
        let mut rng = Rng::seeded(seed ^ 0x1DE7 | 1);
        let mut mine = 0;
        for i in 0..ITERATIONS / 8 {
            let pick = rng.below(base.len());
            let good = base[pick].clone();
            let truth = chain(&good);
            let mut a = good.clone();
            let mut offsets = truth.clone();
            // Mutate the index, the archive, or both.
            let what = match rng.below(3) {
                0 => {
                    match rng.below(4) {
                        0 if !offsets.is_empty() => {
                            offsets.remove(rng.below(offsets.len()));
                        }
                        1 => offsets.push(a.len() as u64 / 512 * 512),
                        2 if !offsets.is_empty() => {
                            let k = rng.below(offsets.len());
                            offsets[k] = offsets[k].wrapping_add(512 * (1 + rng.below(3) as u64));
                        }
                        _ => offsets.truncate(rng.below(offsets.len() + 1)),
                    }
                    "index edited".to_string()
                }
                1 => mutate(&mut rng, &mut a, &base),
                _ => {
                    // Entries appended after the index was made (`tar -r`).
                    let cut = a.len() - 1024;
                    a.truncate(cut);
                    file_header(b"appended", 3).encode(&mut a);
                    a.extend_from_slice(b"xyz");
                    a.resize(a.len().next_multiple_of(512) + 1024, 0);
                    "appended".to_string()
                }
            };
            offsets.sort_unstable();
            offsets.dedup();
            let ctx = format!("seed {seed}, iteration {i}: {what}");
            let path = dir.path().join(format!("r{}.tar", comm.rank()));
            std::fs::write(&path, &a).unwrap();
            let archive = Archive::open(path.as_os_str().as_encoded_bytes()).unwrap();
            let found = Found::in_memory(offsets.clone(), Source::SideFile, None);
            if let Ok(end) = scan::check_index(comm, &archive, &found, None).map(|c| c.end) {
                mine += 1;
                // Accepted: it must be the archive's real chain, and the archive undamaged.
                let (scanned, damage, scan_end) = scan::scan(comm, &archive, 1 << 16);
                assert_eq!(
                    damage, None,
                    "{ctx}: an index of a damaged archive was accepted"
                );
                assert_eq!(
                    offsets, scanned,
                    "{ctx}: accepted an index that is not the chain"
                );
                assert_eq!(end, scan_end, "{ctx}");
                // Recording that end, it holds; recording another, it does not.
                let with_end = Found {
                    end: Some(end),
                    ..found.clone()
                };
                assert!(scan::check_index(comm, &archive, &with_end, None).is_ok());
                let wrong = Found {
                    end: Some(end + 512),
                    ..found
                };
                assert!(
                    scan::check_index(comm, &archive, &wrong, None).is_err(),
                    "{ctx}"
                );
            }
        }
        mine
    })[0];
    assert!(
        accepted > 0,
        "no index was ever accepted in {} iterations (seed {seed}): the driver tests nothing",
        ITERATIONS / 8
    );
}

#[test]
fn hand_made_sparse_entries_decode_to_their_maps() {
    let segs: Vec<(u64, u64)> = (0..7).map(|i| (i * 10_000, 100 + i)).collect();
    let want = |n: usize| -> Vec<Segment> {
        segs[..n]
            .iter()
            .map(|&(at, len)| Segment { at, len })
            .collect()
    };
    let a = corpus().pop().expect("the sparse archive is last");
    let mut read = |at: u64, n: usize| -> io::Result<Vec<u8>> {
        let from = (at as usize).min(a.len());
        Ok(a[from..][..n.min(a.len() - from)].to_vec())
    };
    // Old GNU: 4 pairs in the header, 3 in one extension block; data after that block.
    let old = decode_entry(&mut read, 0).unwrap().unwrap();
    assert_eq!(old.header.path, b"old");
    assert_eq!(old.header.kind, Kind::File);
    assert_eq!(old.header.size, 80_000);
    assert_eq!(old.sparse.as_deref(), Some(&want(7)[..]));
    assert_eq!(old.data, 1024);
    assert_eq!(old.stored_len(), (0..7).map(|i| 100 + i).sum::<u64>());
    assert_eq!(&a[old.data as usize..][..3], b"DDD");
    // Pax 1.0: the real name from GNU.sparse.name, the map before the data.
    let new = decode_entry(&mut read, old.next).unwrap().unwrap();
    assert_eq!(new.header.path, b"new");
    assert_eq!(new.header.size, 40_000);
    assert_eq!(new.sparse.as_deref(), Some(&want(3)[..]));
    assert_eq!(&a[new.data as usize..][..3], b"PPP");
    let after = decode_entry(&mut read, new.next).unwrap().unwrap();
    assert_eq!(after.header.path, b"after");
    assert_eq!(after.sparse, None);
    // Pax 0.0 (offset/numbytes records) and 0.1 (one map record) give the same map.
    for records in [
        vec![
            ("GNU.sparse.size", "40000"),
            ("GNU.sparse.numblocks", "3"),
            ("GNU.sparse.offset", "0"),
            ("GNU.sparse.numbytes", "100"),
            ("GNU.sparse.offset", "10000"),
            ("GNU.sparse.numbytes", "101"),
            ("GNU.sparse.offset", "20000"),
            ("GNU.sparse.numbytes", "102"),
        ],
        vec![
            ("GNU.sparse.size", "40000"),
            ("GNU.sparse.numblocks", "3"),
            ("GNU.sparse.name", "real/name"),
            ("GNU.sparse.map", "0,100,10000,101,20000,102"),
        ],
    ] {
        let mut pax = Vec::new();
        for (k, v) in &records {
            pax_record(&mut pax, k.as_bytes(), v.as_bytes());
        }
        let h = file_header(b"GNUSparseFile.1/name", 303);
        let mut buf = Vec::new();
        extension(&mut buf, b'x', b"PaxHeaders/x", &pax, &h);
        h.encode(&mut buf);
        buf.resize(buf.len() + 512, b'Q');
        let mut read = |at: u64, n: usize| -> io::Result<Vec<u8>> {
            let from = (at as usize).min(buf.len());
            Ok(buf[from..][..n.min(buf.len() - from)].to_vec())
        };
        let d = decode_entry(&mut read, 0).unwrap().unwrap();
        assert_eq!(d.sparse.as_deref(), Some(&want(3)[..]), "{records:?}");
        assert_eq!(d.header.size, 40_000);
        let name: &[u8] = if records.len() == 4 {
            b"real/name"
        } else {
            b"GNUSparseFile.1/name"
        };
        assert_eq!(d.header.path, name);
        // A map that does not add up to the stored bytes is refused.
        let mut bad = buf.clone();
        let size_at = bad.len() - 1024 + SIZE.0;
        let mut block = [0u8; BLOCK_USIZE];
        block.copy_from_slice(&bad[size_at - SIZE.0..][..BLOCK_USIZE]);
        put_number(field_mut(&mut block, SIZE), 304);
        seal(&mut block);
        bad[size_at - SIZE.0..][..BLOCK_USIZE].copy_from_slice(&block);
        let mut read = |at: u64, n: usize| -> io::Result<Vec<u8>> {
            let from = (at as usize).min(bad.len());
            Ok(bad[from..][..n.min(bad.len() - from)].to_vec())
        };
        assert!(matches!(
            decode_entry(&mut read, 0),
            Err(HeaderError::Invalid { .. })
        ));
    }
}

#[test]
fn a_gnu_dumpdir_is_a_directory_whose_listing_is_skipped() {
    let mut h = file_header(b"top/", 9);
    h.kind = Kind::Dir;
    let mut buf = Vec::new();
    h.encode(&mut buf);
    let at = buf.len() - BLOCK_USIZE;
    let mut block = [0u8; BLOCK_USIZE];
    block.copy_from_slice(&buf[at..]);
    block[TYPEFLAG] = b'D';
    put_number(field_mut(&mut block, SIZE), 9);
    seal(&mut block);
    buf[at..].copy_from_slice(&block);
    buf.extend_from_slice(b"Ya\0Dsub\0\0\0");
    buf.resize(buf.len().next_multiple_of(BLOCK_USIZE), 0);
    let mut read = |o: u64, n: usize| -> io::Result<Vec<u8>> {
        let from = (o as usize).min(buf.len());
        Ok(buf[from..][..n.min(buf.len() - from)].to_vec())
    };
    let d = decode_entry(&mut read, 0).unwrap().unwrap();
    assert_eq!(d.header.kind, Kind::Dir);
    assert_eq!(d.header.path, b"top");
    assert_eq!(d.next, d.data + BLOCK, "the listing is skipped");
    assert_eq!(d.stored_len(), 0, "nothing to extract from it");
}
