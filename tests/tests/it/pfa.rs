//! `mfu-rs pfa ls|cat|unpack|pack` end to end: round trips at np 1, `--ranks 3` and
//! `mpirun -np 2` (and unpacked at another rank count than packed), versions read back
//! exactly, aggregates cut or bit-flipped refused by name with nothing half-unpacked left, and
//! the hostile cases (DEST a symlink, a symlink inside DEST, AGG inside SRC, existing files).

use mfu_tests::{launches, listing, noise, Tool};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// How the ranks are started.
#[derive(Clone, Copy, Debug)]
enum Ranks {
    /// One process, one rank.
    One,
    /// One process, N thread ranks (`--ranks N`).
    Threads(usize),
    /// `mpirun -np N`.
    Mpi(usize),
}

/// `mfu-rs pfa ARGS` started as `ranks` says.
fn pfa(ranks: Ranks, args: &[&OsStr]) -> Tool {
    let t = Tool::new("pfa").args(args);
    match ranks {
        Ranks::One => t,
        Ranks::Threads(n) => t.ranks(n),
        Ranks::Mpi(n) => t.mpi(n),
    }
}

fn os<P: AsRef<OsStr> + ?Sized>(p: &P) -> &OsStr {
    p.as_ref()
}

/// A tree with files of many sizes (empty, one byte, several chunks of the 64 KiB chunk size
/// the tests pack with), directories with their own modes, a symbolic link, a non-UTF-8 name,
/// old mtimes.
fn make_tree(root: &Path) {
    fs::create_dir_all(root.join("sub/deep")).unwrap();
    fs::create_dir(root.join("empty-dir")).unwrap();
    for i in 0..20u64 {
        fs::write(
            root.join(format!("sub/small{i}")),
            noise(i, (i * 37) as usize),
        )
        .unwrap();
    }
    fs::write(root.join("sub/deep/big"), noise(99, 300_000)).unwrap();
    fs::write(root.join("one"), b"1").unwrap();
    fs::write(root.join("empty"), b"").unwrap();
    fs::write(root.join(OsStr::from_bytes(b"bad\xffname")), b"bytes").unwrap();
    std::os::unix::fs::symlink("sub/deep/big", root.join("link")).unwrap();
    fs::set_permissions(root.join("one"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::set_permissions(root.join("sub/deep"), fs::Permissions::from_mode(0o750)).unwrap();
    let old = filetime(1_600_000_000);
    for p in ["one", "sub/deep/big", "sub/deep", "empty-dir"] {
        set_mtime(&root.join(p), old);
    }
}

fn filetime(secs: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: secs,
        tv_nsec: 123_456_789,
    }
}

/// Set `path`'s mtime without following a symlink.
fn set_mtime(path: &Path, t: libc::timespec) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        t,
    ];
    // SAFETY: a valid C string and two timespecs.
    let r = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    assert_eq!(r, 0, "utimensat {}", path.display());
}

/// One entry as [`contents`] sees it: kind letter, bytes (or link target), permission bits,
/// mtime (seconds, nanoseconds) of files and links.
type Seen = (char, Vec<u8>, u32, Option<(i64, i64)>);

/// What a tree holds, entry by entry: kind, contents (or link target), permission bits,
/// and the mtime of files and links (directories' are checked by [`dir_mtimes`]).
fn contents(root: &Path) -> BTreeMap<Vec<u8>, Seen> {
    listing(root)
        .into_iter()
        .map(|rel| {
            let p = root.join(OsStr::from_bytes(&rel));
            let m = fs::symlink_metadata(&p).unwrap();
            let ft = m.file_type();
            let v = if ft.is_symlink() {
                let t = fs::read_link(&p).unwrap();
                let mtime = Some((m.mtime(), m.mtime_nsec()));
                ('l', t.as_os_str().as_bytes().to_vec(), 0, mtime)
            } else if ft.is_dir() {
                ('d', Vec::new(), m.mode() & 0o7777, None)
            } else {
                let mtime = Some((m.mtime(), m.mtime_nsec()));
                ('f', fs::read(&p).unwrap(), m.mode() & 0o7777, mtime)
            };
            (rel, v)
        })
        .collect()
}

/// The directories' mtimes.
fn dir_mtimes(root: &Path) -> BTreeMap<Vec<u8>, (i64, i64)> {
    listing(root)
        .into_iter()
        .filter_map(|rel| {
            let m = fs::symlink_metadata(root.join(OsStr::from_bytes(&rel))).unwrap();
            m.is_dir().then(|| (rel, (m.mtime(), m.mtime_nsec())))
        })
        .collect()
}

/// Unpacked `dest` holds exactly what `src` holds.
#[track_caller]
fn assert_same_tree(src: &Path, dest: &Path) {
    assert_eq!(contents(src), contents(dest));
    assert_eq!(dir_mtimes(src), dir_mtimes(dest));
}

/// Pack `src` into `agg` (64 KiB chunks) as `ranks` says; exit 0.
fn pack(ranks: Ranks, src: &Path, agg: &Path, extra: &[&str]) {
    let mut args: Vec<&OsStr> = vec![os("pack"), os("--chunk-size"), os("64KB")];
    args.extend(extra.iter().map(os));
    args.extend([src.as_os_str(), agg.as_os_str()]);
    pfa(ranks, &args).expect(0);
}

fn round_trip(ranks: Ranks) {
    let t = tempfile::tempdir().unwrap();
    let (src, agg, dest) = (
        t.path().join("src"),
        t.path().join("a.pfa"),
        t.path().join("out"),
    );
    make_tree(&src);
    pack(ranks, &src, &agg, &[]);
    // ls: one version, every entry, with its kind and size.
    let ls = pfa(ranks, &[os("ls"), agg.as_os_str()]).expect(0);
    let out = ls.stdout_str();
    assert!(out.starts_with("version 1: 28 streams,"), "{out}");
    assert!(out.contains(&format!("f {:>12} ", 300_000)), "{out}");
    assert!(
        out.contains("sub/deep/big\n") && out.contains("l "),
        "{out}"
    );
    assert!(ls.stdout.windows(8).any(|w| w == b"bad\xffname"));
    let json = pfa(ranks, &[os("ls"), os("--json"), agg.as_os_str()]).expect(0);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["tool"], "pfa");
    assert_eq!(v["versions"][0]["streams"].as_array().unwrap().len(), 28);
    assert_eq!(v["items"], 28);
    // cat: one stream's bytes exactly.
    let cat = pfa(ranks, &[os("cat"), agg.as_os_str(), os("sub/deep/big")]).expect(0);
    assert_eq!(cat.stdout, noise(99, 300_000));
    // unpack: the same tree, metadata included.
    pfa(ranks, &[os("unpack"), agg.as_os_str(), dest.as_os_str()]).expect(0);
    assert_same_tree(&src, &dest);
}

#[test]
fn round_trip_one_process() {
    round_trip(Ranks::One);
}

#[test]
fn round_trip_thread_ranks() {
    round_trip(Ranks::Threads(3));
}

#[test]
fn round_trip_mpirun() {
    round_trip(Ranks::Mpi(2));
}

/// Packed by 2 MPI ranks, unpacked by 3 thread ranks and by one: the same tree.
#[test]
fn unpacked_at_another_rank_count_than_packed() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg) = (t.path().join("src"), t.path().join("a.pfa"));
    make_tree(&src);
    pack(Ranks::Mpi(2), &src, &agg, &[]);
    for (i, ranks) in [Ranks::Threads(3), Ranks::One].into_iter().enumerate() {
        let dest = t.path().join(format!("out{i}"));
        pfa(ranks, &[os("unpack"), agg.as_os_str(), dest.as_os_str()]).expect(0);
        assert_same_tree(&src, &dest);
    }
}

/// A second version after changes: both read back exactly, by `unpack --version` and `cat
/// --version`, and the second stores less than the whole tree again.
#[test]
fn each_version_reads_back_exactly() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg) = (t.path().join("src"), t.path().join("a.pfa"));
    make_tree(&src);
    pack(Ranks::Threads(2), &src, &agg, &[]);
    let v1 = t.path().join("v1-copy");
    pfa(Ranks::One, &[os("unpack"), agg.as_os_str(), v1.as_os_str()]).expect(0);
    // Change one chunk of the big file in place, add a file, remove one.
    let mut big = fs::read(src.join("sub/deep/big")).unwrap();
    big[70_000] ^= 0xff;
    fs::write(src.join("sub/deep/big"), &big).unwrap();
    fs::write(src.join("new"), b"new file").unwrap();
    fs::remove_file(src.join("sub/small3")).unwrap();
    let out = pfa(
        Ranks::Mpi(2),
        &[
            os("pack"),
            os("--json"),
            os("--new-version"),
            os("--chunk-size"),
            os("64KB"),
            src.as_os_str(),
            agg.as_os_str(),
        ],
    )
    .expect(0);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["version"], 2);
    // Written again: the big file's changed chunk and the new file; every other piece
    // (4 of the big file's, 18 small files, one, the odd name, the link's target) referenced.
    assert_eq!(report["chunks_written"], 2, "{report}");
    assert_eq!(report["bytes_written"], 65536 + 8, "{report}");
    assert_eq!(report["chunks_reused"], 25, "{report}");
    let ls = pfa(Ranks::One, &[os("ls"), agg.as_os_str()]).expect(0);
    assert!(ls.stdout_str().contains("version 1: 28 streams"));
    assert!(ls.stdout_str().contains("version 2: 28 streams"));
    let (d1, d2) = (t.path().join("d1"), t.path().join("d2"));
    pfa(
        Ranks::Threads(3),
        &[
            os("unpack"),
            os("--version"),
            os("1"),
            agg.as_os_str(),
            d1.as_os_str(),
        ],
    )
    .expect(0);
    assert_same_tree(&v1, &d1);
    pfa(
        Ranks::Mpi(2),
        &[os("unpack"), agg.as_os_str(), d2.as_os_str()],
    )
    .expect(0);
    assert_same_tree(&src, &d2);
    for (v, want) in [("1", noise(99, 300_000)), ("2", big)] {
        let cat = pfa(
            Ranks::One,
            &[
                os("cat"),
                os("--version"),
                os(v),
                agg.as_os_str(),
                os("sub/deep/big"),
            ],
        )
        .expect(0);
        assert_eq!(cat.stdout, want, "version {v}");
    }
    pfa(
        Ranks::One,
        &[os("ls"), os("--version"), os("3"), agg.as_os_str()],
    )
    .expect(1)
    .stderr_contains("no version 3");
}

/// An aggregate cut anywhere (inside the data, the index, the trailer) is refused by name by
/// ls, cat and unpack (exit 1), and unpack makes nothing.
#[test]
fn cut_aggregates_are_refused_by_name() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg) = (t.path().join("src"), t.path().join("a.pfa"));
    make_tree(&src);
    pack(Ranks::One, &src, &agg, &[]);
    let whole = fs::read(&agg).unwrap();
    let cut = t.path().join("cut.pfa");
    for at in [1, whole.len() / 3, whole.len() - 40, whole.len() - 1] {
        fs::write(&cut, &whole[..at]).unwrap();
        let shown = cut.to_str().unwrap();
        for ranks in [Ranks::One, Ranks::Mpi(2)] {
            pfa(ranks, &[os("ls"), cut.as_os_str()])
                .expect(1)
                .stderr_contains(shown);
            pfa(ranks, &[os("cat"), cut.as_os_str(), os("one")])
                .expect(1)
                .stderr_contains(shown);
            let dest = t.path().join("dest");
            pfa(ranks, &[os("unpack"), cut.as_os_str(), dest.as_os_str()])
                .expect(1)
                .stderr_contains(shown);
            assert!(!dest.exists(), "cut at {at}: nothing unpacked");
        }
    }
}

/// A flipped bit in a file's data: that file is named and never appears (no temporary left);
/// every other entry is unpacked whole. A flipped bit in the trailer: the aggregate is refused.
#[test]
fn bit_flipped_aggregates_are_refused_by_name() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg) = (t.path().join("src"), t.path().join("a.pfa"));
    make_tree(&src);
    pack(Ranks::Threads(2), &src, &agg, &[]);
    let whole = fs::read(&agg).unwrap();
    // The big file's bytes 100000..100016 are unique in the aggregate: flip one there.
    let marker = &noise(99, 300_000)[100_000..100_016];
    let at = whole
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("the big file's data is in the aggregate");
    let mut flipped = whole.clone();
    flipped[at + 3] ^= 0x10;
    let bad = t.path().join("bad.pfa");
    fs::write(&bad, &flipped).unwrap();
    for ranks in [Ranks::One, Ranks::Threads(3), Ranks::Mpi(2)] {
        let dest = t.path().join(format!("dest-{ranks:?}"));
        let run = pfa(ranks, &[os("unpack"), bad.as_os_str(), dest.as_os_str()]).expect(1);
        run.stderr_contains("sub/deep/big");
        assert!(!dest.join("sub/deep/big").exists());
        let names = listing(&dest);
        assert!(
            names.iter().all(|n| !n.ends_with(b".mfu-tmp")),
            "no temporary left: {names:?}"
        );
        let mut want = contents(&src);
        want.remove(&b"sub/deep/big"[..]);
        assert_eq!(contents(&dest), want, "every other entry whole");
        pfa(ranks, &[os("cat"), bad.as_os_str(), os("sub/deep/big")])
            .expect(1)
            .stderr_contains("bad.pfa");
    }
    let mut trailer = whole;
    let last = trailer.len() - 5;
    trailer[last] ^= 0x01;
    fs::write(&bad, &trailer).unwrap();
    pfa(Ranks::One, &[os("ls"), bad.as_os_str()])
        .expect(1)
        .stderr_contains("bad.pfa");
}

/// DEST a symbolic link: refused, nothing written where it leads. A symbolic link inside
/// DEST where the aggregate has a directory: not followed, the entries beneath it named.
#[test]
fn symlinks_at_dest_are_never_followed() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg) = (t.path().join("src"), t.path().join("a.pfa"));
    make_tree(&src);
    pack(Ranks::One, &src, &agg, &[]);
    let outside = t.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let dest = t.path().join("dest");
    std::os::unix::fs::symlink(&outside, &dest).unwrap();
    for ranks in [Ranks::One, Ranks::Mpi(2)] {
        pfa(ranks, &[os("unpack"), agg.as_os_str(), dest.as_os_str()])
            .expect(2)
            .stderr_contains("is a symbolic link");
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }
    let dest = t.path().join("dest2");
    fs::create_dir(&dest).unwrap();
    std::os::unix::fs::symlink(&outside, dest.join("sub")).unwrap();
    let run = pfa(
        Ranks::Threads(3),
        &[os("unpack"), agg.as_os_str(), dest.as_os_str()],
    )
    .expect(1);
    run.stderr_contains("symbolic link");
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing outside"
    );
    assert_eq!(fs::read(dest.join("one")).unwrap(), b"1");
}

/// Existing entries are left alone and named (exit 1) unless --overwrite, which renames the
/// new file over them.
#[test]
fn existing_files_are_not_overwritten_unless_asked() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg, dest) = (
        t.path().join("src"),
        t.path().join("a.pfa"),
        t.path().join("d"),
    );
    make_tree(&src);
    pack(Ranks::One, &src, &agg, &[]);
    pfa(
        Ranks::One,
        &[os("unpack"), agg.as_os_str(), dest.as_os_str()],
    )
    .expect(0);
    fs::write(dest.join("one"), b"mine").unwrap();
    let hard = t.path().join("hard-link-to-one");
    fs::hard_link(dest.join("one"), &hard).unwrap();
    pfa(
        Ranks::Mpi(2),
        &[os("unpack"), agg.as_os_str(), dest.as_os_str()],
    )
    .expect(1)
    .stderr_contains("exists: not overwritten");
    assert_eq!(fs::read(dest.join("one")).unwrap(), b"mine");
    pfa(
        Ranks::Mpi(2),
        &[
            os("unpack"),
            os("--overwrite"),
            agg.as_os_str(),
            dest.as_os_str(),
        ],
    )
    .expect(0);
    assert_same_tree(&src, &dest);
    assert_eq!(
        fs::read(&hard).unwrap(),
        b"mine",
        "replaced, not written through"
    );
}

/// The temporaries a killed unpack left (`.NAME.HOST.PID.mfu-tmp` of a process that is gone)
/// are removed by the next unpack into that DEST, and said; those of names the aggregate does
/// not hold, of a live process, and other files stay. At np 1, `--ranks 3` and `mpirun -np 2`.
#[test]
fn a_killed_unpack_s_temporaries_go_at_the_next_run() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg) = (t.path().join("src"), t.path().join("a.pfa"));
    make_tree(&src);
    pack(Ranks::One, &src, &agg, &[]);
    let dead = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let host = flist::atomic::host();
    let temp = |dir: &Path, name: &[u8], pid: u32| {
        dir.join(OsStr::from_bytes(&flist::atomic::temp_name_of(
            name, &host, pid,
        )))
    };
    for (i, ranks) in [Ranks::One, Ranks::Threads(3), Ranks::Mpi(2)]
        .into_iter()
        .enumerate()
    {
        let dest = t.path().join(format!("d{i}"));
        pfa(ranks, &[os("unpack"), agg.as_os_str(), dest.as_os_str()]).expect(0);
        let stale = [
            temp(&dest, b"one", dead),
            temp(&dest.join("sub"), b"small3", dead),
            temp(&dest, b"bad\xffname", dead),
        ];
        let kept = [
            temp(&dest.join("sub"), b"not-in-the-aggregate", dead),
            temp(&dest.join("sub"), b"small4", 1),
            dest.join("sub/.small5.mfu-tmp"),
        ];
        for p in stale.iter().chain(&kept) {
            fs::write(p, b"partial").unwrap();
        }
        pfa(
            ranks,
            &[
                os("unpack"),
                os("--overwrite"),
                agg.as_os_str(),
                dest.as_os_str(),
            ],
        )
        .expect(0)
        .stderr_contains("a temporary file an earlier interrupted run left");
        for p in &stale {
            assert!(!p.exists(), "{ranks:?}: {} left", p.display());
        }
        for p in &kept {
            assert!(p.exists(), "{ranks:?}: {} removed", p.display());
            fs::remove_file(p).unwrap();
        }
        // Contents only: removing the kept files above moved sub's mtime on.
        assert_eq!(contents(&src), contents(&dest), "{ranks:?}");
    }
}

/// AGG inside a SRC is refused before anything is written; a SRC that is missing too.
#[test]
fn an_aggregate_inside_its_source_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    make_tree(&src);
    let before = listing(&src);
    for agg in [src.join("a.pfa"), src.join("sub/a.pfa")] {
        pfa(
            Ranks::Mpi(2),
            &[os("pack"), src.as_os_str(), agg.as_os_str()],
        )
        .expect(2)
        .stderr_contains("lies inside SRC");
    }
    assert_eq!(listing(&src), before, "nothing written in SRC");
    let missing = t.path().join("missing");
    pfa(
        Ranks::One,
        &[
            os("pack"),
            missing.as_os_str(),
            t.path().join("x.pfa").as_os_str(),
        ],
    )
    .expect(2)
    .stderr_contains("missing");
    pfa(Ranks::One, &[os("pack"), os("only-one")]).expect(2);
}

/// Two SRCs holding one name: the close fails on every rank, named, and no AGG is left.
#[test]
fn two_sources_holding_one_name_write_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, agg) = (
        t.path().join("a"),
        t.path().join("b"),
        t.path().join("x.pfa"),
    );
    for (dir, content) in [(&a, "from a"), (&b, "from b")] {
        fs::create_dir(dir).unwrap();
        fs::write(dir.join("same"), content).unwrap();
    }
    for ranks in [Ranks::One, Ranks::Mpi(2)] {
        pfa(
            ranks,
            &[os("pack"), a.as_os_str(), b.as_os_str(), agg.as_os_str()],
        )
        .expect(1)
        .stderr_contains("same");
        assert!(!agg.exists());
        assert_eq!(
            fs::read_dir(t.path()).unwrap().count(),
            2,
            "no temporary left"
        );
    }
}

/// A file that changes while it is read is named (exit 1) and not stored; the rest is.
#[test]
fn a_file_changed_while_read_is_named_and_left_out() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg) = (t.path().join("src"), t.path().join("a.pfa"));
    fs::create_dir(&src).unwrap();
    fs::write(src.join("growing"), noise(5, 3 << 20)).unwrap();
    fs::write(src.join("steady"), b"steady").unwrap();
    let grow = format!("printf more >> '{}'", src.join("growing").to_str().unwrap());
    let run = Tool::new("pfa")
        .args([os("pack"), src.as_os_str(), agg.as_os_str()])
        .env("MFU_RS_TEST_HOOK_AFTER_FIRST_CHUNK", &grow)
        .expect(1);
    run.stderr_contains("growing: changed while it was read");
    let ls = pfa(Ranks::One, &[os("ls"), agg.as_os_str()]).expect(0);
    assert!(ls.stdout_str().contains(" steady\n"));
    assert!(!ls.stdout_str().contains("growing"), "{}", ls.stdout_str());
}

#[test]
fn help_explains_each_action() {
    let help = Tool::new("pfa").arg("--help").expect(0);
    for action in ["ls", "cat", "unpack", "pack", "recover"] {
        help.stdout_contains(action);
    }
    Tool::new("pfa")
        .args(["recover", "--help"])
        .expect(0)
        .stdout_contains("never drops a version");
    Tool::new("pfa")
        .args(["pack", "--help"])
        .expect(0)
        .stdout_contains("--new-version");
    Tool::new("pfa")
        .args(["unpack", "--help"])
        .expect(0)
        .stdout_contains("--overwrite");
    Tool::new("pfa").expect(2);
}

/// A version cut mid-write is refused by readers until `pfa recover` drops it; then every
/// complete version reads again. A file that ends whole is left as it is; one whose last
/// version is whole but damaged is refused, unchanged.
#[test]
fn recover_drops_a_cut_version_and_nothing_else() {
    let t = tempfile::tempdir().unwrap();
    let (src, agg) = (t.path().join("src"), t.path().join("a.pfa"));
    make_tree(&src);
    pack(Ranks::One, &src, &agg, &[]);
    let v1 = fs::read(&agg).unwrap();
    let want1 = contents(&src);
    fs::write(src.join("new"), b"a file of version 2").unwrap();
    pack(Ranks::Threads(2), &src, &agg, &["--new-version"]);
    let v2 = fs::read(&agg).unwrap();
    let cut = t.path().join("cut.pfa");
    for (ranks, tail) in [(Ranks::One, 5000), (Ranks::Mpi(2), 1)] {
        // Version 3's first bytes, and no trailer after them: a pack killed mid-write.
        let mut bytes = v2.clone();
        bytes.extend(noise(7, tail));
        fs::write(&cut, &bytes).unwrap();
        pfa(ranks, &[os("ls"), cut.as_os_str()])
            .expect(1)
            .stderr_contains("pfa recover");
        let run = pfa(ranks, &[os("recover"), cut.as_os_str()]).expect(0);
        run.stdout_contains("version 2 is now the last");
        assert_eq!(fs::read(&cut).unwrap(), v2, "only the tail dropped");
        let again = pfa(ranks, &[os("recover"), cut.as_os_str()]).expect(0);
        again.stdout_contains("Nothing to recover");
        assert_eq!(fs::read(&cut).unwrap(), v2);
    }
    // Cut inside version 2's trailer: version 1 is the last complete one, and reads whole.
    fs::write(&cut, &v2[..v2.len() - 40]).unwrap();
    pfa(Ranks::One, &[os("recover"), cut.as_os_str()])
        .expect(0)
        .stdout_contains("version 1 is now the last");
    assert_eq!(fs::read(&cut).unwrap(), v1);
    let dest = t.path().join("dest");
    pfa(
        Ranks::One,
        &[os("unpack"), cut.as_os_str(), dest.as_os_str()],
    )
    .expect(0);
    assert_eq!(contents(&dest), want1);
    // Whole but damaged at its end (a flipped bit in the last trailer): refused, unchanged.
    let mut damaged = v2.clone();
    let n = damaged.len();
    damaged[n - 20] ^= 0x04;
    fs::write(&cut, &damaged).unwrap();
    pfa(Ranks::One, &[os("recover"), cut.as_os_str()])
        .expect(1)
        .stderr_contains("nothing changed");
    assert_eq!(fs::read(&cut).unwrap(), damaged);
    // A hard-linked aggregate is not truncated (its other name would change too).
    let mut bytes = v2.clone();
    bytes.extend(noise(8, 100));
    fs::write(&cut, &bytes).unwrap();
    fs::hard_link(&cut, t.path().join("other-name.pfa")).unwrap();
    pfa(Ranks::One, &[os("recover"), cut.as_os_str()])
        .expect(1)
        .stderr_contains("hard links");
    assert_eq!(fs::read(&cut).unwrap(), bytes);
}

/// An aggregate of format version 1 (`crates/pfa/tests/data/format1.pfa`, two versions, from
/// before format 2) is read by ls and cat at np 1, `--ranks 3` and `mpirun -np 2`; a version
/// packed onto a copy of it under `mpirun -np 2` unpacks as its tree, the old versions still
/// read.
#[test]
fn a_format_1_aggregate_reads_and_takes_a_new_version() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/pfa/tests/data/format1.pfa");
    // r0/big of version 1: the pattern the file was written with; version 2 inverts its
    // second 4 KiB chunk.
    let v1: Vec<u8> = (0..10_000usize).map(|i| (i * 7 % 251) as u8).collect();
    let mut v2 = v1.clone();
    v2[4096..8192].iter_mut().for_each(|b| *b ^= 0xff);
    for (name, launch) in launches() {
        let ls = launch(Tool::new("pfa").args([os("ls"), data.as_os_str()])).expect(0);
        assert!(
            ls.stdout_str().contains("version 2: 4 streams"),
            "{name}: {}",
            ls.stdout_str()
        );
        for (v, want) in [("1", &v1), ("2", &v2)] {
            let cat = launch(Tool::new("pfa").args([
                os("cat"),
                os("--version"),
                os(v),
                data.as_os_str(),
                os("r0/big"),
            ]))
            .expect(0);
            assert_eq!(&cat.stdout, want, "{name}: version {v}");
        }
    }
    let t = tempfile::tempdir().unwrap();
    let (src, agg, dest) = (
        t.path().join("src"),
        t.path().join("old.pfa"),
        t.path().join("out"),
    );
    fs::copy(&data, &agg).unwrap();
    make_tree(&src);
    pack(Ranks::Mpi(2), &src, &agg, &["--new-version"]);
    let ls = pfa(Ranks::One, &[os("ls"), agg.as_os_str()]).expect(0);
    assert!(
        ls.stdout_str().contains("version 3: 28 streams"),
        "{}",
        ls.stdout_str()
    );
    pfa(
        Ranks::Mpi(2),
        &[os("unpack"), agg.as_os_str(), dest.as_os_str()],
    )
    .expect(0);
    assert_same_tree(&src, &dest);
    let cat = pfa(
        Ranks::One,
        &[
            os("cat"),
            os("--version"),
            os("1"),
            agg.as_os_str(),
            os("r0/big"),
        ],
    )
    .expect(0);
    assert_eq!(cat.stdout, v1);
}
