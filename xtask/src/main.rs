//! `cargo xtask`: everything a developer or CI repeats.
//!
//! - `cargo xtask setup` — install what the build needs (Open MPI, libclang) when missing.
//! - `cargo xtask demo`  — setup, build, and run a real job: `mpirun -np 2 mfu-rs walk` on a tree.
//! - `cargo xtask test`  — setup, then the whole suite: unit, interop vectors, mpirun -np 1..4,
//!   the tests that run tools as nobody again from a copy under a private path with a space,
//!   the build without MPI, the publish dry run of the published crates, the Python package
//!   (`pip install ./python`, pytest plainly and under mpirun), each criterion bench once, and
//!   a quick strict run of the bench harness on tmpfs.
//! - `cargo xtask bench` — whole-tool comparisons against the classic tools (see `bench/mod.rs`).
//! - `cargo xtask torture` — the seeded torture harness of the data movers (see `torture/mod.rs`);
//!   `test` runs it for about 2 minutes.
//! - `cargo xtask dist --prefix DIR` — install as a site would: binaries, the mpiFileUtils-named
//!   links, man pages and shell completions (see `dist.rs`).

mod bench;
mod dist;
mod gen_list;
mod private_clone;
mod python;
mod setup;
mod slurm;
mod torture;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("setup") => setup::ensure(),
        Some("demo") => demo(),
        Some("test") => test(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("dist") => dist::run_dist(&args[1..]),
        // A synthetic v4 list with no tree (issue 34's out-of-core sort row).
        Some("gen-list") => gen_list::run(&args[1..]),
        // The seeded torture harness (see torture/mod.rs; the debug binary must exist).
        Some("torture") => torture::run(&args[1..]),
        // Only the Python package's step of `test` (the debug binary must exist).
        Some("python") => python::test(&root().join("target/debug/mfu-rs")),
        // Only the private-clone step of `test` (the debug binaries must exist).
        Some("private-clone") => private_clone::check(&root()),
        // Only the Slurm runs of `test` (both MPI builds must exist).
        Some("slurm") => slurm_runs(&root(), &root().join("target/mpich/debug/mfu-rs")),
        // Internal: the memory rows run each rank under it (see bench/memory.rs).
        Some("rss-wrap") => match bench::rss_wrap(&args[1..]) {
            Ok(code) => std::process::exit(code),
            Err(e) => Err(e),
        },
        _ => {
            eprintln!("usage: cargo xtask setup|demo|test|bench|dist|python\n\n  setup  install Open MPI and libclang if missing\n  demo   setup, build, run `mpirun -np 2 mfu-rs walk` on a generated tree\n  test   setup, run every test (unit, vectors, mpirun), build without MPI\n  bench  compare mfu-rs with find/du/cp/rsync/xcp/tar/rm (release build; --help for options)\n  dist   --prefix DIR [--debug]: install bin/ (with dcp, dsync... links), man pages, completions\n  gen-list --records N --out FILE [--seed S]: a synthetic v4 list of made-up files (no tree)\n  torture [--minutes N] [--seed S] [--fs tmpfs|ext4|xfs|btrfs] [--skip CLASS]: the seeded torture harness (--help)\n  python pip install ./python in target/py-venv, pytest plainly and under mpirun -np 2 (needs target/debug/mfu-rs)");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("xtask: {e:#}");
        std::process::exit(1);
    }
}

/// The workspace root (xtask's parent directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Run a command, failing with its command line when it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    let line = format!("{cmd:?}");
    eprintln!("+ {line}");
    let status = cmd.status().with_context(|| format!("start {line}"))?;
    if !status.success() {
        bail!("{line} failed with {status}");
    }
    Ok(())
}

/// Environment that lets Open MPI run here: as root, and more ranks than cores.
pub fn mpi_env(cmd: &mut Command) -> &mut Command {
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        // Loopback only: no network interfaces to probe, no warnings about them.
        .env("OMPI_MCA_btl", "self,vader")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        // PMIx's security by Unix credentials, not munge: with munge installed (for Slurm) but
        // no munged on the system socket, each mpirun retried it for 2.3 s before starting.
        .env("PMIX_MCA_psec", "native")
}

/// `cargo`, the one running xtask when there is one.
pub fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn demo() -> Result<()> {
    setup::ensure()?;
    let root = root();
    run(cargo()
        .current_dir(&root)
        .args(["build", "--release", "-p", "mfu-rs"]))?;
    let bin = root.join("target/release/mfu-rs");
    let dir = std::env::temp_dir().join("mfu-rs-demo");
    let _ = std::fs::remove_dir_all(&dir);
    let tree = dir.join("tree");
    // The tree of the interop vector tree.mfu (seed 1): odd names, long paths, links.
    vectree::build(&tree, 1, false)?;
    let list = dir.join("tree.mfu");
    run(mpi_env(&mut Command::new("mpirun"))
        .args(["-np", "2"])
        .arg(&bin)
        .args(["walk", "--sort", "name", "-o"])
        .arg(&list)
        .arg(&tree))?;
    run(Command::new(&bin).args(["walk", "-p", "-i"]).arg(&list))?;
    eprintln!(
        "demo: walked {} with 2 MPI ranks and saved the list to {}",
        tree.display(),
        list.display()
    );
    Ok(())
}

/// Test modules run a second time against MPICH: those whose tests start mfu-rs under a
/// launcher. Out: launch, runtime_mpi and embed (they run Open MPI's own binaries) and bcast (its
/// fake nodes read Open MPI's rank variables). walk's one failure here (a tree directory made
/// 0777) was the library setting the umask to 0 for a moment while a test built a tree in the
/// same process (engine::umask); reln's (one "keep owner (lchown)" failure) did not come back
/// in four runs under load.
const MPICH_MODULES: &[&str] = &[
    "cp::",
    "sync::",
    "rm::",
    "find::",
    "dup::",
    "chmod::",
    "lists::",
    "filemaker::",
    "cmp::",
    "pipeline::",
    "walk::",
    "reln::",
];

/// walk, cp, sync and tar under a one-node Slurm on localhost: `srun --mpi=pmix` with the Open
/// MPI build, `srun --mpi=pmi2` with the MPICH build (`mpich_bin`). When Slurm can't be started
/// here, says so loudly and goes on (the rest of the suite still counts).
fn slurm_runs(root: &Path, mpich_bin: &Path) -> Result<()> {
    let loud = |why: &str| {
        eprintln!(
            "\n**********\nxtask: SLURM NOT TESTED: {why}\n(install slurm-wlm and munge, run as root)\n**********\n"
        )
    };
    if let Some(why) = slurm::unavailable() {
        loud(&why);
        return Ok(());
    }
    let dir = tempfile_dir("mfu-rs-slurm")?;
    let cluster = match slurm::start(&dir.join("cluster")) {
        Ok(c) => c,
        Err(e) => {
            loud(&format!("{e:#}"));
            return Ok(());
        }
    };
    let result = slurm::check_tools(
        &cluster,
        "pmix",
        &root.join("target/debug/mfu-rs"),
        &dir.join("openmpi"),
    )
    .and_then(|()| slurm::check_tools(&cluster, "pmi2", mpich_bin, &dir.join("mpich")))
    .and_then(|()| {
        slurm::check_requeue(
            &cluster,
            root,
            &root.join("target/debug/mfu-rs"),
            &dir.join("requeue"),
        )
    });
    drop(cluster);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir(what: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}

fn test(extra: &[String]) -> Result<()> {
    setup::ensure()?;
    let root = root();
    // The end-to-end tests run the real binaries: build them first (with and without MPI).
    run(cargo()
        .current_dir(&root)
        .args(["build", "-p", "mfu-rs", "--bins"]))?;
    // The published crates must stay publishable (`cargo install mfu-rs`): names, versions on
    // the path dependencies, metadata, packaged files, resolved in dependency order against a
    // local registry (`publish = false` packages, the tests, benches, xtask and vectree, are
    // skipped). `--no-verify`: a few seconds; building each package again from its .crate
    // recompiled ~100 crates in a fresh clone (the libraries resolve their own dependency
    // versions and features), minutes that the builds below already cover. Before a release,
    // run it without `--no-verify`.
    run(cargo().current_dir(&root).args([
        "publish",
        "--workspace",
        "--dry-run",
        "--no-verify",
        "--allow-dirty",
    ]))?;
    // The documentation builds without a warning (broken or private links, bad HTML;
    // `missing_docs` is warned in every published crate).
    run(cargo()
        .current_dir(&root)
        .args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings"))?;
    let nompi_dir = root.join("target/nompi");
    run(cargo()
        .current_dir(&root)
        .args([
            "build",
            "-p",
            "mfu-rs",
            "--bins",
            "--no-default-features",
            "--target-dir",
        ])
        .arg(&nompi_dir))?;
    let mut cmd = cargo();
    mpi_env(&mut cmd)
        .current_dir(&root)
        .args(["test", "--workspace"])
        .args(extra)
        .env("MFU_RS_BIN", root.join("target/debug/mfu-rs"))
        .env("MFU_RS_NOMPI_BIN", nompi_dir.join("debug/mfu-rs"));
    run(&mut cmd)?;
    // The tests that switch user, again from a copy of the checkout under a private path with
    // a space: they must not depend on where the repository is cloned.
    private_clone::check(&root)?;
    // `import mfu`: pip install ./python in a virtual environment, pytest plainly and under
    // mpirun -np 2.
    python::test(&root.join("target/debug/mfu-rs"))?;
    // The installation as a site lays it out: both binaries, the mpiFileUtils-named links (each
    // answering --version), man pages and completions.
    let prefix = tempfile_dir("mfu-rs-dist")?;
    let dist = dist::run_dist(&[
        "--debug".to_string(),
        "--prefix".to_string(),
        prefix.display().to_string(),
    ]);
    let _ = std::fs::remove_dir_all(&prefix);
    dist?;
    // Any MPI: the same sources built against MPICH, in their own target directory (the
    // system's default MPI stays Open MPI), then real Slurm with both.
    let mpich_dir = root.join("target/mpich");
    run(cargo()
        .current_dir(&root)
        .env("MPICC", "mpicc.mpich")
        .args(["build", "-p", "mfu-rs", "--bins", "--target-dir"])
        .arg(&mpich_dir))?;
    // The modules whose tests run the tools under a launcher, again with MPICH's build and
    // launcher (the tests crate itself, and its MPI check binaries, stay Open MPI's).
    let mut mpich_tests = cargo();
    mpi_env(&mut mpich_tests)
        .current_dir(&root)
        .args(["test", "-p", "mfu-tests", "--test", "it", "--"])
        .args(MPICH_MODULES)
        .env("MFU_RS_BIN", mpich_dir.join("debug/mfu-rs"))
        .env("MFU_RS_NOMPI_BIN", nompi_dir.join("debug/mfu-rs"))
        .env("MFU_TEST_MPIRUN", "mpiexec.mpich");
    run(&mut mpich_tests)?;
    slurm_runs(&root, &mpich_dir.join("debug/mfu-rs"))?;
    // The runtime and the walk must also pass their own tests without MPI.
    run(cargo()
        .current_dir(&root)
        .args([
            "test",
            "-p",
            "mfu-steal",
            "-p",
            "mfu-flist",
            "--no-default-features",
            "--target-dir",
        ])
        .arg(&nompi_dir))?;
    // The criterion benches run once each (test mode, debug build): they must keep working.
    run(cargo()
        .current_dir(&root)
        .args(["test", "-p", "mfu-benches", "--benches"]))?;
    // The PFA bench's binary (the feature `pfa`: MPI and mfu-pfa) runs its workloads at a tiny
    // size at np 1, `--ranks 3` and under `mpirun -np 2`, every byte read back checked; then
    // its section, `--quick`, with the debug builds.
    let mut pfa_bench = cargo();
    mpi_env(&mut pfa_bench).current_dir(&root).args([
        "test",
        "-p",
        "mfu-benches",
        "--features",
        "pfa",
    ]);
    run(&mut pfa_bench)?;
    if Path::new("/dev/shm").is_dir() {
        run(Command::new(std::env::current_exe()?)
            .args(["bench", "section", "pfa", "--quick"])
            .env("MFU_RS_BENCH_BIN", root.join("target/debug/mfu-rs"))
            .env("MFU_PFA_BENCH_BIN", root.join("target/debug/mfu-pfa-bench")))?;
    }
    // The bench harness runs too, on tiny tmpfs workloads with the debug binary and every
    // result checked: it must not rot between the (long) real runs.
    if Path::new("/dev/shm").is_dir() {
        run(Command::new(std::env::current_exe()?)
            .args(["bench", "--quick", "--fs", "tmpfs", "--no-probes"])
            .env("MFU_RS_BENCH_BIN", root.join("target/debug/mfu-rs")))?;
    }
    // The torture harness, bounded (about 2 minutes on tmpfs and loop-mounted ext4, xfs and
    // btrfs), the classes of defects still open left out.
    torture::bounded(&root.join("target/debug/mfu-rs"))?;
    Ok(())
}
