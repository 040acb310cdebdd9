//! Checks every collective of the `Comm` in use against values computed locally, under a real
//! launch (`mpirun -np N mfu-comm-check`): empty and uneven contributions, and (with a small
//! `MFU_MPI_ROUND_BYTES`) transfers cut into many rounds. Exit 0 and `ok` on success.

use steal::{Comm, CommExt, ReduceOp};

/// Deterministic bytes that rank `src` sends to rank `dst`: empty for some pairs.
fn payload(src: usize, dst: usize) -> Vec<u8> {
    let len = (src * 7 + dst * 13) % 5 * 97;
    (0..len).map(|i| (i + src * 31 + dst) as u8).collect()
}

fn check(comm: &dyn Comm) -> Result<(), String> {
    let (r, n) = (comm.rank(), comm.size());
    let mut v = [r as u64 + 1, 5, r as u64];
    comm.allreduce(&mut v, ReduceOp::Sum);
    let want = [
        (n * (n + 1) / 2) as u64,
        5 * n as u64,
        (n * (n - 1) / 2) as u64,
    ];
    if v != want {
        return Err(format!("allreduce sum {v:?} != {want:?}"));
    }
    for (op, want) in [
        (ReduceOp::Max, n as u64 - 1),
        (ReduceOp::Min, 0),
        (ReduceOp::Or, (0..n as u64).fold(0, |a, b| a | b)),
    ] {
        let mut x = [r as u64];
        comm.allreduce(&mut x, op);
        if x[0] != want {
            return Err(format!("allreduce {op:?} gave {} not {want}", x[0]));
        }
    }
    // Values above i64::MAX: Max and Min compare them as unsigned whatever the MPI library does
    // (Debian's MPICH 4.0.2 compares MPI_UINT64_T as signed).
    let big = 1u64 << 63;
    for (op, mine, want) in [
        (
            ReduceOp::Max,
            if r == 0 { u64::MAX - 3 } else { r as u64 },
            u64::MAX - 3,
        ),
        (ReduceOp::Max, if r == n - 1 { big } else { 0 }, big),
        (
            ReduceOp::Min,
            if r == n - 1 { big + 5 } else { u64::MAX },
            big + 5,
        ),
        (ReduceOp::Min, if r == 0 { 1 } else { big }, 1),
    ] {
        let mut x = [mine];
        comm.allreduce(&mut x, op);
        if x[0] != want {
            return Err(format!(
                "allreduce {op:?} of {mine} gave {} not {want}",
                x[0]
            ));
        }
    }
    let mut e = [r as u64 + 1, 1];
    comm.exscan(&mut e);
    if e != [(r * (r + 1) / 2) as u64, r as u64] {
        return Err(format!("exscan {e:?}"));
    }
    for root in [0, n - 1] {
        let mut b = if r == root {
            payload(root, 99)
        } else {
            b"junk".to_vec()
        };
        comm.bcast(root, &mut b);
        if b != payload(root, 99) {
            return Err(format!("bcast from {root}"));
        }
    }
    // Rank 0 contributes nothing: empty buffers must work.
    let mine = if r == 0 { Vec::new() } else { payload(r, 0) };
    let all = comm.allgatherv(&mine);
    for (s, got) in all.iter().enumerate() {
        let want = if s == 0 { Vec::new() } else { payload(s, 0) };
        if *got != want {
            return Err(format!("allgatherv part of rank {s}"));
        }
    }
    let got = comm.alltoallv((0..n).map(|d| payload(r, d)).collect());
    for (s, part) in got.iter().enumerate() {
        if *part != payload(s, r) {
            return Err(format!("alltoallv part from rank {s}"));
        }
    }
    let empty = comm.alltoallv(vec![Vec::new(); n]);
    if empty.iter().any(|p| !p.is_empty()) {
        return Err("alltoallv of nothing".into());
    }
    if !comm.all(true) {
        return Err("all".into());
    }
    comm.barrier();
    Ok(())
}

fn main() {
    let results = steal::launch::run(None, |comm| {
        let r = check(comm);
        let ok = comm.all(r.is_ok());
        if let Err(e) = &r {
            eprintln!("rank {}: {e}", comm.rank());
        }
        if comm.rank() == 0 && ok {
            println!("ok on {} ranks", comm.size());
        }
        ok
    })
    .expect("launch");
    std::process::exit(if results.iter().all(|&ok| ok) { 0 } else { 1 });
}
