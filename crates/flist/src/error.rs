//! Errors of flist operations: every one names the path and the operation.

use crate::path::display;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::io;

/// An operation on one path failed. Walks collect these and go on; list I/O returns them.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", display(path))]
pub struct ItemError {
    /// The path, as bytes.
    pub path: Vec<u8>,
    /// What was being done (`open directory`, `stat`, `read list`...).
    pub op: &'static str,
    /// The system's reason.
    pub source: io::Error,
}

impl ItemError {
    /// An error for `path` during `op`.
    pub fn new(path: &[u8], op: &'static str, source: io::Error) -> ItemError {
        ItemError {
            path: path.to_vec(),
            op,
            source,
        }
    }
}

/// Errors of whole flist operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on a path failed.
    #[error(transparent)]
    Item(#[from] ItemError),
    /// A list file is not in a format flist reads, or is damaged.
    #[error("read list {}: {reason}", display(path))]
    BadList {
        /// The list file.
        path: Vec<u8>,
        /// What is wrong, with the byte offset where it applies.
        reason: String,
    },
    /// An argument is invalid (bad sort key, bad pattern...).
    #[error("{0}")]
    Invalid(String),
}

/// Result of flist operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The operations an [`ItemError`] names, mapped back to themselves when an error crosses ranks
/// (`op` is a `&'static str`) without an allocation; any other is kept once ([`intern`]).
const KNOWN_OPS: [&str; 14] = [
    crate::io::OP_OPEN,
    crate::io::OP_STAT,
    crate::io::OP_READ,
    crate::io::OP_CREATE,
    crate::io::OP_WRITE,
    crate::io::OP_RENAME,
    crate::io::OP_SYNC,
    crate::io::OP_SYNC_DIR,
    crate::record::OP_LIST_ENTRY,
    "stat",
    "stat (vanished during the walk)",
    "open directory",
    "read directory",
    "follow link (directory cycle, not descended)",
];

/// `op` as a `&'static str`: each operation name not in [`KNOWN_OPS`] is kept once for the
/// life of the process (operation names are a small fixed set of the program's strings).
fn intern(op: String) -> &'static str {
    static SEEN: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = seen.iter().find(|o| **o == op) {
        return known;
    }
    let kept: &'static str = Box::leak(op.into_boxed_str());
    seen.push(kept);
    kept
}

/// An [`Error`] as it travels between ranks: the system error as its number (or its message
/// when it has none), paths as bytes.
#[derive(Serialize)]
enum Wire<'a> {
    Item {
        #[serde(with = "serde_bytes")]
        path: &'a [u8],
        op: &'a str,
        os_code: Option<i32>,
        message: String,
    },
    BadList {
        #[serde(with = "serde_bytes")]
        path: &'a [u8],
        reason: &'a str,
    },
    Invalid(String),
}

/// Errors cross ranks in steal's typed collectives (`comm.agree`, `comm.bcast_with`): the
/// receiving ranks print the same message as the failed one.
impl Serialize for Error {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Error::Item(item) => Wire::Item {
                path: &item.path,
                op: item.op,
                os_code: item.source.raw_os_error(),
                message: item.source.to_string(),
            },
            Error::BadList { path, reason } => Wire::BadList { path, reason },
            Error::Invalid(m) => Wire::Invalid(m.clone()),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Error {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Error, D::Error> {
        // [`Wire`], owned (the bytes are not kept); the same variants and fields in the same
        // order.
        #[derive(Deserialize)]
        enum Owned {
            Item {
                #[serde(with = "serde_bytes")]
                path: Vec<u8>,
                op: String,
                os_code: Option<i32>,
                message: String,
            },
            BadList {
                #[serde(with = "serde_bytes")]
                path: Vec<u8>,
                reason: String,
            },
            Invalid(String),
        }
        Ok(match Owned::deserialize(d)? {
            Owned::Item {
                path,
                op,
                os_code,
                message,
            } => {
                let op = KNOWN_OPS
                    .into_iter()
                    .find(|o| *o == op)
                    .unwrap_or_else(|| intern(op));
                let source = match os_code {
                    Some(c) => io::Error::from_raw_os_error(c),
                    None => io::Error::other(message),
                };
                ItemError { path, op, source }.into()
            }
            Owned::BadList { path, reason } => Error::BadList { path, reason },
            Owned::Invalid(m) => Error::Invalid(m),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use steal::{Comm, CommExt};

    fn round_trip(e: Error) -> String {
        let back: Error = steal::decode(&steal::typed::encode(&e)).unwrap();
        assert_eq!(back.to_string(), e.to_string());
        back.to_string()
    }

    #[test]
    fn errors_cross_ranks_with_the_same_message() {
        let enoent = ItemError::new(
            b"/l\xffst",
            crate::io::OP_OPEN,
            io::Error::from_raw_os_error(2),
        );
        assert!(round_trip(enoent.into()).starts_with("open list /l\\xffst: "));
        round_trip(ItemError::new(b"/x", crate::io::OP_READ, io::Error::other("short")).into());
        round_trip(ItemError::new(b"/x\n|y", "open directory", io::Error::other("gone")).into());
        // An operation of a tool's own (not flist's) keeps its name too, every time.
        for _ in 0..2 {
            let tools = ItemError::new(b"/t", "set the layout of", io::Error::from_raw_os_error(5));
            assert!(round_trip(tools.into()).starts_with("set the layout of /t: "));
        }
        let reason = "truncated at byte offset 9".to_string();
        assert_eq!(
            round_trip(Error::BadList {
                path: b"/x".to_vec(),
                reason
            }),
            "read list /x: truncated at byte offset 9"
        );
        round_trip(Error::Invalid("no".into()));
        // An operation the table does not know keeps its name, the path and the reason.
        let odd = ItemError::new(b"/p", "frobnicate", io::Error::from_raw_os_error(13));
        let back: Error = steal::decode(&steal::typed::encode(&Error::from(odd))).unwrap();
        assert!(back.to_string().starts_with("frobnicate /p: "), "{back}");
        for n in 0..8 {
            assert!(steal::decode::<Error>(&[3, 0, 0][..n.min(3)]).is_err());
        }
    }

    #[test]
    fn every_rank_returns_the_first_failure() {
        let out = steal::local::run(4, |comm: &dyn Comm| {
            let local: Result<usize> = match comm.rank() {
                1 | 3 => Err(Error::Invalid(format!("rank {}", comm.rank()))),
                r => Ok(r),
            };
            comm.agree(local).map_err(|e| e.to_string())
        });
        assert_eq!(out, vec![Err("rank 1".to_string()); 4]);
    }

    #[test]
    fn bcast_with_gives_roots_outcome() {
        let out = steal::local::run(3, |comm: &dyn Comm| {
            let ok: Result<u64> = comm.bcast_with(1, || Ok(41 + comm.rank() as u64));
            let err: Result<u64> = comm.bcast_with(0, || Err(Error::Invalid("x".into())));
            (ok.unwrap(), err.unwrap_err().to_string())
        });
        assert_eq!(out, vec![(42, "x".to_string()); 3]);
    }
}
