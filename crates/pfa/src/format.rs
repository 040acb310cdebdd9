//! The on-disk structures (header, footer, trailer) and their little-endian encoding; the
//! format is described in the crate's documentation.

/// The format version this crate writes into a new aggregate. It reads every version from
/// [`FIRST_FORMAT`] to this one, and a new version of an existing aggregate keeps the format
/// of that file's header.
pub const FORMAT: u32 = 2;
/// The oldest format version this crate reads (and appends versions to).
pub const FIRST_FORMAT: u32 = 1;
/// Bytes of the header at offset 0.
pub const HEADER_LEN: u64 = 48;
/// Bytes of a trailer (the last bytes of a complete aggregate).
pub const TRAILER_LEN: u64 = 144;

const HEADER_MAGIC: &[u8; 8] = b"MFU-PFA\n";
const FOOTER_MAGIC: &[u8; 8] = b"PFAFOOTR";
const TRAILER_MAGIC: &[u8; 8] = b"PFATRAIL";
/// The trailer's last 8 bytes: what [`crate::recover`] looks for going backwards.
pub(crate) const TRAILER_END: &[u8; 8] = b"LIARTAFP";

/// A BLAKE3 digest (32 bytes).
pub(crate) type Digest = [u8; 32];

/// BLAKE3 of `bytes`.
pub(crate) fn digest(bytes: &[u8]) -> Digest {
    *blake3::hash(bytes).as_bytes()
}

/// The checksum of a piece's `bytes` in an aggregate of format `format`: BLAKE3 in format 1;
/// in format 2 XXH3-128 (little-endian) in the first 16 bytes, zeros after (a check against
/// damage, not a digest: equal checksums are confirmed by comparing the bytes).
pub(crate) fn piece_checksum(format: u32, bytes: &[u8]) -> Digest {
    let mut h = PieceHasher::new(format);
    h.update(bytes);
    h.finalize()
}

/// A piece's checksum computed as its bytes come ([`piece_checksum`]).
pub(crate) enum PieceHasher {
    /// Format 1.
    Blake3(Box<blake3::Hasher>),
    /// Format 2.
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

impl PieceHasher {
    pub fn new(format: u32) -> PieceHasher {
        if format == 1 {
            PieceHasher::Blake3(Box::default())
        } else {
            PieceHasher::Xxh3(Box::default())
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            PieceHasher::Blake3(h) => {
                h.update(bytes);
            }
            PieceHasher::Xxh3(h) => h.update(bytes),
        }
    }

    pub fn finalize(&self) -> Digest {
        match self {
            PieceHasher::Blake3(h) => *h.finalize().as_bytes(),
            PieceHasher::Xxh3(h) => {
                let mut d = [0u8; 32];
                d[..16].copy_from_slice(&h.digest128().to_le_bytes());
                d
            }
        }
    }
}

/// Whether this crate reads (and appends to) files of format version `format`.
fn known(format: u32) -> bool {
    (FIRST_FORMAT..=FORMAT).contains(&format)
}

/// The aggregate's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// Chunk size (bytes).
    pub chunk_size: u64,
    /// Ranks of the first writer.
    pub ranks: u32,
    /// The file's format version (every version of the file is written in it).
    pub format: u32,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut b = [0u8; HEADER_LEN as usize];
        b[0..8].copy_from_slice(HEADER_MAGIC);
        b[8..12].copy_from_slice(&self.format.to_le_bytes());
        b[16..24].copy_from_slice(&self.chunk_size.to_le_bytes());
        b[24..28].copy_from_slice(&self.ranks.to_le_bytes());
        let check = digest(&b[0..32]);
        b[32..48].copy_from_slice(&check[..16]);
        b
    }

    /// The header in `b` (at least [`HEADER_LEN`] bytes). `Err(not_aggregate, what)`:
    /// `not_aggregate` when the magic is not there at all (some other file), else damaged.
    pub fn decode(b: &[u8]) -> Result<Header, (bool, String)> {
        if b.len() < HEADER_LEN as usize || &b[0..8] != HEADER_MAGIC {
            return Err((true, "no PFA header magic at offset 0".into()));
        }
        if digest(&b[0..32])[..16] != b[32..48] {
            return Err((
                false,
                "the header's checksum does not match (offset 0)".into(),
            ));
        }
        let format = u32_at(b, 8);
        if !known(format) {
            return Err((
                false,
                format!("format version {format}; this reader knows {FIRST_FORMAT} to {FORMAT}"),
            ));
        }
        let chunk_size = u64_at(b, 16);
        if crate::options::check_chunk_size(chunk_size).is_err() {
            return Err((false, format!("chunk size {chunk_size} in the header")));
        }
        Ok(Header {
            chunk_size,
            ranks: u32_at(b, 24),
            format,
        })
    }
}

/// A run of a piece's bytes in the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Extent {
    /// File offset (bytes).
    pub file_offset: u64,
    /// Length (bytes).
    pub len: u64,
}

impl Extent {
    /// The file offset just past it (bytes).
    pub fn end(&self) -> u64 {
        self.file_offset + self.len
    }
}

/// A piece of a stream: `len` bytes at logical offset `logical`, stored in one or two extents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Logical offset in the stream (bytes; a multiple of the chunk size).
    pub logical: u64,
    /// Length (bytes, 1..=chunk size).
    pub len: u64,
    /// The piece's checksum ([`piece_checksum`]).
    pub checksum: Digest,
    /// The extents (`count` of them used).
    pub extents: [Extent; 2],
    /// Extents used: 1 or 2.
    pub count: u8,
}

impl Piece {
    /// The extents used.
    pub fn extents(&self) -> &[Extent] {
        &self.extents[..self.count as usize]
    }
}

/// One stream of a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StreamEntry {
    pub name: Vec<u8>,
    pub meta: Vec<u8>,
    /// Bytes.
    pub size: u64,
    /// The rank that wrote it.
    pub rank: u32,
    pub pieces: Vec<Piece>,
}

/// A version's footer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Footer {
    pub version: u64,
    pub prev_end: u64,
    pub region_offset: u64,
    pub region_len: u64,
    pub ranks: u32,
    pub logical_bytes: u64,
    pub bytes_written: u64,
    pub chunks_written: u64,
    pub chunks_reused: u64,
    /// Sorted by name, names unique.
    pub streams: Vec<StreamEntry>,
}

/// A version's figures, in its trailer (and its footer): listing versions reads no footer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    pub ranks: u32,
    pub streams: u64,
    pub logical_bytes: u64,
    pub bytes_written: u64,
    pub chunks_written: u64,
    pub chunks_reused: u64,
}

/// A version's trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trailer {
    /// The file's format version.
    pub format: u32,
    pub version: u64,
    pub footer_offset: u64,
    pub footer_len: u64,
    pub footer_checksum: Digest,
    pub prev_end: u64,
    pub summary: Summary,
}

impl Trailer {
    pub fn encode(&self) -> [u8; TRAILER_LEN as usize] {
        let mut b = [0u8; TRAILER_LEN as usize];
        b[0..8].copy_from_slice(TRAILER_MAGIC);
        b[8..12].copy_from_slice(&self.format.to_le_bytes());
        b[12..16].copy_from_slice(&self.summary.ranks.to_le_bytes());
        b[16..24].copy_from_slice(&self.version.to_le_bytes());
        b[24..32].copy_from_slice(&self.footer_offset.to_le_bytes());
        b[32..40].copy_from_slice(&self.footer_len.to_le_bytes());
        b[40..72].copy_from_slice(&self.footer_checksum);
        let s = &self.summary;
        let fields = [
            self.prev_end,
            s.streams,
            s.logical_bytes,
            s.bytes_written,
            s.chunks_written,
            s.chunks_reused,
        ];
        for (i, v) in fields.into_iter().enumerate() {
            b[72 + 8 * i..80 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        let check = digest(&b[0..120]);
        b[120..136].copy_from_slice(&check[..16]);
        b[136..144].copy_from_slice(TRAILER_END);
        b
    }

    /// The trailer in `b` ([`TRAILER_LEN`] bytes) that ends at file offset `end`, checked
    /// (magics, checksum, format, and that its footer lies before it); `Err((magics_found,
    /// what))` otherwise.
    pub fn decode(b: &[u8], end: u64) -> Result<Trailer, (bool, String)> {
        if b.len() != TRAILER_LEN as usize
            || &b[136..144] != TRAILER_END
            || &b[0..8] != TRAILER_MAGIC
        {
            return Err((
                false,
                format!("no trailer magic in the {TRAILER_LEN} bytes before offset {end}"),
            ));
        }
        Trailer::decode_fields(b, end).map_err(|what| (true, what))
    }

    fn decode_fields(b: &[u8], end: u64) -> Result<Trailer, String> {
        if digest(&b[0..120])[..16] != b[120..136] {
            return Err(format!(
                "the trailer's checksum does not match (offset {})",
                end - TRAILER_LEN
            ));
        }
        let format = u32_at(b, 8);
        if !known(format) {
            return Err(format!(
                "trailer format version {format}; this reader knows {FIRST_FORMAT} to {FORMAT}"
            ));
        }
        let mut footer_checksum = [0u8; 32];
        footer_checksum.copy_from_slice(&b[40..72]);
        let t = Trailer {
            format,
            version: u64_at(b, 16),
            footer_offset: u64_at(b, 24),
            footer_len: u64_at(b, 32),
            footer_checksum,
            prev_end: u64_at(b, 72),
            summary: Summary {
                ranks: u32_at(b, 12),
                streams: u64_at(b, 80),
                logical_bytes: u64_at(b, 88),
                bytes_written: u64_at(b, 96),
                chunks_written: u64_at(b, 104),
                chunks_reused: u64_at(b, 112),
            },
        };
        let start = end - TRAILER_LEN;
        if t.footer_offset.checked_add(t.footer_len) != Some(start)
            || t.footer_offset < HEADER_LEN
            || t.version == 0
            || t.prev_end > t.footer_offset
        {
            return Err(format!(
                "the trailer at offset {start} names a footer ({} bytes at {}) that does not end \
                 where it begins",
                t.footer_len, t.footer_offset
            ));
        }
        Ok(t)
    }
}

/// Append the encoding of `s` (as in a footer) to `out`.
pub(crate) fn encode_stream(s: &StreamEntry, out: &mut Vec<u8>) {
    encode_stream_fields(&s.name, &s.meta, s.size, s.rank, &s.pieces, out);
}

/// Append the encoding of a stream given by its fields (as [`encode_stream`]) to `out`.
pub(crate) fn encode_stream_fields(
    name: &[u8],
    meta: &[u8],
    size: u64,
    rank: u32,
    pieces: &[Piece],
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(name);
    out.extend_from_slice(&(meta.len() as u32).to_le_bytes());
    out.extend_from_slice(meta);
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&rank.to_le_bytes());
    out.extend_from_slice(&(pieces.len() as u64).to_le_bytes());
    for p in pieces {
        out.extend_from_slice(&p.logical.to_le_bytes());
        out.extend_from_slice(&p.len.to_le_bytes());
        out.extend_from_slice(&p.checksum);
        out.push(p.count);
        for e in p.extents() {
            out.extend_from_slice(&e.file_offset.to_le_bytes());
            out.extend_from_slice(&e.len.to_le_bytes());
        }
    }
}

impl Footer {
    /// Its figures, as its trailer repeats them.
    pub fn summary(&self) -> Summary {
        Summary {
            ranks: self.ranks,
            streams: self.streams.len() as u64,
            logical_bytes: self.logical_bytes,
            bytes_written: self.bytes_written,
            chunks_written: self.chunks_written,
            chunks_reused: self.chunks_reused,
        }
    }

    /// The footer's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96 + self.streams.len() * 96);
        out.extend_from_slice(FOOTER_MAGIC);
        for v in [
            self.version,
            self.prev_end,
            self.region_offset,
            self.region_len,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.ranks.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        for v in [
            self.logical_bytes,
            self.bytes_written,
            self.chunks_written,
            self.chunks_reused,
            self.streams.len() as u64,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for s in &self.streams {
            encode_stream(s, &mut out);
        }
        out
    }

    /// The footer in `b` (checksum already verified), its streams checked against the file:
    /// `chunk_size` and `limit` (the footer's offset: no extent reaches past it). `Err(what)`
    /// when it does not decode or does not hold together.
    pub fn decode(b: &[u8], chunk_size: u64, limit: u64) -> Result<Footer, String> {
        let mut c = Cursor { b, at: 0 };
        if c.take(8)? != FOOTER_MAGIC {
            return Err("no footer magic".into());
        }
        let mut f = Footer {
            version: c.u64()?,
            prev_end: c.u64()?,
            region_offset: c.u64()?,
            region_len: c.u64()?,
            ranks: c.u32()?,
            ..Footer::default()
        };
        c.u32()?;
        f.logical_bytes = c.u64()?;
        f.bytes_written = c.u64()?;
        f.chunks_written = c.u64()?;
        f.chunks_reused = c.u64()?;
        let count = c.u64()?;
        // Each stream takes at least 28 bytes: no allocation from a forged count.
        if count > (b.len() as u64) / 28 {
            return Err(format!("{count} streams in {} bytes", b.len()));
        }
        f.streams.reserve(count as usize);
        for _ in 0..count {
            let s = decode_stream(&mut c, chunk_size, limit)?;
            if f.streams.last().is_some_and(|p| p.name >= s.name) {
                return Err(format!(
                    "streams not in name order at {}",
                    crate::error::shown(&s.name)
                ));
            }
            f.streams.push(s);
        }
        if c.at != b.len() {
            return Err(format!("{} bytes after the last stream", b.len() - c.at));
        }
        Ok(f)
    }
}

/// One stream at the cursor, checked: pieces at consecutive multiples of `chunk_size`,
/// adding up to its size, extents adding up to each piece and ending before `limit`.
fn decode_stream(c: &mut Cursor<'_>, chunk_size: u64, limit: u64) -> Result<StreamEntry, String> {
    let n = c.u32()? as usize;
    let name = c.take(n)?.to_vec();
    let n = c.u32()? as usize;
    let meta = c.take(n)?.to_vec();
    let size = c.u64()?;
    let rank = c.u32()?;
    let count = c.u64()?;
    let shown = || crate::error::shown(&name);
    if count != size.div_ceil(chunk_size) {
        return Err(format!(
            "stream {}: {count} chunks for {size} bytes",
            shown()
        ));
    }
    if count > (c.b.len() - c.at) as u64 / 65 {
        return Err(format!(
            "stream {}: {count} chunks past the footer's end",
            shown()
        ));
    }
    let mut pieces = Vec::with_capacity(count as usize);
    for i in 0..count {
        let logical = c.u64()?;
        let len = c.u64()?;
        let want = chunk_size.min(size - i * chunk_size);
        if logical != i * chunk_size || len != want {
            return Err(format!(
                "stream {}: chunk {i} at logical {logical} of {len} bytes (expected {} of {want})",
                shown(),
                i * chunk_size
            ));
        }
        let mut checksum = [0u8; 32];
        checksum.copy_from_slice(c.take(32)?);
        let count = c.take(1)?[0];
        if !(1..=2).contains(&count) {
            return Err(format!("stream {}: chunk {i} has {count} extents", shown()));
        }
        let mut extents = [Extent::default(); 2];
        let mut total = 0u64;
        for e in extents.iter_mut().take(count as usize) {
            e.file_offset = c.u64()?;
            e.len = c.u64()?;
            let end = e.file_offset.checked_add(e.len);
            if e.file_offset < HEADER_LEN || end.is_none_or(|end| end > limit) || e.len == 0 {
                return Err(format!(
                    "stream {}: chunk {i} has an extent of {} bytes at {} outside the data",
                    shown(),
                    e.len,
                    e.file_offset
                ));
            }
            total += e.len;
        }
        if total != len {
            return Err(format!(
                "stream {}: chunk {i}'s extents hold {total} bytes, not {len}",
                shown()
            ));
        }
        pieces.push(Piece {
            logical,
            len,
            checksum,
            extents,
            count,
        });
    }
    Ok(StreamEntry {
        name,
        meta,
        size,
        rank,
        pieces,
    })
}

/// Decode one rank's streams (as [`encode_stream`] wrote them, one after the other).
pub(crate) fn decode_streams(b: &[u8], chunk_size: u64) -> Result<Vec<StreamEntry>, String> {
    let mut c = Cursor { b, at: 0 };
    let mut out = Vec::new();
    while c.at < b.len() {
        out.push(decode_stream(&mut c, chunk_size, u64::MAX)?);
    }
    Ok(out)
}

/// Reads little-endian fields from a byte slice, failing (not panicking) past its end.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| format!("footer cut short at byte {} (wanted {n} more)", self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32_at(self.take(4)?, 0))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64_at(self.take(8)?, 0))
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Footer {
        let piece = |logical, len, at| Piece {
            logical,
            len,
            checksum: digest(&[logical as u8]),
            extents: [
                Extent {
                    file_offset: at,
                    len,
                },
                Extent::default(),
            ],
            count: 1,
        };
        Footer {
            version: 2,
            prev_end: 9000,
            region_offset: 12288,
            region_len: 8192,
            ranks: 3,
            logical_bytes: 5000,
            bytes_written: 5000,
            chunks_written: 2,
            chunks_reused: 0,
            streams: vec![
                StreamEntry {
                    name: b"a\xff".to_vec(),
                    meta: b"m".to_vec(),
                    size: 5000,
                    rank: 1,
                    pieces: vec![piece(0, 4096, 12288), piece(4096, 904, 16384)],
                },
                StreamEntry {
                    name: b"b".to_vec(),
                    meta: vec![],
                    size: 0,
                    rank: 0,
                    pieces: vec![],
                },
            ],
        }
    }

    #[test]
    fn footer_round_trips() {
        let f = sample();
        let b = f.encode();
        assert_eq!(Footer::decode(&b, 4096, 20480).unwrap(), f);
        // Every cut is refused, never a panic.
        for cut in 0..b.len() {
            assert!(
                Footer::decode(&b[..cut], 4096, 20480).is_err(),
                "cut at {cut}"
            );
        }
        // An extent past the footer's offset is refused.
        assert!(Footer::decode(&b, 4096, 17000).is_err());
    }

    #[test]
    fn header_and_trailer_round_trip_and_refuse_flips() {
        let h = Header {
            chunk_size: 1 << 20,
            ranks: 4,
            format: FORMAT,
        };
        let b = h.encode();
        assert_eq!(Header::decode(&b).unwrap(), h);
        for i in 0..b.len() {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert!(Header::decode(&bad).is_err(), "flip at {i}");
        }
        let t = Trailer {
            format: FORMAT,
            version: 3,
            footer_offset: 4096,
            footer_len: 100,
            footer_checksum: digest(b"x"),
            prev_end: 2048,
            summary: Summary {
                ranks: 5,
                streams: 6,
                logical_bytes: 7,
                bytes_written: 8,
                chunks_written: 9,
                chunks_reused: 10,
            },
        };
        let b = t.encode();
        assert_eq!(Trailer::decode(&b, 4196 + TRAILER_LEN).unwrap(), t);
        for i in 0..b.len() {
            let mut bad = b;
            bad[i] ^= 0x01;
            assert!(
                Trailer::decode(&bad, 4196 + TRAILER_LEN).is_err(),
                "flip at {i}"
            );
        }
    }

    #[test]
    fn piece_checksums_by_format() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        // Format 1: BLAKE3, as every version-1 file has it.
        assert_eq!(piece_checksum(1, &bytes), digest(&bytes));
        // Format 2: XXH3-128 in 16 bytes, then zeros; fed in parts or at once, the same.
        let two = piece_checksum(2, &bytes);
        assert_eq!(two[..16], xxhash_rust::xxh3::xxh3_128(&bytes).to_le_bytes());
        assert_eq!(two[16..], [0u8; 16]);
        let mut h = PieceHasher::new(2);
        for part in bytes.chunks(333) {
            h.update(part);
        }
        assert_eq!(h.finalize(), two);
        let mut other = bytes.clone();
        other[5000] ^= 1;
        assert_ne!(piece_checksum(2, &other), two);
        // Formats outside 1..=FORMAT are refused in the header.
        for format in [0, FORMAT + 1] {
            let mut b = Header {
                chunk_size: 4096,
                ranks: 1,
                format,
            }
            .encode();
            b[8..12].copy_from_slice(&format.to_le_bytes());
            assert!(Header::decode(&b).unwrap_err().1.contains("format version"));
        }
    }
}
