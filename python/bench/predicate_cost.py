"""What a Python predicate costs against the Rust filter, per million entries.

    python predicate_cost.py [ENTRIES] [STAT_FILES]

Builds a text list of ENTRIES paths (default 1,000,000; types and names only) and a tree of
STAT_FILES empty files under /dev/shm (default 100,000; metadata), then times, interleaved and
repeated (median of 5, wall and CPU seconds of this process):
  subset(lambda f: f.type == mfu.TYPE_FILE)          vs filter(type="f")
  subset(lambda f: f.name.endswith(".h5"))           vs filter(name="*.h5")
  subset(lambda f: f.mtime < cutoff)  (stat tree)    vs filter(mtime="+180")
and prints each per million entries. One rank (run it plainly); the filter also uses the rank's
threads (rayon), the predicate one thread.
"""

import os
import shutil
import statistics
import sys
import tempfile
import time

import mfu


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - w, time.process_time() - c, result


def main(argv):
    entries = int(argv[1]) if len(argv) > 1 else 1_000_000
    stat_files = int(argv[2]) if len(argv) > 2 else 100_000
    work = tempfile.mkdtemp(prefix="mfu-predicate-", dir="/dev/shm")
    try:
        listing = os.path.join(work, "list.txt")
        with open(listing, "w") as f:
            for i in range(entries):
                kind = "D" if i % 10 == 0 else "F"
                ext = ".h5" if i % 3 == 0 else ".txt"
                f.write(f"/data/project/d{i // 1000:04}/file{i:07}{ext}|{kind}\n")
        lite = mfu.FList.read(listing)
        tree = os.path.join(work, "tree")
        for d in range(stat_files // 1000 + 1):
            os.makedirs(os.path.join(tree, f"d{d:04}"))
        old = time.time() - 400 * 86400
        for i in range(stat_files):
            p = os.path.join(tree, f"d{i // 1000:04}", f"f{i}")
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY))
            if i % 2:
                os.utime(p, (old, old))
        stat = mfu.FList(tree)
        cutoff = time.time() - 181 * 86400
        cases = [
            ("type == FILE", lite,
             lambda l: l.subset(lambda f: f.type == mfu.TYPE_FILE), lambda l: l.filter(type="f")),
            ("name *.h5", lite,
             lambda l: l.subset(lambda f: f.name.endswith(".h5")), lambda l: l.filter(name="*.h5")),
            ("mtime +180", stat,
             lambda l: l.subset(lambda f: f.mtime < cutoff), lambda l: l.filter(mtime="+180")),
        ]
        print(f"{'test':<14} {'entries':>9}  {'python wall':>12} {'cpu':>8}  {'rust wall':>10} {'cpu':>8}  {'ratio':>6}  (s per million)")
        for name, flist, py, rust in cases:
            runs = {"py": [], "rust": []}
            for _ in range(5):
                for kind, fn in (("py", py), ("rust", rust)):
                    wall, cpu, out = timed(lambda: fn(flist))
                    runs[kind].append((wall, cpu, len(out)))
            assert {r[2] for r in runs["py"]} == {r[2] for r in runs["rust"]}, name
            per = 1e6 / len(flist)
            pw = statistics.median(r[0] for r in runs["py"]) * per
            pc = statistics.median(r[1] for r in runs["py"]) * per
            rw = statistics.median(r[0] for r in runs["rust"]) * per
            rc = statistics.median(r[1] for r in runs["rust"]) * per
            print(f"{name:<14} {len(flist):>9}  {pw:>12.3f} {pc:>8.3f}  {rw:>10.4f} {rc:>8.4f}  {pw / rw:>6.0f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
