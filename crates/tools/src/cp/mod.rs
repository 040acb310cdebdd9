//! `mfu-rs cp` (dcp): copy files and trees in parallel, with cp's and rsync's path rules.
//!
//! ```no_run
//! // `mfu-rs cp -p src/ dst` from Rust, on the threads of this process:
//! let mut options = mfu::cp::Options::new(&["src/"], "dst");
//! options.io.preserve = true;
//! let reports = steal::local::run(2, |comm| mfu::cp::run(comm, &options));
//! let report = reports[0].as_ref().expect("usage error");
//! assert_eq!(report.failed, 0);
//! ```
//!
//! The phases of [`run`]: setup (identity, path rules), list (walk or read `input`, filter,
//! group hard links, spread), copy (the copy engine), report.

use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::copy::drive::IoOptions;
use crate::engine::copy::{links, Mapping, Plan};
use crate::engine::input::{Input, Listed};
use crate::engine::select::Rules;
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use flist::path::{basename, is_prefix, normalize};
use flist::restat::{restat, Which};
use flist::walk::{stat_path, walk, WalkOptions};
use flist::{Detail, FileList, FileType, Meta};
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::Instant;
use steal::{Comm, CommExt};

/// What `cp` copies and how. [`Options::new`] gives the command line's defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// The sources as given (relative to the current directory or absolute). A trailing `/`
    /// on a directory copies its contents into `dest` instead of the directory itself.
    pub sources: Vec<Vec<u8>>,
    /// The destination: created as the copy when absent; an existing directory receives
    /// `DEST/NAME` for each source. Several sources need a directory.
    pub dest: Vec<u8>,
    /// Copy the entries of this list (a v3/v4, text, plain or NUL-separated file, or a list
    /// in memory; or the walk of other paths) instead of walking the sources; entries are
    /// stat'ed again and only those under a source are kept.
    pub input: Option<Input>,
    /// Follow symbolic links in sources (copy what they point to); default: copy links as links.
    pub dereference: bool,
    /// Copy as this user id (needs root): the whole process switches.
    pub uid: Option<u32>,
    /// Copy as this group id (needs root): the whole process switches.
    pub gid: Option<u32>,
    /// How data and metadata move (sizes, holes, `O_DIRECT`, preservation, Lustre layouts).
    pub io: IoOptions,
    /// Include/exclude rules, matched against paths relative to each source.
    pub rules: Rules,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Copy `sources` to `dest` with the command line's defaults: links copied as links,
    /// nothing preserved, adaptive buffer and automatic chunk sizes, no filters, events
    /// discarded.
    pub fn new<S: AsRef<[u8]>>(sources: &[S], dest: impl AsRef<[u8]>) -> Options {
        Options {
            sources: sources.iter().map(|s| s.as_ref().to_vec()).collect(),
            dest: dest.as_ref().to_vec(),
            input: None,
            dereference: false,
            uid: None,
            gid: None,
            io: IoOptions::default(),
            rules: Rules::default(),
            context: Context::default(),
        }
    }
}

/// What a `cp` run did: counts summed over all ranks (the same on every rank).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Entries the copy set out to create (listed and selected, hard links included): what a
    /// stopped run's `done` counts towards.
    pub planned: u64,
    /// Bytes of the regular files planned: what a stopped run's `done` counts towards when
    /// there are any (files are created before their data lands: entries made say little).
    pub planned_bytes: u64,
    /// The same command run again copies to the same places: DEST was an existing directory
    /// (or every source a non-directory). When this run created DEST as the copy of a
    /// directory, a rerun would copy into it (`DEST/NAME`), as GNU cp does: then a stop
    /// says how to finish with sync instead of "run the same command again".
    #[serde(skip)]
    pub same_again: bool,
    /// Regular files written.
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Symbolic links created.
    pub symlinks: u64,
    /// Hard links created.
    pub hardlinks: u64,
    /// Fifos, sockets and devices created.
    pub others: u64,
    /// File data bytes written.
    pub bytes: u64,
    /// Partial files of an interrupted copy resumed from their journals: only their missing
    /// chunks were copied.
    pub resumed: u64,
    /// Bytes of resumed files not copied again.
    pub resumed_bytes: u64,
    /// Entries that can't be recreated here (device nodes without privilege); each named.
    pub skipped: u64,
    /// Items whose copy failed (each counted once, named as an error event).
    pub failed: u64,
    /// Entries that could not be listed (walk errors, or `input` entries that could not be
    /// stat'ed); each named.
    pub list_failed: u64,
    /// The list is incomplete (walk errors or an interrupted walk).
    pub list_incomplete: bool,
    /// Wall-clock seconds from the end of the setup to the end of the copy.
    pub seconds: f64,
    /// A stop request cut the run short.
    pub interrupted: bool,
    /// This process's sample of the failure messages.
    pub failures: Vec<String>,
    /// With `--verify`: how the written data was read back.
    pub verify: Option<crate::engine::verify::Summary>,
    /// With `--manifest`: the manifest written (or not).
    pub manifest: Option<crate::engine::manifest::Summary>,
}

impl Report {
    /// Entries created: files, directories, links, hard links and others.
    pub fn items(&self) -> u64 {
        self.dirs + self.files + self.symlinks + self.hardlinks + self.others
    }
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.items(),
            bytes: self.bytes,
            failed: self.failed + self.list_failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        let listed = if self.list_incomplete || self.list_failed > 0 {
            Status::ItemsFailed
        } else {
            Status::Ok
        };
        let manifest = match &self.manifest {
            Some(m) if !m.written => Status::ItemsFailed,
            _ => Status::Ok,
        };
        listed
            .worst(manifest)
            .worst(Status::of_work(self.failed, self.skipped, self.interrupted))
    }
    /// Bytes of file data written of those planned (entries made, when no file holds data): a
    /// rerun of the same cp writes the copy again, resuming huge files from their journals.
    fn stopped(&self) -> Option<Stopped> {
        if !(self.interrupted && self.same_again) {
            return None;
        }
        Some(match self.planned_bytes {
            0 => Stopped {
                done: (self.items() + self.failed + self.skipped).min(self.planned),
                total: self.planned,
                what: "entries",
            },
            total => Stopped {
                done: (self.bytes + self.resumed_bytes).min(total),
                total,
                what: "bytes",
            },
        })
    }
}

/// Where the copy goes, decided from the path rules.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// (source root, destination root) pairs.
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Apply the path rules to `args` (already normalised sources with their original spelling, to
/// see trailing slashes). Errors are usage errors.
fn resolve(sources: &[(Vec<u8>, bool)], dest: &[u8], follow: bool) -> Result<Target, String> {
    let show = flist::path::display;
    let dest_meta = stat_path(dest, true).ok().map(|st| Meta::from_stat(&st));
    let dest_is_dir = dest_meta.is_some_and(|m| m.file_type() == FileType::Dir);
    if sources.len() > 1 && !dest_is_dir {
        return Err(format!(
            "{} is not a directory (several sources need a directory to go into)",
            show(dest)
        ));
    }
    if dest_meta.is_none() {
        crate::engine::setup::check_parent(dest)?;
    }
    let anchor = dest_anchor(dest);
    let mut pairs = Vec::new();
    for (given, contents) in sources {
        let src = &if *contents {
            named_dir(given)?
        } else {
            given.clone()
        };
        let st = stat_path(src, follow)
            .map_err(|e| format!("stat {}: {}", show(src), std::io::Error::from(e)))?;
        let src_is_dir = FileType::from_mode(st.st_mode) == FileType::Dir;
        let into = if dest_is_dir && !(*contents && src_is_dir) {
            let mut d = dest.to_vec();
            if d != b"/" {
                d.push(b'/');
            }
            d.extend_from_slice(basename(src));
            d
        } else {
            dest.to_vec()
        };
        if src_is_dir && (is_prefix(src, &into) || lands_inside(&st, &anchor)) {
            return Err(format!(
                "cannot copy the directory {} into itself ({})",
                show(src),
                show(&into)
            ));
        }
        if src_is_dir && !dest_is_dir && dest_meta.is_some() && into == dest {
            return Err(format!(
                "cannot overwrite the non-directory {} with the directory {}",
                show(dest),
                show(src)
            ));
        }
        pairs.push((src.clone(), into));
    }
    Ok(Target { pairs })
}

/// `SRC/`: the directory SRC names, following a symlink to one (as cp and rsync do: the slash
/// names the directory, not the link), as its real path; anything else is not a directory.
fn named_dir(src: &[u8]) -> Result<Vec<u8>, String> {
    let show = flist::path::display;
    let st = stat_path(src, true)
        .map_err(|e| format!("stat {}/: {}", show(src), std::io::Error::from(e)))?;
    if FileType::from_mode(st.st_mode) != FileType::Dir {
        return Err(format!(
            "stat {}/: {}",
            show(src),
            std::io::Error::from_raw_os_error(libc::ENOTDIR)
        ));
    }
    let link =
        stat_path(src, false).is_ok_and(|l| FileType::from_mode(l.st_mode) == FileType::Symlink);
    if !link {
        return Ok(src.to_vec());
    }
    std::fs::canonicalize(OsStr::from_bytes(src))
        .map(|p| p.into_os_string().into_vec())
        .map_err(|e| format!("resolve {}/: {e}", show(src)))
}

/// True when the destination anchor `anchor` ([`dest_anchor`]: the directory the copy is
/// made in, the only place where symlinks are followed) is the directory `src` (its stat) or
/// lies beneath it, whatever symlinks lead there: compared by (device, inode) from the
/// resolved directory up to `/`, not by spelling (`cp src lnk/copy` with `lnk -> src`).
fn lands_inside(src: &rustix::fs::Stat, anchor: &[u8]) -> bool {
    use rustix::fs::{Mode, OFlags};
    let start = anchor;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(mut dir) = flist::walk::open_long(start, flags) else {
        return false;
    };
    loop {
        let Ok(st) = rustix::fs::fstat(&dir) else {
            return false;
        };
        if (st.st_dev, st.st_ino) == (src.st_dev, src.st_ino) {
            return true;
        }
        let Ok(up) = rustix::fs::openat(&dir, c"..", flags, Mode::empty()) else {
            return false;
        };
        match rustix::fs::fstat(&up) {
            // `/` is its own parent.
            Ok(u) if (u.st_dev, u.st_ino) == (st.st_dev, st.st_ino) => return false,
            Ok(_) => dir = up,
            Err(_) => return false,
        }
    }
}

/// Where destination entries are reached beneath: DEST when it is a directory (the user named
/// it, so a symlink there is followed), else the directory DEST is made in. Below it nothing
/// is followed: `DEST/NAME` may already be a symlink to anywhere.
fn dest_anchor(dest: &[u8]) -> Vec<u8> {
    if crate::engine::setup::is_dir(dest) {
        dest.to_vec()
    } else {
        flist::path::parent(dest).to_vec()
    }
}

/// Run `cp` on this rank. Collective: every rank calls it with the same options and gets the
/// same report, or the same [`Error`] when nothing was copied (a usage or setup error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let target = setup(comm, options)?;
    let started = Instant::now();
    let (list, mut report) = list(comm, options, &target)?;
    report.same_again = !target
        .pairs
        .iter()
        .any(|(src, to)| *to == target.dest && crate::engine::setup::is_dir(src));
    copy(comm, options, &target, list, &mut report);
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = options.context.failures();
    Ok(report)
}

/// The copy's pairs and how destinations are reached, once the setup passed on every rank.
struct Setup {
    /// (source root, destination root) pairs.
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Source paths to destination paths.
    map: Mapping,
    /// The directory a manifest's paths are relative to: DEST, or DEST's parent when DEST is
    /// the copy of a single non-directory.
    base: Vec<u8>,
    /// DEST as given, absolute.
    dest: Vec<u8>,
}

/// Phase 1: switch identity (`uid`/`gid`) and apply the path rules. Collective.
fn setup(comm: &dyn Comm, o: &Options) -> Result<Setup, Error> {
    agree_setup(comm, crate::engine::setup::switch_identity(o.uid, o.gid))?;
    if o.sources.is_empty() {
        return agree_setup(comm, Err("no source to copy".to_string()));
    }
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let sources: Vec<(Vec<u8>, bool)> = o
        .sources
        .iter()
        .map(|b| (normalize(b, &cwd), b.len() > 1 && b.ends_with(b"/")))
        .collect();
    let dest = normalize(&o.dest, &cwd);
    let target = agree_setup(comm, resolve(&sources, &dest, o.dereference))?;
    // The manifest is renamed into place at the end: inside a tree being copied it would
    // replace a file just copied (or be replaced by one).
    let trees: Vec<(&str, &[u8])> = target
        .pairs
        .iter()
        .map(|(_, to)| ("destination", &to[..]))
        .collect();
    let outputs: Vec<(&str, &[u8])> =
        o.io.manifest
            .iter()
            .map(|m| ("--manifest", &m.path[..]))
            .collect();
    agree_setup(
        comm,
        crate::engine::outputs::refuse_inside(&outputs, &trees),
    )?;
    let mut map = Mapping::new(target.pairs.clone()).with_dest_anchors(vec![dest_anchor(&dest)]);
    if o.dereference {
        map = map.following_sources();
    }
    let single_file = match &target.pairs[..] {
        [(src, to)] => *to == dest && !crate::engine::setup::is_dir(src),
        _ => false,
    };
    let base = if single_file {
        flist::path::parent(&dest).to_vec()
    } else {
        dest.clone()
    };
    Ok(Setup {
        pairs: target.pairs,
        map,
        base,
        dest,
    })
}

/// Phase 2: walk the sources (or read `input`), apply the rules, group hard links and spread
/// the list over the ranks. Returns the copy's plan and a report holding the listing's
/// failures. Collective.
fn list(comm: &dyn Comm, o: &Options, target: &Setup) -> Result<(Plan, Report), Error> {
    let started = Instant::now();
    let context = &o.context;
    let mut report = Report::default();
    let roots: Vec<Vec<u8>> = target.pairs.iter().map(|p| p.0.clone()).collect();
    let list = match &o.input {
        Some(input) => {
            let read = read_input(comm, context, input, &roots, o.dereference);
            let (mut list, failures) = agree_setup(comm, read)?;
            report.list_failed = failures;
            crate::engine::select::apply_rules(&mut list, &o.rules, &target.map);
            list
        }
        None => {
            let walk_progress = context.progress(comm.rank(), "Walked");
            // The rules prune the walk: an excluded tree is not read.
            let prune = o.rules.pruner(&target.map);
            // cp writes no lists and prints no names.
            let walked = crate::engine::setup::walk_sources_pruned(
                comm,
                context,
                &roots,
                o.dereference,
                &walk_progress,
                false,
                prune.as_deref(),
            );
            report.list_failed = walked.errors.len() as u64;
            report.list_incomplete = !walked.complete;
            walked.list
        }
    };
    report.list_failed = comm.sum(report.list_failed);
    report.list_incomplete = comm.any(report.list_incomplete);
    let walk_secs = started.elapsed().as_secs_f64();
    let (list, links) = if o.dereference {
        (list, Vec::new())
    } else {
        let g = links::group(comm, list);
        (g.list, g.links)
    };
    let list = flist::distribute::spread(comm, list);
    let mut planned = [
        (list.len() + links.len()) as u64,
        (0..list.len())
            .filter(|&i| list.kind(i) == FileType::File)
            .filter_map(|i| list.meta(i).map(|m| m.size))
            .sum(),
    ];
    comm.allreduce(&mut planned, steal::ReduceOp::Sum);
    [report.planned, report.planned_bytes] = planned;
    let dirs = list.select((0..list.len()).filter(|&i| list.kind(i) == FileType::Dir));
    if context.verbose && comm.rank() == 0 {
        context.info(format!("Walked in {walk_secs:.3} s\n"));
    }
    let plan = Plan {
        create: list,
        links,
        dir_meta: dirs,
        // A rerun onto the same destination resumes huge files where their journals say.
        journals: crate::engine::copy::resume::Journals::Probe,
        ..Plan::default()
    };
    Ok((plan, report))
}

/// Phase 3: run the copy engine on the plan and add its counts to `report`. Collective.
fn copy(comm: &dyn Comm, o: &Options, target: &Setup, plan: Plan, report: &mut Report) {
    crate::engine::test_seam::after_listing(comm);
    let hint = resume_hint(&target.pairs, o.io.preserve);
    let mut io = o.io.clone();
    if let Some(m) = &mut io.manifest {
        m.base = target.base.clone();
    }
    let (copied, _, checked) =
        crate::engine::copy::drive::copy_checked(comm, &o.context, plan, &target.map, &io, &hint);
    report.files = copied.files;
    report.dirs = copied.dirs;
    report.symlinks = copied.symlinks;
    report.hardlinks = copied.hardlinks;
    report.others = copied.others;
    report.bytes = copied.bytes;
    report.resumed = copied.resumed;
    report.resumed_bytes = copied.resumed_bytes;
    report.skipped = copied.skipped;
    report.failed = copied.total_errors;
    report.interrupted = copied.interrupted;
    report.verify = checked.verify;
    if let (Some(m), Some(entries)) = (&io.manifest, checked.manifest) {
        let ok = report.status() == Status::Ok;
        report.manifest = Some(crate::engine::manifest::publish(
            comm, &o.context, m, entries, ok,
        ));
    }
}

/// How to finish an interrupted copy. With `-p` the files copied carry their sources' size and
/// mtime (an unfinished one never does), so sync of each pair copies only what is missing;
/// without it every copy has new times and sync would copy (and re-own) everything again.
fn resume_hint(pairs: &[(Vec<u8>, Vec<u8>)], preserve: bool) -> String {
    if !preserve {
        return "files copied so far carry new times, so `mfu-rs sync` would copy everything \
            again: rerun this cp to finish it"
            .to_string();
    }
    match pairs {
        [(src, dst)] => format!(
            "run `mfu-rs sync {} {}` to finish it: files already copied are kept",
            flist::path::display(src),
            flist::path::display(dst)
        ),
        _ => "run `mfu-rs sync SRC DEST/NAME` for each SRC to finish it: files already copied \
            are kept"
            .to_string(),
    }
}

/// `-i`: the list's entries under one of `roots`, stat'ed again (the list may be old). Returns
/// the records and the number of entries that could not be stat'ed (reported).
fn read_input(
    comm: &dyn Comm,
    context: &Context,
    input: &Input,
    roots: &[Vec<u8>],
    follow: bool,
) -> Result<(FileList, u64), String> {
    let walk_lite = |paths: &[Vec<u8>]| {
        let opts = WalkOptions {
            detail: Detail::Lite,
            noatime: &context.noatime,
            stop: Some(&context.stop),
            ..WalkOptions::default()
        };
        walk(comm, paths, &opts)
    };
    let (listed, walk_errors) = match input.list(comm, walk_lite).map_err(|e| e.message)? {
        Listed::Read(list) => (list, Vec::new()),
        Listed::Walked(w) => (w.list, w.errors),
    };
    let (mut listed, refused) = listed.refuse_dot_dot();
    listed.retain(|e| roots.iter().any(|r| is_prefix(r, e.path)));
    let (list, errors) = restat(listed, Which::All, follow);
    let errors: Vec<_> = walk_errors
        .into_iter()
        .chain(refused)
        .chain(errors)
        .collect();
    for e in &errors {
        context.error(e);
    }
    let failures = errors.len() as u64;
    Ok((list, failures))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().as_os_str().as_bytes().to_vec();
        let p = |s: &str| [t.as_slice(), b"/", s.as_bytes()].concat();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::create_dir(tmp.path().join("e")).unwrap();
        std::fs::write(tmp.path().join("f"), b"x").unwrap();
        let pairs = |srcs: &[(&str, bool)], dst: &str| {
            let s: Vec<_> = srcs.iter().map(|(a, c)| (p(a), *c)).collect();
            resolve(&s, &p(dst), false).map(|t| t.pairs)
        };
        assert_eq!(pairs(&[("f", false)], "new"), Ok(vec![(p("f"), p("new"))]));
        assert_eq!(pairs(&[("f", false)], "e"), Ok(vec![(p("f"), p("e/f"))]));
        assert_eq!(pairs(&[("d", false)], "e"), Ok(vec![(p("d"), p("e/d"))]));
        assert_eq!(pairs(&[("d", true)], "e"), Ok(vec![(p("d"), p("e"))]));
        assert_eq!(pairs(&[("d", false)], "new"), Ok(vec![(p("d"), p("new"))]));
        assert!(pairs(&[("d", false), ("f", false)], "f").is_err());
        assert!(pairs(&[("d", false)], "f").is_err());
        assert!(pairs(&[("d", false)], "d/sub").is_err());
        assert!(pairs(&[("f", false)], "missing/x").is_err());
        assert!(pairs(&[("missing", false)], "e").is_err());
    }
}
