//! Errors of flist operations: every one names the path and the operation.

use crate::path::display;
use std::io;

/// An operation on one path failed. Walks collect these and go on; list I/O returns them.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", display(path))]
pub struct ItemError {
    /// The path, as bytes.
    pub path: Vec<u8>,
    /// What was being done (`open directory`, `stat`, `read list`...).
    pub op: &'static str,
    /// The system's reason.
    pub source: io::Error,
}

impl ItemError {
    /// An error for `path` during `op`.
    pub fn new(path: &[u8], op: &'static str, source: io::Error) -> ItemError {
        ItemError {
            path: path.to_vec(),
            op,
            source,
        }
    }
}

/// Errors of whole flist operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on a path failed.
    #[error(transparent)]
    Item(#[from] ItemError),
    /// A list file is not in a format flist reads, or is damaged.
    #[error("read list {}: {reason}", display(path))]
    BadList {
        /// The list file.
        path: Vec<u8>,
        /// What is wrong, with the byte offset where it applies.
        reason: String,
    },
    /// An argument is invalid (bad sort key, bad pattern...).
    #[error("{0}")]
    Invalid(String),
}

/// Result of flist operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
