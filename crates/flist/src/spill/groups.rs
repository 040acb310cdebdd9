//! Records spilled into groups by a small key (a directory's depth), then read back one group
//! at a time, each in the order its records were added: the out-of-core form of sorting a list
//! by a key with few values (a counting sort), for callers that need "every record with key
//! k" before those with key k-1 (rm removes directories deepest first) without holding them.
//!
//! Each group is a [`Run`] in one [`SpillFile`]; the buffers of all groups together stay
//! within a budget (all are written out when they reach it).
//!
//! ```
//! use flist::spill::groups::Groups;
//! use flist::spill::SpillDir;
//! use flist::{Detail, FileList, FileType};
//! let tmp = tempfile::tempdir().unwrap();
//! let dir = SpillDir::new(Some(tmp.path().as_os_str().as_encoded_bytes()));
//! let mut list = FileList::new(Detail::Lite);
//! for p in ["/a", "/a/b", "/c", "/a/b/d"] {
//!     list.push(p.as_bytes(), FileType::Dir, None);
//! }
//! let mut groups = Groups::new(&dir, Detail::Lite, 64);
//! for i in 0..list.len() {
//!     groups.push(flist::path::depth(list.path(i)) as u64, &list, i).unwrap();
//! }
//! let grouped = groups.finish().unwrap();
//! assert_eq!(grouped.max_key(), Some(3));
//! let mut reader = grouped.reader(1, 4096);
//! let mut got = FileList::new(Detail::Lite);
//! while reader.read_into(&mut got, 10).unwrap() > 0 {}
//! assert_eq!(got.iter().map(|e| e.path).collect::<Vec<_>>(), [b"/a", b"/c"]);
//! ```

use super::dir::{SpillDir, SpillFile};
use super::run::{Run, RunCursor, RunWriter};
use crate::error::Result;
use crate::record::{Detail, FileList};
use std::collections::BTreeMap;

/// Records being spilled into groups.
pub struct Groups<'a> {
    dir: &'a SpillDir,
    detail: Detail,
    /// Bytes the buffers of all groups may hold together.
    budget: usize,
    file: Option<SpillFile>,
    writers: BTreeMap<u64, RunWriter>,
    buffered: usize,
}

impl<'a> Groups<'a> {
    /// Groups of records of `detail` spilled to a file in `dir`, buffered in at most about
    /// `budget` bytes (all groups together).
    pub fn new(dir: &'a SpillDir, detail: Detail, budget: usize) -> Groups<'a> {
        Groups {
            dir,
            detail,
            budget: budget.max(1),
            file: None,
            writers: BTreeMap::new(),
            buffered: 0,
        }
    }

    /// Create the spill file now, if not yet made (a caller that would rather fail before
    /// its work than during it): an error names the directory (a full one says so).
    pub fn open(&mut self) -> Result<()> {
        if self.file.is_none() {
            self.file = Some(self.dir.create()?);
        }
        Ok(())
    }

    /// Add record `i` of `list` (of this detail) to the group `key`. The spill file is created
    /// with the first record (or by [`Groups::open`]): an error names the directory (a full
    /// one says so).
    pub fn push(&mut self, key: u64, list: &FileList, i: usize) -> Result<()> {
        debug_assert_eq!(list.detail(), self.detail);
        self.open()?;
        let w = self
            .writers
            .entry(key)
            .or_insert_with(|| RunWriter::new(usize::MAX));
        let before = w.buf().len();
        list.encode_record(i, w.buf());
        self.buffered += w.buf().len() - before;
        if self.buffered >= self.budget {
            let file = self.file.as_ref().expect("created above");
            for w in self.writers.values_mut() {
                w.flush(file)?;
            }
            self.buffered = 0;
        }
        let file = self.file.as_ref().expect("created above");
        self.writers.get_mut(&key).expect("inserted").added(file, 1)
    }

    /// Write out what is buffered: the groups, ready to be read.
    pub fn finish(self) -> Result<Grouped> {
        let mut runs = BTreeMap::new();
        if let Some(file) = &self.file {
            for (key, w) in self.writers {
                runs.insert(key, w.finish(file)?);
            }
        }
        Ok(Grouped {
            file: self.file,
            detail: self.detail,
            runs,
        })
    }
}

/// Spilled groups, read one at a time.
pub struct Grouped {
    file: Option<SpillFile>,
    detail: Detail,
    runs: BTreeMap<u64, Run>,
}

impl Grouped {
    /// The largest key of a group with records.
    pub fn max_key(&self) -> Option<u64> {
        self.runs.keys().next_back().copied()
    }

    /// Records in group `key`.
    pub fn records(&self, key: u64) -> u64 {
        self.runs.get(&key).map_or(0, |r| r.records)
    }

    /// Bytes written to the spill file.
    pub fn spill_bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, SpillFile::len)
    }

    /// A reader of group `key` (empty when it has no records), reading `block` bytes of the
    /// spill file at a time.
    pub fn reader(&self, key: u64, block: usize) -> GroupReader<'_> {
        let run = self.runs.get(&key).cloned().unwrap_or_default();
        GroupReader {
            file: self.file.as_ref(),
            cursor: RunCursor::new(run, self.detail, block),
            loaded: false,
        }
    }
}

/// Reads one group's records in the order they were added.
pub struct GroupReader<'a> {
    file: Option<&'a SpillFile>,
    cursor: RunCursor,
    loaded: bool,
}

impl GroupReader<'_> {
    /// Append up to `max` of the group's next records to `list` (of the groups' detail);
    /// returns how many (0: the group is read).
    pub fn read_into(&mut self, list: &mut FileList, max: usize) -> Result<usize> {
        let Some(file) = self.file else {
            return Ok(0);
        };
        if !self.loaded {
            self.cursor.load(file)?;
            self.loaded = true;
        }
        let mut n = 0;
        while n < max {
            let Some((from, i)) = self.cursor.current() else {
                break;
            };
            list.push_from(from, i);
            n += 1;
            self.cursor.advance(file)?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FileType, Meta};
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn groups_read_back_in_order_across_flushes_at_a_tiny_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SpillDir::new(Some(tmp.path().as_os_str().as_bytes()));
        let mut list = FileList::new(Detail::Stat);
        for i in 0..2000u64 {
            let p = format!("/r{}/{}", "/x".repeat((i % 13) as usize), i);
            let m = Meta {
                mode: 0o040755,
                size: i,
                ..Meta::default()
            };
            list.push(p.as_bytes(), FileType::Dir, Some(m));
        }
        let mut groups = Groups::new(&dir, Detail::Stat, 300);
        for i in 0..list.len() {
            groups.push(i as u64 % 13, &list, i).unwrap();
        }
        let grouped = groups.finish().unwrap();
        assert_eq!(grouped.max_key(), Some(12));
        assert!(grouped.spill_bytes() > 2000 * 80);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "no name");
        for key in 0..13u64 {
            let mut reader = grouped.reader(key, 100);
            let mut got = FileList::new(Detail::Stat);
            // Pieces of 7: the reader resumes where it stopped.
            while reader.read_into(&mut got, 7).unwrap() > 0 {}
            let want: Vec<usize> = (0..2000).filter(|i| *i as u64 % 13 == key).collect();
            assert_eq!(got.len(), want.len(), "key {key}");
            assert_eq!(grouped.records(key), want.len() as u64);
            for (j, &i) in want.iter().enumerate() {
                assert_eq!(got.entry(j), list.entry(i), "key {key}");
            }
        }
        let mut none = grouped.reader(99, 100);
        assert_eq!(
            none.read_into(&mut FileList::new(Detail::Stat), 5).unwrap(),
            0
        );
    }

    #[test]
    fn no_record_no_spill_file() {
        let dir = SpillDir::new(Some(b"/nonexistent/spill"));
        let grouped = Groups::new(&dir, Detail::Lite, 10).finish().unwrap();
        assert_eq!((grouped.max_key(), grouped.spill_bytes()), (None, 0));
        let mut list = FileList::new(Detail::Lite);
        list.push(b"/a", FileType::Dir, None);
        let mut groups = Groups::new(&dir, Detail::Lite, 10);
        let e = groups.push(1, &list, 0).unwrap_err().to_string();
        assert!(e.contains("TMPDIR /nonexistent/spill"), "{e}");
    }
}
