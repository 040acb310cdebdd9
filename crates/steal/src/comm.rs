//! The communicator every distributed algorithm of mfu-rs is written against.

use crate::typed;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A message tag for point-to-point traffic. Values below 1000 are reserved for `steal` itself.
pub type Tag = i32;

/// Element-wise reduction applied by [`Comm::allreduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Wrapping sum.
    Sum,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Bitwise or (use 0/1 values for a logical or).
    Or,
}

impl ReduceOp {
    /// Combine two values with this operation.
    pub fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            ReduceOp::Sum => a.wrapping_add(b),
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
            ReduceOp::Or => a | b,
        }
    }
}

/// A handle on a non-blocking barrier started by [`Comm::ibarrier`].
pub trait PendingBarrier {
    /// True once every rank has entered the barrier. Never blocks.
    fn test(&mut self) -> bool;
}

/// A group of `size()` ranks that exchange bytes.
///
/// Rules every implementation keeps:
/// - collectives are called by all ranks in the same order (like MPI);
/// - only the thread that owns the `Comm` calls it (MPI funneled; Open MPI communicators are not
///   shared across threads), so `Comm` is not `Sync`;
/// - byte counts may exceed `i32::MAX`: implementations cut large transfers into pieces.
pub trait Comm {
    /// This rank's number, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Block until every rank has called `barrier`.
    fn barrier(&self);
    /// Start a barrier that completes without blocking this rank; poll it with `test`.
    fn ibarrier(&self) -> Box<dyn PendingBarrier + '_>;
    /// Element-wise reduction of `values` over all ranks; every rank gets the result in place.
    /// All ranks pass slices of the same length.
    fn allreduce(&self, values: &mut [u64], op: ReduceOp);
    /// Exclusive prefix sum: rank r gets the element-wise sum of ranks `0..r` (zeros on rank 0).
    fn exscan(&self, values: &mut [u64]);
    /// Rank `root`'s `bytes` replace every other rank's `bytes`.
    fn bcast(&self, root: usize, bytes: &mut Vec<u8>);
    /// Every rank gets every rank's bytes, indexed by rank.
    fn allgatherv(&self, mine: &[u8]) -> Vec<Vec<u8>>;
    /// `sends[r]` goes to rank r; the result's element r came from rank r.
    fn alltoallv(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>>;
    /// Queue `bytes` for rank `dest` with `tag`; never blocks. Messages between one pair of
    /// ranks with one tag arrive in the order sent.
    fn send(&self, dest: usize, tag: Tag, bytes: Vec<u8>);
    /// The next arrived message with `tag` (any tag if `None`), as `(source, tag, bytes)`;
    /// `None` when nothing has arrived. Never blocks.
    fn try_recv(&self, tag: Option<Tag>) -> Option<(usize, Tag, Vec<u8>)>;
    /// Complete whatever sends are still in flight (blocking). Call before dropping the `Comm`
    /// or before a phase that must not leave messages behind.
    fn flush_sends(&self);
    /// Wait without spinning until a new message for this rank may have arrived, this thread is
    /// unparked ([`std::thread::Thread::unpark`]), or `timeout` has passed; it may return early,
    /// so callers poll [`Comm::try_recv`] after it. A backend that is told of arrivals (the
    /// `local` one) sleeps until one comes; one that is not (MPI) naps at most `poll` and
    /// lets the caller look again. Call it from the thread that owns the `Comm`.
    fn park(&self, timeout: std::time::Duration, poll: std::time::Duration) {
        std::thread::park_timeout(timeout.min(poll));
    }
}

/// Conveniences built from the [`Comm`] primitives.
pub trait CommExt: Comm {
    /// Sum of one value over all ranks.
    fn sum(&self, v: u64) -> u64 {
        let mut a = [v];
        self.allreduce(&mut a, ReduceOp::Sum);
        a[0]
    }
    /// Maximum of one value over all ranks.
    fn max(&self, v: u64) -> u64 {
        let mut a = [v];
        self.allreduce(&mut a, ReduceOp::Max);
        a[0]
    }
    /// True on every rank if `v` is true on any rank.
    fn any(&self, v: bool) -> bool {
        let mut a = [v as u64];
        self.allreduce(&mut a, ReduceOp::Or);
        a[0] != 0
    }
    /// True on every rank if `v` is true on all ranks.
    fn all(&self, v: bool) -> bool {
        !self.any(!v)
    }
    /// Exclusive prefix sum of one value, and the total: `(sum of ranks before me, sum of all)`.
    fn offset_and_total(&self, v: u64) -> (u64, u64) {
        let mut a = [v];
        self.exscan(&mut a);
        (a[0], self.sum(v))
    }
    /// One `u64` from every rank, indexed by rank.
    fn allgather_u64(&self, v: u64) -> Vec<u64> {
        self.all_gather(&v)
    }

    /// Rank `root`'s `value`, on every rank (the others' `value` is ignored). Every rank,
    /// the root too, returns the decoded copy, so all hold exactly the same value. One
    /// broadcast. (See [`typed`] for the encoding.)
    fn bcast_from<T: Serialize + DeserializeOwned>(&self, root: usize, value: &T) -> T {
        typed::bcast_from(self, root, value)
    }
    /// Run `produce` on `root` only and give its value to every rank; the root returns its own
    /// value without a copy. One broadcast. A `Result` with a serde error type hands the root's
    /// failure to every rank.
    fn bcast_with<T: Serialize + DeserializeOwned>(
        &self,
        root: usize,
        produce: impl FnOnce() -> T,
    ) -> T {
        typed::bcast_with(self, root, produce)
    }
    /// Every rank's `value`, indexed by rank, on every rank. One all-gather.
    fn all_gather<T: Serialize + DeserializeOwned>(&self, value: &T) -> Vec<T> {
        typed::all_gather(self, value)
    }
    /// Every rank's `value`, indexed by rank, on `root` (`None` elsewhere). One all-to-all in
    /// which only the root receives bytes.
    fn gather_to<T: Serialize + DeserializeOwned>(&self, root: usize, value: &T) -> Option<Vec<T>> {
        typed::gather_to(self, root, value)
    }
    /// One outcome for a step every rank ran on its own, so that no rank waits in a collective
    /// the others have left. When every rank is `Ok`, each returns its own `Ok` value
    /// (untouched; they may differ). When any rank failed, every rank returns the error of the
    /// lowest failed rank: that rank its own error, untouched, the others a decoded copy.
    /// One allreduce when all went well, plus one all-gather otherwise.
    fn agree<T, E: Serialize + DeserializeOwned>(&self, local: Result<T, E>) -> Result<T, E> {
        typed::agree(self, local)
    }
    /// Queue `value` for rank `dest` with `tag` (see [`Comm::send`]); the receiver reads it with
    /// [`typed::decode`].
    fn send_value<T: Serialize + ?Sized>(&self, dest: usize, tag: Tag, value: &T) {
        typed::send_value(self, dest, tag, value)
    }
}

impl<C: Comm + ?Sized> CommExt for C {}
