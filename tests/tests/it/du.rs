//! `mfu-rs du` end to end: its totals equal GNU `du -s` (allocated) and `du -s --apparent-size
//! -B1`, and every table equals the one made from `find -printf` on the same tree (owners
//! changed with chown, hard links within and across directories, a sparse file, a deep chain
//! of directories, names that are not UTF-8); ages by set times; the same report at 1 rank,
//! `--ranks 3` and `mpirun -np 2`; JSON, text, SVG and HTML agree; lists, empty trees and
//! missing paths.

use mfu_tests::Tool;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn path(root: &Path, name: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(name))
}

fn own(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
}

/// A tree of three owners with every case du must get right.
fn tree(root: &Path) {
    let write = |name: &[u8], len: usize, uid: u32| {
        let p = path(root, name);
        fs::write(&p, mfu_tests::noise(len as u64, len)).unwrap();
        own(&p, uid, uid + 5);
    };
    fs::create_dir_all(root.join("alice/sub")).unwrap();
    fs::create_dir_all(root.join("bob/x")).unwrap();
    fs::create_dir(root.join("empty")).unwrap();
    own(&root.join("alice"), 1001, 1006);
    own(&root.join("alice/sub"), 1001, 1006);
    own(&root.join("bob"), 65534, 65534);
    write(b"alice/big", 200_000, 1001);
    write(b"alice/small", 10, 1001);
    fs::hard_link(root.join("alice/big"), root.join("alice/big link")).unwrap();
    // Across top directories: counted once, under the name that sorts first (alice/...).
    write(b"alice/shared", 70_000, 1001);
    fs::hard_link(root.join("alice/shared"), root.join("bob/x/shared")).unwrap();
    write(b"bob/caf\xe9", 3000, 65534);
    write(b"bob/with space", 1, 65534);
    write(b"bob/x/\xff\xfe odd", 12_345, 65534);
    write(b"top.bin", 50_000, 0);
    // Sparse: 10 MiB apparent, 4 KiB allocated.
    let sparse = root.join("bob/sparse");
    let f = fs::File::create(&sparse).unwrap();
    f.set_len(10 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[7u8; 4096], 0).unwrap();
    drop(f);
    own(&sparse, 65534, 65534);
    // Deep.
    let mut deep = root.join("alice/sub");
    for i in 0..30 {
        deep = deep.join(format!("d{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("leaf"), vec![1u8; 5000]).unwrap();
    own(&deep.join("leaf"), 1001, 1006);
    std::os::unix::fs::symlink("alice/big", root.join("ln")).unwrap();
}

/// One entry as `find -printf` tells it.
#[derive(Clone, Debug)]
struct Found {
    dev: u64,
    ino: u64,
    blocks: u64,
    size: u64,
    uid: u32,
    gid: u32,
    dir: bool,
    path: Vec<u8>,
}

/// Every entry of `root`, each inode once (the name whose bytes sort first), by `find`.
fn find(root: &Path) -> Vec<Found> {
    let out = Command::new("find")
        .arg(root)
        .args(["-printf", "%D %i %b %s %U %G %y %p\\0"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut all: Vec<Found> = out
        .stdout
        .split(|&b| b == 0)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let mut f = r.splitn(8, |&b| b == b' ');
            let mut num = || -> u64 {
                std::str::from_utf8(f.next().unwrap())
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            let (dev, ino, blocks, size) = (num(), num(), num(), num());
            let (uid, gid) = (num() as u32, num() as u32);
            let dir = f.next().unwrap() == b"d";
            Found {
                dev,
                ino,
                blocks,
                size,
                uid,
                gid,
                dir,
                path: f.next().unwrap().to_vec(),
            }
        })
        .collect();
    all.sort_by(|a, b| (a.dev, a.ino, &a.path).cmp(&(b.dev, b.ino, &b.path)));
    all.dedup_by(|later, first| (later.dev, later.ino) == (first.dev, first.ino));
    all.sort_by(|a, b| a.path.cmp(&b.path));
    all
}

type Use = (u64, u64, u64);

fn add(m: &mut BTreeMap<Vec<u8>, Use>, k: &[u8], f: &Found) {
    let e = m.entry(k.to_vec()).or_default();
    e.0 += 1;
    e.1 += f.size;
    e.2 += f.blocks;
}

fn usage(v: &Value) -> Use {
    let n = |k: &str| v[k].as_u64().unwrap();
    (n("files"), n("bytes"), n("blocks"))
}

fn shown(p: &[u8]) -> String {
    flist::path::display(p).into_owned()
}

/// Rows of (key, usage) in the report's order, the key as the JSON has it.
fn rows(v: &Value, key: &str) -> Vec<(String, Use)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let k = match &r[key] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k, usage(&r["usage"]))
        })
        .collect()
}

/// Largest first as du ranks (allocated, then bytes, then path), the first `n`.
fn ranked(m: &BTreeMap<Vec<u8>, Use>, n: usize) -> Vec<(String, Use)> {
    let mut v: Vec<(&Vec<u8>, &Use)> = m.iter().collect();
    v.sort_by(|a, b| (b.1 .2, b.1 .1).cmp(&(a.1 .2, a.1 .1)).then(a.0.cmp(b.0)));
    v.into_iter().take(n).map(|(k, u)| (shown(k), *u)).collect()
}

fn du_json(tool: Tool) -> Value {
    let run = tool.arg("--json").expect(0);
    serde_json::from_slice(&run.stdout).unwrap()
}

/// The first number `du ARGS root` prints.
fn gnu_du(args: &[&str], root: &Path) -> u64 {
    let out = Command::new("du").args(args).arg(root).output().unwrap();
    assert!(out.status.success(), "du {args:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

const NOW: &str = "@1800000000";

#[test]
fn tables_equal_du_and_find_at_1_3_and_2_mpi_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let root_bytes = root.as_os_str().as_bytes();
    let found = find(&root);
    let args = ["--top", "4", "--depth", "2", "--now", NOW];
    let v = du_json(Tool::new("du").args(args).arg(&root));
    // Totals as GNU du's.
    let total = usage(&v["total"]);
    assert_eq!(total.1, gnu_du(&["-s", "--apparent-size", "-B1"], &root));
    assert_eq!(total.2 * 512, gnu_du(&["-s", "-B1"], &root));
    assert_eq!(
        total.2.div_ceil(2),
        gnu_du(&["-s"], &root),
        "1 KiB blocks as du -s"
    );
    // Owners, directories and files as find's.
    let mut users: BTreeMap<Vec<u8>, Use> = BTreeMap::new();
    let mut groups = users.clone();
    let mut dirs = users.clone();
    let mut files = users.clone();
    for f in &found {
        add(&mut users, f.uid.to_string().as_bytes(), f);
        add(&mut groups, f.gid.to_string().as_bytes(), f);
        if f.dir {
            add(&mut dirs, &f.path, f);
        } else {
            add(&mut files, &f.path, f);
        }
        let mut i = root_bytes.len();
        while let Some(j) = f.path[i..].iter().position(|&b| b == b'/') {
            add(&mut dirs, &f.path[..i + j], f);
            i += j + 1;
        }
    }
    assert_eq!(total, dirs[root_bytes], "the root's subtree is everything");
    let by_id = |m: &BTreeMap<Vec<u8>, Use>| -> BTreeMap<String, Use> {
        m.iter().map(|(k, u)| (shown(k), *u)).collect()
    };
    let json_ids =
        |key: &str| -> BTreeMap<String, Use> { rows(&v[key], "id").into_iter().collect() };
    assert_eq!(json_ids("users"), by_id(&users));
    assert_eq!(json_ids("groups"), by_id(&groups));
    let names: Vec<&str> = v["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"root") && names.contains(&"nobody") && names.contains(&"1001"));
    assert_eq!(rows(&v["largest_files"], "path"), ranked(&files, 4));
    assert_eq!(rows(&v["largest_dirs"], "path"), ranked(&dirs, 4));
    let shallow: BTreeMap<Vec<u8>, Use> = dirs
        .iter()
        .filter(|(d, _)| d[root_bytes.len()..].iter().filter(|&&b| b == b'/').count() <= 2)
        .map(|(d, u)| (d.clone(), *u))
        .collect();
    assert_eq!(rows(&v["dirs"], "path"), ranked(&shallow, usize::MAX));
    assert!(
        v["dirs"].to_string().contains("bob/x\""),
        "depth 2 listed: {}",
        v["dirs"]
    );
    // The same report, text and JSON, at any rank count.
    let text = |t: Tool| t.args(args).arg(&root).expect(0).stdout.clone();
    let one = text(Tool::new("du"));
    let json_no_time = |mut v: Value| {
        v["seconds"] = Value::Null;
        v
    };
    for (what, tool) in [
        ("--ranks 3", Tool::new("du").ranks(3)),
        ("mpirun -np 2", Tool::new("du").mpi(2)),
    ] {
        assert_eq!(
            String::from_utf8_lossy(&text(tool.clone())),
            String::from_utf8_lossy(&one),
            "{what}"
        );
        let other = du_json(tool.args(args).arg(&root));
        assert_eq!(json_no_time(other), json_no_time(v.clone()), "{what}");
    }
}

#[test]
fn text_shows_the_json_numbers_in_the_chosen_units() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    for units in [&[][..], &["--apparent-size", "-B1"][..], &["-B", "4K"][..]] {
        let tool = Tool::new("du").args(["--now", NOW]).args(units).arg(&root);
        let v = du_json(tool.clone());
        let text = String::from_utf8(tool.expect(0).stdout.clone()).unwrap();
        let block = v["units"]["block_size"].as_u64().unwrap();
        let apparent = v["units"]["measure"] == "apparent";
        let size = |u: Use| {
            let b = if apparent { u.1 } else { u.2 * 512 };
            b.div_ceil(block)
        };
        // Every table's rows, in order, as `SIZE ENTRIES NAME` lines.
        let mut want = Vec::new();
        for (key, name) in [("users", "name"), ("groups", "name")] {
            for r in v[key].as_array().unwrap() {
                let u = usage(&r["usage"]);
                want.push(format!(
                    "{:>12} {:>12}  {}",
                    size(u),
                    u.0,
                    r[name].as_str().unwrap()
                ));
            }
        }
        for key in ["dirs", "largest_dirs", "largest_files"] {
            for (p, u) in rows(&v[key], "path") {
                want.push(format!("{:>12} {:>12}  {p}", size(u), u.0));
            }
        }
        let lines: Vec<&str> = text.lines().collect();
        let mut at = 0;
        for w in &want {
            let found = lines[at..].iter().position(|l| l == w);
            assert!(found.is_some(), "{units:?}: {w:?} not in order in\n{text}");
            at += found.unwrap() + 1;
        }
        let first = lines[0];
        assert!(
            first.starts_with(&format!("Total: {} ", size(usage(&v["total"])))),
            "{first}"
        );
    }
    // -h as du -h.
    let human = Tool::new("du").args(["-h", "-d", "0"]).arg(&root).expect(0);
    let du_h = Command::new("du")
        .args(["-sh"])
        .arg(&root)
        .output()
        .unwrap();
    let du_h = String::from_utf8(du_h.stdout).unwrap();
    let size = du_h.split_whitespace().next().unwrap();
    assert!(
        human.stdout_str().starts_with(&format!("Total: {size} ")),
        "{} vs du -sh {size}",
        human.stdout_str()
    );
}

/// `touch -d @T` for the modification or access time of `p`.
fn set_time(p: &Path, which: &str, t: i64) {
    let ok = Command::new("touch")
        .args([which, "-h", "-d", &format!("@{t}")])
        .arg(p)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[test]
fn ages_fall_in_their_buckets_by_mtime_and_atime() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    fs::create_dir(&root).unwrap();
    let now: i64 = 1_800_000_000;
    let day = 86_400;
    // (age of mtime in days, age of atime in days, size): one file per bucket, by mtime; the
    // atimes all in two buckets.
    let files = [
        (0.5, 0.1, 1000u64),
        (3.0, 0.1, 2000),
        (20.0, 400.0, 3000),
        (60.0, 400.0, 4000),
        (200.0, 400.0, 5000),
        (700.0, 400.0, 6000),
        (2000.0, 2000.0, 7000),
    ];
    for (i, &(m, a, size)) in files.iter().enumerate() {
        let p = root.join(format!("f{i}"));
        fs::write(&p, vec![0u8; size as usize]).unwrap();
        set_time(&p, "-m", now - (m * day as f64) as i64);
        set_time(&p, "-a", now - (a * day as f64) as i64);
    }
    // A file from the future is new.
    fs::write(root.join("future"), b"xy").unwrap();
    set_time(&root.join("future"), "-m", now + 1000);
    set_time(&root.join("future"), "-a", now + 1000);
    for tool in [
        Tool::new("du"),
        Tool::new("du").ranks(3),
        Tool::new("du").mpi(2),
    ] {
        let v = du_json(tool.args(["--now", "@1800000000"]).arg(&root));
        let bytes = |key: &str| -> Vec<u64> {
            v[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["usage"]["bytes"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(
            bytes("mtime"),
            [1002, 2000, 3000, 4000, 5000, 6000, 7000],
            "{}",
            v["mtime"]
        );
        assert_eq!(bytes("atime"), [3002, 0, 0, 0, 0, 18000, 7000]);
        let files: Vec<u64> = v["mtime"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["usage"]["files"].as_u64().unwrap())
            .collect();
        assert_eq!(
            files,
            [2, 1, 1, 1, 1, 1, 1],
            "directories are not in the ages"
        );
        assert_eq!(v["mtime"][2]["bucket"], "< 30 days");
    }
}

/// Check that `text` is well-formed XML as far as its tags go: every element closed in order,
/// attributes quoted, one root element.
fn well_formed(text: &str) -> Result<(), String> {
    let body = text.trim();
    let body = match body.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").ok_or("an unclosed declaration")?.1,
        None => body,
    };
    let mut open: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut rest = body;
    while let Some(i) = rest.find('<') {
        if !open.is_empty() || rest[..i].trim().is_empty() {
        } else {
            return Err(format!("text outside the root: {:?}", &rest[..i]));
        }
        let end = rest[i..].find('>').ok_or("an unclosed tag")? + i;
        let tag = &rest[i + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with("!--") {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            match open.pop() {
                Some(o) if o == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        } else {
            let name = tag
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_end_matches('/');
            if open.is_empty() {
                roots += 1;
            }
            if tag.matches('"').count() % 2 != 0 {
                return Err(format!("unbalanced quotes in <{tag}>"));
            }
            if !tag.ends_with('/') {
                open.push(name.to_string());
            }
        }
    }
    if !open.is_empty() || roots != 1 {
        return Err(format!("unclosed {open:?}, {roots} roots"));
    }
    Ok(())
}

#[test]
fn svg_and_html_are_written_whole_with_a_bar_per_user() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    tree(&root);
    let svg = dir.path().join("usage.svg");
    let html = dir.path().join("usage.html");
    // What a killed earlier run left: removed and named.
    let stale = dir
        .path()
        .join(mfu_tests::dead_process_temporary("usage.svg"));
    fs::write(&stale, b"<svg").unwrap();
    let run = Tool::new("du")
        .arg("--svg")
        .arg(&svg)
        .arg("--html")
        .arg(&html)
        .arg(&root)
        .expect(0);
    assert!(run.stdout_str().contains("Wrote "), "{}", run.stdout_str());
    assert!(!stale.exists());
    assert!(
        run.stderr_str()
            .contains("the temporary chart of an earlier run that was killed"),
        "{}",
        run.stderr_str()
    );
    let text = fs::read_to_string(&svg).unwrap();
    well_formed(&text).unwrap();
    assert!(text.trim_start().starts_with("<svg") || text.starts_with("<?xml"));
    for title in [
        "Usage per user",
        "Age of data by last modification (mtime)",
        "Age of data by last access (atime)",
        "Largest directories below",
    ] {
        assert!(text.contains(title), "{title}");
    }
    // One bar per user: its name as a label, and a filled rectangle beside it.
    for user in ["root", "nobody", "1001"] {
        assert!(
            text.contains(&format!(">\n{user}\n</text>")),
            "{user}: {text}"
        );
    }
    let rects = text.matches("<rect").count();
    assert!(rects >= 3 + 14 + 3, "bars, age bars and cells: {rects}");
    // The treemap names the top directories.
    // The treemap names the top directories (with their size when the cell holds its
    // subdirectories, alone otherwise).
    for top in ["alice/", "bob/"] {
        assert!(
            text.contains(&format!(">\n{top}\n</text>")) || text.contains(&format!(">\n{top}  ")),
            "{top}: {text}"
        );
    }
    let page = fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert!(page.contains(text.trim_start_matches(|c| c != '<').trim()));
    assert!(page.contains("<h2>Largest files</h2>") && page.contains("caf\\xe9"));
    // No temporary left beside them.
    let left: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".mfu-tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A chart in a missing directory is refused before any work.
    let bad = Tool::new("du")
        .arg("--svg")
        .arg(dir.path().join("no/such/dir/x.svg"))
        .arg(&root)
        .expect(2);
    assert!(bad.stderr_str().contains("--svg"), "{}", bad.stderr_str());
}

#[test]
fn empty_trees_missing_paths_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let v = du_json(Tool::new("du").arg(&empty));
    assert_eq!(usage(&v["total"]).0, 1, "the directory itself");
    assert_eq!(
        usage(&v["total"]).1,
        gnu_du(&["-s", "--apparent-size", "-B1"], &empty)
    );
    assert_eq!(v["largest_files"].as_array().unwrap().len(), 0);
    // A missing path: named, exit 1; the others still counted.
    let missing = dir.path().join("missing");
    for tool in [Tool::new("du"), Tool::new("du").mpi(2)] {
        let run = tool.arg(&missing).arg(&empty).expect(1);
        assert!(
            run.stderr_str().contains(&missing.display().to_string()),
            "{}",
            run.stderr_str()
        );
        assert!(run.stdout_str().contains("Total: "), "{}", run.stdout_str());
    }
    // A stat list: the same apparent sizes, owners and depths; no allocation.
    let root = dir.path().join("t");
    tree(&root);
    let list = dir.path().join("t.mfu");
    Tool::new("walk")
        .arg("-q")
        .arg("-o")
        .arg(&list)
        .arg(&root)
        .expect(0);
    let walked = du_json(
        Tool::new("du")
            .args(["--apparent-size", "--now", NOW])
            .arg(&root),
    );
    for tool in [Tool::new("du"), Tool::new("du").ranks(3)] {
        let read = du_json(tool.args(["--now", NOW, "-i"]).arg(&list));
        assert_eq!(read["blocks_known"], false);
        assert_eq!(read["units"]["measure"], "apparent");
        assert_eq!(read["roots"][0], root.display().to_string());
        // v4 lists hold no inodes: each hard link's names count.
        let links = 200_000 + 70_000;
        assert_eq!(
            usage(&read["total"]).1,
            usage(&walked["total"]).1 + links,
            "{}",
            read["total"]
        );
        let dir_bytes = |v: &Value, d: &str| {
            rows(&v["dirs"], "path")
                .into_iter()
                .find(|(p, _)| p == d)
                .unwrap()
                .1
                 .1
        };
        let top = root.join("top.bin").display().to_string();
        assert!(read["largest_files"].to_string().contains(&top));
        let alice = root.join("alice").display().to_string();
        assert_eq!(
            dir_bytes(&read, &alice),
            dir_bytes(&walked, &alice) + 200_000
        );
    }
    // A lite list is refused.
    let lite = dir.path().join("lite.txt");
    Tool::new("walk")
        .args(["-q", "-l", "-o"])
        .arg(&lite)
        .arg(&root)
        .expect(0);
    let run = Tool::new("du").arg("-i").arg(&lite).expect(2);
    assert!(
        run.stderr_str().contains("lite list") && run.stderr_str().contains("lite.txt"),
        "{}",
        run.stderr_str()
    );
}
