//! Lustre striping constants, ioctl numbers and layout sizes, defined by hand.
//!
//! No bindgen and no link against liblustreapi: one mfu-rs binary runs on Lustre and non-Lustre
//! nodes alike. Values come from Lustre's user-space API (`lustre_user.h`, stable since 2.12) as
//! documented in the project's `lustre.md`; the ioctl numbers are computed with the generic
//! Linux `_IOC` encoding (x86_64, aarch64) and checked against the documented values in tests.
//! There is no Lustre on the build machines: the layouts are tested against the documented byte
//! offsets, not against a live file system. Encoding, decoding and the ioctls themselves come
//! with the Lustre issue.

/// `statfs.f_type` of a Lustre mount (`LL_SUPER_MAGIC`).
pub const LL_SUPER_MAGIC: i64 = 0x0BD0_0BD0;

/// Layout magic of a plain RAID0 layout, version 1.
pub const LOV_USER_MAGIC_V1: u32 = 0x0BD1_0BD0;
/// Layout magic of v1 plus a 16-byte pool name.
pub const LOV_USER_MAGIC_V3: u32 = 0x0BD3_0BD0;
/// Layout magic of v3 plus an explicit OST list.
pub const LOV_USER_MAGIC_SPECIFIC: u32 = 0x0BD5_0BD0;
/// Layout magic of a composite layout (PFL, FLR).
pub const LOV_USER_MAGIC_COMP_V1: u32 = 0x0BD6_0BD0;
/// RAID0 striping pattern.
pub const LOV_PATTERN_RAID0: u32 = 0x001;
/// Stripe offset meaning "the server chooses the first OST".
pub const STRIPE_OFFSET_ANY: u16 = 0xFFFF;
/// Stripe count meaning "all OSTs" (-1 on the command line).
pub const STRIPE_COUNT_ALL: u16 = 0xFFFF;
/// Stripe count meaning "the file system default".
pub const STRIPE_COUNT_DEFAULT: u16 = 0;
/// Stripe sizes are multiples of this many bytes (64 KiB).
pub const STRIPE_SIZE_UNIT: u32 = 1 << 16;
/// Largest stripe count Lustre accepts.
pub const MAX_STRIPE_COUNT: u16 = 2000;
/// Extended attribute holding a file's layout.
pub const XATTR_LUSTRE_LOV: &str = "lustre.lov";
/// `open` flag that creates the inode without OST objects, so a layout can be set first
/// (`O_NOCTTY | O_ASYNC`).
pub const O_LOV_DELAY_CREATE: i32 = 0o400 | 0o20000;

/// Bytes of `lov_user_md_v1` before its stripes.
pub const LOV_USER_MD_V1_SIZE: usize = 32;
/// Bytes of `lov_user_md_v3` before its stripes (v1 + 16-byte pool name).
pub const LOV_USER_MD_V3_SIZE: usize = 48;
/// Bytes of one `lov_user_ost_data_v1` stripe entry.
pub const LOV_USER_OST_DATA_SIZE: usize = 24;
/// Bytes of `lov_comp_md_v1` before its entries.
pub const LOV_COMP_MD_V1_SIZE: usize = 32;
/// Bytes of one `lov_comp_md_entry_v1`.
pub const LOV_COMP_MD_ENTRY_SIZE: usize = 48;

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// The generic Linux `_IOC(dir, type, nr, size)` encoding.
pub const fn ioc(dir: u32, kind: u8, nr: u8, size: usize) -> u32 {
    (dir << IOC_DIRSHIFT)
        | ((kind as u32) << IOC_TYPESHIFT)
        | ((nr as u32) << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}

const LONG: usize = std::mem::size_of::<std::ffi::c_long>();
const POINTER: usize = std::mem::size_of::<*const u8>();

/// Set a file's layout (`_IOW('f', 154, long)`).
pub const LL_IOC_LOV_SETSTRIPE: u32 = ioc(IOC_WRITE, b'f', 154, LONG);
/// Read a file's layout (`_IOW('f', 155, long)`).
pub const LL_IOC_LOV_GETSTRIPE: u32 = ioc(IOC_WRITE, b'f', 155, LONG);
/// Take a group lock (`_IOW('f', 158, long)`).
pub const LL_IOC_GROUP_LOCK: u32 = ioc(IOC_WRITE, b'f', 158, LONG);
/// Release a group lock (`_IOW('f', 159, long)`).
pub const LL_IOC_GROUP_UNLOCK: u32 = ioc(IOC_WRITE, b'f', 159, LONG);
/// Number of OSTs of a file system (`_IOR('f', 168, long)`).
pub const LL_IOC_GETOBDCOUNT: u32 = ioc(IOC_READ, b'f', 168, LONG);
/// Layout of a file by name, from its directory (`_IOWR('i', 21, pointer)`).
pub const IOC_MDC_GETFILESTRIPE: u32 = ioc(IOC_READ | IOC_WRITE, b'i', 21, POINTER);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn ioctl_numbers_match_the_documented_x86_64_values() {
        assert_eq!(LL_IOC_LOV_SETSTRIPE, 0x4008_669a);
        assert_eq!(LL_IOC_LOV_GETSTRIPE, 0x4008_669b);
        assert_eq!(LL_IOC_GROUP_LOCK, 0x4008_669e);
        assert_eq!(LL_IOC_GROUP_UNLOCK, 0x4008_669f);
        assert_eq!(LL_IOC_GETOBDCOUNT, 0x8008_66a8);
        assert_eq!(IOC_MDC_GETFILESTRIPE, 0xc008_6915);
    }

    #[test]
    fn flags_and_sizes() {
        assert_eq!(O_LOV_DELAY_CREATE, 0x2100);
        assert_eq!(LOV_USER_MD_V3_SIZE, LOV_USER_MD_V1_SIZE + 16);
        assert_eq!(STRIPE_SIZE_UNIT, 65536);
    }
}
