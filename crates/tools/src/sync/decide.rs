//! This rank's plan, in named steps: gather the type conflicts of all ranks, classify each
//! source entry ([`classify`]) and apply the decision to the plan, gather the directories that
//! source entries of another type replace, then classify what only DEST has.

use super::classify::{self, classify, Decision, Make, Policy};
use super::{
    has_journal, pair_states, projids, resumable, same_inode, xattrs, Action, Actions, Conflict,
    Decisions, Options,
};
use crate::engine::compare_expr::{State, States};
use crate::engine::copy::journal::{self, Resumable};
use crate::engine::copy::meta::Differences;
use crate::engine::copy::resume::Journals;
use crate::engine::copy::{Mapping, Plan};
use crate::engine::pairing::{contents_differ, index_by_rel, link_target, rdev, PathIndex};
use flist::path::is_prefix;
use flist::record::Entry;
use flist::spill::{OverflowList, SpillDir};
use flist::walk::stat_path;
use flist::{Detail, FileList, FileType, Meta};
use std::collections::{HashMap, HashSet};
use steal::typed::ByteStrings;
use steal::{Comm, CommExt};

/// What [`decide`] plans from.
pub(super) struct Inputs<'a> {
    pub src: &'a FileList,
    pub members: &'a FileList,
    pub firsts: &'a [(Vec<u8>, Vec<u8>)],
    pub dest: &'a FileList,
    pub map: &'a Mapping,
    pub dest_map: &'a Mapping,
    /// DEST as the sync uses it ([`super::Paths::dest`]).
    pub dest_root: &'a [u8],
    pub link_dest: Option<&'a [u8]>,
    /// The file system DEST is on ([`super::Paths::dest_dev`]): a `--link-dest` file elsewhere
    /// can't be linked and is copied.
    pub dest_dev: u64,
    /// DEST's root, opened before its walk: journals are read beneath it.
    pub dest_roots: &'a flist::beneath::Roots,
    /// The source walk was complete: what SRC lacks may be deleted.
    pub delete_allowed: bool,
    pub args: &'a Options,
}

/// Compare this rank's share of paths and plan. Collective (all-gathers of the type conflicts,
/// beneath which nothing is synced, and of replaced directories, whose destination subtrees
/// must go).
pub(super) fn decide(comm: &dyn Comm, inp: &Inputs) -> Decisions {
    let by_rel = index_by_rel(inp.dest, inp.dest_map);
    let conflicts = gather_conflicts(comm, inp, &by_rel);
    let mut planner = Planner::new(inp);
    plan_sources(&mut planner, inp, &by_rel, &conflicts);
    let replaced = planner.share_replaced(comm);
    plan_dest_only(&mut planner, inp, &replaced);
    planner.finish(0)
}

/// The decision inputs common to every path of the run.
pub(super) fn policy(inp: &Inputs) -> Policy {
    Policy {
        delete: inp.args.delete,
        delete_allowed: inp.delete_allowed,
        contents: inp.args.contents,
        dryrun: inp.args.dryrun,
        link_dest: inp.link_dest.is_some(),
        journal_min: journal::min_bytes(),
    }
}

/// The DEST paths of type conflicts on every rank (none with `--delete`, which replaces).
pub(super) struct Conflicts(HashSet<Vec<u8>>);

impl Conflicts {
    /// The conflicts at the DEST paths `local` of this rank and those of every other rank.
    /// Collective.
    pub(super) fn gather(comm: &dyn Comm, local: Vec<Vec<u8>>) -> Conflicts {
        Conflicts(all_paths(comm, local).collect())
    }

    /// A source entry of `src_kind` over a DEST entry of `dest_kind` is a type conflict, left
    /// as it is (only without `--delete`, which replaces).
    pub(super) fn between(args: &Options, src_kind: FileType, dest_kind: FileType) -> bool {
        !args.delete && src_kind != dest_kind
    }

    /// `path` is a conflict or lies beneath one.
    fn covers(&self, path: &[u8]) -> bool {
        !self.0.is_empty() && (self.0.contains(path) || self.beneath(path))
    }

    /// `path` lies strictly beneath a conflict.
    fn beneath(&self, path: &[u8]) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let mut p = path;
        while let Some(i) = p.iter().rposition(|&b| b == b'/') {
            p = &p[..i];
            if self.0.contains(p) {
                return true;
            }
        }
        false
    }
}

/// Step 1 (collective): without --delete a type conflict is left as it is, and so is everything
/// beneath it: a source directory's entries would otherwise land in whatever DEST has there (a
/// file, or a symlink to anywhere). Every rank learns every conflict.
fn gather_conflicts(comm: &dyn Comm, inp: &Inputs, by_rel: &PathIndex) -> Conflicts {
    let dest_rel = |i: usize| inp.dest_map.rel(inp.dest.path(i));
    let mut local = Vec::new();
    if !inp.args.delete {
        for list in [inp.src, inp.members] {
            for e in list.iter() {
                if let Some(i) = by_rel.find(inp.map.rel(e.path), dest_rel) {
                    if Conflicts::between(inp.args, e.kind, inp.dest.kind(i)) {
                        local.push(inp.map.dest(e.path));
                    }
                }
            }
        }
    }
    Conflicts::gather(comm, local)
}

/// The paths `local` of every rank, in rank order. Collective.
fn all_paths(comm: &dyn Comm, local: Vec<Vec<u8>>) -> impl Iterator<Item = Vec<u8>> {
    comm.all_gather(&ByteStrings(local))
        .into_iter()
        .flat_map(|ByteStrings(paths)| paths)
}

/// Step 2: classify every source entry (of the source list, then of the hard-link members
/// list) against its DEST entry, and apply the decisions.
fn plan_sources(planner: &mut Planner, inp: &Inputs, by_rel: &PathIndex, conflicts: &Conflicts) {
    let policy = policy(inp);
    let dest_rel = |i: usize| inp.dest_map.rel(inp.dest.path(i));
    let first_of: HashMap<&[u8], &[u8]> = inp
        .firsts
        .iter()
        .map(|(f, m)| (m.as_slice(), f.as_slice()))
        .collect();
    // -X: which pairs of equal data have other xattrs (by source and members index).
    let xattr_opts = xattrs::compared(&inp.args.io);
    let same_data = |e: Entry<'_>| {
        let i = by_rel.find(inp.map.rel(e.path), dest_rel)?;
        let (m, d) = (e.meta?, inp.dest.meta(i)?);
        same_data(e.kind, &m, &d).then(|| inp.map.dest(e.path))
    };
    let xattrs_differ =
        [inp.src, inp.members].map(|l| xattrs::differing(l, xattr_opts.as_ref(), same_data));
    // Project IDs: read where the sources' file system has them.
    let projids_read = projids::compared(&inp.map.source_roots());
    let projids_differ =
        [inp.src, inp.members].map(|l| projids::differing(l, projids_read, same_data));
    for (list, in_members) in [(inp.src, false), (inp.members, true)] {
        for (index, e) in list.iter().enumerate() {
            let dest = by_rel.find(inp.map.rel(e.path), dest_rel).map(|i| {
                planner.seen[i] = true;
                (inp.dest.path(i), inp.dest.meta(i).expect("stat list"))
            });
            let flag =
                |of: &[Vec<bool>; 2]| of[usize::from(in_members)].get(index).is_some_and(|&d| d);
            let source = SourceEntry {
                entry: e,
                slot: Slot::Listed { index, in_members },
                // A hard link's group's first entry (members only).
                first: in_members.then(|| first_of[e.path]),
                dest,
                xattrs_differ: flag(&xattrs_differ),
                projid_differs: flag(&projids_differ),
            };
            planner.source(&policy, conflicts, source);
        }
    }
}

/// Step 4: classify what only DEST has: kept, deleted (`--delete`, or beneath a replaced
/// directory), or a delete refused after an incomplete source walk.
fn plan_dest_only(planner: &mut Planner, inp: &Inputs, replaced: &[Vec<u8>]) {
    let policy = policy(inp);
    for i in 0..inp.dest.len() {
        if !planner.seen[i] {
            planner.dest_only(&policy, inp.dest.entry(i), replaced);
        }
    }
}

/// The data of a source entry (walked as `kind`, `m`) and of its DEST entry `d` are equal by
/// what the walks tell (type; for a regular file, size and mtime): their extended attributes
/// and project IDs are worth comparing.
pub(super) fn same_data(kind: FileType, m: &Meta, d: &Meta) -> bool {
    d.file_type() == kind
        && (kind != FileType::File || (d.size == m.size && !Differences::between(m, d, kind).mtime))
}

/// Where a source record being planned comes from: what its creation takes.
#[derive(Clone, Copy)]
pub(super) enum Slot {
    /// An index in the source list (or the hard-link members list) in memory: the record is
    /// taken from the list once the plan is made (`Decisions::create_from`).
    Listed { index: usize, in_members: bool },
    /// A record streamed from the merge join: copied into `plan.create` at once.
    Streamed,
}

/// One source entry to plan, with what DEST has at its path and the facts read for it.
pub(super) struct SourceEntry<'a> {
    pub entry: Entry<'a>,
    pub slot: Slot,
    /// The source path of its hard-link group's first entry (members only).
    pub first: Option<&'a [u8]>,
    /// DEST's entry at its path: its path and walked metadata.
    pub dest: Option<(&'a [u8], Meta)>,
    /// `-X`: its data equals DEST's but their extended attributes differ.
    pub xattrs_differ: bool,
    /// Its data equals DEST's but their project IDs differ.
    pub projid_differs: bool,
}

/// The file system's answers for one pair ([`classify::Probe`]).
struct FsProbe<'a> {
    inp: &'a Inputs<'a>,
    /// The source path.
    src: &'a [u8],
    /// Its DEST path.
    dst: &'a [u8],
    /// Its path relative to SRC.
    rel: &'a [u8],
    /// The source's walked metadata.
    meta: Meta,
    /// The source path of its hard-link group's first entry (members only).
    first: Option<&'a [u8]>,
    /// DEST's walked metadata, when DEST has the path.
    dest_meta: Option<Meta>,
}

impl classify::Probe for FsProbe<'_> {
    fn link_targets_differ(&self) -> bool {
        link_target(self.src).ok() != link_target(self.dst).ok()
    }
    fn rdevs_differ(&self) -> bool {
        rdev(self.src) != rdev(self.dst)
    }
    fn has_journal(&self) -> bool {
        has_journal(self.inp.dest_roots, self.inp.map, self.dst)
    }
    fn same_inode_as_first(&self) -> bool {
        match (self.first, &self.dest_meta) {
            (Some(f), Some(d)) => same_inode(&self.inp.map.dest(f), d),
            _ => false,
        }
    }
    fn contents_differ(&self) -> bool {
        contents_differ(self.src, self.dst).unwrap_or(true)
    }
    fn resumable(&self) -> Option<Resumable> {
        resumable(
            self.inp.dest_roots,
            self.inp.map,
            self.dst,
            self.src,
            &self.meta,
        )
    }
    fn link_dest_match(&self) -> Option<Vec<u8>> {
        let ld = self.inp.link_dest?;
        let m = &self.meta;
        let candidate = [ld, b"/", self.rel].concat();
        let same = stat_path(&candidate, false).ok().is_some_and(|st| {
            let c = Meta::from_stat(&st);
            // Another file system: no hard link possible (EXDEV), copy.
            c.dev == self.inp.dest_dev
                && c.file_type() == FileType::File
                && c.size == m.size
                && !Differences::between(m, &c, FileType::File).any()
        }) && (!self.inp.args.contents
            // -c compares bytes, for DIR's files too (as rsync -c does): a link would give
            // DEST the other bytes under the source's name.
            || matches!(contents_differ(self.src, &candidate), Ok(false)));
        same.then_some(candidate)
    }
}

/// The probe of a path only DEST has: its decision needs no file system fact.
struct NoProbe;

impl classify::Probe for NoProbe {
    fn link_targets_differ(&self) -> bool {
        false
    }
    fn rdevs_differ(&self) -> bool {
        false
    }
    fn has_journal(&self) -> bool {
        false
    }
    fn same_inode_as_first(&self) -> bool {
        false
    }
    fn contents_differ(&self) -> bool {
        false
    }
    fn resumable(&self) -> Option<Resumable> {
        None
    }
    fn link_dest_match(&self) -> Option<Vec<u8>> {
        None
    }
}

/// One source entry being planned.
struct At<'a> {
    entry: &'a Entry<'a>,
    meta: Meta,
    /// Where its record comes from.
    slot: Slot,
    /// The source path of its hard-link group's first entry (members only).
    first: Option<&'a [u8]>,
    dst_path: Vec<u8>,
    /// DEST's entry there: its path and its metadata.
    dest: Option<(&'a [u8], Meta)>,
}

/// The plan being built from the decisions.
pub(super) struct Planner<'a> {
    inp: &'a Inputs<'a>,
    /// The decisions so far (its `plan` is completed by `finish`).
    out: Decisions,
    /// Which DEST entries a source entry paired with.
    seen: Vec<bool>,
    /// DEST directories replaced by a source entry of another type.
    replaced_dirs: Vec<Vec<u8>>,
    /// The records `plan.fix_meta` indexes.
    fix_meta: FileList,
    /// Partial files resumed, by source path.
    resumes: HashMap<Vec<u8>, Resumable>,
    /// Beyond the memory limit: the streamed entries to create but directories, held up to
    /// a budget and written out beyond it ([`Planner::spill_to`]).
    create_more: Option<OverflowList>,
}

impl<'a> Planner<'a> {
    pub(super) fn new(inp: &'a Inputs<'a>) -> Planner<'a> {
        Planner {
            inp,
            out: Decisions {
                plan: Plan {
                    dirs_only_if_differ: true,
                    ..Plan::default()
                },
                create_from: [Vec::new(), Vec::new()],
                delete: FileList::new(Detail::Stat),
                unlink_first: FileList::new(Detail::Stat),
                stale_journals: Vec::new(),
                replaced_dirs: Vec::new(),
                conflicts: Vec::new(),
                actions: Actions::new(inp.dest_root),
                bytes: 0,
                refused_deletes: 0,
                matched: inp
                    .args
                    .output
                    .iter()
                    .map(|_| inp.src.empty_like())
                    .collect(),
            },
            seen: vec![false; inp.dest.len()],
            replaced_dirs: Vec::new(),
            fix_meta: FileList::new(Detail::Stat),
            resumes: HashMap::new(),
            create_more: None,
        }
    }

    /// Beyond the memory limit: what is created (but directories, which the copy makes
    /// first) and the actions are held up to `budget` bytes of records each, the rest written
    /// out to spill files of `dir`, so that the plan of a sync into an empty DEST does not
    /// hold the tree.
    pub(super) fn spill_to(&mut self, budget: u64, dir: &SpillDir) {
        self.create_more = Some(OverflowList::spilling(Detail::Stat, budget, dir));
        self.out.actions = Actions::spilling(self.inp.dest_root, budget, dir);
    }

    /// Bytes written to spill files by [`Planner::spill_to`]'s lists on this rank.
    pub(super) fn spill_bytes(&self) -> u64 {
        self.create_more
            .as_ref()
            .map_or(0, OverflowList::spill_bytes)
            + self.out.actions.spill_bytes()
    }

    /// The first failure to write what [`Planner::spill_to`] spills (a full TMPDIR).
    pub(super) fn spill_error(&mut self) -> flist::error::Result<()> {
        if let Some(more) = &mut self.create_more {
            more.finish()?;
        }
        self.out.actions.finish()
    }

    /// Classify the source entry `s` against its DEST entry and apply the decision: the one
    /// place a source entry is decided, for the table in memory and the merge join alike.
    pub(super) fn source(&mut self, policy: &Policy, conflicts: &Conflicts, s: SourceEntry) {
        let inp = self.inp;
        let e = s.entry;
        let m = e.meta.expect("stat list");
        let rel = inp.map.rel(e.path);
        let dst_path = inp.map.dest(e.path);
        // A hard link whose group's first entry was left (a conflict, or beneath one) would
        // be a link to whatever DEST has there: copy it instead.
        let member = s.first.is_some_and(|f| !conflicts.covers(&inp.map.dest(f)));
        let source = classify::Source {
            kind: e.kind,
            meta: m,
            member,
            xattrs_differ: s.xattrs_differ,
            projid_differs: s.projid_differs,
            beneath_conflict: conflicts.beneath(&dst_path),
        };
        let dest = s.dest.map(|(_, meta)| classify::Dest {
            meta,
            below_replaced: false,
        });
        let probe = FsProbe {
            inp,
            src: e.path,
            dst: &dst_path,
            rel,
            meta: m,
            first: s.first,
            dest_meta: s.dest.map(|(_, d)| d),
        };
        let decision = classify(Some(&source), dest.as_ref(), policy, &probe);
        if decision == Decision::Skip {
            return;
        }
        if e.kind == FileType::Dir && decision != Decision::Conflict {
            self.out.plan.dir_meta.push(e.path, e.kind, Some(m));
        }
        if !inp.args.output.is_empty() {
            let states = match s.dest {
                None => States::only(State::OnlySrc),
                Some((_, d)) => pair_states(e.path, &dst_path, &m, &d, inp.args.contents),
            };
            self.select(&states, e.path, e.kind, &m);
        }
        let at = At {
            entry: &e,
            meta: m,
            slot: s.slot,
            first: s.first,
            dst_path,
            dest: s.dest,
        };
        self.apply(decision, at);
    }

    /// Classify the entry `d` that only DEST has (`replaced`: the DEST directories of every
    /// rank that source entries of another type replace) and apply the decision.
    pub(super) fn dest_only(&mut self, policy: &Policy, d: Entry, replaced: &[Vec<u8>]) {
        if let Some(dm) = d.meta {
            self.select(&States::only(State::OnlyDest), d.path, d.kind, &dm);
        }
        let dest = classify::Dest {
            meta: d.meta.unwrap_or_default(),
            below_replaced: replaced.iter().any(|r| is_prefix(r, d.path) && r != d.path),
        };
        match classify(None, Some(&dest), policy, &NoProbe) {
            Decision::Delete => {
                self.out.delete.push(d.path, d.kind, d.meta);
                self.out.actions.push(Action::Delete, d.path);
            }
            Decision::RefuseDelete => self.out.refused_deletes += 1,
            _ => {}
        }
    }

    /// `-o EXPR:FILE`: keep the entry in each output whose expression `states` match.
    fn select(&mut self, states: &States, path: &[u8], kind: FileType, meta: &Meta) {
        for (o, list) in self.inp.args.output.iter().zip(self.out.matched.iter_mut()) {
            if o.matches(states) {
                list.push(path, kind, Some(*meta));
            }
        }
    }

    /// Put `decision` for the entry `at` into the plan and the action list.
    fn apply(&mut self, decision: Decision, at: At) {
        let e = at.entry;
        let dst = &at.dst_path[..];
        match decision {
            Decision::Skip | Decision::Same | Decision::Keep => {}
            // Only DEST's entries are deleted or refused, in `plan_dest_only`.
            Decision::Delete | Decision::RefuseDelete => {}
            Decision::Create(how) => {
                let action = self.make(how, &at, false);
                self.out.actions.push(action, dst);
            }
            Decision::Conflict => {
                let (_, d) = at.dest.expect("a conflict has a DEST entry");
                self.out.conflicts.push(Conflict {
                    dest: at.dst_path.clone(),
                    src_kind: e.kind,
                    dest_kind: d.file_type(),
                });
            }
            Decision::Replace(how) => {
                // A type change under --delete: the old entry (with its subtree) goes, the new
                // one comes.
                let (old, d) = at.dest.expect("a replacement has a DEST entry");
                self.out.delete.push(old, d.file_type(), Some(d));
                self.out.actions.push(Action::Delete, old);
                if d.file_type() == FileType::Dir {
                    self.replaced_dirs.push(old.to_vec());
                }
                let action = self.make(how, &at, false);
                self.out.actions.push(action, dst);
            }
            Decision::Resume(r) => {
                self.make(Make::Copy, &at, true);
                self.out.bytes -= r.bytes();
                self.resumes.insert(e.path.to_vec(), r);
                self.out.actions.push(Action::Update, dst);
            }
            Decision::Compare(c) => {
                self.out.plan.compare.push(e.path, e.kind, Some(at.meta));
                if c.dryrun_update {
                    self.out.actions.push(Action::Update, dst);
                    self.out.bytes += at.meta.size;
                } else if c.dryrun_meta {
                    self.out.actions.push(Action::Meta, dst);
                }
                if c.fix_xattrs || c.fix_projid {
                    // The comparison sets the source's xattrs and project ID only where it
                    // rewrites, and removes no xattr: fixed after it. Counted when stat shows
                    // nothing else (the comparison counts those files itself; one whose bytes
                    // differ too counts as updated and as fixed).
                    let only = Differences {
                        xattrs: c.fix_xattrs,
                        projid: c.fix_projid,
                        ..Differences::default()
                    };
                    self.fix(e, at.meta, only);
                }
                if c.count_xattrs_fix {
                    self.out.actions.push(Action::Meta, dst);
                }
            }
            Decision::Update {
                make,
                unlink_first,
                stale_journal,
            } => {
                if unlink_first {
                    let (old, d) = at.dest.expect("an update has a DEST entry");
                    self.out.unlink_first.push(old, FileType::File, Some(d));
                }
                if stale_journal {
                    self.out
                        .stale_journals
                        .push((at.dst_path.clone(), e.path.to_vec()));
                }
                let action = self.make(make, &at, true);
                self.out.actions.push(action, dst);
            }
            Decision::Meta { fix } => {
                self.out.actions.push(Action::Meta, dst);
                if let Some(f) = fix {
                    self.fix(e, at.meta, f);
                }
            }
        }
    }

    /// Plan the data of the entry `at` as `how` says; the action that names it (`existed`:
    /// DEST had it).
    fn make(&mut self, how: Make, at: &At, existed: bool) -> Action {
        let e = at.entry;
        match how {
            Make::LinkToFirst => {
                let first = at.first.expect("a hard link member has a first");
                self.out.plan.links.push((first.to_vec(), e.path.to_vec()));
            }
            Make::LinkDest(candidate) => {
                self.out
                    .plan
                    .external_links
                    .push((candidate, e.path.to_vec()));
                return Action::Link;
            }
            Make::Copy => {
                if e.kind == FileType::File {
                    self.out.bytes += at.meta.size;
                }
                match at.slot {
                    Slot::Listed { index, in_members } => {
                        let index =
                            u32::try_from(index).expect("more than 2^32 records on one rank");
                        self.out.create_from[usize::from(in_members)].push(index);
                    }
                    Slot::Streamed => match &mut self.create_more {
                        Some(more) if e.kind != FileType::Dir => {
                            more.push(e.path, e.kind, Some(at.meta))
                        }
                        _ => self.out.plan.create.push(e.path, e.kind, Some(at.meta)),
                    },
                }
            }
        }
        if existed {
            Action::Update
        } else {
            Action::Create
        }
    }

    /// Fix `what` of the entry's DEST metadata after the data phase.
    fn fix(&mut self, e: &Entry, meta: Meta, what: Differences) {
        self.out.plan.fix_meta.push((self.fix_meta.len(), what));
        self.fix_meta.push(e.path, e.kind, Some(meta));
    }

    /// Step 3 (collective): the DEST directories that source entries of another type replace,
    /// of every rank: their subtrees go with them. This rank's stay in the plan.
    pub(super) fn share_replaced(&mut self, comm: &dyn Comm) -> Vec<Vec<u8>> {
        let mine = std::mem::take(&mut self.replaced_dirs);
        self.out.replaced_dirs = mine.clone();
        all_paths(comm, mine).collect()
    }

    /// The decisions; entries to create beyond the limit are read back in pieces of about
    /// `piece` bytes.
    pub(super) fn finish(self, piece: usize) -> Decisions {
        let mut out = self.out;
        out.plan.fix_meta_list = self.fix_meta;
        out.plan.journals = Journals::Planned(self.resumes);
        out.plan.create_more = self.create_more.map(|more| more.into_pieces(piece));
        out
    }
}
