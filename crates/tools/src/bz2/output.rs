//! The output file under a temporary name beside its final name, shared by all ranks, renamed
//! into place only when every rank has written its part: a crash or an error never leaves a half
//! file under the final name.

use flist::path::{as_path, display};
use std::fs::{File, FileTimes, OpenOptions, Permissions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use steal::{Comm, CommExt};

/// The shared temporary output of one run.
pub struct TempOutput {
    /// Where the data goes while it is written.
    pub temp: PathBuf,
    /// This rank's handle on it.
    pub file: File,
}

/// Rank 0 creates a fresh temporary file in `dest`'s directory (mode 0600 while written); the
/// other ranks open it for writing. Collective. `Err` on every rank if any rank failed.
pub fn create(comm: &dyn Comm, dest: &[u8]) -> Result<TempOutput, String> {
    let dest_path = as_path(dest);
    let mut name = Vec::new();
    let mut mine: Option<Result<File, String>> = None;
    if comm.rank() == 0 {
        let dir = match dest_path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = dest_path
            .file_name()
            .map(|n| n.as_bytes())
            .unwrap_or(b"out");
        let mut prefix = b".".to_vec();
        prefix.extend_from_slice(base);
        prefix.push(b'.');
        let made = tempfile::Builder::new()
            .prefix(std::ffi::OsStr::from_bytes(&prefix))
            .suffix(".mfu-tmp")
            .tempfile_in(&dir)
            .map_err(|e| format!("create a temporary file in {}: {e}", dir.display()))
            .and_then(|t| {
                t.keep()
                    .map_err(|e| format!("keep temporary file: {}", e.error))
            });
        match made {
            Ok((file, path)) => {
                name = path.as_os_str().as_bytes().to_vec();
                mine = Some(Ok(file));
            }
            Err(e) => mine = Some(Err(e)),
        }
    }
    comm.bcast(0, &mut name);
    let mine = match mine {
        Some(m) => m,
        None if name.is_empty() => Err(String::new()),
        None => OpenOptions::new()
            .write(true)
            .open(as_path(&name))
            .map_err(|e| format!("open {}: {e}", display(&name))),
    };
    let ok = comm.all(mine.is_ok());
    match (mine, ok) {
        (Ok(file), true) => Ok(TempOutput {
            temp: as_path(&name).to_path_buf(),
            file,
        }),
        (mine, _) => {
            if comm.rank() == 0 && !name.is_empty() {
                let _ = std::fs::remove_file(as_path(&name));
            }
            Err(mine.err().unwrap_or_default())
        }
    }
}

impl TempOutput {
    /// Rank 0's last step after every rank synced its writes: give the output the input's mode,
    /// owner (best effort) and times, then rename it to `dest`. Called on rank 0 only.
    pub fn finish(self, like: &std::fs::Metadata, dest: &[u8]) -> Result<(), String> {
        let temp = self.temp.display().to_string();
        let times = FileTimes::new()
            .set_accessed(system_time(like.atime(), like.atime_nsec()))
            .set_modified(system_time(like.mtime(), like.mtime_nsec()));
        // Owner first: chown may clear set-id bits that chmod then puts back.
        let _ = std::os::unix::fs::fchown(&self.file, Some(like.uid()), Some(like.gid()));
        self.file
            .set_permissions(Permissions::from_mode(like.mode() & 0o7777))
            .map_err(|e| format!("chmod {temp}: {e}"))?;
        self.file
            .set_times(times)
            .map_err(|e| format!("set times of {temp}: {e}"))?;
        drop(self.file);
        std::fs::rename(&self.temp, as_path(dest))
            .map_err(|e| format!("rename {temp} to {}: {e}", display(dest)))
    }

    /// Remove the temporary file after a failure (rank 0 only; others just drop their handle).
    pub fn abandon(self, rank: usize) {
        drop(self.file);
        if rank == 0 {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

fn system_time(secs: i64, nsec: i64) -> std::time::SystemTime {
    let nanos = std::time::Duration::from_nanos(nsec.clamp(0, 999_999_999) as u64);
    if secs >= 0 {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64) + nanos
    } else {
        std::time::UNIX_EPOCH - std::time::Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}
