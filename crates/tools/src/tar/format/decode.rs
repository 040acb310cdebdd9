//! Decoding the entry at a known offset of an archive through a read callback: the chain of
//! extension headers (pax `x` and `g`, GNU `L` and `K`) up to the entry's own block, whose
//! fields are read through the crate's [`tar::Header`] views. Kept from the crate: its
//! `Archive` reads front to back from an `io::Read` (ranks start at offsets of their own, and a
//! scan tries offsets that may not be headers), applies no global header, is lenient where the
//! archive corpus pins a refusal, and stops at the first error without saying where.

use super::encode::mark_record;
use super::globals::{fold_globals, global_records, Global, Record};
use super::number::{checksum_ok, cstr, is_zero, parse_number, parse_unsigned};
use super::pax::{parse_pax, Extensions};
use super::sparse::{
    check_map, old_gnu_real_size, old_gnu_sparse_map, pax_1_0_map, sparse_invalid,
};
use super::{
    round_up, view, BlockKind, Decoded, Header, HeaderError, Kind, BLOCK, BLOCK_USIZE,
    MAX_EXTENSION_SIZE,
};
use std::borrow::Cow;
use std::io;

/// Offset of the magic and version fields (bytes), from the crate's layout.
const MAGIC: usize = std::mem::offset_of!(tar::UstarHeader, magic);

/// The type flag of a block (the crate's `typeflag` field).
fn flag_of(block: &[u8]) -> u8 {
    view(block).as_old().linkflag[0]
}

/// Whether the tar stream whose first bytes are `head` (up to [`super::MARK_HEAD`]) starts with
/// mfu-rs's mark ([`super::MFU_MARK`]): its first block a pax `x` header with a good checksum whose
/// first record is the mark. False for anything else, damage included.
pub fn mfu_marked(head: &[u8]) -> bool {
    let mark = mark_record();
    head.len() >= BLOCK_USIZE + mark.len()
        && flag_of(head) == b'x'
        && checksum_ok(&head[..BLOCK_USIZE])
        && parse_number(&view(head).as_old().size).is_some_and(|s| s >= mark.len() as i128)
        && head[BLOCK_USIZE..BLOCK_USIZE + mark.len()] == mark[..]
}

/// True when data follows a header with this type flag: regular files (`0`, NUL, `7`) and any
/// unknown flag; false for `1`..`6` (links, devices, dirs, fifos). (Extension headers x/g/L/K
/// always carry their data; callers handle those separately.)
pub fn flag_has_data(flag: u8) -> bool {
    !(b'1'..=b'6').contains(&flag)
}

/// Whether a block's type flag says pax global header (`g`), before any check of the block:
/// lets a caller skip [`classify`]'s checksum for the blocks that cannot be one.
pub fn flags_global(block: &[u8]) -> bool {
    block.get(std::mem::offset_of!(tar::OldHeader, linkflag)) == Some(&b'g')
}

/// Classify one 512-byte block (checksum verified; unsigned OR signed byte sum accepted).
///
/// A block shorter than 512 bytes, with a bad checksum or an unreadable (or negative) size
/// field is [`BlockKind::NotHeader`]; `size` is in bytes.
pub fn classify(block: &[u8]) -> BlockKind {
    if block.len() < BLOCK_USIZE {
        return BlockKind::NotHeader;
    }
    let block = &block[..BLOCK_USIZE];
    if is_zero(block) {
        return BlockKind::Zero;
    }
    if !checksum_ok(block) {
        return BlockKind::NotHeader;
    }
    match parse_unsigned(&view(block).as_old().size) {
        Some(size) => BlockKind::Header {
            flag: flag_of(block),
            size,
        },
        None => BlockKind::NotHeader,
    }
}

/// `len` bytes at `off`, or Truncated{`header`} when the stream ends first.
pub(super) fn read_exact(
    read: &mut dyn FnMut(u64, usize) -> io::Result<Vec<u8>>,
    off: u64,
    len: usize,
    header: u64,
) -> Result<Vec<u8>, HeaderError> {
    let mut bytes = read(off, len).map_err(|source| HeaderError::Io {
        offset: off,
        source,
    })?;
    if bytes.len() < len {
        return Err(HeaderError::Truncated { offset: header });
    }
    bytes.truncate(len);
    Ok(bytes)
}

/// Decode the entry whose first header block is at `offset` of the archive stream, following
/// any number of extension headers (pax `x`, `g`, GNU `L`/`K`) up to the real header.
/// `read(off, len)` returns `len` bytes at `off` of the archive stream, or fewer at its end.
/// Ok(None) when the block at `offset` is all zeros (end of archive).
///
/// Offsets are bytes. No pax global header (`g`) before `offset` is applied (see
/// `decode_entry_in`); one inside the entry's chain of extension headers is. Extension data
/// above 64 MiB is rejected as `HeaderError::Invalid`, and so is an all-zero block right
/// after an extension header. The returned path has its trailing `/` removed (`/` stays `/`,
/// `./` becomes `.`).
pub fn decode_entry(
    read: &mut dyn FnMut(u64, usize) -> std::io::Result<Vec<u8>>,
    offset: u64,
) -> Result<Option<Decoded>, HeaderError> {
    decode_entry_in(read, offset, &[], None)
}

/// [`decode_entry`] with the records of the pax global headers in effect at `offset`
/// (`globals`: [`super::Globals::at`]) applied before the entry's own `x` records, which override
/// them. A global header inside the entry's chain applies to it and, through `seen` (pushed in
/// order), to the entries after it. A malformed global header is an error.
pub fn decode_entry_in(
    read: &mut dyn FnMut(u64, usize) -> std::io::Result<Vec<u8>>,
    offset: u64,
    globals: &[Record],
    mut seen: Option<&mut Vec<Global>>,
) -> Result<Option<Decoded>, HeaderError> {
    let mut ext = Extensions::default();
    let mut globals: Cow<'_, [Record]> = Cow::Borrowed(globals);
    // The entry's own pax records, applied after the global ones whatever their order in
    // the chain (GNU tar does the same).
    let mut own: Vec<(Vec<Record>, u64)> = Vec::new();
    let mut long_name: Option<Vec<u8>> = None;
    let mut long_link: Option<Vec<u8>> = None;
    let mut pos = offset;
    let block = loop {
        let block = read_exact(read, pos, BLOCK_USIZE, pos)?;
        if is_zero(&block) {
            if pos == offset {
                return Ok(None);
            }
            return Err(HeaderError::Invalid {
                offset: pos,
                what: "end-of-archive block right after an extension header".into(),
            });
        }
        if !checksum_ok(&block) {
            return Err(HeaderError::Checksum { offset: pos });
        }
        let flag = flag_of(&block);
        if !matches!(flag, b'x' | b'g' | b'L' | b'K') {
            break block;
        }
        let size = parse_unsigned(&view(&block).as_old().size)
            .filter(|&s| s <= MAX_EXTENSION_SIZE)
            .ok_or_else(|| HeaderError::Invalid {
                offset: pos,
                what: format!("bad size field in a '{}' extension header", flag as char),
            })?;
        let data = read_exact(read, pos + BLOCK, size as usize, pos)?;
        match flag {
            b'x' => own.push((parse_pax(&data, pos)?, pos)),
            b'g' => {
                let records = global_records(parse_pax(&data, pos)?);
                fold_globals(globals.to_mut(), &records);
                if let Some(seen) = seen.as_deref_mut() {
                    seen.push(Global {
                        from: pos + BLOCK + round_up(size),
                        records,
                    });
                }
            }
            b'L' => long_name = Some(cstr(&data).to_vec()),
            _ => long_link = Some(cstr(&data).to_vec()),
        }
        pos += BLOCK + round_up(size);
    };
    if !globals.is_empty() {
        ext.apply_pax(globals.into_owned(), offset)?;
    }
    for (records, at) in own {
        ext.apply_pax(records, at)?;
    }
    let pax_sparse = std::mem::take(&mut ext.sparse);
    let mut header = parse_ustar(&block, pos, ext, long_name, long_link)?;
    let flag = flag_of(&block);
    let mut data = pos + BLOCK;
    let next_after = |data: u64, stored: u64| {
        stored
            .checked_add(BLOCK - 1)
            .and_then(|s| data.checked_add(s / BLOCK * BLOCK))
            .ok_or_else(|| HeaderError::Invalid {
                offset: pos,
                what: format!("size {stored} runs past the largest offset"),
            })
    };
    let mut sparse = None;
    let next = if flag == b'S' {
        // Old GNU sparse: extension blocks after the header, then the segments' data.
        let (extra, map) = old_gnu_sparse_map(read, pos, &block)?;
        data += extra;
        let real_size = old_gnu_real_size(&block, pos)?;
        check_map(&map, real_size, header.size, pos)?;
        let next = next_after(data, header.size)?;
        header.size = real_size;
        header.kind = Kind::File;
        sparse = Some(map);
        next
    } else if header.kind == Kind::File
        && (pax_sparse.major.is_some()
            || pax_sparse.real_size.is_some()
            || !pax_sparse.map.is_empty())
    {
        let next = next_after(data, header.size)?;
        let mut stored = header.size;
        let map = if pax_sparse.major == Some(1) {
            let (map_len, map) = pax_1_0_map(read, data, stored, pos)?;
            stored = stored
                .checked_sub(map_len)
                .ok_or_else(|| sparse_invalid(pos, "the 1.0 map runs past the data"))?;
            data += map_len;
            map
        } else if pax_sparse.major.is_some() {
            return Err(sparse_invalid(pos, "unknown GNU.sparse.major version"));
        } else {
            if pax_sparse.pending.is_some() {
                return Err(sparse_invalid(pos, "an offset without numbytes"));
            }
            pax_sparse.map
        };
        if pax_sparse.count.is_some_and(|c| c != map.len() as u64) {
            return Err(sparse_invalid(
                pos,
                "GNU.sparse.numblocks does not match its map",
            ));
        }
        let real_size = pax_sparse
            .real_size
            .ok_or_else(|| sparse_invalid(pos, "no GNU.sparse.size or realsize"))?;
        check_map(&map, real_size, stored, pos)?;
        if let Some(mut name) = pax_sparse.name {
            while name.len() > 1 && name.ends_with(b"/") {
                name.pop();
            }
            header.path = name;
        }
        header.size = real_size;
        sparse = Some(map);
        next
    } else if flag_has_data(flag) {
        next_after(data, header.size)?
    } else {
        data
    };
    Ok(Some(Decoded {
        header,
        start: offset,
        data,
        next,
        sparse,
    }))
}

/// Decodes a real (non-extension) header block at archive byte `offset`, then applies the
/// extensions that preceded it. The fields are the crate's; their values are read as GNU tar
/// reads them ([`parse_number`]), and the ustar fields (prefix, names, devices) whenever the
/// magic is `ustar\0`, whatever the version bytes (the crate wants `00`).
fn parse_ustar(
    block: &[u8],
    offset: u64,
    ext: Extensions,
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
) -> Result<Header, HeaderError> {
    // A copy of the block viewed as the crate's header (not `Header::new_old`, which formats
    // an mtime of 0 only for the copy to overwrite it: a measurable cost per entry).
    let mut bytes = [0u8; BLOCK_USIZE];
    bytes.copy_from_slice(&block[..BLOCK_USIZE]);
    let posix = &block[MAGIC..MAGIC + 6] == b"ustar\0";
    if posix {
        bytes[MAGIC + 6..MAGIC + 8].copy_from_slice(b"00");
    }
    let h = super::view(&bytes);
    let ustar = h.as_ustar();
    let gnu = h.as_gnu();
    let old = h.as_old();
    let number = |f: &[u8], what: &str| {
        parse_number(f).ok_or_else(|| HeaderError::Invalid {
            offset,
            what: format!("bad {what} field"),
        })
    };
    let unsigned = |f: &[u8], what: &str| {
        number(f, what).and_then(|v| {
            u64::try_from(v).map_err(|_| HeaderError::Invalid {
                offset,
                what: format!("{what} field out of range"),
            })
        })
    };
    let dev = |f: &[u8], what: &str| {
        unsigned(f, what).and_then(|v| {
            u32::try_from(v).map_err(|_| HeaderError::Invalid {
                offset,
                what: format!("{what} field out of range"),
            })
        })
    };

    let mut path = match long_name {
        Some(name) => name,
        // The prefix joined to the name by the crate; the old GNU format has no prefix.
        None => match ustar {
            Some(u) => u.path_bytes().into_owned(),
            None => cstr(&old.name).to_vec(),
        },
    };
    if let Some(p) = ext.path {
        path = p;
    }
    let flag = old.linkflag[0];
    let kind = match flag {
        b'0' | 0 | b'7' if path.ends_with(b"/") => Kind::Dir,
        b'0' | 0 | b'7' => Kind::File,
        b'1' => Kind::HardLink,
        b'2' => Kind::Symlink,
        b'3' => Kind::Char,
        b'4' => Kind::Block,
        b'5' => Kind::Dir,
        b'6' => Kind::Fifo,
        // A GNU dumpdir (incremental archives): a directory whose data lists its contents.
        b'D' => Kind::Dir,
        other => Kind::Other(other),
    };
    while path.len() > 1 && path.ends_with(b"/") {
        path.pop();
    }

    // Owner names and device numbers: ustar and GNU headers have them, v7 ones do not.
    let names_and_devices = match (ustar, gnu) {
        (Some(u), _) => Some((
            u.username_bytes(),
            u.groupname_bytes(),
            &u.dev_major,
            &u.dev_minor,
        )),
        (None, Some(g)) => Some((
            g.username_bytes(),
            g.groupname_bytes(),
            &g.dev_major,
            &g.dev_minor,
        )),
        (None, None) => None,
    };
    let (uname, gname) = match names_and_devices {
        Some((u, g, _, _)) => (u.to_vec(), g.to_vec()),
        None => (Vec::new(), Vec::new()),
    };
    // Device numbers mean something only for devices (GNU tar reads them only then; some tars
    // leave the fields blank otherwise).
    let (dev_major, dev_minor) = match names_and_devices {
        Some((_, _, major, minor)) if matches!(kind, Kind::Char | Kind::Block) => {
            (dev(major, "devmajor")?, dev(minor, "devminor")?)
        }
        _ => (0, 0),
    };
    let mtime_field = number(&old.mtime, "mtime")?;
    let (mtime, mtime_nsec) = match ext.mtime {
        Some(t) => t,
        None => (
            i64::try_from(mtime_field).map_err(|_| HeaderError::Invalid {
                offset,
                what: "mtime field out of range".into(),
            })?,
            0,
        ),
    };
    let mode = u32::try_from(unsigned(&old.mode, "mode")? & 0o7777).unwrap_or(0);
    Ok(Header {
        path,
        kind,
        mode,
        uid: match ext.uid {
            Some(v) => v,
            None => unsigned(&old.uid, "uid")?,
        },
        gid: match ext.gid {
            Some(v) => v,
            None => unsigned(&old.gid, "gid")?,
        },
        uname: ext.uname.unwrap_or(uname),
        gname: ext.gname.unwrap_or(gname),
        size: match ext.size {
            Some(v) => v,
            None => unsigned(&old.size, "size")?,
        },
        mtime,
        mtime_nsec,
        link: ext
            .link
            .or(long_link)
            .unwrap_or_else(|| cstr(&old.linkname).to_vec()),
        dev_major,
        dev_minor,
        xattrs: ext.xattrs,
        projid: ext.projid,
    })
}
