//! The striping policy: which layout a new destination file gets. A pure function of the file
//! size, the OST count, the directory's default layout, user overrides and the copy chunk size.
//!
//! Better than the C tools, which either leave everything to the directory default or copy
//! `lustre.lov` verbatim and pin every file to the source's OSTs:
//! - a composite (PFL) directory default is the site's choice: leave it alone;
//! - otherwise 1 stripe below 1 GiB and `floor(sqrt(size in GiB)) + 1` stripes from 1 GiB up
//!   (Lustre's own `lfs migrate --auto-stripe` rule), clamped to the OST count;
//! - stripe size = the copy chunk size (1–4 MiB, a multiple of 64 KiB), so one chunk is one
//!   stripe and ranks writing different chunks never contend for one stripe's lock;
//! - the server picks the first OST; OST indices are never copied.

use crate::consts::{MAX_STRIPE_COUNT, STRIPE_COUNT_ALL, STRIPE_COUNT_DEFAULT, STRIPE_SIZE_UNIT};
use crate::layout::Layout;

/// One gibibyte (bytes).
pub const GIB: u64 = 1 << 30;
/// One mebibyte (bytes).
pub const MIB: u64 = 1 << 20;
/// Smallest stripe size the policy picks (bytes, 1 MiB).
pub const MIN_POLICY_STRIPE_SIZE: u32 = 1 << 20;
/// Largest stripe size the policy picks (bytes, 4 MiB).
pub const MAX_POLICY_STRIPE_SIZE: u32 = 4 << 20;

/// A user's stripe-count override, as `lfs setstripe -c` takes it: -1, 0 or N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StripeCount {
    /// Stripe over all OSTs (-1; sent as 0xFFFF).
    All,
    /// The file-system default (0).
    Default,
    /// This many OSTs (clamped to [`MAX_STRIPE_COUNT`]; 0 means default, 0xFFFF all).
    Count(u16),
}

impl StripeCount {
    /// Parses the `lfs setstripe -c` convention: -1 = all, 0 = default, N > 0 = N.
    /// `None` below -1 or above 0xFFFF.
    pub fn from_lfs(count: i64) -> Option<StripeCount> {
        match count {
            -1 => Some(StripeCount::All),
            0 => Some(StripeCount::Default),
            n => u16::try_from(n).ok().map(StripeCount::Count),
        }
    }

    /// The value `lov_user_md.lmm_stripe_count` carries: 0xFFFF = all, 0 = default, else the
    /// count clamped to [`MAX_STRIPE_COUNT`] (Lustre rejects larger counts).
    pub fn raw(self) -> u16 {
        match self {
            StripeCount::All => STRIPE_COUNT_ALL,
            StripeCount::Default => STRIPE_COUNT_DEFAULT,
            StripeCount::Count(STRIPE_COUNT_ALL) => STRIPE_COUNT_ALL,
            StripeCount::Count(n) => n.min(MAX_STRIPE_COUNT),
        }
    }
}

/// User overrides of the policy; `Overrides::default()` overrides nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Stripe count to use instead of the policy's.
    pub count: Option<StripeCount>,
    /// Stripe size to use instead of the policy's (bytes; rounded up to a multiple of 64 KiB;
    /// 0 = file-system default).
    pub size: Option<u32>,
}

/// What to do with a new destination file's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Leave the directory default alone: create the file normally, do not call setstripe.
    Inherit,
    /// Create the file with this layout.
    Set {
        /// Stripe count: 0xFFFF = all OSTs, 0 = default.
        count: u16,
        /// Stripe size (bytes).
        size: u32,
    },
}

/// Stripe count for a file of `file_size` bytes, before clamping to the OST count: 1 below
/// 1 GiB, `floor(sqrt(size in GiB)) + 1` from 1 GiB up (1 GiB -> 2, 4 GiB -> 3, 100 GiB -> 11).
pub fn auto_stripe_count(file_size: u64) -> u32 {
    if file_size < GIB {
        return 1;
    }
    // floor(sqrt(x)) == isqrt(floor(x)) for x >= 0, so whole GiB suffice; integer sqrt avoids
    // float rounding at perfect squares. The result is at most 2^17, so it fits a u32.
    (file_size / GIB).isqrt() as u32 + 1
}

/// Stripe size for a copy chunk of `chunk_size` bytes: clamped to 1..=4 MiB and rounded down to
/// a multiple of 64 KiB, so chunks and stripes line up (bytes).
pub fn stripe_size_for(chunk_size: u64) -> u32 {
    let clamped = chunk_size.clamp(
        u64::from(MIN_POLICY_STRIPE_SIZE),
        u64::from(MAX_POLICY_STRIPE_SIZE),
    ) as u32;
    clamped - clamped % STRIPE_SIZE_UNIT
}

/// A user's stripe size rounded up to a multiple of 64 KiB, capped at the largest multiple
/// below 2^32 (bytes; 0 stays 0 = default).
fn round_up_stripe_size(size: u32) -> u32 {
    let unit = u64::from(STRIPE_SIZE_UNIT);
    let up = u64::from(size).div_ceil(unit) * unit;
    up.min(u64::from(u32::MAX) / unit * unit) as u32
}

/// The policy's stripe count for `file_size` bytes on `ost_count` OSTs (0 = unknown: no clamp).
fn policy_count(file_size: u64, ost_count: u32) -> u16 {
    let mut count = auto_stripe_count(file_size);
    if ost_count > 0 {
        count = count.min(ost_count);
    }
    count.min(u32::from(MAX_STRIPE_COUNT)) as u16
}

/// Applies `overrides` on top of a default count and size; `None` when nothing is overridden.
fn overridden(overrides: &Overrides, count: u16, size: u32) -> Option<Decision> {
    if overrides.count.is_none() && overrides.size.is_none() {
        return None;
    }
    Some(Decision::Set {
        count: overrides.count.map_or(count, StripeCount::raw),
        size: overrides.size.map_or(size, round_up_stripe_size),
    })
}

/// The layout decision for a new file of `file_size` bytes in a directory whose default layout
/// is `dir_default`, on a file system with `ost_count` OSTs (0 = unknown), copied in chunks of
/// `chunk_size` bytes.
///
/// Overrides win over everything (the half not overridden comes from the policy); else a
/// composite directory default means [`Decision::Inherit`]; else the policy's count and size.
pub fn choose(
    file_size: u64,
    ost_count: u32,
    dir_default: Option<&Layout>,
    overrides: &Overrides,
    chunk_size: u64,
) -> Decision {
    let count = policy_count(file_size, ost_count);
    let size = stripe_size_for(chunk_size);
    if let Some(decision) = overridden(overrides, count, size) {
        return decision;
    }
    if dir_default.is_some_and(Layout::is_composite) {
        return Decision::Inherit;
    }
    Decision::Set { count, size }
}

/// The layout of a shared archive file (written by many ranks): all OSTs, stripe size =
/// `stripe_size_for(chunk_size)`; overrides win.
pub fn archive_layout(overrides: &Overrides, chunk_size: u64) -> Decision {
    let count = STRIPE_COUNT_ALL;
    let size = stripe_size_for(chunk_size);
    overridden(overrides, count, size).unwrap_or(Decision::Set { count, size })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Component, Composite};

    const KIB: u64 = 1 << 10;
    const CHUNK: u64 = 4 * MIB;

    fn none() -> Overrides {
        Overrides::default()
    }

    fn set(count: u16, size: u32) -> Decision {
        Decision::Set { count, size }
    }

    fn pfl_default() -> Layout {
        let Layout::Plain(first) = Layout::request(1, 1 << 20) else {
            unreachable!()
        };
        Layout::Composite(Composite {
            layout_gen: 0,
            flags: 0,
            mirror_count: 0,
            components: vec![Component {
                id: 1,
                flags: 0,
                extent_start: 0,
                extent_end: u64::MAX,
                layout_gen: 0,
                layout: first,
            }],
        })
    }

    #[test]
    fn auto_stripe_count_follows_the_sqrt_rule() {
        assert_eq!(auto_stripe_count(0), 1);
        assert_eq!(auto_stripe_count(10 * MIB), 1);
        assert_eq!(auto_stripe_count(GIB - 1), 1);
        assert_eq!(auto_stripe_count(GIB), 2);
        assert_eq!(auto_stripe_count(4 * GIB - 1), 2);
        assert_eq!(auto_stripe_count(4 * GIB), 3);
        assert_eq!(auto_stripe_count(100 * GIB), 11);
        assert_eq!(auto_stripe_count(u64::MAX), 1 << 17); // isqrt(2^34 - 1) + 1
    }

    #[test]
    fn policy_examples() {
        let d = choose(10 * MIB, 16, None, &none(), CHUNK);
        assert_eq!(d, set(1, 4 << 20));
        assert_eq!(choose(4 * GIB, 16, None, &none(), CHUNK), set(3, 4 << 20));
        assert_eq!(
            choose(100 * GIB, 16, None, &none(), CHUNK),
            set(11, 4 << 20)
        );
        assert_eq!(choose(100 * GIB, 8, None, &none(), CHUNK), set(8, 4 << 20));
        assert_eq!(choose(100 * GIB, 0, None, &none(), CHUNK), set(11, 4 << 20));
        assert_eq!(
            choose(u64::MAX, 0, None, &none(), CHUNK),
            set(2000, 4 << 20)
        );
        assert_eq!(choose(GIB - 1, 16, None, &none(), CHUNK), set(1, 4 << 20));
        assert_eq!(choose(GIB, 16, None, &none(), CHUNK), set(2, 4 << 20));
    }

    #[test]
    fn stripe_size_comes_from_the_chunk_size() {
        assert_eq!(choose(GIB, 16, None, &none(), 2 * MIB), set(2, 2 << 20));
    }

    #[test]
    fn composite_directory_default_is_inherited() {
        let pfl = pfl_default();
        assert_eq!(
            choose(100 * GIB, 16, Some(&pfl), &none(), CHUNK),
            Decision::Inherit
        );
    }

    #[test]
    fn plain_directory_default_gets_the_policy_not_the_default() {
        let plain = Layout::request(8, 1 << 16);
        assert_eq!(
            choose(10 * MIB, 16, Some(&plain), &none(), CHUNK),
            set(1, 4 << 20)
        );
    }

    #[test]
    fn overrides() {
        let count_only = Overrides {
            count: Some(StripeCount::Count(5)),
            size: None,
        };
        assert_eq!(
            choose(10 * MIB, 16, None, &count_only, CHUNK),
            set(5, 4 << 20)
        );
        let size_only = Overrides {
            count: None,
            size: Some(100 * 1024),
        };
        assert_eq!(
            choose(4 * GIB, 16, None, &size_only, CHUNK),
            set(3, 128 * 1024),
            "size rounded up to 64 KiB"
        );
        let all = Overrides {
            count: Some(StripeCount::All),
            size: None,
        };
        assert_eq!(choose(1, 16, None, &all, CHUNK), set(0xFFFF, 4 << 20));
        let default = Overrides {
            count: Some(StripeCount::Default),
            size: Some(0),
        };
        assert_eq!(choose(100 * GIB, 16, None, &default, CHUNK), set(0, 0));
        let huge = Overrides {
            count: Some(StripeCount::Count(5000)),
            size: Some(u32::MAX),
        };
        assert_eq!(choose(1, 16, None, &huge, CHUNK), set(2000, 0xFFFF_0000));
    }

    #[test]
    fn overrides_win_over_a_composite_default() {
        let pfl = pfl_default();
        let count = Overrides {
            count: Some(StripeCount::Count(2)),
            size: None,
        };
        assert_eq!(choose(1, 16, Some(&pfl), &count, CHUNK), set(2, 4 << 20));
        let size = Overrides {
            count: None,
            size: Some(1 << 20),
        };
        assert_eq!(
            choose(4 * GIB, 16, Some(&pfl), &size, CHUNK),
            set(3, 1 << 20)
        );
    }

    #[test]
    fn stripe_size_for_clamps_and_rounds_down() {
        assert_eq!(stripe_size_for(0), 1 << 20);
        assert_eq!(stripe_size_for(100 * KIB), 1 << 20);
        assert_eq!(stripe_size_for(3 * MIB + 1), 3 << 20);
        assert_eq!(stripe_size_for(64 * MIB), 4 << 20);
        assert_eq!(stripe_size_for(u64::MAX), 4 << 20);
        // 2.5 MiB is 40 units of 64 KiB exactly; 2.5 MiB + 1 KiB rounds down to it.
        assert_eq!(stripe_size_for(5 * MIB / 2), 5 << 19);
        assert_eq!(stripe_size_for(5 * MIB / 2 + KIB), 5 << 19);
        assert_eq!(stripe_size_for(5 * MIB / 2 - KIB), (5 << 19) - (64 << 10));
        for chunk in [MIB, 3 * MIB / 2 + 7, 4 * MIB - 1] {
            assert_eq!(stripe_size_for(chunk) % STRIPE_SIZE_UNIT, 0);
        }
    }

    #[test]
    fn archive_layout_is_all_osts_unless_overridden() {
        assert_eq!(archive_layout(&none(), CHUNK), set(0xFFFF, 4 << 20));
        assert_eq!(archive_layout(&none(), 100 * KIB), set(0xFFFF, 1 << 20));
        let count = Overrides {
            count: Some(StripeCount::Count(4)),
            size: None,
        };
        assert_eq!(archive_layout(&count, CHUNK), set(4, 4 << 20));
        let size = Overrides {
            count: None,
            size: Some((1 << 20) + 1),
        };
        assert_eq!(
            archive_layout(&size, CHUNK),
            set(0xFFFF, (1 << 20) + (64 << 10))
        );
    }

    #[test]
    fn stripe_count_from_lfs_and_raw() {
        assert_eq!(StripeCount::from_lfs(-1), Some(StripeCount::All));
        assert_eq!(StripeCount::from_lfs(0), Some(StripeCount::Default));
        assert_eq!(StripeCount::from_lfs(8), Some(StripeCount::Count(8)));
        assert_eq!(StripeCount::from_lfs(-2), None);
        assert_eq!(StripeCount::from_lfs(65536), None);
        assert_eq!(StripeCount::All.raw(), 0xFFFF);
        assert_eq!(StripeCount::Default.raw(), 0);
        assert_eq!(StripeCount::Count(8).raw(), 8);
        assert_eq!(StripeCount::Count(2001).raw(), 2000);
        assert_eq!(StripeCount::Count(0xFFFF).raw(), 0xFFFF);
    }
}
