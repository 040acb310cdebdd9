//! Read and write the list files of mpiFileUtils, in parallel (`docs/formats.md` §1–3).
//!
//! - **cache v4** (the stat list): read, and written byte-identically to mpiFileUtils;
//! - **cache v3** (mpiFileUtils ≤ 0.8): read only, big-endian;
//! - **text**: typed lists (`path|T` lines; mfu-rs writes them between the header line
//!   [`TEXT_HEADER`] and a trailer line `#mfu-rs end N`, and reads `dwalk -l`'s headerless ones
//!   when told so, [`InputFormat::Typed`]), plain one-path-per-line lists and NUL-separated
//!   lists (`find -print0`): read; typed lists: written.
//!
//! [`read()`] and [`write()`] are collective: every rank calls them, each with its own share of the
//! list, and every rank gets the same `Ok` or the same `Err`. Records keep their global order:
//! rank 0 holds (or contributes) the first ones. All file access is positional (`pread`/`pwrite`
//! at `u64` offsets, in pieces of a few MiB), so lists of any size pass without a message or a
//! buffer that holds the whole list.
//!
//! ```
//! use flist::{io, Detail, FileList, FileType};
//! let dir = tempfile::tempdir().unwrap();
//! // The list file's path: a `Path` here; bytes, `OsStr` and `str` work too.
//! let file = dir.path().join("list.txt");
//! let counts = steal::local::run(2, |comm: &dyn steal::Comm| {
//!     let mut mine = FileList::new(Detail::Lite);
//!     mine.push(format!("/data/r{}", comm.rank()).as_bytes(), FileType::File, None);
//!     io::write(comm, &mine, &file, io::default_format(&mine)).unwrap();
//!     io::read(comm, file.as_os_str().as_encoded_bytes()).unwrap().len()
//! });
//! assert_eq!(counts, vec![1, 1]);
//! assert_eq!(
//!     std::fs::read(dir.path().join("list.txt")).unwrap(),
//!     b"#mfu-rs typed list v1\n/data/r0|F\n/data/r1|F\n#mfu-rs end 2\n"
//! );
//! ```

mod pipe;
mod source;
mod stream;
mod text;
mod v4;

pub use stream::{open_cache_share, write_v4_stream, CacheShare, V4Sink};

use crate::atomic::{Output, Replace, Step};
use crate::error::{Error, ItemError, Result};
use crate::ids::IdTable;
use crate::path::{as_path, PathLike};
use crate::record::{Detail, FileList};
use rustix::fs::OFlags;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use steal::{Comm, CommExt};

/// The format [`write()`] produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// mpiFileUtils cache format v4: header, user and group tables, fixed-size records with
    /// the stat metadata. Needs a [`Detail::Stat`] list. Loses nlink, inode and device.
    V4,
    /// One `path|T` line per record (`T` from [`FileType::text_letter`](crate::FileType::text_letter)),
    /// as `dwalk -l` writes, between the header line [`TEXT_HEADER`] and the trailer line
    /// `#mfu-rs end N`. Paths and types only.
    Text,
}

/// The format a list is written in when the user does not choose: [`Format::V4`] for a stat
/// list, [`Format::Text`] for a lite list.
pub fn default_format(list: &FileList) -> Format {
    match list.detail() {
        Detail::Stat => Format::V4,
        Detail::Lite => Format::Text,
    }
}

/// The first line of a typed text list as mfu-rs writes it (without its newline). A list that
/// starts with it must end with the trailer line `#mfu-rs end N` (`N` the number of entries, in
/// decimal), or it is refused as incomplete.
pub const TEXT_HEADER: &str = "#mfu-rs typed list v1";

/// The start of the last line of a typed text list, before the count of its entries.
pub const TEXT_TRAILER: &str = "#mfu-rs end ";

/// How a text list of lines is read (`--input-format`): file names can end in `|F`, so the
/// type suffix of a line is never trusted unless the list says what it is (its first line is
/// [`TEXT_HEADER`]) or the user does. Cache lists (v3/v4, by their magic) and NUL-separated
/// lists (a name cannot hold a NUL) are recognised whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputFormat {
    /// Typed (`path|T`, with trailer) when the first line is [`TEXT_HEADER`], else plain.
    #[default]
    Auto,
    /// Every line is `path|T` (split at the last `|`): `dwalk -l`'s headerless lists, and
    /// mfu-rs' own with or without header (a header still requires its trailer).
    Typed,
    /// Every whole line is a path, whatever it ends in. A list that starts with
    /// [`TEXT_HEADER`] is refused (it is typed: its lines would be read as wrong names).
    Plain,
}

/// Read the list file at `path` (any [`PathLike`]: bytes, `Path`, `OsStr`, `str`; collective),
/// its lines read as [`InputFormat::Auto`] says: see [`read_as`].
pub fn read(comm: &dyn Comm, path: impl PathLike) -> Result<FileList> {
    read_as(comm, path, InputFormat::Auto)
}

/// Read the list file at `path` (any [`PathLike`]: bytes, `Path`, `OsStr`, `str`; collective).
/// Each rank gets a contiguous share of the records, in file order (rank 0 the first ones):
/// v3/v4 records are split evenly by count, text lists by byte ranges adjusted to line (or NUL)
/// boundaries.
///
/// The format is detected from the first 8 bytes: big-endian 4 is cache v4, 3 is cache v3, any
/// other content is a text list: one path per NUL when the first 64 KiB hold a NUL byte, else
/// lines, read as `format` says ([`InputFormat`]): typed (`path|T`, split at the last `|`) when
/// the first line is [`TEXT_HEADER`] or `format` is [`InputFormat::Typed`], plain (each whole
/// line a path, of unknown type) otherwise. Empty lines are skipped.
///
/// Refused as damaged or incomplete ([`Error::BadList`]): a list with the header whose last line
/// is not the trailer `#mfu-rs end N` or whose `N` is not the number of entries read; a typed
/// list with a line that is not `path|T`; a typed list whose last line lacks its final newline;
/// a plain (or NUL) list of more than one entry whose last one lacks its final newline (or NUL),
/// as it may have been cut. v3/v4 files must have exactly the length their header describes.
/// v3/v4 give a [`Detail::Stat`] list whose `users`/`groups` tables (the same on every rank)
/// come from the file; text lists give a [`Detail::Lite`] list.
///
/// `path` `-` reads standard input on rank 0 (any of the formats above), into a temporary
/// file that rank 0 serves to the other ranks: each rank gets the share it would get from a
/// list file, and no rank holds more than its share plus a few MiB.
/// So does a `path` that names a stream rather than a file (a FIFO or a socket: the
/// `/dev/fd/63` of a shell's `-i <(cmd)`), which rank 0 must be able to open.
///
/// Errors (the same on every rank) name the file and the operation (`open list /x: ...`), or
/// are [`Error::BadList`] with the byte offset where a damaged or truncated file goes wrong.
pub fn read_as(comm: &dyn Comm, path: impl PathLike, format: InputFormat) -> Result<FileList> {
    read_bytes(comm, path.path_bytes(), format)
}

fn read_bytes(comm: &dyn Comm, path: &[u8], format: InputFormat) -> Result<FileList> {
    if path == pipe::STDIO {
        return pipe::read_stream(comm, None, format);
    }
    // A FIFO or a socket (`-i <(cmd)` names `/dev/fd/63`, a pipe) can be read once, from its
    // start: probing it and then reading parts at offsets would find it empty. Read it as a
    // stream, as standard input is.
    let stream = comm.bcast_with(0, || is_stream(path));
    if stream {
        return pipe::read_stream(comm, Some(path), format);
    }
    let plan: Result<Plan> = comm.bcast_with(0, || Plan::probe(path, format));
    let plan = plan?;
    read_planned(comm, plan, &mut source::Source::file(path))
}

/// Read this rank's share of the list `plan` describes from `src` (collective).
fn read_planned(comm: &dyn Comm, plan: Plan, src: &mut source::Source<'_>) -> Result<FileList> {
    let mut list = match plan.kind {
        Kind::V3 | Kind::V4 => {
            let layout = plan.layout.expect("a cache list has a layout");
            v4::read_records(comm, src, &layout)?
        }
        Kind::Lines | Kind::Nul => {
            let lines = plan.lines.expect("a text list has a layout");
            text::read(comm, src, &lines)?
        }
    };
    list.users = plan.users;
    list.groups = plan.groups;
    list.shrink_to_fit();
    Ok(list)
}

/// True when `path` (followed through symlinks) is a FIFO or a socket. Not a character device:
/// `/dev/zero` would be spooled without end (a terminal is read as before).
fn is_stream(path: &[u8]) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(as_path(path)).is_ok_and(|m| {
        let t = m.file_type();
        t.is_fifo() || t.is_socket()
    })
}

/// Write every rank's `list` into the one file at `path` (any [`PathLike`]; collective), rank
/// 0's records first, replacing whatever the file held.
///
/// [`Format::V4`] is byte-identical to what mpiFileUtils writes for the same records and
/// tables (rank 0's `users`/`groups` are the tables written); an empty list still gives a valid
/// file with no records. [`Format::Text`] writes the line [`TEXT_HEADER`], `path|T` lines and
/// the trailer line `#mfu-rs end N` (`N` the number of records of all ranks), so that a reader
/// knows the list is typed and whole.
///
/// `path` `-` writes the list to standard output from rank 0, in the same global order and
/// format (so `walk -o - | find -i -` keeps the metadata of a v4 list).
///
/// A regular file (or a new one) is written under a temporary name beside it
/// ([`crate::atomic::Output`]: `.NAME.HOST.PID.mfu-tmp`, with the old file's permission bits;
/// a killed earlier run's temporary of that name on this host is removed first), synced by
/// every rank and renamed over `path` once every rank has written its part: a writer that is
/// killed or fails never leaves a partial list under the list's name (the temporary file is
/// removed on failure). Anything else (a symlink, a device such as `/dev/stdout`, a FIFO) is
/// written in place.
///
/// Returns [`Error::Invalid`] (on every rank, before the file is touched) for what the format
/// cannot hold: a [`Detail::Lite`] list as V4, an empty path, a path with a NUL byte, or a path
/// with a newline in a text list.
pub fn write(comm: &dyn Comm, list: &FileList, path: impl PathLike, format: Format) -> Result<()> {
    write_bytes(comm, list, path.path_bytes(), format)
}

fn write_bytes(comm: &dyn Comm, list: &FileList, path: &[u8], format: Format) -> Result<()> {
    if path == pipe::STDIO {
        return pipe::write_stdout(comm, list, format);
    }
    write_staged(comm, path, |dest| match format {
        Format::V4 => v4::write(comm, list, dest),
        Format::Text => text::write(comm, list, dest),
    })
}

/// Write a list to `path` (not `-`) with `write` (collective): a regular file (or a new one)
/// under a temporary name beside it, renamed over `path` once every rank's `write` succeeded
/// (see [`write()`]); anything else in place.
fn write_staged(
    comm: &dyn Comm,
    path: &[u8],
    write: impl FnOnce(Dest<'_>) -> Result<()>,
) -> Result<()> {
    let mut output = None;
    let staged: Result<Option<Staged>> = comm.bcast_with(0, || {
        output = stage(path)?;
        match &output {
            None => Ok(None),
            Some(out) => {
                let id = out
                    .identity()
                    .map_err(|e| ItemError::new(out.path(), OP_STAT, e))?;
                Ok(Some((out.path().to_vec(), id)))
            }
        }
    });
    let staged = staged?;
    let dest = match &staged {
        Some((temp, id)) => Dest {
            path: temp,
            temp: Some(*id),
        },
        None => Dest { path, temp: None },
    };
    let written = write(dest);
    let Some((temp, _)) = staged else {
        return written;
    };
    let written = written.map_err(|e| pipe::rename(e, &temp, path));
    // Every rank knows the outcome of the writes (they agreed); rank 0 publishes (or drops
    // the output unpublished, which removes the temporary).
    let published: Result<()> = comm.bcast_with(0, || match (&written, output.take()) {
        (Ok(()), Some(out)) => out.publish(Replace::Overwrite).map_err(|e| {
            let op = match e.step {
                Step::Sync => OP_SYNC,
                Step::SyncDir => OP_SYNC_DIR,
                _ => OP_RENAME,
            };
            ItemError::new(path, op, e.source).into()
        }),
        _ => Ok(()),
    });
    published?;
    written
}

/// Rank 0's temporary for a list: its path and (device, inode).
type Staged = (Vec<u8>, (u64, u64));

/// Rank 0, before a list is written to `path`: create the temporary file it is written under
/// (`Some`), or `None` when `path` is not a regular file and is written in place.
fn stage(path: &[u8]) -> Result<Option<Output>> {
    use std::os::unix::fs::PermissionsExt;
    let mode = match std::fs::symlink_metadata(as_path(path)) {
        Ok(m) if m.file_type().is_file() => m.permissions().mode() & 0o7777,
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0o666,
        Err(e) => return Err(ItemError::new(path, OP_STAT, e).into()),
    };
    // New, never through a symlink or into a file planted at the (predictable) name.
    let (out, _stale) =
        Output::beside(path, mode).map_err(|e| ItemError::new(&e.path, OP_CREATE, e.source))?;
    // The mode of `open` is cut by the umask; an existing list keeps its own bits.
    if mode != 0o666 {
        if let Some(file) = out.file() {
            let _ = file.set_permissions(std::fs::Permissions::from_mode(mode));
        }
    }
    Ok(Some(out))
}

/// Where the ranks write a list: the user's path itself (a symlink, a device, a FIFO: in
/// place), or the temporary of rank 0's [`Output`], which every rank opens without following a
/// symlink, checks is rank 0's (device, inode), and syncs once its part is written.
#[derive(Clone, Copy)]
struct Dest<'a> {
    path: &'a [u8],
    temp: Option<(u64, u64)>,
}

/// Bytes rank 0 reads at the start of a list to recognise its format.
const PROBE_BYTES: u64 = 64 << 10;

/// Bytes moved per positional read or write (records are batched up to about this size).
const IO_CHUNK: usize = 4 << 20;

// Operations named in errors (`open list /x: ...`).
pub(crate) const OP_OPEN: &str = "open list";
pub(crate) const OP_STAT: &str = "stat list";
pub(crate) const OP_READ: &str = "read list";
pub(crate) const OP_CREATE: &str = "create list";
pub(crate) const OP_WRITE: &str = "write list";
pub(crate) const OP_RENAME: &str = "rename list into place";
pub(crate) const OP_SYNC: &str = "sync list";
pub(crate) const OP_SYNC_DIR: &str = "sync the directory of list";

/// What kind of list a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Kind {
    V3,
    V4,
    /// Text, one record per `\n`.
    Lines,
    /// Text, one record per NUL byte.
    Nul,
}

/// What rank 0 learned about a list file, sent to every rank.
#[derive(Debug, Serialize, Deserialize)]
struct Plan {
    kind: Kind,
    /// File length in bytes.
    len: u64,
    /// Header of a v3/v4 file.
    layout: Option<v4::Layout>,
    /// Where the records of a text list are and how they are read.
    lines: Option<text::Layout>,
    users: IdTable,
    groups: IdTable,
}

impl Plan {
    /// Open `path`, recognise its format and, for v3/v4, check its header against its length and
    /// read its tables. Run on rank 0 only.
    fn probe(path: &[u8], format: InputFormat) -> Result<Plan> {
        let file = open_read(path)?;
        let len = file
            .metadata()
            .map_err(|e| ItemError::new(path, OP_STAT, e))?
            .len();
        let mut prefix = vec![0u8; len.min(PROBE_BYTES) as usize];
        read_exact_at(&file, path, &mut prefix, 0)?;
        let version = prefix
            .get(..8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")));
        let kind = match version {
            Some(4) => Kind::V4,
            Some(3) => Kind::V3,
            // Seven zero bytes then a small number: an mpiFileUtils header of a version we do
            // not read (v2 lite lists). Reading it as NUL-separated text would give garbage.
            Some(v @ 1..=255) => {
                return Err(bad(path, format!("unsupported list format version {v} at byte offset 0 (mfu-rs reads versions 3 and 4, and text lists)")))
            }
            // Fewer than 8 bytes, all NUL: the start of a cache header, cut (a NUL list
            // begins with a path).
            None if !prefix.is_empty() && prefix.iter().all(|&b| b == 0) => {
                return Err(bad(path, format!("truncated at byte offset {len}: the start of a cache list header (8 bytes of version)")))
            }
            _ if prefix.contains(&0) => Kind::Nul,
            _ => Kind::Lines,
        };
        let mut plan = Plan {
            kind,
            len,
            layout: None,
            lines: None,
            users: IdTable::default(),
            groups: IdTable::default(),
        };
        match kind {
            Kind::Lines => {
                plan.lines = Some(text::Layout::probe(&file, path, &prefix, len, format)?)
            }
            Kind::Nul => plan.lines = Some(text::Layout::nul(len)),
            Kind::V3 | Kind::V4 => {}
        }
        if matches!(kind, Kind::V3 | Kind::V4) {
            let layout =
                v4::Layout::parse(&prefix, len, kind == Kind::V3).map_err(|r| bad(path, r))?;
            (plan.users, plan.groups) = v4::read_tables(&file, path, &layout)?;
            plan.layout = Some(layout);
        }
        Ok(plan)
    }
}

/// A [`Error::BadList`] for the list `path`.
fn bad(path: &[u8], reason: String) -> Error {
    Error::BadList {
        path: path.to_vec(),
        reason,
    }
}

/// Open a list for reading.
fn open_read(path: &[u8]) -> Result<File> {
    File::open(as_path(path)).map_err(|e| ItemError::new(path, OP_OPEN, e).into())
}

/// Open an existing list (created by rank 0) for positional writes.
fn open_write(dest: Dest<'_>) -> Result<File> {
    match dest.temp {
        Some(id) => crate::atomic::join(dest.path, OFlags::WRONLY, Some(id))
            .map_err(|e| ItemError::new(dest.path, OP_OPEN, e.source).into()),
        None => File::options()
            .write(true)
            .open(as_path(dest.path))
            .map_err(|e| ItemError::new(dest.path, OP_OPEN, e).into()),
    }
}

/// Create or truncate the list (rank 0, before any rank writes); rank 0's temporary is new
/// and empty already.
fn create(dest: Dest<'_>) -> Result<File> {
    if dest.temp.is_some() {
        return open_write(dest);
    }
    File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(as_path(dest.path))
        .map_err(|e| ItemError::new(dest.path, OP_CREATE, e).into())
}

/// Read as many bytes as `buf` holds from byte `offset`, or up to the end of the file; returns
/// the count read.
fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Fill `buf` from byte `offset` of the list `path`; a file that ends early is a
/// [`Error::BadList`] naming the offset where it ends (it shrank while being read).
fn read_exact_at(file: &File, path: &[u8], buf: &mut [u8], offset: u64) -> Result<()> {
    let n = read_full_at(file, buf, offset).map_err(|e| ItemError::new(path, OP_READ, e))?;
    if n < buf.len() {
        return Err(bad(
            path,
            format!(
                "truncated at byte offset {}: expected {} bytes from offset {offset} (did the file change while being read?)",
                offset + n as u64,
                buf.len()
            ),
        ));
    }
    Ok(())
}

/// Write all of `buf` at byte `offset` of the list `path`.
fn write_all_at(file: &File, path: &[u8], buf: &[u8], offset: u64) -> Result<()> {
    file.write_all_at(buf, offset)
        .map_err(|e| ItemError::new(path, OP_WRITE, e).into())
}

/// Writes one rank's contiguous region of a list file from `offset` on, in `IO_CHUNK` pieces:
/// records are appended to a buffer, which goes out with one positional write when full.
struct RegionWriter<'a> {
    file: File,
    path: &'a [u8],
    /// Sync what was written at the end (a temporary: renamed over the list once every rank
    /// synced its part, so that a crash never leaves a list that reads short).
    sync: bool,
    offset: u64,
    buf: Vec<u8>,
}

impl<'a> RegionWriter<'a> {
    /// Open `dest` (already created by rank 0) to write from byte `offset`.
    fn open(dest: Dest<'a>, offset: u64) -> Result<RegionWriter<'a>> {
        Ok(RegionWriter {
            file: open_write(dest)?,
            path: dest.path,
            sync: dest.temp.is_some(),
            offset,
            buf: Vec::with_capacity(IO_CHUNK + 4096),
        })
    }

    /// The buffer to append the next record to; call [`RegionWriter::flush_if_full`] after.
    fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    fn flush_if_full(&mut self) -> Result<()> {
        if self.buf.len() >= IO_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        write_all_at(&self.file, self.path, &self.buf, self.offset)?;
        self.offset += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Write what is left (and sync it all, to a temporary).
    fn finish(mut self) -> Result<()> {
        self.flush()?;
        if self.sync {
            self.file
                .sync_data()
                .map_err(|e| ItemError::new(self.path, OP_SYNC, e))?;
        }
        Ok(())
    }
}

/// An [`Error::Invalid`] for a record `item` that the list `list` cannot hold.
fn cannot_hold(list: &[u8], item: &[u8], why: &str) -> Error {
    Error::Invalid(format!(
        "write list {}: cannot store the path \"{}\": {why}",
        crate::path::display(list),
        crate::path::display(item).escape_debug()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cross_ranks_intact() {
        let plan = Plan {
            kind: Kind::V3,
            len: 5 << 32,
            layout: Some(v4::Layout {
                header: 72,
                nusers: 1,
                uc: 8,
                ngroups: 0,
                gc: 0,
                nfiles: 3,
                fc: 16,
            }),
            lines: Some(text::Layout::nul(9)),
            users: IdTable {
                entries: vec![(b"r\xffoot".to_vec(), 7)],
            },
            groups: IdTable::default(),
        };
        let bytes = steal::typed::encode(&plan);
        let back: Plan = steal::decode(&bytes).unwrap();
        for n in 0..bytes.len() {
            assert!(steal::decode::<Plan>(&bytes[..n]).is_err(), "cut at {n}");
        }
        assert_eq!(
            (back.kind, back.len, back.layout, back.lines),
            (plan.kind, plan.len, plan.layout, plan.lines)
        );
        assert_eq!((back.users, back.groups), (plan.users, plan.groups));
    }

    /// The list is written under a predictable temporary name: a hard link planted there to
    /// someone's file is refused, and that file is neither truncated nor written (before, the
    /// writer opened the name with O_TRUNC and wrote the list into the planted file).
    #[test]
    fn a_file_planted_at_the_temporary_name_is_refused_untouched() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let path = [dir.path().as_os_str().as_bytes(), b"/list.txt"].concat();
        let temp = crate::atomic::temp_path(&path);
        std::fs::hard_link(&victim, as_path(&temp)).unwrap();
        let mut list = FileList::new(Detail::Lite);
        list.push(b"/a", crate::FileType::File, None);
        for format in [Format::Text, Format::V4] {
            let list = if format == Format::V4 {
                let mut l = FileList::new(Detail::Stat);
                l.push(b"/a", crate::FileType::File, Some(crate::Meta::default()));
                l
            } else {
                list.clone()
            };
            let written = steal::local::run(1, |comm: &dyn steal::Comm| {
                write(comm, &list, &path[..], format).is_err()
            });
            assert_eq!(written, vec![true], "{format:?}: refused");
            assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "{format:?}");
            assert!(!std::path::Path::new(as_path(&path)).exists(), "{format:?}");
        }
    }
    /// A writer killed outright leaves its temporary (as big as the list) beside the list: the
    /// next write of that list on this host removes it, never a live writer's.
    #[test]
    fn a_killed_writer_temporary_is_removed_by_the_next_write() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let path = [dir.path().as_os_str().as_bytes(), b"/list.txt"].concat();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let host = crate::atomic::host();
        let temp = |pid| crate::atomic::temp_name_of(b"list.txt", &host, pid);
        let (killed, live) = (temp(dead), temp(1));
        std::fs::write(dir.path().join(as_path(&killed)), b"half a list").unwrap();
        std::fs::write(dir.path().join(as_path(&live)), b"init's list").unwrap();
        let mut list = FileList::new(Detail::Lite);
        list.push(b"/a", crate::FileType::File, None);
        steal::local::run(2, |comm: &dyn steal::Comm| {
            write(comm, &list, &path[..], Format::Text).unwrap()
        });
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .collect();
        left.sort();
        let mut want = vec![b"list.txt".to_vec(), live];
        want.sort();
        assert_eq!(left, want);
    }
}
