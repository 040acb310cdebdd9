//! `--status-listen` and `--status-file`: the live status of a run, read with a real HTTP
//! client (curl) and read back from the file while the run goes on, at np 1, `--ranks 3` and
//! under `mpirun -np 2`. Each work item is slowed (`MFU_RS_TEST_ITEM_DELAY_MS`) so that a copy
//! of a small tree lasts a few seconds.

use mfu_tests::Tool;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Per work item (a 16 KiB chunk or a directory).
const DELAY_MS: &str = "40";

/// `DIR/src`: 4 directories of 8 files of 64 KiB (4 chunks of 16 KiB each).
fn tree(dir: &Path) {
    for d in 0..4 {
        let sub = dir.join(format!("src/d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..8 {
            std::fs::write(
                sub.join(format!("f{f}")),
                mfu_tests::noise(d * 10 + f + 1, 64 << 10),
            )
            .unwrap();
        }
    }
}

/// `curl URL`: the body of a 2xx answer, `None` when there is none (not listening any more).
fn curl(url: &str) -> Option<String> {
    let out = std::process::Command::new("curl")
        .args(["-sSf", "--max-time", "5", url])
        .output()
        .expect("curl is installed");
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).expect("UTF-8 answer"))
}

/// A started run: its child, the address it serves (from its stderr line), and its stderr
/// (whole once the child ended).
struct Running {
    child: Child,
    base: Option<String>,
    stderr: std::thread::JoinHandle<String>,
    stdout: std::thread::JoinHandle<String>,
}

/// Start `tool`, waiting for the `mfu-rs: status at http://...` line when `listening`.
fn start(tool: &Tool, listening: bool) -> Running {
    let mut cmd = tool.command();
    cmd.env("MFU_RS_TEST_ITEM_DELAY_MS", DELAY_MS)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = mfu_tests::spawn(&mut cmd);
    let mut out = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let (tx, rx) = mpsc::channel();
    let err = BufReader::new(child.stderr.take().unwrap());
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        for line in err.lines() {
            let line = line.unwrap();
            if let Some(url) = line.strip_prefix("mfu-rs: status at ") {
                let _ = tx.send(url.trim_end_matches('/').to_string());
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    let base = listening.then(|| {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("no 'mfu-rs: status at' line within 60 s")
    });
    Running {
        child,
        base,
        stderr,
        stdout,
    }
}

/// The value of the sample `name{...label...}` in Prometheus text.
fn metric(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
}

/// Checks that hold of every status read during a run of `ranks` ranks.
fn check_json(v: &serde_json::Value, ranks: usize) {
    assert_eq!(v["tool"], "cp", "{v}");
    assert_eq!(v["ranks"], ranks, "{v}");
    assert_eq!(v["idle_seconds"].as_array().unwrap().len(), ranks, "{v}");
    for key in ["items", "bytes", "failed"] {
        assert!(v[key].is_u64(), "{key} in {v}");
    }
    for (done, total) in [("items", "items_total"), ("bytes", "bytes_total")] {
        if let Some(t) = v[total].as_u64() {
            assert!(v[done].as_u64().unwrap() <= t, "{done} > {total}: {v}");
        }
    }
    assert!(v["elapsed_seconds"].as_f64().unwrap() >= 0.0, "{v}");
    assert!(v["items_per_second"].as_f64().unwrap() >= 0.0, "{v}");
}

/// Copy the tree with a live status, reading it over HTTP and from its file in a loop until
/// the copy ends; then check the file's last state against the tool's own `--json` report.
fn watch_a_copy(tool: Tool, ranks: usize) {
    let t = tempfile::tempdir().unwrap();
    tree(t.path());
    let file = t.path().join("status.json");
    let tool = tool
        .args(["--status-listen", "127.0.0.1:0", "--status-file"])
        .arg(&file)
        .args(["--status-interval", "0.2", "--progress", "0", "--json"])
        .args(["--chunksize", "16KB"])
        .arg(t.path().join("src"))
        .arg(t.path().join("dst"));
    let mut run = start(&tool, true);
    let base = run.base.clone().unwrap();
    let started = Instant::now();
    // (phase, items) of each status read over HTTP, and the metrics' item counts.
    let mut seen: Vec<(String, u64)> = Vec::new();
    let mut metric_items: Vec<f64> = Vec::new();
    let mut file_reads = 0;
    while run.child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the copy takes too long"
        );
        if let Ok(text) = std::fs::read_to_string(&file) {
            let v: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("the status file is not whole JSON ({e}): {text:?}"));
            check_json(&v, ranks);
            file_reads += 1;
        }
        if let Some(text) = curl(&format!("{base}/status")) {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            check_json(&v, ranks);
            assert_eq!(v["state"], "running", "{v}");
            seen.push((
                v["phase"].as_str().unwrap().to_string(),
                v["items"].as_u64().unwrap(),
            ));
        }
        if let Some(text) = curl(&format!("{base}/metrics")) {
            assert_eq!(
                metric(&text, "mfu_rs_ranks", ""),
                Some(ranks as f64),
                "{text}"
            );
            for r in 0..ranks {
                let idle = metric(
                    &text,
                    "mfu_rs_rank_idle_seconds_total",
                    &format!("rank=\"{r}\""),
                );
                assert!(
                    idle.is_some_and(|s| s >= 0.0),
                    "no idle time of rank {r}:\n{text}"
                );
            }
            assert_eq!(metric(&text, "mfu_rs_running", ""), Some(1.0), "{text}");
            if text.contains("phase=\"Copied\"") {
                metric_items.push(metric(&text, "mfu_rs_items", "").unwrap());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = run.child.wait().unwrap();
    let stderr = run.stderr.join().unwrap();
    let stdout = run.stdout.join().unwrap();
    assert!(status.success(), "{status:?}\n{stderr}");
    // Available from the start (before the first phase has counts) to the end.
    assert!(
        seen.first().is_some_and(|(_, items)| *items < 128),
        "{seen:?}"
    );
    let copied: Vec<u64> = seen
        .iter()
        .filter(|(p, _)| p == "Copied")
        .map(|(_, i)| *i)
        .collect();
    assert!(copied.windows(2).all(|w| w[0] <= w[1]), "{copied:?}");
    assert!(
        copied.first() < copied.last(),
        "the copied items did not grow: {seen:?}"
    );
    assert!(
        metric_items.first() < metric_items.last(),
        "{metric_items:?}"
    );
    assert!(
        file_reads > 3,
        "the status file was read {file_reads} times"
    );
    // The last state: done, with the tool's own totals.
    let last: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(last["state"], "done", "{last}");
    for key in ["items", "bytes", "failed"] {
        assert_eq!(last[key], report[key], "{key}: {last} vs {report}");
    }
    assert_eq!(last["bytes"], 32 * (64 << 10), "{last}");
    // Nothing left beside it, and no server after the run.
    assert_eq!(
        std::fs::read_dir(t.path())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("status"))
            .count(),
        1
    );
    assert!(curl(&format!("{base}/status")).is_none());
}

#[test]
fn one_rank_serves_its_live_status_and_rewrites_the_file() {
    watch_a_copy(Tool::new("cp"), 1);
}

#[test]
fn thread_ranks_report_every_rank_in_the_live_status() {
    watch_a_copy(Tool::new("cp").ranks(3), 3);
}

#[test]
fn under_mpirun_rank_zero_serves_the_status_of_both_ranks() {
    watch_a_copy(Tool::new("cp").mpi(2), 2);
}

/// SIGTERM in the middle of the copy: the file ends with `"state": "stopped"`.
#[test]
fn a_stopped_run_ends_its_status_file_with_stopped() {
    for np in [1, 2] {
        let t = tempfile::tempdir().unwrap();
        tree(t.path());
        let file = t.path().join("status.json");
        let tool = Tool::new("cp")
            .np(np)
            .arg("--status-file")
            .arg(&file)
            .args(["--status-interval", "0.1", "--chunksize", "16KB"])
            .arg(t.path().join("src"))
            .arg(t.path().join("dst"));
        let mut run = start(&tool, false);
        let started = Instant::now();
        loop {
            assert!(started.elapsed() < Duration::from_secs(60), "never copying");
            let v: Option<serde_json::Value> = std::fs::read_to_string(&file)
                .ok()
                .map(|text| serde_json::from_str(&text).unwrap());
            if v.is_some_and(|v| v["phase"] == "Copied" && v["items"].as_u64() > Some(0)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Every rank is signalled, as a batch system does.
        let pids = mfu_tests::job_pids(run.child.id());
        for pid in pids {
            // SAFETY: kill(2) of our child (or its ranks) with a signal number.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let status = run.child.wait().unwrap();
        let stderr = run.stderr.join().unwrap();
        assert_eq!(status.code(), Some(1), "np {np}: {stderr}");
        let last: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(last["state"], "stopped", "np {np}: {last}\n{stderr}");
        assert!(last["bytes"].as_u64().unwrap() < 32 * (64 << 10), "{last}");
    }
}

/// A port in use, or a status file in a missing directory: exit 2 before any work, naming it.
#[test]
fn an_address_in_use_or_a_missing_directory_is_a_usage_error_before_any_work() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let t = tempfile::tempdir().unwrap();
    tree(t.path());
    let dst = t.path().join("dst");
    for np in [1, 2] {
        let out = Tool::new("cp")
            .np(np)
            .args(["--status-listen", &addr])
            .arg(t.path().join("src"))
            .arg(&dst)
            .expect(2);
        let err = out.stderr_str();
        assert!(
            err.contains(&addr) && err.contains("--status-listen"),
            "{err}"
        );
        assert!(!dst.exists(), "work was done before the bind failed");
        let missing = t.path().join("no/such/status.json");
        let out = Tool::new("cp")
            .np(np)
            .arg("--status-file")
            .arg(&missing)
            .arg(t.path().join("src"))
            .arg(&dst)
            .expect(2);
        assert!(
            out.stderr_str().contains("--status-file"),
            "{}",
            out.stderr_str()
        );
        assert!(!dst.exists());
    }
}

/// The progress runtime starts for a status, and only for one (a short run without the options
/// starts none); the status of a run too short for a single interval still ends done.
#[test]
fn the_runtime_starts_only_for_a_status_and_a_short_run_still_ends_done() {
    let t = tempfile::tempdir().unwrap();
    tree(t.path());
    let file = t.path().join("walk-status.json");
    let started = |out: &mfu_tests::Run| {
        let err = out.stderr_str();
        err.lines()
            .find_map(|l| l.split_once(" stats: progress: runtime_started="))
            .unwrap_or_else(|| panic!("no progress stats line in:\n{err}"))
            .1
            .to_string()
    };
    for ranks in [1, 3] {
        let plain = Tool::new("walk")
            .ranks(ranks)
            .args(["--progress", "60"])
            .arg(t.path().join("src"))
            .env("MFU_RS_STATS", "1")
            .expect(0);
        assert_eq!(started(&plain), "0", "{}", plain.stderr_str());
        let with = Tool::new("walk")
            .ranks(ranks)
            .args(["--progress", "60", "--status-file"])
            .arg(&file)
            .arg(t.path().join("src"))
            .env("MFU_RS_STATS", "1")
            .expect(0);
        assert_eq!(started(&with), "1", "{}", with.stderr_str());
        let last: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(last["state"], "done", "{last}");
        assert_eq!(last["tool"], "walk", "{last}");
        assert_eq!(
            last["items"], 37,
            "4 directories of 8 files and the top: {last}"
        );
        assert_eq!(last["ranks"], ranks, "{last}");
    }
}
