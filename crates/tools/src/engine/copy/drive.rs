//! The copy engine as cp, sync and stripe drive it: I/O settings, the run with its progress and
//! verbose detail, and the failures it reports.

use crate::engine::context::Context;
use crate::engine::copy::data::DataOptions;
use crate::engine::copy::meta::{MetaOptions, XattrPolicy};
use crate::engine::copy::{self as copy, CopyOptions, Mapping, Plan, Report};
use crate::engine::hashing::Hashing;
use crate::engine::manifest::{self, ManifestOptions};
use crate::engine::status::Status;
use crate::engine::verify;
use std::sync::atomic::AtomicBool;
use steal::progress::Progress;
use steal::{Comm, CommExt};

/// I/O settings of a copy. The default is what `mfu-rs cp` does without options.
#[derive(Clone, Debug, Default)]
pub struct IoOptions {
    /// Bytes per read/write call on the pread/pwrite path; `None`: adaptive (starts at 1 MiB
    /// and doubles while the throughput improves).
    pub bufsize: Option<u64>,
    /// Bytes per chunk (the unit of parallel work); `None`: automatic (4 MiB, grown up to
    /// 1 GiB for big data sets).
    pub chunksize: Option<u64>,
    /// Keep holes: copy only the data regions of sparse files.
    pub sparse: bool,
    /// Open files with `O_DIRECT`.
    pub direct: bool,
    /// Preserve owner, group, mode, times (ns) and extended attributes.
    pub preserve: bool,
    /// Extended attributes to copy; `None`: all but Lustre's own when preserving, else none.
    pub xattrs: Option<XattrPolicy>,
    /// Files per batch, each complete with its metadata before the next (0 = all at once).
    pub batch_files: u64,
    /// Lustre layouts of new files, and the Lustre calls.
    pub stripe: crate::engine::lustre::StripeOptions,
    /// `--verify`: read every written range back (from the device where the file system
    /// allows) and compare it with the bytes read from the source.
    pub verify: bool,
    /// `--manifest`: a checksum manifest of the files copied.
    pub manifest: Option<ManifestOptions>,
}

impl IoOptions {
    /// The engine's options. Xattrs are copied when preserving (Lustre's own left out) or when
    /// `-X` asks.
    pub(crate) fn options<'a>(
        &'a self,
        stop: Option<&'a AtomicBool>,
        progress: &'a Progress,
        hashing: Option<&'a Hashing>,
        noatime: &'a flist::noatime::NoAtime,
    ) -> CopyOptions<'a> {
        let xattrs = self.xattrs.unwrap_or(if self.preserve {
            XattrPolicy::NonLustre
        } else {
            XattrPolicy::None
        });
        CopyOptions {
            chunk_size: self.chunksize.unwrap_or(0),
            data: DataOptions {
                bufsize: self.bufsize.map_or(0, |b| b.min(1 << 30) as usize),
                sparse: self.sparse,
                direct: self.direct,
            },
            meta: MetaOptions::new(self.preserve, xattrs),
            noatime,
            batch_files: self.batch_files,
            stop,
            progress: Some(progress),
            lustre: &*self.stripe.api,
            stripe: self.stripe.overrides(),
            hashing: hashing.filter(|h| h.on()),
        }
    }
}

/// Report a run's failures and skips (every rank its own) to `context`.
pub fn report_failures(context: &Context, report: &Report) {
    for e in &report.errors {
        context.error(e);
    }
    for e in &report.skips {
        context.error(format_args!("skipped: {e}"));
    }
}

/// Run the copy engine with progress and (verbose) the sizes chosen; report this rank's
/// failures, sum the counts over ranks, and say how to finish an interrupted run
/// (`resume_hint`). Returns the summed report and the status it implies. Collective.
pub fn copy_and_report(
    comm: &dyn Comm,
    context: &Context,
    plan: Plan,
    map: &Mapping,
    io: &IoOptions,
    resume_hint: &str,
) -> (Report, Status) {
    let (report, status, _) = copy_checked(comm, context, plan, map, io, resume_hint);
    (report, status)
}

/// What `--verify` and `--manifest` found in a copy.
#[derive(Debug, Default)]
pub struct Checked {
    /// How written ranges were read back (with `verify`; summed over ranks).
    pub verify: Option<verify::Summary>,
    /// This rank's manifest entries (path relative to the manifest's base, digest), to be
    /// published by the tool once it knows whether the whole operation succeeded.
    pub manifest: Option<Vec<manifest::Entry>>,
}

/// [`copy_and_report`], with the checks `io.verify` and `io.manifest` ask for. Collective.
pub fn copy_checked(
    comm: &dyn Comm,
    context: &Context,
    plan: Plan,
    map: &Mapping,
    io: &IoOptions,
    resume_hint: &str,
) -> (Report, Status, Checked) {
    let hashing = Hashing::new(io.verify, io.manifest.as_ref().map(|m| m.kind));
    // Hard links are made, not copied: a member's line has its first member's digest.
    let links: Vec<(Vec<u8>, Vec<u8>)> = match &io.manifest {
        Some(_) => plan
            .links
            .iter()
            .map(|(first, member)| (map.dest(first), map.dest(member)))
            .collect(),
        None => Vec::new(),
    };
    let (mut report, status) = run_engine(comm, context, plan, map, io, resume_hint, &hashing);
    let mut checked = Checked::default();
    if io.verify {
        let mut v = hashing.counters.values();
        comm.allreduce(&mut v, steal::ReduceOp::Sum);
        checked.verify = Some(verify::Summary::of(v));
    }
    if let Some(m) = &io.manifest {
        // Digests are read again from sources only (a manifest holds the source's bytes, not
        // the copy's), reached as the copy reached them; a path outside them is refused.
        let reach = copy::reach::Reach::open(map);
        let roots = map.source_roots();
        let reopen = |src: &[u8]| {
            if !roots.iter().any(|r| flist::path::is_prefix(r, src)) {
                return Err(std::io::Error::other("not a source of this copy"));
            }
            let mut flags = rustix::fs::OFlags::RDONLY;
            if reach.src_confined() {
                flags |= rustix::fs::OFlags::NOFOLLOW;
            }
            let at = reach.src(src)?;
            context.noatime.open_part(false, flags, |f| at.open(f, 0))
        };
        let mut records = hashing.take_records();
        if status != Status::Ok {
            // No manifest follows a failed or interrupted run: read no source again for it.
            records.retain(|r| r.reread.is_none());
        }
        let (entries, errors) = manifest::entries(comm, m, records, &links, reopen);
        for e in &errors {
            context.error(e);
        }
        report.total_errors += comm.sum(errors.len() as u64);
        checked.manifest = Some(entries);
    }
    let status = status.worst(Status::of_work(report.total_errors, 0, false));
    (report, status, checked)
}

fn run_engine(
    comm: &dyn Comm,
    context: &Context,
    plan: Plan,
    map: &Mapping,
    io: &IoOptions,
    resume_hint: &str,
    hashing: &Hashing,
) -> (Report, Status) {
    let rank0 = comm.rank() == 0;
    let say = |text: String| {
        if rank0 && context.verbose {
            context.info(text);
        }
    };
    say(format!(
        "Chunk size {}, buffer size {}, {}\n",
        io.chunksize
            .map_or("automatic".to_string(), |c| format!("{c} bytes")),
        io.bufsize
            .map_or("adaptive".to_string(), |b| format!("{b} bytes")),
        crate::engine::wording::ranks(comm.size())
    ));
    let progress = context.progress(comm.rank(), "Copied");
    let opts = io.options(
        Some(&context.stop),
        &progress,
        Some(hashing),
        &context.noatime,
    );
    let mut report = copy::run(comm, plan, map, &opts);
    report_failures(context, &report);
    report.sum(comm);
    warn_projid_unkept(comm, context, report.projid_unkept.take());
    if report.chunk_size > 0 {
        say(format!(
            "Chunk size used: {} bytes ({})\n",
            report.chunk_size, report.chunk_reason
        ));
    }
    if context.verbose && rank0 {
        say(format!(
            "{} (this process)\n",
            crate::engine::copy::iosize::chosen()
        ));
    }
    if let Some(osts) = report.lustre_osts {
        say(lustre_line(osts, &report.stripes));
    }
    // Skipped entries (a device node without the privilege to make it) were asked for too.
    let status = Status::of_work(report.total_errors, report.skipped, report.interrupted);
    if report.interrupted && rank0 {
        context.error(format_args!(
            "interrupted by a signal: the copy is incomplete ({resume_hint})"
        ));
    }
    (report, status)
}

/// Say once, on rank 0, that a destination kept no project IDs (`unkept`: this rank's first
/// such destination; the lowest rank's is named). A warning, not a failure: the data and the
/// rest of the metadata are there, as cp leaves xattrs a file system can't hold. Collective.
pub fn warn_projid_unkept(comm: &dyn Comm, context: &Context, unkept: Option<Vec<u8>>) {
    let all = comm.all_gather(&unkept);
    if comm.rank() == 0 {
        if let Some(first) = all.into_iter().flatten().next() {
            context
                .events
                .error(&crate::engine::copy::projid::unkept_warning(&first));
        }
    }
}

/// `-v`: what layouts new files got on a Lustre destination.
pub fn lustre_line(osts: u32, s: &crate::engine::copy::striping::StripeCounts) -> String {
    let osts = match osts {
        0 => "OST count unknown".to_string(),
        n => format!("{n} OSTs"),
    };
    format!(
        "Lustre destination ({osts}): {} files given a layout ({} over several OSTs), {} inherit a \
         one-stripe directory default, {} follow a PFL directory default, {} existing files \
         keep theirs, {} refused by the file system\n",
        s.set, s.wide, s.inherited, s.pfl, s.kept, s.refused
    )
}
