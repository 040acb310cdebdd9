//! The gzip layout of `tar -c --gzip`: the tar stream cut into frames of a fixed size, each an
//! independent gzip member, then an empty member that ends the file. Any gunzip reads the
//! members as one stream (`gzip -dc A.tar.gz | tar -t`: the last member adds no byte), and
//! mfu-rs finds every member without decompressing anything, so that several ranks decompress
//! members at once (BGZF's idea, with members of megabytes).
//!
//! Each member's header carries an extra field (RFC 1952 `FEXTRA`) with one subfield
//! `SI1 SI2 = 'M' 'F'`, 8 bytes: the member's whole length (u32 LE, header and trailer
//! included) and the bytes it decompresses to (u32 LE). The last member's extra field has one
//! subfield `'M' 'E'`, 24 bytes: the number of data members, the frame size and the bytes of
//! the whole tar stream (u64 LE each). Member `i` holds the stream's bytes from `i x frame`
//! (every member but the last holds exactly `frame` bytes). A reader checks the end member
//! first, then hops from member header to member header (one small read each) and takes the
//! layout only when all of it holds; otherwise the file is read as one gzip stream.

use super::io::{invalid, pread_exact};
use super::kind::Codec;
use super::table::{Frame, SeekTable};
use rustix::fd::BorrowedFd;
use std::io::{self, Read, Write};

/// Bytes of a data member's header: the fixed 10, XLEN, and the one 12-byte subfield.
pub const MEMBER_HEADER: usize = 10 + 2 + 4 + 8;
/// Bytes of a member's trailer (CRC-32 and ISIZE).
const TRAILER: usize = 8;
/// Bytes of the end member: header (10 + XLEN + 4 + 24), an empty final deflate block (2),
/// trailer.
pub const END_MEMBER: usize = 10 + 2 + 4 + 24 + 2 + TRAILER;
/// FLG with FEXTRA only.
const FEXTRA: u8 = 0x04;
/// OS field: Unix.
const OS_UNIX: u8 = 3;

/// The 10 fixed bytes of a member header with an extra field.
fn fixed_header() -> [u8; 10] {
    [0x1f, 0x8b, 8, FEXTRA, 0, 0, 0, 0, 0, OS_UNIX]
}

/// Compress `data` (less than 4 GiB) at `level` (1 to 9) into one gzip member with its
/// `MF` subfield.
pub fn compress_member(data: &[u8], level: u32) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(MEMBER_HEADER + data.len() / 2 + 64);
    out.resize(MEMBER_HEADER, 0);
    let mut enc = flate2::write::DeflateEncoder::new(out, flate2::Compression::new(level));
    enc.write_all(data)?;
    let mut out = enc.finish()?;
    let mut crc = flate2::Crc::new();
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let total =
        u32::try_from(out.len()).map_err(|_| io::Error::other("a gzip member of 4 GiB or more"))?;
    let mut head = Vec::with_capacity(MEMBER_HEADER);
    head.extend_from_slice(&fixed_header());
    head.extend_from_slice(&12u16.to_le_bytes());
    head.extend_from_slice(b"MF");
    head.extend_from_slice(&8u16.to_le_bytes());
    head.extend_from_slice(&total.to_le_bytes());
    head.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out[..MEMBER_HEADER].copy_from_slice(&head);
    Ok(out)
}

/// The end member of a file of `members` data members of `frame` bytes each holding a tar
/// stream of `stream_len` bytes.
pub fn end_member(members: u64, frame: u64, stream_len: u64) -> [u8; END_MEMBER] {
    let mut out = [0u8; END_MEMBER];
    out[..10].copy_from_slice(&fixed_header());
    out[10..12].copy_from_slice(&28u16.to_le_bytes());
    out[12..14].copy_from_slice(b"ME");
    out[14..16].copy_from_slice(&24u16.to_le_bytes());
    out[16..24].copy_from_slice(&members.to_le_bytes());
    out[24..32].copy_from_slice(&frame.to_le_bytes());
    out[32..40].copy_from_slice(&stream_len.to_le_bytes());
    // An empty final block with fixed codes (BFINAL, BTYPE 01, end of block); CRC and ISIZE 0.
    out[40] = 0x03;
    out[41] = 0x00;
    out
}

/// The members of the gzip file `fd` of `len` bytes when it has the layout of `--gzip`;
/// `Ok(None)` when it does not end with the end member (any other gzip file), an error when it
/// does but the members do not hold.
pub fn read_index(fd: BorrowedFd<'_>, len: u64) -> io::Result<Option<SeekTable>> {
    if len < END_MEMBER as u64 {
        return Ok(None);
    }
    let end_at = len - END_MEMBER as u64;
    let mut end = [0u8; END_MEMBER];
    pread_exact(fd, &mut end, end_at)?;
    let field = |i: usize| u64::from_le_bytes(end[i..i + 8].try_into().expect("8 bytes"));
    let (members, frame, stream_len) = (field(16), field(24), field(32));
    if end != end_member(members, frame, stream_len) {
        return Ok(None);
    }
    let damaged = |what: String| invalid(format!("gzip member index: {what}"));
    if frame == 0 || frame > u64::from(u32::MAX) || stream_len.div_ceil(frame) != members {
        return Err(damaged(format!(
            "{members} members of {frame} bytes cannot hold {stream_len} bytes"
        )));
    }
    // Every member at least a header and a trailer: a count the file cannot hold is refused
    // before anything is allocated for it.
    if members.saturating_mul((MEMBER_HEADER + TRAILER) as u64) > end_at {
        return Err(damaged(format!(
            "{members} members do not fit in {end_at} bytes"
        )));
    }
    let mut frames = Vec::with_capacity(members as usize);
    let mut at = 0u64;
    let mut head = [0u8; MEMBER_HEADER];
    for i in 0..members {
        if at + (MEMBER_HEADER + TRAILER) as u64 > end_at {
            return Err(damaged(format!(
                "member {i} at byte {at} runs past the end"
            )));
        }
        pread_exact(fd, &mut head, at)?;
        let c_len = u32::from_le_bytes(head[16..20].try_into().expect("4 bytes"));
        let d_len = u32::from_le_bytes(head[20..24].try_into().expect("4 bytes"));
        let want_d = (stream_len - i * frame).min(frame);
        if head[..10] != fixed_header()
            || head[10..16] != [12, 0, b'M', b'F', 8, 0]
            || u64::from(d_len) != want_d
            || (c_len as usize) < MEMBER_HEADER + TRAILER
        {
            return Err(damaged(format!(
                "member {i} at byte {at} is not as the index says"
            )));
        }
        frames.push(Frame {
            c_at: at,
            c_len,
            d_at: i * frame,
            d_len,
            checksum: None,
        });
        at += u64::from(c_len);
    }
    if at != end_at {
        return Err(damaged(format!(
            "the members end at byte {at}, the end member is at byte {end_at}"
        )));
    }
    Ok(Some(SeekTable {
        frames,
        codec: Codec::Gzip,
    }))
}

/// Whether the gzip file `fd` starts with a data member of the layout of `--gzip` (its `MF`
/// subfield): when [`read_index`] finds no end member, the file was cut after a member.
pub fn starts_with_member(fd: BorrowedFd<'_>) -> bool {
    let mut head = [0u8; MEMBER_HEADER];
    pread_exact(fd, &mut head, 0).is_ok()
        && head[..10] == fixed_header()
        && head[10..16] == [12, 0, b'M', b'F', 8, 0]
}

/// Where the chain of `--gzip` data members from the start of the gzip file `fd` of `len`
/// bytes ends (each `MF` subfield gives its member's length; one small read each), when it
/// ends at or before `len` at a byte that starts no other data member; `None` when a member
/// runs past the end of the file.
pub fn members_end(fd: BorrowedFd<'_>, len: u64) -> Option<u64> {
    let mut at = 0u64;
    let mut head = [0u8; MEMBER_HEADER];
    while at + MEMBER_HEADER as u64 <= len {
        pread_exact(fd, &mut head, at).ok()?;
        if head[..10] != fixed_header() || head[10..16] != [12, 0, b'M', b'F', 8, 0] {
            break;
        }
        let c_len = u32::from_le_bytes(head[16..20].try_into().expect("4 bytes"));
        if (c_len as usize) < MEMBER_HEADER + TRAILER {
            return None;
        }
        at += u64::from(c_len);
    }
    (at <= len).then_some(at)
}

/// Decompress the member `raw` (all of its bytes) that must hold `d_len` bytes; gzip's CRC-32
/// and length are checked, and the member must end exactly where `raw` does.
pub fn decompress_member(raw: &[u8], d_len: u32) -> Result<Vec<u8>, String> {
    let mut dec = flate2::bufread::GzDecoder::new(raw);
    let mut out = Vec::with_capacity((d_len as usize).min(8 << 20));
    (&mut dec)
        .take(u64::from(d_len) + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() != d_len as usize {
        return Err(format!(
            "{} bytes, the member's header says {d_len}",
            out.len()
        ));
    }
    if !dec.into_inner().is_empty() {
        return Err("bytes after the end of the member".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fd::AsFd;

    #[test]
    fn members_read_as_one_gzip_stream_and_through_the_index() {
        let data: Vec<u8> = (0..250_000u32).map(|i| (i % 253) as u8).collect();
        let frame = 100_000;
        let mut file = Vec::new();
        for part in data.chunks(frame) {
            file.extend_from_slice(&compress_member(part, 6).unwrap());
        }
        file.extend_from_slice(&end_member(3, frame as u64, data.len() as u64));
        // Any gzip reader: the members one after the other, the end member adding nothing.
        let mut all = Vec::new();
        flate2::read::MultiGzDecoder::new(&file[..])
            .read_to_end(&mut all)
            .unwrap();
        assert_eq!(all, data);
        let mut tmp = tempfile::tempfile().unwrap();
        tmp.write_all(&file).unwrap();
        let table = read_index(tmp.as_fd(), file.len() as u64).unwrap().unwrap();
        assert_eq!(table.frames.len(), 3);
        for (i, f) in table.frames.iter().enumerate() {
            let raw = &file[f.c_at as usize..(f.c_at + u64::from(f.c_len)) as usize];
            let got = decompress_member(raw, f.d_len).unwrap();
            assert_eq!(got, data[i * frame..(i * frame + f.d_len as usize)]);
        }
        // A flipped byte in a member's data: named by the CRC check.
        let mut bad = file.clone();
        let f = table.frames[1];
        bad[(f.c_at + u64::from(f.c_len) / 2) as usize] ^= 0x20;
        let raw = &bad[f.c_at as usize..(f.c_at + u64::from(f.c_len)) as usize];
        assert!(decompress_member(raw, f.d_len).is_err());
        // A plain gzip file has no index; a damaged member length is an error.
        let mut plain = tempfile::tempfile().unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        enc.write_all(&data).unwrap();
        let gz = enc.finish().unwrap();
        plain.write_all(&gz).unwrap();
        assert!(read_index(plain.as_fd(), gz.len() as u64)
            .unwrap()
            .is_none());
        let mut shifted = file.clone();
        shifted[16] ^= 1;
        let mut s = tempfile::tempfile().unwrap();
        s.write_all(&shifted).unwrap();
        assert!(read_index(s.as_fd(), shifted.len() as u64).is_err());
    }
}
