#!/bin/sh
# Regenerates the tar fixtures read by the unit tests of ../format/ (tests_decode.rs).
#
#   sh crates/tools/src/tar/testdata/make.sh      (from anywhere; writes next to this script)
#
# Needs GNU tar (made with 1.34) and python3 (made with 3.11). Every input is fixed (names,
# contents, modes, mtime 1600000000, owner 0:0 numeric, sorted order, no atime/ctime records,
# one-block records) so that reruns give the same bytes. The tests assert the exact content
# listed below; keep them in sync when changing this script.
#
#   gnu.tar     tar --format=gnu:   d/, d/<146 x 'a'>.txt (a 150-byte file name: GNU 'L'),
#               d/hard (hard link to d/short.txt), d/link (symlink to a 150-byte target:
#               GNU 'K'), d/short.txt
#   pax.tar     tar --format=pax:   the same, plus d/h<U+00E9>llo.txt (non-ASCII name)
#   ustar.tar   tar --format=ustar: u/, u/<60 x 's'>/, u/<60 x 's'>/<77 x 'f'> (a 140-byte
#               path stored with the ustar prefix field)
#   python.tar  python3 tarfile PAX_FORMAT: bad<0xff>.txt (invalid UTF-8: pax
#               hdrcharset=BINARY), frac.txt (mtime 1600000000.25), xattr.txt (pax record
#               SCHILY.xattr.user.note=hi)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 022

long150=$(printf 'a%.0s' $(seq 146)).txt
target150=$(printf 'T%.0s' $(seq 150))
s60=$(printf 's%.0s' $(seq 60))
f77=$(printf 'f%.0s' $(seq 77))

mk_common() {
    mkdir -p "$1/d"
    printf 'long name file\n' >"$1/d/$long150"
    printf 'short\n' >"$1/d/short.txt"
    ln "$1/d/short.txt" "$1/d/hard"
    ln -s "$target150" "$1/d/link"
}

TAR="tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@1600000000 --blocking-factor=1"

mkdir "$work/gnu"
mk_common "$work/gnu"
(cd "$work/gnu" && $TAR --format=gnu -cf "$here/gnu.tar" d)

mkdir "$work/pax"
mk_common "$work/pax"
printf 'bonjour\n' >"$work/pax/d/h$(printf '\303\251')llo.txt"
(cd "$work/pax" && $TAR --format=pax \
    --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' \
    -cf "$here/pax.tar" d)

mkdir -p "$work/ustar/u/$s60"
printf 'split\n' >"$work/ustar/u/$s60/$f77"
(cd "$work/ustar" && $TAR --format=ustar -cf "$here/ustar.tar" u)

python3 - "$here/python.tar" <<'PY'
import io, sys, tarfile

def add(tf, name, data, mtime, pax=None):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = mtime
    ti.mode = 0o644
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    if pax:
        ti.pax_headers = pax
    tf.addfile(ti, io.BytesIO(data))

with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT,
                  encoding="utf-8", errors="surrogateescape") as tf:
    add(tf, b"bad\xff.txt".decode("utf-8", "surrogateescape"), b"invalid utf-8\n", 1600000000)
    add(tf, "frac.txt", b"fraction\n", 1600000000.25)
    add(tf, "xattr.txt", b"xattr\n", 1600000000, {"SCHILY.xattr.user.note": "hi"})
PY
