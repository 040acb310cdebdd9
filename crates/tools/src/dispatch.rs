//! The multi-call command line: `mfu-rs TOOL ...`, `mfu-rs dwalk ...`, or a symlink named
//! after a tool (`dwalk`, `mfu-dwalk`, `walk`).

use crate::cli::report_error;
use crate::status::Status;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// Tools by canonical name, with the mpiFileUtils names that also reach them. Adding a tool is
/// one line here and one variant in [`Tool`].
pub const TOOLS: &[(&str, &[&str])] = &[
    ("walk", &["dwalk"]),
    ("cp", &["dcp"]),
    ("sync", &["dsync"]),
    ("rm", &["drm"]),
    ("tar", &["dtar"]),
    ("stripe", &["dstripe"]),
    ("find", &["dfind"]),
    ("cmp", &["dcmp"]),
    ("chmod", &["dchmod"]),
    ("dup", &["ddup"]),
    ("filemaker", &["dfilemaker"]),
    ("reln", &["dreln"]),
    ("bcast", &["dbcast"]),
    ("bz2", &["dbz2"]),
];

#[derive(Parser, Debug)]
#[command(
    name = "mfu-rs",
    version,
    about = "Parallel data-management tools for HPC file systems (successor of mpiFileUtils)",
    long_about = "Parallel data-management tools for HPC file systems (successor of mpiFileUtils).\n\n\
        Run under an MPI launcher to use many processes (`srun -n 256 mfu-rs walk /lustre/dir`, \
        `mpirun -np 8 mfu-rs ...`); started directly, mfu-rs runs as one process with threads and \
        does not initialise MPI. Exit status: 0 all done, 1 some items failed, 2 usage or setup error.",
    after_help = "The mpiFileUtils names work too: `mfu-rs dwalk ...`, or a symlink named dwalk to mfu-rs."
)]
struct Cli {
    /// Run as N ranks (threads) of this one process instead of asking a launcher (experiments,
    /// tests). Also read from MFU_RANKS.
    #[arg(long, global = true, value_name = "N", env = "MFU_RANKS")]
    ranks: Option<usize>,
    #[command(subcommand)]
    tool: Tool,
}

#[derive(Subcommand, Debug)]
enum Tool {
    /// Walk trees (or read a list) and summarise, sort, print or save the list (dwalk).
    #[command(visible_alias = "dwalk")]
    Walk(crate::walk::WalkArgs),
    /// Copy files and trees in parallel (dcp).
    #[command(visible_alias = "dcp")]
    Cp(crate::cp::CpArgs),
    /// Make DEST equal to SRC, copying only what differs (dsync).
    #[command(visible_alias = "dsync")]
    Sync(crate::sync::SyncArgs),
    /// Remove files and trees in parallel (drm).
    #[command(visible_alias = "drm")]
    Rm(crate::rm::RmArgs),
    /// Create, extract or list tar archives in parallel, dtar-compatible (dtar).
    #[command(visible_alias = "dtar")]
    Tar(crate::tar::TarArgs),
    /// Restripe files on Lustre in parallel, or report their layouts (dstripe).
    #[command(visible_alias = "dstripe")]
    Stripe(crate::stripe::StripeToolArgs),
    /// Find files by name, time, size, owner or type; print them, save a list or run a command (dfind).
    #[command(visible_alias = "dfind")]
    Find(crate::find::FindArgs),
    /// Compare two trees, fields and contents, and report what differs (dcmp).
    #[command(visible_alias = "dcmp")]
    Cmp(crate::cmp::CmpArgs),
    /// Change owner, group and mode of trees in parallel (dchmod).
    #[command(visible_alias = "dchmod")]
    Chmod(crate::chmod::ChmodArgs),
    /// Find files with identical contents (ddup).
    #[command(visible_alias = "ddup")]
    Dup(crate::dup::DupArgs),
    /// Generate a reproducible random tree of files in parallel (dfilemaker).
    #[command(visible_alias = "dfilemaker")]
    Filemaker(crate::filemaker::FilemakerArgs),
    /// Rewrite symlink targets that start with an old prefix (dreln).
    #[command(visible_alias = "dreln")]
    Reln(crate::reln::RelnArgs),
    /// Copy one file to node-local storage on every node (dbcast).
    #[command(visible_alias = "dbcast")]
    Bcast(crate::bcast::BcastArgs),
    /// Compress or decompress files with parallel bzip2, compatible with bzip2 (dbz2).
    #[command(visible_alias = "dbz2")]
    Bz2(crate::bz2::Bz2Args),
}

/// The canonical tool that an executable name stands for: `dwalk`, `walk`, `mfu-dwalk` → `walk`.
pub fn tool_for_program(program: &[u8]) -> Option<&'static str> {
    let stem = program.rsplit(|&b| b == b'/').next().unwrap_or(program);
    TOOLS.iter().find_map(|&(name, old)| {
        std::iter::once(name)
            .chain(old.iter().copied())
            .find_map(|n| {
                let n = n.as_bytes();
                let prefixed = stem.len() > n.len()
                    && stem.ends_with(n)
                    && matches!(stem[stem.len() - n.len() - 1], b'-' | b'_');
                (stem == n || prefixed).then_some(name)
            })
    })
}

/// True when a launcher says this process is not rank 0 (then usage errors stay quiet, so
/// `mpirun -np 64` prints one message, not 64).
fn launched_as_other_rank() -> bool {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok())
    .is_some_and(|r| r.trim() != "0")
}

/// Run the command line `args` (`args[0]` is the program name) and return the exit code.
pub fn main_with_args(mut args: Vec<OsString>) -> i32 {
    if let Some(tool) = args.first().and_then(|p| tool_for_program(p.as_bytes())) {
        args.insert(1, tool.into());
        args[0] = "mfu-rs".into();
    }
    let parsed = Cli::command()
        .try_get_matches_from(&args)
        .and_then(|m| Ok((Cli::from_arg_matches(&m)?, m)));
    // Include/exclude rules keep their command-line order across options (rsync semantics),
    // which only the raw matches know.
    let parsed = parsed.and_then(|(cli, m)| {
        let (name, rules) = match m.subcommand() {
            Some((name, sub)) => (name.to_string(), crate::select::Rules::from_matches(sub)?),
            None => (String::new(), crate::select::Rules::default()),
        };
        Ok((cli, name, rules))
    });
    let (cli, tool_name, rules) = match parsed {
        Ok(v) => v,
        Err(e) => {
            let code = if e.use_stderr() {
                Status::Usage as i32
            } else {
                0
            };
            if !launched_as_other_rank() {
                let _ = e.print();
            }
            return code;
        }
    };
    let result = match cli.tool {
        Tool::Walk(a) => steal::launch::run(cli.ranks, |comm| crate::walk::run(comm, &a)),
        Tool::Cp(a) => steal::launch::run(cli.ranks, |comm| crate::cp::run(comm, &a, &rules)),
        Tool::Sync(a) => steal::launch::run(cli.ranks, |comm| crate::sync::run(comm, &a, &rules)),
        Tool::Rm(a) => steal::launch::run(cli.ranks, |comm| crate::rm::run(comm, &a)),
        Tool::Tar(a) => steal::launch::run(cli.ranks, |comm| crate::tar::run(comm, &a, &rules)),
        Tool::Stripe(a) => steal::launch::run(cli.ranks, |comm| crate::stripe::run(comm, &a)),
        Tool::Find(a) => steal::launch::run(cli.ranks, |comm| crate::find::run(comm, &a)),
        Tool::Cmp(a) => steal::launch::run(cli.ranks, |comm| crate::cmp::run(comm, &a)),
        Tool::Chmod(a) => steal::launch::run(cli.ranks, |comm| crate::chmod::run(comm, &a)),
        Tool::Dup(a) => steal::launch::run(cli.ranks, |comm| crate::dup::run(comm, &a)),
        Tool::Filemaker(a) => steal::launch::run(cli.ranks, |comm| crate::filemaker::run(comm, &a)),
        Tool::Reln(a) => steal::launch::run(cli.ranks, |comm| crate::reln::run(comm, &a)),
        Tool::Bcast(a) => steal::launch::run(cli.ranks, |comm| crate::bcast::run(comm, &a)),
        Tool::Bz2(a) => steal::launch::run(cli.ranks, |comm| crate::bz2::run(comm, &a)),
    };
    match result {
        // Lost output is a failure of this process (stdout is written by rank 0), even when
        // the tool's own work succeeded.
        Ok(statuses) => {
            statuses
                .into_iter()
                .max()
                .unwrap_or(Status::Ok)
                .max(if crate::cli::stdout_failed() {
                    Status::ItemsFailed
                } else {
                    Status::Ok
                }) as i32
        }
        Err(e) => {
            // Under a launcher of another MPI every task is a rank 0 of its own: the launcher's
            // rank variable keeps the message to one.
            if !launched_as_other_rank() {
                report_error(&tool_name, e);
            }
            Status::Usage as i32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_names_and_prefixes_dispatch() {
        assert_eq!(tool_for_program(b"/usr/bin/dwalk"), Some("walk"));
        assert_eq!(tool_for_program(b"mfu-dwalk"), Some("walk"));
        assert_eq!(tool_for_program(b"walk"), Some("walk"));
        assert_eq!(tool_for_program(b"mfu-rs"), None);
        assert_eq!(tool_for_program(b"xdwalk"), None);
    }

    #[test]
    fn help_exits_zero_and_bad_options_two() {
        assert_eq!(
            main_with_args(vec!["mfu-rs".into(), "walk".into(), "--help".into()]),
            0
        );
        assert_eq!(
            main_with_args(vec!["mfu-rs".into(), "walk".into(), "--bogus".into()]),
            2
        );
        assert_eq!(main_with_args(vec!["dwalk".into(), "--help".into()]), 0);
    }
}
