//! `mfu-rs tar` end to end: archives read back by GNU tar at 1, 2 and 4 ranks, the dtar vector
//! extracted to its manifest, foreign archives (GNU gnu/pax/ustar, python tarfile, bsdtar) by scan
//! and by saved index, the DTAR_IDX footer, hostile and damaged archives, files changing size
//! during create, zstd-seekable archives, `-t -v`, usage errors.
//!
//! GNU tar runs with `TZ=UTC`, `LC_ALL=C` and `--quoting-style=literal` (names printed as raw
//! bytes). A missing external tool fails the test with a hint to run `cargo xtask setup`.

use mfu::prelude::Collect as Kept;
use mfu_tests::tar_tools::{gnu_tar, tar_np, text, tool};
use mfu_tests::tree::{self, Compare, Kind, Tree};
use mfu_tests::{expect_status, make_vector_tree, mfu, vector};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Lines of an output, as bytes, without their `\n`.
fn lines(b: &[u8]) -> Vec<Vec<u8>> {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    if b.is_empty() {
        return Vec::new();
    }
    b.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect()
}

fn assert_lines_eq(ctx: &str, got: &[Vec<u8>], want: &[Vec<u8>]) {
    if got == want {
        return;
    }
    let i = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    panic!(
        "{ctx}: {} lines, want {}; first difference at line {i}:\n  got:  {:?}\n  want: {:?}",
        got.len(),
        want.len(),
        got.get(i).map(|l| text(l)),
        want.get(i).map(|l| text(l)),
    );
}

fn path_of(base: &Path, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        base.to_path_buf()
    } else {
        base.join(OsStr::from_bytes(rel))
    }
}

/// The entries a directory holds, sorted.
fn dir_entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn assert_dir_holds(ctx: &str, dir: &Path, want: &[&str]) {
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(
        dir_entries(dir),
        want,
        "{ctx}: what {} holds",
        dir.display()
    );
}

// ---------------------------------------------------------------------------------------------
// Trees

/// The vector tree of `seed` plus a hard-link group of three (`links/a`, `links/b`, `links/sub/c`).
fn vector_tree_with_links(dir: &Path, seed: u32, ascii: bool) {
    make_vector_tree(dir, seed, ascii);
    add_links(dir);
}

fn add_links(dir: &Path) {
    std::fs::create_dir_all(dir.join("links/sub")).unwrap();
    tree::make_hard_links(
        dir,
        &["links/a", "links/b", "links/sub/c"],
        b"linked data\n",
    );
}

/// Set the mtime of every entry of the tree at `dir` (symlinks themselves) to `f(i, old)`.
fn set_all_mtimes(dir: &Path, f: impl Fn(usize, (i64, u64)) -> (i64, u64)) {
    let snap = tree::snapshot(dir);
    for (i, (k, n)) in snap.iter().enumerate() {
        tree::set_mtime(&path_of(dir, k), f(i, n.mtime));
    }
}

/// Whole-second mtimes everywhere (for formats that store seconds only).
fn whole_second_mtimes(dir: &Path) {
    set_all_mtimes(dir, |_, (s, _)| (s, 0));
}

/// A distinct sub-second part on every entry's mtime.
fn subsecond_mtimes(dir: &Path) {
    set_all_mtimes(dir, |i, (s, _)| {
        (s, (100_000_001 + i as u64 * 12_345_677) % 1_000_000_000)
    });
}

/// The names an archive of `top` (made from its parent) must list, in archive order: name
/// order, parents before children, directories with a trailing `/`.
fn expected_names(t: &Tree, top: &str) -> Vec<Vec<u8>> {
    // BTreeMap order of the relative paths is the byte order of the full names.
    t.iter()
        .map(|(k, n)| {
            let mut name = top.as_bytes().to_vec();
            if !k.is_empty() {
                name.push(b'/');
                name.extend_from_slice(k);
            }
            if n.kind == Kind::Dir {
                name.push(b'/');
            }
            name
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// GNU tar listings

/// `tar -tf ARCHIVE` (names as raw bytes).
fn list_gnu(archive: &Path) -> Vec<Vec<u8>> {
    let out = expect_status(gnu_tar().arg("-tf").arg(archive), 0);
    lines(&out.stdout)
}

/// The first five whitespace-separated fields of a `tar -tv` line and the rest (name ...).
fn tv_fields(line: &[u8]) -> (Vec<String>, Vec<u8>) {
    let mut i = 0;
    let mut tok = Vec::new();
    for _ in 0..5 {
        while i < line.len() && line[i] == b' ' {
            i += 1;
        }
        let s = i;
        while i < line.len() && line[i] != b' ' {
            i += 1;
        }
        tok.push(text(&line[s..i]));
    }
    while i < line.len() && line[i] == b' ' {
        i += 1;
    }
    (tok, line[i..].to_vec())
}

/// `ls -l`-style mode string with the type character `t`.
fn mode_string(t: char, perm: u32) -> String {
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    let mut c: Vec<char> = bits
        .iter()
        .map(|&(b, ch)| if perm & b != 0 { ch } else { '-' })
        .collect();
    let special = |c: &mut Vec<char>, i: usize, on: bool, lower: char, upper: char| {
        if on {
            c[i] = if c[i] == 'x' { lower } else { upper };
        }
    };
    special(&mut c, 2, perm & 0o4000 != 0, 's', 'S');
    special(&mut c, 5, perm & 0o2000 != 0, 's', 'S');
    special(&mut c, 8, perm & 0o1000 != 0, 't', 'T');
    std::iter::once(t).chain(c).collect()
}

/// (year, month, day) of a day number since 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = (z - era * 146_097) as u64;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe as i64 + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// UTC `YYYY-MM-DD`, `HH:MM`, and GNU tar's `--full-time` `HH:MM:SS[.fraction]`.
fn utc(mtime: (i64, u64)) -> (String, String, String) {
    let (s, ns) = mtime;
    let (y, mo, d) = civil(s.div_euclid(86_400));
    let sod = s.rem_euclid(86_400);
    let (h, mi, se) = (sod / 3600, sod % 3600 / 60, sod % 60);
    let mut full = format!("{h:02}:{mi:02}:{se:02}");
    if ns != 0 {
        full.push('.');
        full.push_str(format!("{ns:09}").trim_end_matches('0'));
    }
    (
        format!("{y:04}-{mo:02}-{d:02}"),
        format!("{h:02}:{mi:02}"),
        full,
    )
}

/// Check every line of `TZ=UTC tar --full-time -tvf ARCHIVE` against `lstat` of the source:
/// mode string, size, mtime (to the nanosecond), symlink targets and hard links. `names` are the
/// entries (relative to `base`) in archive order; `extra` lines may follow (the index member).
fn check_gnu_tv(ctx: &str, archive: &Path, base: &Path, names: &[Vec<u8>], extra: usize) {
    let out = expect_status(gnu_tar().arg("--full-time").arg("-tvf").arg(archive), 0);
    let tv = lines(&out.stdout);
    assert_eq!(
        tv.len(),
        names.len() + extra,
        "{ctx}: `tar -tvf` line count:\n{}",
        text(&out.stdout)
    );
    let mut first_link: HashMap<(u64, u64), Vec<u8>> = HashMap::new();
    for (line, name) in tv.iter().zip(names) {
        let (tok, rest) = tv_fields(line);
        let rel = name.strip_suffix(b"/").unwrap_or(name);
        let p = base.join(OsStr::from_bytes(rel));
        let md = std::fs::symlink_metadata(&p)
            .unwrap_or_else(|e| panic!("{ctx}: lstat {}: {e}", p.display()));
        let mut want_rest = name.clone();
        let (t, size) = if md.file_type().is_symlink() {
            want_rest.extend_from_slice(b" -> ");
            want_rest.extend_from_slice(std::fs::read_link(&p).unwrap().as_os_str().as_bytes());
            ('l', 0)
        } else if md.is_dir() {
            ('d', 0)
        } else if md.is_file() && md.nlink() > 1 {
            match first_link.get(&(md.dev(), md.ino())) {
                Some(first) => {
                    want_rest.extend_from_slice(b" link to ");
                    want_rest.extend_from_slice(first);
                    ('h', 0)
                }
                None => {
                    first_link.insert((md.dev(), md.ino()), name.clone());
                    ('-', md.size())
                }
            }
        } else if md.is_file() {
            ('-', md.size())
        } else {
            panic!("{ctx}: unexpected file type of {}", p.display())
        };
        let (date, _, time) = utc((md.mtime(), md.mtime_nsec() as u64));
        let l = text(line);
        assert_eq!(
            tok[0],
            mode_string(t, md.mode() & 0o7777),
            "{ctx}: mode string: {l}"
        );
        assert_eq!(tok[2], size.to_string(), "{ctx}: size: {l}");
        assert_eq!((&tok[3], &tok[4]), (&date, &time), "{ctx}: mtime: {l}");
        assert_eq!(text(&rest), text(&want_rest), "{ctx}: name: {l}");
    }
}

// ---------------------------------------------------------------------------------------------
// A tiny tar reader (ustar, pax `x`/`g`, GNU `L`/`K`) and the dtar index rules

/// One entry decoded at an offset.
#[derive(Debug, Clone)]
struct TarEntry {
    name: Vec<u8>,
    link: Vec<u8>,
    typeflag: u8,
    size: u64,
    /// Offset of the data of the entry's own header.
    data_at: usize,
    /// Offset just past the entry (headers, data and padding).
    end: usize,
}

fn parse_num(f: &[u8]) -> Option<u64> {
    if f.first().is_some_and(|b| b & 0x80 != 0) {
        let mut v = (f[0] & 0x7f) as u64;
        for &b in &f[1..] {
            v = v.checked_mul(256)?.checked_add(b as u64)?;
        }
        return Some(v);
    }
    let digits: Vec<u8> = f
        .iter()
        .copied()
        .skip_while(|b| *b == b' ')
        .take_while(|b| (b'0'..=b'7').contains(b))
        .collect();
    u64::from_str_radix(std::str::from_utf8(&digits).ok()?, 8).ok()
}

fn checksum_ok(h: &[u8]) -> bool {
    let Some(stored) = parse_num(&h[148..156]) else {
        return false;
    };
    let sum: u64 = h
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                b as u64
            }
        })
        .sum();
    stored == sum
}

fn cstr(f: &[u8]) -> Vec<u8> {
    f[..f.iter().position(|&b| b == 0).unwrap_or(f.len())].to_vec()
}

/// A pax record: keyword, value.
type PaxRecord = (Vec<u8>, Vec<u8>);

fn pax_records(data: &[u8]) -> Result<Vec<PaxRecord>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() && data[pos] != 0 {
        let sp = data[pos..]
            .iter()
            .position(|&b| b == b' ')
            .ok_or("pax record without a length")?;
        let len: usize = std::str::from_utf8(&data[pos..pos + sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("bad pax record length")?;
        let rec = data
            .get(pos + sp + 1..pos + len)
            .ok_or("pax record past its header")?;
        let rec = rec.strip_suffix(b"\n").ok_or("pax record without \\n")?;
        let eq = rec
            .iter()
            .position(|&b| b == b'=')
            .ok_or("pax record without =")?;
        out.push((rec[..eq].to_vec(), rec[eq + 1..].to_vec()));
        pos += len;
    }
    Ok(out)
}

/// Decode the entry whose first header block (pax or GNU long-name header if any) is at `start`.
fn read_entry(a: &[u8], start: usize) -> Result<TarEntry, String> {
    let (mut path, mut linkpath, mut psize, mut longname, mut longlink) =
        (None, None, None, None, None);
    let mut off = start;
    loop {
        let h = a
            .get(off..off + 512)
            .ok_or_else(|| format!("header at {off} is past the end ({})", a.len()))?;
        if !checksum_ok(h) {
            return Err(format!("invalid header checksum at offset {off}"));
        }
        let tf = h[156];
        let size = parse_num(&h[124..136]).ok_or_else(|| format!("bad size at {off}"))?;
        let data_at = off + 512;
        let padded = size.div_ceil(512) as usize * 512;
        if matches!(tf, b'x' | b'g' | b'L' | b'K') {
            let data = a
                .get(data_at..data_at + size as usize)
                .ok_or_else(|| format!("extended header data at {data_at} past the end"))?;
            match tf {
                b'x' => {
                    for (k, v) in pax_records(data)? {
                        match &k[..] {
                            b"path" => path = Some(v),
                            b"linkpath" => linkpath = Some(v),
                            b"size" => {
                                psize = Some(
                                    text(&v)
                                        .parse::<u64>()
                                        .map_err(|e| format!("pax size: {e}"))?,
                                )
                            }
                            _ => {}
                        }
                    }
                }
                b'L' => longname = Some(cstr(data)),
                b'K' => longlink = Some(cstr(data)),
                _ => {}
            }
            off = data_at + padded;
            continue;
        }
        let mut name = cstr(&h[0..100]);
        if &h[257..263] == b"ustar\0" {
            let prefix = cstr(&h[345..500]);
            if !prefix.is_empty() {
                let mut p = prefix;
                p.push(b'/');
                p.extend_from_slice(&name);
                name = p;
            }
        }
        let size = psize.unwrap_or(size);
        let has_data = !matches!(tf, b'1'..=b'6');
        let end = data_at
            + if has_data {
                size.div_ceil(512) as usize * 512
            } else {
                0
            };
        return Ok(TarEntry {
            name: path.or(longname).unwrap_or(name),
            link: linkpath.or(longlink).unwrap_or_else(|| cstr(&h[157..257])),
            typeflag: tf,
            size,
            data_at,
            end,
        });
    }
}

/// Check an index (entry offsets) against the archive bytes: one offset per listed entry,
/// strictly increasing from 0, each at a header block with a valid checksum, the entry decoded
/// there has the listed name, and it ends exactly where the next one starts (the last one at
/// `last_end`, or at a zero block when `None`).
fn check_offsets(ctx: &str, a: &[u8], offsets: &[u64], names: &[Vec<u8>], last_end: Option<usize>) {
    assert_eq!(
        offsets.len(),
        names.len(),
        "{ctx}: the index must hold one offset per entry that `tar -t` lists"
    );
    assert_eq!(offsets.first(), Some(&0), "{ctx}: first offset");
    for (i, (&off, name)) in offsets.iter().zip(names).enumerate() {
        if i > 0 {
            assert!(
                off > offsets[i - 1],
                "{ctx}: offsets not strictly increasing at {i}: {} then {off}",
                offsets[i - 1]
            );
        }
        let off = off as usize;
        assert!(
            off.is_multiple_of(512) && off + 512 <= a.len(),
            "{ctx}: offset {i} = {off} is not a block of the archive ({} bytes)",
            a.len()
        );
        assert!(
            checksum_ok(&a[off..off + 512]),
            "{ctx}: offset {i} = {off}: no valid header checksum there"
        );
        let e = read_entry(a, off).unwrap_or_else(|e| panic!("{ctx}: entry {i} at {off}: {e}"));
        assert!(
            !matches!(e.typeflag, b'1' | b'2') || !e.link.is_empty(),
            "{ctx}: link entry {i} ({}) without a link name",
            text(name)
        );
        assert_eq!(
            text(&e.name),
            text(name),
            "{ctx}: name of entry {i} at offset {off}"
        );
        match offsets.get(i + 1) {
            Some(&next) => assert_eq!(
                e.end as u64,
                next,
                "{ctx}: entry {i} ({}) must end where the next entry starts",
                text(name)
            ),
            None => match last_end {
                Some(end) => assert_eq!(e.end, end, "{ctx}: end of the last entry"),
                None => assert!(
                    a.get(e.end..e.end + 512)
                        .is_some_and(|b| b.iter().all(|&x| x == 0)),
                    "{ctx}: the last entry must be followed by the end-of-archive zero block"
                ),
            },
        }
    }
}

/// Read the DTAR_IDX footer of `archive` by the rules of formats.md §5 and check it: the index
/// member `idx_name` is the last entry, and its offsets lead to the entries `listed` (GNU
/// `tar -t` of the archive, the index member last). Returns the offsets.
fn check_dtar_archive(ctx: &str, archive: &Path, idx_name: &str, listed: &[Vec<u8>]) -> Vec<u64> {
    let a = std::fs::read(archive).unwrap();
    let n = a.len();
    assert!(
        n.is_multiple_of(512) && n >= 2048,
        "{ctx}: archive size {n} is not a whole number of blocks"
    );
    assert!(
        a[n - 1024..].iter().all(|&b| b == 0),
        "{ctx}: the archive must end with two zero blocks"
    );
    let word = |i: usize| {
        let at = n - 1024 - 48 + 8 * i;
        u64::from_be_bytes(a[at..at + 8].try_into().unwrap())
    };
    let (count, archive_size, reserved, entry_size, version, magic) =
        (word(0), word(1), word(2), word(3), word(4), word(5));
    assert_eq!(
        magic, 0x4454_4152_5F49_4458,
        "{ctx}: footer magic DTAR_IDX at EOF-1024-8"
    );
    assert_eq!(version, 1, "{ctx}: footer version");
    assert_eq!(reserved, 0, "{ctx}: footer reserved word");
    assert!(
        entry_size.is_multiple_of(512) && entry_size >= 1024 && entry_size as usize <= n - 1024,
        "{ctx}: footer entry_size {entry_size}"
    );
    let start = n - 1024 - entry_size as usize;
    assert_eq!(
        archive_size, start as u64,
        "{ctx}: footer archive_size must be the offset of the index member"
    );
    let idx =
        read_entry(&a, start).unwrap_or_else(|e| panic!("{ctx}: index member at {start}: {e}"));
    assert_eq!(text(&idx.name), idx_name, "{ctx}: index member name");
    assert!(
        matches!(idx.typeflag, b'0' | 0),
        "{ctx}: the index member must be a regular file (type {:?})",
        idx.typeflag as char
    );
    assert_eq!(
        idx.end,
        n - 1024,
        "{ctx}: the index member must be the last one, its padded data ending at the footer's block"
    );
    let count = count as usize;
    assert!(
        idx.data_at + 8 * count <= n - 1024 - 48 && idx.size as usize >= 8 * count,
        "{ctx}: {count} offsets do not fit in the index member ({} bytes)",
        idx.size
    );
    let offsets: Vec<u64> = (0..count)
        .map(|i| {
            let at = idx.data_at + 8 * i;
            u64::from_be_bytes(a[at..at + 8].try_into().unwrap())
        })
        .collect();
    assert_eq!(
        listed.last().map(|l| text(l)),
        Some(idx_name.to_string()),
        "{ctx}: GNU tar must list the index member last"
    );
    check_offsets(ctx, &a, &offsets, &listed[..listed.len() - 1], Some(start));
    offsets
}

// ---------------------------------------------------------------------------------------------
// (1) Create at 1, 2 and 4 ranks; read back with GNU tar

#[test]
fn create_at_1_2_4_ranks_reads_back_with_gnu_tar_and_lists_like_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let src = root.join("tree");
    vector_tree_with_links(&src, 1, false);
    let want = tree::snapshot(&src);
    let names = expected_names(&want, "tree");
    for np in [1, 2, 4] {
        let ctx = format!("np={np}");
        let name = format!("A{np}.tar");
        let idx_name = format!("{name}.dtaridx");
        expect_status(
            tar_np(np)
                .current_dir(&root)
                .args(["-c", "-f", &name, "tree"]),
            0,
        );
        let archive = root.join(&name);
        // Names: sorted, parents first, the index member last.
        let listed = list_gnu(&archive);
        assert_eq!(
            listed.last().map(|l| text(l)),
            Some(idx_name.clone()),
            "{ctx}: the index member must be the last member"
        );
        assert_lines_eq(
            &format!("{ctx}: `tar -tf` names"),
            &listed[..listed.len() - 1],
            &names,
        );
        // Modes, sizes, mtimes, link targets as GNU tar reads them.
        check_gnu_tv(&ctx, &archive, &root, &names, 1);
        // GNU tar extracts the source tree (and the index as a plain file).
        let x = tmp.path().join(format!("x{np}"));
        std::fs::create_dir(&x).unwrap();
        expect_status(gnu_tar().arg("-xf").arg(&archive).arg("-C").arg(&x), 0);
        assert_dir_holds(&ctx, &x, &["tree", &idx_name]);
        let got = tree::snapshot(&x.join("tree"));
        tree::assert_equal_in(&format!("{ctx}: GNU tar -x"), &want, &got, Compare::META);
        let ino = |p: &str| std::fs::symlink_metadata(x.join(p)).unwrap().ino();
        assert_eq!(ino("tree/links/a"), ino("tree/links/b"), "{ctx}");
        assert_eq!(ino("tree/links/a"), ino("tree/links/sub/c"), "{ctx}");
        // mfu-rs -t lists what GNU tar lists, the index member hidden.
        let out = expect_status(mfu(&["tar", "-t", "-f"]).arg(&archive), 0);
        assert_lines_eq(
            &format!("{ctx}: `mfu-rs tar -t` against `tar -t`"),
            &lines(&out.stdout),
            &listed[..listed.len() - 1],
        );
        check_dtar_archive(&ctx, &archive, &idx_name, &listed);
    }
}

// ---------------------------------------------------------------------------------------------
// (2) The dtar vector extracted at 1, 2 and 4 ranks

fn sha256_of(paths: &[PathBuf]) -> Vec<String> {
    if paths.is_empty() {
        return Vec::new();
    }
    let out = expect_status(tool("sha256sum").args(paths), 0);
    let hashes: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| l.trim_start_matches('\\')[..64].to_string())
        .collect();
    assert_eq!(hashes.len(), paths.len());
    hashes
}

/// Check the extracted tree at `dir` against a manifest of make_vector_tree.py (every directory
/// with mtime `dir_mtime`).
fn check_manifest(ctx: &str, dir: &Path, manifest: &serde_json::Value, dir_mtime: i64) {
    let got = tree::snapshot(dir);
    let entries = manifest.as_array().expect("manifest is an array");
    let mut want_keys: Vec<Vec<u8>> = vec![Vec::new()];
    for e in entries {
        let p = e["path"].as_str().unwrap();
        let mut prefix = String::new();
        for comp in p.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(comp);
            want_keys.push(prefix.clone().into_bytes());
        }
    }
    want_keys.sort();
    want_keys.dedup();
    let got_keys: Vec<Vec<u8>> = got.keys().cloned().collect();
    assert_lines_eq(&format!("{ctx}: extracted paths"), &got_keys, &want_keys);
    let mut files = Vec::new();
    let mut sums = Vec::new();
    for e in entries {
        let p = e["path"].as_str().unwrap();
        let n = &got[p.as_bytes()];
        match e["type"].as_str().unwrap() {
            "f" => {
                assert_eq!(n.kind, Kind::File, "{ctx}: {p}");
                assert_eq!(n.size, e["size"].as_u64().unwrap(), "{ctx}: size of {p}");
                let mode = e["mode"].as_str().unwrap().trim_start_matches("0o");
                assert_eq!(
                    n.perm,
                    u32::from_str_radix(mode, 8).unwrap(),
                    "{ctx}: mode of {p}"
                );
                assert_eq!(
                    n.mtime,
                    (e["mtime"].as_i64().unwrap(), 0),
                    "{ctx}: mtime of {p}"
                );
                files.push(dir.join(p));
                sums.push((p, e["sha256"].as_str().unwrap().to_string()));
            }
            "l" => {
                assert_eq!(n.kind, Kind::Symlink, "{ctx}: {p}");
                assert_eq!(
                    n.target.as_deref().map(tree::lossy),
                    Some(e["target"].as_str().unwrap().to_string()),
                    "{ctx}: target of {p}"
                );
            }
            "d" => assert_eq!(n.kind, Kind::Dir, "{ctx}: {p}"),
            t => panic!("manifest type {t}"),
        }
    }
    for (k, n) in &got {
        assert_eq!((n.uid, n.gid), (0, 0), "{ctx}: owner of {}", tree::lossy(k));
        if n.kind == Kind::Dir {
            assert_eq!(
                n.mtime,
                (dir_mtime, 0),
                "{ctx}: mtime of directory {:?}",
                tree::lossy(k)
            );
            assert_eq!(
                n.perm,
                0o755,
                "{ctx}: mode of directory {:?}",
                tree::lossy(k)
            );
        }
    }
    for ((p, want), got) in sums.iter().zip(sha256_of(&files)) {
        assert_eq!(&got, want, "{ctx}: sha256 of {p}");
    }
}

#[test]
fn dtar_vector_extracts_to_its_manifest_at_1_2_4_ranks_using_its_index() {
    let tmp = tempfile::tempdir().unwrap();
    // A writable copy: with --save-index a scanning extract would write ARCHIVE.dtaridx beside it.
    let archive = tmp.path().join("tartree.dtar.tar");
    std::fs::copy(vector("tartree.dtar.tar"), &archive).unwrap();
    tree::chmod(&archive, 0o644);
    let side = tmp.path().join("tartree.dtar.tar.dtaridx");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(vector("manifest-tartree.json")).unwrap()).unwrap();
    for np in [1, 2, 4] {
        let ctx = format!("np={np}");
        let out = tmp.path().join(format!("t{np}"));
        std::fs::create_dir(&out).unwrap();
        expect_status(
            tar_np(np)
                .args(["-x", "--save-index", "-f"])
                .arg(&archive)
                .arg("-C")
                .arg(&out),
            0,
        );
        assert_dir_holds(
            &format!("{ctx}: the index member must not be extracted"),
            &out,
            &["tartree"],
        );
        assert!(
            !side.exists(),
            "{ctx}: the archive's footer index must be used: --save-index wrote {} (it saves only after a scan)",
            side.display()
        );
        check_manifest(&ctx, &out.join("tartree"), &manifest, 1_600_003_000);
    }
}

// ---------------------------------------------------------------------------------------------
// (3) Foreign archives: by scan with --save-index, then with the saved index

/// Extract `archive` (of `src`, named `tree` in it) with mfu-rs: by scan saving the index, then
/// with that index; both equal to the source; the saved index is checked block by block.
fn check_foreign(ctx: &str, work: &Path, archive: &Path, src: &Path) {
    let want = tree::snapshot(src);
    let listed = list_gnu(archive);
    let mut sorted = listed.clone();
    sorted.sort_by(|a, b| {
        a.strip_suffix(b"/")
            .unwrap_or(a)
            .cmp(b.strip_suffix(b"/").unwrap_or(b))
    });
    assert_lines_eq(
        &format!("{ctx}: sanity: `tar -tf` of the test's own archive (sorted)"),
        &sorted,
        &expected_names(&want, "tree"),
    );
    let mut side = archive.as_os_str().to_owned();
    side.push(".dtaridx");
    let side = PathBuf::from(side);
    assert!(!side.exists());
    // 1. No index: scan, and save it.
    let out1 = work.join(format!("{ctx}-scan"));
    std::fs::create_dir(&out1).unwrap();
    expect_status(
        mfu(&["tar", "-x", "--save-index", "-f"])
            .arg(archive)
            .arg("-C")
            .arg(&out1),
        0,
    );
    assert_dir_holds(ctx, &out1, &["tree"]);
    tree::assert_equal_in(
        &format!("{ctx}: by scan"),
        &want,
        &tree::snapshot(&out1.join("tree")),
        Compare::META,
    );
    let idx = std::fs::read(&side).unwrap_or_else(|e| {
        panic!(
            "{ctx}: --save-index after a scan must write {}: {e}",
            side.display()
        )
    });
    // The DTAR_IDX member's layout (mpiFileUtils' side files too): offsets, padding, footer.
    assert!(
        idx.len() % 512 == 0 && idx.ends_with(b"DTAR_IDX"),
        "{ctx}: the side index must be offsets then a DTAR_IDX footer block ({} bytes)",
        idx.len()
    );
    let count = u64::from_be_bytes(idx[idx.len() - 48..idx.len() - 40].try_into().unwrap());
    let offsets: Vec<u64> = idx[..8 * count as usize]
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
        .collect();
    let a = std::fs::read(archive).unwrap();
    check_offsets(&format!("{ctx}: saved index"), &a, &offsets, &listed, None);
    let before = std::fs::symlink_metadata(&side).unwrap();
    // 2. With the saved index (2 thread ranks): same tree; the index is not rewritten.
    let out2 = work.join(format!("{ctx}-index"));
    std::fs::create_dir(&out2).unwrap();
    expect_status(
        mfu(&["--ranks", "2", "tar", "-x", "--save-index", "-f"])
            .arg(archive)
            .arg("-C")
            .arg(&out2),
        0,
    );
    assert_dir_holds(ctx, &out2, &["tree"]);
    tree::assert_equal_in(
        &format!("{ctx}: with the saved index"),
        &want,
        &tree::snapshot(&out2.join("tree")),
        Compare::META,
    );
    let after = std::fs::symlink_metadata(&side).unwrap();
    assert_eq!(
        (after.ino(), after.ctime(), after.ctime_nsec()),
        (before.ino(), before.ctime(), before.ctime_nsec()),
        "{ctx}: the side index was found, so nothing was scanned and it must not be rewritten"
    );
    assert_eq!(std::fs::read(&side).unwrap(), idx, "{ctx}");
}

const PY_PAX: &str = r#"
import os, sys, tarfile
base, top, out = sys.argv[1:4]
with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
    def add(rel):
        p = os.path.join(base, rel)
        ti = t.gettarinfo(p, rel)
        st = os.lstat(p)
        ti.mtime = st.st_mtime_ns // 10**9
        ti.pax_headers = {"mtime": "%d.%09d" % divmod(st.st_mtime_ns, 10**9)}
        if ti.isreg():
            with open(p, "rb") as f:
                t.addfile(ti, f)
        else:
            t.addfile(ti)
        if ti.isdir():
            for n in sorted(os.listdir(p)):
                add(os.path.join(rel, n))
    add(top)
"#;

#[test]
fn gnu_pax_ustar_and_python_archives_extract_by_scan_then_by_saved_index() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // Whole-second mtimes (gnu), sub-second mtimes (pax), ustar-sized paths (ustar).
    let sec = tmp.path().join("sec");
    vector_tree_with_links(&sec.join("tree"), 1, false);
    whole_second_mtimes(&sec.join("tree"));
    let ns = tmp.path().join("ns");
    vector_tree_with_links(&ns.join("tree"), 1, false);
    subsecond_mtimes(&ns.join("tree"));
    let us = tmp.path().join("us");
    make_vector_tree(&us.join("tree"), 3, true);
    std::fs::remove_dir_all(us.join("tree").join("L".repeat(90))).unwrap();
    add_links(&us.join("tree"));
    whole_second_mtimes(&us.join("tree"));
    for (ctx, base, format) in [
        ("gnu", &sec, "--format=gnu"),
        ("pax", &ns, "--format=pax"),
        ("ustar", &us, "--format=ustar"),
    ] {
        let archive = tmp.path().join(format!("{ctx}.tar"));
        expect_status(
            gnu_tar()
                .current_dir(base)
                .arg(format)
                .arg("-cf")
                .arg(&archive)
                .arg("tree"),
            0,
        );
        check_foreign(ctx, &work, &archive, &base.join("tree"));
    }
    let archive = tmp.path().join("python.tar");
    expect_status(
        tool("python3")
            .arg("-c")
            .arg(PY_PAX)
            .arg(&ns)
            .arg("tree")
            .arg(&archive),
        0,
    );
    check_foreign("python-pax", &work, &archive, &ns.join("tree"));
}

#[test]
fn bsdtar_archive_extracts_by_scan_then_by_saved_index() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let base = tmp.path().join("b");
    vector_tree_with_links(&base.join("tree"), 1, false);
    whole_second_mtimes(&base.join("tree"));
    let archive = tmp.path().join("bsd.tar");
    expect_status(
        tool("bsdtar")
            .current_dir(&base)
            .arg("-cf")
            .arg(&archive)
            .arg("tree"),
        0,
    );
    check_foreign("bsdtar", &work, &archive, &base.join("tree"));
}

// ---------------------------------------------------------------------------------------------
// (4) The index of an mfu-rs archive by the dtar footer rules

#[test]
fn index_of_an_mfu_archive_follows_the_dtar_footer_rules() {
    let tmp = tempfile::tempdir().unwrap();
    // Sanity of the reader: dtar's own archive.
    let v = vector("tartree.dtar.tar");
    let offsets = check_dtar_archive("dtar vector", &v, "tartree.dtar.tar.dtaridx", &list_gnu(&v));
    assert_eq!(offsets.len(), 39);
    let root = tmp.path().join("root");
    vector_tree_with_links(&root.join("tree"), 1, false);
    expect_status(
        mfu(&["--ranks", "3", "tar", "-c", "-f", "A.tar", "tree"]).current_dir(&root),
        0,
    );
    let archive = root.join("A.tar");
    let listed = list_gnu(&archive);
    let offsets = check_dtar_archive("mfu-rs archive", &archive, "A.tar.dtaridx", &listed);
    assert_eq!(offsets.len(), tree::snapshot(&root.join("tree")).len());
}

// ---------------------------------------------------------------------------------------------
// (5) Hostile and damaged archives

/// Octal field: digits then NUL.
fn octal(field: &mut [u8], v: u64) {
    let w = field.len() - 1;
    let s = format!("{v:0w$o}");
    assert_eq!(s.len(), w);
    field[..w].copy_from_slice(s.as_bytes());
    field[w] = 0;
}

/// One ustar member (header, data, padding), built by hand.
fn member(name: &[u8], typeflag: u8, data: &[u8], link: &[u8]) -> Vec<u8> {
    let mode = match typeflag {
        b'5' => 0o755,
        b'2' => 0o777,
        _ => 0o644,
    };
    member_mode(name, typeflag, data, link, mode)
}

/// [`member`] with a given mode.
fn member_mode(name: &[u8], typeflag: u8, data: &[u8], link: &[u8], mode: u64) -> Vec<u8> {
    assert!(name.len() <= 100 && link.len() <= 100);
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    octal(&mut h[100..108], mode);
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], data.len() as u64);
    octal(&mut h[136..148], 1_600_000_000);
    h[156] = typeflag;
    h[157..157 + link.len()].copy_from_slice(link);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[265..269].copy_from_slice(b"root");
    h[297..301].copy_from_slice(b"root");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn file(name: &str, data: &[u8]) -> Vec<u8> {
    member(name.as_bytes(), b'0', data, b"")
}

fn archive_of(members: &[Vec<u8>]) -> Vec<u8> {
    let mut a = members.concat();
    a.extend_from_slice(&[0u8; 1024]);
    a
}

#[derive(Debug, PartialEq)]
struct FileState {
    ino: u64,
    nlink: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn file_state(p: &Path) -> FileState {
    let m = std::fs::symlink_metadata(p).unwrap();
    FileState {
        ino: m.ino(),
        nlink: m.nlink(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    }
}

/// Extract `bytes` with mfu-rs into DIR/target, where DIR also holds `outside/` (with `f` and
/// `sub/`); check that nothing outside DIR/target (nor /etc/passwd, nor /abs) changed. `prepare`
/// may populate the target first. Returns (DIR, target, output).
fn extract_hostile(
    tmp: &Path,
    label: &str,
    bytes: &[u8],
    prepare: impl FnOnce(&Path, &Path),
) -> (PathBuf, PathBuf, Output) {
    let dir = tmp.join(label);
    let outside = dir.join("outside");
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(outside.join("f"), b"outside data\n").unwrap();
    let target = dir.join("target");
    std::fs::create_dir(&target).unwrap();
    prepare(&dir, &target);
    let archives = tmp.join("archives");
    std::fs::create_dir_all(&archives).unwrap();
    let archive = archives.join(format!("{label}.tar"));
    std::fs::write(&archive, bytes).unwrap();
    assert!(
        !Path::new("/abs").exists(),
        "/abs exists on this machine: this test needs it absent"
    );
    let before = tree::without(&tree::snapshot(&dir), b"target");
    let passwd = file_state(Path::new("/etc/passwd"));
    let out = mfu(&["tar", "-x", "-f"])
        .arg(&archive)
        .arg("-C")
        .arg(&target)
        .output()
        .unwrap();
    if Path::new("/abs").exists() {
        let _ = std::fs::remove_dir_all("/abs");
        panic!("{label}: mfu-rs tar -x created /abs (removed again)");
    }
    let after = tree::without(&tree::snapshot(&dir), b"target");
    tree::assert_equal_in(
        &format!("{label}: outside the target"),
        &before,
        &after,
        Compare::FULL,
    );
    let ct = tree::ctime_changes(&before, &after);
    assert!(ct.is_empty(), "{label}: changed outside the target: {ct:?}");
    assert_eq!(
        std::fs::symlink_metadata(outside.join("f"))
            .unwrap()
            .nlink(),
        1,
        "{label}: outside/f got a hard link"
    );
    assert_eq!(
        file_state(Path::new("/etc/passwd")),
        passwd,
        "{label}: /etc/passwd changed"
    );
    (dir, target, out)
}

fn assert_exit_1_naming(label: &str, out: &Output, names: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{label}: exit status\n--- stdout\n{}\n--- stderr\n{err}",
        text(&out.stdout)
    );
    for name in names {
        assert!(
            err.lines()
                .any(|l| l.starts_with("mfu-rs tar: ") && l.contains(name)),
            "{label}: stderr must name {name:?} (`mfu-rs tar: PATH: reason`):\n{err}"
        );
    }
}

fn assert_extracted(label: &str, target: &Path, files: &[(&str, &[u8])]) {
    for (name, data) in files {
        assert_eq!(
            std::fs::read(target.join(name)).ok().as_deref(),
            Some(*data),
            "{label}: the good entry {name} must be extracted"
        );
    }
}

/// Run every case, then fail with all the failed cases (so one failure hides no other).
/// A named check of [`run_cases`].
type Case<'a> = (&'a str, Box<dyn FnOnce() + 'a>);

fn run_cases(cases: Vec<Case<'_>>) {
    let mut failed = Vec::new();
    for (name, case) in cases {
        if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(case)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("[{name}] {msg}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} case(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn hostile_entries_are_refused_and_nothing_is_written_outside_the_target() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let goods: [(&str, &[u8]); 2] = [("good1", b"one\n"), ("good2", b"two\n")];
    let g1 = file(goods[0].0, goods[0].1);
    let g2 = file(goods[1].0, goods[1].1);
    run_cases(vec![
        (
            "`..` component",
            Box::new(|| {
                let a = archive_of(&[g1.clone(), file("../x", b"escaped\n"), g2.clone()]);
                let (dir, target, out) = extract_hostile(t, "dotdot", &a, |_, _| {});
                assert_exit_1_naming("dotdot", &out, &["../x"]);
                assert_extracted("dotdot", &target, &goods);
                assert!(!dir.join("x").exists());
            }),
        ),
        (
            "absolute paths /abs/y and DIR/abs/y",
            Box::new(|| {
                let dir = t.join("absolute");
                let inner = format!("{}/abs/y", dir.display());
                let a = archive_of(&[
                    g1.clone(),
                    file("/abs/y", b"absolute\n"),
                    file(&inner, b"absolute into DIR\n"),
                    g2.clone(),
                ]);
                let (dir, target, out) = extract_hostile(t, "absolute", &a, |_, _| {});
                assert_exit_1_naming("absolute", &out, &["/abs/y", &inner]);
                assert_extracted("absolute", &target, &goods);
                assert!(!dir.join("abs").exists());
                assert_eq!(
                    dir_entries(&target),
                    vec!["good1", "good2"],
                    "absolute: refused entries must not be extracted (not even with the `/` stripped)"
                );
            }),
        ),
        (
            "through a symlink the archive creates",
            Box::new(|| {
                let dir = t.join("symlink");
                let abs_outside = format!("{}/outside", dir.display());
                let a = archive_of(&[
                    member(b"a", b'2', b"", abs_outside.as_bytes()),
                    file("a/file", b"through a\n"),
                    member(b"b", b'2', b"", b"../outside"),
                    file("b/file2", b"through b\n"),
                    g1.clone(),
                    g2.clone(),
                ]);
                let (_, target, out) = extract_hostile(t, "symlink", &a, |_, _| {});
                assert_exit_1_naming("symlink", &out, &["a/file", "b/file2"]);
                assert_extracted("symlink", &target, &goods);
            }),
        ),
        (
            "through a symlink that exists in the target",
            Box::new(|| {
                let a = archive_of(&[file("pre/file3", b"through pre\n"), g1.clone(), g2.clone()]);
                let (_, target, out) = extract_hostile(t, "existing-symlink", &a, |dir, target| {
                    std::os::unix::fs::symlink(dir.join("outside"), target.join("pre")).unwrap();
                });
                assert_exit_1_naming("existing-symlink", &out, &["pre/file3"]);
                assert_extracted("existing-symlink", &target, &goods);
            }),
        ),
        (
            "hard link to /etc/passwd",
            Box::new(|| {
                let a = archive_of(&[
                    g1.clone(),
                    member(b"pw", b'1', b"", b"/etc/passwd"),
                    g2.clone(),
                ]);
                let (_, target, out) = extract_hostile(t, "hardlink-absolute", &a, |_, _| {});
                assert_exit_1_naming("hardlink-absolute", &out, &["pw"]);
                assert_extracted("hardlink-absolute", &target, &goods);
                assert!(std::fs::symlink_metadata(target.join("pw")).is_err());
            }),
        ),
        (
            "hard link to ../outside/f",
            Box::new(|| {
                let a = archive_of(&[
                    g1.clone(),
                    member(b"hl", b'1', b"", b"../outside/f"),
                    g2.clone(),
                ]);
                let (_, target, out) = extract_hostile(t, "hardlink-dotdot", &a, |_, _| {});
                assert_exit_1_naming("hardlink-dotdot", &out, &["hl"]);
                assert_extracted("hardlink-dotdot", &target, &goods);
                assert!(std::fs::symlink_metadata(target.join("hl")).is_err());
            }),
        ),
        (
            "hard link through a symlink the archive creates",
            Box::new(|| {
                let dir = t.join("hardlink-via-symlink");
                let abs_outside = format!("{}/outside", dir.display());
                let a = archive_of(&[
                    member(b"s", b'2', b"", abs_outside.as_bytes()),
                    member(b"h", b'1', b"", b"s/f"),
                    g1.clone(),
                    g2.clone(),
                ]);
                let (_, target, out) = extract_hostile(t, "hardlink-via-symlink", &a, |_, _| {});
                assert_exit_1_naming("hardlink-via-symlink", &out, &["h"]);
                assert_extracted("hardlink-via-symlink", &target, &goods);
            }),
        ),
        (
            "file entry over a symlink (archive's or the target's) to an outside file",
            Box::new(|| {
                let dir = t.join("file-over-symlink");
                let abs_f = format!("{}/outside/f", dir.display());
                let a = archive_of(&[
                    member(b"s2", b'2', b"", abs_f.as_bytes()),
                    // Mode 0o777: a chmod that follows the symlink would show outside.
                    member_mode(b"s2", b'0', b"overwrite through s2\n", b"", 0o777),
                    member_mode(b"pre2", b'0', b"overwrite through pre2\n", b"", 0o777),
                    g1.clone(),
                    g2.clone(),
                ]);
                // Only: nothing written through the symlinks (checked by extract_hostile).
                let (_, target, out) =
                    extract_hostile(t, "file-over-symlink", &a, |dir, target| {
                        std::os::unix::fs::symlink(dir.join("outside/f"), target.join("pre2"))
                            .unwrap();
                    });
                assert!(
                    matches!(out.status.code(), Some(0 | 1)),
                    "file-over-symlink: {:?}\n{}",
                    out.status,
                    text(&out.stderr)
                );
                assert_extracted("file-over-symlink", &target, &goods);
            }),
        ),
    ]);
}

/// stderr names `entry` or says what is wrong with the archive.
fn assert_exit_1_problem(label: &str, out: &Output, entry: &str, words: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{label}: exit status\n--- stdout\n{}\n--- stderr\n{err}",
        text(&out.stdout)
    );
    let lower = err.to_lowercase();
    assert!(
        err.lines().any(|l| l.starts_with("mfu-rs tar: "))
            && (err.contains(entry) || words.iter().any(|w| lower.contains(w))),
        "{label}: stderr must name {entry:?} or the problem ({words:?}):\n{err}"
    );
}

#[test]
fn truncated_and_corrupt_archives_fail_with_exit_1_and_keep_what_precedes() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let big: Vec<u8> = (0..65_536u32).map(|i| (i * 7 + 3) as u8).collect();
    let m1 = file("good1", b"one\n");
    let m2 = file("big", &big);
    let m3 = file("good3", b"three\n");
    let whole = archive_of(&[m1.clone(), m2.clone(), m3.clone()]);
    // Sanity of the writer: GNU tar reads it.
    let check = t.join("whole.tar");
    std::fs::write(&check, &whole).unwrap();
    assert_lines_eq(
        "sanity",
        &list_gnu(&check),
        &[b"good1".to_vec(), b"big".to_vec(), b"good3".to_vec()],
    );
    let truncation = [
        "truncat",
        "unexpected end",
        "premature",
        "short",
        "corrupt",
        "eof",
    ];

    // Cut in the middle of big's data (and of a block).
    let cut = m1.len() + 512 + 20_000 + 100;
    let (_, target, out) = extract_hostile(t, "cut-in-data", &whole[..cut], |_, _| {});
    assert_exit_1_problem("cut-in-data", &out, "big", &truncation);
    assert_extracted("cut-in-data", &target, &[("good1", b"one\n")]);

    // Cut in the middle of a header.
    let g2 = file("good2", b"two\n");
    let a = archive_of(&[m1.clone(), g2, m3.clone()]);
    let cut = 2 * 1024 + 200;
    let (_, target, out) = extract_hostile(t, "cut-in-header", &a[..cut], |_, _| {});
    assert_exit_1_problem("cut-in-header", &out, "good3", &truncation);
    assert_extracted(
        "cut-in-header",
        &target,
        &[("good1", b"one\n"), ("good2", b"two\n")],
    );

    // A header whose checksum does not match (a name byte changed after the sum).
    let mut bad = file("bad", b"bad entry\n");
    bad[2] = b'e';
    let a = archive_of(&[m1, bad, m3]);
    let (_, target, out) = extract_hostile(t, "bad-checksum", &a, |_, _| {});
    assert_exit_1_problem(
        "bad-checksum",
        &out,
        "bae",
        &["checksum", "corrupt", "invalid header", "bad header"],
    );
    assert_extracted("bad-checksum", &target, &[("good1", b"one\n")]);
    assert!(!target.join("bae").exists() && !target.join("bad").exists());
}

// ---------------------------------------------------------------------------------------------
// (6) Files changing size during create

#[test]
fn files_changing_size_during_create_are_reported_and_the_archive_stays_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let src = root.join("tree");
    std::fs::create_dir_all(src.join("keep")).unwrap();
    let grow_data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let shrink_data: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8 | 1).collect();
    std::fs::write(src.join("growing.dat"), &grow_data).unwrap();
    std::fs::write(src.join("shrinking.dat"), &shrink_data).unwrap();
    std::fs::write(src.join("keep/a.txt"), b"unchanged\n").unwrap();
    std::fs::write(src.join("keep/b.bin"), vec![9u8; 70_000]).unwrap();
    let want = tree::snapshot(&src);
    let hook = format!(
        "printf %s 'appended after the walk' >> '{}' && truncate -s 1000 '{}'",
        src.join("growing.dat").display(),
        src.join("shrinking.dat").display()
    );
    let out = expect_status(
        mfu(&["tar", "-c", "-f", "A.tar", "tree"])
            .current_dir(&root)
            .env("MFU_TEST_HOOK_AFTER_LAYOUT", &hook),
        1,
    );
    assert_eq!(
        std::fs::metadata(src.join("growing.dat")).unwrap().len(),
        100_023,
        "the hook did not run"
    );
    assert_eq!(
        std::fs::metadata(src.join("shrinking.dat")).unwrap().len(),
        1000
    );
    let err = text(&out.stderr);
    for f in ["tree/growing.dat", "tree/shrinking.dat"] {
        assert!(
            err.lines().any(|l| l.starts_with("mfu-rs tar: ")
                && l.contains(f)
                && l.contains("changed size")),
            "stderr must have `mfu-rs tar: {f}: changed size while being archived`:\n{err}"
        );
    }
    let archive = root.join("A.tar");
    let listed = list_gnu(&archive);
    let mut names = expected_names(&want, "tree");
    names.push(b"A.tar.dtaridx".to_vec());
    assert_lines_eq("`tar -tf` after size changes", &listed, &names);
    let x = tmp.path().join("x");
    std::fs::create_dir(&x).unwrap();
    expect_status(gnu_tar().arg("-xf").arg(&archive).arg("-C").arg(&x), 0);
    assert_eq!(
        std::fs::read(x.join("tree/growing.dat")).unwrap(),
        grow_data,
        "the grown file must hold its walked size and bytes"
    );
    let mut shrunk = shrink_data[..1000].to_vec();
    shrunk.resize(300_000, 0);
    assert!(
        std::fs::read(x.join("tree/shrinking.dat")).unwrap() == shrunk,
        "the shrunk file must keep its walked size, the missing part zeros"
    );
    let got = tree::snapshot(&x.join("tree"));
    let strip = |t: &Tree| -> Tree {
        let t = tree::without(t, b"growing.dat");
        tree::without(&t, b"shrinking.dat")
    };
    tree::assert_equal_in("other entries", &strip(&want), &strip(&got), Compare::META);
    for f in [&b"growing.dat"[..], b"shrinking.dat"] {
        assert_eq!(
            got[f].mtime,
            want[f].mtime,
            "walked mtime of {}",
            tree::lossy(f)
        );
    }
    check_dtar_archive("after size changes", &archive, "A.tar.dtaridx", &listed);
}

// ---------------------------------------------------------------------------------------------
// (7) zstd-seekable archives

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// `rank R: extracted E entries, B bytes of data; decompressed F zstd frames (Z bytes)` lines.
fn rank_lines(out: &Output) -> BTreeMap<u64, [u64; 4]> {
    let all = format!("{}\n{}", text(&out.stdout), text(&out.stderr));
    let mut m = BTreeMap::new();
    for line in all.lines() {
        let Some(rest) = line.trim().strip_prefix("rank ") else {
            continue;
        };
        if !(rest.contains(" extracted ") && rest.contains(" zstd frames")) {
            continue;
        }
        let nums: Vec<u64> = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(nums.len(), 5, "unexpected rank line: {line}");
        assert!(
            m.insert(nums[0], [nums[1], nums[2], nums[3], nums[4]])
                .is_none(),
            "two lines for rank {}:\n{all}",
            nums[0]
        );
    }
    m
}

#[test]
fn zstd_archives_are_seekable_readable_by_zstd_and_extracted_in_parallel() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let src = root.join("tree");
    std::fs::create_dir_all(&src).unwrap();
    let mut block = vec![0u8; 1 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in block.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 58) as u8; // 64 symbols: compressible, not trivially
    }
    for f in 0..3u8 {
        let mut data = Vec::with_capacity(8 << 20);
        for i in 0..8u8 {
            data.extend_from_slice(&block);
            let at = data.len() - (1 << 20);
            data[at] = f;
            data[at + 1] = i;
        }
        std::fs::write(src.join(format!("big{f}.bin")), data).unwrap();
    }
    for d in 0..10 {
        std::fs::create_dir(src.join(format!("small{d}"))).unwrap();
        for i in 0..20usize {
            let n = (d * 20 + i) * 37 % 3000;
            std::fs::write(
                src.join(format!("small{d}/f{i}")),
                &block[i * 1000..i * 1000 + n],
            )
            .unwrap();
        }
    }
    let want = tree::snapshot(&src);
    expect_status(
        mfu(&[
            "tar",
            "-c",
            "--zstd",
            "-k",
            "1MB",
            "-f",
            "A.tar.zst",
            "tree",
        ])
        .current_dir(&root),
        0,
    );
    let archive = root.join("A.tar.zst");
    let z = std::fs::read(&archive).unwrap();
    let n = z.len();
    assert!(n > 16, "archive of {n} bytes");
    assert_eq!(
        le32(&z, 0),
        0xFD2F_B528,
        "the archive must start with a zstd frame"
    );
    assert_eq!(
        le32(&z, n - 4),
        0x8F92_EAB1,
        "seekable footer magic (last 4 bytes, LE)"
    );
    // Seek table: skippable frame {magic, size, entries, footer}.
    let nframes = le32(&z, n - 9) as usize;
    let esz = if z[n - 5] & 0x80 != 0 { 12 } else { 8 };
    let table_len = nframes * esz + 9;
    assert!(table_len + 8 <= n, "{nframes} frames do not fit");
    let skip = n - table_len - 8;
    assert_eq!(
        le32(&z, skip),
        0x184D_2A5E,
        "seek table skippable-frame magic"
    );
    assert_eq!(
        le32(&z, skip + 4) as usize,
        table_len,
        "seek table frame size"
    );
    assert!(
        nframes >= 4,
        "want several frames for 24 MiB at -k 1MB, got {nframes}"
    );
    let (mut pos, mut dsum) = (0usize, 0usize);
    for i in 0..nframes {
        let e = skip + 8 + i * esz;
        assert_eq!(le32(&z, pos), 0xFD2F_B528, "frame {i} at {pos}: zstd magic");
        pos += le32(&z, e) as usize;
        dsum += le32(&z, e + 4) as usize;
    }
    assert_eq!(pos, skip, "the frames must be followed by the seek table");
    // Any zstd decoder reads it; GNU tar lists every entry.
    let dec = expect_status(tool("zstd").arg("-dc").arg(&archive), 0).stdout;
    assert_eq!(dec.len(), dsum, "decompressed size against the seek table");
    let plain = tmp.path().join("dec.tar");
    std::fs::write(&plain, &dec).unwrap();
    let mut names = expected_names(&want, "tree");
    names.push(b"A.tar.zst.dtaridx".to_vec());
    assert_lines_eq("`zstd -dc | tar -t`", &list_gnu(&plain), &names);
    // Extract at 2 ranks: both decompress frames.
    let x = tmp.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let out = expect_status(
        tar_np(2)
            .args(["-x", "-v", "-f"])
            .arg(&archive)
            .arg("-C")
            .arg(&x),
        0,
    );
    assert_dir_holds("zstd extract", &x, &["tree"]);
    tree::assert_equal_in(
        "zstd extract at np=2",
        &want,
        &tree::snapshot(&x.join("tree")),
        Compare::META,
    );
    let ranks = rank_lines(&out);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        ranks.keys().copied().collect::<Vec<_>>(),
        vec![0, 1],
        "one `rank R: extracted ...` line per rank:\n{all}"
    );
    for (r, [_, _, frames, _]) in &ranks {
        assert!(*frames > 0, "rank {r} decompressed no frame:\n{all}");
    }
    let entries: u64 = ranks.values().map(|v| v[0]).sum();
    let bytes: u64 = ranks.values().map(|v| v[1]).sum();
    assert_eq!(entries, want.len() as u64, "entries extracted:\n{all}");
    assert_eq!(bytes, tree::file_bytes(&want), "bytes of data:\n{all}");
}

// ---------------------------------------------------------------------------------------------
// (8) -t -v

#[test]
fn list_verbose_prints_tar_tv_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    make_vector_tree(&root.join("tree"), 1, false);
    expect_status(
        mfu(&["tar", "-c", "-f", "A.tar", "tree"]).current_dir(&root),
        0,
    );
    let archive = root.join("A.tar");
    let gnu = lines(&expect_status(gnu_tar().arg("-tvf").arg(&archive), 0).stdout);
    let gnu = &gnu[..gnu.len() - 1]; // the index member
    let out = expect_status(
        mfu(&["tar", "-t", "-v", "-f"])
            .arg(&archive)
            .env("TZ", "UTC"),
        0,
    );
    let ours = lines(&out.stdout);
    assert_eq!(
        ours.len(),
        gnu.len(),
        "one line per entry, the index hidden:\n{}",
        text(&out.stdout)
    );
    for (o, g) in ours.iter().zip(gnu) {
        let (ot, orest) = tv_fields(o);
        let (gt, grest) = tv_fields(g);
        assert_eq!(
            (ot, text(&orest)),
            (gt, text(&grest)),
            "`mfu-rs tar -t -v` line against `tar -tv`:\n  ours: {}\n  gnu:  {}",
            text(o),
            text(g)
        );
    }
    let first = tv_fields(&ours[0]);
    let (date, hm, _) = utc(tree::mtime_of(&root.join("tree")));
    assert_eq!(
        (first.0, text(&first.1)),
        (
            vec![
                "drwxr-xr-x".to_string(),
                "root/root".into(),
                "0".into(),
                date,
                hm
            ],
            "tree/".to_string()
        )
    );
    let txt = text(&out.stdout);
    assert!(
        txt.lines().any(
            |l| l.ends_with("tree/perm/link_to_large -> ../big/large.bin")
                && l.starts_with("lrwxrwxrwx ")
        ),
        "{txt}"
    );
}

// ---------------------------------------------------------------------------------------------
// (9) Usage errors

#[test]
fn usage_errors_exit_2_and_a_missing_archive_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir_all(cwd.join("tree")).unwrap();
    std::fs::write(cwd.join("tree/f"), b"f\n").unwrap();
    let before = tree::snapshot(&cwd);
    let cases: [(&str, &[&str]); 7] = [
        ("no mode", &["-f", "a.tar", "tree"]),
        ("two modes -c -x", &["-c", "-x", "-f", "a.tar", "tree"]),
        ("two modes -x -t", &["-x", "-t", "-f", "a.tar"]),
        ("create without -f", &["-c", "tree"]),
        ("extract without -f", &["-x"]),
        ("list without -f", &["-t"]),
        (
            "unknown option",
            &["-c", "--no-such-option", "-f", "a.tar", "tree"],
        ),
    ];
    for (name, args) in cases {
        let out = expect_status(mfu(&["tar"]).args(args).current_dir(&cwd), 2);
        assert!(!out.stderr.is_empty(), "{name}: exit 2 without a message");
        let after = tree::snapshot(&cwd);
        tree::assert_equal_in(name, &before, &after, Compare::FULL);
    }
    let missing = tmp.path().join("no-such-archive.tar");
    for mode in ["-x", "-t"] {
        let out = mfu(&["tar", mode, "-f"])
            .arg(&missing)
            .arg("-C")
            .arg(&cwd)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(c) if c != 0),
            "{mode} of a missing archive: {:?}\n{err}",
            out.status
        );
        assert!(
            err.contains(&missing.display().to_string()),
            "{mode}: the message must name {}:\n{err}",
            missing.display()
        );
        tree::assert_equal_in(mode, &before, &tree::snapshot(&cwd), Compare::FULL);
    }
}

/// The xattr `name` of `path`, not followed (`None` when absent).
fn xattr_of(path: &Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    rustix::fs::lgetxattr(path, name, &mut buf[..])
        .ok()
        .map(|n| buf[..n].to_vec())
}

#[test]
fn xattrs_travel_only_with_preserve_and_gnu_tar_reads_them() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("x");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"data").unwrap();
    // A binary value with NUL and newline bytes, as pax records must carry it.
    tree::set_xattr(&src.join("f"), "user.mfu.test", b"a\0b\nc");
    let a = t.path().join("x.tar");
    expect_status(
        tar_np(1)
            .args(["-c", "--preserve-xattrs", "-f"])
            .arg(&a)
            .arg("-C")
            .arg(t.path())
            .arg("x"),
        0,
    );
    let with = t.path().join("with");
    let without = t.path().join("without");
    std::fs::create_dir(&with).unwrap();
    std::fs::create_dir(&without).unwrap();
    expect_status(
        tar_np(1)
            .args(["-x", "-p", "-f"])
            .arg(&a)
            .arg("-C")
            .arg(&with),
        0,
    );
    expect_status(
        tar_np(1).args(["-x", "-f"]).arg(&a).arg("-C").arg(&without),
        0,
    );
    assert_eq!(
        xattr_of(&with.join("x/f"), "user.mfu.test").as_deref(),
        Some(&b"a\0b\nc"[..])
    );
    assert_eq!(xattr_of(&without.join("x/f"), "user.mfu.test"), None);
    // GNU tar restores the same attribute from the pax SCHILY.xattr record.
    let gnu = t.path().join("gnu");
    std::fs::create_dir(&gnu).unwrap();
    expect_status(
        gnu_tar()
            .args(["--xattrs", "--xattrs-include=user.*", "-xf"])
            .arg(&a)
            .arg("-C")
            .arg(&gnu),
        0,
    );
    assert_eq!(
        xattr_of(&gnu.join("x/f"), "user.mfu.test").as_deref(),
        Some(&b"a\0b\nc"[..])
    );
    // Without --preserve-xattrs nothing is stored.
    let plain = t.path().join("plain.tar");
    expect_status(
        tar_np(1)
            .args(["-c", "-f"])
            .arg(&plain)
            .arg("-C")
            .arg(t.path())
            .arg("x"),
        0,
    );
    let bytes = std::fs::read(&plain).unwrap();
    assert!(!bytes.windows(13).any(|w| w == b"SCHILY.xattr."));
}

// ---------------------------------------------------------------------------------------------
// (11) The library: typed options in, a report out; and the report as `--json`

/// `options` with its events going to a fresh [`Kept`].
fn kept(mut options: mfu::tar::Options) -> (mfu::tar::Options, std::sync::Arc<Kept>) {
    let events = std::sync::Arc::new(Kept::default());
    options.context = mfu::prelude::Context::new(events.clone());
    (options, events)
}

/// `mfu::tar::run` on 2 local ranks: every rank's report (they must agree on the counts).
fn run_tar_library(options: &mfu::tar::Options) -> mfu::tar::Report {
    let reports = steal::local::run(2, |comm| mfu::tar::run(comm, options));
    let reports: Vec<mfu::tar::Report> = reports
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("tar {:?}: {e}", options.mode)))
        .collect();
    for r in &reports[1..] {
        let counts = |r: &mfu::tar::Report| {
            (
                r.entries,
                r.archive_entries,
                r.bytes,
                r.skipped,
                r.failed,
                r.created,
            )
        };
        assert_eq!(counts(r), counts(&reports[0]), "ranks disagree");
    }
    reports.into_iter().next().unwrap()
}

/// src/ with 4 files and directories (71000 bytes of data) and a fifo, under `dir`.
fn small_tree_with_fifo(dir: &Path) {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("a"), vec![b'a'; 1000]).unwrap();
    std::fs::write(src.join("d/b"), mfu_tests::noise(7, 70_000)).unwrap();
    std::fs::write(src.join("d/e"), b"").unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        src.join("p"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

#[test]
fn library_create_list_extract_report_their_counts_and_a_failure_with_its_message() {
    let _serial = mfu_tests::serial();
    use mfu::prelude::ToolReport;
    use mfu::tar::{Done, Options};
    use mfu::Status;
    let tmp = tempfile::tempdir().unwrap();
    small_tree_with_fifo(tmp.path());
    let archive = tmp.path().join("a.tar");

    // Create: 5 entries (src, a, d, d/b, d/e); the fifo is named and skipped, which does not
    // fail a create.
    let (mut o, events) = kept(Options::create(&archive, ["src"]));
    o.chdir = Some(tmp.path().as_os_str().as_bytes().to_vec());
    let r = run_tar_library(&o);
    assert_eq!(r.mode, Done::Create);
    assert!(r.created, "{r:?}");
    assert!(archive.is_file());
    assert_eq!((r.entries, r.archive_entries), (5, 5), "{r:?}");
    assert_eq!(r.bytes, 71_000);
    assert_eq!((r.skipped, r.failed, r.walk_errors), (1, 0, 0), "{r:?}");
    assert!(!r.interrupted);
    assert_eq!(r.status(), Status::Ok);
    assert_eq!(r.summary().items, 5);
    let errors = events.errors.lock().unwrap().clone();
    assert!(
        errors.len() == 1 && errors[0].contains("src/p") && errors[0].contains("fifo"),
        "the fifo must be named once: {errors:?}"
    );

    // List: the names in archive order, through the output events.
    let (o, events) = kept(Options::list(&archive));
    let r = run_tar_library(&o);
    assert_eq!(r.mode, Done::List);
    assert_eq!((r.entries, r.archive_entries, r.failed), (5, 5, 0), "{r:?}");
    assert!(!r.scanned, "the archive has its index");
    assert_eq!(r.status(), Status::Ok);
    assert_eq!(
        text(&events.output.lock().unwrap()),
        "src/\nsrc/a\nsrc/d/\nsrc/d/b\nsrc/d/e\n"
    );
    let (mut o, events) = kept(Options::list(&archive));
    o.long = true;
    run_tar_library(&o);
    let long = text(&events.output.lock().unwrap());
    assert!(
        long.lines().count() == 5
            && long
                .lines()
                .all(|l| l.starts_with('-') || l.starts_with('d')),
        "long listing:\n{long}"
    );

    // Extract: everything, the same bytes.
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let (o, events) = kept(Options::extract(&archive, &out));
    let r = run_tar_library(&o);
    assert_eq!(r.mode, Done::Extract);
    assert_eq!((r.entries, r.archive_entries), (5, 5), "{r:?}");
    assert_eq!((r.bytes, r.skipped, r.failed), (71_000, 0, 0), "{r:?}");
    assert_eq!(r.directory, out.as_os_str().as_bytes());
    assert_eq!(r.status(), Status::Ok);
    assert!(events.errors.lock().unwrap().is_empty());
    for f in ["a", "d/b", "d/e"] {
        assert_eq!(
            std::fs::read(out.join("src").join(f)).unwrap(),
            std::fs::read(tmp.path().join("src").join(f)).unwrap(),
            "{f}"
        );
    }

    // A hostile entry fails: counted, named, in the report's sample; the other is extracted.
    let hostile = tmp.path().join("h.tar");
    std::fs::write(
        &hostile,
        archive_of(&[file("../evil", b"x"), file("ok", b"fine")]),
    )
    .unwrap();
    let out = tmp.path().join("h");
    std::fs::create_dir(&out).unwrap();
    let (o, events) = kept(Options::extract(&hostile, &out));
    let r = run_tar_library(&o);
    assert_eq!((r.entries, r.archive_entries, r.failed), (1, 2, 1), "{r:?}");
    assert_eq!(r.status(), Status::ItemsFailed);
    assert_eq!(r.summary().failed, 1);
    assert!(r.scanned, "a foreign archive has no index");
    let errors = events.errors.lock().unwrap().clone();
    assert!(
        errors.iter().any(|e| e.contains("../evil")),
        "the refused entry must be named: {errors:?}"
    );
    assert!(
        r.failures.iter().any(|e| e.contains("../evil")),
        "the report's sample must hold it: {:?}",
        r.failures
    );
    assert_eq!(std::fs::read(out.join("ok")).unwrap(), b"fine");
    assert!(!tmp.path().join("evil").exists());

    // Options the library refuses: an error on every rank, nothing done.
    let none: [&str; 0] = [];
    let refused = steal::local::run(2, |comm| {
        mfu::tar::run(comm, &Options::create(tmp.path().join("n.tar"), none))
    });
    for r in refused {
        let e = r.expect_err("create of nothing");
        assert!(e.message.contains("-c needs at least one PATH"), "{e}");
    }
    assert!(!tmp.path().join("n.tar").exists());
}

/// The numbers of a tar summary line: (entries, bytes of data, failed).
fn summary_numbers(line: &str) -> (u64, u64, u64) {
    let word_before = |s: &str, word: &str| -> Option<u64> {
        let at = s.find(word)?;
        s[..at]
            .split_whitespace()
            .last()?
            .trim_start_matches('(')
            .parse()
            .ok()
    };
    // `Archived N entries, ...`, `Extracted N of M entries, ...`.
    let entries = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let bytes = word_before(line, " bytes) of data").unwrap();
    let failed = word_before(line, " failed").unwrap_or(0);
    (entries, bytes, failed)
}

/// `mfu-rs tar ARGS --ranks 2` with and without `--json` (each through `prepare`, which gets a
/// fresh name for what the run creates): the JSON report's counts against the text summary.
fn json_and_text(
    ctx: &str,
    code: i32,
    prepare: &dyn Fn(&str) -> Vec<std::ffi::OsString>,
) -> (serde_json::Value, Output) {
    let plain = expect_status(mfu(&["tar", "--ranks", "2"]).args(prepare("text")), code);
    let json = expect_status(
        mfu(&["tar", "--ranks", "2", "--json"]).args(prepare("json")),
        code,
    );
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap_or_else(|e| {
        panic!(
            "{ctx}: --json stdout is no JSON ({e}):\n{}",
            text(&json.stdout)
        )
    });
    assert_eq!(v["tool"], "tar", "{ctx}: {v}");
    assert_eq!(v["status"], code, "{ctx}: {v}");
    for k in ["seconds", "items", "bytes", "failed"] {
        assert!(v.get(k).is_some(), "{ctx}: no {k} in {v}");
    }
    (v, plain)
}

#[test]
fn json_reports_of_create_extract_and_list_match_their_text() {
    let tmp = tempfile::tempdir().unwrap();
    small_tree_with_fifo(tmp.path());
    let base = tmp.path().to_str().unwrap().to_string();
    let archive = format!("{base}/a.tar");
    let num = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));

    // Create.
    let (v, plain) = json_and_text("create", 0, &|n| {
        let a = if n == "text" {
            archive.clone()
        } else {
            format!("{base}/{n}.tar")
        };
        ["-c", "-f", &a, "-C", &base, "src"]
            .map(Into::into)
            .to_vec()
    });
    let line = text(&plain.stdout);
    assert!(line.starts_with("Archived 5 entries, "), "{line}");
    let (entries, bytes, failed) = summary_numbers(&line);
    assert_eq!((entries, bytes, failed), (5, 71_000, 0), "{line}");
    assert_eq!(
        (num(&v, "items"), num(&v, "bytes"), num(&v, "failed")),
        (entries, bytes, failed),
        "{v}\n{line}"
    );
    assert_eq!(
        (v["mode"].as_str(), v["created"].as_bool()),
        (Some("create"), Some(true))
    );
    assert_eq!(num(&v, "skipped"), 1, "{v}");

    // Extract.
    let (v, plain) = json_and_text("extract", 0, &|n| {
        let dir = format!("{base}/x-{n}");
        std::fs::create_dir_all(&dir).unwrap();
        ["-x", "-f", &archive, "-C", &dir].map(Into::into).to_vec()
    });
    let line = text(&plain.stdout);
    assert!(line.starts_with("Extracted 5 of 5 entries, "), "{line}");
    let (entries, bytes, failed) = summary_numbers(&line);
    assert_eq!((entries, bytes, failed), (5, 71_000, 0), "{line}");
    assert_eq!(
        (num(&v, "items"), num(&v, "bytes"), num(&v, "failed")),
        (entries, bytes, failed),
        "{v}\n{line}"
    );
    assert_eq!(num(&v, "archive_entries"), 5, "{v}");

    // List: no summary; the listing is the text, and goes to stderr with --json.
    let (v, plain) = json_and_text("list", 0, &|_| {
        ["-t", "-f", &archive].map(Into::into).to_vec()
    });
    let listed = text(&plain.stdout).lines().count() as u64;
    assert_eq!(listed, 5, "{}", text(&plain.stdout));
    assert_eq!((num(&v, "items"), num(&v, "failed")), (listed, 0), "{v}");
    assert_eq!(v["mode"], "list");

    // A failure: the hostile entry counted alike in both.
    let hostile = format!("{base}/h.tar");
    std::fs::write(
        &hostile,
        archive_of(&[file("../evil", b"x"), file("ok", b"fine")]),
    )
    .unwrap();
    let (v, plain) = json_and_text("hostile extract", 1, &|n| {
        let dir = format!("{base}/h-{n}");
        std::fs::create_dir_all(&dir).unwrap();
        ["-x", "-f", &hostile, "-C", &dir].map(Into::into).to_vec()
    });
    let line = text(&plain.stdout);
    let (entries, bytes, failed) = summary_numbers(&line);
    assert_eq!((entries, failed), (1, 1), "{line}");
    assert_eq!(
        (num(&v, "items"), num(&v, "bytes"), num(&v, "failed")),
        (entries, bytes, failed),
        "{v}\n{line}"
    );
    assert!(
        v["failures"]
            .as_array()
            .is_some_and(|f| f.iter().any(|m| m.as_str().unwrap().contains("../evil"))),
        "{v}"
    );
}

/// The digest of `bytes` as `hash` (`blake3`, `sha256`), in hex.
fn hex_digest(hash: &str, bytes: &[u8]) -> String {
    use mfu::unstable::engine::digest::{hex, HashKind};
    let kind = if hash == "sha256" {
        HashKind::Sha256
    } else {
        HashKind::Blake3
    };
    hex(&kind.of(bytes))
}

/// `tar -x --manifest` certifies the member's bytes as read from the archive, never the file
/// written: with a seam that damages `big` after each of its ranges is written, the checker
/// finds the damage. SHA-256 can't be assembled from ranges, so a file written in several
/// (over 3 thread ranks or 2 MPI ranks of a plain archive, or many frames of a compressed
/// one) is read again from the archive, not from the damaged file; BLAKE3 too.
#[test]
fn a_member_damaged_after_its_write_fails_the_check_of_the_tar_x_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let big = mfu_tests::noise(7, (3 << 20) + 1234);
    std::fs::write(src.join("big"), &big).unwrap();
    std::fs::write(src.join("small"), b"small file").unwrap();
    for z in [false, true] {
        let archive = tmp.path().join(format!("a{z}.tar"));
        let mut create = mfu_tests::Tool::new("tar").args(["-c", "-k", "64K", "-f"]);
        create = create.arg(&archive);
        if z {
            create = create.arg("-z");
        }
        create.arg("src").current_dir(tmp.path()).expect(0);
        for hash in ["sha256", "blake3"] {
            let launches: [(&str, &dyn Fn(mfu_tests::Tool) -> mfu_tests::Tool); 3] = [
                ("1", &|t| t),
                ("ranks 3", &|t| t.ranks(3)),
                ("mpirun 2", &|t| t.mpi(2)),
            ];
            for (ranks, launch) in launches {
                let ctx = format!("{hash} {ranks} compressed={z}");
                let out = tmp.path().join(format!("x {ctx}"));
                std::fs::create_dir(&out).unwrap();
                let manifest = tmp.path().join(format!("{ctx}.sum"));
                launch(mfu_tests::Tool::new("tar"))
                    .env("MFU_RS_TEST_CORRUPT_BEFORE_VERIFY", "big")
                    .args(["-x", "-k", "64K", "--manifest-hash", hash, "--manifest"])
                    .arg(&manifest)
                    .arg("-f")
                    .arg(&archive)
                    .arg("-C")
                    .arg(&out)
                    .expect(0);
                assert!(
                    std::fs::read(out.join("src/big")).unwrap() != big,
                    "{ctx}: the seam did not damage the file"
                );
                let listed = text(&std::fs::read(&manifest).unwrap());
                let line = format!("{}  src/big\n", hex_digest(hash, &big));
                assert!(listed.contains(&line), "{ctx}: no {line:?} in\n{listed}");
                let (program, flag) = if hash == "sha256" {
                    ("sha256sum", "-c")
                } else {
                    ("b3sum", "--check")
                };
                let checked = tool(program)
                    .arg(flag)
                    .arg(&manifest)
                    .current_dir(&out)
                    .output()
                    .unwrap();
                assert!(!checked.status.success(), "{ctx}: the damage passed");
                let said = text(&checked.stdout);
                assert!(said.contains("src/big: FAILED"), "{ctx}: {said}");
                assert!(said.contains("src/small: OK"), "{ctx}: {said}");
            }
        }
    }
}

/// `tar -x` never replaces the archive it reads (nor its side index), whatever name leads to
/// it: a member named as the archive in the directory it is extracted to, a member named as
/// a hard link to the archive, the archive reached through a symlinked target directory, a
/// member named as the index `--save-index` keeps. The member is refused and named, the
/// others are extracted, exit 1, and the archive is intact; at 1 rank, 3 thread ranks, under
/// mpirun, and for an archive in one gzip stream (read front to back).
#[test]
fn tar_x_never_overwrites_the_archive_it_reads_or_its_index() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let launches: [(&str, &dyn Fn(mfu_tests::Tool) -> mfu_tests::Tool); 3] = [
        ("1", &|t| t),
        ("ranks 3", &|t| t.ranks(3)),
        ("mpirun 2", &|t| t.mpi(2)),
    ];
    // An archive at `made` holding the members `names` (each's content its name repeated).
    let make = |made: &Path, names: &[&str], gz: bool| {
        let stage = t.join("stage");
        let _ = std::fs::remove_dir_all(&stage);
        std::fs::create_dir(&stage).unwrap();
        for n in names {
            std::fs::write(stage.join(n), n.repeat(5000)).unwrap();
        }
        let flags = if gz { "-czf" } else { "-cf" };
        let ok = std::process::Command::new("tar")
            .arg(flags)
            .arg(made)
            .arg("-C")
            .arg(&stage)
            .args(names)
            .status()
            .unwrap();
        assert!(ok.success());
    };
    let check = |ctx: &str, run: &mfu_tests::Run, refused: &str, what: &str, dir: &Path| {
        assert_eq!(run.code(), Some(1), "{ctx}: {}", run.stderr_str());
        let said = format!("{refused}: refusing to overwrite {what}");
        assert!(
            run.stderr_str().contains(&said),
            "{ctx}: {}",
            run.stderr_str()
        );
        for n in ["x", "y z"] {
            assert_eq!(
                std::fs::read(dir.join(n)).unwrap(),
                n.repeat(5000).as_bytes(),
                "{ctx}: {n} not extracted"
            );
        }
    };
    for (ranks, launch) in launches {
        for gz in [false, true] {
            if gz && ranks != "1" {
                continue;
            }
            let ctx = format!("{ranks} gz={gz}");
            let name = if gz { "a.tar.gz" } else { "a.tar" };
            // A member named as the archive, extracted where the archive is.
            let d = t.join(format!("d {ctx}"));
            std::fs::create_dir(&d).unwrap();
            make(&t.join(name), &["x", name, "y z"], gz);
            std::fs::rename(t.join(name), d.join(name)).unwrap();
            let before = std::fs::read(d.join(name)).unwrap();
            let run = launch(mfu_tests::Tool::new("tar"))
                .arg("-xf")
                .arg(name)
                .current_dir(&d)
                .run();
            check(&ctx, &run, name, "the archive being read", &d);
            assert_eq!(std::fs::read(d.join(name)).unwrap(), before, "{ctx}");
            // The same archive reached through a symlink to the directory it is in.
            std::fs::remove_file(d.join("x")).unwrap();
            std::fs::remove_file(d.join("y z")).unwrap();
            let link = t.join(format!("link {ctx}"));
            std::os::unix::fs::symlink(&d, &link).unwrap();
            let run = launch(mfu_tests::Tool::new("tar"))
                .arg("-xf")
                .arg(d.join(name))
                .arg("-C")
                .arg(&link)
                .run();
            check(
                &format!("{ctx} symlink"),
                &run,
                name,
                "the archive being read",
                &d,
            );
            assert_eq!(std::fs::read(d.join(name)).unwrap(), before, "{ctx}");
            // A member named as a hard link to the archive.
            let h = t.join(format!("h {ctx}"));
            std::fs::create_dir(&h).unwrap();
            make(&h.join("b.tar"), &["x", "hard", "y z"], gz);
            std::fs::hard_link(h.join("b.tar"), h.join("hard")).unwrap();
            let before = std::fs::read(h.join("b.tar")).unwrap();
            let run = launch(mfu_tests::Tool::new("tar"))
                .arg("-xf")
                .arg("b.tar")
                .current_dir(&h)
                .run();
            check(
                &format!("{ctx} hard link"),
                &run,
                "hard",
                "the archive being read",
                &h,
            );
            assert_eq!(std::fs::read(h.join("b.tar")).unwrap(), before, "{ctx}");
            if gz {
                continue;
            }
            // A member named as the side index --save-index keeps.
            let s = t.join(format!("s {ctx}"));
            std::fs::create_dir(&s).unwrap();
            make(&t.join("c.tar"), &["x", "c.tar.dtaridx", "y z"], false);
            std::fs::rename(t.join("c.tar"), s.join("c.tar")).unwrap();
            let run = launch(mfu_tests::Tool::new("tar"))
                .args(["-x", "--save-index", "-f", "c.tar"])
                .current_dir(&s)
                .run();
            let what = "the index of the archive being read";
            check(&format!("{ctx} index"), &run, "c.tar.dtaridx", what, &s);
            let index = std::fs::read(s.join("c.tar.dtaridx")).unwrap();
            assert_ne!(index, "c.tar.dtaridx".repeat(5000).as_bytes(), "{ctx}");
        }
    }
}
