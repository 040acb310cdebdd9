//! Hard-link groups: regular files sharing one (device, inode) are copied once and linked.
//!
//! Records of files with more than one link are brought to a rank chosen by a hash of their
//! (device, inode), so a whole group meets on one rank wherever the walk found its members.
//! There the member with the smallest path is the group's first (its data is copied); the
//! others become links to it.

use flist::distribute::{hash_path, remap};
use flist::{FileList, FileType};
use steal::Comm;

/// The result of [`group`] on one rank.
pub struct Groups {
    /// The input records minus the members that will be links (group firsts included).
    pub list: FileList,
    /// The records of the members that will be links.
    pub members: FileList,
    /// (first member's source path, member's source path), one per record of `members`.
    pub links: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Record `i` of `list` may belong to a group: a regular file with more than one link.
pub fn linked(list: &FileList, i: usize) -> bool {
    list.kind(i) == FileType::File && list.meta(i).is_some_and(|m| m.nlink > 1)
}

/// Split `list` into records to copy and hard links to make. Collective.
pub fn group(comm: &dyn Comm, list: FileList) -> Groups {
    let linked = |i: usize| linked(&list, i);
    let multi = list.select((0..list.len()).filter(|&i| linked(i)));
    // Without linked files here (the common case) the list itself is the rest: not a copy.
    let mut rest = if multi.is_empty() {
        list
    } else {
        list.select((0..list.len()).filter(|&i| !linked(i)))
    };
    let size = comm.size() as u64;
    let multi = remap(comm, multi, |e| {
        let m = &e.meta.expect("stat list");
        let mut key = m.dev.to_le_bytes().to_vec();
        key.extend_from_slice(&m.ino.to_le_bytes());
        (hash_path(&key) % size) as usize
    });
    let mut order: Vec<usize> = (0..multi.len()).collect();
    let id = |i: usize| {
        let m = multi.meta(i).expect("stat list");
        (m.dev, m.ino)
    };
    order.sort_by(|&a, &b| {
        id(a)
            .cmp(&id(b))
            .then_with(|| multi.path(a).cmp(multi.path(b)))
    });
    let mut members = Vec::new();
    let mut links = Vec::new();
    let mut firsts = Vec::new();
    let mut first: Option<usize> = None;
    for &i in &order {
        match first {
            Some(f) if id(f) == id(i) => {
                links.push((multi.path(f).to_vec(), multi.path(i).to_vec()));
                members.push(i);
            }
            _ => {
                first = Some(i);
                firsts.push(i);
            }
        }
    }
    rest.append(multi.select(firsts));
    Groups {
        list: rest,
        members: multi.select(members),
        links,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::{Detail, Meta};

    #[test]
    fn groups_meet_and_link_to_their_smallest_path() {
        for ranks in [1, 3] {
            let out = steal::local::run(ranks, |comm| {
                let mut l = FileList::new(Detail::Stat);
                let m = |ino, nlink| Meta {
                    mode: 0o100644,
                    ino,
                    nlink,
                    dev: 1,
                    ..Meta::default()
                };
                // Each rank holds one member of group 7 and a single file.
                let r = comm.rank();
                l.push(
                    format!("/g/{r}").as_bytes(),
                    FileType::File,
                    Some(m(7, ranks as u64 + 1)),
                );
                l.push(
                    format!("/s/{r}").as_bytes(),
                    FileType::File,
                    Some(m(100 + r as u64, 1)),
                );
                if r == 0 {
                    l.push(b"/g/x", FileType::File, Some(m(7, ranks as u64 + 1)));
                }
                let g = group(comm, l);
                (g.list.len(), g.links, g.members.len())
            });
            let lists: usize = out.iter().map(|o| o.0).sum();
            let mut links: Vec<_> = out.iter().flat_map(|o| o.1.clone()).collect();
            links.sort();
            assert_eq!(lists, ranks + 1, "singles plus the group's first");
            let mut want: Vec<_> = (1..ranks)
                .map(|r| (b"/g/0".to_vec(), format!("/g/{r}").into_bytes()))
                .collect();
            want.push((b"/g/0".to_vec(), b"/g/x".to_vec()));
            want.sort();
            assert_eq!(links, want);
            assert_eq!(out.iter().map(|o| o.2).sum::<usize>(), ranks);
        }
    }
}
