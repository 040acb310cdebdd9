//! `mfu-rs cmp` end to end, at 1, 2 and 4 ranks: equal copies (`cp -a`, `mfu-rs cp -p`) give
//! exit 0 and the default report; each kind of difference (only in src, only in dest, type,
//! size, content of the same size in a middle and in the last chunk, mtime, mode) is counted in
//! the report and selected by `-o` expressions; `--lite`; usage errors; `-s` with sizes off the
//! block size; an `-o` list that cannot be written; an unreadable directory; a non-UTF-8 `-o`
//! file name.

use mfu::prelude::Collect as Kept;
use mfu_tests::{expect_status, Tool};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Bytes per chunk in these tests: the big files span five chunks, the last one short.
const CHUNK: &str = "65536";
const BIG: usize = 300_000;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A source tree: directories, small files, two big files, a symlink.
fn make_src(src: &Path) {
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    let put = |rel: &str, data: &[u8]| std::fs::write(src.join(rel), data).unwrap();
    put("a/keep.txt", b"keep\n");
    put("a/only_src.txt", b"only in the source\n");
    put("a/b/deep.txt", b"deep\n");
    let big: Vec<u8> = (0..BIG).map(|i| (i * 31 % 253) as u8).collect();
    put("big", &big);
    put("big2", &big);
    put("s.txt", b"size\n");
    put("t", b"abcd");
    put("m.txt", b"mtime\n");
    put("p.txt", b"perm\n");
    std::os::unix::fs::symlink("a/keep.txt", src.join("link")).unwrap();
}

fn sh(args: &[&OsStr]) {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]);
    expect_status(&mut c, 0);
}

/// `cp -a SRC DST`.
fn cp_a(src: &Path, dst: &Path) {
    sh(&[
        "cp".as_ref(),
        "-a".as_ref(),
        src.as_os_str(),
        dst.as_os_str(),
    ]);
}

/// Give `target` the atime and mtime of `reference` (symlinks themselves).
fn same_times(reference: &Path, target: &Path) {
    sh(&[
        "touch".as_ref(),
        "-h".as_ref(),
        "-r".as_ref(),
        reference.as_os_str(),
        target.as_os_str(),
    ]);
}

/// Flip the byte at `at` of `path`, keeping its times.
fn flip_byte(path: &Path, at: usize, reference: &Path) {
    let mut data = std::fs::read(path).unwrap();
    data[at] ^= 0x55;
    std::fs::write(path, data).unwrap();
    same_times(reference, path);
}

/// Change the destination copy in one way per kind of difference; directory times are put
/// back, so only the entries named below differ:
/// - `a/only_src.txt` only in the source, `extra.txt` only in the destination;
/// - `t` a file in the source, a symlink of the same size (4 bytes) in the destination;
/// - `s.txt` longer (same mtime); `big` one byte changed in its third chunk, `big2` in its last
///   byte (same size, same mtime: only CONTENT differs);
/// - `m.txt` another mtime; `p.txt` mode 0600.
fn change(src: &Path, dst: &Path) {
    std::fs::remove_file(dst.join("a/only_src.txt")).unwrap();
    std::fs::write(dst.join("extra.txt"), b"only in the destination\n").unwrap();
    std::fs::remove_file(dst.join("t")).unwrap();
    std::os::unix::fs::symlink("wxyz", dst.join("t")).unwrap();
    std::fs::write(dst.join("s.txt"), b"size changed\n").unwrap();
    same_times(&src.join("s.txt"), &dst.join("s.txt"));
    flip_byte(&dst.join("big"), 150_000, &src.join("big"));
    flip_byte(&dst.join("big2"), BIG - 1, &src.join("big2"));
    sh(&[
        "touch".as_ref(),
        "-d".as_ref(),
        "2001-02-03 04:05:06".as_ref(),
        dst.join("m.txt").as_os_str(),
    ]);
    std::fs::set_permissions(
        dst.join("p.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    same_times(&src.join("a"), &dst.join("a"));
    same_times(src, dst);
}

/// `(src, dst)` in a fresh directory: a source tree and its `cp -a` copy.
fn equal_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    make_src(&src);
    cp_a(&src, &dst);
    (src, dst)
}

/// The `same` and `different` counts of a field's row in the report's table.
fn row(report: &str, field: &str) -> (u64, u64) {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{field} (")))
        .unwrap_or_else(|| panic!("no {field} row in:\n{report}"));
    let after = &line[line.find(')').unwrap() + 1..];
    let nums: Vec<u64> = after
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[0], nums[1])
}

/// The paths of a text list (`path|T` lines).
fn text_list(path: &Path) -> BTreeSet<PathBuf> {
    // Read as the tools read it: typed by its header, whole by its trailer.
    let file = path.as_os_str().as_bytes().to_vec();
    let lists = steal::local::run(1, |comm| flist::io::read(comm, &file).expect("read list"));
    lists[0]
        .iter()
        .map(|e| PathBuf::from(OsStr::from_bytes(e.path)))
        .collect()
}

/// The paths of a stat (v4) list.
fn v4_list(path: &Path) -> BTreeSet<PathBuf> {
    let file = path.as_os_str().as_bytes().to_vec();
    let lists = steal::local::run(1, |comm| flist::io::read(comm, &file).expect("read list"));
    assert_eq!(
        lists[0].detail(),
        flist::Detail::Stat,
        "a stat list by default"
    );
    lists[0]
        .iter()
        .map(|e| PathBuf::from(OsStr::from_bytes(e.path)))
        .collect()
}

fn set(paths: &[PathBuf]) -> BTreeSet<PathBuf> {
    paths.iter().cloned().collect()
}

#[test]
fn equal_trees_exit_0_with_the_default_report() {
    for np in [1, 2, 4] {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = equal_pair(dir.path());
        let out = Tool::new("cmp")
            .np(np)
            .args(["-k", CHUNK])
            .arg(&src)
            .arg(&dst)
            .run()
            .assert_status(0)
            .stdout_str();
        // 13 paths: the roots, a, a/b, the 3 files below them, big, big2, s.txt, t, m.txt,
        // p.txt, link.
        for want in [
            "Number of items that exist in both directories: 13 (Src: 13 Dest: 13)\n",
            "Number of items that exist only in one directory: 0 (Src: 0 Dest: 0)\n",
            "Number of items that exist in both directories and have the same type: 13 (Src: 13 Dest: 13)\n",
            "Number of items that exist in both directories and have different types: 0 (Src: 0 Dest: 0)\n",
            "Number of items that exist in both directories and have the same content: 13 (Src: 13 Dest: 13)\n",
            "Number of items that exist in both directories and have different contents: 0 (Src: 0 Dest: 0)\n",
            "Result: equal (13 paths",
        ] {
            assert!(out.contains(want), "np {np}: no `{want}` in:\n{out}");
        }
        for f in [
            "TYPE", "SIZE", "UID", "GID", "MTIME", "PERM", "ACL", "CONTENT",
        ] {
            assert_eq!(row(&out, f), (13, 0), "np {np} {f}:\n{out}");
        }
    }
    // A copy made by mfu-rs cp -p is equal too; the old name works.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    make_src(&src);
    let dst = dir.path().join("dst");
    Tool::new("cp")
        .arg("-p")
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(0);
    let out = Tool::new("dcmp")
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(0)
        .stdout_str();
    assert!(out.contains("Result: equal"), "{out}");
}

#[test]
fn each_difference_is_reported_and_selectable_one_process() {
    each_difference_is_reported_and_selectable(1);
}

#[test]
fn each_difference_is_reported_and_selectable_at_2_ranks() {
    each_difference_is_reported_and_selectable(2);
}

#[test]
fn each_difference_is_reported_and_selectable_at_4_ranks() {
    each_difference_is_reported_and_selectable(4);
}

fn each_difference_is_reported_and_selectable(np: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    change(&src, &dst);
    let s = |rel: &str| src.join(rel);
    // The default report.
    let out = Tool::new("cmp")
        .np(np)
        .args(["-k", CHUNK])
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1)
        .stdout_str();
    for want in [
        "Number of items that exist in both directories: 12 (Src: 12 Dest: 12)\n",
        "Number of items that exist only in one directory: 1 (Src: 1 Dest: 1)\n",
        "Number of items that exist in both directories and have different types: 1 (Src: 1 Dest: 1)\n",
        "Number of items that exist in both directories and have different contents: 4 (Src: 4 Dest: 4)\n",
        "Result: different (8 of 14 paths differ)",
    ] {
        assert!(out.contains(want), "np {np}: no `{want}` in:\n{out}");
    }
    // Differences per field: t differs in type, content (a link to another target), mtime
    // and mode (0777) but not in size.
    assert_eq!(row(&out, "TYPE"), (11, 1), "{out}");
    assert_eq!(row(&out, "SIZE"), (11, 1), "{out}");
    assert_eq!(row(&out, "CONTENT"), (8, 4), "{out}");
    assert_eq!(row(&out, "MTIME"), (10, 2), "{out}");
    assert_eq!(row(&out, "PERM"), (10, 2), "{out}");

    // The -o lists name exactly the entries expected.
    let o = |name: &str| dir.path().join(name);
    let arg = |expr: &str, name: &str| format!("{expr}:{}", o(name).display());
    let out = Tool::new("cmp")
        .np(np)
        .args(["-k", CHUNK, "-t"])
        .args(["-o", &arg("EXIST=ONLY_SRC", "only_src.txt")])
        .args(["-o", &arg("EXIST=ONLY_DEST", "only_dest.txt")])
        .args(["-o", &arg("EXIST=DIFFER", "one_side.txt")])
        .args(["-o", &arg("TYPE=DIFFER", "type.txt")])
        .args(["-o", &arg("TYPE=COMMON@SIZE=DIFFER", "size.txt")])
        .args(["-o", &arg("CONTENT=DIFFER", "c.txt")])
        .args([
            "-o",
            &arg("SIZE=COMMON@CONTENT=DIFFER@TYPE=COMMON", "same_size.txt"),
        ])
        .args(["-o", &arg("TYPE=COMMON@MTIME=DIFFER", "mtime.txt")])
        .args(["-o", &arg("TYPE=COMMON@PERM=DIFFER", "perm.txt")])
        .args([
            "-o",
            &arg("TYPE=COMMON@CONTENT=DIFFER,SIZE=DIFFER", "x.txt"),
        ])
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1)
        .stdout_str();
    let only_dest = dst.join("extra.txt");
    // As dcmp writes them: a path both trees have is listed from each side.
    let both = |rels: &[&str]| -> BTreeSet<PathBuf> {
        rels.iter().flat_map(|r| [s(r), dst.join(r)]).collect()
    };
    let cases: [(&str, BTreeSet<PathBuf>); 10] = [
        ("only_src.txt", set(&[s("a/only_src.txt")])),
        ("only_dest.txt", set(std::slice::from_ref(&only_dest))),
        (
            "one_side.txt",
            set(&[s("a/only_src.txt"), only_dest.clone()]),
        ),
        ("type.txt", both(&["t"])),
        ("size.txt", both(&["s.txt"])),
        ("c.txt", both(&["t", "s.txt", "big", "big2"])),
        ("same_size.txt", both(&["big", "big2"])),
        ("mtime.txt", both(&["m.txt"])),
        ("perm.txt", both(&["p.txt"])),
        ("x.txt", both(&["s.txt", "big", "big2"])),
    ];
    for (name, want) in cases {
        assert_eq!(text_list(&o(name)), want, "np {np}: {name}");
    }
    // With -o, only the outputs' lines (and the result) unless -b or -v.
    assert!(!out.contains("exist in both directories:"), "{out}");
    assert!(
        out.contains("Number of items that have different contents: 4 (Src: 4 Dest: 4), dumped to"),
        "{out}"
    );
    assert!(
        out.contains(
            // Counted under the first conjunction that holds, as dcmp does.
            "Number of items that have the same type and have different contents: 3 (Src: 3 Dest: 3), or\n"
        ),
        "{out}"
    );
    assert!(out.contains("Result: different"), "{out}");
    let out = Tool::new("cmp")
        .np(np)
        .args(["-b", "-k", CHUNK, "-o"])
        .arg(arg("EXIST=ONLY_SRC", "only.mfu"))
        .arg("-o")
        .arg(arg("TYPE=COMMON@MTIME=DIFFER", "mtime.mfu"))
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1)
        .stdout_str();
    assert!(
        out.contains("Number of items that exist in both directories: 12"),
        "-b prints the default report too:\n{out}"
    );
    assert_eq!(v4_list(&o("only.mfu")), set(&[s("a/only_src.txt")]));
    // Each side's record carries that side's metadata (dcmp copies each tree's own item).
    let file = o("mtime.mfu").as_os_str().as_bytes().to_vec();
    let lists = steal::local::run(1, |comm| flist::io::read(comm, &file).expect("read list"));
    let mtimes: BTreeSet<(PathBuf, i64)> = lists[0]
        .iter()
        .map(|e| {
            (
                PathBuf::from(OsStr::from_bytes(e.path)),
                e.meta.unwrap().mtime,
            )
        })
        .collect();
    let mtime = |p: &Path| std::fs::symlink_metadata(p).unwrap().mtime();
    let (sm, dm) = (s("m.txt"), dst.join("m.txt"));
    assert_eq!(
        mtimes,
        [(sm.clone(), mtime(&sm)), (dm.clone(), mtime(&dm))].into(),
        "np {np}"
    );
}

/// The data comparison in rounds of one file per rank (the tests' round) marks exactly the
/// pairs whose data differs, whichever round their file falls in: the same report and `-o`
/// list as in one round.
#[test]
fn rounds_of_one_file_mark_the_pairs_that_differ() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    change(&src, &dst);
    for np in [1, 2] {
        let list = dir.path().join(format!("c{np}.txt"));
        let out = Tool::new("cmp")
            .np(np)
            .env("MFU_RS_TEST_ROUND_FILES", "1")
            .args(["-b", "-k", CHUNK, "-t", "-o"])
            .arg(format!("CONTENT=DIFFER:{}", list.display()))
            .arg(&src)
            .arg(&dst)
            .run()
            .assert_status(1)
            .stdout_str();
        assert!(
            out.contains("have different contents: 4 (Src: 4 Dest: 4)"),
            "np {np}:\n{out}"
        );
        assert_eq!(row(&out, "CONTENT"), (8, 4), "np {np}:\n{out}");
        let want: BTreeSet<PathBuf> = ["t", "s.txt", "big", "big2"]
            .iter()
            .flat_map(|r| [src.join(r), dst.join(r)])
            .collect();
        assert_eq!(text_list(&list), want, "np {np}");
    }
}

#[test]
fn lite_misses_a_same_size_same_mtime_change_and_catches_a_size_change() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    flip_byte(&dst.join("big"), 70_000, &src.join("big"));
    let out = Tool::new("cmp")
        .np(2)
        .args(["--lite"])
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(0)
        .stdout_str();
    assert!(out.contains("Contents judged by size and modification time (--lite)"));
    assert!(out.contains("Result: equal"), "{out}");
    let out = Tool::new("cmp")
        .np(2)
        .args(["-k", CHUNK])
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1)
        .stdout_str();
    assert_eq!(row(&out, "CONTENT"), (12, 1), "{out}");
    std::fs::write(dst.join("s.txt"), b"longer now\n").unwrap();
    same_times(&src.join("s.txt"), &dst.join("s.txt"));
    let out = Tool::new("cmp")
        .args(["-l"])
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1)
        .stdout_str();
    assert_eq!(row(&out, "SIZE"), (12, 1), "{out}");
    assert_eq!(row(&out, "CONTENT"), (12, 1), "{out}");
}

#[test]
fn single_files_compare_and_usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    // Two files: the roots are the pair.
    let out = Tool::new("cmp")
        .arg(src.join("big"))
        .arg(dst.join("big"))
        .run()
        .assert_status(0)
        .stdout_str();
    assert!(out.contains("exist in both directories: 1 (Src: 1 Dest: 1)"));
    Tool::new("cmp")
        .arg(src.join("big"))
        .arg(dst.join("s.txt"))
        .run()
        .assert_status(1);
    // Missing SRC or DEST, bad expressions.
    let missing = dir.path().join("missing");
    let e = Tool::new("cmp")
        .arg(&missing)
        .arg(&dst)
        .run()
        .assert_status(2);
    assert!(text(&e.stderr).contains("missing: No such file"), "{e:?}");
    Tool::new("cmp")
        .np(2)
        .arg(&src)
        .arg(&missing)
        .run()
        .assert_status(2);
    for bad in [
        "COLOR=DIFFER:x",
        "SIZE=ONLY_SRC:x",
        "MTIME=SAME:x",
        "MTIME=DIFFER",
    ] {
        let e = Tool::new("cmp")
            .args(["-o", bad])
            .arg(&src)
            .arg(&dst)
            .run()
            .assert_status(2);
        assert!(!text(&e.stderr).is_empty());
    }
    Tool::new("cmp").arg(&src).run().assert_status(2);
    // -q prints nothing on stdout, and still tells by the status.
    let out = Tool::new("cmp")
        .arg("-q")
        .arg(&src)
        .arg(src.join("a"))
        .run()
        .assert_status(1);
    assert!(out.stdout.is_empty());
    let help = Tool::new("cmp")
        .arg("--help")
        .run()
        .assert_status(0)
        .stdout_str();
    for want in [
        "EXIST=COMMON@CONTENT=DIFFER",
        "Exit status",
        "--lite",
        "--chunksize",
    ] {
        assert!(help.contains(want), "--help lacks {want}");
    }
}

#[test]
fn direct_reads_take_chunk_and_buffer_sizes_off_the_block_size() {
    // The temporary directory is on a disk file system here, which takes O_DIRECT: every read
    // must start on a block boundary, and the end-of-file checks read at unaligned offsets.
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    for np in [1, 2] {
        for sizes in [["-k", "5000"], ["--bufsize", "5000"]] {
            let out = Tool::new("cmp")
                .np(np)
                .arg("-s")
                .args(sizes)
                .arg(&src)
                .arg(&dst)
                .run()
                .assert_status(0)
                .stdout_str();
            assert!(
                out.contains("Result: equal (13 paths"),
                "np {np} {sizes:?}:\n{out}"
            );
        }
    }
    // A real difference is still found with direct reads.
    flip_byte(&dst.join("big"), BIG - 1, &src.join("big"));
    let out = Tool::new("cmp")
        .np(2)
        .args(["-s", "-k", "5000", "--bufsize", "5000"])
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1)
        .stdout_str();
    assert_eq!(row(&out, "CONTENT"), (12, 1), "{out}");
}

#[test]
fn an_output_list_that_cannot_be_written_is_one_failure() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    // A name too long to create: it passes the check made before the work (a missing
    // directory is refused there, exit 2; see cli_edges.rs) and fails when the list is written.
    let nowhere = dir.path().join("x".repeat(300));
    let good = dir.path().join("good.txt");
    for np in [1, 3] {
        let out = Tool::new("cmp")
            .np(np)
            .arg("-t")
            .arg("-o")
            .arg(format!("EXIST=DIFFER:{}", nowhere.display()))
            .arg("-o")
            .arg(format!("EXIST=COMMON:{}", good.display()))
            .arg(&src)
            .arg(&dst)
            .run()
            .assert_status(1);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let named = format!("{}: File name too long", nowhere.display());
        assert_eq!(stderr.matches(&named).count(), 1, "np {np}:\n{stderr}");
        assert!(
            !stdout.contains(&format!("dumped to \"{}\"", nowhere.display())),
            "np {np}:\n{stdout}"
        );
        assert!(
            stdout.contains(&format!("dumped to \"{}\"", good.display())),
            "np {np}:\n{stdout}"
        );
        assert!(
            stdout.contains("Result: equal (13 paths"),
            "np {np}:\n{stdout}"
        );
        assert!(
            stdout.contains("1 output list could not be written (see above)"),
            "np {np}:\n{stdout}"
        );
        assert!(
            !stdout.contains("could not be compared"),
            "np {np}:\n{stdout}"
        );
        // The 13 common paths, each from both trees (as dcmp writes them).
        assert_eq!(text_list(&good).len(), 2 * 13);
    }
}

#[test]
fn an_unreadable_directory_is_a_failure_not_equal() {
    // As the unprivileged user nobody: a directory of mode 000 owned by root can't be read.
    let tmp = mfu_tests::nobody_tempdir();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    for t in [&src, &dst] {
        std::fs::create_dir_all(t.join("locked")).unwrap();
        std::fs::write(t.join("f"), b"same\n").unwrap();
        std::fs::write(t.join("locked/hidden"), b"not seen\n").unwrap();
        std::fs::set_permissions(
            t.join("locked"),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )
        .unwrap();
    }
    for rel in ["f", "locked", ""] {
        same_times(&src.join(rel), &dst.join(rel));
    }
    let out = Tool::new("cmp")
        .as_nobody()
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    for t in [&src, &dst] {
        let want = format!("{}/locked: Permission denied", t.display());
        assert!(stderr.contains(&want), "{want}:\n{stderr}");
    }
    assert!(!stdout.contains("Result: equal"), "{stdout}");
    assert!(
        stdout.contains("Result: no difference found, but 2 items could not be compared"),
        "{stdout}"
    );
}

#[test]
fn an_output_file_name_need_not_be_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    let mut name = dir.path().as_os_str().as_bytes().to_vec();
    name.extend_from_slice(b"/list\xff:x.txt");
    let mut arg = b"EXIST=COMMON@TYPE=COMMON:".to_vec();
    arg.extend_from_slice(&name);
    let list = PathBuf::from(OsStr::from_bytes(&name));
    for np in [1, 2] {
        let _ = std::fs::remove_file(&list);
        Tool::new("cmp")
            .np(np)
            .args(["-t", "-o"])
            .arg(OsStr::from_bytes(&arg))
            .arg(&src)
            .arg(&dst)
            .run()
            .assert_status(0)
            .stdout_str();
        // The 13 common paths, each from both trees (as dcmp writes them).
        assert_eq!(text_list(&list).len(), 2 * 13, "np {np}");
    }
}

/// Interrupted before its files are compared (SIGINT in the pause after the walks), cmp counts
/// them as not compared, never as different contents, says so, and exits 1.
#[test]
fn an_interrupted_compare_counts_unfinished_files_as_not_compared() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    let pause = dir.path().join("pause");
    let mut child = Tool::new("cmp")
        .args(["-k", CHUNK])
        .arg(&src)
        .arg(&dst)
        .env("MFU_RS_TEST_PAUSE_AFTER_LISTING", &pause)
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ready = dir.path().join("pause.ready");
    let start = std::time::Instant::now();
    while !ready.exists() {
        assert!(
            start.elapsed().as_secs() < 60,
            "cmp never reached the pause"
        );
        assert!(child.try_wait().unwrap().is_none(), "cmp ended early");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    std::fs::write(dir.path().join("pause.go"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("have different contents: 0 "),
        "unfinished files are not different:\n{stdout}"
    );
    assert_eq!(row(&stdout, "CONTENT").1, 0, "{stdout}");
    assert!(stderr.contains("files were not compared"), "{stderr}");
    assert!(stdout.contains("could not be compared"), "{stdout}");
}

#[test]
fn cmp_as_a_library_function_reports_counts_and_failures() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::{Context, ToolReport};
    use mfu::types::Output;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    let options = mfu::cmp::Options::new(src.as_os_str().as_bytes(), dst.as_os_str().as_bytes());
    let reports = steal::local::run(2, |comm| mfu::cmp::run(comm, &options).expect("compared"));
    for r in &reports {
        assert_eq!(
            (r.paths, r.both, r.differing, r.not_compared),
            (13, 13, 0, 0),
            "{r:?}"
        );
        // Both sides of the two big files and of the small ones were read.
        assert!(r.bytes_read >= 4 * BIG as u64, "{r:?}");
        assert_eq!(r.status(), mfu::Status::Ok);
        assert_eq!(r.summary().items, 13);
    }
    change(&src, &dst);
    // One -o list that can be written, one that cannot: a failure, counted and named.
    let kept = Arc::new(Kept::default());
    let mut options =
        mfu::cmp::Options::new(src.as_os_str().as_bytes(), dst.as_os_str().as_bytes());
    let missing = dir.path().join("no/such/dir/x.mfu");
    options.outputs = vec![
        Output::parse(
            "EXIST=ONLY_SRC:".to_string() + dir.path().join("only.mfu").to_str().unwrap(),
        )
        .unwrap(),
        Output::parse("EXIST=COMMON:".to_string() + missing.to_str().unwrap()).unwrap(),
    ];
    options.context = Context::new(kept.clone());
    let reports = steal::local::run(2, |comm| mfu::cmp::run(comm, &options).expect("compared"));
    for r in &reports {
        // 12 paths in both, one only in the source, one only in the destination.
        assert_eq!((r.paths, r.only_src, r.only_dest), (14, 1, 1), "{r:?}");
        assert!(r.differing >= 7, "{r:?}");
        assert_eq!(r.lists_failed, 1);
        assert_eq!(r.written, [true, false]);
        assert_eq!(r.summary().failed, 1);
        assert_eq!(r.status(), mfu::Status::ItemsFailed);
    }
    assert!(reports
        .iter()
        .any(|r| r.failures.iter().any(|f| f.contains("no/such/dir"))));
    let errors = kept.errors.lock().unwrap();
    assert!(
        errors.iter().any(|e| e.contains("no/such/dir")),
        "{errors:?}"
    );
    assert_eq!(v4_list(&dir.path().join("only.mfu")).len(), 1);
}

#[test]
fn json_report_has_the_counts_of_the_text_report() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = equal_pair(dir.path());
    let report = Tool::new("cmp")
        .args(["-v"])
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(0)
        .stdout_str();
    let out = expect_status(
        Tool::new("cmp")
            .np(1)
            .command()
            .arg("--json")
            .arg(&src)
            .arg(&dst),
        0,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["tool"], "cmp");
    assert_eq!(v["status"], 0);
    assert_eq!(v["failed"], 0);
    assert!(v["seconds"].is_number());
    let (items, bytes) = (v["items"].as_u64().unwrap(), v["bytes"].as_u64().unwrap());
    assert!(
        report.contains(&format!("Compared {items} paths: ")),
        "{items}:\n{report}"
    );
    assert!(
        report.contains(&format!(" ({bytes} bytes, ")),
        "{bytes}:\n{report}"
    );
    assert!(
        report.contains(&format!("Result: equal ({items} paths")),
        "{report}"
    );
    // The report is not printed with --json (stdout is the JSON alone).
    assert!(!text(&out.stderr).contains("Result:"));

    // Different trees: status 1, the same counts in both forms.
    change(&src, &dst);
    let report = Tool::new("cmp")
        .arg(&src)
        .arg(&dst)
        .run()
        .assert_status(1)
        .stdout_str();
    let out = expect_status(
        Tool::new("cmp")
            .np(1)
            .command()
            .arg("--json")
            .arg(&src)
            .arg(&dst),
        1,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], 1);
    let (items, differing) = (
        v["items"].as_u64().unwrap(),
        v["differing"].as_u64().unwrap(),
    );
    assert!(
        report.contains(&format!(
            "Result: different ({differing} of {items} paths differ)"
        )),
        "{v}\n{report}"
    );
}

// A stopped or killed comparison continues from its checkpoint (issue 33): the rerun reads only
// the chunks not recorded, and its report, list and exit status are an uninterrupted run's.

/// What a `cmp` run gave: exit code (`None`: killed), the report on stdout, and the paths of
/// its `-o` list (`None`: not written; the list is removed, for the next run).
type Outcome = (Option<i32>, String, Option<BTreeSet<PathBuf>>);

/// A pair under `dir` for the checkpoint tests: 8 files of 256 KiB (4 chunks each) in two
/// directories with odd names, and a small file; the copy differs in the third chunk of one big
/// file and in the small file (same sizes and times: only CONTENT differs).
fn resumable_pair(dir: &Path) {
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    for i in 0..8u64 {
        let sub = src.join(if i % 2 == 0 { "d one" } else { "d|two" });
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join(format!("f {i}")),
            mfu_tests::noise(i + 1, 256 << 10),
        )
        .unwrap();
    }
    std::fs::write(src.join("small"), b"a small file\n").unwrap();
    cp_a(&src, &dst);
    flip_byte(&dst.join("d one/f 2"), 150_000, &src.join("d one/f 2"));
    flip_byte(&dst.join("small"), 3, &src.join("small"));
}

/// `cmp` of the pair of [`resumable_pair`] through `tool` (its launch), listing the files whose
/// contents differ, with the checkpoint at `ckpt` (`None`: `--no-checkpoint`).
fn resumable_cmp(tool: Tool, dir: &Path, ckpt: Option<&Path>) -> Tool {
    let list = dir.join("differ.txt");
    let tool = tool
        .args(["-k", CHUNK, "-b", "-t", "-o"])
        .arg(format!("EXIST=COMMON@CONTENT=DIFFER:{}", list.display()))
        .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20")
        .env("XDG_STATE_HOME", dir.join("state"));
    let tool = match ckpt {
        Some(c) => tool.arg("--checkpoint").arg(c),
        None => tool.arg("--no-checkpoint"),
    };
    tool.arg(dir.join("src")).arg(dir.join("dst"))
}

/// The [`Outcome`] of `run` (see [`resumable_cmp`]). The report's ATIME row is left out: each
/// run's reads move the access times the next one sees.
fn cmp_outcome(run: &mfu_tests::Run, dir: &Path) -> Outcome {
    let list = dir.join("differ.txt");
    let paths = list.exists().then(|| text_list(&list));
    let _ = std::fs::remove_file(&list);
    let report: String = run
        .stdout_str()
        .lines()
        .filter(|l| !l.trim_start().starts_with("ATIME ("))
        .map(|l| format!("{l}\n"))
        .collect();
    (run.code(), report, paths)
}

/// Whether the checkpoint at `ckpt` holds a mark (a log file with bytes).
fn has_marks(ckpt: &Path) -> bool {
    std::fs::read_dir(ckpt).is_ok_and(|d| {
        d.flatten().any(|e| {
            e.file_name().as_bytes().starts_with(b"log.") && e.metadata().is_ok_and(|m| m.len() > 0)
        })
    })
}

/// A stop (the knob that sets the stop flag after a process's N-th mark, as a SIGTERM does)
/// or a kill -9 (the knob that kills the process once its N-th mark is durable), at one rank
/// count; the rerun at another continues and gives what an uninterrupted run gives.
#[test]
fn a_stopped_or_killed_compare_continues_at_another_rank_count() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_pair(dir);
    let want = cmp_outcome(&resumable_cmp(Tool::new("cmp"), dir, None).run(), dir);
    assert_eq!(want.0, Some(1), "{}", want.1);
    assert_eq!(
        want.2.as_ref().map(|l| l.len()),
        Some(4),
        "both sides of the two files that differ: {want:?}"
    );
    let stop = "MFU_RS_TEST_CHECKPOINT_STOP_AFTER";
    let die = "MFU_RS_TEST_CHECKPOINT_DIE_AFTER";
    let cases = [
        (Tool::new("cmp"), stop, "5", Tool::new("cmp").ranks(3)),
        (Tool::new("cmp").ranks(3), die, "7", Tool::new("cmp").mpi(2)),
        (Tool::new("cmp").mpi(2), stop, "3", Tool::new("cmp")),
        (Tool::new("cmp"), die, "12", Tool::new("cmp")),
        // In rounds of a few files per rank, other rounds for the rerun.
        (
            Tool::new("cmp").env("MFU_RS_TEST_ROUND_FILES", "2"),
            stop,
            "9",
            Tool::new("cmp")
                .ranks(2)
                .env("MFU_RS_TEST_ROUND_FILES", "3"),
        ),
    ];
    for (n, (first, knob, after, rerun)) in cases.into_iter().enumerate() {
        let ckpt = dir.join(format!("ckpt {n}"));
        let cut = resumable_cmp(first, dir, Some(&ckpt))
            .env(knob, after)
            .run();
        let what = format!("case {n} ({knob}={after})");
        let err = cut.stderr_str();
        if knob == stop {
            assert_eq!(cut.code(), Some(1), "{what}: {err}");
            assert!(err.contains("run the same command again"), "{what}: {err}");
        } else {
            assert_ne!(cut.code(), Some(0), "{what}: {err}");
        }
        let cut = cmp_outcome(&cut, dir);
        assert_eq!(cut.2, None, "{what}: a cut-short run wrote its list");
        assert!(has_marks(&ckpt), "{what}: no marks kept");
        let again = resumable_cmp(rerun, dir, Some(&ckpt)).run();
        again.stderr_contains("continuing from checkpoint");
        assert_eq!(cmp_outcome(&again, dir), want, "{what}");
        assert!(!ckpt.exists(), "{what}: the checkpoint outlived the run");
    }
}

/// A run killed after its work was done and its report printed, but before it left (a time
/// limit's SIGKILL during MPI's shutdown: the knob kills it just before the complete
/// checkpoint is removed), leaves every unit marked: the rerun compares nothing again and
/// gives the same report, then removes the checkpoint. At one process and `mpirun -np 2`.
#[test]
fn a_kill_after_the_report_leaves_a_rerun_nothing_to_compare() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_pair(dir);
    let want = cmp_outcome(&resumable_cmp(Tool::new("cmp"), dir, None).run(), dir);
    for (n, first) in [Tool::new("cmp"), Tool::new("cmp").mpi(2)]
        .into_iter()
        .enumerate()
    {
        let ckpt = dir.join(format!("ckpt {n}"));
        let cut = resumable_cmp(first, dir, Some(&ckpt))
            .env("MFU_RS_TEST_CHECKPOINT_DIE_AT_EXIT", "1")
            .run();
        assert_ne!(cut.code(), Some(0), "case {n}: {}", cut.stderr_str());
        assert!(cut.stdout_str().contains("Result:"), "case {n}: no report");
        assert!(
            has_marks(&ckpt),
            "case {n}: the complete checkpoint was removed"
        );
        let again = resumable_cmp(Tool::new("cmp").ranks(2), dir, Some(&ckpt)).run();
        // Every unit was recorded: 8 files of 4 chunks and the small file.
        again.stderr_contains("continuing from checkpoint");
        again.stderr_contains(": 33 units done by earlier runs");
        assert_eq!(cmp_outcome(&again, dir), want, "case {n}");
        assert!(
            !ckpt.exists(),
            "case {n}: the checkpoint outlived the rerun"
        );
    }
}

/// A signal that comes as the run ends (the knob raises the stop flag after the report, as the
/// process exits) keeps the complete checkpoint: the run says so and exits 1, as an
/// interrupted run does, and the same command run again compares nothing, gives the same
/// report and removes it.
#[test]
fn a_signal_as_the_run_ends_keeps_its_complete_checkpoint_for_the_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_pair(dir);
    let want = cmp_outcome(&resumable_cmp(Tool::new("cmp"), dir, None).run(), dir);
    let ckpt = dir.join("ckpt");
    let late = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt))
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AT_EXIT", "1")
        .run();
    assert_eq!(late.code(), Some(1), "{}", late.stderr_str());
    late.stderr_contains("interrupted by a signal as the run ended")
        .stderr_contains("is kept");
    assert!(has_marks(&ckpt), "the complete checkpoint was removed");
    let again = resumable_cmp(Tool::new("cmp").ranks(3), dir, Some(&ckpt)).run();
    again
        .stderr_contains("continuing from checkpoint")
        .stderr_contains(": 33 units done by earlier runs");
    assert_eq!(cmp_outcome(&again, dir), want);
    assert!(!ckpt.exists(), "the checkpoint outlived the rerun");
}

/// A signal that comes only as the process exits, after the tool returned (what `mpirun` sends
/// to the ranks still finishing when another rank exits 1, as a `cmp` that found differences
/// does), does not keep the complete checkpoint nor change the exit status: the work is done.
#[test]
fn a_signal_after_the_run_returned_removes_its_complete_checkpoint_as_usual() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_pair(dir);
    let want = cmp_outcome(&resumable_cmp(Tool::new("cmp"), dir, None).run(), dir);
    let ckpt = dir.join("ckpt");
    let run = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt))
        .env("MFU_RS_TEST_CHECKPOINT_STOP_IN_EXIT", "1")
        .run();
    assert!(
        !run.stderr_str().contains("interrupted"),
        "{}",
        run.stderr_str()
    );
    assert_eq!(cmp_outcome(&run, dir), want);
    assert!(!ckpt.exists(), "the complete checkpoint was kept");
}

/// A checkpoint is trusted only when it is this comparison's: after a source file changed
/// (its listing differs), with garbage in its files, or made by another tool, the rerun says
/// it starts over and gives a fresh run's result; a symlink at `--checkpoint` is refused,
/// never followed, before any work.
#[test]
fn a_compare_starts_over_when_its_checkpoint_is_not_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_pair(dir);
    let ckpt = dir.join("ckpt");
    let stopped = |dir: &Path| {
        let run = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt))
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
            .run();
        assert_eq!(run.code(), Some(1), "{}", run.stderr_str());
        cmp_outcome(&run, dir);
        assert!(has_marks(&ckpt));
    };

    // A source file changed since: another listing.
    stopped(dir);
    let f = dir.join("src/d one/f 0");
    let mut data = std::fs::read(&f).unwrap();
    data[1000] ^= 1;
    std::fs::write(&f, data).unwrap();
    let fresh = cmp_outcome(&resumable_cmp(Tool::new("cmp"), dir, None).run(), dir);
    assert_eq!(fresh.2.as_ref().map(|l| l.len()), Some(6), "{fresh:?}");
    let again = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt)).run();
    again.stderr_contains("listing of SRC changed");
    again.stderr_contains("starting over");
    assert_eq!(cmp_outcome(&again, dir), fresh);

    // Garbage in every file of the checkpoint.
    stopped(dir);
    for e in std::fs::read_dir(&ckpt).unwrap() {
        std::fs::write(e.unwrap().path(), b"\x00garbage\xffMFU").unwrap();
    }
    let again = resumable_cmp(Tool::new("cmp").ranks(2), dir, Some(&ckpt)).run();
    again.stderr_contains("not used");
    assert!(!again.stderr_str().contains("continuing"));
    assert_eq!(cmp_outcome(&again, dir), fresh);

    // Another command's checkpoint (a stopped check of the source against a manifest) at the
    // same path.
    let names: Vec<String> = (0..8)
        .map(|i| format!("{}/f {i}", if i % 2 == 0 { "d one" } else { "d|two" }))
        .collect();
    let sums = Command::new("sha256sum")
        .args(&names)
        .current_dir(dir.join("src"))
        .output()
        .unwrap();
    assert!(sums.status.success());
    std::fs::write(dir.join("SUMS"), &sums.stdout).unwrap();
    let other = Tool::new("cmp")
        .arg("--manifest")
        .arg(dir.join("SUMS"))
        .arg("--checkpoint")
        .arg(&ckpt)
        .arg(dir.join("src"))
        .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "2")
        .run();
    assert_eq!(other.code(), Some(1), "{}", other.stderr_str());
    assert!(has_marks(&ckpt));
    let again = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt)).run();
    again.stderr_contains("made by 'cmp --manifest'");
    assert_eq!(cmp_outcome(&again, dir), fresh);

    // A symlink at the checkpoint's name, to a directory of the user's.
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("keep"), b"mine").unwrap();
    std::os::unix::fs::symlink(&elsewhere, &ckpt).unwrap();
    let refused = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt)).run();
    assert!(
        matches!(refused.code(), Some(c) if c != 0),
        "{}",
        refused.stderr_str()
    );
    refused.stderr_contains("not a checkpoint");
    assert_eq!(cmp_outcome(&refused, dir).2, None, "no list written");
    assert!(std::fs::symlink_metadata(&ckpt).unwrap().is_symlink());
    let left: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "the symlink's target was written to");
    assert_eq!(std::fs::read(elsewhere.join("keep")).unwrap(), b"mine");
}

/// A real SIGTERM in the middle of the data comparison: exit 1, "run the same command again",
/// and the rerun continues to an uninterrupted run's result.
#[test]
fn a_compare_stopped_by_sigterm_continues() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_pair(dir);
    let want = cmp_outcome(&resumable_cmp(Tool::new("cmp"), dir, None).run(), dir);
    let ckpt = dir.join("ckpt");
    let mut cmd = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt))
        .env("MFU_RS_TEST_ITEM_DELAY_MS", "100")
        .command();
    let out = mfu_tests::signal_when(&mut cmd, rustix::process::Signal::TERM, || has_marks(&ckpt));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("run the same command again"), "{err}");
    assert!(
        !dir.join("differ.txt").exists(),
        "a stopped run wrote its list"
    );
    let again = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt)).run();
    again.stderr_contains("continuing from checkpoint");
    assert_eq!(cmp_outcome(&again, dir), want);
}

/// `cmp --manifest` continues too: a file recorded as hashed is not read again while its
/// identity (inode, size, times) is the one recorded, and is read again once it changed.
#[test]
fn a_manifest_check_continues_and_reads_again_what_changed_since() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("sub dir")).unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("sub dir/f|{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        std::fs::write(tree.join(n), mfu_tests::noise(i as u64 + 7, 64 << 10)).unwrap();
    }
    let sums = Command::new("sha256sum")
        .args(&names)
        .current_dir(&tree)
        .output()
        .unwrap();
    assert!(sums.status.success());
    let manifest = dir.join("SHA256SUMS");
    std::fs::write(&manifest, &sums.stdout).unwrap();
    let ckpt = dir.join("ckpt");
    let check = |tool: Tool, ckpt: Option<&Path>| {
        let tool = tool
            .arg("--manifest")
            .arg(&manifest)
            .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20")
            .env("XDG_STATE_HOME", dir.join("state"));
        let tool = match ckpt {
            Some(c) => tool.arg("--checkpoint").arg(c),
            None => tool.arg("--no-checkpoint"),
        };
        tool.arg(&tree)
    };
    let stop = |tool: Tool| {
        let run = check(tool, Some(&ckpt))
            .env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "4")
            .run();
        assert_eq!(run.code(), Some(1), "{}", run.stderr_str());
        assert!(has_marks(&ckpt));
        stopped_after(&run.stderr_str(), "files")
    };
    let want = check(Tool::new("cmp"), None).run().assert_status(0);
    let (done, total) = stop(Tool::new("cmp"));
    assert_eq!(total, 12);
    assert!((4..12).contains(&done), "{done}");
    // One mark per file hashed: the rerun would be stopped, were it hashing again the files
    // recorded.
    let again = check(Tool::new("cmp").ranks(3), Some(&ckpt))
        .env(
            "MFU_RS_TEST_CHECKPOINT_STOP_AFTER",
            (12 - done + 1).to_string(),
        )
        .run();
    again.stderr_contains(&format!("{done} units done by earlier runs"));
    assert!(
        !again.stderr_str().contains("stopped after"),
        "{}",
        again.stderr_str()
    );
    assert_eq!(
        (again.code(), again.stdout_str()),
        (want.code(), want.stdout_str())
    );

    // Every file rewritten (same size) after a stop: those recorded are read again.
    stop(Tool::new("cmp").mpi(2));
    for (i, n) in names.iter().enumerate() {
        std::fs::write(tree.join(n), mfu_tests::noise(i as u64 + 100, 64 << 10)).unwrap();
    }
    let fresh = check(Tool::new("cmp"), None).run().assert_status(1);
    assert!(
        fresh.stdout_str().contains("0 match, 12 differ"),
        "{}",
        fresh.stdout_str()
    );
    let again = check(Tool::new("cmp"), Some(&ckpt)).run();
    again.stderr_contains("continuing from checkpoint");
    assert_eq!(
        (again.code(), again.stdout_str()),
        (fresh.code(), fresh.stdout_str())
    );
}

/// `X` and `Y` of the line `stopped after X of Y WHAT` in `stderr`.
fn stopped_after(stderr: &str, what: &str) -> (u64, u64) {
    let at = stderr
        .find("stopped after ")
        .unwrap_or_else(|| panic!("no stop line: {stderr}"));
    let words: Vec<&str> = stderr[at..].split_whitespace().collect();
    assert_eq!(words[5], what, "{stderr}");
    (words[2].parse().unwrap(), words[4].parse().unwrap())
}

/// The rerun reads only the chunks not recorded. It marks each chunk it compares, and the stop
/// knob set one past the chunks left lets it end unstopped; were it comparing again what the
/// first run recorded, it would make more marks and be stopped.
#[test]
fn a_rerun_compares_only_the_chunks_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_pair(dir);
    let want = cmp_outcome(&resumable_cmp(Tool::new("cmp"), dir, None).run(), dir);
    let ckpt = dir.join("ckpt");
    let knob = "MFU_RS_TEST_CHECKPOINT_STOP_AFTER";
    let cut = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt))
        .env(knob, "9")
        .run();
    assert_eq!(cut.code(), Some(1), "{}", cut.stderr_str());
    let (done, total) = stopped_after(&cut.stderr_str(), "bytes");
    // 8 files of 4 chunks of 64 KiB, and the small file (13 bytes): 33 chunks.
    assert_eq!(total, 8 * (256 << 10) + 13);
    let chunks = done / 65536 + u64::from(done % 65536 != 0);
    assert!((9..33).contains(&chunks), "{done} bytes done");
    let again = resumable_cmp(Tool::new("cmp"), dir, Some(&ckpt))
        .env(knob, (33 - chunks + 1).to_string())
        .run();
    again.stderr_contains(&format!("{chunks} units done by earlier runs"));
    assert!(
        !again.stderr_str().contains("stopped after"),
        "the rerun compared recorded chunks again: {}",
        again.stderr_str()
    );
    assert_eq!(cmp_outcome(&again, dir), want);
}

/// The chunk size in a verbose report (`in chunks of N bytes`).
fn chunk_size_of(report: &str) -> u64 {
    let at = report
        .find("in chunks of ")
        .unwrap_or_else(|| panic!("no chunk size: {report}"));
    report[at..]
        .split_whitespace()
        .nth(3)
        .unwrap()
        .parse()
        .unwrap()
}

/// Without `-k` the chunk size is chosen from the data and the threads of all ranks: a rerun
/// at another rank count cuts files as the run it continues did (else no recorded chunk would
/// be its own, and it would compare everything again).
#[test]
fn a_rerun_at_another_rank_count_cuts_files_as_the_first_run_did() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..4 {
        std::fs::write(src.join(format!("f{i}")), mfu_tests::noise(i, 16 << 20)).unwrap();
    }
    cp_a(&src, &dst);
    let ckpt = dir.path().join("ckpt");
    let knob = "MFU_RS_TEST_CHECKPOINT_STOP_AFTER";
    let run = |tool: Tool, after: u64| {
        tool.args(["-v", "--checkpoint"])
            .arg(&ckpt)
            .arg(&src)
            .arg(&dst)
            .env(knob, after.to_string())
            .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20")
            .run()
    };
    let cut = run(Tool::new("cmp"), 1);
    assert_eq!(cut.code(), Some(1), "{}", cut.stderr_str());
    let chunk = chunk_size_of(&cut.stdout_str());
    let (done, total) = stopped_after(&cut.stderr_str(), "bytes");
    assert_eq!(total, 64 << 20);
    let chunks = 4 * (16u64 << 20).div_ceil(chunk);
    let recorded = done.div_ceil(chunk);
    assert!(recorded < chunks, "{}", cut.stderr_str());
    let again = run(Tool::new("cmp").ranks(3), chunks - recorded + 1);
    again.stderr_contains(&format!("{recorded} units done by earlier runs"));
    assert!(
        !again.stderr_str().contains("stopped after"),
        "the rerun compared recorded chunks again: {}",
        again.stderr_str()
    );
    assert_eq!(chunk_size_of(&again.stdout_str()), chunk);
    assert_eq!(again.code(), Some(0), "{}", again.stdout_str());
}

/// The default checkpoint inside a tree compared (the state directory in it, as with
/// `cmp ~ /backup/home`) is not compared itself: its files change as the run goes, and a
/// rerun would find another listing and start over every time.
#[test]
fn a_checkpoint_inside_a_tree_compared_is_left_out_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    resumable_pair(dir);
    let state = dir.join("src/state");
    let run = || {
        Tool::new("cmp")
            .args(["-k", CHUNK, "-b", "-t", "-o"])
            .arg(format!(
                "EXIST=COMMON@CONTENT=DIFFER:{}",
                dir.join("differ.txt").display()
            ))
            .env("MFU_RS_CHECKPOINT_INTERVAL_MS", "20")
            .env("XDG_STATE_HOME", &state)
            .arg(dir.join("src"))
            .arg(dir.join("dst"))
    };
    let cut = run().env("MFU_RS_TEST_CHECKPOINT_STOP_AFTER", "6").run();
    assert_eq!(cut.code(), Some(1), "{}", cut.stderr_str());
    let kept = state.join("mfu-rs/checkpoints");
    assert_eq!(std::fs::read_dir(&kept).unwrap().count(), 1);
    let again = run().run();
    again.stderr_contains("continuing from checkpoint");
    let got = cmp_outcome(&again, dir);
    assert_eq!(std::fs::read_dir(&kept).unwrap().count(), 0);
    // An uninterrupted run now (the state directory and the one in it are only in SRC).
    assert_eq!(got, cmp_outcome(&run().run(), dir));
    assert!(
        got.1
            .contains("only in one directory: N/A (Src: 2 Dest: 0)"),
        "{}",
        got.1
    );
}
