//! `flist::io` against the list files mpiFileUtils itself wrote (the workspace's
//! `tests/vectors/`), and round trips of what the vectors do not cover, at several local ranks.

use flist::io::{self, Format, InputFormat};
use flist::{Detail, Error, FileList, FileType, IdTable, Meta};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use steal::{local, Comm};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors");

fn vector(name: &str) -> PathBuf {
    Path::new(VECTORS).join(name)
}

fn bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

/// One record as a value, to compare lists across ranks and runs.
type Rec = (Vec<u8>, FileType, Option<Meta>);

fn records(list: &FileList) -> Vec<Rec> {
    list.iter()
        .map(|e| (e.path.to_vec(), e.kind, e.meta))
        .collect()
}

/// Read `file` at `ranks` ranks, its lines as `format` says: every rank's records, in rank
/// order.
fn read_at(ranks: usize, file: &Path, format: InputFormat) -> Vec<Vec<Rec>> {
    local::run(ranks, |comm: &dyn Comm| {
        records(&io::read_as(comm, bytes(file), format).unwrap())
    })
}

/// Read `file` at `ranks` ranks, expecting every rank to fail: the error texts.
fn read_errors(ranks: usize, file: &Path, format: InputFormat) -> Vec<String> {
    local::run(ranks, |comm: &dyn Comm| {
        match io::read_as(comm, bytes(file), format) {
            Ok(l) => panic!("{} read as {} records", file.display(), l.len()),
            Err(e) => e.to_string(),
        }
    })
}

/// Read `file` at `ranks` ranks and return the whole list (records concatenated in rank order,
/// tables from rank 0), after checking every rank got the same tables and detail.
fn read_whole(ranks: usize, file: &Path, format: InputFormat) -> FileList {
    let parts = local::run(ranks, |comm: &dyn Comm| {
        io::read_as(comm, bytes(file), format).unwrap()
    });
    let mut whole = parts[0].empty_like();
    for p in parts {
        assert_eq!(
            (p.detail(), &p.users, &p.groups),
            (whole.detail(), &whole.users, &whole.groups)
        );
        whole.append(p);
    }
    whole
}

/// Give rank `r` of `size` its contiguous share of `all` (uneven on purpose: rank r gets
/// about r+1 parts), keeping the tables.
fn share(all: &FileList, rank: usize, size: usize) -> FileList {
    let weight = |r: usize| (r + 1) * (r + 2) / 2; // cumulative of 1, 2, 3...
    let total = weight(size - 1);
    let cut = |r: usize| {
        if r == 0 {
            0
        } else {
            all.len() * weight(r - 1) / total
        }
    };
    let end = if rank + 1 == size {
        all.len()
    } else {
        cut(rank + 1)
    };
    all.select(cut(rank)..end)
}

/// Write `all`, spread over `ranks` ranks, to `file` in `format`.
fn write_at(ranks: usize, all: &FileList, file: &Path, format: Format) {
    local::run(ranks, |comm: &dyn Comm| {
        io::write(
            comm,
            &share(all, comm.rank(), comm.size()),
            bytes(file),
            format,
        )
        .unwrap()
    });
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_be_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
}

#[test]
fn vectors_are_where_the_tests_expect_them() {
    assert!(
        vector("tree.mfu").is_file(),
        "missing {}",
        vector("tree.mfu").display()
    );
}

/// Case 1: The stat lists of mpiFileUtils read and write back byte for byte, at 1, 2 and 3 ranks.
#[test]
fn v4_vectors_round_trip_byte_identically() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["tree.mfu", "tree.sorted.mfu"] {
        let original = std::fs::read(vector(name)).unwrap();
        for ranks in 1..=3 {
            let out = dir.path().join(format!("{name}.{ranks}"));
            let counts = local::run(ranks, |comm: &dyn Comm| {
                let list = io::read(comm, bytes(&vector(name))).unwrap();
                assert_eq!(list.detail(), Detail::Stat);
                assert_eq!(io::default_format(&list), Format::V4);
                io::write(comm, &list, bytes(&out), Format::V4).unwrap();
                list.len()
            });
            // Even split by count, rank 0 first.
            let expected: Vec<usize> = match ranks {
                1 => vec![44],
                2 => vec![22, 22],
                _ => vec![15, 15, 14],
            };
            assert_eq!(counts, expected, "{name} at {ranks} ranks");
            assert!(
                std::fs::read(&out).unwrap() == original,
                "{name} written at {ranks} ranks differs"
            );
        }
    }
}

/// Case 1b: What the v4 vector holds, decoded: tables, order, types from the mode, metadata.
#[test]
fn v4_vector_decodes_to_the_tree() {
    let list = read_whole(3, &vector("tree.mfu"), InputFormat::Auto);
    assert_eq!(list.len(), 44);
    assert_eq!(list.users.entries.len(), 24);
    assert_eq!(list.groups.entries.len(), 48);
    assert_eq!(list.users.name_of(997), Some(&b"systemd-timesync"[..]));
    assert_eq!(list.groups.name_of(65534), Some(&b"nogroup"[..]));
    assert_eq!(list.path(0), b"/srv/mfuvec/tree");
    assert_eq!(list.kind(0), FileType::Dir);
    let m = list.meta(0).unwrap();
    assert_eq!(
        (m.mode, m.uid, m.gid, m.mtime, m.size),
        (0o40755, 0, 0, 1600001000, 4096)
    );
    assert_eq!((m.nlink, m.ino, m.dev), (0, 0, 0));
    let find = |p: &[u8]| {
        (0..list.len())
            .find(|&i| list.path(i) == p)
            .unwrap_or_else(|| panic!("no {p:?}"))
    };
    let large = find(b"/srv/mfuvec/tree/big/large.bin");
    assert_eq!(
        (list.kind(large), list.meta(large).unwrap().size),
        (FileType::File, 5 * 1024 * 1024 + 123)
    );
    assert_eq!(
        list.kind(find(b"/srv/mfuvec/tree/perm/dangling")),
        FileType::Symlink
    );
    assert_eq!(
        list.meta(find(b"/srv/mfuvec/tree/perm/ro_file"))
            .unwrap()
            .mode
            & 0o7777,
        0o444
    );
    // The sorted vector holds the same records.
    let sorted = read_whole(2, &vector("tree.sorted.mfu"), InputFormat::Auto);
    let mut a = records(&list);
    a.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(a, records(&sorted));
    // The lite walk of the same tree found the same paths with the same types.
    let lite = read_whole(1, &vector("tree.lite.mfu"), InputFormat::Typed);
    let mut b: Vec<(Vec<u8>, FileType)> = lite.iter().map(|e| (e.path.to_vec(), e.kind)).collect();
    b.sort();
    assert_eq!(a.into_iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(), b);
}

/// Case 2: The lite (text) vector reads with `|` inside names and writes back byte for byte.
#[test]
fn text_vector_round_trips_byte_identically() {
    let src = vector("tree.lite.mfu");
    let original = std::fs::read(&src).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for ranks in 1..=3 {
        let parts = read_at(ranks, &src, InputFormat::Typed);
        let all: Vec<Rec> = parts.concat();
        assert_eq!(all.len(), 44);
        assert_eq!(all[0], (b"/srv/mfuvec/tree".to_vec(), FileType::Dir, None));
        let pipes: Vec<&Rec> = all
            .iter()
            .filter(|r| r.0.ends_with(b"/delta|pipe_2"))
            .collect();
        assert_eq!(pipes.len(), 4);
        assert!(pipes.iter().all(|r| r.1 == FileType::File));
        assert_eq!(all.iter().filter(|r| r.1 == FileType::Symlink).count(), 2);
        if ranks > 1 {
            assert!(
                parts.iter().all(|p| !p.is_empty()),
                "byte ranges gave a rank nothing: {parts:?}"
            );
        }
        let out = dir.path().join(format!("lite.{ranks}"));
        local::run(ranks, |comm: &dyn Comm| {
            let list = io::read_as(comm, bytes(&src), InputFormat::Typed).unwrap();
            assert_eq!(list.detail(), Detail::Lite);
            assert_eq!(io::default_format(&list), Format::Text);
            io::write(comm, &list, bytes(&out), Format::Text).unwrap();
        });
        // The same lines, between the header and the trailer that counts them.
        let framed = [
            &b"#mfu-rs typed list v1\n"[..],
            &original,
            b"#mfu-rs end 44\n",
        ]
        .concat();
        assert!(
            std::fs::read(&out).unwrap() == framed,
            "text written at {ranks} ranks differs"
        );
        // Read back without being told: typed, by its header.
        assert_eq!(read_at(ranks, &out, InputFormat::Auto).concat(), all);
    }
}

/// Case 3: A list without records still makes a valid v4 file (mpiFileUtils writes nothing), and
/// replaces a longer file of the same name.
#[test]
fn empty_stat_list_writes_a_valid_v4_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("empty.mfu");
    let users = IdTable {
        entries: vec![(b"root".to_vec(), 0), (b"a-longer-name".to_vec(), 1001)],
    };
    for ranks in [1, 3] {
        std::fs::write(&out, vec![b'x'; 10_000]).unwrap();
        let mut empty = FileList::new(Detail::Stat);
        empty.users = users.clone();
        write_at(ranks, &empty, &out, Format::V4);
        let b = std::fs::read(&out).unwrap();
        // UC = 14 rounded up to 16; no groups, no records.
        assert_eq!(b.len(), 56 + 2 * (16 + 8));
        assert_eq!(
            (0..7).map(|i| u64_at(&b, i)).collect::<Vec<_>>(),
            vec![4, 2, 16, 0, 0, 0, 0]
        );
        assert_eq!(&b[56..72], b"root\0\0\0\0\0\0\0\0\0\0\0\0");
        assert_eq!(u64_at(&b[72..], 0), 0);
        assert_eq!(u64_at(&b[80 + 16..], 0), 1001);
        let back = read_whole(ranks, &out, InputFormat::Auto);
        assert_eq!((back.len(), back.detail()), (0, Detail::Stat));
        assert_eq!(back.users, users);
    }
}

fn odd_names() -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = vec![
        b"/t".to_vec(),
        b"/t/caf\xe9".to_vec(),
        b"/t/a|b".to_vec(),
        b"/t/sp ace".to_vec(),
        b"/t/x|F".to_vec(),
        b"/t/ends-with-bar|".to_vec(),
        b"/t/\xff\xfe|D|L".to_vec(),
        "/t/épée\t".as_bytes().to_vec(),
        b"/t/back\\slash\r".to_vec(),
    ];
    names.push(format!("/t/{}", "L".repeat(250)).into_bytes());
    names
}

fn odd_list() -> FileList {
    let mut list = FileList::new(Detail::Stat);
    list.users = IdTable {
        entries: vec![
            (b"root".to_vec(), 0),
            (b"\xe9t\xe9".to_vec(), 4_000_000_000),
        ],
    };
    list.groups = IdTable {
        entries: vec![(b"wheel".to_vec(), 10)],
    };
    let types = [
        (0o040755, FileType::Dir),
        (0o100644, FileType::File),
        (0o120777, FileType::Symlink),
        (0o010600, FileType::Fifo),
    ];
    for (i, name) in odd_names().into_iter().enumerate() {
        let (mode, kind) = types[i % types.len()];
        let meta = Meta {
            mode,
            uid: 4_000_000_000,
            gid: i as u32,
            atime: -(i as i64) - 1, // before 1970
            atime_nsec: 999_999_999,
            mtime: 1 << 33, // after 2038
            mtime_nsec: i as u32,
            ctime: 1_700_000_000,
            ctime_nsec: 5,
            size: (5u64 << 32) + i as u64, // > 4 GiB
            ..Meta::default()
        };
        list.push(&name, kind, Some(meta));
    }
    list
}

/// Case 4: Names with non-UTF-8 bytes, `|`, spaces survive V4 (with their metadata) and text (with
/// their types), written and read at 1 and 3 ranks in every combination.
#[test]
fn odd_names_round_trip_through_v4_and_text() {
    let dir = tempfile::tempdir().unwrap();
    let list = odd_list();
    for (format, ext) in [(Format::V4, "mfu"), (Format::Text, "txt")] {
        for w in [1, 3] {
            let out = dir.path().join(format!("odd.{w}.{ext}"));
            write_at(w, &list, &out, format);
            for r in [1, 3] {
                let back = read_whole(r, &out, InputFormat::Auto);
                match format {
                    Format::V4 => {
                        assert_eq!(
                            records(&back),
                            records(&list),
                            "v4 written at {w}, read at {r}"
                        );
                        assert_eq!((&back.users, &back.groups), (&list.users, &list.groups));
                    }
                    Format::Text => {
                        assert_eq!(back.detail(), Detail::Lite);
                        let want: Vec<(Vec<u8>, FileType)> = list
                            .iter()
                            // Text has letters for file, directory and link only.
                            .map(|e| {
                                (
                                    e.path.to_vec(),
                                    FileType::from_text_letter(e.kind.text_letter()).unwrap(),
                                )
                            })
                            .collect();
                        let got: Vec<(Vec<u8>, FileType)> =
                            back.iter().map(|e| (e.path.to_vec(), e.kind)).collect();
                        assert_eq!(got, want, "text written at {w}, read at {r}");
                    }
                }
            }
        }
    }
    // A v4 path field is as wide as the longest path anywhere (+ NUL, to a multiple of 8), even
    // when the rank holding it is not rank 0.
    let b = std::fs::read(dir.path().join("odd.3.mfu")).unwrap();
    assert_eq!(u64_at(&b, 6), 256);
    assert_eq!(u64_at(&b, 2), 8); // "root", 3-byte "\xe9t\xe9" -> 8
}

/// Case 5: A v3 list (header of 9 big-endian u64 with walk times) reads as big-endian.
#[test]
fn v3_list_reads() {
    let mut b = Vec::new();
    let be = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_be_bytes());
    for v in [3, 1_500_000_000, 1_500_000_100, 1, 8, 2, 16, 3, 24] {
        be(&mut b, v);
    }
    b.extend_from_slice(b"alice\0\0\0");
    be(&mut b, 1001);
    b.extend_from_slice(b"staff\0\0\0\0\0\0\0\0\0\0\0");
    be(&mut b, 50);
    b.extend_from_slice(b"researchers\0\0\0\0\0");
    be(&mut b, 2000);
    let recs: [(&[u8], u64, u64); 3] = [
        (b"/old", 0o40750, 4096),
        (b"/old/run\xb51", 0o100640, 1 << 40),
        (b"/old/ln", 0o120777, 5),
    ];
    for (i, (p, mode, size)) in recs.iter().enumerate() {
        let mut field = p.to_vec();
        field.resize(24, 0);
        b.extend_from_slice(&field);
        for v in [
            *mode,
            1001,
            2000,
            10 + i as u64,
            1,
            20 + i as u64,
            2,
            30 + i as u64,
            3,
            *size,
        ] {
            be(&mut b, v);
        }
    }
    assert_eq!(b.len(), 72 + 16 + 2 * 24 + 3 * 104);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("v3.mfu");
    std::fs::write(&file, &b).unwrap();
    for ranks in [1, 2, 4] {
        let list = read_whole(ranks, &file, InputFormat::Auto);
        assert_eq!(list.detail(), Detail::Stat);
        assert_eq!(list.users.entries, vec![(b"alice".to_vec(), 1001)]);
        assert_eq!(
            list.groups.entries,
            vec![(b"staff".to_vec(), 50), (b"researchers".to_vec(), 2000)]
        );
        let got: Vec<(Vec<u8>, FileType)> =
            list.iter().map(|e| (e.path.to_vec(), e.kind)).collect();
        assert_eq!(
            got,
            vec![
                (b"/old".to_vec(), FileType::Dir),
                (b"/old/run\xb51".to_vec(), FileType::File),
                (b"/old/ln".to_vec(), FileType::Symlink)
            ]
        );
        let m = list.meta(1).unwrap();
        assert_eq!(
            (
                m.mode,
                m.uid,
                m.gid,
                m.atime,
                m.atime_nsec,
                m.mtime,
                m.mtime_nsec,
                m.ctime,
                m.ctime_nsec,
                m.size
            ),
            (0o100640, 1001, 2000, 11, 1, 21, 2, 31, 3, 1 << 40)
        );
    }
}

/// Case 6a: Plain path lists (no `|T`) and NUL-separated lists read with unknown types.
#[test]
fn plain_and_nul_lists_read_with_unknown_types() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, b"/a/b\n\n/a/c d\n/a/e|x\n/a/\xff\n").unwrap();
    let got: Vec<Rec> = read_at(2, &plain, InputFormat::Auto).concat();
    let want: Vec<Rec> = vec![
        (b"/a/b".to_vec(), FileType::Unknown, None),
        (b"/a/c d".to_vec(), FileType::Unknown, None),
        (b"/a/e|x".to_vec(), FileType::Unknown, None),
        (b"/a/\xff".to_vec(), FileType::Unknown, None),
    ];
    assert_eq!(got, want);
    // A line that ends in `|D` in a list that does not say it is typed: a name that ends in
    // `|D` (`find -print` beside a file named so), never `/a/f`.
    std::fs::write(&plain, b"/a/b\n/a/f|D\n/a/\xff\n").unwrap();
    for ranks in [1, 2, 3] {
        let got: Vec<Vec<u8>> = read_at(ranks, &plain, InputFormat::Auto)
            .concat()
            .into_iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(
            got,
            vec![b"/a/b".to_vec(), b"/a/f|D".to_vec(), b"/a/\xff".to_vec()]
        );
        // Said to be typed, it is a damaged typed list: refused on every rank.
        for e in read_errors(ranks, &plain, InputFormat::Typed) {
            assert!(e.contains("is not path|T"), "{e}");
        }
    }

    let nul = dir.path().join("list0");
    std::fs::write(&nul, b"/a/b\0/a/new\nline\0/a/x|F\0\0/a/\xff\0").unwrap();
    let got: Vec<Rec> = read_at(3, &nul, InputFormat::Auto).concat();
    let names: [&[u8]; 4] = [b"/a/b", b"/a/new\nline", b"/a/x|F", b"/a/\xff"];
    assert_eq!(
        got,
        names
            .iter()
            .map(|n| (n.to_vec(), FileType::Unknown, None))
            .collect::<Vec<_>>()
    );
}

/// Case 6b: Long lists split over 3 and 7 ranks by byte ranges: every record once, in order, for
/// newline and NUL separators, with and without a final separator.
#[test]
fn long_text_lists_split_over_ranks_exactly_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<Vec<u8>> = (0..1500)
        .map(|i: usize| {
            let mut n = format!("/big/{i:05}/").into_bytes();
            n.resize(n.len() + (i * 37) % 200, b'a' + (i % 26) as u8);
            n
        })
        .collect();
    for (sep, letters) in [(b'\n', true), (b'\n', false), (0u8, false)] {
        for last_sep in [true, false] {
            let mut content = Vec::new();
            for (i, n) in names.iter().enumerate() {
                content.extend_from_slice(n);
                if letters {
                    content.extend_from_slice(if i % 2 == 0 { b"|F" } else { b"|D" });
                }
                if i % 100 == 7 {
                    content.push(sep); // an empty record, skipped
                }
                if last_sep || i + 1 < names.len() {
                    content.push(sep);
                }
            }
            let file = dir.path().join("long");
            std::fs::write(&file, &content).unwrap();
            // Lines with `|T` are typed when the reader is told so (no header here).
            let format = if letters {
                InputFormat::Typed
            } else {
                InputFormat::Auto
            };
            if !last_sep {
                // A list of many entries without its final separator may be cut: refused.
                for ranks in [3, 7] {
                    for e in read_errors(ranks, &file, format) {
                        assert!(e.contains("without a final"), "{e}");
                    }
                }
                continue;
            }
            for ranks in [3, 7] {
                let parts = read_at(ranks, &file, format);
                assert!(
                    parts.iter().all(|p| p.len() > 150),
                    "uneven split: {:?}",
                    parts.iter().map(Vec::len).collect::<Vec<_>>()
                );
                let got: Vec<Rec> = parts.concat();
                let want: Vec<Rec> = names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let kind = match (letters, i % 2) {
                            (false, _) => FileType::Unknown,
                            (true, 0) => FileType::File,
                            (true, _) => FileType::Dir,
                        };
                        (n.clone(), kind, None)
                    })
                    .collect();
                assert!(
                    got == want,
                    "sep {sep} letters {letters} final {last_sep} at {ranks} ranks: {} records",
                    got.len()
                );
            }
        }
    }
}

/// Case 6c: Byte ranges that start exactly at a record (equal-length lines) lose and repeat
/// nothing.
#[test]
fn byte_ranges_on_record_starts_split_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("even");
    // 1200 lines of 10 bytes: at 2..=6 ranks every range starts on a line.
    let content: Vec<u8> = (0..1200)
        .flat_map(|i| format!("/x/{i:04}|F\n").into_bytes())
        .collect();
    assert_eq!(content.len(), 12_000);
    std::fs::write(&file, &content).unwrap();
    for ranks in [2, 3, 4, 5, 6, 7] {
        let parts = read_at(ranks, &file, InputFormat::Typed);
        let got: Vec<Vec<u8>> = parts.concat().into_iter().map(|r| r.0).collect();
        let want: Vec<Vec<u8>> = (0..1200)
            .map(|i| format!("/x/{i:04}").into_bytes())
            .collect();
        assert!(got == want, "at {ranks} ranks: {} records", got.len());
        if 1200 % ranks == 0 {
            assert!(
                parts.iter().all(|p| p.len() == 1200 / ranks),
                "at {ranks} ranks"
            );
        }
    }
}

/// Case 7: A truncated or damaged v4 file fails on every rank with the file and the offset named;
/// so does a missing file.
#[test]
fn damaged_lists_fail_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(vector("tree.mfu")).unwrap();
    let cut = dir.path().join("cut.mfu");
    std::fs::write(&cut, &original[..original.len() - 100]).unwrap();
    let long = dir.path().join("long.mfu");
    std::fs::write(&long, [&original[..], b"junk"].concat()).unwrap();
    let short = dir.path().join("short.mfu");
    std::fs::write(&short, &original[..30]).unwrap();
    let mut no_nul = original.clone();
    let first_record = 56 + 24 * 32 + 48 * 32;
    no_nul[first_record + 328 + 80..first_record + 2 * 328 + 80].fill(b'x');
    let no_nul_file = dir.path().join("nonul.mfu");
    std::fs::write(&no_nul_file, &no_nul).unwrap();
    let missing = dir.path().join("missing.mfu");

    let no_nul_reason = format!(
        "record 1 at byte offset {}: its path field has no NUL",
        first_record + 408
    );
    let cases: [(&Path, &str); 5] = [
        (
            &cut,
            "truncated at byte offset 20212 (inside record 43 of 44)",
        ),
        (
            &long,
            "4 unexpected bytes after the last record, from byte offset 20312",
        ),
        (&short, "truncated at byte offset 30"),
        (&no_nul_file, &no_nul_reason),
        (&missing, "No such file or directory"),
    ];
    for (file, needle) in cases {
        for ranks in [1, 3] {
            let errs = local::run(ranks, |comm: &dyn Comm| match io::read(comm, bytes(file)) {
                Ok(l) => panic!("{} read as {} records", file.display(), l.len()),
                Err(e) => e.to_string(),
            });
            let name = file.display().to_string();
            for e in &errs {
                assert!(
                    e.contains(&name) && e.contains(needle),
                    "{e:?} should name {name} and say {needle:?}"
                );
                assert_eq!(e, &errs[0], "ranks disagree");
            }
            if file == missing {
                assert!(errs[0].starts_with("open list "), "{}", errs[0]);
            } else {
                assert!(errs[0].starts_with("read list "), "{}", errs[0]);
            }
        }
    }
}

/// Case 8: What a format cannot hold is refused on every rank, before the file is touched.
#[test]
fn unwritable_lists_are_refused_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("keep");
    std::fs::write(&out, b"old").unwrap();
    let mut lite = FileList::new(Detail::Lite);
    lite.push(b"/a", FileType::File, None);
    let mut newline = lite.clone();
    newline.push(b"/a/new\nline", FileType::File, None);
    let cases = [
        (&lite, Format::V4, "cannot be written in cache format v4"),
        (&newline, Format::Text, "/a/new\\nline"),
    ];
    for (list, format, needle) in cases {
        let errs = local::run(3, |comm: &dyn Comm| {
            // Only the last rank holds the offending list.
            let mine = if comm.rank() == 2 {
                list.clone()
            } else {
                FileList::new(list.detail())
            };
            io::write(comm, &mine, bytes(&out), format).unwrap_err()
        });
        for e in errs {
            assert!(matches!(e, Error::Invalid(_)), "{e:?}");
            assert!(e.to_string().contains(needle), "{e}");
        }
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
    }
}

/// A list is written under a temporary name and renamed into place: an existing list keeps its
/// permission bits, a failed write leaves the old list whole, no temporary file stays, and a
/// symlink or device is written through in place.
#[test]
fn lists_are_renamed_into_place_and_failures_leave_the_old_list() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("l.txt");
    std::fs::write(&file, b"/old|F\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut lite = FileList::new(Detail::Lite);
    lite.push(b"/new", FileType::File, None);
    for ranks in [1, 2] {
        std::fs::write(&file, b"/old|F\n").unwrap();
        // A lite list cannot be v4: refused, the old list stays.
        let outcome = local::run(ranks, |comm: &dyn Comm| {
            io::write(comm, &lite, bytes(&file), Format::V4).is_err()
        });
        assert!(outcome.iter().all(|&failed| failed));
        assert_eq!(std::fs::read(&file).unwrap(), b"/old|F\n");
        local::run(ranks, |comm: &dyn Comm| {
            io::write(comm, &lite, bytes(&file), Format::Text).unwrap()
        });
        // Every rank wrote its own copy of the one record.
        let want = [
            &b"#mfu-rs typed list v1\n"[..],
            &b"/new|F\n".repeat(ranks),
            format!("#mfu-rs end {ranks}\n").as_bytes(),
        ]
        .concat();
        assert_eq!(std::fs::read(&file).unwrap(), want);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("l.txt")]);
    }
    // Through a symlink: the file it names is written, the link stays.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    std::fs::write(&file, b"").unwrap();
    local::run(1, |comm: &dyn Comm| {
        io::write(comm, &lite, bytes(&link), Format::Text).unwrap()
    });
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"#mfu-rs typed list v1\n/new|F\n#mfu-rs end 1\n"
    );
    // A device: written in place.
    local::run(1, |comm: &dyn Comm| {
        io::write(comm, &lite, b"/dev/null", Format::Text).unwrap()
    });
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}
