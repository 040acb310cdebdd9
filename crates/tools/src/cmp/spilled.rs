//! `cmp` beyond its memory limit: both walked lists spill to sorted runs and are paired by a
//! merge join ([`flist::spill::join`]), each rank a range of relative paths, instead of a
//! table of one side in memory. What the join yields is counted at once, except the pairs
//! whose data must be read: those wait in a spill file (both records and the bits of their
//! fields) and are compared in rounds of a bounded number of files, as the in-memory path
//! compares its pairs. The records each `-o` list gets go to runs of the same spill file and
//! are streamed into the list at the end. The counts, report and lists are those of the
//! in-memory path; a list holds the same records, in another order (each rank's records in
//! relative-path order).

use super::content::{self, ReadOptions, Resume, Verdict};
use super::{
    both_states, differ_bits, finish_compare, read_options, round_files, verdict_bits, Options,
    Report, Side, Tally, WalkPlan, NOT_COMPARED,
};
use crate::engine::compare_expr::{Field, Output, State, States};
use crate::engine::context::Context;
use crate::engine::copy::Mapping;
use crate::engine::pairing::pair_states;
use flist::io::Format;
use flist::path::display;
use flist::spill::run::{Run, RunCursor, RunWriter};
use flist::spill::{join, spill_side, JoinOptions, JoinSide, Joint, SpillDir, SpillFile};
use flist::{Detail, FileList};
use steal::{Comm, CommExt, ReduceOp};

/// What spilled, for the report; the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Spilled {
    /// Sorted runs the ranks wrote of the two lists.
    pub runs: u64,
    /// Bytes written to spill files by all ranks together (the lists' runs, the exchange, the
    /// pairs waiting for their data and the `-o` records).
    pub spill_bytes: u64,
    /// The most any one rank wrote to its spill files.
    pub spill_bytes_max_rank: u64,
    /// Where the spill files went.
    pub tmpdir: String,
}

/// Refuse a spill directory `dir` inside the tree `src` or `dest` (or one of them): the
/// message names both.
pub fn refuse_tmpdir_inside(dir: &[u8], src: &[u8], dest: &[u8]) -> Result<(), String> {
    for (what, tree) in [("SRC", src), ("DEST", dest)] {
        if crate::engine::outputs::refuse_inside(&[("TMPDIR", dir)], &[(what, tree)]).is_err() {
            return Err(format!(
                "TMPDIR {} lies inside {what} {}: spill files are never written in a tree \
                 the run reads or writes (refused; set --tmpdir outside both trees)",
                display(dir),
                display(tree)
            ));
        }
    }
    Ok(())
}

/// Spill this rank's share `list` of the tree `root` (one of `trees`: SRC, DEST) to sorted
/// runs for the join (collective). A spill directory inside either tree is refused.
pub(super) fn spill(
    comm: &dyn Comm,
    list: FileList,
    root: &[u8],
    trees: (&[u8], &[u8]),
    plan: &WalkPlan<'_>,
) -> Result<JoinSide, String> {
    refuse_tmpdir_inside(plan.dir.path(), trees.0, trees.1)?;
    spill_side(comm, list, root, plan.limit, plan.dir).map_err(|e| e.to_string())
}

/// A failed spill: reported once (rank 0, the error is every rank's), marked in `report`.
pub(super) fn failed(
    comm: &dyn Comm,
    context: &Context,
    e: impl std::fmt::Display,
    report: &mut Report,
) -> super::Work {
    if comm.rank() == 0 {
        context.error(e);
    }
    report.spill_failed = true;
    super::Work::Failed
}

/// The records one `-o` list gets on this rank: SRC's, then DEST's (runs in the spill file).
struct OutputRuns {
    sides: [RunWriter; 2],
    records: u64,
    longest: Option<u64>,
}

/// The pairs of this rank after the join: those whose data is still to be compared waiting in
/// a spill file, the records of each `-o` list in runs of it.
pub(crate) struct Paired {
    file: SpillFile,
    /// The pairs waiting for their data: SRC's record then DEST's, pair after pair.
    pending: Run,
    /// The [`super::Pairs::flags`] bits of each waiting pair, 2 bytes each, in order.
    bits: SpillFile,
    /// Bytes of SRC's files waiting (each of the two files).
    pending_bytes: u64,
    outputs: Vec<OutputRuns>,
    /// SRC's id tables (the lists'), as the in-memory path writes them.
    tables: (flist::IdTable, flist::IdTable),
    map: Mapping,
    /// Where the join put each relative path ([`flist::spill::rank_of`]).
    splitters: Vec<Option<Vec<u8>>>,
    limit: u64,
    spilled: Spilled,
}

/// Bytes of the buffer of a run being written, and of a block read back, within `limit`.
fn buffer_bytes(limit: u64, buffers: usize) -> usize {
    (limit / 8 / buffers.max(1) as u64).clamp(4 << 10, 1 << 20) as usize
}

/// Join the spilled lists `sides` (SRC's, DEST's) and count what needs no data read, keeping
/// the rest and the `-o` records in spill files (`spill`: the limit in bytes and the spill
/// directory). Collective; a failure (a full TMPDIR) is every rank's error.
pub(super) fn pair_up(
    comm: &dyn Comm,
    options: &Options,
    sides: (JoinSide, JoinSide),
    map: Mapping,
    exprs: &[&Output],
    tally: &mut Tally,
    spill: (u64, &SpillDir),
) -> flist::error::Result<Paired> {
    let (limit, dir) = spill;
    let tables = (sides.0.users.clone(), sides.0.groups.clone());
    let joined = join(comm, sides.0, sides.1, &JoinOptions { limit, dir })?;
    let made = comm.agree(dir.create().and_then(|f| Ok((f, dir.create()?))));
    let (file, bits) = made?;
    let writers = 2 * options.outputs.len() + 2;
    let cap = buffer_bytes(limit, writers);
    let mut outputs: Vec<OutputRuns> = options
        .outputs
        .iter()
        .map(|_| OutputRuns {
            sides: [RunWriter::new(cap), RunWriter::new(cap)],
            records: 0,
            longest: None,
        })
        .collect();
    let mut pending = RunWriter::new(cap);
    let mut bits_buf = Vec::new();
    let mut pending_bytes = 0u64;
    let context = &options.context;
    let only_src = States::only(State::OnlySrc);
    let only_dest = States::only(State::OnlyDest);
    let local = joined.each(|j| {
        match j {
            Joint::OnlyA(l, i) => {
                tally.count(Side::OnlySrc, &only_src, exprs);
                keep(
                    &mut outputs,
                    options,
                    &only_src,
                    &file,
                    [Some((l, i)), None],
                )?;
            }
            Joint::OnlyB(l, i) => {
                tally.count(Side::OnlyDest, &only_dest, exprs);
                keep(
                    &mut outputs,
                    options,
                    &only_dest,
                    &file,
                    [None, Some((l, i))],
                )?;
            }
            Joint::Both((l, i), (m, k)) => {
                let (Some(s), Some(d)) = (l.meta(i), m.meta(k)) else {
                    unreachable!("walks give stat lists")
                };
                let c = pair_states(l.path(i), m.path(k), &s, &d);
                for e in &c.errors {
                    context.error(e);
                }
                if !c.errors.is_empty() {
                    tally.fail();
                }
                let mut states = c.states;
                if c.needs_data {
                    if options.lite {
                        let mtime_differs = (s.mtime, s.mtime_nsec) != (d.mtime, d.mtime_nsec);
                        states.differ_if(Field::Content, mtime_differs);
                    } else {
                        l.encode_record(i, pending.buf());
                        m.encode_record(k, pending.buf());
                        pending.added(&file, 2)?;
                        bits_buf.extend_from_slice(&differ_bits(&states).to_le_bytes());
                        if bits_buf.len() >= cap {
                            bits.append(&bits_buf)?;
                            bits_buf.clear();
                        }
                        pending_bytes += s.size;
                        return Ok(());
                    }
                }
                tally.count(Side::Both, &states, exprs);
                keep(
                    &mut outputs,
                    options,
                    &states,
                    &file,
                    [Some((l, i)), Some((m, k))],
                )?;
            }
        }
        Ok(())
    });
    let local = local.and_then(|()| {
        bits.append(&bits_buf)?;
        pending.finish(&file)
    });
    let pending = comm.agree(local)?;
    let spilled = Spilled {
        runs: joined.runs,
        spill_bytes: joined.spill_bytes,
        // This rank's, until the total is known ([`Paired::write`]).
        spill_bytes_max_rank: joined.spill_bytes_this_rank,
        tmpdir: display(dir.path()).into_owned(),
    };
    let splitters = joined.splitters().to_vec();
    // The join's own files are freed here.
    drop(joined);
    Ok(Paired {
        file,
        pending,
        bits,
        pending_bytes,
        outputs,
        tables,
        map,
        splitters,
        limit,
        spilled,
    })
}

/// Add the records of a path (`records`: SRC's, DEST's, each when that side has it) to the
/// `-o` lists whose expression `states` matches.
fn keep(
    outputs: &mut [OutputRuns],
    options: &Options,
    states: &States,
    file: &SpillFile,
    records: [Option<(&FileList, usize)>; 2],
) -> flist::error::Result<()> {
    for (o, out) in options.outputs.iter().zip(outputs.iter_mut()) {
        if !o.matches(states) {
            continue;
        }
        for (w, r) in out.sides.iter_mut().zip(records) {
            if let Some((l, i)) = r {
                l.encode_record(i, w.buf());
                w.added(file, 1)?;
                out.records += 1;
                out.longest = out.longest.max(Some(l.path(i).len() as u64));
            }
        }
    }
    Ok(())
}

/// A `-o` list's records on this rank, written: SRC's run, DEST's run, the records of both
/// and the longest path.
type ListRuns = (Run, Run, u64, Option<u64>);

/// Reads the 2-byte flags of the waiting pairs back in order, a block at a time.
struct BitsReader<'a> {
    file: &'a SpillFile,
    at: u64,
    buf: Vec<u8>,
    pos: usize,
    block: usize,
}

impl BitsReader<'_> {
    fn next(&mut self) -> flist::error::Result<u16> {
        if self.pos + 2 > self.buf.len() {
            let n = (self.file.len() - self.at).min(self.block as u64) as usize;
            self.buf.resize(n, 0);
            self.file.read_exact_at(&mut self.buf, self.at)?;
            self.at += n as u64;
            self.pos = 0;
        }
        let b = u16::from_le_bytes([self.buf[self.pos], self.buf[self.pos + 1]]);
        self.pos += 2;
        Ok(b)
    }
}

impl Paired {
    /// Compare the data of the waiting pairs over all ranks, in rounds of a bounded number of
    /// files (as many rounds on every rank), and count them. Returns the chunk size used.
    /// Collective. A failure to read the spill file back is every rank's, after the rounds.
    pub(super) fn compare(
        &mut self,
        comm: &dyn Comm,
        options: &Options,
        exprs: &[&Output],
        tally: &mut Tally,
        report: &mut Report,
        resume: Option<Resume<'_>>,
    ) -> u64 {
        let context = &options.context;
        let mut totals = [self.pending_bytes, rayon::current_num_threads() as u64];
        comm.allreduce(&mut totals, ReduceOp::Sum);
        // Each file's verdict goes to the rank the join gave its pair.
        let opts = ReadOptions {
            ranges: Some(&self.splitters),
            ..read_options(options, resume, totals)
        };
        let progress = context.progress(comm.rank(), "Compared");
        // Each waiting pair is two records in memory during its round (path and 60 bytes
        // each): a round holds about a quarter of the limit of them (at least 16 pairs: each
        // round is a few collectives).
        let round = round_files().min((self.limit / 4 / 256).max(16) as usize);
        let waiting = self.pending.records / 2;
        let rounds = comm.max(waiting.div_ceil(round as u64));
        let block = buffer_bytes(self.limit, 4);
        let mut cursor = RunCursor::new(self.pending.clone(), Detail::Stat, block);
        let mut bits = BitsReader {
            file: &self.bits,
            at: 0,
            buf: Vec::new(),
            pos: 0,
            block,
        };
        let mut local = cursor.load(&self.file);
        let (mut chunk_size, mut bytes_read, mut interrupted) = (0, 0, false);
        let mut not_compared = 0u64;
        for _ in 0..rounds {
            let (mut srcs, mut dests) = (FileList::new(Detail::Stat), FileList::new(Detail::Stat));
            let mut flags = Vec::new();
            while srcs.len() < round && local.is_ok() {
                let Some((l, i)) = cursor.current() else {
                    break;
                };
                srcs.push_from(l, i);
                local = (|| {
                    cursor.advance(&self.file)?;
                    let (m, k) = cursor.current().expect("pairs of records");
                    dests.push_from(m, k);
                    cursor.advance(&self.file)?;
                    flags.push(bits.next()?);
                    Ok(())
                })();
            }
            if local.is_err() {
                // Compare nothing more on this rank; the rounds go on for the others.
                srcs = FileList::new(Detail::Stat);
                dests = FileList::new(Detail::Stat);
                flags.clear();
            }
            let verdicts = if interrupted {
                vec![Verdict::NotCompared; srcs.len()]
            } else {
                let got = content::compare_files(
                    comm, context, &srcs, &self.map, &opts, &progress, resume,
                );
                chunk_size = chunk_size.max(got.chunk_size);
                bytes_read = got.bytes_read;
                interrupted = got.interrupted;
                got.verdicts
            };
            for (k, verdict) in verdicts.into_iter().enumerate() {
                let bits = flags[k] | verdict_bits(verdict, tally);
                if bits & NOT_COMPARED != 0 {
                    not_compared += 1;
                    continue;
                }
                let states = both_states(bits);
                tally.count(Side::Both, &states, exprs);
                if local.is_ok() {
                    local = keep(
                        &mut self.outputs,
                        options,
                        &states,
                        &self.file,
                        [Some((&srcs, k)), Some((&dests, k))],
                    );
                }
            }
        }
        finish_compare(
            comm,
            options,
            report,
            (bytes_read, interrupted),
            not_compared,
            totals[0],
        );
        if let Err(e) = comm.agree(local) {
            failed(comm, context, e, report);
        }
        chunk_size
    }

    /// Write each `-o` list from its runs (a v4 file streamed; a text list, or a list on
    /// standard output, read back into memory first: the records it holds), and fill in the
    /// report's spill figures. Collective.
    pub(super) fn write(
        self,
        comm: &dyn Comm,
        options: &Options,
        tally: &mut Tally,
        report: &mut Report,
    ) {
        let context = &options.context;
        let Paired {
            file,
            bits,
            outputs,
            tables,
            limit,
            mut spilled,
            ..
        } = self;
        let local: flist::error::Result<Vec<ListRuns>> = outputs
            .into_iter()
            .map(|o| {
                let [s, d] = o.sides;
                Ok((s.finish(&file)?, d.finish(&file)?, o.records, o.longest))
            })
            .collect();
        let mine = spilled.spill_bytes_max_rank;
        let here = file.len() + bits.len();
        let mut sums = [here];
        comm.allreduce(&mut sums, ReduceOp::Sum);
        spilled.spill_bytes += sums[0];
        spilled.spill_bytes_max_rank = comm.max(mine + here);
        report.spilled = Some(spilled);
        let runs = match comm.agree(local) {
            Ok(r) => r,
            Err(e) => {
                failed(comm, context, e, report);
                report.written = vec![false; options.outputs.len()];
                return;
            }
        };
        if report.spill_failed || report.interrupted {
            // As the in-memory path: a list without the files not compared would look complete.
            report.written = vec![false; options.outputs.len()];
            if comm.rank() == 0 && report.interrupted {
                for o in &options.outputs {
                    context.error(format!(
                        "{}: not written: the comparison was stopped before its end",
                        display(&o.file)
                    ));
                }
            }
            return;
        }
        let block = buffer_bytes(limit, 2);
        report.written = vec![true; options.outputs.len()];
        for ((o, (src_run, dest_run, records, longest)), ok) in
            options.outputs.iter().zip(runs).zip(&mut report.written)
        {
            let each = |f: &mut dyn FnMut(&FileList, usize) -> flist::error::Result<()>| {
                for run in [&src_run, &dest_run] {
                    let mut c = RunCursor::new(run.clone(), Detail::Stat, block);
                    c.load(&file)?;
                    while let Some((l, i)) = c.current() {
                        f(l, i)?;
                        c.advance(&file)?;
                    }
                }
                Ok(())
            };
            let written = if !options.text && o.file != b"-" {
                let longest = comm.max(longest.map_or(0, |l| l + 1)).checked_sub(1);
                flist::io::write_v4_stream(
                    comm,
                    &o.file,
                    (&tables.0, &tables.1),
                    longest,
                    records,
                    |sink| each(&mut |l, i| sink.push(l.path(i), &l.meta(i).expect("a stat list"))),
                )
            } else {
                let mut list = FileList::new(Detail::Stat);
                list.users = tables.0.clone();
                list.groups = tables.1.clone();
                let format = if options.text {
                    Format::Text
                } else {
                    Format::V4
                };
                comm.agree(each(&mut |l, i| {
                    list.push_from(l, i);
                    Ok(())
                }))
                .and_then(|()| flist::io::write(comm, &list, &o.file, format))
            };
            if let Err(e) = written {
                *ok = false;
                if comm.rank() == 0 {
                    context.error(e);
                    tally.fail_list();
                }
            }
        }
    }
}
