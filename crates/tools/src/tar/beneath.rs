//! Writing only beneath the extraction directory.
//!
//! Every entry is reached from the target directory's descriptor without following any
//! symlink: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has it, a
//! component-by-component `openat(O_NOFOLLOW)` walk otherwise. So neither a symlink the archive
//! created (`a -> /tmp`, then `a/file`) nor one already in the target can carry a write outside
//! it. Entry names are checked first by [`clean`]: no absolute paths, no `..`.

use rustix::io::Errno;

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

/// The extraction directory, opened once: entries are reached beneath it without following
/// symlinks (the same resolution every tool that acts on walked entries uses).
pub use flist::beneath::Root as Target;

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
