//! What a seed makes: the whole tree as a pure function of a [`Spec`], never of the rank
//! count. Every random choice is a counter-based draw, `draw(seed, stream, index)` (three
//! SplitMix64 rounds over the seed, the kind of choice and the item's number), so any rank
//! computes any item without the others, and file contents are blake3 output streams keyed by
//! (seed, item) that can be read from any offset.

use std::ops::{Range, RangeInclusive};

/// What generated files hold (dfilemaker's `--fill`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fill {
    /// Pseudo-random bytes: the blake3 output stream keyed by the seed and the file's number.
    Random,
    /// Every byte `0xFF` (every bit set).
    True,
    /// Every byte `0x00`.
    False,
    /// Every byte `0xAA` (bits `10101010`).
    Alternate,
}

impl Fill {
    /// The bytes of file number `item` of a tree made with `seed`, from byte `offset` on, into
    /// `buf`. The same at any offset split: chunks written by different ranks join seamlessly.
    pub fn fill(self, seed: u64, item: u64, offset: u64, buf: &mut [u8]) {
        match self {
            Fill::Random => {
                let mut h = blake3::Hasher::new_derive_key("mfu-rs filemaker contents v1");
                h.update(&seed.to_le_bytes());
                h.update(&item.to_le_bytes());
                let mut out = h.finalize_xof();
                out.set_position(offset);
                out.fill(buf);
            }
            Fill::True => buf.fill(0xFF),
            Fill::False => buf.fill(0x00),
            Fill::Alternate => buf.fill(0xAA),
        }
    }
}

/// The options of a tree. Ranges are inclusive; the seed picks one value from `depth` and
/// `nitems` for the whole tree, and one size from `size` for every file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Seed of every random choice.
    pub seed: u64,
    /// What files hold.
    pub fill: Fill,
    /// Levels of items below the root (1: everything directly in it). At least 1.
    pub depth: RangeInclusive<u64>,
    /// Items (directories, files, links), the root not counted. At least the depth.
    pub nitems: RangeInclusive<u64>,
    /// Bytes per file.
    pub size: RangeInclusive<u64>,
    /// Percent of items that are regular files (of the rest, `link_percent` are symbolic
    /// links, the others directories).
    pub file_percent: u8,
    /// Percent of items that are symbolic links.
    pub link_percent: u8,
}

impl Default for Spec {
    /// dfilemaker's defaults: seed 1, random fill, 5 levels, 3000 items, files of 0 to 2000
    /// bytes, about a third each of files, directories and links.
    fn default() -> Self {
        Spec {
            seed: 1,
            fill: Fill::Random,
            depth: 5..=5,
            nitems: 3000..=3000,
            size: 0..=2000,
            file_percent: 34,
            link_percent: 33,
        }
    }
}

/// The type of an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory (mode 0700, as dfilemaker).
    Dir,
    /// A regular file (mode 0600).
    File,
    /// A symbolic link to another item, by a relative path.
    Link,
}

/// Most bytes the files of one tree may hold together: `i64::MAX`, the largest file offset
/// (`off_t`). [`Plan::new`] refuses more, so sums over a plan's sizes cannot overflow.
pub const MAX_TOTAL_BYTES: u64 = i64::MAX as u64;

/// No parent: the item is directly in the root.
pub const ROOT: u32 = u32::MAX;

/// One item of a plan. Its name is `dir_`, `file_` or `link_` and its number (its index in
/// [`Plan::items`]) in at least 8 digits, as dfilemaker names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    /// Type.
    pub kind: Kind,
    /// The directory item it is in, or `ROOT`.
    pub parent: u32,
    /// Bytes (files only; 0 for the others).
    pub size: u64,
    /// The item a link points to (links only; `ROOT` for the others).
    pub target: u32,
}

/// A whole tree: items numbered level by level, from the root's entries down.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The seed the tree was drawn with (it also keys file contents).
    pub seed: u64,
    /// What files hold.
    pub fill: Fill,
    /// Every item; an item's number is its index.
    pub items: Vec<Item>,
    /// The item numbers of each level (level 0 is directly in the root).
    pub levels: Vec<Range<u32>>,
}

// Streams: one per kind of choice, so that the choices are independent.
const DEPTH: u64 = 1;
const NITEMS: u64 = 2;
const KIND: u64 = 3;
const PARENT: u64 = 4;
const SIZE: u64 = 5;
const TARGET: u64 = 6;

/// SplitMix64's output function.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The random number of choice `stream` for item `index` of a tree drawn with `seed`.
fn draw(seed: u64, stream: u64, index: u64) -> u64 {
    mix(mix(mix(seed) ^ stream) ^ index)
}

/// A number in `lo..=hi` from a random `d` (multiply-shift: no division, no visible bias).
fn uniform(d: u64, lo: u64, hi: u64) -> u64 {
    let span = (hi - lo) as u128 + 1;
    lo + ((d as u128 * span) >> 64) as u64
}

impl Plan {
    /// Draw the tree `spec` describes. `Err` says which option is out of range.
    pub fn new(spec: &Spec) -> Result<Plan, String> {
        let (dmin, dmax) = (*spec.depth.start(), *spec.depth.end());
        let (nmin, nmax) = (*spec.nitems.start(), *spec.nitems.end());
        let (smin, smax) = (*spec.size.start(), *spec.size.end());
        if dmin == 0 || dmin > dmax {
            return Err(format!(
                "--depth {dmin}-{dmax}: need 1 <= MIN <= MAX (levels below DIR)"
            ));
        }
        if nmin > nmax || nmax < dmin {
            return Err(format!(
                "--nitems {nmin}-{nmax}: need MIN <= MAX and MAX at least the smallest depth \
                 ({dmin}): every level holds an item"
            ));
        }
        if nmax >= ROOT as u64 {
            return Err(format!(
                "--nitems {nmin}-{nmax}: at most {} items",
                ROOT - 1
            ));
        }
        if smin > smax {
            return Err(format!("--size {smin}-{smax}: need MIN <= MAX"));
        }
        if spec.file_percent as u32 + spec.link_percent as u32 > 100 {
            return Err(format!(
                "--files {}% and --links {}% add up to more than 100%",
                spec.file_percent, spec.link_percent
            ));
        }
        let seed = spec.seed;
        let depth = uniform(draw(seed, DEPTH, 0), dmin, dmax.min(nmax));
        let total = uniform(draw(seed, NITEMS, 0), nmin.max(depth), nmax);
        let counts = level_counts(total, depth);

        let mut items = Vec::with_capacity(total as usize);
        let mut levels = Vec::with_capacity(counts.len());
        let mut parents: Vec<u32> = Vec::new(); // directories of the level above
        for (level, &n) in counts.iter().enumerate() {
            let first = items.len() as u32;
            let last_level = level + 1 == counts.len();
            for g in first..first + n as u32 {
                let r = draw(seed, KIND, g as u64) % 100;
                let kind = if r < spec.file_percent as u64 {
                    Kind::File
                } else if r < (spec.file_percent + spec.link_percent) as u64 {
                    Kind::Link
                } else {
                    Kind::Dir
                };
                let parent = if parents.is_empty() {
                    ROOT
                } else {
                    parents[uniform(draw(seed, PARENT, g as u64), 0, parents.len() as u64 - 1)
                        as usize]
                };
                let size = if kind == Kind::File {
                    uniform(draw(seed, SIZE, g as u64), smin, smax)
                } else {
                    0
                };
                items.push(Item {
                    kind,
                    parent,
                    size,
                    target: ROOT,
                });
            }
            let range = first..items.len() as u32;
            // The next level needs a directory to live in: the first item becomes one.
            if !last_level
                && !items[range.start as usize..]
                    .iter()
                    .any(|i| i.kind == Kind::Dir)
            {
                let i = &mut items[first as usize];
                i.kind = Kind::Dir;
                i.size = 0;
            }
            parents = range
                .clone()
                .filter(|&g| items[g as usize].kind == Kind::Dir)
                .collect();
            levels.push(range);
        }
        // Checked: sizes near u64::MAX would wrap, and no file system holds more than an off_t.
        let bytes = items
            .iter()
            .try_fold(0u64, |sum, i| sum.checked_add(i.size))
            .filter(|&sum| sum <= MAX_TOTAL_BYTES);
        if bytes.is_none() {
            return Err(format!(
                "--size {smin}-{smax}: the files of this tree would hold more than {MAX_TOTAL_BYTES} \
                 bytes (8 EiB, the largest file offset)"
            ));
        }
        for (g, item) in items.iter_mut().enumerate() {
            if item.kind == Kind::Link {
                let mut t = draw(seed, TARGET, g as u64) % total;
                if t == g as u64 && total > 1 {
                    t = (t + 1) % total;
                }
                item.target = t as u32;
            }
        }
        Ok(Plan {
            seed,
            fill: spec.fill,
            items,
            levels,
        })
    }

    /// The name of item `g`: `dir_00000012`, `file_...`, `link_...`.
    pub fn name(&self, g: u32) -> Vec<u8> {
        let kind = match self.items[g as usize].kind {
            Kind::Dir => "dir",
            Kind::File => "file",
            Kind::Link => "link",
        };
        format!("{kind}_{g:08}").into_bytes()
    }

    /// The directories from the root down to item `g`'s own directory (not `g`).
    fn ancestors(&self, g: u32) -> Vec<u32> {
        let mut chain = Vec::new();
        let mut p = self.items[g as usize].parent;
        while p != ROOT {
            chain.push(p);
            p = self.items[p as usize].parent;
        }
        chain.reverse();
        chain
    }

    /// The path of item `g` relative to the root (`dir_00000001/file_00000012`).
    pub fn rel_path(&self, g: u32) -> Vec<u8> {
        let mut out = Vec::new();
        for a in self.ancestors(g).into_iter().chain([g]) {
            if !out.is_empty() {
                out.push(b'/');
            }
            out.extend_from_slice(&self.name(a));
        }
        out
    }

    /// What link `g` holds: the path of its target relative to the link's directory, so the
    /// tree can move (and trees made in different places compare equal).
    pub fn link_target(&self, g: u32) -> Vec<u8> {
        let target = self.items[g as usize].target;
        let from = self.ancestors(g);
        let to = self.ancestors(target);
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        let mut out = Vec::new();
        for _ in common..from.len() {
            out.extend_from_slice(b"../");
        }
        for &d in &to[common..] {
            out.extend_from_slice(&self.name(d));
            out.push(b'/');
        }
        out.extend_from_slice(&self.name(target));
        out
    }

    /// Bytes of all files: at most `MAX_TOTAL_BYTES` for a plan from [`Plan::new`]
    /// (saturating for a plan built by hand).
    pub fn total_bytes(&self) -> u64 {
        self.items
            .iter()
            .fold(0u64, |sum, i| sum.saturating_add(i.size))
    }

    /// Items of a kind.
    pub fn count(&self, kind: Kind) -> u64 {
        self.items.iter().filter(|i| i.kind == kind).count() as u64
    }
}

/// Items per level: at least one each, the rest shared in proportion to 1, 2, 3... (deeper
/// levels hold more, as in dfilemaker), what rounding leaves going to the top levels.
fn level_counts(total: u64, depth: u64) -> Vec<u64> {
    let rest = total - depth;
    let weights = depth * (depth + 1) / 2;
    let mut counts: Vec<u64> = (0..depth)
        .map(|l| 1 + (rest as u128 * (l + 1) as u128 / weights as u128) as u64)
        .collect();
    let mut left = total - counts.iter().sum::<u64>();
    for c in counts.iter_mut() {
        if left == 0 {
            break;
        }
        *c += 1;
        left -= 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> Spec {
        Spec {
            seed,
            depth: 2..=4,
            nitems: 50..=80,
            size: 10..=300,
            ..Spec::default()
        }
    }

    #[test]
    fn level_counts_sum_and_grow() {
        for depth in 1..8 {
            for total in depth..200 {
                let c = level_counts(total, depth);
                assert_eq!(c.len() as u64, depth);
                assert_eq!(c.iter().sum::<u64>(), total);
                assert!(c.iter().all(|&n| n >= 1));
            }
        }
        assert_eq!(level_counts(3000, 5), vec![201, 401, 600, 799, 999]);
    }

    #[test]
    fn plans_respect_the_bounds_and_depend_only_on_the_seed() {
        for seed in 0..50 {
            let p = Plan::new(&spec(seed)).unwrap();
            assert!((2..=4).contains(&p.levels.len()), "seed {seed}");
            assert!((50..=80).contains(&p.items.len()));
            for (g, i) in p.items.iter().enumerate() {
                match i.kind {
                    Kind::File => assert!((10..=300).contains(&i.size)),
                    Kind::Link => assert!((i.target as usize) < p.items.len()),
                    Kind::Dir => assert_eq!(i.size, 0),
                }
                // A parent is a directory one level up.
                if i.parent != ROOT {
                    assert_eq!(p.items[i.parent as usize].kind, Kind::Dir);
                    assert!(i.parent < g as u32);
                }
            }
            // The deepest level is reached: its items' paths have `levels` components.
            let last = p.levels.last().unwrap().start;
            let depth = p.rel_path(last).split(|&b| b == b'/').count();
            assert_eq!(depth, p.levels.len());
            let again = Plan::new(&spec(seed)).unwrap();
            assert_eq!(p.items, again.items);
        }
        let a = Plan::new(&spec(1)).unwrap();
        let b = Plan::new(&spec(2)).unwrap();
        assert_ne!(a.items, b.items);
    }

    #[test]
    fn link_targets_are_relative_to_the_link() {
        let mut p = Plan {
            seed: 1,
            fill: Fill::False,
            items: vec![
                Item {
                    kind: Kind::Dir,
                    parent: ROOT,
                    size: 0,
                    target: ROOT,
                },
                Item {
                    kind: Kind::Link,
                    parent: ROOT,
                    size: 0,
                    target: 2,
                },
                Item {
                    kind: Kind::Dir,
                    parent: 0,
                    size: 0,
                    target: ROOT,
                },
                Item {
                    kind: Kind::Link,
                    parent: 2,
                    size: 0,
                    target: 1,
                },
                Item {
                    kind: Kind::Link,
                    parent: 2,
                    size: 0,
                    target: 2,
                },
            ],
            levels: vec![0..2, 2..3, 3..5],
        };
        assert_eq!(p.link_target(1), b"dir_00000000/dir_00000002");
        assert_eq!(p.link_target(3), b"../../link_00000001");
        assert_eq!(p.link_target(4), b"../dir_00000002");
        p.items[3].target = 4;
        assert_eq!(p.link_target(3), b"link_00000004");
        assert_eq!(p.rel_path(4), b"dir_00000000/dir_00000002/link_00000004");
    }

    #[test]
    fn fills_are_the_documented_bytes_at_any_offset() {
        let mut b = [0u8; 8];
        Fill::True.fill(1, 0, 5, &mut b);
        assert_eq!(b, [0xFF; 8]);
        Fill::Alternate.fill(1, 0, 5, &mut b);
        assert_eq!(b, [0xAA; 8]);
        Fill::False.fill(1, 0, 5, &mut b);
        assert_eq!(b, [0; 8]);
        let mut whole = [0u8; 100];
        Fill::Random.fill(7, 3, 0, &mut whole);
        let mut tail = [0u8; 37];
        Fill::Random.fill(7, 3, 63, &mut tail);
        assert_eq!(&whole[63..], &tail);
        let mut other = [0u8; 100];
        Fill::Random.fill(8, 3, 0, &mut other);
        assert_ne!(whole, other);
    }

    #[test]
    #[allow(clippy::reversed_empty_ranges)] // reversed on purpose
    fn bad_ranges_are_refused() {
        let bad = |s: Spec| Plan::new(&s).unwrap_err();
        bad(Spec {
            depth: 0..=2,
            ..Spec::default()
        });
        bad(Spec {
            depth: 3..=2,
            ..Spec::default()
        });
        bad(Spec {
            nitems: 1..=2,
            depth: 3..=3,
            ..Spec::default()
        });
        bad(Spec {
            size: 5..=4,
            ..Spec::default()
        });
        bad(Spec {
            file_percent: 80,
            link_percent: 30,
            ..Spec::default()
        });
        // Totals beyond the largest file offset (and beyond u64) are refused, not wrapped.
        let big = |size: RangeInclusive<u64>, n: u64| Spec {
            nitems: n..=n,
            depth: 1..=1,
            file_percent: 100,
            link_percent: 0,
            size,
            ..Spec::default()
        };
        let e = bad(big(8 << 60..=8 << 60, 4));
        assert!(e.contains("more than 9223372036854775807 bytes"), "{e}");
        bad(big(u64::MAX..=u64::MAX, 1));
        bad(big(1 << 62..=1 << 62, 2));
        let p = Plan::new(&big((1 << 62) - 1..=(1 << 62) - 1, 2)).unwrap();
        assert_eq!(p.total_bytes(), (1 << 63) - 2);
        // A depth range above the item count is cut to it.
        let p = Plan::new(&Spec {
            nitems: 3..=3,
            depth: 1..=9,
            ..Spec::default()
        })
        .unwrap();
        assert!(p.levels.len() <= 3);
    }
}
