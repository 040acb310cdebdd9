#!/usr/bin/env python3
"""Regenerates the archive corpus of the tar differential test (tests/tests/it/tar_corpus.rs).

    python3 tests/corpus/tar/make.py      (writes next to this script)

Made with GNU tar 1.34, bsdtar 3.6.2 and Python 3.11. The archives are committed: the golden
results (golden.txt) are what mfu-rs did with these exact bytes, so regenerating them with other
tool versions may change the bytes and then needs a new golden file (MFU_BLESS=1, on the code
the golden file was made with). Every input is fixed (names, contents, modes, mtimes, owners,
order); the hostile archives are made byte by byte below, and `mut-*.tar` are seeded mutations
(byte flips, cut points, copied blocks) of the valid ones, as the fuzz tests make them.
"""
import io, os, random, shutil, subprocess, sys, tarfile, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = 1600000000


def out(name):
    return os.path.join(HERE, name)


def run(cmd, cwd):
    env = dict(os.environ, TZ="UTC", LC_ALL="C")
    # ustar and v7 cannot hold some of the tree: the tools say so, skip those and write the rest.
    subprocess.run(cmd, cwd=cwd, check=False, env=env, stderr=subprocess.DEVNULL)


def tree(root):
    """The tree the real tools archive: long names, odd bytes, links, a sparse file."""
    os.makedirs(os.path.join(root, "t/d"), exist_ok=True)
    p = lambda *a: os.path.join(root, "t", *a).encode()
    def w(name, data):
        with open(p(name) if isinstance(name, str) else os.path.join(root.encode(), b"t", name), "wb") as f:
            f.write(data)
    w("f", b"file\n")
    w("d/" + "a" * 150, b"long name\n")
    os.makedirs(p("d/" + "b" * 90 + "/" + "c" * 90), exist_ok=True)
    w("d/" + "b" * 90 + "/" + "c" * 90 + "/" + "e" * 99, b"prefix split\n")
    w(b"d/bad\xff name", b"not utf-8\n")
    w("d/new\nline", b"newline\n")
    w("d/pipe|and space", b"pipe\n")
    w("d/h\u00e9llo", b"utf-8\n")
    os.link(p("f"), p("hard"))
    os.symlink("T" * 180, p("longlink"))
    os.symlink("f", p("sym"))
    os.mkfifo(p("fifo"))
    with open(p("sparse"), "wb") as f:
        f.truncate(96 << 10)
        f.seek(32 << 10)
        f.write(b"S" * 5000)
        f.seek((96 << 10) - 10)
        f.write(b"end of it!")
    os.chmod(p("f"), 0o4755)
    for dirpath, dirs, files in os.walk(root.encode(), topdown=False):
        for n in files + dirs:
            os.utime(os.path.join(dirpath, n), (T0, T0), follow_symlinks=False)
    os.utime(p(b"d/h\xc3\xa9llo".decode("utf-8")), (-86400 * 400 - 0.5, -86400 * 400 - 0.5))
    os.utime(p("d/new\nline"), (2**34 + 7, 2**34 + 7))


def real_tools():
    work = tempfile.mkdtemp()
    try:
        tree(work)
        gnu = ["tar", "--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--blocking-factor=1"]
        for fmt in ["gnu", "oldgnu", "pax", "ustar", "v7"]:
            run(gnu + ["--format=" + fmt, "-cf", out("gnu-%s.tar" % fmt), "t"], work)
        run(gnu + ["--format=gnu", "--sparse", "-cf", out("gnu-sparse-oldgnu.tar"), "t"], work)
        for v in ["0.0", "0.1", "1.0"]:
            run(gnu + ["--format=pax", "--sparse", "--sparse-version=" + v,
                       "--pax-option=delete=atime,delete=ctime",
                       "-cf", out("gnu-sparse-pax-%s.tar" % v), "t"], work)
        run(gnu + ["--format=pax", "--pax-option=globexthdr.name=g,uname:=globaluser,delete=atime,delete=ctime",
                   "-cf", out("gnu-pax-global.tar"), "t"], work)
        run(gnu + ["--format=gnu", "--xattrs", "-cf", out("gnu-dumpless.tar"), "t/f"], work)
        for fmt in ["pax", "ustar", "gnutar"]:
            run(["bsdtar", "-b", "1", "--format=" + fmt, "--uid=0", "--gid=0", "-cf",
                 out("bsdtar-%s.tar" % fmt), "t"], work)
    finally:
        shutil.rmtree(work)


def python_archives():
    def add(tf, name, data=b"", kind=tarfile.REGTYPE, mtime=T0, link="", pax=None, uid=0, **kw):
        ti = tarfile.TarInfo(name)
        ti.type = kind
        ti.size = len(data) if kind == tarfile.REGTYPE else 0
        ti.mtime = mtime
        ti.mode = kw.get("mode", 0o644)
        ti.uid = uid
        ti.gid = kw.get("gid", 0)
        ti.uname = kw.get("uname", "")
        ti.gname = kw.get("gname", "")
        ti.linkname = link
        ti.devmajor = kw.get("devmajor", 0)
        ti.devminor = kw.get("devminor", 0)
        if pax:
            ti.pax_headers = pax
        tf.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

    for fmt, label in [(tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax"), (tarfile.USTAR_FORMAT, "ustar")]:
        path = out("python-%s.tar" % label)
        with tarfile.open(path, "w", format=fmt, encoding="utf-8", errors="surrogateescape") as tf:
            big = fmt != tarfile.USTAR_FORMAT
            add(tf, "p/", kind=tarfile.DIRTYPE, mode=0o755)
            add(tf, "p/" + ("x" * 120 if big else "x" * 99), b"long\n")
            add(tf, "p/bad\udcff.txt", b"bad\n")
            add(tf, "p/mode", b"m\n", mode=0o7777)
            add(tf, "p/chr", kind=tarfile.CHRTYPE, devmajor=1, devminor=3)
            add(tf, "p/blk", kind=tarfile.BLKTYPE, devmajor=8, devminor=1)
            add(tf, "p/fifo", kind=tarfile.FIFOTYPE)
            add(tf, "p/sym", kind=tarfile.SYMTYPE, link="../p/mode")
            add(tf, "p/hard", kind=tarfile.LNKTYPE, link="p/mode")
            if big:
                add(tf, "p/biguid", b"u\n", uid=3000000000, gid=2**31, uname="u" * 40, gname="g\u00e9")
                add(tf, "p/old", b"o\n", mtime=-1000000)
                add(tf, "p/future", b"f\n", mtime=2**35)
                add(tf, "p/L" * 60, kind=tarfile.SYMTYPE, link="L" * 200)
    with tarfile.open(out("python-pax-global.tar"), "w", format=tarfile.PAX_FORMAT,
                      pax_headers={"uid": "77", "mtime": "1500000000.5", "comment": "hi",
                                   "SCHILY.xattr.user.g": "v"}) as tf:
        add(tf, "g/one", b"1\n")
        add(tf, "g/two", b"2\n", pax={"uid": "88", "mtime": "-5.25"})
        add(tf, "g/three", b"3\n", pax={"path": "g/renamed", "linkpath": "x"})


# ---- hand-made archives: each header written field by field --------------------------------

def octal(v, n):
    return (("%0" + str(n - 1) + "o") % v).encode() + b"\0"


def b256(v, n):
    if v < 0:
        v += 1 << (8 * n)
        return v.to_bytes(n, "big")
    return b"\x80" + v.to_bytes(n - 1, "big")


def header(name, size=0, flag=b"0", mode=0o644, uid=0, gid=0, mtime=T0, link=b"", magic=b"ustar\x0000",
           uname=b"", gname=b"", prefix=b"", size_field=None, mtime_field=None, uid_field=None,
           chksum=None, extra=None):
    h = bytearray(512)
    h[0:len(name[:100])] = name[:100]
    h[100:108] = octal(mode, 8)
    h[108:116] = uid_field if uid_field is not None else octal(uid, 8)
    h[116:124] = octal(gid, 8)
    h[124:136] = size_field if size_field is not None else octal(size, 12)
    h[136:148] = mtime_field if mtime_field is not None else octal(mtime, 12)
    h[156:157] = flag
    h[157:157 + len(link[:100])] = link[:100]
    h[257:265] = magic
    h[265:265 + len(uname)] = uname
    h[297:297 + len(gname)] = gname
    h[345:345 + len(prefix)] = prefix
    if extra:
        for at, b in extra:
            h[at:at + len(b)] = b
    h[148:156] = b" " * 8
    s = sum(h) if chksum is None else chksum
    h[148:156] = ("%06o" % s).encode() + b"\0 "
    return bytes(h)


def pad(b):
    return b + b"\0" * (-len(b) % 512)


def rec(k, v):
    body = b" " + k + b"=" + v + b"\n"
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n = len(str(n)) + len(body)
    return str(n).encode() + body


def entry(name, data=b"", **kw):
    return header(name, size=len(data), **kw) + pad(data)


def ext(flag, data, name=b"././@LongLink", size=None):
    return header(name, size=len(data) if size is None else size, flag=flag) + pad(data)


END = b"\0" * 1024
OK = entry(b"ok", b"fine\n")


def hostile():
    H = {}
    H["bad-checksum"] = OK + entry(b"x", b"x\n", chksum=12345) + entry(b"after", b"a\n") + END
    H["signed-checksum"] = entry(b"hi\xe9", b"s\n", chksum=sum(header(b"hi\xe9", 2)[:148]) + 256) + END
    H["negative-size"] = OK + entry(b"neg", size_field=b256(-1, 12)) + END
    H["base256-overflow-size"] = OK + entry(b"big", size_field=b"\x80" + b"\xff" * 11) + END
    H["base256-size"] = entry(b"b256", b"data\n", size_field=b256(5, 12)) + END
    H["base256-negative-mtime"] = entry(b"old", b"o\n", mtime_field=b256(-86400, 12)) + END
    H["base256-uid"] = entry(b"uid", b"u\n", uid_field=b256(5000000, 8)) + END
    H["octal-blank-fields"] = entry(b"blank", b"b\n", mtime_field=b" " * 12) + END
    H["octal-nul-mtime"] = entry(b"nul", b"n\n", mtime_field=b"\0" * 12) + END
    H["octal-garbage"] = entry(b"garb", b"g\n", mtime_field=b"12x4567\0\0\0\0\0") + END
    H["octal-leading-space"] = entry(b"sp", b"s\n", size_field=b"    2\0      ".ljust(12, b" ")[:12]) + END
    H["size-beyond-archive"] = OK + header(b"huge", size=10**9) + b"tiny" + END
    H["pax-nul-in-path"] = OK + ext(b"x", rec(b"path", b"a\0b")) + entry(b"n", b"n\n") + END
    H["pax-nul-in-linkpath"] = ext(b"x", rec(b"linkpath", b"a\0b")) + entry(b"l", flag=b"2", link=b"z") + END
    H["pax-bad-length"] = OK + ext(b"x", b"99 path=abc\n") + entry(b"n", b"n\n") + END
    H["pax-short-length"] = OK + ext(b"x", b"5 path=abc\n") + entry(b"n", b"n\n") + END
    H["pax-length-not-digits"] = OK + ext(b"x", b"1a path=abc\n") + entry(b"n", b"n\n") + END
    H["pax-no-equals"] = OK + ext(b"x", b"11 pathabc\n") + entry(b"n", b"n\n") + END
    H["pax-empty-key"] = OK + ext(b"x", b"9 =value\n") + entry(b"n", b"n\n") + END
    H["pax-size-beyond-archive"] = OK + ext(b"x", rec(b"size", b"999999999999")) + header(b"n", 0) + b"x" * 512 + END
    H["pax-size-negative"] = OK + ext(b"x", rec(b"size", b"-5")) + header(b"n", 0) + END
    H["pax-bad-mtime"] = OK + ext(b"x", rec(b"mtime", b"12..5")) + entry(b"n", b"n\n") + END
    H["pax-bad-uid"] = OK + ext(b"x", rec(b"uid", b"99999999999999999999999")) + entry(b"n", b"n\n") + END
    H["pax-overrides"] = ext(b"x", rec(b"path", b"pax/name") + rec(b"uid", b"1234") + rec(b"gid", b"4321")
                             + rec(b"uname", b"") + rec(b"mtime", b"-1.5") + rec(b"size", b"3")) \
        + entry(b"ustar-name", b"abc", uname=b"root") + END
    H["pax-extension-too-big"] = OK + header(b"x", size=(64 << 20) + 1, flag=b"x") + END
    H["pax-truncated-data"] = OK + header(b"x", size=5000, flag=b"x") + rec(b"path", b"p") + END[:100]
    H["zero-after-extension"] = OK + ext(b"x", rec(b"path", b"p")) + END
    H["global-then-entries"] = ext(b"g", rec(b"uid", b"42") + rec(b"path", b"all") + rec(b"mtime", b"1000")) \
        + entry(b"a", b"a\n") + ext(b"g", rec(b"uid", b"")) + entry(b"b", b"b\n") + END
    H["global-malformed"] = OK + ext(b"g", b"7 uid\n") + entry(b"b", b"b\n") + END
    H["gnu-long-name"] = ext(b"L", b"n" * 300 + b"\0") + entry(b"short", b"l\n", magic=b"ustar  \0") + END
    H["gnu-long-name-no-nul"] = ext(b"L", b"m" * 200) + entry(b"short", b"l\n", magic=b"ustar  \0") + END
    H["gnu-long-link"] = ext(b"K", b"k" * 300 + b"\0") + entry(b"sym", flag=b"2", magic=b"ustar  \0") + END
    H["gnu-long-name-truncated"] = OK + header(b"././@LongLink", size=2000, flag=b"L") + b"z" * 700
    H["gnu-long-name-then-end"] = OK + ext(b"L", b"p\0") + END
    H["dotdot"] = OK + entry(b"../escape", b"e\n") + entry(b"a/../../up", b"u\n") + END
    H["absolute"] = entry(b"/abs/olute", b"a\n") + entry(b"//double", b"d\n") + END
    H["symlink-escape"] = entry(b"l", flag=b"2", link=b"/tmp") + entry(b"l/x", b"through\n") \
        + entry(b"m", flag=b"2", link=b"../..") + entry(b"m/y", b"y\n") + END
    H["hardlink-outside"] = entry(b"h", flag=b"1", link=b"../outside") + entry(b"h2", flag=b"1", link=b"/etc/passwd") + END
    H["hardlink-to-later"] = entry(b"h", flag=b"1", link=b"later") + entry(b"later", b"L\n") + END
    H["empty-name"] = entry(b"", b"e\n") + entry(b".", flag=b"5") + entry(b"./", flag=b"5") + END
    H["dot-slash-names"] = entry(b"./a//b/./c", b"c\n") + entry(b"dir/", flag=b"0") + END
    H["devices-fifo"] = entry(b"c", flag=b"3", extra=[(329, octal(1, 8)), (337, octal(3, 8))]) \
        + entry(b"b", flag=b"4", extra=[(329, octal(8, 8)), (337, b"\0" * 8)]) + entry(b"p", flag=b"6") + END
    H["unknown-flags"] = entry(b"vol", flag=b"V") + entry(b"multi", b"mm\n", flag=b"M") \
        + entry(b"dump", b"Yfoo\0\0", flag=b"D") + entry(b"contig", b"7\n", flag=b"7") \
        + entry(b"nulflag", b"0\n", flag=b"\0") + entry(b"zz", b"?\n", flag=b"Z") + END
    H["mode-high-bits"] = entry(b"m", b"m\n", mode=0o177777) + entry(b"d", flag=b"5", mode=0o1777) + END
    H["v7-header"] = entry(b"v7file", b"v\n", magic=b"\0" * 8, uname=b"ignored") + END
    H["prefix-in-oldgnu"] = entry(b"name", b"n\n", magic=b"ustar  \0", prefix=b"notaprefix") + END
    H["prefix-in-ustar"] = entry(b"name", b"n\n", prefix=b"pre/fix") + END
    H["no-end-blocks"] = OK + entry(b"last", b"l\n")
    H["one-end-block"] = OK + b"\0" * 512
    H["garbage-after-end"] = OK + END + b"garbage" * 100
    H["truncated-in-header"] = OK + entry(b"cut", b"c\n")[:300]
    H["truncated-in-data"] = OK + entry(b"cut", b"c" * 2000)[:1100]
    H["empty-file"] = b""
    H["only-zeros"] = b"\0" * 10240
    H["duplicate-names"] = entry(b"dup", b"first\n") + entry(b"dup", b"second\n") + entry(b"dup", flag=b"5") + END

    def old_sparse(name, segs, real, ext_segs=(), isext=None, stored=None):
        st = sum(s[1] for s in list(segs) + list(ext_segs)) if stored is None else stored
        extra = []
        for i, (o, l) in enumerate(segs[:4]):
            extra += [(386 + 24 * i, octal(o, 12)), (398 + 24 * i, octal(l, 12))]
        extra += [(482, bytes([1 if (ext_segs if isext is None else isext) else 0])), (483, octal(real, 12))]
        b = header(name, size=st, flag=b"S", magic=b"ustar  \0", extra=extra)
        if ext_segs:
            e = bytearray(512)
            for i, (o, l) in enumerate(ext_segs):
                e[24 * i:24 * i + 12] = octal(o, 12)
                e[24 * i + 12:24 * i + 24] = octal(l, 12)
            b += bytes(e)
        return b + pad(b"D" * st)

    H["oldgnu-sparse-good"] = old_sparse(b"s", [(0, 10), (1000, 20), (5000, 1), (6000, 2)], 9000,
                                         ext_segs=[(7000, 3), (8999, 1)]) + END
    H["oldgnu-sparse-overlap"] = old_sparse(b"s", [(0, 100), (50, 10)], 1000) + END
    H["oldgnu-sparse-beyond"] = old_sparse(b"s", [(0, 10), (995, 10)], 1000) + END
    H["oldgnu-sparse-sum-mismatch"] = old_sparse(b"s", [(0, 10)], 1000, stored=20) + END
    H["oldgnu-sparse-ext-missing"] = old_sparse(b"s", [(0, 10)], 1000, isext=True)[:512]

    def pax_sparse(records, name, data):
        return ext(b"x", b"".join(rec(k, v) for k, v in records), name=b"PaxHeaders/s") + entry(name, data)
    H["pax-sparse-0.0"] = pax_sparse([(b"GNU.sparse.size", b"5000"), (b"GNU.sparse.numblocks", b"2"),
                                      (b"GNU.sparse.offset", b"0"), (b"GNU.sparse.numbytes", b"3"),
                                      (b"GNU.sparse.offset", b"4000"), (b"GNU.sparse.numbytes", b"2")],
                                     b"sp", b"abcde") + END
    H["pax-sparse-0.1"] = pax_sparse([(b"GNU.sparse.size", b"5000"), (b"GNU.sparse.numblocks", b"2"),
                                      (b"GNU.sparse.map", b"0,3,4000,2"), (b"GNU.sparse.name", b"real/name")],
                                     b"GNUSparseFile.1/name", b"abcde") + END
    m = b"2\n0\n3\n4000\n2\n"
    H["pax-sparse-1.0"] = pax_sparse([(b"GNU.sparse.major", b"1"), (b"GNU.sparse.minor", b"0"),
                                      (b"GNU.sparse.name", b"one/zero"), (b"GNU.sparse.realsize", b"5000")],
                                     b"GNUSparseFile.0/zero", pad(m) + b"abcde") + END
    H["pax-sparse-1.0-huge-count"] = pax_sparse([(b"GNU.sparse.major", b"1"), (b"GNU.sparse.minor", b"0"),
                                                 (b"GNU.sparse.realsize", b"5000")],
                                                b"z", pad(b"99999999999\n0\n")) + END
    H["pax-sparse-1.0-map-past-data"] = pax_sparse([(b"GNU.sparse.major", b"1"), (b"GNU.sparse.realsize", b"5000")],
                                                   b"z", b"3\n0\n1") + END
    H["pax-sparse-0.1-odd-map"] = pax_sparse([(b"GNU.sparse.size", b"5000"), (b"GNU.sparse.map", b"0,3,4000")],
                                             b"z", b"abc") + END
    H["pax-sparse-0.0-no-numbytes"] = pax_sparse([(b"GNU.sparse.size", b"5000"), (b"GNU.sparse.offset", b"0")],
                                                 b"z", b"") + END
    H["pax-sparse-count-mismatch"] = pax_sparse([(b"GNU.sparse.size", b"5000"), (b"GNU.sparse.numblocks", b"3"),
                                                 (b"GNU.sparse.map", b"0,3")], b"z", b"abc") + END
    H["pax-sparse-major-2"] = pax_sparse([(b"GNU.sparse.major", b"2"), (b"GNU.sparse.realsize", b"5")], b"z", b"") + END
    H["pax-sparse-no-size"] = pax_sparse([(b"GNU.sparse.map", b"0,3")], b"z", b"abc") + END
    H["pax-xattrs"] = ext(b"x", rec(b"SCHILY.xattr.user.a", b"1\n\0=2") + rec(b"SCHILY.xattr.user.b", b"")) \
        + entry(b"x", b"x\n") + END
    H["pax-hdrcharset"] = ext(b"x", rec(b"hdrcharset", b"BINARY") + rec(b"path", b"bin\xff\xfe")) + entry(b"x", b"x\n") + END
    H["chained-extensions"] = ext(b"L", b"from-L\0") + ext(b"x", rec(b"path", b"from-x")) + ext(b"K", b"klink\0") \
        + entry(b"u", flag=b"2", link=b"ulink") + END
    for name, data in H.items():
        with open(out("hostile-%s.tar" % name), "wb") as f:
            f.write(data)


def mutations():
    """Seeded mutations of the valid archives, as fuzz_tests.rs makes them."""
    rng = random.Random(0x5EED_7A12)
    bases = sorted(n for n in os.listdir(HERE) if n.endswith(".tar") and not n.startswith(("mut-", "hostile-")))
    bases = [open(out(n), "rb").read() for n in bases if os.path.getsize(out(n)) < 50000]
    for i in range(60):
        a = bytearray(rng.choice(bases))
        what = rng.randrange(4)
        if what == 0:
            for _ in range(rng.randrange(1, 4)):
                a[rng.randrange(len(a))] = rng.randrange(256)
        elif what == 1:
            del a[rng.randrange(len(a)):]
        elif what == 2:
            blk = rng.randrange(len(a) // 512) * 512
            at = rng.randrange(156) + blk
            a[at] = rng.choice(b"0123456789 \0\x80\xffxgLKS5")
        else:
            src = rng.choice(bases)
            blk = rng.randrange(len(src) // 512) * 512
            at = rng.randrange(len(a) // 512) * 512
            a[at:at + 512] = src[blk:blk + 512]
        with open(out("mut-%02d.tar" % i), "wb") as f:
            f.write(a)


if __name__ == "__main__":
    for n in os.listdir(HERE):
        if n.endswith(".tar"):
            os.remove(out(n))
    real_tools()
    python_archives()
    hostile()
    mutations()
