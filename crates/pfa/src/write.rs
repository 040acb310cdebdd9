//! Writing an aggregate: [`Aggregate`] (collective create / new version / close) and its
//! per-stream [`Writer`].

use crate::direct::{open_data, AlignedBuf, DataFile};
use crate::error::{shown, Error, Result};
use crate::format::{
    self, decode_streams, encode_stream, encode_stream_fields, Extent, Footer, Header, Piece,
    PieceHasher, Trailer, FORMAT, HEADER_LEN, TRAILER_LEN,
};
use crate::options::{self, Options, ALIGN};
use crate::read::{open_regular, Index};
use flist::atomic::{Output, Replace};
use rustix::fs::{Mode, OFlags};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
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
    /// The final path.
    path: PathBuf,
    /// The file written: the temporary of a new aggregate, else `path`.
    write_path: PathBuf,
    /// Rank 0's hold on the file (footer, trailer, publishing, clean-up); `None` elsewhere.
    control: Option<Control>,
    version: u64,
    chunk_size: u64,
    /// The file's format version (the header's): how piece checksums are computed, and
    /// whether a piece whose checksum equals the previous version's is compared byte by byte.
    format: u32,
    /// The file open for reading, to compare a piece with the previous version's (a new
    /// version of a file of format 2 and later); `None` for a new aggregate.
    prev_file: Option<File>,
    /// File length after the previous version's trailer (0 for version 1).
    prev_end: u64,
    region_offset: u64,
    /// The previous version's pieces, by stream name (empty for version 1).
    prev: HashMap<Vec<u8>, Arc<Vec<Piece>>>,
    data: DataFile,
    /// The chunk being filled.
    chunk: AlignedBuf,
    /// Bytes of the current chunk filled (in `chunk`, or written past it: see `flushed`).
    fill: usize,
    /// Bytes of the current chunk already in the file: with buffered writes, a run of at
    /// least [`PASS_THROUGH`] bytes goes from the caller's memory straight to the file (after
    /// the bytes gathered before it), not through `chunk`; `chunk` holds bytes
    /// `flushed..fill`. Always 0 with `O_DIRECT` (whose writes are whole aligned chunks).
    flushed: usize,
    /// This rank's chunks written so far (the row of the chunk being filled).
    row: u64,
    /// A piece buffer, lent to the open [`Writer`].
    piece: Vec<u8>,
    /// The previous version's piece read back to compare ([`Aggregate::same_bytes`]).
    piece_read: Vec<u8>,
    names: HashSet<Vec<u8>>,
    /// The streams this rank finished, encoded as in a footer (the message for rank 0 at
    /// close; no entry kept apart per stream).
    streams: Vec<u8>,
    /// Buffers lent to the open [`Writer`] for its name, meta and piece list, kept between
    /// streams so that a small stream allocates (almost) nothing.
    spare: Spare,
    bytes_written: u64,
    chunks_written: u64,
    chunks_reused: u64,
    /// The first error met where it could not be returned (a writer dropped unfinished, a
    /// failed chunk write): [`Aggregate::close`] fails with it.
    failed: Option<String>,
}

/// A [`Writer`]'s buffers, lent by its aggregate.
#[derive(Default)]
struct Spare {
    name: Vec<u8>,
    meta: Vec<u8>,
    pieces: Vec<Piece>,
}

/// Rank 0's hold on the aggregate's file.
enum Control {
    /// A new aggregate's temporary (removed when dropped unpublished).
    New { output: Output, replace: Replace },
    /// An existing aggregate, open read-write: truncated back to `prev_end` when the version
    /// fails.
    Next { file: File, armed: bool },
}

/// Where a piece's bytes went so far.
#[derive(Clone, Copy, Default)]
struct Run {
    extents: [Extent; 2],
    count: u8,
    /// Bytes (the sum of the extents).
    len: u64,
}

/// A piece being written straight into chunks (nothing in the previous version to compare
/// it with): its extents so far and its running digest.
struct Placed {
    run: Run,
    hasher: PieceHasher,
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

/// A little-endian message between ranks (the outcome of a collective step).
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn u64(mut self, v: u64) -> Msg {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(self, b: &[u8]) -> Msg {
        let mut m = self.u64(b.len() as u64);
        m.0.extend_from_slice(b);
        m
    }
}

/// Reads a [`Msg`]. Messages come from this very code on another rank: a short one is a bug.
struct MsgReader<'a>(&'a [u8]);

impl<'a> MsgReader<'a> {
    fn u64(&mut self) -> u64 {
        let (v, rest) = self.0.split_at(8);
        self.0 = rest;
        u64::from_le_bytes(v.try_into().expect("8 bytes"))
    }
    fn bytes(&mut self) -> &'a [u8] {
        let n = self.u64() as usize;
        let (v, rest) = self.0.split_at(n);
        self.0 = rest;
        v
    }
}

/// One outcome for a step every rank ran on its own: `Ok` everywhere, or every rank fails with
/// the lowest failed rank's error (its own error on that rank, [`Error::OtherRank`] elsewhere).
fn agree<T>(comm: &dyn Comm, local: Result<T>) -> Result<T> {
    let mine = match &local {
        Ok(_) => Vec::new(),
        Err(e) => [b"!".as_slice(), e.to_string().as_bytes()].concat(),
    };
    let all = comm.allgatherv(&mine);
    match all.iter().position(|m| !m.is_empty()) {
        None => local,
        Some(r) if r == comm.rank() => local,
        Some(r) => Err(Error::OtherRank {
            rank: r,
            message: String::from_utf8_lossy(&all[r][1..]).into_owned(),
        }),
    }
}

/// Rank 0's `produce()` on every rank, as bytes; its error becomes every rank's.
fn from_root(comm: &dyn Comm, produce: impl FnOnce() -> Result<Vec<u8>>) -> Result<Vec<u8>> {
    let mut mine = Vec::new();
    let mut local = Ok(());
    if comm.rank() == 0 {
        match produce() {
            Ok(b) => mine = [b"+".as_slice(), &b].concat(),
            Err(e) => {
                // A failure rank 0 learnt of from another rank is told as that rank's.
                let (rank, message) = match &e {
                    Error::OtherRank { rank, message } => (*rank as u64, message.clone()),
                    e => (0, e.to_string()),
                };
                mine = Msg(b"!".to_vec()).u64(rank).bytes(message.as_bytes()).0;
                local = Err(e);
            }
        }
    }
    comm.bcast(0, &mut mine);
    match (mine.first(), local) {
        (_, Err(e)) => Err(e),
        (Some(b'+'), _) => Ok(mine.split_off(1)),
        _ => {
            let mut m = MsgReader(&mine[1..]);
            Err(Error::OtherRank {
                rank: m.u64() as usize,
                message: String::from_utf8_lossy(m.bytes()).into_owned(),
            })
        }
    }
}

/// Bytes from which a run of a stream going into one chunk is written from the caller's
/// memory with buffered writes (not copied into the chunk buffer first): 64 KiB. Smaller runs
/// are gathered, so that many small streams cost one write a chunk, not one each.
const PASS_THROUGH: usize = 64 << 10;

/// An [`Error::Io`] from a step of flist's [`Output`].
fn output_error(e: flist::atomic::OutputError) -> Error {
    use flist::atomic::Step;
    let op = match e.step {
        Step::OpenDir => "open directory",
        Step::Create => "create temporary",
        Step::Sync => "sync",
        Step::Rename => "rename into place",
        Step::SyncDir => "sync directory",
        Step::Remove => "remove temporary",
        _ => "write temporary",
    };
    Error::io(path_of(&e.path), op, e.source)
}

fn path_of(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// Open the data descriptor of `path` (never through a symbolic link) and check that it is
/// the file `id` (device, inode) rank 0 made or opened.
fn open_checked(path: &Path, direct: bool, id: (u64, u64)) -> Result<DataFile> {
    let data = open_data(direct, |flags| {
        Ok(rustix::fs::open(path, flags, Mode::empty())?)
    })
    .map_err(|e| Error::io(path, "open for writing", e))?;
    let got = flist::atomic::identity(rustix::fd::AsFd::as_fd(&data.file))
        .map_err(|e| Error::io(path, "stat", e))?;
    if got != id {
        return Err(Error::Refused {
            path: path.into(),
            why: "not the file rank 0 opened (replaced meanwhile): not written".into(),
        });
    }
    Ok(data)
}

/// `path` open for reading (never through a symbolic link), checked to be the file `id`
/// (device, inode) rank 0 opened.
fn open_reading(path: &Path, id: (u64, u64)) -> Result<File> {
    let (file, st) = open_regular(path, OFlags::RDONLY)?;
    if (st.st_dev, st.st_ino) != id {
        return Err(Error::Refused {
            path: path.into(),
            why: "not the file rank 0 opened (replaced meanwhile): not written".into(),
        });
    }
    Ok(file)
}

/// Rank 0's side of [`Aggregate::create`]: the temporary, made and with its header.
fn make_temporary(path: &Path, options: &Options, chunk: u64, ranks: u32) -> Result<Output> {
    let bytes = path.as_os_str().as_bytes();
    if !options.overwrite && std::fs::symlink_metadata(path).is_ok() {
        return Err(Error::Refused {
            path: path.into(),
            why: "already exists (not replaced without overwrite)".into(),
        });
    }
    let dir = options::parent(path);
    let on_lustre = lustre_sys::is_lustre(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })
    .unwrap_or(false);
    let made = if on_lustre {
        // One stripe per chunk, over all OSTs (lustre-sys's archive policy).
        let dir_fd = flist::atomic::open_parent(bytes).map_err(|e| Error::io(dir, "open", e))?;
        let base = flist::path::basename(bytes);
        // Lustre's stripe size is a multiple of 64 KiB of at most 4 MiB: the policy's (the
        // chunk size itself with the default chunk size, chunk_size_policy's).
        let (count, size) =
            match lustre_sys::archive_layout(&lustre_sys::Overrides::default(), chunk) {
                lustre_sys::Decision::Set { count, size } => (count, size),
                lustre_sys::Decision::Inherit => (0, 0),
            };
        let mode = options.mode;
        Output::in_dir_with(
            rustix::fd::AsFd::as_fd(&dir_fd),
            dir.as_os_str().as_bytes(),
            base,
            None,
            |d, name| {
                let name = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
                let flags = libc::O_EXCL | libc::O_NOFOLLOW;
                lustre_sys::api::create_striped_with(d, &name, flags, mode, count, size)
                    .map(|c| c.fd)
            },
        )
    } else {
        Output::beside(bytes, options.mode)
    };
    let (output, _stale) = made.map_err(output_error)?;
    let header = Header {
        chunk_size: chunk,
        ranks,
        format: FORMAT,
    };
    let file = output.file().expect("a file output has a file");
    file.write_all_at(&header.encode(), 0)
        .map_err(|e| Error::io(path_of(output.path()), "write header", e))?;
    Ok(output)
}

impl<'c> Aggregate<'c> {
    /// Start a new aggregate at `path` (collective: every rank of `comm` calls it with the
    /// same arguments). Rank 0 creates a temporary file beside `path` (new, never following a
    /// symbolic link; on Lustre striped over all OSTs with the chunk size as stripe size) and
    /// writes the header; the other ranks open that temporary. It becomes `path` at
    /// [`close`](Aggregate::close). A failure on any rank fails every rank.
    pub fn create(comm: &'c dyn Comm, path: &Path, options: &Options) -> Result<Aggregate<'c>> {
        let mut output = None;
        let shared = from_root(comm, || {
            let chunk = options::chunk_size_for(path, options)?;
            let out = make_temporary(path, options, chunk, comm.size() as u32)?;
            let (dev, ino) = out
                .identity()
                .map_err(|e| Error::io(path_of(out.path()), "stat", e))?;
            let msg = Msg::default()
                .u64(chunk)
                .u64(dev)
                .u64(ino)
                .bytes(out.path());
            output = Some(out);
            Ok(msg.0)
        })?;
        let mut m = MsgReader(&shared);
        let (chunk, dev, ino) = (m.u64(), m.u64(), m.u64());
        let write_path = path_of(m.bytes());
        let data = agree(
            comm,
            open_checked(&write_path, options.direct_io, (dev, ino)),
        )?;
        let replace = if options.overwrite {
            Replace::Overwrite
        } else {
            Replace::NoReplace
        };
        let control = output.map(|output| Control::New { output, replace });
        Ok(Aggregate::start(
            comm,
            path,
            write_path,
            control,
            data,
            (chunk, FORMAT),
            1,
            0,
            HashMap::new(),
            None,
        ))
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
        let mut control = None;
        let shared = from_root(comm, || {
            let (file, st) = open_regular(path, OFlags::RDWR)?;
            if st.st_nlink != 1 {
                return Err(Error::Refused {
                    path: path.into(),
                    why: format!(
                        "has {} hard links: no version appended (the other names would change \
                         too)",
                        st.st_nlink
                    ),
                });
            }
            let len = st.st_size as u64;
            let index = Index::load(
                file.try_clone().map_err(|e| Error::io(path, "dup", e))?,
                path,
                len,
            )?;
            let mut footer = Vec::new();
            for s in &index.latest_footer().streams {
                encode_stream(s, &mut footer);
            }
            let msg = Msg::default()
                .u64(index.chunk_size())
                .u64(index.format().into())
                .u64(len)
                .u64(index.latest() + 1)
                .u64(st.st_dev)
                .u64(st.st_ino)
                .bytes(&footer);
            control = Some(Control::Next { file, armed: true });
            Ok(msg.0)
        })?;
        let mut m = MsgReader(&shared);
        let (chunk, format) = (m.u64(), m.u64() as u32);
        let (prev_end, version) = (m.u64(), m.u64());
        let id = (m.u64(), m.u64());
        let prev = decode_streams(m.bytes(), chunk)
            .map(|streams| {
                streams
                    .into_iter()
                    .map(|s| (s.name, Arc::new(s.pieces)))
                    .collect::<HashMap<_, _>>()
            })
            .map_err(|what| Error::corrupt(path, what));
        let opened = prev.and_then(|p| {
            let data = open_checked(path, options.direct_io, id)?;
            // Format 2's checksums are no digests: a piece whose checksum matches is compared
            // with the previous version's bytes, read through this descriptor.
            let read = match format {
                1 => None,
                _ => Some(open_reading(path, id)?),
            };
            Ok((p, data, read))
        });
        let (prev, data, prev_file) = agree(comm, opened)?;
        let agg = Aggregate::start(
            comm,
            path,
            path.to_path_buf(),
            control,
            data,
            (chunk, format),
            version,
            prev_end,
            prev,
            prev_file,
        );
        Ok(agg)
    }

    #[allow(clippy::too_many_arguments)]
    fn start(
        comm: &'c dyn Comm,
        path: &Path,
        write_path: PathBuf,
        control: Option<Control>,
        data: DataFile,
        (chunk_size, format): (u64, u32),
        version: u64,
        prev_end: u64,
        prev: HashMap<Vec<u8>, Arc<Vec<Piece>>>,
        prev_file: Option<File>,
    ) -> Aggregate<'c> {
        // Version 1's region starts at the first chunk boundary after the header.
        let region_offset = prev_end.max(HEADER_LEN).next_multiple_of(chunk_size);
        Aggregate {
            comm,
            path: path.to_path_buf(),
            write_path,
            control,
            version,
            chunk_size,
            format,
            prev_file,
            prev_end,
            region_offset,
            prev,
            data,
            chunk: AlignedBuf::new(chunk_size as usize),
            fill: 0,
            flushed: 0,
            row: 0,
            piece: Vec::new(),
            piece_read: Vec::new(),
            names: HashSet::new(),
            streams: Vec::new(),
            spare: Spare::default(),
            bytes_written: 0,
            chunks_written: 0,
            chunks_reused: 0,
            failed: None,
        }
    }

    /// The version being written (1 for a new aggregate).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The chunk size (bytes).
    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
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
        if name.len() > u32::MAX as usize || meta.len() > u32::MAX as usize {
            return Err(Error::Options(format!(
                "stream {}: name or meta longer than 4 GiB",
                shown(&name[..name.len().min(64)])
            )));
        }
        if !self.names.insert(name.to_vec()) {
            let r = self.comm.rank();
            return Err(Error::DuplicateStream {
                path: self.path.clone(),
                name: name.to_vec(),
                ranks: (r, r),
            });
        }
        let prev = self.prev.get(name).cloned();
        let mut piece = std::mem::take(&mut self.piece);
        piece.clear();
        let Spare {
            name: mut name_buf,
            meta: mut meta_buf,
            mut pieces,
        } = std::mem::take(&mut self.spare);
        name_buf.clear();
        name_buf.extend_from_slice(name);
        meta_buf.clear();
        meta_buf.extend_from_slice(meta);
        pieces.clear();
        Ok(Writer {
            agg: self,
            name: name_buf,
            meta: meta_buf,
            prev,
            piece,
            placed: None,
            pieces,
            size: 0,
            staging: Vec::new(),
            done: false,
        })
    }

    /// Write `data` as the whole stream `name` (`stream`, `append`, `finish` in one call).
    pub fn write_stream(&mut self, name: &[u8], meta: &[u8], data: &[u8]) -> Result<()> {
        let mut w = self.stream(name, meta)?;
        w.append(data)?;
        w.finish()
    }

    /// File offset of this rank's chunk in row `row` (bytes).
    fn slot(&self, row: u64) -> u64 {
        let ranks = self.comm.size() as u64;
        self.region_offset + (row * ranks + self.comm.rank() as u64) * self.chunk_size
    }

    /// Whether the previous version's piece `p`, whose length and checksum equal those of
    /// `bytes`, holds `bytes`. In format 1 the checksum is a BLAKE3 digest: equal digests are
    /// equal bytes. From format 2 on it is a check against damage only (anyone can make two
    /// pieces with one XXH3): the piece is read back and compared, so an old chunk is never
    /// referenced for new bytes that differ from it.
    fn same_bytes(&mut self, p: &Piece, bytes: &[u8]) -> Result<bool> {
        let Some(file) = &self.prev_file else {
            return Ok(true);
        };
        let mut at = 0usize;
        let mut old = std::mem::take(&mut self.piece_read);
        old.resize(bytes.len(), 0);
        for e in p.extents() {
            let to = &mut old[at..at + e.len as usize];
            if let Err(err) = file.read_exact_at(to, e.file_offset) {
                self.piece_read = old;
                return Err(Error::io(
                    &self.path,
                    format!(
                        "read the previous version's chunk to compare ({} bytes at {})",
                        e.len, e.file_offset
                    ),
                    err,
                ));
            }
            at += e.len as usize;
        }
        let same = old == bytes;
        self.piece_read = old;
        Ok(same)
    }

    /// Remember the first error that could not be returned where it happened.
    fn fail(&mut self, e: &Error) {
        if self.failed.is_none() {
            self.failed = Some(e.to_string());
        }
    }

    /// Copy `bytes` into the chunk buffer, writing each chunk that fills up, and add the runs
    /// they landed in to `run` (a piece's extents so far: a piece of at most a chunk spans at
    /// most two chunks, so at most two extents).
    fn place(&mut self, bytes: &[u8], run: &mut Run) -> Result<()> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = rest.len().min(self.chunk_size as usize - self.fill);
            let at = self.slot(self.row) + self.fill as u64;
            if n >= PASS_THROUGH && !self.data.direct {
                // Large: written from the caller's bytes (one copy, the kernel's), after
                // what was gathered before them.
                self.flush(self.fill)?;
                let written = self.data.write_at(&rest[..n], at);
                self.check_write(written, n, at)?;
                self.flushed = self.fill + n;
            } else {
                self.chunk.bytes_mut()[self.fill..self.fill + n].copy_from_slice(&rest[..n]);
            }
            match run.count {
                // Contiguous with the piece's last extent (the same chunk): one extent.
                c if c > 0 && run.extents[c as usize - 1].end() == at => {
                    run.extents[c as usize - 1].len += n as u64;
                }
                c => {
                    assert!(c < 2, "a piece spans at most two chunks");
                    run.extents[c as usize] = Extent {
                        file_offset: at,
                        len: n as u64,
                    };
                    run.count += 1;
                }
            }
            run.len += n as u64;
            self.fill += n;
            self.bytes_written += n as u64;
            rest = &rest[n..];
            if self.fill == self.chunk_size as usize {
                self.write_chunk(self.chunk_size as usize)?;
            }
        }
        Ok(())
    }

    /// Write the current chunk's first `len` bytes (a multiple of [`ALIGN`] with
    /// `O_DIRECT`) to this rank's slot of the current row (those not written yet), and start
    /// the next row.
    fn write_chunk(&mut self, len: usize) -> Result<()> {
        let flushed = self.flush(len);
        self.fill = 0;
        self.flushed = 0;
        self.row += 1;
        flushed
    }

    /// Write the chunk buffer's bytes `flushed..end` to their place in the current slot.
    fn flush(&mut self, end: usize) -> Result<()> {
        let from = self.flushed;
        if end <= from {
            return Ok(());
        }
        let at = self.slot(self.row) + from as u64;
        let written = self.data.write_at(&self.chunk.bytes()[from..end], at);
        self.flushed = end;
        self.check_write(written, end - from, at)
    }

    /// A chunk write's outcome as this crate's error (remembered for the close).
    fn check_write(&mut self, written: std::io::Result<()>, len: usize, at: u64) -> Result<()> {
        written.map_err(|e| {
            let e = Error::io(
                &self.write_path,
                format!("write chunk ({len} bytes at {at})"),
                e,
            );
            self.fail(&e);
            e
        })
    }

    /// This rank's part of closing: its last chunk written (zero padded to [`ALIGN`]) and its
    /// data synced; then its message for rank 0.
    fn finish_rank(&mut self) -> Result<Vec<u8>> {
        if self.fill > 0 {
            let len = (self.fill as u64).next_multiple_of(ALIGN) as usize;
            let fill = self.fill;
            self.chunk.bytes_mut()[fill..len].fill(0);
            self.write_chunk(len)?;
        }
        self.data
            .file
            .sync_all()
            .map_err(|e| Error::io(&self.write_path, "sync", e))?;
        if let Some(why) = &self.failed {
            return Err(Error::OtherRank {
                rank: self.comm.rank(),
                message: why.clone(),
            });
        }
        let streams = std::mem::take(&mut self.streams);
        let msg = Msg::default()
            .u64(self.row)
            .u64(self.bytes_written)
            .u64(self.chunks_written)
            .u64(self.chunks_reused)
            .u64(u64::from(self.data.direct))
            .bytes(self.data.fallback.as_deref().unwrap_or("").as_bytes())
            .bytes(&streams);
        Ok(msg.0)
    }

    /// Give up this version (collective: every rank calls it, or drops the aggregate): a new
    /// aggregate's temporary is removed (nothing appears at the path); a new version is cut off
    /// (rank 0 truncates the file back to the previous trailer, which is again the file's
    /// end). Returns the first error met while cleaning up, if any.
    pub fn abort(mut self) -> Result<()> {
        // Every rank has stopped writing before rank 0 cuts anything.
        self.comm.barrier();
        let local = self.clean_up();
        agree(self.comm, local)
    }

    /// Rank 0: undo an unfinished version (the temporary removed / the file truncated back).
    fn clean_up(&mut self) -> Result<()> {
        match self.control.take() {
            Some(Control::New { output, .. }) => output.discard().map_err(output_error),
            Some(Control::Next { file, armed: true }) => file
                .set_len(self.prev_end)
                .and_then(|()| file.sync_all())
                .map_err(|e| {
                    Error::io(
                        &self.path,
                        format!("cut the unfinished version back to {} bytes", self.prev_end),
                        e,
                    )
                }),
            _ => Ok(()),
        }
    }

    /// Complete the version (collective): each rank writes its last chunk and syncs; rank 0
    /// gathers every rank's index, refuses names written twice, writes the footer and the
    /// trailer, syncs, and (new aggregate) renames the temporary to the final path and syncs
    /// the directory. A failure on any rank fails every rank, with nothing left that looks
    /// complete.
    pub fn close(mut self) -> Result<Written> {
        let local = self.finish_rank();
        let mine = match &local {
            Ok(m) => [b"+".as_slice(), m].concat(),
            Err(e) => [b"!".as_slice(), e.to_string().as_bytes()].concat(),
        };
        let mut sends = vec![Vec::new(); self.comm.size()];
        sends[0] = mine;
        let got = self.comm.alltoallv(sends);
        let mut root_error = None;
        let outcome = from_root(self.comm, || {
            let r = self.conclude(&got);
            if r.is_err() {
                // Undone before any rank returns: nothing unfinished outlives the call.
                if let Err(e) = self.clean_up() {
                    root_error = Some(e);
                }
            }
            r
        });
        let rank_bytes_written = self.bytes_written;
        match (outcome, local) {
            (Ok(b), Ok(_)) => {
                let mut m = MsgReader(&b);
                let mut w = Written {
                    version: self.version,
                    streams: m.u64(),
                    logical_bytes: m.u64(),
                    bytes_written: m.u64(),
                    rank_bytes_written,
                    chunks_written: m.u64(),
                    chunks_reused: m.u64(),
                    index_bytes: m.u64(),
                    file_len: m.u64(),
                    chunk_size: self.chunk_size,
                    direct_io: m.u64() != 0,
                    direct_io_fallback: None,
                };
                let why = m.bytes();
                if !why.is_empty() {
                    w.direct_io_fallback = Some(String::from_utf8_lossy(why).into_owned());
                }
                Ok(w)
            }
            // This rank's own failure, as it is.
            (_, Err(e)) => Err(e),
            (Err(e), Ok(_)) => Err(root_error.unwrap_or(e)),
        }
    }

    /// Rank 0: from every rank's message, the footer and trailer written and synced, the
    /// aggregate published; the outcome's bytes for every rank.
    fn conclude(&mut self, got: &[Vec<u8>]) -> Result<Vec<u8>> {
        if let Some(r) = got.iter().position(|m| m.first() != Some(&b'+')) {
            return Err(Error::OtherRank {
                rank: r,
                message: String::from_utf8_lossy(got[r].get(1..).unwrap_or(b"")).into_owned(),
            });
        }
        let ranks = got.len() as u64;
        let mut f = Footer {
            version: self.version,
            prev_end: self.prev_end,
            region_offset: self.region_offset,
            ranks: ranks as u32,
            ..Footer::default()
        };
        let (mut rows, mut direct, mut fallback) = (0u64, true, String::new());
        for (r, m) in got.iter().enumerate() {
            let mut m = MsgReader(&m[1..]);
            rows = rows.max(m.u64());
            f.bytes_written += m.u64();
            f.chunks_written += m.u64();
            f.chunks_reused += m.u64();
            direct &= m.u64() != 0;
            let why = m.bytes();
            if fallback.is_empty() && !why.is_empty() {
                fallback = format!("rank {r}: {}", String::from_utf8_lossy(why));
            }
            let streams = decode_streams(m.bytes(), self.chunk_size)
                .map_err(|what| Error::corrupt(&self.write_path, format!("rank {r}: {what}")))?;
            f.streams.extend(streams);
        }
        f.streams.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = f.streams.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(Error::DuplicateStream {
                path: self.path.clone(),
                name: w[0].name.clone(),
                ranks: (w[0].rank as usize, w[1].rank as usize),
            });
        }
        f.logical_bytes = f.streams.iter().map(|s| s.size).sum();
        f.region_len = rows * ranks * self.chunk_size;
        let footer = f.encode();
        let footer_offset = f.region_offset + f.region_len;
        let trailer = Trailer {
            format: self.format,
            version: self.version,
            footer_offset,
            footer_len: footer.len() as u64,
            footer_checksum: format::digest(&footer),
            prev_end: self.prev_end,
            summary: f.summary(),
        };
        let end = footer_offset + footer.len() as u64 + TRAILER_LEN;
        self.publish(
            &[footer.as_slice(), &trailer.encode()].concat(),
            footer_offset,
        )?;
        let msg = Msg::default()
            .u64(f.streams.len() as u64)
            .u64(f.logical_bytes)
            .u64(f.bytes_written)
            .u64(f.chunks_written)
            .u64(f.chunks_reused)
            .u64(footer.len() as u64 + TRAILER_LEN)
            .u64(end)
            .u64(u64::from(direct))
            .bytes(fallback.as_bytes());
        Ok(msg.0)
    }

    /// Rank 0: write `index` (footer and trailer) at `offset`, sync, and make the version
    /// visible (a new aggregate renamed to its final path, its directory synced).
    fn publish(&mut self, index: &[u8], offset: u64) -> Result<()> {
        let write_path = self.write_path.clone();
        let wrote = |file: &File| {
            file.write_all_at(index, offset)
                .map_err(|e| Error::io(&write_path, format!("write footer at {offset}"), e))?;
            file.sync_all()
                .map_err(|e| Error::io(&write_path, "sync footer", e))
        };
        match self.control.take() {
            Some(Control::New { output, replace }) => {
                let r = wrote(output.file().expect("a file output has a file"));
                if let Err(e) = r {
                    self.control = Some(Control::New { output, replace });
                    return Err(e);
                }
                output.publish(replace).map_err(|e| match replace {
                    Replace::NoReplace if e.source.kind() == std::io::ErrorKind::AlreadyExists => {
                        Error::Refused {
                            path: self.path.clone(),
                            why: "already exists (not replaced without overwrite): the \
                                  aggregate was not kept"
                                .into(),
                        }
                    }
                    _ => output_error(e),
                })
            }
            Some(Control::Next { file, .. }) => {
                let r = wrote(&file);
                self.control = Some(Control::Next {
                    file,
                    armed: r.is_err(),
                });
                r
            }
            None => unreachable!("rank 0 holds the aggregate's file"),
        }
    }
}

impl Drop for Aggregate<'_> {
    /// Unclosed: rank 0 undoes the version (the temporary removed, or the file truncated back
    /// to the previous trailer). Other ranks may still be writing: an aggregate should be
    /// dropped (or [`Aggregate::abort`]ed) by every rank, on an error path.
    fn drop(&mut self) {
        let _ = self.clean_up();
    }
}

/// One stream being written by one rank ([`Aggregate::stream`]). Dropped unfinished, it is
/// finished as by [`Writer::finish`], an error then failing [`Aggregate::close`].
pub struct Writer<'a, 'c> {
    agg: &'a mut Aggregate<'c>,
    name: Vec<u8>,
    meta: Vec<u8>,
    /// The previous version's pieces of this stream.
    prev: Option<Arc<Vec<Piece>>>,
    /// The piece being gathered to be compared with the previous version's (less than a
    /// chunk).
    piece: Vec<u8>,
    /// Or the piece being placed as it comes (no previous piece at its offset).
    placed: Option<Placed>,
    pieces: Vec<Piece>,
    /// Bytes appended.
    size: u64,
    staging: Vec<u8>,
    done: bool,
}

impl Writer<'_, '_> {
    /// The stream's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Bytes appended so far.
    pub fn len(&self) -> u64 {
        self.size + self.pending()
    }

    /// Bytes of the piece being gathered or placed.
    fn pending(&self) -> u64 {
        self.piece.len() as u64 + self.placed.as_ref().map_or(0, |p| p.run.len)
    }

    /// Whether the previous version has a piece where the current one begins (so the current
    /// one is held and compared before it is written).
    fn compared(&self) -> bool {
        let i = self.size / self.agg.chunk_size;
        self.prev.as_ref().is_some_and(|p| i < p.len() as u64)
    }

    /// Whether nothing was appended yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append `data` to the stream. Chunks that fill up are written (an I/O error is returned
    /// here, naming the aggregate).
    pub fn append(&mut self, mut data: &[u8]) -> Result<()> {
        let chunk = self.agg.chunk_size;
        while !data.is_empty() {
            let pending = self.pending();
            let n = (data.len() as u64).min(chunk - pending) as usize;
            let (now, rest) = data.split_at(n);
            data = rest;
            if !self.compared() {
                // Nothing to compare with: into the chunks at once, hashed on the way.
                let format = self.agg.format;
                let placed = self.placed.get_or_insert_with(|| Placed {
                    run: Run::default(),
                    hasher: PieceHasher::new(format),
                });
                placed.hasher.update(now);
                let mut run = placed.run;
                let r = self.agg.place(now, &mut run);
                let placed = self.placed.as_mut().expect("placed above");
                placed.run = run;
                r?;
                if run.len == chunk {
                    self.end_placed();
                }
            } else if pending == 0 && n as u64 == chunk {
                // A whole piece straight from the caller's bytes: no copy into `piece`.
                self.seal(now)?;
            } else {
                self.piece.extend_from_slice(now);
                if self.piece.len() as u64 == chunk {
                    let piece = std::mem::take(&mut self.piece);
                    let sealed = self.seal(&piece);
                    self.piece = piece;
                    self.piece.clear();
                    sealed?;
                }
            }
        }
        Ok(())
    }

    /// The piece being placed is complete: its entry, with its digest.
    fn end_placed(&mut self) {
        if let Some(p) = self.placed.take() {
            let Run {
                extents,
                count,
                len,
            } = p.run;
            self.pieces.push(Piece {
                logical: self.size,
                len,
                checksum: p.hasher.finalize(),
                extents,
                count,
            });
            self.size += len;
            self.agg.chunks_written += 1;
        }
    }

    /// Store the piece `bytes` (the next one of the stream): referenced when the previous
    /// version's piece at the same offset has the same bytes, else placed into chunks.
    fn seal(&mut self, bytes: &[u8]) -> Result<()> {
        let logical = self.size;
        let checksum = format::piece_checksum(self.agg.format, bytes);
        let len = bytes.len() as u64;
        let i = (logical / self.agg.chunk_size) as usize;
        let mut same = self
            .prev
            .as_ref()
            .and_then(|p| p.get(i))
            .filter(|p| p.len == len && p.checksum == checksum)
            .copied();
        if let Some(p) = same {
            if !self.agg.same_bytes(&p, bytes)? {
                same = None;
            }
        }
        let piece = match same {
            Some(p) => {
                self.agg.chunks_reused += 1;
                p
            }
            None => {
                let mut run = Run::default();
                self.agg.place(bytes, &mut run)?;
                self.agg.chunks_written += 1;
                Piece {
                    logical,
                    len,
                    checksum,
                    extents: run.extents,
                    count: run.count,
                }
            }
        };
        self.pieces.push(piece);
        self.size += len;
        Ok(())
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
        let staging = std::mem::take(&mut self.staging);
        let r = self.append(&staging[..n]);
        self.staging = staging;
        r
    }

    /// Drop the stream: it gets no entry in the index (bytes already written into chunks stay
    /// as dead bytes of the region). For a source that changed while it was read.
    pub fn abandon(mut self) {
        self.done = true;
        self.agg.names.remove(&self.name);
        self.agg.piece = std::mem::take(&mut self.piece);
        self.give_back();
    }

    /// Return the lent buffers to the aggregate, for the next stream.
    fn give_back(&mut self) {
        self.agg.spare = Spare {
            name: std::mem::take(&mut self.name),
            meta: std::mem::take(&mut self.meta),
            pieces: std::mem::take(&mut self.pieces),
        };
    }

    /// End the stream: its last piece is placed and its entry kept for the index.
    pub fn finish(mut self) -> Result<()> {
        self.end()
    }

    fn end(&mut self) -> Result<()> {
        self.done = true;
        let piece = std::mem::take(&mut self.piece);
        let sealed = if piece.is_empty() {
            Ok(())
        } else {
            self.seal(&piece)
        };
        self.agg.piece = piece;
        self.end_placed();
        if let Err(e) = sealed {
            self.agg.fail(&e);
            self.give_back();
            return Err(e);
        }
        let rank = self.agg.comm.rank() as u32;
        let (name, meta, pieces) = (&self.name, &self.meta, &self.pieces);
        encode_stream_fields(name, meta, self.size, rank, pieces, &mut self.agg.streams);
        self.give_back();
        Ok(())
    }
}

impl std::io::Write for Writer<'_, '_> {
    /// [`Writer::append`] of all of `buf` (for [`std::io::copy`] from a file, say).
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.append(buf)?;
        Ok(buf.len())
    }

    /// Nothing to do: a chunk is written when it fills, the last one at close.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Writer<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_failing_at_close_fails_every_rank_by_its_number_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pfa");
        let o = Options {
            chunk_size: Some(4096),
            ..Options::default()
        };
        let results = steal::local::run(3, |comm| {
            let mut agg = Aggregate::create(comm, &path, &o).unwrap();
            agg.write_stream(format!("{}", comm.rank()).as_bytes(), b"", b"x")
                .unwrap();
            if comm.rank() == 2 {
                // As a failed chunk write leaves it.
                agg.fail(&Error::io(
                    "/x",
                    "write chunk",
                    std::io::Error::other("disk gone"),
                ));
            }
            agg.close().expect_err("every rank fails")
        });
        for (r, e) in results.iter().enumerate() {
            assert!(e.to_string().contains("disk gone"), "rank {r}: {e}");
            if r != 2 {
                assert!(
                    matches!(e, Error::OtherRank { rank: 2, .. }),
                    "rank {r}: {e:?}"
                );
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // A new version failing so: cut back, the file as it was.
        steal::local::run(2, |comm| {
            let mut agg = Aggregate::create(comm, &path, &o).unwrap();
            agg.write_stream(format!("{}", comm.rank()).as_bytes(), b"", b"v1")
                .unwrap();
            agg.close().unwrap()
        });
        let before = std::fs::read(&path).unwrap();
        let results = steal::local::run(2, |comm| {
            let mut agg = Aggregate::new_version(comm, &path, &o).unwrap();
            let data = vec![comm.rank() as u8; 20_000];
            agg.write_stream(format!("{}", comm.rank()).as_bytes(), b"", &data)
                .unwrap();
            if comm.rank() == 1 {
                agg.fail(&Error::io(
                    "/x",
                    "write chunk",
                    std::io::Error::other("disk gone"),
                ));
            }
            agg.close().err()
        });
        assert!(matches!(results[0], Some(Error::OtherRank { rank: 1, .. })));
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(Index::open(&path).unwrap().latest(), 1);
    }

    #[test]
    fn a_checksum_match_with_other_bytes_is_written_not_referenced() {
        // Format 2's XXH3 is no digest: two pieces can share it (by chance or made so). A
        // match is compared byte by byte; here the previous version's checksums are forged
        // to match the new bytes, which differ.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pfa");
        let o = Options {
            chunk_size: Some(4096),
            ..Options::default()
        };
        let old = vec![1u8; 4096 * 2];
        let mut new = old.clone();
        new[5000] = 2;
        steal::local::run(1, |comm| {
            let mut agg = Aggregate::create(comm, &path, &o).unwrap();
            agg.write_stream(b"s", b"", &old).unwrap();
            agg.close().unwrap()
        });
        let w = steal::local::run(1, |comm| {
            let mut agg = Aggregate::new_version(comm, &path, &o).unwrap();
            assert_eq!(agg.format, 2);
            let forged: Vec<Piece> = agg.prev[b"s".as_slice()]
                .iter()
                .zip(new.chunks(4096))
                .map(|(p, b)| Piece {
                    checksum: format::piece_checksum(2, b),
                    ..*p
                })
                .collect();
            agg.prev.insert(b"s".to_vec(), Arc::new(forged));
            agg.write_stream(b"s", b"", &new).unwrap();
            agg.close().unwrap()
        });
        // The first piece is the same bytes: referenced; the second differs: written.
        assert_eq!((w[0].chunks_reused, w[0].chunks_written), (1, 1));
        let index = Index::open(&path).unwrap();
        assert_eq!(index.read_stream(b"s", 2).unwrap(), new);
        assert_eq!(index.read_stream(b"s", 1).unwrap(), old);
    }
}
