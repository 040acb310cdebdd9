//! The state file of `sync --verify --state FILE`: per regular file, what was verified (the
//! identities of its source and of its destination, and the digest both had), so that the
//! next run verifies again only what changed since.
//!
//! Format (version 1; integers little-endian; documented in the README, "Verified state
//! file"):
//!
//! ```text
//! header   "MFUVSTAT" · u32 version · u32 H · H bytes of fields, each u32 length + bytes:
//!          SRC, DEST, hash name ("blake3"/"sha256"), options text
//! records  sorted by key (the file's path relative to DEST, as bytes), in blocks of 4096
//!          records (the last one fewer); a record: u32 K · K bytes of key · source identity
//!          · destination identity · 32 bytes of digest; an identity: dev u64 · ino u64 ·
//!          size u64 · mtime s i64 · mtime ns u32 · ctime s i64 · ctime ns u32 (48 bytes)
//! trailer  per block: offset u64 (from the file's start) · length u64 · records u64 ·
//!          checksum u64 (the wrapping sum of XXH64(record, seed: its number from 0));
//!          then blocks u64 · XXH64 of the header u64 · records u64 · XXH64 of the
//!          trailer's bytes before it u64 · trailer length u64 · "MFUVSEND"
//! ```
//!
//! Every byte is covered by a checksum (the header's, each record's within its block's, the
//! trailer's), and the trailer is found from the file's end: a truncated, bit-flipped or
//! half-written state is told, and not trusted. Ranks write the sorted records in parallel
//! (each its part at its offset; a block's checksum is a sum, made of each rank's share) and
//! read them in parallel (each a contiguous run of blocks): nothing is read or written by one
//! rank alone but the header and the trailer (32 bytes per 4096 records). The bytes do not
//! depend on the rank count.

use crate::engine::context::Context;
use crate::engine::digest::HashKind;
use flist::distribute::hash_path;
use flist::{Detail, FileList, FileType};
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::FileExt;
use steal::{Comm, CommExt};

/// The first bytes of a state file.
pub const MAGIC: &[u8; 8] = b"MFUVSTAT";
/// The last bytes of a complete state file.
pub const END_MAGIC: &[u8; 8] = b"MFUVSEND";
/// The format's version.
pub const VERSION: u32 = 1;
/// Records in a block (the last one may hold fewer): blocks are cut at the same records
/// whatever the rank count, so the file's bytes do not depend on it.
const BLOCK_RECORDS: u64 = 4096;
/// Bytes of an encoded [`Identity`].
const IDENTITY_BYTES: usize = 48;
/// Bytes of a record after its key.
const TAIL_BYTES: usize = 2 * IDENTITY_BYTES + 32;
/// Bytes of the trailer after the block index.
const TRAILER_FIXED: usize = 5 * 8 + 8;

/// What tells a file changed: device, inode, size (bytes), modification and change times
/// (seconds, nanoseconds). A rewrite that keeps size and mtime still moves the ctime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds.
    pub mtime: i64,
    /// Modification time, nanoseconds.
    pub mtime_nsec: u32,
    /// Change time, seconds.
    pub ctime: i64,
    /// Change time, nanoseconds.
    pub ctime_nsec: u32,
}

impl Identity {
    /// The identity in `m`.
    pub fn of(m: &flist::Meta) -> Identity {
        Identity {
            dev: m.dev,
            ino: m.ino,
            size: m.size,
            mtime: m.mtime,
            mtime_nsec: m.mtime_nsec,
            ctime: m.ctime,
            ctime_nsec: m.ctime_nsec,
        }
    }

    /// The identity of a `stat`.
    pub fn of_stat(st: &rustix::fs::Stat) -> Identity {
        Identity::of(&flist::Meta::from_stat(st))
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.dev.to_le_bytes());
        out.extend_from_slice(&self.ino.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.mtime.to_le_bytes());
        out.extend_from_slice(&self.mtime_nsec.to_le_bytes());
        out.extend_from_slice(&self.ctime.to_le_bytes());
        out.extend_from_slice(&self.ctime_nsec.to_le_bytes());
    }

    fn decode(b: &[u8]) -> Identity {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Identity {
            dev: u64_at(0),
            ino: u64_at(8),
            size: u64_at(16),
            mtime: u64_at(24) as i64,
            mtime_nsec: u32_at(32),
            ctime: u64_at(36) as i64,
            ctime_nsec: u32_at(44),
        }
    }
}

/// One file's verified state.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Its path relative to the destination's base (DEST, or DEST's directory when one file
    /// is synced), as bytes.
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// The source's identity when it was verified.
    pub src: Identity,
    /// The destination's identity when it was verified.
    pub dest: Identity,
    /// The digest both had.
    pub digest: [u8; 32],
}

impl Entry {
    fn tail(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(TAIL_BYTES);
        self.src.encode(&mut out);
        self.dest.encode(&mut out);
        out.extend_from_slice(&self.digest);
        out
    }
}

/// What a state was made for: a state of another pair of trees, another hash or other options
/// that change what is verified is not trusted.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scope {
    /// SRC (absolute, as the run settled it).
    #[serde(with = "serde_bytes")]
    pub src: Vec<u8>,
    /// DEST (absolute, as the run settled it).
    #[serde(with = "serde_bytes")]
    pub dest: Vec<u8>,
    /// The digests' hash.
    pub hash: HashKind,
    /// The options that change what a file's source is (`dereference=0|1`).
    pub options: String,
}

impl Scope {
    fn encode(&self) -> Vec<u8> {
        let mut fields = Vec::new();
        let hash = self.hash.name().as_bytes();
        for f in [&self.src[..], &self.dest, hash, self.options.as_bytes()] {
            fields.extend_from_slice(&(f.len() as u32).to_le_bytes());
            fields.extend_from_slice(f);
        }
        let mut out = Vec::with_capacity(16 + fields.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
        out.extend_from_slice(&fields);
        out
    }

    /// The scope in a header's fields (after magic, version and length).
    fn decode(mut b: &[u8]) -> Result<Scope, String> {
        let mut take = || -> Result<Vec<u8>, String> {
            let n = b
                .get(..4)
                .map(|n| u32::from_le_bytes(n.try_into().expect("4 bytes")) as usize)
                .ok_or("the header ends early")?;
            let f = b.get(4..4 + n).ok_or("the header ends early")?.to_vec();
            b = &b[4 + n..];
            Ok(f)
        };
        let (src, dest, hash, options) = (take()?, take()?, take()?, take()?);
        let hash = match &hash[..] {
            b"blake3" => HashKind::Blake3,
            b"sha256" => HashKind::Sha256,
            _ => return Err("the header names an unknown hash".into()),
        };
        let options =
            String::from_utf8(options).map_err(|_| "the header's options are not text")?;
        Ok(Scope {
            src,
            dest,
            hash,
            options,
        })
    }

    /// How the scope reads in a message.
    fn words(&self) -> String {
        format!(
            "SRC {}, DEST {}, {}, {}",
            flist::path::display(&self.src),
            flist::path::display(&self.dest),
            self.hash.name(),
            self.options
        )
    }
}

/// The rank that keeps the entry of `key` among `size` ranks.
pub fn home(key: &[u8], size: usize) -> usize {
    (hash_path(key) % size as u64) as usize
}

/// A block of records as the trailer indexes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Block {
    /// Offset in the file (bytes).
    offset: u64,
    /// Length (bytes).
    len: u64,
    /// Records in it.
    records: u64,
    /// XXH64 of its bytes.
    sum: u64,
}

/// What was found at the state's path.
#[derive(Debug)]
pub enum Loaded {
    /// A complete state made for this scope: this rank's entries (those whose [`home`] it is),
    /// by key.
    Trusted(HashMap<Vec<u8>, Entry>),
    /// No file there: a first run.
    Absent,
    /// A state that can't be trusted (why): every file is verified, and the state rewritten.
    Untrusted(String),
}

/// Read the header and the trailer of the state file `file` (of `len` bytes): its scope and
/// its blocks, every checksum but the blocks' checked.
fn read_frame(file: &std::fs::File, len: u64) -> Result<(Scope, Vec<Block>), String> {
    let read = |offset: u64, n: usize| -> Result<Vec<u8>, String> {
        let mut b = vec![0u8; n];
        file.read_exact_at(&mut b, offset)
            .map_err(|e| format!("read: {e}"))?;
        Ok(b)
    };
    let u64_of = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8"));
    if len < 16 + TRAILER_FIXED as u64 {
        return Err("too short to be a state file (truncated?)".into());
    }
    let head = read(0, 16)?;
    if &head[..8] != MAGIC {
        return Err("not a state file of mfu-rs (no MFUVSTAT magic)".into());
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4"));
    if version != VERSION {
        return Err(format!(
            "format version {version}, this mfu-rs reads {VERSION}"
        ));
    }
    let hlen = u32::from_le_bytes(head[12..16].try_into().expect("4")) as u64;
    let end = read(len - 16, 16)?;
    if &end[8..] != END_MAGIC {
        return Err("no trailer at its end (truncated or not written whole)".into());
    }
    let tlen = u64_of(&end, 0);
    if tlen < TRAILER_FIXED as u64 || tlen > len - 16 - hlen {
        return Err("its trailer's length is wrong (truncated or damaged)".into());
    }
    let trailer = read(len - tlen, tlen as usize)?;
    let fixed = &trailer[trailer.len() - TRAILER_FIXED..];
    let [blocks, header_sum, _records, trailer_sum] = [0, 8, 16, 24].map(|i| u64_of(fixed, i));
    let summed = trailer.len() - TRAILER_FIXED + 24;
    if xxhash_rust::xxh64::xxh64(&trailer[..summed], 0) != trailer_sum {
        return Err("its trailer's checksum does not hold (damaged)".into());
    }
    if blocks.checked_mul(32) != Some((trailer.len() - TRAILER_FIXED) as u64) {
        return Err("its trailer's block count is wrong (damaged)".into());
    }
    let header = read(0, 16 + hlen as usize)?;
    if xxhash_rust::xxh64::xxh64(&header, 0) != header_sum {
        return Err("its header's checksum does not hold (damaged)".into());
    }
    let scope = Scope::decode(&header[16..])?;
    let mut index = Vec::with_capacity(blocks as usize);
    let mut at = 16 + hlen;
    for i in 0..blocks as usize {
        let [offset, len, records, sum] = [0, 8, 16, 24].map(|j| u64_of(&trailer, i * 32 + j));
        if offset != at {
            return Err("its blocks do not follow each other (damaged)".into());
        }
        at += len;
        index.push(Block {
            offset,
            len,
            records,
            sum,
        });
    }
    if at != len - tlen {
        return Err("its records do not end where its trailer begins (damaged)".into());
    }
    Ok((scope, index))
}

/// The records of `block` of `file`, checked against its checksum and count, in strictly
/// increasing key order.
fn read_block(file: &std::fs::File, number: usize, block: &Block) -> Result<Vec<Entry>, String> {
    let mut b = vec![0u8; block.len as usize];
    file.read_exact_at(&mut b, block.offset)
        .map_err(|e| format!("read: {e}"))?;
    let first = number as u64 * BLOCK_RECORDS;
    let mut sum = 0u64;
    let damaged = || format!("its records at offset {} are malformed", block.offset);
    let mut out = Vec::with_capacity(block.records as usize);
    let mut rest = &b[..];
    while !rest.is_empty() {
        let k = rest
            .get(..4)
            .map(|n| u32::from_le_bytes(n.try_into().expect("4")) as usize)
            .ok_or_else(damaged)?;
        let rec = rest.get(4..4 + k + TAIL_BYTES).ok_or_else(damaged)?;
        let seed = first + out.len() as u64;
        sum = sum.wrapping_add(xxhash_rust::xxh64::xxh64(&rest[..4 + k + TAIL_BYTES], seed));
        let (key, tail) = rec.split_at(k);
        let e = Entry {
            key: key.to_vec(),
            src: Identity::decode(&tail[..IDENTITY_BYTES]),
            dest: Identity::decode(&tail[IDENTITY_BYTES..2 * IDENTITY_BYTES]),
            digest: tail[2 * IDENTITY_BYTES..].try_into().expect("32 bytes"),
        };
        if out.last().is_some_and(|p: &Entry| p.key >= e.key) {
            return Err(format!("{}: not sorted", damaged()));
        }
        out.push(e);
        rest = &rest[4 + k + TAIL_BYTES..];
    }
    if out.len() as u64 != block.records {
        return Err(damaged());
    }
    if sum != block.sum {
        return Err(format!(
            "the checksum of its records at offset {} does not hold (damaged)",
            block.offset
        ));
    }
    Ok(out)
}

/// Read the state `path` made for `scope`, its blocks shared out over the ranks, and hand each
/// entry to its [`home`]. Collective; the same verdict on every rank.
pub fn load(comm: &dyn Comm, path: &[u8], scope: &Scope) -> Loaded {
    let opened = std::fs::File::open(flist::path::as_path(path));
    let absent = matches!(&opened, Err(e) if e.kind() == io::ErrorKind::NotFound);
    if comm.all(absent) {
        return Loaded::Absent;
    }
    let file = match opened {
        Ok(f) => Ok(f),
        Err(e) => Err(format!("open: {e}")),
    };
    // Rank 0 reads the frame; all read their share of the blocks.
    let frame: Result<(Scope, Vec<Block>), String> = comm.bcast_with(0, || {
        let f = file.as_ref().map_err(Clone::clone)?;
        let len = f.metadata().map_err(|e| format!("stat: {e}"))?.len();
        read_frame(f, len)
    });
    let (found, blocks) = match frame {
        Ok(x) => x,
        Err(why) => return Loaded::Untrusted(why),
    };
    if found != *scope {
        return Loaded::Untrusted(format!(
            "it was made for {}, this run is {}",
            found.words(),
            scope.words()
        ));
    }
    let (rank, size) = (comm.rank(), comm.size());
    let n = blocks.len();
    let mine = n * rank / size..n * (rank + 1) / size;
    let mut entries = Vec::new();
    let mut why = None;
    for i in mine {
        let got = file
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|f| read_block(f, i, &blocks[i]));
        match got {
            Ok(es) => entries.extend(es),
            Err(e) => {
                why = Some(e);
                break;
            }
        }
    }
    // The first rank with a problem tells it.
    let whys = comm.all_gather(&why);
    if let Some(why) = whys.into_iter().flatten().next() {
        return Loaded::Untrusted(why);
    }
    let mut sends = vec![Vec::new(); size];
    for e in &entries {
        steal::typed::encode_into(e, &mut sends[home(&e.key, size)]);
    }
    drop(entries);
    let mut out = HashMap::new();
    for bytes in comm.alltoallv(sends) {
        for e in steal::typed::each::<Entry>(&bytes) {
            let e = steal::typed::sent(e);
            out.insert(e.key.clone(), e);
        }
    }
    Loaded::Trusted(out)
}

/// Write `entries` (this rank's, any order, keys unique over all ranks) as the state `path`
/// for `scope`: sorted by key over the ranks, each rank's part written at its offset into a
/// temporary file beside `path`, which rank 0 renames to `path` once every part and the
/// trailer are written and synced. Returns the records written. Collective; the same result on
/// every rank.
pub fn save(
    comm: &dyn Comm,
    context: &Context,
    path: &[u8],
    scope: &Scope,
    entries: Vec<Entry>,
) -> Result<u64, String> {
    // Sorted as list records whose "path" is KEY NUL TAIL: a key holds no NUL, so the order is
    // the keys' (bytes).
    let mut list = FileList::new(Detail::Lite);
    for e in &entries {
        let mut k = Vec::with_capacity(e.key.len() + 1 + TAIL_BYTES);
        k.extend_from_slice(&e.key);
        k.push(0);
        k.extend_from_slice(&e.tail());
        list.push(&k, FileType::File, None);
    }
    drop(entries);
    let keys = flist::sort::parse_keys("name").expect("a valid sort key");
    let sorted = flist::sort::sort(comm, list, &keys).map_err(|e| e.to_string())?;
    // This rank's part, and its share of the blocks it has records of: (block, where the block
    // starts in `text` when it starts here, the sum of its records' checksums).
    let (first, records) = comm.offset_and_total(sorted.len() as u64);
    let mut text = Vec::new();
    let mut shares: Vec<(u64, Option<u64>, u64)> = Vec::new();
    for i in 0..sorted.len() {
        let g = first + i as u64;
        let b = g / BLOCK_RECORDS;
        if shares.last().map(|s| s.0) != Some(b) {
            let starts = (g % BLOCK_RECORDS == 0).then_some(text.len() as u64);
            shares.push((b, starts, 0));
        }
        let k = sorted.path(i);
        let (key, tail) = k.split_at(k.len() - TAIL_BYTES - 1);
        let at = text.len();
        text.extend_from_slice(&(key.len() as u32).to_le_bytes());
        text.extend_from_slice(key);
        text.extend_from_slice(&tail[1..]);
        let share = shares.last_mut().expect("a share");
        share.2 = share
            .2
            .wrapping_add(xxhash_rust::xxh64::xxh64(&text[at..], g));
    }
    drop(sorted);
    let header = scope.encode();
    let (offset, total) = comm.offset_and_total(text.len() as u64);
    let base = header.len() as u64 + offset;
    for s in &mut shares {
        s.1 = s.1.map(|at| at + base);
    }
    let blocks = shares;
    let index = comm.gather_to(0, &blocks);
    let mut output = None;
    let tmp =
        crate::engine::manifest::shared_temp(comm, context, path, "temporary state", &mut output)?;
    let (tmp, id) = tmp;
    let mine = crate::engine::manifest::write_part(&tmp, id, base, &text);
    let failed = comm.any(mine.is_err());
    comm.bcast_with(0, || {
        if failed {
            return Err(mine
                .clone()
                .err()
                .unwrap_or_else(|| "another rank's part could not be written".into()));
        }
        let mut trailer = Vec::new();
        let ends = header.len() as u64 + total;
        let index = blocks_of(index.iter().flatten().flatten(), records, ends);
        for b in &index {
            for v in [b.offset, b.len, b.records, b.sum] {
                trailer.extend_from_slice(&v.to_le_bytes());
            }
        }
        let header_sum = xxhash_rust::xxh64::xxh64(&header, 0);
        for v in [index.len() as u64, header_sum, records] {
            trailer.extend_from_slice(&v.to_le_bytes());
        }
        let sum = xxhash_rust::xxh64::xxh64(&trailer, 0);
        trailer.extend_from_slice(&sum.to_le_bytes());
        let tlen = (trailer.len() + 16) as u64;
        trailer.extend_from_slice(&tlen.to_le_bytes());
        trailer.extend_from_slice(END_MAGIC);
        crate::engine::manifest::write_part(&tmp, id, 0, &header)?;
        crate::engine::manifest::write_part(&tmp, id, ends, &trailer)?;
        match output.take() {
            Some(out) => out
                .publish(flist::atomic::Replace::Overwrite)
                .map_err(|e| e.to_string()),
            None => Err("the temporary state is gone".into()),
        }
    })?;
    mine?;
    Ok(records)
}

/// The blocks of a state of `records` records whose records end at offset `ends`, from the
/// ranks' shares (block, start when it starts in that share, partial checksum).
fn blocks_of<'a>(
    shares: impl Iterator<Item = &'a (u64, Option<u64>, u64)>,
    records: u64,
    ends: u64,
) -> Vec<Block> {
    let n = records.div_ceil(BLOCK_RECORDS) as usize;
    let mut blocks = vec![
        Block {
            offset: 0,
            len: 0,
            records: 0,
            sum: 0,
        };
        n
    ];
    for &(b, start, sum) in shares {
        let block = &mut blocks[b as usize];
        if let Some(start) = start {
            block.offset = start;
        }
        block.sum = block.sum.wrapping_add(sum);
    }
    for i in 0..n {
        let next = blocks.get(i + 1).map_or(ends, |b| b.offset);
        let block = &mut blocks[i];
        block.len = next - block.offset;
        block.records = BLOCK_RECORDS.min(records - i as u64 * BLOCK_RECORDS);
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn scope() -> Scope {
        Scope {
            src: b"/s".to_vec(),
            dest: b"/d".to_vec(),
            hash: HashKind::Blake3,
            options: "dereference=0".into(),
        }
    }

    fn entry(i: u32) -> Entry {
        let id = |k: u64| Identity {
            dev: k,
            ino: u64::from(i),
            size: 3 * u64::from(i),
            mtime: -5,
            mtime_nsec: i,
            ctime: 1 << 40,
            ctime_nsec: 999_999_999,
        };
        Entry {
            key: format!("dir/f{i:06}\n\u{e9}").into_bytes(),
            src: id(1),
            dest: id(2),
            digest: [i as u8; 32],
        }
    }

    fn save_and_load(
        np_write: usize,
        np_read: usize,
        path: &[u8],
        n: u32,
    ) -> Vec<HashMap<Vec<u8>, Entry>> {
        let context = Context::default();
        steal::local::run(np_write, |comm: &dyn Comm| {
            let mine = (0..n)
                .filter(|i| *i as usize % comm.size() == comm.rank())
                .map(entry)
                .collect();
            assert_eq!(
                save(comm, &context, path, &scope(), mine).unwrap(),
                n as u64
            );
        });
        steal::local::run(np_read, |comm: &dyn Comm| {
            match load(comm, path, &scope()) {
                Loaded::Trusted(m) => m,
                other => panic!("{other:?}"),
            }
        })
    }

    /// Written by any number of ranks, read by any number: the same entries, the same bytes,
    /// several blocks.
    #[test]
    fn a_state_reads_back_at_any_rank_count_and_its_bytes_do_not_depend_on_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = |s: &str| [dir.path().as_os_str().as_bytes(), b"/", s.as_bytes()].concat();
        let n = 9000; // about 1.6 MiB of records: more than one block
        let mut bytes = Vec::new();
        for (w, r) in [(1, 3), (3, 1), (2, 2)] {
            let path = p(&format!("s{w}{r}"));
            let got = save_and_load(w, r, &path, n);
            let mut all: Vec<Entry> = got.into_iter().flat_map(|m| m.into_values()).collect();
            all.sort_by(|a, b| a.key.cmp(&b.key));
            assert_eq!(all, (0..n).map(entry).collect::<Vec<_>>());
            bytes.push(std::fs::read(flist::path::as_path(&path)).unwrap());
        }
        assert!(bytes.windows(2).all(|w| w[0] == w[1]));
        let (frame, _) = read_frame(
            &std::fs::File::open(flist::path::as_path(&p("s13"))).unwrap(),
            bytes[0].len() as u64,
        )
        .map(|(s, b)| (b.len(), s))
        .unwrap();
        assert!(frame > 1, "{frame} blocks");
        // Nothing left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    fn verdict(path: &[u8], scope: &Scope) -> Loaded {
        steal::local::run(2, |comm: &dyn Comm| load(comm, path, scope))
            .pop()
            .unwrap()
    }

    #[test]
    fn a_damaged_truncated_or_foreign_state_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = [dir.path().as_os_str().as_bytes(), b"/st"].concat();
        save_and_load(2, 2, &path, 3000);
        let good = std::fs::read(flist::path::as_path(&path)).unwrap();
        assert!(matches!(verdict(&path, &scope()), Loaded::Trusted(_)));
        let mut other = scope();
        other.dest = b"/elsewhere".to_vec();
        match verdict(&path, &other) {
            Loaded::Untrusted(why) => assert!(why.contains("made for"), "{why}"),
            l => panic!("{l:?}"),
        }
        let mut flips = vec![0, 20, 100, good.len() / 2, good.len() - 40, good.len() - 3];
        flips.extend((0..good.len()).step_by(997));
        for at in flips {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            std::fs::write(flist::path::as_path(&path), &bad).unwrap();
            assert!(
                matches!(verdict(&path, &scope()), Loaded::Untrusted(_)),
                "a bit flipped at {at}"
            );
        }
        for len in [0, 10, 100, good.len() / 2, good.len() - 1] {
            std::fs::write(flist::path::as_path(&path), &good[..len]).unwrap();
            match verdict(&path, &scope()) {
                Loaded::Untrusted(why) => assert!(!why.is_empty()),
                l => panic!("truncated to {len}: {l:?}"),
            }
        }
        std::fs::remove_file(flist::path::as_path(&path)).unwrap();
        assert!(matches!(verdict(&path, &scope()), Loaded::Absent));
    }
}
