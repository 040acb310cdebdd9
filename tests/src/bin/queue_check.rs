//! Runs the work-stealing queue on every rank of a real launch (`mpirun -np N mfu-queue-check
//! ITEMS SEED`) and checks that every item of a 4-ary tree of ITEMS ids was processed exactly
//! once. Exit 0 and `ok ITEMS` on success; exit 1 with the offending ids otherwise.

use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::Mutex;
use std::time::Duration;
use steal::queue::{self, Config};
use steal::{Comm, CommExt};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: ITEMS SEED"))
        .collect();
    let (items, seed) = (args[0], args[1]);
    let codes = steal::launch::run(None, |comm: &dyn Comm| {
        let done = Mutex::new(Vec::new());
        let initial = if comm.rank() == comm.size() - 1 {
            vec![0u64]
        } else {
            vec![]
        };
        let outcome = queue::run(
            comm,
            &Config {
                seed,
                ..Config::default()
            },
            initial,
            |id: u64, spawned| {
                let mut rng = SmallRng::seed_from_u64(seed ^ id);
                std::thread::sleep(Duration::from_micros(rng.random_range(0..50)));
                done.lock().unwrap().push(id);
                spawned.extend((1..=4).map(|k| id * 4 + k).filter(|&c| c < items));
            },
        );
        let mine: Vec<u8> = done
            .into_inner()
            .unwrap()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let all = comm.allgatherv(&mine);
        let mut seen = vec![0u32; items as usize];
        for part in &all {
            for b in part.chunks_exact(8) {
                seen[u64::from_le_bytes(b.try_into().unwrap()) as usize] += 1;
            }
        }
        let bad: Vec<usize> = (0..items as usize).filter(|&i| seen[i] != 1).collect();
        let ok = bad.is_empty() && outcome.processed == items && comm.all(true);
        if comm.rank() == 0 {
            if ok {
                println!(
                    "ok {items} on {} ranks, {} steals",
                    comm.size(),
                    outcome.steals
                );
            } else {
                println!(
                    "FAILED: {} ids not processed exactly once (first: {:?}), processed {}",
                    bad.len(),
                    &bad[..bad.len().min(10)],
                    outcome.processed
                );
            }
        }
        ok
    })
    .expect("launch");
    std::process::exit(if codes.iter().all(|&c| c) { 0 } else { 1 });
}
