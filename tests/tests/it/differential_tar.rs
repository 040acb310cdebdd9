//! `mfu-rs tar -x` against GNU tar and bsdtar on the same archive extracted into the same
//! generated destinations: symlinks in DEST at every level (to an outside tree, into the tree
//! the archive was made from, dangling), type conflicts (file, directory, symlink in each
//! position), a hard link from DEST to an outside file.
//!
//! Each case's tree (`src/`, `outside/`, `dest/`, relative symlinks) is built afresh for each
//! extractor from the same recipe. Expected of mfu-rs: `src/` and `outside/` never change; every
//! entry of `dest/` ends as a reference (GNU tar or bsdtar) left it, or as it was before, never
//! more deleted or overwritten than a reference did; anything short of GNU tar's result is exit
//! 1 with the entries named; exit 0 is exactly GNU tar's result. The table of outcomes is
//! printed (`cargo test --test differential_tar -- --nocapture`).

use mfu_tests::Tool;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;
use std::process::{Command, Output};

/// One step of building a case's destination, relative to the case's root.
enum Op {
    Dir(&'static str),
    File(&'static str, &'static [u8]),
    Link(&'static str, &'static str),
    Hard(&'static str, &'static str),
}
use Op::*;

/// The archive's source: `src/t` with a directory, files, a symlink and a hard link.
fn make_source(root: &Path) {
    std::fs::create_dir_all(root.join("src/t/d")).unwrap();
    std::fs::write(root.join("src/t/d/f"), b"new inner").unwrap();
    std::fs::write(root.join("src/t/f"), b"new file").unwrap();
    std::fs::hard_link(root.join("src/t/f"), root.join("src/t/h")).unwrap();
    symlink("f", root.join("src/t/l")).unwrap();
    std::fs::create_dir_all(root.join("outside/od")).unwrap();
    std::fs::write(root.join("outside/o"), b"outside").unwrap();
    std::fs::write(root.join("outside/od/o2"), b"outside 2").unwrap();
    std::fs::create_dir(root.join("dest")).unwrap();
}

fn cases() -> Vec<(&'static str, Vec<Op>)> {
    vec![
        ("empty DEST", vec![]),
        (
            "top dir is a symlink to outside",
            vec![Link("dest/t", "../outside/od")],
        ),
        (
            "top dir is a symlink into src",
            vec![Link("dest/t", "../src/t")],
        ),
        (
            "inner dir is a symlink to outside",
            vec![Dir("dest/t"), Link("dest/t/d", "../../outside/od")],
        ),
        (
            "inner dir is a symlink into src",
            vec![Dir("dest/t"), Link("dest/t/d", "../../src/t/d")],
        ),
        (
            "inner dir is dangling",
            vec![Dir("dest/t"), Link("dest/t/d", "nowhere")],
        ),
        (
            "file is a symlink to outside",
            vec![Dir("dest/t"), Link("dest/t/f", "../../outside/o")],
        ),
        (
            "file is a symlink into src",
            vec![Dir("dest/t"), Link("dest/t/f", "../../src/t/f")],
        ),
        (
            "file is dangling",
            vec![Dir("dest/t"), Link("dest/t/f", "gone")],
        ),
        (
            "deep file is a symlink to outside",
            vec![Dir("dest/t/d"), Link("dest/t/d/f", "../../../outside/o")],
        ),
        (
            "file is a hard link of an outside file",
            vec![Dir("dest/t"), Hard("dest/t/f", "outside/o")],
        ),
        (
            "hard link's name is a hard link of an outside file",
            vec![Dir("dest/t"), Hard("dest/t/h", "outside/o")],
        ),
        ("file is an empty dir", vec![Dir("dest/t/f")]),
        (
            "file is a dir with content",
            vec![Dir("dest/t/f"), File("dest/t/f/keep", b"keep")],
        ),
        (
            "inner dir is a file",
            vec![Dir("dest/t"), File("dest/t/d", b"old")],
        ),
        ("symlink is a dir", vec![Dir("dest/t/l")]),
        (
            "symlink is a file",
            vec![Dir("dest/t"), File("dest/t/l", b"old")],
        ),
        ("top dir is a file", vec![File("dest/t", b"old")]),
        (
            "files exist with other bytes",
            vec![
                Dir("dest/t/d"),
                File("dest/t/f", b"old file"),
                File("dest/t/d/f", b"old inner"),
                File("dest/t/extra", b"extra"),
            ],
        ),
    ]
}

fn build(root: &Path, ops: &[Op]) {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root).unwrap();
    make_source(root);
    for op in ops {
        match *op {
            Dir(p) => std::fs::create_dir_all(root.join(p)).unwrap(),
            File(p, data) => std::fs::write(root.join(p), data).unwrap(),
            Link(p, to) => symlink(to, root.join(p)).unwrap(),
            Hard(p, to) => std::fs::hard_link(root.join(to), root.join(p)).unwrap(),
        }
    }
}

/// What an entry is: its type and contents (bytes or link target); a directory is "dir".
#[derive(Clone, PartialEq, Eq, Debug)]
enum Node {
    Dir,
    File(Vec<u8>),
    Link(Vec<u8>),
}

fn snapshot(root: &Path) -> BTreeMap<Vec<u8>, Node> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<Vec<u8>, Node>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let node = if m.file_type().is_symlink() {
                Node::Link(
                    std::fs::read_link(&p)
                        .unwrap()
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                )
            } else if m.is_dir() {
                walk(root, &p, out);
                Node::Dir
            } else {
                Node::File(std::fs::read(&p).unwrap())
            };
            out.insert(rel, node);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn under(tree: &BTreeMap<Vec<u8>, Node>, prefix: &str) -> BTreeMap<Vec<u8>, Node> {
    tree.iter()
        .filter(|(k, _)| k.starts_with(prefix.as_bytes()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn extract(who: &str, root: &Path, archive: &Path) -> Output {
    let mut cmd = match who {
        "gnu" => {
            let mut c = Command::new("tar");
            c.env("LC_ALL", "C").arg("-xf");
            c
        }
        "bsdtar" => {
            let mut c = Command::new("bsdtar");
            c.arg("-xf");
            c
        }
        "mfu np1" => Tool::new("tar").args(["-x", "-f"]).command(),
        "mfu np2" => Tool::new("tar").mpi(2).args(["-x", "-f"]).command(),
        _ => unreachable!(),
    };
    cmd.arg(archive).arg("-C").arg(root.join("dest"));
    cmd.output()
        .unwrap_or_else(|e| panic!("{who} could not start: {e}"))
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

#[test]
fn tar_x_into_prepared_destinations_never_goes_further_than_gnu_tar_or_bsdtar() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("a.tar");
    // The archive, made once by GNU tar from the common source.
    let made = tmp.path().join("made");
    build(&made, &[]);
    let st = Command::new("tar")
        .arg("-cf")
        .arg(&archive)
        .arg("-C")
        .arg(made.join("src"))
        .arg("t")
        .status()
        .unwrap();
    assert!(st.success());
    let outside_ino = |root: &Path| std::fs::metadata(root.join("outside/o")).unwrap().ino();

    let mut table = vec![format!(
        "{:<52} {:>6} {:>7} {:>9} {:>9}  mfu-rs outcome",
        "case", "GNU", "bsdtar", "mfu np1", "mfu np2"
    )];
    let mut failures = Vec::new();
    for (name, ops) in cases() {
        let mut results = BTreeMap::new();
        let mut before = BTreeMap::new();
        for who in ["gnu", "bsdtar", "mfu np1", "mfu np2"] {
            let root = tmp.path().join("case");
            build(&root, &ops);
            before = snapshot(&root);
            let ino = outside_ino(&root);
            let out = extract(who, &root, &archive);
            let after = snapshot(&root);
            results.insert(who, (out, after, outside_ino(&root) == ino));
        }
        let (gnu_out, gnu, _) = &results["gnu"];
        let (bsd_out, bsd, _) = &results["bsdtar"];
        let mut row = format!("{name:<52} {:>6} {:>7}", code(gnu_out), code(bsd_out));
        let mut outcome = Vec::new();
        for who in ["mfu np1", "mfu np2"] {
            let (out, after, same_outside_inode) = &results[who];
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            let mut bad = Vec::new();
            // Outside the destination nothing changes, whatever the references did.
            for side in ["src/", "outside/"] {
                if under(after, side) != under(&before, side) {
                    bad.push(format!("{side} changed"));
                }
            }
            if !same_outside_inode {
                bad.push("outside/o replaced".into());
            }
            // Inside: each entry as a reference left it, or as it was.
            let keys: BTreeSet<&Vec<u8>> = [after, gnu, bsd, &before]
                .iter()
                .flat_map(|t| t.keys())
                .filter(|k| k.starts_with(b"dest/"))
                .collect();
            let mut short_of_gnu = Vec::new();
            for k in keys {
                let got = after.get(k);
                if got == gnu.get(k) {
                    continue;
                }
                short_of_gnu.push(String::from_utf8_lossy(k).into_owned());
                if got != bsd.get(k) && got != before.get(k) {
                    bad.push(format!(
                        "{}: {:?} (GNU {:?}, bsdtar {:?}, before {:?})",
                        String::from_utf8_lossy(k),
                        got,
                        gnu.get(k),
                        bsd.get(k),
                        before.get(k)
                    ));
                }
            }
            match code(out) {
                0 if !short_of_gnu.is_empty() => bad.push(format!(
                    "exit 0 but short of GNU tar's result at {short_of_gnu:?}"
                )),
                0 | 1 => {}
                c => bad.push(format!("exit {c}")),
            }
            if code(out) == 1 && !err.contains("mfu-rs tar:") {
                bad.push("exit 1 without naming what failed".into());
            }
            row.push_str(&format!(" {:>9}", code(out)));
            if who == "mfu np1" {
                outcome.push(if short_of_gnu.is_empty() {
                    "as GNU tar".to_string()
                } else {
                    format!("refused/left: {}", short_of_gnu.join(", "))
                });
            }
            if !bad.is_empty() {
                failures.push(format!("{name} ({who}): {bad:?}\n--- stderr\n{err}"));
            }
        }
        row.push_str("  ");
        row.push_str(&outcome.join("; "));
        table.push(row);
    }
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
