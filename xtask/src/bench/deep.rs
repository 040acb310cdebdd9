//! The deep tree (issue 17): a chain of `levels` directories, each holding one small file,
//! whose paths grow far beyond `PATH_MAX`; made and compared through directory descriptors
//! (`mkdirat`, `openat`), since no path to the bottom can be given to the kernel.

use anyhow::{ensure, Context, Result};
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Bytes of the file at each level.
const FILE_BYTES: usize = 100;
/// Name of the file at each level.
const FILE: &CStr = c"f";

fn open_dir(at: Option<&OwnedFd>, name: &CStr) -> Result<OwnedFd> {
    let dirfd = at.map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
    // SAFETY: a valid descriptor (or AT_FDCWD) and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dirfd,
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    ensure!(
        fd >= 0,
        "open directory {name:?}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a descriptor just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).context("a path with a NUL byte")
}

/// Make the deep tree at `root` (which must not exist): `levels` nested directories named
/// `name`, each with a file `f` of [`FILE_BYTES`] bytes (its level, as text, repeated).
pub fn make(root: &Path, levels: usize, name: &str) -> Result<()> {
    std::fs::create_dir(root).with_context(|| format!("mkdir {}", root.display()))?;
    let name = CString::new(name)?;
    let mut dir = open_dir(None, &cpath(root)?)?;
    for level in 0..levels {
        write_file(&dir, level)?;
        // SAFETY: a valid descriptor and a NUL-terminated name.
        let r = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) };
        ensure!(
            r == 0,
            "mkdir level {level} of {}: {}",
            root.display(),
            std::io::Error::last_os_error()
        );
        dir = open_dir(Some(&dir), &name)?;
    }
    write_file(&dir, levels)
}

fn write_file(dir: &OwnedFd, level: usize) -> Result<()> {
    // SAFETY: a valid descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            FILE.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o644,
        )
    };
    ensure!(
        fd >= 0,
        "create the file of level {level}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a descriptor just opened, owned by nobody else.
    let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let bytes: Vec<u8> = format!("{level} ")
        .bytes()
        .cycle()
        .take(FILE_BYTES)
        .collect();
    use std::io::Write;
    (&f).write_all(&bytes)
        .with_context(|| format!("write the file of level {level}"))
}

/// The entries of the directory `dir` (`.` and `..` left out), sorted, with their `stat`.
fn entries(dir: &OwnedFd) -> Result<Vec<(Vec<u8>, libc::stat)>> {
    // fdopendir takes the descriptor: give it a duplicate.
    let dup = dir.try_clone()?;
    let raw = std::os::fd::IntoRawFd::into_raw_fd(dup);
    // SAFETY: a descriptor we own, handed over to the DIR stream (closed by closedir).
    let d = unsafe { libc::fdopendir(raw) };
    ensure!(
        !d.is_null(),
        "fdopendir: {}",
        std::io::Error::last_os_error()
    );
    let mut out = Vec::new();
    loop {
        // SAFETY: d is an open DIR stream.
        let e = unsafe { libc::readdir(d) };
        if e.is_null() {
            break;
        }
        // SAFETY: readdir returned a valid entry with a NUL-terminated name.
        let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) };
        if name == c"." || name == c".." {
            continue;
        }
        // SAFETY: an all-zero stat is a valid value of this plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor, name and out-pointer.
        let r = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: d is an open DIR stream, closed once.
            unsafe { libc::closedir(d) };
            anyhow::bail!("stat {name:?}: {e}");
        }
        out.push((name.to_bytes().to_vec(), st));
    }
    // SAFETY: d is an open DIR stream, closed once.
    unsafe { libc::closedir(d) };
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn read_file(dir: &OwnedFd, name: &[u8]) -> Result<Vec<u8>> {
    let c = CString::new(name)?;
    // SAFETY: a valid descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    ensure!(fd >= 0, "open {c:?}: {}", std::io::Error::last_os_error());
    // SAFETY: a descriptor just opened, owned by nobody else.
    let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut v = Vec::new();
    use std::io::Read;
    (&f).read_to_end(&mut v)?;
    Ok(v)
}

/// Compare the deep trees `a` and `b` level by level: the same names and types, the same
/// bytes in the files, the same modes and file mtimes (seconds: a GNU archive keeps no more); an error names the first difference.
pub fn deep_same(a: &Path, b: &Path) -> Result<()> {
    let mut da = open_dir(None, &cpath(a)?)?;
    let mut db = open_dir(None, &cpath(b)?)?;
    let mut level = 0usize;
    loop {
        let (ea, eb) = (entries(&da)?, entries(&db)?);
        let names = |e: &[(Vec<u8>, libc::stat)]| -> Vec<Vec<u8>> {
            e.iter().map(|x| x.0.clone()).collect()
        };
        ensure!(
            names(&ea) == names(&eb),
            "level {level}: entries differ ({} and {})",
            ea.len(),
            eb.len()
        );
        let mut next = None;
        for ((name, sa), (_, sb)) in ea.iter().zip(&eb) {
            let kind = sa.st_mode & libc::S_IFMT;
            ensure!(
                kind == sb.st_mode & libc::S_IFMT && sa.st_mode == sb.st_mode,
                "level {level}: {}: type or mode differs",
                String::from_utf8_lossy(name)
            );
            if kind == libc::S_IFDIR {
                next = Some(name.clone());
            } else if kind == libc::S_IFREG {
                ensure!(
                    sa.st_mtime == sb.st_mtime && read_file(&da, name)? == read_file(&db, name)?,
                    "level {level}: {}: contents or mtime differ",
                    String::from_utf8_lossy(name)
                );
            }
        }
        let Some(sub) = next else { return Ok(()) };
        let c = CString::new(sub)?;
        da = open_dir(Some(&da), &c)?;
        db = open_dir(Some(&db), &c)?;
        level += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deep_tree_beyond_path_max_is_made_and_compared() {
        let t = tempfile::tempdir().unwrap();
        // 600 levels of 9-byte names: 6,000-byte paths at the bottom.
        make(&t.path().join("a"), 600, "ddddddddd").unwrap();
        deep_same(&t.path().join("a"), &t.path().join("a")).unwrap();
        // One level less: the trees differ (at the bottom, or sooner when the clock ticked
        // between the two makes and the mtimes differ).
        make(&t.path().join("c"), 599, "ddddddddd").unwrap();
        assert!(deep_same(&t.path().join("a"), &t.path().join("c")).is_err());
    }
}
