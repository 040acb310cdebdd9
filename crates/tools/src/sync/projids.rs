//! Project IDs in sync: an entry whose data is equal but whose project ID (or, for a
//! directory, `PROJINHERIT` flag) differs from its source's gets it fixed without a copy of its
//! data, as a differing owner or mode is.
//!
//! `stat` does not show project IDs: each pair of equal data (regular files and directories)
//! costs an open and an `FS_IOC_FSGETXATTR` on each side, in parallel on each rank, and only
//! where the sources' file system answers that ioctl at all (a sync from NFS or tmpfs reads
//! none). A destination whose file system has none is no difference (nothing could fix it).

use crate::engine::copy::projid::{self, ProjectId};
use flist::at::At;
use flist::record::Entry;
use flist::{FileList, FileType};
use rayon::prelude::*;

/// Whether project IDs are compared: the file system of some source root has them to read.
pub fn compared(source_roots: &[Vec<u8>]) -> bool {
    source_roots.iter().any(|r| projid::readable_under(r))
}

/// For each record of `list`, whether its project ID differs from that of its destination,
/// which `paired` gives for the records worth comparing (`None`: not compared, `false`).
/// Empty when not `compared`. In parallel.
pub fn differing(
    list: &FileList,
    compared: bool,
    paired: impl Fn(Entry<'_>) -> Option<Vec<u8>> + Sync,
) -> Vec<bool> {
    if !compared {
        return Vec::new();
    }
    (0..list.len())
        .into_par_iter()
        .map(|i| {
            let e = list.entry(i);
            paired(e).is_some_and(|dst| differ_entry(e.kind, e.path, &dst))
        })
        .collect()
}

/// Whether the project IDs of the source entry `src` (of type `kind`) and its destination
/// `dst` differ: only files and directories have one.
pub fn differ_entry(kind: FileType, src: &[u8], dst: &[u8]) -> bool {
    matches!(kind, FileType::File | FileType::Dir) && differ(src, dst, kind == FileType::Dir)
}

/// Whether `src` and `dst` (neither followed) have other project IDs (for directories, `dir`,
/// or another `PROJINHERIT` flag). A source that can't be read is taken to differ: the fix
/// then tries again and names what fails; a destination without project IDs does not.
pub fn differ(src: &[u8], dst: &[u8], dir: bool) -> bool {
    let read = |p: &[u8]| {
        At::new(p)
            .map_err(drop)
            .and_then(|at| projid::get_at(&at).map_err(drop))
    };
    let flag = |p: ProjectId| ProjectId {
        inherit: dir && p.inherit,
        ..p
    };
    match (read(src), read(dst)) {
        (Ok(Some(a)), Ok(Some(b))) => flag(a) != flag(b),
        (Ok(_), Ok(None)) | (Ok(None), _) => false,
        (Err(()), _) => true,
        // The fix reports it.
        (Ok(Some(a)), Err(())) => !a.is_none(),
    }
}
