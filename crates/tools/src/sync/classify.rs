//! What `sync` does with one path, as data: [`classify`] maps what SRC and DEST have there
//! (their walked metadata, plus the few facts only the file system can tell, asked through a
//! [`Probe`] and only when the decision needs them) to a [`Decision`]. It changes nothing and
//! sends nothing: the collectives and the plan around it are in `sync::decide`.

use crate::engine::copy::journal::Resumable;
use crate::engine::copy::meta::Differences;
use flist::{FileType, Meta};

/// The options (and facts of the whole run) a decision depends on.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Policy {
    /// `-D/--delete`: DEST entries SRC lacks go, and so do entries of another type.
    pub delete: bool,
    /// The source walk was complete: what SRC lacks may be deleted.
    pub delete_allowed: bool,
    /// `-c/--contents`: same-size files are compared byte by byte.
    pub contents: bool,
    /// `-n/--dryrun`: a same-size `-c` pair is read now to tell whether it would be rewritten.
    pub dryrun: bool,
    /// `--link-dest DIR` was given.
    pub link_dest: bool,
    /// Files smaller than this (bytes) never keep a journal ([`crate::engine::copy::journal::min_bytes`]).
    pub journal_min: u64,
}

/// The source side of a path.
#[derive(Clone, Copy, Debug)]
pub(super) struct Source {
    /// Its type.
    pub kind: FileType,
    /// Its walked metadata.
    pub meta: Meta,
    /// A hard link of a group whose first entry is synced: made as a link to that first.
    pub member: bool,
    /// `-X`: its extended attributes differ from DEST's (data and type equal).
    pub xattrs_differ: bool,
    /// Its project ID (or a directory's `PROJINHERIT`) differs from DEST's (data and type
    /// equal).
    pub projid_differs: bool,
    /// It lies beneath a type conflict left alone (any rank's): nothing there is synced.
    pub beneath_conflict: bool,
}

/// The destination side of a path.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dest {
    /// Its walked metadata (its type is `meta.file_type()`).
    pub meta: Meta,
    /// It lies beneath a DEST directory that a source entry of another type replaces.
    pub below_replaced: bool,
}

/// What only the file system can tell about a pair, asked lazily (reading contents is costly).
pub(super) trait Probe {
    /// The two symbolic links point at different targets (or one can't be read).
    fn link_targets_differ(&self) -> bool;
    /// The two device nodes have different device numbers.
    fn rdevs_differ(&self) -> bool;
    /// An interrupted copy's journal lies beside the DEST file (its data is incomplete).
    fn has_journal(&self) -> bool;
    /// The DEST file is the inode its hard-link group's first entry has in DEST.
    fn same_inode_as_first(&self) -> bool;
    /// The bytes of the two files differ (or one can't be read).
    fn contents_differ(&self) -> bool;
    /// The journal beside a partial DEST file, when it can be trusted.
    fn resumable(&self) -> Option<Resumable>;
    /// The `--link-dest` file equal to the source one, to hard-link instead of copying.
    fn link_dest_match(&self) -> Option<Vec<u8>>;
}

/// How an entry that DEST lacks (or whose data changes) is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Make {
    /// A hard link to its group's first entry.
    LinkToFirst,
    /// A hard link to this `--link-dest` file.
    LinkDest(Vec<u8>),
    /// Copied from SRC.
    Copy,
}

/// A `-c` pair of same-size files, compared chunk by chunk by the copy engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Compare {
    /// Dry run: the bytes differ (read now), counted as an update.
    pub dryrun_update: bool,
    /// Dry run: the bytes are equal but the metadata differs, counted as a metadata fix.
    pub dryrun_meta: bool,
    /// `-X`: the xattrs differ, fixed after the comparison (which removes none).
    pub fix_xattrs: bool,
    /// The project ID differs, fixed after the comparison (which sets none where the bytes
    /// are equal).
    pub fix_projid: bool,
    /// A real run counts the xattrs or project ID fix as a metadata fix (stat shows nothing
    /// else).
    pub count_xattrs_fix: bool,
}

/// What `sync` does with one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Decision {
    /// Beneath a type conflict: left alone, not even compared.
    Skip,
    /// Only DEST has it, and it stays.
    Keep,
    /// Only DEST has it; `--delete` would remove it but the source walk was incomplete.
    RefuseDelete,
    /// Only DEST has it and it goes (`--delete`, or beneath a replaced directory).
    Delete,
    /// DEST has another type and `--delete` was not given: left alone, reported.
    Conflict,
    /// DEST lacks it: made.
    Create(Make),
    /// DEST has another type under `--delete`: the old entry (and its subtree) goes, the new
    /// one is made.
    Replace(Make),
    /// A partial file whose journal can be trusted: only its missing chunks are copied.
    Resume(Resumable),
    /// `-c`, same size: compared chunk by chunk, only differing chunks rewritten.
    Compare(Compare),
    /// The data differs: made again (a regular file as a new inode, `unlink_first`).
    Update {
        /// How it is made.
        make: Make,
        /// A regular file copied as a new inode: DEST's is unlinked first.
        unlink_first: bool,
        /// A journal lies beside the file unlinked first: it goes with it.
        stale_journal: bool,
    },
    /// Data equal, metadata differs: fixed (`fix` is what the fix pass sets; a directory's
    /// other metadata is set bottom-up at the end, so `None` or xattrs only).
    Meta {
        /// What the fix pass sets, if anything.
        fix: Option<Differences>,
    },
    /// Equal: nothing to do.
    Same,
}

/// Decide what `sync` does with a path that SRC has as `src` and DEST as `dest`.
pub(super) fn classify(
    src: Option<&Source>,
    dest: Option<&Dest>,
    p: &Policy,
    probe: &dyn Probe,
) -> Decision {
    let Some(s) = src else {
        return match dest {
            Some(d) if d.below_replaced || (p.delete && p.delete_allowed) => Decision::Delete,
            Some(_) if p.delete => Decision::RefuseDelete,
            _ => Decision::Keep,
        };
    };
    if s.beneath_conflict {
        return Decision::Skip;
    }
    match dest {
        None => Decision::Create(make(s, p, probe)),
        Some(d) if d.meta.file_type() != s.kind && !p.delete => Decision::Conflict,
        Some(d) if d.meta.file_type() != s.kind => Decision::Replace(make(s, p, probe)),
        Some(d) => same_type(s, &d.meta, p, probe),
    }
}

/// How `s` is made: a link to its group's first, a link into `--link-dest`, or a copy.
fn make(s: &Source, p: &Policy, probe: &dyn Probe) -> Make {
    if s.member {
        return Make::LinkToFirst;
    }
    if s.kind == FileType::File && p.link_dest {
        if let Some(candidate) = probe.link_dest_match() {
            return Make::LinkDest(candidate);
        }
    }
    Make::Copy
}

/// A pair of the same type: resume, compare, update, fix metadata, or nothing.
fn same_type(s: &Source, d: &Meta, p: &Policy, probe: &dyn Probe) -> Decision {
    let (m, file) = (&s.meta, s.kind == FileType::File);
    let diff = Differences {
        xattrs: s.xattrs_differ,
        projid: s.projid_differs,
        ..Differences::between(m, d, s.kind)
    };
    let data_differs = match s.kind {
        FileType::File => d.size != m.size || diff.mtime,
        FileType::Symlink => probe.link_targets_differ(),
        FileType::CharDev | FileType::BlockDev => probe.rdevs_differ(),
        _ => false,
    };
    // A journal beside the destination says its data is incomplete whatever its size and
    // mtime say: an mtime can equal the source's by chance (timestamps come from a coarse
    // clock: a source changed in the tick of the killed copy's last write carries the same one).
    let data_differs = data_differs || (file && d.size >= p.journal_min && probe.has_journal());
    // A hard link of a group is right in DEST only as the same inode as its group's first
    // there: an older DEST may hold it as a file of its own with the same size and mtime but
    // other bytes (or still linked to a first that this run replaces by a new inode when -c
    // finds its bytes differ). It is linked again then; with -c its bytes are compared too, as
    // every other file's are.
    let data_differs = data_differs
        || (s.member
            && file
            && (!probe.same_inode_as_first() || (p.contents && probe.contents_differ())));
    let shared = file && d.nlink > 1 && !s.member;
    let data_differs =
        data_differs || (shared && p.contents && d.size == m.size && probe.contents_differ());
    // A partial file an interrupted copy left with a journal it can trust: only its missing
    // chunks are copied, into the same inode (one link only). Not with --contents: every byte
    // is compared then, the journaled ones too.
    let may_resume = file
        && !p.contents
        && data_differs
        && !s.member
        && !shared
        && !p.link_dest
        && d.nlink == 1
        && d.size <= m.size
        && m.size >= p.journal_min;
    if let Some(r) = may_resume.then(|| probe.resumable()).flatten() {
        return Decision::Resume(r);
    }
    if file && p.contents && d.size == m.size && !s.member && !shared {
        // Same size: compared chunk by chunk and only differing chunks rewritten. A real run
        // counts what it rewrote; a dry run reads both to tell.
        let dryrun_update = p.dryrun && (data_differs || probe.contents_differ());
        let stat_differs = Differences {
            xattrs: false,
            projid: false,
            ..diff
        };
        return Decision::Compare(Compare {
            dryrun_update,
            dryrun_meta: p.dryrun && !dryrun_update && diff.any(),
            fix_xattrs: diff.xattrs,
            fix_projid: diff.projid,
            count_xattrs_fix: (diff.xattrs || diff.projid) && !p.dryrun && !stat_differs.any(),
        });
    }
    if data_differs {
        // A new inode for the new data (as rsync's temporary file and rename): rewriting in
        // place would change every other name of the inode (a --link-dest backup, say),
        // including links made since the walk.
        let unlink_first = file && !s.member;
        return Decision::Update {
            stale_journal: unlink_first && probe.has_journal(),
            unlink_first,
            make: make(s, p, probe),
        };
    }
    if !diff.any() {
        return Decision::Same;
    }
    let beyond_stat = Differences {
        xattrs: diff.xattrs,
        projid: diff.projid,
        ..Differences::default()
    };
    let fix = match s.kind {
        FileType::Dir if beyond_stat.any() => Some(beyond_stat),
        // The rest of a directory's metadata is set bottom-up at the end.
        FileType::Dir => None,
        _ => Some(diff),
    };
    Decision::Meta { fix }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A file system that answers from fields, and counts reads of contents.
    #[derive(Default)]
    struct Fake {
        targets_differ: bool,
        rdevs_differ: bool,
        journal: bool,
        same_inode: bool,
        contents_differ: bool,
        resumable: Option<Resumable>,
        link_dest: Option<Vec<u8>>,
        contents_reads: Cell<u32>,
    }

    impl Probe for Fake {
        fn link_targets_differ(&self) -> bool {
            self.targets_differ
        }
        fn rdevs_differ(&self) -> bool {
            self.rdevs_differ
        }
        fn has_journal(&self) -> bool {
            self.journal
        }
        fn same_inode_as_first(&self) -> bool {
            self.same_inode
        }
        fn contents_differ(&self) -> bool {
            self.contents_reads.set(self.contents_reads.get() + 1);
            self.contents_differ
        }
        fn resumable(&self) -> Option<Resumable> {
            self.resumable.clone()
        }
        fn link_dest_match(&self) -> Option<Vec<u8>> {
            self.link_dest.clone()
        }
    }

    const MIN: u64 = 1 << 20;

    fn meta(kind: FileType, size: u64, mtime: i64) -> Meta {
        let bits = match kind {
            FileType::Dir => libc::S_IFDIR,
            FileType::Symlink => libc::S_IFLNK,
            FileType::CharDev => libc::S_IFCHR,
            _ => libc::S_IFREG,
        };
        Meta {
            mode: bits | 0o644,
            size,
            mtime,
            nlink: 1,
            ..Meta::default()
        }
    }

    fn src(kind: FileType, size: u64, mtime: i64) -> Source {
        Source {
            kind,
            meta: meta(kind, size, mtime),
            member: false,
            xattrs_differ: false,
            projid_differs: false,
            beneath_conflict: false,
        }
    }

    fn dest(kind: FileType, size: u64, mtime: i64) -> Dest {
        Dest {
            meta: meta(kind, size, mtime),
            below_replaced: false,
        }
    }

    fn policy() -> Policy {
        Policy {
            delete_allowed: true,
            journal_min: MIN,
            ..Policy::default()
        }
    }

    const F: FileType = FileType::File;
    const D: FileType = FileType::Dir;
    const L: FileType = FileType::Symlink;

    fn update(make: Make) -> Decision {
        Decision::Update {
            make,
            unlink_first: false,
            stale_journal: false,
        }
    }

    fn new_inode(stale_journal: bool) -> Decision {
        Decision::Update {
            make: Make::Copy,
            unlink_first: true,
            stale_journal,
        }
    }

    fn compare(dryrun_update: bool, dryrun_meta: bool, fix_xattrs: bool, count: bool) -> Decision {
        Decision::Compare(Compare {
            dryrun_update,
            dryrun_meta,
            fix_xattrs,
            fix_projid: false,
            count_xattrs_fix: count,
        })
    }

    /// One row per case `sync` decides, as rsync would (and where it differs, as the README says).
    #[test]
    fn every_case_of_a_pair_decides_as_rsync_does() {
        type Row = (
            &'static str,
            Option<Source>,
            Option<Dest>,
            Policy,
            Fake,
            Decision,
        );
        let p = policy();
        let with = |f: fn(&mut Policy)| {
            let mut q = policy();
            f(&mut q);
            q
        };
        let resumable = Resumable {
            done: vec![(0, MIN)],
            dest: (1, 2),
        };
        let mut member = src(F, 10, 5);
        member.member = true;
        let mut xattrs = src(F, 10, 5);
        xattrs.xattrs_differ = true;
        let mut dir_xattrs = src(D, 0, 5);
        dir_xattrs.xattrs_differ = true;
        let mut projid = src(F, 10, 5);
        projid.projid_differs = true;
        let mut dir_projid = src(D, 0, 5);
        dir_projid.projid_differs = true;
        let mut beneath = src(F, 10, 5);
        beneath.beneath_conflict = true;
        let mut replaced = dest(F, 10, 5);
        replaced.below_replaced = true;
        let mut shared = dest(F, 10, 5);
        shared.meta.nlink = 2;
        let mut other_mode = dest(F, 10, 5);
        other_mode.meta.mode = libc::S_IFREG | 0o600;
        let mut other_owner = dest(F, 10, 5);
        other_owner.meta.uid = 7;
        let mut other_dir_mode = dest(D, 0, 5);
        other_dir_mode.meta.mode = libc::S_IFDIR | 0o700;
        let mut linked = dest(F, 10, 5);
        linked.meta.nlink = 2;
        let fake = Fake::default;
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            // Only SRC has it.
            ("missing dest: copied", Some(src(F, 10, 5)), None, p, fake(), Decision::Create(Make::Copy)),
            ("missing dest dir: made", Some(src(D, 0, 5)), None, p, fake(), Decision::Create(Make::Copy)),
            ("missing dest, hard link: linked to its first", Some(member), None, p, fake(), Decision::Create(Make::LinkToFirst)),
            ("missing dest, --link-dest has it equal: linked", Some(src(F, 10, 5)), None, with(|q| q.link_dest = true),
                Fake { link_dest: Some(b"/old/f".to_vec()), ..fake() }, Decision::Create(Make::LinkDest(b"/old/f".to_vec()))),
            ("missing dest, --link-dest lacks it: copied", Some(src(F, 10, 5)), None, with(|q| q.link_dest = true), fake(), Decision::Create(Make::Copy)),
            ("beneath a type conflict: skipped", Some(beneath), None, p, fake(), Decision::Skip),
            // Same type, regular files.
            ("same size and mtime: nothing", Some(src(F, 10, 5)), Some(dest(F, 10, 5)), p, fake(), Decision::Same),
            ("size differs: new inode", Some(src(F, 10, 5)), Some(dest(F, 11, 5)), p, fake(), new_inode(false)),
            ("mtime differs: new inode", Some(src(F, 10, 5)), Some(dest(F, 10, 6)), p, fake(), new_inode(false)),
            ("mode differs only: metadata", Some(src(F, 10, 5)), Some(other_mode), p, fake(),
                Decision::Meta { fix: Some(Differences { mode: true, ..Differences::default() }) }),
            ("owner differs only: metadata", Some(src(F, 10, 5)), Some(other_owner), p, fake(),
                Decision::Meta { fix: Some(Differences { owner: true, ..Differences::default() }) }),
            ("-X xattrs differ only: metadata", Some(xattrs), Some(dest(F, 10, 5)), p, fake(),
                Decision::Meta { fix: Some(Differences { xattrs: true, ..Differences::default() }) }),
            ("project ID differs only: metadata, data kept", Some(projid), Some(dest(F, 10, 5)), p, fake(),
                Decision::Meta { fix: Some(Differences { projid: true, ..Differences::default() }) }),
            ("directory's project ID differs: fixed in the fix pass", Some(dir_projid), Some(dest(D, 0, 5)), p, fake(),
                Decision::Meta { fix: Some(Differences { projid: true, ..Differences::default() }) }),
            ("journal beside an equal-looking file: new inode, journal goes", Some(src(F, MIN, 5)), Some(dest(F, MIN, 5)), p,
                Fake { journal: true, ..fake() }, new_inode(true)),
            ("journal beside a small file: not looked at", Some(src(F, 10, 5)), Some(dest(F, 10, 5)), p,
                Fake { journal: true, ..fake() }, Decision::Same),
            ("trusted journal of a partial file: resumed", Some(src(F, 2 * MIN, 5)), Some(dest(F, MIN, 0)), p,
                Fake { journal: true, resumable: Some(resumable.clone()), ..fake() }, Decision::Resume(resumable.clone())),
            ("trusted journal under --link-dest: copied anew", Some(src(F, 2 * MIN, 5)), Some(dest(F, MIN, 0)), with(|q| q.link_dest = true),
                Fake { journal: true, resumable: Some(resumable.clone()), ..fake() }, new_inode(true)),
            ("untrusted journal: new inode", Some(src(F, 2 * MIN, 5)), Some(dest(F, MIN, 0)), p,
                Fake { journal: true, ..fake() }, new_inode(true)),
            // -c/--contents.
            ("-c same size: compared", Some(src(F, 10, 5)), Some(dest(F, 10, 5)), with(|q| q.contents = true), fake(), compare(false, false, false, false)),
            ("-c same size, mtime differs: compared", Some(src(F, 10, 5)), Some(dest(F, 10, 6)), with(|q| q.contents = true), fake(), compare(false, false, false, false)),
            ("-c size differs: new inode", Some(src(F, 10, 5)), Some(dest(F, 11, 5)), with(|q| q.contents = true), fake(), new_inode(false)),
            ("-c -n bytes differ: an update", Some(src(F, 10, 5)), Some(dest(F, 10, 5)), with(|q| { q.contents = true; q.dryrun = true }),
                Fake { contents_differ: true, ..fake() }, compare(true, false, false, false)),
            ("-c -n bytes equal, mode differs: metadata", Some(src(F, 10, 5)), Some(other_mode), with(|q| { q.contents = true; q.dryrun = true }),
                fake(), compare(false, true, false, false)),
            // As today: a dry run counts an mtime difference as an update without reading (a
            // real run compares and finds the bytes equal).
            ("-c -n mtime differs: an update", Some(src(F, 10, 5)), Some(dest(F, 10, 6)), with(|q| { q.contents = true; q.dryrun = true }),
                fake(), compare(true, false, false, false)),
            ("-c -n all equal: nothing", Some(src(F, 10, 5)), Some(dest(F, 10, 5)), with(|q| { q.contents = true; q.dryrun = true }),
                fake(), compare(false, false, false, false)),
            ("-c -X xattrs differ: compared, xattrs fixed and counted", Some(xattrs), Some(dest(F, 10, 5)), with(|q| q.contents = true),
                fake(), compare(false, false, true, true)),
            ("-c -X xattrs and mode differ: the comparison counts it", Some(xattrs), Some(other_mode), with(|q| q.contents = true),
                fake(), compare(false, false, true, false)),
            // Hard links.
            ("hard link, same inode as its first: nothing", Some(member), Some(dest(F, 10, 5)), p,
                Fake { same_inode: true, ..fake() }, Decision::Same),
            ("hard link, a file of its own in DEST: linked again", Some(member), Some(dest(F, 10, 5)), p, fake(), update(Make::LinkToFirst)),
            ("hard link, -c bytes differ: linked again", Some(member), Some(dest(F, 10, 5)), with(|q| q.contents = true),
                Fake { same_inode: true, contents_differ: true, ..fake() }, update(Make::LinkToFirst)),
            ("DEST file with other names, -c bytes differ: new inode", Some(src(F, 10, 5)), Some(shared), with(|q| q.contents = true),
                Fake { contents_differ: true, ..fake() }, new_inode(false)),
            ("DEST file with other names, -c bytes equal: nothing", Some(src(F, 10, 5)), Some(linked), with(|q| q.contents = true),
                fake(), Decision::Same),
            // Other types.
            ("symlink target differs: made again", Some(src(L, 3, 5)), Some(dest(L, 3, 5)), p,
                Fake { targets_differ: true, ..fake() }, update(Make::Copy)),
            ("symlink target equal: nothing", Some(src(L, 3, 5)), Some(dest(L, 3, 5)), p, fake(), Decision::Same),
            ("symlink mtime differs: metadata", Some(src(L, 3, 5)), Some(dest(L, 3, 6)), p, fake(),
                Decision::Meta { fix: Some(Differences { mtime: true, ..Differences::default() }) }),
            ("device number differs: made again", Some(src(FileType::CharDev, 0, 5)), Some(dest(FileType::CharDev, 0, 5)), p,
                Fake { rdevs_differ: true, ..fake() }, update(Make::Copy)),
            ("dir mode differs: set at the end", Some(src(D, 0, 5)), Some(other_dir_mode), p, fake(), Decision::Meta { fix: None }),
            ("dir xattrs differ: fixed", Some(dir_xattrs), Some(dest(D, 0, 5)), p, fake(),
                Decision::Meta { fix: Some(Differences { xattrs: true, ..Differences::default() }) }),
            ("dir equal: nothing", Some(src(D, 0, 5)), Some(dest(D, 0, 5)), p, fake(), Decision::Same),
            // Type changes.
            ("file -> dir without --delete: conflict", Some(src(F, 10, 5)), Some(dest(D, 0, 5)), p, fake(), Decision::Conflict),
            ("dir -> file without --delete: conflict", Some(src(D, 0, 5)), Some(dest(F, 10, 5)), p, fake(), Decision::Conflict),
            ("symlink -> file without --delete: conflict", Some(src(L, 3, 5)), Some(dest(F, 3, 5)), p, fake(), Decision::Conflict),
            ("file -> dir with --delete: replaced", Some(src(F, 10, 5)), Some(dest(D, 0, 5)), with(|q| q.delete = true), fake(), Decision::Replace(Make::Copy)),
            ("dir -> symlink with --delete: replaced", Some(src(L, 3, 5)), Some(dest(D, 0, 5)), with(|q| q.delete = true), fake(), Decision::Replace(Make::Copy)),
            ("hard link replacing a dir: linked", Some(member), Some(dest(D, 0, 5)), with(|q| q.delete = true), fake(), Decision::Replace(Make::LinkToFirst)),
            // Only DEST has it.
            ("extra dest entry: kept", None, Some(dest(F, 10, 5)), p, fake(), Decision::Keep),
            ("extra dest entry, --delete: deleted", None, Some(dest(F, 10, 5)), with(|q| q.delete = true), fake(), Decision::Delete),
            ("extra dest entry, --delete after an incomplete walk: refused", None, Some(dest(F, 10, 5)),
                with(|q| { q.delete = true; q.delete_allowed = false }), fake(), Decision::RefuseDelete),
            ("beneath a replaced dir: deleted without --delete", None, Some(replaced), p, fake(), Decision::Delete),
            ("beneath a replaced dir after an incomplete walk: deleted", None, Some(replaced),
                with(|q| q.delete_allowed = false), fake(), Decision::Delete),
        ];
        for (name, s, d, p, fake, want) in rows {
            let got = classify(s.as_ref(), d.as_ref(), &p, &fake);
            assert_eq!(got, want, "{name}");
        }
    }

    /// Reading two files is the costly probe: asked only where the decision needs it.
    #[test]
    fn contents_are_read_only_when_the_decision_needs_them() {
        let c = Policy {
            contents: true,
            ..policy()
        };
        let fake = Fake::default();
        // A real -c run leaves the comparison to the copy engine.
        classify(Some(&src(F, 10, 5)), Some(&dest(F, 10, 5)), &c, &fake);
        // Without -c nothing is read.
        classify(
            Some(&src(F, 10, 5)),
            Some(&dest(F, 10, 5)),
            &policy(),
            &fake,
        );
        assert_eq!(fake.contents_reads.get(), 0);
        let n = Policy { dryrun: true, ..c };
        classify(Some(&src(F, 10, 5)), Some(&dest(F, 10, 5)), &n, &fake);
        assert_eq!(fake.contents_reads.get(), 1);
    }
}
