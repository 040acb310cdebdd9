//! `mfu.FList`: the distributed file list. Each rank holds its part; what makes or reorders a
//! list (the constructor, `read`, `subset`, `filter`, `sort`, `write`, `summarize`) is
//! collective, as in the mpiFileUtils library: every rank calls it, in the same order.

use crate::entry::Entry;
use crate::errors::{error, flist_error, incomplete_error};
use crate::filter::{now_nanos, tests};
use crate::paths::{many_paths, path_bytes};
use crate::runtime::collective;
use mfu::flist::sort::{parse_keys, sort};
use mfu::prelude::*;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// A distributed list of file system entries: this rank's part, and the global count.
#[pyclass(module = "mfu", name = "FList")]
pub struct FList {
    list: FileList,
    /// Entries over all ranks.
    total: u64,
    /// Global index of this rank's first entry.
    offset: u64,
    /// Paths a walk could not read, over all ranks (`allow_incomplete=True` only).
    walk_errors: u64,
}

impl FList {
    /// Wrap this rank's part, counting the whole list. Collective.
    pub fn from_local(py: Python<'_>, list: FileList) -> PyResult<FList> {
        let sum = collective(py, |comm| summarize(comm, &list))?;
        Ok(FList {
            list,
            total: sum.total,
            offset: sum.offset,
            walk_errors: 0,
        })
    }

    /// This rank's part.
    pub fn local(&self) -> &FileList {
        &self.list
    }

    fn entry_at(&self, i: usize) -> Entry {
        let e = self.list.entry(i);
        Entry::new(e.path, e.kind, e.meta)
    }
}

/// The format named by `write`'s `format` argument.
fn format_of(list: &FileList, format: Option<&str>) -> PyResult<Format> {
    match format {
        None => Ok(io::default_format(list)),
        Some("v4") => Ok(Format::V4),
        Some("text") => Ok(Format::Text),
        Some(other) => Err(error(
            format!("format='{other}': expected 'v4' or 'text'"),
            None,
            None,
        )),
    }
}

#[pymethods]
impl FList {
    /// Walk `paths` (one path or an iterable of them; `None`: an empty list). Collective.
    ///
    /// `stat=False` lists names and types only (faster; no metadata attributes). A walk that
    /// could not read some path raises `mfu.Error` naming it, unless `allow_incomplete=True`,
    /// which keeps what was read and counts the failures in `walk_errors`.
    #[new]
    #[pyo3(signature = (paths=None, stat=true, *, dereference=false, no_atime=false, allow_incomplete=false))]
    fn new(
        py: Python<'_>,
        paths: Option<&Bound<'_, PyAny>>,
        stat: bool,
        dereference: bool,
        no_atime: bool,
        allow_incomplete: bool,
    ) -> PyResult<FList> {
        let detail = if stat { Detail::Stat } else { Detail::Lite };
        let Some(paths) = paths.filter(|p| !p.is_none()) else {
            return FList::from_local(py, FileList::new(detail));
        };
        let roots = many_paths(paths)?;
        let noatime = mfu::flist::noatime::NoAtime::new(no_atime);
        let opts = WalkOptions {
            detail,
            dereference,
            noatime: &noatime,
            // The seed `mfu-rs walk` uses: the same tree gives the same list in the same order.
            seed: 0x5eed,
            ..WalkOptions::default()
        };
        let walked = collective(py, |comm| walk(comm, &roots, &opts))?;
        let total_errors = walked.total_errors;
        let list = match walked.into_result() {
            Ok(list) => list,
            Err(e) if allow_incomplete && !e.walked.interrupted => e.walked.list,
            Err(e) => return Err(incomplete_error(&e)),
        };
        let mut flist = FList::from_local(py, list)?;
        flist.walk_errors = total_errors;
        Ok(flist)
    }

    /// Read a list file: cache v4 or v3 (mpiFileUtils, `mfu-rs walk -o`), a typed `path|T` text
    /// list (typed only when it starts with mfu-rs' header line), one path per line, or
    /// NUL-separated. Each rank gets a share. Collective.
    #[staticmethod]
    fn read(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<FList> {
        let path = path_bytes(path)?;
        let list =
            collective(py, |comm| io::read(comm, path.as_slice()))?.map_err(|e| flist_error(&e))?;
        FList::from_local(py, list)
    }

    /// Entries over all ranks (no communication: counted when the list was made).
    fn __len__(&self) -> usize {
        self.total as usize
    }

    /// Entries on this rank (what iterating gives).
    #[getter]
    fn local_count(&self) -> usize {
        self.list.len()
    }

    /// Global index of this rank's first entry (rank 0 holds the first ones).
    #[getter]
    fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether the entries carry metadata (a stat list).
    #[getter]
    fn stat(&self) -> bool {
        self.list.detail() == Detail::Stat
    }

    /// Paths the walk could not read, over all ranks (only with `allow_incomplete=True`).
    #[getter]
    fn walk_errors(&self) -> u64 {
        self.walk_errors
    }

    /// This rank's entries, in order (not collective).
    fn __iter__(slf: Bound<'_, Self>) -> EntryIter {
        EntryIter {
            list: slf.unbind(),
            next: 0,
        }
    }

    /// This rank's `i`th entry (negative counts from the end; not collective).
    fn __getitem__(&self, i: isize) -> PyResult<Entry> {
        let len = self.list.len() as isize;
        let j = if i < 0 { i + len } else { i };
        if !(0..len).contains(&j) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "entry {i} of a rank holding {len}"
            )));
        }
        Ok(self.entry_at(j as usize))
    }

    /// The entries for which `predicate(entry)` is true, as a new list. Collective.
    ///
    /// The predicate is Python: it runs serially on each rank, with the GIL (0.2 to 0.6 s of
    /// CPU per million entries for a one-line test, 2 to 9 times the Rust filter's: see the
    /// README). `filter()` evaluates find's tests in Rust, in parallel. Should the predicate
    /// raise on any rank, every rank raises.
    fn subset(&self, py: Python<'_>, predicate: &Bound<'_, PyAny>) -> PyResult<FList> {
        let mut picked = Vec::new();
        let mut failure = None;
        for i in 0..self.list.len() {
            let entry = Bound::new(py, self.entry_at(i))?;
            match predicate.call1((entry,)).and_then(|r| r.is_truthy()) {
                Ok(true) => picked.push(i),
                Ok(false) => {}
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let failed = failure.is_some();
        let anyone = collective(py, |comm| comm.max(u64::from(failed)))?;
        if let Some(e) = failure {
            return Err(e);
        }
        if anyone > 0 {
            return Err(error(
                "subset: the predicate raised on another rank",
                None,
                Some("subset"),
            ));
        }
        FList::from_local(py, self.list.select(picked))
    }

    /// The entries that pass every test given, as a new list; evaluated in Rust, in parallel.
    /// Collective. The tests are `mfu-rs find`'s (GNU find's semantics):
    /// `type="f"` (or "f,d"), `name="*.h5"`, `path=`, `regex=`, `size="+1G"`,
    /// `mtime="+180"` (days; `atime`, `ctime`), `mmin="-5"` (minutes; `amin`, `cmin`),
    /// `newer=FILE`, `uid=`, `gid=`, `user=`, `group=`. Times count from one moment agreed by
    /// all ranks.
    #[pyo3(signature = (**tests_given))]
    fn filter(&self, py: Python<'_>, tests_given: Option<&Bound<'_, PyDict>>) -> PyResult<FList> {
        let now = collective(py, |comm| comm.max(now_nanos() as u64))?;
        let tests = tests(py, tests_given, i128::from(now))?;
        let kept = if tests.is_empty() {
            self.list.clone()
        } else {
            py.detach(|| self.list.filter_par(|e| tests.matches(e)))
        };
        FList::from_local(py, kept)
    }

    /// Sort the whole list in place by `keys` (a str such as "name" or "-size,name", or a list
    /// of them; a leading `-` sorts descending): name, user, group, uid, gid, atime, mtime,
    /// ctime, size. Entries move between ranks. Collective.
    #[pyo3(signature = (keys="name".into()))]
    fn sort(&mut self, py: Python<'_>, keys: Keys) -> PyResult<()> {
        let keys = parse_keys(&keys.0).map_err(|e| flist_error(&e))?;
        if let Some(k) = keys.iter().find(|k| k.field.needs_meta()) {
            if !self.stat() {
                let field = k.field.as_str();
                return Err(error(
                    format!("cannot sort by {field}: the list has no metadata (stat=False or a text list)"),
                    None,
                    Some("sort"),
                ));
            }
        }
        // The sort consumes the list (records move between ranks): take it out for the run.
        let detail = self.list.detail();
        let slot = std::sync::Mutex::new(Some(std::mem::replace(
            &mut self.list,
            FileList::new(detail),
        )));
        let sorted = collective(py, |comm| {
            let list = slot.lock().ok()?.take()?;
            Some(sort(comm, list, &keys).map(|l| {
                let offset = summarize(comm, &l).offset;
                (l, offset)
            }))
        })?;
        match sorted {
            Some(Ok((list, offset))) => {
                self.list = list;
                self.offset = offset;
                Ok(())
            }
            // The list is lost with the error: the keys were checked first (names, metadata), so
            // only a failure of the runtime gets here.
            Some(Err(e)) => Err(flist_error(&e)),
            None => Err(error("sort: the list was taken", None, Some("sort"))),
        }
    }

    /// Counts over all ranks: `total`, `files`, `dirs`, `links`, `others`, `bytes` (sum of the
    /// regular files' sizes) and `max_path_len` (bytes). Collective.
    fn summarize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = collective(py, |comm| summarize(comm, &self.list))?;
        let d = PyDict::new(py);
        d.set_item("total", s.total)?;
        d.set_item("files", s.files)?;
        d.set_item("dirs", s.dirs)?;
        d.set_item("links", s.links)?;
        d.set_item("others", s.others)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("max_path_len", s.max_path_len)?;
        Ok(d)
    }

    /// Write the whole list to `path`: format "v4" (mpiFileUtils cache v4, what `mfu-rs walk
    /// -o` writes for a stat list; needs one) or "text" (`path|T` lines between mfu-rs' header
    /// and trailer lines); default: v4 for a
    /// stat list, text otherwise. The file appears complete or not at all. Collective.
    #[pyo3(signature = (path, format=None))]
    fn write(&self, py: Python<'_>, path: &Bound<'_, PyAny>, format: Option<&str>) -> PyResult<()> {
        let path = path_bytes(path)?;
        let format = format_of(&self.list, format)?;
        collective(py, |comm| {
            io::write(comm, &self.list, path.as_slice(), format)
        })?
        .map_err(|e| flist_error(&e))
    }

    fn __repr__(&self) -> String {
        format!(
            "FList({} entries, {} on this rank, {})",
            self.total,
            self.list.len(),
            if self.stat() { "stat" } else { "lite" }
        )
    }
}

/// Sort keys: one str ("name", "-size,name") or a list of them.
pub struct Keys(String);

impl<'py> FromPyObject<'_, 'py> for Keys {
    type Error = PyErr;
    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Keys> {
        if obj.is_instance_of::<PyString>() {
            return Ok(Keys(obj.extract()?));
        }
        let parts: Vec<String> = obj.extract()?;
        Ok(Keys(parts.join(",")))
    }
}

impl From<&str> for Keys {
    fn from(s: &str) -> Keys {
        Keys(s.to_string())
    }
}

/// Iterator over one rank's entries.
#[pyclass(module = "mfu")]
pub struct EntryIter {
    list: Py<FList>,
    next: usize,
}

#[pymethods]
impl EntryIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> Option<Entry> {
        let list = self.list.borrow(py);
        (self.next < list.list.len()).then(|| {
            self.next += 1;
            list.entry_at(self.next - 1)
        })
    }
}
