//! Encoding an entry's header blocks. The ustar block is the crate's [`tar::Header`]; kept
//! here: which fields need pax records and in what order (today's archives, byte for byte),
//! the length of the encoding planned before writing it (a rank places its entries before it
//! encodes them), and GNU tar's `PaxHeaders/NAME` header names (the crate's `Builder` names
//! them otherwise and writes only through `io::Write`).

use super::number::{put_number, seal};
use super::pax::{pax_record, pax_time, put_decimal};
use super::{round_up, Header, Kind, BLOCK_USIZE, PROJID_KEY, PROJINHERIT_KEY};
use std::borrow::Cow;

/// Bytes of the name, link name, owner and group name and prefix fields.
const NAME_LEN: usize = 100;
const LINK_LEN: usize = 100;
const OWNER_LEN: usize = 32;
const PREFIX_LEN: usize = 155;
/// Largest value of an 11-digit octal field (`size`, `mtime`).
pub(super) const MAX_OCTAL_11: u64 = 0o777_7777_7777;
/// Largest value of a 7-digit octal field (`uid`, `gid`, `devmajor`, `devminor`).
pub(super) const MAX_OCTAL_7: u64 = 0o777_7777;

/// The value of the pax `comment` record of the first entry of every archive mfu-rs writes
/// ([`Header::encode_marked`]). POSIX says a `comment` "shall be ignored": GNU tar, bsdtar and
/// Python read past it. A file name cannot put it there (it is a record of the `x` header).
pub const MFU_MARK: &[u8] =
    b"mfu-rs archive: it ends with its dtar index member and two zero blocks";

/// Bytes of an archive's start that [`super::mfu_marked`] looks at: its first block and the
/// first record of the pax header it is (where [`Header::encode_marked`] puts the mark).
pub const MARK_HEAD: usize = 1024;

/// The pax record [`MFU_MARK`] is, as it is written.
pub(super) fn mark_record() -> Vec<u8> {
    let mut mark = Vec::with_capacity(MFU_MARK.len() + 16);
    pax_record(&mut mark, b"comment", MFU_MARK);
    mark
}

fn has_high_byte(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| b >= 0x80)
}

/// Copies as much of `src` as fits into `dst` (the rest of `dst` stays zero).
pub(super) fn put_bytes(dst: &mut [u8], src: &[u8]) {
    let n = src.len().min(dst.len());
    dst[..n].copy_from_slice(&src[..n]);
}

/// Where a path goes in a ustar block.
#[derive(Debug, PartialEq, Eq)]
enum Placement {
    /// Whole in the name field.
    Name,
    /// `prefix` = path[..at], name = path[at + 1..] (the `/` at `at` is implied).
    Split(usize),
    /// Too long for ustar: pax `path` record.
    Pax,
}

/// Where `path` goes. (The crate's `set_path` splits at another `/` and drops `.` and empty
/// components: the stored path must be the bytes given.)
fn place_path(path: &[u8]) -> Placement {
    if path.len() <= NAME_LEN {
        return Placement::Name;
    }
    // Split at the leftmost '/' that leaves at most 100 bytes of name and 155 of prefix; both
    // must be non-empty (an empty prefix would lose a leading '/').
    let min_at = path.len().saturating_sub(NAME_LEN + 1).max(1);
    let max_at = PREFIX_LEN.min(path.len().saturating_sub(2));
    if min_at > max_at {
        return Placement::Pax;
    }
    path[min_at..=max_at]
        .iter()
        .position(|&b| b == b'/')
        .map_or(Placement::Pax, |i| Placement::Split(min_at + i))
}

/// The values of one ustar block being written.
struct UstarFields<'a> {
    name: &'a [u8],
    prefix: &'a [u8],
    mode: u32,
    uid: u64,
    gid: u64,
    size: u64,
    mtime: i64,
    flag: u8,
    link: &'a [u8],
    uname: &'a [u8],
    gname: &'a [u8],
    dev_major: u32,
    dev_minor: u32,
}

impl UstarFields<'_> {
    /// The block: the crate's ustar header with these values, sealed with GNU's checksum.
    /// The crate's setters write octal, or base-256 past 7 or 11 digits, as GNU tar does; the
    /// few values they cannot take (negative times, ids of 2^56 and more, device numbers
    /// past 7 digits) are written by [`put_number`].
    fn block(&self) -> [u8; BLOCK_USIZE] {
        let mut h = tar::Header::new_ustar();
        h.set_mode(self.mode & 0o7777);
        h.set_size(self.size);
        h.set_entry_type(tar::EntryType::new(self.flag));
        match u64::try_from(self.mtime) {
            Ok(m) => h.set_mtime(m),
            Err(_) => put_number(&mut h.as_old_mut().mtime, i128::from(self.mtime)),
        }
        let fits_8 = |v: u64| v < 1 << 56;
        if fits_8(self.uid) {
            h.set_uid(self.uid);
        }
        if fits_8(self.gid) {
            h.set_gid(self.gid);
        }
        // The crate's device setters write octal only.
        let octal = |v: u32| u64::from(v) <= MAX_OCTAL_7;
        if octal(self.dev_major) {
            h.set_device_major(self.dev_major)
                .expect("ustar has devmajor");
        }
        if octal(self.dev_minor) {
            h.set_device_minor(self.dev_minor)
                .expect("ustar has devminor");
        }
        let u = h.as_ustar_mut().expect("new_ustar is ustar");
        for (field, v, fits) in [
            (&mut u.uid, self.uid, fits_8(self.uid)),
            (&mut u.gid, self.gid, fits_8(self.gid)),
            (
                &mut u.dev_major,
                u64::from(self.dev_major),
                octal(self.dev_major),
            ),
            (
                &mut u.dev_minor,
                u64::from(self.dev_minor),
                octal(self.dev_minor),
            ),
        ] {
            if !fits {
                put_number(field, i128::from(v));
            }
        }
        put_bytes(&mut u.name, self.name);
        put_bytes(&mut u.prefix, self.prefix);
        put_bytes(&mut u.linkname, self.link);
        put_bytes(&mut u.uname, self.uname);
        put_bytes(&mut u.gname, self.gname);
        let mut b = *h.as_bytes();
        seal(&mut b);
        b
    }
}

/// Appends an extension header block (type `flag`, `name`) and its `data`, zero-padded to a
/// block; the header's uid, gid and mtime are `owner`'s, or 0 when they do not fit in octal.
pub(super) fn extension(out: &mut Vec<u8>, flag: u8, name: &[u8], data: &[u8], owner: &Header) {
    let fits = |v: u64, max: u64| if v <= max { v } else { 0 };
    let mtime = u64::try_from(owner.mtime).map_or(0, |m| fits(m, MAX_OCTAL_11));
    let block = UstarFields {
        name,
        prefix: b"",
        mode: 0o644,
        uid: fits(owner.uid, MAX_OCTAL_7),
        gid: fits(owner.gid, MAX_OCTAL_7),
        size: data.len() as u64,
        mtime: mtime as i64,
        flag,
        link: b"",
        uname: b"",
        gname: b"",
        dev_major: 0,
        dev_minor: 0,
    }
    .block();
    out.extend_from_slice(&block);
    out.extend_from_slice(data);
    out.resize(
        out.len() + (round_up(data.len() as u64) as usize - data.len()),
        0,
    );
}

impl Header {
    /// The path as stored: a directory's gets a trailing `/` (unless empty or already there).
    pub(super) fn stored_path(&self) -> Cow<'_, [u8]> {
        if self.kind == Kind::Dir && !self.path.is_empty() && !self.path.ends_with(b"/") {
            let mut p = self.path.clone();
            p.push(b'/');
            Cow::Owned(p)
        } else {
            Cow::Borrowed(&self.path)
        }
    }

    /// `PaxHeaders/` + the basename (bytes >= 0x80 as `_`), at most 100 bytes.
    fn pax_header_name(&self) -> Vec<u8> {
        let trimmed = match self.path.iter().rposition(|&b| b != b'/') {
            Some(last) => &self.path[..=last],
            None => &b""[..],
        };
        let base = match trimmed.iter().rposition(|&b| b == b'/') {
            Some(slash) => &trimmed[slash + 1..],
            None => trimmed,
        };
        let mut name = b"PaxHeaders/".to_vec();
        if base.is_empty() {
            name.push(b'_');
        }
        name.extend(base.iter().map(|&b| if b >= 0x80 { b'_' } else { b }));
        name.truncate(NAME_LEN);
        name
    }

    /// Append this entry's header blocks to `out`: a pax `x` extended header first when needed,
    /// then the ustar block. Returns the bytes appended (a multiple of 512).
    ///
    /// Whatever does not fit ustar (paths over 100 bytes without a usable `/` split, non-ASCII
    /// paths, links and names, sizes and times beyond 11 octal digits, ids beyond 7, negative or
    /// sub-second times, extended attributes) goes to pax records; the ustar block keeps what
    /// fits (truncated strings, GNU base-256 numbers). `hdrcharset=BINARY` is written when a
    /// path, link, uname or gname record is not UTF-8; attribute values are always raw bytes.
    pub fn encode(&self, out: &mut Vec<u8>) -> usize {
        self.encode_with(out, false)
    }

    /// [`Header::encode`] with mfu-rs's mark ([`MFU_MARK`], a pax `comment` record, which
    /// every pax reader ignores) in the pax header: what the first entry of an mfu-rs archive
    /// carries, so that a reader knows the archive must end with its index member and
    /// end-of-archive blocks, and that one cut at an entry boundary is truncated. Returns the
    /// bytes appended.
    pub fn encode_marked(&self, out: &mut Vec<u8>) -> usize {
        self.encode_with(out, true)
    }

    fn encode_with(&self, out: &mut Vec<u8>, marked: bool) -> usize {
        let start = out.len();
        let (path, placement, mut records) = self.pax_records();
        if marked {
            let mut mark = mark_record();
            mark.extend_from_slice(&records);
            records = mark;
        }
        if !records.is_empty() {
            extension(out, b'x', &self.pax_header_name(), &records, self);
        }

        let (prefix, name) = match placement {
            Placement::Split(at) => (&path[..at], &path[at + 1..]),
            Placement::Name | Placement::Pax => (&b""[..], &path[..]),
        };
        let block = UstarFields {
            name,
            prefix,
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            size: self.size,
            mtime: self.mtime,
            flag: self.kind.flag(),
            link: &self.link,
            uname: &self.uname,
            gname: &self.gname,
            dev_major: self.dev_major,
            dev_minor: self.dev_minor,
        }
        .block();
        out.extend_from_slice(&block);
        out.len() - start
    }

    /// The bytes [`Header::encode`] appends, without encoding the blocks.
    pub fn encoded_len(&self) -> usize {
        let (_, _, records) = self.pax_records();
        let pax = if records.is_empty() {
            0
        } else {
            BLOCK_USIZE + round_up(records.len() as u64) as usize
        };
        pax + BLOCK_USIZE
    }

    /// The stored path, where it goes in the ustar block, and the pax records (the data of
    /// the `x` header; empty when none is needed).
    fn pax_records(&self) -> (Cow<'_, [u8]>, Placement, Vec<u8>) {
        let path = self.stored_path();
        let placement = place_path(&path);
        let path_pax = placement == Placement::Pax || has_high_byte(&path);
        let link_pax = self.link.len() > LINK_LEN || has_high_byte(&self.link);
        let size_pax = self.size > MAX_OCTAL_11;
        let uid_pax = self.uid > MAX_OCTAL_7;
        let gid_pax = self.gid > MAX_OCTAL_7;
        let mtime_pax = self.mtime < 0 || self.mtime > MAX_OCTAL_11 as i64 || self.mtime_nsec != 0;
        let uname_pax = self.uname.len() > OWNER_LEN || has_high_byte(&self.uname);
        let gname_pax = self.gname.len() > OWNER_LEN || has_high_byte(&self.gname);

        let strings = [
            (path_pax, &b"path"[..], &path[..]),
            (link_pax, b"linkpath", &self.link),
            (uname_pax, b"uname", &self.uname),
            (gname_pax, b"gname", &self.gname),
        ];
        let mut records = Vec::new();
        if strings
            .iter()
            .any(|(on, _, v)| *on && std::str::from_utf8(v).is_err())
        {
            pax_record(&mut records, b"hdrcharset", b"BINARY");
        }
        for (on, key, value) in &strings[..2] {
            if *on {
                pax_record(&mut records, key, value);
            }
        }
        let numbers = [
            (size_pax, "size", self.size),
            (uid_pax, "uid", self.uid),
            (gid_pax, "gid", self.gid),
        ];
        for (on, key, value) in numbers {
            if on {
                let mut text = Vec::with_capacity(20);
                put_decimal(&mut text, value);
                pax_record(&mut records, key.as_bytes(), &text);
            }
        }
        for (on, key, value) in &strings[2..] {
            if *on {
                pax_record(&mut records, key, value);
            }
        }
        if mtime_pax {
            pax_record(
                &mut records,
                b"mtime",
                &pax_time(self.mtime, self.mtime_nsec),
            );
        }
        for (name, value) in &self.xattrs {
            let mut key = b"SCHILY.xattr.".to_vec();
            key.extend_from_slice(name);
            pax_record(&mut records, &key, value);
        }
        if self.projid.id != 0 {
            let mut text = Vec::with_capacity(10);
            put_decimal(&mut text, u64::from(self.projid.id));
            pax_record(&mut records, PROJID_KEY, &text);
            if self.projid.inherit {
                pax_record(&mut records, PROJINHERIT_KEY, b"1");
            }
        }
        (path, placement, records)
    }
}
