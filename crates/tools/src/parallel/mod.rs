//! `mfu-rs parallel` (dparallel): run shell commands over all ranks with work stealing, as GNU
//! parallel runs them over cores: commands one per line (from a file or stdin), or one
//! template (`{}`, `{/}`, `{.}`, `{//}`, `{/.}`) applied to every entry of a list.
//!
//! The phases, each collective:
//! 1. jobs: rank 0 reads the command lines, or each rank expands the template over its part
//!    of the list and sends the jobs to rank 0; a job's number is its place in the input;
//! 2. `--resume`: rank 0 reads the joblog and drops the numbers it records;
//! 3. run: rank 0 hands the jobs out in input order to the free runner threads of every rank,
//!    each only once the one before has started (see `dispatch`); each runs `/bin/sh -c` in
//!    a process group of its own with its output captured, and appends its joblog line as it
//!    ends;
//! 4. output: each job's standard output then standard error, whole. When every rank is a
//!    thread of this process and the order is free, a job's output is written as it ends;
//!    otherwise (several processes, whose output the launcher would cut and mix, or
//!    `keep_order`) rank 0 writes all of it at the end, in input order with `keep_order`.

mod job;
pub(crate) mod joblog;
pub(crate) mod template;

pub use job::{Done, Job};

use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::input::{Input, Listed};
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;
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
    /// With a template: the list whose entries fill it (a list file of any format, `-`:
    /// stdin; or a list in memory). Paths to walk are refused: the entries come from a list.
    pub input: Option<Input>,
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
    let jobs = agree_setup(comm, jobs(comm, options))?;
    report.commands = comm.sum(jobs.len() as u64);

    // 2. What a resume skips; the joblog ready.
    let jobs = agree_setup(comm, resumed(comm, options, jobs))?;
    report.skipped = report.commands - comm.sum(jobs.len() as u64);
    // Before any command starts: what kills the commands should this rank die (see
    // `steal::signals::supervise`). Without it, nothing runs.
    agree_setup(comm, steal::signals::supervise())?;
    let log = open_joblog(comm, options)?;

    // 3. Run: rank 0 hands the jobs out in input order, one at a time, to whichever runner
    // (of any rank) is free, and the next only once the previous one has started.
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
    let runners = runners(comm, options.jobs);
    let mut terminate = Terminate {
        context,
        on: steal::launch::launched(),
        termed: None,
    };
    let dispatched = {
        let (events, inbox) = mpsc::channel::<Event>();
        let main = std::thread::current();
        std::thread::scope(|s| {
            let mut outboxes = Vec::with_capacity(runners);
            for i in 0..runners {
                // One job at most waits for a runner: it asks for the next only when free.
                let (outbox, jobs) = mpsc::sync_channel::<Option<Job>>(1);
                outboxes.push(outbox);
                let mut runner = Runner {
                    index: i,
                    events: events.clone(),
                    main: main.clone(),
                    owes_settled: false,
                    finished: false,
                };
                let (finish, counts) = (&finish, &counts);
                s.spawn(move || {
                    loop {
                        runner.tell(Event::Want(i));
                        let Ok(Some(job)) = jobs.recv() else { break };
                        runner.owes_settled = true;
                        if context.stopped() {
                            // Handed over just before a stop: it does not start either.
                            runner.settled();
                            crate::engine::locks::lock(counts).not_started += 1;
                            continue;
                        }
                        let started = job::start(job);
                        // Started (or failed to): the next job in input order may start now.
                        runner.settled();
                        finish(match started {
                            Ok(running) => running.wait(),
                            Err(done) => done,
                        });
                    }
                    runner.finish();
                });
            }
            drop(events);
            dispatch(comm, jobs, &inbox, &outboxes, &context.stop, &mut terminate)
        })
    };
    let counts = counts.into_inner().unwrap_or_else(|p| p.into_inner());
    report.ran = comm.sum(counts.ran);
    report.failed = comm.sum(counts.failed);
    report.output_bytes = comm.sum(counts.output_bytes);
    report.joblog_failed = comm.sum(counts.joblog_failed);
    report.not_started = comm.sum(dispatched + counts.not_started);
    report.interrupted = comm.any(context.stopped());
    let terminated = comm.any(terminate.termed.is_some());

    // 4. Output kept for rank 0.
    if !stream {
        let kept = kept.into_inner().unwrap_or_else(|p| p.into_inner());
        emit_kept(comm, options, kept);
    }
    if report.interrupted && comm.rank() == 0 {
        let started = if terminated {
            "were stopped (SIGTERM, then SIGKILL)"
        } else {
            "finished"
        };
        context.error(format!(
            "interrupted by a signal: {} commands not started; the {} that had started {started}",
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

/// `--joblog`: created (or, with `--resume`, kept) by rank 0, then opened for appending by every
/// rank. Collective; `None` without a joblog.
fn open_joblog(comm: &dyn Comm, options: &Options) -> Result<Option<Mutex<std::fs::File>>, Error> {
    let Some(log) = &options.joblog else {
        return Ok(None);
    };
    let created = if comm.rank() == 0 {
        joblog::create(log, options.resume != Resume::No)
            .map_err(|e| format!("create joblog {}: {e}", flist::path::display(log)))
    } else {
        Ok(())
    };
    agree_setup(comm, created)?;
    let opened =
        joblog::open(log).map_err(|e| format!("open joblog {}: {e}", flist::path::display(log)));
    Ok(Some(Mutex::new(agree_setup(comm, opened)?)))
}

/// The output kept on each rank, written by rank 0 in rank order (`--keep-order`: in input
/// order). Collective.
fn emit_kept(comm: &dyn Comm, options: &Options, mut kept: Vec<Done>) {
    let mut bytes = Vec::new();
    for d in kept.drain(..) {
        steal::typed::encode_into(&d, &mut bytes);
    }
    let mut all = Vec::new();
    steal::ordered::in_rank_order(comm, bytes, |part| {
        all.extend(steal::typed::each::<Done>(part).map(steal::typed::sent));
    });
    if options.keep_order {
        all.sort_by_key(|d| d.job.seq);
    }
    for d in &all {
        emit(options, d);
    }
}

/// How long a command stopped by [`Terminate`] has between SIGTERM and SIGKILL. Open MPI sends
/// the rank SIGKILL 1 s after its SIGTERM (odls_base_sigkill_timeout); this leaves the rank
/// time to log the commands' ends and say what it did.
const TERM_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// A stop under a launcher. There a SIGTERM is the launcher's (mpirun's, srun's) warning
/// before it SIGKILLs the rank: waiting for the running commands, as a stop does without a
/// launcher, would only end in the SIGKILL, with the commands unlogged (the supervisor then
/// kills them). So this rank stops them itself at once, GNU parallel's way (SIGTERM, then
/// SIGKILL), logs their ends and says so; the run exits 1 as every interrupted run does.
struct Terminate<'a> {
    context: &'a Context,
    /// Under a launcher.
    on: bool,
    /// When the commands were sent SIGTERM.
    termed: Option<Instant>,
}

impl Terminate<'_> {
    /// Called by the rank's main thread as it waits for its runners: after the grace, every
    /// call sends SIGKILL again, which also reaches a command a runner started just after
    /// the stop (it had seen no stop yet).
    fn poll(&mut self, stopped: bool) {
        if !self.on || !stopped {
            return;
        }
        match self.termed {
            None => {
                self.termed = Some(Instant::now());
                let n = steal::signals::signal_groups(libc::SIGTERM);
                self.context.error(format!(
                    "interrupted by a signal under a launcher, which kills this rank next: \
                     stopping its {n} running commands (SIGTERM, then SIGKILL after {} ms); \
                     exit 1",
                    TERM_GRACE.as_millis()
                ));
            }
            Some(t) if t.elapsed() >= TERM_GRACE => {
                steal::signals::signal_groups(libc::SIGKILL);
            }
            Some(_) => {}
        }
    }
}

/// What a runner thread tells its rank's main thread.
enum Event {
    /// Runner `i` is free: it waits for a job (or `None`: no more).
    Want(usize),
    /// The job last handed to this runner has started (or could not, or was dropped by a stop).
    Settled,
    /// Runner `i` ended without being told to (it panicked; the scope re-raises the panic).
    Gone(usize),
}

/// A runner thread's line to its rank's main thread.
struct Runner {
    index: usize,
    events: mpsc::Sender<Event>,
    main: std::thread::Thread,
    /// A job was handed over and its [`Event::Settled`] is not sent yet.
    owes_settled: bool,
    /// It ended because it was told to.
    finished: bool,
}

impl Runner {
    fn tell(&self, event: Event) {
        // The main thread outlives the runners (scoped threads); a send cannot fail.
        let _ = self.events.send(event);
        self.main.unpark();
    }
    /// Ends the runner, as told to (no [`Event::Gone`]).
    fn finish(mut self) {
        self.finished = true;
    }
    fn settled(&mut self) {
        self.owes_settled = false;
        self.tell(Event::Settled);
    }
}

impl Drop for Runner {
    /// A runner that panics still lets the dispatch go on without it.
    fn drop(&mut self) {
        if self.owes_settled {
            self.settled();
        }
        if !self.finished {
            self.tell(Event::Gone(self.index));
        }
    }
}

/// Messages to rank 0's dispatch (first byte), and its answers.
const TAG_TO_DISPATCH: steal::Tag = 2001;
const TAG_FROM_DISPATCH: steal::Tag = 2002;
/// A runner of the sending rank is free.
const ASK: u8 = 0;
/// The job last handed to the sending rank has started (or will not).
const SETTLED: u8 = 1;
/// The sending rank's runners have all ended: it sends nothing more.
const BYE: u8 = 2;
/// The sending rank was asked to stop: no rank starts another job.
const STOP: u8 = 3;

/// Who asked rank 0 for a job.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asker {
    Local(usize),
    Remote(usize),
}

/// The main thread's part of the run, on every rank: pass the runners' requests to rank 0,
/// which hands `jobs` (all of them on rank 0, in input order) out one at a time, each only
/// once the one before has started, so that starts follow the input order at any `-j` and
/// rank count (a work-stealing queue would reorder them: a `cp a b` then `rm a` would lose
/// `a`). After a stop, no more jobs are handed out (and under a launcher, `terminate` stops the
/// running ones). Returns the jobs this rank dropped unstarted. Collective; no message is left
/// behind.
fn dispatch(
    comm: &dyn Comm,
    jobs: Vec<Job>,
    events: &mpsc::Receiver<Event>,
    runners: &[mpsc::SyncSender<Option<Job>>],
    stop: &std::sync::atomic::AtomicBool,
    terminate: &mut Terminate<'_>,
) -> u64 {
    const NAP: std::time::Duration = std::time::Duration::from_millis(20);
    const POLL: std::time::Duration = std::time::Duration::from_micros(200);
    let stopped = || stop.load(std::sync::atomic::Ordering::SeqCst);
    let mut live = runners.len();
    let mut dropped = 0u64;
    if comm.rank() == 0 {
        let mut queue: std::collections::VecDeque<Job> = jobs.into();
        let mut asking = std::collections::VecDeque::new();
        let mut starting: Option<Asker> = None;
        let mut remote_live = comm.size() - 1;
        // A stop on any rank stops the handing out (as the work queue's stop did).
        let mut remote_stop = false;
        loop {
            let mut busy = false;
            terminate.poll(stopped());
            while let Ok(event) = events.try_recv() {
                busy = true;
                match event {
                    Event::Want(i) => asking.push_back(Asker::Local(i)),
                    Event::Settled => starting = None,
                    Event::Gone(i) => {
                        live -= 1;
                        if starting == Some(Asker::Local(i)) {
                            starting = None;
                        }
                    }
                }
            }
            while let Some((from, _, message)) = comm.try_recv(Some(TAG_TO_DISPATCH)) {
                busy = true;
                match message[0] {
                    ASK => asking.push_back(Asker::Remote(from)),
                    SETTLED => starting = None,
                    STOP => remote_stop = true,
                    _ => remote_live -= 1,
                }
            }
            while starting.is_none() {
                let Some(asker) = asking.pop_front() else {
                    break;
                };
                busy = true;
                let job = if stopped() || remote_stop {
                    None
                } else {
                    queue.pop_front()
                };
                let handed = job.is_some();
                match asker {
                    Asker::Local(i) => match runners[i].send(job) {
                        Ok(()) if handed => starting = Some(asker),
                        Ok(()) => live -= 1,
                        // The runner is gone (panicked): the job goes back, first.
                        Err(mpsc::SendError(job)) => {
                            if let Some(job) = job {
                                queue.push_front(job);
                            }
                        }
                    },
                    Asker::Remote(r) => {
                        let mut bytes = Vec::new();
                        if let Some(job) = job {
                            bytes.push(1);
                            job.encode_into(&mut bytes);
                            starting = Some(asker);
                        } else {
                            bytes.push(0);
                        }
                        comm.send(r, TAG_FROM_DISPATCH, bytes);
                    }
                }
            }
            if live == 0 && remote_live == 0 {
                break;
            }
            if !busy {
                comm.park(NAP, POLL);
            }
        }
        dropped += queue.len() as u64;
    } else {
        let mut waiting = std::collections::VecDeque::new();
        let mut told_stop = false;
        loop {
            let mut busy = false;
            terminate.poll(stopped());
            if !told_stop && stopped() {
                told_stop = true;
                comm.send(0, TAG_TO_DISPATCH, vec![STOP]);
            }
            while let Ok(event) = events.try_recv() {
                busy = true;
                match event {
                    // Stopped: the runners end here, without asking.
                    Event::Want(i) if stopped() => {
                        let _ = runners[i].send(None);
                        live -= 1;
                    }
                    Event::Want(i) => {
                        comm.send(0, TAG_TO_DISPATCH, vec![ASK]);
                        waiting.push_back(i);
                    }
                    Event::Settled => comm.send(0, TAG_TO_DISPATCH, vec![SETTLED]),
                    Event::Gone(_) => live -= 1,
                }
            }
            while let Some((_, _, message)) = comm.try_recv(Some(TAG_FROM_DISPATCH)) {
                busy = true;
                // Rank 0 answers this rank's requests in the order they were sent.
                let i = waiting.pop_front().expect("an answer follows a request");
                let job = (message[0] == 1)
                    .then(|| steal::typed::sent(steal::typed::decode::<Job>(&message[1..])));
                let handed = job.is_some();
                match runners[i].send(job) {
                    Ok(()) if !handed => live -= 1,
                    Ok(()) => {}
                    Err(_) => {
                        // The runner is gone (panicked): the job does not start.
                        if handed {
                            dropped += 1;
                            comm.send(0, TAG_TO_DISPATCH, vec![SETTLED]);
                        }
                    }
                }
            }
            if live == 0 && waiting.is_empty() {
                comm.send(0, TAG_TO_DISPATCH, vec![BYE]);
                break;
            }
            if !busy {
                comm.park(NAP, POLL);
            }
        }
    }
    comm.flush_sends();
    dropped
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

/// This rank's jobs: the template over its part of the list, or its block of the command
/// lines rank 0 read. Collective.
fn jobs(comm: &dyn Comm, options: &Options) -> Result<Vec<Job>, String> {
    if !options.template.is_empty() {
        let Some(input) = &options.input else {
            return Err("a command template needs a list to fill it (-i LIST; - for stdin)".into());
        };
        let refuse =
            |_: &[Vec<u8>]| "a command template is filled from a list, not from paths to walk";
        let list = match input.list(comm, refuse).map_err(|e| e.message)? {
            Listed::Read(list) => list,
            Listed::Walked(refused) => return Err(refused.into()),
        };
        let (offset, _) = comm.offset_and_total(list.len() as u64);
        // Rank 0 hands every job out, in input order: it gathers them all.
        let mut sends = vec![Vec::new(); comm.size()];
        for (i, e) in list.iter().enumerate() {
            Job {
                seq: offset + i as u64 + 1,
                command: template::expand(&options.template, e.path),
            }
            .encode_into(&mut sends[0]);
        }
        drop(list);
        let mut jobs = Vec::new();
        for part in comm.alltoallv(sends) {
            jobs.extend(steal::typed::each::<Job>(&part).map(steal::typed::sent));
        }
        return Ok(jobs);
    }
    if options.input.is_some() {
        return Err("-i LIST fills a command template: give the command after the options".into());
    }
    // Rank 0 reads the lines, and keeps them: it hands every job out.
    let read = if comm.rank() == 0 {
        read_commands(options.commands.as_deref())
    } else {
        Ok(Vec::new())
    };
    let mut problem = match &read {
        Ok(_) => Vec::new(),
        Err(e) => e.clone().into_bytes(),
    };
    comm.bcast(0, &mut problem);
    if !problem.is_empty() {
        return Err(String::from_utf8_lossy(&problem).into_owned());
    }
    Ok(read?
        .into_iter()
        .enumerate()
        .map(|(i, command)| Job {
            seq: i as u64 + 1,
            command,
        })
        .collect())
}

impl Job {
    fn encode_into(&self, out: &mut Vec<u8>) {
        steal::typed::encode_into(self, out);
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

/// `jobs` without those the joblog records (with `--resume`), by their number in the input
/// (the joblog's Seq, as GNU parallel resumes: six identical commands are six jobs). A logged
/// number whose command is not the input's is an error: the log is of another input, and
/// skipping by it would skip commands that never ran. The jobs are on rank 0.
fn resumed(comm: &dyn Comm, options: &Options, jobs: Vec<Job>) -> Result<Vec<Job>, String> {
    let (Some(log), true) = (&options.joblog, options.resume != Resume::No) else {
        return Ok(jobs);
    };
    if comm.rank() != 0 {
        return Ok(jobs);
    }
    let shown = flist::path::display(log);
    let logged = joblog::finished(log).map_err(|e| format!("read joblog {shown}: {e}"))?;
    let mut kept = Vec::with_capacity(jobs.len());
    for job in jobs {
        let Some(entry) = logged.get(&job.seq) else {
            kept.push(job);
            continue;
        };
        if entry.command != joblog::escape(&job.command) {
            return Err(format!(
                "--resume: joblog {shown} records command {} as {}, but the input's command {} \
                 is {}: the log is of another input (run without --resume to start anew)",
                job.seq,
                flist::path::display(&entry.command),
                job.seq,
                flist::path::display(&job.command),
            ));
        }
        if options.resume == Resume::Succeeded && !entry.succeeded {
            kept.push(job);
        }
    }
    Ok(kept)
}
