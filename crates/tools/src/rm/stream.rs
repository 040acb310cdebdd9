//! `rm -i LIST` on a list file larger than the memory limit (issue 34): the list is read a
//! bounded piece at a time ([`flist::io::CacheShare`]), twice.
//!
//! 1. Check: every path is made normal and checked (`/` refuses the whole run, as in memory),
//!    the list's topmost entries found (what entries are reached from), and the directories
//!    spilled into groups by depth ([`flist::spill::groups`]). Nothing is removed yet, so a
//!    full TMPDIR (or a list naming `/`) removes nothing.
//! 2. Files: each piece is checked again as the in-memory run checks its list (`..` refused,
//!    names that are gone reported, `--match`/`--exclude`), and its non-directories are
//!    removed over all ranks as the piece is read.
//! 3. Directories, deepest level first: each level read back from the spill a piece at a time
//!    and removed (`rmdir`) over all ranks; ranks meet between levels and tell each other which
//!    directories failed or were not selected, whose ancestors then stay.
//!
//! Entries are reached as in the in-memory run ([`crate::engine::remove::Remover`]): from the
//! parents of the list's topmost entries, never through a symlink, each removed by name in its
//! parent. `--dryrun` reads the same way and removes nothing.

use super::{add_ancestors, Options, Rm};
use crate::engine::batches::run_batches;
use crate::engine::context::{Context, Error};
use crate::engine::input::Input;
use crate::engine::locks::lock;
use flist::beneath::Roots;
use flist::distribute::spread;
use flist::io::{self, CacheShare};
use flist::path::{depth, display};
use flist::restat::{restat, Which};
use flist::spill::groups::{Grouped, Groups};
use flist::spill::{MemoryLimit, SpillDir};
use flist::units::human_bytes;
use flist::{Detail, FileList, FileType, ItemError};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use steal::ordered::in_rank_order;
use steal::typed::ByteStrings;
use steal::{Comm, CommExt};

/// What a removal of a list file piece by piece spilled; the same on every rank.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RmSpill {
    /// Records of the largest piece read at once.
    pub piece_records: u64,
    /// Directories spilled (all ranks), to be removed deepest first.
    pub dirs: u64,
    /// Bytes written to spill files by all ranks together.
    pub spill_bytes: u64,
    /// The most any one rank wrote to its spill file.
    pub spill_bytes_max_rank: u64,
}

impl RmSpill {
    /// The report's line: `Spilled: ... to DIR (...; removed)`.
    pub fn describe(&self, dir: &str) -> String {
        format!(
            "Spilled: {} of {} directories by depth to {dir}, the list read in pieces of at \
             most {} records (at most {} on one rank; removed)",
            human_bytes(self.spill_bytes),
            self.dirs,
            self.piece_records,
            human_bytes(self.spill_bytes_max_rank)
        )
    }
}

pub(super) use crate::engine::pieces::Plan;

/// Whether `rm -i LIST` outgrows the memory limit ([`crate::engine::pieces::plan`]). Refuses
/// (a usage error, nothing removed) what cannot be streamed: `-o` and `-T`, which keep what
/// they need of every entry. Collective.
pub(super) fn plan(comm: &dyn Comm, options: &Options) -> Result<Plan, Error> {
    let plan = crate::engine::pieces::plan(comm, &options.input, options.memory_limit)?;
    let (Plan::Stream(_, limit), Input::File { path, .. }) = (&plan, &options.input) else {
        return Ok(plan);
    };
    let refuse = |what: &str| {
        Err(Error::new(format!(
            "{what} cannot be kept: the list {} is larger than the memory limit ({}) and is \
             removed a piece at a time (raise --memory-limit; nothing removed)",
            display(path),
            limit.describe()
        )))
    };
    if options.output.is_some() {
        return refuse("-o (the list of what was removed)");
    }
    if options.traceless {
        return refuse("-T (the times of every parent directory)");
    }
    Ok(plan)
}

/// How the pieces are read: records a piece, and the working directory paths are made
/// absolute against.
struct Reading<'a> {
    input: &'a [u8],
    per_piece: usize,
    cwd: &'a [u8],
}

/// Remove what the list `share` names piece by piece within `limit` (collective; see the
/// module). `Err`: a usage error (a list naming `/`, unreadable), nothing removed.
pub(super) fn run(
    comm: &dyn Comm,
    options: &Options,
    rm: &mut Rm,
    mut share: CacheShare,
    limit: MemoryLimit,
    cwd: &[u8],
) -> Result<bool, Error> {
    let context = &options.context;
    let stop = &context.stop;
    let Input::File { path: input, .. } = &options.input else {
        unreachable!("planned for a list file");
    };
    let rec = share.record_bytes().max(1);
    let how = Reading {
        input,
        per_piece: (limit.bytes / 4 / rec).clamp(1, (4 << 20) / rec + 1) as usize,
        cwd,
    };
    let dir = SpillDir::new(options.tmpdir.as_deref());
    rm.memory_limit = Some(limit.describe());
    rm.tmpdir = Some(display(dir.path()).into_owned());

    // The list is read three times (its directories in pass 3 from the spill): a list
    // changed between the readings is not trusted further.
    let stamp = list_stamp(input);

    // 1. Check every path, find the tops, spill the directories by depth.
    let checked = check(comm, &mut share, &how, &dir, (limit.bytes / 4) as usize);
    let (tops, grouped) = match comm.agree(checked) {
        Ok(Ok(v)) => v,
        // Refused: as the in-memory run refuses it.
        Ok(Err(refusal)) => return Err(Error::new(refusal)),
        Err(e) => {
            // The spill (a full TMPDIR) or the list failed before anything was removed.
            if comm.rank() == 0 {
                context.error(format!("{e}: nothing removed"));
            }
            rm.spill_failed = true;
            return Ok(false);
        }
    };
    let spilled = grouped.spill_bytes();
    rm.spilled = Some(RmSpill {
        piece_records: how.per_piece as u64,
        dirs: comm.sum(
            (0..=grouped.max_key().unwrap_or(0))
                .map(|k| grouped.records(k))
                .sum(),
        ),
        spill_bytes: comm.sum(spilled),
        spill_bytes_max_rank: comm.max(spilled),
    });
    rm.engine.roots = Arc::new(Roots::of_list_tops(&tops));
    rm.selector = std::mem::take(&mut rm.selector).relative_to(tops);
    rm.engine.keep_nonempty = rm.selector.active();
    rm.engine.progress = context.progress(comm.rank(), "Removed");
    rm.engine
        .progress
        .total_items
        .store(share.total(), Ordering::Relaxed);

    crate::engine::test_seam::after_listing(comm);

    // 2. Non-directories, as each piece is read.
    if changed(comm, context, input, stamp, "nothing removed") {
        rm.spill_failed = true;
        return Ok(false);
    }
    let mut kept = HashSet::new();
    let mut blocked = HashSet::new();
    let share = io::open_cache_share(comm, input.as_slice())
        .map_err(Error::new)?
        .ok_or_else(|| Error::new(format!("read list {}: changed", display(input))))?;
    let interrupted = remove_files(comm, options, rm, share, &how, &mut kept, &mut blocked);
    let interrupted = match interrupted {
        Ok(i) => i,
        Err(e) => {
            // The list could not be read again: the directories stay (what they hold is not
            // known to be gone).
            if comm.rank() == 0 {
                context.error(format!("{e}: directories not removed"));
            }
            rm.spill_failed = true;
            return Ok(false);
        }
    };
    if interrupted || comm.any(stop.load(Ordering::Relaxed)) {
        return Ok(true);
    }

    // 3. Directories, deepest level first.
    if changed(comm, context, input, stamp, "directories not removed") {
        rm.spill_failed = true;
        return Ok(false);
    }
    remove_dirs(comm, options, rm, &grouped, kept, blocked)
}

/// The identity of the list file `path` (device, inode, size, mtime, ctime), or `None` when
/// it cannot be read.
fn list_stamp(path: &[u8]) -> Option<[i64; 7]> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(flist::path::as_path(path)).ok()?;
    Some([
        m.dev() as i64,
        m.ino() as i64,
        m.size() as i64,
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ])
}

/// Whether the list `path` is no longer the file stamped `was` on some rank (replaced,
/// rewritten or touched since the first reading); then rank 0 names it with `then` (what is
/// left undone). Collective.
fn changed(
    comm: &dyn Comm,
    context: &Context,
    path: &[u8],
    was: Option<[i64; 7]>,
    then: &str,
) -> bool {
    let now = list_stamp(path);
    let differs = comm.any(was.is_none() || now != was);
    if differs && comm.rank() == 0 {
        context.error(format!(
            "list {}: changed while it was being read in pieces (its size, times or inode \
             moved): {then}",
            display(path)
        ));
    }
    differs
}

/// Pass 1 of one rank: `Ok(Err(refusal))` when the list names `/`, else the list's topmost
/// entries (all ranks) and this rank's directories grouped by depth. Collective.
#[allow(clippy::type_complexity)]
fn check(
    comm: &dyn Comm,
    share: &mut CacheShare,
    how: &Reading<'_>,
    dir: &SpillDir,
    budget: usize,
) -> Result<Result<(Vec<Vec<u8>>, Grouped), String>, flist::Error> {
    let local = (|| -> Result<(bool, Vec<Vec<u8>>, Grouped), flist::Error> {
        let mut groups = Groups::new(dir, Detail::Stat, budget);
        let mut tops: Vec<Vec<u8>> = Vec::new();
        let mut slash = false;
        loop {
            let mut piece = FileList::new(Detail::Stat);
            if share.read_into(&mut piece, how.per_piece)? == 0 {
                break;
            }
            let (piece, _refused) = piece.refuse_dot_dot();
            let mut piece = piece.normalized(how.cwd);
            slash |= piece.iter().any(|e| e.path == b"/");
            if piece.iter().any(|e| e.kind == FileType::Unknown) {
                // Their type decides where they go; those that are gone are named in pass 2.
                piece = restat(piece, Which::UnknownTypes, false).0;
            }
            tops.extend(piece.iter().map(|e| e.path.to_vec()));
            tops = flist::path::outermost(tops);
            for (i, e) in piece.iter().enumerate() {
                if e.kind == FileType::Dir {
                    groups.push(depth(e.path) as u64, &piece, i)?;
                }
            }
        }
        Ok((slash, tops, groups.finish()?))
    })();
    let (slash, tops, grouped) = comm.agree(local)?;
    if comm.any(slash) {
        return Ok(Err(format!(
            "refusing to remove '/' (named in {})",
            display(how.input)
        )));
    }
    let all = comm.all_gather(&ByteStrings(tops));
    let tops = flist::path::outermost(all.into_iter().flat_map(|t| t.0).collect());
    Ok(Ok((tops, grouped)))
}

/// Pass 2: read the list again a piece at a time (the same number of rounds on every rank)
/// and remove each piece's selected non-directories over all ranks. Returns whether a stop
/// cut it short. Collective.
fn remove_files(
    comm: &dyn Comm,
    options: &Options,
    rm: &mut Rm,
    mut share: CacheShare,
    how: &Reading<'_>,
    kept: &mut HashSet<Vec<u8>>,
    blocked: &mut HashSet<Vec<u8>>,
) -> Result<bool, flist::Error> {
    let context = &options.context;
    let stop = &context.stop;
    loop {
        let mut piece = FileList::new(Detail::Stat);
        let read = share.read_into(&mut piece, how.per_piece);
        let n = comm.agree(read)?;
        if !comm.any(n > 0) {
            return Ok(false);
        }
        let (piece, refused) = piece.refuse_dot_dot();
        let piece = piece.normalized(how.cwd);
        let (mut piece, missing) = restat(piece, Which::Present, false);
        let errors: Vec<ItemError> = refused.into_iter().chain(missing).collect();
        rm.list_failed += errors.len() as u64;
        rm.report(context, errors, blocked);
        if rm.selector.active() {
            for e in piece.iter().filter(|e| !rm.selector.selects(*e)) {
                add_ancestors(kept, e.path);
            }
            piece.retain(|e| rm.selector.selects(e));
        }
        let dirs = piece.iter().filter(|e| e.kind == FileType::Dir).count();
        piece.retain(|e| e.kind != FileType::Dir);
        rm.selected += comm.sum((piece.len() + dirs) as u64);
        if options.dryrun {
            say_would_go(comm, context, rm, &piece, true);
            continue;
        }
        let files = spread(comm, piece);
        let interrupted = rm.engine.unlink_files(comm, &files, stop);
        rm.report(context, Vec::new(), blocked);
        if interrupted {
            return Ok(true);
        }
    }
}

/// `--dryrun`: count `entries` as removed and send their paths out (in rank order).
/// Collective.
fn say_would_go(comm: &dyn Comm, context: &Context, rm: &Rm, entries: &FileList, files: bool) {
    let counter = if files {
        &rm.engine.files
    } else {
        &rm.engine.dirs
    };
    counter.fetch_add(entries.len() as u64, Ordering::Relaxed);
    let mut text = Vec::new();
    for e in entries.iter() {
        text.extend_from_slice(e.path);
        text.push(b'\n');
    }
    in_rank_order(comm, text, |b| context.output(b));
}

/// Pass 3: the directories, one depth level at a time, deepest first, each level a piece at a
/// time. A selected directory stays when it holds an entry not selected (`kept`: the
/// ancestors of every entry pass 2 did not select) or one that failed (`blocked`, quietly:
/// the failure was named); ranks share both sets first, and after each level the directories
/// that failed there. Returns whether a stop cut it short. Collective.
fn remove_dirs(
    comm: &dyn Comm,
    options: &Options,
    rm: &mut Rm,
    grouped: &Grouped,
    kept: HashSet<Vec<u8>>,
    blocked: HashSet<Vec<u8>>,
) -> Result<bool, Error> {
    let context = &options.context;
    let stop = &context.stop;
    let kept = union(comm, kept);
    let mut blocked = union(comm, blocked);
    let deepest = comm.max(grouped.max_key().map_or(0, |k| k + 1));
    let per_piece = rm.spilled.as_ref().map_or(1, |s| s.piece_records as usize);
    let block = (per_piece * 128).clamp(4 << 10, 4 << 20);
    for level in (0..deepest).rev() {
        let mut reader = grouped.reader(level, block);
        let mut failed = Vec::new();
        loop {
            let mut piece = FileList::new(Detail::Stat);
            let n = match comm.agree(reader.read_into(&mut piece, per_piece)) {
                Ok(n) => n,
                Err(e) => {
                    if comm.rank() == 0 {
                        context.error(format!("{e}: directories not removed"));
                    }
                    rm.spill_failed = true;
                    return Ok(false);
                }
            };
            if !comm.any(n > 0) {
                break;
            }
            // Pass 2 named the directories that are gone (and selected the rest): a name
            // gone since goes quietly, as `rmdir` finds it.
            if rm.selector.active() {
                piece.retain(|e| rm.selector.selects(e));
            }
            let (mut kept_n, mut held_n) = (0, 0);
            piece.retain(|e| {
                if kept.contains(e.path) {
                    kept_n += 1;
                    false
                } else if blocked.contains(e.path) {
                    held_n += 1;
                    false
                } else {
                    true
                }
            });
            rm.engine.kept.fetch_add(kept_n, Ordering::Relaxed);
            if options.dryrun {
                say_would_go(comm, context, rm, &piece, false);
                continue;
            }
            rm.engine.held.fetch_add(held_n, Ordering::Relaxed);
            let piece = spread(comm, piece);
            let failed_here = Mutex::new(Vec::new());
            let none = HashSet::new();
            let progress = Some(&rm.engine.progress);
            let interrupted = run_batches(comm, Some(stop), progress, &piece, |chunk| {
                rm.engine.rmdir_batch(chunk, &none, &failed_here)
            });
            failed.extend(std::mem::take(&mut *lock(&failed_here)));
            rm.report(context, Vec::new(), &mut HashSet::new());
            if interrupted {
                return Ok(true);
            }
        }
        // Ranks meet: the ancestors of the directories that failed at this level stay.
        for p in comm
            .all_gather(&ByteStrings(failed))
            .into_iter()
            .flat_map(|b| b.0)
        {
            add_ancestors(&mut blocked, &p);
        }
        if comm.any(stop.load(Ordering::Relaxed)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The union of every rank's `set` (collective).
fn union(comm: &dyn Comm, set: HashSet<Vec<u8>>) -> HashSet<Vec<u8>> {
    let mine = ByteStrings(set.into_iter().collect());
    comm.all_gather(&mine)
        .into_iter()
        .flat_map(|b| b.0)
        .collect()
}
