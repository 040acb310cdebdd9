//! Explicit recovery of an aggregate whose last version was cut mid-write.

use crate::error::Result;
use std::path::Path;

/// What [`recover`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// The latest complete version, now the file's last.
    pub version: u64,
    /// The file's length before (bytes).
    pub len_before: u64,
    /// The file's length after (bytes): the end of that version's trailer.
    pub len_after: u64,
}

impl Recovered {
    /// Bytes dropped (the incomplete tail).
    pub fn dropped(&self) -> u64 {
        self.len_before - self.len_after
    }
}

/// Drop the incomplete tail of the aggregate at `path`: find the last complete trailer whose
/// checksum, footer and header verify (going backwards from the end), and truncate the file
/// right after it. A file that already ends with a valid trailer is left as it is
/// (`dropped() == 0`). Opened without following a symbolic link; a file with more than one
/// hard link is refused (truncating it would change the other names too). Fails, changing
/// nothing, when no complete version is found. Not collective: one process calls it.
pub fn recover(path: &Path) -> Result<Recovered> {
    let _ = path;
    todo!()
}
