"""mfu beside mpi4py in both orders, and the example scripts."""

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import mfu
from conftest import plain_env

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"


def launched():
    return any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def test_mpi4py_and_mfu_share_one_job(tree, shared):
    root, _ = tree
    if launched():
        # Under the launcher mfu initialised MPI at import (conftest): mpi4py, imported now,
        # uses it, and the two libraries' calls interleave.
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        assert (comm.Get_rank(), comm.Get_size()) == (mfu.rank(), mfu.size())
        flist = mfu.FList(root)
        assert comm.allreduce(flist.local_count) == len(flist)
        comm.Barrier()
    else:
        # A plain run starts a job of two whose script initialises MPI with mpi4py first.
        mpirun = os.environ.get("MFU_TEST_MPIRUN", "mpirun")
        env = {
            **plain_env(),
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1",
        }
        script = HERE / "scripts" / "mpi4py_first.py"
        done = subprocess.run(
            [mpirun, "-np", "2", sys.executable, script, root, shared / "copy"],
            env=env,
            capture_output=True,
            timeout=300,
        )
        if not mfu.mpi_built():
            # Without MPI, two tasks would each run alone over the same files: refused.
            assert done.returncode != 0
            assert b"built without MPI, but the launcher started 2 tasks" in done.stderr
            return
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        # The launcher forwards each rank's output as it comes: one rank's line can arrive
        # between another's text and its newline, so the lines are found, not split.
        found = re.findall(r"mpi4py_first rank \d+ of \d+: [^\n]*?copy equal", done.stdout.decode())
        lines = sorted(found)
        assert lines == [
            f"mpi4py_first rank {r} of 2: 22 entries, copy equal" for r in (0, 1)
        ], done.stdout


def run_example(name, *args):
    """Run an example in this process (so on every rank of the job), as its command line."""
    argv = sys.argv
    sys.argv = [str(EXAMPLES / name), *map(str, args)]
    try:
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    except SystemExit as e:
        return e.code
    finally:
        sys.argv = argv
    return 0


def test_example_hardlinks(tree, shared, capsys):
    root, _ = tree
    out = shared / "hardlinks.mfu"
    assert run_example("hardlinks.py", root, out) == 0
    printed = capsys.readouterr().out
    if mfu.rank() == 0:
        assert printed == f"3 files with more than one link (15000 bytes) -> {out}\n"
    assert len(mfu.FList.read(out)) == 3


def test_example_purge_dry_run_then_delete(tree, capsys):
    root, counts = tree
    assert run_example("purge.py", root) == 0
    printed = capsys.readouterr().out
    if mfu.rank() == 0:
        assert f"{counts['total']} entries walked, 2 files not accessed in 180 days" in printed
        assert f"  {root}/data/run0.txt\n" in printed
        assert "would remove 2 files, status 0" in printed
    assert (root / "data/run0.txt").exists()
    assert run_example("purge.py", root, "--delete") == 0
    assert "removed 2 files" in capsys.readouterr().out or mfu.rank() != 0
    assert not (root / "data/run0.txt").exists()


def test_example_usage(tree, capsys):
    root, counts = tree
    assert run_example("usage.py", root) == 0
    printed = capsys.readouterr().out.splitlines()
    if mfu.rank() == 0:
        total = sum(os.lstat(p).st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        # rglob reaches each hard link by its own name: the walk counts every name too.
        assert printed[-1].split() == ["total", str(counts["files"]), str(total)]
    else:
        assert printed == []
