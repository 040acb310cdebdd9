//! `mfu-rs cp` (dcp): copy files and trees in parallel, with cp's and rsync's path rules.

use crate::cli::args::size_arg;
use crate::cli::bytes_text;
use crate::cli::{report_error, stdout_bytes, Common};
use crate::engine::copy::drive::IoArgs;
use crate::engine::copy::meta::XattrPolicy;
use crate::engine::copy::{links, Mapping, Plan};
use crate::engine::select::{FilterArgs, Rules};
use crate::engine::status::Status;
use clap::Args;
use flist::path::{basename, is_prefix, normalize};
use flist::restat::{restat, Which};
use flist::walk::stat_path;
use flist::{FileList, FileType, Meta};
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::Instant;
use steal::Comm;

/// Options of `mfu-rs cp`, named as in dcp.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Copy files and directory trees in parallel (dcp)",
    after_help = "Path rules (as cp and rsync): DEST absent → DEST becomes the copy; DEST an existing \
        directory → DEST/NAME; SRC/ with a trailing slash → the contents of SRC go into DEST; \
        several SRCs → DEST must be a directory.\n\n\
        Examples:\n  \
        mpirun -np 64 mfu-rs cp -p /lustre/run42 /lustre/archive/     # tree into a directory\n  \
        mfu-rs cp -p --exclude '*.tmp' --exclude '/scratch/' src/ dst  # contents, filtered\n  \
        mfu-rs cp -S sparse.img copy.img                               # keep holes\n\n\
        Safety: a destination that is the source itself (same file, hard link, snapshot made \
        with cp -al) is never written; nothing is created through a symlink already in DEST \
        (the entry is named and left); a file with other hard links is replaced, not written \
        through.\n\n\
        Exit status: 0 all copied; 1 some items failed or were refused (each named on stderr; \
        after cp -p, `mfu-rs sync SRC DEST/NAME` finishes the job; without -p, rerun the cp); \
        2 usage error, nothing copied."
)]
pub struct CpArgs {
    /// Sources, then the destination.
    #[arg(value_name = "SRC... DEST", required = true, num_args = 2..)]
    pub paths: Vec<OsString>,
    /// Bytes per read/write call on the pread/pwrite path (used when copy_file_range can't be:
    /// across file systems, with --direct) [default: adaptive: starts at 1 MiB and doubles
    /// while the measured throughput improves; -v prints what was chosen].
    #[arg(short, long, value_name = "SIZE", value_parser = size_arg)]
    pub bufsize: Option<u64>,
    /// Bytes per chunk: files are split into chunks copied by different ranks [default: 4MB,
    /// grown up to 1GB for big data sets so that every thread still gets two chunks; -v prints
    /// the size used].
    #[arg(short = 'k', long, value_name = "SIZE", value_parser = size_arg)]
    pub chunksize: Option<u64>,
    /// Extended attributes to copy (default with -p: all but Lustre's own; without -p: none
    /// unless this is given).
    #[arg(short = 'X', long, value_name = "POLICY", value_enum)]
    pub xattrs: Option<XattrPolicy>,
    /// Copy the entries of this list (v3/v4, text, plain or NUL-separated) instead of walking;
    /// entries are stat'ed again and only those under a SRC are kept.
    #[arg(short, long, value_name = "FILE")]
    pub input: Option<OsString>,
    /// Follow symbolic links in sources (copy what they point to).
    #[arg(short = 'L', long, overrides_with = "no_dereference")]
    pub dereference: bool,
    /// Copy symbolic links as links (the default).
    #[arg(short = 'P', long = "no-dereference")]
    pub no_dereference: bool,
    /// Keep owner, group, mode, times (ns) and extended attributes (ACLs included).
    #[arg(short, long)]
    pub preserve: bool,
    /// Open files with O_DIRECT (bypass the page cache).
    #[arg(short = 's', long, visible_alias = "synchronous")]
    pub direct: bool,
    /// Don't update sources' access times (O_NOATIME where permitted).
    #[arg(long = "open-noatime")]
    pub open_noatime: bool,
    /// Keep holes: copy only the data regions of sparse files.
    #[arg(short = 'S', long)]
    pub sparse: bool,
    /// Copy as this user id (needs root).
    #[arg(short = 'U', long, value_name = "ID")]
    pub uid: Option<u32>,
    /// Copy as this group id (needs root).
    #[arg(short = 'G', long, value_name = "ID")]
    pub gid: Option<u32>,
    #[command(flatten)]
    pub stripe: crate::engine::lustre::StripeArgs,
    #[command(flatten)]
    pub filters: FilterArgs,
    #[command(flatten)]
    pub common: Common,
}

/// Where the copy goes, decided from the path rules.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// (source root, destination root) pairs.
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Apply the path rules to `args` (already normalised sources with their original spelling, to
/// see trailing slashes). Errors are usage errors.
fn resolve(sources: &[(Vec<u8>, bool)], dest: &[u8], follow: bool) -> Result<Target, String> {
    let show = flist::path::display;
    let dest_meta = stat_path(dest, true).ok().map(|st| Meta::from_stat(&st));
    let dest_is_dir = dest_meta.is_some_and(|m| m.file_type() == FileType::Dir);
    if sources.len() > 1 && !dest_is_dir {
        return Err(format!(
            "{} is not a directory (several sources need a directory to go into)",
            show(dest)
        ));
    }
    if dest_meta.is_none() {
        crate::engine::setup::check_parent(dest)?;
    }
    let anchor = dest_anchor(dest);
    let mut pairs = Vec::new();
    for (given, contents) in sources {
        let src = &if *contents {
            named_dir(given)?
        } else {
            given.clone()
        };
        let st = stat_path(src, follow)
            .map_err(|e| format!("stat {}: {}", show(src), std::io::Error::from(e)))?;
        let src_is_dir = FileType::from_mode(st.st_mode) == FileType::Dir;
        let into = if dest_is_dir && !(*contents && src_is_dir) {
            let mut d = dest.to_vec();
            if d != b"/" {
                d.push(b'/');
            }
            d.extend_from_slice(basename(src));
            d
        } else {
            dest.to_vec()
        };
        if src_is_dir && (is_prefix(src, &into) || lands_inside(&st, &anchor)) {
            return Err(format!(
                "cannot copy the directory {} into itself ({})",
                show(src),
                show(&into)
            ));
        }
        if src_is_dir && !dest_is_dir && dest_meta.is_some() && into == dest {
            return Err(format!(
                "cannot overwrite the non-directory {} with the directory {}",
                show(dest),
                show(src)
            ));
        }
        pairs.push((src.clone(), into));
    }
    Ok(Target { pairs })
}

/// `SRC/`: the directory SRC names, following a symlink to one (as cp and rsync do: the slash
/// names the directory, not the link), as its real path; anything else is not a directory.
fn named_dir(src: &[u8]) -> Result<Vec<u8>, String> {
    let show = flist::path::display;
    let st = stat_path(src, true)
        .map_err(|e| format!("stat {}/: {}", show(src), std::io::Error::from(e)))?;
    if FileType::from_mode(st.st_mode) != FileType::Dir {
        return Err(format!(
            "stat {}/: {}",
            show(src),
            std::io::Error::from_raw_os_error(libc::ENOTDIR)
        ));
    }
    let link =
        stat_path(src, false).is_ok_and(|l| FileType::from_mode(l.st_mode) == FileType::Symlink);
    if !link {
        return Ok(src.to_vec());
    }
    std::fs::canonicalize(std::ffi::OsStr::from_bytes(src))
        .map(|p| p.into_os_string().into_vec())
        .map_err(|e| format!("resolve {}/: {e}", show(src)))
}

/// True when the destination anchor `anchor` ([`dest_anchor`]: the directory the copy is
/// made in, the only place where symlinks are followed) is the directory `src` (its stat) or
/// lies beneath it, whatever symlinks lead there: compared by (device, inode) from the
/// resolved directory up to `/`, not by spelling (`cp src lnk/copy` with `lnk -> src`).
fn lands_inside(src: &rustix::fs::Stat, anchor: &[u8]) -> bool {
    use rustix::fs::{Mode, OFlags};
    let start = anchor;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(mut dir) = flist::walk::open_long(start, flags) else {
        return false;
    };
    loop {
        let Ok(st) = rustix::fs::fstat(&dir) else {
            return false;
        };
        if (st.st_dev, st.st_ino) == (src.st_dev, src.st_ino) {
            return true;
        }
        let Ok(up) = rustix::fs::openat(&dir, c"..", flags, Mode::empty()) else {
            return false;
        };
        match rustix::fs::fstat(&up) {
            // `/` is its own parent.
            Ok(u) if (u.st_dev, u.st_ino) == (st.st_dev, st.st_ino) => return false,
            Ok(_) => dir = up,
            Err(_) => return false,
        }
    }
}

/// Where destination entries are reached beneath: DEST when it is a directory (the user named
/// it, so a symlink there is followed), else the directory DEST is made in. Below it nothing
/// is followed: `DEST/NAME` may already be a symlink to anywhere.
fn dest_anchor(dest: &[u8]) -> Vec<u8> {
    if crate::engine::setup::is_dir(dest) {
        dest.to_vec()
    } else {
        flist::path::parent(dest).to_vec()
    }
}

/// Run `cp` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, args: &CpArgs, rules: &Rules) -> Status {
    let rank0 = comm.rank() == 0;
    let quiet = args.common.quiet;
    let usage = |msg: String| {
        if rank0 {
            report_error("cp", msg);
        }
        Status::Usage.agree(comm)
    };
    if let Err(e) = crate::engine::setup::switch_identity(args.uid, args.gid) {
        return usage(e);
    }
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let (dest_arg, source_args) = args.paths.split_last().expect("clap requires 2 paths");
    let sources: Vec<(Vec<u8>, bool)> = source_args
        .iter()
        .map(|s| {
            let b = s.as_bytes();
            (normalize(b, &cwd), b.len() > 1 && b.ends_with(b"/"))
        })
        .collect();
    let dest = normalize(dest_arg.as_bytes(), &cwd);
    let target = match crate::engine::setup::agree_setup_reported(
        comm,
        "cp",
        resolve(&sources, &dest, args.dereference),
    ) {
        Ok(t) => t,
        Err(s) => return s,
    };
    let mut map = Mapping::new(target.pairs.clone()).with_dest_anchors(vec![dest_anchor(&dest)]);
    if args.dereference {
        map = map.following_sources();
    }
    let started = Instant::now();
    steal::signals::install();
    let mut status = Status::Ok;
    let walk_progress = args.common.progress(comm.rank(), "Walked");
    let roots: Vec<Vec<u8>> = target.pairs.iter().map(|p| p.0.clone()).collect();
    let mut list = match &args.input {
        Some(input) => match read_input(comm, input.as_bytes(), &roots, args.dereference) {
            Ok((list, failures)) => {
                if failures > 0 {
                    status = Status::ItemsFailed;
                }
                list
            }
            Err(e) => return usage(e),
        },
        None => {
            // cp writes no lists and prints no names.
            let walked = crate::engine::setup::walk_sources_named(
                comm,
                &args.common.legacy_context("cp", false),
                &roots,
                args.dereference,
                &walk_progress,
                false,
            );
            if !walked.complete {
                status = Status::ItemsFailed;
            }
            walked.list
        }
    };
    crate::engine::select::apply_rules(&mut list, rules, &map);
    let walk_secs = started.elapsed().as_secs_f64();
    let (list, links) = if args.dereference {
        (list, Vec::new())
    } else {
        let g = links::group(comm, list);
        (g.list, g.links)
    };
    let list = flist::distribute::spread(comm, list);
    let dirs = list.select((0..list.len()).filter(|&i| list.kind(i) == FileType::Dir));
    let plan = Plan {
        create: list,
        links,
        dir_meta: dirs,
        ..Plan::default()
    };
    let io = IoArgs {
        bufsize: args.bufsize,
        chunksize: args.chunksize,
        sparse: args.sparse,
        direct: args.direct,
        open_noatime: args.open_noatime,
        preserve: args.preserve,
        xattrs: args.xattrs,
        batch_files: 0,
        stripe: args.stripe.clone(),
    };
    if args.common.verbose && rank0 {
        stdout_bytes(format!("Walked in {walk_secs:.3} s\n").as_bytes());
    }
    crate::engine::test_seam::after_listing(comm);
    let hint = resume_hint(&target.pairs, args.preserve);
    let (report, copied) = crate::engine::copy::drive::copy_and_report(
        comm,
        &args.common.legacy_context("cp", false),
        plan,
        &map,
        &io,
        &hint,
    );
    status = status.worst(copied);
    let secs = started.elapsed().as_secs_f64();
    if rank0 && !quiet {
        let items = report.dirs + report.files + report.symlinks + report.hardlinks + report.others;
        let mut line = format!(
            "Copied {items} items ({} files, {} directories, {} links, {} hard links, {} other) and {} in {secs:.3} s ({}/s)",
            report.files,
            report.dirs,
            report.symlinks,
            report.hardlinks,
            report.others,
            bytes_text(report.bytes),
            steal::progress::human_bytes((report.bytes as f64 / secs.max(1e-9)) as u64),
        );
        if report.skipped > 0 {
            line.push_str(&format!("; {} skipped", report.skipped));
        }
        if report.total_errors > 0 {
            line.push_str(&format!("; {} failed", report.total_errors));
        }
        line.push('\n');
        stdout_bytes(line.as_bytes());
    }
    status.agree(comm)
}

/// How to finish an interrupted copy. With `-p` the files copied carry their sources' size and
/// mtime (an unfinished one never does), so sync of each pair copies only what is missing;
/// without it every copy has new times and sync would copy (and re-own) everything again.
fn resume_hint(pairs: &[(Vec<u8>, Vec<u8>)], preserve: bool) -> String {
    if !preserve {
        return "files copied so far carry new times, so `mfu-rs sync` would copy everything \
            again: rerun this cp to finish it"
            .to_string();
    }
    match pairs {
        [(src, dst)] => format!(
            "run `mfu-rs sync {} {}` to finish it: files already copied are kept",
            flist::path::display(src),
            flist::path::display(dst)
        ),
        _ => "run `mfu-rs sync SRC DEST/NAME` for each SRC to finish it: files already copied \
            are kept"
            .to_string(),
    }
}

/// `-i`: the list's entries under one of `roots`, stat'ed again (the list may be old). Returns
/// the records and the number of entries that could not be stat'ed (reported).
fn read_input(
    comm: &dyn Comm,
    input: &[u8],
    roots: &[Vec<u8>],
    follow: bool,
) -> Result<(FileList, u64), String> {
    let mut listed = flist::io::read(comm, input).map_err(|e| e.to_string())?;
    listed.retain(|e| roots.iter().any(|r| is_prefix(r, e.path)));
    let (list, errors) = restat(listed, Which::All, follow);
    for e in &errors {
        report_error("cp", e);
    }
    let failures = errors.len() as u64;
    Ok((list, failures))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().as_os_str().as_bytes().to_vec();
        let p = |s: &str| [t.as_slice(), b"/", s.as_bytes()].concat();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::create_dir(tmp.path().join("e")).unwrap();
        std::fs::write(tmp.path().join("f"), b"x").unwrap();
        let pairs = |srcs: &[(&str, bool)], dst: &str| {
            let s: Vec<_> = srcs.iter().map(|(a, c)| (p(a), *c)).collect();
            resolve(&s, &p(dst), false).map(|t| t.pairs)
        };
        assert_eq!(pairs(&[("f", false)], "new"), Ok(vec![(p("f"), p("new"))]));
        assert_eq!(pairs(&[("f", false)], "e"), Ok(vec![(p("f"), p("e/f"))]));
        assert_eq!(pairs(&[("d", false)], "e"), Ok(vec![(p("d"), p("e/d"))]));
        assert_eq!(pairs(&[("d", true)], "e"), Ok(vec![(p("d"), p("e"))]));
        assert_eq!(pairs(&[("d", false)], "new"), Ok(vec![(p("d"), p("new"))]));
        assert!(pairs(&[("d", false), ("f", false)], "f").is_err());
        assert!(pairs(&[("d", false)], "f").is_err());
        assert!(pairs(&[("d", false)], "d/sub").is_err());
        assert!(pairs(&[("f", false)], "missing/x").is_err());
        assert!(pairs(&[("missing", false)], "e").is_err());
    }
}
