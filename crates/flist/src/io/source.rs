//! Where a rank reads the bytes of a list: the list file itself, or, for a list that came
//! through a stream, rank 0's spool of it, served over the communicator in bounded pieces.
//!
//! A stream (standard input, a FIFO) can be read once, by one process: rank 0 copies it into
//! an unnamed temporary file (the spool, in `TMPDIR`). The other ranks cannot be counted on
//! to open that file (under a launcher across nodes `TMPDIR` is often node-local, and an
//! unnamed file has no name anyway), so they ask rank 0 for the byte ranges they would have
//! read from a list file, and rank 0 answers with at most one piece (4 MiB) per request. The
//! readers of [`super::text`] and [`super::v4`] run unchanged on either source: each rank holds
//! its own share of the records plus one piece, never the whole list.
//!
//! The readers go in phases (a phase reads, then the ranks agree on its outcome); rank 0
//! answers requests while it reads its own share and then, in [`Source::phase_done`], until
//! every other rank has said it is done with the phase, so no rank waits in a collective while
//! another waits for bytes.

use super::{bad, open_read, read_full_at, OP_READ};
use crate::error::{Error, ItemError, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::time::Duration;
use steal::{Comm, CommExt, Tag};

/// A rank asks rank 0 for a byte range (`offset`, `length` as two `u64`), or, with an empty
/// message, says it is done with the current phase.
const TAG_ASK: Tag = 1101;
/// Rank 0's answer: `1` then the bytes (fewer than asked at the end of the spool, none past
/// it), or `0` then the `errno` of the failed read (`i32`, little-endian).
const TAG_BYTES: Tag = 1102;

/// The bytes of one list, as one rank reads them.
pub(super) struct Source<'a> {
    /// The list's name in messages: the file, or the stream the user named.
    name: &'a [u8],
    how: How<'a>,
}

enum How<'a> {
    /// The list file `name`, opened on the first read (a rank with no share never opens it).
    File(Option<File>),
    /// Rank 0 of a streamed list: reads the spool and serves the other ranks from it.
    Serving {
        comm: &'a dyn Comm,
        spool: &'a File,
        /// Most bytes sent per answer.
        piece: usize,
        /// Ranks done with the current phase (a rank with nothing to read is done at once).
        done: usize,
    },
    /// Another rank of a streamed list: asks rank 0.
    Asking { comm: &'a dyn Comm },
}

impl<'a> Source<'a> {
    /// The list file at `path`.
    pub(super) fn file(path: &'a [u8]) -> Source<'a> {
        Source {
            name: path,
            how: How::File(None),
        }
    }

    /// A list spooled by rank 0 (`spool` is `Some` there, `None` elsewhere) and named `name`
    /// in messages. Collective in use: every rank reads through its own.
    pub(super) fn served(
        comm: &'a dyn Comm,
        name: &'a [u8],
        spool: Option<&'a File>,
        piece: usize,
    ) -> Source<'a> {
        let how = match spool {
            Some(spool) => How::Serving {
                comm,
                spool,
                piece: piece.max(1),
                done: 0,
            },
            None => How::Asking { comm },
        };
        Source { name, how }
    }

    /// The list's name, for messages.
    pub(super) fn name(&self) -> &'a [u8] {
        self.name
    }

    /// Read as many bytes as `buf` holds from byte `offset`, or up to the end of the list;
    /// returns the count read. Errors name the list and the operation.
    pub(super) fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let name = self.name;
        let failed = |e: io::Error| -> Error { ItemError::new(name, OP_READ, e).into() };
        match &mut self.how {
            How::File(file) => {
                if file.is_none() {
                    *file = Some(open_read(name)?);
                }
                let f = file.as_ref().expect("opened above");
                read_full_at(f, buf, offset).map_err(failed)
            }
            How::Serving {
                comm,
                spool,
                piece,
                done,
            } => {
                // Answer who is waiting first: rank 0 reads its share while the others read
                // theirs.
                while let Some((from, _, ask)) = comm.try_recv(Some(TAG_ASK)) {
                    *done += usize::from(!answer(*comm, spool, *piece, from, &ask));
                }
                read_full_at(spool, buf, offset).map_err(failed)
            }
            How::Asking { comm } => {
                let mut done = 0;
                while done < buf.len() {
                    let ask = Ask::Range {
                        offset: offset + done as u64,
                        len: (buf.len() - done) as u64,
                    };
                    comm.send_value(0, TAG_ASK, &ask);
                    let answer = steal::decode::<Served>(&wait_for(*comm, TAG_BYTES))
                        .unwrap_or_else(|e| panic!("list served by rank 0: {e}"));
                    let bytes = match answer {
                        Served::Bytes(b) => b,
                        Served::Failed(errno) => {
                            return Err(failed(io::Error::from_raw_os_error(errno)))
                        }
                    };
                    if bytes.is_empty() {
                        break;
                    }
                    buf[done..done + bytes.len()].copy_from_slice(&bytes);
                    done += bytes.len();
                }
                Ok(done)
            }
        }
    }

    /// Fill `buf` from byte `offset`; a list that ends early is a
    /// [`Error::BadList`](crate::Error::BadList) naming the offset where it ends.
    pub(super) fn read_exact_at(&mut self, buf: &mut [u8], offset: u64) -> Result<()> {
        let n = self.read_at(buf, offset)?;
        if n < buf.len() {
            return Err(bad(
                self.name,
                format!(
                    "truncated at byte offset {}: expected {} bytes from offset {offset} (did the file change while being read?)",
                    offset + n as u64,
                    buf.len()
                ),
            ));
        }
        Ok(())
    }

    /// End of a reading phase, before the ranks agree on its outcome (collective for a
    /// streamed list, nothing for a file): rank 0 answers requests until every other rank
    /// has said it is done.
    pub(super) fn phase_done(&mut self) {
        match &mut self.how {
            How::File(_) => {}
            How::Serving {
                comm,
                spool,
                piece,
                done,
            } => {
                while *done < comm.size() - 1 {
                    match comm.try_recv(Some(TAG_ASK)) {
                        Some((from, _, ask)) => {
                            *done += usize::from(!answer(*comm, spool, *piece, from, &ask));
                        }
                        None => comm.park(Duration::from_millis(10), Duration::from_micros(20)),
                    }
                }
                *done = 0;
                comm.flush_sends();
            }
            How::Asking { comm } => {
                comm.send_value(0, TAG_ASK, &Ask::Done);
                comm.flush_sends();
            }
        }
    }
}

/// A rank's message to rank 0 while it reads a served list.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum Ask {
    /// Up to `len` bytes from byte `offset`.
    Range { offset: u64, len: u64 },
    /// This rank is done with the phase.
    Done,
}

/// Rank 0's answer to an [`Ask::Range`].
#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum Served {
    /// The bytes (fewer than asked at the end of the list, none past it).
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Reading failed with this errno.
    Failed(i32),
}

/// Rank 0: answer the request `ask` of rank `from` with at most `piece` bytes of `spool`.
/// Returns false for no request but the word that `from` is done with the phase.
fn answer(comm: &dyn Comm, spool: &File, piece: usize, from: usize, ask: &[u8]) -> bool {
    let (offset, length) = match steal::decode(ask) {
        Ok(Ask::Range { offset, len }) => (offset, len),
        Ok(Ask::Done) => return false,
        Err(e) => panic!("list reader's request: {e}"),
    };
    let mut out = vec![0u8; length.min(piece as u64) as usize];
    let served = match read_full_at(spool, &mut out, offset) {
        Ok(n) => {
            out.truncate(n);
            Served::Bytes(out)
        }
        Err(e) => Served::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
    };
    comm.send_value(from, TAG_BYTES, &served);
    true
}

/// Wait for the next message with `tag`, sleeping (not spinning) in between.
fn wait_for(comm: &dyn Comm, tag: Tag) -> Vec<u8> {
    loop {
        if let Some((_, _, bytes)) = comm.try_recv(Some(tag)) {
            return bytes;
        }
        comm.park(Duration::from_millis(10), Duration::from_micros(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn every_rank_reads_any_range_of_rank_0s_spool_in_small_pieces() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let mut spool = tempfile::tempfile().unwrap();
        spool.write_all(&bytes).unwrap();
        let got = steal::local::run(3, |comm| {
            let mine = (comm.rank() == 0).then_some(&spool);
            let mut src = Source::served(comm, b"- (standard input)", mine, 7);
            // Each rank reads a range of its own, past the end too, in two phases.
            let mut out = Vec::new();
            for phase in 0..2 {
                let at = 300 * comm.rank() as u64 + 50 * phase;
                let mut buf = vec![0u8; 400];
                let n = src.read_at(&mut buf, at).unwrap();
                out.push((at, buf[..n].to_vec()));
                src.phase_done();
            }
            out
        });
        for (rank, reads) in got.iter().enumerate() {
            for (at, read) in reads {
                let at = *at as usize;
                let want = &bytes[at..(at + 400).min(bytes.len())];
                assert_eq!(read.as_slice(), want, "rank {rank} from {at}");
            }
        }
    }

    #[test]
    fn a_short_list_is_named_with_the_offset_where_it_ends() {
        let mut spool = tempfile::tempfile().unwrap();
        spool.write_all(b"0123456789").unwrap();
        let errors = steal::local::run(2, |comm| {
            let mine = (comm.rank() == 0).then_some(&spool);
            let mut src = Source::served(comm, b"- (standard input)", mine, 4);
            let mut buf = [0u8; 8];
            let e = src.read_exact_at(&mut buf, 6).unwrap_err().to_string();
            src.phase_done();
            e
        });
        for e in errors {
            assert!(e.contains("- (standard input)"), "{e}");
            assert!(e.contains("truncated at byte offset 10"), "{e}");
        }
    }
}
