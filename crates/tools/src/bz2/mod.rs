//! `mfu-rs bz2` (dbz2): compress or decompress one file with bzip2 on all ranks.
//!
//! Compression writes dbz2's layout (`engine::codec::dbz2`, formats.md §7): one independent bzip2 stream per
//! ~10 MB block, placed by a prefix sum of compressed sizes, then a table and a footer. Plain
//! `bunzip2` reads it (the trailer is "trailing garbage", exit 0). Decompression is parallel over
//! the table for such files; a file from plain `bzip2` (no table: one stream, or several
//! concatenated) is decompressed serially by rank 0.
//!
//! Like bzip2: `FILE` becomes `FILE.bz2` and back, an existing output is kept unless `-f`, the
//! input goes after success unless `-k`, and the output gets the input's mode, owner and times.
//! The output is written under a temporary name beside it and renamed at the end.

mod compress;
mod decompress;
pub(crate) mod output;
mod resume;

use crate::engine::checkpoint::{self, Checkpoint, Choice, Inputs, Outcome, Prior};
use crate::engine::codec::{bzip2, dbz2};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::status::Status;
use flist::path::display;
use flist::units::human_bytes;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::time::Instant;
use steal::{Comm, CommExt};

/// What `bz2` is to do, to which file.
///
/// ```no_run
/// // mfu-rs bz2 -d -k /lustre/big.dat.bz2
/// let mut options = mfu::bz2::Options::new(b"/lustre/big.dat.bz2".to_vec());
/// options.decompress = true;
/// options.keep = true;
/// let reports = steal::local::run(2, |comm| mfu::bz2::run(comm, &options));
/// let written = reports[0].as_ref().map_or(0, |r| r.bytes);
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// The file to compress (to FILE.bz2) or decompress (FILE.bz2, .dbz2 -> FILE; .tbz2, .tbz
    /// -> .tar; other names -> FILE.out).
    pub file: Vec<u8>,
    /// Decompress (otherwise compress).
    pub decompress: bool,
    /// Keep the input file (by default it is removed after success).
    pub keep: bool,
    /// Overwrite the output file if it exists.
    pub force: bool,
    /// bzip2 block size in units of 100 kB (1-9); also sets the stream size (the largest
    /// multiple of it below 10 MiB).
    pub level: u32,
    /// Bytes of input per stream instead of dbz2's ~10 MB (at most `dbz2::MAX_BLOCK`).
    pub stream_bytes: Option<u64>,
    /// Where the blocks done are recorded, so that the same command run again after a stop
    /// or a kill continues (by default `.NAME.mfu-checkpoint` beside the output). Not used
    /// when decompressing a file without a dbz2 table (one serial stream).
    pub checkpoint: Choice,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Compress `file` to `file.bz2` at level 9, removing `file` after success, as bzip2
    /// does.
    pub fn new(file: Vec<u8>) -> Options {
        Options {
            file,
            decompress: false,
            keep: false,
            force: false,
            level: 9,
            stream_bytes: None,
            checkpoint: Choice::default(),
            context: Context::default(),
        }
    }
}

/// What a `bz2` run did (the same on every rank).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The input file.
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub input: Vec<u8>,
    /// The output file (made only when the run succeeded).
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub output: Vec<u8>,
    /// The run decompressed.
    pub decompress: bool,
    /// Uncompressed bytes: read when compressing, written when decompressing. 0 when the run
    /// failed.
    pub bytes: u64,
    /// How it was done: blocks and sizes (`3 blocks of 9900000 bytes, 28.610 MiB -> 1.203
    /// MiB`). Empty when the run failed.
    pub detail: String,
    /// 1 when the work failed (damaged input, read or write error, the input changed): no
    /// output, the input kept.
    pub failed: u64,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// A stop request cut the run short: no output, the input kept.
    pub interrupted: bool,
    /// Uncompressed bytes whose blocks are in the partial output (earlier runs' included) when
    /// a stop cut the run short and its checkpoint was kept: the same command continues.
    pub resumable: Option<u64>,
    /// The input's size, in bytes (what `resumable` counts towards).
    pub size: u64,
    /// The run was verbose ([`Context::verbose`]): the command line then tells `detail`.
    #[serde(skip)]
    pub verbose: bool,
    /// The checkpoint could not be removed after the output was made (told on stderr): exit
    /// 1, as every resumable tool, though the output is whole.
    pub checkpoint_failed: bool,
    /// A sample of this process's failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    /// `items`: the file, once done (1) or not (0); `bytes`: [`Report::bytes`].
    fn summary(&self) -> Summary {
        Summary {
            items: u64::from(self.failed == 0 && !self.interrupted),
            bytes: self.bytes,
            failed: self.failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        let failed = self.failed + u64::from(self.checkpoint_failed);
        Status::of_work(failed, 0, self.interrupted)
    }
    /// Bytes of the input (uncompressed bytes when decompressing) whose blocks are written, when
    /// a stop left a checkpoint to continue from.
    fn stopped(&self) -> Option<Stopped> {
        self.resumable.map(|done| Stopped {
            done,
            total: self.size,
            what: "bytes",
        })
    }
}

/// Bytes of uncompressed data one rank holds in one wave of blocks (compression reads them,
/// decompression makes them), whatever the block size.
const WAVE_BYTES: u64 = 256 << 20;

/// Blocks per rank per wave: one per thread (of `threads`), at most [`WAVE_BYTES`] of
/// uncompressed data, at least one.
fn blocks_per_wave(block_size: u64, threads: usize) -> u64 {
    (threads as u64).min(WAVE_BYTES / block_size.max(1)).max(1)
}

/// What rank 0 found before anything is written, shared with every rank.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
enum Plan {
    /// Compress `size` bytes.
    Compress { size: u64 },
    /// Decompress a dbz2 file by its table (checked: the streams lie in block order).
    Blocks(dbz2::Footer),
    /// Decompress on rank 0, stream after stream as `bunzip2` does: a plain bzip2 file, or a
    /// dbz2 file whose table cannot be trusted; then the output must hold `expect` bytes (the
    /// footer's size).
    Serial { expect: Option<u64> },
}

/// The (device, inode) pairs the plan was made from: the work happens only if they still hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Planned {
    /// The directory of the input and the output (as its path led to it).
    dir: (u64, u64),
    /// The input file (its path followed, as the user named it).
    input: (u64, u64),
    /// The input's directory entry (not followed): what the removal after success removes.
    entry: (u64, u64),
    /// The input's size (bytes), modification and change times (s, ns): with `input`, what a
    /// checkpoint is trusted for.
    stamp: (u64, i64, i64, i64, i64),
}

/// Opens the input on one rank (given the rank and the path). [`run`] opens it for reading
/// through the context's [`flist::noatime::NoAtime`] (rank 0 counts it); tests
/// pass one that fails on some ranks only, or that changes the file after the plan was made.
type Opener<'a> = &'a (dyn Fn(usize, &[u8]) -> std::io::Result<File> + Sync);

/// Why a run stopped before making its output: a usage or setup error (nothing done; every
/// rank returns it), a failure already reported on rank 0 (no output, the input kept), or a
/// stop request with the checkpoint and the partial output kept (the uncompressed bytes done,
/// of the input's size).
enum Halt {
    Usage(Error),
    Failed,
    Stopped { done: u64, size: u64 },
}

/// Run `bz2` on this rank. Collective: every rank returns the same report, or the same error
/// when nothing was done (no such file, an input some rank cannot open, the output exists,
/// not a bzip2 file).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let noatime = &options.context.noatime;
    run_with(comm, options, &|rank, path| {
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
        let fd = noatime.open_part(rank == 0, flags, |f| flist::at::open_long(path, f))?;
        Ok(File::from(fd))
    })
}

/// [`run`] with the input opened by `open`.
fn run_with(comm: &dyn Comm, options: &Options, open: Opener) -> Result<Report, Error> {
    let started = Instant::now();
    let input = options.file.clone();
    let dest = if options.decompress {
        decompressed_name(&input)
    } else {
        [&input[..], b".bz2"].concat()
    };
    let mut report = Report {
        input: input.clone(),
        output: dest.clone(),
        decompress: options.decompress,
        verbose: options.context.verbose,
        ..Report::default()
    };
    let done = work(
        comm,
        options,
        &input,
        &dest,
        open,
        &mut report.checkpoint_failed,
    );
    let context = &options.context;
    match done {
        Ok((bytes, detail)) => {
            report.bytes = bytes;
            report.detail = detail;
        }
        Err(Halt::Usage(e)) => return Err(e),
        Err(Halt::Failed) => {
            report.failed = 1;
            report.interrupted = comm.any(context.stopped());
        }
        Err(Halt::Stopped { done, size }) => {
            report.interrupted = true;
            report.resumable = Some(done);
            report.size = size;
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    report.failures = context.failures();
    Ok(report)
}

/// The phases: plan (rank 0), open the input everywhere, open the checkpoint, create the
/// temporary output (or take over an interrupted run's), compress or decompress, check, then
/// rename and remove the input (rank 0). Returns the uncompressed bytes and how it was done, the
/// same on every rank. Collective.
fn work(
    comm: &dyn Comm,
    options: &Options,
    input: &[u8],
    dest: &[u8],
    open: Opener,
    checkpoint_failed: &mut bool,
) -> Result<(u64, String), Halt> {
    let context = &options.context;
    let stop = &*context.stop;
    let (plan, planned, meta) = plan(comm, options, input, dest)?;
    // The plan is made; the race tests change the tree here.
    crate::engine::test_seam::after_listing(comm);
    // Every rank reads the input: all must have it open before anything is created.
    let source = open_on_all_ranks(comm, context, input, planned.input, open)?;
    let block_size = options
        .stream_bytes
        .unwrap_or_else(|| dbz2::block_size_for_level(options.level));
    let (mut checkpoint, prior) =
        open_checkpoint(comm, options, &plan, &planned, dest, block_size)?;
    let record = match (&checkpoint, comm.rank(), prior.is_empty()) {
        (Some(c), 0, false) => resume::read_record(c),
        _ => None,
    };
    let (out, adopted) = match create_output(comm, context, dest, planned.dir, record.as_ref()) {
        Ok(made) => made,
        Err(halt) => {
            // The run fails anyway: a checkpoint not kept is told, the status is the halt's.
            if let Some(c) = checkpoint {
                c.finish_told(comm, context, Outcome::Failed);
            }
            return Err(halt);
        }
    };
    let prior = trusted(comm, context, &plan, prior, &out, adopted);
    if let Some(c) = &checkpoint {
        keep_track(comm, context, c, &out);
    }
    let input_name = display(input).into_owned();
    let output_name = display(dest).into_owned();
    let verb = if options.decompress {
        "Decompressed"
    } else {
        "Compressed"
    };
    let progress = context.progress(comm.rank(), verb);
    let mut done = 0u64;
    let size = match &plan {
        Plan::Compress { size } => *size,
        Plan::Blocks(footer) => footer.original_size,
        Plan::Serial { .. } => 0,
    };
    let result = match &plan {
        Plan::Compress { size } => {
            let files = (&source, &input_name[..], &out.file, &output_name[..]);
            let resume = (&prior, checkpoint.as_ref());
            compress_all(
                comm, options, files, *size, block_size, resume, &progress, &mut done,
            )
        }
        Plan::Blocks(footer) => {
            progress
                .total_bytes
                .store(footer.original_size, std::sync::atomic::Ordering::Relaxed);
            let job = decompress::Job {
                stop,
                input: &source,
                input_name: &input_name,
                output: &out.file,
                output_name: &output_name,
                footer: *footer,
                prior: &prior,
                checkpoint: checkpoint.as_ref(),
            };
            decompress::run(comm, &job, &progress, &mut done).and_then(|()| {
                if comm.rank() == 0 {
                    // Trailing empty blocks write nothing: the size comes from the footer.
                    out.file
                        .set_len(footer.original_size)
                        .map_err(|e| format!("truncate {output_name}: {e}"))?;
                }
                let detail = format!(
                    "{} blocks in parallel, {}",
                    footer.nblocks,
                    human_bytes(footer.original_size)
                );
                Ok((footer.original_size, detail))
            })
        }
        Plan::Serial { expect } => {
            if comm.rank() == 0 {
                let files = (&source, &input_name[..], &out.file, &output_name[..]);
                serial(context, files, *expect, stop)
            } else {
                Ok((0, String::new()))
            }
        }
    };
    // A signal on any rank stops every rank; what was made is not an output.
    let interrupted = comm.any(stop.load(std::sync::atomic::Ordering::SeqCst));
    if interrupted {
        if let Some(c) = checkpoint.take() {
            let so_far = (done, size);
            return Err(keep_for_next_run(
                comm,
                context,
                c,
                out,
                &result,
                &input_name,
                so_far,
            ));
        }
    }
    let result = if interrupted {
        Err(format!(
            "interrupted by a signal: {input_name} kept, no output (temporary removed)"
        ))
    } else {
        result
    };
    let synced = result.and_then(|done| {
        out.file
            .sync_all()
            .map(|()| done)
            .map_err(|e| format!("fsync {output_name}: {e}"))
    });
    // An input that changed under us gave an output of unknown content: it must not replace
    // the input (whatever else went wrong, this is the error to tell).
    let synced = match &meta {
        Some(before) => match unchanged(&source, before, &input_name, options.decompress) {
            Ok(()) => synced,
            Err(e) => Err(e),
        },
        None => synced,
    };
    // Rank 0 reports every rank's error, in rank order.
    let errors = comm.all_gather(&synced.as_ref().err().cloned());
    if errors.iter().any(Option::is_some) {
        if comm.rank() == 0 {
            tell_errors(context, &errors);
        }
        out.abandon();
        // The run went to its end (a failure): its partial output is gone, so is its record.
        if let Some(c) = checkpoint {
            c.finish_told(comm, context, Outcome::Complete);
        }
        return Err(Halt::Failed);
    }
    // The checkpoint goes right after the rename (see [`Checkpoint::stop_flushing`]).
    if let Some(c) = &checkpoint {
        c.stop_flushing();
    }
    // Rank 0 finishes and tells every rank how it went, with its counts (the only ones of a
    // serial decompression).
    let finished: Option<(u64, String)> = if let (0, Some(meta)) = (comm.rank(), meta) {
        drop(source);
        let (bytes, detail) = synced.unwrap_or_default();
        let done = finish(options, out, &meta, &planned, input, dest).then_some((bytes, detail));
        comm.bcast_from(0, &done)
    } else {
        drop(out);
        comm.bcast_from(0, &None)
    };
    // After the rename: a kill before it leaves the checkpoint and the partial output, which
    // the next run finishes.
    if let Some(c) = checkpoint {
        *checkpoint_failed = !c.finish_told(comm, context, Outcome::Complete);
    }
    finished.ok_or(Halt::Failed)
}

/// Compress `size` bytes (see [`compress::run`]) with the blocks of `prior` taken as written;
/// `done` gets how far it got. Returns the uncompressed bytes and how it was done.
#[allow(clippy::too_many_arguments)]
fn compress_all(
    comm: &dyn Comm,
    options: &Options,
    (input, input_name, output, output_name): Files<'_>,
    size: u64,
    block_size: u64,
    (prior, checkpoint): (&Prior, Option<&Checkpoint>),
    progress: &steal::progress::Progress,
    done: &mut u64,
) -> Result<(u64, String), String> {
    progress
        .total_bytes
        .store(size, std::sync::atomic::Ordering::Relaxed);
    let job = compress::Job {
        stop: &options.context.stop,
        input,
        input_name,
        output,
        output_name,
        size,
        block_size,
        level: options.level,
        prior,
        checkpoint,
    };
    let mut so_far = compress::Done::default();
    let footer = compress::run(comm, &job, progress, &mut so_far);
    *done = so_far.bytes;
    footer.map(|f| {
        let detail = format!(
            "{} blocks of {} bytes, {} -> {}",
            f.nblocks,
            f.block_size,
            human_bytes(f.original_size),
            human_bytes(f.table_offset + f.nblocks * dbz2::ENTRY_LEN + dbz2::FOOTER_LEN)
        );
        (f.original_size, detail)
    })
}

/// A stop with a checkpoint: the partial output and the checkpoint are kept for the next run
/// (the blocks written are marked, the output synced: see `engine::checkpoint`);
/// rank 0 tells the ranks' errors and what is kept. Collective. `(done, size)`: uncompressed
/// bytes done, of the input's.
fn keep_for_next_run(
    comm: &dyn Comm,
    context: &Context,
    c: Checkpoint,
    out: output::TempOutput,
    result: &Result<(u64, String), String>,
    input_name: &str,
    (done, size): (u64, u64),
) -> Halt {
    let errors = comm.all_gather(&result.as_ref().err().filter(|e| !e.is_empty()).cloned());
    if comm.rank() == 0 {
        tell_errors(context, &errors);
        // About the whole run: not in the report's sample of failed items.
        context.events.error(&format!(
            "stopped: {input_name} kept, no output yet; the partial output {} and the \
             checkpoint {} are kept for the next run",
            display(&out.temp),
            display(c.path())
        ));
    }
    out.keep();
    if !c.finish_told(comm, context, Outcome::Stopped) {
        return Halt::Failed;
    }
    Halt::Stopped { done, size }
}

/// Open the run's checkpoint (collective); rank 0 tells its notice. None when decompressing
/// without a dbz2 table (one serial stream: nothing to continue from).
fn open_checkpoint(
    comm: &dyn Comm,
    options: &Options,
    plan: &Plan,
    planned: &Planned,
    dest: &[u8],
    block_size: u64,
) -> Result<(Option<Checkpoint>, Prior), Halt> {
    if matches!(plan, Plan::Serial { .. }) {
        return Ok((None, Prior::default()));
    }
    let mut inputs = Inputs::new("bz2")
        .field("FILE", &serde_bytes::Bytes::new(&options.file))
        .field("-d", &options.decompress)
        .state("the input (device, inode, size, times)", &planned.stamp)
        .state("the input's place", &planned.input);
    if !options.decompress {
        inputs = inputs
            .field("-b", &options.level)
            .field("--stream-bytes", &block_size);
    }
    let opened = checkpoint::open(
        comm,
        &options.checkpoint,
        checkpoint::Plan {
            output: Some(dest),
            inputs,
        },
    )
    .map_err(|e| Halt::Usage(Error::new(e.to_string())))?;
    opened.tell(comm, &options.context);
    if let Some(c) = &opened.checkpoint {
        // Complete, the output is in place: a rerun would refuse it (or, -f, compress again).
        c.remove_on_completion();
    }
    Ok((opened.checkpoint, opened.prior))
}

/// The earlier runs' marks, when they can be trusted: the partial output they describe was
/// taken over and holds every block they name (a block past its end was not written into it).
/// Otherwise none (rank 0 says why and empties a partial output taken over). Collective.
fn trusted(
    comm: &dyn Comm,
    context: &Context,
    plan: &Plan,
    prior: Prior,
    out: &output::TempOutput,
    adopted: bool,
) -> Prior {
    if prior.is_empty() {
        return prior;
    }
    let ok = comm.bcast_with(0, || {
        let len = out.file.metadata().map_or(0, |m| m.len());
        let holds = adopted
            && prior.iter().all(|(key, payload)| match plan {
                Plan::Compress { .. } => {
                    resume::decode_entry(payload).is_some_and(|(at, n)| at.saturating_add(n) <= len)
                }
                Plan::Blocks(footer) => {
                    key < footer.nblocks
                        && (key * footer.block_size).saturating_add(footer.block_len(key)) <= len
                }
                Plan::Serial { .. } => false,
            });
        if !holds {
            if adopted {
                let _ = out.file.set_len(0);
            }
            context.info(format!(
                "the partial output the checkpoint recorded is {}; starting over\n",
                if adopted {
                    "not whole"
                } else {
                    "gone or not the file it was"
                }
            ));
        }
        holds
    });
    if ok {
        prior
    } else {
        Prior::default()
    }
}

/// Record the partial output in the checkpoint (rank 0, before any block is marked) and
/// register it with every rank's syncer (each rank marks only its own blocks). Collective. A record that cannot be written is
/// told: the next run then starts over.
fn keep_track(comm: &dyn Comm, context: &Context, c: &Checkpoint, out: &output::TempOutput) {
    if comm.rank() == 0 {
        // Its birth time with its (device, inode): a file made after it was removed may get
        // the same inode number (ext4 gives it out again at once).
        let stamp = flist::atomic::Stamp::of(rustix::fd::AsFd::as_fd(&out.file));
        let written = stamp.and_then(|s| resume::write_record(c, out.name(), &s));
        if let Err(e) = written {
            context.error(format!(
                "record the partial output in checkpoint {}: {e}",
                display(c.path())
            ));
        }
    }
    match out.file.try_clone() {
        Ok(f) => c.durable(checkpoint::Durable::File(std::sync::Arc::new(f.into()))),
        Err(e) => context.error(format!(
            "duplicate the handle on {}: {e}",
            display(&out.temp)
        )),
    }
    comm.barrier();
}

/// The temporary output beside `dest`, created by rank 0 in the directory `dir` (the input's),
/// its notes (other runs' temporaries removed) told. Collective.
fn create_output(
    comm: &dyn Comm,
    context: &Context,
    dest: &[u8],
    dir: (u64, u64),
    resume: Option<&(Vec<u8>, flist::atomic::Stamp)>,
) -> Result<(output::TempOutput, bool), Halt> {
    match output::create(comm, dest, dir, resume) {
        Ok((o, notes, adopted)) => {
            notes.iter().for_each(|n| context.error(n));
            Ok((o, adopted))
        }
        Err((status, e)) => {
            if status == Status::Usage {
                let e = if e.is_empty() {
                    "the setup failed on another rank".to_string()
                } else {
                    e
                };
                return Err(Halt::Usage(Error::new(e)));
            }
            if !e.is_empty() {
                context.error(e);
            }
            Err(Halt::Failed)
        }
    }
}

/// Phase 1: rank 0 checks everything and keeps the input's metadata; the others learn the
/// plan, or rank 0's message when it gave up. Collective.
fn plan(
    comm: &dyn Comm,
    options: &Options,
    input: &[u8],
    dest: &[u8],
) -> Result<(Plan, Planned, Option<std::fs::Metadata>), Halt> {
    let mut meta = None;
    let planned: Result<(Plan, Planned), (Status, String)> =
        comm.bcast_with(0, || match preflight(options, input, dest) {
            Ok((plan, planned, m, note)) => {
                meta = Some(m);
                if let Some(note) = note {
                    options.context.error(note);
                }
                Ok((plan, planned))
            }
            Err(failed) => Err(failed),
        });
    match planned {
        Ok((plan, planned)) => Ok((plan, planned, meta)),
        Err((status, message)) => {
            if status == Status::Usage {
                return Err(Halt::Usage(Error::new(message)));
            }
            if comm.rank() == 0 {
                options.context.error(message);
            }
            Err(Halt::Failed)
        }
    }
}

/// Every rank opens the input with `open` and checks that it is the file `id` rank 0 planned
/// from. Collective: `Err` on every rank if any rank could not (rank 0 then reports each
/// failing rank's reason), before anything was created: a usage error when it cannot be
/// opened, a failure when the path now leads to another file.
fn open_on_all_ranks(
    comm: &dyn Comm,
    context: &Context,
    input: &[u8],
    id: (u64, u64),
    open: Opener,
) -> Result<File, Halt> {
    use std::os::unix::fs::MetadataExt;
    let on_rank = match comm.size() {
        1 => String::new(),
        _ => format!(" on rank {}", comm.rank()),
    };
    let mut status = Status::Ok;
    let mine = open(comm.rank(), input)
        .map_err(|e| {
            status = Status::Usage;
            format!("open {}{on_rank}: {e}", display(input))
        })
        .and_then(|f| match f.metadata() {
            Ok(m) if (m.dev(), m.ino()) == id => Ok(f),
            _ => {
                status = Status::ItemsFailed;
                Err(format!(
                    "{}{on_rank} is not the file it was when the work was planned (replaced, or \
                     a symbolic link swapped in on its path): nothing done",
                    display(input)
                ))
            }
        });
    let errors = comm.all_gather(&mine.as_ref().err().cloned());
    if errors.iter().all(Option::is_none) {
        return mine.map_err(|_| Halt::Failed);
    }
    let status = status.agree(comm);
    let mut distinct = distinct_messages(&errors);
    if status == Status::Usage {
        // The last message is the error every rank returns; rank 0 reports the others first,
        // so that the command line shows them all, in rank order.
        let last = distinct.pop().unwrap_or_default();
        if comm.rank() == 0 {
            distinct.iter().for_each(|e| context.error(e));
        }
        return Err(Halt::Usage(Error::new(last)));
    }
    if comm.rank() == 0 {
        tell_errors(context, &errors);
    }
    Err(Halt::Failed)
}

/// The ranks' messages (`None`: no error) in rank order, each distinct one once.
fn distinct_messages(errors: &[Option<String>]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for e in errors.iter().flatten() {
        if !seen.contains(e) {
            seen.push(e.clone());
        }
    }
    seen
}

/// Rank 0 reports the ranks' messages (`None`: no error) in rank order, each distinct one once.
fn tell_errors(context: &Context, errors: &[Option<String>]) {
    distinct_messages(errors)
        .into_iter()
        .for_each(|e| context.error(e));
}

/// Rank 0, after the output is synced: the open input is still the file rank 0 planned from,
/// with the same size, modification and change times (to the nanosecond). Otherwise the input
/// grew, shrank or was rewritten while being read: the output may miss bytes or mix old and
/// new data, so there is none and the input stays.
fn unchanged(
    source: &File,
    before: &std::fs::Metadata,
    input_name: &str,
    decompressing: bool,
) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let now = source
        .metadata()
        .map_err(|e| format!("stat {input_name}: {e}"))?;
    let key = |m: &std::fs::Metadata| {
        (
            (m.dev(), m.ino(), m.size()),
            (m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()),
        )
    };
    if key(&now) == key(before) {
        return Ok(());
    }
    let verb = if decompressing {
        "decompressed"
    } else {
        "compressed"
    };
    Err(format!(
        "{input_name} changed while being {verb}; kept, no output"
    ))
}

/// Rank 0, after every rank wrote and synced: metadata and rename (the directory synced), then
/// the input goes. False (reported) when a step failed.
fn finish(
    options: &Options,
    mut out: output::TempOutput,
    meta: &std::fs::Metadata,
    planned: &Planned,
    input: &[u8],
    dest: &[u8],
) -> bool {
    if let Err(e) = out.finish(meta, dest, options.force) {
        options.context.error(e);
        out.abandon();
        return false;
    }
    if !options.keep {
        if let Err(e) = out.remove_input(input, planned.entry) {
            options.context.error(e);
            return false;
        }
    }
    true
}

/// Rank 0's checks, in bzip2's order; nothing is written. Returns the plan and the input's
/// metadata, or the exit status and message.
/// What [`preflight`] found: the plan, the identities it was made from, the input's metadata,
/// and a note for stderr (a dbz2 table that is not used).
type Preflight = (Plan, Planned, std::fs::Metadata, Option<String>);

fn preflight(options: &Options, input: &[u8], dest: &[u8]) -> Result<Preflight, (Status, String)> {
    use std::os::unix::fs::MetadataExt;
    let usage = |m: String| (Status::Usage, m);
    let path = flist::path::as_path(input);
    let meta =
        std::fs::metadata(path).map_err(|e| usage(format!("stat {}: {e}", display(input))))?;
    let entry = std::fs::symlink_metadata(path)
        .map_err(|e| usage(format!("stat {}: {e}", display(input))))?;
    let dir_path = flist::atomic::split(dest).0;
    let dir = std::fs::metadata(flist::path::as_path(&dir_path))
        .map_err(|e| usage(format!("stat {}: {e}", display(&dir_path))))?;
    let planned = Planned {
        dir: (dir.dev(), dir.ino()),
        input: (meta.dev(), meta.ino()),
        entry: (entry.dev(), entry.ino()),
        stamp: (
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        ),
    };
    if !meta.is_file() {
        return Err(usage(format!("{} is not a regular file", display(input))));
    }
    if !options.decompress {
        if let Some(ext) = [".bz2", ".bz", ".tbz2", ".tbz", ".dbz2"]
            .iter()
            .find(|e| input.ends_with(e.as_bytes()))
        {
            return Err(usage(format!(
                "{} already has the {ext} suffix; not compressed",
                display(input)
            )));
        }
    }
    match std::fs::symlink_metadata(flist::path::as_path(dest)) {
        Ok(m) if m.is_dir() => {
            return Err(usage(format!(
                "output {} exists and is a directory",
                display(dest)
            )))
        }
        Ok(_) if !options.force => {
            return Err(usage(format!(
                "output {} exists; use -f to overwrite it",
                display(dest)
            )))
        }
        _ => {}
    }
    if !options.decompress {
        return Ok((Plan::Compress { size: meta.len() }, planned, meta, None));
    }
    // Only the footer is read here; the input is counted where every rank opens it.
    let mut file = options
        .context
        .noatime
        .open_part(
            false,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            |f| flist::at::open_long(input, f),
        )
        .map(File::from)
        .map_err(|e| {
            usage(format!(
                "open {}: {}",
                display(input),
                std::io::Error::from(e)
            ))
        })?;
    let size = meta.len();
    if size >= dbz2::FOOTER_LEN {
        let mut tail = [0u8; dbz2::FOOTER_LEN as usize];
        file.read_exact_at(&mut tail, size - dbz2::FOOTER_LEN)
            .map_err(|e| (Status::ItemsFailed, format!("read {}: {e}", display(input))))?;
        match dbz2::Footer::decode(&tail, size) {
            Ok(footer) => {
                let mut read = |at: u64, buf: &mut [u8]| file.read_exact_at(buf, at);
                return match dbz2::check_table(&footer, &mut read) {
                    Ok(Ok(())) => Ok((Plan::Blocks(footer), planned, meta, None)),
                    Ok(Err(why)) => Ok((
                        Plan::Serial {
                            expect: Some(footer.original_size),
                        },
                        planned,
                        meta,
                        Some(format!(
                            "{}: the dbz2 block table does not match the streams ({why}); \
                             decoding the streams one after another instead, as bunzip2 does",
                            display(input)
                        )),
                    )),
                    Err(e) => Err((
                        Status::ItemsFailed,
                        format!("read {} table: {e}", display(input)),
                    )),
                };
            }
            Err(dbz2::FooterError::Damaged(why)) => {
                return Err((
                    Status::ItemsFailed,
                    format!("{}: damaged dbz2 footer: {why}", display(input)),
                ))
            }
            Err(dbz2::FooterError::NotDbz2) => {}
        }
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| usage(format!("seek {}: {e}", display(input))))?;
    let mut head = [0u8; 3];
    let head_len = file.read(&mut head).unwrap_or(0);
    if head_len < 3 || &head != b"BZh" {
        return Err(usage(format!("{} is not a bzip2 file", display(input))));
    }
    Ok((Plan::Serial { expect: None }, planned, meta, None))
}

/// bzip2's names: `x.bz2`, `x.bz`, `x.dbz2` -> `x`; `x.tbz2`, `x.tbz` -> `x.tar`; else `x.out`.
pub fn decompressed_name(input: &[u8]) -> Vec<u8> {
    for (ext, repl) in [
        (&b".bz2"[..], &b""[..]),
        (b".dbz2", b""),
        (b".bz", b""),
        (b".tbz2", b".tar"),
        (b".tbz", b".tar"),
    ] {
        let base = flist::path::basename(input);
        if base.len() > ext.len() && input.ends_with(ext) {
            let mut out = input[..input.len() - ext.len()].to_vec();
            out.extend_from_slice(repl);
            return out;
        }
    }
    let mut out = input.to_vec();
    out.extend_from_slice(b".out");
    out
}

/// The input and the output, open, with their names for messages.
type Files<'a> = (&'a File, &'a str, &'a File, &'a str);

/// Rank 0 alone: every concatenated stream of a bzip2 file, in order; with `expect`, a dbz2
/// file whose table is not used, whose output must have the footer's size. Stops early when
/// `stop` is set (the caller reports the interruption). Returns the bytes written and how.
fn serial(
    context: &Context,
    (source, input, out, output): Files<'_>,
    expect: Option<u64>,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(u64, String), String> {
    let reader = BufReader::with_capacity(1 << 20, source);
    let mut writer = BufWriter::with_capacity(1 << 20, out);
    let report = match bzip2::decode_all(reader, &mut writer, stop) {
        Ok(r) => r,
        Err(bzip2::SerialError::NotBzip2) => return Err(format!("{input} is not a bzip2 file")),
        Err(bzip2::SerialError::Failed { at, message }) => {
            return Err(format!("{input}: {message} (after {at} bytes of output)"))
        }
    };
    use std::io::Write;
    writer.flush().map_err(|e| format!("write {output}: {e}"))?;
    if let Some(expect) = expect {
        if report.bytes != expect {
            return Err(format!(
                "{input}: its streams hold {} bytes, its dbz2 footer says {expect}",
                report.bytes
            ));
        }
    } else if report.trailing_garbage {
        context.error(format!("{input}: trailing garbage after EOF ignored"));
    }
    let detail = format!(
        "{} stream(s) on rank 0 (no dbz2 table), {}",
        report.streams,
        human_bytes(report.bytes)
    );
    Ok((report.bytes, detail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::bz2::{Bz2, Bz2Args};
    use crate::cli::tool::CliTool;
    use crate::engine::codec::dbz2::Footer;
    use crate::engine::select::Rules;
    use crate::engine::test_rng::Rng;
    use clap::Parser;
    use std::io::Write;
    use std::path::Path;
    use std::time::Duration;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Bz2Args,
    }

    /// The options of `mfu-rs bz2 -q WORDS FILE`.
    fn args(words: &[&str], file: &Path) -> Options {
        let mut argv = vec!["bz2", "-q"];
        argv.extend(words);
        argv.push(file.to_str().unwrap());
        let args = Cli::parse_from(argv).args;
        Bz2::options(&args, Rules::default(), Context::default())
    }

    /// [`run_with`] on `ranks` local ranks, with a deadline: ranks stuck in collectives that the
    /// others never call fail the test instead of hanging it.
    fn run_ranks(
        ranks: usize,
        args: Options,
        open: impl Fn(usize, &[u8]) -> std::io::Result<File> + Send + Sync + 'static,
    ) -> Vec<Status> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(steal::local::run(ranks, |comm| {
                // An error (nothing done) is exit status 2, as on the command line.
                run_with(comm, &args, &open).map_or(Status::Usage, |r| r.status())
            }));
        });
        rx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{ranks} ranks out of step: no result after 60 s"))
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn an_input_one_rank_cannot_open_stops_every_rank_alike() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, data(120_000)).unwrap();
        for (ranks, failing) in [(2, 1), (2, 0), (3, 2), (4, 1)] {
            let open = move |rank: usize, path: &[u8]| {
                if rank == failing {
                    return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
                }
                File::open(flist::path::as_path(path))
            };
            for words in [&["-z", "--stream-bytes", "10000"][..], &["-z"]] {
                let statuses = run_ranks(ranks, args(words, &file), open);
                assert_eq!(
                    statuses,
                    vec![Status::Usage; ranks],
                    "{ranks} ranks, rank {failing} fails"
                );
                assert_eq!(
                    names(dir.path()),
                    ["f"],
                    "input kept, no output, no temporary"
                );
            }
        }
    }

    #[test]
    fn an_input_that_changes_while_compressed_is_kept_without_output() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        let content = data(120_000);
        let later = std::time::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
        // The opener is the seam: rank 0 changes the input after the plan, before reading it.
        type Change = fn(&Path);
        let grow: Change = |p| {
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(b"appended while compressing").unwrap();
        };
        let rewrite: Change = |p| {
            let mut bytes = std::fs::read(p).unwrap();
            bytes[5] ^= 1;
            std::fs::write(p, &bytes).unwrap();
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_600_000_000))
                .unwrap();
        };
        let shrink: Change = |p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(1000).unwrap();
        };
        for (what, change) in [("grow", grow), ("rewrite", rewrite), ("shrink", shrink)] {
            for ranks in [1, 2] {
                std::fs::write(&file, &content).unwrap();
                let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
                f.set_modified(later - Duration::from_secs(1000)).unwrap();
                drop(f);
                let open = move |rank: usize, path: &[u8]| {
                    if rank == 0 {
                        change(flist::path::as_path(path));
                    }
                    File::open(flist::path::as_path(path))
                };
                let statuses =
                    run_ranks(ranks, args(&["-z", "--stream-bytes", "10000"], &file), open);
                assert_eq!(
                    statuses,
                    vec![Status::ItemsFailed; ranks],
                    "{what}, {ranks} ranks"
                );
                assert_eq!(names(dir.path()), ["f"], "{what}: input kept, no output");
            }
        }
        // What rank 0 says.
        std::fs::write(&file, &content).unwrap();
        let before = std::fs::metadata(&file).unwrap();
        let source = File::open(&file).unwrap();
        assert_eq!(unchanged(&source, &before, "/d/f", false), Ok(()));
        grow(&file);
        assert_eq!(
            unchanged(&source, &before, "/d/f", false),
            Err("/d/f changed while being compressed; kept, no output".to_string())
        );
    }

    /// One mutation of a dbz2 file: bit flips anywhere or in the table and footer, truncations,
    /// table entries swapped, duplicated, shifted or out of range, footer fields changed.
    /// `table` and `n` are the unmutated file's (where its table lies, and its entries).
    fn mutate(z: &mut Vec<u8>, table: usize, n: usize, rng: &mut Rng) -> String {
        let word = |z: &[u8], at: usize| u64::from_be_bytes(z[at..at + 8].try_into().unwrap());
        let len = z.len();
        let entry = |i: usize| table + 16 * i;
        if len < table + 16 * n + 48 {
            // Cut already: flips and cuts only.
            let at = rng.below(len.max(1));
            if len > 0 && rng.below(2) == 0 {
                z[at] ^= 1 << rng.below(8);
                return format!("flip a bit of byte {at}");
            }
            z.truncate(at);
            return format!("truncate at {at}");
        }
        match rng.below(8) {
            0 => {
                let at = rng.below(len);
                let bit = rng.below(8);
                z[at] ^= 1 << bit;
                format!("flip bit {bit} of byte {at}")
            }
            1 => {
                let at = table + rng.below(len - table);
                let bit = rng.below(8);
                z[at] ^= 1 << bit;
                format!("flip bit {bit} of table/footer byte {at}")
            }
            2 => {
                let at = rng.below(len);
                z.truncate(at);
                format!("truncate at {at}")
            }
            3 => {
                let (a, b) = (rng.below(n), rng.below(n));
                for k in 0..16 {
                    z.swap(entry(a) + k, entry(b) + k);
                }
                format!("swap entries {a} and {b}")
            }
            4 => {
                let (a, b) = (rng.below(n), rng.below(n));
                let copy = z[entry(a)..entry(a) + 16].to_vec();
                z[entry(b)..entry(b) + 16].copy_from_slice(&copy);
                format!("entry {b} := entry {a}")
            }
            5 => {
                let i = rng.below(n);
                let field = entry(i) + 8 * rng.below(2);
                let v = match rng.below(3) {
                    0 => rng.next(),
                    1 => word(z, field).wrapping_add(1 + rng.below(100) as u64),
                    _ => word(z, field).wrapping_sub(1 + rng.below(100) as u64),
                };
                z[field..field + 8].copy_from_slice(&v.to_be_bytes());
                format!("entry {i} field at {field} := {v}")
            }
            6 => {
                // Shift a boundary: entry i ends later, entry i+1 starts later (still
                // contiguous, streams cut in the wrong place).
                let i = rng.below(n.saturating_sub(1));
                let d = 1 + rng.below(50) as u64;
                let l = word(z, entry(i) + 8) + d;
                let o = word(z, entry(i + 1)) + d;
                let l1 = word(z, entry(i + 1) + 8).wrapping_sub(d);
                z[entry(i) + 8..entry(i) + 16].copy_from_slice(&l.to_be_bytes());
                z[entry(i + 1)..entry(i + 1) + 8].copy_from_slice(&o.to_be_bytes());
                z[entry(i + 1) + 8..entry(i + 1) + 16].copy_from_slice(&l1.to_be_bytes());
                format!("boundary after entry {i} shifted by {d}")
            }
            _ => {
                let field = len - 48 + 8 * rng.below(4);
                let v = match rng.below(3) {
                    0 => rng.next() >> rng.below(64),
                    1 => word(z, field).wrapping_add(1 + rng.below(3) as u64),
                    _ => word(z, field).wrapping_sub(1 + rng.below(3) as u64),
                };
                z[field..field + 8].copy_from_slice(&v.to_be_bytes());
                format!("footer field at {field} := {v}")
            }
        }
    }

    /// The net for the dbz2 reader: seeded mutations of a small dbz2 file, each decompressed
    /// (`-d`, input removed on success) at 1 or 2 ranks within a deadline. A panic, a hang, an
    /// output that differs from the original with status 0, or an input removed after a failure
    /// fails the test, with the seed and the mutations to replay it. `MFU_FUZZ_SEED` and
    /// `MFU_FUZZ_SECONDS` pick another seed or budget.
    #[test]
    fn fuzz_the_dbz2_reader() {
        let seed: u64 = std::env::var("MFU_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed_0b22);
        let budget = std::env::var("MFU_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(Duration::from_secs(3), Duration::from_secs_f64);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        let original = data(7_000);
        std::fs::write(&file, &original).unwrap();
        let statuses = run_ranks(
            1,
            args(&["-z", "-b", "1", "--stream-bytes", "1000"], &file),
            |_, p| File::open(flist::path::as_path(p)),
        );
        assert_eq!(statuses, [Status::Ok]);
        let packed = dir.path().join("f.bz2");
        let good = std::fs::read(&packed).unwrap();
        let block = 1000;
        let word = |at: usize| u64::from_be_bytes(good[at..at + 8].try_into().unwrap()) as usize;
        let (table, nblocks) = (word(good.len() - 48), word(good.len() - 40));
        assert_eq!(nblocks, 7);
        let mut rng = Rng::seeded(seed | 1);
        let started = Instant::now();
        let (mut runs, mut ok, mut fallback_ok) = (0u64, 0u64, 0u64);
        // At least MIN_RUNS runs whatever the machine's load (a busy CI runner must not fail
        // the budget), then as many as the budget allows.
        const MIN_RUNS: u64 = 60;
        while runs < MIN_RUNS || started.elapsed() < budget {
            let mut z = good.clone();
            let mutations: Vec<String> = (0..1 + rng.below(2))
                .map(|_| mutate(&mut z, table, nblocks, &mut rng))
                .collect();
            let ranks = 1 + rng.below(2);
            let context = format!(
                "seed {seed} (MFU_FUZZ_SEED), run {runs}, {ranks} rank(s), mutations {mutations:?}"
            );
            std::fs::write(&packed, &z).unwrap();
            let _ = std::fs::remove_file(&file);
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_ranks(ranks, args(&["-d"], &packed), |_, p| {
                    File::open(flist::path::as_path(p))
                })
            }));
            let statuses = result.unwrap_or_else(|_| panic!("panic: {context}"));
            let footer_intact = z.len() >= 48
                && z[z.len() - 48..] == good[good.len() - 48..]
                && z.len() == good.len();
            if statuses[0] == Status::Ok {
                ok += 1;
                let out =
                    std::fs::read(&file).unwrap_or_else(|e| panic!("no output: {e}: {context}"));
                let whole = out == original;
                // Without a dbz2 footer the file is plain concatenated bzip2 to every reader:
                // a cut at a stream boundary decodes to whole blocks, as with bunzip2.
                let prefix = !footer_intact
                    && out.len() % block == 0
                    && original.starts_with(&out)
                    && Footer::decode(&z[z.len().saturating_sub(48)..], z.len() as u64).is_err();
                assert!(whole || prefix, "wrong output with status 0: {context}");
                fallback_ok += u64::from(whole && z != good);
                assert!(!packed.exists(), "input kept after success: {context}");
            } else {
                assert_eq!(
                    std::fs::read(&packed).ok().as_deref(),
                    Some(&z[..]),
                    "input changed or removed after a failure: {context}"
                );
                assert!(!file.exists(), "an output after a failure: {context}");
            }
            assert_eq!(
                names(dir.path()).len(),
                1,
                "a temporary file left: {:?}: {context}",
                names(dir.path())
            );
            runs += 1;
        }
        assert!(
            runs >= MIN_RUNS,
            "seed {seed}: too few runs ({runs} in {:.1} s, {ok} decoded, {fallback_ok} of them \
             whole) to mean anything",
            started.elapsed().as_secs_f64()
        );
    }

    #[test]
    fn names_follow_bzip2() {
        assert_eq!(decompressed_name(b"/a/x.bz2"), b"/a/x");
        assert_eq!(decompressed_name(b"x.dbz2"), b"x");
        assert_eq!(decompressed_name(b"x.tbz2"), b"x.tar");
        assert_eq!(decompressed_name(b"x.tbz"), b"x.tar");
        assert_eq!(decompressed_name(b"/a/.bz2"), b"/a/.bz2.out");
        assert_eq!(decompressed_name(b"x.gz"), b"x.gz.out");
    }

    #[test]
    fn plan_travels() {
        let planned = Planned {
            dir: (1, 2),
            input: (3, 4),
            entry: (5, 6),
            stamp: (7, 8, 9, 10, 11),
        };
        for plan in [
            Plan::Compress { size: 7 },
            Plan::Serial { expect: None },
            Plan::Serial { expect: Some(9) },
            Plan::Blocks(dbz2::Footer {
                table_offset: 1,
                nblocks: 2,
                block_size: 3,
                original_size: 4,
            }),
        ] {
            let sent: Result<_, (Status, String)> = Ok((plan, planned));
            let bytes = steal::typed::encode(&sent);
            assert_eq!(steal::decode(&bytes).ok(), Some(sent));
            for n in 0..bytes.len() {
                assert!(
                    steal::decode::<Result<(Plan, Planned), (Status, String)>>(&bytes[..n])
                        .is_err()
                );
            }
        }
        for status in [Status::Usage, Status::ItemsFailed] {
            let sent: Result<(Plan, Planned), _> = Err((status, "stat x|y: gone".to_string()));
            assert_eq!(steal::decode(&steal::typed::encode(&sent)).ok(), Some(sent));
        }
    }

    #[test]
    fn waves_hold_at_most_256_mib_of_data() {
        assert_eq!(blocks_per_wave(dbz2::MAX_BLOCK, 64), 1);
        assert_eq!(blocks_per_wave(9_900_000, 64), 27);
        assert_eq!(blocks_per_wave(9_900_000, 4), 4);
        assert_eq!(blocks_per_wave(50_000, 8), 8);
        assert_eq!(blocks_per_wave(1, 0), 1);
    }
}
