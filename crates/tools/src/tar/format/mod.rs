//! Tar headers, encoded and decoded: POSIX ustar blocks, pax extended headers (`x`, `g`), GNU
//! long names (`L`, `K`), base-256 numbers, GNU sparse files. Pure byte functions; no I/O
//! beyond the `read` callback of [`decode_entry`].
//!
//! The block layout, the type flags, octal and base-256 numbers of the values it holds, the
//! ustar path and prefix, link and owner names come from the `tar` crate's [`tar::Header`]
//! (with its [`tar::UstarHeader`] and [`tar::GnuHeader`] views). What the crate lacks is kept
//! here, each module saying why at its top: `number` (GNU's leniency and strictness in
//! reading numbers, negative times, GNU tar's checksum bytes), `pax` (records whose values
//! hold newlines, GNU sparse records), `globals` (pax global headers carried between ranks),
//! `sparse` (old GNU and pax 0.0/0.1/1.0 sparse maps), `encode` (the length planned
//! before writing, GNU tar's pax header names) and `decode` (decoding at a known offset
//! through a read callback).

pub use crate::engine::copy::projid::ProjectId;
use std::io;

mod decode;
mod encode;
mod globals;
mod number;
mod pax;
mod sparse;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_decode;
#[cfg(test)]
mod tests_fields;

pub use decode::{
    classify, decode_entry, decode_entry_in, flag_has_data, flags_global, mfu_marked,
};
pub use encode::MARK_HEAD;
#[cfg(test)]
pub use encode::MFU_MARK;
pub use globals::{decode_list, encode_list, global_records, Global, Globals};
pub use pax::parse_pax;
#[cfg(test)]
pub use pax::pax_size;

/// Bytes in one tar block.
pub const BLOCK: u64 = 512;

/// Block size as a `usize` (bytes).
const BLOCK_USIZE: usize = BLOCK as usize;

/// Largest extension header (pax `x`/`g`, GNU `L`/`K`) data [`decode_entry`] accepts, in
/// bytes; a larger size field is taken as corruption rather than read into memory.
const MAX_EXTENSION_SIZE: u64 = 64 << 20;

/// The pax record of a project ID (decimal), mfu-rs's own: no tar we know of stores project
/// IDs (GNU tar, bsdtar and star have no keyword for them), and pax readers ignore keywords
/// they don't know.
pub const PROJID_KEY: &[u8] = b"MFURS.projid";
/// The pax record (`1`) of a directory's `PROJINHERIT` flag, written with [`PROJID_KEY`].
pub const PROJINHERIT_KEY: &[u8] = b"MFURS.projinherit";

/// `n` rounded up to a whole number of blocks (bytes).
pub fn round_up(n: u64) -> u64 {
    n.div_ceil(BLOCK) * BLOCK
}

/// What an entry is (the ustar type flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `0`, NUL or `7` (contiguous file).
    File,
    /// `1`: a hard link to the entry named by `link`.
    HardLink,
    /// `2`: a symbolic link to `link`.
    Symlink,
    /// `3`.
    Char,
    /// `4`.
    Block,
    /// `5`.
    Dir,
    /// `6`.
    Fifo,
    /// Any other type flag (GNU multivolume `M`, volume label `V`, ...), kept as the raw
    /// byte. (GNU sparse `S` entries decode as [`Kind::File`] with a sparse map.)
    Other(u8),
}

impl Kind {
    /// The ustar type flag of a kind (the crate's [`tar::EntryType`] byte).
    fn flag(self) -> u8 {
        let t = match self {
            Kind::File => tar::EntryType::Regular,
            Kind::HardLink => tar::EntryType::Link,
            Kind::Symlink => tar::EntryType::Symlink,
            Kind::Char => tar::EntryType::Char,
            Kind::Block => tar::EntryType::Block,
            Kind::Dir => tar::EntryType::Directory,
            Kind::Fifo => tar::EntryType::Fifo,
            Kind::Other(b) => return b,
        };
        t.as_byte()
    }
}

/// One archive entry's header, as encoded or decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Path as stored, without a trailing `/` (bytes, any value but NUL).
    pub path: Vec<u8>,
    /// Entry type.
    pub kind: Kind,
    /// Permission bits and set-id/sticky bits (`0o7777`), no type bits.
    pub mode: u32,
    /// Owner's numeric id.
    pub uid: u64,
    /// Group's numeric id.
    pub gid: u64,
    /// Owner's name (empty if unknown).
    pub uname: Vec<u8>,
    /// Group's name (empty if unknown).
    pub gname: Vec<u8>,
    /// Data bytes that follow the header (0 for everything but files).
    pub size: u64,
    /// Modification time, seconds since the epoch (may be negative).
    pub mtime: i64,
    /// Nanoseconds of `mtime`.
    pub mtime_nsec: u32,
    /// Symlink target or hard-link target path (empty otherwise).
    pub link: Vec<u8>,
    /// Device numbers of character and block devices.
    pub dev_major: u32,
    /// See `dev_major`.
    pub dev_minor: u32,
    /// Extended attributes (name, value), stored as pax `SCHILY.xattr.NAME` records.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Project ID and a directory's `PROJINHERIT` flag, stored as pax `MFURS.projid` and
    /// `MFURS.projinherit` records when not zero (other tars ignore them).
    pub projid: ProjectId,
}

impl Header {
    /// True when data blocks follow this entry's header in an archive (see [`flag_has_data`]).
    pub fn has_data(&self) -> bool {
        flag_has_data(self.kind.flag())
    }
}

/// Why a header could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// The header block's checksum does not match its bytes.
    #[error("corrupt tar header at byte {offset}: checksum mismatch")]
    Checksum {
        /// Byte offset of the block in the archive stream.
        offset: u64,
    },
    /// A field could not be parsed (bad octal, bad pax record...).
    #[error("corrupt tar header at byte {offset}: {what}")]
    Invalid {
        /// Byte offset of the block.
        offset: u64,
        /// What was wrong.
        what: String,
    },
    /// The archive ends inside a header or its extension data.
    #[error("truncated archive: it ends inside the header at byte {offset}")]
    Truncated {
        /// Byte offset of the header.
        offset: u64,
    },
    /// Reading failed.
    #[error("read at byte {offset}: {source}")]
    Io {
        /// Byte offset read.
        offset: u64,
        /// The reason.
        source: io::Error,
    },
}

/// One decoded entry and where it sits in the archive stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The entry's header with every extension (pax, GNU long names) applied.
    pub header: Header,
    /// Offset of the entry's first header block (its pax or GNU extension header, if any).
    pub start: u64,
    /// Offset of the entry's data (just after its ustar header block).
    pub data: u64,
    /// Offset of the next entry's first header block.
    pub next: u64,
    /// For a GNU sparse file (old GNU `S` entries, pax `GNU.sparse.*` 0.0, 0.1 and 1.0): the
    /// stretches of the file that hold data, in file order, stored one after another from
    /// `data`; `header.size` is then the file's real size (the rest are holes). `None` for
    /// every other entry, whose `header.size` data bytes are stored at `data`.
    pub sparse: Option<Vec<Segment>>,
}

/// One stretch of a sparse file's data: `len` bytes at byte `at` of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Offset in the file (bytes).
    pub at: u64,
    /// Length (bytes).
    pub len: u64,
}

impl Decoded {
    /// Bytes of the entry's data stored in the archive from `data` (for a sparse file, the sum
    /// of its segments, not its real size).
    pub fn stored_len(&self) -> u64 {
        match &self.sparse {
            Some(map) => map.iter().map(|s| s.len).sum(),
            None if self.header.has_data() => self.header.size,
            None => 0,
        }
    }
}

/// What a single 512-byte block holds, checked but not interpreted further (for scanning an
/// archive for header candidates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// All zeros (end-of-archive marker when two follow each other).
    Zero,
    /// A header with a valid checksum: its type flag and the size field's value.
    Header {
        /// The type flag byte (`b'0'`, `b'x'`, `b'L'`...).
        flag: u8,
        /// The size field (octal or base-256).
        size: u64,
    },
    /// Anything else.
    NotHeader,
}

/// A block as the crate's header type (its fields by name instead of by offset).
fn view(block: &[u8]) -> &tar::Header {
    tar::Header::from_byte_slice(&block[..BLOCK_USIZE])
}
