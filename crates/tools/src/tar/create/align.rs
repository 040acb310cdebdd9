//! Archive writes aligned to Lustre stripes: no stripe of a shared archive is written by two
//! work items (so never by two ranks, whoever steals what), which would make the ranks trade
//! the stripe's extent lock back and forth.
//!
//! Runs of small entries are cut at stripe boundaries into windows (an entry straddling a
//! boundary is assembled by both sides, each writing its part). Segments that share a stripe
//! then travel as one group, and the segments touching the stripe where a rank's part of the
//! archive begins go to the lowest rank touching that stripe, which writes them with its own.

use crate::tar::create::segment::Segment;
use steal::typed;
use steal::{Comm, CommExt};

/// Cut runs at multiples of `stripe` (bytes).
pub(super) fn windows(segs: Vec<Segment>, stripe: u64) -> Vec<Segment> {
    let mut out = Vec::new();
    for seg in segs {
        let (at, len) = (seg.at(), seg.len());
        let end = at + len;
        if !matches!(seg, Segment::Run { .. }) || len == 0 || at / stripe == (end - 1) / stripe {
            out.push(seg);
            continue;
        }
        let Segment::Run { members, .. } = &seg else {
            unreachable!()
        };
        // Member spans within the run.
        let mut spans = Vec::with_capacity(members.len());
        let mut x = at;
        for m in members {
            spans.push((x, x + m.len()));
            x += m.len();
        }
        let mut lo = at;
        while lo < end {
            let hi = ((lo / stripe + 1) * stripe).min(end);
            let first = spans.partition_point(|s| s.1 <= lo);
            let last = spans.partition_point(|s| s.0 < hi);
            let run = Segment::Run {
                at: spans[first].0,
                members: members[first..last].to_vec(),
            };
            out.push(Segment::Window {
                lo,
                hi,
                run: Box::new(run),
            });
            lo = hi;
        }
    }
    out
}

/// Group consecutive segments (sorted by offset) that share a stripe.
fn group(mut segs: Vec<Segment>, stripe: u64) -> Vec<Segment> {
    segs.sort_by_key(Segment::at);
    let mut out: Vec<Segment> = Vec::new();
    let mut current: Vec<Segment> = Vec::new();
    let mut last_stripe = None;
    for seg in segs {
        let len = seg.len();
        if len == 0 {
            current.push(seg);
            continue;
        }
        let (first, last) = (seg.at() / stripe, (seg.at() + len - 1) / stripe);
        if last_stripe != Some(first) && !current.is_empty() {
            out.push(close(std::mem::take(&mut current)));
        }
        current.push(seg);
        last_stripe = Some(last);
    }
    if !current.is_empty() {
        out.push(close(current));
    }
    out
}

fn close(mut segs: Vec<Segment>) -> Segment {
    if segs.len() == 1 {
        segs.pop().expect("one")
    } else {
        Segment::Group(segs)
    }
}

/// This rank's segments (its part of the archive is `[start, end)`), regrouped so that every
/// stripe of `stripe` bytes is written by one work item. Collective.
pub(super) fn align(
    comm: &dyn Comm,
    segs: Vec<Segment>,
    (start, end): (u64, u64),
    stripe: u64,
) -> Vec<Segment> {
    let starts = comm.allgather_u64(start);
    let ends = comm.allgather_u64(end);
    // The lowest rank whose part touches stripe `k`.
    let owner = |k: u64| {
        let (lo, hi) = (k * stripe, (k + 1) * stripe);
        (0..starts.len())
            .find(|&r| starts[r] < ends[r] && starts[r] < hi && ends[r] > lo)
            .unwrap_or(comm.rank())
    };
    let me = comm.rank();
    let mut keep = Vec::new();
    let mut sends = vec![Vec::new(); comm.size()];
    for seg in windows(segs, stripe) {
        match owner(seg.at() / stripe) {
            o if o == me => keep.push(seg),
            o => typed::encode_into(&seg, &mut sends[o]),
        }
    }
    for bytes in comm.alltoallv(sends) {
        keep.extend(typed::each::<Segment>(&bytes).map(typed::sent));
    }
    group(keep, stripe)
}
