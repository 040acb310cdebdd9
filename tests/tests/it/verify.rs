//! `--verify` on cp, sync and tar -x: a byte changed in the destination between the write and
//! the check (the test seam `MFU_RS_TEST_CORRUPT_BEFORE_VERIFY`) is caught, named with its
//! offset, exit 1; the file is left without the source's time so a sync copies it again; the
//! report says how the data was read back.

use mfu_tests::{noise, Tool};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const SEAM: &str = "MFU_RS_TEST_CORRUPT_BEFORE_VERIFY";

fn tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("small"), noise(1, 5000)).unwrap();
    std::fs::write(root.join("sub/victim"), noise(2, 300_000)).unwrap();
    // Many 64 KiB chunks over the ranks.
    std::fs::write(root.join("big"), noise(3, (1 << 20) + 777)).unwrap();
}

fn mtime(p: &Path) -> (i64, i64) {
    let m = std::fs::metadata(p).unwrap();
    (m.mtime(), m.mtime_nsec())
}

fn json(run: &mfu_tests::Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout_str()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout_str()))
}

#[test]
fn cp_verify_catches_a_changed_byte_and_sync_copies_the_file_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    tree(&src);
    std::fs::create_dir(&dst).unwrap();
    for (victim, np) in [("victim", 1), ("big", 2)] {
        let dst = dst.join(victim);
        let manifest = tmp.path().join(format!("{victim}.b3"));
        let run = Tool::new("cp")
            .ranks(np)
            .args(["-p", "--verify", "--chunksize", "64K", "--manifest"])
            .arg(&manifest)
            .arg(&src)
            .arg(&dst)
            .env(SEAM, victim)
            .expect(1);
        run.stderr_contains(&format!(
            "verify {}",
            dst.join(if victim == "big" { "big" } else { "sub/victim" })
                .display()
        ));
        run.stderr_contains("read back differ from the source's");
        run.stderr_contains("at offset ");
        // The operation failed: no manifest, and it says so.
        run.stderr_contains("not written");
        assert!(!manifest.exists());
        let rel = if victim == "big" { "big" } else { "sub/victim" };
        // Never the look of a complete copy: not the source's mtime.
        assert_ne!(mtime(&dst.join(rel)), mtime(&src.join(rel)));
        assert_eq!(mtime(&dst.join("small")), mtime(&src.join("small")));
        // A sync without the seam copies that file again (and only it), and verifies it.
        let run = Tool::new("sync")
            .ranks(np)
            .args(["--verify", "--json"])
            .arg(&src)
            .arg(&dst)
            .expect(0);
        let report = json(&run);
        assert_eq!(report["updated"], 1, "{report}");
        assert_eq!(
            std::fs::read(dst.join(rel)).unwrap(),
            std::fs::read(src.join(rel)).unwrap()
        );
    }
}

#[test]
fn sync_and_tar_extract_verify_catch_a_changed_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    tree(&src);
    let dst = tmp.path().join("dst");
    let run = Tool::new("sync")
        .ranks(2)
        .arg("--verify")
        .arg(&src)
        .arg(&dst)
        .env(SEAM, "small")
        .expect(1);
    run.stderr_contains("small: the 5000 bytes at offset 0 read back differ");
    assert_ne!(mtime(&dst.join("small")), mtime(&src.join("small")));
    Tool::new("sync").arg(&src).arg(&dst).expect(0);
    assert_eq!(mtime(&dst.join("small")), mtime(&src.join("small")));

    let archive = tmp.path().join("a.tar");
    Tool::new("tar")
        .args(["-c", "-f"])
        .arg(&archive)
        .arg("src")
        .current_dir(tmp.path())
        .expect(0);
    for np in [1, 3] {
        let out = tmp.path().join(format!("x{np}"));
        std::fs::create_dir(&out).unwrap();
        let run = Tool::new("tar")
            .ranks(np)
            .args(["-x", "--verify", "-k", "64K", "-f"])
            .arg(&archive)
            .arg("-C")
            .arg(&out)
            .env(SEAM, "big")
            .expect(1);
        run.stderr_contains("src/big: verify");
        assert_ne!(mtime(&out.join("src/big")), mtime(&src.join("big")));
        assert_eq!(mtime(&out.join("src/small")), mtime(&src.join("small")));
    }
}

#[test]
fn the_report_says_how_the_data_was_read_back() {
    // The temporary directory's file system (a disk: O_DIRECT, or fadvise where refused),
    // and /dev/shm (memory).
    for base in [std::env::temp_dir(), "/dev/shm".into()] {
        let tmp = tempfile::tempdir_in(&base).unwrap();
        let fs = std::process::Command::new("stat")
            .args(["-f", "--format=%T"])
            .arg(tmp.path())
            .output()
            .unwrap();
        let kind = String::from_utf8_lossy(&fs.stdout).trim().to_string();
        let src = tmp.path().join("src");
        tree(&src);
        let run = Tool::new("cp")
            .ranks(2)
            .args(["--verify", "--json"])
            .arg(&src)
            .arg(tmp.path().join("dst"))
            .expect(0);
        let v = &json(&run)["verify"];
        let total: u64 = ["direct", "dropped", "memory", "cached"]
            .iter()
            .map(|k| v[k].as_u64().unwrap())
            .sum();
        assert!(total >= 3, "{v}");
        let on_disk = kind != "tmpfs" && kind != "ramfs";
        let from_device = v["direct"].as_u64().unwrap() + v["dropped"].as_u64().unwrap();
        if on_disk {
            assert_eq!(from_device, total, "{v}");
        } else {
            assert_eq!(v["memory"].as_u64().unwrap(), total, "{v}");
        }
        assert_eq!(
            v["bytes"].as_u64().unwrap(),
            5000 + 300_000 + (1 << 20) + 777
        );
        let run = Tool::new("cp")
            .args(["--verify", "-v"])
            .arg(&src)
            .arg(tmp.path().join("dst2"))
            .expect(0);
        run.stdout_contains("read back");
    }
}
