//! `pfa pack SRC... AGG`: walk the SRCs; each rank packs the entries its part of the walk
//! holds into the aggregate, as streams of its own (no locks: the library places every rank's
//! chunks at offsets that rank alone owns).
//!
//! A stream per entry ([`super::meta`]): a regular file's data, a directory (no data), a
//! symbolic link (its target as data), named by the path relative to the SRC it lies beneath
//! (a SRC that is itself a file or a link: its last component). A SRC directory's own entry
//! is not stored: `unpack`'s DEST stands for it. Several SRCs merge into one tree of names; a
//! name two of them hold is named and the aggregate is not written (the rank that met both
//! refuses it, or the library's close when two ranks did). Other kinds of entries
//! (fifos, sockets, devices) are named and left out (exit 1).
//!
//! A regular file is read whole, its status taken before and after (size, mtime, ctime): a
//! file that changed as it was read is named (exit 1) and its stream dropped, never stored as
//! if whole. The aggregate appears under its name only when every rank closed it (the
//! library writes it under a temporary name and renames it); with `--new-version` the
//! aggregate gains a version that stores only the chunks whose contents changed.

use super::display;
use super::meta::{EntryMeta, Kind};
use crate::engine::context::{Context, Error, Summary};
use crate::engine::setup::agree_setup;
use flist::path::{basename, is_prefix, normalize};
use flist::walk::{walk, WalkOptions};
use flist::FileType;
use rustix::fd::OwnedFd;
use rustix::fs::OFlags;
use std::io::Read;
use std::time::Instant;
use steal::{Comm, CommExt};

/// Bytes read from a file and appended at a time.
const PIECE: usize = 1 << 20;

/// The test seam for files changing while read: a shell command run once per process, after
/// the first piece of a file bigger than one piece was read (tests rewrite the file there).
const HOOK_FIRST_PIECE: &str = "MFU_RS_TEST_HOOK_AFTER_FIRST_CHUNK";

/// What `pfa pack` packs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Files and directories to pack (directories with everything beneath them).
    pub srcs: Vec<Vec<u8>>,
    /// The aggregate to write.
    pub agg: Vec<u8>,
    /// Add a version to the existing aggregate (storing only changed chunks) instead of
    /// writing a new one.
    pub new_version: bool,
    /// Bytes per chunk (`None`: the library's policy: the Lustre stripe size, or the file
    /// system's preferred I/O size when at least 64 KiB, else 1 MiB).
    pub chunk_size: Option<u64>,
    /// Write chunks with `O_DIRECT` where the file system allows it.
    pub direct_io: bool,
}

/// What `pfa pack` did; counts over all ranks, the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Regular files packed.
    pub files: u64,
    /// Directories packed.
    pub dirs: u64,
    /// Symbolic links packed.
    pub symlinks: u64,
    /// Bytes of file data packed (link targets included).
    pub bytes: u64,
    /// Files that changed while they were read: named, not packed.
    pub changed: u64,
    /// Entries that could not be walked, read or stored, or are of a kind not packed: named.
    pub failed: u64,
    /// The version written (1 for a new aggregate).
    pub version: u64,
    /// Bytes of chunk data written to the aggregate by this version.
    pub bytes_written: u64,
    /// Chunks written.
    pub chunks_written: u64,
    /// Chunks of the previous version referenced instead of written again.
    pub chunks_reused: u64,
    /// Chunks were written with `O_DIRECT`.
    pub direct_io: bool,
    /// The aggregate could not be closed: it was not written (named on stderr).
    pub not_written: bool,
    /// A stop request cut the run short: no aggregate (or version) was written.
    pub interrupted: bool,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
}

impl Report {
    /// Items: the entries packed; bytes: their data.
    pub fn summary(&self) -> Summary {
        Summary {
            items: self.files + self.dirs + self.symlinks,
            bytes: self.bytes,
            failed: self.failed + self.changed + u64::from(self.not_written),
            seconds: self.seconds,
        }
    }
}

/// A SRC: its normalised path and whether it is a directory (its entries are named relative
/// to it) or not (named by its last component).
struct Root {
    path: Vec<u8>,
    dir: bool,
}

/// The checks before any work: every SRC exists, the aggregate lies in none of them. The
/// SRCs, normalised.
fn check(o: &Options, cwd: &[u8]) -> Result<Vec<Root>, String> {
    if o.srcs.is_empty() {
        return Err("no SRC to pack".into());
    }
    if !o.new_version && std::fs::symlink_metadata(flist::path::as_path(&o.agg)).is_ok() {
        return Err(format!(
            "AGG {} exists: --new-version adds a version to it; to write a new aggregate, \
             remove it first (nothing done)",
            display(&o.agg)
        ));
    }
    let agg = crate::engine::outputs::resolve(&o.agg, true);
    let mut roots = Vec::new();
    for src in &o.srcs {
        let st = std::fs::symlink_metadata(flist::path::as_path(src))
            .map_err(|e| format!("SRC {}: {e} (nothing done)", display(src)))?;
        let real = crate::engine::outputs::resolve(src, false);
        if real == agg || (st.is_dir() && is_prefix(&real, &agg)) {
            return Err(format!(
                "AGG {} lies inside SRC {}: the aggregate would be packed into itself \
                 (refused, nothing done; put it outside the tree)",
                display(&o.agg),
                display(src)
            ));
        }
        roots.push(Root {
            path: normalize(src, cwd),
            dir: st.is_dir(),
        });
    }
    // The deepest root first: an entry is named relative to the nearest one.
    roots.sort_by_key(|r| std::cmp::Reverse(r.path.len()));
    Ok(roots)
}

/// The stream name of the walked `path`: relative to the deepest directory root it lies
/// beneath, or the last component of a root that is not a directory; `None` for a directory
/// root itself.
fn name_of<'a>(roots: &[Root], path: &'a [u8]) -> Option<&'a [u8]> {
    for r in roots {
        if path == r.path.as_slice() {
            return (!r.dir).then(|| basename(path));
        }
        if r.dir && is_prefix(&r.path, path) {
            let rest = &path[r.path.len()..];
            return Some(rest.strip_prefix(b"/").unwrap_or(rest));
        }
    }
    Some(basename(path))
}

/// Run `pfa pack`. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, o: &Options, context: &Context) -> Result<Report, Error> {
    let started = Instant::now();
    let cwd =
        flist::path::current_dir().map_err(|e| Error::new(format!("current directory: {e}")))?;
    let roots = agree_setup(comm, check(o, &cwd))?;
    let paths: Vec<&[u8]> = roots.iter().map(|r| r.path.as_slice()).collect();
    let walking = context.progress(comm.rank(), "Walked");
    let walked = walk(
        comm,
        &paths,
        &WalkOptions {
            noatime: &context.noatime,
            stop: Some(&context.stop),
            progress: Some(&walking),
            id_tables: false,
            ..WalkOptions::default()
        },
    );
    drop(walking);
    let mut mine = Report {
        interrupted: walked.interrupted,
        ..Report::default()
    };
    for e in &walked.errors {
        context.error(e);
        mine.failed += 1;
    }
    let mut agg = open_aggregate(comm, o)?;
    // Names this rank stored: one two SRCs hold is refused here (the library refuses it at
    // close when two ranks hold it), and then the aggregate is not written at all.
    let mut seen = std::collections::HashSet::new();
    let mut twice = false;
    for entry in walked.list.iter() {
        if context.stopped() {
            mine.interrupted = true;
            break;
        }
        let Some(name) = name_of(&roots, entry.path) else {
            continue;
        };
        let Some(st) = entry.meta else {
            continue;
        };
        if !seen.insert(name) {
            context.error(format!(
                "{}: the name {} is held by two SRCs: the aggregate is not written",
                display(entry.path),
                display(name)
            ));
            mine.failed += 1;
            twice = true;
            continue;
        }
        let packed = match entry.kind {
            FileType::Dir => pack_dir(&mut agg, name, &st).map(|()| mine.dirs += 1),
            FileType::Symlink => pack_symlink(&mut agg, entry.path, name, &st).map(|n| {
                mine.symlinks += 1;
                mine.bytes += n;
            }),
            FileType::File => match pack_file(&mut agg, entry.path, name, context) {
                Ok(Packed::Whole(n)) => {
                    mine.files += 1;
                    mine.bytes += n;
                    Ok(())
                }
                Ok(Packed::Changed) => {
                    context.error(format!(
                        "{}: changed while it was read (size, mtime or ctime moved): not \
                         packed; pack it again",
                        display(entry.path)
                    ));
                    mine.changed += 1;
                    Ok(())
                }
                Err(e) => Err(e),
            },
            other => Err(format!(
                "{}: a {} is not packed (only regular files, directories and symbolic links)",
                display(entry.path),
                kind_word(other)
            )),
        };
        if let Err(message) = packed {
            context.error(message);
            mine.failed += 1;
        }
    }
    let interrupted = comm.any(mine.interrupted);
    let twice = comm.any(twice);
    let mut report = sum(comm, &mine);
    report.interrupted = interrupted;
    if interrupted || twice {
        // Everything the user asked for, or nothing: the aggregate's temporary is removed (a
        // new version is cut off again), nothing partial looks complete.
        let aborted = agg.abort();
        report.not_written = true;
        if comm.rank() == 0 {
            let why = if interrupted {
                "interrupted"
            } else {
                "a name held twice"
            };
            context.error(match aborted {
                Ok(()) => format!("{}: {why}: not written", display(&o.agg)),
                Err(e) => format!("{}: {why}: not written; {e}", display(&o.agg)),
            });
        }
    } else {
        match agg.close() {
            Ok(written) => {
                report.version = written.version;
                report.bytes_written = written.bytes_written;
                report.chunks_written = written.chunks_written;
                report.chunks_reused = written.chunks_reused;
                report.direct_io = written.direct_io;
                if let (Some(why), 0) = (&written.direct_io_fallback, comm.rank()) {
                    context.info(format!("O_DIRECT not used: {why}\n"));
                }
            }
            Err(e) => {
                if comm.rank() == 0 {
                    context.error(e.to_string());
                }
                report.not_written = true;
            }
        }
    }
    report.not_written = comm.any(report.not_written);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The aggregate created (or its next version begun) on every rank, or the error of the first
/// rank that could not. Collective.
fn open_aggregate<'c>(comm: &'c dyn Comm, o: &Options) -> Result<::pfa::Aggregate<'c>, Error> {
    let options = ::pfa::Options {
        chunk_size: o.chunk_size,
        direct_io: o.direct_io,
        ..::pfa::Options::default()
    };
    let path = flist::path::as_path(&o.agg);
    let opened = if o.new_version {
        ::pfa::Aggregate::new_version(comm, path, &options)
    } else {
        ::pfa::Aggregate::create(comm, path, &options)
    };
    // The library fails every rank alike; the lowest rank's message is the one said.
    match opened {
        Ok(agg) => Ok(agg),
        Err(e) => Err(agree_setup::<()>(comm, Err(e.to_string()))
            .err()
            .unwrap_or_else(|| Error::new("the aggregate could not be opened"))),
    }
}

/// The counts of every rank's report added up. Collective.
fn sum(comm: &dyn Comm, r: &Report) -> Report {
    let mut v = [r.files, r.dirs, r.symlinks, r.bytes, r.changed, r.failed];
    comm.allreduce(&mut v, steal::ReduceOp::Sum);
    Report {
        files: v[0],
        dirs: v[1],
        symlinks: v[2],
        bytes: v[3],
        changed: v[4],
        failed: v[5],
        ..Report::default()
    }
}

/// A directory: a stream with no data.
fn pack_dir(agg: &mut ::pfa::Aggregate<'_>, name: &[u8], st: &flist::Meta) -> Result<(), String> {
    let meta = EntryMeta::of(Kind::Dir, st).encode();
    let writer = agg
        .stream(name, &meta)
        .map_err(|e| format!("store directory {}: {e}", display(name)))?;
    writer
        .finish()
        .map_err(|e| format!("store directory {}: {e}", display(name)))
}

/// A symbolic link: its target as the stream's data. Bytes stored.
fn pack_symlink(
    agg: &mut ::pfa::Aggregate<'_>,
    path: &[u8],
    name: &[u8],
    st: &flist::Meta,
) -> Result<u64, String> {
    let target = std::fs::read_link(flist::path::as_path(path))
        .map_err(|e| format!("readlink {}: {e}", display(path)))?;
    let target = std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()).to_vec();
    let meta = EntryMeta::of(Kind::Symlink, st).encode();
    let store = |e: ::pfa::Error| format!("store symbolic link {}: {e}", display(path));
    let mut writer = agg.stream(name, &meta).map_err(store)?;
    writer.append(&target).map_err(store)?;
    writer.finish().map_err(store)?;
    Ok(target.len() as u64)
}

/// What became of a regular file.
enum Packed {
    /// Stored whole: its bytes.
    Whole(u64),
    /// It changed while read: its stream was dropped (its bytes stay in the aggregate as
    /// dead chunk bytes, in no index).
    Changed,
}

/// The status fields that move when a file is written: size, mtime, ctime.
fn stamp(st: &rustix::fs::Stat) -> (i64, i64, i64, i64, i64) {
    (
        st.st_size,
        st.st_mtime,
        st.st_mtime_nsec as i64,
        st.st_ctime,
        st.st_ctime_nsec as i64,
    )
}

/// A regular file: opened without following a symlink, its status taken, its data appended
/// piece by piece (read straight into the stream's buffer), its status taken again: a file
/// that changed has its stream dropped.
fn pack_file(
    agg: &mut ::pfa::Aggregate<'_>,
    path: &[u8],
    name: &[u8],
    context: &Context,
) -> Result<Packed, String> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd: OwnedFd = context
        .noatime
        .open(flags, |f| flist::walk::open_long(path, f))
        .map_err(|e| format!("open {}: {}", display(path), std::io::Error::from(e)))?;
    let stat = |fd: &std::fs::File| {
        rustix::fs::fstat(fd)
            .map_err(|e| format!("stat {}: {}", display(path), std::io::Error::from(e)))
    };
    let mut file = std::fs::File::from(fd);
    let before = stat(&file)?;
    if before.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(format!(
            "{}: no longer a regular file: not packed",
            display(path)
        ));
    }
    let size = before.st_size as u64;
    let meta = EntryMeta::of(Kind::File, &flist::Meta::from_stat(&before)).encode();
    let store = |e: ::pfa::Error| format!("store {}: {e}", display(path));
    let mut writer = agg.stream(name, &meta).map_err(store)?;
    let mut total = 0u64;
    // One byte more than the size is asked for at the end: a file that grew is seen by its
    // length too.
    let piece = PIECE.min(size as usize + 1);
    loop {
        let buf = writer.buffer(piece);
        let n = match file.read(buf) {
            Ok(n) => n,
            Err(e) => {
                writer.abandon();
                return Err(format!("read {}: {e}", display(path)));
            }
        };
        if n == 0 {
            break;
        }
        writer.commit(n).map_err(store)?;
        total += n as u64;
        if total == n as u64 && size > PIECE as u64 {
            after_first_piece();
        }
    }
    let after = stat(&file)?;
    if stamp(&before) != stamp(&after) || total != size {
        writer.abandon();
        return Ok(Packed::Changed);
    }
    writer.finish().map_err(store)?;
    Ok(Packed::Whole(total))
}

/// Run the [`HOOK_FIRST_PIECE`] command, if set, the first time this is called in the process.
fn after_first_piece() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Some(cmd) = std::env::var_os(HOOK_FIRST_PIECE) {
            let _ = std::process::Command::new("sh").arg("-c").arg(cmd).status();
        }
    });
}

/// `fifo`, `socket`, ... for messages.
fn kind_word(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharDev => "character device",
        FileType::BlockDev => "block device",
        _ => "file of unknown type",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_relative_to_the_nearest_directory_root() {
        let roots = vec![
            Root {
                path: b"/a/b".to_vec(),
                dir: true,
            },
            Root {
                path: b"/a".to_vec(),
                dir: true,
            },
            Root {
                path: b"/x/file".to_vec(),
                dir: false,
            },
        ];
        assert_eq!(name_of(&roots, b"/a/b"), None);
        assert_eq!(name_of(&roots, b"/a"), None);
        assert_eq!(name_of(&roots, b"/a/b/c/d"), Some(&b"c/d"[..]));
        assert_eq!(name_of(&roots, b"/a/bc"), Some(&b"bc"[..]));
        assert_eq!(name_of(&roots, b"/x/file"), Some(&b"file"[..]));
    }
}
