//! The frame codecs: how tar, bz2 and bcast cut a stream into independently compressed frames
//! and find them again without decompressing anything, so that many ranks decompress at once.
//!
//! - [`kind`]: the formats, recognised by their first bytes;
//! - [`table`]: the one shape of a seekable file's frames, whatever the codec;
//! - [`zstd`]: the zstd seekable format (frames, then a skippable frame holding the seek table);
//! - [`gzip`]: gzip members with mfu-rs's extra field, then an end member;
//! - [`dbz2`]: dbz2's bzip2 streams, block table and footer (formats.md §7);
//! - [`bzip2`]: one bzip2 stream per block, and the serial decoder of any bzip2 file;
//! - [`frames`]: decompressing one frame of any of them.
//!
//! Nothing here knows tar: a codec reads and writes frames and tables, and the archive, list
//! and copy code above decides what the bytes mean.

pub mod bzip2;
pub mod dbz2;
pub mod frames;
pub mod gzip;
mod io;
pub mod kind;
pub mod table;
pub mod zstd;
