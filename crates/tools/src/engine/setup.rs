//! What a tool checks and sets up before any work, alike on every rank: identity, paths that
//! must exist, agreement on the checks; and the walk of its sources.

use crate::engine::context::{Context, Error};
use flist::spill::WalkSpill;
use flist::walk::{walk, Visit, WalkOptions, Walked};
use flist::{Detail, FileType};
use steal::progress::Progress;
use steal::{Comm, CommExt};

/// Checks every rank made before touching anything: the value if they passed on every rank;
/// otherwise an error on every rank, the message of the lowest rank whose check failed (so
/// rank 0, which reports it once, names the real cause). A thin wrapper of steal's
/// `comm.agree` for the tools' `Result<T, String>` checks. Collective.
pub fn agree_setup<T>(comm: &dyn Comm, checked: Result<T, String>) -> Result<T, Error> {
    comm.agree(checked).map_err(Error::new)
}

/// Become `uid`/`gid` for the whole process (`-U`/`-G`: copy as that user). Done before any
/// thread does file-system work; glibc applies it to every thread.
///
/// The groups change too, or root's group 0 and its supplementary groups would still open
/// files the user cannot read: with `-G` the groups are exactly that one group; with `-U` alone
/// they are the user's (its passwd entry's primary group and `initgroups`). The order is
/// groups, group, user: once the user is no longer root, the groups can't be changed.
pub fn switch_identity(uid: Option<u32>, gid: Option<u32>) -> Result<(), String> {
    let os = std::io::Error::last_os_error;
    let (groups_of, gid) = match (uid, gid) {
        (_, Some(g)) => (None, Some(g)),
        (Some(u), None) => {
            let (name, primary) = crate::engine::ids::user_entry(u)
                .map_err(|e| format!("look up user {u}: {e}"))?
                .ok_or_else(|| {
                    format!("user {u} has no passwd entry to take its groups from: give -G GID too")
                })?;
            (Some(name), Some(primary))
        }
        (None, None) => return Ok(()),
    };
    let g = gid.expect("set above");
    // SAFETY: plain system calls; `name` is a NUL-terminated string that outlives the call.
    let grouped = unsafe {
        match &groups_of {
            Some(name) => libc::initgroups(name.as_ptr(), g) == 0,
            None => libc::setgroups(1, &g) == 0,
        }
    };
    if !grouped {
        return Err(format!("set the groups of {}: {}", who(uid, g), os()));
    }
    // SAFETY: as above.
    if unsafe { libc::setgid(g) } != 0 {
        return Err(format!("switch to group {g}: {}", os()));
    }
    if let Some(u) = uid {
        // SAFETY: as above.
        if unsafe { libc::setuid(u) } != 0 {
            return Err(format!("switch to user {u}: {}", os()));
        }
    }
    Ok(())
}

fn who(uid: Option<u32>, gid: u32) -> String {
    match uid {
        Some(u) => format!("user {u}"),
        None => format!("group {gid}"),
    }
}

/// Walk `roots` with full metadata, reporting failures to `context`.
pub fn walk_sources(
    comm: &dyn Comm,
    context: &Context,
    roots: &[Vec<u8>],
    dereference: bool,
    progress: &Progress,
) -> Walked {
    walk_sources_named(comm, context, roots, dereference, progress, true)
}

/// [`walk_sources`], with the user and group names in the list only if `names` (see
/// [`WalkOptions::id_tables`]: only printing names and writing v4 lists need them).
pub fn walk_sources_named(
    comm: &dyn Comm,
    context: &Context,
    roots: &[Vec<u8>],
    dereference: bool,
    progress: &Progress,
    names: bool,
) -> Walked {
    walk_sources_pruned(comm, context, roots, dereference, progress, names, None)
}

/// [`walk_sources_named`], leaving out every entry `prune` consumes, and what is below it
/// (see [`WalkOptions::visit`]): the include/exclude rules of
/// [`Rules::pruner`](crate::engine::select::Rules::pruner), so an excluded tree is never read.
pub fn walk_sources_pruned(
    comm: &dyn Comm,
    context: &Context,
    roots: &[Vec<u8>],
    dereference: bool,
    progress: &Progress,
    names: bool,
    prune: Option<&Visit>,
) -> Walked {
    walk_sources_with(
        comm,
        context,
        roots,
        (dereference, names),
        progress,
        prune,
        None,
    )
}

/// [`walk_sources`] that spills its records to sorted runs when they outgrow half of
/// `spill`'s limit ([`WalkOptions::spill`]; `None`: in memory).
pub fn walk_sources_spilling(
    comm: &dyn Comm,
    context: &Context,
    roots: &[Vec<u8>],
    progress: &Progress,
    spill: Option<WalkSpill<'_>>,
) -> Walked {
    walk_sources_with(comm, context, roots, (false, true), progress, None, spill)
}

/// The walk of [`walk_sources_pruned`] and [`walk_sources_spilling`]: `(dereference, names)`,
/// leaving out what `prune` consumes and spilling beyond `spill`'s limit (both optional).
pub fn walk_sources_with(
    comm: &dyn Comm,
    context: &Context,
    roots: &[Vec<u8>],
    (dereference, names): (bool, bool),
    progress: &Progress,
    prune: Option<&Visit>,
    spill: Option<WalkSpill<'_>>,
) -> Walked {
    let opts = WalkOptions {
        detail: Detail::Stat,
        dereference,
        noatime: &context.noatime,
        stop: Some(&context.stop),
        progress: Some(progress),
        id_tables: names,
        visit: prune,
        spill,
        ..WalkOptions::default()
    };
    let walked = walk(comm, roots, &opts);
    for e in &walked.errors {
        context.error(e);
    }
    walked
}

/// True when `path` is a directory (following links).
pub fn is_dir(path: &[u8]) -> bool {
    flist::walk::stat_path(path, true)
        .is_ok_and(|st| FileType::from_mode(st.st_mode) == FileType::Dir)
}

/// A destination that does not exist yet can be created only in an existing directory.
pub fn check_parent(dest: &[u8]) -> Result<(), String> {
    let p = flist::path::parent(dest);
    if is_dir(p) {
        Ok(())
    } else {
        Err(format!(
            "cannot create {}: the directory {} does not exist",
            flist::path::display(dest),
            flist::path::display(p)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank gets the lowest failed rank's message: rank 0, which reports it, names the
    /// real cause even when its own check passed (it said "the setup failed on another rank").
    #[test]
    fn every_rank_gets_the_first_failed_ranks_message() {
        let out = steal::local::run(3, |comm: &dyn Comm| {
            let checked = match comm.rank() {
                0 => Ok(()),
                r => Err(format!("rank {r}: no such directory /a b|c")),
            };
            agree_setup(comm, checked).map_err(|e| e.message)
        });
        assert_eq!(
            out,
            vec![Err("rank 1: no such directory /a b|c".to_string()); 3]
        );
        let ok = steal::local::run(3, |comm: &dyn Comm| agree_setup(comm, Ok(comm.rank())));
        assert_eq!(
            ok.into_iter().map(|r| r.unwrap()).collect::<Vec<_>>(),
            [0, 1, 2]
        );
    }
}
