//! The copy engine shared by cp and sync (and later tar extraction).
//!
//! [`run`] takes, on every rank, the source records to copy and a [`Mapping`] from source to
//! destination paths, then, collectively:
//! 1. creates directories top-down (one level at a time, owner-only `rwx` while the copy runs);
//! 2. recreates symlinks, fifos, sockets and device nodes (each with its metadata at once);
//! 3. moves file data as byte-balanced chunks over the work-stealing queue: a big file's chunks
//!    land on many ranks, many small files travel as one work item; a file gets its final
//!    metadata as soon as its last chunk lands (on the rank that wrote it, or, when its chunks
//!    were split over ranks, on the file's home rank right after the data phase), so a file
//!    whose data is incomplete never carries the source's mtime and a rerun of sync finds it;
//!    a huge file keeps a journal of its complete chunks meanwhile, so that a rerun copies only
//!    the missing ones ([`resume`], [`journal`]);
//! 4. recreates hard-link groups as links to their first member;
//! 5. fixes metadata of entries whose data was kept (sync);
//! 6. sets directories' metadata bottom-up.

pub mod data;
pub mod drive;
pub mod iosize;
pub mod journal;
pub mod links;
pub mod meta;
pub mod projid;
pub mod reach;
pub mod resume;
pub mod striping;
mod transfer;

use crate::engine::digest::HashKind;
use crate::engine::racy;
use data::{Buffer, DataError, DataOptions};
use flist::at::At;
use flist::beneath;
use flist::chunk::{plan_striped_chunks, Chunk};
use flist::distribute::{by_depth, hash_path, levels_meet};
use flist::parent_dir::ParentDir;
use flist::{FileList, FileType, ItemError, Meta};
use meta::{Differences, MetaOptions};
use rayon::prelude::*;
use reach::Reach;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use serde_bytes::{ByteBuf, Bytes};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use steal::progress::Progress;
use steal::queue;
use steal::typed;
use steal::{Comm, CommExt, ReduceOp};
use striping::Striping;
use transfer::Transfer;

/// Where each source path goes: pairs of (source root, destination root); a source path is
/// mapped through the longest root that is a component prefix of it.
///
/// Or, for rewriting files in place (`stripe`), each file to a hidden sibling in its own
/// directory.
#[derive(Clone, Debug, Default)]
pub struct Mapping {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    /// For a sibling mapping: the host and pid whose temporary name ([`flist::atomic`]) each
    /// file's sibling takes.
    siblings: Option<(Vec<u8>, u32)>,
    /// Directories every destination entry is reached beneath (see [`Mapping::dest_anchors`]).
    anchors: Option<Vec<Vec<u8>>>,
    /// Sources are reached through symlinks (`-L`).
    follow_sources: bool,
}

impl Mapping {
    /// A mapping from normalised absolute (source root, destination root) pairs.
    pub fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Mapping {
        Mapping {
            pairs,
            siblings: None,
            anchors: None,
            follow_sources: false,
        }
    }

    /// Reach every destination entry beneath one of `anchors` (directories the user named),
    /// never through a symlink below them: cp's DEST when the copy goes into it as DEST/NAME,
    /// where DEST/NAME may already be a symlink.
    pub fn with_dest_anchors(mut self, anchors: Vec<Vec<u8>>) -> Mapping {
        self.anchors = Some(anchors);
        self
    }

    /// Reach sources through symlinks (`-L`: the walk followed them).
    pub fn following_sources(mut self) -> Mapping {
        self.follow_sources = true;
        self
    }

    /// True after [`Mapping::following_sources`].
    pub fn follows_sources(&self) -> bool {
        self.follow_sources
    }

    /// The source roots.
    pub fn source_roots(&self) -> Vec<Vec<u8>> {
        self.pairs.iter().map(|(s, _)| s.clone()).collect()
    }

    /// The directories destination entries are reached beneath: those given to
    /// [`Mapping::with_dest_anchors`], or each destination root and its parent (a root that
    /// exists is reached as named; one that does not yet is created beneath its parent).
    pub fn dest_anchors(&self) -> Vec<Vec<u8>> {
        if let Some(a) = &self.anchors {
            return a.clone();
        }
        self.pairs
            .iter()
            .flat_map(|(_, d)| [d.clone(), flist::path::parent(d).to_vec()])
            .collect()
    }

    /// Every path under `roots` to the temporary beside it that process `pid` on `host` writes
    /// for it (`DIR/.NAME.HOST.PID.mfu-tmp`, [`flist::atomic::temp_name_of`]): one run's
    /// siblings, named by the run's rank 0 so that every rank names them alike.
    pub fn siblings(roots: Vec<Vec<u8>>, host: &[u8], pid: u32) -> Mapping {
        Mapping {
            pairs: roots.into_iter().map(|r| (r.clone(), r)).collect(),
            siblings: Some((host.to_vec(), pid)),
            anchors: None,
            follow_sources: false,
        }
    }

    /// The destination roots (where new files go), for finding the destination file system.
    pub fn dest_roots(&self) -> Vec<Vec<u8>> {
        self.pairs.iter().map(|(_, d)| d.clone()).collect()
    }

    fn root_of(&self, src: &[u8]) -> Option<&(Vec<u8>, Vec<u8>)> {
        self.pairs
            .iter()
            .filter(|(s, _)| flist::path::is_prefix(s, src))
            .max_by_key(|(s, _)| s.len())
    }

    /// The path of `src` relative to its source root (`""` for the root itself).
    pub fn rel<'a>(&self, src: &'a [u8]) -> &'a [u8] {
        match self.root_of(src) {
            Some((s, _)) => {
                let rest = &src[s.len().min(src.len())..];
                rest.strip_prefix(b"/").unwrap_or(rest)
            }
            None => src,
        }
    }

    /// The source paths whose destination is `dst` (the inverse of [`Mapping::dest`]): at most
    /// one per root pair. None for a sibling mapping (its siblings are hidden names of its own).
    pub fn sources_of(&self, dst: &[u8]) -> Vec<Vec<u8>> {
        if self.siblings.is_some() {
            return Vec::new();
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        for (s, d) in &self.pairs {
            if !flist::path::is_prefix(d, dst) {
                continue;
            }
            let rest = &dst[d.len().min(dst.len())..];
            let rest = rest.strip_prefix(b"/").unwrap_or(rest);
            let mut src = s.clone();
            if !rest.is_empty() {
                if src != b"/" {
                    src.push(b'/');
                }
                src.extend_from_slice(rest);
            }
            // Under a longer source root, `src` goes elsewhere.
            if self.dest(&src) == dst && !out.contains(&src) {
                out.push(src);
            }
        }
        out
    }

    /// The destination of `src`.
    ///
    /// # Panics
    /// When `src` is under none of the source roots (callers only map walked entries).
    pub fn dest(&self, src: &[u8]) -> Vec<u8> {
        if let Some((host, pid)) = &self.siblings {
            let mut out = flist::path::parent(src).to_vec();
            if out != b"/" {
                out.push(b'/');
            }
            let name = flist::atomic::temp_name_of(flist::path::basename(src), host, *pid);
            out.extend_from_slice(&name);
            return out;
        }
        let (_, d) = self
            .root_of(src)
            .unwrap_or_else(|| panic!("{} is under no source root", flist::path::display(src)));
        let rel = self.rel(src);
        let mut out = d.clone();
        if !rel.is_empty() {
            if out != b"/" {
                out.push(b'/');
            }
            out.extend_from_slice(rel);
        }
        out
    }
}

/// How the engine copies.
pub struct CopyOptions<'a> {
    /// Bytes per chunk of file data (the unit of work spread over ranks); 0 picks it per batch
    /// with [`auto_chunk_size`].
    pub chunk_size: u64,
    /// How bytes move.
    pub data: DataOptions,
    /// How metadata is applied.
    pub meta: MetaOptions,
    /// Read sources (and compared destinations) with `O_NOATIME` when asked, where permitted.
    pub noatime: &'a flist::noatime::NoAtime,
    /// Copy files in batches of this many files (0 = one batch), each batch complete with its
    /// metadata before the next starts.
    pub batch_files: u64,
    /// Set by a signal handler: stop taking work, finish what is in flight.
    pub stop: Option<&'a AtomicBool>,
    /// Progress counters (bytes and files).
    pub progress: Option<&'a Progress>,
    /// The Lustre calls (the real ones, or a test double).
    pub lustre: &'a dyn lustre_sys::Lustre,
    /// `--stripe-count`/`--stripe-size` for new files on a Lustre destination.
    pub stripe: lustre_sys::policy::Overrides,
    /// `--verify`, `--manifest`: hash file data as it is read, check what landed, keep digests.
    pub hashing: Option<&'a crate::engine::hashing::Hashing>,
}

/// What to copy on this rank (each rank holds its own part; all lists are stat lists).
pub struct Plan {
    /// Entries to create or overwrite: directories, files, links, fifos, sockets, devices.
    pub create: FileList,
    /// Existing same-size files to compare chunk by chunk, rewriting only differing chunks.
    pub compare: FileList,
    /// Hard links to make after the data phase: (source of the group's first member, source
    /// of the member to link to it).
    pub links: Vec<(Vec<u8>, Vec<u8>)>,
    /// Hard links to existing files outside the copy (sync `--link-dest`): (the file to link
    /// to, source path of the entry it stands for).
    pub external_links: Vec<(Vec<u8>, Vec<u8>)>,
    /// Existing entries whose data is kept but whose metadata differs, and what differs.
    pub fix_meta: Vec<(usize, Differences)>,
    /// The records `fix_meta` indexes.
    pub fix_meta_list: FileList,
    /// Directories whose metadata is set bottom-up at the end. With `dirs_only_if_differ`, a
    /// directory is touched only if its destination differs (so an equal tree sees no write).
    pub dir_meta: FileList,
    /// See `dir_meta`.
    pub dirs_only_if_differ: bool,
    /// Whether huge files keep journals of their complete chunks, and which resume.
    pub journals: resume::Journals,
    /// Regular files left as they are whose digests a manifest lists (`sync --manifest-all`):
    /// read from the source and hashed after the data phase.
    pub hash_only: FileList,
    /// More entries to create, beyond `create`: written out to a spill file as the plan was
    /// made (sync beyond its memory limit), read back and made a piece at a time after
    /// `create`'s files. Never directories: those are all in `create`, made first.
    pub create_more: Option<flist::spill::Pieces>,
    /// Destination paths of `create_more`'s entries to leave as they are (an entry in the
    /// way could not be removed); `create` is filtered before the engine runs.
    pub left_alone: std::collections::HashSet<Vec<u8>>,
}

impl Default for Plan {
    fn default() -> Plan {
        let empty = || FileList::new(flist::Detail::Stat);
        Plan {
            create: empty(),
            compare: empty(),
            links: Vec::new(),
            external_links: Vec::new(),
            fix_meta: Vec::new(),
            fix_meta_list: empty(),
            dir_meta: empty(),
            dirs_only_if_differ: false,
            journals: resume::Journals::Off,
            hash_only: empty(),
            create_more: None,
            left_alone: std::collections::HashSet::new(),
        }
    }
}

/// What a run did. Counts are this rank's unless summed with [`Report::sum`].
#[derive(Debug, Default)]
pub struct Report {
    /// Directories created.
    pub dirs: u64,
    /// Regular files written (copied or compared and rewritten).
    pub files: u64,
    /// Symbolic links created.
    pub symlinks: u64,
    /// Hard links created.
    pub hardlinks: u64,
    /// Fifos, sockets and devices created.
    pub others: u64,
    /// Entries that can't be recreated here (e.g. device nodes without privilege).
    pub skipped: u64,
    /// Entries whose metadata alone was fixed.
    pub meta_fixed: u64,
    /// Compared files (`Plan::compare`) whose data was rewritten, at least in part.
    pub rewritten: u64,
    /// Compared files whose data was equal but whose metadata had to be fixed.
    pub compare_meta: u64,
    /// File data bytes written.
    pub bytes: u64,
    /// Partial files resumed from their journals (only their missing chunks copied).
    pub resumed: u64,
    /// Bytes of resumed files not copied again (their journals said they were there).
    pub resumed_bytes: u64,
    /// Failures, each with path and operation.
    pub errors: Vec<ItemError>,
    /// Entries skipped, with the reason (not failures).
    pub skips: Vec<ItemError>,
    /// A stop request cut the run short.
    pub interrupted: bool,
    /// The largest chunk size used, in bytes (0 when no file was copied).
    pub chunk_size: u64,
    /// Why that chunk size (automatic, given, aligned to Lustre stripes).
    pub chunk_reason: &'static str,
    /// OSTs of the destination when it is on Lustre (`None` otherwise).
    pub lustre_osts: Option<u32>,
    /// Layouts given to new files on Lustre.
    pub stripes: striping::StripeCounts,
    /// Failures on all ranks (after [`Report::sum`]).
    pub total_errors: u64,
    /// The first destination on this rank whose file system kept no project ID a source had.
    pub projid_unkept: Option<Vec<u8>>,
    /// Destinations (this rank's) of `Plan::fix_meta` whose only fix was a project ID their
    /// file system could not keep: not fixed, not counted in `meta_fixed`, not failures.
    pub unmade: Vec<Vec<u8>>,
}

impl Report {
    /// Sum the counts over all ranks (errors stay local; `total_errors` counts the items that
    /// failed, each once however many of its chunks or steps failed on however many ranks).
    /// Collective.
    pub fn sum(&mut self, comm: &dyn Comm) {
        self.total_errors = failed_items(comm, &self.errors);
        let mut interrupted = u64::from(self.interrupted);
        let mut counts = [
            &mut self.dirs,
            &mut self.files,
            &mut self.symlinks,
            &mut self.hardlinks,
            &mut self.others,
            &mut self.skipped,
            &mut self.meta_fixed,
            &mut self.rewritten,
            &mut self.compare_meta,
            &mut self.bytes,
            &mut self.resumed,
            &mut self.resumed_bytes,
            &mut interrupted,
        ];
        let mut v: Vec<u64> = counts.iter().map(|c| **c).collect();
        comm.allreduce(&mut v, ReduceOp::Sum);
        for (c, total) in counts.iter_mut().zip(v) {
            **c = total;
        }
        self.interrupted = interrupted > 0;
        self.chunk_size = comm.max(self.chunk_size);
        self.stripes.sum(comm);
    }
}

/// The number of distinct paths among every rank's `errors` (known on every rank).
/// Collective.
fn failed_items(comm: &dyn Comm, errors: &[ItemError]) -> u64 {
    let mut sends = vec![Vec::new(); comm.size()];
    for e in errors {
        typed::encode_into(&hash_path(&e.path), &mut sends[0]);
    }
    let got = comm.alltoallv(sends);
    let mut distinct = std::collections::HashSet::new();
    for bytes in &got {
        distinct.extend(typed::each::<u64>(bytes).map(typed::sent));
    }
    comm.sum(distinct.len() as u64)
}

/// `errors` with one error per path (the first), in their order.
fn first_per_path(errors: Vec<ItemError>) -> Vec<ItemError> {
    let mut seen = std::collections::HashSet::new();
    errors
        .into_iter()
        .filter(|e| seen.insert(e.path.clone()))
        .collect()
}

/// Collects what workers report.
#[derive(Default)]
struct Tally {
    dirs: AtomicU64,
    files: AtomicU64,
    symlinks: AtomicU64,
    hardlinks: AtomicU64,
    others: AtomicU64,
    meta_fixed: AtomicU64,
    rewritten: AtomicU64,
    compare_meta: AtomicU64,
    bytes: AtomicU64,
    resumed: AtomicU64,
    resumed_bytes: AtomicU64,
    chunk_size: AtomicU64,
    chunk_reason: Mutex<&'static str>,
    errors: Mutex<Vec<ItemError>>,
    skips: Mutex<Vec<ItemError>>,
    unmade: Mutex<Vec<Vec<u8>>>,
}

impl Tally {
    fn fail(&self, e: ItemError) {
        self.errors.lock().expect("errors").push(e);
    }
    fn count(&self, c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Copy `plan` (this rank's part) through `map`. Collective.
pub fn run(comm: &dyn Comm, mut plan: Plan, map: &Mapping, opts: &CopyOptions) -> Report {
    let tally = Tally::default();
    let stripes = Striping::detect(opts.lustre, &map.dest_roots(), opts.stripe);
    let reach = Reach::open(map);
    make_dirs(comm, &plan.create, map, &reach, &tally);
    // Journals beside entries replaced by a non-file go with them (`replacing`).
    let journals = plan.journals.on().then_some(map);
    make_others(&plan.create, map, &reach, opts, &tally, journals);
    let mut interrupted = false;
    // The files of the plan, and nothing else held of it: directories and other entries are
    // made (their metadata is in `dir_meta`).
    let mut files = std::mem::replace(&mut plan.create, FileList::new(flist::Detail::Stat));
    // In place: a copy of the files would double the list at the data phase's start.
    files.retain(|e| e.kind == FileType::File);
    let files_ctx = Context {
        map,
        reach: &reach,
        opts,
        tally: &tally,
        stripes: &stripes,
        journals: &plan.journals,
    };
    interrupted |= copy_files(comm, files, Transfer::Copy, &files_ctx);
    if let Some(more) = plan.create_more.take() {
        let left_alone = std::mem::take(&mut plan.left_alone);
        interrupted |= create_pieces(comm, more, &left_alone, &files_ctx, interrupted);
    }
    interrupted |= copy_files(comm, plan.compare, Transfer::Compare, &files_ctx);
    if let Some(h) = opts.hashing {
        let open = |src: &[u8]| {
            let at = reach.src(src)?;
            opts.noatime
                .open_part(false, OFlags::RDONLY | OFlags::NOFOLLOW, |f| at.open(f, 0))
        };
        for e in h.keep_unchanged(&plan.hash_only, open, |src| map.dest(src)) {
            tally.fail(e);
        }
    }
    let links = (&plan.links[..], &plan.external_links[..]);
    make_links(comm, links, map, &reach, &tally, journals);
    plan.fix_meta.par_iter().for_each(|&(i, what)| {
        let e = plan.fix_meta_list.entry(i);
        let m = &e.meta.expect("stat list");
        let dst = map.dest(e.path);
        match meta::apply_path(e.path, &dst, &reach, e.kind, m, what, &opts.meta) {
            // A project ID that was all there was to fix, and that the destination could not
            // keep: nothing was fixed (the warning says why), so nothing is counted.
            Ok(unmade) if unmade.projid && what == Differences::PROJID => {
                tally.unmade.lock().expect("unmade").push(dst);
            }
            Ok(_) => tally.count(&tally.meta_fixed),
            Err(err) => tally.fail(err),
        }
    });
    dir_metadata(
        comm,
        &plan.dir_meta,
        plan.dirs_only_if_differ,
        map,
        &reach,
        opts,
        &tally,
    );
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let skips = tally.skips.into_inner().expect("skips");
    Report {
        dirs: load(&tally.dirs),
        files: load(&tally.files),
        symlinks: load(&tally.symlinks),
        hardlinks: load(&tally.hardlinks),
        others: load(&tally.others),
        skipped: skips.len() as u64,
        meta_fixed: load(&tally.meta_fixed),
        rewritten: load(&tally.rewritten),
        compare_meta: load(&tally.compare_meta),
        bytes: load(&tally.bytes),
        resumed: load(&tally.resumed),
        resumed_bytes: load(&tally.resumed_bytes),
        errors: first_per_path(tally.errors.into_inner().expect("errors")),
        skips,
        interrupted,
        chunk_size: load(&tally.chunk_size),
        chunk_reason: tally.chunk_reason.into_inner().expect("reason"),
        lustre_osts: stripes.is_on().then(|| stripes.ost_count()),
        stripes: stripes.counts(),
        total_errors: 0,
        projid_unkept: opts.meta.unkept.take(),
        unmade: tally.unmade.into_inner().expect("unmade"),
    }
}

/// The entries of `more` (no directory: those are made), a piece at a time on every rank as
/// long as any rank has one left: the piece's symlinks and other entries, then its files,
/// leaving out the destinations `left_alone`. Stops, on every rank, after an interruption
/// (`interrupted`: one came already) or a failure to read the spill (named, as the failure of
/// the spill directory). Returns whether the copy was interrupted. Collective.
fn create_pieces(
    comm: &dyn Comm,
    mut more: flist::spill::Pieces,
    left_alone: &std::collections::HashSet<Vec<u8>>,
    cx: &Context,
    interrupted: bool,
) -> bool {
    let journals = cx.journals.on().then_some(cx.map);
    let mut stopped = interrupted;
    loop {
        let piece = if stopped { Ok(None) } else { more.next_piece() };
        let mut piece = match piece {
            Ok(piece) => piece,
            // The spill file's error names its directory.
            Err(flist::Error::Item(e)) => {
                cx.tally.fail(e);
                None
            }
            Err(e) => {
                let e = std::io::Error::other(e.to_string());
                cx.tally
                    .fail(ItemError::new(b"", "read the spilled plan", e));
                None
            }
        };
        if !comm.any(piece.is_some()) {
            return stopped;
        }
        let mut files = FileList::new(flist::Detail::Stat);
        if let Some(piece) = &mut piece {
            if !left_alone.is_empty() {
                piece.retain(|e| !left_alone.contains(&cx.map.dest(e.path)));
            }
            make_others(piece, cx.map, cx.reach, cx.opts, cx.tally, journals);
            files = std::mem::replace(piece, FileList::new(flist::Detail::Stat));
            files.retain(|e| e.kind == FileType::File);
        }
        stopped |= copy_files(comm, files, Transfer::Copy, cx);
        stopped = comm.any(stopped);
    }
}

/// Directories top-down: a level is created on all ranks before the next starts where some
/// rank's directory has its parent on another rank ([`levels_meet`]; elsewhere each rank made
/// the parents it needs itself), and all are made before this returns. New directories are
/// owner-only until their metadata is set at the end; an existing one is made writable for the
/// owner if it is not.
fn make_dirs(comm: &dyn Comm, list: &FileList, map: &Mapping, reach: &Reach, tally: &Tally) {
    let dirs = list.select((0..list.len()).filter(|&i| list.kind(i) == FileType::Dir));
    let levels = by_depth(comm, &dirs);
    let meet = levels_meet(comm, &levels);
    for (k, level) in levels.iter().enumerate() {
        if k > 0 && meet[k] {
            comm.barrier();
        }
        (0..level.len()).into_par_iter().for_each(|i| {
            let dst = map.dest(level.path(i));
            match make_dir(&dst, reach) {
                Ok(true) => tally.count(&tally.dirs),
                Ok(false) => {}
                Err((op, e)) => tally.fail(ItemError::new(&dst, op, e)),
            }
        });
    }
    comm.barrier();
}

/// Create `dst` as a directory; `Ok(false)` when it already was one.
fn make_dir(dst: &[u8], reach: &Reach) -> Result<bool, (&'static str, io::Error)> {
    let at = reach.dst(dst).map_err(|e| ("open parent", e))?;
    match rustix::fs::mkdirat(at.dir(), at.name(), Mode::from_raw_mode(0o700)) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => {
            let mut st = at.lstat().map_err(|e| ("stat", e))?;
            if FileType::from_mode(st.st_mode) == FileType::Symlink && reach.is_anchor(dst) {
                // DEST itself, named by the user: a symlink to a directory is followed.
                st = flist::walk::stat_path(dst, true).map_err(|e| ("stat", e.into()))?;
            }
            if FileType::from_mode(st.st_mode) != FileType::Dir {
                return Err((
                    "mkdir (a non-directory is in the way)",
                    io::Error::from_raw_os_error(libc::EEXIST),
                ));
            }
            if st.st_mode & 0o700 != 0o700 {
                let mode = (st.st_mode | 0o700) & 0o7777;
                if reach.is_anchor(dst) {
                    rustix::fs::chmodat(
                        at.dir(),
                        at.name(),
                        Mode::from_raw_mode(mode),
                        rustix::fs::AtFlags::empty(),
                    )
                } else {
                    meta::chmod_nofollow(&at, mode)
                }
                .map_err(|e| ("chmod", e.into()))?;
            }
            Ok(false)
        }
        Err(e) => Err(("mkdir", e.into())),
    }
}

/// Symlinks, fifos, sockets and device nodes, each with its metadata. `journals`: the mapping
/// when journals are kept (see [`replacing`]).
fn make_others(
    list: &FileList,
    map: &Mapping,
    reach: &Reach,
    opts: &CopyOptions,
    tally: &Tally,
    journals: Option<&Mapping>,
) {
    (0..list.len()).into_par_iter().for_each(|i| {
        let e = list.entry(i);
        if matches!(e.kind, FileType::Dir | FileType::File | FileType::Unknown) {
            return;
        }
        let m = &e.meta.expect("stat list");
        let dst = map.dest(e.path);
        let made = match e.kind {
            FileType::Symlink => {
                make_symlink(e.path, &dst, reach, journals).map(|_| &tally.symlinks)
            }
            _ => make_node(e.path, &dst, reach, e.kind, journals).map(|_| &tally.others),
        };
        match made {
            Ok(counter) => {
                match meta::apply_path(e.path, &dst, reach, e.kind, m, Differences::ALL, &opts.meta)
                {
                    Ok(_) => tally.count(counter),
                    Err(err) => tally.fail(err),
                }
            }
            Err(Made::Skipped(err)) => tally.skips.lock().expect("skips").push(err),
            Err(Made::Failed(err)) => tally.fail(err),
        }
    });
}

enum Made {
    Skipped(ItemError),
    Failed(ItemError),
}

/// Replace whatever non-directory is at `dst` (reached beneath its anchor; a symlink there is
/// replaced, never followed) by what `create` makes. A destination that is the source itself
/// (`src_id`, the source's (device, inode)) is refused, never removed.
///
/// With journals kept (`journals`: the copy's mapping), a journal of `src` beside `dst` goes
/// before the entry in the way: that entry may be the partial file of a killed run (a source
/// file since swapped for a symlink, a fifo or a hard link), and once it is replaced nothing
/// else would ever remove its journal (the data phase sees regular files only). A journal
/// that can't be removed leaves the entry as it is (refused, named).
fn replacing(
    dst: &[u8],
    (src, src_id): (&[u8], (u64, u64)),
    reach: &Reach,
    journals: Option<&Mapping>,
    op: &'static str,
    create: impl Fn(&At) -> Result<(), Errno>,
) -> Result<(), Made> {
    let fail = |op: &'static str| move |e: io::Error| Made::Failed(ItemError::new(dst, op, e));
    let at = reach.dst(dst).map_err(fail("open parent"))?;
    match create(&at) {
        Err(Errno::EXIST) => {
            let st = at.lstat().map_err(fail("stat"))?;
            if reach::id_of(&st) == src_id {
                return Err(fail(op)(reach::same_file(src)));
            }
            if let Some(map) = journals {
                resume::drop_stale(map, reach, dst, src).map_err(Made::Failed)?;
            }
            at.remove(false).map_err(fail("remove (to replace it)"))?;
            create(&at).map_err(|e| fail(op)(e.into()))
        }
        r => r.map_err(|e| fail(op)(e.into())),
    }
}

fn make_symlink(
    src: &[u8],
    dst: &[u8],
    reach: &Reach,
    journals: Option<&Mapping>,
) -> Result<(), Made> {
    let failed = |op: &'static str| move |e: io::Error| Made::Failed(ItemError::new(src, op, e));
    let at = reach.src(src).map_err(failed("open parent"))?;
    let st = at.lstat().map_err(failed("stat"))?;
    let target = rustix::fs::readlinkat(at.dir(), at.name(), Vec::new())
        .map_err(|e| failed("read link")(e.into()))?;
    replacing(
        dst,
        (src, reach::id_of(&st)),
        reach,
        journals,
        "symlink",
        |d| rustix::fs::symlinkat(target.as_c_str(), d.dir(), d.name()),
    )
}

fn make_node(
    src: &[u8],
    dst: &[u8],
    reach: &Reach,
    kind: FileType,
    journals: Option<&Mapping>,
) -> Result<(), Made> {
    let st = reach
        .src(src)
        .and_then(|a| a.lstat())
        .map_err(|e| Made::Failed(ItemError::new(src, "stat", e)))?;
    let file_type = rustix::fs::FileType::from_raw_mode(st.st_mode);
    let r = replacing(
        dst,
        (src, reach::id_of(&st)),
        reach,
        journals,
        "mknod",
        |d| {
            rustix::fs::mknodat(
                d.dir(),
                d.name(),
                file_type,
                Mode::from_raw_mode(0o600),
                st.st_rdev,
            )
        },
    );
    match r {
        Err(Made::Failed(e))
            if e.source.raw_os_error() == Some(libc::EPERM)
                && matches!(kind, FileType::BlockDev | FileType::CharDev) =>
        {
            Err(Made::Skipped(ItemError::new(
                dst,
                "mknod (device nodes need privilege; skipped)",
                e.source,
            )))
        }
        r => r,
    }
}

/// A work item of the data phase: chunks of one big file, or whole small files.
struct Batch {
    chunks: Vec<Chunk>,
}

/// A chunk as it travels: its path as one byte string.
type ChunkMessage = (ByteBuf, u64, u64, u64, Meta);

/// A rank message (and so a work item): each chunk as (path, offset, length, file size, meta).
impl serde::Serialize for Batch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.chunks.iter().map(|c| {
            let path = Bytes::new(&c.path);
            (path, c.offset, c.length, c.file_size, c.meta)
        }))
    }
}

impl<'de> serde::Deserialize<'de> for Batch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Batch, D::Error> {
        let chunks = Vec::<ChunkMessage>::deserialize(d)?
            .into_iter()
            .map(|(path, offset, length, file_size, meta)| Chunk {
                path: path.into_vec(),
                offset,
                length,
                file_size,
                meta,
            })
            .collect();
        Ok(Batch { chunks })
    }
}

/// The chunk size for `total_bytes` over `workers` threads (all ranks): big enough that a big
/// file moves in few, large calls (one `copy_file_range` of 256 MiB beats 64 of 4 MiB), small
/// enough that every worker still gets two chunks. Between 4 MiB and 1 GiB, in whole MiB (so it
/// stays a multiple of any Lustre stripe size up to 1 MiB).
pub fn auto_chunk_size(total_bytes: u64, workers: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    let per = total_bytes / (2 * workers.max(1));
    (per.clamp(4 * MIB, 1024 * MIB) / MIB) * MIB
}

/// Chunks of files split over several chunks: how many are still to land on this rank (counting
/// from the file's total), and whether one failed.
struct Pending {
    remaining: u64,
    failed: bool,
    meta: Meta,
}

/// What the data phase works with.
struct Context<'a> {
    map: &'a Mapping,
    reach: &'a Reach,
    opts: &'a CopyOptions<'a>,
    tally: &'a Tally,
    stripes: &'a Striping<'a>,
    /// Journals of huge files: kept or not, and which resume.
    journals: &'a resume::Journals,
}

/// Files per rank the data phase plans at once when no `--batch-files` is given: the chunks of
/// a round (path, metadata and range each, on the rank that copies them) are what the phase
/// holds beyond the list, so memory stays flat in the number of files.
const ROUND_FILES: usize = 1 << 16;

/// [`ROUND_FILES`], or the tests' smaller round.
fn round_files() -> usize {
    crate::engine::test_seam::round_files(ROUND_FILES)
}

/// Copy (or compare and rewrite, as `transfer` says) `files` in batches. Returns true when
/// interrupted.
fn copy_files(comm: &dyn Comm, files: FileList, transfer: Transfer, cx: &Context) -> bool {
    let opts = cx.opts;
    let total = comm.sum(files.len() as u64);
    if total == 0 {
        return false;
    }
    if opts.batch_files == 0 {
        // Rounds of at most ROUND_FILES of this rank's files (as many rounds on every rank).
        let round = round_files();
        let mut rounds = [files.len().div_ceil(round) as u64];
        comm.allreduce(&mut rounds, ReduceOp::Max);
        if rounds[0] <= 1 {
            return copy_batch(comm, &files, transfer, cx);
        }
        for r in 0..rounds[0] as usize {
            let lo = (r * round).min(files.len());
            let hi = ((r + 1) * round).min(files.len());
            if copy_batch(comm, &files.select(lo..hi), transfer, cx) {
                return true;
            }
        }
        return false;
    }
    let per_batch = opts.batch_files;
    let (mine_from, _) = comm.offset_and_total(files.len() as u64);
    let mut interrupted = false;
    for b in 0..total.div_ceil(per_batch) {
        let (lo, hi) = (b * per_batch, (b + 1) * per_batch);
        let batch = files.select((0..files.len()).filter(|&i| {
            let g = mine_from + i as u64;
            lo <= g && g < hi
        }));
        interrupted |= copy_batch(comm, &batch, transfer, cx);
        if interrupted {
            break;
        }
    }
    interrupted
}

fn copy_batch(comm: &dyn Comm, files: &FileList, transfer: Transfer, cx: &Context) -> bool {
    let (map, opts, tally) = (cx.map, cx.opts, cx.tally);
    let threads = rayon::current_num_threads() as u64;
    let mut t = [
        files.len() as u64,
        files.iter().filter_map(|e| e.meta).map(|m| m.size).sum(),
        threads,
    ];
    comm.allreduce(&mut t, ReduceOp::Sum);
    let (cs, why) = cx
        .stripes
        .chunk_size(opts.chunk_size, auto_chunk_size(t[1], t[2]));
    if tally.chunk_size.fetch_max(cs, Ordering::Relaxed) < cs {
        *tally.chunk_reason.lock().expect("reason") = why;
    }
    if let Some(p) = opts.progress {
        p.total_items.fetch_add(t[0], Ordering::Relaxed);
        p.total_bytes.fetch_add(t[1], Ordering::Relaxed);
    }
    // Off Lustre: no destination path is built per chunk.
    let stripes_of = |src: &[u8], size: u64| {
        if cx.stripes.is_on() {
            cx.stripes.stripes_for(&map.dest(src), size, cs)
        } else {
            None
        }
    };
    let resumed = if !transfer.journals() {
        resume::Resumed::default()
    } else {
        resume::prepare(comm, files, cs, cx)
    };
    if let Some(h) = opts.hashing {
        reread_for_manifest(h, files, &resumed, cs, map);
    }
    let mut chunks = plan_striped_chunks(comm, files, cs, &stripes_of);
    // Files of several chunks are created (and sized) before any chunk is written, by the rank
    // holding their first chunk; a resumed file is there already.
    let journals = cx.journals.on() && transfer.journals();
    chunks
        .par_iter()
        .filter(|c| {
            c.offset == 0
                && c.file_size > cs
                && transfer.creates_first()
                && !resumed.contains(&c.path)
        })
        .for_each(|c| {
            let dst = map.dest(&c.path);
            let made = cx
                .reach
                .src(&c.path)
                .and_then(|s| s.lstat())
                .and_then(|src| {
                    let a = cx.reach.dst(&dst)?;
                    let id = reach::id_of(&src);
                    let source: (&[u8], striping::SourceId<'_>) = (&c.path[..], &|| Ok(id));
                    let made = cx.stripes.create(
                        &a,
                        &dst,
                        c.file_size,
                        cs,
                        OFlags::empty(),
                        0o600,
                        false,
                        source,
                    )?;
                    if journals && !made.fresh && c.file_size < journal::min_bytes() {
                        if let Err(e) = resume::drop_stale(map, cx.reach, &dst, &c.path) {
                            tally.fail(e);
                        }
                    }
                    let fd = made.fd;
                    // Sparse copies skip holes, so the size must be set here. Dense copies let the
                    // chunks extend the file: filling a pre-sized file is slower on ext4 (its
                    // unwritten extents are converted piece by piece).
                    if opts.data.sparse {
                        rustix::fs::ftruncate(&fd, c.file_size)?;
                    }
                    if journals
                        && resume::journaled(c.file_size, cs)
                        && !resume::users_name_in(map, cx.reach, &dst)
                    {
                        let jpath = journal::path_of(&dst);
                        if let Ok(j) = cx.reach.dst(&jpath) {
                            resume::start(&j, c, &fd, cs);
                        }
                    }
                    Ok(())
                });
            if let Err(e) = made {
                tally.fail(ItemError::new(&dst, "create", e));
            }
        });
    comm.barrier();
    let object_of = |c: &Chunk| {
        (c.file_size > cs)
            .then(|| stripes_of(&c.path, c.file_size))
            .flatten()
            .map(|s| (c.offset / cs) % s.period(cs))
    };
    // Chunks a journal says are done are not copied again; they count as landed.
    let mut landed = HashMap::new();
    let skipped = resume::skip_done(&mut chunks, &resumed, cs, &mut landed);
    tally.resumed_bytes.fetch_add(skipped, Ordering::Relaxed);
    if let Some(p) = opts.progress {
        p.add(0, skipped);
    }
    let items = work_items(chunks, cs, &object_of);
    let pending: Mutex<HashMap<Vec<u8>, Pending>> = Mutex::new(landed);
    let cfg = queue::Config {
        max_batch: 2,
        stop: opts.stop,
        progress: opts.progress,
        ..queue::Config::default()
    };
    let worker = Worker {
        map,
        opts,
        tally,
        transfer,
        cs,
        pending: &pending,
        stripes: cx.stripes,
        reach: cx.reach,
        journals,
        journals_on: cx.journals.on(),
    };
    let outcome = queue::run(comm, &cfg, items, |batch: Batch, _| {
        let mut scratch = Scratch {
            buf: Buffer::new(opts.data.bufsize),
            other: None,
            dirs: OpenDirs::new(cx.reach),
        };
        for c in batch.chunks {
            worker.chunk(c, &mut scratch);
        }
    });
    if outcome.interrupted && journals {
        // What landed is recorded before the run ends, so the rerun finds all of it.
        journal::flush();
    }
    let split = std::mem::take(&mut *pending.lock().expect("pending"));
    finish_split_files(comm, split, &worker);
    outcome.interrupted
}

/// `--manifest`: the files of this rank's `files` whose digest is to be read from their source
/// once the copy is done (a manifest holds the source's bytes, never the copy's): a resumed
/// file, whose journaled chunks this run does not read, and with SHA-256, which can't be
/// assembled from chunks read apart, a file of several chunks of `cs` bytes.
fn reread_for_manifest(
    h: &crate::engine::hashing::Hashing,
    files: &FileList,
    resumed: &resume::Resumed,
    cs: u64,
    map: &Mapping,
) {
    let Some(kind) = h.manifest else {
        return;
    };
    for e in files.iter() {
        let Some(m) = e.meta.filter(|_| e.kind == FileType::File) else {
            continue;
        };
        if resumed.contains(e.path) || (kind == HashKind::Sha256 && m.size > cs) {
            h.reread(&map.dest(e.path), e.path, m);
        }
    }
}

/// Small files (at most 256 of them) per work item, at most.
const FILES_PER_ITEM: usize = 256;

/// Bytes a small file counts for when grouping, besides its data: opening, creating and
/// finishing a file costs about as much as moving a few KiB.
const FILE_COST_BYTES: u64 = 4096;

/// The work items of a batch: each chunk of a big file (over `cs` bytes) alone, so its chunks
/// spread over ranks; small files grouped until a chunk's worth of bytes (counting
/// [`FILE_COST_BYTES`] per file) or [`FILES_PER_ITEM`] files. Big files' chunks are interleaved
/// by offset, so that workers running at once write different files (writers of one file
/// contend for its inode lock).
///
/// A striped Lustre file's chunks that fall in one OST object (`object_of` gives the object
/// group of a chunk, `None` when not striped) stay together as one item: whichever rank runs
/// or steals it, an object's stripes are written by one rank.
fn work_items(
    chunks: Vec<Chunk>,
    cs: u64,
    object_of: &dyn Fn(&Chunk) -> Option<u64>,
) -> Vec<Batch> {
    let mut items: Vec<Batch> = Vec::new();
    let mut group = Vec::new();
    let mut group_bytes = 0;
    // The item gathering one striped file's chunks of one object: (path, object) -> index.
    let mut object_items: HashMap<(Vec<u8>, u64), usize> = HashMap::new();
    for c in chunks {
        if c.file_size > cs {
            match object_of(&c) {
                Some(o) => match object_items.entry((c.path.clone(), o)) {
                    std::collections::hash_map::Entry::Occupied(e) => {
                        items[*e.get()].chunks.push(c);
                    }
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(items.len());
                        items.push(Batch { chunks: vec![c] });
                    }
                },
                None => items.push(Batch { chunks: vec![c] }),
            }
            continue;
        }
        group_bytes += c.length + FILE_COST_BYTES;
        group.push(c);
        if group_bytes >= cs || group.len() >= FILES_PER_ITEM {
            items.push(Batch {
                chunks: std::mem::take(&mut group),
            });
            group_bytes = 0;
        }
    }
    if !group.is_empty() {
        items.push(Batch { chunks: group });
    }
    items.sort_by_key(|b| match b.chunks.first() {
        Some(c) if c.file_size > cs => c.offset,
        _ => 0,
    });
    items
}

/// What one work item's chunks share: buffers, and what the last destination directory
/// gives new files.
struct Scratch {
    buf: Buffer,
    other: Option<Buffer>,
    dirs: OpenDirs,
}

/// The source and destination directories of the files being copied, held open while a work
/// item's files are in them (a run of files from one directory is the common case): files are
/// opened by name in them, one component to look up instead of a whole path.
struct OpenDirs {
    src: ParentDir,
    dst: ParentDir,
    /// What files created in the destination directory inherit (`None`: unknown).
    inherited: Option<meta::Inherited>,
    /// A destination file already existed: the item's next files are expected to exist too.
    existing: bool,
}

impl OpenDirs {
    /// Nothing held yet; parents are reached beneath the roots of `reach`.
    fn new(reach: &Reach) -> OpenDirs {
        OpenDirs {
            src: reach.src_parents(),
            dst: reach.dst_parents(),
            inherited: None,
            existing: false,
        }
    }

    /// Hold the parents of `src` and `dst` open.
    fn enter(&mut self, src: &[u8], dst: &[u8]) {
        self.src.hold(flist::path::parent(src));
        if self.dst.hold(flist::path::parent(dst)) {
            self.inherited = self.dst.fd().and_then(meta::Inherited::of_dir);
        }
    }
}

struct Worker<'a> {
    map: &'a Mapping,
    opts: &'a CopyOptions<'a>,
    tally: &'a Tally,
    transfer: Transfer,
    cs: u64,
    pending: &'a Mutex<HashMap<Vec<u8>, Pending>>,
    stripes: &'a Striping<'a>,
    reach: &'a Reach,
    /// Multi-chunk files keep journals ([`resume`]).
    journals: bool,
    /// Journals are kept in this run (also when comparing: a compared file's journal, left by
    /// an interrupted copy, goes once every byte was compared).
    journals_on: bool,
}

impl Worker<'_> {
    fn chunk(&self, c: Chunk, bufs: &mut Scratch) {
        let dst = self.map.dest(&c.path);
        let whole = c.file_size <= self.cs;
        let result = self.copy_chunk(&c, &dst, whole, bufs);
        let ok = match result {
            Ok(written) => {
                if self.journals
                    && !whole
                    && resume::journaled(c.file_size, self.cs)
                    && !resume::users_name_in(self.map, self.reach, &dst)
                {
                    resume::mark(&bufs.dirs.dst, &dst, &c, self.cs);
                }
                self.tally.bytes.fetch_add(written, Ordering::Relaxed);
                if let Some(p) = self.opts.progress {
                    p.add(u64::from(whole), c.length);
                }
                true
            }
            Err(e) => {
                if let Some(p) = self.opts.progress {
                    p.errors.fetch_add(1, Ordering::Relaxed);
                }
                self.tally.fail(e);
                false
            }
        };
        if whole {
            if ok {
                self.tally.count(&self.tally.files);
            }
            return;
        }
        let total_chunks = c.file_size.div_ceil(self.cs);
        let done = {
            let mut map = self.pending.lock().expect("pending");
            let p = map.entry(c.path.clone()).or_insert(Pending {
                remaining: total_chunks,
                failed: false,
                meta: c.meta,
            });
            p.remaining -= 1;
            p.failed |= !ok;
            if p.remaining == 0 {
                let failed = p.failed;
                map.remove(&c.path);
                Some(failed)
            } else {
                None
            }
        };
        // This rank wrote every chunk: the file is complete now.
        if done == Some(false) {
            self.complete(&c.path, &c.meta);
        }
    }

    /// Apply a finished multi-chunk file's metadata: unless its source changed while it was
    /// read (then it is named and keeps the times it got here).
    fn complete(&self, src: &[u8], m: &Meta) {
        let dst = self.map.dest(src);
        let now = self
            .reach
            .src(src)
            .and_then(|at| {
                let mut flags = OFlags::RDONLY | OFlags::NONBLOCK;
                if self.reach.src_confined() {
                    flags |= OFlags::NOFOLLOW;
                }
                // A racy file is read again through it (counted when its first chunk was).
                self.opts.noatime.open_part(false, flags, |f| at.open(f, 0))
            })
            .and_then(|fd| Ok((rustix::fs::fstat(&fd)?, fd)))
            .map_err(|e| ItemError::new(src, "stat", e))
            .and_then(|(st, fd)| {
                let copy = || {
                    let at = self.reach.dst(&dst)?;
                    at.open(OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK, 0)
                };
                settled(fd.as_fd(), &st, copy, m).map_err(|e| ItemError::new(src, "read again", e))
            });
        match now.map(|found| found.error(src)) {
            Ok(Some(failure)) => {
                // A compared file rewritten in place may carry the source's mtime already.
                if let Ok(fd) = self
                    .reach
                    .dst(&dst)
                    .and_then(|at| at.open(OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK, 0))
                {
                    crate::engine::hashing::mark_unfinished_before(
                        fd.as_fd(),
                        (m.mtime, m.mtime_nsec),
                    );
                }
                return self.tally.fail(failure);
            }
            Ok(None) => {}
            Err(e) => return self.tally.fail(e),
        }
        if !self.transfer.finish_chunks(self, src, &dst, m) {
            return;
        }
        if self.journals && resume::journaled(m.size, self.cs) {
            if let Err(e) = resume::finish(self.map, self.reach, &dst, src) {
                return self.tally.fail(e);
            }
        }
        match meta::apply_path(
            src,
            &dst,
            self.reach,
            FileType::File,
            m,
            Differences::ALL,
            &self.opts.meta,
        ) {
            Ok(_) => {
                self.tally.count(&self.tally.files);
                if let Some(p) = self.opts.progress {
                    p.add(1, 0);
                }
            }
            Err(e) => self.tally.fail(e),
        }
    }

    /// Remove the journal of a compared file `dst` (copied from `src`, `size` bytes) when it
    /// may have one: left by an interrupted copy, it would make the next sync copy the file
    /// again.
    fn cleanup_journal(&self, src: &[u8], dst: &[u8], size: u64) -> Result<(), ItemError> {
        if self.journals_on && size >= journal::min_bytes() {
            resume::finish(self.map, self.reach, dst, src)?;
        }
        Ok(())
    }

    /// Open the source of a chunk for reading; `first`: the chunk is its file's first (the one
    /// that counts a file read without `O_NOATIME`).
    fn open_src(
        &self,
        dirs: &OpenDirs,
        src: &[u8],
        direct: bool,
        first: bool,
    ) -> Result<OwnedFd, ItemError> {
        let err = |e: io::Error| ItemError::new(src, "open", e);
        let at = dirs.src.entry(src).map_err(err)?;
        let mut flags = OFlags::RDONLY;
        if self.reach.src_confined() {
            flags |= OFlags::NOFOLLOW;
        }
        if direct {
            flags |= OFlags::DIRECT;
        }
        self.opts
            .noatime
            .open_part(first, flags, |f| at.open(f, 0))
            .map_err(err)
    }

    fn copy_chunk(
        &self,
        c: &Chunk,
        dst: &[u8],
        whole: bool,
        bufs: &mut Scratch,
    ) -> Result<u64, ItemError> {
        // The destination is direct when the chunk's writes are whole blocks (all but a file's
        // unaligned tail).
        let direct = self.transfer.direct(self.opts.data.direct);
        bufs.dirs.enter(&c.path, dst);
        let src_fd = self.open_src(&bufs.dirs, &c.path, direct, c.offset == 0)?;
        // The source's (device, inode), for the same-file checks: taken only when a
        // destination may be the source (it already existed), not for each new file.
        let known_src_id = std::cell::Cell::new(None);
        let src_id = || -> io::Result<(u64, u64)> {
            if let Some(id) = known_src_id.get() {
                return Ok(id);
            }
            let id = rustix::fs::fstat(&src_fd).map(|st| reach::id_of(&st))?;
            known_src_id.set(Some(id));
            Ok(id)
        };
        let open_err = |e: io::Error| ItemError::new(dst, "open", e);
        let extra = if direct && c.length % data::DIRECT_ALIGN as u64 == 0 {
            OFlags::DIRECT
        } else {
            OFlags::empty()
        };
        let opened = if whole && self.transfer.creates_first() {
            self.create_dest(c, dst, extra, bufs, &src_id)
        } else {
            let at = bufs.dirs.dst.entry(dst).map_err(open_err)?;
            let flags = self.transfer.open_flags() | extra;
            // A compared destination is read too (`sync --contents`).
            let open = |f| at.open(f, 0);
            match self.transfer {
                Transfer::Compare => self.opts.noatime.open_part(c.offset == 0, flags, open),
                Transfer::Copy => open(flags),
            }
            .map(|fd| Opened {
                fd,
                right: meta::AlreadyRight::default(),
                fresh: false,
            })
            .map_err(open_err)
        }?;
        let dst_fd = opened.fd;
        // Never a byte into the source itself (a chunk of a file whose creation was refused,
        // or a compared file that is the source). A file this open created is not.
        if !opened.fresh {
            let dst_id = rustix::fs::fstat(&dst_fd)
                .map(|st| reach::id_of(&st))
                .map_err(|e| open_err(e.into()))?;
            let src_id = src_id().map_err(|e| ItemError::new(&c.path, "stat", e))?;
            if dst_id == src_id {
                return Err(ItemError::new(dst, "write", reach::same_file(&c.path)));
            }
        }
        let data_opts = DataOptions {
            direct,
            ..self.opts.data
        };
        let to_item = |e: DataError| {
            let path = if e.op.starts_with("read") && !e.op.contains("destination") {
                &c.path[..]
            } else {
                dst
            };
            ItemError::new(path, e.op, e.source)
        };
        let mut cfr_ok = true;
        // --verify, --manifest: the bytes are hashed as they are read (no copy_file_range). A
        // SHA-256 manifest's file of several chunks is hashed from its source once copied
        // ([`reread_for_manifest`]): its chunks need no hashing of their own.
        let mut hashed = self
            .opts
            .hashing
            .filter(|h| whole || h.verify || h.manifest != Some(HashKind::Sha256))
            .map(|h| h.range(c.offset, c.length, c.file_size));
        let hashing = hashed.is_some();
        let mut see = |b: &[u8]| {
            if let Some(h) = hashed.as_mut() {
                h.update(b);
            }
        };
        let seen: data::Seen<'_> = hashing.then_some(&mut see);
        let written = self
            .transfer
            .bytes(&src_fd, &dst_fd, c, &data_opts, bufs, &mut cfr_ok, seen)
            .map_err(to_item)?;
        if whole && self.transfer.truncates_sparse(self.opts.data.sparse) {
            rustix::fs::ftruncate(&dst_fd, c.file_size)
                .map_err(|e| ItemError::new(dst, "truncate", e.into()))?;
        }
        match (self.opts.hashing, hashed) {
            (Some(h), Some(hashed)) => h.landed(
                dst_fd.as_fd(),
                dst,
                c.file_size,
                (c.offset, c.length),
                hashed,
            )?,
            // The seam `landed` has (a copy damaged after its write), for a chunk not hashed.
            _ => crate::engine::test_seam::corrupt_before_verify(
                dst_fd.as_fd(),
                dst,
                c.offset,
                c.length,
            ),
        }
        crate::engine::test_seam::after_chunk_read();
        if whole {
            self.finish_whole(c, dst, &src_fd, &dst_fd, written, opened.right)?;
        }
        Ok(written)
    }

    /// Create (or truncate) the destination of a whole file copied, with its final mode when
    /// the directory lets it be created so.
    fn create_dest(
        &self,
        c: &Chunk,
        dst: &[u8],
        extra: OFlags,
        bufs: &mut Scratch,
        src_id: &dyn Fn() -> io::Result<(u64, u64)>,
    ) -> Result<Opened, ItemError> {
        let open_err = |e: io::Error| ItemError::new(dst, "open", e);
        let at = bufs.dirs.dst.entry(dst).map_err(open_err)?;
        let (mode, would_be_right) = match bufs.dirs.inherited {
            Some(inherited) => self.opts.meta.create_mode(&c.meta, inherited),
            None => (0o600, meta::AlreadyRight::default()),
        };
        // Once a file was in the way, the rest of the item (an existing tree, a sync's
        // updates) is truncated without trying to create it first.
        let exclusive = !bufs.dirs.existing;
        let source: (&[u8], striping::SourceId<'_>) = (&c.path[..], src_id);
        let f = self
            .stripes
            .create(
                &at,
                dst,
                c.file_size,
                self.cs,
                extra,
                mode,
                exclusive,
                source,
            )
            .map_err(open_err)?;
        if f.fresh {
            // A file created here with its final mode and owner needs neither chown nor chmod;
            // created with O_EXCL, it is a new inode, so not the source.
            return Ok(Opened {
                fd: f.fd,
                right: would_be_right,
                fresh: true,
            });
        }
        bufs.dirs.existing = true;
        if self.journals_on && c.file_size < journal::min_bytes() {
            if let Err(e) = resume::drop_stale(self.map, self.reach, dst, &c.path) {
                self.tally.fail(e);
            }
        }
        Ok(Opened {
            fd: f.fd,
            right: meta::AlreadyRight::default(),
            fresh: false,
        })
    }

    /// A whole file's bytes landed: check that its source did not change as it was read, then
    /// give it the source's metadata (a compared file only when something differs).
    fn finish_whole(
        &self,
        c: &Chunk,
        dst: &[u8],
        src_fd: &OwnedFd,
        dst_fd: &OwnedFd,
        written: u64,
        right: meta::AlreadyRight,
    ) -> Result<(), ItemError> {
        // Read whole: the source must still be what was listed, or the copy may mix two
        // versions (GNU tar's "file changed as we read it"); it then keeps its own times.
        let now =
            rustix::fs::fstat(src_fd).map_err(|e| ItemError::new(&c.path, "stat", e.into()))?;
        let copy = || racy::reopen_for_reading(dst_fd.as_fd());
        let found = settled(src_fd.as_fd(), &now, copy, &c.meta)
            .map_err(|e| ItemError::new(&c.path, "read again", e))?;
        if let Some(failure) = found.error(&c.path) {
            // A compared file rewritten in place may carry the source's mtime already.
            crate::engine::hashing::mark_unfinished_before(
                dst_fd.as_fd(),
                (c.meta.mtime, c.meta.mtime_nsec),
            );
            return Err(failure);
        }
        if !self.transfer.finish_whole(self, c, dst, dst_fd, written)? {
            return Ok(());
        }
        meta::apply_fd(
            dst_fd.as_fd(),
            src_fd.as_fd(),
            (&c.path, dst),
            &c.meta,
            &self.opts.meta,
            right,
        )
    }
}

/// A chunk's destination, open.
struct Opened {
    fd: OwnedFd,
    /// What of the metadata its creation already made right.
    right: meta::AlreadyRight,
    /// Created by this open (O_EXCL): a new inode, so not the source.
    fresh: bool,
}

/// True when the source listed as `m` is not the same now (`st`): its size, mtime or ctime
/// moved. The ctime catches a rewrite that kept size and mtime (`touch -r`, `cp -p`).
fn changed_since(m: &Meta, st: &rustix::fs::Stat) -> bool {
    let now = Meta::from_stat(st);
    (
        now.size,
        now.mtime,
        now.mtime_nsec,
        now.ctime,
        now.ctime_nsec,
    ) != (m.size, m.mtime, m.mtime_nsec, m.ctime, m.ctime_nsec)
}

/// What a second look at a source after its copy found ([`settled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settled {
    /// Its times are the listed ones and, if it was written recently, its bytes its copy's.
    Same,
    /// Its size, mtime or ctime moved since it was listed.
    Moved,
    /// Written just before it was read: its times are the listed ones, but read again a moment
    /// later its bytes are not its copy's (a write was going on as it was read).
    Torn,
}

impl Settled {
    /// The failure of a source found so, if it is one.
    fn error(self, src: &[u8]) -> Option<ItemError> {
        match self {
            Settled::Same => None,
            Settled::Moved => Some(changed_error(src)),
            Settled::Torn => Some(torn_error(src)),
        }
    }
}

/// Look again at the source listed as `m` (open as `src`, just stat'ed as `now`) after its
/// copy: its times, and when it was written recently ([`racy`]), once a write under way had a
/// moment to move on, its times again and its bytes against the copy's (`copy` opens it for
/// reading, called only then).
fn settled(
    src: BorrowedFd<'_>,
    now: &rustix::fs::Stat,
    copy: impl FnOnce() -> io::Result<OwnedFd>,
    m: &Meta,
) -> io::Result<Settled> {
    let ctime = (m.ctime, m.ctime_nsec);
    if changed_since(m, now) {
        return Ok(Settled::Moved);
    }
    if !racy::racy(ctime) {
        return Ok(Settled::Same);
    }
    racy::settle(ctime);
    if changed_since(m, &rustix::fs::fstat(src)?) {
        return Ok(Settled::Moved);
    }
    // Opened again for plain reads (it may be open with O_DIRECT).
    let src = racy::reopen_for_reading(src)?;
    Ok(if racy::same_bytes(&src, 0, &copy()?, 0, m.size)? {
        Settled::Same
    } else {
        Settled::Torn
    })
}

/// The failure of a file written just before it was read whose bytes, read again a moment
/// later, are not its copy's ([`Settled::Torn`]).
fn torn_error(src: &[u8]) -> ItemError {
    ItemError::new(
        src,
        "read",
        io::Error::other(
            "file changed as we read it (it was being written: read again a moment later, its \
             bytes differ from the copy's though its size and times do not): the copy may mix \
             old and new data and does not get the source's times; rerun to copy it again",
        ),
    )
}

/// The failure of a file whose source changed while it was read.
fn changed_error(src: &[u8]) -> ItemError {
    ItemError::new(
        src,
        "read",
        io::Error::other(
            "file changed as we read it (its size, mtime or ctime moved since it was listed): \
             the copy may mix old and new data and does not get the source's times; rerun to \
             copy it again",
        ),
    )
}

/// Files whose chunks landed on several ranks: each rank sends what it did to the file's home
/// rank, which applies the metadata when every chunk landed and none failed.
fn finish_split_files(comm: &dyn Comm, pending: HashMap<Vec<u8>, Pending>, w: &Worker) {
    let size = comm.size();
    let mut sends = vec![Vec::new(); size];
    for (path, p) in &pending {
        let out = &mut sends[(hash_path(path) % size as u64) as usize];
        typed::encode_into(&(Bytes::new(path), p.remaining, p.failed, p.meta), out);
    }
    let got = comm.alltoallv(sends);
    let mut sums: HashMap<Vec<u8>, (u64, bool, Meta, usize)> = HashMap::new();
    for bytes in &got {
        for part in typed::each::<(ByteBuf, u64, bool, Meta)>(bytes) {
            let (path, remaining, failed, meta) = typed::sent(part);
            let e = sums.entry(path.into_vec()).or_insert((0, false, meta, 0));
            // Each rank counted down from the file's total: the chunks it did are total - remaining.
            e.0 += remaining;
            e.1 |= failed;
            e.3 += 1;
        }
    }
    let cs = w.cs;
    sums.par_iter()
        .for_each(|(path, (remaining, failed, meta, ranks))| {
            let total = meta.size.div_ceil(cs);
            let done = *ranks as u64 * total - remaining;
            if !failed && done == total {
                w.complete(path, meta);
            }
        });
}

/// Hard links to make: (target, member) source paths.
type LinkPairs = [(Vec<u8>, Vec<u8>)];

/// Hard links: first into the files outside the copy (`--link-dest`), then, once every rank
/// made those, to the first member of each group (after all data is in place). A group's
/// first member may itself be an outside link (made on any rank): linking its members before
/// it exists fails, so the two kinds never run together. `(links, external)`: (first or
/// outside file, member) source paths; `journals`: the mapping when journals are kept (see
/// [`replacing`]). Collective.
fn make_links(
    comm: &dyn Comm,
    (links, external): (&LinkPairs, &LinkPairs),
    map: &Mapping,
    reach: &Reach,
    tally: &Tally,
    journals: Option<&Mapping>,
) {
    let make = |target: &[u8], member: &[u8], inside: bool| {
        let dst = map.dest(member);
        match link_member(target, inside, member, &dst, reach, journals) {
            Ok(()) => tally.count(&tally.hardlinks),
            Err(Made::Failed(e) | Made::Skipped(e)) => tally.fail(e),
        }
    };
    external
        .par_iter()
        .for_each(|(target, member)| make(target, member, false));
    comm.barrier();
    links
        .par_iter()
        .for_each(|(first, member)| make(&map.dest(first), member, true));
}

/// Link `dst` (the copy of the source `member`) to `target`: a copy made in this run
/// (`inside`, reached beneath the destination anchors) or a file outside (`--link-dest`).
fn link_member(
    target: &[u8],
    inside: bool,
    member: &[u8],
    dst: &[u8],
    reach: &Reach,
    journals: Option<&Mapping>,
) -> Result<(), Made> {
    let failed = |p: &[u8], op: &'static str, e: io::Error| Made::Failed(ItemError::new(p, op, e));
    let src_st = reach
        .src(member)
        .and_then(|a| a.lstat())
        .map_err(|e| failed(member, "stat", e))?;
    let t = if inside {
        reach.dst(target)
    } else {
        At::new(target)
    }
    .map_err(|e| failed(target, "open parent", e))?;
    let src = (member, reach::id_of(&src_st));
    replacing(dst, src, reach, journals, "link", |d| {
        rustix::fs::linkat(
            t.dir(),
            t.name(),
            d.dir(),
            d.name(),
            rustix::fs::AtFlags::empty(),
        )
    })
}

/// Directories' metadata, deepest level first (so a directory that loses its owner's write or
/// search permission is done after everything below it): ranks meet between two levels where
/// some rank's directory has its parent on another rank ([`levels_meet`]), and all are done
/// before this returns.
fn dir_metadata(
    comm: &dyn Comm,
    dirs: &FileList,
    only_if_differ: bool,
    map: &Mapping,
    reach: &Reach,
    opts: &CopyOptions,
    tally: &Tally,
) {
    let levels = by_depth(comm, dirs);
    let meet = levels_meet(comm, &levels);
    for (k, level) in levels.iter().enumerate().rev() {
        (0..level.len()).into_par_iter().for_each(|i| {
            let e = level.entry(i);
            let m = &e.meta.expect("stat list");
            let dst = map.dest(e.path);
            let st = match reach.dst(&dst).and_then(|a| a.lstat()) {
                Ok(st) => st,
                // Not there, or beneath something that is not a directory: its creation (or
                // its parent's) failed and was reported; one failure per item.
                Err(e) if beneath::is_symlink_error(&e) || e.kind() == io::ErrorKind::NotFound => {
                    return
                }
                Err(e) => return tally.fail(ItemError::new(&dst, "stat", e)),
            };
            if FileType::from_mode(st.st_mode) != FileType::Dir {
                return; // "a non-directory is in the way", reported by make_dirs
            }
            let what = if only_if_differ {
                // A directory touched anyway (one this run made, say) gets its project ID
                // checked too; an equal one's is compared while planning (sync's fix pass).
                let d = Differences::between(m, &Meta::from_stat(&st), FileType::Dir);
                Differences {
                    projid: d.any(),
                    ..d
                }
            } else {
                Differences::ALL
            };
            if what.any() {
                if let Err(err) =
                    meta::apply_path(e.path, &dst, reach, FileType::Dir, m, what, &opts.meta)
                {
                    tally.fail(err);
                }
            }
        });
        if k > 0 && meet[k] {
            comm.barrier();
        }
    }
    comm.barrier();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A batch of chunks travels whole between ranks: odd path bytes, sizes, metadata.
    #[test]
    fn batches_round_trip_between_ranks() {
        let chunk = |path: &[u8], offset| Chunk {
            path: path.to_vec(),
            offset,
            length: 1 << 20,
            file_size: u64::MAX,
            meta: Meta {
                mode: 0o100644,
                size: u64::MAX,
                mtime: -5,
                ..Meta::default()
            },
        };
        let batch = Batch {
            chunks: vec![chunk(b"/a b\n|\xff", 0), chunk(b"", 1 << 40)],
        };
        let bytes = typed::encode(&batch);
        let back = typed::decode::<Batch>(&bytes).unwrap();
        assert_eq!(back.chunks, batch.chunks);
        assert!(typed::decode::<Batch>(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn automatic_chunks_grow_with_the_data_and_keep_every_worker_busy() {
        const MIB: u64 = 1 << 20;
        assert_eq!(auto_chunk_size(0, 2), 4 * MIB);
        assert_eq!(auto_chunk_size(80 * MIB, 2), 20 * MIB);
        assert_eq!(auto_chunk_size(2048 * MIB, 2), 512 * MIB);
        assert_eq!(auto_chunk_size(1 << 50, 2), 1024 * MIB);
        // 256 ranks of 16 threads on 1 TiB: 128 MiB chunks, two per thread.
        assert_eq!(auto_chunk_size(1 << 40, 256 * 16), 128 * MIB);
    }

    #[test]
    fn a_striped_files_chunks_of_one_ost_object_travel_as_one_item() {
        let cs = 1 << 20;
        let chunks: Vec<Chunk> = (0..12)
            .map(|k| Chunk {
                path: b"/striped".to_vec(),
                offset: k * cs,
                length: cs,
                file_size: 12 * cs,
                meta: Meta::default(),
            })
            .collect();
        // Four stripes of `cs` bytes: chunk k is in object k % 4.
        let stripes = flist::chunk::Stripes { count: 4, size: cs };
        let object_of = |c: &Chunk| Some((c.offset / cs) % stripes.period(cs));
        let items = work_items(chunks, cs, &object_of);
        assert_eq!(items.len(), 4, "one item per object");
        for item in &items {
            let objects: HashSet<u64> = item.chunks.iter().map(|c| (c.offset / cs) % 4).collect();
            assert_eq!(objects.len(), 1, "one object per item: {objects:?}");
            assert_eq!(item.chunks.len(), 3);
        }
    }

    #[test]
    fn on_lustre_chunks_are_stripes_or_multiples_of_them() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().as_os_str().as_encoded_bytes().to_vec();
        let fake = lustre_sys::fake::Fake::new(vec![tmp.path().to_path_buf()], 8);
        let none = lustre_sys::policy::Overrides::default();
        let on = Striping::detect(&fake, std::slice::from_ref(&root), none);
        assert!(on.is_on());
        assert_eq!(on.ost_count(), 8);
        const MIB: u64 = 1 << 20;
        // Automatic: one 1-4 MiB stripe per chunk, whatever the automatic size was.
        assert_eq!(on.chunk_size(0, 512 * MIB).0, 4 * MIB);
        assert_eq!(on.chunk_size(0, 4 * MIB).0, 4 * MIB);
        // Given: rounded up to a multiple of the stripe size (3 MiB -> 3 MiB stripes; 5 MiB ->
        // 4 MiB stripes, so 8 MiB chunks).
        assert_eq!(on.chunk_size(3 * MIB, 512 * MIB).0, 3 * MIB);
        assert_eq!(on.chunk_size(5 * MIB, 512 * MIB).0, 8 * MIB);
        // --stripe-size wins.
        let two = lustre_sys::policy::Overrides {
            size: Some(2 << 20),
            ..Default::default()
        };
        let on = Striping::detect(&fake, std::slice::from_ref(&root), two);
        assert_eq!(on.chunk_size(0, 512 * MIB).0, 2 * MIB);
        assert_eq!(on.chunk_size(5 * MIB, 512 * MIB).0, 6 * MIB);
        // Off Lustre: as asked, or automatic; and no layout call.
        let counting = lustre_sys::counting::Counting::new(lustre_sys::System);
        let off = Striping::detect(&counting, std::slice::from_ref(&root), none);
        assert!(!off.is_on());
        assert_eq!(off.chunk_size(0, 512 * MIB).0, 512 * MIB);
        assert_eq!(off.chunk_size(5 * MIB, 512 * MIB).0, 5 * MIB);
        assert_eq!(off.stripes_for(&root, 100 << 30, 4 * MIB), None);
        assert_eq!(counting.layout_calls(), 0);
    }

    #[test]
    fn small_files_travel_together_and_big_files_chunk_by_chunk_interleaved() {
        let chunk = |path: &str, offset: u64, length: u64, file_size: u64| Chunk {
            path: path.as_bytes().to_vec(),
            offset,
            length,
            file_size,
            meta: Meta::default(),
        };
        let cs = 1 << 20;
        let mut chunks: Vec<Chunk> = (0..1000)
            .map(|i| chunk(&format!("/s{i}"), 0, 100, 100))
            .collect();
        for f in ["/big1", "/big2"] {
            for k in 0..3 {
                chunks.push(chunk(f, k * cs, cs, 3 * cs));
            }
        }
        let items = work_items(chunks, cs, &|_| None);
        let small: Vec<usize> = items
            .iter()
            .filter(|b| b.chunks[0].file_size <= cs)
            .map(|b| b.chunks.len())
            .collect();
        assert_eq!(small.iter().sum::<usize>(), 1000);
        assert_eq!(
            small.len(),
            4,
            "1000 small files travel as 4 items, not 1000: {small:?}"
        );
        assert!(small.iter().all(|&n| n <= FILES_PER_ITEM));
        let big: Vec<(&[u8], u64)> = items
            .iter()
            .filter(|b| b.chunks[0].file_size > cs)
            .map(|b| {
                assert_eq!(
                    b.chunks.len(),
                    1,
                    "a big file's chunk is an item of its own"
                );
                (b.chunks[0].path.as_slice(), b.chunks[0].offset)
            })
            .collect();
        // Neighbours (taken by workers at the same time) belong to different files.
        assert_eq!(big.len(), 6);
        assert!(big.windows(2).all(|w| w[0].0 != w[1].0), "{big:?}");
    }

    #[test]
    fn mapping_keeps_component_boundaries() {
        let m = Mapping::new(vec![
            (b"/a/b".to_vec(), b"/d".to_vec()),
            (b"/a/b/c".to_vec(), b"/e".to_vec()),
        ]);
        assert_eq!(m.dest(b"/a/b"), b"/d");
        assert_eq!(m.dest(b"/a/b/x/y"), b"/d/x/y");
        assert_eq!(m.dest(b"/a/b/c/z"), b"/e/z");
        assert_eq!(m.rel(b"/a/b/x/y"), b"x/y");
        assert_eq!(m.rel(b"/a/b"), b"");
        let root = Mapping::new(vec![(b"/".to_vec(), b"/t".to_vec())]);
        assert_eq!(root.dest(b"/x"), b"/t/x");
    }

    #[test]
    fn sources_of_inverts_the_mapping() {
        let m = Mapping::new(vec![
            (b"/a/b".to_vec(), b"/d".to_vec()),
            (b"/a/b/c".to_vec(), b"/e".to_vec()),
            (b"/x/big".to_vec(), b"/e/big".to_vec()),
        ]);
        assert_eq!(m.sources_of(b"/d/x/y"), vec![b"/a/b/x/y".to_vec()]);
        assert_eq!(m.sources_of(b"/d"), vec![b"/a/b".to_vec()]);
        // /a/b/c/z goes to /e/z, not /d/c/z.
        assert_eq!(m.sources_of(b"/d/c/z"), Vec::<Vec<u8>>::new());
        assert_eq!(m.sources_of(b"/e/z"), vec![b"/a/b/c/z".to_vec()]);
        // Two sources land on one name: both are named.
        assert_eq!(
            m.sources_of(b"/e/big"),
            vec![b"/a/b/c/big".to_vec(), b"/x/big".to_vec()]
        );
        assert_eq!(m.sources_of(b"/f"), Vec::<Vec<u8>>::new());
        let root = Mapping::new(vec![(b"/".to_vec(), b"/t".to_vec())]);
        assert_eq!(root.sources_of(b"/t/x"), vec![b"/x".to_vec()]);
    }
}
