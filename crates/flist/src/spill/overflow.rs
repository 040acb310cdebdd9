//! A list made in order and read back in order, held in memory up to a budget: beyond it the
//! records held are written out to a spill file (one run, in the order they came), and the list
//! is read back a piece at a time. For what a tool makes one record at a time and uses once, in
//! order, later: sync's plan of what to create beyond the memory limit, and its actions.

use super::dir::{SpillDir, SpillFile};
use super::run::{RunCursor, RunWriter};
use super::sort::held_bytes;
use crate::error::{Error, Result};
use crate::record::{Detail, FileList, FileType, Meta};

/// Records appended in order, held up to a budget (bytes of records), the rest in a spill file.
/// A failure to write the spill (a full TMPDIR) is kept and returned by
/// [`OverflowList::finish`] (or by the first [`Pieces::next_piece`]); records pushed after it
/// are dropped.
#[derive(Debug)]
pub struct OverflowList {
    held: FileList,
    /// Bytes of held records beyond which they are written out (`None`: never).
    budget: Option<u64>,
    dir: Option<SpillDir>,
    file: Option<SpillFile>,
    run: Option<RunWriter>,
    /// Records written out.
    spilled: u64,
    error: Option<Error>,
}

/// Bytes buffered between the held records and the spill file.
const WRITE_BUFFER: usize = 1 << 20;

impl OverflowList {
    /// A list of `detail` held whole in memory.
    pub fn in_memory(detail: Detail) -> OverflowList {
        OverflowList {
            held: FileList::new(detail),
            budget: None,
            dir: None,
            file: None,
            run: None,
            spilled: 0,
            error: None,
        }
    }

    /// A list of `detail` that holds at most about `budget` bytes of records and writes the
    /// rest to a spill file of `dir` (made when first needed).
    pub fn spilling(detail: Detail, budget: u64, dir: &SpillDir) -> OverflowList {
        OverflowList {
            budget: Some(budget),
            dir: Some(dir.clone()),
            ..OverflowList::in_memory(detail)
        }
    }

    /// Append a record.
    pub fn push(&mut self, path: &[u8], kind: FileType, meta: Option<Meta>) {
        if self.error.is_some() {
            return;
        }
        self.held.push(path, kind, meta);
        if self.budget.is_some_and(|b| held_bytes(&self.held) >= b) {
            if let Err(e) = self.write_out() {
                self.error = Some(e);
                self.held = self.held.empty_like();
            }
        }
    }

    /// Write the held records to the spill file, after those written before.
    fn write_out(&mut self) -> Result<()> {
        if self.file.is_none() {
            let dir = self.dir.as_ref().expect("a spilling list has a directory");
            self.file = Some(dir.create()?);
        }
        let file = self.file.as_ref().expect("made above");
        let run = self.run.get_or_insert_with(|| RunWriter::new(WRITE_BUFFER));
        for i in 0..self.held.len() {
            self.held.encode_record(i, run.buf());
            run.added(file, 1)?;
        }
        run.flush(file)?;
        self.spilled += self.held.len() as u64;
        self.held = self.held.empty_like();
        Ok(())
    }

    /// Records in the list.
    pub fn len(&self) -> u64 {
        self.spilled + self.held.len() as u64
    }

    /// No record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records written out to the spill file.
    pub fn spilled(&self) -> u64 {
        self.spilled
    }

    /// Bytes of the spill file.
    pub fn spill_bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, SpillFile::len)
    }

    /// The first failure to write the spill (records were lost from the list then).
    pub fn finish(&mut self) -> Result<()> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Read the list back in order, the spilled records in blocks of about `block` bytes,
    /// then the held ones: [`Pieces::next_piece`] gives each piece as a list of its own.
    pub fn into_pieces(self, block: usize) -> Pieces {
        let detail = self.held.detail();
        let spilled = match (self.file, self.run) {
            (Some(file), Some(run)) => Some((run.finish(&file), file)),
            _ => None,
        };
        let (cursor, file, error) = match spilled {
            Some((Ok(run), file)) => (Some(RunCursor::new(run, detail, block)), Some(file), None),
            Some((Err(e), _)) => (None, None, Some(e)),
            None => (None, None, None),
        };
        Pieces {
            cursor,
            file,
            held: Some(self.held),
            error: error.or(self.error),
        }
    }

    /// Call `f` with every record in order (a list and an index into it), holding one block
    /// of the spill at a time. Call [`OverflowList::finish`] first: after a failure to
    /// write the spill, the records lost are not here.
    pub fn for_each(&self, block: usize, mut f: impl FnMut(&FileList, usize)) -> Result<()> {
        if let (Some(file), Some(run)) = (&self.file, &self.run) {
            // Everything was flushed when it was written out: the writer's run is whole.
            let mut cursor = RunCursor::new(run.written(), self.held.detail(), block);
            cursor.load(file)?;
            while let Some((list, i)) = cursor.current() {
                f(list, i);
                cursor.advance(file)?;
            }
        }
        for i in 0..self.held.len() {
            f(&self.held, i);
        }
        Ok(())
    }
}

/// An [`OverflowList`] read back a piece at a time ([`OverflowList::into_pieces`]).
pub struct Pieces {
    cursor: Option<RunCursor>,
    file: Option<SpillFile>,
    held: Option<FileList>,
    error: Option<Error>,
}

impl Pieces {
    /// The next piece of records, in the list's order (`Ok(None)`: all were given). A
    /// failure to read the spill file, or to have written it, ends the list.
    pub fn next_piece(&mut self) -> Result<Option<FileList>> {
        if let Some(e) = self.error.take() {
            self.cursor = None;
            self.held = None;
            return Err(e);
        }
        if let (Some(cursor), Some(file)) = (&mut self.cursor, &self.file) {
            match cursor.next_block(file) {
                Ok(Some(list)) => return Ok(Some(list)),
                Ok(None) => self.cursor = None,
                Err(e) => {
                    self.cursor = None;
                    self.held = None;
                    return Err(e);
                }
            }
        }
        Ok(self.held.take().filter(|l| !l.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn record(i: u64) -> (Vec<u8>, FileType, Option<Meta>) {
        let path = format!("/t/{}{i}", "p".repeat(i as usize % 29)).into_bytes();
        let meta = Meta {
            mode: 0o100600,
            size: i,
            ..Meta::default()
        };
        (path, FileType::File, Some(meta))
    }

    fn paths_of(list: &FileList) -> Vec<Vec<u8>> {
        list.iter().map(|e| e.path.to_vec()).collect()
    }

    /// Beyond a tiny budget most records go to the spill file, and both readings give every
    /// record, with its metadata, in the order pushed.
    #[test]
    fn records_come_back_in_order_whether_held_or_spilled() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SpillDir::new(Some(tmp.path().as_os_str().as_bytes()));
        let mut list = OverflowList::spilling(Detail::Stat, 2 << 10, &dir);
        let mut expected = FileList::new(Detail::Stat);
        for i in 0..1000 {
            let (p, k, m) = record(i);
            list.push(&p, k, m);
            expected.push(&p, k, m);
        }
        list.finish().unwrap();
        assert_eq!(list.len(), 1000);
        assert!(list.spilled() > 900, "spilled {}", list.spilled());
        assert!(list.spill_bytes() > 0);
        let mut seen = FileList::new(Detail::Stat);
        list.for_each(512, |l, i| seen.push_from(l, i)).unwrap();
        assert_eq!(paths_of(&seen), paths_of(&expected));
        let mut pieces = list.into_pieces(512);
        let mut again = FileList::new(Detail::Stat);
        let mut count = 0;
        while let Some(piece) = pieces.next_piece().unwrap() {
            count += 1;
            again.append(piece);
        }
        assert!(count > 10, "{count} pieces");
        assert_eq!(paths_of(&again), paths_of(&expected));
        let sizes: Vec<u64> = again.iter().map(|e| e.meta.unwrap().size).collect();
        assert_eq!(sizes, (0..1000).collect::<Vec<_>>());
        assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
    }

    /// Held in memory, nothing is written and the list comes back as one piece.
    #[test]
    fn a_list_in_memory_is_one_piece_and_writes_nothing() {
        let mut list = OverflowList::in_memory(Detail::Stat);
        for i in 0..50 {
            let (p, k, m) = record(i);
            list.push(&p, k, m);
        }
        assert_eq!((list.len(), list.spilled(), list.spill_bytes()), (50, 0, 0));
        let mut pieces = list.into_pieces(64);
        assert_eq!(pieces.next_piece().unwrap().unwrap().len(), 50);
        assert!(pieces.next_piece().unwrap().is_none());
    }

    /// A spill directory where no file can be made: the failure is kept and returned, never
    /// a list silently short of records.
    #[test]
    fn a_spill_that_cannot_be_written_is_an_error_not_a_shorter_list() {
        let dir = SpillDir::new(Some(b"/nonexistent/mfu-rs-spill"));
        let mut list = OverflowList::spilling(Detail::Stat, 256, &dir);
        for i in 0..100 {
            let (p, k, m) = record(i);
            list.push(&p, k, m);
        }
        let message = list.finish().unwrap_err().to_string();
        assert!(message.contains("/nonexistent/mfu-rs-spill"), "{message}");
        // Read without `finish`, the pieces end in the failure too.
        let mut again = OverflowList::spilling(Detail::Stat, 256, &dir);
        for i in 0..100 {
            let (p, k, m) = record(i);
            again.push(&p, k, m);
        }
        assert!(again.into_pieces(64).next_piece().is_err());
    }
}
