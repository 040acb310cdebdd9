//! Text lists (`docs/formats.md` §3): `path|T` lines, plain path lists, NUL-separated lists.
//!
//! Parallel read: the file is cut into equal byte ranges; a record belongs to the rank whose
//! range holds its first byte, so each rank moves its start forward to the first record that
//! begins at or after it, and ends where the next rank starts.

use super::source::Source;
use super::{
    bad, cannot_hold, create, read_exact_at, Dest, InputFormat, RegionWriter, IO_CHUNK,
    TEXT_HEADER, TEXT_TRAILER,
};
use crate::error::Result;
use crate::record::{Detail, FileList, FileType};
use std::fs::File;
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

/// Where the records of a text list lie and how they are read, as rank 0 found out
/// ([`Layout::probe`]) and sent to every rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Layout {
    /// The byte that ends a record: `\n`, or NUL.
    sep: u8,
    /// Lines are `path|T`; false: each whole record is a path.
    typed: bool,
    /// Byte offset of the first record (after the header line).
    start: u64,
    /// Byte offset just past the last record (before the trailer line).
    end: u64,
    /// The number of entries the trailer states (a list that starts with the header).
    count: Option<u64>,
}

impl Layout {
    /// A NUL-separated list of `len` bytes: plain paths, no header.
    pub(super) fn nul(len: u64) -> Layout {
        Layout {
            sep: 0,
            typed: false,
            start: 0,
            end: len,
            count: None,
        }
    }

    /// The layout of the `\n` list `path` (`file`, `len` bytes, whose first bytes are
    /// `prefix`) read as `format` says. Run on rank 0. A list with the header must end with its
    /// trailer line, or it is refused as incomplete.
    pub(super) fn probe(
        file: &File,
        path: &[u8],
        prefix: &[u8],
        len: u64,
        format: InputFormat,
    ) -> Result<Layout> {
        let header = TEXT_HEADER.as_bytes();
        let headed =
            prefix.starts_with(header) && matches!(prefix.get(header.len()), None | Some(b'\n'));
        if !headed {
            return Ok(Layout {
                sep: b'\n',
                typed: format == InputFormat::Typed,
                start: 0,
                end: len,
                count: None,
            });
        }
        if format == InputFormat::Plain {
            return Err(bad(
                path,
                format!("its first line is \"{TEXT_HEADER}\": it is a typed list (path|T lines), not a plain one; read it without --input-format plain"),
            ));
        }
        let start = header.len() as u64 + 1;
        // The last line: `#mfu-rs end N\n`, at most 33 bytes.
        let mut tail = vec![0u8; len.min(64) as usize];
        let from = len - tail.len() as u64;
        read_exact_at(file, path, &mut tail, from)?;
        let trailer = tail
            .strip_suffix(b"\n")
            .map(|t| &t[t.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)..])
            .filter(|line| len - (line.len() as u64 + 1) >= start)
            .and_then(|line| Some((line.len() as u64 + 1, parse_trailer(line)?)));
        let Some((trailer_len, count)) = trailer else {
            return Err(bad(
                path,
                format!("list is incomplete: no trailer line ({TEXT_TRAILER}N) after its entries (the {len} bytes end without it: the writer was interrupted, or the list was cut); nothing read"),
            ));
        };
        Ok(Layout {
            sep: b'\n',
            typed: true,
            start,
            end: len - trailer_len,
            count: Some(count),
        })
    }
}

/// The count of a trailer line (without its newline): `#mfu-rs end N`, `N` decimal digits.
fn parse_trailer(line: &[u8]) -> Option<u64> {
    let digits = line.strip_prefix(TEXT_TRAILER.as_bytes())?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Append the header line of a typed list to `out`.
pub(super) fn header(out: &mut Vec<u8>) {
    out.extend_from_slice(TEXT_HEADER.as_bytes());
    out.push(b'\n');
}

/// Append the trailer line of a typed list of `count` entries to `out`.
pub(super) fn trailer(count: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("{TEXT_TRAILER}{count}\n").as_bytes());
}

/// Start of the byte range of `rank` when the bytes `start..end` are cut into `size` equal
/// ranges.
fn range_start(start: u64, end: u64, rank: usize, size: usize) -> u64 {
    start + (u128::from(end - start) * rank as u128 / size as u128) as u64
}

/// The first record start at or after `at` among the records `start..end` that end with `sep`:
/// `at` itself when the byte before it is `sep`, else just after the next `sep` (or `end`
/// when there is none).
fn next_record_start(src: &mut Source<'_>, start: u64, end: u64, at: u64, sep: u8) -> Result<u64> {
    if at <= start || at >= end {
        return Ok(at.clamp(start, end));
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut from = at - 1;
    while from < end {
        let n = src.read_at(&mut buf, from)?;
        if n == 0 {
            break;
        }
        if let Some(i) = buf[..n].iter().position(|&b| b == sep) {
            return Ok((from + i as u64 + 1).min(end));
        }
        from += n as u64;
    }
    Ok(end)
}

/// Read this rank's share of the records of a text list laid out as `layout` says
/// (collective). Every rank gets the same outcome.
///
/// A typed list whose line is not `path|T` is refused ([`Error::BadList`](crate::Error::BadList)):
/// it was damaged (a line cut short, a name with a newline split in two), and reading it would
/// give names that were never listed. A list whose last record lacks its final separator was
/// perhaps cut short (producer killed, disk full, `head -c`): it is refused unless it is plain
/// and holds exactly one entry (`printf %s PATH`) that exists and is not a directory. A list
/// with a trailer must hold the number of entries the trailer states.
pub(super) fn read(comm: &dyn Comm, src: &mut Source<'_>, layout: &Layout) -> Result<FileList> {
    let path = src.name();
    let Layout {
        sep,
        typed,
        start: first,
        end: stop,
        count,
    } = *layout;
    let (rank, size) = (comm.rank(), comm.size());
    let start = range_start(first, stop, rank, size);
    let local = next_record_start(src, first, stop, start, sep);
    src.phase_done();
    let start = comm.agree(local)?;
    let starts = comm.allgather_u64(start);
    let end = starts.get(rank + 1).copied().unwrap_or(stop);
    let local = (|| {
        let mut list = FileList::new(Detail::Lite);
        // Byte offset of the first line of a typed list that is not `path|T` (MAX: none).
        let mut untyped = u64::MAX;
        // Byte offset of the last record when it has no final separator.
        let mut unterminated = None;
        if start >= end {
            return Ok((list, untyped, unterminated));
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
                        "truncated at byte offset {} (the list had {stop} bytes of records; did it change while being read?)",
                        base + (keep + n) as u64
                    ),
                ));
            }
            let last = base + buf.len() as u64 == end;
            let mut at = 0;
            let mut push = |rec: &[u8], offset: u64| {
                push_record(&mut list, &mut untyped, path, rec, offset, sep, typed)
            };
            while let Some(i) = buf[at..].iter().position(|&b| b == sep) {
                push(&buf[at..at + i], base + at as u64)?;
                at += i + 1;
            }
            if last && at < buf.len() {
                // The last record of the file, without a final separator.
                unterminated = Some(base + at as u64);
                push(&buf[at..], base + at as u64)?;
                at = buf.len();
            }
            buf.drain(..at);
            base += at as u64;
            keep = buf.len();
        }
        Ok((list, untyped, unterminated))
    })();
    src.phase_done();
    let (list, untyped, unterminated) = comm.agree(local)?;
    let mut firsts = [untyped];
    comm.allreduce(&mut firsts, ReduceOp::Min);
    let [untyped] = firsts;
    let read = comm.sum(list.len() as u64);
    if untyped != u64::MAX {
        return Err(bad(
            path,
            format!(
                "the line at byte offset {untyped} is not path|T in a typed list: the list is damaged (a line cut short, a name with a newline split in two); nothing read"
            ),
        ));
    }
    // Only the last rank with records can hold the unterminated one; its verdict is every
    // rank's.
    let local = match unterminated {
        Some(at) => check_unterminated(path, &list, at, stop, sep, typed || read != 1),
        None => Ok(()),
    };
    comm.agree(local)?;
    if let Some(count) = count.filter(|&c| c != read) {
        return Err(bad(
            path,
            format!("list is incomplete: its trailer counts {count} entries but {read} were read; nothing read"),
        ));
    }
    Ok(list)
}

/// Check the last record of the list (the last of `list`, found at byte offset `at` of a list
/// whose records end at byte `stop`) that has no final separator `sep`: refused when `many`
/// (a typed list, or more than one entry: it may have been cut inside its last line); a single
/// plain entry (`printf %s PATH`) is taken when it exists under exactly that name and is not a
/// directory (a cut inside a path most often leaves one of its directories, or nothing).
fn check_unterminated(
    path: &[u8],
    list: &FileList,
    at: u64,
    stop: u64,
    sep: u8,
    many: bool,
) -> Result<()> {
    let sep_name = if sep == 0 { "NUL" } else { "newline" };
    let cut = format!(
        "ends at byte offset {stop} without a final {sep_name}: the last record (from byte offset {at}) may have been cut short (producer killed, disk full, head -c)"
    );
    if many {
        return Err(bad(
            path,
            format!("{cut}; refusing a list of more than one entry, or a typed one, without its end (add the final {sep_name} if the list is complete)"),
        ));
    }
    let Some(rec) = list.iter().last().map(|e| e.path) else {
        return Ok(());
    };
    let why = match std::fs::symlink_metadata(crate::path::as_path(rec)) {
        Ok(m) if !m.is_dir() => return Ok(()),
        Ok(_) => "is a directory, perhaps the start of a longer name".to_string(),
        Err(e) => format!("does not exist ({e})"),
    };
    Err(bad(
        path,
        format!(
            "{cut}, and its one entry \"{}\" {why}; add the final {sep_name} if the list is complete",
            crate::path::display(rec).escape_debug()
        ),
    ))
}

/// Add the record `rec` (found at byte `offset`) to `list`: in a `typed` `\n` list split at its
/// type suffix, noting in `untyped` the smallest offset of a line without one; otherwise
/// whole. Empty records are skipped.
fn push_record(
    list: &mut FileList,
    untyped: &mut u64,
    path: &[u8],
    rec: &[u8],
    offset: u64,
    sep: u8,
    typed: bool,
) -> Result<()> {
    if rec.is_empty() {
        return Ok(());
    }
    if !(typed && sep == b'\n') {
        list.push(rec, FileType::Unknown, None);
        return Ok(());
    }
    let (p, kind) = parse_line(rec);
    if p.len() == rec.len() {
        *untyped = (*untyped).min(offset);
        return Ok(());
    }
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

/// Write the lists of all ranks as one typed text list (collective): the header line (rank 0,
/// first), every rank's `path|T` lines at its offset, the trailer with the count of all ranks'
/// records (rank 0, last in the file).
pub(super) fn write(comm: &dyn Comm, list: &FileList, dest: Dest<'_>) -> Result<()> {
    let path = dest.path;
    comm.agree(check(list, path))?;
    let mine: u64 = list.iter().map(|e| line_bytes(e.path)).sum();
    let (first, total) = comm.offset_and_total(mine);
    let count = comm.sum(list.len() as u64);
    let mut head = Vec::new();
    header(&mut head);
    let body = head.len() as u64;
    // The broadcast keeps every rank from writing before rank 0 has truncated the file.
    comm.bcast_with(0, || create(dest).map(drop))?;
    let local = (|| {
        if comm.rank() == 0 {
            let mut ends = RegionWriter::open(dest, 0)?;
            ends.buf().extend_from_slice(&head);
            ends.finish()?;
            let mut ends = RegionWriter::open(dest, body + total)?;
            trailer(count, ends.buf());
            ends.finish()?;
        }
        if mine == 0 {
            return Ok(());
        }
        let mut out = RegionWriter::open(dest, body + first)?;
        for e in list.iter() {
            out.buf().extend_from_slice(e.path);
            out.buf()
                .extend_from_slice(&[b'|', e.kind.text_letter(), b'\n']);
            out.flush_if_full()?;
        }
        out.finish()
    })();
    comm.agree(local)
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

    /// Read `text` as a `\n` list at `ranks` ranks, as `format` says: the records, or every
    /// rank's error text. Read twice, from a list file and as a stream that rank 0 spooled and
    /// serves in pieces of 5 bytes: both must give the same.
    fn read_as(
        dir: &std::path::Path,
        text: &[u8],
        ranks: usize,
        format: InputFormat,
    ) -> Result<Vec<(Vec<u8>, FileType)>, String> {
        let file = dir.join(format!("l{ranks}"));
        std::fs::write(&file, text).unwrap();
        let file = file.as_os_str().as_encoded_bytes().to_vec();
        let spool = std::fs::File::open(crate::path::as_path(&file)).unwrap();
        let prefix = &text[..text.len().min(64 << 10)];
        let layout = Layout::probe(&spool, &file, prefix, text.len() as u64, format)
            .map_err(|e| e.to_string())?;
        let mut outcomes = Vec::new();
        for served in [false, true] {
            let parts = steal::local::run(ranks, |comm| {
                let mut src = if served {
                    let mine = (comm.rank() == 0).then_some(&spool);
                    Source::served(comm, &file, mine, 5)
                } else {
                    Source::file(&file)
                };
                read(comm, &mut src, &layout)
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

    fn read_text(
        dir: &std::path::Path,
        text: &[u8],
        ranks: usize,
    ) -> Result<Vec<(Vec<u8>, FileType)>, String> {
        read_as(dir, text, ranks, InputFormat::Auto)
    }

    fn plain(paths: &[&str]) -> Vec<(Vec<u8>, FileType)> {
        paths
            .iter()
            .map(|p| (p.as_bytes().to_vec(), FileType::Unknown))
            .collect()
    }

    #[test]
    fn a_list_is_typed_only_when_it_says_so_or_the_user_does() {
        let dir = tempfile::tempdir().unwrap();
        for ranks in [1, 2, 3] {
            // `find -print` beside files named `x|F` and `y|D`: plain, every whole line a path
            // (read as typed, they would name `x` and `y`, never listed).
            let find = b"/u/x\n/u/x|F\n/u/y|D\n/u/bar baz\n";
            assert_eq!(
                read_text(dir.path(), find, ranks).unwrap(),
                plain(&["/u/x", "/u/x|F", "/u/y|D", "/u/bar baz"]),
                "{ranks} ranks"
            );
            // Every line of it typed-looking: still plain.
            assert_eq!(
                read_text(dir.path(), b"/u/x|F\n/u/y|D\n", ranks).unwrap(),
                plain(&["/u/x|F", "/u/y|D"])
            );
            assert_eq!(
                read_as(dir.path(), find, ranks, InputFormat::Plain).unwrap(),
                plain(&["/u/x", "/u/x|F", "/u/y|D", "/u/bar baz"])
            );
            // mfu-rs' own list: header, lines split at the last bar, trailer.
            let typed = b"#mfu-rs typed list v1\n/u/a|b|F\n/u/c|D\n/u/d|U\n#mfu-rs end 3\n";
            let want = vec![
                (b"/u/a|b".to_vec(), FileType::File),
                (b"/u/c".to_vec(), FileType::Dir),
                (b"/u/d".to_vec(), FileType::Unknown),
            ];
            for format in [InputFormat::Auto, InputFormat::Typed] {
                assert_eq!(read_as(dir.path(), typed, ranks, format).unwrap(), want);
            }
            // Told it is plain, a typed list is refused rather than read as wrong names.
            let err = read_as(dir.path(), typed, ranks, InputFormat::Plain).unwrap_err();
            assert!(err.contains("it is a typed list"), "{err}");
            // `dwalk -l`'s headerless list, when the user says it is typed.
            assert_eq!(
                read_as(
                    dir.path(),
                    b"/u/a|b|F\n/u/c|D\n/u/d|U\n",
                    ranks,
                    InputFormat::Typed
                )
                .unwrap(),
                want
            );
            // A typed list with a line that is not `path|T` (a name with a newline written by
            // `dwalk -l`, whose first half `/u/foo` was never listed): refused.
            let err = read_as(
                dir.path(),
                b"/u/a|F\n/u/foo\nbar|F\n/u/baz|D\n",
                ranks,
                InputFormat::Typed,
            )
            .unwrap_err();
            assert!(err.contains("byte offset 7 is not path|T"), "{err}");
            let err = read_text(
                dir.path(),
                b"#mfu-rs typed list v1\n/u/a|F\n/u/foo\nbar|F\n#mfu-rs end 3\n",
                ranks,
            )
            .unwrap_err();
            assert!(err.contains("byte offset 29 is not path|T"), "{err}");
            // An empty typed list.
            assert_eq!(
                read_text(dir.path(), b"#mfu-rs typed list v1\n#mfu-rs end 0\n", ranks).unwrap(),
                vec![]
            );
        }
    }

    #[test]
    fn a_typed_list_without_its_trailer_or_with_another_count_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let whole = b"#mfu-rs typed list v1\n/u/a|F\n/u/b|D\n/u/c|F\n#mfu-rs end 3\n";
        for ranks in [1, 2, 3] {
            assert_eq!(read_text(dir.path(), whole, ranks).unwrap().len(), 3);
            // Cut anywhere: before the trailer, inside it, between entries, in the header.
            for cut in 1..whole.len() {
                let err = read_text(dir.path(), &whole[..cut], ranks);
                // A header cut short is no header: a plain list of one unterminated entry,
                // whose name is the cut header (no such file is there to act on).
                if cut < TEXT_HEADER.len() {
                    assert!(err.unwrap_err().contains("does not exist"));
                    continue;
                }
                let err = err.unwrap_err();
                assert!(err.contains("list is incomplete"), "cut at {cut}: {err}");
            }
            // A trailer whose count is not the number of entries.
            for wrong in [&b"2"[..], b"4", b"0", b"03x", b""] {
                let text = [
                    &b"#mfu-rs typed list v1\n/u/a|F\n/u/b|D\n/u/c|F\n#mfu-rs end "[..],
                    wrong,
                    b"\n",
                ]
                .concat();
                let err = read_text(dir.path(), &text, ranks).unwrap_err();
                assert!(err.contains("list is incomplete"), "{err}");
            }
        }
    }

    #[test]
    fn a_list_without_its_final_newline_is_refused_unless_it_holds_one_plain_entry() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("a.txt");
        std::fs::write(&here, b"x").unwrap();
        let here = here.as_os_str().as_encoded_bytes();
        for ranks in [1, 2, 3] {
            // A plain list cut inside its last line: `a.txt` of `a.txt.bak`, which exists.
            let cut = [b"/u/b\n".as_slice(), here].concat();
            let err = read_text(dir.path(), &cut, ranks).unwrap_err();
            assert!(err.contains("without a final newline"), "{err}");
            // A headerless typed list cut just before its final newline: refused.
            let err =
                read_as(dir.path(), b"/u/a|F\n/u/b|D", ranks, InputFormat::Typed).unwrap_err();
            assert!(err.contains("or a typed one, without its end"), "{err}");
            // One plain entry without its newline (`printf %s PATH`): taken when it exists and
            // is not a directory.
            assert_eq!(
                read_text(dir.path(), here, ranks).unwrap(),
                vec![(here.to_vec(), FileType::Unknown)]
            );
            let err = read_text(dir.path(), b"/nonexistent/rep", ranks).unwrap_err();
            assert!(err.contains("does not exist"), "{err}");
            let err = read_text(dir.path(), b"/", ranks).unwrap_err();
            assert!(err.contains("is a directory"), "{err}");
        }
    }

    #[test]
    fn ranges_cover_the_file() {
        assert_eq!(range_start(0, 10, 0, 3), 0);
        assert_eq!(range_start(0, 10, 1, 3), 3);
        assert_eq!(range_start(0, 10, 2, 3), 6);
        assert_eq!(range_start(5, 15, 2, 3), 11);
        assert_eq!(range_start(0, u64::MAX, 2, 3), u64::MAX / 3 * 2);
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
            .map(|at| next_record_start(&mut src, 0, len, at, b'\n').unwrap())
            .collect();
        assert_eq!(starts, vec![0, 3, 3, 3, 6, 6, 6, 7, 9, 9, 9]);
        // Records from byte 3 to 7: nothing before 3 or after 7.
        let starts: Vec<u64> = (0..=10)
            .map(|at| next_record_start(&mut src, 3, 7, at, b'\n').unwrap())
            .collect();
        assert_eq!(starts, vec![3, 3, 3, 3, 6, 6, 6, 7, 7, 7, 7]);
    }
}
