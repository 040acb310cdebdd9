//! Being removed: use typed collectives ([`crate::typed`], `CommExt::bcast_from`,
//! `all_gather`, `gather_to`, `agree`, `send_value`) and derive serde on the message.
//!
//! The hand-written byte encoding of values that travel between ranks (little-endian `u64`,
//! length-prefixed byte strings), kept only while the last hand-written encoders (tar, sync, rm,
//! parallel, copy) move to the typed family.

/// Append `v`.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append `b` with its length.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Reads what `put_*` wrote, from the front. The bytes come from another rank of the same
/// program, so a malformed message is a bug and panics.
#[derive(Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Read from the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    /// The next `n` raw bytes.
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        head
    }

    /// One byte.
    pub fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }

    /// One `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }

    /// A length-prefixed byte string.
    pub fn bytes(&mut self) -> &'a [u8] {
        let n = self.u64() as usize;
        self.take(n)
    }

    /// What is left unread.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_in_order() {
        let mut b = Vec::new();
        put_u64(&mut b, u64::MAX - 3);
        put_bytes(&mut b, b"a\xff");
        put_bytes(&mut b, b"");
        b.push(7);
        let mut r = Reader::new(&b);
        assert_eq!(r.u64(), u64::MAX - 3);
        assert_eq!(r.bytes(), b"a\xff");
        assert_eq!(r.bytes(), b"");
        assert_eq!(r.rest(), &[7]);
        assert_eq!(r.u8(), 7);
        assert!(r.is_empty());
    }
}
