//! Sparse files: holes at the start, in the middle, at the end, everywhere and nowhere, copied
//! by `cp -S` and `sync -S` with the same holes (found with SEEK_DATA/SEEK_HOLE), and, where
//! SEEK_DATA is refused (the test seam `MFU_RS_TEST_NO_SEEK_DATA`, as a file system without
//! it), copied whole with the same bytes. `tar -c` stores sparse files whole, so `tar -x` gives
//! the same bytes without the holes, in both modes; a GNU sparse archive extracts with them.

use mfu_tests::{launches, Tool};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

const M: u64 = 1 << 20;
const SIZE: u64 = 4 * M;

/// (name, data regions): the rest of each 4 MiB file is holes.
const SHAPES: [(&str, &[(u64, u64)]); 5] = [
    ("hole_start", &[(2 * M, 2 * M)]),
    ("hole_middle", &[(0, M), (3 * M, M)]),
    ("hole_end", &[(0, M)]),
    ("all_hole", &[]),
    ("no_hole", &[(0, SIZE)]),
];

fn sparse_tree(src: &Path) {
    std::fs::create_dir_all(src).unwrap();
    for (name, data) in SHAPES {
        let f = std::fs::File::create(src.join(name)).unwrap();
        f.set_len(SIZE).unwrap();
        for &(at, len) in data {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
            f.write_all_at(&bytes, at).unwrap();
        }
        let want: u64 = data.iter().map(|d| d.1).sum();
        assert!(
            allocated(&src.join(name)) <= want + 64 * 1024,
            "this file system allocated the holes of {name}"
        );
    }
}

/// Bytes allocated (`st_blocks` of 512 bytes).
fn allocated(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

/// `copy` holds the bytes of `src`; with `holes`, the same allocation, else all of it.
fn check(what: &str, src: &Path, copy: &Path, holes: bool) {
    for (name, _) in SHAPES {
        let (a, b) = (src.join(name), copy.join(name));
        assert!(
            std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
            "{what}: {name}: other bytes"
        );
        if holes {
            assert_eq!(allocated(&b), allocated(&a), "{what}: {name}: other holes");
        } else {
            assert!(
                allocated(&b) >= SIZE,
                "{what}: {name}: holes without SEEK_DATA"
            );
        }
    }
}

/// A launch with SEEK_DATA refused (`seam`) or not.
fn with_seam(t: Tool, seam: bool) -> Tool {
    if seam {
        t.env("MFU_RS_TEST_NO_SEEK_DATA", "1")
    } else {
        t.env_remove("MFU_RS_TEST_NO_SEEK_DATA")
    }
}

#[test]
fn cp_and_sync_keep_holes_and_copy_whole_where_seek_data_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    sparse_tree(&src);
    for (name, launch) in launches() {
        let tag = name.replace([' ', '-'], "");
        for seam in [false, true] {
            let what = |tool: &str| format!("{tool} -S {name}, SEEK_DATA refused: {seam}");
            let dst = tmp.path().join(format!("cp-{tag}-{seam}"));
            with_seam(launch(Tool::new("cp")), seam)
                .args(["-S", "--chunksize", "1M"])
                .arg(&src)
                .arg(&dst)
                .expect(0);
            check(&what("cp"), &src, &dst, !seam);
            let dst = tmp.path().join(format!("sync-{tag}-{seam}"));
            with_seam(launch(Tool::new("sync")), seam)
                .args(["-S", "--chunksize", "1M"])
                .arg(&src)
                .arg(&dst)
                .expect(0);
            check(&what("sync"), &src, &dst, !seam);
        }
    }
}

#[test]
fn tar_round_trips_sparse_files_whole_and_extracts_gnu_sparse_archives_with_holes() {
    let tmp = tempfile::tempdir().unwrap();
    sparse_tree(&tmp.path().join("src"));
    let src = tmp.path().join("src");
    for (name, launch) in launches() {
        let tag = name.replace([' ', '-'], "");
        for seam in [false, true] {
            let archive = tmp.path().join(format!("{tag}-{seam}.tar"));
            with_seam(launch(Tool::new("tar")), seam)
                .args(["-c", "-k", "1M", "-f"])
                .arg(&archive)
                .arg("src")
                .current_dir(tmp.path())
                .expect(0);
            let out = tmp.path().join(format!("x-{tag}-{seam}"));
            std::fs::create_dir(&out).unwrap();
            with_seam(launch(Tool::new("tar")), seam)
                .args(["-x", "-k", "1M", "-f"])
                .arg(&archive)
                .arg("-C")
                .arg(&out)
                .expect(0);
            // Stored whole: the same bytes, no holes.
            check(
                &format!("tar {name}, seam {seam}"),
                &src,
                &out.join("src"),
                false,
            );
        }
    }
    // GNU tar's sparse archive (pax 1.0): extracted with the holes.
    let gnu = tmp.path().join("gnu.tar");
    let made = std::process::Command::new("tar")
        .args(["--sparse", "--format=pax", "-cf"])
        .arg(&gnu)
        .arg("src")
        .current_dir(tmp.path())
        .status()
        .expect("GNU tar");
    assert!(made.success());
    for (name, launch) in launches() {
        let out = tmp
            .path()
            .join(format!("gnu-{}", name.replace([' ', '-'], "")));
        std::fs::create_dir(&out).unwrap();
        launch(Tool::new("tar"))
            .arg("-xf")
            .arg(&gnu)
            .arg("-C")
            .arg(&out)
            .expect(0);
        check(
            &format!("GNU sparse archive, {name}"),
            &src,
            &out.join("src"),
            true,
        );
    }
}
