//! The workloads of `cargo xtask bench section pfa` at a tiny size, as the section runs them:
//! one process, `--ranks 3` thread ranks and `mpirun -np 2`. Each run reads back and checks
//! every byte it wrote (exit 1 otherwise); here its report line is checked too, and that it
//! leaves nothing behind. No timing is asserted.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_mfu-pfa-bench");

/// The three launches: (name, command up to the workload's arguments).
fn launches() -> Vec<(&'static str, Command)> {
    let mut mpirun = Command::new(std::env::var("MFU_TEST_MPIRUN").unwrap_or("mpirun".into()));
    mpirun
        .args(["-np", "2", BIN])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("OMPI_MCA_btl", "self,vader")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("PMIX_MCA_psec", "native");
    let mut threads = Command::new(BIN);
    threads.args(["--ranks", "3"]);
    vec![
        ("np 1", Command::new(BIN)),
        ("--ranks 3", threads),
        ("mpirun -np 2", mpirun),
    ]
}

/// Run `args` under every launch in a fresh directory: each report line's `key=value` fields.
fn run_all(args: &[&str]) -> Vec<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (name, mut cmd) in launches() {
        let dir = tempfile::tempdir().unwrap();
        let mut full: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        // The directory comes second-to-last (records, small) or last but one (incremental).
        let at = full.len() - 1;
        full.insert(at, dir.path().display().to_string());
        let o = cmd.args(&full).output().unwrap();
        assert!(
            o.status.success(),
            "{name} {args:?}: {}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        let line = String::from_utf8(o.stdout).unwrap();
        assert_eq!(
            line.lines().count(),
            1,
            "{name} {args:?}: one line from rank 0: {line}"
        );
        assert_eq!(empty(dir.path()), 0, "{name} {args:?} left files behind");
        out.push(
            line.split_whitespace()
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect(),
        );
    }
    out
}

fn empty(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

fn field<'a>(fields: &'a [(String, String)], key: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {key} in {fields:?}"))
}

#[test]
fn records_in_every_layout_are_read_back_from_every_launch() {
    for layout in ["nn", "n1", "pfa"] {
        for (fields, ranks) in run_all(&["records", layout, "3"]).iter().zip([1, 3, 2]) {
            assert_eq!(field(fields, "ranks"), ranks.to_string());
            assert_eq!(field(fields, "layout"), layout);
            assert_eq!(field(fields, "bytes"), (3 * 272_383 * ranks).to_string());
            let files = if layout == "nn" { ranks } else { 1 };
            assert_eq!(field(fields, "files"), files.to_string());
            for k in ["write_s", "read_s", "write_mb_s", "read_mb_s"] {
                assert!(field(fields, k).parse::<f64>().unwrap() > 0.0, "{k}");
            }
        }
    }
}

#[test]
fn small_files_as_files_and_as_streams_are_read_back() {
    for store in ["files", "pfa"] {
        for fields in run_all(&["small", store, "2500"]) {
            assert_eq!(field(&fields, "logical"), "2500");
            // files: 2,500 files, 3 directories and the tree's root; pfa: the aggregate.
            let files = if store == "files" { "2504" } else { "1" };
            assert_eq!(field(&fields, "files"), files, "{store}");
        }
    }
}

#[test]
fn an_incremental_store_writes_about_the_changed_chunks() {
    for fields in run_all(&["incremental", "40"]) {
        let full: f64 = field(&fields, "full_bytes").parse().unwrap();
        let written: f64 = field(&fields, "written_bytes").parse().unwrap();
        // 2 chunks in 40 changed on every rank: 5% of the bytes, plus the index.
        assert!(
            written >= 0.05 * full && written <= 0.10 * full,
            "{fields:?}"
        );
        assert_eq!(field(&fields, "versions_checked"), "2");
    }
}

#[test]
fn kept_small_files_stay_for_the_caller_to_move_aside() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let o = Command::new(BIN)
        .args(["--ranks", "2", "small", "files", &d, "50", "--keep"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let kept = std::fs::read_dir(dir.path().join("files/d000"))
        .unwrap()
        .count();
    assert_eq!(kept, 50);
}
