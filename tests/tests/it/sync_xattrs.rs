//! `sync -X`: extended attributes that alone differ (added, changed, removed; an ACL; on files,
//! a directory and a symlink) are fixed without copying data, counted as metadata fixes, and
//! end up as `rsync -aXA` leaves them; without `-X` they are not compared, as before.

use mfu_tests::tree::{self, Compare};
use mfu_tests::Tool;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `N label` count of the `Synced:` (or `Dry run:`) summary line.
fn count(out: &Output, label: &str) -> u64 {
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Synced: ") || l.starts_with("Dry run: "))
        .unwrap_or_else(|| panic!("no summary:\n{stdout}"));
    let at = line
        .find(label)
        .unwrap_or_else(|| panic!("no `{label}` in: {line}"));
    line[..at]
        .trim_end()
        .rsplit([' ', ':', ','].as_ref())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before `{label}` in: {line}"))
}

/// An access ACL (`system.posix_acl_access`, the kernel's binary form): the owner `rw-`, user
/// `uid` `r--`, the group `r--`, mask `r--`, others `r--` — the group bits of a 0644 file stay
/// as they are.
fn acl_granting_read_to(uid: u32) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    let undefined = u32::MAX;
    for (tag, perm, id) in [
        (0x01u16, 6u16, undefined), // ACL_USER_OBJ
        (0x02, 4, uid),             // ACL_USER
        (0x04, 4, undefined),       // ACL_GROUP_OBJ
        (0x10, 4, undefined),       // ACL_MASK
        (0x20, 4, undefined),       // ACL_OTHER
    ] {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

fn remove_xattr(path: &Path, name: &str) {
    rustix::fs::lremovexattr(path, name)
        .unwrap_or_else(|e| panic!("removexattr {} {name}: {e}", path.display()));
}

/// A source tree with xattrs, and a destination synced from it (xattrs travel with new data).
fn synced_pair(base: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (src, dest) = (base.join("src"), base.join("dest"));
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for (name, data) in [("a", "alpha\n"), ("b", "beta\n"), ("c", "gamma\n")] {
        std::fs::write(src.join(name), data).unwrap();
    }
    std::fs::write(src.join("d"), "delta\n").unwrap();
    std::fs::write(src.join("sub/e"), "epsilon\n").unwrap();
    std::os::unix::fs::symlink("a", src.join("link")).unwrap();
    tree::chmod(&src.join("d"), 0o644);
    tree::set_xattr(&src.join("a"), "user.k", b"v1");
    tree::set_xattr(&src.join("b"), "user.k", b"v");
    tree::set_xattr(&src.join("sub"), "user.d", b"1");
    // Linux allows only trusted. and security. attributes on symlinks.
    tree::set_xattr(&src.join("link"), "trusted.t", b"1");
    Tool::new("sync").arg(&src).arg(&dest).expect(0);
    tree::assert_equal_in(
        "the first sync copies xattrs",
        &tree::snapshot(&src),
        &tree::snapshot(&dest),
        Compare::META,
    );
    // Now the xattrs alone change, on both sides (neither data nor mtimes move).
    tree::set_xattr(&src.join("a"), "user.k", b"v2"); // changed
    tree::set_xattr(&dest.join("b"), "user.extra", b"x"); // only DEST has it
    tree::set_xattr(&src.join("c"), "user.new", b"\0binary\xff"); // added
    remove_xattr(&src.join("sub"), "user.d"); // removed, on a directory
    tree::set_xattr(&src.join("link"), "trusted.t", b"2"); // on a symlink
    tree::set_xattr(
        &src.join("d"),
        "system.posix_acl_access",
        &acl_granting_read_to(65534),
    ); // an ACL
    (src, dest)
}

/// The destination paths `-X` fixes in [`synced_pair`].
fn changed(dest: &Path) -> BTreeSet<(String, Vec<u8>)> {
    ["a", "b", "c", "d", "sub", "link"]
        .iter()
        .map(|n| {
            let p = dest.join(n);
            (
                "meta".to_string(),
                p.as_os_str().as_encoded_bytes().to_vec(),
            )
        })
        .collect()
}

fn dryrun_actions(out: &Output) -> BTreeSet<(String, Vec<u8>)> {
    out.stdout
        .split(|&b| b == b'\n')
        .filter_map(|l| {
            let sp = l.iter().position(|&b| b == b' ')?;
            let word = text(&l[..sp]);
            ["create", "update", "delete", "meta", "link"]
                .contains(&word.as_str())
                .then(|| (word, l[sp + 1..].to_vec()))
        })
        .collect()
}

fn inodes(root: &Path) -> Vec<(String, u64)> {
    ["a", "b", "c", "d", "sub/e"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                std::fs::metadata(root.join(n)).unwrap().ino(),
            )
        })
        .collect()
}

#[test]
fn sync_x_fixes_xattr_only_differences_without_copying_data() {
    for launch in ["ranks 1", "ranks 2", "mpi 2"] {
        let tool = || match launch {
            "mpi 2" => Tool::new("sync").mpi(2),
            l => Tool::new("sync").ranks(l[6..].parse().unwrap()),
        };
        let tmp = tempfile::tempdir().unwrap();
        let (src, dest) = synced_pair(tmp.path());
        let before = inodes(&dest);
        // Without -X, xattrs are not compared: nothing to do, and they still differ.
        let plain = tool().arg(&src).arg(&dest).expect(0);
        assert_eq!(count(&plain, " metadata fixed"), 0, "{launch}: {plain:?}");
        assert_eq!(count(&plain, " bytes copied"), 0, "{launch}");
        let a = tree::snapshot(&dest)[&b"a"[..]].xattrs.clone();
        assert_eq!(a[&b"user.k"[..]], b"v1", "{launch}: without -X, left alone");
        // A dry run names exactly the entries whose xattrs differ, and changes nothing.
        let dry = tool()
            .args(["--dryrun", "-X", "all"])
            .arg(&src)
            .arg(&dest)
            .expect(0);
        assert_eq!(dryrun_actions(&dry), changed(&dest), "{launch}: {dry:?}");
        assert_eq!(tree::snapshot(&dest)[&b"a"[..]].xattrs, a, "{launch}");
        // The run fixes them: 6 metadata fixes, no data, the same inodes.
        let fixed = tool().args(["-X", "all"]).arg(&src).arg(&dest).expect(0);
        assert_eq!(count(&fixed, " metadata fixed"), 6, "{launch}: {fixed:?}");
        for label in [" created", " updated", " deleted", " bytes copied"] {
            assert_eq!(count(&fixed, label), 0, "{launch} {label}: {fixed:?}");
        }
        assert_eq!(inodes(&dest), before, "{launch}: no file was copied again");
        tree::assert_equal_in(
            launch,
            &tree::snapshot(&src),
            &tree::snapshot(&dest),
            Compare::META,
        );
        // And a second run finds nothing.
        let again = tool().args(["-X", "all"]).arg(&src).arg(&dest).expect(0);
        assert_eq!(count(&again, " metadata fixed"), 0, "{launch}: {again:?}");
    }
}

/// The same changes (in two copies of the trees, made apart) synced by rsync -aXA (ACLs are
/// xattrs to mfu-rs, a separate option to rsync) and by mfu-rs sync -X all: the same attributes
/// on every entry.
#[test]
fn sync_x_leaves_what_rsync_ax_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dest) = synced_pair(&tmp.path().join("m"));
    let (_, rdest) = synced_pair(&tmp.path().join("r"));
    Tool::new("sync")
        .ranks(2)
        .args(["-X", "all"])
        .arg(&src)
        .arg(&dest)
        .expect(0);
    let mut from = src.as_os_str().to_owned();
    from.push("/");
    let rsync = tree::run_tool("rsync", &[OsStr::new("-aXA"), &from, rdest.as_os_str()]);
    assert!(rsync.status.success(), "rsync: {rsync:?}");
    let (ours, theirs) = (tree::snapshot(&dest), tree::snapshot(&rdest));
    let xattrs = |t: &tree::Tree| -> Vec<_> {
        t.iter()
            .map(|(k, n)| (tree::lossy(k), n.xattrs.clone()))
            .collect()
    };
    assert_eq!(xattrs(&ours), xattrs(&theirs));
}

/// `--contents` compares same-size files by their bytes: an xattr-only difference of such a
/// file is fixed too, once, without rewriting it.
#[test]
fn sync_x_with_contents_fixes_xattrs_of_compared_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dest) = synced_pair(tmp.path());
    let before = inodes(&dest);
    let out = Tool::new("sync")
        .ranks(2)
        .args(["-c", "-X", "all"])
        .arg(&src)
        .arg(&dest)
        .expect(0);
    assert_eq!(count(&out, " metadata fixed"), 6, "{out:?}");
    assert_eq!(count(&out, " updated"), 0, "{out:?}");
    assert_eq!(inodes(&dest), before);
    tree::assert_equal(&tree::snapshot(&src), &tree::snapshot(&dest), Compare::META);
}
