//! `mfu-rs bcast` end to end.
//!
//! On this machine every rank runs on one node, so a plain run proves the data path (segments
//! read by one rank each, broadcast, written by the ranks of the node at their offsets, the
//! temporary renamed into place) but not the fan-out to several nodes. The fan-out is simulated
//! by a wrapper that gives every rank a fake node name (`MFU_NODE_NAME=n$((rank % 2))`) and a
//! DEST of its own per fake node (`.../n0/file`, `.../n1/file`), as node-local disks would be.

use mfu_tests::{bin, expect_status, mfu, mpirun};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

/// Segment size in these tests: 64 KiB.
const SEG: &str = "64KB";
const SEG_BYTES: usize = 65536;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `mfu-rs bcast ARGS` with `np` ranks on this one node (1 = one process).
fn bcast(np: usize, args: &[&str], code: i32) -> Output {
    let mut cmd = if np == 1 {
        mfu(&["bcast"])
    } else {
        let mut c = mpirun(np, &bin());
        c.arg("bcast");
        c
    };
    expect_status(cmd.args(args), code)
}

/// Run under mpirun through a wrapper that fakes `nodes` nodes: rank r is on node
/// `n{r % nodes}` and writes `root/n{r % nodes}/NAME`.
fn fake_nodes(
    np: usize,
    nodes: usize,
    opts: &[&str],
    src: &Path,
    root: &Path,
    name: &str,
    code: i32,
) -> Output {
    let script = root.join("wrap.sh");
    fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=n$((OMPI_COMM_WORLD_RANK % {nodes}))\nexport MFU_NODE_NAME=$n\n\
             exec \"$MFU_BIN\" bcast \"$@\" \"$SRC\" \"$ROOT/$n/{name}\"\n"
        ),
    )
    .unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = mpirun(np, &script);
    cmd.args(opts)
        .env("MFU_BIN", bin())
        .env("SRC", src)
        .env("ROOT", root);
    expect_status(&mut cmd, code)
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn one_node(np: usize) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("local");
    fs::create_dir(&out).unwrap();
    // Several segments, the last one short; exactly one segment; empty.
    for (name, len) in [
        ("big", 5 * SEG_BYTES + 123),
        ("one", SEG_BYTES),
        ("empty", 0),
    ] {
        let src = dir.path().join(name);
        fs::write(&src, mfu_tests::noise(len as u64, len)).unwrap();
        fs::set_permissions(&src, fs::Permissions::from_mode(0o604)).unwrap();
        let dest = out.join(name);
        bcast(np, &["-s", SEG, s(&src), s(&dest)], 0);
        assert_eq!(
            fs::read(&dest).unwrap(),
            mfu_tests::noise(len as u64, len),
            "{name} at np {np}"
        );
        assert_eq!(
            fs::metadata(&dest).unwrap().permissions().mode() & 0o7777,
            0o604
        );
    }
    assert_eq!(
        names(&out),
        ["big", "empty", "one"],
        "no temporary file left"
    );
}

#[test]
fn one_process() {
    one_node(1);
}

#[test]
fn one_node_np2() {
    one_node(2);
}

#[test]
fn one_node_np4() {
    one_node(4);
}

#[test]
fn default_segment_size() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::write(&src, mfu_tests::noise(7, 2_500_000)).unwrap();
    let dest = dir.path().join("dest");
    bcast(2, &[s(&src), s(&dest)], 0);
    assert_eq!(fs::read(&dest).unwrap(), mfu_tests::noise(7, 2_500_000));
}

fn simulated_nodes(np: usize, nodes: usize) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let content = mfu_tests::noise(3, 7 * SEG_BYTES + 1000);
    fs::write(&src, &content).unwrap();
    for n in 0..nodes {
        fs::create_dir(dir.path().join(format!("n{n}"))).unwrap();
    }
    let out = fake_nodes(np, nodes, &["-v", "-s", SEG], &src, dir.path(), "file", 0);
    let err = String::from_utf8_lossy(&out.stderr);
    for n in 0..nodes {
        let node_dir = dir.path().join(format!("n{n}"));
        assert_eq!(
            fs::read(node_dir.join("file")).unwrap(),
            content,
            "node n{n}"
        );
        assert_eq!(names(&node_dir), ["file"]);
        assert!(
            err.contains(&format!("node n{n}: 8 of 8 segments written")),
            "{err}"
        );
    }
}

#[test]
fn simulated_two_nodes_np2() {
    simulated_nodes(2, 2);
}

#[test]
fn simulated_two_nodes_np4() {
    simulated_nodes(4, 2);
}

#[test]
fn simulated_three_nodes_of_unequal_size() {
    // 4 ranks on 3 fake nodes: n0 has two ranks, n1 and n2 one each.
    simulated_nodes(4, 3);
}

#[test]
fn identical_segments_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let content = mfu_tests::noise(11, 6 * SEG_BYTES + 500);
    fs::write(&src, &content).unwrap();
    for n in 0..2 {
        fs::create_dir(dir.path().join(format!("n{n}"))).unwrap();
    }
    // n0 has a copy with segments 1 and 6 (the short last one) altered; n1 has nothing.
    let mut stale = content.clone();
    stale[SEG_BYTES + 10] ^= 1;
    stale[6 * SEG_BYTES + 499] ^= 1;
    fs::write(dir.path().join("n0/file"), &stale).unwrap();
    let out = fake_nodes(4, 2, &["-v", "-s", SEG], &src, dir.path(), "file", 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node n0: 2 of 7 segments written, 5 identical skipped"),
        "{err}"
    );
    assert!(
        err.contains("node n1: 7 of 7 segments written, 0 identical skipped"),
        "{err}"
    );
    for n in 0..2 {
        assert_eq!(
            fs::read(dir.path().join(format!("n{n}/file"))).unwrap(),
            content
        );
    }
    // A second run finds every segment identical everywhere.
    let out = bcast(
        2,
        &["-v", "-s", SEG, s(&src), s(&dir.path().join("n0/file"))],
        0,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("0 of 7 segments written, 7 identical skipped"),
        "{err}"
    );
}

#[test]
fn usage_errors_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::write(&src, mfu_tests::noise(5, 1000)).unwrap();
    let missing = dir.path().join("missing");
    let out = bcast(2, &[s(&missing), s(&dir.path().join("d"))], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing"));
    bcast(1, &[s(&src), s(&dir.path().join("no/such/dir/file"))], 2);

    // DEST's directory exists on node n0 only: nothing is created on n0 either.
    fs::create_dir(dir.path().join("n0")).unwrap();
    let out = fake_nodes(4, 2, &[], &src, dir.path(), "file", 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("node n1") && err.contains("n1"), "{err}");
    assert!(
        names(&dir.path().join("n0")).is_empty(),
        "no temporary file left on n0"
    );
    let mut listing = names(dir.path());
    listing.retain(|n| n != "wrap.sh");
    assert_eq!(listing, ["n0", "src"]);
}

#[test]
fn help_documents_the_node_name_override() {
    let out = expect_status(&mut mfu(&["bcast", "--help"]), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("MFU_NODE_NAME"));
}
