//! `mfu-rs bcast` (dbcast): copy one file to node-local storage (the same DEST path) on every
//! node.
//!
//! Nodes are found by gathering each rank's node name (`nodes`; `MFU_NODE_NAME` overrides
//! it). The file is cut into segments of `--size` bytes handled in rounds of one segment per
//! rank: every rank reads one segment of the source (readers spread over all ranks and nodes),
//! then each segment is broadcast from its reader, and on every node one rank (spread over the
//! node's ranks) writes it with `pwrite` at its offset. Memory stays at two segments per rank.
//!
//! A new DEST is written under a temporary name beside it, fsync'ed and renamed at the end, so a
//! failure never leaves a partial file under the final name. When DEST already exists with the
//! source's size, segments are compared first (blake3 of the node's copy against the source's)
//! and only differing segments travel and are rewritten, in place: rewriting the identical ones
//! into a fresh copy would cost the local disk the writes the comparison exists to save. Only a
//! regular file with one link, reached without following a symlink, is updated in place (a
//! symlink DEST or one hard-linked elsewhere gets a new file renamed over it: the other names
//! keep their data).
//!
//! Each node's leader plans in DEST's directory (its device and inode are part of the plan);
//! after the plan every rank reopens that directory and the file it writes and checks both are
//! the planned ones, so a directory or DEST swapped for a symlink in between sends no write
//! elsewhere. The leader renames and removes with `*at` calls on the directory it planned in.

pub(crate) mod nodes;

use crate::engine::checkpoint::{self, Checkpoint, Choice, Inputs, Outcome, Prior};
use crate::engine::context::{Context, Error, Stopped, Summary, ToolReport};
use crate::engine::status::Status;
use flist::atomic::{self, Output, Replace, Stale, Stamp as Kept, Step};
use flist::path::{as_path, display};
use nodes::Nodes;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::fs::File;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::sync::atomic::Ordering;
use std::time::Instant;
use steal::progress::Progress;
use steal::{Comm, CommExt};

/// Bytes of a blake3 digest.
const HASH_LEN: usize = 32;

/// What `bcast` is to copy, and where.
///
/// ```no_run
/// // srun -N 64 -n 256 mfu-rs bcast -s 4MB /lustre/db/index.bin /tmp/index.bin
/// let mut options =
///     mfu::bcast::Options::new(b"/lustre/db/index.bin".to_vec(), b"/tmp/index.bin".to_vec());
/// options.segment = 4 << 20;
/// let reports = steal::local::run(2, |comm| mfu::bcast::run(comm, &options));
/// let nodes_done = reports[0].as_ref().map_or(0, |r| r.nodes.len() as u64 - r.failed);
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// The file to copy (readable by every rank).
    pub src: Vec<u8>,
    /// Where the copy goes on every node (its directory must exist).
    pub dest: Vec<u8>,
    /// Bytes per segment (the unit read by one rank and sent to every node); more than 0.
    pub segment: u64,
    /// Where the segments written on each node are recorded, so that the same command run
    /// again after a stop or a kill continues each node's partial copy (by default in
    /// `$XDG_STATE_HOME/mfu-rs/checkpoints`: DEST is node-local, the checkpoint must be
    /// shared).
    pub checkpoint: Choice,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

impl Options {
    /// Copy `src` to `dest` on every node, in segments of 1 MiB (the command line's `1MB`).
    pub fn new(src: Vec<u8>, dest: Vec<u8>) -> Options {
        Options {
            src,
            dest,
            segment: 1 << 20,
            checkpoint: Choice::default(),
            context: Context::default(),
        }
    }
}

/// What one node received.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct NodeReport {
    /// The node's name (host name, or `MFU_NODE_NAME`).
    pub name: String,
    /// Segments written into its DEST.
    pub written: u64,
    /// Segments its DEST already held (an update in place): not sent, not written.
    pub skipped: u64,
    /// Its DEST is not complete (each reason reported).
    pub failed: bool,
}

/// What a `bcast` run did (the same on every rank).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// SRC.
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub src: Vec<u8>,
    /// DEST.
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub dest: Vec<u8>,
    /// SRC's size in bytes.
    pub size: u64,
    /// Segments of SRC (each node's copy is made of these).
    pub segments: u64,
    /// Bytes written on all nodes.
    pub bytes: u64,
    /// Every node, in the order of their first rank.
    pub nodes: Vec<NodeReport>,
    /// Nodes whose DEST is not complete.
    pub failed: u64,
    /// Wall-clock seconds of the run.
    pub seconds: f64,
    /// A stop request cut the transfer short.
    pub interrupted: bool,
    /// The stop left a checkpoint and each node's partial copy: the same command continues.
    #[serde(skip)]
    pub resumable: bool,
    /// The run was verbose ([`Context::verbose`]): the command line then lists `nodes`.
    #[serde(skip)]
    pub verbose: bool,
    /// The checkpoint could not be kept (stopped) or removed (complete) (told on stderr):
    /// exit 1, as every resumable tool.
    pub checkpoint_failed: bool,
    /// A sample of this process's failure messages.
    pub failures: Vec<String>,
}

impl ToolReport for Report {
    /// `items` are the nodes that have DEST; `bytes` the bytes written on all nodes.
    fn summary(&self) -> Summary {
        Summary {
            items: self.nodes.len() as u64 - self.failed,
            bytes: self.bytes,
            failed: self.failed,
            seconds: self.seconds,
        }
    }
    fn status(&self) -> Status {
        let failed = self.failed + u64::from(self.checkpoint_failed);
        Status::of_work(failed, 0, self.interrupted)
    }
    /// Segments written on all nodes (earlier runs' included) of segments times nodes, when a
    /// stop left a checkpoint.
    fn stopped(&self) -> Option<Stopped> {
        let total = self.segments * self.nodes.len() as u64;
        (self.interrupted && self.resumable).then(|| Stopped {
            done: self.nodes.iter().map(|n| n.written).sum::<u64>().min(total),
            total,
            what: "segments",
        })
    }
}

/// How a node receives the file (its leader tells every rank).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Target {
    /// DEST exists with SRC's size: compare segments, rewrite only differing ones in place.
    in_place: bool,
    /// The file the node's ranks write: a temporary beside DEST, or DEST itself.
    #[serde(with = "serde_bytes")]
    path: Vec<u8>,
    /// (device, inode) of DEST's directory when the leader planned.
    dir_id: (u64, u64),
    /// (device, inode) of the file the ranks write.
    file_id: (u64, u64),
    /// The file is the partial copy an interrupted earlier run left (taken over): the
    /// segments the checkpoint records for this node are in it.
    resumed: bool,
}

/// What every rank knows after the setup: the source, open, its mode, every node's
/// target, and (on a node's leader) DEST's directory as planned.
struct Setup {
    source: File,
    mode: u32,
    targets: Vec<Target>,
    planned_dir: Option<OwnedFd>,
    /// The leader's temporary (an [`Output`]) when its node gets a new file: published by
    /// [`finish`], removed if dropped before.
    output: Option<Output>,
}

/// Run `bcast` on this rank. Collective: every rank returns the same report, or the same
/// error when nothing was changed (SRC missing or not a file, DEST's directory missing on a
/// node).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let started = Instant::now();
    let context = &options.context;
    let nodes = Nodes::gather(comm);
    let me = comm.rank();
    let my_node = nodes.node_of[me];
    let node_name = display(&nodes.names[my_node]).into_owned();
    let dest = &options.dest[..];
    let (size, mode, stamp) = check_source(comm, &options.src)?;
    let opened = open_checkpoint(comm, options, stamp)?;
    let (ck, prior) = (opened.checkpoint, opened.prior);
    let my_name = nodes.names[my_node].clone();
    let resume = nodes
        .is_leader(me)
        .then(|| prior.payload(temp_key(&my_name)).and_then(decode_temp))
        .flatten();
    let setup = match plan(comm, options, &nodes, &node_name, size, mode, resume) {
        Ok(setup) => setup,
        Err(e) => {
            // The run fails anyway (a usage error): a checkpoint not kept is told.
            if let Some(c) = ck {
                c.finish_told(comm, context, Outcome::Failed);
            }
            return Err(e);
        }
    };
    // Each leader records its node's partial copy (name, identity) before any segment of it
    // is marked; each rank marks only its own writes, which its syncer syncs.
    // With its birth time: a file made after it was removed may get the same inode number.
    if let (Some(c), Some(o)) = (&ck, &setup.output) {
        match o.file().map(|f| Kept::of(f.as_fd())) {
            Some(Ok(stamp)) => c.mark(temp_key(&my_name), &encode_temp(o.name(), &stamp)),
            Some(Err(e)) => context.error(format!(
                "node {node_name}: stat {} (not recorded: a rerun starts over): {e}",
                display(o.path())
            )),
            None => {}
        }
    }
    let target = &setup.targets[my_node];
    // The plan is made; the race tests change the tree here.
    crate::engine::test_seam::after_listing(comm);
    let mut failure: Option<String> = None;
    let out = open_target(target)
        .map_err(|e| format!("node {node_name}: {e}"))
        .map_err(|e| failure = Some(e))
        .ok();
    if let (Some(c), Some(f)) = (&ck, &out) {
        if let Ok(dup) = f.try_clone() {
            c.durable(checkpoint::Durable::File(std::sync::Arc::new(dup.into())));
        }
    }

    // 3. The segments, round by round.
    let progress = context.progress(me, "Broadcast");
    progress.total_bytes.store(size, Ordering::Relaxed);
    let job = Transfer {
        stop: &context.stop,
        comm,
        nodes: &nodes,
        targets: &setup.targets,
        source: &setup.source,
        out: out.as_ref(),
        size,
        segment: options.segment,
        src_name: display(&options.src).into_owned(),
        out_name: format!("node {node_name}: {}", display(&target.path)),
        prior: &prior,
        checkpoint: ck.as_ref(),
    };
    let counts = job.run(&mut failure, &progress);
    // A stop with a checkpoint keeps each node's partial copy for the next run.
    let keep = counts.interrupted && ck.is_some();
    if counts.interrupted {
        failure.get_or_insert_with(|| format!("node {node_name}: interrupted by a signal"));
    }
    if let (Some(f), None) = (&out, &failure) {
        if let Err(e) = f.sync_all() {
            failure = Some(format!(
                "node {node_name}: fsync {}: {e}",
                display(&target.path)
            ));
        }
    }

    // 4. Every rank's outcome to everyone; each leader finishes or cleans up its node.
    let outcomes = gather_outcomes(comm, &counts, failure.as_deref());
    let mut node_failed = vec![counts.source_failed; nodes.names.len()];
    for (rank, o) in outcomes.iter().enumerate() {
        node_failed[nodes.node_of[rank]] |= o.2.is_some();
    }
    // The checkpoint goes right after the rename (see [`Checkpoint::stop_flushing`]).
    if let Some(c) = &ck {
        c.stop_flushing();
    }
    let mut finish_error = None;
    if nodes.is_leader(me) && setup.planned_dir.is_some() {
        finish_error = finish(
            setup.output,
            out.as_ref(),
            target,
            dest,
            setup.mode,
            node_failed[my_node],
            keep,
        )
        .err()
        .map(|e| format!("node {node_name}: {e}"));
    }
    drop(out);
    // A node whose leader could not finish failed too.
    let finished = comm.all_gather(&finish_error.is_some());
    for (rank, failed) in finished.into_iter().enumerate() {
        node_failed[nodes.node_of[rank]] |= failed;
    }
    let finish_errors = gather_strings(comm, finish_error.as_ref());
    if me == 0 {
        let errors = outcomes
            .iter()
            .filter_map(|o| o.2.as_ref())
            .chain(&finish_errors);
        let kept = keep.then(|| ck.as_ref().map(|c| c.path().to_vec()).unwrap_or_default());
        let left = setup.targets.iter().filter(|t| t.in_place).count();
        tell_outcome(context, errors, dest, kept, counts.interrupted, left);
    }
    let mut checkpoint_failed = false;
    if let Some(c) = ck {
        checkpoint_failed = !c.finish_told(comm, context, Outcome::of_stop(keep));
    }
    let node_reports = nodes
        .ranks
        .iter()
        .enumerate()
        .map(|(node, ranks)| NodeReport {
            name: display(&nodes.names[node]).into_owned(),
            written: ranks.iter().map(|&r| outcomes[r].0).sum(),
            skipped: ranks.iter().map(|&r| outcomes[r].1).sum(),
            failed: node_failed[node],
        })
        .collect();
    Ok(Report {
        src: options.src.clone(),
        dest: options.dest.clone(),
        size,
        segments: size.div_ceil(options.segment),
        bytes: comm.sum(counts.bytes),
        nodes: node_reports,
        failed: node_failed.iter().filter(|&&f| f).count() as u64,
        seconds: started.elapsed().as_secs_f64(),
        interrupted: counts.interrupted,
        resumable: keep,
        verbose: context.verbose,
        checkpoint_failed,
        failures: context.failures(),
    })
}

/// Rank 0: each distinct failure once (a node's ranks may fail alike), then, for a stopped
/// run, what is kept for the next run (`kept`: the checkpoint's path) or, without a
/// checkpoint, that nothing is complete (`in_place`: nodes updating DEST in place).
fn tell_outcome<'a>(
    context: &Context,
    errors: impl Iterator<Item = &'a String>,
    dest: &[u8],
    kept: Option<Vec<u8>>,
    interrupted: bool,
    in_place: usize,
) {
    let mut seen: Vec<&String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
            context.error(e);
        }
    }
    // About the whole run: not in the report's sample of failed items.
    if let Some(path) = kept {
        context.events.error(&format!(
            "stopped: {} not complete on any node; each node's partial copy and the \
             checkpoint {} are kept for the next run",
            display(dest),
            display(&path)
        ));
    } else if interrupted {
        context.events.error(&format!(
            "interrupted by a signal: {} not complete on any node (temporary files \
             removed{}); rerun to finish",
            display(dest),
            if in_place > 0 {
                format!("; {in_place} node(s) updating in place hold a mixed DEST")
            } else {
                String::new()
            }
        ));
    }
}

/// The run's checkpoint (collective; in the shared state directory: DEST is node-local);
/// rank 0 tells its notice.
fn open_checkpoint(
    comm: &dyn Comm,
    options: &Options,
    stamp: Stamp,
) -> Result<checkpoint::Opened, Error> {
    let inputs = Inputs::new("bcast")
        .field("SRC", &serde_bytes::Bytes::new(&options.src))
        .field("DEST", &serde_bytes::Bytes::new(&options.dest))
        .field("--size", &options.segment)
        .state("the source (device, inode, size, times)", &stamp);
    let opened = checkpoint::open(
        comm,
        &options.checkpoint,
        checkpoint::Plan {
            output: None,
            inputs,
        },
    )
    .map_err(|e| Error::new(e.to_string()))?;
    opened.tell(comm, &options.context);
    if let Some(c) = &opened.checkpoint {
        // Complete, the copy is in place: of no use to a rerun.
        c.remove_on_completion();
    }
    Ok(opened)
}

/// Phase 1: SRC's size and mode, checked by rank 0; `Err` on every rank when it is missing or
/// not a regular file. Collective.
/// The source's identity, size and times: what a checkpoint is trusted for.
type Stamp = ((u64, u64), u64, (i64, i64), (i64, i64));

fn check_source(comm: &dyn Comm, src: &[u8]) -> Result<(u64, u32, Stamp), Error> {
    use std::os::unix::fs::MetadataExt;
    let checked: Result<(u64, u32, Stamp), String> =
        comm.bcast_with(0, || match std::fs::metadata(as_path(src)) {
            Ok(m) if m.is_file() => Ok((
                m.len(),
                m.permissions().mode() & 0o7777,
                (
                    (m.dev(), m.ino()),
                    m.size(),
                    (m.mtime(), m.mtime_nsec()),
                    (m.ctime(), m.ctime_nsec()),
                ),
            )),
            Ok(_) => Err(format!("{} is not a regular file", display(src))),
            Err(e) => Err(format!("stat {}: {e}", display(src))),
        });
    checked.map_err(Error::new)
}

/// Phase 2: every rank opens SRC; each node's leader prepares DEST and every rank learns
/// every node's target. Stale temporaries go before any leader makes its own (DEST may be on
/// a shared file system). `Err` on every rank when any rank or node failed (nothing changed;
/// rank 0 reports every reason but the last, which is the error). Collective.
fn plan(
    comm: &dyn Comm,
    options: &Options,
    nodes: &Nodes,
    node_name: &str,
    size: u64,
    mode: u32,
    resume: Option<(Vec<u8>, Kept)>,
) -> Result<Setup, Error> {
    let (src, dest) = (&options.src[..], &options.dest[..]);
    // Every rank opens it; rank 0 counts it when the kernel refuses O_NOATIME.
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC;
    let source = options
        .context
        .noatime
        .open_part(comm.rank() == 0, flags, |f| flist::at::open_long(src, f))
        .map(File::from)
        .map_err(|e| {
            let e = std::io::Error::from(e);
            format!("node {node_name}: open {}: {e}", display(src))
        });
    let mut planned_dir: Option<OwnedFd> = None;
    let mut plan_error = None;
    let mut adopted = None;
    if nodes.is_leader(comm.rank()) {
        match look(dest, resume.as_ref(), &mut adopted) {
            Ok((dir, notes)) => {
                notes
                    .iter()
                    .for_each(|n| options.context.error(format!("node {node_name}: {n}")));
                planned_dir = Some(dir);
            }
            Err(e) => plan_error = Some(format!("node {node_name}: {e}")),
        }
    }
    comm.barrier();
    let mut output = None;
    let prepared = match (&planned_dir, plan_error) {
        (Some(dir), _) => Some(
            prepare(dir.as_fd(), dest, size, adopted)
                .map(|(target, made, notes)| {
                    notes
                        .iter()
                        .for_each(|n| options.context.error(format!("node {node_name}: {n}")));
                    output = made;
                    target
                })
                .map_err(|e| format!("node {node_name}: {e}")),
        ),
        (None, Some(e)) => Some(Err(e)),
        (None, None) => None,
    };
    let targets = gather_targets(comm, nodes, prepared.clone());
    let mut setup_errors: Vec<String> = gather_strings(
        comm,
        source
            .as_ref()
            .err()
            .or(prepared.as_ref().and_then(|p| p.as_ref().err())),
    );
    if let Some(last) = setup_errors.pop() {
        if comm.rank() == 0 {
            setup_errors.iter().for_each(|e| options.context.error(e));
        }
        // A leader that made a temporary file takes it back; a partial copy taken over stays
        // for the next run (the checkpoint is kept: the run failed).
        let resumed = planned_dir.is_some()
            && targets[nodes.node_of[comm.rank()]]
                .as_ref()
                .is_ok_and(|t| t.resumed);
        match (output, resumed) {
            (Some(o), true) => drop(o.into_parts()),
            (o, _) => drop(o),
        }
        return Err(Error::new(last));
    }
    Ok(Setup {
        source: source.expect("checked above"),
        mode,
        targets: targets
            .into_iter()
            .map(|t| t.expect("checked above"))
            .collect(),
        planned_dir,
        output,
    })
}

/// On the leader, first: open DEST's directory, take over the partial copy `resume` an
/// interrupted earlier run recorded for this node (into `adopted`, when it still is that file)
/// and remove the temporaries a killed earlier run left for DEST (each named in the notes).
fn look(
    dest: &[u8],
    resume: Option<&(Vec<u8>, Kept)>,
    adopted: &mut Option<Output>,
) -> Result<(OwnedFd, Vec<String>), String> {
    let (dir_path, base) = atomic::split(dest);
    let dir = rustix::fs::open(
        as_path(&dir_path),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open directory {}: {e}", display(&dir_path)))?;
    // Before the stale ones go: the partial copy is a dead process's temporary.
    let taken = resume.and_then(|(name, was)| {
        Output::adopt(dir.as_fd(), &dir_path, &base, name, was, OFlags::RDWR)
    });
    if let Some((out, stale)) = taken {
        *adopted = Some(out);
        return Ok((dir, stale_notes(stale)));
    }
    let stale = atomic::remove_stale(dir.as_fd(), &base)
        .into_iter()
        .map(|(name, removed)| Stale {
            path: [dir_path.as_slice(), b"/", &name].concat(),
            removed,
        });
    Ok((dir, stale_notes(stale)))
}

/// What the user is told of the temporaries of killed earlier runs found beside DEST.
fn stale_notes(stale: impl IntoIterator<Item = Stale>) -> Vec<String> {
    stale
        .into_iter()
        .map(|s| {
            let path = display(&s.path);
            match s.removed {
                Ok(()) => {
                    format!("removed {path}, a temporary file an earlier interrupted run left")
                }
                Err(e) => format!("remove stale temporary {path}: {e}"),
            }
        })
        .collect()
}

/// On the leader, after every leader's [`look`]: decide how the node receives the file. DEST
/// is updated in place only when it is a regular file with one link and SRC's size, reached
/// without following a symlink; otherwise the partial copy taken over (`adopted`) or a fresh
/// temporary (an [`Output`]) of SRC's size is made (returned, with the notes of any stale
/// temporary it removed).
fn prepare(
    dir: rustix::fd::BorrowedFd<'_>,
    dest: &[u8],
    size: u64,
    adopted: Option<Output>,
) -> Result<(Target, Option<Output>, Vec<String>), String> {
    let (dir_path, base) = atomic::split(dest);
    // A partial copy taken over is used unless DEST is updated in place; of another size
    // (not this source's) it goes.
    let adopted = adopted.and_then(|out| {
        let fits = out
            .file()
            .and_then(|f| f.metadata().ok())
            .is_some_and(|m| m.len() == size);
        let in_place_next = rustix::fs::statat(dir, base.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| {
                st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_size as u64 == size
            });
        if fits && !in_place_next {
            Some(out)
        } else {
            let _ = out.discard();
            None
        }
    });
    let dir_id = atomic::identity(dir).map_err(|e| format!("stat {}: {e}", display(&dir_path)))?;
    match rustix::fs::statat(dir, base.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            return Err(format!("{} is a directory", display(dest)))
        }
        Ok(st)
            if st.st_mode & libc::S_IFMT == libc::S_IFREG
                && st.st_nlink == 1
                && st.st_size as u64 == size =>
        {
            let target = Target {
                in_place: true,
                path: dest.to_vec(),
                dir_id,
                file_id: (st.st_dev, st.st_ino),
                resumed: false,
            };
            return Ok((target, None, Vec::new()));
        }
        _ => {}
    }
    if let Some(out) = adopted {
        let file_id = out
            .identity()
            .map_err(|e| format!("stat {}: {e}", display(out.path())))?;
        let target = Target {
            in_place: false,
            path: out.path().to_vec(),
            dir_id,
            file_id,
            resumed: true,
        };
        return Ok((target, Some(out), Vec::new()));
    }
    let (out, stale) = Output::in_dir(dir, &dir_path, &base, OFlags::RDWR, 0o600).map_err(|e| {
        format!(
            "create a temporary file in {}: {}",
            display(&dir_path),
            e.source
        )
    })?;
    let path = out.path().to_vec();
    let file = out.file().expect("a file output");
    // Dropped on an error, `out` removes its temporary.
    let file_id = file
        .set_len(size)
        .map_err(|e| format!("truncate {}: {e}", display(&path)))
        .and_then(|()| {
            atomic::identity(file.as_fd()).map_err(|e| format!("stat {}: {e}", display(&path)))
        })?;
    let target = Target {
        in_place: false,
        path,
        dir_id,
        file_id,
        resumed: false,
    };
    Ok((target, Some(out), stale_notes(stale)))
}

/// On every rank, after the plan: the node's target opened for reading and writing, if DEST's
/// directory and the file are still the planned ones (no symlink followed at the file; for an
/// update in place, still a file with one link).
fn open_target(target: &Target) -> Result<File, String> {
    let (dir_path, name) = atomic::split(&target.path);
    let dir = atomic::open_dir_checked(&dir_path, target.dir_id)?;
    let fd = rustix::fs::openat(
        &dir,
        name.as_slice(),
        OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => format!(
            "{} is a symbolic link now (it was a file when planned): not written",
            display(&target.path)
        ),
        e => format!("open {}: {e}", display(&target.path)),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("stat {}: {e}", display(&target.path)))?;
    if (st.st_dev, st.st_ino) != target.file_id || (target.in_place && st.st_nlink != 1) {
        return Err(format!(
            "{} is not the file it was when planned (replaced or linked since): not written",
            display(&target.path)
        ));
    }
    Ok(File::from(fd))
}

/// On the leader, after every rank of the node synced: mode, then publish a temporary
/// (`output`: renamed in the planned directory, never following a symlink at DEST, and the
/// directory synced); or remove the temporary if the node failed.
fn finish(
    output: Option<Output>,
    out: Option<&File>,
    target: &Target,
    dest: &[u8],
    mode: u32,
    failed: bool,
    keep: bool,
) -> Result<(), String> {
    // Kept for the next run (a stop with a checkpoint), a temporary is taken apart, not
    // removed.
    let output = match (output, keep) {
        (Some(o), true) => {
            drop(o.into_parts());
            None
        }
        (o, _) => o,
    };
    let out = match (out, failed) {
        (Some(out), false) => out,
        // Dropped, the temporary goes.
        _ => return Ok(()),
    };
    rustix::fs::fchmod(out, rustix::fs::Mode::from_raw_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", display(&target.path)))?;
    if let Some(output) = output {
        output
            .publish(Replace::Overwrite)
            .map_err(|e| match e.step {
                Step::Rename => format!(
                    "rename {} to {}: {}",
                    display(&target.path),
                    display(dest),
                    e.source
                ),
                Step::SyncDir => format!("fsync the directory of {}: {}", display(dest), e.source),
                _ => e.to_string(),
            })?;
    }
    Ok(())
}

/// Every node's target (from its leader's result), known to every rank. Collective.
fn gather_targets(
    comm: &dyn Comm,
    nodes: &Nodes,
    mine: Option<Result<Target, String>>,
) -> Vec<Result<Target, ()>> {
    let mine = match mine {
        Some(Ok(t)) => Some(t),
        _ => None,
    };
    let mut all = comm.all_gather(&mine);
    nodes
        .ranks
        .iter()
        .map(|ranks| all[ranks[0]].take().ok_or(()))
        .collect()
}

/// Every rank's message (if any), in rank order. Collective.
fn gather_strings(comm: &dyn Comm, mine: Option<&String>) -> Vec<String> {
    comm.all_gather(&mine.cloned())
        .into_iter()
        .flatten()
        .collect()
}

/// Every rank's (segments written, segments skipped, error). Collective.
fn gather_outcomes(
    comm: &dyn Comm,
    counts: &Counts,
    error: Option<&str>,
) -> Vec<(u64, u64, Option<String>)> {
    comm.all_gather(&(counts.written, counts.skipped, error.map(str::to_string)))
}

/// Segments this rank wrote and skipped.
#[derive(Debug, Default)]
struct Counts {
    written: u64,
    skipped: u64,
    /// Bytes of the segments written.
    bytes: u64,
    /// A segment of the source could not be read: every node failed.
    source_failed: bool,
    /// A signal stopped the transfer (on every rank alike).
    interrupted: bool,
}

/// The rounds of one broadcast, as seen by one rank.
struct Transfer<'a> {
    /// Set by SIGINT/SIGTERM: every rank stops at the next round.
    stop: &'a std::sync::atomic::AtomicBool,
    comm: &'a dyn Comm,
    nodes: &'a Nodes,
    targets: &'a [Target],
    source: &'a File,
    /// This rank's handle on its node's target (`None` if it could not be opened).
    out: Option<&'a File>,
    size: u64,
    segment: u64,
    src_name: String,
    out_name: String,
    /// What earlier runs wrote on each node (for nodes whose partial copy was taken over).
    prior: &'a Prior,
    /// Where each segment written is marked.
    checkpoint: Option<&'a Checkpoint>,
}

/// The checkpoint key of segment `segment` of node `node`'s copy.
fn segment_key(node: &[u8], segment: u64) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(b"segment");
    h.update(&segment.to_le_bytes());
    h.update(node);
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
}

/// The checkpoint key of node `node`'s partial copy (its name and identity).
fn temp_key(node: &[u8]) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(b"partial copy");
    h.update(node);
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
}

/// A node's partial copy in its mark: its name and [`Kept`] stamp (encoded).
fn encode_temp(name: &[u8], stamp: &Kept) -> Vec<u8> {
    let stamp = serde_bytes::ByteBuf::from(stamp.encode().to_vec());
    steal::typed::encode(&(serde_bytes::Bytes::new(name), stamp))
}

fn decode_temp(payload: &[u8]) -> Option<(Vec<u8>, Kept)> {
    let (name, stamp) =
        steal::decode::<(serde_bytes::ByteBuf, serde_bytes::ByteBuf)>(payload).ok()?;
    Some((name.into_vec(), Kept::decode(&stamp)?))
}

impl Transfer<'_> {
    /// Node `node`'s copy holds segment `s` from an earlier run.
    fn done(&self, node: usize, s: u64) -> bool {
        self.targets[node].resumed && self.prior.done(segment_key(&self.nodes.names[node], s))
    }

    fn run(&self, failure: &mut Option<String>, progress: &Progress) -> Counts {
        let comm = self.comm;
        let (me, p) = (comm.rank(), comm.size() as u64);
        let my_node = self.nodes.node_of[me];
        let n_nodes = self.nodes.names.len();
        let nseg = self.size.div_ceil(self.segment);
        let compare = self.targets.iter().any(|t| t.in_place);
        let mut counts = Counts::default();
        let mut round = 0u64;
        while round < nseg {
            if comm.any(self.stop.load(Ordering::Relaxed)) {
                counts.interrupted = true;
                break;
            }
            let end = (round + p).min(nseg);
            // Read my segment of this round.
            let mine = round + me as u64;
            let mut data: Option<Result<Vec<u8>, String>> = None;
            // Which nodes need it: all, unless their copy holds it from an earlier run or its
            // segment hashes alike.
            let mut needs: Vec<bool> = (0..n_nodes).map(|n| !self.done(n, mine)).collect();
            if mine < end {
                data = Some(if needs.iter().any(|&n| n) {
                    self.read(mine)
                } else {
                    Ok(Vec::new())
                });
            }
            if compare {
                let mut sends = vec![Vec::new(); p as usize];
                if self.targets[my_node].in_place && failure.is_none() {
                    for s in round..end {
                        if self.nodes.writer(my_node, s) != me {
                            continue;
                        }
                        if let Some(h) = self.local_hash(s) {
                            let reader = (s - round) as usize;
                            sends[reader] = steal::typed::encode(h.as_bytes());
                        }
                    }
                }
                let hashes = comm.alltoallv(sends);
                if let Some(Ok(d)) = &data {
                    let source_hash = blake3::hash(d);
                    for (rank, h) in hashes.iter().enumerate() {
                        // Empty: that rank has no hash of this segment.
                        if h.is_empty() {
                            continue;
                        }
                        let h: [u8; HASH_LEN] = steal::typed::sent(steal::decode(h));
                        if h == *source_hash.as_bytes() {
                            needs[self.nodes.node_of[rank]] = false;
                        }
                    }
                }
            }
            // Broadcast each segment of the round from its reader; writers write.
            for s in round..end {
                let reader = (s - round) as usize;
                let mut buf = Vec::new();
                if reader == me {
                    buf = pack(data.take().expect("read above"), &needs, failure);
                }
                comm.bcast(reader, &mut buf);
                let Some((payload, node_needs)) = unpack(&buf, n_nodes) else {
                    counts.source_failed = true;
                    continue;
                };
                if self.nodes.writer(my_node, s) != me {
                    continue;
                }
                if self.done(my_node, s) {
                    // Written by an earlier run: the report covers the whole job.
                    counts.written += 1;
                    counts.bytes += self.segment.min(self.size - s * self.segment);
                } else if !node_needs[my_node] {
                    counts.skipped += 1;
                } else if let (Some(out), None) = (self.out, &failure) {
                    let at = s * self.segment;
                    match out.write_all_at(payload, at) {
                        Ok(()) => {
                            counts.written += 1;
                            counts.bytes += payload.len() as u64;
                            if let Some(c) = self.checkpoint {
                                c.mark(segment_key(&self.nodes.names[my_node], s), &[]);
                            }
                        }
                        Err(e) => {
                            *failure = Some(format!("{}: write at byte {at}: {e}", self.out_name))
                        }
                    }
                }
            }
            // Cheap: the progress runtime's timer draws what was handed over last.
            progress.report_sums(0, (end * self.segment).min(self.size), 0);
            round = end;
        }
        counts
    }

    fn read(&self, segment: u64) -> Result<Vec<u8>, String> {
        let at = segment * self.segment;
        let len = self.segment.min(self.size - at) as usize;
        let mut buf = Vec::with_capacity(len + 1 + self.nodes.names.len().div_ceil(8));
        buf.resize(len, 0);
        self.source
            .read_exact_at(&mut buf, at)
            .map_err(|e| format!("read {} at byte {at}: {e}", self.src_name))?;
        Ok(buf)
    }

    /// blake3 of the node's copy of `segment`, `None` if it cannot be read (then it is sent).
    fn local_hash(&self, segment: u64) -> Option<blake3::Hash> {
        let at = segment * self.segment;
        let len = self.segment.min(self.size - at) as usize;
        let mut buf = vec![0u8; len];
        self.out?.read_exact_at(&mut buf, at).ok()?;
        Some(blake3::hash(&buf))
    }
}

/// The reader's broadcast message: the data (only if some node needs it), then one bit per node
/// (needs it), then a flag byte (1 = data follows the rules, 0 = the read failed). A frame by
/// hand, not a typed message: the segment's bytes become the message without a copy.
fn pack(data: Result<Vec<u8>, String>, needs: &[bool], failure: &mut Option<String>) -> Vec<u8> {
    let mut buf = match data {
        Ok(d) if needs.iter().any(|&n| n) => d,
        Ok(_) => Vec::new(),
        Err(e) => {
            failure.get_or_insert(e);
            return vec![0];
        }
    };
    let mut bits = vec![0u8; needs.len().div_ceil(8)];
    for (i, &n) in needs.iter().enumerate() {
        if n {
            bits[i / 8] |= 1 << (i % 8);
        }
    }
    buf.extend_from_slice(&bits);
    buf.push(1);
    buf
}

/// The data and the per-node needs of a broadcast message; `None` if the read failed.
fn unpack(buf: &[u8], n_nodes: usize) -> Option<(&[u8], Vec<bool>)> {
    let (&flag, rest) = buf.split_last()?;
    if flag != 1 {
        return None;
    }
    let (data, bits) = rest.split_at(rest.len() - n_nodes.div_ceil(8));
    let needs = (0..n_nodes)
        .map(|i| bits[i / 8] & (1 << (i % 8)) != 0)
        .collect();
    Some((data, needs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_round_trip() {
        let mut failure = None;
        let needs = [true, false, false, false, false, false, false, false, true];
        let buf = pack(Ok(b"abc".to_vec()), &needs, &mut failure);
        let (data, got) = unpack(&buf, needs.len()).unwrap();
        assert_eq!(data, b"abc");
        assert_eq!(got, needs);
        let none = pack(Ok(b"abc".to_vec()), &[false, false], &mut failure);
        assert_eq!(unpack(&none, 2).unwrap(), (&b""[..], vec![false, false]));
        let bad = pack(Err("read x: EIO".into()), &needs, &mut failure);
        assert!(unpack(&bad, needs.len()).is_none());
        assert_eq!(failure.as_deref(), Some("read x: EIO"));
    }
}
