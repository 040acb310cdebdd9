//! The bytes the workloads write, made so that a reader can check every byte it reads back, and
//! the file calls they share (errors name the path and the operation).

use mfu_benches::Rng;
use std::fs::File;
use std::path::Path;

/// A rank's pattern: `len` pseudo-random bytes (seeded by the rank), made once, untimed. Each
/// record or logical file is a window of it stamped with its own number, so that making one
/// costs a copy of 16 bytes and a record read at the wrong place does not compare equal.
#[derive(Debug)]
pub struct Pattern {
    bytes: Vec<u8>,
    rank: u64,
}

impl Pattern {
    /// The pattern of `rank`, `len` bytes (at least 16).
    pub fn new(rank: usize, len: usize) -> Pattern {
        let mut bytes = vec![0; len.max(16)];
        Rng(0x9FA_0000 + rank as u64).fill(&mut bytes);
        Pattern {
            bytes,
            rank: rank as u64,
        }
    }

    /// Item `n`'s `len` bytes into `buf` (resized): the pattern's first `len` bytes with `(rank,
    /// n)` in the first 16.
    pub fn item(&self, n: u64, len: usize, buf: &mut Vec<u8>) {
        buf.clear();
        buf.extend_from_slice(&self.bytes[..len]);
        stamp(buf, self.rank, n);
    }

    /// Stamp item `n` into a buffer already holding the pattern's first bytes (the records of
    /// one rank all have the pattern's length: no copy between them).
    pub fn restamp(&self, n: u64, buf: &mut [u8]) {
        stamp(buf, self.rank, n);
    }

    /// Whether `got` is item `n` of length `len`.
    pub fn is_item(&self, n: u64, len: usize, got: &[u8]) -> bool {
        let mut head = [0u8; 16];
        let h = len.min(16);
        head[..h].copy_from_slice(&self.bytes[..h]);
        stamp(&mut head[..h], self.rank, n);
        got.len() == len && got[..h] == head[..h] && got[h..] == self.bytes[h..len]
    }
}

fn stamp(buf: &mut [u8], rank: u64, n: u64) {
    let mut head = [0u8; 16];
    head[..8].copy_from_slice(&rank.to_le_bytes());
    head[8..].copy_from_slice(&n.to_le_bytes());
    let h = buf.len().min(16);
    buf[..h].copy_from_slice(&head[..h]);
}

/// `what` of `path` failed with `e`, as one message.
pub fn err(what: &str, path: &Path, e: impl std::fmt::Display) -> String {
    format!("{what} {}: {e}", path.display())
}

/// Sync `file` (at `path`) to its device, the end of every write phase.
pub fn sync(file: &File, path: &Path) -> Result<(), String> {
    file.sync_all().map_err(|e| err("fsync", path, e))
}

/// Drop the pages of the file at `path` from the page cache, so that the read phase reads the
/// device (on tmpfs, where the pages are the file, nothing happens). Untimed.
pub fn drop_cache(path: &Path) -> Result<(), String> {
    let f = File::open(path).map_err(|e| err("open", path, e))?;
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)
        .map_err(|e| err("posix_fadvise(DONTNEED)", path, e))
}

/// Remove the file or tree at `path` if there is one.
pub fn remove(path: &Path) -> Result<(), String> {
    let r = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    r.map_err(|e| err("remove", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_recognised_and_any_other_is_not() {
        let p = Pattern::new(3, 100);
        let mut buf = Vec::new();
        p.item(7, 60, &mut buf);
        assert!(p.is_item(7, 60, &buf));
        assert!(!p.is_item(8, 60, &buf));
        assert!(!p.is_item(7, 60, &buf[..59]));
        assert!(!Pattern::new(4, 100).is_item(7, 60, &buf));
        let mut tail = buf.clone();
        tail[40] ^= 1;
        assert!(!p.is_item(7, 60, &tail));
        // Shorter than the stamp: the rank's bytes only (no workload makes items this short).
        p.item(9, 5, &mut buf);
        assert!(p.is_item(9, 5, &buf) && !Pattern::new(5, 100).is_item(9, 5, &buf));
    }
}
