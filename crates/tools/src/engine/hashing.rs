//! What the copy engine hashes when asked (`--verify`, `--manifest`): each range of file data
//! as it is read from the source, the read-back check of what was written, and the digests a
//! manifest is made of.

use crate::engine::digest::{HashKind, RangeDigest, RangeHasher};
use crate::engine::verify::{self, Counters};
use flist::ItemError;
use rustix::fd::BorrowedFd;
use std::io;
use std::sync::Mutex;

/// The digest of one range of a written file, kept for the manifest (and sent to the rank
/// that writes the file's line).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// The file written (a destination path).
    #[serde(with = "serde_bytes")]
    pub path: Vec<u8>,
    /// Its size in bytes.
    pub file_size: u64,
    /// The range's digest (the whole file's, or BLAKE3 pieces).
    pub digest: RangeDigest,
    /// Set when the file's digest can't be made of what this run read (a resumed file, whose
    /// journaled chunks it did not read; SHA-256 of a file read in several chunks): the file
    /// is hashed by reading its source again, and `digest` (and the file's other records) are
    /// ignored.
    pub reread: Option<Source>,
}

/// The source a file's manifest digest is read from again, as it was listed: a source whose
/// size, mtime or ctime differs from these when it is read is not what was copied, and is
/// not hashed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Source {
    /// The source path.
    #[serde(with = "serde_bytes")]
    pub path: Vec<u8>,
    /// Its metadata when listed (size in bytes, times).
    pub meta: flist::Meta,
}

/// The hashing of one run: what to do, and what was found (this rank's).
#[derive(Debug, Default)]
pub struct Hashing {
    /// Read every written range back and compare.
    pub verify: bool,
    /// Keep digests of this kind for a manifest.
    pub manifest: Option<HashKind>,
    /// How ranges were read back.
    pub counters: Counters,
    records: Mutex<Vec<Record>>,
}

impl Hashing {
    /// Hashing for `verify` and a manifest of `manifest` (`None`: no manifest).
    pub fn new(verify: bool, manifest: Option<HashKind>) -> Hashing {
        Hashing {
            verify,
            manifest,
            ..Hashing::default()
        }
    }

    /// True when anything is hashed.
    pub fn on(&self) -> bool {
        self.verify || self.manifest.is_some()
    }

    /// A hasher for the `len` bytes at `offset` of a file of `file_size` bytes.
    pub fn range(&self, offset: u64, len: u64, file_size: u64) -> RangeHasher {
        RangeHasher::new(self.kind(), offset, len, file_size)
    }

    fn kind(&self) -> HashKind {
        self.manifest.unwrap_or_default()
    }

    /// After the range `hashed` (of the file `path`, open as `written`) landed: with `verify`,
    /// read it back and compare; keep its digest for the manifest. A range that differs is an
    /// error naming the file and the range's offset, and the file's modification time is set
    /// to now, so that whatever it was (an existing file rewritten in place may have had the
    /// source's), a later sync sees it differ and copies it again.
    pub fn landed(
        &self,
        written: BorrowedFd<'_>,
        path: &[u8],
        file_size: u64,
        (offset, len): (u64, u64),
        hashed: RangeHasher,
    ) -> Result<(), ItemError> {
        let digest = hashed.finish();
        // Without `verify` the seam stands for a copy damaged after its write, which a
        // manifest (hashed from the source's bytes) must not certify.
        crate::engine::test_seam::corrupt_before_verify(written, path, offset, len);
        if self.verify {
            let fresh = self.range(offset, len, file_size);
            let checked = verify::check(written, offset, len, fresh, &digest, &self.counters);
            let failed = match checked {
                Ok(true) => None,
                Ok(false) => Some(ItemError::new(
                    path,
                    "verify",
                    io::Error::other(format!(
                        "the {len} bytes at offset {offset} read back differ from the source's"
                    )),
                )),
                Err(e) => Some(ItemError::new(path, e.op, e.source)),
            };
            if let Some(e) = failed {
                mark_unfinished(written);
                return Err(e);
            }
        }
        if self.manifest.is_some() {
            self.records.lock().expect("records").push(Record {
                path: path.to_vec(),
                file_size,
                digest,
                reread: None,
            });
        }
        Ok(())
    }

    /// The manifest digest of the destination `path` is to be read from its source `source`
    /// (listed as `meta`) once the copy is done: the source's bytes, never the copy's.
    pub fn reread(&self, path: &[u8], source: &[u8], meta: flist::Meta) {
        self.records.lock().expect("records").push(Record {
            path: path.to_vec(),
            file_size: meta.size,
            digest: RangeDigest::Pieces(Vec::new()),
            reread: Some(Source {
                path: source.to_vec(),
                meta,
            }),
        });
    }

    /// Keep the digest of a range of the file `path` for the manifest (a range read and not
    /// checked: a `sync --manifest-all` file left as it was, data tar archived).
    pub fn keep(&self, path: &[u8], file_size: u64, digest: RangeDigest) {
        self.records.lock().expect("records").push(Record {
            path: path.to_vec(),
            file_size,
            digest,
            reread: None,
        });
    }

    /// The digests kept so far (taken: the next call gets the ones kept after this one).
    pub fn take_records(&self) -> Vec<Record> {
        std::mem::take(&mut *self.records.lock().expect("records"))
    }
}

/// Give the file behind `written` the current time as its modification time (best effort:
/// the failure that called for it is reported already).
pub(crate) fn mark_unfinished(written: BorrowedFd<'_>) {
    use rustix::fs::{Timespec, Timestamps, UTIME_NOW, UTIME_OMIT};
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_NOW,
        },
    };
    let _ = rustix::fs::futimens(written, &times);
}

/// Give the file behind `written` (the copy of a source that changed while it was read,
/// listed with the modification time `listed`: seconds, nanoseconds) a modification time one
/// second before `listed` (best effort: the failure that called for it is reported already).
/// Not "now": a source still being written carries the time its last write began, which "now"
/// can equal within the clock's tick, and the next sync would take the torn copy for an up to
/// date one. Older than the source, the copy is never taken for up to date, nor for newer.
pub(crate) fn mark_unfinished_before(written: BorrowedFd<'_>, listed: (i64, u32)) {
    use rustix::fs::{Timespec, Timestamps, UTIME_OMIT};
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: listed.0.saturating_sub(1),
            tv_nsec: i64::from(listed.1.min(999_999_999)),
        },
    };
    let _ = rustix::fs::futimens(written, &times);
}

/// Hash all of the file `fd` (of `file_size` bytes) as `kind`, reading it in order.
pub fn hash_file(fd: BorrowedFd<'_>, file_size: u64, kind: HashKind) -> io::Result<[u8; 32]> {
    let mut h = RangeHasher::new(kind, 0, file_size, file_size);
    let mut buf = vec![0u8; (1 << 20).min(file_size.max(1) as usize)];
    let mut pos = 0;
    while pos < file_size {
        let want = ((file_size - pos) as usize).min(buf.len());
        match rustix::io::pread(fd, &mut buf[..want], pos) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "shorter than when it was listed",
                ))
            }
            Ok(n) => {
                h.update(&buf[..n]);
                pos += n as u64;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match h.finish() {
        RangeDigest::Whole(d) => Ok(d),
        RangeDigest::Pieces(_) => unreachable!("a whole range gives a whole digest"),
    }
}

impl Hashing {
    /// Hash the regular files of `list` (source records of files left as they are), opened
    /// with `open`, and keep their digests under their destination paths (`dest`). Returns the
    /// files that could not be read.
    pub fn keep_unchanged(
        &self,
        list: &flist::FileList,
        open: impl Fn(&[u8]) -> io::Result<rustix::fd::OwnedFd> + Sync,
        dest: impl Fn(&[u8]) -> Vec<u8> + Sync,
    ) -> Vec<ItemError> {
        use rayon::prelude::*;
        let Some(kind) = self.manifest else {
            return Vec::new();
        };
        (0..list.len())
            .into_par_iter()
            .filter_map(|i| {
                let e = list.entry(i);
                let size = e.meta.map_or(0, |m| m.size);
                let fd = match open(e.path) {
                    Ok(fd) => fd,
                    Err(err) => return Some(ItemError::new(e.path, "open (to hash)", err)),
                };
                match hash_file(rustix::fd::AsFd::as_fd(&fd), size, kind) {
                    Ok(d) => {
                        self.keep(&dest(e.path), size, RangeDigest::Whole(d));
                        None
                    }
                    Err(err) => Some(ItemError::new(e.path, "read (to hash)", err)),
                }
            })
            .collect()
    }
}
