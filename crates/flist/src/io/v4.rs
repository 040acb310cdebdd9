//! Cache format v4 (read and write) and v3 (read): a header of big-endian `u64`s, the user and
//! group tables, then fixed-size records (`docs/formats.md` §1–2).

use super::source::Source;
use super::{bad, cannot_hold, create, read_exact_at, write_all_at, Dest, RegionWriter, IO_CHUNK};
use crate::distribute::even_start;
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::record::{Detail, FileList, FileType, Meta};
use std::fs::File;
use steal::{Comm, CommExt};

/// Bytes of a v4 header: 7 `u64`.
pub(super) const V4_HEADER: u64 = 56;
/// Bytes of a v3 header: 9 `u64`.
pub(super) const V3_HEADER: u64 = 72;
/// Bytes of a record after its path field: 10 `u64`.
pub(super) const META_FIELDS: u64 = 80;
/// Widest name or path field a header may declare (bytes); a larger one is damage, and
/// believing it would make every rank allocate it per record.
const MAX_WIDTH: u64 = 1 << 20;

/// Where everything sits in a v3/v4 file. Widths and offsets in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Layout {
    /// Header bytes: [`V4_HEADER`] or [`V3_HEADER`].
    pub header: u64,
    /// Entries of the user table.
    pub nusers: u64,
    /// Width of a user-name field (UC).
    pub uc: u64,
    /// Entries of the group table.
    pub ngroups: u64,
    /// Width of a group-name field (GC).
    pub gc: u64,
    /// Records.
    pub nfiles: u64,
    /// Width of a path field (FC).
    pub fc: u64,
}

impl Layout {
    /// Decode and check the header at the start of `prefix` (the first bytes of a file of `len`
    /// bytes). The error is the reason for a [`Error::BadList`].
    pub(super) fn parse(prefix: &[u8], len: u64, v3: bool) -> Result<Layout, String> {
        let header = if v3 { V3_HEADER } else { V4_HEADER };
        if (prefix.len() as u64) < header {
            return Err(format!(
                "truncated at byte offset {len}: a version {} header needs {header} bytes",
                if v3 { 3 } else { 4 }
            ));
        }
        let at =
            |i: usize| u64::from_be_bytes(prefix[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        // v3 has walk_start and walk_end before the counts.
        let f = if v3 { 3 } else { 1 };
        let l = Layout {
            header,
            nusers: at(f),
            uc: at(f + 1),
            ngroups: at(f + 2),
            gc: at(f + 3),
            nfiles: at(f + 4),
            fc: at(f + 5),
        };
        for (i, (what, width)) in [("user-name", l.uc), ("group-name", l.gc), ("path", l.fc)]
            .into_iter()
            .enumerate()
        {
            if width > MAX_WIDTH {
                return Err(format!(
                    "implausible {what} width {width} in the header at byte offset {}",
                    (f + 1 + 2 * i) * 8
                ));
            }
        }
        if l.nfiles > 0 && l.fc == 0 {
            return Err(format!(
                "{} records with a path width of 0 in the header",
                l.nfiles
            ));
        }
        let Some(expected) = l.file_len() else {
            return Err("header counts overflow a 64-bit file length".to_string());
        };
        if len < expected {
            let data = l.data_start().expect("checked by file_len");
            let place = if len < data {
                "inside the user/group tables".to_string()
            } else {
                format!(
                    "inside record {} of {}",
                    (len - data) / l.record_bytes(),
                    l.nfiles
                )
            };
            return Err(format!(
                "truncated at byte offset {len} ({place}): its header describes a file of {expected} bytes"
            ));
        }
        if len > expected {
            return Err(format!(
                "{} unexpected bytes after the last record, from byte offset {expected} (the header describes {} records)",
                len - expected,
                l.nfiles
            ));
        }
        Ok(l)
    }

    /// Bytes of the user and group tables (`None` on overflow).
    fn tables_bytes(&self) -> Option<u64> {
        let users = self.nusers.checked_mul(self.uc.checked_add(8)?)?;
        let groups = self.ngroups.checked_mul(self.gc.checked_add(8)?)?;
        users.checked_add(groups)
    }

    /// Offset of the first record.
    fn data_start(&self) -> Option<u64> {
        self.header.checked_add(self.tables_bytes()?)
    }

    /// Bytes of one record: path field plus the 10 `u64`.
    pub(super) fn record_bytes(&self) -> u64 {
        self.fc + META_FIELDS
    }

    /// Length of the whole file (`None` on overflow).
    pub(super) fn file_len(&self) -> Option<u64> {
        self.data_start()?
            .checked_add(self.nfiles.checked_mul(self.record_bytes())?)
    }

    /// Offset of record `index` (of a checked layout, so no overflow).
    pub(super) fn record_offset(&self, index: u64) -> u64 {
        self.data_start().expect("checked layout") + index * self.record_bytes()
    }
}

/// Width of a name or path field for strings of at most `longest` bytes: room for a NUL,
/// rounded up to a multiple of 8; 0 when there is no string (`None`).
pub(super) fn field_width(longest: Option<u64>) -> u64 {
    longest.map_or(0, |n| (n + 1).div_ceil(8) * 8)
}

/// Width of the name field of `table` (0 for an empty table).
pub(super) fn table_width(table: &IdTable) -> u64 {
    field_width(table.entries.iter().map(|(n, _)| n.len() as u64).max())
}

/// The string at the start of a NUL-padded field: up to the first NUL, or all of it.
fn unpad(field: &[u8]) -> &[u8] {
    field
        .iter()
        .position(|&b| b == 0)
        .map_or(field, |n| &field[..n])
}

/// Read the user and group tables of a checked layout.
pub(super) fn read_tables(file: &File, path: &[u8], l: &Layout) -> Result<(IdTable, IdTable)> {
    let mut bytes = vec![0u8; l.tables_bytes().expect("checked layout") as usize];
    read_exact_at(file, path, &mut bytes, l.header)?;
    let (users, groups) = bytes.split_at((l.nusers * (l.uc + 8)) as usize);
    let table = |bytes: &[u8], width: u64| IdTable {
        entries: bytes
            .chunks_exact(width as usize + 8)
            .map(|e| {
                let (name, id) = e.split_at(width as usize);
                (
                    unpad(name).to_vec(),
                    u64::from_be_bytes(id.try_into().expect("8 bytes")),
                )
            })
            .collect(),
    };
    Ok((table(users, l.uc), table(groups, l.gc)))
}

/// Decode one record (`fc + 80` bytes). The error is a reason for a [`Error::BadList`].
fn decode_record(rec: &[u8], fc: usize) -> Result<(&[u8], Meta), &'static str> {
    let (field, nums) = rec.split_at(fc);
    let path = match field.iter().position(|&b| b == 0) {
        None => return Err("its path field has no NUL terminator"),
        Some(0) => return Err("its path is empty"),
        Some(n) => &field[..n],
    };
    let v = |i: usize| u64::from_be_bytes(nums[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let meta = Meta {
        mode: v(0) as u32,
        uid: v(1) as u32,
        gid: v(2) as u32,
        atime: v(3) as i64,
        atime_nsec: v(4) as u32,
        mtime: v(5) as i64,
        mtime_nsec: v(6) as u32,
        ctime: v(7) as i64,
        ctime_nsec: v(8) as u32,
        size: v(9),
        nlink: 0,
        ino: 0,
        dev: 0,
    };
    Ok((path, meta))
}

/// Append the v4 record of `path` and `m`, its path field `fc` bytes wide.
pub(super) fn encode_record(path: &[u8], m: &Meta, fc: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(path);
    out.resize(out.len() + fc - path.len(), 0);
    let nums = [
        u64::from(m.mode),
        u64::from(m.uid),
        u64::from(m.gid),
        m.atime as u64,
        u64::from(m.atime_nsec),
        m.mtime as u64,
        u64::from(m.mtime_nsec),
        m.ctime as u64,
        u64::from(m.ctime_nsec),
        m.size,
    ];
    for v in nums {
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Append the header and tables of `l` (version 4) to `out`.
pub(super) fn encode_head(l: &Layout, users: &IdTable, groups: &IdTable, out: &mut Vec<u8>) {
    for v in [4, l.nusers, l.uc, l.ngroups, l.gc, l.nfiles, l.fc] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    for (table, width) in [(users, l.uc), (groups, l.gc)] {
        for (name, id) in &table.entries {
            out.extend_from_slice(name);
            out.resize(out.len() + width as usize - name.len(), 0);
            out.extend_from_slice(&id.to_be_bytes());
        }
    }
}

/// Read this rank's even share of the records of the checked layout `l` (collective).
pub(super) fn read_records(comm: &dyn Comm, src: &mut Source<'_>, l: &Layout) -> Result<FileList> {
    let path = src.name();
    // The same even split as `distribute::spread`, so a read list is already balanced.
    let first = even_start(l.nfiles, comm.size(), comm.rank());
    let count = even_start(l.nfiles, comm.size(), comm.rank() + 1) - first;
    let local = (|| {
        let mut list = FileList::new(Detail::Stat);
        if count == 0 {
            return Ok(list);
        }
        let rec = l.record_bytes() as usize;
        let per_chunk = (IO_CHUNK / rec).max(1) as u64;
        let mut buf = Vec::new();
        let mut done = 0;
        while done < count {
            let n = per_chunk.min(count - done);
            let offset = l.record_offset(first + done);
            buf.resize(n as usize * rec, 0);
            src.read_exact_at(&mut buf, offset)?;
            decode_into(&mut list, &buf, l, path, first + done)?;
            done += n;
        }
        Ok(list)
    })();
    src.phase_done();
    comm.agree(local)
}

/// Append the whole records of `buf` (of layout `l`, read from the list `path`, the first
/// being record `first` of the file) to `list`; a damaged one is an [`Error::BadList`] naming
/// its index and byte offset.
pub(super) fn decode_into(
    list: &mut FileList,
    buf: &[u8],
    l: &Layout,
    path: &[u8],
    first: u64,
) -> Result<()> {
    let rec = l.record_bytes() as usize;
    for (i, r) in buf.chunks_exact(rec).enumerate() {
        let (p, meta) = decode_record(r, l.fc as usize).map_err(|why| {
            let index = first + i as u64;
            let at = l.record_offset(index);
            bad(path, format!("record {index} at byte offset {at}: {why}"))
        })?;
        list.push(p, FileType::from_mode(meta.mode), Some(meta));
    }
    Ok(())
}

/// Check that every record of `list` fits a v4 file (named `path`, for messages).
pub(super) fn check(list: &FileList, path: &[u8]) -> Result<()> {
    if list.detail() != Detail::Stat {
        return Err(Error::Invalid(format!(
            "write list {}: a lite list (paths and types only) cannot be written in cache format v4, which needs stat metadata; write it as text",
            crate::path::display(path)
        )));
    }
    for e in list.iter() {
        if e.path.is_empty() {
            return Err(cannot_hold(path, e.path, "a list record needs a path"));
        }
        if e.path.contains(&0) {
            return Err(cannot_hold(path, e.path, "it holds a NUL byte"));
        }
    }
    Ok(())
}

/// Write the lists of all ranks as one v4 file (collective).
pub(super) fn write(comm: &dyn Comm, list: &FileList, dest: Dest<'_>) -> Result<()> {
    let path = dest.path;
    comm.agree(check(list, path))?;
    let longest = list
        .iter()
        .map(|e| e.path.len() as u64 + 1)
        .max()
        .unwrap_or(0);
    // `longest` counts the NUL, so 0 means "no record anywhere".
    let fc = field_width(comm.max(longest).checked_sub(1));
    let (first, nfiles) = comm.offset_and_total(list.len() as u64);
    // Rank 0 truncates the file and writes header and tables; the broadcast of where the
    // records start also keeps every rank from writing before the truncation.
    let data_start: Result<u64> = comm.bcast_with(0, || {
        let l = Layout {
            header: V4_HEADER,
            nusers: list.users.entries.len() as u64,
            uc: table_width(&list.users),
            ngroups: list.groups.entries.len() as u64,
            gc: table_width(&list.groups),
            nfiles,
            fc,
        };
        let mut head = Vec::new();
        encode_head(&l, &list.users, &list.groups, &mut head);
        let file = create(dest)?;
        write_all_at(&file, path, &head, 0)?;
        Ok(head.len() as u64)
    });
    let data_start = data_start?;
    let local = (|| {
        if list.is_empty() {
            return Ok(());
        }
        let rec = fc + META_FIELDS;
        let mut out = RegionWriter::open(dest, data_start + first * rec)?;
        for e in list.iter() {
            let meta = &e.meta.expect("a stat list has metadata");
            encode_record(e.path, meta, fc as usize, out.buf());
            out.flush_if_full()?;
        }
        out.finish()
    })();
    comm.agree(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(nusers: u64, uc: u64, ngroups: u64, gc: u64, nfiles: u64, fc: u64) -> Layout {
        Layout {
            header: V4_HEADER,
            nusers,
            uc,
            ngroups,
            gc,
            nfiles,
            fc,
        }
    }

    fn header(l: &Layout) -> Vec<u8> {
        let mut out = Vec::new();
        encode_head(l, &IdTable::default(), &IdTable::default(), &mut out);
        out
    }

    #[test]
    fn widths_leave_room_for_a_nul_and_round_to_8() {
        assert_eq!(field_width(None), 0);
        assert_eq!(field_width(Some(0)), 8);
        assert_eq!(field_width(Some(7)), 8);
        assert_eq!(field_width(Some(8)), 16);
        // The vectors: longest user name "systemd-timesync" (16) -> 24; longest path 323 -> 328.
        assert_eq!(field_width(Some(16)), 24);
        assert_eq!(field_width(Some(323)), 328);
        let t = IdTable {
            entries: vec![(b"root".to_vec(), 0), (b"systemd-timesync".to_vec(), 997)],
        };
        assert_eq!(table_width(&t), 24);
        assert_eq!(table_width(&IdTable::default()), 0);
    }

    #[test]
    fn offsets_follow_the_formula_beyond_4_gib() {
        let l = layout(24, 24, 48, 24, 44, 328);
        assert_eq!(l.record_offset(0), 56 + 24 * 32 + 48 * 32);
        assert_eq!(l.file_len(), Some(20312));
        let big = layout(0, 0, 0, 0, 100_000_000, 4096);
        assert_eq!(big.record_offset(99_999_999), 56 + 99_999_999 * 4176);
        assert_eq!(big.file_len(), Some(56 + 100_000_000 * 4176));
        assert_eq!(layout(u64::MAX / 2, 8, 0, 0, 0, 0).file_len(), None);
    }

    #[test]
    fn header_checks_name_the_offset() {
        let l = layout(0, 0, 0, 0, 3, 8);
        let h = header(&l);
        assert_eq!(Layout::parse(&h, 56 + 3 * 88, false), Ok(l));
        let e = Layout::parse(&h, 56 + 88 + 5, false).unwrap_err();
        assert!(
            e.contains("byte offset 149") && e.contains("record 1 of 3"),
            "{e}"
        );
        let e = Layout::parse(&h, 56 + 3 * 88 + 1, false).unwrap_err();
        assert!(e.contains("from byte offset 320"), "{e}");
        assert!(Layout::parse(&h[..40], 40, false)
            .unwrap_err()
            .contains("byte offset 40"));
        let e =
            Layout::parse(&header(&layout(0, 0, 0, 0, 1, 1 << 40)), 1 << 41, false).unwrap_err();
        assert!(e.contains("path width"), "{e}");
        let e = Layout::parse(&header(&layout(0, 0, 0, 0, 1, 0)), 56 + 80, false).unwrap_err();
        assert!(e.contains("width of 0"), "{e}");
        let e =
            Layout::parse(&header(&layout(u64::MAX / 4, 8, 0, 0, 0, 0)), 56, false).unwrap_err();
        assert!(e.contains("overflow"), "{e}");
    }

    #[test]
    fn records_round_trip() {
        let m = Meta {
            mode: 0o100600,
            uid: 7,
            gid: 8,
            atime: -1,
            atime_nsec: 2,
            mtime: 1 << 40,
            size: 5 << 32,
            ..Meta::default()
        };
        let mut rec = Vec::new();
        encode_record(b"/a\xff", &m, 8, &mut rec);
        assert_eq!(rec.len(), 88);
        assert_eq!(&rec[..8], b"/a\xff\0\0\0\0\0");
        assert_eq!(decode_record(&rec, 8), Ok((&b"/a\xff"[..], m)));
        assert!(decode_record(&[b'x'; 88], 8).is_err());
        assert!(decode_record(&[0; 88], 8).is_err());
    }
}
