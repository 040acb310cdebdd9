"""mfu.FList: walk, read, per-rank iteration, subset, filter, sort, summarize, write."""

import os
import stat

import pytest

import mfu
from conftest import run_plain


def launched_size():
    """The job size the launcher announced (1 without one)."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"):
        if var in os.environ:
            return int(os.environ[var])
    return 1


def text_list(path):
    """The paths of a `path|T` text list as mfu-rs writes it (between its header line and its
    trailer line, which counts them), as bytes, in file order."""
    lines = path.read_bytes().splitlines()
    assert lines[0] == b"#mfu-rs typed list v1", lines[:1]
    assert lines[-1] == b"#mfu-rs end %d" % (len(lines) - 2), lines[-1:]
    return [line.rsplit(b"|", 1)[0] for line in lines[1:-1]]


def test_rank_and_size_are_the_jobs():
    assert mfu.size() == launched_size()
    assert 0 <= mfu.rank() < mfu.size()
    assert mfu.mpi_built() or mfu.size() == 1


def test_walk_counts_each_ranks_part_and_the_total(tree):
    root, counts = tree
    flist = mfu.FList(str(root))
    assert len(flist) == counts["total"]
    assert flist.stat
    # Every rank holds a contiguous share of the global order: offset + own count <= total.
    assert 0 <= flist.offset <= flist.offset + flist.local_count <= len(flist)
    mine = list(flist)
    assert len(mine) == flist.local_count
    for entry in mine:
        assert entry.name.startswith(str(root))
    summary = flist.summarize()
    if mfu.rank() == 0:
        assert summary["total"] == counts["total"]
        assert summary["files"] == counts["files"]
        assert summary["dirs"] == counts["dirs"]
        assert summary["links"] == counts["links"]


def test_entry_attributes_are_lstats(tree):
    root, _ = tree
    for e in mfu.FList([root]):
        st = os.lstat(e.name_bytes)
        assert os.fsencode(e.name) == e.name_bytes
        assert e.mode == st.st_mode and e.uid == st.st_uid and e.gid == st.st_gid
        assert e.size == st.st_size and e.nlink == st.st_nlink and e.inode == st.st_ino
        assert e.mtime_ns == st.st_mtime_ns and e.ctime_ns == st.st_ctime_ns
        if e.type != mfu.TYPE_DIR:
            # (A directory's atime moves when the walk reads it.)
            assert e.atime_ns == st.st_atime_ns
        assert abs(e.mtime - st.st_mtime) < 1e-6
        kind = {stat.S_IFREG: mfu.TYPE_FILE, stat.S_IFDIR: mfu.TYPE_DIR, stat.S_IFLNK: mfu.TYPE_LINK}
        assert e.type == kind[stat.S_IFMT(st.st_mode)]
        assert os.fspath(e) == e.name


def test_a_lite_walk_has_names_and_types_only(tree):
    root, counts = tree
    flist = mfu.FList(root, stat=False)
    assert len(flist) == counts["total"] and not flist.stat
    for e in flist:
        assert e.type in (mfu.TYPE_FILE, mfu.TYPE_DIR, mfu.TYPE_LINK)
        assert e.size is None and e.mtime is None and e.nlink is None


def test_the_hard_link_example_finds_what_find_finds(tree, shared):
    root, _ = tree
    out = shared / "hardlinks.txt"
    # The example of the talk (the list written as text to compare it here).
    flist = mfu.FList(str(root))
    hardlinks = flist.subset(
        lambda f: f.type == mfu.TYPE_FILE and os.stat(f.name)[stat.ST_NLINK] > 1
    )
    hardlinks.write(str(out), format="text")
    assert len(hardlinks) == 3
    for f in hardlinks:
        assert os.stat(f.name).st_nlink > 1
    if mfu.rank() == 0:
        found = run_plain(["find", str(root), "-type", "f", "-links", "+1", "-print0"]).stdout
        assert sorted(text_list(out)) == sorted(p for p in found.split(b"\0") if p)


def test_write_is_byte_identical_to_mfu_rs_walk_o(tree, shared, mfu_rs_bin):
    root, _ = tree
    ours, theirs = shared / "ours.mfu", shared / "theirs.mfu"
    # Both walks leave the directories' access times alone: each list holds the same times.
    flist = mfu.FList(str(root), no_atime=True)
    flist.sort("name")
    flist.write(str(ours))
    if mfu.rank() == 0:
        walk = [mfu_rs_bin, "walk", "-q", "--no-atime"]
        run_plain([*walk, "--sort", "name", "-o", theirs, root])
        assert ours.read_bytes() == theirs.read_bytes()
    mfu.barrier()
    # Unsorted, a walk's order is its threads' (not defined, for the binary too): the two
    # lists hold the same records, which read back and sorted give the same bytes.
    if mfu.size() == 1:
        unsorted_ours, unsorted_theirs = shared / "u-ours.mfu", shared / "u-theirs.mfu"
        mfu.FList(str(root), no_atime=True).write(str(unsorted_ours))
        run_plain([*walk, "-o", unsorted_theirs, root])
        for unsorted in (unsorted_ours, unsorted_theirs):
            back = mfu.FList.read(str(unsorted))
            back.sort("name")
            back.write(str(unsorted) + ".sorted")
        ours_sorted = (shared / "u-ours.mfu.sorted").read_bytes()
        assert ours_sorted == (shared / "u-theirs.mfu.sorted").read_bytes()
        assert ours_sorted == ours.read_bytes()


def test_read_gives_back_what_write_wrote(tree, shared):
    root, counts = tree
    path = shared / "list.mfu"
    flist = mfu.FList(root)
    flist.sort("name")
    flist.write(path)
    back = mfu.FList.read(path)
    assert len(back) == counts["total"] and back.stat
    back.write(shared / "list.txt", format="text")
    names = text_list(shared / "list.txt")
    assert names == sorted(names) and len(names) == counts["total"]
    # A text list reads back as a lite list (names and types).
    lite = mfu.FList.read(shared / "list.txt")
    assert len(lite) == counts["total"] and not lite.stat


def test_filter_evaluates_finds_tests(tree, shared):
    root, _ = tree
    flist = mfu.FList(root)
    h5 = flist.filter(type="f", name="*.h5")
    old = flist.filter(type="f", mtime="+180")
    big = flist.filter(type="f", size="+1k")
    either = flist.filter(type="d,l")
    for e in h5:
        assert e.type == mfu.TYPE_FILE and e.name_bytes.endswith(b".h5")
    for e in old:
        assert e.mtime < 1_600_000_001
    if mfu.rank() == 0:
        found = run_plain(
            ["find", str(root), "-type", "f", "-name", "*.h5"], env_extra={"LC_ALL": "C"}
        ).stdout
        assert len(h5) == len(found.splitlines()) == 7
        assert len(old) == 2
        assert len(big) == 3
        assert len(either) == 5


def test_filter_refuses_unknown_tests_and_bad_values(tree):
    root, _ = tree
    flist = mfu.FList(root)
    with pytest.raises(mfu.Error, match="unknown test 'colour'"):
        flist.filter(colour="red")
    with pytest.raises(mfu.Error, match="bad type"):
        flist.filter(type="x")
    with pytest.raises(mfu.Error, match="bad time"):
        flist.filter(mtime="soon")


def test_sort_orders_the_whole_list(tree, shared):
    root, counts = tree
    flist = mfu.FList(root)
    flist.sort(["-size", "name"])
    sizes = [e.size for e in flist]
    assert sizes == sorted(sizes, reverse=True)
    flist.write(shared / "by-size.txt", format="text")
    if mfu.rank() == 0:
        names = text_list(shared / "by-size.txt")
        assert len(names) == counts["total"]
        # The biggest: the three names of the 5000-byte file, then by name.
        assert names[:3] == [os.fsencode(root / p) for p in ("a.hard2", "sub/a.hard", "sub/deep/a")]
    with pytest.raises(mfu.Error, match="no metadata"):
        mfu.FList(root, stat=False).sort("size")


def test_a_predicate_that_raises_raises_on_every_rank(tree):
    root, _ = tree
    flist = mfu.FList(root)

    def predicate(entry):
        if mfu.rank() == 0:
            raise ValueError("no")
        return True

    expected = ValueError if mfu.rank() == 0 else mfu.Error
    with pytest.raises(expected):
        flist.subset(predicate)
    # The job goes on: a collective call after the failure still meets.
    assert len(flist.subset(lambda e: True)) == len(flist)


def test_a_walk_that_cannot_read_a_path_names_it(shared):
    missing = shared / "missing"
    with pytest.raises(mfu.Error) as info:
        mfu.FList(missing)
    if mfu.rank() == 0:
        assert info.value.path == str(missing)
        assert info.value.operation == "stat"
    partial = mfu.FList([missing, shared], allow_incomplete=True)
    assert partial.walk_errors == 1 and len(partial) >= 1


def test_read_of_a_damaged_list_names_it(shared):
    bad = shared / "bad.mfu"
    if mfu.rank() == 0:
        bad.write_bytes(b"\0\0\0\0\0\0\0\4garbage")
    mfu.barrier()
    with pytest.raises(mfu.Error) as info:
        mfu.FList.read(bad)
    assert info.value.path == str(bad)
    assert info.value.operation == "read list"
