//! The records of one rank: a path arena plus fixed-size columns.
//!
//! Records moving between ranks in bulk (spread, remap, sort, chunks) keep their own
//! fixed-width data format ([`FileList::encode_record`], [`Meta::encode`]), not serde: encoding
//! and decoding 10^6 stat records of 60-byte paths took 172 + 142 ms by hand against 257 + 196
//! ms with postcard (release, median of 3 interleaved rounds, 2026-12; postcard's messages are
//! 25% smaller). Every other rank message uses steal's typed collectives.
//!
//! A record costs `4` (path end offset) + `1` (type, lite lists) or `20` (its [`Meta`], packed
//! losslessly: [`crate::packed`]; stat lists, whose types are read from the mode; an atime or
//! ctime that is not the record's mtime costs 12 more, or 8 for every record once a third of
//! them have one) bytes beyond its path bytes, and no heap object of its own: 10^6 records of 60-byte paths take 65
//! MB (lite) or 84 to 100 MB (stat).

use crate::ids::IdTable;

/// The operation named in the error for a list entry refused by [`FileList::refuse_dot_dot`].
pub const OP_LIST_ENTRY: &str = "list entry";
use crate::packed::MetaColumn;

/// The type of a file, from `st_mode` or `d_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum FileType {
    /// Not known (a plain path list, or `DT_UNKNOWN` in a lite walk).
    Unknown = 0,
    /// Regular file.
    File = 1,
    /// Directory.
    Dir = 2,
    /// Symbolic link.
    Symlink = 3,
    /// Named pipe.
    Fifo = 4,
    /// Unix socket.
    Socket = 5,
    /// Block device.
    BlockDev = 6,
    /// Character device.
    CharDev = 7,
}

impl FileType {
    /// The type encoded in `st_mode`.
    pub fn from_mode(mode: u32) -> FileType {
        match mode & libc::S_IFMT {
            libc::S_IFREG => FileType::File,
            libc::S_IFDIR => FileType::Dir,
            libc::S_IFLNK => FileType::Symlink,
            libc::S_IFIFO => FileType::Fifo,
            libc::S_IFSOCK => FileType::Socket,
            libc::S_IFBLK => FileType::BlockDev,
            libc::S_IFCHR => FileType::CharDev,
            _ => FileType::Unknown,
        }
    }

    /// Inverse of `as u8`; unknown values give `Unknown`.
    pub fn from_u8(v: u8) -> FileType {
        match v {
            1 => FileType::File,
            2 => FileType::Dir,
            3 => FileType::Symlink,
            4 => FileType::Fifo,
            5 => FileType::Socket,
            6 => FileType::BlockDev,
            7 => FileType::CharDev,
            _ => FileType::Unknown,
        }
    }

    /// The letter of the text list format: `F`, `D`, `L`, or `U` for anything else.
    pub fn text_letter(self) -> u8 {
        match self {
            FileType::File => b'F',
            FileType::Dir => b'D',
            FileType::Symlink => b'L',
            _ => b'U',
        }
    }

    /// Inverse of [`FileType::text_letter`]; `None` for a byte that is no type letter.
    pub fn from_text_letter(b: u8) -> Option<FileType> {
        match b {
            b'F' => Some(FileType::File),
            b'D' => Some(FileType::Dir),
            b'L' => Some(FileType::Symlink),
            b'U' => Some(FileType::Unknown),
            _ => None,
        }
    }
}

/// Whether a list carries stat metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Paths and types only (lite walk, text lists).
    Lite,
    /// Paths, types and [`Meta`] for every record.
    Stat,
}

/// What `stat` told about a file. Times are seconds since the epoch plus nanoseconds.
///
/// `Ord` compares the fields in declaration order: an arbitrary but fixed total order, used
/// as the last tie-break of sorts so that their result does not depend on the rank count.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[repr(C)]
pub struct Meta {
    /// Full `st_mode`, type bits included.
    pub mode: u32,
    /// Owner id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Nanoseconds of the access time.
    pub atime_nsec: u32,
    /// Nanoseconds of the modification time.
    pub mtime_nsec: u32,
    /// Nanoseconds of the change time.
    pub ctime_nsec: u32,
    /// Access time, seconds.
    pub atime: i64,
    /// Modification time, seconds.
    pub mtime: i64,
    /// Status change time, seconds.
    pub ctime: i64,
    /// Size in bytes (`st_size`).
    pub size: u64,
    /// Hard links (0 when unknown, e.g. read from a v4 list).
    pub nlink: u64,
    /// Inode number (0 when unknown).
    pub ino: u64,
    /// Device number (0 when unknown).
    pub dev: u64,
}

/// Bytes of an encoded [`Meta`] (between ranks; a list stores it in 20 to 36: [`crate::packed`]).
pub const META_BYTES: usize = 80;

impl Meta {
    /// From a `stat` result.
    pub fn from_stat(st: &rustix::fs::Stat) -> Meta {
        Meta {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            atime: st.st_atime,
            atime_nsec: st.st_atime_nsec as u32,
            mtime: st.st_mtime,
            mtime_nsec: st.st_mtime_nsec as u32,
            ctime: st.st_ctime,
            ctime_nsec: st.st_ctime_nsec as u32,
            size: st.st_size as u64,
            nlink: st.st_nlink,
            ino: st.st_ino,
            dev: st.st_dev,
        }
    }

    /// The type from the mode bits.
    pub fn file_type(&self) -> FileType {
        FileType::from_mode(self.mode)
    }

    /// Append the little-endian encoding (`META_BYTES` bytes) used between ranks.
    pub fn encode(&self, out: &mut Vec<u8>) {
        for v in [
            self.mode,
            self.uid,
            self.gid,
            self.atime_nsec,
            self.mtime_nsec,
            self.ctime_nsec,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.atime, self.mtime, self.ctime] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.size, self.nlink, self.ino, self.dev] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// Inverse of [`Meta::encode`]; `b` holds at least `META_BYTES` bytes.
    pub fn decode(b: &[u8]) -> Meta {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("u32"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("u64"));
        Meta {
            mode: u32_at(0),
            uid: u32_at(4),
            gid: u32_at(8),
            atime_nsec: u32_at(12),
            mtime_nsec: u32_at(16),
            ctime_nsec: u32_at(20),
            atime: u64_at(24) as i64,
            mtime: u64_at(32) as i64,
            ctime: u64_at(40) as i64,
            size: u64_at(48),
            nlink: u64_at(56),
            ino: u64_at(64),
            dev: u64_at(72),
        }
    }
}

/// A borrowed view of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Absolute, normalised path.
    pub path: &'a [u8],
    /// Type.
    pub kind: FileType,
    /// Metadata, for stat lists (a copy: the list stores it packed).
    pub meta: Option<Meta>,
}

/// One rank's records, plus the user and group tables of the list.
#[derive(Clone, Debug)]
pub struct FileList {
    detail: Detail,
    paths: Vec<u8>,
    /// The low 32 bits of each record's end offset in `paths` (4 bytes a record, not 8).
    ends: Vec<u32>,
    /// `wraps[k]`: the first record whose end offset is at least `(k + 1) * 2^32`, so the
    /// high bits of record `i`'s end are the number of entries `<= i` (none below 4 GiB of
    /// paths on one rank, the usual case).
    wraps: Vec<usize>,
    /// Lite lists: the type of every record. Stat lists: empty while every record's type is
    /// the one its mode names (what walks give), the type of every record otherwise.
    kinds: Vec<FileType>,
    /// Stat lists: every record's metadata, packed.
    metas: MetaColumn,
    /// Users known to the list (written into v4 files; used to print and sort by name).
    pub users: IdTable,
    /// Groups known to the list.
    pub groups: IdTable,
}

impl FileList {
    /// An empty list.
    pub fn new(detail: Detail) -> FileList {
        FileList {
            detail,
            paths: Vec::new(),
            ends: Vec::new(),
            wraps: Vec::new(),
            kinds: Vec::new(),
            metas: MetaColumn::default(),
            users: IdTable::default(),
            groups: IdTable::default(),
        }
    }

    /// An empty list with the same detail and id tables as `self`.
    pub fn empty_like(&self) -> FileList {
        FileList {
            users: self.users.clone(),
            groups: self.groups.clone(),
            ..FileList::new(self.detail)
        }
    }

    /// Whether records carry [`Meta`].
    pub fn detail(&self) -> Detail {
        self.detail
    }

    /// Records on this rank.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when this rank holds no record.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes of all paths on this rank.
    pub fn path_bytes(&self) -> usize {
        self.paths.len()
    }

    /// Add a record. `meta` is required for stat lists and ignored for lite lists.
    pub fn push(&mut self, path: &[u8], kind: FileType, meta: Option<Meta>) {
        self.paths.extend_from_slice(path);
        self.push_end(self.paths.len());
        match self.detail {
            Detail::Lite => self.kinds.push(kind),
            Detail::Stat => {
                let meta = meta.expect("a stat list needs metadata for every record");
                self.push_kind(kind, &meta);
                self.metas.push(&meta);
            }
        }
    }

    /// Record the end offset of the record being added (its path is in `paths`).
    fn push_end(&mut self, end: usize) {
        let i = self.ends.len();
        while ((self.wraps.len() as u64 + 1) << 32) <= end as u64 {
            self.wraps.push(i);
        }
        self.ends.push(end as u32);
    }

    /// Stat lists: keep the type of the record being added (before its `meta` is pushed)
    /// when it is not the one its mode names.
    fn push_kind(&mut self, kind: FileType, meta: &Meta) {
        if self.kinds.is_empty() && kind == meta.file_type() {
            return;
        }
        self.materialize_kinds();
        self.kinds.push(kind);
    }

    /// Stat lists: fill the type column from the modes (once a record's type differs).
    fn materialize_kinds(&mut self) {
        if self.detail == Detail::Stat && self.kinds.len() < self.metas.len() {
            self.kinds = self.metas.file_types().collect();
        }
    }

    /// End offset in `paths` of record `i`.
    fn end(&self, i: usize) -> usize {
        end_at(&self.ends, &self.wraps, i)
    }

    /// Copy record `i` of `other` (same detail) to the end of this list.
    pub fn push_from(&mut self, other: &FileList, i: usize) {
        self.push(other.path(i), other.kind(i), other.meta(i));
    }

    /// Path of record `i`.
    pub fn path(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.end(i - 1) };
        &self.paths[start..self.end(i)]
    }

    /// Type of record `i`.
    pub fn kind(&self, i: usize) -> FileType {
        match self.kinds.get(i) {
            Some(&k) => k,
            None => self.metas.file_type(i),
        }
    }

    /// Metadata of record `i` (stat lists), unpacked.
    pub fn meta(&self, i: usize) -> Option<Meta> {
        (i < self.metas.len()).then(|| self.metas.get(i))
    }

    /// Record `i`.
    pub fn entry(&self, i: usize) -> Entry<'_> {
        Entry {
            path: self.path(i),
            kind: self.kind(i),
            meta: self.meta(i),
        }
    }

    /// All records, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Entry<'_>> + '_ {
        (0..self.len()).map(move |i| self.entry(i))
    }

    /// This list without the records whose path has a `..` component, and an error for each
    /// of them (operation [`OP_LIST_ENTRY`], the path as listed). A tool that acts on what a
    /// list names refuses such entries: [`FileList::normalized`] would resolve `..` by name,
    /// the file system resolves it through symlinks (`/data/link/..` is the parent of the
    /// link's target), so the two can name different directories.
    pub fn refuse_dot_dot(self) -> (FileList, Vec<crate::ItemError>) {
        let has = |p: &[u8]| p.split(|&b| b == b'/').any(|c| c == b"..");
        if !self.iter().any(|e| has(e.path)) {
            return (self, Vec::new());
        }
        let mut out = self.empty_like();
        let mut refused = Vec::new();
        for e in self.iter() {
            if has(e.path) {
                refused.push(crate::ItemError::new(
                    e.path,
                    OP_LIST_ENTRY,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "it has a `..` component: refused (the list would resolve it by name, the file system through symlinks); list the path without `..`",
                    ),
                ));
            } else {
                out.push(e.path, e.kind, e.meta);
            }
        }
        (out, refused)
    }

    /// This list with every path made absolute and normal against `cwd`
    /// ([`crate::path::normalize`]): what a list read with `-i` may need, since lists written
    /// by hand or by other tools hold relative paths, `.`, `..` or `//`. Returns the list
    /// itself when every path already is.
    pub fn normalized(self, cwd: &[u8]) -> FileList {
        if self
            .iter()
            .all(|e| crate::path::normalize(e.path, cwd) == e.path)
        {
            return self;
        }
        let mut out = self.empty_like();
        for e in self.iter() {
            out.push(&crate::path::normalize(e.path, cwd), e.kind, e.meta);
        }
        out
    }

    /// Move all records of `other` (same detail) to the end of this list.
    pub fn append(&mut self, other: FileList) {
        assert_eq!(
            self.detail, other.detail,
            "append needs lists of the same detail"
        );
        let base = self.paths.len();
        self.paths.extend_from_slice(&other.paths);
        if self.wraps.is_empty()
            && other.wraps.is_empty()
            && (base + other.paths.len()) as u64 <= u64::from(u32::MAX)
        {
            // No end crosses 4 GiB: the low bits are the whole offsets.
            self.ends
                .extend(other.ends.iter().map(|&e| e + base as u32));
        } else {
            self.ends.reserve(other.len());
            for j in 0..other.len() {
                self.push_end(base + other.end(j));
            }
        }
        if self.detail == Detail::Stat && self.kinds.is_empty() != other.kinds.is_empty() {
            self.materialize_kinds();
            if other.kinds.is_empty() {
                self.kinds.extend(other.metas.file_types());
            }
        }
        self.kinds.extend_from_slice(&other.kinds);
        self.metas.extend_from(&other.metas);
    }

    /// A new list holding the records at `indices`, in that order.
    pub fn select(&self, indices: impl IntoIterator<Item = usize>) -> FileList {
        let indices = indices.into_iter();
        let mut out = self.empty_like();
        // Size the columns up front (sorts select every record): no regrowth, no slack.
        let n = indices.size_hint().0;
        let avg_path = self.paths.len().checked_div(self.len()).unwrap_or(0);
        out.paths.reserve(n * avg_path);
        out.ends.reserve(n);
        if self.detail == Detail::Lite {
            out.kinds.reserve(n);
        } else {
            out.metas.reserve(n);
        }
        for i in indices {
            out.push_from(self, i);
        }
        out
    }

    /// Keep the records for which `keep` is true, in their order. In place: the list is
    /// compacted where it is, so no second copy of it is ever held (the capacity stays; see
    /// [`FileList::shrink_to_fit`]).
    pub fn retain(&mut self, mut keep: impl FnMut(Entry<'_>) -> bool) {
        let wraps = std::mem::take(&mut self.wraps);
        let stat = self.detail == Detail::Stat;
        let (mut start, mut kept, mut at) = (0usize, 0usize, 0usize);
        for i in 0..self.len() {
            // Record `i` is read before anything at `kept <= i` is written.
            let end = end_at(&self.ends, &wraps, i);
            let kind = match self.kinds.get(i) {
                Some(&k) => k,
                None => self.metas.file_type(i),
            };
            let entry = Entry {
                path: &self.paths[start..end],
                kind,
                meta: stat.then(|| self.metas.get(i)),
            };
            if keep(entry) {
                self.paths.copy_within(start..end, at);
                at += end - start;
                while ((self.wraps.len() as u64 + 1) << 32) <= at as u64 {
                    self.wraps.push(kept);
                }
                self.ends[kept] = at as u32;
                if !self.kinds.is_empty() {
                    self.kinds[kept] = kind;
                }
                if stat {
                    self.metas.move_down(i, kept);
                }
                kept += 1;
            }
            start = end;
        }
        self.paths.truncate(at);
        self.ends.truncate(kept);
        self.kinds.truncate(kept);
        self.metas.truncate(kept);
    }

    /// A new list of the records for which `keep` is true, in their order (with the same detail
    /// and id tables). `keep` runs on this rank's records in parallel, on rayon's threads: use
    /// it for tests that cost (a `stat`, a hash, a regex); the list of each rank is filtered on
    /// its own, so no collective is involved.
    ///
    /// ```
    /// use flist::{Detail, FileList, FileType};
    /// let mut list = FileList::new(Detail::Lite);
    /// for p in ["/d", "/d/a.c", "/d/b.h", "/d/c.c"] {
    ///     list.push(p.as_bytes(), FileType::File, None);
    /// }
    /// let sources = list.filter_par(|e| e.path.ends_with(b".c"));
    /// let paths: Vec<&[u8]> = sources.iter().map(|e| e.path).collect();
    /// assert_eq!(paths, [&b"/d/a.c"[..], b"/d/c.c"]);
    /// ```
    pub fn filter_par(&self, keep: impl Fn(Entry<'_>) -> bool + Sync) -> FileList {
        use rayon::prelude::*;
        let picked: Vec<usize> = (0..self.len())
            .into_par_iter()
            .filter(|&i| keep(self.entry(i)))
            .collect();
        self.select(picked)
    }

    /// Keep the records for which `keep` is true, testing them in parallel: the in-place form
    /// of [`FileList::filter_par`].
    pub fn retain_par(&mut self, keep: impl Fn(Entry<'_>) -> bool + Sync) {
        use rayon::prelude::*;
        // One byte a record for the verdicts, then compacted in place (no second list).
        let verdicts: Vec<bool> = (0..self.len())
            .into_par_iter()
            .map(|i| keep(self.entry(i)))
            .collect();
        let mut next = verdicts.iter();
        self.retain(|_| *next.next().expect("a verdict per record"));
    }

    /// Give back spare capacity (after a walk or a read).
    pub fn shrink_to_fit(&mut self) {
        self.paths.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.wraps.shrink_to_fit();
        self.kinds.shrink_to_fit();
        self.metas.shrink_to_fit();
    }

    /// Heap bytes held by the records (capacity, not length): what a rank pays in memory.
    pub fn heap_bytes(&self) -> usize {
        self.paths.capacity()
            + self.ends.capacity() * 4
            + self.wraps.capacity() * 8
            + self.kinds.capacity()
            + self.metas.heap_bytes()
    }

    /// Append record `i` in the rank-to-rank encoding: `u32 LE path length, path, u8 type,
    /// [Meta]` (the meta part for stat lists only).
    pub fn encode_record(&self, i: usize, out: &mut Vec<u8>) {
        let p = self.path(i);
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
        out.push(self.kind(i) as u8);
        if let Some(m) = self.meta(i) {
            m.encode(out);
        }
    }

    /// Make room for `records` more records holding `path_bytes` bytes of paths, so that
    /// pushing them does not regrow (and leave up to half of) any column.
    pub fn reserve(&mut self, records: usize, path_bytes: usize) {
        self.paths.reserve_exact(path_bytes);
        self.ends.reserve_exact(records);
        if self.detail == Detail::Lite || !self.kinds.is_empty() {
            self.kinds.reserve_exact(records);
        }
        if self.detail == Detail::Stat {
            self.metas.reserve_exact(records);
        }
    }

    /// The records and path bytes encoded in `bytes` (as [`FileList::decode_records`] takes
    /// it, for a list of this list's detail).
    pub fn count_encoded(&self, mut bytes: &[u8]) -> (usize, usize) {
        let meta = match self.detail {
            Detail::Stat => META_BYTES,
            Detail::Lite => 0,
        };
        let (mut records, mut path_bytes) = (0, 0);
        while !bytes.is_empty() {
            let n = u32::from_le_bytes(bytes[..4].try_into().expect("record length")) as usize;
            records += 1;
            path_bytes += n;
            bytes = &bytes[5 + n + meta..];
        }
        (records, path_bytes)
    }

    /// Append every record encoded in `bytes` (a concatenation of [`FileList::encode_record`]
    /// outputs from a list of the same detail).
    pub fn decode_records(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = u32::from_le_bytes(bytes[..4].try_into().expect("record length")) as usize;
            let path = &bytes[4..4 + n];
            let kind = FileType::from_u8(bytes[4 + n]);
            let mut used = 5 + n;
            let meta = match self.detail {
                Detail::Stat => {
                    let m = Meta::decode(&bytes[used..used + META_BYTES]);
                    used += META_BYTES;
                    Some(m)
                }
                Detail::Lite => None,
            };
            self.push(path, kind, meta);
            bytes = &bytes[used..];
        }
    }
}

/// The end offset of record `i` from the low bits `ends` and the 4 GiB crossings `wraps`
/// (see [`FileList`]'s fields).
fn end_at(ends: &[u32], wraps: &[usize], i: usize) -> usize {
    let low = ends[i] as usize;
    if wraps.is_empty() {
        low
    } else {
        low + (wraps.partition_point(|&w| w <= i) << 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(size: u64) -> Meta {
        Meta {
            mode: 0o100644,
            size,
            mtime: -5,
            mtime_nsec: 7,
            ino: 9,
            ..Meta::default()
        }
    }

    #[test]
    fn a_parallel_filter_keeps_the_order_metadata_and_tables_of_what_passes() {
        let mut list = FileList::new(Detail::Stat);
        for i in 0..5000u64 {
            list.push(format!("/d/f{i}").as_bytes(), FileType::File, Some(meta(i)));
        }
        list.users = IdTable {
            entries: vec![(b"seven".to_vec(), 7)],
        };
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let odd = list.filter_par(|e| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            e.meta.unwrap().size % 2 == 1
        });
        assert_eq!(calls.into_inner(), 5000, "each record tested once");
        assert_eq!(odd.len(), 2500);
        assert_eq!(odd.detail(), Detail::Stat);
        assert_eq!(odd.users, list.users);
        for (j, e) in odd.iter().enumerate() {
            let i = 2 * j as u64 + 1;
            assert_eq!(e.path, format!("/d/f{i}").as_bytes());
            assert_eq!(e.meta, Some(meta(i)));
        }
        let mut all = list.clone();
        all.retain_par(|_| true);
        assert_eq!(all.len(), 5000);
        all.retain_par(|e| e.path.ends_with(b"7"));
        assert_eq!(all.len(), 500);
        assert!(all.iter().all(|e| e.path.ends_with(b"7")));
        assert!(list.filter_par(|_| false).is_empty());
        assert!(FileList::new(Detail::Lite).filter_par(|_| true).is_empty());
    }

    #[test]
    fn records_round_trip_through_the_rank_encoding() {
        let mut a = FileList::new(Detail::Stat);
        a.push(b"/a", FileType::File, Some(meta(1)));
        a.push(b"/a/\xff|x", FileType::File, Some(meta(2)));
        a.push(b"", FileType::Dir, Some(meta(3)));
        let mut bytes = Vec::new();
        for i in 0..a.len() {
            a.encode_record(i, &mut bytes);
        }
        let mut b = FileList::new(Detail::Stat);
        b.decode_records(&bytes);
        assert_eq!(b.len(), 3);
        for i in 0..3 {
            assert_eq!(a.entry(i), b.entry(i));
        }
    }

    #[test]
    fn stat_lists_keep_a_type_the_mode_does_not_name() {
        let file = meta(1);
        let mut a = FileList::new(Detail::Stat);
        a.push(b"/a", FileType::File, Some(file));
        let dir = Meta {
            mode: 0o040755,
            ..meta(2)
        };
        a.push(b"/b", FileType::Dir, Some(dir));
        assert_eq!(a.kinds.len(), 0, "types read from the modes: no column");
        let mut b = FileList::new(Detail::Stat);
        b.push(b"/c", FileType::Unknown, Some(file));
        b.push(b"/d", FileType::File, Some(file));
        assert_eq!(b.kinds.len(), 2, "a type the mode does not name: a column");
        let want = |l: &FileList| (0..l.len()).map(|i| l.kind(i)).collect::<Vec<_>>();
        let mut ab = a.clone();
        ab.append(b.clone());
        assert_eq!(
            want(&ab),
            [
                FileType::File,
                FileType::Dir,
                FileType::Unknown,
                FileType::File
            ]
        );
        let mut ba = b.clone();
        ba.append(a.clone());
        assert_eq!(
            want(&ba),
            [
                FileType::Unknown,
                FileType::File,
                FileType::File,
                FileType::Dir
            ]
        );
        assert_eq!(ba.path(3), b"/b");
        ba.retain(|e| e.path != b"/d");
        assert_eq!(
            want(&ba),
            [FileType::Unknown, FileType::File, FileType::Dir]
        );
        let picked = ab.select([2, 0]);
        assert_eq!(want(&picked), [FileType::Unknown, FileType::File]);
        let mut bytes = Vec::new();
        for i in 0..ab.len() {
            ab.encode_record(i, &mut bytes);
        }
        let mut decoded = FileList::new(Detail::Stat);
        decoded.decode_records(&bytes);
        assert_eq!(want(&decoded), want(&ab));
    }

    #[test]
    fn a_stat_record_costs_its_path_plus_24_bytes_and_an_own_atime_12_more() {
        // Files of one owner, mode and device, written once: atime = mtime = ctime.
        let n = 10_000;
        let m = |i: usize, read: i64| Meta {
            dev: 2049,
            nlink: 1,
            mtime: 1_700_000_000 + i as i64,
            mtime_nsec: 999_999_999,
            atime: 1_700_000_000 + i as i64 + read,
            atime_nsec: 999_999_999,
            ctime: 1_700_000_000 + i as i64,
            ctime_nsec: 999_999_999,
            ..meta(i as u64)
        };
        let mut list = FileList::new(Detail::Stat);
        for i in 0..n {
            list.push(
                format!("/d/f{i:07}").as_bytes(),
                FileType::File,
                Some(m(i, 0)),
            );
        }
        list.shrink_to_fit();
        // 4 (end offset) + 20 (packed metadata); one class.
        let class = list.metas.heap_bytes() - n * 20;
        assert!(class < 200, "one class: {class} bytes");
        assert_eq!(list.heap_bytes(), list.path_bytes() + n * (4 + 20) + class);
        // One file read since it was written: its atime is kept aside (12 bytes).
        list.push(b"/d/read", FileType::File, Some(m(n, 60)));
        list.shrink_to_fit();
        assert_eq!(
            list.heap_bytes(),
            list.path_bytes() + (n + 1) * (4 + 20) + 12 + class
        );
        let last = list.meta(n).unwrap();
        assert_eq!(last.atime, 1_700_000_000 + n as i64 + 60);
        assert_eq!(last.ctime, last.mtime);
        assert_eq!(list.meta(n - 1), Some(m(n - 1, 0)));
    }

    #[test]
    fn end_offsets_past_4_gib_keep_their_high_bits() {
        // The offsets alone (no 4 GiB of paths): what push records for them, and reads back.
        let mut l = FileList::new(Detail::Lite);
        let ends = [10u64, 1 << 32, (1 << 32) + 7, (3 << 32) + 1, (3 << 32) + 2];
        for &e in &ends {
            l.push_end(e as usize);
        }
        assert_eq!(l.wraps, [1, 3, 3]);
        for (i, &e) in ends.iter().enumerate() {
            assert_eq!(l.end(i) as u64, e, "record {i}");
        }
    }

    #[test]
    fn retain_compacts_in_place_and_keeps_order_metadata_and_tables() {
        let mut list = FileList::new(Detail::Stat);
        for i in 0..1000u64 {
            let p = format!("/d/{}{i}", "x".repeat(i as usize % 13));
            list.push(p.as_bytes(), FileType::File, Some(meta(i)));
        }
        list.users = IdTable {
            entries: vec![(b"u".to_vec(), 1)],
        };
        let want = list.filter_par(|e| e.meta.unwrap().size % 3 != 0);
        let capacity = list.paths.capacity();
        list.retain(|e| e.meta.unwrap().size % 3 != 0);
        assert_eq!(list.paths.capacity(), capacity, "compacted where it is");
        assert_eq!(list.len(), want.len());
        assert_eq!(list.users, want.users);
        for i in 0..want.len() {
            assert_eq!(list.entry(i), want.entry(i));
        }
        list.retain_par(|e| e.path.len() % 2 == 0);
        assert!(list.iter().all(|e| e.path.len() % 2 == 0));
        assert_eq!(
            list.len(),
            want.iter().filter(|e| e.path.len() % 2 == 0).count()
        );
        list.retain(|_| false);
        assert!(list.is_empty() && list.path_bytes() == 0);
    }

    #[test]
    fn select_append_retain() {
        let mut a = FileList::new(Detail::Lite);
        for p in [&b"/x"[..], b"/y", b"/z"] {
            a.push(p, FileType::File, None);
        }
        let mut b = a.select([2, 0]);
        assert_eq!(b.path(0), b"/z");
        b.append(a.clone());
        assert_eq!(b.len(), 5);
        assert_eq!(b.path(4), b"/z");
        b.retain(|e| e.path != b"/z");
        assert_eq!(
            b.iter().map(|e| e.path.to_vec()).collect::<Vec<_>>(),
            vec![b"/x".to_vec(), b"/x".to_vec(), b"/y".to_vec()]
        );
    }
}
