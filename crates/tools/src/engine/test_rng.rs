//! The seeded random numbers of the fuzz drivers (tests only): the same seed gives the same
//! mutations, so a failure printed with its seed can be replayed.

use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng};

/// `len` pseudo-random bytes (xorshift) from `seed`: test data in which a misplaced or missing
/// piece shows.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A seeded generator with the two draws the drivers need.
pub struct Rng(SmallRng);

impl Rng {
    /// The generator for `seed`.
    pub fn seeded(seed: u64) -> Rng {
        Rng(SmallRng::seed_from_u64(seed))
    }

    /// Any `u64`.
    pub fn next(&mut self) -> u64 {
        self.0.random()
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.0.random_range(0..n)
        }
    }
}
