//! Unit tests of pax records, numbers, checksums and block classification.

use super::number::{checksum_ok, checksums, parse_number, put_number, put_octal, seal};
use super::pax::{decimal_digits, parse_pax_time, pax_record, pax_time, put_decimal, NANOS};
use super::tests::*;
use super::*;

// ---- pax records ---------------------------------------------------------------------

#[test]
fn pax_record_lengths_at_carry_boundaries() {
    let rec = |key: &[u8], value: &[u8]| {
        let mut out = Vec::new();
        pax_record(&mut out, key, value);
        out
    };
    // 1 + 4 + 3 = 8 bytes of body: "9 " makes 9 (one digit).
    assert_eq!(rec(b"a", b"bbbb"), b"9 a=bbbb\n");
    // 9 bytes of body: one digit would make 10, which needs two digits: 11.
    assert_eq!(rec(b"a", b"bbbbb"), b"11 a=bbbbb\n");
    // 97 bytes of body + 2 digits = 99.
    let v94 = repeat(b'v', 93);
    assert_eq!(rec(b"a", &v94).len(), 99);
    assert!(rec(b"a", &v94).starts_with(b"99 a="));
    // 98 bytes: 2 digits would make 100: 3 digits, 101.
    let v95 = repeat(b'v', 94);
    assert_eq!(rec(b"a", &v95).len(), 101);
    assert!(rec(b"a", &v95).starts_with(b"101 a="));
    // 996 + 3 = 999; 997 -> 1001.
    assert!(rec(b"a", &repeat(b'v', 992)).starts_with(b"999 a="));
    assert!(rec(b"a", &repeat(b'v', 993)).starts_with(b"1001 a="));
    // Every length up to 1100 parses back and declares its own length.
    for n in 0..1100 {
        let value = repeat(b'=', n);
        let r = rec(b"k", &value);
        let len: usize = std::str::from_utf8(&r[..r.iter().position(|&b| b == b' ').unwrap()])
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(len, r.len(), "value {n}");
        assert_eq!(parse_pax(&r, 0).unwrap(), vec![(b"k".to_vec(), value)]);
    }
}

#[test]
fn xattr_values_at_carry_boundaries_round_trip() {
    // "LEN SCHILY.xattr.user.k=VALUE\n": body 23 + value length.
    for n in [0, 76, 77, 78, 975, 976, 977] {
        let mut h = hdr(b"f", Kind::File);
        h.xattrs = vec![(b"user.k".to_vec(), repeat(b'\n', n))];
        let buf = round_trip(&h);
        let size = parse_number(field(&buf, SIZE)).unwrap() as usize;
        let digits = buf[512..].iter().position(|&b| b == b' ').unwrap();
        assert_eq!(
            std::str::from_utf8(&buf[512..512 + digits]).unwrap(),
            size.to_string()
        );
    }
}

/// A project ID travels as `MFURS.projid` (and a directory's `PROJINHERIT` as
/// `MFURS.projinherit=1`) and comes back; project 0 needs no record, so no pax header.
#[test]
fn project_ids_round_trip_as_vendor_records() {
    let plain = hdr(b"f", Kind::File);
    assert_eq!(encode(&plain).len(), 512, "no pax header for project 0");
    for (kind, id, inherit) in [(Kind::File, 42, false), (Kind::Dir, u32::MAX, true)] {
        let mut h = hdr(b"d", kind);
        h.projid = ProjectId { id, inherit };
        let buf = round_trip(&h);
        let text = String::from_utf8_lossy(&buf);
        assert!(text.contains(&format!(" MFURS.projid={id}\n")), "{text}");
        assert_eq!(text.contains(" MFURS.projinherit=1\n"), inherit);
    }
    // Out of range is a damaged header, as any bad number is.
    let mut records = Vec::new();
    pax_record(&mut records, PROJID_KEY, b"4294967296");
    let mut ext = super::pax::Extensions::default();
    assert!(ext
        .apply_pax(super::pax::parse_pax(&records, 0).unwrap(), 0)
        .is_err());
}

#[test]
fn parse_pax_records() {
    let data = b"30 mtime=1600000000.123456789\n18 path=a=b\nc d\0e\n21 SCHILY.xattr.u.x=\n\0\0\0";
    let recs = parse_pax(data, 7).unwrap();
    assert_eq!(
        recs,
        vec![
            (b"mtime".to_vec(), b"1600000000.123456789".to_vec()),
            (b"path".to_vec(), b"a=b\nc d\0e".to_vec()),
            (b"SCHILY.xattr.u.x".to_vec(), b"".to_vec()),
        ]
    );
    assert!(parse_pax(b"", 0).unwrap().is_empty());
}

#[test]
fn parse_pax_rejects_malformed_records() {
    let bad: [&[u8]; 9] = [
        b"12 path=abc",        // beyond the data
        b"11 path=abc\n",      // length 11 but 12 bytes: ends on 'c' + rest garbage
        b"13 path=abc\n",      // beyond
        b"path=abc\n",         // no length
        b"x2 path=abc\n",      // non-digit length
        b"12 pathabcd\n",      // no '='
        b"9 =abcde\n",         // empty key
        b"0 \n",               // zero length
        b"11 path=ab\n12 p=x", // second record broken
    ];
    for data in bad {
        match parse_pax(data, 4242) {
            Err(HeaderError::Invalid { offset: 4242, .. }) => {}
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(data)),
        }
    }
}

#[test]
fn pax_size_finds_the_size_record() {
    assert_eq!(pax_size(b"19 size=8589934592\n"), Some(8_589_934_592));
    assert_eq!(pax_size(b"11 path=ab\n9 size=7\n"), Some(7));
    assert_eq!(pax_size(b"11 path=ab\n"), None);
    assert_eq!(pax_size(b"9 size=x\n"), None);
    assert_eq!(pax_size(b"99 size=7\n"), None);
}

#[test]
fn pax_times_parse() {
    assert_eq!(parse_pax_time(b"1600000000.25"), Some((T0, 250_000_000)));
    assert_eq!(parse_pax_time(b"1600000000"), Some((T0, 0)));
    assert_eq!(parse_pax_time(b"-1.5"), Some((-2, 500_000_000)));
    assert_eq!(parse_pax_time(b"-0.5"), Some((-1, 500_000_000)));
    assert_eq!(parse_pax_time(b"-7"), Some((-7, 0)));
    assert_eq!(parse_pax_time(b"1.1234567899"), Some((1, 123_456_789)));
    assert_eq!(parse_pax_time(b"1."), Some((1, 0)));
    for bad in [
        &b""[..],
        b"-",
        b".5",
        b"1.2.3",
        b"1e9",
        b"+1",
        b"99999999999999999999",
    ] {
        assert_eq!(
            parse_pax_time(bad),
            None,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    for (sec, nsec) in [
        (-2i64, 500_000_000u32),
        (0, 1),
        (-1, 1),
        (i64::MAX, 999_999_999),
        (i64::MIN, 0),
    ] {
        assert_eq!(parse_pax_time(&pax_time(sec, nsec)), Some((sec, nsec)));
    }
}

#[test]
fn hand_made_numbers_match_the_formatting_machinery() {
    let reference_time = |sec: i64, nsec: u32| {
        let total = i128::from(sec) * NANOS + i128::from(nsec);
        let sign = if total < 0 { "-" } else { "" };
        let abs = total.unsigned_abs();
        let (whole, frac) = (abs / NANOS as u128, abs % NANOS as u128);
        if frac == 0 {
            format!("{sign}{whole}")
        } else {
            format!("{sign}{whole}.{frac:09}")
        }
    };
    let values = [
        0u64,
        1,
        7,
        8,
        9,
        10,
        99,
        100,
        0o7777777,
        0o10000000,
        0o77777777777,
    ]
    .into_iter()
    .chain([1 << 33, 1 << 36, u64::MAX, 123_456_789_012]);
    for v in values {
        let mut out = Vec::new();
        put_decimal(&mut out, v);
        assert_eq!(out, v.to_string().as_bytes());
        assert_eq!(decimal_digits(v), v.to_string().len());
        for width in [8usize, 12] {
            let digits = width - 1;
            let text = format!("{v:0digits$o}");
            let mut field = vec![0xAAu8; width];
            if text.len() > digits {
                assert!(!put_octal(&mut field, v), "{v} in {width}");
                assert_eq!(field, vec![0xAA; width], "untouched");
            } else {
                assert!(put_octal(&mut field, v));
                assert_eq!(&field[..digits], text.as_bytes());
                assert_eq!(field[digits], 0);
            }
        }
    }
    for (sec, nsec) in [
        (0i64, 0u32),
        (1_700_000_000, 5),
        (1_700_000_000, 999_999_999),
        (1_700_000_000, 100_000_000),
        (-2, 500_000_000),
        (-1, 0),
        (i64::MAX, 999_999_999),
        (i64::MIN, 0),
        (i64::MIN, 1),
    ] {
        assert_eq!(
            pax_time(sec, nsec),
            reference_time(sec, nsec).as_bytes(),
            "{sec} {nsec}"
        );
    }
    // The block sums against the byte-by-byte definition.
    let naive = |block: &[u8]| {
        let (at, len) = CHKSUM;
        let mut sums = (0i64, 0i64);
        for (i, &b) in block.iter().enumerate() {
            let b = if (at..at + len).contains(&i) { b' ' } else { b };
            sums.0 += i64::from(b);
            sums.1 += i64::from(b as i8);
        }
        sums
    };
    let mut block = [0u8; BLOCK_USIZE];
    for (i, b) in block.iter_mut().enumerate() {
        *b = (i * 37 % 256) as u8;
    }
    assert_eq!(checksums(&block), naive(&block));
    let mut block = [0xffu8; BLOCK_USIZE];
    assert_eq!(checksums(&block), naive(&block));
    seal(&mut block);
    let (sum, _) = naive(&block);
    assert_eq!(field(&block, CHKSUM), format!("{sum:06o}\0 ").as_bytes());
}

// ---- numbers and checksums -------------------------------------------------------------

#[test]
fn numbers_parse_octal_and_base256() {
    assert_eq!(parse_number(b"0000644\0"), Some(0o644));
    assert_eq!(parse_number(b"   644 \0"), Some(0o644));
    assert_eq!(parse_number(b"00000644"), Some(0o644));
    assert_eq!(parse_number(b"\0\0\0\0\0\0\0\0"), Some(0));
    // GNU tar skips one leading NUL, then white space: a second NUL ends the number, so
    // these read 0 (as GNU tar and bsdtar read them), not the digits after the NULs.
    assert_eq!(parse_number(b"\0\0\x00644 "), Some(0));
    assert_eq!(parse_number(b"\0\0\0\0\0\0\0 0016"), Some(0));
    assert_eq!(parse_number(b"\0 0000016\0"), Some(0o16));
    assert_eq!(parse_number(b"\t 644\n\0\0\0"), Some(0o644));
    // Nothing but blanks is an error (GNU: "Blanks in header where numeric value expected").
    assert_eq!(parse_number(b"        "), None);
    assert_eq!(parse_number(b"\0       "), None);
    // Base-256 starts with 0x80 or 0xff only; another high byte is not a number.
    assert_eq!(parse_number(&[0x81, 0, 0, 0, 0, 0, 0, 1]), None);
    assert_eq!(parse_number(&[0xc0, 0, 0, 0, 0, 0, 0, 1]), None);
    assert_eq!(parse_number(b"0000648\0"), None);
    assert_eq!(parse_number(b"00 0x64\0"), Some(0));
    assert_eq!(parse_number(b"abc\0\0\0\0\0"), None);
    assert_eq!(parse_number(&[0x80, 0, 0, 0, 0, 0, 1, 0]), Some(256));
    assert_eq!(parse_number(&[0xff; 12]), Some(-1));
    assert_eq!(
        parse_number(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]),
        Some(-2)
    );
    let mut f = [0u8; 12];
    for v in [
        0i128,
        1,
        0o77777777777,
        0o77777777777 + 1,
        -1,
        -(1 << 40),
        i128::from(i64::MIN),
        i128::from(u64::MAX),
    ] {
        put_number(&mut f, v);
        assert_eq!(parse_number(&f), Some(v), "{v}");
    }
}

#[test]
fn classify_blocks() {
    assert_eq!(classify(&[0u8; 512]), BlockKind::Zero);
    let mut h = hdr(b"f", Kind::File);
    h.size = 12345;
    let buf = encode(&h);
    assert_eq!(
        classify(&buf),
        BlockKind::Header {
            flag: b'0',
            size: 12345
        }
    );
    assert_eq!(classify(&buf[..511]), BlockKind::NotHeader);
    let dir = encode(&hdr(b"d", Kind::Dir));
    assert_eq!(
        classify(&dir),
        BlockKind::Header {
            flag: b'5',
            size: 0
        }
    );
    // Pseudo-random blocks (xorshift) are not headers.
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..50 {
        let block: Vec<u8> = (0..512)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect();
        assert_eq!(classify(&block), BlockKind::NotHeader);
    }
    // One flipped byte anywhere breaks the checksum.
    for at in [0, 100, 124, 148, 153, 156, 300, 511] {
        let mut bad = buf.clone();
        bad[at] ^= 0x01;
        assert_eq!(classify(&bad), BlockKind::NotHeader, "byte {at}");
    }
    // A base-256 size is read too.
    let mut h = hdr(b"f", Kind::File);
    h.size = 20 << 40;
    let buf = encode(&h);
    assert_eq!(
        classify(ustar(&buf)),
        BlockKind::Header {
            flag: b'0',
            size: 20 << 40
        }
    );
}

#[test]
fn checksums_are_the_plain_byte_sums_with_the_field_as_spaces() {
    // Blocks of every byte value, high bytes inside and outside the checksum field.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..200 {
        let mut block = [0u8; BLOCK_USIZE];
        for b in block.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = if round % 4 == 0 { 0xff } else { x as u8 };
        }
        let (at, len) = CHKSUM;
        let spaced = |i: usize, b: u8| if (at..at + len).contains(&i) { b' ' } else { b };
        let unsigned: i64 = block
            .iter()
            .enumerate()
            .map(|(i, &b)| i64::from(spaced(i, b)))
            .sum();
        let signed: i64 = block
            .iter()
            .enumerate()
            .map(|(i, &b)| i64::from(spaced(i, b) as i8))
            .sum();
        assert_eq!(checksums(&block), (unsigned, signed), "round {round}");
    }
}

#[test]
fn checksum_signed_sum_and_field_variants_are_accepted() {
    let mut h = hdr(b"f\xe9\xff", Kind::File);
    h.size = 1;
    let buf = encode(&h);
    let mut block = ustar(&buf).to_vec();
    let (unsigned, signed) = checksums(&block);
    assert_ne!(unsigned, signed);
    for text in [
        format!("{signed:06o}\0 "),
        format!("{unsigned:07o}\0"),
        format!(" {unsigned:o}\0 "),
        format!("{unsigned:06o}  "),
    ] {
        field_mut(&mut block, CHKSUM).copy_from_slice(text.as_bytes());
        assert_eq!(
            classify(&block),
            BlockKind::Header {
                flag: b'0',
                size: 1
            },
            "{text:?}"
        );
        assert_eq!(
            decode_at(&block, 0).unwrap().unwrap().header.path,
            b"f\xe9\xff"
        );
    }
    field_mut(&mut block, CHKSUM).copy_from_slice(format!("{:06o}\0 ", unsigned + 1).as_bytes());
    assert_eq!(classify(&block), BlockKind::NotHeader);
    assert!(matches!(
        decode_at(&block, 0),
        Err(HeaderError::Checksum { offset: 0 })
    ));
}

/// The 8-bytes-at-a-time checksum is kept for speed (and GNU's `%06o\0 ` field): on random
/// blocks it gives the crate's sum, accepts what the crate seals, and the crate reads back
/// what it seals.
#[test]
fn the_checksum_agrees_with_the_crates_on_random_headers() {
    let mut rng = crate::engine::test_rng::Rng::seeded(0x7A2C);
    for i in 0..3000 {
        let mut h = tar::Header::new_gnu();
        let high = i % 3 == 0; // a third with bytes of 0x80 and more (signed sums differ)
        for b in h.as_mut_bytes().iter_mut() {
            *b = if high {
                rng.next() as u8
            } else {
                rng.next() as u8 & 0x7f
            };
        }
        h.set_cksum();
        let (unsigned, _) = checksums(h.as_bytes());
        assert_eq!(unsigned, i64::from(h.cksum().unwrap()), "block {i}");
        assert!(checksum_ok(h.as_bytes()), "block {i}");
        let mut ours = *h.as_bytes();
        seal(&mut ours);
        assert_eq!(
            i64::from(tar::Header::from_byte_slice(&ours).cksum().unwrap()),
            unsigned,
            "block {i}"
        );
    }
}
