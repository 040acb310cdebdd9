//! `cmp --manifest FILE --update-manifest DIR`: after the check, rewrite FILE for the tree as
//! it is now: lines whose file changed get its new digest, files of DIR the manifest does not
//! list are added (hashed here), lines whose file is gone (or no longer a regular file) are
//! dropped. The same hash and line format (b3sum or sha256sum, names escaped as the tool
//! does), sorted by path as `cp --manifest` writes it; when every line starts with `./`, the
//! added ones do too. Written under a temporary name and renamed
//! ([`crate::engine::manifest`]'s writer); left as it is when nothing changed, and not
//! rewritten when a listed file could not be read, a line is not a manifest line, the walk
//! of DIR was incomplete or the check was stopped (named, exit 1).

use super::{beneath, hash, Fate, Found, Line, Update};
use crate::engine::context::Context;
use crate::engine::digest::HashKind;
use crate::engine::manifest::ManifestOptions;
use flist::beneath::Root;
use flist::path::display;
use flist::FileType;
use rayon::prelude::*;
use serde_bytes::ByteBuf;
use std::collections::HashSet;
use steal::{Comm, CommExt, ReduceOp};

/// The manifest to rewrite and how its files are read.
pub(in crate::cmp) struct Rewrite<'a> {
    /// The manifest file.
    pub file: &'a [u8],
    /// The tree it lists.
    pub root: &'a Root,
    /// Its hash.
    pub kind: HashKind,
}

/// A line on its way to the rank its path hashes to: (path as beneath the tree, path as
/// written, its digest now or `None`: dropped, the digest it had).
type Sent = (ByteBuf, ByteBuf, Option<[u8; 32]>, [u8; 32]);

impl Rewrite<'_> {
    /// Rewrite the manifest from this rank's `lines` and their `fates`, unless `why_not`.
    /// Returns what was done, the bytes read to hash added files, and how many files were
    /// added (each named). Collective.
    pub fn run(
        &self,
        comm: &dyn Comm,
        context: &Context,
        lines: &[Line],
        fates: Vec<Fate>,
        why_not: Option<String>,
    ) -> (Update, u64, u64) {
        let rank0 = comm.rank() == 0;
        let show = display(self.file).to_string();
        let refuse = |why: &str| {
            if rank0 {
                context.error(format_args!("manifest {show}: not updated ({why})"));
            }
        };
        let mut u = Update::default();
        let unknown = comm.sum(fates.iter().filter(|f| **f == Fate::Unknown).count() as u64);
        let why_not = why_not
            .or_else(|| (unknown > 0).then(|| format!("{unknown} listed files could not be read")));
        if let Some(why) = why_not {
            refuse(&why);
            return (u, 0, 0);
        }
        // Every regular file of the tree but the manifest itself (and temporaries of outputs
        // being written).
        let own = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(flist::path::as_path(self.file))
                .ok()
                .map(|m| (m.dev(), m.ino()))
        };
        let progress = context.progress(comm.rank(), "Walked");
        let walked = crate::engine::setup::walk_sources_pruned(
            comm,
            context,
            &[self.root.path().to_vec()],
            false,
            &progress,
            false,
            None,
        );
        if comm.any(!walked.complete || !walked.errors.is_empty()) {
            refuse(&format!(
                "the walk of {} was incomplete (errors above)",
                display(self.root.path())
            ));
            return (u, 0, 0);
        }
        let size = comm.size();
        let home = |key: &[u8]| crate::engine::verify_state::home(key, size);
        let mut sends = vec![Vec::new(); size];
        for e in walked.list.iter().filter(|e| e.kind == FileType::File) {
            let id = e.meta.map(|m| (m.dev, m.ino));
            if id.is_some() && id == own {
                continue;
            }
            if flist::atomic::is_temp_name(flist::path::basename(e.path)) {
                continue;
            }
            let Some(rel) = self.root.rel(e.path).filter(|r| !r.is_empty()) else {
                continue;
            };
            steal::typed::encode_into(&ByteBuf::from(rel.to_vec()), &mut sends[home(rel)]);
        }
        drop(walked);
        let mut files = Vec::new();
        for bytes in comm.alltoallv(sends) {
            files.extend(steal::typed::each::<ByteBuf>(&bytes).map(steal::typed::sent));
        }
        let mut sends = vec![Vec::new(); size];
        for ((_, had, rel), fate) in lines.iter().zip(&fates) {
            let key = beneath(rel).unwrap_or_default();
            let now = match fate {
                Fate::Keep(d) => Some(*d),
                _ => None,
            };
            let sent: Sent = (
                ByteBuf::from(key.clone()),
                ByteBuf::from(rel.clone()),
                now,
                *had,
            );
            steal::typed::encode_into(&sent, &mut sends[home(&key)]);
        }
        let mut listed = Vec::new();
        for bytes in comm.alltoallv(sends) {
            listed.extend(steal::typed::each::<Sent>(&bytes).map(steal::typed::sent));
        }
        let dotted = comm.all(lines.iter().all(|(_, _, rel)| rel.starts_with(b"./")));
        let known: HashSet<&[u8]> = listed.iter().map(|(k, ..)| &k[..]).collect();
        let new: Vec<&ByteBuf> = files.iter().filter(|f| !known.contains(&f[..])).collect();
        let sha = self.kind == HashKind::Sha256;
        let hashed: Vec<Found> = new
            .par_iter()
            .map(|rel| hash(self.root, rel, sha, &context.stop, &context.noatime, None).0)
            .collect();
        let mut entries = Vec::new();
        let mut counts = [0u64; 5]; // changed, removed, added, could not hash, bytes read
        for (key, rel, now, had) in listed {
            let _ = key;
            match now {
                Some(d) => {
                    counts[0] += u64::from(d != had);
                    entries.push((rel.into_vec(), d));
                }
                None => counts[1] += 1,
            }
        }
        for (rel, found) in new.iter().zip(hashed) {
            let shown = display(rel);
            match found {
                Found::Hashed(b3, s2, n) => {
                    let d = if sha { s2 } else { Some(b3) };
                    let Some(d) = d else { continue };
                    counts[2] += 1;
                    counts[4] += n;
                    context.error(format_args!(
                        "{shown}: not in the manifest (a file added to the tree)"
                    ));
                    let path = if dotted {
                        [&b"./"[..], rel].concat()
                    } else {
                        rel.to_vec()
                    };
                    entries.push((path, d));
                }
                // Gone since the walk, or no regular file now: nothing to list.
                Found::Missing(_) | Found::NotRegular(_) => {}
                Found::Unreadable(e) => {
                    counts[3] += 1;
                    context.error(format_args!("read {shown}: {e}"));
                }
                Found::Stopped => counts[3] += 1,
            }
        }
        let read = counts[4];
        comm.allreduce(&mut counts, ReduceOp::Sum);
        let [changed, removed, added, unhashed, _] = counts;
        (u.changed, u.removed, u.added) = (changed, removed, added);
        u.lines = comm.sum(entries.len() as u64);
        if unhashed > 0 {
            refuse(&format!(
                "{unhashed} files added to the tree could not be read"
            ));
            return (u, read, added);
        }
        if changed + removed + added == 0 {
            u.unchanged = true;
            return (u, read, added);
        }
        let o = ManifestOptions::new(self.file, self.kind);
        match crate::engine::manifest::write(comm, context, &o, entries) {
            Ok(()) => u.written = true,
            Err(e) => refuse(&e),
        }
        (u, read, added)
    }
}
