"""The tools as functions: reports as dicts, usage errors as mfu.Error, failed items as
status 1 with the failures. Every call is collective: all ranks make it, in the same order,
in one MPI process (several tool calls per process)."""

import os

import pytest

import mfu
from conftest import run_plain


def test_cp_then_cmp_in_one_process(tree, shared):
    root, counts = tree
    dest = shared / "copy"
    report = mfu.cp(f"{root}/", dest, preserve=True)
    assert report["status"] == 0 and report["failed"] == 0
    assert report["files"] + report["hardlinks"] == counts["files"]
    assert report["dirs"] == counts["dirs"] and report["symlinks"] == counts["links"]
    same = mfu.cmp(root, dest)
    assert same["status"] == 0 and same["differing"] == 0
    assert same["paths"] == counts["total"]
    mfu.barrier()
    if mfu.rank() == 0:
        (dest / "single").write_bytes(b"2")
        os.utime(dest / "single", ns=(os.lstat(root / "single").st_atime_ns, os.lstat(root / "single").st_mtime_ns))
        (dest / "extra").write_bytes(b"")
    mfu.barrier()
    differ = mfu.cmp(root, dest)
    assert differ["status"] == 1
    # single's bytes, extra (one side only), and the root whose mtime extra moved.
    assert differ["only_dest"] == 1 and differ["differing"] == 3


def test_cp_excludes_and_refuses_a_missing_source(tree, shared):
    root, counts = tree
    report = mfu.cp(f"{root}/", shared / "no-h5", exclude=["*.h5"])
    assert report["status"] == 0
    assert report["files"] + report["hardlinks"] == counts["files"] - 7
    with pytest.raises(mfu.Error, match="missing"):
        mfu.cp(shared / "missing", shared / "x")


def test_sync_dryrun_plans_then_sync_makes_equal(tree, shared):
    root, _ = tree
    dest = shared / "mirror"
    plan = mfu.sync(root, dest, dryrun=True)
    assert plan["dryrun"] and plan["created"] > 0
    if mfu.rank() == 0:
        assert b"create" in plan["output"]
    assert not dest.exists() or not any(dest.iterdir())
    done = mfu.sync(root, dest)
    assert done["status"] == 0 and done["created"] == plan["created"]
    again = mfu.sync(root, dest)
    assert again["created"] == again["updated"] == 0
    assert mfu.cmp(root, dest)["status"] == 0


def test_rm_dryrun_lists_then_rm_of_a_filtered_list_removes_it(tree, shared):
    root, counts = tree
    old = mfu.FList(root).filter(type="f", mtime="+180")
    plan = mfu.rm(old, dryrun=True)
    assert plan["status"] == 0 and plan["dryrun"] and plan["files"] == 2
    if mfu.rank() == 0:
        assert sorted(plan["output"].splitlines()) == [
            os.fsencode(root / "data/run0.txt"),
            os.fsencode(root / "data/run1.txt"),
        ]
    assert (root / "data/run0.txt").exists()
    done = mfu.rm(old, tmpdir=shared)
    assert done["status"] == 0 and done["files"] == 2
    assert not (root / "data/run0.txt").exists() and (root / "data/run2.txt").exists()
    assert len(mfu.FList(root)) == counts["total"] - 2
    # The FList went to rm in memory: nothing was written under tmpdir.
    assert not [p for p in shared.iterdir() if p.name.startswith("mfu-py-")]


def test_an_flist_is_handed_over_in_memory_not_through_a_file(tree, shared):
    root, counts = tree
    # tmpdir names no directory: a list file could not be written there, and none is needed.
    nowhere = shared / "no-such-dir"
    listed = mfu.FList(root).filter(name="run1.*")
    found = mfu.find(listed, tmpdir=nowhere, type="f")
    if mfu.rank() == 0:
        assert sorted(found["matches"]) == [str(root / "data/run1.h5"), str(root / "data/run1.txt")]
    done = mfu.rm(listed, tmpdir=nowhere)
    assert done["status"] == 0 and done["files"] == len(listed)
    assert not nowhere.exists()
    # Exactly the listed entries went.
    assert not list((root / "data").glob("run1.*")) and (root / "data/run2.txt").exists()
    assert len(mfu.FList(root)) == counts["total"] - len(listed)


def test_rm_of_entries_that_are_gone_is_status_1_naming_them(tree, shared):
    root, _ = tree
    listed = mfu.FList(root).filter(name="run2.*")
    mfu.barrier()
    if mfu.rank() == 0:
        os.unlink(root / "data/run2.h5")
    mfu.barrier()
    report = mfu.rm(listed)
    assert report["status"] == 1
    assert report["list_failed"] == 1 and report["files"] == 1
    failures = report["failures"]
    if failures:
        assert any("run2.h5" in f for f in failures)


def test_rm_paths(tree):
    root, counts = tree
    report = mfu.rm(root / "sub")
    assert report["status"] == 0 and report["dirs"] == 2
    assert not (root / "sub").exists()
    with pytest.raises(mfu.Error):
        mfu.rm("/")


def test_tar_create_then_extract(tree, shared):
    root, counts = tree
    archive = shared / "tree.tar"
    made = mfu.tar_create(archive, ["tree"], chdir=shared)
    assert made["status"] == 0 and made["entries"] == counts["total"]
    out = shared / "out"
    if mfu.rank() == 0:
        out.mkdir()
        listed = run_plain(["tar", "-tf", archive]).stdout.splitlines()
        assert len([n for n in listed if not n.startswith(b"DTAR")]) >= counts["total"]
    mfu.barrier()
    back = mfu.tar_extract(archive, out)
    assert back["status"] == 0 and back["entries"] == counts["total"]
    assert mfu.cmp(root, out / "tree", lite=True)["status"] == 0
    with pytest.raises(mfu.Error):
        mfu.tar_extract(shared / "no-such.tar", out)


def test_find_returns_the_matches_or_writes_them(tree, shared):
    root, _ = tree
    found = mfu.find(root, type="f", name="*.h5")
    assert found["status"] == 0 and found["matched"] == 7
    if mfu.rank() == 0:
        assert len(found["matches"]) == 7
        assert os.fsdecode(os.fsencode(root / "sub") + b"/bad\xffname.h5") in found["matches"]
    else:
        assert found["matches"] == []
    listed = mfu.find(root, type="d,l", output=shared / "found.mfu")
    assert listed["matched"] == 5 and listed["matches"] == []
    assert len(mfu.FList.read(shared / "found.mfu")) == 5
    # An FList searched as find's input.
    again = mfu.find(mfu.FList(root), size="-1", type="f")
    assert again["matched"] == 2
