//! A file's digest from pieces hashed wherever its bytes were read: on several ranks, in
//! ranges of any size and alignment, without a second read.
//!
//! BLAKE3 is a tree over 1 KiB chunks: every aligned power-of-two block of chunks that lies
//! inside the input is a subtree whose chaining value can be computed alone
//! (`blake3::hazmat`, `set_input_offset` and `finalize_non_root`) and merged later. A
//! [`RangeHasher`] cuts the range it is fed into such blocks, greedily (the largest block
//! aligned at the current offset that fits), so each block is a node of the file's tree
//! whatever the range was. The bytes before the first 1 KiB boundary and after the last one
//! (a range that starts or ends mid-chunk) cannot be hashed alone: they travel raw (less than
//! 2 KiB per range) and the rank that assembles the file ([`assemble_blake3`]) joins them with
//! their neighbours' into whole chunks. So the copy engine's chunk sizes need not be powers of
//! two, and tar's cuts at archive offsets need not fall on file boundaries.
//!
//! SHA-256 cannot be combined that way: a range that is the whole file is hashed as it
//! passes; a file read in several ranges is hashed by whoever assembles it, from one more read
//! of its source (see [`crate::engine::manifest`]).

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};
use sha2::Digest as _;
use std::collections::BTreeMap;

/// Bytes of a BLAKE3 chunk, the leaf of its tree.
const CHUNK: u64 = blake3::CHUNK_LEN as u64;

/// Which hash a manifest holds.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum HashKind {
    /// BLAKE3, as `b3sum` writes it (the default: fast, and combined across ranks).
    #[default]
    Blake3,
    /// SHA-256, as `sha256sum` writes it (for sites that require it; a file split over
    /// several chunks costs one more read of its source).
    Sha256,
}

impl HashKind {
    /// Its name, as `--manifest-hash` takes it.
    pub fn name(self) -> &'static str {
        match self {
            HashKind::Blake3 => "blake3",
            HashKind::Sha256 => "sha256",
        }
    }

    /// The digest of `bytes` (all of a file).
    pub fn of(self, bytes: &[u8]) -> [u8; 32] {
        match self {
            HashKind::Blake3 => *blake3::hash(bytes).as_bytes(),
            HashKind::Sha256 => sha2::Sha256::digest(bytes).into(),
        }
    }
}

/// A part of a file's BLAKE3 tree. Travels to the rank that assembles the file's digest.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Piece {
    /// The chaining value of the subtree of `len` bytes at `offset` (a node of the tree).
    Subtree {
        /// Byte offset in the file.
        offset: u64,
        /// Bytes it covers.
        len: u64,
        /// Its chaining value.
        cv: ChainingValue,
    },
    /// Bytes at `offset` inside one chunk, which other pieces complete.
    Raw {
        /// Byte offset in the file.
        offset: u64,
        /// The bytes (fewer than a chunk).
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
}

/// What a [`RangeHasher`] found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RangeDigest {
    /// The range was the whole file: its digest.
    Whole([u8; 32]),
    /// A part of a file: its pieces, to be assembled with the other ranges'.
    Pieces(Vec<Piece>),
}

/// Hashes the bytes of one range of a file, fed in order and in any amounts.
pub struct RangeHasher {
    file_size: u64,
    end: u64,
    /// Offset of the next byte fed.
    pos: u64,
    whole: Option<Whole>,
    /// The subtree being hashed: its hasher and where it ends.
    current: Option<(blake3::Hasher, u64, u64)>,
    /// Bytes of a chunk this range holds only part of: where they start, and them.
    raw: Option<(u64, Vec<u8>)>,
    pieces: Vec<Piece>,
}

enum Whole {
    Blake3(Box<blake3::Hasher>),
    Sha256(sha2::Sha256),
}

impl RangeHasher {
    /// A hasher of the `len` bytes at `offset` of a file of `file_size` bytes. A range that is
    /// the whole file gives a [`RangeDigest::Whole`] of `kind`; any other range gives BLAKE3
    /// pieces (SHA-256 of a file in several ranges is computed elsewhere).
    pub fn new(kind: HashKind, offset: u64, len: u64, file_size: u64) -> RangeHasher {
        let whole = (offset == 0 && len == file_size).then(|| match kind {
            HashKind::Blake3 => Whole::Blake3(Box::default()),
            HashKind::Sha256 => Whole::Sha256(sha2::Sha256::new()),
        });
        RangeHasher {
            file_size,
            end: offset + len,
            pos: offset,
            whole,
            current: None,
            raw: None,
            pieces: Vec::new(),
        }
    }

    /// Feed the next bytes of the range (at most what is left of it).
    pub fn update(&mut self, mut bytes: &[u8]) {
        debug_assert!(self.pos + bytes.len() as u64 <= self.end, "past the range");
        if let Some(w) = &mut self.whole {
            match w {
                Whole::Blake3(h) => {
                    h.update(bytes);
                }
                Whole::Sha256(h) => h.update(bytes),
            }
            self.pos += bytes.len() as u64;
            return;
        }
        while !bytes.is_empty() {
            let take = self.next_piece_room().min(bytes.len() as u64) as usize;
            let (now, rest) = bytes.split_at(take);
            if let Some((h, _, _)) = &mut self.current {
                h.update(now);
            } else if let Some((_, raw)) = &mut self.raw {
                raw.extend_from_slice(now);
            }
            self.pos += take as u64;
            self.close_if_done();
            bytes = rest;
        }
    }

    /// Bytes the open piece (opened here if none is) still takes.
    fn next_piece_room(&mut self) -> u64 {
        if let Some((_, _, end)) = &self.current {
            return end - self.pos;
        }
        if let Some((at, raw)) = &self.raw {
            return self.raw_end(*at) - at - raw.len() as u64;
        }
        let pos = self.pos;
        let room = self.end - pos;
        let to_file_end = self.end == self.file_size;
        if pos % CHUNK != 0 || (room < CHUNK && !to_file_end) {
            self.raw = Some((pos, Vec::new()));
            return self.raw_end(pos) - pos;
        }
        // The largest aligned block at `pos` that fits; the file's short last chunk when
        // less than a chunk is left.
        let len = if room < CHUNK {
            room
        } else {
            let align = if pos == 0 {
                u64::MAX
            } else {
                1 << pos.trailing_zeros()
            };
            let fits = 1 << (63 - room.leading_zeros());
            align.min(fits)
        };
        let mut h = blake3::Hasher::new();
        h.set_input_offset(pos);
        self.current = Some((h, pos, pos + len));
        len
    }

    /// Where raw bytes starting at `at` stop: the next chunk boundary, or the range's end.
    fn raw_end(&self, at: u64) -> u64 {
        ((at / CHUNK + 1) * CHUNK).min(self.end)
    }

    fn close_if_done(&mut self) {
        if let Some((_, _, end)) = &self.current {
            if *end == self.pos {
                let (h, offset, end) = self.current.take().expect("checked");
                self.pieces.push(Piece::Subtree {
                    offset,
                    len: end - offset,
                    cv: h.finalize_non_root(),
                });
            }
        } else if let Some((at, raw)) = &self.raw {
            if at + raw.len() as u64 == self.raw_end(*at) {
                let (offset, bytes) = self.raw.take().expect("checked");
                self.pieces.push(Piece::Raw { offset, bytes });
            }
        }
    }

    /// The digest of the range.
    ///
    /// # Panics
    /// When fewer bytes than the range's length were fed (a caller's bug).
    pub fn finish(self) -> RangeDigest {
        assert_eq!(self.pos, self.end, "a range hashed in part");
        match self.whole {
            Some(Whole::Blake3(h)) => RangeDigest::Whole(*h.finalize().as_bytes()),
            Some(Whole::Sha256(h)) => RangeDigest::Whole(h.finalize().into()),
            None => RangeDigest::Pieces(self.pieces),
        }
    }
}

/// The BLAKE3 digest of a file of `file_size` bytes from the pieces of all its ranges (in any
/// order); `None` when they do not cover it (a range failed or is missing).
pub fn assemble_blake3(file_size: u64, pieces: Vec<Piece>) -> Option<[u8; 32]> {
    let mut subtrees: BTreeMap<u64, (u64, ChainingValue)> = BTreeMap::new();
    let mut raws: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for p in pieces {
        match p {
            Piece::Subtree { offset, len, cv } => {
                subtrees.insert(offset, (len, cv));
            }
            Piece::Raw { offset, bytes } => {
                raws.insert(offset, bytes);
            }
        }
    }
    // Join raw bytes into whole chunks (or the file's last, short one).
    let mut chunk: Option<(u64, Vec<u8>)> = None;
    let mut small_file = None;
    for (offset, bytes) in raws {
        let (start, mut joined) = match chunk.take() {
            Some((start, joined)) if start + joined.len() as u64 == offset => (start, joined),
            Some(_) => return None,
            None if offset % CHUNK == 0 => (offset, Vec::new()),
            None => return None,
        };
        joined.extend_from_slice(&bytes);
        let full = (start + CHUNK).min(file_size);
        if start + joined.len() as u64 == full {
            if file_size <= CHUNK {
                small_file = Some(*blake3::hash(&joined).as_bytes());
            } else {
                let mut h = blake3::Hasher::new();
                h.set_input_offset(start);
                h.update(&joined);
                subtrees.insert(start, (joined.len() as u64, h.finalize_non_root()));
            }
        } else {
            chunk = Some((start, joined));
        }
    }
    if chunk.is_some() {
        return None;
    }
    if file_size <= CHUNK {
        return small_file;
    }
    let left = left_subtree_len(file_size);
    let l = node(&subtrees, 0, left)?;
    let r = node(&subtrees, left, file_size - left)?;
    Some(*merge_subtrees_root(&l, &r, Mode::Hash).as_bytes())
}

/// The chaining value of the tree node of `len` bytes at `offset`.
fn node(
    subtrees: &BTreeMap<u64, (u64, ChainingValue)>,
    offset: u64,
    len: u64,
) -> Option<ChainingValue> {
    if let Some((l, cv)) = subtrees.get(&offset) {
        if *l == len {
            return Some(*cv);
        }
    }
    if len <= CHUNK {
        return None;
    }
    let left = left_subtree_len(len);
    let l = node(subtrees, offset, left)?;
    let r = node(subtrees, offset + left, len - left)?;
    Some(merge_subtrees_non_root(&l, &r, Mode::Hash))
}

/// Lower-case hexadecimal of `digest`.
pub fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 32 bytes of 64 hexadecimal digits (either case); `None` for anything else.
pub fn parse_hex(text: &[u8]) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        out[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(len: usize, seed: u64) -> Vec<u8> {
        crate::engine::test_rng::noise(seed, len)
    }

    /// The pieces of `data` cut at `cuts` (at least one inside it), each range fed in reads
    /// of `step` bytes.
    fn pieces(data: &[u8], cuts: &[u64], step: usize) -> Vec<Piece> {
        let size = data.len() as u64;
        let mut bounds = vec![0];
        bounds.extend(cuts.iter().copied().filter(|&c| c > 0 && c < size));
        bounds.push(size);
        assert!(bounds.len() > 2, "no cut inside the data");
        let mut out = Vec::new();
        for w in bounds.windows(2) {
            let (a, b) = (w[0], w[1]);
            let mut h = RangeHasher::new(HashKind::Blake3, a, b - a, size);
            for part in data[a as usize..b as usize].chunks(step.max(1)) {
                h.update(part);
            }
            match h.finish() {
                RangeDigest::Pieces(p) => out.extend(p),
                RangeDigest::Whole(_) => panic!("a part gave a whole digest"),
            }
        }
        out
    }

    #[test]
    fn ranges_of_any_size_and_alignment_assemble_to_the_files_blake3() {
        let sizes = [1025usize, 2048, 5000, 65536, 1 << 20, (3 << 20) + 777];
        let mut checked = 0;
        for (n, &size) in sizes.iter().enumerate() {
            let data = noise(size, n as u64 + 3);
            let want = *blake3::hash(&data).as_bytes();
            let s = size as u64;
            let cut_sets: Vec<Vec<u64>> = vec![
                vec![s / 2],
                vec![1024, 3000],
                vec![777, 1024 * 7 + 5, s - 3],
                (1..20).map(|k| k * s / 20).collect(),
                (1..).map(|k| k * 20_000).take_while(|&c| c < s).collect(),
                (1..)
                    .map(|k| k * (1 << 17))
                    .take_while(|&c| c < s)
                    .collect(),
            ];
            for cuts in cut_sets
                .iter()
                .filter(|c| c.iter().any(|&c| c > 0 && c < s))
            {
                for step in [1000, 4096, 1 << 20] {
                    checked += 1;
                    let mut p = pieces(&data, cuts, step);
                    p.reverse(); // any order
                    assert_eq!(
                        assemble_blake3(s, p),
                        Some(want),
                        "size {size} cuts {cuts:?} step {step}"
                    );
                }
            }
        }
        assert!(checked > 80, "{checked} cases");
    }

    #[test]
    fn a_missing_range_assembles_to_nothing() {
        let data = noise(10_000, 5);
        let mut p = pieces(&data, &[3000, 6000], 4096);
        p.remove(p.len() / 2);
        assert_eq!(assemble_blake3(10_000, p), None);
    }

    #[test]
    fn a_whole_range_gives_the_digest_of_its_kind() {
        let data = noise(3000, 9);
        for kind in [HashKind::Blake3, HashKind::Sha256] {
            let mut h = RangeHasher::new(kind, 0, 3000, 3000);
            h.update(&data[..100]);
            h.update(&data[100..]);
            assert_eq!(h.finish(), RangeDigest::Whole(kind.of(&data)));
        }
        let empty = RangeHasher::new(HashKind::Blake3, 0, 0, 0).finish();
        assert_eq!(empty, RangeDigest::Whole(*blake3::hash(b"").as_bytes()));
        let d = [0xabu8; 32];
        assert_eq!(parse_hex(hex(&d).as_bytes()), Some(d));
        assert_eq!(parse_hex(b"xy"), None);
    }
}
