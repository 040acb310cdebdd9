//! `tar -t`: names, or with `-v` lines like `tar -tv`, printed in archive order; each rank
//! decodes an even share of the entries and prints those the selection takes
//! ([`crate::tar::select`]).

use super::{Done, Options, Report};
use crate::engine::context::Error;
use crate::tar::archive::serial::{Codec, TarStream};
use crate::tar::archive::Archive;
use crate::tar::extract::{find_entries, say_set_aside, Found};
use crate::tar::format::{Decoded, Kind};
use crate::tar::select::Matcher;
use flist::path::{display, normalize};
use std::time::Instant;
use steal::{Comm, CommExt};

/// `-rw-r--r--`-style type and permission letters of a member (`h` for a hard link).
pub fn mode_string(kind: Kind, mode: u32) -> String {
    let letter = match kind {
        Kind::Dir => 'd',
        Kind::Symlink => 'l',
        Kind::HardLink => 'h',
        Kind::Char => 'c',
        Kind::Block => 'b',
        Kind::Fifo => 'p',
        Kind::File | Kind::Other(_) => '-',
    };
    crate::engine::mode_text::mode_text(letter, mode)
}

/// `YYYY-MM-DD HH:MM` in local time, as `tar -tv` prints it (the seconds when out of range).
fn local_time(secs: i64) -> String {
    crate::engine::time_text::local(secs, "%Y-%m-%d %H:%M").unwrap_or_else(|| secs.to_string())
}

/// One `tar -tv` line; `width` is the running width of the owner/size column (GNU tar widens
/// it as wider values come). With `numeric`, owner and group are shown as numbers
/// (`--numeric-owner`).
pub fn long_line(d: &Decoded, width: &mut usize, numeric: bool) -> Vec<u8> {
    let h = &d.header;
    let (owner, size) = owner_and_size(d, numeric);
    let pad = owner.len() + 1 + size.len();
    *width = (*width).max(pad);
    let mut out = format!("{} ", mode_string(h.kind, h.mode)).into_bytes();
    out.extend_from_slice(&owner);
    out.extend(std::iter::repeat_n(b' ', *width - pad + 1));
    out.extend_from_slice(size.as_bytes());
    out.extend_from_slice(format!(" {} ", local_time(h.mtime)).as_bytes());
    out.extend_from_slice(&h.path);
    if h.kind == Kind::Dir && !h.path.ends_with(b"/") {
        out.push(b'/');
    }
    match h.kind {
        Kind::Symlink => {
            out.extend_from_slice(b" -> ");
            out.extend_from_slice(&h.link);
        }
        Kind::HardLink => {
            out.extend_from_slice(b" link to ");
            out.extend_from_slice(&h.link);
        }
        _ => {}
    }
    out.push(b'\n');
    out
}

/// The owner/group and size columns of a `tar -tv` line.
fn owner_and_size(d: &Decoded, numeric: bool) -> (Vec<u8>, String) {
    let h = &d.header;
    let name = |n: &[u8], id: u64| {
        if n.is_empty() || numeric {
            id.to_string().into_bytes()
        } else {
            n.to_vec()
        }
    };
    let owner = [name(&h.uname, h.uid), b"/".to_vec(), name(&h.gname, h.gid)].concat();
    let size = match h.kind {
        Kind::Char | Kind::Block => format!("{},{}", h.dev_major, h.dev_minor),
        _ => h.size.to_string(),
    };
    (owner, size)
}

/// The width `d` needs for its owner and size columns (see [`long_line`]).
fn width_of(d: &Decoded, numeric: bool) -> usize {
    let (owner, size) = owner_and_size(d, numeric);
    owner.len() + 1 + size.len()
}

/// The archive, opened alike on every rank. Collective.
fn open_archive(comm: &dyn Comm, o: &Options) -> Result<(Vec<u8>, Archive), Error> {
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let path = normalize(&o.archive, &cwd);
    let opened = Archive::open_with(&path, &o.context.noatime, comm.rank() == 0)
        .map_err(|e| format!("open {}: {e}", display(&path)));
    let archive = crate::engine::setup::agree_setup(comm, opened)?;
    Ok((path, archive))
}

/// `tar -t`. Collective.
pub(super) fn run(comm: &dyn Comm, o: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let (path, archive) = open_archive(comm, o)?;
    let aside = say_set_aside(comm, &archive, &path, o);
    if let Some(codec) = archive.serial() {
        return serial(comm, o, started, path, &archive, codec).map(|r| Report {
            notices: [aside, r.notices.clone()].concat(),
            ..r
        });
    }
    let found = find_entries(comm, &archive, &path, o);
    let matcher = Matcher::new(o);
    let mut credited = vec![false; matcher.members()];
    let (listing, entries, failed) =
        listing(comm, o, &archive, &path, &found, &matcher, &mut credited);
    steal::ordered::in_rank_order(comm, listing, |b| o.context.output(b));
    let not_found = matcher.not_found(comm, o, &credited);
    Ok(Report {
        mode: Done::List,
        entries: comm.sum(entries),
        archive_entries: found.located.total + found.located.cut,
        failed: comm.sum(failed),
        compression: archive.table().map(|t| t.codec),
        not_found,
        seconds: started.elapsed().as_secs_f64(),
        failures: o.context.failures(),
        ..found.report(path)
    })
}

/// `tar -t` of an archive in one compressed stream: rank 0 reads it front to back
/// ([`TarStream`]) and prints the line of each entry the selection takes as it comes (in
/// batches), the others wait. Collective.
fn serial(
    comm: &dyn Comm,
    o: &Options,
    started: Instant,
    path: Vec<u8>,
    archive: &Archive,
    codec: Codec,
) -> Result<Report, Error> {
    let (mut listed, mut seen, mut damaged) = (0u64, 0u64, false);
    let matcher = Matcher::new(o);
    let mut credited = vec![false; matcher.members()];
    if comm.rank() == 0 {
        let mut out = Vec::new();
        let mut width = 19;
        match archive
            .reopen()
            .and_then(|f| TarStream::open(codec, f))
            .map(|s| s.expecting_end(archive.unended()))
        {
            Err(e) => {
                o.context
                    .error(format_args!("{}: read: {e}", display(&path)));
                damaged = true;
            }
            Ok(mut stream) => {
                loop {
                    let d = match stream.next_entry() {
                        Ok(Some(d)) => d,
                        Ok(None) => break,
                        Err(e) => {
                            o.context.output(&std::mem::take(&mut out));
                            o.context.error(format_args!("{}: {e}", display(&path)));
                            damaged = true;
                            break;
                        }
                    };
                    seen += 1;
                    let v = matcher.verdict(&d.header);
                    if let Some(i) = v.credit {
                        credited[i] = true;
                    }
                    if !v.take {
                        continue;
                    }
                    line(o, &d, &mut width, &mut out);
                    listed += 1;
                    if out.len() >= 64 << 10 {
                        o.context.output(&std::mem::take(&mut out));
                    }
                }
                o.context.output(&out);
                if !damaged {
                    if let Some(e) = stream.decompression_error() {
                        o.context.error(format_args!("{}: {e}", display(&path)));
                        damaged = true;
                    }
                }
            }
        }
    }
    crate::tar::archive::serial::wait_quietly(comm);
    let not_found = matcher.not_found(comm, o, &credited);
    let entries = comm.sum(listed);
    Ok(Report {
        mode: Done::List,
        not_found,
        archive: path,
        entries,
        archive_entries: comm.sum(seen),
        scanned: true,
        damaged: comm.any(damaged),
        compression: Some(codec),
        serial: true,
        seconds: started.elapsed().as_secs_f64(),
        failures: o.context.failures(),
        ..Report::default()
    })
}

/// Append the listing line of `d` to `out`: its name, or with [`Options::long`] its
/// `tar -tv` line.
fn line(o: &Options, d: &Decoded, width: &mut usize, out: &mut Vec<u8>) {
    if o.long {
        out.extend_from_slice(&long_line(d, width, o.numeric_owner));
    } else {
        out.extend_from_slice(&d.header.path);
        if d.header.kind == Kind::Dir {
            out.push(b'/');
        }
        out.push(b'\n');
    }
}

/// This rank's lines (names, or `tar -tv` lines with [`Options::long`]): the entries the
/// selection `m` takes whose headers lie in its part of the stream, so that printed in rank
/// order they come in archive order; the MEMBERs that named one are marked in `credited`.
/// Returns the lines, the entries listed and the headers that failed to decode (each named).
fn listing(
    comm: &dyn Comm,
    o: &Options,
    archive: &Archive,
    path: &[u8],
    found: &Found,
    m: &Matcher,
    credited: &mut [bool],
) -> (Vec<u8>, u64, u64) {
    let offsets = &found.located.offsets;
    let (start, end) = found.located.parts.of(comm.rank());
    let a = offsets.partition_point(|&o| o < start);
    let b = offsets.partition_point(|&o| o < end);
    let mut out = Vec::new();
    let (mut listed, mut failed) = (0u64, 0u64);
    let filters = m.filters();
    let taken: Vec<_> =
        crate::tar::index::scan::decode_in(archive, &offsets[a..b], &found.located.globals)
            .into_iter()
            .filter(|d| match (d, filters) {
                (Ok(d), true) => {
                    let v = m.verdict(&d.header);
                    if let Some(i) = v.credit {
                        credited[i] = true;
                    }
                    v.take
                }
                _ => true,
            })
            .collect();
    // GNU tar widens the owner/size column as wider values come, in archive order: this
    // rank's lines start as wide as the widest of the ranks before.
    let mut width = 19;
    if o.long {
        let mine = taken
            .iter()
            .filter_map(|d| d.as_ref().ok())
            .map(|d| width_of(d, o.numeric_owner))
            .max()
            .unwrap_or(0);
        let widths = comm.allgather_u64(mine as u64);
        width = width.max(widths[..comm.rank()].iter().copied().max().unwrap_or(0) as usize);
    }
    for d in taken {
        match d {
            Ok(d) if o.long => out.extend_from_slice(&long_line(&d, &mut width, o.numeric_owner)),
            Ok(d) => {
                out.extend_from_slice(&d.header.path);
                if d.header.kind == Kind::Dir {
                    out.push(b'/');
                }
                out.push(b'\n');
            }
            Err(e) => {
                o.context.error(format_args!("{}: {e}", display(path)));
                failed += 1;
                continue;
            }
        }
        listed += 1;
    }
    (out, listed, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_strings_match_ls() {
        assert_eq!(mode_string(Kind::Dir, 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(Kind::File, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(Kind::File, 0o2644), "-rw-r-Sr--");
        assert_eq!(mode_string(Kind::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(Kind::Symlink, 0o777), "lrwxrwxrwx");
        assert_eq!(mode_string(Kind::File, 0o444), "-r--r--r--");
    }
}
