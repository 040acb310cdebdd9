//! GNU sparse files: the old GNU `S` header's map (read through the crate's
//! [`tar::GnuHeader`] and [`tar::GnuExtSparseHeader`] fields), and the pax formats 0.0, 0.1
//! (records, see [`super::pax`]) and 1.0 (a map at the start of the data). Kept from the
//! crate: its `Archive` reads old GNU sparse maps only front to back from an `io::Read`, and no
//! pax sparse format at all.

use super::decode::read_exact;
use super::number::parse_unsigned;
use super::pax::parse_decimal;
use super::{round_up, HeaderError, Segment, BLOCK, BLOCK_USIZE, MAX_EXTENSION_SIZE};
use std::io;

/// Most segments a sparse map may have: bounds the memory a damaged map can take.
pub(super) const MAX_SEGMENTS: u64 = 1 << 22;

pub(super) fn sparse_invalid(offset: u64, what: &str) -> HeaderError {
    HeaderError::Invalid {
        offset,
        what: format!("sparse file: {what}"),
    }
}

/// The (offset, numbytes) pairs of an old GNU sparse header or extension block, up to the
/// first empty one (numbytes starting with NUL, as GNU tar reads them).
fn old_gnu_pairs(
    pairs: &[tar::GnuSparseHeader],
    offset: u64,
    map: &mut Vec<Segment>,
) -> Result<(), HeaderError> {
    for pair in pairs {
        if pair.numbytes[0] == 0 {
            break;
        }
        let num = |f: &[u8]| {
            parse_unsigned(f).ok_or_else(|| sparse_invalid(offset, "bad old GNU sparse map entry"))
        };
        map.push(Segment {
            at: num(&pair.offset)?,
            len: num(&pair.numbytes)?,
        });
    }
    Ok(())
}

/// The real size (bytes) of the file of an old GNU sparse header.
pub(super) fn old_gnu_real_size(block: &[u8], offset: u64) -> Result<u64, HeaderError> {
    parse_unsigned(&gnu_view(block).as_gnu().expect("GNU magic").realsize)
        .ok_or_else(|| sparse_invalid(offset, "bad real size field"))
}

/// The block as the crate's GNU header, whatever its magic (an `S` flag says GNU).
fn gnu_view(block: &[u8]) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    let magic = h.as_bytes()[257..265].to_vec();
    h.as_mut_bytes().copy_from_slice(&block[..BLOCK_USIZE]);
    // new_gnu's magic, so that the crate gives its GNU view.
    h.as_mut_bytes()[257..265].copy_from_slice(&magic);
    h
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
    let view = gnu_view(block);
    let head = view.as_gnu().expect("GNU magic");
    let mut map = Vec::new();
    old_gnu_pairs(&head.sparse, offset, &mut map)?;
    let mut extended = head.isextended[0] != 0;
    let mut at = offset + BLOCK;
    while extended {
        if at - offset > MAX_EXTENSION_SIZE {
            return Err(sparse_invalid(offset, "too many extension blocks"));
        }
        let mut ext = tar::GnuExtSparseHeader::new();
        ext.as_mut_bytes()
            .copy_from_slice(&read_exact(read, at, BLOCK_USIZE, offset)?);
        old_gnu_pairs(&ext.sparse, offset, &mut map)?;
        // Any byte but NUL, as GNU tar reads it (the crate's is_extended wants 1).
        extended = ext.isextended[0] != 0;
        at += BLOCK;
    }
    Ok((at - offset - BLOCK, map))
}

/// The map at the start of a pax 1.0 sparse file's data (decimal numbers, one a line: the
/// count, then offset and length of each segment; padded to a block), and its bytes with the
/// padding. `stored` bounds how much is read (bytes of data the entry has).
pub(super) fn pax_1_0_map(
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
pub(super) fn check_map(
    map: &[Segment],
    real_size: u64,
    stored: u64,
    offset: u64,
) -> Result<(), HeaderError> {
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
