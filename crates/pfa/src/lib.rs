//! `pfa` — parallel file aggregation (PFA) for mfu-rs: many named logical streams per rank in
//! one shared, stripe-aligned file (an *aggregate*), written without locks or a shared file
//! pointer, read back by name from any rank count, and stored again incrementally as new
//! versions (checkpoints) that keep only the chunks whose content changed.
//!
//! ```
//! use std::io::Read;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("run.pfa");
//! let options = pfa::Options { chunk_size: Some(64 << 10), ..Default::default() };
//! // Two thread ranks (`steal::launch` runs the same closure on MPI ranks), each writing its
//! // own streams into one aggregate.
//! steal::local::run(2, |comm| {
//!     let mut agg = pfa::Aggregate::create(comm, &path, &options).unwrap();
//!     let name = format!("rank{}/out", comm.rank());
//!     let mut w = agg.stream(name.as_bytes(), b"meta").unwrap();
//!     w.append(b"hello ").unwrap();
//!     // The buffer API: fill a buffer, then commit what was filled.
//!     let buf = w.buffer(5);
//!     buf.copy_from_slice(b"world");
//!     w.commit(5).unwrap();
//!     w.finish().unwrap();
//!     agg.close().unwrap()
//! });
//! // Read with any number of ranks (here: this one process).
//! let index = pfa::Index::open(&path).unwrap();
//! let mut text = String::new();
//! index.open_stream(b"rank1/out", index.latest()).unwrap().read_to_string(&mut text).unwrap();
//! assert_eq!(text, "hello world");
//! ```
//!
//! # Writing
//!
//! [`Aggregate::create`] (collective) makes a new aggregate under a temporary name beside the
//! final one ([`flist::atomic::Output`]); [`Aggregate::close`] (collective) writes the footer
//! and trailer, syncs and renames it into place, so a run cut before then never leaves a
//! complete-looking file. [`Aggregate::new_version`] (collective) appends the next version of
//! an existing aggregate in place, after its last complete trailer, never rewriting an earlier
//! byte. Each rank opens any number of named streams ([`Aggregate::stream`], one at a time per
//! rank) and fills them with [`Writer::append`] or the buffer API ([`Writer::buffer`] then
//! [`Writer::commit`]).
//!
//! Each rank gathers its streams' bytes into chunk buffers of the aggregate's chunk size
//! ([`Options::chunk_size`]; the policy is [`chunk_size_policy`]) and writes each full buffer
//! at an offset that rank alone owns: its `i`-th chunk goes to
//! `region_offset + (i * ranks + rank) * chunk_size`. No locks, no shared file pointer, every
//! write stripe aligned; with [`Options::direct_io`] the writes bypass the page cache
//! (`O_DIRECT`, falling back to buffered writes where the file system refuses it, and saying so
//! in [`Written::direct_io_fallback`]). With buffered writes, a run of 64 KiB or more of an
//! append goes from the caller's memory to its place in the slot (one copy, the kernel's);
//! smaller runs are gathered in the chunk buffer first, so that many small streams cost one
//! write a chunk.
//!
//! Chunks are written with `pwrite`, not through a shared mapping of the file (the seed's
//! `pfa_mmap`): measured on tmpfs and ext4, a rank filling a `MAP_SHARED` mapping of its
//! slots (after `fallocate` of them, which a full file system needs to fail there rather than
//! with `SIGBUS` at a page fault) wrote at about half of `pwrite`'s rate on tmpfs and a third
//! on ext4 (each page is zeroed at its fault, then filled; see the README's PFA bench).
//!
//! # Reading
//!
//! [`Index::open`] (one process, any rank count) checks the header, every version's trailer
//! and the latest version's footer (an earlier version's footer when that version is first
//! used), and [`Index::open_stream`] gives a [`Reader`] (`Read + Seek`, [`Reader::eof`]) of one
//! stream of one version. Each chunk's checksum is verified when it is read.
//!
//! # Format (format version 2; version 1 is read and appended to as well)
//!
//! All integers little-endian. `C` is the aggregate's chunk size (bytes, a multiple of 4096,
//! fixed for the whole file by the header).
//!
//! ```text
//! offset 0        header (48 bytes, zero padded to C)
//! C               region of version 1: chunk slots, rank r's i-th chunk at (i*ranks + r)*C
//! ...             footer of version 1, then trailer of version 1 (144 bytes)
//! align_up(end,C) region of version 2, footer of version 2, trailer of version 2
//! ...             (each version appended after the previous trailer; the file ends with the
//!                  trailer of the latest version)
//! ```
//!
//! **Header** (offset 0): `magic "MFU-PFA\n"` (8) · `format u32` (2; 1 in files of format 1)
//! · `flags u32 = 0` ·
//! `chunk_size u64` · `ranks u32` (of the first writer; informational) · `reserved u32` ·
//! `check [16]` (the first 16 bytes of BLAKE3 of bytes 0..32).
//!
//! **Region** of a version: `rows * ranks * C` bytes at a multiple of `C` (`rows`: the most
//! chunks any rank wrote). A rank's last chunk is written padded with zeros to a multiple of
//! 4096; slots a rank did not fill are holes. A stream's bytes are cut into *pieces* of `C`
//! bytes at logical offsets `0, C, 2C, ...` (the last shorter); a piece is stored in one or two
//! *extents* (two when it runs over the end of the rank's chunk buffer into its next one).
//!
//! **Footer** (at `region_offset + region_len`): `magic "PFAFOOTR"` (8) · `version u64`
//! (1, 2, ...) · `prev_end u64` (file length after the previous version's trailer; 0 for
//! version 1) · `region_offset u64` · `region_len u64` · `ranks u32` · `reserved u32` ·
//! `logical_bytes u64` (sum of the stream sizes) · `bytes_written u64` (piece bytes this
//! version wrote) · `chunks_written u64` · `chunks_reused u64` (pieces referenced from an
//! earlier version) · `stream_count u64`, then the streams sorted by name (bytewise, names
//! unique): `name_len u32` · name · `meta_len u32` · meta · `size u64` (bytes) · `rank u32`
//! (writer) · `piece_count u64`, then each piece: `logical_offset u64` · `len u64` ·
//! `checksum [32]` (see *Checksums*) · `extent_count u8` (1 or 2) · per extent
//! `file_offset u64` · `len u64`. A version's footer lists every piece of every stream of that
//! version, including those referenced from earlier versions: each version reads on its own.
//!
//! **Trailer** (the last 144 bytes of the file): `magic "PFATRAIL"` (8) · `format u32` (the
//! header's) ·
//! `ranks u32` · `version u64` · `footer_offset u64` · `footer_len u64` ·
//! `footer_checksum [32]` (BLAKE3 of the footer) · `prev_end u64` · the version's figures,
//! repeated from its footer so that listing versions reads no footer: `streams u64` ·
//! `logical_bytes u64` · `bytes_written u64` · `chunks_written u64` · `chunks_reused u64` ·
//! `check [16]` (the first 16 bytes of BLAKE3 of trailer bytes 0..120) · `end magic
//! "LIARTAFP"` (8). The footer ends where the trailer begins. The trailers form a chain back to
//! version 1 through `prev_end` (the previous trailer ends there).
//!
//! # Checksums
//!
//! The header, footers and trailers: BLAKE3 (as above). A piece's `checksum`, by the file's
//! format version (the header's; a new version of an existing file keeps it):
//!
//! - **format 2** (what [`Aggregate::create`] writes): XXH3-128 of the piece's bytes
//!   (little-endian, 16 bytes) then 16 zero bytes. It finds damage; it is no digest (two
//!   pieces with one XXH3 are easily made), so an incremental store that finds a piece of the
//!   previous version at the same logical offset of the same stream with the same length and
//!   checksum reads that piece back and compares the bytes before it references it: an old
//!   chunk is never kept for new bytes that differ from it.
//! - **format 1**: BLAKE3 of the piece's bytes, also its digest: a piece whose length and
//!   digest equal the previous version's is referenced without reading it (256 bits of a
//!   cryptographic hash: a collision happens neither by accident nor by design).
//!
//! Why format 2: BLAKE3 was the main CPU cost of a PFA write beyond a plain write's (about a
//! fifth of the samples of the records bench on tmpfs, hashed again on read); XXH3-128 hashes
//! at about 15 GB/s a core on the build machine against BLAKE3's 2-3 GB/s. The price is paid
//! only by incremental stores: reading back each unchanged piece of the previous version
//! (from the page cache, mostly, right after it was written).
//!
//! # Safety of the data
//!
//! - A new aggregate exists only under a temporary name until [`Aggregate::close`] renames it:
//!   a cut run leaves no file under the final name (and replaces nothing there unless
//!   [`Options::overwrite`]).
//! - [`Aggregate::new_version`] opens the existing file without following a symbolic link
//!   (`O_NOFOLLOW`), refuses one with more than one hard link (appending would change the other
//!   names' content too) or whose last bytes are not a complete trailer, and only appends
//!   after the last trailer. A version that fails before its trailer is written (an error on
//!   any rank, or the aggregate dropped unclosed) is cut off again by rank 0 (truncated back
//!   to the previous trailer), so the file stays readable as it was.
//! - **A version cut mid-write** (a crash, a node lost) leaves bytes after the last complete
//!   trailer: the file's last bytes are no trailer, and [`Index::open`] and
//!   [`Aggregate::new_version`] refuse it ([`Error::Cut`]) rather than guess. [`recover`]
//!   (explicit) finds the last complete, checksum-valid trailer and truncates the incomplete
//!   tail after it; every earlier version then reads again. Recovery is never automatic: a file
//!   whose trailer was damaged (not cut) would otherwise silently lose its latest version.
//! - A reader refuses a file whose last bytes are not a valid trailer, and any checksum
//!   mismatch (header, trailer, footer, piece), with an error naming the path and what is wrong.

#![warn(missing_docs)]

mod direct;
pub mod error;
mod format;
mod options;
mod read;
mod recover;
mod write;

pub use error::{Error, Result};
pub use format::{FIRST_FORMAT, FORMAT, HEADER_LEN, TRAILER_LEN};
pub use options::{chunk_size_policy, Options, DEFAULT_CHUNK_SIZE, MIN_POLICY_CHUNK};
pub use read::{Index, Reader, StreamInfo, VersionInfo};
pub use recover::{recover, Recovered};
pub use write::{Aggregate, Writer, Written};
