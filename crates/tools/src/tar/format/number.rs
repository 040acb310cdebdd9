//! Kept from the crate: reading numbers as GNU tar does (the crate rejects an all-NUL field GNU
//! reads as 0 and reads a negative base-256 size as a huge positive one), writing what the
//! crate's `u64` setters cannot (negative times, ids beyond 2^56, device numbers beyond 7
//! octal digits), and GNU tar's checksum field (`%06o\0 `, where the crate writes 7 digits),
//! summed 8 bytes at a time (4× the crate's byte loop: it runs twice per entry).

use super::BLOCK_USIZE;

/// Offset and length (bytes) of the checksum field, from the crate's layout.
const CHKSUM: (usize, usize) = (std::mem::offset_of!(tar::OldHeader, cksum), 8);

/// The bytes of a NUL-terminated (or full-width) string field.
pub(super) fn cstr(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == 0) {
        Some(end) => &bytes[..end],
        None => bytes,
    }
}

pub(super) fn is_zero(block: &[u8]) -> bool {
    block.iter().all(|&b| b == 0)
}

/// Writes `v` as zero-padded octal filling all but the last byte of `dst`, then a NUL.
/// False (and `dst` untouched) when it does not fit.
pub(super) fn put_octal(dst: &mut [u8], v: u64) -> bool {
    let digits = dst.len() - 1;
    if digits < 22 && v >> (3 * digits) != 0 {
        return false;
    }
    let mut rest = v;
    for d in dst[..digits].iter_mut().rev() {
        *d = b'0' + (rest & 7) as u8;
        rest >>= 3;
    }
    dst[digits] = 0;
    true
}

/// Writes `v` as octal when it fits, else in GNU base-256 (first byte `0x80` for positive
/// values, `0xff` for negative ones, the value big-endian two's complement in the other bytes).
/// A value that fits neither way (a uid above 2^56) is written as 0: the caller stores it in a
/// pax record too. For the values the crate's setters cannot take; the others go through them
/// and give the same bytes.
pub(super) fn put_number(dst: &mut [u8], v: i128) {
    if let Ok(u) = u64::try_from(v) {
        if put_octal(dst, u) {
            return;
        }
    }
    let bits = 8 * (dst.len() as u32 - 1);
    let limit = 1i128 << bits;
    if (-limit..limit).contains(&v) {
        let be = v.to_be_bytes();
        let n = dst.len();
        dst[1..].copy_from_slice(&be[be.len() - (n - 1)..]);
        dst[0] = if v < 0 { 0xff } else { 0x80 };
    } else {
        put_octal(dst, 0);
    }
}

/// Parses a numeric field as GNU tar's `from_header` does: one leading NUL is skipped (old tars
/// wrote one when the previous field overflowed), then leading white space; then octal digits
/// ended by a NUL, white space or the field's end (no digits at all, as in an all-NUL field, is
/// 0; a field of nothing but blanks is an error), or GNU base-256 (first byte `0x80` for a
/// positive value, `0xff` for a negative one, the rest big-endian two's complement). Anything
/// else is `None`.
#[inline]
pub(super) fn parse_number(bytes: &[u8]) -> Option<i128> {
    let mut i = usize::from(bytes.first() == Some(&0));
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if i == bytes.len() {
        return None;
    }
    match bytes[i] {
        0x80 | 0xff => {
            if bytes.len() - i > 16 {
                return None;
            }
            let mut v: i128 = if bytes[i] == 0xff { -1 } else { 0 };
            for &b in &bytes[i + 1..] {
                v = v * 256 + i128::from(b);
            }
            Some(v)
        }
        _ => {
            let mut v: i128 = 0;
            while i < bytes.len() && (b'0'..=b'7').contains(&bytes[i]) {
                v = v.checked_mul(8)? + i128::from(bytes[i] - b'0');
                i += 1;
            }
            if i < bytes.len() && bytes[i] != 0 && !bytes[i].is_ascii_whitespace() {
                return None;
            }
            Some(v)
        }
    }
}

/// [`parse_number`] of a field that must not be negative.
#[inline]
pub(super) fn parse_unsigned(bytes: &[u8]) -> Option<u64> {
    parse_number(bytes).and_then(|v| u64::try_from(v).ok())
}

/// The unsigned and signed byte sums of a header block, its checksum field counted as spaces.
#[inline]
pub(super) fn checksums(block: &[u8]) -> (i64, i64) {
    // Eight bytes at a time (a header is checksummed twice per entry: 108 ns a block with
    // a byte loop, 26 with this): byte sums in four 16-bit lanes (each at most 64 × 2 × 255)
    // and the bytes of 0x80 or more counted in eight 8-bit lanes (each at most 64). A byte of
    // 0x80 or more counts 256 less signed than unsigned. Then the checksum field is swapped
    // for spaces.
    const LOW: u64 = 0x00ff_00ff_00ff_00ff;
    const ONES: u64 = 0x0101_0101_0101_0101;
    let block = &block[..BLOCK_USIZE];
    let (mut pairs, mut high) = (0u64, 0u64);
    for word in block.chunks_exact(8) {
        let x = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        pairs += (x & LOW) + ((x >> 8) & LOW);
        high += (x >> 7) & ONES;
    }
    let lanes =
        |v: u64| ((v & 0xffff) + ((v >> 16) & 0xffff) + ((v >> 32) & 0xffff) + (v >> 48)) as i64;
    let (at, len) = CHKSUM;
    let field = &block[at..at + len];
    let unsigned = lanes(pairs) - field.iter().map(|&b| i64::from(b)).sum::<i64>()
        + len as i64 * i64::from(b' ');
    let high = lanes((high & LOW) + ((high >> 8) & LOW))
        - field.iter().map(|&b| i64::from(b >> 7)).sum::<i64>();
    (unsigned, unsigned - 256 * high)
}

/// Whether the block's checksum field holds its unsigned or its signed byte sum.
#[inline]
pub(super) fn checksum_ok(block: &[u8]) -> bool {
    let Some(stored) = parse_number(&super::view(block).as_old().cksum) else {
        return false;
    };
    let (unsigned, signed) = checksums(block);
    stored == i128::from(unsigned) || stored == i128::from(signed)
}

/// Fills the checksum field of an otherwise complete block as GNU tar does: 6 octal digits,
/// NUL, space (the crate's [`tar::Header::set_cksum`] writes 7 digits and a NUL, which every
/// reader accepts but which is not the bytes GNU tar and today's archives have).
pub(super) fn seal(block: &mut [u8; BLOCK_USIZE]) {
    let (unsigned, _) = checksums(block);
    let (at, len) = CHKSUM;
    let field = &mut block[at..at + len];
    // A block's byte sum is below 8^6.
    put_octal(&mut field[..7], unsigned as u64);
    field[7] = b' ';
}
