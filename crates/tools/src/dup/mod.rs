//! `mfu-rs dup` (ddup): find files with identical contents.
//!
//! The phases, each collective:
//! 1. list: walk the PATHs with stat, or read `--input` and stat what it names;
//! 2. size: keep non-empty regular files; bring every size to one rank (by a hash of the size)
//!    and join hard links into one inode; sizes held by one inode drop out;
//! 3. prefix: blake3 of the first 64 KiB of every candidate, hashed over all ranks with work
//!    stealing; candidates meet again on the rank that owns their hash range and are grouped by
//!    (size, prefix hash). A file of at most 64 KiB was read whole: its group is final;
//! 4. full: blake3 of all bytes of the files still paired, with work stealing (one file per
//!    item), grouped again by (size, hash);
//! 5. check: every member of every group is `lstat`ed again and compared with its listing
//!    (each hash pass also compares `fstat` before and after reading); a file that changed is
//!    left out and named, exit 1;
//! 6. output: every rank owns one range of hashes, so printing rank by rank, each rank's groups
//!    sorted, gives the same output at any rank count. With `--verify`, the redundant-copy list
//!    keeps only the names an earlier list (reviewed by the user) holds.

mod hash;
mod inode;
mod unchanged;

use crate::cli::{report_error, stdout_bytes, Common};
use crate::engine::locks::lock;
use crate::engine::status::Status;
use clap::Args;
use flist::distribute::{hash_path, remap};
use flist::io::{self, Format};
use flist::path::{display, normalize};
use flist::restat::{restat, Which};
use flist::walk::{walk, WalkOptions};
use flist::FileList;
use flist::FileType;
use hash::{hash_file, hex, PREFIX_BYTES};
use inode::{exchange, hash_groups, hash_owner, inodes_of, same_size, size_owner, Inode};
use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::{queue, Comm, CommExt, ReduceOp};

const TOOL: &str = "dup";

/// Options of `mfu-rs dup` (ddup).
#[derive(Args, Clone, Debug)]
#[command(
    about = "Find files with identical contents",
    after_help = "Prints every group of identical non-empty regular files as lines `PATH HASH` \
        (HASH: lower-case hex blake3 of the contents), one line per name. Groups come in HASH \
        order, names sorted by path bytes within a group; the output is the same at any rank \
        count. Empty files are ignored (as by ddup). Hard links are one file: names of one \
        inode are never duplicates of each other; when their inode has a duplicate, every name \
        is printed in the group.\n\n\
        Examples:\n  \
        mpirun -np 8 mfu-rs dup /data/projects            # print groups of identical files\n  \
        mfu-rs dup -o extra.mfu /data/a /data/b            # also list the redundant copies\n  \
        mfu-rs dup --verify extra.mfu -o sure.mfu /data/a /data/b \\\n      \
        && mfu-rs rm -i sure.mfu                           # check again right before removing\n  \
        mfu-rs walk -o tree.mfu /data && mfu-rs dup -i tree.mfu\n\n\
        The --output list holds, for every group, all names of every inode except the first \
        (the inode whose first name sorts first): removing them keeps exactly one copy of each \
        content and frees the space of the others. Files change: a file that changes while dup \
        runs is left out (named, exit 1), and --verify LIST (an earlier -o list) runs the \
        comparison again and writes to -o only the names of LIST that are still redundant \
        copies, so that rm -i removes nothing whose content exists nowhere else now.\n\n\
        Exit status: 0 done, 1 some files could not be listed or read, changed while dup ran, or \
        (--verify) are no longer redundant copies (each on stderr with its path; they are left \
        out), 2 usage error."
)]
pub struct DupArgs {
    /// Files and directories to search (directories with everything below them).
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// Search the files a list names (v3/v4 cache, `path|T` text, one path per line, or
    /// NUL-separated; `-` reads stdin) instead of walking PATHs. Each is stat'ed again.
    #[arg(short, long, value_name = "FILE")]
    pub input: Option<OsString>,
    /// Write the redundant copies (every name of every inode of a group but the first) to FILE
    /// as a cache v4 list (`-` writes it to stdout, and the groups are then not printed).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<OsString>,
    /// With --output: write to it only the names this earlier `-o` list holds that are still
    /// redundant copies now (after a full comparison of PATHs again); the others are named on
    /// stderr (exit 1). Files that became redundant since are not added.
    #[arg(long, value_name = "LIST", requires = "output")]
    pub verify: Option<OsString>,
    /// With --output, write the text format (`path|T` per line).
    #[arg(short, long, requires = "output")]
    pub text: bool,
    /// Open files (and directories while walking) with O_NOATIME where permitted, so reading
    /// them leaves their access times alone.
    #[arg(long)]
    pub open_noatime: bool,
    #[command(flatten)]
    pub common: Common,
}

/// Counts of one run, summed over ranks where collected.
#[derive(Default)]
struct Counts {
    /// Non-empty regular files (inodes).
    files: u64,
    /// Empty regular files, ignored.
    empty: u64,
    /// Inodes that share their size with another.
    same_size: u64,
    /// Inodes above the prefix length that share size and prefix with another.
    same_prefix: u64,
    /// Duplicate groups.
    groups: u64,
    /// Inodes in groups beyond the first of each.
    redundant: u64,
    /// Bytes those redundant inodes hold.
    reclaimable: u64,
}

/// Run `dup` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, args: &DupArgs) -> Status {
    let started = Instant::now();
    let cwd = match flist::path::current_dir() {
        Ok(d) => d,
        Err(e) => return Status::usage(comm, TOOL, format!("current directory: {e}")),
    };
    if args.paths.iter().any(|p| p.is_empty()) {
        return Status::usage(comm, TOOL, "an empty PATH names no file");
    }
    steal::signals::install();
    let stop = steal::signals::stop_flag();
    let to_stdout = crate::cli::list_to_stdout(args.output.as_deref());
    let reviewed = match &args.verify {
        Some(list) => match io::read(comm, list.as_bytes()) {
            Ok(list) => Some(list.normalized(&cwd)),
            Err(e) => return Status::usage(comm, TOOL, e),
        },
        None => None,
    };

    // 1. The list, with fresh metadata.
    let (list, errors) = match &args.input {
        Some(input) => match io::read(comm, input.as_bytes()) {
            Ok(list) => restat(list.normalized(&cwd), Which::All, false),
            Err(e) => return Status::usage(comm, TOOL, e),
        },
        None => {
            let roots: Vec<Vec<u8>> = args
                .paths
                .iter()
                .map(|p| normalize(p.as_bytes(), &cwd))
                .collect();
            let progress = args.common.progress(comm.rank(), "Walked");
            let opts = WalkOptions {
                no_atime: args.open_noatime,
                stop: Some(stop),
                progress: Some(&progress),
                ..WalkOptions::default()
            };
            let walked = walk(comm, &flist::path::outermost(roots), &opts);
            (walked.list, walked.errors)
        }
    };
    let mut failed = errors.len() as u64;
    for e in &errors {
        report_error(TOOL, e);
    }
    // Same id tables as the list, so that -o can write v4.
    let mut redundant = list.empty_like();
    let mut counts = Counts::default();

    // 2. Sizes: non-empty regular files, each size on one rank.
    let mut list = list;
    let empty = list
        .iter()
        .filter(|e| e.kind == FileType::File && e.meta.is_some_and(|m| m.size == 0))
        .count() as u64;
    list.retain(|e| e.kind == FileType::File && e.meta.is_some_and(|m| m.size > 0));
    let size = comm.size();
    let list = remap(comm, list, |e| {
        size_owner(e.meta.map_or(0, |m| m.size), size)
    });
    let inodes = inodes_of(&list);
    drop(list);
    let files = inodes.len() as u64;
    let inodes = same_size(inodes);
    let same_size_n = inodes.len() as u64;

    // 3. Prefixes; files no longer than the prefix are done after it.
    let progress = args.common.progress(comm.rank(), "Hashed");
    let total_bytes: u64 = inodes.iter().map(|i| i.size.min(PREFIX_BYTES)).sum();
    progress
        .total_items
        .store(comm.sum(same_size_n), std::sync::atomic::Ordering::Relaxed);
    progress
        .total_bytes
        .store(comm.sum(total_bytes), std::sync::atomic::Ordering::Relaxed);
    let pass = |inodes: Vec<Inode>, limit: u64, batch: usize, failed: &mut u64| {
        let (hashed, errors, interrupted) =
            hash_all(comm, inodes, limit, batch, args.open_noatime, &progress);
        *failed += errors.len() as u64;
        for e in errors {
            report_error(TOOL, e);
        }
        (
            exchange(comm, hashed, |i| hash_owner(&i.hash, size)),
            interrupted,
        )
    };
    let (hashed, mut interrupted) = pass(inodes, PREFIX_BYTES, 16, &mut failed);
    let mut done = Vec::new();
    let mut rest = Vec::new();
    for group in hash_groups(hashed) {
        if group[0].size <= PREFIX_BYTES {
            done.push(group);
        } else {
            rest.extend(group);
        }
    }
    let same_prefix_n = rest.len() as u64;

    // 4. Whole files, one per work item (they may be large).
    if !comm.any(interrupted) {
        let total_bytes: u64 = rest.iter().map(|i| i.size).sum();
        progress.total_items.fetch_add(
            comm.sum(same_prefix_n),
            std::sync::atomic::Ordering::Relaxed,
        );
        progress
            .total_bytes
            .fetch_add(comm.sum(total_bytes), std::sync::atomic::Ordering::Relaxed);
        let (hashed, cut) = pass(rest, u64::MAX, 1, &mut failed);
        interrupted = cut;
        done.extend(hash_groups(hashed));
    } else {
        interrupted = true;
    }
    done.sort_by(|a, b| (a[0].hash, a[0].size).cmp(&(b[0].hash, b[0].size)));

    // 5. The groups are known; a race test changes files here. Every member is checked
    // against its listing once more, as late as possible before the output.
    crate::engine::test_seam::after_listing(comm);
    for msg in unchanged::drop_changed(&mut done) {
        report_error(TOOL, msg);
        failed += 1;
    }

    // 6. Output, in hash order over ranks.
    let mut lines = Vec::new();
    for group in &done {
        counts.groups += 1;
        counts.redundant += group.len() as u64 - 1;
        counts.reclaimable += (group.len() as u64 - 1) * group[0].size;
        let h = hex(&group[0].hash);
        let mut names: Vec<&[u8]> = group
            .iter()
            .flat_map(|i| i.names.iter().map(|n| n.0.as_slice()))
            .collect();
        names.sort();
        for n in names {
            lines.extend_from_slice(n);
            lines.push(b' ');
            lines.extend_from_slice(h.as_bytes());
            lines.push(b'\n');
        }
        for i in &group[1..] {
            for (path, meta) in &i.names {
                redundant.push(path, FileType::File, Some(*meta));
            }
        }
    }
    if !to_stdout {
        in_rank_order(comm, lines, stdout_bytes);
    }
    let mut status = if failed > 0 {
        Status::ItemsFailed
    } else {
        Status::Ok
    };
    if let Some(reviewed) = reviewed {
        let (still, gone) = still_redundant(comm, redundant, reviewed, args.output.as_deref());
        redundant = still;
        if gone > 0 {
            status = Status::ItemsFailed;
        }
    }
    let cut_short = comm.any(interrupted);
    if let (Some(out), true) = (&args.output, cut_short) {
        // A list written now would look complete, and `rm -i` of it is the next step.
        if comm.rank() == 0 {
            report_error(
                TOOL,
                format!(
                    "{}: not written: the run was interrupted",
                    flist::path::display(out.as_bytes())
                ),
            );
        }
    } else if let Some(out) = &args.output {
        let format = if args.text { Format::Text } else { Format::V4 };
        if let Err(e) = io::write(comm, &redundant, out.as_bytes(), format) {
            if comm.rank() == 0 {
                report_error(TOOL, e);
            }
            status = Status::ItemsFailed;
        }
    }

    counts.files = files;
    counts.empty = empty;
    counts.same_size = same_size_n;
    counts.same_prefix = same_prefix_n;
    let c = sum_counts(comm, &counts);
    let failed = comm.sum(failed);
    if comm.rank() == 0 {
        if args.common.verbose {
            eprintln!(
                "{} files ({} empty ignored, hard links counted once); {} of the same size as \
                 another; {} above {} KiB also with the same first {} KiB; {} groups of duplicates, \
                 {} redundant copies, {} reclaimable; {:.3} s",
                c.files,
                c.empty,
                c.same_size,
                c.same_prefix,
                PREFIX_BYTES >> 10,
                PREFIX_BYTES >> 10,
                c.groups,
                c.redundant,
                crate::cli::bytes_text(c.reclaimable),
                started.elapsed().as_secs_f64()
            );
        }
        if failed > 0 {
            report_error(
                TOOL,
                format!(
                    "{failed} files could not be listed or read, or changed while dup ran (listed above), and were left out"
                ),
            );
        }
    }
    if cut_short {
        status = Status::ItemsFailed;
        if comm.rank() == 0 {
            report_error(TOOL, "interrupted by a signal: the groups are incomplete");
        }
    }
    status.agree(comm)
}

/// `--verify`: the entries of `redundant` (this run's redundant copies) that the earlier list
/// `reviewed` also names, sorted by path on each rank; the names of `reviewed` that are not
/// redundant copies now are named on stderr (left out of `output`). Returns the list and the
/// count of those names on this rank. Collective.
fn still_redundant(
    comm: &dyn Comm,
    redundant: FileList,
    reviewed: FileList,
    output: Option<&std::ffi::OsStr>,
) -> (FileList, u64) {
    let size = comm.size() as u64;
    let owner = |p: &[u8]| (hash_path(p) % size) as usize;
    let now = remap(comm, redundant, |e| owner(e.path));
    let reviewed = remap(comm, reviewed, |e| owner(e.path));
    let asked: HashSet<&[u8]> = reviewed.iter().map(|e| e.path).collect();
    let current: HashSet<&[u8]> = now.iter().map(|e| e.path).collect();
    let mut order: Vec<usize> = (0..now.len())
        .filter(|&i| asked.contains(now.entry(i).path))
        .collect();
    order.sort_by(|&a, &b| now.entry(a).path.cmp(now.entry(b).path));
    let mut still = now.empty_like();
    for i in order {
        still.push_from(&now, i);
    }
    let out = output.map_or_else(Default::default, |o| display(o.as_bytes()).into_owned());
    let mut gone = 0;
    for e in reviewed.iter() {
        if !current.contains(e.path) {
            gone += 1;
            report_error(
                TOOL,
                format!(
                    "{}: no longer a redundant copy (it changed, or no other file holds its content now); not written to {out}",
                    display(e.path)
                ),
            );
        }
    }
    (still, gone)
}

fn sum_counts(comm: &dyn Comm, c: &Counts) -> Counts {
    let mut v = [
        c.files,
        c.empty,
        c.same_size,
        c.same_prefix,
        c.groups,
        c.redundant,
        c.reclaimable,
    ];
    comm.allreduce(&mut v, ReduceOp::Sum);
    Counts {
        files: v[0],
        empty: v[1],
        same_size: v[2],
        same_prefix: v[3],
        groups: v[4],
        redundant: v[5],
        reclaimable: v[6],
    }
}

/// Hash the first `limit` bytes of every inode over all ranks with work stealing, `batch`
/// inodes per work item. Returns the inodes hashed on this rank (wherever they started), the
/// failures, and whether a stop request cut the pass short. Collective.
fn hash_all(
    comm: &dyn Comm,
    inodes: Vec<Inode>,
    limit: u64,
    batch: usize,
    noatime: bool,
    progress: &steal::progress::Progress,
) -> (Vec<Inode>, Vec<String>, bool) {
    let hashed = Mutex::new(Vec::new());
    let errors = Mutex::new(Vec::new());
    let cfg = queue::Config {
        max_batch: batch,
        stop: Some(steal::signals::stop_flag()),
        progress: Some(progress),
        ..queue::Config::default()
    };
    let outcome = queue::run(comm, &cfg, inodes, |mut i: Inode, _| {
        let bytes = i.size.min(limit);
        match hash_file(i.first_path(), &i.names[0].1, limit, noatime) {
            Ok(h) => {
                i.hash = h;
                lock(&hashed).push(i);
            }
            Err(e) => lock(&errors).push(format!(
                "{} {}: {}",
                e.op,
                display(i.first_path()),
                e.source
            )),
        }
        progress.add(1, bytes);
    });
    (
        hashed.into_inner().unwrap_or_else(|p| p.into_inner()),
        errors.into_inner().unwrap_or_else(|p| p.into_inner()),
        outcome.interrupted,
    )
}
