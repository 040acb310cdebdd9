//! The search of one chunk of one file: the chunk's whole lines read (a chunk owns the lines
//! that start inside its byte range, so the chunks of a file tile it and a line that crosses a
//! boundary is searched once, by the chunk it starts in), its newlines counted (for the line
//! numbers of the chunks after it), and the lines the pattern selects collected with grep's
//! searcher.

use grep_regex::RegexMatcher;
use grep_searcher::{Searcher, SearcherBuilder, Sink, SinkMatch};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// A chunk to search: the lines of file `path` that start in bytes `[start, end)`. A
/// work-queue item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// The file's place in the output order (global over ranks).
    pub file: u64,
    /// This chunk's number in the file, from 0.
    pub chunk: u64,
    /// The path to open.
    #[serde(with = "serde_bytes")]
    pub path: Vec<u8>,
    /// First byte of the range (bytes).
    pub start: u64,
    /// End of the range (bytes, exclusive); `u64::MAX`: to the end of the file, whatever its
    /// size is now.
    pub end: u64,
    /// The file's [`Stamp`] when it was walked (`None` when not known: read from a list): the
    /// identity before the read that a checkpoint's mark needs, without an `fstat` more.
    pub listed: Option<Stamp>,
}

/// What the search of one chunk found. Travels to the rank that prints the file (steal's
/// typed encoding).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    /// The file's place in the output order.
    pub file: u64,
    /// The chunk's number in the file.
    pub chunk: u64,
    /// Newline bytes in the chunk (its lines, but for a last line without one).
    pub newlines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Lines selected (matching, or not matching with `-v`), at most `max_count`.
    pub selected: u64,
    /// The chunk holds a NUL byte: the file is binary.
    pub binary: bool,
    /// Line number in the chunk (from 1) of each kept line.
    pub numbers: Vec<u64>,
    /// The kept lines, each ended by `\n`.
    #[serde(with = "serde_bytes")]
    pub lines: Vec<u8>,
    /// The chunk could not be read (the message names the path and the operation).
    pub error: Option<String>,
}

/// How chunks are searched (the same for every chunk of a run).
pub struct Searching {
    /// The compiled pattern.
    pub matcher: RegexMatcher,
    /// Select the lines that do not match (`-v`).
    pub invert: bool,
    /// Stop after this many selected lines per file (`-m`).
    pub max_count: Option<u64>,
    /// Keep the selected lines (for printing them); otherwise only count them.
    pub keep_lines: bool,
    /// One selected line is enough (`-l`, `-L`, `-q`).
    pub first_only: bool,
    /// `--noatime`: how files are opened.
    pub noatime: std::sync::Arc<flist::noatime::NoAtime>,
}

impl Searching {
    fn searcher(&self) -> Searcher {
        let limit = if self.first_only {
            Some(1)
        } else {
            self.max_count
        };
        SearcherBuilder::new()
            .line_number(true)
            .invert_match(self.invert)
            .max_matches(limit)
            // Bytes are bytes: no transcoding of files that start with a byte-order mark.
            .bom_sniffing(false)
            .build()
    }

    /// Search `chunk`.
    pub fn search(&self, chunk: &Chunk) -> Found {
        self.search_file(chunk, false).0
    }

    /// Search `chunk`, with the file's [`Stamp`] for its mark: as walked ([`Chunk::listed`]),
    /// or else when it was the same before and after the read (`None`: it changed meanwhile,
    /// or could not be read).
    pub fn search_stamped(&self, chunk: &Chunk) -> (Found, Option<Stamp>) {
        self.search_file(chunk, true)
    }

    fn search_file(&self, chunk: &Chunk, stamped: bool) -> (Found, Option<Stamp>) {
        let mut found = Found {
            file: chunk.file,
            chunk: chunk.chunk,
            ..Found::default()
        };
        let shown = flist::path::display(&chunk.path);
        let mut stamp = None;
        // The reader of a file's first chunk counts it when the kernel refuses O_NOATIME.
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
        let opened = self.noatime.open_part(chunk.chunk == 0, flags, |f| {
            flist::at::open_long(&chunk.path, f)
        });
        let data = match opened
            .map(File::from)
            .map_err(|e| format!("open {shown}: {}", std::io::Error::from(e)))
            .and_then(|f| {
                // The identity before the read: as walked, else taken now. A walked file's
                // stamp is the mark's as it is: a rerun takes the findings only while the file
                // still has it, and any change since the walk (during the read included) moved
                // its ctime on. A stamp taken now must be taken again after the read: equal,
                // the file did not change while read.
                let (before, again) = match (stamped, chunk.listed) {
                    (false, _) => (None, false),
                    (true, Some(listed)) => (Some(listed), false),
                    (true, None) => (rustix::fs::fstat(&f).ok().map(|s| stamp_of(&s)), true),
                };
                let data = read_lines(&f, chunk.start, chunk.end)
                    .map_err(|e| format!("read {shown}: {e}"))?;
                stamp = match before {
                    Some(before) if again => {
                        let after = rustix::fs::fstat(&f).ok().map(|s| stamp_of(&s));
                        (after == Some(before)).then_some(before)
                    }
                    before => before,
                };
                Ok(data)
            }) {
            Ok(d) => d,
            Err(e) => {
                found.error = Some(e);
                return (found, None);
            }
        };
        let mut data = data;
        found.bytes = data.len() as u64;
        found.newlines = memchr::memchr_iter(b'\n', &data).count() as u64;
        if memchr::memchr(0, &data).is_some() {
            // GNU grep reads a binary file's NUL bytes as line ends.
            found.binary = true;
            for b in data.iter_mut().filter(|b| **b == 0) {
                *b = b'\n';
            }
        }
        let keep = self.keep_lines && !found.binary;
        let mut sink = Collect {
            found: &mut found,
            keep,
        };
        if let Err(e) = self
            .searcher()
            .search_slice(&self.matcher, &data, &mut sink)
        {
            found.error = Some(format!("search {shown}: {e}"));
            stamp = None;
        }
        (found, stamp)
    }
}

pub use crate::engine::checkpoint::{stamp_of, Stamp};

struct Collect<'a> {
    found: &'a mut Found,
    keep: bool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;
    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.found.selected += 1;
        if self.keep {
            let line = mat.bytes();
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            self.found.numbers.push(mat.line_number().unwrap_or(0));
            self.found.lines.extend_from_slice(line);
            self.found.lines.push(b'\n');
        }
        Ok(true)
    }
}

/// Bytes read at once while looking for the end of a line.
const SCAN: usize = 64 << 10;

/// The whole lines of `file` that start in `[start, end)`.
fn read_lines(file: &File, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
    let from = if start == 0 {
        0
    } else {
        line_start(file, start)?
    };
    if from >= end {
        return Ok(Vec::new());
    }
    let mut data = Vec::new();
    if end == u64::MAX {
        read_to_eof(file, from, &mut data)?;
        return Ok(data);
    }
    let want = (end - from) as usize;
    data.resize(want, 0);
    let got = read_at_most(file, from, &mut data)?;
    data.truncate(got);
    if got < want || data.last() == Some(&b'\n') {
        return Ok(data);
    }
    // The last line goes on past `end`: read to its newline (or the end of the file).
    let mut at = end;
    let mut block = vec![0u8; SCAN];
    loop {
        let n = read_at_most(file, at, &mut block)?;
        if n == 0 {
            return Ok(data);
        }
        if let Some(i) = memchr::memchr(b'\n', &block[..n]) {
            data.extend_from_slice(&block[..=i]);
            return Ok(data);
        }
        data.extend_from_slice(&block[..n]);
        at += n as u64;
    }
}

/// The first line start at or after `at` (> 0): just after the first newline at or after
/// `at - 1`, or the end of the file.
fn line_start(file: &File, at: u64) -> std::io::Result<u64> {
    let mut pos = at - 1;
    let mut block = vec![0u8; SCAN];
    loop {
        let n = read_at_most(file, pos, &mut block)?;
        if n == 0 {
            return Ok(pos);
        }
        if let Some(i) = memchr::memchr(b'\n', &block[..n]) {
            return Ok(pos + i as u64 + 1);
        }
        pos += n as u64;
    }
}

/// Read from `at` until `buf` is full or the file ends; the bytes read.
fn read_at_most(file: &File, at: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn read_to_eof(file: &File, at: u64, data: &mut Vec<u8>) -> std::io::Result<()> {
    let mut at = at;
    loop {
        let old = data.len();
        data.resize(old + SCAN.max(old / 2), 0);
        let n = read_at_most(file, at, &mut data[old..])?;
        data.truncate(old + n);
        if n == 0 {
            return Ok(());
        }
        at += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn chunks_tile_the_lines() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let text = b"aaaa\nbb\n\ncccccccc\nd";
        f.write_all(text).unwrap();
        let file = f.reopen().unwrap();
        for size in 1..=text.len() as u64 + 1 {
            let mut all = Vec::new();
            let mut start = 0;
            while start < text.len() as u64 {
                let end = if start + size >= text.len() as u64 {
                    u64::MAX
                } else {
                    start + size
                };
                let part = read_lines(&file, start, end).unwrap();
                // Every chunk but an empty one is whole lines.
                if !part.is_empty() && end != u64::MAX {
                    assert_eq!(part.last(), Some(&b'\n'), "size {size} at {start}");
                }
                all.extend_from_slice(&part);
                start = start.saturating_add(size);
            }
            assert_eq!(all, text, "chunk size {size}");
        }
    }
}
