//! One outcome for all ranks: a collective list operation returns the same `Ok` or the same
//! `Err` everywhere, so no rank waits in a collective that the others have left.

use super::OPS;
use crate::error::{Error, ItemError, Result};
use std::io;
use steal::wire::{put_bytes, put_u64, Reader};
use steal::{Comm, CommExt};

/// Agree on the outcome of a step every rank ran on its own: when any rank failed, every rank
/// returns the error of the lowest failed rank (that rank returns its own, untouched).
/// One allreduce when all went well.
pub(super) fn agree<T>(comm: &dyn Comm, local: Result<T>) -> Result<T> {
    if !comm.any(local.is_err()) {
        return local;
    }
    let mut mine = Vec::new();
    if let Err(e) = &local {
        encode_error(e, &mut mine);
    }
    let all = comm.allgatherv(&mine);
    let first = all
        .iter()
        .position(|b| !b.is_empty())
        .expect("a rank reported a failure");
    match local {
        Err(e) if first == comm.rank() => Err(e),
        _ => Err(decode_error(&mut Reader::new(&all[first]))),
    }
}

/// Run `produce` on `root` only and hand its outcome to every rank (a value through
/// `encode`/`decode`, or the error). One broadcast.
pub(super) fn bcast_result<T>(
    comm: &dyn Comm,
    root: usize,
    produce: impl FnOnce() -> Result<T>,
    encode: impl Fn(&T, &mut Vec<u8>),
    decode: impl Fn(&mut Reader<'_>) -> T,
) -> Result<T> {
    let mut bytes = Vec::new();
    let own = (comm.rank() == root).then(produce);
    match &own {
        Some(Ok(v)) => {
            bytes.push(1);
            encode(v, &mut bytes);
        }
        Some(Err(e)) => {
            bytes.push(0);
            encode_error(e, &mut bytes);
        }
        None => {}
    }
    comm.bcast(root, &mut bytes);
    if let Some(own) = own {
        return own;
    }
    let mut w = Reader::new(&bytes);
    match w.u8() {
        1 => Ok(decode(&mut w)),
        _ => Err(decode_error(&mut w)),
    }
}

const ITEM: u8 = 0;
const BAD_LIST: u8 = 1;
const OTHER: u8 = 2;
const NO_OS_CODE: u64 = u64::MAX;

fn encode_error(e: &Error, out: &mut Vec<u8>) {
    match e {
        Error::Item(item) => {
            out.push(ITEM);
            put_bytes(out, item.op.as_bytes());
            put_bytes(out, &item.path);
            put_u64(
                out,
                item.source
                    .raw_os_error()
                    .map_or(NO_OS_CODE, |c| c as i64 as u64),
            );
            put_bytes(out, item.source.to_string().as_bytes());
        }
        Error::BadList { path, reason } => {
            out.push(BAD_LIST);
            put_bytes(out, path);
            put_bytes(out, reason.as_bytes());
        }
        // `Invalid`, and whatever variant comes later: its message is what matters.
        #[allow(unreachable_patterns)]
        other => {
            out.push(OTHER);
            put_bytes(out, other.to_string().as_bytes());
        }
    }
}

fn decode_error(w: &mut Reader<'_>) -> Error {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match w.u8() {
        ITEM => {
            let op = w.bytes();
            let op = OPS
                .into_iter()
                .find(|o| o.as_bytes() == op)
                .unwrap_or("list I/O");
            let path = w.bytes();
            let code = w.u64();
            let message = w.bytes();
            let source = match code {
                NO_OS_CODE => io::Error::other(text(message)),
                c => io::Error::from_raw_os_error(c as i64 as i32),
            };
            ItemError::new(path, op, source).into()
        }
        BAD_LIST => {
            let path = w.bytes().to_vec();
            Error::BadList {
                path,
                reason: text(w.bytes()),
            }
        }
        _ => Error::Invalid(text(w.bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(e: Error) -> String {
        let mut bytes = Vec::new();
        encode_error(&e, &mut bytes);
        let back = decode_error(&mut Reader::new(&bytes));
        assert_eq!(back.to_string(), e.to_string());
        back.to_string()
    }

    #[test]
    fn errors_cross_ranks_with_the_same_message() {
        let enoent = ItemError::new(
            b"/l\xffst",
            super::super::OP_OPEN,
            io::Error::from_raw_os_error(2),
        );
        assert!(round_trip(enoent.into()).starts_with("open list /l\\xffst: "));
        round_trip(ItemError::new(b"/x", super::super::OP_READ, io::Error::other("short")).into());
        let reason = "truncated at byte offset 9".to_string();
        assert_eq!(
            round_trip(Error::BadList {
                path: b"/x".to_vec(),
                reason
            }),
            "read list /x: truncated at byte offset 9"
        );
        round_trip(Error::Invalid("no".into()));
    }

    #[test]
    fn every_rank_returns_the_first_failure() {
        let out = steal::local::run(4, |comm: &dyn Comm| {
            let local: Result<usize> = match comm.rank() {
                1 | 3 => Err(Error::Invalid(format!("rank {}", comm.rank()))),
                r => Ok(r),
            };
            agree(comm, local).map_err(|e| e.to_string())
        });
        assert_eq!(out, vec![Err("rank 1".to_string()); 4]);
        let ok = steal::local::run(3, |comm: &dyn Comm| agree(comm, Ok(comm.rank())).unwrap());
        assert_eq!(ok, vec![0, 1, 2]);
    }

    #[test]
    fn bcast_result_gives_roots_outcome() {
        let out = steal::local::run(3, |comm: &dyn Comm| {
            let ok = bcast_result(
                comm,
                1,
                || Ok(41u64 + comm.rank() as u64),
                |v, o| put_u64(o, *v),
                |w| w.u64(),
            );
            let err = bcast_result(
                comm,
                0,
                || Err::<u64, _>(Error::Invalid("x".into())),
                |v, o| put_u64(o, *v),
                |w| w.u64(),
            );
            (ok.unwrap(), err.unwrap_err().to_string())
        });
        assert_eq!(out, vec![(42, "x".to_string()); 3]);
    }
}
