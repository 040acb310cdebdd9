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

mod args;
mod eval;
pub mod expr;
mod resolve;
mod source;

pub use args::{FindArgs, FindOptions, Primary};

use crate::cli::{report_error, Common};
use crate::engine::status::Status;
use eval::Evaluator;
use expr::Expr;
use flist::io::{self, Format};
use flist::Detail;
use resolve::Node;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use steal::ordered::in_rank_order;
use steal::progress::Report;
use steal::{Comm, CommExt, ReduceOp};

/// Run `find` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, args: &FindArgs) -> Status {
    let o = &args.options;
    let common = args.common();
    let started = Instant::now();
    let to_stdout = o.output.as_ref().is_some_and(|p| p == "-");
    let written = args.expr.as_ref();
    let has_action = written.is_some_and(|e| e.any_leaf(&Primary::is_action));
    let has_print = written.is_some_and(|e| e.any_leaf(&|p| matches!(p, Primary::Print { .. })));
    if to_stdout && has_print {
        return Status::usage(
            comm,
            "find",
            "--print and --print0 cannot go to stdout when -o - writes the list there",
        );
    }
    let need_meta = written.is_some_and(|e| {
        e.any_leaf(&|p| match p {
            Primary::Test(t) => t.needs_meta(),
            Primary::Age { .. } | Primary::Newer { .. } | Primary::User(_) | Primary::Group(_) => {
                true
            }
            _ => false,
        })
    });
    let need_type = written
        .is_some_and(|e| e.any_leaf(&|p| matches!(p, Primary::Test(flist::filter::Test::Type(_)))));
    steal::signals::install();
    let stop = steal::signals::stop_flag();

    // 1 and 2: the entries, and the expression resolved (a list's tables help with names).
    let t = Instant::now();
    let (entries, expr) = if let Some(input) = &o.input {
        let list = match io::read(comm, input.as_bytes()) {
            Ok(l) => l,
            Err(e) => return Status::usage(comm, "find", source::read_error(input, e)),
        };
        let expr = match resolve::resolve(comm, args.expr.clone(), (&list.users, &list.groups)) {
            Ok(e) => e,
            Err(e) => return Status::usage(comm, "find", e),
        };
        let entries = source::prepare_list(comm, list, o.maxdepth, need_meta, need_type);
        (entries, expr)
    } else {
        let no_tables = flist::IdTable::default();
        let expr = match resolve::resolve(comm, args.expr.clone(), (&no_tables, &no_tables)) {
            Ok(e) => e,
            Err(e) => return Status::usage(comm, "find", e),
        };
        // A v4 list needs metadata too.
        let detail = if need_meta || (o.output.is_some() && !o.text) {
            Detail::Stat
        } else {
            Detail::Lite
        };
        let progress = common.progress(comm.rank(), "Walked");
        let entries = source::walk_paths(comm, &o.paths, detail, o.maxdepth, &progress, stop);
        (entries, expr)
    };
    let mut status = if entries.errors > 0 {
        Status::ItemsFailed
    } else {
        Status::Ok
    };
    let total = comm.sum(entries.list.len() as u64);
    let verb = if o.input.is_some() { "Read" } else { "Walked" };
    summary(
        comm,
        common,
        &format!("{verb} {total} items in {:.3} s", t.elapsed().as_secs_f64()),
    );
    if entries.interrupted {
        if comm.rank() == 0 {
            report_error(
                "find",
                "interrupted: the walk was cut short, nothing was searched",
            );
        }
        return Status::ItemsFailed.agree(comm);
    }

    // 3. Without an action and without -o, what matches is printed.
    let expr = if has_action || o.output.is_some() {
        expr
    } else {
        let print = Expr::Leaf(Node::Print { nul: false });
        Some(match expr {
            None => print,
            Some(Expr::And(mut v)) => {
                v.push(print);
                Expr::And(v)
            }
            Some(e) => Expr::And(vec![e, print]),
        })
    };
    let t = Instant::now();
    let evaluator = Evaluator::new(expr.as_ref(), to_stdout, stop);
    let evaluated = with_progress(comm, common, total, &evaluator.examined, || {
        evaluator.run(&entries.list)
    });
    let failed = comm.sum(evaluator.failed.load(Ordering::Relaxed));
    let matched = comm.sum(evaluated.matched.len() as u64);
    if failed > 0 {
        status = status.worst(Status::ItemsFailed);
    }
    let examined = comm.sum(evaluator.examined.load(Ordering::Relaxed));
    let interrupted = comm.any(stop.load(Ordering::Relaxed));
    if interrupted {
        if comm.rank() == 0 {
            report_error(
                "find",
                format!("interrupted by a signal: {examined} of {total} entries examined"),
            );
        }
        status = status.worst(Status::ItemsFailed);
    }

    // 4. Output.
    if has_print || (!has_action && o.output.is_none()) {
        in_rank_order(comm, evaluated.printed, crate::cli::stdout_bytes);
    }
    if let (Some(out), true) = (&o.output, interrupted) {
        // A list written now would look complete and drive a later rm or chmod.
        if comm.rank() == 0 {
            report_error(
                "find",
                format!(
                    "{}: not written: the search was interrupted",
                    flist::path::display(out.as_bytes())
                ),
            );
        }
    } else if let Some(out) = &o.output {
        let list = entries.list.select(evaluated.matched);
        let format = if o.text {
            Format::Text
        } else {
            io::default_format(&list)
        };
        if let Err(e) = io::write(comm, &list, out.as_bytes(), format) {
            if comm.rank() == 0 {
                // The error names the list and the operation already.
                report_error("find", e);
            }
            status = status.worst(Status::ItemsFailed);
        }
    }
    let errors = comm.sum(entries.errors);
    summary(
        comm,
        common,
        &format!(
            "Examined {examined} items in {:.3} s: {matched} matched{}{}; {:.3} s in all",
            t.elapsed().as_secs_f64(),
            if failed > 0 {
                format!(", {failed} commands failed")
            } else {
                String::new()
            },
            if errors > 0 {
                format!(", {errors} entries unreadable")
            } else {
                String::new()
            },
            started.elapsed().as_secs_f64()
        ),
    );
    status.agree(comm)
}

/// Run the local `work` while rank 0 reports, every `--progress` interval, how many entries
/// all ranks have examined (`done` counts this rank's). Collective: ranks meet in one sum per
/// interval until every rank's work is done.
fn with_progress<R: Send>(
    comm: &dyn Comm,
    common: &Common,
    total: u64,
    done: &AtomicU64,
    work: impl FnOnce() -> R + Send,
) -> R {
    if common.quiet || common.progress == 0.0 {
        return work();
    }
    let interval = Duration::from_secs_f64(common.progress);
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
                let report = Report {
                    items: v[0],
                    total_items: total,
                    elapsed: start.elapsed(),
                    ..Report::default()
                };
                eprintln!("{}", report.line("Examined"));
            }
        }
        worker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// A summary line on stderr (stdout may carry paths or a list), from rank 0, with -v.
fn summary(comm: &dyn Comm, common: &Common, msg: &str) {
    if comm.rank() == 0 && common.verbose {
        eprintln!("{msg}");
    }
}
