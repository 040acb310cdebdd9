//! The generator rebuilds the trees of `tests/vectors/`: its manifests equal the stored ones byte
//! for byte, and what is on disk matches them (bytes re-read and hashed, modes, mtimes, link
//! targets, directory mtimes).

use sha2::{Digest, Sha256};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

fn check(seed: u32, ascii: bool, stored: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    let entries = vectree::build(&root, seed, ascii).unwrap();
    let json = vectree::manifest_json(&entries);
    let want = std::fs::read_to_string(vectors().join(stored)).unwrap();
    assert_eq!(json, want, "manifest of seed {seed} differs from {stored}");

    let mut files = 0;
    for e in &entries {
        let p = root.join(&e.path);
        let m = std::fs::symlink_metadata(&p).unwrap();
        match e.kind {
            "f" => {
                files += 1;
                assert!(m.file_type().is_file(), "{}", e.path);
                let bytes = std::fs::read(&p).unwrap();
                assert_eq!(Some(bytes.len() as u64), e.size, "{}", e.path);
                let sha = format!("{:x}", Sha256::digest(&bytes));
                assert_eq!(Some(sha), e.sha256, "{}", e.path);
                let mode = format!("0o{:o}", m.permissions().mode() & 0o7777);
                assert_eq!(Some(mode), e.mode, "{}", e.path);
                assert_eq!(Some(m.mtime() as u64), e.mtime, "{}", e.path);
                assert_eq!(m.mtime_nsec(), 0, "{}", e.path);
            }
            "l" => {
                assert!(m.file_type().is_symlink(), "{}", e.path);
                let target = std::fs::read_link(&p).unwrap();
                assert_eq!(Some(target.to_str().unwrap()), e.target.as_deref());
            }
            "d" => assert!(m.file_type().is_dir(), "{}", e.path),
            k => panic!("unknown kind {k}"),
        }
    }
    assert!(files > 10);
    // Every directory, the root included, has the seed's base time.
    let mut dirs = vec![root.clone()];
    let mut seen = 0;
    while let Some(d) = dirs.pop() {
        let m = std::fs::symlink_metadata(&d).unwrap();
        assert_eq!(
            m.mtime() as u64,
            vectree::base_time(seed),
            "{}",
            d.display()
        );
        seen += 1;
        for c in std::fs::read_dir(&d).unwrap() {
            let c = c.unwrap();
            if c.file_type().unwrap().is_dir() {
                dirs.push(c.path());
            }
        }
    }
    assert!(seen > 5);
}

#[test]
fn seed_1_is_the_tree_of_tree_mfu() {
    check(1, false, "manifest-tree.json");
}

#[test]
fn seed_3_ascii_is_the_tree_of_the_dtar_vector() {
    check(3, true, "manifest-tartree.json");
}

#[test]
fn an_existing_file_is_never_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    let keep = root.join("big/large.bin");
    std::fs::create_dir_all(keep.parent().unwrap()).unwrap();
    std::fs::write(&keep, b"mine").unwrap();
    let err = vectree::build(&root, 1, false).unwrap_err();
    assert_eq!(err.op, "create");
    assert_eq!(err.path, keep);
    assert!(err.to_string().contains("big/large.bin"), "{err}");
    assert_eq!(std::fs::read(&keep).unwrap(), b"mine");
}
