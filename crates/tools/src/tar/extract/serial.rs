//! `tar -x` of an archive in one compressed stream (`.tar.gz`, `.tar.bz2`, `.tar.xz`, zstd
//! without a seek table): such a stream decompresses front to back only, so rank 0 reads it
//! while a decoder thread decompresses ahead ([`TarStream`]), and extracts each entry as it
//! arrives, in archive order, as GNU tar does. The other ranks wait: decompression is the
//! bottleneck (one core's worth), and handing file data to other ranks would only add copies.
//!
//! Every rule of the parallel extraction holds: the selection (MEMBERs, rules,
//! `--strip-components`, owners by name) as [`super::adjuster`] and [`Matcher`] apply it, names
//! through [`clean`], writes through
//! [`Target`] (no symlink followed), a file whose data was cut short by damage never gets its
//! archived metadata and is named, directories get theirs last, deepest first.

use super::super::{Done, Options, Report};
use super::resume::{self, Resume};
use super::{
    adjuster, make_other, open_new, set_meta, times_of, DirCache, Failures, Layouts, Restore,
    INTERRUPTED,
};
use crate::engine::context::Error;
use crate::engine::copy::data::write_all_at;
use crate::engine::copy::meta::{write_xattrs, MetaOptions, Target as XattrTarget, XattrPolicy};
use crate::engine::copy::striping::Striping;
use crate::tar::archive::serial::{Codec, TarStream};
use crate::tar::archive::Archive;
use crate::tar::extract::beneath::{clean, explain, Target};
use crate::tar::extract::entries::{Entries as Store, Item};
use crate::tar::format::{Decoded, Kind, Segment};
use crate::tar::index;
use crate::tar::select::Matcher;
use flist::path::display;
use rustix::fd::{AsFd, BorrowedFd};
use rustix::fs::{Gid, Mode, Uid};
use std::time::Instant;
use steal::{Comm, CommExt};

/// What rank 0's read of the stream did.
#[derive(Default)]
struct Outcome {
    /// Entries extracted completely, metadata included.
    extracted: u64,
    /// Entries seen (one cut short by damage included).
    seen: u64,
    /// Data bytes written.
    bytes: u64,
    /// Entries of unsupported types (named).
    skipped: u64,
    /// The stream or a header was damaged (said).
    damaged: bool,
    /// A stop request ended the read.
    interrupted: bool,
    /// The target, when its file system kept no project ID an entry had.
    projid_unkept: Option<Vec<u8>>,
}

/// `tar -x` of `archive`, whose compression is `codec`, into `target`. Collective: rank 0
/// extracts, the others wait.
#[allow(clippy::too_many_arguments)]
pub(in super::super) fn run(
    comm: &dyn Comm,
    o: &Options,
    started: Instant,
    path: Vec<u8>,
    dest: Vec<u8>,
    archive: Archive,
    target: Target,
    codec: Codec,
) -> Result<Report, Error> {
    let fail = Failures::default();
    let mut out = Outcome::default();
    let matcher = Matcher::new(o);
    let mut credited = vec![false; matcher.members()];
    // Entries earlier runs extracted completely are read past (the stream decompresses front
    // to back only) without being written again.
    let mut resumed = super::resume::open(comm, o, &path, &archive, &dest, &target)?;
    // A second descriptor of the compressed file, sharing its offset: how far the decoder read.
    let mut probe = None;
    if comm.rank() == 0 {
        super::protect(&target, &archive, &path);
        let stripes = Striping::detect(&*o.lustre, std::slice::from_ref(&dest), o.stripe);
        let lay = Layouts {
            stripes: &stripes,
            dest: &dest,
            chunk: o.chunksize,
        };
        match archive
            .reopen()
            .and_then(|f| {
                probe = f.try_clone().ok();
                TarStream::open(codec, f)
            })
            .map(|s| s.expecting_end(archive.unended()))
        {
            Ok(stream) => {
                let chosen = Chosen {
                    matcher: &matcher,
                    credited: &mut credited,
                };
                let at = (&target, &lay, &resumed);
                out = extract(o, stream, at, &path, &fail, chosen)
            }
            Err(e) => {
                fail.add(&path, format_args!("read: {e}"));
                out.damaged = true;
            }
        }
    }
    crate::tar::archive::serial::wait_quietly(comm);
    crate::engine::copy::drive::warn_projid_unkept(comm, &o.context, out.projid_unkept.take());
    let not_found = matcher.not_found(comm, o, &credited);
    let failures = fail.take();
    for f in &failures {
        o.context.error(f);
    }
    let interrupted = comm.any(out.interrupted);
    // Stopped with a checkpoint: how far into the compressed archive the read got.
    let read = comm.bcast_with(0, || {
        use std::io::Seek;
        probe
            .as_mut()
            .and_then(|f| f.stream_position().ok())
            .unwrap_or(0)
    });
    let stopped =
        (interrupted && resumed.checkpoint.is_some()).then(|| crate::engine::context::Stopped {
            done: read.min(archive.len()),
            total: archive.len(),
            what: "bytes of the compressed archive read",
        });
    let mut report = Report {
        mode: Done::Extract,
        archive: path,
        directory: dest,
        entries: comm.sum(out.extracted),
        archive_entries: comm.sum(out.seen),
        bytes: comm.sum(out.bytes),
        skipped: comm.sum(out.skipped),
        failed: comm.sum(failures.len() as u64),
        scanned: true,
        damaged: comm.any(out.damaged),
        compression: Some(codec),
        serial: true,
        not_found,
        interrupted,
        stopped,
        notices: resumed.notices.clone(),
        ..Report::default()
    };
    if !resumed.finish(comm, o, interrupted) {
        report.failed += 1;
    }
    if comm.rank() == 0 && interrupted {
        o.context.error(format_args!(
            "interrupted (SIGINT/SIGTERM): stopped extracting {}; {} of the {} entries read \
             were extracted completely, the others are missing or incomplete (those carry no \
             archive times)",
            display(&report.archive),
            report.entries,
            report.archive_entries
        ));
    }
    Ok(Report {
        seconds: started.elapsed().as_secs_f64(),
        failures: o.context.failures(),
        ..report
    })
}

/// How metadata is restored, as the parallel extraction does it.
fn restore(o: &Options) -> Restore {
    let root = rustix::process::geteuid().is_root();
    Restore {
        owner: o.preserve_owner || root,
        modes: MetaOptions::new(o.preserve_perms || root, XattrPolicy::None),
        xattrs: o.xattrs,
    }
}

/// The selection of a run and the MEMBERs it credited so far (by MEMBER).
struct Chosen<'a> {
    matcher: &'a Matcher<'a>,
    credited: &'a mut [bool],
}

/// What the loop over the stream does after an entry.
enum Step {
    /// Go on with the next entry.
    Next,
    /// Stop reading: the stream is damaged or a stop was asked ([`Outcome`] says which).
    Stop,
}

/// One serial extraction: what every entry needs.
struct Serial<'a> {
    o: &'a Options,
    target: &'a Target,
    lay: &'a Layouts<'a>,
    /// The checkpoint and what earlier runs finished.
    resume: &'a Resume,
    /// The archive's path, for damage of the stream.
    path: &'a [u8],
    fail: &'a Failures,
    how: Restore,
    /// This process's effective user and group.
    ids: (u32, u32),
    progress: steal::progress::Progress,
}

/// Read the stream to its end (or its damage, or a stop request), extracting each entry
/// `chosen` takes (the data of the others is read past).
fn extract(
    o: &Options,
    mut stream: TarStream,
    (target, lay, resume): (&Target, &Layouts, &Resume),
    path: &[u8],
    fail: &Failures,
    chosen: Chosen<'_>,
) -> Outcome {
    let run = Serial {
        o,
        target,
        lay,
        resume,
        path,
        fail,
        how: restore(o),
        ids: (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        ),
        progress: o.context.progress(0, "Extracted"),
    };
    let filters = chosen.matcher.filters();
    let mut adjust = adjuster(chosen.matcher, run.how.owner && !o.numeric_owner);
    let mut out = Outcome::default();
    let mut dirs = DirCache::default();
    // Directories get their metadata at the end, deepest first (their files change their
    // mtime until then): kept as compact records.
    let mut directories = Store::default();
    loop {
        if o.context.stopped() {
            out.interrupted = true;
            break;
        }
        let mut d = match stream.next_entry() {
            Ok(Some(d)) => d,
            Ok(None) => break,
            Err(e) => {
                fail.add(path, e);
                out.damaged = true;
                break;
            }
        };
        out.seen += 1;
        if filters {
            let v = chosen.matcher.verdict(&d.header);
            if let Some(i) = v.credit {
                chosen.credited[i] = true;
            }
            if !v.take {
                continue;
            }
        }
        match adjust(&mut d) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(why) => {
                fail.add(&d.header.path, why);
                continue;
            }
        }
        let rel = match clean(&d.header.path) {
            Ok(rel) => rel,
            Err(e) => {
                fail.add(&d.header.path, e);
                continue;
            }
        };
        let step = run.entry(&mut stream, &d, &rel, &mut dirs, &mut directories, &mut out);
        if let Step::Stop = step {
            break;
        }
    }
    if !out.damaged && !out.interrupted {
        if let Some(e) = stream.decompression_error() {
            // Damage found at the end of the stream (a gzip member's CRC, say): GNU tar,
            // through gzip, says so too. Nothing extracted can be taken back; the archive is
            // named and the run fails.
            fail.add(path, e);
            out.damaged = true;
        }
    }
    drop(stream);
    if !out.interrupted {
        run.directories_last(&directories, &mut out);
    }
    out.projid_unkept = run.how.modes.unkept.take();
    out
}

impl Serial<'_> {
    /// Extract the entry `d` (cleaned name `rel`), its data read from `stream`.
    fn entry(
        &self,
        stream: &mut TarStream,
        d: &Decoded,
        rel: &[u8],
        dirs: &mut DirCache,
        directories: &mut Store,
        out: &mut Outcome,
    ) -> Step {
        let (fail, target, how) = (self.fail, self.target, &self.how);
        let mut one = Store::with_capacity(1);
        one.push(rel, d, true);
        let item = one.get(0);
        let done = self.resume.earlier.still_done(target, &item);
        // Directories and hard links are never marked (see `Extraction::mark_done`).
        if let (Some(bytes), false) = (done, matches!(item.kind, Kind::Dir | Kind::HardLink)) {
            if item.kind == Kind::File {
                // An earlier run extracted it: its data is read past, not written again.
                let index = d.sparse.is_none() && maybe_index(d, out.seen - 1);
                let Some(data) = self.read_past(stream, d, out, index) else {
                    return Step::Stop;
                };
                if index && is_index(&data, out.seen - 1, d.start) {
                    out.seen -= 1;
                    return Step::Next;
                }
            }
            out.bytes += bytes;
            out.extracted += 1;
            return Step::Next;
        }
        match item.kind {
            Kind::Dir => match target.dir(rel, true) {
                Ok(_) => directories.push(rel, d, true),
                Err(e) => fail.add(rel, explain(e)),
            },
            Kind::File if d.sparse.is_none() && maybe_index(d, out.seen - 1) => {
                // The dtar index member of an mfu-rs archive compressed by another tool:
                // hidden, as the parallel extraction hides it, when it indexes what came
                // before it; any other file of that name is extracted.
                let Some(data) = self.whole_data(stream, d, out) else {
                    return Step::Stop;
                };
                if is_index(&data, out.seen - 1, d.start) {
                    out.seen -= 1;
                    return Step::Next;
                }
                match self.file().extract(dirs, &item, d, &mut Slice(&data)) {
                    Ok(n) => self.extracted(out, &item, n, None),
                    Err(why) => fail.add(rel, why.text()),
                }
            }
            Kind::File => match self.file().extract(dirs, &item, d, stream) {
                Ok(n) => self.extracted(out, &item, n, None),
                Err(Failed::Entry(why)) => fail.add(rel, why),
                Err(Failed::Stream(why)) => {
                    fail.add(rel, format_args!("its data is incomplete: {why}"));
                    fail.add(self.path, why);
                    out.damaged = true;
                    return Step::Stop;
                }
                Err(Failed::Stopped) => {
                    fail.add(rel, INTERRUPTED);
                    out.interrupted = true;
                    return Step::Stop;
                }
            },
            Kind::HardLink => match make_other(target, &item) {
                Ok(()) => {
                    out.extracted += 1;
                    self.resume.linked(target, &item);
                }
                Err(why) => fail.add(rel, why),
            },
            Kind::Symlink | Kind::Fifo | Kind::Char | Kind::Block => {
                match make_other(target, &item)
                    .and_then(|()| set_meta((target, self.lay.dest), &item, how, self.resume.on()))
                {
                    Ok(st) => self.extracted(out, &item, 0, st.as_ref().map(resume::made_of)),
                    Err(why) => fail.add(rel, why),
                }
            }
            // A GNU volume label names the archive, not a file (as GNU tar).
            Kind::Other(b'V') => self.extracted(out, &item, 0, Some([0; 7])),
            Kind::Other(t) => {
                self.o.context.error(format_args!(
                    "{}: not extracted: entries of type '{}' are not supported",
                    display(rel),
                    t.escape_ascii()
                ));
                out.skipped += 1;
            }
        }
        Step::Next
    }

    /// The file writer of this run.
    fn file(&self) -> File<'_> {
        File {
            o: self.o,
            how: &self.how,
            ids: self.ids,
            lay: self.lay,
            target: self.target,
        }
    }

    /// Count `item`, with `n` bytes of data, extracted, and mark it so with what was `made`
    /// (`None`: taken from the entry at its name now, when a checkpoint is kept).
    fn extracted(&self, out: &mut Outcome, item: &Item, n: u64, made: Option<resume::Made>) {
        out.bytes += n;
        out.extracted += 1;
        self.progress.add(1, n);
        if self.resume.on() {
            let made = made.or_else(|| resume::made_at(self.target, item.rel));
            self.resume.done(item.start, n, made);
        }
    }

    /// Read the data of `d` past (an entry an earlier run extracted); kept and returned when
    /// `keep` (it may be the index member), else an empty vector. `None` when the stream is
    /// damaged (named).
    fn read_past(
        &self,
        stream: &mut TarStream,
        d: &Decoded,
        out: &mut Outcome,
        keep: bool,
    ) -> Option<Vec<u8>> {
        if keep {
            return self.whole_data(stream, d, out);
        }
        let len: u64 = match &d.sparse {
            Some(m) => m.iter().map(|s| s.len).sum(),
            None => d.header.size,
        };
        let mut done = 0u64;
        while done < len {
            let want = (len - done).min(usize::MAX as u64) as usize;
            match stream.take(want) {
                Ok(bytes) => done += bytes.len() as u64,
                Err(e) => {
                    self.fail.add(self.path, e);
                    out.damaged = true;
                    return None;
                }
            }
        }
        Some(Vec::new())
    }

    /// All the data of `d`, read from `stream`; `None` when the stream is damaged (named).
    fn whole_data(
        &self,
        stream: &mut TarStream,
        d: &Decoded,
        out: &mut Outcome,
    ) -> Option<Vec<u8>> {
        let mut data = Vec::with_capacity(d.header.size as usize);
        while (data.len() as u64) < d.header.size {
            let want = (d.header.size - data.len() as u64) as usize;
            match stream.take(want) {
                Ok(bytes) => data.extend_from_slice(bytes),
                Err(e) => {
                    self.fail.add(self.path, e);
                    out.damaged = true;
                    return None;
                }
            }
        }
        Some(data)
    }

    /// The directories' metadata, deepest first, once their contents are in place.
    fn directories_last(&self, directories: &Store, out: &mut Outcome) {
        let mut order: Vec<(usize, usize)> = (0..directories.len())
            .map(|i| (flist::path::depth(directories.rel(i)), i))
            .collect();
        order.sort_unstable_by_key(|&(depth, _)| std::cmp::Reverse(depth));
        for (_, i) in order {
            let item = directories.get(i);
            match set_meta((self.target, self.lay.dest), &item, &self.how, false) {
                Ok(_) => out.extracted += 1,
                Err(why) => self.fail.add(item.rel, why),
            }
        }
    }
}

/// Whether `d` may be the dtar index member of the `count` entries before it: a file named
/// `*.dtaridx` of the size such a member has.
fn maybe_index(d: &Decoded, count: u64) -> bool {
    d.header.path.ends_with(b".dtaridx") && d.header.size == index::data_len(count)
}

/// Whether `data` is the data of the index member of `count` entries that end at `end` (the
/// member's first header block): offsets increasing, the footer's count and end as said.
fn is_index(data: &[u8], count: u64, end: u64) -> bool {
    match index::decode_index(data) {
        Some((offsets, Some(at))) => {
            offsets.len() as u64 == count && at == end && index::valid_order(&offsets, end)
        }
        _ => false,
    }
}

/// Where a file's data comes from: the stream, or bytes already taken from it.
trait Source {
    /// Up to `max` bytes of the data from where the last call ended; an error when the data
    /// ends first or cannot be read.
    fn take(&mut self, max: usize) -> std::io::Result<&[u8]>;
}

impl Source for TarStream {
    fn take(&mut self, max: usize) -> std::io::Result<&[u8]> {
        TarStream::take(self, max)
    }
}

/// Data held in memory.
struct Slice<'a>(&'a [u8]);

impl<'a> Source for Slice<'a> {
    fn take(&mut self, max: usize) -> std::io::Result<&[u8]> {
        let data: &'a [u8] = self.0;
        let (head, rest) = data.split_at(max.min(data.len()));
        self.0 = rest;
        Ok(head)
    }
}

/// Why a file was not extracted.
enum Failed {
    /// This entry only (named with the reason); the stream reads on.
    Entry(String),
    /// The stream itself (damaged or cut short): nothing after it can be read.
    Stream(String),
    /// A stop request.
    Stopped,
}

impl Failed {
    /// What is said of the file.
    fn text(self) -> String {
        match self {
            Failed::Entry(why) => why,
            Failed::Stream(why) => format!("its data is incomplete: {why}"),
            Failed::Stopped => INTERRUPTED.to_string(),
        }
    }
}

/// What extracting a file needs.
struct File<'a> {
    o: &'a Options,
    how: &'a Restore,
    /// This process's effective user and group.
    ids: (u32, u32),
    lay: &'a Layouts<'a>,
    target: &'a Target,
}

impl File<'_> {
    /// Create the file of `item`, write its data as the stream brings it (each stored segment
    /// at its place for a sparse file), then give it its metadata through the descriptor.
    /// Returns the data bytes written. The stream is left at the entry's end either way,
    /// unless the stream itself failed.
    fn extract(
        &self,
        dirs: &mut DirCache,
        item: &Item,
        d: &Decoded,
        stream: &mut dyn Source,
    ) -> Result<u64, Failed> {
        let whole = [Segment {
            at: 0,
            len: d.header.size,
        }];
        let segments: &[Segment] = d.sparse.as_deref().unwrap_or(&whole);
        let fd = open_new(dirs, self.target, item, self.lay);
        let mut written = 0u64;
        let mut write_failed = None;
        for seg in segments {
            let mut done = 0u64;
            while done < seg.len {
                if self.o.context.stopped() {
                    return Err(Failed::Stopped);
                }
                let want = (seg.len - done).min(usize::MAX as u64) as usize;
                let bytes = stream
                    .take(want)
                    .map_err(|e| Failed::Stream(e.to_string()))?;
                if let (Ok(fd), None) = (&fd, &write_failed) {
                    match write_all_at(fd.as_fd(), bytes, seg.at + done) {
                        Ok(()) => written += bytes.len() as u64,
                        Err(e) => write_failed = Some(format!("{}: {}", e.op, e.source)),
                    }
                }
                done += bytes.len() as u64;
            }
        }
        let fd = fd.map_err(Failed::Entry)?;
        if let Some(why) = write_failed {
            return Err(Failed::Entry(why));
        }
        self.finish(dirs, item, fd.as_fd()).map_err(Failed::Entry)?;
        Ok(written)
    }

    /// The file's metadata, as the parallel extraction gives a file it wrote whole.
    fn finish(&self, dirs: &mut DirCache, h: &Item, fd: BorrowedFd<'_>) -> Result<(), String> {
        let step = |op: &str, r: Result<(), rustix::io::Errno>| {
            r.map_err(|e| format!("{op}: {}", explain(e)))
        };
        if h.sparse.is_some() {
            step("truncate", rustix::fs::ftruncate(fd, h.size))?;
        }
        if self.o.fsync {
            step("fsync", rustix::fs::fsync(fd))?;
        }
        if self.how.xattrs {
            write_xattrs(XattrTarget::Fd(fd), h.xattrs).map_err(|e| format!("set xattr: {e}"))?;
        }
        let unchanged = self.ids == (h.uid, h.gid) && dirs.group() == Some(self.ids.1);
        if self.how.owner && !unchanged {
            step(
                "chown",
                rustix::fs::fchown(fd, Some(Uid::from_raw(h.uid)), Some(Gid::from_raw(h.gid))),
            )?;
        }
        self.how.projid(fd, h, false, self.lay.dest)?;
        step(
            "chmod",
            rustix::fs::fchmod(fd, Mode::from_raw_mode(self.how.mode(h.mode))),
        )?;
        step("set times", rustix::fs::futimens(fd, &times_of(h)))
    }
}
