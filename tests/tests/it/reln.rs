//! `mfu-rs reln` end to end: a tree is moved with `mv`, then the links that pointed into it are
//! rewritten, absolute and relative (`-r`), at 1, 2 and 4 ranks; targets elsewhere, relative
//! targets and the `/a/b` vs `/a/bc` prefix trap stay; names with spaces and non-UTF-8 bytes
//! work; `-p` keeps times; owners are kept; lists, dry runs, failures and usage errors.

use mfu_tests::{bin, expect_status, mfu, mpirun, Tool};
use rustix::fs::{AtFlags, Timespec, Timestamps, CWD};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A link to make (relative to the base directory) and its target; `{}` stands for the base.
const LINKS: &[(&[u8], &[u8])] = &[
    (b"links/abs1", b"{}/old/d/f"),
    (b"links/deep/x/abs2", b"{}/old/d/sub/g"),
    (b"links/eq", b"{}/old"),
    (b"links/trap", b"{}/oldx/f"),
    (b"links/other", b"{}/elsewhere/e"),
    (b"links/rel", b"../elsewhere/e"),
    (b"links/rel_old", b"../old/d/f"),
    (b"links/dangling", b"{}/old/nothere"),
    (b"links/sp ace link", b"{}/old/sp ace/h"),
    (b"links/n\xff link", b"{}/old/n\xff/k"),
    (b"links/trailing", b"{}/old/d/"),
    (b"links/dotted", b"{}//old/./d/../d/f"),
    (b"old/d/self", b"{}/old/d/sub/g"),
];

/// (link, absolute target, `-r` target); a `None` target means "unchanged".
type Expected = (&'static [u8], Option<&'static [u8]>, Option<&'static [u8]>);

/// Where each link points after `reln OLD NEW`, by link (after the move `old/` is `new/`),
/// absolute and with `-r`; `None` = unchanged.
const EXPECTED: &[Expected] = &[
    (b"links/abs1", Some(b"{}/new/d/f"), Some(b"../new/d/f")),
    (
        b"links/deep/x/abs2",
        Some(b"{}/new/d/sub/g"),
        Some(b"../../../new/d/sub/g"),
    ),
    (b"links/eq", Some(b"{}/new"), Some(b"../new")),
    (b"links/trap", None, None),
    (b"links/other", None, None),
    (b"links/rel", None, None),
    (b"links/rel_old", None, None),
    (
        b"links/dangling",
        Some(b"{}/new/nothere"),
        Some(b"../new/nothere"),
    ),
    (
        b"links/sp ace link",
        Some(b"{}/new/sp ace/h"),
        Some(b"../new/sp ace/h"),
    ),
    (
        b"links/n\xff link",
        Some(b"{}/new/n\xff/k"),
        Some(b"../new/n\xff/k"),
    ),
    (b"links/trailing", Some(b"{}/new/d/"), Some(b"../new/d/")),
    (b"links/dotted", Some(b"{}/new/d/f"), Some(b"../new/d/f")),
    (b"new/d/self", Some(b"{}/new/d/sub/g"), Some(b"sub/g")),
];

/// What a link resolves to once rewritten: the file's content (None: dangling).
const CONTENT: &[(&[u8], Option<&[u8]>)] = &[
    (b"links/abs1", Some(b"f")),
    (b"links/deep/x/abs2", Some(b"g")),
    (b"links/trap", Some(b"trap")),
    (b"links/other", Some(b"e")),
    (b"links/rel", Some(b"e")),
    (b"links/sp ace link", Some(b"h")),
    (b"links/n\xff link", Some(b"k")),
    (b"links/dotted", Some(b"f")),
    (b"new/d/self", Some(b"g")),
    (b"links/dangling", None),
];

fn p(base: &Path, rel: &[u8]) -> PathBuf {
    base.join(OsStr::from_bytes(rel))
}

fn fill(base: &Path, t: &[u8]) -> Vec<u8> {
    let b = base.as_os_str().as_bytes();
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.windows(2).position(|w| w == b"{}") {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(b);
        rest = &rest[i + 2..];
    }
    out.extend_from_slice(rest);
    out
}

/// The data tree `old/`, the prefix trap `oldx/`, `elsewhere/`, and the links of [`LINKS`].
fn scene() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    for d in [
        &b"old/d/sub"[..],
        b"old/sp ace",
        b"old/n\xff",
        b"oldx",
        b"elsewhere",
        b"links/deep/x",
    ] {
        fs::create_dir_all(p(&base, d)).unwrap();
    }
    for (f, data) in [
        (&b"old/d/f"[..], &b"f"[..]),
        (b"old/d/sub/g", b"g"),
        (b"old/sp ace/h", b"h"),
        (b"old/n\xff/k", b"k"),
        (b"oldx/f", b"trap"),
        (b"elsewhere/e", b"e"),
    ] {
        fs::write(p(&base, f), data).unwrap();
    }
    for (link, target) in LINKS {
        symlink(OsStr::from_bytes(&fill(&base, target)), p(&base, link)).unwrap();
    }
    (tmp, base)
}

fn readlink(path: &Path) -> Vec<u8> {
    fs::read_link(path)
        .unwrap_or_else(|e| panic!("readlink {}: {e}", path.display()))
        .into_os_string()
        .into_vec()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `mfu-rs reln ARGS` at `np` ranks (1 = one process), expecting `code`.
fn reln(np: usize, args: &[&OsStr], code: i32) -> Output {
    Tool::new("reln")
        .np(np)
        .args(args)
        .run()
        .assert_status(code)
        .into()
}

/// Move `old/` to `new/`, rewrite with or without `-r`, check every link's target and what it
/// resolves to.
fn move_and_rewrite(np: usize, relative: bool) {
    let (_tmp, base) = scene();
    expect_status(
        Command::new("mv")
            .arg(base.join("old"))
            .arg(base.join("new")),
        0,
    );
    let (old, new) = (base.join("old"), base.join("new"));
    let (links, moved) = (base.join("links"), base.join("new"));
    let mut args: Vec<&OsStr> = Vec::new();
    if relative {
        args.push("-r".as_ref());
    }
    args.extend([
        old.as_os_str(),
        new.as_os_str(),
        links.as_os_str(),
        moved.as_os_str(),
    ]);
    let out = reln(np, &args, 0);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("Rewrote 9 of 13 links"), "{summary}");
    for (link, abs, rel) in EXPECTED {
        let path = p(&base, link);
        let want = if relative { rel } else { abs };
        let before = LINKS
            .iter()
            .find(|(l, _)| l == link)
            .map(|(_, t)| fill(&base, t));
        let want = match want {
            Some(t) => fill(&base, t),
            None => before.expect("an unchanged link is in LINKS"),
        };
        assert_eq!(
            readlink(&path),
            want,
            "{} (np {np}, relative {relative})",
            String::from_utf8_lossy(link)
        );
    }
    for (link, content) in CONTENT {
        let got = fs::read(p(&base, link)).ok();
        assert_eq!(
            got.as_deref(),
            *content,
            "{} resolves wrongly",
            String::from_utf8_lossy(link)
        );
    }
    // No temporary link is left behind.
    let leftovers = Command::new("find")
        .arg(&base)
        .args(["-name", "*.mfu-tmp"])
        .output()
        .unwrap();
    assert!(leftovers.stdout.is_empty(), "{leftovers:?}");
}

#[test]
fn absolute_rewrite_one_process() {
    move_and_rewrite(1, false);
}

#[test]
fn relative_rewrite_one_process() {
    move_and_rewrite(1, true);
}

#[test]
fn rewrite_under_mpirun() {
    move_and_rewrite(2, false);
    move_and_rewrite(2, true);
    move_and_rewrite(4, false);
    move_and_rewrite(4, true);
}

fn times(path: &Path) -> (i64, i64, i64, i64) {
    let m = fs::symlink_metadata(path).unwrap();
    (m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec())
}

#[test]
fn preserve_keeps_times_and_owner_is_always_kept() {
    let (_tmp, base) = scene();
    let past = Timestamps {
        last_access: Timespec {
            tv_sec: 1_000_000_000,
            tv_nsec: 123,
        },
        last_modification: Timespec {
            tv_sec: 1_100_000_000,
            tv_nsec: 456_789,
        },
    };
    let (a, b) = (base.join("links/abs1"), base.join("links/eq"));
    for l in [&a, &b] {
        rustix::fs::utimensat(CWD, l, &past, AtFlags::SYMLINK_NOFOLLOW).unwrap();
        rustix::fs::chownat(
            CWD,
            l,
            Some(rustix::fs::Uid::from_raw(1234)),
            Some(rustix::fs::Gid::from_raw(5678)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
    }
    let want = (1_000_000_000, 123, 1_100_000_000, 456_789);
    assert_eq!(times(&a), want);
    let (old, new) = (base.join("old"), base.join("new"));
    // Without -p the new link has new times.
    let eq_list = base.join("eq.list");
    fs::write(&eq_list, format!("{}\n", s(&b))).unwrap();
    reln(
        1,
        &[old.as_ref(), new.as_ref(), "-i".as_ref(), eq_list.as_ref()],
        0,
    );
    assert_eq!(readlink(&b), fill(&base, b"{}/new"));
    assert_ne!(times(&b), want);
    // With -p they are kept, at 2 ranks too.
    let links = base.join("links");
    reln(
        2,
        &["-p".as_ref(), old.as_ref(), new.as_ref(), links.as_ref()],
        0,
    );
    // Times first: reading the link moves its atime.
    assert_eq!(times(&a), want);
    assert_eq!(readlink(&a), fill(&base, b"{}/new/d/f"));
    for l in [&a, &b] {
        let m = fs::symlink_metadata(l).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 5678), "{}", l.display());
    }
}

#[test]
fn dryrun_lists_and_changes_nothing_and_input_lists_limit_the_work() {
    let (_tmp, base) = scene();
    let (old, new) = (base.join("old"), base.join("new"));
    let links = base.join("links");
    let before: Vec<Vec<u8>> = LINKS.iter().map(|(l, _)| readlink(&p(&base, l))).collect();
    let out = reln(
        1,
        &[
            "--dryrun".as_ref(),
            old.as_ref(),
            new.as_ref(),
            links.as_ref(),
        ],
        0,
    );
    let text = out.stdout;
    let line = [
        p(&base, b"links/abs1").as_os_str().as_bytes(),
        b": ",
        &fill(&base, b"{}/old/d/f"),
        b" -> ",
        &fill(&base, b"{}/new/d/f"),
        b"\n",
    ]
    .concat();
    assert!(
        text.windows(line.len()).any(|w| w == line),
        "{}",
        String::from_utf8_lossy(&text)
    );
    assert!(String::from_utf8_lossy(&text).contains("Would rewrite 8 of 12 links"));
    let after: Vec<Vec<u8>> = LINKS.iter().map(|(l, _)| readlink(&p(&base, l))).collect();
    assert_eq!(before, after);

    // A NUL-separated list naming two links and a file: only those two change.
    let list = base.join("list0");
    let mut bytes = Vec::new();
    for l in [&b"links/n\xff link"[..], b"links/abs1", b"old/d/f"] {
        bytes.extend_from_slice(p(&base, l).as_os_str().as_bytes());
        bytes.push(0);
    }
    fs::write(&list, bytes).unwrap();
    let out = reln(
        2,
        &[
            old.as_ref(),
            new.as_ref(),
            "--input".as_ref(),
            list.as_ref(),
        ],
        0,
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Rewrote 2 of 2 links"));
    assert_eq!(
        readlink(&p(&base, b"links/n\xff link")),
        fill(&base, b"{}/new/n\xff/k")
    );
    assert_eq!(readlink(&base.join("links/eq")), fill(&base, b"{}/old"));
}

#[test]
fn failures_name_the_link_and_the_operation() {
    let (tmp, base) = scene();
    // nobody may not create the new link in a root's directory.
    let mut perms = fs::metadata(tmp.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs::set_permissions(tmp.path(), perms).unwrap();
    let out = expect_status(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin())
            .args(["reln", "-q"])
            .arg(base.join("old"))
            .arg(base.join("new"))
            .arg(base.join("links/deep")),
        1,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "create link {}: Permission denied",
            s(&base.join("links/deep/x/abs2"))
        )),
        "{err}"
    );
    assert!(err.contains("1 failures"), "{err}");
    assert_eq!(
        readlink(&base.join("links/deep/x/abs2")),
        fill(&base, b"{}/old/d/sub/g")
    );
}

#[test]
fn usage_errors_exit_2() {
    let (_tmp, base) = scene();
    let (old, new, links) = (base.join("old"), base.join("new"), base.join("links"));
    let cases: &[&[&OsStr]] = &[
        &[],
        &[old.as_ref()],
        &[old.as_ref(), new.as_ref()],
        &[
            old.as_ref(),
            new.as_ref(),
            links.as_ref(),
            "-i".as_ref(),
            "/nonexistent".as_ref(),
        ],
        &[
            old.as_ref(),
            new.as_ref(),
            "-i".as_ref(),
            "/nonexistent/list".as_ref(),
        ],
        &["".as_ref(), new.as_ref(), links.as_ref()],
    ];
    for args in cases {
        reln(1, args, 2);
    }
    reln(
        2,
        &[
            old.as_ref(),
            new.as_ref(),
            "-i".as_ref(),
            "/nonexistent".as_ref(),
        ],
        2,
    );
    assert_eq!(
        readlink(&base.join("links/abs1")),
        fill(&base, b"{}/old/d/f")
    );
}

#[test]
fn links_named_twice_are_rewritten_once() {
    // NEWPATH under OLDPATH: a second rewrite would give old/v2/v2/...
    let (_tmp, base) = scene();
    let (old, new) = (base.join("old"), base.join("old/v2"));
    let list = base.join("twice.txt");
    let abs1 = base.join("links/abs1");
    fs::write(&list, format!("{0}\n{0}\n{0}\n", s(&abs1))).unwrap();
    reln(
        2,
        &[old.as_ref(), new.as_ref(), "-i".as_ref(), list.as_ref()],
        0,
    );
    assert_eq!(readlink(&abs1), fill(&base, b"{}/old/v2/d/f"));
    // Nested and repeated PATHs: the walk of the outer one covers the inner ones.
    let (links, deep) = (base.join("links"), base.join("links/deep"));
    reln(
        4,
        &[
            old.as_ref(),
            new.as_ref(),
            deep.as_ref(),
            links.as_ref(),
            deep.as_ref(),
        ],
        0,
    );
    assert_eq!(
        readlink(&base.join("links/deep/x/abs2")),
        fill(&base, b"{}/old/v2/d/sub/g")
    );
}

/// `-r` where the link directory or NEWPATH is reached through a symlink to a directory of
/// another depth (`home -> gpfs/home`): the relative targets count from real locations, and
/// every rewritten link reaches the moved file.
#[test]
fn relative_targets_through_a_symlinked_directory_of_another_depth_resolve() {
    for np in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        fs::create_dir_all(base.join("gpfs/home/u/new")).unwrap();
        fs::create_dir_all(base.join("gpfs/home/u/links")).unwrap();
        fs::write(base.join("gpfs/home/u/new/f"), b"moved data").unwrap();
        symlink("gpfs/home", base.join("home")).unwrap();
        let real = base.join("gpfs/home/u");
        let via = base.join("home/u");
        let old = real.join("old");
        for name in ["l1", "l2"] {
            symlink(old.join("f"), real.join("links").join(name)).unwrap();
        }
        // The links' directory named through the symlink, NEWPATH by its real path...
        reln(
            np,
            &[
                OsStr::new("-r"),
                old.as_os_str(),
                real.join("new").as_os_str(),
                via.join("links").as_os_str(),
            ],
            0,
        );
        // ... and the other way round (the targets were rewritten: point them back first).
        for name in ["l1", "l2"] {
            let link = real.join("links").join(name);
            assert_eq!(readlink(&link), b"../new/f", "np {np}");
            assert_eq!(fs::read(&link).unwrap(), b"moved data", "np {np}");
            fs::remove_file(&link).unwrap();
            symlink(old.join("f"), &link).unwrap();
        }
        reln(
            np,
            &[
                OsStr::new("-r"),
                old.as_os_str(),
                via.join("new").as_os_str(),
                real.join("links").as_os_str(),
            ],
            0,
        );
        for name in ["l1", "l2"] {
            let link = real.join("links").join(name);
            assert_eq!(readlink(&link), b"../new/f", "np {np}");
            assert_eq!(fs::read(&link).unwrap(), b"moved data", "np {np}");
        }
    }
}

/// A directory of the walked tree swapped for a symlink to an outside directory of links
/// between the walk and the rewrite: nothing outside changes; the directory is named, exit 1.
#[test]
fn a_directory_swapped_for_a_symlink_after_the_walk_is_not_followed() {
    for np in [1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        let old = base.join("old");
        for dir in ["tree/d", "outside"] {
            fs::create_dir_all(base.join(dir)).unwrap();
        }
        for link in ["tree/d/l1", "tree/d/l2", "outside/l1", "outside/l2"] {
            symlink(old.join("f"), base.join(link)).unwrap();
        }
        symlink(old.join("g"), base.join("tree/top")).unwrap();
        let mut cmd = if np == 1 {
            mfu(&[])
        } else {
            mpirun(np, &bin())
        };
        cmd.arg("reln")
            .arg(&old)
            .arg(base.join("new"))
            .arg(base.join("tree"));
        let out = mfu_tests::with_change_after_listing(&mut cmd, || {
            fs::rename(base.join("tree/d"), base.join("d.moved")).unwrap();
            symlink(base.join("outside"), base.join("tree/d")).unwrap();
        });
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "np {np}: {err}");
        assert!(
            err.contains(&format!("{}: ", base.join("tree/d").display())),
            "np {np}: {err}"
        );
        for link in ["outside/l1", "outside/l2", "d.moved/l1", "d.moved/l2"] {
            assert_eq!(
                readlink(&base.join(link)),
                old.join("f").as_os_str().as_bytes(),
                "np {np}: {link} changed"
            );
        }
        // What did not move is rewritten.
        assert_eq!(
            readlink(&base.join("tree/top")),
            base.join("new/g").as_os_str().as_bytes()
        );
    }
}

/// Keeps the output a run sends.
#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<u8>>);

impl mfu::prelude::Events for Collect {
    fn error(&self, _: &str) {}
    fn progress(&self, _: &str, _: &steal::progress::Report) {}
    fn output(&self, bytes: &[u8]) {
        self.0.lock().unwrap().extend_from_slice(bytes);
    }
    fn info(&self, _: &str) {}
}

fn bytes(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

/// reln's temporary link takes the one temporary naming of every tool
/// (`.NAME.HOST.PID.mfu-tmp`): a file already at that name is not reln's, so it is never
/// replaced or removed, and its link keeps its old target, named (exit 1); the other links
/// are rewritten.
#[test]
fn a_file_at_the_temporary_name_is_left_alone_and_its_link_named() {
    let _serial = mfu_tests::serial();
    let (_tmp, base) = scene();
    let (old, new, links) = (base.join("old"), base.join("new"), base.join("links"));
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let planted = links.join(format!(".abs1.{host}.{}.mfu-tmp", std::process::id()));
    fs::write(&planted, b"someone else's").unwrap();
    let before = readlink(&links.join("abs1"));
    expect_status(Command::new("mv").arg(&old).arg(&new), 0);
    let options = mfu::reln::Options::new(bytes(&old), bytes(&new), vec![bytes(&links)]);
    for r in steal::local::run(2, |comm| mfu::reln::run(comm, &options).unwrap()) {
        assert_eq!((r.rewritten, r.failed), (7, 1), "{r:?}");
        assert_ne!(mfu::prelude::ToolReport::status(&r), mfu::Status::Ok);
    }
    assert_eq!(fs::read(&planted).unwrap(), b"someone else's");
    assert_eq!(readlink(&links.join("abs1")), before);
}

#[test]
fn library_run_reports_counts_output_and_failures() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::{Context, ToolReport};
    let (_tmp, base) = scene();
    let (old, new, links) = (base.join("old"), base.join("new"), base.join("links"));
    // A dry run sends its lines as output, in rank order, and changes nothing.
    let events = std::sync::Arc::new(Collect::default());
    let mut options = mfu::reln::Options::new(bytes(&old), bytes(&new), vec![bytes(&links)]);
    options.dryrun = true;
    options.context = Context::new(events.clone());
    let before: Vec<Vec<u8>> = LINKS.iter().map(|(l, _)| readlink(&p(&base, l))).collect();
    for r in steal::local::run(2, |comm| mfu::reln::run(comm, &options).unwrap()) {
        assert_eq!((r.links, r.rewritten, r.failed, r.dryrun), (12, 8, 0, true));
        assert_eq!(r.status(), mfu::Status::Ok);
    }
    let output = events.0.lock().unwrap().clone();
    assert_eq!(output.iter().filter(|&&b| b == b'\n').count(), 8);
    let after: Vec<Vec<u8>> = LINKS.iter().map(|(l, _)| readlink(&p(&base, l))).collect();
    assert_eq!(before, after);

    // The real run, after the move; a link of the list whose directory is gone fails, named.
    expect_status(Command::new("mv").arg(&old).arg(&new), 0);
    let list = base.join("list");
    let mut text = Vec::new();
    for l in [&b"links/abs1"[..], b"links/eq", b"gone/link"] {
        text.extend_from_slice(p(&base, l).as_os_str().as_bytes());
        text.push(b'\n');
    }
    fs::write(&list, text).unwrap();
    let mut options = mfu::reln::Options::new(bytes(&old), bytes(&new), Vec::new());
    options.input = mfu::Input::file(bytes(&list));
    let reports = steal::local::run(2, |comm| mfu::reln::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!((r.links, r.rewritten, r.failed), (2, 2, 1));
        assert_eq!(
            (r.oldpath.clone(), r.newpath.clone()),
            (bytes(&old), bytes(&new))
        );
        assert_eq!(r.status(), mfu::Status::ItemsFailed);
    }
    let failures: Vec<&String> = reports.iter().flat_map(|r| &r.failures).collect();
    assert!(
        failures
            .iter()
            .any(|f| f.contains(&format!("{}/gone", s(&base)))),
        "{failures:?}"
    );
    assert_eq!(readlink(&p(&base, b"links/eq")), fill(&base, b"{}/new"));
    // An empty OLDPATH is an error on every rank.
    let empty = mfu::reln::Options::new(Vec::new(), bytes(&new), vec![bytes(&links)]);
    for r in steal::local::run(2, |comm| mfu::reln::run(comm, &empty)) {
        assert_eq!(
            r.unwrap_err().message,
            "an empty OLDPATH names no directory"
        );
    }
}

/// The numbers of `Rewrote N of L links ...` / `Would rewrite N of L links ...`.
fn text_counts(stdout: &[u8]) -> (u64, u64) {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("Rewrote ") || l.starts_with("Would rewrite "))
        .unwrap_or_else(|| panic!("no summary in {text:?}"));
    let words: Vec<&str> = line.split(' ').collect();
    let at = words.iter().position(|w| *w == "of").unwrap();
    (
        words[at - 1].parse().unwrap(),
        words[at + 1].parse().unwrap(),
    )
}

#[test]
fn json_report_has_the_text_summary_counts() {
    let (_tmp, base) = scene();
    let (old, new, links) = (base.join("old"), base.join("new"), base.join("links"));
    let gone = base.join("gone");
    for (code, extra) in [(0, None), (1, Some(gone.as_os_str()))] {
        let mut args: Vec<&OsStr> = vec![
            "--dryrun".as_ref(),
            old.as_ref(),
            new.as_ref(),
            links.as_ref(),
        ];
        args.extend(extra);
        let text = reln(1, &args, code);
        args.insert(0, "--json".as_ref());
        let json = reln(1, &args, code);
        let (rewritten, looked_at) = text_counts(&text.stdout);
        let v: serde_json::Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json.stdout)));
        assert_eq!(v["tool"], "reln");
        assert_eq!(v["status"], code);
        assert_eq!(v["items"], rewritten);
        assert_eq!(v["rewritten"], rewritten);
        assert_eq!(v["links"], looked_at);
        assert_eq!(v["bytes"], 0);
        assert_eq!(v["failed"], u64::from(extra.is_some()));
        assert_eq!(v["oldpath"], s(&old));
        assert_eq!((rewritten, looked_at), (8, 12));
        // The dry run's lines went to stderr, leaving stdout to the report.
        assert!(String::from_utf8_lossy(&json.stderr).contains(" -> "));
    }
}
