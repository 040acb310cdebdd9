//! The checkpoint on disk: a directory of this user (mode 0700) holding `header` (the inputs it
//! was made for and a random nonce, checksummed) and append-only logs `log.ATTEMPT.RANK` of
//! marks, each mark checked by a hash keyed with the nonce (a torn tail, stale blocks or another
//! checkpoint's marks never read as done).
//!
//! Record: key (u64 LE), payload length (u32 LE), payload, check (u64 LE: XXH64 of the key,
//! length and payload, seeded with the nonce for a mark, with the nonce xor [`CONTROL`] for a
//! control record). A log is read up to its first record whose check fails either way.
//!
//! Control records (key: the kind) say how far a log's marks can be trusted:
//! - [`BOOT`], first in every log: the boot id of the kernel whose page cache holds the data
//!   its marks stand for (see [`super::boot_id`]);
//! - [`SYNCED`] (payload: a byte offset in the log, u64 LE): the data of every mark that ends
//!   at or before it was synced to stable storage before this record was written;
//! - [`DOUBT`]: a sync of the outputs failed: only synced marks are trusted, on any boot.
//!
//! A mark is written once its data is written (to the page cache), synced or not. A rerun
//! trusts every mark of a log whose boot is the boot of one of its ranks (that kernel has run
//! since: the data is in its cache or on disk), and only the synced marks of any other log
//! (its node crashed or rebooted, or is not one the rerun runs on: unsynced data may be lost).

use super::inputs::Inputs;
use super::CheckpointError;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use std::io::{self, Read};

/// A mark as read: its key and payload.
pub(super) type Mark = (u64, Vec<u8>);

/// The first bytes of a header (format version 2: logs with control records; a checkpoint of
/// version 1, whose logs have none, is not of this version: removed, started over).
const MAGIC: &[u8; 8] = b"MFUCKPT\x02";

/// Xor-ed into the nonce to seed a control record's check: a mark never reads as one.
const CONTROL: u64 = 0x636f_6e74_726f_6c21;

/// Control record: the boot id of the log's kernel (payload: its bytes).
pub(super) const BOOT: u64 = 1;

/// Control record: marks ending at or before this offset of the log (payload: u64 LE) have
/// their data synced.
pub(super) const SYNCED: u64 = 2;

/// Control record: a sync of the outputs failed (a writeback error: data may be lost). No
/// rerun trusts the log's marks beyond its [`SYNCED`] records, whatever its boot.
pub(super) const DOUBT: u64 = 3;

/// The header's file name in the checkpoint directory.
pub(super) const HEADER: &[u8] = b"header";

/// The start of every log's file name.
const LOG_PREFIX: &[u8] = b"log.";

/// The longest payload of one mark (bytes): a larger one is a damaged log.
pub(super) const MAX_PAYLOAD: usize = 64 << 20;

/// What the header records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Header {
    pub inputs: Inputs,
    /// Seeds every mark's check.
    pub nonce: u64,
}

/// What is at a checkpoint's path.
pub(super) enum Found {
    /// Nothing.
    Absent,
    /// A checkpoint directory of this user with a valid header.
    Ours(OwnedFd, Header),
    /// A directory of this user, mode 0700, holding nothing but names a checkpoint has, and no
    /// valid header (a run killed while creating it; a damaged header): removable.
    Damaged(OwnedFd, &'static str),
    /// Something that is not this user's checkpoint: never used, never removed.
    Foreign(String),
}

fn io_err(op: &str, path: &[u8], e: impl Into<io::Error>) -> CheckpointError {
    CheckpointError(format!("{op} {}: {}", flist::path::display(path), e.into()))
}

/// Whether `name` is one that a checkpoint directory holds (its header, its header's
/// temporary, a log): what tells a damaged checkpoint from a user's directory.
fn ours_by_name(name: &[u8]) -> bool {
    name == HEADER || name.starts_with(LOG_PREFIX) || flist::atomic::is_temp_name(name)
}

/// Look at `path`: never following a symbolic link, trusting only what this user owns.
pub(super) fn inspect(path: &[u8]) -> Result<Found, CheckpointError> {
    let p = flist::path::as_path(path);
    let st = match rustix::fs::lstat(p) {
        Err(Errno::NOENT) => return Ok(Found::Absent),
        Err(e) => return Err(io_err("stat", path, e)),
        Ok(st) => st,
    };
    let me = rustix::process::geteuid().as_raw();
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => {}
        libc::S_IFLNK => return Ok(Found::Foreign("it is a symbolic link".into())),
        _ => return Ok(Found::Foreign("it is not a directory".into())),
    }
    if st.st_uid != me {
        return Ok(Found::Foreign("it is owned by another user".into()));
    }
    if st.st_mode & 0o077 != 0 {
        return Ok(Found::Foreign(
            "it is open to other users (a checkpoint is mode 0700)".into(),
        ));
    }
    let dir = rustix::fs::open(
        p,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err("open", path, e))?;
    let again = rustix::fs::fstat(&dir).map_err(|e| io_err("stat", path, e))?;
    if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino) {
        return Ok(Found::Foreign("it was replaced while being opened".into()));
    }
    match read_header(dir.as_fd()) {
        Ok(h) => Ok(Found::Ours(dir, h)),
        Err(why) => {
            let names = list(dir.as_fd()).map_err(|e| io_err("read directory", path, e))?;
            // Ours beyond doubt: a header that begins as ours (then damaged), or nothing but
            // the names a checkpoint holds. A tool's own files (a partial output) may be there
            // too when the header says it is ours.
            if header_is_ours(dir.as_fd()) || names.iter().all(|n| ours_by_name(n)) {
                Ok(Found::Damaged(dir, why))
            } else {
                Ok(Found::Foreign(
                    "it holds files that are not a checkpoint's".into(),
                ))
            }
        }
    }
}

/// The names in `dir` (not `.` and `..`).
fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<Vec<u8>>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    }
    names.sort();
    Ok(names)
}

/// Open `name` in `dir` for reading if it is a regular file of this user with one link.
fn open_trusted(dir: BorrowedFd<'_>, name: &[u8]) -> Result<std::fs::File, &'static str> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|_| "it cannot be opened (missing, or a symbolic link)")?;
    let st = rustix::fs::fstat(&fd).map_err(|_| "it cannot be read")?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG
        || st.st_uid != rustix::process::geteuid().as_raw()
        || st.st_nlink != 1
    {
        return Err("it is not a regular file of this user with one link");
    }
    Ok(std::fs::File::from(fd))
}

/// Whether the header file begins with a header's magic, of this version or another
/// (whatever follows): a checkpoint an older mfu-rs left, a tool's files in it, is ours to
/// remove and start over, not something else to leave alone.
fn header_is_ours(dir: BorrowedFd<'_>) -> bool {
    let mut start = [0u8; 8];
    open_trusted(dir, HEADER)
        .and_then(|f| (&f).read_exact(&mut start).map_err(|_| "short"))
        .is_ok_and(|()| start[..7] == MAGIC[..7])
}

/// [`read_header`] for tests.
#[cfg(test)]
pub(super) fn read_header_of(dir: BorrowedFd<'_>) -> Result<Header, &'static str> {
    read_header(dir)
}

fn read_header(dir: BorrowedFd<'_>) -> Result<Header, &'static str> {
    let mut bytes = Vec::new();
    open_trusted(dir, HEADER)
        .map_err(|_| "its header is missing or not a regular file")?
        .take(16 << 20)
        .read_to_end(&mut bytes)
        .map_err(|_| "its header cannot be read")?;
    let damaged = "its header is damaged";
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("its header is not of this version")?;
    if body.len() < 8 {
        return Err(damaged);
    }
    let (body, check) = body.split_at(body.len() - 8);
    if xxhash_rust::xxh64::xxh64(body, 0).to_le_bytes() != check {
        return Err(damaged);
    }
    steal::typed::decode(body).map_err(|_| damaged)
}

/// Create the checkpoint directory at `path` (new, mode 0700; `mkdir` never follows a link at
/// its name) and write its header. Returns the open directory.
pub(super) fn create(path: &[u8], header: &Header) -> Result<OwnedFd, CheckpointError> {
    let p = flist::path::as_path(path);
    rustix::fs::mkdir(p, Mode::from_raw_mode(0o700)).map_err(|e| io_err("create", path, e))?;
    let dir = rustix::fs::open(
        p,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err("open", path, e))?;
    write_header(dir.as_fd(), header).map_err(|e| io_err("write the header of", path, e))?;
    Ok(dir)
}

fn write_header(dir: BorrowedFd<'_>, header: &Header) -> io::Result<()> {
    let mut bytes = MAGIC.to_vec();
    let body = steal::typed::encode(header);
    let check = xxhash_rust::xxh64::xxh64(&body, 0);
    bytes.extend_from_slice(&body);
    bytes.extend_from_slice(&check.to_le_bytes());
    // Written in place, unsynced, in the directory just made (no one else's file can be there):
    // a header cut by a crash fails its check, and the checkpoint is then damaged, removed and
    // started over, which costs only the work of the run that made it. Syncing it (the file
    // and the directory) was most of a short run's checkpoint cost.
    let fd = rustix::fs::openat(
        dir,
        HEADER,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    io::Write::write_all(&mut std::fs::File::from(fd), &bytes)
}

/// What [`read_marks`] found.
#[derive(Debug, Default)]
pub(super) struct FoundMarks {
    /// The trusted marks, earlier attempts first.
    pub marks: Vec<Mark>,
    /// The number of the next attempt.
    pub next: u64,
    /// Marks not trusted: written on a boot none of the rerun's ranks runs on, their data not
    /// known to be synced.
    pub untrusted: u64,
}

/// Every trusted mark of every log in `dir` whose check holds with `nonce` (see the module:
/// a log's unsynced marks count only when its boot is one of `boots`, the rerun's ranks').
pub(super) fn read_marks(
    dir: BorrowedFd<'_>,
    nonce: u64,
    boots: &[Vec<u8>],
) -> io::Result<FoundMarks> {
    let mut read = FoundMarks::default();
    let mut next = 0;
    for name in list(dir)? {
        let Some(attempt) = attempt_of(&name) else {
            continue;
        };
        next = next.max(attempt + 1);
        let Ok(file) = open_trusted(dir, &name) else {
            continue;
        };
        let mut bytes = Vec::new();
        if (&file).read_to_end(&mut bytes).is_err() {
            continue;
        }
        let log = parse_log(&bytes, nonce);
        let trusted = log.trusted(boots);
        read.untrusted += (log.marks.len() - trusted) as u64;
        read.marks
            .extend(log.marks.into_iter().take(trusted).map(|(_, m)| m));
    }
    // Names sort by attempt (fixed-width numbers): earlier attempts' marks come first.
    read.next = next;
    Ok(read)
}

/// The attempt number of a log's name `log.ATTEMPT.RANK`.
fn attempt_of(name: &[u8]) -> Option<u64> {
    let rest = name.strip_prefix(LOG_PREFIX)?;
    let dot = rest.iter().position(|&b| b == b'.')?;
    std::str::from_utf8(&rest[..dot]).ok()?.parse().ok()
}

/// The name of the log of `rank` in attempt `attempt`.
pub(super) fn log_name(attempt: u64, rank: usize) -> Vec<u8> {
    format!("log.{attempt:010}.{rank:06}").into_bytes()
}

/// Append the encoding of one mark to `out`; `false` (nothing appended) when the payload is
/// longer than [`MAX_PAYLOAD`]: a reader would take it for damage and drop every later mark.
#[cfg(test)]
pub(super) fn encode_mark(key: u64, payload: &[u8], nonce: u64, out: &mut Vec<u8>) -> bool {
    encode_mark_with(key, nonce, out, |o| o.extend_from_slice(payload))
}

/// [`encode_mark`] with the payload written by `payload` straight into `out` (no buffer of
/// its own, no copy).
pub(super) fn encode_mark_with(
    key: u64,
    nonce: u64,
    out: &mut Vec<u8>,
    payload: impl FnOnce(&mut Vec<u8>),
) -> bool {
    let start = out.len();
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    payload(out);
    let len = out.len() - start - 12;
    if len > MAX_PAYLOAD {
        out.truncate(start);
        return false;
    }
    out[start + 8..start + 12].copy_from_slice(&(len as u32).to_le_bytes());
    let check = xxhash_rust::xxh64::xxh64(&out[start..], nonce);
    out.extend_from_slice(&check.to_le_bytes());
    true
}

/// Append control record `kind` with `payload` to `out` (see the module).
pub(super) fn encode_control(kind: u64, payload: &[u8], nonce: u64, out: &mut Vec<u8>) {
    encode_mark_with(kind, nonce ^ CONTROL, out, |o| o.extend_from_slice(payload));
}

/// One log as read: its marks (each with the offset of its end in the log), its boot, and
/// the offset up to which its marks' data is synced.
#[derive(Debug, Default, PartialEq)]
struct Log {
    marks: Vec<(u64, Mark)>,
    boot: Option<Vec<u8>>,
    synced: u64,
    doubt: bool,
}

impl Log {
    /// How many of its marks (the first ones) a rerun whose ranks run on `boots` trusts:
    /// all of them when the log's boot is one of those and no sync failed; else those whose
    /// data was synced.
    fn trusted(&self, boots: &[Vec<u8>]) -> usize {
        match &self.boot {
            Some(boot) if !self.doubt && !boot.is_empty() && boots.contains(boot) => {
                self.marks.len()
            }
            _ => self.marks.partition_point(|(end, _)| *end <= self.synced),
        }
    }
}

/// The records of a log, `bytes`, up to the first that is cut or whose check fails.
fn parse_log(bytes: &[u8], nonce: u64) -> Log {
    let mut log = Log::default();
    let mut at = 0;
    while bytes.len() - at >= 20 {
        let rec = &bytes[at..];
        let key = u64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(rec[8..12].try_into().expect("4 bytes")) as usize;
        if len > MAX_PAYLOAD || rec.len() < 12 + len + 8 {
            break;
        }
        let check = u64::from_le_bytes(rec[12 + len..20 + len].try_into().expect("8 bytes"));
        let hash = |seed| xxhash_rust::xxh64::xxh64(&rec[..12 + len], seed);
        let payload = &rec[12..12 + len];
        at += 20 + len;
        if hash(nonce) == check {
            log.marks.push((at as u64, (key, payload.to_vec())));
        } else if hash(nonce ^ CONTROL) == check {
            match (key, payload.len()) {
                // Only the first record may name the boot: one written later could claim
                // the marks before it.
                (BOOT, _) if at == 20 + len => log.boot = Some(payload.to_vec()),
                (SYNCED, 8) => {
                    let to = u64::from_le_bytes(payload.try_into().expect("8 bytes"));
                    log.synced = log.synced.max(to.min(at as u64));
                }
                (DOUBT, 0) => log.doubt = true,
                // A kind this version does not know, or out of place: what follows is not
                // understood.
                _ => break,
            }
        } else {
            break;
        }
    }
    log
}

/// The marks in `bytes` up to the first record that is cut or whose check fails.
#[cfg(test)]
fn parse_marks(bytes: &[u8], nonce: u64, out: &mut Vec<Mark>) {
    out.extend(parse_log(bytes, nonce).marks.into_iter().map(|(_, m)| m));
}

/// Remove everything in `dir` (a checkpoint directory of this user), never following a link:
/// its header, logs and whatever files and directories the tool kept in it.
pub(super) fn empty(dir: BorrowedFd<'_>) -> io::Result<()> {
    for name in list(dir)? {
        match rustix::fs::unlinkat(dir, name.as_slice(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(Errno::ISDIR) | Err(Errno::PERM) => {
                let sub = rustix::fs::openat(
                    dir,
                    name.as_slice(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                empty(sub.as_fd())?;
                rustix::fs::unlinkat(dir, name.as_slice(), AtFlags::REMOVEDIR)?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Remove the checkpoint directory `dir` at `path`: its contents, then the directory itself,
/// if the name still holds that very directory.
pub(super) fn remove(path: &[u8], dir: BorrowedFd<'_>) -> Result<(), CheckpointError> {
    empty(dir).map_err(|e| io_err("remove the contents of", path, e))?;
    let id = flist::atomic::identity(dir).map_err(|e| io_err("stat", path, e))?;
    let parent =
        flist::atomic::open_parent(path).map_err(|e| io_err("open the directory of", path, e))?;
    let name = flist::path::basename(path);
    match rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if (st.st_dev, st.st_ino) == id => {
            rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR)
                .map_err(|e| io_err("remove", path, e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_read_back_up_to_the_first_damaged_one() {
        let mut log = Vec::new();
        encode_mark(1, b"one", 77, &mut log);
        encode_mark(2, b"", 77, &mut log);
        let good = log.len();
        encode_mark(3, b"three", 77, &mut log);
        let mut out = Vec::new();
        parse_marks(&log, 77, &mut out);
        assert_eq!(out.len(), 3);
        // Another nonce: nothing.
        out.clear();
        parse_marks(&log, 78, &mut out);
        assert!(out.is_empty());
        // A flipped byte in the third mark, or a cut tail: the first two only.
        for damaged in [
            {
                let mut l = log.clone();
                l[good + 13] ^= 1;
                l
            },
            log[..log.len() - 1].to_vec(),
        ] {
            out.clear();
            parse_marks(&damaged, 77, &mut out);
            assert_eq!(out, vec![(1, b"one".to_vec()), (2, Vec::new())]);
        }
        // Garbage never panics.
        let mut seed = 1u64;
        for _ in 0..2000 {
            let bytes: Vec<u8> = (0..64)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (seed >> 33) as u8
                })
                .collect();
            out.clear();
            parse_marks(&bytes, 77, &mut out);
        }
    }

    /// A log's marks are all trusted by a rerun on its boot, only its synced ones by any other
    /// (another node, a reboot) or after a failed sync; control records are never marks, and
    /// a boot named anywhere but first, or a record of another nonce, ends the log.
    #[test]
    fn unsynced_marks_count_only_on_the_boot_that_wrote_them() {
        let nonce = 77;
        let boot = b"boot-a".to_vec();
        let mut log = Vec::new();
        encode_control(BOOT, &boot, nonce, &mut log);
        encode_mark(1, b"one", nonce, &mut log);
        encode_mark(2, b"two", nonce, &mut log);
        let synced = log.len() as u64;
        encode_mark(3, b"three", nonce, &mut log);
        // The syncer's record comes after a mark written while it synced: it covers the
        // first two only.
        encode_control(SYNCED, &synced.to_le_bytes(), nonce, &mut log);
        encode_mark(4, b"four", nonce, &mut log);
        let keys = |log: &Log, boots: &[Vec<u8>]| -> Vec<u64> {
            log.marks[..log.trusted(boots)]
                .iter()
                .map(|(_, (k, _))| *k)
                .collect()
        };
        let read = parse_log(&log, nonce);
        assert_eq!(read.boot.as_deref(), Some(&boot[..]));
        assert_eq!(keys(&read, &[b"x".to_vec(), boot.clone()]), [1, 2, 3, 4]);
        assert_eq!(keys(&read, &[b"boot-b".to_vec()]), [1, 2]);
        assert_eq!(keys(&read, &[]), [1, 2]);
        // A failed sync: only the synced marks, on any boot.
        let mut doubted = log.clone();
        encode_control(DOUBT, &[], nonce, &mut doubted);
        assert_eq!(
            keys(&parse_log(&doubted, nonce), std::slice::from_ref(&boot)),
            [1, 2]
        );
        // No boot known (an empty id): only the synced marks.
        let mut unknown = Vec::new();
        encode_control(BOOT, b"", nonce, &mut unknown);
        encode_mark(1, b"one", nonce, &mut unknown);
        assert!(keys(&parse_log(&unknown, nonce), &[Vec::new()]).is_empty());
        // A log without a boot record (another version's, forged): only synced marks.
        let mut bootless = Vec::new();
        encode_mark(1, b"one", nonce, &mut bootless);
        assert!(keys(&parse_log(&bootless, nonce), std::slice::from_ref(&boot)).is_empty());
        // A boot record after marks ends the log there; so does a control record of another
        // nonce (forged) or a kind this version does not know.
        for (kind, payload, seed) in [
            (BOOT, &boot[..], nonce),
            (SYNCED, &u64::MAX.to_le_bytes()[..], nonce + 1),
            (99, &[][..], nonce),
        ] {
            let mut l = Vec::new();
            encode_control(BOOT, &boot, nonce, &mut l);
            encode_mark(1, b"one", nonce, &mut l);
            encode_control(kind, payload, seed, &mut l);
            encode_mark(2, b"two", nonce, &mut l);
            assert_eq!(
                keys(&parse_log(&l, nonce), std::slice::from_ref(&boot)),
                [1],
                "{kind}"
            );
        }
        // A synced offset past the record that names it covers no mark after it.
        let mut early = Vec::new();
        encode_control(BOOT, &boot, nonce, &mut early);
        encode_mark(1, b"one", nonce, &mut early);
        encode_control(SYNCED, &u64::MAX.to_le_bytes(), nonce, &mut early);
        encode_mark(2, b"two", nonce, &mut early);
        assert_eq!(keys(&parse_log(&early, nonce), &[]), [1]);
    }

    /// A checkpoint of the earlier format (version 1 header) holding a tool's own file (tar
    /// -c's partial archive) is ours, damaged: removed and started over, not left behind as
    /// something foreign.
    #[test]
    fn a_checkpoint_of_an_earlier_version_is_ours_to_remove() {
        use std::os::unix::fs::DirBuilderExt;
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("ck");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .unwrap();
        std::fs::write(
            path.join(std::str::from_utf8(HEADER).unwrap()),
            b"MFUCKPT\x01old header",
        )
        .unwrap();
        std::fs::write(path.join("partial-archive"), b"data").unwrap();
        use std::os::unix::ffi::OsStrExt;
        match inspect(path.as_os_str().as_bytes()).unwrap() {
            Found::Damaged(_, why) => assert!(why.contains("version"), "{why}"),
            Found::Foreign(why) => panic!("foreign: {why}"),
            _ => panic!("not damaged"),
        }
    }

    #[test]
    fn log_names_give_back_their_attempt() {
        assert_eq!(attempt_of(&log_name(12, 3)), Some(12));
        assert_eq!(attempt_of(b"log.x.1"), None);
        assert!(ours_by_name(&log_name(0, 0)) && ours_by_name(HEADER) && !ours_by_name(b"data"));
    }
}
