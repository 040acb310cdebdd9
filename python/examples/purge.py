"""A purge policy: remove the regular files of a tree not accessed in 180 days.

Walk, keep what the policy selects (find's tests, evaluated in Rust in parallel), remove.
Dry run by default: it says what would go and removes nothing; `--delete` removes.

    python purge.py DIR [--days N] [--delete]
    mpirun -np 8 python purge.py /scratch/project --days 180
"""

import argparse
import sys

import mfu


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--delete", action="store_true", help="remove (default: dry run)")
    args = parser.parse_args(argv[1:])

    # A purge must see the whole tree: an unreadable directory raises mfu.Error.
    flist = mfu.FList(args.dir)
    # GNU find's rounding: +180 is "accessed 181 or more days ago".
    old = flist.filter(type="f", atime=f"+{args.days - 1}")
    report = mfu.rm(old, dryrun=not args.delete)
    if mfu.rank() == 0:
        verb = "would remove" if report["dryrun"] else "removed"
        print(f"{len(flist)} entries walked, {len(old)} files not accessed in {args.days} days")
        if report["dryrun"]:
            for path in report["output"].splitlines():
                print("  " + path.decode(errors="surrogateescape"))
        print(f"{verb} {report['files']} files, status {report['status']}")
        for failure in report["failures"]:
            print("  failed: " + failure, file=sys.stderr)
    return report["status"]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
