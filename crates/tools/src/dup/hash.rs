//! Reading a file's bytes into blake3: its first [`PREFIX_BYTES`] (the cheap pass that splits
//! most same-size groups) or all of it.

use super::inode::Hash;
use super::unchanged::difference;
use flist::noatime::NoAtime;
use flist::walk::open_long;
use flist::Meta;
use rustix::fd::AsFd;
use rustix::fs::OFlags;
use std::cell::RefCell;
use std::fs::File;
use std::io::{self, Read};

/// Bytes of the prefix pass. A file of at most this size is read whole by it, so its prefix
/// hash is its full hash and it needs no second pass.
pub const PREFIX_BYTES: u64 = 64 << 10;

/// Bytes per `read` call.
const READ_BYTES: usize = 1 << 20;

thread_local! {
    /// One read buffer per worker thread, reused for every file it hashes.
    static BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_BYTES]);
}

/// Why a file could not be hashed: the operation (`open`, `read`) and the reason.
#[derive(Debug)]
pub struct HashError {
    /// What was being done.
    pub op: &'static str,
    /// The system's reason, or what changed.
    pub source: io::Error,
}

/// blake3 of the first `limit` bytes of the file at `path`, which was listed with `listed`
/// (size, times, inode). A file that differs from its listing when opened or after it was read
/// (`fstat` of the same descriptor), or that gives fewer or more bytes than `min(size, limit)`,
/// changed since it was listed: an error (operation `check`, or `read`), because a hash of
/// other bytes would pair the wrong files. Opened through `noatime` (`--noatime`); `first`:
/// this is the file's first read of the run, the one that counts it when the kernel refuses
/// `O_NOATIME`.
pub fn hash_file(
    path: &[u8],
    listed: &Meta,
    limit: u64,
    noatime: &NoAtime,
    first: bool,
) -> Result<Hash, HashError> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC;
    let file = noatime
        .open_part(first, flags, |f| open_long(path, f))
        .map_err(|e| HashError {
            op: "open",
            source: e.into(),
        })?;
    check_unchanged(&file, listed, "before reading")?;
    let mut file = File::from(file);
    let size = listed.size;
    let want = size.min(limit);
    let mut hasher = blake3::Hasher::new();
    let read = BUFFER.with(|b| -> io::Result<u64> {
        let mut buf = b.borrow_mut();
        let mut done = 0u64;
        // One byte beyond `want` (when the whole file is wanted) tells a grown file.
        let end = if want == size { want + 1 } else { want };
        while done < end {
            let n = (end - done).min(buf.len() as u64) as usize;
            let got = match file.read(&mut buf[..n]) {
                Ok(0) => break,
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            hasher.update(&buf[..got]);
            done += got as u64;
        }
        Ok(done)
    });
    match read {
        Ok(n) if n == want => {
            check_unchanged(file.as_fd(), listed, "while being read")?;
            Ok(*hasher.finalize().as_bytes())
        }
        Ok(n) => Err(HashError {
            op: "read",
            source: io::Error::other(format!(
                "size changed since it was listed ({size} bytes listed, {} read)",
                if n > want {
                    format!("more than {want}")
                } else {
                    n.to_string()
                }
            )),
        }),
        Err(e) => Err(HashError {
            op: "read",
            source: e,
        }),
    }
}

/// `Err` (operation `check`) when the open file `fd` no longer matches its listing `listed`.
fn check_unchanged(fd: impl AsFd, listed: &Meta, when: &str) -> Result<(), HashError> {
    let now = rustix::fs::fstat(fd).map_err(|e| HashError {
        op: "stat",
        source: e.into(),
    })?;
    match difference(listed, &Meta::from_stat(&now)) {
        None => Ok(()),
        Some(why) => Err(HashError {
            op: "check",
            source: io::Error::other(format!("{why} since it was listed ({when})")),
        }),
    }
}

/// Lower-case hex of a hash, as printed.
pub fn hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::walk::stat_path;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn prefix_and_full_hashes_are_blake3_of_those_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let path = p.as_os_str().as_bytes();
        let listed = listing(path);
        let full = hash_file(path, &listed, u64::MAX, &NoAtime::new(true), true).unwrap();
        assert_eq!(&full, blake3::hash(&data).as_bytes());
        let prefix = hash_file(path, &listed, PREFIX_BYTES, &flist::noatime::OFF, true).unwrap();
        assert_eq!(
            &prefix,
            blake3::hash(&data[..PREFIX_BYTES as usize]).as_bytes()
        );
        assert_eq!(hex(&full), blake3::hash(&data).to_hex().as_str());
    }

    #[test]
    fn a_changed_size_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"12345").unwrap();
        let path = p.as_os_str().as_bytes();
        let listed = listing(path);
        let sized = |size| Meta { size, ..listed };
        assert!(hash_file(path, &sized(4), u64::MAX, &flist::noatime::OFF, true).is_err());
        assert!(hash_file(path, &sized(6), u64::MAX, &flist::noatime::OFF, true).is_err());
        // A prefix shorter than the file is fine.
        assert!(hash_file(path, &listed, 3, &flist::noatime::OFF, true).is_ok());
        let e = hash_file(b"/nonexistent/x", &listed, 3, &flist::noatime::OFF, true).unwrap_err();
        assert_eq!(e.op, "open");
    }

    #[test]
    fn a_file_rewritten_since_its_listing_is_an_error_even_at_the_same_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"12345").unwrap();
        let path = p.as_os_str().as_bytes();
        let listed = listing(path);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&p, b"54321").unwrap();
        let e = hash_file(path, &listed, u64::MAX, &flist::noatime::OFF, true).unwrap_err();
        assert_eq!(e.op, "check");
        assert!(e.source.to_string().contains("modified"), "{}", e.source);
    }

    /// The metadata a listing of `path` holds now.
    fn listing(path: &[u8]) -> Meta {
        Meta::from_stat(&stat_path(path, false).unwrap())
    }
}
