//! `mfu-rs walk` end to end: the interop vectors of mpiFileUtils, at 1..4 ranks, under mpirun.

use flist::{io, FileList, FileType};
use mfu::prelude::Collect as Kept;
use mfu_tests::{bin, expect_status, make_vector_tree, mfu, mpirun, vector, Tool};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

fn read_list(path: &Path) -> FileList {
    steal::local::run(1, |c| {
        io::read(c, path.as_os_str().as_bytes()).expect("read list")
    })
    .remove(0)
}

/// What both mpiFileUtils and mfu-rs must agree on for one record: mode, size, mtime (s).
/// (Owners are not compared: the vector was written as root, a test may run as anyone.)
type Agreed = (u32, u64, i64);

/// Records keyed by path relative to the list's root (its shortest path).
fn relative_records(list: &FileList) -> BTreeMap<Vec<u8>, Agreed> {
    let root = list
        .iter()
        .map(|e| e.path)
        .min_by_key(|p| p.len())
        .expect("non-empty list")
        .to_vec();
    list.iter()
        .map(|e| {
            let m = e.meta.expect("stat list");
            let rel = e.path[root.len()..].to_vec();
            // Directory mtimes are fixed by the tree script; atime/ctime depend on the machine.
            (rel, (m.mode, m.size, m.mtime))
        })
        .collect()
}

#[test]
fn walk_of_the_vector_tree_matches_manifest_and_tree_mfu_at_np_1_2_3() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let manifest = make_vector_tree(&tree, 1, false);
    let reference = relative_records(&read_list(&vector("tree.mfu")));
    for np in [1, 2, 3] {
        let out = tmp.path().join(format!("walk{np}.mfu"));
        expect_status(
            mpirun(np, &bin())
                .arg("walk")
                .arg("-q")
                .arg("-o")
                .arg(&out)
                .arg(&tree),
            0,
        );
        let list = read_list(&out);
        let ours = relative_records(&list);
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            reference.keys().collect::<Vec<_>>(),
            "np={np}: the walked paths differ from tree.mfu's"
        );
        for (rel, (mode, size, mtime)) in &ours {
            let (rmode, rsize, rmtime) = reference[rel];
            assert_eq!(
                mode,
                &rmode,
                "np={np}: mode of {}",
                String::from_utf8_lossy(rel)
            );
            // A link's mtime is when the script made it; files and directories have fixed ones.
            if FileType::from_mode(*mode) != FileType::Symlink {
                assert_eq!(
                    mtime,
                    &rmtime,
                    "np={np}: mtime of {}",
                    String::from_utf8_lossy(rel)
                );
            }
            // Directory sizes depend on the file system; everything else must match.
            if FileType::from_mode(*mode) != FileType::Dir {
                assert_eq!(
                    *size,
                    rsize,
                    "np={np}: size of {}",
                    String::from_utf8_lossy(rel)
                );
            }
        }
        for item in manifest.as_array().unwrap() {
            let rel = format!("/{}", item["path"].as_str().unwrap());
            let (mode, size, mtime) = ours
                .get(rel.as_bytes())
                .unwrap_or_else(|| panic!("np={np}: {rel} of the manifest was not walked"));
            match item["type"].as_str().unwrap() {
                "f" => {
                    assert_eq!(FileType::from_mode(*mode), FileType::File, "{rel}");
                    assert_eq!(*size, item["size"].as_u64().unwrap(), "{rel}");
                    assert_eq!(*mtime, item["mtime"].as_i64().unwrap(), "{rel}");
                    let want = u32::from_str_radix(
                        item["mode"].as_str().unwrap().trim_start_matches("0o"),
                        8,
                    )
                    .unwrap();
                    assert_eq!(mode & 0o7777, want, "{rel}");
                }
                "l" => {
                    assert_eq!(FileType::from_mode(*mode), FileType::Symlink, "{rel}");
                    let target = item["target"].as_str().unwrap();
                    assert_eq!(
                        *size,
                        target.len() as u64,
                        "{rel}: a link's size is its target's length"
                    );
                    let on_disk = std::fs::read_link(tree.join(&rel[1..])).unwrap();
                    assert_eq!(on_disk.as_os_str().as_bytes(), target.as_bytes());
                }
                "d" => assert_eq!(FileType::from_mode(*mode), FileType::Dir, "{rel}"),
                t => panic!("unknown manifest type {t}"),
            }
        }
    }
}

#[test]
fn reading_and_rewriting_tree_mfu_is_byte_identical_at_np_1_2_3() {
    let tmp = tempfile::tempdir().unwrap();
    let original = std::fs::read(vector("tree.mfu")).unwrap();
    let sorted = std::fs::read(vector("tree.sorted.mfu")).unwrap();
    for np in [1, 2, 3] {
        let out = tmp.path().join(format!("y{np}.mfu"));
        expect_status(
            mpirun(np, &bin())
                .args(["walk", "-q", "-i"])
                .arg(vector("tree.mfu"))
                .arg("-o")
                .arg(&out),
            0,
        );
        assert!(
            std::fs::read(&out).unwrap() == original,
            "np={np}: rewritten tree.mfu differs"
        );
        let out = tmp.path().join(format!("s{np}.mfu"));
        expect_status(
            mpirun(np, &bin())
                .args(["walk", "-q", "-s", "name", "-i"])
                .arg(vector("tree.mfu"))
                .arg("-o")
                .arg(&out),
            0,
        );
        assert!(
            std::fs::read(&out).unwrap() == sorted,
            "np={np}: sorted list differs from tree.sorted.mfu"
        );
    }
}

#[test]
fn lite_text_list_reads_keeps_pipes_and_rewrites_identically() {
    let tmp = tempfile::tempdir().unwrap();
    // dwalk -l's list has no header: typed because the user says so. mfu-rs writes the same
    // lines between its header and its trailer.
    let original = std::fs::read(vector("tree.lite.mfu")).unwrap();
    let framed = [
        &b"#mfu-rs typed list v1\n"[..],
        &original,
        b"#mfu-rs end 44\n",
    ]
    .concat();
    for np in [1, 2, 3] {
        let out = tmp.path().join(format!("lite{np}.txt"));
        let printed = expect_status(
            mpirun(np, &bin())
                .args(["walk", "-p", "--input-format", "typed", "-i"])
                .arg(vector("tree.lite.mfu"))
                .arg("-o")
                .arg(&out),
            0,
        );
        assert!(
            std::fs::read(&out).unwrap() == framed,
            "np={np}: rewritten lite list differs"
        );
        let text = String::from_utf8_lossy(&printed.stdout);
        assert!(
            text.contains("/delta|pipe_2"),
            "a name with '|' lost its pipe:\n{text}"
        );
    }
}

#[test]
fn empty_list_writes_a_valid_v4_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("empty.mfu");
    std::fs::write(&out, b"stale content that must not survive").unwrap();
    let missing = tmp.path().join("does-not-exist");
    let res = expect_status(mfu(&["walk", "-o"]).arg(&out).arg(&missing), 1);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("does-not-exist") && err.contains("stat"),
        "error must name path and operation: {err}"
    );
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(&bytes[..8], &4u64.to_be_bytes(), "version 4");
    assert_eq!(&bytes[40..48], &0u64.to_be_bytes(), "nfiles = 0");
    assert_eq!(read_list(&out).len(), 0);
}

#[test]
fn sort_at_4_ranks_orders_like_1_rank_for_every_key() {
    let tmp = tempfile::tempdir().unwrap();
    for key in [
        "name",
        "user",
        "group",
        "uid",
        "gid",
        "atime",
        "mtime",
        "ctime",
        "size",
        "-size",
        "-mtime,name",
    ] {
        let one = tmp.path().join("one.mfu");
        let four = tmp.path().join("four.mfu");
        expect_status(
            mfu(&["--ranks", "1", "walk", "-q", "-s", key, "-i"])
                .arg(vector("tree.mfu"))
                .arg("-o")
                .arg(&one),
            0,
        );
        expect_status(
            mfu(&["--ranks", "4", "walk", "-q", "-s", key, "-i"])
                .arg(vector("tree.mfu"))
                .arg("-o")
                .arg(&four),
            0,
        );
        assert!(
            std::fs::read(&one).unwrap() == std::fs::read(&four).unwrap(),
            "key {key}: 4 ranks differ from 1"
        );
        if key == "size" {
            let l = read_list(&one);
            let sizes: Vec<u64> = l.iter().map(|e| e.meta.unwrap().size).collect();
            assert!(
                sizes.windows(2).all(|w| w[0] <= w[1]),
                "not sorted by size: {sizes:?}"
            );
        }
    }
    // And under a real launch.
    let mpi = tmp.path().join("mpi.mfu");
    let one = tmp.path().join("one.mfu");
    expect_status(
        mpirun(4, &bin())
            .args(["walk", "-q", "-s", "-size,name", "-i"])
            .arg(vector("tree.mfu"))
            .arg("-o")
            .arg(&mpi),
        0,
    );
    expect_status(
        mfu(&["walk", "-q", "-s", "-size,name", "-i"])
            .arg(vector("tree.mfu"))
            .arg("-o")
            .arg(&one),
        0,
    );
    assert!(std::fs::read(&one).unwrap() == std::fs::read(&mpi).unwrap());
}

#[test]
fn non_utf8_names_walk_and_round_trip_through_v4_and_text() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir(&tree).unwrap();
    let names: [&[u8]; 4] = [b"caf\xe9", b"a|b", b"sp ace", b"\xff\xfe|F"];
    for n in names {
        std::fs::write(tree.join(std::ffi::OsStr::from_bytes(n)), n).unwrap();
    }
    let v4 = tmp.path().join("l.mfu");
    let text = tmp.path().join("l.txt");
    let text2 = tmp.path().join("l2.txt");
    expect_status(
        mpirun(2, &bin())
            .args(["walk", "-q", "-o"])
            .arg(&v4)
            .arg(&tree),
        0,
    );
    expect_status(
        mfu(&["walk", "-q", "-t", "-i"])
            .arg(&v4)
            .arg("-o")
            .arg(&text),
        0,
    );
    expect_status(
        mpirun(3, &bin())
            .args(["walk", "-q", "-i"])
            .arg(&text)
            .arg("-o")
            .arg(&text2),
        0,
    );
    assert!(std::fs::read(&text).unwrap() == std::fs::read(&text2).unwrap());
    for list in [read_list(&v4), read_list(&text2)] {
        for n in names {
            let want = [tree.as_os_str().as_bytes(), b"/", n].concat();
            let e = list
                .iter()
                .find(|e| e.path == want)
                .unwrap_or_else(|| panic!("{} lost", String::from_utf8_lossy(n)));
            assert_eq!(e.kind, FileType::File);
        }
    }
}

#[test]
fn paths_longer_than_path_max_are_walked() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("deep");
    // 30 levels of 200-byte names: about 6 KB of path, more than PATH_MAX (4096).
    let script = format!(
        "import os\nfd=os.open({:?}, os.O_RDONLY)\nos.mkdir('deep', dir_fd=fd)\nfd=os.open('deep', os.O_RDONLY, dir_fd=fd)\n\
         for i in range(30):\n    n=('d%02d' % i)*50\n    n=n[:200]\n    os.mkdir(n, dir_fd=fd)\n    fd=os.open(n, os.O_RDONLY, dir_fd=fd)\n\
         f=os.open('leaf', os.O_WRONLY|os.O_CREAT, 0o644, dir_fd=fd)\nos.write(f, b'x'*7)\n",
        tmp.path().to_str().unwrap()
    );
    expect_status(Command::new("python3").args(["-c", &script]), 0);
    let out = tmp.path().join("deep.mfu");
    expect_status(
        mpirun(2, &bin())
            .args(["walk", "-q", "-o"])
            .arg(&out)
            .arg(&root),
        0,
    );
    let list = read_list(&out);
    assert_eq!(list.len(), 32, "root + 30 directories + leaf");
    let leaf = list
        .iter()
        .find(|e| e.path.ends_with(b"/leaf"))
        .expect("the leaf below PATH_MAX depth");
    assert!(leaf.path.len() > 4096);
    assert_eq!(leaf.meta.unwrap().size, 7);
}

#[test]
fn dereference_follows_links_and_reports_cycles() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    std::fs::create_dir_all(t.join("real/sub")).unwrap();
    std::fs::write(t.join("real/sub/f"), b"12345").unwrap();
    std::os::unix::fs::symlink("real", t.join("link")).unwrap();
    std::os::unix::fs::symlink("..", t.join("real/sub/up")).unwrap();
    let plain = expect_status(mfu(&["walk", "-p"]).arg(&t), 0);
    let text = String::from_utf8_lossy(&plain.stdout);
    assert!(
        !text.contains("/link/sub/f"),
        "without -L links are not followed"
    );
    let out = mfu(&["walk", "-L", "-p"]).arg(&t).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("/link/sub/f"),
        "with -L the link's tree is walked:\n{text}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cycle"),
        "a directory cycle must be reported: {err}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a reported cycle makes the walk incomplete"
    );
}

#[test]
fn summary_counts_and_histograms() {
    let out = expect_status(
        mfu(&["walk", "-d", "size:0,512,1M", "-f", "-i"]).arg(vector("tree.mfu")),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "Items: 44",
        "Directories: 18",
        "Files: 24",
        "Links: 2",
        "[0, 0]",
        "(512, 1048576]",
        "Size distribution (bytes):",
        "Size histogram:",
        "Items: every entry at its own size, directories and links included, as dwalk counts",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // Each bin is a table row: files, their share of all files, items (dwalk's count), and a
    // bar of the files scaled to the largest bin.
    let row = |bin: &str| {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(bin))
            .unwrap_or_else(|| panic!("no row {bin:?} in:\n{text}"));
        let cols: Vec<&str> = line[line.find(bin).unwrap() + bin.len()..]
            .split_whitespace()
            .collect();
        let items: u64 = cols[2].parse().unwrap();
        let files: u64 = cols[0].parse().unwrap();
        assert!(items >= files, "{line}");
        (
            cols[0].to_string(),
            cols[1].to_string(),
            cols.get(3).map_or(0, |b| b.len()),
        )
    };
    assert_eq!(row("(0, 512]"), ("9".into(), "37.5%".into(), 30));
    assert_eq!(row("(512, 1048576]"), ("12".into(), "50.0%".into(), 40));
    assert_eq!(
        row("[4.000 KiB, 8.000 KiB)"),
        ("5".into(), "20.8%".into(), 40)
    );
    assert_eq!(row("0 B"), ("1".into(), "4.2%".into(), 8));
    // dwalk's count: every item of the list is in one bin of each table.
    let out = expect_status(
        mfu(&["walk", "--json", "-d", "size:0,512,1M", "-f", "-i"]).arg(vector("tree.mfu")),
        0,
    );
    let v = json_of(&out, "walk");
    for table in ["distribution", "histogram"] {
        let sum = |key: &str| {
            v[table]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b[key].as_u64().unwrap())
                .sum::<u64>()
        };
        assert_eq!((sum("files"), sum("items")), (24, 44), "{table}: {v}");
    }
}

/// A tree of regular files, directories and symbolic links, and each entry's `lstat` size and
/// whether it is a regular file (the root included, as the walk lists it).
fn mixed_tree(root: &Path) -> Vec<(u64, bool)> {
    std::fs::create_dir_all(root.join("d/e")).unwrap();
    std::fs::create_dir(root.join("empty")).unwrap();
    for (f, n) in [
        ("a", 0),
        ("b", 10),
        ("d/c", 100),
        ("d/e/f", 3000),
        ("g", 70_000),
    ] {
        std::fs::write(root.join(f), vec![b'x'; n]).unwrap();
    }
    // A link's size is its target's length: 1, 40 and 700 bytes.
    std::os::unix::fs::symlink("a", root.join("l1")).unwrap();
    std::os::unix::fs::symlink("x".repeat(40), root.join("d/l2")).unwrap();
    std::os::unix::fs::symlink("y".repeat(700), root.join("d/e/l3")).unwrap();
    let mut sizes = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        sizes.push((m.len(), m.is_file()));
        if m.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    sizes
}

/// `walk -d` and `-f` count each bin twice, labelled: its regular files, and its items of any
/// type at their own sizes (directories and links included), which is what dwalk counts; in
/// the text summary and in `--json`, at one process and at 3 thread ranks.
#[test]
fn distribution_and_histogram_count_files_and_every_item_as_dwalk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let sizes = mixed_tree(&root);
    assert_eq!(sizes.len(), 12);
    // Expected (files, items) per bin of `-d size:0,100,1k`: [0,0], (0,100], (100,1024],
    // (1024,inf); and per power-of-two bin of `-f` (those holding any item, ascending).
    let seps = [0u64, 100, 1024];
    let mut dist = vec![(0u64, 0u64); seps.len() + 1];
    let mut hist = BTreeMap::new();
    for &(size, file) in &sizes {
        let d = &mut dist[seps.partition_point(|&s| s < size)];
        let h = hist
            .entry(64 - size.leading_zeros())
            .or_insert((0u64, 0u64));
        for (files, items) in [d, h] {
            *files += u64::from(file);
            *items += 1;
        }
    }
    let hist: Vec<(u64, u64)> = hist.into_values().collect();
    let counts = |bins: &serde_json::Value| -> Vec<(u64, u64)> {
        bins.as_array()
            .unwrap()
            .iter()
            .map(|b| (b["files"].as_u64().unwrap(), b["items"].as_u64().unwrap()))
            .collect()
    };
    let args = ["-d", "size:0,100,1k", "-f"];
    for ranks in [None, Some(3)] {
        let tool = |json: bool| {
            let mut t = Tool::new("walk").args(args);
            if json {
                t = t.arg("--json");
            }
            if let Some(n) = ranks {
                t = t.ranks(n);
            }
            t.arg(&root).expect(0)
        };
        let v = json_of(&tool(true), "walk");
        assert_eq!(
            (v["items"].as_u64(), v["files"].as_u64()),
            (Some(12), Some(5))
        );
        assert_eq!(counts(&v["distribution"]), dist, "{ranks:?}: {v}");
        assert_eq!(counts(&v["histogram"]), hist, "{ranks:?}: {v}");
        // The text: both counts under their labels, row by row.
        let out = tool(false);
        let text = String::from_utf8_lossy(&out.stdout);
        let header = text
            .lines()
            .find(|l| l.contains("Bin") && l.contains("Files") && l.contains("Items"))
            .unwrap_or_else(|| panic!("no table header in:\n{text}"));
        let cols: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(cols, ["Bin", "Files", "Share", "Items"], "{header}");
        for (range, (files, items)) in ["[0, 0]", "(0, 100]", "(100, 1024]", "(1024, inf)"]
            .iter()
            .zip(&dist)
        {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(range))
                .unwrap_or_else(|| panic!("no row {range} in:\n{text}"));
            let cols: Vec<&str> = line.trim_start()[range.len()..]
                .split_whitespace()
                .collect();
            assert_eq!(
                (cols[0], cols[2]),
                (files.to_string().as_str(), items.to_string().as_str()),
                "{line}"
            );
        }
        assert_eq!(
            text.matches("as dwalk counts").count(),
            2,
            "one note under each table:\n{text}"
        );
    }
}

#[test]
fn lists_pass_through_stdin_and_stdout_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let v = mfu_tests::shell_quote(&vector("tree.mfu"));
    let original = std::fs::read(vector("tree.mfu")).unwrap();
    // v4 in on stdin, v4 out on stdout: the same bytes, with one process and with 2 ranks on
    // either side; the summary goes to stderr, so stdout is the list alone.
    for (left, right) in [("$M", "$M"), ("$R", "$R"), ("$M", "$R"), ("$R", "$M")] {
        let out = mfu_tests::shell(
            &format!("{left} walk -i {v} -o - | {right} walk -i - -o -"),
            0,
        );
        assert!(
            out.stdout == original,
            "{left} | {right}: the list changed on its way through the pipe"
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("Items: 44"));
    }
    // Text lists and NUL lists read from stdin.
    let text = tmp.path().join("t.txt");
    mfu_tests::shell(
        &format!(
            "printf '/x/a b|F\\n/x/c|D\\n' | $R walk --input-format typed -i - -o {}",
            text.display()
        ),
        0,
    );
    assert_eq!(
        std::fs::read(&text).unwrap(),
        b"#mfu-rs typed list v1\n/x/a b|F\n/x/c|D\n#mfu-rs end 2\n"
    );
    mfu_tests::shell(
        &format!(
            "printf '/x/p\\0/x/q|r\\0' | $M walk -i - -t -o {}",
            text.display()
        ),
        0,
    );
    assert_eq!(
        std::fs::read(&text).unwrap(),
        b"#mfu-rs typed list v1\n/x/p|U\n/x/q|r|U\n#mfu-rs end 2\n"
    );
    // A damaged list on stdin is an error naming standard input, exit 2.
    let out = mfu_tests::shell(&format!("head -c 100 {v} | $R walk -i -"), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("standard input"), "{err}");
}

#[test]
fn walk_pipes_into_rm_which_removes_what_the_list_names() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("a/b")).unwrap();
    for f in ["a/1", "a/b/2", "3"] {
        std::fs::write(tree.join(f), f).unwrap();
    }
    std::fs::create_dir(tmp.path().join("kept")).unwrap();
    let removed = tmp.path().join("removed.txt");
    let out = mfu_tests::shell(
        &format!(
            "$R walk -o - {} | $M rm -i - -o - | $R walk -i - -t -o {}",
            tree.display(),
            removed.display()
        ),
        0,
    );
    assert!(!tree.exists(), "the tree named by the piped list is gone");
    assert!(tmp.path().join("kept").is_dir());
    let listed = std::fs::read_to_string(&removed).unwrap();
    // Six entries, between the header and the trailer that counts them.
    assert_eq!(listed.lines().count(), 8, "{listed}");
    assert!(listed.ends_with("\n#mfu-rs end 6\n"), "{listed}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Removed"));
}

#[test]
fn old_names_dispatch_and_help_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let link = tmp.path().join("dwalk");
    std::os::unix::fs::symlink(bin(), &link).unwrap();
    let out = expect_status(
        mfu_tests::clean_env(&mut Command::new(&link))
            .arg("-i")
            .arg(vector("tree.mfu")),
        0,
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Items: 44"));
    expect_status(&mut mfu(&["dwalk", "--help"]), 0);
    expect_status(
        mfu(&["walk", "--sort", "bogus", "-i"]).arg(vector("tree.mfu")),
        2,
    );
    expect_status(&mut mfu(&["walk", "-i", "/nonexistent/list.mfu"]), 2);
    expect_status(&mut mfu(&["walk"]), 2);
}

#[test]
fn build_without_mpi_runs_alone_and_refuses_many_tasks() {
    let out = Tool::new("walk")
        .nompi()
        .arg("-i")
        .arg(vector("tree.mfu"))
        .run()
        .assert_status(0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Items: 44"));
    for var in ["SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"] {
        let out = Tool::new("walk")
            .nompi()
            .env(var, "4")
            .arg("-i")
            .arg(vector("tree.mfu"))
            .run()
            .assert_status(2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("without MPI") && err.contains(&format!("{var}=4")),
            "{err}"
        );
    }
    // The no-MPI build still runs many thread ranks on request.
    Tool::new("walk")
        .nompi()
        .ranks(3)
        .args(["-s", "name", "-i"])
        .arg(vector("tree.mfu"))
        .run()
        .assert_status(0);
}

#[test]
fn progress_lines_appear_on_stderr_from_rank_0() {
    let tmp = tempfile::tempdir().unwrap();
    for d in 0..40 {
        let dir = tmp.path().join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f}")), b"").unwrap();
        }
    }
    let out = expect_status(
        mfu(&["--ranks", "2", "walk", "--progress", "0.0005"]).arg(tmp.path()),
        0,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("Walked ")).collect();
    assert!(!lines.is_empty(), "no progress line in:\n{err}");
    assert!(lines.iter().all(|l| l.contains("items/s")), "{err}");
    let quiet = expect_status(mfu(&["walk", "--progress", "0"]).arg(tmp.path()), 0);
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("Walked "));
    expect_status(&mut mfu(&["walk", "--progress", "soon", "/"]), 2);
}

#[test]
fn lite_walk_lists_names_and_types_without_stat() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let manifest = make_vector_tree(&tree, 1, false);
    let out = tmp.path().join("lite.txt");
    expect_status(
        mpirun(2, &bin())
            .args(["walk", "-q", "-l", "-o"])
            .arg(&out)
            .arg(&tree),
        0,
    );
    let list = read_list(&out);
    assert_eq!(list.detail(), flist::Detail::Lite);
    let prefix = tree.as_os_str().as_bytes();
    for item in manifest.as_array().unwrap() {
        let want = [prefix, b"/", item["path"].as_str().unwrap().as_bytes()].concat();
        let e = list
            .iter()
            .find(|e| e.path == want)
            .unwrap_or_else(|| panic!("{} missing", item["path"]));
        let kind = match item["type"].as_str().unwrap() {
            "f" => FileType::File,
            "l" => FileType::Symlink,
            _ => FileType::Dir,
        };
        assert_eq!(e.kind, kind, "{}", item["path"]);
    }
    assert_eq!(list.len(), 44);
    // A lite list can't be sorted by a metadata field: usage error, nothing written.
    let sorted = tmp.path().join("sorted.txt");
    expect_status(
        mfu(&["walk", "-l", "-s", "size", "-o"])
            .arg(&sorted)
            .arg(&tree),
        2,
    );
    assert!(!sorted.exists());
}

#[test]
fn walk_as_a_library_function_reports_counts_and_failures() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::{Context, ToolReport};
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir_all(tree.join("d/e")).unwrap();
    for (f, n) in [("a", 10), ("d/b", 20), ("d/e/c", 30)] {
        std::fs::write(tree.join(f), vec![b'x'; n]).unwrap();
    }
    std::os::unix::fs::symlink("a", tree.join("l")).unwrap();
    let missing = tmp.path().join("missing");
    let kept = Arc::new(Kept::default());
    let mut options = mfu::walk::Options::new([tree.as_os_str().as_bytes()]);
    options.context = Context::new(kept.clone());
    options.print = true;
    options.file_histogram = true;
    let reports = steal::local::run(2, |comm| mfu::walk::run(comm, &options).expect("walked"));
    for r in &reports {
        assert_eq!((r.items, r.dirs, r.files, r.links), (7, 3, 3, 1), "{r:?}");
        assert_eq!(r.bytes, 60);
        assert_eq!(r.walk_errors, 0);
        assert_eq!(r.status(), mfu::Status::Ok);
        let summary = r.summary();
        assert_eq!((summary.items, summary.bytes, summary.failed), (7, 60, 0));
        let bins = r.histogram.as_ref().expect("asked for");
        assert_eq!(bins.iter().map(|b| b.files).sum::<u64>(), 3);
    }
    // The listing came through the events, one line per item, in list order.
    let printed = String::from_utf8(kept.output.lock().unwrap().clone()).unwrap();
    assert_eq!(printed.lines().count(), 7, "{printed}");
    assert!(printed.contains("/t/d/e/c\n"), "{printed}");
    assert!(kept.errors.lock().unwrap().is_empty());

    // A path that does not exist is a failure, counted and named, and makes the status 1.
    let kept = Arc::new(Kept::default());
    let mut options =
        mfu::walk::Options::new([tree.as_os_str().as_bytes(), missing.as_os_str().as_bytes()]);
    options.context = Context::new(kept.clone());
    let reports = steal::local::run(2, |comm| mfu::walk::run(comm, &options).expect("walked"));
    for r in &reports {
        assert_eq!(r.walk_errors, 1, "{r:?}");
        assert!(r.incomplete);
        assert_eq!(r.summary().failed, 1);
        assert_eq!(r.status(), mfu::Status::ItemsFailed);
        assert!(
            r.failures.iter().any(|f| f.contains("missing")),
            "{:?}",
            r.failures
        );
    }
    let errors = kept.errors.lock().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("missing") && e.contains("stat")),
        "{errors:?}"
    );

    // A list that cannot be read is an error on every rank, and nothing is done.
    let options = mfu::walk::Options {
        input: mfu::Input::file(missing.as_os_str().as_bytes()),
        ..Default::default()
    };
    let errs = steal::local::run(2, |comm| mfu::walk::run(comm, &options).unwrap_err());
    assert!(errs[0].message.contains("missing"), "{}", errs[0]);
}

/// The JSON report of `args` (stdout, one object), after checking its common fields.
fn json_of(out: &std::process::Output, tool: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["tool"], tool);
    assert_eq!(v["status"].as_i64(), out.status.code().map(i64::from));
    for k in ["seconds", "items", "bytes", "failed"] {
        assert!(v[k].is_number(), "{k} in {v}");
    }
    v
}

#[test]
fn json_report_has_the_counts_of_the_text_summary() {
    let text = expect_status(mfu(&["walk", "-i"]).arg(vector("tree.mfu")), 0);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let out = expect_status(mfu(&["walk", "--json", "-i"]).arg(vector("tree.mfu")), 0);
    let v = json_of(&out, "walk");
    assert_eq!(v["status"], 0);
    assert_eq!(v["failed"], 0);
    let items = v["items"].as_u64().unwrap();
    assert!(
        text.contains(&format!("Items: {items}\n")),
        "{items}:\n{text}"
    );
    let bytes = v["bytes"].as_u64().unwrap();
    assert!(
        text.contains(&format!("Data: {} (", flist::units::human_bytes(bytes))),
        "{bytes}:\n{text}"
    );
    assert!(
        text.contains(&format!("  Files: {}\n", v["files"])),
        "{v}\n{text}"
    );
    // The summary is not printed with --json (stdout is the report alone).
    assert!(!String::from_utf8_lossy(&out.stderr).contains("Items:"));

    // A failure: counted, status 1, in both forms.
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let out = expect_status(mfu(&["walk", "--json"]).arg(tmp.path()).arg(&missing), 1);
    let v = json_of(&out, "walk");
    assert_eq!(v["failed"], 1);
    assert_eq!(v["items"], 1);
    let text = expect_status(mfu(&["walk"]).arg(tmp.path()).arg(&missing), 1);
    assert!(String::from_utf8_lossy(&text.stdout).contains("Items: 1\n"));
    assert!(String::from_utf8_lossy(&text.stderr).contains("1 paths could not be read"));
}

/// `walk -p` prints dwalk's lines (mpiFileUtils' `mfu_flist_print`) in list order, before the
/// summary: `MODE USER GROUP %7.3f %3s %b %e %Y %H:%M PATH`, and `Type=T File=PATH` for a lite
/// walk; scripts written for dwalk parse them.
#[test]
fn print_lines_are_dwalks_and_come_before_the_summary() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    std::fs::create_dir(&t).unwrap();
    std::fs::write(t.join("small"), vec![b'x'; 232]).unwrap();
    std::fs::write(t.join("big"), vec![b'y'; 1005 * 1024]).unwrap();
    std::fs::set_permissions(t.join("small"), std::fs::Permissions::from_mode(0o640)).unwrap();
    // 2025-11-25 18:04:05 UTC and 2021-03-07 09:00:00 UTC.
    let times = [
        ("small", 1_764_093_845),
        ("big", 1_615_107_600),
        (".", 1_615_107_600),
    ];
    for (name, secs) in times {
        let stamp = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: secs,
                tv_nsec: 0,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: secs,
                tv_nsec: 0,
            },
        };
        let flags = rustix::fs::AtFlags::empty();
        rustix::fs::utimensat(rustix::fs::CWD, t.join(name), &stamp, flags).unwrap();
    }
    let root = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let group = String::from_utf8(Command::new("id").arg("-gn").output().unwrap().stdout).unwrap();
    let (user, group) = (root.trim(), group.trim());
    let p = t.display();
    let want = [
        format!("drwxr-xr-x {user} {group}   "),
        format!("-rw-r--r-- {user} {group}   0.981 MiB Mar  7 2021 09:00 {p}/big\n"),
        format!("-rw-r----- {user} {group} 232.000   B Nov 25 2025 18:04 {p}/small\n"),
    ];
    for np in [1, 2] {
        let out = Tool::new("walk")
            .np(np)
            .args(["-p", "-s", "name"])
            .arg(&t)
            .env("TZ", "UTC")
            .run()
            .assert_status(0);
        let text = out.stdout_str();
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        assert!(lines[0].starts_with(&want[0]), "np {np}:\n{text}");
        assert!(
            lines[0].ends_with(&format!(" Mar  7 2021 09:00 {p}\n")),
            "np {np}:\n{text}"
        );
        assert_eq!(lines[1], want[1], "np {np}:\n{text}");
        assert_eq!(lines[2], want[2], "np {np}:\n{text}");
        assert!(
            lines[3].starts_with("Walked 3 items in "),
            "np {np}:\n{text}"
        );
        let lite = Tool::new("walk")
            .np(np)
            .args(["-p", "-l", "-s", "name"])
            .arg(&t)
            .run()
            .assert_status(0)
            .stdout_str();
        let want_lite = format!(
            "Type=DIR File={p}\nType=REG File={p}/big\nType=REG File={p}/small\nWalked 3 items in "
        );
        assert!(lite.starts_with(&want_lite), "np {np}:\n{lite}");
    }
}

/// Defect: a list written with `-o` was renamed into place with no sync at all (a crash soon
/// after could leave a list that reads short under its name). Now every rank syncs its part
/// of the temporary before rank 0 renames it, and the directory is synced after the rename.
/// The list is read with `-i` (its records spread evenly: both ranks write a part) and written
/// by `find -o` under strace (`-y` shows each descriptor's path).
#[test]
fn a_list_is_synced_by_every_rank_before_its_rename_and_its_directory_after() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for i in 0..40 {
        std::fs::write(src.join(format!("f{i}")), b"x").unwrap();
    }
    let walked = tmp.path().join("walked.mfu");
    Tool::new("walk")
        .arg("-o")
        .arg(&walked)
        .arg(&src)
        .run()
        .assert_status(0);
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let log = tmp.path().join("strace.log");
    let script = tmp.path().join("traced.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec strace -f -y -qq -o '{}' -e trace=fsync,fdatasync,rename,renameat,renameat2 '{}' \"$@\"\n",
            log.display(),
            bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for text in [false, true] {
        let mut tool = Tool::new("find").ranks(2).program(&script);
        if text {
            tool = tool.arg("--text");
        }
        tool.arg("-i")
            .arg(&walked)
            .arg("-o")
            .arg(out_dir.join("list"))
            .run()
            .assert_status(0);
        let calls = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = calls.lines().collect();
        let renamed = lines
            .iter()
            .position(|l| l.contains("rename") && l.contains("\"list\")"))
            .unwrap_or_else(|| panic!("text {text}: no rename to the list in\n{calls}"));
        // Both ranks (threads: each its own id on its lines) synced the temporary.
        let synced: std::collections::BTreeSet<&str> = lines[..renamed]
            .iter()
            .filter(|l| l.contains("sync(") && l.contains(".mfu-tmp>"))
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert!(synced.len() >= 2, "text {text}: every rank syncs:\n{calls}");
        let dir = format!("<{}>)", out_dir.display());
        assert!(
            lines[renamed..]
                .iter()
                .any(|l| l.contains("fsync(") && l.contains(&dir)),
            "text {text}: the directory synced after the rename:\n{calls}"
        );
        let names: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
        assert_eq!(names.len(), 1, "the list alone");
    }
}

/// `-o NAME` with no `/` is written in the current directory (the temporary beside it there,
/// never in `/`), and written again over itself.
#[test]
fn a_list_named_without_a_directory_is_written_in_the_current_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"x").unwrap();
    for _ in 0..2 {
        Tool::new("walk")
            .ranks(2)
            .current_dir(tmp.path())
            .args(["--text", "-o", "odd |name.txt"])
            .arg(&src)
            .run()
            .assert_status(0);
        let list = std::fs::read_to_string(tmp.path().join("odd |name.txt")).unwrap();
        assert!(list.contains("/src/f|F\n"), "{list}");
        let mut names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["odd |name.txt", "src"]);
    }
}
