//! `mfu-rs tar` (dtar): parallel archive create, extract and list.
//!
//! Archives are POSIX pax tar files that GNU tar, bsdtar and Python read, with dtar's index
//! (DTAR_IDX) as their last member, so that extraction and listing start in parallel at once.
//! The parts, one folder each:
//! - `format`: the tar format (headers, pax records, sparse maps);
//! - `index`: the dtar index, the walk of the header chain (`index::scan`) and the checks
//!   that an index matches its archive;
//! - `archive`: an archive opened for reading: random access to a plain or seekable stream
//!   from many threads, or one compressed stream read front to back (`archive::serial`);
//! - `create`: walk, sort by name, encode every header once from the walked record, place
//!   entries by a prefix sum over ranks, write headers and data at their offsets on all ranks
//!   (big files in chunks over the work-stealing queue), then the index;
//! - `extract`: find the index or scan, split the stream by bytes over ranks, then
//!   directories, files, data, links and metadata, never writing outside the target
//!   (`extract::beneath`);
//! - `list`: `tar -t`;
//! - `select`: the member operands, `--exclude` and `--strip-components` of extract and list.
//!
//! The compressed layouts (`--zstd` frames with a seek table, `-z` gzip members, `-j` dbz2's
//! bzip2 streams and table) are the frame codecs of `crate::engine::codec`, shared with bz2
//! and bcast; tar only cuts its stream into frames and reads them back.

pub(crate) mod archive;
pub(crate) mod create;
pub(crate) mod extract;
pub(crate) mod format;
pub(crate) mod index;
pub(crate) mod list;
pub(crate) mod select;

pub use crate::engine::codec::kind::Codec;
pub use select::Select;

use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::lustre::LustreHandle;
use crate::engine::select::Rules;
use crate::engine::status::Status;
use lustre_sys::policy::Overrides;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// What a run of `tar` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// `-c`: archive these paths (files or trees), taken relative to [`Options::chdir`] and
    /// stored under the names given (a leading `/` dropped; `..` refused).
    Create {
        /// The paths to archive (bytes; at least one).
        paths: Vec<Vec<u8>>,
    },
    /// `-x`: extract the entries [`Options::select`] takes (all by default) into
    /// [`Options::chdir`] (default: the current directory).
    Extract,
    /// `-t`: list the entries [`Options::select`] takes, in archive order, through the
    /// context's output.
    List,
}

/// The options of `tar`: the mode and what applies to it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Create, extract or list.
    pub mode: Mode,
    /// The archive (`-f`; bytes, relative to the current directory). Create writes it under a
    /// temporary name beside it and renames it into place when complete; `-` is refused.
    pub archive: Vec<u8>,
    /// `-C`: create takes the paths relative to this directory; extract extracts into it (it
    /// must exist). `None`: the current directory.
    pub chdir: Option<Vec<u8>>,
    /// Create a seekable zstd archive (`--zstd`); extract and list recognise one without it.
    pub zstd: bool,
    /// zstd compression level, 1 to 19 (default 3).
    pub zstd_level: i32,
    /// Create a gzip archive of independent members (`-z`/`--gzip`, `engine::codec::gzip`) that extraction
    /// reads in parallel and any gunzip reads as one stream.
    pub gzip: bool,
    /// gzip compression level, 1 to 9 (default 6, gzip's).
    pub gzip_level: i32,
    /// Create a bzip2 archive of independent streams with dbz2's table (`-j`, formats.md §7)
    /// that extraction reads in parallel and any bunzip2 reads as one stream.
    pub bzip2: bool,
    /// Extract: give entries their archived owner and group (`--preserve-owner`; always done
    /// when run as root): those the archived user and group names have on this system, the
    /// archived numbers for names it does not know (GNU tar's rule).
    pub preserve_owner: bool,
    /// Extract: give entries the archived owner and group numbers, whatever their names
    /// (`--numeric-owner`); list: show numbers, not names.
    pub numeric_owner: bool,
    /// Extract and list: the MEMBERs and how they match, and `--strip-components`.
    pub select: select::Select,
    /// Extract: set archived permissions exactly, without applying the umask
    /// (`--preserve-perms`; always done when run as root).
    pub preserve_perms: bool,
    /// Store (create) and restore (extract) extended attributes and ACLs.
    pub xattrs: bool,
    /// Extract: fsync every file before setting its metadata.
    pub fsync: bool,
    /// Bytes per read/write call when data is copied through memory (default 4 MiB).
    pub bufsize: u64,
    /// Bytes per chunk of file data, the unit of parallel work, and the uncompressed size of
    /// one zstd frame (default 4 MiB; below 4 GiB to create).
    pub chunksize: u64,
    /// The largest window of archive (bytes) the header-chain walk of an archive without an
    /// index reads at once (default 256 MiB; used up to 64 KiB, 2 KiB at least); with `--zstd`,
    /// the compressed bytes a rank other than 0 holds in memory before spooling them to a
    /// temporary file.
    pub memsize: u64,
    /// Extract and list: after a scan (no index found), save the index as `ARCHIVE.dtaridx`.
    pub save_index: bool,
    /// Extract: `--memory-limit`, bytes per rank for the entries held at once (`None`: the
    /// default share of the node's memory, [`flist::spill::MemoryLimit::resolve`]). Beyond it
    /// the archive is extracted a piece of entries at a time, in archive order, and the
    /// directories' metadata wait in a spill file for the end.
    pub memory_limit: Option<u64>,
    /// Extract: `--tmpdir`, the directory of the spill files (default `$TMPDIR`, else `/tmp`).
    pub tmpdir: Option<Vec<u8>>,
    /// List: lines like `tar -tv` (mode, owner, size, time, name) instead of names.
    pub long: bool,
    /// Extract and list: say through the context's `error` events when the archive had no
    /// index and was scanned, and when a scanned index was saved (the command line's `-q`
    /// turns this off). An index that is not used, and why, is always said.
    pub index_notices: bool,
    /// `--stripe-count`/`--stripe-size`: layouts of the archive (create) and of extracted
    /// files (extract) on Lustre, instead of the policy's.
    pub stripe: Overrides,
    /// The Lustre calls (the real ones unless a test or an embedder substitutes its own).
    pub lustre: LustreHandle,
    /// Include/exclude rules: create applies them to paths relative to each PATH, extract and
    /// list to the members' names (less a leading `/` or `./`).
    pub rules: Rules,
    /// Extract: read every file's data back after it landed and compare it with the archive's
    /// bytes (`--verify`).
    pub verify: bool,
    /// Create and extract: a checksum manifest of the regular files (paths as stored).
    pub manifest: Option<crate::engine::manifest::ManifestOptions>,
    /// Create and extract: where the checkpoint that lets the same command continue an
    /// interrupted run is kept (`--checkpoint PATH`, `--no-checkpoint`; default: create beside
    /// the archive, extract in the state directory, never inside the target).
    pub checkpoint: crate::engine::checkpoint::Choice,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Options for `mode` on `archive`, every other field as the command line's default.
    pub fn new(mode: Mode, archive: impl AsRef<OsStr>) -> Options {
        Options {
            mode,
            archive: archive.as_ref().as_bytes().to_vec(),
            chdir: None,
            zstd: false,
            zstd_level: 3,
            gzip: false,
            gzip_level: 6,
            bzip2: false,
            preserve_owner: false,
            numeric_owner: false,
            select: select::Select::default(),
            preserve_perms: false,
            xattrs: false,
            fsync: false,
            bufsize: 4 << 20,
            chunksize: 4 << 20,
            memsize: 256 << 20,
            save_index: false,
            memory_limit: None,
            tmpdir: None,
            long: false,
            index_notices: true,
            stripe: Overrides::default(),
            lustre: LustreHandle::default(),
            rules: Rules::default(),
            verify: false,
            manifest: None,
            checkpoint: crate::engine::checkpoint::Choice::Beside,
            context: Context::default(),
        }
    }

    /// Create `archive` from `paths`.
    pub fn create<P: AsRef<OsStr>>(
        archive: impl AsRef<OsStr>,
        paths: impl IntoIterator<Item = P>,
    ) -> Options {
        let paths = paths
            .into_iter()
            .map(|p| p.as_ref().as_bytes().to_vec())
            .collect();
        Options::new(Mode::Create { paths }, archive)
    }

    /// Extract `archive` into `dir`.
    pub fn extract(archive: impl AsRef<OsStr>, dir: impl AsRef<OsStr>) -> Options {
        Options {
            chdir: Some(dir.as_ref().as_bytes().to_vec()),
            ..Options::new(Mode::Extract, archive)
        }
    }

    /// List `archive`.
    pub fn list(archive: impl AsRef<OsStr>) -> Options {
        Options::new(Mode::List, archive)
    }

    /// The compression of the archive to create, if any.
    pub fn codec(&self) -> Option<crate::engine::codec::kind::Codec> {
        if self.zstd {
            Some(crate::engine::codec::kind::Codec::Zstd)
        } else if self.gzip {
            Some(crate::engine::codec::kind::Codec::Gzip)
        } else if self.bzip2 {
            Some(crate::engine::codec::kind::Codec::Bzip2)
        } else {
            None
        }
    }

    /// What makes these options unusable, before anything is done (the same on every rank).
    fn check(&self) -> Result<(), String> {
        for (name, n) in [
            ("-b/--bufsize", self.bufsize),
            ("-k/--chunksize", self.chunksize),
            ("--memsize", self.memsize),
        ] {
            if n == 0 {
                return Err(format!("{name} must be more than 0 bytes"));
            }
        }
        if !(1..=19).contains(&self.zstd_level) {
            return Err(format!(
                "--zstd-level {}: the level must be 1 to 19",
                self.zstd_level
            ));
        }
        if !(1..=9).contains(&self.gzip_level) {
            return Err(format!(
                "--gzip-level {}: the level must be 1 to 9",
                self.gzip_level
            ));
        }
        if [self.zstd, self.gzip, self.bzip2]
            .iter()
            .filter(|&&c| c)
            .count()
            > 1
        {
            return Err("--zstd, -z/--gzip and -j/--bzip2 exclude one another".into());
        }
        if let Mode::Create { paths } = &self.mode {
            if paths.is_empty() {
                return Err("-c needs at least one PATH to archive".into());
            }
            if self.archive == b"-" {
                return Err(
                    "-c -f -: writing the archive to standard output is not supported (it is \
                     written in parallel at known offsets): give a file name (./- for a file \
                     named '-')"
                        .into(),
                );
            }
            if self.chunksize >= 1 << 32 {
                return Err(
                    "-k/--chunksize must be below 4GiB (it is the size of a zstd frame)".into(),
                );
            }
            if self.bzip2 && self.chunksize > crate::engine::codec::dbz2::MAX_BLOCK {
                return Err(
                    "-k/--chunksize must be 1GiB at most with -j (it is the input of one bzip2 \
                     stream)"
                        .into(),
                );
            }
        }
        if self.archive.is_empty() {
            return Err("-f: an empty name names no archive".into());
        }
        if matches!(self.mode, Mode::Create { .. })
            && (self.select != select::Select::default() || self.numeric_owner)
        {
            return Err(
                "MEMBERs, --wildcards, --anchored, --strip-components and --numeric-owner \
                 are for -x and -t"
                    .into(),
            );
        }
        Ok(())
    }
}

/// What was done, for each mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Done {
    /// An archive was created (or not: see [`Report::created`]).
    #[default]
    Create,
    /// An archive was extracted.
    Extract,
    /// An archive was listed.
    List,
}

/// How an extraction beyond the memory limit went (the same on every rank).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pieces {
    /// Pieces the archive's entries were extracted in, one after another.
    pub pieces: u64,
    /// Entries per rank in a piece, at most.
    pub entries_per_rank: u64,
    /// Bytes of directories' metadata records spilled, over all ranks (removed at the end).
    pub spill_bytes: u64,
    /// Of them, the most one rank spilled (bytes).
    pub spill_bytes_max_rank: u64,
    /// The spill directory, as shown.
    pub tmpdir: String,
}

/// What a run of `tar` did. Counts are totals over all ranks.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The mode that ran.
    pub mode: Done,
    /// The archive (absolute path; shown as text, lossily, in JSON).
    #[serde(serialize_with = "as_text")]
    pub archive: Vec<u8>,
    /// Extract: the directory extracted into. Create: the directory the paths were taken
    /// relative to. List: empty.
    #[serde(serialize_with = "as_text")]
    pub directory: Vec<u8>,
    /// Entries archived (create), extracted completely with their metadata (extract; not
    /// those in [`Report::superseded`]), or listed (list).
    pub entries: u64,
    /// Entries the archive holds (extract and list: one cut short by damage included; create:
    /// the entries of the new archive).
    pub archive_entries: u64,
    /// Bytes of file data archived (create) or extracted (extract); 0 for list.
    pub bytes: u64,
    /// Entries not archived or not extracted because of their type (a fifo or a socket to
    /// create, an unsupported entry type to extract), each named through the context.
    pub skipped: u64,
    /// Extract: entries not extracted because a later entry of the same name replaces them
    /// (tar keeps the last; an earlier version that a hard link refers to is extracted, under
    /// the link's name, and is not counted here).
    pub superseded: u64,
    /// Entries that failed, each named through the context (create: left out of the archive
    /// or stored with what could be read; extract: missing or incomplete; list: headers that
    /// could not be decoded).
    pub failed: u64,
    /// Create: failures of the walk of the sources (each named through the context).
    pub walk_errors: u64,
    /// Create: the archive was complete and renamed into place. When false nothing that looks
    /// like an archive was left, and `entries` is 0.
    pub created: bool,
    /// Extract and list: no usable index was found, so the chain of headers was walked.
    pub scanned: bool,
    /// Extract and list: the archive is damaged (its end cut short, a header that does not
    /// hold); what could be read was handled.
    pub damaged: bool,
    /// Extract and list: `save_index` was asked but the index could not be saved.
    pub index_not_saved: bool,
    /// Extract and list: MEMBERs that named no entry (each said through the context).
    pub not_found: u64,
    /// Frames (zstd frames, gzip members, bzip2 streams) compressed (create) or decompressed
    /// (extract).
    pub zstd_frames: u64,
    /// Create and extract of a compressed archive: the frames each rank compressed or
    /// decompressed, in rank order (empty otherwise).
    pub frames_per_rank: Vec<u64>,
    /// Extract and list: the compression the archive was found in (by its first bytes), if
    /// any.
    pub compression: Option<crate::engine::codec::kind::Codec>,
    /// Extract and list: the archive is one compressed stream (gzip, bzip2, xz, or zstd
    /// without a seek table), so rank 0 read it front to back, decompressing beside the
    /// extraction, while the other ranks waited.
    pub serial: bool,
    /// Wall-clock time of the run, in seconds.
    pub seconds: f64,
    /// A stop request (SIGINT/SIGTERM, or the context's stop flag) cut the run short.
    pub interrupted: bool,
    /// The run stopped and its checkpoint keeps the work done for the same command to
    /// continue. Create: bytes of the tar stream written by this run and the earlier ones, of
    /// the whole stream. Extract: bytes of file data extracted (by the earlier runs too), of
    /// all the files taken; of an archive in one compressed stream, bytes of it read, of its
    /// size.
    pub stopped: Option<crate::engine::context::Stopped>,
    /// Extract with `--memory-limit`, or when the entries did not fit the default limit: the
    /// memory limit per rank, as shown.
    pub memory_limit: Option<String>,
    /// Extract: the entries outgrew the memory limit and were extracted a piece at a time.
    pub pieces: Option<Pieces>,
    /// This process's sample of the failure messages.
    pub failures: Vec<String>,
    /// Notices said on stderr that are no failure (rank 0's). Extract and list: an index set
    /// aside (and why), the archive had no index and was scanned, or its index was saved.
    /// Create and extract: the checkpoint continued, not used (and why), or none kept.
    pub notices: Vec<String>,
    /// Extract with `--verify`: how the written data was read back.
    pub verify: Option<crate::engine::verify::Summary>,
    /// With `--manifest`: the manifest written (or not).
    pub manifest: Option<crate::engine::manifest::Summary>,
}

fn as_text<S: serde::Serializer>(path: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&flist::path::display(path))
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.entries,
            bytes: self.bytes,
            failed: self.failed + self.walk_errors,
            seconds: self.seconds,
        }
    }

    fn status(&self) -> Status {
        let bad = match self.mode {
            // Entries of a type that is not archived do not make the create fail.
            Done::Create => !self.created || self.failed > 0 || self.walk_errors > 0,
            Done::Extract => {
                self.failed > 0
                    || self.skipped > 0
                    || self.interrupted
                    || self.damaged
                    || self.index_not_saved
                    || self.not_found > 0
            }
            Done::List => {
                self.failed > 0 || self.damaged || self.index_not_saved || self.not_found > 0
            }
        };
        if bad || self.manifest.as_ref().is_some_and(|m| !m.written) {
            Status::ItemsFailed
        } else {
            Status::Ok
        }
    }

    fn stopped(&self) -> Option<crate::engine::context::Stopped> {
        self.stopped
    }
}

/// Run `tar`: create, extract or list, as `options.mode` says. Collective.
///
/// ```no_run
/// let report = steal::local::run(2, |comm| {
///     mfu::tar::run(comm, &mfu::tar::Options::create("/tmp/a.tar", ["/tmp/data"]))
/// });
/// assert!(report[0].as_ref().unwrap().created);
/// ```
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    options.check().map_err(Error::new)?;
    match &options.mode {
        Mode::Create { paths } => create::run(comm, options, paths),
        Mode::Extract => extract::run(comm, options),
        Mode::List => list::run(comm, options),
    }
}
