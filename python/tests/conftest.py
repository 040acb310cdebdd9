"""Shared fixtures for the tests of `import mfu`.

The tests run plainly (`python -m pytest`: one rank) and under a launcher
(`mpirun -np 2 python -m pytest`: every rank runs every test, in the same order, so the
collective calls meet). Trees live in a directory all ranks of the job share: rank 0 makes
it, the others wait at `mfu.barrier()`. Each rank asserts on its part of a list; rank 0
asserts on the totals.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import mfu

# Variables through which a launcher tells a process it is a rank of a job: a tool started
# from a test (the binary, find, a nested job) must not believe it is one.
LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "SLURM_", "MPI_LOCALNRANKS", "HYDRA_", "PRTE_")


def plain_env():
    """The environment without the launcher's variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}


def run_plain(args, env_extra=None, **kw):
    """Run a command outside the job (rank 0 only, usually), failing loudly."""
    env = {**plain_env(), **(env_extra or {})}
    return subprocess.run(args, env=env, check=True, capture_output=True, **kw)


@pytest.fixture(scope="session")
def mfu_rs_bin():
    """The mfu-rs binary to compare with: $MFU_RS_BIN, else the workspace's debug build."""
    default = Path(__file__).resolve().parents[2] / "target" / "debug" / "mfu-rs"
    path = Path(os.environ.get("MFU_RS_BIN", default))
    assert path.is_file(), f"{path}: build it first (cargo build -p mfu-rs --bins) or set MFU_RS_BIN"
    return path


@pytest.fixture(scope="session")
def job_dir():
    """A directory shared by the ranks of this job: named after the parent process (the
    launcher, or the shell of a plain run), which all ranks on one node share."""
    base = Path(os.environ.get("MFU_PYTEST_DIR", "/tmp")) / f"mfu-pytest-{os.getppid()}"
    if mfu.rank() == 0:
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
    mfu.barrier()
    yield base
    mfu.barrier()
    if mfu.rank() == 0:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def shared(job_dir, request):
    """A fresh directory for one test, the same on every rank."""
    d = job_dir / request.node.name
    if mfu.rank() == 0:
        d.mkdir()
    mfu.barrier()
    return d


# What build_tree makes: regular files, directories (the root too), symlinks, all entries.
COUNTS = {"files": 17, "dirs": 4, "links": 1, "total": 22}


def build_tree(root: Path):
    """A small tree with hard links, a symlink, a non-UTF-8 name, old and new files
    (COUNTS)."""
    root.mkdir()
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "data").mkdir()
    for i in range(6):
        (root / "data" / f"run{i}.h5").write_bytes(b"x" * (i * 100))
        (root / "data" / f"run{i}.txt").write_text("t" * i)
    (root / "sub" / "deep" / "a").write_bytes(b"a" * 5000)
    os.link(root / "sub" / "deep" / "a", root / "sub" / "a.hard")
    os.link(root / "sub" / "deep" / "a", root / "a.hard2")
    (root / "single").write_bytes(b"1")
    (root / "sub" / os.fsdecode(b"bad\xffname.h5")).write_bytes(b"bad")
    os.symlink("single", root / "link")
    # Old files: last accessed and modified 200 days ago.
    old = 1_600_000_000
    for name in ("data/run0.txt", "data/run1.txt"):
        os.utime(root / name, (old, old))


@pytest.fixture
def tree(shared):
    """`shared/tree`, built by rank 0, and its COUNTS."""
    root = shared / "tree"
    if mfu.rank() == 0:
        build_tree(root)
    mfu.barrier()
    return root, COUNTS
