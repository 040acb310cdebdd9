//! Lustre file layouts: `lov_user_md` v1 / v3 / specific and `lov_comp_md_v1`, decoded from and
//! encoded to bytes at the offsets documented in `lustre.md`.
//!
//! The structs are packed and in host byte order. Every field is copied at an explicit offset
//! (the crate's private `fields` module); nothing here is `#[repr(packed)]`.
//!
//! ```text
//! lov_user_md_v1 (32 bytes + 24 per stripe)
//!   0 u32 magic   4 u32 pattern   8 [u8; 16] object id   24 u32 stripe_size
//!   28 u16 stripe_count   30 u16 stripe_offset / layout_gen   32 stripes[]
//! lov_user_md_v3 / specific (48 bytes + 24 per stripe): v1, then 32 pool name[16], 48 stripes[]
//! lov_user_ost_data_v1 (24 bytes): 0 object id[16], 16 u32 generation, 20 u32 ost_index
//! lov_comp_md_v1 (32 bytes + 48 per entry, then the component blobs)
//!   0 u32 magic  4 u32 size  8 u32 layout_gen  12 u16 flags  14 u16 entry_count
//!   16 u16 mirror_count  18..32 padding  32 entries[]
//! lov_comp_md_entry_v1 (48 bytes)
//!   0 u32 id  4 u32 flags  8 u64 extent_start  16 u64 extent_end  24 u32 offset  28 u32 size
//!   32 u32 layout_gen  36..48 not decoded (timestamp, EC counts in newer Lustre), encoded as zeros
//! ```

use crate::consts::{
    LOV_COMP_MD_ENTRY_SIZE, LOV_COMP_MD_V1_SIZE, LOV_PATTERN_RAID0, LOV_POOL_NAME_SIZE,
    LOV_USER_MAGIC_COMP_V1, LOV_USER_MAGIC_SPECIFIC, LOV_USER_MAGIC_V1, LOV_USER_MAGIC_V3,
    LOV_USER_MD_V1_SIZE, LOV_USER_MD_V3_SIZE, LOV_USER_OST_DATA_SIZE, STRIPE_OFFSET_ANY,
};
use crate::fields::{array, get_u16, get_u32, get_u64, put, put_u16, put_u32, put_u64};

/// Field offsets inside `lov_user_md_v1` / `_v3` (bytes from the struct start).
mod md {
    pub const MAGIC: usize = 0;
    pub const PATTERN: usize = 4;
    pub const OBJECT_ID: usize = 8;
    pub const STRIPE_SIZE: usize = 24;
    pub const STRIPE_COUNT: usize = 28;
    pub const STRIPE_OFFSET: usize = 30;
    pub const POOL: usize = 32;
}

/// Field offsets inside `lov_user_ost_data_v1`.
mod slot {
    pub const OBJECT_ID: usize = 0;
    pub const GENERATION: usize = 16;
    pub const OST_INDEX: usize = 20;
}

/// Field offsets inside the `lov_comp_md_v1` header.
mod comp {
    pub const MAGIC: usize = 0;
    pub const SIZE: usize = 4;
    pub const LAYOUT_GEN: usize = 8;
    pub const FLAGS: usize = 12;
    pub const ENTRY_COUNT: usize = 14;
    pub const MIRROR_COUNT: usize = 16;
}

/// Field offsets inside `lov_comp_md_entry_v1`.
mod entry {
    pub const ID: usize = 0;
    pub const FLAGS: usize = 4;
    pub const EXTENT_START: usize = 8;
    pub const EXTENT_END: usize = 16;
    pub const OFFSET: usize = 24;
    pub const SIZE: usize = 28;
    pub const LAYOUT_GEN: usize = 32;
}

/// Why a byte buffer is not a layout this crate understands. Offsets are bytes from the start of
/// the buffer handed to [`Layout::decode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The buffer ends before the struct it must hold.
    #[error("decode layout: {what} at byte {offset} needs {need} bytes, only {have} present")]
    Short {
        /// The struct being read.
        what: &'static str,
        /// Where that struct starts (bytes).
        offset: usize,
        /// Bytes it needs.
        need: usize,
        /// Bytes available from `offset` on.
        have: usize,
    },
    /// The magic number is none of v1, v3, specific, composite.
    #[error("decode layout: unknown layout magic {magic:#010x} at byte {offset}")]
    UnknownMagic {
        /// The magic found.
        magic: u32,
        /// Where it was found (bytes).
        offset: usize,
    },
    /// A plain layout's stripe array does not end on a whole 24-byte entry.
    #[error(
        "decode layout: stripe array at byte {offset} is {len} bytes, not a multiple of 24-byte entries"
    )]
    PartialStripe {
        /// Where the stripe array starts (bytes).
        offset: usize,
        /// Its length (bytes).
        len: usize,
    },
    /// A composite header's `size` is smaller than its own header and entry array.
    #[error(
        "decode layout: composite size field says {size} bytes, but its {entries} entries alone need {need}"
    )]
    CompositeSize {
        /// The header's `size` field (bytes).
        size: u32,
        /// The header's entry count.
        entries: u16,
        /// Bytes the header and entry array take.
        need: usize,
    },
    /// A component's blob lies outside the area after the entry array.
    #[error(
        "decode layout: component {index} blob at byte {offset} ({size} bytes) is outside bytes {min}..{max}"
    )]
    ComponentOutOfRange {
        /// Index of the component (0-based).
        index: usize,
        /// The entry's `offset` field (bytes from the composite header).
        offset: u32,
        /// The entry's `size` field (bytes).
        size: u32,
        /// First byte a blob may occupy (end of the entry array).
        min: usize,
        /// One past the last byte a blob may occupy (the composite `size`).
        max: usize,
    },
    /// A component's blob is itself composite.
    #[error("decode layout: component {index} at byte {offset} is itself a composite layout")]
    NestedComposite {
        /// Index of the component (0-based).
        index: usize,
        /// Where its blob starts (bytes).
        offset: usize,
    },
}

/// One stripe of a plain layout (`lov_user_ost_data_v1`, 24 bytes): the OST object holding it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OstSlot {
    /// The OST object id (`struct ost_id`, 16 bytes, kept opaque).
    pub object_id: [u8; 16],
    /// Generation of the OST index.
    pub generation: u32,
    /// Index of the OST holding this stripe.
    pub ost_index: u32,
}

/// A plain (RAID0) layout: `lov_user_md_v1`, `_v3` or `_specific`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plain {
    /// Striping pattern; [`LOV_PATTERN_RAID0`] for ordinary files (high bits are flags).
    pub pattern: u32,
    /// The layout's object id (16 bytes, opaque; zero when setting).
    pub object_id: [u8; 16],
    /// Stripe size in bytes (0 = file-system default).
    pub stripe_size: u32,
    /// Stripe count: 0 = file-system default, 0xFFFF = all OSTs.
    pub stripe_count: u16,
    /// First OST when setting (0xFFFF = the server chooses); the layout generation when read back.
    pub stripe_offset: u16,
    /// Pool name, NUL-padded (16 bytes). `Some` encodes as v3 (or specific); `None` as v1.
    /// A specific layout with an all-zero pool decodes as `None`.
    pub pool: Option<[u8; 16]>,
    /// `LOV_USER_MAGIC_SPECIFIC`: `slots` is the explicit OST list to stripe over.
    pub specific: bool,
    /// The stripes present in the buffer. A directory's default layout or an uninstantiated
    /// component has a `stripe_count` but no slots.
    pub slots: Vec<OstSlot>,
}

/// One component of a composite layout: a plain layout covering a byte range of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Component {
    /// Component id (`lcme_id`; bits 16..31 carry the mirror id under FLR).
    pub id: u32,
    /// `LCME_FL_*` flags (e.g. `0x10` = instantiated).
    pub flags: u32,
    /// First byte of the file this component covers.
    pub extent_start: u64,
    /// One past the last byte covered (bytes); `u64::MAX` = end of file.
    pub extent_end: u64,
    /// Layout generation of this component.
    pub layout_gen: u32,
    /// The component's own layout.
    pub layout: Plain,
}

/// A composite layout (`lov_comp_md_v1`): progressive file layout (PFL) or mirrors (FLR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Composite {
    /// Layout generation of the whole layout.
    pub layout_gen: u32,
    /// `LCM_FL_*` flags (FLR state).
    pub flags: u16,
    /// Number of mirrors minus one (0 for a file that is not mirrored).
    pub mirror_count: u16,
    /// The components, in entry order (at most `u16::MAX`).
    pub components: Vec<Component>,
}

/// A Lustre layout as stored in `lustre.lov` or passed to `LL_IOC_LOV_SETSTRIPE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// v1, v3 or specific.
    Plain(Plain),
    /// Composite (PFL / FLR).
    Composite(Composite),
}

/// Fails with [`LayoutError::Short`] unless `bytes` holds `need` bytes.
fn need(bytes: &[u8], what: &'static str, base: usize, need: usize) -> Result<(), LayoutError> {
    if bytes.len() < need {
        return Err(LayoutError::Short {
            what,
            offset: base,
            need,
            have: bytes.len(),
        });
    }
    Ok(())
}

impl OstSlot {
    fn decode(bytes: &[u8]) -> OstSlot {
        OstSlot {
            object_id: array(bytes, slot::OBJECT_ID),
            generation: get_u32(bytes, slot::GENERATION),
            ost_index: get_u32(bytes, slot::OST_INDEX),
        }
    }

    fn write(&self, out: &mut [u8]) {
        put(out, slot::OBJECT_ID, &self.object_id);
        put_u32(out, slot::GENERATION, self.generation);
        put_u32(out, slot::OST_INDEX, self.ost_index);
    }
}

impl Plain {
    /// The magic this layout encodes with: specific, v3 when it has a pool, else v1.
    pub fn magic(&self) -> u32 {
        if self.specific {
            LOV_USER_MAGIC_SPECIFIC
        } else if self.pool.is_some() {
            LOV_USER_MAGIC_V3
        } else {
            LOV_USER_MAGIC_V1
        }
    }

    /// Bytes before the stripe array: 32 for v1, 48 for v3 and specific.
    pub fn header_len(&self) -> usize {
        if self.magic() == LOV_USER_MAGIC_V1 {
            LOV_USER_MD_V1_SIZE
        } else {
            LOV_USER_MD_V3_SIZE
        }
    }

    /// Bytes of the encoded layout: header plus 24 per slot.
    pub fn encoded_len(&self) -> usize {
        self.header_len() + LOV_USER_OST_DATA_SIZE * self.slots.len()
    }

    /// The pool name without its NUL padding, if the layout names a pool.
    pub fn pool_name(&self) -> Option<&[u8]> {
        let pool = self.pool.as_ref()?;
        let end = pool.iter().position(|&b| b == 0).unwrap_or(pool.len());
        Some(&pool[..end])
    }

    /// Decodes a plain layout filling all of `bytes`; `base` is where `bytes` starts in the
    /// caller's buffer (bytes), for error messages.
    fn decode_at(bytes: &[u8], base: usize) -> Result<Plain, LayoutError> {
        need(bytes, "layout magic", base, 4)?;
        let magic = get_u32(bytes, md::MAGIC);
        let (what, header, specific) = match magic {
            LOV_USER_MAGIC_V1 => ("lov_user_md_v1", LOV_USER_MD_V1_SIZE, false),
            LOV_USER_MAGIC_V3 => ("lov_user_md_v3", LOV_USER_MD_V3_SIZE, false),
            LOV_USER_MAGIC_SPECIFIC => ("lov_user_md_specific", LOV_USER_MD_V3_SIZE, true),
            _ => {
                return Err(LayoutError::UnknownMagic {
                    magic,
                    offset: base,
                })
            }
        };
        need(bytes, what, base, header)?;
        let stripes = &bytes[header..];
        if stripes.len() % LOV_USER_OST_DATA_SIZE != 0 {
            return Err(LayoutError::PartialStripe {
                offset: base + header,
                len: stripes.len(),
            });
        }
        let pool = if header == LOV_USER_MD_V3_SIZE {
            let name: [u8; LOV_POOL_NAME_SIZE] = array(bytes, md::POOL);
            // A v3 layout keeps its pool field even when empty, so that it re-encodes as v3; a
            // specific layout is recognised by its magic, so an empty pool there means "none".
            (!specific || name != [0; LOV_POOL_NAME_SIZE]).then_some(name)
        } else {
            None
        };
        Ok(Plain {
            pattern: get_u32(bytes, md::PATTERN),
            object_id: array(bytes, md::OBJECT_ID),
            stripe_size: get_u32(bytes, md::STRIPE_SIZE),
            stripe_count: get_u16(bytes, md::STRIPE_COUNT),
            stripe_offset: get_u16(bytes, md::STRIPE_OFFSET),
            pool,
            specific,
            slots: stripes
                .chunks_exact(LOV_USER_OST_DATA_SIZE)
                .map(OstSlot::decode)
                .collect(),
        })
    }

    /// Writes the layout into `out`, which is exactly [`Plain::encoded_len`] zeroed bytes.
    fn write(&self, out: &mut [u8]) {
        put_u32(out, md::MAGIC, self.magic());
        put_u32(out, md::PATTERN, self.pattern);
        put(out, md::OBJECT_ID, &self.object_id);
        put_u32(out, md::STRIPE_SIZE, self.stripe_size);
        put_u16(out, md::STRIPE_COUNT, self.stripe_count);
        put_u16(out, md::STRIPE_OFFSET, self.stripe_offset);
        if self.header_len() == LOV_USER_MD_V3_SIZE {
            put(out, md::POOL, &self.pool.unwrap_or([0; LOV_POOL_NAME_SIZE]));
        }
        let header = self.header_len();
        for (slot, chunk) in self
            .slots
            .iter()
            .zip(out[header..].chunks_exact_mut(LOV_USER_OST_DATA_SIZE))
        {
            slot.write(chunk);
        }
    }
}

impl Composite {
    /// Bytes before the first component blob: header plus 48 per entry.
    fn blobs_start(&self) -> usize {
        LOV_COMP_MD_V1_SIZE + LOV_COMP_MD_ENTRY_SIZE * self.components.len()
    }

    /// Bytes of the encoded layout: header, entries, then the blobs back to back.
    pub fn encoded_len(&self) -> usize {
        self.blobs_start()
            + self
                .components
                .iter()
                .map(|c| c.layout.encoded_len())
                .sum::<usize>()
    }

    /// Decodes a composite layout; `bytes` beyond the header's `size` field are ignored.
    fn decode(bytes: &[u8]) -> Result<Composite, LayoutError> {
        need(bytes, "lov_comp_md_v1 header", 0, LOV_COMP_MD_V1_SIZE)?;
        let size = get_u32(bytes, comp::SIZE);
        let entries = get_u16(bytes, comp::ENTRY_COUNT);
        let blobs_start = LOV_COMP_MD_V1_SIZE + LOV_COMP_MD_ENTRY_SIZE * usize::from(entries);
        need(bytes, "lov_comp_md_v1 (its size field)", 0, size as usize)?;
        if (size as usize) < blobs_start {
            return Err(LayoutError::CompositeSize {
                size,
                entries,
                need: blobs_start,
            });
        }
        let body = &bytes[..size as usize];
        let components = (0..usize::from(entries))
            .map(|index| {
                let at = LOV_COMP_MD_V1_SIZE + LOV_COMP_MD_ENTRY_SIZE * index;
                let e = &body[at..at + LOV_COMP_MD_ENTRY_SIZE];
                let offset = get_u32(e, entry::OFFSET);
                let blob_size = get_u32(e, entry::SIZE);
                // u64 so that offset + size cannot overflow on 32-bit hosts.
                let start = u64::from(offset);
                let end = start + u64::from(blob_size);
                if start < blobs_start as u64 || end > u64::from(size) {
                    return Err(LayoutError::ComponentOutOfRange {
                        index,
                        offset,
                        size: blob_size,
                        min: blobs_start,
                        max: size as usize,
                    });
                }
                let blob = &body[start as usize..end as usize];
                if blob.len() >= 4 && get_u32(blob, md::MAGIC) == LOV_USER_MAGIC_COMP_V1 {
                    return Err(LayoutError::NestedComposite {
                        index,
                        offset: start as usize,
                    });
                }
                Ok(Component {
                    id: get_u32(e, entry::ID),
                    flags: get_u32(e, entry::FLAGS),
                    extent_start: get_u64(e, entry::EXTENT_START),
                    extent_end: get_u64(e, entry::EXTENT_END),
                    layout_gen: get_u32(e, entry::LAYOUT_GEN),
                    layout: Plain::decode_at(blob, start as usize)?,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Composite {
            layout_gen: get_u32(bytes, comp::LAYOUT_GEN),
            flags: get_u16(bytes, comp::FLAGS),
            mirror_count: get_u16(bytes, comp::MIRROR_COUNT),
            components,
        })
    }

    /// Writes the layout into `out`, which is exactly [`Composite::encoded_len`] zeroed bytes.
    fn write(&self, out: &mut [u8]) {
        debug_assert!(self.components.len() <= usize::from(u16::MAX));
        put_u32(out, comp::MAGIC, LOV_USER_MAGIC_COMP_V1);
        put_u32(out, comp::SIZE, out.len() as u32);
        put_u32(out, comp::LAYOUT_GEN, self.layout_gen);
        put_u16(out, comp::FLAGS, self.flags);
        put_u16(out, comp::ENTRY_COUNT, self.components.len() as u16);
        put_u16(out, comp::MIRROR_COUNT, self.mirror_count);
        // Lustre packs the blobs back to back after the entry array, in entry order.
        let mut blob_at = self.blobs_start();
        for (index, c) in self.components.iter().enumerate() {
            let at = LOV_COMP_MD_V1_SIZE + LOV_COMP_MD_ENTRY_SIZE * index;
            let len = c.layout.encoded_len();
            let e = &mut out[at..at + LOV_COMP_MD_ENTRY_SIZE];
            put_u32(e, entry::ID, c.id);
            put_u32(e, entry::FLAGS, c.flags);
            put_u64(e, entry::EXTENT_START, c.extent_start);
            put_u64(e, entry::EXTENT_END, c.extent_end);
            put_u32(e, entry::OFFSET, blob_at as u32);
            put_u32(e, entry::SIZE, len as u32);
            put_u32(e, entry::LAYOUT_GEN, c.layout_gen);
            c.layout.write(&mut out[blob_at..blob_at + len]);
            blob_at += len;
        }
    }
}

impl Layout {
    /// The layout `lfs setstripe -c stripe_count -S stripe_size` sends: v1, RAID0, object id
    /// zero, stripe offset 0xFFFF (the server chooses the first OST), no slots.
    /// `stripe_count`: 0 = default, 0xFFFF = all OSTs; `stripe_size` in bytes (0 = default).
    pub fn request(stripe_count: u16, stripe_size: u32) -> Layout {
        Layout::Plain(Plain {
            pattern: LOV_PATTERN_RAID0,
            object_id: [0; 16],
            stripe_size,
            stripe_count,
            stripe_offset: STRIPE_OFFSET_ANY,
            pool: None,
            specific: false,
            slots: Vec::new(),
        })
    }

    /// Decodes a layout that fills `bytes` exactly (the value of `lustre.lov`): v1, v3,
    /// specific or composite. A composite's bytes beyond its `size` field are ignored.
    pub fn decode(bytes: &[u8]) -> Result<Layout, LayoutError> {
        need(bytes, "layout magic", 0, 4)?;
        if get_u32(bytes, md::MAGIC) == LOV_USER_MAGIC_COMP_V1 {
            Composite::decode(bytes).map(Layout::Composite)
        } else {
            Plain::decode_at(bytes, 0).map(Layout::Plain)
        }
    }

    /// Decodes a layout from a buffer that may be larger than the layout (an ioctl buffer with
    /// room for more stripes): a plain layout keeps `min(stripe_count, stripes that fit)` slots,
    /// a composite one stops at its `size` field.
    pub fn decode_buffer(bytes: &[u8]) -> Result<Layout, LayoutError> {
        need(bytes, "layout magic", 0, 4)?;
        let header = match get_u32(bytes, md::MAGIC) {
            LOV_USER_MAGIC_V1 => LOV_USER_MD_V1_SIZE,
            LOV_USER_MAGIC_V3 | LOV_USER_MAGIC_SPECIFIC => LOV_USER_MD_V3_SIZE,
            _ => return Layout::decode(bytes),
        };
        need(bytes, "lov_user_md", 0, header)?;
        let fit = (bytes.len() - header) / LOV_USER_OST_DATA_SIZE;
        let stripes = usize::from(get_u16(bytes, md::STRIPE_COUNT)).min(fit);
        Layout::decode(&bytes[..header + stripes * LOV_USER_OST_DATA_SIZE])
    }

    /// Bytes of the encoded layout.
    pub fn encoded_len(&self) -> usize {
        match self {
            Layout::Plain(p) => p.encoded_len(),
            Layout::Composite(c) => c.encoded_len(),
        }
    }

    /// The layout as Lustre reads it: the exact inverse of [`Layout::decode`] for layouts this
    /// function produced. Composite entry bytes 36..48 and header bytes 18..32 are written as
    /// zeros.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.encoded_len()];
        match self {
            Layout::Plain(p) => p.write(&mut out),
            Layout::Composite(c) => c.write(&mut out),
        }
        out
    }

    /// Whether this is a composite (PFL / FLR) layout.
    pub fn is_composite(&self) -> bool {
        matches!(self, Layout::Composite(_))
    }

    /// Stripe count of a plain layout (0 = default, 0xFFFF = all); `None` for composite.
    pub fn stripe_count(&self) -> Option<u16> {
        match self {
            Layout::Plain(p) => Some(p.stripe_count),
            Layout::Composite(_) => None,
        }
    }

    /// Stripe size of a plain layout in bytes (0 = default); `None` for composite.
    pub fn stripe_size(&self) -> Option<u32> {
        match self {
            Layout::Plain(p) => Some(p.stripe_size),
            Layout::Composite(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u32 = 1 << 20;

    /// Writes `value` at `at` in a test buffer, independently of the code under test.
    fn poke(buf: &mut [u8], at: usize, value: &[u8]) {
        buf[at..at + value.len()].copy_from_slice(value);
    }

    fn oid(seed: u8) -> [u8; 16] {
        std::array::from_fn(|i| seed.wrapping_add(i as u8))
    }

    /// A hand-built v1 header at the documented offsets.
    fn v1_bytes(stripe_size: u32, count: u16, offset: u16, stripes: usize) -> Vec<u8> {
        let mut b = vec![0u8; 32 + 24 * stripes];
        poke(&mut b, 0, &0x0BD1_0BD0u32.to_ne_bytes());
        poke(&mut b, 4, &1u32.to_ne_bytes());
        poke(&mut b, 8, &oid(0xA0));
        poke(&mut b, 24, &stripe_size.to_ne_bytes());
        poke(&mut b, 28, &count.to_ne_bytes());
        poke(&mut b, 30, &offset.to_ne_bytes());
        b
    }

    fn slot_bytes(buf: &mut [u8], at: usize, seed: u8, generation: u32, ost_index: u32) {
        poke(buf, at, &oid(seed));
        poke(buf, at + 16, &generation.to_ne_bytes());
        poke(buf, at + 20, &ost_index.to_ne_bytes());
    }

    fn pool(name: &str) -> [u8; 16] {
        let mut p = [0u8; 16];
        p[..name.len()].copy_from_slice(name.as_bytes());
        p
    }

    fn plain(count: u16, size: u32) -> Plain {
        match Layout::request(count, size) {
            Layout::Plain(p) => p,
            Layout::Composite(_) => unreachable!(),
        }
    }

    fn pfl() -> Composite {
        Composite {
            layout_gen: 7,
            flags: 0,
            mirror_count: 0,
            components: vec![
                Component {
                    id: 1,
                    flags: 0x10,
                    extent_start: 0,
                    extent_end: u64::from(MIB),
                    layout_gen: 3,
                    layout: Plain {
                        slots: vec![OstSlot {
                            object_id: oid(1),
                            generation: 0,
                            ost_index: 5,
                        }],
                        ..plain(1, MIB)
                    },
                },
                Component {
                    id: 2,
                    flags: 0,
                    extent_start: u64::from(MIB),
                    extent_end: u64::MAX,
                    layout_gen: 0,
                    layout: plain(4, 4 * MIB),
                },
            ],
        }
    }

    #[test]
    fn decode_v1_reads_every_field_at_its_offset() {
        let mut b = v1_bytes(MIB, 2, 9, 2);
        slot_bytes(&mut b, 32, 0x10, 3, 7);
        slot_bytes(&mut b, 56, 0x20, 4, 11);
        let Layout::Plain(p) = Layout::decode(&b).unwrap() else {
            panic!("not plain")
        };
        assert_eq!(p.pattern, 1);
        assert_eq!(p.object_id, oid(0xA0));
        assert_eq!(p.stripe_size, MIB);
        assert_eq!(p.stripe_count, 2);
        assert_eq!(p.stripe_offset, 9);
        assert_eq!(p.pool, None);
        assert!(!p.specific);
        assert_eq!(
            p.slots,
            vec![
                OstSlot {
                    object_id: oid(0x10),
                    generation: 3,
                    ost_index: 7
                },
                OstSlot {
                    object_id: oid(0x20),
                    generation: 4,
                    ost_index: 11
                },
            ]
        );
    }

    #[test]
    fn decode_v3_reads_pool_and_slots_after_it() {
        let mut b = vec![0u8; 48 + 24];
        poke(&mut b, 0, &0x0BD3_0BD0u32.to_ne_bytes());
        poke(&mut b, 4, &1u32.to_ne_bytes());
        poke(&mut b, 24, &(2 * MIB).to_ne_bytes());
        poke(&mut b, 28, &1u16.to_ne_bytes());
        poke(&mut b, 30, &0xFFFFu16.to_ne_bytes());
        poke(&mut b, 32, b"flash");
        slot_bytes(&mut b, 48, 0x30, 1, 42);
        let Layout::Plain(p) = Layout::decode(&b).unwrap() else {
            panic!("not plain")
        };
        assert_eq!(p.pool, Some(pool("flash")));
        assert_eq!(p.pool_name(), Some(&b"flash"[..]));
        assert_eq!(p.stripe_size, 2 * MIB);
        assert_eq!(p.stripe_count, 1);
        assert_eq!(p.stripe_offset, 0xFFFF);
        assert!(!p.specific);
        assert_eq!(p.slots.len(), 1);
        assert_eq!(p.slots[0].object_id, oid(0x30));
        assert_eq!(p.slots[0].generation, 1);
        assert_eq!(p.slots[0].ost_index, 42);
    }

    #[test]
    fn decode_v3_with_empty_pool_keeps_it_so_it_reencodes_as_v3() {
        let mut b = vec![0u8; 48];
        poke(&mut b, 0, &0x0BD3_0BD0u32.to_ne_bytes());
        let layout = Layout::decode(&b).unwrap();
        let Layout::Plain(p) = &layout else {
            panic!("not plain")
        };
        assert_eq!(p.pool, Some([0; 16]));
        assert_eq!(p.pool_name(), Some(&b""[..]));
        assert_eq!(layout.encode(), b);
    }

    #[test]
    fn decode_specific_reads_the_ost_list() {
        let mut b = vec![0u8; 48 + 2 * 24];
        poke(&mut b, 0, &0x0BD5_0BD0u32.to_ne_bytes());
        poke(&mut b, 4, &1u32.to_ne_bytes());
        poke(&mut b, 28, &2u16.to_ne_bytes());
        slot_bytes(&mut b, 48, 0, 0, 3);
        slot_bytes(&mut b, 72, 0, 0, 6);
        let Layout::Plain(p) = Layout::decode(&b).unwrap() else {
            panic!("not plain")
        };
        assert!(p.specific);
        assert_eq!(
            p.pool, None,
            "a specific layout with an empty pool has no pool"
        );
        let osts: Vec<u32> = p.slots.iter().map(|s| s.ost_index).collect();
        assert_eq!(osts, [3, 6]);
    }

    #[test]
    fn directory_default_has_a_count_but_no_slots() {
        let b = v1_bytes(4 * MIB, 4, 0xFFFF, 0);
        let layout = Layout::decode(&b).unwrap();
        assert_eq!(layout.stripe_count(), Some(4));
        assert_eq!(layout.stripe_size(), Some(4 * MIB));
        let Layout::Plain(p) = layout else {
            panic!("not plain")
        };
        assert!(p.slots.is_empty());
    }

    #[test]
    fn request_encodes_what_lfs_setstripe_sends() {
        let b = Layout::request(4, MIB).encode();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[0..4], &0x0BD1_0BD0u32.to_ne_bytes(), "magic V1 at 0");
        assert_eq!(&b[4..8], &1u32.to_ne_bytes(), "RAID0 at 4");
        assert_eq!(&b[8..24], &[0u8; 16], "object id zero at 8");
        assert_eq!(&b[24..28], &MIB.to_ne_bytes(), "stripe size at 24");
        assert_eq!(&b[28..30], &4u16.to_ne_bytes(), "stripe count at 28");
        assert_eq!(&b[30..32], &0xFFFFu16.to_ne_bytes(), "offset 0xFFFF at 30");
    }

    #[test]
    fn encode_v3_writes_pool_at_32_and_slots_at_48() {
        let layout = Layout::Plain(Plain {
            pattern: 1,
            object_id: oid(0x50),
            stripe_size: 3 * MIB,
            stripe_count: 2,
            stripe_offset: 17,
            pool: Some(pool("ssd")),
            specific: false,
            slots: vec![
                OstSlot {
                    object_id: oid(0x60),
                    generation: 8,
                    ost_index: 2,
                },
                OstSlot {
                    object_id: oid(0x70),
                    generation: 9,
                    ost_index: 4,
                },
            ],
        });
        let b = layout.encode();
        assert_eq!(b.len(), 48 + 2 * 24);
        assert_eq!(&b[0..4], &0x0BD3_0BD0u32.to_ne_bytes());
        assert_eq!(&b[8..24], &oid(0x50));
        assert_eq!(&b[24..28], &(3 * MIB).to_ne_bytes());
        assert_eq!(&b[28..30], &2u16.to_ne_bytes());
        assert_eq!(&b[30..32], &17u16.to_ne_bytes());
        assert_eq!(&b[32..48], &pool("ssd"));
        assert_eq!(&b[48..64], &oid(0x60));
        assert_eq!(&b[64..68], &8u32.to_ne_bytes());
        assert_eq!(&b[68..72], &2u32.to_ne_bytes());
        assert_eq!(&b[72..88], &oid(0x70));
        assert_eq!(&b[88..92], &9u32.to_ne_bytes());
        assert_eq!(&b[92..96], &4u32.to_ne_bytes());
        assert_eq!(Layout::decode(&b).unwrap(), layout);
    }

    #[test]
    fn encode_v1_slots_start_at_32() {
        let layout = Layout::Plain(Plain {
            slots: vec![OstSlot {
                object_id: oid(0x11),
                generation: 5,
                ost_index: 6,
            }],
            ..plain(1, MIB)
        });
        let b = layout.encode();
        assert_eq!(b.len(), 32 + 24);
        assert_eq!(&b[32..48], &oid(0x11));
        assert_eq!(&b[48..52], &5u32.to_ne_bytes());
        assert_eq!(&b[52..56], &6u32.to_ne_bytes());
    }

    #[test]
    fn encode_specific_uses_its_magic() {
        let layout = Layout::Plain(Plain {
            specific: true,
            stripe_count: 1,
            slots: vec![OstSlot {
                ost_index: 9,
                ..OstSlot::default()
            }],
            ..plain(1, MIB)
        });
        let b = layout.encode();
        assert_eq!(&b[0..4], &0x0BD5_0BD0u32.to_ne_bytes());
        assert_eq!(&b[32..48], &[0u8; 16], "no pool: zeros");
        assert_eq!(
            &b[68..72],
            &9u32.to_ne_bytes(),
            "ost_index of slot 0 at 48 + 20"
        );
        assert_eq!(Layout::decode(&b).unwrap(), layout);
    }

    #[test]
    fn sizes_follow_the_documented_formulas() {
        for n in [0usize, 1, 3, 17] {
            let slots = vec![OstSlot::default(); n];
            let v1 = Plain {
                slots: slots.clone(),
                ..plain(n as u16, MIB)
            };
            let v3 = Plain {
                pool: Some(pool("p")),
                ..v1.clone()
            };
            let specific = Plain {
                specific: true,
                ..v1.clone()
            };
            assert_eq!(Layout::Plain(v1).encode().len(), 32 + 24 * n);
            assert_eq!(Layout::Plain(v3).encode().len(), 48 + 24 * n);
            assert_eq!(Layout::Plain(specific).encode().len(), 48 + 24 * n);
        }
        let c = pfl();
        let blobs = (32 + 24) + 32;
        assert_eq!(Layout::Composite(c).encode().len(), 32 + 48 * 2 + blobs);
    }

    /// The PFL layout of [`pfl`], built by hand at the documented offsets.
    fn pfl_bytes() -> Vec<u8> {
        let blob0 = {
            let mut b = v1_bytes(MIB, 1, 0xFFFF, 1);
            poke(&mut b, 8, &[0u8; 16]);
            slot_bytes(&mut b, 32, 1, 0, 5);
            b
        };
        let blob1 = {
            let mut b = v1_bytes(4 * MIB, 4, 0xFFFF, 0);
            poke(&mut b, 8, &[0u8; 16]);
            b
        };
        let entries_end = 32 + 2 * 48;
        let total = entries_end + blob0.len() + blob1.len();
        let mut b = vec![0u8; total];
        poke(&mut b, 0, &0x0BD6_0BD0u32.to_ne_bytes());
        poke(&mut b, 4, &(total as u32).to_ne_bytes());
        poke(&mut b, 8, &7u32.to_ne_bytes());
        poke(&mut b, 12, &0u16.to_ne_bytes());
        poke(&mut b, 14, &2u16.to_ne_bytes());
        poke(&mut b, 16, &0u16.to_ne_bytes());
        let mut blob_at = entries_end;
        for (i, (id, flags, start, end, gen, blob)) in [
            (1u32, 0x10u32, 0u64, u64::from(MIB), 3u32, &blob0),
            (2, 0, u64::from(MIB), u64::MAX, 0, &blob1),
        ]
        .into_iter()
        .enumerate()
        {
            let e = 32 + 48 * i;
            poke(&mut b, e, &id.to_ne_bytes());
            poke(&mut b, e + 4, &flags.to_ne_bytes());
            poke(&mut b, e + 8, &start.to_ne_bytes());
            poke(&mut b, e + 16, &end.to_ne_bytes());
            poke(&mut b, e + 24, &(blob_at as u32).to_ne_bytes());
            poke(&mut b, e + 28, &(blob.len() as u32).to_ne_bytes());
            poke(&mut b, e + 32, &gen.to_ne_bytes());
            poke(&mut b, blob_at, blob);
            blob_at += blob.len();
        }
        b
    }

    #[test]
    fn decode_composite_reads_header_entries_and_blobs() {
        let b = pfl_bytes();
        let layout = Layout::decode(&b).unwrap();
        assert!(layout.is_composite());
        assert_eq!(layout.stripe_count(), None);
        assert_eq!(layout.stripe_size(), None);
        let Layout::Composite(c) = &layout else {
            panic!("not composite")
        };
        assert_eq!(c.layout_gen, 7);
        assert_eq!(c.flags, 0);
        assert_eq!(c.mirror_count, 0);
        assert_eq!(c.components.len(), 2);
        let (first, second) = (&c.components[0], &c.components[1]);
        assert_eq!((first.id, first.flags, first.layout_gen), (1, 0x10, 3));
        assert_eq!((first.extent_start, first.extent_end), (0, u64::from(MIB)));
        assert_eq!(first.layout.stripe_count, 1);
        assert_eq!(first.layout.stripe_size, MIB);
        assert_eq!(first.layout.slots[0].ost_index, 5);
        assert_eq!((second.id, second.flags), (2, 0));
        assert_eq!(second.extent_start, u64::from(MIB));
        assert_eq!(second.extent_end, u64::MAX);
        assert_eq!(second.layout.stripe_count, 4);
        assert_eq!(second.layout.stripe_size, 4 * MIB);
        assert!(second.layout.slots.is_empty());
        assert_eq!(layout, Layout::Composite(pfl()));
    }

    #[test]
    fn encode_composite_is_byte_identical_to_the_hand_built_layout() {
        let b = pfl_bytes();
        assert_eq!(Layout::Composite(pfl()).encode(), b);
        assert_eq!(Layout::decode(&b).unwrap().encode(), b);
    }

    #[test]
    fn encode_composite_writes_header_and_entry_fields_at_their_offsets() {
        let mut c = pfl();
        c.flags = 0x0102;
        c.mirror_count = 1;
        let b = Layout::Composite(c).encode();
        assert_eq!(&b[0..4], &0x0BD6_0BD0u32.to_ne_bytes());
        assert_eq!(&b[4..8], &(b.len() as u32).to_ne_bytes());
        assert_eq!(&b[8..12], &7u32.to_ne_bytes());
        assert_eq!(&b[12..14], &0x0102u16.to_ne_bytes());
        assert_eq!(&b[14..16], &2u16.to_ne_bytes());
        assert_eq!(&b[16..18], &1u16.to_ne_bytes());
        assert_eq!(&b[18..32], &[0u8; 14], "header padding");
        // Entry 1 starts at 32 + 48; its blob follows entry 0's 56-byte blob.
        let e = 80;
        assert_eq!(&b[e..e + 4], &2u32.to_ne_bytes());
        assert_eq!(&b[e + 8..e + 16], &u64::from(MIB).to_ne_bytes());
        assert_eq!(&b[e + 16..e + 24], &u64::MAX.to_ne_bytes());
        assert_eq!(&b[e + 24..e + 28], &(128u32 + 56).to_ne_bytes());
        assert_eq!(&b[e + 28..e + 32], &32u32.to_ne_bytes());
        assert_eq!(&b[e + 36..e + 48], &[0u8; 12], "entry padding");
        assert_eq!(&b[128..132], &0x0BD1_0BD0u32.to_ne_bytes(), "blob 0 magic");
        assert_eq!(&b[184..188], &0x0BD1_0BD0u32.to_ne_bytes(), "blob 1 magic");
        assert_eq!(&b[184 + 28..184 + 30], &4u16.to_ne_bytes());
    }

    #[test]
    fn round_trips() {
        let layouts = [
            Layout::request(0, 0),
            Layout::request(0xFFFF, 4 * MIB),
            Layout::Plain(Plain {
                pool: Some(pool("fast_pool")),
                stripe_offset: 12,
                slots: (0..3)
                    .map(|i| OstSlot {
                        object_id: oid(i),
                        generation: u32::from(i) + 100,
                        ost_index: u32::from(i) * 2,
                    })
                    .collect(),
                ..plain(3, 2 * MIB)
            }),
            Layout::Plain(Plain {
                specific: true,
                pool: Some(pool("p1")),
                slots: vec![
                    OstSlot {
                        ost_index: 1,
                        ..OstSlot::default()
                    };
                    2
                ],
                ..plain(2, MIB)
            }),
            Layout::Composite(pfl()),
            Layout::Composite(Composite {
                layout_gen: 1,
                flags: 2,
                mirror_count: 1,
                components: vec![],
            }),
        ];
        for layout in layouts {
            let bytes = layout.encode();
            assert_eq!(bytes.len(), layout.encoded_len());
            let back = Layout::decode(&bytes).unwrap();
            assert_eq!(back, layout);
            assert_eq!(back.encode(), bytes);
        }
    }

    #[test]
    fn short_buffers_are_rejected_with_what_and_where() {
        assert!(matches!(
            Layout::decode(&[]),
            Err(LayoutError::Short {
                need: 4,
                have: 0,
                ..
            })
        ));
        let v1 = v1_bytes(MIB, 1, 0, 0);
        assert!(matches!(
            Layout::decode(&v1[..31]),
            Err(LayoutError::Short {
                what: "lov_user_md_v1",
                need: 32,
                have: 31,
                offset: 0
            })
        ));
        let mut v3 = vec![0u8; 48];
        poke(&mut v3, 0, &0x0BD3_0BD0u32.to_ne_bytes());
        assert!(matches!(
            Layout::decode(&v3[..40]),
            Err(LayoutError::Short {
                what: "lov_user_md_v3",
                need: 48,
                ..
            })
        ));
        let mut specific = v3.clone();
        poke(&mut specific, 0, &0x0BD5_0BD0u32.to_ne_bytes());
        assert!(matches!(
            Layout::decode(&specific[..47]),
            Err(LayoutError::Short {
                what: "lov_user_md_specific",
                ..
            })
        ));
        let c = pfl_bytes();
        assert!(matches!(
            Layout::decode(&c[..20]),
            Err(LayoutError::Short {
                what: "lov_comp_md_v1 header",
                need: 32,
                ..
            })
        ));
        let err = Layout::decode(&c[..c.len() - 1]).unwrap_err();
        assert!(matches!(err, LayoutError::Short { need, .. } if need == c.len()));
        assert!(err.to_string().contains("decode layout"), "{err}");
    }

    #[test]
    fn partial_stripe_is_rejected() {
        let mut b = v1_bytes(MIB, 1, 0, 1);
        b.pop();
        assert_eq!(
            Layout::decode(&b),
            Err(LayoutError::PartialStripe {
                offset: 32,
                len: 23
            })
        );
    }

    #[test]
    fn unknown_magic_is_rejected() {
        let mut b = v1_bytes(MIB, 1, 0, 0);
        poke(&mut b, 0, &0x0BD7_0BD0u32.to_ne_bytes());
        let err = Layout::decode(&b).unwrap_err();
        assert_eq!(
            err,
            LayoutError::UnknownMagic {
                magic: 0x0BD7_0BD0,
                offset: 0
            }
        );
        assert!(err.to_string().contains("0x0bd70bd0"), "{err}");
        // Byte-swapped (another host's order) is unknown too.
        poke(&mut b, 0, &0x0BD1_0BD0u32.swap_bytes().to_ne_bytes());
        assert!(matches!(
            Layout::decode(&b),
            Err(LayoutError::UnknownMagic { .. })
        ));
    }

    #[test]
    fn component_blob_out_of_range_is_rejected() {
        let good = pfl_bytes();
        let entry1 = 32 + 48;
        // Blob past the composite's size.
        let mut b = good.clone();
        poke(&mut b, entry1 + 24, &(good.len() as u32 - 8).to_ne_bytes());
        assert!(matches!(
            Layout::decode(&b),
            Err(LayoutError::ComponentOutOfRange {
                index: 1,
                size: 32,
                min: 128,
                ..
            })
        ));
        // Blob overlapping the entry array.
        let mut b = good.clone();
        poke(&mut b, entry1 + 24, &100u32.to_ne_bytes());
        assert!(matches!(
            Layout::decode(&b),
            Err(LayoutError::ComponentOutOfRange {
                index: 1,
                offset: 100,
                ..
            })
        ));
        // Size so large that offset + size would overflow a u32.
        let mut b = good.clone();
        poke(&mut b, entry1 + 28, &u32::MAX.to_ne_bytes());
        let err = Layout::decode(&b).unwrap_err();
        assert!(matches!(
            err,
            LayoutError::ComponentOutOfRange { index: 1, .. }
        ));
        assert!(err.to_string().contains("component 1"), "{err}");
        // Blob in range but too small for a v1 header: the error gives its absolute offset.
        let mut b = good.clone();
        poke(&mut b, entry1 + 28, &16u32.to_ne_bytes());
        assert!(matches!(
            Layout::decode(&b),
            Err(LayoutError::Short {
                offset: 184,
                need: 32,
                have: 16,
                ..
            })
        ));
    }

    #[test]
    fn composite_size_smaller_than_its_entries_is_rejected() {
        let mut b = pfl_bytes();
        poke(&mut b, 4, &100u32.to_ne_bytes());
        assert_eq!(
            Layout::decode(&b),
            Err(LayoutError::CompositeSize {
                size: 100,
                entries: 2,
                need: 128
            })
        );
    }

    #[test]
    fn nested_composite_is_rejected() {
        let mut b = pfl_bytes();
        poke(&mut b, 184, &0x0BD6_0BD0u32.to_ne_bytes());
        assert_eq!(
            Layout::decode(&b),
            Err(LayoutError::NestedComposite {
                index: 1,
                offset: 184
            })
        );
    }

    #[test]
    fn decode_buffer_ignores_unused_capacity() {
        // A v3 ioctl buffer with room for 8 stripes, of which the kernel filled 2.
        let mut b = vec![0u8; 48 + 8 * 24];
        poke(&mut b, 0, &0x0BD3_0BD0u32.to_ne_bytes());
        poke(&mut b, 28, &2u16.to_ne_bytes());
        slot_bytes(&mut b, 48, 0, 0, 3);
        slot_bytes(&mut b, 72, 0, 0, 4);
        let Layout::Plain(p) = Layout::decode_buffer(&b).unwrap() else {
            panic!("not plain")
        };
        assert_eq!(p.slots.len(), 2);
        assert_eq!(p.slots[1].ost_index, 4);
        // A v1 answer in the same buffer stops at 32 + 24 * count.
        let mut b = vec![0u8; 48 + 8 * 24];
        poke(&mut b, 0, &0x0BD1_0BD0u32.to_ne_bytes());
        poke(&mut b, 28, &1u16.to_ne_bytes());
        let Layout::Plain(p) = Layout::decode_buffer(&b).unwrap() else {
            panic!("not plain")
        };
        assert_eq!((p.slots.len(), p.pool), (1, None));
        // More stripes than fit: only those that fit.
        let mut b = vec![0u8; 48 + 24];
        poke(&mut b, 0, &0x0BD3_0BD0u32.to_ne_bytes());
        poke(&mut b, 28, &5u16.to_ne_bytes());
        let Layout::Plain(p) = Layout::decode_buffer(&b).unwrap() else {
            panic!("not plain")
        };
        assert_eq!(p.slots.len(), 1);
        // A composite answer stops at its size field.
        let mut c = pfl_bytes();
        let len = c.len();
        c.resize(len + 100, 0xEE);
        assert_eq!(Layout::decode_buffer(&c).unwrap(), Layout::Composite(pfl()));
    }
}
