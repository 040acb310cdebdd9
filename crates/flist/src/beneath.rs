//! Reaching entries beneath a root directory without following any symlink on the way.
//!
//! A tree can change between the walk (or the list) that named an entry and the action on it:
//! a user of a shared scratch can swap a directory for a symlink to anywhere at will. A tool
//! that reopens `ROOT/a/b/f` by its whole path would then act outside the tree (GNU `rm -rf`
//! and `chmod -R` are not exposed: they open each level from the one already open). So every
//! tool that acts on walked or listed entries opens the root the user named once ([`Root`]),
//! and reaches each entry's parent from it with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, or a component-by-component `openat(O_NOFOLLOW)` walk where the
//! kernel lacks `openat2`. The action itself is then one `*at` call on the last component,
//! which the caller makes with `AT_SYMLINK_NOFOLLOW`/`O_NOFOLLOW`.
//!
//! A symlink met on the way is `ELOOP` ([`is_symlink_error`] tells); the caller names the
//! entry and skips it. Entries more than 64 levels down are reached from directories above
//! them that the root holds open, each reached the same way (so a deep tree costs O(depth),
//! not O(depth²), lookups in all); a held directory renamed since is used where it now is,
//! as GNU `rm` and `tar` use the directories they hold.

use crate::at::At;
use crate::deep_dirs::DeepDirs;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// A directory the user named, opened once; entries beneath it are reached from its
/// descriptor.
#[derive(Debug)]
pub struct Root {
    path: Vec<u8>,
    fd: OwnedFd,
    /// Cleared when the kernel lacks `openat2`.
    openat2: AtomicBool,
    /// Directories far beneath the root, held open: deep entries are reached from them.
    deep: DeepDirs,
}

impl Root {
    /// Open the directory `path` (symlinks in `path` itself are followed: the user named it).
    pub fn open(path: &[u8]) -> io::Result<Root> {
        Root::open_with(path, OFlags::RDONLY)
    }

    /// [`Self::open`] with `O_PATH`: enough to reach entries and act with `*at` calls, and
    /// needs no read permission on the directory.
    pub fn open_path(path: &[u8]) -> io::Result<Root> {
        Root::open_with(path, OFlags::PATH)
    }

    fn open_with(path: &[u8], access: OFlags) -> io::Result<Root> {
        let fd = crate::at::open_long(path, access | OFlags::DIRECTORY | OFlags::CLOEXEC)?;
        Ok(Root {
            path: trim_slashes(path).to_vec(),
            fd,
            openat2: AtomicBool::new(true),
            deep: DeepDirs::default(),
        })
    }

    /// The path the root was opened by (without trailing `/`).
    pub fn path(&self) -> &[u8] {
        &self.path
    }

    /// The root directory's descriptor.
    pub fn root(&self) -> BorrowedFd<'_> {
        self.fd()
    }

    /// The root directory's descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `path` relative to the root (`""` for the root itself) when `path` is the root or lies
    /// beneath it, compared component by component (`/a/b` is not beneath `/a/bc`).
    pub fn rel<'a>(&self, path: &'a [u8]) -> Option<&'a [u8]> {
        let path = trim_slashes(path);
        let root = self.path.as_slice();
        if root.is_empty() || root == b"/" {
            return path.strip_prefix(b"/").map(trim_leading_slashes);
        }
        let rest = path.strip_prefix(root)?;
        if rest.is_empty() {
            return Some(rest);
        }
        rest.strip_prefix(b"/").map(trim_leading_slashes)
    }

    /// The directory `rel` (relative, without `..`) opened beneath the root without following
    /// symlinks; with `create`, missing directories on the way are made (mode 0777 less the
    /// umask). `ELOOP` means a symlink is in the way, `ENOTDIR` a non-directory.
    pub fn dir(&self, rel: &[u8], create: bool) -> Result<OwnedFd, Errno> {
        self.dir_with(
            rel,
            create,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        )
    }

    /// [`Self::dir`] opened `O_PATH` (enough for every `*at` call; needs no read permission).
    pub fn dir_path(&self, rel: &[u8]) -> Result<OwnedFd, Errno> {
        self.dir_with(
            rel,
            false,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        )
    }

    fn dir_with(&self, rel: &[u8], create: bool, flags: OFlags) -> Result<OwnedFd, Errno> {
        if let Some(reached) = self.deep.open(self.fd(), rel, create, flags, &self.openat2) {
            return reached;
        }
        dir_at(self.fd(), rel, create, flags, &self.openat2)
    }

    /// Deep directories held open (tests).
    #[cfg(test)]
    pub(crate) fn deep_dirs_held(&self) -> usize {
        self.deep.held()
    }

    /// Where `path` (the root or an entry beneath it) is: its parent directory reached from
    /// the root without following symlinks, and its last component. The root itself is
    /// reached by its path, as the user named it. `None` when `path` is not beneath the root.
    pub fn at<'a>(&self, path: &'a [u8]) -> Option<io::Result<At<'a>>> {
        let rel = self.rel(path)?;
        if rel.is_empty() {
            return Some(At::new(path));
        }
        let (parent, name) = split(rel);
        Some(
            self.dir_path(parent)
                .map(|fd| At::in_owned_dir(fd, name))
                .map_err(io::Error::from),
        )
    }
}

/// Several roots (the paths a tool was given); an entry belongs to the deepest root it lies
/// beneath.
///
/// Roots are either opened once, up front ([`Roots::open_dirs`]: the few PATHs of a command
/// line, opened before the walk), or named only and opened by their path each time an entry
/// beneath them is reached ([`Roots::by_path`]: the possibly many roots of a list, which would
/// not all fit in the descriptor table).
#[derive(Debug, Default)]
pub struct Roots {
    roots: Vec<Root>,
    /// Roots opened when needed, by path (see [`Roots::by_path`]).
    named: std::collections::HashSet<Vec<u8>>,
}

impl Roots {
    /// Open every path in `paths` that is a directory (`O_PATH`: a directory the caller may
    /// search but not read is a root too); others (files, missing paths) are left out and
    /// reached by their path, as the user named them.
    pub fn open_dirs<'a>(paths: impl IntoIterator<Item = &'a [u8]>) -> Roots {
        let mut roots: Vec<Root> = paths
            .into_iter()
            .filter_map(|p| Root::open_path(p).ok())
            .collect();
        // Deepest first, so that `find` picks the nearest root.
        roots.sort_by_key(|r| std::cmp::Reverse(r.path.len()));
        Roots {
            roots,
            named: Default::default(),
        }
    }

    /// Roots named by their (absolute, normalised) paths, opened `O_PATH` by path when an
    /// entry beneath one is reached: the root's own path is trusted (followed, as a path typed
    /// on a command line), everything beneath it is reached without following symlinks.
    pub fn by_path(paths: impl IntoIterator<Item = Vec<u8>>) -> Roots {
        Roots {
            roots: Vec::new(),
            named: paths.into_iter().collect(),
        }
    }

    /// The roots of a list of entries, for a tool that acts on what a list names: the
    /// parents of its topmost entries ([`list_tops`]). A topmost entry is then reached by
    /// name in its parent without following a symlink, and everything else beneath it.
    pub fn of_list_tops(tops: &[Vec<u8>]) -> Roots {
        Roots::by_path(tops.iter().map(|t| crate::path::parent(t).to_vec()))
    }

    /// The deepest named root that is `path` or one of its ancestors.
    fn find_named<'a>(&self, path: &'a [u8]) -> Option<&'a [u8]> {
        if self.named.is_empty() {
            return None;
        }
        let mut p = trim_slashes(path);
        loop {
            if self.named.contains(p) {
                return Some(p);
            }
            if p == b"/" || p.is_empty() {
                return None;
            }
            p = crate::path::parent(p);
        }
    }

    /// `op` on the root `path` belongs to: an opened one, else a named one opened now.
    /// `None` when it belongs to none.
    fn with_root<R>(&self, path: &[u8], op: impl FnOnce(&Root) -> R) -> Option<io::Result<R>> {
        if let Some(r) = self.find(path) {
            return Some(Ok(op(r)));
        }
        let named = self.find_named(path)?;
        Some(Root::open_path(named).map(|r| op(&r)))
    }

    /// The roots.
    pub fn iter(&self) -> impl Iterator<Item = &Root> {
        self.roots.iter()
    }

    /// The deepest root that `path` is or lies beneath.
    pub fn find(&self, path: &[u8]) -> Option<&Root> {
        self.roots.iter().find(|r| r.rel(path).is_some())
    }

    /// Where `path` is: beneath its root without following symlinks, or by its path when it
    /// lies beneath no root (a root that is not a directory, or no roots at all).
    pub fn at<'a>(&self, path: &'a [u8]) -> io::Result<At<'a>> {
        match self.with_root(path, |r| r.at(path)) {
            Some(Ok(Some(r))) => r,
            Some(Err(e)) => Err(e),
            Some(Ok(None)) | None => At::new(path),
        }
    }

    /// The parent directory of `path` opened `O_PATH`, beneath its root; `None` when `path`
    /// lies beneath no root or is a root (the caller opens it by path).
    pub fn parent_dir(&self, path: &[u8]) -> Option<Result<OwnedFd, Errno>> {
        let got = self.with_root(path, |root| {
            let rel = root.rel(path)?;
            if rel.is_empty() {
                return None;
            }
            Some(root.dir_path(split(rel).0))
        })?;
        match got {
            Ok(r) => r,
            Err(e) => Some(Err(Errno::from_io_error(&e).unwrap_or(Errno::IO))),
        }
    }
}

/// The topmost entries of a list spread over the ranks: the paths (absolute, normalised)
/// that have no ancestor in the list, in component order, the same on every rank. A tool
/// acting on a list trusts these as it would PATHs typed on its command line (their own
/// paths are followed) and reaches everything else beneath them. Collective: each rank's
/// local tops are gathered (one all-gather), so the cost grows with the number of tops,
/// not with the length of the list.
pub fn list_tops<'a>(
    comm: &dyn steal::Comm,
    paths: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<Vec<u8>> {
    // Sorted by component, a path comes right after its ancestors: the tops are the paths not
    // beneath the last top kept. Borrowed, not copied: lists can be long.
    let mut local: Vec<&[u8]> = paths.into_iter().collect();
    local.sort_unstable_by(|a, b| a.split(|&c| c == b'/').cmp(b.split(|&c| c == b'/')));
    let mut tops = steal::typed::ByteStrings(Vec::new());
    let mut last: Option<&[u8]> = None;
    for p in local {
        if last.is_none_or(|top| !crate::path::is_prefix(top, p)) {
            tops.0.push(p.to_vec());
            last = Some(p);
        }
    }
    let all = steal::CommExt::all_gather(comm, &tops)
        .into_iter()
        .flat_map(|t| t.0);
    crate::path::outermost(all.collect())
}

/// True for the errors that mean "a symlink (or a non-directory) is in the way": the entry
/// was reached through something that changed since it was listed.
pub fn is_symlink_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ELOOP) | Some(libc::EXDEV) | Some(libc::ENOTDIR)
    )
}

/// `e` with a note that the path changed since it was listed, when it is one of the errors of
/// [`is_symlink_error`]; other errors as they are.
pub fn explain(e: io::Error) -> io::Error {
    if !is_symlink_error(&e) {
        return e;
    }
    io::Error::new(
        e.kind(),
        format!(
            "{e}: the path changed since it was listed (a symlink or a non-directory is in the \
             way; not followed, nothing done)"
        ),
    )
}

/// (parent, last component) of a relative path (`parent` may be empty).
pub fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&b""[..], rel),
    }
}

fn is_symlink(dir: BorrowedFd<'_>, name: &[u8]) -> bool {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

fn trim_slashes(p: &[u8]) -> &[u8] {
    let mut p = p;
    while p.len() > 1 && p.ends_with(b"/") {
        p = &p[..p.len() - 1];
    }
    p
}

/// The directory `rel` (relative, without `..`) beneath the directory `base`, reached without
/// following symlinks (as [`Root::dir`] does from its root); `openat2` is cleared when the kernel
/// lacks that call. For callers that keep their own descriptors deep in a tree (tar's marks).
pub fn dir_at(
    base: BorrowedFd<'_>,
    rel: &[u8],
    create: bool,
    flags: OFlags,
    openat2: &AtomicBool,
) -> Result<OwnedFd, Errno> {
    if rel.split(|&b| b == b'/').any(|c| c == b"..") {
        return Err(Errno::XDEV);
    }
    let rel = trim_leading_slashes(rel);
    if rel.is_empty() {
        return rustix::fs::openat(base, c".", flags, Mode::empty());
    }
    if openat2.load(Ordering::Relaxed) {
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(base, rel, flags, Mode::empty(), how) {
            Ok(fd) => return Ok(fd),
            Err(Errno::NOSYS) => openat2.store(false, Ordering::Relaxed),
            Err(Errno::NOENT) if create => {
                // Most often only the last directory is missing (tar -x making a file's
                // directory): reach its parent the same way and make it there, rather than
                // walking every component from `base` (tar -x of /usr/include: 11,752
                // `openat`s instead of 16,167).
                if let Some(i) = rel.iter().rposition(|&b| b == b'/') {
                    let parent = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
                    if let Ok(fd) = rustix::fs::openat2(base, &rel[..i], parent, Mode::empty(), how)
                    {
                        return make_in(fd.as_fd(), &rel[i + 1..], flags);
                    }
                }
            }
            // Paths longer than PATH_MAX: in pieces that fit, each resolved the same way
            // from the directory the previous one reached (a deep tree would otherwise cost
            // one system call per component for every entry); the walk below if that fails.
            Err(Errno::NAMETOOLONG) => {
                if let Ok(fd) = in_pieces(base, rel, flags, how) {
                    return Ok(fd);
                }
            }
            Err(Errno::AGAIN) => {}
            // ENOTDIR may be a symlink where a directory should be: tell ELOOP apart.
            Err(Errno::NOTDIR) => {}
            Err(e) => return Err(e),
        }
    }
    walk(base, rel, create, flags)
}

/// `rel` opened with `openat2(how)` in pieces of at most [`PIECE`] bytes cut at `/`, each
/// from the directory the previous piece reached (beneath it, no symlinks: so beneath the
/// root, as one call would be).
fn in_pieces(
    base: BorrowedFd<'_>,
    rel: &[u8],
    flags: OFlags,
    how: ResolveFlags,
) -> Result<OwnedFd, Errno> {
    /// Bytes of path per `openat2` call: well under PATH_MAX (4096).
    const PIECE: usize = 3072;
    let step = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd: Option<OwnedFd> = None;
    let mut rest = trim_leading_slashes(rel);
    while !rest.is_empty() {
        let (piece, after) = if rest.len() <= PIECE {
            (rest, &b""[..])
        } else {
            // A component is at most 255 bytes, so a `/` lies within the first PIECE bytes.
            let cut = rest[..PIECE]
                .iter()
                .rposition(|&b| b == b'/')
                .ok_or(Errno::NAMETOOLONG)?;
            (&rest[..cut], trim_leading_slashes(&rest[cut..]))
        };
        let f = if after.is_empty() { flags } else { step };
        let from = fd.as_ref().map_or(base, |d| d.as_fd());
        fd = Some(rustix::fs::openat2(from, piece, f, Mode::empty(), how)?);
        rest = after;
    }
    fd.ok_or(Errno::INVAL)
}

/// The directory `name` in `parent`, made if missing, opened with `flags` without following a
/// symlink in its place: a `mkdirat` and an `openat` (the walk below would first duplicate
/// `parent` and look `name` up once more: tar -x of /usr/include, 875 directories, 2,700
/// system calls fewer). A `name` that is not one plain component goes through the walk.
fn make_in(parent: BorrowedFd<'_>, name: &[u8], flags: OFlags) -> Result<OwnedFd, Errno> {
    if name.is_empty() || name == b"." || name.contains(&b'/') {
        return walk(parent, name, true, flags);
    }
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o777)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    match rustix::fs::openat(parent, name, flags | OFlags::NOFOLLOW, Mode::empty()) {
        // O_NOFOLLOW|O_DIRECTORY on a symlink: ENOTDIR on some kernels, ELOOP on others.
        Err(Errno::NOTDIR) if is_symlink(parent, name) => Err(Errno::LOOP),
        r => r,
    }
}

fn walk(base: BorrowedFd<'_>, rel: &[u8], create: bool, flags: OFlags) -> Result<OwnedFd, Errno> {
    let step = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::openat(base, c".", step, Mode::empty())?;
    let parts: Vec<&[u8]> = rel
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .collect();
    for (i, c) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let f = if last { flags | OFlags::NOFOLLOW } else { step };
        let next = match rustix::fs::openat(&fd, *c, f, Mode::empty()) {
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&fd, *c, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e),
                }
                rustix::fs::openat(&fd, *c, f, Mode::empty())
            }
            r => r,
        };
        fd = match next {
            // O_NOFOLLOW|O_DIRECTORY on a symlink: ENOTDIR on some kernels, ELOOP on others.
            Err(Errno::NOTDIR) if is_symlink(fd.as_fd(), c) => Err(Errno::LOOP),
            r => r,
        }?;
    }
    Ok(fd)
}

fn trim_leading_slashes(p: &[u8]) -> &[u8] {
    let i = p.iter().position(|&b| b != b'/').unwrap_or(p.len());
    &p[i..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn b(p: &std::path::Path) -> &[u8] {
        p.as_os_str().as_bytes()
    }

    #[test]
    fn symlinks_are_never_followed_and_missing_dirs_are_made() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("a")).unwrap();
        let root = Root::open(b(t.path())).unwrap();
        assert_eq!(root.dir(b"a", true).unwrap_err(), Errno::LOOP);
        assert_eq!(root.dir(b"a/b", true).unwrap_err(), Errno::LOOP);
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        assert_eq!(
            walk(root.fd(), b"a/b", true, flags).unwrap_err(),
            Errno::LOOP
        );
        assert_eq!(
            walk(root.fd(), b"a", false, flags).unwrap_err(),
            Errno::LOOP
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        root.dir(b"x/y/z", true).unwrap();
        assert!(t.path().join("x/y/z").is_dir());
        walk(root.fd(), b"p/q", true, flags).unwrap();
        assert!(t.path().join("p/q").is_dir());
        assert_eq!(root.dir(b"nope/n", false).unwrap_err(), Errno::NOENT);
        assert!(root.dir(b"../x", false).is_err());
        // Only the last directory missing: made in its parent, reached the same way; a
        // symlink (even a dangling one) in the last place is still refused, nothing outside
        // is made.
        root.dir(b"x/y/new", true).unwrap();
        assert!(t.path().join("x/y/new").is_dir());
        let gone = outside.path().join("gone");
        std::os::unix::fs::symlink(&gone, t.path().join("x/y/dangling")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("x/y/out")).unwrap();
        assert_eq!(root.dir(b"x/y/dangling", true).unwrap_err(), Errno::LOOP);
        assert_eq!(root.dir(b"x/y/out/new", true).unwrap_err(), Errno::LOOP);
        assert!(!gone.exists());
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    }

    /// `make_in`, the last step of a `dir_at` that found only the last directory missing: a
    /// symlink put in its place meanwhile (to a directory outside, or dangling) is refused and
    /// nothing is made through it; a file in its place is not a directory; a directory made
    /// or already there is opened.
    #[test]
    fn making_the_last_directory_in_its_parent_never_goes_through_a_symlink() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("to-dir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("gone"), t.path().join("dangling")).unwrap();
        std::fs::write(t.path().join("file"), b"x").unwrap();
        std::fs::create_dir(t.path().join("there")).unwrap();
        let parent = Root::open(b(t.path())).unwrap();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        for name in [&b"to-dir"[..], b"dangling"] {
            assert_eq!(
                make_in(parent.fd(), name, flags).unwrap_err(),
                Errno::LOOP,
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        assert!(!outside.path().join("gone").exists());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        assert_eq!(
            make_in(parent.fd(), b"file", flags).unwrap_err(),
            Errno::NOTDIR
        );
        let made = make_in(parent.fd(), b"new", flags).unwrap();
        rustix::fs::mkdirat(&made, c"inside", Mode::from_raw_mode(0o755)).unwrap();
        assert!(t.path().join("new/inside").is_dir());
        make_in(parent.fd(), b"there", flags).unwrap();
        // Not one plain component: the walk, which makes each missing one.
        make_in(parent.fd(), b"there/./deeper", flags).unwrap();
        assert!(t.path().join("there/deeper").is_dir());
    }

    /// A path longer than PATH_MAX is reached in pieces (a few calls, not one per component),
    /// still without following a symlink anywhere on the way, deep down included.
    #[test]
    fn paths_longer_than_path_max_are_reached_in_pieces_without_following_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = Root::open(b(t.path())).unwrap();
        let deep: Vec<u8> = (0..900)
            .flat_map(|i| format!("d{i:04}/").into_bytes())
            .collect();
        let deep = &deep[..deep.len() - 1];
        assert!(deep.len() > 4096);
        root.dir(deep, true).unwrap();
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = in_pieces(root.fd(), deep, flags, how).unwrap();
        rustix::fs::mkdirat(&fd, c"leaf", Mode::from_raw_mode(0o755)).unwrap();
        let leaf = [deep, b"/leaf"].concat();
        root.dir(&leaf, false).unwrap();
        // Swap a directory 700 levels down (in the second piece) for a symlink to outside.
        let cut = 700 * 6;
        let (parent, name) = split(&deep[..cut - 1]);
        let parent_fd = root.dir(parent, false).unwrap();
        rustix::fs::renameat(&parent_fd, name, &parent_fd, c"moved").unwrap();
        rustix::fs::symlinkat(b(outside.path()), &parent_fd, name).unwrap();
        // From the root the symlink is met and refused.
        let fresh = Root::open(b(t.path())).unwrap();
        assert_eq!(fresh.dir(&leaf, false).unwrap_err(), Errno::LOOP);
        assert_eq!(fresh.dir(&leaf, true).unwrap_err(), Errno::LOOP);
        // A root that holds deep directories below the swap (crate::deep_dirs) reaches the
        // leaf in the directory moved away, as a held working directory would: never outside.
        let leaf_fd = root.dir(&leaf, true).unwrap();
        let moved_leaf = [parent, b"/moved", &deep[cut - 1..], b"/leaf"].concat();
        let moved_fd = fresh.dir(&moved_leaf, false).unwrap();
        assert_eq!(
            rustix::fs::fstat(&leaf_fd).unwrap().st_ino,
            rustix::fs::fstat(&moved_fd).unwrap().st_ino
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    }

    #[test]
    fn rel_compares_components() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("ab")).unwrap();
        let base = b(t.path()).to_vec();
        let root = Root::open(&[base.as_slice(), b"/ab/"].concat()).unwrap();
        let p = |s: &str| [base.as_slice(), s.as_bytes()].concat();
        assert_eq!(root.rel(&p("/ab")), Some(&b""[..]));
        assert_eq!(root.rel(&p("/ab/")), Some(&b""[..]));
        assert_eq!(root.rel(&p("/ab/c/d")), Some(&b"c/d"[..]));
        assert_eq!(root.rel(&p("/abc")), None);
        assert_eq!(root.rel(&p("/a")), None);
    }

    /// The race the module exists for: a directory listed under the root is replaced by a
    /// symlink to an outside tree before the action; the action fails instead of reaching the
    /// outside file.
    #[test]
    fn a_directory_swapped_for_a_symlink_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("f"), b"keep").unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        std::fs::write(t.path().join("d/f"), b"x").unwrap();
        let roots = Roots::open_dirs([b(t.path())]);
        let entry = [b(t.path()), b"/d/f"].concat();
        roots.at(&entry).unwrap().remove(false).unwrap();
        std::fs::remove_dir(t.path().join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("d")).unwrap();
        let err = roots.at(&entry).err().expect("refused");
        assert!(is_symlink_error(&err), "{err}");
        assert_eq!(std::fs::read(outside.path().join("f")).unwrap(), b"keep");
        // The root itself, and paths beneath no root, are reached by their path.
        assert!(roots.at(b(t.path())).unwrap().lstat().is_ok());
        assert!(roots.at(b"/").unwrap().lstat().is_ok());
    }

    /// Roots of a list: the tops' parents, opened by path when needed; a top swapped for a
    /// symlink is not followed, and the tops are the outermost entries over all ranks.
    #[test]
    fn list_roots_reach_tops_by_name_and_tops_are_outermost() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("f"), b"keep").unwrap();
        let base = b(t.path()).to_vec();
        let p = |s: &str| [base.as_slice(), s.as_bytes()].concat();
        let tops = steal::local::run(2, |comm| {
            let mine: Vec<Vec<u8>> = match comm.rank() {
                0 => vec![p("/top/d/f"), p("/other")],
                _ => vec![p("/top"), p("/top/d"), p("/other2/x")],
            };
            list_tops(comm, mine.iter().map(|v| v.as_slice()))
        });
        let want = vec![p("/other"), p("/other2/x"), p("/top")];
        assert_eq!(tops, vec![want.clone(), want.clone()]);
        std::os::unix::fs::symlink(outside.path(), t.path().join("top")).unwrap();
        let roots = Roots::of_list_tops(&want);
        let err = roots.at(&p("/top/f")).err().expect("refused");
        assert!(is_symlink_error(&err), "{err}");
        assert!(matches!(
            roots.parent_dir(&p("/top/f")),
            Some(Err(Errno::LOOP))
        ));
        // The top itself is reached by name in its parent: the link, not its target.
        let top = p("/top");
        assert!(roots.at(&top).unwrap().lstat().unwrap().st_mode & libc::S_IFMT == libc::S_IFLNK);
        assert_eq!(std::fs::read(outside.path().join("f")).unwrap(), b"keep");
    }
}
