//! The libraries embedded in a program: many runs per process (MPI initialised once, finalised
//! at exit), and the examples of `crates/tools/examples`, without a launcher and under mpirun.

use mfu_tests::{clean_env, expect_status, mpirun};
use std::path::Path;
use std::process::Command;

/// A source of a few files and two destinations that do not exist yet.
fn source_and_dests() -> (tempfile::TempDir, [std::path::PathBuf; 3]) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for i in 0..6 {
        std::fs::write(src.join(format!("f{i}")), format!("file {i}\n")).unwrap();
    }
    std::fs::write(src.join("sub/g"), b"deeper\n").unwrap();
    let (d1, d2) = (tmp.path().join("dst1"), tmp.path().join("dst2"));
    (tmp, [src, d1, d2])
}

fn assert_copied(dst: &Path) {
    assert_eq!(std::fs::read(dst.join("f5")).unwrap(), b"file 5\n");
    assert_eq!(std::fs::read(dst.join("sub/g")).unwrap(), b"deeper\n");
}

/// `mfu-runs-twice [flags] SRC DST1 DST2` under `cmd`, expecting success on `np` ranks.
fn runs_twice(mut cmd: Command, flags: &[&str], np: usize) {
    let (_tmp, [src, d1, d2]) = source_and_dests();
    cmd.args(flags).arg(&src).arg(&d1).arg(&d2);
    let out = expect_status(&mut cmd, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches(&format!("ok 5 runs on {np} ranks")).count(),
        1,
        "one line, from rank 0: {text}"
    );
    assert_copied(&d1);
    assert_copied(&d2);
}

fn runs_twice_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mfu-runs-twice"))
}

#[test]
fn under_mpirun_a_process_makes_many_runs_and_two_tool_calls() {
    runs_twice(mpirun(2, runs_twice_bin()), &[], 2);
}

#[test]
fn without_a_launcher_a_process_makes_many_runs_and_two_tool_calls() {
    let mut cmd = Command::new(runs_twice_bin());
    clean_env(&mut cmd);
    runs_twice(cmd, &[], 1);
}

#[test]
fn runs_use_the_mpi_their_host_initialised_and_leave_it_to_the_host_to_finalise() {
    runs_twice(mpirun(2, runs_twice_bin()), &["--own-mpi"], 2);
}
