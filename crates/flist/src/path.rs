//! Byte paths: normalisation and display. Paths are never `String`.

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A path as flist's entry points take it ([`walk`](crate::walk::walk) roots,
/// [`io::read`](crate::io::read), [`io::write`](crate::io::write)): bytes (`&[u8]`, `Vec<u8>`,
/// `b"..."`), a [`Path`]/[`PathBuf`], an [`OsStr`]/[`OsString`] or a `str`/`String`, all seen as
/// the same bytes without conversion (Unix paths are bytes).
///
/// ```
/// use flist::path::PathLike;
/// use std::path::Path;
/// assert_eq!(Path::new("/data/a").path_bytes(), b"/data/a");
/// assert_eq!("/data/a".path_bytes(), b"/data/a".path_bytes());
/// ```
pub trait PathLike {
    /// The path's bytes.
    fn path_bytes(&self) -> &[u8];
}

impl PathLike for [u8] {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}

impl<const N: usize> PathLike for [u8; N] {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}

impl PathLike for Vec<u8> {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}

impl PathLike for Box<[u8]> {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}

impl PathLike for Cow<'_, [u8]> {
    fn path_bytes(&self) -> &[u8] {
        self
    }
}

impl PathLike for OsStr {
    fn path_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PathLike for OsString {
    fn path_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PathLike for Path {
    fn path_bytes(&self) -> &[u8] {
        self.as_os_str().as_bytes()
    }
}

impl PathLike for PathBuf {
    fn path_bytes(&self) -> &[u8] {
        self.as_os_str().as_bytes()
    }
}

impl PathLike for str {
    fn path_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PathLike for String {
    fn path_bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl<T: PathLike + ?Sized> PathLike for &T {
    fn path_bytes(&self) -> &[u8] {
        (**self).path_bytes()
    }
}

/// A path for humans: UTF-8 as is, other bytes as `\xNN`.
pub fn display(path: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(path) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(path.utf8_chunks().fold(String::new(), |mut s, chunk| {
            s.push_str(chunk.valid());
            for b in chunk.invalid() {
                s.push_str(&format!("\\x{b:02x}"));
            }
            s
        })),
    }
}

/// A byte path as a `std::path::Path`, without conversion.
pub fn as_path(path: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(path))
}

/// Absolute, lexically normalised form of `path` as mpiFileUtils stores it: relative paths are
/// taken from `cwd`; `.` components, repeated and trailing `/` vanish; `..` removes the
/// component before it (lexically, as the C tools do; `/..` stays `/`).
pub fn normalize(path: &[u8], cwd: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let full: Vec<u8>;
    let src = if path.first() == Some(&b'/') {
        path
    } else {
        full = [cwd, b"/", path].concat();
        &full
    };
    for c in src.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        return b"/".to_vec();
    }
    let mut out = Vec::with_capacity(src.len());
    for p in parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    out
}

/// True when `prefix` is `path` or one of its ancestors, compared by component
/// (`/a/b` is a prefix of `/a/b/c`, never of `/a/bc`).
pub fn is_prefix(prefix: &[u8], path: &[u8]) -> bool {
    if prefix == b"/" {
        return path.first() == Some(&b'/');
    }
    path.starts_with(prefix) && (path.len() == prefix.len() || path[prefix.len()] == b'/')
}

/// The last component of a normalised path (`/` for the root).
pub fn basename(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) if i + 1 < path.len() => &path[i + 1..],
        _ => path,
    }
}

/// The parent of a normalised path (`/` for top-level entries and the root).
pub fn parent(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/",
        Some(i) => &path[..i],
    }
}

/// Number of components (`/` is 0, `/a` is 1, `/a/b` is 2).
pub fn depth(path: &[u8]) -> usize {
    if path == b"/" {
        0
    } else {
        path.iter().filter(|&&b| b == b'/').count()
    }
}

/// The current directory as bytes.
pub fn current_dir() -> std::io::Result<Vec<u8>> {
    Ok(std::env::current_dir()?
        .into_os_string()
        .into_encoded_bytes())
}

/// `roots` (normalised paths) without duplicates and without paths inside another of them
/// (whose walk reaches them), so that no entry is listed twice; in component order.
pub fn outermost(mut roots: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    // Component order puts every path right after its ancestors (`/a`, `/a/b`, `/a-b`).
    roots.sort_by(|a, b| a.split(|&c| c == b'/').cmp(b.split(|&c| c == b'/')));
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(roots.len());
    for r in roots {
        if out.last().is_none_or(|outer| !is_prefix(outer, &r)) {
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_path_gives_the_same_bytes() {
        let raw: &[u8] = b"/d/n\xff";
        let os = OsStr::from_bytes(raw);
        let want = raw.to_vec();
        assert_eq!(raw.path_bytes(), want);
        assert_eq!(want.path_bytes(), want);
        assert_eq!(b"/d/n\xff".path_bytes(), want);
        assert_eq!(os.path_bytes(), want);
        assert_eq!(os.to_os_string().path_bytes(), want);
        assert_eq!(Path::new(os).path_bytes(), want);
        assert_eq!(PathBuf::from(os).path_bytes(), want);
        assert_eq!(Cow::Borrowed(raw).path_bytes(), want);
        assert_eq!(Box::<[u8]>::from(raw).path_bytes(), want);
        assert_eq!("/d/é".path_bytes(), "/d/é".as_bytes());
        assert_eq!(String::from("/d/é").path_bytes(), "/d/é".as_bytes());
        assert_eq!((&&Path::new(os)).path_bytes(), want);
    }

    #[test]
    fn normalises_like_the_c_tools() {
        assert_eq!(normalize(b"a/./b//c/", b"/w"), b"/w/a/b/c");
        assert_eq!(normalize(b"/x/../y", b"/w"), b"/y");
        assert_eq!(normalize(b"/..", b"/w"), b"/");
        assert_eq!(normalize(b"n\xff", b"/w"), b"/w/n\xff");
    }

    #[test]
    fn prefixes_match_by_component() {
        assert!(is_prefix(b"/a/b", b"/a/b/c"));
        assert!(is_prefix(b"/a/b", b"/a/b"));
        assert!(!is_prefix(b"/a/b", b"/a/bc"));
        assert!(is_prefix(b"/", b"/a"));
        assert_eq!(basename(b"/a/b"), b"b");
        assert_eq!(parent(b"/a/b"), b"/a");
        assert_eq!(parent(b"/a"), b"/");
        assert_eq!(depth(b"/a/b"), 2);
        assert_eq!(display(b"a\xffb"), "a\\xffb");
    }

    #[test]
    fn nested_and_repeated_roots_are_walked_once() {
        let v = |x: &[&str]| x.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert_eq!(
            outermost(v(&["/a/b", "/a-b", "/w/x", "/a", "/a", "/a/b/c", "/ab"])),
            v(&["/a", "/a-b", "/ab", "/w/x"])
        );
        assert_eq!(outermost(v(&["/x", "/"])), v(&["/"]));
        assert_eq!(
            outermost(v(&["/a/b", "/a", "/a-b", "/a"])),
            v(&["/a", "/a-b"])
        );
    }
}
