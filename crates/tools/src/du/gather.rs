//! From every rank's [`Tally`] to the tables of the report, the same on every rank: hard links
//! counted once, subtree sums completed on the rank that owns each directory, the largest
//! directories and files merged over ranks. Each step is collective.

use super::tally::{
    depth_below, keep_top, root_of, Linked, Measure, Ranked, Settings, Tally, Usage, AGES,
};
use flist::distribute::hash_path;
use serde_bytes::{ByteBuf, Bytes};
use std::collections::BTreeMap;
use steal::typed::{each, encode_into, sent};
use steal::{Comm, CommExt, ReduceOp};

/// Every inode with several names counted once, under its name whose bytes sort first: the
/// names go to the rank that owns the inode (a hash of device and inode), which counts the one
/// kept into its tally. Collective.
pub fn count_links(comm: &dyn Comm, tally: &mut Tally, s: &Settings) {
    let linked = std::mem::take(&mut tally.linked);
    let mut sends = vec![Vec::new(); comm.size()];
    for l in &linked {
        let key = [l.dev.to_le_bytes(), l.ino.to_le_bytes()].concat();
        encode_into(
            l,
            &mut sends[(hash_path(&key) % comm.size() as u64) as usize],
        );
    }
    drop(linked);
    let mut mine: Vec<Linked> = Vec::new();
    for part in comm.alltoallv(sends) {
        mine.extend(each::<Linked>(&part).map(sent));
    }
    mine.sort_by(|a, b| (a.dev, a.ino, &a.path).cmp(&(b.dev, b.ino, &b.path)));
    mine.dedup_by(|later, first| (later.dev, later.ino) == (first.dev, first.ino));
    for l in &mine {
        tally.add(s, &l.path, l.meta.file_type(), &l.meta, l.blocks, false);
    }
}

/// Each directory's subtree sum made whole on the rank that owns its path (a hash of it): the
/// partial sums of all ranks added. Returns this rank's directories. Collective.
pub fn complete_dirs(comm: &dyn Comm, tally: &mut Tally) -> Vec<(Vec<u8>, Usage)> {
    let dirs = std::mem::take(&mut tally.dirs);
    let mut sends = vec![Vec::new(); comm.size()];
    for (d, u) in &dirs {
        let owner = (hash_path(d) % comm.size() as u64) as usize;
        encode_into(&(Bytes::new(d), u), &mut sends[owner]);
    }
    drop(dirs);
    let mut whole: BTreeMap<Vec<u8>, Usage> = BTreeMap::new();
    for part in comm.alltoallv(sends) {
        for row in each::<(ByteBuf, Usage)>(&part) {
            let (d, u) = sent(row);
            whole.entry(d.into_vec()).or_default().add(&u);
        }
    }
    whole.into_iter().collect()
}

/// The sums over all ranks of the totals and age buckets (`[total, mtime.., atime..]`).
/// Collective.
pub fn sum_counts(comm: &dyn Comm, tally: &Tally) -> (Usage, [Usage; AGES], [Usage; AGES]) {
    let mut v = Vec::with_capacity(3 * (1 + 2 * AGES));
    for u in std::iter::once(&tally.total)
        .chain(tally.mtime.iter())
        .chain(tally.atime.iter())
    {
        v.extend([u.files, u.bytes, u.blocks]);
    }
    comm.allreduce(&mut v, ReduceOp::Sum);
    let at = |i: usize| Usage {
        files: v[3 * i],
        bytes: v[3 * i + 1],
        blocks: v[3 * i + 2],
    };
    let mtime = std::array::from_fn(|i| at(1 + i));
    let atime = std::array::from_fn(|i| at(1 + AGES + i));
    (at(0), mtime, atime)
}

/// Usage by id over all ranks, largest first (by `measure`, then id). Collective.
pub fn by_id(
    comm: &dyn Comm,
    mine: &std::collections::HashMap<u32, Usage>,
    measure: Measure,
) -> Vec<(u32, Usage)> {
    let rows: Vec<(u32, Usage)> = mine.iter().map(|(k, v)| (*k, *v)).collect();
    let mut all: BTreeMap<u32, Usage> = BTreeMap::new();
    for part in comm.all_gather(&rows) {
        for (id, u) in part {
            all.entry(id).or_default().add(&u);
        }
    }
    let mut out: Vec<(u32, Usage)> = all.into_iter().collect();
    out.sort_by(|a, b| {
        let key = |u: &Usage| (u.measured(measure), u.bytes, u.files);
        key(&b.1).cmp(&key(&a.1)).then(a.0.cmp(&b.0))
    });
    out
}

/// The rows of all ranks, in ranking order, the first `n` kept (`usize::MAX`: all).
/// Collective.
pub fn merge_ranked(comm: &dyn Comm, mine: Vec<Ranked>, n: usize, measure: Measure) -> Vec<Ranked> {
    let mut all: Vec<Ranked> = comm.all_gather(&mine).into_iter().flatten().collect();
    keep_top(&mut all, n, measure);
    all
}

/// The directories of `dirs` (this rank's, complete) at most `depth` below their root, and the
/// `top` largest of them all, each merged over ranks. Collective.
pub fn dir_tables(
    comm: &dyn Comm,
    dirs: &[(Vec<u8>, Usage)],
    s: &Settings,
    depth: usize,
) -> (Vec<(Ranked, usize)>, Vec<Ranked>) {
    let ranked = |(d, u): &(Vec<u8>, Usage)| Ranked {
        path: d.clone(),
        usage: *u,
    };
    let shallow: Vec<Ranked> = dirs
        .iter()
        .filter(|(d, _)| root_of(&s.roots, d).is_some_and(|r| depth_below(r, d) <= depth))
        .map(ranked)
        .collect();
    let mut top: Vec<Ranked> = dirs.iter().map(ranked).collect();
    keep_top(&mut top, s.top, s.measure);
    let shallow = merge_ranked(comm, shallow, usize::MAX, s.measure);
    let with_depth = shallow
        .into_iter()
        .map(|r| {
            let d = root_of(&s.roots, &r.path).map_or(0, |root| depth_below(root, &r.path));
            (r, d)
        })
        .collect();
    (with_depth, merge_ranked(comm, top, s.top, s.measure))
}

/// Whether `a` ranks before `b` (for tests of the order).
#[cfg(test)]
fn before(a: &Ranked, b: &Ranked, m: Measure) -> bool {
    super::tally::rank_order(&a.usage, &a.path, &b.usage, &b.path, m).is_lt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::Meta;

    fn settings() -> Settings {
        Settings {
            roots: vec![b"/r".to_vec()],
            now: 0,
            top: 3,
            measure: Measure::Apparent,
        }
    }

    /// A tree counted on 1, 2 and 3 ranks, its entries dealt round-robin (a directory's entries
    /// on several ranks, a hard link's names too), gives the same tables.
    #[test]
    fn tables_do_not_depend_on_which_rank_holds_what() {
        let file = |size, ino, nlink| Meta {
            mode: 0o100644,
            size,
            ino,
            nlink,
            dev: 9,
            ..Meta::default()
        };
        let dir = Meta {
            mode: 0o040755,
            size: 4096,
            ino: 1,
            dev: 9,
            nlink: 2,
            ..Meta::default()
        };
        let entries: Vec<(&[u8], Meta)> = vec![
            (b"/r", dir),
            (b"/r/a", Meta { ino: 2, ..dir }),
            (b"/r/a/x", file(100, 10, 1)),
            (b"/r/a/y", file(200, 11, 2)),
            (b"/r/b", Meta { ino: 3, ..dir }),
            (b"/r/b/y2", file(200, 11, 2)),
            (b"/r/b/z", file(50, 12, 1)),
            (b"/r/b/c", Meta { ino: 4, ..dir }),
            (b"/r/b/c/w", file(7, 13, 1)),
        ];
        let run = |ranks: usize| {
            let entries = entries.clone();
            steal::local::run(ranks, move |comm| {
                let s = settings();
                let mut t = Tally::default();
                for (i, (p, m)) in entries.iter().enumerate() {
                    if i % comm.size() == comm.rank() {
                        t.add(&s, p, m.file_type(), m, m.size / 512, true);
                    }
                }
                count_links(comm, &mut t, &s);
                let (total, _, _) = sum_counts(comm, &t);
                let top_files = merge_ranked(comm, t.top_files.clone(), 3, s.measure);
                let dirs = complete_dirs(comm, &mut t);
                let (shallow, top) = dir_tables(comm, &dirs, &s, 1);
                (total, top_files, shallow, top)
            })
            .remove(0)
        };
        let one = run(1);
        assert_eq!(one.0.files, 8, "the hard link's inode once");
        assert_eq!(one.0.bytes, 4 * 4096 + 100 + 200 + 50 + 7);
        let paths = |rows: &[Ranked]| rows.iter().map(|r| r.path.clone()).collect::<Vec<_>>();
        assert_eq!(
            paths(&one.1),
            vec![b"/r/a/y".to_vec(), b"/r/a/x".to_vec(), b"/r/b/z".to_vec()],
            "the link under its first name"
        );
        let shallow: Vec<(Vec<u8>, u64, usize)> = one
            .2
            .iter()
            .map(|(r, d)| (r.path.clone(), r.usage.bytes, *d))
            .collect();
        assert_eq!(
            shallow,
            vec![
                (b"/r".to_vec(), 4 * 4096 + 357, 0),
                (b"/r/b".to_vec(), 2 * 4096 + 57, 1),
                (b"/r/a".to_vec(), 4096 + 300, 1),
            ]
        );
        assert_eq!(paths(&one.3)[..2], [b"/r".to_vec(), b"/r/b".to_vec()]);
        assert!(before(&one.3[0], &one.3[1], Measure::Apparent));
        for ranks in [2, 3] {
            assert_eq!(run(ranks), one, "{ranks} ranks");
        }
    }
}
