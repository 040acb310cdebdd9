//! The tools as Python functions: keyword options in, the tool's typed report out as a dict.
//! Collective: every rank calls the same tool with the same arguments.
//!
//! A usage or setup error (nothing was done) raises `mfu.Error`. A run whose items failed
//! returns its report with `status == 1` and the failures in `failures` (this process's
//! sample, each naming the path and the operation). The dict is the report `--json` prints,
//! plus `status` (0 done, 1 items failed or trees differ) and `output` (bytes the tool sent as
//! output on this rank: the listing of a dry run, the paths found; rank 0 holds them all).

use crate::errors::{error, tool_error};
use crate::flist::FList;
use crate::paths::{many_paths, opt_path, path_bytes};
use crate::runtime::collective;
use mfu::find::expr::{self, Token};
use mfu::find::Primary;
use mfu::prelude::*;
use mfu::types::{Action, Rules};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::Arc;

/// A context whose events are kept, to hand `output` back.
fn collecting() -> (Context, Arc<Collect>) {
    let sink = Arc::new(Collect::default());
    (Context::new(sink.clone()), sink)
}

/// Run `tool` collectively and turn its report into a dict (or its error into `mfu.Error`).
fn run_tool<'py, O, R>(
    py: Python<'py>,
    options: &O,
    sink: &Collect,
    tool: fn(&dyn Comm, &O) -> Result<R, Error>,
) -> PyResult<Bound<'py, PyDict>>
where
    O: Sync,
    R: ToolReport + Send,
{
    let report = collective(py, |comm| tool(comm, options))?.map_err(|e| tool_error(&e))?;
    let json = serde_json::to_string(&report)
        .map_err(|e| error(format!("report: {e}"), None, Some("encode the report")))?;
    let dict = py
        .import("json")?
        .call_method1("loads", (json,))?
        .cast_into::<PyDict>()?;
    dict.set_item("status", report.status() as u8)?;
    let output = sink.output.lock().map(|o| o.clone()).unwrap_or_default();
    dict.set_item("output", PyBytes::new(py, &output))?;
    Ok(dict)
}

/// Include/exclude rules from lists of globs (rsync-like, as `--exclude`/`--include`);
/// includes are tried first.
fn rules(include: Option<Vec<String>>, exclude: Option<Vec<String>>) -> PyResult<Rules> {
    let mut rules = Rules::default();
    let given = [(Action::Include, include), (Action::Exclude, exclude)];
    for (action, patterns) in given {
        for p in patterns.into_iter().flatten() {
            rules
                .push_glob(action, &p)
                .map_err(|e| error(e, None, None))?;
        }
    }
    Ok(rules)
}

/// What a tool that walks or reads a list acts on: the paths given (a path or an iterable of
/// them), or this rank's part of an FList, handed over in memory (no file is written).
fn input_of(obj: &Bound<'_, PyAny>) -> PyResult<mfu::Input> {
    match obj.extract::<PyRef<'_, FList>>() {
        Ok(l) => Ok(mfu::Input::List(l.local().clone())),
        Err(_) => Ok(mfu::Input::Paths(many_paths(obj)?)),
    }
}

/// Copy `sources` (a path or a list of them) to `dest`, as `mfu-rs cp` (dcp) does: a source
/// with a trailing `/` copies its contents. `preserve` keeps owner, mode, times and extended
/// attributes; `exclude`/`include` are lists of globs (rsync-like). Collective.
#[pyfunction]
#[pyo3(signature = (sources, dest, *, preserve=false, dereference=false, sparse=false, exclude=None, include=None))]
#[allow(clippy::too_many_arguments)]
pub fn cp<'py>(
    py: Python<'py>,
    sources: &Bound<'py, PyAny>,
    dest: &Bound<'py, PyAny>,
    preserve: bool,
    dereference: bool,
    sparse: bool,
    exclude: Option<Vec<String>>,
    include: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (context, sink) = collecting();
    let mut o = mfu::cp::Options::new(&many_paths(sources)?, path_bytes(dest)?);
    o.io.preserve = preserve;
    o.io.sparse = sparse;
    o.dereference = dereference;
    o.rules = rules(include, exclude)?;
    o.context = context;
    run_tool(py, &o, &sink, mfu::cp::run)
}

/// Make `dest` like `src`, as `mfu-rs sync` (dsync, like `rsync -a SRC/ DEST/`): copy what
/// differs (size and mtime, or the bytes with `contents`), fix metadata, and with `delete`
/// remove what `src` lacks. `dryrun` only plans (the plan is in `output`). Collective.
#[pyfunction]
#[pyo3(signature = (src, dest, *, dryrun=false, delete=false, contents=false, dereference=false, link_dest=None, exclude=None, include=None))]
#[allow(clippy::too_many_arguments)]
pub fn sync<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dest: &Bound<'py, PyAny>,
    dryrun: bool,
    delete: bool,
    contents: bool,
    dereference: bool,
    link_dest: Option<&Bound<'py, PyAny>>,
    exclude: Option<Vec<String>>,
    include: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (context, sink) = collecting();
    let mut o = mfu::sync::Options::new(path_bytes(src)?, path_bytes(dest)?);
    o.dryrun = dryrun;
    o.delete = delete;
    o.contents = contents;
    o.dereference = dereference;
    o.link_dest = opt_path(link_dest)?;
    o.rules = rules(include, exclude)?;
    o.context = context;
    run_tool(py, &o, &sink, mfu::sync::run)
}

/// Remove `targets`, as `mfu-rs rm` (drm): a path or a list of paths (each with everything
/// below it), or an FList (exactly its entries; a directory goes only if the list names all it
/// holds). `dryrun` only lists what would go (in `output`). `match`/`exclude` are regexes on
/// the path relative to its root (the basename with `name=True`). An FList is handed to the
/// tool in memory; `tmpdir` is accepted for older scripts and no longer used (no temporary
/// list file is written). Collective.
#[pyfunction]
#[pyo3(signature = (targets, *, dryrun=false, r#match=None, exclude=None, name=false, aggressive=false, traceless=false, one_file_system=false, output=None, tmpdir=None))]
#[allow(clippy::too_many_arguments)]
pub fn rm<'py>(
    py: Python<'py>,
    targets: &Bound<'py, PyAny>,
    dryrun: bool,
    r#match: Option<String>,
    exclude: Option<String>,
    name: bool,
    aggressive: bool,
    traceless: bool,
    one_file_system: bool,
    output: Option<&Bound<'py, PyAny>>,
    tmpdir: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (context, sink) = collecting();
    let mut o = mfu::rm::Options::default();
    // Accepted so that scripts that pass it still run: no list file is written any more.
    let _ = tmpdir;
    o.input = input_of(targets)?;
    o.dryrun = dryrun;
    o.matching = r#match;
    o.exclude = exclude;
    o.name = name;
    o.aggressive = aggressive;
    o.traceless = traceless;
    o.one_file_system = one_file_system;
    o.output = opt_path(output)?;
    o.context = context;
    run_tool(py, &o, &sink, mfu::rm::run)
}

/// Create the archive `archive` from `paths`, as `mfu-rs tar -c` (dtar): a POSIX pax archive
/// with dtar's index, written in parallel and renamed into place when complete. Paths are
/// taken relative to `chdir` (default: the current directory). `zstd=True` makes a seekable
/// zstd archive. Collective.
#[pyfunction]
#[pyo3(signature = (archive, paths, *, chdir=None, zstd=false, zstd_level=3, xattrs=false, exclude=None, include=None))]
#[allow(clippy::too_many_arguments)]
pub fn tar_create<'py>(
    py: Python<'py>,
    archive: &Bound<'py, PyAny>,
    paths: &Bound<'py, PyAny>,
    chdir: Option<&Bound<'py, PyAny>>,
    zstd: bool,
    zstd_level: i32,
    xattrs: bool,
    exclude: Option<Vec<String>>,
    include: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (context, sink) = collecting();
    let mode = mfu::tar::Mode::Create {
        paths: many_paths(paths)?,
    };
    let mut o = mfu::tar::Options::new(mode, bytes_os(&path_bytes(archive)?));
    o.chdir = opt_path(chdir)?;
    o.zstd = zstd;
    o.zstd_level = zstd_level;
    o.xattrs = xattrs;
    o.rules = rules(include, exclude)?;
    o.context = context;
    run_tool(py, &o, &sink, mfu::tar::run)
}

/// Extract the archive `archive` into `dest` (which must exist; default: the current
/// directory), as `mfu-rs tar -x` (dtar), in parallel, never writing outside `dest`.
/// Collective.
#[pyfunction]
#[pyo3(signature = (archive, dest=None, *, preserve_owner=false, preserve_perms=false, xattrs=false))]
pub fn tar_extract<'py>(
    py: Python<'py>,
    archive: &Bound<'py, PyAny>,
    dest: Option<&Bound<'py, PyAny>>,
    preserve_owner: bool,
    preserve_perms: bool,
    xattrs: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (context, sink) = collecting();
    let mut o = mfu::tar::Options::new(mfu::tar::Mode::Extract, bytes_os(&path_bytes(archive)?));
    o.chdir = opt_path(dest)?;
    o.preserve_owner = preserve_owner;
    o.preserve_perms = preserve_perms;
    o.xattrs = xattrs;
    // What the command line's -q leaves out: notices about the index are not failures.
    o.index_notices = false;
    o.context = context;
    run_tool(py, &o, &sink, mfu::tar::run)
}

/// Compare `src` with `dest`, as `mfu-rs cmp` (dcmp): every path's type, size, times, owner,
/// permissions and bytes (`lite=True`: size and mtime only). `status` is 1 when the trees
/// differ; `differing`, `only_src`, `only_dest` count how. Collective.
#[pyfunction]
#[pyo3(signature = (src, dest, *, lite=false))]
pub fn cmp<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dest: &Bound<'py, PyAny>,
    lite: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (context, sink) = collecting();
    let mut o = mfu::cmp::Options::new(path_bytes(src)?, path_bytes(dest)?);
    o.lite = lite;
    o.context = context;
    run_tool(py, &o, &sink, mfu::cmp::run)
}

/// Search `targets` (a path, a list of paths, or an FList, handed over in memory; `tmpdir` is
/// accepted for older scripts and no longer used) as `mfu-rs find` (dfind) does, with the
/// tests of `FList.filter` as keywords (all must pass). With `output`, the matches are
/// written there as a list (v4 when they carry metadata, text with `text=True`); without it,
/// the report's `matches` holds them (rank 0: all, in list order; other ranks: empty).
/// Collective.
#[pyfunction]
#[pyo3(signature = (targets, *, output=None, text=false, maxdepth=None, tmpdir=None, **tests))]
pub fn find<'py>(
    py: Python<'py>,
    targets: &Bound<'py, PyAny>,
    output: Option<&Bound<'py, PyAny>>,
    text: bool,
    maxdepth: Option<usize>,
    tmpdir: Option<&Bound<'py, PyAny>>,
    tests: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (context, sink) = collecting();
    let mut o = mfu::find::Options::default();
    // Accepted so that scripts that pass it still run: no list file is written any more.
    let _ = tmpdir;
    o.input = input_of(targets)?;
    let now = collective(py, |comm| comm.max(crate::filter::now_nanos() as u64))?;
    let groups = crate::filter::tests(py, tests, i128::from(now))?.into_groups();
    let mut tokens = Vec::new();
    for group in groups {
        let alternatives = group.len() > 1;
        if alternatives {
            tokens.push(Token::Open);
        }
        for (i, t) in group.into_iter().enumerate() {
            if i > 0 {
                tokens.push(Token::Or);
            }
            tokens.push(Token::Leaf(Primary::Test(t)));
        }
        if alternatives {
            tokens.push(Token::Close);
        }
    }
    o.output = opt_path(output)?;
    let listing = o.output.is_none();
    if listing {
        // Print with NUL ends: names may hold newlines.
        tokens.push(Token::Leaf(Primary::Print { nul: true }));
    }
    o.expr = expr::parse(tokens).map_err(|e| error(format!("find: {}", e.0), None, None))?;
    o.text = text;
    o.maxdepth = maxdepth;
    o.context = context;
    let report = run_tool(py, &o, &sink, mfu::find::run)?;
    let matches = PyList::empty(py);
    if listing {
        let out = sink.output.lock().map(|o| o.clone()).unwrap_or_default();
        for path in out.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            matches.append(bytes_os(path))?;
        }
    }
    report.set_item("matches", matches)?;
    Ok(report)
}

/// Path bytes as an `OsStr` (for the APIs that take one; str in Python, surrogate-escaped).
fn bytes_os(b: &[u8]) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(b)
}
