//! `MFU_RS_STATS=1`: the work queue's statistics, one line per queue run from rank 0 on stderr
//! (read by `cargo xtask bench` for its many-ranks rows); nothing without the variable.

use mfu_tests::Tool;
use std::path::Path;

fn tree(dir: &Path) {
    for d in 0..8 {
        let sub = dir.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..20 {
            std::fs::write(sub.join(format!("f{f}")), b"x").unwrap();
        }
    }
}

/// The `key=value` words of the stats lines of `stderr`.
fn stats_lines(stderr: &[u8]) -> Vec<Vec<(String, String)>> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter_map(|l| l.split_once(" stats: queue: "))
        .map(|(_, rest)| {
            rest.split_whitespace()
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn get(line: &[(String, String)], key: &str) -> f64 {
    line.iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        .1
        .parse()
        .unwrap()
}

#[test]
fn thread_ranks_report_their_queue_and_nothing_without_the_variable() {
    let t = tempfile::tempdir().unwrap();
    tree(&t.path().join("src"));
    let src = t.path().join("src");
    let out = Tool::new("walk")
        .ranks(4)
        .args(["-q", src.to_str().unwrap()])
        .env("MFU_RS_STATS", "1")
        .run();
    assert!(out.status.success(), "{out:?}");
    let lines = stats_lines(&out.stderr);
    assert!(
        !lines.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for l in &lines {
        assert_eq!(get(l, "ranks"), 4.0);
        assert!(get(l, "served") + get(l, "refused") <= get(l, "steal_requests"));
        assert!(get(l, "idle_ms_min") <= get(l, "idle_ms_max"));
        assert!(get(l, "token_rounds") >= 1.0, "{l:?}");
    }
    // The walk's queue saw the 9 directories (the root and 8 below it).
    assert!(lines.iter().any(|l| get(l, "items") == 9.0), "{lines:?}");

    let quiet = Tool::new("walk")
        .ranks(4)
        .args(["-q", src.to_str().unwrap()])
        .env_remove("MFU_RS_STATS")
        .run();
    assert!(quiet.status.success());
    assert!(
        stats_lines(&quiet.stderr).is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
}

#[test]
fn under_mpirun_only_rank_0_reports() {
    let t = tempfile::tempdir().unwrap();
    tree(&t.path().join("src"));
    let src = t.path().join("src");
    let out = Tool::new("walk")
        .mpi(2)
        .args(["-q", src.to_str().unwrap()])
        .env("MFU_RS_STATS", "1")
        .run();
    assert!(out.status.success(), "{out:?}");
    let lines = stats_lines(&out.stderr);
    assert!(
        !lines.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Rank 0 prints each queue run once, with both ranks' counts.
    assert!(lines.iter().all(|l| get(l, "ranks") == 2.0), "{lines:?}");
    assert_eq!(
        lines.iter().filter(|l| get(l, "items") == 9.0).count(),
        1,
        "{lines:?}"
    );
}

/// Many more ranks than cores (64 thread ranks here, on however few cores): ranks that find
/// nothing to steal back off (exponentially, up to a cap) and sleep until a message wakes them,
/// instead of asking again as soon as they are refused; work that turns up goes unasked to
/// ranks refused before. Counted, not timed: the requests sent stay within a few per
/// successful steal or gift, 16 per rank for the back-off to grow, and one per rank every 16
/// ms of the run (the back-off's cap at 64 ranks is 32 ms, waits are half to all of it). The
/// old back-off (a new request right after each refusal) sent one per rank every few tens of
/// microseconds unloaded (hundreds per rank on this workload); on a 2-core machine under a
/// load of 13 it still sent 13,980 (bound there 5,800; the new code sent 1,337).
#[test]
fn at_64_thread_ranks_idle_ranks_send_few_steal_requests() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    for d in 0..64 {
        let sub = src.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..4 {
            std::fs::write(sub.join(format!("f{f}")), b"x").unwrap();
        }
    }
    let out = Tool::new("walk")
        .ranks(64)
        .args(["-q", src.to_str().unwrap()])
        .env("MFU_RS_STATS", "1")
        // Each directory takes 5 ms: the walk lasts a few hundred ms, mostly idle ranks.
        .env("MFU_RS_TEST_ITEM_DELAY_MS", "5")
        .run();
    assert!(out.status.success(), "{out:?}");
    let lines = stats_lines(&out.stderr);
    let walk = lines
        .iter()
        .find(|l| get(l, "items") == 65.0)
        .unwrap_or_else(|| panic!("no walk queue in {lines:?}"));
    let ranks = get(walk, "ranks");
    assert_eq!(ranks, 64.0);
    let (sent, served, wall_ms) = (
        get(walk, "steal_requests"),
        get(walk, "served"),
        get(walk, "wall_ms"),
    );
    // (`gifts` is absent from the lines of a build without gifts: 0.)
    let gifts = walk
        .iter()
        .find(|(k, _)| k == "gifts")
        .map_or(0.0, |(_, v)| v.parse().unwrap());
    let moved = served + gifts;
    assert!(moved >= 1.0, "no work moved between ranks: {walk:?}");
    let bound = 10.0 * moved + ranks * (16.0 + wall_ms / 16.0);
    assert!(
        sent <= bound,
        "{sent} steal requests for {moved} served or given in {wall_ms} ms (bound {bound}): {walk:?}"
    );
}

/// rm of a chain 300 directories deep at 4 ranks: the narrow levels are removed by each rank
/// on its own, ranks meeting only where the chain crosses from one to the next; no queue runs
/// per level (there were 300, one per level, each a round of termination detection).
#[test]
fn rm_of_a_deep_chain_runs_no_queue_per_level() {
    let t = tempfile::tempdir().unwrap();
    let top = t.path().join("chain");
    let mut dir = top.clone();
    for _ in 0..300 {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), b"x").unwrap();
        dir.push("d");
    }
    let out = Tool::new("rm")
        .ranks(4)
        .args(["-q", top.to_str().unwrap()])
        .env("MFU_RS_STATS", "1")
        .run();
    assert!(out.status.success(), "{out:?}");
    assert!(!top.exists());
    let lines = stats_lines(&out.stderr);
    // The walk's, the files' and none for the 300 levels of directories.
    assert!(
        (1..=4).contains(&lines.len()),
        "{} queue runs: {}",
        lines.len(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The runtime of progress reporting (tokio) starts only once a progress interval has passed:
/// a run that ends within its first interval never starts it (no start-up cost), a long one
/// draws its lines through it.
#[test]
fn the_progress_runtime_starts_only_for_runs_longer_than_an_interval() {
    let t = tempfile::tempdir().unwrap();
    tree(&t.path().join("src"));
    let src = t.path().join("src");
    let started = |out: &std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let line = err
            .lines()
            .find_map(|l| l.split_once(" stats: progress: runtime_started="))
            .unwrap_or_else(|| panic!("no progress stats line in:\n{err}"));
        (line.1.to_string(), err)
    };
    for ranks in [1, 2] {
        let out = Tool::new("walk")
            .ranks(ranks)
            .args(["--progress", "60", src.to_str().unwrap()])
            .env("MFU_RS_STATS", "1")
            .run();
        assert!(out.status.success(), "{out:?}");
        let (n, err) = started(&out);
        assert_eq!(n, "0", "a short walk started the progress runtime:\n{err}");
        assert!(!err.contains("Walked "), "{err}");
    }
    // Each directory takes 5 ms, progress every 2 ms: lines, through the runtime.
    let out = Tool::new("walk")
        .ranks(2)
        .args(["--progress", "0.002", src.to_str().unwrap()])
        .env("MFU_RS_STATS", "1")
        .env("MFU_RS_TEST_ITEM_DELAY_MS", "5")
        .run();
    assert!(out.status.success(), "{out:?}");
    let (n, err) = started(&out);
    assert_eq!(n, "1", "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("Walked ")).collect();
    assert!(!lines.is_empty(), "no progress line in:\n{err}");
    assert!(lines.iter().all(|l| l.contains("items/s")), "{err}");
}
