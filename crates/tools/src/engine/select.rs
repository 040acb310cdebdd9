//! Include/exclude rules of cp, sync and tar -c, evaluated as rsync evaluates them.
//!
//! Rules are kept in command-line order across `--include`, `--exclude`, `--include-regex` and
//! `--exclude-regex`; for a path the first rule that matches decides, and a path no rule
//! matches is included. An excluded directory excludes everything below it, whatever later
//! rules say about its contents: like rsync, the walks do not descend into it
//! ([`Rules::pruner`]), so an excluded tree is never read.
//!
//! Paths are matched relative to the source root (the root itself is `""` and is never
//! excluded). A glob without `/` matches a name at any depth; a glob with `/` matches the
//! relative path, anywhere below the root unless it starts with `/` (anchored at the root); a
//! trailing `/` makes a glob match directories only. `*` and `?` never match `/`, `**` does.
//! Regexes search the relative path (anchor them with `^`/`$` as needed). Names are bytes: both
//! kinds match names that are not UTF-8.
//!
//! ```
//! use mfu::types::{Action, Rules};
//! let mut rules = Rules::default();
//! rules.push_glob(Action::Include, "keep.tmp").unwrap();
//! rules.push_glob(Action::Exclude, "*.tmp").unwrap();
//! rules.push_glob(Action::Exclude, "/build/").unwrap();
//! assert!(rules.excludes(b"a/b.tmp", false));
//! assert!(!rules.excludes(b"a/keep.tmp", false));
//! assert!(rules.excludes(b"build/x/y.c", false)); // below an excluded directory
//! assert!(!rules.excludes(b"src/build/y.c", false)); // `/build/` is anchored
//! ```

use crate::engine::copy::Mapping;
use clap::ArgMatches;
use flist::walk::Visit;
use flist::FileType;
use globset::{GlobBuilder, GlobMatcher};
use rustix::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;

/// What a matching rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Keep the path (and stop looking at later rules).
    Include,
    /// Leave the path out (and, for a directory, everything below it).
    Exclude,
}

#[derive(Clone, Debug)]
enum Pattern {
    Glob {
        matcher: GlobMatcher,
        /// Matches the last name only (the pattern has no `/`).
        basename: bool,
        dir_only: bool,
    },
    Regex(regex::bytes::Regex),
}

/// The ordered include/exclude rules of one command line.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    rules: Vec<(Action, Pattern)>,
}

impl Rules {
    /// The rules of a tool's parsed command line, in command-line order. Tools without filter
    /// options give no rules.
    pub(crate) fn from_matches(m: &ArgMatches) -> Result<Rules, clap::Error> {
        let mut found: Vec<(usize, Action, bool, String)> = Vec::new();
        for (id, action, regex) in [
            ("exclude", Action::Exclude, false),
            ("include", Action::Include, false),
            ("exclude_regex", Action::Exclude, true),
            ("include_regex", Action::Include, true),
        ] {
            let Ok(Some(values)) = m.try_get_raw(id) else {
                continue;
            };
            let indices = m.indices_of(id).into_iter().flatten();
            for (index, value) in indices.zip(values) {
                let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
                found.push((index, action, regex, text));
            }
        }
        found.sort_by_key(|f| f.0);
        let mut rules = Rules::default();
        for (_, action, regex, text) in found {
            let pushed = if regex {
                rules.push_regex(action, &text)
            } else {
                rules.push_glob(action, &text)
            };
            pushed.map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, e))?;
        }
        Ok(rules)
    }

    /// Append a glob rule (syntax in the module documentation).
    pub fn push_glob(&mut self, action: Action, pattern: &str) -> Result<(), String> {
        let dir_only = pattern.len() > 1 && pattern.ends_with('/');
        let p = pattern.trim_end_matches('/');
        let (anchored, p) = match p.strip_prefix('/') {
            Some(rest) => (true, rest),
            None => (false, p),
        };
        if p.is_empty() {
            return Err(format!("empty pattern '{pattern}'"));
        }
        let basename = !anchored && !p.contains('/');
        let full = if anchored || basename {
            p.to_string()
        } else {
            format!("**/{p}")
        };
        let matcher = GlobBuilder::new(&full)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("invalid glob '{pattern}': {e}"))?
            .compile_matcher();
        self.rules.push((
            action,
            Pattern::Glob {
                matcher,
                basename,
                dir_only,
            },
        ));
        Ok(())
    }

    /// Append a regex rule.
    pub fn push_regex(&mut self, action: Action, pattern: &str) -> Result<(), String> {
        let re = flist::filter::byte_regex(pattern)
            .map_err(|e| format!("invalid regex '{pattern}': {e}"))?;
        self.rules.push((action, Pattern::Regex(re)));
        Ok(())
    }

    /// True when there are no rules (everything is included).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// True when `rel` (relative to the source root, no leading `/`) is left out: by the first
    /// rule matching it, or because one of its parent directories is left out.
    pub fn excludes(&self, rel: &[u8], is_dir: bool) -> bool {
        if self.rules.is_empty() || rel.is_empty() {
            return false;
        }
        let ancestors = rel
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'/')
            .map(|(i, _)| &rel[..i]);
        for dir in ancestors {
            if self.first_match(dir, true) == Some(Action::Exclude) {
                return true;
            }
        }
        self.first_match(rel, is_dir) == Some(Action::Exclude)
    }

    fn first_match(&self, rel: &[u8], is_dir: bool) -> Option<Action> {
        let name = flist::path::basename(rel);
        self.rules
            .iter()
            .find(|(_, p)| match p {
                Pattern::Glob {
                    matcher,
                    basename,
                    dir_only,
                } => {
                    (is_dir || !dir_only)
                        && matcher.is_match(flist::path::as_path(if *basename {
                            name
                        } else {
                            rel
                        }))
                }
                Pattern::Regex(re) => re.is_match(rel),
            })
            .map(|(a, _)| *a)
    }
}

impl Rules {
    /// The walk hook ([`flist::walk::WalkOptions::visit`]) that consumes what these rules
    /// exclude (paths relative to their source root through `map`): an excluded entry is not
    /// recorded and an excluded directory is not read, so nothing below it is opened or
    /// stat'ed. The walk then gives what `apply_rules` would leave of a full walk (roots are
    /// never excluded: their relative path is `""`); `None` without rules.
    pub(crate) fn pruner<'a>(&'a self, map: &'a Mapping) -> Option<Box<Visit<'a>>> {
        if self.is_empty() {
            return None;
        }
        Some(Box::new(
            move |_: BorrowedFd<'_>, _: &[u8], path: &[u8], kind: FileType| {
                self.excludes(map.rel(path), kind == FileType::Dir)
            },
        ))
    }
}

/// Drop the records `rules` exclude (paths relative to their source root through `map`): for
/// lists that were read, not walked (a walk prunes with [`Rules::pruner`]).
pub fn apply_rules(list: &mut flist::FileList, rules: &Rules, map: &Mapping) {
    if !rules.is_empty() {
        list.retain(|e| !rules.excludes(map.rel(e.path), e.kind == FileType::Dir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(spec: &[(Action, &str)]) -> Rules {
        let mut r = Rules::default();
        for &(a, p) in spec {
            r.push_glob(a, p).unwrap();
        }
        r
    }

    #[test]
    fn first_match_decides_and_default_is_include() {
        use Action::*;
        let r = rules(&[(Include, "*.c"), (Exclude, "*")]);
        assert!(!r.excludes(b"a.c", false));
        assert!(r.excludes(b"a.h", false));
        // Directories are excluded by `*` too, and with them everything below.
        assert!(r.excludes(b"d/x.c", false));
        let r = rules(&[(Exclude, "*.o")]);
        assert!(!r.excludes(b"a.c", false));
        assert!(!r.excludes(b"", true));
    }

    #[test]
    fn slashes_anchor_and_select_directories() {
        use Action::*;
        let r = rules(&[(Exclude, "cache/")]);
        assert!(r.excludes(b"x/cache", true));
        assert!(!r.excludes(b"x/cache", false));
        assert!(r.excludes(b"x/cache/y", false));
        let r = rules(&[(Exclude, "a/b")]);
        assert!(r.excludes(b"a/b", false));
        assert!(r.excludes(b"z/a/b", false));
        assert!(!r.excludes(b"za/b", false));
        let r = rules(&[(Exclude, "/a/b")]);
        assert!(!r.excludes(b"z/a/b", false));
        let r = rules(&[(Exclude, "a/**/z")]);
        assert!(r.excludes(b"a/b/c/z", false));
        assert!(!r.excludes(b"a/b/c/zz", false));
        // `*` does not cross `/`.
        let r = rules(&[(Exclude, "/a/*")]);
        assert!(r.excludes(b"a/b", false));
        assert!(r.excludes(b"a/b/c", false)); // via its excluded parent a/b
        let r = rules(&[(Exclude, "/*.c")]);
        assert!(!r.excludes(b"a/b.c", false));
    }

    /// The pruned walk keeps exactly what a full walk keeps after [`apply_rules`], for rules
    /// that exclude directories, files, names at depth, anchored paths and what an include
    /// would bring back below an excluded directory.
    #[test]
    fn a_pruned_walk_keeps_what_the_rules_keep_of_a_full_walk() {
        use flist::walk::{walk, WalkOptions};
        use std::os::unix::ffi::OsStrExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("r");
        for d in ["a/b/c", "a/skip/x", "skip/y", "keep/build/z", "build"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "t.txt",
            "a/t.o",
            "a/b/c/t.txt",
            "a/skip/x/t.txt",
            "skip/t.txt",
            "skip/y/k.c",
            "keep/build/z/t.o",
            "build/t.c",
        ] {
            std::fs::write(root.join(f), b"").unwrap();
        }
        let root_bytes = root.as_os_str().as_bytes().to_vec();
        let map = Mapping::new(vec![(root_bytes.clone(), b"/dest".to_vec())]);
        use Action::*;
        let sets: [&[(Action, &str)]; 6] = [
            &[(Exclude, "skip/")],
            &[(Exclude, "skip"), (Include, "*.txt")],
            &[(Include, "*.c"), (Include, "*/"), (Exclude, "*")],
            &[(Exclude, "/build/"), (Exclude, "*.o")],
            &[(Exclude, "a/*")],
            &[(Include, "keep/**"), (Exclude, "b"), (Exclude, "y/")],
        ];
        for set in sets {
            let r = rules(set);
            let paths = |prune: bool| -> Vec<Vec<u8>> {
                let hook = r.pruner(&map);
                let lists = steal::local::run(2, |comm| {
                    let opts = WalkOptions {
                        visit: hook.as_deref().filter(|_| prune),
                        ..WalkOptions::default()
                    };
                    let mut list = walk(comm, std::slice::from_ref(&root_bytes), &opts)
                        .into_result()
                        .unwrap();
                    if !prune {
                        apply_rules(&mut list, &r, &map);
                    }
                    list.iter().map(|e| e.path.to_vec()).collect::<Vec<_>>()
                });
                let mut all: Vec<Vec<u8>> = lists.into_iter().flatten().collect();
                all.sort();
                all
            };
            let (pruned, filtered) = (paths(true), paths(false));
            assert_eq!(pruned, filtered, "{set:?}");
            assert!(pruned.len() > 1, "{set:?}: the rules keep something");
        }
    }

    #[test]
    fn non_utf8_names_and_regexes() {
        let mut r = Rules::default();
        r.push_glob(Action::Exclude, "caf*").unwrap();
        assert!(r.excludes(b"d/caf\xe9", false));
        let mut r = Rules::default();
        r.push_regex(Action::Exclude, r"\.tmp$").unwrap();
        assert!(r.excludes(b"d/a.tmp", false));
        assert!(!r.excludes(b"d/a.tmpx", false));
        assert!(r.push_regex(Action::Exclude, "(").is_err());
        assert!(r.push_glob(Action::Exclude, "/").is_err());
    }
}
