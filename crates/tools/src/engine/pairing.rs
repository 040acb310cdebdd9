//! What `sync` and `cmp` share: bringing the source and destination records of one relative
//! path to one rank, and how each field of such a pair compares (dcmp's fields and states).
//!
//! Every record goes to the rank [`home`] names for its path relative to its root, the same
//! for both trees, so each rank then pairs and compares its share of paths without further
//! messages. Only the data of same-size regular files is left to the caller ([`Compared::
//! needs_data`]): `sync` judges it by mtime or reads it whole, `cmp` compares it in chunks
//! spread over all ranks.

use crate::engine::compare_expr::{Field, States};
use crate::engine::copy::Mapping;
use flist::distribute::{hash_path, remap};
use flist::walk::stat_path;
use flist::{FileList, FileType, Meta};
use rustix::io::Errno;
use serde_bytes::{ByteBuf, Bytes};
use steal::typed;
use steal::Comm;

/// The rank (of `size`) that compares the entries whose path relative to their root is `rel`.
pub fn home(rel: &[u8], size: usize) -> usize {
    (hash_path(rel) % size as u64) as usize
}

/// Send every record of `list` to the [`home`] of its path relative to its root in `map`;
/// returns the records that arrive here. Collective.
pub fn bring_home(comm: &dyn Comm, list: FileList, map: &Mapping) -> FileList {
    let size = comm.size();
    remap(comm, list, |e| home(map.rel(e.path), size))
}

/// Send each pair to the rank `to` names; returns the pairs that arrive here. Collective.
pub fn exchange_pairs(
    comm: &dyn Comm,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    to: impl Fn(&(Vec<u8>, Vec<u8>)) -> usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut sends = vec![Vec::new(); comm.size()];
    for p in &pairs {
        typed::encode_into(&(Bytes::new(&p.0), Bytes::new(&p.1)), &mut sends[to(p)]);
    }
    let mut got = Vec::new();
    for bytes in comm.alltoallv(sends) {
        let pairs = typed::each::<(ByteBuf, ByteBuf)>(&bytes).map(typed::sent);
        got.extend(pairs.map(|(a, b)| (a.into_vec(), b.into_vec())));
    }
    got
}

/// The records of `list` by their path relative to their root in `map`: 8 bytes per record
/// (a hash and an index, sorted by hash), no copy of any path.
pub fn index_by_rel(list: &FileList, map: &Mapping) -> PathIndex {
    PathIndex::new(list.len(), |i| map.rel(list.path(i)))
}

/// Indices `0..n` found by a key of bytes (e.g. a path relative to its root) without holding
/// the keys: one `u64` per index, 32 bits of the key's hash above the index, sorted; a lookup
/// compares the key of every index with the same hash bits ([`PathIndex::find`]).
pub struct PathIndex {
    sorted: Vec<u64>,
}

impl PathIndex {
    /// Index `0..n` by `key(i)`.
    ///
    /// # Panics
    /// When `n` does not fit in 32 bits.
    pub fn new<'a>(n: usize, key: impl Fn(usize) -> &'a [u8]) -> PathIndex {
        let n32 = u32::try_from(n).expect("PathIndex: more than 2^32 records on one rank");
        let mut sorted: Vec<u64> = (0..n32)
            .map(|i| key_bits(key(i as usize)) | u64::from(i))
            .collect();
        sorted.sort_unstable();
        PathIndex { sorted }
    }

    /// The index whose key is `k` (`key` as given to [`PathIndex::new`]); the last in index
    /// order when several are (as a map filled in index order would keep).
    pub fn find<'a>(&self, k: &[u8], key: impl Fn(usize) -> &'a [u8]) -> Option<usize> {
        let h = key_bits(k);
        let start = self.sorted.partition_point(|&x| x < h);
        self.sorted[start..]
            .iter()
            .take_while(|&&x| x & !u64::from(u32::MAX) == h)
            .map(|&x| (x & u64::from(u32::MAX)) as usize)
            .filter(|&i| key(i) == k)
            .last()
    }
}

/// 32 bits of a key's hash, in the upper half. Mixed first: [`home`] sends a rank only keys
/// whose FNV hash is the same modulo the rank count, so its low bits alone would collide.
fn key_bits(k: &[u8]) -> u64 {
    (hash_path(k).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) << 32
}

/// How a pair present on both sides compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compared {
    /// Every field but, when [`Compared::needs_data`], CONTENT (left `Common`).
    pub states: States,
    /// Both are regular files of the same size: CONTENT depends on their data.
    pub needs_data: bool,
    /// Failures while comparing, each with its operation and path (`readlink /x: ...`); the
    /// field each concerns is `Differ`, and the pair is not known to be equal.
    pub errors: Vec<String>,
}

/// Compare the source entry `src` (metadata `s`) with the destination entry `dst` (`d`), as
/// dcmp does: TYPE by file type (CONTENT then differs too); SIZE for all but directories; UID,
/// GID; ATIME, MTIME, CTIME to the nanosecond; PERM by the mode's low 12 bits; ACL by the
/// `system.posix_acl_access` (and, for directories, `system.posix_acl_default`) attributes;
/// CONTENT by the targets of symbolic links, the device numbers of devices, sizes of regular
/// files (equal sizes: see [`Compared::needs_data`]); other types have no content.
pub fn pair_states(src: &[u8], dst: &[u8], s: &Meta, d: &Meta) -> Compared {
    let kind = s.file_type();
    let mut st = States::both_common();
    let same_type = kind == d.file_type();
    st.differ_if(Field::Type, !same_type);
    st.differ_if(Field::Size, kind != FileType::Dir && s.size != d.size);
    st.differ_if(Field::Uid, s.uid != d.uid);
    st.differ_if(Field::Gid, s.gid != d.gid);
    st.differ_if(
        Field::Atime,
        (s.atime, s.atime_nsec) != (d.atime, d.atime_nsec),
    );
    st.differ_if(
        Field::Mtime,
        (s.mtime, s.mtime_nsec) != (d.mtime, d.mtime_nsec),
    );
    st.differ_if(
        Field::Ctime,
        (s.ctime, s.ctime_nsec) != (d.ctime, d.ctime_nsec),
    );
    st.differ_if(Field::Perm, s.mode & 0o7777 != d.mode & 0o7777);
    let mut errors = Vec::new();
    let mut acl_differs = acls_differ(src, dst, ACCESS_ACL, &mut errors);
    if kind == FileType::Dir && d.file_type() == FileType::Dir {
        acl_differs |= acls_differ(src, dst, DEFAULT_ACL, &mut errors);
    }
    st.differ_if(Field::Acl, acl_differs);
    let mut needs_data = false;
    let content_differs = if !same_type {
        true
    } else {
        match kind {
            FileType::File if s.size != d.size => true,
            FileType::File => {
                needs_data = true;
                false
            }
            FileType::Symlink => match (link_target(src), link_target(dst)) {
                (Ok(a), Ok(b)) => a != b,
                (Err(e), _) => {
                    errors.push(format!("readlink {}: {e}", flist::path::display(src)));
                    true
                }
                (_, Err(e)) => {
                    errors.push(format!("readlink {}: {e}", flist::path::display(dst)));
                    true
                }
            },
            FileType::CharDev | FileType::BlockDev => {
                match (device_number(src), device_number(dst)) {
                    (Ok(a), Ok(b)) => a != b,
                    (Err(e), _) => {
                        errors.push(format!("stat {}: {e}", flist::path::display(src)));
                        true
                    }
                    (_, Err(e)) => {
                        errors.push(format!("stat {}: {e}", flist::path::display(dst)));
                        true
                    }
                }
            }
            _ => false,
        }
    };
    st.differ_if(Field::Content, content_differs);
    Compared {
        states: st,
        needs_data,
        errors,
    }
}

/// True when the data of two regular files of the same size differ, read whole by this thread
/// (`sync --dryrun --contents`, `sync -o`; `cmp` spreads the work over ranks instead).
pub fn contents_differ(a: &[u8], b: &[u8]) -> std::io::Result<bool> {
    use std::io::{ErrorKind, Read};
    // Through flist::at, so paths longer than PATH_MAX work here too.
    let open = |p: &[u8]| {
        flist::at::At::new(p)
            .and_then(|a| a.open(rustix::fs::OFlags::RDONLY, 0))
            .map(std::fs::File::from)
    };
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = match fa.read(&mut ba) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            // The first file ended: equal only if the second ends here too.
            return loop {
                match fb.read(&mut bb[..1]) {
                    Ok(m) => break Ok(m != 0),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
        }
        match fb.read_exact(&mut bb[..n]) {
            Ok(()) => {}
            // The second file is shorter.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(true),
            Err(e) => return Err(e),
        }
        if ba[..n] != bb[..n] {
            return Ok(true);
        }
    }
}

/// The attribute holding a file's access ACL.
pub const ACCESS_ACL: &str = "system.posix_acl_access";
/// The attribute holding a directory's default ACL (inherited by new entries).
pub const DEFAULT_ACL: &str = "system.posix_acl_default";

/// True when the ACL attribute `name` differs between `src` and `dst`; a failure to read it
/// is pushed onto `errors` (operation and path) and counts as a difference.
fn acls_differ(src: &[u8], dst: &[u8], name: &str, errors: &mut Vec<String>) -> bool {
    match (acl(src, name), acl(dst, name)) {
        (Ok(a), Ok(b)) => a != b,
        (Err(e), _) => {
            errors.push(format!(
                "getxattr {name} {}: {e}",
                flist::path::display(src)
            ));
            true
        }
        (_, Err(e)) => {
            errors.push(format!(
                "getxattr {name} {}: {e}",
                flist::path::display(dst)
            ));
            true
        }
    }
}

/// The ACL attribute `name` of `path` (not following a final symbolic link): `None` when the
/// file has none or its file system has no ACLs; an error for any other failure.
pub fn acl(path: &[u8], name: &str) -> std::io::Result<Option<Vec<u8>>> {
    let at = flist::at::At::new(path)?;
    let short = at.short_path();
    match xattr_value(|buf| rustix::fs::lgetxattr(short.as_ref(), name, buf)) {
        Err(Errno::NODATA | Errno::NOTSUP) => Ok(None),
        Err(e) => Err(e.into()),
        Ok(v) => Ok(Some(v)),
    }
}

/// An extended attribute's value through `get` (a `getxattr` call into the buffer it is
/// given): first into 4096 bytes; when that is too small (`ERANGE`), into a buffer of the size
/// the attribute has (asked with an empty buffer), again while it keeps growing (a few times,
/// then `ERANGE`).
fn xattr_value(
    mut get: impl FnMut(&mut [u8]) -> rustix::io::Result<usize>,
) -> rustix::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    for _ in 0..8 {
        match get(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(Errno::RANGE) => {
                let size = get(&mut [])?;
                buf = vec![0u8; size.max(buf.len() + 1)];
            }
            Err(e) => return Err(e),
        }
    }
    Err(Errno::RANGE)
}

/// The target of the symbolic link `path`.
pub fn link_target(path: &[u8]) -> std::io::Result<Vec<u8>> {
    let at = flist::at::At::new(path)?;
    Ok(rustix::fs::readlinkat(at.dir(), at.name(), Vec::new())?.into_bytes())
}

/// The device number of the device file `path` (`None` when it can't be read).
pub fn rdev(path: &[u8]) -> Option<u64> {
    device_number(path).ok()
}

/// The device number of the device file `path`.
pub fn device_number(path: &[u8]) -> std::io::Result<u64> {
    Ok(stat_path(path, false)?.st_rdev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compare_expr::State;
    use std::os::unix::ffi::OsStrExt;

    fn meta(p: &std::path::Path) -> Meta {
        Meta::from_stat(&stat_path(p.as_os_str().as_bytes(), false).unwrap())
    }

    #[test]
    fn fields_compare_as_in_dcmp() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, b"same").unwrap();
        std::fs::write(&b, b"diff").unwrap();
        std::fs::write(&c, b"longer").unwrap();
        let bytes = |p: &std::path::Path| p.as_os_str().as_bytes().to_vec();
        let ab = pair_states(&bytes(&a), &bytes(&b), &meta(&a), &meta(&b));
        assert!(ab.needs_data, "same size: the data decides");
        assert_eq!(ab.states.get(Field::Size), State::Common);
        assert_eq!(ab.states.get(Field::Content), State::Common);
        let ac = pair_states(&bytes(&a), &bytes(&c), &meta(&a), &meta(&c));
        assert!(!ac.needs_data);
        assert_eq!(ac.states.get(Field::Size), State::Differ);
        assert_eq!(ac.states.get(Field::Content), State::Differ);
        let (l1, l2) = (dir.path().join("l1"), dir.path().join("l2"));
        std::os::unix::fs::symlink("a", &l1).unwrap();
        std::os::unix::fs::symlink("b", &l2).unwrap();
        let ll = pair_states(&bytes(&l1), &bytes(&l2), &meta(&l1), &meta(&l2));
        assert_eq!(ll.states.get(Field::Content), State::Differ);
        assert_eq!(ll.states.get(Field::Type), State::Common);
        let la = pair_states(&bytes(&l1), &bytes(&a), &meta(&l1), &meta(&a));
        assert_eq!(la.states.get(Field::Type), State::Differ);
        assert_eq!(la.states.get(Field::Content), State::Differ);
    }

    #[test]
    fn the_path_index_finds_every_key_and_nothing_else() {
        let keys: Vec<Vec<u8>> = (0..2000)
            .map(|i| format!("d{}/f{i}", i % 7).into_bytes())
            .chain([b"".to_vec(), b"d1/f1".to_vec()])
            .collect();
        let key = |i: usize| keys[i].as_slice();
        let index = PathIndex::new(keys.len(), key);
        for (i, k) in keys.iter().enumerate().take(2001) {
            let want = if k == b"d1/f1" { keys.len() - 1 } else { i };
            assert_eq!(
                index.find(k, key),
                Some(want),
                "{}",
                String::from_utf8_lossy(k)
            );
        }
        // A repeated key: the last, as a map filled in order keeps.
        assert_eq!(index.find(b"d1/f1", key), Some(keys.len() - 1));
        assert_eq!(index.find(b"d1/f2", key), None);
        assert_eq!(index.find(b"nothing", key), None);
        let empty = PathIndex::new(0, key);
        assert_eq!(empty.find(b"", key), None);
    }

    #[test]
    fn a_longer_second_file_differs() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = |n: &str| dir.path().join(n).as_os_str().as_bytes().to_vec();
        std::fs::write(dir.path().join("short"), b"0123456789").unwrap();
        std::fs::write(dir.path().join("same"), b"0123456789").unwrap();
        std::fs::write(dir.path().join("long"), b"0123456789+").unwrap();
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        assert!(!contents_differ(&bytes("short"), &bytes("same")).unwrap());
        assert!(contents_differ(&bytes("short"), &bytes("long")).unwrap());
        assert!(contents_differ(&bytes("long"), &bytes("short")).unwrap());
        assert!(contents_differ(&bytes("empty"), &bytes("short")).unwrap());
        assert!(!contents_differ(&bytes("empty"), &bytes("empty")).unwrap());
    }

    #[test]
    fn an_attribute_larger_than_the_first_buffer_is_read_whole() {
        // A 10000-byte attribute: the 4096-byte try gives ERANGE, the size asked with an empty
        // buffer is then used.
        let value: Vec<u8> = (0..10_000).map(|i| (i % 251) as u8).collect();
        let mut calls = Vec::new();
        let got = xattr_value(|buf| {
            calls.push(buf.len());
            if buf.is_empty() {
                Ok(value.len())
            } else if buf.len() < value.len() {
                Err(Errno::RANGE)
            } else {
                buf[..value.len()].copy_from_slice(&value);
                Ok(value.len())
            }
        })
        .unwrap();
        assert_eq!(got, value);
        assert_eq!(calls, vec![4096, 0, 10_000]);
        // It grew between the first size query and the read: asked again.
        let mut have = 5000;
        let mut queries = 0;
        let got = xattr_value(|buf| {
            if buf.is_empty() {
                queries += 1;
                let told = have;
                if queries == 1 {
                    have += 1000;
                }
                Ok(told)
            } else if buf.len() < have {
                Err(Errno::RANGE)
            } else {
                Ok(have)
            }
        })
        .unwrap();
        assert_eq!((got.len(), queries), (6000, 2));
        // Growing without end: given up, not looped on.
        let mut size = 4096;
        let endless = xattr_value(|buf| {
            size += 1;
            if buf.is_empty() {
                Ok(size)
            } else {
                Err(Errno::RANGE)
            }
        });
        assert_eq!(endless, Err(Errno::RANGE));
        assert_eq!(xattr_value(|_| Err(Errno::IO)), Err(Errno::IO));
    }

    #[test]
    fn an_unreadable_acl_is_an_error_not_equal() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"same").unwrap();
        let bytes = |p: &std::path::Path| p.as_os_str().as_bytes().to_vec();
        // No ACL: none, not an error.
        assert_eq!(acl(&bytes(&a), ACCESS_ACL).unwrap(), None);
        // The destination vanished after the walk: the ACL can't be read.
        let gone = dir.path().join("gone");
        assert!(acl(&bytes(&gone), ACCESS_ACL).is_err());
        let c = pair_states(&bytes(&a), &bytes(&gone), &meta(&a), &meta(&a));
        assert_eq!(c.states.get(Field::Acl), State::Differ);
        let want = format!("getxattr {ACCESS_ACL} {}: ", gone.display());
        assert!(
            c.errors.iter().any(|e| e.starts_with(&want)),
            "{:?}",
            c.errors
        );
    }
}
