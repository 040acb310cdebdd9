"""The hard-link report of the mpiFileUtils talk: the regular files of a tree that have more
than one link, written as a list (mpiFileUtils cache v4, readable by `mfu-rs walk -i` and the
C tools) and counted.

    python hardlinks.py DIR OUT.mfu             # one rank
    mpirun -np 4 python hardlinks.py DIR OUT.mfu
"""

import os
import stat
import sys

import mfu


def main(argv):
    directory, out = argv[1:3]
    # The six lines of the talk:
    flist = mfu.FList(directory)
    hardlinks = flist.subset(
        lambda f: f.type == mfu.TYPE_FILE and os.stat(f.name)[stat.ST_NLINK] > 1
    )
    hardlinks.write(out)
    # (The walk already has each link count: `lambda f: f.type == mfu.TYPE_FILE and
    # f.nlink > 1` gives the same set without a second stat per file.)
    summary = hardlinks.summarize()
    if mfu.rank() == 0:
        print(f"{summary['files']} files with more than one link ({summary['bytes']} bytes) -> {out}")


if __name__ == "__main__":
    main(sys.argv)
