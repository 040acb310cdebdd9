//! `mfu-rs cp` end to end: awkward trees copied at 1, 2 and 4 ranks, the path rules of
//! cli-compat.md against GNU `cp -a`, filters, exit statuses, the old name.

use mfu_tests::tree::{self, Compare, Immutable, Kind, Tree};
use mfu_tests::{bin, clean_env, expect_status, Tool};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `Copied ... (N bytes)` summary line of stdout, and N.
fn copied_summary(out: &Output) -> (String, u64) {
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("Copied "))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "want exactly one `Copied ` line on stdout (from rank 0 only):\n{stdout}"
    );
    let line = lines[0];
    let n = line
        .split('(')
        .filter_map(|s| {
            s.strip_suffix(" bytes)")
                .or_else(|| s.split(" bytes)").next())
        })
        .filter_map(|s| s.trim().parse::<u64>().ok())
        .next()
        .unwrap_or_else(|| panic!("no `(N bytes)` in the summary: {line}"));
    (line.to_string(), n)
}

/// A temporary directory that others can traverse (for the tests that drop privileges).
fn open_tempdir() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    tree::chmod(t.path(), 0o755);
    t
}

// ---------------------------------------------------------------------------------------------
// The comparator itself

#[test]
fn tree_comparator_agrees_with_gnu_cp_and_sees_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let aw = tree::make_awkward_tree(&src, true);
    // GNU cp cannot copy paths longer than PATH_MAX: the long part is moved aside for it.
    let top = aw.long_rel.split(|&b| b == b'/').next().unwrap().to_vec();
    let top_name = std::ffi::OsStr::from_bytes(&top);
    let aside = tmp.path().join("aside");
    std::fs::rename(src.join(top_name), &aside).unwrap();
    let copy = tmp.path().join("copy");
    tree::run_tool("cp", &["-a".as_ref(), src.as_os_str(), copy.as_os_str()]);
    let a = tree::snapshot(&src);
    let b = tree::snapshot(&copy);
    std::fs::rename(&aside, src.join(top_name)).unwrap();
    let full = tree::snapshot(&src);
    assert_eq!(tree::without(&full, &top).len(), a.len());
    // A second long path, built the same way, compares equal; its deep mtime is seen.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let rel2 = tree::make_long_path(&other, 4200);
    assert_eq!(rel2, aw.long_rel);
    let fd = tree::open_dir(&other, &rel2);
    tree::write_file_at(&fd, b"deep.txt", b"deeper than PATH_MAX\n", 0o644);
    let long_a = tree::subtree(&full, &top);
    let long_b = tree::subtree(&tree::snapshot(&other), &top);
    tree::assert_equal_in("two long paths", &long_a, &long_b, Compare::CONTENT);
    let d = tree::diff(&long_a, &long_b, Compare::META, 100).join("\n");
    assert!(
        d.contains("/deep.txt (") && d.contains("mtime") && d.contains("xattrs"),
        "{d}"
    );
    let a = {
        let mut a = a;
        // The long path's entries are in `full` only.
        assert!(!a.keys().any(|k| k.starts_with(&top)));
        a.insert(b"x".to_vec(), full[&b""[..]].clone());
        a.remove(&b"x"[..]);
        a
    };
    let a_long = full;
    // Every kind of awkward entry was seen, with what it must carry.
    let mut deep = aw.long_rel.clone();
    deep.extend_from_slice(b"/deep.txt");
    assert!(deep.len() > 4096 && tmp.path().as_os_str().len() + deep.len() > 4200);
    assert_eq!(a_long[&deep].xattrs[&b"user.mfu.deep"[..]], b"deep value");
    assert_eq!(a_long[&deep].mtime, (1_500_000_000, 123_456_789));
    assert_eq!(a[&b"fifo"[..]].kind, Kind::Fifo);
    assert_eq!(
        a[&b"perm/dangling"[..]].target.as_deref(),
        Some(&b"dangling-target"[..])
    );
    assert!(a.contains_key(tree::NON_UTF8));
    assert_eq!(
        a[&b"links/b"[..]].link_group.as_deref(),
        Some(&b"links/a"[..])
    );
    assert_eq!(
        a[&b"links/sub/c"[..]].link_group.as_deref(),
        Some(&b"links/a"[..])
    );
    assert_eq!(
        a[&b"links/a"[..]].link_group.as_deref(),
        Some(&b"links/a"[..])
    );
    assert_eq!(a[&b"modes/setuid"[..]].perm, 0o4755);
    assert_eq!(a[&b"modes/foreign"[..]].uid, 1234);
    let sparse = &a[&aw.sparse_rel];
    assert_eq!(sparse.segments.len(), 2, "{:?}", sparse.segments);
    assert_eq!(sparse.segments[1].0, tree::SPARSE_DATA[1]);
    assert!(a[&b"big/large.bin"[..]].digest != a[&b"big/exact_chunk.bin"[..]].digest);
    // GNU cp -a keeps all of it.
    tree::assert_equal_in("cp -a copy", &a, &b, Compare::FULL);
    // A changed mtime (by one nanosecond) is seen with metadata, not without.
    let f = copy.join("d0/sub0/alpha_0");
    let (s, ns) = tree::mtime_of(&f);
    tree::set_mtime(&f, (s, ns + 1));
    let c = tree::snapshot(&copy);
    let d = tree::diff(&a, &c, Compare::META, 10);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].contains("d0/sub0/alpha_0") && d[0].contains("mtime"),
        "{d:?}"
    );
    assert!(tree::diff(&a, &c, Compare::CONTENT, 10).is_empty());
    // So are a changed byte, a changed xattr, a broken hard link, a changed hole map, a mode.
    std::fs::write(copy.join("perm/exec_file"), b"0123456789").unwrap();
    tree::set_xattr(&copy.join("xattr_file"), "user.mfu.test", b"hellO");
    std::fs::remove_file(copy.join("links/b")).unwrap();
    std::fs::write(copy.join("links/b"), b"linked data\n").unwrap();
    tree::chmod(&copy.join("modes/sticky"), 0o777);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(copy.join("sparse.bin"))
            .unwrap();
        f.write_all_at(&[0u8; 4096], 3 << 20).unwrap();
    }
    let c = tree::snapshot(&copy);
    let d = tree::diff(&a, &c, Compare::FULL, 50).join("\n");
    for (path, field) in [
        ("perm/exec_file", "content"),
        ("xattr_file", "xattrs"),
        ("links/b", "hard-link group"),
        ("modes/sticky", "mode"),
        ("sparse.bin", "data segments"),
    ] {
        assert!(
            d.lines()
                .any(|l| l.starts_with(&format!("differs: {path}:")) && l.contains(field)),
            "missing `{path}: {field}` in:\n{d}"
        );
    }
    let d = tree::diff(&a, &c, Compare::CONTENT, 50).join("\n");
    assert!(
        !d.contains("sparse.bin") && !d.contains("modes/sticky"),
        "{d}"
    );
    // Missing and extra entries, and ctime changes.
    let before = tree::snapshot(&copy);
    std::fs::remove_file(copy.join("fifo")).unwrap();
    std::fs::write(copy.join("extra"), b"x").unwrap();
    let after = tree::snapshot(&copy);
    let d = tree::diff(&before, &after, Compare::CONTENT, 10).join("\n");
    assert!(
        d.contains("only in left:  fifo") && d.contains("only in right: extra"),
        "{d}"
    );
    let ct = tree::ctime_changes(&before, &after).join("\n");
    assert!(
        ct.contains("removed: fifo") && ct.contains("added: extra"),
        "{ct}"
    );
    assert!(tree::ctime_changes(&after, &tree::snapshot(&copy)).is_empty());
}

// ---------------------------------------------------------------------------------------------
// (1) Everything awkward, at 1, 2 and 4 ranks

#[test]
fn cp_p_copies_the_awkward_tree_at_1_2_4_ranks_and_small_chunks() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let aw = tree::make_awkward_tree(&src, true);
    let want = tree::snapshot(&src);
    let total = tree::file_bytes(&want);
    for (np, extra) in [
        (1, &[][..]),
        (2, &[][..]),
        (4, &[][..]),
        (2, &["--chunksize", "64k"][..]),
        (1, &["--chunksize", "64KB", "--bufsize", "16k"][..]),
    ] {
        let what = format!("cp -p -S {extra:?} at np={np}");
        let dest = tmp.path().join(format!("dest{np}_{}", extra.len()));
        let out = Tool::new("cp")
            .np(np)
            .args(["-p", "-S"])
            .args(extra)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let (line, n) = copied_summary(&out);
        eprintln!("{what}: {line} (file data in the tree: {total} bytes)");
        assert!(n > 0, "{what}: {line}");
        let got = tree::snapshot(&dest);
        tree::assert_equal_in(&what, &want, &got, Compare::FULL);
        let blocks = got[&aw.sparse_rel].blocks;
        assert!(
            blocks * 512 <= tree::SPARSE_SIZE / 8,
            "{what}: the sparse copy allocates {} bytes of its {} (source: {})",
            blocks * 512,
            tree::SPARSE_SIZE,
            want[&aw.sparse_rel].blocks * 512
        );
    }
}

#[test]
fn cp_without_sparse_still_copies_the_sparse_file_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    tree::make_sparse(&src.join("s"));
    let dest = tmp.path().join("dest");
    Tool::new("cp")
        .np(2)
        .args(["--chunksize", "1M"])
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(0);
    tree::assert_equal_in(
        "cp without -S",
        &tree::snapshot(&src),
        &tree::snapshot(&dest),
        Compare::CONTENT,
    );
}

// ---------------------------------------------------------------------------------------------
// (2) Path rules

/// Source material of the path matrix, outside the scratch directories.
fn matrix_sources(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let file = dir.join("srcfile");
    std::fs::write(&file, b"the source file\n").unwrap();
    tree::chmod(&file, 0o640);
    tree::set_mtime(&file, (1_600_000_000, 111));
    let file2 = dir.join("srcfile2");
    std::fs::write(&file2, b"second source file, longer\n").unwrap();
    tree::set_mtime(&file2, (1_600_000_100, 222));
    let d = dir.join("srcdir");
    std::fs::create_dir_all(d.join("sub/deeper")).unwrap();
    std::fs::write(d.join("f1"), b"f1\n").unwrap();
    std::fs::write(d.join("sub/f2"), b"f2 data\n").unwrap();
    std::fs::write(d.join("sub/deeper/f3"), b"").unwrap();
    std::os::unix::fs::symlink("../f1", d.join("sub/l1")).unwrap();
    tree::chmod(&d.join("sub"), 0o750);
    for (i, p) in ["sub/deeper/f3", "sub/f2", "f1", "sub/deeper", "sub", ""]
        .iter()
        .enumerate()
    {
        tree::set_mtime(&d.join(p), (1_600_001_000 + i as i64, 5));
    }
    (file, file2, d)
}

/// Pre-existing destinations of the path matrix, made the same in every scratch directory.
fn matrix_setup(scratch: &Path) {
    std::fs::write(
        scratch.join("existing"),
        b"old content that is longer than the new\n",
    )
    .unwrap();
    tree::chmod(&scratch.join("existing"), 0o600);
    tree::set_mtime(&scratch.join("existing"), (1_500_000_000, 0));
    std::fs::create_dir(scratch.join("d")).unwrap();
    std::fs::write(scratch.join("d/already"), b"already there\n").unwrap();
    tree::set_mtime(&scratch.join("d/already"), (1_500_000_000, 0));
}

/// A snapshot of a scratch directory with the mtimes of the directories that a copy into them
/// necessarily touches (the scratch root and `d`) blanked.
fn scratch_snapshot(scratch: &Path) -> Tree {
    let mut t = tree::snapshot(scratch);
    for k in [&b""[..], b"d"] {
        if let Some(n) = t.get_mut(k) {
            if n.kind == Kind::Dir {
                n.mtime = (0, 0);
            }
        }
    }
    t
}

#[test]
fn path_rules_match_gnu_cp_a_and_cli_compat() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, file2, dir) = matrix_sources(tmp.path());
    let dir_slash = {
        let mut s = dir.as_os_str().to_owned();
        s.push("/");
        PathBuf::from(s)
    };
    // (name, sources, destination relative to the scratch directory)
    let cases: Vec<(&str, Vec<&Path>, &str)> = vec![
        ("file -> new", vec![&file], "new"),
        ("file -> existing file", vec![&file], "existing"),
        ("file -> existing dir", vec![&file], "d"),
        ("file -> existing dir/", vec![&file], "d/"),
        ("dir -> new", vec![&dir], "new"),
        ("dir -> existing dir", vec![&dir], "d"),
        ("several -> existing dir", vec![&file, &dir, &file2], "d"),
    ];
    for (i, (name, sources, dest)) in cases.iter().enumerate() {
        let gnu = tmp.path().join(format!("gnu{i}"));
        let ours = tmp.path().join(format!("ours{i}"));
        for s in [&gnu, &ours] {
            std::fs::create_dir(s).unwrap();
            matrix_setup(s);
        }
        let mut g = Command::new("cp");
        g.arg("-a").args(sources).arg(gnu.join(dest));
        expect_status(&mut g, 0);
        Tool::new("cp")
            .arg("-p")
            .args(sources)
            .arg(ours.join(dest))
            .run()
            .assert_status(0);
        tree::assert_equal_in(
            &format!("{name}: GNU cp -a (left) vs mfu-rs cp -p (right)"),
            &scratch_snapshot(&gnu),
            &scratch_snapshot(&ours),
            Compare::META,
        );
    }

    // `dir/` -> existing dir: the contents of dir go into it (GNU cp would make d/srcdir).
    let want = tree::snapshot(&dir);
    for (np, target) in [(1, "d"), (2, "d/")] {
        let ours = tmp.path().join(format!("slash{np}"));
        std::fs::create_dir(&ours).unwrap();
        matrix_setup(&ours);
        Tool::new("cp")
            .np(np)
            .arg("-p")
            .arg(&dir_slash)
            .arg(ours.join(target))
            .run()
            .assert_status(0);
        let got = tree::snapshot(&ours);
        assert!(
            !got.contains_key(&b"d/srcdir"[..]),
            "`cp srcdir/ d` (np={np}) made d/srcdir: want the contents of srcdir in d"
        );
        let mut d = tree::subtree(&got, b"d");
        assert!(d.remove(&b"already"[..]).is_some(), "d/already vanished");
        let mut w = want.clone();
        // The root's own metadata is not part of "the contents".
        w.remove(&b""[..]);
        d.remove(&b""[..]);
        tree::assert_equal_in(
            &format!("`cp -p srcdir/ d` (np={np}): contents of srcdir (left) vs d (right)"),
            &w,
            &d,
            Compare::META,
        );
    }
    // `dir/` -> absent: the destination becomes the copy.
    let new = tmp.path().join("slash_new");
    Tool::new("cp")
        .arg("-p")
        .arg(&dir_slash)
        .arg(&new)
        .run()
        .assert_status(0);
    let mut got = tree::snapshot(&new);
    let mut w = want.clone();
    assert_eq!(got[&b""[..]].kind, Kind::Dir);
    got.remove(&b""[..]);
    w.remove(&b""[..]);
    tree::assert_equal_in("`cp -p srcdir/ new`", &w, &got, Compare::META);

    // Several sources -> a file or an absent path: exit 2, nothing created or changed.
    for (np, dest) in [
        (1, "existing"),
        (2, "existing"),
        (1, "absent"),
        (2, "absent/"),
    ] {
        let s = tmp.path().join(format!("many{np}{dest}"));
        std::fs::create_dir(&s).unwrap();
        matrix_setup(&s);
        let before = tree::snapshot(&s);
        let out = Tool::new("cp")
            .np(np)
            .arg(&file)
            .arg(&dir)
            .arg(s.join(dest))
            .run()
            .assert_status(2);
        assert!(!out.stderr.is_empty(), "exit 2 without a message");
        let after = tree::snapshot(&s);
        tree::assert_equal_in(
            &format!("several sources -> {dest} (np={np})"),
            &before,
            &after,
            Compare::FULL,
        );
        let ct = tree::ctime_changes(&before, &after);
        assert!(ct.is_empty(), "several sources -> {dest}: {ct:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// (3) Filters

fn filter_source(dir: &Path) -> PathBuf {
    let src = dir.join("fsrc");
    for d in ["build", "sub/deep", "other/sub/deep", "docs"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for f in [
        "keep.txt",
        "a.log",
        "b.log",
        "important.log",
        "build/x.o",
        "build/keep.txt",
        "sub/build",
        "sub/c.log",
        "sub/important.log",
        "sub/deep/d.txt",
        "other/sub/deep/e.txt",
        "docs/readme.md",
    ] {
        std::fs::write(src.join(f), f.as_bytes()).unwrap();
    }
    src
}

#[test]
fn filters_apply_in_command_line_order_first_match_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let src = filter_source(tmp.path());
    let full = tree::snapshot(&src);
    let all: Vec<&str> = full
        .keys()
        .filter(|k| !k.is_empty())
        .map(|k| std::str::from_utf8(k).unwrap())
        .collect();
    let under = |p: &str, d: &str| p == d || p.starts_with(&format!("{d}/"));
    type Pred = Box<dyn Fn(&str) -> bool>;
    // (options, which source paths are excluded)
    let cases: Vec<(Vec<&str>, Pred)> = vec![
        (
            vec!["--include", "important.log", "--exclude", "*.log"],
            Box::new(|p: &str| p.ends_with(".log") && !p.ends_with("important.log")),
        ),
        (
            vec!["--exclude", "*.log", "--include", "important.log"],
            Box::new(|p: &str| p.ends_with(".log")),
        ),
        (
            // Trailing `/`: directories only; an excluded directory is not descended.
            vec!["--exclude", "build/"],
            Box::new(move |p: &str| under(p, "build")),
        ),
        (
            vec!["--exclude", "build"],
            Box::new(move |p: &str| under(p, "build") || p == "sub/build"),
        ),
        (
            // A leading `/` anchors at the source root.
            vec!["--exclude", "/sub/deep"],
            Box::new(move |p: &str| under(p, "sub/deep")),
        ),
        (
            // Including a directory does not rescue what a later rule excludes inside it.
            vec![
                "--include",
                "docs/",
                "--exclude",
                "*.md",
                "--exclude",
                "docs",
            ],
            Box::new(|p: &str| p == "docs/readme.md"),
        ),
        (
            vec!["--exclude-regex", r"c\.log$"],
            Box::new(|p: &str| p == "sub/c.log"),
        ),
        (
            vec!["--include-regex", "important", "--exclude-regex", r"\.log$"],
            Box::new(|p: &str| p.ends_with(".log") && !p.contains("important")),
        ),
        (
            vec![
                "--include",
                "sub/",
                "--exclude-regex",
                "deep",
                "--include",
                "*.txt",
                "--exclude",
                "*",
            ],
            // `*` excludes everything at the top but sub/ (included first); inside sub, deep is
            // excluded by the regex, *.txt files would be kept, all else excluded.
            Box::new(move |p: &str| !(p == "sub" || p == "keep.txt")),
        ),
    ];
    for (i, (opts, excluded)) in cases.iter().enumerate() {
        let dest = tmp.path().join(format!("f{i}"));
        Tool::new("cp")
            .np(if i % 2 == 0 { 1 } else { 2 })
            .arg("-p")
            .args(opts)
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        let got = tree::snapshot(&dest);
        let got_keys: Vec<&str> = got
            .keys()
            .filter(|k| !k.is_empty())
            .map(|k| std::str::from_utf8(k).unwrap())
            .collect();
        let want_keys: Vec<&str> = all.iter().copied().filter(|p| !excluded(p)).collect();
        assert_eq!(got_keys, want_keys, "cp {opts:?}: copied paths");
        // What was copied is equal to the source (directory mtimes included).
        let want: Tree = full
            .iter()
            .filter(|(k, _)| k.is_empty() || !excluded(std::str::from_utf8(k).unwrap()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        tree::assert_equal_in(&format!("cp {opts:?}"), &want, &got, Compare::META);
    }
}

// ---------------------------------------------------------------------------------------------
// (4) Exit statuses

#[test]
fn usage_errors_exit_2_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (file, _, dir) = matrix_sources(tmp.path());
    let s = tmp.path().join("scratch");
    std::fs::create_dir(&s).unwrap();
    matrix_setup(&s);
    let before = tree::snapshot(&s);
    let out_path = s.join("out");
    let missing = tmp.path().join("no-such-source");
    let d = s.join("d");
    let existing = s.join("existing");
    let nope = s.join("nope/out");
    let p = |x: &Path| x.as_os_str().to_owned();
    let o = |x: &str| OsStr::new(x).to_owned();
    let cases: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        ("missing source", vec![p(&missing), p(&out_path)]),
        ("missing source -> dir", vec![p(&missing), p(&d)]),
        (
            "bad option",
            vec![o("--no-such-option"), p(&file), p(&out_path)],
        ),
        (
            "bad xattrs mode",
            vec![o("-X"), o("bogus"), p(&file), p(&out_path)],
        ),
        (
            "bad size",
            vec![o("--chunksize"), o("12q"), p(&file), p(&out_path)],
        ),
        (
            "bad bufsize",
            vec![o("--bufsize"), o("lots"), p(&dir), p(&out_path)],
        ),
        ("destination parent missing", vec![p(&dir), p(&nope)]),
        ("only a source", vec![p(&file)]),
        ("nothing", vec![]),
        (
            "several sources -> file",
            vec![p(&file), p(&dir), p(&existing)],
        ),
        (
            "several sources -> absent",
            vec![p(&file), p(&dir), p(&out_path)],
        ),
        (
            "input list missing",
            vec![o("-i"), o("/no/such/list"), p(&dir), p(&out_path)],
        ),
    ];
    for np in [1, 2] {
        for (name, args) in &cases {
            let out = Tool::new("cp").np(np).args(args).run().assert_status(2);
            if !name.starts_with("nothing") {
                assert!(
                    !out.stderr.is_empty(),
                    "{name} (np={np}): exit 2 without a message"
                );
            }
            let after = tree::snapshot(&s);
            tree::assert_equal_in(&format!("{name} (np={np})"), &before, &after, Compare::FULL);
            let ct = tree::ctime_changes(&before, &after);
            assert!(
                ct.is_empty(),
                "{name} (np={np}) changed the scratch dir: {ct:?}"
            );
        }
    }
}

#[test]
fn an_immutable_destination_file_fails_alone_with_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for f in ["a", "b", "c", "sub/x"] {
        std::fs::write(src.join(f), format!("new {f}\n")).unwrap();
    }
    for np in [1, 2] {
        let d = tmp.path().join(format!("d{np}"));
        std::fs::create_dir_all(d.join("src")).unwrap();
        let locked = d.join("src/b");
        std::fs::write(&locked, b"old b\n").unwrap();
        let _guard = Immutable::set(&locked);
        let out = Tool::new("cp")
            .np(np)
            .arg(&src)
            .arg(&d)
            .run()
            .assert_status(1);
        let err = text(&out.stderr);
        assert!(
            err.lines()
                .any(|l| l.starts_with("mfu-rs cp: ")
                    && l.contains(&format!("{}: ", locked.display()))),
            "np={np}: stderr must have `mfu-rs cp: OPERATION {}: REASON`:\n{err}",
            locked.display()
        );
        assert_eq!(std::fs::read(&locked).unwrap(), b"old b\n");
        for f in ["a", "c", "sub/x"] {
            assert_eq!(
                std::fs::read(d.join("src").join(f)).unwrap_or_default(),
                format!("new {f}\n").as_bytes(),
                "np={np}: {f} was not copied beside the failure"
            );
        }
    }
}

#[test]
fn an_unreadable_source_file_as_nobody_fails_alone_with_exit_1() {
    let tmp = open_tempdir();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for f in ["ok1", "secret", "ok2"] {
        std::fs::write(src.join(f), format!("{f}\n")).unwrap();
    }
    tree::chmod(&src.join("secret"), 0o000);
    let parent = tmp.path().join("outparent");
    std::fs::create_dir(&parent).unwrap();
    tree::chmod(&parent, 0o777);
    for np in [1, 2] {
        let dest = parent.join(format!("copy{np}"));
        let out = Tool::new("cp")
            .np(np)
            .args(["-U", "65534", "-G", "65534"])
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(1);
        let err = text(&out.stderr);
        let secret = src.join("secret");
        assert!(
            err.lines()
                .any(|l| l.starts_with("mfu-rs cp: ")
                    && l.contains(&format!("{}: ", secret.display()))),
            "np={np}: stderr must name {}:\n{err}",
            secret.display()
        );
        for f in ["ok1", "ok2"] {
            let p = dest.join(f);
            assert_eq!(
                std::fs::read(&p).unwrap_or_default(),
                format!("{f}\n").as_bytes(),
                "np={np}: {f}"
            );
            let st = std::fs::symlink_metadata(&p).unwrap();
            use std::os::unix::fs::MetadataExt;
            assert_eq!(
                (st.uid(), st.gid()),
                (65534, 65534),
                "np={np}: {f} must belong to nobody"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (5) Old name, summary, quiet; (6) verbose sizes

#[test]
fn dcp_old_name_summary_and_quiet() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, _, dir) = matrix_sources(tmp.path());
    let want = tree::snapshot(&dir);
    let bytes = tree::file_bytes(&want);
    for link_name in ["dcp", "mfu-dcp"] {
        let link = tmp.path().join(link_name);
        std::os::unix::fs::symlink(bin(), &link).unwrap();
        let dest = tmp.path().join(format!("out-{link_name}"));
        let out = expect_status(
            clean_env(&mut Command::new(&link))
                .arg("-p")
                .arg(&dir)
                .arg(&dest),
            0,
        );
        let (line, n) = copied_summary(&out);
        assert_eq!(n, bytes, "{link_name}: {line}");
        tree::assert_equal_in(link_name, &want, &tree::snapshot(&dest), Compare::META);
    }
    let dest = tmp.path().join("out-sub");
    let out = Tool::new("dcp")
        .args(["-p", "-q"])
        .arg(&dir)
        .arg(&dest)
        .run()
        .assert_status(0);
    assert!(out.stdout.is_empty(), "-q printed: {}", text(&out.stdout));
    tree::assert_equal_in("mfu-rs dcp", &want, &tree::snapshot(&dest), Compare::META);
    Tool::new("dcp").arg("--help").run().assert_status(0);
    Tool::new("cp").arg("--help").run().assert_status(0);
    // Under mpirun the summary comes once (rank 0).
    let dest = tmp.path().join("out-np3");
    let out = Tool::new("dcp")
        .mpi(3)
        .arg("-p")
        .arg(&dir)
        .arg(&dest)
        .run()
        .assert_status(0);
    assert_eq!(copied_summary(&out).1, bytes);
}

#[test]
fn verbose_reports_chunk_and_buffer_sizes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), vec![7u8; 300_000]).unwrap();
    let out = Tool::new("cp")
        .args(["-v", "--chunksize", "64k", "--bufsize", "128k"])
        .arg(&src)
        .arg(tmp.path().join("d"))
        .run()
        .assert_status(0);
    let all = format!("{}\n{}", text(&out.stdout), text(&out.stderr)).to_lowercase();
    let mentions = |word: &str, forms: &[&str]| {
        all.lines()
            .any(|l| l.contains(word) && forms.iter().any(|f| l.contains(f)))
    };
    assert!(
        mentions("chunk", &["65536", "64 kib", "64kib", "64k", "64.0 kib"]),
        "-v must name the chunk size (64 KiB):\n{all}"
    );
    assert!(
        mentions("buf", &["131072", "128 kib", "128kib", "128k", "128.0 kib"]),
        "-v must name the buffer size (128 KiB):\n{all}"
    );
}

#[test]
fn progress_lines_count_bytes_towards_the_total_with_an_eta() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    // 48 MiB in 1 MiB chunks: enough work for several 0.5 ms progress ticks.
    for i in 0..3 {
        std::fs::write(src.join(format!("f{i}")), vec![i as u8; 16 << 20]).unwrap();
    }
    for (tool, dest) in [("cp", "d1"), ("sync", "d2")] {
        let chunk = if tool == "cp" { "-k" } else { "--chunksize" };
        let out = Tool::new(tool)
            .ranks(2)
            .args(["--progress", "0.0005", chunk, "1M"])
            .arg(&src)
            .arg(tmp.path().join(dest))
            .run()
            .assert_status(0);
        let err = text(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("Copied ")).collect();
        assert!(!lines.is_empty(), "{tool}: no progress line in:\n{err}");
        assert!(
            lines.iter().all(|l| l.contains(" of 48.000 MiB (")),
            "{tool}: progress must count towards the total:\n{err}"
        );
        assert!(
            lines.iter().any(|l| l.contains("ETA")),
            "{tool}: some progress line must carry an ETA:\n{err}"
        );
    }
}

#[test]
fn direct_io_copies_unaligned_files_and_their_tails() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    // Sizes around the 4 KiB block: O_DIRECT needs whole-block reads and writes.
    let sizes = [0usize, 1, 4095, 4096, 10_000, 3 * (1 << 20) + 123];
    for (i, n) in sizes.iter().enumerate() {
        let bytes: Vec<u8> = (0..*n).map(|j| (j * 31 + i) as u8).collect();
        std::fs::write(src.join(format!("f{i}")), bytes).unwrap();
    }
    for np in [1, 2] {
        let dest = tmp.path().join(format!("d{np}"));
        // A buffer that is not a block multiple, and 1 MiB chunks: the last one is unaligned.
        Tool::new("cp")
            .np(np)
            .args(["-s", "-k", "1M", "-b", "5000"])
            .arg(&src)
            .arg(&dest)
            .run()
            .assert_status(0);
        tree::assert_equal(
            &tree::snapshot(&src),
            &tree::snapshot(&dest),
            Compare::CONTENT,
        );
    }
}

#[test]
fn device_nodes_without_privilege_are_skipped_not_failed() {
    let tmp = open_tempdir();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"data\n").unwrap();
    // The device number of /dev/null (1, 3); only root may create it.
    let null = std::ffi::CString::new(src.join("null").as_os_str().as_bytes()).unwrap();
    // SAFETY: mknod with a valid C string.
    assert_eq!(
        unsafe { libc::mknod(null.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) },
        0
    );
    let parent = tmp.path().join("out");
    std::fs::create_dir(&parent).unwrap();
    tree::chmod(&parent, 0o777);
    let dest = parent.join("copy");
    // Skipped, named as skipped, and still exit 1: it was asked for and is not there.
    let out = Tool::new("cp")
        .args(["-U", "65534", "-G", "65534"])
        .arg(&src)
        .arg(&dest)
        .run()
        .assert_status(1);
    let err = text(&out.stderr);
    assert!(
        err.contains("skipped") && err.contains(&format!("{}", dest.join("null").display())),
        "the device must be reported as skipped:\n{err}"
    );
    assert!(
        text(&out.stdout).contains("1 skipped"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(std::fs::read(dest.join("f")).unwrap(), b"data\n");
    assert!(!dest.join("null").exists());
}

// ---------------------------------------------------------------------------------------------
// (7) Files created with their final mode and owner (no chown, no chmod) only where that is right

/// A minimal default ACL (owner rwx, group and others nothing) on `dir`, in the kernel's xattr
/// format; false when the file system has no ACLs.
fn set_default_acl(dir: &Path) -> bool {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(0x01u16, 7u16), (0x04, 0), (0x20, 0)] {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    rustix::fs::setxattr(
        dir,
        "system.posix_acl_default",
        &v,
        rustix::fs::XattrFlags::empty(),
    )
    .is_ok()
}

#[test]
fn copies_get_the_source_mode_and_owner_whatever_the_directory_and_umask_give() {
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to give files away");
        return;
    }
    let tmp = open_tempdir();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let files: [(&str, u32, (u32, u32)); 9] = [
        ("plain", 0o644, (0, 0)),
        ("private", 0o600, (0, 0)),
        ("readonly", 0o444, (0, 0)),
        ("wide", 0o777, (0, 0)),
        ("setuid", 0o4755, (0, 0)),
        ("setgid", 0o2750, (0, 0)),
        ("sticky", 0o1644, (0, 0)),
        ("theirs", 0o640, (1000, 1000)),
        ("their_group", 0o664, (0, 1234)),
    ];
    for (name, mode, (uid, gid)) in files {
        let p = src.join(name);
        std::fs::write(&p, name).unwrap();
        std::os::unix::fs::lchown(&p, Some(uid), Some(gid)).unwrap();
        tree::chmod(&p, mode);
    }
    let check = |what: &str, dest: &Path, preserve: bool, umask: u32| {
        for (name, mode, (uid, gid)) in files {
            let st = std::fs::symlink_metadata(dest.join(name)).unwrap();
            let (want_mode, want_ids) = if preserve {
                (mode, (uid, gid))
            } else {
                (mode & 0o777 & !umask, (0, 0))
            };
            let got_ids = (st.uid(), st.gid());
            assert_eq!(
                (st.mode() & 0o7777, got_ids),
                (want_mode, want_ids),
                "{what}: {name}: mode {:o} owner {got_ids:?}, want {want_mode:o} {want_ids:?}",
                st.mode() & 0o7777
            );
            assert_eq!(std::fs::read(dest.join(name)).unwrap(), name.as_bytes());
        }
    };
    // Into a set-group-ID directory of another group (new directories and files inherit the
    // group), then over the copy again (existing files are truncated, not created).
    let sgid = tmp.path().join("sgid");
    std::fs::create_dir(&sgid).unwrap();
    std::os::unix::fs::lchown(&sgid, Some(0), Some(4321)).unwrap();
    tree::chmod(&sgid, 0o2775);
    for (round, umask) in [(0, 0o022), (1, 0o022), (2, 0o077)] {
        Tool::new("cp")
            .umask(umask)
            .arg("-p")
            .arg(&src)
            .arg(&sgid)
            .run()
            .assert_status(0);
        check(
            &format!("cp -p into sgid, round {round}"),
            &sgid.join("src"),
            true,
            umask,
        );
        for (name, ..) in files {
            let p = sgid.join("src").join(name);
            std::os::unix::fs::lchown(&p, Some(7), Some(7)).unwrap();
            tree::chmod(&p, 0o600);
        }
    }
    let plain_dest = tmp.path().join("plain");
    Tool::new("cp")
        .umask(0o027)
        .arg(&src)
        .arg(&plain_dest)
        .run()
        .assert_status(0);
    check("cp (no -p) under umask 027", &plain_dest, false, 0o027);
    // Under a default ACL, which trims new files' modes instead of the umask.
    let acl = tmp.path().join("acl");
    std::fs::create_dir(&acl).unwrap();
    if set_default_acl(&acl) {
        Tool::new("cp")
            .umask(0o022)
            .arg("-p")
            .arg(&src)
            .arg(&acl)
            .run()
            .assert_status(0);
        check("cp -p under a default ACL", &acl.join("src"), true, 0o022);
        let no_p = acl.join("no_p");
        Tool::new("cp")
            .umask(0o022)
            .arg(&src)
            .arg(&no_p)
            .run()
            .assert_status(0);
        check("cp (no -p) under a default ACL", &no_p, false, 0o022);
    } else {
        eprintln!("no ACLs on {}: that part skipped", acl.display());
    }
}

// ---------------------------------------------------------------------------------------------
// Safety: the source is never written, DEST's symlinks are never followed (issues 15, 16)

/// Run `cp ARGS` at `np` ranks in `dir`, expecting exit `code`; returns stderr.
fn cp_in(dir: &Path, np: usize, args: &[&str], code: i32) -> String {
    Tool::new("cp")
        .np(np)
        .current_dir(dir)
        .args(args)
        .run()
        .assert_status(code)
        .stderr_str()
}

/// `cp f f`, `cp d/h d`, `cp h1 h2` (hard links), a file of many chunks onto itself at np 2,
/// a symlink onto itself, and refreshing a `cp -al` snapshot with `cp -p src/ snap`: each is
/// refused by name ("the same file"), exit 1, and the source keeps its bytes.
#[test]
fn a_destination_that_is_the_source_is_refused_and_the_source_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let data = mfu_tests::noise(7, 3 << 20);
    std::fs::write(d.join("f"), b"hello\n").unwrap();
    std::fs::create_dir(d.join("d")).unwrap();
    std::fs::write(d.join("d/h"), b"in d\n").unwrap();
    std::fs::write(d.join("h1"), b"linked\n").unwrap();
    std::fs::hard_link(d.join("h1"), d.join("h2")).unwrap();
    std::fs::write(d.join("big"), &data).unwrap();
    std::os::unix::fs::symlink("f", d.join("d/l")).unwrap();
    std::fs::create_dir(d.join("src")).unwrap();
    std::fs::write(d.join("src/a"), b"snapshot me\n").unwrap();
    std::fs::write(d.join("src/b"), &data[..100_000]).unwrap();
    expect_status(
        Command::new("cp")
            .args(["-al", "src", "snap"])
            .current_dir(d),
        0,
    );
    let cases: &[(usize, &[&str], &str)] = &[
        (1, &["f", "f"], "f"),
        (1, &["d/h", "d"], "d/h"),
        (1, &["h1", "h2"], "h2"),
        (2, &["-k", "256K", "big", "big"], "big"),
        (1, &["d/l", "d"], "d/l"),
        (1, &["-p", "src/", "snap"], "snap/a"),
        (2, &["-p", "src/", "snap"], "snap/b"),
    ];
    for (np, args, named) in cases {
        let err = cp_in(d, *np, args, 1);
        assert!(
            err.contains(named) && err.contains("same file"),
            "cp {args:?} (np {np}): want {named} named as the same file:\n{err}"
        );
        assert_eq!(std::fs::read(d.join("f")).unwrap(), b"hello\n", "{args:?}");
        assert_eq!(std::fs::read(d.join("d/h")).unwrap(), b"in d\n", "{args:?}");
        assert_eq!(
            std::fs::read(d.join("h1")).unwrap(),
            b"linked\n",
            "{args:?}"
        );
        assert!(std::fs::read(d.join("big")).unwrap() == data, "{args:?}");
        assert_eq!(std::fs::read_link(d.join("d/l")).unwrap(), Path::new("f"));
        assert_eq!(std::fs::read(d.join("src/a")).unwrap(), b"snapshot me\n");
        assert!(std::fs::read(d.join("src/b")).unwrap() == data[..100_000]);
    }
}

/// A destination file with another hard link (outside the copy) is replaced, not written
/// through: the other name keeps its bytes.
#[test]
fn a_destination_file_with_other_links_is_replaced_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("new"), b"new bytes\n").unwrap();
    std::fs::write(d.join("old"), b"old bytes, kept elsewhere\n").unwrap();
    std::fs::hard_link(d.join("old"), d.join("elsewhere")).unwrap();
    cp_in(d, 1, &["new", "old"], 0);
    assert_eq!(std::fs::read(d.join("old")).unwrap(), b"new bytes\n");
    assert_eq!(
        std::fs::read(d.join("elsewhere")).unwrap(),
        b"old bytes, kept elsewhere\n"
    );
}

/// Material for the symlinks-in-DEST test: SRC `src` (a/f, a/g, t), and an outside tree.
fn symlink_case(d: &Path) {
    std::fs::create_dir_all(d.join("src/a")).unwrap();
    std::fs::write(d.join("src/a/f"), b"src a/f\n").unwrap();
    std::fs::write(d.join("src/a/g"), b"src a/g\n").unwrap();
    std::fs::write(d.join("src/t"), b"src t\n").unwrap();
    std::fs::create_dir_all(d.join("outside/a")).unwrap();
    std::fs::write(d.join("outside/f"), b"outside f\n").unwrap();
    std::fs::write(d.join("outside/t"), b"outside t\n").unwrap();
    std::fs::create_dir(d.join("dst")).unwrap();
}

/// Symlinks already in DEST, at every level (the destination root, a directory's place, a
/// file's place), pointing outside, back into SRC, or nowhere: nothing is written through
/// them (outside and SRC unchanged, no dangling target created), each is named, exit 1, and
/// the rest of the tree is copied.
#[test]
fn nothing_is_created_through_a_symlink_already_in_dest() {
    // (name, symlink in dst (relative to the scratch dir), its target (relative), named)
    let cases: &[(&str, &str, &str, &str)] = &[
        ("root to outside", "dst/src", "outside", "dst/src"),
        ("root into SRC", "dst/src", "src/a", "dst/src"),
        ("dir to outside", "dst/src/a", "outside", "dst/src/a"),
        ("dir into SRC", "dst/src/a", "src/a", "dst/src/a"),
        ("dir dangling", "dst/src/a", "nowhere", "dst/src/a"),
        ("file to outside", "dst/src/t", "outside/t", "dst/src/t"),
        ("file into SRC", "dst/src/t", "src/t", "dst/src/t"),
        ("file dangling", "dst/src/t", "nowhere", "dst/src/t"),
        (
            "deep file to outside",
            "dst/src/a/f",
            "outside/f",
            "dst/src/a/f",
        ),
        (
            "deep file into SRC",
            "dst/src/a/f",
            "src/a/g",
            "dst/src/a/f",
        ),
    ];
    // Every case at np 1; at np 2 (the engine's other paths: items spread over ranks) three.
    let runs = cases
        .iter()
        .map(|c| (1, c))
        .chain([2, 5, 9].into_iter().map(|i| (2, &cases[i])));
    {
        for (np, (name, link, target, named)) in runs {
            let tmp = tempfile::tempdir().unwrap();
            let d = tmp.path();
            symlink_case(d);
            let link = d.join(link);
            std::fs::create_dir_all(link.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(d.join(target), &link).unwrap();
            let src_before = tree::snapshot(&d.join("src"));
            let outside_before = tree::snapshot(&d.join("outside"));
            let err = cp_in(d, np, &["-p", "src", "dst"], 1);
            let ctx = format!("{name} (np {np})");
            assert!(
                err.contains(&format!("{}", d.join(named).display())),
                "{ctx}: {named} not named:\n{err}"
            );
            assert!(
                tree::diff(
                    &src_before,
                    &tree::snapshot(&d.join("src")),
                    Compare::META,
                    5
                )
                .is_empty(),
                "{ctx}: SRC changed"
            );
            assert!(
                tree::diff(
                    &outside_before,
                    &tree::snapshot(&d.join("outside")),
                    Compare::META,
                    5
                )
                .is_empty(),
                "{ctx}: outside changed"
            );
            assert!(!d.join("nowhere").exists(), "{ctx}: dangling target made");
            assert_eq!(
                std::fs::read_link(&link).unwrap(),
                d.join(target),
                "{ctx}: the symlink was replaced"
            );
            if *name != "root to outside" && *name != "root into SRC" && !name.starts_with("file") {
                assert_eq!(
                    std::fs::read(d.join("dst/src/t")).unwrap(),
                    b"src t\n",
                    "{ctx}"
                );
            }
            if name.starts_with("file") {
                assert_eq!(std::fs::read(d.join("dst/src/a/f")).unwrap(), b"src a/f\n");
            }
        }
    }
}

/// `cp src lnk/copy` with `lnk -> src` (and `cp src/ lnk`) would copy a directory into
/// itself: found by (device, inode), not by spelling; refused before anything is written
/// (exit 2, as every path-rule error: mfu-rs checks the rules of all sources before copying).
#[test]
fn a_directory_is_not_copied_into_itself_through_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("src/sub")).unwrap();
    std::fs::write(d.join("src/sub/f"), b"f\n").unwrap();
    std::os::unix::fs::symlink("src", d.join("lnk")).unwrap();
    std::os::unix::fs::symlink("src/sub", d.join("sublnk")).unwrap();
    let before = tree::snapshot(&d.join("src"));
    for args in [
        &["src", "lnk/copy"][..],
        &["src/", "lnk"],
        &["-p", "src", "sublnk/x"],
        &["src", "sublnk"],
    ] {
        let err = cp_in(d, 1, args, 2);
        assert!(err.contains("into itself"), "cp {args:?}:\n{err}");
        assert!(
            tree::diff(&before, &tree::snapshot(&d.join("src")), Compare::META, 5).is_empty(),
            "cp {args:?} wrote into src"
        );
    }
}

/// "N failed" counts items, each once: a tree copied as a user who can't create anything
/// in DEST fails once per entry, not once per step.
#[test]
fn failures_are_counted_once_per_item() {
    let tmp = open_tempdir();
    let d = tmp.path();
    for sub in ["a", "a/x", "b"] {
        std::fs::create_dir_all(d.join("src").join(sub)).unwrap();
        for i in 0..3 {
            std::fs::write(d.join("src").join(sub).join(format!("f{i}")), b"x").unwrap();
        }
    }
    std::fs::write(d.join("src/big"), mfu_tests::noise(3, 1 << 20)).unwrap();
    expect_status(Command::new("chmod").args(["-R", "a+rX"]).arg(d), 0);
    std::fs::create_dir(d.join("dst")).unwrap();
    // 1 + 3 directories, 9 + 1 files.
    let items = 14;
    for np in [1, 2] {
        let out = Tool::new("cp")
            .np(np)
            .current_dir(d)
            .args(["-U", "65534", "-k", "64K", "-p", "src", "dst"])
            .run()
            .assert_status(1);
        let (line, _) = copied_summary(&out);
        assert!(
            line.contains(&format!("; {items} failed")),
            "np {np}: want {items} failed:\n{line}\n{}",
            text(&out.stderr)
        );
    }
}

/// Start `cp ARGS` paused after its listing, interrupt it there with SIGINT, and return its
/// output (it must stop, say so, exit 1).
fn cp_interrupted(dir: &Path, args: &[&str]) -> Output {
    let pause = tempfile::tempdir().unwrap();
    let base = pause.path().join("pause");
    let mut cmd = Tool::new("cp").command();
    cmd.current_dir(dir)
        .args(args)
        .env("MFU_RS_TEST_PAUSE_AFTER_LISTING", &base)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    while !pause.path().join("pause.ready").exists() {
        assert!(
            start.elapsed().as_secs() < 60,
            "cp never reached the pause after its listing"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: a signal to the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::fs::write(pause.path().join("pause.go"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    out
}

/// After an interrupted plain cp, sync would copy everything again (the copies carry new
/// times): the hint says to rerun the cp. After cp -p it names the sync that finishes it.
#[test]
fn the_hint_after_an_interrupted_copy_is_true() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir(d.join("src")).unwrap();
    for i in 0..20 {
        std::fs::write(d.join("src").join(format!("f{i}")), b"data").unwrap();
    }
    std::fs::create_dir(d.join("dst")).unwrap();
    let plain = text(&cp_interrupted(d, &["src", "dst"]).stderr);
    assert!(plain.contains("interrupted"), "{plain}");
    assert!(
        !plain.contains("run `mfu-rs sync") && plain.contains("rerun this cp"),
        "plain cp: {plain}"
    );
    let kept = text(&cp_interrupted(d, &["-p", "src", "dst"]).stderr);
    let want = format!(
        "run `mfu-rs sync {} {}`",
        d.join("src").display(),
        d.join("dst/src").display()
    );
    assert!(kept.contains(&want), "cp -p: want {want}:\n{kept}");
}

/// `-U` without `-G` takes the user's groups, not root's: a root-group file of mode 640 is
/// not readable (named, exit 1); `-U` of a user without a passwd entry needs `-G` (exit 2).
#[test]
fn switching_user_drops_roots_groups() {
    let tmp = open_tempdir();
    let d = tmp.path();
    std::fs::create_dir(d.join("src")).unwrap();
    tree::chmod(&d.join("src"), 0o755);
    std::fs::write(d.join("src/secret"), b"root group only\n").unwrap();
    tree::chmod(&d.join("src/secret"), 0o640);
    std::os::unix::fs::chown(d.join("src/secret"), Some(0), Some(0)).unwrap();
    std::fs::write(d.join("src/public"), b"anyone\n").unwrap();
    tree::chmod(&d.join("src/public"), 0o644);
    std::fs::create_dir(d.join("dst")).unwrap();
    tree::chmod(&d.join("dst"), 0o777);
    let err = cp_in(d, 1, &["-U", "65534", "src", "dst"], 1);
    assert!(err.contains("secret"), "{err}");
    assert!(!d.join("dst/src/secret").exists());
    assert_eq!(
        std::fs::read(d.join("dst/src/public")).unwrap(),
        b"anyone\n"
    );
    let err = cp_in(d, 1, &["-U", "4242424", "src", "dst/other"], 2);
    assert!(err.contains("-G"), "{err}");
    assert!(!d.join("dst/other").exists());
}

/// The race of issue 16: after cp listed SRC and DEST, a directory of DEST (already there) is
/// swapped for a symlink to an outside directory, a file of DEST for a symlink to an outside
/// file, and a directory and a file of SRC for symlinks to outside secrets. Nothing outside
/// changes, nothing outside is copied, the entries are named, exit 1.
#[test]
fn directories_swapped_for_symlinks_after_the_listing_are_not_followed() {
    for np in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        for sub in [
            "src/keep",
            "src/sub",
            "src/rd",
            "src/tofile",
            "dst/src/sub",
            "dst/src/tofile",
            "outside",
            "secret",
        ] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        for i in 0..5 {
            std::fs::write(d.join(format!("src/sub/f{i}")), b"new").unwrap();
            std::fs::write(d.join(format!("src/rd/r{i}")), b"src data").unwrap();
            std::fs::write(d.join(format!("src/keep/k{i}")), b"keep").unwrap();
            std::fs::write(d.join(format!("src/tofile/t{i}")), b"t").unwrap();
        }
        std::fs::write(d.join("outside/f0"), b"outside, must stay").unwrap();
        std::fs::write(d.join("outside/o"), b"outside file, must stay").unwrap();
        std::fs::write(d.join("secret/r0"), b"secret, must not be copied").unwrap();
        std::fs::write(d.join("src/file"), b"src file").unwrap();
        std::fs::write(d.join("src/sfile"), b"src sfile").unwrap();
        std::fs::write(d.join("dst/src/file"), b"old dest file").unwrap();
        let outside = tree::snapshot(&d.join("outside"));
        let mut cmd = Tool::new("cp").np(np).command();
        cmd.current_dir(d).args(["-p", "src", "dst"]);
        let out = mfu_tests::with_change_after_listing(&mut cmd, || {
            std::fs::rename(d.join("dst/src/sub"), d.join("dst-sub-moved")).unwrap();
            std::os::unix::fs::symlink(d.join("outside"), d.join("dst/src/sub")).unwrap();
            std::fs::rename(d.join("src/rd"), d.join("src-rd-moved")).unwrap();
            std::os::unix::fs::symlink(d.join("secret"), d.join("src/rd")).unwrap();
            std::fs::remove_dir(d.join("dst/src/tofile")).unwrap();
            std::fs::write(d.join("dst/src/tofile"), b"a file now").unwrap();
            std::fs::remove_file(d.join("dst/src/file")).unwrap();
            std::os::unix::fs::symlink(d.join("outside/o"), d.join("dst/src/file")).unwrap();
            std::fs::remove_file(d.join("src/sfile")).unwrap();
            std::os::unix::fs::symlink(d.join("secret/r0"), d.join("src/sfile")).unwrap();
        });
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "np {np}: {err}");
        assert!(
            tree::diff(
                &outside,
                &tree::snapshot(&d.join("outside")),
                Compare::META,
                5
            )
            .is_empty(),
            "np {np}: the outside directory changed:\n{err}"
        );
        assert!(
            err.contains(&format!("{}", d.join("dst/src/sub").display())),
            "np {np}: dst/src/sub not named:\n{err}"
        );
        assert!(
            err.contains(&format!("{}", d.join("src/rd").display())),
            "np {np}: src/rd not named:\n{err}"
        );
        assert_eq!(
            std::fs::read(d.join("dst/src/tofile")).unwrap(),
            b"a file now",
            "np {np}"
        );
        for named in ["dst/src/file", "src/sfile", "dst/src/tofile"] {
            assert!(
                err.contains(&format!("{}", d.join(named).display())),
                "np {np}: {named} not named:\n{err}"
            );
        }
        assert_ne!(
            std::fs::read(d.join("dst/src/sfile")).ok().as_deref(),
            Some(&b"secret, must not be copied"[..]),
            "np {np}"
        );
        for i in 0..5 {
            let copied = d.join(format!("dst/src/rd/r{i}"));
            if let Ok(bytes) = std::fs::read(&copied) {
                assert_ne!(bytes, b"secret, must not be copied", "np {np}");
            }
        }
        assert_eq!(std::fs::read(d.join("dst/src/keep/k0")).unwrap(), b"keep");
    }
}

// ---------------------------------------------------------------------------------------------
// The typed API and --json

/// src/ with two files (5 and 3 bytes) in two directories, and dst/ where the directory `d`
/// meets a regular file in the way (when `obstacle`).
fn small_source(d: &Path, obstacle: bool) -> (PathBuf, PathBuf) {
    let (src, dst) = (d.join("src"), d.join("dst"));
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("a"), b"hello").unwrap();
    std::fs::write(src.join("d/b"), b"abc").unwrap();
    std::fs::create_dir(&dst).unwrap();
    if obstacle {
        std::fs::write(dst.join("d"), b"in the way").unwrap();
    }
    (src, dst)
}

#[test]
fn library_run_reports_counts_and_failures_on_every_rank() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::ToolReport;
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = small_source(tmp.path(), false);
    let options = mfu::cp::Options::new(&[src.as_os_str().as_bytes()], dst.as_os_str().as_bytes());
    let reports = steal::local::run(2, |comm| mfu::cp::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!((r.files, r.dirs, r.bytes, r.failed), (2, 2, 8, 0), "{r:?}");
        assert_eq!(r.summary().items, 4);
        assert_eq!(r.status() as i32, 0);
        assert!(!r.interrupted && r.failures.is_empty());
    }
    assert_eq!(std::fs::read(dst.join("src/d/b")).unwrap(), b"abc");

    // A regular file where a directory goes: that directory and what it holds fail, the rest
    // is copied; the failure is counted and its message kept, naming the path.
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = small_source(tmp.path(), true);
    let mut contents = src.as_os_str().as_bytes().to_vec();
    contents.push(b'/');
    let options = mfu::cp::Options::new(&[contents], dst.as_os_str().as_bytes());
    let reports = steal::local::run(2, |comm| mfu::cp::run(comm, &options).unwrap());
    let messages: Vec<String> = reports.iter().flat_map(|r| r.failures.clone()).collect();
    for r in &reports {
        assert_eq!(r.files, 1, "{r:?}");
        assert!(r.failed >= 1, "{r:?}");
        assert_eq!(r.status() as i32, 1);
    }
    assert!(
        messages
            .iter()
            .any(|m| m.contains("/dst/d") && m.contains("mkdir")),
        "{messages:?}"
    );
    assert_eq!(std::fs::read(dst.join("a")).unwrap(), b"hello");

    // A usage error: the same error on every rank, nothing copied.
    let options = mfu::cp::Options::new(
        &[tmp.path().join("missing").as_os_str().as_bytes()],
        dst.as_os_str().as_bytes(),
    );
    let results = steal::local::run(2, |comm| mfu::cp::run(comm, &options).map(|_| ()));
    assert!(
        results
            .iter()
            .all(|r| r.as_ref().is_err_and(|e| e.message.contains("missing"))),
        "{results:?}"
    );
}

#[test]
fn json_report_equals_the_text_summary() {
    for obstacle in [false, true] {
        let tmp = open_tempdir();
        let (src, dst) = small_source(&tmp.path().join("t"), obstacle);
        let t2 = tmp.path().join("j");
        let (_, dst2) = small_source(&t2, obstacle);
        let code = i32::from(obstacle);
        let src_c = format!("{}/", src.display());
        let out = expect_status(Tool::new("cp").np(1).command().arg(&src_c).arg(&dst), code);
        let (line, bytes) = copied_summary(&out);
        let src2 = format!("{}/", t2.join("src").display());
        let json = expect_status(
            Tool::new("cp")
                .np(1)
                .command()
                .args(["--json", &src2])
                .arg(&dst2),
            code,
        );
        let v: serde_json::Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&json.stdout)));
        assert_eq!(v["tool"], "cp");
        assert_eq!(v["status"], code);
        assert_eq!(v["bytes"], bytes, "{line}");
        let items: u64 = line["Copied ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(v["items"], items, "{line}");
        let failed = line
            .split("; ")
            .find_map(|p| p.strip_suffix(" failed"))
            .map_or(0, |n| n.parse::<u64>().unwrap());
        assert_eq!(v["failed"], failed, "{line}");
        assert_eq!(failed > 0, obstacle, "{line}");
        assert!(v["seconds"].as_f64().is_some());
    }
}

/// `stopped after X of Y bytes` from stderr: (X, Y).
fn stopped_counts(err: &str) -> (u64, u64) {
    let at = err
        .find("stopped after ")
        .unwrap_or_else(|| panic!("no stop line: {err}"));
    let words: Vec<&str> = err[at..].split_whitespace().collect();
    assert_eq!((words[3], words[5]), ("of", "bytes"), "{err}");
    assert!(
        err[at..].contains("run the same command again to continue"),
        "{err}"
    );
    (words[2].parse().unwrap(), words[4].parse().unwrap())
}

/// A SIGTERM in the middle of a copy into an existing directory (each work item slowed): exit
/// 1 and the stop line (X of the 240 000 bytes planned, X below that), `--json` says `resumable`; the
/// same cp run again completes the copy. A copy that created DEST itself is not "resumable"
/// by the same command (it would copy into DEST/NAME): no stop line, the sync hint instead.
#[test]
fn a_stopped_copy_says_how_far_it_got_and_a_rerun_completes_it() {
    use rustix::process::Signal;
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    for d in 0..4 {
        for f in 0..12 {
            let sub = src.join(format!("d{d}"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(
                sub.join(format!("f {f}|x")),
                mfu_tests::noise(d * 100 + f, 256 << 10),
            )
            .unwrap();
        }
    }
    let copy = dst.join("src");
    for json in [false, true] {
        let _ = std::fs::remove_dir_all(&dst);
        std::fs::create_dir(&dst).unwrap();
        let mut cmd = Tool::new("cp")
            .args(["-p"])
            .args(json.then_some("--json"))
            .arg(&src)
            .arg(&dst)
            .args(["--chunksize", "64KB"])
            .env("MFU_RS_TEST_ITEM_DELAY_MS", "150")
            .command();
        let probe = copy.join("d0");
        let out = mfu_tests::signal_when(&mut cmd, Signal::TERM, || probe.exists());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        if json {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["resumable"], true, "{v}");
            assert_eq!(v["stopped"]["total"], 12_582_912, "{v}");
            assert_eq!(v["stopped"]["what"], "bytes", "{v}");
            assert!(v["stopped"]["done"].as_u64().unwrap() < 12_582_912, "{v}");
        } else {
            let (done, total) = stopped_counts(&err);
            assert_eq!(total, 12_582_912, "48 files of 256 KiB: {err}");
            assert!(done < total, "{err}");
        }
        Tool::new("cp")
            .args(["-p", "-q"])
            .arg(&src)
            .arg(&dst)
            .run()
            .assert_status(0);
        expect_status(
            Command::new(bin()).args(["cmp", "-q"]).arg(&src).arg(&copy),
            0,
        );
        assert_eq!(std::fs::read_dir(&dst).unwrap().count(), 1, "only DEST/src");
    }
    // DEST made by the copy: the same command would copy into DEST/src.
    std::fs::remove_dir_all(&dst).unwrap();
    let mut cmd = Tool::new("cp")
        .args(["-p"])
        .arg(&src)
        .arg(&dst)
        .args(["--chunksize", "64KB"])
        .env("MFU_RS_TEST_ITEM_DELAY_MS", "150")
        .command();
    let probe = dst.join("d0");
    let out = mfu_tests::signal_when(&mut cmd, Signal::TERM, || probe.exists());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("stopped after"), "{err}");
    assert!(err.contains("mfu-rs sync"), "the way to finish: {err}");
}
