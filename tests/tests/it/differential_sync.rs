//! `mfu-rs sync` against `rsync -a` (and `-D` against `rsync -a --delete`) on the same
//! generated inputs: type conflicts (file, directory, symlink in each position), symlinks in
//! DEST at every level (to an outside tree, into SRC, dangling), hard links between DEST and
//! other trees, the same file in SRC and DEST, SRC given as a symlink, a file as SRC, trailing
//! slashes, odd names.
//!
//! Each case is built twice, identically (symlinks are relative), in a tree holding `src/`,
//! `dest/` and `outside/`; rsync runs in one, mfu-rs in the other. Expected: rsync's result, or
//! a refusal: every entry of the whole tree (type, bytes, link target) is either what rsync made
//! of it or what it was before, never more deleted or overwritten than rsync; anything short of
//! rsync's result is exit 1 (items named) or exit 2 (nothing changed at all); exit 0 is exactly
//! rsync's result. SRC and `outside/` are never changed.

use mfu_tests::Tool;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};

/// One step of building a case, relative to the case's root.
enum Op {
    /// A directory (and its parents).
    Dir(&'static [u8]),
    /// A regular file with these bytes.
    File(&'static [u8], &'static [u8]),
    /// A symbolic link (name, target).
    Link(&'static str, &'static str),
    /// A hard link (new name, existing file).
    Hard(&'static str, &'static str),
    /// Give the first file the second's mtime (same size, same mtime, other bytes).
    SameMtime(&'static str, &'static str),
}
use Op::*;

/// A case: how the tree is built, the sync's arguments (relative to the root, `-D`, `-c`),
/// and rsync's arguments for the same request.
struct Case {
    name: &'static str,
    setup: &'static [Op],
    mfu: &'static [&'static str],
    rsync: &'static [&'static str],
}

/// The common part of every SRC: a small tree with every type and a hard link pair.
const BASE: &[Op] = &[
    Dir(b"src/sub"),
    Dir(b"outside/od"),
    File(b"src/a", b"a"),
    File(b"src/sub/b", b"b"),
    Hard("src/sub/b2", "src/sub/b"),
    Link("src/ln", "sub/b"),
    File(b"outside/o", b"outside"),
    File(b"outside/od/o2", b"outside 2"),
    Dir(b"dest"),
];

macro_rules! case {
    ($name:expr, [$($op:expr),* $(,)?], $mfu:expr, $rsync:expr) => {
        Case { name: $name, setup: &[$($op),*], mfu: $mfu, rsync: $rsync }
    };
}

// The table of cases, one per row: splitting it would only scatter the rows.
#[allow(clippy::too_many_lines)]
fn cases() -> Vec<Case> {
    vec![
        case!("fresh DEST", [], &["src", "fresh"], &["src/", "fresh/"]),
        case!(
            "equal DEST with extras",
            [
                File(b"dest/a", b"a"),
                File(b"dest/extra", b"x"),
                Dir(b"dest/xd/y")
            ],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "equal DEST with extras, -D",
            [
                File(b"dest/a", b"a"),
                File(b"dest/extra", b"x"),
                Dir(b"dest/xd/y")
            ],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "file in SRC, non-empty dir in DEST",
            [File(b"dest/a/keep", b"k")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "file in SRC, non-empty dir in DEST, -D",
            [File(b"dest/a/keep", b"k")],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "file in SRC, empty dir in DEST",
            [Dir(b"dest/a")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "dir in SRC, file in DEST",
            [File(b"dest/sub", b"file")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "dir in SRC, file in DEST, -D",
            [File(b"dest/sub", b"file")],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "dir in SRC, symlink to outside in DEST",
            [Link("dest/sub", "../outside")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "dir in SRC, symlink to outside in DEST, -D",
            [Link("dest/sub", "../outside")],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "dir in SRC, symlink into SRC in DEST",
            [Dir(b"src/other"), Link("dest/sub", "../src/other")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "dir in SRC, symlink into SRC in DEST, -D",
            [Dir(b"src/other"), Link("dest/sub", "../src/other")],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "dir in SRC, dangling symlink in DEST",
            [Link("dest/sub", "nowhere")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "dir in SRC, dangling symlink in DEST, -D",
            [Link("dest/sub", "nowhere")],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "file in SRC, symlink to an outside file in DEST",
            [Link("dest/a", "../outside/o")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "file in SRC, symlink to an outside file in DEST, -D",
            [Link("dest/a", "../outside/o")],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "symlink in SRC, non-empty dir in DEST",
            [File(b"dest/ln/keep", b"k")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "symlink in SRC, non-empty dir in DEST, -D",
            [File(b"dest/ln/keep", b"k")],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "symlink in SRC, file in DEST",
            [File(b"dest/ln", b"file")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "symlink in SRC, other symlink in DEST",
            [Link("dest/ln", "../outside/o")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "symlink to outside one level down in DEST",
            [Dir(b"dest/sub"), Link("dest/sub/b", "../../outside/o")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "symlink to outside dir two levels down, -D",
            [
                Dir(b"src/sub/deep"),
                File(b"src/sub/deep/f", b"f"),
                Dir(b"dest/sub"),
                Link("dest/sub/deep", "../../outside/od"),
            ],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "DEST file hard-linked to an outside file, SRC changed",
            [Hard("dest/a", "outside/o")],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "DEST file hard-linked outside, same size and mtime, -c",
            [
                File(b"outside/same", b"AAAA"),
                File(b"src/c", b"BBBB"),
                SameMtime("outside/same", "src/c"),
                Hard("dest/c", "outside/same"),
            ],
            &["-c", "src", "dest"],
            &["-c", "src/", "dest/"]
        ),
        case!(
            "DEST file is the SRC file (hard link)",
            [Hard("dest/a", "src/a")],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "SRC given as a symlink to a directory",
            [Link("srclink", "src"), File(b"dest/extra", b"x")],
            &["srclink", "dest"],
            &["srclink/", "dest/"]
        ),
        case!(
            "SRC given as a symlink to a directory, -D",
            [Link("srclink", "src"), File(b"dest/extra", b"x")],
            &["-D", "srclink", "dest"],
            &["--delete", "srclink/", "dest/"]
        ),
        case!(
            "trailing slashes",
            [File(b"dest/extra", b"x")],
            &["-D", "src/", "dest/"],
            &["--delete", "src/", "dest/"]
        ),
        case!(
            "FILE into DIR",
            [File(b"dest/keep", b"k")],
            &["src/a", "dest"],
            &["src/a", "dest"]
        ),
        case!(
            "FILE to a new name",
            [],
            &["src/a", "newname"],
            &["src/a", "newname"]
        ),
        case!(
            "FILE onto a file",
            [File(b"other", b"other file")],
            &["src/a", "other"],
            &["src/a", "other"]
        ),
        case!(
            "FILE into a symlink to a directory",
            [Link("dlink", "dest")],
            &["src/a", "dlink"],
            &["src/a", "dlink"]
        ),
        case!(
            "FILE onto a symlink to an outside file",
            [Link("flink", "outside/o")],
            &["src/a", "flink"],
            &["src/a", "flink"]
        ),
        case!(
            "FILE into DIR where DIR/FILE is a directory",
            [File(b"dest/a/keep", b"k")],
            &["src/a", "dest"],
            &["src/a", "dest"]
        ),
        case!(
            "FILE into a missing DIR/",
            [],
            &["src/a", "nodir/"],
            &["src/a", "nodir/"]
        ),
        case!(
            "DEST is a symlink to a directory",
            [Link("dlink", "dest"), File(b"dest/extra", b"x")],
            &["-D", "src", "dlink"],
            &["--delete", "src/", "dlink/"]
        ),
        case!(
            "odd names: newline and non-UTF-8, conflicts",
            [
                File(b"src/new\nline", b"n"),
                Dir(b"src/caf\xe9"),
                File(b"src/caf\xe9/x", b"x"),
                File(b"dest/caf\xe9", b"file in the way"),
                Dir(b"dest/new\nline"),
            ],
            &["src", "dest"],
            &["src/", "dest/"]
        ),
        case!(
            "odd names: newline and non-UTF-8, conflicts, -D",
            [
                File(b"src/new\nline", b"n"),
                Dir(b"src/caf\xe9"),
                File(b"src/caf\xe9/x", b"x"),
                File(b"dest/caf\xe9", b"file in the way"),
                Dir(b"dest/new\nline"),
            ],
            &["-D", "src", "dest"],
            &["--delete", "src/", "dest/"]
        ),
    ]
}

fn p(root: &Path, rel: &[u8]) -> std::path::PathBuf {
    root.join(std::ffi::OsStr::from_bytes(rel))
}

fn build(root: &Path, ops: &[Op]) {
    for op in BASE.iter().chain(ops) {
        match op {
            Dir(d) => std::fs::create_dir_all(p(root, d)).unwrap(),
            File(f, data) => {
                let path = p(root, f);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, data).unwrap();
            }
            Link(l, target) => std::os::unix::fs::symlink(target, root.join(l)).unwrap(),
            Hard(new, old) => std::fs::hard_link(root.join(old), root.join(new)).unwrap(),
            SameMtime(f, r) => {
                let m = std::fs::metadata(root.join(r)).unwrap();
                let t = std::fs::FileTimes::new().set_modified(m.modified().unwrap());
                let h = std::fs::File::options()
                    .write(true)
                    .open(root.join(f))
                    .unwrap();
                h.set_times(t).unwrap();
            }
        }
    }
}

/// Every entry under `root`: relative path → `d`, `f:BYTES`, `l:TARGET` (symlinks not followed).
fn listing(root: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            let m = std::fs::symlink_metadata(&path).unwrap();
            let v = if m.is_dir() {
                todo.push(path.clone());
                b"d".to_vec()
            } else if m.file_type().is_symlink() {
                let t = std::fs::read_link(&path).unwrap();
                [b"l:".as_slice(), t.as_os_str().as_bytes()].concat()
            } else {
                [b"f:".as_slice(), &std::fs::read(&path).unwrap()].concat()
            };
            out.insert(rel, v);
        }
    }
    out
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).escape_debug().to_string()
}

/// What a case came to.
#[derive(Debug, PartialEq, Eq, Clone, Copy, PartialOrd, Ord)]
enum Outcome {
    /// Exactly rsync's result.
    SameAsRsync,
    /// rsync's result but for entries left as they were, named, exit 1.
    RefusedItems,
    /// rsync's result, where rsync too left entries and failed (exit 23); exit 1, named.
    SameRefusalsAsRsync,
    /// Refused as a usage error, nothing changed, exit 2.
    RefusedAll,
}

/// Run one case at `np` ranks; returns its outcome or what went wrong.
fn run_case(c: &Case, np: usize) -> Result<Outcome, String> {
    let tmp = tempfile::tempdir().unwrap();
    let (rs, mf) = (tmp.path().join("rsync"), tmp.path().join("mfu"));
    std::fs::create_dir(&rs).unwrap();
    std::fs::create_dir(&mf).unwrap();
    build(&rs, c.setup);
    build(&mf, c.setup);
    let before = listing(&mf);
    let rsync = Command::new("rsync")
        .arg("-a")
        .args(c.rsync)
        .current_dir(&rs)
        .output()
        .unwrap();
    let out: Output = Tool::new("sync")
        .np(np)
        .args(c.mfu)
        .current_dir(&mf)
        .run()
        .into();
    let (want, got) = (listing(&rs), listing(&mf));
    let code = out.status.code();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let ctx = |msg: String| {
        format!(
            "{msg}\n  rsync exit {:?}: {}\n  mfu-rs exit {code:?}: {stderr}",
            rsync.status.code(),
            String::from_utf8_lossy(&rsync.stderr).trim()
        )
    };
    let keys: BTreeSet<&Vec<u8>> = want.keys().chain(got.keys()).chain(before.keys()).collect();
    let mut left = Vec::new();
    for k in keys {
        let (w, g, b) = (want.get(k), got.get(k), before.get(k));
        let fixed = k.starts_with(b"src/") || k.starts_with(b"outside/");
        if fixed && g != b {
            return Err(ctx(format!("{} changed (SRC or outside)", show(k))));
        }
        if g == w {
            continue;
        }
        if g != b {
            return Err(ctx(format!(
                "{}: mfu-rs made {:?}, rsync {:?}, before {:?}",
                show(k),
                g.map(|v| show(v)),
                w.map(|v| show(v)),
                b.map(|v| show(v))
            )));
        }
        left.push(show(k));
    }
    match code {
        Some(0) if left.is_empty() => Ok(Outcome::SameAsRsync),
        Some(0) => Err(ctx(format!("exit 0 but left as before: {left:?}"))),
        Some(2) if got == before => Ok(Outcome::RefusedAll),
        Some(2) => Err(ctx("exit 2 but something changed".into())),
        Some(1) if !left.is_empty() && !stderr.is_empty() => Ok(Outcome::RefusedItems),
        Some(1) if !rsync.status.success() && !stderr.is_empty() => {
            Ok(Outcome::SameRefusalsAsRsync)
        }
        _ => Err(ctx(format!("unexpected exit, entries left: {left:?}"))),
    }
}

/// The whole matrix at np 1; the removals (-D) beside symlinks and odd names also at np 2.
#[test]
fn sync_matches_rsync_or_refuses() {
    // rsync must be there: a missing reference fails, it never skips.
    let v = Command::new("rsync").arg("--version").output();
    assert!(
        v.is_ok_and(|o| o.status.success()),
        "rsync is needed (cargo xtask setup installs it)"
    );
    let mut table = Vec::new();
    let mut failures = Vec::new();
    for c in cases() {
        let two = c.mfu.contains(&"-D") && (c.name.contains("symlink") || c.name.contains("odd"));
        let nps: &[usize] = if two { &[1, 2] } else { &[1] };
        for &np in nps {
            match run_case(&c, np) {
                Ok(o) => table.push(format!("{:<60} np={np} {o:?}", c.name)),
                Err(e) => failures.push(format!("{} (np={np}): {e}", c.name)),
            }
        }
    }
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

/// The checker is not vacuous: mfu-rs asked to delete (`-D`) where rsync is not removes more
/// than rsync, and that is reported.
#[test]
fn the_checker_catches_more_deleted_than_rsync() {
    let c = case!(
        "deliberately mismatched",
        [File(b"dest/extra", b"x")],
        &["-D", "src", "dest"],
        &["src/", "dest/"]
    );
    let err = run_case(&c, 1).expect_err("the mismatch is found");
    assert!(err.contains("dest/extra"), "{err}");
}
