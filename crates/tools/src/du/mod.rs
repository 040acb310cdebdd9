//! `mfu-rs du`: where the space is. Usage per user, per group and per directory (to a depth
//! below each PATH), the largest directories (whole subtrees) and files, and the ages of the
//! data by modification and access time; as a typed [`Report`], and as charts (SVG, HTML).
//!
//! The phases, each collective:
//! 1. count: walk the PATHs (names and types only; each entry is `lstat`ed once, by the walk
//!    thread that read its directory, and counted on the spot: non-directories are never held
//!    in a list), or read a stat list (`-i`) and count this rank's share of it;
//! 2. hard links: the names of an inode with several links meet on the rank that owns the
//!    inode, which counts it once, under the name whose bytes sort first (as `du` counts an
//!    inode once, whichever name it met first);
//! 3. merge: totals and age buckets summed; owners gathered; every directory's subtree sum
//!    completed on the rank that owns its path (a directory's entries may have been counted on
//!    several ranks); the largest directories and files merged over ranks in one total order
//!    (size, then path), so that the report is the same at any rank count;
//! 4. names: rank 0 asks the user and group databases once per id and tells the others;
//! 5. charts: rank 0 writes `--svg` and `--html`, each under a temporary name renamed into place.
//!
//! Sizes: `bytes` is the apparent size (`st_size`), `blocks` the space allocated (`st_blocks`,
//! 512-byte units). Like GNU `du`, an inode with several names is counted once in both (`du -s
//! --apparent-size` counts a hard-linked file's size once too). A list (`-i`) holds no
//! allocation: reports from lists show apparent sizes, and hard links are counted once only
//! where the list knows inodes (cache v4 lists do not: each name counts).

mod chart;
mod gather;
mod html;
mod tally;
mod units;

pub use tally::{Measure, Usage, AGE_LIMITS};
pub use units::{human, Units};

use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::input::{Input, Listed};
use crate::engine::status::Status;
use flist::walk::{walk, WalkOptions};
use flist::{Detail, FileList, FileType, Meta};
use std::sync::Mutex;
use std::time::Instant;
use steal::{Comm, CommExt};
use tally::{Settings, Tally};

/// What `du` does: count the entries of `input` and report them.
#[derive(Debug, Clone)]
pub struct Options {
    /// Directories or files to walk, or a stat list to read instead (v3/v4 cache, or text
    /// with metadata; a lite list is refused).
    pub input: Input,
    /// Directories this deep below each PATH are listed (1: the PATHs' own entries; 0: the
    /// PATHs only).
    pub depth: usize,
    /// How many of the largest directories and files are listed.
    pub top: usize,
    /// The time ages are measured from (seconds since the epoch); `None`: now.
    pub now: Option<i64>,
    /// How sizes are shown and which size ranks rows.
    pub units: Units,
    /// Write the charts to this SVG file.
    pub svg: Option<Vec<u8>>,
    /// Write a page with the charts and the tables to this HTML file.
    pub html: Option<Vec<u8>>,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Default for Options {
    /// Nothing to count yet (set `input`); depth 1, top 10, 1 KiB blocks.
    fn default() -> Options {
        Options {
            input: Input::default(),
            depth: 1,
            top: 10,
            now: None,
            units: Units::default(),
            svg: None,
            html: None,
            context: Context::default(),
        }
    }
}

impl Options {
    /// Count `paths`, everything else as on the command line without options.
    pub fn new<P: AsRef<[u8]>>(paths: impl IntoIterator<Item = P>) -> Options {
        Options {
            input: Input::Paths(paths.into_iter().map(|p| p.as_ref().to_vec()).collect()),
            ..Options::default()
        }
    }
}

/// A user or a group and what it owns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Owner {
    /// The uid or gid.
    pub id: u32,
    /// Its name, or the id as text when the database has none.
    pub name: String,
    /// What it owns.
    pub usage: Usage,
}

/// A directory (its whole subtree) or a file, and its usage.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PathUsage {
    /// Its path (bytes that are not UTF-8 as `\xNN` in JSON).
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub path: Vec<u8>,
    /// How far below its PATH (0: the PATH itself); 0 for files.
    pub depth: usize,
    /// Its usage: a directory's is its subtree's, itself included.
    pub usage: Usage,
}

/// One age bucket.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Age {
    /// Its label (`< 1 week`).
    pub bucket: String,
    /// Entries younger than this many seconds are in it or an earlier one (`None`: the last).
    pub below_seconds: Option<i64>,
    /// The non-directories in it.
    pub usage: Usage,
}

/// What a `du` found; the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The trees counted: the PATHs, or the directory that holds every entry of the list.
    #[serde(serialize_with = "paths_text")]
    pub roots: Vec<Vec<u8>>,
    /// True when a list was read, false when PATHs were walked.
    pub read: bool,
    /// The time the ages are measured from (seconds since the epoch).
    pub now: i64,
    /// The depth of `dirs`.
    pub depth: usize,
    /// How sizes are shown: block size, human or not, and which size ranks the rows.
    pub units: Units,
    /// False when the input held no allocation (a list): `blocks` are 0 and rows rank by
    /// apparent size.
    pub blocks_known: bool,
    /// Everything counted.
    pub total: Usage,
    /// By owner, largest first.
    pub users: Vec<Owner>,
    /// By group, largest first.
    pub groups: Vec<Owner>,
    /// The directories at most `depth` below each root (the roots included), largest first.
    pub dirs: Vec<PathUsage>,
    /// The directories one and two levels below each root, largest first: the treemap's
    /// cells.
    #[serde(skip)]
    pub treemap: Vec<PathUsage>,
    /// The largest directories at any depth (subtree sums), largest first.
    pub largest_dirs: Vec<PathUsage>,
    /// The largest files (any non-directory), largest first.
    pub largest_files: Vec<PathUsage>,
    /// Non-directories by the age of their modification time.
    pub mtime: Vec<Age>,
    /// Non-directories by the age of their access time.
    pub atime: Vec<Age>,
    /// Entries that could not be read or stat'ed (each reported).
    pub errors: u64,
    /// The walk was not complete (failures or a stop): the counts are too small.
    pub incomplete: bool,
    /// A stop request cut the walk short.
    pub interrupted: bool,
    /// Charts asked for that could not be written (each reported).
    pub charts_failed: u64,
    /// The chart files written.
    #[serde(serialize_with = "paths_text")]
    pub written: Vec<Vec<u8>>,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// This process's sample of failure messages.
    pub failures: Vec<String>,
    /// A stop cut the walk short: the directories read of those found.
    #[serde(skip)]
    pub stopped: Option<Stopped>,
}

fn paths_text<S: serde::Serializer>(paths: &[Vec<u8>], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(paths.len()))?;
    for p in paths {
        seq.serialize_element(&flist::path::display(p))?;
    }
    seq.end()
}

impl ToolReport for Report {
    /// Items: the entries counted; bytes: their apparent size.
    fn summary(&self) -> Summary {
        Summary {
            items: self.total.files,
            bytes: self.total.bytes,
            failed: self.errors + self.charts_failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(
            self.errors + self.charts_failed,
            0,
            self.incomplete || self.interrupted,
        )
    }
    fn stopped(&self) -> Option<Stopped> {
        self.stopped
    }
}

/// Run `du` on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let context = &options.context;
    if options.input.walk_paths().iter().any(|p| p.is_empty()) {
        return Err(Error::new("an empty PATH names no file"));
    }
    if options.units.block_size == 0 {
        return Err(Error::new("the block size must be more than 0 bytes"));
    }
    let cwd =
        flist::path::current_dir().map_err(|e| Error::new(format!("current directory: {e}")))?;
    let now = match options.now {
        Some(t) => t,
        None => comm.bcast_with(0, || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        }),
    };
    let mut report = Report {
        now,
        depth: options.depth,
        units: options.units,
        blocks_known: true,
        ..Report::default()
    };
    let mut settings = Settings {
        roots: Vec::new(),
        now,
        top: options.top,
        measure: options.units.measure,
    };
    let mut tally = count(comm, options, &cwd, &mut settings, &mut report)?;
    report.units.measure = settings.measure;
    report.roots = settings.roots.clone();
    // 2. and 3.
    gather::count_links(comm, &mut tally, &settings);
    let (total, mtime, atime) = gather::sum_counts(comm, &tally);
    report.total = total;
    let ages = |buckets: [Usage; tally::AGES]| -> Vec<Age> {
        AGE_LIMITS
            .iter()
            .zip(buckets)
            .map(|(&(limit, label), usage)| Age {
                bucket: label.to_string(),
                below_seconds: limit,
                usage,
            })
            .collect()
    };
    report.mtime = ages(mtime);
    report.atime = ages(atime);
    let users = gather::by_id(comm, &tally.users, settings.measure);
    let groups = gather::by_id(comm, &tally.groups, settings.measure);
    let files = std::mem::take(&mut tally.top_files);
    let files = gather::merge_ranked(comm, files, options.top, settings.measure);
    report.largest_files = files
        .into_iter()
        .map(|r| PathUsage {
            path: r.path,
            depth: 0,
            usage: r.usage,
        })
        .collect();
    let dirs = gather::complete_dirs(comm, &mut tally);
    drop(tally);
    // Depth 2 at least: the treemap shows two levels of directories below the roots.
    let (shallow, top) = gather::dir_tables(comm, &dirs, &settings, options.depth.max(2));
    drop(dirs);
    for (r, depth) in shallow {
        let row = PathUsage {
            path: r.path,
            depth,
            usage: r.usage,
        };
        if depth == 1 || depth == 2 {
            report.treemap.push(row.clone());
        }
        if depth <= options.depth {
            report.dirs.push(row);
        }
    }
    report.largest_dirs = top
        .into_iter()
        .map(|r| {
            let depth = tally::root_of(&settings.roots, &r.path)
                .map_or(0, |root| tally::depth_below(root, &r.path));
            PathUsage {
                path: r.path,
                depth,
                usage: r.usage,
            }
        })
        .collect();
    // 4. Names, asked once.
    let names: (Vec<String>, Vec<String>) = comm.bcast_with(0, || {
        (
            users.iter().map(|&(id, _)| user_name(id)).collect(),
            groups.iter().map(|&(id, _)| group_name(id)).collect(),
        )
    });
    let owners = |rows: Vec<(u32, Usage)>, names: Vec<String>| -> Vec<Owner> {
        rows.into_iter()
            .zip(names)
            .map(|((id, usage), name)| Owner { id, name, usage })
            .collect()
    };
    report.users = owners(users, names.0);
    report.groups = owners(groups, names.1);
    // 5. Charts.
    write_charts(comm, options, &mut report);
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = context.failures();
    Ok(report)
}

/// The name of user `uid`, or the number.
fn user_name(uid: u32) -> String {
    match crate::engine::ids::user_entry(uid) {
        Ok(Some((name, _))) => name.to_string_lossy().into_owned(),
        _ => uid.to_string(),
    }
}

/// The name of group `gid`, or the number.
fn group_name(gid: u32) -> String {
    match crate::engine::ids::group_name(gid) {
        Ok(Some(name)) => name.to_string_lossy().into_owned(),
        _ => gid.to_string(),
    }
}

/// Phase 1, this rank's counts: from the walk of the PATHs or from its share of the list;
/// sets the roots (and, for a list, the measure: lists hold no allocation).
fn count(
    comm: &dyn Comm,
    options: &Options,
    cwd: &[u8],
    settings: &mut Settings,
    report: &mut Report,
) -> Result<Tally, Error> {
    let context = &options.context;
    let mut roots: Vec<Vec<u8>> = options
        .input
        .walk_paths()
        .iter()
        .map(|p| flist::path::normalize(p, cwd))
        .collect();
    roots.dedup();
    settings.roots = roots;
    let walked_settings = settings.clone();
    let shards: Vec<Mutex<Tally>> = (0..SHARDS).map(|_| Mutex::default()).collect();
    let failed: Mutex<Vec<String>> = Mutex::default();
    let walk_paths = |_: &[Vec<u8>]| {
        let s = &walked_settings;
        let visit =
            |dir: rustix::fd::BorrowedFd<'_>, name: &[u8], path: &[u8], _: FileType| -> bool {
                match rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => {
                        let m = Meta::from_stat(&st);
                        let kind = m.file_type();
                        lock(&shards[shard()]).add(s, path, kind, &m, st.st_blocks as u64, true);
                        // Directories are recorded, so that the walk descends into them.
                        kind != FileType::Dir
                    }
                    Err(e) => {
                        let e = std::io::Error::from(e);
                        lock(&failed).push(format!("stat {}: {e}", flist::path::display(path)));
                        true
                    }
                }
            };
        let progress = context.progress(comm.rank(), "Counted");
        let opts = WalkOptions {
            detail: Detail::Lite,
            dereference: false,
            noatime: &context.noatime,
            seed: 0xd05e,
            stop: Some(&context.stop),
            progress: Some(&progress),
            visit: Some(&visit),
            id_tables: false,
            spill: None,
        };
        walk(comm, &s.roots, &opts)
    };
    let listed = options.input.list(comm, walk_paths)?;
    let mut tally = Tally::default();
    match listed {
        Listed::Walked(walked) => {
            for e in &walked.errors {
                context.error(e);
            }
            let failed = failed.into_inner().unwrap_or_else(|p| p.into_inner());
            for e in &failed {
                context.error(e);
            }
            // The walk's count is over all ranks already; the stats that failed are summed.
            let stat_failed = comm.sum(failed.len() as u64);
            report.errors = walked.total_errors + stat_failed;
            report.incomplete = !walked.complete || stat_failed > 0;
            report.interrupted = walked.interrupted;
            if walked.interrupted {
                report.stopped = Some(Stopped {
                    done: walked.dirs_read,
                    total: walked.dirs_read + walked.dirs_left,
                    what: "directories",
                });
                if comm.rank() == 0 {
                    context.error("interrupted by a signal: the counts are incomplete");
                }
            }
            for shard in shards {
                tally.merge(
                    shard.into_inner().unwrap_or_else(|p| p.into_inner()),
                    settings,
                );
            }
            // The roots were stat'ed by the walk, not visited: rank 0 counts them.
            if comm.rank() == 0 {
                for root in &settings.roots {
                    if let Ok(st) = flist::walk::stat_path(root, false) {
                        let m = Meta::from_stat(&st);
                        tally.add(settings, root, m.file_type(), &m, st.st_blocks as u64, true);
                    }
                }
            }
        }
        Listed::Read(list) => {
            report.read = true;
            let list = list.normalized(cwd);
            if comm.any(list.detail() == Detail::Lite) {
                return Err(Error::new(format!(
                    "{}: a lite list (names and types only) holds no sizes, owners or times: \
                     write a stat list (`mfu-rs walk -o LIST PATH` without -l) or give PATHs",
                    options
                        .input
                        .list_file()
                        .map_or("the list".into(), flist::path::display)
                )));
            }
            report.blocks_known = false;
            settings.measure = Measure::Apparent;
            settings.roots = common_root(comm, &list).into_iter().collect();
            for e in list.iter() {
                if let Some(m) = e.meta {
                    tally.add(settings, e.path, e.kind, &m, 0, true);
                }
            }
        }
    }
    Ok(tally)
}

/// Walk threads count into this many tallies (by thread), merged after the walk.
const SHARDS: usize = 16;

/// This thread's tally among the [`SHARDS`].
fn shard() -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::thread::current().id().hash(&mut h);
    (h.finish() % SHARDS as u64) as usize
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The deepest directory that holds every entry of the list (on all ranks): the root a list's
/// depths are counted from. `None` for an empty list. Collective.
fn common_root(comm: &dyn Comm, list: &FileList) -> Option<Vec<u8>> {
    let mut mine: Option<Vec<u8>> = None;
    for e in list.iter() {
        mine = Some(match mine {
            None => e.path.to_vec(),
            Some(p) => common_dir(&p, e.path),
        });
    }
    comm.all_gather(&mine)
        .into_iter()
        .flatten()
        .reduce(|a, b| common_dir(&a, &b))
}

/// The longest path that is `a` or a directory above it and also `b` or one above it.
fn common_dir(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut p = a;
    while !flist::path::is_prefix(p, b) {
        let up = flist::path::parent(p);
        if up == p {
            break;
        }
        p = up;
    }
    p.to_vec()
}

/// Phase 5: rank 0 writes the charts asked for; a failure is reported and counted.
fn write_charts(comm: &dyn Comm, options: &Options, report: &mut Report) {
    let mut failed = 0u64;
    let mut written = Vec::new();
    if comm.rank() == 0 {
        let svg = (options.svg.is_some() || options.html.is_some()).then(|| chart::svg(report));
        let files = [
            (options.svg.as_ref(), svg.clone()),
            (
                options.html.as_ref(),
                options
                    .html
                    .as_ref()
                    .map(|_| html::page(report, svg.as_deref().unwrap_or(""))),
            ),
        ];
        for (path, text) in files {
            let (Some(path), Some(text)) = (path, text) else {
                continue;
            };
            match write_atomically(path, text.as_bytes(), &options.context) {
                Ok(clean) => {
                    written.push(path.clone());
                    failed += u64::from(!clean);
                }
                Err(e) => {
                    options.context.error(e);
                    failed += 1;
                }
            }
        }
    }
    report.charts_failed = comm.sum(failed);
    report.written = comm.bcast_from(0, &written);
}

/// Write `bytes` to `path` under a temporary name, synced, then renamed over it. The
/// temporaries of a killed earlier run are removed first and named (one that cannot be removed
/// is a failure: `Ok(false)`).
fn write_atomically(path: &[u8], bytes: &[u8], context: &Context) -> Result<bool, String> {
    use std::io::Write;
    let (out, stale) = flist::atomic::Output::beside(path, 0o666).map_err(|e| e.to_string())?;
    let mut clean = true;
    for s in stale {
        let note = crate::engine::outputs::stale_note(&s, "temporary chart");
        match s.removed {
            Ok(()) => context.events.error(&note),
            Err(_) => {
                context.error(note);
                clean = false;
            }
        }
    }
    let mut file = out.file().ok_or("no file to write")?;
    file.write_all(bytes)
        .map_err(|e| format!("write {}: {e}", flist::path::display(out.path())))?;
    out.publish(flist::atomic::Replace::Overwrite)
        .map_err(|e| e.to_string())?;
    Ok(clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_directory_of_paths() {
        assert_eq!(common_dir(b"/a/b/c", b"/a/b/d"), b"/a/b");
        assert_eq!(common_dir(b"/a/b", b"/a/b/d"), b"/a/b");
        assert_eq!(common_dir(b"/a/bc", b"/a/b"), b"/a");
        assert_eq!(common_dir(b"/x", b"/y"), b"/");
    }
}
