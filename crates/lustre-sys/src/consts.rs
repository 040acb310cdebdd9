//! Constants and ioctl numbers of Lustre's user-space API, defined by hand.
//!
//! Values come from `lustre_user.h` (stable since 2.12) as recorded in the project's `lustre.md`.
//! The ioctl numbers are computed with the generic Linux `_IOC` encoding (x86_64, aarch64) rather
//! than hard-coded, and checked against the documented values in the tests below.

/// `statfs.f_type` of a Lustre mount (`LL_SUPER_MAGIC`).
pub const LL_SUPER_MAGIC: i64 = 0x0BD0_0BD0;

/// Layout magic of a plain RAID0 layout, version 1 (`lov_user_md_v1`).
pub const LOV_USER_MAGIC_V1: u32 = 0x0BD1_0BD0;
/// Layout magic of v1 plus a 16-byte pool name (`lov_user_md_v3`).
pub const LOV_USER_MAGIC_V3: u32 = 0x0BD3_0BD0;
/// Layout magic of v3 plus an explicit OST list (`lov_user_md_v3` with `lmm_objects` naming OSTs).
pub const LOV_USER_MAGIC_SPECIFIC: u32 = 0x0BD5_0BD0;
/// Layout magic of a composite layout (PFL, FLR: `lov_comp_md_v1`).
pub const LOV_USER_MAGIC_COMP_V1: u32 = 0x0BD6_0BD0;
/// RAID0 striping pattern (`lmm_pattern`).
pub const LOV_PATTERN_RAID0: u32 = 0x001;
/// Data-on-MDT pattern: the component's data lives on the MDT (`LOV_PATTERN_MDT`).
pub const LOV_PATTERN_MDT: u32 = 0x100;
/// Pattern flag of an HSM-released file: its data is in the archive only
/// (`LOV_PATTERN_F_RELEASED`).
pub const LOV_PATTERN_F_RELEASED: u32 = 0x8000_0000;
/// Component flag: the component is instantiated (has OST objects; `LCME_FL_INIT`).
pub const LCME_FL_INIT: u32 = 0x10;
/// Component flag: a self-extending layout's extension component, never instantiated
/// (`LCME_FL_EXTENSION`).
pub const LCME_FL_EXTENSION: u32 = 0x40;
/// Stripe offset meaning "the server chooses the first OST".
pub const STRIPE_OFFSET_ANY: u16 = 0xFFFF;
/// Stripe count meaning "all OSTs" (-1 on the command line).
pub const STRIPE_COUNT_ALL: u16 = 0xFFFF;
/// Stripe count meaning "the file system default".
pub const STRIPE_COUNT_DEFAULT: u16 = 0;
/// Stripe sizes are multiples of this many bytes (64 KiB).
pub const STRIPE_SIZE_UNIT: u32 = 1 << 16;
/// Largest stripe count (OSTs per file) Lustre accepts.
pub const MAX_STRIPE_COUNT: u16 = 2000;
/// Extended attribute holding a file's layout (a directory's default layout on directories).
pub const XATTR_LUSTRE_LOV: &str = "lustre.lov";
/// `open` flag that creates the inode without OST objects, so a layout can be set first
/// (`O_NOCTTY | O_ASYNC`: Lustre reuses two flags a regular-file open otherwise ignores;
/// `0x2100` on x86_64 and aarch64).
pub const O_LOV_DELAY_CREATE: i32 = libc::O_NOCTTY | libc::O_ASYNC;

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
/// Bytes of a pool name field, including its terminating NUL (`LOV_MAXPOOLNAME + 1`).
pub const LOV_POOL_NAME_SIZE: usize = 16;

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// The generic Linux `_IOC(dir, type, nr, size)` encoding; `size` is the argument's size in bytes.
pub const fn ioc(dir: u32, kind: u8, nr: u8, size: usize) -> u32 {
    (dir << IOC_DIRSHIFT)
        | ((kind as u32) << IOC_TYPESHIFT)
        | ((nr as u32) << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}

const LONG: usize = std::mem::size_of::<std::ffi::c_long>();
const POINTER: usize = std::mem::size_of::<*const u8>();

/// Set a file's layout (`_IOW('f', 154, long)`); the argument points at a `lov_user_md`.
pub const LL_IOC_LOV_SETSTRIPE: u32 = ioc(IOC_WRITE, b'f', 154, LONG);
/// Read a file's layout (`_IOW('f', 155, long)`); the argument points at a pre-filled buffer.
pub const LL_IOC_LOV_GETSTRIPE: u32 = ioc(IOC_WRITE, b'f', 155, LONG);
/// Take a group lock (`_IOW('f', 158, long)`); the argument is the group id itself.
pub const LL_IOC_GROUP_LOCK: u32 = ioc(IOC_WRITE, b'f', 158, LONG);
/// Release a group lock (`_IOW('f', 159, long)`); the argument is the group id itself.
pub const LL_IOC_GROUP_UNLOCK: u32 = ioc(IOC_WRITE, b'f', 159, LONG);
/// Number of OSTs of a file system (`_IOR('f', 168, long)`); the argument points at an `int`
/// set to 0 (non-zero asks for the MDT count). Handled on directories only.
pub const LL_IOC_GETOBDCOUNT: u32 = ioc(IOC_READ, b'f', 168, LONG);
/// Layout of a file by name, from its directory (`_IOWR('i', 21, pointer)`).
pub const IOC_MDC_GETFILESTRIPE: u32 = ioc(IOC_READ | IOC_WRITE, b'i', 21, POINTER);
/// Index of the MDT holding an inode (`_IOR('f', 175, int)`); the kernel writes the `int`
/// behind the argument.
pub const LL_IOC_GET_MDTIDX: u32 = ioc(IOC_READ, b'f', 175, std::mem::size_of::<i32>());

// Layout swap, as `lfs migrate` does it. From `lustre/include/uapi/linux/lustre/lustre_user.h`
// (lustre-release, 2.12 and later):
//   #define LL_IOC_DATA_VERSION      _IOR('f', 218, struct ioc_data_version)
//   #define LL_IOC_LOV_SWAP_LAYOUTS  _IOW('f', 219, struct lustre_swap_layouts)
//   struct ioc_data_version { __u64 idv_version; __u32 idv_layout_version; __u32 idv_flags; };
//   struct lustre_swap_layouts { __u64 sl_flags; __u32 sl_fd; __u32 sl_gid; __u64 sl_dv1;
//                                __u64 sl_dv2; };
//   LL_DV_RD_FLUSH = 1 << 0; SWAP_LAYOUTS_CHECK_DV1 = 1 << 0, _CHECK_DV2 = 1 << 1,
//   _KEEP_MTIME = 1 << 2, _KEEP_ATIME = 1 << 3.

/// Bytes of `struct ioc_data_version`: `u64` version at 0, `u32` layout version at 8, `u32`
/// flags at 12.
pub const IOC_DATA_VERSION_SIZE: usize = 16;
/// Bytes of `struct lustre_swap_layouts`: `u64` flags at 0, `u32` fd at 8, `u32` group lock id
/// at 12, `u64` dv1 at 16, `u64` dv2 at 24.
pub const LUSTRE_SWAP_LAYOUTS_SIZE: usize = 32;
/// Read a file's data version, a number that changes whenever its data does
/// (`_IOR('f', 218, struct ioc_data_version)`).
pub const LL_IOC_DATA_VERSION: u32 = ioc(IOC_READ, b'f', 218, IOC_DATA_VERSION_SIZE);
/// Swap the layouts (and so the data) of two files, issued on the first with the second's
/// descriptor in the argument (`_IOW('f', 219, struct lustre_swap_layouts)`).
pub const LL_IOC_LOV_SWAP_LAYOUTS: u32 = ioc(IOC_WRITE, b'f', 219, LUSTRE_SWAP_LAYOUTS_SIZE);
/// `idv_flags`: flush dirty pages of every client before sampling the version.
pub const LL_DV_RD_FLUSH: u32 = 1 << 0;
/// `sl_flags`: refuse (`EAGAIN`) unless the first file's data version is still `sl_dv1`.
pub const SWAP_LAYOUTS_CHECK_DV1: u64 = 1 << 0;
/// `sl_flags`: refuse (`EAGAIN`) unless the second file's data version is still `sl_dv2`.
pub const SWAP_LAYOUTS_CHECK_DV2: u64 = 1 << 1;
/// `sl_flags`: each file keeps its own modification time.
pub const SWAP_LAYOUTS_KEEP_MTIME: u64 = 1 << 2;
/// `sl_flags`: each file keeps its own access time.
pub const SWAP_LAYOUTS_KEEP_ATIME: u64 = 1 << 3;

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
        assert_eq!(LL_IOC_GET_MDTIDX, 0x8004_66af);
        assert_eq!(LL_IOC_DATA_VERSION, 0x8010_66da);
        assert_eq!(LL_IOC_LOV_SWAP_LAYOUTS, 0x4020_66db);
    }

    #[test]
    fn swap_flags_and_patterns() {
        assert_eq!(
            SWAP_LAYOUTS_CHECK_DV1
                | SWAP_LAYOUTS_CHECK_DV2
                | SWAP_LAYOUTS_KEEP_MTIME
                | SWAP_LAYOUTS_KEEP_ATIME,
            0b1111
        );
        assert_eq!(LL_DV_RD_FLUSH, 1);
        assert_eq!(LOV_PATTERN_MDT, 0x100);
        assert_eq!(LOV_PATTERN_F_RELEASED, 1 << 31);
        assert_eq!((LCME_FL_INIT, LCME_FL_EXTENSION), (0x10, 0x40));
    }

    #[test]
    fn ioc_follows_the_generic_formula() {
        // dir in bits 30..32, size in 16..30, type in 8..16, nr in 0..8.
        let expected = (1u32 << 30) | (8 << 16) | (u32::from(b'f') << 8) | 154;
        assert_eq!(ioc(1, b'f', 154, 8), expected);
        assert_eq!(
            ioc(2, b'f', 168, 8),
            (2u32 << 30) | (8 << 16) | (0x66 << 8) | 168
        );
        assert_eq!(ioc(3, b'i', 21, 8), 0xc008_6915);
        assert_eq!(ioc(0, 0, 0, 0), 0);
        // The size field is 14 bits wide: the largest size lands just below the direction bits.
        assert_eq!(ioc(0, 0, 0, (1 << 14) - 1), 0x3FFF_0000);
    }

    #[test]
    fn magics_and_pattern() {
        assert_eq!(LL_SUPER_MAGIC, 0x0BD0_0BD0);
        assert_eq!(LOV_USER_MAGIC_V1, 0x0BD1_0BD0);
        assert_eq!(LOV_USER_MAGIC_V3, 0x0BD3_0BD0);
        assert_eq!(LOV_USER_MAGIC_SPECIFIC, 0x0BD5_0BD0);
        assert_eq!(LOV_USER_MAGIC_COMP_V1, 0x0BD6_0BD0);
        assert_eq!(LOV_PATTERN_RAID0, 1);
    }

    #[test]
    fn special_counts_offsets_and_limits() {
        assert_eq!(STRIPE_OFFSET_ANY, 0xFFFF);
        assert_eq!(STRIPE_COUNT_ALL, 0xFFFF);
        assert_eq!(STRIPE_COUNT_ALL as i16, -1);
        assert_eq!(STRIPE_COUNT_DEFAULT, 0);
        assert_eq!(STRIPE_SIZE_UNIT, 65536);
        assert_eq!(MAX_STRIPE_COUNT, 2000);
        assert_eq!(XATTR_LUSTRE_LOV, "lustre.lov");
    }

    #[test]
    fn delay_create_flag() {
        assert_eq!(O_LOV_DELAY_CREATE, libc::O_NOCTTY | libc::O_ASYNC);
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        assert_eq!(O_LOV_DELAY_CREATE, 0x2100);
    }

    #[test]
    fn struct_sizes() {
        assert_eq!(LOV_USER_MD_V1_SIZE, 32);
        assert_eq!(
            LOV_USER_MD_V3_SIZE,
            LOV_USER_MD_V1_SIZE + LOV_POOL_NAME_SIZE
        );
        assert_eq!(LOV_USER_MD_V3_SIZE, 48);
        assert_eq!(LOV_USER_OST_DATA_SIZE, 24);
        assert_eq!(LOV_COMP_MD_V1_SIZE, 32);
        assert_eq!(LOV_COMP_MD_ENTRY_SIZE, 48);
    }
}
