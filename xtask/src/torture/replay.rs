//! Findings and how to replay them: every finding names its class, its seed and a one-line
//! command that runs that very iteration again.

use std::fmt::Write as _;

/// The classes of scenario (and of check) the harness knows; `--skip CLASS` leaves one out.
pub const CLASSES: &[(&str, &str)] = &[
    ("copy", "cp/sync with random options (sync sometimes within --memory-limit 2k/8k/64k: lists spilled, paired by a merge join), nothing in the way: exact result, counts, manifest, idempotence"),
    ("kill", "cp/sync killed (-9, SIGTERM, after N journal marks), then rerun: converges"),
    ("rewritten-source", "killed copy, source rewritten in place with its mtime kept, rerun (cp, sync, sync -c)"),
    ("changed-while-read", "a writer rewrites a file while cp/sync/tar -c read it"),
    ("swap", "an entry of SRC or DEST swapped for a symlink/hard link/directory before a rerun"),
    ("tar", "tar -c (compression, exclusion; killed or stopped, then continued to the bytes of an uninterrupted run) and tar -x (strip, member; a third within --memory-limit 2k/8k/64k: a piece of entries at a time, directories' metadata spilled) against GNU tar's extraction"),
    ("tar-superseded", "an archive with an entry appended again (tar -r) after a hard link to it"),
    ("truncated-archive", "an mfu-rs archive cut short, then extracted"),
    ("rm", "rm of a subtree (named, or its v4 list removed a piece at a time under a tiny --memory-limit)"),
    ("chmod", "chmod of a subtree"),
    ("plain-list", "rm -i / chmod -i of a plain list (find -print), whole or cut, with NAME|F traps"),
    ("full-fs", "cp/sync into a small full tmpfs"),
    ("bz2-kill", "bz2 -z and -d killed (-9 or SIGTERM, at a random time), then rerun (continues from its checkpoint): byte-identical to an uninterrupted run"),
    ("pfa", "pfa pack (killed -9 or SIGTERM at a random time, or not), then unpack at random rank counts (sometimes after an unpack killed -9 or SIGTERM, then again with --overwrite: no temporary left): the tree packed, or no aggregate; a second version (killed or not; a cut one recovered) keeps version 1 exact and adds the changed tree"),
    ("tar-x-kill", "tar -x of a random tree's archive (plain, --zstd, -z, or one gzip stream) killed (-9 or SIGTERM, at a random time, np 1 / --ranks N / mpirun -np 2), entries it had finished sometimes removed or edited (size and mtime kept), and rerun at random rank counts until done: the tree of an uninterrupted extraction, no file with the archive's mtime and wrong bytes after any kill, no checkpoint or temporary left"),
];

/// Classes of check that cut across scenarios (a finding of one of these is reported under it,
/// whatever the scenario); `--skip` takes them too.
pub const CHECKS: &[(&str, &str)] = &[
    ("journal-name", "user files named like a sibling's journal (`.NAME.mfu-partial`): the tree makes none when skipped"),
    ("hardlinks", "hard-link groups of the result differ from the source's"),
    ("counts", "a report's counts differ from the oracle's"),
    ("manifest-resume", "the manifest of a rerun after an interruption (every file copied is in it)"),
    ("link-dest", "sync --link-dest (in the option space of copy, kill, swap); skipped: never drawn"),
];

/// One thing the oracle found wrong.
#[derive(Debug, Clone)]
pub struct Finding {
    pub class: &'static str,
    pub what: String,
}

/// The report of a failed iteration: its seed, the file system, what was run, what was found,
/// and the replay command.
pub fn report(
    seed: u64,
    fs: &str,
    (skip, only): (&[String], &[String]),
    log: &[String],
    found: &[Finding],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\ntorture: FAILED iteration seed={seed} fs={fs}");
    for l in log {
        let _ = writeln!(s, "  ran: {l}");
    }
    for f in found {
        let _ = writeln!(s, "  FINDING [{}] {}", f.class, f.what);
    }
    let _ = writeln!(s, "  replay: {}", replay_line(seed, fs, skip, only));
    s
}

/// The one-line replay command of an iteration: the class filters too, since the scenario an
/// iteration draws depends on the classes left to draw from.
pub fn replay_line(seed: u64, fs: &str, skip: &[String], only: &[String]) -> String {
    let mut s = format!("cargo xtask torture --fs {fs} --seed {seed} --iterations 1 --keep");
    for k in skip {
        s.push_str(&format!(" --skip {k}"));
    }
    for k in only {
        s.push_str(&format!(" --only {k}"));
    }
    s
}
