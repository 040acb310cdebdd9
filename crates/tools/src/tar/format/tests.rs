//! Unit tests of the header encoding (exact bytes, round trips); the other test modules
//! share its helpers. The block layout here is written out by offset, independently of the
//! crate's, so that the tests check the bytes the format defines.

use super::encode::{extension, MAX_OCTAL_11, MAX_OCTAL_7};
use super::number::{cstr, parse_number, put_number, seal};
use super::pax::pax_record;
use super::*;

/// (offset, length) of each ustar field, in bytes.
pub(super) const NAME: (usize, usize) = (0, 100);
pub(super) const MODE: (usize, usize) = (100, 8);
pub(super) const UID: (usize, usize) = (108, 8);
pub(super) const GID: (usize, usize) = (116, 8);
pub(super) const SIZE: (usize, usize) = (124, 12);
pub(super) const MTIME: (usize, usize) = (136, 12);
pub(super) const CHKSUM: (usize, usize) = (148, 8);
pub(super) const TYPEFLAG: usize = 156;
pub(super) const LINKNAME: (usize, usize) = (157, 100);
pub(super) const UNAME: (usize, usize) = (265, 32);
pub(super) const GNAME: (usize, usize) = (297, 32);
pub(super) const DEVMAJOR: (usize, usize) = (329, 8);
pub(super) const DEVMINOR: (usize, usize) = (337, 8);
pub(super) const PREFIX: (usize, usize) = (345, 155);
/// POSIX ustar magic + version.
pub(super) const MAGIC_USTAR: &[u8; 8] = b"ustar\x0000";
/// Old GNU tar magic + version (no prefix field).
pub(super) const MAGIC_GNU: &[u8; 8] = b"ustar  \x00";
/// The old GNU sparse fields: 4 pairs in the header, `isextended`, the real size.
pub(super) const OLD_GNU_SPARSE: usize = 386;
pub(super) const OLD_GNU_ISEXTENDED: usize = 482;
pub(super) const OLD_GNU_REALSIZE: (usize, usize) = (483, 12);

pub(super) fn field(block: &[u8], (at, len): (usize, usize)) -> &[u8] {
    &block[at..at + len]
}

pub(super) fn field_mut(block: &mut [u8], (at, len): (usize, usize)) -> &mut [u8] {
    &mut block[at..at + len]
}

#[path = "fuzz_tests.rs"]
mod fuzz_tests;

pub(super) const T0: i64 = 1_600_000_000;

pub(super) fn hdr(path: &[u8], kind: Kind) -> Header {
    Header {
        path: path.to_vec(),
        kind,
        mode: 0o644,
        uid: 1000,
        gid: 100,
        uname: b"user".to_vec(),
        gname: b"group".to_vec(),
        size: 0,
        mtime: T0,
        mtime_nsec: 0,
        link: Vec::new(),
        dev_major: 0,
        dev_minor: 0,
        xattrs: Vec::new(),
        projid: Default::default(),
    }
}

pub(super) fn decode_at(buf: &[u8], offset: u64) -> Result<Option<Decoded>, HeaderError> {
    let mut read = |off: u64, len: usize| -> io::Result<Vec<u8>> {
        let start = (off as usize).min(buf.len());
        let end = (start + len).min(buf.len());
        Ok(buf[start..end].to_vec())
    };
    decode_entry(&mut read, offset)
}

pub(super) fn encode(h: &Header) -> Vec<u8> {
    let mut out = vec![0xAA; 3]; // encode appends: existing bytes stay untouched
    let n = h.encode(&mut out);
    assert_eq!(h.encoded_len(), n, "the length without encoding");
    assert_eq!(&out[..3], &[0xAA; 3]);
    out.drain(..3);
    assert_eq!(n, out.len());
    assert_eq!(n % 512, 0);
    out
}

/// Encodes, decodes, checks the decoded header and offsets; returns the encoded bytes.
pub(super) fn round_trip(h: &Header) -> Vec<u8> {
    let buf = encode(h);
    let d = decode_at(&buf, 0).unwrap().unwrap();
    assert_eq!(d.header, *h);
    assert_eq!(d.start, 0);
    assert_eq!(d.data, buf.len() as u64);
    let data_len = if h.has_data() { round_up(h.size) } else { 0 };
    assert_eq!(d.next, d.data + data_len);
    buf
}

/// The pax records in front of an encoded entry (empty without a pax header).
pub(super) fn records(buf: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    if buf[TYPEFLAG] != b'x' {
        return Vec::new();
    }
    let size = parse_number(field(buf, SIZE)).unwrap() as usize;
    parse_pax(&buf[512..512 + size], 0).unwrap()
}

pub(super) fn keys(buf: &[u8]) -> Vec<String> {
    records(buf)
        .into_iter()
        .map(|(k, _)| String::from_utf8(k).unwrap())
        .collect()
}

pub(super) fn record(buf: &[u8], key: &str) -> Option<Vec<u8>> {
    records(buf)
        .into_iter()
        .find(|(k, _)| k == key.as_bytes())
        .map(|(_, v)| v)
}

/// The mark of mfu-rs's first entry: a pax `comment` record that every reader ignores
/// (the entry decodes as without it), found by [`mfu_marked`] in the archive's first
/// bytes; an unmarked entry, one cut short, or a damaged one is not marked.
#[test]
pub(super) fn the_first_entry_carries_the_mark_and_decodes_as_without_it() {
    for (path, mtime_nsec) in [(&b"a"[..], 0), (&b"dir/with a long name"[..], 5)] {
        let h = Header {
            path: path.to_vec(),
            kind: Kind::File,
            mode: 0o644,
            uid: 1,
            gid: 1,
            uname: Vec::new(),
            gname: Vec::new(),
            size: 3,
            mtime: 1_700_000_000,
            mtime_nsec,
            link: Vec::new(),
            dev_major: 0,
            dev_minor: 0,
            xattrs: Vec::new(),
            projid: Default::default(),
        };
        let plain = round_trip(&h);
        assert!(!mfu_marked(&plain));
        let mut marked = Vec::new();
        h.encode_marked(&mut marked);
        assert_eq!(record(&marked, "comment").unwrap(), MFU_MARK);
        let d = decode_at(&marked, 0).unwrap().unwrap();
        assert_eq!(d.header, h);
        assert_eq!(d.data, marked.len() as u64);
        assert!(mfu_marked(&marked[..MARK_HEAD.min(marked.len())]));
        assert!(!mfu_marked(&marked[..560]));
        let mut flipped = marked.clone();
        flipped[530] ^= 1;
        assert!(!mfu_marked(&flipped));
    }
}

/// The last block of an encoded entry: its ustar header.
pub(super) fn ustar(buf: &[u8]) -> &[u8] {
    &buf[buf.len() - 512..]
}

pub(super) fn repeat(b: u8, n: usize) -> Vec<u8> {
    vec![b; n]
}

/// A path of `prefix_len` bytes, '/', `name_len` bytes (no other '/').
pub(super) fn split_path(prefix_len: usize, name_len: usize) -> Vec<u8> {
    let mut p = repeat(b'p', prefix_len);
    p.push(b'/');
    p.extend(repeat(b'n', name_len));
    p
}

pub(super) fn reseal(block: &mut [u8]) {
    let b: &mut [u8; 512] = (&mut block[..512]).try_into().unwrap();
    seal(b);
}

// ---- encoding: exact bytes ---------------------------------------------------------

#[test]
pub(super) fn exact_bytes_of_a_short_file() {
    let mut h = hdr(b"hello.txt", Kind::File);
    h.size = 6;
    let mut out = Vec::new();
    assert_eq!(h.encode(&mut out), 512);
    assert_eq!(out.len(), 512);
    let b = &out[..];
    assert_eq!(&b[..9], b"hello.txt");
    assert!(b[9..100].iter().all(|&x| x == 0));
    assert_eq!(field(b, MODE), b"0000644\0");
    assert_eq!(field(b, UID), b"0001750\0");
    assert_eq!(field(b, GID), b"0000144\0");
    assert_eq!(field(b, SIZE), b"00000000006\0");
    assert_eq!(field(b, MTIME), b"13727410000\0");
    assert_eq!(b[156], b'0');
    assert!(field(b, LINKNAME).iter().all(|&x| x == 0));
    assert_eq!(&b[257..263], b"ustar\0");
    assert_eq!(&b[263..265], b"00");
    assert_eq!(&field(b, UNAME)[..5], b"user\0");
    assert_eq!(&field(b, GNAME)[..6], b"group\0");
    assert_eq!(field(b, DEVMAJOR), b"0000000\0");
    assert_eq!(field(b, DEVMINOR), b"0000000\0");
    assert!(field(b, PREFIX).iter().all(|&x| x == 0));
    assert!(b[500..].iter().all(|&x| x == 0));
    // Checksum: 6 octal digits, NUL, space; the sum of all bytes with the field as spaces.
    let ck = field(b, CHKSUM);
    assert_eq!(ck[6], 0);
    assert_eq!(ck[7], b' ');
    assert!(ck[..6].iter().all(|c| (b'0'..=b'7').contains(c)));
    let expect: u32 = b[..148]
        .iter()
        .chain(&[b' '; 8])
        .chain(&b[156..])
        .map(|&x| u32::from(x))
        .sum();
    let got = u32::from_str_radix(std::str::from_utf8(&ck[..6]).unwrap(), 8).unwrap();
    assert_eq!(got, expect);
}

#[test]
pub(super) fn mode_keeps_only_permission_bits() {
    let mut h = hdr(b"f", Kind::File);
    h.mode = 0o104755; // type bits + setuid
    let buf = encode(&h);
    assert_eq!(field(&buf, MODE), b"0004755\0");
    assert_eq!(decode_at(&buf, 0).unwrap().unwrap().header.mode, 0o4755);
}

#[test]
pub(super) fn type_flags() {
    let cases = [
        (Kind::File, b'0'),
        (Kind::HardLink, b'1'),
        (Kind::Symlink, b'2'),
        (Kind::Char, b'3'),
        (Kind::Block, b'4'),
        (Kind::Dir, b'5'),
        (Kind::Fifo, b'6'),
        (Kind::Other(b'Z'), b'Z'),
    ];
    for (kind, flag) in cases {
        let mut h = hdr(b"x/y", kind);
        if matches!(kind, Kind::HardLink | Kind::Symlink) {
            h.link = b"t".to_vec();
        }
        let buf = round_trip(&h);
        assert_eq!(buf[156], flag, "{kind:?}");
    }
}

// ---- encoding: round trips ---------------------------------------------------------

#[test]
pub(super) fn round_trip_short_file_and_its_data() {
    let mut h = hdr(b"dir/hello.txt", Kind::File);
    h.size = 6;
    let mut buf = round_trip(&h);
    buf.extend_from_slice(b"hello\n");
    buf.resize(buf.len() + 506, 0);
    let mut second = hdr(b"second", Kind::File);
    second.size = 600;
    second.encode(&mut buf);
    let d = decode_at(&buf, 0).unwrap().unwrap();
    assert_eq!(&buf[d.data as usize..d.data as usize + 6], b"hello\n");
    assert_eq!(d.next, 1024);
    let d2 = decode_at(&buf, d.next).unwrap().unwrap();
    assert_eq!(d2.header, second);
    assert_eq!((d2.start, d2.data, d2.next), (1024, 1536, 1536 + 1024));
}

#[test]
pub(super) fn round_trip_dir_stores_a_trailing_slash() {
    let mut h = hdr(b"some/dir", Kind::Dir);
    h.mode = 0o755;
    let buf = round_trip(&h);
    assert_eq!(buf.len(), 512);
    assert_eq!(cstr(field(&buf, NAME)), b"some/dir/");
    assert_eq!(buf[156], b'5');
    // A 100-byte dir path no longer fits the name field with its slash: it is split.
    let h = hdr(&split_path(49, 50), Kind::Dir);
    let buf = round_trip(&h);
    assert_eq!(buf.len(), 512);
    assert_eq!(
        cstr(field(&buf, NAME)),
        [repeat(b'n', 50), b"/".to_vec()].concat()
    );
    // Same without a split point: pax path, with the slash.
    let h = hdr(&repeat(b'd', 100), Kind::Dir);
    let buf = round_trip(&h);
    assert_eq!(
        record(&buf, "path").unwrap(),
        [repeat(b'd', 100), b"/".to_vec()].concat()
    );
    assert_eq!(field(&buf[1024..], NAME), &repeat(b'd', 100)[..]);
}

#[test]
pub(super) fn root_and_dot_dirs_keep_a_name() {
    for (path, stored) in [
        (&b"."[..], &b"./"[..]),
        (b"/", b"/"),
        (b"/abs/dir", b"/abs/dir/"),
    ] {
        let h = hdr(path, Kind::Dir);
        let buf = round_trip(&h);
        assert_eq!(cstr(field(&buf, NAME)), stored);
    }
}

#[test]
pub(super) fn round_trip_links_short_and_long() {
    for kind in [Kind::Symlink, Kind::HardLink] {
        let mut h = hdr(b"the/link", kind);
        h.link = b"../target/file".to_vec();
        let buf = round_trip(&h);
        assert_eq!(buf.len(), 512);
        assert_eq!(cstr(field(&buf, LINKNAME)), b"../target/file");

        let long: Vec<u8> = (0..300).map(|i| b'a' + (i % 26) as u8).collect();
        h.link = long.clone();
        let buf = round_trip(&h);
        assert_eq!(keys(&buf), ["linkpath"]);
        assert_eq!(record(&buf, "linkpath").unwrap(), long);
        assert_eq!(field(ustar(&buf), LINKNAME), &long[..100]);
        // A 100-byte link still fits ustar.
        h.link = repeat(b'z', 100);
        assert_eq!(round_trip(&h).len(), 512);
    }
}

#[test]
pub(super) fn round_trip_path_lengths() {
    // (path, kind, needs pax)
    let mut cases: Vec<(Vec<u8>, Kind, bool)> = Vec::new();
    for len in [100, 101, 155, 156, 254, 255, 256, 300] {
        cases.push((repeat(b'q', len), Kind::File, len > 100));
    }
    // With a '/' placed to allow the split (prefix <= 155, name <= 100).
    for (p, n) in [
        (49, 50),
        (50, 50),
        (100, 54),
        (100, 55),
        (153, 100),
        (154, 100),
        (155, 100),
    ] {
        cases.push((split_path(p, n), Kind::File, false));
    }
    // 300 bytes: no split can fit (prefix 199 or name 199).
    cases.push((split_path(199, 100), Kind::File, true));
    cases.push((split_path(100, 199), Kind::File, true));
    // 257 bytes: prefix 156 is one too many.
    cases.push((split_path(156, 100), Kind::File, true));
    // The only '/' would leave an empty name (a dir's stored slash) or an empty prefix.
    cases.push((repeat(b'a', 120), Kind::Dir, true));
    cases.push((
        [b"/".to_vec(), repeat(b'a', 120)].concat(),
        Kind::File,
        true,
    ));
    for (path, kind, pax) in cases {
        let h = hdr(&path, kind);
        let path = h.stored_path().into_owned();
        let buf = round_trip(&h);
        let what = format!("len {} pax {pax}", path.len());
        if pax {
            assert_eq!(buf.len(), 1536, "{what}");
            assert_eq!(keys(&buf), ["path"], "{what}");
            assert_eq!(record(&buf, "path").unwrap(), path, "{what}");
            assert_eq!(field(ustar(&buf), NAME), &path[..100], "{what}");
            assert!(field(ustar(&buf), PREFIX).iter().all(|&b| b == 0), "{what}");
        } else {
            assert_eq!(buf.len(), 512, "{what}");
            let name = cstr(field(&buf, NAME));
            let prefix = cstr(field(&buf, PREFIX));
            if path.len() <= 100 {
                assert_eq!(name, &path[..], "{what}");
                assert!(prefix.is_empty(), "{what}");
            } else {
                assert_eq!([prefix, b"/", name].concat(), path, "{what}");
                assert!(
                    prefix.len() <= 155 && !name.is_empty() && name.len() <= 100,
                    "{what}"
                );
            }
        }
    }
}

#[test]
pub(super) fn split_uses_a_slash_that_fits() {
    // Several slashes: the split must put at most 100 bytes in the name.
    let mut path = b"a/".to_vec();
    path.extend(repeat(b'b', 60));
    path.push(b'/');
    path.extend(repeat(b'c', 60));
    path.push(b'/');
    path.extend(repeat(b'd', 30));
    let buf = round_trip(&hdr(&path, Kind::File));
    assert_eq!(buf.len(), 512);
    let name = cstr(field(&buf, NAME));
    assert_eq!(
        name,
        [repeat(b'c', 60), b"/".to_vec(), repeat(b'd', 30)].concat()
    );
    assert_eq!(
        cstr(field(&buf, PREFIX)),
        [b"a/".to_vec(), repeat(b'b', 60)].concat()
    );
}

#[test]
pub(super) fn round_trip_non_ascii_paths() {
    let utf8 = "dir/h\u{e9}llo-\u{65e5}\u{672c}.txt".as_bytes().to_vec();
    let buf = round_trip(&hdr(&utf8, Kind::File));
    assert_eq!(keys(&buf), ["path"]);
    assert_eq!(record(&buf, "path").unwrap(), utf8);
    assert_eq!(cstr(field(ustar(&buf), NAME)), &utf8[..]);

    let binary = b"dir/bad\xff\xfe.txt".to_vec();
    let buf = round_trip(&hdr(&binary, Kind::File));
    assert_eq!(keys(&buf), ["hdrcharset", "path"]);
    assert_eq!(record(&buf, "hdrcharset").unwrap(), b"BINARY");
    assert_eq!(record(&buf, "path").unwrap(), binary);
    // The pax header's own name: basename with high bytes as '_'.
    assert_eq!(cstr(field(&buf, NAME)), b"PaxHeaders/bad__.txt");

    // A non-UTF-8 link target also asks for hdrcharset; a UTF-8 path alongside does not.
    let mut h = hdr(&utf8, Kind::Symlink);
    h.link = b"t\x80".to_vec();
    let buf = round_trip(&h);
    assert_eq!(keys(&buf), ["hdrcharset", "path", "linkpath"]);
}

#[test]
pub(super) fn round_trip_huge_sizes() {
    for size in [8u64 << 30, 20u64 << 40, MAX_OCTAL_11 + 1, 1 << 62] {
        let mut h = hdr(b"big", Kind::File);
        h.size = size;
        let buf = round_trip(&h);
        assert_eq!(keys(&buf), ["size"]);
        assert_eq!(record(&buf, "size").unwrap(), size.to_string().as_bytes());
        let f = field(ustar(&buf), SIZE);
        assert_eq!(f[0], 0x80);
        assert_eq!(&f[4..], &size.to_be_bytes());
        // The ustar block alone (base-256 field) gives the same size.
        let alone = decode_at(ustar(&buf), 0).unwrap().unwrap();
        assert_eq!(alone.header.size, size);
        assert_eq!(alone.next, 512 + round_up(size));
    }
    // A size no archive can hold is refused, not wrapped around.
    let mut h = hdr(b"big", Kind::File);
    h.size = u64::MAX;
    let buf = encode(&h);
    assert_eq!(pax_size(&buf[512..1024]), Some(u64::MAX));
    assert!(matches!(
        decode_at(&buf, 0),
        Err(HeaderError::Invalid { offset: 1024, .. })
    ));
    // The largest octal size needs no pax.
    let mut h = hdr(b"big", Kind::File);
    h.size = MAX_OCTAL_11;
    let buf = round_trip(&h);
    assert_eq!(buf.len(), 512);
    assert_eq!(field(&buf, SIZE), b"77777777777\0");
}

#[test]
pub(super) fn round_trip_big_ids() {
    let mut h = hdr(b"f", Kind::File);
    h.uid = 3_000_000;
    h.gid = 4_000_000;
    let buf = round_trip(&h);
    assert_eq!(keys(&buf), ["uid", "gid"]);
    assert_eq!(record(&buf, "uid").unwrap(), b"3000000");
    assert_eq!(
        field(ustar(&buf), UID),
        &[0x80, 0, 0, 0, 0, 0x2d, 0xc6, 0xc0]
    );
    let alone = decode_at(ustar(&buf), 0).unwrap().unwrap();
    assert_eq!((alone.header.uid, alone.header.gid), (3_000_000, 4_000_000));
    // The pax header block carries 0 for ids that do not fit octal.
    assert_eq!(field(&buf, UID), b"0000000\0");

    h.uid = MAX_OCTAL_7;
    h.gid = 1 << 60; // fits neither octal nor 7 base-256 bytes: pax only
    let buf = round_trip(&h);
    assert_eq!(keys(&buf), ["gid"]);
    assert_eq!(field(ustar(&buf), UID), b"7777777\0");
}

#[test]
pub(super) fn round_trip_negative_and_fractional_mtimes() {
    let cases: [(i64, u32, &str); 5] = [
        (-2, 500_000_000, "-1.500000000"),
        (-1, 0, "-1"),
        (-1, 999_999_999, "-0.000000001"),
        (T0, 123_456_789, "1600000000.123456789"),
        (MAX_OCTAL_11 as i64 + 1, 0, "8589934592"),
    ];
    for (sec, nsec, text) in cases {
        let mut h = hdr(b"t", Kind::File);
        h.mtime = sec;
        h.mtime_nsec = nsec;
        let buf = round_trip(&h);
        assert_eq!(keys(&buf), ["mtime"], "{text}");
        assert_eq!(record(&buf, "mtime").unwrap(), text.as_bytes());
        let alone = decode_at(ustar(&buf), 0).unwrap().unwrap();
        assert_eq!(alone.header.mtime, sec, "{text}");
        assert_eq!(alone.header.mtime_nsec, 0);
    }
    let mut h = hdr(b"t", Kind::File);
    h.mtime = -2;
    h.mtime_nsec = 500_000_000;
    let buf = encode(&h);
    assert_eq!(
        field(ustar(&buf), MTIME),
        &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]
    );
    assert_eq!(
        field(&buf, MTIME),
        b"00000000000\0",
        "pax header mtime clamps to 0"
    );
    h.mtime_nsec = 0;
    h.mtime = T0;
    h.mtime_nsec = 123_456_789;
    let buf = encode(&h);
    assert_eq!(field(ustar(&buf), MTIME), b"13727410000\0");
    assert_eq!(field(&buf, MTIME), b"13727410000\0");
}

#[test]
pub(super) fn round_trip_long_and_non_ascii_owner_names() {
    let mut h = hdr(b"f", Kind::File);
    h.uname = (0..40).map(|i| b'a' + i % 26).collect();
    h.gname = "gr\u{fc}ppe".as_bytes().to_vec();
    let buf = round_trip(&h);
    assert_eq!(keys(&buf), ["uname", "gname"]);
    assert_eq!(field(ustar(&buf), UNAME), &h.uname[..32]);
    assert_eq!(cstr(field(ustar(&buf), GNAME)), &h.gname[..]);
    // Exactly 32 bytes still fits.
    h.uname = repeat(b'u', 32);
    h.gname = b"g".to_vec();
    assert_eq!(round_trip(&h).len(), 512);
}

#[test]
pub(super) fn round_trip_xattrs_with_binary_values() {
    let mut h = hdr(b"f", Kind::File);
    h.size = 3;
    h.xattrs = vec![
        (b"user.plain".to_vec(), b"value".to_vec()),
        (
            b"user.bin".to_vec(),
            vec![0, b'\n', b'=', 0xff, b' ', b'\n', 0],
        ),
        (
            b"security.selinux".to_vec(),
            b"system_u:object_r:tmp_t:s0\0".to_vec(),
        ),
        (b"user.empty".to_vec(), Vec::new()),
    ];
    let buf = round_trip(&h);
    assert_eq!(
        keys(&buf),
        [
            "SCHILY.xattr.user.plain",
            "SCHILY.xattr.user.bin",
            "SCHILY.xattr.security.selinux",
            "SCHILY.xattr.user.empty"
        ]
    );
    // Binary attribute values do not make the header BINARY.
    assert!(record(&buf, "hdrcharset").is_none());
}

#[test]
pub(super) fn pax_records_come_in_the_documented_order() {
    let mut h = hdr(
        &[repeat(b'x', 200), b"\xff".to_vec()].concat(),
        Kind::Symlink,
    );
    h.link = repeat(b'l', 101);
    h.size = 1 << 40;
    h.uid = 1 << 30;
    h.gid = 1 << 31;
    h.uname = repeat(b'u', 33);
    h.gname = repeat(b'g', 33);
    h.mtime = -5;
    h.xattrs = vec![(b"user.a".to_vec(), b"1".to_vec())];
    let buf = round_trip(&h);
    assert_eq!(
        keys(&buf),
        [
            "hdrcharset",
            "path",
            "linkpath",
            "size",
            "uid",
            "gid",
            "uname",
            "gname",
            "mtime",
            "SCHILY.xattr.user.a"
        ]
    );
}

#[test]
pub(super) fn round_trip_devices() {
    for (kind, major, minor) in [
        (Kind::Char, 1, 3),
        (Kind::Block, 259, 65_536),
        (Kind::Block, 5_000_000, u32::MAX),
    ] {
        let mut h = hdr(b"dev/node", kind);
        h.dev_major = major;
        h.dev_minor = minor;
        let buf = round_trip(&h);
        assert_eq!(buf.len(), 512, "no pax record exists for devices");
    }
    let mut h = hdr(b"dev/null", Kind::Char);
    h.dev_major = 1;
    h.dev_minor = 3;
    let buf = encode(&h);
    assert_eq!(field(&buf, DEVMAJOR), b"0000001\0");
    assert_eq!(field(&buf, DEVMINOR), b"0000003\0");
}

#[test]
pub(super) fn pax_header_block_fields() {
    let mut h = hdr("some/dir/fil\u{e9}".as_bytes(), Kind::File);
    h.uid = 42;
    h.gid = 43;
    let buf = encode(&h);
    assert_eq!(buf.len(), 1536);
    assert_eq!(
        classify(&buf[..512]),
        BlockKind::Header {
            flag: b'x',
            size: 23
        }
    );
    assert_eq!(cstr(field(&buf, NAME)), b"PaxHeaders/fil__");
    assert_eq!(field(&buf, MODE), b"0000644\0");
    assert_eq!(field(&buf, UID), b"0000052\0");
    assert_eq!(field(&buf, GID), b"0000053\0");
    assert_eq!(field(&buf, MTIME), b"13727410000\0");
    assert_eq!(&buf[257..265], b"ustar\x0000");
    assert_eq!(&buf[512..535], "23 path=some/dir/fil\u{e9}\n".as_bytes());
    assert!(buf[535..1024].iter().all(|&b| b == 0));
    // A long basename is cut to 100 bytes.
    let long = hdr(&[b"d/".to_vec(), repeat(b'n', 150)].concat(), Kind::File);
    let buf = encode(&long);
    assert_eq!(
        field(&buf, NAME),
        [b"PaxHeaders/".to_vec(), repeat(b'n', 89)].concat()
    );
}

#[test]
pub(super) fn has_data_follows_the_flag() {
    for flag in [b'0', 0, b'7', b'S', b'D', b'Z'] {
        assert!(flag_has_data(flag), "{flag}");
    }
    for flag in b'1'..=b'6' {
        assert!(!flag_has_data(flag), "{flag}");
    }
    assert!(hdr(b"f", Kind::File).has_data());
    assert!(hdr(b"f", Kind::Other(b'S')).has_data());
    for kind in [
        Kind::HardLink,
        Kind::Symlink,
        Kind::Char,
        Kind::Block,
        Kind::Dir,
        Kind::Fifo,
    ] {
        assert!(!hdr(b"f", kind).has_data(), "{kind:?}");
    }
}
