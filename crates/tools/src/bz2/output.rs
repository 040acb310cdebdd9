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
use flist::atomic;
use flist::path::display;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use std::fs::{File, FileTimes, Permissions};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use steal::{Comm, CommExt};

/// The shared temporary output of one run.
pub struct TempOutput {
    /// The output's directory (rank 0 only): every name is reached from it.
    dir: Option<OwnedFd>,
    /// The temporary's name in that directory.
    name: Vec<u8>,
    /// The temporary's path, for messages.
    pub temp: Vec<u8>,
    /// This rank's handle on it.
    pub file: File,
}

/// Rank 0 opens `dest`'s directory (which must still be the directory `dir_id`), takes over
/// the partial output `resume` an interrupted earlier run recorded (its name and (device,
/// inode); see [`adopt`]) when it is still there, removes the temporaries an earlier killed run
/// left for `dest` (each named in the returned notes) and, unless it took one over, creates a
/// fresh temporary (mode 0600 while written); the other ranks open it for writing.
/// Collective. `Err` on every rank if any rank failed (rank 0's message; the others' empty).
/// The flag is true on every rank when the partial output was taken over.
pub fn create(
    comm: &dyn Comm,
    dest: &[u8],
    dir_id: (u64, u64),
    resume: Option<&(Vec<u8>, (u64, u64))>,
) -> Result<(TempOutput, Vec<String>, bool), (Status, String)> {
    let (dir_path, base) = atomic::split(dest);
    // Rank 0's temporary file, (device, inode) and name, for the other ranks to open.
    let mut shared: Option<((u64, u64), serde_bytes::ByteBuf)> = None;
    let mut notes = Vec::new();
    let mut dir = None;
    let mut adopted = false;
    // Ranks other than 0 have nothing to say when rank 0 failed: its status is the one.
    let mut mine: Result<(Vec<u8>, File), (Status, String)> = Err((Status::Ok, String::new()));
    if comm.rank() == 0 {
        mine = atomic::open_dir_checked(&dir_path, dir_id)
            .map_err(|e| (Status::ItemsFailed, e))
            .and_then(|fd| {
                // Before the stale ones go: the partial output is a dead process's temporary.
                let taken = resume.and_then(|(name, id)| adopt(fd.as_fd(), name, *id, &base));
                for (name, removed) in atomic::remove_stale(fd.as_fd(), &base) {
                    let path = [dir_path.as_slice(), b"/", &name].concat();
                    notes.push(match removed {
                        Ok(()) => format!(
                            "removed {}, a temporary file an earlier interrupted run left",
                            display(&path)
                        ),
                        Err(e) => format!("remove stale temporary {}: {e}", display(&path)),
                    });
                }
                let made = match taken {
                    Some(made) => {
                        adopted = true;
                        made
                    }
                    None => {
                        atomic::create_in(fd.as_fd(), &base, OFlags::RDWR, 0o600).map_err(|e| {
                            (
                                Status::Usage,
                                format!("create a temporary file in {}: {e}", display(&dir_path)),
                            )
                        })?
                    }
                };
                dir = Some(fd);
                Ok(made)
            })
            .and_then(|(name, fd)| {
                let id =
                    atomic::identity(fd.as_fd()).map_err(|e| (Status::Usage, e.to_string()))?;
                shared = Some((id, serde_bytes::ByteBuf::from(name.clone())));
                Ok((name, File::from(fd)))
            });
    }
    let shared = comm.bcast_from(0, &shared);
    let adopted = comm.bcast_from(0, &adopted);
    if let (false, Some((id, name))) = (comm.rank() == 0, shared) {
        let name = name.into_vec();
        let path = [dir_path.as_slice(), b"/", &name].concat();
        mine = rustix::fs::open(
            flist::path::as_path(&path),
            OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("open {}: {e}", display(&path)))
        .and_then(|fd| match atomic::identity(fd.as_fd()) {
            Ok(got) if got == id => Ok((name, File::from(fd))),
            _ => Err(format!(
                "{} is not the temporary file rank 0 made (its directory changed)",
                display(&path)
            )),
        })
        .map_err(|e| (Status::ItemsFailed, e));
    }
    let ok = comm.all(mine.is_ok());
    match (mine, ok) {
        (Ok((name, file)), true) => Ok((
            TempOutput {
                temp: [dir_path.as_slice(), b"/", &name].concat(),
                dir,
                name,
                file,
            },
            notes,
            adopted,
        )),
        (mine, _) => {
            // A fresh temporary goes; a partial output taken over stays for the next run.
            if let (Some(d), Ok((name, _)), false) = (&dir, &mine, adopted) {
                let _ = rustix::fs::unlinkat(d, name.as_slice(), AtFlags::empty());
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
    /// The temporary's name (one component) in the output's directory.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Rank 0's last step after every rank synced its writes: give the output the input's mode,
    /// owner (best effort) and times, rename it to `dest` (replacing an existing `dest` only
    /// with `replace`; never following a symlink there), and sync the directory so that the
    /// rename is on disk before the input may go. Called on rank 0 only.
    pub fn finish(
        &self,
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
        let dir = self.dir.as_ref().ok_or("rename on a rank other than 0")?;
        let (_, base) = atomic::split(dest);
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        let renamed =
            match rustix::fs::renameat_with(dir, self.name.as_slice(), dir, base.as_slice(), flags)
            {
                // A file system without RENAME_NOREPLACE: look, then rename (a narrow window).
                Err(rustix::io::Errno::INVAL) if !replace => {
                    match rustix::fs::statat(dir, base.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(_) => Err(rustix::io::Errno::EXIST),
                        Err(_) => {
                            rustix::fs::renameat(dir, self.name.as_slice(), dir, base.as_slice())
                        }
                    }
                }
                r => r,
            };
        renamed.map_err(|e| match e {
            rustix::io::Errno::EXIST => format!(
                "output {} appeared while working; not replaced (use -f)",
                display(dest)
            ),
            e => format!("rename {temp} to {}: {e}", display(dest)),
        })?;
        rustix::fs::fsync(dir).map_err(|e| format!("fsync the directory of {}: {e}", display(dest)))
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
        if let Some(dir) = &self.dir {
            let _ = rustix::fs::unlinkat(dir, self.name.as_slice(), AtFlags::empty());
        }
    }
}

/// Take over the partial output an interrupted earlier run left in `dir` under `name` (one
/// component), when it still is the file `id` that run recorded: a regular file of this user
/// with one link, reached without following a symlink. It is renamed to this process's
/// temporary name for `base` (so that [`atomic::remove_stale`] leaves it alone and a run
/// after this one knows it by this name) and checked again after the rename. `None` (nothing
/// renamed, or renamed back) when it is gone or is not that file: the run then starts over.
pub(crate) fn adopt(
    dir: BorrowedFd<'_>,
    name: &[u8],
    id: (u64, u64),
    base: &[u8],
) -> Option<(Vec<u8>, OwnedFd)> {
    // A forged record must not reach out of the directory nor name something else's file.
    if name.is_empty() || name.contains(&b'/') || !atomic::is_temp_name(name) {
        return None;
    }
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let ours = |fd: BorrowedFd<'_>| {
        rustix::fs::fstat(fd).is_ok_and(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
                && st.st_nlink == 1
                && st.st_uid == rustix::process::geteuid().as_raw()
                && (st.st_dev, st.st_ino) == id
        })
    };
    if !ours(fd.as_fd()) {
        return None;
    }
    let mine = atomic::temp_name(base);
    if mine != name {
        rustix::fs::renameat_with(dir, name, dir, mine.as_slice(), RenameFlags::NOREPLACE).ok()?;
        // Swapped between the check and the rename: put back what was moved, start over.
        let moved = rustix::fs::statat(dir, mine.as_slice(), AtFlags::SYMLINK_NOFOLLOW);
        if !moved.is_ok_and(|st| (st.st_dev, st.st_ino) == id) {
            let _ =
                rustix::fs::renameat_with(dir, mine.as_slice(), dir, name, RenameFlags::NOREPLACE);
            return None;
        }
    }
    Some((mine, fd))
}

fn system_time(secs: i64, nsec: i64) -> std::time::SystemTime {
    let nanos = std::time::Duration::from_nanos(nsec.clamp(0, 999_999_999) as u64);
    if secs >= 0 {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64) + nanos
    } else {
        std::time::UNIX_EPOCH - std::time::Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}
