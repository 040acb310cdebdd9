//! Explicit recovery of an aggregate whose last version was cut mid-write.

use crate::error::{Error, Result};
use crate::format::{HEADER_LEN, TRAILER_END, TRAILER_LEN};
use crate::read::{open_regular, read_header, read_versions};
use rustix::fs::OFlags;
use std::fs::File;
use std::os::unix::fs::FileExt;
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

/// Bytes read per step of the backward search for a trailer's end magic.
const SCAN_BLOCK: u64 = 1 << 20;

/// Drop the incomplete tail of the aggregate at `path`: find the last complete trailer whose
/// checksum, footer and header verify (going backwards from the end), and truncate the file
/// right after it. A file that already ends with a valid trailer is left as it is
/// (`dropped() == 0`); one whose last bytes are a trailer that is damaged (or whose footer
/// is) is refused, unchanged: that version is complete but damaged, not cut, and recovery
/// never drops it. Opened without following a symbolic link; a file with more than one
/// hard link is refused (truncating it would change the other names too). Fails, changing
/// nothing, when no complete version is found. Not collective: one process calls it.
pub fn recover(path: &Path) -> Result<Recovered> {
    let (file, st) = open_regular(path, OFlags::RDWR)?;
    if st.st_nlink != 1 {
        return Err(Error::Refused {
            path: path.into(),
            why: format!(
                "has {} hard links: not truncated (the other names would change too)",
                st.st_nlink
            ),
        });
    }
    let len = st.st_size as u64;
    let header = read_header(&file, path, len)?;
    // Only a file whose end is no trailer at all is cut; one whose last trailer is there but
    // damaged, or whose footer is, is left alone (dropping its latest version is not
    // recovering an incomplete one).
    match read_versions(&file, path, &header, len, false) {
        Ok(versions) => {
            return Ok(Recovered {
                version: versions.len() as u64,
                len_before: len,
                len_after: len,
            })
        }
        Err(Error::Cut { .. }) => {}
        Err(e) => return Err(e),
    }
    let mut end = len;
    while let Some(e) = previous_end_magic(&file, path, end - 1)? {
        end = e;
        // Complete: the trailer ending there, its footer, and every trailer back to version 1.
        if let Ok(versions) = read_versions(&file, path, &header, end, false) {
            file.set_len(end)
                .map_err(|e| Error::io(path, format!("truncate to {end} bytes"), e))?;
            file.sync_all()
                .map_err(|e| Error::io(path, "sync after truncating", e))?;
            return Ok(Recovered {
                version: versions.len() as u64,
                len_before: len,
                len_after: end,
            });
        }
    }
    Err(Error::Cut {
        path: path.into(),
        len,
        what: "no complete version found: nothing to recover (left unchanged)".into(),
    })
}

/// The largest `e <= before` such that a trailer's end magic ends at `e` (and a whole trailer
/// fits after the header), searching backwards.
fn previous_end_magic(file: &File, path: &Path, before: u64) -> Result<Option<u64>> {
    let m = TRAILER_END.len() as u64;
    let lowest = HEADER_LEN + TRAILER_LEN;
    let mut hi = before;
    while hi >= lowest {
        let lo = hi.saturating_sub(SCAN_BLOCK).max(lowest - m);
        let mut b = vec![0u8; (hi - lo) as usize];
        file.read_exact_at(&mut b, lo)
            .map_err(|e| Error::io(path, format!("read at offset {lo} (recovery)"), e))?;
        if let Some(i) = b.windows(m as usize).rposition(|w| w == TRAILER_END) {
            return Ok(Some(lo + i as u64 + m));
        }
        if lo <= lowest - m {
            break;
        }
        // Overlap by the magic's length less one: a magic across the blocks' seam is found.
        hi = lo + m - 1;
    }
    Ok(None)
}
