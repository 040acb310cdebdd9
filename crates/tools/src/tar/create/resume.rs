//! `tar -c` continued after an interruption (issue 33): the checkpoint, where the partial
//! archive lives, and what a rerun may trust.
//!
//! The archive is written into `partial-archive` inside the checkpoint's directory, so that it
//! survives a killed or stopped run, and renamed to its final name once complete. The marks
//! ([`super::ledger`]) say which ranges (or frames) of it hold their final bytes. A rerun uses
//! them only when every input is equal (the paths, the options that change the bytes, the
//! digest of the walked list and the digest of the layout planned from it) and the partial
//! archive is the very file they were made about (its device, inode and, plain, its size).
//! Otherwise the checkpoint is removed and the run starts over, saying why.

use super::ledger::{Recorded, Sink, PLAN};
use super::segment::HeaderBytes;
use super::{Laid, Options};
use crate::engine::checkpoint::{self, Checkpoint, Choice, Durable, Inputs, Outcome, Prior};
use crate::engine::context::Error;
use crate::tar::format::{Header, Kind};
use flist::atomic::{Existing, Output};
use flist::path::display;
use flist::FileList;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::io;
use std::sync::Arc;
use steal::{Comm, CommExt};

/// The partial archive's name in the checkpoint's directory.
const PARTIAL: &[u8] = b"partial-archive";

impl Sink for Checkpoint {
    fn mark(&self, key: u64, payload: &[u8]) {
        Checkpoint::mark(self, key, payload)
    }
}

/// The checkpoint's path for `choice` (the core's rule: `DIR/.NAME.mfu-checkpoint` beside
/// the archive by default, its name shortened as the core does when that would be too long),
/// so that the walk of the sources leaves it out when the archive is inside them: its files
/// change with every run and are never archived.
pub(super) fn checkpoint_path(choice: &Choice, archive: &[u8], cwd: &[u8]) -> Option<Vec<u8>> {
    match choice {
        Choice::Off => None,
        Choice::At(p) => Some(flist::path::normalize(p, cwd)),
        Choice::Beside => Some(flist::atomic::beside(
            archive,
            &checkpoint::beside_name(flist::path::basename(archive)),
        )),
    }
}

/// The choice given to the core: a `--checkpoint PATH` made absolute (relative to `cwd`): the
/// checkpoint is the one the walk left out, and is removed by its full path at the end. The
/// default stays the core's (Plan.output = the archive): a foreign thing at its name is
/// warned about and left alone, not refused.
pub(super) fn effective(choice: &Choice, cwd: &[u8]) -> Choice {
    match choice {
        Choice::At(p) => Choice::At(flist::path::normalize(p, cwd)),
        other => other.clone(),
    }
}

/// The digest of the layout: every member's offset, data size and header, summed over members
/// and ranks (the same at any rank count). Things the list's digest does not see change it: a
/// user or group name, a symlink's target read again, a file no longer readable, xattrs.
/// Collective.
///
/// A header not yet encoded is digested by its fields ([`header_fields`]), not by its blocks:
/// its encoding is a function of them, and encoding every header once more only for this digest
/// was a tenth of a `tar -c` of small files. An encoded one (the archive's first, marked) is
/// digested by its bytes; which headers are encoded does not depend on the rank count.
pub(super) fn layout_digest(comm: &dyn Comm, laid: &[Laid]) -> [u8; 16] {
    let mut sum = [0u64; 2];
    let mut bytes = Vec::new();
    for l in laid {
        bytes.clear();
        bytes.extend_from_slice(&l.at.to_le_bytes());
        bytes.extend_from_slice(&l.member.size.to_le_bytes());
        match &l.member.header {
            HeaderBytes::Lazy { header, len } => {
                bytes.push(0);
                bytes.extend_from_slice(&(*len as u64).to_le_bytes());
                header_fields(header, &mut bytes);
            }
            HeaderBytes::Encoded(b) => {
                bytes.push(1);
                bytes.extend_from_slice(b);
            }
        }
        sum[0] = sum[0].wrapping_add(xxhash_rust::xxh64::xxh64(&bytes, 0x7461_722d_6301));
        sum[1] = sum[1].wrapping_add(xxhash_rust::xxh64::xxh64(&bytes, 0x7461_722d_6302));
    }
    let all = comm.all_gather(&sum);
    let total = all.iter().fold([0u64; 2], |a, s| {
        [a[0].wrapping_add(s[0]), a[1].wrapping_add(s[1])]
    });
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&total[0].to_le_bytes());
    out[8..].copy_from_slice(&total[1].to_le_bytes());
    out
}

/// Append every field of `h` to `out`, each variable one after its length: two headers append
/// the same bytes exactly when their fields are equal.
fn header_fields(h: &Header, out: &mut Vec<u8>) {
    // Every field named (no `..`): a field added to Header must be added here.
    let Header {
        path,
        kind,
        mode,
        uid,
        gid,
        uname,
        gname,
        size,
        mtime,
        mtime_nsec,
        link,
        dev_major,
        dev_minor,
        xattrs,
        projid,
    } = h;
    let (tag, other) = match *kind {
        Kind::File => (0u8, 0u8),
        Kind::HardLink => (1, 0),
        Kind::Symlink => (2, 0),
        Kind::Char => (3, 0),
        Kind::Block => (4, 0),
        Kind::Dir => (5, 0),
        Kind::Fifo => (6, 0),
        Kind::Other(b) => (7, b),
    };
    out.extend_from_slice(&[tag, other]);
    for v in [u64::from(*mode), *uid, *gid, *size, *mtime as u64] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [
        *mtime_nsec,
        *dev_major,
        *dev_minor,
        projid.id,
        u32::from(projid.inherit),
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let mut var = |b: &[u8]| {
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        out.extend_from_slice(b);
    };
    var(path);
    var(uname);
    var(gname);
    var(link);
    out.extend_from_slice(&(xattrs.len() as u64).to_le_bytes());
    for (name, value) in xattrs {
        out.extend_from_slice(&(name.len() as u64).to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
        out.extend_from_slice(value);
    }
}

/// What the digests are taken of, for [`open`].
pub(super) struct Of<'a> {
    /// The archive (absolute).
    pub(super) archive: &'a [u8],
    /// The directory the paths are taken relative to.
    pub(super) base: &'a [u8],
    /// The paths as given.
    pub(super) paths: &'a [Vec<u8>],
    pub(super) list: &'a FileList,
    pub(super) laid: &'a [Laid],
}

/// The format of what this module records: 2, the layout digest of header fields (1, with no
/// field for it: of the encoded header blocks). A checkpoint of another format is not
/// continued: the run starts over and says why.
const FORMAT: u32 = 2;

/// The first input of every `tar -c` checkpoint: [`FORMAT`], and the digest of a few headers
/// encoded by this binary ([`encoding_probe`]). The layout digest takes headers' fields, not
/// their bytes: a rerun by an mfu-rs that encodes the same fields otherwise would continue a
/// partial archive with other bytes than it would write.
fn versioned(inputs: Inputs) -> Inputs {
    inputs.field("the format of the checkpoint", &(FORMAT, encoding_probe()))
}

/// XXH64 of the encoding of headers that take the encoder's paths: a plain file, one with a
/// sub-second time, a long name and an xattr (pax records), a symlink, a device, a directory.
fn encoding_probe() -> u64 {
    let file = Header {
        path: b"d/f".to_vec(),
        kind: Kind::File,
        mode: 0o644,
        uid: 1000,
        gid: 100,
        uname: b"u".to_vec(),
        gname: b"g".to_vec(),
        size: 3,
        mtime: 1_000_000_000,
        mtime_nsec: 0,
        link: Vec::new(),
        dev_major: 0,
        dev_minor: 0,
        xattrs: Vec::new(),
        projid: Default::default(),
    };
    let probes = [
        file.clone(),
        Header {
            path: [&b"d/"[..], &[b'n'; 200]].concat(),
            mtime_nsec: 5,
            xattrs: vec![(b"user.k".to_vec(), b"v".to_vec())],
            ..file.clone()
        },
        Header {
            kind: Kind::Symlink,
            size: 0,
            link: b"../t".to_vec(),
            ..file.clone()
        },
        Header {
            kind: Kind::Char,
            size: 0,
            dev_major: 1,
            dev_minor: 3,
            ..file.clone()
        },
        Header {
            kind: Kind::Dir,
            size: 0,
            mode: 0o755,
            ..file
        },
    ];
    let mut bytes = Vec::new();
    for h in &probes {
        h.encode(&mut bytes);
    }
    xxhash_rust::xxh64::xxh64(&bytes, 0)
}

/// The inputs of a `tar -c`: what the archive's bytes depend on.
fn inputs(comm: &dyn Comm, o: &Options, of: &Of<'_>) -> Inputs {
    versioned(Inputs::new("tar -c"))
        .field("the archive", &serde_bytes::Bytes::new(of.archive))
        .field("-C", &serde_bytes::Bytes::new(of.base))
        .field(
            "the paths",
            &of.paths
                .iter()
                .map(|p| serde_bytes::ByteBuf::from(p.clone()))
                .collect::<Vec<_>>(),
        )
        .field(
            "the compression",
            &(o.codec().map(|c| c.name()), o.zstd_level, o.gzip_level),
        )
        .field("-k/--chunksize", &o.chunksize)
        .field("--xattrs", &o.xattrs)
        .field(
            "the list of sources",
            &checkpoint::list_digest(comm, of.list),
        )
        .field(
            "the sources' metadata (names, links, readability)",
            &layout_digest(comm, of.laid),
        )
}

/// A run's checkpoint and what earlier runs left.
pub(super) struct Resume {
    pub(super) checkpoint: Option<Checkpoint>,
    pub(super) prior: Prior,
    /// The earlier runs' record (partial archive, index time) when it can be trusted.
    pub(super) recorded: Option<Recorded>,
}

/// Open the checkpoint of this `tar -c` (none with `--no-checkpoint` or `--manifest`), and
/// check that the partial archive in it is the one its marks are about (of `stream_len` bytes
/// when plain); otherwise remove it and start over. Says on rank 0 what it did (kept in
/// `said`). Collective.
pub(super) fn open(
    comm: &dyn Comm,
    o: &Options,
    of: &Of<'_>,
    stream_len: impl Fn(i64) -> u64,
    said: &std::sync::Mutex<Vec<String>>,
) -> Result<Resume, Error> {
    let rank0 = comm.rank() == 0;
    // Said on stderr as a failure is, but not one (the run may well succeed), and kept among
    // the report's notices, as extract's notices about the index are.
    let say = |notice: &Option<String>| {
        if let (Some(n), true) = (notice, rank0) {
            o.context.events.error(n);
            said.lock().expect("notices").push(n.clone());
        }
    };
    let off = Resume {
        checkpoint: None,
        prior: Prior::default(),
        recorded: None,
    };
    if o.checkpoint == Choice::Off {
        return Ok(off);
    }
    if o.manifest.is_some() {
        // The manifest's digests are taken as the data is read: a rerun that skipped what an
        // earlier run wrote would have none for it.
        say(&Some(
            "running without a checkpoint: --manifest hashes the data as it is archived (an \
             interrupted run will start over)"
                .into(),
        ));
        return Ok(off);
    }
    let inputs = inputs(comm, o, of);
    let plan = |inputs: Inputs| checkpoint::Plan {
        output: Some(of.archive),
        inputs,
    };
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let choice = effective(&o.checkpoint, &cwd);
    let opened = checkpoint::open(comm, &choice, plan(inputs.clone()))
        .map_err(|e| Error::new(e.to_string()))?;
    let Some(ck) = opened.checkpoint else {
        say(&opened.notice);
        return Ok(off);
    };
    // Complete, the archive is in place (a rerun would write it again); starting over below
    // opens the same checkpoint again at once.
    ck.remove_on_completion();
    // The partial archive is renamed into place at the end: it must be on the archive's file
    // system (a copy of a whole archive is not a rename).
    let same_fs = comm.bcast_with(0, || same_file_system(ck.dir(), of.archive));
    if let Err(why) = same_fs {
        // The run is refused anyway; a checkpoint that cannot be removed is told too.
        ck.finish_told(comm, &o.context, Outcome::Complete);
        return Err(Error::new(why));
    }
    let recorded = opened.prior.payload(PLAN).and_then(Recorded::decode);
    if opened.prior.is_empty() {
        say(&opened.notice);
        return Ok(Resume {
            checkpoint: Some(ck),
            prior: opened.prior,
            recorded: None,
        });
    }
    let trusted: Result<(), String> = comm.bcast_with(0, || match recorded {
        None => Err("it does not say which partial archive its marks are about".into()),
        Some(r) => check_partial(ck.dir(), r, stream_len(r.index_mtime)),
    });
    match trusted {
        Ok(()) => {
            say(&opened.notice);
            Ok(Resume {
                checkpoint: Some(ck),
                prior: opened.prior,
                recorded,
            })
        }
        Err(why) => {
            let path = ck.path().to_vec();
            ck.finish(comm, Outcome::Complete)
                .map_err(|e| Error::new(e.to_string()))?;
            let again = checkpoint::open(comm, &choice, plan(inputs))
                .map_err(|e| Error::new(e.to_string()))?;
            if let Some(c) = &again.checkpoint {
                c.remove_on_completion();
            }
            say(&Some(format!(
                "checkpoint {} not used ({why}): starting over",
                display(&path)
            )));
            Ok(Resume {
                checkpoint: again.checkpoint,
                prior: Prior::default(),
                recorded: None,
            })
        }
    }
}

fn same_file_system(dir: BorrowedFd<'_>, archive: &[u8]) -> Result<(), String> {
    let parent = flist::path::parent(archive);
    let a = rustix::fs::fstat(dir).map_err(|e| format!("stat checkpoint: {e}"))?;
    let b = flist::walk::stat_path(parent, true)
        .map_err(|e| format!("{}: {}", display(parent), io::Error::from(e)))?;
    if a.st_dev == b.st_dev {
        Ok(())
    } else {
        Err(format!(
            "--checkpoint: the checkpoint holds the partial archive, renamed to {} at the end: \
             it must be on the archive's file system (nothing done)",
            display(archive)
        ))
    }
}

/// Whether the partial archive in `dir` is the file `r` is about, and (`expect` > 0, a plain
/// archive) of `expect` bytes.
fn check_partial(dir: BorrowedFd<'_>, r: Recorded, expect: u64) -> Result<(), String> {
    let fd = rustix::fs::openat(
        dir,
        PARTIAL,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("its partial archive: {e}"))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("its partial archive: {e}"))?;
    if flist::FileType::from_mode(st.st_mode) != flist::FileType::File
        || (st.st_dev as u64, st.st_ino as u64) != (r.dev, r.ino)
        || birth(fd.as_fd()) != r.born
    {
        return Err("its partial archive is not the file its marks are about".into());
    }
    if expect > 0 && st.st_size as u64 != expect {
        return Err(format!(
            "its partial archive has {} bytes, not {expect}",
            st.st_size
        ));
    }
    Ok(())
}

/// The birth time of an open file (seconds, nanoseconds), `(0, 0)` where the file system or
/// the kernel keeps none.
fn birth(fd: BorrowedFd<'_>) -> (i64, u32) {
    use rustix::fs::StatxFlags;
    match rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::BTIME) {
        Ok(x) if x.stx_mask & StatxFlags::BTIME.bits() != 0 => {
            (x.stx_btime.tv_sec, x.stx_btime.tv_nsec)
        }
        _ => (0, 0),
    }
}

/// The partial archive in the checkpoint's directory, for [`super::stage`].
pub(super) struct Kept<'c> {
    pub(super) checkpoint: &'c Checkpoint,
    /// An earlier run's partial archive, checked ([`open`]), to continue.
    pub(super) resume: bool,
    /// The index member's time, recorded with the file's identity when it is created.
    pub(super) index_mtime: i64,
}

/// Rank 0: the partial archive ([`PARTIAL`] in the checkpoint's directory) as an [`Output`]
/// published as `archive` into `final_dir` (the archive's directory: the same file system,
/// checked by [`open`]). An earlier run's, checked, is continued; else a new one is made by
/// `make` (what a run killed before its first mark left is ours, in our directory: replaced),
/// and its identity and the index time recorded before anything is marked. Registered so that
/// the marks about it follow its data to the disk.
pub(super) fn partial_output(
    k: &Kept<'_>,
    final_dir: BorrowedFd<'_>,
    archive: &[u8],
    make: impl FnOnce(BorrowedFd<'_>, &[u8]) -> io::Result<OwnedFd>,
) -> io::Result<Output> {
    let ck = k.checkpoint;
    let existing = if k.resume {
        Existing::Adopt(OFlags::WRONLY)
    } else {
        Existing::Replace
    };
    let out = Output::named(
        ck.dir(),
        ck.path(),
        PARTIAL,
        final_dir,
        archive,
        existing,
        make,
    )
    .map_err(|e| e.source)?;
    let file = out.file().expect("a file output");
    ck.durable(Durable::File(Arc::new(OwnedFd::from(file.try_clone()?))));
    if !k.resume {
        let (dev, ino) = flist::atomic::identity(file.as_fd())?;
        let r = Recorded {
            dev,
            ino,
            born: birth(file.as_fd()),
            index_mtime: k.index_mtime,
        };
        ck.mark(PLAN, &r.encode());
        ck.flush()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_walked_past_is_the_one_opened() {
        let at = |c: &Choice| checkpoint_path(c, b"/d/a.tar", b"/cwd");
        assert_eq!(at(&Choice::Beside).unwrap(), b"/d/.a.tar.mfu-checkpoint");
        assert_eq!(at(&Choice::At(b"ck".to_vec())).unwrap(), b"/cwd/ck");
        assert_eq!(at(&Choice::Off), None);
    }

    /// The layout digest sees every field of a header not yet encoded, and the member's
    /// offset; equal layouts digest equally.
    #[test]
    fn the_layout_digest_sees_every_header_field() {
        use super::super::segment::{Member, Stamp};
        let header = Header {
            path: b"d/a b|c".to_vec(),
            kind: Kind::File,
            mode: 0o644,
            uid: 1000,
            gid: 100,
            uname: b"alice".to_vec(),
            gname: b"users".to_vec(),
            size: 12,
            mtime: 1_700_000_000,
            mtime_nsec: 5,
            link: Vec::new(),
            dev_major: 0,
            dev_minor: 0,
            xattrs: vec![(b"user.k".to_vec(), b"v".to_vec())],
            projid: Default::default(),
        };
        let laid = |h: &Header, at: u64| Laid {
            at,
            member: Member {
                header: HeaderBytes::Lazy {
                    header: Box::new(h.clone()),
                    len: 512,
                },
                src: b"/s/d/a b|c".to_vec(),
                size: h.size,
                stamp: Stamp::default(),
                inline: true,
            },
        };
        let digest = |h: &Header, at: u64| {
            steal::local::run(1, |comm| layout_digest(comm, &[laid(h, at)]))[0]
        };
        let base = digest(&header, 0);
        assert_eq!(digest(&header.clone(), 0), base);
        assert_ne!(digest(&header, 512), base, "offset");
        type Change = (&'static str, fn(&mut Header));
        let changes: Vec<Change> = vec![
            ("path", |h| h.path.push(b'x')),
            ("kind", |h| h.kind = Kind::Other(b'0')),
            ("mode", |h| h.mode = 0o600),
            ("uid", |h| h.uid += 1),
            ("gid", |h| h.gid += 1),
            ("uname", |h| h.uname = b"bob".to_vec()),
            ("gname", |h| h.gname = b"staff".to_vec()),
            ("size", |h| h.size += 1),
            ("mtime", |h| h.mtime += 1),
            ("mtime_nsec", |h| h.mtime_nsec += 1),
            ("link", |h| h.link = b"t".to_vec()),
            ("dev_major", |h| h.dev_major = 1),
            ("dev_minor", |h| h.dev_minor = 1),
            ("projid", |h| h.projid.id = 9),
            ("projinherit", |h| h.projid.inherit = true),
            ("xattr value", |h| h.xattrs[0].1.push(b'2')),
            ("xattr moved", |h| {
                // The same bytes split otherwise between name and value.
                h.xattrs[0] = (b"user.kv".to_vec(), Vec::new())
            }),
            ("names moved", |h| {
                h.uname = b"alic".to_vec();
                h.gname = b"eusers".to_vec();
            }),
        ];
        for (what, change) in changes {
            let mut h = header.clone();
            change(&mut h);
            assert_ne!(digest(&h, 0), base, "{what}");
        }
    }

    /// A checkpoint of the earlier format (no format field; its layout digest taken of the
    /// encoded headers, which this one's never equals) is not continued, and the notice says
    /// why, not that the sources changed.
    #[test]
    fn a_checkpoint_of_the_earlier_format_starts_over_and_says_why() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap();
        let at = Choice::At(t.path().join("ck").as_os_str().as_bytes().to_vec());
        let out = t.path().join("a.tar").as_os_str().as_bytes().to_vec();
        let rest = |i: Inputs| i.field("the archive", &serde_bytes::Bytes::new(&out));
        let notices = steal::local::run(1, |comm| {
            let open = |inputs| {
                let plan = checkpoint::Plan {
                    output: Some(&out),
                    inputs,
                };
                checkpoint::open(comm, &at, plan).unwrap()
            };
            // A run of the earlier format, stopped after a mark.
            let earlier = open(rest(Inputs::new("tar -c")));
            let ck = earlier.checkpoint.unwrap();
            ck.mark(7, &9u64.to_le_bytes());
            ck.finish(comm, Outcome::Stopped).unwrap();
            let now = open(rest(versioned(Inputs::new("tar -c"))));
            assert!(now.prior.is_empty(), "its marks were trusted");
            now.checkpoint
                .unwrap()
                .finish(comm, Outcome::Complete)
                .unwrap();
            now.notice.unwrap_or_default()
        });
        let n = &notices[0];
        assert!(
            n.contains("format of the checkpoint") && n.contains("starting over"),
            "{n}"
        );
    }

    /// The default stays the core's (whose name for a long archive name fits a file name,
    /// and is the path the walk leaves out); a `--checkpoint PATH` is made absolute.
    #[test]
    fn the_checkpoint_of_an_archive_with_a_long_name_has_a_name_that_fits() {
        let long = [b"/d/".to_vec(), vec![b'a'; 251], b".tar".to_vec()].concat();
        assert_eq!(effective(&Choice::Beside, b"/"), Choice::Beside);
        let p = checkpoint_path(&Choice::Beside, &long, b"/").unwrap();
        let name = flist::path::basename(&p);
        assert!(name.len() <= 255 && name.ends_with(b".mfu-checkpoint"));
        assert!(p.starts_with(b"/d/.aaaa"));
        let other = [b"/d/".to_vec(), vec![b'a'; 252], b".tar".to_vec()].concat();
        assert_ne!(checkpoint_path(&Choice::Beside, &other, b"/").unwrap(), p);
        assert_eq!(effective(&Choice::Off, b"/"), Choice::Off);
        assert_eq!(
            effective(&Choice::At(b"ck".to_vec()), b"/cwd"),
            Choice::At(b"/cwd/ck".to_vec())
        );
    }
}
