//! Decompressing one frame of a seekable file, whatever its codec: the one place that knows
//! every codec's frame decoder.

use super::io::{invalid, pread_exact};
use super::kind::Codec;
use super::table::SeekTable;
use rustix::fd::BorrowedFd;
use std::io;

impl SeekTable {
    /// Decompress frame `i` of the file `fd`, verifying its checksums: for zstd the frame's
    /// own (zstd does) and the table's, for gzip and bzip2 their CRCs. An error names the frame
    /// when it is damaged.
    pub fn decompress(&self, fd: BorrowedFd<'_>, i: usize) -> io::Result<Vec<u8>> {
        let f = self.frames[i];
        let mut raw = vec![0u8; f.c_len as usize];
        pread_exact(fd, &mut raw, f.c_at)?;
        let name = match self.codec {
            Codec::Zstd => return self.decompress_zstd(raw, i),
            Codec::Gzip => "gzip member",
            _ => "bzip2 stream",
        };
        let out = match self.codec {
            Codec::Gzip => super::gzip::decompress_member(&raw, f.d_len),
            _ => super::bzip2::decompress_block(&raw, f.d_len as usize),
        };
        out.map_err(|e| invalid(format!("{name} {i} at byte {}: {e}", f.c_at)))
    }
}
