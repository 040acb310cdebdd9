//! The suite wherever the repository is cloned: the tests that run tools as another user
//! (nobody), run again from a copy of the checkout under a directory only root may enter (mode
//! 0700, as `mktemp -d` makes) and a path with a space. They once failed there: nobody could
//! not enter the test's working directory (mpirun gives up) nor run the binary from the clone.
//!
//! The copy holds the checkout's tracked files as they are in the work tree (uncommitted
//! changes included), the two mfu-rs binaries and the built test binary (hard links, or
//! copies across file systems). The test binary runs there with `MFU_TESTS_ROOT` naming the
//! copy, so that every path a test takes (vectors, binaries, its working directory) is the
//! copy's. Nothing is compiled again: building the copy into the checkout's target directory
//! would leave a test binary of the copy's paths where the checkout's next `cargo test` takes
//! it for its own (cargo keys workspace crates by their path relative to the workspace).

use crate::{cargo, mpi_env, run, tempfile_dir};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Copy the checkout at `root` under a private path with a space and run its tests that switch
/// user there, with the binaries of `root`'s debug build.
pub fn check(root: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile_dir("mfu-rs-private-clone")?;
    let private = dir.join("private dir");
    std::fs::create_dir(&private)?;
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))?;
    let clone = private.join("a clone");
    copy_tracked(root, &clone)?;
    let debug = clone.join("target/debug");
    std::fs::create_dir_all(&debug)?;
    for exe in ["mfu-rs", "mfu-rs-mpi"] {
        place(&root.join("target/debug").join(exe), &debug.join(exe))?;
    }
    let it = debug.join("it-tests");
    place(&test_binary(root)?, &it)?;
    let tests = tests_that_switch_user(&clone.join("tests/tests/it"))?;
    anyhow::ensure!(
        !tests.is_empty(),
        "no test in tests/tests/it runs a tool as nobody: the private-clone check would test nothing"
    );
    eprintln!(
        "xtask: {} tests that run tools as nobody, from a copy under {}",
        tests.len(),
        clone.display()
    );
    // As cargo runs it: in the package's directory.
    let mut cmd = Command::new(&it);
    mpi_env(&mut cmd)
        .current_dir(clone.join("tests"))
        .env("MFU_TESTS_ROOT", &clone)
        .env("MFU_RS_BIN", debug.join("mfu-rs"))
        .env("MFU_RS_NOMPI_BIN", root.join("target/nompi/debug/mfu-rs"))
        .arg("--exact")
        .args(&tests);
    let result = run(&mut cmd);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// Put the file `from` at `to`: a hard link, or a copy (with its mode) across file systems.
fn place(from: &Path, to: &Path) -> Result<()> {
    std::fs::hard_link(from, to)
        .or_else(|_| std::fs::copy(from, to).map(drop))
        .with_context(|| format!("place {} at {}", from.display(), to.display()))
}

/// The end-to-end test binary (`tests/tests/it`) of `root`'s debug build, built if it is not.
fn test_binary(root: &Path) -> Result<PathBuf> {
    let out = cargo()
        .current_dir(root)
        .args([
            "test",
            "-p",
            "mfu-tests",
            "--test",
            "it",
            "--no-run",
            "--message-format=json",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("cargo test --no-run")?;
    anyhow::ensure!(out.status.success(), "cargo test --no-run failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"]["name"] == "it")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .context("cargo test --no-run named no executable for the test target `it`")
}

/// Copy every file git tracks in `root`, as the work tree has it, to `to`.
fn copy_tracked(root: &Path, to: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new("git")
        .current_dir(root)
        .args(["ls-files", "-z"])
        .output()
        .context("git ls-files")?;
    anyhow::ensure!(
        out.status.success(),
        "git ls-files failed in {}",
        root.display()
    );
    for rel in out.stdout.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let rel = Path::new(std::ffi::OsStr::from_bytes(rel));
        let (from, dest) = (root.join(rel), to.join(rel));
        // A file deleted in the work tree but not yet from the index is left out, as in a
        // commit of the work tree.
        if std::fs::symlink_metadata(&from).is_err() {
            continue;
        }
        std::fs::create_dir_all(dest.parent().expect("a file has a parent"))?;
        std::fs::copy(&from, &dest).with_context(|| format!("copy {}", from.display()))?;
    }
    Ok(())
}

/// `module::test` names of the tests in `dir` (one module a file) whose body mentions nobody:
/// `Tool::as_nobody`, `nobody_tempdir`, and the modules' own helpers all carry the word.
fn tests_that_switch_user(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.sort();
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
    {
        let module = file.file_stem().expect("a file name").to_string_lossy();
        let text = std::fs::read_to_string(file)?;
        names.extend(
            nobody_tests(&text)
                .into_iter()
                .map(|t| format!("{module}::{t}")),
        );
    }
    Ok(names)
}

/// The names of the `#[test]` functions in `source` whose body mentions nobody.
fn nobody_tests(source: &str) -> Vec<String> {
    source
        .split("\n#[test]\n")
        .skip(1)
        .filter_map(|rest| {
            let start = rest.find("fn ")? + 3;
            let name: String = rest[start..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let body = rest.split("\n}\n").next().unwrap_or(rest);
            body.contains("nobody").then_some(name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_tests_that_mention_nobody_and_no_others() {
        let src = "use x;\n\n#[test]\nfn plain() {\n    run();\n}\n\n#[test]\n#[ignore]\nfn as_other() {\n    Tool::new(\"rm\").as_nobody();\n}\n\nfn helper() {\n    nobody();\n}\n\n#[test]\nfn last() {\n    let t = mfu_tests::nobody_tempdir();\n}\n";
        assert_eq!(nobody_tests(src), ["as_other", "last"]);
    }

    #[test]
    fn the_suite_has_tests_that_switch_user() {
        let found = tests_that_switch_user(&crate::root().join("tests/tests/it")).unwrap();
        assert!(
            found
                .iter()
                .any(|t| t == "sync::delete_is_refused_when_the_source_walk_is_incomplete"),
            "{found:?}"
        );
    }
}
