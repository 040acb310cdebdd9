//! Tools composed through pipes: `walk -o - | find -i - ... -o - | rm -i -`, the purge of the
//! issue, with one process and with 2 ranks on each side of every pipe.

use mfu_tests::{expect_status, mpi_env, shell_binary, shell_launcher, Tool};
use rustix::fs::{utimensat, AtFlags, Timespec, Timestamps, CWD};
use std::path::Path;
use std::process::{Command, Output};

/// Run `script` as `mfu_tests::shell` does (`$M` the binary, `$R` it under `mpirun -np 2`), but
/// with bash's `set -o pipefail`: a pipeline fails when any of its commands does, so a stage
/// that dies (an `mpirun` that fails to start) is never hidden by the stage after it.
fn shell(script: &str, code: i32) -> Output {
    let mut cmd = Command::new("bash");
    mpi_env(&mut cmd)
        .env("M", shell_binary())
        .env("R", shell_launcher())
        .args(["-c", &format!("set -eo pipefail; {script}")]);
    expect_status(&mut cmd, code)
}

/// The lines of a typed list as mfu-rs writes it, without its header and trailer (checked).
fn typed_lines(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"#mfu-rs typed list v1"), "{text}");
    let n = lines.len() - 2;
    assert_eq!(lines.last(), Some(&&*format!("#mfu-rs end {n}")), "{text}");
    lines[1..=n].iter().map(|l| l.to_string()).collect()
}

/// `lines` as a typed list: header, `line\n` each, trailer.
fn typed_list(lines: &[u8], count: usize) -> Vec<u8> {
    [
        &b"#mfu-rs typed list v1\n"[..],
        lines,
        format!("#mfu-rs end {count}\n").as_bytes(),
    ]
    .concat()
}

/// Set a path's modification (and access) time to `days` days ago.
fn age(path: &Path, days: i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let t = Timespec {
        tv_sec: now - days * 86_400,
        tv_nsec: 0,
    };
    utimensat(
        CWD,
        path,
        &Timestamps {
            last_access: t,
            last_modification: t,
        },
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

/// A tree with old files (400 days), recent files (10 days) and directories of both ages.
/// Returns the old and the recent files.
fn purge_tree(root: &Path) -> (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    let (mut old, mut new) = (Vec::new(), Vec::new());
    for d in 0..4 {
        let dir = root.join(format!("run {d}"));
        std::fs::create_dir_all(dir.join("out")).unwrap();
        for f in 0..6 {
            let p = dir.join("out").join(format!("f{f}.dat"));
            std::fs::write(&p, vec![b'x'; f * 100]).unwrap();
            if (d + f) % 3 == 0 {
                age(&p, 10);
                new.push(p);
            } else {
                age(&p, 400);
                old.push(p);
            }
        }
        // Old directories: find matches them too, and rm removes only the empty ones.
        age(&dir.join("out"), 400);
        age(&dir, 400);
    }
    (old, new)
}

#[test]
fn purge_pipeline_removes_old_files_through_pipes() {
    for (walk, find, rm) in [("$M", "$M", "$M"), ("$R", "$R", "$R"), ("$R", "$M", "$R")] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("scratch");
        let (old, new) = purge_tree(&root);
        let out = shell(
            &format!(
                "{walk} walk -q -o - '{}' | {find} find -i - --type f --mtime +180 -o - | {rm} rm -i -",
                root.display()
            ),
            0,
        );
        for p in &old {
            assert!(!p.exists(), "{walk}|{find}|{rm}: {} survived", p.display());
        }
        for p in &new {
            assert!(
                p.exists(),
                "{walk}|{find}|{rm}: {} was removed",
                p.display()
            );
        }
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains(&format!("{} files", old.len())),
            "rm reports what it removed: {said}"
        );
    }
}

#[test]
fn purge_pipeline_through_list_files_and_pipes_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("scratch");
    purge_tree(&root);
    let (files, piped) = (tmp.path().join("purge.txt"), tmp.path().join("piped.txt"));
    shell(
        &format!(
            "$R walk -q -o {list} '{root}'; $R find -i {list} --mtime +180 -o {files} -t; \
             $M walk -q -o - '{root}' | $R find -i - --mtime +180 -o - | $M walk -q -i - -t -o {piped}",
            list = tmp.path().join("list.mfu").display(),
            root = root.display(),
            files = files.display(),
            piped = piped.display(),
        ),
        0,
    );
    let sorted = |p: &Path| {
        let mut lines = typed_lines(&std::fs::read_to_string(p).unwrap());
        lines.sort();
        lines
    };
    let (a, b) = (sorted(&files), sorted(&piped));
    assert!(a.len() > 10, "{a:?}");
    assert_eq!(a, b, "a purge list through files equals one through pipes");
}

#[test]
fn sync_and_cmp_lists_on_stdout_carry_nothing_else_even_with_v() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::create_dir_all(&dst).unwrap();
    for f in ["a", "d/b", "d/c"] {
        std::fs::write(src.join(f), f).unwrap();
    }
    let got = tmp.path().join("got.txt");
    // sync -v prints chunk and buffer lines from the copy engine: they must not land in the
    // list that `-o EXPR:-` writes to stdout.
    shell(
        &format!(
            "$M sync -v -o EXIST=ONLY_SRC:- '{}' '{}' | $M walk -q -i - -t -o {}",
            src.display(),
            dst.display(),
            got.display()
        ),
        0,
    );
    let mut listed = typed_lines(&std::fs::read_to_string(&got).unwrap());
    listed.sort();
    let want: Vec<String> = ["a|F", "d/b|F", "d/c|F", "d|D"]
        .iter()
        .map(|r| format!("{}/{r}", src.display()))
        .collect();
    assert_eq!(listed, want);
    // Now equal: cmp -v -o ...:- gives an empty list and its report on stderr.
    let out = shell(
        &format!(
            "$R cmp -v -o EXIST=DIFFER:- '{}' '{}' | $M walk -i - -t -o {}",
            src.display(),
            dst.display(),
            got.display()
        ),
        0,
    );
    assert_eq!(std::fs::read(&got).unwrap(), typed_list(b"", 0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Result: equal"));
}

#[test]
fn lost_stdout_is_a_failure_and_so_is_a_closed_pipe() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir_all(tree.join("d")).unwrap();
    // Far more output than a pipe holds (64 KiB): `walk -p` meets the closed pipe for sure,
    // whenever `head` exits.
    for i in 0..2000 {
        std::fs::write(tree.join(format!("d/f{i:060}")), "x").unwrap();
    }
    // A full device behind stdout: the paths are lost, so the exit status must say so.
    let out = shell(&format!("$M find '{}' > /dev/full", tree.display()), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("write standard output"));
    // (Under mpirun the ranks write into mpirun's forwarding pipe, and a failure of mpirun's
    // own write is mpirun's to report: Open MPI exits 0 there, so that case is not tested.)
    // `| head -1`: the paths after the first line met a closed pipe, the output is cut: exit 1,
    // as the list writers (`-o -`) do (more tools in cli_edges.rs).
    let rc = tmp.path().join("rc");
    shell(
        &format!(
            "{{ rc=0; $M walk -p '{}' || rc=$?; echo $rc > {}; }} | head -1 > /dev/null",
            tree.display(),
            rc.display()
        ),
        0,
    );
    assert_eq!(std::fs::read_to_string(&rc).unwrap().trim(), "1");
}

/// A list written to standard output travels to rank 0 in pieces (`MFU_RS_TEST_PIPE_PIECE_BYTES`
/// makes them ~100 bytes, so this list of 150 entries takes dozens): rank 0 writes them rank
/// after rank as they come. The bytes are those of the list file, in v4 and in text, at 1, 2
/// and 4 thread ranks and under mpirun -np 2, from a list file and from standard input.
#[test]
fn lists_larger_than_one_piece_pass_through_pipes_whole_and_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    for d in 0..5 {
        let dir = root.join(format!("dir {d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..30 {
            // Names of different lengths: v4 records are as wide as the longest path.
            std::fs::write(dir.join(format!("f{f}{}", "x".repeat(f % 7))), b"data").unwrap();
        }
    }
    let v4 = tmp.path().join("list.v4");
    let walked = Tool::new("walk")
        .args(["-q", "-o", v4.to_str().unwrap(), root.to_str().unwrap()])
        .run();
    assert!(walked.status.success(), "{walked:?}");
    let v4_bytes = std::fs::read(&v4).unwrap();
    let mut text_bytes = Vec::new();
    for d in 0..5 {
        for f in 0..30 {
            let p = root.join(format!("dir {d}/f{f}{}", "x".repeat(f % 7)));
            text_bytes.extend_from_slice(format!("{}|F\n", p.display()).as_bytes());
        }
    }
    let text_bytes = typed_list(&text_bytes, 150);
    let text = tmp.path().join("list.txt");
    std::fs::write(&text, &text_bytes).unwrap();
    for (list, want) in [(&v4, &v4_bytes), (&text, &text_bytes)] {
        for launch in ["1", "2", "4", "mpi 2"] {
            let tool = |t: Tool| match launch {
                "mpi 2" => t.mpi(2),
                n => t.ranks(n.parse().unwrap()),
            };
            let from_file = tool(Tool::new("find"))
                .args(["-i", list.to_str().unwrap(), "-o", "-"])
                .env("MFU_RS_TEST_PIPE_PIECE_BYTES", "100")
                .run();
            let from_stdin = tool(Tool::new("find"))
                .args(["-i", "-", "-o", "-"])
                .stdin(want.clone())
                .env("MFU_RS_TEST_PIPE_PIECE_BYTES", "100")
                .run();
            for (how, out) in [("file", from_file), ("stdin", from_stdin)] {
                assert!(out.status.success(), "{launch} {how}: {out:?}");
                assert!(
                    out.stdout == *want,
                    "{} from {how} at {launch}: got\n{}\nwant\n{}",
                    list.display(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(want)
                );
            }
        }
    }
}

/// A list read from standard input reaches every rank through rank 0, which spools it and
/// serves each rank the bytes of its share in pieces (here of at most 100 bytes): every format
/// gives exactly what the same list read from a file gives, at 1, 2, 4 and 16 thread ranks and
/// under mpirun -np 2, and a damaged list the same refusal, naming standard input.
#[test]
fn lists_from_stdin_read_as_lists_from_files_at_any_rank_count() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    let mut paths = Vec::new();
    for d in 0..4 {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..25 {
            let p = dir.join(format!("f{f}{}", "y".repeat(f % 5)));
            std::fs::write(&p, b"x").unwrap();
            paths.push(p);
        }
    }
    let v4 = tmp.path().join("list.v4");
    Tool::new("walk")
        .args(["-q", "-o", v4.to_str().unwrap(), root.to_str().unwrap()])
        .expect(0);
    let joined = |end: &str| -> Vec<u8> {
        paths
            .iter()
            .flat_map(|p| format!("{}{end}", p.display()).into_bytes())
            .collect()
    };
    let v4_bytes = std::fs::read(&v4).unwrap();
    let lists = [
        ("v4", v4_bytes.clone()),
        ("typed text", typed_list(&joined("|F\n"), paths.len())),
        ("plain text", joined("\n")),
        ("NUL", joined("\0")),
        // Cut inside its records: refused.
        ("cut v4", v4_bytes[..v4_bytes.len() - 30].to_vec()),
    ];
    let file = tmp.path().join("list");
    for (format, bytes) in lists {
        std::fs::write(&file, &bytes).unwrap();
        let want = Tool::new("find")
            .args(["-i", file.to_str().unwrap(), "-o", "-"])
            .run();
        for launch in ["1", "2", "4", "16", "mpi 2"] {
            let tool = match launch {
                "mpi 2" => Tool::new("find").mpi(2),
                n => Tool::new("find").ranks(n.parse().unwrap()),
            };
            let got = tool
                .args(["-i", "-", "-o", "-"])
                .stdin(bytes.clone())
                .env("MFU_RS_TEST_PIPE_PIECE_BYTES", "100")
                .run();
            let what = format!("{format} at {launch}");
            assert_eq!(got.code(), want.code(), "{what}: {got:?}");
            assert!(got.stdout == want.stdout, "{what}: {got:?}");
            if want.code() != Some(0) {
                got.stderr_contains("- (standard input)");
                got.stderr_contains("truncated");
            }
        }
    }
}

/// Issue 31 item 20: a stage that dies never hands the next one a well-formed shorter list. The
/// flake: one `mpirun` of `walk -o - | find -i - -o - | rm -i -` failed to start (Open MPI's
/// session directory race), `rm` read an empty stdin as an empty list, removed nothing, and the
/// pipeline exited 0. Now nothing at all on `-i -` is refused, and a list cut anywhere, even
/// between two entries, is refused: a text list by its trailer, a v4 list by its header's
/// count. Exit 2, nothing removed, at 1 process and under mpirun -np 2.
#[test]
fn a_list_from_a_writer_that_died_is_refused_and_nothing_is_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("scratch");
    let (old, new) = purge_tree(&root);
    let all: Vec<_> = old.iter().chain(&new).collect();
    let intact = |what: &str| {
        for p in &all {
            assert!(p.exists(), "{what}: {} was removed", p.display());
        }
    };
    for rm in ["$M", "$R"] {
        // Nothing at all: the writer never started.
        let out = shell(&format!("true | {rm} rm -i -"), 2);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no list came through"),
            "{out:?}"
        );
        intact(&format!("{rm}: empty stdin"));
    }
    for (how, walk) in [("text", "-l -o -"), ("v4", "-o -")] {
        let list = tmp.path().join(format!("{how}.list"));
        shell(
            &format!(
                "$M walk -q {walk} '{}' > '{}'",
                root.display(),
                list.display()
            ),
            0,
        );
        let bytes = std::fs::read(&list).unwrap();
        // Every cut at the end of a line (a text list cut between two entries is well formed
        // but for its trailer), and a few inside records.
        let mut cuts: Vec<usize> = (0..bytes.len())
            .filter(|&i| bytes[i] == b'\n')
            .map(|i| i + 1)
            .filter(|&n| n < bytes.len())
            .collect();
        cuts.extend([1, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1]);
        for (i, cut) in cuts.into_iter().enumerate() {
            let rm = if i % 2 == 0 { "$M" } else { "$R" };
            let out = shell(
                &format!("head -c {cut} '{}' | {rm} rm -i -", list.display()),
                2,
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("- (standard input)"),
                "{how} cut at {cut}: {err}"
            );
            intact(&format!("{how} list cut at {cut} of {}, {rm}", bytes.len()));
        }
    }
}
