//! Writing an aggregate: [`Aggregate`] (collective create / new version / close) and its
//! per-stream [`Writer`].

use crate::error::Result;
use crate::options::Options;
use std::path::Path;
use steal::Comm;

/// An aggregate being written by every rank of `comm`: a new one ([`Aggregate::create`]) or the
/// next version of an existing one ([`Aggregate::new_version`]). Each rank writes its own
/// streams; [`Aggregate::close`] (collective) makes the version complete.
///
/// Dropped without [`close`](Aggregate::close) (an error path): a new aggregate's temporary is
/// removed, a new version is cut off again (rank 0 truncates the file back to the previous
/// trailer), so nothing incomplete is left that looks complete.
pub struct Aggregate<'c> {
    comm: &'c dyn Comm,
}

/// What [`Aggregate::close`] wrote: the same on every rank (sums over all ranks) except
/// [`Written::rank_bytes_written`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The version closed (1 for a new aggregate).
    pub version: u64,
    /// Streams in this version (all ranks).
    pub streams: u64,
    /// Sum of the streams' sizes (bytes).
    pub logical_bytes: u64,
    /// Stream bytes this version wrote into chunks (bytes, all ranks; without the zero padding
    /// of each rank's last chunk and without the footer).
    pub bytes_written: u64,
    /// Of those, this rank's (bytes).
    pub rank_bytes_written: u64,
    /// Pieces (of at most a chunk each) written (all ranks).
    pub chunks_written: u64,
    /// Pieces referenced from the previous version instead of written (all ranks).
    pub chunks_reused: u64,
    /// Bytes of this version's footer plus its trailer.
    pub index_bytes: u64,
    /// The file's length after this version (bytes).
    pub file_len: u64,
    /// The chunk size (bytes).
    pub chunk_size: u64,
    /// Whether every rank wrote its chunks with `O_DIRECT`.
    pub direct_io: bool,
    /// When `O_DIRECT` was asked for and some rank fell back to buffered writes: why (the
    /// lowest such rank's reason).
    pub direct_io_fallback: Option<String>,
}

impl<'c> Aggregate<'c> {
    /// Start a new aggregate at `path` (collective: every rank of `comm` calls it with the
    /// same arguments). Rank 0 creates a temporary file beside `path` (new, never following a
    /// symbolic link; on Lustre striped over all OSTs with the chunk size as stripe size) and
    /// writes the header; the other ranks open that temporary. It becomes `path` at
    /// [`close`](Aggregate::close). A failure on any rank fails every rank.
    pub fn create(comm: &'c dyn Comm, path: &Path, options: &Options) -> Result<Aggregate<'c>> {
        let _ = (comm, path, options);
        todo!()
    }

    /// Start the next version of the aggregate at `path` (collective). The file is opened
    /// without following a symbolic link and must be a regular file with one hard link whose
    /// last bytes are a complete trailer; the new version is appended after it (its region at
    /// the next multiple of the chunk size), never rewriting earlier bytes. A piece (chunk) of
    /// a stream whose bytes equal the previous version's piece at the same logical offset of
    /// the stream of the same name is referenced, not written. The chunk size stays the
    /// header's; `options.chunk_size` and `options.overwrite` are ignored.
    pub fn new_version(
        comm: &'c dyn Comm,
        path: &Path,
        options: &Options,
    ) -> Result<Aggregate<'c>> {
        let _ = (comm, path, options);
        todo!()
    }

    /// The version being written (1 for a new aggregate).
    pub fn version(&self) -> u64 {
        todo!()
    }

    /// The chunk size (bytes).
    pub fn chunk_size(&self) -> u64 {
        todo!()
    }

    /// The communicator.
    pub fn comm(&self) -> &'c dyn Comm {
        self.comm
    }

    /// Open this rank's stream `name` (any bytes, unique in the version across all ranks)
    /// with `meta` (opaque bytes kept in the index, e.g. a mode and mtime). One stream at a
    /// time per rank: the [`Writer`] borrows the aggregate until it is finished or dropped.
    /// A name this rank already wrote in this version is refused here; one that another rank
    /// also wrote fails [`close`](Aggregate::close).
    pub fn stream(&mut self, name: &[u8], meta: &[u8]) -> Result<Writer<'_, 'c>> {
        let _ = (name, meta);
        todo!()
    }

    /// Write `data` as the whole stream `name` (`stream`, `append`, `finish` in one call).
    pub fn write_stream(&mut self, name: &[u8], meta: &[u8], data: &[u8]) -> Result<()> {
        let mut w = self.stream(name, meta)?;
        w.append(data)?;
        w.finish()
    }

    /// Give up this version (collective: every rank calls it, or drops the aggregate): a new
    /// aggregate's temporary is removed (nothing appears at the path); a new version is cut off
    /// (rank 0 truncates the file back to the previous trailer, which is again the file's
    /// end). Returns the first error met while cleaning up, if any.
    pub fn abort(self) -> Result<()> {
        todo!()
    }

    /// Complete the version (collective): each rank writes its last chunk and syncs; rank 0
    /// gathers every rank's index, refuses names written twice, writes the footer and the
    /// trailer, syncs, and (new aggregate) renames the temporary to the final path and syncs
    /// the directory. A failure on any rank fails every rank, with nothing left that looks
    /// complete.
    pub fn close(self) -> Result<Written> {
        todo!()
    }
}

/// One stream being written by one rank ([`Aggregate::stream`]). Dropped unfinished, it is
/// finished as by [`Writer::finish`], an error then failing [`Aggregate::close`].
pub struct Writer<'a, 'c> {
    agg: &'a mut Aggregate<'c>,
    staging: Vec<u8>,
}

impl Writer<'_, '_> {
    /// The stream's name.
    pub fn name(&self) -> &[u8] {
        todo!()
    }

    /// Bytes appended so far.
    pub fn len(&self) -> u64 {
        todo!()
    }

    /// Whether nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append `data` to the stream. Chunks that fill up are written (an I/O error is returned
    /// here, naming the aggregate).
    pub fn append(&mut self, data: &[u8]) -> Result<()> {
        let _ = (data, &self.agg);
        todo!()
    }

    /// A buffer of `len` bytes to fill (the seed's `pfa_mmap`); [`Writer::commit`] appends its
    /// first `n` bytes. Its content before filling is unspecified (not necessarily zeros);
    /// another call to `buffer` drops whatever was not committed.
    pub fn buffer(&mut self, len: usize) -> &mut [u8] {
        self.staging.resize(len, 0);
        &mut self.staging
    }

    /// Append the first `n` bytes of the buffer given by [`Writer::buffer`] (the seed's
    /// `pfa_append`). Panics if `n` exceeds the buffer's length.
    pub fn commit(&mut self, n: usize) -> Result<()> {
        let _ = n;
        todo!()
    }

    /// Drop the stream: it gets no entry in the index (bytes already written into chunks stay
    /// as dead bytes of the region). For a source that changed while it was read.
    pub fn abandon(self) {
        todo!()
    }

    /// End the stream: its last piece is placed and its entry kept for the index.
    pub fn finish(self) -> Result<()> {
        todo!()
    }
}
