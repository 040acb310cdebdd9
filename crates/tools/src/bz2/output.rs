//! The output file under a temporary name beside its final name, shared by all ranks, renamed
//! into place only when every rank has written its part: a crash or an error never leaves a half
//! file under the final name.
//!
//! The directory is the one rank 0 checked before the work (its (device, inode) is part of the
//! plan): rank 0 opens it again by its path and refuses it if it is another directory now (a
//! symlink swapped in for it, say), then makes the temporary, renames it and removes the input
//! with `*at` calls on that descriptor, so no later change to the path can send a write, a
//! rename or a removal elsewhere. The other ranks check that the temporary they open is rank 0's.

use crate::engine::status::Status;
use flist::atomic::{self, Output, Replace, Step};
use flist::path::display;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, OFlags};
use std::fs::{File, FileTimes, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use steal::{Comm, CommExt};

/// The shared temporary output of one run.
pub struct TempOutput {
    /// The output's directory (rank 0 only): the input is removed at it.
    dir: Option<OwnedFd>,
    /// Rank 0's output (an [`Output`]): published by [`TempOutput::finish`], removed if
    /// dropped before.
    output: Option<Output>,
    /// The temporary's path, for messages.
    pub temp: Vec<u8>,
    /// This rank's handle on it.
    pub file: File,
}

/// Rank 0 opens `dest`'s directory (which must still be the directory `dir_id`), takes over
/// the partial output `resume` an interrupted earlier run recorded (its name and (device,
/// inode, birth time; see [`Output::adopt`]) when it is still there, removes the temporaries an earlier killed run
/// left for `dest` (each named in the returned notes) and, unless it took one over, creates a
/// fresh temporary (mode 0600 while written); the other ranks open it for writing.
/// Collective. `Err` on every rank if any rank failed (rank 0's message; the others' empty).
/// The flag is true on every rank when the partial output was taken over.
pub fn create(
    comm: &dyn Comm,
    dest: &[u8],
    dir_id: (u64, u64),
    resume: Option<&(Vec<u8>, atomic::Stamp)>,
) -> Result<(TempOutput, Vec<String>, bool), (Status, String)> {
    let (dir_path, base) = atomic::split(dest);
    // Rank 0's temporary file, (device, inode) and path, for the other ranks to open.
    let mut shared: Option<((u64, u64), serde_bytes::ByteBuf)> = None;
    let mut notes = Vec::new();
    let (mut dir, mut output) = (None, None);
    let mut adopted = false;
    // Ranks other than 0 have nothing to say when rank 0 failed: its status is the one.
    let mut mine: Result<File, (Status, String)> = Err((Status::Ok, String::new()));
    if comm.rank() == 0 {
        mine = atomic::open_dir_checked(&dir_path, dir_id)
            .map_err(|e| (Status::ItemsFailed, e))
            .and_then(|fd| {
                // Before the stale ones go: the partial output is a dead process's temporary.
                let taken = resume.and_then(|(name, was)| {
                    Output::adopt(fd.as_fd(), &dir_path, &base, name, was, OFlags::RDWR)
                });
                adopted = taken.is_some();
                let made = match taken {
                    Some(made) => Ok(made),
                    None => Output::in_dir(fd.as_fd(), &dir_path, &base, OFlags::RDWR, 0o600),
                };
                let (out, stale) = made.map_err(|e| {
                    (
                        Status::Usage,
                        format!(
                            "create a temporary file in {}: {}",
                            display(&dir_path),
                            e.source
                        ),
                    )
                })?;
                for s in stale {
                    notes.push(match s.removed {
                        Ok(()) => format!(
                            "removed {}, a temporary file an earlier interrupted run left",
                            display(&s.path)
                        ),
                        Err(e) => format!("remove stale temporary {}: {e}", display(&s.path)),
                    });
                }
                let usage = |e: io::Error| (Status::Usage, e.to_string());
                let id = out.identity().map_err(usage)?;
                let file = out
                    .file()
                    .expect("a file output")
                    .try_clone()
                    .map_err(usage)?;
                shared = Some((id, serde_bytes::ByteBuf::from(out.path())));
                dir = Some(fd);
                output = Some(out);
                Ok(file)
            });
    }
    let shared = comm.bcast_from(0, &shared);
    let adopted = comm.bcast_from(0, &adopted);
    let temp = shared.as_ref().map(|s| s.1.to_vec()).unwrap_or_default();
    if let (false, Some((id, _))) = (comm.rank() == 0, &shared) {
        mine = atomic::join(&temp, OFlags::WRONLY, Some(*id))
            .map_err(|e| match e.source.kind() {
                io::ErrorKind::Other => format!(
                    "{} is not the temporary file rank 0 made (its directory changed)",
                    display(&temp)
                ),
                _ => e.to_string(),
            })
            .map_err(|e| (Status::ItemsFailed, e));
    }
    let ok = comm.all(mine.is_ok());
    match (mine, ok) {
        (Ok(file), true) => Ok((
            TempOutput {
                temp,
                dir,
                output,
                file,
            },
            notes,
            adopted,
        )),
        (mine, _) => {
            // A fresh temporary goes (dropped); a partial output taken over stays for the
            // next run (its checkpoint is kept: the run failed).
            if let (Some(out), true) = (output, adopted) {
                drop(out.into_parts());
            }
            let status = match &mine {
                Err((s, _)) => *s,
                Ok(_) => Status::Ok,
            };
            let status = status.agree(comm);
            Err((status, mine.err().map(|e| e.1).unwrap_or_default()))
        }
    }
}

impl TempOutput {
    /// The temporary's name (one component) in the output's directory (rank 0; empty on
    /// the others).
    pub fn name(&self) -> &[u8] {
        self.output.as_ref().map_or(&[], |o| o.name())
    }

    /// Keep the temporary for the next run (a stop with a checkpoint): rank 0's output is
    /// taken apart instead of removed; the other ranks just drop their handle.
    pub fn keep(self) {
        if let Some(out) = self.output {
            drop(out.into_parts());
        }
    }

    /// Rank 0's last step after every rank synced its writes: give the output the input's mode,
    /// owner (best effort) and times, publish it as `dest` (replacing an existing `dest` only
    /// with `replace`; never following a symlink there; the directory synced so that the
    /// rename is on disk before the input may go). Called on rank 0 only.
    pub fn finish(
        &mut self,
        like: &std::fs::Metadata,
        dest: &[u8],
        replace: bool,
    ) -> Result<(), String> {
        let temp = display(&self.temp).into_owned();
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
        let out = self.output.take().ok_or("rename on a rank other than 0")?;
        let how = if replace {
            Replace::Overwrite
        } else {
            Replace::NoReplace
        };
        out.publish(how)
            .map_err(|e| match (e.step, e.source.raw_os_error()) {
                (Step::Rename, Some(libc::EEXIST)) => format!(
                    "output {} appeared while working; not replaced (use -f)",
                    display(dest)
                ),
                (Step::Rename, _) => format!("rename {temp} to {}: {}", display(dest), e.source),
                (Step::SyncDir, _) => {
                    format!("fsync the directory of {}: {}", display(dest), e.source)
                }
                _ => e.to_string(),
            })
    }

    /// Remove the input `input` (in the output's directory) if it is still the entry
    /// `(dev, ino)` that was planned from (without following a symlink). Rank 0 only.
    pub fn remove_input(&self, input: &[u8], id: (u64, u64)) -> Result<(), String> {
        let dir = self.dir.as_ref().ok_or("remove on a rank other than 0")?;
        let (_, base) = atomic::split(input);
        let st = rustix::fs::statat(dir, base.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| format!("stat {}: {e}", display(input)))?;
        if (st.st_dev, st.st_ino) != id {
            return Err(format!(
                "{} was replaced while being read; not removed",
                display(input)
            ));
        }
        rustix::fs::unlinkat(dir, base.as_slice(), AtFlags::empty())
            .map_err(|e| format!("remove {}: {e}", display(input)))
    }

    /// Remove the temporary file (rank 0 only; others just drop their handle).
    pub fn abandon(self) {
        if let Some(out) = self.output {
            let _ = out.discard();
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
