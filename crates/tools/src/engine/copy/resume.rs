//! How the copy engine keeps and uses the journals of huge files ([`super::journal`]): which
//! files resume, which chunks they skip, when a chunk is marked and when the journal goes.
//!
//! Per batch, collectively: the rank holding a file in its list (sync's planning rank, cp's
//! share) decides whether it resumes (a trusted journal, found by cp here or handed over by
//! sync's plan) and rewrites its journal for this run's chunk size; the resumed files and
//! their done ranges are gathered on every rank, so each rank drops its chunks that are done
//! and narrows those partly done. New multi-chunk files get a fresh journal when they are
//! created; each chunk is marked by the rank that wrote it; the journal is removed just before
//! the file's final metadata.

use super::journal::{self, Found, Header, Resumable, SourceId};
use super::{Context, Pending};
use flist::chunk::Chunk;
use flist::{FileList, FileType, ItemError, Meta};
use rayon::prelude::*;
use rustix::fd::OwnedFd;
use rustix::fs::OFlags;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use steal::{Comm, CommExt};

/// Whether and how a copy keeps journals.
#[derive(Debug, Default)]
pub enum Journals {
    /// No journals (stripe's rewrites).
    #[default]
    Off,
    /// Keep journals; an existing destination with a trusted journal is resumed (cp).
    Probe,
    /// Keep journals; resume the files the planner found resumable, by source path, with what
    /// their journals said (sync: its planning may remove the journal itself, `--delete`).
    /// A planned file whose destination changed since is replaced by a new file.
    Planned(HashMap<Vec<u8>, Resumable>),
}

impl Journals {
    /// Journals are kept.
    pub fn on(&self) -> bool {
        !matches!(self, Journals::Off)
    }
}

/// True when a file of `size` bytes in chunks of `cs` bytes keeps a journal.
pub(super) fn journaled(size: u64, cs: u64) -> bool {
    size >= journal::min_bytes() && size > cs
}

/// The resumed files of a batch, known on every rank: source path -> byte ranges already
/// copied.
#[derive(Default)]
pub(super) struct Resumed {
    done: HashMap<Vec<u8>, Vec<(u64, u64)>>,
}

impl Resumed {
    /// True when `path` (a source) resumes.
    pub(super) fn contains(&self, path: &[u8]) -> bool {
        self.done.contains_key(path)
    }
}

/// True when the name of the journal of the destination `dst` belongs to the user: some
/// source entry is copied (or synced) there, e.g. a source tree holding both `big` and
/// `.big.mfu-partial`. Such a file then keeps no journal: the engine neither creates, reads,
/// marks, replaces nor removes a journal under that name, which holds the user's entry (a
/// journal there would share its inode with the user's copy, and marks would land in it).
/// `exists` tells whether a source path is there (lstat); an error other than "not there"
/// counts as there (no journal is the safe side).
pub fn users_name(
    map: &super::Mapping,
    dst: &[u8],
    exists: impl Fn(&[u8]) -> std::io::Result<()>,
) -> bool {
    map.sources_of(&journal::path_of(dst))
        .iter()
        .any(|s| match exists(s) {
            Ok(()) => true,
            Err(e) => !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)),
        })
}

/// [`users_name`] with the sources reached as the engine reaches them.
pub(super) fn users_name_in(map: &super::Mapping, reach: &super::reach::Reach, dst: &[u8]) -> bool {
    users_name(map, dst, |s| reach.src(s)?.lstat().map(|_| ()))
}

/// Decide which of this rank's `files` resume, rewrite their journals for chunks of `cs`
/// bytes, remove stale journals, and share the result. Collective.
pub(super) fn prepare(comm: &dyn Comm, files: &FileList, cs: u64, cx: &Context) -> Resumed {
    let journals = cx.journals;
    if !journals.on() {
        return Resumed::default();
    }
    let mine: Mutex<Vec<(Vec<u8>, DoneRanges)>> = Mutex::new(Vec::new());
    (0..files.len()).into_par_iter().for_each(|i| {
        let e = files.entry(i);
        let Some(m) = e
            .meta
            .filter(|m| e.kind == FileType::File && m.size >= journal::min_bytes())
        else {
            return;
        };
        if let Some(done) = decide(e.path, &m, cs, cx) {
            cx.tally.resumed.fetch_add(1, Ordering::Relaxed);
            mine.lock().expect("resumed").push((e.path.to_vec(), done));
        }
    });
    let mine = Resuming(mine.into_inner().expect("resumed"));
    let done = comm
        .all_gather(&mine)
        .into_iter()
        .flat_map(|r| r.0)
        .collect();
    Resumed { done }
}

/// The files of one rank that resume, each with its done byte ranges `(start, end)`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Resuming(#[serde(with = "steal::typed::byte_pairs")] Vec<(Vec<u8>, DoneRanges)>);

/// A file's done byte ranges, `(start, end)`.
type DoneRanges = Vec<(u64, u64)>;

/// For one file of the batch (`src`, walked as `m`): its done ranges when it resumes (its
/// journal rewritten for this run); otherwise a stale journal of it is removed, and a planned
/// resume that can't be is replaced by a new file.
fn decide(src: &[u8], m: &Meta, cs: u64, cx: &Context) -> Option<Vec<(u64, u64)>> {
    let dst = cx.map.dest(src);
    let jpath = journal::path_of(&dst);
    let (Ok(d), Ok(j)) = (cx.reach.dst(&dst), cx.reach.dst(&jpath)) else {
        return None;
    };
    // The journal's name holds a user's file: no journal is read, rewritten or removed there,
    // and the file is copied whole (sync's planning resumes none such; one that appeared in
    // SRC since is replaced as below).
    let users = users_name_in(cx.map, cx.reach, &dst);
    // --verify reads back every byte it vouches for; the chunks a journal marks were written
    // by an earlier run and may have changed in the destination since (only its inode is
    // recorded): with --verify nothing resumes (as with sync -c), the file is copied whole.
    let verify = cx.opts.hashing.is_some_and(|h| h.verify);
    let id = SourceId::of(m);
    let (resumable, planned) = match cx.journals {
        Journals::Planned(map) => match map.get(src) {
            Some(r) => (
                (!users && !verify && still_there(&d, r, m)).then(|| r.clone()),
                true,
            ),
            None => (None, false),
        },
        _ if users || verify => (None, false),
        _ => match journal::probe(&d, &j, src, id) {
            Found::Trusted(r) => (Some(r), false),
            Found::Stale | Found::Nothing => (None, false),
        },
    };
    let resumable = resumable.filter(|r| m.size > cs && sized(&d, r, m.size));
    if let Some(r) = resumable {
        let header = Header::new(src, id, r.dest, cs);
        // Without a journal the resume still copies only what is missing; a second
        // interruption then finds none and copies whole.
        let _ = journal::write(&j, &header, &r.done);
        return Some(r.done);
    }
    // Copied whole: the old journal goes (a new one is made with the file).
    if !users {
        if let Err(e) = journal::remove(&j, src) {
            cx.tally.fail(ItemError::new(&jpath, "remove journal", e));
        }
    }
    if planned {
        // Sync planned to keep this inode; it changed since (or the file is one chunk now):
        // a new file takes its place, as for any update.
        if let Err(e) = replace(&d, m) {
            cx.tally
                .fail(ItemError::new(&dst, "remove (to replace it)", e));
        }
    }
    None
}

/// The destination of a planned resume is still the file its journal was written for: a
/// regular file with one link, no larger than the source.
fn still_there(d: &flist::at::At, r: &Resumable, m: &Meta) -> bool {
    d.lstat().is_ok_and(|st| {
        st.st_mode & libc::S_IFMT == libc::S_IFREG
            && st.st_nlink == 1
            && (st.st_dev, st.st_ino) == r.dest
            && st.st_size as u64 <= m.size
            && r.done.iter().all(|&(_, e)| e <= st.st_size as u64)
    })
}

/// Give the resumed destination `d` (the file `r` was written for) the source's size, `size`
/// bytes: the chunks still to copy may end in a hole that a sparse copy does not write.
/// False when it is no longer that file or can't be sized.
fn sized(d: &flist::at::At, r: &Resumable, size: u64) -> bool {
    let Ok(fd) = d.open(OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK, 0) else {
        return false;
    };
    match rustix::fs::fstat(&fd) {
        Ok(st) if (st.st_dev, st.st_ino) == r.dest && st.st_nlink == 1 => {
            st.st_size as u64 == size || rustix::fs::ftruncate(&fd, size).is_ok()
        }
        _ => false,
    }
}

/// Unlink the destination `d` (a file sync updates) unless it is the source itself.
fn replace(d: &flist::at::At, m: &Meta) -> std::io::Result<()> {
    let st = match d.lstat() {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        r => r?,
    };
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR || (st.st_dev, st.st_ino) == (m.dev, m.ino) {
        return Ok(()); // the engine's creation names what is in the way
    }
    match d.remove(false) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        r => r,
    }
}

/// A new multi-chunk file `fd` was created for the chunk `c` (chunks of `cs` bytes): give it
/// a fresh journal (`journal`).
pub(super) fn start(journal: &flist::at::At, c: &Chunk, fd: &OwnedFd, cs: u64) {
    let Ok(st) = rustix::fs::fstat(fd) else {
        return;
    };
    let header = Header::new(&c.path, SourceId::of(&c.meta), (st.st_dev, st.st_ino), cs);
    let _ = journal::write(journal, &header, &[]);
}

/// An existing destination `dst` is reused (truncated) for `src`, a file too small to keep
/// a journal, or replaced by what `src` is now (a symlink, a node, a hard link): a journal an
/// earlier run left beside it for the same source path (a run killed while `src` was a huge
/// file, since replaced by a small one or by another type) goes, unless its name is the
/// user's. Files that may keep a journal are seen to by [`prepare`]. Costs one failed open
/// per reused destination when there is none.
pub(super) fn drop_stale(
    map: &super::Mapping,
    reach: &super::reach::Reach,
    dst: &[u8],
    src: &[u8],
) -> Result<(), ItemError> {
    let jpath = journal::path_of(dst);
    // Only when a journal of `src` is there: most reused destinations have none, and the
    // source-side look-up of [`finish`] is not paid for them.
    match reach.dst(&jpath).and_then(|j| journal::is_of(&j, src)) {
        Ok(false) => Ok(()),
        Ok(true) => finish(map, reach, dst, src),
        Err(e) => Err(ItemError::new(&jpath, "remove journal", e)),
    }
}

/// Drop this rank's chunks of resumed files that are done (counted as landed in `pending`)
/// and narrow those partly done to what is missing. Returns the bytes not copied.
pub(super) fn skip_done(
    chunks: &mut Vec<Chunk>,
    resumed: &Resumed,
    cs: u64,
    pending: &mut HashMap<Vec<u8>, Pending>,
) -> u64 {
    if resumed.done.is_empty() {
        return 0;
    }
    let mut skipped = 0;
    chunks.retain_mut(|c| {
        let Some(done) = resumed.done.get(&c.path) else {
            return true;
        };
        match journal::narrow(c.offset, c.length, done) {
            Some((offset, length)) => {
                skipped += c.length - length;
                (c.offset, c.length) = (offset, length);
                true
            }
            None => {
                skipped += c.length;
                let p = pending.entry(c.path.clone()).or_insert(Pending {
                    remaining: c.file_size.div_ceil(cs),
                    failed: false,
                    meta: c.meta,
                });
                p.remaining -= 1;
                false
            }
        }
    });
    skipped
}

/// Chunk `c` of a journaled file landed in `dst`: mark it (after its data is durable).
pub(super) fn mark(dirs: &flist::parent_dir::ParentDir, dst: &[u8], c: &Chunk, cs: u64) {
    let jpath = journal::path_of(dst);
    let (Ok(d), Ok(j)) = (dirs.entry(dst), dirs.entry(&jpath)) else {
        return;
    };
    if let Ok(Some(m)) = journal::mark(&d, &j, (&c.path, SourceId::of(&c.meta)), cs, c.offset / cs)
    {
        m.submit();
    }
}

/// The journaled file `dst` (copied from `src`) is complete: its journal goes, before the
/// file gets its final metadata.
pub(super) fn finish(
    map: &super::Mapping,
    reach: &super::reach::Reach,
    dst: &[u8],
    src: &[u8],
) -> Result<(), ItemError> {
    if users_name_in(map, reach, dst) {
        return Ok(()); // the user's file under the journal's name stays
    }
    let jpath = journal::path_of(dst);
    let removed = reach.dst(&jpath).and_then(|j| journal::remove(&j, src));
    removed.map_err(|e| ItemError::new(&jpath, "remove journal", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_name_that_a_source_entry_maps_to_is_the_users() {
        let map = super::super::Mapping::new(vec![
            (b"/s".to_vec(), b"/d".to_vec()),
            (
                b"/other/.f.mfu-partial".to_vec(),
                b"/e/.f.mfu-partial".to_vec(),
            ),
        ]);
        let there = |names: &'static [&'static [u8]]| {
            move |p: &[u8]| {
                if names.contains(&p) {
                    Ok(())
                } else {
                    Err(std::io::Error::from_raw_os_error(libc::ENOENT))
                }
            }
        };
        assert!(users_name(
            &map,
            b"/d/big",
            there(&[b"/s/.big.mfu-partial"])
        ));
        assert!(!users_name(&map, b"/d/big", there(&[b"/s/big"])));
        assert!(users_name(
            &map,
            b"/d/sub/x",
            there(&[b"/s/sub/.x.mfu-partial"])
        ));
        // Another source root copied beside it.
        assert!(users_name(
            &map,
            b"/e/f",
            there(&[b"/other/.f.mfu-partial"])
        ));
        assert!(!users_name(&map, b"/e/f", there(&[])));
        // Can't tell (permission denied): the user's, no journal.
        let denied = |_: &[u8]| Err(std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(users_name(&map, b"/d/big", denied));
    }
}
