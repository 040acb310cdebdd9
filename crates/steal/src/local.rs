//! The `local` backend: N ranks as threads of one process, talking over channels.
//!
//! It runs every distributed algorithm of mfu-rs at 1..64+ ranks in milliseconds, which is how the
//! tests exercise them, and it is what a run without a launcher uses (one rank, or `--ranks N`).
//! With [`Options::jitter_seed`] it also delays message delivery at random (seeded), so races in a
//! protocol show up in tests rather than at 256 ranks on a cluster.

use crate::comm::{Comm, PendingBarrier, ReduceOp, Tag};
use crossbeam_channel::{unbounded, Receiver, Sender};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::Duration;

/// How a local group behaves.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// When set, `try_recv` pretends at random (seeded per rank) that a message has not arrived
    /// yet, about half of the time, to shuffle the interleaving of protocols under test.
    pub jitter_seed: Option<u64>,
}

struct Shared {
    size: usize,
    barrier: ThreadBarrier,
    /// `slots[parity][src * size + dst]`: bytes in transit for a collective; collectives
    /// alternate between the two sets (see [`LocalComm::exchange`]).
    slots: [Mutex<Vec<Vec<u8>>>; 2],
    /// Non-blocking barrier: (generation, ranks arrived in this generation).
    ibarrier: Mutex<(u64, usize)>,
    /// `parked[r]`: the thread that last waited in [`Comm::park`] as rank r; a send to r
    /// unparks it, so an idle rank sleeps until a message comes instead of polling.
    parked: Vec<Mutex<Option<Thread>>>,
}

type Envelope = (usize, Tag, Vec<u8>);

/// The most ranks one process runs as threads (`--ranks N`): 256. The group keeps a slot per
/// pair of ranks and a thread with an 8 MiB stack per rank, and beyond a few hundred thread
/// ranks the barriers and the stealing traffic take longer than the work (1024 ranks spend a
/// minute walking one file); more ranks come from a launcher, one process each.
pub const MAX_RANKS: usize = 256;

/// One rank of a local group. Created by [`run`]; not shared between threads.
pub struct LocalComm {
    rank: usize,
    shared: Arc<Shared>,
    senders: Vec<Sender<Envelope>>,
    inbox: Receiver<Envelope>,
    /// Messages received from the channel but not yet asked for (another tag was asked for).
    stash: RefCell<VecDeque<Envelope>>,
    jitter: Option<RefCell<SmallRng>>,
    /// Generation of the last ibarrier this rank entered.
    ibarrier_gen: Cell<u64>,
    /// Collectives this rank has run (their parity picks the set of slots).
    collectives: Cell<u64>,
}

/// A barrier for thread ranks: waiters park, and the last to arrive unparks each of them. A
/// `std::sync::Barrier` wakes its waiters through a condition variable, each of which must then
/// take its mutex again, one after the other: at 2 ranks a wait took 71 µs against 14 µs here
/// (64 ranks on 2 cores cost about 1.2 ms either way: 64 threads must each be scheduled).
struct ThreadBarrier {
    size: usize,
    /// Completed generations.
    generation: AtomicU64,
    /// Ranks arrived in this generation, and the threads waiting for it to complete.
    arrived: Mutex<(usize, Vec<Thread>)>,
}

impl ThreadBarrier {
    fn new(size: usize) -> ThreadBarrier {
        ThreadBarrier {
            size,
            generation: AtomicU64::new(0),
            arrived: Mutex::new((0, Vec::with_capacity(size))),
        }
    }

    fn wait(&self) {
        let generation = {
            let mut arrived = self.arrived.lock().expect("barrier");
            let generation = self.generation.load(Ordering::Acquire);
            arrived.0 += 1;
            if arrived.0 < self.size {
                arrived.1.push(std::thread::current());
                generation
            } else {
                arrived.0 = 0;
                self.generation.store(generation + 1, Ordering::Release);
                for waiter in arrived.1.drain(..) {
                    waiter.unpark();
                }
                return;
            }
        };
        // Unparked by the last rank; an unpark meant for an earlier wait may wake us early.
        while self.generation.load(Ordering::Acquire) == generation {
            std::thread::park();
        }
    }
}

/// Run `f` on `size` ranks (threads; a lone rank runs on the calling thread) and return each
/// rank's result, in rank order.
pub fn run<R, F>(size: usize, f: F) -> Vec<R>
where
    R: Send,
    F: Fn(&dyn Comm) -> R + Sync,
{
    run_with(size, Options::default(), f)
}

/// [`run`] with [`Options`].
pub fn run_with<R, F>(size: usize, options: Options, f: F) -> Vec<R>
where
    R: Send,
    F: Fn(&dyn Comm) -> R + Sync,
{
    assert!(size >= 1, "a group needs at least one rank");
    let mut comms = group(size, &options);
    if size == 1 {
        // One rank runs on the calling thread: a thread of its own (an 8 MiB stack mapped,
        // spawned and joined) counts in the start-up of a small walk (this and building only
        // the named tool's arguments: a walk of an empty directory 1.88 -> 1.37 ms).
        let comm = comms.pop().expect("one rank");
        let r = f(&comm);
        comm.flush_sends();
        return vec![r];
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                let f = &f;
                std::thread::Builder::new()
                    .name(format!("rank-{}", comm.rank))
                    .stack_size(8 << 20)
                    .spawn_scoped(scope, move || {
                        let r = f(&comm);
                        comm.flush_sends();
                        r
                    })
                    .expect("spawn rank thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Build the `size` communicators of one group, to be moved one per thread.
pub fn group(size: usize, options: &Options) -> Vec<LocalComm> {
    let shared = Arc::new(Shared {
        size,
        barrier: ThreadBarrier::new(size),
        slots: [
            Mutex::new(vec![Vec::new(); size * size]),
            Mutex::new(vec![Vec::new(); size * size]),
        ],
        ibarrier: Mutex::new((0, 0)),
        parked: (0..size).map(|_| Mutex::new(None)).collect(),
    });
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..size).map(|_| unbounded()).unzip();
    receivers
        .into_iter()
        .enumerate()
        .map(|(rank, inbox)| LocalComm {
            rank,
            shared: shared.clone(),
            senders: senders.clone(),
            inbox,
            stash: RefCell::new(VecDeque::new()),
            jitter: options.jitter_seed.map(|s| {
                RefCell::new(SmallRng::seed_from_u64(
                    s ^ (rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ))
            }),
            ibarrier_gen: Cell::new(0),
            collectives: Cell::new(0),
        })
        .collect()
}

impl LocalComm {
    /// The one primitive behind every local collective: all-to-all of byte vectors.
    ///
    /// One barrier per collective: consecutive collectives use alternate sets of slots, and a
    /// rank can write a set again (two collectives later) only after every rank has arrived at
    /// the barrier of the collective in between, which each does after reading this one.
    fn exchange(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let n = self.shared.size;
        assert_eq!(sends.len(), n, "alltoallv needs one buffer per rank");
        let set = &self.shared.slots[(self.collectives.get() % 2) as usize];
        self.collectives.set(self.collectives.get() + 1);
        {
            let mut slots = set.lock().expect("collective slots");
            for (dst, bytes) in sends.into_iter().enumerate() {
                slots[self.rank * n + dst] = bytes;
            }
        }
        self.shared.barrier.wait();
        let mut slots = set.lock().expect("collective slots");
        (0..n)
            .map(|src| std::mem::take(&mut slots[src * n + self.rank]))
            .collect()
    }

    fn held_back(&self) -> bool {
        match &self.jitter {
            Some(rng) => rng.borrow_mut().random_bool(0.5),
            None => false,
        }
    }
}

struct LocalBarrier<'a> {
    comm: &'a LocalComm,
    target: u64,
}

impl PendingBarrier for LocalBarrier<'_> {
    fn test(&mut self) -> bool {
        self.comm.shared.ibarrier.lock().expect("ibarrier").0 >= self.target
    }
}

impl Comm for LocalComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn barrier(&self) {
        self.shared.barrier.wait();
    }
    fn ibarrier(&self) -> Box<dyn PendingBarrier + '_> {
        let mut g = self.shared.ibarrier.lock().expect("ibarrier");
        // A rank can't enter generation k+1 before generation k completed for it, so the
        // generation counter identifies this rank's barrier.
        let target = self.ibarrier_gen.get() + 1;
        self.ibarrier_gen.set(target);
        g.1 += 1;
        if g.1 == self.shared.size {
            g.0 += 1;
            g.1 = 0;
            // Ranks waiting for it in `park` need not wait for their timeout.
            for parked in &self.shared.parked {
                if let Some(t) = &*parked.lock().expect("parked thread") {
                    t.unpark();
                }
            }
        }
        Box::new(LocalBarrier { comm: self, target })
    }
    fn allreduce(&self, values: &mut [u64], op: ReduceOp) {
        let all = self.allgatherv(&encode_u64s(values));
        for (i, v) in values.iter_mut().enumerate() {
            *v = all
                .iter()
                .map(|b| decode_u64(b, i))
                .reduce(|a, b| op.apply(a, b))
                .unwrap_or(0);
        }
    }
    fn exscan(&self, values: &mut [u64]) {
        let all = self.allgatherv(&encode_u64s(values));
        for (i, v) in values.iter_mut().enumerate() {
            *v = all[..self.rank]
                .iter()
                .fold(0u64, |acc, b| acc.wrapping_add(decode_u64(b, i)));
        }
    }
    fn bcast(&self, root: usize, bytes: &mut Vec<u8>) {
        let n = self.shared.size;
        let sends = if self.rank == root {
            vec![bytes.clone(); n]
        } else {
            vec![Vec::new(); n]
        };
        let mut got = self.exchange(sends);
        *bytes = std::mem::take(&mut got[root]);
    }
    fn allgatherv(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        self.exchange(vec![mine.to_vec(); self.shared.size])
    }
    fn alltoallv(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.exchange(sends)
    }
    fn send(&self, dest: usize, tag: Tag, bytes: Vec<u8>) {
        // The receiver lives as long as the group's scope, so a failed send is a logic error.
        self.senders[dest]
            .send((self.rank, tag, bytes))
            .expect("local send: receiver gone");
        // Wake the receiver if it waits in `park` (an unpark that comes first is kept).
        if let Some(t) = &*self.shared.parked[dest].lock().expect("parked thread") {
            t.unpark();
        }
    }
    fn try_recv(&self, tag: Option<Tag>) -> Option<(usize, Tag, Vec<u8>)> {
        if self.held_back() {
            return None;
        }
        let mut stash = self.stash.borrow_mut();
        if let Some(pos) = stash.iter().position(|m| tag.is_none_or(|t| t == m.1)) {
            return stash.remove(pos);
        }
        while let Ok(m) = self.inbox.try_recv() {
            if tag.is_none_or(|t| t == m.1) {
                return Some(m);
            }
            stash.push_back(m);
        }
        None
    }
    fn flush_sends(&self) {
        // Channel sends complete immediately.
    }
    fn park(&self, timeout: Duration, _poll: Duration) {
        {
            let mut me = self.shared.parked[self.rank].lock().expect("parked thread");
            let current = std::thread::current();
            if me.as_ref().is_none_or(|t| t.id() != current.id()) {
                *me = Some(current);
            }
        }
        // Registered first, checked second: a message sent after the check unparks us.
        if self.inbox.is_empty() {
            std::thread::park_timeout(timeout);
        }
    }
}

fn encode_u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode_u64(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8-byte element"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::CommExt;

    #[test]
    fn collectives_agree_at_many_sizes() {
        for n in [1, 2, 3, 5, 16] {
            let out = run(n, |c| {
                let r = c.rank() as u64;
                let mut v = [r, r * 2];
                c.allreduce(&mut v, ReduceOp::Max);
                assert_eq!(v, [n as u64 - 1, 2 * (n as u64 - 1)]);
                let mut m = [r + 3];
                c.allreduce(&mut m, ReduceOp::Min);
                assert_eq!(m[0], 3);
                let (off, tot) = c.offset_and_total(r + 1);
                assert_eq!(off, r * (r + 1) / 2);
                assert_eq!(tot, (n * (n + 1) / 2) as u64);
                let mut b = if c.rank() == n - 1 {
                    b"root".to_vec()
                } else {
                    Vec::new()
                };
                c.bcast(n - 1, &mut b);
                assert_eq!(b, b"root");
                let all = c.allgatherv(&vec![c.rank() as u8; c.rank()]);
                for (i, x) in all.iter().enumerate() {
                    assert_eq!(x, &vec![i as u8; i]);
                }
                let sends = (0..n).map(|d| vec![c.rank() as u8, d as u8]).collect();
                let got = c.alltoallv(sends);
                for (s, x) in got.iter().enumerate() {
                    assert_eq!(x, &vec![s as u8, c.rank() as u8]);
                }
                assert!(c.any(c.rank() == 0));
                assert!(!c.all(c.rank() == 0) || n == 1);
                c.rank()
            });
            assert_eq!(out, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_lone_rank_runs_on_the_calling_thread() {
        let me = std::thread::current().id();
        assert_eq!(run(1, |_| std::thread::current().id()), [me]);
        assert_ne!(run(2, |_| std::thread::current().id())[0], me);
    }

    /// Collectives back to back, with ranks running ahead at random: a rank may enter the
    /// next collective while others still read this one's slots (they alternate between two
    /// sets), and every byte must still come from the round it was sent in.
    #[test]
    fn back_to_back_collectives_never_mix_rounds() {
        for n in [2, 7] {
            run(n, |c| {
                let mut rng = SmallRng::seed_from_u64(c.rank() as u64);
                for round in 0..400u32 {
                    if rng.random_bool(0.3) {
                        std::thread::yield_now();
                    }
                    let sends = (0..n)
                        .map(|d| [round.to_le_bytes(), [c.rank() as u8, d as u8, 0, 0]].concat())
                        .collect();
                    let got = c.alltoallv(sends);
                    for (src, bytes) in got.iter().enumerate() {
                        let want = [round.to_le_bytes(), [src as u8, c.rank() as u8, 0, 0]];
                        assert_eq!(bytes, &want.concat(), "round {round}");
                    }
                    if round % 50 == 0 {
                        c.barrier();
                    }
                }
            });
        }
    }

    #[test]
    fn point_to_point_with_tags_and_ibarrier() {
        run_with(
            4,
            Options {
                jitter_seed: Some(7),
            },
            |c| {
                let next = (c.rank() + 1) % c.size();
                c.send(next, 5, vec![1]);
                c.send(next, 6, vec![2]);
                let mut got6 = None;
                while got6.is_none() {
                    got6 = c.try_recv(Some(6));
                }
                assert_eq!(got6.unwrap().2, vec![2]);
                let mut got5 = None;
                while got5.is_none() {
                    got5 = c.try_recv(None);
                }
                let (src, tag, bytes) = got5.unwrap();
                assert_eq!(
                    (src, tag, bytes),
                    ((c.rank() + c.size() - 1) % c.size(), 5, vec![1])
                );
                for _ in 0..3 {
                    let mut b = c.ibarrier();
                    while !b.test() {
                        std::thread::yield_now();
                    }
                }
            },
        );
    }
}
