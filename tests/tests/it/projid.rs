//! Project IDs (and directories' `PROJINHERIT`) kept by `cp -p`, `sync` and `tar -c`/`-x`, on
//! real file systems: XFS (which keeps project IDs with or without quota accounting) and ext4
//! without the `project` feature (which keeps none: one warning, not an error), each an image
//! mounted from a loop device in a temporary directory and unmounted by a drop guard.
//!
//! Where loop devices or the mounts are unavailable (no privilege, no `mkfs.xfs`), each test
//! says so on stderr (`SKIPPED: ...`) and passes, unless `MFU_RS_REQUIRE_LOOP=1` is set: then
//! it fails with the reason.

use mfu_tests::{launches, Tool};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A file system image mounted from a loop device; unmounted (and its image removed) on drop.
struct Mounted {
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // Lazily, should a rank still hold it: the loop device goes with the last user.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn sh(cmd: &mut Command) -> Result<(), String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!("{cmd:?}: {e}")),
    }
}

/// A `kind` (`xfs` or `ext4`) image of 300 MB made with `mkfs` and mounted with each of
/// `options` in turn (the first that mounts).
fn mount(kind: &str, options: &[&str]) -> Result<Mounted, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let image = tmp.path().join("image");
    let dir = tmp.path().join("mnt");
    std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(300 << 20))
        .map_err(|e| e.to_string())?;
    match kind {
        "xfs" => sh(Command::new("mkfs.xfs").arg("-q").arg(&image))?,
        _ => sh(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image))?,
    }
    let mut last = String::new();
    for o in options {
        match sh(Command::new("mount").args(["-o", o]).arg(&image).arg(&dir)) {
            Ok(()) => return Ok(Mounted { dir, _tmp: tmp }),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// An XFS image (project quota accounting on where the kernel has quotas; XFS keeps project
/// IDs without) and an ext4 image without the `project` feature; `None` after saying why on
/// stderr, or a panic under `MFU_RS_REQUIRE_LOOP=1`.
fn file_systems(test: &str) -> Option<(Mounted, Mounted)> {
    let got =
        mount("xfs", &["loop,prjquota", "loop"]).and_then(|x| Ok((x, mount("ext4", &["loop"])?)));
    match got {
        Ok(pair) => Some(pair),
        Err(why) if std::env::var_os("MFU_RS_REQUIRE_LOOP").is_some_and(|v| v == "1") => {
            panic!("{test}: MFU_RS_REQUIRE_LOOP=1 but loop-mounted file systems are unavailable: {why}")
        }
        Err(why) => {
            eprintln!(
                "SKIPPED: {test}: loop-mounted file systems are unavailable here ({why}); set \
                 MFU_RS_REQUIRE_LOOP=1 to make that a failure"
            );
            None
        }
    }
}

/// `(project ID, PROJINHERIT)` of `path`, as `lsattr -pd` shows them.
fn projid(path: &Path) -> (u32, bool) {
    let out = Command::new("lsattr")
        .arg("-pd")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "lsattr {}: {out:?}", path.display());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    let id = words.next().and_then(|w| w.parse().ok());
    let flags = words.next().unwrap_or("");
    (
        id.unwrap_or_else(|| panic!("lsattr: {text}")),
        flags.contains('P'),
    )
}

fn chattr(path: &Path, args: &[&str]) {
    let out = Command::new("chattr")
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chattr {args:?} {}: {out:?}",
        path.display()
    );
}

/// The source tree, on `fs`: a directory with project 7 that its new entries inherit, a file
/// of project 42 in it, a 3 MiB file of project 43 (several chunks at `--chunksize 1M`), a
/// file of project 0, a symlink (which has none) and a plain subdirectory of project 9.
fn source_tree(fs: &Path) -> PathBuf {
    let src = fs.join("src");
    std::fs::create_dir_all(src.join("d/plain")).unwrap();
    std::fs::write(src.join("d/f"), b"forty-two\n").unwrap();
    std::fs::write(src.join("d/big"), vec![5u8; 3 << 20]).unwrap();
    std::fs::write(src.join("zero"), b"none\n").unwrap();
    std::os::unix::fs::symlink("d/f", src.join("link")).unwrap();
    chattr(&src.join("d"), &["+P", "-p", "7"]);
    chattr(&src.join("d/f"), &["-p", "42"]);
    chattr(&src.join("d/big"), &["-p", "43"]);
    chattr(&src.join("d/plain"), &["-p", "9"]);
    src
}

/// What [`source_tree`] holds, as `copy` must have it.
fn assert_kept(what: &str, copy: &Path) {
    for (rel, want) in [
        ("d", (7, true)),
        ("d/f", (42, false)),
        ("d/big", (43, false)),
        ("d/plain", (9, false)),
        ("zero", (0, false)),
    ] {
        assert_eq!(projid(&copy.join(rel)), want, "{what}: {rel}");
    }
    assert_eq!(
        std::fs::read(copy.join("d/f")).unwrap(),
        b"forty-two\n",
        "{what}"
    );
}

fn warnings(stderr: &str) -> usize {
    stderr.matches("keeps no project IDs").count()
}

#[test]
fn cp_p_keeps_project_ids_and_warns_once_where_the_destination_has_none() {
    let Some((xfs, ext4)) = file_systems("cp -p project IDs") else {
        return;
    };
    let src = source_tree(&xfs.dir);
    for (name, launch) in launches() {
        let tag = name.replace([' ', '-'], "");
        for (fs, other) in [(&xfs.dir, "xfs"), (&ext4.dir, "ext4")] {
            let dst = fs.join(format!("cp-{tag}"));
            let run = launch(Tool::new("cp"))
                .args(["-p", "--chunksize", "1M"])
                .arg(&src)
                .arg(&dst)
                .expect(0);
            let stderr = run.stderr_str();
            if other == "xfs" {
                assert_kept(&format!("cp -p {name}"), &dst);
                assert_eq!(warnings(&stderr), 0, "{stderr}");
            } else {
                // The data is there; the missing project IDs are said once, naming DEST.
                assert_eq!(warnings(&stderr), 1, "cp -p {name} to ext4: {stderr}");
                assert!(stderr.contains(&dst.display().to_string()), "{stderr}");
                assert_eq!(std::fs::read(dst.join("d/f")).unwrap(), b"forty-two\n");
                assert_eq!(projid(&dst.join("d/f")), (0, false));
            }
        }
    }
    // Without -p the copy has what its directory gives.
    let dst = xfs.dir.join("cp-plain");
    Tool::new("cp").arg(&src).arg(&dst).expect(0);
    assert_eq!(projid(&dst.join("d/f")), (0, false));
    assert_eq!(projid(&dst.join("d")), (0, false));
    // A copy of a file of project 0 into a PROJINHERIT directory gets project 0 with -p.
    let inherit = xfs.dir.join("inherit");
    std::fs::create_dir(&inherit).unwrap();
    chattr(&inherit, &["+P", "-p", "11"]);
    Tool::new("cp")
        .arg("-p")
        .arg(src.join("zero"))
        .arg(&inherit)
        .expect(0);
    assert_eq!(projid(&inherit.join("zero")), (0, false));
    Tool::new("cp")
        .arg(src.join("zero"))
        .arg(inherit.join("z2"))
        .expect(0);
    assert_eq!(
        projid(&inherit.join("z2")),
        (11, false),
        "inherited without -p"
    );
}

#[test]
fn sync_fixes_a_differing_project_id_without_copying_data() {
    let Some((xfs, ext4)) = file_systems("sync project IDs") else {
        return;
    };
    let src = source_tree(&xfs.dir);
    for (name, launch) in launches() {
        let tag = name.replace([' ', '-'], "");
        let dst = xfs.dir.join(format!("sync-{tag}"));
        let sync = || {
            launch(Tool::new("sync"))
                .args(["--chunksize", "1M"])
                .arg(&src)
                .arg(&dst)
                .expect(0)
        };
        sync();
        assert_kept(&format!("sync {name}"), &dst);
        // Project IDs changed on DEST only: fixed, the data left where it is.
        use std::os::unix::fs::MetadataExt;
        let inode = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let before = (inode(&dst.join("d/f")), inode(&dst.join("d/big")));
        chattr(&dst.join("d/f"), &["-p", "5"]);
        chattr(&dst.join("d/big"), &["-p", "0"]);
        chattr(&dst.join("d"), &["-P"]);
        let out = sync().stdout_str();
        assert_kept(&format!("sync {name} again"), &dst);
        assert_eq!(
            (inode(&dst.join("d/f")), inode(&dst.join("d/big"))),
            before,
            "sync {name}: data rewritten: {out}"
        );
        assert!(
            out.contains("0 created, 0 updated, 0 deleted, 3 metadata fixed"),
            "sync {name}: {out}"
        );
        // Nothing left to fix.
        let out = sync().stdout_str();
        assert!(out.contains(" 0 metadata fixed"), "sync {name}: {out}");
        assert_kept(&format!("sync {name} a third time"), &dst);
    }
    // To a file system without project IDs: copied, said once.
    let dst = ext4.dir.join("sync");
    let run = Tool::new("sync").arg(&src).arg(&dst).expect(0);
    assert_eq!(warnings(&run.stderr_str()), 1, "{}", run.stderr_str());
    assert_eq!(std::fs::read(dst.join("d/f")).unwrap(), b"forty-two\n");
    // Again: ext4 answers FS_IOC_FSGETXATTR (project 0), so the IDs still differ and the fix
    // is tried, but it can't be made: not counted as fixed (it used to be, on every run).
    for (name, launch) in launches() {
        let run = launch(Tool::new("sync")).arg(&src).arg(&dst).expect(0);
        let (out, err) = (run.stdout_str(), run.stderr_str());
        assert!(
            out.contains("0 created, 0 updated, 0 deleted, 0 metadata fixed"),
            "sync {name} to ext4 again: {out}"
        );
        assert_eq!(warnings(&err), 1, "sync {name} to ext4 again: {err}");
    }
}

#[test]
fn tar_stores_project_ids_and_extract_restores_them() {
    let Some((xfs, ext4)) = file_systems("tar project IDs") else {
        return;
    };
    source_tree(&xfs.dir);
    for (name, launch) in launches() {
        let tag = name.replace([' ', '-'], "");
        let archive = xfs.dir.join(format!("{tag}.tar"));
        launch(Tool::new("tar"))
            .args(["-c", "-k", "1M", "-f"])
            .arg(&archive)
            .arg("src")
            .current_dir(&xfs.dir)
            .expect(0);
        let bytes = std::fs::read(&archive).unwrap();
        let records = |key: &str| {
            bytes
                .windows(key.len())
                .filter(|w| *w == key.as_bytes())
                .count()
        };
        // d, d/f, d/big, d/plain: four records; one PROJINHERIT.
        assert_eq!(records(" MFURS.projid="), 4, "{name}");
        assert_eq!(records(" MFURS.projinherit=1"), 1, "{name}");
        for (fs, kind) in [(&xfs.dir, "xfs"), (&ext4.dir, "ext4")] {
            let out = fs.join(format!("x-{tag}"));
            std::fs::create_dir(&out).unwrap();
            let run = launch(Tool::new("tar"))
                .args(["-x", "-k", "1M", "-f"])
                .arg(&archive)
                .arg("-C")
                .arg(&out)
                .expect(0);
            let stderr = run.stderr_str();
            if kind == "xfs" {
                assert_kept(&format!("tar -x {name}"), &out.join("src"));
                assert_eq!(warnings(&stderr), 0, "{stderr}");
            } else {
                assert_eq!(warnings(&stderr), 1, "tar -x {name} to ext4: {stderr}");
                assert_eq!(std::fs::read(out.join("src/d/f")).unwrap(), b"forty-two\n");
            }
        }
    }
    // A compressed archive is extracted by one rank as it is read: the same.
    let archive = xfs.dir.join("a.tar.gz");
    Tool::new("tar")
        .args(["-c", "-z", "-f"])
        .arg(&archive)
        .arg("src")
        .current_dir(&xfs.dir)
        .expect(0);
    let out = xfs.dir.join("x-gz");
    std::fs::create_dir(&out).unwrap();
    Tool::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&out)
        .expect(0);
    assert_kept("tar -xzf", &out.join("src"));
}
