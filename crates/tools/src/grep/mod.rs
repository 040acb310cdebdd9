//! `mfu-rs grep` (dgrep): search the contents of files in parallel, as GNU `grep -r` does.
//!
//! The phases, each collective:
//! 1. entries: walk each PATH (or read `--input`), keep the regular files that `--include` and
//!    `--exclude` let through, and give each a sort key (`order`);
//! 2. order: sort the files in the order `grep -r` would meet them in a tree whose directories
//!    list their entries sorted by name bytes (PATHs in command-line order; in each directory,
//!    entries by name bytes; a directory's contents right after it), unless `--unordered`;
//! 3. search: every file is one or more chunks of `chunk_size` bytes (cut on line boundaries,
//!    `search`), work items of the work-stealing queue, so a big file uses every rank;
//! 4. output: each chunk's findings go to the rank that holds its file, which puts a file's
//!    chunks together (line numbers: the newlines of the chunks before) and renders them; rank
//!    0 prints every rank's part in order.
//!
//! Matching is GNU grep's under `LC_ALL=C`: patterns and lines are bytes, `-i` and `\w` know
//! ASCII letters only. A file with a NUL byte anywhere is binary: its matching lines are not
//! printed, a notice `NAME: binary file matches` is sent as detail instead, and its NUL bytes
//! end lines (what GNU grep does when it sees the NUL in the first buffer it reads; GNU grep
//! prints the lines it matched before a NUL it meets later, mfu-rs prints none).

mod order;
mod resume;
mod search;

use crate::engine::checkpoint::{self, Choice, Inputs, Outcome, Plan};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::input::Input;
use crate::engine::status::Status;
use flist::posix_regex::Negated;
pub use flist::posix_regex::Syntax;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use search::{Chunk, Found, Searching};
use std::sync::Mutex;
use std::time::Instant;
use steal::ordered::in_rank_order;
use steal::queue::{self, Config};
use steal::{Comm, CommExt};

/// What is printed for the files searched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Output {
    /// The selected lines (default).
    #[default]
    Lines,
    /// The number of selected lines of every file (`-c`).
    Count,
    /// The names of files with a selected line (`-l`).
    FilesWithMatches,
    /// The names of files without one (`-L`).
    FilesWithoutMatch,
    /// Nothing (`-q`): only the exit status tells.
    Quiet,
}

/// One `--include` or `--exclude` glob, matched against a file's name (its last component).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileGlob {
    /// `--include` (true) or `--exclude`.
    pub include: bool,
    /// The glob (`*`, `?`, `[...]`; `*` matches a leading `.` too).
    pub glob: Vec<u8>,
}

/// Default chunk size: files larger than this are searched in pieces (1 MiB). A chunk is read
/// whole and then scanned a few times (newlines, NULs, the pattern): at 1 to 2 MiB that stays in
/// cache, and a 256 MiB file was searched 3 to 5 times faster than in 16 MiB chunks.
pub const CHUNK_SIZE: u64 = 1 << 20;

/// Test seam: `MFU_RS_TEST_GREP_CHUNK=N` sets the chunk size to N bytes, so that small test
/// files are cut into many chunks.
pub const CHUNK_VAR: &str = "MFU_RS_TEST_GREP_CHUNK";

/// What `grep` does: search the files under `paths` (or listed in `input`) for lines that
/// match any of `patterns`.
#[derive(Debug, Clone)]
pub struct Options {
    /// The patterns (a line matches if any matches); none matches nothing.
    pub patterns: Vec<Vec<u8>>,
    /// Files of more patterns, one per line (`-f`), read by every rank.
    pub pattern_files: Vec<Vec<u8>>,
    /// How the patterns are read.
    pub syntax: Syntax,
    /// `-i`: ASCII letters match either case.
    pub ignore_case: bool,
    /// `-v`: select the lines that do not match.
    pub invert: bool,
    /// `-w`: matches must be whole words.
    pub word: bool,
    /// `-x`: matches must be whole lines.
    pub whole_line: bool,
    /// What is printed.
    pub output: Output,
    /// `-n`: put the line number (from 1) before each line.
    pub line_numbers: bool,
    /// Put the file's name before each line or count: `None` as grep -r (yes, unless the only
    /// PATH is a file).
    pub with_filename: Option<bool>,
    /// `-m`: stop reading a file after this many selected lines (0: search nothing, exit 1).
    pub max_count: Option<u64>,
    /// `--include`/`--exclude`, in command-line order: the last that matches a file's name
    /// decides; a file none matches is searched unless the first is an `--include`.
    pub globs: Vec<FileGlob>,
    /// Files and trees to search, in this order (no paths: `.`, names shown without `./`, as
    /// by grep -r); or the list whose regular files are searched instead (any format the
    /// tools read; `-`: stdin; or in memory).
    pub input: Input,
    /// `-R`: follow symbolic links below the PATHs too (links to directories are descended,
    /// loops reported).
    pub dereference: bool,
    /// Print files in no particular order (no sort).
    pub unordered: bool,
    /// `-s`: do not report files that cannot be read (they still make the exit status 2).
    pub no_messages: bool,
    /// Files larger than this many bytes are searched in chunks of about this size.
    pub chunk_size: u64,
    /// Where the chunks searched are recorded with what they hold, so that a rerun after a
    /// stop searches only the others and prints the whole output (default: in the state
    /// directory).
    pub checkpoint: Choice,
    /// Events, progress, verbosity and the stop flag. Output: the lines, names or counts;
    /// detail: `NAME: binary file matches` notices (and the `-v` summary).
    pub context: Context,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            patterns: Vec::new(),
            pattern_files: Vec::new(),
            syntax: Syntax::Basic,
            ignore_case: false,
            invert: false,
            word: false,
            whole_line: false,
            output: Output::Lines,
            line_numbers: false,
            with_filename: None,
            max_count: None,
            globs: Vec::new(),
            input: Input::default(),
            dereference: false,
            unordered: false,
            no_messages: false,
            chunk_size: CHUNK_SIZE,
            checkpoint: Choice::default(),
            context: Context::default(),
        }
    }
}

/// What a `grep` found; counts over all ranks, the same on every rank.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Files searched.
    pub files: u64,
    /// Chunks searched (a file is one chunk unless it is bigger than the chunk size).
    pub chunks: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Files with at least one selected line.
    pub matched_files: u64,
    /// Lines selected (with `-m`, at most that many per file).
    pub selected_lines: u64,
    /// Files and directories that could not be read (each reported unless `-s`).
    pub errors: u64,
    /// `-q`: a selected line makes the status 0 even when some file could not be read.
    pub quiet: bool,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// A stop request cut the search short.
    pub interrupted: bool,
    /// Chunks not searched again: an earlier run whose checkpoint this one continued
    /// searched them (their findings counted and printed).
    pub chunks_recorded: u64,
    /// This process's sample of failure messages.
    pub failures: Vec<String>,
    /// A stop cut the search short: the chunks searched of all.
    #[serde(skip)]
    pub stopped: Option<Stopped>,
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        Summary {
            items: self.files,
            bytes: self.bytes,
            failed: self.errors,
            seconds: self.seconds,
        }
    }
    /// grep's: 0 a line was selected, 1 none was, 2 an error (or an interruption), unless
    /// `-q` and a line was selected.
    fn status(&self) -> Status {
        if self.quiet && self.selected_lines > 0 {
            Status::Ok
        } else if self.errors > 0 || self.interrupted {
            Status::Usage
        } else if self.selected_lines > 0 {
            Status::Ok
        } else {
            Status::ItemsFailed
        }
    }
    fn stopped(&self) -> Option<Stopped> {
        self.stopped
    }
}

/// The matcher for `options`' patterns.
pub fn matcher(options: &Options) -> Result<RegexMatcher, Error> {
    build(options, &patterns(options)?)
}

/// The patterns: `options.patterns`, then the lines of the pattern files.
fn patterns(options: &Options) -> Result<Vec<Vec<u8>>, Error> {
    let mut patterns = options.patterns.clone();
    for file in &options.pattern_files {
        let text = std::fs::read(flist::path::as_path(file)).map_err(|e| {
            Error::new(format!("read patterns {}: {e}", flist::path::display(file)))
        })?;
        let text = text.strip_suffix(b"\n").unwrap_or(&text);
        if !text.is_empty() {
            patterns.extend(text.split(|&b| b == b'\n').map(<[u8]>::to_vec));
        }
    }
    Ok(patterns)
}

/// The matcher of `patterns` read as `options` say.
/// How every chunk of the run is searched: with `matcher`, as `options` ask.
fn searching(matcher: RegexMatcher, options: &Options) -> Searching {
    Searching {
        matcher,
        invert: options.invert,
        max_count: options.max_count,
        keep_lines: options.output == Output::Lines,
        first_only: matches!(
            options.output,
            Output::FilesWithMatches | Output::FilesWithoutMatch | Output::Quiet
        ),
        noatime: std::sync::Arc::clone(&options.context.noatime),
    }
}

fn build(options: &Options, patterns: &[Vec<u8>]) -> Result<RegexMatcher, Error> {
    let translated = patterns
        .iter()
        .map(|p| flist::posix_regex::translate(p, options.syntax, Negated::NoNewline))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::new(format!("invalid pattern: {e}")))?;
    RegexMatcherBuilder::new()
        .unicode(false)
        .case_insensitive(options.ignore_case)
        .word(options.word)
        .whole_line(options.whole_line)
        .line_terminator(Some(b'\n'))
        .build_many(&translated)
        .map_err(|e| Error::new(format!("invalid pattern: {e}")))
}

/// Run `grep` on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let context = &options.context;
    let mut report = Report {
        quiet: options.output == Output::Quiet,
        ..Report::default()
    };
    let patterns = patterns(options)?;
    let matcher = build(options, &patterns)?;
    if options.max_count == Some(0) {
        // GNU grep reads nothing then.
        return Ok(report);
    }
    let globs = order::Globs::new(&options.globs)?;

    // 1, 2: the files, in output order.
    let entries = order::entries(comm, options, &globs)?;
    report.errors = comm.sum(entries.errors);
    let files = if options.unordered {
        entries.list
    } else {
        order::sort(comm, entries.list)?
    };
    let with_filename = options.with_filename.unwrap_or(entries.many);
    let (first, total) = comm.offset_and_total(files.len() as u64);
    report.files = total;

    // 3. Search.
    let chunk = options.chunk_size.max(1);
    let mut chunks_of = Vec::with_capacity(files.len());
    let mut items = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let n = f.size.div_ceil(chunk).max(1);
        chunks_of.push(n);
        for c in 0..n {
            items.push(Chunk {
                file: first + i as u64,
                chunk: c,
                path: f.path.clone(),
                listed: f.listed,
                start: c * chunk,
                end: if c + 1 == n {
                    u64::MAX
                } else {
                    (c + 1) * chunk
                },
            });
        }
    }
    report.chunks = comm.sum(items.len() as u64);
    let opened = open_checkpoint(comm, options, &patterns)?;
    let marks = opened.as_ref().and_then(|o| {
        o.checkpoint.as_ref().map(|c| resume::Marks {
            prior: &o.prior,
            checkpoint: c,
        })
    });
    let recorded = std::sync::atomic::AtomicU64::new(0);
    let searching = searching(matcher, options);
    let progress = context.progress(comm.rank(), "Searched");
    let found = Mutex::new(Vec::new());
    let config = Config {
        // A batch runs on one worker: a few chunks of a big file per batch keep them spread.
        max_batch: 4,
        seed: 0x93e9,
        stop: Some(&context.stop),
        progress: Some(&progress),
        ..Config::default()
    };
    let outcome = queue::run(comm, &config, items, |item: Chunk, _| {
        let f = resume::search(marks.as_ref(), &searching, &item, &recorded);
        progress.add(1, f.bytes);
        found.lock().unwrap_or_else(|p| p.into_inner()).push(f);
    });
    report.interrupted = outcome.interrupted;
    let found = found.into_inner().unwrap_or_else(|p| p.into_inner());

    // 4. Findings to the rank that holds their file, put together and printed in order.
    let starts = comm.allgather_u64(first);
    let mut sends = vec![Vec::new(); comm.size()];
    for f in &found {
        let owner = starts.partition_point(|&s| s <= f.file) - 1;
        steal::typed::encode_into(f, &mut sends[owner]);
    }
    drop(found);
    let mut mine: Vec<Found> = Vec::new();
    for bytes in comm.alltoallv(sends) {
        mine.extend(steal::typed::each::<Found>(&bytes).map(steal::typed::sent));
    }
    mine.sort_by_key(|f| (f.file, f.chunk));
    let render = Render {
        options,
        with_filename,
    };
    let mut out = Vec::new();
    let mut counts = Counts::default();
    let mut rest = &mut mine[..];
    for (i, f) in files.iter().enumerate() {
        let index = first + i as u64;
        let n = rest.iter().take_while(|c| c.file == index).count();
        let (parts, after) = rest.split_at_mut(n);
        rest = after;
        render.file(&f, parts, chunks_of[i], &mut out, &mut counts);
    }
    report.bytes = comm.sum(counts.bytes);
    report.matched_files = comm.sum(counts.matched_files);
    report.selected_lines = comm.sum(counts.selected);
    report.errors += comm.sum(counts.errors);
    report.interrupted = comm.any(report.interrupted);
    report.chunks_recorded = comm.sum(recorded.into_inner());
    if report.interrupted {
        report.stopped = Some(Stopped {
            done: outcome.processed,
            total: report.chunks,
            what: "chunks",
        });
    }
    let kept = report.interrupted && marks.is_some();
    if kept {
        // The rerun prints the whole output, in order, this run's findings included: printed
        // now too, they would be printed twice.
        if comm.rank() == 0 {
            context.error(
                "stopped: nothing printed; the run that completes the checkpoint prints the whole \
                 output",
            );
        }
    } else {
        in_rank_order(comm, out, |bytes| emit(context, bytes));
    }
    report.errors += u64::from(finish(comm, context, opened, report.interrupted));
    if report.interrupted && !kept && comm.rank() == 0 {
        context.error(format!(
            "interrupted by a signal: {} of {} chunks searched, files not wholly searched were \
             left out of the output",
            outcome.processed, report.chunks
        ));
    }
    report.seconds = started.elapsed().as_secs_f64();
    if comm.rank() == 0 && context.verbose {
        context.info(format!(
            "Searched {} files ({} chunks, {} bytes) in {:.3} s: {} matched, {} lines selected\n",
            report.files,
            report.chunks,
            report.bytes,
            report.seconds,
            report.matched_files,
            report.selected_lines
        ));
    }
    report.failures = context.failures();
    Ok(report)
}

/// The checkpoint of the run (`None` with `--no-checkpoint`). Collective.
///
/// Its inputs are the PATHs (or the list) and every option that changes what is found or
/// printed; not a digest of the files: each chunk's record holds its file's identity and
/// state, compared when the record is used.
fn open_checkpoint(
    comm: &dyn Comm,
    options: &Options,
    patterns: &[Vec<u8>],
) -> Result<Option<checkpoint::Opened>, Error> {
    if options.checkpoint == Choice::Off {
        return Ok(None);
    }
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let input: Vec<Vec<u8>> = match &options.input {
        // Names are printed relative to the directory the run is in: that is an input too.
        Input::Paths(paths) => std::iter::once(cwd.clone())
            .chain(paths.iter().cloned())
            .collect(),
        Input::File { path, .. } => vec![b"--input".to_vec(), flist::path::normalize(path, &cwd)],
        Input::List(_) => vec![b"--input (in memory)".to_vec()],
    };
    let globs: Vec<(bool, &[u8])> = options
        .globs
        .iter()
        .map(|g| (g.include, g.glob.as_slice()))
        .collect();
    let inputs = Inputs::new("grep")
        .field("paths", &input)
        .field("patterns", &patterns)
        .field(
            "matching",
            &format!(
                "{:?} -i {} -v {} -w {} -x {} -m {:?}",
                options.syntax,
                options.ignore_case,
                options.invert,
                options.word,
                options.whole_line,
                options.max_count
            ),
        )
        .field(
            "output",
            &format!(
                "{:?} -n {} -H {:?} -R {} --unordered {}",
                options.output,
                options.line_numbers,
                options.with_filename,
                options.dereference,
                options.unordered
            ),
        )
        .field("globs", &globs)
        .field("chunk size", &options.chunk_size);
    let plan = Plan {
        output: None,
        inputs,
    };
    let opened = checkpoint::open(comm, &options.checkpoint, plan).map_err(Error::new)?;
    opened.tell(comm, &options.context);
    Ok(Some(opened))
}

/// End the run's use of the checkpoint in `opened`: kept when `interrupted`, removed
/// otherwise. True when that failed (reported). Collective.
fn finish(
    comm: &dyn Comm,
    context: &Context,
    opened: Option<checkpoint::Opened>,
    interrupted: bool,
) -> bool {
    let Some(c) = opened.and_then(|o| o.checkpoint) else {
        return false;
    };
    !c.finish_told(comm, context, Outcome::of_stop(interrupted))
}

/// A rank's counts of what it rendered.
#[derive(Default)]
struct Counts {
    bytes: u64,
    matched_files: u64,
    selected: u64,
    errors: u64,
}

/// A segment of a rank's output (steal's typed encoding, one after another).
#[derive(serde::Serialize, serde::Deserialize)]
enum Segment<'a> {
    /// Bytes for standard output.
    Output(#[serde(borrow, with = "serde_bytes")] &'a [u8]),
    /// The name of a binary file that matches, for the notice.
    Binary(#[serde(borrow, with = "serde_bytes")] &'a [u8]),
}

/// Send a rank's encoded output segments to the context, in order.
fn emit(context: &Context, bytes: &[u8]) {
    for segment in steal::typed::each(bytes) {
        match steal::typed::sent(segment) {
            Segment::Binary(name) => context.info(format!(
                "{}: binary file matches\n",
                String::from_utf8_lossy(name)
            )),
            Segment::Output(text) => context.output(text),
        }
    }
}

struct Render<'a> {
    options: &'a Options,
    with_filename: bool,
}

impl Render<'_> {
    /// Render one file from its chunks' findings (sorted by chunk) into `out`.
    fn file(
        &self,
        file: &order::File,
        parts: &mut [Found],
        chunks: u64,
        out: &mut Vec<u8>,
        counts: &mut Counts,
    ) {
        let context = &self.options.context;
        counts.bytes += parts.iter().map(|p| p.bytes).sum::<u64>();
        if let Some(e) = parts.iter().find_map(|p| p.error.as_ref()) {
            counts.errors += 1;
            if !self.options.no_messages {
                context.error(e);
            }
            return;
        }
        if parts.len() as u64 != chunks {
            // Interrupted: a file not wholly searched is left out.
            return;
        }
        let total: u64 = parts.iter().map(|p| p.selected).sum();
        let selected = self.options.max_count.map_or(total, |m| total.min(m));
        counts.selected += selected;
        counts.matched_files += u64::from(selected > 0);
        let name = &file.shown;
        let mut text = Vec::new();
        match self.options.output {
            Output::Quiet => {}
            Output::FilesWithMatches | Output::FilesWithoutMatch => {
                let with = self.options.output == Output::FilesWithMatches;
                if (selected > 0) == with {
                    text.extend_from_slice(name);
                    text.push(b'\n');
                }
            }
            Output::Count => {
                if self.with_filename {
                    text.extend_from_slice(name);
                    text.push(b':');
                }
                text.extend_from_slice(selected.to_string().as_bytes());
                text.push(b'\n');
            }
            Output::Lines if parts.iter().any(|p| p.binary) => {
                if selected > 0 {
                    steal::typed::encode_into(&Segment::Binary(name), out);
                }
            }
            Output::Lines => {
                let mut left = selected;
                let mut before = 0;
                for p in parts.iter() {
                    let mut at = 0;
                    for &n in &p.numbers {
                        if left == 0 {
                            break;
                        }
                        left -= 1;
                        let end = at + memchr::memchr(b'\n', &p.lines[at..]).map_or(0, |i| i + 1);
                        if self.with_filename {
                            text.extend_from_slice(name);
                            text.push(b':');
                        }
                        if self.options.line_numbers {
                            text.extend_from_slice((before + n).to_string().as_bytes());
                            text.push(b':');
                        }
                        text.extend_from_slice(&p.lines[at..end]);
                        at = end;
                    }
                    before += p.newlines;
                }
            }
        }
        if !text.is_empty() {
            steal::typed::encode_into(&Segment::Output(&text), out);
        }
    }
}
