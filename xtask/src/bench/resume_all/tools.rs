//! The tools of `resume-all`: each one's command line on its generated input, what its result
//! is and how two results are compared.

use super::super::fsutil::{remove, same_tree};
use super::super::gen::{write_layout, Fill, Group};
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a tool reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// A tree `input/tree` of hex-text files of mixed sizes, with duplicates.
    Tree,
    /// The tree and a copy of it with a few files changed, `input/tree2` (cmp).
    TwoTrees,
    /// `input/a.tar`, mfu-rs's archive of the tree (made untimed).
    Archive,
    /// One file, `input/in.dat`, of hex text.
    File,
    /// Nothing (filemaker makes its output).
    Nothing,
    /// A tree `input/tree` of many empty files, 5,000 per unit of scale in 20 directories
    /// (walk: its work is entries, not bytes).
    Names,
    /// The tree, with a copy of each file of its `mid` and `big` groups under
    /// `input/tree/copies` (dup: its work is hashing the files whose sizes and first bytes
    /// agree; in the tree alone they are 289 MiB, a 0.2 s run whose kill points fall within
    /// a few of the checkpoint's shortest intervals).
    Duplicates,
}

impl Input {
    /// The largest scale calibration grows this input to: what tmpfs holds beside the
    /// outputs and the uninterrupted run's result kept for comparison (a tree is about 14 MiB
    /// per unit: 2.2 GiB at 160, three trees' worth at once for cp or tar -x). At one cap of
    /// 96 for all, walk -o, tar -c and filemaker ran for 0.5-0.7 s, not the 2-4 s aimed at:
    /// the start of a process was a tenth of the run, and in one run on disk the kill at 75%
    /// of walk -o's 0.68 s fell in the write of its list, after the walk.
    pub fn max_scale(self) -> u64 {
        match self {
            Input::Names => 512,
            Input::Nothing => 384,
            Input::File => 96,
            Input::Tree | Input::TwoTrees | Input::Archive | Input::Duplicates => 160,
        }
    }
}

/// What a tool's result is, and so how a resumed result is compared with the uninterrupted
/// run's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A tree at this path under the work directory: same entries, types and bytes (and with
    /// `meta`, mode, owner and mtime).
    Tree(&'static str, bool),
    /// A file at this path under the work directory: byte-identical (`cmp`).
    File(&'static str),
    /// A list file at this path: its `mfu-rs walk -i LIST --print` lines, sorted, equal.
    List(&'static str),
    /// The last run's stdout, lines sorted, equal (reports: cmp, dup, grep); lines marked
    /// `(not judged)` left out (cmp's atime and ctime counts move as runs read the trees).
    Stdout,
    /// The set of lines of this file under the work directory, which every command appends
    /// to, of all runs together, equals the uninterrupted run's (find --exec: a command whose
    /// completion was not recorded may run again, as with `parallel --joblog`).
    LinesIn(&'static str),
}

/// A tool measured.
pub struct Tool {
    /// Its name in the table (and `--tools`): `cp`, `tar-c`...
    pub name: &'static str,
    /// The subcommand (for `--help`: whether it has `--no-checkpoint`).
    pub sub: &'static str,
    /// What it reads.
    pub input: Input,
    /// Its result.
    pub output: Output,
    /// Its arguments (after the binary) for the work directory `w` and the input's scale.
    pub args: fn(&Path, u64) -> Vec<String>,
    /// Input scale of one calibration unit (see [`make_input`]), before calibration.
    pub base_scale: u64,
    /// What an uninterrupted run at np 1 should take after calibration (s).
    pub aim_secs: f64,
}

fn p(w: &Path, rel: &str) -> String {
    w.join(rel).to_str().expect("UTF-8 bench path").to_string()
}

fn v(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// find --exec's arguments: each command appends its line to a file, since stdout under
/// mpirun would pass through mpirun, which stops forwarding it when it gets the signal.
fn find_exec_args(w: &Path, _: u64) -> Vec<String> {
    let (tree, log) = (p(w, "input/tree"), p(w, "out/exec.log"));
    let sh = "cksum \"$1\" >> \"$0\"";
    v(&[
        "find", "-q", &tree, "--type", "f", "--exec", "sh", "-c", sh, &log, "{}", ";",
    ])
}

/// The table of tools: cp and sync (resumable by rerun) and the tools of issue 33.
// A table, one entry of a dozen lines per tool; the 150-line limit is for logic.
#[allow(clippy::too_many_lines)]
pub fn all() -> Vec<Tool> {
    vec![
        Tool {
            name: "cp",
            sub: "cp",
            input: Input::Tree,
            output: Output::Tree("out/tree", true),
            args: |w, _| {
                let mut a = v(&["cp", "-q", "-p"]);
                a.extend([p(w, "input/tree"), p(w, "out/")]);
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "sync",
            sub: "sync",
            input: Input::Tree,
            output: Output::Tree("out/tree", true),
            args: |w, _| {
                let mut a = v(&["sync", "-q"]);
                a.extend([p(w, "input/tree"), p(w, "out/tree")]);
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "walk-o",
            sub: "walk",
            input: Input::Names,
            output: Output::List("out/list.mfu"),
            args: |w, _| {
                let mut a = v(&["walk", "-q", "-o"]);
                a.extend([p(w, "out/list.mfu"), p(w, "input/tree")]);
                a
            },
            base_scale: 8,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "tar-c",
            sub: "tar",
            input: Input::Tree,
            output: Output::File("out/a.tar"),
            args: |w, _| {
                let mut a = v(&["tar", "-c", "-q", "-f"]);
                a.extend([p(w, "out/a.tar"), "-C".into(), p(w, "input"), "tree".into()]);
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "tar-x",
            sub: "tar",
            input: Input::Archive,
            // Directories' times and modes are tar's business: contents and types compared.
            output: Output::Tree("out/tree", false),
            args: |w, _| {
                let mut a = v(&["tar", "-x", "-q", "-f"]);
                a.extend([p(w, "input/a.tar"), "-C".into(), p(w, "out")]);
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "cmp",
            sub: "cmp",
            input: Input::TwoTrees,
            output: Output::Stdout,
            args: |w, _| {
                let mut a = v(&["cmp"]);
                a.extend([p(w, "input/tree"), p(w, "input/tree2")]);
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "dup",
            sub: "dup",
            input: Input::Duplicates,
            output: Output::Stdout,
            args: |w, _| {
                let mut a = v(&["dup", "-q"]);
                a.push(p(w, "input/tree"));
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "bz2",
            sub: "bz2",
            input: Input::File,
            output: Output::File("input/in.dat.bz2"),
            args: |w, _| {
                let mut a = v(&["bz2", "-q", "-k"]);
                a.push(p(w, "input/in.dat"));
                a
            },
            base_scale: 1,
            // A kill -9 loses the wave in flight: per rank, a stream of about 10 MB of
            // input per thread, read but not yet written. An input of many waves, as the
            // files bz2 is for are: on a 3 s input (60 MB) one wave was a fifth of the work.
            aim_secs: 10.0,
        },
        Tool {
            name: "grep",
            sub: "grep",
            input: Input::Tree,
            output: Output::Stdout,
            args: |w, _| {
                // Five hex digits: about one match per MiB of random hex text, a report to
                // compare (eight found none: grep exits 1 then, and under mpirun a rank's exit
                // status 1 makes the launcher's teardown last seconds).
                let mut a = v(&["grep", "-r", "-n", "-F", "0badc"]);
                a.push(p(w, "input/tree"));
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "find-exec",
            sub: "find",
            input: Input::Tree,
            output: Output::LinesIn("out/exec.log"),
            args: find_exec_args,
            base_scale: 1,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "bcast",
            sub: "bcast",
            input: Input::File,
            output: Output::File("out/copy.dat"),
            args: |w, _| {
                let mut a = v(&["bcast", "-q"]);
                a.extend([p(w, "input/in.dat"), p(w, "out/copy.dat")]);
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
        Tool {
            name: "filemaker",
            sub: "filemaker",
            input: Input::Nothing,
            // Its times are the run's own: contents and types compared.
            output: Output::Tree("out/made", false),
            // Many small files: 1,920 of 64 KB-1 MB took 0.1 s on tmpfs at the largest scale,
            // too short a run for its kill points to mean anything.
            args: |w, scale| {
                let n = (1000 * scale).to_string();
                let mut a = v(&["filemaker", "-q", "-i", "7", "-d", "1-1", "-s", "1KB-16KB"]);
                a.extend(["-n".into(), format!("{n}-{n}"), p(w, "out/made")]);
                a
            },
            base_scale: 4,
            aim_secs: super::AIM_SECS,
        },
    ]
}

/// The names [`reset`] keeps in `input/`: the inputs themselves; anything else there (a
/// compressed output beside its input, a checkpoint) is a run's.
const INPUT_NAMES: &[&str] = &["tree", "tree2", "a.tar", "in.dat"];

/// Remove what runs left in the work directory `w` (its `out/`, and whatever is beside the
/// inputs), so that the next run starts from nothing.
pub fn reset(w: &Path) -> Result<()> {
    let out = w.join("out");
    remove(&out)?;
    std::fs::create_dir_all(&out).with_context(|| format!("mkdir {}", out.display()))?;
    let input = w.join("input");
    if let Ok(rd) = std::fs::read_dir(&input) {
        for e in rd {
            let e = e?;
            if !INPUT_NAMES.iter().any(|n| e.file_name() == *n) {
                remove(&e.path())?;
            }
        }
    }
    Ok(())
}

/// The tree of scale `scale`: per unit, 200 files of 8 KiB, 20 of 256 KiB and 2 of 4 MiB
/// (about 14 MiB) of hex text, and a directory `dups` with copies of 10 of them.
fn layout(scale: u64) -> Vec<Group> {
    let s = scale as usize;
    vec![
        Group {
            kind: "small",
            dirs: 2 * s,
            files: 100,
            bytes: 8 << 10,
        },
        Group {
            kind: "mid",
            dirs: s,
            files: 20,
            bytes: 256 << 10,
        },
        Group {
            kind: "big",
            dirs: 1,
            files: 2 * s,
            bytes: 4 << 20,
        },
    ]
}

/// Make `tool`'s input at `scale` in `w/input` (made anew: a scale changed since).
pub fn make_input(bin: &str, tool: &Tool, w: &Path, scale: u64) -> Result<()> {
    let input = w.join("input");
    remove(&input)?;
    std::fs::create_dir_all(&input)?;
    let tree = input.join("tree");
    match tool.input {
        Input::Nothing => {}
        Input::Names => {
            let g = [Group {
                kind: "names",
                dirs: 20 * scale as usize,
                files: 250,
                bytes: 0,
            }];
            write_layout(&tree, &g, 0x4A + scale, Fill::Hex)?;
        }
        Input::File => {
            let g = [Group {
                kind: "f",
                dirs: 1,
                files: 1,
                bytes: scale * (16 << 20),
            }];
            write_layout(&input.join("gen"), &g, 0xB2 + scale, Fill::Hex)?;
            std::fs::rename(input.join("gen/f/d00/f000.dat"), input.join("in.dat"))?;
            remove(&input.join("gen"))?;
        }
        Input::Tree | Input::TwoTrees | Input::Archive | Input::Duplicates => {
            write_layout(&tree, &layout(scale), 0xA11 + scale, Fill::Hex)?;
            let dups = tree.join("dups");
            std::fs::create_dir_all(&dups)?;
            for f in 0..10 {
                let from = tree.join(format!("mid/d00/f{f:03}.dat"));
                std::fs::copy(&from, dups.join(format!("copy{f}.dat")))
                    .with_context(|| format!("copy {}", from.display()))?;
            }
        }
    }
    if tool.input == Input::Duplicates {
        let copies = tree.join("copies");
        std::fs::create_dir_all(&copies)?;
        for group in ["mid", "big"] {
            let ok = Command::new("cp")
                .arg("-r")
                .arg(tree.join(group))
                .arg(&copies)
                .status()?
                .success();
            ensure!(ok, "cp -r the {group} files for dup");
        }
    }
    if tool.input == Input::TwoTrees {
        let ok = Command::new("cp")
            .arg("-a")
            .arg(&tree)
            .arg(input.join("tree2"))
            .status()?
            .success();
        ensure!(ok, "cp -a the tree for cmp");
        // A few files differ (one byte, so sizes agree and contents must be read).
        for (i, f) in ["mid/d00/f003.dat", "small/d01/f050.dat", "big/d00/f001.dat"]
            .iter()
            .enumerate()
        {
            let path = input.join("tree2").join(f);
            let mut bytes = std::fs::read(&path).with_context(|| format!("read {f}"))?;
            let at = bytes.len() / (i + 2);
            bytes[at] ^= 1;
            std::fs::write(&path, bytes)?;
        }
    }
    if tool.input == Input::Archive {
        let ok = Command::new(bin)
            .args(["tar", "-c", "-q", "-f"])
            .arg(input.join("a.tar"))
            .arg("-C")
            .arg(&input)
            .arg("tree")
            .status()?
            .success();
        ensure!(ok, "mfu-rs tar -c the input archive of tar -x");
        remove(&tree)?;
    }
    Ok(())
}

/// A result kept for comparison: a path moved aside, or a text.
pub enum Kept {
    /// The result's path, moved under `w/ref-NAME`.
    Path(PathBuf),
    /// A report's lines, sorted.
    Lines(Vec<String>),
}

/// Sorted lines of `text`.
pub fn sorted_lines(text: &[u8]) -> Vec<String> {
    let mut l: Vec<String> = String::from_utf8_lossy(text)
        .lines()
        .map(str::to_string)
        .collect();
    l.sort();
    l
}

/// A report's lines that say something of the result, sorted.
fn report_lines(text: &[u8]) -> Vec<String> {
    let mut l = sorted_lines(text);
    l.retain(|l| !l.contains("(not judged)"));
    l
}

/// Whether a run that a signal reached had printed its whole report, `stdout`, equal to the
/// uninterrupted run's, `base`: its work was done (under `mpirun` the signal came in the
/// launcher's teardown, which a rank's exit status of 1, cmp's "differences found", makes last
/// seconds), and the user has its result. Only for tools whose result is their report.
pub fn whole_report(tool: &Tool, stdout: &[u8], base: &[u8]) -> bool {
    tool.output == Output::Stdout && !base.is_empty() && report_lines(stdout) == report_lines(base)
}

/// The sorted, deduplicated lines of several stdouts.
pub fn line_set<'a>(outs: impl IntoIterator<Item = &'a [u8]>) -> Vec<String> {
    let mut l: Vec<String> = outs.into_iter().flat_map(sorted_lines).collect();
    l.sort();
    l.dedup();
    l
}

/// The sorted, deduplicated lines of the file `path`.
fn lines_in(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    Ok(line_set([text.as_slice()]))
}

/// `mfu-rs walk -i LIST --print`, sorted.
fn list_lines(bin: &str, list: &Path) -> Result<Vec<String>> {
    let out = Command::new(bin)
        .args(["walk", "-q", "-i"])
        .arg(list)
        .arg("--print")
        .output()
        .context("start walk --print")?;
    ensure!(
        out.status.success(),
        "walk -i {} --print failed",
        list.display()
    );
    Ok(sorted_lines(&out.stdout))
}

/// Keep the result of the uninterrupted run in `w` (its stdouts `outs`) as `name`.
pub fn keep(bin: &str, tool: &Tool, w: &Path, outs: &[&[u8]], name: &str) -> Result<Kept> {
    let aside = w.join(format!("ref-{name}"));
    remove(&aside)?;
    std::fs::create_dir_all(&aside)?;
    Ok(match tool.output {
        Output::Tree(rel, _) | Output::File(rel) => {
            let to = aside.join("result");
            std::fs::rename(w.join(rel), &to)
                .with_context(|| format!("move {} aside", w.join(rel).display()))?;
            Kept::Path(to)
        }
        Output::List(rel) => Kept::Lines(list_lines(bin, &w.join(rel))?),
        Output::Stdout => Kept::Lines(report_lines(outs.last().copied().unwrap_or_default())),
        Output::LinesIn(rel) => Kept::Lines(lines_in(&w.join(rel))?),
    })
}

/// Whether the result in `w` (stdouts of the runs `outs`) equals the kept one; `Err` says
/// how it differs.
pub fn equal(bin: &str, tool: &Tool, w: &Path, outs: &[&[u8]], kept: &Kept) -> Result<()> {
    match (tool.output, kept) {
        (Output::Tree(rel, meta), Kept::Path(r)) => same_tree(r, &w.join(rel), meta),
        (Output::File(rel), Kept::Path(r)) => {
            let out = Command::new("cmp")
                .arg(r)
                .arg(w.join(rel))
                .output()
                .context("start cmp")?;
            // cmp names the first differing byte: where it lies tells what differs.
            let what = String::from_utf8_lossy(&out.stdout);
            let what = what.split_once("differ: ").map_or("", |(_, at)| at.trim());
            ensure!(
                out.status.success(),
                "{rel} differs from the uninterrupted run's {what}{}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            Ok(())
        }
        (Output::List(rel), Kept::Lines(want)) => {
            let got = list_lines(bin, &w.join(rel))?;
            ensure!(&got == want, "the list's entries differ");
            Ok(())
        }
        (Output::Stdout, Kept::Lines(want)) => {
            let got = report_lines(outs.last().copied().unwrap_or_default());
            if let Some(g) = got.iter().find(|l| !want.contains(l)) {
                bail!("the report differs: {g:?}");
            }
            ensure!(&got == want, "the report differs");
            Ok(())
        }
        (Output::LinesIn(rel), Kept::Lines(want)) => {
            let got = lines_in(&w.join(rel))?;
            if &got != want {
                let missing = want.iter().filter(|l| !got.contains(l)).count();
                let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).collect();
                bail!(
                    "the commands' output lines differ: {missing} of {} missing, {} extra{}",
                    want.len(),
                    extra.len(),
                    extra
                        .first()
                        .map_or(String::new(), |l| format!(" (first: {l:?})"))
                );
            }
            Ok(())
        }
        _ => unreachable!("keep and equal agree on the kind"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_its_own_name_and_writes_beneath_its_work_directory() {
        let tools = all();
        let mut names: Vec<_> = tools.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), tools.len());
        let w = Path::new("/w");
        for t in &tools {
            let args = (t.args)(w, 1);
            assert!(args[0] == t.sub, "{}: {args:?}", t.name);
            assert!(args.iter().any(|a| a.starts_with("/w/")), "{}", t.name);
        }
    }

    /// A report printed whole before the signal (mpirun's teardown) finishes a report tool's
    /// run; a cut or other report does not, nor does any output of a tool whose result is a
    /// file or a tree.
    #[test]
    fn only_a_whole_report_equal_to_the_uninterrupted_one_counts_as_done() {
        let tools = all();
        let cmp = tools.iter().find(|t| t.name == "cmp").expect("cmp");
        let tar = tools.iter().find(|t| t.name == "tar-c").expect("tar-c");
        let base = b"same 3\ndiffer 1 (not judged)\nonly 0\n";
        assert!(whole_report(
            cmp,
            b"only 0\nsame 3\ndiffer 2 (not judged)\n",
            base
        ));
        assert!(!whole_report(cmp, b"same 3\n", base));
        assert!(!whole_report(cmp, b"", base));
        assert!(!whole_report(cmp, b"", b""));
        assert!(!whole_report(tar, base, base));
    }

    #[test]
    fn reports_compare_sorted_and_joblogs_as_sets() {
        assert_eq!(sorted_lines(b"b\na\n"), ["a", "b"]);
        let runs: [&[u8]; 2] = [b"x 1\ny 2\n", b"y 2\nz 3\n"];
        assert_eq!(line_set(runs), ["x 1", "y 2", "z 3"]);
    }
}
