//! Bytes that must come out in global order (a listing printed rank by rank): every rank's
//! bytes reach rank 0, one rank at a time (rank 0 holds at most one other rank's buffer at once).

use crate::comm::{Comm, Tag};

const TAG_ORDERED: Tag = 1001;

/// Rank 0 writes the `bytes` of ranks 0, 1, ... in order through `write`. Collective.
pub fn in_rank_order(comm: &dyn Comm, bytes: Vec<u8>, mut write: impl FnMut(&[u8])) {
    if comm.rank() == 0 {
        write(&bytes);
        for r in 1..comm.size() {
            // Ask rank r for its part only now, so that ranks don't all push at once.
            comm.send(r, TAG_ORDERED, Vec::new());
            loop {
                if let Some((_, _, part)) = comm.try_recv(Some(TAG_ORDERED)) {
                    write(&part);
                    break;
                }
                std::thread::yield_now();
            }
        }
    } else {
        loop {
            if comm.try_recv(Some(TAG_ORDERED)).is_some() {
                break;
            }
            std::thread::yield_now();
        }
        comm.send(0, TAG_ORDERED, bytes);
    }
    comm.flush_sends();
    comm.barrier();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn output_comes_in_rank_order() {
        let out = Mutex::new(Vec::new());
        crate::local::run(5, |c| {
            in_rank_order(c, vec![b'a' + c.rank() as u8; c.rank() + 1], |b| {
                out.lock().unwrap().extend_from_slice(b)
            })
        });
        assert_eq!(out.into_inner().unwrap(), b"abbcccddddeeeee");
    }
}
