//! `mfu-rs find` (dfind): find files by name, time, size, owner or type, and print them, save
//! them as a list or run a command on them.
//!
//! The phases, each collective:
//! 1. entries: walk the PATHs (with stat only when a test or the output list needs metadata)
//!    or read `--input` (stat'ed again when the list lacks what the tests need);
//! 2. resolve: the clock, reference files, user and group names, on rank 0, broadcast;
//! 3. evaluate: each rank its own entries, in parallel, GNU find's expression semantics
//!    ([`expr`]), `--exec` commands run where their entry is;
//! 4. print in list order (rank 0 writes every rank's part), write `-o`, summarise with -v.
//!
//! Differences from dfind, all towards GNU find: times round as GNU's do (dfind floors the
//! age), `--name '*'` matches names that begin with `.`, `--regex` must match the whole path,
//! the expression has `--not`, `--or` and parentheses, an `--exec` command that fails is an
//! error in the exit status, and nothing is printed by default when `-o` saves a list.

mod commands;
mod source;
mod stream;

pub use stream::FindSpill;

pub use crate::engine::find_expr::{expr, Primary};

use crate::engine::checkpoint::{self, Choice, Inputs, Outcome, Plan};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::find_expr::eval::{Evaluated, Evaluator};
use crate::engine::find_expr::resolve::{self, Node};
use crate::engine::input::{Input, Listed};
use crate::engine::lustre::LustreHandle;
use crate::engine::status::Status;
use expr::Expr;
use flist::io::{self, Format};
use flist::Detail;
use source::Entries;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::progress::Report as ProgressReport;
use steal::{Comm, CommExt, ReduceOp};

/// What `find` does: search the trees (or the list) of `input` for the entries `expr` matches.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Trees to search (every path found is absolute), or the list to search instead (v3/v4
    /// cache, `path|T` text, one path per line, NUL-separated; `-`: stdin; or in memory).
    /// Listed entries are stat'ed again when a test needs metadata the list lacks; entries
    /// that are gone are reported and left out.
    pub input: Input,
    /// Write the matching entries to this list (`-`: stdout): cache v4 when they carry
    /// metadata, text otherwise. With it, nothing is printed unless `expr` has a print.
    pub output: Option<Vec<u8>>,
    /// With `output`, write the text format (`path|T` lines).
    pub text: bool,
    /// Descend at most this many directory levels below each path (0: the paths only); with
    /// `input`, counted from the list's shallowest entry.
    pub maxdepth: Option<usize>,
    /// The expression (GNU find's semantics); `None` matches everything. Without an action
    /// and without `output`, every match is printed (sent to the context's output).
    pub expr: Option<Expr<Primary>>,
    /// With `--exec`: where the commands that ran to their end are recorded, so that a rerun
    /// after a stop does not run them again (default: beside `output`, or in the state
    /// directory without one).
    pub checkpoint: Choice,
    /// Where the Lustre tests (`--ost`, `--stripe-count`...) read layouts: the real calls by
    /// default, a test double or an embedder's own otherwise.
    pub lustre: LustreHandle,
    /// With a v3/v4 `input` file: bytes of memory a rank may hold for the list. A list one of
    /// whose ranks' shares takes more than half of it is searched a piece at a time (the
    /// matches and printed paths spill to `tmpdir` until they are written in list order).
    /// `None`: the default of [`flist::spill::MemoryLimit::resolve`].
    pub memory_limit: Option<u64>,
    /// Where spill files go (`None`: `$TMPDIR`, else `/tmp`).
    pub tmpdir: Option<Vec<u8>>,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Search `paths` with `expr`, everything else as on the command line.
    pub fn new<P: AsRef<[u8]>>(
        paths: impl IntoIterator<Item = P>,
        expr: Option<Expr<Primary>>,
    ) -> Options {
        Options {
            input: Input::Paths(paths.into_iter().map(|p| p.as_ref().to_vec()).collect()),
            expr,
            ..Options::default()
        }
    }
}

/// What a `find` found; counts over all ranks, the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// True when the entries were read from `input`, false when walked.
    pub read: bool,
    /// Entries walked or read.
    pub entries: u64,
    /// Entries the expression was evaluated on.
    pub examined: u64,
    /// Entries for which the whole expression was true.
    pub matched: u64,
    /// `--exec` commands that failed or could not start (each reported), those an earlier run
    /// of a continued checkpoint recorded included.
    pub commands_failed: u64,
    /// `--exec` commands not run again: an earlier run whose checkpoint this one continued
    /// ran them to their end (their recorded exit status counted).
    pub commands_recorded: u64,
    /// Entries that could not be read (a directory, a listed path that is gone; reported).
    pub unreadable: u64,
    /// The output list could not be written, or was not because of a stop (reported).
    pub list_failed: bool,
    /// Seconds spent walking or reading the entries.
    pub walk_seconds: f64,
    /// Seconds spent evaluating the expression.
    pub search_seconds: f64,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// A stop request cut the walk or the search short.
    pub interrupted: bool,
    /// This process's sample of failure messages.
    pub failures: Vec<String>,
    /// A stop cut the search short: the entries examined of those found.
    #[serde(skip)]
    pub stopped: Option<Stopped>,
    /// With a list file: the memory limit per rank, described (`--memory-limit`).
    pub memory_limit: Option<String>,
    /// The list outgrew the memory limit and was searched a piece at a time: what spilled.
    pub spilled: Option<FindSpill>,
    /// Where spill files went (with `spilled`).
    pub tmpdir: Option<String>,
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.examined,
            bytes: 0,
            failed: self.commands_failed + self.unreadable + u64::from(self.list_failed),
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        Status::of_work(
            self.commands_failed + self.unreadable + u64::from(self.list_failed),
            0,
            self.interrupted,
        )
    }
    fn stopped(&self) -> Option<Stopped> {
        self.stopped
    }
}

/// What the expression asks of the run.
struct Needs {
    /// It has an action (print, exec).
    action: bool,
    /// It runs commands.
    exec: bool,
    /// It prints.
    print: bool,
    /// A test needs metadata (size, times, owners).
    meta: bool,
    /// A test needs the type.
    kind: bool,
    /// A test reads Lustre layouts.
    lustre: bool,
}

fn needs(expr: Option<&Expr<Primary>>) -> Needs {
    let any = |p: &dyn Fn(&Primary) -> bool| expr.is_some_and(|e| e.any_leaf(&|l| p(l)));
    Needs {
        action: any(&Primary::is_action),
        exec: any(&|p| matches!(p, Primary::Exec(_))),
        print: any(&|p| matches!(p, Primary::Print { .. })),
        meta: any(&|p| match p {
            Primary::Test(t) => t.needs_meta(),
            Primary::Age { .. } | Primary::Newer { .. } | Primary::User(_) | Primary::Group(_) => {
                true
            }
            _ => false,
        }),
        kind: any(&|p| matches!(p, Primary::Test(flist::filter::Test::Type(_)))),
        lustre: any(&|p| matches!(p, Primary::Lustre(_))),
    }
}

/// Run `find` on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let context = &options.context;
    let started = Instant::now();
    let to_stdout = options.output.as_deref() == Some(b"-");
    let needs = needs(options.expr.as_ref());
    if to_stdout && needs.print {
        return Err(Error::new(
            "--print and --print0 cannot go to stdout when -o - writes the list there",
        ));
    }
    let mut report = Report {
        read: options.input.is_list(),
        ..Report::default()
    };
    // 0. A list file larger than the memory limit is searched a piece at a time.
    match stream::plan(comm, options)? {
        stream::Plan::Stream(share, limit) => {
            stream::run(comm, options, *share, limit, &mut report, started)?;
            report.failures = context.failures();
            return Ok(report);
        }
        stream::Plan::InMemory(limit) => {
            if let Some(l) = &limit {
                detail(comm, context, &format!("Memory limit: {l}"));
            }
            report.memory_limit = limit;
        }
    }

    // 1 and 2: the entries, and the expression resolved.
    let t = Instant::now();
    let (entries, expr) = entries(comm, options, &needs)?;
    report.entries = comm.sum(entries.list.len() as u64);
    report.walk_seconds = t.elapsed().as_secs_f64();
    let verb = if report.read { "Read" } else { "Walked" };
    detail(
        comm,
        context,
        &format!(
            "{verb} {} items in {:.3} s",
            report.entries, report.walk_seconds
        ),
    );
    report.unreadable = comm.sum(entries.errors);
    if entries.interrupted {
        if comm.rank() == 0 {
            context.error("interrupted: the walk was cut short, nothing was searched");
        }
        report.interrupted = true;
        report.stopped = Some(Stopped {
            done: 0,
            total: report.entries,
            what: "entries",
        });
        report.seconds = started.elapsed().as_secs_f64();
        report.failures = context.failures();
        return Ok(report);
    }

    // 3. Evaluate; without an action and without -o, what matches is printed.
    let (prints, expr) = printing(&needs, options, expr);
    let opened = if needs.exec {
        open_checkpoint(comm, options)?
    } else {
        None
    };
    let t = Instant::now();
    let evaluated = search(
        comm,
        options,
        expr.as_ref(),
        to_stdout,
        &mut report,
        &entries,
        opened.as_ref(),
    );
    report.search_seconds = t.elapsed().as_secs_f64();
    let kept = report.interrupted && opened.as_ref().is_some_and(|o| o.checkpoint.is_some());

    // 4. Output.
    if prints && kept {
        // The rerun prints every match in order, those of this run's entries included: printed
        // now too, they would be printed twice.
        if comm.rank() == 0 {
            context.error(
                "stopped: nothing printed; the run that completes the checkpoint prints every match",
            );
        }
    } else if prints {
        in_rank_order(comm, evaluated.printed, |b| context.output(b));
    }
    write(comm, options, entries, evaluated.matched, &mut report);
    if let Some(c) = opened.and_then(|o| o.checkpoint) {
        let outcome = if report.interrupted {
            Outcome::Stopped
        } else if report.list_failed {
            Outcome::Failed
        } else {
            Outcome::Complete
        };
        if !c.finish_told(comm, context, outcome) {
            report.list_failed = true;
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    detail(
        comm,
        context,
        &format!(
            "Examined {} items in {:.3} s: {} matched{}{}; {:.3} s in all",
            report.examined,
            report.search_seconds,
            report.matched,
            if report.commands_failed > 0 {
                format!(", {} commands failed", report.commands_failed)
            } else {
                String::new()
            },
            if report.unreadable > 0 {
                format!(", {} entries unreadable", report.unreadable)
            } else {
                String::new()
            },
            report.seconds
        ),
    );
    report.failures = context.failures();
    Ok(report)
}

/// The entries (walked, or read and made ready), and the expression resolved (a list's
/// tables help with names). Collective.
fn entries(
    comm: &dyn Comm,
    options: &Options,
    needs: &Needs,
) -> Result<(Entries, Option<Expr<Node>>), Error> {
    let context = &options.context;
    let walk_paths = |paths: &[Vec<u8>]| {
        let no_tables = flist::IdTable::default();
        let expr = resolve::resolve(comm, options.expr.clone(), (&no_tables, &no_tables))
            .map_err(Error::new)?;
        // A v4 list needs metadata too.
        let detail = if needs.meta || (options.output.is_some() && !options.text) {
            Detail::Stat
        } else {
            Detail::Lite
        };
        let progress = context.progress(comm.rank(), "Walked");
        let entries = source::walk_paths(comm, context, paths, detail, options.maxdepth, &progress);
        Ok((entries, expr))
    };
    match options.input.list(comm, walk_paths)? {
        Listed::Walked(walked) => walked,
        Listed::Read(list) => {
            let expr = resolve::resolve(comm, options.expr.clone(), (&list.users, &list.groups))
                .map_err(Error::new)?;
            let entries = source::prepare_list(
                comm,
                context,
                list,
                options.maxdepth,
                needs.meta,
                needs.kind,
            );
            Ok((entries, expr))
        }
    }
}

/// The handle the Lustre tests read layouts through, or `None` when they need no call: the
/// expression has none, or no PATH is on Lustre. Rank 0 says once for each PATH that is not
/// on Lustre that the tests are false there: a warning, not an error (the other tests still
/// select from it; what `lfs find` does off Lustre was not checked). A list read with
/// `--input` is asked entry by entry (off Lustre each answers "no layout"). Collective.
fn needs_lustre_calls(comm: &dyn Comm, options: &Options) -> Option<LustreHandle> {
    if !needs(options.expr.as_ref()).lustre {
        return None;
    }
    let Input::Paths(paths) = &options.input else {
        return Some(options.lustre.clone());
    };
    let any = comm.bcast_with(0, || {
        let mut any = false;
        for p in paths {
            match options.lustre.is_lustre(flist::path::as_path(p)) {
                Ok(true) => any = true,
                Ok(false) => options.context.info(format!(
                    "warning: {} is not on Lustre: --ost, --mdt, --pool, --stripe-count, \
                     --stripe-size and --layout are false for every file there\n",
                    flist::path::display(p)
                )),
                // The walk reports a PATH it cannot reach.
                Err(_) => {}
            }
        }
        any
    });
    any.then(|| options.lustre.clone())
}

/// Whether matches are printed (`-print`, or no action and no `-o`), and the expression that
/// does it: without an action and without `-o`, what matches is printed.
fn printing(
    needs: &Needs,
    options: &Options,
    expr: Option<Expr<Node>>,
) -> (bool, Option<Expr<Node>>) {
    let prints = needs.print || (!needs.action && options.output.is_none());
    let expr = if needs.action || options.output.is_some() {
        expr
    } else {
        Some(with_print(expr))
    };
    (prints, expr)
}

/// `expr` followed by a print.
fn with_print(expr: Option<Expr<Node>>) -> Expr<Node> {
    let print = Expr::Leaf(Node::Print { nul: false });
    match expr {
        None => print,
        Some(Expr::And(mut v)) => {
            v.push(print);
            Expr::And(v)
        }
        Some(e) => Expr::And(vec![e, print]),
    }
}

/// The checkpoint of a run with `--exec` commands (`None` with `--no-checkpoint`).
/// Collective.
///
/// Its inputs are the PATHs (or the list) and the expression, not a digest of the entries: the
/// commands may change the tree they run on (`touch`, `chmod`, `gzip`), and a rerun would then
/// never continue. Each command is recorded with its words, so a rerun skips only the very
/// commands that ran to their end.
fn open_checkpoint(
    comm: &dyn Comm,
    options: &Options,
) -> Result<Option<checkpoint::Opened>, Error> {
    if options.checkpoint == Choice::Off {
        return Ok(None);
    }
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let input: Vec<Vec<u8>> = match &options.input {
        Input::Paths(paths) => paths
            .iter()
            .map(|p| flist::path::normalize(p, &cwd))
            .collect(),
        Input::File { path, .. } => vec![b"--input".to_vec(), flist::path::normalize(path, &cwd)],
        Input::List(_) => vec![b"--input (in memory)".to_vec()],
    };
    let inputs = Inputs::new("find --exec")
        .field("paths", &input)
        .field("expression", &format!("{:?}", options.expr))
        .field("maxdepth", &options.maxdepth);
    // Absolute, so that the checkpoint beside it is named by a path that holds its directory
    // (the core's removal looks for a bare name's parent in `/`).
    let out = options.output.as_ref().map(|o| {
        if o.as_slice() == b"-" {
            o.clone()
        } else {
            flist::path::normalize(o, &cwd)
        }
    });
    let plan = Plan {
        output: out.as_deref(),
        inputs,
    };
    let opened = checkpoint::open(comm, &options.checkpoint, plan).map_err(Error::new)?;
    opened.tell(comm, &options.context);
    Ok(Some(opened))
}

/// Evaluate `expr` on this rank's entries, counting into `report` (over all ranks), with
/// commands recorded in (and taken from) the checkpoint `opened`. Collective.
fn search(
    comm: &dyn Comm,
    options: &Options,
    expr: Option<&Expr<Node>>,
    to_stdout: bool,
    report: &mut Report,
    entries: &Entries,
    opened: Option<&checkpoint::Opened>,
) -> Evaluated {
    let context = &options.context;
    let log = opened.and_then(|o| {
        o.checkpoint.as_ref().map(|c| commands::Commands {
            prior: &o.prior,
            checkpoint: c,
        })
    });
    let lustre = needs_lustre_calls(comm, options);
    let mut evaluator = Evaluator::new(expr, to_stdout, context).with_lustre(lustre);
    if let Some(log) = &log {
        evaluator = evaluator.with_log(log);
    }
    let evaluated = with_progress(comm, context, report.entries, &evaluator.examined, || {
        evaluator.run(&entries.list)
    });
    report.commands_failed = comm.sum(evaluator.failed.load(Ordering::Relaxed));
    report.unreadable += comm.sum(evaluator.unreadable.load(Ordering::Relaxed));
    report.commands_recorded = comm.sum(evaluator.recorded.load(Ordering::Relaxed));
    report.matched = comm.sum(evaluated.matched.len() as u64);
    report.examined = comm.sum(evaluator.examined.load(Ordering::Relaxed));
    report.interrupted = comm.any(context.stopped());
    if report.interrupted {
        report.stopped = Some(Stopped {
            done: report.examined,
            total: report.entries,
            what: "entries",
        });
    }
    if report.interrupted && comm.rank() == 0 {
        context.error(format!(
            "interrupted by a signal: {} of {} entries examined",
            report.examined, report.entries
        ));
    }
    evaluated
}

/// Write the matching entries to `output`, unless the search was interrupted (a list written
/// then would look complete and drive a later rm or chmod). Collective.
fn write(
    comm: &dyn Comm,
    options: &Options,
    entries: Entries,
    matched: Vec<usize>,
    report: &mut Report,
) {
    let Some(out) = &options.output else { return };
    let context = &options.context;
    if report.interrupted {
        if comm.rank() == 0 {
            context.error(format!(
                "{}: not written: the search was interrupted",
                flist::path::display(out)
            ));
        }
        return;
    }
    let list = entries.list.select(matched);
    let format = if options.text {
        Format::Text
    } else {
        io::default_format(&list)
    };
    if let Err(e) = io::write(comm, &list, out, format) {
        if comm.rank() == 0 {
            // The error names the list and the operation already.
            context.error(e);
        }
        report.list_failed = true;
    }
    report.list_failed = comm.any(report.list_failed);
}

/// Run the local `work` while rank 0 reports, every `--progress` interval, how many entries
/// all ranks have examined (`done` counts this rank's). Collective: ranks meet in one sum per
/// interval until every rank's work is done.
fn with_progress<R: Send>(
    comm: &dyn Comm,
    context: &Context,
    total: u64,
    done: &AtomicU64,
    work: impl FnOnce() -> R + Send,
) -> R {
    let Some(interval) = context.progress else {
        return work();
    };
    let start = Instant::now();
    std::thread::scope(|s| {
        let (finished_tx, finished) = mpsc::channel::<()>();
        let worker = s.spawn(move || {
            let r = work();
            drop(finished_tx);
            r
        });
        let mut local_done = false;
        loop {
            if !local_done {
                local_done = !matches!(
                    finished.recv_timeout(interval),
                    Err(mpsc::RecvTimeoutError::Timeout)
                );
            }
            let mut v = [done.load(Ordering::Relaxed), u64::from(!local_done)];
            comm.allreduce(&mut v, ReduceOp::Sum);
            if v[1] == 0 {
                break;
            }
            if comm.rank() == 0 {
                let report = ProgressReport {
                    items: v[0],
                    total_items: total,
                    elapsed: start.elapsed(),
                    ..ProgressReport::default()
                };
                context.events.progress("Examined", &report);
            }
        }
        worker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// A line of detail (with verbose), from rank 0.
fn detail(comm: &dyn Comm, context: &Context, msg: &str) {
    if comm.rank() == 0 && context.verbose {
        context.info(format!("{msg}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop during the walk (before any command ran) is a stopped run too: the report says
    /// how far it got, for the "stopped after ...; run the same command again" line.
    #[test]
    fn a_stop_during_the_walk_reports_a_stopped_run() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), b"").unwrap();
        let options = Options::new([tmp.path().as_os_str().as_encoded_bytes()], None);
        options.context.stop.store(true, Ordering::SeqCst);
        let report = steal::local::run(1, |comm| run(comm, &options).unwrap()).remove(0);
        assert!(report.interrupted);
        assert_eq!(report.status(), Status::ItemsFailed);
        let stopped = report.stopped().expect("a stopped run");
        assert_eq!((stopped.done, stopped.what), (0, "entries"));
    }
}
