//! The entries `find` examines: walked from PATHs (to `--maxdepth`), or read from a list and,
//! when the tests need what a text list lacks, stat'ed again.

use crate::engine::context::Context;
use flist::path::{depth, normalize};
use flist::restat::{restat, Which};
use flist::walk::{walk, Visit, WalkOptions};
use flist::{Detail, FileList, FileType};
use rustix::fd::BorrowedFd;
use steal::{Comm, CommExt, ReduceOp};

/// The entries of this rank, and how many could not be read (each already reported).
pub struct Entries {
    /// This rank's entries, in list (or walk) order.
    pub list: FileList,
    /// Entries on this rank that failed (a directory that could not be read, a listed path
    /// that is gone).
    pub errors: u64,
    /// A stop request cut the walk short (the same on every rank).
    pub interrupted: bool,
}

/// Walk `paths` on all ranks: with stat when `detail` says so, and no deeper than `maxdepth`
/// levels below each path. Collective.
pub fn walk_paths(
    comm: &dyn Comm,
    context: &Context,
    roots: &[Vec<u8>],
    detail: Detail,
    maxdepth: Option<usize>,
    progress: &steal::progress::Progress,
) -> Entries {
    let opts = WalkOptions {
        detail,
        seed: 0xf1d,
        noatime: &context.noatime,
        stop: Some(&context.stop),
        progress: Some(progress),
        ..WalkOptions::default()
    };
    let Some(maxdepth) = maxdepth else {
        return walked(context, walk(comm, roots, &opts));
    };
    // One walk per root, so that each entry's depth is counted from the root it was found
    // under (GNU find lists an entry under two nested roots twice, at two depths).
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let mut all = Entries {
        list: FileList::new(detail),
        errors: 0,
        interrupted: false,
    };
    for root in roots {
        let base = depth(&normalize(root, &cwd));
        // Entries one level too deep are consumed unrecorded, so their directories are not
        // descended.
        let too_deep = |_: BorrowedFd<'_>, _: &[u8], path: &[u8], _: FileType| {
            depth(path).saturating_sub(base) > maxdepth
        };
        let too_deep: &Visit = &too_deep;
        let opts = WalkOptions {
            visit: Some(too_deep),
            ..opts
        };
        let part = walked(context, walk(comm, std::slice::from_ref(root), &opts));
        if all.list.is_empty() {
            // Keep the walk's user and group tables.
            all.list = part.list;
        } else {
            all.list.append(part.list);
        }
        all.errors += part.errors;
        all.interrupted |= part.interrupted;
        if all.interrupted {
            break;
        }
    }
    all
}

fn walked(context: &Context, w: flist::walk::Walked) -> Entries {
    for e in &w.errors {
        context.error(e);
    }
    Entries {
        errors: w.errors.len() as u64,
        list: w.list,
        interrupted: w.interrupted,
    }
}

/// A list read with `-i`, made ready for the tests: paths absolute and normal, entries deeper
/// than `maxdepth` below the list's shallowest entry left out, and the entries stat'ed again
/// (in parallel, `lstat`) when the list has no metadata and `need_meta`, or has entries of
/// unknown type and `need_type`. Entries that cannot be stat'ed are reported and left out.
/// Collective.
pub fn prepare_list(
    comm: &dyn Comm,
    context: &Context,
    list: FileList,
    maxdepth: Option<usize>,
    need_meta: bool,
    need_type: bool,
) -> Entries {
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let mut list = list.normalized(&cwd);
    if let Some(maxdepth) = maxdepth {
        let mut shallowest = [list
            .iter()
            .map(|e| depth(e.path))
            .min()
            .unwrap_or(usize::MAX) as u64];
        comm.allreduce(&mut shallowest, ReduceOp::Min);
        let top = shallowest[0] as usize;
        list.retain(|e| depth(e.path).saturating_sub(top) <= maxdepth);
    }
    let restat_all = need_meta && list.detail() == Detail::Lite;
    let restat_unknown = need_type && comm.any(list.iter().any(|e| e.kind == FileType::Unknown));
    if !restat_all && !restat_unknown {
        return Entries {
            list,
            errors: 0,
            interrupted: false,
        };
    }
    let which = if restat_all {
        Which::All
    } else {
        Which::UnknownTypes
    };
    let (list, errors) = restat(list, which, false);
    for e in &errors {
        context.error(e);
    }
    Entries {
        list,
        errors: errors.len() as u64,
        interrupted: false,
    }
}
