//! `mfu-rs grep` end to end against GNU grep (`/usr/bin/grep`, `LC_ALL=C`) on a generated tree
//! (text, binary, a big file cut into many chunks, non-UTF-8 names and contents, empty files,
//! a file without a last newline, a symbolic link): every option alone and in combinations
//! gives the same stdout, exit status and binary-file notices, at 1, 2 and 4 thread ranks and
//! under `mpirun -np 2`; a match across a chunk boundary is found once, with its line number.
//!
//! The comparison is exact: GNU grep run on the tree's files named in mfu-rs's documented order
//! (depth first, entries by name bytes) must give mfu-rs's stdout byte for byte; that the
//! same GNU grep run as `grep -r` on the tree prints the same lines (in its own order) and
//! exits alike checks that naming the files changed nothing else. (GNU grep matches
//! --include/--exclude against every trailing part of a named file's path but against the
//! name only in a recursion, as mfu-rs does: the globs here are ones where both agree.)

use mfu_tests::Tool;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Chunk size of every run (bytes): the big file is cut into about 60 chunks.
const CHUNK: &str = "4096";

/// Filler lines up to byte `start` (counted from the beginning of `v`), then a line whose
/// `needle` starts at `start`.
fn needle_at(v: &mut Vec<u8>, start: usize) {
    while v.len() + 80 < start {
        v.extend_from_slice(b"filler line with foo and bar\nanother Filler line\n\n");
    }
    while v.len() < start {
        v.push(b'-');
    }
    v.extend_from_slice(b"needle across\n");
}

/// Build the tree at `dir/t` and return it.
fn tree(dir: &Path) -> PathBuf {
    let t = dir.join("t");
    let w = |rel: &[u8], data: &[u8]| {
        let p = t.join(OsStr::from_bytes(rel));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    };
    w(
        b"a.txt",
        b"foo\nFoo\nfood\nbar foo baz\nFOO\nx.y\nxzy\n\nfo+ literal\nfooo\nbaz\n",
    );
    w(b"a/z.log", b"one foo\ntwo\nfoo\n");
    w(b"a/b/c.txt", b"nothing here\nneedle\n");
    w(b"a.b", b"bar\nbaz\nfoo bar\n");
    w(b"A-upper", b"FOO\nfoo-bar\n-foo-\n");
    w(b"bin.dat", b"foo\nbar\0baz\nfoo\n\0\0needle\n");
    w(b"empty", b"");
    w(b"nonl.txt", b"last line foo");
    w(
        b"caf\xe9/n\xff.txt",
        b"\xff\xfe foo \xe9t\xe9\nplain\n\xff\n",
    );
    w(b"sp ace/q r.txt", b"foo bar\nneedle\n");
    // The big file: needles placed across several chunk boundaries, between ordinary lines.
    let mut big = Vec::new();
    for k in 1..=6 {
        // The needle starts 1 to 5 bytes before a chunk boundary.
        needle_at(&mut big, k * 4096 * 9 - 1 - k % 5);
    }
    // A line of about 3 chunks with a needle in its middle chunk.
    big.extend_from_slice(&[b'.'; 6000]);
    big.extend_from_slice(b"needle in a long line");
    big.extend_from_slice(&[b'.'; 6000]);
    big.push(b'\n');
    needle_at(&mut big, 4096 * 60);
    big.extend_from_slice(b"the end foo\n");
    w(b"big/huge.txt", &big);
    std::os::unix::fs::symlink("a.txt", t.join("link-to-a")).unwrap();
    t
}

/// The regular files under `dir`, depth first, each directory's entries by name bytes: the
/// order mfu-rs grep prints files in.
fn files_in_order(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut names: Vec<OsString> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for n in names {
        let p = dir.join(&n);
        let m = fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            files_in_order(&p, out);
        } else if m.is_file() {
            out.push(p);
        }
    }
}

/// A path's place in the documented order (`/` sorts before every other byte).
fn key(p: &Path) -> Vec<u8> {
    p.as_os_str()
        .as_bytes()
        .iter()
        .map(|&b| if b == b'/' { 0 } else { b })
        .collect()
}

fn gnu(args: &[OsString], cwd: &Path) -> Output {
    Command::new("/usr/bin/grep")
        .env("LC_ALL", "C")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run /usr/bin/grep")
}

/// The names in GNU's (`grep: X: binary file matches`) or mfu-rs's notices, sorted.
fn binary_notices(stderr: &[u8]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = stderr
        .split(|&b| b == b'\n')
        .filter_map(|l| l.strip_suffix(b": binary file matches"))
        .map(|l| {
            // `mfu-rs grep: X`, or `grep: X` after GNU grep's program name.
            let at = l
                .windows(6)
                .position(|w| w == b"grep: ")
                .map_or(0, |i| i + 6);
            l[at..].to_vec()
        })
        .collect();
    v.sort();
    v
}

fn sorted_lines(out: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
    v.sort();
    v
}

fn os(args: &[&[u8]]) -> Vec<OsString> {
    args.iter()
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect()
}

/// What GNU grep says for `options PATTERN` on the tree: stdout (files named in order),
/// exit code, binary notices; checked against `grep -r` on the tree.
fn reference(dir: &Path, options: &[OsString]) -> (Vec<u8>, i32, Vec<Vec<u8>>) {
    let mut files = Vec::new();
    files_in_order(&dir.join("t"), &mut files);
    if options.iter().any(|o| o == "-R") {
        // -R follows links: the tree's one link is to a file.
        files.push(dir.join("t/link-to-a"));
        files.sort_by_key(|f| key(f));
    }
    let files: Vec<OsString> = files
        .iter()
        .map(|f| f.strip_prefix(dir).unwrap().as_os_str().to_owned())
        .collect();
    let named = gnu(&[options, &files].concat(), dir);
    let recursive = gnu(&[&os(&[b"-r"]), options, &os(&[b"t"])].concat(), dir);
    assert!(
        sorted_lines(&named.stdout) == sorted_lines(&recursive.stdout),
        "GNU grep {options:?}: named files and -r disagree:\n{}\n---\n{}",
        String::from_utf8_lossy(&named.stdout),
        String::from_utf8_lossy(&recursive.stdout)
    );
    assert_eq!(named.status.code(), recursive.status.code());
    assert_eq!(
        binary_notices(&named.stderr),
        binary_notices(&recursive.stderr)
    );
    (
        named.stdout,
        named.status.code().unwrap(),
        binary_notices(&named.stderr),
    )
}

/// mfu-rs grep `options` (the pattern among them) on `t` in `dir`, as `tool` runs it.
fn ours(tool: Tool, dir: &Path, options: &[OsString]) -> (Vec<u8>, i32, Vec<Vec<u8>>) {
    let run = tool
        .env("MFU_RS_TEST_GREP_CHUNK", CHUNK)
        .args(options)
        .arg("t")
        .current_dir(dir)
        .run();
    (
        run.stdout.clone(),
        run.code().unwrap_or(-1),
        binary_notices(&run.stderr),
    )
}

/// Option sets and patterns compared with GNU grep (the pattern is the last word).
fn cases() -> Vec<Vec<OsString>> {
    let c: &[&[&[u8]]] = &[
        &[b"foo"],
        &[b"-i", b"foo"],
        &[b"-v", b"foo"],
        &[b"-w", b"foo"],
        &[b"-x", b"foo"],
        &[b"-F", b"x.y"],
        &[b"x.y"],
        &[b"-E", b"fo+|ba[rz]$"],
        &[br"fo\+\|^ba[rz]"],
        &[b"fo+"],
        &[b"-c", b"foo"],
        &[b"-l", b"foo"],
        &[b"-L", b"foo"],
        &[b"-n", b"needle"],
        &[b"-n", b"foo"],
        &[b"-h", b"foo"],
        &[b"-H", b"-c", b"needle"],
        &[b"-m", b"2", b"foo"],
        &[b"-m", b"1", b"-c", b"foo"],
        &[b"-m", b"1", b"-n", b"-v", b"needle"],
        &[b"-n", b"-v", b"-i", b"o"],
        &[b"-c", b"-v", b"foo"],
        &[b"-l", b"-v", b"foo"],
        &[b"-L", b"-v", b"foo"],
        &[b"-w", b"-i", b"-n", b"foo"],
        &[b"-x", b"-F", b"foo"],
        &[b"-c", b"-x", b""],
        &[b"-n", b"^$"],
        &[b"--include=*.txt", b"foo"],
        &[b"--exclude=*.txt", b"--include=n*", b"-c", b"foo"],
        &[b"--include=*.txt", b"--exclude=q*", b"-l", b"o"],
        &[b"-e", b"foo", b"-e", b"needle", b"-n"],
        &[b"-q", b"foo"],
        &[b"-q", b"no such text"],
        &[b"no such text"],
        &[b"-c", b"no such text"],
        &[b"\xff"],
        &[b"-n", b"-i", b"\xe9T\xe9"],
        &[b"-r", b"-n", b"[[:upper:]]"],
        &[b"-R", br"\<foo\>\|-o-nothing-"],
        &[b"-c", b"-m", b"1", b"-v", b"zzz"],
    ];
    c.iter().map(|words| os(words)).collect()
}

fn compare(tool: &Tool, dir: &Path, options: &[OsString]) {
    let want = reference(dir, options);
    let got = ours(tool.clone(), dir, options);
    assert_eq!(
        String::from_utf8_lossy(&got.0),
        String::from_utf8_lossy(&want.0),
        "stdout of {tool:?} {options:?}"
    );
    assert_eq!(got.0, want.0, "stdout bytes of {options:?}");
    assert_eq!(got.1, want.1, "exit status of {tool:?} {options:?}");
    assert_eq!(got.2, want.2, "binary notices of {tool:?} {options:?}");
}

#[test]
fn every_option_gives_gnu_greps_output_at_1_2_and_4_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    for ranks in [1, 2, 4] {
        for case in cases() {
            compare(&Tool::new("grep").ranks(ranks), tmp.path(), &case);
        }
    }
}

#[test]
fn under_mpirun_the_output_is_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    for case in [
        &[&b"-n"[..], b"foo"][..],
        &[b"-c", b"-v", b"needle"],
        &[b"-L", b"foo"],
        &[b"-n", b"needle"],
        &[b"\xff"],
    ] {
        compare(&Tool::new("grep").mpi(2), tmp.path(), &os(case));
    }
}

#[test]
fn unordered_prints_the_same_lines() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    for case in [&[&b"-n"[..], b"foo"][..], &[b"-c", b"needle"]] {
        let options = [os(&[b"--unordered"]), os(case)].concat();
        let want = reference(tmp.path(), &os(case));
        let got = ours(Tool::new("grep").ranks(4), tmp.path(), &options);
        assert_eq!(sorted_lines(&got.0), sorted_lines(&want.0), "{case:?}");
        assert_eq!(got.1, want.1);
    }
}

#[test]
fn a_match_across_a_chunk_boundary_is_found_once_with_its_line_number() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let big = t.join("big/huge.txt");
    let data = fs::read(&big).unwrap();
    // The needles do cross boundaries of the chunk size the runs use.
    let chunk: usize = CHUNK.parse().unwrap();
    let crossing = data
        .windows(6)
        .enumerate()
        .filter(|(i, w)| *w == b"needle" && (i / chunk) != ((i + 5) / chunk))
        .count();
    assert!(crossing >= 5, "{crossing} needles cross a boundary");
    let want: Vec<String> = String::from_utf8_lossy(&data)
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("needle"))
        .map(|(i, l)| format!("{}:{l}\n", i + 1))
        .collect();
    for ranks in [1, 3] {
        let run = Tool::new("grep")
            .ranks(ranks)
            .env("MFU_RS_TEST_GREP_CHUNK", CHUNK)
            .args(["-n", "needle"])
            .arg(&big)
            .expect(0);
        assert_eq!(run.stdout_str(), want.concat(), "at {ranks} ranks");
    }
}

#[test]
fn names_as_grep_prints_them() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    // One file: no name; a directory with a trailing slash; no PATH: `.` without `./`.
    for (args, cwd) in [
        (os(&[b"foo", b"t/a.txt"]), tmp.path()),
        (os(&[b"-c", b"foo", b"t/a/"]), tmp.path()),
        (os(&[b"-n", b"foo", b"t/a.b", b"t/a"]), tmp.path()),
        (os(&[b"-n", b"foo"]), t.as_path()),
        (os(&[b"-l", b"foo", b"."]), t.as_path()),
    ] {
        let want = gnu(&[os(&[b"-r"]), args.clone()].concat(), cwd);
        let run = Tool::new("grep").args(&args).current_dir(cwd).run();
        assert_eq!(
            sorted_lines(&run.stdout),
            sorted_lines(&want.stdout),
            "{args:?}"
        );
        assert_eq!(run.code(), want.status.code(), "{args:?}");
    }
    // The mpiFileUtils name reaches it.
    let run = Tool::new("dgrep").args(["-c", "needle", "t/a/b/c.txt"]);
    assert_eq!(run.current_dir(tmp.path()).expect(0).stdout_str(), "1\n");
}

#[test]
fn errors_give_2_even_with_matches_but_not_with_q() {
    let tmp = tempfile::tempdir().unwrap();
    tree(tmp.path());
    let run = Tool::new("grep")
        .args(["foo", "t/a.txt", "t/missing"])
        .current_dir(tmp.path())
        .expect(2);
    assert_eq!(
        run.stdout_str(),
        "t/a.txt:foo\nt/a.txt:food\nt/a.txt:bar foo baz\nt/a.txt:fooo\n"
    );
    assert!(run.stderr_str().contains("missing"), "{}", run.stderr_str());
    let run = Tool::new("grep")
        .args(["-q", "foo", "t/missing", "t/a.txt"])
        .current_dir(tmp.path())
        .expect(0);
    assert_eq!(run.stdout_str(), "");
    let run = Tool::new("grep")
        .args(["-s", "foo", "t/missing"])
        .current_dir(tmp.path())
        .expect(2);
    assert_eq!(run.stderr_str(), "");
    // Bad patterns and a missing pattern are usage errors.
    Tool::new("grep")
        .args(["a\\(", "t"])
        .current_dir(tmp.path())
        .expect(2);
    Tool::new("grep")
        .args([r"\(a\)\1", "t"])
        .current_dir(tmp.path())
        .expect(2);
    Tool::new("grep").expect(2);
    // -m 0 reads nothing.
    Tool::new("grep")
        .args(["-m", "0", "foo", "t"])
        .current_dir(tmp.path())
        .expect(1);
}

#[test]
fn lists_from_walk_and_find_are_searched() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tree(tmp.path());
    let list = tmp.path().join("tree.mfu");
    Tool::new("walk")
        .args(["-q", "-o"])
        .arg(&list)
        .arg(&t)
        .expect(0);
    // The list's files, in the documented order, named as listed (absolute).
    let mut files = Vec::new();
    files_in_order(&t, &mut files);
    let want = gnu(
        &[
            os(&[b"-n", b"needle"]),
            files.iter().map(|f| f.as_os_str().to_owned()).collect(),
        ]
        .concat(),
        tmp.path(),
    );
    for ranks in [1, 4] {
        let run = Tool::new("grep")
            .ranks(ranks)
            .env("MFU_RS_TEST_GREP_CHUNK", CHUNK)
            .args(["-n", "needle", "--input"])
            .arg(&list)
            .expect(0);
        assert_eq!(run.stdout, want.stdout, "at {ranks} ranks");
    }
    // find | grep, the text list on stdin, names filtered by find.
    let found = Tool::new("find")
        .arg(&t)
        .args(["--name", "*.txt", "-o", "-"])
        .expect(0);
    let run = Tool::new("grep")
        .args(["-l", "foo", "--input", "-"])
        .stdin(found.stdout.clone())
        .expect(0);
    let mut names: Vec<String> = run.stdout_str().lines().map(String::from).collect();
    names.sort();
    let mut want: Vec<String> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "txt"))
        .filter(|f| fs::read(f).unwrap().windows(3).any(|w| w == b"foo"))
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    want.sort();
    assert_eq!(names, want);
}
