//! The scenarios of an iteration: a random operation with random options on the random tree,
//! random interference, and the oracle's checks after each step.

use super::interfere::{self, Ending, Swap, Writer};
use super::ops::{arg, into, Invocation, Kill, Launch, Outcome};
use super::oracle::{self, join, show, Cmp, Kind, Snap, Versions};
use super::replay::Finding;
use super::rng::Rng;
use super::tree::{self, Built};
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// An iteration's state: where it works, its generator, what it ran and found.
pub struct Ctx<'a> {
    pub bin: &'a Path,
    /// The iteration's directory (SRC, DEST, sentinel, archives and lists all beneath).
    pub dir: PathBuf,
    pub sentinel: PathBuf,
    pub rng: Rng,
    /// Chunk size given to cp/sync (bytes).
    pub chunk: u64,
    pub skip: &'a [String],
    /// mpirun may be used.
    pub mpi: bool,
    pub log: Vec<String>,
    pub found: Vec<Finding>,
    /// Time limit of one tool run.
    pub limit: Duration,
    /// The tree holds user files named like a sibling's journal (`.NAME.mfu-partial`).
    pub traps: bool,
}

impl Ctx<'_> {
    fn skipped(&self, class: &str) -> bool {
        self.skip.iter().any(|s| s == class)
    }

    /// Record a finding (unless its class is skipped).
    fn find(&mut self, class: &'static str, what: impl Into<String>) {
        let mut what = what.into();
        // With journal-named files in the tree, the copy scenarios' findings were each time
        // consequences of item 1's second half (a second sync not a no-op, a hard-link group
        // split, a hard link of such a file with other bytes): they go to its class. Trees
        // without such files (most of them, and all with --skip journal-name) keep them.
        let class = if self.traps
            && matches!(
                class,
                "copy" | "kill" | "swap" | "hardlinks" | "counts" | "full-fs"
            ) {
            what.push_str(" (the tree has journal-named files)");
            "journal-name"
        } else {
            class
        };
        if !self.skipped(class) {
            self.found.push(Finding { class, what });
        }
    }

    fn finds(&mut self, class: &'static str, context: &str, lines: Vec<String>) {
        let n = lines.len();
        for l in lines.into_iter().take(8) {
            // Findings about a file named like a journal, or about hard-link groups, belong to
            // their own classes (see replay::CHECKS).
            let class = if l.contains(".mfu-partial") {
                "journal-name"
            } else if l.starts_with("hard links differ") {
                "hardlinks"
            } else {
                class
            };
            self.find(class, format!("{context}: {l}"));
        }
        if n > 8 {
            self.find(class, format!("{context}: ... {} more", n - 8));
        }
    }

    fn run(&mut self, inv: &Invocation) -> Outcome {
        let out = inv.run(self.bin, &self.dir, self.limit);
        self.log.push(format!(
            "{}  => exit {}",
            inv.line(),
            out.code.map_or("signal".to_string(), |c| c.to_string())
        ));
        if out.hung {
            self.find(
                "kill",
                format!("hung past {:?} (killed): {}", self.limit, inv.line()),
            );
        }
        out
    }

    fn sentinel_check(&mut self, before: &Snap, step: &str) -> Result<()> {
        let after = oracle::snapshot(&self.sentinel)?;
        let ch = oracle::sentinel_changes(before, &after);
        // Outside every target: whatever the class, this is never allowed.
        let n = ch.len();
        for l in ch.into_iter().take(8) {
            self.found.push(Finding {
                class: "sentinel",
                what: format!("after {step}: sentinel changed: {l}"),
            });
        }
        let _ = n;
        Ok(())
    }

    fn inv(&mut self, tool: &'static str, args: Vec<OsString>, launch: Launch) -> Invocation {
        Invocation {
            tool,
            args,
            launch,
            kill: Kill::None,
            journal_min: self.chunk,
            env: Vec::new(),
        }
    }
}

/// The DEST directories (relative paths) a failed `sync -D --exclude` names as not replaced,
/// when that is all it says went wrong and each is a directory of DEST holding an excluded
/// entry; `None` otherwise.
fn kept_for_excluded(stderr: &[u8], dest: &Path, got: &Snap, o: &CopyOpts) -> Option<Vec<Vec<u8>>> {
    if !(o.sync && o.delete && o.exclude) {
        return None;
    }
    let mut root = dest.as_os_str().as_bytes().to_vec();
    root.push(b'/');
    let mut kept = Vec::new();
    for line in stderr.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix(b"mfu-rs sync: replace directory ".as_slice()) {
            let end = find(rest, b": it still holds entries")?;
            let rel = rest[..end].strip_prefix(root.as_slice())?.to_vec();
            let is_dir = got.get(&rel).is_some_and(|e| e.kind == Kind::Dir);
            let holds = got
                .keys()
                .any(|p| p != &rel && tree::is_at_or_below(p, &rel) && excluded(p));
            if !(is_dir && holds) {
                return None;
            }
            kept.push(rel);
        } else if !(line.starts_with(b"mfu-rs sync: manifest ") || line.starts_with(b"{")) {
            return None;
        }
    }
    (!kept.is_empty()).then_some(kept)
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Excluded by `--exclude '*.tmp'`: a path with a component ending in `.tmp`.
fn excluded(rel: &[u8]) -> bool {
    rel.split(|&c| c == b'/').any(|c| c.ends_with(b".tmp"))
}

fn filtered(s: &Snap, exclude: bool) -> Snap {
    s.iter()
        .filter(|(p, _)| !(exclude && excluded(p)))
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect()
}

/// The random options of a cp or sync.
#[derive(Clone, Debug, Default)]
struct CopyOpts {
    sync: bool,
    preserve: bool,
    contents: bool,
    delete: bool,
    verify: bool,
    exclude: bool,
    manifest: Option<&'static str>,
    manifest_all: bool,
    link_dest: bool,
    chunked: bool,
    sparse: bool,
    /// `--noatime`: the reads go through `O_NOATIME` (root may always use it).
    noatime: bool,
    /// sync `--verify --state FILE` (beside the iteration's trees, kept across its reruns: a
    /// rerun after a kill trusts it only for what did not change).
    state: bool,
    /// sync `--memory-limit` (2k, 8k or 64k: the lists spill to the iteration's directory and
    /// SRC and DEST are paired by a merge join, or, with an option that needs them whole, stay
    /// in memory with a warning).
    memory_limit: Option<&'static str>,
    /// Hard-link groups are checked: not for a sync onto an older DEST (rsync without -H,
    /// and mfu-rs's README, promise no links there).
    loose_links: bool,
    /// DEST may hold entries SRC no longer has: cp (as GNU cp) removes nothing.
    loose_extra: bool,
    /// xattrs are not compared: a cp rerun onto existing files adds the source's xattrs but,
    /// as GNU cp, removes none the copy already has.
    loose_xattrs: bool,
}

impl CopyOpts {
    fn random(rng: &mut Rng, sync: bool) -> Self {
        CopyOpts {
            sync,
            preserve: sync || rng.chance(60),
            contents: sync && rng.chance(35),
            delete: sync && rng.chance(40),
            verify: rng.chance(25),
            exclude: rng.chance(25),
            manifest: if rng.chance(30) {
                Some(*rng.pick(&["sha256", "blake3"]))
            } else {
                None
            },
            manifest_all: sync && rng.chance(50),
            link_dest: sync && rng.chance(15),
            chunked: rng.chance(85),
            sparse: rng.chance(20),
            noatime: rng.chance(30),
            state: sync && rng.chance(50),
            memory_limit: if sync && rng.chance(35) {
                Some(*rng.pick(&["2k", "8k", "64k"]))
            } else {
                None
            },
            loose_links: false,
            loose_xattrs: false,
            loose_extra: false,
        }
    }

    /// The arguments, SRC and DEST included. cp copies SRC into DEST's parent (`PARENT/`, so
    /// that the same cp rerun lands in the same place); sync mirrors SRC onto DEST.
    fn args(&self, c: &Ctx, src: &Path, dest: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        if self.preserve && !self.sync {
            a.push("-p".into());
        }
        if self.contents {
            a.push("-c".into());
        }
        if self.delete {
            a.push("-D".into());
        }
        if self.verify || self.state {
            a.push("--verify".into());
        }
        if self.state {
            a.extend(["--state".into(), arg(&c.dir.join("verified-state"))]);
        }
        if self.noatime {
            a.push("--noatime".into());
        }
        if self.sparse {
            a.push("-S".into());
        }
        if self.exclude {
            a.extend(["--exclude".into(), "*.tmp".into()]);
        }
        if self.chunked {
            a.extend(["--chunksize".into(), c.chunk.to_string().into()]);
        }
        if let Some(h) = self.manifest {
            a.extend([
                "--manifest".into(),
                arg(&c.dir.join("manifest")),
                "--manifest-hash".into(),
                h.into(),
            ]);
            if self.manifest_all && self.sync {
                a.push("--manifest-all".into());
            }
        }
        if self.link_dest {
            a.extend(["--link-dest".into(), arg(&c.dir.join("linkdest"))]);
        }
        if let Some(limit) = self.memory_limit {
            // Beside SRC and DEST, never inside either (that is refused).
            a.extend([
                "--memory-limit".into(),
                limit.into(),
                "--tmpdir".into(),
                arg(&c.dir),
            ]);
        }
        a.push("--json".into());
        a.push(arg(src));
        if self.sync {
            a.push(arg(dest));
        } else {
            a.push(into(dest.parent().expect("DEST has a parent")));
        }
        a
    }

    fn cmp(&self) -> Cmp {
        Cmp {
            mtime: self.preserve,
            mode: self.preserve,
            links: !self.loose_links,
            xattrs: self.preserve && !self.loose_xattrs,
            extra_ok: (self.sync && !self.delete) || self.loose_extra,
        }
    }
}

/// Run one iteration's scenario of class `class`.
pub fn run(c: &mut Ctx, class: &'static str) -> Result<()> {
    tree::sentinel(&mut c.rng, &c.sentinel)?;
    let sent = oracle::snapshot(&c.sentinel)?;
    match class {
        "copy" | "kill" | "rewritten-source" | "swap" | "full-fs" => copy(c, class, &sent)?,
        "changed-while-read" => changed_while_read(c, &sent)?,
        "tar" | "truncated-archive" => tar(c, class, &sent)?,
        "tar-superseded" => tar_superseded(c, &sent)?,
        "rm" | "chmod" | "plain-list" => rm_chmod(c, class, &sent)?,
        "bz2-kill" => bz2_kill(c)?,
        "tar-x-kill" => tar_x_kill(c)?,
        "pfa" => pfa(c, &sent)?,
        other => anyhow::bail!("unknown class {other}"),
    }
    c.sentinel_check(&sent, "the iteration")
}

fn src_tree(c: &mut Ctx, max_chunks: u64) -> Result<(PathBuf, Built)> {
    let src = c.dir.join("src");
    let traps = !c.skipped("journal-name");
    let built = tree::build(&mut c.rng, &src, &c.sentinel, c.chunk, max_chunks, traps)?;
    c.traps = built.files.iter().any(|f| f.ends_with(b".mfu-partial"));
    Ok((src, built))
}

/// DEST before the operation: absent, or (sync) an older partial copy with stale and extra
/// entries.
fn prepare_dest(c: &mut Ctx, src: &Path, dest: &Path, built: &Built) -> Result<()> {
    if !c.rng.chance(50) {
        return Ok(());
    }
    let ok = Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(dest)
        .status()?
        .success();
    anyhow::ensure!(ok, "cp -a {} {}", src.display(), dest.display());
    for (i, f) in built.files.iter().enumerate() {
        let p = join(dest, f);
        match c.rng.below(5) {
            0 => {
                let _ = std::fs::remove_file(&p);
            }
            1 => {
                // Same size, other bytes, another mtime: a quick check sees it.
                if let Ok(m) = std::fs::symlink_metadata(&p) {
                    if m.is_file() && m.len() > 0 {
                        let _ = std::fs::remove_file(&p);
                        std::fs::write(&p, tree::content(&mut c.rng, m.len() as usize))?;
                    }
                }
            }
            _ => {}
        }
        if i % 3 == 0 {
            let (d, _) = tree::split(f);
            let _ = std::fs::write(
                join(dest, &tree::child(d, format!("extra{i}").as_bytes())),
                b"extra",
            );
        }
    }
    Ok(())
}

fn check_exact(
    c: &mut Ctx,
    class: &'static str,
    step: &str,
    src: &Snap,
    dest: &Path,
    o: &CopyOpts,
) -> Result<Snap> {
    let got = oracle::snapshot(dest)?;
    let want = filtered(src, o.exclude);
    let d = oracle::diff(&want, &filtered(&got, o.exclude), o.cmp());
    c.finds(
        class,
        &format!("{step} exit 0 but DEST differs from SRC"),
        d,
    );
    // Journals and temporaries left behind after success. A journal stays when the file it
    // describes is no longer in SRC (a partial copy of a file since removed or swapped away):
    // the copy leaves that DEST file as it is (cp deletes nothing), and its journal rightly
    // still says it is incomplete.
    let journal_of_a_source_file = |p: &[u8]| {
        let (dir, name) = tree::split(p);
        let file = name
            .strip_prefix(b".")
            .and_then(|n| n.strip_suffix(b".mfu-partial"));
        file.is_none_or(|f| src.contains_key(&tree::child(dir, f)))
    };
    let left: Vec<String> = got
        .keys()
        .filter(|p| {
            !src.contains_key(*p)
                && (p.ends_with(b".mfu-partial") && journal_of_a_source_file(p)
                    || !p.ends_with(b".mfu-partial") && p.windows(4).any(|w| w == b".mfu"))
        })
        .map(|p| format!("{} left in DEST", show(p)))
        .collect();
    c.finds(class, &format!("{step} exit 0"), left);
    Ok(got)
}

/// Check a manifest: each line's digest is its SRC file's (the bytes read), and it lists every
/// regular file it must.
fn check_manifest(
    c: &mut Ctx,
    class: &'static str,
    step: &str,
    o: &CopyOpts,
    src: &Snap,
    got: &Snap,
    all: bool,
) -> Result<()> {
    let Some(h) = o.manifest else { return Ok(()) };
    let path = c.dir.join("manifest");
    let Ok(text) = std::fs::read(&path) else {
        c.find(
            class,
            format!("{step} exit 0 with --manifest but no manifest written"),
        );
        return Ok(());
    };
    let mut listed = BTreeSet::new();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let (esc, line) = match line.strip_prefix(b"\\") {
            Some(l) => (true, l),
            None => (false, line),
        };
        let Some(sp) = line.windows(2).position(|w| w == b"  ") else {
            c.find(
                class,
                format!("{step}: unparsable manifest line {}", show(line)),
            );
            continue;
        };
        let (hex, name) = (&line[..sp], &line[sp + 2..]);
        let name = if esc { unescape(name) } else { name.to_vec() };
        // cp's names are relative to the destination given, DEST's parent.
        let name = if o.sync {
            name
        } else {
            name.strip_prefix(b"src/".as_slice())
                .map(<[u8]>::to_vec)
                .unwrap_or(name)
        };
        let Some(Kind::File { .. }) = src.get(&name).map(|e| &e.kind) else {
            c.find(
                class,
                format!(
                    "{step}: manifest lists {} which is no file of SRC",
                    show(&name)
                ),
            );
            continue;
        };
        let bytes = std::fs::read(join(&c.dir.join("src"), &name)).unwrap_or_default();
        let want = match h {
            "sha256" => hex_of(&oracle::hash_bytes(&bytes)),
            _ => blake3::hash(&bytes).to_hex().to_string(),
        };
        if hex != want.as_bytes() {
            c.find(
                class,
                format!(
                    "{step}: manifest's {h} of {} is not that of SRC's bytes",
                    show(&name)
                ),
            );
        }
        listed.insert(name);
    }
    if all {
        let missing: Vec<String> = got
            .iter()
            .filter(|(p, e)| {
                matches!(e.kind, Kind::File { .. })
                    && src.contains_key(*p)
                    && !(o.exclude && excluded(p))
            })
            .filter(|(p, _)| !listed.contains(*p))
            .map(|(p, _)| format!("{} copied but not in the manifest", show(p)))
            .collect();
        c.finds(class, step, missing);
    }
    Ok(())
}

fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut it = s.iter();
    while let Some(&b) = it.next() {
        if b == b'\\' {
            match it.next() {
                Some(b'n') => out.push(b'\n'),
                Some(b'r') => out.push(b'\r'),
                Some(&o) => out.push(o),
                None => out.push(b'\\'),
            }
        } else {
            out.push(b);
        }
    }
    out
}

fn hex_of(h: &[u8]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// cp/sync, with the interference of `class`, then the rerun that must converge.
// A scenario reads as one script of steps and checks; the 150-line limit is for the product.
#[allow(clippy::too_many_lines)]
fn copy(c: &mut Ctx, class: &'static str, sent: &Snap) -> Result<()> {
    let full_fs = class == "full-fs";
    let (src, built) = src_tree(c, if full_fs { 6 } else { 4 })?;
    let sync = c.rng.chance(50);
    let mut o = CopyOpts::random(&mut c.rng, sync);
    if class == "rewritten-source" {
        o.chunked = true;
        o.exclude = false;
        o.preserve = true;
    }
    // A run with --link-dest reports its findings under its own class (skipping it leaves
    // --link-dest out of the option space).
    if c.skipped("link-dest") {
        o.link_dest = false;
    }
    let class = if o.link_dest { "link-dest" } else { class };
    let _full = if full_fs {
        // Bigger than the file system, whatever the tree.
        std::fs::write(src.join("huge"), tree::content(&mut c.rng, 5 << 20))?;
        let mnt = c.dir.join("full");
        match interfere::SmallFs::mount(&mnt, 4 << 20) {
            Some(m) => Some(m),
            None => {
                eprintln!("torture: full-fs: could not mount a small tmpfs (not root?): skipped");
                return Ok(());
            }
        }
    } else {
        None
    };
    let dest = if full_fs {
        c.dir.join("full/src")
    } else {
        c.dir.join("out/src")
    };
    std::fs::create_dir_all(dest.parent().expect("parent"))?;
    if o.sync && !full_fs {
        prepare_dest(c, &src, &dest, &built)?;
        o.loose_links = std::fs::symlink_metadata(&dest).is_ok();
    }
    if o.link_dest {
        let ok = Command::new("cp")
            .arg("-a")
            .arg(&src)
            .arg(c.dir.join("linkdest"))
            .status()?
            .success();
        anyhow::ensure!(ok, "cp -a linkdest");
        if let Some(f) = built.files.first() {
            let _ = std::fs::write(join(&c.dir.join("linkdest"), f), b"changed in link-dest");
        }
    }
    let ld_before = oracle::snapshot(&c.dir.join("linkdest"))?;
    let s0 = oracle::snapshot(&src)?;
    let mut versions = Versions::new();
    oracle::add_versions(&mut versions, &s0);
    let fresh = std::fs::symlink_metadata(&dest).is_err();
    let launch = Launch::random(&mut c.rng, c.mpi);
    let args = o.args(c, &src, &dest);
    let tool = if o.sync { "sync" } else { "cp" };
    let mut first = c.inv(tool, args.clone(), launch);
    let interrupted = matches!(class, "kill" | "rewritten-source" | "swap")
        && (class != "swap" || c.rng.chance(60));
    if interrupted {
        first.kill = if !built.big.is_empty() && (class == "rewritten-source" || c.rng.chance(50)) {
            let most = built.big.len() as u64 * 3;
            Kill::Marks(c.rng.between(1, most.max(1)))
        } else {
            let sig = if c.rng.chance(60) {
                libc::SIGKILL
            } else {
                libc::SIGTERM
            };
            Kill::After(Duration::from_millis(c.rng.between(0, 120)), sig)
        };
    }
    let out = c.run(&first);
    let step = first.line();
    let map = |p: &[u8]| Some(p.to_vec());
    let got = oracle::snapshot(&dest)?;
    c.finds(
        class,
        &format!("after {step}"),
        oracle::forged(&s0, &versions, &got, map),
    );
    let now = oracle::snapshot(&src)?;
    if now.len() != s0.len() || !oracle::diff(&s0, &now, Cmp::EXACT).is_empty() {
        c.find(class, format!("{step} changed SRC"));
    }
    c.sentinel_check(sent, &step)?;
    if o.link_dest {
        let ld = oracle::snapshot(&c.dir.join("linkdest"))?;
        c.finds(
            class,
            &format!("{step} changed --link-dest's tree"),
            oracle::sentinel_changes(&ld_before, &ld),
        );
    }
    if full_fs {
        if out.ok() {
            let got = check_exact(c, class, &step, &s0, &dest, &o)?;
            let _ = got;
        } else if out.code != Some(1) {
            c.find(
                class,
                format!(
                    "{step}: a full file system gave exit {:?}, not 1: {}",
                    out.code,
                    out.tail()
                ),
            );
        }
        return Ok(());
    }
    if !interrupted {
        if !out.ok() {
            c.find(
                class,
                format!(
                    "{step} failed with nothing in the way: exit {:?}: {}",
                    out.code,
                    out.tail()
                ),
            );
            return Ok(());
        }
        let got = check_exact(c, class, &step, &s0, &dest, &o)?;
        check_counts(c, &step, &o, fresh, &s0, &out);
        check_manifest(
            c,
            class,
            &step,
            &o,
            &s0,
            &got,
            !o.sync || fresh || o.manifest_all,
        )?;
    } else if out.ok()
        && !matches!(first.kill, Kill::After(_, libc::SIGTERM))
        && out.count("interrupted") != Some(1)
    {
        // Finished before the kill: it must be complete.
        check_exact(c, class, &step, &s0, &dest, &o)?;
    }
    // Interference between the runs.
    let mut swapped = false;
    if class == "rewritten-source" {
        for b in built.big.clone() {
            interfere::rewrite_keeping_mtime(&mut c.rng, &join(&src, &b))?;
            c.log.push(format!(
                "rewrote SRC/{} in place, its mtime restored",
                show(&b)
            ));
        }
    }
    if class == "swap" {
        swapped = swap_one(c, &src, &dest, &o)?;
    }
    let s1 = oracle::snapshot(&src)?;
    oracle::add_versions(&mut versions, &s1);
    // The rerun: the same command, or (resume) a sync or sync -c.
    let mut ro = o.clone();
    let mut rargs = args;
    if class == "rewritten-source" && c.rng.chance(60) {
        ro = CopyOpts {
            sync: true,
            preserve: true,
            contents: c.rng.chance(50),
            chunked: true,
            loose_links: o.loose_links,
            ..Default::default()
        };
        if c.rng.chance(30) {
            ro.manifest = Some("sha256");
            ro.manifest_all = true;
        }
        rargs = ro.args(c, &src, &dest);
    }
    ro.loose_xattrs = !ro.sync;
    ro.loose_extra = swapped && !ro.sync;
    // A swapped DEST entry leaves its old hard-link group: sync (as rsync without -H) does
    // not promise to join it again.
    ro.loose_links |= swapped;
    let _ = std::fs::remove_file(c.dir.join("manifest"));
    let rl = Launch::random(&mut c.rng, c.mpi);
    let rerun = c.inv(if ro.sync { "sync" } else { "cp" }, rargs, rl);
    let out = c.run(&rerun);
    let step = format!("the rerun {}", rerun.line());
    let got = oracle::snapshot(&dest)?;
    c.finds(
        class,
        &format!("after {step}"),
        oracle::forged(&s1, &versions, &got, map),
    );
    c.sentinel_check(sent, &step)?;
    if !out.ok() {
        // cp does not replace a directory by a file or create through a DEST symlink (as GNU
        // cp), sync without -D replaces no entry of another type: after a swap, refusing is
        // allowed (the sentinel is checked all the same). Otherwise a rerun must converge.
        let refusal = swapped
            && (!ro.sync
                || (!ro.delete && String::from_utf8_lossy(&out.stderr).contains("not replaced")));
        // sync -D leaves a DEST directory that still holds excluded entries (as rsync: "cannot
        // delete non-empty directory"), names it, and syncs everything else.
        if let Some(kept) = kept_for_excluded(&out.stderr, &dest, &got, &ro) {
            let outside = |s: &Snap| -> Snap {
                filtered(s, ro.exclude)
                    .into_iter()
                    .filter(|(p, _)| !kept.iter().any(|k| tree::is_at_or_below(p, k)))
                    .collect()
            };
            let d = oracle::diff(&outside(&s1), &outside(&got), ro.cmp());
            c.finds(
                class,
                &format!("{step}: a directory holding excluded entries was kept, but elsewhere DEST differs from SRC"),
                d,
            );
            return Ok(());
        }
        // sync --verify --state reads a file the quick check skips when its identity moved
        // since the state (a rewrite in place that restored the mtime moves the ctime): a
        // content that differs is named, exit 1, and the DEST copy loses the source's mtime,
        // where rsync's quick check keeps the old version silently. Never a mix; the same
        // command run again converges.
        let caught = ro.state
            && String::from_utf8_lossy(&out.stderr).contains("content differs from the source's");
        if class == "rewritten-source" && caught && !refusal {
            let mixed = oracle::mixed(&versions, &filtered(&got, ro.exclude));
            c.finds(class, &format!("{step}: verify named a rewrite"), mixed);
            let again = c.run(&rerun);
            let step = format!("{step}, run again");
            if !again.ok() {
                c.find(
                    class,
                    format!(
                        "{step} did not converge: exit {:?}: {}",
                        again.code,
                        again.tail()
                    ),
                );
                return Ok(());
            }
            check_exact(c, class, &step, &s1, &dest, &ro)?;
            return Ok(());
        }
        if !refusal {
            c.find(
                class,
                format!(
                    "{step} did not converge: exit {:?}: {}",
                    out.code,
                    out.tail()
                ),
            );
        }
        return Ok(());
    }
    // A plain sync after a rewrite that kept the mtime may keep a whole older version (as
    // rsync's quick check does), never a mix.
    if class == "rewritten-source" && ro.sync && !ro.contents {
        let mixed = oracle::mixed(&versions, &filtered(&got, ro.exclude));
        c.finds(class, &format!("{step} exit 0"), mixed);
        return Ok(());
    }
    let got = check_exact(c, class, &step, &s1, &dest, &ro)?;
    // Item 7 (resumed files left out of the manifest) has its own class.
    let mclass = if interrupted {
        "manifest-resume"
    } else {
        class
    };
    check_manifest(
        c,
        mclass,
        &step,
        &ro,
        &s1,
        &got,
        ro.manifest_all || !ro.sync,
    )?;
    // Idempotent: one more sync changes nothing.
    if ro.sync && class == "copy" {
        let again = c.inv("sync", ro.args(c, &src, &dest), Launch::Ranks(2));
        let out = c.run(&again);
        if !out.ok() || out.count("bytes") != Some(0) {
            c.find(
                class,
                format!(
                    "a second identical sync was not a no-op: exit {:?}, bytes {:?}",
                    out.code,
                    out.count("bytes")
                ),
            );
        }
    }
    Ok(())
}

/// Swap an entry of SRC (or, when DEST exists, of DEST) for a symlink, hard link or directory.
fn swap_one(c: &mut Ctx, src: &Path, dest: &Path, o: &CopyOpts) -> Result<bool> {
    let in_dest = std::fs::symlink_metadata(dest).is_ok() && c.rng.chance(50);
    let root = if in_dest { dest } else { src };
    let snap = oracle::snapshot(root)?;
    let cands: Vec<&Vec<u8>> = snap
        .iter()
        .filter(|(p, e)| {
            !p.ends_with(b".mfu-partial")
                && (matches!(e.kind, Kind::File { .. }) || (!in_dest && e.kind == Kind::Dir))
        })
        .map(|(p, _)| p)
        .collect();
    if cands.is_empty() {
        return Ok(false);
    }
    let p = c.rng.pick(&cands).to_vec();
    let how = if in_dest {
        // cp may write through a DEST hard link as GNU cp does; sync never.
        if o.sync && c.rng.chance(50) {
            Swap::HardLink
        } else {
            Swap::Symlink
        }
    } else {
        *c.rng.pick(&[Swap::Symlink, Swap::HardLink, Swap::Dir])
    };
    interfere::swap(&join(root, &p), how, &c.sentinel)?;
    c.log.push(format!(
        "swapped {}/{} for {how:?}",
        if in_dest { "DEST" } else { "SRC" },
        show(&p)
    ));
    Ok(true)
}

fn check_counts(c: &mut Ctx, step: &str, o: &CopyOpts, fresh: bool, src: &Snap, out: &Outcome) {
    if o.sync || !fresh {
        return;
    }
    let s = filtered(src, o.exclude);
    let mut inodes = BTreeSet::new();
    let (mut regular, mut dirs, mut links) = (0u64, 1u64, 0u64);
    for e in s.values() {
        match e.kind {
            Kind::File { .. } => {
                regular += 1;
                inodes.insert(e.ino);
            }
            Kind::Dir => dirs += 1,
            Kind::Link(_) => links += 1,
            Kind::Other => {}
        }
    }
    let files = inodes.len() as u64;
    for (k, want) in [
        ("files", files),
        ("dirs", dirs),
        ("symlinks", links),
        ("hardlinks", regular - files),
    ] {
        if out.count(k) != Some(want) {
            c.find(
                "counts",
                format!(
                    "{step}: report says {k}={:?}, the oracle counts {want}",
                    out.count(k)
                ),
            );
        }
    }
}

/// A writer rewrites a big file while cp, sync or tar -c reads it.
fn changed_while_read(c: &mut Ctx, sent: &Snap) -> Result<()> {
    let (src, _) = src_tree(c, 2)?;
    let hot = b"hot file".to_vec();
    let size = c.rng.between(4, 24) << 20;
    std::fs::write(join(&src, &hot), tree::content(&mut c.rng, size as usize))?;
    if c.rng.chance(50) {
        std::fs::hard_link(join(&src, &hot), src.join("hot link"))?;
    }
    let s0 = oracle::snapshot(&src)?;
    let mut versions = Versions::new();
    oracle::add_versions(&mut versions, &s0);
    let which = c.rng.below(3);
    let launch = Launch::random(&mut c.rng, c.mpi);
    let ending = match c.rng.below(3) {
        0 => Ending::Now,
        1 => Ending::KeepMtime,
        _ => Ending::Untouched,
    };
    let pause = c.rng.between(0, 3);
    let delay = c.rng.between(0, 5);
    let mut o = CopyOpts::random(&mut c.rng, which == 1);
    o.exclude = false;
    o.link_dest = false;
    o.delete = false;
    let (inv, out_root) = match which {
        0 | 1 => {
            let dest = c.dir.join("out/src");
            std::fs::create_dir_all(c.dir.join("out"))?;
            (
                c.inv(
                    if which == 1 { "sync" } else { "cp" },
                    o.args(c, &src, &dest),
                    launch,
                ),
                dest,
            )
        }
        _ => {
            let a = vec![
                "-c".into(),
                "-f".into(),
                arg(&c.dir.join("a.tar")),
                "--json".into(),
                "-C".into(),
                arg(&c.dir),
                "src".into(),
            ];
            (c.inv("tar", a, launch), c.dir.join("gx/src"))
        }
    };
    let new: Vec<Vec<u8>> = (0..2)
        .map(|_| tree::content(&mut c.rng, size as usize))
        .collect();
    let w = Writer::start(new, join(&src, &hot), pause, ending);
    std::thread::sleep(Duration::from_millis(delay));
    let out = c.run(&inv);
    let written = w.finish();
    c.log.push(format!(
        "a writer rewrote SRC/hot file {} times (each ended: {ending:?})",
        written.len()
    ));
    let ino = s0[&hot].ino;
    for (p, e) in &s0 {
        if e.ino == ino {
            versions
                .entry(p.clone())
                .or_default()
                .extend(written.iter().copied());
        }
    }
    let s1 = oracle::snapshot(&src)?;
    c.sentinel_check(sent, &inv.line())?;
    if which == 2 && out.ok() {
        std::fs::create_dir_all(c.dir.join("gx"))?;
        let ok = gnu_extract(&c.dir.join("a.tar"), &c.dir.join("gx"), &[])?;
        if !ok {
            c.find(
                "changed-while-read",
                format!(
                    "{} exit 0 but GNU tar can't extract the archive",
                    inv.line()
                ),
            );
            return Ok(());
        }
    }
    let got = oracle::snapshot(&out_root)?;
    let step = inv.line();
    c.finds(
        "changed-while-read",
        &format!("after {step}"),
        oracle::forged(&s1, &versions, &got, |p| Some(p.to_vec())),
    );
    if out.ok() {
        c.finds(
            "changed-while-read",
            &format!("{step} exit 0"),
            oracle::mixed(&versions, &got),
        );
    }
    Ok(())
}

/// Decompress `archive` (by the flag that made it) into `plain` with the system's tools.
fn decompress(archive: &Path, comp: &str, plain: &Path) -> Result<bool> {
    let prog = match comp {
        "--gzip" => "gzip",
        "--zstd" => "zstd",
        "--bzip2" => "bzip2",
        _ => {
            std::fs::copy(archive, plain)?;
            return Ok(true);
        }
    };
    let out = std::fs::File::create(plain)?;
    Ok(Command::new(prog)
        .arg("-dc")
        .arg(archive)
        .stdout(out)
        .stderr(std::process::Stdio::null())
        .status()
        .with_context(|| format!("start {prog}"))?
        .success())
}

fn gnu_extract(plain: &Path, into: &Path, extra: &[OsString]) -> Result<bool> {
    std::fs::create_dir_all(into)?;
    Ok(Command::new("tar")
        .arg("-xf")
        .arg(plain)
        .arg("-C")
        .arg(into)
        .args(extra)
        .stderr(std::process::Stdio::null())
        .status()?
        .success())
}

/// Offsets (after 0) where a frame of the compressed archive starts, by its magic: gzip
/// members, zstd frames (and skippable frames: the seek table), bzip2 streams.
fn frame_starts(data: &[u8], comp: &str) -> Vec<usize> {
    let magics: &[&[u8]] = match comp {
        "--gzip" => &[b"\x1f\x8b\x08"],
        "--zstd" => &[
            b"\x28\xb5\x2f\xfd",
            b"\x5e\x2a\x4d\x18",
            b"\x50\x2a\x4d\x18",
        ],
        _ => &[b"BZh"],
    };
    (1..data.len())
        .filter(|&i| magics.iter().any(|m| data[i..].starts_with(m)))
        .collect()
}

/// Seconds only (tar keeps whole seconds in a ustar header); without mfu-rs's index member
/// (`ARCHIVE.dtaridx`, the last member by design, which GNU tar extracts as a file).
fn secs(s: &Snap) -> Snap {
    s.iter()
        .filter(|(p, _)| !p.ends_with(b".dtaridx") || p.contains(&b'/'))
        .map(|(p, e)| {
            let mut e = e.clone();
            e.mtime.1 = 0;
            e.xattrs.clear();
            (p.clone(), e)
        })
        .collect()
}

fn tar_cmp(mode: bool) -> Cmp {
    Cmp {
        mtime: true,
        mode,
        links: true,
        xattrs: false,
        extra_ok: false,
    }
}

/// After a `tar -c` interrupted (kill -9 or SIGTERM) and run again to its end (`step`, `out`):
/// the checkpoint is gone, and the archive is byte for byte the one an uninterrupted run
/// without a checkpoint makes of the same sources (at a rank count of its own).
fn tar_continued(
    c: &mut Ctx,
    class: &'static str,
    (step, out): (&str, &Outcome),
    (archive, checkpoint): (&Path, &Path),
    args: &[OsString],
) -> Result<()> {
    if !out.ok() {
        return Ok(());
    }
    if std::fs::symlink_metadata(checkpoint).is_ok() {
        c.find(
            class,
            format!("{step}: the checkpoint stayed after the run completed"),
        );
    }
    let name = archive.file_name().expect("a name");
    let at = c.dir.join("uninterrupted");
    std::fs::create_dir_all(&at)?;
    let reference = at.join(name);
    let mut a: Vec<OsString> = vec!["--no-checkpoint".into()];
    let mut args = args.iter();
    while let Some(x) = args.next() {
        a.push(x.clone());
        if x == "-f" {
            args.next();
            a.push(arg(&reference));
        }
    }
    let launch = Launch::random(&mut c.rng, c.mpi);
    let mut whole = c.inv("tar", a, launch);
    whole.env = vec![("SOURCE_DATE_EPOCH", "1234567890".into())];
    let w = c.run(&whole);
    if !w.ok() {
        c.find(
            class,
            format!("{}: failed: exit {:?}: {}", whole.line(), w.code, w.tail()),
        );
        return Ok(());
    }
    let (got, want) = (std::fs::read(archive)?, std::fs::read(&reference)?);
    if got != want {
        let first = got.iter().zip(&want).position(|(x, y)| x != y);
        c.find(
            class,
            format!(
                "{step}: continued after an interruption, the archive ({} bytes) is not an \
                 uninterrupted run's ({} bytes; first difference at byte {first:?})",
                got.len(),
                want.len()
            ),
        );
    }
    std::fs::remove_dir_all(&at)?;
    Ok(())
}

/// tar -c with random options, checked by GNU tar's extraction; then tar -x with random
/// options against GNU tar's extraction of the same archive (or of it cut short).
// A scenario reads as one script of steps and checks; the 150-line limit is for the product.
#[allow(clippy::too_many_lines)]
fn tar(c: &mut Ctx, class: &'static str, sent: &Snap) -> Result<()> {
    let (src, _) = src_tree(c, 4)?;
    let s0 = oracle::snapshot(&src)?;
    let comp = *c.rng.pick(&["", "", "--gzip", "--zstd", "--bzip2"]);
    let exclude = class == "tar" && c.rng.chance(25);
    let name = match comp {
        "--gzip" => "a.tar.gz",
        "--zstd" => "a.tar.zst",
        "--bzip2" => "a.tar.bz2",
        _ => "a.tar",
    };
    let archive = c.dir.join(name);
    let mut a: Vec<OsString> = vec!["-c".into(), "-f".into(), arg(&archive)];
    if !comp.is_empty() {
        a.push(comp.into());
    }
    if exclude {
        a.extend(["--exclude".into(), "*.tmp".into()]);
    }
    a.extend(["--json".into(), "-C".into(), arg(&c.dir), "src".into()]);
    let launch = Launch::random(&mut c.rng, c.mpi);
    let mut create = c.inv("tar", a.clone(), launch);
    // The index member's time, fixed: an archive continued after an interruption must be
    // byte for byte an uninterrupted run's.
    create.env = vec![("SOURCE_DATE_EPOCH", "1234567890".into())];
    let checkpoint = c.dir.join(format!(".{name}.mfu-checkpoint"));
    let mut interrupted = false;
    if class == "tar" && c.rng.chance(20) {
        interrupted = true;
        // Interrupted: an archive at its name must then be whole (temp name + rename); the
        // same command then continues from the checkpoint ([`tar_continued`]).
        let sig = if c.rng.chance(60) {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        let epoch = create.env.clone();
        if c.rng.chance(50) {
            create.kill = Kill::After(Duration::from_millis(c.rng.between(0, 60)), sig);
        } else {
            // At a known point of the writing: SIGKILL once the N-th mark is durable, or a
            // stop (as SIGTERM) after the N-th mark (the checkpoint core's test knobs).
            let knob = if sig == libc::SIGKILL {
                "MFU_RS_TEST_CHECKPOINT_DIE_AFTER"
            } else {
                "MFU_RS_TEST_CHECKPOINT_STOP_AFTER"
            };
            create.env.push((knob, c.rng.between(1, 3).to_string()));
        }
        let killed = c.run(&create);
        let step = create.line();
        create.kill = Kill::None;
        create.env = epoch;
        if std::fs::symlink_metadata(&archive).is_ok() && !killed.ok() {
            let plain = c.dir.join("killed.tar");
            let gk = c.dir.join("gk");
            let whole = decompress(&archive, comp, &plain)? && gnu_extract(&plain, &gk, &[])?;
            let d = if whole {
                let want = filtered(&secs(&s0), exclude);
                let got = filtered(&secs(&oracle::snapshot(&gk.join("src"))?), exclude);
                oracle::diff(&want, &got, tar_cmp(true))
            } else {
                vec!["not readable by the system's tools".to_string()]
            };
            c.finds(
                class,
                &format!("{step}: interrupted, it left an archive at its name that is not whole"),
                d,
            );
        }
        let _ = std::fs::remove_file(&archive);
    }
    let out = c.run(&create);
    let step = create.line();
    c.sentinel_check(sent, &step)?;
    if !oracle::diff(&s0, &oracle::snapshot(&src)?, Cmp::EXACT).is_empty() {
        c.find(class, format!("{step} changed SRC"));
    }
    if !out.ok() {
        c.find(
            class,
            format!("{step} failed: exit {:?}: {}", out.code, out.tail()),
        );
        return Ok(());
    }
    if interrupted {
        tar_continued(c, class, (&step, &out), (&archive, &checkpoint), &a)?;
    }
    let plain = c.dir.join("plain.tar");
    if !decompress(&archive, comp, &plain)? {
        c.find(
            class,
            format!("{step}: the system's decompressor refuses the archive"),
        );
        return Ok(());
    }
    let gx = c.dir.join("gx");
    if !gnu_extract(&plain, &gx, &[])? {
        c.find(class, format!("{step}: GNU tar refuses the archive"));
        return Ok(());
    }
    let want = filtered(&secs(&s0), exclude);
    let got = filtered(&secs(&oracle::snapshot(&gx.join("src"))?), exclude);
    c.finds(
        class,
        &format!("{step}: GNU tar's extraction differs from SRC"),
        oracle::diff(&want, &got, tar_cmp(true)),
    );
    let entries = Command::new("tar")
        .arg("-tf")
        .arg(&plain)
        .stderr(std::process::Stdio::null())
        .output()?
        .stdout;
    let n = entries
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && !l.ends_with(b".dtaridx"))
        .count() as u64;
    let named_newline = s0.keys().filter(|p| p.contains(&b'\n')).count() as u64;
    if named_newline == 0 && out.count("entries") != Some(n) {
        c.find(
            "counts",
            format!(
                "{step}: report says entries={:?}, GNU tar lists {n}",
                out.count("entries")
            ),
        );
    }
    // The archive to extract: whole, or cut short.
    let mut to_read = archive.clone();
    let mut cut = false;
    if class == "truncated-archive" {
        let len = std::fs::metadata(&archive)?.len();
        let data = std::fs::read(&archive)?;
        let at = if comp.is_empty() && c.rng.chance(60) {
            // At an entry boundary (GNU tar's block numbers).
            let o = Command::new("tar")
                .arg("-tR")
                .arg("-f")
                .arg(&plain)
                .stderr(std::process::Stdio::null())
                .output()?
                .stdout;
            let blocks: Vec<u64> = String::from_utf8_lossy(&o)
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("block ")?
                        .split(':')
                        .next()?
                        .trim()
                        .parse()
                        .ok()
                })
                .filter(|&b| b > 0)
                .collect();
            if blocks.is_empty() {
                len / 2
            } else {
                *c.rng.pick(&blocks) * 512
            }
        } else if !comp.is_empty() && c.rng.chance(60) {
            // At a frame (member, stream) boundary: where a frame's magic starts.
            let starts = frame_starts(&data, comp);
            if starts.is_empty() {
                len / 2
            } else {
                *c.rng.pick(&starts) as u64
            }
        } else {
            c.rng.between(1, len.saturating_sub(1).max(1))
        };
        to_read = c.dir.join(format!("cut-{name}"));
        std::fs::write(&to_read, &data[..at as usize])?;
        c.log
            .push(format!("cut the archive to {at} of {len} bytes"));
        cut = true;
    }
    let mut sel: Vec<OsString> = Vec::new();
    let strip = if class == "tar" && c.rng.chance(30) {
        c.rng.between(1, 2)
    } else {
        0
    };
    if strip > 0 {
        sel.extend(["--strip-components".into(), strip.to_string().into()]);
    }
    if class == "tar" && c.rng.chance(30) {
        let names: Vec<&Vec<u8>> = s0.keys().collect();
        if !names.is_empty() {
            let pick = c.rng.pick(&names).to_vec();
            let m = tree::child(b"src", &pick);
            sel.push(std::ffi::OsStr::from_bytes(&m).to_owned());
        }
    }
    let preserve = c.rng.chance(50);
    let mx = c.dir.join("mx");
    std::fs::create_dir_all(&mx)?;
    let mut x: Vec<OsString> = vec!["-x".into(), "-f".into(), arg(&to_read)];
    if preserve {
        x.push("-p".into());
    }
    if class == "tar" && c.rng.chance(33) {
        // A piece of entries at a time, the directories' metadata spilled beside the trees
        // (never inside the target: that is refused).
        let limit = *c.rng.pick(&["2k", "8k", "64k"]);
        x.extend([
            "--memory-limit".into(),
            limit.into(),
            "--tmpdir".into(),
            arg(&c.dir),
        ]);
    }
    x.extend(["--json".into(), "-C".into(), arg(&mx)]);
    x.extend(sel.iter().cloned());
    let launch = Launch::random(&mut c.rng, c.mpi);
    let mut extract = c.inv("tar", x, launch);
    if class == "tar" && c.rng.chance(25) {
        // Interrupted first; the same extraction again must converge.
        let sig = if c.rng.chance(60) {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        extract.kill = Kill::After(Duration::from_millis(c.rng.between(0, 60)), sig);
        c.run(&extract);
        extract.kill = Kill::None;
    }
    let xo = c.run(&extract);
    let step = extract.line();
    c.sentinel_check(sent, &step)?;
    let gsel = c.dir.join("gsel");
    // GNU tar's extraction of the same (whole) archive with the same selection.
    let gnu_ok = gnu_extract(&plain, &gsel, &sel)?;
    let want = secs(&oracle::snapshot(&gsel)?);
    let got = secs(&oracle::snapshot(&mx)?);
    let mut versions = Versions::new();
    oracle::add_versions(&mut versions, &want);
    c.finds(
        class,
        &format!("after {step}"),
        oracle::forged(&want, &versions, &got, |p| Some(p.to_vec())),
    );
    if xo.ok() && cut {
        // mfu-rs knows where its own archives end (end member, seek table, index, zero
        // blocks): one cut short is never a success, even where what it held came out whole.
        c.find(class, format!("{step} exit 0 on its own archive cut short"));
    }
    if xo.ok() {
        if !gnu_ok && !cut {
            c.find(
                class,
                format!("{step} exit 0 where GNU tar fails with the same selection"),
            );
        }
        c.finds(
            class,
            &format!(
                "{step} exit 0 but the extraction differs from GNU tar's{}",
                if cut { " of the whole archive" } else { "" }
            ),
            oracle::diff(&want, &got, tar_cmp(preserve)),
        );
    } else if !cut && gnu_ok {
        c.find(
            class,
            format!(
                "{step} failed where GNU tar extracts: exit {:?}: {}",
                xo.code,
                xo.tail()
            ),
        );
    }
    Ok(())
}

/// An archive (GNU tar) holding a file, a hard link to it, then a newer version of the file
/// (`tar -r`): mfu-rs must extract what GNU tar extracts.
fn tar_superseded(c: &mut Ctx, sent: &Snap) -> Result<()> {
    let (src, built) = src_tree(c, 2)?;
    let f = built.files.last().expect("at least one file").clone();
    let (d, _) = tree::split(&f);
    let l = tree::child(d, b"link to it|F");
    std::fs::hard_link(join(&src, &f), join(&src, &l))?;
    let plain = c.dir.join("a.tar");
    let gnu = |args: &[&std::ffi::OsStr]| -> Result<()> {
        let ok = Command::new("tar")
            .args(args)
            .stderr(std::process::Stdio::null())
            .status()?
            .success();
        anyhow::ensure!(ok, "GNU tar {args:?} failed");
        Ok(())
    };
    let (fm, lm) = (tree::child(b"src", &f), tree::child(b"src", &l));
    let (fm, lm) = (
        std::ffi::OsStr::from_bytes(&fm),
        std::ffi::OsStr::from_bytes(&lm),
    );
    // The file first, then its hard link (stored as a link to it); sometimes the whole tree
    // after them (the file again, the link again to that copy).
    gnu(&[
        "-cf".as_ref(),
        plain.as_os_str(),
        "-C".as_ref(),
        c.dir.as_os_str(),
        fm,
        lm,
    ])?;
    if c.rng.chance(50) {
        gnu(&[
            "-rf".as_ref(),
            plain.as_os_str(),
            "-C".as_ref(),
            c.dir.as_os_str(),
            "src".as_ref(),
        ])?;
    }
    // The newer version: new bytes (after unlinking, so the link keeps the old ones), or a
    // symlink.
    let fp = join(&src, &f);
    std::fs::remove_file(&fp)?;
    if c.rng.chance(30) {
        std::os::unix::fs::symlink("elsewhere", &fp)?;
    } else {
        let n = c.rng.between(0, 300_000) as usize;
        std::fs::write(&fp, tree::content(&mut c.rng, n))?;
    }
    gnu(&[
        "-rf".as_ref(),
        plain.as_os_str(),
        "-C".as_ref(),
        c.dir.as_os_str(),
        fm,
    ])?;
    c.log.push(format!(
        "GNU tar: src (with {} hard-linked as {}), then -r of a newer {}",
        show(&f),
        show(&l),
        show(&f)
    ));
    let mut sel: Vec<OsString> = Vec::new();
    if c.rng.chance(40) {
        sel.extend(["--strip-components".into(), "1".into()]);
    }
    let mx = c.dir.join("mx");
    std::fs::create_dir_all(&mx)?;
    let mut x: Vec<OsString> = vec![
        "-x".into(),
        "-f".into(),
        arg(&plain),
        "--json".into(),
        "-C".into(),
        arg(&mx),
    ];
    x.extend(sel.iter().cloned());
    let launch = Launch::random(&mut c.rng, c.mpi);
    let extract = c.inv("tar", x, launch);
    let xo = c.run(&extract);
    let step = extract.line();
    c.sentinel_check(sent, &step)?;
    let gx = c.dir.join("gx");
    gnu_extract(&plain, &gx, &sel)?;
    let want = secs(&oracle::snapshot(&gx)?);
    let got = secs(&oracle::snapshot(&mx)?);
    if xo.ok() {
        c.finds(
            "tar-superseded",
            &format!("{step} exit 0 but differs from GNU tar's extraction"),
            oracle::diff(&want, &got, tar_cmp(false)),
        );
    } else {
        c.find(
            "tar-superseded",
            format!(
                "{step} failed where GNU tar extracts: exit {:?}: {}",
                xo.code,
                xo.tail()
            ),
        );
    }
    Ok(())
}

/// rm / chmod of a subtree, or of a plain list (maybe cut before its final newline).
fn rm_chmod(c: &mut Ctx, class: &'static str, sent: &Snap) -> Result<()> {
    let t = c.dir.join("t");
    let traps = !c.skipped("journal-name");
    let built = tree::build(&mut c.rng, &t, &c.sentinel, 4096, 2, traps)?;
    let mut before = oracle::snapshot(&t)?;
    let tool = if class == "chmod" || (class == "plain-list" && c.rng.chance(40)) {
        "chmod"
    } else {
        "rm"
    };
    let mode = *c.rng.pick(&[0o700u32, 0o640, 0o755, 0o600]);
    let mut a: Vec<OsString> = Vec::new();
    if tool == "chmod" {
        a.extend(["-m".into(), format!("{mode:o}").into()]);
    }
    a.push("--json".into());
    // The entries the operation may touch (relative), and those it must.
    let scope: BTreeSet<Vec<u8>>;
    let must: BTreeSet<Vec<u8>>;
    let mut cut = false;
    if class == "plain-list" {
        let cands: Vec<&Vec<u8>> = built.files.iter().filter(|f| !f.contains(&b'\n')).collect();
        let is_trap = |f: &[u8]| f.ends_with(b"|F") || f.ends_with(b"|D") || f.ends_with(b"|L");
        // Half the time only the traps (`NAME|F` listed without `NAME`), as one who plants them
        // would list them; else a random subset and most of the traps.
        let only_traps = c.rng.chance(50) && cands.iter().any(|f| is_trap(f));
        let mut listed: Vec<Vec<u8>> = cands
            .iter()
            .filter(|f| !only_traps && !is_trap(f) && c.rng.chance(40))
            .map(|f| (*f).clone())
            .collect();
        for f in &cands {
            if is_trap(f) && !listed.contains(f) && (only_traps || c.rng.chance(70)) {
                listed.push((*f).clone());
            }
        }
        if listed.is_empty() {
            return Ok(());
        }
        let mut text = Vec::new();
        for f in &listed {
            text.extend_from_slice(join(&t, f).as_os_str().as_bytes());
            text.push(b'\n');
        }
        if listed.len() > 1 && c.rng.chance(30) {
            // Cut before the final newline and a few bytes of the last line, where the cut
            // line names a file that exists (`a.txt` beside the listed `a.txt.bak`): made
            // here if the tree has none.
            let last = listed.last().expect("non-empty").clone();
            let k = c.rng.between(0, 4.min(last.len() as u64 - 1)) as usize;
            let victim = last[..last.len() - k].to_vec();
            if k > 0
                && !victim.ends_with(b"/")
                && std::fs::symlink_metadata(join(&t, &victim)).is_err()
            {
                std::fs::write(join(&t, &victim), b"never listed")?;
                c.log
                    .push(format!("made {} (the cut line's name)", show(&victim)));
            }
            text.truncate(text.len() - k - 1);
            cut = true;
            c.log.push(format!("the list is cut by {} bytes", k + 1));
        }
        std::fs::write(c.dir.join("list"), &text)?;
        before = oracle::snapshot(&t)?;
        a.extend(["-i".into(), arg(&c.dir.join("list"))]);
        scope = listed.iter().cloned().collect();
        must = if cut { BTreeSet::new() } else { scope.clone() };
    } else {
        let mut cands: Vec<Vec<u8>> = built.dirs.clone();
        cands.extend(built.files.iter().cloned());
        let p = c.rng.pick(&cands).clone();
        if tool == "rm" && c.rng.chance(35) {
            let Some(streamed) = rm_list_args(c, class, &join(&t, &p)) else {
                return Ok(());
            };
            a.extend(streamed);
        } else {
            a.push(arg(&join(&t, &p)));
        }
        let mut prefix = p.clone();
        prefix.push(b'/');
        scope = before
            .keys()
            .filter(|k| **k == p || k.starts_with(&prefix))
            .cloned()
            .collect();
        must = scope.clone();
    }
    let launch = Launch::random(&mut c.rng, c.mpi);
    let inv = c.inv(tool, a, launch);
    let out = c.run(&inv);
    let step = inv.line();
    c.sentinel_check(sent, &step)?;
    let after = oracle::snapshot(&t)?;
    // Outside the scope nothing changes (entries and their modes; directories' own mtimes
    // change when an entry goes).
    // A hard link of a changed file changes with it (one inode).
    let inodes: BTreeSet<u64> = if tool == "chmod" {
        before
            .iter()
            .filter(|(p, e)| scope.contains(*p) && matches!(e.kind, Kind::File { .. }))
            .map(|(_, e)| e.ino)
            .collect()
    } else {
        BTreeSet::new()
    };
    let out_of_scope =
        |(p, e): &(&Vec<u8>, &oracle::Entry)| !scope.contains(*p) && !inodes.contains(&e.ino);
    let keep: Snap = before
        .iter()
        .filter(out_of_scope)
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect();
    let got: Snap = after
        .iter()
        .filter(|(p, _)| keep.contains_key(*p) || !before.contains_key(*p))
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect();
    let cmp = Cmp {
        mtime: true,
        mode: true,
        links: true,
        xattrs: true,
        extra_ok: false,
    };
    let d = oracle::diff(&keep, &got, cmp);
    c.finds(
        class,
        &format!("{step} touched what it was not asked to"),
        d,
    );
    if out.ok() {
        let mut wrong = Vec::new();
        for p in &must {
            match (tool, after.get(p)) {
                ("rm", Some(_)) => wrong.push(format!("{} not removed", show(p))),
                ("chmod", Some(e)) if !matches!(e.kind, Kind::Link(_)) && e.mode != mode => {
                    wrong.push(format!("{} has mode {:o}, not {mode:o}", show(p), e.mode))
                }
                _ => {}
            }
        }
        c.finds(class, &format!("{step} exit 0"), wrong);
        if tool == "rm" && !cut {
            let gone = before.keys().filter(|p| !after.contains_key(*p)).count() as u64;
            let said = out.count("files").unwrap_or(0) + out.count("dirs").unwrap_or(0);
            if class == "rm" && said != gone {
                c.find(
                    "counts",
                    format!("{step}: report says {said} removed, the oracle counts {gone}"),
                );
            }
        }
    }
    Ok(())
}

/// `rm`'s arguments to remove `path` through the walk's v4 list of it, a piece at a time: a
/// limit far below the list's size makes rm stream it (directories spilled by depth). `None`
/// (a finding made) when the walk failed.
fn rm_list_args(c: &mut Ctx, class: &'static str, path: &Path) -> Option<Vec<OsString>> {
    let list = c.dir.join("sub.mfu");
    let walk = c.inv(
        "walk",
        vec!["-q".into(), "-o".into(), arg(&list), arg(path)],
        Launch::Ranks(1),
    );
    if !c.run(&walk).ok() {
        c.find(class, format!("{} failed", walk.line()));
        return None;
    }
    let limit = *c.rng.pick(&["2k", "8k", "64k"]);
    Some(vec![
        "-i".into(),
        arg(&list),
        "--memory-limit".into(),
        limit.into(),
        "--tmpdir".into(),
        arg(&c.dir),
    ])
}

/// bz2 compression, then decompression, each killed (SIGKILL or SIGTERM at a random moment)
/// and run again (another launch): the rerun must exit 0 with the output an uninterrupted run
/// makes, byte for byte (compression: the same dbz2 file; decompression: the original bytes),
/// the input kept (-k), no temporary and no checkpoint left (a kill after the rename that left
/// a complete run's checkpoint: the same command forced must leave none).
fn bz2_kill(c: &mut Ctx) -> Result<()> {
    let dir = c.dir.join("z");
    let want_dir = c.dir.join("zwant");
    std::fs::create_dir_all(&dir)?;
    std::fs::create_dir_all(&want_dir)?;
    // Half noise, half text: streams of different compressed sizes.
    // Big enough that the debug build is still at work when the kill comes, most times.
    let len = c.rng.between(600_000, 2_500_000) as usize;
    let noise = c.rng.bytes(len);
    let data: Vec<u8> = (0..len)
        .map(|i| {
            if (i / 7000) % 2 == 0 {
                noise[i]
            } else {
                b"a line of text 0123\n"[i % 20]
            }
        })
        .collect();
    let stream = c.rng.between(20_000, 80_000).to_string();
    let zargs = |file: &Path| -> Vec<OsString> {
        vec![
            "-z".into(),
            "-k".into(),
            "-b".into(),
            "1".into(),
            "--stream-bytes".into(),
            stream.clone().into(),
            arg(file),
        ]
    };
    // The uninterrupted run's archive.
    let wfile = want_dir.join("f");
    std::fs::write(&wfile, &data)?;
    let want = c.inv("bz2", zargs(&wfile), Launch::Ranks(1));
    if !c.run(&want).ok() {
        c.find("bz2-kill", format!("uninterrupted: {} failed", want.line()));
        return Ok(());
    }
    let want_z = std::fs::read(want_dir.join("f.bz2"))?;
    let file = dir.join("f");
    std::fs::write(&file, &data)?;
    let zfile = dir.join("f.bz2");
    for (step, args, out, expect) in [
        ("compress", zargs(&file), zfile.clone(), want_z.clone()),
        (
            "decompress",
            vec!["-d".into(), "-k".into(), "-f".into(), arg(&zfile)],
            file.clone(),
            data.clone(),
        ),
    ] {
        if step == "decompress" {
            // The archive to decompress is the uninterrupted one; the original goes aside.
            std::fs::write(&zfile, &want_z)?;
            std::fs::remove_file(&file)?;
        }
        let sig = if c.rng.chance(50) {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        let launch = Launch::random(&mut c.rng, c.mpi);
        let mut first = c.inv("bz2", args.clone(), launch);
        let most = if step == "compress" { 700 } else { 150 };
        first.kill = Kill::After(Duration::from_millis(c.rng.between(10, most)), sig);
        let killed = c.run(&first);
        if killed.ok() && std::fs::read(&out).ok().as_ref() != Some(&expect) {
            c.find(
                "bz2-kill",
                format!("{step}: exit 0 before the kill, wrong output"),
            );
            return Ok(());
        }
        if !killed.ok() && out.exists() && std::fs::read(&out).ok().as_ref() != Some(&expect) {
            c.find(
                "bz2-kill",
                format!("{step}: a wrong output at its name after a kill"),
            );
            return Ok(());
        }
        // Finished (or killed after its rename, a whole output at its name): nothing to
        // continue. A kill between the rename and the checkpoint's removal (microseconds)
        // leaves the checkpoint of a complete run: the same command forced (-f, the output
        // exists) must not trust it, make the same output and leave nothing.
        let whole = std::fs::read(&out).ok().as_ref() == Some(&expect);
        let forced = !killed.ok()
            && whole
            && left_behind(&dir)?
                .iter()
                .any(|n| n.ends_with(".mfu-checkpoint"));
        if (killed.ok() || whole) && !forced {
            if step == "compress" {
                continue;
            }
            break;
        }
        let mut args = args;
        if forced && !args.iter().any(|a| a == "-f") {
            args.insert(0, "-f".into());
        }
        let rl = Launch::random(&mut c.rng, c.mpi);
        let again = c.inv("bz2", args, rl);
        let done = c.run(&again);
        if !done.ok() {
            c.find(
                "bz2-kill",
                format!(
                    "{step}: the rerun failed: {}",
                    String::from_utf8_lossy(&done.stderr).trim()
                ),
            );
            return Ok(());
        }
        if std::fs::read(&out)? != expect {
            c.find(
                "bz2-kill",
                format!("{step}: the rerun's output differs from an uninterrupted run's"),
            );
        }
        let left = left_behind(&dir)?;
        if !left.is_empty() {
            c.find("bz2-kill", format!("{step}: left behind: {left:?}"));
        }
    }
    Ok(())
}

/// The temporaries and checkpoints in `dir`, by name.
fn left_behind(dir: &Path) -> Result<Vec<String>> {
    Ok(std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".mfu-tmp") || n.ends_with(".mfu-checkpoint"))
        .collect())
}

/// tar -x of a random tree's archive, killed (-9 or SIGTERM, at a random time) and run again
/// (at random rank counts, killed again sometimes) until it completes: after every kill no
/// file carries the archive's mtime with other bytes than the archive's; at the end the tree
/// equals an uninterrupted extraction's (without a checkpoint), and neither a checkpoint nor a
/// temporary is left.
// A scenario reads as one script of steps and checks; the 150-line limit is for the product.
/// Between two runs of a tar -x, what a user may do to the entries already extracted (those
/// with the archive's mtime, which a partial file never has): remove one, and edit another
/// keeping its size and mtime. The rerun must extract both again.
fn tamper_extracted(
    c: &mut Ctx,
    dest: &Path,
    got: &Snap,
    want: &Snap,
    tampered: &mut BTreeSet<Vec<u8>>,
) -> Result<()> {
    let done: Vec<&Vec<u8>> = got
        .iter()
        .filter(|(p, g)| {
            matches!(g.kind, Kind::File { size, .. } if size > 0)
                && want
                    .get(*p)
                    .is_some_and(|w| w.kind == g.kind && w.mtime == g.mtime)
        })
        .map(|(p, _)| p)
        .collect();
    if done.is_empty() {
        return Ok(());
    }
    let gone = *c.rng.pick(&done);
    std::fs::remove_file(join(dest, gone))?;
    tampered.insert(gone.clone());
    c.log.push(format!(
        "removed the extracted {} before the rerun",
        show(gone)
    ));
    let edited = *c.rng.pick(&done);
    if edited != gone {
        let path = join(dest, edited);
        let mut bytes = std::fs::read(&path)?;
        let at = c.rng.below(bytes.len() as u64) as usize;
        bytes[at] ^= 0x5a;
        let mtime = std::fs::metadata(&path)?.modified()?;
        std::fs::write(&path, bytes)?;
        std::fs::File::options()
            .write(true)
            .open(&path)?
            .set_modified(mtime)?;
        // Every name of the inode changed (a hard-link group).
        let ino = got[edited].ino;
        tampered.extend(
            got.iter()
                .filter(|(_, g)| g.ino == ino)
                .map(|(p, _)| p.clone()),
        );
        c.log.push(format!(
            "edited the extracted {} before the rerun (size and mtime kept)",
            show(edited)
        ));
    }
    Ok(())
}

#[allow(clippy::too_many_lines)]
fn tar_x_kill(c: &mut Ctx) -> Result<()> {
    const CLASS: &str = "tar-x-kill";
    let (src, _) = src_tree(c, 4)?;
    // One or two big files, written in ranges over ranks.
    for i in 0..c.rng.between(1, 2) {
        let len = c.rng.between(1_000_000, 6_000_000) as usize;
        std::fs::write(src.join(format!("big {i}")), c.rng.bytes(len))?;
    }
    let comp = *c.rng.pick(&["", "", "--zstd", "--gzip", "gzip-stream"]);
    let name = match comp {
        "--zstd" => "a.tar.zst",
        "--gzip" => "a.tar.gz",
        "gzip-stream" => "s.tar.gz",
        _ => "a.tar",
    };
    let plain = c.dir.join("a.tar");
    let mut a: Vec<OsString> = vec!["-c".into(), "-k".into(), "1M".into(), "-f".into()];
    if comp == "--zstd" || comp == "--gzip" {
        a.extend([arg(&c.dir.join(name)), comp.into()]);
    } else {
        a.push(arg(&plain));
    }
    a.extend([
        "--no-checkpoint".into(),
        "-C".into(),
        arg(&c.dir),
        "src".into(),
    ]);
    let create = c.inv("tar", a, Launch::Ranks(2));
    let made = c.run(&create);
    if !made.ok() {
        c.find(CLASS, format!("{}: failed: {}", create.line(), made.tail()));
        return Ok(());
    }
    let archive = c.dir.join(name);
    if comp == "gzip-stream" {
        // One gzip stream (as `tar -czf` makes): read front to back by rank 0.
        let out = std::fs::File::create(&archive)?;
        let ok = Command::new("gzip")
            .args(["-1", "-c"])
            .arg(&plain)
            .stdout(out)
            .status()?
            .success();
        anyhow::ensure!(ok, "gzip -c {}", plain.display());
    }
    let state = c.dir.join("state");
    let x = |dest: &Path, checkpoint: bool| -> Vec<OsString> {
        let mut v: Vec<OsString> = vec!["-x".into(), "-k".into(), "256K".into(), "-f".into()];
        v.extend([arg(&archive), "-C".into(), arg(dest)]);
        if !checkpoint {
            v.push("--no-checkpoint".into());
        }
        v
    };
    // The uninterrupted extraction.
    let want_dir = c.dir.join("xwant");
    std::fs::create_dir_all(&want_dir)?;
    let launch = Launch::random(&mut c.rng, c.mpi);
    let whole = c.inv("tar", x(&want_dir, false), launch);
    if !c.run(&whole).ok() {
        c.find(CLASS, format!("uninterrupted: {} failed", whole.line()));
        return Ok(());
    }
    let want = oracle::snapshot(&want_dir)?;
    let dest = c.dir.join("xout");
    std::fs::create_dir_all(&dest)?;
    let env = |c: &mut Ctx| -> Vec<(&'static str, String)> {
        let mut e = vec![
            ("XDG_STATE_HOME", state.to_string_lossy().into_owned()),
            (
                "MFU_RS_CHECKPOINT_INTERVAL_MS",
                c.rng.between(5, 200).to_string(),
            ),
        ];
        if c.rng.chance(50) {
            // Each mark slowed: the kill falls inside the run more often.
            e.push((
                "MFU_RS_TEST_CHECKPOINT_SLOW_MS",
                c.rng.between(1, 3).to_string(),
            ));
        }
        e
    };
    let mut done = false;
    // Files edited by hand between runs (with the archive's mtime kept, other bytes): judged
    // once a run completes, not after a run killed before it reached them.
    let mut tampered = BTreeSet::new();
    for round in 0..6 {
        let launch = Launch::random(&mut c.rng, c.mpi);
        let mut run = c.inv("tar", x(&dest, true), launch);
        run.env = env(c);
        // The last rounds are not killed: the run must end.
        let killed = round < 5 && (round == 0 || c.rng.chance(40));
        if killed {
            match c.rng.below(4) {
                // At a random time: -9 or SIGTERM.
                0 | 1 => {
                    let sig = if c.rng.chance(50) {
                        libc::SIGKILL
                    } else {
                        libc::SIGTERM
                    };
                    run.kill = Kill::After(Duration::from_millis(c.rng.between(5, 400)), sig);
                }
                // At a random mark (the checkpoint core's knobs): often inside a big file's
                // ranges, which a timed kill seldom hits.
                2 => run.env.push((
                    "MFU_RS_TEST_CHECKPOINT_DIE_AFTER",
                    c.rng.between(1, 60).to_string(),
                )),
                _ => run.env.push((
                    "MFU_RS_TEST_CHECKPOINT_STOP_AFTER",
                    c.rng.between(1, 60).to_string(),
                )),
            }
        }
        let out = c.run(&run);
        let step = run.line();
        // Never a file with the archive's mtime and other bytes (a partial file carries no
        // archive times), whatever the moment of the kill.
        let got = oracle::snapshot(&dest)?;
        for (p, g) in got.iter().filter(|(p, _)| !tampered.contains(*p)) {
            if let (Some(w), oracle::Kind::File { .. }) = (want.get(p), &g.kind) {
                if w.mtime == g.mtime && w.kind != g.kind {
                    c.find(
                        CLASS,
                        format!(
                            "after {step}: {} has the archive's mtime and other bytes",
                            oracle::show(p)
                        ),
                    );
                }
            }
        }
        if out.ok() {
            done = true;
            break;
        }
        // Stopped at a mark (as by SIGTERM, once the handlers are in place): exit 1. (A
        // signal from outside may come before the handlers, or through mpirun, whose exit
        // status is its own.)
        let stop = run.env.iter().any(|(k, _)| k.ends_with("STOP_AFTER"));
        if stop && matches!(launch, Launch::Ranks(_)) && out.code != Some(1) {
            c.find(
                CLASS,
                format!(
                    "{step}: stopped with exit {:?} (want 1): {}",
                    out.code,
                    out.tail()
                ),
            );
        }
        if !killed {
            c.find(
                CLASS,
                format!("{step}: failed: exit {:?}: {}", out.code, out.tail()),
            );
            return Ok(());
        }
        if c.rng.chance(40) {
            tamper_extracted(c, &dest, &got, &want, &mut tampered)?;
        }
    }
    if !done {
        c.find(CLASS, "never completed in six runs".to_string());
        return Ok(());
    }
    let got = oracle::snapshot(&dest)?;
    c.finds(
        CLASS,
        "after the rerun that completed",
        oracle::diff(&want, &got, tar_cmp(true)),
    );
    let left: Vec<String> = got
        .keys()
        .filter(|p| p.ends_with(b".mfu-tmp") || p.ends_with(b".mfu-checkpoint"))
        .map(|p| oracle::show(p))
        .collect();
    if !left.is_empty() {
        c.find(CLASS, format!("temporaries left in the target: {left:?}"));
    }
    let checkpoints = state.join("mfu-rs/checkpoints");
    let kept: Vec<String> = std::fs::read_dir(&checkpoints)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if !kept.is_empty() {
        c.find(
            CLASS,
            format!("checkpoints left after completion: {kept:?}"),
        );
    }
    Ok(())
}

/// How `pfa unpack` makes what `pfa pack` stored: data, modes and mtimes of every entry (to
/// the nanosecond); hard links come back as separate files, xattrs are not stored.
const PFA_CMP: Cmp = Cmp {
    mtime: true,
    mode: true,
    links: false,
    xattrs: false,
    extra_ok: false,
};

/// `pfa pack` of a random tree, killed or not, then `pfa unpack` at another launch: what is
/// at AGG's name is always a whole aggregate of the tree (or nothing); then a second version
/// of a changed tree (killed or not: a cut version is refused until `pfa recover`), after
/// which version 1 still unpacks to the first tree and version 2 to the second.
fn pfa(c: &mut Ctx, sent: &Snap) -> Result<()> {
    let (src, built) = src_tree(c, 4)?;
    let s1 = oracle::snapshot(&src)?;
    let agg = c.dir.join("a.pfa");
    let chunk = *c.rng.pick(&["", "64KB", "128KB", "1M"]);
    let direct = c.rng.chance(20);
    let pack_args = |new_version: bool| {
        let mut a: Vec<OsString> = vec!["pack".into()];
        if new_version {
            a.push("--new-version".into());
        } else if !chunk.is_empty() {
            a.extend(["--chunk-size".into(), chunk.into()]);
        }
        if direct {
            a.push("--direct".into());
        }
        a.extend([arg(&src), arg(&agg)]);
        a
    };
    let signal = |c: &mut Ctx| {
        if c.rng.chance(50) {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        }
    };
    // Version 1, perhaps killed first: then nothing at AGG's name, or a whole aggregate.
    if c.rng.chance(40) {
        let launch = Launch::random(&mut c.rng, c.mpi);
        let mut first = c.inv("pfa", pack_args(false), launch);
        let sig = signal(c);
        first.kill = Kill::After(Duration::from_millis(c.rng.between(0, 45)), sig);
        let killed = c.run(&first);
        if !killed.ok() && agg.exists() && !pfa_unpacks_to(c, &agg, "1", &s1, "killed pack")? {
            return Ok(());
        }
    }
    if !agg.exists() {
        let launch = Launch::random(&mut c.rng, c.mpi);
        let pack = c.inv("pfa", pack_args(false), launch);
        if !c.run(&pack).ok() {
            c.find("pfa", format!("{} failed", pack.line()));
            return Ok(());
        }
    }
    let left = left_behind(&c.dir)?;
    if !left.is_empty() {
        c.find("pfa", format!("after pack: left behind: {left:?}"));
    }
    if !pfa_unpacks_to(c, &agg, "1", &s1, "pack")? || !c.rng.chance(60) {
        return c.sentinel_check(sent, "pfa");
    }
    // Version 2 of a changed tree: some files rewritten (sizes and times kept or not), one
    // added, one removed.
    for f in &built.files {
        if c.rng.chance(25) {
            let p = join(&src, f);
            let len = c.rng.between(0, 200_000) as usize;
            let bytes = tree::content(&mut c.rng, len);
            let _ = std::fs::write(&p, bytes);
        }
    }
    std::fs::write(src.join("added in v2"), tree::content(&mut c.rng, 70_000))?;
    if let Some(f) = built.files.first() {
        let _ = std::fs::remove_file(join(&src, f));
    }
    let s2 = oracle::snapshot(&src)?;
    let v1_bytes = std::fs::read(&agg)?;
    if c.rng.chance(50) {
        let launch = Launch::random(&mut c.rng, c.mpi);
        let mut first = c.inv("pfa", pack_args(true), launch);
        let sig = signal(c);
        first.kill = Kill::After(Duration::from_millis(c.rng.between(0, 45)), sig);
        let killed = c.run(&first);
        if !killed.ok() {
            // Whole at version 2 (killed after its close), whole at version 1 (nothing
            // written, or cut back by the run itself), or cut: refused until recovered.
            let ls = c.inv("pfa", vec!["ls".into(), arg(&agg)], Launch::Ranks(1));
            if !c.run(&ls).ok() {
                let recover = c.inv("pfa", vec!["recover".into(), arg(&agg)], Launch::Ranks(1));
                if !c.run(&recover).ok() {
                    c.find(
                        "pfa",
                        format!("{} failed after a killed pack", recover.line()),
                    );
                    return Ok(());
                }
            }
            let now = std::fs::read(&agg)?;
            if now.len() < v1_bytes.len() || now[..v1_bytes.len()] != v1_bytes[..] {
                c.find("pfa", "a killed --new-version changed version 1's bytes");
                return Ok(());
            }
            if now.len() == v1_bytes.len() {
                // Still version 1 alone: the same command again.
                let launch = Launch::random(&mut c.rng, c.mpi);
                let again = c.inv("pfa", pack_args(true), launch);
                if !c.run(&again).ok() {
                    c.find("pfa", format!("{} failed after a kill", again.line()));
                    return Ok(());
                }
            }
        }
    } else {
        let launch = Launch::random(&mut c.rng, c.mpi);
        let pack = c.inv("pfa", pack_args(true), launch);
        if !c.run(&pack).ok() {
            c.find("pfa", format!("{} failed", pack.line()));
            return Ok(());
        }
    }
    if std::fs::read(&agg)?[..v1_bytes.len()] != v1_bytes[..] {
        c.find("pfa", "--new-version changed version 1's bytes");
        return Ok(());
    }
    if pfa_unpacks_to(c, &agg, "1", &s1, "version 1 after version 2")? {
        pfa_unpacks_to(c, &agg, "2", &s2, "version 2")?;
    }
    c.sentinel_check(sent, "pfa")
}

/// Whether `pfa unpack --version V AGG` (at a random launch, into a fresh directory) makes
/// exactly the tree `want`; a finding names `step` otherwise.
fn pfa_unpacks_to(c: &mut Ctx, agg: &Path, version: &str, want: &Snap, step: &str) -> Result<bool> {
    let out = c.dir.join(format!("unpacked-v{version}"));
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    let mut args: Vec<OsString> = vec![
        "unpack".into(),
        "--version".into(),
        version.into(),
        arg(agg),
        arg(&out),
    ];
    // Sometimes an unpack killed first (kill -9 leaves its temporaries, which the next one
    // must remove; SIGTERM must leave none), then the same with --overwrite over what it made.
    if c.rng.chance(30) {
        let launch = Launch::random(&mut c.rng, c.mpi);
        let mut first = c.inv("pfa", args.clone(), launch);
        let sig = if c.rng.chance(50) {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        first.kill = Kill::After(Duration::from_millis(c.rng.between(0, 45)), sig);
        c.run(&first);
        args.insert(1, "--overwrite".into());
    }
    let launch = Launch::random(&mut c.rng, c.mpi);
    let unpack = c.inv("pfa", args, launch);
    if !c.run(&unpack).ok() {
        c.find("pfa", format!("{step}: {} failed", unpack.line()));
        return Ok(false);
    }
    let d = oracle::diff(want, &oracle::snapshot(&out)?, PFA_CMP);
    if !d.is_empty() {
        c.find(
            "pfa",
            format!(
                "{step}: version {version} unpacked is not the tree packed: {}",
                d.join("; ")
            ),
        );
        return Ok(false);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: Kind) -> oracle::Entry {
        oracle::Entry {
            kind,
            mode: 0o755,
            mtime: (0, 0),
            ino: 1,
            xattrs: Default::default(),
        }
    }

    fn sync_d_exclude() -> CopyOpts {
        CopyOpts {
            sync: true,
            delete: true,
            exclude: true,
            ..Default::default()
        }
    }

    /// A refusal is accepted only for directories of DEST that hold an excluded entry, and only
    /// when nothing else failed.
    #[test]
    fn a_kept_directory_is_accepted_only_when_it_holds_excluded_entries() {
        let dest = Path::new("/t/out");
        let mut got = Snap::new();
        got.insert(b"d".to_vec(), entry(Kind::Dir));
        got.insert(b"d/x.tmp".to_vec(), entry(Kind::Other));
        got.insert(b"e".to_vec(), entry(Kind::Dir));
        got.insert(b"e/y".to_vec(), entry(Kind::Other));
        let named = |rel: &str| {
            format!("mfu-rs sync: replace directory /t/out/{rel}: it still holds entries (excluded from the sync, made since its walk, or not removed: see above); left as it is\n")
        };
        let manifest = "mfu-rs sync: manifest /t/m: not written (the operation failed)\n";
        let o = sync_d_exclude();
        let ok = format!("{}{manifest}{{\"json\": 1}}\n", named("d"));
        assert_eq!(
            kept_for_excluded(ok.as_bytes(), dest, &got, &o),
            Some(vec![b"d".to_vec()])
        );
        // A directory without an excluded entry, another error, or options where it can't
        // happen: not this refusal.
        assert_eq!(
            kept_for_excluded(named("e").as_bytes(), dest, &got, &o),
            None
        );
        let other = format!(
            "{}mfu-rs sync: open /t/out/f: Permission denied\n",
            named("d")
        );
        assert_eq!(kept_for_excluded(other.as_bytes(), dest, &got, &o), None);
        let plain = CopyOpts {
            exclude: false,
            ..sync_d_exclude()
        };
        assert_eq!(
            kept_for_excluded(named("d").as_bytes(), dest, &got, &plain),
            None
        );
        assert_eq!(kept_for_excluded(b"", dest, &got, &o), None);
    }
}
