//! Launch detection end to end: a launcher of another MPI than the one mfu-rs links, or several
//! tasks started for a build without MPI, is refused before anything is done (exit 2), instead
//! of running N independent one-rank jobs that race each other on the same destination.

use mfu_tests::{bin, clean_env, expect_status, mpi_env, mpirun, nompi_bin};
use std::path::Path;
use std::process::Command;

/// A source with a few files and a destination path that does not exist yet.
fn source_and_dest() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for i in 0..5 {
        std::fs::write(src.join(format!("f{i}")), format!("file {i}\n")).unwrap();
    }
    let dst = tmp.path().join("dst");
    (tmp, src, dst)
}

/// `cp SRC DST` with `program` and `env`, expecting a refusal naming `var` and nothing copied.
fn expect_refused(mut cmd: Command, src: &Path, dst: &Path, var: &str, what: &str) {
    cmd.args(["cp", "-p"]).arg(src).arg(dst);
    let out = expect_status(&mut cmd, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{var}=2")), "{what}: {err}");
    assert!(err.contains(what), "{what}: {err}");
    assert!(
        !dst.exists(),
        "{what}: something was copied before the refusal"
    );
}

#[test]
fn an_mpi_build_refuses_a_launcher_that_announced_more_tasks_than_mpi_joined() {
    let (_tmp, src, dst) = source_and_dest();
    // What each launcher family leaves in the environment of a task that MPI then starts as a
    // singleton (its own one-rank job): Open MPI's mpirun, MPICH's mpiexec (PMI), srun.
    for (var, rank_var) in [
        ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
        ("PMI_SIZE", "PMI_RANK"),
        ("SLURM_STEP_NUM_TASKS", "PMIX_RANK"),
    ] {
        let mut cmd = Command::new(bin());
        mpi_env(&mut cmd).env(var, "2").env(rank_var, "0");
        expect_refused(cmd, &src, &dst, var, "MPI made this process one of 1");
    }
}

#[test]
fn an_mpi_build_refuses_mpichs_mpiexec() {
    assert!(
        Path::new("/usr/bin/mpiexec.mpich").exists(),
        "mpiexec.mpich is missing: `cargo xtask setup` installs it (Debian package mpich)"
    );
    let (_tmp, src, dst) = source_and_dest();
    let mut cmd = Command::new("mpiexec.mpich");
    mpi_env(&mut cmd).args(["-n", "2"]).arg(bin());
    cmd.args(["cp", "-p"]).arg(&src).arg(&dst);
    let out = expect_status(&mut cmd, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("PMI_SIZE=2") && err.contains("one of 1"),
        "{err}"
    );
    assert_eq!(
        err.matches("another MPI").count(),
        1,
        "one message, from the launcher's rank 0: {err}"
    );
    assert!(!dst.exists(), "something was copied before the refusal");
}

#[test]
fn the_right_launcher_still_runs_and_copies() {
    let (_tmp, src, dst) = source_and_dest();
    let mut cmd = mpirun(2, &bin());
    cmd.args(["cp", "-p"]).arg(&src).arg(&dst);
    expect_status(&mut cmd, 0);
    assert_eq!(std::fs::read(dst.join("f4")).unwrap(), b"file 4\n");
}

#[test]
fn a_build_without_mpi_refuses_a_launched_step_but_runs_in_a_batch_shell() {
    let (_tmp, src, dst) = source_and_dest();
    // `srun -n 2` (a step): two copies would race.
    let mut step = Command::new(nompi_bin());
    clean_env(&mut step)
        .env("SLURM_STEP_NUM_TASKS", "2")
        .env("SLURM_STEP_ID", "0")
        .env("SLURM_NTASKS", "2")
        .env("SLURM_PROCID", "0");
    expect_refused(step, &src, &dst, "SLURM_STEP_NUM_TASKS", "without MPI");
    // The script of `sbatch -n 2` runs once, with the allocation's SLURM_NTASKS: one task.
    let mut batch = Command::new(nompi_bin());
    clean_env(&mut batch)
        .env("SLURM_NTASKS", "2")
        .env("SLURM_JOB_ID", "7")
        .args(["cp", "-p"])
        .arg(&src)
        .arg(&dst);
    expect_status(&mut batch, 0);
    assert_eq!(std::fs::read(dst.join("f0")).unwrap(), b"file 0\n");
}

#[test]
fn thread_ranks_under_a_launcher_of_several_tasks_are_refused() {
    let (_tmp, src, dst) = source_and_dest();
    let mut cmd = mpirun(2, &bin());
    cmd.env("MFU_RANKS", "2");
    expect_refused(cmd, &src, &dst, "OMPI_COMM_WORLD_SIZE", "drop --ranks");
}

/// The dynamic loader's list of the libraries a run of `cmd` loaded (`LD_DEBUG=libs`, on
/// stderr), with the run's exit status checked.
fn loaded_libraries(cmd: &mut Command, code: i32) -> String {
    cmd.env("LD_DEBUG", "libs");
    let out = expect_status(cmd, code);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn started_directly_mfu_rs_does_not_load_the_mpi_library() {
    let (_tmp, src, dst) = source_and_dest();
    let mut cmd = Command::new(bin());
    clean_env(&mut cmd).args(["cp", "-p"]).arg(&src).arg(&dst);
    let libs = loaded_libraries(&mut cmd, 0);
    assert!(
        libs.contains("libc.so"),
        "LD_DEBUG=libs said nothing: {libs}"
    );
    assert!(
        !libs.contains("libmpi"),
        "libmpi loaded without a launcher: {libs}"
    );
    assert_eq!(std::fs::read(dst.join("f4")).unwrap(), b"file 4\n");
    // Under a launcher (its variables; MPI then starts as a one-task job) MPI is loaded.
    let mut cmd = Command::new(bin());
    mpi_env(&mut cmd)
        .env("OMPI_COMM_WORLD_SIZE", "1")
        .args(["walk", "-q"])
        .arg(&src);
    let libs = loaded_libraries(&mut cmd, 0);
    assert!(
        libs.contains("libmpi"),
        "no libmpi under a launcher: {libs}"
    );
}

#[test]
fn a_launched_mfu_rs_without_its_mpi_binary_refuses_naming_it() {
    let (tmp, src, dst) = source_and_dest();
    let lone = tmp.path().join("mfu-rs");
    std::fs::copy(bin(), &lone).unwrap();
    let mut cmd = Command::new(&lone);
    clean_env(&mut cmd)
        .env("OMPI_COMM_WORLD_SIZE", "1")
        .env("OMPI_COMM_WORLD_RANK", "0")
        .args(["cp", "-p"])
        .arg(&src)
        .arg(&dst);
    let out = expect_status(&mut cmd, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mfu-rs-mpi"), "{err}");
    assert!(!dst.exists(), "something was copied without MPI");
    // Started directly, the lone binary runs.
    let mut cmd = Command::new(&lone);
    clean_env(&mut cmd).args(["cp", "-p"]).arg(&src).arg(&dst);
    expect_status(&mut cmd, 0);
    assert_eq!(std::fs::read(dst.join("f0")).unwrap(), b"file 0\n");
}
