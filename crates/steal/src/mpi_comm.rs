//! The `mpi` backend: one rank per MPI process, over rsmpi.
//!
//! MPI is a per-process session: the first run under a launcher initialises it (funneled: only
//! the thread that initialised it calls MPI), every later run reuses it, and it is finalised
//! once, when the process exits. When MPI was initialised by someone else (the embedding program,
//! mpi4py...), runs use it and leave its finalisation to its owner. Each run gets its own
//! duplicate of `MPI_COMM_WORLD`, freed when the run ends, so runs never see each other's
//! messages.
//!
//! Large transfers are cut into pieces so that no MPI count exceeds `i32::MAX` (the sum of a
//! round's pieces stays below 1 GiB).

use crate::comm::{Comm, PendingBarrier, ReduceOp, Tag};
use crate::launch_error::LaunchError;
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source, Status};
use mpi::request::Request;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};

/// MPI in this process, once a run has looked at it.
struct Session {
    /// The universe when this crate initialised MPI: finalised at process exit. `None` when
    /// someone else initialised MPI: they finalise it.
    universe: Option<Universe>,
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// Finalise MPI at process exit, if this crate initialised it and the exiting thread is the one
/// that did (funneled: MPI may not be called from another thread; a process ended from another
/// thread, e.g. by a second SIGINT, exits without finalising, as it did before).
extern "C" fn finalize_at_exit() {
    let Ok(mut session) = SESSION.try_lock() else {
        return;
    };
    if let Some(s) = session.as_mut() {
        if is_thread_main() && !mpi::environment::is_finalized() {
            drop(s.universe.take());
        }
    }
}

/// True when the calling thread may call MPI: the thread that initialised it.
fn is_thread_main() -> bool {
    let mut flag: std::os::raw::c_int = 0;
    // SAFETY: MPI is initialised (callers check) and `flag` is a valid out-pointer.
    unsafe { mpi::ffi::MPI_Is_thread_main(&mut flag) };
    flag != 0
}

/// Make MPI ready for a run: initialise it on the first call (and arrange its finalisation at
/// process exit), reuse it afterwards, or use the MPI someone else initialised.
fn session() -> Result<(), LaunchError> {
    let mut session = SESSION.lock().unwrap_or_else(PoisonError::into_inner);
    if session.is_none() {
        let universe = match mpi::initialize_with_threading(mpi::Threading::Funneled) {
            Some((universe, _level)) => {
                // SAFETY: registers a plain `extern "C" fn()`, as atexit expects. Should it fail
                // (out of atexit slots), MPI is left unfinalised at exit.
                unsafe { libc::atexit(finalize_at_exit) };
                Some(universe)
            }
            None if mpi::environment::is_finalized() => return Err(LaunchError::MpiFinalized),
            None => None,
        };
        *session = Some(Session { universe });
    }
    if mpi::environment::is_finalized() {
        return Err(LaunchError::MpiFinalized);
    }
    if !is_thread_main() {
        return Err(LaunchError::MpiThread);
    }
    Ok(())
}

/// Bytes moved by all ranks together in one round of a collective, at most (1 GiB, well below
/// `i32::MAX`). `MFU_MPI_ROUND_BYTES` lowers it, which the tests use to force many rounds.
fn round_bytes() -> usize {
    static ROUND: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *ROUND.get_or_init(|| {
        std::env::var("MFU_MPI_ROUND_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(1 << 30)
            .min(1 << 30)
    })
}

/// A send still in flight, with the buffer it owns (leaked until the request completes).
struct PendingSend {
    request: Option<Request<'static, [u8]>>,
    buffer: *mut [u8],
}

impl PendingSend {
    /// True once done; then the buffer has been freed.
    fn poll(&mut self) -> bool {
        let Some(req) = self.request.take() else {
            return true;
        };
        match req.test() {
            Ok(_) => {
                // SAFETY: the buffer came from Box::leak in `send`, and MPI no longer uses it.
                drop(unsafe { Box::from_raw(self.buffer) });
                true
            }
            Err(req) => {
                self.request = Some(req);
                false
            }
        }
    }
}

/// One MPI process's rank in `MPI_COMM_WORLD` (a private duplicate of it, freed on drop).
pub struct MpiComm {
    world: SimpleCommunicator,
    pending: RefCell<Vec<PendingSend>>,
}

/// The first line of the MPI library's version string (`Open MPI v4.1.4, ...`, `MPICH Version:
/// 4.0.2`), or "an unknown MPI".
pub fn library_version() -> String {
    mpi::environment::library_version()
        .ok()
        .and_then(|v| v.lines().next().map(|l| l.trim().to_string()))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "an unknown MPI".to_string())
}

impl MpiComm {
    /// This process's rank in a new duplicate of `MPI_COMM_WORLD`, initialising MPI
    /// (funneled) if no one has yet; collective over `MPI_COMM_WORLD`. Fails when MPI was
    /// finalised already, or when called from another thread than the one that initialised MPI.
    pub fn init() -> Result<MpiComm, LaunchError> {
        session()?;
        Ok(MpiComm {
            world: SimpleCommunicator::world().duplicate(),
            pending: RefCell::new(Vec::new()),
        })
    }

    fn op(op: ReduceOp) -> SystemOperation {
        match op {
            ReduceOp::Sum => SystemOperation::sum(),
            ReduceOp::Max => SystemOperation::max(),
            ReduceOp::Min => SystemOperation::min(),
            ReduceOp::Or => SystemOperation::bitwise_or(),
        }
    }

    /// True when this MPI compares `MPI_UINT64_T` as signed in `MPI_MAX`. Found once per
    /// process by a collective probe, made by every rank at its first Max or Min reduction
    /// (collectives are called in the same order on every rank, so they all probe together).
    fn signed_max(&self) -> bool {
        static SIGNED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *SIGNED.get_or_init(|| {
            let mine = [if self.rank() == 0 { 1u64 << 63 } else { 0 }];
            let mut max = [0u64];
            self.world
                .all_reduce_into(&mine[..], &mut max[..], SystemOperation::max());
            max[0] != 1 << 63
        })
    }

    fn piece(&self) -> usize {
        (round_bytes() / self.size()).max(1)
    }
}

struct MpiBarrier(Option<Request<'static, ()>>);

impl PendingBarrier for MpiBarrier {
    fn test(&mut self) -> bool {
        match self.0.take() {
            None => true,
            Some(r) => match r.test() {
                Ok(_) => true,
                Err(r) => {
                    self.0 = Some(r);
                    false
                }
            },
        }
    }
}

impl Drop for MpiBarrier {
    fn drop(&mut self) {
        // rsmpi panics on dropping an unfinished request: finish it instead.
        if let Some(r) = self.0.take() {
            r.wait();
        }
    }
}

/// A zeroed buffer of `len` bytes that owns a real allocation even when empty: Open MPI rejects
/// a collective whose send and receive buffers are the same address, which two empty `Vec`s
/// (both dangling at the same address) would be.
fn real_buffer(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(1));
    v.resize(len, 0);
    v
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).expect("MPI count within i32 (pieces are sized for it)")
}

fn displacements(counts: &[i32]) -> Vec<i32> {
    counts
        .iter()
        .scan(0i32, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn barrier(&self) {
        self.world.barrier();
    }
    fn ibarrier(&self) -> Box<dyn PendingBarrier + '_> {
        Box::new(MpiBarrier(Some(self.world.immediate_barrier())))
    }
    fn allreduce(&self, values: &mut [u64], op: ReduceOp) {
        // Some MPI libraries compare MPI_UINT64_T as signed in MPI_MAX/MPI_MIN (Debian's MPICH
        // 4.0.2 does, in C too): there, flipping the top bit maps unsigned order onto signed
        // order, and back.
        let flip = matches!(op, ReduceOp::Max | ReduceOp::Min) && self.signed_max();
        let send: Vec<u64> = values
            .iter()
            .map(|&v| if flip { v ^ (1 << 63) } else { v })
            .collect();
        self.world.all_reduce_into(&send[..], values, Self::op(op));
        if flip {
            values.iter_mut().for_each(|v| *v ^= 1 << 63);
        }
    }
    fn exscan(&self, values: &mut [u64]) {
        let send = values.to_vec();
        self.world
            .exclusive_scan_into(&send[..], values, SystemOperation::sum());
        if self.rank() == 0 {
            // MPI leaves rank 0's result undefined.
            values.iter_mut().for_each(|v| *v = 0);
        }
    }
    fn bcast(&self, root: usize, bytes: &mut Vec<u8>) {
        let root_proc = self.world.process_at_rank(root as i32);
        let mut len = bytes.len() as u64;
        root_proc.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        for piece in bytes.chunks_mut(round_bytes()) {
            root_proc.broadcast_into(piece);
        }
    }
    fn allgatherv(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let n = self.size();
        let mut lens = vec![0u64; n];
        self.world
            .all_gather_into(&(mine.len() as u64), &mut lens[..]);
        let mut out: Vec<Vec<u8>> = lens
            .iter()
            .map(|&l| Vec::with_capacity(l as usize))
            .collect();
        let piece = self.piece();
        let longest = lens.iter().copied().max().unwrap_or(0) as usize;
        let mut at = 0;
        loop {
            let counts: Vec<i32> = lens
                .iter()
                .map(|&l| to_i32((l as usize).saturating_sub(at).min(piece)))
                .collect();
            let displs = displacements(&counts);
            let total: usize = counts.iter().map(|&c| c as usize).sum();
            // `recv` owns a real allocation, so it never shares an address with `send`.
            let mut recv = real_buffer(total);
            let send = &mine[at.min(mine.len())..(at + piece).min(mine.len())];
            {
                let mut part = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
                self.world.all_gather_varcount_into(send, &mut part);
            }
            for (r, o) in out.iter_mut().enumerate() {
                let d = displs[r] as usize;
                o.extend_from_slice(&recv[d..d + counts[r] as usize]);
            }
            at += piece;
            if at >= longest {
                break;
            }
        }
        out
    }
    fn alltoallv(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let n = self.size();
        assert_eq!(sends.len(), n, "alltoallv needs one buffer per rank");
        let send_lens: Vec<u64> = sends.iter().map(|s| s.len() as u64).collect();
        let mut recv_lens = vec![0u64; n];
        self.world
            .all_to_all_into(&send_lens[..], &mut recv_lens[..]);
        let mut longest = [send_lens.iter().copied().max().unwrap_or(0)];
        self.allreduce(&mut longest, ReduceOp::Max);
        let mut out: Vec<Vec<u8>> = recv_lens
            .iter()
            .map(|&l| Vec::with_capacity(l as usize))
            .collect();
        let piece = self.piece();
        let mut at = 0;
        loop {
            let scounts: Vec<i32> = sends
                .iter()
                .map(|s| to_i32(s.len().saturating_sub(at).min(piece)))
                .collect();
            let rcounts: Vec<i32> = recv_lens
                .iter()
                .map(|&l| to_i32((l as usize).saturating_sub(at).min(piece)))
                .collect();
            let sdispls = displacements(&scounts);
            let rdispls = displacements(&rcounts);
            let mut sendbuf = real_buffer(0);
            for (s, &c) in sends.iter().zip(&scounts) {
                sendbuf.extend_from_slice(&s[at.min(s.len())..at.min(s.len()) + c as usize]);
            }
            let mut recv = real_buffer(rcounts.iter().map(|&c| c as usize).sum());
            {
                let spart = Partition::new(&sendbuf[..], &scounts[..], &sdispls[..]);
                let mut rpart = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispls[..]);
                self.world.all_to_all_varcount_into(&spart, &mut rpart);
            }
            for (r, o) in out.iter_mut().enumerate() {
                let d = rdispls[r] as usize;
                o.extend_from_slice(&recv[d..d + rcounts[r] as usize]);
            }
            at += piece;
            if at as u64 >= longest[0] {
                break;
            }
        }
        out
    }
    fn send(&self, dest: usize, tag: Tag, bytes: Vec<u8>) {
        assert!(
            bytes.len() < i32::MAX as usize,
            "point-to-point message of {} bytes is too large",
            bytes.len()
        );
        let buffer: &'static mut [u8] = Box::leak(bytes.into_boxed_slice());
        let ptr: *mut [u8] = buffer;
        // SAFETY: `ptr` stays valid until the request completes (freed in PendingSend::poll).
        let shared: &'static [u8] = unsafe { &*ptr };
        let request = self
            .world
            .process_at_rank(dest as i32)
            .immediate_send_with_tag(mpi::request::StaticScope, shared, tag);
        let mut pending = self.pending.borrow_mut();
        pending.retain_mut(|p| !p.poll());
        pending.push(PendingSend {
            request: Some(request),
            buffer: ptr,
        });
    }
    fn try_recv(&self, tag: Option<Tag>) -> Option<(usize, Tag, Vec<u8>)> {
        self.pending.borrow_mut().retain_mut(|p| !p.poll());
        let any = self.world.any_process();
        let probed = match tag {
            Some(t) => any.immediate_matched_probe_with_tag(t)?,
            None => any.immediate_matched_probe()?,
        };
        let (bytes, status): (Vec<u8>, Status) = probed.matched_receive_vec();
        Some((status.source_rank() as usize, status.tag(), bytes))
    }
    fn flush_sends(&self) {
        let mut pending = self.pending.borrow_mut();
        while !pending.is_empty() {
            pending.retain_mut(|p| !p.poll());
        }
    }
}

impl Drop for MpiComm {
    fn drop(&mut self) {
        self.flush_sends();
    }
}
