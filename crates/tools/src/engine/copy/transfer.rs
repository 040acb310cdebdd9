//! How a file's bytes reach its destination: copied, or (sync `-c`) compared with what the
//! destination holds and rewritten only where they differ. Each difference between the two is
//! one method here, so a chunk's copy ([`super::Worker`]) reads as one path.

use super::data::{self, Buffer, DataError, DataOptions};
use super::meta::Differences;
use super::{Scratch, Worker};
use flist::chunk::Chunk;
use flist::{FileType, ItemError, Meta};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::OFlags;

/// What is done with the bytes of the files of one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Transfer {
    /// Written to a destination created (or truncated) for them.
    Copy,
    /// Compared with an existing same-size destination; differing blocks rewritten in place.
    Compare,
}

impl Transfer {
    /// O_DIRECT (`-s`, `asked`) for plain copies only: comparing reads exact, unaligned ranges.
    pub(super) fn direct(self, asked: bool) -> bool {
        asked && self == Transfer::Copy
    }

    /// Files of several chunks are created and sized before any chunk lands (copies only: a
    /// compared file exists, at its size).
    pub(super) fn creates_first(self) -> bool {
        self == Transfer::Copy
    }

    /// Journals of complete chunks are kept (copies only: a comparison reads every byte anyway).
    pub(super) fn journals(self) -> bool {
        self == Transfer::Copy
    }

    /// Open the destination of a chunk that is not a whole file's, or of a compared file (read
    /// and written in place). A whole file copied is created instead ([`Worker::create_dest`]).
    pub(super) fn open_flags(self) -> OFlags {
        match self {
            Transfer::Copy => OFlags::WRONLY | OFlags::NOFOLLOW,
            Transfer::Compare => OFlags::RDWR | OFlags::NOFOLLOW,
        }
    }

    /// Move `c`'s bytes from `src` to `dst`; the bytes written.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn bytes(
        self,
        src: &OwnedFd,
        dst: &OwnedFd,
        c: &Chunk,
        data_opts: &DataOptions,
        bufs: &mut Scratch,
        cfr_ok: &mut bool,
        seen: data::Seen<'_>,
    ) -> Result<u64, DataError> {
        match self {
            Transfer::Copy => data::copy_range(
                src.as_fd(),
                dst.as_fd(),
                c.offset,
                c.length,
                data_opts,
                &mut bufs.buf,
                cfr_ok,
                seen,
            ),
            Transfer::Compare => {
                let other = bufs
                    .other
                    .get_or_insert_with(|| Buffer::new(data_opts.bufsize));
                data::sync_range(
                    src.as_fd(),
                    dst.as_fd(),
                    c.offset,
                    c.length,
                    &mut bufs.buf,
                    other,
                    seen,
                )
            }
        }
    }

    /// A sparse copy of a whole file ends with a hole the writes skipped: the file is cut to
    /// its size (copies only: a compared file has its size).
    pub(super) fn truncates_sparse(self, sparse: bool) -> bool {
        sparse && self == Transfer::Copy
    }

    /// A whole file landed and its source settled: true when its metadata is to be applied.
    /// A compared file's journal goes (every byte was compared), and the file is counted as
    /// rewritten or as fixed only when something differs.
    pub(super) fn finish_whole(
        self,
        w: &Worker,
        c: &Chunk,
        dst: &[u8],
        dst_fd: &OwnedFd,
        written: u64,
    ) -> Result<bool, ItemError> {
        if self == Transfer::Copy {
            return Ok(true);
        }
        w.cleanup_journal(&c.path, dst, c.file_size)?;
        let st = rustix::fs::fstat(dst_fd).map_err(|e| ItemError::new(dst, "stat", e.into()))?;
        let diff = Differences::between(&c.meta, &Meta::from_stat(&st), FileType::File);
        if written == 0 && !diff.any() {
            return Ok(false);
        }
        w.tally.count(if written > 0 {
            &w.tally.rewritten
        } else {
            &w.tally.compare_meta
        });
        Ok(true)
    }

    /// A file of several chunks is complete: true when its metadata is to be applied. As
    /// [`Transfer::finish_whole`], but a chunk rewritten shows as the mtime it moved.
    pub(super) fn finish_chunks(self, w: &Worker, src: &[u8], dst: &[u8], m: &Meta) -> bool {
        if self == Transfer::Copy {
            return true;
        }
        // Every byte was compared: a journal beside it no longer says anything true.
        if let Err(e) = w.cleanup_journal(src, dst, m.size) {
            w.tally.fail(e);
            return false;
        }
        match w.reach.dst(dst).and_then(|a| a.lstat()) {
            Ok(st) => {
                let diff = Differences::between(m, &Meta::from_stat(&st), FileType::File);
                if !diff.any() {
                    return false;
                }
                w.tally.count(if diff.mtime {
                    &w.tally.rewritten
                } else {
                    &w.tally.compare_meta
                });
                true
            }
            Err(e) => {
                w.tally.fail(ItemError::new(dst, "stat", e));
                false
            }
        }
    }
}
