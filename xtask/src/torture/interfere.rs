//! Interference: what users and the world do to a tree while a tool works on it or between an
//! interrupted run and its rerun. A rewrite in place with the mtime restored (`cp -p`, `tar -x`,
//! `rsync --inplace`), an entry swapped for a symlink / hard link / directory, a concurrent
//! writer, a small full file system.

use super::oracle::{hash_bytes, Hash};
use super::rng::Rng;
use super::tree::content;
use anyhow::{Context, Result};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn mtime_of(m: &std::fs::Metadata) -> SystemTime {
    UNIX_EPOCH + Duration::new(m.mtime() as u64, m.mtime_nsec() as u32)
}

/// Rewrite `path` in place with new bytes of the same size and give it back its mtime: only
/// its ctime tells. Returns the new bytes' digest.
pub fn rewrite_keeping_mtime(rng: &mut Rng, path: &Path) -> Result<Hash> {
    let m = std::fs::symlink_metadata(path).with_context(|| format!("lstat {}", path.display()))?;
    let data = content(rng, m.len() as usize);
    let f = std::fs::File::options()
        .write(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    f.write_all_at(&data, 0)?;
    f.set_modified(mtime_of(&m))?;
    Ok(hash_bytes(&data))
}

/// What an entry is swapped for.
#[derive(Clone, Copy, Debug)]
pub enum Swap {
    /// A symlink to a sentinel file (outside every tree).
    Symlink,
    /// A hard link to a sentinel file.
    HardLink,
    /// An empty directory.
    Dir,
}

/// Replace the entry at `path` (removed) by `how`, pointing into `sentinel`.
pub fn swap(path: &Path, how: Swap, sentinel: &Path) -> Result<()> {
    let m = std::fs::symlink_metadata(path)?;
    if m.is_dir() {
        std::fs::remove_dir_all(path)?;
    } else {
        std::fs::remove_file(path)?;
    }
    match how {
        Swap::Symlink => std::os::unix::fs::symlink(sentinel.join("victim"), path)?,
        Swap::HardLink => std::fs::hard_link(sentinel.join("victim"), path)?,
        Swap::Dir => std::fs::create_dir(path)?,
    }
    Ok(())
}

/// How each version a [`Writer`] writes ends.
#[derive(Clone, Copy, Debug)]
pub enum Ending {
    /// Its mtime set to now, as a copy tool's last step.
    Now,
    /// Its mtime set back to the file's first (`cp -p`, `rsync`, `tar -x`): only the ctime
    /// moves.
    KeepMtime,
    /// Nothing after the write: the kernel stamped the times when the write began, so a tool
    /// that listed and read the file while it was under way sees the times it listed (only
    /// a read again after a moment shows the change).
    Untouched,
}

/// A thread rewriting a file in place (same size, whole new versions, each ended as
/// [`Ending`] says) until stopped; it records every version it wrote.
pub struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    versions: Arc<Mutex<Vec<Hash>>>,
}

impl Writer {
    /// Start rewriting `path` in place, in turn with each of `versions` (same size, made
    /// beforehand so that a version is written in one go), pausing `pause_ms` between them.
    pub fn start(versions: Vec<Vec<u8>>, path: PathBuf, pause_ms: u64, ending: Ending) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let digests = Arc::new(Mutex::new(Vec::new()));
        let (s, v) = (stop.clone(), digests.clone());
        // Hashed before the writer starts, so that it starts at once.
        let hashes: Vec<Hash> = versions.iter().map(|d| hash_bytes(d)).collect();
        let thread = std::thread::spawn(move || {
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                return;
            };
            let mut i = 0;
            while !s.load(Ordering::Relaxed) {
                let data = &versions[i % versions.len()];
                // Recorded before it is written: a reader may see it whole from now on.
                v.lock()
                    .expect("writer lock")
                    .push(hashes[i % versions.len()]);
                let Ok(f) = std::fs::File::options().write(true).open(&path) else {
                    return;
                };
                let _ = f.write_all_at(data, 0);
                match ending {
                    Ending::Now => {
                        let _ = f.set_modified(SystemTime::now());
                    }
                    Ending::KeepMtime => {
                        let _ = f.set_modified(mtime_of(&m));
                    }
                    Ending::Untouched => {}
                }
                drop(f);
                i += 1;
                std::thread::sleep(Duration::from_millis(pause_ms));
            }
        });
        Writer {
            stop,
            thread: Some(thread),
            versions: digests,
        }
    }

    /// Stop, and the digests of every version written.
    pub fn finish(mut self) -> Vec<Hash> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.versions.lock().expect("writer lock").clone()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A small tmpfs mounted at `dir` (`size` bytes): the full file system. Unmounted on drop.
pub struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// Mount it (root only); `None` when it can't be.
    pub fn mount(dir: &Path, size: u64) -> Option<SmallFs> {
        std::fs::create_dir_all(dir).ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallFs {
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.dir).status();
    }
}
