//! How much memory a rank may hold: `--memory-limit SIZE`, or a default derived from the node.

use crate::units::{human_bytes, parse_size};
use steal::Comm;

/// The share of the node's memory (`MemTotal`) the default limit divides among the ranks on
/// the node, as a fraction: one half, which leaves the other half to the page cache, the
/// MPI library and whatever else runs there.
pub const DEFAULT_NODE_SHARE: (u64, u64) = (1, 2);

/// The smallest limit accepted (bytes): below a few records no run can be sorted.
pub const MIN_LIMIT: u64 = 1024;

/// The memory one rank may hold for a list, in bytes, and where the number came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MemoryLimit {
    /// Bytes per rank.
    pub bytes: u64,
    /// How it was chosen.
    pub source: LimitSource,
}

/// Where a [`MemoryLimit`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum LimitSource {
    /// The user's `--memory-limit`.
    Given,
    /// [`DEFAULT_NODE_SHARE`] of `node_bytes` (the node's `MemTotal`), divided among
    /// `ranks_on_node` ranks.
    Default {
        /// The node's memory, bytes.
        node_bytes: u64,
        /// Ranks of the job on this node.
        ranks_on_node: u64,
    },
}

impl MemoryLimit {
    /// Parse `--memory-limit`'s value with the crate's units (`512M`, `2GiB`, `64k`); a value
    /// below [`MIN_LIMIT`] is refused.
    pub fn parse(text: &str) -> Result<u64, String> {
        let bytes = parse_size(text)?;
        if bytes < MIN_LIMIT {
            return Err(format!(
                "invalid memory limit '{text}': at least {MIN_LIMIT} bytes"
            ));
        }
        Ok(bytes)
    }

    /// The limit of this rank: `given`, or the default (collective either way, so that every
    /// rank calls it alike: the default counts the ranks on each node over `comm`).
    pub fn resolve(comm: &dyn Comm, given: Option<u64>) -> MemoryLimit {
        let ranks_on_node = ranks_on_node(comm) as u64;
        match given {
            Some(bytes) => MemoryLimit {
                bytes,
                source: LimitSource::Given,
            },
            None => {
                let node_bytes = node_memory().unwrap_or(4 << 30);
                let (num, den) = DEFAULT_NODE_SHARE;
                let bytes = (node_bytes / den * num / ranks_on_node.max(1)).max(MIN_LIMIT);
                MemoryLimit {
                    bytes,
                    source: LimitSource::Default {
                        node_bytes,
                        ranks_on_node,
                    },
                }
            }
        }
    }

    /// One line for a report: `512.000 MiB per rank (--memory-limit)`, or the default with
    /// what it was derived from.
    pub fn describe(&self) -> String {
        let bytes = human_bytes(self.bytes);
        match self.source {
            LimitSource::Given => format!("{bytes} per rank (--memory-limit)"),
            LimitSource::Default {
                node_bytes,
                ranks_on_node,
            } => {
                let (num, den) = DEFAULT_NODE_SHARE;
                format!(
                    "{bytes} per rank (default: {num}/{den} of the node's {} over its {ranks_on_node} rank{})",
                    human_bytes(node_bytes),
                    if ranks_on_node == 1 { "" } else { "s" }
                )
            }
        }
    }
}

/// The node's memory in bytes: `MemTotal` of `/proc/meminfo`, else the physical pages.
pub fn node_memory() -> Option<u64> {
    if let Ok(text) = std::fs::read_to_string("/proc/meminfo") {
        let kib = text
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(kib) = kib {
            return Some(kib << 10);
        }
    }
    // SAFETY: sysconf reads system constants.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| pages as u64 * size as u64)
}

/// What tells nodes apart: the host name and this boot's id (two nodes of a cluster may be
/// given one name in containers; a boot id is random).
fn host_id() -> Vec<u8> {
    let mut id = rustix::system::uname().nodename().to_bytes().to_vec();
    id.push(0);
    if let Ok(boot) = std::fs::read("/proc/sys/kernel/random/boot_id") {
        id.extend_from_slice(&boot);
    }
    id
}

/// The ranks of `comm` on this rank's node (itself included), found by gathering every rank's
/// host id, not from a launcher's variables (collective).
pub fn ranks_on_node(comm: &dyn Comm) -> usize {
    let mine = host_id();
    comm.allgatherv(&mine)
        .iter()
        .filter(|id| **id == mine)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_in_the_crate_units_and_the_default_shares_the_node() {
        assert_eq!(MemoryLimit::parse("512M"), Ok(512 << 20));
        assert_eq!(MemoryLimit::parse("4k"), Ok(4096));
        assert!(MemoryLimit::parse("100").unwrap_err().contains("at least"));
        assert!(MemoryLimit::parse("lots").is_err());
        let node = node_memory().unwrap();
        let limits = steal::local::run(3, |comm| MemoryLimit::resolve(comm, None));
        for l in &limits {
            assert_eq!(
                l.source,
                LimitSource::Default {
                    node_bytes: node,
                    ranks_on_node: 3
                }
            );
            assert_eq!(l.bytes, node / 2 / 3);
            assert!(
                l.describe().contains("over its 3 ranks"),
                "{}",
                l.describe()
            );
        }
        let given = steal::local::run(2, |comm| MemoryLimit::resolve(comm, Some(8192)));
        assert_eq!(given[1].describe(), "8.000 KiB per rank (--memory-limit)");
    }
}
