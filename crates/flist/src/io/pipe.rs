//! `-` as a list name: read the list from standard input, write it to standard output, so that
//! tools compose through pipes (`mfu-rs walk -o - /data | mfu-rs find -i - ... -o - | mfu-rs rm -i -`).
//!
//! A pipe can be read only once, by one process (launchers forward standard input to rank 0
//! and collect standard output from every rank), and cannot be written at offsets. Writing,
//! the ranks send their records to rank 0 in order, a bounded piece at a time, and rank 0
//! writes them as they come ([`write_stdout`]): no rank holds more than its own share.
//! Reading, rank 0 spools the stream to an unnamed temporary file (in `TMPDIR`), and every
//! rank reads its share with the file code of this module, asking rank 0 for the bytes, a
//! bounded piece at a time ([`read_stdin`], [`Source::served`]): again no rank holds more than
//! its own share. The stream itself is read by one process, serially, and every byte passes
//! through rank 0: lists of many millions of entries are faster as files, which every rank
//! reads and writes in parallel.

use super::source::Source;
use super::{
    read_planned, text, v4, Format, InputFormat, Plan, IO_CHUNK, OP_CREATE, OP_OPEN, OP_READ,
    OP_WRITE,
};
use crate::error::{Error, Result};
use crate::record::FileList;
use std::io::{self, Write};
use steal::{Comm, CommExt};

/// The name that stands for standard input or output.
pub(super) const STDIO: &[u8] = b"-";

/// How errors name the stream.
const STDIN_NAME: &[u8] = b"- (standard input)";
const STDOUT_NAME: &[u8] = b"- (standard output)";

/// Read a list from a stream (collective): standard input (`None`), or a named file that can be
/// read only once from the start: a FIFO (the `/dev/fd/N` of a shell's `<(cmd)`) or a socket
/// (named on rank 0, which must be able to open it). Rank 0 reads the stream; every rank gets
/// its share of the records in stream order, as from a list file, and the same tables, or the
/// same error. Its lines are read as `format` says.
///
/// Rank 0 spools the stream into an unnamed temporary file and probes it; then every rank
/// reads the records it would read from a list file, through rank 0, which serves byte ranges
/// of the spool in pieces ([`Source::served`]). Only rank 0 touches the spool, so it need not
/// be on a file system the other ranks reach.
pub(super) fn read_stream(
    comm: &dyn Comm,
    source: Option<&[u8]>,
    format: InputFormat,
) -> Result<FileList> {
    let name = source.unwrap_or(STDIN_NAME);
    let mut spool = None;
    let plan: Result<Plan> = comm.bcast_with(0, || {
        let (file, plan) = spool_and_probe(source, format)?;
        spool = Some(file);
        Ok(plan)
    });
    let plan = plan?;
    let mut src = Source::served(comm, name, spool.as_ref(), piece_bytes());
    read_planned(comm, plan, &mut src)
}

/// Rank 0: copy standard input (or the stream `source`) into an unnamed temporary file and
/// recognise the list it holds.
fn spool_and_probe(source: Option<&[u8]>, format: InputFormat) -> Result<(std::fs::File, Plan)> {
    let name = source.unwrap_or(STDIN_NAME);
    let mut spool = tempfile::tempfile().map_err(|e| stream_error(name, OP_CREATE, e))?;
    let copied = match source {
        None => io::copy(&mut io::stdin().lock(), &mut spool),
        Some(path) => {
            let mut stream = std::fs::File::open(crate::path::as_path(path))
                .map_err(|e| stream_error(name, OP_OPEN, e))?;
            io::copy(&mut stream, &mut spool)
        }
    };
    let copied = copied.map_err(|e| stream_error(name, OP_READ, e))?;
    // mfu-rs writes at least a header (or a v4 header) to a stream, even for an empty list:
    // nothing at all is a writer that died or never started (an `mpirun` that failed to
    // launch), not a list of nothing.
    if copied == 0 {
        return Err(Error::BadList {
            path: name.to_vec(),
            reason: "empty: no list came through (did the command writing it fail?); nothing read"
                .to_string(),
        });
    }
    let path = fd_path(&spool);
    let plan = Plan::probe(&path, format).map_err(|e| rename(e, &path, name))?;
    Ok((spool, plan))
}

/// Write every rank's `list` to standard output in global order (collective), in `format`.
/// Every rank gets the same outcome.
///
/// Bounded per rank: each rank encodes its records in pieces of about [`piece_bytes`] and rank
/// 0 writes them to standard output as they come, rank after rank, asking for one piece at a
/// time; nothing is gathered. The checks come first (every rank its own records), so a list
/// that cannot be written leaves standard output untouched.
pub(super) fn write_stdout(comm: &dyn Comm, list: &FileList, format: Format) -> Result<()> {
    comm.agree(match format {
        Format::V4 => v4::check(list, STDOUT_NAME),
        Format::Text => text::check(list, STDOUT_NAME),
    })?;
    // V4: the header (rank 0) and the width of the path field, from all ranks' records.
    let (mut head, fc) = match format {
        Format::V4 => {
            let longest = list
                .iter()
                .map(|e| e.path.len() as u64 + 1)
                .max()
                .unwrap_or(0);
            // `longest` counts the NUL, so 0 means "no record anywhere".
            let fc = v4::field_width(comm.max(longest).checked_sub(1));
            let nfiles = comm.sum(list.len() as u64);
            let mut head = Vec::new();
            if comm.rank() == 0 {
                let l = v4::Layout {
                    header: v4::V4_HEADER,
                    nusers: list.users.entries.len() as u64,
                    uc: v4::table_width(&list.users),
                    ngroups: list.groups.entries.len() as u64,
                    gc: v4::table_width(&list.groups),
                    nfiles,
                    fc,
                };
                v4::encode_head(&l, &list.users, &list.groups, &mut head);
            }
            (head, fc as usize)
        }
        Format::Text => {
            let mut head = Vec::new();
            if comm.rank() == 0 {
                text::header(&mut head);
            }
            (head, 0)
        }
    };
    // Text: the trailer, written last by rank 0, says how many records came before it; a
    // reader of a stream cut between two records (a writer that died) finds none.
    let trailer = match format {
        Format::Text => {
            let count = comm.sum(list.len() as u64);
            let mut t = Vec::new();
            text::trailer(count, &mut t);
            t
        }
        Format::V4 => Vec::new(),
    };
    let piece = piece_bytes();
    let mut at = 0;
    let next = || {
        if at == list.len() && head.is_empty() {
            return None;
        }
        let mut out = std::mem::take(&mut head);
        while at < list.len() && (out.is_empty() || out.len() < piece) {
            let e = list.entry(at);
            match format {
                Format::V4 => {
                    let meta = &e.meta.expect("a stat list has metadata");
                    v4::encode_record(e.path, meta, fc, &mut out);
                }
                Format::Text => {
                    out.extend_from_slice(e.path);
                    out.extend_from_slice(&[b'|', e.kind.text_letter(), b'\n']);
                }
            }
            at += 1;
        }
        Some(out)
    };
    let mut failed = None;
    let mut stdout = (comm.rank() == 0).then(|| io::stdout().lock());
    steal::ordered::in_rank_order_pieces(comm, next, |bytes| {
        let out = stdout.as_mut().expect("rank 0 writes");
        match out.write_all(bytes) {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    });
    if let (None, Some(out)) = (&failed, stdout.as_mut()) {
        if let Err(e) = out.write_all(&trailer) {
            failed = Some(e);
        }
    }
    let local = match (failed, stdout.as_mut().map(|o| o.flush())) {
        (Some(e), _) | (None, Some(Err(e))) => Err(stream_error(STDOUT_NAME, OP_WRITE, e)),
        _ => Ok(()),
    };
    comm.agree(local)
}

/// Test seam: with `MFU_RS_TEST_PIPE_PIECE_BYTES=N` a list written to standard output travels to
/// rank 0 in pieces of about N bytes, and one read from a stream travels from rank 0 in pieces
/// of at most N bytes, so that the tests see many pieces from a small list.
pub(super) const PIPE_PIECE_VAR: &str = "MFU_RS_TEST_PIPE_PIECE_BYTES";

/// Bytes of encoded records a rank sends to rank 0 at once (about; at least one record), and
/// most bytes of a spooled stream rank 0 sends at once: [`IO_CHUNK`], or what
/// [`PIPE_PIECE_VAR`] says.
fn piece_bytes() -> usize {
    std::env::var(PIPE_PIECE_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(IO_CHUNK)
}

/// A path that opens `file` again (the temporary file has no name).
fn fd_path(file: &std::fs::File) -> Vec<u8> {
    use std::os::fd::AsRawFd;
    format!("/proc/self/fd/{}", file.as_raw_fd()).into_bytes()
}

fn stream_error(name: &[u8], op: &'static str, e: io::Error) -> Error {
    crate::ItemError::new(name, op, e).into()
}

/// Errors of the file code name the file it read or wrote (`spool`, a temporary); users named
/// `name`.
pub(super) fn rename(e: Error, spool: &[u8], name: &[u8]) -> Error {
    match e {
        // Only errors about the spool itself: another file's (a spill file's directory) keeps
        // its name.
        Error::Item(mut item) if item.path == spool => {
            item.path = name.to_vec();
            Error::Item(item)
        }
        Error::BadList { path, reason } if path == spool => Error::BadList {
            path: name.to_vec(),
            reason,
        },
        e @ (Error::Item(_) | Error::BadList { .. }) => e,
        Error::Invalid(text) => {
            Error::Invalid(text.replace(&*crate::path::display(spool), &crate::path::display(name)))
        }
    }
}
