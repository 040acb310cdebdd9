//! Giving a copied entry its source's metadata: extended attributes, owner, mode, times.
//!
//! The order matters: xattrs first (ACLs among them), then the owner (which clears set-id bits),
//! then the mode, and the times last, because every other change would touch them.

use flist::at::At;
use flist::{FileType, ItemError, Meta};
use rustix::fd::BorrowedFd;
use rustix::fs::{AtFlags, Gid, Mode, Timespec, Timestamps, Uid};
use rustix::io::Errno;
use std::io;

/// Which extended attributes travel with a copy (dcp's `-X`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum XattrPolicy {
    /// None.
    None,
    /// All that can be read, except a Lustre layout (`lustre.lov`, `trusted.lov`): it holds
    /// the source's OST indices, and layouts are chosen by policy, never copied.
    All,
    /// All but Lustre's own (`lustre.*`, `trusted.lov`, `trusted.lma`...): copying the layout
    /// would pin the copy to the source's OSTs.
    NonLustre,
    /// All but those `/etc/xattr.conf` (libattr) marks `skip`.
    Libattr,
}

/// How metadata is applied.
#[derive(Clone, Debug)]
pub struct MetaOptions {
    /// Keep owner, group, times (`-p`; always on for sync). Without it the mode is the
    /// source's permission bits less the umask and the times are those of the copy.
    pub preserve: bool,
    /// Which xattrs to copy.
    pub xattrs: XattrPolicy,
    /// The process umask (applied to modes when not preserving).
    pub umask: u32,
    /// Running as root: ownership changes are expected to work (otherwise `EPERM` on chown is
    /// ignored, as cp does).
    pub root: bool,
    /// Names `/etc/xattr.conf` says to skip (for [`XattrPolicy::Libattr`]).
    pub libattr_skip: Vec<globset::GlobMatcher>,
}

impl MetaOptions {
    /// Options for `preserve` with `xattrs`, reading the umask and `/etc/xattr.conf`.
    pub fn new(preserve: bool, xattrs: XattrPolicy) -> MetaOptions {
        let umask = rustix::process::umask(Mode::empty());
        rustix::process::umask(umask);
        MetaOptions {
            preserve,
            xattrs,
            umask: umask.bits(),
            root: rustix::process::geteuid().is_root(),
            libattr_skip: if xattrs == XattrPolicy::Libattr {
                libattr_skips()
            } else {
                Vec::new()
            },
        }
    }

    /// The mode a copy of an entry with mode `mode` gets.
    pub fn mode_of(&self, mode: u32) -> u32 {
        if self.preserve {
            mode & 0o7777
        } else {
            mode & 0o777 & !self.umask
        }
    }

    /// Whether the attribute `name` travels under this policy.
    pub fn wants_xattr(&self, name: &[u8]) -> bool {
        if is_layout_xattr(name) {
            return false;
        }
        match self.xattrs {
            XattrPolicy::None => false,
            XattrPolicy::All => true,
            XattrPolicy::NonLustre => !is_lustre_xattr(name),
            XattrPolicy::Libattr => !self
                .libattr_skip
                .iter()
                .any(|g| g.is_match(flist::path::as_path(name))),
        }
    }
}

/// A Lustre layout, which pins a file to OSTs: never copied, whatever the policy.
fn is_layout_xattr(name: &[u8]) -> bool {
    name == b"lustre.lov" || name == b"trusted.lov"
}

/// Lustre's own attributes: the layout and the MDT's bookkeeping.
fn is_lustre_xattr(name: &[u8]) -> bool {
    name.starts_with(b"lustre.")
        || [
            &b"trusted.lov"[..],
            b"trusted.lma",
            b"trusted.lmv",
            b"trusted.link",
            b"trusted.som",
            b"trusted.hsm",
            b"trusted.fid",
            b"trusted.dmv",
        ]
        .contains(&name)
}

/// The `skip` patterns of `/etc/xattr.conf`, or libattr's built-in ones when it is missing.
fn libattr_skips() -> Vec<globset::GlobMatcher> {
    let text = std::fs::read_to_string("/etc/xattr.conf").unwrap_or_else(|_| {
        "system.nfs4_acl skip\nsystem.nfs4acl skip\nxfsroot.* skip\ntrusted.SGI_* skip\n\
         security.evm skip\nafs.* skip\n"
            .to_string()
    });
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            match (w.next(), w.next()) {
                (Some(pattern), Some("skip")) => globset::Glob::new(pattern).ok(),
                _ => None,
            }
        })
        .map(|g| g.compile_matcher())
        .collect()
}

/// What is wrong with a destination's metadata compared with its source (sync).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Differences {
    /// Permission bits differ.
    pub mode: bool,
    /// Owner or group differs.
    pub owner: bool,
    /// Modification time differs (seconds or nanoseconds).
    pub mtime: bool,
}

impl Differences {
    /// Compare a destination (`dst`) with its source (`src`) of the same type.
    pub fn between(src: &Meta, dst: &Meta, kind: FileType) -> Differences {
        Differences {
            // Symlinks have no mode of their own.
            mode: kind != FileType::Symlink && src.mode & 0o7777 != dst.mode & 0o7777,
            owner: src.uid != dst.uid || src.gid != dst.gid,
            mtime: src.mtime != dst.mtime || src.mtime_nsec != dst.mtime_nsec,
        }
    }

    /// True when anything differs.
    pub fn any(&self) -> bool {
        self.mode || self.owner || self.mtime
    }

    /// Everything (a fresh copy gets all of its metadata).
    pub const ALL: Differences = Differences {
        mode: true,
        owner: true,
        mtime: true,
    };
}

/// The access and modification times of `m`, as `utimensat` takes them.
pub fn timestamps(m: &Meta) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: m.atime,
            tv_nsec: m.atime_nsec as _,
        },
        last_modification: Timespec {
            tv_sec: m.mtime,
            tv_nsec: m.mtime_nsec as _,
        },
    }
}

/// Apply `meta` (of the source `src`) to the open regular file `fd` at `dst`: xattrs, owner,
/// mode and times as `opts` says.
pub fn apply_fd(
    fd: BorrowedFd<'_>,
    src: &[u8],
    dst: &[u8],
    meta: &Meta,
    opts: &MetaOptions,
) -> Result<(), ItemError> {
    let err = |op: &'static str| move |e: Errno| ItemError::new(dst, op, e.into());
    if opts.xattrs != XattrPolicy::None {
        copy_xattrs(src, Target::Fd(fd), opts)
            .map_err(|(op, p, e)| ItemError::new(p.unwrap_or(dst), op, e))?;
    }
    if opts.preserve {
        chown_tolerant(
            rustix::fs::fchown(
                fd,
                Some(Uid::from_raw(meta.uid)),
                Some(Gid::from_raw(meta.gid)),
            ),
            opts,
        )
        .map_err(err("chown"))?;
    }
    rustix::fs::fchmod(fd, Mode::from_raw_mode(opts.mode_of(meta.mode))).map_err(err("chmod"))?;
    if opts.preserve {
        rustix::fs::futimens(fd, &timestamps(meta)).map_err(err("set times"))?;
    }
    Ok(())
}

/// Apply the parts of `meta` named by `what` to the entry at `dst` (of type `kind`, not
/// followed if a link), by path.
pub fn apply_path(
    src: &[u8],
    dst: &[u8],
    kind: FileType,
    meta: &Meta,
    what: Differences,
    opts: &MetaOptions,
) -> Result<(), ItemError> {
    let err = |op: &'static str| move |e: io::Error| ItemError::new(dst, op, e);
    let at = At::new(dst).map_err(err("open parent"))?;
    let errno = |op: &'static str| move |e: Errno| ItemError::new(dst, op, e.into());
    if opts.xattrs != XattrPolicy::None {
        let short = at.short_path();
        copy_xattrs(src, Target::Path(&short), opts)
            .map_err(|(op, p, e)| ItemError::new(p.unwrap_or(dst), op, e))?;
    }
    if opts.preserve && what.owner {
        chown_tolerant(
            rustix::fs::chownat(
                at.dir(),
                at.name(),
                Some(Uid::from_raw(meta.uid)),
                Some(Gid::from_raw(meta.gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            ),
            opts,
        )
        .map_err(errno("chown"))?;
    }
    if kind != FileType::Symlink && (what.mode || what.owner || !opts.preserve) {
        rustix::fs::chmodat(
            at.dir(),
            at.name(),
            Mode::from_raw_mode(opts.mode_of(meta.mode)),
            AtFlags::empty(),
        )
        .map_err(errno("chmod"))?;
    }
    if opts.preserve && (what.mtime || what.mode || what.owner) {
        rustix::fs::utimensat(
            at.dir(),
            at.name(),
            &timestamps(meta),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(errno("set times"))?;
    }
    Ok(())
}

fn chown_tolerant(r: Result<(), Errno>, opts: &MetaOptions) -> Result<(), Errno> {
    match r {
        // Like cp -p: someone else's ownership can't be given away without privilege.
        Err(Errno::PERM) if !opts.root => Ok(()),
        r => r,
    }
}

/// Where extended attributes are written: an open file, or a path (not followed).
pub enum Target<'a> {
    /// An open regular file.
    Fd(BorrowedFd<'a>),
    /// A path whose last component is not followed.
    Path(&'a [u8]),
}

type XattrError<'a> = (&'static str, Option<&'a [u8]>, io::Error);

/// One extended attribute: (name, value).
pub type Xattr = (Vec<u8>, Vec<u8>);

/// The extended attributes of `path` (not followed) that `opts` wants. A file system without
/// xattrs has none; an attribute removed between listing and reading is left out.
pub fn read_xattrs(
    path: &[u8],
    opts: &MetaOptions,
) -> Result<Vec<Xattr>, (&'static str, io::Error)> {
    let at = At::new(path).map_err(|e| ("open parent", e))?;
    let path = at.short_path();
    let err = |op: &'static str| move |e: Errno| (op, io::Error::from(e));
    let mut names = vec![0u8; 1024];
    let n = loop {
        match rustix::fs::llistxattr(path.as_ref(), &mut names[..]) {
            Ok(n) => break n,
            Err(Errno::RANGE) => names.resize(names.len() * 4, 0),
            Err(Errno::NOTSUP) => return Ok(Vec::new()),
            Err(e) => return Err(err("list xattrs")(e)),
        }
    };
    let mut out = Vec::new();
    let mut value = vec![0u8; 256];
    for name in names[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        if !opts.wants_xattr(name) {
            continue;
        }
        let len = loop {
            match rustix::fs::lgetxattr(path.as_ref(), name, &mut value[..]) {
                Ok(len) => break Some(len),
                Err(Errno::RANGE) => value.resize(value.len() * 4, 0),
                // Vanished between list and get.
                Err(Errno::NODATA) => break None,
                Err(e) => return Err(err("read xattr")(e)),
            }
        };
        if let Some(len) = len {
            out.push((name.to_vec(), value[..len].to_vec()));
        }
    }
    Ok(out)
}

/// Set `xattrs` on `dst`. A destination file system without xattrs (or without this
/// namespace) keeps none, silently, as cp does.
pub fn write_xattrs(dst: Target<'_>, xattrs: &[Xattr]) -> io::Result<()> {
    for (name, value) in xattrs {
        let set = match dst {
            Target::Fd(fd) => {
                rustix::fs::fsetxattr(fd, &name[..], value, rustix::fs::XattrFlags::empty())
            }
            Target::Path(p) => {
                rustix::fs::lsetxattr(p, &name[..], value, rustix::fs::XattrFlags::empty())
            }
        };
        match set {
            Ok(()) | Err(Errno::NOTSUP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn copy_xattrs<'a>(
    src: &'a [u8],
    dst: Target<'_>,
    opts: &MetaOptions,
) -> Result<(), XattrError<'a>> {
    let xattrs = read_xattrs(src, opts).map_err(|(op, e)| (op, Some(src), e))?;
    write_xattrs(dst, &xattrs).map_err(|e| ("set xattr", None, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lustre_xattrs_are_recognised() {
        assert!(is_lustre_xattr(b"lustre.lov"));
        assert!(is_lustre_xattr(b"trusted.lov"));
        assert!(!is_lustre_xattr(b"user.lov"));
        assert!(!is_lustre_xattr(b"trusted.lovely"));
        let o = MetaOptions::new(true, XattrPolicy::NonLustre);
        assert!(o.wants_xattr(b"user.k"));
        assert!(!o.wants_xattr(b"lustre.lov"));
        let o = MetaOptions::new(true, XattrPolicy::Libattr);
        assert!(!o.wants_xattr(b"afs.x") || std::path::Path::new("/etc/xattr.conf").exists());
        // -X all copies Lustre's other xattrs, never the layout (the source's OST indices).
        for policy in [
            XattrPolicy::All,
            XattrPolicy::Libattr,
            XattrPolicy::NonLustre,
        ] {
            let o = MetaOptions::new(true, policy);
            assert!(!o.wants_xattr(b"lustre.lov"), "{policy:?}");
            assert!(!o.wants_xattr(b"trusted.lov"), "{policy:?}");
        }
        let o = MetaOptions::new(true, XattrPolicy::All);
        assert!(o.wants_xattr(b"trusted.som"));
        assert!(o.wants_xattr(b"user.lov"));
    }

    #[test]
    fn modes_follow_preserve_and_umask() {
        let mut o = MetaOptions::new(false, XattrPolicy::None);
        o.umask = 0o022;
        assert_eq!(o.mode_of(0o104777), 0o755);
        o.preserve = true;
        assert_eq!(o.mode_of(0o104777), 0o4777);
    }
}
