//! The tar differential test: what mfu-rs does with every archive of a fixed corpus, and the
//! exact bytes `mfu-rs tar -c` writes for fixed trees, against a golden file made by the code
//! before tar headers moved to the `tar` crate (issue 32). Any change in a listing, an
//! extracted tree, a refusal or an archive byte shows as a diff of `tests/corpus/tar/golden.txt`.
//!
//! The corpus: `tests/corpus/tar/*.tar` (GNU tar, bsdtar and Python archives, hand-made hostile
//! ones and seeded mutations: see its `make.py`), the header unit tests' fixtures
//! (`crates/tools/src/tar/testdata/`), the dtar vector, and the archives mfu-rs itself writes
//! here (plain, gzip, bzip2, zstd; 1 and 3 ranks), whole and cut. For each: `tar -t`, `tar -tv`,
//! `tar -x` at 1 and 3 ranks (exit code, output, the extracted tree: names, types, modes,
//! owners, sizes, mtimes, link counts, link targets, content digests).
//!
//! Regenerate the golden file (only on the code it pins, never to make a change pass):
//! `MFU_BLESS=1 cargo test -p mfu-tests --test it -- tar_corpus::`. Needs root (owners).

use mfu_tests::Tool;
use std::ffi::CString;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// FNV-1a, 64 bits: a stable digest of contents (no hashing crate in the test harness).
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Bytes as one printable line: `\n`, `\\` and bytes outside ASCII printables escaped.
fn esc(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(b as char),
            _ => write!(s, "\\x{b:02x}").unwrap(),
        }
    }
    s
}

/// A tool's output made comparable between runs: the work directory as `$T`, the timing and
/// rate at the end of a summary line dropped.
fn normalize(out: &[u8], work: &Path) -> Vec<String> {
    let work = work.as_os_str().as_bytes();
    let mut lines = Vec::new();
    for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let mut l = Vec::new();
        let mut i = 0;
        while i < line.len() {
            if line[i..].starts_with(work) {
                l.extend_from_slice(b"$T");
                i += work.len();
            } else {
                l.push(line[i]);
                i += 1;
            }
        }
        let text = esc(&l);
        // "... in 0.037 s (81 B/s)...": the time and the rate vary from run to run.
        let text = match text.find(" in ") {
            Some(at) if text[at + 4..].starts_with(|c: char| c.is_ascii_digit()) => {
                match text[at..].find("/s)") {
                    Some(end) => format!("{}{}", &text[..at], &text[at + end + 3..]),
                    None => text,
                }
            }
            _ => text,
        };
        lines.push(pin_index_time(text));
    }
    lines
}

/// A `tar -tv` line of an index member (made by the run, with its time) without its time.
fn pin_index_time(line: String) -> String {
    if !line.ends_with(".dtaridx") || !line.starts_with(['-', 'h']) {
        return line;
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 6 {
        return line;
    }
    format!(
        "{} {} {} <date> <time> {}",
        words[0],
        words[1],
        words[2],
        words[5..].join(" ")
    )
}

/// `bytes` (a tar stream) with the mtime of its index member's header blocks set to 0 and
/// their checksums made again: tar -c stamps that member with the time of the run.
fn pin_index_mtime(bytes: &mut [u8]) {
    for block in bytes.chunks_exact_mut(512) {
        let name = block[..100].split(|&b| b == 0).next().unwrap_or(&[]);
        if &block[257..262] != b"ustar" || !name.ends_with(b".dtaridx") {
            continue;
        }
        block[136..148].copy_from_slice(b"00000000000\0");
        block[148..156].fill(b' ');
        let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
        block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    }
}

/// The tar stream inside `archive` (decompressed by the reference tool of its compression).
fn tar_stream(archive: &Path, flags: &[&str]) -> Vec<u8> {
    let tool = match flags.first() {
        Some(&"-z") => "gzip",
        Some(&"-j") => "bzip2",
        Some(&"--zstd") => "zstd",
        _ => return std::fs::read(archive).unwrap_or_default(),
    };
    let out = std::process::Command::new(tool)
        .arg("-dc")
        .arg(archive)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert!(out.status.success(), "{tool} -dc {}", archive.display());
    out.stdout
}

/// One line per entry under `root` (recursively, sorted by name): type, mode, owner, size,
/// mtime, link count, and the content digest, link target or device numbers.
fn tree(root: &Path, out: &mut String) {
    // Directories an extraction makes for entries the archive lacks get the time of the run.
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        - 3600;
    let mut stack = vec![PathBuf::new()];
    let mut rows = Vec::new();
    while let Some(rel) = stack.pop() {
        let Ok(dir) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in dir.flatten() {
            let rel = rel.join(e.file_name());
            let path = root.join(&rel);
            let md = std::fs::symlink_metadata(&path).unwrap();
            let ft = md.file_type();
            let (kind, what) = if ft.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                ('l', format!("-> {}", esc(target.as_os_str().as_bytes())))
            } else if ft.is_dir() {
                stack.push(rel.clone());
                ('d', String::new())
            } else if ft.is_file() {
                let data = std::fs::read(&path).unwrap();
                ('-', format!("{:016x}", digest(&data)))
            } else {
                use std::os::unix::fs::FileTypeExt;
                let k = if ft.is_fifo() {
                    'p'
                } else if ft.is_char_device() {
                    'c'
                } else {
                    'b'
                };
                (k, format!("dev {:x}", md.rdev()))
            };
            let size = if kind == '-' { md.size() } else { 0 };
            // (and the index member of an archive made by this run, which carries its time).
            let mtime = if md.mtime() >= started {
                "now".to_string()
            } else {
                format!("{}.{:09}", md.mtime(), md.mtime_nsec())
            };
            rows.push(format!(
                "  {} {kind} {:o} {}:{} {size} {mtime} n{} {what}",
                esc(rel.as_os_str().as_bytes()),
                md.permissions().mode() & 0o7777,
                md.uid(),
                md.gid(),
                md.nlink(),
            ));
        }
    }
    rows.sort();
    for r in rows {
        out.push_str(&r);
        out.push('\n');
    }
}

/// Appends what a run gave: its exit code, its output lines.
fn record(out: &mut String, what: &str, run: &mfu_tests::Run, work: &Path) {
    writeln!(out, " {what}: exit {:?}", run.code()).unwrap();
    for l in normalize(&run.output.stdout, work) {
        writeln!(out, "  out {l}").unwrap();
    }
    let mut err = normalize(&run.output.stderr, work);
    // Ranks report in the order they finish.
    err.sort();
    for l in err {
        writeln!(out, "  err {l}").unwrap();
    }
}

/// `tar -t`, `tar -tv` and `tar -x` (1 and 3 ranks) of the archive `bytes`, recorded.
/// (The length of compressed archives of this run is left out: it varies with the time stamped
/// in their index member.)
fn read_back(out: &mut String, label: &str, bytes: &[u8], show_len: bool) {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let archive = w.join("a.tar");
    std::fs::write(&archive, bytes).unwrap();
    if show_len {
        writeln!(out, "== {label} ({} bytes)", bytes.len()).unwrap();
    } else {
        writeln!(out, "== {label}").unwrap();
    }
    let tool = |args: &[&std::ffi::OsStr]| {
        Tool::new("tar")
            .env("TZ", "UTC")
            .env("LC_ALL", "C")
            .current_dir(w)
            .args(args)
            .run()
    };
    let a = archive.as_os_str();
    record(out, "-t", &tool(&["-tf".as_ref(), a]), w);
    record(out, "-tv", &tool(&["-tvf".as_ref(), a]), w);
    for (ranks, dir) in [("1", "x1"), ("3", "x3")] {
        let dest = w.join(dir);
        std::fs::create_dir(&dest).unwrap();
        let run = tool(&[
            "--ranks".as_ref(),
            ranks.as_ref(),
            "-xf".as_ref(),
            a,
            "-C".as_ref(),
            dest.as_os_str(),
        ]);
        record(out, &format!("-x ranks {ranks}"), &run, w);
        tree(&dest, out);
    }
}

fn set_time(path: &Path, sec: i64, nsec: i64) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    let t = libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    };
    // SAFETY: a valid C path and two timespecs.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            [t, t].as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    assert_eq!(rc, 0, "utimensat {}", path.display());
}

fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // SAFETY: valid C strings and a value buffer of the given length.
    let rc = unsafe {
        libc::setxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(
        rc,
        0,
        "setxattr {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// The tree `tar -c` archives: every header feature a tree can ask for, with fixed contents,
/// modes, owners and times.
fn make_tree(root: &Path) -> PathBuf {
    let t = root.join("c");
    let p = |rel: &[u8]| t.join(std::ffi::OsStr::from_bytes(rel));
    std::fs::create_dir_all(&t).unwrap();
    let deep = [&b"b".repeat(120)[..], b"/", &b"c".repeat(120)].concat();
    std::fs::create_dir_all(p(&deep)).unwrap();
    std::fs::create_dir(p(b"empty")).unwrap();
    let files: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"f".to_vec(), b"plain file\n".to_vec()),
        (b"a".repeat(150), b"long name\n".to_vec()),
        (
            [&deep[..], b"/", &b"e".repeat(60)].concat(),
            b"over 255\n".to_vec(),
        ),
        (b"bad\xff\xfename".to_vec(), b"not utf-8\n".to_vec()),
        (b"new\nline|pipe and space".to_vec(), b"odd\n".to_vec()),
        (
            "h\u{e9}llo w\u{f6}rld".as_bytes().to_vec(),
            b"utf-8\n".to_vec(),
        ),
        (b"old".to_vec(), b"before 1970\n".to_vec()),
        (b"future".to_vec(), b"after 2^33\n".to_vec()),
        (b"biguid".to_vec(), b"owner over 2^21\n".to_vec()),
        (b"setuid".to_vec(), b"#!/bin/sh\n".to_vec()),
        (b"xattrs".to_vec(), b"attributes\n".to_vec()),
        (b"empty-file".to_vec(), Vec::new()),
    ];
    for (name, data) in &files {
        std::fs::write(p(name), data).unwrap();
    }
    // 5 MiB, mostly holes (tar -c stores it whole), with data at both ends and in the middle.
    let sparse = std::fs::File::create(p(b"sparse")).unwrap();
    sparse.set_len(5 << 20).unwrap();
    use std::os::unix::fs::FileExt;
    sparse.write_all_at(b"start", 0).unwrap();
    sparse.write_all_at(&[b'm'; 3000], 2 << 20).unwrap();
    sparse.write_all_at(b"end", (5 << 20) - 3).unwrap();
    drop(sparse);
    std::fs::hard_link(p(b"f"), p(b"hard")).unwrap();
    std::fs::hard_link(p(b"a".repeat(150).as_slice()), p(b"hard-to-long")).unwrap();
    symlink("T".repeat(200), p(b"longlink")).unwrap();
    symlink(std::ffi::OsStr::from_bytes(b"\xffbin/x"), p(b"binlink")).unwrap();
    symlink("f", p(b"sym")).unwrap();
    let fifo = CString::new(p(b"fifo").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o640) }, 0);
    std::fs::set_permissions(p(b"setuid"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    std::fs::set_permissions(p(b"empty"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::set_permissions(p(b"f"), std::fs::Permissions::from_mode(0o640)).unwrap();
    set_xattr(&p(b"xattrs"), "user.plain", b"value");
    set_xattr(&p(b"xattrs"), "user.binary", b"\x00\xff\n=");
    // Owners and times last, children before their directory.
    let mut all = Vec::new();
    let mut stack = vec![t.clone()];
    while let Some(d) = stack.pop() {
        all.push(d.clone());
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                all.push(e.path());
            }
        }
    }
    all.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    for path in &all {
        chown(path, 0, 0);
        set_time(path, 1_600_000_000, 0);
    }
    chown(&p(b"biguid"), 3_000_000_000, 3_000_000_001);
    set_time(&p(b"old"), -1_000_000, 500);
    set_time(&p(b"future"), (1 << 34) + 5, 0);
    set_time(&p(b"sym"), 1_600_000_000, 123_456_789);
    set_time(&t, 1_600_000_000, 0);
    t
}

fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "tar"))
        .collect();
    v.sort();
    v
}

/// The whole report: the corpus read back, then `tar -c` of the fixed tree.
fn report() -> String {
    // SAFETY: getuid has no preconditions.
    assert_eq!(
        unsafe { libc::getuid() },
        0,
        "the tar corpus test needs root (owners)"
    );
    let root = mfu_tests::root();
    let mut out = String::new();
    let mut sources = corpus_files(&root.join("tests/corpus/tar"));
    sources.extend(corpus_files(&root.join("crates/tools/src/tar/testdata")));
    sources.push(mfu_tests::vector("tartree.dtar.tar"));
    for path in &sources {
        let label = path.strip_prefix(&root).unwrap().display().to_string();
        read_back(&mut out, &label, &std::fs::read(path).unwrap(), true);
    }

    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    make_tree(w);
    let modes: [(&str, &[&str]); 6] = [
        ("plain", &[]),
        ("plain xattrs", &["--preserve-xattrs"]),
        ("gzip", &["-z"]),
        ("bzip2", &["-j"]),
        ("zstd", &["--zstd"]),
        ("gzip xattrs", &["-z", "--preserve-xattrs"]),
    ];
    for (name, flags) in modes {
        for ranks in ["1", "3"] {
            let archive = w.join(format!("out-{}-{ranks}.tar", name.replace(' ', "-")));
            let run = Tool::new("tar")
                .env("TZ", "UTC")
                .current_dir(w)
                .args(["--ranks", ranks, "-c"])
                .args(flags)
                .arg("-f")
                .arg(&archive)
                .arg("c")
                .run();
            let label = format!("tar -c {name} at {ranks} ranks");
            writeln!(out, "== {label}").unwrap();
            record(&mut out, "-c", &run, w);
            // The tar stream's bytes (the compressed ones follow from them: the codecs are
            // not what this test pins), the index member's time set aside.
            let mut stream = tar_stream(&archive, flags);
            pin_index_mtime(&mut stream);
            writeln!(
                out,
                " tar stream {} bytes, digest {:016x}",
                stream.len(),
                digest(&stream)
            )
            .unwrap();
            let plain = flags.is_empty() || flags == ["--preserve-xattrs"];
            let bytes = if plain {
                stream
            } else {
                std::fs::read(&archive).unwrap()
            };
            read_back(&mut out, &format!("{label}, read back"), &bytes, plain);
            if name == "plain" {
                // Cut at an entry's boundary halfway, and without its end blocks.
                let half = bytes.len() / 2 / 512 * 512;
                read_back(
                    &mut out,
                    &format!("{label}, cut at {half}"),
                    &bytes[..half],
                    true,
                );
                let end = bytes.len().saturating_sub(1024);
                read_back(
                    &mut out,
                    &format!("{label}, without end blocks"),
                    &bytes[..end],
                    true,
                );
            }
        }
    }
    out
}

#[test]
fn the_corpus_lists_extracts_and_refuses_and_tar_c_writes_as_the_golden_file_says() {
    let golden = mfu_tests::root().join("tests/corpus/tar/golden.txt");
    let got = report();
    if std::env::var_os("MFU_BLESS").is_some() {
        std::fs::write(&golden, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden)
        .unwrap_or_else(|e| panic!("{}: {e} (make it with MFU_BLESS=1)", golden.display()));
    if got != want {
        let saved = std::env::temp_dir().join("tar-corpus-got.txt");
        std::fs::write(&saved, &got).unwrap();
        let mut diff = String::new();
        let (g, w): (Vec<_>, Vec<_>) = (got.lines().collect(), want.lines().collect());
        let mut section = "";
        for i in 0..g.len().max(w.len()) {
            let (a, b) = (g.get(i).copied(), w.get(i).copied());
            if let Some(s) = b.filter(|l| l.starts_with("== ")) {
                section = s;
            }
            if a != b {
                writeln!(
                    diff,
                    "{section}\n  line {}: golden {b:?}\n  now    {a:?}",
                    i + 1
                )
                .unwrap();
                if diff.len() > 4000 {
                    break;
                }
            }
        }
        panic!(
            "the tar corpus differs from {} (whole output in {}):\n{diff}",
            golden.display(),
            saved.display()
        );
    }
}
