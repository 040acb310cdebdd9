"""mpi4py initialises MPI first, then mfu uses that MPI (and leaves its finalisation to
mpi4py). Run under a launcher: mpirun -np 2 python mpi4py_first.py TREE DEST"""

import sys

from mpi4py import MPI

assert MPI.Is_initialized()
import mfu  # noqa: E402  (after mpi4py on purpose)

comm = MPI.COMM_WORLD
tree, dest = sys.argv[1:3]
assert (mfu.rank(), mfu.size()) == (comm.Get_rank(), comm.Get_size()), "mfu sees mpi4py's job"
flist = mfu.FList(tree)
# The two libraries' collectives interleave on one job.
assert comm.allreduce(flist.local_count) == len(flist)
copied = mfu.cp(tree + "/", dest, preserve=True)
same = mfu.cmp(tree, dest)
comm.Barrier()
assert copied["status"] == 0 and same["status"] == 0 and same["differing"] == 0, (copied, same)
print(f"mpi4py_first rank {comm.Get_rank()} of {comm.Get_size()}: {len(flist)} entries, copy equal")
