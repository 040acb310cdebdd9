//! Text lists (`docs/formats.md` §3): `path|T` lines, plain path lists, NUL-separated lists.
//!
//! Parallel read: the file is cut into equal byte ranges; a record belongs to the rank whose
//! range holds its first byte, so each rank moves its start forward to the first record that
//! begins at or after it, and ends where the next rank starts.

use super::agree::{agree, bcast_result};
use super::{bad, cannot_hold, create, open_read, read_full_at, RegionWriter, IO_CHUNK, OP_READ};
use crate::error::{ItemError, Result};
use crate::record::{Detail, FileList, FileType};
use std::fs::File;
use steal::{Comm, CommExt};

/// The path and type of a `\n`-separated record: split at the last `|` when exactly one type
/// letter follows it; otherwise the whole line is the path, of unknown type.
pub(super) fn parse_line(line: &[u8]) -> (&[u8], FileType) {
    if let [path @ .., b'|', letter] = line {
        if let Some(kind) = FileType::from_text_letter(*letter) {
            return (path, kind);
        }
    }
    (line, FileType::Unknown)
}

/// Start of the byte range of `rank` when `len` bytes are cut into `size` equal ranges.
fn range_start(len: u64, rank: usize, size: usize) -> u64 {
    (u128::from(len) * rank as u128 / size as u128) as u64
}

/// The first record start at or after `at` in a file of `len` bytes whose records end with
/// `sep`: `at` itself when the byte before it is `sep`, else just after the next `sep`
/// (or `len` when there is none).
fn next_record_start(file: &File, path: &[u8], len: u64, at: u64, sep: u8) -> Result<u64> {
    if at == 0 || at >= len {
        return Ok(at.min(len));
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut from = at - 1;
    while from < len {
        let n = read_full_at(file, &mut buf, from).map_err(|e| ItemError::new(path, OP_READ, e))?;
        if n == 0 {
            break;
        }
        if let Some(i) = buf[..n].iter().position(|&b| b == sep) {
            return Ok(from + i as u64 + 1);
        }
        from += n as u64;
    }
    Ok(len)
}

/// Read this rank's share of a text list of `len` bytes whose records end with `sep` (`\n`:
/// `path|T` or plain lines; NUL: plain paths) (collective).
///
/// The file decides, not each line: it is a `path|T` list only when every line ends in `|T`
/// (as every line `dwalk -l` or mfu-rs writes does). In a plain list, where some line does not,
/// a name that happens to end in `|F` keeps it (`find --print | rm -i -` must not turn the file
/// `a|F` into `a`).
pub(super) fn read(comm: &dyn Comm, path: &[u8], len: u64, sep: u8) -> Result<FileList> {
    let (rank, size) = (comm.rank(), comm.size());
    let mut file = None;
    let start = range_start(len, rank, size);
    let local = (|| {
        if start == 0 || start >= len {
            return Ok(start.min(len));
        }
        let f = take_or_open(&mut file, path)?;
        let s = next_record_start(&f, path, len, start, sep);
        file = Some(f);
        s
    })();
    let start = agree(comm, local)?;
    let starts = comm.allgather_u64(start);
    let end = starts.get(rank + 1).copied().unwrap_or(len);
    let local = (|| {
        let mut list = FileList::new(Detail::Lite);
        // Per record: whether a `|T` suffix was split off.
        let mut split = Vec::new();
        if start >= end {
            return Ok((list, split));
        }
        let f = take_or_open(&mut file, path)?;
        // `buf[..keep]` is an unfinished record carried from the previous read; `buf` starts at
        // byte `base` of the file.
        let mut buf = Vec::new();
        let mut base = start;
        let mut keep = 0;
        while base + (keep as u64) < end {
            let want = (end - base - keep as u64).min(IO_CHUNK as u64) as usize;
            buf.resize(keep + want, 0);
            let n = read_full_at(&f, &mut buf[keep..], base + keep as u64)
                .map_err(|e| ItemError::new(path, OP_READ, e))?;
            if n < want {
                return Err(bad(
                    path,
                    format!(
                        "truncated at byte offset {} (the file had {len} bytes; did it change while being read?)",
                        base + (keep + n) as u64
                    ),
                ));
            }
            let last = base + buf.len() as u64 == end;
            let mut at = 0;
            while let Some(i) = buf[at..].iter().position(|&b| b == sep) {
                push_record(
                    &mut list,
                    &mut split,
                    path,
                    &buf[at..at + i],
                    base + at as u64,
                    sep,
                )?;
                at += i + 1;
            }
            if last && at < buf.len() {
                // The last record of the file, without a final separator.
                push_record(
                    &mut list,
                    &mut split,
                    path,
                    &buf[at..],
                    base + at as u64,
                    sep,
                )?;
                at = buf.len();
            }
            buf.drain(..at);
            base += at as u64;
            keep = buf.len();
        }
        Ok((list, split))
    })();
    let (list, split) = agree(comm, local)?;
    let plain = comm.any(split.iter().any(|&s| !s));
    Ok(if plain && split.iter().any(|&s| s) {
        rejoin(&list, &split)
    } else {
        list
    })
}

/// `list` with the `|T` suffixes that were split off (`split[i]`) put back on the paths, of
/// unknown type: the records of a plain list.
fn rejoin(list: &FileList, split: &[bool]) -> FileList {
    let mut out = list.empty_like();
    let mut line = Vec::new();
    for (e, &was_split) in list.iter().zip(split) {
        if was_split {
            line.clear();
            line.extend_from_slice(e.path);
            line.extend_from_slice(&[b'|', e.kind.text_letter()]);
            out.push(&line, FileType::Unknown, None);
        } else {
            out.push(e.path, e.kind, None);
        }
    }
    out
}

/// The file opened earlier, or `path` opened now.
fn take_or_open(file: &mut Option<File>, path: &[u8]) -> Result<File> {
    match file.take() {
        Some(f) => Ok(f),
        None => open_read(path),
    }
}

/// Add the record `rec` (found at byte `offset`) to `list`, and to `split` whether a `|T`
/// suffix was split off; empty records are skipped.
fn push_record(
    list: &mut FileList,
    split: &mut Vec<bool>,
    path: &[u8],
    rec: &[u8],
    offset: u64,
    sep: u8,
) -> Result<()> {
    if rec.is_empty() {
        return Ok(());
    }
    let (p, kind) = if sep == b'\n' {
        parse_line(rec)
    } else {
        (rec, FileType::Unknown)
    };
    split.push(p.len() < rec.len());
    if p.is_empty() {
        return Err(bad(
            path,
            format!("the line at byte offset {offset} has a type but no path"),
        ));
    }
    list.push(p, kind, None);
    Ok(())
}

/// Bytes of the line of `p`: `p|T\n`.
fn line_bytes(p: &[u8]) -> u64 {
    p.len() as u64 + 3
}

/// Check that every path of `list` can be a line of a text list (named `path`, for messages).
fn check(list: &FileList, path: &[u8]) -> Result<()> {
    for e in list.iter() {
        let why = if e.path.is_empty() {
            "a list record needs a path"
        } else if e.path.contains(&b'\n') {
            "it holds a newline, which a text list cannot represent"
        } else if e.path.contains(&0) {
            "it holds a NUL byte"
        } else {
            continue;
        };
        return Err(cannot_hold(path, e.path, why));
    }
    Ok(())
}

/// Write the lists of all ranks as one text list of `path|T` lines (collective).
pub(super) fn write(comm: &dyn Comm, list: &FileList, path: &[u8]) -> Result<()> {
    agree(comm, check(list, path))?;
    let mine: u64 = list.iter().map(|e| line_bytes(e.path)).sum();
    let (first, _) = comm.offset_and_total(mine);
    // The broadcast keeps every rank from writing before rank 0 has truncated the file.
    bcast_result(comm, 0, || create(path).map(drop), |_, _| {}, |_| ())?;
    let local = (|| {
        if mine == 0 {
            return Ok(());
        }
        let mut out = RegionWriter::open(path, first)?;
        for e in list.iter() {
            out.buf().extend_from_slice(e.path);
            out.buf()
                .extend_from_slice(&[b'|', e.kind.text_letter(), b'\n']);
            out.flush_if_full()?;
        }
        out.finish()
    })();
    agree(comm, local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_split_at_the_last_bar_before_a_type_letter() {
        assert_eq!(parse_line(b"/a/b|F"), (&b"/a/b"[..], FileType::File));
        assert_eq!(
            parse_line(b"/a/delta|pipe_2|F"),
            (&b"/a/delta|pipe_2"[..], FileType::File)
        );
        assert_eq!(parse_line(b"/a/x|D|L"), (&b"/a/x|D"[..], FileType::Symlink));
        assert_eq!(parse_line(b"/a/x|U"), (&b"/a/x"[..], FileType::Unknown));
        assert_eq!(parse_line(b"/a/x|Q"), (&b"/a/x|Q"[..], FileType::Unknown));
        assert_eq!(parse_line(b"/a/x|FF"), (&b"/a/x|FF"[..], FileType::Unknown));
        assert_eq!(parse_line(b"/a/x|"), (&b"/a/x|"[..], FileType::Unknown));
        assert_eq!(parse_line(b"F"), (&b"F"[..], FileType::Unknown));
        assert_eq!(parse_line(b"|F"), (&b""[..], FileType::File));
    }

    #[test]
    fn a_file_is_a_typed_list_only_when_every_line_is_typed() {
        let dir = tempfile::tempdir().unwrap();
        let read_at = |text: &[u8], ranks: usize| {
            let file = dir.path().join(format!("l{ranks}"));
            std::fs::write(&file, text).unwrap();
            let file = file.as_os_str().as_encoded_bytes().to_vec();
            let parts = steal::local::run(ranks, |comm| {
                let l = read(comm, &file, text.len() as u64, b'\n').unwrap();
                l.iter()
                    .map(|e| (e.path.to_vec(), e.kind))
                    .collect::<Vec<_>>()
            });
            parts.concat()
        };
        for ranks in [1, 2, 3] {
            // Plain lines from `find --print`, one name ending in `|F`: kept whole.
            let plain = read_at(b"/u/foo\n/u/foo|F\n/u/bar|D\n/u/baz\n", ranks);
            assert_eq!(
                plain,
                vec![
                    (b"/u/foo".to_vec(), FileType::Unknown),
                    (b"/u/foo|F".to_vec(), FileType::Unknown),
                    (b"/u/bar|D".to_vec(), FileType::Unknown),
                    (b"/u/baz".to_vec(), FileType::Unknown),
                ],
                "{ranks} ranks"
            );
            // A `dwalk -l` list: every line typed, split at the last bar.
            let typed = read_at(b"/u/a|b|F\n/u/c|D\n/u/d|U\n", ranks);
            assert_eq!(
                typed,
                vec![
                    (b"/u/a|b".to_vec(), FileType::File),
                    (b"/u/c".to_vec(), FileType::Dir),
                    (b"/u/d".to_vec(), FileType::Unknown),
                ],
                "{ranks} ranks"
            );
        }
    }

    #[test]
    fn ranges_cover_the_file() {
        assert_eq!(range_start(10, 0, 3), 0);
        assert_eq!(range_start(10, 1, 3), 3);
        assert_eq!(range_start(10, 2, 3), 6);
        assert_eq!(range_start(u64::MAX, 2, 3), u64::MAX / 3 * 2);
    }

    #[test]
    fn record_starts_move_to_the_next_boundary() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"ab\ncd\n\nef").unwrap();
        let len = 9;
        let starts: Vec<u64> = (0..=10)
            .map(|at| next_record_start(&f, b"t", len, at, b'\n').unwrap())
            .collect();
        assert_eq!(starts, vec![0, 3, 3, 3, 6, 6, 6, 7, 9, 9, 9]);
    }
}
