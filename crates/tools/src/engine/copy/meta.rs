//! Giving a copied entry its source's metadata: extended attributes, owner, project ID, mode,
//! times.
//!
//! The order matters: xattrs first (ACLs among them), then the owner (which clears set-id bits),
//! then the mode, and the times last, because every other change would touch them.

use super::projid::{self, ProjectId};
use super::reach::Reach;
use flist::at::At;
use flist::{FileType, ItemError, Meta};
use rustix::fd::{AsFd, BorrowedFd};
use rustix::fs::{AtFlags, Gid, Mode, Timespec, Timestamps, Uid};
use rustix::io::Errno;
use std::io;
use std::sync::Arc;

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
    /// The owner and group a new file gets (the effective ids), unless its directory is
    /// set-group-ID.
    pub creator: (u32, u32),
    /// Where a destination that kept no project ID is noted (said once per run).
    pub unkept: Arc<projid::Unkept>,
}

impl MetaOptions {
    /// Options for `preserve` with `xattrs`, reading the umask and `/etc/xattr.conf`.
    pub fn new(preserve: bool, xattrs: XattrPolicy) -> MetaOptions {
        // Read, not set and restored: threads of an embedding process create files meanwhile.
        let umask = crate::engine::umask::current();
        MetaOptions {
            preserve,
            xattrs,
            umask,
            root: rustix::process::geteuid().is_root(),
            creator: (
                rustix::process::geteuid().as_raw(),
                rustix::process::getegid().as_raw(),
            ),
            libattr_skip: if xattrs == XattrPolicy::Libattr {
                libattr_skips()
            } else {
                Vec::new()
            },
            unkept: Arc::default(),
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
    /// Extended attributes differ (`sync -X` compares them; [`Differences::between`], which
    /// sees only `stat`, can't tell). Fixing them also removes those the destination has and
    /// the source lacks; any other fix sets the source's without removing any.
    pub xattrs: bool,
    /// The project ID (or a directory's `PROJINHERIT` flag) differs: `stat` does not show it
    /// ([`Differences::between`] can't tell); sync reads it with an ioctl.
    pub projid: bool,
}

impl Differences {
    /// Compare a destination (`dst`) with its source (`src`) of the same type, by `stat`.
    pub fn between(src: &Meta, dst: &Meta, kind: FileType) -> Differences {
        Differences {
            // Symlinks have no mode of their own.
            mode: kind != FileType::Symlink && src.mode & 0o7777 != dst.mode & 0o7777,
            owner: src.uid != dst.uid || src.gid != dst.gid,
            mtime: src.mtime != dst.mtime || src.mtime_nsec != dst.mtime_nsec,
            xattrs: false,
            projid: false,
        }
    }

    /// True when anything differs.
    pub fn any(&self) -> bool {
        self.mode || self.owner || self.mtime || self.xattrs || self.projid
    }

    /// Everything `stat` shows, and the project ID (a fresh copy gets all of its metadata;
    /// its xattrs are set, and it has no others to remove but what it inherited, a default
    /// ACL's).
    pub const ALL: Differences = Differences {
        mode: true,
        owner: true,
        mtime: true,
        xattrs: false,
        projid: true,
    };

    /// The project ID alone.
    pub const PROJID: Differences = Differences {
        mode: false,
        owner: false,
        mtime: false,
        xattrs: false,
        projid: true,
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

/// What a file this run just created already has right, so [`apply_fd`] need not set it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlreadyRight {
    /// Owner and group are the source's.
    pub owner: bool,
    /// The permission bits are the source's (as [`MetaOptions::mode_of`] gives them) and
    /// there are no set-id or sticky bits.
    pub mode: bool,
}

/// What a new file created in a directory inherits from it, besides the creator's ids and
/// the umask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inherited {
    /// The directory is set-group-ID: new files get its group (this one).
    pub group: Option<u32>,
    /// The directory has a default ACL: it, not the umask, trims a new file's mode.
    pub default_acl: bool,
}

impl Inherited {
    /// What files created in the open directory `dir` inherit (two system calls). `None`
    /// when that can't be told (the caller then assumes nothing).
    pub fn of_dir(dir: BorrowedFd<'_>) -> Option<Inherited> {
        let st = rustix::fs::fstat(dir).ok()?;
        if FileType::from_mode(st.st_mode) != FileType::Dir {
            return None;
        }
        let group = (st.st_mode & libc::S_ISGID != 0).then_some(st.st_gid);
        // Through /proc: `dir` may be an O_PATH descriptor, which the f*xattr calls refuse.
        let proc = At::in_dir(dir, b"");
        let default_acl = match rustix::fs::getxattr_query(
            proc.short_path().as_ref(),
            "system.posix_acl_default",
        ) {
            Ok(_) => true,
            Err(Errno::NODATA | Errno::NOTSUP) => false,
            Err(_) => return None,
        };
        Some(Inherited { group, default_acl })
    }
}

impl MetaOptions {
    /// The mode to create a copy of `meta` with in a directory that gives `inherited`, and
    /// what the new file then already has right. Ownership is right when the creator's ids
    /// ([`Self::creator`], or the directory's set-group-ID group) are the source's. The final
    /// mode is used only when creating with it gives exactly it (no set-id or sticky bits,
    /// which `chown` would clear and the umask may not allow; nothing the umask or a default
    /// ACL trims) and, while the owner is still to be changed, only with no group or other
    /// bits (so that no one else reads the data before the owner is set).
    pub fn create_mode(&self, meta: &Meta, inherited: Inherited) -> (u32, AlreadyRight) {
        let (euid, egid) = self.creator;
        let owner =
            !self.preserve || (meta.uid == euid && meta.gid == inherited.group.unwrap_or(egid));
        let want = self.mode_of(meta.mode);
        let mode_ok = want & 0o7000 == 0
            && want & 0o200 != 0
            && want & !self.umask == want
            && !inherited.default_acl
            && (owner || want & 0o077 == 0);
        if mode_ok {
            (want, AlreadyRight { owner, mode: true })
        } else {
            (0o600, AlreadyRight { owner, mode: false })
        }
    }
}

/// Apply `meta` (of the source `src`, open as `src_fd`) to the open regular file `fd` at
/// `dst`: xattrs, owner, mode and times as `opts` says, but not what is `right` already.
pub fn apply_fd(
    fd: BorrowedFd<'_>,
    src_fd: BorrowedFd<'_>,
    (src, dst): (&[u8], &[u8]),
    meta: &Meta,
    opts: &MetaOptions,
    mut right: AlreadyRight,
) -> Result<(), ItemError> {
    let err = |op: &'static str| move |e: Errno| ItemError::new(dst, op, e.into());
    if opts.xattrs != XattrPolicy::None {
        let xattrs = read_xattrs_from(Source::Fd(src_fd), opts)
            .map_err(|(op, e)| ItemError::new(src, op, e))?;
        write_xattrs(Target::Fd(fd), &xattrs).map_err(|e| ItemError::new(dst, "set xattr", e))?;
        // An access ACL sets the group bits to its mask: the mode is set again after it.
        right.mode &= xattrs.is_empty();
    }
    if opts.preserve && !right.owner {
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
    if opts.preserve {
        // Where the source's file system has none, the copy keeps what it was given.
        let want =
            projid::get(src_fd).map_err(|e| ItemError::new(src, "read project ID", e.into()))?;
        if let Some(want) = want {
            // A new file: where its file system keeps no project ID, noted once, no more.
            let _kept = set_projid(fd, dst, want, false, opts)?;
        }
    }
    if !right.mode {
        rustix::fs::fchmod(fd, Mode::from_raw_mode(opts.mode_of(meta.mode)))
            .map_err(err("chmod"))?;
    }
    if opts.preserve {
        rustix::fs::futimens(fd, &timestamps(meta)).map_err(err("set times"))?;
    }
    Ok(())
}

/// What [`apply_path`] was asked to set and could not, without it being an error: the caller
/// does not count a fix as made when this was all it had to make.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct Unmade {
    /// The destination's file system keeps no project IDs (or not the source's one).
    pub projid: bool,
}

/// Apply the parts of `meta` named by `what` to the entry at `dst` (of type `kind`, not
/// followed if a link), reached beneath the destination anchors of `reach`.
pub fn apply_path(
    src: &[u8],
    dst: &[u8],
    reach: &Reach,
    kind: FileType,
    meta: &Meta,
    what: Differences,
    opts: &MetaOptions,
) -> Result<Unmade, ItemError> {
    let mut unmade = Unmade::default();
    let err = |op: &'static str| move |e: io::Error| ItemError::new(dst, op, e);
    let at = reach.dst(dst).map_err(err("open parent"))?;
    let errno = |op: &'static str| move |e: Errno| ItemError::new(dst, op, e.into());
    if opts.xattrs != XattrPolicy::None {
        // The source too is reached beneath its root: a swapped parent is not followed.
        let from = reach
            .src(src)
            .map_err(|e| ItemError::new(src, "open parent", e))?;
        let xattrs = read_xattrs_from(Source::Path(&from.short_path()), opts)
            .map_err(|(op, e)| ItemError::new(src, op, e))?;
        if what.xattrs {
            remove_other_xattrs(&at.short_path(), &xattrs, opts)
                .map_err(|(op, e)| ItemError::new(dst, op, e))?;
        }
        write_xattrs(Target::Path(&at.short_path()), &xattrs)
            .map_err(|e| ItemError::new(dst, "set xattr", e))?;
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
    if opts.preserve && what.projid && matches!(kind, FileType::File | FileType::Dir) {
        let from = reach
            .src(src)
            .map_err(|e| ItemError::new(src, "open parent", e))?;
        let want =
            projid::get_at(&from).map_err(|e| ItemError::new(src, "read project ID", e.into()))?;
        if let Some(want) = want {
            // Opened as the entry it must be: a symlink or another type put there since is
            // left alone.
            match projid::open_entry(&at).map_err(errno("open"))? {
                Some(fd) => {
                    unmade.projid =
                        !set_projid(fd.as_fd(), dst, want, kind == FileType::Dir, opts)?;
                }
                None => return Err(ItemError::new(dst, "set project ID", Errno::LOOP.into())),
            }
        }
    }
    if kind != FileType::Symlink && (what.mode || what.owner || !opts.preserve) {
        chmod_nofollow(&at, opts.mode_of(meta.mode)).map_err(errno("chmod"))?;
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
    Ok(unmade)
}

/// `chmod` of the entry `at` names, never of what a symlink there points to (`fchmodat` has
/// no `AT_SYMLINK_NOFOLLOW` on Linux): the entry is pinned with `O_PATH | O_NOFOLLOW`, checked,
/// and changed through its `/proc/self/fd` name.
pub fn chmod_nofollow(at: &At, mode: u32) -> Result<(), Errno> {
    let fd = rustix::fs::openat(
        at.dir(),
        at.name(),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_mode(st.st_mode) == FileType::Symlink {
        return Err(Errno::LOOP);
    }
    use rustix::fd::AsRawFd;
    let name = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::chmod(name.as_str(), Mode::from_raw_mode(mode))
}

/// Give the open entry `fd` at `dst` the project ID `want`: whether it has it now. A
/// destination file system without project IDs is noted once ([`MetaOptions::unkept`]) and is
/// no error (`false`); a refusal is an error, except `EPERM` when not running as root (as for
/// `chown`: the owner may not change it on every file system).
fn set_projid(
    fd: BorrowedFd<'_>,
    dst: &[u8],
    want: ProjectId,
    dir: bool,
    opts: &MetaOptions,
) -> Result<bool, ItemError> {
    match projid::set(fd, want, dir) {
        Ok(projid::Set::Unsupported) => {
            opts.unkept.note(dst, want);
            Ok(false)
        }
        Ok(_) => Ok(true),
        // Tolerated (not root): left as it was.
        Err(e) => chown_tolerant(Err(e), opts)
            .map(|()| false)
            .map_err(|e| ItemError::new(dst, "set project ID", e.into())),
    }
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

/// One extended attribute: (name, value).
pub type Xattr = (Vec<u8>, Vec<u8>);

/// Where extended attributes are read: an open file, or a path (not followed).
enum Source<'a> {
    Fd(BorrowedFd<'a>),
    Path(&'a [u8]),
}

/// The extended attributes of `path` (not followed) that `opts` wants. A file system without
/// xattrs has none; an attribute removed between listing and reading is left out.
pub fn read_xattrs(
    path: &[u8],
    opts: &MetaOptions,
) -> Result<Vec<Xattr>, (&'static str, io::Error)> {
    let at = At::new(path).map_err(|e| ("open parent", e))?;
    read_xattrs_from(Source::Path(&at.short_path()), opts)
}

fn read_xattrs_from(
    src: Source<'_>,
    opts: &MetaOptions,
) -> Result<Vec<Xattr>, (&'static str, io::Error)> {
    let err = |op: &'static str| move |e: Errno| (op, io::Error::from(e));
    let mut names = vec![0u8; 1024];
    let n = loop {
        let listed = match src {
            Source::Fd(fd) => rustix::fs::flistxattr(fd, &mut names[..]),
            Source::Path(p) => rustix::fs::llistxattr(p, &mut names[..]),
        };
        match listed {
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
            let got = match src {
                Source::Fd(fd) => rustix::fs::fgetxattr(fd, name, &mut value[..]),
                Source::Path(p) => rustix::fs::lgetxattr(p, name, &mut value[..]),
            };
            match got {
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

/// Remove from `path` (not followed) the attributes `opts` wants that are not among `keep` (the
/// source's); those `opts` leaves alone stay.
fn remove_other_xattrs(
    path: &[u8],
    keep: &[Xattr],
    opts: &MetaOptions,
) -> Result<(), (&'static str, io::Error)> {
    let present = read_xattrs_from(Source::Path(path), opts)?;
    for (name, _) in present {
        if keep.iter().any(|(k, _)| *k == name) {
            continue;
        }
        match rustix::fs::lremovexattr(path, &name[..]) {
            // Gone meanwhile, or not removable on this file system: nothing to remove.
            Ok(()) | Err(Errno::NODATA) | Err(Errno::NOTSUP) => {}
            Err(e) => return Err(("remove xattr", e.into())),
        }
    }
    Ok(())
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
    fn files_are_created_with_their_final_mode_only_when_that_gives_it() {
        let mut o = MetaOptions::new(true, XattrPolicy::None);
        (o.umask, o.creator) = (0o022, (0, 0));
        let meta = |mode: u32, uid: u32, gid: u32| Meta {
            mode: 0o100000 | mode,
            uid,
            gid,
            ..Meta::default()
        };
        let plain = Inherited::default();
        let right = |owner, mode| AlreadyRight { owner, mode };
        assert_eq!(
            o.create_mode(&meta(0o644, 0, 0), plain),
            (0o644, right(true, true))
        );
        // The umask would trim it; set-id and sticky bits; no owner write.
        for m in [0o666, 0o4755, 0o2755, 0o1644, 0o444] {
            assert_eq!(
                o.create_mode(&meta(m, 0, 0), plain),
                (0o600, right(true, false))
            );
        }
        // Owner to change: the final mode at once only if nobody else may read.
        assert_eq!(
            o.create_mode(&meta(0o644, 5, 0), plain),
            (0o600, right(false, false))
        );
        assert_eq!(
            o.create_mode(&meta(0o600, 5, 0), plain),
            (0o600, right(false, true))
        );
        // A set-group-ID directory gives its group; a default ACL overrides the umask.
        let sgid = Inherited {
            group: Some(7),
            default_acl: false,
        };
        assert_eq!(o.create_mode(&meta(0o644, 0, 7), sgid).1, right(true, true));
        assert_eq!(
            o.create_mode(&meta(0o644, 0, 0), sgid).1,
            right(false, false)
        );
        let acl = Inherited {
            group: None,
            default_acl: true,
        };
        assert_eq!(
            o.create_mode(&meta(0o644, 0, 0), acl),
            (0o600, right(true, false))
        );
        // Without -p the owner is the creator's and the mode is trimmed by the umask anyway.
        o.preserve = false;
        assert_eq!(
            o.create_mode(&meta(0o666, 5, 5), plain),
            (0o644, right(true, true))
        );
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
