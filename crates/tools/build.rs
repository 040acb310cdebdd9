//! Records the git commit the binary was built from (`mfu-rs --version`), when the sources are
//! a git checkout; `MFU_RS_COMMIT` overrides it (packagers building from a tarball).

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
    println!("cargo:rerun-if-env-changed=MFU_RS_COMMIT");
    let commit = std::env::var("MFU_RS_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
            // Build again when HEAD moves (a commit, a checkout).
            for path in ["HEAD", "packed-refs"] {
                if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", path]) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &head])
                {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            Some(commit)
        })
        .unwrap_or_default();
    println!("cargo:rustc-env=MFU_RS_COMMIT={commit}");
}
