//! What an installation relies on: `--version` names the commit, the MPI library and the
//! features on every name; `mfu-rs man` and `mfu-rs completions` come from the same clap
//! definitions as `--help`; `dcp1` still reaches cp.

use mfu_tests::{bin, expect_status, mfu, nompi_bin};
use std::process::Command;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn version_names_the_commit_the_mpi_library_and_the_features() {
    // The front binary does not link MPI: it asks mfu-rs-mpi, which names the library.
    let text = stdout(&expect_status(&mut mfu(&["--version"]), 0));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("mfu-rs 0."), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("commit: ")), "{text}");
    let mpi = lines.iter().find(|l| l.starts_with("MPI: ")).expect(&text);
    assert!(
        mpi.contains("Open MPI") || mpi.contains("MPICH"),
        "the library by name: {text}"
    );
    assert!(text.contains("features: mpi"), "{text}");
    // Every tool answers it, under every name.
    let cp = stdout(&expect_status(&mut mfu(&["cp", "--version"]), 0));
    assert!(cp.contains("MPI: "), "{cp}");
    // Built without MPI, it says so.
    let mut nompi = Command::new(nompi_bin());
    let text = stdout(&expect_status(nompi.arg("--version"), 0));
    assert!(text.contains("MPI: none"), "{text}");
    assert!(text.contains("features: none"), "{text}");
}

#[test]
fn every_mpifileutils_name_answers_version_and_help_and_dcp1_copies() {
    let tmp = tempfile::tempdir().unwrap();
    let list = stdout(&expect_status(&mut mfu(&["man", "--list"]), 0));
    let names: Vec<&str> = list.lines().flat_map(|l| l.split_whitespace()).collect();
    for want in [
        "walk", "dwalk", "dcp", "dcp1", "dsync", "dtar", "dbz2", "dbcast",
    ] {
        assert!(names.contains(&want), "{want} in {list}");
    }
    for name in &names {
        let link = tmp.path().join(name);
        std::os::unix::fs::symlink(bin(), &link).unwrap();
        let v = stdout(&expect_status(Command::new(&link).arg("--version"), 0));
        assert!(v.contains("commit: "), "{name} --version: {v}");
        expect_status(Command::new(&link).arg("--help"), 0);
    }
    // `dcp1` is cp: as a link and as a tool name.
    std::fs::write(tmp.path().join("f"), b"data\n").unwrap();
    expect_status(
        Command::new(tmp.path().join("dcp1"))
            .arg(tmp.path().join("f"))
            .arg(tmp.path().join("g")),
        0,
    );
    assert_eq!(std::fs::read(tmp.path().join("g")).unwrap(), b"data\n");
    expect_status(
        mfu(&["dcp1"])
            .arg(tmp.path().join("f"))
            .arg(tmp.path().join("h")),
        0,
    );
    assert_eq!(std::fs::read(tmp.path().join("h")).unwrap(), b"data\n");
}

#[test]
fn man_pages_document_every_option_of_the_help() {
    let page = stdout(&expect_status(&mut mfu(&["man", "dcp"]), 0));
    assert!(page.starts_with(".ie") || page.contains(".TH"), "{page}");
    assert!(page.contains(".TH mfu-rs-cp 1"), "{page}");
    for option in ["preserve", "chunksize", "exclude", "json"] {
        assert!(
            page.contains(&format!("\\-\\-{option}")),
            "--{option} in the page"
        );
    }
    let main = stdout(&expect_status(&mut mfu(&["man"]), 0));
    assert!(main.contains(".TH mfu-rs 1"), "{main}");
    let out = expect_status(&mut mfu(&["man", "nosuchtool"]), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no tool named nosuchtool"));
}

#[test]
fn completions_parse_and_complete_a_tools_options() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, function) in [("mfu-rs", "_mfu__rs"), ("dcp", "_dcp")] {
        let script = stdout(&expect_status(
            &mut mfu(&["completions", "bash", "--name", name]),
            0,
        ));
        let file = tmp.path().join(name);
        std::fs::write(&file, &script).unwrap();
        expect_status(Command::new("bash").arg("-n").arg(&file), 0);
        assert!(script.contains(function), "{name}: {script}");
    }
    // bash really completes `dcp --pre` to `--preserve`.
    let probe = format!(
        "source {} && COMP_WORDS=(dcp --pre) && COMP_CWORD=1 && _dcp dcp --pre dcp && echo \"${{COMPREPLY[@]}}\"",
        tmp.path().join("dcp").display()
    );
    let out = stdout(&expect_status(Command::new("bash").arg("-c").arg(probe), 0));
    assert_eq!(out.trim(), "--preserve");
    for shell in ["zsh", "fish"] {
        let script = stdout(&expect_status(&mut mfu(&["completions", shell]), 0));
        assert!(script.contains("mfu-rs"), "{shell}");
    }
    expect_status(&mut mfu(&["completions", "tcsh"]), 2);
}

#[test]
fn timestamps_start_error_and_progress_lines_as_in_mpifileutils() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let stamped = |line: &str| {
        let b = line.as_bytes();
        b.len() > 22 && b[0] == b'[' && b[11] == b'T' && &b[20..22] == b"] "
    };
    // An item that failed: `[2026-11-26T04:12:13] mfu-rs rm: stat ...`.
    let out = expect_status(mfu(&["rm", "--timestamps"]).arg(&missing), 1);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = err.lines().find(|l| l.contains("stat ")).expect(&err);
    assert!(
        stamped(line) && line[22..].starts_with("mfu-rs rm: stat "),
        "{err}"
    );
    // The environment variable does the same; without either, no time.
    let out = expect_status(mfu(&["rm"]).arg(&missing).env("MFU_TIMESTAMPS", "1"), 1);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.lines().all(stamped), "{err}");
    let out = expect_status(mfu(&["rm"]).arg(&missing).env("MFU_TIMESTAMPS", "0"), 1);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.starts_with("mfu-rs rm: "), "{err}");
    // Progress lines too.
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for i in 0..2000 {
        std::fs::write(src.join(format!("f{i}")), b"x").unwrap();
    }
    let out = expect_status(
        mfu(&["cp", "--timestamps", "--progress", "0.0001"])
            .arg(&src)
            .arg(tmp.path().join("dst")),
        0,
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let progress: Vec<&str> = err.lines().filter(|l| l.contains("Copied")).collect();
    assert!(!progress.is_empty(), "a progress line: {err}");
    assert!(progress.iter().all(|l| stamped(l)), "{err}");
}

#[test]
fn verbose_runs_name_their_ranks_in_the_right_number() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"x").unwrap();
    let walked = |ranks: &str| {
        let out = expect_status(mfu(&["--ranks", ranks, "walk", "-v"]).arg(&src), 0);
        stdout(&out)
    };
    assert!(
        walked("1").starts_with("Walked 2 items by 1 rank in "),
        "{}",
        walked("1")
    );
    assert!(
        walked("3").starts_with("Walked 2 items by 3 ranks in "),
        "{}",
        walked("3")
    );
    // Without -v the line is mpiFileUtils' own.
    let out = stdout(&expect_status(mfu(&["walk"]).arg(&src), 0));
    assert!(out.starts_with("Walked 2 items in "), "{out}");
    let out = expect_status(mfu(&["cp", "-v"]).arg(&src).arg(tmp.path().join("dst")), 0);
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(", 1 rank\n"), "{text}");
    assert!(!text.contains("1 ranks"), "{text}");
}
