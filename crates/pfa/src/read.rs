//! Reading an aggregate: [`Index`] (its versions and streams) and [`Reader`] (one stream).

use crate::error::Result;
use std::io;
use std::path::{Path, PathBuf};

/// The index of a complete aggregate: every version's footer, checked. Opened by one process
/// (any rank, any rank count: nothing is collective); shared between threads by reference.
pub struct Index {
    path: PathBuf,
}

/// One version of an aggregate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionInfo {
    /// Its number (1, 2, ...).
    pub version: u64,
    /// Streams in it.
    pub streams: u64,
    /// Sum of its streams' sizes (bytes).
    pub logical_bytes: u64,
    /// Bytes of piece data it wrote itself (bytes).
    pub bytes_written: u64,
    /// Pieces it wrote.
    pub chunks_written: u64,
    /// Pieces it referenced from earlier versions.
    pub chunks_reused: u64,
    /// Ranks that wrote it.
    pub ranks: u32,
    /// File offset of its footer (bytes).
    pub footer_offset: u64,
    /// Length of its footer (bytes).
    pub footer_len: u64,
}

/// One stream of one version, as listed by [`Index::streams`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamInfo<'a> {
    /// Its name (any bytes).
    pub name: &'a [u8],
    /// Its meta bytes (opaque, as written).
    pub meta: &'a [u8],
    /// Its size (bytes).
    pub size: u64,
    /// Its pieces (chunks of at most the chunk size).
    pub chunks: u64,
    /// The rank that wrote it.
    pub rank: u32,
}

impl Index {
    /// Open the aggregate at `path` (not following a symbolic link) and check it: the header,
    /// the trailer at the very end (a file cut anywhere, or whose end is damaged, is refused
    /// as [`crate::Error::Cut`]), and every version's trailer and footer (checksums; a
    /// mismatch is [`crate::Error::Corrupt`], naming what and where).
    pub fn open(path: &Path) -> Result<Index> {
        let _ = path;
        todo!()
    }

    /// The aggregate's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chunk size (bytes).
    pub fn chunk_size(&self) -> u64 {
        todo!()
    }

    /// The file's length (bytes).
    pub fn file_len(&self) -> u64 {
        todo!()
    }

    /// The latest version's number.
    pub fn latest(&self) -> u64 {
        todo!()
    }

    /// Every version, oldest first (version `i + 1` at index `i`).
    pub fn versions(&self) -> Vec<VersionInfo> {
        todo!()
    }

    /// The streams of `version`, in name order (bytewise).
    pub fn streams(&self, version: u64) -> Result<impl ExactSizeIterator<Item = StreamInfo<'_>>> {
        let _ = version;
        Ok(Vec::new().into_iter())
    }

    /// The stream `name` of `version`.
    pub fn stream(&self, name: &[u8], version: u64) -> Result<StreamInfo<'_>> {
        let _ = (name, version);
        todo!()
    }

    /// A reader of the stream `name` of `version`. Each chunk's checksum is verified when read.
    pub fn open_stream(&self, name: &[u8], version: u64) -> Result<Reader> {
        let _ = (name, version);
        todo!()
    }

    /// The whole stream `name` of `version`, read and verified.
    pub fn read_stream(&self, name: &[u8], version: u64) -> Result<Vec<u8>> {
        let _ = (name, version);
        todo!()
    }
}

/// One stream of one version, read: [`io::Read`] and [`io::Seek`] over its logical bytes, and
/// [`Reader::eof`]. Pieces are read whole and checked against their checksum before any of
/// their bytes is returned; a mismatch is an [`io::ErrorKind::InvalidData`] error carrying a
/// [`crate::Error::ChunkChecksum`] (path, stream, version, offsets). Independent of the
/// [`Index`] it came from (it holds its own descriptor and piece list).
pub struct Reader {
    pos: u64,
}

impl Reader {
    /// The stream's name.
    pub fn name(&self) -> &[u8] {
        todo!()
    }

    /// The stream's meta bytes.
    pub fn meta(&self) -> &[u8] {
        todo!()
    }

    /// The version read.
    pub fn version(&self) -> u64 {
        todo!()
    }

    /// The stream's size (bytes).
    pub fn size(&self) -> u64 {
        todo!()
    }

    /// The position (bytes from the stream's start).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether the position is at (or past) the end of the stream: the next read returns 0
    /// bytes (the seed's `pfa_eof`).
    pub fn eof(&self) -> bool {
        todo!()
    }
}

impl io::Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let _ = buf;
        todo!()
    }
}

impl io::Seek for Reader {
    /// Seek as in a file: to any position from 0 up (past the end too, where reads give 0
    /// bytes); before 0 is an [`io::ErrorKind::InvalidInput`] error.
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let _ = to;
        todo!()
    }
}
