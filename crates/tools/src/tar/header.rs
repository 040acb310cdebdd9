//! Tar headers, encoded and decoded: POSIX ustar blocks, pax extended headers (`x`), GNU long
//! names (`L`, `K`), base-256 numbers. Pure byte functions; no I/O beyond the `read` callback of
//! [`decode_entry`].

use std::borrow::Cow;
use std::io;

/// Bytes in one tar block.
pub const BLOCK: u64 = 512;

/// `n` rounded up to a whole number of blocks (bytes).
pub fn round_up(n: u64) -> u64 {
    n.div_ceil(BLOCK) * BLOCK
}

/// What an entry is (the ustar type flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `0`, NUL or `7` (contiguous file).
    File,
    /// `1`: a hard link to the entry named by `link`.
    HardLink,
    /// `2`: a symbolic link to `link`.
    Symlink,
    /// `3`.
    Char,
    /// `4`.
    Block,
    /// `5`.
    Dir,
    /// `6`.
    Fifo,
    /// Any other type flag (GNU multivolume `M`, volume label `V`, ...), kept as the raw
    /// byte. (GNU sparse `S` entries decode as [`Kind::File`] with a sparse map.)
    Other(u8),
}

/// One archive entry's header, as encoded or decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Path as stored, without a trailing `/` (bytes, any value but NUL).
    pub path: Vec<u8>,
    /// Entry type.
    pub kind: Kind,
    /// Permission bits and set-id/sticky bits (`0o7777`), no type bits.
    pub mode: u32,
    /// Owner's numeric id.
    pub uid: u64,
    /// Group's numeric id.
    pub gid: u64,
    /// Owner's name (empty if unknown).
    pub uname: Vec<u8>,
    /// Group's name (empty if unknown).
    pub gname: Vec<u8>,
    /// Data bytes that follow the header (0 for everything but files).
    pub size: u64,
    /// Modification time, seconds since the epoch (may be negative).
    pub mtime: i64,
    /// Nanoseconds of `mtime`.
    pub mtime_nsec: u32,
    /// Symlink target or hard-link target path (empty otherwise).
    pub link: Vec<u8>,
    /// Device numbers of character and block devices.
    pub dev_major: u32,
    /// See `dev_major`.
    pub dev_minor: u32,
    /// Extended attributes (name, value), stored as pax `SCHILY.xattr.NAME` records.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Why a header could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The header block's checksum does not match its bytes.
    #[error("corrupt tar header at byte {offset}: checksum mismatch")]
    Checksum {
        /// Byte offset of the block in the archive stream.
        offset: u64,
    },
    /// A field could not be parsed (bad octal, bad pax record...).
    #[error("corrupt tar header at byte {offset}: {what}")]
    Invalid {
        /// Byte offset of the block.
        offset: u64,
        /// What was wrong.
        what: String,
    },
    /// The archive ends inside a header or its extension data.
    #[error("truncated archive: it ends inside the header at byte {offset}")]
    Truncated {
        /// Byte offset of the header.
        offset: u64,
    },
    /// Reading failed.
    #[error("read at byte {offset}: {source}")]
    Io {
        /// Byte offset read.
        offset: u64,
        /// The reason.
        source: io::Error,
    },
}

/// One decoded entry and where it sits in the archive stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The entry's header with every extension (pax, GNU long names) applied.
    pub header: Header,
    /// Offset of the entry's first header block (its pax or GNU extension header, if any).
    pub start: u64,
    /// Offset of the entry's data (just after its ustar header block).
    pub data: u64,
    /// Offset of the next entry's first header block.
    pub next: u64,
    /// For a GNU sparse file (old GNU `S` entries, pax `GNU.sparse.*` 0.0, 0.1 and 1.0): the
    /// stretches of the file that hold data, in file order, stored one after another from
    /// `data`; `header.size` is then the file's real size (the rest are holes). `None` for
    /// every other entry, whose `header.size` data bytes are stored at `data`.
    pub sparse: Option<Vec<Segment>>,
}

/// One stretch of a sparse file's data: `len` bytes at byte `at` of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Offset in the file (bytes).
    pub at: u64,
    /// Length (bytes).
    pub len: u64,
}

impl Decoded {
    /// Bytes of the entry's data stored in the archive from `data` (for a sparse file, the sum
    /// of its segments, not its real size).
    pub fn stored_len(&self) -> u64 {
        match &self.sparse {
            Some(map) => map.iter().map(|s| s.len).sum(),
            None if self.header.has_data() => self.header.size,
            None => 0,
        }
    }
}

/// What a single 512-byte block holds, checked but not interpreted further (for scanning an
/// archive for header candidates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// All zeros (end-of-archive marker when two follow each other).
    Zero,
    /// A header with a valid checksum: its type flag and the size field's value.
    Header {
        /// The type flag byte (`b'0'`, `b'x'`, `b'L'`...).
        flag: u8,
        /// The size field (octal or base-256).
        size: u64,
    },
    /// Anything else.
    NotHeader,
}

// ---------------------------------------------------------------------------------------------
// Layout of a ustar header block: (offset, length) of each field, in bytes.

const NAME: (usize, usize) = (0, 100);
const MODE: (usize, usize) = (100, 8);
const UID: (usize, usize) = (108, 8);
const GID: (usize, usize) = (116, 8);
const SIZE: (usize, usize) = (124, 12);
const MTIME: (usize, usize) = (136, 12);
const CHKSUM: (usize, usize) = (148, 8);
const TYPEFLAG: usize = 156;
const LINKNAME: (usize, usize) = (157, 100);
const MAGIC: (usize, usize) = (257, 6);
const VERSION: (usize, usize) = (263, 2);
const UNAME: (usize, usize) = (265, 32);
const GNAME: (usize, usize) = (297, 32);
const DEVMAJOR: (usize, usize) = (329, 8);
const DEVMINOR: (usize, usize) = (337, 8);
const PREFIX: (usize, usize) = (345, 155);

/// Block size as a `usize` (bytes).
const BLOCK_USIZE: usize = BLOCK as usize;
/// Largest value of an 11-digit octal field (`size`, `mtime`).
const MAX_OCTAL_11: u64 = 0o777_7777_7777;
/// Largest value of a 7-digit octal field (`uid`, `gid`, `devmajor`, `devminor`).
const MAX_OCTAL_7: u64 = 0o777_7777;
/// Largest extension header (pax `x`/`g`, GNU `L`/`K`) data [`decode_entry`] accepts, in
/// bytes; a larger size field is taken as corruption rather than read into memory.
const MAX_EXTENSION_SIZE: u64 = 64 << 20;
/// POSIX ustar magic + version.
const MAGIC_USTAR: &[u8; 8] = b"ustar\x0000";
/// Old GNU tar magic + version (no prefix field).
const MAGIC_GNU: &[u8; 8] = b"ustar  \x00";
/// Nanoseconds per second.
const NANOS: i128 = 1_000_000_000;

fn field(block: &[u8], (at, len): (usize, usize)) -> &[u8] {
    &block[at..at + len]
}

fn field_mut(block: &mut [u8], (at, len): (usize, usize)) -> &mut [u8] {
    &mut block[at..at + len]
}

/// The bytes of a NUL-terminated (or full-width) string field.
fn cstr(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == 0) {
        Some(end) => &bytes[..end],
        None => bytes,
    }
}

fn has_high_byte(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| b >= 0x80)
}

/// Copies as much of `src` as fits into `dst` (the rest of `dst` stays zero).
fn put_bytes(dst: &mut [u8], src: &[u8]) {
    let n = src.len().min(dst.len());
    dst[..n].copy_from_slice(&src[..n]);
}

/// Writes `v` as zero-padded octal filling all but the last byte of `dst`, then a NUL.
/// False (and `dst` untouched) when it does not fit.
fn put_octal(dst: &mut [u8], v: u64) -> bool {
    let digits = dst.len() - 1;
    // Digit by digit from the right: no formatting machinery in the per-entry hot path.
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
/// pax record too.
fn put_number(dst: &mut [u8], v: i128) {
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
fn parse_number(bytes: &[u8]) -> Option<i128> {
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

/// The unsigned and signed byte sums of a header block, its checksum field counted as spaces.
fn checksums(block: &[u8]) -> (i64, i64) {
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

fn checksum_ok(block: &[u8]) -> bool {
    let Some(stored) = parse_number(field(block, CHKSUM)) else {
        return false;
    };
    let (unsigned, signed) = checksums(block);
    stored == i128::from(unsigned) || stored == i128::from(signed)
}

/// Fills the checksum field of an otherwise complete block: 6 octal digits, NUL, space.
fn seal(block: &mut [u8; BLOCK_USIZE]) {
    let (unsigned, _) = checksums(block);
    // Six octal digits (a block's byte sum is below 8^6), NUL, space.
    let field = field_mut(block, CHKSUM);
    put_octal(&mut field[..7], unsigned as u64);
    field[7] = b' ';
}

fn is_zero(block: &[u8]) -> bool {
    block.iter().all(|&b| b == 0)
}

/// The ustar type flag of a kind.
fn kind_flag(kind: Kind) -> u8 {
    match kind {
        Kind::File => b'0',
        Kind::HardLink => b'1',
        Kind::Symlink => b'2',
        Kind::Char => b'3',
        Kind::Block => b'4',
        Kind::Dir => b'5',
        Kind::Fifo => b'6',
        Kind::Other(b) => b,
    }
}

/// One pax record, `LEN KEY=VALUE\n`, LEN counting the whole record including its own digits.
fn pax_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let base = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = base + 1;
    while base + decimal_digits(len as u64) != len {
        len = base + decimal_digits(len as u64);
    }
    put_decimal(out, len as u64);
    out.push(b' ');
    out.extend_from_slice(key);
    out.push(b'=');
    out.extend_from_slice(value);
    out.push(b'\n');
}

/// `sec` + `nsec` / 10^9 as pax decimal seconds: `SEC`, or `SEC.NNNNNNNNN` when there is a
/// fraction; `-1.500000000` for (sec -2, nsec 500000000).
fn pax_time(sec: i64, nsec: u32) -> Vec<u8> {
    let total = i128::from(sec) * NANOS + i128::from(nsec);
    let abs = total.unsigned_abs();
    let (whole, frac) = (abs / NANOS as u128, abs % NANOS as u128);
    let mut out = Vec::with_capacity(32);
    if total < 0 {
        out.push(b'-');
    }
    // |sec| < 2^63, so the whole seconds fit in a u64.
    put_decimal(&mut out, whole as u64);
    if frac != 0 {
        out.push(b'.');
        let at = out.len();
        put_decimal(&mut out, frac as u64 + NANOS as u64);
        out.remove(at); // the leading 1 that kept the fraction's leading zeros
    }
    out
}

/// Digits of `v` in decimal.
fn decimal_digits(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// Appends `v` in decimal (without the formatting machinery: it runs for every entry).
fn put_decimal(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut rest = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Parses pax decimal seconds (`-12.5`, `1600000000.250`...) into (seconds, nanoseconds) with
/// the nanoseconds in `0..10^9` (so -1.5 s is (-2, 500000000)). Digits past nanoseconds are
/// dropped.
fn parse_pax_time(value: &[u8]) -> Option<(i64, u32)> {
    let (negative, rest) = match value.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, value),
    };
    let (whole, frac) = match rest.iter().position(|&b| b == b'.') {
        Some(dot) => (&rest[..dot], &rest[dot + 1..]),
        None => (rest, &b""[..]),
    };
    if whole.is_empty() || !whole.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    let mut secs: i128 = 0;
    for &d in whole {
        secs = secs.checked_mul(10)?.checked_add(i128::from(d - b'0'))?;
        if secs > i128::from(i64::MAX) + 1 {
            return None;
        }
    }
    let mut nanos: i128 = 0;
    for i in 0..9 {
        nanos = nanos * 10 + frac.get(i).map_or(0, |&d| i128::from(d - b'0'));
    }
    let mut total = secs * NANOS + nanos;
    if negative {
        total = -total;
    }
    let sec = i64::try_from(total.div_euclid(NANOS)).ok()?;
    let nsec = u32::try_from(total.rem_euclid(NANOS)).ok()?;
    Some((sec, nsec))
}

/// A pax decimal integer (digits only).
fn parse_decimal(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Where a path goes in a ustar block.
#[derive(Debug, PartialEq, Eq)]
enum Placement {
    /// Whole in the name field.
    Name,
    /// `prefix` = path[..at], name = path[at + 1..] (the `/` at `at` is implied).
    Split(usize),
    /// Too long for ustar: pax `path` record.
    Pax,
}

fn place_path(path: &[u8]) -> Placement {
    if path.len() <= NAME.1 {
        return Placement::Name;
    }
    // Split at the leftmost '/' that leaves at most 100 bytes of name and 155 of prefix; both
    // must be non-empty (an empty prefix would lose a leading '/').
    let min_at = path.len().saturating_sub(NAME.1 + 1).max(1);
    let max_at = PREFIX.1.min(path.len().saturating_sub(2));
    if min_at > max_at {
        return Placement::Pax;
    }
    path[min_at..=max_at]
        .iter()
        .position(|&b| b == b'/')
        .map_or(Placement::Pax, |i| Placement::Split(min_at + i))
}

/// The values of one ustar block being written.
struct UstarFields<'a> {
    name: &'a [u8],
    prefix: &'a [u8],
    mode: u32,
    uid: i128,
    gid: i128,
    size: i128,
    mtime: i128,
    flag: u8,
    link: &'a [u8],
    uname: &'a [u8],
    gname: &'a [u8],
    dev_major: u32,
    dev_minor: u32,
}

impl UstarFields<'_> {
    fn block(&self) -> [u8; BLOCK_USIZE] {
        let mut b = [0u8; BLOCK_USIZE];
        put_bytes(field_mut(&mut b, NAME), self.name);
        put_octal(field_mut(&mut b, MODE), u64::from(self.mode & 0o7777));
        put_number(field_mut(&mut b, UID), self.uid);
        put_number(field_mut(&mut b, GID), self.gid);
        put_number(field_mut(&mut b, SIZE), self.size);
        put_number(field_mut(&mut b, MTIME), self.mtime);
        b[TYPEFLAG] = self.flag;
        put_bytes(field_mut(&mut b, LINKNAME), self.link);
        b[MAGIC.0..MAGIC.0 + 8].copy_from_slice(MAGIC_USTAR);
        put_bytes(field_mut(&mut b, UNAME), self.uname);
        put_bytes(field_mut(&mut b, GNAME), self.gname);
        put_number(field_mut(&mut b, DEVMAJOR), i128::from(self.dev_major));
        put_number(field_mut(&mut b, DEVMINOR), i128::from(self.dev_minor));
        put_bytes(field_mut(&mut b, PREFIX), self.prefix);
        seal(&mut b);
        b
    }
}

/// Appends an extension header block (type `flag`, `name`) and its `data`, zero-padded to a
/// block; the header's uid, gid and mtime are `owner`'s, or 0 when they do not fit in octal.
fn extension(out: &mut Vec<u8>, flag: u8, name: &[u8], data: &[u8], owner: &Header) {
    let fits = |v: u64, max: u64| if v <= max { v } else { 0 };
    let mtime = u64::try_from(owner.mtime).map_or(0, |m| fits(m, MAX_OCTAL_11));
    let block = UstarFields {
        name,
        prefix: b"",
        mode: 0o644,
        uid: i128::from(fits(owner.uid, MAX_OCTAL_7)),
        gid: i128::from(fits(owner.gid, MAX_OCTAL_7)),
        size: data.len() as i128,
        mtime: i128::from(mtime),
        flag,
        link: b"",
        uname: b"",
        gname: b"",
        dev_major: 0,
        dev_minor: 0,
    }
    .block();
    out.extend_from_slice(&block);
    out.extend_from_slice(data);
    out.resize(
        out.len() + (round_up(data.len() as u64) as usize - data.len()),
        0,
    );
}

impl Header {
    /// The path as stored: a directory's gets a trailing `/` (unless empty or already there).
    fn stored_path(&self) -> Cow<'_, [u8]> {
        if self.kind == Kind::Dir && !self.path.is_empty() && !self.path.ends_with(b"/") {
            let mut p = self.path.clone();
            p.push(b'/');
            Cow::Owned(p)
        } else {
            Cow::Borrowed(&self.path)
        }
    }

    /// `PaxHeaders/` + the basename (bytes >= 0x80 as `_`), at most 100 bytes.
    fn pax_header_name(&self) -> Vec<u8> {
        let trimmed = match self.path.iter().rposition(|&b| b != b'/') {
            Some(last) => &self.path[..=last],
            None => &b""[..],
        };
        let base = match trimmed.iter().rposition(|&b| b == b'/') {
            Some(slash) => &trimmed[slash + 1..],
            None => trimmed,
        };
        let mut name = b"PaxHeaders/".to_vec();
        if base.is_empty() {
            name.push(b'_');
        }
        name.extend(base.iter().map(|&b| if b >= 0x80 { b'_' } else { b }));
        name.truncate(NAME.1);
        name
    }

    /// Append this entry's header blocks to `out`: a pax `x` extended header first when needed,
    /// then the ustar block. Returns the bytes appended (a multiple of 512).
    ///
    /// Whatever does not fit ustar (paths over 100 bytes without a usable `/` split, non-ASCII
    /// paths, links and names, sizes and times beyond 11 octal digits, ids beyond 7, negative or
    /// sub-second times, extended attributes) goes to pax records; the ustar block keeps what
    /// fits (truncated strings, GNU base-256 numbers). `hdrcharset=BINARY` is written when a
    /// path, link, uname or gname record is not UTF-8; attribute values are always raw bytes.
    pub fn encode(&self, out: &mut Vec<u8>) -> usize {
        self.encode_with(out, false)
    }

    /// [`Header::encode`] with mfu-rs's mark ([`MFU_MARK`], a pax `comment` record, which
    /// every pax reader ignores) in the pax header: what the first entry of an mfu-rs archive
    /// carries, so that a reader knows the archive must end with its index member and
    /// end-of-archive blocks, and that one cut at an entry boundary is truncated. Returns the
    /// bytes appended.
    pub fn encode_marked(&self, out: &mut Vec<u8>) -> usize {
        self.encode_with(out, true)
    }

    fn encode_with(&self, out: &mut Vec<u8>, marked: bool) -> usize {
        let start = out.len();
        let (path, placement, mut records) = self.pax_records();
        if marked {
            let mut mark = Vec::with_capacity(MFU_MARK.len() + 16);
            pax_record(&mut mark, b"comment", MFU_MARK);
            mark.extend_from_slice(&records);
            records = mark;
        }
        if !records.is_empty() {
            extension(out, b'x', &self.pax_header_name(), &records, self);
        }

        let (prefix, name) = match placement {
            Placement::Split(at) => (&path[..at], &path[at + 1..]),
            Placement::Name | Placement::Pax => (&b""[..], &path[..]),
        };
        let block = UstarFields {
            name,
            prefix,
            mode: self.mode,
            uid: i128::from(self.uid),
            gid: i128::from(self.gid),
            size: i128::from(self.size),
            mtime: i128::from(self.mtime),
            flag: kind_flag(self.kind),
            link: &self.link,
            uname: &self.uname,
            gname: &self.gname,
            dev_major: self.dev_major,
            dev_minor: self.dev_minor,
        }
        .block();
        out.extend_from_slice(&block);
        out.len() - start
    }

    /// The bytes [`Header::encode`] appends, without encoding the blocks.
    pub fn encoded_len(&self) -> usize {
        let (_, _, records) = self.pax_records();
        let pax = if records.is_empty() {
            0
        } else {
            BLOCK_USIZE + round_up(records.len() as u64) as usize
        };
        pax + BLOCK_USIZE
    }

    /// The stored path, where it goes in the ustar block, and the pax records (the data of
    /// the `x` header; empty when none is needed).
    fn pax_records(&self) -> (Cow<'_, [u8]>, Placement, Vec<u8>) {
        let path = self.stored_path();
        let placement = place_path(&path);
        let path_pax = placement == Placement::Pax || has_high_byte(&path);
        let link_pax = self.link.len() > LINKNAME.1 || has_high_byte(&self.link);
        let size_pax = self.size > MAX_OCTAL_11;
        let uid_pax = self.uid > MAX_OCTAL_7;
        let gid_pax = self.gid > MAX_OCTAL_7;
        let mtime_pax = self.mtime < 0 || self.mtime > MAX_OCTAL_11 as i64 || self.mtime_nsec != 0;
        let uname_pax = self.uname.len() > UNAME.1 || has_high_byte(&self.uname);
        let gname_pax = self.gname.len() > GNAME.1 || has_high_byte(&self.gname);

        let strings = [
            (path_pax, &b"path"[..], &path[..]),
            (link_pax, b"linkpath", &self.link),
            (uname_pax, b"uname", &self.uname),
            (gname_pax, b"gname", &self.gname),
        ];
        let mut records = Vec::new();
        if strings
            .iter()
            .any(|(on, _, v)| *on && std::str::from_utf8(v).is_err())
        {
            pax_record(&mut records, b"hdrcharset", b"BINARY");
        }
        for (on, key, value) in &strings[..2] {
            if *on {
                pax_record(&mut records, key, value);
            }
        }
        let numbers = [
            (size_pax, "size", self.size),
            (uid_pax, "uid", self.uid),
            (gid_pax, "gid", self.gid),
        ];
        for (on, key, value) in numbers {
            if on {
                let mut text = Vec::with_capacity(20);
                put_decimal(&mut text, value);
                pax_record(&mut records, key.as_bytes(), &text);
            }
        }
        for (on, key, value) in &strings[2..] {
            if *on {
                pax_record(&mut records, key, value);
            }
        }
        if mtime_pax {
            pax_record(
                &mut records,
                b"mtime",
                &pax_time(self.mtime, self.mtime_nsec),
            );
        }
        for (name, value) in &self.xattrs {
            let mut key = b"SCHILY.xattr.".to_vec();
            key.extend_from_slice(name);
            pax_record(&mut records, &key, value);
        }
        (path, placement, records)
    }

    /// True when data blocks follow this entry's header in an archive (see [`flag_has_data`]).
    pub fn has_data(&self) -> bool {
        flag_has_data(kind_flag(self.kind))
    }
}

/// The value of the pax `comment` record of the first entry of every archive mfu-rs writes
/// ([`Header::encode_marked`]). POSIX says a `comment` "shall be ignored": GNU tar, bsdtar and
/// Python read past it. A file name cannot put it there (it is a record of the `x` header).
pub const MFU_MARK: &[u8] =
    b"mfu-rs archive: it ends with its dtar index member and two zero blocks";

/// Bytes of an archive's start that [`mfu_marked`] looks at: its first block and the first
/// record of the pax header it is (where [`Header::encode_marked`] puts the mark).
pub const MARK_HEAD: usize = 1024;

/// Whether the tar stream whose first bytes are `head` (up to [`MARK_HEAD`]) starts with
/// mfu-rs's mark ([`MFU_MARK`]): its first block a pax `x` header with a good checksum whose
/// first record is the mark. False for anything else, damage included.
pub fn mfu_marked(head: &[u8]) -> bool {
    let mut mark = Vec::with_capacity(MFU_MARK.len() + 16);
    pax_record(&mut mark, b"comment", MFU_MARK);
    head.len() >= BLOCK_USIZE + mark.len()
        && head[TYPEFLAG] == b'x'
        && checksum_ok(&head[..BLOCK_USIZE])
        && parse_number(field(head, SIZE)).is_some_and(|s| s >= mark.len() as i128)
        && head[BLOCK_USIZE..BLOCK_USIZE + mark.len()] == mark[..]
}

/// True when data follows a header with this type flag: regular files (`0`, NUL, `7`) and any
/// unknown flag; false for `1`..`6` (links, devices, dirs, fifos). (Extension headers x/g/L/K
/// always carry their data; callers handle those separately.)
pub fn flag_has_data(flag: u8) -> bool {
    !(b'1'..=b'6').contains(&flag)
}

/// Whether a block's type flag says pax global header (`g`), before any check of the block:
/// lets a caller skip [`classify`]'s checksum for the blocks that cannot be one.
pub fn flags_global(block: &[u8]) -> bool {
    block.get(TYPEFLAG) == Some(&b'g')
}

/// Classify one 512-byte block (checksum verified; unsigned OR signed byte sum accepted).
///
/// A block shorter than 512 bytes, with a bad checksum or an unreadable (or negative) size
/// field is [`BlockKind::NotHeader`]; `size` is in bytes.
pub fn classify(block: &[u8]) -> BlockKind {
    if block.len() < BLOCK_USIZE {
        return BlockKind::NotHeader;
    }
    let block = &block[..BLOCK_USIZE];
    if is_zero(block) {
        return BlockKind::Zero;
    }
    if !checksum_ok(block) {
        return BlockKind::NotHeader;
    }
    match parse_number(field(block, SIZE)).and_then(|s| u64::try_from(s).ok()) {
        Some(size) => BlockKind::Header {
            flag: block[TYPEFLAG],
            size,
        },
        None => BlockKind::NotHeader,
    }
}

/// The records of a pax extended header's data, as (key, value) byte pairs, in order.
///
/// Each record is `LEN KEY=VALUE\n` with LEN the record's length in bytes (decimal); values
/// are raw bytes and may hold `=`, NUL or `\n`. NUL bytes after the last record are ignored.
/// `offset` (bytes, the extension header's position in the archive) only labels errors: a
/// malformed record is [`HeaderError::Invalid`].
#[allow(clippy::type_complexity)] // the signature other modules code against
pub fn parse_pax(data: &[u8], offset: u64) -> Result<Vec<(Vec<u8>, Vec<u8>)>, HeaderError> {
    let invalid = |at: usize, what: &str| HeaderError::Invalid {
        offset,
        what: format!("pax record at data byte {at}: {what}"),
    };
    let mut records = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        if is_zero(rest) {
            break;
        }
        let Some(space) = rest.iter().position(|&b| b == b' ') else {
            return Err(invalid(pos, "no length"));
        };
        let len = parse_decimal(&rest[..space])
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| invalid(pos, "bad length"))?;
        if len > rest.len() {
            return Err(invalid(pos, "length beyond the data"));
        }
        if len < space + 3 || rest[len - 1] != b'\n' {
            return Err(invalid(pos, "length does not end at a newline"));
        }
        let body = &rest[space + 1..len - 1];
        let Some(eq) = body.iter().position(|&b| b == b'=') else {
            return Err(invalid(pos, "no '='"));
        };
        if eq == 0 {
            return Err(invalid(pos, "empty key"));
        }
        records.push((body[..eq].to_vec(), body[eq + 1..].to_vec()));
        pos += len;
    }
    Ok(records)
}

/// The `size` record of pax data, if any (used when scanning an archive without decoding it).
///
/// Bytes; the last `size` record wins; `None` when there is none or the data is malformed.
#[cfg(test)]
pub fn pax_size(data: &[u8]) -> Option<u64> {
    let records = parse_pax(data, 0).ok()?;
    let (_, value) = records.iter().rev().find(|(k, _)| k == b"size")?;
    parse_decimal(value)
}

/// One pax record: keyword and value (bytes).
pub type Record = (Vec<u8>, Vec<u8>);

/// The records of one pax global header (`g`) that apply to the entries after it, and the
/// offset (bytes) from which they apply: the block after the header's data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Global {
    /// Offset of the first block after the global header (bytes).
    pub from: u64,
    /// Its records that apply to later entries ([`global_records`]).
    pub records: Vec<Record>,
}

/// Keep the records of a global header that apply to the entries after it: owner, group,
/// their names, mtime and xattrs (`SCHILY.xattr.*`). `path`, `linkpath`, `size` and
/// `GNU.sparse.*` describe one entry (its name, its place in the stream), never every entry,
/// and are dropped: a global `size` would make the chain of headers depend on state that
/// a decoder started at an arbitrary offset cannot see, and a global `path` would give every
/// entry the same name. (GNU tar and Python's tarfile apply those too; no archiver writes
/// them.)
pub fn global_records(records: Vec<Record>) -> Vec<Record> {
    records
        .into_iter()
        .filter(|(k, _)| {
            matches!(&k[..], b"uid" | b"gid" | b"uname" | b"gname" | b"mtime")
                || k.starts_with(b"SCHILY.xattr.")
        })
        .collect()
}

/// Fold the records of a later global header into `state` (POSIX: a record replaces the one
/// of the same keyword, the others stay; an empty value is kept and removes the value when
/// applied).
fn fold_globals(state: &mut Vec<Record>, records: &[Record]) {
    for (k, v) in records {
        match state.iter_mut().find(|(sk, _)| sk == k) {
            Some(slot) => slot.1 = v.clone(),
            None => state.push((k.clone(), v.clone())),
        }
    }
}

/// The pax global headers of an archive as the entries see them: the records in effect from
/// each global header on, each state the fold of every global header before it (POSIX; GNU
/// tar 1.34 lets each global header replace the records of the ones before instead, bsdtar
/// ignores them). Small: one state per global header, and archives have one at most, at
/// their start (GNU tar's `--pax-option`, Python's `pax_headers=`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Globals {
    /// `(from, records in effect from there)`, by increasing `from`.
    states: Vec<(u64, Vec<Record>)>,
}

impl Globals {
    /// Add the global header `g`, which lies after every one added before.
    pub fn push(&mut self, g: Global) {
        let mut state = self.states.last().map(|s| s.1.clone()).unwrap_or_default();
        fold_globals(&mut state, &g.records);
        self.states.push((g.from, state));
    }

    /// The globals of a list of global headers in any order, duplicates (the same header
    /// seen twice) once.
    pub fn from_list(mut list: Vec<Global>) -> Globals {
        list.sort_by_key(|g| g.from);
        list.dedup_by_key(|g| g.from);
        let mut globals = Globals::default();
        for g in list {
            globals.push(g);
        }
        globals
    }

    /// The records in effect for an entry whose first header block is at `offset` (bytes).
    pub fn at(&self, offset: u64) -> &[Record] {
        match self.states.partition_point(|s| s.0 <= offset) {
            0 => &[],
            i => &self.states[i - 1].1,
        }
    }

    /// Append to `out` in the form [`Globals::decode`] reads.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_list(
            self.states
                .iter()
                .map(|(from, records)| (*from, &records[..])),
            out,
        );
    }

    /// What [`Globals::encode`] wrote (bytes from another rank of this program: anything
    /// else is a bug and panics).
    pub fn decode(bytes: &[u8]) -> Globals {
        Globals {
            states: decode_list(bytes)
                .into_iter()
                .map(|g| (g.from, g.records))
                .collect(),
        }
    }
}

/// Append `(from, records)` pairs to `out` as [`decode_list`] reads them.
pub fn encode_list<'a>(list: impl Iterator<Item = (u64, &'a [Record])>, out: &mut Vec<u8>) {
    use steal::wire::{put_bytes, put_u64};
    for (from, records) in list {
        put_u64(out, from);
        put_u64(out, records.len() as u64);
        for (k, v) in records {
            put_bytes(out, k);
            put_bytes(out, v);
        }
    }
}

/// The global headers [`encode_list`] wrote.
pub fn decode_list(bytes: &[u8]) -> Vec<Global> {
    let mut r = steal::wire::Reader::new(bytes);
    let mut out = Vec::new();
    while !r.is_empty() {
        let from = r.u64();
        let n = r.u64();
        let records = (0..n)
            .map(|_| (r.bytes().to_vec(), r.bytes().to_vec()))
            .collect();
        out.push(Global { from, records });
    }
    out
}

/// Overrides collected from the extension headers in front of one entry.
#[derive(Default)]
struct Extensions {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    size: Option<u64>,
    uid: Option<u64>,
    gid: Option<u64>,
    uname: Option<Vec<u8>>,
    gname: Option<Vec<u8>>,
    mtime: Option<(i64, u32)>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    sparse: PaxSparse,
}

/// The `GNU.sparse.*` records of a pax header (GNU tar's sparse formats 0.0, 0.1 and 1.0).
#[derive(Default)]
struct PaxSparse {
    /// `GNU.sparse.major` (1 for format 1.0, whose map is at the start of the data).
    major: Option<u64>,
    /// `GNU.sparse.name`: the real name (0.1, 1.0; the ustar name is `GNUSparseFile.N/...`).
    name: Option<Vec<u8>>,
    /// `GNU.sparse.size` (0.x) or `GNU.sparse.realsize` (1.0): the file's real size (bytes).
    real_size: Option<u64>,
    /// `GNU.sparse.numblocks`: the number of segments the map must have.
    count: Option<u64>,
    /// The map from repeated `GNU.sparse.offset`/`numbytes` records (0.0) or from
    /// `GNU.sparse.map` (0.1).
    map: Vec<Segment>,
    /// An `offset` record of 0.0 waiting for its `numbytes`.
    pending: Option<u64>,
}

/// Most segments a sparse map may have: bounds the memory a damaged map can take.
const MAX_SEGMENTS: u64 = 1 << 22;

impl Extensions {
    /// Applies the records of one pax `x` header (at archive byte `offset`). An empty value
    /// removes an earlier override (POSIX), except for attributes, whose value may be empty.
    fn apply_pax(
        &mut self,
        records: Vec<(Vec<u8>, Vec<u8>)>,
        offset: u64,
    ) -> Result<(), HeaderError> {
        fn number<T>(
            value: &[u8],
            key: &[u8],
            offset: u64,
            parse: impl Fn(&[u8]) -> Option<T>,
        ) -> Result<Option<T>, HeaderError> {
            if value.is_empty() {
                return Ok(None);
            }
            parse(value).map(Some).ok_or_else(|| HeaderError::Invalid {
                offset,
                what: format!(
                    "bad pax {} value {:?}",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(value)
                ),
            })
        }
        let text = |v: Vec<u8>| (!v.is_empty()).then_some(v);
        for (key, value) in records {
            match &key[..] {
                b"path" => self.path = text(value),
                b"linkpath" => self.link = text(value),
                b"uname" => self.uname = text(value),
                b"gname" => self.gname = text(value),
                b"size" => self.size = number(&value, &key, offset, parse_decimal)?,
                b"uid" => self.uid = number(&value, &key, offset, parse_decimal)?,
                b"gid" => self.gid = number(&value, &key, offset, parse_decimal)?,
                b"mtime" => self.mtime = number(&value, &key, offset, parse_pax_time)?,
                b"GNU.sparse.major" => {
                    self.sparse.major = number(&value, &key, offset, parse_decimal)?
                }
                b"GNU.sparse.name" => self.sparse.name = text(value),
                b"GNU.sparse.size" | b"GNU.sparse.realsize" => {
                    self.sparse.real_size = number(&value, &key, offset, parse_decimal)?
                }
                b"GNU.sparse.numblocks" => {
                    self.sparse.count = number(&value, &key, offset, parse_decimal)?
                }
                b"GNU.sparse.offset" => {
                    self.sparse.pending = number(&value, &key, offset, parse_decimal)?
                }
                b"GNU.sparse.numbytes" => {
                    let len = number(&value, &key, offset, parse_decimal)?;
                    match (self.sparse.pending.take(), len) {
                        (Some(_), Some(_)) if self.sparse.map.len() as u64 >= MAX_SEGMENTS => {
                            return Err(sparse_invalid(offset, "too many segments"))
                        }
                        (Some(at), Some(len)) => self.sparse.map.push(Segment { at, len }),
                        _ => return Err(sparse_invalid(offset, "numbytes without an offset")),
                    }
                }
                b"GNU.sparse.map" => {
                    if value.iter().filter(|&&b| b == b',').count() as u64 >= 2 * MAX_SEGMENTS {
                        return Err(sparse_invalid(offset, "too many segments"));
                    }
                    let numbers: Option<Vec<u64>> =
                        value.split(|&b| b == b',').map(parse_decimal).collect();
                    match numbers {
                        Some(n) if n.len() % 2 == 0 => {
                            self.sparse.map = n
                                .chunks_exact(2)
                                .map(|p| Segment {
                                    at: p[0],
                                    len: p[1],
                                })
                                .collect()
                        }
                        _ => return Err(sparse_invalid(offset, "bad GNU.sparse.map")),
                    }
                }
                _ => {
                    if let Some(name) = key.strip_prefix(b"SCHILY.xattr.") {
                        match self.xattrs.iter_mut().find(|(n, _)| n == name) {
                            Some(slot) => slot.1 = value,
                            None => self.xattrs.push((name.to_vec(), value)),
                        }
                    }
                    // atime, ctime, hdrcharset (paths are kept as raw bytes anyway), comment
                    // and unknown keys: ignored.
                }
            }
        }
        Ok(())
    }
}

fn sparse_invalid(offset: u64, what: &str) -> HeaderError {
    HeaderError::Invalid {
        offset,
        what: format!("sparse file: {what}"),
    }
}

/// Where the old GNU sparse fields sit: 4 (offset, numbytes) pairs of 12 octal bytes each in
/// the header, 21 in each extension block; then an `isextended` byte; the real size after the
/// header's flag.
const OLD_GNU_SPARSE: usize = 386;
const OLD_GNU_ISEXTENDED: usize = 482;
const OLD_GNU_REALSIZE: (usize, usize) = (483, 12);
const OLD_GNU_EXT_ISEXTENDED: usize = 504;

/// The (offset, numbytes) pairs of an old GNU sparse header or extension block, up to the
/// first empty one.
fn old_gnu_pairs(
    block: &[u8],
    from: usize,
    n: usize,
    offset: u64,
    map: &mut Vec<Segment>,
) -> Result<(), HeaderError> {
    for i in 0..n {
        let at = from + 24 * i;
        if block[at + 12] == 0 {
            break;
        }
        let num = |f: (usize, usize)| {
            parse_number(field(block, f))
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(|| sparse_invalid(offset, "bad old GNU sparse map entry"))
        };
        map.push(Segment {
            at: num((at, 12))?,
            len: num((at + 12, 12))?,
        });
    }
    Ok(())
}

/// Bytes of the extension blocks that follow an old GNU sparse (`S`) header at `offset`, and
/// the map they and the header hold.
pub fn old_gnu_sparse_map(
    read: &mut dyn FnMut(u64, usize) -> io::Result<Vec<u8>>,
    offset: u64,
    block: &[u8],
) -> Result<(u64, Vec<Segment>), HeaderError> {
    if block.len() < BLOCK_USIZE {
        return Err(HeaderError::Truncated { offset });
    }
    let mut map = Vec::new();
    old_gnu_pairs(block, OLD_GNU_SPARSE, 4, offset, &mut map)?;
    let mut extended = block[OLD_GNU_ISEXTENDED] != 0;
    let mut at = offset + BLOCK;
    while extended {
        if at - offset > MAX_EXTENSION_SIZE {
            return Err(sparse_invalid(offset, "too many extension blocks"));
        }
        let ext = read_exact(read, at, BLOCK_USIZE, offset)?;
        old_gnu_pairs(&ext, 0, 21, offset, &mut map)?;
        extended = ext[OLD_GNU_EXT_ISEXTENDED] != 0;
        at += BLOCK;
    }
    Ok((at - offset - BLOCK, map))
}

/// The map at the start of a pax 1.0 sparse file's data (decimal numbers, one a line: the
/// count, then offset and length of each segment; padded to a block), and its bytes with the
/// padding. `stored` bounds how much is read (bytes of data the entry has).
fn pax_1_0_map(
    read: &mut dyn FnMut(u64, usize) -> io::Result<Vec<u8>>,
    data: u64,
    stored: u64,
    offset: u64,
) -> Result<(u64, Vec<Segment>), HeaderError> {
    let limit = stored.min(MAX_EXTENSION_SIZE);
    let mut text = Vec::new();
    let mut numbers: Vec<u64> = Vec::new();
    let mut want: Option<u64> = None;
    let mut line_start = 0;
    loop {
        if want.is_some_and(|w| numbers.len() as u64 == 1 + 2 * w) {
            break;
        }
        match text[line_start..].iter().position(|&b| b == b'\n') {
            Some(nl) => {
                let n = parse_decimal(&text[line_start..line_start + nl])
                    .ok_or_else(|| sparse_invalid(offset, "bad number in the 1.0 map"))?;
                if want.is_none() {
                    if n > MAX_SEGMENTS {
                        return Err(sparse_invalid(offset, "too many segments"));
                    }
                    want = Some(n);
                }
                numbers.push(n);
                line_start += nl + 1;
            }
            None => {
                if text.len() as u64 >= limit {
                    return Err(sparse_invalid(offset, "the 1.0 map runs past the data"));
                }
                let more = read_exact(read, data + text.len() as u64, BLOCK_USIZE, offset)?;
                text.extend_from_slice(&more);
            }
        }
    }
    let map = numbers[1..]
        .chunks_exact(2)
        .map(|p| Segment {
            at: p[0],
            len: p[1],
        })
        .collect();
    Ok((round_up(line_start as u64), map))
}

/// Checks a sparse map against the file's real size and the data stored: segments in order,
/// not overlapping, inside the file, and together exactly the stored bytes.
fn check_map(map: &[Segment], real_size: u64, stored: u64, offset: u64) -> Result<(), HeaderError> {
    if map.len() as u64 > MAX_SEGMENTS {
        return Err(sparse_invalid(offset, "too many segments"));
    }
    let mut end = 0u64;
    let mut sum = 0u64;
    for s in map {
        let stop =
            s.at.checked_add(s.len)
                .filter(|&e| s.at >= end && e <= real_size)
                .ok_or_else(|| {
                    sparse_invalid(
                        offset,
                        "its map has segments out of order, overlapping or beyond its size",
                    )
                })?;
        end = stop;
        sum += s.len;
    }
    if sum != stored {
        return Err(sparse_invalid(
            offset,
            &format!("its map holds {sum} bytes but the archive stores {stored}"),
        ));
    }
    Ok(())
}

/// `len` bytes at `off`, or Truncated{`header`} when the stream ends first.
fn read_exact(
    read: &mut dyn FnMut(u64, usize) -> io::Result<Vec<u8>>,
    off: u64,
    len: usize,
    header: u64,
) -> Result<Vec<u8>, HeaderError> {
    let mut bytes = read(off, len).map_err(|source| HeaderError::Io {
        offset: off,
        source,
    })?;
    if bytes.len() < len {
        return Err(HeaderError::Truncated { offset: header });
    }
    bytes.truncate(len);
    Ok(bytes)
}

/// Decode the entry whose first header block is at `offset` of the archive stream, following
/// any number of extension headers (pax `x`, `g`, GNU `L`/`K`) up to the real header.
/// `read(off, len)` returns `len` bytes at `off` of the archive stream, or fewer at its end.
/// Ok(None) when the block at `offset` is all zeros (end of archive).
///
/// Offsets are bytes. No pax global header (`g`) before `offset` is applied (see
/// `decode_entry_in`); one inside the entry's chain of extension headers is. Extension data
/// above 64 MiB is rejected as `HeaderError::Invalid`, and so is an all-zero block right
/// after an extension header. The returned path has its trailing `/` removed (`/` stays `/`,
/// `./` becomes `.`).
pub fn decode_entry(
    read: &mut dyn FnMut(u64, usize) -> std::io::Result<Vec<u8>>,
    offset: u64,
) -> Result<Option<Decoded>, HeaderError> {
    decode_entry_in(read, offset, &[], None)
}

/// [`decode_entry`] with the records of the pax global headers in effect at `offset`
/// (`globals`: [`Globals::at`]) applied before the entry's own `x` records, which override
/// them. A global header inside the entry's chain applies to it and, through `seen` (pushed in
/// order), to the entries after it. A malformed global header is an error.
pub fn decode_entry_in(
    read: &mut dyn FnMut(u64, usize) -> std::io::Result<Vec<u8>>,
    offset: u64,
    globals: &[Record],
    mut seen: Option<&mut Vec<Global>>,
) -> Result<Option<Decoded>, HeaderError> {
    let mut ext = Extensions::default();
    let mut globals: Cow<'_, [Record]> = Cow::Borrowed(globals);
    // The entry's own pax records, applied after the global ones whatever their order in
    // the chain (GNU tar does the same).
    let mut own: Vec<(Vec<Record>, u64)> = Vec::new();
    let mut long_name: Option<Vec<u8>> = None;
    let mut long_link: Option<Vec<u8>> = None;
    let mut pos = offset;
    let block = loop {
        let block = read_exact(read, pos, BLOCK_USIZE, pos)?;
        if is_zero(&block) {
            if pos == offset {
                return Ok(None);
            }
            return Err(HeaderError::Invalid {
                offset: pos,
                what: "end-of-archive block right after an extension header".into(),
            });
        }
        if !checksum_ok(&block) {
            return Err(HeaderError::Checksum { offset: pos });
        }
        let flag = block[TYPEFLAG];
        if !matches!(flag, b'x' | b'g' | b'L' | b'K') {
            break block;
        }
        let size = parse_number(field(&block, SIZE))
            .and_then(|s| u64::try_from(s).ok())
            .filter(|&s| s <= MAX_EXTENSION_SIZE)
            .ok_or_else(|| HeaderError::Invalid {
                offset: pos,
                what: format!("bad size field in a '{}' extension header", flag as char),
            })?;
        let data = read_exact(read, pos + BLOCK, size as usize, pos)?;
        match flag {
            b'x' => own.push((parse_pax(&data, pos)?, pos)),
            b'g' => {
                let records = global_records(parse_pax(&data, pos)?);
                fold_globals(globals.to_mut(), &records);
                if let Some(seen) = seen.as_deref_mut() {
                    seen.push(Global {
                        from: pos + BLOCK + round_up(size),
                        records,
                    });
                }
            }
            b'L' => long_name = Some(cstr(&data).to_vec()),
            _ => long_link = Some(cstr(&data).to_vec()),
        }
        pos += BLOCK + round_up(size);
    };
    if !globals.is_empty() {
        ext.apply_pax(globals.into_owned(), offset)?;
    }
    for (records, at) in own {
        ext.apply_pax(records, at)?;
    }
    let pax_sparse = std::mem::take(&mut ext.sparse);
    let mut header = parse_ustar(&block, pos, ext, long_name, long_link)?;
    let flag = block[TYPEFLAG];
    let mut data = pos + BLOCK;
    let next_after = |data: u64, stored: u64| {
        stored
            .checked_add(BLOCK - 1)
            .and_then(|s| data.checked_add(s / BLOCK * BLOCK))
            .ok_or_else(|| HeaderError::Invalid {
                offset: pos,
                what: format!("size {stored} runs past the largest offset"),
            })
    };
    let mut sparse = None;
    let next = if flag == b'S' {
        // Old GNU sparse: extension blocks after the header, then the segments' data.
        let (extra, map) = old_gnu_sparse_map(read, pos, &block)?;
        data += extra;
        let real_size = parse_number(field(&block, OLD_GNU_REALSIZE))
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| sparse_invalid(pos, "bad real size field"))?;
        check_map(&map, real_size, header.size, pos)?;
        let next = next_after(data, header.size)?;
        header.size = real_size;
        header.kind = Kind::File;
        sparse = Some(map);
        next
    } else if header.kind == Kind::File
        && (pax_sparse.major.is_some()
            || pax_sparse.real_size.is_some()
            || !pax_sparse.map.is_empty())
    {
        let next = next_after(data, header.size)?;
        let mut stored = header.size;
        let map = if pax_sparse.major == Some(1) {
            let (map_len, map) = pax_1_0_map(read, data, stored, pos)?;
            stored = stored
                .checked_sub(map_len)
                .ok_or_else(|| sparse_invalid(pos, "the 1.0 map runs past the data"))?;
            data += map_len;
            map
        } else if pax_sparse.major.is_some() {
            return Err(sparse_invalid(pos, "unknown GNU.sparse.major version"));
        } else {
            if pax_sparse.pending.is_some() {
                return Err(sparse_invalid(pos, "an offset without numbytes"));
            }
            pax_sparse.map
        };
        if pax_sparse.count.is_some_and(|c| c != map.len() as u64) {
            return Err(sparse_invalid(
                pos,
                "GNU.sparse.numblocks does not match its map",
            ));
        }
        let real_size = pax_sparse
            .real_size
            .ok_or_else(|| sparse_invalid(pos, "no GNU.sparse.size or realsize"))?;
        check_map(&map, real_size, stored, pos)?;
        if let Some(mut name) = pax_sparse.name {
            while name.len() > 1 && name.ends_with(b"/") {
                name.pop();
            }
            header.path = name;
        }
        header.size = real_size;
        sparse = Some(map);
        next
    } else if flag_has_data(flag) {
        next_after(data, header.size)?
    } else {
        data
    };
    Ok(Some(Decoded {
        header,
        start: offset,
        data,
        next,
        sparse,
    }))
}

/// Decodes a real (non-extension) header block at archive byte `offset`, then applies the
/// extensions that preceded it.
fn parse_ustar(
    block: &[u8],
    offset: u64,
    ext: Extensions,
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
) -> Result<Header, HeaderError> {
    let magic = &block[MAGIC.0..VERSION.0 + VERSION.1];
    let posix = &magic[..6] == b"ustar\0";
    let gnu = magic == MAGIC_GNU;
    let number = |f: (usize, usize), what: &str| {
        parse_number(field(block, f)).ok_or_else(|| HeaderError::Invalid {
            offset,
            what: format!("bad {what} field"),
        })
    };
    let unsigned = |f: (usize, usize), what: &str| {
        number(f, what).and_then(|v| {
            u64::try_from(v).map_err(|_| HeaderError::Invalid {
                offset,
                what: format!("{what} field out of range"),
            })
        })
    };
    let dev = |f: (usize, usize), what: &str| {
        unsigned(f, what).and_then(|v| {
            u32::try_from(v).map_err(|_| HeaderError::Invalid {
                offset,
                what: format!("{what} field out of range"),
            })
        })
    };

    let mut path = match long_name {
        Some(name) => name,
        None => {
            let name = cstr(field(block, NAME));
            let prefix = if posix {
                cstr(field(block, PREFIX))
            } else {
                &b""[..]
            };
            let mut p = prefix.to_vec();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(name);
            p
        }
    };
    if let Some(p) = ext.path {
        path = p;
    }
    let flag = block[TYPEFLAG];
    let kind = match flag {
        b'0' | 0 | b'7' if path.ends_with(b"/") => Kind::Dir,
        b'0' | 0 | b'7' => Kind::File,
        b'1' => Kind::HardLink,
        b'2' => Kind::Symlink,
        b'3' => Kind::Char,
        b'4' => Kind::Block,
        b'5' => Kind::Dir,
        b'6' => Kind::Fifo,
        // A GNU dumpdir (incremental archives): a directory whose data lists its contents.
        b'D' => Kind::Dir,
        other => Kind::Other(other),
    };
    while path.len() > 1 && path.ends_with(b"/") {
        path.pop();
    }

    let with_names = posix || gnu;
    let (uname, gname) = if with_names {
        (
            cstr(field(block, UNAME)).to_vec(),
            cstr(field(block, GNAME)).to_vec(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    // Device numbers mean something only for devices (GNU tar reads them only then; some tars
    // leave the fields blank otherwise).
    let (dev_major, dev_minor) = if with_names && matches!(kind, Kind::Char | Kind::Block) {
        (dev(DEVMAJOR, "devmajor")?, dev(DEVMINOR, "devminor")?)
    } else {
        (0, 0)
    };
    let mtime_field = number(MTIME, "mtime")?;
    let (mtime, mtime_nsec) = match ext.mtime {
        Some(t) => t,
        None => (
            i64::try_from(mtime_field).map_err(|_| HeaderError::Invalid {
                offset,
                what: "mtime field out of range".into(),
            })?,
            0,
        ),
    };
    let mode = u32::try_from(unsigned(MODE, "mode")? & 0o7777).unwrap_or(0);
    Ok(Header {
        path,
        kind,
        mode,
        uid: match ext.uid {
            Some(v) => v,
            None => unsigned(UID, "uid")?,
        },
        gid: match ext.gid {
            Some(v) => v,
            None => unsigned(GID, "gid")?,
        },
        uname: ext.uname.unwrap_or(uname),
        gname: ext.gname.unwrap_or(gname),
        size: match ext.size {
            Some(v) => v,
            None => unsigned(SIZE, "size")?,
        },
        mtime,
        mtime_nsec,
        link: ext
            .link
            .or(long_link)
            .unwrap_or_else(|| cstr(field(block, LINKNAME)).to_vec()),
        dev_major,
        dev_minor,
        xattrs: ext.xattrs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_600_000_000;

    fn hdr(path: &[u8], kind: Kind) -> Header {
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
        }
    }

    fn decode_at(buf: &[u8], offset: u64) -> Result<Option<Decoded>, HeaderError> {
        let mut read = |off: u64, len: usize| -> io::Result<Vec<u8>> {
            let start = (off as usize).min(buf.len());
            let end = (start + len).min(buf.len());
            Ok(buf[start..end].to_vec())
        };
        decode_entry(&mut read, offset)
    }

    fn encode(h: &Header) -> Vec<u8> {
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
    fn round_trip(h: &Header) -> Vec<u8> {
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
    fn records(buf: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        if buf[TYPEFLAG] != b'x' {
            return Vec::new();
        }
        let size = parse_number(field(buf, SIZE)).unwrap() as usize;
        parse_pax(&buf[512..512 + size], 0).unwrap()
    }

    fn keys(buf: &[u8]) -> Vec<String> {
        records(buf)
            .into_iter()
            .map(|(k, _)| String::from_utf8(k).unwrap())
            .collect()
    }

    fn record(buf: &[u8], key: &str) -> Option<Vec<u8>> {
        records(buf)
            .into_iter()
            .find(|(k, _)| k == key.as_bytes())
            .map(|(_, v)| v)
    }

    /// The mark of mfu-rs's first entry: a pax `comment` record that every reader ignores
    /// (the entry decodes as without it), found by [`mfu_marked`] in the archive's first
    /// bytes; an unmarked entry, one cut short, or a damaged one is not marked.
    #[test]
    fn the_first_entry_carries_the_mark_and_decodes_as_without_it() {
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
    fn ustar(buf: &[u8]) -> &[u8] {
        &buf[buf.len() - 512..]
    }

    fn repeat(b: u8, n: usize) -> Vec<u8> {
        vec![b; n]
    }

    /// A path of `prefix_len` bytes, '/', `name_len` bytes (no other '/').
    fn split_path(prefix_len: usize, name_len: usize) -> Vec<u8> {
        let mut p = repeat(b'p', prefix_len);
        p.push(b'/');
        p.extend(repeat(b'n', name_len));
        p
    }

    fn reseal(block: &mut [u8]) {
        let b: &mut [u8; 512] = (&mut block[..512]).try_into().unwrap();
        seal(b);
    }

    // ---- encoding: exact bytes ---------------------------------------------------------

    #[test]
    fn exact_bytes_of_a_short_file() {
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
    fn mode_keeps_only_permission_bits() {
        let mut h = hdr(b"f", Kind::File);
        h.mode = 0o104755; // type bits + setuid
        let buf = encode(&h);
        assert_eq!(field(&buf, MODE), b"0004755\0");
        assert_eq!(decode_at(&buf, 0).unwrap().unwrap().header.mode, 0o4755);
    }

    #[test]
    fn type_flags() {
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
    fn round_trip_short_file_and_its_data() {
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
    fn round_trip_dir_stores_a_trailing_slash() {
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
    fn root_and_dot_dirs_keep_a_name() {
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
    fn round_trip_links_short_and_long() {
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
    fn round_trip_path_lengths() {
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
    fn split_uses_a_slash_that_fits() {
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
    fn round_trip_non_ascii_paths() {
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
    fn round_trip_huge_sizes() {
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
    fn round_trip_big_ids() {
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
    fn round_trip_negative_and_fractional_mtimes() {
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
    fn round_trip_long_and_non_ascii_owner_names() {
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
    fn round_trip_xattrs_with_binary_values() {
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
    fn pax_records_come_in_the_documented_order() {
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
    fn round_trip_devices() {
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
    fn pax_header_block_fields() {
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
    fn has_data_follows_the_flag() {
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

    #[test]
    fn parse_pax_records() {
        let data =
            b"30 mtime=1600000000.123456789\n18 path=a=b\nc d\0e\n21 SCHILY.xattr.u.x=\n\0\0\0";
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
        field_mut(&mut block, CHKSUM)
            .copy_from_slice(format!("{:06o}\0 ", unsigned + 1).as_bytes());
        assert_eq!(classify(&block), BlockKind::NotHeader);
        assert!(matches!(
            decode_at(&block, 0),
            Err(HeaderError::Checksum { offset: 0 })
        ));
    }

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

    const GNU_TAR: &[u8] = include_bytes!("testdata/gnu.tar");
    const PAX_TAR: &[u8] = include_bytes!("testdata/pax.tar");
    const USTAR_TAR: &[u8] = include_bytes!("testdata/ustar.tar");
    const PYTHON_TAR: &[u8] = include_bytes!("testdata/python.tar");

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
}

#[cfg(test)]
#[path = "fuzz_tests.rs"]
mod fuzz_tests;
