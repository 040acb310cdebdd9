//! Bytes that must come out in global order (a listing printed rank by rank): every rank's
//! bytes reach rank 0, one rank at a time (rank 0 holds at most one other rank's buffer at once).

use crate::comm::{Comm, Tag};
use std::time::Duration;

const TAG_ORDERED: Tag = 1001;
/// [`in_rank_order_pieces`]: rank 0 asks for the next piece (or tells a rank to stop).
const TAG_PIECE_ASK: Tag = 1002;
/// [`in_rank_order_pieces`]: a rank's next piece.
const TAG_PIECE: Tag = 1003;

/// Wait for the next message with `tag`, sleeping (not spinning) in between.
fn wait_for(comm: &dyn Comm, tag: Tag) -> (usize, Vec<u8>) {
    loop {
        if let Some((src, _, bytes)) = comm.try_recv(Some(tag)) {
            return (src, bytes);
        }
        comm.park(Duration::from_millis(10), Duration::from_micros(20));
    }
}

/// Rank 0 writes the bytes of ranks 0, 1, ... in order through `write`, each rank's bytes as
/// the pieces its `next` returns (until `None`), so that no rank holds more than its own
/// pieces and rank 0 at most one piece of another rank at once. Rank 0 asks a rank for each
/// piece, one at a time. When `write` returns false (it failed), the ranks are told to stop:
/// no more pieces are made or sent. Collective.
pub fn in_rank_order_pieces(
    comm: &dyn Comm,
    mut next: impl FnMut() -> Option<Vec<u8>>,
    mut write: impl FnMut(&[u8]) -> bool,
) {
    if comm.rank() == 0 {
        let mut going = true;
        while let Some(piece) = next() {
            if !write(&piece) {
                going = false;
                break;
            }
        }
        for r in 1..comm.size() {
            loop {
                comm.send(r, TAG_PIECE_ASK, vec![going as u8]);
                if !going {
                    break;
                }
                let (_, piece) = wait_for(comm, TAG_PIECE);
                // First byte: 1 when a piece follows, 0 when rank r has no more.
                if piece[0] == 0 {
                    break;
                }
                going = write(&piece[1..]);
            }
        }
    } else {
        loop {
            let (_, ask) = wait_for(comm, TAG_PIECE_ASK);
            if ask[0] == 0 {
                break;
            }
            match next() {
                Some(piece) => {
                    let mut out = Vec::with_capacity(1 + piece.len());
                    out.push(1);
                    out.extend_from_slice(&piece);
                    comm.send(0, TAG_PIECE, out);
                }
                None => {
                    comm.send(0, TAG_PIECE, vec![0]);
                    break;
                }
            }
        }
    }
    comm.flush_sends();
    comm.barrier();
}

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

    #[test]
    fn pieces_come_in_rank_order_and_a_failed_write_stops_every_rank() {
        for fail_after in [None, Some(4)] {
            let out = Mutex::new(Vec::new());
            let made = crate::local::run(4, |c| {
                // Rank r has r + 1 pieces of one byte each.
                let mut left = c.rank() + 1;
                let mut made = 0;
                in_rank_order_pieces(
                    c,
                    || {
                        (left > 0).then(|| {
                            left -= 1;
                            made += 1;
                            vec![b'a' + c.rank() as u8]
                        })
                    },
                    |b| {
                        let mut o = out.lock().unwrap();
                        if fail_after.is_some_and(|n| o.len() >= n) {
                            return false;
                        }
                        o.extend_from_slice(b);
                        true
                    },
                );
                made
            });
            match fail_after {
                None => {
                    assert_eq!(out.into_inner().unwrap(), b"abbcccdddd");
                    assert_eq!(made, vec![1, 2, 3, 4]);
                }
                Some(_) => {
                    // "a", "bb", "c", then the write of the second "c" fails: rank 2 makes
                    // no third piece, rank 3 none at all.
                    assert_eq!(out.into_inner().unwrap(), b"abbc");
                    assert_eq!(made, vec![1, 2, 2, 0]);
                }
            }
        }
    }
}
