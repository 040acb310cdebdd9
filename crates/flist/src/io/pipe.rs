//! `-` as a list name: read the list from standard input, write it to standard output, so that
//! tools compose through pipes (`mfu-rs walk -o - /data | mfu-rs find -i - ... -o - | mfu-rs rm -i -`).
//!
//! A pipe can be read only once, by one process (launchers forward standard input to rank 0
//! and collect standard output from every rank), and cannot be written at offsets. So rank 0
//! spools the stream to an unnamed temporary file, reads or writes it there with the file code
//! of this module run as a one-rank group, and the records then move between rank 0 and the
//! others: [`read_stdin`] spreads them evenly, [`write_stdout`] gathers them in global order.
//! The whole list passes through rank 0's memory once; lists of many millions of entries are
//! better passed as files, which every rank reads and writes in parallel.

use super::{agree::bcast_result, read, write, Format, OP_CREATE, OP_READ, OP_WRITE};
use crate::distribute::{remap, spread};
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::record::{Detail, FileList};
use std::io::{self, Seek, Write};
use steal::wire::Reader;
use steal::Comm;

/// The name that stands for standard input or output.
pub(super) const STDIO: &[u8] = b"-";

/// How errors name the stream.
const STDIN_NAME: &[u8] = b"- (standard input)";
const STDOUT_NAME: &[u8] = b"- (standard output)";

/// What every rank must know to hold its share of a list read on rank 0.
struct Shape {
    detail: Detail,
    users: IdTable,
    groups: IdTable,
}

/// Read a list from standard input (collective). Rank 0 reads the stream; every rank gets an
/// even share of the records in stream order, and the same tables, or the same error.
pub(super) fn read_stdin(comm: &dyn Comm) -> Result<FileList> {
    let mut whole = None;
    let shape = bcast_result(
        comm,
        0,
        || {
            let list = spool_and_read()?;
            let shape = Shape {
                detail: list.detail(),
                users: list.users.clone(),
                groups: list.groups.clone(),
            };
            whole = Some(list);
            Ok(shape)
        },
        |s, out| {
            out.push(matches!(s.detail, Detail::Stat) as u8);
            s.users.encode(out);
            s.groups.encode(out);
        },
        |r: &mut Reader<'_>| Shape {
            detail: if r.u8() == 1 {
                Detail::Stat
            } else {
                Detail::Lite
            },
            users: IdTable::decode(r),
            groups: IdTable::decode(r),
        },
    )?;
    let mut mine = whole.unwrap_or_else(|| FileList::new(shape.detail));
    mine.users = shape.users;
    mine.groups = shape.groups;
    Ok(spread(comm, mine))
}

/// Rank 0: copy standard input into a temporary file and read it as a list file.
fn spool_and_read() -> Result<FileList> {
    let mut spool = tempfile::tempfile().map_err(|e| stream_error(STDIN_NAME, OP_CREATE, e))?;
    io::copy(&mut io::stdin().lock(), &mut spool)
        .map_err(|e| stream_error(STDIN_NAME, OP_READ, e))?;
    let path = fd_path(&spool);
    let mut out = steal::local::run(1, |one| read(one, &path));
    out.pop()
        .expect("one rank")
        .map_err(|e| rename(e, &path, STDIN_NAME))
}

/// Write every rank's `list` to standard output in global order (collective), in `format`.
/// Every rank gets the same outcome.
pub(super) fn write_stdout(comm: &dyn Comm, list: &FileList, format: Format) -> Result<()> {
    let gathered = remap(comm, list.clone(), |_| 0);
    let local = if comm.rank() == 0 {
        let mut all = gathered;
        all.users = list.users.clone();
        all.groups = list.groups.clone();
        write_and_copy(&all, format)
    } else {
        Ok(())
    };
    super::agree::agree(comm, local)
}

/// Rank 0: write `list` into a temporary file with the file code, then copy it to stdout.
fn write_and_copy(list: &FileList, format: Format) -> Result<()> {
    let mut spool = tempfile::tempfile().map_err(|e| stream_error(STDOUT_NAME, OP_CREATE, e))?;
    let path = fd_path(&spool);
    steal::local::run(1, |one| write(one, list, &path, format))
        .pop()
        .expect("one rank")
        .map_err(|e| rename(e, &path, STDOUT_NAME))?;
    spool
        .rewind()
        .map_err(|e| stream_error(STDOUT_NAME, OP_CREATE, e))?;
    let mut out = io::stdout().lock();
    io::copy(&mut spool, &mut out)
        .and_then(|_| out.flush())
        .map_err(|e| stream_error(STDOUT_NAME, OP_WRITE, e))
}

/// A path that opens `file` again (the temporary file has no name).
fn fd_path(file: &std::fs::File) -> Vec<u8> {
    use std::os::fd::AsRawFd;
    format!("/proc/self/fd/{}", file.as_raw_fd()).into_bytes()
}

fn stream_error(name: &[u8], op: &'static str, e: io::Error) -> Error {
    crate::ItemError::new(name, op, e).into()
}

/// Errors of the file code name the file it wrote (`spool`, a temporary); users named `name`.
pub(super) fn rename(e: Error, spool: &[u8], name: &[u8]) -> Error {
    match e {
        Error::Item(mut item) => {
            item.path = name.to_vec();
            Error::Item(item)
        }
        Error::BadList { reason, .. } => Error::BadList {
            path: name.to_vec(),
            reason,
        },
        Error::Invalid(text) => {
            Error::Invalid(text.replace(&*crate::path::display(spool), &crate::path::display(name)))
        }
    }
}
