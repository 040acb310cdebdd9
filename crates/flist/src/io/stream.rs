//! Cache lists read and written in pieces, for callers that never hold a whole list: a rank's
//! share of a v3/v4 file read a bounded number of records at a time ([`CacheShare`]), and a
//! v4 file written from a stream of records ([`write_v4_stream`]) that each rank produces in
//! order. The bytes are those of [`super::read`] and [`super::write`]: the same split of the
//! records over ranks, the same file for the same records and tables.

use super::v4::{self, Layout};
use super::InputFormat;
use super::{
    open_read, read_exact_at, write_all_at, write_staged, Kind, Plan, RegionWriter, IO_CHUNK,
};
use crate::distribute::even_start;
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::path::PathLike;
use crate::record::{Detail, FileList, Meta};
use std::fs::File;
use steal::{Comm, CommExt};

/// One rank's share of a cache list (v3/v4), read in pieces: the records [`super::read`] would
/// give this rank, in file order.
pub struct CacheShare {
    path: Vec<u8>,
    layout: Layout,
    file: Option<File>,
    /// Global index of the next record to read.
    next: u64,
    /// Global index past this rank's last record.
    end: u64,
    /// The list's user table (the same on every rank).
    pub users: IdTable,
    /// The list's group table.
    pub groups: IdTable,
}

/// Open the list at `path` for reading in pieces (collective): `Ok(None)`, on every rank, when
/// it is not a cache list in a file (a text list, standard input, a FIFO), which
/// [`super::read`] reads whole instead. Errors are those of [`super::read`], the same on every
/// rank.
pub fn open_cache_share(comm: &dyn Comm, path: impl PathLike) -> Result<Option<CacheShare>> {
    let path = path.path_bytes();
    if path == super::pipe::STDIO || comm.bcast_with(0, || super::is_stream(path)) {
        return Ok(None);
    }
    let plan: Result<Plan> = comm.bcast_with(0, || Plan::probe(path, InputFormat::Auto));
    let plan = plan?;
    let Some(layout) = plan
        .layout
        .filter(|_| matches!(plan.kind, Kind::V3 | Kind::V4))
    else {
        return Ok(None);
    };
    let (size, rank) = (comm.size(), comm.rank());
    Ok(Some(CacheShare {
        path: path.to_vec(),
        layout,
        file: None,
        next: even_start(layout.nfiles, size, rank),
        end: even_start(layout.nfiles, size, rank + 1),
        users: plan.users,
        groups: plan.groups,
    }))
}

impl CacheShare {
    /// Records of the whole list (all ranks).
    pub fn total(&self) -> u64 {
        self.layout.nfiles
    }

    /// Records of this rank's share not read yet.
    pub fn remaining(&self) -> u64 {
        self.end - self.next
    }

    /// Bytes one record takes in the file (its path field plus 80): an upper bound of its path
    /// plus 60 bytes, what it costs in a [`FileList`].
    pub fn record_bytes(&self) -> u64 {
        self.layout.record_bytes()
    }

    /// Append up to `max` of this rank's next records to `list` (a [`Detail::Stat`] list),
    /// reading about 4 MiB at a time; returns how many were appended (0: the share
    /// is read). Errors name the list file (and, for a damaged record, its index and offset).
    pub fn read_into(&mut self, list: &mut FileList, max: usize) -> Result<usize> {
        debug_assert_eq!(list.detail(), Detail::Stat);
        let rec = self.layout.record_bytes() as usize;
        let n = (self.remaining() as usize).min(max);
        if n == 0 {
            return Ok(0);
        }
        if self.file.is_none() {
            self.file = Some(open_read(&self.path)?);
        }
        let file = self.file.as_ref().expect("opened above");
        let per_chunk = (IO_CHUNK / rec).max(1);
        let mut buf = Vec::new();
        let mut done = 0;
        while done < n {
            let k = per_chunk.min(n - done);
            let first = self.next + done as u64;
            buf.resize(k * rec, 0);
            read_exact_at(file, &self.path, &mut buf, self.layout.record_offset(first))?;
            v4::decode_into(list, &buf, &self.layout, &self.path, first)?;
            done += k;
        }
        self.next += n as u64;
        Ok(n)
    }
}

/// Where one rank writes its records of a list being written by [`write_v4_stream`], in order.
pub struct V4Sink<'a> {
    out: RegionWriter<'a>,
    fc: usize,
    /// Records this rank said it would write, and has written so far.
    promised: u64,
    written: u64,
}

impl V4Sink<'_> {
    /// Append one record. Its path must be no longer than the longest given to
    /// [`write_v4_stream`], non-empty and free of NUL bytes.
    pub fn push(&mut self, path: &[u8], meta: &Meta) -> Result<()> {
        debug_assert!(!path.is_empty() && path.len() < self.fc && !path.contains(&0));
        v4::encode_record(path, meta, self.fc, self.out.buf());
        self.written += 1;
        self.out.flush_if_full()
    }
}

/// Write a v4 list to `path` (a file, not `-`; collective) from records each rank produces in
/// order: `fill` pushes this rank's `records` records (rank 0's come first in the file) into
/// the [`V4Sink`] it is given. `longest` is the longest path of any rank's records (the same
/// on every rank; `None` when no rank has a record), `users` and `groups` the tables (rank
/// 0's are written). The file is the one [`super::write`] writes for the same records, and is
/// published the same way: under a temporary name, renamed over `path` only when every rank's
/// `fill` succeeded. An error of `fill` is returned as it is (on every rank).
pub fn write_v4_stream(
    comm: &dyn Comm,
    path: impl PathLike,
    tables: (&IdTable, &IdTable),
    longest: Option<u64>,
    records: u64,
    fill: impl FnOnce(&mut V4Sink<'_>) -> Result<()>,
) -> Result<()> {
    let path = path.path_bytes();
    if path == super::pipe::STDIO {
        return Err(Error::Invalid(
            "a list streamed from spill files is written to a file, not to standard output"
                .to_string(),
        ));
    }
    let (users, groups) = tables;
    let fc = v4::field_width(longest);
    let (first, nfiles) = comm.offset_and_total(records);
    write_staged(comm, path, |dest| {
        let data_start: Result<u64> = comm.bcast_with(0, || {
            let l = Layout {
                header: v4::V4_HEADER,
                nusers: users.entries.len() as u64,
                uc: v4::table_width(users),
                ngroups: groups.entries.len() as u64,
                gc: v4::table_width(groups),
                nfiles,
                fc,
            };
            let mut head = Vec::new();
            v4::encode_head(&l, users, groups, &mut head);
            let file = super::create(dest)?;
            write_all_at(&file, dest.path, &head, 0)?;
            Ok(head.len() as u64)
        });
        let data_start = data_start?;
        let local = (|| {
            if records == 0 {
                return Ok(());
            }
            let rec = fc + v4::META_FIELDS;
            let mut sink = V4Sink {
                out: RegionWriter::open(dest, data_start + first * rec)?,
                fc: fc as usize,
                promised: records,
                written: 0,
            };
            fill(&mut sink)?;
            if sink.written != sink.promised {
                return Err(Error::Invalid(format!(
                    "write list {}: {} records written of the {} announced",
                    crate::path::display(path),
                    sink.written,
                    sink.promised
                )));
            }
            sink.out.finish()
        })();
        comm.agree(local)
    })
}
