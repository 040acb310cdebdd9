//! The deterministic file trees that the interop vectors in `tests/vectors/` describe.
//!
//! The vectors were written by mpiFileUtils on trees made by a small Python script
//! (`make_vector_tree.py ROOT SEED [--ascii]`). This crate rebuilds those trees byte for byte
//! without Python: the same file bytes, modes, mtimes, names, symlinks and directory mtimes,
//! and the same manifest JSON (`manifest-tree.json` is seed 1, `manifest-tartree.json` is
//! seed 3 with ASCII names only).
//!
//! Python's `random.Random(seed)` is MT19937 seeded by `init_by_array([seed])`; `getrandbits(k)`
//! for `k <= 32` is the next 32-bit output shifted right by `32 - k`, and `randrange(n)` /
//! `choice(seq)` draw `getrandbits(n.bit_length())` until the value is below `n`.
//! [`PyRandom`] does exactly that on top of [`rand_mt::Mt`].
//!
//! Unlike the script, the generator never overwrites: a file or link that already exists
//! under the root is an error (files are created with `O_CREAT | O_EXCL`).

use rand_mt::Mt;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fs::{File, FileTimes, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A failed file system operation on a path.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", path.display())]
pub struct Error {
    /// What was being done ("create", "write", "symlink", ...).
    pub op: &'static str,
    /// Where.
    pub path: PathBuf,
    /// Why it failed.
    pub source: std::io::Error,
}

fn at<T>(op: &'static str, path: &Path, r: std::io::Result<T>) -> Result<T, Error> {
    r.map_err(|source| Error {
        op,
        path: path.to_path_buf(),
        source,
    })
}

/// The subset of Python's `random.Random` the tree script uses, bit for bit.
#[derive(Debug)]
pub struct PyRandom(Mt);

impl PyRandom {
    /// `random.Random(seed)` for a seed below 2^32 (Python keys MT19937 with the seed's 32-bit
    /// words, least significant first: one word here).
    pub fn new(seed: u32) -> Self {
        Self(Mt::new_with_key([seed]))
    }

    /// `getrandbits(k)` for `1 <= k <= 32`.
    pub fn getrandbits(&mut self, k: u32) -> u32 {
        assert!((1..=32).contains(&k), "getrandbits({k}) is not supported");
        self.0.next_u32() >> (32 - k)
    }

    /// `randrange(n)` (`_randbelow`): uniform in `0..n`, `n > 0`.
    pub fn randbelow(&mut self, n: u32) -> u32 {
        assert!(n > 0, "randrange(0)");
        let k = u32::BITS - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `choice(seq)`.
    pub fn choice<'a, T>(&mut self, seq: &'a [T]) -> &'a T {
        let n = u32::try_from(seq.len()).expect("a short sequence");
        &seq[self.randbelow(n) as usize]
    }
}

/// One manifest entry, serialized with the script's keys in the script's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Path relative to the root (the generator's own names: always UTF-8).
    pub path: String,
    /// `f`, `l` or `d`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// File size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// File mode as Python's `oct()` writes it (`0o644`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// File mtime (and atime), seconds since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtime: Option<u64>,
    /// Lower-case hex SHA-256 of the file's bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Symlink target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The base time of a seed's tree: every directory gets it, file `i` gets `base + i`.
pub fn base_time(seed: u32) -> u64 {
    1_600_000_000 + u64::from(seed) * 1000
}

/// Build the tree for `seed` under `root` (created if missing) and return its manifest, sorted
/// by path. `ascii` replaces the one non-ASCII name (`epsilon-été`) by `epsilon-ete`.
pub fn build(root: &Path, seed: u32, ascii: bool) -> Result<Vec<Entry>, Error> {
    let mut g = Builder {
        root,
        rng: PyRandom::new(seed),
        t0: base_time(seed),
        entries: Vec::new(),
    };
    at("create directory", root, std::fs::create_dir_all(root))?;
    let epsilon = if ascii {
        "epsilon-ete"
    } else {
        "epsilon-\u{e9}t\u{e9}"
    };
    let names = ["alpha", "beta gamma", "delta|pipe", epsilon, "zeta.txt"];
    const SIZES: [u64; 8] = [0, 1, 100, 511, 512, 513, 4096, 70000];
    for d in 0..3 + seed % 3 {
        let count = 4 + g.rng.randbelow(4);
        for i in 0..count {
            let rel = format!("d{d}/sub{}/{}_{i}", i % 2, names[i as usize % names.len()]);
            let size = *g.rng.choice(&SIZES);
            g.add_file(&rel, size, 0o644)?;
        }
    }
    g.add_file("big/large.bin", 5 * 1024 * 1024 + 123, 0o644)?;
    g.add_file("big/exact_chunk.bin", 4 * 1024 * 1024, 0o644)?;
    let longdir = format!("{}/{}", "L".repeat(90), "M".repeat(90));
    // Names longer than 100 bytes: ustar needs its prefix field, or pax.
    g.add_file(&format!("{longdir}/{}.dat", "n".repeat(120)), 777, 0o644)?;
    g.add_file("perm/ro_file", 10, 0o444)?;
    g.add_file("perm/exec_file", 10, 0o755)?;
    let empty = root.join("empty_dir");
    at("create directory", &empty, std::fs::create_dir_all(&empty))?;
    for (rel, target) in [
        ("perm/link_to_large", "../big/large.bin"),
        ("perm/dangling", "dangling-target"),
    ] {
        let p = root.join(rel);
        at("symlink", &p, std::os::unix::fs::symlink(target, &p))?;
        g.entries.push(Entry {
            path: rel.into(),
            kind: "l",
            size: None,
            mode: None,
            mtime: None,
            sha256: None,
            target: Some(target.into()),
        });
    }
    g.entries.push(Entry {
        path: "empty_dir".into(),
        kind: "d",
        size: None,
        mode: None,
        mtime: None,
        sha256: None,
        target: None,
    });
    // Directories get their fixed mtime last, when nothing more is created in them.
    set_dir_times(root, g.t0)?;
    let mut entries = g.entries;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

/// The manifest as the script prints it: `json.dump(..., indent=1, ensure_ascii=False)` and a
/// newline.
pub fn manifest_json(entries: &[Entry]) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    entries.serialize(&mut ser).expect("a manifest serializes");
    out.push(b'\n');
    String::from_utf8(out).expect("JSON is UTF-8")
}

struct Builder<'a> {
    root: &'a Path,
    rng: PyRandom,
    t0: u64,
    entries: Vec<Entry>,
}

impl Builder<'_> {
    /// The script's `data(n)[:n]`: `min(n, 4096)` random bytes, repeated.
    fn data(&mut self, size: u64) -> Vec<u8> {
        let n = size.min(4096) as usize;
        let block: Vec<u8> = (0..n).map(|_| self.rng.getrandbits(8) as u8).collect();
        let mut bytes = block.repeat(size as usize / 4096 + 1);
        bytes.truncate(size as usize);
        bytes
    }

    fn add_file(&mut self, rel: &str, size: u64, mode: u32) -> Result<(), Error> {
        let p = self.root.join(rel);
        let parent = p.parent().expect("a file under the root");
        at("create directory", parent, std::fs::create_dir_all(parent))?;
        let bytes = self.data(size);
        let mut f = at(
            "create",
            &p,
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&p),
        )?;
        at("write", &p, f.write_all(&bytes))?;
        at(
            "chmod",
            &p,
            f.set_permissions(std::fs::Permissions::from_mode(mode)),
        )?;
        let t = self.t0 + self.entries.len() as u64;
        at("set times of", &p, f.set_times(times(t)))?;
        self.entries.push(Entry {
            path: rel.into(),
            kind: "f",
            size: Some(size),
            mode: Some(format!("0o{mode:o}")),
            mtime: Some(t),
            sha256: Some(format!("{:x}", Sha256::digest(&bytes))),
            target: None,
        });
        Ok(())
    }
}

fn times(t: u64) -> FileTimes {
    let st = SystemTime::UNIX_EPOCH + Duration::from_secs(t);
    FileTimes::new().set_accessed(st).set_modified(st)
}

/// Every directory under `dir` (symlinks not followed) and `dir` itself get mtime `t`.
fn set_dir_times(dir: &Path, t: u64) -> Result<(), Error> {
    for e in at("read directory", dir, std::fs::read_dir(dir))? {
        let e = at("read directory", dir, e)?;
        let ft = at("stat", &e.path(), e.file_type())?;
        if ft.is_dir() {
            set_dir_times(&e.path(), t)?;
        }
    }
    let f = at("open directory", dir, File::open(dir))?;
    at("set times of", dir, f.set_times(times(t)))
}

#[cfg(test)]
mod tests {
    use super::PyRandom;

    /// Values printed by CPython's `random.Random(seed)` for the same calls.
    #[test]
    fn draws_equal_cpython() {
        let mut r = PyRandom::new(1);
        let v: Vec<u32> = (0..3).map(|_| r.getrandbits(32)).collect();
        assert_eq!(v, [577090037, 2444712010, 3639700191]);

        let mut r = PyRandom::new(42);
        let v: Vec<u32> = (0..8).map(|_| r.randbelow(5)).collect();
        assert_eq!(v, [0, 0, 2, 1, 1, 1, 0, 4]);
        let v: Vec<u32> = (0..4).map(|_| r.getrandbits(8)).collect();
        assert_eq!(v, [22, 151, 108, 8]);
        assert_eq!(r.randbelow(70000), 3905);
        assert_eq!(*r.choice(&[0, 1, 100, 511, 512, 513, 4096, 70000]), 1);

        let mut r = PyRandom::new(0);
        let v: Vec<u32> = (0..3).map(|_| r.randbelow(1)).collect();
        assert_eq!(v, [0, 0, 0]);
        assert_eq!(r.getrandbits(1), 0);
        assert_eq!(r.randbelow((1 << 31) + 1), 2087043557);
    }
}
