"""mfu.pfa: aggregates written from every rank (append to named streams, close) and read
back (list, read) by any rank, plainly and under mpirun -np 2."""

import os

import pytest

import mfu
import mfu.pfa
from conftest import run_plain


def data(rank, i, n):
    """Bytes that differ by rank, stream and position."""
    return bytes((rank * 31 + i * 7 + k) % 251 for k in range(n))


def write_ranks_streams(path, chunk_size=65536):
    """Every rank writes three streams: one appended to in pieces (over several chunks), one
    with meta, one empty."""
    r = mfu.rank()
    w = mfu.pfa.create(path, chunk_size=chunk_size)
    for piece in range(5):
        w.append(f"rank{r}/big", data(r, piece, 40_000))
    w.append(f"rank{r}/small".encode(), b"hello", meta=b"\x01meta")
    w.append(f"rank{r}/empty", b"")
    assert w.names() == [f"rank{r}/big".encode(), f"rank{r}/small".encode(), f"rank{r}/empty".encode()]
    return w.close()


def test_write_then_read_every_ranks_streams(shared):
    path = shared / "a.pfa"
    written = write_ranks_streams(path)
    n = mfu.size()
    assert written["version"] == 1
    assert written["streams"] == 3 * n
    assert written["logical_bytes"] == n * (5 * 40_000 + 5)
    idx = mfu.pfa.open(path)
    assert idx.versions() == [1] and idx.latest == 1
    streams = idx.streams()
    assert [s["name"] for s in streams] == sorted(
        f"rank{r}/{s}".encode() for r in range(n) for s in ("big", "empty", "small")
    )
    by_name = {s["name"]: s for s in streams}
    for r in range(n):
        big = b"".join(data(r, piece, 40_000) for piece in range(5))
        assert idx.read(f"rank{r}/big") == big
        assert by_name[f"rank{r}/big".encode()]["size"] == len(big)
        assert by_name[f"rank{r}/big".encode()]["chunks"] >= 3
        assert idx.read(f"rank{r}/small".encode()) == b"hello"
        assert by_name[f"rank{r}/small".encode()]["meta"] == b"\x01meta"
        assert idx.read(f"rank{r}/empty") == b""
    with pytest.raises(mfu.Error, match="no stream"):
        idx.read("nowhere")


def test_a_new_version_keeps_the_old_one_readable(shared):
    path = shared / "v.pfa"
    write_ranks_streams(path)
    r = mfu.rank()
    w = mfu.pfa.create(path, new_version=True)
    for piece in range(5):
        changed = data(r, piece, 40_000)
        if piece == 2:
            changed = b"x" * 40_000
        w.append(f"rank{r}/big", changed)
    w.append(f"rank{r}/small", b"hello again")
    written = w.close()
    assert written["version"] == 2
    assert written["chunks_reused"] >= 1
    idx = mfu.pfa.open(path)
    assert idx.versions() == [1, 2]
    for q in range(mfu.size()):
        v1 = b"".join(data(q, p, 40_000) for p in range(5))
        v2 = b"".join(b"x" * 40_000 if p == 2 else data(q, p, 40_000) for p in range(5))
        assert idx.read(f"rank{q}/big", version=1) == v1
        assert idx.read(f"rank{q}/big") == v2
        assert idx.read(f"rank{q}/small", 1) == b"hello"
        assert idx.read(f"rank{q}/small", 2) == b"hello again"
    assert len(idx.streams(1)) == 3 * mfu.size()
    assert len(idx.streams(2)) == 2 * mfu.size()


def test_a_cut_aggregate_is_refused_by_name(shared):
    path = shared / "c.pfa"
    write_ranks_streams(path)
    cut = shared / "cut.pfa"
    if mfu.rank() == 0:
        whole = path.read_bytes()
        cut.write_bytes(whole[: len(whole) - 7])
    mfu.barrier()
    with pytest.raises(mfu.Error, match="cut.pfa"):
        mfu.pfa.open(cut)


def test_one_name_is_one_stream_of_one_rank(shared):
    """Appends to one name on one rank make one stream; the same name on two ranks (under
    mpirun) fails every rank's close and writes nothing."""
    path = shared / "dup.pfa"
    w = mfu.pfa.create(path)
    w.append("same", b"mine")
    w.append("same", b" too")
    if mfu.size() == 1:
        assert w.close()["streams"] == 1
        assert mfu.pfa.open(path).read("same") == b"mine too"
        return
    with pytest.raises(mfu.Error, match="same"):
        w.close()
    assert not path.exists()


def test_the_command_line_reads_what_python_wrote(shared, mfu_rs_bin):
    path = shared / "cli.pfa"
    write_ranks_streams(path)
    if mfu.rank() == 0:
        out = run_plain([mfu_rs_bin, "pfa", "cat", path, "rank0/small"]).stdout
        assert out == b"hello"
        listing = run_plain([mfu_rs_bin, "pfa", "ls", path]).stdout
        assert listing.startswith(f"version 1: {3 * mfu.size()} streams".encode())
    mfu.barrier()


def test_the_writer_closes_as_a_context_manager(shared):
    path = shared / "ctx.pfa"
    with mfu.pfa.create(path) as w:
        w.append(f"r{mfu.rank()}", os.fsencode(f"rank {mfu.rank()}"))
    assert mfu.pfa.open(path).read("r0") == b"rank 0"
    with pytest.raises(mfu.Error, match="closed"):
        w.append("late", b"x")
