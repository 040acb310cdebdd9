//! The dtar index (DTAR_IDX): the byte offset of every entry's first header block, kept as the
//! archive's last member (with a footer that finds it from the end), as a side file
//! `ARCHIVE.dtaridx`, or as the xattr `user.dtar.idx` (formats.md §5).

pub mod scan;

use crate::tar::archive::Archive;
use crate::tar::format::{self, round_up, Header, Kind, BLOCK};
use std::io;

/// The footer's magic: the ASCII bytes "DTAR_IDX".
pub const MAGIC: u64 = 0x4454_4152_5F49_4458;
/// The footer's version.
pub const VERSION: u64 = 1;
/// Bytes of the footer (6 u64 big-endian).
pub const FOOTER: u64 = 48;
/// Bytes of the two zero blocks that end an archive.
pub const END: u64 = 2 * BLOCK;
/// Name of the xattr some dtar versions keep the index in.
pub const XATTR: &str = "user.dtar.idx";

/// Where an index came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The side file `ARCHIVE.dtaridx`.
    SideFile,
    /// The xattr `user.dtar.idx` of the archive.
    Xattr,
    /// The archive's last member, found by its footer.
    Member,
    /// A scan of the archive.
    Scan,
}

/// Bytes of the index member's data for `count` entries: the offsets padded to whole blocks,
/// then a block whose last 48 bytes are the footer (the layout dtar writes).
pub fn data_len(count: u64) -> u64 {
    round_up(8 * count) + BLOCK
}

/// The index member's header (a regular file `name`, mode 0600, owned by the writer).
pub fn member_header(name: &[u8], count: u64, mtime: i64) -> Header {
    Header {
        path: name.to_vec(),
        kind: Kind::File,
        mode: 0o600,
        uid: rustix::process::geteuid().as_raw() as u64,
        gid: rustix::process::getegid().as_raw() as u64,
        uname: Vec::new(),
        gname: Vec::new(),
        size: data_len(count),
        mtime,
        mtime_nsec: 0,
        link: Vec::new(),
        dev_major: 0,
        dev_minor: 0,
        xattrs: Vec::new(),
        projid: Default::default(),
    }
}

/// The footer: `count` entries, `archive_size` bytes before the index member, which takes
/// `entry_size` bytes with its header and padding.
pub fn footer(count: u64, archive_size: u64, entry_size: u64) -> [u8; FOOTER as usize] {
    let mut out = [0u8; FOOTER as usize];
    for (i, v) in [count, archive_size, 0, entry_size, VERSION, MAGIC]
        .into_iter()
        .enumerate()
    {
        out[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
    }
    out
}

/// Offsets as packed big-endian u64 (the side file's and the member's layout).
pub fn encode_offsets(offsets: &[u64]) -> Vec<u8> {
    offsets.iter().flat_map(|o| o.to_be_bytes()).collect()
}

/// Packed big-endian u64 offsets; `None` when the length is not a multiple of 8.
pub fn decode_offsets(bytes: &[u8]) -> Option<Vec<u64>> {
    (bytes.len() % 8 == 0).then(|| {
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
            .collect()
    })
}

/// Where an index's offsets are read from: each rank reads only the stretch it checks
/// ([`Found::read`]), never the whole index (issue 17, item 6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Offsets {
    /// Held in memory (an xattr, at most 1 MiB; tests).
    Memory(Vec<u64>),
    /// Packed big-endian from byte 0 of the side file at this path.
    SideFile(Vec<u8>),
    /// Packed big-endian in the archive's stream from this byte (the DTAR_IDX member's data).
    Member(u64),
}

/// An index as found, not yet checked against the archive (see `scan::check_index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Where its offsets are (the offset of every entry's first header block, in bytes; to be
    /// strictly increasing, block-aligned and below [`Found::below`]).
    pub offsets: Offsets,
    /// Entries it lists.
    pub count: u64,
    /// Every offset must be below this (bytes): the archive's length, or the DTAR_IDX
    /// member's own offset.
    pub below: u64,
    /// Where it came from.
    pub source: Source,
    /// Where the listed entries end (bytes: the offset of the end-of-archive blocks, or of the
    /// DTAR_IDX member), when the index records it (a footer's `archive_size`; 0 there means
    /// unknown).
    pub end: Option<u64>,
}

impl Found {
    /// An index whose offsets are in memory, with no bound on them beyond the checks.
    pub fn in_memory(offsets: Vec<u64>, source: Source, end: Option<u64>) -> Found {
        Found {
            count: offsets.len() as u64,
            offsets: Offsets::Memory(offsets),
            below: u64::MAX,
            source,
            end,
        }
    }

    /// The offsets number `from` to `to` (exclusive; clamped to [`Found::count`]), read from
    /// where they are (`archive` for the DTAR_IDX member).
    pub fn read(&self, archive: &Archive, from: u64, to: u64) -> io::Result<Vec<u64>> {
        let to = to.min(self.count);
        if from >= to {
            return Ok(Vec::new());
        }
        let bytes = (to - from) as usize * 8;
        let raw = match &self.offsets {
            Offsets::Memory(v) => return Ok(v[from as usize..to as usize].to_vec()),
            Offsets::SideFile(path) => {
                use std::os::unix::fs::FileExt;
                let mut raw = vec![0; bytes];
                std::fs::File::open(flist::path::as_path(path))?
                    .read_exact_at(&mut raw, from * 8)?;
                raw
            }
            Offsets::Member(at) => archive.read_at(at + from * 8, bytes)?,
        };
        if raw.len() < bytes {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(decode_offsets(&raw).expect("a multiple of 8 bytes"))
    }
}

/// The footer's six fields, when `raw` (48 bytes) is a version-1 DTAR_IDX footer.
fn parse_footer(raw: &[u8]) -> Option<[u64; 6]> {
    if raw.len() != FOOTER as usize {
        return None;
    }
    let mut f = [0u64; 6];
    for (v, c) in f.iter_mut().zip(raw.chunks_exact(8)) {
        *v = u64::from_be_bytes(c.try_into().expect("8 bytes"));
    }
    (f[5] == MAGIC && f[4] == VERSION).then_some(f)
}

/// The offsets of a side file or xattr, and the entries' end if recorded. Two layouts: bare
/// packed offsets (early dtar), or the member's layout, offsets padded to whole blocks then a
/// block ending with the footer (mpiFileUtils' `index_pack`, which mfu-rs writes too).
pub fn decode_index(bytes: &[u8]) -> Option<(Vec<u64>, Option<u64>)> {
    let len = bytes.len() as u64;
    if len >= BLOCK && len % BLOCK == 0 {
        if let Some(f) = parse_footer(&bytes[(len - FOOTER) as usize..]) {
            let count = f[0];
            if count
                .checked_mul(8)
                .is_some_and(|b| data_len(count) == len && b <= len)
            {
                let offsets = decode_offsets(&bytes[..8 * count as usize])?;
                return Some((offsets, (f[1] != 0).then_some(f[1])));
            }
            return None;
        }
    }
    decode_offsets(bytes).map(|o| (o, None))
}

/// A side file or xattr in the member's layout (see [`decode_index`]): `offsets`, and `end`, the
/// offset where the listed entries end (bytes).
pub fn encode_index(offsets: &[u64], end: u64) -> Vec<u8> {
    let count = offsets.len() as u64;
    let mut out = encode_offsets(offsets);
    out.resize((data_len(count) - FOOTER) as usize, 0);
    out.extend_from_slice(&footer(count, end, 0));
    out
}

/// The index member found through the footer at the end of the archive: its offsets, the
/// member's own first header offset, and the entries' end the footer records. `None` when
/// there is no valid footer.
pub fn read_member(archive: &Archive) -> io::Result<Option<(Found, u64)>> {
    let len = archive.len();
    if len < END + FOOTER + BLOCK {
        return Ok(None);
    }
    let raw = archive.read_at(len - END - FOOTER, FOOTER as usize)?;
    let Some(f) = parse_footer(&raw) else {
        return Ok(None);
    };
    let (count, entry_size) = (f[0], f[3]);
    if entry_size > len - END || entry_size < BLOCK || count > len / 8 {
        return Ok(None);
    }
    let start = len - END - entry_size;
    let mut read = |at: u64, n: usize| archive.read_at(at, n);
    let decoded = match format::decode_entry(&mut read, start) {
        Ok(Some(d)) => d,
        _ => return Ok(None),
    };
    if decoded.header.size < 8 * count + FOOTER || decoded.data + decoded.header.size > len {
        return Ok(None);
    }
    // The offsets stay where they are: each rank reads the stretch it checks.
    let found = Found {
        offsets: Offsets::Member(decoded.data),
        count,
        below: start,
        source: Source::Member,
        end: (f[1] != 0).then_some(f[1]),
    };
    Ok(Some((found, start)))
}

/// Offsets strictly increasing, block-aligned and below `end`.
pub fn valid_order(offsets: &[u64], end: u64) -> bool {
    offsets.iter().all(|&o| o % BLOCK == 0 && o < end) && offsets.windows(2).all(|w| w[0] < w[1])
}

/// The side file `ARCHIVE.dtaridx` beside `archive_path`, if present and well formed.
pub fn side_path(archive_path: &[u8]) -> Vec<u8> {
    let mut p = archive_path.to_vec();
    p.extend_from_slice(b".dtaridx");
    p
}

/// The indexes beside the archive at `archive_path`: the side file, then the archive's
/// `user.dtar.idx` xattr, those that exist and whose length fits their layout (the order of
/// their offsets, below `stream_len`, is checked with the rest by `scan::check_index`). Only
/// the side file's length and footer are read here.
pub fn read_external(archive_path: &[u8], stream_len: u64) -> Vec<Found> {
    let mut out = Vec::new();
    let side = side_path(archive_path);
    if let Some((count, end)) = side_layout(&side) {
        out.push(Found {
            offsets: Offsets::SideFile(side),
            count,
            below: stream_len,
            source: Source::SideFile,
            end,
        });
    }
    let mut buf = vec![0u8; 1 << 20];
    let xattr = rustix::fs::getxattr(flist::path::as_path(archive_path), XATTR, &mut buf)
        .ok()
        .map(|n| buf[..n].to_vec());
    if let Some((offsets, end)) = xattr.as_deref().and_then(decode_index) {
        out.push(Found {
            below: stream_len,
            ..Found::in_memory(offsets, Source::Xattr, end)
        });
    }
    out
}

/// The entries a side file lists and the end it records, from its length and footer (the
/// layouts of [`decode_index`]); `None` when it is missing or its length fits no layout.
fn side_layout(path: &[u8]) -> Option<(u64, Option<u64>)> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(flist::path::as_path(path)).ok()?;
    let len = file.metadata().ok()?.len();
    if len >= BLOCK && len % BLOCK == 0 {
        let mut raw = [0u8; FOOTER as usize];
        file.read_exact_at(&mut raw, len - FOOTER).ok()?;
        if let Some(f) = parse_footer(&raw) {
            let count = f[0];
            return count
                .checked_mul(8)
                .is_some_and(|b| b <= len && data_len(count) == len)
                .then_some((count, (f[1] != 0).then_some(f[1])));
        }
    }
    (len % 8 == 0).then_some((len / 8, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_and_sizes_follow_the_dtar_vector() {
        // tartree.dtar.tar: 39 entries, index member of 2560 bytes at 9648128, 1024 data bytes.
        assert_eq!(data_len(39), 1024);
        let f = footer(39, 9_648_128, 2560);
        assert_eq!(&f[40..48], b"DTAR_IDX");
        assert_eq!(u64::from_be_bytes(f[0..8].try_into().unwrap()), 39);
        assert_eq!(u64::from_be_bytes(f[24..32].try_into().unwrap()), 2560);
        assert_eq!(u64::from_be_bytes(f[32..40].try_into().unwrap()), 1);
        assert_eq!(data_len(0), 512);
        assert_eq!(data_len(64), 1024);
        assert_eq!(data_len(65), 1536);
    }

    #[test]
    fn offsets_round_trip_and_bad_orders_are_refused() {
        let o = vec![0, 1024, 4096];
        assert_eq!(decode_offsets(&encode_offsets(&o)), Some(o.clone()));
        assert_eq!(decode_offsets(&[0; 7]), None);
        assert!(valid_order(&o, 4608));
        assert!(!valid_order(&o, 4096));
        assert!(!valid_order(&[0, 0], 4096));
        assert!(!valid_order(&[0, 100], 4096));
    }

    #[test]
    fn side_indexes_in_both_layouts_decode_and_damaged_ones_are_refused() {
        let o = vec![0, 1024, 4096];
        // Bare packed offsets (early dtar): no recorded end.
        assert_eq!(decode_index(&encode_offsets(&o)), Some((o.clone(), None)));
        // The member's layout (mpiFileUtils' index_pack, what mfu-rs writes).
        let packed = encode_index(&o, 5120);
        assert_eq!(packed.len() as u64, data_len(3));
        assert_eq!(&packed[packed.len() - 8..], b"DTAR_IDX");
        assert_eq!(decode_index(&packed), Some((o.clone(), Some(5120))));
        // An unknown end (0, as mpiFileUtils writes in side files).
        assert_eq!(decode_index(&encode_index(&o, 0)), Some((o.clone(), None)));
        // A count that does not fit the length is refused.
        let mut bad = packed.clone();
        let n = bad.len();
        bad[n - 48..n - 40].copy_from_slice(&1000u64.to_be_bytes());
        assert_eq!(decode_index(&bad), None);
        assert_eq!(decode_index(&packed[..packed.len() - 1]), None);
    }
}
