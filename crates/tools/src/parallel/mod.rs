//! `mfu-rs parallel` (dparallel): run shell commands over all ranks with work stealing, as GNU
//! parallel runs them over cores: commands one per line (from a file or stdin), or one
//! template (`{}`, `{/}`, `{.}`, `{//}`, `{/.}`) applied to every entry of a list.
//!
//! The phases, each collective:
//! 1. jobs: rank 0 reads the command lines and deals them out in blocks, or each rank expands
//!    the template over its part of the list; a job's number is its place in the input;
//! 2. `--resume`: rank 0 reads the joblog, every rank drops the commands it records;
//! 3. run: the work queue hands jobs to this rank's `jobs` runner threads (idle ranks steal
//!    queued jobs); each runs `/bin/sh -c` with its output captured, and appends its joblog
//!    line as it ends;
//! 4. output: each job's standard output then standard error, whole. When every rank is a
//!    thread of this process and the order is free, a job's output is written as it ends;
//!    otherwise (several processes, whose output the launcher would cut and mix, or
//!    `keep_order`) rank 0 writes all of it at the end, in input order with `keep_order`.

mod job;
pub mod joblog;
pub mod template;

pub use job::{Done, Job};

use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::status::Status;
use std::collections::HashSet;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use steal::queue::{self, Config};
use steal::wire::Reader;
use steal::{Comm, CommExt};

/// Where each command's standard error goes (the command line: this process's stderr).
pub type StderrSink = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// Which commands a `--resume` skips.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Resume {
    /// None: every command runs, the joblog starts anew.
    #[default]
    No,
    /// Those the joblog records, whatever their exit status (GNU parallel's `--resume`).
    Finished,
    /// Those the joblog records as exited 0 (`--resume-failed`: failed ones run again).
    Succeeded,
}

/// What `parallel` runs and how.
#[derive(Clone, Default)]
pub struct Options {
    /// The command template, one word per element, joined by spaces. Empty: the commands are
    /// the lines of `commands`.
    pub template: Vec<Vec<u8>>,
    /// With a template: the list whose entries fill it (any list format; `-`: stdin).
    pub input: Option<Vec<u8>>,
    /// How the lines of a text `input` list are read (`--input-format`): typed only when the
    /// list says so (its header) or this does.
    pub input_format: flist::io::InputFormat,
    /// Without a template: the file of commands, one per line (`None` or `-`: stdin). Empty
    /// lines are skipped.
    pub commands: Option<Vec<u8>>,
    /// Commands running at once on each rank; 0: the cores shared by this process's ranks
    /// when no launcher started it, 1 under a launcher (one rank per core).
    pub jobs: usize,
    /// Write the outputs in input order (at the end of the run).
    pub keep_order: bool,
    /// Append a line per finished command to this file (GNU parallel's joblog).
    pub joblog: Option<Vec<u8>>,
    /// Skip what the joblog records (needs `joblog`).
    pub resume: Resume,
    /// Where commands' standard error goes; `None`: dropped.
    pub stderr: Option<StderrSink>,
    /// Events (a command's standard output is [`Context::output`]), and the stop flag: once
    /// set, no more commands start, the running ones are waited for.
    pub context: Context,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("template", &self.template)
            .field("input", &self.input)
            .field("input_format", &self.input_format)
            .field("commands", &self.commands)
            .field("jobs", &self.jobs)
            .field("keep_order", &self.keep_order)
            .field("joblog", &self.joblog)
            .field("resume", &self.resume)
            .finish_non_exhaustive()
    }
}

/// What a `parallel` run did; counts over all ranks, the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Commands in the input.
    pub commands: u64,
    /// Commands skipped because the joblog records them (`--resume`).
    pub skipped: u64,
    /// Commands that ran (or were tried).
    pub ran: u64,
    /// Commands that exited non-zero, were killed or could not start (each reported).
    pub failed: u64,
    /// Commands not started because of a stop request.
    pub not_started: u64,
    /// Bytes of output the commands wrote (standard output and error).
    pub output_bytes: u64,
    /// Joblog lines that could not be written (reported).
    pub joblog_failed: u64,
    /// A stop request cut the run short.
    pub interrupted: bool,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// This process's sample of failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.ran,
            bytes: self.output_bytes,
            failed: self.failed + self.joblog_failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(self.failed + self.joblog_failed, 0, self.interrupted)
    }
}

/// Run `parallel` on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let context = &options.context;
    let mut report = Report::default();

    // 1. The jobs of this rank.
    let jobs = agree(comm, jobs(comm, options))?;
    report.commands = comm.sum(jobs.len() as u64);

    // 2. What a resume skips; the joblog ready.
    let jobs = agree(comm, resumed(comm, options, jobs))?;
    report.skipped = report.commands - comm.sum(jobs.len() as u64);
    if let Some(log) = &options.joblog {
        let created = if comm.rank() == 0 {
            joblog::create(log, options.resume != Resume::No)
                .map_err(|e| format!("create joblog {}: {e}", flist::path::display(log)))
        } else {
            Ok(())
        };
        agree(comm, created)?;
    }
    let log = match &options.joblog {
        Some(path) => Some(Mutex::new(agree(
            comm,
            joblog::open(path)
                .map_err(|e| format!("open joblog {}: {e}", flist::path::display(path))),
        )?)),
        None => None,
    };

    // 3. Run: the queue hands jobs to the runners one at a time, and only when one is free,
    // so that queued jobs stay stealable by idle ranks.
    let stream = !options.keep_order && (comm.size() == 1 || !steal::launch::launched());
    let kept: Mutex<Vec<Done>> = Mutex::new(Vec::new());
    let counts = Mutex::new(Counts::default());
    let finish = |done: Done| {
        let received = (done.stdout.len() + done.stderr.len()) as u64;
        if let Some(log) = &log {
            let line = joblog::Line {
                seq: done.job.seq,
                start: done.start,
                runtime: done.runtime,
                received,
                exitval: done.exitval,
                signal: done.signal,
                command: &done.job.command,
            };
            if let Err(e) = crate::engine::locks::lock(log).write_all(&line.bytes()) {
                context.error(format!(
                    "write joblog {}: {e}",
                    flist::path::display(options.joblog.as_deref().unwrap_or_default())
                ));
                crate::engine::locks::lock(&counts).joblog_failed += 1;
            }
        }
        {
            let mut c = crate::engine::locks::lock(&counts);
            c.ran += 1;
            c.output_bytes += received;
            if !done.succeeded() {
                c.failed += 1;
            }
        }
        if !done.succeeded() {
            context.error(format!(
                "command {}: {}",
                flist::path::display(&done.job.command),
                done.failure()
            ));
        }
        if stream {
            emit(options, &done);
        } else {
            crate::engine::locks::lock(&kept).push(done);
        }
    };
    let outcome = {
        let (handoff, receiver) = mpsc::sync_channel::<Job>(0);
        let receiver = Mutex::new(receiver);
        std::thread::scope(|s| {
            for _ in 0..runners(comm, options.jobs) {
                let (receiver, finish, counts) = (&receiver, &finish, &counts);
                s.spawn(move || loop {
                    // The lock is held only while waiting for the next job.
                    let next = crate::engine::locks::lock(receiver).recv();
                    match next {
                        // A job handed over just before a stop does not start either.
                        Ok(_) if context.stopped() => {
                            crate::engine::locks::lock(counts).not_started += 1
                        }
                        Ok(job) => finish(job::run(job)),
                        Err(_) => break,
                    }
                });
            }
            let config = Config {
                max_batch: 1,
                max_inflight: 1,
                seed: 0x9a4,
                stop: Some(&context.stop),
                progress: None,
            };
            let outcome = queue::run(comm, &config, jobs, |job: Job, _| {
                // Every runner gone means a runner panicked: the scope re-raises it.
                let _ = handoff.send(job);
            });
            drop(handoff);
            outcome
        })
    };
    let counts = counts.into_inner().unwrap_or_else(|p| p.into_inner());
    report.ran = comm.sum(counts.ran);
    report.failed = comm.sum(counts.failed);
    report.output_bytes = comm.sum(counts.output_bytes);
    report.joblog_failed = comm.sum(counts.joblog_failed);
    report.not_started = outcome.dropped + comm.sum(counts.not_started);
    report.interrupted = outcome.interrupted;

    // 4. Output kept for rank 0.
    if !stream {
        let mut kept = kept.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut bytes = Vec::new();
        for d in kept.drain(..) {
            d.encode(&mut bytes);
        }
        let mut all = Vec::new();
        steal::ordered::in_rank_order(comm, bytes, |part| {
            let mut r = Reader::new(part);
            while !r.is_empty() {
                all.push(Done::decode(&mut r));
            }
        });
        if options.keep_order {
            all.sort_by_key(|d| d.job.seq);
        }
        for d in &all {
            emit(options, d);
        }
    }
    if report.interrupted && comm.rank() == 0 {
        context.error(format!(
            "interrupted by a signal: {} commands not started; the {} that had started finished",
            report.not_started, report.ran
        ));
    }
    report.seconds = started.elapsed().as_secs_f64();
    if comm.rank() == 0 && context.verbose {
        context.info(format!(
            "Ran {} of {} commands ({} skipped by --resume, {} failed) in {:.3} s\n",
            report.ran, report.commands, report.skipped, report.failed, report.seconds
        ));
    }
    report.failures = context.failures();
    Ok(report)
}

/// Runner threads on this rank for `jobs` (see [`Options::jobs`]).
fn runners(comm: &dyn Comm, jobs: usize) -> usize {
    if jobs > 0 {
        return jobs;
    }
    if steal::launch::launched() && comm.size() > 1 {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / comm.size()).max(1)
}

/// This rank's counts.
#[derive(Default)]
struct Counts {
    ran: u64,
    failed: u64,
    output_bytes: u64,
    joblog_failed: u64,
    not_started: u64,
}

/// Write one job's output, whole: its standard output, then its standard error. One lock for
/// both, so that no other job's output comes between.
fn emit(options: &Options, done: &Done) {
    static WRITING: Mutex<()> = Mutex::new(());
    let _whole = crate::engine::locks::lock(&WRITING);
    if !done.stdout.is_empty() {
        options.context.output(&done.stdout);
    }
    if let (Some(sink), false) = (&options.stderr, done.stderr.is_empty()) {
        sink(&done.stderr);
    }
}

/// `Ok` on every rank, or the first rank's error on every rank. Collective.
fn agree<T>(comm: &dyn Comm, result: Result<T, String>) -> Result<T, Error> {
    let mut message = match &result {
        Ok(_) => Vec::new(),
        Err(e) => e.clone().into_bytes(),
    };
    let failed = comm.allgather_u64(u64::from(result.is_err()));
    let Some(first) = failed.iter().position(|&f| f != 0) else {
        return result.map_err(Error::new);
    };
    comm.bcast(first, &mut message);
    match result {
        Err(e) => Err(Error::new(e)),
        Ok(_) => Err(Error::new(String::from_utf8_lossy(&message))),
    }
}

/// This rank's jobs: the template over its part of the list, or its block of the command
/// lines rank 0 read. Collective.
fn jobs(comm: &dyn Comm, options: &Options) -> Result<Vec<Job>, String> {
    if !options.template.is_empty() {
        let Some(input) = &options.input else {
            return Err("a command template needs a list to fill it (-i LIST; - for stdin)".into());
        };
        let list = flist::io::read_as(comm, input, options.input_format).map_err(|e| {
            let shown = flist::path::display(input);
            let msg = e.to_string();
            if msg.contains(shown.as_ref()) {
                msg
            } else {
                format!("read list {shown}: {msg}")
            }
        })?;
        let (offset, _) = comm.offset_and_total(list.len() as u64);
        return Ok(list
            .iter()
            .enumerate()
            .map(|(i, e)| Job {
                seq: offset + i as u64 + 1,
                command: template::expand(&options.template, e.path),
            })
            .collect());
    }
    if options.input.is_some() {
        return Err("-i LIST fills a command template: give the command after the options".into());
    }
    // Rank 0 reads the lines and deals them out in contiguous blocks.
    let read = if comm.rank() == 0 {
        read_commands(options.commands.as_deref())
    } else {
        Ok(Vec::new())
    };
    let mut sends = vec![Vec::new(); comm.size()];
    let mut problem = Vec::new();
    match &read {
        Ok(lines) => {
            let per = lines.len().div_ceil(comm.size()).max(1);
            for (i, line) in lines.iter().enumerate() {
                Job {
                    seq: i as u64 + 1,
                    command: line.clone(),
                }
                .encode_into(&mut sends[i / per]);
            }
        }
        Err(e) => problem = e.clone().into_bytes(),
    }
    comm.bcast(0, &mut problem);
    if !problem.is_empty() {
        return Err(String::from_utf8_lossy(&problem).into_owned());
    }
    let mine = comm.alltoallv(sends).swap_remove(0);
    let mut r = Reader::new(&mine);
    let mut jobs = Vec::new();
    while !r.is_empty() {
        jobs.push(<Job as queue::WorkItem>::decode(&mut r));
    }
    Ok(jobs)
}

impl Job {
    fn encode_into(&self, out: &mut Vec<u8>) {
        <Job as queue::WorkItem>::encode(self, out);
    }
}

/// The non-empty lines of `file` (`None` or `-`: stdin).
fn read_commands(file: Option<&[u8]>) -> Result<Vec<Vec<u8>>, String> {
    let bytes = match file {
        None | Some(b"-") => {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut b)
                .map_err(|e| format!("read commands from stdin: {e}"))?;
            b
        }
        Some(f) => std::fs::read(std::ffi::OsStr::from_bytes(f))
            .map_err(|e| format!("read commands {}: {e}", flist::path::display(f)))?,
    };
    Ok(bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// `jobs` without those the joblog records (with `--resume`). Collective.
fn resumed(comm: &dyn Comm, options: &Options, jobs: Vec<Job>) -> Result<Vec<Job>, String> {
    let (Some(log), true) = (&options.joblog, options.resume != Resume::No) else {
        return Ok(jobs);
    };
    let read = if comm.rank() == 0 {
        joblog::finished(log, options.resume == Resume::Succeeded)
            .map_err(|e| format!("read joblog {}: {e}", flist::path::display(log)))
    } else {
        Ok(HashSet::new())
    };
    let mut bytes = Vec::new();
    match &read {
        Ok(done) => {
            bytes.push(0);
            for c in done {
                steal::wire::put_bytes(&mut bytes, c);
            }
        }
        Err(e) => {
            bytes.push(1);
            bytes.extend_from_slice(e.as_bytes());
        }
    }
    comm.bcast(0, &mut bytes);
    if bytes[0] == 1 {
        return Err(String::from_utf8_lossy(&bytes[1..]).into_owned());
    }
    let mut r = Reader::new(&bytes[1..]);
    let mut done = HashSet::new();
    while !r.is_empty() {
        done.insert(r.bytes());
    }
    Ok(jobs
        .into_iter()
        .filter(|j| !done.contains(&joblog::escape(&j.command)[..]))
        .collect())
}
