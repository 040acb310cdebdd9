//! Lustre striping, tested through the test double of the Lustre calls (there is no Lustre on
//! the build machines): cp, sync and tar run in this process over local ranks with
//! `lustre_sys::fake::Fake` standing in for the file system, which records every layout it is
//! asked for. Off Lustre, the same tools run with the real calls behind a counter, which proves
//! no layout call is made; and `mfu-rs stripe` refuses a path that is not on Lustre.

use clap::Parser;
use lustre_sys::counting::Counting;
use lustre_sys::fake::Fake;
use lustre_sys::{Layout, Lustre, System};
use mfu::prelude::{Context, ToolReport};
use mfu::types::LustreHandle;
use mfu::types::Rules;
use mfu::unstable::cli::tool::CliTool;
use mfu::Status;
use mfu_tests::{expect_status, mfu};
use std::fs::{self, File};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Parse a tool's options as the command line would.
#[derive(Parser)]
struct Cmd<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

fn parse<T: clap::Args>(args: &[&str]) -> T {
    Cmd::<T>::try_parse_from(std::iter::once("mfu-rs").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .args
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

/// A file of `size` bytes: real data for the first MiB (so the copy has something to check),
/// the rest a hole.
fn sparse_file(path: &Path, size: u64) {
    let f = File::create(path).unwrap();
    let head: Vec<u8> = (0..MIB.min(size)).map(|i| (i * 7 % 251) as u8).collect();
    std::os::unix::fs::FileExt::write_all_at(&f, &head, 0).unwrap();
    f.set_len(size).unwrap();
}

/// The stripe count the double recorded for `path` (by create), if any.
fn recorded(fake: &Fake, path: &Path) -> Option<(u16, u32)> {
    fake.creates()
        .iter()
        .rev()
        .find(|c| c.path == path)
        .map(|c| (c.stripe_count, c.stripe_size))
}

/// The layout `tar -c` gave the archive `path`: it creates it as `.NAME.HOST.PID.mfu-tmp` beside
/// it and renames it into place (the layout goes with the inode).
fn recorded_archive(fake: &Fake, path: &Path) -> Option<(u16, u32)> {
    assert!(path.is_file(), "{} was not created", path.display());
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    // The partial archive in the checkpoint, or (--no-checkpoint) the temporary beside.
    let kept = path
        .parent()
        .unwrap()
        .join(format!(".{name}.mfu-checkpoint/partial-archive"));
    let temp = |c: &Path| {
        let n = c.file_name().unwrap().to_string_lossy().into_owned();
        *c == kept
            || (c.parent() == path.parent()
                && n.starts_with(&format!(".{name}."))
                && n.ends_with(".mfu-tmp"))
    };
    fake.creates()
        .iter()
        .rev()
        .find(|c| temp(&c.path))
        .map(|c| (c.stripe_count, c.stripe_size))
}

fn handle(fake: &Arc<Fake>) -> LustreHandle {
    LustreHandle(fake.clone() as Arc<dyn Lustre>)
}

/// The status of a typed run's result on each rank (a usage error is 2).
fn statuses<R: ToolReport>(results: Vec<Result<R, mfu::prelude::Error>>) -> Vec<Status> {
    results
        .into_iter()
        .map(|r| r.map_or(Status::Usage, |r| r.status()))
        .collect()
}

/// The typed options of tool `T` for `argv`, as the command line builds them.
fn options<T: CliTool>(argv: &[&str]) -> T::Options {
    T::options(&parse(argv), Rules::default(), Context::default())
}

fn cp(ranks: usize, argv: &[&str], api: LustreHandle) -> Status {
    let mut options = options::<mfu::unstable::cli::cp::Cp>(argv);
    options.io.stripe.api = api;
    let results = steal::local::run(ranks, |comm| mfu::cp::run(comm, &options));
    statuses(results).into_iter().max().unwrap()
}

/// Run `mfu-rs tar ARGV` over `ranks` local ranks with `api`; every rank must succeed.
fn tar(ranks: usize, argv: &[&str], api: LustreHandle) {
    use mfu::prelude::{Context, ToolReport};
    use mfu::unstable::cli::tool::CliTool;
    let args: mfu::unstable::cli::tar::TarArgs = parse(argv);
    let mut options =
        mfu::unstable::cli::tar::Tar::options(&args, Rules::default(), Context::default());
    options.lustre = api;
    let reports = steal::local::run(ranks, |comm| mfu::tar::run(comm, &options));
    assert!(
        reports
            .iter()
            .all(|r| r.as_ref().is_ok_and(|r| r.status() == Status::Ok)),
        "tar {argv:?}: {reports:?}"
    );
}

/// src/ with a 10 MiB file, a 4 GiB and a 100 GiB sparse file, and an empty dst/.
fn sized_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    fs::create_dir(&src).unwrap();
    fs::create_dir(&dst).unwrap();
    sparse_file(&src.join("ten_mib"), 10 * MIB);
    sparse_file(&src.join("four_gib"), 4 * GIB);
    sparse_file(&src.join("hundred_gib"), 100 * GIB);
    (tmp, src, dst)
}

#[test]
fn cp_stripes_new_files_by_size_clamped_by_the_ost_count() {
    let _serial = mfu_tests::serial();
    for (osts, expect_big) in [(16u32, 11u16), (8, 8)] {
        let (_tmp, src, dst) = sized_tree();
        let fake = Arc::new(Fake::new(vec![dst.clone()], osts));
        let src_arg = format!("{}/", s(&src));
        let status = cp(2, &["-S", "-q", &src_arg, s(&dst)], handle(&fake));
        assert_eq!(status, Status::Ok);
        let stripe = 4 * MIB as u32; // the chunk size, 1-4 MiB
        assert_eq!(recorded(&fake, &dst.join("ten_mib")), Some((1, stripe)));
        assert_eq!(recorded(&fake, &dst.join("four_gib")), Some((3, stripe)));
        assert_eq!(
            recorded(&fake, &dst.join("hundred_gib")),
            Some((expect_big, stripe)),
            "{osts} OSTs"
        );
        // The data made it: sizes, and the first MiB.
        for (name, size) in [
            ("ten_mib", 10 * MIB),
            ("four_gib", 4 * GIB),
            ("hundred_gib", 100 * GIB),
        ] {
            let (a, b) = (src.join(name), dst.join(name));
            assert_eq!(fs::metadata(&b).unwrap().len(), size, "{name}");
            let head = |p: &Path| {
                let mut v = vec![0u8; MIB as usize];
                std::os::unix::fs::FileExt::read_exact_at(&File::open(p).unwrap(), &mut v, 0)
                    .unwrap();
                v
            };
            assert!(head(&a) == head(&b), "{name}: first MiB differs");
        }
        // Never the source's OST indices: the layouts asked for are plain requests.
        assert!(fake
            .creates()
            .iter()
            .all(|c| c.stripe_size % (64 * 1024) == 0));
    }
}

#[test]
fn a_pfl_directory_default_is_left_alone_and_a_plain_one_stripe_default_needs_no_call() {
    let _serial = mfu_tests::serial();
    let (_tmp, src, dst) = sized_tree();
    let fake = Arc::new(Fake::new(vec![dst.clone()], 16));
    let pfl = Layout::decode(&pfl_blob()).expect("PFL layout");
    assert!(pfl.is_composite());
    fake.set_default(&dst, pfl).unwrap();
    let src_arg = format!("{}/", s(&src));
    assert_eq!(
        cp(2, &["-S", "-q", &src_arg, s(&dst)], handle(&fake)),
        Status::Ok
    );
    assert!(fake.creates().is_empty(), "{:?}", fake.creates());
    assert_eq!(
        fs::metadata(dst.join("hundred_gib")).unwrap().len(),
        100 * GIB
    );

    // A plain one-stripe default: the small file inherits it without a call, big ones are set.
    let (_tmp, src, dst) = sized_tree();
    let fake = Arc::new(Fake::new(vec![dst.clone()], 16));
    fake.set_default(&dst, Layout::request(1, MIB as u32))
        .unwrap();
    let src_arg = format!("{}/", s(&src));
    assert_eq!(
        cp(2, &["-S", "-q", &src_arg, s(&dst)], handle(&fake)),
        Status::Ok
    );
    assert_eq!(recorded(&fake, &dst.join("ten_mib")), None);
    assert_eq!(recorded(&fake, &dst.join("four_gib")).map(|r| r.0), Some(3));
}

/// A PFL layout as `lfs setstripe -E 1M -c 1 -E -1 -c 4` gives: two components, built at the
/// documented offsets.
fn pfl_blob() -> Vec<u8> {
    let plain = |count: u16| Layout::request(count, MIB as u32).encode();
    let (a, b) = (plain(1), plain(4));
    let header = 32 + 2 * 48;
    let mut out = vec![0u8; header];
    out[0..4].copy_from_slice(&lustre_sys::LOV_USER_MAGIC_COMP_V1.to_ne_bytes());
    let total = (header + a.len() + b.len()) as u32;
    out[4..8].copy_from_slice(&total.to_ne_bytes());
    out[14..16].copy_from_slice(&2u16.to_ne_bytes());
    let entries = [
        (1u32, 0u64, MIB, header, a.len()),
        (2, MIB, u64::MAX, header + a.len(), b.len()),
    ];
    for (i, (id, start, end, at, len)) in entries.into_iter().enumerate() {
        let e = 32 + 48 * i;
        out[e..e + 4].copy_from_slice(&id.to_ne_bytes());
        out[e + 8..e + 16].copy_from_slice(&start.to_ne_bytes());
        out[e + 16..e + 24].copy_from_slice(&end.to_ne_bytes());
        out[e + 24..e + 28].copy_from_slice(&(at as u32).to_ne_bytes());
        out[e + 28..e + 32].copy_from_slice(&(len as u32).to_ne_bytes());
    }
    out.extend_from_slice(&a);
    out.extend_from_slice(&b);
    out
}

#[test]
fn overrides_win_over_the_policy_and_over_a_pfl_default() {
    let _serial = mfu_tests::serial();
    let (_tmp, src, dst) = sized_tree();
    let fake = Arc::new(Fake::new(vec![dst.clone()], 16));
    fake.set_default(&dst, Layout::decode(&pfl_blob()).unwrap())
        .unwrap();
    let src_arg = format!("{}/", s(&src));
    let argv = [
        "-S",
        "-q",
        "--stripe-count",
        "5",
        "--stripe-size",
        "2MiB",
        &src_arg,
        s(&dst),
    ];
    assert_eq!(cp(2, &argv, handle(&fake)), Status::Ok);
    for name in ["ten_mib", "four_gib", "hundred_gib"] {
        assert_eq!(
            recorded(&fake, &dst.join(name)),
            Some((5, 2 * MIB as u32)),
            "{name}"
        );
    }
    // -1: all OSTs.
    let (_tmp, src, dst) = sized_tree();
    let fake = Arc::new(Fake::new(vec![dst.clone()], 16));
    let src_arg = format!("{}/", s(&src));
    assert_eq!(
        cp(
            1,
            &["-S", "-q", "--stripe-count", "-1", &src_arg, s(&dst)],
            handle(&fake)
        ),
        Status::Ok
    );
    assert_eq!(
        recorded(&fake, &dst.join("ten_mib")).map(|r| r.0),
        Some(0xFFFF)
    );
}

/// A small tree of files, links and directories for the "off Lustre" runs.
fn small_tree(root: &Path) {
    fs::create_dir_all(root.join("d/e")).unwrap();
    for (i, name) in ["a", "d/b", "d/e/c"].iter().enumerate() {
        fs::write(root.join(name), vec![i as u8; 5000 * (i + 1)]).unwrap();
    }
    sparse_file(&root.join("big"), 40 * MIB);
    std::os::unix::fs::symlink("a", root.join("link")).unwrap();
}

#[test]
fn off_lustre_cp_sync_and_tar_make_no_layout_calls() {
    let _serial = mfu_tests::serial();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    small_tree(&src);
    let counting = Arc::new(Counting::new(System));
    let api = LustreHandle(counting.clone() as Arc<dyn Lustre>);

    let dst = tmp.path().join("copy");
    assert_eq!(
        cp(2, &["-q", "-k", "1MiB", s(&src), s(&dst)], api.clone()),
        Status::Ok
    );
    assert_eq!(
        fs::read(dst.join("d/e/c")).unwrap(),
        fs::read(src.join("d/e/c")).unwrap()
    );

    let mirror = tmp.path().join("mirror");
    let mut options = options::<mfu::unstable::cli::sync::Sync>(&["-q", s(&src), s(&mirror)]);
    options.io.stripe.api = api.clone();
    let st = statuses(steal::local::run(2, |comm| mfu::sync::run(comm, &options)));
    assert!(st.iter().all(|s| *s == Status::Ok), "{st:?}");
    assert_eq!(
        fs::read(mirror.join("a")).unwrap(),
        fs::read(src.join("a")).unwrap()
    );

    let archive = tmp.path().join("a.tar");
    tar(
        2,
        &["-c", "-q", "-f", s(&archive), "-C", s(tmp.path()), "src"],
        api.clone(),
    );
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    tar(
        2,
        &["-x", "-q", "-f", s(&archive), "-C", s(&out)],
        api.clone(),
    );
    assert_eq!(
        fs::read(out.join("src/d/b")).unwrap(),
        fs::read(src.join("d/b")).unwrap()
    );

    let calls = counting.calls();
    assert!(
        calls.is_lustre > 0,
        "the tools asked whether the destination is Lustre"
    );
    assert_eq!(counting.layout_calls(), 0, "{calls:?}");
}

#[test]
fn tar_stripes_the_archive_over_all_osts_and_extracted_files_by_policy() {
    let _serial = mfu_tests::serial();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    small_tree(&src);
    let fake = Arc::new(Fake::new(vec![tmp.path().to_path_buf()], 16));
    let archive = tmp.path().join("a.tar");
    tar(
        2,
        &[
            "-c",
            "-q",
            "-k",
            "2MiB",
            "-f",
            s(&archive),
            "-C",
            s(tmp.path()),
            "src",
        ],
        handle(&fake),
    );
    assert_eq!(
        recorded_archive(&fake, &archive),
        Some((0xFFFF, 2 * MIB as u32))
    );

    // Extract with 64 KiB stripes over 3 ranks (share boundaries move to stripe boundaries of
    // each file): the data is whole.
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    tar(
        3,
        &[
            "-x",
            "-q",
            "-k",
            "64KiB",
            "--stripe-count",
            "2",
            "--stripe-size",
            "64KiB",
            "-f",
            s(&archive),
            "-C",
            s(&out),
        ],
        handle(&fake),
    );
    for name in ["a", "d/b", "d/e/c", "big"] {
        let (a, b) = (src.join(name), out.join("src").join(name));
        assert!(fs::read(&a).unwrap() == fs::read(&b).unwrap(), "{name}");
        assert_eq!(recorded(&fake, &b), Some((2, 64 * 1024)), "{name}");
    }
}

#[test]
fn tar_archive_written_stripe_by_stripe_on_lustre_reads_back_with_gnu_tar() {
    let _serial = mfu_tests::serial();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    fs::create_dir(&src).unwrap();
    for i in 0..300u64 {
        let size = match i % 50 {
            0 => 300_000,
            _ => (i * 7919) % 20_000,
        };
        let data: Vec<u8> = (0..size).map(|j| ((i * 31 + j) % 253) as u8).collect();
        fs::write(src.join(format!("f{i:03}")), data).unwrap();
    }
    let fake = Arc::new(Fake::new(vec![tmp.path().to_path_buf()], 4));
    let archive = tmp.path().join("s.tar");
    tar(
        3,
        &[
            "-c",
            "-q",
            "-k",
            "64KiB",
            "--stripe-size",
            "64KiB",
            "-f",
            s(&archive),
            "-C",
            s(tmp.path()),
            "src",
        ],
        handle(&fake),
    );
    assert_eq!(recorded_archive(&fake, &archive), Some((0xFFFF, 64 * 1024)));
    let out = tmp.path().join("gnu");
    fs::create_dir(&out).unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&out)
        .status()
        .expect("GNU tar (install it with `cargo xtask setup`)");
    assert!(status.success());
    for i in 0..300u64 {
        let name = format!("f{i:03}");
        assert!(
            fs::read(src.join(&name)).unwrap() == fs::read(out.join("src").join(&name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn stripe_restripes_in_place_keeping_data_and_metadata() {
    let _serial = mfu_tests::serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    small_tree(&root);
    fs::set_permissions(root.join("d/b"), fs::Permissions::from_mode(0o640)).unwrap();
    xattr_set(&root.join("d/b"), "user.kept", b"yes");
    let before: Vec<(String, Vec<u8>, fs::Metadata)> = ["a", "d/b", "d/e/c", "big"]
        .iter()
        .map(|n| {
            let p = root.join(n);
            (
                n.to_string(),
                fs::read(&p).unwrap(),
                fs::metadata(&p).unwrap(),
            )
        })
        .collect();
    let fake = Arc::new(Fake::new(vec![root.clone()], 16));
    let mut args = options::<mfu::unstable::cli::stripe::Stripe>(&[
        "-q",
        "-c",
        "4",
        "-s",
        "2MiB",
        "-m",
        "6000",
        s(&root),
    ]);
    args.api = handle(&fake);
    let reports = steal::local::run(2, |comm| mfu::stripe::run(comm, &args));
    let st = statuses(reports.clone());
    assert!(st.iter().all(|s| *s == Status::Ok), "{st:?}");
    let big = before.iter().filter(|(_, _, m)| m.len() >= 6000).count() as u64;
    for r in reports.iter().map(|r| r.as_ref().unwrap()) {
        assert_eq!(
            (r.restriped, r.already, r.failed, r.linked),
            (big, 0, 0, 0),
            "{r:?}"
        );
        // The double does not swap layouts unless told to: every file went by rewrite.
        assert_eq!((r.rewritten, r.swapped), (big, 0), "{r:?}");
    }
    for (name, data, meta) in &before {
        let p = root.join(name);
        let now = fs::metadata(&p).unwrap();
        assert!(fs::read(&p).unwrap() == *data, "{name}: data");
        assert_eq!(now.mode(), meta.mode(), "{name}: mode");
        assert_eq!(
            (now.mtime(), now.mtime_nsec()),
            (meta.mtime(), meta.mtime_nsec()),
            "{name}"
        );
        let restriped = fake.layout_recorded(&p);
        if meta.len() >= 6000 {
            assert_ne!(now.ino(), meta.ino(), "{name}: rewritten");
            assert_eq!(
                restriped.as_ref().and_then(Layout::stripe_count),
                Some(4),
                "{name}"
            );
            assert_eq!(
                restriped.as_ref().and_then(Layout::stripe_size),
                Some(2 << 20)
            );
        } else {
            assert_eq!(now.ino(), meta.ino(), "{name}: below --minsize, untouched");
        }
    }
    assert_eq!(
        xattr_get(&root.join("d/b"), "user.kept").as_deref(),
        Some(&b"yes"[..])
    );
    // No hidden sibling is left behind.
    let left: Vec<_> = walkdir(&root)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(".mfu-tmp")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // A second run finds nothing to do.
    let creates = fake.creates().len();
    let reports = steal::local::run(2, |comm| mfu::stripe::run(comm, &args));
    for r in reports.iter().map(|r| r.as_ref().unwrap()) {
        assert_eq!(
            (r.restriped, r.already, r.status()),
            (0, big, Status::Ok),
            "{r:?}"
        );
    }
    assert_eq!(
        fake.creates().len(),
        creates,
        "files that have the layout are skipped"
    );
}

/// stripe's siblings take the one temporary naming of every tool (`.NAME.HOST.PID.mfu-tmp`,
/// rank 0's host and pid): a user's file at the old sibling name (`.mfu-stripe.NAME`, which
/// stripe removed before each copy) is an ordinary file, kept and restriped like the others; a
/// file already at this run's sibling name is never written or removed, and its file keeps its
/// layout, named (exit 1); two long names that share their first 240 bytes get siblings of
/// their own and keep their own bytes.
#[test]
fn stripe_siblings_never_take_a_users_file_and_never_collide() {
    let _serial = mfu_tests::serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("big"), vec![1u8; 30_000]).unwrap();
    fs::write(root.join(".mfu-stripe.big"), vec![2u8; 30_000]).unwrap();
    let long = |c: char| format!("{}{c}", "n".repeat(240));
    fs::write(root.join(long('1')), vec![3u8; 30_000]).unwrap();
    fs::write(root.join(long('2')), vec![4u8; 30_000]).unwrap();
    fs::write(root.join("taken"), vec![5u8; 30_000]).unwrap();
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let planted = root.join(format!(".taken.{host}.{}.mfu-tmp", std::process::id()));
    fs::write(&planted, b"not stripe's").unwrap();
    let taken_ino = fs::metadata(root.join("taken")).unwrap().ino();

    let fake = Arc::new(Fake::new(vec![root.clone()], 8));
    let mut options = mfu::stripe::Options::new(&[root.as_os_str().as_encoded_bytes()]);
    options.api = handle(&fake);
    options.count = Some(2);
    let reports = steal::local::run(2, |comm| mfu::stripe::run(comm, &options).unwrap());
    let messages = &reports[0].failures;
    for r in &reports {
        assert_eq!(r.status(), Status::ItemsFailed, "{r:?}");
        assert_eq!((r.restriped, r.failed), (4, 1), "{r:?}");
    }
    assert!(
        messages
            .iter()
            .any(|m| m.contains("taken") && m.contains("in the way")),
        "{messages:?}"
    );
    assert_eq!(fs::read(root.join("big")).unwrap(), vec![1u8; 30_000]);
    assert_eq!(
        fs::read(root.join(".mfu-stripe.big")).unwrap(),
        vec![2u8; 30_000]
    );
    assert_eq!(fs::read(root.join(long('1'))).unwrap(), vec![3u8; 30_000]);
    assert_eq!(fs::read(root.join(long('2'))).unwrap(), vec![4u8; 30_000]);
    assert_eq!(fs::read(&planted).unwrap(), b"not stripe's");
    assert_eq!(fs::read(root.join("taken")).unwrap(), vec![5u8; 30_000]);
    assert_eq!(fs::metadata(root.join("taken")).unwrap().ino(), taken_ino);
    for n in ["big", ".mfu-stripe.big"] {
        assert_eq!(
            fake.layout_recorded(&root.join(n))
                .as_ref()
                .and_then(Layout::stripe_count),
            Some(2),
            "{n}"
        );
    }
    let left: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".mfu-tmp") && !planted.ends_with(n))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// What a killed stripe run left beside a file (its sibling: a temporary of a process of this
/// host that is gone, carrying the file's owner as the copy keeps it) is removed by the next
/// run and named; a dead process's temporary owned by someone else is not stripe's, and stays.
#[test]
fn stripe_removes_a_killed_runs_sibling_and_nothing_else() {
    let _serial = mfu_tests::serial();
    use std::os::unix::fs::chown;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("big"), vec![1u8; 30_000]).unwrap();
    chown(root.join("big"), Some(1234), Some(1234)).unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let stale = root.join(format!(".big.{host}.{dead}.mfu-tmp"));
    fs::write(&stale, vec![7u8; 20_000]).unwrap();
    chown(&stale, Some(1234), Some(1234)).unwrap();
    // Another dead process's temporary of another user, for a file of that name.
    let others = root.join(format!(".big.{host}.{}.mfu-tmp", dead + 1_000_000));
    fs::write(&others, b"not stripe's").unwrap();
    chown(&others, Some(999), Some(999)).unwrap();

    let fake = Arc::new(Fake::new(vec![root.clone()], 8));
    let mut options = mfu::stripe::Options::new(&[root.as_os_str().as_encoded_bytes()]);
    options.api = handle(&fake);
    options.count = Some(2);
    let reports = steal::local::run(2, |comm| mfu::stripe::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!((r.restriped, r.failed), (1, 0), "{r:?}");
    }
    assert!(!stale.exists(), "the killed run's sibling is gone");
    assert!(
        reports[0]
            .failures
            .iter()
            .any(|m| m.contains("partial copy of an earlier run that was killed")),
        "{:?}",
        reports[0].failures
    );
    assert_eq!(fs::read(&others).unwrap(), b"not stripe's");
    assert_eq!(fs::read(root.join("big")).unwrap(), vec![1u8; 30_000]);
    assert_eq!(fs::metadata(root.join("big")).unwrap().uid(), 1234);
}

/// The typed stripe: a hard-linked file is skipped, counted and named (exit 1), the others
/// restriped; `--report` sends one line per file as output; the text summary and the JSON
/// report carry the same counts (the binary needs a real Lustre: the report is rendered here).
#[test]
fn stripe_library_counts_skips_and_report_lines() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::Events;
    use std::sync::Mutex;
    #[derive(Default)]
    struct Collect(Mutex<Vec<u8>>);
    impl Events for Collect {
        fn error(&self, _: &str) {}
        fn progress(&self, _: &str, _: &steal::progress::Report) {}
        fn output(&self, b: &[u8]) {
            self.0.lock().unwrap().extend_from_slice(b);
        }
        fn info(&self, _: &str) {}
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("l");
    fs::create_dir(&root).unwrap();
    for n in ["a", "b", "c"] {
        fs::write(root.join(n), vec![7u8; 10_000]).unwrap();
    }
    fs::hard_link(root.join("c"), root.join("c2")).unwrap();
    let fake = Arc::new(Fake::new(vec![root.clone()], 8));
    let mut options = mfu::stripe::Options::new(&[root.as_os_str().as_encoded_bytes()]);
    options.api = handle(&fake);
    options.count = Some(2);
    let reports = steal::local::run(2, |comm| mfu::stripe::run(comm, &options).unwrap());
    // The thread ranks share this process's sample of messages.
    let messages = &reports[0].failures;
    for r in &reports {
        assert_eq!(
            (r.restriped, r.linked, r.bytes, r.failed),
            (2, 2, 20_000, 0),
            "{r:?}"
        );
        assert_eq!(r.status(), Status::ItemsFailed);
    }
    assert!(
        messages.iter().filter(|m| m.contains("hard links")).count() == 2,
        "{messages:?}"
    );
    let line = mfu::unstable::cli::stripe::summary(&reports[0]);
    let json = serde_json::to_value(&reports[0]).unwrap();
    let summary = reports[0].summary();
    assert_eq!(summary.items, 2);
    assert!(
        line.starts_with(&format!("Restriped {} files (", json["restriped"]))
            && line.contains(&format!("({} bytes)", json["bytes"]))
            && line.contains(&format!("; {} hard-linked files skipped", json["linked"])),
        "{line} {json}"
    );

    let events = Arc::new(Collect::default());
    let mut options = mfu::stripe::Options::new(&[root.as_os_str().as_encoded_bytes()]);
    options.api = handle(&fake);
    options.report = true;
    options.context = Context::new(events.clone());
    let reports = steal::local::run(2, |comm| mfu::stripe::run(comm, &options).unwrap());
    assert!(reports
        .iter()
        .all(|r| r.reported == 4 && r.status() == Status::Ok));
    let out = String::from_utf8(events.0.lock().unwrap().clone()).unwrap();
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(out.contains("/l/a: stripe count 2, stripe size"), "{out}");
}

#[test]
fn stripe_report_lines() {
    let layout = Layout::request(4, 2 << 20);
    assert_eq!(
        mfu::stripe::report_line(b"/l/f", Some(&layout)),
        b"/l/f: stripe count 4, stripe size 2097152\n"
    );
    let pfl = Layout::decode(&pfl_blob()).unwrap();
    assert_eq!(
        mfu::stripe::report_line(b"/l/g", Some(&pfl)),
        b"/l/g: composite layout, 2 components, 1 mirrors\n"
    );
}

#[test]
fn stripe_off_lustre_exits_2_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("f"), b"x").unwrap();
    for extra in [&[][..], &["-r"][..]] {
        let mut args = vec!["stripe"];
        args.extend_from_slice(extra);
        args.push(s(tmp.path()));
        let out = expect_status(&mut mfu(&args), 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("is not on Lustre"), "{err}");
        assert!(err.contains(s(tmp.path())), "{err}");
    }
    assert_eq!(fs::read(tmp.path().join("f")).unwrap(), b"x");
}

#[test]
fn walk_verbose_shows_stripes_on_lustre() {
    let _serial = mfu_tests::serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("w");
    fs::create_dir(&root).unwrap();
    let fake = Arc::new(Fake::new(vec![root.clone()], 8));
    // Files made through the double carry a layout, as on Lustre.
    let dir = File::open(&root).unwrap();
    for (name, count) in [("one", 1u16), ("three", 3), ("also_three", 3)] {
        let c = std::ffi::CString::new(name).unwrap();
        use std::os::fd::AsFd;
        fake.create_striped(dir.as_fd(), &c, 0o644, count, MIB as u32)
            .unwrap();
    }
    let mut options = mfu::walk::Options::new([root.as_os_str().as_encoded_bytes()]);
    options.context.verbose = true;
    options.lustre = handle(&fake);
    let lines = steal::local::run(2, |comm| {
        let list = flist::walk::walk(
            comm,
            &[root.as_os_str().as_encoded_bytes().to_vec()],
            &Default::default(),
        )
        .list;
        let stripes = mfu::unstable::engine::walk_stripes::stripes(comm, &list, &options.lustre)
            .expect("on Lustre");
        mfu::unstable::engine::walk_stripes::summary(comm, &list, &stripes)
    });
    assert_eq!(
        lines[0],
        "Stripe counts: 1: 1 files (0 B); 3: 2 files (0 B)"
    );
    // The same line in the report of a verbose walk through the library.
    let reports = steal::local::run(2, |comm| mfu::walk::run(comm, &options).expect("walked"));
    assert!(reports
        .iter()
        .all(|r| r.stripes.as_deref() == Some(lines[0].as_str())));
    // Off Lustre: nothing.
    let counting = Arc::new(Counting::new(System));
    let api = LustreHandle(counting.clone() as Arc<dyn Lustre>);
    let none = steal::local::run(2, |comm| {
        let list = flist::walk::walk(
            comm,
            &[root.as_os_str().as_encoded_bytes().to_vec()],
            &Default::default(),
        )
        .list;
        mfu::unstable::engine::walk_stripes::stripes(comm, &list, &api).is_none()
    });
    assert!(none.iter().all(|n| *n));
    assert_eq!(counting.layout_calls(), 0);
}

fn xattr_set(p: &Path, name: &str, value: &[u8]) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid C strings and buffer.
    let r = unsafe {
        libc::setxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(r, 0, "setxattr {}", std::io::Error::last_os_error());
}

fn xattr_get(p: &Path, name: &str) -> Option<Vec<u8>> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 256];
    // SAFETY: valid C strings and buffer.
    let r = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (r >= 0).then(|| {
        buf.truncate(r as usize);
        buf
    })
}

fn walkdir(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walkdir(&p));
        }
        out.push(p);
    }
    out
}

// ---- find's Lustre tests, through the test double in the binary (MFU_RS_TEST_FAKE_LUSTRE) ----

/// A plain RAID0 layout of `count` stripes of `size` bytes on `osts`, in `pool`.
fn plain_layout(count: u16, size: u32, osts: &[u32], pool: Option<&str>) -> lustre_sys::Plain {
    let Layout::Plain(mut p) = Layout::request(count, size) else {
        unreachable!("a request is plain")
    };
    p.slots = osts
        .iter()
        .map(|&ost_index| lustre_sys::OstSlot {
            ost_index,
            ..Default::default()
        })
        .collect();
    p.pool = pool.map(|name| {
        let mut b = [0u8; 16];
        b[..name.len()].copy_from_slice(name.as_bytes());
        b
    });
    p
}

/// A composite layout of `(LCME flags, component)`.
fn composite(components: Vec<(u32, lustre_sys::Plain)>) -> Layout {
    Layout::Composite(lustre_sys::Composite {
        layout_gen: 1,
        flags: 0,
        mirror_count: 0,
        components: components
            .into_iter()
            .enumerate()
            .map(|(i, (flags, layout))| lustre_sys::Component {
                id: i as u32 + 1,
                flags,
                extent_start: (i as u64) << 20,
                extent_end: if i == 2 {
                    u64::MAX
                } else {
                    (i as u64 + 1) << 20
                },
                layout_gen: 1,
                layout,
            })
            .collect(),
    })
}

/// A tree whose files carry layouts stored for the double (`Fake::store`):
/// `plain4` 4 x 1 MiB on OSTs 0-3; `wide` 8 x 4 MiB on OSTs 0-7 in pool `flash` (MDT 1);
/// `one` 1 x 64 KiB on OST 5; `pfl` (PFL) 1 x 1 MiB on OST 6 in pool `ssd`, then 4 x 4 MiB on
/// OSTs 1,3,5,7 (both instantiated), then 8 x 16 MiB (not yet); `dom` data on the MDT then
/// RAID0 (not yet); `released` an HSM-released file; `nolayout` none; `sub/` a directory with a
/// default of 2 x 2 MiB; `link` a symlink to `plain4`.
fn lustre_tree(root: &Path) {
    use lustre_sys::fake::Fake;
    use lustre_sys::{LCME_FL_INIT, LOV_PATTERN_F_RELEASED, LOV_PATTERN_MDT};
    fs::create_dir_all(root.join("sub")).unwrap();
    let file = |name: &str, layout: Option<Layout>| {
        let p = root.join(name);
        fs::write(&p, name.as_bytes()).unwrap();
        if let Some(l) = layout {
            Fake::store(&p, &l).unwrap();
        }
    };
    let plain = |l: lustre_sys::Plain| Some(Layout::Plain(l));
    file(
        "plain4",
        plain(plain_layout(4, 1 << 20, &[0, 1, 2, 3], None)),
    );
    file(
        "wide",
        plain(plain_layout(
            8,
            4 << 20,
            &[0, 1, 2, 3, 4, 5, 6, 7],
            Some("flash"),
        )),
    );
    Fake::store_mdt(&root.join("wide"), 1).unwrap();
    file("one", plain(plain_layout(1, 64 << 10, &[5], None)));
    file(
        "pfl",
        Some(composite(vec![
            (LCME_FL_INIT, plain_layout(1, 1 << 20, &[6], Some("ssd"))),
            (LCME_FL_INIT, plain_layout(4, 4 << 20, &[1, 3, 5, 7], None)),
            (0, plain_layout(8, 16 << 20, &[], None)),
        ])),
    );
    let mut dom = plain_layout(0, 1 << 20, &[], None);
    dom.pattern = LOV_PATTERN_MDT;
    file(
        "dom",
        Some(composite(vec![
            (LCME_FL_INIT, dom),
            (0, plain_layout(4, 4 << 20, &[], None)),
        ])),
    );
    let mut released = plain_layout(1, 1 << 20, &[], None);
    released.pattern |= LOV_PATTERN_F_RELEASED;
    file("released", plain(released));
    file("nolayout", None);
    Fake::store(
        &root.join("sub"),
        &Layout::Plain(plain_layout(2, 2 << 20, &[], None)),
    )
    .unwrap();
    std::os::unix::fs::symlink("plain4", root.join("link")).unwrap();
}

/// The last components of the paths `out` lists, sorted and space-separated.
fn names(out: &[u8], root: &Path) -> String {
    let mut v: Vec<String> = String::from_utf8_lossy(out)
        .lines()
        .filter(|l| Path::new(l) != root)
        .map(|l| {
            Path::new(l)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v.join(" ")
}

/// `mfu-rs find ROOT ARGS` with the double holding `lustre_root`, at `ranks` (`-N`: `--ranks
/// N` in one process; 1: one process; N: `mpirun -np N`).
fn find_on(ranks: i32, root: &Path, lustre_root: &Path, args: &[&str]) -> mfu_tests::Run {
    let tool = mfu_tests::Tool::new("find");
    let tool = match ranks {
        n if n < 0 => tool.ranks((-n) as usize),
        n => tool.np(n as usize),
    };
    tool.env("MFU_RS_TEST_FAKE_LUSTRE", lustre_root)
        .arg(root)
        .args(args)
        .run()
}

/// Each case: the arguments, and the names they select in [`lustre_tree`].
const LUSTRE_FIND_CASES: &[(&[&str], &str)] = &[
    (&["--ost", "5"], "one pfl wide"),
    (&["--ost", "0,6"], "pfl plain4 wide"),
    (&["--ost", "lustre-OST0007_UUID"], "pfl wide"),
    (&["--mdt", "1"], "wide"),
    (
        &["--mdt", "0", "--type", "f"],
        "dom nolayout one pfl plain4 released",
    ),
    (&["--pool", "flash"], "wide"),
    (&["--pool", "ssd"], "pfl"),
    // PFL: the last instantiated component (4 x 4 MiB), not the 8 x 16 MiB one.
    (&["--stripe-count", "4"], "pfl plain4"),
    (&["--stripe-count", "8"], "wide"),
    (&["--stripe-count", "+3"], "pfl plain4 wide"),
    (&["--stripe-count", "-2"], "dom one released"),
    // A directory is tested on its default layout.
    (&["--stripe-count", "2"], "sub"),
    (&["--stripe-size", "4M"], "pfl wide"),
    (&["--stripe-size", "4194304"], "pfl wide"),
    (&["--stripe-size", "+1M"], "pfl sub wide"),
    (&["--stripe-size", "-1M"], "one"),
    (&["--stripe-size", "64k"], "one"),
    (&["--layout", "released"], "released"),
    (&["--layout", "mdt"], "dom"),
    (
        &["--layout", "raid0", "--type", "f"],
        "dom one pfl plain4 released wide",
    ),
    // Operators and groups.
    (
        &["--not", "--ost", "5", "--type", "f"],
        "dom nolayout plain4 released",
    ),
    (&["--ost", "5", "--or", "--pool", "flash"], "one pfl wide"),
    (
        &[
            "(",
            "--stripe-count",
            "4",
            "--or",
            "--layout",
            "mdt",
            ")",
            "--name",
            "p*",
        ],
        "pfl plain4",
    ),
    (&["!", "--layout", "raid0,mdt,released"], "link nolayout"),
];

#[test]
fn find_lustre_tests_select_by_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("lustre");
    lustre_tree(&root);
    for (args, want) in LUSTRE_FIND_CASES {
        let run = find_on(1, &root, &root, args).assert_status(0);
        assert_eq!(names(&run.stdout, &root), *want, "find {args:?}");
        assert!(run.stderr.is_empty(), "{args:?}: {}", run.stderr_str());
    }
    // The same through three thread ranks of one process.
    for (args, want) in &LUSTRE_FIND_CASES[..8] {
        let run = find_on(-3, &root, &root, args).assert_status(0);
        assert_eq!(names(&run.stdout, &root), *want, "--ranks 3 find {args:?}");
    }
}

#[test]
fn find_lustre_tests_select_by_layout_under_mpirun() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("lustre");
    lustre_tree(&root);
    for i in [0, 3, 7, 10, 13, 19, 21, 22] {
        let (args, want) = LUSTRE_FIND_CASES[i];
        let run = find_on(2, &root, &root, args).assert_status(0);
        assert_eq!(
            names(&run.stdout, &root),
            want,
            "mpirun -np 2 find {args:?}"
        );
    }
}

/// Off Lustre, the Lustre tests are false for every file and the run says so once (a warning:
/// exit 0), whether through the double (its root elsewhere) or the real calls.
#[test]
fn find_lustre_tests_off_lustre_are_false_with_one_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("lustre");
    lustre_tree(&root);
    let elsewhere = tmp.path().join("elsewhere");
    for np in [1, -3, 2] {
        let run =
            find_on(np, &root, &elsewhere, &["--ost", "5", "--or", "--mdt", "1"]).assert_status(0);
        assert_eq!(names(&run.stdout, &root), "", "np {np}");
        let err = run.stderr_str();
        assert_eq!(err.matches("is not on Lustre").count(), 1, "np {np}: {err}");
        assert!(err.contains(s(&root)), "{err}");
        let run =
            find_on(np, &root, &elsewhere, &["--not", "--stripe-count", "+0"]).assert_status(0);
        assert_eq!(
            names(&run.stdout, &root),
            "dom link nolayout one pfl plain4 released sub wide",
            "np {np}"
        );
    }
    // The real calls on a file system that is not Lustre: no layout anywhere.
    let run = mfu_tests::Tool::new("find")
        .env_remove("MFU_RS_TEST_FAKE_LUSTRE")
        .arg(&root)
        .args(["--stripe-count", "4"])
        .run()
        .assert_status(0);
    assert_eq!(names(&run.stdout, &root), "");
    assert_eq!(run.stderr_str().matches("is not on Lustre").count(), 1);
    // Without a Lustre test nothing is said.
    let run = find_on(1, &root, &elsewhere, &["--name", "one"]).assert_status(0);
    assert!(run.stderr.is_empty(), "{}", run.stderr_str());
    // Malformed values are usage errors.
    for bad in [
        &["--ost", "x"][..],
        &["--stripe-size", "4Q"],
        &["--stripe-count", "4M"],
        &["--layout", "raid1"],
        &["--pool", "a-pool-name-too-long"],
    ] {
        let run = find_on(1, &root, &root, bad).assert_status(2);
        assert!(
            run.stderr_str().contains(bad[0]),
            "{bad:?}: {}",
            run.stderr_str()
        );
    }
}

// ---- stripe by layout swap (LL_IOC_LOV_SWAP_LAYOUTS), through the test double ----

/// A root with `big` (40 000 bytes), `linked` and its hard link `linked2` (20 000) and `held`
/// (30 000); their contents.
fn swap_tree(root: &Path) -> Vec<(&'static str, Vec<u8>)> {
    fs::create_dir_all(root).unwrap();
    let files = [("big", 40_000usize), ("linked", 20_000), ("held", 30_000)];
    let mut out = Vec::new();
    for (i, (name, len)) in files.into_iter().enumerate() {
        let data: Vec<u8> = (0..len).map(|j| ((j * 7 + i) % 251) as u8).collect();
        fs::write(root.join(name), &data).unwrap();
        out.push((name, data));
    }
    fs::hard_link(root.join("linked"), root.join("linked2")).unwrap();
    out
}

fn leftovers(root: &Path) -> Vec<PathBuf> {
    walkdir(root)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(".mfu-tmp")
        })
        .collect()
}

/// Where the file system swaps layouts, stripe keeps each file's inode: its hard links stay
/// one file (restriped once, through its first name), a handle open during the run reads the
/// new data, the times stay; nothing is left beside the files. At 1, 2 and 3 ranks.
#[test]
fn stripe_swaps_layouts_keeping_inodes_hard_links_and_open_handles() {
    let _serial = mfu_tests::serial();
    use std::io::Read;
    for ranks in [1, 2, 3] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("s");
        let data = swap_tree(&root);
        let before: Vec<fs::Metadata> = data
            .iter()
            .map(|(n, _)| fs::metadata(root.join(n)).unwrap())
            .collect();
        let mut held = File::open(root.join("held")).unwrap();
        let fake = Arc::new(Fake::new(vec![root.clone()], 8).with_swap(true));
        let mut options = mfu::stripe::Options::new(&[root.as_os_str().as_encoded_bytes()]);
        options.api = handle(&fake);
        options.count = Some(2);
        let reports = steal::local::run(ranks, |comm| mfu::stripe::run(comm, &options).unwrap());
        for r in &reports {
            assert_eq!(r.status(), Status::Ok, "{ranks} ranks: {r:?}");
            assert_eq!(
                (r.restriped, r.swapped, r.rewritten, r.other_names, r.linked),
                (3, 3, 0, 1, 0),
                "{ranks} ranks: {r:?}"
            );
        }
        assert_eq!(fake.swaps(), 3);
        for ((name, bytes), meta) in data.iter().zip(&before) {
            let p = root.join(name);
            let now = fs::metadata(&p).unwrap();
            assert_eq!(now.ino(), meta.ino(), "{name}: the same inode");
            assert_eq!(
                (now.mtime(), now.mtime_nsec()),
                (meta.mtime(), meta.mtime_nsec()),
                "{name}: mtime kept"
            );
            assert!(fs::read(&p).unwrap() == *bytes, "{name}: data");
            assert_eq!(
                fake.layout_recorded(&p)
                    .as_ref()
                    .and_then(Layout::stripe_count),
                Some(2),
                "{name}: new layout"
            );
        }
        let (a, b) = (
            fs::metadata(root.join("linked")).unwrap(),
            fs::metadata(root.join("linked2")).unwrap(),
        );
        assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "still one file");
        let mut read = Vec::new();
        held.read_to_end(&mut read).unwrap();
        assert!(read == data[2].1, "the open handle reads the file");
        assert!(leftovers(&root).is_empty(), "{:?}", leftovers(&root));
        let line = mfu::unstable::cli::stripe::summary(&reports[0]);
        assert!(line.contains(": 3 by layout swap, 0 by rewrite"), "{line}");
        assert!(line.contains("1 further names"), "{line}");
    }
}

/// A file written to while it was copied (its data version moved before the swap, which the
/// swap's own check catches) is refused: exit 1, named, the file as the writer left it, its
/// layout unchanged, the copy removed.
#[test]
fn stripe_refuses_a_file_that_changed_during_the_copy() {
    let _serial = mfu_tests::serial();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s");
    fs::create_dir_all(&root).unwrap();
    let data = vec![3u8; 50_000];
    fs::write(root.join("busy"), &data).unwrap();
    let ino = fs::metadata(root.join("busy")).unwrap().ino();
    let fake = Arc::new(Fake::new(vec![root.clone()], 8).with_swap(true));
    let busy = root.join("busy");
    fake.before_next_swap(move || {
        use std::io::Write;
        fs::OpenOptions::new()
            .append(true)
            .open(&busy)
            .unwrap()
            .write_all(b"appended during the copy")
            .unwrap();
    });
    let mut options = mfu::stripe::Options::new(&[root.as_os_str().as_encoded_bytes()]);
    options.api = handle(&fake);
    options.count = Some(4);
    let reports = steal::local::run(2, |comm| mfu::stripe::run(comm, &options).unwrap());
    for r in &reports {
        assert_eq!(r.status(), Status::ItemsFailed, "{r:?}");
        assert_eq!((r.restriped, r.changed, r.swapped), (0, 1, 0), "{r:?}");
    }
    assert!(
        reports[0]
            .failures
            .iter()
            .any(|m| m.contains("busy") && m.contains("changed while it was copied")),
        "{:?}",
        reports[0].failures
    );
    let mut want = data.clone();
    want.extend_from_slice(b"appended during the copy");
    assert!(fs::read(root.join("busy")).unwrap() == want);
    assert_eq!(fs::metadata(root.join("busy")).unwrap().ino(), ino);
    assert_eq!(
        fake.layout_recorded(&root.join("busy")),
        None,
        "layout unchanged"
    );
    assert_eq!(fake.swaps(), 0);
    assert!(leftovers(&root).is_empty(), "{:?}", leftovers(&root));
}

/// The binary with the double standing in for Lustre (`MFU_RS_TEST_FAKE_LUSTRE`, swap on):
/// one process, three thread ranks, and `mpirun -np 2` keep every inode and say how each file
/// went; without swap the same run rewrites (new inodes) and skips the hard-linked file.
#[test]
fn stripe_binary_swaps_layouts_at_every_rank_count() {
    for np in [1, -3, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("s");
        let data = swap_tree(&root);
        let inodes: Vec<u64> = data
            .iter()
            .map(|(n, _)| fs::metadata(root.join(n)).unwrap().ino())
            .collect();
        let tool = mfu_tests::Tool::new("stripe");
        let tool = if np < 0 {
            tool.ranks(3)
        } else {
            tool.np(np as usize)
        };
        let run = tool
            .env("MFU_RS_TEST_FAKE_LUSTRE", &root)
            .env("MFU_RS_TEST_FAKE_LUSTRE_SWAP", "1")
            .args(["-c", "2"])
            .arg(&root)
            .run()
            .assert_status(0);
        let all = format!("{}{}", run.stdout_str(), run.stderr_str());
        assert!(
            all.contains("Restriped 3 files") && all.contains("3 by layout swap, 0 by rewrite"),
            "np {np}: {all}"
        );
        for ((name, bytes), ino) in data.iter().zip(&inodes) {
            let p = root.join(name);
            assert_eq!(fs::metadata(&p).unwrap().ino(), *ino, "np {np}: {name}");
            assert!(fs::read(&p).unwrap() == *bytes, "np {np}: {name}");
        }
        assert_eq!(fs::metadata(root.join("linked2")).unwrap().nlink(), 2);
        assert!(leftovers(&root).is_empty(), "{:?}", leftovers(&root));

        // Without swap: rewritten into new inodes, the hard-linked file skipped (exit 1).
        let tool = mfu_tests::Tool::new("stripe");
        let tool = if np < 0 {
            tool.ranks(3)
        } else {
            tool.np(np as usize)
        };
        let run = tool
            .env("MFU_RS_TEST_FAKE_LUSTRE", &root)
            .env_remove("MFU_RS_TEST_FAKE_LUSTRE_SWAP")
            .args(["-c", "4"])
            .arg(&root)
            .run()
            .assert_status(1);
        let all = format!("{}{}", run.stdout_str(), run.stderr_str());
        assert!(
            all.contains("0 by layout swap, 2 by rewrite"),
            "np {np}: {all}"
        );
        assert!(all.contains("cannot swap layouts"), "np {np}: {all}");
        assert_ne!(fs::metadata(root.join("big")).unwrap().ino(), inodes[0]);
        assert_eq!(fs::metadata(root.join("linked")).unwrap().ino(), inodes[1]);
        assert!(fs::read(root.join("big")).unwrap() == data[0].1);
    }
}
