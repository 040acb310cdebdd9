//! The dbz2 file layout (formats.md §7): independent bzip2 streams, one per block of input, back
//! to back; then a table of `(offset, length)` pairs, one per block; then a 48-byte footer. Every
//! number is a big-endian `u64`.
//!
//! Plain `bunzip2` reads such a file as concatenated streams and ignores the table and footer as
//! "trailing garbage after EOF" (exit status 0): the table starts with block 0's offset, eight
//! zero bytes, which can never be the `BZh` of another stream.

/// Last 8 bytes of every dbz2 file ("repeating pi: 3.141").
pub const MAGIC: u64 = 0x3141_3141_3141_3141;
/// The only layout version there is.
pub const VERSION: u64 = 1;
/// Bytes of the footer: 6 big-endian `u64`.
pub const FOOTER_LEN: u64 = 48;
/// Bytes of one table entry: offset and length, big-endian `u64` each.
pub const ENTRY_LEN: u64 = 16;
/// Largest block this tool agrees to decompress (bytes of input per stream), so that a damaged or
/// hostile footer cannot make every rank allocate without bound. dbz2 writes at most ~10 MB.
pub const MAX_BLOCK: u64 = 1 << 30;

/// Bytes of input per bzip2 stream for `-b LEVEL` (1..=9), dbz2's rule: the largest multiple of
/// the bzip2 block of `LEVEL` x 100 000 bytes that fits in 10 MiB (9 900 000 bytes for `-b 9`,
/// 10 400 000 for `-b 1`), so every stream holds whole bzip2 blocks.
pub fn block_size_for_level(level: u32) -> u64 {
    let bwt = u64::from(level.clamp(1, 9)) * 100_000;
    (10 * 1024 * 1024 / bwt) * bwt
}

/// Number of streams for `size` bytes of input in blocks of `block` bytes. An empty input still
/// gets one (empty) stream, so that `bunzip2` accepts the file.
pub fn block_count(size: u64, block: u64) -> u64 {
    size.div_ceil(block).max(1)
}

/// The trailing 48 bytes of a dbz2 file (rank 0 sends it to the others in the plan).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Footer {
    /// Byte offset of the table (= total bytes of the streams).
    pub table_offset: u64,
    /// Number of blocks (streams, table entries).
    pub nblocks: u64,
    /// Bytes of input per block (the last one may be shorter).
    pub block_size: u64,
    /// Bytes of the uncompressed file.
    pub original_size: u64,
}

/// Why the trailing bytes of a file are not a usable dbz2 footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FooterError {
    /// No dbz2 magic: the file is plain bzip2 (or not bzip2 at all).
    NotDbz2,
    /// The magic is there but the rest does not add up: a damaged or unknown file.
    Damaged(String),
}

impl Footer {
    /// The 48 bytes as written at the end of the file.
    pub fn encode(&self) -> [u8; FOOTER_LEN as usize] {
        let mut out = [0u8; FOOTER_LEN as usize];
        let fields = [
            self.table_offset,
            self.nblocks,
            self.block_size,
            self.original_size,
            VERSION,
            MAGIC,
        ];
        for (slot, v) in out.chunks_exact_mut(8).zip(fields) {
            slot.copy_from_slice(&v.to_be_bytes());
        }
        out
    }

    /// Parse the last 48 bytes of a file of `file_size` bytes and check that the layout fits
    /// that size.
    pub fn decode(bytes: &[u8], file_size: u64) -> Result<Footer, FooterError> {
        if bytes.len() != FOOTER_LEN as usize {
            return Err(FooterError::NotDbz2);
        }
        let field = |i: usize| u64::from_be_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8"));
        if field(5) != MAGIC {
            return Err(FooterError::NotDbz2);
        }
        if field(4) != VERSION {
            return Err(FooterError::Damaged(format!(
                "unsupported dbz2 version {}",
                field(4)
            )));
        }
        let footer = Footer {
            table_offset: field(0),
            nblocks: field(1),
            block_size: field(2),
            original_size: field(3),
        };
        footer.check(file_size)?;
        Ok(footer)
    }

    /// The layout adds up: table and footer end the file, the block count covers the size
    /// (dbz2 itself writes no stream at all for an empty file; mfu-rs writes one empty stream).
    fn check(&self, file_size: u64) -> Result<(), FooterError> {
        let damaged = |what: String| Err(FooterError::Damaged(what));
        let end = self
            .nblocks
            .checked_mul(ENTRY_LEN)
            .and_then(|t| t.checked_add(self.table_offset))
            .and_then(|t| t.checked_add(FOOTER_LEN));
        if end != Some(file_size) {
            return damaged(format!(
                "footer says {} blocks with the table at byte {}, which does not end a file of {} bytes",
                self.nblocks, self.table_offset, file_size
            ));
        }
        if self.block_size == 0 || self.block_size > MAX_BLOCK {
            if self.nblocks == 0 && self.original_size == 0 {
                return Ok(());
            }
            return damaged(format!("block size {} out of range", self.block_size));
        }
        let expected = self.original_size.div_ceil(self.block_size);
        if self.nblocks != expected && !(self.original_size == 0 && self.nblocks == 1) {
            return damaged(format!(
                "footer says {} blocks of {} bytes for {} bytes",
                self.nblocks, self.block_size, self.original_size
            ));
        }
        Ok(())
    }

    /// Bytes of uncompressed data block `index` holds (the last block may be shorter).
    pub fn block_len(&self, index: u64) -> u64 {
        let start = index.saturating_mul(self.block_size);
        self.original_size
            .saturating_sub(start)
            .min(self.block_size)
    }
}

/// Where one block's stream lies in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Byte offset of the stream.
    pub offset: u64,
    /// Bytes of the stream.
    pub length: u64,
}

/// Table entries as written, 16 bytes each.
pub fn encode_entries(entries: &[Entry]) -> Vec<u8> {
    entries
        .iter()
        .flat_map(|e| {
            e.offset
                .to_be_bytes()
                .into_iter()
                .chain(e.length.to_be_bytes())
        })
        .collect()
}

/// Parse table entries (16 bytes each) and check that each stream lies before the table.
/// `first` is the index of the first entry, for messages.
pub fn decode_entries(bytes: &[u8], first: u64, table_offset: u64) -> Result<Vec<Entry>, String> {
    let mut out = Vec::with_capacity(bytes.len() / ENTRY_LEN as usize);
    for (i, raw) in bytes.chunks_exact(ENTRY_LEN as usize).enumerate() {
        let entry = Entry {
            offset: u64::from_be_bytes(raw[..8].try_into().expect("8")),
            length: u64::from_be_bytes(raw[8..].try_into().expect("8")),
        };
        let fits = entry
            .offset
            .checked_add(entry.length)
            .is_some_and(|end| end <= table_offset);
        if entry.length == 0 || !fits {
            return Err(format!(
                "block {}: table entry (offset {}, length {}) lies outside the {} bytes of streams",
                first + i as u64,
                entry.offset,
                entry.length,
                table_offset
            ));
        }
        out.push(entry);
    }
    Ok(out)
}

/// Entries read per step by [`check_table`] (64 KiB of table).
const CHECK_STEP: u64 = 4096;

/// Check the whole table of a dbz2 file whose footer is `footer`, reading it with `read_at`
/// (bytes at an offset of the file) a step at a time (memory stays small whatever the table
/// claims): the streams must lie in block order, back to back from byte 0 to the table, each
/// non-empty. Parallel decoding trusts each entry to hold block `i` (it writes it at
/// `i x block_size`); a table with entries swapped, duplicated or shifted would put the right
/// bytes in the wrong place, so such a table is not used. `Ok(Err(why))` names the first entry
/// that is out of place; `Err` is a read error.
pub fn check_table(
    footer: &Footer,
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> std::io::Result<()>,
) -> std::io::Result<Result<(), String>> {
    let mut expected_offset = 0u64;
    let mut index = 0u64;
    while index < footer.nblocks {
        let n = (footer.nblocks - index).min(CHECK_STEP);
        let mut raw = vec![0u8; (n * ENTRY_LEN) as usize];
        read_at(footer.table_offset + index * ENTRY_LEN, &mut raw)?;
        for chunk in raw.chunks_exact(ENTRY_LEN as usize) {
            let offset = u64::from_be_bytes(chunk[..8].try_into().expect("8"));
            let length = u64::from_be_bytes(chunk[8..].try_into().expect("8"));
            if offset != expected_offset {
                let after = match index {
                    0 => "the start of the file".to_string(),
                    i => format!("the end of block {}", i - 1),
                };
                return Ok(Err(format!(
                    "block {index}'s stream is at byte {offset}, not at byte {expected_offset} \
                     ({after})"
                )));
            }
            let end = offset
                .checked_add(length)
                .filter(|&e| e <= footer.table_offset);
            match end {
                Some(end) if length > 0 => expected_offset = end,
                _ => {
                    return Ok(Err(format!(
                        "block {index}: table entry (offset {offset}, length {length}) lies \
                         outside the {} bytes of streams",
                        footer.table_offset
                    )))
                }
            }
            index += 1;
        }
    }
    if expected_offset != footer.table_offset {
        return Ok(Err(format!(
            "the streams of the table end at byte {expected_offset}, the table starts at byte {}",
            footer.table_offset
        )));
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_size_follows_dbz2() {
        assert_eq!(block_size_for_level(9), 9_900_000);
        assert_eq!(block_size_for_level(1), 10_400_000);
        assert_eq!(block_size_for_level(5), 10_000_000);
        assert_eq!(block_count(0, 100), 1);
        assert_eq!(block_count(100, 100), 1);
        assert_eq!(block_count(101, 100), 2);
    }

    #[test]
    fn footer_is_six_big_endian_words() {
        let f = Footer {
            table_offset: 0x0102,
            nblocks: 2,
            block_size: 100,
            original_size: 150,
        };
        let bytes = f.encode();
        assert_eq!(&bytes[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&bytes[8..16], &2u64.to_be_bytes());
        assert_eq!(&bytes[32..40], &1u64.to_be_bytes());
        assert_eq!(
            &bytes[40..],
            &[0x31, 0x41, 0x31, 0x41, 0x31, 0x41, 0x31, 0x41]
        );
        let size = 0x0102 + 2 * 16 + 48;
        assert_eq!(Footer::decode(&bytes, size), Ok(f));
        assert_eq!(f.block_len(0), 100);
        assert_eq!(f.block_len(1), 50);
    }

    #[test]
    fn footer_rejects_what_does_not_add_up() {
        let f = Footer {
            table_offset: 1000,
            nblocks: 2,
            block_size: 100,
            original_size: 150,
        };
        let size = 1000 + 2 * 16 + 48;
        assert!(matches!(
            Footer::decode(&f.encode(), size + 1),
            Err(FooterError::Damaged(_))
        ));
        let mut wrong_count = f;
        wrong_count.original_size = 250;
        assert!(matches!(
            Footer::decode(&wrong_count.encode(), size),
            Err(FooterError::Damaged(_))
        ));
        let mut version = f.encode();
        version[39] = 2;
        assert!(matches!(
            Footer::decode(&version, size),
            Err(FooterError::Damaged(_))
        ));
        let mut magic = f.encode();
        magic[47] = 0;
        assert_eq!(Footer::decode(&magic, size), Err(FooterError::NotDbz2));
        // dbz2's empty file: no stream, no table, only the footer.
        let empty = Footer {
            table_offset: 0,
            nblocks: 0,
            block_size: 9_900_000,
            original_size: 0,
        };
        assert_eq!(Footer::decode(&empty.encode(), 48), Ok(empty));
    }

    #[test]
    fn check_table_wants_streams_in_block_order_back_to_back() {
        let footer = Footer {
            table_offset: 60,
            nblocks: 3,
            block_size: 100,
            original_size: 250,
        };
        let check = |entries: &[(u64, u64)]| {
            let table = encode_entries(
                &entries
                    .iter()
                    .map(|&(offset, length)| Entry { offset, length })
                    .collect::<Vec<_>>(),
            );
            let mut file = vec![0u8; 60];
            file.extend(&table);
            let mut read = |at: u64, buf: &mut [u8]| {
                let at = at as usize;
                buf.copy_from_slice(&file[at..at + buf.len()]);
                Ok(())
            };
            check_table(&footer, &mut read).unwrap()
        };
        assert_eq!(check(&[(0, 10), (10, 20), (30, 30)]), Ok(()));
        let swapped = check(&[(10, 20), (0, 10), (30, 30)]).unwrap_err();
        assert!(
            swapped.starts_with("block 0's stream is at byte 10"),
            "{swapped}"
        );
        let duplicated = check(&[(0, 10), (0, 10), (30, 30)]).unwrap_err();
        assert!(duplicated.starts_with("block 1's"), "{duplicated}");
        assert!(
            check(&[(0, 10), (10, 20), (30, 20)]).is_err(),
            "ends before the table"
        );
        assert!(
            check(&[(0, 10), (10, 0), (10, 50)]).is_err(),
            "an empty stream"
        );
        assert!(
            check(&[(0, 10), (10, 20), (30, u64::MAX)]).is_err(),
            "overflow"
        );
    }

    #[test]
    fn table_round_trips_and_is_checked() {
        let entries = [
            Entry {
                offset: 0,
                length: 14,
            },
            Entry {
                offset: 14,
                length: 300,
            },
        ];
        let bytes = encode_entries(&entries);
        assert_eq!(bytes.len(), 32);
        assert_eq!(
            &bytes[..8],
            &[0; 8],
            "bunzip2 must see zeros after the last stream"
        );
        assert_eq!(&bytes[16..24], &14u64.to_be_bytes());
        assert_eq!(decode_entries(&bytes, 0, 314).unwrap(), entries);
        let err = decode_entries(&bytes, 5, 313).unwrap_err();
        assert!(err.starts_with("block 6:"), "{err}");
    }
}
