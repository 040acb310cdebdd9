//! Output files (manifests, lists, archives) that must not lie inside a tree the run writes.
//!
//! `sync --manifest d/plain s d` would rename its manifest over a file it had just synced (or
//! `--delete` would remove a list written before the sync, tar -x a member would replace it,
//! rm would remove it with its tree): an output inside a tree being written or removed is
//! refused before anything is done (exit 2, both paths named), as cp refuses to copy a
//! directory into itself. Outputs inside a tree that is
//! only read are left alone, as GNU cp, rsync and tar do (tar -c skips its own archive in the
//! tree it archives, see `tar::create`).
//!
//! Paths are compared as the file system resolves them: the deepest existing ancestor through
//! `realpath` (symlinks, `..`), the components that do not exist yet appended as they are. An
//! output's own last component is not followed: it is replaced by a rename, never written
//! through a symlink.

use flist::path::{as_path, basename, display, is_prefix, normalize, parent};
use std::os::unix::ffi::OsStringExt;

/// What a stale temporary `s` (a `what` an earlier killed run left) is to the user: its
/// removal, or why it could not be removed.
pub(crate) fn stale_note(s: &flist::atomic::Stale, what: &str) -> String {
    let path = flist::path::display(&s.path);
    match &s.removed {
        Ok(()) => format!("removed {path}, the {what} of an earlier run that was killed"),
        Err(e) => format!("remove {path}, the {what} of an earlier run that was killed: {e}"),
    }
}

/// `path` absolute (relative to the current directory), resolved as far as it exists: its
/// deepest existing ancestor canonicalised, the rest appended. With `keep_last`, the last
/// component is appended as it is, unresolved (an output's name).
pub fn resolve(path: &[u8], keep_last: bool) -> Vec<u8> {
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let abs = normalize(path, &cwd);
    let (mut head, last) = match keep_last && abs != b"/" {
        true => (parent(&abs).to_vec(), Some(basename(&abs).to_vec())),
        false => (abs.clone(), None),
    };
    // Components below the deepest existing ancestor, innermost first.
    let mut missing: Vec<Vec<u8>> = last.into_iter().collect();
    loop {
        match std::fs::canonicalize(as_path(&head)) {
            Ok(real) => {
                let mut out = real.into_os_string().into_vec();
                for c in missing.iter().rev() {
                    if out != b"/" {
                        out.push(b'/');
                    }
                    out.extend_from_slice(c);
                }
                return out;
            }
            Err(_) if head != b"/" => {
                missing.push(basename(&head).to_vec());
                head = parent(&head).to_vec();
            }
            Err(_) => return abs,
        }
    }
}

/// Refuse (the message names both paths) when one of `outputs` — (option, path as given) —
/// lies inside one of `trees` — (what it is, path as given) — or is one of them. `-` (standard
/// output) is no file. Nothing is created or changed.
pub fn refuse_inside(outputs: &[(&str, &[u8])], trees: &[(&str, &[u8])]) -> Result<(), String> {
    /// (what, as given, resolved, its (device, inode)).
    type Tree<'a> = (&'a str, &'a [u8], Vec<u8>, Option<(u64, u64)>);
    let trees: Vec<Tree<'_>> = trees
        .iter()
        .map(|&(what, path)| {
            let real = resolve(path, false);
            let id = id_of(&real);
            (what, path, real, id)
        })
        .collect();
    for &(option, out) in outputs {
        if out == b"-" || out.is_empty() {
            continue;
        }
        let real = resolve(out, true);
        // The directories the output would be in, by identity too: the tree mounted a
        // second time elsewhere (a bind mount) has other paths.
        let mut above = Vec::new();
        let mut dir = parent(&real).to_vec();
        loop {
            above.extend(id_of(&dir));
            if dir == b"/" {
                break;
            }
            dir = parent(&dir).to_vec();
        }
        for (what, tree, tree_real, tree_id) in &trees {
            let same_dir = tree_id.is_some_and(|id| above.contains(&id));
            if is_prefix(tree_real, &real) || same_dir {
                return Err(format!(
                    "{option} {} lies inside the {what} {}, which this run changes: the \
                     output and the tree's files could destroy each other (refused, nothing \
                     done; put the output outside the tree)",
                    display(out),
                    display(tree)
                ));
            }
        }
    }
    Ok(())
}

/// The (device, inode) of the directory or file at `path` (`None`: it can't be stat'ed).
fn id_of(path: &[u8]) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(as_path(path))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn outputs_inside_a_tree_are_found_through_symlinks_and_missing_parents() {
        let tmp = tempfile::tempdir().unwrap();
        let t = std::fs::canonicalize(tmp.path()).unwrap();
        let p = |s: &str| [t.as_os_str().as_bytes(), b"/", s.as_bytes()].concat();
        std::fs::create_dir_all(t.join("d/sub")).unwrap();
        std::fs::create_dir(t.join("out")).unwrap();
        std::os::unix::fs::symlink(t.join("d/sub"), t.join("link")).unwrap();
        std::os::unix::fs::symlink(t.join("out/m"), t.join("d/m-link")).unwrap();
        let dest = [("destination", &p("d")[..])];
        let inside = |o: &[u8]| refuse_inside(&[("--manifest", o)], &dest).is_err();
        assert!(inside(&p("d/plain")));
        assert!(inside(&p("d")), "the tree itself");
        assert!(
            inside(&p("d/new/deeper/m")),
            "under directories not made yet"
        );
        assert!(
            inside(&p("link/m")),
            "through a symlink to a directory of the tree"
        );
        assert!(inside(&p("out/../d/m")));
        // The name itself is replaced by a rename, not written through.
        assert!(inside(&p("d/m-link")));
        assert!(!inside(&p("out/m")));
        assert!(!inside(&p("dx")), "a sibling that shares a prefix");
        assert!(!inside(b"-"), "standard output");
        // A destination that does not exist yet.
        let new = [("destination", &p("new/tree")[..])];
        assert!(refuse_inside(&[("-o", &p("new/tree/l"))], &new).is_err());
        assert!(refuse_inside(&[("-o", &p("new/l"))], &new).is_ok());
        let e = refuse_inside(&[("--manifest", &p("d/plain"))], &dest).unwrap_err();
        assert!(e.contains("d/plain") && e.contains("destination"), "{e}");
    }

    /// The tree mounted a second time (a bind mount: other paths, the same directories) is
    /// the same tree. Needs root, as the fault tests.
    #[test]
    fn an_output_in_a_bind_mount_of_the_tree_is_inside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let t = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(t.join("d/sub")).unwrap();
        std::fs::create_dir(t.join("again")).unwrap();
        let mount = |args: &[&std::ffi::OsStr]| {
            let ok = std::process::Command::new(args[0])
                .args(&args[1..])
                .status()
                .unwrap()
                .success();
            assert!(ok, "{args:?} (needs root)");
        };
        mount(&[
            "mount".as_ref(),
            "--bind".as_ref(),
            t.join("d").as_os_str(),
            t.join("again").as_os_str(),
        ]);
        let again = [t.as_os_str().as_bytes(), b"/again/sub/m"].concat();
        let d = [t.as_os_str().as_bytes(), b"/d"].concat();
        let inside = refuse_inside(&[("--manifest", &again)], &[("destination", &d)]);
        let beside = [t.as_os_str().as_bytes(), b"/m"].concat();
        let outside = refuse_inside(&[("--manifest", &beside)], &[("destination", &d)]);
        mount(&["umount".as_ref(), t.join("again").as_os_str()]);
        assert!(inside.is_err());
        assert!(outside.is_ok());
    }
}
