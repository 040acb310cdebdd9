//! Records in the order of a byte key of their own, out of core: for grouping a list by
//! something no sort key names (dup groups by size and inode, then by content hash).
//!
//! A keyed record is a list record whose path is `key ++ path`, the key of one fixed length
//! for all records of a [`KeyedRuns`]; so the runs, their encoding and their merge are
//! [`super::run`]'s and `merge`'s, ordered by those bytes: by the key (big-endian integers
//! sort as numbers), then by the path. Records are buffered up to a budget, sorted and
//! written as runs to one spill file; [`KeyedRuns::finish`] spills the rest, and
//! [`KeyedSorted::merge`] reads them all back in order.
//!
//! ```
//! use flist::spill::keyed::KeyedRuns;
//! use flist::spill::SpillDir;
//! use flist::{FileType, Meta};
//! let tmp = tempfile::tempdir().unwrap();
//! let dir = SpillDir::new(Some(tmp.path().as_os_str().as_encoded_bytes()));
//! // Keys of 8 bytes (a size, big-endian); 2 KiB of records in memory at a time.
//! let mut runs = KeyedRuns::new(&dir, 8, 2 << 10);
//! for i in 0..300u64 {
//!     let meta = Meta { mode: 0o100644, size: i % 7, ..Meta::default() };
//!     let path = format!("/d/f{i}");
//!     runs.push(&meta.size.to_be_bytes(), path.as_bytes(), FileType::File, &meta).unwrap();
//! }
//! let sorted = runs.finish().unwrap();
//! assert!(sorted.runs() > 1);
//! let mut merge = sorted.merge(8 << 10).unwrap();
//! let mut sizes = Vec::new();
//! while let Some(r) = merge.peek() {
//!     sizes.push(r.meta.size);
//!     merge.advance().unwrap();
//! }
//! assert_eq!(sizes.len(), 300);
//! assert!(sizes.windows(2).all(|w| w[0] <= w[1]));
//! ```

use super::dir::{SpillDir, SpillFile};
use super::merge::Merge;
use super::run::{Run, RunCursor, RunWriter};
use crate::error::Result;
use crate::record::{Detail, FileList, FileType, Meta};

/// Records being sorted by key: a buffer of at most a budget of bytes, and the runs written.
pub struct KeyedRuns<'a> {
    dir: &'a SpillDir,
    key_len: usize,
    /// Bytes the buffer (and the sort of it) may take.
    budget: u64,
    buf: FileList,
    file: Option<SpillFile>,
    runs: Vec<Run>,
}

impl<'a> KeyedRuns<'a> {
    /// No records yet; keys of `key_len` bytes; at most about `budget` bytes of records held
    /// before a run spills to a file in `dir`.
    pub fn new(dir: &'a SpillDir, key_len: usize, budget: u64) -> KeyedRuns<'a> {
        KeyedRuns {
            dir,
            key_len,
            budget,
            buf: FileList::new(Detail::Stat),
            file: None,
            runs: Vec::new(),
        }
    }

    /// Append the rank-to-rank encoding ([`FileList::encode_record`]) of the keyed record
    /// `key`, `path`, `kind`, `meta` to `out`: what [`KeyedRuns::push_encoded`] takes.
    pub fn encode(key: &[u8], path: &[u8], kind: FileType, meta: &Meta, out: &mut Vec<u8>) {
        out.extend_from_slice(&((key.len() + path.len()) as u32).to_le_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(path);
        out.push(kind as u8);
        meta.encode(out);
    }

    /// Add one record under `key` (of the length given to [`KeyedRuns::new`]); a run spills
    /// when the buffer reaches the budget.
    pub fn push(&mut self, key: &[u8], path: &[u8], kind: FileType, meta: &Meta) -> Result<()> {
        assert_eq!(key.len(), self.key_len, "keys of one length");
        let mut keyed = Vec::with_capacity(key.len() + path.len());
        keyed.extend_from_slice(key);
        keyed.extend_from_slice(path);
        self.buf.push(&keyed, kind, Some(*meta));
        self.spill_if_full()
    }

    /// Add the whole records `bytes` holds, each made by [`KeyedRuns::encode`] with a key of
    /// this length (as sent by another rank).
    pub fn push_encoded(&mut self, bytes: &[u8]) -> Result<()> {
        let (records, paths) = self.buf.count_encoded(bytes);
        self.buf.reserve(records, paths);
        self.buf.decode_records(bytes);
        self.spill_if_full()
    }

    fn spill_if_full(&mut self) -> Result<()> {
        let sorting = self.buf.len() * std::mem::size_of::<usize>();
        if (self.buf.heap_bytes() + sorting) as u64 >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Sort the buffer and write it as a run; the buffer is emptied.
    fn spill(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.file.is_none() {
            self.file = Some(self.dir.create()?);
        }
        let buf = std::mem::replace(&mut self.buf, FileList::new(Detail::Stat));
        let file = self.file.as_ref().expect("created above");
        let mut order: Vec<usize> = (0..buf.len()).collect();
        // Stable: equal keyed paths keep the order they came in.
        order.sort_by(|&a, &b| buf.path(a).cmp(buf.path(b)));
        let mut w = RunWriter::new((self.budget as usize / 4).clamp(4 << 10, 1 << 20));
        for i in order {
            buf.encode_record(i, w.buf());
            w.added(file, 1)?;
        }
        self.runs.push(w.finish(file)?);
        Ok(())
    }

    /// Runs written so far.
    pub fn runs(&self) -> u64 {
        self.runs.len() as u64
    }

    /// Bytes written to the spill file so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, SpillFile::len)
    }

    /// Spill what is buffered: every record is in a run, ready to be merged.
    pub fn finish(mut self) -> Result<KeyedSorted> {
        self.spill()?;
        Ok(KeyedSorted {
            file: self.file,
            runs: self.runs,
            key_len: self.key_len,
        })
    }
}

/// Keyed records all in sorted runs of one spill file (dropped with it).
pub struct KeyedSorted {
    file: Option<SpillFile>,
    runs: Vec<Run>,
    key_len: usize,
}

impl KeyedSorted {
    /// Runs written.
    pub fn runs(&self) -> u64 {
        self.runs.len() as u64
    }

    /// Bytes written to the spill file: its disk use.
    pub fn spilled_bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, SpillFile::len)
    }

    /// Read every record back in key order, with about `memory` bytes of read blocks over
    /// all runs (at least 4 KiB a run).
    pub fn merge(&self, memory: u64) -> Result<KeyedMerge<'_>> {
        let merge = match &self.file {
            None => None,
            Some(file) => {
                let block = (memory / self.runs.len().max(1) as u64).clamp(4 << 10, 4 << 20);
                let cursors = self
                    .runs
                    .iter()
                    .map(|r| RunCursor::new(r.clone(), Detail::Stat, block as usize))
                    .collect();
                Some(Merge::by_path_bytes(file, cursors)?)
            }
        };
        Ok(KeyedMerge {
            merge,
            key_len: self.key_len,
        })
    }
}

/// One record read back: its key, path, type and metadata.
#[derive(Clone, Copy, Debug)]
pub struct Keyed<'a> {
    /// The key it was pushed with.
    pub key: &'a [u8],
    /// Its path.
    pub path: &'a [u8],
    /// Its type.
    pub kind: FileType,
    /// Its metadata.
    pub meta: Meta,
}

/// The records of a [`KeyedSorted`] in order of (key, path).
pub struct KeyedMerge<'a> {
    merge: Option<Merge<'a>>,
    key_len: usize,
}

impl KeyedMerge<'_> {
    /// The next record (`None`: all were read).
    pub fn peek(&self) -> Option<Keyed<'_>> {
        let (list, i) = self.merge.as_ref()?.peek()?;
        let (key, path) = list.path(i).split_at(self.key_len);
        Some(Keyed {
            key,
            path,
            kind: list.kind(i),
            meta: list.meta(i).expect("a stat list"),
        })
    }

    /// Take the record [`KeyedMerge::peek`] shows.
    pub fn advance(&mut self) -> Result<()> {
        match &mut self.merge {
            Some(m) => m.advance(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn keyed_records_come_back_in_key_then_path_order_through_many_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SpillDir::new(Some(tmp.path().as_os_str().as_bytes()));
        let mut runs = KeyedRuns::new(&dir, 16, 4 << 10);
        let mut want = Vec::new();
        let mut sent = Vec::new();
        for i in 0..2000u64 {
            let k = i * 7919 % 2000;
            let key = [(k % 13).to_be_bytes(), (k % 5).to_be_bytes()].concat();
            let mut path = format!("/t/{}", k % 101).into_bytes();
            if k.is_multiple_of(17) {
                path.push(0xff);
            }
            let meta = Meta {
                mode: 0o100644,
                size: k,
                ino: k + 1,
                dev: 3,
                ..Meta::default()
            };
            want.push((key.clone(), path.clone(), k));
            if i % 2 == 0 {
                runs.push(&key, &path, FileType::File, &meta).unwrap();
            } else {
                // As another rank sends it.
                KeyedRuns::encode(&key, &path, FileType::File, &meta, &mut sent);
                if sent.len() > 900 {
                    runs.push_encoded(&std::mem::take(&mut sent)).unwrap();
                }
            }
        }
        runs.push_encoded(&sent).unwrap();
        assert!(runs.runs() > 5, "{} runs", runs.runs());
        let sorted = runs.finish().unwrap();
        assert!(sorted.spilled_bytes() > 2000 * 80);
        want.sort();
        let mut got = Vec::new();
        let mut merge = sorted.merge(16 << 10).unwrap();
        while let Some(r) = merge.peek() {
            assert_eq!(
                (r.kind, r.meta.ino, r.meta.dev),
                (FileType::File, r.meta.size + 1, 3)
            );
            got.push((r.key.to_vec(), r.path.to_vec(), r.meta.size));
            merge.advance().unwrap();
        }
        // Equal (key, path) may come in either order: compare what decides the order.
        let order = |v: &[(Vec<u8>, Vec<u8>, u64)]| -> Vec<(Vec<u8>, Vec<u8>)> {
            v.iter().map(|(k, p, _)| (k.clone(), p.clone())).collect()
        };
        assert_eq!(order(&got), order(&want));
        got.sort();
        assert_eq!(got, want);
        drop(merge);
        drop(sorted);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "no name");
        // Nothing pushed: nothing to read, no file.
        let empty = KeyedRuns::new(&dir, 8, 4 << 10).finish().unwrap();
        assert_eq!((empty.runs(), empty.spilled_bytes()), (0, 0));
        assert!(empty.merge(4 << 10).unwrap().peek().is_none());
    }
}
