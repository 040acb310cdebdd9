//! Sorted runs of records in a spill file, in the list's own record encoding
//! ([`FileList::encode_record`]: what ranks send each other), written through a buffer and read
//! back a block at a time.

use super::dir::SpillFile;
use crate::error::Result;
use crate::record::{Detail, FileList, META_BYTES};

/// A run: its records, in order, in pieces of a spill file (each piece whole records).
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// (offset, length) of each piece, in order.
    pieces: Vec<(u64, u64)>,
    /// Records in the run.
    pub records: u64,
}

/// Writes one run through a buffer of at most about `cap` bytes.
#[derive(Debug)]
pub struct RunWriter {
    run: Run,
    buf: Vec<u8>,
    cap: usize,
}

impl RunWriter {
    /// A new run, buffered in up to `cap` bytes.
    pub fn new(cap: usize) -> RunWriter {
        RunWriter {
            run: Run::default(),
            buf: Vec::new(),
            cap: cap.max(1),
        }
    }

    /// The buffer to append encoded records to; then call [`RunWriter::added`].
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// `records` whole records were appended to [`RunWriter::buf`]; write the buffer out to
    /// `file` when full.
    pub fn added(&mut self, file: &SpillFile, records: u64) -> Result<()> {
        self.run.records += records;
        if self.buf.len() >= self.cap {
            self.flush(file)?;
        }
        Ok(())
    }

    /// Bytes buffered, not yet written.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Write the buffer out to `file` now (a caller holding many runs at once bounds their
    /// buffers together).
    pub fn flush(&mut self, file: &SpillFile) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let at = file.append(&self.buf)?;
        let len = self.buf.len() as u64;
        match self.run.pieces.last_mut() {
            Some((o, l)) if *o + *l == at => *l += len,
            _ => self.run.pieces.push((at, len)),
        }
        self.buf.clear();
        Ok(())
    }

    /// The run as written so far (what is still buffered is not in it: flush first).
    pub fn written(&self) -> Run {
        self.run.clone()
    }

    /// Write what is buffered; the run.
    pub fn finish(mut self, file: &SpillFile) -> Result<Run> {
        self.flush(file)?;
        Ok(self.run)
    }
}

/// Bytes of the whole records at the start of `bytes` (encoded records of a list of `detail`).
fn whole_records(bytes: &[u8], detail: Detail) -> usize {
    let meta = match detail {
        Detail::Stat => META_BYTES,
        Detail::Lite => 0,
    };
    let mut at = 0;
    while bytes.len() >= at + 4 {
        let n = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let end = at + 5 + n + meta;
        if end > bytes.len() {
            break;
        }
        at = end;
    }
    at
}

/// Reads a run back in order, about `block` bytes at a time, each block decoded into a small
/// list whose records are compared and copied where they are.
pub struct RunCursor {
    run: Run,
    detail: Detail,
    block: usize,
    /// Next piece to read, and the next offset inside it.
    piece: usize,
    within: u64,
    /// Read bytes not decoded yet (the start of a record cut by the end of a read).
    raw: Vec<u8>,
    /// The records decoded, and the current one.
    list: FileList,
    at: usize,
}

impl RunCursor {
    /// A cursor at the start of `run`, of records of a list of `detail`.
    pub fn new(run: Run, detail: Detail, block: usize) -> RunCursor {
        RunCursor {
            run,
            detail,
            block: block.max(64),
            piece: 0,
            within: 0,
            raw: Vec::new(),
            list: FileList::new(detail),
            at: 0,
        }
    }

    /// The current record (`None`: the run is read), as a list and an index into it.
    pub fn current(&self) -> Option<(&FileList, usize)> {
        (self.at < self.list.len()).then_some((&self.list, self.at))
    }

    /// Move to the next record, reading the next block from `file` when this one is done.
    pub fn advance(&mut self, file: &SpillFile) -> Result<()> {
        self.at += 1;
        if self.at >= self.list.len() {
            self.load(file)?;
        }
        Ok(())
    }

    /// The next block of records as a list of its own (`None`: the run is read), for a reader
    /// that takes a run a piece at a time rather than a record at a time.
    pub fn next_block(&mut self, file: &SpillFile) -> Result<Option<FileList>> {
        self.load(file)?;
        if self.list.is_empty() {
            return Ok(None);
        }
        Ok(Some(std::mem::replace(
            &mut self.list,
            FileList::new(self.detail),
        )))
    }

    /// Read and decode the next block (at least one whole record, unless the run is done).
    pub fn load(&mut self, file: &SpillFile) -> Result<()> {
        self.at = 0;
        self.list = FileList::new(self.detail);
        loop {
            let whole = whole_records(&self.raw, self.detail);
            if whole > 0 {
                let (records, paths) = self.list.count_encoded(&self.raw[..whole]);
                self.list.reserve(records, paths);
                self.list.decode_records(&self.raw[..whole]);
                self.raw.drain(..whole);
                return Ok(());
            }
            let Some(&(offset, len)) = self.run.pieces.get(self.piece) else {
                return Ok(());
            };
            let n = (len - self.within).min(self.block as u64) as usize;
            let start = self.raw.len();
            self.raw.resize(start + n, 0);
            file.read_exact_at(&mut self.raw[start..], offset + self.within)?;
            self.within += n as u64;
            if self.within == len {
                self.piece += 1;
                self.within = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FileType, Meta};
    use crate::spill::dir::SpillDir;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn runs_read_back_record_by_record_across_pieces_and_blocks() {
        let tmp = tempfile::tempdir().unwrap();
        let file = SpillDir::new(Some(tmp.path().as_os_str().as_bytes()))
            .create()
            .unwrap();
        let mut list = FileList::new(Detail::Stat);
        for i in 0..500u64 {
            let p = format!("/d/{}{i}", "x".repeat(i as usize % 37));
            let m = Meta {
                mode: 0o100644,
                size: i,
                ..Meta::default()
            };
            list.push(p.as_bytes(), FileType::File, Some(m));
        }
        // Two runs interleaved in one file, small buffers: many pieces.
        let (mut a, mut b) = (RunWriter::new(300), RunWriter::new(200));
        for i in 0..list.len() {
            let w = if i % 2 == 0 { &mut a } else { &mut b };
            list.encode_record(i, w.buf());
            w.added(&file, 1).unwrap();
        }
        let (a, b) = (a.finish(&file).unwrap(), b.finish(&file).unwrap());
        assert_eq!((a.records, b.records), (250, 250));
        for (run, parity) in [(a, 0), (b, 1)] {
            let mut c = RunCursor::new(run, Detail::Stat, 70);
            c.load(&file).unwrap();
            let mut i = parity;
            while let Some((l, at)) = c.current() {
                assert_eq!(l.entry(at), list.entry(i));
                i += 2;
                c.advance(&file).unwrap();
            }
            assert_eq!(i, 500 + parity);
        }
    }
}
