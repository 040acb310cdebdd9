//! Finding an archive's entries: from an index (side file, xattr, the DTAR_IDX member), or by a
//! parallel scan; and splitting the stream over ranks.
//!
//! The scan: every rank reads its byte range of the stream (`--memsize` at a time) and notes
//! each block that is a valid tar header (checksum), with its type, size and, for pax headers,
//! a `size` override. Rank 0 then follows the chain from offset 0 through those candidates
//! (header, data, next header...), which rejects blocks inside file data that merely look like
//! headers. The chain stops at the end-of-archive blocks, or at damage (a bad header, a cut
//! archive), which is reported; the entries before it are still usable.

use super::header::{self, classify, flag_has_data, pax_size, round_up, BlockKind, BLOCK};
use super::index::{self, Source};
use super::stream::Archive;
use flist::distribute::even_start;
use flist::path::display;
use std::collections::HashMap;
use steal::wire::{self, Reader};
use steal::{Comm, CommExt};

/// An archive's entries as found.
#[derive(Clone, Debug)]
pub struct Located {
    /// Offset of every entry's first header block, in order (the index member excluded).
    pub offsets: Vec<u64>,
    /// Where they came from.
    pub source: Source,
    /// Offset of the DTAR_IDX member, when the archive has one.
    pub member: Option<u64>,
    /// Damage found by a scan (the entries after it are missing from `offsets`).
    pub damage: Option<String>,
    /// Indexes found but not used, each with the reason (for a note to the user).
    pub rejected: Vec<String>,
    /// Where the entries found end (bytes): the offset of the end-of-archive blocks (or of the
    /// archive's end when it has none), for the index saved after a scan.
    pub end: u64,
}

/// Find the entries of `archive` (at `path`): from the first index (side file, xattr, DTAR_IDX
/// member) that holds against the archive ([`check_index`]), else by a scan. Collective: every
/// rank gets the same answer.
pub fn locate(comm: &dyn Comm, archive: &Archive, path: &[u8], memsize: u64) -> Located {
    let member = index::read_member(archive).ok().flatten();
    let member_at = member.as_ref().map(|m| m.1);
    let mut candidates = index::read_external(path, archive.len());
    candidates.extend(member.map(|m| m.0));
    let mut rejected = Vec::new();
    let mut chosen = None;
    for c in candidates {
        match check_index(comm, archive, &c, member_at) {
            Ok(end) => {
                chosen = Some((c, end));
                break;
            }
            Err(why) => rejected.push(format!("{}: {why}", describe(c.source, path))),
        }
    }
    let (offsets, source, damage, end) = match chosen {
        Some((c, end)) => (c.offsets, c.source, None, end),
        None => {
            let (o, d, end) = scan(comm, archive, memsize);
            (o, Source::Scan, d, end)
        }
    };
    let offsets = offsets
        .into_iter()
        .filter(|&o| Some(o) != member_at)
        .collect();
    Located {
        offsets,
        source,
        member: member_at,
        damage,
        rejected,
        end,
    }
}

/// How an index is named to the user.
fn describe(source: Source, path: &[u8]) -> String {
    match source {
        Source::SideFile => format!("the index {}", display(&index::side_path(path))),
        Source::Xattr => format!(
            "the index in the xattr {} of {}",
            index::XATTR,
            display(path)
        ),
        Source::Member => format!("the DTAR_IDX member of {}", display(path)),
        Source::Scan => format!("the scan of {}", display(path)),
    }
}

/// The offset of the first block at or after `at` that is not a pax global header (`g`), which
/// belong to no entry.
fn skip_globals(archive: &Archive, mut at: u64) -> u64 {
    loop {
        let block = archive.read_at(at, BLOCK as usize).unwrap_or_default();
        match classify(&block) {
            BlockKind::Header { flag: b'g', size } => {
                match round_up(size).checked_add(at + BLOCK) {
                    Some(next) => at = next,
                    None => return at,
                }
            }
            _ => return at,
        }
    }
}

/// Check an index against the archive before trusting it: the first offset is the archive's
/// first entry, every offset holds a valid entry whose end is the next offset, and the chain
/// from the last one reaches the end-of-archive blocks (or the archive's end, or the DTAR_IDX
/// member at `member_at`), at the end the index records if it records one. This is what a
/// stale index (entries appended by `tar -r`, a rewritten archive), a cut one, or a cut
/// archive fails. Returns where the entries end (bytes), or why the index does not hold.
/// Collective: each rank decodes an even share of the entries (of the DTAR_IDX member of a
/// compressed archive, only the first and the last are decoded: see below).
pub fn check_index(
    comm: &dyn Comm,
    archive: &Archive,
    found: &index::Found,
    member_at: Option<u64>,
) -> Result<u64, String> {
    let offsets = &found.offsets;
    let n = offsets.len();
    let len = archive.len();
    let (a, b) = (
        even_start(n as u64, comm.size(), comm.rank()) as usize,
        even_start(n as u64, comm.size(), comm.rank() + 1) as usize,
    );
    let mut problem = String::new();
    let mut end = 0u64;
    // Where the chain after `at` must stop: an end-of-archive block, the archive's end, or the
    // index member.
    let ends_at = |at: u64| -> Result<(), String> {
        if at > len {
            return Err(format!(
                "its last entry needs the archive to reach byte {at}, but the archive ends at \
                 byte {len} (cut short?)"
            ));
        }
        let block = archive.read_at(at, BLOCK as usize).unwrap_or_default();
        if at == len || Some(at) == member_at || classify(&block) == BlockKind::Zero {
            Ok(())
        } else {
            Err(format!(
                "after its last entry the archive goes on at byte {at} (entries added after \
                 the index was written?)"
            ))
        }
    };
    let first = if comm.rank() == 0 {
        Some(skip_globals(archive, 0))
    } else {
        None
    };
    if let Some(first) = first {
        match offsets.first() {
            Some(&o) if o != first => {
                problem = format!("its first entry is at byte {o}, the archive's at byte {first}")
            }
            None => match ends_at(first) {
                Ok(()) => end = first,
                Err(e) => problem = format!("it lists no entry but the archive has some ({e})"),
            },
            _ => {}
        }
    }
    // The entries this rank checks: its even share; for the DTAR_IDX member of a compressed
    // archive only the first and the last (rank 0), since decoding every header would
    // decompress the whole archive once more, and the member cannot go stale on its own there:
    // nothing appends to a seekable zstd stream without rewriting its seek table, and a cut
    // one has none.
    let light = found.source == Source::Member && archive.table().is_some();
    let mine: Vec<usize> = match (light, comm.rank()) {
        (false, _) => (a..b).collect(),
        (true, 0) if n > 0 => [0, n - 1]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        (true, _) => Vec::new(),
    };
    let picked: Vec<u64> = mine.iter().map(|&i| offsets[i]).collect();
    if problem.is_empty() {
        for (i, d) in mine.iter().copied().zip(decode(archive, &picked)) {
            let d = match d {
                Ok(d) => d,
                Err(e) => {
                    problem = format!("no valid entry at its offset {}: {e}", offsets[i]);
                    break;
                }
            };
            let next = skip_globals(archive, d.next);
            if let Some(&want) = offsets.get(i + 1) {
                if next != want && !light {
                    problem = format!(
                        "the entry at byte {} ends at byte {next}, but the next indexed entry is \
                         at byte {want}",
                        offsets[i]
                    );
                    break;
                }
            } else if let Err(e) = ends_at(next) {
                problem = e;
            } else {
                end = next;
            }
        }
    }
    let problems = comm.allgatherv(problem.as_bytes());
    if let Some(p) = problems.iter().find(|p| !p.is_empty()) {
        return Err(String::from_utf8_lossy(p).into_owned());
    }
    let end = comm.max(end);
    match found.end {
        Some(recorded) if recorded != end => Err(format!(
            "it records that the entries end at byte {recorded}, they end at byte {end}"
        )),
        _ => Ok(end),
    }
}

/// The part `[start, end)` of the tar stream that `rank` of `size` handles: an even split by
/// bytes, on frame boundaries for a compressed archive, on block boundaries otherwise.
pub fn share(archive: &Archive, size: usize, rank: usize) -> (u64, u64) {
    match archive.table() {
        Some(t) => {
            let n = t.frames.len() as u64;
            let at = |r: usize| {
                let i = even_start(n, size, r);
                t.frames.get(i as usize).map_or(archive.len(), |f| f.d_at)
            };
            (at(rank), at(rank + 1))
        }
        None => {
            let blocks = archive.len().div_ceil(BLOCK);
            let at = |r: usize| (even_start(blocks, size, r) * BLOCK).min(archive.len());
            (at(rank), at(rank + 1))
        }
    }
}

/// A block that looked like a header during the scan.
struct Candidate {
    flag: u8,
    size: u64,
    /// The `size` record of a pax header's data.
    pax_size: Option<u64>,
}

fn scan_share(archive: &Archive, start: u64, end: u64, memsize: u64) -> Vec<(u64, Candidate)> {
    let step = memsize.clamp(BLOCK, 1 << 30) / BLOCK * BLOCK;
    let mut out = Vec::new();
    let mut pos = start;
    while pos < end {
        let want = step.min(end - pos) as usize;
        let buf = match archive.read_at(pos, want) {
            Ok(b) => b,
            Err(_) => break,
        };
        if buf.is_empty() {
            break;
        }
        for (i, block) in buf.chunks_exact(BLOCK as usize).enumerate() {
            let at = pos + i as u64 * BLOCK;
            if let BlockKind::Header { flag, size } = classify(block) {
                let pax_size = if matches!(flag, b'x' | b'X') {
                    let from = (i + 1) * BLOCK as usize;
                    let data = if from + size as usize <= buf.len() {
                        buf[from..from + size as usize].to_vec()
                    } else {
                        archive
                            .read_at(at + BLOCK, size.min(1 << 20) as usize)
                            .unwrap_or_default()
                    };
                    pax_size(&data)
                } else {
                    None
                };
                out.push((
                    at,
                    Candidate {
                        flag,
                        size,
                        pax_size,
                    },
                ));
            }
        }
        pos += buf.len() as u64;
    }
    out
}

/// Follow the chain of headers from offset 0 through `found`; returns the entries' offsets, the
/// damage that stopped it early, if any, and where it stopped (bytes: the end-of-archive
/// blocks, or the archive's end).
fn follow(archive: &Archive, found: &HashMap<u64, Candidate>) -> (Vec<u64>, Option<String>, u64) {
    let len = archive.len();
    let mut offsets = Vec::new();
    let mut at = 0u64;
    let mut entry_start: Option<u64> = None;
    let mut size_override: Option<u64> = None;
    loop {
        if at >= len {
            // No end-of-archive blocks: accepted, as GNU tar does, unless inside an entry.
            return match entry_start {
                Some(s) => (
                    offsets,
                    Some(format!(
                        "truncated archive: it ends inside the entry at byte {s}"
                    )),
                    at,
                ),
                // Past the end: the archive ends inside the last entry's padding (its data
                // is whole; GNU tar reports an unexpected end too).
                None if at > len => (
                    offsets,
                    Some(format!(
                        "truncated archive: it ends at byte {len}, inside the padding of its last \
                         entry"
                    )),
                    len,
                ),
                None => (offsets, None, at),
            };
        }
        let Some(c) = found.get(&at) else {
            let block = archive.read_at(at, BLOCK as usize).unwrap_or_default();
            return match classify(&block) {
                BlockKind::Zero if entry_start.is_none() => (offsets, None, at),
                _ if block.len() < BLOCK as usize => (
                    offsets,
                    Some(format!(
                        "truncated archive: it ends inside the header at byte {at}"
                    )),
                    at,
                ),
                _ => (
                    offsets,
                    Some(format!(
                        "corrupt archive: no valid tar header at byte {at} (checksum mismatch or \
                         not a tar header); the entries before it are usable"
                    )),
                    at,
                ),
            };
        };
        let next;
        if matches!(c.flag, b'x' | b'X' | b'g' | b'L' | b'K') {
            if c.flag != b'g' {
                entry_start.get_or_insert(at);
            }
            if c.pax_size.is_some() && c.flag != b'g' {
                size_override = c.pax_size;
            }
            next = at + BLOCK + round_up(c.size);
        } else {
            let start = entry_start.take().unwrap_or(at);
            let size = size_override.take().unwrap_or(c.size);
            // An old GNU sparse header is followed by extension blocks of its map.
            let map_blocks = if c.flag == b'S' {
                let mut read = |o: u64, n: usize| archive.read_at(o, n);
                let block = archive.read_at(at, BLOCK as usize).unwrap_or_default();
                match header::old_gnu_sparse_map(&mut read, at, &block) {
                    Ok((extra, _)) => extra,
                    Err(e) => return (offsets, Some(e.to_string()), at),
                }
            } else {
                0
            };
            let at = at + map_blocks;
            let data_end = at + BLOCK + if flag_has_data(c.flag) { size } else { 0 };
            if data_end > len {
                return (
                    offsets,
                    Some(format!(
                        "truncated archive: the entry at byte {start} needs {} bytes of data \
                         but the archive ends at byte {len}",
                        data_end - at - BLOCK
                    )),
                    at,
                );
            }
            offsets.push(start);
            next = at
                + BLOCK
                + if flag_has_data(c.flag) {
                    round_up(size)
                } else {
                    0
                };
        }
        at = next;
    }
}

/// Scan the archive in parallel for its entries: their offsets, the damage that stopped the
/// scan, if any, and where the entries end (bytes). Collective.
pub fn scan(comm: &dyn Comm, archive: &Archive, memsize: u64) -> (Vec<u64>, Option<String>, u64) {
    let (start, end) = share(archive, comm.size(), comm.rank());
    let mine = scan_share(archive, start, end, memsize);
    let mut bytes = Vec::with_capacity(mine.len() * 27);
    for (at, c) in &mine {
        wire::put_u64(&mut bytes, *at);
        bytes.push(c.flag);
        wire::put_u64(&mut bytes, c.size);
        wire::put_u64(&mut bytes, c.pax_size.map_or(u64::MAX, |s| s));
    }
    drop(mine);
    let gathered = comm.allgatherv(&bytes);
    drop(bytes);
    let mut result = Vec::new();
    if comm.rank() == 0 {
        let mut found = HashMap::new();
        for part in &gathered {
            let mut r = Reader::new(part);
            while !r.is_empty() {
                let at = r.u64();
                let flag = r.u8();
                let size = r.u64();
                let pax = r.u64();
                found.insert(
                    at,
                    Candidate {
                        flag,
                        size,
                        pax_size: (pax != u64::MAX).then_some(pax),
                    },
                );
            }
        }
        drop(gathered);
        let (offsets, damage, end) = follow(archive, &found);
        wire::put_u64(&mut result, end);
        wire::put_bytes(&mut result, &index::encode_offsets(&offsets));
        wire::put_bytes(&mut result, damage.unwrap_or_default().as_bytes());
    }
    comm.bcast(0, &mut result);
    let mut r = Reader::new(&result);
    let end = r.u64();
    let offsets = index::decode_offsets(r.bytes()).unwrap_or_default();
    let damage = String::from_utf8_lossy(r.bytes()).to_string();
    (offsets, (!damage.is_empty()).then_some(damage), end)
}

/// Bytes read at once when decoding a header, enough for a pax header, its records and the
/// ustar block that follows.
const HEADER_WINDOW: usize = 4096;
/// Bytes read at once, at most, when the next entries' headers lie close enough to come
/// with one read (small files: one read for a dozen headers instead of one each).
const WIDE_WINDOW: u64 = 64 << 10;
/// Entries decoded in order by one task (sharing its window).
const DECODE_RUN: usize = 256;

/// Decode the entries at `offsets` (in parallel for an uncompressed archive, in order for a
/// compressed one, whose frames are then decompressed once).
pub fn decode(
    archive: &Archive,
    offsets: &[u64],
) -> Vec<Result<header::Decoded, header::HeaderError>> {
    use rayon::prelude::*;
    // The entries of `run`, in order, reading the archive through one window: a read at `o`
    // also takes in the headers of the next few entries when they are near.
    let decode_run = |run: &[u64]| {
        let mut window: (u64, Vec<u8>) = (0, Vec::new());
        let mut out = Vec::with_capacity(run.len());
        for (j, &at) in run.iter().enumerate() {
            let ahead = run.get(j + 8).or(run.last()).copied().unwrap_or(at);
            let mut read = |o: u64, n: usize| {
                let (w_at, w) = &window;
                if o < *w_at || o + n as u64 > *w_at + w.len() as u64 {
                    let reach = ahead.saturating_sub(o) + HEADER_WINDOW as u64;
                    let len = if reach <= WIDE_WINDOW {
                        reach as usize
                    } else {
                        HEADER_WINDOW
                    };
                    window = (o, archive.read_at(o, n.max(len))?);
                }
                let (w_at, w) = &window;
                let from = (o - w_at) as usize;
                Ok(w[from..(from + n).min(w.len())].to_vec())
            };
            out.push(header::decode_entry(&mut read, at).and_then(|d| {
                d.ok_or(header::HeaderError::Invalid {
                    offset: at,
                    what: "the index points at an end-of-archive block".into(),
                })
            }));
        }
        out
    };
    if archive.table().is_some() {
        decode_run(offsets)
    } else {
        offsets
            .par_chunks(DECODE_RUN)
            .flat_map_iter(decode_run)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::header::{Header, Kind};

    #[test]
    fn decoding_through_shared_windows_finds_every_entry_among_small_and_big_ones() {
        // Small entries (several headers per window), big ones (a window each), long names
        // (pax records), across more than one decoding run.
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        let mut want = Vec::new();
        for i in 0..700u64 {
            let size = match i % 7 {
                0 => 100 << 10,
                1 => 0,
                2 => 70_000,
                _ => i * 13 % 5000,
            };
            let name = if i % 5 == 0 {
                "n".repeat(150)
            } else {
                String::new()
            };
            let h = Header {
                path: format!("d{}/{name}f{i}", i % 3).into_bytes(),
                kind: Kind::File,
                mode: 0o644,
                uid: 1,
                gid: 2,
                uname: b"u".to_vec(),
                gname: b"g".to_vec(),
                size,
                mtime: 1_700_000_000 + i as i64,
                mtime_nsec: (i * 7) as u32,
                link: Vec::new(),
                dev_major: 0,
                dev_minor: 0,
                xattrs: Vec::new(),
            };
            let at = bytes.len() as u64;
            h.encode(&mut bytes);
            bytes.resize(bytes.len() + round_up(size) as usize, 0xAB);
            want.push((at, h));
        }
        let path = dir.path().join("a.tar");
        std::fs::write(&path, &bytes).unwrap();
        let archive = Archive::open(path.as_os_str().as_encoded_bytes()).unwrap();
        let offsets: Vec<u64> = want.iter().map(|(at, _)| *at).collect();
        let got = decode(&archive, &offsets);
        assert_eq!(got.len(), want.len());
        for (d, (at, h)) in got.into_iter().zip(&want) {
            let d = d.unwrap();
            assert_eq!(d.start, *at);
            assert_eq!(&d.header, h);
            assert_eq!(d.next, d.data + round_up(h.size));
        }
    }
}
