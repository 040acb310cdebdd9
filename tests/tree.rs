//! Tree snapshots and their comparison, for the end-to-end tests of `cp` and `sync`; and builders
//! of the awkward entries those tools must handle (hard-link groups, sparse files, xattrs, fifos,
//! non-UTF-8 names, paths longer than `PATH_MAX`).
//!
//! Everything walks with directory file descriptors (`openat`, `statat`, `readlinkat` relative to
//! the parent's fd), never by full path, so paths of any length and any bytes work. Extended
//! attributes of an entry are read through `/proc/self/fd/<parent fd>/<name>`.

use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, SeekFrom, Timespec, Timestamps, CWD};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What kind of file system object an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Named pipe.
    Fifo,
    /// Unix socket.
    Socket,
    /// Character device.
    CharDev,
    /// Block device.
    BlockDev,
}

impl Kind {
    fn from_mode(mode: u32) -> Kind {
        match mode & 0o170000 {
            0o100000 => Kind::File,
            0o040000 => Kind::Dir,
            0o120000 => Kind::Symlink,
            0o010000 => Kind::Fifo,
            0o140000 => Kind::Socket,
            0o020000 => Kind::CharDev,
            0o060000 => Kind::BlockDev,
            m => panic!("unknown file type bits {m:o}"),
        }
    }
}

/// One entry of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Type.
    pub kind: Kind,
    /// `mode & 0o7777`.
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time (s, ns).
    pub mtime: (i64, u64),
    /// Change time (s, ns): never compared by [`diff`]; see [`ctime_changes`].
    pub ctime: (i64, u64),
    /// Size in bytes (compared for everything but directories).
    pub size: u64,
    /// 512-byte blocks allocated (never compared; see [`Node::blocks`] users).
    pub blocks: u64,
    /// 128-bit digest of a regular file's bytes.
    pub digest: Option<u128>,
    /// A symlink's target.
    pub target: Option<Vec<u8>>,
    /// All extended attributes, name → value.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Data segments of a regular file (`SEEK_DATA`/`SEEK_HOLE`), as (start, end).
    pub segments: Vec<(u64, u64)>,
    /// Device number of a device node.
    pub rdev: u64,
    /// The smallest relative path of the tree sharing this entry's (dev, ino), when at least two
    /// paths of the tree do (links to outside the tree do not make a group).
    pub link_group: Option<Vec<u8>>,
    /// (dev, ino): never compared.
    pub dev_ino: (u64, u64),
    /// Link count: never compared.
    pub nlink: u64,
}

/// A snapshot: relative path (root = `b""`, children `b"a"`, `b"a/b"`) → entry.
pub type Tree = BTreeMap<Vec<u8>, Node>;

/// What [`diff`] and [`assert_equal`] compare. Types, sizes (not of directories), file bytes,
/// link targets, device numbers and hard-link groups are always compared; atime and ctime never.
#[derive(Clone, Copy, Debug)]
pub struct Compare {
    /// Permission bits, owner, group, mtime (every kind, symlinks included) and xattrs.
    pub metadata: bool,
    /// The data/hole map of regular files.
    pub holes: bool,
}

impl Compare {
    /// Content, types and links only.
    pub const CONTENT: Compare = Compare {
        metadata: false,
        holes: false,
    };
    /// Content and metadata.
    pub const META: Compare = Compare {
        metadata: true,
        holes: false,
    };
    /// Content, metadata and holes.
    pub const FULL: Compare = Compare {
        metadata: true,
        holes: true,
    };
}

/// Display bytes of a path.
pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    if rel.is_empty() {
        name.to_vec()
    } else {
        let mut v = rel.to_vec();
        v.push(b'/');
        v.extend_from_slice(name);
        v
    }
}

/// A 128-bit digest (two multiply-xorshift lanes over 8-byte words, lengths mixed in): fast
/// enough in debug builds, solid enough to tell files apart.
#[derive(Clone, Debug)]
pub struct Digest {
    a: u64,
    b: u64,
    len: u64,
    tail: Vec<u8>,
}

impl Default for Digest {
    fn default() -> Self {
        Digest {
            a: 0x9e37_79b9_7f4a_7c15,
            b: 0xc2b2_ae3d_27d4_eb4f,
            len: 0,
            tail: Vec::new(),
        }
    }
}

impl Digest {
    #[inline]
    fn word(&mut self, w: u64) {
        self.a = (self.a ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
        self.a ^= self.a >> 29;
        self.b = (self.b.rotate_left(23) ^ w).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        self.b ^= self.b >> 31;
    }

    /// Add bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if !self.tail.is_empty() {
            let need = 8 - self.tail.len();
            let take = need.min(data.len());
            self.tail.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.tail.len() == 8 {
                let w = u64::from_le_bytes(self.tail[..].try_into().unwrap());
                self.tail.clear();
                self.word(w);
            }
        }
        let mut chunks = data.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().unwrap()));
        }
        self.tail.extend_from_slice(chunks.remainder());
    }

    /// The digest.
    pub fn finish(mut self) -> u128 {
        let mut last = [0u8; 8];
        last[..self.tail.len()].copy_from_slice(&self.tail);
        let w = u64::from_le_bytes(last);
        self.word(w);
        self.word(self.len);
        self.word(0x5bd1_e995);
        ((self.a as u128) << 64) | self.b as u128
    }
}

fn digest_fd(fd: &OwnedFd) -> u128 {
    use std::os::unix::fs::FileExt;
    // Positional reads: the offset shared with `segments_fd`'s seeks does not matter.
    let f = std::fs::File::from(fd.try_clone().expect("dup"));
    let mut d = Digest::default();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    loop {
        let n = f.read_at(&mut buf, off).expect("read file for digest");
        if n == 0 {
            break;
        }
        off += n as u64;
        d.update(&buf[..n]);
    }
    d.finish()
}

fn segments_fd(fd: &OwnedFd, size: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    while pos < size {
        let start = match rfs::seek(fd, SeekFrom::Data(pos)) {
            Ok(s) => s,
            Err(rustix::io::Errno::NXIO) => break,
            Err(e) => panic!("SEEK_DATA: {e}"),
        };
        let end = rfs::seek(fd, SeekFrom::Hole(start)).expect("SEEK_HOLE");
        out.push((start, end));
        pos = end;
    }
    out
}

fn proc_path(dirfd: BorrowedFd<'_>, name: &[u8]) -> Vec<u8> {
    let mut p = format!("/proc/self/fd/{}/", dirfd.as_raw_fd()).into_bytes();
    p.extend_from_slice(name);
    p
}

fn xattrs_of(path: &[u8]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut list = vec![0u8; 64 * 1024];
    let n = match rfs::llistxattr(path, &mut list[..]) {
        Ok(n) => n,
        Err(rustix::io::Errno::NOTSUP) => return out,
        Err(e) => panic!("llistxattr {}: {e}", lossy(path)),
    };
    for name in list[..n].split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let mut value = vec![0u8; 64 * 1024];
        let len = rfs::lgetxattr(path, name, &mut value[..])
            .unwrap_or_else(|e| panic!("lgetxattr {} {}: {e}", lossy(path), lossy(name)));
        value.truncate(len);
        out.insert(name.to_vec(), value);
    }
    out
}

// `struct stat` field types differ between architectures.
#[allow(clippy::unnecessary_cast)]
fn node_at(dirfd: BorrowedFd<'_>, name: &[u8], st: &rfs::Stat) -> Node {
    let mode = st.st_mode as u32;
    let kind = Kind::from_mode(mode);
    let size = st.st_size as u64;
    let (mut digest, mut target, mut segments) = (None, None, Vec::new());
    match kind {
        Kind::File => {
            let fd = rfs::openat(
                dirfd,
                name,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap_or_else(|e| panic!("open {}: {e}", lossy(name)));
            segments = segments_fd(&fd, size);
            digest = Some(digest_fd(&fd));
        }
        Kind::Symlink => {
            target = Some(
                rfs::readlinkat(dirfd, name, Vec::new())
                    .unwrap_or_else(|e| panic!("readlink {}: {e}", lossy(name)))
                    .into_bytes(),
            );
        }
        _ => {}
    }
    Node {
        kind,
        perm: mode & 0o7777,
        uid: st.st_uid as u32,
        gid: st.st_gid as u32,
        mtime: (st.st_mtime as i64, st.st_mtime_nsec as u64),
        ctime: (st.st_ctime as i64, st.st_ctime_nsec as u64),
        size,
        blocks: st.st_blocks as u64,
        digest,
        target,
        xattrs: xattrs_of(&proc_path(dirfd, name)),
        segments,
        rdev: if matches!(kind, Kind::CharDev | Kind::BlockDev) {
            st.st_rdev as u64
        } else {
            0
        },
        link_group: None,
        dev_ino: (st.st_dev as u64, st.st_ino as u64),
        nlink: st.st_nlink as u64,
    }
}

fn walk_dir(dirfd: &OwnedFd, rel: &[u8], out: &mut Tree) {
    let mut dir =
        rfs::Dir::read_from(dirfd).unwrap_or_else(|e| panic!("readdir {}: {e}", lossy(rel)));
    let mut names: Vec<Vec<u8>> = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.unwrap_or_else(|e| panic!("readdir {}: {e}", lossy(rel)));
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    }
    names.sort();
    for name in names {
        let child = join(rel, &name);
        let st = rfs::statat(dirfd, &name[..], AtFlags::SYMLINK_NOFOLLOW)
            .unwrap_or_else(|e| panic!("stat {}: {e}", lossy(&child)));
        let node = node_at(dirfd.as_fd(), &name, &st);
        let is_dir = node.kind == Kind::Dir;
        out.insert(child.clone(), node);
        if is_dir {
            let sub = rfs::openat(
                dirfd,
                &name[..],
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap_or_else(|e| panic!("open dir {}: {e}", lossy(&child)));
            walk_dir(&sub, &child, out);
        }
    }
}

/// Snapshot of the tree at `root` (which is not followed if it is a symlink).
pub fn snapshot(root: &Path) -> Tree {
    let mut out = Tree::new();
    // The root is described relative to its parent's fd, like every other entry.
    let (parent, name) = split_parent(root);
    let pfd = open_dir_path(&parent);
    let st = rfs::statat(&pfd, &name[..], AtFlags::SYMLINK_NOFOLLOW)
        .unwrap_or_else(|e| panic!("stat {}: {e}", root.display()));
    let node = node_at(pfd.as_fd(), &name, &st);
    let is_dir = node.kind == Kind::Dir;
    out.insert(Vec::new(), node);
    if is_dir {
        let fd = open_dir_at(&pfd, &name);
        walk_dir(&fd, b"", &mut out);
    }
    // Hard-link groups: paths of this tree sharing (dev, ino), named by the smallest.
    let mut groups: HashMap<(u64, u64), Vec<Vec<u8>>> = HashMap::new();
    for (k, n) in &out {
        if n.kind != Kind::Dir && n.nlink > 1 {
            groups.entry(n.dev_ino).or_default().push(k.clone());
        }
    }
    for paths in groups.values() {
        if paths.len() >= 2 {
            let smallest = paths.iter().min().unwrap().clone();
            for p in paths {
                out.get_mut(p).unwrap().link_group = Some(smallest.clone());
            }
        }
    }
    out
}

fn split_parent(p: &Path) -> (PathBuf, Vec<u8>) {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap().join(p)
    };
    let name = abs
        .file_name()
        .unwrap_or_else(|| panic!("{} has no last component", abs.display()))
        .as_bytes()
        .to_vec();
    (abs.parent().unwrap().to_path_buf(), name)
}

fn open_dir_path(p: &Path) -> OwnedFd {
    rfs::openat(
        CWD,
        p,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap_or_else(|e| panic!("open dir {}: {e}", p.display()))
}

/// Open the directory `name` (no `/`) relative to `dirfd`.
pub fn open_dir_at<Fd: AsFd>(dirfd: Fd, name: &[u8]) -> OwnedFd {
    rfs::openat(
        dirfd,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap_or_else(|e| panic!("open dir {}: {e}", lossy(name)))
}

/// Open the directory `base/rel` one component at a time (any length of `rel`).
pub fn open_dir(base: &Path, rel: &[u8]) -> OwnedFd {
    let mut fd = open_dir_path(base);
    for comp in rel.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        fd = open_dir_at(&fd, comp);
    }
    fd
}

/// Differences between two snapshots (at most `limit`), as readable lines.
pub fn diff(a: &Tree, b: &Tree, what: Compare, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let show = |k: &[u8]| {
        if k.is_empty() {
            "<root>".to_string()
        } else {
            let s = lossy(k);
            if s.len() > 160 {
                format!("{}...{} ({} bytes)", &s[..60], &s[s.len() - 80..], k.len())
            } else {
                s
            }
        }
    };
    for (k, na) in a {
        if out.len() >= limit {
            return out;
        }
        let Some(nb) = b.get(k) else {
            out.push(format!("only in left:  {} ({:?})", show(k), na.kind));
            continue;
        };
        let mut d = String::new();
        let mut field = |name: &str, x: String, y: String| {
            if x != y {
                let _ = write!(d, " {name}: {x} != {y};");
            }
        };
        field("kind", format!("{:?}", na.kind), format!("{:?}", nb.kind));
        if na.kind == nb.kind {
            if na.kind != Kind::Dir {
                field("size", na.size.to_string(), nb.size.to_string());
            }
            field(
                "content",
                format!("{:?}", na.digest.map(|d| format!("{d:032x}"))),
                format!("{:?}", nb.digest.map(|d| format!("{d:032x}"))),
            );
            field(
                "target",
                format!("{:?}", na.target.as_deref().map(lossy)),
                format!("{:?}", nb.target.as_deref().map(lossy)),
            );
            field("rdev", na.rdev.to_string(), nb.rdev.to_string());
        }
        field(
            "hard-link group",
            format!("{:?}", na.link_group.as_deref().map(show)),
            format!("{:?}", nb.link_group.as_deref().map(show)),
        );
        if what.metadata {
            field("mode", format!("{:o}", na.perm), format!("{:o}", nb.perm));
            field("uid", na.uid.to_string(), nb.uid.to_string());
            field("gid", na.gid.to_string(), nb.gid.to_string());
            field(
                "mtime",
                format!("{}.{:09}", na.mtime.0, na.mtime.1),
                format!("{}.{:09}", nb.mtime.0, nb.mtime.1),
            );
            let xa: Vec<_> = na
                .xattrs
                .iter()
                .map(|(k, v)| (lossy(k), lossy(v)))
                .collect();
            let xb: Vec<_> = nb
                .xattrs
                .iter()
                .map(|(k, v)| (lossy(k), lossy(v)))
                .collect();
            field("xattrs", format!("{xa:?}"), format!("{xb:?}"));
        }
        if what.holes && na.kind == Kind::File && nb.kind == Kind::File {
            field(
                "data segments",
                format!("{:?}", na.segments),
                format!("{:?}", nb.segments),
            );
        }
        if !d.is_empty() {
            out.push(format!("differs: {}:{d}", show(k)));
        }
    }
    for (k, nb) in b {
        if out.len() >= limit {
            return out;
        }
        if !a.contains_key(k) {
            out.push(format!("only in right: {} ({:?})", show(k), nb.kind));
        }
    }
    out
}

/// Panic with the first differences when the snapshots differ.
pub fn assert_equal(a: &Tree, b: &Tree, what: Compare) {
    assert_equal_in("trees", a, b, what)
}

/// [`assert_equal`] with a context for the message.
pub fn assert_equal_in(context: &str, a: &Tree, b: &Tree, what: Compare) {
    let d = diff(a, b, what, 25);
    assert!(
        d.is_empty(),
        "{context}: the trees differ ({what:?}; left {} entries, right {}); first differences:\n  {}",
        a.len(),
        b.len(),
        d.join("\n  ")
    );
}

/// Entries whose ctime differs between two snapshots of the same tree (and entries that appeared,
/// disappeared or changed inode).
pub fn ctime_changes(before: &Tree, after: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for (k, a) in before {
        match after.get(k) {
            None => out.push(format!("removed: {}", lossy(k))),
            Some(b) if b.dev_ino != a.dev_ino => out.push(format!("replaced: {}", lossy(k))),
            Some(b) if b.ctime != a.ctime => out.push(format!(
                "ctime changed: {} ({}.{:09} -> {}.{:09})",
                lossy(k),
                a.ctime.0,
                a.ctime.1,
                b.ctime.0,
                b.ctime.1
            )),
            _ => {}
        }
    }
    for k in after.keys() {
        if !before.contains_key(k) {
            out.push(format!("added: {}", lossy(k)));
        }
    }
    out
}

/// A copy of the snapshot with `prefix` (a relative path) and everything under it removed.
pub fn without(t: &Tree, prefix: &[u8]) -> Tree {
    t.iter()
        .filter(|(k, _)| !(k.as_slice() == prefix || k.starts_with(&join(prefix, b""))))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The sub-snapshot under `prefix`, re-keyed relative to it (`prefix` itself becomes `b""`).
/// Hard-link groups keep their names, re-keyed too when they lie under `prefix`.
pub fn subtree(t: &Tree, prefix: &[u8]) -> Tree {
    let strip = |k: &[u8]| -> Option<Vec<u8>> {
        if prefix.is_empty() {
            Some(k.to_vec())
        } else if k == prefix {
            Some(Vec::new())
        } else {
            k.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix(b"/"))
                .map(|r| r.to_vec())
        }
    };
    t.iter()
        .filter_map(|(k, v)| {
            strip(k).map(|nk| {
                let mut v = v.clone();
                v.link_group = v
                    .link_group
                    .as_deref()
                    .map(|g| strip(g).unwrap_or(g.to_vec()));
                (nk, v)
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Builders

/// Create nested directories under `base` (each made with `mkdirat` relative to its parent's fd)
/// until `base/REL` is longer than `min_len` bytes; returns REL.
pub fn make_long_path(base: &Path, min_len: usize) -> Vec<u8> {
    let mut fd = open_dir_path(base);
    let mut rel: Vec<u8> = Vec::new();
    let mut i = 0;
    while base.as_os_str().len() + 1 + rel.len() <= min_len {
        let name = format!("{i:03}_{}", "x".repeat(200)).into_bytes();
        match rfs::mkdirat(&fd, &name[..], Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => panic!("mkdirat: {e}"),
        }
        fd = open_dir_at(&fd, &name);
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(&name);
        i += 1;
    }
    rel
}

/// Create (or truncate) the file `name` relative to `dirfd` with `data` and `perm`.
pub fn write_file_at<Fd: AsFd>(dirfd: Fd, name: &[u8], data: &[u8], perm: u32) {
    let fd = rfs::openat(
        dirfd,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(perm),
    )
    .unwrap_or_else(|e| panic!("create {}: {e}", lossy(name)));
    rfs::fchmod(&fd, Mode::from_raw_mode(perm)).unwrap();
    let mut f = std::fs::File::from(fd);
    f.write_all(data).unwrap();
}

/// Create the file `dir/name` (name as bytes, e.g. non-UTF-8) with `data`.
pub fn write_file_named(dir: &Path, name: &[u8], data: &[u8]) {
    write_file_at(open_dir_path(dir), name, data, 0o644);
}

/// The non-UTF-8 name used by the tests: `caf\xe9` (Latin-1 "café").
pub const NON_UTF8: &[u8] = b"caf\xe9";

/// Create `dir/names[0]` with `data` and hard links `dir/names[1..]` to it (names may contain `/`
/// into existing subdirectories).
pub fn make_hard_links(dir: &Path, names: &[&str], data: &[u8]) {
    let first = dir.join(names[0]);
    std::fs::write(&first, data).unwrap();
    for n in &names[1..] {
        std::fs::hard_link(&first, dir.join(n)).unwrap();
    }
}

/// Offsets where [`make_sparse`] puts data.
pub const SPARSE_DATA: [u64; 2] = [0, 6 << 20];
/// Size of [`make_sparse`]'s file.
pub const SPARSE_SIZE: u64 = 8 << 20;

/// An 8 MiB file with 64 KiB of data at offsets 0 and 6 MiB, holes elsewhere.
pub fn make_sparse(path: &Path) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::create(path).unwrap();
    for (i, off) in SPARSE_DATA.iter().enumerate() {
        let data: Vec<u8> = (0..65536u32)
            .map(|j| (j * 7 + i as u32 * 13 + 1) as u8 | 1)
            .collect();
        f.write_all_at(&data, *off).unwrap();
    }
    f.set_len(SPARSE_SIZE).unwrap();
    f.sync_all().unwrap();
    let segs = {
        let fd: OwnedFd = f.into();
        segments_fd(&fd, SPARSE_SIZE)
    };
    assert!(
        segs.iter().map(|(s, e)| e - s).sum::<u64>() < SPARSE_SIZE / 2,
        "{}: the file system did not keep holes: {segs:?}",
        path.display()
    );
}

/// Set an extended attribute (not following symlinks).
pub fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    rfs::lsetxattr(path, name, value, rfs::XattrFlags::empty())
        .unwrap_or_else(|e| panic!("setxattr {} {name}: {e}", path.display()));
}

/// Create a named pipe `dir/name` with `mknodat`.
pub fn make_fifo(dir: &Path, name: &str, perm: u32) {
    let fd = open_dir_path(dir);
    rfs::mknodat(&fd, name, rfs::FileType::Fifo, Mode::from_raw_mode(perm), 0)
        .unwrap_or_else(|e| panic!("mkfifo {}/{name}: {e}", dir.display()));
    rfs::chmodat(&fd, name, Mode::from_raw_mode(perm), AtFlags::empty()).unwrap();
}

/// Set atime and mtime of `dirfd/name` (a symlink itself when it is one).
pub fn set_times_at<Fd: AsFd>(dirfd: Fd, name: &[u8], mtime: (i64, u64)) {
    let t = Timespec {
        tv_sec: mtime.0,
        tv_nsec: mtime.1 as _,
    };
    rfs::utimensat(
        dirfd,
        name,
        &Timestamps {
            last_access: t,
            last_modification: t,
        },
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap_or_else(|e| panic!("utimensat {}: {e}", lossy(name)));
}

/// Set atime and mtime of `path` (not following a final symlink).
pub fn set_mtime(path: &Path, mtime: (i64, u64)) {
    set_times_at(CWD, path.as_os_str().as_bytes(), mtime)
}

/// The mtime of `path` (not following a final symlink).
#[allow(clippy::unnecessary_cast)]
pub fn mtime_of(path: &Path) -> (i64, u64) {
    let st = rfs::statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    (st.st_mtime as i64, st.st_mtime_nsec as u64)
}

/// `chmod` (following symlinks).
pub fn chmod(path: &Path, perm: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// `lchown -R path uid:gid`.
pub fn chown_tree(path: &Path, uid: u32, gid: u32) {
    let st = std::fs::symlink_metadata(path).unwrap();
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
    if st.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path(), uid, gid);
        }
    }
}

/// Total bytes of regular files in a snapshot.
pub fn file_bytes(t: &Tree) -> u64 {
    t.values()
        .filter(|n| n.kind == Kind::File)
        .map(|n| n.size)
        .sum()
}

/// `chattr -i` on drop (so a failing test still leaves a removable tree).
#[derive(Debug)]
pub struct Immutable(pub PathBuf);

impl Immutable {
    /// `chattr +i path`.
    pub fn set(path: &Path) -> Immutable {
        run_tool("chattr", &["+i".as_ref(), path.as_os_str()]);
        Immutable(path.to_path_buf())
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

/// Run an external tool that must exist and succeed (a missing tool fails the test).
pub fn run_tool(program: &str, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is needed by this test and could not start: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// What [`make_awkward_tree`] built.
#[derive(Debug)]
pub struct Awkward {
    /// Relative path of the directory deeper than `PATH_MAX`.
    pub long_rel: Vec<u8>,
    /// Relative path of the sparse file.
    pub sparse_rel: Vec<u8>,
}

/// The interop vector tree (seed 1) plus every awkward entry: a hard-link group of three (when
/// `hard_links`), an 8 MiB sparse file, user.* xattrs on a file and a directory, a fifo,
/// non-UTF-8 names (file and directory), setuid/sticky modes, foreign owners, and a file with an
/// xattr under a path longer than 4096 bytes.
pub fn make_awkward_tree(dir: &Path, hard_links: bool) -> Awkward {
    crate::make_vector_tree(dir, 1, false);
    if hard_links {
        std::fs::create_dir_all(dir.join("links/sub")).unwrap();
        make_hard_links(
            dir,
            &["links/a", "links/b", "links/sub/c"],
            b"linked data\n",
        );
    }
    make_sparse(&dir.join("sparse.bin"));
    std::fs::write(dir.join("xattr_file"), b"has xattrs\n").unwrap();
    set_xattr(&dir.join("xattr_file"), "user.mfu.test", b"hello");
    set_xattr(&dir.join("xattr_file"), "user.mfu.empty", b"");
    set_xattr(&dir.join("d0"), "user.mfu.dir", b"on a directory");
    make_fifo(dir, "fifo", 0o640);
    write_file_named(dir, NON_UTF8, b"latin-1 name\n");
    let mut nd = NON_UTF8.to_vec();
    nd.extend_from_slice(b"_dir");
    rfs::mkdirat(open_dir_path(dir), &nd[..], Mode::from_raw_mode(0o755)).unwrap();
    write_file_at(open_dir(dir, &nd), b"inner\xff.txt", b"inner\n", 0o600);
    std::fs::create_dir(dir.join("modes")).unwrap();
    std::fs::write(dir.join("modes/setuid"), b"#!/bin/true\n").unwrap();
    std::fs::write(dir.join("modes/foreign"), b"owned by 1234:5678\n").unwrap();
    std::os::unix::fs::lchown(dir.join("modes/foreign"), Some(1234), Some(5678)).unwrap();
    std::fs::create_dir(dir.join("modes/sticky")).unwrap();
    std::os::unix::fs::symlink("setuid", dir.join("modes/link")).unwrap();
    std::os::unix::fs::lchown(dir.join("modes/link"), Some(4321), Some(8765)).unwrap();
    chmod(&dir.join("modes/setuid"), 0o4755);
    chmod(&dir.join("modes/sticky"), 0o1777);
    let long_rel = make_long_path(dir, 4200);
    let fd = open_dir(dir, &long_rel);
    write_file_at(&fd, b"deep.txt", b"deeper than PATH_MAX\n", 0o644);
    rfs::lsetxattr(
        proc_path(fd.as_fd(), b"deep.txt"),
        "user.mfu.deep",
        b"deep value",
        rfs::XattrFlags::empty(),
    )
    .unwrap();
    set_times_at(&fd, b"deep.txt", (1_500_000_000, 123_456_789));
    // A few fixed times with nanoseconds, on a symlink and a directory too.
    set_mtime(&dir.join("modes/link"), (1_400_000_000, 987_654_321));
    set_mtime(&dir.join("modes"), (1_400_000_001, 1));
    Awkward {
        long_rel,
        sparse_rel: b"sparse.bin".to_vec(),
    }
}
