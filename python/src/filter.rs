//! The find-style tests of `FList.filter(...)` and `mfu.find(...)`, from keyword arguments:
//! the tests of `mfu-rs find` (GNU find's semantics), all of which must pass.
//!
//! | keyword | value | as |
//! |---|---|---|
//! | `type` | letters `b c d f l p s`, a comma list is any of them | `--type` |
//! | `name`, `path` | shell pattern on the basename / whole path | `--name`, `--path` |
//! | `regex` | regex that must match the whole path | `--regex` |
//! | `size` | `[+-]N[unit]` (`+1G`, `-4k`) | `--size` |
//! | `atime`, `mtime`, `ctime` | `[+-]N` days, GNU rounding (`+180`: 181 days or more) | `--mtime` |
//! | `amin`, `mmin`, `cmin` | `[+-]N` minutes | `--mmin` |
//! | `newer` | a file: modified after its mtime | `--newer` |
//! | `uid`, `gid` | `[+-]N` or an int | `--uid` |
//! | `user`, `group` | a name (or an int id) | `--user` |

use crate::errors::{error, flist_error};
use mfu::flist::filter::{AgeUnit, Test, TimeField};
use mfu::flist::walk::stat_path;
use mfu::prelude::Entry;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt};

/// Tests that must all pass; each is a group of alternatives of which one must pass
/// (`type="f,d"`).
#[derive(Debug, Default)]
pub struct Tests {
    groups: Vec<Vec<Test>>,
}

impl Tests {
    /// Whether the record passes every test.
    pub fn matches(&self, e: Entry<'_>) -> bool {
        self.groups.iter().all(|g| g.iter().any(|t| t.matches(e)))
    }

    /// The groups: all must pass, each by one of its tests.
    pub fn into_groups(self) -> Vec<Vec<Test>> {
        self.groups
    }

    /// True when no test was given (everything passes).
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// The keywords [`tests`] knows, in the order the tests are evaluated.
pub const KEYWORDS: &[&str] = &[
    "type", "name", "path", "regex", "size", "uid", "gid", "user", "group", "atime", "mtime",
    "ctime", "amin", "mmin", "cmin", "newer",
];

/// A value given as str or int, as text (`mtime=180` and `mtime="+180"`).
fn text(key: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if value.is_instance_of::<PyInt>() {
        return Ok(value.extract::<i64>()?.to_string());
    }
    value
        .extract::<String>()
        .map_err(|_| error(format!("{key}=: expected a str or an int"), None, None))
}

/// A user or group id from a name (this machine's database) or a number.
fn id_of(py: Python<'_>, value: &Bound<'_, PyAny>, group: bool) -> PyResult<u64> {
    if value.is_instance_of::<PyInt>() {
        return value.extract();
    }
    let name: String = value.extract()?;
    let (module, call, field) = if group {
        ("grp", "getgrnam", "gr_gid")
    } else {
        ("pwd", "getpwnam", "pw_uid")
    };
    match py.import(module)?.call_method1(call, (&name,)) {
        Ok(rec) => rec.getattr(field)?.extract(),
        Err(_) => name.parse().map_err(|_| {
            let what = if group { "group" } else { "user" };
            error(format!("unknown {what} '{name}'"), None, None)
        }),
    }
}

/// The tests of `kwargs` (`None`: none), times relative to `now` (ns since the epoch, the same
/// on every rank). Unknown keywords and malformed values are errors.
pub fn tests(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>, now: i128) -> PyResult<Tests> {
    let mut out = Tests::default();
    let Some(kwargs) = kwargs else {
        return Ok(out);
    };
    for key in kwargs.keys() {
        let key: String = key.extract()?;
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(error(
                format!("unknown test '{key}' (known: {})", KEYWORDS.join(", ")),
                None,
                None,
            ));
        }
    }
    let bad = |key: &str, e: mfu::flist::Error| error(format!("{key}=: {e}"), None, None);
    for &key in KEYWORDS {
        let Some(value) = kwargs.get_item(key)? else {
            continue;
        };
        let one = |t: Result<Test, mfu::flist::Error>| t.map(|t| vec![t]).map_err(|e| bad(key, e));
        let group = match key {
            "type" => text(key, &value)?
                .split(',')
                .map(|l| Test::file_type(l.trim()).map_err(|e| bad(key, e)))
                .collect::<PyResult<Vec<_>>>()?,
            "name" => one(Test::fnmatch_name(&crate::paths::path_bytes(&value)?))?,
            "path" => one(Test::fnmatch_path(&crate::paths::path_bytes(&value)?))?,
            "regex" => one(Test::whole_regex(&text(key, &value)?))?,
            "size" => one(Test::size(&text(key, &value)?))?,
            "uid" | "gid" => one(Test::id(&text(key, &value)?, key == "gid"))?,
            "user" => one(Test::id(&id_of(py, &value, false)?.to_string(), false))?,
            "group" => one(Test::id(&id_of(py, &value, true)?.to_string(), true))?,
            "newer" => {
                let file = crate::paths::path_bytes(&value)?;
                let st = stat_path(&file, false).map_err(|e| {
                    let e = mfu::flist::ItemError::new(&file, "stat", e.into());
                    flist_error(&e.into())
                })?;
                let than = i128::from(st.st_mtime) * 1_000_000_000 + st.st_mtime_nsec as i128;
                vec![Test::Newer {
                    field: TimeField::Modify,
                    than,
                }]
            }
            time => {
                let (field, unit) = match time {
                    "atime" => (TimeField::Access, AgeUnit::Days),
                    "mtime" => (TimeField::Modify, AgeUnit::Days),
                    "ctime" => (TimeField::Change, AgeUnit::Days),
                    "amin" => (TimeField::Access, AgeUnit::Minutes),
                    "mmin" => (TimeField::Modify, AgeUnit::Minutes),
                    _ => (TimeField::Change, AgeUnit::Minutes),
                };
                one(Test::age(field, unit, &text(key, &value)?, now))?
            }
        };
        out.groups.push(group);
    }
    Ok(out)
}

/// Now, in nanoseconds since the epoch.
pub fn now_nanos() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}
