//! `pfa unpack AGG DEST`: every stream of a version into a tree beneath DEST, in parallel.
//!
//! Every rank opens the aggregate's index (any rank count reads what any rank count wrote)
//! and takes the same list of streams, sorted by name. Phases, each closed by a barrier:
//! 1. rank 0 makes the directories the aggregate records;
//! 2. the files and symbolic links, spread over the ranks by bytes (the biggest first, each to
//!    the rank with the fewest bytes so far), then stolen by idle ranks and threads (the
//!    work-stealing queue, which also reports progress): each is written under a temporary
//!    name in its directory, given its mode, owner (as root) and mtime, then renamed to its
//!    name — so a file whose data could not be read whole (a damaged chunk, a full disk) is
//!    removed and never appears under its name, let alone with its final mtime;
//! 3. rank 0 gives the directories it made their mode and mtime, deepest first.
//!
//! Nothing is written outside DEST: names are checked first (absolute paths and `..` are
//! refused, each named), and every directory is reached from DEST's descriptor without
//! following a symbolic link (through `tar -x`'s `Target`). DEST itself must not be a
//! symbolic link (its last component is not followed; it is made if missing). An existing
//! entry is not replaced unless `overwrite` says so, and then never through its inode: the
//! new file is renamed over it. Modes are restored exactly as root, less the umask
//! otherwise (as tar does).

use super::meta::{EntryMeta, Kind};
use super::{display, version_of};
use crate::engine::context::{Context, Error, Summary};
use crate::engine::setup::agree_setup;
use crate::tar::extract::beneath::{clean, explain, split, Target};
use flist::atomic::{rename_over, temp_name, Replace};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, Timespec, Timestamps};
use rustix::io::Errno;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use steal::{queue, Comm, CommExt};

/// Bytes read from a stream and written at a time.
const PIECE: usize = 1 << 20;

/// The longest symbolic link target made (PATH_MAX).
const LINK_MAX: u64 = 4096;

/// What `pfa unpack` does.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The aggregate.
    pub agg: Vec<u8>,
    /// The directory to unpack into (made if missing; its parent must exist).
    pub dest: Vec<u8>,
    /// The version to unpack (the last without it).
    pub version: Option<u64>,
    /// Replace entries already in DEST (a directory is never replaced).
    pub overwrite: bool,
}

/// What `pfa unpack` did; counts over all ranks, the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The version unpacked.
    pub version: u64,
    /// Regular files written.
    pub files: u64,
    /// Directories made (or found already there).
    pub dirs: u64,
    /// Symbolic links made.
    pub symlinks: u64,
    /// Bytes of file data written.
    pub bytes: u64,
    /// Entries left alone because something of that name was there (without `overwrite`).
    pub existing: u64,
    /// Streams whose names are unsafe (absolute, `..`, empty): refused.
    pub refused: u64,
    /// Entries that could not be written, or the aggregate could not be read (each named).
    pub failed: u64,
    /// A stop request cut the run short.
    pub interrupted: bool,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
}

impl Report {
    /// Items: the entries made; bytes: the file data written.
    pub fn summary(&self) -> Summary {
        Summary {
            items: self.files + self.dirs + self.symlinks,
            bytes: self.bytes,
            failed: self.failed + self.refused + self.existing,
            seconds: self.seconds,
        }
    }
}

/// One stream to unpack: its cleaned name, stored name, kind and metadata, size.
struct Item {
    rel: Vec<u8>,
    name: Vec<u8>,
    meta: Option<EntryMeta>,
    size: u64,
}

impl Item {
    fn kind(&self) -> Kind {
        self.meta.map_or(Kind::File, |m| m.kind)
    }
}

/// How metadata is given back.
#[derive(Clone, Copy)]
struct Restore {
    /// Running as root: owners and exact modes.
    root: bool,
    /// The umask, taken off modes when not root.
    umask: u32,
}

impl Restore {
    fn mode(&self, mode: u32) -> u32 {
        if self.root {
            mode & 0o7777
        } else {
            mode & 0o7777 & !self.umask
        }
    }
}

/// Access time now, modification time as recorded.
fn times(m: &EntryMeta) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        last_modification: Timespec {
            tv_sec: m.mtime,
            tv_nsec: m.mtime_nsec as _,
        },
    }
}

/// Run `pfa unpack`. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, o: &Options, context: &Context) -> Result<Report, Error> {
    let started = Instant::now();
    let mut mine = Report::default();
    // The aggregate and its streams, on every rank; a refused aggregate is exit 1, named once.
    let opened = super::open_index(&o.agg).and_then(|index| {
        let version = version_of(&index, &o.agg, o.version)?;
        let streams = index
            .streams(version)
            .map_err(|e| e.to_string())?
            .map(|s| (s.name.to_vec(), s.meta.to_vec(), s.size))
            .collect::<Vec<_>>();
        Ok((index, version, streams))
    });
    let (index, version, streams) = match comm.agree(opened.map_err(|e| e.to_string())) {
        Ok(v) => v,
        Err(message) => {
            if comm.rank() == 0 {
                context.error(message);
            }
            mine.failed = 1;
            mine.seconds = started.elapsed().as_secs_f64();
            return Ok(mine);
        }
    };
    let dest_id = agree_setup(comm, comm.bcast_with(0, || prepare_dest(&o.dest)))?;
    let target = agree_setup(comm, open_target(&o.dest, dest_id))?;
    let agg_id = std::fs::metadata(flist::path::as_path(&o.agg))
        .ok()
        .map(|m| (m.dev(), m.ino()));
    let restore = Restore {
        root: rustix::process::geteuid().is_root(),
        umask: crate::engine::umask::current(),
    };
    mine.version = version;

    // The items, the same on every rank; unsafe names named once (rank 0).
    let mut items: Vec<Item> = Vec::with_capacity(streams.len());
    for (name, meta, size) in streams {
        let cleaned = clean(&name).map_err(|why| why.to_string()).and_then(|rel| {
            if rel.is_empty() {
                Err("refusing a name that stands for DEST itself".into())
            } else {
                Ok(rel)
            }
        });
        match cleaned {
            Ok(rel) => items.push(Item {
                rel,
                meta: EntryMeta::decode(&meta),
                name,
                size,
            }),
            Err(why) => {
                if comm.rank() == 0 {
                    context.error(format!(
                        "{}: stream {}: {why}",
                        display(&o.agg),
                        display(&name)
                    ));
                    mine.refused += 1;
                }
            }
        }
    }
    items.sort_by(|a, b| a.rel.cmp(&b.rel));

    // 1. Directories, by rank 0 (parents sort before their children); then the temporaries
    // a killed earlier unpack left in those that were already there.
    let mut made_dirs = Vec::new();
    if comm.rank() == 0 {
        let mut fresh = std::collections::HashSet::new();
        for item in items.iter().filter(|i| i.kind() == Kind::Dir) {
            match make_dir(&target, &item.rel) {
                Ok(made) => {
                    mine.dirs += 1;
                    if made {
                        fresh.insert(item.rel.as_slice());
                    }
                    if made || o.overwrite {
                        made_dirs.push(item);
                    }
                }
                Err(why) => {
                    context.error(format!("{}: {why}", shown(&o.dest, &item.rel)));
                    mine.failed += 1;
                }
            }
        }
        // On stderr, as tar and bcast say theirs (not counted as failures).
        for note in sweep_stale(&target, &o.dest, &items, &fresh) {
            context.error(note);
        }
    }
    comm.barrier();

    // 2. Files and links.
    let files = Files {
        o,
        context,
        target: &target,
        index: &index,
        version,
        agg_id,
        restore,
    };
    files.run(comm, &items, &mut mine);
    comm.barrier();

    // 3. The directories' metadata, deepest first, once everything inside them is written.
    if comm.rank() == 0 {
        made_dirs.sort_by_key(|i| std::cmp::Reverse(flist::path::depth(&i.rel)));
        for item in made_dirs {
            if let Some(m) = &item.meta {
                if let Err(why) = dir_meta(&target, &item.rel, m, restore) {
                    context.error(format!("{}: {why}", shown(&o.dest, &item.rel)));
                    mine.failed += 1;
                }
            }
        }
    }
    let mut report = sum(comm, &mine);
    report.version = version;
    report.interrupted = comm.any(mine.interrupted);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The files phase of one run: what every entry written needs.
struct Files<'a> {
    o: &'a Options,
    context: &'a Context,
    target: &'a Target,
    index: &'a ::pfa::Index,
    version: u64,
    /// The aggregate's (device, inode): never replaced.
    agg_id: Option<(u64, u64)>,
    restore: Restore,
}

impl Files<'_> {
    /// Write the files and links of `items`: each rank starts with its share by bytes
    /// ([`shares`]); idle ranks (and threads) steal. Counts go to `mine`. Collective.
    fn run(&self, comm: &dyn Comm, items: &[Item], mine: &mut Report) {
        let share = shares(items, comm.size());
        let initial: Vec<u64> = (0..items.len())
            .filter(|&i| share[i] == comm.rank() && items[i].kind() != Kind::Dir)
            .map(|i| i as u64)
            .collect();
        let progress = self.context.progress(comm.rank(), "Unpacked");
        let entries = items.iter().filter(|i| i.kind() != Kind::Dir);
        progress
            .total_items
            .store(entries.clone().count() as u64, Ordering::Relaxed);
        progress
            .total_bytes
            .store(entries.map(|i| i.size).sum(), Ordering::Relaxed);
        let counts = Counts::default();
        let config = queue::Config {
            max_batch: 4,
            stop: Some(&self.context.stop),
            progress: Some(&progress),
            ..queue::Config::default()
        };
        let outcome = queue::run(comm, &config, initial, |i: u64, _| {
            let item = &items[i as usize];
            let at = Place {
                target: self.target,
                dest: &self.o.dest,
                rel: &item.rel,
                overwrite: self.o.overwrite,
                agg_id: self.agg_id,
            };
            let mut parent = Parent::default();
            let done = match item.kind() {
                Kind::File => write_file(
                    &at,
                    &mut parent,
                    self.index,
                    self.version,
                    item,
                    self.restore,
                )
                .inspect(|&n| {
                    counts.files.fetch_add(1, Ordering::Relaxed);
                    counts.bytes.fetch_add(n, Ordering::Relaxed);
                }),
                Kind::Symlink => write_symlink(
                    &at,
                    &mut parent,
                    self.index,
                    self.version,
                    item,
                    self.restore,
                )
                .map(|()| {
                    counts.symlinks.fetch_add(1, Ordering::Relaxed);
                    0
                }),
                Kind::Dir => Ok(0),
            };
            match done {
                Ok(n) => progress.add(1, n),
                Err(Failed::Exists) => {
                    self.context.error(format!(
                        "{}: exists: not overwritten (--overwrite replaces it)",
                        shown(&self.o.dest, &item.rel)
                    ));
                    counts.existing.fetch_add(1, Ordering::Relaxed);
                    progress.errors.fetch_add(1, Ordering::Relaxed);
                }
                Err(Failed::Other(why)) => {
                    self.context.error(why);
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    progress.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        mine.files = counts.files.into_inner();
        mine.symlinks = counts.symlinks.into_inner();
        mine.bytes = counts.bytes.into_inner();
        mine.existing = counts.existing.into_inner();
        mine.failed += counts.failed.into_inner();
        mine.interrupted = outcome.interrupted;
    }
}

/// Remove the temporaries that a killed earlier unpack (any process on this host that is
/// gone) left for the files and links it was writing: in every directory that holds files of
/// the aggregate and was not made by this run (one that was is empty), one reading of it,
/// only temporaries of the names this aggregate puts there ([`flist::atomic::remove_stale_of`]:
/// regular files of this user, never followed). Without this, each run killed midway would
/// leave hidden `.NAME.HOST.PID.mfu-tmp` files behind for good. Returns what to tell.
fn sweep_stale(
    target: &Target,
    dest: &[u8],
    items: &[Item],
    fresh: &std::collections::HashSet<&[u8]>,
) -> Vec<String> {
    let mut names_in: std::collections::BTreeMap<&[u8], Vec<&[u8]>> = Default::default();
    for item in items.iter().filter(|i| i.kind() != Kind::Dir) {
        let (parent, name) = split(&item.rel);
        names_in.entry(parent).or_default().push(name);
    }
    let mut notes = Vec::new();
    for (parent, names) in names_in {
        if fresh.contains(parent) {
            continue;
        }
        let Ok(dir) = target.dir(parent, false) else {
            continue;
        };
        for (temp, removed) in flist::atomic::remove_stale_of(dir.as_fd(), &names, None) {
            let rel = if parent.is_empty() {
                temp
            } else {
                [parent, b"/", &temp].concat()
            };
            let path = shown(dest, &rel);
            notes.push(match removed {
                Ok(()) => {
                    format!("removed {path}, a temporary file an earlier interrupted run left")
                }
                Err(e) => format!("remove stale temporary {path}: {e}"),
            });
        }
    }
    notes
}

/// `DEST/REL` for messages.
fn shown(dest: &[u8], rel: &[u8]) -> String {
    let mut p = dest.to_vec();
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.extend_from_slice(rel);
    display(&p).into_owned()
}

/// The counts of every rank's report added up. Collective.
fn sum(comm: &dyn Comm, r: &Report) -> Report {
    let mut v = [
        r.files, r.dirs, r.symlinks, r.bytes, r.existing, r.refused, r.failed,
    ];
    comm.allreduce(&mut v, steal::ReduceOp::Sum);
    Report {
        files: v[0],
        dirs: v[1],
        symlinks: v[2],
        bytes: v[3],
        existing: v[4],
        refused: v[5],
        failed: v[6],
        ..Report::default()
    }
}

/// Which rank writes each item: the biggest first, each to the rank with the fewest bytes so
/// far (a file's bytes plus one block, so that empty files spread too). The same on every rank.
fn shares(items: &[Item], ranks: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[b].size.cmp(&items[a].size).then(a.cmp(&b)));
    let mut load: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
        (0..ranks).map(|r| std::cmp::Reverse((0, r))).collect();
    let mut share = vec![0; items.len()];
    for i in order {
        let std::cmp::Reverse((bytes, rank)) = load.pop().expect("a rank");
        share[i] = rank;
        load.push(std::cmp::Reverse((bytes + items[i].size + 4096, rank)));
    }
    share
}

/// Rank 0: DEST made if missing (its parent must exist); refused when it is a symbolic link
/// or not a directory. Its (device, inode).
fn prepare_dest(dest: &[u8]) -> Result<(u64, u64), String> {
    let path = flist::path::as_path(dest);
    let st = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir(path)
                .map_err(|e| format!("DEST {}: mkdir: {e} (nothing done)", display(dest)))?;
            std::fs::symlink_metadata(path)
                .map_err(|e| format!("DEST {}: stat: {e} (nothing done)", display(dest)))?
        }
        Err(e) => return Err(format!("DEST {}: stat: {e} (nothing done)", display(dest))),
        Ok(st) => st,
    };
    if st.file_type().is_symlink() {
        return Err(format!(
            "DEST {} is a symbolic link: not followed (name the directory it leads to; \
             nothing done)",
            display(dest)
        ));
    }
    if !st.is_dir() {
        return Err(format!(
            "DEST {}: not a directory (nothing done)",
            display(dest)
        ));
    }
    Ok((st.dev(), st.ino()))
}

/// DEST opened on this rank: it must still be the directory rank 0 checked (a symlink swapped
/// in meanwhile leads elsewhere).
fn open_target(dest: &[u8], id: (u64, u64)) -> Result<Target, String> {
    let target = Target::open(dest)
        .map_err(|e| format!("DEST {}: open: {e} (nothing done)", display(dest)))?;
    let st = rustix::fs::fstat(target.root())
        .map_err(|e| format!("DEST {}: stat: {e} (nothing done)", display(dest)))?;
    if (st.st_dev, st.st_ino) != id {
        return Err(format!(
            "DEST {} changed while being opened (a symbolic link put in its place?): nothing \
             done",
            display(dest)
        ));
    }
    Ok(target)
}

/// The directory `rel` beneath the target: made (true) or already there (false).
fn make_dir(target: &Target, rel: &[u8]) -> Result<bool, String> {
    let (parent, name) = split(rel);
    let dir = target.dir(parent, true).map_err(explain)?;
    match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => {
            let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(explain)?;
            if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                Ok(false)
            } else if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                Err(explain(Errno::LOOP))
            } else {
                Err("a file that is not a directory is in the way (not replaced)".into())
            }
        }
        Err(e) => Err(format!("mkdir: {}", explain(e))),
    }
}

/// A directory's mode, owner (as root) and mtime.
fn dir_meta(target: &Target, rel: &[u8], m: &EntryMeta, restore: Restore) -> Result<(), String> {
    let fd = target.dir(rel, false).map_err(explain)?;
    if restore.root {
        let own = rustix::fs::fchown(
            &fd,
            Some(rustix::fs::Uid::from_raw(m.uid)),
            Some(rustix::fs::Gid::from_raw(m.gid)),
        );
        own.map_err(|e| format!("chown: {}", explain(e)))?;
    }
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(restore.mode(m.mode)))
        .map_err(|e| format!("chmod: {}", explain(e)))?;
    rustix::fs::futimens(&fd, &times(m)).map_err(|e| format!("set times: {}", explain(e)))
}

/// What the ranks' workers did in the files phase (this rank's).
#[derive(Default)]
struct Counts {
    files: AtomicU64,
    symlinks: AtomicU64,
    bytes: AtomicU64,
    existing: AtomicU64,
    failed: AtomicU64,
}

/// Why an entry was not written.
enum Failed {
    /// Something of its name is there (without `overwrite`).
    Exists,
    /// Anything else: the whole message.
    Other(String),
}

/// Where an entry goes.
struct Place<'a> {
    target: &'a Target,
    dest: &'a [u8],
    rel: &'a [u8],
    overwrite: bool,
    /// The aggregate's (device, inode): never replaced.
    agg_id: Option<(u64, u64)>,
}

impl Place<'_> {
    fn fail(&self, why: impl std::fmt::Display) -> Failed {
        Failed::Other(format!("{}: {why}", shown(self.dest, self.rel)))
    }
}

/// The directory of an entry, opened once for it (made if missing).
#[derive(Default)]
struct Parent {
    rel: Vec<u8>,
    fd: Option<OwnedFd>,
}

impl Parent {
    /// The directory `rel` beneath the target (made if missing).
    fn get(&mut self, target: &Target, rel: &[u8]) -> Result<BorrowedFd<'_>, Errno> {
        if self.fd.is_none() || self.rel != rel {
            self.fd = None;
            let fd = target.dir(rel, true)?;
            self.rel = rel.to_vec();
            self.fd = Some(fd);
        }
        Ok(self.fd.as_ref().expect("opened").as_fd())
    }
}

/// Whether `name` may be made in `dir`: nothing there, or (with `overwrite`) something that
/// is neither a directory nor the aggregate being read.
fn check_free(at: &Place<'_>, dir: BorrowedFd<'_>, name: &[u8]) -> Result<(), Failed> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(at.fail(format!("stat: {}", explain(e)))),
        Ok(_) if !at.overwrite => Err(Failed::Exists),
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            Err(at.fail("a directory of that name is in the way (never replaced)"))
        }
        Ok(st) if Some((st.st_dev, st.st_ino)) == at.agg_id => {
            Err(at.fail("refusing to replace the aggregate being read"))
        }
        Ok(_) => Ok(()),
    }
}

/// Rename the finished temporary `temp` to `name` in `dir`; on failure it is removed.
fn publish(at: &Place<'_>, dir: BorrowedFd<'_>, temp: &[u8], name: &[u8]) -> Result<(), Failed> {
    let replace = if at.overwrite {
        Replace::Overwrite
    } else {
        Replace::NoReplace
    };
    match rename_over(dir, temp, dir, name, replace) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = rustix::fs::unlinkat(dir, temp, AtFlags::empty());
            if e.raw_os_error() == Some(libc::EEXIST) {
                Err(Failed::Exists)
            } else {
                Err(at.fail(format!("rename into place: {e}")))
            }
        }
    }
}

/// A regular file: written under a temporary name, given its metadata, renamed. Bytes written.
fn write_file(
    at: &Place<'_>,
    parent: &mut Parent,
    index: &::pfa::Index,
    version: u64,
    item: &Item,
    restore: Restore,
) -> Result<u64, Failed> {
    let (dir_rel, name) = split(at.rel);
    let dir = parent
        .get(at.target, dir_rel)
        .map_err(|e| at.fail(explain(e)))?;
    check_free(at, dir, name)?;
    let temp = temp_name(name);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, temp.as_slice(), flags, Mode::from_raw_mode(0o666))
        .map_err(|e| at.fail(format!("create a temporary: {}", explain(e))))?;
    let mut file = std::fs::File::from(fd);
    let written = fill(&mut file, index, version, item).and_then(|n| {
        if let Some(m) = &item.meta {
            give_meta(&file, m, restore)?;
        }
        Ok(n)
    });
    drop(file);
    match written {
        Ok(n) => publish(at, dir, &temp, name).map(|()| n),
        Err(why) => {
            let _ = rustix::fs::unlinkat(dir, temp.as_slice(), AtFlags::empty());
            Err(at.fail(format!("{why} (not written)")))
        }
    }
}

/// Copy the stream's data into `file`. Bytes written.
fn fill(
    file: &mut std::fs::File,
    index: &::pfa::Index,
    version: u64,
    item: &Item,
) -> Result<u64, String> {
    let mut reader = index
        .open_stream(&item.name, version)
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; PIECE.min(item.size as usize + 1)];
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        file.write_all(&buf[..n])
            .map_err(|e| format!("write: {e}"))?;
        total += n as u64;
    }
    if total != item.size {
        return Err(format!(
            "the stream gave {total} bytes, its index says {}",
            item.size
        ));
    }
    Ok(total)
}

/// Owner (as root), mode and times of the open file.
fn give_meta(file: &std::fs::File, m: &EntryMeta, restore: Restore) -> Result<(), String> {
    if restore.root {
        rustix::fs::fchown(
            file,
            Some(rustix::fs::Uid::from_raw(m.uid)),
            Some(rustix::fs::Gid::from_raw(m.gid)),
        )
        .map_err(|e| format!("chown: {}", explain(e)))?;
    }
    rustix::fs::fchmod(file, Mode::from_raw_mode(restore.mode(m.mode)))
        .map_err(|e| format!("chmod: {}", explain(e)))?;
    rustix::fs::futimens(file, &times(m)).map_err(|e| format!("set times: {}", explain(e)))
}

/// A symbolic link: made under a temporary name, given its owner and times, renamed.
fn write_symlink(
    at: &Place<'_>,
    parent: &mut Parent,
    index: &::pfa::Index,
    version: u64,
    item: &Item,
    restore: Restore,
) -> Result<(), Failed> {
    if item.size >= LINK_MAX {
        return Err(at.fail(format!(
            "a symbolic link target of {} bytes (at most {}): not made",
            item.size,
            LINK_MAX - 1
        )));
    }
    let link = index
        .read_stream(&item.name, version)
        .map_err(|e| at.fail(format!("{e} (not made)")))?;
    let (dir_rel, name) = split(at.rel);
    let dir = parent
        .get(at.target, dir_rel)
        .map_err(|e| at.fail(explain(e)))?;
    check_free(at, dir, name)?;
    let temp = temp_name(name);
    rustix::fs::symlinkat(link.as_slice(), dir, temp.as_slice())
        .map_err(|e| at.fail(format!("symlink: {}", explain(e))))?;
    if let Some(m) = &item.meta {
        let nofollow = AtFlags::SYMLINK_NOFOLLOW;
        let mut done = Ok(());
        if restore.root {
            done = rustix::fs::chownat(
                dir,
                temp.as_slice(),
                Some(rustix::fs::Uid::from_raw(m.uid)),
                Some(rustix::fs::Gid::from_raw(m.gid)),
                nofollow,
            )
            .map_err(|e| format!("chown: {}", explain(e)));
        }
        done = done.and_then(|()| {
            rustix::fs::utimensat(dir, temp.as_slice(), &times(m), nofollow)
                .map_err(|e| format!("set times: {}", explain(e)))
        });
        if let Err(why) = done {
            let _ = rustix::fs::unlinkat(dir, temp.as_slice(), AtFlags::empty());
            return Err(at.fail(format!("{why} (not made)")));
        }
    }
    publish(at, dir, &temp, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_spread_bytes_and_counts_the_same_everywhere() {
        let item = |size| Item {
            rel: Vec::new(),
            name: Vec::new(),
            meta: None,
            size,
        };
        let items: Vec<Item> = [100, 0, 0, 90, 10, 0].into_iter().map(item).collect();
        let share = shares(&items, 2);
        assert_eq!(share, shares(&items, 2));
        let bytes = |r| {
            items
                .iter()
                .zip(&share)
                .filter(|(_, &s)| s == r)
                .map(|(i, _)| i.size)
                .sum::<u64>()
        };
        assert_eq!((bytes(0), bytes(1)), (100, 100));
        assert!(share.iter().filter(|&&s| s == 1).count() >= 2);
        assert!(shares(&items, 1).iter().all(|&s| s == 0));
    }

    /// An aggregate holding hostile names (made with the library: `pack` never writes them):
    /// absolute paths, `..` anywhere, a name standing for DEST itself; each is refused and
    /// named, nothing is written outside DEST, the safe streams are unpacked (2 thread ranks).
    #[test]
    fn unsafe_names_are_refused_and_nothing_lands_outside() {
        use crate::engine::context::Collect;
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap();
        let agg = t.path().join("evil.pfa");
        let dest = t.path().join("inner/dest");
        std::fs::create_dir(t.path().join("inner")).unwrap();
        let outside = t.path().join("escaped");
        let names: Vec<Vec<u8>> = vec![
            b"../escaped".to_vec(),
            b"../../escaped".to_vec(),
            b"a/../../escaped".to_vec(),
            [outside.as_os_str().as_bytes(), b"-abs"].concat(),
            b".".to_vec(),
            b"ok/file".to_vec(),
        ];
        steal::local::run(2, |comm| {
            let mut w = ::pfa::Aggregate::create(comm, &agg, &::pfa::Options::default()).unwrap();
            if comm.rank() == 0 {
                for n in &names {
                    w.write_stream(n, b"", b"evil").unwrap();
                }
            }
            w.close().unwrap();
        });
        let events = std::sync::Arc::new(Collect::default());
        let context = Context::new(events.clone());
        let options = Options {
            agg: agg.as_os_str().as_bytes().to_vec(),
            dest: dest.as_os_str().as_bytes().to_vec(),
            version: None,
            overwrite: false,
        };
        let reports = steal::local::run(2, |comm| run(comm, &options, &context).unwrap());
        for r in &reports {
            assert_eq!((r.refused, r.files, r.failed), (5, 1, 0), "{r:?}");
        }
        assert_eq!(std::fs::read(dest.join("ok/file")).unwrap(), b"evil");
        assert!(!outside.exists());
        assert!(!t.path().join("inner/escaped").exists());
        assert!(!t.path().join("escaped-abs").exists());
        let errors = events.errors.lock().unwrap().clone();
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(errors
            .iter()
            .any(|e| e.contains("../escaped") && e.contains("'..'")));
        assert!(errors.iter().any(|e| e.contains("absolute path")));
    }
}
