//! Layouts of new files on a Lustre destination (lustre.md's policy): small files on one OST,
//! big files over `floor(sqrt(GiB)) + 1` OSTs with the chunk size as stripe size, a PFL
//! directory default left alone, explicit `--stripe-count`/`--stripe-size` above all, and never
//! the source's OST indices.
//!
//! Every call goes through a [`Lustre`] implementation, so tests check which file gets which
//! layout with a double. Off Lustre, [`Striping::detect`] makes one `is_lustre` call per
//! destination root and nothing else: no layout is read or set.

use flist::at::At;
use flist::chunk::Stripes;
use lustre_sys::policy::{self, Decision, Overrides};
use lustre_sys::{Layout, Lustre, SetOutcome};
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::OFlags;
use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use steal::{Comm, ReduceOp};

/// What layouts a run gave its new files (counts of files; this rank's until [`Self::sum`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StripeCounts {
    /// Files created with a layout set by the policy or the overrides.
    pub set: u64,
    /// Of those, files striped over more than one OST.
    pub wide: u64,
    /// Files whose directory default already was the policy's (one stripe): no call needed.
    pub inherited: u64,
    /// Files left to a composite (PFL) directory default.
    pub pfl: u64,
    /// Existing files overwritten in place, which keep the layout they had.
    pub kept: u64,
    /// Files the file system refused a layout for (`EACCES`): they have the default one.
    pub refused: u64,
}

impl StripeCounts {
    /// Sum over all ranks. Collective.
    pub fn sum(&mut self, comm: &dyn Comm) {
        let mut v = [
            self.set,
            self.wide,
            self.inherited,
            self.pfl,
            self.kept,
            self.refused,
        ];
        comm.allreduce(&mut v, ReduceOp::Sum);
        [
            self.set,
            self.wide,
            self.inherited,
            self.pfl,
            self.kept,
            self.refused,
        ] = v;
    }
}

/// The destination is on Lustre: what the policy needs.
struct OnLustre {
    /// OSTs of the file system (0: unknown, no clamping).
    osts: u32,
    /// The file-system default layout (of the mount point), for directories without their own.
    fs_default: Option<Layout>,
    /// Default layouts of destination directories, by path.
    dirs: Mutex<HashMap<Vec<u8>, Option<Layout>>>,
}

/// A destination file opened for writing by [`Striping::create`].
pub struct NewFile {
    /// The file, open for writing.
    pub fd: OwnedFd,
    /// This open created it, with the mode asked for (less the umask or a default ACL); false
    /// when an existing file was truncated or a Lustre layout call created it (mode 0600).
    pub fresh: bool,
}

/// Destination layouts for one run.
pub struct Striping<'a> {
    api: &'a dyn Lustre,
    overrides: Overrides,
    on: Option<OnLustre>,
    set: AtomicU64,
    wide: AtomicU64,
    inherited: AtomicU64,
    pfl: AtomicU64,
    kept: AtomicU64,
    refused: AtomicU64,
}

impl<'a> Striping<'a> {
    /// No Lustre: files are created as on any file system, and no Lustre call is made.
    pub fn off(api: &'a dyn Lustre) -> Striping<'a> {
        Striping {
            api,
            overrides: Overrides::default(),
            on: None,
            set: AtomicU64::new(0),
            wide: AtomicU64::new(0),
            inherited: AtomicU64::new(0),
            pfl: AtomicU64::new(0),
            kept: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Look at the destination roots (existing paths, or their parents): if one is on Lustre,
    /// new files get layouts by the policy and `overrides`; the OST count and the file-system
    /// default are read once here.
    pub fn detect(
        api: &'a dyn Lustre,
        dest_roots: &[Vec<u8>],
        overrides: Overrides,
    ) -> Striping<'a> {
        let mut s = Striping::off(api);
        s.overrides = overrides;
        let probe = dest_roots
            .iter()
            .map(|r| existing(r))
            .find(|p| api.is_lustre(flist::path::as_path(p)).unwrap_or(false));
        if let Some(p) = probe {
            let osts = api.ost_count(flist::path::as_path(&p)).unwrap_or(0);
            let fs_default = open_dir(&mount_root(&p))
                .ok()
                .and_then(|fd| api.layout_of(rustix::fd::AsFd::as_fd(&fd)).ok().flatten());
            s.on = Some(OnLustre {
                osts,
                fs_default,
                dirs: Mutex::new(HashMap::new()),
            });
        }
        s
    }

    /// True when the destination is on Lustre.
    pub fn is_on(&self) -> bool {
        self.on.is_some()
    }

    /// OSTs of the destination file system (0 when unknown or not on Lustre).
    pub fn ost_count(&self) -> u32 {
        self.on.as_ref().map_or(0, |o| o.osts)
    }

    /// The chunk size to copy with, in bytes: off Lustre `requested` (the user's `-k`, or 0) or
    /// else `automatic`. On Lustre the stripe size of new files (`--stripe-size`, or the
    /// automatic chunk size brought to 1-4 MiB), or the user's chunk size rounded up to a
    /// multiple of it: chunk boundaries then fall on stripe boundaries, so no stripe is written
    /// by two ranks. Returns the size and why.
    pub fn chunk_size(&self, requested: u64, automatic: u64) -> (u64, &'static str) {
        if self.on.is_none() {
            return match requested {
                0 => (
                    automatic,
                    "automatic: total bytes over twice the workers, 4 MiB-1 GiB",
                ),
                n => (n, "as given by --chunksize"),
            };
        }
        let base = if requested > 0 { requested } else { automatic };
        let stripe = u64::from(self.stripe_size(base));
        match requested {
            0 => (stripe, "Lustre: one stripe per chunk"),
            n if n % stripe == 0 => (n, "as given by --chunksize (a multiple of the stripe size)"),
            n => (
                n.next_multiple_of(stripe),
                "--chunksize rounded up to a multiple of the stripe size",
            ),
        }
    }

    /// The stripe size of new files for `chunk_size` (bytes): the override, else the policy.
    pub fn stripe_size(&self, chunk_size: u64) -> u32 {
        match self.overrides.size {
            Some(s) => s.next_multiple_of(lustre_sys::STRIPE_SIZE_UNIT),
            None => policy::stripe_size_for(chunk_size),
        }
    }

    /// The layout the policy gives `dst` of `size` bytes, from its directory's default.
    fn decide(&self, on: &OnLustre, dst: &[u8], size: u64, chunk_size: u64) -> (Decision, u16) {
        let dir = flist::path::parent(dst);
        let default = {
            let cached = on.dirs.lock().expect("dirs").get(dir).cloned();
            match cached {
                Some(d) => d,
                None => {
                    let d = open_dir(dir)
                        .ok()
                        .and_then(|fd| self.api.layout_of(rustix::fd::AsFd::as_fd(&fd)).ok())
                        .flatten();
                    on.dirs
                        .lock()
                        .expect("dirs")
                        .insert(dir.to_vec(), d.clone());
                    d
                }
            }
        };
        let effective = default.or_else(|| on.fs_default.clone());
        let inherits = effective
            .as_ref()
            .and_then(Layout::stripe_count)
            .unwrap_or(0);
        let decision = policy::choose(
            size,
            on.osts,
            effective.as_ref(),
            &self.overrides,
            chunk_size,
        );
        (decision, inherits)
    }

    /// How `dst` (`size` bytes) will be striped, for planning which rank writes which chunk;
    /// `None` off Lustre or when its directory's default decides.
    pub fn stripes_for(&self, dst: &[u8], size: u64, chunk_size: u64) -> Option<Stripes> {
        let on = self.on.as_ref()?;
        match self.decide(on, dst, size, chunk_size).0 {
            Decision::Set { count, size } if count > 1 => Some(Stripes {
                count: u64::from(if count == lustre_sys::STRIPE_COUNT_ALL {
                    on.osts.max(1) as u16
                } else {
                    count
                }),
                size: u64::from(size),
            }),
            _ => None,
        }
    }

    /// Create (or truncate) the regular file `dst` of `size` bytes for writing, with the
    /// layout the policy gives it on Lustre; `at` locates `dst`. Off Lustre (or where the
    /// directory's default decides) this is `open(O_WRONLY | O_CREAT | O_EXCL, mode)` with
    /// `extra` flags, or, when something is in the way (or `exclusive` is false: the caller
    /// expects files to exist), what [`clear_the_way`] allows: an existing regular file with
    /// one link, not the source (`source`: its path and a function giving its (device, inode),
    /// called only when something may be in the way: a file created here with `O_EXCL` is a
    /// new inode, never the source), opened without following symlinks and truncated (mode
    /// 0600 for a file made then). `mode` must give the owner write permission when `extra` is
    /// not empty (the file is opened again with those flags).
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &self,
        at: &At,
        dst: &[u8],
        size: u64,
        chunk_size: u64,
        extra: OFlags,
        mode: u32,
        exclusive: bool,
        source: (&[u8], SourceId<'_>),
    ) -> io::Result<NewFile> {
        let fresh = std::cell::Cell::new(false);
        let nofollow = OFlags::WRONLY | OFlags::NOFOLLOW;
        let source_id = || Ok::<_, io::Error>((source.0, (source.1)()?));
        let existing = || {
            let source = source_id()?;
            clear_the_way(at, source)?;
            let fd = match at.open(nofollow | OFlags::NONBLOCK, 0) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    return at.open(nofollow | OFlags::CREATE | OFlags::EXCL | extra, 0o600)
                }
                r => r?,
            };
            // The entry checked is the one opened (it may have been swapped in between).
            let st = rustix::fs::fstat(&fd)?;
            if (st.st_dev, st.st_ino) == source.1 {
                return Err(super::reach::same_file(source.0));
            }
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(io::Error::other("a non-regular file is in the way"));
            }
            rustix::fs::ftruncate(&fd, 0)?;
            Ok(fd)
        };
        let plain = || {
            if !exclusive {
                return existing();
            }
            match at.open(nofollow | OFlags::CREATE | OFlags::EXCL | extra, mode) {
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => existing(),
                r => {
                    fresh.set(r.is_ok());
                    r
                }
            }
        };
        if self.on.is_some() {
            // The layout call opens with O_TRUNC: decide about an existing entry first.
            clear_the_way(at, source_id()?)?;
        }
        let fd = self.create_in(
            at.dir(),
            at.name(),
            dst,
            size,
            chunk_size,
            libc::O_NOFOLLOW,
            plain,
        )?;
        let fresh = fresh.get();
        if extra.is_empty() {
            return Ok(NewFile { fd, fresh });
        }
        // O_DIRECT and the like: the layout is set, open the file as asked.
        let id = rustix::fs::fstat(&fd).map(|st| (st.st_dev, st.st_ino))?;
        drop(fd);
        let fd = at.open(nofollow | extra, 0)?;
        let again = rustix::fs::fstat(&fd).map(|st| (st.st_dev, st.st_ino))?;
        if again != id {
            return Err(io::Error::other(
                "the file was replaced while it was opened",
            ));
        }
        Ok(NewFile { fd, fresh })
    }

    /// Create `name` in `dir` (the file `dst`, whose directory's default layout counts) with
    /// the layout the policy gives a file of `size` bytes, adding `flags` (e.g. `O_EXCL |
    /// O_NOFOLLOW`) to the striped open; `plain` opens it the ordinary way, used off Lustre and
    /// wherever the directory's default decides.
    #[allow(clippy::too_many_arguments)]
    pub fn create_in(
        &self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        dst: &[u8],
        size: u64,
        chunk_size: u64,
        flags: i32,
        plain: impl FnOnce() -> io::Result<OwnedFd>,
    ) -> io::Result<OwnedFd> {
        let Some(on) = &self.on else {
            return plain();
        };
        let (decision, inherits) = self.decide(on, dst, size, chunk_size);
        let (count, stripe_size) = match decision {
            Decision::Inherit => {
                self.pfl.fetch_add(1, Ordering::Relaxed);
                return plain();
            }
            // One stripe where the directory gives one anyway, and no stripe size asked for:
            // the stripe size of a one-stripe file changes nothing, so spare the metadata
            // server a call.
            Decision::Set { count: 1, .. } if inherits == 1 && self.overrides.size.is_none() => {
                self.inherited.fetch_add(1, Ordering::Relaxed);
                return plain();
            }
            Decision::Set { count, size } => (count, size),
        };
        let name = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let created = self
            .api
            .create_striped_with(dir, &name, flags, 0o600, count, stripe_size)?;
        match created.outcome {
            SetOutcome::Applied => {
                self.set.fetch_add(1, Ordering::Relaxed);
                if count != 1 {
                    self.wide.fetch_add(1, Ordering::Relaxed);
                }
            }
            SetOutcome::AlreadyHadLayout => {
                self.kept.fetch_add(1, Ordering::Relaxed);
            }
            SetOutcome::NotPermitted => {
                self.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(created.fd)
    }

    /// What this rank's creations got.
    pub fn counts(&self) -> StripeCounts {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StripeCounts {
            set: load(&self.set),
            wide: load(&self.wide),
            inherited: load(&self.inherited),
            pfl: load(&self.pfl),
            kept: load(&self.kept),
            refused: load(&self.refused),
        }
    }
}

/// `path` if it exists, else its nearest existing ancestor.
fn existing(path: &[u8]) -> Vec<u8> {
    let mut p = path;
    while flist::walk::stat_path(p, true).is_err() {
        let up = flist::path::parent(p);
        if up == p {
            break;
        }
        p = up;
    }
    p.to_vec()
}

/// The mount point of the file system holding `path`: the last ancestor on the same device.
fn mount_root(path: &[u8]) -> Vec<u8> {
    let dev = |p: &[u8]| flist::walk::stat_path(p, true).ok().map(|st| st.st_dev);
    let mut p = path;
    let here = dev(p);
    loop {
        let up = flist::path::parent(p);
        if up == p || dev(up) != here {
            return p.to_vec();
        }
        p = up;
    }
}

fn open_dir(path: &[u8]) -> io::Result<OwnedFd> {
    flist::walk::open_long(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC)
        .map_err(io::Error::from)
}

/// Make way for a new copy at `at`, or refuse: nothing there, or a regular file with one link
/// that is not the source (`source`: path and (device, inode)), is fine; a file with other
/// links is removed first (the copy must not change the other names: GNU cp would write
/// through them, rsync replaces); the source itself, a symlink (never followed: it may point
/// outside DEST or back into SRC) and any other type are refused.
pub fn clear_the_way(at: &At, (src, id): (&[u8], (u64, u64))) -> io::Result<()> {
    let st = match at.lstat() {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        r => r?,
    };
    if (st.st_dev, st.st_ino) == id {
        return Err(super::reach::same_file(src));
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG if st.st_nlink > 1 => at.remove(false),
        libc::S_IFREG => Ok(()),
        libc::S_IFLNK => Err(io::Error::other(
            "a symlink is in the way (not followed, not replaced)",
        )),
        libc::S_IFDIR => Err(io::Error::from_raw_os_error(libc::EISDIR)),
        _ => Err(io::Error::other("a non-regular file is in the way")),
    }
}

/// The (device, inode) of a copy's source, asked for only when needed (see [`Striping::create`]).
pub type SourceId<'a> = &'a dyn Fn() -> io::Result<(u64, u64)>;

#[cfg(test)]
mod clear_the_way_tests {
    use super::*;

    /// What may be truncated for a new copy: nothing there, or a one-link file that is not the
    /// source; a file with other links is removed (the other names keep their bytes); the
    /// source, a symlink (even dangling) and a directory are refused, untouched.
    #[test]
    fn only_a_one_link_file_that_is_not_the_source_is_truncated() {
        let t = tempfile::tempdir().unwrap();
        let p = |n: &str| t.path().join(n);
        let id = |n: &str| {
            let st = rustix::fs::lstat(p(n)).unwrap();
            (st.st_dev, st.st_ino)
        };
        let dir = rustix::fs::open(
            t.path(),
            OFlags::PATH | OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let at = |n: &'static str| At::in_dir(rustix::fd::AsFd::as_fd(&dir), n.as_bytes());
        std::fs::write(p("src"), b"source").unwrap();
        std::fs::write(p("one"), b"one link").unwrap();
        std::fs::write(p("two"), b"two links").unwrap();
        std::fs::hard_link(p("two"), p("other")).unwrap();
        std::fs::hard_link(p("src"), p("snap")).unwrap();
        std::os::unix::fs::symlink(p("src"), p("lnk")).unwrap();
        std::os::unix::fs::symlink(p("nowhere"), p("dangling")).unwrap();
        std::fs::create_dir(p("d")).unwrap();
        let source = (&b"src"[..], id("src"));
        clear_the_way(&at("missing"), source).unwrap();
        clear_the_way(&at("one"), source).unwrap();
        assert_eq!(std::fs::read(p("one")).unwrap(), b"one link");
        clear_the_way(&at("two"), source).unwrap();
        assert!(!p("two").exists());
        assert_eq!(std::fs::read(p("other")).unwrap(), b"two links");
        for refused in ["src", "snap", "lnk", "dangling", "d"] {
            assert!(clear_the_way(&at(refused), source).is_err(), "{refused}");
        }
        assert_eq!(std::fs::read(p("src")).unwrap(), b"source");
        assert!(std::fs::symlink_metadata(p("lnk")).unwrap().is_symlink());
        assert!(!p("nowhere").exists());
    }
}
