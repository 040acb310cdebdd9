//! Command-line edges refused before any work (exit 2, nothing done): thread ranks beyond the
//! bound, `rm` of `.` or `..`, an empty name in any tool, an output file that cannot be created.

use mfu_tests::{bin, expect_status, mfu, mpirun};
use std::path::Path;
use std::process::Command;

/// A small tree: `DIR/d/f{0..4}` and `DIR/d/sub/g`.
fn small_tree(dir: &Path) {
    std::fs::create_dir_all(dir.join("d/sub")).unwrap();
    for i in 0..5 {
        std::fs::write(dir.join(format!("d/f{i}")), format!("{i}\n")).unwrap();
    }
    std::fs::write(dir.join("d/sub/g"), b"g\n").unwrap();
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn thread_ranks_are_bounded_to_256() {
    let tmp = tempfile::tempdir().unwrap();
    small_tree(tmp.path());
    let d = tmp.path().join("d");
    let out = expect_status(mfu(&["--ranks", "100000", "walk"]).arg(&d), 2);
    assert!(stderr(&out).contains("1..=256"), "{}", stderr(&out));
    expect_status(mfu(&["walk"]).arg(&d).env("MFU_RANKS", "100000"), 2);
    expect_status(mfu(&["--ranks", "0", "walk"]).arg(&d), 2);
    expect_status(mfu(&["--ranks", "3", "walk", "-q"]).arg(&d), 0);
}

#[test]
fn rm_refuses_dot_and_dotdot_and_removes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    // Deep enough that even a wrong removal of `..` stays inside the temporary directory.
    let cwd = tmp.path().join("top/mid/cwd");
    small_tree(&cwd);
    std::fs::write(cwd.join("other"), b"o").unwrap();
    for dryrun in [true, false] {
        for operands in [
            &["."][..],
            &[".."],
            &["./"],
            &["d/."],
            &["d/.."],
            &["d/./"],
            &["other", "d/."],
        ] {
            let mut cmd = mfu(&["rm", "-q"]);
            if dryrun {
                cmd.arg("--dryrun");
            }
            cmd.args(operands).current_dir(&cwd);
            let out = expect_status(&mut cmd, 2);
            assert!(
                stderr(&out).contains("refusing to remove '.' or '..' directory"),
                "{operands:?}: {}",
                stderr(&out)
            );
            assert!(
                out.stdout.is_empty(),
                "{operands:?}: a dry run listed something"
            );
            assert!(cwd.join("d/sub/g").is_file() && cwd.join("other").is_file());
        }
    }
    // Names that only contain dots are not `.`.
    std::fs::write(cwd.join("..."), b"x").unwrap();
    expect_status(mfu(&["rm", "-q", "...", "./d"]).current_dir(&cwd), 0);
    assert!(!cwd.join("...").exists() && !cwd.join("d").exists());
}

#[test]
fn an_empty_name_is_a_usage_error_in_every_tool() {
    let tmp = tempfile::tempdir().unwrap();
    small_tree(tmp.path());
    let before = std::fs::metadata(tmp.path().join("d")).unwrap();
    let cases: &[&[&str]] = &[
        &["walk", ""],
        &["walk", "-o", "", "d"],
        &["find", "", "--print"],
        &["find", "d", "-o", ""],
        &["rm", "--dryrun", ""],
        &["chmod", "-m", "777", ""],
        &["dup", ""],
        &["du", ""],
        &["du", "--svg", "", "d"],
        &["du", "--html", "", "d"],
        &["cmp", "", "d"],
        &["cmp", "d", ""],
        &["cp", "", "copy"],
        &["cp", "d", ""],
        &["sync", "", "copy"],
        &["sync", "d", ""],
        &["tar", "-c", "-f", "", "d"],
        &["tar", "-c", "-f", "a.tar", ""],
        &["stripe", ""],
        &["reln", "", "/new", "d"],
        &["filemaker", ""],
        &["bz2", "-z", ""],
        &["bcast", "", "copy"],
    ];
    for args in cases {
        let out = expect_status(mfu(args).current_dir(tmp.path()), 2);
        assert!(
            stderr(&out).contains("empty") && !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let after = std::fs::metadata(tmp.path().join("d")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        before.mode(),
        after.mode(),
        "chmod '' changed the current directory"
    );
    let mut left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["d"], "something was created");
}

/// The output-file cases: tool arguments with `OUT` standing for the output file.
const OUTPUT_CASES: &[&[&str]] = &[
    &["walk", "-o", "OUT", "d"],
    &["find", "d", "--type", "f", "-o", "OUT"],
    &["dup", "-o", "OUT", "d"],
    &["rm", "-o", "OUT", "d"],
    &["cmp", "-o", "EXIST=DIFFER:OUT", "d", "d"],
    &["sync", "-o", "EXIST=ONLY_SRC:OUT", "d", "copy"],
    &["tar", "-c", "-f", "OUT", "d"],
    &["du", "--svg", "OUT", "d"],
    &["du", "--html", "OUT", "d"],
];

fn run_output_case(cmd: &mut Command, dir: &Path, args: &[&str], out_file: &Path) -> String {
    let out_arg = out_file.to_str().unwrap();
    let args: Vec<String> = args.iter().map(|a| a.replace("OUT", out_arg)).collect();
    let out = expect_status(cmd.args(&args).current_dir(dir), 2);
    let err = stderr(&out);
    assert!(
        err.contains(out_arg) && err.contains("nothing done"),
        "{args:?}: {err}"
    );
    // Nothing was done: no summary, the tree is whole, no destination appeared.
    assert!(
        out.stdout.is_empty(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        dir.join("d/sub/g").is_file(),
        "{args:?}: the tree was changed"
    );
    assert!(!dir.join("copy").exists(), "{args:?}: sync went ahead");
    err
}

#[test]
fn an_output_file_that_cannot_be_created_is_refused_before_the_work() {
    let tmp = tempfile::tempdir().unwrap();
    small_tree(tmp.path());
    let missing = tmp.path().join("nodir/out.list");
    let a_dir = tmp.path().join("d/sub");
    let under_a_file = tmp.path().join("d/f0/out.list");
    for args in OUTPUT_CASES {
        let err = run_output_case(&mut mfu(&[]), tmp.path(), args, &missing);
        assert!(err.contains("No such file or directory"), "{args:?}: {err}");
        let err = run_output_case(&mut mfu(&[]), tmp.path(), args, &a_dir);
        assert!(err.contains("is a directory"), "{args:?}: {err}");
        let err = run_output_case(&mut mfu(&[]), tmp.path(), args, &under_a_file);
        assert!(err.contains("Not a directory"), "{args:?}: {err}");
    }
}

#[test]
fn an_output_file_that_cannot_be_created_is_refused_at_np_2_with_one_message() {
    let tmp = tempfile::tempdir().unwrap();
    small_tree(tmp.path());
    let missing = tmp.path().join("nodir/out.list");
    for args in [OUTPUT_CASES[0], OUTPUT_CASES[3]] {
        let err = run_output_case(&mut mpirun(2, &bin()), tmp.path(), args, &missing);
        assert_eq!(err.matches("nothing done").count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn a_reader_that_exits_early_makes_every_printing_tool_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir(&tree).unwrap();
    // Far more output than a pipe holds (64 KiB): the writer meets the closed pipe for sure.
    let long = "n".repeat(150);
    for i in 0..1000 {
        std::fs::write(tree.join(format!("{long}{i}")), b"").unwrap();
    }
    let t = tree.display();
    for cmd in [
        format!("walk -p {t}"),
        format!("find {t} --print"),
        format!("find {t} --print0"),
        format!("rm --dryrun {t}"),
        format!("walk -o - {t}"),
        format!("find {t} --type f -o -"),
    ] {
        let rc = tmp.path().join("rc");
        let out = mfu_tests::shell(
            &format!(
                "{{ rc=0; $M {cmd} || rc=$?; echo $rc > {}; }} | head -c 100 > /dev/null",
                rc.display()
            ),
            0,
        );
        let err = stderr(&out);
        assert_eq!(
            std::fs::read_to_string(&rc).unwrap().trim(),
            "1",
            "{cmd}: {err}"
        );
        assert!(err.contains("Broken pipe"), "{cmd}: {err}");
    }
    assert!(
        tree.join(format!("{long}0")).exists(),
        "rm --dryrun removed something"
    );
}

#[test]
fn a_skipped_entry_is_not_success() {
    // A device node copied by a user without the privilege to make one is skipped (GNU cp
    // fails on it too): the user asked for it and it is not there, so exit 1, named.
    let tmp = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"data").unwrap();
    let dev = src.join("null");
    let made = Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(made.success(), "mknod (the tests run as root)");
    let mut cmd = Command::new("setpriv");
    mfu_tests::clean_env(&mut cmd)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin())
        .args(["cp"])
        .arg(&src)
        .arg(tmp.path().join("dst"));
    let out = expect_status(&mut cmd, 1);
    let err = stderr(&out);
    assert!(err.contains("null") && err.contains("skipped"), "{err}");
    assert_eq!(std::fs::read(tmp.path().join("dst/f")).unwrap(), b"data");
}
