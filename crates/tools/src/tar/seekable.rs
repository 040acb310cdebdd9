//! The zstd seekable format: the tar stream cut into independent zstd frames, followed by a
//! skippable frame holding a seek table (`{compressed u32 LE, decompressed u32 LE}` per frame,
//! then `{frames u32 LE, descriptor u8, 0x8F92EAB1 u32 LE}`). Any zstd decoder reads the whole
//! stream (`zstd -dc A.tar.zst | tar -x`); mfu-rs finds every frame from the table and
//! decompresses them on many ranks at once.

use rustix::fd::BorrowedFd;
use rustix::io::Errno;
use std::io;

/// First four bytes of every zstd frame (little-endian).
pub const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// Magic of the skippable frame that carries the seek table.
pub const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
/// Last four bytes of a seekable stream.
pub const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
/// Bytes of the seek table's footer.
const FOOTER: u64 = 9;

/// One frame: where its compressed bytes are in the file and which bytes of the decompressed
/// stream it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Offset of the frame in the compressed file (bytes).
    pub c_at: u64,
    /// Compressed length (bytes).
    pub c_len: u32,
    /// Offset of its first byte in the decompressed stream.
    pub d_at: u64,
    /// Decompressed length (bytes).
    pub d_len: u32,
}

/// The frames of a seekable stream, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeekTable {
    /// Frames in stream order.
    pub frames: Vec<Frame>,
}

/// The skippable frame holding the seek table of frames with these `(compressed,
/// decompressed)` lengths (bytes), without checksums.
pub fn encode_table(sizes: &[(u32, u32)]) -> Vec<u8> {
    let table = sizes.len() * 8 + FOOTER as usize;
    let mut out = Vec::with_capacity(8 + table);
    out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    out.extend_from_slice(&(table as u32).to_le_bytes());
    for &(c, d) in sizes {
        out.extend_from_slice(&c.to_le_bytes());
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&(sizes.len() as u32).to_le_bytes());
    out.push(0);
    out.extend_from_slice(&SEEKABLE_MAGIC.to_le_bytes());
    out
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn pread_exact(fd: BorrowedFd<'_>, buf: &mut [u8], mut at: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], at) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                done += n;
                at += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

impl SeekTable {
    /// Read the seek table at the end of the file `fd` of `len` bytes. `Ok(None)` when the file
    /// does not end with a seekable footer; an error when it does but the table is damaged.
    pub fn read(fd: BorrowedFd<'_>, len: u64) -> io::Result<Option<SeekTable>> {
        if len < 8 + FOOTER {
            return Ok(None);
        }
        let mut foot = [0u8; FOOTER as usize];
        pread_exact(fd, &mut foot, len - FOOTER)?;
        if u32::from_le_bytes(foot[5..9].try_into().expect("4 bytes")) != SEEKABLE_MAGIC {
            return Ok(None);
        }
        let frames = u32::from_le_bytes(foot[0..4].try_into().expect("4 bytes")) as u64;
        let entry = if foot[4] & 0x80 != 0 { 12 } else { 8 };
        let table = frames * entry + FOOTER;
        if 8 + table > len {
            return Err(invalid(format!(
                "seek table of {frames} frames is larger than the file"
            )));
        }
        let mut raw = vec![0u8; (8 + table) as usize];
        pread_exact(fd, &mut raw, len - 8 - table)?;
        let magic = u32::from_le_bytes(raw[0..4].try_into().expect("4 bytes"));
        let size = u32::from_le_bytes(raw[4..8].try_into().expect("4 bytes")) as u64;
        if magic != SKIPPABLE_MAGIC || size != table {
            return Err(invalid("seek table: bad skippable frame header".into()));
        }
        let mut out = SeekTable::default();
        let (mut c_at, mut d_at) = (0u64, 0u64);
        for e in raw[8..8 + (frames * entry) as usize].chunks_exact(entry as usize) {
            let c_len = u32::from_le_bytes(e[0..4].try_into().expect("4 bytes"));
            let d_len = u32::from_le_bytes(e[4..8].try_into().expect("4 bytes"));
            out.frames.push(Frame {
                c_at,
                c_len,
                d_at,
                d_len,
            });
            c_at += c_len as u64;
            d_at += d_len as u64;
        }
        if c_at != len - 8 - table {
            return Err(invalid(format!(
                "seek table: frames hold {c_at} bytes, the file has {} before the table",
                len - 8 - table
            )));
        }
        Ok(Some(out))
    }

    /// Bytes of the decompressed stream.
    pub fn decompressed_len(&self) -> u64 {
        self.frames.last().map_or(0, |f| f.d_at + f.d_len as u64)
    }

    /// Index of the frame holding decompressed byte `at` (the last frame if `at` is past the
    /// end).
    pub fn frame_at(&self, at: u64) -> usize {
        self.frames
            .partition_point(|f| f.d_at + f.d_len as u64 <= at)
            .min(self.frames.len().saturating_sub(1))
    }

    /// Decompress frame `i` of the file `fd`.
    pub fn decompress(&self, fd: BorrowedFd<'_>, i: usize) -> io::Result<Vec<u8>> {
        let f = self.frames[i];
        let mut raw = vec![0u8; f.c_len as usize];
        pread_exact(fd, &mut raw, f.c_at)?;
        let out = zstd::bulk::decompress(&raw, f.d_len as usize)
            .map_err(|e| invalid(format!("zstd frame {i} at byte {}: {e}", f.c_at)))?;
        if out.len() != f.d_len as usize {
            return Err(invalid(format!(
                "zstd frame {i} at byte {}: {} bytes, the seek table says {}",
                f.c_at,
                out.len(),
                f.d_len
            )));
        }
        Ok(out)
    }
}

/// Compress `data` as one independent frame (with its content size in the frame header).
/// Each thread keeps its compression context: a new one per frame would allocate and clear
/// megabytes of tables every time.
pub fn compress_frame(data: &[u8], level: i32) -> io::Result<Vec<u8>> {
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with_borrow_mut(|slot| {
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            *slot = Some((level, zstd::bulk::Compressor::new(level)?));
        }
        let (_, c) = slot.as_mut().expect("set above");
        c.compress(data)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fd::AsFd;
    use std::io::{Read, Seek, Write};

    #[test]
    fn frames_and_table_round_trip_and_decode_as_one_stream() {
        let parts: Vec<Vec<u8>> = (0..3u8)
            .map(|i| (0..100_000u32).map(|x| (x % 251) as u8 ^ i).collect())
            .collect();
        let mut file = tempfile::tempfile().unwrap();
        let mut sizes = Vec::new();
        for p in &parts {
            let c = compress_frame(p, 3).unwrap();
            sizes.push((c.len() as u32, p.len() as u32));
            file.write_all(&c).unwrap();
        }
        let table = encode_table(&sizes);
        file.write_all(&table).unwrap();
        let len = file.metadata().unwrap().len();
        let t = SeekTable::read(file.as_fd(), len).unwrap().unwrap();
        assert_eq!(t.frames.len(), 3);
        assert_eq!(t.decompressed_len(), 300_000);
        assert_eq!(t.frame_at(0), 0);
        assert_eq!(t.frame_at(99_999), 0);
        assert_eq!(t.frame_at(100_000), 1);
        assert_eq!(t.frame_at(10_000_000), 2);
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(&t.decompress(file.as_fd(), i).unwrap(), p);
        }
        // A plain zstd decoder reads the frames as one stream and skips the table.
        let mut all = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut all).unwrap();
        assert_eq!(zstd::stream::decode_all(&all[..]).unwrap(), parts.concat());
    }

    #[test]
    fn files_without_a_table_are_not_seekable_and_damaged_tables_are_errors() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&compress_frame(b"hello", 3).unwrap())
            .unwrap();
        let len = file.metadata().unwrap().len();
        assert_eq!(SeekTable::read(file.as_fd(), len).unwrap(), None);
        // A table claiming more compressed bytes than precede it.
        let table = encode_table(&[(1000, 5)]);
        file.write_all(&table).unwrap();
        let len = file.metadata().unwrap().len();
        assert!(SeekTable::read(file.as_fd(), len).is_err());
    }
}
