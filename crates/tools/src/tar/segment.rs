//! The units of archive writing: runs of entries (headers and the data of small files), windows
//! of runs, groups, and chunks of big files; how they travel between ranks as work items.

use super::format::{round_up, Header};
use steal::queue::WorkItem;
use steal::wire::{self, Reader};

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

/// What the walk saw of a file's times: a file whose times differ after a read changed while it
/// was read (a rewrite keeps the size, and may set the mtime back; the ctime it cannot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Stamp {
    /// Modification time (s, ns).
    pub(super) mtime: (i64, u32),
    /// Status change time (s, ns).
    pub(super) ctime: (i64, u32),
}

impl Stamp {
    fn put(&self, out: &mut Vec<u8>) {
        for v in [self.mtime.0 as u64, u64::from(self.mtime.1)] {
            wire::put_u64(out, v);
        }
        for v in [self.ctime.0 as u64, u64::from(self.ctime.1)] {
            wire::put_u64(out, v);
        }
    }

    fn get(input: &mut Reader<'_>) -> Stamp {
        Stamp {
            mtime: (input.u64() as i64, input.u64() as u32),
            ctime: (input.u64() as i64, input.u64() as u32),
        }
    }
}

/// One entry of a segment: its encoded header and, for files, where its data comes from.
#[derive(Clone)]
pub(super) struct Member {
    pub(super) header: HeaderBytes,
    /// Source path (empty for entries without data).
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
#[derive(Clone)]
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
        src: Vec<u8>,
        file_at: u64,
        len: u64,
        size: u64,
        /// The file's walked times.
        stamp: Stamp,
    },
    /// Bytes already made, at archive offset `at` (a rank's piece of the index member, on
    /// its way to the rank that compresses its frame).
    Bytes { at: u64, data: Vec<u8> },
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

impl WorkItem for Segment {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Segment::Run { at, members } => {
                out.push(0);
                wire::put_u64(out, *at);
                wire::put_u64(out, members.len() as u64);
                for m in members {
                    let mut header = Vec::with_capacity(m.header.len());
                    m.header.write_to(&mut header);
                    wire::put_bytes(out, &header);
                    wire::put_bytes(out, &m.src);
                    wire::put_u64(out, m.size);
                    m.stamp.put(out);
                    out.push(m.inline as u8);
                }
            }
            Segment::Chunk {
                at,
                src,
                file_at,
                len,
                size,
                stamp,
            } => {
                out.push(1);
                for v in [*at, *file_at, *len, *size] {
                    wire::put_u64(out, v);
                }
                stamp.put(out);
                wire::put_bytes(out, src);
            }
            Segment::Window { lo, hi, run } => {
                out.push(2);
                wire::put_u64(out, *lo);
                wire::put_u64(out, *hi);
                run.encode(out);
            }
            Segment::Bytes { at, data } => {
                out.push(4);
                wire::put_u64(out, *at);
                wire::put_bytes(out, data);
            }
            Segment::Group(segs) => {
                out.push(3);
                wire::put_u64(out, segs.len() as u64);
                for seg in segs {
                    seg.encode(out);
                }
            }
        }
    }

    fn decode(input: &mut Reader<'_>) -> Self {
        let tag = input.u8();
        if tag == 2 {
            let (lo, hi) = (input.u64(), input.u64());
            let run = Box::new(Segment::decode(input));
            return Segment::Window { lo, hi, run };
        }
        if tag == 4 {
            let at = input.u64();
            let data = input.bytes().to_vec();
            return Segment::Bytes { at, data };
        }
        if tag == 3 {
            let n = input.u64() as usize;
            return Segment::Group((0..n).map(|_| Segment::decode(input)).collect());
        }
        if tag == 0 {
            let at = input.u64();
            let n = input.u64() as usize;
            let members = (0..n)
                .map(|_| Member {
                    header: HeaderBytes::Encoded(input.bytes().to_vec()),
                    src: input.bytes().to_vec(),
                    size: input.u64(),
                    stamp: Stamp::get(input),
                    inline: input.u8() != 0,
                })
                .collect();
            Segment::Run { at, members }
        } else {
            let v: Vec<u64> = (0..4).map(|_| input.u64()).collect();
            Segment::Chunk {
                at: v[0],
                file_at: v[1],
                len: v[2],
                size: v[3],
                stamp: Stamp::get(input),
                src: input.bytes().to_vec(),
            }
        }
    }
}
