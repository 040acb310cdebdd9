//! The unit `dup` compares: one file's data (an inode), with every name it has in the list,
//! and the pure grouping rules (by size, by hash), free of I/O so that they are unit-tested.
//!
//! Hard links are one inode: their names travel together and count as one member of a group,
//! so two names of one file are never reported as duplicates of each other.

use flist::{FileList, Meta};
use std::collections::BTreeMap;
use steal::Comm;

/// Bytes of a [`Hash`]: blake3's default output.
pub const HASH_BYTES: usize = 32;

/// A blake3 digest (of a prefix, or of the whole file).
pub type Hash = [u8; HASH_BYTES];

/// One file's data and its names. Travels between ranks (steal's typed encoding) and is a
/// work-queue item.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Inode {
    /// Size in bytes, as listed.
    pub size: u64,
    /// Device number (0 when unknown).
    pub dev: u64,
    /// Inode number (0 when unknown: then the inode stands for its one name only).
    pub ino: u64,
    /// The names, each with its metadata, sorted by path bytes, without repeats.
    #[serde(with = "steal::typed::byte_pairs")]
    pub names: Vec<(Vec<u8>, Meta)>,
    /// blake3 of the first bytes (after the prefix pass) or of all bytes (after the full pass);
    /// zero before hashing.
    pub hash: Hash,
}

impl Inode {
    /// The first name in byte order: what the group's order and `-o` use for this inode.
    pub fn first_path(&self) -> &[u8] {
        &self.names[0].0
    }
}

/// The inodes of a rank's regular files. Names with the same known `(dev, ino)` become one
/// inode; a file whose inode number is unknown (0) is an inode of its own. Sorted by size, then
/// first path.
pub fn inodes_of(list: &FileList) -> Vec<Inode> {
    // Key: (size, dev, ino), or (size, 0, 0) plus the path for unknown inodes.
    type Key = (u64, u64, u64, Vec<u8>);
    let mut by_key: BTreeMap<Key, Vec<(Vec<u8>, Meta)>> = BTreeMap::new();
    for e in list.iter() {
        let Some(meta) = e.meta else { continue };
        let unknown = meta.ino == 0 && meta.dev == 0;
        let key = (
            meta.size,
            meta.dev,
            meta.ino,
            if unknown { e.path.to_vec() } else { Vec::new() },
        );
        by_key.entry(key).or_default().push((e.path.to_vec(), meta));
    }
    let mut out: Vec<Inode> = by_key
        .into_iter()
        .map(|((size, dev, ino, _), mut names)| {
            names.sort_by(|a, b| a.0.cmp(&b.0));
            names.dedup_by(|a, b| a.0 == b.0);
            Inode {
                size,
                dev,
                ino,
                names,
                hash: [0; HASH_BYTES],
            }
        })
        .collect();
    out.sort_by(|a, b| (a.size, a.first_path()).cmp(&(b.size, b.first_path())));
    out
}

/// The inodes whose size at least one other inode has (all on this rank: sizes were brought
/// together before). Others cannot have a duplicate.
pub fn same_size(inodes: Vec<Inode>) -> Vec<Inode> {
    keep_groups(inodes, |i| (i.size, [0; HASH_BYTES]))
}

/// Groups of inodes with equal `(size, hash)` and more than one member, each sorted by first
/// path, in the order of their key (hash bytes, then size).
pub fn hash_groups(inodes: Vec<Inode>) -> Vec<Vec<Inode>> {
    let mut groups: BTreeMap<(Hash, u64), Vec<Inode>> = BTreeMap::new();
    for i in inodes {
        groups.entry((i.hash, i.size)).or_default().push(i);
    }
    groups
        .into_values()
        .filter(|g| g.len() > 1)
        .map(|mut g| {
            g.sort_by(|a, b| a.first_path().cmp(b.first_path()));
            g
        })
        .collect()
}

/// The members of every group of equal `key` with more than one member.
fn keep_groups<K: Ord>(inodes: Vec<Inode>, key: impl Fn(&Inode) -> K) -> Vec<Inode> {
    let mut groups: BTreeMap<K, Vec<Inode>> = BTreeMap::new();
    for i in inodes {
        groups.entry(key(&i)).or_default().push(i);
    }
    groups
        .into_values()
        .filter(|g| g.len() > 1)
        .flatten()
        .collect()
}

/// The rank that owns hash `h` when hashes are split into equal ranges over `size` ranks: blake3
/// output is uniform, so ranges balance, and concatenating ranks in order keeps hash order.
pub fn hash_owner(h: &Hash, size: usize) -> usize {
    let top = u64::from_be_bytes(h[..8].try_into().expect("8 bytes"));
    ((top as u128 * size as u128) >> 64) as usize
}

/// The rank that owns all files of one size.
pub fn size_owner(size_bytes: u64, ranks: usize) -> usize {
    (flist::distribute::hash_path(&size_bytes.to_le_bytes()) % ranks as u64) as usize
}

/// Send every inode to the rank `dest` names. Collective.
pub fn exchange(comm: &dyn Comm, inodes: Vec<Inode>, dest: impl Fn(&Inode) -> usize) -> Vec<Inode> {
    let mut sends = vec![Vec::new(); comm.size()];
    for i in &inodes {
        steal::typed::encode_into(i, &mut sends[dest(i)]);
    }
    drop(inodes);
    let mut out = Vec::new();
    for part in comm.alltoallv(sends) {
        out.extend(steal::typed::each::<Inode>(&part).map(steal::typed::sent));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::{Detail, FileType};

    fn meta(size: u64, dev: u64, ino: u64) -> Meta {
        Meta {
            mode: libc::S_IFREG | 0o644,
            size,
            dev,
            ino,
            nlink: 1,
            ..Meta::default()
        }
    }

    fn inode(size: u64, ino: u64, path: &str, hash: u8) -> Inode {
        Inode {
            size,
            dev: 1,
            ino,
            names: vec![(path.as_bytes().to_vec(), meta(size, 1, ino))],
            hash: [hash; HASH_BYTES],
        }
    }

    #[test]
    fn hard_links_are_one_inode_with_sorted_names() {
        let mut list = FileList::new(Detail::Stat);
        list.push(b"/t/b", FileType::File, Some(meta(5, 1, 7)));
        list.push(b"/t/a", FileType::File, Some(meta(5, 1, 7)));
        list.push(b"/t/c", FileType::File, Some(meta(5, 1, 8)));
        // Unknown inode numbers (a v4 list): one inode per name.
        list.push(b"/t/x", FileType::File, Some(meta(5, 0, 0)));
        list.push(b"/t/y", FileType::File, Some(meta(5, 0, 0)));
        let inodes = inodes_of(&list);
        let names: Vec<Vec<&[u8]>> = inodes
            .iter()
            .map(|i| i.names.iter().map(|n| n.0.as_slice()).collect())
            .collect();
        assert_eq!(
            names,
            vec![
                vec![&b"/t/a"[..], b"/t/b"],
                vec![b"/t/c"],
                vec![b"/t/x"],
                vec![b"/t/y"],
            ]
        );
    }

    #[test]
    fn sizes_with_one_inode_drop_out() {
        let kept = same_size(vec![
            inode(1, 1, "/a", 0),
            inode(2, 2, "/b", 0),
            inode(2, 3, "/c", 0),
            inode(3, 4, "/d", 0),
        ]);
        let paths: Vec<&[u8]> = kept.iter().map(|i| i.first_path()).collect();
        assert_eq!(paths, vec![&b"/b"[..], b"/c"]);
    }

    #[test]
    fn groups_need_equal_size_and_hash_and_come_in_hash_order() {
        let groups = hash_groups(vec![
            inode(4, 1, "/z", 9),
            inode(4, 2, "/y", 9),
            inode(4, 3, "/x", 1),
            inode(5, 4, "/w", 1), // same hash, other size: no group
            inode(4, 5, "/v", 1),
            inode(4, 6, "/u", 3), // alone
        ]);
        let paths: Vec<Vec<&[u8]>> = groups
            .iter()
            .map(|g| g.iter().map(|i| i.first_path()).collect())
            .collect();
        assert_eq!(paths, vec![vec![&b"/v"[..], b"/x"], vec![b"/y", b"/z"]]);
    }

    #[test]
    fn hash_ranges_cover_ranks_in_order() {
        assert_eq!(hash_owner(&[0; HASH_BYTES], 4), 0);
        assert_eq!(hash_owner(&[0xff; HASH_BYTES], 4), 3);
        let mut h = [0; HASH_BYTES];
        h[0] = 0x80;
        assert_eq!(hash_owner(&h, 4), 2);
        assert_eq!(hash_owner(&h, 1), 0);
    }

    #[test]
    fn inodes_cross_ranks_intact() {
        let got = steal::local::run(3, |c| {
            let mine = vec![inode(c.rank() as u64, 1, "/p q\u{e9}", 7)];
            let moved = exchange(c, mine, |_| 0);
            moved.len()
        });
        assert_eq!(got, vec![3, 0, 0]);
        let i = inode(3, 4, "/a", 2);
        let b = steal::typed::encode(&i);
        assert_eq!(steal::decode::<Inode>(&b).unwrap(), i);
        for n in 0..b.len() {
            assert!(steal::decode::<Inode>(&b[..n]).is_err(), "cut at {n}");
        }
    }
}
