//! drm's and dchmod's selection: `--match RE` keeps only matching entries, `--exclude RE` leaves
//! matching entries alone, `--name` applies both to the last path component instead of the
//! whole path. Regexes match bytes ([`flist::filter::byte_regex`]).

use flist::filter::Test;
use flist::record::Entry;

/// The `--match` / `--exclude` pair of one command line.
#[derive(Clone, Debug, Default)]
pub struct RegexSelector {
    matching: Option<Test>,
    excluding: Option<Test>,
}

impl RegexSelector {
    /// From the option values; `name` makes both apply to the basename. An invalid regex is
    /// an [`flist::Error::Invalid`] naming it.
    pub fn new(
        matching: Option<&str>,
        excluding: Option<&str>,
        name: bool,
    ) -> Result<RegexSelector, flist::Error> {
        let test = |re: Option<&str>| {
            re.map(|re| {
                if name {
                    Test::name_regex(re)
                } else {
                    Test::regex(re)
                }
            })
            .transpose()
        };
        Ok(RegexSelector {
            matching: test(matching)?,
            excluding: test(excluding)?,
        })
    }

    /// True when a regex is given.
    pub fn active(&self) -> bool {
        self.matching.is_some() || self.excluding.is_some()
    }

    /// True when `e` matches `--match` (if given) and not `--exclude` (if given).
    pub fn selects(&self, e: Entry<'_>) -> bool {
        self.matching.as_ref().is_none_or(|t| t.matches(e))
            && !self.excluding.as_ref().is_some_and(|t| t.matches(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::FileType;

    #[test]
    fn match_keeps_exclude_drops_name_uses_the_basename() {
        let e = |p: &'static [u8]| Entry {
            path: p,
            kind: FileType::File,
            meta: None,
        };
        let all = RegexSelector::default();
        assert!(!all.active() && all.selects(e(b"/a/x")));
        let s = RegexSelector::new(Some(r"\.tmp$"), Some("keep"), false).unwrap();
        assert!(s.selects(e(b"/a/x.tmp")));
        assert!(!s.selects(e(b"/a/x.c")));
        assert!(!s.selects(e(b"/keep/x.tmp")));
        let base = RegexSelector::new(Some("^a"), None, true).unwrap();
        assert!(base.selects(e(b"/b/a1")) && !base.selects(e(b"/a/b1")));
        assert!(RegexSelector::new(Some("("), None, false).is_err());
    }
}
