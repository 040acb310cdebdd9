//! `mfu-rs tar -x`/`-t` with MEMBERs, `--wildcards`, `--exclude` and `--strip-components`
//! against GNU tar on the same archives (indexed and not, at 1, 2 and 4 thread ranks and under
//! mpirun), pax global headers (Python's and GNU tar's), and owners restored by name.
//!
//! The reference is GNU tar's result (`TZ=UTC`, `LC_ALL=C`): the same files with the same
//! contents, the same `Not found in archive` lines (and GNU's hint about pattern characters),
//! exit 1 where GNU tar exits 2 (README: "1 is something failed" for every tool).

use mfu_tests::tar_tools::{gnu_tar, text, tool};
use mfu_tests::tree::{self, Compare, Tree};
use mfu_tests::{expect_status, Tool};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A fresh directory `name` under `work`.
fn fresh(work: &Path, name: &str) -> PathBuf {
    let d = work.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Snapshot of an extraction target, without its root and without dtar's index member (GNU
/// tar extracts it as a file; mfu-rs hides it).
fn extracted(dir: &Path) -> Tree {
    let mut t = tree::snapshot(dir);
    t.remove(&b""[..]);
    t.retain(|k, _| !k.ends_with(b".dtaridx"));
    t
}

/// The source tree: directories, small files, a file big enough to span ranks' parts, hard
/// links (one to a file in another directory), a symlink, and a run of small files that lies in
/// one rank's part of the archive.
fn source(w: &Path) -> PathBuf {
    let src = fresh(w, "src");
    let write = |rel: &str, data: &[u8]| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    };
    write("dir/a.txt", b"a\n");
    write("dir/sub/b.log", b"b\n");
    write("dir/sub/deep/c.log", b"c\n");
    write("dir/big.bin", &mfu_tests::noise(7, 2 << 20));
    write("other/c.txt", b"c\n");
    write("top.txt", b"top\n");
    for i in 0..60 {
        write(
            &format!("many/f{i:02}.dat"),
            &mfu_tests::noise(i, 3000 + 97 * i as usize),
        );
    }
    std::fs::hard_link(src.join("dir/a.txt"), src.join("other/hl")).unwrap();
    std::fs::hard_link(src.join("many/f03.dat"), src.join("many/hl03")).unwrap();
    std::os::unix::fs::symlink("../top.txt", src.join("dir/sym")).unwrap();
    src
}

/// The `Not found` lines and GNU tar's pattern hint of a run's stderr, without the program's
/// prefix (`tar: `, `mfu-rs tar: `).
fn not_found(stderr: &[u8]) -> Vec<String> {
    text(stderr)
        .lines()
        .filter_map(|l| {
            let l = l
                .strip_prefix("mfu-rs tar: ")
                .or_else(|| l.strip_prefix("tar: "))?;
            (l.ends_with(": Not found in archive")
                || l.starts_with("Pattern matching characters")
                || l.starts_with("Use --wildcards"))
            .then(|| l.to_string())
        })
        .collect()
}

/// mfu-rs's exit status for GNU tar's: 2 (a member not found, a link that failed) is 1.
fn mfu_code(gnu: &Output) -> i32 {
    match gnu.status.code() {
        Some(0) => 0,
        _ => 1,
    }
}

/// The ways mfu-rs runs in the matrix.
fn launches() -> Vec<(String, Tool)> {
    vec![
        ("ranks1".into(), Tool::new("tar").ranks(1)),
        ("ranks2".into(), Tool::new("tar").ranks(2)),
        ("ranks4".into(), Tool::new("tar").ranks(4)),
        ("np2".into(), Tool::new("tar").mpi(2)),
    ]
}

/// The selections of the matrix: (label, arguments after the archive).
const CASES: &[(&str, &[&str])] = &[
    ("dir", &["dir"]),
    ("subdir-and-file", &["dir/sub/", "top.txt"]),
    ("missing", &["nothere/", "dir/a.txt", "other/"]),
    ("first-member-wins", &["dir", "dir/sub"]),
    ("pattern-without-wildcards", &["d*"]),
    ("wildcards", &["--wildcards", "*.txt", "many/f1?.dat"]),
    (
        "wildcards-no-slash",
        &[
            "--wildcards",
            "--no-wildcards-match-slash",
            "dir/*.log",
            "*/c.txt",
        ],
    ),
    ("unanchored", &["--no-anchored", "sub", "c.txt"]),
    ("exclude", &["--exclude", "*.log", "dir", "many"]),
    (
        "exclude-only",
        &["--exclude", "many", "--exclude", "big.bin"],
    ),
    ("strip", &["--strip-components", "1"]),
    ("strip-member", &["--strip-components", "1", "other"]),
    ("strip-two", &["--strip-components", "2", "dir"]),
    ("hard-link-without-target", &["other/hl", "many"]),
];

#[test]
fn member_selection_extracts_and_lists_as_gnu_tar() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let src = source(w);
    let names = ["dir", "other", "top.txt", "many"];
    // An archive without an index (GNU tar's) and one with (mfu-rs's, its index as a member).
    let gnu_archive = w.join("gnu.tar");
    expect_status(
        gnu_tar()
            .arg("-cf")
            .arg(&gnu_archive)
            .arg("-C")
            .arg(&src)
            .args(names),
        0,
    );
    let mfu_archive = w.join("mfu.tar");
    Tool::new("tar")
        .arg("-c")
        .arg("-f")
        .arg(&mfu_archive)
        .arg("-C")
        .arg(&src)
        .args(names)
        .expect(0);
    // One gzip stream (GNU tar -z): read front to back by rank 0, the selection all the same.
    let gz_archive = w.join("gnu.tar.gz");
    expect_status(
        gnu_tar()
            .arg("-czf")
            .arg(&gz_archive)
            .arg("-C")
            .arg(&src)
            .args(names),
        0,
    );
    for (k, (archive, kind)) in [
        (&gnu_archive, "gnu"),
        (&mfu_archive, "mfu"),
        (&gz_archive, "gz"),
    ]
    .into_iter()
    .enumerate()
    {
        for (c, (label, args)) in CASES.iter().enumerate() {
            let case = format!("{kind}-{label}");
            let want_dir = fresh(w, &format!("{case}.want"));
            let gnu = gnu_tar()
                .arg("-xf")
                .arg(archive)
                .arg("-C")
                .arg(&want_dir)
                .args(*args)
                .output()
                .unwrap();
            let want = extracted(&want_dir);
            let gnu_list = gnu_tar()
                .arg("-tf")
                .arg(archive)
                .args(*args)
                .output()
                .unwrap();
            let gnu_names: Vec<&str> = std::str::from_utf8(&gnu_list.stdout)
                .unwrap()
                .lines()
                .filter(|l| !l.ends_with(".dtaridx"))
                .collect();
            for (how, launch) in launches() {
                // mpirun starts in about half a second: every other case of each archive (each
                // case once over both), -t under it for one case in four.
                let mpi = how.starts_with("np");
                if mpi && (c + k) % 2 == 1 {
                    continue;
                }
                // The serial read is rank 0's whatever the launch: two launches suffice.
                if kind == "gz" && (how == "ranks4" || mpi) {
                    continue;
                }
                let what = format!("{case} {how}: mfu-rs tar -x {args:?}");
                let d = fresh(w, &format!("{case}.{how}"));
                let out = launch
                    .clone()
                    .arg("-x")
                    .arg("-f")
                    .arg(archive)
                    .arg("-C")
                    .arg(&d)
                    .args(*args)
                    .run();
                assert_eq!(
                    out.code(),
                    Some(mfu_code(&gnu)),
                    "{what}: exit status (GNU tar: {:?} {})\n{}",
                    gnu.status.code(),
                    text(&gnu.stderr),
                    out.stderr_str()
                );
                assert_eq!(
                    not_found(out.output.stderr.as_slice()),
                    not_found(&gnu.stderr),
                    "{what}: messages\n{}",
                    out.stderr_str()
                );
                tree::assert_equal_in(&what, &extracted(&d), &want, Compare::CONTENT);
                // -t with the same selection prints GNU tar's names, in its order (GNU tar
                // lists names as stored whatever --strip-components says).
                if how == "ranks1" || how == "ranks4" || (mpi && (c + k) % 4 == 0) {
                    let list = launch
                        .clone()
                        .arg("-t")
                        .arg("-f")
                        .arg(archive)
                        .args(*args)
                        .run();
                    assert_eq!(
                        list.stdout_str().lines().collect::<Vec<_>>(),
                        gnu_names,
                        "{case} {how}: mfu-rs tar -t {args:?}"
                    );
                    assert_eq!(
                        list.code(),
                        Some(mfu_code(&gnu_list)),
                        "{case} {how}: tar -t exit status\n{}",
                        list.stderr_str()
                    );
                    assert_eq!(
                        not_found(list.output.stderr.as_slice()),
                        not_found(&gnu_list.stderr),
                        "{case} {how}: tar -t messages"
                    );
                }
            }
        }
    }
}

#[test]
fn a_selection_in_one_part_of_the_archive_is_extracted_by_every_rank() {
    // 5% of an archive by bytes, all of it in rank 0's even share: the split by selected
    // bytes gives every rank a piece (-v prints each rank's entries and bytes).
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let src = fresh(w, "src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::create_dir_all(src.join("z")).unwrap();
    for i in 0..40 {
        std::fs::write(src.join(format!("a/f{i:02}")), mfu_tests::noise(i, 20_000)).unwrap();
    }
    std::fs::write(src.join("z/big"), mfu_tests::noise(99, 16 << 20)).unwrap();
    let archive = w.join("a.tar");
    Tool::new("tar")
        .args(["-c", "-f"])
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .args(["a", "z"])
        .expect(0);
    let d = fresh(w, "out");
    let out = Tool::new("tar")
        .ranks(4)
        .args(["-x", "-v", "-f"])
        .arg(&archive)
        .arg("-C")
        .arg(&d)
        .arg("a")
        .expect(0);
    let busy = out
        .stdout_str()
        .lines()
        .filter(|l| l.starts_with("rank ") && !l.contains("extracted 0 entries, 0 bytes"))
        .count();
    assert_eq!(
        busy,
        4,
        "every rank extracts part of the selection\n{}",
        out.stdout_str()
    );
    assert!(!d.join("z").exists());
    tree::assert_equal_in(
        "selected subtree",
        &tree::subtree(&extracted(&d), b"a"),
        &tree::subtree(&extracted(&src), b"a"),
        Compare::CONTENT,
    );
}

/// Python's tarfile writing a pax archive with the global header `globals` (a Python dict
/// literal) and the entries of `entries` (name, size, uid, own pax records as a dict literal),
/// every entry owned by `u0`/`g0` (7/8) in its ustar fields, mtime 1000.
fn python_archive(path: &Path, globals: &str, entries: &[(&str, usize, &str)]) {
    let script = format!(
        "import tarfile, io, sys\n\
         t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT, pax_headers={globals})\n\
         for name, size, own in {entries:?}:\n\
         \x20   ti = tarfile.TarInfo(name); ti.size = size; ti.uid = 7; ti.gid = 8\n\
         \x20   ti.uname = 'u0'; ti.gname = 'g0'; ti.mtime = 1000; ti.mode = 0o640\n\
         \x20   ti.pax_headers = eval(own)\n\
         \x20   t.addfile(ti, io.BytesIO(b'x' * size))\n\
         t.close()\n",
        // Rust's debug form of the list is a Python literal.
        entries = entries
            .iter()
            .map(|(n, s, o)| (n.to_string(), *s, o.to_string()))
            .collect::<Vec<_>>()
    );
    expect_status(tool("python3").arg("-c").arg(script).arg(path), 0);
}

/// Owner, group and mtime of the extracted `rel`.
fn owner_and_mtime(dir: &Path, rel: &str) -> (u32, u32, i64) {
    let m = std::fs::symlink_metadata(dir.join(rel)).unwrap();
    (m.uid(), m.gid(), m.mtime())
}

#[test]
fn pax_global_headers_apply_to_the_entries_after_them_at_any_rank() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // A global header (as Python writes it: first) and entries spread over the ranks' parts by
    // a big one; one entry overrides the global uid with its own pax record.
    let archive = w.join("py.tar");
    python_archive(
        &archive,
        "{'uid': '4242', 'gid': '4243', 'uname': 'no-such-user-mfu', 'gname': 'no-such-group-mfu', 'mtime': '2000000000'}",
        &[
            ("first", 10, "{}"),
            ("big", 6 << 20, "{}"),
            ("own", 10, "{'uid': '5555'}"),
            ("last", 10, "{}"),
        ],
    );
    let want_dir = fresh(w, "want");
    expect_status(
        gnu_tar().arg("-xf").arg(&archive).arg("-C").arg(&want_dir),
        0,
    );
    let want: Vec<_> = ["first", "big", "own", "last"]
        .iter()
        .map(|n| owner_and_mtime(&want_dir, n))
        .collect();
    assert_eq!(
        want[0],
        (4242, 4243, 2_000_000_000),
        "GNU tar applies the global header"
    );
    assert_eq!(want[2].0, 5555);
    let gnu_list = gnu_tar().args(["-tvf"]).arg(&archive).output().unwrap();
    for (how, launch) in launches() {
        // Scanned, then from the index the scan saved.
        for pass in ["scan", "index"] {
            let d = fresh(w, &format!("{how}-{pass}"));
            let mut t = launch
                .clone()
                .args(["-x", "-f"])
                .arg(&archive)
                .arg("-C")
                .arg(&d);
            if pass == "scan" {
                t = t.arg("--save-index");
            }
            let out = t.expect(0);
            if pass == "index" {
                assert!(
                    !out.stderr_str().contains("scanned"),
                    "{}",
                    out.stderr_str()
                );
            }
            let got: Vec<_> = ["first", "big", "own", "last"]
                .iter()
                .map(|n| owner_and_mtime(&d, n))
                .collect();
            assert_eq!(got, want, "{how} {pass}: owners and mtimes");
            let list = launch
                .clone()
                .env("TZ", "UTC")
                .args(["-t", "-v", "-f"])
                .arg(&archive)
                .expect(0);
            assert_eq!(
                list.stdout_str(),
                text(&gnu_list.stdout),
                "{how} {pass}: tar -tv"
            );
        }
        let _ = std::fs::remove_file(w.join("py.tar.dtaridx"));
    }

    // GNU tar's own global header (--pax-option key=value), at 2 ranks.
    let src = fresh(w, "src");
    std::fs::write(src.join("a"), b"a").unwrap();
    std::fs::write(src.join("b"), b"b").unwrap();
    let g = w.join("gnu-global.tar");
    expect_status(
        gnu_tar()
            .args([
                "--format=pax",
                "--pax-option=uname=mfu-nobody,uid=4244,gname=mfu-none,gid=4245",
            ])
            .arg("-cf")
            .arg(&g)
            .arg("-C")
            .arg(&src)
            .args(["a", "b"]),
        0,
    );
    let d = fresh(w, "gnu-global");
    Tool::new("tar")
        .ranks(2)
        .args(["-x", "-f"])
        .arg(&g)
        .arg("-C")
        .arg(&d)
        .expect(0);
    assert_eq!(owner_and_mtime(&d, "b").0, 4244);
    assert_eq!(owner_and_mtime(&d, "b").1, 4245);
    let list = Tool::new("tar")
        .ranks(2)
        .env("TZ", "UTC")
        .args(["-t", "-v", "-f"])
        .arg(&g)
        .expect(0);
    let gnu_list = gnu_tar().arg("-tvf").arg(&g).output().unwrap();
    assert_eq!(list.stdout_str(), text(&gnu_list.stdout));

    // A second global header in the middle of the archive: its records join the first's
    // (POSIX; GNU tar 1.34 drops the first's instead), for the entries after it only.
    let a = w.join("one.tar");
    python_archive(
        &a,
        "{'uid': '4246'}",
        &[("p", 10, "{}"), ("pbig", 3 << 20, "{}")],
    );
    let b = w.join("two.tar");
    python_archive(&b, "{'gid': '4247'}", &[("q", 10, "{}")]);
    let mut bytes = std::fs::read(&a).unwrap();
    while bytes.len() >= 512 && bytes[bytes.len() - 512..].iter().all(|&x| x == 0) {
        bytes.truncate(bytes.len() - 512);
    }
    bytes.extend(std::fs::read(&b).unwrap());
    let both = w.join("both.tar");
    std::fs::write(&both, bytes).unwrap();
    for n in [1, 2, 4] {
        let d = fresh(w, &format!("both{n}"));
        Tool::new("tar")
            .ranks(n)
            .args(["-x", "-f"])
            .arg(&both)
            .arg("-C")
            .arg(&d)
            .expect(0);
        assert_eq!(owner_and_mtime(&d, "p").0, 4246, "{n} ranks");
        assert_eq!(owner_and_mtime(&d, "p").1, 8, "{n} ranks");
        let q = owner_and_mtime(&d, "q");
        assert_eq!((q.0, q.1), (4246, 4247), "{n} ranks");
    }
}

/// The uid and gid of `daemon` here (the test's user and group with a known name).
fn daemon_ids() -> (u32, u32) {
    let id = |flag: &str| {
        let out = tool("id").args([flag, "daemon"]).output().unwrap();
        text(&out.stdout)
            .trim()
            .parse::<u32>()
            .expect("id of daemon")
    };
    (id("-u"), id("-g"))
}

#[test]
fn owners_are_restored_by_name_where_this_system_knows_it() {
    if !rustix::process::geteuid().is_root() {
        panic!("this test restores owners: run it as root (the suite does)");
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let archive = w.join("owners.tar");
    // Names this system has, under numbers it does not give them; and unknown names.
    let script = "import tarfile, io, sys\n\
        t = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)\n\
        for name, u, g in [('known', 'daemon', 'daemon'), ('unknown', 'no-such-user-mfu', 'no-such-group-mfu'), ('mixed', 'daemon', 'no-such-group-mfu')]:\n\
        \x20   ti = tarfile.TarInfo(name); ti.size = 1; ti.uid = 4321; ti.gid = 4322\n\
        \x20   ti.uname = u; ti.gname = g\n\
        \x20   t.addfile(ti, io.BytesIO(b'x'))\n\
        t.close()\n";
    expect_status(tool("python3").arg("-c").arg(script).arg(&archive), 0);
    let (du, dg) = daemon_ids();
    for (flag, want) in [
        (None, [(du, dg), (4321, 4322), (du, 4322)]),
        (Some("--numeric-owner"), [(4321, 4322); 3]),
    ] {
        let gnu_dir = fresh(w, "gnu");
        expect_status(
            gnu_tar()
                .arg("-xf")
                .arg(&archive)
                .arg("-C")
                .arg(&gnu_dir)
                .args(flag),
            0,
        );
        for np in [1, 2] {
            let d = fresh(w, &format!("mfu{np}"));
            Tool::new("tar")
                .ranks(np)
                .args(["-x", "-f"])
                .arg(&archive)
                .arg("-C")
                .arg(&d)
                .args(flag)
                .expect(0);
            for (name, want) in ["known", "unknown", "mixed"].iter().zip(want) {
                let got = owner_and_mtime(&d, name);
                let gnu = owner_and_mtime(&gnu_dir, name);
                assert_eq!((got.0, got.1), want, "{name} {flag:?} at {np} ranks");
                assert_eq!((gnu.0, gnu.1), want, "GNU tar: {name} {flag:?}");
            }
        }
    }
    // -t -v --numeric-owner shows the numbers, as GNU tar.
    let ours = Tool::new("tar")
        .env("TZ", "UTC")
        .args(["-t", "-v", "--numeric-owner", "-f"])
        .arg(&archive)
        .expect(0);
    let gnu = gnu_tar()
        .args(["-tv", "--numeric-owner", "-f"])
        .arg(&archive)
        .output()
        .unwrap();
    assert_eq!(ours.stdout_str(), text(&gnu.stdout));
}
