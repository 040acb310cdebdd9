//! `mfu-rs reln` (dreln): rewrite the targets of symbolic links after the tree they point into
//! moved.
//!
//! Every symbolic link under PATH (or named by `--input`) whose target is an absolute path
//! under OLDPATH, compared by component after lexical normalisation (`/a/b` is not a prefix of
//! `/a/bc`; `/a/b/../c` is `/a/c`, not under `/a/b`), gets NEWPATH plus the rest of its target,
//! or with `--relative` that path written relative to the link's directory. A target equal to
//! OLDPATH becomes NEWPATH. Relative targets are left alone, as dreln does: they name a place
//! relative to the link, which a move of the whole tree keeps.
//!
//! A link is reached from the PATH it was found under: its directory is opened beneath that
//! root without following symlinks (`flist::beneath`), so a directory swapped for a symlink
//! after the walk is named and skipped, never followed out of the tree. With `--relative`, the
//! new target is computed from the real location of that directory (the path the kernel gives
//! for the open directory, once per directory: `/home/u` may really be `/gpfs/home/u`, of
//! another depth), and checked to reach the file NEWPATH names before the link is replaced;
//! otherwise the link is kept and named.
//!
//! A link is replaced atomically: the new link is made under a temporary name in the same
//! directory, given the old link's owner (and with `--preserve` its times), then renamed over
//! the old one. At no moment is the name missing or half made.

use crate::engine::batches::run_batches;
use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::input::{Input, Listed};
use crate::engine::locks::lock;
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use flist::atomic::{Output, Replace};
use flist::beneath::Roots;
use flist::distribute::{hash_path, remap};
use flist::path::{basename, display, normalize, parent};
use flist::walk::{open_long, stat_path, walk, WalkOptions};
use flist::{Detail, FileList, FileType, ItemError, Meta};
use rustix::fd::{AsFd, AsRawFd, OwnedFd};
use rustix::fs::{AtFlags, Gid, OFlags, Uid};
use rustix::io::Errno;
use std::collections::HashMap;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::progress::Progress;
use steal::{Comm, CommExt, ReduceOp};

/// What `reln` is to rewrite, and where.
///
/// ```no_run
/// // mfu-rs reln -r /old/proj /new/proj /home
/// let mut options =
///     mfu::reln::Options::new(b"/old/proj".to_vec(), b"/new/proj".to_vec(), vec![b"/home".to_vec()]);
/// options.relative = true;
/// let reports = steal::local::run(2, |comm| mfu::reln::run(comm, &options));
/// let rewritten = reports[0].as_ref().map_or(0, |r| r.rewritten);
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// The prefix the targets start with now (made absolute from the current directory).
    pub oldpath: Vec<u8>,
    /// The prefix to put in its place.
    pub newpath: Vec<u8>,
    /// Trees to look for links in, or the list of links to look at instead (v3/v4 cache,
    /// `path|T` text, one path per line, or NUL-separated; or in memory).
    pub input: Input,
    /// Keep the access and modification times of the links rewritten.
    pub preserve: bool,
    /// Write the new targets relative to the link's directory.
    pub relative: bool,
    /// Change nothing: send `link: old -> new` for every link that would change as output.
    pub dryrun: bool,
    /// Events, progress, verbosity and the stop flag. A dry run, or a verbose one, sends a
    /// `link: old -> new` line per link it rewrites as output, in rank order.
    pub context: Context,
}

impl Options {
    /// Rewrite links under `paths` whose targets start with `oldpath` to start with `newpath`;
    /// every other field as on the command line.
    pub fn new(oldpath: Vec<u8>, newpath: Vec<u8>, paths: Vec<Vec<u8>>) -> Options {
        Options {
            oldpath,
            newpath,
            input: Input::Paths(paths),
            preserve: false,
            relative: false,
            dryrun: false,
            context: Context::default(),
        }
    }
}

/// What a `reln` run did: counts over all ranks.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// OLDPATH, absolute and normalised.
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub oldpath: Vec<u8>,
    /// NEWPATH, absolute and normalised.
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub newpath: Vec<u8>,
    /// A dry run: `rewritten` counts the links that would be rewritten.
    pub dryrun: bool,
    /// Symbolic links looked at.
    pub links: u64,
    /// Links rewritten (or, in a dry run, to rewrite).
    pub rewritten: u64,
    /// Links that could not be read or rewritten, and walk failures.
    pub failed: u64,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// A stop request cut the run short: not every link was looked at.
    pub interrupted: bool,
    /// A sample of this process's failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    /// `items` are the links rewritten.
    fn summary(&self) -> Summary {
        Summary {
            items: self.rewritten,
            bytes: 0,
            failed: self.failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(self.failed, 0, self.interrupted)
    }
}

/// Run `reln` on this rank. Collective: every rank returns the same counts, or the same error
/// when nothing was changed.
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let setup = setup(comm, options)?;
    // Opened before the walk: links are reached beneath the directories the user named.
    let opened = Roots::open_dirs(setup.roots.iter().map(|r| r.as_slice()));
    let (links, errors, interrupted) = list(comm, options, &setup)?;
    // Relative targets count from real locations: NEWPATH's too, when it exists (else as given).
    let real_new = std::fs::canonicalize(flist::path::as_path(&setup.new))
        .map(|p| p.into_os_string().into_vec())
        .unwrap_or_else(|_| setup.new.clone());
    let re = Relinker {
        old: &setup.old,
        new: &setup.new,
        real_new: &real_new,
        options,
        context: &options.context,
        roots: opened,
        real_dirs: Mutex::new(HashMap::new()),
        euid: rustix::process::geteuid().as_raw(),
        egid: rustix::process::getegid().as_raw(),
        links: AtomicU64::new(0),
        rewritten: AtomicU64::new(0),
        failed: AtomicU64::new(errors.len() as u64),
        listing: Mutex::new(Vec::new()),
        progress: options.context.progress(comm.rank(), "Checked"),
    };
    for e in &errors {
        options.context.error(e);
    }
    let mut interrupted = comm.any(interrupted);
    if !interrupted {
        interrupted = re.relink_all(comm, links);
    }
    Ok(re.end(comm, interrupted, started))
}

/// OLDPATH and NEWPATH, absolute and normalised, and the outermost PATHs.
struct Setup {
    old: Vec<u8>,
    new: Vec<u8>,
    roots: Vec<Vec<u8>>,
    cwd: Vec<u8>,
}

/// Phase 1: the prefixes and roots, absolute; `Err` on every rank when an operand is empty or
/// the current directory is unknown. Collective.
fn setup(comm: &dyn Comm, options: &Options) -> Result<Setup, Error> {
    let checked = (|| {
        let cwd = flist::path::current_dir().map_err(|e| format!("current directory: {e}"))?;
        let mut prefixes = Vec::new();
        for (what, p) in [("OLDPATH", &options.oldpath), ("NEWPATH", &options.newpath)] {
            if p.is_empty() {
                return Err(format!("an empty {what} names no directory"));
            }
            prefixes.push(normalize(p, &cwd));
        }
        let paths = options.input.walk_paths();
        if paths.iter().any(|p| p.is_empty()) {
            return Err("an empty PATH names no file".to_string());
        }
        let roots = flist::path::outermost(paths.iter().map(|p| normalize(p, &cwd)).collect());
        let new = prefixes.pop().expect("two prefixes");
        let old = prefixes.pop().expect("two prefixes");
        Ok(Setup {
            old,
            new,
            roots,
            cwd,
        })
    })();
    agree_setup(comm, checked)
}

/// Phase 2: the links (and entries of unknown type, from plain lists), absolute, the walk's
/// failures, and whether a stop request cut the walk short. `Err` (on every rank) is an
/// unreadable `--input`. Collective.
fn list(
    comm: &dyn Comm,
    options: &Options,
    setup: &Setup,
) -> Result<(FileList, Vec<ItemError>, bool), Error> {
    // The walk's paths are `setup.roots`: the trees normalised, outermost only.
    let walk_roots = |_: &[Vec<u8>]| {
        let progress = options.context.progress(comm.rank(), "Walked");
        let opts = WalkOptions {
            detail: Detail::Lite,
            seed: 0x4e11,
            noatime: &options.context.noatime,
            stop: Some(&options.context.stop),
            progress: Some(&progress),
            ..WalkOptions::default()
        };
        walk(comm, &setup.roots, &opts)
    };
    let (list, errors, interrupted) = match options.input.list(comm, walk_roots)? {
        Listed::Read(list) => (list, Vec::new(), false),
        Listed::Walked(w) => (w.list, w.errors, w.interrupted),
    };
    let mut links = list.empty_like();
    for e in list.iter() {
        if matches!(e.kind, FileType::Symlink | FileType::Unknown) {
            links.push(&normalize(e.path, &setup.cwd), e.kind, None);
        }
    }
    drop(list);
    // The links are known; a race test changes the tree here.
    crate::engine::test_seam::after_listing(comm);
    Ok((links, errors, interrupted))
}

/// What one rank's workers share.
struct Relinker<'a> {
    /// OLDPATH and NEWPATH, absolute and normalised.
    old: &'a [u8],
    new: &'a [u8],
    /// NEWPATH with symlinks resolved (as given when it does not exist), for `--relative`.
    real_new: &'a [u8],
    options: &'a Options,
    context: &'a Context,
    /// The PATHs that are directories, open: links beneath them are reached from them.
    roots: Roots,
    /// Real location of each link directory met (`--relative`), by its path as walked.
    real_dirs: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    euid: u32,
    egid: u32,
    /// Symbolic links looked at.
    links: AtomicU64,
    /// Links rewritten (or, with --dryrun, to rewrite).
    rewritten: AtomicU64,
    /// Links that could not be read or rewritten, and walk failures.
    failed: AtomicU64,
    /// `link: old -> new` lines (-v, --dryrun).
    listing: Mutex<Vec<u8>>,
    progress: Progress,
}

impl Relinker<'_> {
    /// Phase 3: rewrite every link of `links` that needs it. Each link is handled on the rank
    /// its path hashes to, once: a link named twice (in a list) must not be rewritten twice,
    /// which would go wrong when NEWPATH is under OLDPATH. Returns true (on every rank) when a
    /// stop request cut it short. Collective.
    fn relink_all(&self, comm: &dyn Comm, links: FileList) -> bool {
        let links = distinct(comm, links);
        self.progress
            .total_items
            .store(comm.sum(links.len() as u64), Ordering::Relaxed);
        let stop = Some(&*self.context.stop);
        run_batches(comm, stop, Some(&self.progress), &links, |chunk| {
            for e in chunk.iter() {
                self.relink(e.path);
            }
        })
    }

    /// Rewrite the link at `path` if its target starts with OLDPATH.
    fn relink(&self, path: &[u8]) {
        let (dir_path, name) = (parent(path), basename(path));
        let dir = match self.roots.parent_dir(path) {
            Some(d) => d,
            // Beneath no PATH (a list's entry, or a PATH that is the link itself): by its
            // path, as the user named it.
            None => open_long(dir_path, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC),
        };
        let dir = match dir {
            Ok(d) => d,
            Err(Errno::LOOP | Errno::XDEV | Errno::NOTDIR) => {
                return self.fail(
                    dir_path,
                    "open directory beneath PATH (a symlink or non-directory is in the way: changed since the walk?)",
                    Errno::LOOP,
                )
            }
            Err(e) => return self.fail(dir_path, "open directory", e),
        };
        let st = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(e) => return self.fail(path, "stat", e),
        };
        if FileType::from_mode(st.st_mode) != FileType::Symlink {
            return; // a plain list's entry that is not a link
        }
        self.links.fetch_add(1, Ordering::Relaxed);
        let target = match rustix::fs::readlinkat(&dir, name, Vec::new()) {
            Ok(t) => t.into_bytes(),
            Err(e) => return self.fail(path, "readlink", e),
        };
        let real_dir = match self.options.relative.then(|| self.real_dir(dir_path, &dir)) {
            None => None,
            Some(Ok(real)) => Some(real),
            Some(Err(e)) => return self.fail(dir_path, "find the real location of directory", e),
        };
        let new = if real_dir.is_some() {
            self.real_new
        } else {
            self.new
        };
        let Some(new_target) = rewrite(&target, self.old, new, real_dir.as_deref()) else {
            return;
        };
        if real_dir.is_some() {
            let absolute = rewrite(&target, self.old, self.new, None).expect("rewritten above");
            if let Err(why) = reaches(&dir, &new_target, &absolute) {
                self.failed.fetch_add(1, Ordering::Relaxed);
                self.progress.errors.fetch_add(1, Ordering::Relaxed);
                self.context.error(format!(
                    "{}: the relative target {} would not reach {} ({why}); link kept",
                    display(path),
                    display(&new_target),
                    display(&absolute)
                ));
                return;
            }
        }
        if self.options.dryrun || self.context.verbose {
            let mut line = lock(&self.listing);
            for part in [path, b": ", &target[..], b" -> ", &new_target[..], b"\n"] {
                line.extend_from_slice(part);
            }
        }
        if self.options.dryrun {
            self.rewritten.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.replace(&dir, path, name, &new_target, &Meta::from_stat(&st)) {
            self.rewritten.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The real location of the directory `dir_path`, open as `dir` (the kernel's path of the
    /// open directory: symlinks on the way resolved), looked up once per directory.
    fn real_dir(&self, dir_path: &[u8], dir: &OwnedFd) -> Result<Vec<u8>, Errno> {
        if let Some(real) = lock(&self.real_dirs).get(dir_path) {
            return Ok(real.clone());
        }
        let proc = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let real = rustix::fs::readlink(proc.as_str(), Vec::new())?.into_bytes();
        if real.first() != Some(&b'/') {
            // "(deleted)" or a path outside this mount namespace: no location to count from.
            return Err(Errno::NOENT);
        }
        lock(&self.real_dirs).insert(dir_path.to_vec(), real.clone());
        Ok(real)
    }

    /// Make the new link under a temporary name in `dir` (an [`Output`]), give it the old
    /// one's owner (and times), and rename it over `name`. Returns whether the link now has
    /// the new target; failures are reported.
    fn replace(&self, dir: &OwnedFd, path: &[u8], name: &[u8], target: &[u8], old: &Meta) -> bool {
        // The one temporary naming of every tool (flist::atomic): this process's name for
        // `name`. Something already there is not ours (a link is replaced once per run): it
        // is left alone and the link is not rewritten.
        let temp = match Output::symlink(dir.as_fd(), parent(path), name, target) {
            Ok(temp) => temp,
            Err(e) => {
                let what = match e.source.raw_os_error() {
                    Some(libc::EEXIST) => {
                        "create the new link (its temporary name is taken: left alone)"
                    }
                    _ => "create link",
                };
                self.fail(path, what, e.source);
                return false;
            }
        };
        let mut owner_error = None;
        if old.uid != self.euid || old.gid != self.egid {
            let (uid, gid) = (Uid::from_raw(old.uid), Gid::from_raw(old.gid));
            if let Err(e) = rustix::fs::chownat(
                temp.dir(),
                temp.name(),
                Some(uid),
                Some(gid),
                AtFlags::SYMLINK_NOFOLLOW,
            ) {
                owner_error = Some(e);
            }
        }
        let mut times_error = None;
        if self.options.preserve {
            let times = crate::engine::copy::meta::timestamps(old);
            if let Err(e) =
                rustix::fs::utimensat(temp.dir(), temp.name(), &times, AtFlags::SYMLINK_NOFOLLOW)
            {
                times_error = Some(e);
            }
        }
        // A failed rename removes the temporary link.
        if let Err(e) = temp.publish(Replace::Overwrite) {
            self.fail(path, "rename new link over the old one", e.source);
            return false;
        }
        // The link has its new target; what did not carry over is still a failure.
        if let Some(e) = owner_error {
            self.fail(path, "keep owner (lchown)", e);
        }
        if let Some(e) = times_error {
            self.fail(path, "keep times (utimensat)", e);
        }
        true
    }

    fn fail(&self, path: &[u8], op: &'static str, e: impl Into<std::io::Error>) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.progress.errors.fetch_add(1, Ordering::Relaxed);
        self.context.error(ItemError::new(path, op, e.into()));
    }

    /// Phase 4: the listing (`--dryrun`, verbose) as output in rank order, the counts over all
    /// ranks; rank 0 tells how many failed and whether the run was cut short. Collective.
    fn end(&self, comm: &dyn Comm, interrupted: bool, started: Instant) -> Report {
        let listing = std::mem::take(&mut *lock(&self.listing));
        in_rank_order(comm, listing, |b| self.context.output(b));
        let mut n = [&self.links, &self.rewritten, &self.failed].map(|a| a.load(Ordering::Relaxed));
        comm.allreduce(&mut n, ReduceOp::Sum);
        let [links, rewritten, failed] = n;
        if comm.rank() == 0 {
            // Messages about the whole run: not in the report's sample of failed items.
            let events = &self.context.events;
            if failed > 0 {
                events.error(&format!("{failed} failures (listed above)"));
            }
            if interrupted {
                events.error("interrupted by a signal: not every link was looked at");
            }
        }
        Report {
            oldpath: self.old.to_vec(),
            newpath: self.new.to_vec(),
            dryrun: self.options.dryrun,
            links,
            rewritten,
            failed,
            seconds: started.elapsed().as_secs_f64(),
            interrupted,
            failures: self.context.failures(),
        }
    }
}

/// Whether the relative target `relative`, followed from the directory `dir` as the kernel
/// will follow the link, reaches the file the absolute path `absolute` names: the same
/// (device, inode) for `absolute` or, when it does not exist (yet), for its deepest existing
/// ancestor and the matching ancestor of `relative`. `Err` says why not.
fn reaches(dir: &OwnedFd, relative: &[u8], absolute: &[u8]) -> Result<(), String> {
    let abs = components(absolute);
    let rel: Vec<&[u8]> = relative
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .collect();
    for up in 0..=abs.len() {
        let (a, r) = if up == 0 {
            (absolute.to_vec(), relative.to_vec())
        } else {
            let mut a = Vec::new();
            for c in &abs[..abs.len() - up] {
                a.push(b'/');
                a.extend_from_slice(c);
            }
            if a.is_empty() {
                a.push(b'/');
            }
            // Only plain names can be dropped from the end of the relative path.
            if rel.len() < up
                || rel[rel.len() - up..]
                    .iter()
                    .any(|c| *c == b".." || *c == b".")
            {
                return Err(format!(
                    "cannot check: {} does not exist",
                    display(absolute)
                ));
            }
            let r = rel[..rel.len() - up].join(&b'/');
            (a, if r.is_empty() { b".".to_vec() } else { r })
        };
        let Ok(want) = stat_path(&a, true) else {
            continue;
        };
        return match rustix::fs::statat(dir, r.as_slice(), AtFlags::empty()) {
            Ok(got) if (got.st_dev, got.st_ino) == (want.st_dev, want.st_ino) => Ok(()),
            Ok(_) => Err(format!("{} reaches another file", display(&r))),
            Err(e) => Err(format!("{}: {e}", display(&r))),
        };
    }
    Err(format!(
        "cannot check: {} does not exist",
        display(absolute)
    ))
}

/// The records of `list`, each path once, on the rank its path hashes to. Collective.
fn distinct(comm: &dyn Comm, list: FileList) -> FileList {
    let size = comm.size() as u64;
    let list = remap(comm, list, |e| (hash_path(e.path) % size) as usize);
    let mut order: Vec<usize> = (0..list.len()).collect();
    order.sort_by(|&a, &b| list.path(a).cmp(list.path(b)));
    order.dedup_by(|a, b| list.path(*a) == list.path(*b));
    list.select(order)
}

/// The new target for a link whose target is `target`, or `None` when `target` is relative or
/// not under `old` (both absolute and normalised). With `relative_to` (the link's directory,
/// absolute and normalised) the result is relative to it (`.` for the directory itself). A
/// trailing `/` of the old target is kept.
pub fn rewrite(
    target: &[u8],
    old: &[u8],
    new: &[u8],
    relative_to: Option<&[u8]>,
) -> Option<Vec<u8>> {
    if target.first() != Some(&b'/') {
        return None;
    }
    let clean = normalize(target, b"/");
    if !flist::path::is_prefix(old, &clean) {
        return None;
    }
    let rest = components(&clean).split_off(components(old).len());
    let mut to = components(new);
    to.extend(rest);
    let mut out = match relative_to {
        None => {
            let mut abs = Vec::new();
            for c in &to {
                abs.push(b'/');
                abs.extend_from_slice(c);
            }
            if abs.is_empty() {
                abs.push(b'/');
            }
            abs
        }
        Some(dir) => {
            let from = components(dir);
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            let mut parts: Vec<&[u8]> = vec![b".."; from.len() - common];
            parts.extend_from_slice(&to[common..]);
            if parts.is_empty() {
                b".".to_vec()
            } else {
                parts.join(&b'/')
            }
        }
    };
    if target.ends_with(b"/") && !out.ends_with(b"/") {
        out.push(b'/');
    }
    Some(out)
}

/// The components of a normalised absolute path (none for `/`).
fn components(path: &[u8]) -> Vec<&[u8]> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn rw(target: &str, rel: Option<&str>) -> Option<String> {
        rewrite(
            target.as_bytes(),
            b"/a/b",
            b"/n/m",
            rel.map(|r| r.as_bytes()),
        )
        .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn absolute_targets_under_old_move_to_new() {
        assert_eq!(rw("/a/b/c/f", None).as_deref(), Some("/n/m/c/f"));
        assert_eq!(rw("/a/b", None).as_deref(), Some("/n/m"));
        assert_eq!(rw("/a/b/", None).as_deref(), Some("/n/m/"));
        assert_eq!(rw("//a/./b//c", None).as_deref(), Some("/n/m/c"));
        assert_eq!(rw("/a/bc/f", None), None);
        assert_eq!(rw("/a", None), None);
        assert_eq!(rw("/a/b/../c", None), None);
        assert_eq!(rw("/x/../a/b/f", None).as_deref(), Some("/n/m/f"));
        assert_eq!(rw("b/f", None), None);
        assert_eq!(rw("../a/b/f", None), None);
        assert_eq!(rw("", None), None);
    }

    #[test]
    fn relative_targets_are_written_from_the_link_directory() {
        assert_eq!(rw("/a/b/c/f", Some("/n/m/c")).as_deref(), Some("f"));
        assert_eq!(rw("/a/b/c/f", Some("/n/m")).as_deref(), Some("c/f"));
        assert_eq!(
            rw("/a/b/c/f", Some("/n/x/y")).as_deref(),
            Some("../../m/c/f")
        );
        assert_eq!(rw("/a/b/c/f", Some("/l")).as_deref(), Some("../n/m/c/f"));
        assert_eq!(rw("/a/b/c", Some("/n/m/c")).as_deref(), Some("."));
        assert_eq!(rw("/a/b", Some("/n/m/c/d")).as_deref(), Some("../.."));
        assert_eq!(rw("/a/b/c/", Some("/n/m")).as_deref(), Some("c/"));
        assert_eq!(rw("/a/b/f", Some("/")).as_deref(), Some("n/m/f"));
    }

    #[test]
    fn relative_targets_are_checked_against_the_file_they_must_reach() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        std::fs::create_dir_all(base.join("a/links")).unwrap();
        std::fs::create_dir_all(base.join("a/new")).unwrap();
        std::fs::write(base.join("a/new/f"), b"f").unwrap();
        std::fs::write(base.join("a/links/f"), b"another f").unwrap();
        let dir = open_long(
            base.join("a/links").as_os_str().as_bytes(),
            OFlags::PATH | OFlags::DIRECTORY,
        )
        .unwrap();
        let abs = |rel: &str| {
            let mut p = base.as_os_str().as_bytes().to_vec();
            p.extend_from_slice(rel.as_bytes());
            p
        };
        assert_eq!(reaches(&dir, b"../new/f", &abs("/a/new/f")), Ok(()));
        // Another file of the same name, or nothing there: refused.
        assert!(reaches(&dir, b"f", &abs("/a/new/f"))
            .unwrap_err()
            .contains("reaches another file"));
        assert!(reaches(&dir, b"../../new/f", &abs("/a/new/f")).is_err());
        // A target that does not exist yet: checked by its deepest existing directory.
        assert_eq!(reaches(&dir, b"../new/x/y", &abs("/a/new/x/y")), Ok(()));
        assert!(reaches(&dir, b"../links/x/y", &abs("/a/new/x/y")).is_err());
    }

    #[test]
    fn roots_as_prefixes() {
        let r = |t: &[u8], old: &[u8], new: &[u8]| rewrite(t, old, new, None);
        assert_eq!(r(b"/x/y", b"/", b"/mnt"), Some(b"/mnt/x/y".to_vec()));
        assert_eq!(r(b"/a/x", b"/a", b"/"), Some(b"/x".to_vec()));
        assert_eq!(r(b"/a", b"/a", b"/"), Some(b"/".to_vec()));
        assert_eq!(
            r(b"/a/caf\xe9 x", b"/a", b"/b\xff"),
            Some(b"/b\xff/caf\xe9 x".to_vec())
        );
    }
}
