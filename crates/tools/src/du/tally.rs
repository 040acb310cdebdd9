//! The counting of one rank: every entry it is handed (from its share of the walk or of the
//! list) added to the totals, the owners, the age buckets, the subtree of every directory above
//! it and the largest files. Pure: no I/O, no ranks, unit-tested alone.

use flist::{FileType, Meta};
use std::collections::HashMap;

/// Bytes of one `st_blocks` unit (POSIX: 512, whatever the file system's block size).
pub const STAT_BLOCK: u64 = 512;

/// Entries, apparent bytes and allocated blocks: one row of any table of `du`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Usage {
    /// Entries (inodes: files, directories, links...; a hard-linked inode once).
    pub files: u64,
    /// Apparent size: the sum of `st_size`, in bytes.
    pub bytes: u64,
    /// Allocated space: the sum of `st_blocks`, in 512-byte units (0 when the input holds no
    /// allocation: a list).
    pub blocks: u64,
}

impl Usage {
    /// One entry of `size` bytes and `blocks` 512-byte blocks.
    pub fn one(size: u64, blocks: u64) -> Usage {
        Usage {
            files: 1,
            bytes: size,
            blocks,
        }
    }

    /// Add `other` into this one.
    pub fn add(&mut self, other: &Usage) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.blocks += other.blocks;
    }

    /// The size that ranks rows, in bytes: allocated (`blocks` × 512) or apparent.
    pub fn measured(&self, measure: Measure) -> u64 {
        match measure {
            Measure::Allocated => self.blocks.saturating_mul(STAT_BLOCK),
            Measure::Apparent => self.bytes,
        }
    }
}

/// Which size `du` shows and ranks by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    /// Space allocated on disk (`st_blocks`), as `du` shows by default.
    #[default]
    Allocated,
    /// Apparent size (`st_size`), as `du --apparent-size`.
    Apparent,
}

/// The age buckets: an entry of age `a` seconds goes to the first bucket whose limit is above
/// `a` (a time in the future is age 0); the last bucket has no limit.
pub const AGE_LIMITS: [(Option<i64>, &str); 7] = [
    (Some(DAY), "< 1 day"),
    (Some(7 * DAY), "< 1 week"),
    (Some(30 * DAY), "< 30 days"),
    (Some(90 * DAY), "< 90 days"),
    (Some(365 * DAY), "< 1 year"),
    (Some(3 * 365 * DAY), "< 3 years"),
    (None, ">= 3 years"),
];

/// Seconds of a day.
const DAY: i64 = 86_400;

/// The number of age buckets.
pub const AGES: usize = AGE_LIMITS.len();

/// The bucket of a time `t` (seconds since the epoch) seen at `now`.
pub fn age_bucket(now: i64, t: i64) -> usize {
    let age = now.saturating_sub(t).max(0);
    AGE_LIMITS
        .iter()
        .position(|(limit, _)| limit.is_some_and(|l| age < l))
        .unwrap_or(AGES - 1)
}

/// A file among the largest: its path and usage.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ranked {
    /// Its path.
    #[serde(with = "serde_bytes")]
    pub path: Vec<u8>,
    /// Its usage.
    pub usage: Usage,
}

/// Keep the `n` first of `rows` in ranking order: the measured size descending, then the other
/// size descending, then the path's bytes (so that the result does not depend on which rank
/// held which row).
pub fn keep_top(rows: &mut Vec<Ranked>, n: usize, measure: Measure) {
    rows.sort_by(|a, b| rank_order(&a.usage, &a.path, &b.usage, &b.path, measure));
    rows.dedup_by(|a, b| a.path == b.path);
    rows.truncate(n);
}

/// The ranking order of two rows (see [`keep_top`]).
pub fn rank_order(
    a: &Usage,
    a_path: &[u8],
    b: &Usage,
    b_path: &[u8],
    measure: Measure,
) -> std::cmp::Ordering {
    let key = |u: &Usage| (u.measured(measure), u.bytes, u.blocks);
    key(b).cmp(&key(a)).then_with(|| a_path.cmp(b_path))
}

/// An entry whose inode has other names (`st_nlink` > 1): counted once, under the name whose
/// bytes sort first, once every rank's names of it are brought together.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Linked {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// This name.
    #[serde(with = "serde_bytes")]
    pub path: Vec<u8>,
    /// Its metadata.
    pub meta: Meta,
    /// Its 512-byte blocks.
    pub blocks: u64,
}

/// What the counting needs to know beyond the entries.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The roots, normalised (absolute, no trailing `/`): each entry counts in the subtrees of
    /// the directories from the deepest root above it down to its parent.
    pub roots: Vec<Vec<u8>>,
    /// The time ages are measured from (seconds since the epoch).
    pub now: i64,
    /// How many largest files to keep.
    pub top: usize,
    /// Which size ranks the largest files.
    pub measure: Measure,
}

/// One rank's counts (or a part of them, for one walk thread).
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Everything.
    pub total: Usage,
    /// By owner uid.
    pub users: HashMap<u32, Usage>,
    /// By group gid.
    pub groups: HashMap<u32, Usage>,
    /// The subtree of each directory (and each root), as far as this rank's entries go.
    pub dirs: HashMap<Vec<u8>, Usage>,
    /// Non-directories by the age of their modification time ([`AGE_LIMITS`]).
    pub mtime: [Usage; AGES],
    /// Non-directories by the age of their access time.
    pub atime: [Usage; AGES],
    /// The largest non-directories seen (at most twice `top` between prunings).
    pub top_files: Vec<Ranked>,
    /// Names of inodes with other names, not counted yet (see [`Linked`]).
    pub linked: Vec<Linked>,
}

impl Tally {
    /// Take the entry `path` of type `kind` with its metadata and `blocks` into the counts; a
    /// non-directory with other names waits in `linked` (`defer_links`) to be counted once.
    pub fn add(
        &mut self,
        s: &Settings,
        path: &[u8],
        kind: FileType,
        meta: &Meta,
        blocks: u64,
        defer_links: bool,
    ) {
        let known_inode = meta.ino != 0 || meta.dev != 0;
        if defer_links && kind != FileType::Dir && meta.nlink > 1 && known_inode {
            self.linked.push(Linked {
                dev: meta.dev,
                ino: meta.ino,
                path: path.to_vec(),
                meta: *meta,
                blocks,
            });
            return;
        }
        let u = Usage::one(meta.size, blocks);
        self.total.add(&u);
        self.users.entry(meta.uid).or_default().add(&u);
        self.groups.entry(meta.gid).or_default().add(&u);
        if kind != FileType::Dir {
            self.mtime[age_bucket(s.now, meta.mtime)].add(&u);
            self.atime[age_bucket(s.now, meta.atime)].add(&u);
            if s.top > 0 {
                self.top_files.push(Ranked {
                    path: path.to_vec(),
                    usage: u,
                });
                if self.top_files.len() >= 2 * s.top.max(64) {
                    keep_top(&mut self.top_files, s.top, s.measure);
                }
            }
        }
        let Some(root) = root_of(&s.roots, path) else {
            return;
        };
        if kind == FileType::Dir || path == root {
            self.add_dir(path, &u);
        }
        for dir in ancestors(root, path) {
            self.add_dir(dir, &u);
        }
    }

    fn add_dir(&mut self, dir: &[u8], u: &Usage) {
        match self.dirs.get_mut(dir) {
            Some(d) => d.add(u),
            None => {
                self.dirs.insert(dir.to_vec(), *u);
            }
        }
    }

    /// Add the counts of `other` (another thread's) into this one.
    pub fn merge(&mut self, other: Tally, s: &Settings) {
        self.total.add(&other.total);
        for (id, u) in other.users {
            self.users.entry(id).or_default().add(&u);
        }
        for (id, u) in other.groups {
            self.groups.entry(id).or_default().add(&u);
        }
        for (dir, u) in other.dirs {
            self.dirs.entry(dir).or_default().add(&u);
        }
        for i in 0..AGES {
            self.mtime[i].add(&other.mtime[i]);
            self.atime[i].add(&other.atime[i]);
        }
        self.top_files.extend(other.top_files);
        keep_top(&mut self.top_files, s.top, s.measure);
        self.linked.extend(other.linked);
    }
}

/// The deepest of `roots` that `path` is in (or is).
pub fn root_of<'a>(roots: &'a [Vec<u8>], path: &[u8]) -> Option<&'a [u8]> {
    roots
        .iter()
        .filter(|r| flist::path::is_prefix(r, path))
        .max_by_key(|r| r.len())
        .map(Vec::as_slice)
}

/// The directories strictly above `path` down from `root` (included): `/r/a/b` under `/r`
/// gives `/r` and `/r/a`. `path` must be in `root`.
pub fn ancestors<'a>(root: &[u8], path: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let top = if root == b"/" { 0 } else { root.len() };
    let root_slash = root == b"/" && path.len() > 1;
    let slashes = path
        .iter()
        .enumerate()
        .filter(move |&(i, &b)| b == b'/' && i >= top && i > 0)
        .map(move |(i, _)| &path[..i]);
    root_slash.then_some(&b"/"[..]).into_iter().chain(slashes)
}

/// How far below `root` the directory `dir` is: 0 for the root itself, 1 for its entries...
pub fn depth_below(root: &[u8], dir: &[u8]) -> usize {
    if dir == root {
        return 0;
    }
    let rest = if root == b"/" {
        &dir[1..]
    } else {
        &dir[root.len() + 1..]
    };
    1 + rest.iter().filter(|&&b| b == b'/').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(size: u64, uid: u32, mtime: i64) -> Meta {
        Meta {
            mode: 0o100644,
            uid,
            gid: uid + 100,
            size,
            mtime,
            atime: mtime,
            nlink: 1,
            ino: size + 7,
            dev: 1,
            ..Meta::default()
        }
    }

    #[test]
    fn ancestors_and_depths() {
        let all =
            |root: &[u8], p: &[u8]| ancestors(root, p).map(<[u8]>::to_vec).collect::<Vec<_>>();
        assert_eq!(
            all(b"/r", b"/r/a/b"),
            vec![b"/r".to_vec(), b"/r/a".to_vec()]
        );
        assert_eq!(all(b"/r", b"/r"), Vec::<Vec<u8>>::new());
        assert_eq!(all(b"/", b"/a/b"), vec![b"/".to_vec(), b"/a".to_vec()]);
        assert_eq!(all(b"/", b"/"), Vec::<Vec<u8>>::new());
        assert_eq!(depth_below(b"/r", b"/r"), 0);
        assert_eq!(depth_below(b"/r", b"/r/a"), 1);
        assert_eq!(depth_below(b"/r", b"/r/a/b"), 2);
        assert_eq!(depth_below(b"/", b"/a"), 1);
        let roots = vec![b"/r".to_vec(), b"/r/a".to_vec(), b"/rx".to_vec()];
        assert_eq!(root_of(&roots, b"/r/a/b"), Some(&b"/r/a"[..]));
        assert_eq!(root_of(&roots, b"/rx/c"), Some(&b"/rx"[..]));
        assert_eq!(root_of(&roots, b"/q"), None);
    }

    #[test]
    fn buckets_by_age() {
        let now = 1_000_000_000;
        assert_eq!(age_bucket(now, now + 50), 0, "the future is new");
        assert_eq!(age_bucket(now, now - DAY + 1), 0);
        assert_eq!(age_bucket(now, now - DAY), 1);
        assert_eq!(age_bucket(now, now - 8 * DAY), 2);
        assert_eq!(age_bucket(now, now - 31 * DAY), 3);
        assert_eq!(age_bucket(now, now - 100 * DAY), 4);
        assert_eq!(age_bucket(now, now - 400 * DAY), 5);
        assert_eq!(age_bucket(now, now - 4 * 365 * DAY), 6);
        assert_eq!(age_bucket(now, i64::MIN), 6);
    }

    #[test]
    fn entries_count_in_every_directory_above_them_and_links_wait() {
        let s = Settings {
            roots: vec![b"/r".to_vec()],
            now: 10 * DAY,
            top: 2,
            measure: Measure::Apparent,
        };
        let mut t = Tally::default();
        let dir = Meta {
            mode: 0o040755,
            size: 10,
            ..meta(10, 0, 0)
        };
        t.add(&s, b"/r", FileType::Dir, &dir, 8, true);
        t.add(&s, b"/r/a", FileType::Dir, &dir, 8, true);
        t.add(
            &s,
            b"/r/a/f",
            FileType::File,
            &meta(100, 1, 10 * DAY),
            8,
            true,
        );
        t.add(&s, b"/r/g", FileType::File, &meta(300, 2, 0), 0, true);
        t.add(&s, b"/r/h", FileType::File, &meta(200, 2, 0), 0, true);
        let linked = Meta {
            nlink: 2,
            ..meta(5, 1, 0)
        };
        t.add(&s, b"/r/l", FileType::File, &linked, 8, true);
        assert_eq!(t.linked.len(), 1);
        assert_eq!(
            t.total,
            Usage {
                files: 5,
                bytes: 620,
                blocks: 24
            }
        );
        assert_eq!(t.dirs[&b"/r".to_vec()], t.total);
        assert_eq!(
            t.dirs[&b"/r/a".to_vec()],
            Usage {
                files: 2,
                bytes: 110,
                blocks: 16
            }
        );
        assert_eq!(
            t.users[&2],
            Usage {
                files: 2,
                bytes: 500,
                blocks: 0
            }
        );
        assert_eq!(
            t.groups[&101],
            Usage {
                files: 1,
                bytes: 100,
                blocks: 8
            }
        );
        assert_eq!(
            t.mtime[0],
            Usage {
                files: 1,
                bytes: 100,
                blocks: 8
            }
        );
        assert_eq!(
            t.mtime[2],
            Usage {
                files: 2,
                bytes: 500,
                blocks: 0
            },
            "10 days old"
        );
        keep_top(&mut t.top_files, 2, Measure::Apparent);
        let top: Vec<&[u8]> = t.top_files.iter().map(|r| &r.path[..]).collect();
        assert_eq!(top, [&b"/r/g"[..], b"/r/h"]);
        // By allocation, the one file with blocks comes first.
        keep_top(&mut t.top_files, 1, Measure::Allocated);
        assert_eq!(t.top_files[0].path, b"/r/g", "ties on blocks go by bytes");
    }
}
