//! The Python package's step of `cargo xtask test`: `pip install ./python` into a virtual
//! environment, then its tests plainly (one rank) and under `mpirun -np 2` (each rank asserts
//! on its part, rank 0 on the totals).
//!
//! The environment is `target/py-venv`, made once and reused (maturin, pytest and mpi4py from
//! PyPI). The extension is built in the dev profile into the workspace's `target/`, so its
//! dependencies are the ones the rest of the suite compiled already. The interpreter is
//! `$MFU_PYTHON`, else `python3`.

use crate::{mpi_env, root, run};
use anyhow::{Context, Result};
use std::path::Path;
use std::process::Command;

/// Make (or reuse) the environment, install the package, run the tests twice. `bin` is the
/// mfu-rs binary the tests compare lists with.
pub fn test(bin: &Path) -> Result<()> {
    let root = root();
    let venv = root.join("target/py-venv");
    let python = venv.join("bin/python");
    if !python.is_file() {
        let host = std::env::var("MFU_PYTHON").unwrap_or_else(|_| "python3".into());
        run(Command::new(&host).args(["-m", "venv"]).arg(&venv))
            .with_context(|| format!("make a virtual environment with {host} (python3-venv)"))?;
    }
    // maturin's build backend runs `maturin` from PATH: the environment's first.
    let path = match std::env::var_os("PATH") {
        Some(p) => {
            let mut dirs = vec![venv.join("bin")];
            dirs.extend(std::env::split_paths(&p));
            std::env::join_paths(dirs)?
        }
        None => venv.join("bin").into_os_string(),
    };
    let pip = |args: &[&str]| {
        let mut cmd = Command::new(&python);
        cmd.args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(args)
            .env("PATH", &path);
        cmd
    };
    // Already there on later runs: pip checks and returns in a second or two.
    run(&mut pip(&["maturin>=1.7,<2", "pytest", "mpi4py"]))?;
    // `--no-build-isolation`: the environment's maturin, no fresh download per build; the dev
    // profile: the workspace's compiled dependencies are reused. `--force-reinstall`: the
    // version does not change between builds, the extension does.
    run(pip(&[
        "--no-build-isolation",
        "--force-reinstall",
        "--no-deps",
        "./python",
    ])
    .current_dir(&root)
    .env("MATURIN_PEP517_ARGS", "--profile dev"))?;
    let pytest = |cmd: &mut Command| {
        cmd.args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(&root)
        .env("PATH", &path)
        .env("MFU_RS_BIN", bin);
    };
    let mut plain = Command::new(&python);
    pytest(&mut plain);
    run(&mut plain)?;
    let mut launched = Command::new("mpirun");
    mpi_env(&mut launched).args(["-np", "2"]).arg(&python);
    pytest(&mut launched);
    run(&mut launched)
}
