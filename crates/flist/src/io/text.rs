//! Text lists (`docs/formats.md` §3): `path|T` lines, plain path lists, NUL-separated lists.
//!
//! Parallel read: the file is cut into equal byte ranges; a record belongs to the rank whose
//! range holds its first byte, so each rank moves its start forward to the first record that
//! begins at or after it, and ends where the next rank starts.

use super::agree::{agree, bcast_result};
use super::source::Source;
use super::{bad, cannot_hold, create, RegionWriter, IO_CHUNK};
use crate::error::Result;
use crate::path::as_path;
use crate::record::{Detail, FileList, FileType};
use steal::{Comm, CommExt, ReduceOp};

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

/// The first record start at or after `at` in a list of `len` bytes whose records end with
/// `sep`: `at` itself when the byte before it is `sep`, else just after the next `sep`
/// (or `len` when there is none).
fn next_record_start(src: &mut Source<'_>, len: u64, at: u64, sep: u8) -> Result<u64> {
    if at == 0 || at >= len {
        return Ok(at.min(len));
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut from = at - 1;
    while from < len {
        let n = src.read_at(&mut buf, from)?;
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
/// The file decides, not each line: it is a `path|T` list when every line ends in `|T` (as every
/// line `dwalk -l` or mfu-rs writes does), a plain list when no line does. A file with both is
/// refused ([`Error::BadList`](crate::Error::BadList)): it is a typed list that was damaged (a
/// line cut short, a name with a newline split in two), and reading it either way would give
/// names that were never listed. A file whose last record lacks its final separator was
/// perhaps cut short (producer killed, disk full, `head -c`): it is refused unless it is a plain
/// list whose last entry exists under exactly that name, and is not a directory (a cut path is
/// most often the name of one of its directories). Every rank gets the same outcome.
pub(super) fn read(comm: &dyn Comm, src: &mut Source<'_>, len: u64, sep: u8) -> Result<FileList> {
    let path = src.name();
    let (rank, size) = (comm.rank(), comm.size());
    let start = range_start(len, rank, size);
    let local = next_record_start(src, len, start, sep);
    src.phase_done();
    let start = agree(comm, local)?;
    let starts = comm.allgather_u64(start);
    let end = starts.get(rank + 1).copied().unwrap_or(len);
    let local = (|| {
        let mut list = FileList::new(Detail::Lite);
        // Byte offsets of the first line with a `|T` suffix and the first without (MAX: none).
        let mut seen = [u64::MAX; 2];
        // The last record of the file when it has no final separator.
        let mut unterminated = None;
        if start >= end {
            return Ok((list, seen, unterminated));
        }
        // `buf[..keep]` is an unfinished record carried from the previous read; `buf` starts at
        // byte `base` of the file.
        let mut buf = Vec::new();
        let mut base = start;
        let mut keep = 0;
        while base + (keep as u64) < end {
            let want = (end - base - keep as u64).min(IO_CHUNK as u64) as usize;
            buf.resize(keep + want, 0);
            let n = src.read_at(&mut buf[keep..], base + keep as u64)?;
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
                    &mut seen,
                    path,
                    &buf[at..at + i],
                    base + at as u64,
                    sep,
                )?;
                at += i + 1;
            }
            if last && at < buf.len() {
                // The last record of the file, without a final separator.
                unterminated = Some((buf[at..].to_vec(), base + at as u64));
                push_record(
                    &mut list,
                    &mut seen,
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
        Ok((list, seen, unterminated))
    })();
    src.phase_done();
    let (list, mut seen, unterminated) = agree(comm, local)?;
    comm.allreduce(&mut seen, ReduceOp::Min);
    let [typed, untyped] = seen;
    let local = match &unterminated {
        Some((rec, at)) => check_unterminated(path, rec, *at, len, sep, typed != u64::MAX),
        None => Ok(()),
    };
    agree(comm, local)?;
    if typed != u64::MAX && untyped != u64::MAX {
        return Err(bad(
            path,
            format!(
                "not entirely of one format: the line at byte offset {typed} ends in a type (|T, a typed list) but the line at byte offset {untyped} does not (a damaged typed list, or plain names that end in |T: write those as a NUL-separated list)"
            ),
        ));
    }
    Ok(list)
}

/// Check the last record `rec` (at byte offset `at` of a list of `len` bytes) that has no final
/// separator `sep`: only a plain list (`typed` false) whose last entry exists exactly, and is not
/// a directory, is taken.
fn check_unterminated(
    path: &[u8],
    rec: &[u8],
    at: u64,
    len: u64,
    sep: u8,
    typed: bool,
) -> Result<()> {
    let sep_name = if sep == 0 { "NUL" } else { "newline" };
    let cut = format!(
        "ends at byte offset {len} without a final {sep_name}: the last record (from byte offset {at}) may have been cut short (producer killed, disk full, head -c)"
    );
    if typed {
        return Err(bad(
            path,
            format!("{cut}; refusing a typed list without its end"),
        ));
    }
    // A cut inside a path most often leaves the name of one of its directories (`/`, the
    // project directory...): an unterminated last entry that is a directory is refused too.
    let why = match std::fs::symlink_metadata(as_path(rec)) {
        Ok(m) if !m.is_dir() => return Ok(()),
        Ok(_) => "is a directory, perhaps the start of a longer name".to_string(),
        Err(e) => format!("does not exist ({e})"),
    };
    Err(bad(
        path,
        format!(
            "{cut}, and its last entry \"{}\" {why}; add the final {sep_name} if the list is complete",
            crate::path::display(rec).escape_debug()
        ),
    ))
}

/// Add the record `rec` (found at byte `offset`) to `list`, and note `offset` in `seen[0]` when
/// a `|T` suffix was split off, else in `seen[1]` (each keeps its smallest offset); empty
/// records are skipped.
fn push_record(
    list: &mut FileList,
    seen: &mut [u64; 2],
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
    let slot = &mut seen[usize::from(p.len() == rec.len())];
    *slot = (*slot).min(offset);
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
pub(super) fn check(list: &FileList, path: &[u8]) -> Result<()> {
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

    /// Read `text` as a `\n` list at `ranks` ranks: the records, or every rank's error text.
    /// Read twice, from a list file and as a stream that rank 0 spooled and serves in pieces
    /// of 5 bytes: both must give the same.
    fn read_text(
        dir: &std::path::Path,
        text: &[u8],
        ranks: usize,
    ) -> Result<Vec<(Vec<u8>, FileType)>, String> {
        let file = dir.join(format!("l{ranks}"));
        std::fs::write(&file, text).unwrap();
        let file = file.as_os_str().as_encoded_bytes().to_vec();
        let spool = std::fs::File::open(crate::path::as_path(&file)).unwrap();
        let mut outcomes = Vec::new();
        for served in [false, true] {
            let parts = steal::local::run(ranks, |comm| {
                let mut src = if served {
                    let mine = (comm.rank() == 0).then_some(&spool);
                    Source::served(comm, &file, mine, 5)
                } else {
                    Source::file(&file)
                };
                read(comm, &mut src, text.len() as u64, b'\n')
                    .map(|l| {
                        l.iter()
                            .map(|e| (e.path.to_vec(), e.kind))
                            .collect::<Vec<_>>()
                    })
                    .map_err(|e| e.to_string())
            });
            let errors: Vec<_> = parts.iter().filter_map(|p| p.clone().err()).collect();
            outcomes.push(if errors.is_empty() {
                Ok(parts.into_iter().flat_map(|p| p.unwrap()).collect())
            } else {
                assert_eq!(errors.len(), ranks, "every rank fails, or none");
                assert!(errors.iter().all(|e| *e == errors[0]), "{errors:?}");
                Err(errors[0].clone())
            });
        }
        assert_eq!(outcomes[0], outcomes[1], "from a file, then served");
        outcomes.pop().unwrap()
    }

    #[test]
    fn a_file_is_typed_when_every_line_is_plain_when_none_and_refused_when_mixed() {
        let dir = tempfile::tempdir().unwrap();
        for ranks in [1, 2, 3] {
            // Plain lines from `find --print`.
            let plain = read_text(dir.path(), b"/u/foo\n/u/foo.c\n/u/bar baz\n", ranks);
            assert_eq!(
                plain.unwrap(),
                vec![
                    (b"/u/foo".to_vec(), FileType::Unknown),
                    (b"/u/foo.c".to_vec(), FileType::Unknown),
                    (b"/u/bar baz".to_vec(), FileType::Unknown),
                ],
                "{ranks} ranks"
            );
            // A `dwalk -l` list: every line typed, split at the last bar.
            let typed = read_text(dir.path(), b"/u/a|b|F\n/u/c|D\n/u/d|U\n", ranks);
            assert_eq!(
                typed.unwrap(),
                vec![
                    (b"/u/a|b".to_vec(), FileType::File),
                    (b"/u/c".to_vec(), FileType::Dir),
                    (b"/u/d".to_vec(), FileType::Unknown),
                ],
                "{ranks} ranks"
            );
            // Both kinds of line: a damaged typed list (here a name with a newline written by
            // `dwalk -l`, whose first half `/u/foo` was never listed). Refused.
            let mixed = read_text(dir.path(), b"/u/a|F\n/u/foo\nbar|F\n/u/baz|D\n", ranks);
            let err = mixed.unwrap_err();
            assert!(err.contains("not entirely of one format"), "{err}");
            assert!(
                err.contains("byte offset 0") && err.contains("byte offset 7"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_list_without_its_final_newline_is_taken_only_when_plain_and_its_last_entry_exists() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("report.txt");
        std::fs::write(&here, b"x").unwrap();
        let here = here.as_os_str().as_encoded_bytes();
        for ranks in [1, 2, 3] {
            // A typed list cut inside its last line: `report.txt` of `report.txt.bak|F`.
            let cut = [b"/u/a|F\n/u/b|D\n".as_slice(), here].concat();
            let err = read_text(dir.path(), &cut, ranks).unwrap_err();
            assert!(err.contains("without a final newline"), "{err}");
            // Cut just before its final newline: every line typed, still refused.
            let err = read_text(dir.path(), b"/u/a|F\n/u/b|D", ranks).unwrap_err();
            assert!(err.contains("refusing a typed list"), "{err}");
            // A plain list whose last name does not exist, or is a directory: refused, named.
            let err = read_text(dir.path(), b"/u/a\n/nonexistent/rep", ranks).unwrap_err();
            assert!(err.contains("/nonexistent/rep"), "{err}");
            let err = read_text(dir.path(), b"/u/a\n/", ranks).unwrap_err();
            assert!(err.contains("is a directory"), "{err}");
            // A plain list whose last name exists exactly: taken (`printf %s PATH`).
            let ok = read_text(dir.path(), &[b"/u/a\n".as_slice(), here].concat(), ranks);
            assert_eq!(
                ok.unwrap(),
                vec![
                    (b"/u/a".to_vec(), FileType::Unknown),
                    (here.to_vec(), FileType::Unknown)
                ]
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
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t");
        std::fs::File::create(&t)
            .unwrap()
            .write_all(b"ab\ncd\n\nef")
            .unwrap();
        let t = t.as_os_str().as_encoded_bytes();
        let len = 9;
        let mut src = Source::file(t);
        let starts: Vec<u64> = (0..=10)
            .map(|at| next_record_start(&mut src, len, at, b'\n').unwrap())
            .collect();
        assert_eq!(starts, vec![0, 3, 3, 3, 6, 6, 6, 7, 9, 9, 9]);
    }
}
