//! File-system helpers of the benches: removal, writeback, free space, tree comparison.

use anyhow::{ensure, Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// `sync(1)`: write back every dirty page, so the next timed run does not pay for the last one.
pub fn flush_fs() -> Result<()> {
    let status = Command::new("sync").status().context("start sync")?;
    ensure!(status.success(), "sync failed: {status}");
    Ok(())
}

/// Make room for a run's output at `path`: move what is there into the directory `aside`
/// (made if missing) when given, else remove it. See `matrix::run` for why disk rows set
/// aside.
pub fn clear(path: &Path, aside: Option<&Path>) -> Result<()> {
    let Some(aside) = aside else {
        return remove(path);
    };
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    std::fs::create_dir_all(aside).with_context(|| format!("mkdir {}", aside.display()))?;
    static SET_ASIDE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SET_ASIDE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let to = aside.join(n.to_string());
    std::fs::rename(path, &to)
        .with_context(|| format!("move {} to {}", path.display(), to.display()))
}

/// Remove `path` (a tree or a file) if it exists.
pub fn remove(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("stat {}", path.display())),
        // `rm -rf` when std gives up: it keeps a descriptor per level, too many in the deep
        // tree.
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).or_else(|e| {
            let ok = Command::new("rm")
                .arg("-rf")
                .arg(path)
                .status()
                .is_ok_and(|s| s.success());
            ensure!(ok, "remove {}: {e}", path.display());
            Ok(())
        }),
        Ok(_) => std::fs::remove_file(path).with_context(|| format!("remove {}", path.display())),
    }
}

/// Bytes free for an unprivileged user on the file system holding `dir` (`df -Pk`).
pub fn free_bytes(dir: &Path) -> Result<u64> {
    let out = Command::new("df")
        .arg("-Pk")
        .arg(dir)
        .output()
        .context("start df")?;
    ensure!(out.status.success(), "df {} failed", dir.display());
    let text = String::from_utf8_lossy(&out.stdout);
    let kib: u64 = text
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(3))
        .context("df printed no `Available` column")?
        .parse()
        .context("df's `Available` column")?;
    Ok(kib * 1024)
}

/// Compare `dst` with `src`: same entries and types, same bytes in regular files, and when
/// `meta`, same mode, owner, group and modification time (ns) on every entry.
pub fn same_tree(src: &Path, dst: &Path, meta: bool) -> Result<()> {
    let mut diffs = Vec::new();
    let mut entries = 0usize;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        entries += 1;
        let (s, d) = (src.join(&rel), dst.join(&rel));
        let sm = std::fs::symlink_metadata(&s)?;
        let Ok(dm) = std::fs::symlink_metadata(&d) else {
            diffs.push(format!("{}: missing", rel.display()));
            continue;
        };
        if sm.file_type() != dm.file_type() {
            diffs.push(format!("{}: type", rel.display()));
            continue;
        }
        if meta {
            if (sm.mode(), sm.uid(), sm.gid()) != (dm.mode(), dm.uid(), dm.gid()) {
                diffs.push(format!("{}: mode/owner", rel.display()));
            }
            if (sm.mtime(), sm.mtime_nsec()) != (dm.mtime(), dm.mtime_nsec()) {
                diffs.push(format!("{}: mtime", rel.display()));
            }
        }
        if sm.is_dir() {
            for e in std::fs::read_dir(&s)? {
                stack.push(rel.join(e?.file_name()));
            }
            let n = std::fs::read_dir(&d)?.count();
            if n != std::fs::read_dir(&s)?.count() {
                diffs.push(format!("{}: {n} entries", rel.display()));
            }
        } else if sm.is_file() && (sm.len() != dm.len() || !same_bytes(&s, &d)?) {
            diffs.push(format!("{}: contents", rel.display()));
        }
    }
    ensure!(
        diffs.is_empty(),
        "{} of {entries} entries differ, e.g. {}",
        diffs.len(),
        diffs[..diffs.len().min(3)].join(", ")
    );
    Ok(())
}

/// True when the files at `a` and `b` hold the same bytes (read 1 MiB at a time: the big
/// workloads' files do not fit in memory twice).
fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    let open = |p: &Path| std::fs::File::open(p).with_context(|| format!("open {}", p.display()));
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = read_full(&mut fa, &mut ba).with_context(|| format!("read {}", a.display()))?;
        let m = read_full(&mut fb, &mut bb).with_context(|| format!("read {}", b.display()))?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Fill `buf` from `r` as far as the data goes; the bytes read.
fn read_full(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Entries under `dir` whose inode changed (ctime) at or after `since`.
pub fn changed_since(dir: &Path, since: SystemTime) -> Result<usize> {
    let t = since.duration_since(UNIX_EPOCH)?;
    let t = (t.as_secs() as i64, t.subsec_nanos() as i64);
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p)?;
        if (m.ctime(), m.ctime_nsec()) >= t {
            n += 1;
        }
        if m.is_dir() {
            for e in std::fs::read_dir(&p)? {
                stack.push(e?.path());
            }
        }
    }
    Ok(n)
}

/// A bench path as a command-line argument (bench paths are ASCII).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 bench path")
}

/// Entries under `dir` (itself included), the bytes of its regular files, and their count.
pub fn tree_stats(dir: &Path) -> Result<(usize, u64, u64)> {
    let (mut entries, mut bytes, mut files) = (0, 0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p)?;
        entries += 1;
        if m.is_file() {
            bytes += m.len();
            files += 1;
        } else if m.is_dir() {
            for e in std::fs::read_dir(&p)? {
                stack.push(e?.path());
            }
        }
    }
    Ok((entries, bytes, files))
}

/// The type of the file system holding `dir`, as the mount table names it (`findmnt`:
/// `tmpfs`, `ext4`, `xfs`, `lustre`), else as `stat -f -c %T` does (which calls ext4
/// `ext2/ext3`: they share a magic number).
pub fn fs_type(dir: &Path) -> Result<String> {
    if let Ok(out) = Command::new("findmnt")
        .args(["-n", "-o", "FSTYPE", "--target"])
        .arg(dir)
        .output()
    {
        // One line per mount at that point; the last one is on top (the one used).
        let text = String::from_utf8_lossy(&out.stdout);
        let name = text.lines().map(str::trim).rfind(|l| !l.is_empty());
        if let (true, Some(name)) = (out.status.success(), name) {
            return Ok(name.to_string());
        }
    }
    let out = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(dir)
        .output()
        .context("start stat -f")?;
    ensure!(out.status.success(), "stat -f {} failed", dir.display());
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Check of an archive of `data/NAME`: GNU `tar -tf` lists `entries` members besides the dtar
/// index member, and `tar -d` (compare with the file system: data, size, mode, owner, mtime)
/// finds no difference.
pub fn archive_ok(archive: &Path, data: &Path, entries: usize) -> Result<()> {
    let out = Command::new("tar")
        .arg("-tf")
        .arg(archive)
        .output()
        .context("start tar -tf")?;
    ensure!(
        out.status.success(),
        "tar -tf {} failed: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr).trim_end()
    );
    let n = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.ends_with(".dtaridx"))
        .count();
    ensure!(
        n == entries,
        "tar -tf {} lists {n} members (the dtar index not counted), the tree has {entries} entries",
        archive.display()
    );
    let out = Command::new("tar")
        .args(["--exclude=*.dtaridx", "-d", "-f"])
        .arg(archive)
        .arg("-C")
        .arg(data)
        .output()
        .context("start tar -d")?;
    ensure!(
        out.status.success(),
        "tar -d -f {} -C {}: {}\n{}",
        archive.display(),
        data.display(),
        out.status,
        String::from_utf8_lossy(&[out.stdout, out.stderr].concat())
            .lines()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(())
}

/// Check of an extraction of `src` into `out`: `out` holds only `src`'s name (no dtar index
/// member), with the same entries, types and bytes.
pub fn extracted_ok(src: &Path, out: &Path) -> Result<()> {
    let name = src.file_name().context("tree without a name")?;
    let top = std::fs::read_dir(out)?
        .map(|e| Ok(e?.file_name()))
        .collect::<Result<Vec<_>>>()?;
    ensure!(
        top == [name],
        "{} holds {top:?}, expected only {name:?}",
        out.display()
    );
    same_tree(src, &out.join(name), false)
}
