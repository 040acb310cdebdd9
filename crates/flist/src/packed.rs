//! The metadata column of a stat list, packed: 56 bytes a record where a [`Meta`] takes 80.
//!
//! A list of 10^6 records of 60-byte paths holds 120 MB instead of 144 (walk, and each of
//! the two lists sync and cmp hold). The packing is lossless: every [`Meta`] comes back as it
//! went in. A record keeps
//!
//! - mode, uid, gid, size and inode as they are;
//! - each time as one `u64`: 34 bits of signed seconds above 30 bits of nanoseconds, which
//!   holds every time from 1697 to 2242 (±2^33 s around the epoch) to the nanosecond;
//! - the link count (24 bits) and the device as an 8-bit index into the column's table of
//!   the distinct devices it holds (a walk meets few) in one `u32`.
//!
//! A record whose values do not fit (a time outside those years, 2^24 links or more, a 256th
//! device, a nanosecond field of 2^30 or more, as a damaged list may carry) is kept whole in a
//! side table instead, with its mode (types are read from it) and its index in that table in
//! its packed record. Walks of real trees put nothing there.

use crate::record::{FileType, Meta};

/// Bits of nanoseconds in a packed time.
const NSEC_BITS: u32 = 30;
/// Bits of the link count in [`Packed::links_dev`]; the device index is above them.
const LINK_BITS: u32 = 24;
/// The device index that marks a record kept in the side table.
const SPILLED: u32 = 0xff;
/// Devices a column indexes (`0..SPILLED`).
const MAX_DEVS: usize = SPILLED as usize;

/// One record's metadata, packed (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Packed {
    mode: u32,
    uid: u32,
    gid: u32,
    /// The link count in the low [`LINK_BITS`] bits, the device's index in the column's
    /// table above them ([`SPILLED`]: the record is in the side table).
    links_dev: u32,
    size: u64,
    /// The inode number; for a spilled record, its index in the side table.
    ino: u64,
    /// atime, mtime, ctime: seconds above [`NSEC_BITS`] bits of nanoseconds.
    times: [u64; 3],
}

/// Bytes of one record's packed metadata.
pub const PACKED_BYTES: usize = std::mem::size_of::<Packed>();

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
    fn spilled(&self) -> bool {
        self.links_dev >> LINK_BITS == SPILLED
    }

    fn dev_index(&self) -> usize {
        (self.links_dev >> LINK_BITS) as usize
    }
}

/// The [`Meta`] of every record of a stat list, packed; a column of [`crate::FileList`].
#[derive(Clone, Debug, Default)]
pub(crate) struct MetaColumn {
    packed: Vec<Packed>,
    /// The distinct device numbers of the records, by index (at most [`MAX_DEVS`]).
    devs: Vec<u64>,
    /// Records that do not pack, whole, in record order.
    spilled: Vec<Meta>,
}

impl MetaColumn {
    /// Records in the column.
    pub(crate) fn len(&self) -> usize {
        self.packed.len()
    }

    /// The index of device `dev` in the table, added if new; `None` when the table is full.
    fn dev_index(&mut self, dev: u64) -> Option<u32> {
        // Most lists hold one or two devices: a scan beats a map.
        if let Some(k) = self.devs.iter().position(|&d| d == dev) {
            return Some(k as u32);
        }
        if self.devs.len() == MAX_DEVS {
            return None;
        }
        self.devs.push(dev);
        Some(self.devs.len() as u32 - 1)
    }

    /// `m` packed, or `None` when it does not fit.
    fn pack(&mut self, m: &Meta) -> Option<Packed> {
        let times = [
            pack_time(m.atime, m.atime_nsec)?,
            pack_time(m.mtime, m.mtime_nsec)?,
            pack_time(m.ctime, m.ctime_nsec)?,
        ];
        if m.nlink >= 1 << LINK_BITS {
            return None;
        }
        let dev = self.dev_index(m.dev)?;
        Some(Packed {
            mode: m.mode,
            uid: m.uid,
            gid: m.gid,
            links_dev: (dev << LINK_BITS) | m.nlink as u32,
            size: m.size,
            ino: m.ino,
            times,
        })
    }

    /// Add a record.
    pub(crate) fn push(&mut self, m: &Meta) {
        let p = match self.pack(m) {
            Some(p) => p,
            None => {
                self.spilled.push(*m);
                Packed {
                    mode: m.mode,
                    uid: 0,
                    gid: 0,
                    links_dev: SPILLED << LINK_BITS,
                    size: 0,
                    ino: self.spilled.len() as u64 - 1,
                    times: [0; 3],
                }
            }
        };
        self.packed.push(p);
    }

    /// The metadata of record `i`.
    pub(crate) fn get(&self, i: usize) -> Meta {
        self.unpack(&self.packed[i])
    }

    fn unpack(&self, p: &Packed) -> Meta {
        if p.spilled() {
            return self.spilled[p.ino as usize];
        }
        let [(atime, atime_nsec), (mtime, mtime_nsec), (ctime, ctime_nsec)] =
            p.times.map(unpack_time);
        Meta {
            mode: p.mode,
            uid: p.uid,
            gid: p.gid,
            atime_nsec,
            mtime_nsec,
            ctime_nsec,
            atime,
            mtime,
            ctime,
            size: p.size,
            nlink: u64::from(p.links_dev & ((1 << LINK_BITS) - 1)),
            ino: p.ino,
            dev: self.devs[p.dev_index()],
        }
    }

    /// The type of record `i`, from its mode.
    pub(crate) fn file_type(&self, i: usize) -> FileType {
        FileType::from_mode(self.packed[i].mode)
    }

    /// The types of all records, in order.
    pub(crate) fn file_types(&self) -> impl Iterator<Item = FileType> + '_ {
        self.packed.iter().map(|p| FileType::from_mode(p.mode))
    }

    /// Add every record of `other`, in order. Records are copied as they are when both columns
    /// index their devices alike (walks append one directory's records at a time, all of one
    /// device), re-indexed otherwise.
    pub(crate) fn extend_from(&mut self, other: &MetaColumn) {
        let map: Vec<Option<u32>> = other.devs.iter().map(|&d| self.dev_index(d)).collect();
        let same = map.iter().enumerate().all(|(k, &to)| to == Some(k as u32));
        if same && other.spilled.is_empty() {
            self.packed.extend_from_slice(&other.packed);
            return;
        }
        self.packed.reserve(other.len());
        for p in &other.packed {
            match map.get(p.dev_index()).copied().flatten() {
                Some(to) if !p.spilled() => {
                    let links = p.links_dev & ((1 << LINK_BITS) - 1);
                    self.packed.push(Packed {
                        links_dev: (to << LINK_BITS) | links,
                        ..*p
                    });
                }
                _ => self.push(&other.unpack(p)),
            }
        }
    }

    /// Record `to` becomes a copy of record `from` (`to <= from`), as [`crate::FileList::
    /// retain`] compacts the list; [`MetaColumn::truncate`] ends the compaction.
    pub(crate) fn move_down(&mut self, from: usize, to: usize) {
        self.packed[to] = self.packed[from];
    }

    /// Keep the first `n` records; the side table keeps only what they use.
    pub(crate) fn truncate(&mut self, n: usize) {
        self.packed.truncate(n);
        if self.spilled.is_empty() {
            return;
        }
        let old = std::mem::take(&mut self.spilled);
        for p in self.packed.iter_mut().filter(|p| p.spilled()) {
            self.spilled.push(old[p.ino as usize]);
            p.ino = self.spilled.len() as u64 - 1;
        }
    }

    /// Make room for `n` more records without regrowing.
    pub(crate) fn reserve_exact(&mut self, n: usize) {
        self.packed.reserve_exact(n);
    }

    /// Make room for `n` more records.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.packed.reserve(n);
    }

    /// Give back spare capacity.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.packed.shrink_to_fit();
        self.devs.shrink_to_fit();
        self.spilled.shrink_to_fit();
    }

    /// Heap bytes held (capacity, not length).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.packed.capacity() * PACKED_BYTES
            + self.devs.capacity() * 8
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
    fn a_packed_record_is_56_bytes() {
        assert_eq!(PACKED_BYTES, 56);
        assert_eq!(
            std::mem::align_of::<Packed>(),
            8,
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
        assert_eq!(col.devs.len(), MAX_DEVS);
        // Appended to a column that indexes devices differently, then compacted.
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
        assert_eq!(col.devs, [64770]);
        let mut twice = col.clone();
        twice.extend_from(&col);
        assert_eq!(twice.len(), 8);
        assert_eq!(twice.get(7), col.get(3));
        assert!(twice.heap_bytes() >= 8 * 56);
    }
}
