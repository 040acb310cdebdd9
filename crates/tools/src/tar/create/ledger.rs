//! What earlier runs of the same `tar -c` wrote into the partial archive, and the marks this
//! run makes as it writes (issue 33's checkpoint).
//!
//! The layout is planned from the list, and the same list and options give the same layout at
//! any rank count, so the units are global:
//! - plain archive: ranges of the tar stream (`[at, end)`, bytes) that a write put in place: a
//!   run of entries, a window of one, a chunk of a big file. Key: `at`; payload: `end` (u64 LE).
//!   A rerun skips every member or chunk that lies inside the union of the ranges recorded, at
//!   whatever rank count they were written, so one mark covers up to a run of 1024 entries;
//! - compressed archive: frames (key [`FRAME`] | k; payload: the frame's compressed size,
//!   decompressed size and checksum, 3 x u32 LE), the frame's bytes being at their final offset.
//!
//! Key [`PLAN`] records what the partial archive's identity and the index member's time were.

use crate::engine::codec::zstd::FrameSizes;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The key of the run's own record ([`Recorded`]); no stream offset is this large.
pub(super) const PLAN: u64 = u64::MAX;
/// The tag of frame keys (compressed archives only, never mixed with ranges: the codec is an
/// input of the checkpoint).
pub(super) const FRAME: u64 = 1 << 62;

/// Where marks go: the checkpoint (or nothing, without one).
pub(super) trait Sink: Sync {
    /// Unit `key` is written (its bytes are in the partial archive, synced by the checkpoint's
    /// syncer: see `engine::checkpoint`).
    fn mark(&self, key: u64, payload: &[u8]);
}

/// The record under [`PLAN`]: which file the marks are about and the index member's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Recorded {
    /// The partial archive's device and inode numbers, and its birth time (seconds,
    /// nanoseconds; 0 where the file system keeps none): an inode number is reused as soon as
    /// it is freed, a birth time is not.
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) born: (i64, u32),
    /// The index member's mtime (seconds since the epoch): chosen by the first run, kept by
    /// every rerun so that the archive is the same bytes as an uninterrupted run's.
    pub(super) index_mtime: i64,
}

impl Recorded {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(36);
        v.extend_from_slice(&self.dev.to_le_bytes());
        v.extend_from_slice(&self.ino.to_le_bytes());
        v.extend_from_slice(&self.index_mtime.to_le_bytes());
        v.extend_from_slice(&self.born.0.to_le_bytes());
        v.extend_from_slice(&self.born.1.to_le_bytes());
        v
    }

    /// `None` for anything that is not exactly a record (a forged or foreign payload).
    pub(super) fn decode(b: &[u8]) -> Option<Recorded> {
        if b.len() != 36 {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8"));
        Some(Recorded {
            dev: word(0),
            ino: word(1),
            index_mtime: word(2) as i64,
            born: (
                word(3) as i64,
                u32::from_le_bytes(b[32..36].try_into().expect("4")),
            ),
        })
    }
}

/// The work of earlier runs and the marks of this one.
pub(super) struct Ledger<'a> {
    /// The stream ranges earlier runs wrote, merged: sorted, disjoint, not touching.
    covered: Vec<(u64, u64)>,
    /// The frames earlier runs wrote (compressed archives), by number.
    frames: BTreeMap<u64, FrameSizes>,
    sink: Option<&'a dyn Sink>,
    /// Bytes of the tar stream this process wrote and marked in this run.
    written: AtomicU64,
}

impl<'a> Ledger<'a> {
    /// From the marks of earlier runs (`(key, payload)`, any order); malformed payloads are
    /// ignored (their unit is done again).
    pub(super) fn new<'p>(
        prior: impl Iterator<Item = (u64, &'p [u8])>,
        sink: Option<&'a dyn Sink>,
    ) -> Ledger<'a> {
        let mut ranges = Vec::new();
        let mut frames = BTreeMap::new();
        for (key, payload) in prior {
            if key == PLAN {
                continue;
            }
            if key & FRAME != 0 {
                if let Some(f) = decode_frame(payload) {
                    frames.insert(key & !FRAME, f);
                }
            } else if let Ok(end) = <[u8; 8]>::try_from(payload) {
                let end = u64::from_le_bytes(end);
                if end > key {
                    ranges.push((key, end));
                }
            }
        }
        Ledger {
            covered: merge(ranges),
            frames,
            sink,
            written: AtomicU64::new(0),
        }
    }

    /// Whether earlier runs wrote all of `[at, end)`.
    pub(super) fn covered(&self, at: u64, end: u64) -> bool {
        if at >= end {
            return false;
        }
        let i = self.covered.partition_point(|r| r.1 < end);
        self.covered.get(i).is_some_and(|r| r.0 <= at && end <= r.1)
    }

    /// Bytes of the stream earlier runs wrote (the same on every rank).
    pub(super) fn covered_bytes(&self) -> u64 {
        self.covered.iter().map(|r| r.1 - r.0).sum()
    }

    /// The sizes of frame `k`, if an earlier run wrote it.
    pub(super) fn frame(&self, k: u64) -> Option<FrameSizes> {
        self.frames.get(&k).copied()
    }

    /// The stream bytes of the frames earlier runs wrote.
    pub(super) fn frame_bytes(&self) -> u64 {
        self.frames
            .values()
            .map(|f| u64::from(f.decompressed))
            .sum()
    }

    /// `[at, end)` of the stream is written: mark it.
    pub(super) fn wrote(&self, at: u64, end: u64) {
        if end <= at {
            return;
        }
        if let Some(s) = self.sink {
            s.mark(at, &end.to_le_bytes());
        }
        self.written.fetch_add(end - at, Ordering::Relaxed);
    }

    /// Frame `k` is at its final place: mark it.
    pub(super) fn wrote_frame(&self, k: u64, f: FrameSizes) {
        if let Some(s) = self.sink {
            s.mark(FRAME | k, &encode_frame(f));
        }
        self.written
            .fetch_add(u64::from(f.decompressed), Ordering::Relaxed);
    }

    /// Bytes of the stream this process marked in this run.
    pub(super) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

fn merge(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn encode_frame(f: FrameSizes) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&f.compressed.to_le_bytes());
    b[4..8].copy_from_slice(&f.decompressed.to_le_bytes());
    b[8..].copy_from_slice(&f.checksum.to_le_bytes());
    b
}

fn decode_frame(b: &[u8]) -> Option<FrameSizes> {
    let b: [u8; 12] = b.try_into().ok()?;
    let word = |i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().expect("4"));
    Some(FrameSizes {
        compressed: word(0),
        decompressed: word(1),
        checksum: word(2),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Kept(Mutex<Vec<(u64, Vec<u8>)>>);
    impl Sink for Kept {
        fn mark(&self, key: u64, payload: &[u8]) {
            self.0.lock().unwrap().push((key, payload.to_vec()));
        }
    }

    #[test]
    fn ranges_written_at_one_rank_count_cover_members_cut_at_another() {
        let kept = Kept::default();
        let first = Ledger::new(std::iter::empty(), Some(&kept));
        // Two windows of one run, touching, and a chunk apart.
        first.wrote(0, 1536);
        first.wrote(1536, 4096);
        first.wrote(8192, 12288);
        assert_eq!(first.written(), 4096 + 4096);
        let marks = kept.0.into_inner().unwrap();
        let again = Ledger::new(marks.iter().map(|(k, p)| (*k, &p[..])), None);
        assert!(again.covered(1024, 2048), "a member across two windows");
        assert!(again.covered(0, 4096));
        assert!(!again.covered(4096, 4608), "never written");
        assert!(!again.covered(3584, 8704), "across a gap");
        assert!(again.covered(8192, 12288));
        assert_eq!(again.covered_bytes(), 8192);
    }

    #[test]
    fn malformed_payloads_are_work_to_do_again() {
        let marks: Vec<(u64, Vec<u8>)> = vec![
            (0, vec![1, 2, 3]),
            (512, 100u64.to_le_bytes().to_vec()), // ends before it starts
            (FRAME | 3, vec![0; 11]),
            (
                FRAME | 4,
                encode_frame(FrameSizes {
                    compressed: 7,
                    decompressed: 9,
                    checksum: 1,
                })
                .to_vec(),
            ),
            (PLAN, vec![9; 3]),
        ];
        let l = Ledger::new(marks.iter().map(|(k, p)| (*k, &p[..])), None);
        assert!(!l.covered(0, 1) && !l.covered(512, 513));
        assert_eq!(l.frame(3), None);
        assert_eq!(l.frame(4).map(|f| f.compressed), Some(7));
        assert_eq!(Recorded::decode(&[9; 3]), None);
        let r = Recorded {
            dev: 1,
            ino: 2,
            born: (4, 5),
            index_mtime: -3,
        };
        assert_eq!(Recorded::decode(&r.encode()), Some(r));
    }
}
