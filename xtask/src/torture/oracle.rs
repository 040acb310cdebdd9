//! The independent oracle: its own walk (lstat, never following), its own hashing (SHA-256 of
//! every regular file's bytes), its own comparisons. It never calls the engine's code, so a
//! defect shared by the engine's walk, copy and verify cannot hide from it.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// What an entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file: its size (bytes) and the SHA-256 of its bytes.
    File {
        size: u64,
        hash: Hash,
    },
    Dir,
    /// A symlink and its target (bytes).
    Link(Vec<u8>),
    /// A fifo, socket or device.
    Other,
}

/// One entry of a tree as the oracle saw it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub kind: Kind,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    /// Modification time (s, ns).
    pub mtime: (i64, i64),
    /// Inode number (hard-link groups).
    pub ino: u64,
    /// Extended attributes in the `user.` namespace (name, value).
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// A tree: relative path (bytes, `/`-separated, the root itself left out) to entry.
pub type Snap = BTreeMap<Vec<u8>, Entry>;

/// The path `rel` (bytes) under `root`.
pub fn join(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(rel))
}

/// A path printable on one line: bytes that are not printable ASCII as `\xNN`.
pub fn show(p: &[u8]) -> String {
    let mut s = String::new();
    for &b in p {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

/// SHA-256 of a file's bytes (opened without following a symlink).
pub fn hash_file(path: &Path) -> Result<Hash> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("oracle: open {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("oracle: read {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().into())
}

/// SHA-256 of bytes in memory.
pub fn hash_bytes(b: &[u8]) -> Hash {
    Sha256::digest(b).into()
}

fn xattrs(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return out;
    };
    let mut names = vec![0u8; 4096];
    // SAFETY: the buffer is valid for its length; the path is NUL-terminated.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return out;
    }
    for name in names[..n as usize].split(|&b| b == 0) {
        if !name.starts_with(b"user.") {
            continue;
        }
        let cn = std::ffi::CString::new(name).expect("no NUL inside a name");
        let mut val = vec![0u8; 65536];
        // SAFETY: as above.
        let m =
            unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), val.as_mut_ptr().cast(), val.len()) };
        if m >= 0 {
            val.truncate(m as usize);
            out.insert(name.to_vec(), val);
        }
    }
    out
}

/// The tree under `root` (empty when `root` does not exist).
pub fn snapshot(root: &Path) -> Result<Snap> {
    let mut snap = Snap::new();
    if std::fs::symlink_metadata(root).is_err() {
        return Ok(snap);
    }
    walk(root, &[], &mut snap)?;
    Ok(snap)
}

fn walk(dir: &Path, rel: &[u8], snap: &mut Snap) -> Result<()> {
    let rd = std::fs::read_dir(dir).with_context(|| format!("oracle: read {}", dir.display()))?;
    for e in rd {
        let e = e?;
        let name = e.file_name();
        let path = e.path();
        let m = std::fs::symlink_metadata(&path)
            .with_context(|| format!("oracle: lstat {}", path.display()))?;
        let mut r = rel.to_vec();
        if !r.is_empty() {
            r.push(b'/');
        }
        r.extend_from_slice(name.as_bytes());
        let ft = m.file_type();
        let kind = if ft.is_file() {
            Kind::File {
                size: m.len(),
                hash: hash_file(&path)?,
            }
        } else if ft.is_dir() {
            Kind::Dir
        } else if ft.is_symlink() {
            Kind::Link(std::fs::read_link(&path)?.as_os_str().as_bytes().to_vec())
        } else {
            let _ = ft.is_fifo();
            Kind::Other
        };
        snap.insert(
            r.clone(),
            Entry {
                kind: kind.clone(),
                mode: m.mode() & 0o7777,
                mtime: (m.mtime(), m.mtime_nsec()),
                ino: m.ino(),
                xattrs: if ft.is_symlink() {
                    BTreeMap::new()
                } else {
                    xattrs(&path)
                },
            },
        );
        if kind == Kind::Dir {
            walk(&path, &r, snap)?;
        }
    }
    Ok(())
}

/// What a comparison of a result with what it should be looks at (content, types and symlink
/// targets always).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cmp {
    /// Files' modification times.
    pub mtime: bool,
    /// Permission bits (of files and directories).
    pub mode: bool,
    /// Hard-link groups.
    pub links: bool,
    /// `user.` extended attributes.
    pub xattrs: bool,
    /// Entries in the result that the expected tree lacks are allowed.
    pub extra_ok: bool,
}

impl Cmp {
    /// Everything compared, nothing extra allowed: a tree that must not have changed.
    pub const EXACT: Cmp = Cmp {
        mtime: true,
        mode: true,
        links: true,
        xattrs: true,
        extra_ok: false,
    };
}

/// The differences between `want` and `got`, one printable line each (empty when equal).
pub fn diff(want: &Snap, got: &Snap, cmp: Cmp) -> Vec<String> {
    let mut out = Vec::new();
    for (p, w) in want {
        let Some(g) = got.get(p) else {
            out.push(format!("missing: {}", show(p)));
            continue;
        };
        if w.kind != g.kind {
            out.push(format!(
                "differs: {} ({} vs {})",
                show(p),
                kind(&w.kind),
                kind(&g.kind)
            ));
            continue;
        }
        let file = matches!(w.kind, Kind::File { .. });
        if cmp.mtime && file && w.mtime != g.mtime {
            out.push(format!(
                "mtime differs: {} ({:?} vs {:?})",
                show(p),
                w.mtime,
                g.mtime
            ));
        }
        if cmp.mode && !matches!(w.kind, Kind::Link(_)) && w.mode != g.mode {
            out.push(format!(
                "mode differs: {} ({:o} vs {:o})",
                show(p),
                w.mode,
                g.mode
            ));
        }
        if cmp.xattrs && w.xattrs != g.xattrs {
            out.push(format!("xattrs differ: {}", show(p)));
        }
    }
    if !cmp.extra_ok {
        for p in got.keys().filter(|p| !want.contains_key(*p)) {
            out.push(format!("unexpected: {}", show(p)));
        }
    }
    if cmp.links {
        // Two regular files share an inode in `got` exactly when they do in `want`.
        let mut pairs: BTreeMap<u64, u64> = BTreeMap::new();
        let mut back: BTreeMap<u64, u64> = BTreeMap::new();
        for (p, w) in want
            .iter()
            .filter(|(_, e)| matches!(e.kind, Kind::File { .. }))
        {
            let Some(g) = got.get(p).filter(|g| g.kind == w.kind) else {
                continue;
            };
            if *pairs.entry(w.ino).or_insert(g.ino) != g.ino
                || *back.entry(g.ino).or_insert(w.ino) != w.ino
            {
                out.push(format!("hard links differ at {}", show(p)));
            }
        }
    }
    out
}

fn kind(k: &Kind) -> String {
    match k {
        Kind::File { size, hash } => {
            format!("file of {size} bytes {:02x}{:02x}..", hash[0], hash[1])
        }
        Kind::Dir => "directory".into(),
        Kind::Link(t) => format!("symlink to {}", show(t)),
        Kind::Other => "special file".into(),
    }
}

/// Every version of each source file's bytes that ever existed (path to digests): a copy may
/// hold an earlier whole version, never a mix.
pub type Versions = BTreeMap<Vec<u8>, BTreeSet<Hash>>;

/// Record the current bytes of every regular file of `src` as a version.
pub fn add_versions(v: &mut Versions, src: &Snap) {
    for (p, e) in src {
        if let Kind::File { hash, .. } = e.kind {
            v.entry(p.clone()).or_default().insert(hash);
        }
    }
}

/// Files of `dest` that carry their source's size and mtime without any version of its bytes
/// (a quick-check sync would trust them forever). `map` turns a DEST path into its SRC path
/// (`None`: no counterpart).
pub fn forged(
    src: &Snap,
    versions: &Versions,
    dest: &Snap,
    map: impl Fn(&[u8]) -> Option<Vec<u8>>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (p, d) in dest {
        let Kind::File { size, hash } = d.kind else {
            continue;
        };
        let Some(sp) = map(p) else { continue };
        let Some(s) = src.get(&sp) else { continue };
        let Kind::File { size: ssize, .. } = s.kind else {
            continue;
        };
        if size == ssize
            && d.mtime == s.mtime
            && !versions.get(&sp).is_some_and(|v| v.contains(&hash))
        {
            out.push(format!(
                "{} carries its source's size and mtime but bytes no version of it had",
                show(p)
            ));
        }
    }
    out
}

/// Regular files of `got` whose bytes are no whole version of their source (a mix of versions).
pub fn mixed(versions: &Versions, got: &Snap) -> Vec<String> {
    let mut out = Vec::new();
    for (p, e) in got {
        if let (Kind::File { hash, .. }, Some(v)) = (&e.kind, versions.get(p)) {
            if !v.contains(hash) {
                out.push(format!(
                    "{} holds bytes no version of its source had",
                    show(p)
                ));
            }
        }
    }
    out
}

/// The sentinel's state that must not change: everything but ctime, link counts and inode
/// numbers (a hard link into it from a tree legitimately changes those).
pub fn sentinel_changes(before: &Snap, after: &Snap) -> Vec<String> {
    let mut out = diff(
        before,
        after,
        Cmp {
            mtime: true,
            mode: true,
            links: false,
            xattrs: true,
            extra_ok: false,
        },
    );
    for (p, b) in before {
        if let (Kind::Dir, Some(a)) = (&b.kind, after.get(p)) {
            if a.mtime != b.mtime {
                out.push(format!("directory {} modified", show(p)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn tree(d: &Path) {
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("a"), b"hello").unwrap();
        std::fs::write(d.join("sub/b"), vec![7u8; 100_000]).unwrap();
        std::os::unix::fs::symlink("a", d.join("l")).unwrap();
        std::fs::hard_link(d.join("a"), d.join("h")).unwrap();
    }

    fn all() -> Cmp {
        Cmp::EXACT
    }

    fn copy_times(from: &Path, to: &Path) {
        let m = std::fs::metadata(from).unwrap();
        std::fs::File::options()
            .write(true)
            .open(to)
            .unwrap()
            .set_modified(m.modified().unwrap())
            .unwrap();
    }

    fn cp_a(s: &Path, d: &Path) {
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(s)
            .arg(d)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    #[test]
    fn equal_trees_have_no_difference() {
        let t = tempfile::tempdir().unwrap();
        tree(&t.path().join("s"));
        cp_a(&t.path().join("s"), &t.path().join("d"));
        let (s, d) = (
            snapshot(&t.path().join("s")).unwrap(),
            snapshot(&t.path().join("d")).unwrap(),
        );
        assert_eq!(s.len(), 5);
        assert_eq!(diff(&s, &d, all()), Vec::<String>::new());
    }

    #[test]
    fn catches_a_flipped_byte_a_missing_file_and_a_broken_link() {
        let t = tempfile::tempdir().unwrap();
        let (sp, dp) = (t.path().join("s"), t.path().join("d"));
        tree(&sp);
        cp_a(&sp, &dp);
        // One byte flipped in the middle of DEST's big file, its mtime restored.
        let f = std::fs::File::options()
            .write(true)
            .open(dp.join("sub/b"))
            .unwrap();
        f.write_all_at(&[8], 50_000).unwrap();
        drop(f);
        copy_times(&sp.join("sub/b"), &dp.join("sub/b"));
        let s = snapshot(&sp).unwrap();
        let d = snapshot(&dp).unwrap();
        let found = diff(&s, &d, all());
        assert!(
            found.iter().any(|l| l.contains("differs: sub/b")),
            "{found:?}"
        );
        // That file also carries the source's size and mtime with other bytes.
        let mut v = Versions::new();
        add_versions(&mut v, &s);
        let f = forged(&s, &v, &d, |p| Some(p.to_vec()));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].starts_with("sub/b"));
        assert_eq!(mixed(&v, &d).len(), 1);
        // A hard link broken, an entry missing.
        std::fs::remove_file(dp.join("h")).unwrap();
        std::fs::copy(dp.join("a"), dp.join("h")).unwrap();
        std::fs::remove_file(dp.join("l")).unwrap();
        let d = snapshot(&dp).unwrap();
        let found = diff(&s, &d, all());
        assert!(found.iter().any(|l| l == "missing: l"), "{found:?}");
        assert!(
            found.iter().any(|l| l.starts_with("hard links differ")),
            "{found:?}"
        );
    }

    #[test]
    fn an_earlier_whole_version_is_not_forged_but_a_mix_is() {
        let t = tempfile::tempdir().unwrap();
        let (sp, dp) = (t.path().join("s"), t.path().join("d"));
        std::fs::create_dir_all(&sp).unwrap();
        std::fs::write(sp.join("f"), b"AAAA").unwrap();
        cp_a(&sp, &dp);
        let mut v = Versions::new();
        add_versions(&mut v, &snapshot(&sp).unwrap());
        // SRC rewritten in place, its mtime restored: DEST holds the old whole version.
        let keep = dp.join("f");
        std::fs::write(sp.join("f"), b"BBBB").unwrap();
        copy_times(&keep, &sp.join("f"));
        let s = snapshot(&sp).unwrap();
        add_versions(&mut v, &s);
        assert!(forged(&s, &v, &snapshot(&dp).unwrap(), |p| Some(p.to_vec())).is_empty());
        // A mix of both with the source's mtime is caught.
        std::fs::write(&keep, b"AABB").unwrap();
        copy_times(&sp.join("f"), &keep);
        let d = snapshot(&dp).unwrap();
        assert_eq!(forged(&s, &v, &d, |p| Some(p.to_vec())).len(), 1);
        assert_eq!(mixed(&v, &d).len(), 1);
    }

    #[test]
    fn catches_a_touched_sentinel() {
        let t = tempfile::tempdir().unwrap();
        let sp = t.path().join("sentinel");
        tree(&sp);
        let before = snapshot(&sp).unwrap();
        assert!(sentinel_changes(&before, &snapshot(&sp).unwrap()).is_empty());
        // Rewritten with the same bytes: only its mtime changes.
        std::fs::write(sp.join("a"), b"hello").unwrap();
        let m = std::fs::metadata(sp.join("a")).unwrap();
        let old = before[b"a".as_slice()].mtime;
        if (m.mtime(), m.mtime_nsec()) != old {
            assert!(!sentinel_changes(&before, &snapshot(&sp).unwrap()).is_empty());
        }
        // A mode change, a new entry.
        std::fs::set_permissions(
            sp.join("sub/b"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        std::fs::write(sp.join("new"), b"").unwrap();
        let found = sentinel_changes(&before, &snapshot(&sp).unwrap());
        assert!(
            found.iter().any(|l| l.starts_with("mode differs: sub/b")),
            "{found:?}"
        );
        assert!(found.iter().any(|l| l == "unexpected: new"), "{found:?}");
    }

    #[test]
    fn shows_hostile_names_on_one_line() {
        assert_eq!(show(b"a\nb|F \xff"), "a\\x0ab|F \\xff");
    }
}
