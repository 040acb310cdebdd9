//! The metadata column of a stat list, packed: 20 bytes a record where a [`Meta`] takes 80.
//!
//! A list of 10^6 records of 60-byte paths holds 84 MB instead of 144 (walk, and each of the
//! two lists sync and cmp hold; 120 MB with the 56-byte records this replaced). The packing is
//! lossless: every [`Meta`] comes back as it went in. A record keeps
//!
//! - a *class*: the index of its `(mode, uid, gid, dev, high 32 bits of size and inode, links
//!   of 255 or more)` in the column's table of the distinct classes it holds (a tree has few:
//!   its owners times its modes), and the link count below 255 beside it, in one `u32`;
//! - the low 32 bits of the size and of the inode;
//! - the mtime as one `u64`: 34 bits of signed seconds above 30 bits of nanoseconds, which
//!   holds every time from 1697 to 2242 (±2^33 s around the epoch) to the nanosecond.
//!
//! The atimes and the ctimes that differ from their record's mtime are kept aside, each column
//! sparse (record index and time, 12 bytes) while few records have one (a tree of files
//! written once and not read since: its directories, read by a walk since they changed), and
//! dense (8 bytes for every record) once a third of them do (a copy whose times were set,
//! whose ctimes are when they were).
//!
//! A record whose values do not fit (a time outside those years, a nanosecond field of 2^30
//! or more, as a damaged list may carry; a 2^24th class) is kept whole in a side table
//! instead, with its index there in its packed record. Walks of real trees put nothing there.

use crate::record::{FileType, Meta};
use std::collections::HashMap;

/// Bits of nanoseconds in a packed time.
const NSEC_BITS: u32 = 30;
/// Bits of the class index in [`Packed::class_links`]; the link count is above them.
const CLASS_BITS: u32 = 24;
/// The class that marks a record kept whole in the side table.
const SPILLED: u32 = (1 << CLASS_BITS) - 1;
/// Classes a column indexes (`0..SPILLED`).
const MAX_CLASSES: usize = SPILLED as usize;
/// The link count field's value that says the links are in the class (255 or more links).
const LINKS_IN_CLASS: u32 = 0xff;

/// One record's metadata, packed (see the module's documentation). Of 32-bit fields only, so
/// that records follow one another without padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Packed {
    /// The class's index in the column's table in the low [`CLASS_BITS`] bits ([`SPILLED`]:
    /// the record is in the side table), the link count above them ([`LINKS_IN_CLASS`]: the
    /// class holds it).
    class_links: u32,
    /// The low 32 bits of the size (the class holds the high ones).
    size_lo: u32,
    /// The low 32 bits of the inode number (the class holds the high ones); for a spilled
    /// record, its index in the side table.
    ino_lo: u32,
    /// mtime (seconds above [`NSEC_BITS`] bits of nanoseconds): low 32 bits, high 32 bits.
    mtime: [u32; 2],
}

/// Bytes of one record's packed metadata (atime and ctime apart: see the module's documentation).
pub const PACKED_BYTES: usize = std::mem::size_of::<Packed>();

/// What records of one class share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Class {
    mode: u32,
    uid: u32,
    gid: u32,
    size_hi: u32,
    ino_hi: u32,
    dev: u64,
    /// The link count when it is [`LINKS_IN_CLASS`] or more, else 0.
    links: u64,
}

/// A time as one `u64`, when its seconds fit 34 signed bits and its nanoseconds 30 bits.
fn pack_time(secs: i64, nsec: u32) -> Option<u64> {
    let fits = (-(1i64 << 33)..(1i64 << 33)).contains(&secs) && nsec < (1 << NSEC_BITS);
    fits.then(|| ((secs as u64) << NSEC_BITS) | u64::from(nsec))
}

/// Inverse of [`pack_time`]: the arithmetic shift gives the seconds their sign back.
fn unpack_time(v: u64) -> (i64, u32) {
    ((v as i64) >> NSEC_BITS, (v & ((1 << NSEC_BITS) - 1)) as u32)
}

impl Packed {
    fn class(&self) -> u32 {
        self.class_links & SPILLED
    }

    fn spilled(&self) -> bool {
        self.class() == SPILLED
    }

    fn links(&self) -> u32 {
        self.class_links >> CLASS_BITS
    }

    fn mtime(&self) -> u64 {
        (u64::from(self.mtime[1]) << 32) | u64::from(self.mtime[0])
    }
}

/// A column of packed times (atimes or ctimes) of the records whose time is not their mtime:
/// sparse (record index and time, 12 bytes each) while they are few (a walk's directories,
/// whose atime moves when they are read), dense (a time for every record, 8 bytes each) once
/// they are more than a third of the records, sparse again below a sixth (the records of a
/// list's first directories, appended one directory at a time, may all have one).
#[derive(Clone, Debug, Default)]
struct Times {
    /// Sparse: the records that have their own time, increasing.
    at: Vec<u32>,
    /// Sparse: their times; dense (`at` empty): every record's.
    times: Vec<u64>,
    /// Every record's time is in `times`.
    dense: bool,
    /// Entries of `at` already written by the compaction under way ([`Times::move_down`]).
    kept: usize,
    /// Dense: the records whose time is not their mtime.
    own: usize,
}

impl Times {
    /// Add the time `t` of record `i` (the last, whose mtime is `mtime`); `packed`: the
    /// records before it.
    fn push(&mut self, i: usize, t: u64, mtime: u64, packed: &[Packed]) {
        if self.dense {
            self.times.push(t);
            self.own += usize::from(t != mtime);
        } else if t != mtime {
            self.at
                .push(u32::try_from(i).expect("fewer than 2^32 records on one rank"));
            self.times.push(t);
            self.settle(packed);
        }
    }

    /// Records that have their own time.
    fn own(&self) -> usize {
        if self.dense {
            self.own
        } else {
            self.at.len()
        }
    }

    /// Dense when more than a third of the records (`packed`: all of them) have their own
    /// time, sparse below a sixth (sparse under 64 of them, as any column of few records).
    fn settle(&mut self, packed: &[Packed]) {
        let (own, n) = (self.own(), packed.len());
        if !self.dense && own * 3 > n && own >= 64 {
            self.densify(packed, n);
        } else if self.dense && (own * 6 < n || own < 64) {
            self.sparsify(packed);
        }
    }

    /// Keep the own times only (`packed`: every record).
    fn sparsify(&mut self, packed: &[Packed]) {
        let mut at = Vec::with_capacity(self.own);
        let mut times = Vec::with_capacity(self.own);
        for (i, (p, &t)) in packed.iter().zip(&self.times).enumerate() {
            if t != p.mtime() {
                at.push(i as u32);
                times.push(t);
            }
        }
        *self = Times {
            at,
            times,
            ..Times::default()
        };
    }

    /// Hold a time for every one of `n` records (`packed`: the first `n - 1` or all of
    /// them; a record past `packed` gets 0 until set).
    fn densify(&mut self, packed: &[Packed], n: usize) {
        if self.dense {
            return;
        }
        let mut all: Vec<u64> = Vec::with_capacity(n);
        all.extend(packed.iter().take(n).map(Packed::mtime));
        all.resize(n, 0);
        for (&i, &t) in self.at.iter().zip(&self.times) {
            all[i as usize] = t;
        }
        *self = Times {
            own: self.at.len(),
            at: Vec::new(),
            times: all,
            dense: true,
            kept: 0,
        };
    }

    /// The time of record `i` (whose mtime is `mtime`).
    fn get(&self, i: usize, mtime: u64) -> u64 {
        if self.dense {
            return self.times[i];
        }
        match self.at.binary_search(&(i as u32)) {
            Ok(k) => self.times[k],
            Err(_) => mtime,
        }
    }

    /// Records that have a time of their own here (all of them, dense).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.times.len()
    }

    /// Add the times of `other`'s records, which follow this column's `base` records
    /// (`packed`: all of them, `other`'s included). A dense `other` (a directory whose
    /// subdirectories all have their own atime) adds only its own times to a sparse column.
    fn extend_from(
        &mut self,
        other: &Times,
        base: usize,
        packed: &[Packed],
        other_packed: &[Packed],
    ) {
        if self.dense {
            self.times.reserve(other_packed.len());
            self.times.extend(
                other_packed
                    .iter()
                    .enumerate()
                    .map(|(j, p)| other.get(j, p.mtime())),
            );
            self.own += other.own();
            self.settle(packed);
            return;
        }
        let offset = u32::try_from(base).expect("fewer than 2^32 records on one rank");
        if other.dense {
            for (j, (p, &t)) in other_packed.iter().zip(&other.times).enumerate() {
                if t != p.mtime() {
                    self.at.push(offset + j as u32);
                    self.times.push(t);
                }
            }
        } else {
            self.at.extend(other.at.iter().map(|&i| i + offset));
            self.times.extend_from_slice(&other.times);
        }
        self.settle(packed);
    }

    /// Record `to` takes record `from`'s time (`to <= from`, called for every record kept, in
    /// order, by a compaction that [`Times::truncate`] ends).
    fn move_down(&mut self, from: usize, to: usize) {
        if self.dense {
            self.times[to] = self.times[from];
            return;
        }
        // Entries before `kept` are those of records kept so far: `from`'s is not among them.
        if let Ok(k) = self.at[self.kept..].binary_search(&(from as u32)) {
            let k = self.kept + k;
            self.at[self.kept] = to as u32;
            self.times[self.kept] = self.times[k];
            self.kept += 1;
        }
    }

    /// End a compaction: keep the first `n` records (`packed`: them).
    fn truncate(&mut self, n: usize, packed: &[Packed]) {
        if self.dense {
            self.times.truncate(n);
            self.own = packed
                .iter()
                .zip(&self.times)
                .filter(|(p, &t)| t != p.mtime())
                .count();
        } else {
            self.at.truncate(self.kept);
            self.times.truncate(self.kept);
        }
        self.kept = 0;
        self.settle(packed);
    }

    fn reserve(&mut self, n: usize, exact: bool) {
        if self.dense {
            if exact {
                self.times.reserve_exact(n);
            } else {
                self.times.reserve(n);
            }
        }
    }

    fn shrink_to_fit(&mut self) {
        self.at.shrink_to_fit();
        self.times.shrink_to_fit();
    }

    fn heap_bytes(&self) -> usize {
        self.at.capacity() * 4 + self.times.capacity() * 8
    }
}

/// The [`Meta`] of every record of a stat list, packed; a column of [`crate::FileList`].
#[derive(Clone, Debug, Default)]
pub(crate) struct MetaColumn {
    packed: Vec<Packed>,
    /// The distinct classes of the records, by index (at most [`MAX_CLASSES`]).
    classes: Vec<Class>,
    /// Each class's index in `classes`, to find it when a record is added.
    class_index: HashMap<Class, u32>,
    /// The class of the record added last: the next one most often has it too (a walk adds a
    /// directory's files one after another), and is then found without hashing.
    last: u32,
    /// The atimes that are not their record's mtime.
    atimes: Times,
    /// The ctimes that are not their record's mtime.
    ctimes: Times,
    /// Records that do not pack, whole, in record order.
    spilled: Vec<Meta>,
}

impl MetaColumn {
    /// Records in the column.
    pub(crate) fn len(&self) -> usize {
        self.packed.len()
    }

    /// The index of `c` in the table, added if new; `None` when the table is full.
    fn class_index(&mut self, c: &Class) -> Option<u32> {
        if self.classes.get(self.last as usize) == Some(c) {
            return Some(self.last);
        }
        let k = match self.class_index.get(c) {
            Some(&k) => k,
            None if self.classes.len() == MAX_CLASSES => return None,
            None => {
                let k = self.classes.len() as u32;
                self.classes.push(*c);
                self.class_index.insert(*c, k);
                k
            }
        };
        self.last = k;
        Some(k)
    }

    /// `m` packed with its atime and ctime, or `None` when it does not fit.
    fn pack(&mut self, m: &Meta) -> Option<(Packed, u64, u64)> {
        let mtime = pack_time(m.mtime, m.mtime_nsec)?;
        let atime = pack_time(m.atime, m.atime_nsec)?;
        let ctime = pack_time(m.ctime, m.ctime_nsec)?;
        let (links, class_links) = if m.nlink >= u64::from(LINKS_IN_CLASS) {
            (m.nlink, LINKS_IN_CLASS)
        } else {
            (0, m.nlink as u32)
        };
        let class = Class {
            mode: m.mode,
            uid: m.uid,
            gid: m.gid,
            size_hi: (m.size >> 32) as u32,
            ino_hi: (m.ino >> 32) as u32,
            dev: m.dev,
            links,
        };
        let k = self.class_index(&class)?;
        let p = Packed {
            class_links: (class_links << CLASS_BITS) | k,
            size_lo: m.size as u32,
            ino_lo: m.ino as u32,
            mtime: [mtime as u32, (mtime >> 32) as u32],
        };
        Some((p, atime, ctime))
    }

    /// Add a packed record with its atime and ctime.
    fn push_packed(&mut self, p: Packed, atime: u64, ctime: u64) {
        let (i, mtime) = (self.packed.len(), p.mtime());
        self.packed.push(p);
        self.atimes.push(i, atime, mtime, &self.packed);
        self.ctimes.push(i, ctime, mtime, &self.packed);
    }

    /// Add a record.
    pub(crate) fn push(&mut self, m: &Meta) {
        match self.pack(m) {
            Some((p, atime, ctime)) => self.push_packed(p, atime, ctime),
            None => {
                self.spilled.push(*m);
                let p = Packed {
                    class_links: SPILLED,
                    size_lo: 0,
                    ino_lo: u32::try_from(self.spilled.len() - 1)
                        .expect("fewer than 2^32 records on one rank"),
                    mtime: [0; 2],
                };
                // Its times are in the side table: the columns hold none of their own.
                self.push_packed(p, 0, 0);
            }
        }
    }

    /// The metadata of record `i`.
    pub(crate) fn get(&self, i: usize) -> Meta {
        self.unpack(i, &self.packed[i])
    }

    /// Record `i`, `p`, unpacked.
    fn unpack(&self, i: usize, p: &Packed) -> Meta {
        if p.spilled() {
            return self.spilled[p.ino_lo as usize];
        }
        let c = &self.classes[p.class() as usize];
        let m = p.mtime();
        let (mtime, mtime_nsec) = unpack_time(m);
        let (atime, atime_nsec) = unpack_time(self.atimes.get(i, m));
        let (ctime, ctime_nsec) = unpack_time(self.ctimes.get(i, m));
        let nlink = match p.links() {
            LINKS_IN_CLASS => c.links,
            n => u64::from(n),
        };
        Meta {
            mode: c.mode,
            uid: c.uid,
            gid: c.gid,
            atime_nsec,
            mtime_nsec,
            ctime_nsec,
            atime,
            mtime,
            ctime,
            size: (u64::from(c.size_hi) << 32) | u64::from(p.size_lo),
            nlink,
            ino: (u64::from(c.ino_hi) << 32) | u64::from(p.ino_lo),
            dev: c.dev,
        }
    }

    /// The mode of a packed record.
    fn mode(&self, p: &Packed) -> u32 {
        if p.spilled() {
            self.spilled[p.ino_lo as usize].mode
        } else {
            self.classes[p.class() as usize].mode
        }
    }

    /// The type of record `i`, from its mode.
    pub(crate) fn file_type(&self, i: usize) -> FileType {
        FileType::from_mode(self.mode(&self.packed[i]))
    }

    /// The types of all records, in order.
    pub(crate) fn file_types(&self) -> impl Iterator<Item = FileType> + '_ {
        self.packed
            .iter()
            .map(|p| FileType::from_mode(self.mode(p)))
    }

    /// Add every record of `other`, in order. Records are copied as they are when both columns
    /// index their classes alike, re-indexed otherwise (walks append one directory's records
    /// at a time, whose table is small).
    pub(crate) fn extend_from(&mut self, other: &MetaColumn) {
        let map: Vec<Option<u32>> = other.classes.iter().map(|c| self.class_index(c)).collect();
        let same = map.iter().enumerate().all(|(k, &to)| to == Some(k as u32));
        let base = self.len();
        if same && other.spilled.is_empty() {
            self.packed.extend_from_slice(&other.packed);
        } else {
            self.packed.reserve(other.len());
            for (j, p) in other.packed.iter().enumerate() {
                match (!p.spilled()).then(|| map[p.class() as usize]).flatten() {
                    Some(to) => self.packed.push(Packed {
                        class_links: (p.links() << CLASS_BITS) | to,
                        ..*p
                    }),
                    None => {
                        self.spilled.push(other.unpack(j, p));
                        self.packed.push(Packed {
                            class_links: SPILLED,
                            size_lo: 0,
                            ino_lo: u32::try_from(self.spilled.len() - 1)
                                .expect("fewer than 2^32 records on one rank"),
                            mtime: [0; 2],
                        });
                    }
                }
            }
        }
        for (mine, theirs) in [
            (&mut self.atimes, &other.atimes),
            (&mut self.ctimes, &other.ctimes),
        ] {
            mine.extend_from(theirs, base, &self.packed, &other.packed);
        }
    }

    /// Record `to` becomes a copy of record `from` (`to <= from`), as [`crate::FileList::
    /// retain`] compacts the list; [`MetaColumn::truncate`] ends the compaction.
    pub(crate) fn move_down(&mut self, from: usize, to: usize) {
        self.packed[to] = self.packed[from];
        self.atimes.move_down(from, to);
        self.ctimes.move_down(from, to);
    }

    /// Keep the first `n` records; the side table keeps only what they use.
    pub(crate) fn truncate(&mut self, n: usize) {
        self.packed.truncate(n);
        self.atimes.truncate(n, &self.packed);
        self.ctimes.truncate(n, &self.packed);
        if self.spilled.is_empty() {
            return;
        }
        let old = std::mem::take(&mut self.spilled);
        for p in self.packed.iter_mut().filter(|p| p.spilled()) {
            self.spilled.push(old[p.ino_lo as usize]);
            p.ino_lo = self.spilled.len() as u32 - 1;
        }
    }

    /// Make room for `n` more records without regrowing.
    pub(crate) fn reserve_exact(&mut self, n: usize) {
        self.packed.reserve_exact(n);
        self.atimes.reserve(n, true);
        self.ctimes.reserve(n, true);
    }

    /// Make room for `n` more records.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.packed.reserve(n);
        self.atimes.reserve(n, false);
        self.ctimes.reserve(n, false);
    }

    /// Give back spare capacity.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.packed.shrink_to_fit();
        self.classes.shrink_to_fit();
        self.class_index.shrink_to_fit();
        self.atimes.shrink_to_fit();
        self.ctimes.shrink_to_fit();
        self.spilled.shrink_to_fit();
    }

    /// Heap bytes held (capacity, not length; the class index's table estimated from its
    /// capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        let index_entry = std::mem::size_of::<(Class, u32)>() + 1;
        self.packed.capacity() * PACKED_BYTES
            + self.classes.capacity() * std::mem::size_of::<Class>()
            + self.class_index.capacity() * index_entry
            + self.atimes.heap_bytes()
            + self.ctimes.heap_bytes()
            + self.spilled.capacity() * std::mem::size_of::<Meta>()
    }

    /// Records kept whole in the side table.
    #[cfg(test)]
    pub(crate) fn spilled_len(&self) -> usize {
        self.spilled.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn a_packed_record_is_20_bytes() {
        assert_eq!(PACKED_BYTES, 20);
        assert_eq!(
            std::mem::align_of::<Packed>(),
            4,
            "no padding between records"
        );
    }

    /// Times at and around every edge: the packing's, the nanoseconds', year 1 and year 9999.
    fn edge_times() -> Vec<(i64, u32)> {
        let year_1 = -62_135_596_800; // 0001-01-01T00:00:00Z
        let year_9999 = 253_402_300_799; // 9999-12-31T23:59:59Z
        let mut secs = vec![0, -1, 1, year_1, year_9999, i64::MIN, i64::MAX];
        for edge in [1i64 << 33, -(1i64 << 33)] {
            secs.extend([edge - 1, edge, edge + 1]);
        }
        let nsecs = [0, 1, 999_999_999, (1 << 30) - 1, 1 << 30, u32::MAX];
        secs.iter()
            .flat_map(|&s| nsecs.iter().map(move |&n| (s, n)))
            .collect()
    }

    fn with_times(base: Meta, t: [(i64, u32); 3]) -> Meta {
        Meta {
            atime: t[0].0,
            atime_nsec: t[0].1,
            mtime: t[1].0,
            mtime_nsec: t[1].1,
            ctime: t[2].0,
            ctime_nsec: t[2].1,
            ..base
        }
    }

    #[test]
    fn every_meta_comes_back_as_it_went_in_including_the_extremes() {
        let plain = Meta {
            mode: 0o100644,
            uid: 1000,
            gid: 100,
            size: 4096,
            nlink: 1,
            ino: 12,
            dev: 0x803,
            ..Meta::default()
        };
        let mut metas = Vec::new();
        for t in edge_times() {
            metas.push(with_times(plain, [t, (0, 0), (0, 0)]));
            metas.push(with_times(plain, [(5, 5), t, (7, 7)]));
            metas.push(with_times(plain, [(1, 2), (3, 4), t]));
        }
        for nlink in [0, 2, (1 << 24) - 1, 1 << 24, u64::MAX] {
            metas.push(Meta { nlink, ..plain });
        }
        for v in [0, u64::MAX] {
            metas.push(Meta {
                size: v,
                ino: v,
                dev: v,
                ..plain
            });
        }
        metas.push(Meta {
            mode: u32::MAX,
            uid: u32::MAX,
            gid: u32::MAX,
            ..plain
        });
        metas.push(Meta::default());
        // Random values, narrow (they pack) and wide (most spill); 300 devices overfill the table.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(17);
        for k in 0..20_000u64 {
            let wide = k % 2 == 0;
            let secs = |rng: &mut rand::rngs::SmallRng| {
                if wide {
                    rng.random::<i64>()
                } else {
                    rng.random_range(-(1i64 << 33)..(1i64 << 33))
                }
            };
            let times = [(); 3].map(|_| (secs(&mut rng), rng.random_range(0..1_000_000_000)));
            metas.push(with_times(
                Meta {
                    mode: rng.random(),
                    uid: rng.random(),
                    gid: rng.random(),
                    size: rng.random(),
                    nlink: if wide {
                        rng.random()
                    } else {
                        rng.random_range(0..1 << 24)
                    },
                    ino: rng.random(),
                    dev: (k / 2) % 300,
                    ..Meta::default()
                },
                times,
            ));
        }
        let mut col = MetaColumn::default();
        for m in &metas {
            col.push(m);
        }
        assert_eq!(col.len(), metas.len());
        for (i, m) in metas.iter().enumerate() {
            assert_eq!(col.get(i), *m, "record {i}");
            assert_eq!(col.file_type(i), m.file_type());
        }
        assert!(col.spilled_len() > 0 && col.spilled_len() < metas.len());
        assert!(col.atimes.dense && col.ctimes.dense);
        // Appended to a column that indexes classes differently, then compacted.
        let mut other = MetaColumn::default();
        other.push(&Meta { dev: 7, ..plain });
        other.extend_from(&col);
        assert_eq!(other.get(0), Meta { dev: 7, ..plain });
        for (i, m) in metas.iter().enumerate() {
            assert_eq!(other.get(i + 1), *m, "appended record {i}");
        }
        let keep: Vec<usize> = (0..other.len()).filter(|i| i % 3 != 1).collect();
        for (to, &from) in keep.iter().enumerate() {
            other.move_down(from, to);
        }
        other.truncate(keep.len());
        for (to, &from) in keep.iter().enumerate() {
            let want = if from == 0 {
                Meta { dev: 7, ..plain }
            } else {
                metas[from - 1]
            };
            assert_eq!(other.get(to), want, "kept record {to}");
        }
        let in_use = other.packed.iter().filter(|p| p.spilled()).count();
        assert_eq!(
            other.spilled_len(),
            in_use,
            "the side table keeps what is used"
        );
        assert!(in_use < col.spilled_len());
        assert_eq!(other.atimes.held(), keep.len());
    }

    #[test]
    fn real_times_and_one_device_pack_without_the_side_table() {
        let mut col = MetaColumn::default();
        for (s, n) in [
            (1_700_000_000, 999_999_999),
            (-1, 0),
            (0, 0),
            (8_000_000_000, 1),
        ] {
            col.push(&with_times(
                Meta {
                    dev: 64770,
                    nlink: 65_000,
                    ..Meta::default()
                },
                [(s, n); 3],
            ));
        }
        assert_eq!(col.spilled_len(), 0);
        assert_eq!(
            col.classes.len(),
            1,
            "one device, one owner, one mode, 65,000 links"
        );
        assert!(
            col.atimes.held() == 0 && col.ctimes.held() == 0,
            "equal times take no room of their own"
        );
        let mut twice = col.clone();
        twice.extend_from(&col);
        assert_eq!(twice.len(), 8);
        assert_eq!(twice.get(7), col.get(3));
        assert!(twice.heap_bytes() >= 8 * PACKED_BYTES);
    }

    /// A walk's files: a few owners and modes, one device, times equal or not.
    fn walked(i: u64) -> Meta {
        let t = 1_700_000_000 + (i as i64 % 1000);
        Meta {
            mode: if i % 10 == 0 { 0o040755 } else { 0o100644 },
            uid: 1000 + (i % 3) as u32,
            gid: 100,
            size: i * 37,
            nlink: if i % 10 == 0 { 2 + i % 300 } else { 1 },
            ino: (7 << 32) + i,
            dev: 2049,
            atime: t + i as i64 % 2,
            atime_nsec: 5,
            mtime: t,
            mtime_nsec: 5,
            ctime: t,
            ctime_nsec: 5,
        }
    }

    #[test]
    fn records_share_their_class_and_hold_atimes_and_ctimes_only_once_one_differs() {
        let mut col = MetaColumn::default();
        // Half of them read since written (their atime differs); no ctime differs.
        let n = 10_000u64;
        for i in 0..n {
            col.push(&walked(i));
        }
        for i in 0..n {
            assert_eq!(col.get(i as usize), walked(i), "record {i}");
        }
        assert_eq!(col.spilled_len(), 0);
        // (file, dir) x 3 owners, and the directories of 255 links or more by their count.
        let big_links = (0..n)
            .filter(|i| i % 10 == 0 && 2 + i % 300 >= 255)
            .map(|i| (i % 3, 2 + i % 300))
            .collect::<std::collections::HashSet<_>>()
            .len();
        assert_eq!(col.classes.len(), 2 * 3 + big_links);
        assert!(
            col.atimes.dense,
            "half the atimes differ: one for every record"
        );
        assert_eq!(col.atimes.held(), n as usize);
        assert_eq!(col.ctimes.held(), 0, "every ctime is its mtime: none held");
        col.shrink_to_fit();
        let index = col.class_index.capacity() * (std::mem::size_of::<(Class, u32)>() + 1);
        assert_eq!(
            col.heap_bytes(),
            n as usize * (20 + 8) + col.classes.len() * std::mem::size_of::<Class>() + index
        );
        // Appended to itself (the classes map alike), then to a column that has other ones
        // and holds ctimes but no atimes; then compacted.
        let mut twice = col.clone();
        twice.extend_from(&col);
        let first = Meta {
            mode: 0o120777,
            ctime: 5,
            ..walked(0)
        };
        let mut other = MetaColumn::default();
        other.push(&first);
        assert!(other.atimes.held() == 0 && other.ctimes.held() == 1);
        other.extend_from(&twice);
        assert_eq!(other.len(), 1 + 2 * n as usize);
        assert_eq!(other.get(0), first);
        for i in 0..2 * n {
            assert_eq!(
                other.get(1 + i as usize),
                walked(i % n),
                "appended record {i}"
            );
            assert_eq!(other.file_type(1 + i as usize), walked(i % n).file_type());
        }
        assert_eq!(other.atimes.held(), other.len());
        assert_eq!(other.ctimes.held(), 1, "still the first record's only");
        let keep: Vec<usize> = (0..other.len()).filter(|i| i % 4 == 0).collect();
        for (to, &from) in keep.iter().enumerate() {
            other.move_down(from, to);
        }
        other.truncate(keep.len());
        assert_eq!(other.get(0), first);
        for (to, &from) in keep.iter().enumerate().skip(1) {
            assert_eq!(
                other.get(to),
                walked((from as u64 - 1) % n),
                "kept record {to}"
            );
        }
    }

    #[test]
    fn a_few_records_own_times_are_kept_sparse_through_append_and_compaction() {
        // A walk's directories (1 in 100) were read since they changed: their atime differs.
        let m = |i: u64| {
            let w = walked(i * 10 + 1);
            Meta {
                atime: w.mtime + if i % 100 == 0 { 9 } else { 0 },
                ..w
            }
        };
        let n = 5000u64;
        let mut col = MetaColumn::default();
        let mut part = MetaColumn::default();
        for i in 0..n {
            // Appended a directory's worth at a time, as a walk does.
            part.push(&m(i));
            if i % 37 == 36 || i == n - 1 {
                col.extend_from(&std::mem::take(&mut part));
            }
        }
        assert!(!col.atimes.dense);
        assert_eq!(col.atimes.held(), 50);
        assert_eq!(col.ctimes.held(), 0);
        for i in 0..n {
            assert_eq!(col.get(i as usize), m(i), "record {i}");
        }
        col.shrink_to_fit();
        assert_eq!(
            col.atimes.heap_bytes(),
            50 * 12,
            "12 bytes per own time, none else"
        );
        // Compacted: every third record kept.
        let keep: Vec<usize> = (0..n as usize).filter(|i| i % 3 == 0).collect();
        for (to, &from) in keep.iter().enumerate() {
            col.move_down(from, to);
        }
        col.truncate(keep.len());
        for (to, &from) in keep.iter().enumerate() {
            assert_eq!(col.get(to), m(from as u64), "kept record {to}");
        }
        assert_eq!(
            col.atimes.held(),
            keep.iter().filter(|&&i| i % 100 == 0).count()
        );
        // Many own times make the column dense, and it reads the same.
        let mut dense = col.clone();
        for i in 0..1000 {
            dense.push(&m(i * 100));
        }
        assert!(dense.atimes.dense && dense.atimes.held() == dense.len());
        for (to, &from) in keep.iter().enumerate() {
            assert_eq!(dense.get(to), m(from as u64));
        }
        assert_eq!(dense.get(keep.len() + 999), m(99_900));
        // A directory of 100 subdirectories, all read since they changed: dense on its own,
        // appended to a long sparse column as its own times only.
        let sub = |i: u64| Meta {
            atime: 1_800_000_000,
            ..m(i)
        };
        let mut dirs = MetaColumn::default();
        for i in 0..100 {
            dirs.push(&sub(i));
        }
        assert!(dirs.atimes.dense);
        let before = col.atimes.held();
        col.extend_from(&dirs);
        assert!(!col.atimes.dense, "still sparse");
        assert_eq!(col.atimes.held(), before + 100);
        for i in 0..100 {
            assert_eq!(col.get(keep.len() + i as usize), sub(i));
        }
        // A list whose first directory holds 100 such subdirectories: dense at first, sparse
        // again once their files (which have none) are appended.
        let mut list = MetaColumn::default();
        list.extend_from(&dirs);
        assert!(list.atimes.dense);
        for _ in 0..10 {
            let mut files = MetaColumn::default();
            for i in 1..100 {
                files.push(&m(i));
            }
            list.extend_from(&files);
        }
        assert!(!list.atimes.dense, "sparse again");
        assert_eq!(list.atimes.held(), 100);
        assert_eq!(list.get(99), sub(99));
        assert_eq!(list.get(100), m(1));
    }
}
