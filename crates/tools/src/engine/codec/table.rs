//! The frames of a seekable compressed file (zstd frames, gzip members, dbz2 bzip2 streams):
//! where each is in the file and which bytes of the decompressed stream it holds. Each codec
//! reads its own table into this one shape; [`super::frames`] decompresses a frame of any.

use super::kind::Codec;

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
    /// The low 32 bits of the XXH64 of its decompressed bytes, when the table has checksums.
    pub checksum: Option<u32>,
}

/// The frames of a seekable stream, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeekTable {
    /// Frames in stream order.
    pub frames: Vec<Frame>,
    /// What each frame is: a zstd frame, a gzip member (`super::gzip`) or a bzip2 stream
    /// (a dbz2 block, formats.md §7).
    pub codec: Codec,
}

/// One frame as the seek table records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSizes {
    /// Compressed length (bytes).
    pub compressed: u32,
    /// Decompressed length (bytes).
    pub decompressed: u32,
    /// The low 32 bits of the XXH64 of the decompressed bytes ([`super::zstd::frame_checksum`]).
    pub checksum: u32,
}

impl SeekTable {
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
}
