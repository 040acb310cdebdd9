//! `mfu-rs stripe` (dstripe): restripe files on Lustre, or report their layouts.
//!
//! A file is restriped by copying it, in parallel chunks over all ranks, into a hidden sibling
//! created with the target layout, then one of two ways:
//!
//! - **Layout swap**, where the file system has it (Lustre; found per file by reading its data
//!   version, `LL_IOC_DATA_VERSION`, before the copy): as `lfs migrate` does, the sibling's
//!   layout is swapped with the file's (`LL_IOC_LOV_SWAP_LAYOUTS` with
//!   `SWAP_LAYOUTS_CHECK_DV1 | KEEP_MTIME | KEEP_ATIME`), so the file keeps its inode, its
//!   hard links and its open handles, and the sibling (now holding the old layout) is removed.
//!   A file whose data version moved during the copy is not swapped: it keeps its old layout
//!   and data and is named (exit 1). A hard-linked file is restriped once, through its first
//!   name. `lfs migrate` copies into a volatile (unnamed) file instead; a named sibling lets
//!   every rank write chunks of one big file, which an unnamed file open in one process
//!   cannot offer.
//! - **Rewrite** (the fallback where layouts cannot be swapped): the sibling is renamed over
//!   the original. Mode, owner, times (ns) and extended attributes are kept (Lustre's own
//!   `lustre.*` xattrs are not copied: they would pin the new file to the old OSTs). A file
//!   that changed while it was copied (size or mtime) keeps its old layout and is reported; a
//!   hard-linked file is skipped (renaming would split it from its other names).
//!
//! The report counts the files of each way.
//!
//! The tree may change between the walk and the rewrite (a directory swapped for a symlink to
//! anywhere). Every file is reached from its PATH's directory, opened before the walk, without
//! following symlinks ([`flist::beneath`]): its layout is read through an `O_NOFOLLOW` open in
//! its parent, it must still be the inode walked before it is copied, and the rewritten
//! sibling is renamed over it with one `renameat` in that same parent directory descriptor,
//! after checking (dev, ino, size, mtime) again. A file whose path changed keeps its old
//! layout and is named (exit 1). The copy into the sibling is the copy engine's
//! (`crate::engine::copy`), which creates destinations without following symlinks.

use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::copy::drive::IoOptions;
use crate::engine::copy::meta::XattrPolicy;
use crate::engine::copy::{Mapping, Plan};
use crate::engine::lustre::{LustreHandle, StripeOptions};
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use flist::at::At;
use flist::atomic::Replace;
use flist::beneath::{explain, Roots};
use flist::path::{display, normalize};
use flist::{FileList, FileType, ItemError, Meta};
use lustre_sys::policy::{self, Decision};
use lustre_sys::Layout;
use rustix::fd::AsFd;
use rustix::fs::OFlags;
use std::collections::{HashMap, HashSet};
use std::io;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::typed::ByteStrings;
use steal::{Comm, CommExt};

/// One mebibyte, the default stripe size.
const MIB: u64 = 1 << 20;

/// What `stripe` restripes (or reports) and how. [`Options::new`] gives the command line's
/// defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// Files and directories (walked) to restripe; each must be on Lustre.
    pub paths: Vec<Vec<u8>>,
    /// Stripe count: N OSTs, -1 all, 0 the file-system default; `None`: by file size (1
    /// stripe below 1 GiB, floor(sqrt(GiB)) + 1 above, at most the OST count).
    pub count: Option<i32>,
    /// Stripe size in bytes (a multiple of 64 KiB; rounded up); default 1 MiB.
    pub size: u64,
    /// Only files at least this many bytes big.
    pub minsize: Option<u64>,
    /// Report each file's layout (as output lines, [`report_line`]) and change nothing.
    pub report: bool,
    /// The Lustre calls (the real ones by default).
    pub api: LustreHandle,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Restripe `paths` by the size policy with 1 MiB stripes (the command line's defaults).
    pub fn new<S: AsRef<[u8]>>(paths: &[S]) -> Options {
        Options {
            paths: paths.iter().map(|p| p.as_ref().to_vec()).collect(),
            count: None,
            size: MIB,
            minsize: None,
            report: false,
            api: LustreHandle::default(),
            context: Context::default(),
        }
    }
}

/// What a `stripe` run did: counts summed over all ranks.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The run only reported layouts (`report`).
    pub report: bool,
    /// Files whose layouts were reported (`report`).
    pub reported: u64,
    /// Files restriped (by layout swap or by rewrite).
    pub restriped: u64,
    /// Of `restriped`, by layout swap (`LL_IOC_LOV_SWAP_LAYOUTS`): the same inode, hard links
    /// and open handles kept.
    pub swapped: u64,
    /// Of `restriped`, by rewrite into a new inode renamed over the old one (where the file
    /// system cannot swap layouts; files with one link only).
    pub rewritten: u64,
    /// Further names of hard-linked files restriped by layout swap through their first name.
    pub other_names: u64,
    /// Bytes of the files to restripe.
    pub bytes: u64,
    /// Files that already had the layout asked for.
    pub already: u64,
    /// Hard-linked files skipped where layouts cannot be swapped (each named): restriping by
    /// rewrite would split them.
    pub linked: u64,
    /// Files that changed since they were listed, or while they were copied, and were left
    /// alone (each named).
    pub changed: u64,
    /// Files that failed (their copy, the rename, or reading their layout; each named); they
    /// keep their old layout.
    pub failed: u64,
    /// Entries that could not be walked (each named).
    pub list_failed: u64,
    /// The walk was incomplete.
    pub list_incomplete: bool,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// A stop request cut the run short.
    pub interrupted: bool,
    /// This process's sample of the failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: if self.report {
                self.reported
            } else {
                self.restriped
            },
            bytes: if self.report { 0 } else { self.bytes },
            failed: self.failed + self.changed + self.list_failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        let listed = if self.list_incomplete || self.list_failed > 0 || self.changed > 0 {
            Status::ItemsFailed
        } else {
            Status::Ok
        };
        listed.worst(Status::of_work(self.failed, self.linked, self.interrupted))
    }
}

/// One line of `--report`: `PATH: stripe count N, stripe size S` (or what else the layout is).
pub fn report_line(path: &[u8], layout: Option<&Layout>) -> Vec<u8> {
    let what = match layout {
        None => "no layout (not yet written, or not Lustre)".to_string(),
        Some(Layout::Composite(c)) => format!(
            "composite layout, {} components, {} mirrors",
            c.components.len(),
            c.mirror_count.max(1)
        ),
        Some(l) => format!(
            "stripe count {}, stripe size {}",
            l.stripe_count().unwrap_or(0),
            l.stripe_size().unwrap_or(0)
        ),
    };
    let mut out = path.to_vec();
    out.extend_from_slice(format!(": {what}\n").as_bytes());
    out
}

/// Check that every PATH is on Lustre (else the one-line reason) and normalise them.
fn check_paths(api: &LustreHandle, paths: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let mut out = Vec::new();
    if paths.is_empty() {
        return Err("no PATH to restripe".to_string());
    }
    for p in paths {
        let path = normalize(p, &cwd);
        match api.is_lustre(flist::path::as_path(&path)) {
            Ok(true) => out.push(path),
            Ok(false) => {
                return Err(format!(
                    "{} is not on Lustre: striping needs a Lustre file system (nothing changed)",
                    display(&path)
                ))
            }
            Err(e) => return Err(format!("statfs {}: {e}", display(&path))),
        }
    }
    Ok(out)
}

/// The layout of `path` as the file system reports it (reached beneath its root).
fn layout_of(api: &LustreHandle, roots: &Roots, path: &[u8]) -> io::Result<Option<Layout>> {
    let at = roots.at(path)?;
    let fd = at.open(OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, 0)?;
    api.layout_of(rustix::fd::AsFd::as_fd(&fd))
}

/// `Ok` when `path`, reached beneath its root without following symlinks, is still the inode
/// walked (`walked`); otherwise why not.
fn still_walked(roots: &Roots, path: &[u8], walked: &Meta) -> Result<(), String> {
    let now = roots
        .at(path)
        .and_then(|a| a.lstat())
        .map_err(|e| format!("stat: {}", explain(e)))?;
    if (now.st_dev, now.st_ino) != (walked.dev, walked.ino) {
        return Err(
            "changed since it was listed (another file is at its path now): it is left alone"
                .to_string(),
        );
    }
    Ok(())
}

/// Run `stripe` on this rank. Collective: every rank calls it with the same options and gets
/// the same report, or the same [`Error`] when nothing was changed (a PATH not on Lustre).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let o = options;
    let context = &o.context;
    let started = Instant::now();
    let roots = agree_setup(comm, check_paths(&o.api, &o.paths))?;
    let mut report = Report {
        report: o.report,
        ..Report::default()
    };
    // Opened before the walk, so that what is rewritten is reached from the directories walked.
    let opened = Roots::open_dirs(roots.iter().map(|r| r.as_slice()));
    let files = list(comm, o, &roots, &mut report);
    if o.report {
        report_layouts(comm, o, &opened, &files, &mut report);
    } else {
        restripe(comm, o, &roots, &opened, &files, &mut report);
    }
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = context.failures();
    Ok(report)
}

/// Phase 1: walk the PATHs and keep the regular files at least `minsize` big, spread over the
/// ranks. Temporaries ([`flist::atomic`]: this tool's siblings, another tool's output being
/// written) are left alone: renaming over one would swap a file under the program writing it.
/// Collective.
fn list(comm: &dyn Comm, o: &Options, roots: &[Vec<u8>], report: &mut Report) -> FileList {
    let progress = o.context.progress(comm.rank(), "Walked");
    let walked = crate::engine::setup::walk_sources(comm, &o.context, roots, false, &progress);
    crate::engine::test_seam::after_listing(comm);
    report.list_failed = comm.sum(walked.errors.len() as u64);
    report.list_incomplete = comm.any(!walked.complete);
    let min = o.minsize.unwrap_or(0);
    let list = walked.list;
    let files = list.select((0..list.len()).filter(|&i| {
        list.kind(i) == FileType::File
            && list.meta(i).is_some_and(|m| m.size >= min)
            && !flist::atomic::is_temp_name(flist::path::basename(list.path(i)))
    }));
    flist::distribute::spread(comm, files)
}

/// `report`: each file's layout as an output line, in rank order. Collective.
fn report_layouts(
    comm: &dyn Comm,
    o: &Options,
    opened: &Roots,
    files: &FileList,
    report: &mut Report,
) {
    let mut out = Vec::new();
    let (mut reported, mut failed) = (0u64, 0u64);
    for e in files.iter() {
        match layout_of(&o.api, opened, e.path) {
            Ok(l) => {
                out.extend_from_slice(&report_line(e.path, l.as_ref()));
                reported += 1;
            }
            Err(err) => {
                o.context
                    .error(format_args!("get layout {}: {err}", display(e.path)));
                failed += 1;
            }
        }
    }
    in_rank_order(comm, out, |b| o.context.output(b));
    report.reported = comm.sum(reported);
    report.failed = comm.sum(failed);
}

/// Phases 2 and 3: pick the files whose layout differs, copy each into its hidden sibling
/// with the new layout (the copy engine), and rename the complete ones over the originals.
/// Collective.
fn restripe(
    comm: &dyn Comm,
    o: &Options,
    roots: &[Vec<u8>],
    opened: &Roots,
    files: &FileList,
    report: &mut Report,
) {
    let context = &o.context;
    let stripe = StripeOptions {
        count: o.count,
        size: Some(o.size),
        api: o.api.clone(),
    };
    let overrides = stripe.overrides();
    let osts = o
        .api
        .ost_count(flist::path::as_path(&roots[0]))
        .unwrap_or(0);
    // Skip what already has the target layout. The rest is restriped by layout swap where the
    // file system has it (its data version read now, before the copy), else by rewrite,
    // which hard-linked files are not.
    let mut already = 0u64;
    let mut linked = 0u64;
    let mut moved = 0u64;
    let mut versions: HashMap<Vec<u8>, u64> = HashMap::new();
    let todo = files.select((0..files.len()).filter(|&i| {
        let (path, m) = (files.path(i), &files.meta(i).expect("stat list"));
        if let Err(why) = still_walked(opened, path, m) {
            context.error(format_args!("{}: {why}", display(path)));
            moved += 1;
            return false;
        }
        let want = policy::choose(m.size, osts, None, &overrides, o.size);
        let have = layout_of(&o.api, opened, path).ok().flatten();
        if matches(have.as_ref(), want, osts) {
            already += 1;
            return false;
        }
        if let Some(version) = data_version(&o.api, opened, path) {
            versions.insert(path.to_vec(), version);
            return true;
        }
        if m.nlink > 1 {
            context.error(format_args!(
                "skipped {}: it has {} hard links, the file system cannot swap layouts, and \
                 restriping by rewrite would split them",
                display(path),
                m.nlink
            ));
            linked += 1;
            return false;
        }
        true
    }));
    let (todo, other_names) = one_name_per_inode(comm, todo);
    let (todo, map, refused) = clear_siblings(comm, context, opened, roots, todo);
    let total_bytes = comm.sum(todo.iter().filter_map(|e| e.meta).map(|m| m.size).sum());
    let plan = Plan {
        create: todo.clone(),
        ..Plan::default()
    };
    let io = IoOptions {
        preserve: true,
        xattrs: Some(XattrPolicy::NonLustre),
        stripe,
        ..IoOptions::default()
    };
    let (copied, _) = crate::engine::copy::drive::copy_and_report(
        comm,
        context,
        plan,
        &map,
        &io,
        "files not yet restriped keep their old layout; run the same command again to finish",
    );
    // Rename over the originals what was copied completely, on every rank.
    let failed_paths = ByteStrings(copied.errors.iter().map(|e| e.path.clone()).collect());
    let failed_paths: HashSet<Vec<u8>> = comm
        .all_gather(&failed_paths)
        .into_iter()
        .flat_map(|b| b.0)
        .collect();
    let (mut by_swap, mut by_rewrite) = (0u64, 0u64);
    // A file whose sibling name was taken was not restriped: a failure.
    let mut not_swapped = refused;
    for e in todo.iter() {
        let sibling = map.dest(e.path);
        let walked = e.meta.expect("stat list");
        let ok = !copied.interrupted
            && !failed_paths.contains(e.path)
            && !failed_paths.contains(&sibling);
        let result = if !ok {
            Err("not copied completely; it keeps its old layout".to_string())
        } else if let Some(&version) = versions.get(e.path) {
            match swap(&o.api, opened, e.path, &sibling, &walked, version) {
                Ok(()) => {
                    by_swap += 1;
                    // The sibling now holds the old layout and the old objects.
                    if let Err(err) = opened.at(&sibling).and_then(|a| a.remove(false)) {
                        context.error(ItemError::new(
                            &sibling,
                            "restriped its file by layout swap, but could not remove the old \
                             layout's copy",
                            err,
                        ));
                        not_swapped += 1;
                    }
                    continue;
                }
                Err(Swap::Changed) => {
                    let _ = opened.at(&sibling).and_then(|a| a.remove(false));
                    context.error(format_args!(
                        "{}: it changed while it was copied (its data version moved): not \
                         restriped, it keeps its old layout and data",
                        display(e.path)
                    ));
                    moved += 1;
                    continue;
                }
                Err(Swap::Unsupported(why)) if walked.nlink <= 1 => {
                    replace(opened, e.path, &sibling, &walked)
                        .map_err(|r| format!("layout swap not supported ({why}); rewrite: {r}"))
                }
                Err(Swap::Unsupported(why)) => Err(format!(
                    "layout swap not supported ({why}), and restriping by rewrite would split \
                     its {} hard links: it keeps its old layout",
                    walked.nlink
                )),
                Err(Swap::Failed(why)) => Err(why),
            }
        } else {
            replace(opened, e.path, &sibling, &walked)
        };
        match result {
            Ok(()) => by_rewrite += 1,
            Err(why) => {
                let _ = opened.at(&sibling).and_then(|a| a.remove(false));
                if ok {
                    context.error(format_args!("{}: {why}", display(e.path)));
                }
                not_swapped += 1;
            }
        }
    }
    let mut v = [by_swap, by_rewrite, already, linked, moved, not_swapped];
    comm.allreduce(&mut v, steal::ReduceOp::Sum);
    let [by_swap, by_rewrite, already, linked, moved, not_swapped] = v;
    report.restriped = by_swap + by_rewrite;
    report.swapped = by_swap;
    report.rewritten = by_rewrite;
    report.other_names = other_names;
    report.bytes = total_bytes;
    report.already = already;
    report.linked = linked;
    report.changed = moved;
    // A file not renamed failed (its copy or the rename did), unless a stop request cut the
    // copy short (the run is then interrupted, not failed).
    report.failed = if copied.interrupted {
        copied.total_errors
    } else {
        not_swapped.max(copied.total_errors)
    };
    report.interrupted = copied.interrupted;
}

/// The siblings of this run, named by rank 0's host and pid (one temporary naming for every
/// tool, [`flist::atomic`]), and the files of `todo` whose sibling is free. What killed runs on
/// this host left at a file's temporary names is removed first and named; anything else at
/// this run's sibling name (a file a user or another program made) is never written or
/// removed: its file keeps its layout and is named (exit 1). Collective.
fn clear_siblings(
    comm: &dyn Comm,
    context: &Context,
    opened: &Roots,
    roots: &[Vec<u8>],
    todo: FileList,
) -> (FileList, Mapping, u64) {
    let (host, pid): (Vec<u8>, u32) =
        comm.bcast_with(0, || (flist::atomic::host(), std::process::id()));
    let map = Mapping::siblings(roots.to_vec(), &host, pid);
    let free = todo.select((0..todo.len()).filter(|&i| {
        let path = todo.path(i);
        let sibling = map.dest(path);
        let at = match opened.at(&sibling) {
            Ok(at) => at,
            Err(e) => {
                context.error(ItemError::new(&sibling, "open the directory of", e));
                return false;
            }
        };
        if let Ok(dir) = rustix::fs::openat(
            at.dir(),
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) {
            let base = flist::path::basename(path);
            // A sibling carries its file's owner (the copy keeps it): run as root, a killed
            // run's sibling of this file is owned by the file's owner.
            let owner = rustix::process::geteuid()
                .is_root()
                .then(|| todo.meta(i).map(|m| m.uid))
                .flatten();
            for (name, removed) in flist::atomic::remove_stale_owned(dir.as_fd(), base, owner) {
                let stale = flist::atomic::beside(path, &name);
                match removed {
                    Ok(()) => context.error(format_args!(
                        "removed {}, the partial copy of an earlier run that was killed",
                        display(&stale)
                    )),
                    Err(e) => context.error(ItemError::new(
                        &stale,
                        "remove the partial copy of an earlier run",
                        e,
                    )),
                }
            }
        }
        match at.lstat() {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
            Err(e) => {
                context.error(ItemError::new(&sibling, "look up the temporary name", e));
                false
            }
            Ok(_) => {
                context.error(format_args!(
                    "{}: not restriped: {} is in the way (not ours: left as it is)",
                    display(path),
                    display(&sibling)
                ));
                false
            }
        }
    }));
    let refused = (todo.len() - free.len()) as u64;
    (free, map, refused)
}

/// The data version of `path` (reached beneath its root, opened for reading and writing as a
/// swap needs), or `None` when its file system cannot swap layouts (`ENOTTY` off Lustre) or
/// it cannot be opened so: it is then restriped by rewrite, if at all.
fn data_version(api: &LustreHandle, roots: &Roots, path: &[u8]) -> Option<u64> {
    let fd = roots
        .at(path)
        .and_then(|at| at.open(OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC, 0))
        .ok()?;
    api.data_version(fd.as_fd()).ok()
}

/// `todo` without the further names of a hard-linked file (every name of it is walked): its
/// inode is restriped once, through its first name over all ranks. Returns the rest and the
/// number of names left out (over all ranks). Collective.
fn one_name_per_inode(comm: &dyn Comm, todo: FileList) -> (FileList, u64) {
    let linked: Vec<usize> = (0..todo.len())
        .filter(|&i| todo.meta(i).is_some_and(|m| m.nlink > 1))
        .collect();
    let inodes: Vec<(u64, u64)> = linked
        .iter()
        .map(|&i| todo.meta(i).map(|m| (m.dev, m.ino)).expect("stat list"))
        .collect();
    let paths = ByteStrings(linked.iter().map(|&i| todo.path(i).to_vec()).collect());
    let mut first: HashMap<(u64, u64), Vec<u8>> = HashMap::new();
    for (inodes, paths) in comm.all_gather(&(inodes, paths)) {
        for (inode, path) in inodes.into_iter().zip(paths.0) {
            let kept = first.entry(inode).or_insert_with(|| path.clone());
            if path < *kept {
                *kept = path;
            }
        }
    }
    let keep = todo.select((0..todo.len()).filter(|&i| {
        todo.meta(i)
            .filter(|m| m.nlink > 1)
            .is_none_or(|m| first.get(&(m.dev, m.ino)).map(Vec::as_slice) == Some(todo.path(i)))
    }));
    let left_out = comm.sum((todo.len() - keep.len()) as u64);
    (keep, left_out)
}

/// Why a layout swap did not happen.
enum Swap {
    /// The file system or the file cannot swap layouts (`ENOTTY`, `EOPNOTSUPP`): why.
    Unsupported(String),
    /// The file's data changed since its data version was read (before the copy).
    Changed,
    /// Another failure: why.
    Failed(String),
}

/// Restripe `path` by swapping its layout with its restriped copy `sibling`, as `lfs migrate`
/// does: the data version read before the copy (`version`) must still be the file's (checked
/// here and again by the kernel, `SWAP_LAYOUTS_CHECK_DV1`, atomically with the swap); each
/// file keeps its times. The inode stays, with its names, hard links and open handles; the
/// sibling gets the old layout (the caller removes it). `path` must still be the inode walked.
fn swap(
    api: &LustreHandle,
    roots: &Roots,
    path: &[u8],
    sibling: &[u8],
    walked: &Meta,
    version: u64,
) -> Result<(), Swap> {
    let rw = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let failed = |what: &str, e: io::Error| Swap::Failed(format!("{what}: {}", explain(e)));
    let file = roots
        .at(path)
        .and_then(|at| at.open(rw, 0))
        .map_err(|e| failed("open", e))?;
    let now = rustix::fs::fstat(&file).map_err(|e| failed("stat", e.into()))?;
    let now = Meta::from_stat(&now);
    if (now.dev, now.ino) != (walked.dev, walked.ino) {
        return Err(Swap::Failed(
            "changed since it was listed (another file is at its path now): it is left alone"
                .to_string(),
        ));
    }
    let why = |e: io::Error| match lustre_sys::os_errno(&e) {
        Some(libc::ENOTTY | libc::EOPNOTSUPP) => Swap::Unsupported(e.to_string()),
        Some(libc::EAGAIN) => Swap::Changed,
        _ => Swap::Failed(e.to_string()),
    };
    if api.data_version(file.as_fd()).map_err(why)? != version {
        return Err(Swap::Changed);
    }
    let copy = roots
        .at(sibling)
        .and_then(|at| at.open(rw, 0))
        .map_err(|e| failed("open the restriped copy", e))?;
    // The copy engine does not sync; the swap makes the copy the file's only data.
    rustix::fs::fsync(&copy).map_err(|e| failed("sync the restriped copy", e.into()))?;
    let flags = lustre_sys::SWAP_LAYOUTS_CHECK_DV1
        | lustre_sys::SWAP_LAYOUTS_KEEP_MTIME
        | lustre_sys::SWAP_LAYOUTS_KEEP_ATIME;
    api.swap_layouts(file.as_fd(), copy.as_fd(), version, 0, flags)
        .map_err(why)
}

/// Whether a file's layout `have` already is what `want` asks (`osts` resolves "all").
fn matches(have: Option<&Layout>, want: Decision, osts: u32) -> bool {
    let (Some(have), Decision::Set { count, size }) = (have, want) else {
        return false;
    };
    let count = match count {
        lustre_sys::STRIPE_COUNT_ALL if osts > 0 => osts as u16,
        c => c,
    };
    count != 0 && have.stripe_count() == Some(count) && have.stripe_size() == Some(size)
}

/// Rename `sibling` (a name in the same directory) over `path` if `path`, reached beneath its
/// root, is still the file that was copied (same inode, size and modification time as when
/// walked). Both names are looked up in one parent directory descriptor.
fn replace(roots: &Roots, path: &[u8], sibling: &[u8], walked: &Meta) -> Result<(), String> {
    let to = roots
        .at(path)
        .map_err(|e| format!("open parent: {}", explain(e)))?;
    let now = to.lstat().map_err(|e| format!("stat: {}", explain(e)))?;
    let now = Meta::from_stat(&now);
    if (now.dev, now.ino) != (walked.dev, walked.ino) {
        return Err(
            "changed since it was listed (another file is at its path now): it is left \
                    alone"
                .to_string(),
        );
    }
    if now.size != walked.size || (now.mtime, now.mtime_nsec) != (walked.mtime, walked.mtime_nsec) {
        return Err("it changed while it was copied; it keeps its old layout".to_string());
    }
    debug_assert_eq!(flist::path::parent(sibling), flist::path::parent(path));
    // The copy replaces the only other copy of the data: it is synced first (the copy engine
    // does not sync), renamed (flist::atomic's one rename), and its directory synced after.
    let by_path = to.name().contains(&b'/');
    let from = if by_path {
        // A PATH that is a file, reached by its path as the user named it: so is its sibling.
        Some(At::new(sibling).map_err(|e| format!("open parent: {}", explain(e)))?)
    } else {
        None
    };
    let (from_dir, from_name) = match &from {
        Some(from) => (from.dir(), from.name()),
        None => (to.dir(), flist::path::basename(sibling)),
    };
    rustix::fs::openat(
        from_dir,
        from_name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .and_then(|copy| rustix::fs::fsync(&copy))
    .map_err(|e| format!("sync the restriped copy: {e}; it keeps its old layout"))?;
    flist::atomic::rename_over(from_dir, from_name, to.dir(), to.name(), Replace::Overwrite)
        .map_err(|e| format!("rename the restriped copy over it: {e}"))?;
    let dir = if by_path {
        flist::walk::open_long(
            flist::path::parent(to.name()),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        )
    } else {
        // The parent is held O_PATH, which cannot be synced: open it for reading.
        rustix::fs::openat(
            to.dir(),
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
    };
    dir.and_then(|d| rustix::fs::fsync(&d))
        .map_err(|e| format!("restriped, but syncing its directory failed: {e}"))
}
