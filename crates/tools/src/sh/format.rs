//! How `sh` shows an entry: `ls -l` lines and `stat` blocks.

use crate::engine::mode_text::{mode_text, type_letter};
use flist::{FileType, Meta};

/// `drwxr-xr-x`: the type letter and the permission bits, as `ls -l` shows them, with `kind`
/// deciding the letter (a lite entry has no mode).
fn mode_string(kind: FileType, mode: u32) -> String {
    mode_text(type_letter(kind), mode)
}

/// `2026-11-26 07:05:09` (UTC) for seconds since the epoch (the seconds when out of range).
pub fn time_string(secs: i64) -> String {
    crate::engine::time_text::utc(secs, "%Y-%m-%d %H:%M:%S").unwrap_or_else(|| secs.to_string())
}

/// The `ls -l` columns before the name: mode, owner, group, size, mtime (`?` without
/// metadata).
pub fn long_columns(kind: FileType, meta: Option<&Meta>) -> String {
    match meta {
        Some(m) => format!(
            "{} {:>6} {:>6} {:>12} {}",
            mode_string(kind, m.mode),
            m.uid,
            m.gid,
            m.size,
            time_string(m.mtime)
        ),
        None => format!(
            "{}{}",
            mode_string(kind, 0).get(..1).unwrap_or("-"),
            " ?".repeat(5)
        ),
    }
}

/// The `stat` block of an entry, one field per line.
pub fn stat_block(path: &str, kind: FileType, meta: Option<&Meta>) -> String {
    let mut s = format!("  File: {path}\n  Type: {kind:?}\n");
    if let Some(m) = meta {
        s.push_str(&format!(
            "  Size: {}\n  Mode: {:04o} ({})\n   Uid: {}\n   Gid: {}\nAccess: {}\nModify: {}\nChange: {}\n",
            m.size,
            m.mode & 0o7777,
            mode_string(kind, m.mode),
            m.uid,
            m.gid,
            time_string(m.atime),
            time_string(m.mtime),
            time_string(m.ctime)
        ));
    } else {
        s.push_str("  (the list has no metadata)\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_times_read_as_ls_shows_them() {
        assert_eq!(mode_string(FileType::Dir, 0o40755), "drwxr-xr-x");
        assert_eq!(mode_string(FileType::File, 0o100640), "-rw-r-----");
        assert_eq!(time_string(0), "1970-01-01 00:00:00");
        assert_eq!(time_string(1_795_676_479), "2026-11-26 07:01:19");
        assert_eq!(time_string(951_782_400), "2000-02-29 00:00:00");
    }
}
