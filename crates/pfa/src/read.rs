//! Reading an aggregate: [`Index`] (its versions and streams) and [`Reader`] (one stream).

use crate::error::{Error, Result};
use crate::format::{self, Footer, Header, Piece, StreamEntry, Trailer, HEADER_LEN, TRAILER_LEN};
use rustix::fs::{Mode, OFlags};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The index of a complete aggregate: every version's footer, checked. Opened by one process
/// (any rank, any rank count: nothing is collective); `Send + Sync`, shared between threads by
/// reference.
pub struct Index {
    path: PathBuf,
    file: Arc<File>,
    header: Header,
    len: u64,
    /// Oldest first.
    versions: Vec<Version>,
}

/// One version: its trailer, and its footer once read and checked (the latest's at open,
/// an earlier one's the first time it is used).
pub(crate) struct Version {
    pub trailer: Trailer,
    pub footer: OnceLock<Footer>,
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

impl<'a> StreamInfo<'a> {
    fn of(s: &'a StreamEntry) -> StreamInfo<'a> {
        StreamInfo {
            name: &s.name,
            meta: &s.meta,
            size: s.size,
            chunks: s.pieces.len() as u64,
            rank: s.rank,
        }
    }
}

/// Open `path` for reading (`access` adds write access for [`crate::recover`] and new
/// versions), never through a symbolic link, and check it is a regular file.
pub(crate) fn open_regular(path: &Path, access: OFlags) -> Result<(File, rustix::fs::Stat)> {
    let flags = access | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Err(rustix::io::Errno::LOOP) => {
            return Err(Error::Refused {
                path: path.into(),
                why: "is a symbolic link: not followed".into(),
            })
        }
        r => r.map_err(|e| Error::io(path, "open", e.into()))?,
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(path, "stat", e.into()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Error::Refused {
            path: path.into(),
            why: "not a regular file".into(),
        });
    }
    // NONBLOCK was only for the open (a FIFO swapped in must not hang it).
    rustix::fs::fcntl_setfl(&fd, access).map_err(|e| Error::io(path, "fcntl", e.into()))?;
    Ok((File::from(fd), st))
}

/// `len` bytes at `offset` of `file`.
fn read_at(file: &File, path: &Path, offset: u64, len: u64, what: &str) -> Result<Vec<u8>> {
    let mut b = vec![0u8; len as usize];
    file.read_exact_at(&mut b, offset).map_err(|e| {
        Error::io(
            path,
            format!("read {what} ({len} bytes at offset {offset})"),
            e,
        )
    })?;
    Ok(b)
}

/// The header of the aggregate open as `file` (`len` bytes long), checked.
pub(crate) fn read_header(file: &File, path: &Path, len: u64) -> Result<Header> {
    let b = read_at(file, path, 0, len.min(HEADER_LEN), "header")?;
    match Header::decode(&b) {
        Ok(h) => Ok(h),
        Err(_) if len < HEADER_LEN && b"MFU-PFA\n".starts_with(&b[..b.len().min(8)]) => {
            Err(Error::Cut {
                path: path.into(),
                len,
                what: format!("shorter than a header ({HEADER_LEN} bytes)"),
            })
        }
        Err((true, what)) => Err(Error::NotAggregate {
            path: path.into(),
            what,
        }),
        Err((false, what)) => Err(Error::corrupt(path, what)),
    }
}

/// The trailer ending at `end`: `Err` as [`Error::Cut`] when it is the file's end
/// (`last`) and its magics are not there, else [`Error::Corrupt`].
fn read_trailer(file: &File, path: &Path, end: u64, last: bool) -> Result<Trailer> {
    if end < HEADER_LEN + TRAILER_LEN {
        let what = format!("no room for a trailer before offset {end}");
        return Err(if last {
            Error::Cut {
                path: path.into(),
                len: end,
                what,
            }
        } else {
            Error::corrupt(path, what)
        });
    }
    let b = read_at(file, path, end - TRAILER_LEN, TRAILER_LEN, "trailer")?;
    Trailer::decode(&b, end).map_err(|(magic_ok, what)| {
        if last && !magic_ok {
            Error::Cut {
                path: path.into(),
                len: end,
                what,
            }
        } else if last {
            Error::corrupt(path, format!("the last trailer: {what}"))
        } else {
            Error::corrupt(path, format!("the trailer ending at offset {end}: {what}"))
        }
    })
}

/// Every version of the aggregate open as `file`, taken as ending at `end` (its length, or
/// a candidate end for [`crate::recover`]), oldest first: every trailer back to version 1
/// checked, and the footers of the latest version (or of all of them, `all_footers`) read and
/// checked.
pub(crate) fn read_versions(
    file: &File,
    path: &Path,
    header: &Header,
    end: u64,
    all_footers: bool,
) -> Result<Vec<Version>> {
    let mut versions = Vec::new();
    let mut at = end;
    let mut expect: Option<u64> = None;
    loop {
        let trailer = read_trailer(file, path, at, at == end)?;
        if trailer.format != header.format {
            return Err(Error::corrupt(
                path,
                format!(
                    "the trailer ending at offset {at} is of format version {}, the header of \
                     {}",
                    trailer.format, header.format
                ),
            ));
        }
        if expect.is_some_and(|v| v != trailer.version) {
            return Err(Error::corrupt(
                path,
                format!(
                    "the trailer ending at offset {at} is of version {}, expected {}",
                    trailer.version,
                    expect.unwrap_or(0)
                ),
            ));
        }
        let footer = OnceLock::new();
        if all_footers || at == end {
            let _ = footer.set(read_footer(file, path, header, &trailer)?);
        }
        let (prev_end, version) = (trailer.prev_end, trailer.version);
        versions.push(Version { trailer, footer });
        if prev_end == 0 {
            if version != 1 {
                return Err(Error::corrupt(
                    path,
                    format!("version {version} names no previous version"),
                ));
            }
            break;
        }
        if version == 1 {
            return Err(Error::corrupt(
                path,
                "version 1 names a previous version".to_string(),
            ));
        }
        at = prev_end;
        expect = Some(version - 1);
    }
    versions.reverse();
    Ok(versions)
}

/// The footer `trailer` names, its checksum verified, decoded and checked.
fn read_footer(file: &File, path: &Path, header: &Header, trailer: &Trailer) -> Result<Footer> {
    let v = trailer.version;
    let b = read_at(
        file,
        path,
        trailer.footer_offset,
        trailer.footer_len,
        &format!("footer of version {v}"),
    )?;
    if format::digest(&b) != trailer.footer_checksum {
        return Err(Error::corrupt(
            path,
            format!(
                "the footer of version {v} ({} bytes at offset {}) does not match its checksum",
                trailer.footer_len, trailer.footer_offset
            ),
        ));
    }
    let footer = Footer::decode(&b, header.chunk_size, trailer.footer_offset).map_err(|what| {
        Error::corrupt(
            path,
            format!(
                "the footer of version {v} (offset {}): {what}",
                trailer.footer_offset
            ),
        )
    })?;
    if footer.version != v
        || footer.prev_end != trailer.prev_end
        || footer.summary() != trailer.summary
        || footer.region_offset < footer.prev_end
        || footer.region_offset.checked_add(footer.region_len) != Some(trailer.footer_offset)
    {
        return Err(Error::corrupt(
            path,
            format!(
                "the footer of version {v} (offset {}) does not agree with its trailer",
                trailer.footer_offset
            ),
        ));
    }
    Ok(footer)
}

impl Index {
    /// Open the aggregate at `path` (not following a symbolic link) and check it: the header,
    /// the trailer at the very end (a file cut anywhere, or whose end is damaged, is refused
    /// as [`crate::Error::Cut`]), every version's trailer back to version 1, and the latest
    /// version's footer (checksums; a mismatch is [`crate::Error::Corrupt`], naming what and
    /// where). An earlier version's footer is read and checked the first time that version
    /// is used (an index of a checkpoint with many versions reads one footer, not all).
    pub fn open(path: &Path) -> Result<Index> {
        let (file, st) = open_regular(path, OFlags::RDONLY)?;
        Index::load(file, path, st.st_size as u64)
    }

    /// The index of the aggregate open as `file`, `len` bytes long.
    pub(crate) fn load(file: File, path: &Path, len: u64) -> Result<Index> {
        let header = read_header(&file, path, len)?;
        let versions = read_versions(&file, path, &header, len, false)?;
        Ok(Index {
            path: path.into(),
            file: Arc::new(file),
            header,
            len,
            versions,
        })
    }

    /// The latest version's footer.
    pub(crate) fn latest_footer(&self) -> &Footer {
        let latest = self.versions.last().expect("an index has a version");
        latest
            .footer
            .get()
            .expect("the latest footer is read at open")
    }

    /// The aggregate's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chunk size (bytes).
    pub fn chunk_size(&self) -> u64 {
        self.header.chunk_size
    }

    /// The file's format version (its header's; every version of the file is in it).
    pub fn format(&self) -> u32 {
        self.header.format
    }

    /// The file's length (bytes).
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The latest version's number.
    pub fn latest(&self) -> u64 {
        self.versions.len() as u64
    }

    /// Every version, oldest first (version `i + 1` at index `i`), from their trailers.
    pub fn versions(&self) -> Vec<VersionInfo> {
        self.versions
            .iter()
            .map(|v| {
                let (t, s) = (&v.trailer, &v.trailer.summary);
                VersionInfo {
                    version: t.version,
                    streams: s.streams,
                    logical_bytes: s.logical_bytes,
                    bytes_written: s.bytes_written,
                    chunks_written: s.chunks_written,
                    chunks_reused: s.chunks_reused,
                    ranks: s.ranks,
                    footer_offset: t.footer_offset,
                    footer_len: t.footer_len,
                }
            })
            .collect()
    }

    /// The footer of `version`, read and checked the first time.
    fn version(&self, version: u64) -> Result<&Footer> {
        let Some(v) = version
            .checked_sub(1)
            .and_then(|i| self.versions.get(i as usize))
        else {
            return Err(Error::NoSuchVersion {
                path: self.path.clone(),
                version,
                latest: self.latest(),
            });
        };
        if let Some(f) = v.footer.get() {
            return Ok(f);
        }
        let f = read_footer(&self.file, &self.path, &self.header, &v.trailer)?;
        // Another thread may have read it meanwhile: the same footer either way.
        let _ = v.footer.set(f);
        Ok(v.footer.get().expect("set above"))
    }

    fn entry(&self, name: &[u8], version: u64) -> Result<&StreamEntry> {
        let footer = self.version(version)?;
        match footer
            .streams
            .binary_search_by(|s| s.name.as_slice().cmp(name))
        {
            Ok(i) => Ok(&footer.streams[i]),
            Err(_) => Err(Error::NoSuchStream {
                path: self.path.clone(),
                name: name.to_vec(),
                version,
            }),
        }
    }

    /// The streams of `version`, in name order (bytewise).
    pub fn streams(&self, version: u64) -> Result<impl ExactSizeIterator<Item = StreamInfo<'_>>> {
        Ok(self.version(version)?.streams.iter().map(StreamInfo::of))
    }

    /// The stream `name` of `version`.
    pub fn stream(&self, name: &[u8], version: u64) -> Result<StreamInfo<'_>> {
        self.entry(name, version).map(StreamInfo::of)
    }

    /// A reader of the stream `name` of `version`. Each chunk's checksum is verified when read.
    pub fn open_stream(&self, name: &[u8], version: u64) -> Result<Reader> {
        let s = self.entry(name, version)?;
        Ok(Reader {
            path: self.path.clone(),
            file: self.file.clone(),
            version,
            chunk_size: self.header.chunk_size,
            format: self.header.format,
            entry: s.clone(),
            pos: 0,
            loaded: None,
            buf: Vec::new(),
        })
    }

    /// The whole stream `name` of `version`, read and verified.
    pub fn read_stream(&self, name: &[u8], version: u64) -> Result<Vec<u8>> {
        // Each piece read straight into its place in the result (no reader, no copy of the
        // entry: a small stream costs a lookup and a read).
        let s = self.entry(name, version)?;
        let mut out = vec![0u8; s.size as usize];
        let mut at = 0usize;
        for p in &s.pieces {
            let to = &mut out[at..at + p.len as usize];
            let place = PieceAt {
                file: &self.file,
                path: &self.path,
                format: self.header.format,
                name: &s.name,
                version,
            };
            place.read(p, to)?;
            at += p.len as usize;
        }
        Ok(out)
    }
}

/// One stream of one version, read: [`io::Read`] and [`io::Seek`] over its logical bytes, and
/// [`Reader::eof`]. Pieces are read whole and checked against their checksum before any of
/// their bytes is returned; a mismatch is an [`io::ErrorKind::InvalidData`] error carrying a
/// [`crate::Error::ChunkChecksum`] (path, stream, version, offsets). Independent of the
/// [`Index`] it came from (it holds its own descriptor and piece list).
pub struct Reader {
    path: PathBuf,
    file: Arc<File>,
    version: u64,
    chunk_size: u64,
    /// The file's format version (how piece checksums are computed).
    format: u32,
    entry: StreamEntry,
    pos: u64,
    /// The piece whose verified bytes `buf` holds.
    loaded: Option<u64>,
    buf: Vec<u8>,
}

impl Reader {
    /// The stream's name.
    pub fn name(&self) -> &[u8] {
        &self.entry.name
    }

    /// The stream's meta bytes.
    pub fn meta(&self) -> &[u8] {
        &self.entry.meta
    }

    /// The version read.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The stream's size (bytes).
    pub fn size(&self) -> u64 {
        self.entry.size
    }

    /// The position (bytes from the stream's start).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether the position is at (or past) the end of the stream: the next read returns 0
    /// bytes (the seed's `pfa_eof`).
    pub fn eof(&self) -> bool {
        self.pos >= self.entry.size
    }

    /// Read piece `i` into `buf` and verify it (unless it is there already).
    fn load(&mut self, i: u64) -> Result<()> {
        if self.loaded == Some(i) {
            return Ok(());
        }
        self.loaded = None;
        let p: Piece = self.entry.pieces[i as usize];
        self.buf.resize(p.len as usize, 0);
        let place = PieceAt {
            file: &self.file,
            path: &self.path,
            format: self.format,
            name: &self.entry.name,
            version: self.version,
        };
        place.read(&p, &mut self.buf)?;
        self.loaded = Some(i);
        Ok(())
    }
}

/// Where the pieces of one stream of one version are read from.
struct PieceAt<'a> {
    file: &'a File,
    path: &'a Path,
    /// The file's format version (how piece checksums are computed).
    format: u32,
    /// The stream's name (for errors).
    name: &'a [u8],
    version: u64,
}

impl PieceAt<'_> {
    /// Read piece `p` into `to` (`p.len` bytes) and verify its checksum.
    fn read(&self, p: &Piece, to: &mut [u8]) -> Result<()> {
        let mut at = 0usize;
        for e in p.extents() {
            let part = &mut to[at..at + e.len as usize];
            self.file
                .read_exact_at(part, e.file_offset)
                .map_err(|err| {
                    Error::io(
                        self.path,
                        format!(
                            "read stream {} version {} ({} bytes at offset {})",
                            crate::error::shown(self.name),
                            self.version,
                            e.len,
                            e.file_offset
                        ),
                        err,
                    )
                })?;
            at += e.len as usize;
        }
        if format::piece_checksum(self.format, to) != p.checksum {
            return Err(Error::ChunkChecksum {
                path: self.path.into(),
                stream: self.name.to_vec(),
                version: self.version,
                logical: p.logical,
                file_offset: p.extents[0].file_offset,
                len: p.len,
            });
        }
        Ok(())
    }
}

impl io::Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.eof() || buf.is_empty() {
            return Ok(0);
        }
        let i = self.pos / self.chunk_size;
        self.load(i)?;
        let from = (self.pos - i * self.chunk_size) as usize;
        let n = buf.len().min(self.buf.len() - from);
        buf[..n].copy_from_slice(&self.buf[from..from + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl io::Seek for Reader {
    /// Seek as in a file: to any position from 0 up (past the end too, where reads give 0
    /// bytes); before 0 is an [`io::ErrorKind::InvalidInput`] error.
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let (base, delta) = match to {
            io::SeekFrom::Start(n) => {
                self.pos = n;
                return Ok(n);
            }
            io::SeekFrom::End(d) => (self.entry.size, d),
            io::SeekFrom::Current(d) => (self.pos, d),
        };
        match base.checked_add_signed(delta) {
            Some(n) => {
                self.pos = n;
                Ok(n)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start of the stream",
            )),
        }
    }
}
