//! Sizes as `du` prints them: whole units of a block size, rounded up (`du -s`: 1 KiB blocks;
//! `-B SIZE`), or human-readable (`-h`: `4.0K`, `12M`, rounded up as GNU du does).

use super::tally::{Measure, Usage};

/// How sizes are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Units {
    /// Bytes per unit shown (1024 by default, as `du`).
    pub block_size: u64,
    /// Human-readable sizes (`-h`) instead of units.
    pub human: bool,
    /// Which size is shown (allocated or apparent).
    pub measure: Measure,
}

impl Default for Units {
    fn default() -> Units {
        Units {
            block_size: 1024,
            human: false,
            measure: Measure::Allocated,
        }
    }
}

impl Units {
    /// The size of `u` in whole units, rounded up (`du`'s rounding).
    pub fn count(&self, u: &Usage) -> u64 {
        u.measured(self.measure).div_ceil(self.block_size.max(1))
    }

    /// The size of `u` as printed: a count of units, or human-readable.
    pub fn text(&self, u: &Usage) -> String {
        if self.human {
            human(u.measured(self.measure))
        } else {
            self.count(u).to_string()
        }
    }

    /// What the numbers are, for a table's heading: `1K-blocks`, `bytes`, `size`.
    pub fn heading(&self) -> String {
        match (self.human, self.block_size) {
            (true, _) => "SIZE".into(),
            (false, 1) => "BYTES".into(),
            (false, b) if b % (1 << 30) == 0 => format!("{}G-BLOCKS", b >> 30),
            (false, b) if b % (1 << 20) == 0 => format!("{}M-BLOCKS", b >> 20),
            (false, b) if b % 1024 == 0 => format!("{}K-BLOCKS", b >> 10),
            (false, b) => format!("{b}B-BLOCKS"),
        }
    }
}

/// `bytes` as `du -h` prints it: plain below 1024, else one decimal below 10 of the unit and
/// none above, always rounded up (`1025` → `1.1K`, `10241` → `11K`).
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if bytes < 1024 {
        return bytes.to_string();
    }
    let mut unit = 0;
    let mut scale: u128 = 1024;
    while unit + 1 < UNITS.len() && u128::from(bytes) >= scale * 1024 {
        unit += 1;
        scale *= 1024;
    }
    let b = u128::from(bytes);
    let tenths = (b * 10).div_ceil(scale);
    if tenths < 100 {
        return format!("{}.{}{}", tenths / 10, tenths % 10, UNITS[unit]);
    }
    let whole = b.div_ceil(scale);
    if whole >= 1024 && unit + 1 < UNITS.len() {
        // 1023.5M rounds up to the next unit.
        return format!("1.0{}", UNITS[unit + 1]);
    }
    format!("{whole}{}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_round_up_as_du() {
        assert_eq!(human(0), "0");
        assert_eq!(human(1023), "1023");
        assert_eq!(human(1024), "1.0K");
        assert_eq!(human(1025), "1.1K");
        assert_eq!(human(10 * 1024), "10K");
        assert_eq!(human(10 * 1024 + 1), "11K");
        assert_eq!(human(4096), "4.0K");
        assert_eq!(human(1024 * 1024 - 1), "1.0M");
        assert_eq!(human(5 << 30), "5.0G");
    }

    #[test]
    fn counts_round_up_in_the_chosen_measure() {
        let u = Usage {
            files: 3,
            bytes: 1500,
            blocks: 9,
        };
        let k = Units::default();
        assert_eq!(k.count(&u), 5, "9 × 512 = 4608 bytes: 4.5 KiB → 5");
        let apparent = Units {
            measure: Measure::Apparent,
            block_size: 1,
            ..k
        };
        assert_eq!(apparent.count(&u), 1500);
        assert_eq!(apparent.heading(), "BYTES");
        assert_eq!(k.heading(), "1K-BLOCKS");
        assert_eq!(Units { human: true, ..k }.text(&u), "4.5K");
    }
}
