//! mpiFileUtils behaviours that scripts depend on (issue 19 item 7), checked against what the C
//! tools do: dtar's names for absolute paths inside the current directory.

use mfu_tests::Tool;
use std::process::Command;

/// The member names GNU tar lists in `archive`, sorted, without the dtar index member.
fn gnu_names(archive: &std::path::Path) -> Vec<String> {
    let out = Command::new("tar")
        .arg("-tf")
        .arg(archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.ends_with(".dtaridx"))
        .map(|l| l.trim_end_matches('/').to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn tar_stores_absolute_paths_inside_the_current_directory_relative_to_it_as_dtar() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("abs/path");
    std::fs::create_dir_all(base.join("dir/sub")).unwrap();
    std::fs::write(base.join("dir/sub/f"), b"f\n").unwrap();
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let dir = base.join("dir");
    for np in [1, 2] {
        // Inside the current directory: `dir/...`, as dtar.
        let a = tmp.path().join(format!("in{np}.tar"));
        Tool::new("tar")
            .np(np)
            .args(["-c", "-f"])
            .arg(&a)
            .arg(&dir)
            .current_dir(&base)
            .run()
            .assert_status(0);
        assert_eq!(gnu_names(&a), ["dir", "dir/sub", "dir/sub/f"], "np {np}");
        // Inside the -C directory: relative to it.
        let c = tmp.path().join(format!("c{np}.tar"));
        Tool::new("tar")
            .np(np)
            .args(["-c", "-f"])
            .arg(&c)
            .arg("-C")
            .arg(&base)
            .arg(base.join("dir/sub"))
            .current_dir(&other)
            .run()
            .assert_status(0);
        assert_eq!(gnu_names(&c), ["dir/sub", "dir/sub/f"], "np {np}");
        // Outside it: GNU tar's rule, the leading `/` stripped.
        let b = tmp.path().join(format!("out{np}.tar"));
        Tool::new("tar")
            .np(np)
            .args(["-c", "-f"])
            .arg(&b)
            .arg(&dir)
            .current_dir(&other)
            .run()
            .assert_status(0);
        let stored = dir.to_str().unwrap().trim_start_matches('/').to_string();
        let want = [
            stored.clone(),
            format!("{stored}/sub"),
            format!("{stored}/sub/f"),
        ];
        assert_eq!(gnu_names(&b), want, "np {np}");
    }
}
