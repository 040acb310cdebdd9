//! Argument groups every tool shares.

use clap::Args;
use flist::units::parse_size;
use std::time::Duration;

/// `--progress`, `-v`, `-q`: the same on every tool.
// Its own heading: a group flattened before it (Lustre, Filters) would otherwise lend it its own.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Messages")]
pub struct Common {
    /// Print a progress line every N seconds (0 = never; fractions such as 0.5 allowed); rank 0
    /// prints it on stderr.
    #[arg(long, value_name = "N", default_value_t = 10.0, value_parser = parse_seconds)]
    pub progress: f64,
    /// Say more: per-rank detail, chosen sizes, timings.
    #[arg(short, long)]
    pub verbose: bool,
    /// Print only errors.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print the run's report as one JSON object on stdout (tool, status, seconds, items,
    /// bytes, failed and the tool's own counts); messages and listings go to stderr.
    #[arg(long)]
    pub json: bool,
    /// Start progress and error lines with the time of day (`[2026-11-26T04:12:13]`), as
    /// mpiFileUtils does. Also set by MFU_TIMESTAMPS=1.
    #[arg(long, env = "MFU_TIMESTAMPS", value_parser = clap::builder::FalseyValueParser::new())]
    pub timestamps: bool,
    /// While the run lasts, rank 0 serves its live status over HTTP on ADDR (`127.0.0.1:9464`,
    /// `[::1]:0`, `0.0.0.0:9464`): `GET /status` as JSON, `GET /metrics` for Prometheus (tool,
    /// phase, items and bytes done and expected, rates, ETA, failures, elapsed time, ranks,
    /// idle time per rank). With port 0 the address chosen is printed on stderr (`mfu-rs:
    /// status at http://127.0.0.1:PORT/`). An address that cannot be bound is a usage error
    /// before any work. The status is not authenticated: bind 0.0.0.0 only on a trusted network.
    #[arg(long, value_name = "ADDR", help_heading = "Live status")]
    pub status_listen: Option<String>,
    /// Rewrite the live status as a JSON file at PATH every --status-interval, atomically
    /// (temporary and rename in the same directory), and once at the end with the final counts
    /// and `"state"`: `done`, `failed` or `stopped`. Its directory must exist.
    #[arg(long, value_name = "PATH", help_heading = "Live status")]
    pub status_file: Option<std::ffi::OsString>,
    /// Seconds between rewrites of --status-file and between the ranks' reports to rank 0
    /// [default: the --progress interval, or 10 with --progress 0].
    #[arg(long, value_name = "SECS", value_parser = parse_positive_seconds, help_heading = "Live status")]
    pub status_interval: Option<f64>,
}

impl Common {
    /// How often progress is reported; `None` for `--progress 0` or `-q`.
    pub fn progress_every(&self) -> Option<Duration> {
        (self.progress > 0.0 && !self.quiet).then(|| Duration::from_secs_f64(self.progress))
    }

    /// How often the live status is sampled and its file rewritten; `None` without
    /// `--status-listen` or `--status-file`.
    pub fn status_every(&self) -> Option<Duration> {
        if self.status_listen.is_none() && self.status_file.is_none() {
            return None;
        }
        let secs = match self.status_interval {
            Some(s) => s,
            None if self.progress > 0.0 => self.progress,
            None => 10.0,
        };
        Some(Duration::from_secs_f64(secs))
    }
}

fn parse_positive_seconds(text: &str) -> Result<f64, String> {
    match parse_seconds(text) {
        Ok(s) if s > 0.0 => Ok(s),
        Ok(_) => Err(format!("'{text}': must be more than 0 seconds")),
        Err(e) => Err(e),
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=1e9).contains(&s) => Ok(s),
        _ => Err(format!("'{text}' is not a number of seconds")),
    }
}

/// `--noatime`: reads that leave access times alone, declared once for every tool that reads
/// file data or directories. Its older spellings stay as hidden aliases for scripts:
/// `--open-noatime` (dcp's, and mfu-rs' cp, sync, tar, cmp and dup before) and `--no-atime`
/// (mfu-rs walk's before).
#[derive(Args, Clone, Debug, Default)]
pub struct NoAtimeArg {
    /// Leave access times alone: read files and directories with O_NOATIME. Linux allows it
    /// only to a file's owner (or root); other files are read anyway, counted, and named in one
    /// warning at the end (noatime_refused in --json).
    #[arg(long = "noatime", alias = "open-noatime", alias = "no-atime")]
    pub noatime: bool,
}

/// `--bufsize`, `--chunksize`, `--noatime`: how a tool that moves file data reads it,
/// declared once for cp, sync, cmp and tar. Each tool gives them its own help text, short
/// names and defaults with `mut_arg` where its meaning differs (tar: `-b`, `-k`, 4MB).
#[derive(Args, Clone, Debug, Default)]
pub struct IoArgs {
    /// Bytes per read/write call on the pread/pwrite path (used when copy_file_range can't be:
    /// across file systems, with --direct) [default: adaptive: starts at 1 MiB and doubles
    /// while the measured throughput improves; -v prints what was chosen].
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub bufsize: Option<u64>,
    /// Bytes per chunk: files are split into chunks copied by different ranks [default: 4MB,
    /// grown up to 1GB for big data sets so that every thread still gets two chunks; -v prints
    /// the size used].
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub chunksize: Option<u64>,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
}

/// Parse a size argument (`4MB`, `64k`...) for clap: more than 0 bytes.
pub fn size_arg(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err(format!("'{text}': must be more than 0 bytes")),
        n => Ok(n),
    }
}

/// `--checkpoint PATH`, `--no-checkpoint`: where a resumable tool records the work it finished
/// (see the README's "Continuing an interrupted run"), declared once for every such tool.
#[derive(Args, Clone, Debug, Default)]
pub struct CheckpointArgs {
    /// Keep the checkpoint (the record of finished work that lets the same command, run again,
    /// continue) in this directory instead of beside the output (`DIR/.NAME.mfu-checkpoint`) or,
    /// for a tool without an output file, in `$XDG_STATE_HOME/mfu-rs/checkpoints` (or
    /// `~/.local/state/...`). It must be on a file system every rank sees.
    #[arg(long, value_name = "PATH", conflicts_with = "no_checkpoint")]
    pub checkpoint: Option<std::ffi::OsString>,
    /// Keep no checkpoint: an interrupted run starts over when run again.
    #[arg(long)]
    pub no_checkpoint: bool,
}

impl CheckpointArgs {
    /// The choice these options make.
    pub fn choice(&self) -> crate::engine::checkpoint::Choice {
        use crate::engine::checkpoint::Choice;
        match (&self.checkpoint, self.no_checkpoint) {
            (_, true) => Choice::Off,
            (Some(p), false) => {
                use std::os::unix::ffi::OsStrExt;
                Choice::At(p.as_bytes().to_vec())
            }
            (None, false) => Choice::Beside,
        }
    }
}

/// `--memory-limit SIZE`, `--tmpdir DIR`: how much memory a rank may hold for a list, and
/// where what does not fit spills (issue 34), declared once for every tool whose lists spill.
#[derive(Args, Clone, Debug, Default)]
pub struct MemoryArgs {
    /// Memory per rank for the list's records (SIZE as 512M, 2G). Beyond it, sorted runs
    /// spill to TMPDIR and are merged as they are read; below it nothing spills. Default: half
    /// of the node's memory (MemTotal) divided by the ranks on the node (the run's report
    /// shows the value). So far it bounds the sort of a list file into a list file (`walk -i
    /// LIST -s KEYS -o OUT`, a v3/v4 list), the walk of PATHs into a list file (`walk -o OUT`,
    /// with no `-s` or `-s name`, without `-p`, `-d`, `-f`, `-t`, `--lite`: unsorted, the list
    /// is written in path order on each rank), `find -i LIST` and `rm -i LIST` of a v3/v4 list
    /// (read a piece at a time), dup's grouping by size and hash, the pairing and comparison
    /// of `cmp SRC DEST` (its walks spill too), the pairing of `sync SRC DEST` (its walks
    /// still hold each tree's list once; sync plans what it changes in memory, and its -o,
    /// --state, --manifest and -L hold the lists) and the entries of `tar -x` (a piece at a
    /// time); other runs still hold their list in memory.
    #[arg(long, value_name = "SIZE", value_parser = memory_limit_arg)]
    pub memory_limit: Option<u64>,
    /// Directory for spill files (default: $TMPDIR, else /tmp); node-local disk on clusters.
    /// Spill files have no name and vanish when the run ends, however it ends.
    #[arg(long, value_name = "DIR")]
    pub tmpdir: Option<std::ffi::OsString>,
}

impl MemoryArgs {
    /// The spill directory as bytes.
    pub fn tmpdir(&self) -> Option<Vec<u8>> {
        self.tmpdir.as_ref().map(|d| d.as_encoded_bytes().to_vec())
    }
}

/// Parse `--memory-limit` for clap.
fn memory_limit_arg(text: &str) -> Result<u64, String> {
    flist::spill::MemoryLimit::parse(text)
}
