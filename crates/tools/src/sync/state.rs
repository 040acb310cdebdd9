//! `sync --verify --state FILE`: verify again only what changed since the last verified run.
//!
//! The state ([`crate::engine::verify_state`]) holds, per regular file, the identities of its
//! source and destination when both were last found equal, and their digest. After the copy,
//! each regular file of SRC is, on the rank its key hashes to:
//!
//! - copied by this run and read back as it was written (`--verify`): recorded with the digest
//!   of the bytes read from the source (the manifest's machinery, [`crate::engine::manifest`]);
//! - left as it was, and both identities are the state's: unchanged, not read;
//! - otherwise (not in the state, or its source or destination changed since: a rewrite that
//!   kept size and mtime moves the ctime) read in full, the source and the destination (from
//!   the device, as `--verify` reads back), and their digests compared. Equal: recorded; not
//!   equal: named (exit 1), not recorded, and the destination loses the source's mtime, as a
//!   failed `--verify` leaves it, so that the next sync copies it again.
//!
//! The state is written after the run (atomically, [`verify_state::save`]), with the files
//! found equal only; a stopped run writes none (its rerun verifies what this one did not
//! record).

use super::{beneath, Paths};
use crate::engine::context::Context;
use crate::engine::copy::Mapping;
use crate::engine::digest::{HashKind, RangeDigest, RangeHasher};
use crate::engine::hashing::hash_file;
use crate::engine::manifest;
use crate::engine::verify_state::{self, Entry, Identity, Loaded, Scope};
use flist::{FileList, FileType, ItemError, Meta};
use rayon::prelude::*;
use rustix::fd::AsFd;
use rustix::fs::OFlags;
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::atomic::Ordering;
use steal::{Comm, CommExt, ReduceOp};

/// What `--state` did (over all ranks).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    /// The state file, as shown.
    pub path: String,
    /// The state found was trusted (false: there was none, or see `untrusted`).
    pub trusted: bool,
    /// Why the state found was not trusted (every file was verified).
    pub untrusted: Option<String>,
    /// Regular files of the sync.
    pub files: u64,
    /// Files verified by this run: `copied` + `read`.
    pub verified: u64,
    /// Files copied by this run and read back as they were written.
    pub copied: u64,
    /// Files left as they were but changed since the state (or not in it): source and
    /// destination read in full and compared (`differ` of them differ).
    pub read: u64,
    /// Files unchanged since the state: not read.
    pub unchanged: u64,
    /// Files whose destination differs from their source (each named).
    pub differ: u64,
    /// Files not verified: their copy failed, they could not be read or are no regular file in
    /// DEST (each named), or the run was stopped first.
    pub not_verified: u64,
    /// The state was written (false: see the errors; a stopped run writes none).
    pub written: bool,
    /// Files the state written holds.
    pub entries: u64,
}

/// A regular file of the sync, on the rank its key hashes to.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Pair {
    /// Its path relative to the state's base.
    #[serde(with = "serde_bytes")]
    key: Vec<u8>,
    /// The source path.
    #[serde(with = "serde_bytes")]
    src: Vec<u8>,
    /// The destination path.
    #[serde(with = "serde_bytes")]
    dest: Vec<u8>,
    /// The source as listed.
    meta: Meta,
    /// The plan creates (copies) it.
    copied: bool,
    /// Its copy failed.
    failed: bool,
}

/// The state's base: DEST, or DEST's directory when one file is synced (the manifest's).
pub(super) fn base(paths: &Paths) -> Vec<u8> {
    if crate::engine::setup::is_dir(&paths.src) {
        paths.dest.clone()
    } else {
        flist::path::parent(&paths.dest).to_vec()
    }
}

/// The scope of a state of this sync.
pub(super) fn scope(paths: &Paths, dereference: bool, hash: HashKind) -> Scope {
    Scope {
        src: paths.src.clone(),
        dest: paths.dest.clone(),
        hash,
        options: format!("dereference={}", u8::from(dereference)),
    }
}

/// Read the state `path` for `scope`; rank 0 says on stderr why one found is not trusted
/// (no failure: every file is verified, and the state rewritten). Collective.
pub(super) fn load(comm: &dyn Comm, context: &Context, path: &[u8], scope: &Scope) -> Loaded {
    let loaded = verify_state::load(comm, path, scope);
    if let (Loaded::Untrusted(why), 0) = (&loaded, comm.rank()) {
        context.events.error(&format!(
            "state {}: not trusted ({why}): every file is verified, and the state rewritten",
            flist::path::display(path)
        ));
    }
    loaded
}

/// The regular files of this rank's listed sources (the source list and the hard-link members
/// list), each with the indices the plan creates (copies), ascending, as pairs; `linked`: the
/// sources of hard links the plan makes (to a first member, whose digest they take when it
/// is copied).
pub(super) fn pairs(
    lists: [(&FileList, &[u32]); 2],
    linked: &HashSet<&[u8]>,
    map: &Mapping,
    base: &[u8],
) -> Vec<Pair> {
    let mut out = Vec::new();
    for (list, made) in lists {
        let mut made = made.iter().peekable();
        for i in 0..list.len() {
            let made_here = made.next_if(|&&m| m as usize == i).is_some();
            let e = list.entry(i);
            let copied = made_here || linked.contains(e.path);
            let (FileType::File, Some(meta)) = (e.kind, e.meta) else {
                continue;
            };
            let dest = map.dest(e.path);
            let Some(key) = beneath(base, &dest).map(<[u8]>::to_vec) else {
                continue;
            };
            out.push(Pair {
                key,
                src: e.path.to_vec(),
                dest,
                meta,
                copied,
                failed: false,
            });
        }
    }
    out
}

/// What became of one file.
enum Fate {
    Recorded(Entry, Counted),
    Differ,
    NotVerified,
}

#[derive(Clone, Copy)]
enum Counted {
    Copied,
    Read,
    Unchanged,
}

/// Everything `finish` needs from the run.
pub(super) struct Finish<'a> {
    /// The state file.
    pub path: &'a [u8],
    /// What it is made for.
    pub scope: Scope,
    /// What was found there.
    pub loaded: Loaded,
    /// This rank's pairs (from [`pairs`]).
    pub pairs: Vec<Pair>,
    /// Destination paths of the items that failed (on this rank: those of its pairs).
    pub failed: &'a HashSet<Vec<u8>>,
    /// This rank's digests of the files copied, (key, digest), from the manifest's machinery.
    pub digests: Vec<manifest::Entry>,
    /// The copy was stopped.
    pub interrupted: bool,
}

/// After the copy: decide each file's fate, verify what must be, write the state. Returns the
/// summary (the same on every rank) and whether a stop request cut the verification short.
/// Collective.
pub(super) fn finish(
    comm: &dyn Comm,
    context: &Context,
    paths: &Paths,
    map: &Mapping,
    f: Finish<'_>,
) -> (Summary, bool) {
    let size = comm.size();
    let show = flist::path::display(f.path).to_string();
    let mut summary = Summary {
        path: show.clone(),
        trusted: matches!(f.loaded, Loaded::Trusted(_)),
        untrusted: match &f.loaded {
            Loaded::Untrusted(why) => Some(why.clone()),
            _ => None,
        },
        ..Summary::default()
    };
    // Everything about a key on the rank it hashes to.
    let mut sends = vec![Vec::new(); size];
    for mut p in f.pairs {
        p.failed = f.failed.contains(&p.dest);
        steal::typed::encode_into(&p, &mut sends[verify_state::home(&p.key, size)]);
    }
    let mut pairs = Vec::new();
    for bytes in comm.alltoallv(sends) {
        pairs.extend(steal::typed::each::<Pair>(&bytes).map(steal::typed::sent));
    }
    let mut sends = vec![Vec::new(); size];
    for d in &f.digests {
        steal::typed::encode_into(d, &mut sends[verify_state::home(&d.0, size)]);
    }
    let mut digests: HashMap<Vec<u8>, [u8; 32]> = HashMap::new();
    for bytes in comm.alltoallv(sends) {
        for d in steal::typed::each::<manifest::Entry>(&bytes) {
            let (k, d) = steal::typed::sent(d);
            digests.insert(k, d);
        }
    }
    let known = match f.loaded {
        Loaded::Trusted(m) => m,
        _ => HashMap::new(),
    };
    let reach = crate::engine::copy::reach::Reach::open(map);
    let kind = f.scope.hash;
    let fates: Vec<Fate> = pairs
        .par_iter()
        .map(|p| fate(context, &reach, paths, p, &known, &digests, kind))
        .collect();
    let stopped = comm.any(context.stop.load(Ordering::Relaxed));
    let mut counts = [0u64; 6];
    let mut entries = Vec::new();
    for fate in fates {
        match fate {
            Fate::Recorded(e, how) => {
                counts[how as usize] += 1;
                entries.push(e);
            }
            Fate::Differ => {
                counts[Counted::Read as usize] += 1;
                counts[3] += 1;
            }
            Fate::NotVerified => counts[4] += 1,
        }
    }
    counts[5] = pairs.len() as u64;
    comm.allreduce(&mut counts, ReduceOp::Sum);
    [
        summary.copied,
        summary.read,
        summary.unchanged,
        summary.differ,
        summary.not_verified,
        summary.files,
    ] = counts;
    summary.verified = summary.copied + summary.read;
    let rank0 = comm.rank() == 0;
    if f.interrupted || stopped {
        if rank0 {
            context.error(format_args!(
                "state {show}: not written (the run was stopped; the rerun verifies again what \
                 this one did not record)"
            ));
        }
        return (summary, stopped);
    }
    match verify_state::save(comm, context, f.path, &f.scope, entries) {
        Ok(n) => {
            summary.written = true;
            summary.entries = n;
        }
        Err(e) => {
            if rank0 {
                context.error(format_args!("state {show}: not written ({e})"));
            }
        }
    }
    (summary, stopped)
}

/// What becomes of the file `p` (see the module's text).
fn fate(
    context: &Context,
    reach: &crate::engine::copy::reach::Reach,
    paths: &Paths,
    p: &Pair,
    known: &HashMap<Vec<u8>, Entry>,
    digests: &HashMap<Vec<u8>, [u8; 32]>,
    kind: HashKind,
) -> Fate {
    if p.failed {
        return Fate::NotVerified; // named by the copy
    }
    if context.stop.load(Ordering::Relaxed) {
        return Fate::NotVerified;
    }
    let dest_now = paths.roots.at(&p.dest).and_then(|a| a.lstat());
    let dest_now = match dest_now {
        Ok(st) if FileType::from_mode(st.st_mode) == FileType::File => Identity::of_stat(&st),
        // Not a regular file in DEST: a type conflict, named by the plan.
        Ok(_) => return Fate::NotVerified,
        Err(e) => {
            context.error(ItemError::new(&p.dest, "stat (to verify)", e));
            return Fate::NotVerified;
        }
    };
    let src = Identity::of(&p.meta);
    let entry = |digest| Entry {
        key: p.key.clone(),
        src,
        dest: dest_now,
        digest,
    };
    if p.copied {
        if let Some(d) = digests.get(&p.key) {
            return Fate::Recorded(entry(*d), Counted::Copied);
        }
    }
    if let Some(e) = known.get(&p.key) {
        if !p.copied && e.src == src && e.dest == dest_now {
            return Fate::Recorded(e.clone(), Counted::Unchanged);
        }
    }
    match compare(reach, paths, p, src, dest_now, kind, &context.noatime) {
        Ok(Some(d)) => Fate::Recorded(entry(d), Counted::Read),
        Ok(None) => {
            context.error(ItemError::new(
                &p.dest,
                "verify",
                io::Error::other(format!(
                    "its content differs from the source's ({} of both read in full); left \
                     without the source's mtime: the next sync copies it again",
                    kind.name()
                )),
            ));
            Fate::Differ
        }
        Err(e) => {
            context.error(e);
            Fate::NotVerified
        }
    }
}

/// Read the source and the destination of `p` in full (the destination from the device where
/// the file system allows, as `--verify` reads back) and compare their digests: `Some(digest)`
/// when equal. Each must still be the file identified (`src`, `dest`). A destination that
/// differs loses the source's mtime. Both are opened through `noatime` (`--noatime`).
fn compare(
    reach: &crate::engine::copy::reach::Reach,
    paths: &Paths,
    p: &Pair,
    src: Identity,
    dest: Identity,
    kind: HashKind,
    noatime: &flist::noatime::NoAtime,
) -> Result<Option<[u8; 32]>, ItemError> {
    let changed = |path: &[u8], when: &str| {
        ItemError::new(
            path,
            "verify",
            io::Error::other(format!("it changed {when}: not verified")),
        )
    };
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK;
    if reach.src_confined() {
        flags |= OFlags::NOFOLLOW;
    }
    let fail = |path: &[u8], op: &'static str| {
        let path = path.to_vec();
        move |e: io::Error| ItemError::new(&path, op, e)
    };
    let sfd = reach
        .src(&p.src)
        .and_then(|a| noatime.open(flags, |f| a.open(f, 0)))
        .map_err(fail(&p.src, "open (to verify)"))?;
    let same = |fd: &rustix::fd::OwnedFd, want: Identity| {
        rustix::fs::fstat(fd).is_ok_and(|st| Identity::of_stat(&st) == want)
    };
    if !same(&sfd, src) {
        return Err(changed(&p.src, "since it was listed"));
    }
    let from_src =
        hash_file(sfd.as_fd(), src.size, kind).map_err(fail(&p.src, "read (to verify)"))?;
    if !same(&sfd, src) {
        return Err(changed(&p.src, "while it was read"));
    }
    let dfd = paths
        .roots
        .at(&p.dest)
        .and_then(|a| {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK;
            noatime.open(flags, |f| a.open(f, 0))
        })
        .map_err(fail(&p.dest, "open (to verify)"))?;
    if !same(&dfd, dest) {
        return Err(changed(&p.dest, "during the run"));
    }
    if dest.size != src.size {
        crate::engine::hashing::mark_unfinished(dfd.as_fd());
        return Ok(None);
    }
    let mut h = RangeHasher::new(kind, 0, dest.size, dest.size);
    crate::engine::verify::read_back(dfd.as_fd(), 0, dest.size, &mut |b| h.update(b))
        .map_err(|e| ItemError::new(&p.dest, e.op, e.source))?;
    let RangeDigest::Whole(from_dest) = h.finish() else {
        unreachable!("a whole range gives a whole digest")
    };
    if from_dest == from_src {
        Ok(Some(from_src))
    } else {
        crate::engine::hashing::mark_unfinished(dfd.as_fd());
        Ok(None)
    }
}
