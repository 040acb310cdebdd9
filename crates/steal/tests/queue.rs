//! Work stealing: every item processed exactly once, and termination detected, at many rank
//! counts, with seeded random delays in the work and in message delivery.

use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;
use steal::local::{self, Options};
use steal::queue::{self, Config};
use steal::Comm;

/// Item `id`'s children in a 4-ary tree numbered breadth-first (`id * 4 + 1 ..= id * 4 + 4`),
/// cut at `limit`: exactly the ids `0..limit` exist, each reachable once.
fn children(id: u64, limit: u64) -> impl Iterator<Item = u64> {
    (1..=4).map(move |k| id * 4 + k).filter(move |&c| c < limit)
}

fn expected(limit: u64) -> Vec<u8> {
    let mut seen = vec![0u8; limit as usize];
    let mut stack = vec![0u64];
    while let Some(id) = stack.pop() {
        seen[id as usize] += 1;
        stack.extend(children(id, limit));
    }
    seen
}

fn check(ranks: usize, seed: u64, limit: u64, max_delay_us: u64) {
    let counts: Vec<AtomicU8> = (0..limit).map(|_| AtomicU8::new(0)).collect();
    let outcomes = local::run_with(
        ranks,
        Options {
            jitter_seed: Some(seed),
        },
        |comm: &dyn Comm| {
            // All work starts on one rank, so everything else must be stolen.
            let initial = if comm.rank() == ranks / 2 {
                vec![0u64]
            } else {
                vec![]
            };
            let cfg = Config {
                seed,
                ..Config::default()
            };
            queue::run(comm, &cfg, initial, |id, spawned| {
                let prev = counts[id as usize].fetch_add(1, Ordering::Relaxed);
                assert_eq!(prev, 0, "item {id} processed twice");
                if max_delay_us > 0 {
                    let mut rng = SmallRng::seed_from_u64(seed ^ id);
                    std::thread::sleep(Duration::from_micros(rng.random_range(0..max_delay_us)));
                }
                spawned.extend(children(id, limit));
            })
        },
    );
    let want = expected(limit);
    let got: Vec<u8> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    assert_eq!(
        got, want,
        "ranks={ranks} seed={seed}: items processed a wrong number of times"
    );
    let total = want.iter().map(|&c| c as u64).sum::<u64>();
    assert_eq!(total, limit);
    for o in &outcomes {
        assert_eq!(o.processed, total);
        assert!(!o.interrupted);
    }
    assert_eq!(
        outcomes.iter().map(|o| o.processed_here).sum::<u64>(),
        total
    );
    if ranks > 1 {
        assert!(outcomes[0].steals > 0, "ranks={ranks}: nothing was stolen");
    }
}

#[test]
fn exactly_once_at_1_2_4_ranks() {
    for seed in 0..4 {
        for ranks in [1, 2, 4] {
            check(ranks, seed, 3000, 200);
        }
    }
}

#[test]
fn exactly_once_at_16_ranks() {
    for seed in 0..3 {
        check(16, seed, 4000, 300);
    }
}

#[test]
fn exactly_once_at_64_ranks() {
    for seed in 0..2 {
        check(64, seed, 4000, 300);
    }
}

#[test]
fn many_fast_items_without_delays() {
    check(4, 99, 200_000, 0);
    check(16, 98, 100_000, 0);
}

#[test]
fn empty_work_terminates() {
    for ranks in [1, 2, 7] {
        let out = local::run(ranks, |c| {
            queue::run(c, &Config::default(), Vec::<u64>::new(), |_, _| {})
        });
        assert!(out.iter().all(|o| o.processed == 0));
    }
}

#[test]
fn queue_can_run_twice_in_a_row_without_crosstalk() {
    local::run_with(
        4,
        Options {
            jitter_seed: Some(3),
        },
        |c| {
            for round in 0..5u64 {
                let init = if c.rank() == 0 { vec![0u64] } else { vec![] };
                let o = queue::run(c, &Config::default(), init, |id, s| {
                    s.extend(children(id, 500 + round))
                });
                let want: u64 = expected(500 + round).iter().map(|&x| x as u64).sum();
                assert_eq!(o.processed, want);
            }
        },
    );
}

#[test]
fn stop_flag_drops_queued_work_and_reports_interruption() {
    let stop = AtomicBool::new(false);
    let out = local::run(4, |c| {
        let init = if c.rank() == 0 { vec![0u64] } else { vec![] };
        let cfg = Config {
            stop: Some(&stop),
            ..Config::default()
        };
        queue::run(c, &cfg, init, |id, s| {
            if id > 300 {
                stop.store(true, Ordering::Relaxed);
            }
            s.extend(children(id, 1_000_000));
        })
    });
    for o in &out {
        assert!(o.interrupted);
        assert!(o.dropped > 0);
        assert!(o.processed < 1_000_000);
    }
}

#[test]
fn a_panicking_item_panics_the_rank_instead_of_hanging() {
    let r = std::panic::catch_unwind(|| {
        local::run(1, |c| {
            queue::run(c, &Config::default(), vec![1u64], |_, _| panic!("boom"))
        })
    });
    assert!(r.is_err());
}

/// A lone rank runs single items on its own thread (a chain of one-child items), then the
/// fan-out below on the pool: still every item once, and a stop inside the chain drops the rest.
#[test]
fn a_lone_rank_runs_a_chain_inline_then_fans_out() {
    const CHAIN: u64 = 100;
    let limit = 3000;
    let counts: Vec<AtomicU8> = (0..CHAIN + limit).map(|_| AtomicU8::new(0)).collect();
    let out = local::run(1, |c| {
        queue::run(c, &Config::default(), vec![0u64], |id, s| {
            assert_eq!(counts[id as usize].fetch_add(1, Ordering::Relaxed), 0);
            if id < CHAIN {
                s.push(id + 1);
            } else {
                s.extend(children(id - CHAIN, limit).map(|c| c + CHAIN));
            }
        })
    });
    let want = CHAIN + limit;
    assert_eq!(out[0].processed, want);
    assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));

    let stop = AtomicBool::new(false);
    let out = local::run(1, |c| {
        let cfg = Config {
            stop: Some(&stop),
            ..Config::default()
        };
        queue::run(c, &cfg, vec![0u64], |id, s| {
            if id == 50 {
                stop.store(true, Ordering::Relaxed);
            }
            s.push(id + 1);
        })
    });
    assert!(out[0].interrupted);
    assert_eq!((out[0].processed, out[0].dropped), (51, 1));
}

/// Voluntary context switches of the calling thread so far (Linux).
#[cfg(target_os = "linux")]
fn voluntary_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("thread status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("voluntary_ctxt_switches")
}

/// A lone rank leaves its items to the pool's own stealing: the calling thread sleeps until
/// the last task ends (and for progress ticks every 20 ms), instead of being woken to hand out
/// every batch and take back what it spawned. Every item still runs once.
#[cfg(target_os = "linux")]
#[test]
fn a_lone_rank_sleeps_while_its_pool_works() {
    const ITEMS: u64 = 4000;
    let counts: Vec<AtomicU8> = (0..ITEMS).map(|_| AtomicU8::new(0)).collect();
    let (out, switches, elapsed) = local::run(1, |c| {
        let before = voluntary_switches();
        let started = std::time::Instant::now();
        // Two items, so that none runs inline on the calling thread.
        let out = queue::run(c, &Config::default(), vec![0u64, 1], |id, s| {
            assert_eq!(counts[id as usize].fetch_add(1, Ordering::Relaxed), 0);
            // About 20 µs of work, spinning (a sleep would be a switch of a worker only).
            let until = std::time::Instant::now() + Duration::from_micros(20);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
            s.extend([2 * id + 2, 2 * id + 3].into_iter().filter(|&c| c < ITEMS));
        });
        (out, voluntary_switches() - before, started.elapsed())
    })
    .pop()
    .expect("one rank");
    assert_eq!(out.processed, ITEMS);
    assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    // Ticks every 20 ms, the final wake-up, and slack for a busy machine. Handing out batches
    // of at most 16 items woke this thread hundreds of times.
    let allowed = 8 + 2 * elapsed.as_millis() as u64 / 20;
    assert!(
        switches <= allowed,
        "{switches} wake-ups of the calling thread in {elapsed:?} (allowed {allowed})"
    );
}

/// Run from a worker of a one-thread rayon pool, a lone rank's queue does the work on that
/// thread rather than sleeping while it waits for itself.
#[test]
fn a_lone_rank_inside_a_one_thread_pool_finishes() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let processed = pool.install(|| {
        local::run(1, |c| {
            queue::run(c, &Config::default(), vec![0u64], |id, s| {
                s.extend(children(id, 500))
            })
            .processed
        })
    });
    assert_eq!(processed, vec![500]);
}
