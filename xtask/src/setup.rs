//! Install what building and testing mfu-rs needs, when it is missing: Open MPI (headers,
//! `mpicc`, `mpirun`), libclang (rsmpi generates its bindings with bindgen), python3 (some
//! tests make their fixtures with it: Python tarfile archives, paths deeper than `PATH_MAX`), rsync (a peer in `cargo xtask bench`), zstd and
//! bsdtar (the tar tests check that other tools read mfu-rs archives and that mfu-rs reads theirs),
//! MPICH (the suite builds against it; the launch tests check that another MPI's launcher is
//! refused), Slurm and munge (a one-node cluster on localhost for the `srun` runs), pigz, bzip2
//! and xz (the compressed-archive tests and the tar-gz bench).

use crate::run;
use anyhow::{bail, Result};
use std::path::Path;
use std::process::Command;

const PACKAGES: &[&str] = &[
    "libopenmpi-dev",
    "openmpi-bin",
    "libclang-dev",
    "pkg-config",
    "python3",
    // The Python package's step: a virtual environment, and the headers mpi4py builds against.
    "python3-venv",
    "python3-dev",
    "rsync",
    "zstd",
    "libarchive-tools",
    // MPICH (`mpicc.mpich`, `mpiexec.mpich`; Open MPI stays the default `mpirun`/`mpicc`): the
    // suite builds mfu-rs against it too, and the launch tests start the Open MPI build with
    // another MPI's launcher.
    "mpich",
    "libmpich-dev",
    // A one-node Slurm on localhost: the suite runs tools under `srun`.
    "slurm-wlm",
    "munge",
    // A terminal for the test of `mfu-rs sh`'s line editing and history (tests/it/sh.rs).
    "tmux",
    // The compressed-archive tests (tests/it/tar_compressed.rs) make .tar.gz, .tar.bz2 and
    // .tar.xz archives with GNU tar and pigz, and read mfu-rs's with gzip and bzip2; the tar-gz
    // bench compares with pigz.
    "pigz",
    "bzip2",
    "xz-utils",
    // `b3sum --check` reads the manifests of --manifest (tests/it/manifest.rs).
    "b3sum",
    // The torture harness runs on loop-mounted xfs and btrfs images too (ext4's mkfs is in
    // e2fsprogs, always there).
    "xfsprogs",
    "btrfs-progs",
    // The atomic-output tests trace the syncs and renames of tar -c and walk -o
    // (tests/it/tar_write.rs, walk.rs).
    "strace",
];

/// True when `program` is on PATH (also how the benches find the peers).
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A libclang shared library in `/usr/lib/llvm-*/lib` or `/usr/lib/<triple>` (where Debian puts it).
fn have_libclang() -> bool {
    let is_libclang = |name: &str| name.starts_with("libclang") && name.contains(".so");
    let dir_has = |d: &Path| {
        std::fs::read_dir(d).is_ok_and(|it| {
            it.flatten()
                .any(|e| is_libclang(&e.file_name().to_string_lossy()))
        })
    };
    std::fs::read_dir("/usr/lib").is_ok_and(|it| {
        it.flatten().any(|e| {
            let p = e.path();
            dir_has(&p) || dir_has(&p.join("lib"))
        })
    })
}

/// Install the missing packages with apt-get (as root, or through sudo).
/// True when `python3` can make a virtual environment (with pip) and has its C headers (mpi4py
/// is built from source against the system MPI).
fn have_python_build() -> bool {
    let probe = "import ensurepip, os, sysconfig, venv; \
                 assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))";
    Command::new("python3")
        .args(["-c", probe])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn ensure() -> Result<()> {
    let missing = !have("mpicc")
        || !have("mpirun")
        || !have_libclang()
        || !have("python3")
        || !have_python_build()
        || !have("tmux")
        || !have("pigz")
        || !have("bzip2")
        || !have("xz")
        || !have("b3sum")
        || !have("mkfs.xfs")
        || !have("mkfs.btrfs")
        || !have("strace")
        || !have("pkg-config")
        || !have("rsync")
        || !have("zstd")
        || !have("bsdtar")
        || !have("mpiexec.mpich")
        || !have("mpicc.mpich")
        || !have("srun")
        || !Path::new("/usr/sbin/slurmd").exists()
        || !Path::new("/usr/sbin/munged").exists();
    if !missing {
        return Ok(());
    }
    if !Path::new("/usr/bin/apt-get").exists() {
        bail!("Open MPI (mpicc, mpirun), MPICH (mpicc.mpich), libclang, python3 (with venv and its headers), rsync, zstd, bsdtar, Slurm, munge, tmux, pigz, bzip2, xz and strace are needed; install them with your package manager");
    }
    let sudo: &[&str] = if is_root() { &[] } else { &["sudo"] };
    let apt = |args: &[&str]| {
        let mut cmd = Command::new(sudo.first().copied().unwrap_or("apt-get"));
        if !sudo.is_empty() {
            cmd.arg("apt-get");
        }
        cmd.args(["-o", "DPkg::Lock::Timeout=600"])
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive");
        cmd
    };
    run(&mut apt(&["update", "-q"]))?;
    run(apt(&["install", "-y", "-q", "--no-install-recommends"]).args(PACKAGES))?;
    Ok(())
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"))
}
