//! Finding an archive's entries: from an index (side file, xattr, the DTAR_IDX member), or by
//! walking the chain of headers; and splitting the stream over ranks.
//!
//! The chain walk ([`walk`]): read a header, skip the entry's data, read the next header; runs
//! of small entries come through wide windows (one read for many headers), big data is skipped
//! with a seek. It stops at the end-of-archive blocks, or at damage (a bad header, a cut
//! archive), which is reported naming the byte offset; the entries before it are still usable.
//! The walk is serial by nature (each header says where the next one is): rank 0 walks and
//! streams the offsets it finds to the other ranks in bounded batches ([`walk_shared`]), each
//! rank keeping only those of its part of the stream.
//!
//! (An earlier version read and checksummed every block of the archive in parallel, then
//! followed the chain through the candidates gathered on rank 0. The walk reads at most as many
//! bytes, in fewer calls, and skips the data of big entries, which the block scan read in
//! full; on tmpfs it is several times faster, so the block scan was dropped.)

use crate::tar::archive::Archive;
use crate::tar::format::{self, classify, round_up, BlockKind, Global, Globals, BLOCK};
use crate::tar::index::{self, Source};
use flist::distribute::even_start;
use flist::path::display;
use steal::typed;
use steal::{Comm, CommExt};

/// An archive's entries as found.
#[derive(Clone, Debug)]
pub struct Located {
    /// Offset of the first header block of every entry whose header lies in this rank's part
    /// of the stream ([`Located::parts`]), and of the entry before them, in order (the index
    /// member excluded); all of them on rank 0 after a walk with `keep_all`. From an index as
    /// from a walk, no rank holds more than that ([`to_their_ranks`]).
    pub offsets: Vec<u64>,
    /// How the stream is split over ranks: [`Parts::even`] as found; member selection may
    /// split it by the bytes it selects instead.
    pub parts: Parts,
    /// The pax global headers and what they apply from where (the same on every rank).
    pub globals: Globals,
    /// Entries in the archive (the index member excluded), on every rank.
    pub total: u64,
    /// An entry seen but cut short by damage (its data incomplete): counted as an entry the
    /// user is told about, never extracted (0 or 1).
    pub cut: u64,
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
/// member) that holds against the archive ([`check_index`]), else by walking the chain
/// ([`walk_shared`]; with `keep_all` rank 0 keeps every offset). Collective: every rank gets
/// the same answer, except for `offsets` (see [`Located::offsets`]).
pub fn locate(
    comm: &dyn Comm,
    archive: &Archive,
    path: &[u8],
    memsize: u64,
    keep_all: bool,
) -> Located {
    let member = index::read_member(archive).ok().flatten();
    let member_at = member.as_ref().map(|m| m.1);
    let mut candidates = index::read_external(path, archive.len());
    candidates.extend(member.map(|m| m.0));
    let mut rejected = Vec::new();
    let mut chosen = None;
    for c in candidates {
        match check_index(comm, archive, &c, member_at) {
            Ok(checked) => {
                chosen = Some((c, checked));
                break;
            }
            Err(why) => rejected.push(format!("{}: {why}", describe(c.source, path))),
        }
    }
    let Some((c, checked)) = chosen else {
        let (offsets, mut w) = walk_shared(comm, archive, memsize, member_at, keep_all);
        return Located {
            offsets,
            parts: Parts::even(archive, comm.size()),
            globals: std::mem::take(&mut w.globals),
            total: w.entries,
            cut: w.cut,
            source: Source::Scan,
            member: member_at,
            damage: w.damage,
            rejected,
            end: w.end,
        };
    };
    // Each rank read and checked an even stretch of the index; the offsets now go to the ranks
    // whose parts of the stream hold them.
    let read: Vec<u64> = checked
        .offsets
        .into_iter()
        .filter(|&o| Some(o) != member_at)
        .collect();
    let total = comm.sum(read.len() as u64);
    // The global headers each rank met between its entries, for every rank.
    let mut mine = Vec::new();
    format::encode_list(
        checked.globals.iter().map(|g| (g.from, &g.records[..])),
        &mut mine,
    );
    let globals = Globals::from_list(
        comm.allgatherv(&mine)
            .iter()
            .flat_map(|b| format::decode_list(b))
            .collect(),
    );
    let parts = Parts::even(archive, comm.size());
    Located {
        offsets: to_parts(comm, &parts, &read),
        parts,
        globals,
        total,
        cut: 0,
        source: c.source,
        member: member_at,
        damage: None,
        rejected,
        end: checked.end,
    }
}

/// Offsets in order (each rank an increasing stretch, the ranks' stretches in rank order), sent
/// to the ranks whose parts of the stream ([`share`]) hold them: returns this rank's, with the
/// last offset before its part first (as [`walk_shared`]). Collective.
#[cfg(test)]
pub fn to_their_ranks(comm: &dyn Comm, archive: &Archive, offsets: &[u64]) -> Vec<u64> {
    to_parts(comm, &Parts::even(archive, comm.size()), offsets)
}

/// [`to_their_ranks`] for the split `parts`. Collective.
pub fn to_parts(comm: &dyn Comm, parts: &Parts, offsets: &[u64]) -> Vec<u64> {
    let sends = (0..comm.size())
        .map(|r| parts.of(r))
        .map(|(start, end)| {
            let a = offsets.partition_point(|&o| o < start);
            let b = offsets.partition_point(|&o| o < end);
            // The last of these before the part (its data may reach into it), or none.
            let last_before = a.checked_sub(1).map(|i| offsets[i]);
            typed::encode(&(last_before, &offsets[a..b]))
        })
        .collect();
    let mut before: Option<u64> = None;
    let mut mine = Vec::new();
    for msg in comm.alltoallv(sends) {
        let (b, theirs): (Option<u64>, Vec<u64>) = typed::sent(typed::decode(&msg));
        before = before.max(b);
        mine.extend(theirs);
    }
    if let Some(b) = before {
        mine.insert(0, b);
    }
    mine
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
/// belong to no entry; the global headers passed are added to `seen`.
fn skip_globals(archive: &Archive, mut at: u64, seen: &mut Vec<Global>) -> u64 {
    loop {
        let block = archive.read_at(at, BLOCK as usize).unwrap_or_default();
        match classify(&block) {
            BlockKind::Header { flag: b'g', size } => {
                match round_up(size).checked_add(at + BLOCK) {
                    Some(next) => {
                        seen.extend(read_global(&mut |o, n| archive.read_at(o, n), at, size));
                        at = next
                    }
                    None => return at,
                }
            }
            _ => return at,
        }
    }
}

/// The global header at `at` whose data is `size` bytes, or `None` when its data cannot be
/// read or parsed (then it is passed over, as it always was: it belongs to no entry).
fn read_global(
    read: &mut dyn FnMut(u64, usize) -> std::io::Result<Vec<u8>>,
    at: u64,
    size: u64,
) -> Option<Global> {
    let data = read(at + BLOCK, usize::try_from(size).ok()?).ok()?;
    let records = format::parse_pax(&data, at).ok()?;
    Some(Global {
        from: at + BLOCK + round_up(size),
        records: format::global_records(records),
    })
}

/// What [`check_index`] gives back when the index holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// Where the entries end (bytes).
    pub end: u64,
    /// The stretch of the index this rank read and checked (an even share by count; the
    /// ranks' stretches, in rank order, are the whole index).
    pub offsets: Vec<u64>,
    /// The pax global headers this rank met after its entries (and rank 0 before the first).
    pub globals: Vec<Global>,
}

/// Check an index against the archive before trusting it: its offsets are strictly
/// increasing, block-aligned and below [`index::Found::below`], the first offset is the
/// archive's first entry, every offset holds a valid entry whose end is the next offset, and
/// the chain from the last one reaches the end-of-archive blocks (or the archive's end, or the
/// DTAR_IDX member at `member_at`), at the end the index records if it records one. This is
/// what a stale index (entries appended by `tar -r`, a rewritten archive), a cut one, or a cut
/// archive fails. Returns where the entries end and this rank's stretch of the index, or why
/// the index does not hold. Collective: each rank reads and decodes an even share of the
/// entries, and no rank reads the whole index (of the DTAR_IDX member of a compressed archive,
/// only the first and the last entries are decoded: see below).
pub fn check_index(
    comm: &dyn Comm,
    archive: &Archive,
    found: &index::Found,
    member_at: Option<u64>,
) -> Result<Checked, String> {
    let mine = check_stretch(comm.rank(), comm.size(), archive, found, member_at);
    let problem = match &mine {
        Ok(_) => &b""[..],
        Err(e) if e.is_empty() => b"it does not hold",
        Err(e) => e.as_bytes(),
    };
    let problems = comm.allgatherv(problem);
    if let Some(p) = problems.iter().find(|p| !p.is_empty()) {
        return Err(String::from_utf8_lossy(p).into_owned());
    }
    let mut mine = mine.expect("no rank found a problem");
    // Only the rank holding the last entry (or rank 0, of an empty index) knows the end.
    let end = comm.max(mine.end);
    match found.end {
        Some(recorded) if recorded != end => Err(format!(
            "it records that the entries end at byte {recorded}, they end at byte {end}"
        )),
        _ => {
            mine.offsets.shrink_to_fit();
            Ok(Checked { end, ..mine })
        }
    }
}

/// [`check_index`]'s work on rank `rank` of `size`: its stretch of the index, checked; `end`
/// is 0 unless this rank found where the entries end.
fn check_stretch(
    rank: usize,
    size: usize,
    archive: &Archive,
    found: &index::Found,
    member_at: Option<u64>,
) -> Result<Checked, String> {
    let n = found.count;
    let len = archive.len();
    let (a, b) = (even_start(n, size, rank), even_start(n, size, rank + 1));
    let mut end = 0u64;
    let mut globals = Vec::new();
    // This rank's stretch and the offset after it (to check the order across stretches and
    // the chain from this stretch's last entry).
    let mut stretch = found
        .read(archive, a, b + 1)
        .map_err(|e| format!("read its offsets {a} to {b}: {e}"))?;
    let after = if stretch.len() as u64 > b - a {
        stretch.pop()
    } else {
        None
    };
    let below = found.below.min(len);
    if !index::valid_order(&[&stretch[..], after.as_slice()].concat(), below) {
        return Err(format!(
            "its offsets are not increasing, block-aligned and below byte {below}"
        ));
    }
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
    if rank == 0 {
        let first = skip_globals(archive, 0, &mut globals);
        let listed = found
            .read(archive, 0, 1)
            .map_err(|e| format!("read its first offset: {e}"))?;
        match listed.first() {
            Some(&o) if o != first => {
                return Err(format!(
                    "its first entry is at byte {o}, the archive's at byte {first}"
                ))
            }
            None => {
                ends_at(first)
                    .map_err(|e| format!("it lists no entry but the archive has some ({e})"))?;
                end = first;
            }
            _ => {}
        }
    }
    // The entries this rank checks: its even share; for the DTAR_IDX member of a compressed
    // archive only the first and the last (rank 0), since decoding every header would
    // decompress the whole archive once more, and the member cannot go stale on its own there:
    // nothing appends to a seekable zstd stream without rewriting its seek table, and a cut
    // one has none.
    let light = found.source == Source::Member && archive.table().is_some();
    let mine: Vec<u64> = match (light, rank) {
        (false, _) => (a..b).collect(),
        (true, 0) if n > 0 => [0, n - 1]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        (true, _) => Vec::new(),
    };
    // Offset number `i` (this rank's stretch, the one after it, or read alone).
    let offset = |i: u64| -> Result<Option<u64>, String> {
        if (a..b).contains(&i) {
            Ok(Some(stretch[(i - a) as usize]))
        } else if i == b {
            Ok(after)
        } else {
            found
                .read(archive, i, i + 1)
                .map(|o| o.first().copied())
                .map_err(|e| format!("read its offset {i}: {e}"))
        }
    };
    let picked = mine
        .iter()
        .map(|&i| offset(i).map(|o| o.expect("an offset below the count")))
        .collect::<Result<Vec<u64>, String>>()?;
    let (decoded, inside) = decode_seeing(archive, &picked, &Globals::default());
    globals.extend(inside);
    for ((i, at), d) in mine.iter().copied().zip(&picked).zip(decoded) {
        let d = d.map_err(|e| format!("no valid entry at its offset {at}: {e}"))?;
        let next = skip_globals(archive, d.next, &mut globals);
        let want = if i + 1 < n { offset(i + 1)? } else { None };
        match want {
            Some(want) if next != want && !light => {
                return Err(format!(
                    "the entry at byte {at} ends at byte {next}, but the next indexed entry is \
                     at byte {want}"
                ))
            }
            Some(_) => {}
            None => {
                ends_at(next)?;
                end = next;
            }
        }
    }
    Ok(Checked {
        end,
        offsets: stretch,
        globals,
    })
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

/// How the tar stream is split over ranks: rank `r` handles `[bounds[r], bounds[r + 1])`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parts {
    /// `size + 1` non-decreasing offsets (bytes), from the stream's start to its end.
    bounds: Vec<u64>,
}

impl Parts {
    /// The even split by bytes of [`share`], for `size` ranks.
    pub fn even(archive: &Archive, size: usize) -> Parts {
        let mut bounds: Vec<u64> = (0..size).map(|r| share(archive, size, r).0).collect();
        bounds.push(share(archive, size, size - 1).1);
        Parts { bounds }
    }

    /// The split at `bounds` (`size + 1` non-decreasing offsets, bytes).
    pub fn from_bounds(bounds: Vec<u64>) -> Parts {
        debug_assert!(bounds.len() >= 2 && bounds.windows(2).all(|w| w[0] <= w[1]));
        Parts { bounds }
    }

    /// Rank `rank`'s part, `[start, end)` (bytes).
    pub fn of(&self, rank: usize) -> (u64, u64) {
        (self.bounds[rank], self.bounds[rank + 1])
    }

    /// The rank whose part holds the offset `at` (the last rank for an offset past the end).
    pub fn owner(&self, at: u64) -> usize {
        let size = self.bounds.len() - 1;
        self.bounds[..size]
            .partition_point(|&b| b <= at)
            .saturating_sub(1)
    }
}

/// Largest window of archive bytes the chain walk reads at once (runs of small entries).
const WALK_WINDOW: u64 = 64 << 10;
/// Window read at the header of an entry after a bigger one: a ustar block, or a pax header
/// with short records and its ustar block (longer extension headers take a second read).
const WALK_HEADER: u64 = 2 << 10;
/// Entries whose header and data fit in this are "small": after one, the walk reads the next
/// window wide. Past it, reading the data between headers costs more than a read per header
/// (on tmpfs, `tar -t` of /usr/include's archive, 13 KB per entry: 1 MiB windows over
/// everything 42 ms, a read per header 34 ms; 20,000 entries of 4 KiB: 90 against 83 ms).
const WALK_SMALL: u64 = 8 << 10;
/// Offsets per message when rank 0 streams the entries it found to the other ranks.
const WALK_BATCH: usize = 1 << 16;

/// Reads of the archive through one window: a read inside it is served from memory, one
/// outside it reads a new window there (`want` bytes, or more when asked for more).
struct Window<'a> {
    archive: &'a Archive,
    /// Archive offset of `buf[0]`.
    at: u64,
    /// The window's memory, reused from read to read; `buf[..filled]` holds archive bytes.
    buf: Vec<u8>,
    filled: usize,
    want: u64,
    /// Reads of the archive made (windows).
    reads: u64,
    /// Bytes of the archive read.
    bytes: u64,
}

impl Window<'_> {
    fn read(&mut self, o: u64, n: usize) -> std::io::Result<Vec<u8>> {
        let (w_at, w_end) = (self.at, self.at + self.filled as u64);
        let inside = o >= w_at && (o + n as u64 <= w_end || w_end >= self.archive.len());
        if !inside || self.reads == 0 {
            self.at = o;
            // Whatever part a failed read got is not trusted as a window.
            self.filled = 0;
            self.filled =
                self.archive
                    .read_into(o, (n as u64).max(self.want) as usize, &mut self.buf)?;
            self.reads += 1;
            self.bytes += self.filled as u64;
        }
        let from = ((o - self.at) as usize).min(self.filled);
        Ok(self.buf[from..(from + n).min(self.filled)].to_vec())
    }
}

/// What a chain walk found besides the entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walked {
    /// Entries found (the DTAR_IDX member excluded).
    pub entries: u64,
    /// Where the entries end (bytes): the end-of-archive blocks, or the archive's end.
    pub end: u64,
    /// The damage that stopped the walk, naming the byte offset.
    pub damage: Option<String>,
    /// An entry whose header was read but whose data the archive cuts short (seen, not
    /// usable): counted among the entries the user is told about, never extracted.
    pub cut: u64,
    /// Reads of the archive made (by the rank that walked).
    pub reads: u64,
    /// Bytes of the archive read (by the rank that walked).
    pub read_bytes: u64,
    /// The pax global headers met.
    pub globals: Globals,
}

/// Follow the chain of headers from offset 0: decode a header (with its extension headers:
/// pax `x`/`g`, GNU `L`/`K`, old GNU sparse extension blocks, a pax 1.0 sparse map), skip its
/// data, and go on at the next header, reading the archive through windows (a wide one over
/// runs of small entries, a small one at the header after big data), until the end-of-archive
/// blocks, the archive's end, or damage (a bad header, an archive cut inside a header or an
/// entry's data). Calls `each` with the offset of every entry's first header block, in order,
/// except `skip` (the DTAR_IDX member). Pax global headers (`g`) before an entry belong to no
/// entry: the offset given is that of the first block after them (as [`check_index`] expects).
pub fn walk(
    archive: &Archive,
    memsize: u64,
    skip: Option<u64>,
    mut each: impl FnMut(u64),
) -> Walked {
    let len = archive.len();
    let wide = memsize.clamp(WALK_HEADER, WALK_WINDOW);
    let mut w = Window {
        archive,
        at: 0,
        buf: Vec::new(),
        filled: 0,
        want: wide,
        reads: 0,
        bytes: 0,
    };
    let mut out = Walked::default();
    let mut at = 0u64;
    // An archive of mfu-rs ends with its index member and end-of-archive blocks: one that
    // ends where an entry would start was cut (other tools' may end so: GNU tar accepts them).
    let marked = w
        .read(0, format::MARK_HEAD)
        .is_ok_and(|head| format::mfu_marked(&head));
    let stop = |out: &mut Walked, w: &Window, end: u64, damage: Option<String>| {
        out.end = end;
        out.damage = damage;
        out.reads = w.reads;
        out.read_bytes = w.bytes;
    };
    loop {
        if at >= len {
            // No end-of-archive blocks: accepted, as GNU tar does, unless mfu-rs wrote it.
            let damage = marked.then(|| {
                format!(
                    "archive is truncated: it ends at byte {len} where an entry would start, \
                     missing its end (an mfu-rs archive ends with its index member and \
                     end-of-archive blocks); the entries before the cut were read"
                )
            });
            stop(&mut out, &w, at, damage);
            return out;
        }
        // Pax global headers belong to no entry; their records apply to those after them.
        let block = match w.read(at, BLOCK as usize) {
            Ok(b) => b,
            Err(e) => {
                stop(&mut out, &w, at, Some(format!("read at byte {at}: {e}")));
                return out;
            }
        };
        // The flag first: the decode below checks every other header's checksum.
        let global = if format::flags_global(&block) {
            classify(&block)
        } else {
            BlockKind::NotHeader
        };
        if let BlockKind::Header { flag: b'g', size } = global {
            if let Some(next) = round_up(size).checked_add(at + BLOCK) {
                if next <= len {
                    if let Some(g) = read_global(&mut |o, n| w.read(o, n), at, size) {
                        out.globals.push(g);
                    }
                    at = next;
                    continue;
                }
            }
        }
        let mut inside = Vec::new();
        let d = match format::decode_entry_in(&mut |o, n| w.read(o, n), at, &[], Some(&mut inside))
        {
            Ok(Some(d)) => d,
            Ok(None) => {
                // mfu-rs ends its archives with two zero blocks: one alone was cut after it.
                let damage = (marked && at + 2 * BLOCK > len).then(|| {
                    format!(
                        "archive is truncated: it ends at byte {len}, one block after an \
                         end-of-archive block, missing the second (an mfu-rs archive ends with \
                         two); the entries before the cut were read"
                    )
                });
                stop(&mut out, &w, at, damage);
                return out;
            }
            Err(e @ format::HeaderError::Truncated { .. }) => {
                stop(&mut out, &w, at, Some(e.to_string()));
                return out;
            }
            Err(e) => {
                stop(
                    &mut out,
                    &w,
                    at,
                    Some(format!(
                        "corrupt archive: {e}; the entries before it are usable, the rest \
                         of the archive is not read"
                    )),
                );
                return out;
            }
        };
        let data_end = d.data.saturating_add(d.stored_len());
        if data_end > len {
            out.cut += 1;
            stop(
                &mut out,
                &w,
                at,
                Some(format!(
                    "truncated archive: the entry at byte {at} ({}) needs {} bytes of data but \
                     the archive ends at byte {len}",
                    display(&d.header.path),
                    d.stored_len()
                )),
            );
            return out;
        }
        for g in inside {
            out.globals.push(g);
        }
        if Some(d.start) != skip {
            each(d.start);
            out.entries += 1;
        }
        if d.next > len {
            // The archive ends inside the last entry's padding (its data is whole; GNU tar
            // reports an unexpected end too).
            stop(
                &mut out,
                &w,
                len,
                Some(format!(
                    "truncated archive: it ends at byte {len}, inside the padding of its last \
                     entry"
                )),
            );
            return out;
        }
        // A wide window over runs of small entries; after big data, just the next header.
        w.want = if d.next - d.start <= WALK_SMALL {
            wide
        } else {
            WALK_HEADER
        };
        at = d.next;
    }
}

/// The chain of the archive on every rank (rank 0 walks it): the entries' offsets, the damage
/// that stopped the walk, if any, and where the entries end (bytes). Collective. Every rank
/// holds every offset: for checks and tests; extraction and listing use [`walk_shared`].
#[cfg(test)]
pub fn scan(comm: &dyn Comm, archive: &Archive, memsize: u64) -> (Vec<u64>, Option<String>, u64) {
    comm.bcast_with(0, || {
        let mut offsets = Vec::new();
        let walked = walk(archive, memsize, None, |o| offsets.push(o));
        (offsets, walked.damage, walked.end)
    })
}

/// A batch of the offsets rank 0 finds walking the chain (at most `WALK_BATCH`), the last with
/// how the walk ended.
#[derive(serde::Serialize, serde::Deserialize)]
struct WalkBatch {
    offsets: Vec<u64>,
    last: Option<WalkEnd>,
}

/// How rank 0's walk of the chain ended ([`Walked`], without its read counts).
#[derive(serde::Serialize, serde::Deserialize)]
struct WalkEnd {
    entries: u64,
    end: u64,
    cut: u64,
    damage: Option<String>,
    /// The pax global headers seen ([`Globals::encode`]).
    #[serde(with = "serde_bytes")]
    globals: Vec<u8>,
}

/// The chain walk of an archive without an index, shared out over ranks with nothing of the
/// size of the whole archive on any rank: rank 0 walks the chain (serial by nature: each
/// header says where the next is) and broadcasts the offsets it finds in batches of at most
/// `WALK_BATCH` as it goes; every rank keeps only those of its part of the stream
/// ([`share`]) and the one before it (whose data may reach into the part). With `keep_all`,
/// rank 0 keeps every offset (to save the index). Returns this rank's offsets and what the
/// walk found (the same on every rank). Collective.
pub fn walk_shared(
    comm: &dyn Comm,
    archive: &Archive,
    memsize: u64,
    skip: Option<u64>,
    keep_all: bool,
) -> (Vec<u64>, Walked) {
    let (start, end) = share(archive, comm.size(), comm.rank());
    let all = keep_all && comm.rank() == 0;
    // This rank's offsets, and the last one before its part.
    let mut mine: Vec<u64> = Vec::new();
    let mut before: Option<u64> = None;
    let mut keep = |o: u64| {
        if all || (start..end).contains(&o) {
            mine.push(o);
        } else if o < start {
            before = Some(o);
        }
    };
    if comm.size() == 1 {
        let walked = walk(archive, memsize, skip, keep);
        return (mine, walked);
    }
    let walked = if comm.rank() == 0 {
        let mut batch: Vec<u64> = Vec::with_capacity(WALK_BATCH);
        let send = |batch: &mut Vec<u64>, last: Option<&Walked>| {
            let last = last.map(|w| WalkEnd {
                entries: w.entries,
                end: w.end,
                cut: w.cut,
                damage: w.damage.clone(),
                globals: {
                    let mut globals = Vec::new();
                    w.globals.encode(&mut globals);
                    globals
                },
            });
            let _: WalkBatch = comm.bcast_with(0, || WalkBatch {
                offsets: std::mem::take(batch),
                last,
            });
        };
        let walked = walk(archive, memsize, skip, |o| {
            keep(o);
            batch.push(o);
            if batch.len() == WALK_BATCH {
                send(&mut batch, None);
            }
        });
        send(&mut batch, Some(&walked));
        walked
    } else {
        loop {
            let batch: WalkBatch = comm.bcast_with(0, || unreachable!("rank 0 produces"));
            for o in batch.offsets {
                keep(o);
            }
            if let Some(w) = batch.last {
                break Walked {
                    entries: w.entries,
                    end: w.end,
                    cut: w.cut,
                    damage: w.damage,
                    reads: 0,
                    read_bytes: 0,
                    globals: Globals::decode(&w.globals),
                };
            }
        }
    };
    if let Some(b) = before {
        mine.insert(0, b);
    }
    (mine, walked)
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
/// compressed one, whose frames are then decompressed once), without global headers.
#[cfg(test)]
pub fn decode(
    archive: &Archive,
    offsets: &[u64],
) -> Vec<Result<format::Decoded, format::HeaderError>> {
    decode_in(archive, offsets, &Globals::default())
}

/// [`decode`] with the archive's pax global headers applied.
pub fn decode_in(
    archive: &Archive,
    offsets: &[u64],
    globals: &Globals,
) -> Vec<Result<format::Decoded, format::HeaderError>> {
    decode_seeing(archive, offsets, globals).0
}

/// [`decode_in`], and the global headers met inside the entries' chains of extension headers.
#[allow(clippy::type_complexity)] // a pair of plain lists
pub fn decode_seeing(
    archive: &Archive,
    offsets: &[u64],
    globals: &Globals,
) -> (
    Vec<Result<format::Decoded, format::HeaderError>>,
    Vec<Global>,
) {
    use rayon::prelude::*;
    // The entries of `run`, in order, reading the archive through one window: a read at `o`
    // also takes in the headers of the next few entries when they are near.
    let decode_run = |run: &[u64]| {
        // The window: its archive offset, its memory (reused) and the bytes of it read.
        let (mut w_at, mut w, mut filled) = (0u64, Vec::new(), 0usize);
        let mut out = Vec::with_capacity(run.len());
        let mut seen = Vec::new();
        for (j, &at) in run.iter().enumerate() {
            let ahead = run.get(j + 8).or(run.last()).copied().unwrap_or(at);
            let mut read = |o: u64, n: usize| {
                if o < w_at || o + n as u64 > w_at + filled as u64 {
                    let reach = ahead.saturating_sub(o) + HEADER_WINDOW as u64;
                    let len = if reach <= WIDE_WINDOW {
                        reach as usize
                    } else {
                        HEADER_WINDOW
                    };
                    (w_at, filled) = (o, 0);
                    filled = archive.read_into(o, n.max(len), &mut w)?;
                }
                let from = (o - w_at) as usize;
                Ok(w[from..(from + n).min(filled)].to_vec())
            };
            out.push(
                format::decode_entry_in(&mut read, at, globals.at(at), Some(&mut seen)).and_then(
                    |d| {
                        d.ok_or(format::HeaderError::Invalid {
                            offset: at,
                            what: "the index points at an end-of-archive block".into(),
                        })
                    },
                ),
            );
        }
        (out, seen)
    };
    if archive.table().is_some() {
        decode_run(offsets)
    } else {
        let runs: Vec<_> = offsets.par_chunks(DECODE_RUN).map(decode_run).collect();
        let mut out = Vec::with_capacity(offsets.len());
        let mut seen = Vec::new();
        for (o, s) in runs {
            out.extend(o);
            seen.extend(s);
        }
        (out, seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::format::{Header, Kind};

    /// A plain file's header: `size` bytes, times from `i`.
    fn file(path: Vec<u8>, size: u64, i: u64) -> Header {
        Header {
            path,
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
            projid: Default::default(),
        }
    }

    /// `h` and its data (0xAB bytes, padded to a block) at the end of `bytes`.
    fn append_file(bytes: &mut Vec<u8>, h: Header) {
        h.encode(bytes);
        bytes.resize(bytes.len() + round_up(h.size) as usize, 0xAB);
    }

    #[test]
    fn an_index_read_in_even_stretches_reaches_each_rank_as_its_share_only() {
        // An archive of 1000 blocks; entries at irregular offsets, with long gaps (big data
        // spanning several ranks' parts, so that some parts hold no header at all).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tar");
        std::fs::write(&path, vec![0u8; 1000 * BLOCK as usize]).unwrap();
        let archive = Archive::open(path.as_os_str().as_encoded_bytes()).unwrap();
        let mut all = Vec::new();
        let mut at = 0u64;
        for i in 0..300u64 {
            all.push(at * BLOCK);
            at += if i % 50 == 49 { 200 } else { 1 + i % 3 };
            if at >= 1000 {
                break;
            }
        }
        for size in [1, 2, 3, 4, 16, 40] {
            let got = steal::local::run(size, |comm| {
                // Each rank starts with an even stretch by count, as check_index reads them.
                let n = all.len() as u64;
                let a = even_start(n, size, comm.rank()) as usize;
                let b = even_start(n, size, comm.rank() + 1) as usize;
                to_their_ranks(comm, &archive, &all[a..b])
            });
            let mut whole = Vec::new();
            for (rank, mine) in got.iter().enumerate() {
                let (start, end) = share(&archive, size, rank);
                let own: Vec<u64> = all
                    .iter()
                    .copied()
                    .filter(|o| (start..end).contains(o))
                    .collect();
                let before = all.iter().copied().rfind(|&o| o < start);
                let want: Vec<u64> = before.into_iter().chain(own.iter().copied()).collect();
                assert_eq!(
                    mine, &want,
                    "{size} ranks, rank {rank}: its share and no more"
                );
                whole.extend(own);
            }
            assert_eq!(whole, all, "{size} ranks: every offset reaches one rank");
        }
    }

    #[test]
    fn the_walk_reads_headers_past_big_entries_and_one_window_for_many_small_ones() {
        // 200 entries of 32 KiB (past WALK_SMALL), then 400 empty ones.
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        let mut want = Vec::new();
        for i in 0..600u64 {
            let size = if i < 200 { 32 << 10 } else { 0 };
            want.push(bytes.len() as u64);
            append_file(&mut bytes, file(format!("d/f{i}").into_bytes(), size, 0));
        }
        let end = bytes.len() as u64;
        bytes.resize(bytes.len() + 2 * BLOCK as usize, 0);
        let path = dir.path().join("a.tar");
        std::fs::write(&path, &bytes).unwrap();
        let archive = Archive::open(path.as_os_str().as_encoded_bytes()).unwrap();
        let mut got = Vec::new();
        let walked = walk(&archive, 1 << 30, None, |o| got.push(o));
        assert_eq!(got, want);
        assert_eq!(
            (walked.entries, walked.end, walked.damage),
            (600, end, None)
        );
        // The data of the big entries (6.5 MB) is skipped, not read: one header window each.
        let big_data = 200 * (32 << 10);
        assert!(
            walked.read_bytes < big_data / 8,
            "read {} bytes of an archive of {} (data {big_data})",
            walked.read_bytes,
            bytes.len()
        );
        // The 400 empty entries (200 KiB of headers) share a few wide windows.
        let tiny_windows = 400 * BLOCK / WALK_WINDOW + 2;
        assert!(
            walked.reads <= 200 + tiny_windows,
            "{} reads for 200 big and 400 empty entries",
            walked.reads
        );
    }

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
            let h = file(format!("d{}/{name}f{i}", i % 3).into_bytes(), size, i);
            let at = bytes.len() as u64;
            append_file(&mut bytes, h.clone());
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
