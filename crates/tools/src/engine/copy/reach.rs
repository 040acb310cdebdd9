//! How the copy engine reaches its sources and destinations: beneath the roots the user named,
//! never through a symlink met on the way (`flist::beneath`).
//!
//! The trees can change between the walk and the copy, and DEST may already hold symlinks
//! (to outside, back into SRC, dangling): a create that followed one would write where the
//! user never asked. So every destination entry is reached from an anchor directory the user
//! named (DEST, or the directory a new DEST goes into), and every source entry from its source
//! root, component by component without following symlinks. The last component is then used
//! with `O_NOFOLLOW`/`AT_SYMLINK_NOFOLLOW` by the caller.

use super::Mapping;
use flist::at::At;
use flist::beneath::Roots;
use flist::parent_dir::ParentDir;
use std::io;
use std::sync::Arc;

/// The open roots of one run of the engine.
pub struct Reach {
    /// Source roots; `None` when sources are followed through symlinks (`-L`).
    src: Option<Arc<Roots>>,
    /// Destination anchors.
    dst: Arc<Roots>,
}

impl Reach {
    /// Open the roots of `map`: its source roots (unless it follows sources) and its
    /// destination anchors ([`Mapping::dest_anchors`]).
    pub fn open(map: &Mapping) -> Reach {
        let src = (!map.follows_sources()).then(|| {
            let roots = map.source_roots();
            Arc::new(Roots::open_dirs(roots.iter().map(Vec::as_slice)))
        });
        let anchors = map.dest_anchors();
        let dst = Arc::new(Roots::open_dirs(anchors.iter().map(Vec::as_slice)));
        Reach { src, dst }
    }

    /// The source entry `path`, its parent reached beneath its root.
    pub fn src<'a>(&self, path: &'a [u8]) -> io::Result<At<'a>> {
        match &self.src {
            Some(r) => r.at(path),
            None => At::new(path),
        }
    }

    /// The destination entry `path`, its parent reached beneath its anchor.
    pub fn dst<'a>(&self, path: &'a [u8]) -> io::Result<At<'a>> {
        self.dst.at(path)
    }

    /// True when `path` is a destination anchor itself (named by the user: a symlink there
    /// is followed).
    pub fn is_anchor(&self, path: &[u8]) -> bool {
        self.dst
            .find(path)
            .is_some_and(|r| r.rel(path).is_some_and(|rel| rel.is_empty()))
    }

    /// A [`ParentDir`] holding source directories, reached beneath the source roots.
    pub fn src_parents(&self) -> ParentDir {
        match &self.src {
            Some(r) => ParentDir::beneath(r.clone()),
            None => ParentDir::default(),
        }
    }

    /// A [`ParentDir`] holding destination directories, reached beneath the anchors.
    pub fn dst_parents(&self) -> ParentDir {
        ParentDir::beneath(self.dst.clone())
    }

    /// True when sources are reached without following symlinks (open them `O_NOFOLLOW`).
    pub fn src_confined(&self) -> bool {
        self.src.is_some()
    }
}

/// The (device, inode) of `st`.
pub fn id_of(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// The error of a destination that is its own source: never truncated, never written.
pub fn same_file(src: &[u8]) -> io::Error {
    io::Error::other(format!(
        "it is the same file as the source {} (refused: writing it would destroy the source)",
        flist::path::display(src)
    ))
}
