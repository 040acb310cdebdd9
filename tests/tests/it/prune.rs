//! Exclude rules prune the walk: an excluded directory is never read (cp, sync on both trees,
//! tar -c). The excluded directories here are unreadable to the user the tools run as (nobody),
//! so a walk that opened one, or stat'ed anything below it, would fail and exit 1; pruned, the
//! run succeeds and leaves them out, with rsync's rule that an include cannot bring back what
//! is below an excluded directory.

use mfu_tests::tree;
use mfu_tests::Tool;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// A temporary directory others can traverse, holding an `out/` directory nobody owns, and `src/` (root's) with two directories named `skip`
/// that only root can read.
struct Setup {
    tmp: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let tmp = mfu_tests::nobody_tempdir();
        let base = tmp.path();
        let src = base.join("src");
        for dir in ["keep", "skip/inner", "deep/skip"] {
            std::fs::create_dir_all(src.join(dir)).unwrap();
        }
        for file in [
            "top.txt",
            "keep/a.txt",
            "skip/b.txt",
            "skip/inner/c.txt",
            "deep/d.txt",
            "deep/skip/e.txt",
        ] {
            std::fs::write(src.join(file), file).unwrap();
        }
        tree::chmod(&src.join("skip"), 0o000);
        tree::chmod(&src.join("deep/skip"), 0o000);
        let out = base.join("out");
        std::fs::create_dir(&out).unwrap();
        tree::chown_tree(&out, 65534, 65534);
        Setup { tmp }
    }

    fn base(&self) -> &Path {
        self.tmp.path()
    }

    fn src(&self) -> PathBuf {
        self.base().join("src")
    }

    fn out(&self, name: &str) -> PathBuf {
        self.base().join("out").join(name)
    }

    /// `mfu-rs ARGS` as nobody, launched as `launch` says, in the base directory.
    fn nobody(&self, launch: &str, args: &[&OsStr]) -> mfu_tests::Run {
        let tool = match launch {
            "mpi 2" => Tool::bare().mpi(2),
            l => Tool::bare().ranks(l["ranks ".len()..].parse().unwrap()),
        };
        tool.as_nobody()
            .env("HOME", self.base())
            .current_dir(self.base())
            .args(args)
            .run()
    }
}

/// The relative paths of the tree at `root` (the root itself left out).
fn names(root: &Path) -> Vec<String> {
    tree::snapshot(root)
        .keys()
        .filter(|k| !k.is_empty())
        .map(|k| tree::lossy(k))
        .collect()
}

/// What is left of `src` by each rule set below: nothing named `skip` nor anything below one.
const KEPT: [&str; 5] = ["deep", "deep/d.txt", "keep", "keep/a.txt", "top.txt"];

/// Rule sets that exclude both `skip` directories; the second also includes `*.txt` after the
/// exclusion, which must not bring back `skip/b.txt` (the first matching rule decides, and an
/// excluded directory excludes everything below it).
const RULES: [&[&str]; 3] = [
    &["--exclude", "skip/"],
    &["--exclude", "skip", "--include", "*.txt"],
    &["--exclude-regex", "(^|/)skip$"],
];

fn os<'a>(args: &[&'a str]) -> Vec<&'a OsStr> {
    args.iter().map(|a| OsStr::new(*a)).collect()
}

/// Run `tool` with `rules` at `launch` into a fresh destination `n`, and check what it made.
fn check(s: &Setup, tool: &str, rules: &[&str], launch: &str, n: usize) {
    let src = s.src();
    let what = format!("{tool} {rules:?} at {launch}");
    match tool {
        "cp" => {
            let dest = s.out(&format!("cp{n}"));
            let mut args = os(&["cp"]);
            args.extend(os(rules));
            args.extend([src.as_os_str(), dest.as_os_str()]);
            let run = s.nobody(launch, &args);
            assert_eq!(run.code(), Some(0), "{what}: {run:?}");
            assert_eq!(names(&dest), KEPT, "{what}");
        }
        "sync" => {
            // DEST has an excluded directory of its own that nobody can read: with --delete it
            // is neither read nor deleted.
            let dest = s.out(&format!("sync{n}"));
            std::fs::create_dir_all(dest.join("skip")).unwrap();
            std::fs::write(dest.join("skip/old.txt"), b"old").unwrap();
            std::fs::write(dest.join("gone.txt"), b"not in SRC").unwrap();
            tree::chown_tree(&dest, 65534, 65534);
            tree::chown_tree(&dest.join("skip"), 0, 0);
            tree::chmod(&dest.join("skip"), 0o000);
            let mut args = os(&["sync", "--delete"]);
            args.extend(os(rules));
            args.extend([src.as_os_str(), dest.as_os_str()]);
            let run = s.nobody(launch, &args);
            assert_eq!(run.code(), Some(0), "{what}: {run:?}");
            let mut want: Vec<&str> = KEPT.to_vec();
            want.extend(["skip", "skip/old.txt"]);
            want.sort();
            assert_eq!(names(&dest), want, "{what}");
        }
        "tar" => {
            let archive = s.out(&format!("t{n}.tar"));
            let mut args = os(&["tar", "-c", "-f"]);
            args.push(archive.as_os_str());
            args.extend(os(rules));
            args.push(OsStr::new("src"));
            let run = s.nobody(launch, &args);
            assert_eq!(run.code(), Some(0), "{what}: {run:?}");
            let listed = tree::run_tool("tar", &[OsStr::new("-tf"), archive.as_os_str()]);
            // The last member is mfu-rs's index (`NAME.dtaridx`), not a listed entry.
            let mut got: Vec<String> = String::from_utf8_lossy(&listed.stdout)
                .lines()
                .filter(|l| !l.ends_with(".dtaridx"))
                .map(|l| l.trim_end_matches('/').to_string())
                .collect();
            got.sort();
            let mut want: Vec<String> = std::iter::once("src".to_string())
                .chain(KEPT.iter().map(|k| format!("src/{k}")))
                .collect();
            want.sort();
            assert_eq!(got, want, "{what}");
        }
        _ => unreachable!(),
    }
}

#[test]
fn excluded_directories_are_never_read_by_cp_sync_and_tar() {
    let s = Setup::new();
    let mut n = 0;
    for tool in ["cp", "sync", "tar"] {
        for rules in RULES {
            n += 1;
            check(&s, tool, rules, "ranks 2", n);
        }
        for launch in ["ranks 1", "mpi 2"] {
            n += 1;
            check(&s, tool, RULES[0], launch, n);
        }
    }
}

/// Without a rule for it, the same unreadable directory is reported and the run fails: the
/// test above passes because of the pruning, not because nobody can read everything.
#[test]
fn an_unreadable_directory_that_is_not_excluded_still_fails_the_walk() {
    let s = Setup::new();
    let dest = s.out("cp");
    let src = s.src();
    let run = s.nobody(
        "ranks 2",
        &[OsStr::new("cp"), src.as_os_str(), dest.as_os_str()],
    );
    assert_eq!(run.code(), Some(1), "{run:?}");
    run.stderr_contains("skip");
}
