//! What the benches of mfu-rs share: the criterion benches and `cargo xtask bench`'s workload
//! generator.

/// splitmix64: a tiny seeded generator, so the benches need no extra dependency and make the
/// same records on every run.
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fill `buf` with pseudo-random (incompressible) bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }

    /// Lower-case hex digits, a newline every 64: 4 bits of entropy per byte, so a compressor
    /// gets about 2:1 out of it and no more.
    pub fn fill_hex(&mut self, buf: &mut [u8]) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for line in buf.chunks_mut(65) {
            for c in line.chunks_mut(16) {
                let v = self.next_u64();
                for (i, b) in c.iter_mut().enumerate() {
                    *b = HEX[(v >> (4 * i)) as usize & 15];
                }
            }
            if line.len() == 65 {
                line[64] = b'\n';
            }
        }
    }
}
