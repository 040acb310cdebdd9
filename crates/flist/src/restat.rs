//! Fresh metadata for the entries of a list read from a file: lists may be old, plain path
//! lists carry no types, and v4 lists no inode numbers. Local (no communication): each rank
//! stats its own share, in parallel on its threads.

use crate::error::ItemError;
use crate::ids::IdTable;
use crate::record::{Detail, FileList, FileType, Meta};
use crate::walk::stat_path;
use rayon::prelude::*;

/// Which entries [`restat`] stats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Every entry: the result is a stat list with this machine's user and group tables.
    All,
    /// Only entries of unknown type (plain path lists); the others keep what they have.
    UnknownTypes,
    /// Every entry, to check it still exists; entries of unknown type get their type and
    /// metadata, the others keep what they have.
    Present,
}

/// Entries stat'ed per rayon task: enough to amortise the task, few enough to balance.
const BATCH: usize = 256;

/// `lstat` (`stat` with `follow`) the entries `which` names, in parallel, keeping the list's
/// order. Entries that cannot be stat'ed are left out and returned as `stat` errors naming
/// their path.
pub fn restat(list: FileList, which: Which, follow: bool) -> (FileList, Vec<ItemError>) {
    let all = which == Which::All;
    let detail = if all { Detail::Stat } else { list.detail() };
    let parts: Vec<(FileList, Vec<ItemError>)> = (0..list.len().div_ceil(BATCH))
        .into_par_iter()
        .map(|b| {
            let mut out = FileList::new(detail);
            let mut errors = Vec::new();
            for i in b * BATCH..((b + 1) * BATCH).min(list.len()) {
                let e = list.entry(i);
                if which == Which::UnknownTypes && e.kind != FileType::Unknown {
                    out.push(e.path, e.kind, e.meta);
                    continue;
                }
                match stat_path(e.path, follow) {
                    Ok(_) if which == Which::Present && e.kind != FileType::Unknown => {
                        out.push(e.path, e.kind, e.meta);
                    }
                    Ok(st) => {
                        let m = Meta::from_stat(&st);
                        out.push(e.path, m.file_type(), Some(m));
                    }
                    Err(err) => errors.push(ItemError::new(e.path, "stat", err.into())),
                }
            }
            (out, errors)
        })
        .collect();
    let mut out = if all {
        let mut out = FileList::new(Detail::Stat);
        out.users = IdTable::system_users();
        out.groups = IdTable::system_groups();
        out
    } else {
        list.empty_like()
    };
    let mut errors = Vec::new();
    for (part, errs) in parts {
        out.append(part);
        errors.extend(errs);
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_get_fresh_metadata_in_order_and_missing_ones_are_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().as_os_str().as_encoded_bytes().to_vec();
        let p = |n: &str| [root.as_slice(), b"/", n.as_bytes()].concat();
        std::fs::write(tmp.path().join("f"), "four").unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::os::unix::fs::symlink("f", tmp.path().join("l")).unwrap();
        let mut list = FileList::new(Detail::Lite);
        for _ in 0..300 {
            list.push(&p("f"), FileType::Unknown, None);
        }
        list.push(&p("gone"), FileType::Unknown, None);
        list.push(&p("d"), FileType::Dir, None);
        list.push(&p("l"), FileType::Unknown, None);

        let (some, errors) = restat(list.clone(), Which::UnknownTypes, false);
        assert_eq!(some.len(), 302);
        assert_eq!(some.kind(0), FileType::File);
        assert_eq!(some.kind(300), FileType::Dir);
        assert_eq!(some.path(300), p("d"));
        assert_eq!(some.kind(301), FileType::Symlink);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, p("gone"));

        let (all, _) = restat(list.clone(), Which::All, false);
        assert_eq!(all.detail(), Detail::Stat);
        assert_eq!(all.meta(0).unwrap().size, 4);
        assert_eq!(all.kind(300), FileType::Dir);
        let (followed, _) = restat(list, Which::All, true);
        assert_eq!(followed.kind(301), FileType::File);
    }
}
