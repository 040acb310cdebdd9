"""Who uses what: files and bytes per user, from one walk.

Each rank counts its own part of the list (one pass in Python); mfu.allgather brings the
per-rank counts together and rank 0 prints the table, biggest first.

    python usage.py DIR
    mpirun -np 4 python usage.py DIR
"""

import collections
import pwd
import sys

import mfu


def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def main(argv):
    flist = mfu.FList(argv[1])
    files = collections.Counter()
    size = collections.Counter()
    for entry in flist:
        if entry.type == mfu.TYPE_FILE:
            files[entry.uid] += 1
            size[entry.uid] += entry.size
    every_rank = mfu.allgather((files, size))
    if mfu.rank() == 0:
        files, size = collections.Counter(), collections.Counter()
        for f, s in every_rank:
            files.update(f)
            size.update(s)
        print(f"{'user':<16} {'files':>10} {'bytes':>16}")
        for uid, nbytes in size.most_common():
            print(f"{user_name(uid):<16} {files[uid]:>10} {nbytes:>16}")
        print(f"{'total':<16} {sum(files.values()):>10} {sum(size.values()):>16}")


if __name__ == "__main__":
    main(sys.argv)
