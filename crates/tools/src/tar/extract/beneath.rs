//! Writing only beneath the extraction directory.
//!
//! Every entry is reached from the target directory's descriptor without following any
//! symlink: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has it, a
//! component-by-component `openat(O_NOFOLLOW)` walk otherwise. So neither a symlink the archive
//! created (`a -> /tmp`, then `a/file`) nor one already in the target can carry a write outside
//! it. Entry names are checked first by [`clean`]: no absolute paths, no `..`.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::OFlags;
use rustix::io::Errno;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

/// Why an entry name is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsafe {
    /// It starts with `/`.
    Absolute,
    /// A component is `..`.
    DotDot,
}

impl std::fmt::Display for Unsafe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unsafe::Absolute => {
                "refusing an absolute path (it would be written outside the target)"
            }
            Unsafe::DotDot => "refusing a path with '..' (it could be written outside the target)",
        })
    }
}

/// The entry name relative to the target, without `.` components, empty components or a
/// trailing `/` (`""` for the target itself), or why it is refused.
pub fn clean(name: &[u8]) -> Result<Vec<u8>, Unsafe> {
    if name.starts_with(b"/") {
        return Err(Unsafe::Absolute);
    }
    let mut out = Vec::with_capacity(name.len());
    for c in name.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err(Unsafe::DotDot),
            c => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(c);
            }
        }
    }
    Ok(out)
}

/// (parent, last component) of a cleaned relative path (`parent` may be empty).
pub fn split(rel: &[u8]) -> (&[u8], &[u8]) {
    match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => (&b""[..], rel),
    }
}

/// Components between two marks of a deep path (see [`Target`]).
const STRIDE: usize = 48;
/// Marks kept at most (then they are dropped and made again as needed).
const MARKS: usize = 4096;

/// The extraction directory, opened once: entries are reached beneath it without following
/// symlinks (the same resolution every tool that acts on walked entries uses:
/// [`flist::beneath::Root`]).
///
/// Deep paths: resolving a path of thousands of components from the root for every entry is
/// quadratic in depth (and beyond `PATH_MAX` it is one `openat` per component). So a directory
/// deeper than `STRIDE` components is reached from a *mark*: the directory at the last
/// multiple of `STRIDE` components of its path, kept open (`O_PATH`) once resolved, itself
/// reached from the mark before it. Each step resolves at most `STRIDE` components with
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the mark's descriptor (or a
/// component-by-component `openat(O_NOFOLLOW)` walk), so no symlink is ever followed and
/// nothing above a mark is reached; as with any descriptor-relative walk (and GNU tar's), a
/// directory that someone else renames elsewhere after it was opened is still written into.
/// Extraction never replaces a directory it holds a mark of (an entry in a directory's way is
/// refused).
pub struct Target {
    root: flist::beneath::Root,
    marks: Mutex<HashMap<Vec<u8>, Arc<OwnedFd>>>,
    openat2: AtomicBool,
    /// Files no entry may replace or write, whatever name they have beneath the target
    /// ([`Target::keep`]).
    kept: OnceLock<Vec<Kept>>,
}

/// A file extraction never replaces or writes: its (device, inode) and what it is.
pub type Kept = ((u64, u64), &'static str);

impl Target {
    /// Open the extraction directory `path`.
    pub fn open(path: &[u8]) -> std::io::Result<Target> {
        Ok(Target {
            root: flist::beneath::Root::open(path)?,
            marks: Mutex::new(HashMap::new()),
            openat2: AtomicBool::new(true),
            kept: OnceLock::new(),
        })
    }

    /// Never replace or write the files `kept` (the archive being read, its side index): an
    /// entry whose name leads to one of them is refused (set once, before anything is
    /// written).
    pub fn keep(&self, kept: Vec<Kept>) {
        let _ = self.kept.set(kept);
    }

    /// What `st` is when it is a file kept from being replaced or written (see
    /// [`Target::keep`]).
    pub fn kept(&self, st: &rustix::fs::Stat) -> Option<&'static str> {
        let id = (st.st_dev, st.st_ino);
        let kept = self.kept.get()?;
        kept.iter().find(|(k, _)| *k == id).map(|(_, what)| *what)
    }

    /// The extraction directory's descriptor.
    pub fn root(&self) -> BorrowedFd<'_> {
        self.root.root()
    }

    /// The directory `rel` (a cleaned relative path, `""` for the target itself) beneath the
    /// target, opened without following any symlink; with `create`, missing directories on
    /// the way are made (mode 0777 less the umask).
    pub fn dir(&self, rel: &[u8], create: bool) -> Result<OwnedFd, Errno> {
        // Byte offsets of the '/' that ends every STRIDE-th component.
        let mut cuts = Vec::new();
        let mut n = 0;
        for (i, &b) in rel.iter().enumerate() {
            if b == b'/' {
                n += 1;
                if n % STRIDE == 0 {
                    cuts.push(i);
                }
            }
        }
        if cuts.is_empty() {
            return self.root.dir(rel, create);
        }
        // The deepest mark held, then the ones after it.
        let found = {
            let marks = self.marks.lock().expect("marks");
            (0..cuts.len())
                .rev()
                .find_map(|k| marks.get(&rel[..cuts[k]]).map(|fd| (k, fd.clone())))
        };
        let (mut next, mut base) = match found {
            Some((k, fd)) => (k + 1, fd),
            None => {
                let fd = Arc::new(self.root.dir(&rel[..cuts[0]], create)?);
                self.remember(&rel[..cuts[0]], &fd);
                (1, fd)
            }
        };
        while next < cuts.len() {
            let fd = self.step(
                base.as_fd(),
                &rel[cuts[next - 1] + 1..cuts[next]],
                create,
                PATH,
            )?;
            base = Arc::new(fd);
            self.remember(&rel[..cuts[next]], &base);
            next += 1;
        }
        let rest = &rel[cuts[cuts.len() - 1] + 1..];
        self.step(
            base.as_fd(),
            rest,
            create,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        )
    }

    fn remember(&self, key: &[u8], fd: &Arc<OwnedFd>) {
        let mut marks = self.marks.lock().expect("marks");
        if marks.len() >= MARKS {
            marks.clear();
        }
        marks.insert(key.to_vec(), fd.clone());
    }

    /// The directory `rel` (a few components) beneath `base`.
    fn step(
        &self,
        base: BorrowedFd<'_>,
        rel: &[u8],
        create: bool,
        flags: OFlags,
    ) -> Result<OwnedFd, Errno> {
        flist::beneath::dir_at(base, rel, create, flags | OFlags::DIRECTORY, &self.openat2)
    }
}

/// How marks are held: enough for `*at` calls, no read permission needed.
const PATH: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// The message for an error resolving or creating an entry beneath the target.
pub fn explain(e: Errno) -> String {
    match e {
        Errno::LOOP | Errno::XDEV => {
            "refusing to write through a symbolic link (it could lead outside the target)".into()
        }
        e => std::io::Error::from(e).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_or_refused() {
        assert_eq!(clean(b"a/./b//c/").unwrap(), b"a/b/c");
        assert_eq!(clean(b"./").unwrap(), b"");
        assert_eq!(clean(b"/etc/passwd"), Err(Unsafe::Absolute));
        assert_eq!(clean(b"a/../../x"), Err(Unsafe::DotDot));
        assert_eq!(clean(b"..").unwrap_err(), Unsafe::DotDot);
        assert_eq!(clean(b"a..b/c..").unwrap(), b"a..b/c..");
        assert_eq!(split(b"a/b/c"), (&b"a/b"[..], &b"c"[..]));
        assert_eq!(split(b"c"), (&b""[..], &b"c"[..]));
    }
}
