//! `walk -v` on Lustre: each regular file's stripe count and size, and a summary of files and
//! bytes by stripe count. Off Lustre nothing is read (one `statfs` per rank decides).

use crate::engine::lustre::LustreHandle;
use flist::at::At;
use flist::{FileList, FileType};
use lustre_sys::Layout;
use rayon::prelude::*;
use rustix::fd::AsFd;
use rustix::fs::OFlags;
use std::collections::BTreeMap;
use steal::progress::human_bytes;
use steal::{Comm, CommExt};

/// A file's striping as `walk -v` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Striped {
    /// RAID0 over `count` OSTs with `size`-byte stripes.
    Plain {
        /// Stripes (OSTs).
        count: u16,
        /// Bytes per stripe.
        size: u32,
    },
    /// A composite (PFL or mirrored) layout of this many components.
    Composite(u16),
    /// No layout could be read.
    Unknown,
}

impl Striped {
    fn of(layout: Option<&Layout>) -> Striped {
        match layout {
            Some(Layout::Composite(c)) => Striped::Composite(c.components.len() as u16),
            Some(l) => match (l.stripe_count(), l.stripe_size()) {
                (Some(count), Some(size)) => Striped::Plain { count, size },
                _ => Striped::Unknown,
            },
            None => Striped::Unknown,
        }
    }

    /// ` [4 x 1.000 MiB]`, ` [PFL, 3 components]`, or nothing.
    pub fn suffix(&self) -> String {
        match self {
            Striped::Plain { count, size } => {
                format!(" [{count} x {}]", human_bytes(u64::from(*size)))
            }
            Striped::Composite(n) => format!(" [composite, {n} components]"),
            Striped::Unknown => String::new(),
        }
    }
}

/// The striping of every regular file of `list` (others: `Unknown`), when the list is on
/// Lustre (judged by its first entry on any rank); `None` off Lustre. Collective.
pub fn stripes(comm: &dyn Comm, list: &FileList, api: &LustreHandle) -> Option<Vec<Striped>> {
    let here = !list.is_empty()
        && api
            .is_lustre(flist::path::as_path(list.path(0)))
            .unwrap_or(false);
    if !comm.any(here) {
        return None;
    }
    Some(
        (0..list.len())
            .into_par_iter()
            .map(|i| {
                if list.kind(i) != FileType::File {
                    return Striped::Unknown;
                }
                let layout = At::new(list.path(i))
                    .and_then(|a| a.open(OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, 0))
                    .ok()
                    .and_then(|fd| api.layout_of(fd.as_fd()).ok().flatten());
                Striped::of(layout.as_ref())
            })
            .collect(),
    )
}

/// `Stripe counts: 1: 900 files (1.2 GiB); 3: 4 files (12.0 GiB)` over all ranks; on every
/// rank. Collective.
pub fn summary(comm: &dyn Comm, list: &FileList, stripes: &[Striped]) -> String {
    // Key: stripe count, or u32::MAX for composite, u32::MAX - 1 for unknown.
    let mut mine: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for (i, s) in stripes.iter().enumerate() {
        if list.kind(i) != FileType::File {
            continue;
        }
        let key = match s {
            Striped::Plain { count, .. } => u32::from(*count),
            Striped::Composite(_) => u32::MAX,
            Striped::Unknown => u32::MAX - 1,
        };
        let e = mine.entry(key).or_default();
        e.0 += 1;
        e.1 += list.meta(i).map_or(0, |m| m.size);
    }
    let mut all: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for theirs in comm.all_gather(&mine) {
        for (k, (files, size)) in theirs {
            let e = all.entry(u64::from(k)).or_default();
            e.0 += files;
            e.1 += size;
        }
    }
    let parts: Vec<String> = all
        .iter()
        .map(|(k, (files, size))| {
            let what = match *k {
                k if k == u64::from(u32::MAX) => "composite".to_string(),
                k if k == u64::from(u32::MAX - 1) => "unknown".to_string(),
                k => k.to_string(),
            };
            format!("{what}: {files} files ({})", human_bytes(*size))
        })
        .collect();
    format!("Stripe counts: {}", parts.join("; "))
}
