//! A list file sorted into another at bounded memory per rank: the out-of-core form of
//! [`crate::sort::sort`] followed by [`crate::io::write`], writing the same bytes.
//!
//! 1. Each rank reads its share of the list ([`io::CacheShare`]) a piece at a time into a
//!    buffer of at most half its limit. If no rank's share outgrows that, nothing spills: the
//!    shares are returned whole ([`Sorted::InMemory`]) for the in-memory sort.
//! 2. Otherwise each full buffer is sorted and written as a run to the rank's spill file,
//!    with regular samples weighted by the records they stand for.
//! 3. The samples of all ranks give `size - 1` splitters (as in the in-memory sample sort).
//! 4. Each rank merges its runs and sends every record to the rank of its bucket, in rounds of
//!    a bounded number of bytes (one `alltoallv` a round); receivers append what they get to a
//!    run per sending rank in a second spill file.
//! 5. Each rank merges its received runs (one per sender) straight into its region of the
//!    output list ([`io::write_v4_stream`], published under the list's name only when every
//!    rank finished).

use super::dir::{SpillDir, SpillFile};
use super::merge::Merge;
use super::run::{Run, RunCursor, RunWriter};
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::io;
use crate::path::{display, PathLike};
use crate::record::{Detail, FileList, FileType};
use crate::sort::{items_of, splitters, At, Item, Key, Order};
use rayon::slice::ParallelSliceMut;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use steal::{Comm, CommExt, ReduceOp};

/// Samples one rank contributes at most (over all its runs), for ranks `size`: 2^16 over all
/// ranks, at least 256 a rank (as the in-memory sort's budget, a quarter of it).
pub(super) fn samples_per_rank(size: usize) -> usize {
    ((1 << 16) / size).max(256)
}

/// What [`sort_list_file`] did.
// Made once per run and taken apart at once: boxing the list would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Sorted {
    /// The input is not a cache list in a file (a text list, standard input): read it with
    /// [`io::read_as`] and sort it in memory.
    NotCache,
    /// No rank's share outgrew the limit: this rank's share, read whole and unsorted (as
    /// [`io::read`] gives it), for [`crate::sort::sort`] and [`io::write`]. Nothing was
    /// written.
    InMemory(FileList),
    /// The list was sorted through spill files and written.
    Spilled(SpillReport),
}

/// How a spilled sort went; the same on every rank.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpillReport {
    /// Records sorted (all ranks).
    pub records: u64,
    /// Regular files among them.
    pub files: u64,
    /// Directories.
    pub dirs: u64,
    /// Symbolic links.
    pub links: u64,
    /// Records of any other type.
    pub others: u64,
    /// Bytes of the regular files.
    pub bytes: u64,
    /// Sorted runs the ranks wrote while reading (all ranks).
    pub runs: u64,
    /// Bytes written to spill files by all ranks together.
    pub spill_bytes: u64,
    /// The most any one rank wrote to its spill files (its peak disk use: its files are kept
    /// until its part of the output is written).
    pub spill_bytes_max_rank: u64,
}

impl SpillReport {
    /// The report of every rank's runs (collective): this rank's `sums` of its records (records,
    /// files, dirs, links, others, bytes), its `runs` and the bytes it `spilled`, summed over the
    /// ranks, with the most any rank spilled.
    pub(super) fn over_ranks(
        comm: &dyn Comm,
        sums: [u64; 6],
        runs: u64,
        spilled: u64,
    ) -> SpillReport {
        let mut total = [0u64; 8];
        total[..6].copy_from_slice(&sums);
        total[6] = runs;
        total[7] = spilled;
        comm.allreduce(&mut total, ReduceOp::Sum);
        SpillReport {
            records: total[0],
            files: total[1],
            dirs: total[2],
            links: total[3],
            others: total[4],
            bytes: total[5],
            runs: total[6],
            spill_bytes: total[7],
            spill_bytes_max_rank: comm.max(spilled),
        }
    }
}

/// What [`sort_list_file`] needs besides the files.
#[derive(Clone, Copy, Debug)]
pub struct SortFileOptions<'a> {
    /// The sort keys (see [`crate::sort`]).
    pub keys: &'a [Key],
    /// Bytes of memory this rank may hold for records (see [`super::MemoryLimit`]).
    pub limit: u64,
    /// Where spill files go.
    pub dir: &'a SpillDir,
    /// Set by a signal: the sort stops, with an error, and writes nothing.
    pub stop: Option<&'a AtomicBool>,
}

/// Sort the list file `input` into the v4 list file `output` (not `-`) by `keys` with at most
/// about `limit` bytes of records in memory per rank (collective; every rank gets the same
/// result). The output is byte-identical to what [`crate::sort::sort`] then [`io::write`]
/// write for the same list; it is written under a temporary name and renamed over `output`
/// only once complete, so a failure (a full TMPDIR: an error naming it) or a stop leaves no
/// output and the input untouched.
///
/// Returns [`Sorted::NotCache`] for a list that is not a v3/v4 file, and
/// [`Sorted::InMemory`] when every rank's share fits half the limit (then nothing spilled and
/// nothing was written: the caller sorts and writes as usual).
pub fn sort_list_file(
    comm: &dyn Comm,
    input: impl PathLike,
    output: impl PathLike,
    options: &SortFileOptions<'_>,
) -> Result<Sorted> {
    let output = output.path_bytes();
    let Some(mut share) = io::open_cache_share(comm, input)? else {
        return Ok(Sorted::NotCache);
    };
    let users = std::mem::take(&mut share.users);
    let groups = std::mem::take(&mut share.groups);
    let order = Order::new(options.keys, &users, &groups);
    let stopped = || {
        options
            .stop
            .is_some_and(|s| s.load(AtomicOrdering::Relaxed))
    };
    let interrupted = || {
        Error::Invalid(format!(
            "sort interrupted by a signal: {} not written",
            display(output)
        ))
    };

    // 1-2: read, and spill sorted runs while the buffer outgrows half the limit.
    let mut reading = Reading::new(comm, &share, options);
    let local = (|| {
        // Pieces of at most 4 MiB, and of no more than the buffer holds (the buffer is
        // checked after each piece: a piece is what it can overshoot).
        let rec = share.record_bytes().max(1);
        let chunk = ((4 << 20) / rec).min(options.limit / 2 / rec) as usize;
        loop {
            if stopped() {
                return Err(interrupted());
            }
            if share.read_into(&mut reading.buf, chunk.max(1))? == 0 {
                return Ok(());
            }
            if reading.full() {
                reading.spill(&order)?;
            }
        }
    })();
    comm.agree(local)?;
    if !comm.any(reading.spill.is_some()) {
        let mut list = reading.buf;
        list.users = users;
        list.groups = groups;
        list.shrink_to_fit();
        return Ok(Sorted::InMemory(list));
    }
    let local = if reading.buf.is_empty() {
        Ok(())
    } else {
        reading.spill(&order)
    };
    comm.agree(local)?;
    let Reading {
        spill: runs_file,
        runs,
        samples,
        weights,
        longest,
        sums,
        ..
    } = reading;
    // A rank whose share was empty still takes part, with no run (and its spill file is
    // agreed on: a rank that cannot make one must not leave the others in the exchange).
    let runs_file = comm.agree(match runs_file {
        Some(f) => Ok(f),
        None => options.dir.create(),
    })?;
    let spilled = SortedRuns {
        file: runs_file,
        runs,
        samples,
        weights,
        longest,
        sums: [sums[0], sums[1], sums[2], sums[3], sums[4], sums[5]],
    };
    let tables = (&users, &groups);
    let ends = (
        &stopped as &dyn Fn() -> bool,
        &interrupted as &dyn Fn() -> Error,
    );
    distribute_and_write(comm, spilled, &order, tables, output, options, ends).map(Sorted::Spilled)
}

/// A rank's records in sorted runs of a spill file, with their samples and counts: what
/// [`distribute_and_write`] takes.
pub(super) struct SortedRuns {
    pub(super) file: SpillFile,
    pub(super) runs: Vec<Run>,
    pub(super) samples: FileList,
    pub(super) weights: Vec<u64>,
    /// The longest path of the runs (`None`: no record).
    pub(super) longest: Option<u64>,
    /// Records, files, dirs, links, others, bytes of the runs.
    pub(super) sums: [u64; 6],
}

/// Phases 3-5 of [`sort_list_file`] from every rank's `spilled` runs (sorted by `order`):
/// splitters from the samples, the exchange in bounded rounds, and the merge of what each rank
/// received into its region of the v4 list `output` (with the id `tables`). Collective.
/// `ends`: whether a stop was asked for, and the error it makes.
pub(super) fn distribute_and_write(
    comm: &dyn Comm,
    spilled: SortedRuns,
    order: &Order<'_>,
    (users, groups): (&IdTable, &IdTable),
    output: &[u8],
    options: &SortFileOptions<'_>,
    (stopped, interrupted): (&dyn Fn() -> bool, &dyn Fn() -> Error),
) -> Result<SpillReport> {
    let SortedRuns {
        file: runs_file,
        runs,
        samples,
        weights,
        longest,
        sums,
    } = spilled;

    // 3: splitters from every rank's samples.
    let pivots = pick_splitters(comm, &samples, &weights, order);
    drop(samples);

    // 4: exchange in bounded rounds.
    let received = comm.agree(options.dir.create())?;
    let past = |list: &FileList, i: usize, bucket: usize| {
        pivots[bucket]
            .as_ref()
            .is_some_and(|p| order.cmp(At::new(list, i), At::new(p, 0)) != Ordering::Less)
    };
    let exchanged = exchange(
        comm,
        &runs_file,
        runs.clone(),
        &received,
        &past,
        order,
        options,
        stopped,
        interrupted,
    );
    let spilled_first = runs_file.len();
    drop(runs_file);
    let received_runs = exchanged?;

    // 5: merge what was received into this rank's region of the output.
    let mine: u64 = received_runs.iter().map(|r| r.records).sum();
    let longest = comm.max(longest.map_or(0, |l| l + 1)).checked_sub(1);
    let block = block_bytes(options.limit, received_runs.len());
    let cursors = received_runs
        .into_iter()
        .map(|r| RunCursor::new(r, Detail::Stat, block))
        .collect();
    io::write_v4_stream(comm, output, (users, groups), longest, mine, |sink| {
        let mut merge = Merge::new(&received, order, cursors)?;
        let mut n = 0u64;
        while let Some((list, i)) = merge.peek() {
            let meta = list.meta(i).expect("a stat list");
            sink.push(list.path(i), &meta)?;
            merge.advance()?;
            n += 1;
            if n % 4096 == 0 && stopped() {
                return Err(interrupted());
            }
        }
        Ok(())
    })?;

    let spilled = spilled_first + received.len();
    Ok(SpillReport::over_ranks(
        comm,
        sums,
        runs.len() as u64,
        spilled,
    ))
}

/// Bytes read per block of each of `runs` merged at once within `limit`: a quarter of the
/// limit over the runs, between 4 KiB and 4 MiB.
pub(super) fn block_bytes(limit: u64, runs: usize) -> usize {
    (limit / 4 / runs.max(1) as u64).clamp(4 << 10, 4 << 20) as usize
}

/// Phases 1-2 of one rank: the buffer being filled, the runs spilled, their samples, counts.
/// (Also the first phase of [`super::join`], which fills `buf` from a list in memory.)
pub(super) struct Reading<'a> {
    pub(super) dir: &'a SpillDir,
    /// Bytes of memory the buffer (and the sort of it) may take.
    budget: u64,
    /// Samples to take of each run.
    per_run: usize,
    pub(super) buf: FileList,
    pub(super) spill: Option<SpillFile>,
    pub(super) runs: Vec<Run>,
    pub(super) samples: FileList,
    pub(super) weights: Vec<u64>,
    pub(super) longest: Option<u64>,
    /// Records, files, dirs, links, others, bytes, then runs and spill bytes (set later).
    pub(super) sums: [u64; 8],
}

impl<'a> Reading<'a> {
    fn new(comm: &dyn Comm, share: &io::CacheShare, options: &SortFileOptions<'a>) -> Reading<'a> {
        let budget = options.limit / 2;
        // The runs this share makes at most: its bytes in the file (each record at least its
        // path plus 60 bytes in memory) over the budget.
        let runs = (share.remaining() * share.record_bytes()).div_ceil(budget.max(1));
        let per_run = (samples_per_rank(comm.size()) as u64 / runs.max(1)).max(1) as usize;
        Reading::with(options.dir, budget, per_run)
    }

    /// Runs of at most about `budget` bytes in `dir`, `per_run` samples taken of each.
    pub(super) fn with(dir: &'a SpillDir, budget: u64, per_run: usize) -> Reading<'a> {
        Reading {
            dir,
            budget,
            per_run,
            buf: FileList::new(Detail::Stat),
            spill: None,
            runs: Vec::new(),
            samples: FileList::new(Detail::Stat),
            weights: Vec::new(),
            longest: None,
            sums: [0; 8],
        }
    }

    /// Count the records of `buf` (spilled: the in-memory path counts its own).
    fn count(&mut self, buf: &FileList) {
        for e in buf.iter() {
            self.longest = self.longest.max(Some(e.path.len() as u64));
            self.sums[0] += 1;
            match e.kind {
                FileType::File => {
                    self.sums[1] += 1;
                    self.sums[5] += e.meta.map_or(0, |m| m.size);
                }
                FileType::Dir => self.sums[2] += 1,
                FileType::Symlink => self.sums[3] += 1,
                _ => self.sums[4] += 1,
            }
        }
    }

    /// The buffer and what sorting it takes (an [`Item`] a record) reached the budget.
    pub(super) fn full(&self) -> bool {
        held_bytes(&self.buf) >= self.budget
    }

    /// Halve the samples held when there are more than `cap` (every other one is kept, with
    /// the weight of the one dropped after it), and take half as many of each later run: a
    /// reading that cannot know its runs in advance (a walk) keeps its samples bounded.
    /// Samples only steer the balance of the ranks' ranges, so a weight moved to a sample of
    /// the next run costs nothing but a little balance.
    pub(super) fn thin(&mut self, cap: usize) {
        if self.samples.len() <= cap.max(1) {
            return;
        }
        let keep: Vec<usize> = (0..self.samples.len()).step_by(2).collect();
        self.weights = self.weights.chunks(2).map(|w| w.iter().sum()).collect();
        self.samples = self.samples.select(keep);
        self.per_run = (self.per_run / 2).max(1);
    }

    /// Sort the buffer, write it as a run and keep its samples; the buffer is emptied.
    pub(super) fn spill(&mut self, order: &Order<'_>) -> Result<()> {
        if self.spill.is_none() {
            self.spill = Some(self.dir.create()?);
        }
        let buf = std::mem::replace(&mut self.buf, FileList::new(Detail::Stat));
        self.count(&buf);
        let file = self.spill.as_ref().expect("created above");
        let mut items = items_of(&buf);
        items.par_sort_unstable_by(|a, b| order.cmp(a.at(&buf), b.at(&buf)));
        // Regular samples, each weighted by the records up to the next.
        let n = items.len();
        let s = self.per_run.min(n);
        for k in 0..s {
            let (at, next) = (k * n / s, (k + 1) * n / s);
            self.samples.push_from(&buf, items[at].index());
            self.weights.push((next - at) as u64);
        }
        let mut w = RunWriter::new(1 << 20);
        for it in &items {
            buf.encode_record(it.index(), w.buf());
            w.added(file, 1)?;
        }
        self.runs.push(w.finish(file)?);
        Ok(())
    }
}

/// Bytes `list` holds and sorting it takes (an [`Item`] a record).
pub(super) fn held_bytes(list: &FileList) -> u64 {
    (list.heap_bytes() + list.len() * std::mem::size_of::<Item<'_>>()) as u64
}

/// The splitter records (`size - 1`, `None` past the end), the same on every rank, from every
/// rank's weighted samples (collective).
pub(super) fn pick_splitters(
    comm: &dyn Comm,
    samples: &FileList,
    weights: &[u64],
    order: &Order<'_>,
) -> Vec<Option<FileList>> {
    let mut mine = steal::typed::encode(&weights.to_vec());
    for i in 0..samples.len() {
        samples.encode_record(i, &mut mine);
    }
    let gathered = comm.allgatherv(&mine);
    drop(mine);
    let mut all = FileList::new(Detail::Stat);
    let mut all_weights: Vec<u64> = Vec::new();
    for bytes in &gathered {
        let (w, records) = steal::typed::decode_prefix::<Vec<u64>>(bytes)
            .unwrap_or_else(|e| panic!("spill sort samples: {e}"));
        all_weights.extend(w);
        all.decode_records(records);
    }
    splitters(&all, &all_weights, order, comm.size())
        .into_iter()
        .map(|s| s.map(|i| all.select([i])))
        .collect()
}

/// Phase 4: merge this rank's `runs` (sorted by `order`) and send each record to its bucket's
/// rank in rounds of bounded bytes; returns the runs received, one per sending rank, in
/// `received` (collective; a local failure ends the rounds on every rank and is agreed).
/// `past(list, i, b)`: record `i` of `list` lies at or past splitter `b` (of `size - 1`), so
/// belongs to a later bucket than `b`.
#[allow(clippy::too_many_arguments)]
pub(super) fn exchange(
    comm: &dyn Comm,
    runs_file: &SpillFile,
    runs: Vec<Run>,
    received: &SpillFile,
    past: &dyn Fn(&FileList, usize, usize) -> bool,
    order: &Order<'_>,
    options: &SortFileOptions<'_>,
    stopped: &dyn Fn() -> bool,
    interrupted: &dyn Fn() -> Error,
) -> Result<Vec<Run>> {
    let (size, me) = (comm.size(), comm.rank());
    // Each rank sends at most `batch` bytes a round, so receives at most `size` times that.
    let batch = (options.limit / 4 / size as u64).max(4 << 10) as usize;
    let block = block_bytes(options.limit, runs.len());
    let cursors = runs
        .into_iter()
        .map(|r| RunCursor::new(r, Detail::Stat, block))
        .collect();
    let mut writers: Vec<RunWriter> = (0..size)
        .map(|_| RunWriter::new((batch / 2).max(4 << 10)))
        .collect();
    let mut local: Result<()> = Ok(());
    let mut merge = match Merge::new(runs_file, order, cursors) {
        Ok(m) => Some(m),
        Err(e) => {
            local = Err(e);
            None
        }
    };
    let mut bucket = 0usize;
    loop {
        let mut sends = vec![Vec::new(); size];
        let mut more = false;
        if let (Some(m), true) = (merge.as_mut(), local.is_ok()) {
            local = (|| {
                let mut filled = 0usize;
                let mut n = 0u64;
                while let Some((list, i)) = m.peek() {
                    if filled >= batch {
                        more = true;
                        break;
                    }
                    while bucket + 1 < size && past(list, i, bucket) {
                        bucket += 1;
                    }
                    let before = sends[bucket].len();
                    if bucket == me {
                        list.encode_record(i, writers[me].buf());
                        writers[me].added(received, 1)?;
                    } else {
                        list.encode_record(i, &mut sends[bucket]);
                        filled += sends[bucket].len() - before;
                    }
                    m.advance()?;
                    n += 1;
                    if n % 4096 == 0 && stopped() {
                        return Err(interrupted());
                    }
                }
                Ok(())
            })();
        }
        let got = comm.alltoallv(sends);
        for (src, bytes) in got.iter().enumerate() {
            if src != me && !bytes.is_empty() && local.is_ok() {
                let (records, _) = FileList::new(Detail::Stat).count_encoded(bytes);
                writers[src].buf().extend_from_slice(bytes);
                local = writers[src].added(received, records as u64);
            }
        }
        drop(got);
        let mut state = [u64::from(more && local.is_ok()), u64::from(local.is_err())];
        comm.allreduce(&mut state, ReduceOp::Max);
        if state[0] == 0 || state[1] == 1 {
            break;
        }
    }
    drop(merge);
    let runs = local.and_then(|()| {
        writers
            .into_iter()
            .map(|w| w.finish(received))
            .collect::<Result<Vec<Run>>>()
    });
    comm.agree(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::IdTable;
    use crate::record::Meta;
    use crate::sort::parse_keys;
    use std::os::unix::ffi::OsStrExt;

    /// A list with duplicate keys, equal paths of different types, names that are not UTF-8.
    fn list(rank: usize, n: u64) -> FileList {
        let mut l = FileList::new(Detail::Stat);
        for i in 0..n {
            let k = i * 7919 % n;
            let mut p = format!("/d/{}/f{k}", k % 13).into_bytes();
            if k % 17 == 0 {
                p.extend_from_slice(b"\xff\xfe");
            }
            let meta = Meta {
                mode: if k % 11 == 0 { 0o040755 } else { 0o100644 },
                uid: (k % 3) as u32,
                gid: (k % 5) as u32,
                size: k % 29,
                mtime: (k % 31) as i64 - 10,
                mtime_nsec: (k % 2) as u32,
                ..Meta::default()
            };
            l.push(&p, meta.file_type(), Some(meta));
            if rank == 0 && k % 97 == 0 {
                // The same record twice.
                l.push(&p, meta.file_type(), Some(meta));
            }
        }
        l.users = IdTable {
            entries: vec![(b"zed".to_vec(), 0), (b"amy".to_vec(), 1)],
        };
        l
    }

    #[test]
    fn a_spilled_sort_writes_the_bytes_of_the_in_memory_sort_at_1_2_3_ranks() {
        let tmp = tempfile::tempdir().unwrap();
        let input = tmp.path().join("in.mfu");
        steal::local::run(2, |comm| {
            io::write(comm, &list(comm.rank(), 700), &input, io::Format::V4).unwrap()
        });
        let spill = tmp.path().join("spill");
        std::fs::create_dir(&spill).unwrap();
        let dir = SpillDir::new(Some(spill.as_os_str().as_bytes()));
        for spec in ["name", "-size", "mtime", "user,-gid", "-name"] {
            let keys = parse_keys(spec).unwrap();
            let want = tmp.path().join("want.mfu");
            steal::local::run(1, |comm| {
                let l = io::read(comm, &input).unwrap();
                let sorted = crate::sort::sort(comm, l, &keys).unwrap();
                io::write(comm, &sorted, &want, io::Format::V4).unwrap();
            });
            for ranks in [1, 2, 3] {
                let got = tmp.path().join(format!("got{ranks}.mfu"));
                let reports = steal::local::run(ranks, |comm| {
                    let opts = SortFileOptions {
                        keys: &keys,
                        limit: 4 << 10,
                        dir: &dir,
                        stop: None,
                    };
                    match sort_list_file(comm, &input, &got, &opts).unwrap() {
                        Sorted::Spilled(r) => r,
                        other => panic!("{spec} at {ranks}: did not spill: {other:?}"),
                    }
                });
                let r = &reports[0];
                assert!(reports.iter().all(|x| x == r), "the same report everywhere");
                assert_eq!(r.records, 700 * 2 + 8);
                assert!(r.runs > 10 && r.spill_bytes > 0, "{r:?}");
                assert!(
                    std::fs::read(&want).unwrap() == std::fs::read(&got).unwrap(),
                    "{spec} at {ranks} ranks: the bytes differ"
                );
                assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0);
            }
        }
        // Below the limit: nothing spills, the shares come back whole.
        let keys = parse_keys("name").unwrap();
        let lens = steal::local::run(2, |comm| {
            let opts = SortFileOptions {
                keys: &keys,
                limit: 64 << 20,
                dir: &dir,
                stop: None,
            };
            let out = tmp.path().join("unused.mfu");
            match sort_list_file(comm, &input, &out, &opts).unwrap() {
                Sorted::InMemory(l) => (l.len(), l.users.entries.len()),
                other => panic!("spilled: {other:?}"),
            }
        });
        assert_eq!(lens, vec![(704, 2), (704, 2)]);
        assert!(!tmp.path().join("unused.mfu").exists());
    }

    #[test]
    fn a_stop_writes_nothing_and_a_text_list_is_not_read_here() {
        let tmp = tempfile::tempdir().unwrap();
        let input = tmp.path().join("in.mfu");
        steal::local::run(1, |comm| {
            io::write(comm, &list(0, 300), &input, io::Format::V4).unwrap()
        });
        let dir = SpillDir::new(Some(tmp.path().as_os_str().as_bytes()));
        let keys = parse_keys("name").unwrap();
        let stop = AtomicBool::new(true);
        let out = tmp.path().join("out.mfu");
        let errs = steal::local::run(2, |comm| {
            let opts = SortFileOptions {
                keys: &keys,
                limit: 4 << 10,
                dir: &dir,
                stop: Some(&stop),
            };
            sort_list_file(comm, &input, &out, &opts)
                .unwrap_err()
                .to_string()
        });
        assert!(
            errs[0].contains("interrupted") && errs[0].contains("out.mfu"),
            "{errs:?}"
        );
        assert!(!out.exists());
        let text = tmp.path().join("in.txt");
        std::fs::write(&text, b"/a\n/b\n").unwrap();
        let got = steal::local::run(1, |comm| {
            let opts = SortFileOptions {
                keys: &keys,
                limit: 4 << 10,
                dir: &dir,
                stop: None,
            };
            matches!(
                sort_list_file(comm, &text, &out, &opts).unwrap(),
                Sorted::NotCache
            )
        });
        assert_eq!(got, vec![true]);
    }
}
