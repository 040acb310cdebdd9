//! find-like tests on records (dfind's and GNU find's `--type`, `--size`, `--name`, `--path`,
//! `--regex`, times, owners), evaluated locally: no communication.
//!
//! Globs of [`Test::name_glob`]/[`Test::path_glob`] follow `fnmatch(3)` as dfind calls it
//! (`FNM_PERIOD`, no `FNM_PATHNAME`): `*` and `?` also match `/` in a path pattern, and a name
//! beginning with `.` is matched only by a pattern beginning with a literal `.`.
//! [`Test::fnmatch_name`]/[`Test::fnmatch_path`] are GNU find's `-name`/`-path`: the C library's
//! `fnmatch` with no flags (a leading `.` is matched by `*`), byte by byte as in the C locale.
//! Time tests ([`Test::age`]) round as GNU find does. Names and paths are bytes: globs and
//! regexes match names that are not UTF-8.
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
use crate::record::{Entry, FileList, FileType, Meta};
use crate::units::parse_size;
use globset::{GlobBuilder, GlobMatcher};
use rayon::prelude::*;
use std::ffi::{CStr, CString};

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
    /// `fnmatch(pattern, name, 0)` on the basename (`whole_path` false, GNU `-name`) or on the
    /// whole path (GNU `-path`).
    Fnmatch {
        /// The shell pattern.
        pattern: CString,
        /// Match the whole path instead of the basename.
        whole_path: bool,
    },
    /// A timestamp compared with a moment as GNU find's `-amin`/`-atime` and relatives do (see
    /// [`Test::age`]). Records without metadata never match.
    Age {
        /// The timestamp tested.
        field: TimeField,
        /// `Greater` (`+N`): older than the window; `Less` (`-N`): newer; `Equal` (`N`): in it.
        cmp: Cmp,
        /// Start of the window, nanoseconds since the epoch.
        reference: i128,
        /// Length of the window, nanoseconds.
        window: i128,
    },
    /// The timestamp is later than `than` (nanoseconds since the epoch), as GNU find's
    /// `-newer`/`-anewer`/`-cnewer` compare with a reference file's modification time.
    Newer {
        /// The timestamp tested.
        field: TimeField,
        /// The moment to be later than, nanoseconds since the epoch.
        than: i128,
    },
    /// The owner's numeric id compares with `id` as `cmp` says.
    Uid {
        /// Direction of the comparison.
        cmp: Cmp,
        /// The user id.
        id: u64,
    },
    /// The group's numeric id compares with `id` as `cmp` says.
    Gid {
        /// Direction of the comparison.
        cmp: Cmp,
        /// The group id.
        id: u64,
    },
}

/// Which timestamp of a record a time test reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeField {
    /// Last access (`atime`).
    Access,
    /// Last modification of the data (`mtime`).
    Modify,
    /// Last change of the status (`ctime`).
    Change,
}

impl TimeField {
    /// The timestamp of `m`, in nanoseconds since the epoch.
    pub fn nanos(self, m: &Meta) -> i128 {
        let (s, ns) = match self {
            TimeField::Access => (m.atime, m.atime_nsec),
            TimeField::Modify => (m.mtime, m.mtime_nsec),
            TimeField::Change => (m.ctime, m.ctime_nsec),
        };
        nanos(s, ns)
    }
}

/// Seconds and nanoseconds since the epoch as one number of nanoseconds.
pub fn nanos(secs: i64, nsecs: u32) -> i128 {
    secs as i128 * NANOS_PER_SEC + nsecs as i128
}

const NANOS_PER_SEC: i128 = 1_000_000_000;
const DAY_SECS: i64 = 86_400;

/// The unit of a relative time test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgeUnit {
    /// Minutes (GNU find's `-amin`, `-cmin`, `-mmin`).
    Minutes,
    /// Days of 24 hours (GNU find's `-atime`, `-ctime`, `-mtime`).
    Days,
}

/// `[+-]N` with `N` a decimal number (fractions allowed, as GNU find's `-mtime 1.5`).
fn signed_amount(spec: &str) -> Option<(Cmp, f64)> {
    let (cmp, number) = split_sign(spec);
    let valid = !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.bytes().any(|b| b.is_ascii_digit());
    let n: f64 = number.parse().ok().filter(|_| valid)?;
    n.is_finite().then_some((cmp, n))
}

fn split_sign(spec: &str) -> (Cmp, &str) {
    match spec.as_bytes().first() {
        Some(b'+') => (Cmp::Greater, &spec[1..]),
        Some(b'-') => (Cmp::Less, &spec[1..]),
        _ => (Cmp::Equal, spec),
    }
}

/// `fnmatch(3)` with no flags, on bytes (the C library's, so the semantics are GNU find's).
fn fnmatch(pattern: &CStr, text: &[u8]) -> bool {
    // A name holds no NUL byte; copy it next to its terminator, on the stack when short.
    let mut small = [0u8; 256];
    let mut large = Vec::new();
    let buf: &[u8] = if text.len() < small.len() {
        small[..text.len()].copy_from_slice(text);
        &small[..=text.len()]
    } else {
        large.reserve_exact(text.len() + 1);
        large.extend_from_slice(text);
        large.push(0);
        &large
    };
    // SAFETY: both pointers are NUL-terminated byte strings that outlive the call; fnmatch
    // only reads them.
    unsafe { libc::fnmatch(pattern.as_ptr(), buf.as_ptr().cast(), 0) == 0 }
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
    byte_regex(pattern).map_err(|e| Error::Invalid(format!("bad regex '{pattern}': {e}")))
}

/// A regular expression over path bytes: Unicode mode off, so `.` and classes such as `[^/]`
/// match any byte, including those of names that are not UTF-8 (as `regexec` does in the C
/// locale for drm and dfind); `\n` is matched by `.` too, since names may hold newlines.
/// Literal non-ASCII characters in the pattern still match their UTF-8 bytes.
pub fn byte_regex(pattern: &str) -> std::result::Result<regex::bytes::Regex, regex::Error> {
    regex::bytes::RegexBuilder::new(pattern)
        .unicode(false)
        .dot_matches_new_line(true)
        .build()
}

/// The syntax of a regex of [`Test::whole_regex_in`] (find's `--regextype`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RegexSyntax {
    /// The `regex` crate's syntax, which is POSIX extended syntax (GNU's `posix-extended`)
    /// for what both have; see [`byte_regex`] for how it meets bytes.
    #[default]
    Extended,
    /// POSIX basic syntax, GNU's flavour (dfind's `regcomp` without `REG_EXTENDED`; GNU's
    /// `posix-basic`), rewritten by [`crate::posix_regex::translate`] (grep's too).
    Basic,
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

    /// A regex that must match the whole path (GNU find's `-regex`), in Rust `regex` syntax
    /// with Unicode off: `.` matches any byte (newlines too), as a POSIX extended regex in the
    /// C locale does.
    pub fn whole_regex(pattern: &str) -> Result<Test> {
        Test::whole_regex_in(RegexSyntax::Extended, pattern)
    }

    /// A regex in `syntax` that must match the whole path (GNU find's `-regextype` and
    /// `-regex`); [`Error::Invalid`] names the expression and why it is refused.
    pub fn whole_regex_in(syntax: RegexSyntax, pattern: &str) -> Result<Test> {
        let (engine, shown) = match syntax {
            RegexSyntax::Extended => (pattern.to_string(), format!("'{pattern}'")),
            RegexSyntax::Basic => {
                let engine = crate::posix_regex::translate(
                    pattern.as_bytes(),
                    crate::posix_regex::Syntax::Basic,
                    crate::posix_regex::Negated::AnyByte,
                )
                .map_err(|e| Error::Invalid(format!("bad regex '{pattern}' (posix-basic): {e}")))?;
                let shown = format!("'{pattern}' (posix-basic, read as '{engine}')");
                (engine, shown)
            }
        };
        let build =
            |p: &str| byte_regex(p).map_err(|e| Error::Invalid(format!("bad regex {shown}: {e}")));
        // Alone first: wrapped, an unbalanced `a)|(b` would compile into something else.
        build(&engine)?;
        build(&format!(r"\A(?:{engine})\z")).map(Test::Regex)
    }

    /// GNU find's `-name`: `fnmatch(pattern, basename, 0)`.
    pub fn fnmatch_name(pattern: &[u8]) -> Result<Test> {
        Self::fnmatch(pattern, false)
    }

    /// GNU find's `-path`: `fnmatch(pattern, path, 0)` (`*` matches `/` too).
    pub fn fnmatch_path(pattern: &[u8]) -> Result<Test> {
        Self::fnmatch(pattern, true)
    }

    fn fnmatch(pattern: &[u8], whole_path: bool) -> Result<Test> {
        let pattern = CString::new(pattern)
            .map_err(|_| Error::Invalid("a pattern cannot hold a NUL byte".into()))?;
        Ok(Test::Fnmatch {
            pattern,
            whole_path,
        })
    }

    /// A time test `[+-]N` relative to `now` (nanoseconds since the epoch), with GNU find's
    /// rounding (findutils 4.9, checked against `find` by the tests):
    ///
    /// | unit | `+N` | `-N` | `N` |
    /// |---|---|---|---|
    /// | minutes | age > N min | age < N min | N-1 min < age ≤ N min |
    /// | days | age > N+1 days | age < N days + 1 s | N days < age ≤ N+1 days |
    ///
    /// So `--mtime +180` means "at least 181 days old", `--mtime 0` "within the last 24
    /// hours", `--mmin 5` "more than 4 and at most 5 minutes ago". N may have a fraction
    /// (`1.5`); the window of `N` stays one unit long. A timestamp in the future has a
    /// negative age.
    pub fn age(field: TimeField, unit: AgeUnit, spec: &str, now: i128) -> Result<Test> {
        let bad = || {
            Error::Invalid(format!(
                "bad time '{spec}' (expected N, +N or -N, N a number)"
            ))
        };
        let (cmp, amount) = signed_amount(spec).ok_or_else(bad)?;
        let unit_secs = match unit {
            AgeUnit::Minutes => 60,
            AgeUnit::Days => DAY_SECS,
        };
        let offset = amount * unit_secs as f64;
        if offset > 1e15 {
            return Err(bad());
        }
        // GNU find counts days from "now minus one day" (its `cur_day_start`), and moves the
        // origin of `-N` one second short of a day later; minutes count from now.
        let origin = match (unit, cmp) {
            (AgeUnit::Minutes, _) => now,
            (AgeUnit::Days, Cmp::Less) => now - NANOS_PER_SEC,
            (AgeUnit::Days, _) => now - DAY_SECS as i128 * NANOS_PER_SEC,
        };
        let whole = offset.trunc();
        let frac_nanos = ((offset - whole) * 1e9) as i128;
        Ok(Test::Age {
            field,
            cmp,
            reference: origin - whole as i128 * NANOS_PER_SEC - frac_nanos,
            window: unit_secs as i128 * NANOS_PER_SEC,
        })
    }

    /// `--uid [+-]N` (`group` false) or `--gid [+-]N` (`group` true): the numeric id compared.
    pub fn id(spec: &str, group: bool) -> Result<Test> {
        let (cmp, number) = split_sign(spec);
        let id: u64 = number
            .parse()
            .ok()
            .filter(|_| number.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| Error::Invalid(format!("bad id '{spec}' (expected N, +N or -N)")))?;
        Ok(if group {
            Test::Gid { cmp, id }
        } else {
            Test::Uid { cmp, id }
        })
    }

    /// Whether the test reads metadata (so records of a lite list never pass it).
    pub fn needs_meta(&self) -> bool {
        matches!(
            self,
            Test::Size { .. }
                | Test::Age { .. }
                | Test::Newer { .. }
                | Test::Uid { .. }
                | Test::Gid { .. }
        )
    }

    /// dfind's `--size [+-]N[unit]`: `+N` larger than N bytes, `-N` smaller, `N` exactly; `N` as
    /// [`parse_size`] reads it (`1.5G`, powers of 1024).
    pub fn size(spec: &str) -> Result<Test> {
        let (cmp, number) = split_sign(spec);
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
            Test::Fnmatch {
                pattern,
                whole_path,
            } => fnmatch(
                pattern,
                if *whole_path {
                    e.path
                } else {
                    basename(e.path)
                },
            ),
            Test::Age {
                field,
                cmp,
                reference,
                window,
            } => e.meta.is_some_and(|m| {
                // GNU's sense: +N wants the timestamp before the window, -N after its start.
                let delta = field.nanos(&m) - reference;
                match cmp {
                    Cmp::Greater => delta < 0,
                    Cmp::Less => delta > 0,
                    Cmp::Equal => (0..*window).contains(&delta),
                }
            }),
            Test::Newer { field, than } => e.meta.is_some_and(|m| field.nanos(&m) > *than),
            Test::Uid { cmp, id } => e.meta.is_some_and(|m| cmp.holds(m.uid as u64, *id)),
            Test::Gid { cmp, id } => e.meta.is_some_and(|m| cmp.holds(m.gid as u64, *id)),
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

    #[test]
    fn regexes_match_any_byte_of_a_name() {
        let e = |p: &'static [u8]| Entry {
            path: p,
            kind: FileType::File,
            meta: None,
        };
        // drm's regexec in the C locale matches any byte; an `--exclude` that failed to match a
        // non-UTF-8 name would let rm remove what the user protected.
        assert!(Test::regex("bad.name")
            .unwrap()
            .matches(e(b"/t/bad\xffname")));
        assert!(Test::regex("^/t/[^/]*$")
            .unwrap()
            .matches(e(b"/t/\xfe\xff")));
        assert!(Test::name_regex("^a.b$").unwrap().matches(e(b"/t/a\nb")));
        assert!(Test::regex("caf\u{e9}")
            .unwrap()
            .matches(e("/t/caf\u{e9}".as_bytes())));
    }

    /// A record whose mtime is `age` nanoseconds before `now`.
    fn aged(now: i128, age: i128) -> Meta {
        let t = now - age;
        Meta {
            mtime: t.div_euclid(NANOS_PER_SEC) as i64,
            mtime_nsec: t.rem_euclid(NANOS_PER_SEC) as u32,
            ..Meta::default()
        }
    }

    /// Whether `spec` in `unit` matches a record `age_secs` old (fractions allowed).
    fn age_matches(unit: AgeUnit, spec: &str, age_secs: f64) -> bool {
        let now = nanos(1_800_000_000, 123_456_789);
        let m = aged(now, (age_secs * 1e9) as i128);
        let e = Entry {
            path: b"/f",
            kind: FileType::File,
            meta: Some(m),
        };
        Test::age(TimeField::Modify, unit, spec, now)
            .unwrap()
            .matches(e)
    }

    /// The ages (seconds) of `ages` that `spec` matches.
    fn matched(unit: AgeUnit, spec: &str, ages: &[f64]) -> Vec<f64> {
        ages.iter()
            .copied()
            .filter(|&a| age_matches(unit, spec, a))
            .collect()
    }

    #[test]
    fn minutes_round_like_gnu_find() {
        use AgeUnit::Minutes;
        let ages = [
            -5.0, 0.0, 0.5, 30.0, 59.9, 60.0, 60.1, 119.9, 120.0, 120.1, 600.0,
        ];
        // N: N-1 min < age <= N min.
        assert_eq!(matched(Minutes, "1", &ages), [0.5, 30.0, 59.9, 60.0]);
        assert_eq!(matched(Minutes, "2", &ages), [60.1, 119.9, 120.0]);
        assert_eq!(matched(Minutes, "0", &ages), [-5.0, 0.0]);
        // +N: age > N min; -N: age < N min.
        assert_eq!(
            matched(Minutes, "+1", &ages),
            [60.1, 119.9, 120.0, 120.1, 600.0]
        );
        assert_eq!(matched(Minutes, "-1", &ages), [-5.0, 0.0, 0.5, 30.0, 59.9]);
        assert_eq!(matched(Minutes, "-0", &ages), [-5.0]);
        // Fractions: 1.5 min = 90 s, the window the minute up to it (30 s < age <= 90 s).
        assert_eq!(matched(Minutes, "1.5", &ages), [59.9, 60.0, 60.1]);
        assert_eq!(matched(Minutes, "+0.5", &ages), &ages[4..]);
    }

    #[test]
    fn days_round_like_gnu_find() {
        use AgeUnit::Days;
        let d = 86_400.0;
        let ages = [
            -1.0,
            0.0,
            30.0,
            d - 0.1,
            d,
            d + 0.5,
            d + 1.0,
            d + 1.5,
            2.0 * d,
            2.0 * d + 0.5,
            3.0 * d,
            200.0 * d,
        ];
        // N: N days < age <= N+1 days.
        assert_eq!(matched(Days, "0", &ages), [30.0, d - 0.1, d]);
        assert_eq!(
            matched(Days, "1", &ages),
            [d + 0.5, d + 1.0, d + 1.5, 2.0 * d]
        );
        // +N: age > N+1 days (so +0 is "more than a day").
        assert_eq!(matched(Days, "+0", &ages), &ages[5..]);
        assert_eq!(
            matched(Days, "+1", &ages),
            [2.0 * d + 0.5, 3.0 * d, 200.0 * d]
        );
        assert_eq!(matched(Days, "+180", &ages), [200.0 * d]);
        // -N: age < N days + 1 s (GNU's origin for -N is one second short of a day later).
        assert_eq!(
            matched(Days, "-1", &ages),
            [-1.0, 0.0, 30.0, d - 0.1, d, d + 0.5]
        );
        assert_eq!(matched(Days, "-0", &ages), [-1.0, 0.0]);
        // 0.5 days = 12 h: 12 h < age <= 36 h.
        assert_eq!(matched(Days, "0.5", &ages), &ages[3..8]);
    }

    #[test]
    fn times_ids_and_patterns_reject_junk() {
        let now = nanos(1_800_000_000, 0);
        for bad in [
            "", "+", "-", "1x", "x", "1e3", "--1", "+-1", "nan", "inf", ".", "1e99",
        ] {
            assert!(
                Test::age(TimeField::Access, AgeUnit::Days, bad, now).is_err(),
                "{bad}"
            );
        }
        assert!(Test::age(TimeField::Access, AgeUnit::Days, &"9".repeat(20), now).is_err());
        for bad in ["", "+", "a", "-1.5", "1 "] {
            assert!(Test::id(bad, false).is_err(), "{bad}");
        }
        assert!(matches!(
            Test::id("+7", true).unwrap(),
            Test::Gid {
                cmp: Cmp::Greater,
                id: 7
            }
        ));
        assert!(Test::whole_regex("a)|(b").is_err());
        assert!(Test::fnmatch_name(&[b'a', 0]).is_err());
    }

    #[test]
    fn gnu_patterns_and_whole_path_regexes() {
        let e = |p: &'static [u8]| Entry {
            path: p,
            kind: FileType::File,
            meta: None,
        };
        let name = |p: &[u8]| Test::fnmatch_name(p).unwrap();
        // GNU -name: `*` matches a leading dot; braces are literal; `?` is one byte.
        assert!(name(b"*").matches(e(b"/a/.hidden")));
        assert!(name(b"a{b,c}").matches(e(b"/d/a{b,c}")));
        assert!(!name(b"a{b,c}").matches(e(b"/d/ab")));
        assert!(name(b"caf?").matches(e(b"/d/caf\xe9")));
        assert!(name(b"caf\xe9").matches(e(b"/d/caf\xe9")));
        assert!(name(b"[[:digit:]]x").matches(e(b"/d/7x")));
        assert!(!name(b"d").matches(e(b"/d/x")));
        let long = [b'x'; 400];
        let mut path = b"/d/".to_vec();
        path.extend_from_slice(&long);
        let p = Test::fnmatch_path(b"/d/x*x").unwrap();
        assert!(p.matches(Entry {
            path: &path,
            kind: FileType::File,
            meta: None
        }));
        assert!(Test::fnmatch_path(b"/d*z").unwrap().matches(e(b"/d/y/z")));
        // -regex matches the whole path, any byte.
        let re = Test::whole_regex("/d/.*c").unwrap();
        assert!(re.matches(e(b"/d/ab\xffc")));
        assert!(!re.matches(e(b"/d/abcd")));
        assert!(!re.matches(e(b"/x/d/abc")));
        assert!(Test::whole_regex("/d/[^/]+|/x").unwrap().matches(e(b"/x")));
        // The same in basic syntax; its errors name the expression and the syntax.
        let bre = |p: &str| Test::whole_regex_in(RegexSyntax::Basic, p);
        assert!(bre(r"/d/[^/]\+\|/x").unwrap().matches(e(b"/x")));
        assert!(!bre("/d/[^/]+|/x").unwrap().matches(e(b"/x")));
        assert!(bre("/d/a+").unwrap().matches(e(b"/d/a+")));
        let msg = bre(r"\(a\)\1").unwrap_err().to_string();
        assert!(msg.contains(r"'\(a\)\1' (posix-basic)"), "{msg}");
        assert!(msg.contains("back-references"), "{msg}");
        let msg = bre(r"a\)").unwrap_err().to_string();
        assert!(msg.contains(r"'a\)' (posix-basic, read as 'a)')"), "{msg}");
    }

    #[test]
    fn owners_and_newer() {
        let m = Meta {
            uid: 5,
            gid: 7,
            atime: 100,
            atime_nsec: 2,
            ..Meta::default()
        };
        let e = Entry {
            path: b"/f",
            kind: FileType::File,
            meta: Some(m),
        };
        assert!(Test::id("5", false).unwrap().matches(e));
        assert!(Test::id("-6", false).unwrap().matches(e));
        assert!(!Test::id("+5", false).unwrap().matches(e));
        assert!(Test::id("7", true).unwrap().matches(e));
        let newer = |than| Test::Newer {
            field: TimeField::Access,
            than,
        };
        assert!(newer(nanos(100, 1)).matches(e));
        assert!(!newer(nanos(100, 2)).matches(e));
        let lite = Entry { meta: None, ..e };
        assert!(!Test::id("5", false).unwrap().matches(lite));
        assert!(!newer(0).matches(lite));
    }
}
