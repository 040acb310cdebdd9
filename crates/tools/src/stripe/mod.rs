//! `mfu-rs stripe` (dstripe): restripe files on Lustre, or report their layouts.
//!
//! A file is restriped by copying it, in parallel chunks over all ranks, into a hidden sibling
//! created with the target layout, then renaming the sibling over the original. Mode, owner,
//! times (ns) and extended attributes are kept (Lustre's own `lustre.*` xattrs are not copied:
//! they would pin the new file to the old OSTs). A file that changed while it was copied keeps
//! its old layout and is reported; a hard-linked file is skipped (renaming would split it
//! from its other names).
//!
//! The tree may change between the walk and the rewrite (a directory swapped for a symlink to
//! anywhere). Every file is reached from its PATH's directory, opened before the walk, without
//! following symlinks ([`flist::beneath`]): its layout is read through an `O_NOFOLLOW` open in
//! its parent, it must still be the inode walked before it is copied, and the rewritten
//! sibling is renamed over it with one `renameat` in that same parent directory descriptor,
//! after checking (dev, ino, size, mtime) again. A file whose path changed keeps its old
//! layout and is named (exit 1). The copy into the sibling is the copy engine's
//! ([`crate::engine::copy`]), which creates destinations without following symlinks.

use crate::cli::args::size_arg;
use crate::cli::bytes_text;
use crate::cli::{report_error, stdout_bytes, Common};
use crate::engine::copy::drive::IoOptions;
use crate::engine::copy::meta::XattrPolicy;
use crate::engine::copy::{Mapping, Plan};
use crate::engine::lustre::{LustreHandle, StripeOptions};
use crate::engine::status::Status;
use clap::Args;
use flist::at::At;
use flist::beneath::{explain, Roots};
use flist::path::{display, normalize};
use flist::units::parse_size;
use flist::{FileType, Meta};
use lustre_sys::policy::{self, Decision};
use lustre_sys::Layout;
use rustix::fs::OFlags;
use std::collections::HashSet;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::{Comm, CommExt};

/// Prefix of the hidden sibling a file is rewritten into.
pub const SIBLING_PREFIX: &[u8] = b".mfu-stripe.";

/// Options of `mfu-rs stripe`, named as in dstripe.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Restripe files on Lustre in parallel, or report their layouts (dstripe)",
    after_help = "Each file is rewritten in parallel into a new file with the target layout, \
        which then replaces it (mode, owner, times and xattrs kept; OST indices never copied). \
        Without -c the count follows the size policy: 1 stripe below 1 GiB, \
        floor(sqrt(GiB)) + 1 above, at most the OST count.\n\n\
        Examples:\n  \
        mpirun -np 16 mfu-rs stripe -c -1 -s 4MB /lustre/big/   # all OSTs, 4 MiB stripes\n  \
        mfu-rs stripe -m 1GB /lustre/run42                      # files over 1 GiB, by policy\n  \
        mfu-rs stripe -r /lustre/run42                          # report, change nothing\n\n\
        Exit status: 0 done; 1 some files failed or were skipped (hard-linked; each named on stderr; they keep their old \
        layout); 2 usage error or a PATH not on Lustre, nothing changed."
)]
pub struct StripeToolArgs {
    /// Files and directories (walked) to restripe.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<OsString>,
    /// Stripe count: N OSTs, -1 all, 0 the file-system default [default: by file size].
    #[arg(short = 'c', long = "count", value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-1..=i64::from(lustre_sys::MAX_STRIPE_COUNT)))]
    pub count: Option<i32>,
    /// Stripe size (a multiple of 64 KiB; rounded up).
    #[arg(short = 's', long = "size", value_name = "SIZE", default_value = "1MB", value_parser = size_arg)]
    pub size: u64,
    /// Only files at least this big.
    #[arg(short = 'm', long = "minsize", value_name = "SIZE", value_parser = parse_size)]
    pub minsize: Option<u64>,
    /// Print each file's stripe count and size; change nothing.
    #[arg(short = 'r', long)]
    pub report: bool,
    /// The Lustre calls (set by programs embedding mfu-rs and by tests).
    #[arg(skip)]
    pub api: LustreHandle,
    #[command(flatten)]
    pub common: Common,
}

/// One line of `--report`: `PATH: stripe count N, stripe size S` (or what else the layout is).
pub fn report_line(path: &[u8], layout: Option<&Layout>) -> Vec<u8> {
    let what = match layout {
        None => "no layout (not yet written, or not Lustre)".to_string(),
        Some(Layout::Composite(c)) => format!(
            "composite layout, {} components, {} mirrors",
            c.components.len(),
            c.mirror_count.max(1)
        ),
        Some(l) => format!(
            "stripe count {}, stripe size {}",
            l.stripe_count().unwrap_or(0),
            l.stripe_size().unwrap_or(0)
        ),
    };
    let mut out = path.to_vec();
    out.extend_from_slice(format!(": {what}\n").as_bytes());
    out
}

/// Check that every PATH is on Lustre (else the one-line reason) and normalise them.
fn check_paths(api: &LustreHandle, paths: &[OsString]) -> Result<Vec<Vec<u8>>, String> {
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let mut out = Vec::new();
    for p in paths {
        let path = normalize(p.as_bytes(), &cwd);
        match api.is_lustre(flist::path::as_path(&path)) {
            Ok(true) => out.push(path),
            Ok(false) => {
                return Err(format!(
                    "{} is not on Lustre: striping needs a Lustre file system (nothing changed)",
                    display(&path)
                ))
            }
            Err(e) => return Err(format!("statfs {}: {e}", display(&path))),
        }
    }
    Ok(out)
}

/// The layout of `path` as the file system reports it (reached beneath its root).
fn layout_of(api: &LustreHandle, roots: &Roots, path: &[u8]) -> io::Result<Option<Layout>> {
    let at = roots.at(path)?;
    let fd = at.open(OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, 0)?;
    api.layout_of(rustix::fd::AsFd::as_fd(&fd))
}

/// `Ok` when `path`, reached beneath its root without following symlinks, is still the inode
/// walked (`walked`); otherwise why not.
fn still_walked(roots: &Roots, path: &[u8], walked: &Meta) -> Result<(), String> {
    let now = roots
        .at(path)
        .and_then(|a| a.lstat())
        .map_err(|e| format!("stat: {}", explain(e)))?;
    if (now.st_dev, now.st_ino) != (walked.dev, walked.ino) {
        return Err(
            "changed since it was listed (another file is at its path now): it is left alone"
                .to_string(),
        );
    }
    Ok(())
}

/// Run `stripe` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, args: &StripeToolArgs) -> Status {
    let rank0 = comm.rank() == 0;
    let started = Instant::now();
    let roots = match crate::engine::setup::agree_setup_reported(
        comm,
        "stripe",
        check_paths(&args.api, &args.paths),
    ) {
        Ok(r) => r,
        Err(s) => return s,
    };
    steal::signals::install();
    let mut status = Status::Ok;
    // Opened before the walk, so that what is rewritten is reached from the directories walked.
    let opened = Roots::open_dirs(roots.iter().map(|r| r.as_slice()));
    let progress = args.common.progress(comm.rank(), "Walked");
    let walked = crate::engine::setup::walk_sources(
        comm,
        &args.common.legacy_context("stripe", false),
        &roots,
        false,
        &progress,
    );
    crate::engine::test_seam::after_listing(comm);
    if !walked.complete {
        status = Status::ItemsFailed;
    }
    let min = args.minsize.unwrap_or(0);
    let list = walked.list;
    let files = list.select((0..list.len()).filter(|&i| {
        list.kind(i) == FileType::File
            && list.meta(i).is_some_and(|m| m.size >= min)
            && !flist::path::basename(list.path(i)).starts_with(SIBLING_PREFIX)
    }));
    let files = flist::distribute::spread(comm, files);
    let failed = std::sync::atomic::AtomicBool::new(false);

    if args.report {
        let mut out = Vec::new();
        for e in files.iter() {
            match layout_of(&args.api, &opened, e.path) {
                Ok(l) => out.extend_from_slice(&report_line(e.path, l.as_ref())),
                Err(err) => {
                    report_error(
                        "stripe",
                        format_args!("get layout {}: {err}", display(e.path)),
                    );
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        if !args.common.quiet {
            in_rank_order(comm, out, stdout_bytes);
        }
        if failed.into_inner() {
            status = Status::ItemsFailed;
        }
        return status.agree(comm);
    }

    let stripe = StripeOptions {
        count: args.count,
        size: Some(args.size),
        api: args.api.clone(),
    };
    let overrides = stripe.overrides();
    let osts = args
        .api
        .ost_count(flist::path::as_path(&roots[0]))
        .unwrap_or(0);
    // Skip what already has the target layout, and hard-linked files.
    let mut already = 0u64;
    let mut linked = 0u64;
    let mut moved = 0u64;
    let todo = files.select((0..files.len()).filter(|&i| {
        let (path, m) = (files.path(i), files.meta(i).expect("stat list"));
        if let Err(why) = still_walked(&opened, path, m) {
            report_error("stripe", format_args!("{}: {why}", display(path)));
            moved += 1;
            return false;
        }
        if m.nlink > 1 {
            report_error(
                "stripe",
                format_args!(
                    "skipped {}: it has {} hard links, and restriping by rewrite would split them",
                    display(path),
                    m.nlink
                ),
            );
            linked += 1;
            return false;
        }
        let want = policy::choose(m.size, osts, None, &overrides, args.size);
        let have = layout_of(&args.api, &opened, path).ok().flatten();
        if matches(have.as_ref(), want, osts) {
            already += 1;
            return false;
        }
        true
    }));
    if moved > 0 {
        status = status.worst(Status::ItemsFailed);
    }
    let map = Mapping::siblings(roots.clone(), SIBLING_PREFIX);
    // A sibling left by an interrupted run would keep its old layout: remove it first.
    for e in todo.iter() {
        let sibling = map.dest(e.path);
        let _ = opened.at(&sibling).and_then(|a| a.remove(false));
    }
    let total_bytes = comm.sum(todo.iter().filter_map(|e| e.meta).map(|m| m.size).sum());
    let plan = Plan {
        create: todo.clone(),
        ..Plan::default()
    };
    let io = IoOptions {
        bufsize: None,
        chunksize: None,
        sparse: false,
        direct: false,
        open_noatime: false,
        preserve: true,
        xattrs: Some(XattrPolicy::NonLustre),
        batch_files: 0,
        stripe,
    };
    let (report, copy_status) = crate::engine::copy::drive::copy_and_report(
        comm,
        &args.common.legacy_context("stripe", false),
        plan,
        &map,
        &io,
        "files not yet restriped keep their old layout; run the same command again to finish",
    );
    status = status.worst(copy_status);
    // Rename over the originals what was copied completely, on every rank.
    let mut failed_paths = Vec::new();
    for e in &report.errors {
        steal::wire::put_bytes(&mut failed_paths, &e.path);
    }
    let failed_paths: HashSet<Vec<u8>> = comm
        .allgatherv(&failed_paths)
        .iter()
        .flat_map(|b| {
            let mut r = steal::wire::Reader::new(b);
            let mut v = Vec::new();
            while !r.is_empty() {
                v.push(r.bytes().to_vec());
            }
            v
        })
        .collect();
    let mut swapped = 0u64;
    for e in todo.iter() {
        let sibling = map.dest(e.path);
        let ok = !report.interrupted
            && !failed_paths.contains(e.path)
            && !failed_paths.contains(&sibling);
        let result = if ok {
            replace(&opened, e.path, &sibling, e.meta.expect("stat list"))
        } else {
            Err("not copied completely; it keeps its old layout".to_string())
        };
        match result {
            Ok(()) => swapped += 1,
            Err(why) => {
                let _ = opened.at(&sibling).and_then(|a| a.remove(false));
                if ok {
                    report_error("stripe", format_args!("{}: {why}", display(e.path)));
                }
                status = status.worst(Status::ItemsFailed);
            }
        }
    }
    let [swapped, already, linked] = {
        let mut v = [swapped, already, linked];
        comm.allreduce(&mut v, steal::ReduceOp::Sum);
        v
    };
    // A hard-linked file was asked for and not restriped (each is named above).
    status = status.worst(Status::of_work(0, linked, false));
    if rank0 && !args.common.quiet {
        let secs = started.elapsed().as_secs_f64();
        let mut line = format!(
            "Restriped {swapped} files ({}) in {secs:.3} s",
            bytes_text(total_bytes)
        );
        if already > 0 {
            line.push_str(&format!("; {already} already had the layout"));
        }
        if linked > 0 {
            line.push_str(&format!("; {linked} hard-linked files skipped"));
        }
        line.push('\n');
        stdout_bytes(line.as_bytes());
    }
    status.agree(comm)
}

/// Whether a file's layout `have` already is what `want` asks (`osts` resolves "all").
fn matches(have: Option<&Layout>, want: Decision, osts: u32) -> bool {
    let (Some(have), Decision::Set { count, size }) = (have, want) else {
        return false;
    };
    let count = match count {
        lustre_sys::STRIPE_COUNT_ALL if osts > 0 => osts as u16,
        c => c,
    };
    count != 0 && have.stripe_count() == Some(count) && have.stripe_size() == Some(size)
}

/// Rename `sibling` (a name in the same directory) over `path` if `path`, reached beneath its
/// root, is still the file that was copied (same inode, size and modification time as when
/// walked). Both names are looked up in one parent directory descriptor.
fn replace(roots: &Roots, path: &[u8], sibling: &[u8], walked: &Meta) -> Result<(), String> {
    let to = roots
        .at(path)
        .map_err(|e| format!("open parent: {}", explain(e)))?;
    let now = to.lstat().map_err(|e| format!("stat: {}", explain(e)))?;
    let now = Meta::from_stat(&now);
    if (now.dev, now.ino) != (walked.dev, walked.ino) {
        return Err(
            "changed since it was listed (another file is at its path now): it is left \
                    alone"
                .to_string(),
        );
    }
    if now.size != walked.size || (now.mtime, now.mtime_nsec) != (walked.mtime, walked.mtime_nsec) {
        return Err("it changed while it was copied; it keeps its old layout".to_string());
    }
    debug_assert_eq!(flist::path::parent(sibling), flist::path::parent(path));
    let renamed = if to.name().contains(&b'/') {
        // A PATH that is a file, reached by its path as the user named it: so is its sibling.
        At::new(sibling).and_then(|from| {
            Ok(rustix::fs::renameat(
                from.dir(),
                from.name(),
                to.dir(),
                to.name(),
            )?)
        })
    } else {
        let from = flist::path::basename(sibling);
        rustix::fs::renameat(to.dir(), from, to.dir(), to.name()).map_err(io::Error::from)
    };
    renamed.map_err(|e| format!("rename the restriped copy over it: {e}"))
}
