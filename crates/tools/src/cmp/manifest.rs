//! `cmp --manifest FILE DIR`: check a tree against a checksum manifest (as `b3sum --check` or
//! `sha256sum -c` would, run in DIR), the files hashed in parallel over ranks and threads.
//!
//! Both formats are `HASH  PATH` lines with 64 hexadecimal digits, so the hash cannot be told
//! from the file: unless it is given, each file is hashed both ways in one read and the hash
//! that matches more lines over all ranks is the manifest's (at the cost of SHA-256's CPU time
//! on top of BLAKE3's).
//!
//! With a checkpoint, each file hashed is marked with its digests and its identity (device,
//! inode, size, modification and change times) as it was before and after the read; a rerun
//! takes the recorded digests of a file whose identity is still the same, and reads the
//! others.

mod update;

use super::{Options, Report};
use crate::engine::checkpoint::{self, Checkpoint, Choice, Inputs, Plan, Prior};
use crate::engine::context::{Context, Error, Stopped};
use crate::engine::digest::HashKind;
use crate::engine::manifest::parse_line;
use crate::engine::setup::agree_setup;
use flist::beneath::{is_symlink_error, Root};
use flist::path::display;
use rayon::prelude::*;
use rustix::fs::OFlags;
use sha2::Digest as _;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use steal::{Comm, ReduceOp};

/// What a check against a manifest found (over all ranks).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Checked {
    /// The manifest, as shown.
    pub manifest: String,
    /// The hash its lines were checked as.
    pub hash: HashKind,
    /// The hash was found by hashing both ways (not given).
    pub detected: bool,
    /// Files listed.
    pub listed: u64,
    /// Files whose content matches.
    pub matched: u64,
    /// Files whose content differs (each named).
    pub differ: u64,
    /// Files listed but missing (each named).
    pub missing: u64,
    /// Files that could not be read, and lines that are not manifest lines (each named).
    pub unreadable: u64,
    /// Files not checked because a signal stopped the check.
    pub not_checked: u64,
    /// The manifest has no line to check (empty, or none is a manifest line): a failure.
    pub no_lines: bool,
    /// Regular files of the tree the manifest does not list (`--update-manifest`; each
    /// named): a difference.
    pub added: u64,
    /// With `--update-manifest`: how the manifest was rewritten.
    pub update: Option<Update>,
}

/// What `--update-manifest` did to the manifest.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Update {
    /// The manifest was rewritten (sorted by path, same hash and format).
    pub written: bool,
    /// Nothing changed: the manifest was left as it was.
    pub unchanged: bool,
    /// Lines of the manifest rewritten (or left).
    pub lines: u64,
    /// Lines given the new digest of their file.
    pub changed: u64,
    /// Lines added (files the manifest did not list).
    pub added: u64,
    /// Lines dropped (files missing, or no longer regular files).
    pub removed: u64,
}

/// What becomes of a line with `--update-manifest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Kept, with this digest (changed or not).
    Keep([u8; 32]),
    /// Dropped: its file is gone or no regular file.
    Drop,
    /// Unknown: its file could not be read (or the check was stopped): no update.
    Unknown,
}

/// The fate of each of `mine`'s lines by what its file was found to be (`kind`: the
/// manifest's hash).
fn fates(found: &[Found], kind: HashKind) -> Vec<Fate> {
    found
        .iter()
        .map(|f| match f {
            Found::Hashed(b3, s2, _) => match kind {
                HashKind::Blake3 => Fate::Keep(*b3),
                HashKind::Sha256 => s2.map_or(Fate::Unknown, Fate::Keep),
            },
            Found::Missing(_) | Found::NotRegular(_) => Fate::Drop,
            Found::Unreadable(_) | Found::Stopped => Fate::Unknown,
        })
        .collect()
}

/// What a file's mark records: the check digest of its line (a second digest of what the key
/// digests), its identity, its digests and the bytes read.
#[derive(serde::Serialize, serde::Deserialize)]
struct Recorded {
    check: u64,
    identity: Identity,
    b3: [u8; 32],
    s2: Option<[u8; 32]>,
    bytes: u64,
}

/// What tells a file changed: device, inode, size, modification and change times (s, ns).
type Identity = (u64, u64, u64, i64, u32, i64, u32);

fn identity_of(st: &rustix::fs::Stat) -> Identity {
    let m = flist::Meta::from_stat(st);
    (
        m.dev,
        m.ino,
        m.size,
        m.mtime,
        m.mtime_nsec,
        m.ctime,
        m.ctime_nsec,
    )
}

/// The key (`seed` 0) or the check digest (another seed) of line `n` (from 0) of the manifest,
/// which names `rel`: the same at any rank count.
fn line_digest(n: usize, rel: &[u8], seed: u64) -> u64 {
    let bytes = [&(n as u64).to_le_bytes()[..], rel].concat();
    xxhash_rust::xxh64::xxh64(&bytes, seed)
}

/// The seed of [`line_digest`]'s check digest.
const CHECK_SEED: u64 = 0x6d61_6e69_6665_7374;

/// What an earlier run recorded for line `n`, naming `rel`, if it is whole and this line's,
/// with the SHA-256 digest when `sha` is wanted.
fn recorded(prior: &Prior, n: usize, rel: &[u8], sha: bool) -> Option<Recorded> {
    let p = prior.payload(line_digest(n, rel, 0))?;
    let r: Recorded = steal::typed::decode(p).ok()?;
    (r.check == line_digest(n, rel, CHECK_SEED) && (r.s2.is_some() || !sha)).then_some(r)
}

/// What hashing one listed file gave.
enum Found {
    /// Its digests (BLAKE3, SHA-256 when asked) and bytes.
    Hashed([u8; 32], Option<[u8; 32]>, u64),
    Missing(std::io::Error),
    Unreadable(std::io::Error),
    /// Not a regular file reached without following a symlink (why): never read.
    NotRegular(&'static str),
    /// A stop request came first (or in the middle of its read).
    Stopped,
}

/// What kind of non-regular file `mode` is, for the message.
fn kind_of(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFLNK => "a symlink (not followed)",
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        _ => "not a regular file",
    }
}

/// `rel` as components beneath the tree (`.` and empty ones dropped, a leading `/` too: the
/// manifest is read as run in the tree); `None` when it has a `..` component, which could
/// lead out of the tree.
fn beneath(rel: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(rel.len());
    for c in rel.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return None,
            c => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(c);
            }
        }
    }
    Some(out)
}

/// Hash the file `rel` beneath `root` as BLAKE3 and, with `sha`, SHA-256, in one read. It is
/// reached without following any symlink (a listed file swapped for a symlink to an equal
/// file outside the tree must not "match"), and only a regular file is opened (a FIFO would
/// block, `/dev/zero` never end, a tape rewind). `stop` is looked at between reads.
///
/// `prior`: what an earlier run recorded for the file: its digests are taken, unread, when the
/// file opened has the identity recorded. Returns too the identity of a file read whole whose
/// identity did not change during the read (what a mark may record).
fn hash(
    root: &Root,
    rel: &[u8],
    sha: bool,
    stop: &AtomicBool,
    noatime: &flist::noatime::NoAtime,
    prior: Option<Recorded>,
) -> (Found, Option<Identity>) {
    use std::io::ErrorKind;
    let unread = |f: Found| (f, None);
    if stop.load(Ordering::Relaxed) {
        return unread(Found::Stopped);
    }
    let Some(rel) = beneath(rel).filter(|r| !r.is_empty()) else {
        return unread(Found::NotRegular(
            "not a path beneath the tree ('..' or the tree itself)",
        ));
    };
    let path = [root.path(), b"/", &rel].concat();
    let at = match root.at(&path) {
        Some(Ok(at)) => at,
        Some(Err(e)) if is_symlink_error(&e) => {
            return unread(Found::NotRegular(
                "a directory on the way is a symlink (not followed)",
            ))
        }
        Some(Err(e)) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return unread(Found::Missing(e))
        }
        Some(Err(e)) => return unread(Found::Unreadable(e)),
        None => return unread(Found::NotRegular("not a path beneath the tree")),
    };
    let listed = match at.lstat() {
        Ok(st) => st,
        Err(e) if e.kind() == ErrorKind::NotFound => return unread(Found::Missing(e)),
        Err(e) => return unread(Found::Unreadable(e)),
    };
    if listed.st_mode & libc::S_IFMT != libc::S_IFREG {
        return unread(Found::NotRegular(kind_of(listed.st_mode)));
    }
    // O_NOFOLLOW and O_NONBLOCK: what was swapped in since the lstat is neither followed nor
    // waited for; the fstat then says whether it is still the regular file seen.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let fd = match noatime.open(flags, |f| at.open(f, 0)) {
        Ok(fd) => fd,
        Err(e) if is_symlink_error(&e) => return unread(Found::NotRegular(kind_of(libc::S_IFLNK))),
        Err(e) if e.kind() == ErrorKind::NotFound => return unread(Found::Missing(e)),
        Err(e) => return unread(Found::Unreadable(e)),
    };
    let before = match rustix::fs::fstat(&fd) {
        Ok(st) if st.st_mode & libc::S_IFMT != libc::S_IFREG => {
            return unread(Found::NotRegular(kind_of(st.st_mode)))
        }
        Ok(st) => identity_of(&st),
        Err(e) => return unread(Found::Unreadable(e.into())),
    };
    // Hashed by an earlier run, and the very file it read, unchanged since: not read again.
    if let Some(r) = prior.filter(|r| r.identity == before) {
        return unread(Found::Hashed(r.b3, r.s2.filter(|_| sha), r.bytes));
    }
    let mut f = std::fs::File::from(fd);
    let mut b3 = blake3::Hasher::new();
    let mut s2 = sha.then(sha2::Sha256::new);
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0;
    loop {
        if stop.load(Ordering::Relaxed) {
            return unread(Found::Stopped);
        }
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                b3.update(&buf[..n]);
                if let Some(s) = &mut s2 {
                    s.update(&buf[..n]);
                }
                bytes += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return unread(Found::Unreadable(e)),
        }
    }
    // Only digests of a file that did not change while read may be recorded for a rerun.
    let unchanged = rustix::fs::fstat(&f)
        .ok()
        .map(|st| identity_of(&st))
        .filter(|after| *after == before && after.2 == bytes);
    (
        Found::Hashed(
            *b3.finalize().as_bytes(),
            s2.map(|s| s.finalize().into()),
            bytes,
        ),
        unchanged,
    )
}

/// Check `dir` against the manifest `file` (`kind`: its hash, `None`: find out). Collective.
pub fn run(comm: &dyn Comm, options: &Options, file: &[u8], dir: &[u8]) -> Result<Report, Error> {
    let context = &options.context;
    let kind = options.manifest_hash;
    let read = std::fs::read(flist::path::as_path(file))
        .map_err(|e| format!("read manifest {}: {e}", display(file)));
    let text = agree_setup(comm, read)?;
    let is_dir = crate::engine::setup::is_dir(dir);
    agree_setup(
        comm,
        if is_dir {
            Ok(())
        } else {
            Err(format!("{}: not a directory", display(dir)))
        },
    )?;
    let root = agree_setup(
        comm,
        // O_PATH: reaching the listed files needs search permission only, as for b3sum.
        Root::open_path(dir).map_err(|e| format!("open {}: {e}", display(dir))),
    )?;
    let started = Instant::now();
    let opened = open_checkpoint(comm, options, file, dir, &text)?;
    let (mine, bad) = my_lines(comm, context, file, text);
    let both = kind.is_none();
    let sha = kind != Some(HashKind::Blake3);
    let (marks, prior) = match &opened {
        Some((c, prior)) => (c.as_ref(), Some(prior)),
        None => (None, None),
    };
    let found: Vec<Found> = mine
        .par_iter()
        .map(|(n, _, rel)| {
            let earlier = prior.and_then(|p| recorded(p, *n, rel, sha));
            let (found, unchanged) =
                hash(&root, rel, sha, &context.stop, &context.noatime, earlier);
            if let (Some(c), Some(identity), Found::Hashed(b3, s2, bytes)) =
                (marks, unchanged, &found)
            {
                let r = Recorded {
                    check: line_digest(*n, rel, CHECK_SEED),
                    identity,
                    b3: *b3,
                    s2: *s2,
                    bytes: *bytes,
                };
                c.mark(line_digest(*n, rel, 0), &steal::typed::encode(&r));
            }
            found
        })
        .collect();
    // Hashing is over: a signal now stops nothing more.
    let stopped = found.iter().any(|f| matches!(f, Found::Stopped));
    let interrupted = steal::CommExt::any(comm, stopped);
    // Which hash: given, or the one more lines match.
    let kind = kind.unwrap_or_else(|| vote(comm, &mine, &found));
    let mut c = Checked {
        manifest: display(file).into_owned(),
        hash: kind,
        detected: both,
        listed: mine.len() as u64,
        unreadable: bad,
        ..Checked::default()
    };
    let line_fates = options.update_manifest.then(|| fates(&found, kind));
    let mut bytes_read = judge(context, &mine, found, &mut c);
    let mut sums = [
        c.listed,
        c.matched,
        c.differ,
        c.missing,
        c.unreadable,
        c.not_checked,
        bytes_read,
    ];
    comm.allreduce(&mut sums, ReduceOp::Sum);
    [
        c.listed,
        c.matched,
        c.differ,
        c.missing,
        c.unreadable,
        c.not_checked,
        bytes_read,
    ] = sums;
    // As `sha256sum -c`: a manifest without one line to check checks nothing, which is no
    // match (an empty or wrong file given as the manifest must not pass).
    c.no_lines = c.listed == 0;
    if comm.rank() == 0 {
        if c.no_lines {
            context.error(format_args!(
                "{}: no properly formatted checksum lines found",
                display(file)
            ));
        }
        if interrupted {
            context.error(format_args!(
                "interrupted by a signal: listed files not checked: {}",
                c.not_checked
            ));
        }
    }
    // The manifest is rewritten before the checkpoint is finished: a run killed while it
    // writes keeps the digests for its rerun.
    let bad_lines = steal::CommExt::sum(comm, bad);
    if let Some(line_fates) = line_fates {
        let rewrite = update::Rewrite {
            file,
            root: &root,
            kind,
        };
        let why_not = if interrupted {
            Some("the check was stopped; run the same command again".to_string())
        } else if c.no_lines {
            Some("it has no checksum line".to_string())
        } else if bad_lines > 0 {
            Some(format!("{bad_lines} of its lines are not manifest lines"))
        } else {
            None
        };
        let (u, read, added) = rewrite.run(comm, context, &mine, line_fates, why_not);
        bytes_read += read;
        c.added = added;
        c.update = Some(u);
    }
    let update_failed = c
        .update
        .as_ref()
        .is_some_and(|u| !u.written && !u.unchanged);
    let checkpoint_failed = match opened {
        Some((Some(cp), _)) => {
            !cp.finish_told(comm, context, checkpoint::Outcome::of_stop(interrupted))
        }
        _ => false,
    };
    let stopped = interrupted.then(|| Stopped {
        done: c.listed - c.not_checked,
        total: c.listed,
        what: "files",
    });
    Ok(Report {
        src: display(dir).into_owned(),
        dest: String::new(),
        paths: c.listed,
        differing: c.differ + c.missing + c.added,
        lists_failed: u64::from(update_failed),
        not_compared: c.unreadable + c.not_checked + u64::from(c.no_lines && c.unreadable == 0),
        interrupted,
        stopped,
        checkpoint_failed,
        bytes_read,
        seconds: started.elapsed().as_secs_f64(),
        failures: context.failures(),
        manifest: Some(c),
        ..Report::default()
    })
}

/// Open the checkpoint of a check of `dir` against the manifest `file` whose bytes are `text`:
/// its inputs are the tree, the manifest (path and a digest of its bytes) and the hash; whether
/// a listed file changed since is told by each mark (its identity). `None` with
/// `--no-checkpoint`. Rank 0 tells the notice. Collective.
fn open_checkpoint(
    comm: &dyn Comm,
    options: &Options,
    file: &[u8],
    dir: &[u8],
    text: &[u8],
) -> Result<Option<(Option<Checkpoint>, Prior)>, Error> {
    if matches!(options.checkpoint, Choice::Off) {
        return Ok(None);
    }
    let inputs = Inputs::new("cmp --manifest")
        .field("the tree checked", &serde_bytes::Bytes::new(dir))
        .field("the manifest", &serde_bytes::Bytes::new(file))
        .state("the manifest's contents", blake3::hash(text).as_bytes())
        .field("--manifest-hash", &options.manifest_hash.map(|k| k.name()));
    let opened = checkpoint::open(
        comm,
        &options.checkpoint,
        Plan {
            output: None,
            inputs,
        },
    )
    .map_err(Error::new)?;
    opened.tell(comm, &options.context);
    Ok(Some((opened.checkpoint, opened.prior)))
}

/// A manifest line: its number (from 0), the digest it lists and the path relative to the
/// directory checked.
type Line = (usize, [u8; 32], Vec<u8>);

/// The lines of `text` this rank checks (every size-th: the file is read by all, hashing is
/// the work), as (digest, path), and how many of them are no manifest line (each named).
fn my_lines(comm: &dyn Comm, context: &Context, file: &[u8], text: Vec<u8>) -> (Vec<Line>, u64) {
    let (rank, size) = (comm.rank(), comm.size());
    let mut bad = 0u64;
    let mut mine = Vec::new();
    for (n, l) in text
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
    {
        if n % size != rank {
            continue;
        }
        match parse_line(l) {
            Some((digest, rel)) => mine.push((n, digest, rel)),
            None => {
                bad += 1;
                context.error(format_args!(
                    "{} line {}: not a manifest line (HASH  PATH)",
                    display(file),
                    n + 1
                ));
            }
        }
    }
    (mine, bad)
}

/// The hash more lines of all ranks match (BLAKE3 on a tie). Collective.
fn vote(comm: &dyn Comm, mine: &[Line], found: &[Found]) -> HashKind {
    let mut votes = [0u64; 2];
    for ((_, want, _), f) in mine.iter().zip(found) {
        if let Found::Hashed(b3, s2, _) = f {
            votes[0] += u64::from(b3 == want);
            votes[1] += u64::from(s2.as_ref() == Some(want));
        }
    }
    comm.allreduce(&mut votes, ReduceOp::Sum);
    if votes[1] > votes[0] {
        HashKind::Sha256
    } else {
        HashKind::Blake3
    }
}

/// Count this rank's lines into `c` by what their files were found to be (each failure
/// named); the bytes read.
fn judge(context: &Context, mine: &[Line], found: Vec<Found>, c: &mut Checked) -> u64 {
    let mut bytes_read = 0;
    for ((_, want, rel), f) in mine.iter().zip(found) {
        let shown = display(rel);
        let kind = c.hash;
        match f {
            Found::Hashed(b3, s2, n) => {
                bytes_read += n;
                let got = match kind {
                    HashKind::Blake3 => Some(b3),
                    HashKind::Sha256 => s2,
                };
                if got.as_ref() == Some(want) {
                    c.matched += 1;
                } else {
                    c.differ += 1;
                    context.error(format_args!(
                        "{shown}: FAILED: its content differs from the manifest ({})",
                        kind.name()
                    ));
                }
            }
            Found::Missing(e) => {
                c.missing += 1;
                context.error(format_args!("{shown}: missing ({e})"));
            }
            Found::Unreadable(e) => {
                c.unreadable += 1;
                context.error(format_args!("read {shown}: {e}"));
            }
            Found::NotRegular(what) => {
                c.differ += 1;
                context.error(format_args!(
                    "{shown}: FAILED: {what}, where the manifest lists a regular file (not read)"
                ));
            }
            Found::Stopped => c.not_checked += 1,
        }
    }
    bytes_read
}

/// The report of a check: `Checked N files against FILE (HASH): M match, D differ, ...`.
pub fn text(c: &Checked) -> String {
    let how = if c.detected {
        format!("{}, found by hashing both ways", c.hash.name())
    } else {
        c.hash.name().to_string()
    };
    let update = match &c.update {
        None => String::new(),
        Some(u) if u.written => format!(
            "Manifest {} updated: {} changed, {} added, {} removed ({} lines)\n",
            c.manifest, u.changed, u.added, u.removed, u.lines
        ),
        Some(u) if u.unchanged => {
            format!("Manifest {}: unchanged ({} lines)\n", c.manifest, u.lines)
        }
        Some(_) => format!("Manifest {}: not updated\n", c.manifest),
    };
    let verdict = if c.no_lines {
        "no properly formatted checksum lines, nothing checked".to_string()
    } else if c.differ + c.missing + c.unreadable + c.added > 0 {
        "the tree does NOT match the manifest".to_string()
    } else if c.not_checked > 0 {
        format!("interrupted, {} not checked: no verdict", c.not_checked)
    } else {
        "the tree matches the manifest".to_string()
    };
    format!(
        "Checked {} files against {} ({how}): {} match, {} differ, {} missing, {} unreadable{}: \
         {verdict}\n{update}",
        c.listed,
        c.manifest,
        c.matched,
        c.differ,
        c.missing,
        c.unreadable,
        if c.update.is_some() {
            format!(", {} added", c.added)
        } else {
            String::new()
        }
    )
}
