//! Writing a [`Plan`] on all ranks. Every rank holds the whole plan, so the work is split by
//! arithmetic, without messages:
//! 1. directories, level by level (a barrier between levels), each level's directories split
//!    evenly over ranks;
//! 2. files: laid end to end, each weighing [`FILE_COST`] plus its size, and the total weight
//!    cut into equal ranges, one per rank. The rank whose range holds a file's start creates it
//!    (and writes its own part); after a barrier every other rank writes its part of files it
//!    shares with pwrite at the part's offset, so big files are written by several ranks and
//!    small ones are batched on one. Links are made beside step 2, split evenly;
//! 3. within a rank, rayon workers do the items in parallel, big parts in [`CHUNK`] pieces.
//!
//! Below the root no symbolic link is ever followed (a `--force` run into a tree someone else
//! can write must not write outside it): each item is made relative to its directory, opened
//! from the root with `openat2(RESOLVE_NO_SYMLINKS)`, and files are opened with `O_NOFOLLOW`.
//! A link in the way fails that item (`ELOOP`) and everything planned below it.
//!
//! An existing inode is never written into (`--force` over a tree that hard links reach from
//! outside must not change the outside names): a file of the plan that exists as a regular file
//! is unlinked and created anew with `O_EXCL`, a link of the plan that exists as a symbolic link
//! is replaced, a directory is reused. Anything of another type in an item's place (a user's
//! file where a link goes, a directory where a file goes...) is left alone and that item fails,
//! named. Ranks that write parts of a file another rank created check that it still is a
//! regular file with one link before writing.

use super::plan::{Kind, Plan, ROOT};
use crate::engine::checkpoint::{Checkpoint, Prior};
use flist::distribute::even_start;
use flist::ItemError;
use rayon::prelude::*;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use steal::progress::Progress;
use steal::{Comm, CommExt, ReduceOp};

/// What creating one file costs, in bytes of data written in the same time: the weight that
/// keeps ranks balanced when a tree holds many small files.
pub const FILE_COST: u64 = 64 << 10;

/// Bytes of one piece of work on a rayon worker.
pub const CHUNK: u64 = 16 << 20;

/// Bytes per `pwrite`.
const WRITE_BYTES: usize = 1 << 20;

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0; WRITE_BYTES]);
}

/// What [`make`] did: counts summed over all ranks, failures of this rank.
#[derive(Debug, Default)]
pub struct Made {
    /// Directories made (or found already there).
    pub dirs: u64,
    /// Files created.
    pub files: u64,
    /// Symbolic links made.
    pub links: u64,
    /// Bytes written into files.
    pub bytes: u64,
    /// Failures on all ranks.
    pub total_errors: u64,
    /// This rank's failures, each with its path and operation.
    pub errors: Vec<ItemError>,
    /// A stop was asked for (a signal) on some rank: the tree is incomplete.
    pub interrupted: bool,
}

/// Make the tree `plan` describes under `root` (created if absent; its parent must exist), on
/// all ranks. An existing directory is reused, an existing regular file replaced by a new one,
/// an existing link replaced; anything else in an item's place fails that item. `progress`
/// counts items and bytes. Collective; `Err` (on every rank) when `root` cannot be created.
pub fn make(
    comm: &dyn Comm,
    plan: &Plan,
    root: &[u8],
    progress: &Progress,
) -> Result<Made, String> {
    make_until(comm, plan, root, progress, true, &AtomicBool::new(false))
}

/// [`make`], replacing files and links of the plan found in place only with `replace` (without
/// it such an item fails: something appeared in a directory that was empty), and stopping
/// early (items not started are skipped, a file's write stops within 1 MiB) once `stop` is set
/// on any rank; then [`Made::interrupted`] is set on every rank.
pub fn make_until(
    comm: &dyn Comm,
    plan: &Plan,
    root: &[u8],
    progress: &Progress,
    replace: bool,
    stop: &AtomicBool,
) -> Result<Made, String> {
    make_resuming(
        comm,
        plan,
        root,
        progress,
        replace,
        stop,
        &Resume::default(),
    )
}

/// What an interrupted earlier run of the same plan finished, and where this run records what
/// it finishes.
#[derive(Default)]
pub(crate) struct Resume<'a> {
    /// The earlier runs' marks (see [`Mark`]).
    pub prior: Prior,
    /// This run's checkpoint: each file part is marked once written.
    pub checkpoint: Option<&'a Checkpoint>,
}

/// One mark's payload: a file (item `g`, created as the inode `id`) had the bytes `offset ..
/// offset + len` written, by the rank that created it (`create`) or by another, and had the
/// change time `ctime` (s, ns) after that write. A file is done when a creator's mark and parts
/// of the same inode cover its size, and it still is that inode with that size and the latest
/// of those change times (its last write's: an inode number reused by another file, or a file
/// changed since, does not pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Mark {
    pub g: u32,
    pub create: bool,
    pub id: (u64, u64),
    pub offset: u64,
    pub len: u64,
    pub ctime: (i64, i64),
}

impl Mark {
    /// The mark's key: the same for the same part of the same file at any rank count, distinct
    /// for distinct parts (a creator's mark has a key of its own, which a later run that
    /// creates the file again replaces).
    fn key(&self) -> u64 {
        // xxh64 of a few bytes on the stack: once per file made, where blake3's hasher (its
        // state set up and finalized for 13-28 bytes) was a share of a small file's cost.
        let mut b = [0u8; 4 + 16];
        b[..4].copy_from_slice(&self.g.to_le_bytes());
        let n = if self.create {
            b[4..11].copy_from_slice(b"created");
            11
        } else {
            b[4..12].copy_from_slice(&self.offset.to_le_bytes());
            b[12..20].copy_from_slice(&self.len.to_le_bytes());
            20
        };
        xxhash_rust::xxh64::xxh64(&b[..n], 0x6669_6c65)
    }
}

/// What a file finished by an earlier run must still be: (device, inode), change time.
type Finished = ((u64, u64), (i64, i64));

/// The files the marks of `prior` say are done (see [`Mark`]), with the inode each was made
/// as and its last change time; not yet checked against the tree.
fn done_by_marks(plan: &Plan, prior: &Prior) -> std::collections::HashMap<u32, Finished> {
    use std::collections::HashMap;
    let marks: Vec<Mark> = prior
        .iter()
        .filter_map(|(_, payload)| steal::decode::<Mark>(payload).ok())
        .filter(|m| {
            plan.items
                .get(m.g as usize)
                .is_some_and(|i| i.kind == Kind::File)
        })
        .collect();
    let created: HashMap<u32, (u64, u64)> = marks
        .iter()
        .filter(|m| m.create)
        .map(|m| (m.g, m.id))
        .collect();
    let mut parts: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    let mut last: HashMap<u32, (i64, i64)> = HashMap::new();
    for m in &marks {
        if created.get(&m.g) == Some(&m.id) {
            parts
                .entry(m.g)
                .or_default()
                .push((m.offset, m.offset.saturating_add(m.len)));
            let t = last.entry(m.g).or_insert(m.ctime);
            *t = (*t).max(m.ctime);
        }
    }
    created
        .into_iter()
        .map(|(g, id)| (g, (id, last[&g])))
        .filter(|(g, _)| {
            let size = plan.items[*g as usize].size;
            let mut spans = parts.remove(g).unwrap_or_default();
            spans.sort_unstable();
            let mut covered = 0u64;
            for (a, b) in spans {
                if a > covered {
                    break;
                }
                covered = covered.max(b);
            }
            covered >= size
        })
        .collect()
}

/// [`make_until`], skipping the files `resume.prior` says are done (each checked by the rank
/// that would create it: still the inode that was written, a regular file of the planned size
/// with one link; otherwise made again) and marking each part of a file once written.
pub(crate) fn make_resuming(
    comm: &dyn Comm,
    plan: &Plan,
    root: &[u8],
    progress: &Progress,
    replace: bool,
    stop: &AtomicBool,
    resume: &Resume,
) -> Result<Made, String> {
    comm.bcast_with(0, || {
        mkdir(root).map_err(|e| format!("mkdir {}: {e}", flist::path::display(root)))
    })?;
    // Every item is made relative to the root's descriptor; all ranks need one.
    let root_fd = rustix::fs::open(
        flist::path::as_path(root),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open {}: {e}", flist::path::display(root)));
    let root_fd = comm.agree(root_fd)?;
    progress
        .total_items
        .store(plan.items.len() as u64, Ordering::Relaxed);
    progress
        .total_bytes
        .store(plan.total_bytes(), Ordering::Relaxed);
    let maker = Maker {
        replace,
        checkpoint: resume.checkpoint,
        stop,
        plan,
        root,
        root_fd: root_fd.as_fd(),
        progress,
        dirs: AtomicU64::new(0),
        files: AtomicU64::new(0),
        links: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        errors: Mutex::new(Vec::new()),
    };
    let (rank, size) = (comm.rank(), comm.size());

    // 1. Directories, top down.
    for level in &plan.levels {
        let dirs: Vec<u32> = level
            .clone()
            .filter(|&g| plan.items[g as usize].kind == Kind::Dir)
            .collect();
        let n = dirs.len() as u64;
        let mine =
            &dirs[even_start(n, size, rank) as usize..even_start(n, size, rank + 1) as usize];
        if !maker.stopped() {
            mine.par_iter().for_each(|&g| maker.dir(g));
        }
        comm.barrier();
    }
    // Every rank takes the same branch below.
    let stopped_early = comm.any(maker.stopped());

    // 2. Files by weight, links evenly; the files an earlier run finished are not made again
    // (each checked by the rank that would create it; every rank learns which failed).
    let claimed = done_by_marks(plan, &resume.prior);
    let all_files: Vec<u32> = (0..plan.items.len() as u32)
        .filter(|&g| plan.items[g as usize].kind == Kind::File)
        .collect();
    let stale: Vec<u32> = parts_of(plan, &all_files, size, rank)
        .iter()
        .filter(|p| p.create)
        .filter_map(|p| claimed.get(&p.item).map(|f| (p.item, *f)))
        .filter(|&(g, f)| !maker.still_done(g, f))
        .map(|(g, _)| g)
        .collect();
    let stale: std::collections::HashSet<u32> =
        comm.all_gather(&stale).into_iter().flatten().collect();
    let done: std::collections::HashSet<u32> =
        claimed.into_keys().filter(|g| !stale.contains(g)).collect();
    let files: Vec<u32> = all_files
        .into_iter()
        .filter(|g| !done.contains(g))
        .collect();
    // They count: the report covers the whole job.
    if comm.rank() == 0 {
        let bytes: u64 = done.iter().map(|&g| plan.items[g as usize].size).sum();
        maker.files.fetch_add(done.len() as u64, Ordering::Relaxed);
        maker.bytes.fetch_add(bytes, Ordering::Relaxed);
        progress.add(done.len() as u64, bytes);
    }
    let parts = parts_of(plan, &files, size, rank);
    let (created, later): (Vec<Part>, Vec<Part>) = parts.into_iter().partition(|p| p.create);
    let mut pieces: Vec<Part> = Vec::new();
    for p in &created {
        // The creator writes the first chunk of its part with the create; the rest waits.
        if p.len > CHUNK {
            pieces.extend(split(Part {
                offset: p.offset + CHUNK,
                len: p.len - CHUNK,
                create: false,
                ..*p
            }));
        }
    }
    let created = if stopped_early { Vec::new() } else { created };
    created.par_iter().for_each(|p| {
        maker.create(Part {
            len: p.len.min(CHUNK),
            ..*p
        })
    });
    let links: Vec<u32> = (0..plan.items.len() as u32)
        .filter(|&g| plan.items[g as usize].kind == Kind::Link)
        .collect();
    let n = links.len() as u64;
    if !stopped_early {
        links[even_start(n, size, rank) as usize..even_start(n, size, rank + 1) as usize]
            .par_iter()
            .for_each(|&g| maker.link(g));
    }
    comm.barrier();
    if !comm.any(maker.stopped()) {
        for p in later {
            pieces.extend(split(p));
        }
        pieces.par_iter().for_each(|p| maker.write_part(*p));
    }
    let interrupted = comm.any(maker.stopped());

    let mut v =
        [&maker.dirs, &maker.files, &maker.links, &maker.bytes].map(|a| a.load(Ordering::Relaxed));
    let errors = maker.errors.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut all = [v[0], v[1], v[2], v[3], errors.len() as u64];
    comm.allreduce(&mut all, ReduceOp::Sum);
    v.copy_from_slice(&all[..4]);
    Ok(Made {
        dirs: v[0],
        files: v[1],
        links: v[2],
        bytes: v[3],
        total_errors: all[4],
        errors,
        interrupted,
    })
}

/// A byte range of one file that one rank writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Part {
    /// The file's item number.
    item: u32,
    /// This rank creates the file (truncating whatever was there).
    create: bool,
    /// First byte.
    offset: u64,
    /// Bytes (may be 0 for a creator).
    len: u64,
}

/// The parts of `files` (item numbers, in plan order) that rank `rank` of `size` makes.
fn parts_of(plan: &Plan, files: &[u32], size: usize, rank: usize) -> Vec<Part> {
    let mut starts = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for &g in files {
        starts.push(total);
        total += FILE_COST + plan.items[g as usize].size;
    }
    let (lo, hi) = (
        even_start(total, size, rank),
        even_start(total, size, rank + 1),
    );
    // The first file that ends after `lo`.
    let first = starts.partition_point(|&s| s <= lo).saturating_sub(1);
    let mut out = Vec::new();
    for (i, &g) in files.iter().enumerate().skip(first) {
        let start = starts[i];
        if start >= hi {
            break;
        }
        let data = start + FILE_COST..start + FILE_COST + plan.items[g as usize].size;
        let create = lo <= start && start < hi;
        let (a, b) = (data.start.max(lo), data.end.min(hi));
        let len = b.saturating_sub(a);
        if create || len > 0 {
            out.push(Part {
                item: g,
                create,
                offset: if len > 0 { a - data.start } else { 0 },
                len,
            });
        }
    }
    out
}

/// `p` in pieces of at most [`CHUNK`] bytes.
fn split(p: Part) -> Vec<Part> {
    (0..p.len.div_ceil(CHUNK))
        .map(|k| Part {
            offset: p.offset + k * CHUNK,
            len: (p.len - k * CHUNK).min(CHUNK),
            ..p
        })
        .collect()
}

/// What one rank's workers share.
struct Maker<'a> {
    /// Items of the plan found in place (with their planned type) may be replaced.
    replace: bool,
    /// Where each file part written is marked.
    checkpoint: Option<&'a Checkpoint>,
    /// Set when the run must stop (a signal): items not started are skipped.
    stop: &'a AtomicBool,
    plan: &'a Plan,
    root: &'a [u8],
    /// The root, open on this rank (`O_PATH`): every item is made beneath it.
    root_fd: BorrowedFd<'a>,
    progress: &'a Progress,
    dirs: AtomicU64,
    files: AtomicU64,
    links: AtomicU64,
    bytes: AtomicU64,
    errors: Mutex<Vec<ItemError>>,
}

impl Maker<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// File `g`, which an earlier run finished as the inode `id` with the change time `ctime`,
    /// still is that inode: a regular file with one link, the planned size and that change
    /// time, reached without following a link.
    fn still_done(&self, g: u32, (id, ctime): Finished) -> bool {
        let size = self.plan.items[g as usize].size;
        self.at(g, |dir, name| {
            rustix::fs::statat(dir, flist::path::as_path(name), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(io::Error::from)
        })
        .is_ok_and(|st| {
            FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                && st.st_nlink == 1
                && (st.st_dev, st.st_ino) == id
                && st.st_size as u64 == size
                && (st.st_ctime, st.st_ctime_nsec as i64) == ctime
        })
    }

    /// Record that `p`'s bytes are in the file `file` (after they were written).
    fn mark(&self, file: &File, p: Part) {
        let Some(c) = self.checkpoint else {
            return;
        };
        let Ok(st) = rustix::fs::fstat(file) else {
            return;
        };
        let m = Mark {
            g: p.item,
            create: p.create,
            id: (st.st_dev, st.st_ino),
            offset: p.offset,
            len: p.len,
            ctime: (st.st_ctime, st.st_ctime_nsec as i64),
        };
        // Encoded straight into the checkpoint's buffer: one mark per file part.
        c.mark_with(m.key(), |out| steal::typed::encode_into(&m, out));
    }

    /// [`replaceable`], and only when replacing was asked for (`--force`).
    fn replaceable(&self, dir: BorrowedFd, name: &[u8], kind: FileType) -> io::Result<()> {
        replaceable(dir, name, kind)?;
        if !self.replace {
            return Err(io::Error::new(
                io::Error::from(Errno::EXIST).kind(),
                "appeared during the run (not replaced without --force)",
            ));
        }
        Ok(())
    }

    fn path(&self, g: u32) -> Vec<u8> {
        [self.root, b"/", &self.plan.rel_path(g)].concat()
    }

    fn fail(&self, path: &[u8], op: &'static str, e: io::Error) {
        self.progress.errors.fetch_add(1, Ordering::Relaxed);
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ItemError::new(path, op, e));
    }

    /// Run `op` on item `g`'s directory (opened without following symbolic links) and name.
    fn at<T>(&self, g: u32, op: impl FnOnce(BorrowedFd, &[u8]) -> io::Result<T>) -> io::Result<T> {
        let name = self.plan.name(g);
        match self.plan.items[g as usize].parent {
            ROOT => op(self.root_fd, &name),
            parent => {
                let dir = open_dir_beneath(self.root_fd, &self.plan.rel_path(parent))?;
                op(dir.as_fd(), &name)
            }
        }
    }

    fn dir(&self, g: u32) {
        if self.stopped() {
            return;
        }
        match self.at(g, mkdir_at) {
            Ok(()) => {
                self.dirs.fetch_add(1, Ordering::Relaxed);
                self.progress.add(1, 0);
            }
            Err(e) => self.fail(&self.path(g), "mkdir", e),
        }
    }

    fn link(&self, g: u32) {
        if self.stopped() {
            return;
        }
        let target = self.plan.link_target(g);
        let t = flist::path::as_path(&target);
        let r = self.at(g, |dir, name| {
            let p = flist::path::as_path(name);
            match rustix::fs::symlinkat(t, dir, p) {
                // A rerun into the same directory: replace a link, nothing else.
                Err(Errno::EXIST) => {
                    self.replaceable(dir, name, FileType::Symlink)?;
                    rustix::fs::unlinkat(dir, p, AtFlags::empty())
                        .and_then(|_| rustix::fs::symlinkat(t, dir, p))
                        .map_err(io::Error::from)
                }
                r => r.map_err(io::Error::from),
            }
        });
        match r {
            Ok(()) => {
                self.links.fetch_add(1, Ordering::Relaxed);
                self.progress.add(1, 0);
            }
            Err(e) => self.fail(&self.path(g), "symlink", e),
        }
    }

    /// Create the file of `p` (a new inode: a regular file already there is unlinked first)
    /// and write `p`'s bytes.
    fn create(&self, p: Part) {
        if self.stopped() {
            return;
        }
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let path = self.path(p.item);
        let made = self.at(p.item, |dir, name| match open_at(dir, name, flags, 0o600) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                self.replaceable(dir, name, FileType::RegularFile)?;
                rustix::fs::unlinkat(dir, flist::path::as_path(name), AtFlags::empty())?;
                open_at(dir, name, flags, 0o600)
            }
            r => r,
        });
        match made {
            Ok(fd) => {
                self.files.fetch_add(1, Ordering::Relaxed);
                self.progress.add(1, 0);
                let file = File::from(fd);
                if self.write(&file, &path, p) {
                    self.mark(&file, p);
                }
            }
            Err(e) => self.fail(&path, "create", e),
        }
    }

    /// Write `p`'s bytes into its file, which its creator made before the last barrier: still
    /// a regular file with one link (nobody linked or swapped it since), or nothing is written.
    fn write_part(&self, p: Part) {
        if self.stopped() {
            return;
        }
        let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let path = self.path(p.item);
        let opened = self
            .at(p.item, |dir, name| open_at(dir, name, flags, 0))
            .and_then(|fd| {
                let st = rustix::fs::fstat(&fd)?;
                if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_nlink != 1
                {
                    return Err(io::Error::other(
                        "no longer the file this run created (linked or replaced since): not written",
                    ));
                }
                Ok(fd)
            });
        match opened {
            Ok(fd) => {
                let file = File::from(fd);
                if self.write(&file, &path, p) {
                    self.mark(&file, p);
                }
            }
            Err(e) => self.fail(&path, "open", e),
        }
    }

    /// Write `p`'s bytes into `file`; true when all were written (not cut short by a stop or
    /// an error).
    fn write(&self, file: &File, path: &[u8], p: Part) -> bool {
        let r = BUFFER.with(|b| -> io::Result<bool> {
            let mut buf = b.borrow_mut();
            let mut done = 0u64;
            while done < p.len && !self.stopped() {
                let n = (p.len - done).min(buf.len() as u64) as usize;
                let at = p.offset + done;
                self.plan
                    .fill
                    .fill(self.plan.seed, p.item as u64, at, &mut buf[..n]);
                file.write_all_at(&buf[..n], at)?;
                done += n as u64;
                self.bytes.fetch_add(n as u64, Ordering::Relaxed);
                self.progress.add(0, n as u64);
            }
            Ok(done == p.len)
        });
        r.unwrap_or_else(|e| {
            self.fail(path, "write", e);
            false
        })
    }
}

/// The error for a symbolic link where the plan puts a directory or a file: `ELOOP`, as
/// `O_NOFOLLOW` reports it, with a message that says what happened.
fn link_in_the_way() -> io::Error {
    io::Error::new(
        io::Error::from(Errno::LOOP).kind(),
        "a symbolic link is in the way (not followed)",
    )
}

/// What an entry of type `kind` is called in messages.
fn type_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a file of unknown type",
    }
}

/// `Ok` when the entry `name` in `dir` is of type `kind` (a leftover of an earlier run, that
/// the item may replace); otherwise the error that names what is in the way. A symbolic link
/// where a file goes is `ELOOP`, as `O_NOFOLLOW` reports it.
fn replaceable(dir: BorrowedFd, name: &[u8], kind: FileType) -> io::Result<()> {
    let st = rustix::fs::statat(dir, flist::path::as_path(name), AtFlags::SYMLINK_NOFOLLOW)?;
    let found = FileType::from_raw_mode(st.st_mode);
    match found {
        f if f == kind => Ok(()),
        FileType::Symlink => Err(link_in_the_way()),
        f => Err(io::Error::new(
            io::Error::from(Errno::EXIST).kind(),
            format!("{} is in the way (not replaced)", type_name(f)),
        )),
    }
}

/// `e`, with `ELOOP` (a symbolic link met with `O_NOFOLLOW` or `RESOLVE_NO_SYMLINKS`) explained.
fn explain(e: Errno) -> io::Error {
    match e {
        Errno::LOOP => link_in_the_way(),
        e => e.into(),
    }
}

/// The directory `rel` below `root`, open (`O_PATH`) without following any symbolic link in
/// `rel`. Uses `openat2(RESOLVE_NO_SYMLINKS)`, one call; where the kernel lacks it (before
/// Linux 5.6, or a seccomp filter refuses it) opens one component at a time with `O_NOFOLLOW`.
fn open_dir_beneath(root: BorrowedFd, rel: &[u8]) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH;
    match rustix::fs::openat2(
        root,
        flist::path::as_path(rel),
        flags,
        Mode::empty(),
        resolve,
    ) {
        Err(Errno::NOSYS | Errno::PERM) => {}
        r => return r.map_err(explain),
    }
    walk_beneath(root, rel)
}

/// [`open_dir_beneath`] one component at a time, for kernels without `openat2`.
fn walk_beneath(root: BorrowedFd, rel: &[u8]) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir: Option<OwnedFd> = None;
    for name in rel.split(|&b| b == b'/') {
        let at = dir.as_ref().map_or(root, |d| d.as_fd());
        let next = rustix::fs::openat(
            at,
            flist::path::as_path(name),
            flags | OFlags::NOFOLLOW,
            Mode::empty(),
        );
        dir = Some(match next {
            // O_PATH | O_NOFOLLOW opens a link itself, which then is no directory.
            Err(Errno::NOTDIR) if is_symlink_at(at, name) => return Err(link_in_the_way()),
            r => r.map_err(explain)?,
        });
    }
    dir.ok_or_else(|| io::Error::from(Errno::INVAL))
}

fn is_symlink_at(dir: BorrowedFd, name: &[u8]) -> bool {
    rustix::fs::statat(dir, flist::path::as_path(name), AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

/// `openat` of `name` in `dir`.
fn open_at(dir: BorrowedFd, name: &[u8], flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        flist::path::as_path(name),
        flags,
        Mode::from_raw_mode(mode),
    )
    .map_err(explain)
}

/// `mkdirat` with mode 0700 (dfilemaker's), content with a directory already there but not
/// with a symbolic link (to a directory or not) in its place.
fn mkdir_at(dir: BorrowedFd, name: &[u8]) -> io::Result<()> {
    let p = flist::path::as_path(name);
    match rustix::fs::mkdirat(dir, p, Mode::from_raw_mode(0o700)) {
        Ok(()) => Ok(()),
        Err(Errno::EXIST) => {
            match rustix::fs::statat(dir, p, AtFlags::SYMLINK_NOFOLLOW).map(|st| st.st_mode) {
                Ok(mode) if FileType::from_raw_mode(mode) == FileType::Directory => Ok(()),
                Ok(mode) if FileType::from_raw_mode(mode) == FileType::Symlink => {
                    Err(link_in_the_way())
                }
                Ok(mode) => Err(io::Error::new(
                    io::Error::from(Errno::EXIST).kind(),
                    format!(
                        "{} is in the way (not replaced)",
                        type_name(FileType::from_raw_mode(mode))
                    ),
                )),
                Err(e) => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// `mkdir` with mode 0700 (dfilemaker's), content with a directory already there.
fn mkdir(path: &[u8]) -> io::Result<()> {
    let p = flist::path::as_path(path);
    match rustix::fs::mkdir(p, Mode::from_raw_mode(0o700)) {
        Ok(()) => Ok(()),
        Err(Errno::EXIST) if p.is_dir() && !p.is_symlink() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::{Fill, Item, ROOT};
    use super::*;

    fn plan(sizes: &[u64]) -> Plan {
        Plan {
            seed: 1,
            fill: Fill::Random,
            items: sizes
                .iter()
                .map(|&size| Item {
                    kind: Kind::File,
                    parent: ROOT,
                    size,
                    target: ROOT,
                })
                .collect(),
            levels: std::iter::once(0..sizes.len() as u32).collect(),
        }
    }

    #[test]
    fn parts_cover_every_byte_once_and_every_file_has_one_creator() {
        let sizes = [0, 10, 3 * FILE_COST, 0, 1, 40 * CHUNK, 5, 0];
        let p = plan(&sizes);
        let files: Vec<u32> = (0..sizes.len() as u32).collect();
        for ranks in 1..9 {
            let mut creators = vec![0; sizes.len()];
            let mut covered = vec![Vec::new(); sizes.len()];
            for r in 0..ranks {
                for part in parts_of(&p, &files, ranks, r) {
                    creators[part.item as usize] += part.create as u32;
                    if part.len > 0 {
                        covered[part.item as usize].push((part.offset, part.len));
                    }
                }
            }
            assert!(
                creators.iter().all(|&c| c == 1),
                "{ranks} ranks: {creators:?}"
            );
            for (i, mut c) in covered.into_iter().enumerate() {
                c.sort();
                let mut next = 0;
                for (o, l) in c {
                    assert_eq!(o, next, "{ranks} ranks, file {i}");
                    next += l;
                }
                assert_eq!(next, sizes[i], "{ranks} ranks, file {i}");
            }
        }
    }

    #[test]
    fn symbolic_links_in_the_way_are_never_followed() {
        let item = |kind, parent, size, target| Item {
            kind,
            parent,
            size,
            target,
        };
        // dir_0 in the root holding file_1 and link_2; file_3 in the root. Empty files: one
        // rank each (the creator), and truncation alone would show a followed link.
        let plan = Plan {
            seed: 1,
            fill: Fill::Alternate,
            items: vec![
                item(Kind::Dir, ROOT, 0, ROOT),
                item(Kind::File, 0, 0, ROOT),
                item(Kind::Link, 0, 0, 1),
                item(Kind::File, ROOT, 0, ROOT),
            ],
            levels: vec![0..1, 1..4],
        };
        let tmp = tempfile::tempdir().unwrap();
        let (root, outside) = (tmp.path().join("root"), tmp.path().join("outside"));
        std::fs::create_dir_all(outside.join("d")).unwrap();
        std::fs::write(outside.join("f"), b"precious").unwrap();
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(outside.join("d"), root.join("dir_00000000")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), root.join("file_00000003")).unwrap();
        let root_bytes = root.as_os_str().as_encoded_bytes().to_vec();
        for ranks in [1, 3] {
            let reports = steal::local::run(ranks, |comm| {
                make(comm, &plan, &root_bytes, &Progress::silent()).unwrap()
            });
            assert_eq!(reports[0].total_errors, 4, "{ranks} ranks");
            let mut errors: Vec<String> = reports
                .iter()
                .flat_map(|r| r.errors.iter().map(|e| e.to_string()))
                .collect();
            errors.sort();
            let r = root.display();
            assert_eq!(
                errors,
                [
                    format!("create {r}/dir_00000000/file_00000001: a symbolic link is in the way (not followed)"),
                    format!("create {r}/file_00000003: a symbolic link is in the way (not followed)"),
                    format!("mkdir {r}/dir_00000000: a symbolic link is in the way (not followed)"),
                    format!("symlink {r}/dir_00000000/link_00000002: a symbolic link is in the way (not followed)"),
                ]
            );
            assert_eq!(std::fs::read(outside.join("f")).unwrap(), b"precious");
            assert_eq!(std::fs::read_dir(outside.join("d")).unwrap().count(), 0);
        }
    }

    #[test]
    fn the_walk_without_openat2_refuses_links_too() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink("b", tmp.path().join("a/l")).unwrap();
        let root = std::fs::File::open(tmp.path()).unwrap();
        for walk in [walk_beneath, open_dir_beneath] {
            assert!(walk(root.as_fd(), b"a/b").is_ok());
            let e = walk(root.as_fd(), b"a/l").unwrap_err();
            assert!(e.to_string().contains("symbolic link is in the way"), "{e}");
            assert!(walk(root.as_fd(), b"a/none").is_err());
        }
    }

    #[test]
    fn without_replace_a_file_in_a_planned_place_is_kept() {
        let p = plan(&[5, 5]);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("file_00000001"), b"mine").unwrap();
        let root = tmp.path().as_os_str().as_encoded_bytes().to_vec();
        let stop = AtomicBool::new(false);
        let reports = steal::local::run(2, |comm| {
            make_until(comm, &p, &root, &Progress::silent(), false, &stop).unwrap()
        });
        assert_eq!(reports[0].total_errors, 1);
        let e: Vec<String> = reports
            .iter()
            .flat_map(|r| r.errors.iter().map(|e| e.to_string()))
            .collect();
        assert!(
            e[0].contains("file_00000001: appeared during the run"),
            "{e:?}"
        );
        assert_eq!(
            std::fs::read(tmp.path().join("file_00000001")).unwrap(),
            b"mine"
        );
        assert_eq!(
            std::fs::read(tmp.path().join("file_00000000"))
                .unwrap()
                .len(),
            5
        );
    }

    #[test]
    fn split_cuts_at_chunk_size() {
        let p = Part {
            item: 3,
            create: false,
            offset: 7,
            len: 2 * CHUNK + 1,
        };
        let s = split(p);
        assert_eq!(s.len(), 3);
        assert_eq!(s[2].offset, 7 + 2 * CHUNK);
        assert_eq!(s[2].len, 1);
    }
}
