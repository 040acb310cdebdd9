//! Host-byte-order field access at explicit byte offsets.
//!
//! Kept by hand, not serde: these are the kernel's packed `lov_user_md` layouts (fixed offsets,
//! host byte order), not messages between ranks, which postcard's varints cannot produce.
//!
//! Lustre's layout structs are `__attribute__((packed))` and exchanged in host byte order. Rather
//! than mirror them with `#[repr(packed)]` structs (whose fields cannot safely be borrowed), every
//! field is copied in and out of a byte slice at its documented offset. Callers check the slice
//! length first; these helpers then index within bounds.

/// The `N` bytes at `at`.
pub(crate) fn array<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

/// The host-order `u16` at `at`.
pub(crate) fn get_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes(array(bytes, at))
}

/// The host-order `u32` at `at`.
pub(crate) fn get_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(array(bytes, at))
}

/// The host-order `u64` at `at`.
pub(crate) fn get_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(array(bytes, at))
}

/// Writes `value` at `at`.
pub(crate) fn put(bytes: &mut [u8], at: usize, value: &[u8]) {
    bytes[at..at + value.len()].copy_from_slice(value);
}

/// Writes a host-order `u16` at `at`.
pub(crate) fn put_u16(bytes: &mut [u8], at: usize, value: u16) {
    put(bytes, at, &value.to_ne_bytes());
}

/// Writes a host-order `u32` at `at`.
pub(crate) fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    put(bytes, at, &value.to_ne_bytes());
}

/// Writes a host-order `u64` at `at`.
pub(crate) fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    put(bytes, at, &value.to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_at_the_given_offset_in_host_order() {
        let mut buf = [0u8; 16];
        put_u16(&mut buf, 1, 0x0102);
        put_u32(&mut buf, 3, 0x0304_0506);
        put_u64(&mut buf, 7, 0x0708_090A_0B0C_0D0E);
        assert_eq!(buf[0], 0);
        assert_eq!(&buf[1..3], &0x0102u16.to_ne_bytes());
        assert_eq!(&buf[3..7], &0x0304_0506u32.to_ne_bytes());
        assert_eq!(&buf[7..15], &0x0708_090A_0B0C_0D0Eu64.to_ne_bytes());
        assert_eq!(buf[15], 0);
        assert_eq!(get_u16(&buf, 1), 0x0102);
        assert_eq!(get_u32(&buf, 3), 0x0304_0506);
        assert_eq!(get_u64(&buf, 7), 0x0708_090A_0B0C_0D0E);
        assert_eq!(array::<2>(&buf, 14), [buf[14], 0]);
    }
}
