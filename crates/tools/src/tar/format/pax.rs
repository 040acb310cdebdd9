//! pax extended header records. Kept from the crate: its `PaxExtensions` splits records at
//! newlines, so a value holding one (a path or an attribute value with `\n`) is misread, and
//! it has no writer outside `Builder`; the `GNU.sparse.*` records are not read by it at all.

use super::sparse::{sparse_invalid, MAX_SEGMENTS};
use super::{number::is_zero, HeaderError, ProjectId, Segment, PROJID_KEY, PROJINHERIT_KEY};

/// Nanoseconds per second.
pub(super) const NANOS: i128 = 1_000_000_000;

/// One pax record, `LEN KEY=VALUE\n`, LEN counting the whole record including its own digits.
pub(super) fn pax_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
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
pub(super) fn pax_time(sec: i64, nsec: u32) -> Vec<u8> {
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
pub(super) fn decimal_digits(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// Appends `v` in decimal (without the formatting machinery: it runs for every entry).
pub(super) fn put_decimal(out: &mut Vec<u8>, v: u64) {
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
pub(super) fn parse_pax_time(value: &[u8]) -> Option<(i64, u32)> {
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
pub(super) fn parse_decimal(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
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

/// The `size` record of pax data, if any: bytes; the last `size` record wins; `None` when
/// there is none or the data is malformed. (Tests read archives with it.)
#[cfg(test)]
pub fn pax_size(data: &[u8]) -> Option<u64> {
    let records = parse_pax(data, 0).ok()?;
    let (_, value) = records.iter().rev().find(|(k, _)| k == b"size")?;
    parse_decimal(value)
}

/// Overrides collected from the extension headers in front of one entry.
#[derive(Default)]
pub(super) struct Extensions {
    pub(super) path: Option<Vec<u8>>,
    pub(super) link: Option<Vec<u8>>,
    pub(super) size: Option<u64>,
    pub(super) uid: Option<u64>,
    pub(super) gid: Option<u64>,
    pub(super) uname: Option<Vec<u8>>,
    pub(super) gname: Option<Vec<u8>>,
    pub(super) mtime: Option<(i64, u32)>,
    pub(super) xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    pub(super) projid: ProjectId,
    pub(super) sparse: PaxSparse,
}

/// The `GNU.sparse.*` records of a pax header (GNU tar's sparse formats 0.0, 0.1 and 1.0).
#[derive(Default)]
pub(super) struct PaxSparse {
    /// `GNU.sparse.major` (1 for format 1.0, whose map is at the start of the data).
    pub(super) major: Option<u64>,
    /// `GNU.sparse.name`: the real name (0.1, 1.0; the ustar name is `GNUSparseFile.N/...`).
    pub(super) name: Option<Vec<u8>>,
    /// `GNU.sparse.size` (0.x) or `GNU.sparse.realsize` (1.0): the file's real size (bytes).
    pub(super) real_size: Option<u64>,
    /// `GNU.sparse.numblocks`: the number of segments the map must have.
    pub(super) count: Option<u64>,
    /// The map from repeated `GNU.sparse.offset`/`numbytes` records (0.0) or from
    /// `GNU.sparse.map` (0.1).
    pub(super) map: Vec<Segment>,
    /// An `offset` record of 0.0 waiting for its `numbytes`.
    pub(super) pending: Option<u64>,
}

impl Extensions {
    /// Applies the records of one pax `x` header (at archive byte `offset`). An empty value
    /// removes an earlier override (POSIX), except for attributes, whose value may be empty.
    pub(super) fn apply_pax(
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
                PROJID_KEY => {
                    let id = number(&value, &key, offset, |v| {
                        parse_decimal(v).and_then(|n| u32::try_from(n).ok())
                    })?;
                    self.projid.id = id.unwrap_or(0);
                }
                PROJINHERIT_KEY => self.projid.inherit = value == b"1",
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
