//! `mfu-rs cp -p` against GNU `cp -a` on the same generated path situations (issue 15's net):
//! the same file, hard links between SRC and DEST, symlinks in DEST at every level (to outside,
//! into SRC, dangling), type conflicts in each position, SRC given as a symlink, trailing
//! slashes.
//!
//! Each case is built twice from scratch; mfu-rs runs in one copy, GNU cp in the other. The
//! expected outcome is the reference's result or a refusal that leaves things as they were:
//! every entry mfu-rs leaves is either the one GNU cp leaves or the one that was there before
//! (never more deleted or overwritten than the reference), SRC and the outside tree never
//! change, and an entry left unlike the reference's means exit 1 with a message. Compared:
//! types, file bytes, link targets (metadata is `cp.rs`'s business).

use mfu_tests::tree::{self, Kind, Node, Tree};
use mfu_tests::{clean_env, Tool};
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output};

/// One situation: how to build it in an empty directory, and the arguments of both tools
/// (relative paths, run in that directory).
struct Case {
    name: &'static str,
    build: fn(&Path),
    mfu: &'static [&'static str],
    gnu: &'static [&'static str],
}

fn write(p: &Path, data: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

/// SRC: `src/{a/f, a/g, t, l -> t}`, an outside tree `outside/{f, o, a/}` and an empty `dst`.
fn base(d: &Path) {
    write(&d.join("src/a/f"), "src a/f\n");
    write(&d.join("src/a/g"), "src a/g\n");
    write(&d.join("src/t"), "src t\n");
    symlink("t", d.join("src/l")).unwrap();
    write(&d.join("outside/f"), "outside f\n");
    write(&d.join("outside/o"), "outside o\n");
    std::fs::create_dir_all(d.join("outside/a")).unwrap();
    std::fs::create_dir(d.join("dst")).unwrap();
}

/// `base` plus `dst/src` as a directory, with `link` in it made a symlink to `target`
/// (absolute, under the case directory).
fn dest_link(d: &Path, link: &str, target: &str) {
    base(d);
    let l = match link {
        "" => d.join("dst/src"),
        _ => d.join("dst/src").join(link),
    };
    std::fs::create_dir_all(l.parent().unwrap()).unwrap();
    symlink(d.join(target), l).unwrap();
}

macro_rules! link_case {
    ($name:expr, $link:expr, $target:expr) => {
        Case {
            name: $name,
            build: |d| dest_link(d, $link, $target),
            mfu: &["src", "dst"],
            gnu: &["src", "dst"],
        }
    };
}

// The table of cases, one per row: splitting it would only scatter the rows.
#[allow(clippy::too_many_lines)]
fn cases() -> Vec<Case> {
    vec![
        // The same file.
        Case {
            name: "same file: cp f f",
            build: |d| write(&d.join("f"), "f\n"),
            mfu: &["f", "f"],
            gnu: &["f", "f"],
        },
        Case {
            name: "same file: cp d/h d",
            build: |d| write(&d.join("d/h"), "h\n"),
            mfu: &["d/h", "d"],
            gnu: &["d/h", "d"],
        },
        Case {
            name: "same file: cp h1 h2 (hard links)",
            build: |d| {
                write(&d.join("h1"), "h\n");
                std::fs::hard_link(d.join("h1"), d.join("h2")).unwrap();
            },
            mfu: &["h1", "h2"],
            gnu: &["h1", "h2"],
        },
        Case {
            name: "same file: refresh a cp -al snapshot",
            build: |d| {
                base(d);
                let ok = Command::new("cp")
                    .args(["-al", "src", "snap"])
                    .current_dir(d)
                    .status()
                    .unwrap();
                assert!(ok.success());
            },
            mfu: &["src/", "snap"],
            gnu: &["src/.", "snap"],
        },
        // Hard links between SRC and DEST, and from DEST to outside.
        Case {
            name: "DEST file hard-linked to its SRC file",
            build: |d| {
                base(d);
                std::fs::create_dir(d.join("dst/src")).unwrap();
                std::fs::hard_link(d.join("src/t"), d.join("dst/src/t")).unwrap();
            },
            mfu: &["src", "dst"],
            gnu: &["src", "dst"],
        },
        Case {
            name: "DEST file hard-linked to another SRC file",
            build: |d| {
                base(d);
                std::fs::create_dir(d.join("dst/src")).unwrap();
                std::fs::hard_link(d.join("src/a/g"), d.join("dst/src/t")).unwrap();
            },
            mfu: &["src", "dst"],
            gnu: &["src", "dst"],
        },
        Case {
            name: "DEST file hard-linked to an outside file",
            build: |d| {
                base(d);
                std::fs::create_dir(d.join("dst/src")).unwrap();
                std::fs::hard_link(d.join("outside/o"), d.join("dst/src/t")).unwrap();
            },
            mfu: &["src", "dst"],
            gnu: &["src", "dst"],
        },
        // Symlinks in DEST at every level.
        link_case!("DEST root is a symlink to outside", "", "outside"),
        link_case!("DEST root is a symlink into SRC", "", "src/a"),
        link_case!("DEST root is a dangling symlink", "", "nowhere"),
        link_case!("DEST dir is a symlink to outside", "a", "outside/a"),
        link_case!("DEST dir is a symlink into SRC", "a", "src/a"),
        link_case!("DEST dir is a dangling symlink", "a", "nowhere"),
        link_case!("DEST file is a symlink to outside", "t", "outside/o"),
        link_case!("DEST file is a symlink into SRC", "t", "src/a/f"),
        link_case!("DEST file is a dangling symlink", "t", "nowhere"),
        link_case!("DEST deep file is a symlink to outside", "a/f", "outside/f"),
        link_case!("DEST deep file is a symlink into SRC", "a/f", "src/a/g"),
        link_case!("DEST deep file is a dangling symlink", "a/f", "nowhere"),
        link_case!("DEST symlink is a symlink to outside", "l", "outside/o"),
        // Type conflicts: SRC's a is a directory, t a file, l a symlink.
        Case {
            name: "conflict: file in DEST where SRC has a directory",
            build: |d| {
                base(d);
                write(&d.join("dst/src/a"), "dest file a\n");
            },
            mfu: &["src", "dst"],
            gnu: &["src", "dst"],
        },
        Case {
            name: "conflict: directory in DEST where SRC has a file",
            build: |d| {
                base(d);
                write(&d.join("dst/src/t/x"), "dest t/x\n");
            },
            mfu: &["src", "dst"],
            gnu: &["src", "dst"],
        },
        Case {
            name: "conflict: file in DEST where SRC has a symlink",
            build: |d| {
                base(d);
                write(&d.join("dst/src/l"), "dest file l\n");
            },
            mfu: &["src", "dst"],
            gnu: &["src", "dst"],
        },
        Case {
            name: "conflict: directory in DEST where SRC has a symlink",
            build: |d| {
                base(d);
                write(&d.join("dst/src/l/x"), "dest l/x\n");
            },
            mfu: &["src", "dst"],
            gnu: &["src", "dst"],
        },
        Case {
            name: "conflict: SRC directory onto an existing file DEST",
            build: |d| {
                base(d);
                write(&d.join("file"), "dest file\n");
            },
            mfu: &["src", "file"],
            gnu: &["src", "file"],
        },
        Case {
            name: "conflict: SRC file onto a directory DEST/NAME",
            build: |d| {
                base(d);
                write(&d.join("dst/t/x"), "dest t/x\n");
            },
            mfu: &["src/t", "dst"],
            gnu: &["src/t", "dst"],
        },
        // SRC given as a symlink.
        Case {
            name: "SRC is a symlink to a directory",
            build: |d| {
                base(d);
                symlink("src", d.join("srclink")).unwrap();
            },
            mfu: &["srclink", "dst"],
            gnu: &["srclink", "dst"],
        },
        Case {
            name: "SRC is a symlink to a directory, with /",
            build: |d| {
                base(d);
                symlink("src", d.join("srclink")).unwrap();
            },
            mfu: &["srclink/", "dst"],
            gnu: &["srclink/.", "dst"],
        },
        Case {
            name: "DEST is a symlink to a directory (named by the user)",
            build: |d| {
                base(d);
                std::fs::create_dir(d.join("real")).unwrap();
                symlink("real", d.join("dlink")).unwrap();
            },
            mfu: &["src", "dlink"],
            gnu: &["src", "dlink"],
        },
        Case {
            name: "DEST is a symlink to a file (named by the user)",
            build: |d| {
                base(d);
                symlink("outside/o", d.join("flink")).unwrap();
            },
            mfu: &["src/t", "flink"],
            gnu: &["src/t", "flink"],
        },
        // Trailing slashes.
        Case {
            name: "trailing slash on DEST",
            build: base,
            mfu: &["src", "dst/"],
            gnu: &["src", "dst/"],
        },
        Case {
            name: "trailing slash on SRC (contents into DEST)",
            build: |d| {
                base(d);
                write(&d.join("dst/t"), "old t\n");
            },
            mfu: &["src/", "dst"],
            gnu: &["src/.", "dst"],
        },
        Case {
            name: "trailing slash on SRC, DEST absent",
            build: base,
            mfu: &["src/", "new"],
            gnu: &["src/.", "new"],
        },
        Case {
            name: "trailing slash on a file SRC",
            build: base,
            mfu: &["src/t/", "dst"],
            gnu: &["src/t/", "dst"],
        },
    ]
}

/// What matters of an entry here: type, bytes, link target.
fn essence(n: &Node) -> (Kind, Option<u128>, Option<Vec<u8>>) {
    (n.kind, n.digest, n.target.clone())
}

fn same(a: Option<&Node>, b: Option<&Node>) -> bool {
    a.map(essence) == b.map(essence)
}

/// The entry of SRC (before the run) that the DEST entry `k` (`dst/src/...`) copies.
fn pristine_source<'a>(before: &'a Tree, k: &[u8]) -> Option<&'a Node> {
    let rest = k.strip_prefix(b"dst/src/")?;
    before.get(&[&b"src/"[..], rest].concat())
}

fn run(dir: &Path, program: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    clean_env(&mut cmd).current_dir(dir).args(args);
    cmd.output().unwrap()
}

fn show(k: &[u8]) -> String {
    tree::lossy(k)
}

#[test]
fn cp_p_matches_gnu_cp_a_or_refuses_with_nothing_changed() {
    let mut table = Vec::new();
    let mut failures = Vec::new();
    for case in cases() {
        let ours_dir = tempfile::tempdir().unwrap();
        let ref_dir = tempfile::tempdir().unwrap();
        (case.build)(ours_dir.path());
        (case.build)(ref_dir.path());
        let before: Tree = tree::snapshot(ours_dir.path());
        let mut args = vec!["cp", "-p"];
        args.extend_from_slice(case.mfu);
        let ours = Tool::bare().args(&args).current_dir(ours_dir.path()).run();
        let mut gnu_args = vec!["-a"];
        gnu_args.extend_from_slice(case.gnu);
        let reference = run(ref_dir.path(), Path::new("cp"), &gnu_args);
        let after = tree::snapshot(ours_dir.path());
        let expected = tree::snapshot(ref_dir.path());
        let code = ours.status.code().unwrap_or(-1);
        let ref_code = reference.status.code().unwrap_or(-1);
        let mut wrong = Vec::new();
        let mut left = 0;
        let keys: std::collections::BTreeSet<&Vec<u8>> = before
            .keys()
            .chain(after.keys())
            .chain(expected.keys())
            .collect();
        let protected = |k: &[u8]| k.starts_with(b"src") || k.starts_with(b"outside");
        let ref_wrote_outside = keys
            .iter()
            .any(|k| protected(k) && !same(expected.get(*k), before.get(*k)));
        for k in keys {
            let (b, a, e) = (before.get(k), after.get(k), expected.get(k));
            if protected(k) {
                if !same(a, b) {
                    wrong.push(format!("{} changed (SRC/outside)", show(k)));
                }
            } else if !same(a, e) {
                if same(a, b) {
                    left += 1;
                } else if ref_wrote_outside && same(a, pristine_source(&before, k)) {
                    // cp -a wrote through a symlink into SRC before copying that entry: its
                    // result is no reference; mfu-rs copied the untouched source entry.
                } else {
                    wrong.push(format!(
                        "{}: before {:?}, mfu-rs {:?}, cp -a {:?}",
                        show(k),
                        b.map(essence),
                        a.map(essence),
                        e.map(essence)
                    ));
                }
            }
        }
        if left > 0 && (code != 1 || ours.stderr.is_empty()) {
            wrong.push(format!(
                "{left} entries left unlike cp -a's, but exit {code}"
            ));
        }
        let outcome = if !wrong.is_empty() {
            "WRONG".to_string()
        } else if left == 0 && (code == 0 || ref_code != 0) {
            format!("as cp -a (exit {code}; cp -a {ref_code})")
        } else if left == 0 {
            format!("refused, nothing changed (exit {code}; cp -a {ref_code})")
        } else {
            format!("refused {left} entries, left as they were (exit {code}; cp -a {ref_code})")
        };
        let note = if ref_wrote_outside {
            "; cp -a wrote outside DEST"
        } else {
            ""
        };
        table.push(format!("{:<58} {outcome}{note}", case.name));
        if !wrong.is_empty() {
            failures.push(format!(
                "{}:\n  {}\n  mfu-rs stderr: {}",
                case.name,
                wrong.join("\n  "),
                String::from_utf8_lossy(&ours.stderr)
            ));
        }
    }
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
