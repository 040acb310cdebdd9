//! `mfu-rs cmp` (dcmp) on the command line: its options and the rendering of its report.

use crate::cli::args::{CheckpointArgs, Common, IoArgs, MemoryArgs};
use crate::cli::console::Console;
use crate::cli::tool::CliTool;
use crate::cmp::{Options, Report};
use crate::engine::compare_expr::Output;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use clap::Args;
use flist::path::display;
use flist::units::human_bytes;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs cmp`, named as in dcmp.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Compare two trees (or files): existence, type, size, owner, group, times, permissions, ACL and contents (dcmp)",
    after_help = "Paths are paired by their path relative to SRC and DEST (the roots themselves \
        form a pair). Fields: EXIST TYPE SIZE UID GID ATIME MTIME CTIME PERM ACL CONTENT; states: \
        COMMON DIFFER, and for EXIST also ONLY_SRC ONLY_DEST (EXIST=DIFFER: on one side only). \
        EXPR is FIELD=STATE conditions joined by '@' (AND, binds tighter) and ',' (OR). CONTENT \
        of regular files of equal size is compared byte by byte, in chunks spread over all ranks \
        (--lite: equal when size and mtime are equal, no data read); symbolic links compare \
        their targets, devices their numbers; SIZE is not compared for directories.\n\n\
        Without -o (and with -o when -b or -v is given) rank 0 prints dcmp's default report, the \
        counts of EXIST=COMMON, EXIST=DIFFER, EXIST=COMMON@TYPE=COMMON, \
        EXIST=COMMON@TYPE=DIFFER, EXIST=COMMON@CONTENT=COMMON and EXIST=COMMON@CONTENT=DIFFER \
        as `Number of items that ...: N (Src: S Dest: D)`, then a table of every field (same / \
        different, over the paths both sides have) and a Result line; -v adds timings. Each -o \
        prints its own `Number of items that ...` line. With `-o EXPR:-` the list goes to \
        stdout and the report to stderr.\n\n\
        Examples:\n  \
        mpirun -np 64 mfu-rs cmp /lustre/project /lustre/backup/project\n  \
        mfu-rs cmp -o EXIST=ONLY_SRC:missing.mfu -o CONTENT=DIFFER:changed.mfu src dst\n  \
        mfu-rs cmp -t -o EXIST=COMMON@TYPE=DIFFER,EXIST=ONLY_SRC:fix.txt src dst\n  \
        mfu-rs cmp --lite src dst                  # sizes and mtimes only, reads no data\n\n\
        Exit status: 0 the trees are equal in every judged field (all but ATIME and CTIME, \
        which are reported but never equal after a copy); 1 they differ, or some items could \
        not be compared (each named on stderr); 2 usage error (missing SRC or DEST, bad EXPR).",
    mut_arg("bufsize", |a| a.help("Bytes per read call, for each of the two files [default: 4MB]")),
    mut_arg("chunksize", |a| a.short('k').help(
        "Bytes per chunk: files are compared in chunks spread over all ranks [default: 4MB, \
         grown up to 1GB for big data sets so that every thread still gets two chunks]"
    )),
)]
pub struct CmpArgs {
    /// The source tree or file (with --manifest: the tree to check).
    #[arg(value_name = "SRC")]
    pub src: OsString,
    /// The destination tree or file to compare with SRC.
    #[arg(value_name = "DEST", required_unless_present = "manifest")]
    pub dest: Option<OsString>,
    /// Check the tree SRC against this checksum manifest (b3sum or sha256sum lines, paths
    /// relative to SRC) instead of comparing two trees: every listed file is hashed, in
    /// parallel; each one that differs or is missing is named (exit 1). Only regular files
    /// reached without following a symlink are read (anything else is a mismatch); a
    /// manifest without one checksum line is exit 1.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dest", "output", "lite"])]
    pub manifest: Option<OsString>,
    /// The manifest's hash [default: found out: both have 64 hex digits, so each file is
    /// hashed both ways and the one that matches more files wins].
    #[arg(
        long = "manifest-hash",
        value_name = "HASH",
        value_enum,
        requires = "manifest"
    )]
    pub manifest_hash: Option<crate::engine::digest::HashKind>,
    /// With --manifest: after the check, rewrite the manifest for the tree as it is now
    /// (changed files get their new digest, files it did not list are added, lines of files
    /// gone are dropped), in its hash and format, sorted by path, atomically; left as it is
    /// when nothing changed. The differences are reported as without it (exit 1); a
    /// manifest that could not be updated is named (exit 1).
    #[arg(long = "update-manifest", requires = "manifest")]
    pub update_manifest: bool,
    /// Write the entries matching EXPR to FILE (repeatable; `-` is stdout): both trees'
    /// entries, as dcmp writes them (a path both have is listed with SRC's and DEST's record).
    /// E.g. `EXIST=ONLY_SRC:missing.mfu`, `EXIST=COMMON@CONTENT=DIFFER:changed.mfu`.
    #[arg(short, long, value_name = "EXPR:FILE", value_parser = Output::value_parser())]
    pub output: Vec<Output>,
    /// Write the -o lists as text (`path|T` lines) instead of the stat list format (v4).
    #[arg(short, long)]
    pub text: bool,
    /// With -o, also print the default report (dcmp's base checks).
    #[arg(short, long)]
    pub base: bool,
    /// `--bufsize`, `--chunksize`, `--noatime`.
    #[command(flatten)]
    pub io: IoArgs,
    /// Read with O_DIRECT (where the file system supports it).
    #[arg(short = 's', long)]
    pub direct: bool,
    /// Judge contents by size and modification time only; read no data.
    #[arg(short, long)]
    pub lite: bool,
    /// `--checkpoint PATH`, `--no-checkpoint`: where the chunks (files, with --manifest)
    /// already compared are recorded, so that a stopped run continues.
    #[command(flatten)]
    pub checkpoint: CheckpointArgs,
    /// `--memory-limit`, `--tmpdir`: beyond the limit the walked lists spill to sorted runs in
    /// TMPDIR and SRC and DEST are paired by a merge join of the two sorted streams; the
    /// contents are then compared in rounds of a bounded number of files. The report and the
    /// -o lists hold the same as below the limit (a list's records in another order); a text
    /// list or a list on stdout is gathered in memory before it is written. The walks spill
    /// as they go, so no tree's list is held whole (unless the checkpoints' directory lies in
    /// a tree). TMPDIR inside SRC or DEST is refused.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs cmp`.
pub struct Cmp;

impl CliTool for Cmp {
    const NAME: &'static str = "cmp";
    const OLD_NAMES: &'static [&'static str] = &["dcmp"];
    const ABOUT: &'static str =
        "Compare two trees, fields and contents, and report what differs (dcmp)";
    type Args = CmpArgs;
    type Options = Options;
    type Report = Report;

    fn common(a: &CmpArgs) -> &Common {
        &a.common
    }
    fn noatime(a: &CmpArgs) -> bool {
        a.io.noatime.noatime
    }
    fn named_files(a: &CmpArgs) -> Vec<(&'static str, &OsStr)> {
        let dest = a.dest.iter().map(|d| ("DEST", d.as_os_str()));
        let manifest = a.manifest.iter().map(|m| ("--manifest", m.as_os_str()));
        [("SRC", a.src.as_os_str())]
            .into_iter()
            .chain(dest)
            .chain(manifest)
            .collect()
    }
    fn output_files(a: &CmpArgs) -> Vec<(&'static str, &[u8])> {
        a.output.iter().map(|o| ("-o", &o.file[..])).collect()
    }
    /// `--manifest-hash` and `--update-manifest` without `--manifest`: clap lets a missing
    /// `requires` pass when the required option conflicts with one given (DEST), and the run
    /// would then compare two trees and update nothing.
    fn check(a: &CmpArgs) -> Result<(), String> {
        if let (Some(dir), Some(dest)) = (a.memory.tmpdir(), &a.dest) {
            crate::cmp::spilled::refuse_tmpdir_inside(&dir, a.src.as_bytes(), dest.as_bytes())
                .map_err(|e| e.replacen("TMPDIR", "--tmpdir", 1))?;
        }
        if a.manifest.is_none() {
            if a.update_manifest {
                return Err("--update-manifest needs --manifest FILE (and no DEST)".into());
            }
            if a.manifest_hash.is_some() {
                return Err("--manifest-hash needs --manifest FILE (and no DEST)".into());
            }
        }
        Ok(())
    }
    fn options(a: &CmpArgs, _rules: Rules, mut context: Context) -> Options {
        // Stdout carries the report: a notice (continuing from a checkpoint) goes to stderr.
        context.events = std::sync::Arc::new(crate::cli::list_args::Routed {
            inner: context.events,
            output_to_stderr: false,
            info_to_stderr: true,
            quiet: a.common.quiet,
        });
        // Names on stderr stay on their line (a newline in a name is written `\n`).
        context.events = std::sync::Arc::new(crate::cmp::OneLineErrors {
            inner: context.events,
        });
        Options {
            src: a.src.as_bytes().to_vec(),
            dest: a
                .dest
                .as_ref()
                .map_or(Vec::new(), |d| d.as_bytes().to_vec()),
            outputs: a.output.clone(),
            text: a.text,
            base: a.base,
            bufsize: a.io.bufsize,
            chunksize: a.io.chunksize,
            direct: a.direct,
            lite: a.lite,
            manifest: a.manifest.as_ref().map(|m| m.as_bytes().to_vec()),
            manifest_hash: a.manifest_hash,
            update_manifest: a.update_manifest,
            checkpoint: a.checkpoint.choice(),
            memory_limit: a.memory.memory_limit,
            tmpdir: a.memory.tmpdir(),
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::cmp::run(comm, options)
    }
    fn render(r: &Report, console: &Console) {
        console.text(&report_text(r));
    }
}

/// dcmp's report: a line per expression (the defaults when `base`), the table of fields, the
/// verdict; with verbose, the timings.
pub fn report_text(r: &Report) -> String {
    if let Some(c) = &r.manifest {
        return crate::cmp::manifest::text(c);
    }
    let mut text = String::new();
    if r.spill_failed {
        // The lists could not be spilled: nothing was compared, no counts to show.
        if let Some(limit) = &r.memory_limit {
            text.push_str(&format!("Memory limit: {limit}\n"));
        }
        text.push_str("Spill failed (named above): nothing compared, no list written\n");
        return text;
    }
    if let Some(d) = &r.detail {
        text.push_str(&format!(
            "Walked {} items in {} and {} in {} in {:.3} s\n",
            d.src_items, r.src, d.dest_items, r.dest, d.walk_seconds
        ));
    }
    let defaults = r.defaults();
    for (e, o) in r.expressions.iter().enumerate() {
        if e < defaults && !r.base {
            continue;
        }
        text.push_str(&r.tally.expr_line(e, o));
        let written = e
            .checked_sub(defaults)
            .is_some_and(|k| r.written.get(k).copied().unwrap_or(false));
        if written {
            text.push_str(&format!(", dumped to \"{}\"", display(&o.file)));
        }
        text.push('\n');
    }
    if r.base {
        text.push_str(&r.tally.table(&r.src, &r.dest));
    }
    if r.lite {
        text.push_str("Contents judged by size and modification time (--lite): no data read\n");
    }
    if let Some((d, secs)) = r
        .detail
        .as_ref()
        .and_then(|d| d.compare_seconds.map(|s| (d, s)))
    {
        let rate = r.bytes_read as f64 / secs.max(1e-9);
        text.push_str(&format!(
            "Compared in {secs:.3} s: read {} ({} bytes, {}/s) in chunks of {} bytes, \
             buffers of {} bytes, {}\n",
            human_bytes(r.bytes_read),
            r.bytes_read,
            human_bytes(rate as u64),
            d.chunk_size,
            d.bufsize,
            crate::engine::wording::ranks(d.ranks)
        ));
    }
    text.push_str(&memory_lines(r.memory_limit.as_deref(), r.spilled.as_ref()));
    text.push_str(&r.tally.verdict());
    if r.detail.is_some() {
        text.push_str(&format!("Total {:.3} s\n", r.seconds));
    }
    text
}

/// `Memory limit: ...` (when shown) and `Spilled: ...` (when the lists spilled): the rows of
/// `cmp`'s and `sync`'s reports.
pub(crate) fn memory_lines(
    limit: Option<&str>,
    spilled: Option<&crate::cmp::spilled::Spilled>,
) -> String {
    let mut text = String::new();
    if let Some(limit) = limit {
        text.push_str(&format!("Memory limit: {limit}\n"));
    }
    if let Some(s) = spilled {
        text.push_str(&format!(
            "Spilled: {} in {} sorted runs to {} (at most {} on one rank; removed)\n",
            human_bytes(s.spill_bytes),
            s.runs,
            s.tmpdir,
            human_bytes(s.spill_bytes_max_rank)
        ));
    }
    text
}
