//! `mfu-rs bcast` on the command line: [`BcastArgs`] and the rendering of
//! [`crate::bcast::Report`] (nothing but, with `-v`, each node's segments, on stderr).

use crate::bcast::{Options, Report};
use crate::cli::args::{Common, NoAtimeArg};
use crate::cli::console::{stderr_bytes, Console};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::select::Rules;
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// Options of `mfu-rs bcast`, named as in dbcast.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Copy one file to node-local storage on every node",
    after_help = "Every node gets DEST (the same path on each node, e.g. a local SSD or ramdisk). \
        Each segment of SRC is read once, by one rank, and sent to every node. If DEST already \
        exists with SRC's size, only segments that differ (blake3) are sent and rewritten, in \
        place (an update cut short leaves DEST mixed, at the right size: rerun to finish it); -v \
        tells how many per node. Only a regular file with one link is updated in place: a DEST \
        that is a symbolic link or has other hard links is replaced by a new file (renamed over \
        it; the link's target and the other names are not written). SIGINT/SIGTERM stop the \
        transfer (exit 1): the segments written on each node are recorded in a checkpoint (in \
        $XDG_STATE_HOME/mfu-rs/checkpoints, or --checkpoint PATH: a file system every rank \
        sees) and each node's partial copy is kept beside DEST, so that the same command run \
        again (after a stop or a kill, at any rank count) reads and writes only the segments \
        each node lacks. A partial copy that is gone or not the file written, or a source \
        changed since, is not used (the run starts over and says so). With --no-checkpoint a \
        stop removes the temporary files. A temporary .DEST.HOST.PID.mfu-tmp \
        that a killed earlier run on the node left is removed by the next run. Nodes are told apart by host name; set MFU_NODE_NAME to \
        override it (containers that share a host name, tests).\n\n\
        Examples:\n  \
        srun -N 64 -n 256 mfu-rs bcast /lustre/db/index.bin /tmp/index.bin\n  \
        mpirun -np 128 mfu-rs bcast -s 4MB /lustre/model.pt /dev/shm/model.pt\n\n\
        Exit status: 0 every node has DEST, 1 some node failed (each failure listed with node, \
        path and operation; a new DEST is not left behind half written), 2 usage error (SRC \
        missing or not a file, DEST's directory missing on a node; nothing changed)."
)]
pub struct BcastArgs {
    /// The file to copy (readable by every rank).
    #[arg(value_name = "SRC")]
    pub src: OsString,
    /// Where the copy goes on every node (its directory must exist).
    #[arg(value_name = "DEST")]
    pub dest: OsString,
    /// Bytes per segment (the unit read by one rank and sent to every node); units such as
    /// 4MB allowed. The stripe size of SRC is a good choice on Lustre.
    #[arg(short, long, value_name = "SIZE", default_value = "1MB",
          value_parser = crate::cli::args::size_arg)]
    pub size: u64,
    /// Where the segments written are recorded, so that the same command continues.
    #[command(flatten)]
    pub checkpoint: crate::cli::args::CheckpointArgs,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

/// `mfu-rs bcast` (dbcast).
pub struct Bcast;

impl CliTool for Bcast {
    const NAME: &'static str = "bcast";
    const OLD_NAMES: &'static [&'static str] = &["dbcast"];
    const ABOUT: &'static str = "Copy one file to node-local storage on every node (dbcast)";
    type Args = BcastArgs;
    type Options = Options;
    type Report = Report;

    fn common(args: &BcastArgs) -> &Common {
        &args.common
    }
    fn noatime(args: &BcastArgs) -> bool {
        args.noatime.noatime
    }

    fn named_files(args: &BcastArgs) -> Vec<(&'static str, &OsStr)> {
        vec![
            ("SRC", args.src.as_os_str()),
            ("DEST", args.dest.as_os_str()),
        ]
    }

    fn options(args: &BcastArgs, _rules: Rules, context: Context) -> Options {
        Options {
            src: args.src.as_bytes().to_vec(),
            dest: args.dest.as_bytes().to_vec(),
            segment: args.size,
            checkpoint: args.checkpoint.choice(),
            context,
        }
    }

    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::bcast::run(comm, options)
    }

    /// Nothing on success; `-v` tells each node's segments, on stderr.
    fn render(report: &Report, _console: &Console) {
        if !report.verbose {
            return;
        }
        let lines: String = report
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "node {}: {} of {} segments written, {} identical skipped\n",
                    n.name, n.written, report.segments, n.skipped
                )
            })
            .collect();
        stderr_bytes(lines.as_bytes());
    }
}
