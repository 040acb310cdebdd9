//! `tar -x` continued after an interruption (issue 33): the checkpoint, its marks, and what a
//! rerun may trust of the tree an earlier run left.
//!
//! Units have global keys (the same at any rank count), all taken from the entry's header
//! offset in the tar stream (`start`):
//! - [`Tag::Done`]: the entry is extracted completely, metadata included (payload: its data
//!   bytes, for the report, and the identity of what was made: device, inode, size, mtime and
//!   ctime). A rerun skips it only while the entry at its name is still that: one removed,
//!   replaced or changed since (someone cleaned the target, or edited a file, even keeping its
//!   mtime) is extracted again, as an uninterrupted run would have made it. Directories are
//!   never marked: their metadata is set at the end of every run (the entries a rerun makes
//!   change their times).
//! - [`Tag::Linked`]: a hard link was made to an extracted entry (payload: the link's header
//!   offset, a hash of the target's name, and the target's identity once linked: linking
//!   changes its ctime, and every run makes its hard links again). A rerun takes the target as
//!   unchanged when its identity is that of its `Done` mark or of one of these.
//! - [`Tag::Created`]: the file was created at its size for its data to be written in ranges
//!   (payload: its device and inode, its birth time, and the generation of the run that
//!   created it).
//! - [`Tag::Range`]: `len` bytes at offset `at` of the file landed (payload: the generation of
//!   the file they were written into). A rerun writes only what the ranges of the file's
//!   generation do not cover, whatever the rank count (no grid to agree on).
//!
//! A partial file is continued only when the file at its name (opened beneath the target with
//! `O_NOFOLLOW`, as extraction opens it) is a regular file with the recorded device, inode and
//! birth time (a file removed and made again by someone else can get the inode number back),
//! one link, the entry's size, and not the archive's mtime (a file with incomplete data never
//! carries it). Anything else is extracted from scratch, under a new generation: the ranges of
//! the old one no longer count, even if the new file gets the old inode number back.
//!
//! Marks follow their data: a unit is marked once its data is written, and the target's file
//! system is registered with [`Checkpoint::durable`], so the syncer `syncfs`s it and a rerun
//! after a crash of the node trusts only the marks made before a sync. A file written by ranks
//! on several nodes is marked by its owner only once every rank synced its part (phase 4).

use super::beneath::{explain, split, Target};
use super::entries::Item;
use crate::engine::checkpoint::{self, Checkpoint, Choice, Durable, Inputs, Outcome, Plan};
use crate::engine::context::Error;
use crate::tar::archive::Archive;
use crate::tar::format::Kind;
use crate::tar::Options;
use flist::path::display;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use std::collections::HashMap;
use std::sync::Arc;
use steal::{Comm, CommExt};

/// What a mark is about (the first byte of its payload).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Tag {
    Done = 1,
    Created = 2,
    Range = 3,
    Linked = 4,
}

/// The key of the unit `tag` of the entry at `start` (`at`: a range's offset, else 0).
fn key(tag: Tag, start: u64, at: u64) -> u64 {
    let mut b = [0u8; 17];
    b[0] = tag as u8;
    b[1..9].copy_from_slice(&start.to_le_bytes());
    b[9..].copy_from_slice(&at.to_le_bytes());
    xxhash_rust::xxh64::xxh64(&b, 0x7461_722d_7801)
}

/// The payload: the tag, then little-endian u64s.
fn payload(tag: Tag, words: &[u64]) -> Vec<u8> {
    let mut p = Vec::with_capacity(1 + 8 * words.len());
    p.push(tag as u8);
    for w in words {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p
}

/// The u64s of a payload of `tag` with `n` of them; `None` for anything else.
fn words(p: &[u8], tag: Tag, n: usize) -> Option<Vec<u64>> {
    if p.len() != 1 + 8 * n || p[0] != tag as u8 {
        return None;
    }
    Some(
        p[1..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    )
}

/// A file created by an earlier run for its data to be written in ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Created {
    /// Device and inode of the file.
    pub id: (u64, u64),
    /// The generation its ranges were marked with.
    pub gen: u64,
    /// When the file came to be (its birth time, or its change time where the file system
    /// keeps none): a file removed and made again can get the same inode number back, never
    /// the same birth time.
    pub born: (u64, u64, u64),
}

/// [`Created::born`] of a stamp: (1 = birth time, 2 = change time, seconds, nanoseconds).
fn born_words(s: &flist::atomic::Stamp) -> (u64, u64, u64) {
    match s.born {
        flist::atomic::Born::Birth(sec, ns) => (1, sec as u64, u64::from(ns)),
        flist::atomic::Born::Change(sec, ns) => (2, sec as u64, u64::from(ns)),
    }
}

/// The identity of an extracted entry as its `Done` mark records it (see
/// [`checkpoint::Stamp`]); all 0 for an entry that makes nothing (a volume label).
pub(super) type Made = checkpoint::Stamp;

/// [`Made`] of the entry whose `lstat` is `st`.
pub(super) use checkpoint::stamp_of as made_of;

/// [`Made`] of the entry at `rel` beneath `target`, never followed if a symlink.
pub(super) fn made_at(target: &Target, rel: &[u8]) -> Option<Made> {
    let (parent, name) = split(rel);
    let dir = target.dir(parent, false).ok()?;
    rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| made_of(&st))
}

/// The hash of a (cleaned) name in `Linked` marks.
fn name_hash(rel: &[u8]) -> u64 {
    xxhash_rust::xxh64::xxh64(rel, 0x6c69_6e6b)
}

/// What earlier runs finished, by entry (header offset), the same on every rank.
#[derive(Default)]
pub(super) struct Earlier {
    /// Entries extracted completely: their data bytes and what was made.
    pub done: HashMap<u64, (u64, Made)>,
    /// What entries were once hard links were made to them, by the hash of their name.
    linked: HashMap<u64, Vec<Made>>,
    /// Files created at their size.
    created: HashMap<u64, Created>,
    /// Ranges of file data landed: (offset, bytes, generation).
    ranges: HashMap<u64, Vec<(u64, u64, u64)>>,
}

impl Earlier {
    /// The units of `prior`, each checked against its key (a payload that does not belong to
    /// its key is not trusted).
    fn of<'a>(marks: impl Iterator<Item = (u64, &'a [u8])>) -> Earlier {
        let mut e = Earlier::default();
        for (k, p) in marks {
            match p.first().copied() {
                Some(t) if t == Tag::Done as u8 => {
                    // Marks of the earlier form (no identity) are not trusted.
                    if let Some(w) = words(p, Tag::Done, 9) {
                        if key(Tag::Done, w[0], 0) == k {
                            let made = w[2..].try_into().expect("7 words");
                            e.done.insert(w[0], (w[1], made));
                        }
                    }
                }
                Some(t) if t == Tag::Linked as u8 => {
                    if let Some(w) = words(p, Tag::Linked, 9) {
                        if key(Tag::Linked, w[0], 0) == k {
                            let made = w[2..].try_into().expect("7 words");
                            e.linked.entry(w[1]).or_default().push(made);
                        }
                    }
                }
                Some(t) if t == Tag::Created as u8 => {
                    if let Some(w) = words(p, Tag::Created, 7) {
                        if key(Tag::Created, w[0], 0) == k {
                            let c = Created {
                                id: (w[1], w[2]),
                                gen: w[3],
                                born: (w[4], w[5], w[6]),
                            };
                            e.created.insert(w[0], c);
                        }
                    }
                }
                Some(t) if t == Tag::Range as u8 => {
                    if let Some(w) = words(p, Tag::Range, 4) {
                        if key(Tag::Range, w[0], w[1]) == k && w[2] > 0 {
                            e.ranges.entry(w[0]).or_default().push((w[1], w[2], w[3]));
                        }
                    }
                }
                _ => {}
            }
        }
        for r in e.ranges.values_mut() {
            r.sort_unstable();
        }
        e
    }

    /// The data bytes of `item` if an earlier run extracted it completely and the entry at
    /// its name beneath `target` (never followed) is still what that run made: the same
    /// device, inode, size, mtime and ctime, as its `Done` mark or a `Linked` mark of its name
    /// (a hard link made to it since) records them.
    pub fn still_done(&self, target: &Target, item: &Item) -> Option<u64> {
        let &(bytes, made) = self.done.get(&item.start)?;
        if matches!(item.kind, Kind::Other(_)) {
            // Nothing was made (a volume label).
            return Some(bytes);
        }
        let (parent, name) = split(item.rel);
        let dir = target.dir(parent, false).ok()?;
        let st = rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
        let now = made_of(&st);
        let linked = self.linked.get(&name_hash(item.rel));
        let same = now == made || linked.is_some_and(|l| l.contains(&now));
        same.then_some(bytes)
    }

    /// Whether the file of `item` (created by an earlier run and waiting for data) can be
    /// continued: the file at its name beneath `target`, never followed if a symlink, is a
    /// regular file with the recorded device and inode, one link, the entry's size, and not
    /// the archive's mtime; and it is not a file the target keeps. Returns its record.
    pub fn reusable(&self, target: &Target, item: &Item) -> Option<Created> {
        let c = *self.created.get(&item.start)?;
        let (parent, name) = split(item.rel);
        let dir = target.dir(parent, false).ok()?;
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let st = rustix::fs::fstat(&fd).ok()?;
        let stamp = flist::atomic::Stamp::of(fd.as_fd()).ok()?;
        let ok = st.st_mode & libc::S_IFMT == libc::S_IFREG
            && (st.st_dev, st.st_ino) == c.id
            && born_words(&stamp) == c.born
            && st.st_nlink == 1
            && st.st_size as u64 == item.size
            && (st.st_mtime, st.st_mtime_nsec as i64) != (item.mtime, i64::from(item.mtime_nsec))
            && target.kept(&st).is_none();
        ok.then_some(c)
    }

    /// The parts of `(at, len)` of the file `start` (of generation `gen`) that no earlier
    /// range of that generation covers, and the bytes covered.
    pub fn uncovered(&self, start: u64, gen: u64, (at, len): (u64, u64)) -> (Vec<(u64, u64)>, u64) {
        let end = at + len;
        let mut out = Vec::new();
        let mut x = at;
        if let Some(rs) = self.ranges.get(&start) {
            for &(a, l, g) in rs {
                if g != gen || a + l <= x {
                    continue;
                }
                if a >= end {
                    break;
                }
                if a > x {
                    out.push((x, a - x));
                }
                x = x.max(a + l);
                if x >= end {
                    break;
                }
            }
        }
        if x < end {
            out.push((x, end - x));
        }
        let written: u64 = out.iter().map(|r| r.1).sum();
        (out, len - written)
    }
}

/// A run's checkpoint, what earlier runs finished, and this run's generation.
pub(super) struct Resume {
    pub checkpoint: Option<Checkpoint>,
    pub earlier: Earlier,
    /// This run's generation: the files it creates for ranges are marked with it.
    pub gen: u64,
    /// Notices said on stderr (rank 0's): continued, not used and why, none kept and why.
    pub notices: Vec<String>,
}

impl Resume {
    /// No checkpoint.
    pub fn off(notices: Vec<String>) -> Resume {
        Resume {
            checkpoint: None,
            earlier: Earlier::default(),
            gen: 1,
            notices,
        }
    }

    /// Whether a checkpoint is kept (marks need the identity of what was made).
    pub fn on(&self) -> bool {
        self.checkpoint.is_some()
    }

    /// Entry `start` is extracted completely, with `bytes` of data, and is `made` (`None`:
    /// its identity could not be taken, and it is not marked: a rerun extracts it again).
    pub fn done(&self, start: u64, bytes: u64, made: Option<Made>) {
        if let (Some(c), Some(m)) = (&self.checkpoint, made) {
            let mut w = vec![start, bytes];
            w.extend_from_slice(&m);
            c.mark(key(Tag::Done, start, 0), &payload(Tag::Done, &w));
        }
    }

    /// The hard link `item` was made: the identity of its target now (linking changed its
    /// ctime) is marked, so that a rerun still knows the target as what was extracted.
    pub fn linked(&self, target: &Target, item: &Item) {
        let Some(c) = &self.checkpoint else {
            return;
        };
        let Ok(to) = super::beneath::clean(item.link) else {
            return;
        };
        if let Some(m) = made_at(target, &to) {
            let mut w = vec![item.start, name_hash(&to)];
            w.extend_from_slice(&m);
            c.mark(key(Tag::Linked, item.start, 0), &payload(Tag::Linked, &w));
        }
    }

    /// The file of entry `start` was created (open as `fd`) for its data to come in ranges.
    pub fn created(&self, start: u64, fd: &OwnedFd) {
        if let Some(c) = &self.checkpoint {
            if let Ok(stamp) = flist::atomic::Stamp::of(fd.as_fd()) {
                let (dev, ino) = stamp.id;
                let (kind, sec, ns) = born_words(&stamp);
                let p = payload(Tag::Created, &[start, dev, ino, self.gen, kind, sec, ns]);
                c.mark(key(Tag::Created, start, 0), &p);
            }
        }
    }

    /// `len` bytes at `at` of the file of entry `start`, of generation `gen`, landed.
    pub fn range(&self, start: u64, gen: u64, (at, len): (u64, u64)) {
        if let (Some(c), true) = (&self.checkpoint, len > 0) {
            c.mark(
                key(Tag::Range, start, at),
                &payload(Tag::Range, &[start, at, len, gen]),
            );
        }
    }

    /// End the checkpoint: kept when `stopped`, removed otherwise. A failure is said (rank 0)
    /// and returned. Collective.
    pub fn finish(&mut self, comm: &dyn Comm, o: &Options, stopped: bool) -> bool {
        let Some(c) = self.checkpoint.take() else {
            return true;
        };
        c.finish_told(comm, &o.context, Outcome::of_stop(stopped))
    }
}

/// The archive's identity: device, inode, size, mtime and ctime (seconds, nanoseconds).
fn identity(archive: &Archive) -> Option<[i64; 7]> {
    let st = rustix::fs::fstat(archive.fd()).ok()?;
    Some([
        st.st_dev as i64,
        st.st_ino as i64,
        st.st_size,
        st.st_mtime,
        st.st_mtime_nsec as i64,
        st.st_ctime,
        st.st_ctime_nsec as i64,
    ])
}

/// The inputs of a `tar -x` of `path` into `dest`: what the tree it makes depends on.
fn inputs(o: &Options, path: &[u8], archive: &Archive, dest: &[u8], target: &Target) -> Inputs {
    let dest_id = rustix::fs::fstat(target.root())
        .map(|st| (st.st_dev, st.st_ino))
        .ok();
    let s = &o.select;
    let members: Vec<serde_bytes::ByteBuf> = s
        .members
        .iter()
        .map(|m| serde_bytes::ByteBuf::from(m.clone()))
        .collect();
    let root = rustix::process::geteuid().is_root();
    Inputs::new("tar -x")
        .field("the archive", &serde_bytes::Bytes::new(path))
        // Identities are the state of the inputs, not the job: compared, but out of the
        // default checkpoint's name, so that a rerun after they changed finds its checkpoint
        // and says why it starts over.
        .state(
            "the archive's identity (device, inode, size, mtime, ctime)",
            &identity(archive),
        )
        .field("the target directory", &serde_bytes::Bytes::new(dest))
        .state("the target directory's identity", &dest_id)
        .field(
            "the MEMBERs and how they match",
            &(
                members,
                s.wildcards,
                s.wildcards_match_slash,
                s.anchored,
                s.strip_components,
            ),
        )
        .field("the include/exclude rules", &format!("{:?}", o.rules))
        .field(
            "-p/--preserve-perms, --preserve-owner, --numeric-owner (or running as root)",
            &(o.preserve_perms, o.preserve_owner, o.numeric_owner, root),
        )
        .field("--xattrs", &o.xattrs)
        .field("--verify", &o.verify)
}

/// Open the checkpoint of this `tar -x` (none with `--no-checkpoint` or `--manifest`, or when
/// the default place would be inside the target directory); a `--checkpoint PATH` inside the
/// target was refused before (see `setup`). Says on rank 0 what it did. Collective.
pub(super) fn open(
    comm: &dyn Comm,
    o: &Options,
    path: &[u8],
    archive: &Archive,
    dest: &[u8],
    target: &Target,
) -> Result<Resume, Error> {
    let rank0 = comm.rank() == 0;
    let mut notices = Vec::new();
    let mut say = |n: &str| {
        if rank0 {
            o.context.events.error(n);
            notices.push(n.to_string());
        }
    };
    if o.checkpoint == Choice::Off || comm.any(o.context.stopped()) {
        return Ok(Resume::off(notices));
    }
    if o.manifest.is_some() {
        // The manifest's digests are taken as the data lands: a rerun that skipped what an
        // earlier run wrote would have none for it.
        say(
            "running without a checkpoint: --manifest hashes the data as it is extracted (an \
             interrupted run will start over)",
        );
        return Ok(Resume::off(notices));
    }
    if o.checkpoint == Choice::Beside {
        // The default place, in the state directory, may lie in the target (`-C ~`): the
        // extraction could replace its files (and a rerun's walk of the tree is not ours to
        // change). Found by the same rule as an output inside the target.
        let inside = comm.bcast_with(0, || {
            default_dir().and_then(|dir| {
                crate::engine::outputs::refuse_inside(
                    &[("checkpoint", &dir)],
                    &[("target directory", dest)],
                )
                .err()
                .map(|_| dir)
            })
        });
        if let Some(dir) = inside {
            say(&format!(
                "running without a checkpoint: the checkpoints directory {} lies inside the \
                 target directory {} (an interrupted run will start over; give --checkpoint a \
                 path outside it)",
                display(&dir),
                display(dest)
            ));
            return Ok(Resume::off(notices));
        }
    }
    let plan = Plan {
        output: None,
        inputs: inputs(o, path, archive, dest, target),
    };
    let opened = checkpoint::open(comm, &o.checkpoint, plan).map_err(Error::new)?;
    if let Some(n) = &opened.notice {
        say(n);
    }
    let earlier = Earlier::of(opened.prior.iter());
    let gen = comm.bcast_with(0, random_gen);
    if let Some(ck) = &opened.checkpoint {
        // Marks stand for data on the target's file system: the syncer syncs it.
        match rustix::io::fcntl_dupfd_cloexec(target.root(), 0) {
            Ok(fd) => ck.durable(Durable::FileSystem(Arc::new(fd))),
            Err(e) => {
                return Err(Error::new(format!(
                    "open the target directory {}: {}",
                    display(dest),
                    explain(e)
                )))
            }
        }
    }
    Ok(Resume {
        checkpoint: opened.checkpoint,
        earlier,
        gen,
        notices,
    })
}

/// Where the default checkpoints are (`$XDG_STATE_HOME/mfu-rs/checkpoints`, or
/// `~/.local/state/...`), absolute, as the core finds it, but not created: when it would lie
/// in the target, nothing is made there.
fn default_dir() -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let dir = checkpoint::state_dir_path().ok()?;
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    Some(flist::path::normalize(dir.as_os_str().as_bytes(), &cwd))
}

/// A generation number for this run (never 0).
fn random_gen() -> u64 {
    checkpoint::random().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncovered_parts_are_what_no_range_of_the_generation_holds() {
        let mut e = Earlier::default();
        e.ranges
            .insert(7, vec![(0, 10, 1), (10, 5, 2), (20, 10, 1), (40, 5, 1)]);
        assert_eq!(
            e.uncovered(7, 1, (0, 50)),
            (vec![(10, 10), (30, 10), (45, 5)], 25)
        );
        assert_eq!(e.uncovered(7, 1, (22, 5)), (vec![], 5));
        assert_eq!(e.uncovered(7, 2, (0, 20)), (vec![(0, 10), (15, 5)], 5));
        assert_eq!(e.uncovered(8, 1, (3, 4)), (vec![(3, 4)], 0));
    }

    /// A file at the recorded name, device and inode, but born at another time (removed and
    /// made again: the inode number came back) is not continued; the file itself is.
    #[test]
    fn a_partial_file_is_continued_only_with_its_recorded_birth() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("f");
        std::fs::write(&path, vec![0u8; 100]).unwrap();
        let fd = rustix::fs::open(&path, OFlags::RDONLY, Mode::empty()).unwrap();
        let stamp = flist::atomic::Stamp::of(fd.as_fd()).unwrap();
        let target = Target::open(t.path().as_os_str().as_bytes()).unwrap();
        let item = Item {
            rel: b"f",
            start: 512,
            data: 1024,
            size: 100,
            mtime: 1_000_000_000,
            mtime_nsec: 0,
            uid: 0,
            gid: 0,
            mode: 0o644,
            kind: crate::tar::format::Kind::File,
            own: true,
            link: b"",
            xattrs: &[],
            sparse: None,
            dev_major: 0,
            dev_minor: 0,
            projid: Default::default(),
        };
        let record = |born: (u64, u64, u64)| {
            let (dev, ino) = stamp.id;
            let p = payload(Tag::Created, &[512, dev, ino, 9, born.0, born.1, born.2]);
            let marks = [(key(Tag::Created, 512, 0), p)];
            Earlier::of(marks.iter().map(|(k, p)| (*k, &p[..])))
        };
        let born = born_words(&stamp);
        assert!(record(born).reusable(&target, &item).is_some());
        let other = (born.0, born.1, born.2 ^ 1);
        assert_eq!(record(other).reusable(&target, &item), None);
    }

    #[test]
    fn marks_whose_payload_is_not_of_their_key_are_not_trusted() {
        let w = [512, 9, 1, 2, 3, 4, 5, 6, 7];
        let good = (key(Tag::Done, 512, 0), payload(Tag::Done, &w));
        let moved = (key(Tag::Done, 1024, 0), payload(Tag::Done, &w));
        let short = (key(Tag::Created, 0, 0), payload(Tag::Created, &[0, 1]));
        // A mark of the earlier form, without the identity of what was made.
        let old = (key(Tag::Done, 2048, 0), payload(Tag::Done, &[2048, 9]));
        let marks = [good, moved, short, old];
        let e = Earlier::of(marks.iter().map(|(k, p)| (*k, &p[..])));
        assert_eq!(e.done.len(), 1);
        assert_eq!(e.done.get(&512), Some(&(9, [1, 2, 3, 4, 5, 6, 7])));
        assert!(e.created.is_empty());
    }
}
