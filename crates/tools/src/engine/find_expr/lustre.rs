//! find's Lustre tests (`--ost`, `--mdt`, `--pool`, `--stripe-count`, `--stripe-size`,
//! `--layout`), with the semantics of `lfs find` (its man page, `lfs-find.1`):
//!
//! - `--ost N[,N...]`: the file has an object on one of the OSTs (any component of a
//!   composite layout). An OST is its index, or a target name ending in `OSTxxxx` (hex).
//! - `--mdt N[,N...]`: the inode is on one of the MDTs (`LL_IOC_GET_MDTIDX`).
//! - `--pool NAME`: the layout, or any component of a composite one, names the pool.
//! - `--stripe-count [+-]N`: the stripe count of a plain layout; of a composite layout, that
//!   of its last instantiated component (the first component when none is: a directory's
//!   default, a file never written).
//! - `--stripe-size [+-]N[KMGT]`: as the count, skipping extension components; binary units,
//!   bytes without one.
//! - `--layout raid0|mdt|released[,...]`: a RAID0 component, data on the MDT (the first
//!   component), an HSM-released file.
//!
//! `+N` is more than N, `-N` less than N, `N` equal within the unit given: `--stripe-size 4M`
//! is more than 3 MiB and at most 4 MiB, as `lfs find` and GNU find round sizes. A directory is
//! tested on its default layout. What has no layout (a symlink, a device, a file on a file
//! system that is not Lustre, a Lustre file or directory without one) fails every Lustre
//! test, so `--not --ost 3` is true for it.

use lustre_sys::{
    Component, Layout, Plain, LCME_FL_EXTENSION, LCME_FL_INIT, LOV_PATTERN_F_RELEASED,
    LOV_PATTERN_MDT, LOV_PATTERN_RAID0,
};

/// A comparison `[+-]N` scaled by a unit: `+` more than `value * unit`, `-` less, none: in
/// `((value - 1) * unit, value * unit]` (exactly `value` when `unit` is 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compare {
    /// -1 for `-N`, 0 for `N`, 1 for `+N`.
    pub sign: i8,
    /// N.
    pub value: u64,
    /// Bytes (or 1 for counts) that one N stands for.
    pub unit: u64,
}

impl Compare {
    /// Whether `x` satisfies the comparison.
    pub fn holds(&self, x: u64) -> bool {
        let limit = self.value.saturating_mul(self.unit);
        match self.sign {
            1 => x > limit,
            -1 => x < limit,
            _ => x <= limit && x > limit.saturating_sub(self.unit),
        }
    }

    /// Parses `[+-]N` followed by one of `units` (letter, factor; either case), or by nothing
    /// (a factor of 1).
    fn parse(spec: &str, units: &[(char, u64)]) -> Result<Compare, String> {
        let (sign, rest) = match spec.as_bytes().first() {
            Some(b'+') => (1, &spec[1..]),
            Some(b'-') => (-1, &spec[1..]),
            _ => (0, spec),
        };
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(digits);
        let value: u64 = number
            .parse()
            .map_err(|_| format!("'{spec}' is not [+-]N{}", unit_hint(units)))?;
        let unit = match suffix {
            "" => 1,
            s => {
                let mut chars = s.chars();
                let letter = chars.next().map(|c| c.to_ascii_uppercase());
                units
                    .iter()
                    .find(|(u, _)| Some(*u) == letter && chars.as_str().is_empty())
                    .map(|(_, f)| *f)
                    .ok_or_else(|| format!("'{spec}': unknown unit '{s}'{}", unit_hint(units)))?
            }
        };
        Ok(Compare { sign, value, unit })
    }
}

fn unit_hint(units: &[(char, u64)]) -> String {
    if units.is_empty() {
        String::new()
    } else {
        let letters: String = units.iter().map(|(u, _)| *u).collect();
        format!(" (units {letters}: binary)")
    }
}

/// A kind of layout `--layout` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutKind {
    /// RAID0 striping over OSTs.
    Raid0,
    /// Data on the MDT (the first component's pattern).
    Mdt,
    /// HSM-released: the data is only in the archive.
    Released,
}

/// One Lustre test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutTest {
    /// `--ost`: an object on one of these OST indices.
    Ost(Vec<u32>),
    /// `--mdt`: the inode is on one of these MDT indices.
    Mdt(Vec<u32>),
    /// `--pool`: the pool name (without its NUL padding).
    Pool(Vec<u8>),
    /// `--stripe-count`.
    StripeCount(Compare),
    /// `--stripe-size` (bytes).
    StripeSize(Compare),
    /// `--layout`: one of these kinds.
    Layout(Vec<LayoutKind>),
}

/// Parses an OST (`index`, `OSTxxxx`, `fsname-OSTxxxx_UUID`) or MDT list.
fn targets(spec: &str, kind: &str) -> Result<Vec<u32>, String> {
    spec.split(',')
        .map(|t| {
            let t = t.trim();
            if let Ok(n) = t.parse() {
                return Ok(n);
            }
            let name = t.strip_suffix("_UUID").unwrap_or(t);
            name.rfind(kind)
                .map(|at| &name[at + kind.len()..])
                .filter(|hex| !hex.is_empty())
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .ok_or_else(|| format!("'{t}' is not an {kind} index or name ({kind}xxxx)"))
        })
        .collect()
}

impl LayoutTest {
    /// `--ost SPEC`.
    pub fn ost(spec: &str) -> Result<LayoutTest, String> {
        targets(spec, "OST").map(LayoutTest::Ost)
    }

    /// `--mdt SPEC`.
    pub fn mdt(spec: &str) -> Result<LayoutTest, String> {
        targets(spec, "MDT").map(LayoutTest::Mdt)
    }

    /// `--pool NAME` (at most 15 bytes, Lustre's limit).
    pub fn pool(name: &[u8]) -> Result<LayoutTest, String> {
        if name.is_empty() || name.len() > 15 {
            return Err("a pool name has 1 to 15 bytes".to_string());
        }
        Ok(LayoutTest::Pool(name.to_vec()))
    }

    /// `--stripe-count [+-]N`.
    pub fn stripe_count(spec: &str) -> Result<LayoutTest, String> {
        Compare::parse(spec, &[]).map(LayoutTest::StripeCount)
    }

    /// `--stripe-size [+-]N[KMGT]`.
    pub fn stripe_size(spec: &str) -> Result<LayoutTest, String> {
        let units = [
            ('K', 1 << 10),
            ('M', 1 << 20),
            ('G', 1 << 30),
            ('T', 1 << 40),
        ];
        Compare::parse(spec, &units).map(LayoutTest::StripeSize)
    }

    /// `--layout KIND[,KIND...]`.
    pub fn layout(spec: &str) -> Result<LayoutTest, String> {
        spec.split(',')
            .map(|k| match k.trim() {
                "raid0" => Ok(LayoutKind::Raid0),
                "mdt" | "dom" => Ok(LayoutKind::Mdt),
                "released" => Ok(LayoutKind::Released),
                other => Err(format!("unknown layout '{other}' (raid0, mdt or released)")),
            })
            .collect::<Result<_, _>>()
            .map(LayoutTest::Layout)
    }

    /// Whether the test needs the MDT index rather than the layout.
    pub fn needs_mdt(&self) -> bool {
        matches!(self, LayoutTest::Mdt(_))
    }

    /// Whether an entry with `layout` (`None`: it has none) and MDT index `mdt` (`None`: not
    /// known) passes.
    pub fn matches(&self, layout: Option<&Layout>, mdt: Option<u32>) -> bool {
        if let LayoutTest::Mdt(mdts) = self {
            return mdt.is_some_and(|m| mdts.contains(&m));
        }
        let Some(layout) = layout else { return false };
        let plains: Vec<&Plain> = match layout {
            Layout::Plain(p) => vec![p],
            Layout::Composite(c) => c.components.iter().map(|c| &c.layout).collect(),
        };
        match self {
            LayoutTest::Mdt(_) => unreachable!("answered above"),
            LayoutTest::Ost(osts) => plains
                .iter()
                .any(|p| p.slots.iter().any(|s| osts.contains(&s.ost_index))),
            LayoutTest::Pool(name) => plains.iter().any(|p| p.pool_name() == Some(&name[..])),
            LayoutTest::StripeCount(cmp) => {
                current(layout, false).is_some_and(|p| cmp.holds(u64::from(p.stripe_count)))
            }
            LayoutTest::StripeSize(cmp) => {
                current(layout, true).is_some_and(|p| cmp.holds(u64::from(p.stripe_size)))
            }
            LayoutTest::Layout(kinds) => kinds.iter().any(|k| match k {
                LayoutKind::Raid0 => plains
                    .iter()
                    .any(|p| p.pattern & !LOV_PATTERN_F_RELEASED == LOV_PATTERN_RAID0),
                LayoutKind::Mdt => plains
                    .first()
                    .is_some_and(|p| p.pattern & !LOV_PATTERN_F_RELEASED == LOV_PATTERN_MDT),
                LayoutKind::Released => plains
                    .iter()
                    .any(|p| p.pattern & LOV_PATTERN_F_RELEASED != 0),
            }),
        }
    }
}

/// The plain layout `--stripe-count` (and, skipping extension components, `--stripe-size`)
/// looks at: the layout itself, or a composite's last instantiated component, else its first.
fn current(layout: &Layout, skip_extension: bool) -> Option<&Plain> {
    match layout {
        Layout::Plain(p) => Some(p),
        Layout::Composite(c) => {
            let eligible = |e: &&Component| !skip_extension || e.flags & LCME_FL_EXTENSION == 0;
            c.components
                .iter()
                .filter(eligible)
                .rfind(|e| e.flags & LCME_FL_INIT != 0)
                .or_else(|| c.components.iter().find(eligible))
                .map(|e| &e.layout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lustre_sys::{Composite, OstSlot};

    fn plain(count: u16, size: u32, osts: &[u32], pool: Option<&str>) -> Plain {
        let Layout::Plain(mut p) = Layout::request(count, size) else {
            unreachable!()
        };
        p.slots = osts
            .iter()
            .map(|&ost_index| OstSlot {
                ost_index,
                ..OstSlot::default()
            })
            .collect();
        p.pool = pool.map(|name| {
            let mut b = [0u8; 16];
            b[..name.len()].copy_from_slice(name.as_bytes());
            b
        });
        p
    }

    fn component(flags: u32, layout: Plain) -> Component {
        Component {
            id: 1,
            flags,
            extent_start: 0,
            extent_end: u64::MAX,
            layout_gen: 0,
            layout,
        }
    }

    /// A PFL file: 1 stripe of 1 MiB on OST 0 (instantiated, pool "flash"), 4 stripes of
    /// 4 MiB on OSTs 3-6 (instantiated), 8 stripes of 16 MiB (not yet).
    fn pfl() -> Layout {
        Layout::Composite(Composite {
            layout_gen: 1,
            flags: 0,
            mirror_count: 0,
            components: vec![
                component(LCME_FL_INIT, plain(1, 1 << 20, &[0], Some("flash"))),
                component(LCME_FL_INIT, plain(4, 4 << 20, &[3, 4, 5, 6], None)),
                component(0, plain(8, 16 << 20, &[], None)),
            ],
        })
    }

    #[test]
    fn comparisons_round_to_the_unit_given() {
        let size = |s| match LayoutTest::stripe_size(s).unwrap() {
            LayoutTest::StripeSize(c) => c,
            _ => unreachable!(),
        };
        let mib = 1u64 << 20;
        assert!(size("4M").holds(4 * mib));
        assert!(size("4M").holds(3 * mib + 1));
        assert!(!size("4M").holds(3 * mib));
        assert!(!size("4M").holds(4 * mib + 1));
        assert!(size("4194304").holds(4 * mib));
        assert!(!size("4194304").holds(4 * mib - 1));
        assert!(size("+1m").holds(mib + 1) && !size("+1m").holds(mib));
        assert!(size("-2M").holds(2 * mib - 1) && !size("-2M").holds(2 * mib));
        assert!(size("1k").holds(1024) && size("1G").holds(1 << 30));
        for bad in ["", "+", "4X", "4MM", "M", "-x", "4 M"] {
            assert!(LayoutTest::stripe_size(bad).is_err(), "{bad}");
        }
        let count = |s| LayoutTest::stripe_count(s).unwrap();
        assert_eq!(
            count("+3"),
            LayoutTest::StripeCount(Compare {
                sign: 1,
                value: 3,
                unit: 1
            })
        );
        assert!(LayoutTest::stripe_count("4M").is_err());
    }

    #[test]
    fn plain_layouts() {
        let l = Layout::Plain(plain(4, 2 << 20, &[7, 1, 2, 3], Some("ssd")));
        let yes = |t: LayoutTest| t.matches(Some(&l), None);
        assert!(yes(LayoutTest::ost("1").unwrap()));
        assert!(yes(LayoutTest::ost("9,7").unwrap()));
        assert!(!yes(LayoutTest::ost("4,5").unwrap()));
        assert!(yes(LayoutTest::ost("lustre-OST0007_UUID").unwrap()));
        assert!(yes(LayoutTest::ost("OST000a,OST0003").unwrap()));
        assert!(yes(LayoutTest::pool(b"ssd").unwrap()));
        assert!(!yes(LayoutTest::pool(b"ss").unwrap()));
        assert!(yes(LayoutTest::stripe_count("4").unwrap()));
        assert!(yes(LayoutTest::stripe_count("+3").unwrap()));
        assert!(!yes(LayoutTest::stripe_count("-4").unwrap()));
        assert!(yes(LayoutTest::stripe_size("2M").unwrap()));
        assert!(yes(LayoutTest::layout("raid0").unwrap()));
        assert!(!yes(LayoutTest::layout("mdt,released").unwrap()));
        // Nothing matches what has no layout; the MDT test needs the index only.
        for t in [
            LayoutTest::ost("1").unwrap(),
            LayoutTest::stripe_count("-100").unwrap(),
            LayoutTest::layout("raid0").unwrap(),
        ] {
            assert!(!t.matches(None, Some(0)), "{t:?}");
        }
        assert!(LayoutTest::mdt("1,2").unwrap().matches(None, Some(2)));
        assert!(!LayoutTest::mdt("1").unwrap().matches(Some(&l), Some(0)));
        assert!(!LayoutTest::mdt("0").unwrap().matches(Some(&l), None));
        assert!(LayoutTest::mdt("lustre-MDT0001_UUID")
            .unwrap()
            .matches(None, Some(1)));
        assert!(LayoutTest::ost("x").is_err() && LayoutTest::ost("OST").is_err());
        assert!(LayoutTest::layout("raid1").is_err());
        assert!(LayoutTest::pool(b"").is_err() && LayoutTest::pool(&[b'p'; 16]).is_err());
    }

    #[test]
    fn composite_layouts_match_any_component_or_the_last_instantiated_one() {
        let l = pfl();
        let yes = |t: LayoutTest| t.matches(Some(&l), None);
        // Any component: OSTs and pools.
        assert!(yes(LayoutTest::ost("0").unwrap()));
        assert!(yes(LayoutTest::ost("5").unwrap()));
        assert!(!yes(LayoutTest::ost("8").unwrap()));
        assert!(yes(LayoutTest::pool(b"flash").unwrap()));
        // Count and size: the last instantiated component (4 x 4 MiB), not the 8 x 16 MiB one.
        assert!(yes(LayoutTest::stripe_count("4").unwrap()));
        assert!(!yes(LayoutTest::stripe_count("8").unwrap()));
        assert!(!yes(LayoutTest::stripe_count("1").unwrap()));
        assert!(yes(LayoutTest::stripe_size("4M").unwrap()));
        assert!(yes(LayoutTest::stripe_size("-16M").unwrap()));
        assert!(yes(LayoutTest::layout("raid0").unwrap()));
        // None instantiated (a directory's default): the first component.
        let Layout::Composite(mut c) = pfl() else {
            unreachable!()
        };
        for e in &mut c.components {
            e.flags = 0;
        }
        let default = Layout::Composite(c);
        assert!(LayoutTest::stripe_count("1")
            .unwrap()
            .matches(Some(&default), None));
        // Data on MDT, an extension component skipped by the size, a released file.
        let mut dom = plain(0, 1 << 20, &[], None);
        dom.pattern = LOV_PATTERN_MDT;
        let Layout::Composite(mut c) = pfl() else {
            unreachable!()
        };
        c.components[0].layout = dom;
        c.components[2].flags = LCME_FL_INIT | LCME_FL_EXTENSION;
        let dom = Layout::Composite(c);
        assert!(LayoutTest::layout("mdt").unwrap().matches(Some(&dom), None));
        assert!(LayoutTest::stripe_size("4M")
            .unwrap()
            .matches(Some(&dom), None));
        assert!(LayoutTest::stripe_count("8")
            .unwrap()
            .matches(Some(&dom), None));
        assert!(!LayoutTest::layout("mdt").unwrap().matches(Some(&l), None));
        let mut released = plain(1, 1 << 20, &[], None);
        released.pattern |= LOV_PATTERN_F_RELEASED;
        let released = Layout::Plain(released);
        assert!(LayoutTest::layout("released")
            .unwrap()
            .matches(Some(&released), None));
        assert!(LayoutTest::layout("raid0")
            .unwrap()
            .matches(Some(&released), None));
        assert!(!LayoutTest::layout("released")
            .unwrap()
            .matches(Some(&l), None));
    }
}
