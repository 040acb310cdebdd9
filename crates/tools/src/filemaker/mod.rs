//! `mfu-rs filemaker` (dfilemaker): generate a reproducible random tree of directories, files
//! and symbolic links, in parallel.
//!
//! The tree is a pure function of the options and the seed (`plan`), never of the rank count:
//! `mpirun -np 1`, `-np 2` or `-np 64` make byte-identical trees. Benchmarks and tests use the
//! library API without the command line:
//!
//! ```no_run
//! use mfu::filemaker::{make, Plan, Spec};
//! let spec = Spec { seed: 7, nitems: 1000..=1000, size: 0..=(1 << 20), ..Spec::default() };
//! let plan = Plan::new(&spec).expect("valid ranges");
//! let done = steal::local::run(1, |comm| {
//!     let progress = steal::progress::Progress::silent();
//!     make(comm, &plan, b"/tmp/workload", &progress).expect("root created").files
//! });
//! ```

pub(crate) mod make;
pub(crate) mod plan;

pub use make::{make, make_until, Made};
pub use plan::{Fill, Item, Kind, Plan, Spec};

use crate::engine::checkpoint::{self, Choice, Inputs, Outcome};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::setup::agree_setup;
use crate::engine::status::Status;
use flist::path::{display, normalize};
use std::time::Instant;
use steal::Comm;

/// What `filemaker` is to make, and where.
///
/// ```no_run
/// // mfu-rs filemaker -i 42 -n 100000 /lustre/bench
/// let mut options = mfu::filemaker::Options::new(b"/lustre/bench".to_vec());
/// options.spec.seed = 42;
/// options.spec.nitems = 100_000..=100_000;
/// let reports = steal::local::run(2, |comm| mfu::filemaker::run(comm, &options));
/// let made = reports[0].as_ref().map_or(0, |r| r.files);
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Directory to fill: created if absent (its parent must exist); must be empty unless
    /// `force`. Relative paths start at the current directory.
    pub dir: Vec<u8>,
    /// The tree: seed, fill, levels, items, file sizes (bytes), shares of files and links.
    pub spec: Spec,
    /// Write into `dir` even if it is not empty: items of the plan that exist with the
    /// planned type are replaced (a file by a new file, links remade, directories reused);
    /// an entry of another type in an item's place fails that item.
    pub force: bool,
    /// Where the files made are recorded, so that the same command run again after a stop or
    /// a kill continues (by default `.NAME.mfu-checkpoint` beside `dir`): files finished are
    /// not made again, and the tree equals an uninterrupted run's.
    pub checkpoint: Choice,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Make dfilemaker's default tree ([`Spec::default`]) in `dir`, which must be empty.
    pub fn new(dir: Vec<u8>) -> Options {
        Options {
            dir,
            spec: Spec::default(),
            force: false,
            checkpoint: Choice::default(),
            context: Context::default(),
        }
    }
}

/// What a `filemaker` run made: counts over all ranks.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The directory filled, absolute.
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub dir: Vec<u8>,
    /// Directories made (or found already there).
    pub dirs: u64,
    /// Files created.
    pub files: u64,
    /// Symbolic links made.
    pub links: u64,
    /// Bytes written into files.
    pub bytes: u64,
    /// Items that could not be made.
    pub failed: u64,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// A stop request cut the run short: the tree is incomplete.
    pub interrupted: bool,
    /// The stop left a checkpoint: the same command continues.
    #[serde(skip)]
    pub resumable: bool,
    /// Files of the plan (what a stopped run's `files` counts towards).
    pub planned_files: u64,
    /// The checkpoint could not be kept (stopped) or removed (complete) (told on stderr):
    /// exit 1, as every resumable tool.
    pub checkpoint_failed: bool,
    /// A sample of this process's failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    /// `items` are the directories, files and links made.
    fn summary(&self) -> Summary {
        Summary {
            items: self.dirs + self.files + self.links,
            bytes: self.bytes,
            failed: self.failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        let failed = self.failed + u64::from(self.checkpoint_failed);
        Status::of_work(failed, 0, self.interrupted)
    }
    /// Files made (earlier runs' included) of the plan's, when a stop left a checkpoint.
    fn stopped(&self) -> Option<Stopped> {
        (self.interrupted && self.resumable).then(|| Stopped {
            done: self.files.min(self.planned_files),
            total: self.planned_files,
            what: "files",
        })
    }
}

/// Run `filemaker` on this rank. Collective: every rank returns the same counts, or the same
/// error when nothing was written (bad ranges, a `dir` that is not empty or cannot be made).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let context = &options.context;
    let (plan, root, filled) = agree_setup(comm, setup(options))?;
    let inputs = Inputs::new("filemaker")
        .field("DIR", &serde_bytes::Bytes::new(&root))
        .field("the tree's options", &format!("{:?}", options.spec));
    let opened = checkpoint::open(
        comm,
        &options.checkpoint,
        checkpoint::Plan {
            output: Some(&root),
            inputs,
        },
    )
    .map_err(|e| Error::new(e.to_string()))?;
    // A checkpoint of this command that is not new: the tree in DIR is an earlier run's (even
    // one stopped before it finished any file).
    let continuing = opened.checkpoint.as_ref().is_some_and(|c| !c.fresh());
    if filled && !options.force && !continuing {
        // Nothing of ours to continue: a fresh checkpoint goes with the refusal.
        if let Some(c) = opened.checkpoint {
            c.finish_told(comm, context, Outcome::Complete);
        }
        return Err(Error::new(format!(
            "{} is not empty (--force writes into it anyway)",
            display(&root)
        )));
    }
    opened.tell(comm, context);
    let checkpoint = opened.checkpoint;
    if let Some(c) = &checkpoint {
        // Every file written is on the tree's file system: the syncer syncs it.
        match std::fs::File::open(flist::path::as_path(&root))
            .or_else(|_| std::fs::File::open(flist::path::as_path(flist::path::parent(&root))))
        {
            Ok(f) => c.durable(checkpoint::Durable::FileSystem(std::sync::Arc::new(
                f.into(),
            ))),
            Err(e) => context.error(format!("open {}: {e}", display(&root))),
        }
    }
    if comm.rank() == 0 && context.verbose {
        context.info(format!(
            "Seed {}: {} items over {} levels ({} directories, {} files, {} links), {}\n",
            plan.seed,
            plan.items.len(),
            plan.levels.len(),
            plan.count(Kind::Dir),
            plan.count(Kind::File),
            plan.count(Kind::Link),
            bytes_text(plan.total_bytes())
        ));
    }
    let progress = context.progress(comm.rank(), "Made");
    let resume = make::Resume {
        prior: opened.prior,
        checkpoint: checkpoint.as_ref(),
    };
    // What an earlier run of this command made is replaced where unfinished (as with --force).
    let replace = options.force || continuing;
    let made = make::make_resuming(
        comm,
        &plan,
        &root,
        &progress,
        replace,
        &context.stop,
        &resume,
    );
    let made = match made {
        Ok(made) => made,
        Err(e) => {
            // The run fails anyway: a checkpoint not kept is told.
            if let Some(c) = checkpoint {
                c.finish_told(comm, context, Outcome::Failed);
            }
            return Err(Error::new(e));
        }
    };
    let resumable = made.interrupted && checkpoint.is_some();
    let mut checkpoint_failed = false;
    if let Some(c) = checkpoint {
        checkpoint_failed = !c.finish_told(comm, context, Outcome::of_stop(made.interrupted));
    }
    for e in &made.errors {
        context.error(e);
    }
    // Thread ranks share one failure sample: every rank's failures are in it before any rank
    // takes it.
    comm.barrier();
    if comm.rank() == 0 {
        // Messages about the whole run: not in the report's sample of failed items.
        if made.interrupted && !resumable {
            context.events.error(&format!(
                "interrupted by a signal: the tree in {} is incomplete (items missing, files \
                 possibly partly written); rerun with --force to remake it",
                display(&root)
            ));
        }
        if made.total_errors > 0 {
            context.events.error(&format!(
                "{} items could not be made (listed above)",
                made.total_errors
            ));
        }
    }
    Ok(Report {
        dir: root,
        dirs: made.dirs,
        files: made.files,
        links: made.links,
        bytes: made.bytes,
        failed: made.total_errors,
        seconds: started.elapsed().as_secs_f64(),
        interrupted: made.interrupted,
        resumable,
        planned_files: plan.count(Kind::File),
        checkpoint_failed,
        failures: context.failures(),
    })
}

/// `12.0 MiB (12582912 bytes)`.
fn bytes_text(n: u64) -> String {
    format!("{} ({n} bytes)", flist::units::human_bytes(n))
}

/// The plan, the root, and whether the root holds entries already (only a run that continues
/// an earlier one's checkpoint, or `--force`, writes into it); or why nothing may be written.
fn setup(options: &Options) -> Result<(Plan, Vec<u8>, bool), String> {
    let plan = Plan::new(&options.spec)?;
    if options.dir.is_empty() {
        return Err("an empty DIR names no directory".into());
    }
    let cwd = flist::path::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let root = normalize(&options.dir, &cwd);
    let path = flist::path::as_path(&root);
    let mut filled = false;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let mut entries =
                std::fs::read_dir(path).map_err(|e| format!("open {}: {e}", display(&root)))?;
            filled = entries.next().is_some();
        }
        Ok(_) => return Err(format!("{} exists and is not a directory", display(&root))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            crate::engine::setup::check_parent(&root)?;
        }
        Err(e) => return Err(format!("stat {}: {e}", display(&root))),
    }
    Ok((plan, root, filled))
}
