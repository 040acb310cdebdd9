//! Records the git commit the binary was built from (`mfu-rs --version`), when the sources are
//! a git checkout; `MFU_RS_COMMIT` overrides it (packagers building from a tarball).
//!
//! Links the front binary `mfu-rs` position-dependent (`-no-pie`) on Linux: as a PIE its
//! start-up applies about 16,000 relative relocations and copies the pages they touch, about
//! 0.5 ms of every run (a walk of a small tree takes a few ms; find starts in about as much).
//! `MFU_RS_PIE=1` keeps it a PIE (address-space randomisation of the executable itself, for
//! sites that require it). `mfu-rs-mpi`, started by launchers, stays a PIE.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=MFU_RS_PIE");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu && std::env::var("MFU_RS_PIE").as_deref() != Ok("1") {
        // The objects stay position-independent; only the link resolves their addresses.
        println!("cargo:rustc-link-arg-bin=mfu-rs=-no-pie");
    }
    println!("cargo:rerun-if-env-changed=MFU_RS_COMMIT");
    let commit = std::env::var("MFU_RS_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
            // Build again when HEAD moves (a commit, a checkout). Only files that exist are
            // watched: cargo takes a missing one as always changed, and a repository without
            // packed refs (or a branch only packed) rebuilt the crate on every cargo command.
            let mut watched = vec![
                ("HEAD".to_string(), false),
                ("packed-refs".to_string(), false),
            ];
            // A branch only packed gets its own file at its next commit: the directory it
            // appears in is watched instead.
            watched.extend(git(&["symbolic-ref", "-q", "HEAD"]).map(|r| (r, true)));
            for (path, or_its_directory) in &watched {
                if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", path]) {
                    let p = std::path::PathBuf::from(p);
                    let at = if p.exists() {
                        Some(p.as_path())
                    } else if *or_its_directory {
                        p.parent()
                    } else {
                        None
                    };
                    if let Some(at) = at.filter(|a| a.exists()) {
                        println!("cargo:rerun-if-changed={}", at.display());
                    }
                }
            }
            Some(commit)
        })
        .unwrap_or_default();
    println!("cargo:rustc-env=MFU_RS_COMMIT={commit}");
}
