//! Unit tests of decoding: hand-made archives, then archives made by real tools (the
//! fixtures of `../testdata`, see its make.sh).

use super::encode::{extension, put_bytes};
use super::number::{cstr, put_number, seal};
use super::pax::pax_record;
use super::tests::*;
use super::*;

// ---- decoding: hand-made archives ------------------------------------------------------

#[test]
fn decode_zero_block_is_the_end() {
    assert!(decode_at(&[0u8; 1024], 0).unwrap().is_none());
    let mut buf = encode(&hdr(b"d", Kind::Dir));
    buf.resize(1536, 0);
    assert!(decode_at(&buf, 512).unwrap().is_none());
}

#[test]
fn decode_short_reads_and_errors() {
    let buf = encode(&hdr(b"f", Kind::File));
    assert!(matches!(
        decode_at(&buf[..300], 0),
        Err(HeaderError::Truncated { offset: 0 })
    ));
    assert!(matches!(
        decode_at(&buf, 512),
        Err(HeaderError::Truncated { offset: 512 })
    ));
    let mut failing = |off: u64, _len: usize| -> io::Result<Vec<u8>> {
        assert_eq!(off, 1024);
        Err(io::Error::other("disk on fire"))
    };
    match decode_entry(&mut failing, 1024) {
        Err(HeaderError::Io {
            offset: 1024,
            source,
        }) => assert_eq!(source.to_string(), "disk on fire"),
        other => panic!("{other:?}"),
    }
    // Extension data cut short: Truncated at the extension header.
    let mut h = hdr(&repeat(b'z', 300), Kind::File);
    h.size = 5;
    let mut buf = vec![0u8; 1024];
    h.encode(&mut buf);
    assert!(matches!(
        decode_at(&buf[..1024 + 600], 1024),
        Err(HeaderError::Truncated { offset: 1024 })
    ));
    // An extension header followed by the end marker.
    let mut buf = Vec::new();
    extension(&mut buf, b'x', b"PaxHeaders/f", b"9 size=7\n", &h);
    buf.resize(buf.len() + 1024, 0);
    assert!(matches!(
        decode_at(&buf, 0),
        Err(HeaderError::Invalid { offset: 1024, .. })
    ));
}

#[test]
fn decode_bad_extension_data() {
    let h = hdr(b"f", Kind::File);
    for data in [
        &b"9 size=x\n"[..],
        b"12 mtime=1-\n",
        b"garbage",
        b"10 uid=-1\n",
    ] {
        let mut buf = Vec::new();
        extension(&mut buf, b'x', b"PaxHeaders/f", data, &h);
        h.encode(&mut buf);
        match decode_at(&buf, 0) {
            Err(HeaderError::Invalid { offset: 0, .. }) => {}
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(data)),
        }
    }
    // A malformed global header is an error too.
    let mut buf = Vec::new();
    extension(&mut buf, b'g', b"GlobalHead", b"5 a\n", &h);
    h.encode(&mut buf);
    assert!(matches!(
        decode_at(&buf, 0),
        Err(HeaderError::Invalid { offset: 0, .. })
    ));
    // An absurd extension size is refused without reading it.
    let mut block = [0u8; 512];
    block.copy_from_slice(&encode(&h));
    block[TYPEFLAG] = b'L';
    put_number(
        field_mut(&mut block, SIZE),
        i128::from(MAX_EXTENSION_SIZE) + 1,
    );
    seal(&mut block);
    assert!(matches!(
        decode_at(&block, 0),
        Err(HeaderError::Invalid { offset: 0, .. })
    ));
}

#[test]
fn global_records_apply_under_the_entrys_own_and_fold_as_posix_says() {
    let h = hdr(b"f", Kind::File);
    let mut g = Vec::new();
    pax_record(&mut g, b"uid", b"4242");
    pax_record(&mut g, b"uname", b"global");
    pax_record(&mut g, b"path", b"every/entry");
    pax_record(&mut g, b"size", b"7");
    let mut own = Vec::new();
    pax_record(&mut own, b"uid", b"5555");
    // An entry with its own uid after a global header inside its chain.
    let mut buf = Vec::new();
    extension(&mut buf, b'g', b"GlobalHead", &g, &h);
    extension(&mut buf, b'x', b"PaxHeaders/f", &own, &h);
    let after_g = 1024;
    h.encode(&mut buf);
    let mut read = |off: u64, len: usize| -> io::Result<Vec<u8>> {
        let start = (off as usize).min(buf.len());
        Ok(buf[start..(start + len).min(buf.len())].to_vec())
    };
    let mut seen = Vec::new();
    let d = decode_entry_in(&mut read, 0, &[], Some(&mut seen))
        .unwrap()
        .unwrap();
    assert_eq!((d.header.uid, &d.header.uname[..]), (5555, &b"global"[..]));
    assert_eq!(d.header.path, b"f", "a global path is not applied");
    assert_eq!(d.header.size, 0, "nor a global size");
    assert_eq!(
        seen,
        [Global {
            from: after_g,
            records: vec![
                (b"uid".to_vec(), b"4242".to_vec()),
                (b"uname".to_vec(), b"global".to_vec())
            ]
        }]
    );
    // The fold: a later global header replaces its keywords and keeps the others; an
    // empty value removes the global value when applied.
    let mut globals = Globals::default();
    globals.push(seen.pop().unwrap());
    globals.push(Global {
        from: 5000,
        records: vec![
            (b"gid".to_vec(), b"9".to_vec()),
            (b"uname".to_vec(), Vec::new()),
        ],
    });
    assert!(globals.at(after_g - 1).is_empty());
    let plain = encode(&h);
    let mut read = |off: u64, len: usize| -> io::Result<Vec<u8>> {
        let start = (off as usize).min(plain.len());
        Ok(plain[start..(start + len).min(plain.len())].to_vec())
    };
    let early = decode_entry_in(&mut read, 0, globals.at(after_g), None)
        .unwrap()
        .unwrap();
    assert_eq!(
        (early.header.uid, early.header.gid, &early.header.uname[..]),
        (4242, 100, &b"global"[..])
    );
    let late = decode_entry_in(&mut read, 0, globals.at(9000), None)
        .unwrap()
        .unwrap();
    assert_eq!(
        (late.header.uid, late.header.gid, &late.header.uname[..]),
        (4242, 9, &b"user"[..])
    );
    let mut wire = Vec::new();
    globals.encode(&mut wire);
    assert_eq!(Globals::decode(&wire), globals);
    assert_eq!(
        Globals::from_list(vec![
            Global {
                from: 9,
                records: vec![(b"gid".to_vec(), b"1".to_vec())]
            },
            Global {
                from: 3,
                records: vec![(b"uid".to_vec(), b"2".to_vec())]
            },
            Global {
                from: 9,
                records: vec![(b"gid".to_vec(), b"1".to_vec())]
            },
        ])
        .at(10),
        &[
            (b"uid".to_vec(), b"2".to_vec()),
            (b"gid".to_vec(), b"1".to_vec())
        ][..]
    );
}

#[test]
fn decode_chained_extension_headers() {
    let real = hdr(b"short/name", Kind::Symlink);
    let mut real = real;
    real.link = b"short-target".to_vec();
    let long_name = [b"long/".to_vec(), repeat(b'N', 200)].concat();
    let long_link = repeat(b'K', 180);
    let mut buf = vec![0u8; 512 * 3]; // the entry starts at 1536
                                      // g: path not applied; L: name (NUL-terminated, data then padding); K: link; x: mtime + xattr.
    extension(
        &mut buf,
        b'g',
        b"pax_global_header",
        b"18 path=ignored/p\n",
        &real,
    );
    extension(
        &mut buf,
        b'L',
        b"././@LongLink",
        &[long_name.clone(), vec![0]].concat(),
        &real,
    );
    extension(
        &mut buf,
        b'K',
        b"././@LongLink",
        &[long_link.clone(), vec![0, b'j', b'u', b'n', b'k']].concat(),
        &real,
    );
    let mut pax = Vec::new();
    pax_record(&mut pax, b"mtime", b"-3.25");
    pax_record(&mut pax, b"atime", b"1.5");
    pax_record(&mut pax, b"ctime", b"junk-is-ignored");
    pax_record(&mut pax, b"comment", b"hi");
    pax_record(&mut pax, b"SCHILY.xattr.user.x", b"v\0w");
    pax_record(&mut pax, b"some.unknown", b"?");
    extension(&mut buf, b'x', b"PaxHeaders/x", &pax, &real);
    let real_at = buf.len() as u64;
    real.encode(&mut buf);
    let d = decode_at(&buf, 1536).unwrap().unwrap();
    assert_eq!(d.start, 1536);
    assert_eq!(d.data, real_at + 512);
    assert_eq!(d.next, d.data);
    let mut expect = real.clone();
    expect.path = long_name;
    expect.link = long_link;
    expect.mtime = -4;
    expect.mtime_nsec = 750_000_000;
    expect.xattrs = vec![(b"user.x".to_vec(), b"v\0w".to_vec())];
    assert_eq!(d.header, expect);
}

#[test]
fn decode_pax_overrides_and_empty_values() {
    let mut real = hdr(b"field/name", Kind::File);
    real.size = 10;
    let mut pax = Vec::new();
    pax_record(&mut pax, b"path", b"first");
    pax_record(&mut pax, b"uname", b"somebody");
    pax_record(&mut pax, b"size", b"12");
    let mut pax2 = Vec::new();
    pax_record(&mut pax2, b"path", b"second/");
    pax_record(&mut pax2, b"uname", b"");
    pax_record(&mut pax2, b"uid", b"7");
    pax_record(&mut pax2, b"gid", b"8");
    pax_record(&mut pax2, b"gname", b"grp");
    pax_record(&mut pax2, b"linkpath", b"ignored-for-files-but-kept");
    let mut buf = Vec::new();
    extension(&mut buf, b'x', b"a", &pax, &real);
    extension(&mut buf, b'x', b"b", &pax2, &real);
    real.encode(&mut buf);
    let d = decode_at(&buf, 0).unwrap().unwrap();
    let h = d.header;
    // "second/" ends in '/' on a '0' entry: a directory (v7 style), slash removed.
    assert_eq!(h.path, b"second");
    assert_eq!(h.kind, Kind::Dir);
    assert_eq!(h.uname, b"user", "empty value restores the field");
    assert_eq!((h.uid, h.gid, h.size), (7, 8, 12));
    assert_eq!(h.gname, b"grp");
    assert_eq!(h.link, b"ignored-for-files-but-kept");
    assert_eq!(d.next, d.data + 512);
}

#[test]
fn decode_v7_and_old_gnu_headers() {
    // v7: no magic; uname/gname/prefix/dev fields are not read; a '0' dir has a '/'.
    let mut h = hdr(b"olddir", Kind::Dir);
    h.dev_major = 3;
    let buf = encode(&h);
    let mut block = buf.clone();
    block[156] = b'0';
    block[257..512].fill(0);
    block[PREFIX.0..PREFIX.0 + 4].copy_from_slice(b"junk");
    put_bytes(field_mut(&mut block, UNAME), b"junk");
    reseal(&mut block);
    let d = decode_at(&block, 0).unwrap().unwrap();
    let mut expect = h.clone();
    expect.uname.clear();
    expect.gname.clear();
    expect.dev_major = 0;
    assert_eq!(d.header, expect);
    assert_eq!(d.next, 512);
    // NUL type flag: file.
    let mut file = encode(&hdr(b"plain", Kind::File));
    file[156] = 0;
    file[257..265].fill(0);
    reseal(&mut file);
    assert_eq!(
        decode_at(&file, 0).unwrap().unwrap().header.kind,
        Kind::File
    );
    // '7' (contiguous): file.
    file[156] = b'7';
    reseal(&mut file);
    assert_eq!(
        decode_at(&file, 0).unwrap().unwrap().header.kind,
        Kind::File
    );

    // Old GNU magic: the prefix area holds atime/ctime etc., never a path prefix.
    let mut block = encode(&hdr(b"gnu/name", Kind::File));
    block[257..265].copy_from_slice(MAGIC_GNU);
    block[PREFIX.0..PREFIX.0 + 12].copy_from_slice(b"13727410000\0");
    reseal(&mut block);
    let d = decode_at(&block, 0).unwrap().unwrap();
    assert_eq!(d.header.path, b"gnu/name");
    assert_eq!(d.header.uname, b"user");
    // The same prefix bytes under POSIX magic do form a path.
    block[257..265].copy_from_slice(MAGIC_USTAR);
    reseal(&mut block);
    assert_eq!(
        decode_at(&block, 0).unwrap().unwrap().header.path,
        b"13727410000/gnu/name"
    );
}

#[test]
fn decode_trailing_slashes() {
    for (stored, path, kind) in [
        (&b"/"[..], &b"/"[..], Kind::Dir),
        (b"./", b".", Kind::Dir),
        (b"a//", b"a", Kind::Dir),
        (b"//", b"/", Kind::Dir),
    ] {
        let mut block = encode(&hdr(b"x", Kind::Dir));
        field_mut(&mut block, NAME).fill(0);
        put_bytes(field_mut(&mut block, NAME), stored);
        reseal(&mut block);
        let h = decode_at(&block, 0).unwrap().unwrap().header;
        assert_eq!((h.path.as_slice(), h.kind), (path, kind));
    }
}

#[test]
fn decode_unknown_flag_has_data() {
    let mut h = hdr(b"unknown", Kind::Other(b'Z'));
    h.size = 1000;
    let buf = round_trip(&h);
    assert_eq!(decode_at(&buf, 0).unwrap().unwrap().next, 512 + 1024);
}

// ---- decoding: archives made by real tools (see testdata/make.sh) ------------------------

const GNU_TAR: &[u8] = include_bytes!("../testdata/gnu.tar");
const PAX_TAR: &[u8] = include_bytes!("../testdata/pax.tar");
const USTAR_TAR: &[u8] = include_bytes!("../testdata/ustar.tar");
const PYTHON_TAR: &[u8] = include_bytes!("../testdata/python.tar");

/// Every entry of an archive, from offset 0 to the end marker.
fn decode_all(archive: &[u8]) -> Vec<Decoded> {
    let mut entries = Vec::new();
    let mut at = 0;
    while let Some(d) = decode_at(archive, at).unwrap() {
        assert!(d.next > at);
        at = d.next;
        entries.push(d);
    }
    entries
}

/// Expected entry: path, kind, mode, size, link, content.
type Expect = (Vec<u8>, Kind, u32, u64, Vec<u8>, &'static [u8]);

fn check(archive: &[u8], expected: &[Expect]) -> Vec<Decoded> {
    let entries = decode_all(archive);
    let names: Vec<_> = entries
        .iter()
        .map(|d| String::from_utf8_lossy(&d.header.path).into_owned())
        .collect();
    assert_eq!(entries.len(), expected.len(), "{names:?}");
    for (d, (path, kind, mode, size, link, content)) in entries.iter().zip(expected) {
        let h = &d.header;
        let name = String::from_utf8_lossy(path);
        assert_eq!(&h.path, path);
        assert_eq!(h.kind, *kind, "{name}");
        assert_eq!(h.mode, *mode, "{name}");
        assert_eq!(h.size, *size, "{name}");
        assert_eq!(&h.link, link, "{name}");
        assert_eq!((h.uid, h.gid), (0, 0), "{name}");
        assert_eq!(h.mtime, T0, "{name}");
        let data = &archive[d.data as usize..d.data as usize + content.len()];
        assert_eq!(data, *content, "{name}");
        assert_eq!(
            d.next,
            d.data + if h.has_data() { round_up(h.size) } else { 0 },
            "{name}"
        );
    }
    entries
}

fn long150() -> Vec<u8> {
    [b"d/".to_vec(), repeat(b'a', 146), b".txt".to_vec()].concat()
}

fn common_entries(with_hello: bool) -> Vec<Expect> {
    let mut v: Vec<Expect> = vec![
        (b"d".to_vec(), Kind::Dir, 0o755, 0, vec![], b""),
        (
            long150(),
            Kind::File,
            0o644,
            15,
            vec![],
            b"long name file\n",
        ),
        (b"d/hard".to_vec(), Kind::File, 0o644, 6, vec![], b"short\n"),
    ];
    if with_hello {
        v.push((
            "d/h\u{e9}llo.txt".as_bytes().to_vec(),
            Kind::File,
            0o644,
            8,
            vec![],
            b"bonjour\n",
        ));
    }
    v.push((
        b"d/link".to_vec(),
        Kind::Symlink,
        0o777,
        0,
        repeat(b'T', 150),
        b"",
    ));
    v.push((
        b"d/short.txt".to_vec(),
        Kind::HardLink,
        0o644,
        0,
        b"d/hard".to_vec(),
        b"",
    ));
    v
}

#[test]
fn fixture_gnu() {
    let entries = check(GNU_TAR, &common_entries(false));
    // The long name's entry starts at its 'L' header; the link's at its 'K' header.
    assert_eq!(
        (entries[1].start, entries[1].data, entries[1].next),
        (512, 2048, 2560)
    );
    assert_eq!((entries[3].start, entries[3].data), (3584, 5120));
    assert_eq!(
        classify(&GNU_TAR[512..1024]),
        BlockKind::Header {
            flag: b'L',
            size: 153
        }
    );
    assert_eq!(
        classify(&GNU_TAR[3584..4096]),
        BlockKind::Header {
            flag: b'K',
            size: 151
        }
    );
}

#[test]
fn fixture_pax() {
    let entries = check(PAX_TAR, &common_entries(true));
    assert_eq!(entries[1].start, 512);
    assert_eq!(entries[1].data, 2048);
    assert!(entries
        .iter()
        .all(|d| d.header.xattrs.is_empty() && d.header.mtime_nsec == 0));
}

#[test]
fn fixture_ustar_prefix() {
    let s60 = [b"u/".to_vec(), repeat(b's', 60)].concat();
    let file = [s60.clone(), b"/".to_vec(), repeat(b'f', 77)].concat();
    assert_eq!(file.len(), 140);
    check(
        USTAR_TAR,
        &[
            (b"u".to_vec(), Kind::Dir, 0o755, 0, vec![], b""),
            (s60, Kind::Dir, 0o755, 0, vec![], b""),
            (file, Kind::File, 0o644, 6, vec![], b"split\n"),
        ],
    );
    // It really is stored with the prefix field.
    assert_eq!(
        cstr(field(&USTAR_TAR[1024..], PREFIX)),
        [b"u/".to_vec(), repeat(b's', 60)].concat()
    );
}

#[test]
fn fixture_python() {
    let entries = check(
        PYTHON_TAR,
        &[
            (
                b"bad\xff.txt".to_vec(),
                Kind::File,
                0o644,
                14,
                vec![],
                b"invalid utf-8\n",
            ),
            (
                b"frac.txt".to_vec(),
                Kind::File,
                0o644,
                9,
                vec![],
                b"fraction\n",
            ),
            (
                b"xattr.txt".to_vec(),
                Kind::File,
                0o644,
                6,
                vec![],
                b"xattr\n",
            ),
        ],
    );
    assert_eq!(entries[0].header.mtime_nsec, 0);
    assert_eq!(entries[1].header.mtime_nsec, 250_000_000);
    assert_eq!(
        entries[2].header.xattrs,
        vec![(b"user.note".to_vec(), b"hi".to_vec())]
    );
    assert!(entries[..2].iter().all(|d| d.header.xattrs.is_empty()));
    assert_eq!((entries[1].start, entries[1].data), (2048, 3584));
}

#[test]
fn fixture_truncated_inside_long_name_data() {
    // gnu.tar: 'L' header at 512, its 153 bytes of data at 1024.
    let cut = &GNU_TAR[..1024 + 80];
    assert!(decode_at(cut, 0).unwrap().is_some());
    assert!(matches!(
        decode_at(cut, 512),
        Err(HeaderError::Truncated { offset: 512 })
    ));
    // pax.tar: 'x' header at 512, its 162 bytes of data at 1024.
    let cut = &PAX_TAR[..1024 + 100];
    assert!(matches!(
        decode_at(cut, 512),
        Err(HeaderError::Truncated { offset: 512 })
    ));
    // Cut inside the real header after the extension.
    assert!(matches!(
        decode_at(&GNU_TAR[..1536 + 100], 512),
        Err(HeaderError::Truncated { offset: 1536 })
    ));
}

#[test]
fn fixture_flipped_checksum_byte() {
    let mut bad = GNU_TAR.to_vec();
    bad[148 + 3] ^= 0x01; // in the first header's checksum field
    assert!(matches!(
        decode_at(&bad, 0),
        Err(HeaderError::Checksum { offset: 0 })
    ));
    // A flipped byte in the real header behind an 'L' header: reported at that header.
    let mut bad = GNU_TAR.to_vec();
    bad[1536 + 10] ^= 0x01;
    assert!(matches!(
        decode_at(&bad, 512),
        Err(HeaderError::Checksum { offset: 1536 })
    ));
    // And one in the 'L' header itself.
    let mut bad = GNU_TAR.to_vec();
    bad[512 + 1] ^= 0x01;
    assert!(matches!(
        decode_at(&bad, 512),
        Err(HeaderError::Checksum { offset: 512 })
    ));
}

#[test]
fn encoded_archive_decodes_entry_by_entry() {
    let mut entries = vec![hdr(b"top", Kind::Dir)];
    let mut f = hdr(&[b"top/".to_vec(), repeat(b'x', 250)].concat(), Kind::File);
    f.size = 700;
    f.xattrs = vec![(b"user.k".to_vec(), b"v".to_vec())];
    entries.push(f);
    let mut l = hdr(b"top/l", Kind::Symlink);
    l.link = repeat(b'y', 400);
    entries.push(l);
    let mut buf = Vec::new();
    for h in &entries {
        h.encode(&mut buf);
        buf.resize(
            buf.len()
                + if h.has_data() {
                    round_up(h.size) as usize
                } else {
                    0
                },
            0,
        );
    }
    buf.resize(buf.len() + 1024, 0);
    let got: Vec<Header> = decode_all(&buf).into_iter().map(|d| d.header).collect();
    assert_eq!(got, entries);
}
