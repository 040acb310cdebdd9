//! `sync` beyond its memory limit: both walked lists spill to sorted runs and SRC and DEST are
//! paired by a merge join ([`flist::spill::join`]), each rank a range of relative paths,
//! instead of being brought to the ranks their paths hash to and paired by a table in memory.
//!
//! Each joined pair, SRC-only and DEST-only record goes through the same decision code as the
//! table in memory ([`Planner::source`], [`Planner::dest_only`]), in the same steps: the type
//! conflicts of every rank first (a pass over the join), then the source entries, then the
//! DEST directories replaced (gathered), then what only DEST has (a third pass). Only what the
//! plan does is kept in memory (what is created, deleted, fixed, and every directory for its
//! metadata): a sync with nothing to do holds its directories, not its files. The copy
//! engine takes the plan in memory.
//!
//! The walks spill their records as they go ([`walked_src`], and DEST's runs as they are);
//! a tree walked into memory (TMPDIR in a tree) is spilled when it outgrows the budget.
//!
//! Hard links: SRC's files with more than one link are grouped in memory
//! ([`links::group`]; read back from the walk's runs, or taken from the list walked into
//! memory); every record goes into SRC's side, and each (first, member) pair to the rank the
//! join gives the member's path.

use super::decide::{policy, same_data, Conflicts, Inputs, Planner, Slot, SourceEntry};
use super::{projids, xattrs, Decisions};
use crate::engine::copy::links;
use crate::engine::pairing::exchange_pairs;
use flist::path::display;
use flist::spill::join::rel_to;
use flist::spill::{join, rank_of, spill_side, JoinOptions, JoinSide, Joint, SpillDir, WalkRuns};
use flist::{Detail, FileList};
use std::collections::HashMap;
use steal::{Comm, CommExt};

pub use crate::cmp::spilled::Spilled;

/// (first member's source path, member's source path): a hard link to make.
type Link = (Vec<u8>, Vec<u8>);

/// SRC's records (hard-link members included) and DEST's, spilled to sorted runs, and the
/// hard links to make.
pub(super) struct Sides {
    pub src: JoinSide,
    pub dest: JoinSide,
    /// (first member's source path, member's source path) of this rank's members.
    pub links: Vec<Link>,
}

/// Spill this rank's share `list` of the tree `root` (one of `trees`: SRC, DEST) to sorted
/// runs for the join, within `limit` bytes. Collective. A spill directory inside either tree
/// is refused (before anything is written).
pub(super) fn spill(
    comm: &dyn Comm,
    list: FileList,
    root: &[u8],
    trees: (&[u8], &[u8]),
    (limit, dir): (u64, &SpillDir),
) -> Result<JoinSide, String> {
    crate::cmp::spilled::refuse_tmpdir_inside(dir.path(), trees.0, trees.1)?;
    spill_side(comm, list, root, limit, dir).map_err(|e| e.to_string())
}

/// Group SRC's hard links and spill its records, the members with the rest. Collective.
pub(super) fn spill_src(
    comm: &dyn Comm,
    list: FileList,
    trees: (&[u8], &[u8]),
    spill_to: (u64, &SpillDir),
) -> Result<(JoinSide, Vec<Link>), String> {
    let links::Groups {
        mut list,
        members,
        links,
    } = links::group(comm, list);
    list.append(members);
    Ok((spill(comm, list, trees.0, trees, spill_to)?, links))
}

/// SRC's records as its walk spilled them (`runs`, of the tree `root`), as the join's side,
/// and the hard links among them: the files with more than one link are read back from the
/// runs and grouped as in memory ([`links::group`]; they alone are held, a few as a rule).
/// Collective; a failure to read the runs is every rank's error.
pub(super) fn walked_src(
    comm: &dyn Comm,
    runs: WalkRuns,
    root: &[u8],
) -> Result<(JoinSide, Vec<Link>), String> {
    let mut linked = FileList::new(Detail::Stat);
    let read = runs.for_each(|l, i| {
        if links::linked(l, i) {
            linked.push_from(l, i);
        }
    });
    comm.agree(read).map_err(|e| e.to_string())?;
    let links = links::group(comm, linked).links;
    Ok((runs.into_join_side(root), links))
}

/// Join the spilled `sides` and plan this rank's range of relative paths with the decision
/// code of the table in memory (`inp`'s lists are empty: the records come from the join).
/// Collective; a failure to read or write a spill file (a full TMPDIR) is every rank's error,
/// returned before anything changed.
pub(super) fn decide(
    comm: &dyn Comm,
    inp: &Inputs,
    sides: Sides,
    (limit, dir): (u64, &SpillDir),
) -> Result<(Decisions, Spilled), String> {
    let Sides { src, dest, links } = sides;
    let src_root = src.root().to_vec();
    let joined = join(comm, src, dest, &JoinOptions { limit, dir }).map_err(|e| e.to_string())?;
    // Each member's first, on the rank the join gave the member's path.
    let firsts = exchange_pairs(comm, links, |(_, m)| {
        rank_of(joined.splitters(), rel_to(&src_root, m))
    });
    let first_of: HashMap<&[u8], &[u8]> = firsts
        .iter()
        .map(|(f, m)| (m.as_slice(), f.as_slice()))
        .collect();
    // Step 1: the type conflicts of every rank.
    let mut local = Vec::new();
    let found = joined.each(|j| {
        if let Joint::Both((l, i), (m, k)) = j {
            if Conflicts::between(inp.args, l.kind(i), m.kind(k)) {
                local.push(inp.map.dest(l.path(i)));
            }
        }
        Ok(())
    });
    comm.agree(found.map_err(|e| e.to_string()))?;
    let conflicts = Conflicts::gather(comm, local);
    // Step 2: every source entry, against DEST's entry at its path.
    let policy = policy(inp);
    let mut planner = Planner::new(inp);
    // What is created and the actions are held up to an eighth of the limit each (the join
    // holds its blocks meanwhile).
    planner.spill_to(limit / 8, dir);
    let xattr_opts = xattrs::compared(&inp.args.io);
    let projids_read = projids::compared(&inp.map.source_roots());
    let planned = joined.each(|j| {
        let ((l, i), dest) = match j {
            Joint::OnlyA(l, i) => ((l, i), None),
            Joint::Both(a, (m, k)) => (a, Some((m.path(k), m.meta(k).expect("stat list")))),
            Joint::OnlyB(..) => return Ok(()),
        };
        let e = l.entry(i);
        let m = e.meta.expect("stat list");
        // Extended attributes and project IDs are compared where the data is the same.
        let same = dest
            .filter(|(_, d)| same_data(e.kind, &m, d))
            .map(|_| inp.map.dest(e.path));
        let xattrs_differ = match (&xattr_opts, &same) {
            (Some(opts), Some(dst)) => xattrs::differ(e.path, dst, opts),
            _ => false,
        };
        let projid_differs =
            projids_read && same.is_some_and(|dst| projids::differ_entry(e.kind, e.path, &dst));
        let source = SourceEntry {
            entry: e,
            slot: Slot::Streamed,
            first: first_of.get(e.path).copied(),
            dest,
            xattrs_differ,
            projid_differs,
        };
        planner.source(&policy, &conflicts, source);
        Ok(())
    });
    comm.agree(planned.map_err(|e| e.to_string()))?;
    // Step 3: the DEST directories replaced on every rank; step 4: what only DEST has.
    let replaced = planner.share_replaced(comm);
    let planned = joined.each(|j| {
        if let Joint::OnlyB(l, i) = j {
            planner.dest_only(&policy, l.entry(i), &replaced);
        }
        Ok(())
    });
    comm.agree(planned.map_err(|e| e.to_string()))?;
    comm.agree(planner.spill_error().map_err(|e| e.to_string()))?;
    // The spill files of the plan count with the join's.
    let mine = joined.spill_bytes_this_rank + planner.spill_bytes();
    let spilled = Spilled {
        runs: joined.runs,
        spill_bytes: comm.sum(mine),
        spill_bytes_max_rank: comm.max(mine),
        tmpdir: display(dir.path()).into_owned(),
    };
    Ok((planner.finish((limit / 8) as usize), spilled))
}
