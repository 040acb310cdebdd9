//! Which ranks share a node: every rank's node name, gathered, grouped in order of first rank.

use steal::{Comm, CommExt};

/// Environment variable that overrides the node name (containers, tests that fake nodes).
pub const NODE_NAME_VAR: &str = "MFU_NODE_NAME";

/// The ranks of the job grouped by node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    /// Node names, in order of their lowest rank.
    pub names: Vec<Vec<u8>>,
    /// The ranks of each node, ascending; the first is the node's leader.
    pub ranks: Vec<Vec<usize>>,
    /// The node of every rank.
    pub node_of: Vec<usize>,
}

impl Nodes {
    /// Group ranks whose names are equal (`names[r]` is rank r's node name).
    pub fn from_names(names_by_rank: &[Vec<u8>]) -> Nodes {
        let mut nodes = Nodes {
            names: Vec::new(),
            ranks: Vec::new(),
            node_of: Vec::with_capacity(names_by_rank.len()),
        };
        for (rank, name) in names_by_rank.iter().enumerate() {
            let node = match nodes.names.iter().position(|n| n == name) {
                Some(i) => i,
                None => {
                    nodes.names.push(name.clone());
                    nodes.ranks.push(Vec::new());
                    nodes.names.len() - 1
                }
            };
            nodes.ranks[node].push(rank);
            nodes.node_of.push(node);
        }
        nodes
    }

    /// Collective: gather every rank's node name.
    pub fn gather(comm: &dyn Comm) -> Nodes {
        let names = comm.all_gather(&serde_bytes::ByteBuf::from(node_name()));
        Nodes::from_names(&names.into_iter().map(|n| n.into_vec()).collect::<Vec<_>>())
    }

    /// The rank of `node` that writes segment `segment` there (spread over the node's ranks).
    pub fn writer(&self, node: usize, segment: u64) -> usize {
        let ranks = &self.ranks[node];
        ranks[(segment % ranks.len() as u64) as usize]
    }

    /// True if `rank` leads its node (its lowest rank).
    pub fn is_leader(&self, rank: usize) -> bool {
        self.ranks[self.node_of[rank]][0] == rank
    }
}

/// `$MFU_NODE_NAME` if set and not empty, else the host name (uname's nodename).
pub fn node_name() -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    if let Some(v) = std::env::var_os(NODE_NAME_VAR).filter(|v| !v.is_empty()) {
        return v.as_bytes().to_vec();
    }
    rustix::system::uname().nodename().to_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_name_in_rank_order() {
        let names: Vec<Vec<u8>> = ["b", "a", "b", "a", "c"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let nodes = Nodes::from_names(&names);
        assert_eq!(nodes.names, [b"b".to_vec(), b"a".to_vec(), b"c".to_vec()]);
        assert_eq!(nodes.ranks, [vec![0, 2], vec![1, 3], vec![4]]);
        assert_eq!(nodes.node_of, [0, 1, 0, 1, 2]);
        assert!(nodes.is_leader(1) && !nodes.is_leader(3));
        assert_eq!(nodes.writer(0, 0), 0);
        assert_eq!(nodes.writer(0, 1), 2);
        assert_eq!(nodes.writer(2, 7), 4);
    }
}
