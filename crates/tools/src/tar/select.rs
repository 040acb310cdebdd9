//! Member selection for `tar -x` and `tar -t`: the MEMBER operands, `--exclude`/`--include`
//! and `--strip-components`, with GNU tar's rules (checked against GNU tar 1.34):
//!
//! - a MEMBER names an entry by its name as stored (`./a` does not name `a`, `a` does not name
//!   `/a`), trailing `/` left out; it also names everything below it (`dir` selects `dir/...`);
//! - with `--wildcards`, a MEMBER is a pattern matched by `fnmatch(3)` (GNU tar's matcher), `*`,
//!   `?` and `[...]` matching `/` too unless `--no-wildcards-match-slash`, and it names what is
//!   below what it matches as well; with `--no-anchored` it may match after any `/`;
//! - each entry is credited to the first MEMBER (in command-line order) that names it, so `tar
//!   -t dir dir/sub` says `dir/sub: Not found in archive`, as GNU tar does; a MEMBER named by no
//!   entry is reported so, and the run fails (exit 1; GNU tar exits 2) after extracting or
//!   listing the rest;
//! - `--exclude`/`--include` are the tool's own rules ([`Rules`]), applied to the member's name
//!   without a leading `/` or `./` after a MEMBER named it (an excluded entry still counts as
//!   found, as in GNU tar). They match as they do on create (rsync's way), which differs from
//!   GNU tar's `--exclude` in one point: `*` does not match `/` (`--exclude 'a/*.o'` leaves out
//!   `a/x.o`, not `a/b/x.o`; use `a/**/*.o`);
//! - `--strip-components N` (extract only; `-t` lists names as stored, as GNU tar does) drops
//!   N leading components of each name, counting `.` as one, after the selection; an entry with
//!   no more than N is skipped; a hard link's target is stripped too, and one left without a
//!   target fails (GNU tar fails to link it as well).
//!
//! Extraction reads only the selected entries' data: every rank decodes the headers of its part
//! of the stream (`choose`), keeps the selected entries' offsets, and the stream is split
//! again over ranks by the bytes selected (`balance`), so that 1% of an archive lying in one
//! rank's part is still extracted by every rank.

use super::format::{Header, Kind, BLOCK};
use super::Options;
use crate::engine::select::Rules;
use crate::tar::archive::Archive;
use crate::tar::extract::beneath::clean;
use crate::tar::index::scan::{self, Located, Parts};
use flist::path::display;
use std::ffi::CStr;
use steal::{Comm, CommExt, ReduceOp};

/// What `tar -x`/`tar -t` take from the archive (all of it by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Select {
    /// The MEMBER operands, in command-line order (bytes, as typed).
    pub members: Vec<Vec<u8>>,
    /// `--wildcards`: MEMBERs are `fnmatch(3)` patterns (default: exact names).
    pub wildcards: bool,
    /// `--wildcards` or `--no-wildcards` was given: GNU tar's hint about a MEMBER with pattern
    /// characters that named nothing is then not given.
    pub wildcards_given: bool,
    /// Pattern characters match `/` (default; `--no-wildcards-match-slash` turns it off).
    pub wildcards_match_slash: bool,
    /// MEMBERs match from the start of the name (default; `--no-anchored`: after any `/`).
    pub anchored: bool,
    /// `--strip-components N`: leading name components dropped on extraction.
    pub strip_components: u32,
}

impl Default for Select {
    fn default() -> Select {
        Select {
            members: Vec::new(),
            wildcards: false,
            wildcards_given: false,
            wildcards_match_slash: true,
            anchored: true,
            strip_components: 0,
        }
    }
}

/// One MEMBER as matched and named in messages: trailing `/` left out (as GNU tar), and
/// NUL-terminated for `fnmatch`.
struct Member {
    pattern: Vec<u8>,
}

impl Member {
    /// The MEMBER without its NUL.
    fn name(&self) -> &[u8] {
        &self.pattern[..self.pattern.len() - 1]
    }
}

/// The selection of one run, ready to test entries.
pub(super) struct Matcher<'a> {
    members: Vec<Member>,
    select: &'a Select,
    rules: &'a Rules,
}

/// What the selection says of one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Verdict {
    /// The entry is taken.
    pub take: bool,
    /// The MEMBER (index) that named it, if any.
    pub credit: Option<usize>,
}

impl<'a> Matcher<'a> {
    /// The matcher of `o`'s selection and rules.
    pub fn new(o: &'a Options) -> Matcher<'a> {
        let members = o
            .select
            .members
            .iter()
            .map(|m| {
                let mut p = m.clone();
                while p.len() > 1 && p.ends_with(b"/") {
                    p.pop();
                }
                // A name cannot hold NUL; one typed with it (impossible from argv) names nothing.
                p.push(0);
                Member { pattern: p }
            })
            .collect();
        Matcher {
            members,
            select: &o.select,
            rules: &o.rules,
        }
    }

    /// Some entries may be left out (MEMBERs or rules were given).
    pub fn filters(&self) -> bool {
        !self.members.is_empty() || !self.rules.is_empty()
    }

    /// How many MEMBERs there are.
    pub fn members(&self) -> usize {
        self.members.len()
    }

    /// Whether the entry `h` is taken, and which MEMBER named it.
    pub fn verdict(&self, h: &Header) -> Verdict {
        let is_dir = h.kind == Kind::Dir;
        let credit = if self.members.is_empty() {
            None
        } else {
            // As GNU tar sees the name: a directory's with its trailing `/`.
            let mut name = Vec::with_capacity(h.path.len() + 2);
            name.extend_from_slice(&h.path);
            if is_dir && !name.ends_with(b"/") {
                name.push(b'/');
            }
            name.push(0);
            match self.members.iter().position(|m| self.names(m, &mut name)) {
                Some(i) => Some(i),
                None => {
                    return Verdict {
                        take: false,
                        credit: None,
                    }
                }
            }
        };
        let excluded = !self.rules.is_empty()
            && match clean(&h.path) {
                Ok(rel) => self.rules.excludes(&rel, is_dir),
                // `/abs`, `a/../b`: the rules see the name less its leading `/`s; extraction
                // refuses such a name anyway.
                Err(_) => {
                    let rel: Vec<u8> = h.path.iter().copied().skip_while(|&b| b == b'/').collect();
                    self.rules.excludes(&rel, is_dir)
                }
            };
        Verdict {
            take: !excluded,
            credit,
        }
    }

    /// MEMBER `m` names the entry `name` (NUL-terminated; restored on return): the whole name
    /// or a leading part of it ending before a `/`, from its start or, not anchored, after any
    /// `/` (GNU tar's `exclude_fnmatch` with `FNM_LEADING_DIR`).
    fn names(&self, m: &Member, name: &mut [u8]) -> bool {
        let pattern = &m.pattern;
        if pattern == b"\0" {
            // An empty MEMBER names every entry (GNU tar).
            return true;
        }
        let starts: Vec<usize> = if self.select.anchored {
            vec![0]
        } else {
            std::iter::once(0)
                .chain((0..name.len() - 1).filter_map(|i| {
                    (name[i] == b'/' && name[i + 1] != b'/' && name[i + 1] != 0).then_some(i + 1)
                }))
                .collect()
        };
        starts.into_iter().any(|s| self.leading(pattern, name, s))
    }

    /// `pattern` matches `name[from..]` whole, or up to one of its `/`.
    fn leading(&self, pattern: &[u8], name: &mut [u8], from: usize) -> bool {
        let end = name.len() - 1;
        let whole = self.one(pattern, &name[from..]);
        if whole {
            return true;
        }
        for i in from..end {
            if name[i] == b'/' && i > from {
                name[i] = 0;
                let hit = self.one(pattern, &name[from..=i]);
                name[i] = b'/';
                if hit {
                    return true;
                }
            }
        }
        false
    }

    /// `pattern` matches `name` exactly (both NUL-terminated).
    fn one(&self, pattern: &[u8], name: &[u8]) -> bool {
        if !self.select.wildcards {
            return pattern == name;
        }
        let (Ok(p), Ok(n)) = (
            CStr::from_bytes_until_nul(pattern),
            CStr::from_bytes_until_nul(name),
        ) else {
            return false;
        };
        let flags = if self.select.wildcards_match_slash {
            0
        } else {
            libc::FNM_PATHNAME
        };
        // SAFETY: both are NUL-terminated strings that live across the call; fnmatch only
        // reads them.
        unsafe { libc::fnmatch(p.as_ptr(), n.as_ptr(), flags) == 0 }
    }

    /// Say which MEMBERs no entry on any rank was credited to (`found`: this rank's credits,
    /// by MEMBER), as GNU tar does, on rank 0; returns how many. Collective.
    pub fn not_found(&self, comm: &dyn Comm, o: &Options, found: &[bool]) -> u64 {
        if self.members.is_empty() {
            return 0;
        }
        let mut all: Vec<u64> = found.iter().map(|&f| u64::from(f)).collect();
        comm.allreduce(&mut all, ReduceOp::Or);
        let mut missing = 0;
        for (m, &hit) in self.members.iter().zip(&all) {
            // An empty MEMBER is never reported (GNU tar).
            if hit != 0 || m.name().is_empty() {
                continue;
            }
            missing += 1;
            if comm.rank() == 0 {
                if !self.select.wildcards_given && has_wildcards(m.name()) {
                    o.context
                        .error("Pattern matching characters used in file names");
                    o.context.error(
                        "Use --wildcards to enable pattern matching, or --no-wildcards to \
                         suppress this warning",
                    );
                }
                o.context
                    .error(format_args!("{}: Not found in archive", display(m.name())));
            }
        }
        missing
    }

    /// The name an entry named `path` is extracted under, after `--strip-components`: `None`
    /// when nothing is left of it.
    pub fn strip<'p>(&self, path: &'p [u8]) -> Option<&'p [u8]> {
        strip_components(path, self.select.strip_components)
    }

    /// `--strip-components` is given.
    pub fn strips(&self) -> bool {
        self.select.strip_components > 0
    }
}

/// GNU tar's test for pattern characters in a MEMBER (`*`, `?`, `[`).
fn has_wildcards(name: &[u8]) -> bool {
    name.iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// `path` less its first `n` components (GNU tar's `stripped_prefix_len`: leading `/`s count
/// for nothing, `.` counts as one, runs of `/` as one separator, and none is left in front of
/// the rest); `None` when no more than `n` components are there.
pub fn strip_components(path: &[u8], n: u32) -> Option<&[u8]> {
    if n == 0 {
        return Some(path);
    }
    let mut left = n;
    let mut i = path.iter().take_while(|&&b| b == b'/').count();
    while i < path.len() {
        let slash = path[i] == b'/';
        i += 1;
        if slash {
            left -= 1;
            // Runs of `/` after the cut go too (GNU tar drops them as a leading `/`).
            while i < path.len() && path[i] == b'/' {
                i += 1;
            }
            if left == 0 {
                return (i < path.len()).then(|| &path[i..]);
            }
        }
    }
    None
}

/// Keep of `located` (this rank's part) the entries the selection takes, crediting the MEMBERs
/// that name them in `found`, and split the stream over ranks again by the bytes of the entries
/// kept ([`balance`]); the offsets kept go to the ranks of the new split. Headers that cannot be
/// decoded are kept (extraction names them). Collective.
pub(super) fn choose(
    comm: &dyn Comm,
    archive: &Archive,
    located: &mut Located,
    m: &Matcher,
    found: &mut [bool],
) {
    let (start, end) = located.parts.of(comm.rank());
    let offsets = &located.offsets;
    let a = offsets.partition_point(|&o| o < start);
    let b = offsets.partition_point(|&o| o < end);
    // (start, next) of each entry kept.
    let mut kept: Vec<(u64, u64)> = Vec::new();
    for run in offsets[a..b].chunks(CHOOSE_RUN) {
        for (&at, d) in run
            .iter()
            .zip(scan::decode_in(archive, run, &located.globals))
        {
            match d {
                Ok(d) => {
                    let v = m.verdict(&d.header);
                    if let Some(i) = v.credit {
                        found[i] = true;
                    }
                    if v.take {
                        kept.push((d.start, d.next.max(d.start + BLOCK)));
                    }
                }
                Err(_) => kept.push((at, at + BLOCK)),
            }
        }
    }
    let parts = balance(comm, archive, &kept);
    let starts: Vec<u64> = kept.iter().map(|k| k.0).collect();
    drop(kept);
    located.offsets = scan::to_parts(comm, &parts, &starts);
    located.parts = parts;
}

/// Entries decoded at once by [`choose`].
const CHOOSE_RUN: usize = 1 << 14;

/// What one entry weighs besides its bytes when the stream is split (bytes): creating a file,
/// its metadata and its name cost about as much as copying this much data.
const ENTRY_COST: u64 = 64 << 10;

/// Split the stream over ranks so that each part holds about the same share of the `kept`
/// entries' bytes (each entry `[start, next)` plus [`ENTRY_COST`]); a big file's data may be
/// cut between ranks, as always. `kept` is this rank's, in order, the ranks' in rank order.
/// Bounds fall on blocks, or on frames for a compressed archive. Collective.
pub(super) fn balance(comm: &dyn Comm, archive: &Archive, kept: &[(u64, u64)]) -> Parts {
    let size = comm.size();
    let weight = |&(s, n): &(u64, u64)| n - s + ENTRY_COST;
    let mine: u64 = kept.iter().map(weight).sum();
    let (before, total) = comm.offset_and_total(mine);
    if total == 0 {
        return Parts::even(archive, size);
    }
    // Bound k (1..size) lies where the weight before it reaches total * k / size: the rank
    // whose weight spans that point finds it.
    let mut found = Vec::new();
    let mut k = ((before as u128 * size as u128).div_ceil(total as u128) as usize).max(1);
    let mut cum = before;
    for e in kept {
        let w = weight(e);
        while k < size {
            let target = (total as u128 * k as u128 / size as u128) as u64;
            if target >= cum + w {
                break;
            }
            let into = target.saturating_sub(cum);
            let at = if into < ENTRY_COST {
                e.0
            } else {
                (e.0 + (into - ENTRY_COST) / BLOCK * BLOCK).min(e.1)
            };
            found.push((k, snap(archive, at)));
            k += 1;
        }
        cum += w;
    }
    let mut bounds = vec![u64::MAX; size + 1];
    bounds[0] = 0;
    bounds[size] = archive.len();
    for (k, bound) in comm.all_gather(&found).into_iter().flatten() {
        bounds[k] = bound;
    }
    // Every bound was found by one rank; keep them in order whatever rounding did.
    for k in 1..=size {
        if bounds[k] == u64::MAX || bounds[k] < bounds[k - 1] {
            bounds[k] = bounds[k - 1];
        }
    }
    bounds[size] = bounds[size].max(archive.len());
    Parts::from_bounds(bounds)
}

/// The offset `at` moved down to a boundary ranks may split at: a block, or the start of its
/// frame in a compressed archive.
fn snap(archive: &Archive, at: u64) -> u64 {
    match archive.table() {
        Some(t) => {
            let i = t.frames.partition_point(|f| f.d_at <= at);
            t.frames.get(i.wrapping_sub(1)).map_or(0, |f| f.d_at)
        }
        None => at / BLOCK * BLOCK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(path: &str, kind: Kind) -> Header {
        Header {
            path: path.as_bytes().to_vec(),
            kind,
            mode: 0o644,
            uid: 0,
            gid: 0,
            uname: Vec::new(),
            gname: Vec::new(),
            size: 0,
            mtime: 0,
            mtime_nsec: 0,
            link: Vec::new(),
            dev_major: 0,
            dev_minor: 0,
            xattrs: Vec::new(),
            projid: Default::default(),
        }
    }

    fn options(members: &[&str], f: impl FnOnce(&mut Select)) -> Options {
        let mut o = Options::list("a.tar");
        o.select.members = members.iter().map(|m| m.as_bytes().to_vec()).collect();
        f(&mut o.select);
        o
    }

    /// The MEMBER credited with each name ("-" for none), files unless they end in `/`.
    fn credits(o: &Options, names: &[&str]) -> Vec<String> {
        let m = Matcher::new(o);
        names
            .iter()
            .map(|n| {
                let h = match n.strip_suffix('/') {
                    Some(d) => header(d, Kind::Dir),
                    None => header(n, Kind::File),
                };
                match m.verdict(&h).credit {
                    Some(i) => i.to_string(),
                    None => "-".into(),
                }
            })
            .collect()
    }

    #[test]
    fn exact_members_name_entries_and_their_subtrees_as_gnu_tar() {
        let names = [
            "dir/",
            "dir/sub/",
            "dir/sub/b.log",
            "dir/a.txt",
            "dirx",
            "./dir/",
            "/dir/x",
        ];
        let o = options(&["dir/"], |_| {});
        assert_eq!(credits(&o, &names), ["0", "0", "0", "0", "-", "-", "-"]);
        let o = options(&["./dir", "dir//sub", "dir/./sub"], |_| {});
        assert_eq!(credits(&o, &names), ["-", "-", "-", "-", "-", "0", "-"]);
        // The first MEMBER that names an entry takes the credit.
        let o = options(&["dir", "dir/sub"], |_| {});
        assert_eq!(credits(&o, &names[..3]), ["0", "0", "0"]);
        let o = options(&["dir/sub", "dir"], |_| {});
        assert_eq!(credits(&o, &names[..3]), ["1", "0", "0"]);
        // Pattern characters are plain without --wildcards; an empty MEMBER names everything.
        let o = options(&["d*", ""], |_| {});
        assert_eq!(credits(&o, &["d*", "dir/"]), ["0", "1"]);
        let o = options(&["/dir"], |_| {});
        assert_eq!(credits(&o, &names), ["-", "-", "-", "-", "-", "-", "0"]);
    }

    #[test]
    fn wildcards_match_slashes_unless_told_and_may_float_unanchored() {
        let names = ["dir/", "dir/sub/", "dir/sub/b.log", "dir/a.txt", "top.txt"];
        let o = options(&["*.txt"], |s| s.wildcards = true);
        assert_eq!(credits(&o, &names), ["-", "-", "-", "0", "0"]);
        let o = options(&["dir/*.log", "d?r"], |s| s.wildcards = true);
        assert_eq!(credits(&o, &names), ["1", "1", "0", "1", "-"]);
        let o = options(&["dir/*.log"], |s| {
            s.wildcards = true;
            s.wildcards_match_slash = false;
        });
        assert_eq!(credits(&o, &names), ["-", "-", "-", "-", "-"]);
        let o = options(&["dir/s?b"], |s| s.wildcards = true);
        assert_eq!(credits(&o, &names), ["-", "0", "0", "-", "-"]);
        let o = options(&["a.txt", "sub"], |s| s.anchored = false);
        assert_eq!(credits(&o, &names), ["-", "1", "1", "0", "-"]);
        let o = options(&["[st]*"], |s| {
            s.wildcards = true;
            s.anchored = false;
        });
        assert_eq!(credits(&o, &names), ["-", "0", "0", "-", "0"]);
    }

    #[test]
    fn rules_leave_out_after_a_member_named_the_entry() {
        let mut o = options(&["dir"], |_| {});
        o.rules
            .push_glob(crate::engine::select::Action::Exclude, "*.log")
            .unwrap();
        let m = Matcher::new(&o);
        let v = m.verdict(&header("dir/sub/b.log", Kind::File));
        assert_eq!(
            v,
            Verdict {
                take: false,
                credit: Some(0)
            }
        );
        assert!(m.verdict(&header("dir/a.txt", Kind::File)).take);
        assert!(!m.verdict(&header("top.txt", Kind::File)).take);
        // `./` and `/` prefixes are not seen by the rules.
        let mut o = options(&[], |_| {});
        o.rules
            .push_glob(crate::engine::select::Action::Exclude, "/dir/")
            .unwrap();
        let m = Matcher::new(&o);
        assert!(!m.verdict(&header("./dir", Kind::Dir)).take);
        assert!(!m.verdict(&header("/dir/x", Kind::File)).take);
        assert!(m.verdict(&header("dir", Kind::File)).take);
    }

    #[test]
    fn balance_splits_the_kept_bytes_evenly_wherever_they_lie() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tar");
        std::fs::write(&path, vec![0u8; 4000 * 512]).unwrap();
        let archive = Archive::open(path.as_os_str().as_encoded_bytes()).unwrap();
        // 8 entries of 100 KiB at the archive's start (rank 0's even share at every size), and
        // the same again with a big one, found by the last rank.
        let small: Vec<(u64, u64)> = (0..8).map(|i| (i * 102_400, (i + 1) * 102_400)).collect();
        for size in [1usize, 2, 3, 4] {
            let parts = steal::local::run(size, |comm| {
                let mine: &[(u64, u64)] = if comm.rank() == 0 { &small } else { &[] };
                balance(comm, &archive, mine)
            });
            assert!(
                parts.windows(2).all(|w| w[0] == w[1]),
                "the same on every rank"
            );
            let per_rank: Vec<usize> = (0..size)
                .map(|r| {
                    let (a, b) = parts[0].of(r);
                    small.iter().filter(|e| (a..b).contains(&e.0)).count()
                })
                .collect();
            let want = 8 / size;
            assert!(
                per_rank.iter().all(|&n| n == want || n == want + 1),
                "{size} ranks: {per_rank:?}"
            );
            assert_eq!(parts[0].of(0).0, 0);
            assert_eq!(parts[0].of(size - 1).1, archive.len());
        }
        let big = (1_000_000u64, 1_900_000u64);
        let parts = steal::local::run(3, |comm| {
            let mine: Vec<(u64, u64)> = match comm.rank() {
                0 => small.clone(),
                2 => vec![big],
                _ => Vec::new(),
            };
            balance(comm, &archive, &mine)
        });
        // 8 × 167,936 + 965,536 = 2,309,024 bytes of weight: a third each; the big file's data
        // is cut between the last two ranks, on a block.
        let p = &parts[0];
        let third = (8 * 167_936 + 965_536) / 3;
        assert_eq!(
            p.of(0).1,
            4 * 102_400 + (third - 4 * 167_936 - ENTRY_COST) / 512 * 512
        );
        assert!(
            p.of(1).1 > big.0 && p.of(1).1 < big.1 && p.of(1).1 % 512 == 0,
            "{p:?}"
        );
    }

    #[test]
    fn strip_components_counts_as_gnu_tar() {
        let s = |p: &str, n| strip_components(p.as_bytes(), n).map(|r| r.to_vec());
        assert_eq!(s("dir/a.txt", 1), Some(b"a.txt".to_vec()));
        assert_eq!(s("dir", 1), None);
        assert_eq!(s("dir/", 1), None);
        assert_eq!(s("./dir/a", 1), Some(b"dir/a".to_vec()));
        assert_eq!(s("/abs//x/y", 1), Some(b"x/y".to_vec()));
        assert_eq!(s("a/b/c", 2), Some(b"c".to_vec()));
        assert_eq!(s("a/b/c", 3), None);
        assert_eq!(s("a", 0), Some(b"a".to_vec()));
    }
}
