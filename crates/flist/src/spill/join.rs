//! A merge join of two lists by the path of each record relative to its list's root, out of
//! core: what `cmp` (and later `sync`) pair SRC and DEST with when the lists outgrow memory,
//! instead of a table of one side in memory.
//!
//! 1. [`spill_side`]: each rank cuts its share of a list into sorted runs of at most half its
//!    limit (the first phase of [`super::sort_list_file`], fed from a list in memory), with
//!    weighted samples. Sorting by path sorts by relative path: the root is a prefix of every
//!    path of the list.
//! 2. [`join`]: `size - 1` splitters from the samples of both lists, as relative paths, so that
//!    rank `r` gets the same range of relative paths of both; each side is merged and sent to
//!    the ranks of its buckets in bounded rounds ([`super::sort`]'s exchange), each rank keeping
//!    a run per sender.
//! 3. [`Joined::each`]: one pass over the two merged streams, in relative-path order, yields
//!    each path of one side only and each pair, holding a block per run.

use super::dir::{SpillDir, SpillFile};
use super::merge::Merge;
use super::run::{Run, RunCursor};
use super::sort::SortFileOptions;
use super::sort::{block_bytes, exchange, pick_splitters, samples_per_rank, Reading};
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::record::{Detail, FileList};
use crate::sort::{Field, Key, Order};
use std::cmp::Ordering;
use steal::{Comm, CommExt, ReduceOp};

/// The sort key of both sides: the path (bytes), then type and metadata for equal paths.
pub(super) const BY_PATH: [Key; 1] = [Key {
    field: Field::Name,
    descending: false,
}];

/// `path` relative to `root` (`""` for the root itself), as `cmp` and `sync` pair paths.
pub fn rel_to<'a>(root: &[u8], path: &'a [u8]) -> &'a [u8] {
    let rest = path.strip_prefix(root).unwrap_or(path);
    rest.strip_prefix(b"/").unwrap_or(rest)
}

/// One list of a join, this rank's share cut into sorted runs in a spill file.
#[derive(Debug)]
pub struct JoinSide {
    pub(super) root: Vec<u8>,
    pub(super) file: Option<SpillFile>,
    pub(super) runs: Vec<Run>,
    pub(super) samples: FileList,
    pub(super) weights: Vec<u64>,
    /// The list's user table (for lists written from the join).
    pub users: IdTable,
    /// The list's group table.
    pub groups: IdTable,
}

impl JoinSide {
    /// The list's root, as given.
    pub fn root(&self) -> &[u8] {
        &self.root
    }
}

/// Cut this rank's share `list` (a stat list of the tree `root`, each path `root` or below it)
/// into runs sorted by path of at most about `limit / 2` bytes each, in a spill file of `dir`
/// (collective: a failure on any rank, a full TMPDIR, is every rank's error). The list is
/// consumed: its records leave memory run by run.
pub fn spill_side(
    comm: &dyn Comm,
    list: FileList,
    root: &[u8],
    limit: u64,
    dir: &SpillDir,
) -> Result<JoinSide> {
    let budget = limit / 2;
    let runs = (list.heap_bytes() as u64).div_ceil(budget.max(1));
    // The samples are held (and gathered from every rank, for both sides) too: at most about
    // an eighth of the limit of them, taking a record for 128 bytes.
    let samples = (samples_per_rank(comm.size()) as u64).min((limit / 8 / 128).max(16));
    let per_run = (samples / runs.max(1)).max(1) as usize;
    let (users, groups) = (list.users.clone(), list.groups.clone());
    let order = Order::new(&BY_PATH, &users, &groups);
    let mut reading = Reading::with(dir, budget, per_run);
    let local: Result<()> = (|| {
        for i in 0..list.len() {
            reading.buf.push_from(&list, i);
            if reading.full() {
                reading.spill(&order)?;
            }
        }
        if !reading.buf.is_empty() {
            reading.spill(&order)?;
        }
        Ok(())
    })();
    drop(list);
    comm.agree(local)?;
    Ok(JoinSide {
        root: root.to_vec(),
        file: reading.spill.take(),
        runs: std::mem::take(&mut reading.runs),
        samples: std::mem::replace(&mut reading.samples, FileList::new(Detail::Stat)),
        weights: std::mem::take(&mut reading.weights),
        users,
        groups,
    })
}

/// What [`join`] needs besides the sides.
#[derive(Clone, Copy, Debug)]
pub struct JoinOptions<'a> {
    /// Bytes of memory this rank may hold for records (see [`super::MemoryLimit`]).
    pub limit: u64,
    /// Where spill files go.
    pub dir: &'a SpillDir,
}

/// Both sides of a join on this rank: the records of its range of relative paths, as runs
/// (one per sending rank) of each side, sorted by path.
#[derive(Debug)]
pub struct Joined {
    sides: [(Vec<u8>, SpillFile, Vec<Run>); 2],
    /// The relative paths that start the ranges of ranks 1, 2... (`None`: that rank and the
    /// later ones get nothing).
    splitters: Vec<Option<Vec<u8>>>,
    limit: u64,
    /// Sorted runs written by all ranks (both sides, before the exchange).
    pub runs: u64,
    /// Bytes written to spill files by all ranks (both sides, runs and the exchange).
    pub spill_bytes: u64,
    /// The most any one rank wrote to spill files.
    pub spill_bytes_max_rank: u64,
    /// Bytes this rank wrote to spill files.
    pub spill_bytes_this_rank: u64,
}

/// One step of [`Joined::each`]: a record (a list and an index into it) of one side only, or
/// the records of both sides with the same relative path.
#[derive(Clone, Copy, Debug)]
pub enum Joint<'a> {
    /// Only the first side (`a` of [`join`]) has the path.
    OnlyA(&'a FileList, usize),
    /// Only the second side has it.
    OnlyB(&'a FileList, usize),
    /// Both have it: the first side's record, then the second's.
    Both((&'a FileList, usize), (&'a FileList, usize)),
}

/// Bring the records of `a` and `b` with the same relative path to one rank, each rank a
/// range of relative paths (splitters from the samples of both), within `options.limit` per
/// rank. Collective; a failure on any rank (a full TMPDIR) is every rank's error.
pub fn join(
    comm: &dyn Comm,
    a: JoinSide,
    b: JoinSide,
    options: &JoinOptions<'_>,
) -> Result<Joined> {
    // The samples of both sides as relative paths: one order for both.
    let mut samples = FileList::new(Detail::Stat);
    let mut weights = Vec::new();
    for side in [&a, &b] {
        for i in 0..side.samples.len() {
            let meta = side.samples.meta(i);
            samples.push(
                rel_to(&side.root, side.samples.path(i)),
                side.samples.kind(i),
                meta,
            );
        }
        weights.extend_from_slice(&side.weights);
    }
    let none = IdTable::default();
    let order = Order::new(&BY_PATH, &none, &none);
    let pivots = pick_splitters(comm, &samples, &weights, &order);
    drop(samples);
    let sort_options = SortFileOptions {
        keys: &BY_PATH,
        limit: options.limit,
        dir: options.dir,
        stop: None,
    };
    let never = || false;
    let unused = || Error::Invalid("join interrupted".into());
    let mut sides = Vec::with_capacity(2);
    let mut sums = [0u64; 2];
    for side in [a, b] {
        // A rank whose share was empty still takes part, with no run.
        let made = options.dir.create().and_then(|received| {
            let runs_file = match side.file {
                Some(f) => f,
                None => options.dir.create()?,
            };
            Ok((received, runs_file))
        });
        let (received, runs_file) = comm.agree(made)?;
        let root = side.root;
        // A record belongs past splitter `k` when its relative path is not below it: records
        // of both sides with one relative path go to one rank, whatever their type.
        let past = |list: &FileList, i: usize, k: usize| {
            pivots[k]
                .as_ref()
                .is_some_and(|p| rel_to(&root, list.path(i)) >= p.path(0))
        };
        sums[0] += side.runs.len() as u64;
        let got = exchange(
            comm,
            &runs_file,
            side.runs,
            &received,
            &past,
            &order,
            &sort_options,
            &never,
            &unused,
        );
        sums[1] += runs_file.len();
        drop(runs_file);
        let runs = got?;
        sides.push((root, received, runs));
    }
    let mine = sums[1] + sides.iter().map(|s| s.1.len()).sum::<u64>();
    let mut total = [sums[0], mine];
    comm.allreduce(&mut total, ReduceOp::Sum);
    let mut sides = sides.into_iter();
    let (first, second) = (sides.next().expect("a"), sides.next().expect("b"));
    Ok(Joined {
        sides: [first, second],
        splitters: pivots
            .iter()
            .map(|p| p.as_ref().map(|p| p.path(0).to_vec()))
            .collect(),
        limit: options.limit,
        runs: total[0],
        spill_bytes: total[1],
        spill_bytes_max_rank: comm.max(mine),
        spill_bytes_this_rank: mine,
    })
}

/// The rank whose range holds the relative path `rel`, for ranges starting at `splitters`
/// ([`Joined::splitters`]): where [`join`] sent the records of `rel`.
pub fn rank_of(splitters: &[Option<Vec<u8>>], rel: &[u8]) -> usize {
    splitters
        .iter()
        .take_while(|s| s.as_deref().is_some_and(|s| rel >= s))
        .count()
}

impl Joined {
    /// The relative paths that start the ranges of ranks 1, 2... (see [`rank_of`]).
    pub fn splitters(&self) -> &[Option<Vec<u8>>] {
        &self.splitters
    }

    /// Records of this rank's range, of each side.
    pub fn records(&self) -> [u64; 2] {
        self.sides
            .each_ref()
            .map(|s| s.2.iter().map(|r| r.records).sum())
    }

    /// Call `f` with every path of this rank's range in relative-path order: each record of one
    /// side only and each pair. Local; holds a block of each received run (a quarter of the
    /// limit over them). Stops at the first error of `f` or of reading the runs.
    pub fn each(&self, mut f: impl FnMut(Joint<'_>) -> Result<()>) -> Result<()> {
        let none = IdTable::default();
        let order = Order::new(&BY_PATH, &none, &none);
        let runs = self.sides.iter().map(|s| s.2.len()).sum();
        let block = block_bytes(self.limit, runs);
        let (mut ma, mut mb) = (
            merged(&self.sides[0].1, &self.sides[0].2, &order, block)?,
            merged(&self.sides[1].1, &self.sides[1].2, &order, block)?,
        );
        let (ra, rb) = (&self.sides[0].0, &self.sides[1].0);
        loop {
            // Which streams advance: (a, b).
            let step = match (ma.peek(), mb.peek()) {
                (None, None) => return Ok(()),
                (Some(x), None) => {
                    f(Joint::OnlyA(x.0, x.1))?;
                    (true, false)
                }
                (None, Some(y)) => {
                    f(Joint::OnlyB(y.0, y.1))?;
                    (false, true)
                }
                (Some(x), Some(y)) => {
                    match rel_to(ra, x.0.path(x.1)).cmp(rel_to(rb, y.0.path(y.1))) {
                        Ordering::Less => {
                            f(Joint::OnlyA(x.0, x.1))?;
                            (true, false)
                        }
                        Ordering::Greater => {
                            f(Joint::OnlyB(y.0, y.1))?;
                            (false, true)
                        }
                        Ordering::Equal => {
                            f(Joint::Both(x, y))?;
                            (true, true)
                        }
                    }
                }
            };
            if step.0 {
                ma.advance()?;
            }
            if step.1 {
                mb.advance()?;
            }
        }
    }
}

/// The merge of `runs` of `file`, reading blocks of `block` bytes.
fn merged<'a>(
    file: &'a SpillFile,
    runs: &[Run],
    order: &'a Order<'a>,
    block: usize,
) -> Result<Merge<'a>> {
    let cursors = runs
        .iter()
        .map(|r| RunCursor::new(r.clone(), Detail::Stat, block))
        .collect();
    Merge::new(file, order, cursors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Meta;
    use std::collections::BTreeMap;
    use std::os::unix::ffi::OsStrExt;

    /// A tree's list under `root`: relative paths `names` (some not UTF-8), sizes by name.
    fn tree(root: &[u8], names: &[Vec<u8>], rank: usize, ranks: usize) -> FileList {
        let mut l = FileList::new(Detail::Stat);
        for (k, n) in names.iter().enumerate().filter(|(k, _)| k % ranks == rank) {
            let path = if n.is_empty() {
                root.to_vec()
            } else {
                [root, b"/", n].concat()
            };
            let dir = n.is_empty() || k % 9 == 0;
            let meta = Meta {
                mode: if dir { 0o040755 } else { 0o100644 },
                size: n.len() as u64,
                ..Meta::default()
            };
            l.push(&path, meta.file_type(), Some(meta));
        }
        l
    }

    #[test]
    fn the_join_pairs_every_common_path_once_and_keeps_the_others_at_1_2_3_ranks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SpillDir::new(Some(tmp.path().as_os_str().as_bytes()));
        let name = |i: u64| {
            let mut n = format!("d{}/f{i:05}", i % 7).into_bytes();
            if i % 13 == 0 {
                n.extend_from_slice(b"\xff");
            }
            n
        };
        // Source: 0..900 and the root; destination: 300..1200 and the root (another root:
        // relative paths are what pair).
        let src: Vec<Vec<u8>> = std::iter::once(Vec::new())
            .chain((0..900).map(name))
            .collect();
        let dst: Vec<Vec<u8>> = std::iter::once(Vec::new())
            .chain((300..1200).map(name))
            .collect();
        for ranks in [1, 2, 3] {
            let got = steal::local::run(ranks, |comm| {
                let (r, n) = (comm.rank(), comm.size());
                let a =
                    spill_side(comm, tree(b"/src", &src, r, n), b"/src", 4 << 10, &dir).unwrap();
                // All of DEST on rank 0: the other ranks' shares are empty.
                let mine = if r == 0 {
                    tree(b"/x/dst", &dst, 0, 1)
                } else {
                    FileList::new(Detail::Stat)
                };
                let b = spill_side(comm, mine, b"/x/dst", 4 << 10, &dir).unwrap();
                let opts = JoinOptions {
                    limit: 4 << 10,
                    dir: &dir,
                };
                let joined = join(comm, a, b, &opts).unwrap();
                assert!(joined.runs > 4 && joined.spill_bytes > 0, "{joined:?}");
                let splitters = joined.splitters().to_vec();
                let mut seen = Vec::new();
                let mut last: Option<Vec<u8>> = None;
                joined
                    .each(|j| {
                        let (tag, rel) = match j {
                            Joint::OnlyA(l, i) => ('a', rel_to(b"/src", l.path(i)).to_vec()),
                            Joint::OnlyB(l, i) => ('b', rel_to(b"/x/dst", l.path(i)).to_vec()),
                            Joint::Both((l, i), (m, k)) => {
                                let (x, y) =
                                    (rel_to(b"/src", l.path(i)), rel_to(b"/x/dst", m.path(k)));
                                assert_eq!(x, y);
                                ('2', x.to_vec())
                            }
                        };
                        assert!(last.as_ref().is_none_or(|p| *p < rel), "in order");
                        assert_eq!(rank_of(&splitters, &rel), comm.rank(), "{rel:?}");
                        last = Some(rel.clone());
                        seen.push((rel, tag));
                        Ok(())
                    })
                    .unwrap();
                seen
            });
            let mut all = BTreeMap::new();
            for (rel, tag) in got.into_iter().flatten() {
                assert!(all.insert(rel.clone(), tag).is_none(), "{rel:?} twice");
            }
            let want: BTreeMap<Vec<u8>, char> = src
                .iter()
                .chain(&dst)
                .map(|n| {
                    let tag = match (src.contains(n), dst.contains(n)) {
                        (true, true) => '2',
                        (true, false) => 'a',
                        _ => 'b',
                    };
                    (n.clone(), tag)
                })
                .collect();
            assert_eq!(all, want, "at {ranks} ranks");
            assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn relative_paths_drop_the_root_and_its_slash() {
        assert_eq!(rel_to(b"/a", b"/a"), b"");
        assert_eq!(rel_to(b"/a", b"/a/b/c"), b"b/c");
        assert_eq!(rel_to(b"/", b"/b"), b"b");
        assert_eq!(rel_to(b"/", b"/"), b"");
    }
}
