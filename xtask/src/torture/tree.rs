//! The random tree of an iteration: hostile names (spaces, newlines, `|`, a `NAME|F` beside
//! `NAME`, a `.NAME.mfu-partial` beside `NAME`, bytes that are not UTF-8, glob characters),
//! files from empty to several chunks (big enough to be journaled with the test knob), sparse
//! files, hard links, symlinks (inside, dangling, and out to the sentinel), `user.` xattrs and
//! old mtimes.

use super::oracle::join;
use super::rng::Rng;
use anyhow::{Context, Result};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// Names a user's files can have, each one a trap for some parser.
const NAMES: &[&[u8]] = &[
    b"plain",
    b"with space",
    b"new\nline",
    b"pipe|F",
    b"dir|D",
    b"-dash",
    b"caf\xc3\xa9",
    b"\xff\xfe raw",
    b"star*",
    b"q?",
    b"[br]",
    b"back\\slash",
    b"tab\tname",
    b"trailing ",
    b"'quote\"",
    b"$HOME",
    b"%s%n",
    b".hidden",
    b"x.tmp",
    b"cache",
    b"a.txt",
    b"a.txt.bak",
    b"..dots",
];

/// What was built (relative paths, bytes).
#[derive(Default, Debug)]
pub struct Built {
    /// Regular files (one name per inode: the first of a hard-link group).
    pub files: Vec<Vec<u8>>,
    /// Files of more than one chunk.
    pub big: Vec<Vec<u8>>,
    /// Directories (not the root).
    pub dirs: Vec<Vec<u8>>,
    /// Bytes of data written (apparent sizes).
    pub bytes: u64,
}

/// Deterministic bytes of `n` (a new version each call).
pub fn content(rng: &mut Rng, n: usize) -> Vec<u8> {
    // Compressible runs and noise, so compression paths see both.
    let mut v = rng.bytes(n);
    if rng.chance(50) {
        for chunk in v.chunks_mut(4096).step_by(2) {
            let b = chunk[0];
            chunk.fill(b);
        }
    }
    v
}

fn name(rng: &mut Rng, i: usize) -> Vec<u8> {
    let mut n = rng.pick(NAMES).to_vec();
    // Unique within a directory, the hostile part kept at one end or the other.
    if rng.chance(50) {
        n.extend_from_slice(format!("{i}").as_bytes());
    } else {
        let mut m = format!("{i}").into_bytes();
        m.extend_from_slice(&n);
        n = m;
    }
    n
}

fn old_time(rng: &mut Rng) -> std::time::SystemTime {
    UNIX_EPOCH
        + Duration::new(
            1_000_000_000 + rng.below(600_000_000),
            rng.below(1_000_000_000) as u32,
        )
}

/// Build a random tree at `root` (made), files of up to `max_chunks` chunks of `chunk` bytes,
/// symlinks out of it into `sentinel`; `journal_traps`: files named like a sibling's journal.
pub fn build(
    rng: &mut Rng,
    root: &Path,
    sentinel: &Path,
    chunk: u64,
    max_chunks: u64,
    journal_traps: bool,
) -> Result<Built> {
    std::fs::create_dir_all(root).with_context(|| format!("mkdir {}", root.display()))?;
    let mut b = Built::default();
    let mut dirs: Vec<Vec<u8>> = vec![Vec::new()];
    let ndirs = rng.between(0, 6) as usize;
    for i in 0..ndirs {
        let parent = rng.pick(&dirs).clone();
        let rel = child(&parent, &name(rng, i));
        std::fs::create_dir(join(root, &rel))?;
        dirs.push(rel.clone());
        b.dirs.push(rel);
    }
    let nfiles = rng.between(1, 14) as usize;
    for i in 0..nfiles {
        let parent = rng.pick(&dirs).clone();
        let rel = child(&parent, &name(rng, 100 + i));
        let size = match rng.below(10) {
            0 => 0,
            1..=4 => rng.between(1, 5000),
            5 | 6 => rng.between(5000, chunk),
            _ => chunk * rng.between(1, max_chunks) + rng.below(chunk),
        };
        let path = join(root, &rel);
        if size > chunk * 2 && rng.chance(25) {
            // Sparse: holes between a few written blocks.
            let f = std::fs::File::create(&path)?;
            f.set_len(size)?;
            for _ in 0..rng.between(1, 4) {
                let at = rng.below(size);
                let data = content(rng, 4096.min((size - at) as usize));
                f.write_all_at(&data, at)?;
            }
        } else {
            std::fs::write(&path, content(rng, size as usize))?;
        }
        b.bytes += size;
        if size > chunk {
            b.big.push(rel.clone());
        }
        if rng.chance(20) {
            let n = format!("user.t{}", rng.below(3));
            let len = rng.below(40) as usize;
            let v = rng.bytes(len);
            set_xattr(&path, n.as_bytes(), &v);
        }
        // A list trap: `NAME|F` beside `NAME`; a journal's name beside its file.
        if rng.chance(25) {
            let mut t = rel.clone();
            const TRAPS: [&[u8]; 3] = [b"|F", b"|D", b"|L"];
            let suffix = TRAPS[rng.below(3) as usize];
            t.extend_from_slice(suffix);
            std::fs::write(join(root, &t), b"trap")?;
            b.files.push(t);
        }
        if size > chunk && rng.chance(30) && journal_traps {
            let (dir, base) = split(&rel);
            let mut j = b".".to_vec();
            j.extend_from_slice(base);
            j.extend_from_slice(b".mfu-partial");
            let t = child(dir, &j);
            let n = rng.between(0, 400) as usize;
            std::fs::write(join(root, &t), content(rng, n))?;
            b.files.push(t);
        }
        b.files.push(rel);
    }
    // Hard links, symlinks.
    for i in 0..rng.between(0, 3) as usize {
        let target = rng.pick(&b.files).clone();
        let parent = rng.pick(&dirs).clone();
        let rel = child(&parent, &name(rng, 200 + i));
        std::fs::hard_link(join(root, &target), join(root, &rel))?;
    }
    for i in 0..rng.between(0, 4) as usize {
        let parent = rng.pick(&dirs).clone();
        let rel = child(&parent, &name(rng, 300 + i));
        let target: Vec<u8> = match rng.below(4) {
            0 => b"dangling-nowhere".to_vec(),
            1 => sentinel.join("victim").as_os_str().as_bytes().to_vec(),
            _ => {
                // Relative to a file of the tree (may itself be hostile).
                let t = rng.pick(&b.files).clone();
                let depth =
                    parent.iter().filter(|&&c| c == b'/').count() + usize::from(!parent.is_empty());
                let mut s = b"../".repeat(depth);
                s.extend_from_slice(&t);
                s
            }
        };
        std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), join(root, &rel))?;
    }
    // Old mtimes on files, so that a lost mtime is seen.
    for f in &b.files {
        if rng.chance(70) {
            let t = old_time(rng);
            std::fs::File::options()
                .write(true)
                .open(join(root, f))?
                .set_modified(t)?;
        }
    }
    Ok(b)
}

/// A small tree beside the trees under test, hashed before and after each step: nothing may
/// ever change it. SRC's symlinks point into it.
pub fn sentinel(rng: &mut Rng, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir.join("sub"))?;
    std::fs::write(dir.join("victim"), content(rng, 3000))?;
    std::fs::write(dir.join("sub/big"), content(rng, 200_000))?;
    std::fs::write(dir.join("empty"), b"")?;
    for f in ["victim", "sub/big", "empty"] {
        std::fs::File::options()
            .write(true)
            .open(dir.join(f))?
            .set_modified(old_time(rng))?;
    }
    Ok(())
}

/// `parent/name` (just `name` at the root).
pub fn child(parent: &[u8], name: &[u8]) -> Vec<u8> {
    let mut r = parent.to_vec();
    if !r.is_empty() {
        r.push(b'/');
    }
    r.extend_from_slice(name);
    r
}

/// Whether the relative path `rel` is `dir` or lies beneath it.
pub fn is_at_or_below(rel: &[u8], dir: &[u8]) -> bool {
    rel == dir || (rel.starts_with(dir) && rel.get(dir.len()) == Some(&b'/'))
}

/// (directory, base name) of a relative path.
pub fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&c| c == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&[], rel),
    }
}

fn set_xattr(path: &Path, name: &[u8], value: &[u8]) {
    let (Ok(p), Ok(n)) = (
        std::ffi::CString::new(path.as_os_str().as_bytes()),
        std::ffi::CString::new(name),
    ) else {
        return;
    };
    // SAFETY: valid NUL-terminated strings and a buffer of its length. Where the file system
    // has no user xattrs the tree simply has none (the oracle reads what is there).
    unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::torture::oracle::{diff, snapshot, Cmp};

    /// A seed replays the same tree (names, bytes, links, modes), and another seed does not.
    #[test]
    fn a_seed_replays_its_tree() {
        let t = tempfile::tempdir().unwrap();
        let sentinel = t.path().join("sentinel");
        let build_with = |seed: u64, dir: &str| {
            let root = t.path().join(dir);
            build(&mut Rng::new(seed), &root, &sentinel, 65536, 3, true).unwrap();
            snapshot(&root).unwrap()
        };
        let (a, b, other) = (
            build_with(42, "a"),
            build_with(42, "b"),
            build_with(43, "c"),
        );
        let cmp = Cmp {
            mtime: false,
            mode: true,
            links: true,
            xattrs: true,
            extra_ok: false,
        };
        assert!(!a.is_empty());
        assert_eq!(diff(&a, &b, cmp), Vec::<String>::new());
        assert!(!diff(&a, &other, cmp).is_empty());
    }
}
