//! The zstd seekable format: the tar stream cut into independent zstd frames, followed by a
//! skippable frame holding a seek table (`{compressed u32 LE, decompressed u32 LE[, checksum
//! u32 LE]}` per frame, then `{frames u32 LE, descriptor u8, 0x8F92EAB1 u32 LE}`; bit 7 of the
//! descriptor says the checksums are there). Any zstd decoder reads the whole stream
//! (`zstd -dc A.tar.zst | tar -x`); mfu-rs finds every frame from the table and decompresses
//! them on many ranks at once.
//!
//! mfu-rs writes every frame with its zstd content checksum and the same value in the table, so
//! a flipped bit is found by `zstd -t`, by any decoder and by mfu-rs; reading, it verifies the
//! frame's checksum (zstd does) and the table's (the low 32 bits of the frame's XXH64). Tables
//! without checksums (older mfu-rs archives) still read.

use super::io::{invalid, pread_exact};
use super::kind::Codec;
pub use super::table::FrameSizes;
use super::table::{Frame, SeekTable};
use rustix::fd::BorrowedFd;
use std::io::{self, Read};

pub use super::kind::ZSTD_MAGIC;
/// Magic of the skippable frame that carries the seek table.
pub const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
/// Last four bytes of a seekable stream.
pub const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
/// Bytes of the seek table's footer.
const FOOTER: u64 = 9;
/// Bytes of the seek table's footer (for writers placing it).
pub const TABLE_FOOTER: u64 = FOOTER;

/// Descriptor bit: each table entry carries a checksum.
const CHECKSUM_FLAG: u8 = 0x80;
/// Descriptor bits that must be zero.
const RESERVED_BITS: u8 = 0x7C;
/// Content_Checksum_flag in a zstd frame header's descriptor byte.
const FRAME_CHECKSUM_FLAG: u8 = 0x04;
/// Bytes of the longest zstd frame header (magic included).
const MAX_FRAME_HEADER: usize = 18;
/// Bytes a zstd block can decode to (128 KiB), and the bytes of a block's header: no frame
/// decodes to more than this per 3 compressed bytes (an RLE block).
const MAX_BLOCK: u64 = 128 << 10;

/// The skippable frame holding the seek table of these frames, with their checksums.
#[cfg(test)]
pub fn encode_table(frames: &[FrameSizes]) -> Vec<u8> {
    encode(frames, true)
}

/// A seek table without checksums, as mfu-rs wrote before it had them (tests of old archives).
#[cfg(test)]
pub fn encode_table_without_checksums(frames: &[FrameSizes]) -> Vec<u8> {
    encode(frames, false)
}

#[cfg(test)]
fn encode(frames: &[FrameSizes], checksums: bool) -> Vec<u8> {
    let n = frames.len() as u64;
    let mut out = Vec::with_capacity(table_len(n, checksums) as usize);
    out.extend_from_slice(&table_head(n, checksums));
    out.extend_from_slice(&table_entries(frames, checksums));
    out.extend_from_slice(&table_footer(n, checksums));
    out
}

/// Bytes of an entry of the seek table.
fn entry_len(checksums: bool) -> u64 {
    if checksums {
        12
    } else {
        8
    }
}

/// Bytes of the whole skippable frame of a seek table of `frames` frames.
pub fn table_len(frames: u64, checksums: bool) -> u64 {
    8 + frames * entry_len(checksums) + FOOTER
}

/// Whether a seek table of `frames` frames (with checksums) fits the format: the frame count
/// and the skippable frame's length are u32.
pub fn table_fits(frames: u64) -> bool {
    table_len(frames, true) - 8 <= u64::from(u32::MAX)
}

/// Where the table entry of frame `i` starts within the skippable frame (bytes): the table of
/// many ranks is written in pieces, each rank its frames' entries (see [`table_entries`]).
pub fn table_entry_at(i: u64) -> u64 {
    8 + i * entry_len(true)
}

/// The skippable frame's header of a table of `frames` frames: its magic and length.
pub fn table_head(frames: u64, checksums: bool) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    out[4..].copy_from_slice(&((table_len(frames, checksums) - 8) as u32).to_le_bytes());
    out
}

/// The table entries of consecutive `frames`.
pub fn table_entries(frames: &[FrameSizes], checksums: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(frames.len() * entry_len(checksums) as usize);
    for f in frames {
        out.extend_from_slice(&f.compressed.to_le_bytes());
        out.extend_from_slice(&f.decompressed.to_le_bytes());
        if checksums {
            out.extend_from_slice(&f.checksum.to_le_bytes());
        }
    }
    out
}

/// The table's footer: the frame count, the descriptor, the seekable magic.
pub fn table_footer(frames: u64, checksums: bool) -> [u8; FOOTER as usize] {
    let mut out = [0u8; FOOTER as usize];
    out[..4].copy_from_slice(&(frames as u32).to_le_bytes());
    out[4] = if checksums { CHECKSUM_FLAG } else { 0 };
    out[5..].copy_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
    out
}

/// The checksum of a frame made by [`compress_frame`]: its last four bytes, zstd's content
/// checksum (the low 32 bits of the XXH64 of the decompressed bytes, as the seek table holds).
pub fn frame_checksum(frame: &[u8]) -> u32 {
    frame.len().checked_sub(4).map_or(0, |at| {
        u32::from_le_bytes(frame[at..].try_into().expect("4 bytes"))
    })
}

/// Whether the zstd frame `raw` carries its own content checksum (in its last four bytes).
fn has_frame_checksum(raw: &[u8]) -> bool {
    raw.len() >= 9
        && u32::from_le_bytes(raw[0..4].try_into().expect("4 bytes")) == ZSTD_MAGIC
        && raw[4] & FRAME_CHECKSUM_FLAG != 0
}

/// Where the zstd frame at `at` in the file `fd` of `len` bytes ends, found from its frame
/// header and its blocks' headers (one small read each, nothing decompressed); `None` when
/// it does not start with a frame header or runs past the end of the file.
fn zstd_frame_end(fd: BorrowedFd<'_>, len: u64, at: u64) -> Option<u64> {
    let mut head = [0u8; 5];
    if at + 5 > len {
        return None;
    }
    pread_exact(fd, &mut head, at).ok()?;
    if u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")) != ZSTD_MAGIC {
        return None;
    }
    // Frame header descriptor (RFC 8878 3.1.1.1.1): content size flag, single segment,
    // reserved, checksum, dictionary id flag.
    let fhd = head[4];
    if fhd & 0x08 != 0 {
        return None;
    }
    let single = fhd & 0x20 != 0;
    let fcs = match fhd >> 6 {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dict = [0, 1, 2, 4][usize::from(fhd & 3)];
    let checksum = if fhd & 0x04 != 0 { 4 } else { 0 };
    let mut pos = at + 5 + u64::from(!single) + dict + fcs as u64;
    loop {
        let mut b = [0u8; 3];
        if pos + 3 > len {
            return None;
        }
        pread_exact(fd, &mut b, pos).ok()?;
        let block = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
        let size = u64::from(block >> 3);
        pos += 3 + match (block >> 1) & 3 {
            0 | 2 => size,
            1 => 1,
            _ => return None,
        };
        if block & 1 == 1 {
            break;
        }
    }
    pos += checksum;
    (pos <= len).then_some(pos)
}

/// What is missing at the end of the zstd file `fd` of `len` bytes without a seek table when
/// it has the layout of `--zstd` (several frames, then the skippable frame of the seek table)
/// but the file ends after its last frame or inside the skippable frame that follows: it was
/// cut where its seek table began. `None` for one frame (any zstd tool's), for frames followed
/// by a whole skippable frame (a seek table whose footer is damaged), or for a frame that does
/// not parse (the front-to-back read names it).
pub fn unended(fd: BorrowedFd<'_>, len: u64) -> Option<String> {
    let (mut at, mut frames) = (0u64, 0u64);
    while at < len {
        let mut magic = [0u8; 8];
        let n = (len - at).min(8) as usize;
        pread_exact(fd, &mut magic[..n], at).ok()?;
        if n >= 4 && u32::from_le_bytes(magic[0..4].try_into().expect("4 bytes")) == ZSTD_MAGIC {
            at = zstd_frame_end(fd, len, at)?;
            frames += 1;
            continue;
        }
        // Anything but the start of a skippable frame (magic 0x184D2A5?) after the frames:
        // not this layout.
        if n < 4
            || u32::from_le_bytes(magic[0..4].try_into().expect("4 bytes")) & !0xF
                != SKIPPABLE_MAGIC & !0xF
        {
            return None;
        }
        if n == 8 {
            let size = u64::from(u32::from_le_bytes(magic[4..8].try_into().expect("4 bytes")));
            if at + 8 + size <= len {
                // A whole skippable frame: the table is there (and damaged, or not a table).
                return None;
            }
        }
        // A skippable frame cut short.
        break;
    }
    (frames > 1).then(|| {
        format!(
            "{frames} zstd frames and no seek table after them (the file ends at byte {len}, \
             its last frame at byte {at})"
        )
    })
}

impl SeekTable {
    /// Read the seek table at the end of the file `fd` of `len` bytes. `Ok(None)` when the file
    /// does not end with a seekable footer; an error when it does but the table is damaged.
    pub fn read(fd: BorrowedFd<'_>, len: u64) -> io::Result<Option<SeekTable>> {
        if len < 8 + FOOTER {
            return Ok(None);
        }
        let mut foot = [0u8; FOOTER as usize];
        pread_exact(fd, &mut foot, len - FOOTER)?;
        if u32::from_le_bytes(foot[5..9].try_into().expect("4 bytes")) != SEEKABLE_MAGIC {
            return Ok(None);
        }
        let frames = u32::from_le_bytes(foot[0..4].try_into().expect("4 bytes")) as u64;
        let descriptor = foot[4];
        if descriptor & RESERVED_BITS != 0 {
            return Err(invalid(format!(
                "seek table: reserved descriptor bits set ({descriptor:#04x})"
            )));
        }
        let checksums = descriptor & CHECKSUM_FLAG != 0;
        let entry = if checksums { 12 } else { 8 };
        let table = frames * entry + FOOTER;
        if 8 + table > len {
            return Err(invalid(format!(
                "seek table of {frames} frames is larger than the file"
            )));
        }
        let mut raw = vec![0u8; (8 + table) as usize];
        pread_exact(fd, &mut raw, len - 8 - table)?;
        let magic = u32::from_le_bytes(raw[0..4].try_into().expect("4 bytes"));
        let size = u32::from_le_bytes(raw[4..8].try_into().expect("4 bytes")) as u64;
        if magic != SKIPPABLE_MAGIC || size != table {
            return Err(invalid("seek table: bad skippable frame header".into()));
        }
        let mut out = SeekTable {
            frames: Vec::new(),
            codec: Codec::Zstd,
        };
        let (mut c_at, mut d_at) = (0u64, 0u64);
        for (i, e) in raw[8..8 + (frames * entry) as usize]
            .chunks_exact(entry as usize)
            .enumerate()
        {
            let c_len = u32::from_le_bytes(e[0..4].try_into().expect("4 bytes"));
            let d_len = u32::from_le_bytes(e[4..8].try_into().expect("4 bytes"));
            let checksum =
                checksums.then(|| u32::from_le_bytes(e[8..12].try_into().expect("4 bytes")));
            // No zstd frame decodes to more than a block per block header.
            if d_len as u64 > (c_len as u64 / 3 + 1) * MAX_BLOCK {
                return Err(invalid(format!(
                    "seek table: frame {i} of {c_len} bytes cannot decode to {d_len} bytes"
                )));
            }
            out.frames.push(Frame {
                c_at,
                c_len,
                d_at,
                d_len,
                checksum,
            });
            c_at += c_len as u64;
            d_at += d_len as u64;
        }
        if c_at != len - 8 - table {
            return Err(invalid(format!(
                "seek table: frames hold {c_at} bytes, the file has {} before the table",
                len - 8 - table
            )));
        }
        out.check_frame_headers(fd)?;
        Ok(Some(out))
    }

    /// Check that every frame starts where the table says with a zstd frame header and, when
    /// the header gives its content size, holds the bytes the table says: a damaged size
    /// would shift the stream offsets of all the frames after it, whose own checksums still
    /// pass. One small read per frame.
    fn check_frame_headers(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut head = [0u8; MAX_FRAME_HEADER];
        for (i, f) in self.frames.iter().enumerate() {
            let n = (f.c_len as usize).min(MAX_FRAME_HEADER);
            pread_exact(fd, &mut head[..n], f.c_at)?;
            let damaged = |what: String| {
                invalid(format!(
                    "seek table: zstd frame {i} at byte {}: {what}",
                    f.c_at
                ))
            };
            if n < 4 || u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")) != ZSTD_MAGIC {
                return Err(damaged("not a zstd frame".into()));
            }
            match zstd::zstd_safe::get_frame_content_size(&head[..n]) {
                Ok(Some(size)) if size != f.d_len as u64 => {
                    return Err(damaged(format!(
                        "holds {size} bytes, the seek table says {}",
                        f.d_len
                    )))
                }
                Ok(_) => {}
                Err(_) => return Err(damaged("bad frame header".into())),
            }
        }
        Ok(())
    }

    /// [`SeekTable::decompress`] of the zstd frame `i`, whose bytes are `raw`.
    pub(super) fn decompress_zstd(&self, raw: Vec<u8>, i: usize) -> io::Result<Vec<u8>> {
        let f = self.frames[i];
        let damaged = |what: String| invalid(format!("zstd frame {i} at byte {}: {what}", f.c_at));
        // The frame must fill exactly the bytes the table gives it: a damaged header (its
        // checksum flag cleared, say) makes it end early, and the bytes left over would go
        // unchecked.
        match zstd::zstd_safe::find_frame_compressed_size(&raw) {
            Ok(n) if n == raw.len() => {}
            Ok(n) => {
                return Err(damaged(format!(
                    "the frame is {n} bytes, the seek table says {}",
                    raw.len()
                )))
            }
            Err(_) => return Err(damaged("bad frame".into())),
        }
        // Decoded as a stream: memory grows with what the frame really holds, never with what
        // a damaged table claims; one byte more than the table says is enough to see a
        // mismatch.
        let mut out = Vec::with_capacity((f.d_len as usize).min(8 << 20));
        zstd::stream::read::Decoder::with_buffer(&raw[..])
            .map(|d| d.single_frame())
            .and_then(|d| d.take(f.d_len as u64 + 1).read_to_end(&mut out))
            .map_err(|e| damaged(e.to_string()))?;
        if out.len() != f.d_len as usize {
            return Err(damaged(format!(
                "{} bytes, the seek table says {}",
                out.len(),
                f.d_len
            )));
        }
        if let Some(want) = f.checksum {
            // A frame with its own checksum was verified by zstd against it (as `zstd -dc`
            // verifies it): a table's copy that differs is the damaged one, a field no
            // decoder reads, and the frame's bytes are good. Only a frame without its own
            // checksum (other tools' layout) is checked by the table's.
            if !has_frame_checksum(&raw) && xxhash_rust::xxh64::xxh64(&out, 0) as u32 != want {
                return Err(damaged("checksum mismatch: the data is corrupt".into()));
            }
        }
        Ok(out)
    }
}

/// Compress `data` as one independent frame (with its content size and content checksum in
/// the frame). Each thread keeps its compression context: a new one per frame would allocate
/// and clear megabytes of tables every time.
pub fn compress_frame(data: &[u8], level: i32) -> io::Result<Vec<u8>> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with_borrow_mut(|slot| {
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            let mut c = zstd::bulk::Compressor::new(level)?;
            c.include_checksum(true)?;
            *slot = Some((level, c));
        }
        let (_, c) = slot.as_mut().expect("set above");
        c.compress(data)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::test_rng::Rng;
    use rustix::fd::AsFd;
    use std::io::{Read, Seek, Write};

    /// The frames of a zstd file are walked by their block headers (raw, RLE and compressed
    /// blocks, with and without checksums): several frames that end the file, or are followed
    /// by a skippable frame cut short, are a cut `--zstd` archive; one frame, or frames followed
    /// by a whole skippable frame, are not.
    #[test]
    fn frames_without_their_seek_table_are_found_by_walking_block_headers() {
        let noise = crate::engine::test_rng::noise(5, 300_000);
        let zeros = vec![0u8; 300_000];
        let mut text = Vec::new();
        for i in 0..20_000 {
            text.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let mut frames = Vec::new();
        for (part, checksum) in [(&noise, true), (&zeros, false), (&text, true)] {
            let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            e.include_checksum(checksum).unwrap();
            e.write_all(part).unwrap();
            frames.push(e.finish().unwrap());
        }
        let file = |bytes: &[u8]| {
            let mut f = tempfile::tempfile().unwrap();
            f.write_all(bytes).unwrap();
            f
        };
        let all = frames.concat();
        let f = file(&all);
        let got = unended(f.as_fd(), all.len() as u64).expect("three frames, no table");
        assert!(got.starts_with("3 zstd frames"), "{got}");
        for one in &frames {
            assert_eq!(unended(file(one).as_fd(), one.len() as u64), None);
        }
        let mut skip = SKIPPABLE_MAGIC.to_le_bytes().to_vec();
        skip.extend_from_slice(&20u32.to_le_bytes());
        skip.extend_from_slice(&[7u8; 20]);
        let whole = [all.clone(), skip.clone()].concat();
        assert_eq!(unended(file(&whole).as_fd(), whole.len() as u64), None);
        let short = &whole[..whole.len() - 3];
        assert!(unended(file(short).as_fd(), short.len() as u64).is_some());
        // A frame cut inside: not this layout's missing end (the decoder names the cut).
        let inside = &all[..all.len() - 10];
        assert_eq!(unended(file(inside).as_fd(), inside.len() as u64), None);
    }

    /// Frames of `parts` compressed by [`compress_frame`], then `table` of their sizes.
    pub(crate) fn seekable(parts: &[Vec<u8>], table: fn(&[FrameSizes]) -> Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        let mut sizes = Vec::new();
        for p in parts {
            let c = compress_frame(p, 3).unwrap();
            sizes.push(FrameSizes {
                compressed: c.len() as u32,
                decompressed: p.len() as u32,
                checksum: frame_checksum(&c),
            });
            out.extend_from_slice(&c);
        }
        out.extend_from_slice(&table(&sizes));
        out
    }

    fn file_of(bytes: &[u8]) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        file
    }

    fn parts() -> Vec<Vec<u8>> {
        (0..3u8)
            .map(|i| (0..100_000u32).map(|x| (x % 251) as u8 ^ i).collect())
            .collect()
    }

    #[test]
    fn frames_and_table_round_trip_and_decode_as_one_stream() {
        let parts = parts();
        let mut file = file_of(&seekable(&parts, encode_table));
        let len = file.metadata().unwrap().len();
        let t = SeekTable::read(file.as_fd(), len).unwrap().unwrap();
        assert_eq!(t.frames.len(), 3);
        assert!(t.frames.iter().all(|f| f.checksum.is_some()));
        assert_eq!(t.decompressed_len(), 300_000);
        assert_eq!(t.frame_at(0), 0);
        assert_eq!(t.frame_at(99_999), 0);
        assert_eq!(t.frame_at(100_000), 1);
        assert_eq!(t.frame_at(10_000_000), 2);
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(&t.decompress(file.as_fd(), i).unwrap(), p);
        }
        // A plain zstd decoder reads the frames as one stream and skips the table.
        let mut all = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut all).unwrap();
        assert_eq!(zstd::stream::decode_all(&all[..]).unwrap(), parts.concat());
    }

    #[test]
    fn files_without_a_table_are_not_seekable_and_damaged_tables_are_errors() {
        let mut file = file_of(&compress_frame(b"hello", 3).unwrap());
        let len = file.metadata().unwrap().len();
        assert_eq!(SeekTable::read(file.as_fd(), len).unwrap(), None);
        // A table claiming more compressed bytes than precede it.
        let table = encode_table(&[FrameSizes {
            compressed: 1000,
            decompressed: 5,
            checksum: 0,
        }]);
        file.write_all(&table).unwrap();
        let len = file.metadata().unwrap().len();
        assert!(SeekTable::read(file.as_fd(), len).is_err());
    }

    #[test]
    fn a_corrupt_frame_is_an_error_naming_it_and_tables_without_checksums_still_read() {
        let parts = parts();
        // Frame 1 flipped in its last data byte before the content checksum.
        let mut bytes = seekable(&parts, encode_table);
        let c0 = compress_frame(&parts[0], 3).unwrap().len();
        let c1 = compress_frame(&parts[1], 3).unwrap().len();
        bytes[c0 + c1 - 5] ^= 0x40;
        let file = file_of(&bytes);
        let t = SeekTable::read(file.as_fd(), bytes.len() as u64)
            .unwrap()
            .unwrap();
        assert_eq!(t.decompress(file.as_fd(), 0).unwrap(), parts[0]);
        let e = t.decompress(file.as_fd(), 1).unwrap_err().to_string();
        assert!(e.contains("zstd frame 1"), "{e}");
        // An older mfu-rs archive: frames and table without checksums.
        let mut old = Vec::new();
        let mut sizes = Vec::new();
        for p in &parts {
            let c = zstd::bulk::compress(p, 3).unwrap();
            sizes.push(FrameSizes {
                compressed: c.len() as u32,
                decompressed: p.len() as u32,
                checksum: 0,
            });
            old.extend_from_slice(&c);
        }
        old.extend_from_slice(&encode_table_without_checksums(&sizes));
        let file = file_of(&old);
        let t = SeekTable::read(file.as_fd(), old.len() as u64)
            .unwrap()
            .unwrap();
        assert!(t.frames.iter().all(|f| f.checksum.is_none()));
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(&t.decompress(file.as_fd(), i).unwrap(), p);
        }
        // Other tools' layout: frames without checksums, checksums in the table only.
        let mut foreign = old[..old.len() - encode_table_without_checksums(&sizes).len()].to_vec();
        for (s, p) in sizes.iter_mut().zip(&parts) {
            s.checksum = xxhash_rust::xxh64::xxh64(p, 0) as u32;
        }
        foreign.extend_from_slice(&encode_table(&sizes));
        let file = file_of(&foreign);
        let t = SeekTable::read(file.as_fd(), foreign.len() as u64)
            .unwrap()
            .unwrap();
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(&t.decompress(file.as_fd(), i).unwrap(), p);
        }
        // ... where a wrong checksum in the table is found.
        let at = foreign.len() - 9 - 12 * 3 + 12 + 8;
        foreign[at] ^= 1;
        let file = file_of(&foreign);
        let t = SeekTable::read(file.as_fd(), foreign.len() as u64)
            .unwrap()
            .unwrap();
        let e = t.decompress(file.as_fd(), 1).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
    }

    /// One mutation of `bytes`: bit flips, a truncation, a table field (count, sizes,
    /// checksums, descriptor) overwritten with an edge value, or bytes cut out of the middle.
    pub(crate) fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>, table_at: usize) {
        let n = bytes.len();
        match rng.below(5) {
            0 => {
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(n);
                    bytes[at] ^= 1 << rng.below(8);
                }
            }
            1 => bytes.truncate(rng.below(n)),
            2 | 3 => {
                // A u32 of the table or the footer (the count is at n - 9).
                let at = if rng.below(4) == 0 {
                    n - 9
                } else {
                    table_at + rng.below(n - table_at - 4)
                };
                let old = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
                let v = [
                    0,
                    1,
                    u32::MAX,
                    old.wrapping_add(1),
                    old.wrapping_sub(1),
                    old.wrapping_mul(2),
                    1 << 31,
                    rng.next() as u32,
                ][rng.below(8)];
                bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => {
                let at = rng.below(n);
                let len = rng.below(n - at).min(64);
                bytes.drain(at..at + len);
            }
        }
    }

    /// A frame whose header lost its checksum flag (so its checksum's 4 bytes fall outside the
    /// frame) and whose data then took a flipped bit decodes without zstd noticing; it must
    /// not fill fewer bytes than the table gives it. Found by the fuzz driver (seed
    /// 1795662710269793637, iteration 7021).
    #[test]
    fn a_frame_shorter_than_its_table_entry_is_damaged() {
        let mut rng = Rng::seeded(7);
        let noise: Vec<u8> = (0..20_000).map(|_| rng.next() as u8).collect();
        let parts = vec![noise, b"end".to_vec()];
        let mut bytes = seekable(&parts, encode_table_without_checksums);
        assert_eq!(bytes[4] & 0x04, 0x04, "mfu-rs frames carry their checksum");
        bytes[4] &= !0x04;
        bytes[5000] ^= 0x10;
        let file = file_of(&bytes);
        let t = SeekTable::read(file.as_fd(), bytes.len() as u64)
            .unwrap()
            .unwrap();
        let e = t.decompress(file.as_fd(), 0).unwrap_err().to_string();
        assert!(e.contains("the seek table says"), "{e}");
        assert_eq!(t.decompress(file.as_fd(), 1).unwrap(), b"end");
    }
}
