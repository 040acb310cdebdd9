//! Random access to an archive's tar stream, plain or zstd-seekable, from many threads; and
//! the recognition of archives in one compressed stream, which are read front to back instead
//! ([`crate::tar::archive::serial`]).

pub mod serial;

use crate::engine::codec::gzip;
use crate::engine::codec::kind::{Codec, MAGIC_LEN};
use crate::engine::codec::table::SeekTable;
use crate::engine::codec::zstd;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Decoded frames kept per archive for reads that cross or revisit them.
const CACHED_FRAMES: usize = 8;

/// An opened archive.
pub struct Archive {
    fd: OwnedFd,
    /// Bytes of the file on disk.
    file_len: u64,
    /// The seek table when the archive is zstd-seekable.
    table: Option<SeekTable>,
    /// The archive is one compressed stream that can only be read front to back.
    serial: Option<Codec>,
    /// Why the archive's own index of its frames (seek table, gzip end member, dbz2 table)
    /// was set aside, when it was damaged: the archive is then read front to back.
    set_aside: Option<String>,
    /// What is missing when the file has mfu-rs's layout of frames (`MF` gzip members,
    /// several zstd frames) but not the end that layout always has (the file was cut where
    /// its end member or seek table began): the archive is read front to back and, when its
    /// tar stream has mfu-rs's mark, the run fails naming it.
    unended: Option<String>,
    cache: Mutex<Vec<(usize, Arc<Vec<u8>>)>>,
    /// Frames decompressed by this process (a frame read twice counts twice).
    pub frames_decoded: AtomicU64,
    /// Decompressed bytes produced by this process.
    pub bytes_decoded: AtomicU64,
}

/// The dbz2 `table` of the file `fd` when its first and last streams hold the bytes it says;
/// an `InvalidData` error (the table is set aside) when one holds another number. Nothing in a
/// bzip2 stream says its length, so a flipped bit of the footer's block or original size
/// passes every other check and would fail every frame of a parallel read; decoding the two
/// streams that show it (block size, last block's size) costs two frames at open. A stream
/// that does not decode is left to the parallel read, which names its entries.
fn check_dbz2_sizes(fd: BorrowedFd<'_>, table: SeekTable) -> io::Result<SeekTable> {
    use std::io::Read;
    let last = table.frames.len().saturating_sub(1);
    for i in [0, last] {
        let Some(f) = table.frames.get(i) else {
            break;
        };
        let mut raw = vec![0u8; f.c_len as usize];
        let mut done = 0;
        while done < raw.len() {
            match rustix::io::pread(fd, &mut raw[done..], f.c_at + done as u64) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // One stream only (not the multi-stream reader): its CRCs are checked as it decodes.
        let mut dec = bzip2::read::BzDecoder::new(&raw[..]);
        if let Ok(n) = io::copy(
            &mut (&mut dec).take(u64::from(f.d_len) + 1),
            &mut io::sink(),
        ) {
            if n != u64::from(f.d_len) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "dbz2 table: stream {i} at byte {} holds {} bytes, the table says {}",
                        f.c_at,
                        if n > u64::from(f.d_len) {
                            format!("more than {}", f.d_len)
                        } else {
                            n.to_string()
                        },
                        f.d_len
                    ),
                ));
            }
        }
    }
    Ok(table)
}

impl Archive {
    /// Open `path` for reading and find out whether it is zstd-seekable, or one compressed
    /// stream ([`Archive::serial`]: gzip, bzip2, xz, or zstd without a seek table),
    /// recognised by its first bytes.
    #[cfg(test)]
    pub fn open(path: &[u8]) -> io::Result<Archive> {
        Archive::open_with(path, &flist::noatime::OFF, false)
    }

    /// [`Archive::open`] through `noatime` (`--noatime`); `counted`: this opener counts the
    /// archive when the kernel refuses `O_NOATIME` (one rank of those that open it).
    pub fn open_with(
        path: &[u8],
        noatime: &flist::noatime::NoAtime,
        counted: bool,
    ) -> io::Result<Archive> {
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
        let fd = noatime.open_part(counted, flags, |f| flist::walk::open_long(path, f))?;
        let file_len = rustix::fs::fstat(&fd)?.st_size as u64;
        let mut magic = [0u8; MAGIC_LEN];
        let mut got = 0;
        while got < MAGIC_LEN {
            match rustix::io::pread(&fd, &mut magic[got..], got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let codec = Codec::of_magic(&magic[..got]);
        let mut unended = None;
        let found = match codec {
            None | Some(Codec::Xz) => Ok(None),
            Some(Codec::Zstd) => SeekTable::read(fd.as_fd(), file_len).inspect(|t| {
                if t.is_none() {
                    unended = zstd::unended(fd.as_fd(), file_len);
                }
            }),
            Some(Codec::Gzip) => gzip::read_index(fd.as_fd(), file_len).and_then(|t| {
                // mfu-rs's layout without its end member: cut after a member, or damaged.
                // What the members hold is read front to back (a tar stream cut short is
                // found there).
                match t {
                    None if gzip::starts_with_member(fd.as_fd()) => {
                        match gzip::members_end(fd.as_fd(), file_len) {
                            // The members run to the end of the file, or to a piece of an
                            // end member: cut where the end member began.
                            Some(end) if file_len - end < gzip::END_MEMBER as u64 => {
                                unended = Some(format!(
                                    "the gzip end member is missing (the file ends at byte \
                                     {file_len}, its members at byte {end})"
                                ));
                                Ok(None)
                            }
                            _ => Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "gzip member index: the end member is missing or damaged",
                            )),
                        }
                    }
                    t => Ok(t),
                }
            }),
            Some(Codec::Bzip2) => SeekTable::read_dbz2(fd.as_fd(), file_len)
                .and_then(|t| t.map(|t| check_dbz2_sizes(fd.as_fd(), t)).transpose()),
        };
        // A damaged index of the frames (one flipped bit in a field no decoder reads: a gzip
        // member's MTIME, a seek table's frame size, the dbz2 footer) is set aside and the
        // archive read front to back, as `gzip -dc | tar -x` reads it: every frame is still
        // checked by its own CRC or checksum. Only a failed read is an error.
        let (table, set_aside) = match found {
            Ok(t) => (t, None),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
                ) =>
            {
                (None, Some(e.to_string()))
            }
            Err(e) => return Err(e),
        };
        let serial = codec.filter(|_| table.is_none());
        Ok(Archive {
            fd,
            file_len,
            table,
            serial,
            set_aside,
            unended,
            cache: Mutex::new(Vec::new()),
            frames_decoded: AtomicU64::new(0),
            bytes_decoded: AtomicU64::new(0),
        })
    }

    /// The archive file.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The compression of an archive in one compressed stream, which is read front to back
    /// ([`crate::tar::archive::serial::TarStream`]), not through this type's random access.
    pub fn serial(&self) -> Option<Codec> {
        self.serial
    }

    /// Why the archive's index of its frames was set aside (it is damaged; the archive is
    /// read front to back, [`Archive::serial`]), if it was.
    pub fn set_aside(&self) -> Option<&str> {
        self.set_aside.as_deref()
    }

    /// What is missing at the end of a file of mfu-rs's layout of frames without its end
    /// (cut where its gzip end member or zstd seek table began), if it is: a tar stream with
    /// mfu-rs's mark in it is then truncated ([`crate::tar::archive::serial::TarStream::expecting_end`]).
    pub fn unended(&self) -> Option<&str> {
        self.unended.as_deref()
    }

    /// The archive file for a front-to-back read (a duplicate descriptor: the archive is
    /// otherwise read with positional reads only, so its file position is still 0).
    pub fn reopen(&self) -> io::Result<std::fs::File> {
        Ok(rustix::io::dup(&self.fd)?.into())
    }

    /// The seek table of a compressed archive.
    pub fn table(&self) -> Option<&SeekTable> {
        self.table.as_ref()
    }

    /// Bytes of the (decompressed) tar stream.
    pub fn len(&self) -> u64 {
        self.table
            .as_ref()
            .map_or(self.file_len, SeekTable::decompressed_len)
    }

    /// Decompressed frame `i` (from the cache when recently used).
    pub fn frame(&self, i: usize) -> io::Result<Arc<Vec<u8>>> {
        if let Some((_, f)) = self.cache.lock().expect("cache").iter().find(|c| c.0 == i) {
            return Ok(f.clone());
        }
        let table = self.table.as_ref().expect("frames of a compressed archive");
        let data = Arc::new(table.decompress(self.fd(), i)?);
        self.frames_decoded.fetch_add(1, Ordering::Relaxed);
        self.bytes_decoded
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let mut cache = self.cache.lock().expect("cache");
        if cache.len() == CACHED_FRAMES {
            cache.remove(0);
        }
        cache.push((i, data.clone()));
        Ok(data)
    }

    /// [`Archive::read_at`] into the front of `buf`, which is grown (zero-filled, once) when
    /// shorter than `len` and otherwise reused: a caller reading window after window keeps one
    /// buffer, instead of the kernel handing it fresh zeroed pages for every window (`perf`:
    /// 14,000 page faults and most of the chain walk's system time on a 120 MB archive of
    /// small files). Returns the bytes read, `buf[..n]`: fewer than `len` only at the end.
    pub fn read_into(&self, at: u64, len: usize, buf: &mut Vec<u8>) -> io::Result<usize> {
        let want = (at + len as u64).min(self.len()).saturating_sub(at) as usize;
        if buf.len() < want {
            buf.resize(want, 0);
        }
        if self.table.is_some() {
            let bytes = self.read_at(at, want)?;
            buf[..bytes.len()].copy_from_slice(&bytes);
            return Ok(bytes.len());
        }
        let mut done = 0;
        while done < want {
            match rustix::io::pread(&self.fd, &mut buf[done..want], at + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(done)
    }

    /// Up to `len` bytes of the tar stream at `at` (fewer at its end).
    pub fn read_at(&self, at: u64, len: usize) -> io::Result<Vec<u8>> {
        let end = (at + len as u64).min(self.len());
        let mut out = Vec::with_capacity(end.saturating_sub(at) as usize);
        match &self.table {
            None => {
                // Read into the vector's spare capacity: no zero-fill of bytes about to be
                // read over (callgrind: a third of tar -x's user instructions on small files
                // went to zeroing the windows of the header walk and decode).
                let want = end.saturating_sub(at) as usize;
                while out.len() < want {
                    let done = out.len();
                    let spare = rustix::buffer::spare_capacity(&mut out);
                    match rustix::io::pread(&self.fd, spare, at + done as u64) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(Errno::INTR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                out.truncate(want);
            }
            Some(table) => {
                let mut pos = at;
                while pos < end {
                    let i = table.frame_at(pos);
                    let f = table.frames[i];
                    let data = self.frame(i)?;
                    let from = (pos - f.d_at) as usize;
                    let to = ((end - f.d_at) as usize).min(data.len());
                    out.extend_from_slice(&data[from..to]);
                    pos = f.d_at + to as u64;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::codec::zstd::tests::{mutate, seekable};
    use crate::engine::codec::zstd::{encode_table, encode_table_without_checksums, FrameSizes};
    use crate::engine::test_rng::Rng;
    use rustix::fd::AsFd;
    use std::io::{Seek, Write};

    /// The net for the seek table reader and the frame reader: mutated seekable files never
    /// panic or hang, never allocate beyond what the file could hold, and never decode to
    /// bytes other than the original's. Seeded (MFU_FUZZ_SEED to replay), bounded in time.
    #[test]
    fn fuzz_mutated_seekable_files_never_panic_or_decode_wrong_bytes() {
        let seed = std::env::var("MFU_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            })
            | 1;
        let mut rng = Rng::seeded(seed);
        // Frames of noise (raw blocks), text, and a repeated byte (RLE), with and without
        // checksums in the table.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let text: Vec<u8> = (0..30_000u32)
            .map(|i| b"tar header "[i as usize % 11])
            .collect();
        let parts = vec![noise, text, vec![7u8; 50_000], b"end".to_vec()];
        let stream = parts.concat();
        // Other tools' layout: frames without their own checksum, checksums in the table.
        let mut foreign = Vec::new();
        let mut sizes = Vec::new();
        for p in &parts {
            let c = ::zstd::bulk::compress(p, 3).unwrap();
            sizes.push(FrameSizes {
                compressed: c.len() as u32,
                decompressed: p.len() as u32,
                checksum: xxhash_rust::xxh64::xxh64(p, 0) as u32,
            });
            foreign.extend_from_slice(&c);
        }
        foreign.extend_from_slice(&encode_table(&sizes));
        let originals = [
            seekable(&parts, encode_table),
            seekable(&parts, encode_table_without_checksums),
            foreign,
        ];
        let started = std::time::Instant::now();
        let mut named = tempfile::NamedTempFile::new().unwrap();
        let mut iterations = 0u64;
        let (mut refused, mut decoded) = (0u64, 0u64);
        // At least 500 iterations whatever the load, then up to the time budget.
        while iterations < 500
            || (iterations < 20_000 && started.elapsed() < std::time::Duration::from_secs(3))
        {
            iterations += 1;
            let original = &originals[rng.below(originals.len())];
            let table_at = original.len() - 8 - 9 - 12 * parts.len();
            let mut bytes = original.clone();
            for _ in 0..1 + rng.below(2) {
                if bytes.len() > table_at + 8 {
                    let at = table_at.min(bytes.len() - 9);
                    mutate(&mut rng, &mut bytes, at);
                }
            }
            let file = named.as_file_mut();
            file.set_len(0).unwrap();
            file.rewind().unwrap();
            file.write_all(&bytes).unwrap();
            let ctx = format!("seed {seed}, iteration {iterations}");
            let table = match SeekTable::read(file.as_fd(), bytes.len() as u64) {
                Ok(Some(t)) => t,
                Ok(None) | Err(_) => {
                    refused += 1;
                    continue;
                }
            };
            // The archive reader over the same file: any range it returns is the original's.
            let path = named.path().as_os_str().as_encoded_bytes();
            // (A file whose first frame lost its zstd magic opens as a plain tar.)
            if let Some(archive) = Archive::open(path).ok().filter(|a| a.table().is_some()) {
                let at = rng.below(stream.len() + 10) as u64;
                let len = rng.below(80_000);
                if let Ok(got) = archive.read_at(at, len) {
                    let end = (at as usize + got.len()).min(stream.len());
                    assert!(
                        Some(&got[..]) == stream.get((at as usize).min(end)..end),
                        "{ctx}: read_at({at}, {len}) returned {} bytes other than the \
                         original's; table {:?}",
                        got.len(),
                        archive.table()
                    );
                }
            }
            let file = named.as_file();
            for i in 0..table.frames.len() {
                let f = table.frames[i];
                if let Ok(out) = table.decompress(file.as_fd(), i) {
                    decoded += 1;
                    let want = stream.get(f.d_at as usize..(f.d_at + f.d_len as u64) as usize);
                    assert!(
                        Some(&out[..]) == want,
                        "{ctx}: frame {i} decoded to {} bytes other than the original's",
                        out.len()
                    );
                }
            }
        }
        assert!(
            iterations >= 500,
            "seed {seed}: only {iterations} iterations ({refused} refused, {decoded} frames \
             decoded right)"
        );
    }
}
