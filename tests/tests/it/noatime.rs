//! `--noatime` end to end: every tool that reads file data or directories leaves the access
//! times of what it read alone with it, and moves them without it, so that each check proves
//! something: the trees are made on a mount that updates access times (checked in
//! `/proc/mounts`; a `noatime` mount fails the test), with atimes set older than their mtimes,
//! which `relatime` updates on the next read. Run as nobody on root's files (readable by all),
//! the kernel refuses `O_NOATIME`: the reads still happen (exit 0), the access times move, and
//! one warning at the end counts the files (`noatime_refused` in `--json`), each file once
//! whatever the number of ranks or chunks. The old spellings (`--open-noatime`, dcp's, and
//! walk's `--no-atime`) still work.
//!
//! `stripe` takes `--noatime` too but needs Lustre (tests/it/lustre.rs); a symlink's atime
//! moves on `readlink(2)` whatever is asked (the kernel has no `O_NOATIME` for it), so `reln`
//! keeps only its directories' access times.

use mfu_tests::{nobody_tempdir, Tool};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// 2000-01-01T00:00:00Z: the access time every checked path starts with.
const OLD_ATIME: i64 = 946_684_800;
/// 2001-01-01T00:00:00Z: the modification time, newer than the access time, so that the next
/// read moves the access time on a `relatime` mount.
const OLD_MTIME: i64 = 978_307_200;

/// Bytes of the big file: seven chunks of `--chunksize 16k`.
const BIG: usize = 100_000;

/// Panic unless the mount holding `dir` updates access times: on a `noatime` mount every
/// "unchanged" below would hold whatever the tools did.
fn require_atime_updates(dir: &Path) {
    let dir = fs::canonicalize(dir).unwrap();
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    let (point, options) = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            // Mount points escape blanks as \040; ours have none.
            let point = PathBuf::from(f.get(1)?.replace("\\040", " "));
            let options = f.get(3)?.to_string();
            dir.starts_with(&point).then_some((point, options))
        })
        .max_by_key(|(p, _)| p.as_os_str().len())
        .expect("a mount holds the test directory");
    assert!(
        !options.split(',').any(|o| o == "noatime"),
        "{} is on {} mounted {options}: access times never change there, so these tests \
         would prove nothing; set TMPDIR to a directory on a relatime or strictatime mount",
        dir.display(),
        point.display()
    );
}

/// Set each path's access time to [`OLD_ATIME`] and modification time to [`OLD_MTIME`]
/// (the path itself, not what a symlink points to).
fn age(paths: &[PathBuf]) {
    use rustix::fs::{utimensat, AtFlags, Timespec, Timestamps, CWD};
    for p in paths {
        let at = |s| Timespec {
            tv_sec: s,
            tv_nsec: 0,
        };
        let times = Timestamps {
            last_access: at(OLD_ATIME),
            last_modification: at(OLD_MTIME),
        };
        utimensat(CWD, p, &times, AtFlags::SYMLINK_NOFOLLOW)
            .unwrap_or_else(|e| panic!("utimensat {}: {e}", p.display()));
    }
}

/// Access times (seconds) of `paths`.
fn atimes(paths: &[PathBuf]) -> Vec<i64> {
    paths
        .iter()
        .map(|p| fs::symlink_metadata(p).unwrap().atime())
        .collect()
}

/// Age `read`, run the tool with `flag` (`--noatime`, or an old spelling), check every path
/// of `read` kept its access time; age again, run without it, check every one moved (the tool
/// reads them, and this mount shows it).
fn kept_with_moved_without(flag: &str, read: &[PathBuf], mut run: impl FnMut(Option<&str>)) {
    require_atime_updates(&read[0]);
    age(read);
    run(Some(flag));
    let kept = atimes(read);
    for (p, a) in read.iter().zip(&kept) {
        assert_eq!(*a, OLD_ATIME, "{} was read with {flag}", p.display());
    }
    age(read);
    run(None);
    for (p, a) in read.iter().zip(atimes(read)) {
        assert!(
            a > OLD_ATIME,
            "{} kept its access time without {flag}: not read, or this mount does not update \
             access times (the check would prove nothing)",
            p.display()
        );
    }
}

/// [`kept_with_moved_without`] with `--noatime`.
fn kept_with_noatime(read: &[PathBuf], run: impl FnMut(Option<&str>)) {
    kept_with_moved_without("--noatime", read, run)
}

/// A test tree: `ROOT/src` with `a` ([`BIG`] bytes), `sub/b` (`hello`), `sub/a2` (a copy of
/// `a`, so that dup reads both), all readable by everyone, in a directory nobody can enter.
struct Tree {
    tmp: tempfile::TempDir,
    /// Every file and directory of `src`, directories first.
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

impl Tree {
    fn new() -> Tree {
        Tree::named("src")
    }

    fn named(name: &str) -> Tree {
        let tmp = nobody_tempdir();
        let t = Tree {
            tmp,
            dirs: Vec::new(),
            files: Vec::new(),
        };
        t.with_copy(name)
    }

    /// This tree with one more tree `name` of the same contents.
    fn with_copy(mut self, name: &str) -> Tree {
        let src = self.tmp.path().join(name);
        fs::create_dir_all(src.join("sub")).unwrap();
        let big = mfu_tests::noise(7, BIG);
        fs::write(src.join("a"), &big).unwrap();
        fs::write(src.join("sub/b"), b"hello\n").unwrap();
        fs::write(src.join("sub/a2"), &big).unwrap();
        self.dirs.extend([src.clone(), src.join("sub")]);
        self.files
            .extend([src.join("a"), src.join("sub/b"), src.join("sub/a2")]);
        // Directories and files of the same age in both trees: cmp finds them equal.
        age(&self.all());
        self
    }

    fn root(&self) -> &Path {
        self.tmp.path()
    }

    fn src(&self) -> PathBuf {
        self.root().join("src")
    }

    fn all(&self) -> Vec<PathBuf> {
        self.dirs.iter().chain(&self.files).cloned().collect()
    }

    /// A directory nobody may write in, for outputs of runs as nobody.
    fn nobody_out(&self) -> PathBuf {
        let out = self.root().join("out");
        fs::create_dir_all(&out).unwrap();
        std::os::unix::fs::chown(&out, Some(65534), Some(65534)).unwrap();
        out
    }

    /// A fresh output path under the root (`name.N`).
    fn fresh(&self, name: &str) -> PathBuf {
        (0..)
            .map(|n| self.root().join(format!("{name}.{n}")))
            .find(|p| !p.exists())
            .unwrap()
    }
}

/// `tool` launched as one process (0), three thread ranks (1), or two MPI ranks (2).
fn launched(tool: Tool, how: usize) -> Tool {
    match how {
        0 => tool,
        1 => tool.ranks(3),
        _ => tool.mpi(2),
    }
}

const LAUNCHES: [usize; 3] = [0, 1, 2];

#[test]
fn cp_reads_files_and_directories_without_moving_their_atimes() {
    for how in LAUNCHES {
        let t = Tree::new();
        kept_with_noatime(&t.all(), |flag| {
            launched(Tool::new("cp"), how)
                .args(flag)
                .args(["--chunksize", "16k"])
                .arg(t.src())
                .arg(t.fresh("copy"))
                .expect(0);
        });
    }
}

#[test]
fn cmp_reads_both_trees_without_moving_their_atimes() {
    for how in LAUNCHES {
        let t = Tree::new().with_copy("copy");
        kept_with_noatime(&t.all(), |flag| {
            launched(Tool::new("cmp"), how)
                .args(flag)
                .args(["--chunksize", "16k"])
                .arg(t.src())
                .arg(t.root().join("copy"))
                .expect(0);
        });
    }
}

#[test]
fn sync_reads_sources_and_compared_destinations_without_moving_their_atimes() {
    for how in [0, 1] {
        let t = Tree::new();
        kept_with_noatime(&t.all(), |flag| {
            launched(Tool::new("sync"), how)
                .args(flag)
                .arg(t.src())
                .arg(t.fresh("dest"))
                .expect(0);
        });
        // --contents reads the destination's files too: equal ones are left as they are.
        let t = Tree::new().with_copy("dest");
        kept_with_noatime(&t.all(), |flag| {
            launched(Tool::new("sync"), how)
                .args(flag)
                .arg("--contents")
                .arg(t.src())
                .arg(t.root().join("dest"))
                .expect(0);
        });
    }
}

#[test]
fn tar_create_reads_sources_and_extract_and_list_read_the_archive_without_moving_atimes() {
    for how in [0, 1] {
        let t = Tree::new();
        kept_with_noatime(&t.all(), |flag| {
            launched(Tool::new("tar"), how)
                .args(flag)
                .arg("-c")
                .arg("-f")
                .arg(t.fresh("archive.tar"))
                .arg("-C")
                .arg(t.root())
                .arg("src")
                .expect(0);
        });
        let archive = t.root().join("archive.tar.0");
        let read = [archive.clone()];
        kept_with_noatime(&read, |flag| {
            let into = t.fresh("extracted");
            fs::create_dir(&into).unwrap();
            launched(Tool::new("tar"), how)
                .args(flag)
                .arg("-x")
                .arg("-f")
                .arg(&archive)
                .arg("-C")
                .arg(&into)
                .expect(0);
        });
        kept_with_noatime(&read, |flag| {
            launched(Tool::new("tar"), how)
                .args(flag)
                .arg("-t")
                .arg("-f")
                .arg(&archive)
                .expect(0);
        });
    }
}

#[test]
fn dup_and_grep_read_files_and_directories_without_moving_their_atimes() {
    for how in [0, 1] {
        let t = Tree::new();
        // dup reads the two files of one size (b's size is its own: never read).
        let read: Vec<PathBuf> = t
            .dirs
            .iter()
            .chain(t.files.iter().filter(|f| !f.ends_with("sub/b")))
            .cloned()
            .collect();
        kept_with_noatime(&read, |flag| {
            launched(Tool::new("dup"), how)
                .args(flag)
                .arg(t.src())
                .expect(0);
        });
        kept_with_noatime(&t.all(), |flag| {
            launched(Tool::new("grep"), how)
                .args(flag)
                .args(["-r", "hello"])
                .arg(t.src())
                .expect(0);
        });
    }
}

#[test]
fn walkers_read_directories_without_moving_their_atimes() {
    for how in [0, 1] {
        let t = Tree::new();
        let dirs = &t.dirs;
        let src = t.src();
        let src = src.to_str().unwrap();
        let runs: [(&str, Vec<&str>); 4] = [
            ("walk", vec![src]),
            ("find", vec![src]),
            ("sh", vec!["-c", "ls", src]),
            ("reln", vec!["/nowhere", "/elsewhere", src]),
        ];
        for (tool, args) in runs {
            kept_with_noatime(dirs, |flag| {
                launched(Tool::new(tool), how)
                    .args(flag)
                    .args(&args)
                    .expect(0);
            });
        }
    }
}

#[test]
fn bz2_reads_its_input_without_moving_its_atime() {
    let t = Tree::new();
    let a = t.root().join("src/a");
    kept_with_noatime(std::slice::from_ref(&a), |flag| {
        Tool::new("bz2")
            .args(flag)
            .args(["-z", "-k", "-f"])
            .arg(&a)
            .expect(0);
    });
    let compressed = t.root().join("src/a.bz2");
    kept_with_noatime(std::slice::from_ref(&compressed), |flag| {
        Tool::new("bz2")
            .args(flag)
            .args(["-d", "-k", "-f"])
            .arg(&compressed)
            .expect(0);
    });
}

#[test]
fn bcast_reads_its_source_without_moving_its_atime() {
    for how in [0, 2] {
        let t = Tree::new();
        let a = t.root().join("src/a");
        kept_with_noatime(std::slice::from_ref(&a), |flag| {
            launched(Tool::new("bcast"), how)
                .args(flag)
                .arg(&a)
                .arg(t.fresh("a.copy"))
                .expect(0);
        });
    }
}

/// The spellings of before (dcp's `--open-noatime`; walk's `--no-atime`) are hidden aliases.
#[test]
fn the_old_spellings_still_leave_atimes_alone() {
    let t = Tree::new();
    kept_with_moved_without("--open-noatime", &t.all(), |flag| {
        Tool::new("dcp")
            .args(flag)
            .arg(t.src())
            .arg(t.fresh("copy"))
            .expect(0);
    });
    kept_with_moved_without("--no-atime", &t.dirs, |flag| {
        Tool::new("walk").args(flag).arg(t.src()).expect(0);
    });
}

/// The `noatime_refused` count of a `--json` report.
fn refused(run: &mfu_tests::Run) -> u64 {
    let report: serde_json::Value = serde_json::from_str(run.stdout_str().trim())
        .unwrap_or_else(|e| panic!("{e}: {}", run.stdout_str()));
    report["noatime_refused"]
        .as_u64()
        .unwrap_or_else(|| panic!("no noatime_refused in {report}"))
}

/// As nobody, on root's files: read anyway (exit 0, access times moved), and one warning with
/// the count of files and directories, each counted once (a file in seven chunks over several
/// ranks too).
#[test]
fn files_of_others_are_read_anyway_and_counted_once_in_one_warning() {
    for how in LAUNCHES {
        let t = Tree::new().with_copy("copy");
        let src_tree: Vec<PathBuf> = t
            .all()
            .into_iter()
            .filter(|p| p.starts_with(t.src()))
            .collect();
        let out = t.nobody_out();
        let src_dirs: Vec<PathBuf> = t.dirs[..2].to_vec();
        let chunks = ["--chunksize", "16k"];
        // Each: the tool, its options, its operands, the files whose atimes it moves.
        type Run<'a> = (&'a str, Vec<&'a str>, Vec<PathBuf>, Vec<PathBuf>);
        let runs: [Run; 3] = [
            (
                "cp",
                chunks.to_vec(),
                vec![t.src(), out.join("copy")],
                src_tree.clone(),
            ),
            (
                "cmp",
                chunks.to_vec(),
                vec![t.src(), t.root().join("copy")],
                t.all(),
            ),
            ("walk", Vec::new(), vec![t.src()], src_dirs),
        ];
        for (tool, options, operands, read) in runs {
            age(&t.all());
            let run = launched(Tool::new(tool), how)
                .as_nobody()
                .args(["--noatime", "--json"])
                .args(&options)
                .args(&operands)
                .expect(0);
            let n = read.len();
            assert_eq!(refused(&run), n as u64, "{tool}: {}", run.stderr_str());
            run.stderr_contains(&format!(
                "mfu-rs {tool}: {n} files read without O_NOATIME (not their owner): their \
                 access time may have changed"
            ));
            assert_eq!(
                run.stderr_str().matches("without O_NOATIME").count(),
                1,
                "one warning per run: {}",
                run.stderr_str()
            );
            for (p, a) in read.iter().zip(atimes(&read)) {
                assert!(a > OLD_ATIME, "{tool}: {} was read", p.display());
            }
        }
    }
}

/// As nobody on nobody's own files, `O_NOATIME` is allowed: nothing moves, nothing is counted,
/// no warning.
#[test]
fn own_files_of_an_unprivileged_user_keep_their_atimes_without_a_warning() {
    for how in [0, 2] {
        let t = Tree::new();
        for p in t.all() {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        }
        let out = t.nobody_out();
        age(&t.all());
        let run = launched(Tool::new("cp"), how)
            .as_nobody()
            .args(["--noatime", "--json"])
            .arg(t.src())
            .arg(out.join("copy"))
            .expect(0);
        assert_eq!(refused(&run), 0);
        assert!(
            !run.stderr_str().contains("O_NOATIME"),
            "{}",
            run.stderr_str()
        );
        assert_eq!(atimes(&t.all()), vec![OLD_ATIME; t.all().len()]);
    }
}
