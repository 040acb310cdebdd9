//! `find -i LIST` on a list file larger than the memory limit (issue 34): the list is read a
//! bounded piece at a time ([`flist::io::CacheShare`]), the expression evaluated on each piece
//! as it comes, and what must come out in list order is kept in spill files meanwhile: the
//! matching records (a sorted run of [`flist::spill::run`]: they are already in list order)
//! and the printed bytes. Once every piece is read, the printed bytes go to rank 0 in rank
//! order ([`steal::ordered::in_rank_order_pieces`]), and the matches are written as a v4 list
//! ([`flist::io::write_v4_stream`]: a temporary name, renamed when complete). The list and the
//! output are the bytes of the in-memory run; `--exec` commands run as they do there, each
//! where its entry is read.

use super::{commands, Report};
use super::{detail, needs, needs_lustre_calls, open_checkpoint, printing, Needs, Options};
use crate::engine::checkpoint::Outcome;
use crate::engine::context::{Context, Error, Stopped};
use crate::engine::find_expr::eval::Evaluator;
use crate::engine::find_expr::resolve;
use crate::engine::input::Input;
use flist::io::{self, CacheShare};
use flist::path::depth;
use flist::restat::{restat, Which};
use flist::spill::run::{Run, RunCursor, RunWriter};
use flist::spill::{MemoryLimit, SpillDir, SpillFile};
use flist::units::human_bytes;
use flist::{Detail, FileList, FileType};
use std::sync::atomic::Ordering;
use std::time::Instant;
use steal::{Comm, CommExt, ReduceOp};

/// What a search of a list file piece by piece spilled; the same on every rank.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FindSpill {
    /// Pieces the list was read in (all ranks).
    pub pieces: u64,
    /// Records in the largest piece (the bound on what a rank holds at once).
    pub piece_records: u64,
    /// Bytes written to spill files by all ranks together (matches and printed paths).
    pub spill_bytes: u64,
    /// The most any one rank wrote to its spill files.
    pub spill_bytes_max_rank: u64,
}

impl FindSpill {
    /// The report's line: `Spilled: ... to DIR (...; removed)`.
    pub fn describe(&self, dir: &str) -> String {
        format!(
            "Spilled: {} of matches and printed paths to {dir}, the list read in {} pieces \
             of at most {} records (at most {} on one rank; removed)",
            human_bytes(self.spill_bytes),
            self.pieces,
            self.piece_records,
            human_bytes(self.spill_bytes_max_rank)
        )
    }
}

pub(super) use crate::engine::pieces::Plan;

/// Whether `find -i LIST` outgrows the memory limit ([`crate::engine::pieces::plan`]).
/// Refuses (a usage error, nothing done) what cannot be streamed: `-o -` and `--text`.
/// Collective.
pub(super) fn plan(comm: &dyn Comm, options: &Options) -> Result<Plan, Error> {
    let plan = crate::engine::pieces::plan(comm, &options.input, options.memory_limit)?;
    let (Plan::Stream(_, limit), Input::File { path, .. }) = (&plan, &options.input) else {
        return Ok(plan);
    };
    let why = |what: &str| {
        Error::new(format!(
            "{what}: the list {} is larger than the memory limit ({}), and is searched a \
             piece at a time, whose matches are written to a v4 list file only \
             (raise --memory-limit, or write -o FILE without --text)",
            flist::path::display(path),
            limit.describe()
        ))
    };
    if options.output.as_deref() == Some(b"-") {
        return Err(why("-o - cannot be written"));
    }
    if options.text && options.output.is_some() {
        return Err(why("--text cannot be written"));
    }
    Ok(plan)
}

/// What one rank read and spilled.
#[derive(Default)]
struct Local {
    entries: u64,
    pieces: u64,
    unreadable: u64,
    /// The matching records, in list order, and the longest path among them.
    matches: Option<(SpillFile, Run)>,
    longest: Option<u64>,
    printed: Option<SpillFile>,
}

/// Search the list `share` piece by piece within `limit` (collective; see the module).
pub(super) fn run(
    comm: &dyn Comm,
    options: &Options,
    mut share: CacheShare,
    limit: MemoryLimit,
    report: &mut Report,
    started: Instant,
) -> Result<(), Error> {
    let context = &options.context;
    let Input::File { path: input, .. } = &options.input else {
        unreachable!("planned for a list file");
    };
    let needs = needs(options.expr.as_ref());
    let to_stdout = false;
    let users = std::mem::take(&mut share.users);
    let groups = std::mem::take(&mut share.groups);
    let expr =
        resolve::resolve(comm, options.expr.clone(), (&users, &groups)).map_err(Error::new)?;
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    // Records a piece: a quarter of the limit (the piece, its evaluation and the buffers of
    // the spill files take the rest).
    let rec = share.record_bytes().max(1);
    let per_piece = (limit.bytes / 4 / rec).clamp(1, (4 << 20) / rec + 1) as usize;
    let top = match options.maxdepth {
        Some(_) => Some(shallowest(comm, input, per_piece, &cwd)?),
        None => None,
    };
    let dir = SpillDir::new(options.tmpdir.as_deref());
    let (prints, expr) = printing(&needs, options, expr);
    let opened = if needs.exec {
        open_checkpoint(comm, options)?
    } else {
        None
    };
    let log = opened.as_ref().and_then(|o| {
        o.checkpoint.as_ref().map(|c| commands::Commands {
            prior: &o.prior,
            checkpoint: c,
        })
    });
    let lustre = needs_lustre_calls(comm, options);
    let mut evaluator = Evaluator::new(expr.as_ref(), to_stdout, context).with_lustre(lustre);
    if let Some(log) = &log {
        evaluator = evaluator.with_log(log);
    }

    // Read, evaluate and spill, piece by piece.
    let t = Instant::now();
    let mut local = Local::default();
    let read = read_pieces(
        &mut share,
        &mut local,
        &dir,
        per_piece,
        &Piecewise {
            cwd: &cwd,
            top,
            options,
            needs: &needs,
            evaluator: &evaluator,
            write_matches: options.output.is_some(),
        },
    );
    let read = comm.agree(read);
    report.entries = comm.sum(local.entries);
    report.walk_seconds = t.elapsed().as_secs_f64();
    report.search_seconds = report.walk_seconds;
    report.memory_limit = Some(limit.describe());
    report.commands_failed = comm.sum(evaluator.failed.load(Ordering::Relaxed));
    report.commands_recorded = comm.sum(evaluator.recorded.load(Ordering::Relaxed));
    report.unreadable = comm.sum(evaluator.unreadable.load(Ordering::Relaxed) + local.unreadable);
    report.matched = comm.sum(evaluator.matched.load(Ordering::Relaxed));
    report.examined = comm.sum(evaluator.examined.load(Ordering::Relaxed));
    let spilled = local.matches.as_ref().map_or(0, |m| m.0.len())
        + local.printed.as_ref().map_or(0, SpillFile::len);
    let spill = FindSpill {
        pieces: comm.sum(local.pieces),
        piece_records: per_piece as u64,
        spill_bytes: comm.sum(spilled),
        spill_bytes_max_rank: comm.max(spilled),
    };
    detail(
        comm,
        context,
        &format!(
            "Read {} items in {} pieces and examined {} in {:.3} s",
            report.entries, spill.pieces, report.examined, report.walk_seconds
        ),
    );
    detail(
        comm,
        context,
        &format!("Memory limit: {}", limit.describe()),
    );
    let shown_dir = flist::path::display(dir.path()).into_owned();
    detail(comm, context, &spill.describe(&shown_dir));
    report.spilled = Some(spill);
    report.tmpdir = Some(shown_dir);
    if let Err(e) = read {
        // The list could not be read to its end, or a spill file written: nothing printed,
        // no list written (it would look complete).
        if comm.rank() == 0 {
            context.error(e);
            if let Some(out) = &options.output {
                context.error(format!(
                    "{}: not written: the search did not read the whole list",
                    flist::path::display(out)
                ));
            }
        }
        report.list_failed = true;
        finish_checkpoint(comm, context, opened, report);
        return Ok(());
    }
    report.interrupted = comm.any(context.stopped());
    if report.interrupted {
        report.stopped = Some(Stopped {
            done: report.examined,
            total: share.total(),
            what: "entries",
        });
        if comm.rank() == 0 {
            context.error(format!(
                "interrupted by a signal: {} of {} entries examined",
                report.examined,
                share.total()
            ));
        }
    }
    let kept = report.interrupted && opened.as_ref().is_some_and(|o| o.checkpoint.is_some());

    // Printed paths, in list order.
    if prints && kept {
        if comm.rank() == 0 {
            context.error(
                "stopped: nothing printed; the run that completes the checkpoint prints every match",
            );
        }
    } else if prints {
        print_in_order(
            comm,
            context,
            local.printed.as_ref(),
            &mut report.list_failed,
        );
    }

    // The list of matches.
    if let Some(out) = &options.output {
        let tables = (&users, &groups);
        write_matches(comm, context, out, &mut local, tables, limit, report);
    }
    report.list_failed = comm.any(report.list_failed);
    finish_checkpoint(comm, context, opened, report);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(())
}

/// Write the matches spilled in `local` to the v4 list `out` (a temporary name, renamed when
/// complete), unless the search was interrupted (a list written then would look complete and
/// drive a later rm or chmod). Collective.
fn write_matches(
    comm: &dyn Comm,
    context: &Context,
    out: &[u8],
    local: &mut Local,
    (users, groups): (&flist::IdTable, &flist::IdTable),
    limit: MemoryLimit,
    report: &mut Report,
) {
    if report.interrupted {
        if comm.rank() == 0 {
            context.error(format!(
                "{}: not written: the search was interrupted",
                flist::path::display(out)
            ));
        }
        return;
    }
    let longest = comm.max(local.longest.map_or(0, |l| l + 1)).checked_sub(1);
    let block = (limit.bytes / 4).clamp(4 << 10, 4 << 20) as usize;
    let (file, run) = match local.matches.take() {
        Some((f, r)) => (Some(f), r),
        None => (None, Run::default()),
    };
    let records = run.records;
    let written = io::write_v4_stream(comm, out, (users, groups), longest, records, |sink| {
        let file = file.as_ref().expect("a rank with matches has their spill");
        let mut cursor = RunCursor::new(run, Detail::Stat, block);
        cursor.load(file)?;
        while let Some((list, i)) = cursor.current() {
            let meta = list.meta(i).expect("a stat list");
            sink.push(list.path(i), &meta)?;
            cursor.advance(file)?;
        }
        Ok(())
    });
    if let Err(e) = written {
        if comm.rank() == 0 {
            context.error(e);
        }
        report.list_failed = true;
    }
}

/// What each piece goes through.
struct Piecewise<'a> {
    cwd: &'a [u8],
    /// With `--maxdepth`: the depth of the list's shallowest entry.
    top: Option<usize>,
    options: &'a Options,
    needs: &'a Needs,
    evaluator: &'a Evaluator<'a>,
    write_matches: bool,
}

/// Read this rank's share piece by piece: each made ready as [`super::source::prepare_list`]
/// makes a list, evaluated, its matches and printed bytes appended to spill files. Stops early
/// on a stop request (the caller finds it in the context). Local.
fn read_pieces(
    share: &mut CacheShare,
    local: &mut Local,
    dir: &SpillDir,
    per_piece: usize,
    how: &Piecewise<'_>,
) -> Result<(), flist::Error> {
    let context = &how.options.context;
    let mut writer = RunWriter::new(1 << 20);
    loop {
        if context.stopped() {
            break;
        }
        let mut piece = FileList::new(Detail::Stat);
        let n = share.read_into(&mut piece, per_piece)?;
        if n == 0 {
            break;
        }
        local.pieces += 1;
        local.entries += n as u64;
        let mut piece = piece.normalized(how.cwd);
        if let (Some(maxdepth), Some(top)) = (how.options.maxdepth, how.top) {
            piece.retain(|e| depth(e.path).saturating_sub(top) <= maxdepth);
        }
        if how.needs.kind && piece.iter().any(|e| e.kind == FileType::Unknown) {
            let (stated, errors) = restat(piece, Which::UnknownTypes, false);
            for e in &errors {
                context.error(e);
            }
            local.unreadable += errors.len() as u64;
            piece = stated;
        }
        let evaluated = how.evaluator.run(&piece);
        if how.write_matches && !evaluated.matched.is_empty() {
            if local.matches.is_none() {
                local.matches = Some((dir.create()?, Run::default()));
            }
            let (file, _) = local.matches.as_ref().expect("created above");
            for &i in &evaluated.matched {
                local.longest = local.longest.max(Some(piece.path(i).len() as u64));
                piece.encode_record(i, writer.buf());
                writer.added(file, 1)?;
            }
        }
        if !evaluated.printed.is_empty() {
            if local.printed.is_none() {
                local.printed = Some(dir.create()?);
            }
            let file = local.printed.as_ref().expect("created above");
            file.append(&evaluated.printed)?;
        }
    }
    if let Some((file, run)) = &mut local.matches {
        let w = std::mem::replace(&mut writer, RunWriter::new(1));
        *run = w.finish(file)?;
    }
    Ok(())
}

/// The depth of the shallowest entry of the list (all ranks), read once more piece by piece:
/// `--maxdepth` counts from it. Collective.
fn shallowest(comm: &dyn Comm, input: &[u8], per_piece: usize, cwd: &[u8]) -> Result<usize, Error> {
    let local = (|| -> Result<u64, flist::Error> {
        let Some(mut share) = io::open_cache_share(comm, input)? else {
            return Err(flist::Error::Invalid(format!(
                "read list {}: changed while being read",
                flist::path::display(input)
            )));
        };
        let mut min = u64::MAX;
        loop {
            let mut piece = FileList::new(Detail::Stat);
            if share.read_into(&mut piece, per_piece)? == 0 {
                return Ok(min);
            }
            for e in piece.iter() {
                min = min.min(depth(&flist::path::normalize(e.path, cwd)) as u64);
            }
        }
    })();
    let mut min = [comm.agree(local).map_err(Error::new)?];
    comm.allreduce(&mut min, ReduceOp::Min);
    Ok(min[0] as usize)
}

/// Rank 0 sends every rank's printed bytes out in rank order (list order), read back from
/// their spill files a bounded piece at a time. Collective.
fn print_in_order(
    comm: &dyn Comm,
    context: &Context,
    printed: Option<&SpillFile>,
    failed: &mut bool,
) {
    const PIECE: u64 = 1 << 20;
    let mut at = 0u64;
    let mut error = None;
    let next = || {
        let file = printed?;
        if at >= file.len() || error.is_some() {
            return None;
        }
        let n = PIECE.min(file.len() - at);
        let mut buf = vec![0u8; n as usize];
        if let Err(e) = file.read_exact_at(&mut buf, at) {
            error = Some(e);
            return None;
        }
        at += n;
        Some(buf)
    };
    steal::ordered::in_rank_order_pieces(comm, next, |bytes| {
        context.output(bytes);
        true
    });
    if let Some(e) = error {
        // The paths printed so far are followed by those of the next rank: say so.
        context.error(format!("{e}: the printed paths are incomplete"));
        *failed = true;
    }
}

/// Close `--exec`'s checkpoint with the run's outcome. Collective.
fn finish_checkpoint(
    comm: &dyn Comm,
    context: &Context,
    opened: Option<crate::engine::checkpoint::Opened>,
    report: &mut Report,
) {
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
}
