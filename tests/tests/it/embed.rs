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

/// A tree with hard-linked files (a pair, and a triple across directories), single files, a
/// directory and a symlink to a linked file.
fn tree_with_links() -> (tempfile::TempDir, std::path::PathBuf, Vec<Vec<u8>>) {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    std::fs::create_dir_all(root.join("d/e")).unwrap();
    for name in ["single", "d/alone", "d/e/also-alone", "pair1", "tri1"] {
        std::fs::write(root.join(name), name.as_bytes()).unwrap();
    }
    std::fs::hard_link(root.join("pair1"), root.join("d/pair2")).unwrap();
    std::fs::hard_link(root.join("tri1"), root.join("d/tri2")).unwrap();
    std::fs::hard_link(root.join("tri1"), root.join("d/e/tri3")).unwrap();
    std::os::unix::fs::symlink(root.join("pair1"), root.join("link")).unwrap();
    let mut linked: Vec<Vec<u8>> = ["pair1", "d/pair2", "tri1", "d/tri2", "d/e/tri3"]
        .iter()
        .map(|n| root.join(n).as_os_str().as_bytes().to_vec())
        .collect();
    linked.sort();
    (tmp, root, linked)
}

/// Run `hardlinks TREE OUT` under `cmd` and check the list it wrote: exactly the linked files.
fn hardlinks(mut cmd: Command) {
    let (tmp, root, linked) = tree_with_links();
    let out = tmp.path().join("linked.mfu");
    cmd.arg(&root).arg(&out);
    let run = expect_status(&mut cmd, 0);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        text, "5 files with more than one link (22 bytes)\n",
        "the summary, once (rank 0)"
    );
    let lists = steal::local::run(2, |comm| flist::io::read(comm, &out).unwrap());
    let mut paths: Vec<Vec<u8>> = lists
        .iter()
        .flat_map(|l| l.iter().map(|e| e.path.to_vec()))
        .collect();
    paths.sort();
    assert_eq!(paths, linked);
    assert!(lists
        .iter()
        .flat_map(|l| l.iter())
        .all(|e| e.kind == flist::FileType::File));
}

fn hardlinks_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mfu-example-hardlinks"))
}

#[test]
fn the_hardlinks_example_lists_exactly_the_linked_files_without_a_launcher() {
    let mut cmd = Command::new(hardlinks_bin());
    clean_env(&mut cmd);
    hardlinks(cmd);
}

#[test]
fn the_hardlinks_example_lists_exactly_the_linked_files_under_mpirun() {
    hardlinks(mpirun(2, hardlinks_bin()));
}

#[test]
fn the_hardlinks_example_refuses_an_incomplete_walk() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(hardlinks_bin());
    clean_env(&mut cmd)
        .arg(tmp.path().join("missing"))
        .arg(tmp.path().join("out.mfu"));
    let out = expect_status(&mut cmd, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("hardlinks: walk incomplete: 1 path could not be read (first here: stat "),
        "{err}"
    );
    assert!(!tmp.path().join("out.mfu").exists(), "nothing written");
}

fn copy_then_compare_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mfu-example-copy-then-compare"))
}

/// Run `copy_then_compare SRC DST` under `cmd` on a small tree: exit `code`, and with 0 the
/// copy equals the source.
fn copy_then_compare(mut cmd: Command, dest_exists: bool, code: i32) {
    let (tmp, root, _) = tree_with_links();
    let dst = tmp.path().join("copy");
    if dest_exists {
        // cp's rule puts the copy into DST/tree: SRC and DST then differ, and the example says so.
        std::fs::create_dir(&dst).unwrap();
    }
    cmd.arg(&root).arg(&dst);
    let run = expect_status(&mut cmd, code);
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        text.lines().count(),
        1,
        "one summary line, from rank 0: {text}"
    );
    assert!(
        text.starts_with("copied 5 files (36 bytes); compared "),
        "{text}"
    );
    if code == 0 {
        assert!(text.ends_with(": 0 differ\n"), "{text}");
        let diff = Command::new("diff")
            .arg("-r")
            .arg(&root)
            .arg(&dst)
            .output()
            .unwrap();
        assert!(
            diff.status.success(),
            "{}",
            String::from_utf8_lossy(&diff.stdout)
        );
    } else {
        assert!(!text.ends_with(": 0 differ\n"), "{text}");
        assert!(
            dst.join("tree/d/e/tri3").exists(),
            "the copy went into DST/tree"
        );
    }
}

#[test]
fn copy_then_compare_runs_two_tools_in_one_process_without_a_launcher() {
    let mut cmd = Command::new(copy_then_compare_bin());
    clean_env(&mut cmd);
    copy_then_compare(cmd, false, 0);
    let mut cmd = Command::new(copy_then_compare_bin());
    clean_env(&mut cmd);
    copy_then_compare(cmd, true, 1);
}

#[test]
fn copy_then_compare_runs_two_tools_in_one_mpi_process_under_mpirun() {
    copy_then_compare(mpirun(2, copy_then_compare_bin()), false, 0);
    copy_then_compare(mpirun(2, copy_then_compare_bin()), true, 1);
}
