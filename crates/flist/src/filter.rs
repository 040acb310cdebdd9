//! find-like tests on records (dfind's `--type`, `--size`, `--name`, `--path`, `--regex`),
//! evaluated locally: no communication.
//!
//! Globs follow `fnmatch(3)` as dfind calls it (`FNM_PERIOD`, no `FNM_PATHNAME`): `*` and `?`
//! also match `/` in a path pattern, and a name beginning with `.` is matched only by a pattern
//! beginning with a literal `.`. Names and paths are bytes: globs and regexes match names that
//! are not UTF-8.
//!
//! ```
//! use flist::filter::{apply, Filter, Test};
//! use flist::{Detail, FileList, FileType};
//! let mut list = FileList::new(Detail::Lite);
//! list.push(b"/src/a.c", FileType::File, None);
//! list.push(b"/src/b\xff.c", FileType::File, None);
//! list.push(b"/src/c.h", FileType::File, None);
//! let filter = Filter::new(vec![Test::name_glob("*.c").unwrap()]);
//! assert_eq!(apply(&list, &filter).len(), 2);
//! ```

use crate::error::{Error, Result};
use crate::path::{as_path, basename};
use crate::record::{Entry, FileList, FileType};
use crate::units::parse_size;
use globset::{GlobBuilder, GlobMatcher};
use rayon::prelude::*;

/// How a record's number compares with the test's (find's `+N`, `-N`, `N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// The record's value is smaller (`-N`).
    Less,
    /// The values are equal (`N`).
    Equal,
    /// The record's value is larger (`+N`).
    Greater,
}

impl Cmp {
    fn holds(self, value: u64, target: u64) -> bool {
        match self {
            Cmp::Less => value < target,
            Cmp::Equal => value == target,
            Cmp::Greater => value > target,
        }
    }
}

/// One test on a record.
#[derive(Clone, Debug)]
pub enum Test {
    /// The record has this type.
    Type(FileType),
    /// The record's size in bytes compares with `bytes` as `cmp` says. Records without
    /// metadata (lite lists) never match.
    Size {
        /// Direction of the comparison.
        cmp: Cmp,
        /// The size to compare with, in bytes.
        bytes: u64,
    },
    /// The basename matches the glob (dfind `--name`).
    Name(GlobMatcher),
    /// The whole path matches the glob (dfind `--path`).
    Path(GlobMatcher),
    /// The regex matches somewhere in the whole path (dfind `--regex`, unanchored like
    /// `regexec`).
    Regex(regex::bytes::Regex),
    /// The regex matches somewhere in the basename.
    NameRegex(regex::bytes::Regex),
}

fn glob(pattern: &str, what: &str) -> Result<GlobMatcher> {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| Error::Invalid(format!("bad {what} pattern '{pattern}': {e}")))
}

fn regex(pattern: &str) -> Result<regex::bytes::Regex> {
    regex::bytes::Regex::new(pattern)
        .map_err(|e| Error::Invalid(format!("bad regex '{pattern}': {e}")))
}

/// `fnmatch`'s `FNM_PERIOD` for a basename: a leading `.` must be matched by a literal `.`.
fn period_ok(pattern: &str, name: &[u8]) -> bool {
    name.first() != Some(&b'.') || pattern.starts_with('.') || pattern.starts_with("\\.")
}

impl Test {
    /// A basename glob (`*.c`); [`Error::Invalid`] for a malformed pattern.
    pub fn name_glob(pattern: &str) -> Result<Test> {
        glob(pattern, "name").map(Test::Name)
    }

    /// A whole-path glob (`/data/*/out`; `*` also matches `/`).
    pub fn path_glob(pattern: &str) -> Result<Test> {
        glob(pattern, "path").map(Test::Path)
    }

    /// A regex searched in the whole path (Rust `regex` syntax; `(?-u)` lets `.` match any
    /// byte).
    pub fn regex(pattern: &str) -> Result<Test> {
        regex(pattern).map(Test::Regex)
    }

    /// A regex searched in the basename.
    pub fn name_regex(pattern: &str) -> Result<Test> {
        regex(pattern).map(Test::NameRegex)
    }

    /// dfind's `--size [+-]N[unit]`: `+N` larger than N bytes, `-N` smaller, `N` exactly; `N` as
    /// [`parse_size`] reads it (`1.5G`, powers of 1024).
    pub fn size(spec: &str) -> Result<Test> {
        let (cmp, number) = match spec.as_bytes().first() {
            Some(b'+') => (Cmp::Greater, &spec[1..]),
            Some(b'-') => (Cmp::Less, &spec[1..]),
            _ => (Cmp::Equal, spec),
        };
        let bytes =
            parse_size(number).map_err(|e| Error::Invalid(format!("bad --size '{spec}': {e}")))?;
        Ok(Test::Size { cmp, bytes })
    }

    /// dfind's `--type` letter: `b c d f l p s` (block device, char device, directory, regular
    /// file, symlink, fifo, socket).
    pub fn file_type(letter: &str) -> Result<Test> {
        let t = match letter {
            "b" => FileType::BlockDev,
            "c" => FileType::CharDev,
            "d" => FileType::Dir,
            "f" => FileType::File,
            "l" => FileType::Symlink,
            "p" => FileType::Fifo,
            "s" => FileType::Socket,
            _ => {
                return Err(Error::Invalid(format!(
                    "bad type '{letter}' (expected b, c, d, f, l, p or s)"
                )))
            }
        };
        Ok(Test::Type(t))
    }

    /// Whether the record passes this test.
    pub fn matches(&self, e: Entry<'_>) -> bool {
        match self {
            Test::Type(t) => e.kind == *t,
            Test::Size { cmp, bytes } => e.meta.is_some_and(|m| cmp.holds(m.size, *bytes)),
            Test::Name(g) => {
                let name = basename(e.path);
                period_ok(g.glob().glob(), name) && g.is_match(as_path(name))
            }
            Test::Path(g) => g.is_match(as_path(e.path)),
            Test::Regex(r) => r.is_match(e.path),
            Test::NameRegex(r) => r.is_match(basename(e.path)),
        }
    }
}

/// Tests that must all pass (find's implicit `-and`). An empty filter passes everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// The tests, evaluated in order; the first failure decides.
    pub tests: Vec<Test>,
}

impl Filter {
    /// A filter of `tests`.
    pub fn new(tests: Vec<Test>) -> Filter {
        Filter { tests }
    }

    /// Add a test.
    pub fn push(&mut self, test: Test) {
        self.tests.push(test);
    }

    /// Whether the record passes every test.
    pub fn matches(&self, e: Entry<'_>) -> bool {
        self.tests.iter().all(|t| t.matches(e))
    }
}

/// The records of `list` that pass `filter`, in their order (a new list with the same id
/// tables). Local, tests evaluated in parallel with rayon.
pub fn apply(list: &FileList, filter: &Filter) -> FileList {
    let keep: Vec<usize> = (0..list.len())
        .into_par_iter()
        .filter(|&i| filter.matches(list.entry(i)))
        .collect();
    list.select(keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size_of(spec: &str) -> (Cmp, u64) {
        match Test::size(spec).unwrap() {
            Test::Size { cmp, bytes } => (cmp, bytes),
            t => panic!("{t:?}"),
        }
    }

    #[test]
    fn sizes_parse_like_abtoull() {
        assert_eq!(size_of("+4MB"), (Cmp::Greater, 4 << 20));
        assert_eq!(size_of("-2k"), (Cmp::Less, 2048));
        assert_eq!(size_of("100"), (Cmp::Equal, 100));
        assert_eq!(size_of("1.5G"), (Cmp::Equal, 3 << 29));
        assert_eq!(size_of("1.5"), (Cmp::Equal, 1));
        assert_eq!(size_of("0.5kb"), (Cmp::Equal, 512));
        assert_eq!(size_of("15E"), (Cmp::Equal, 15 << 60));
        for bad in ["", "+", "MB", "4X", "4MBB", "1.2.3", "16E", "-.", "4 MB"] {
            assert!(Test::size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn name_globs_follow_fnm_period() {
        let e = |p: &'static [u8]| Entry {
            path: p,
            kind: FileType::File,
            meta: None,
        };
        let star = Test::name_glob("*").unwrap();
        assert!(star.matches(e(b"/a/x")));
        assert!(!star.matches(e(b"/a/.hidden")));
        assert!(Test::name_glob(".h*").unwrap().matches(e(b"/a/.hidden")));
        let path = Test::path_glob("/a*z").unwrap();
        assert!(path.matches(e(b"/a/b/z")));
        assert!(Test::name_glob("[").is_err());
        assert!(Test::regex("(").is_err());
        assert!(Test::file_type("x").is_err());
    }
}
