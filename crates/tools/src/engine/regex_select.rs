//! drm's and dchmod's selection: `--match RE` keeps only matching entries, `--exclude RE` leaves
//! matching entries alone, `--name` applies both to the last path component instead of the
//! whole path. Regexes match bytes ([`flist::filter::byte_regex`]).
//!
//! `rm` matches the path relative to its root ([`RegexSelector::relative_to`]): under `/tmp`,
//! `--match tmp` must not select the whole tree because every absolute path holds `/tmp`.

use flist::filter::Test;
use flist::record::Entry;
use std::collections::HashSet;

/// The `--match` / `--exclude` pair of one command line.
#[derive(Clone, Debug, Default)]
pub struct RegexSelector {
    matching: Option<Test>,
    excluding: Option<Test>,
    /// With [`Self::relative_to`]: the roots whole-path regexes are matched relative to.
    tops: Option<HashSet<Vec<u8>>>,
    /// `--name`: the regexes apply to the basename.
    name: bool,
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
            tops: None,
            name,
        })
    }

    /// Match whole-path regexes against the path relative to the deepest of `tops` (absolute,
    /// normalised) that is the entry or holds it: `a/b` for `/root/a/b` under `/root`, `.` for
    /// a top itself. Entries under no top are matched by their whole path. No effect with
    /// `--name`.
    pub fn relative_to(mut self, tops: impl IntoIterator<Item = Vec<u8>>) -> RegexSelector {
        self.tops = Some(tops.into_iter().collect());
        self
    }

    /// The path the regexes see for `path`.
    fn matched_path<'a>(&self, path: &'a [u8]) -> &'a [u8] {
        let Some(tops) = self.tops.as_ref().filter(|_| !self.name) else {
            return path;
        };
        let mut top = path;
        loop {
            if tops.contains(top) {
                return match &path[top.len()..] {
                    b"" => b".",
                    rest => rest.strip_prefix(b"/").unwrap_or(rest),
                };
            }
            if top == b"/" || top.is_empty() {
                return path;
            }
            top = flist::path::parent(top);
        }
    }

    /// True when a regex is given.
    pub fn active(&self) -> bool {
        self.matching.is_some() || self.excluding.is_some()
    }

    /// True when `e` matches `--match` (if given) and not `--exclude` (if given).
    pub fn selects(&self, e: Entry<'_>) -> bool {
        if !self.active() {
            return true;
        }
        let e = Entry {
            path: self.matched_path(e.path),
            ..e
        };
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

    #[test]
    fn relative_paths_are_matched_below_their_top() {
        let e = |p: &'static [u8]| Entry {
            path: p,
            kind: FileType::File,
            meta: None,
        };
        let tops = [b"/tmp/run".to_vec(), b"/tmp/run/in".to_vec(), b"/".to_vec()];
        let tmp = RegexSelector::new(Some("tmp"), None, false)
            .unwrap()
            .relative_to(tops.clone());
        assert!(!tmp.selects(e(b"/tmp/run/a/b")));
        assert!(tmp.selects(e(b"/tmp/run/a/x.tmp")));
        assert!(!tmp.selects(e(b"/tmp/run")));
        let anchored = RegexSelector::new(Some("^a/"), Some(r"^\.$"), false)
            .unwrap()
            .relative_to(tops.clone());
        assert!(anchored.selects(e(b"/tmp/run/a/b")));
        assert!(anchored.selects(e(b"/tmp/run/in/a/b")), "the deepest top");
        assert!(!anchored.selects(e(b"/tmp/run/b/a/c")));
        let root = RegexSelector::new(Some(r"^\.$"), None, false)
            .unwrap()
            .relative_to(tops.clone());
        assert!(root.selects(e(b"/tmp/run")), "a top is matched as .");
        // Under no top: the whole path; --name: the basename, as before.
        let none = RegexSelector::new(Some("^/x/"), None, false)
            .unwrap()
            .relative_to([b"/tmp".to_vec()]);
        assert!(none.selects(e(b"/x/y")));
        let name = RegexSelector::new(Some("^run$"), None, true)
            .unwrap()
            .relative_to(tops);
        assert!(name.selects(e(b"/tmp/run")));
    }
}
