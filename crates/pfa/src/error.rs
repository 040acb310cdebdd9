//! What can go wrong with an aggregate: every error names the aggregate's path and what was
//! being done or what is wrong.

use std::io;
use std::path::PathBuf;

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A stream name as shown in messages: bytes that are not printable ASCII escaped.
pub(crate) fn shown(name: &[u8]) -> String {
    name.escape_ascii().to_string()
}

/// An error of an aggregate operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// The aggregate (or its temporary, or its directory).
        path: PathBuf,
        /// What was being done ("write chunk", "open", ...).
        op: String,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// The file does not start with an aggregate header.
    #[error("{} is not a PFA aggregate: {what}", path.display())]
    NotAggregate {
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        what: String,
    },
    /// The file's last bytes are not a valid trailer: it was cut (a run that did not close it,
    /// a copy cut short) or its end is damaged. See [`crate::recover`].
    #[error(
        "{} is cut or damaged at its end ({len} bytes): {what}; not read as complete \
         (`mfu-rs pfa recover`, or `pfa::recover`, drops an incomplete last version)",
        path.display()
    )]
    Cut {
        /// The file.
        path: PathBuf,
        /// Its length (bytes).
        len: u64,
        /// What is wrong with its last bytes.
        what: String,
    },
    /// A checksum of the header, a trailer or a footer does not match, or a footer does not
    /// decode.
    #[error("{} is damaged: {what}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Which structure, where, and what is wrong.
        what: String,
    },
    /// A piece's bytes do not match its checksum.
    #[error(
        "{}: stream {} version {version}: the chunk at logical offset {logical} (file offset \
         {file_offset}, {len} bytes) does not match its checksum",
        path.display(), crate::error::shown(stream)
    )]
    ChunkChecksum {
        /// The file.
        path: PathBuf,
        /// The stream's name.
        stream: Vec<u8>,
        /// The version read.
        version: u64,
        /// Logical offset of the piece in the stream (bytes).
        logical: u64,
        /// File offset of the piece's first extent (bytes).
        file_offset: u64,
        /// Length of the piece (bytes).
        len: u64,
    },
    /// Two streams of one version have the same name.
    #[error(
        "{}: stream {} written twice (ranks {} and {}): names must be unique in a version; \
         nothing written",
        path.display(), crate::error::shown(name), ranks.0, ranks.1
    )]
    DuplicateStream {
        /// The aggregate.
        path: PathBuf,
        /// The name.
        name: Vec<u8>,
        /// The two ranks that wrote it (the same rank twice when one rank did).
        ranks: (usize, usize),
    },
    /// No stream of that name in that version.
    #[error("{}: no stream {} in version {version}", path.display(), crate::error::shown(name))]
    NoSuchStream {
        /// The aggregate.
        path: PathBuf,
        /// The name asked for.
        name: Vec<u8>,
        /// The version asked for.
        version: u64,
    },
    /// No such version.
    #[error("{}: no version {version} (versions 1..={latest})", path.display())]
    NoSuchVersion {
        /// The aggregate.
        path: PathBuf,
        /// The version asked for.
        version: u64,
        /// The latest version.
        latest: u64,
    },
    /// The operation refuses this file (a symbolic link, more than one hard link, not a
    /// regular file, already existing).
    #[error("{}: {why}", path.display())]
    Refused {
        /// The path.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The options cannot be used.
    #[error("invalid PFA options: {0}")]
    Options(String),
    /// A collective operation failed on another rank (its message).
    #[error("rank {rank}: {message}")]
    OtherRank {
        /// The rank that failed (the lowest one).
        rank: usize,
        /// Its error, as text.
        message: String,
    },
}

impl Error {
    /// An [`Error::Io`] for `op` on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, op: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            op: op.into(),
            source,
        }
    }

    /// Whether the aggregate's bytes are wrong (cut, damaged, a checksum mismatch, not an
    /// aggregate), as opposed to a failed call or a wrong request.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Error::NotAggregate { .. }
                | Error::Cut { .. }
                | Error::Corrupt { .. }
                | Error::ChunkChecksum { .. }
        )
    }

    /// An [`Error::Corrupt`].
    pub(crate) fn corrupt(path: impl Into<PathBuf>, what: impl Into<String>) -> Error {
        Error::Corrupt {
            path: path.into(),
            what: what.into(),
        }
    }
}

impl From<Error> for io::Error {
    /// The error as an [`io::Error`] (what [`std::io::Read`] of a [`crate::Reader`] returns):
    /// [`io::ErrorKind::InvalidData`] for damaged data, the system's error for a failed call.
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io { ref source, .. } => io::Error::new(source.kind(), e),
            Error::ChunkChecksum { .. } | Error::Corrupt { .. } | Error::Cut { .. } => {
                io::Error::new(io::ErrorKind::InvalidData, e)
            }
            other => io::Error::other(other),
        }
    }
}
