//! The units of archive writing: runs of entries (headers and the data of small files), windows
//! of runs, groups, and chunks of big files. They travel between ranks as work items (serde:
//! a header goes as its encoded bytes).

use crate::tar::format::{round_up, Header};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An entry's header blocks.
#[derive(Clone)]
pub(super) enum HeaderBytes {
    /// Encoded when its segment is written, straight into the segment's buffer: keeping the
    /// header instead of its bytes takes a fraction of the memory (the bytes of a file with a
    /// sub-second mtime are 1536: a pax header for the time), and fresh memory costs a page
    /// fault per 4 KiB.
    Lazy { header: Box<Header>, len: usize },
    /// Already encoded (received from another rank).
    Encoded(Vec<u8>),
}

impl HeaderBytes {
    /// Bytes of the encoded header.
    pub(super) fn len(&self) -> usize {
        match self {
            HeaderBytes::Lazy { len, .. } => *len,
            HeaderBytes::Encoded(b) => b.len(),
        }
    }

    /// Encode the header now with mfu-rs's mark ([`Header::encode_marked`]): the first
    /// entry of an archive carries it. Bytes already encoded are left as they are.
    pub(super) fn mark(&mut self) {
        if let HeaderBytes::Lazy { header, .. } = self {
            let mut bytes = Vec::with_capacity(2048);
            header.encode_marked(&mut bytes);
            *self = HeaderBytes::Encoded(bytes);
        }
    }

    /// Append the encoded header to `out`.
    pub(super) fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            HeaderBytes::Lazy { header, len } => {
                let n = header.encode(out);
                // Encoding is deterministic: the layout counted these bytes already.
                assert_eq!(n, *len, "a header encoded to another length than measured");
            }
            HeaderBytes::Encoded(b) => out.extend_from_slice(b),
        }
    }
}

/// A header travels as its encoded bytes, and arrives [`HeaderBytes::Encoded`].
impl Serialize for HeaderBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            HeaderBytes::Encoded(b) => s.serialize_bytes(b),
            HeaderBytes::Lazy { .. } => {
                let mut bytes = Vec::with_capacity(self.len());
                self.write_to(&mut bytes);
                s.serialize_bytes(&bytes)
            }
        }
    }
}

impl<'de> Deserialize<'de> for HeaderBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_bytes::ByteBuf::deserialize(d).map(|b| HeaderBytes::Encoded(b.into_vec()))
    }
}

/// What the walk saw of a file's times: a file whose times differ after a read changed while it
/// was read (a rewrite keeps the size, and may set the mtime back; the ctime it cannot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Stamp {
    /// Modification time (s, ns).
    pub(super) mtime: (i64, u32),
    /// Status change time (s, ns).
    pub(super) ctime: (i64, u32),
}

/// One entry of a segment: its encoded header and, for files, where its data comes from.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct Member {
    pub(super) header: HeaderBytes,
    /// Source path (empty for entries without data).
    #[serde(with = "serde_bytes")]
    pub(super) src: Vec<u8>,
    /// Data bytes as walked.
    pub(super) size: u64,
    /// The walked times, to notice files modified while archived.
    pub(super) stamp: Stamp,
    /// The data travels with the header (small files); otherwise chunks carry it.
    pub(super) inline: bool,
}

impl Member {
    /// Archive bytes of this entry within its run (header, and inline data padded).
    pub(super) fn len(&self) -> u64 {
        self.header.len() as u64 + if self.inline { round_up(self.size) } else { 0 }
    }
}

/// A unit of archive writing.
#[derive(Clone, Serialize, Deserialize)]
pub(super) enum Segment {
    /// Consecutive entries starting at archive offset `at`, written as one buffer.
    Run { at: u64, members: Vec<Member> },
    /// Only archive bytes `[lo, hi)` of a run (a run cut at a Lustre stripe boundary).
    Window { lo: u64, hi: u64, run: Box<Segment> },
    /// Segments written one after the other by one worker (those sharing a Lustre stripe).
    Group(Vec<Segment>),
    /// `len` bytes of a big file from `file_at`, written at archive offset `at`.
    Chunk {
        at: u64,
        #[serde(with = "serde_bytes")]
        src: Vec<u8>,
        file_at: u64,
        len: u64,
        size: u64,
        /// The file's walked times.
        stamp: Stamp,
    },
    /// Bytes already made, at archive offset `at` (a rank's piece of the index member, on
    /// its way to the rank that compresses its frame).
    Bytes {
        at: u64,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
}

impl Segment {
    /// First archive byte written.
    pub(super) fn at(&self) -> u64 {
        match self {
            Segment::Run { at, .. } | Segment::Chunk { at, .. } | Segment::Bytes { at, .. } => *at,
            Segment::Window { lo, .. } => *lo,
            Segment::Group(segs) => segs.first().map_or(0, Segment::at),
        }
    }

    /// Archive bytes written.
    pub(super) fn len(&self) -> u64 {
        match self {
            Segment::Run { members, .. } => members.iter().map(Member::len).sum(),
            Segment::Window { lo, hi, .. } => hi - lo,
            Segment::Bytes { data, .. } => data.len() as u64,
            Segment::Group(segs) => segs.iter().map(Segment::len).sum(),
            // The last chunk of a file carries the padding to a whole block.
            Segment::Chunk {
                file_at, len, size, ..
            } => {
                len + if file_at + len == *size {
                    round_up(*size) - size
                } else {
                    0
                }
            }
        }
    }
}
