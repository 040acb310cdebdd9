//! A file that changes while `dup` compares it is left out: its listing (size, modification
//! and change times, inode) is compared with `fstat` on the descriptor it is hashed through,
//! before and after each hash pass, and with `lstat` of every name once the groups are formed.
//! A redundant-copy list must never hold a file whose bytes differ from those that were hashed
//! (`dup -o x && rm -i x` would delete data that exists nowhere else).

use super::inode::Inode;
use flist::walk::stat_path;
use flist::Meta;

/// What differs between the listed metadata `listed` and `now` (both of one name), in words;
/// `None` when the file looks unchanged. Inode numbers are compared when the listing has them
/// (a v4 list has none).
pub fn difference(listed: &Meta, now: &Meta) -> Option<String> {
    if listed.ino != 0 && (listed.dev, listed.ino) != (now.dev, now.ino) {
        return Some("replaced by another file".to_string());
    }
    if listed.size != now.size {
        return Some(format!(
            "size changed ({} bytes listed, {} now)",
            listed.size, now.size
        ));
    }
    if (listed.mtime, listed.mtime_nsec) != (now.mtime, now.mtime_nsec) {
        return Some("modified".to_string());
    }
    if (listed.ctime, listed.ctime_nsec) != (now.ctime, now.ctime_nsec) {
        return Some("status changed (ctime)".to_string());
    }
    None
}

/// Check every name of `inode` against its listing with `lstat`: the first name that changed
/// (or can no longer be stat'ed), with the reason.
pub fn changed_name(inode: &Inode) -> Option<(Vec<u8>, String)> {
    inode.names.iter().find_map(|(path, listed)| {
        let why = match stat_path(path, false) {
            Ok(st) => difference(listed, &Meta::from_stat(&st))?,
            Err(e) => format!("cannot be stat'ed again: {e}"),
        };
        Some((path.clone(), why))
    })
}

/// Drop from every group the inodes that changed since they were listed, and then the groups
/// left with fewer than two members. Returns the message of each inode dropped (path and
/// reason).
pub fn drop_changed(groups: &mut Vec<Vec<Inode>>) -> Vec<String> {
    let mut changed = Vec::new();
    for group in groups.iter_mut() {
        group.retain(|inode| match changed_name(inode) {
            None => true,
            Some((path, why)) => {
                changed.push(format!(
                    "{}: {why} while dup ran; left out of the comparison",
                    flist::path::display(&path)
                ));
                false
            }
        });
    }
    groups.retain(|g| g.len() > 1);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(size: u64, mtime: i64, ctime: i64, ino: u64) -> Meta {
        Meta {
            size,
            mtime,
            ctime,
            ino,
            dev: 1,
            ..Meta::default()
        }
    }

    #[test]
    fn size_times_and_inode_tell_a_change() {
        let listed = meta(5, 10, 10, 7);
        assert_eq!(difference(&listed, &meta(5, 10, 10, 7)), None);
        assert!(difference(&listed, &meta(6, 10, 10, 7)).is_some());
        assert!(difference(&listed, &meta(5, 11, 10, 7)).is_some());
        assert!(difference(&listed, &meta(5, 10, 11, 7)).is_some());
        assert!(difference(&listed, &meta(5, 10, 10, 8)).is_some());
        // A v4 listing has no inode number: not compared.
        assert_eq!(difference(&meta(5, 10, 10, 0), &meta(5, 10, 10, 8)), None);
    }

    #[test]
    fn groups_lose_changed_members_and_then_lone_ones() {
        let dir = tempfile::tempdir().unwrap();
        let inode = |name: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, b"same").unwrap();
            let path = p.as_os_str().as_encoded_bytes().to_vec();
            let m = Meta::from_stat(&stat_path(&path, false).unwrap());
            Inode {
                size: m.size,
                dev: m.dev,
                ino: m.ino,
                names: vec![(path, m)],
                hash: [0; 32],
            }
        };
        let mut groups = vec![
            vec![inode("a"), inode("b"), inode("c")],
            vec![inode("d"), inode("e")],
        ];
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.path().join("b"), b"SAME").unwrap();
        std::fs::remove_file(dir.path().join("e")).unwrap();
        let changed = drop_changed(&mut groups);
        assert_eq!(changed.len(), 2, "{changed:?}");
        assert!(changed[0].contains("/b: modified"), "{changed:?}");
        assert_eq!(groups.len(), 1);
        let names: Vec<_> = groups[0].iter().map(|i| i.first_path().to_vec()).collect();
        assert!(names[0].ends_with(b"/a") && names[1].ends_with(b"/c"));
    }
}
