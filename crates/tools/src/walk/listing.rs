//! The lines of `walk -p`, as dwalk prints them (mpiFileUtils' `mfu_flist_print`):
//! `-rw-r--r-- alice users   4.019 KiB Sep  7 2026 19:33 /path` for stat lists (mode, owner,
//! group, size in 1024-based units as `%7.3f %3s`, mtime as `%b %e %Y %H:%M` in local time),
//! `Type=REG File=/path` for lite lists. Scripts written for dwalk parse these lines.

use crate::engine::mode_text::st_mode_text;
use flist::record::Entry;
use flist::{FileList, FileType};

/// One `-p` line of entry `e` of `list`, newline included, appended to `out`.
pub fn format_entry(list: &FileList, e: Entry<'_>, out: &mut Vec<u8>) {
    match e.meta {
        Some(m) => {
            let user = list
                .users
                .name_of(m.uid as u64)
                .map_or(m.uid.to_string(), |n| String::from_utf8_lossy(n).into());
            let group = list
                .groups
                .name_of(m.gid as u64)
                .map_or(m.gid.to_string(), |n| String::from_utf8_lossy(n).into());
            let (size, units) = flist::units::dwalk_units(m.size);
            out.extend_from_slice(
                format!(
                    "{} {user} {group} {size:7.3} {units:>3} {} ",
                    st_mode_text(m.mode),
                    local_minute(m.mtime)
                )
                .as_bytes(),
            );
        }
        None => {
            let kind = match e.kind {
                FileType::Dir => "DIR",
                FileType::File => "REG",
                FileType::Symlink => "LNK",
                _ => "UNK",
            };
            out.extend_from_slice(format!("Type={kind} File=").as_bytes());
        }
    }
    out.extend_from_slice(e.path);
    out.push(b'\n');
}

/// `secs` since the epoch as `%b %e %Y %H:%M` in the local time zone (`TZ`), in the C locale's
/// month names; empty when the time cannot be converted (as dwalk).
fn local_minute(secs: i64) -> String {
    crate::engine::time_text::local(secs, "%b %e %Y %H:%M").unwrap_or_default()
}
