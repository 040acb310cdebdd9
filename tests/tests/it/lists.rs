//! Lists that lie: every list reader (cache v3 and v4, typed `path|T` text, plain text, NUL)
//! fed each truncation of a small list and seeded mutations, and the tools that act on lists
//! fed cut lists and lists naming what is not there.
//!
//! The invariant: reading never panics or hangs, every rank gets the same outcome, and a
//! truncated list never yields a path that was not listed (it is refused, or it yields listed
//! paths only). Seeded runs print their seed on failure; `MFU_LIST_FUZZ_SEED` replays one.

use flist::io::{self, Format};
use flist::{Detail, FileList, FileType, Meta};
use mfu_tests::{bin, expect_status, mfu, mpirun, shell};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One rank's outcome of a read: its paths, or the error text.
type Outcome = Result<Vec<Vec<u8>>, String>;

/// Read the list `file` at `ranks` local ranks; check every rank got the same kind of outcome
/// (and the same error); return the paths of all ranks in order, or the error.
fn read_at(file: &Path, ranks: usize) -> Outcome {
    let name = file.as_os_str().as_bytes().to_vec();
    let parts: Vec<Outcome> = steal::local::run(ranks, |comm| {
        io::read(comm, &name)
            .map(|l| l.iter().map(|e| e.path.to_vec()).collect())
            .map_err(|e| e.to_string())
    });
    let errors: Vec<&String> = parts.iter().filter_map(|p| p.as_ref().err()).collect();
    if let Some(first) = errors.first() {
        assert_eq!(
            errors.len(),
            ranks,
            "some ranks failed, others not: {parts:?}"
        );
        assert!(
            errors.iter().all(|e| e == first),
            "ranks disagree: {errors:?}"
        );
        return Err((*first).clone());
    }
    Ok(parts.into_iter().flat_map(|p| p.unwrap()).collect())
}

/// Abort the whole test binary when a case hangs (a reader that loops would otherwise hold CI
/// until its time runs out). Dropping the guard disarms it.
struct Watchdog(Arc<AtomicBool>);

impl Watchdog {
    fn arm(what: String, limit: Duration) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while start.elapsed() < limit {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            eprintln!("list fuzzing hung: {what}");
            std::process::abort();
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The listed tree: files with odd names (a `|`, a non-UTF-8 byte, a name that is a prefix of
/// another) under `root`, which the lists name by absolute path. Returns (path, type) pairs.
fn listed_tree(root: &Path) -> Vec<(Vec<u8>, FileType)> {
    let r = root.as_os_str().as_bytes();
    let rel: [(&[u8], FileType); 6] = [
        (b"d", FileType::Dir),
        (b"d/report.txt.bak", FileType::File),
        (b"d/al|pha", FileType::File),
        (b"d/b\xffeta", FileType::File),
        (b"d/sub", FileType::Dir),
        (b"d/sub/gamma", FileType::File),
    ];
    rel.iter()
        .map(|(p, kind)| {
            let path = [r, b"/", p].concat();
            let os = Path::new(std::ffi::OsStr::from_bytes(&path));
            match kind {
                FileType::Dir => fs::create_dir_all(os).unwrap(),
                _ => fs::write(os, b"data").unwrap(),
            }
            (path, *kind)
        })
        .collect()
}

/// The bytes of a v3 list (mpiFileUtils ≤ 0.8, big-endian, no tables) of `entries`.
fn v3_bytes(entries: &[(Vec<u8>, FileType)]) -> Vec<u8> {
    let fc = entries
        .iter()
        .map(|(p, _)| p.len() as u64 + 1)
        .max()
        .unwrap()
        .div_ceil(8)
        * 8;
    let mut out = Vec::new();
    for v in [3, 1, 2, 0, 0, 0, 0, entries.len() as u64, fc] {
        out.extend_from_slice(&u64::to_be_bytes(v));
    }
    for (p, kind) in entries {
        out.extend_from_slice(p);
        out.resize(out.len() + fc as usize - p.len(), 0);
        let mode: u64 = if *kind == FileType::Dir {
            0o40755
        } else {
            0o100644
        };
        for v in [mode, 0, 0, 1, 0, 2, 0, 3, 0, 4] {
            out.extend_from_slice(&u64::to_be_bytes(v));
        }
    }
    out
}

/// A list written by mfu-rs itself (`format`) of `entries`.
fn written(dir: &Path, entries: &[(Vec<u8>, FileType)], format: Format) -> Vec<u8> {
    let detail = match format {
        Format::V4 => Detail::Stat,
        Format::Text => Detail::Lite,
    };
    let mut list = FileList::new(detail);
    for (p, kind) in entries {
        let meta = (detail == Detail::Stat).then(|| Meta {
            mode: if *kind == FileType::Dir {
                0o40755
            } else {
                0o100644
            },
            size: 4,
            mtime: 1_700_000_000,
            ..Meta::default()
        });
        list.push(p, *kind, meta);
    }
    let file = dir.join("written.list");
    let name = file.as_os_str().as_bytes().to_vec();
    steal::local::run(1, |comm| io::write(comm, &list, &name, format).unwrap());
    fs::read(&file).unwrap()
}

/// The lists of every format, of the same entries: (format name, bytes).
fn lists_of_every_format(
    dir: &Path,
    entries: &[(Vec<u8>, FileType)],
) -> Vec<(&'static str, Vec<u8>)> {
    let joined = |sep: u8| {
        let mut out = Vec::new();
        for (p, _) in entries {
            out.extend_from_slice(p);
            out.push(sep);
        }
        out
    };
    vec![
        ("v4", written(dir, entries, Format::V4)),
        ("v3", v3_bytes(entries)),
        ("typed text", written(dir, entries, Format::Text)),
        ("plain text", joined(b'\n')),
        ("NUL", joined(0)),
    ]
}

#[test]
fn every_truncation_of_every_format_is_refused_or_yields_only_listed_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let entries = listed_tree(&tmp.path().join("t"));
    let listed: BTreeSet<Vec<u8>> = entries.iter().map(|(p, _)| p.clone()).collect();
    let file = tmp.path().join("cut.list");
    for (format, bytes) in lists_of_every_format(tmp.path(), &entries) {
        // The whole list reads back as listed.
        fs::write(&file, &bytes).unwrap();
        let whole = read_at(&file, 2).unwrap_or_else(|e| panic!("{format}: {e}"));
        assert_eq!(
            whole.iter().cloned().collect::<BTreeSet<_>>(),
            listed,
            "{format}"
        );
        let mut refused = 0;
        for cut in 0..bytes.len() {
            fs::write(&file, &bytes[..cut]).unwrap();
            for ranks in [1, 2] {
                let what = format!(
                    "{format} list cut at byte {cut} of {}, {ranks} ranks",
                    bytes.len()
                );
                let _guard = Watchdog::arm(what.clone(), Duration::from_secs(30));
                match read_at(&file, ranks) {
                    Ok(paths) => {
                        for p in &paths {
                            assert!(
                                listed.contains(p),
                                "{what}: yields {:?}, which was never listed",
                                String::from_utf8_lossy(p)
                            );
                        }
                    }
                    Err(e) => {
                        assert!(e.contains(&*file.to_string_lossy()), "{what}: {e}");
                        refused += 1;
                    }
                }
            }
        }
        // Cache lists carry their length: every cut but the empty file is refused.
        if format.starts_with('v') {
            assert_eq!(refused, 2 * (bytes.len() - 1), "{format}");
        }
    }
}

/// xorshift64: the mutation stream of one seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Apply 1–4 random edits to `bytes`: flip a bit, set a byte to a value a reader cares about
/// (NUL, newline, `|`, a type letter, 0xff), delete or duplicate a range, cut the end.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    const SPECIAL: [u8; 8] = [0, b'\n', b'|', b'F', b'D', 0xff, 3, 4];
    for _ in 0..1 + rng.below(4) {
        if bytes.is_empty() {
            bytes.push(SPECIAL[rng.below(SPECIAL.len())]);
            continue;
        }
        let at = rng.below(bytes.len());
        match rng.below(5) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = SPECIAL[rng.below(SPECIAL.len())],
            2 => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(at..end);
            }
            3 => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                let dup = bytes[at..end].to_vec();
                bytes.splice(at..at, dup);
            }
            _ => bytes.truncate(at),
        }
    }
}

#[test]
fn seeded_mutations_of_every_format_never_panic_hang_or_split_the_ranks() {
    let seed = std::env::var("MFU_LIST_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x1157_f022_u64);
    let tmp = tempfile::tempdir().unwrap();
    let entries = listed_tree(&tmp.path().join("t"));
    let file = tmp.path().join("mutated.list");
    for (format, bytes) in lists_of_every_format(tmp.path(), &entries) {
        let mut rng = Rng(seed | 1);
        for case in 0..300 {
            let mut mutated = bytes.clone();
            mutate(&mut rng, &mut mutated);
            fs::write(&file, &mutated).unwrap();
            let what = format!(
                "{format} list, mutation {case} of seed {seed} (replay: MFU_LIST_FUZZ_SEED={seed})"
            );
            let _guard = Watchdog::arm(what.clone(), Duration::from_secs(30));
            let ranks = 1 + case % 3;
            let outcome = std::panic::catch_unwind(|| read_at(&file, ranks));
            assert!(outcome.is_ok(), "{what}: the reader panicked");
        }
    }
}

/// A typed list of `root`'s two files, its last line cut inside `report.txt.bak` right after
/// `report.txt` (which exists and was never listed).
fn cut_typed_list(root: &Path) -> Vec<u8> {
    fs::create_dir_all(root).unwrap();
    for name in ["a", "report.txt", "report.txt.bak"] {
        fs::write(root.join(name), name).unwrap();
    }
    let r = root.to_string_lossy();
    format!("{r}/a|F\n{r}/report.txt.bak|F\n")
        .into_bytes()
        .into_iter()
        .take(format!("{r}/a|F\n{r}/report.txt").len())
        .collect()
}

#[test]
fn rm_of_a_cut_typed_list_removes_nothing_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    for np in [1, 2] {
        let root = tmp.path().join(format!("np{np}"));
        let list = tmp.path().join(format!("cut{np}.list"));
        fs::write(&list, cut_typed_list(&root)).unwrap();
        let mut cmd = if np == 1 {
            mfu(&[])
        } else {
            mpirun(np, &bin())
        };
        let out = expect_status(cmd.args(["rm", "-i"]).arg(&list), 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("without a final newline"), "np {np}: {err}");
        for name in ["a", "report.txt", "report.txt.bak"] {
            assert!(root.join(name).exists(), "np {np}: {name} was removed");
        }
    }
    // The same list on standard input, read by rank 0 and decided for every rank.
    let root = tmp.path().join("stdin");
    let list = tmp.path().join("cut.list");
    fs::write(&list, cut_typed_list(&root)).unwrap();
    let script = format!(
        "$R rm -i - < '{}'; echo unreachable",
        list.to_string_lossy()
    );
    let out = shell(&script, 2);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("unreachable"));
    for name in ["a", "report.txt", "report.txt.bak"] {
        assert!(root.join(name).exists(), "stdin: {name} was removed");
    }
}

#[test]
fn names_a_list_holds_that_do_not_exist_are_reported_and_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    fs::create_dir(&root).unwrap();
    let r = root.to_string_lossy();
    let missing = format!("{r}/not-here");
    for (tool, typed) in [
        ("rm", true),
        ("rm", false),
        ("chmod", true),
        ("chmod", false),
    ] {
        fs::write(root.join("f"), b"x").unwrap();
        let list = tmp.path().join("l");
        let text = if typed {
            format!("#mfu-rs typed list v1\n{r}/f|F\n{missing}|F\n#mfu-rs end 2\n")
        } else {
            format!("{r}/f\n{missing}\n")
        };
        fs::write(&list, text).unwrap();
        // Typed lists at 2 ranks, plain lists at 1 (keeps the test fast).
        let mut cmd = if typed { mpirun(2, &bin()) } else { mfu(&[]) };
        cmd.arg(tool);
        if tool == "chmod" {
            cmd.args(["-m", "u+x"]);
        }
        let out = expect_status(cmd.arg("-i").arg(&list), 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&missing), "{tool} (typed {typed}): {err}");
        if tool == "rm" {
            assert!(
                !root.join("f").exists(),
                "rm (typed {typed}) kept the listed file"
            );
        }
    }
    // cp -i: the missing name is reported too.
    fs::write(root.join("f"), b"x").unwrap();
    let list = tmp.path().join("l");
    fs::write(&list, format!("{r}/f\n{missing}\n")).unwrap();
    let dest = tmp.path().join("dest");
    let out = expect_status(mfu(&["cp", "-i"]).arg(&list).arg(&root).arg(&dest), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&missing),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A list named by a path that is a stream (the `/dev/fd/63` of `-i <(cmd)`, a FIFO) is read as
/// standard input is, whole, at any number of ranks: it once read as empty (probed, then read
/// at offsets, which a pipe cannot give twice).
#[test]
fn a_list_from_a_pipe_or_fifo_is_read_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::write(&a, b"a").unwrap();
    std::fs::create_dir(&b).unwrap();
    let lines = format!("{}\\n{}\\n", a.display(), b.display());
    for ranks in ["1", "3"] {
        let script = format!("exec \"$0\" --ranks {ranks} walk -i <(printf '{lines}')",);
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .arg(bin())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.starts_with("Read 2 items"), "ranks {ranks}: {text}");
    }
    let fifo = tmp.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let writer = {
        let fifo = fifo.clone();
        let text = format!("{}\n{}\n", a.display(), b.display());
        std::thread::spawn(move || std::fs::write(fifo, text).unwrap())
    };
    let out = mfu(&["--ranks", "2", "walk", "-i"])
        .arg(&fifo)
        .output()
        .unwrap();
    writer.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Read 2 items"), "{text}");
}

/// The mode bits of `p` (not following a symlink).
fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Issue 31 item 4: a list from `find -print` that names files called `x|F` and `y|D` is plain:
/// `rm -i` and `chmod -i` act on `x|F` and `y|D`, never on `x` and `y` (which anyone who can
/// create `NAME|F` beside `NAME` could otherwise have removed). A list is typed only when it
/// says so (its header) or `--input-format typed` does; a typed list read as plain is refused.
#[test]
fn a_plain_list_naming_files_that_end_in_a_type_letter_acts_on_those_files_only() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let setup = |name: &str| {
        let root = tmp.path().join(name);
        fs::create_dir_all(&root).unwrap();
        for f in ["x", "x|F", "y|D"] {
            fs::write(root.join(f), f).unwrap();
            fs::set_permissions(root.join(f), fs::Permissions::from_mode(0o600)).unwrap();
        }
        // `y|D` read as typed names the directory `y`.
        fs::create_dir(root.join("y")).unwrap();
        let list = tmp.path().join(format!("{name}.list"));
        let r = root.to_string_lossy();
        fs::write(&list, format!("{r}/x|F\n{r}/y|D\n")).unwrap();
        (root, list)
    };
    for np in [1, 2] {
        let run = |args: &[&str], list: &Path, code: i32| {
            let mut cmd = if np == 1 {
                mfu(&[])
            } else {
                mpirun(np, &bin())
            };
            expect_status(cmd.args(args).arg("-i").arg(list), code)
        };
        let (root, list) = setup(&format!("chmod{np}"));
        let y = mode_of(&root.join("y"));
        run(&["chmod", "-m", "o+w"], &list, 0);
        assert_eq!(mode_of(&root.join("x|F")), 0o602, "np {np}");
        assert_eq!(mode_of(&root.join("y|D")), 0o602, "np {np}");
        assert_eq!(mode_of(&root.join("x")), 0o600, "np {np}: chmod changed x");
        assert_eq!(mode_of(&root.join("y")), y, "np {np}: chmod changed y");

        let (root, list) = setup(&format!("rm{np}"));
        run(&["rm"], &list, 0);
        assert!(root.join("x").exists(), "np {np}: rm removed x");
        assert!(root.join("y").exists(), "np {np}: rm removed y");
        assert!(!root.join("x|F").exists() && !root.join("y|D").exists());

        // Told it is typed (dwalk -l's headerless lists), the same lines name x and y.
        let (root, list) = setup(&format!("typed{np}"));
        run(&["rm", "--input-format", "typed"], &list, 0);
        assert!(!root.join("x").exists() && !root.join("y").exists());
        assert!(root.join("x|F").exists() && root.join("y|D").exists());

        // mfu-rs' own typed list (header and trailer), read as plain: refused, nothing done.
        let (root, list) = setup(&format!("plain{np}"));
        let r = root.to_string_lossy();
        fs::write(
            &list,
            format!("#mfu-rs typed list v1\n{r}/x|F\n{r}/y|D\n#mfu-rs end 2\n"),
        )
        .unwrap();
        let out = run(&["rm", "--input-format", "plain"], &list, 2);
        assert!(String::from_utf8_lossy(&out.stderr).contains("it is a typed list"));
        for f in ["x", "x|F", "y", "y|D"] {
            assert!(root.join(f).exists(), "np {np}: {f} was removed");
        }
        // Read as it says (auto): x and y.
        run(&["rm"], &list, 0);
        assert!(!root.join("x").exists() && !root.join("y").exists());
        assert!(root.join("x|F").exists() && root.join("y|D").exists());
    }
    // The same through a pipe, under mpirun on both sides: find's own list is typed (header),
    // so rm removes exactly what find matched.
    let (root, _) = setup("pipe");
    shell(
        &format!(
            "$R find '{}' --name '*|*' -o - | $R rm -i -",
            root.to_string_lossy()
        ),
        0,
    );
    assert!(root.join("x").exists() && root.join("y").exists());
    assert!(!root.join("x|F").exists() && !root.join("y|D").exists());
}

/// Issue 31 item 6: a plain list cut before its final newline, whose cut last line names an
/// existing file (`a.txt`, from `a.txt.bak`), is refused (exit 2, nothing removed), from a file
/// at 1 and 2 ranks and from standard input; a single entry without its newline
/// (`printf %s PATH`) is still taken.
#[test]
fn a_cut_plain_list_is_refused_even_when_its_last_line_names_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    fs::create_dir_all(&root).unwrap();
    let names = ["a", "a.txt", "a.txt.bak"];
    for f in names {
        fs::write(root.join(f), f).unwrap();
    }
    let r = root.to_string_lossy();
    let cut = tmp.path().join("cut.list");
    fs::write(&cut, format!("{r}/a\n{r}/a.txt")).unwrap();
    for np in [1, 2] {
        let mut cmd = if np == 1 {
            mfu(&[])
        } else {
            mpirun(np, &bin())
        };
        let out = expect_status(cmd.args(["rm", "-i"]).arg(&cut), 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("without a final newline"), "np {np}: {err}");
    }
    shell(&format!("$R rm -i - < '{}'", cut.to_string_lossy()), 2);
    for f in names {
        assert!(root.join(f).exists(), "{f} was removed");
    }
    shell(&format!("printf %s '{r}/a.txt' | $R rm -i -"), 0);
    assert!(!root.join("a.txt").exists());
    assert!(root.join("a").exists() && root.join("a.txt.bak").exists());
}

/// Issue 31 item 19: a list entry with a `..` component is refused by rm, chmod and cp, named
/// with the reason (it was "Invalid cross-device link" from cp, and rm resolved `a/../b/f` by
/// name and removed `b/f`, and `b/..` as `t`): exit 1, the entry untouched, the others done.
#[test]
fn list_entries_with_a_dot_dot_component_are_refused_and_named() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("t");
    fs::create_dir_all(t.join("a")).unwrap();
    fs::create_dir_all(t.join("b")).unwrap();
    let r = t.to_string_lossy();
    let list = tmp.path().join("l");
    let dotted = [format!("{r}/a/../b/f"), format!("{r}/b/..")];
    fs::write(&list, format!("{}\n{}\n{r}/b/g\n", dotted[0], dotted[1])).unwrap();
    let check = |what: &str, out: &std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr);
        for d in &dotted {
            assert!(
                err.contains(&format!("list entry {d}: it has a `..` component: refused")),
                "{what}: {err}"
            );
        }
        assert!(!err.contains("cross-device"), "{what}: {err}");
    };
    for np in [1, 2] {
        for f in ["b/f", "b/g"] {
            fs::write(t.join(f), f).unwrap();
            fs::set_permissions(t.join(f), fs::Permissions::from_mode(0o600)).unwrap();
        }
        let cmd = || {
            if np == 1 {
                mfu(&[])
            } else {
                mpirun(np, &bin())
            }
        };
        let out = expect_status(cmd().args(["chmod", "-m", "o+w", "-i"]).arg(&list), 1);
        check(&format!("chmod np {np}"), &out);
        assert_eq!(mode_of(&t.join("b/f")), 0o600, "chmod np {np}");
        assert_eq!(mode_of(&t.join("b/g")), 0o602, "chmod np {np}");

        let dest = tmp.path().join(format!("copy{np}"));
        let out = expect_status(cmd().args(["cp", "-i"]).arg(&list).arg(&t).arg(&dest), 1);
        check(&format!("cp np {np}"), &out);
        assert!(!dest.join("b/f").exists(), "cp np {np}");

        let out = expect_status(cmd().args(["rm", "-i"]).arg(&list), 1);
        check(&format!("rm np {np}"), &out);
        assert!(t.join("b/f").exists(), "rm np {np} removed b/f");
        assert!(!t.join("b/g").exists(), "rm np {np} kept b/g");
        assert!(t.join("a").is_dir(), "rm np {np}");
    }
}
