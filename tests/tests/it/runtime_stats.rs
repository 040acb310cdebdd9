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
