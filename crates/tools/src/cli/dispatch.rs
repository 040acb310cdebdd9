//! The multi-call command line: `mfu-rs TOOL ...`, `mfu-rs dwalk ...`, or a symlink named
//! after a tool (`dwalk`, `mfu-dwalk`, `walk`).

use crate::cli::console::{is_stdout, report_error, Console};
use crate::cli::tool::{row, CliTool, Row};
use crate::engine::context::{Context, ToolReport};
use crate::engine::select::Rules;
use crate::engine::status::Status;
use clap::{ArgMatches, FromArgMatches};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

/// Every tool, in the order of `mfu-rs --help`. Adding a tool is one row here (and its
/// [`CliTool`] in `cli/`).
pub static TOOLS: &[&dyn Row] = &[
    row::<crate::cli::walk::Walk>(),
    row::<crate::cli::cp::Cp>(),
    row::<crate::cli::sync::Sync>(),
    row::<crate::cli::rm::Rm>(),
    row::<crate::cli::tar::Tar>(),
    row::<crate::cli::stripe::Stripe>(),
    row::<crate::cli::find::Find>(),
    row::<crate::cli::cmp::Cmp>(),
    row::<crate::cli::chmod::Chmod>(),
    row::<crate::cli::dup::Dup>(),
    row::<crate::cli::filemaker::Filemaker>(),
    row::<crate::cli::reln::Reln>(),
    row::<crate::cli::bcast::Bcast>(),
    row::<crate::cli::bz2::Bz2>(),
];

const ABOUT: &str =
    "Parallel data-management tools for HPC file systems (successor of mpiFileUtils)";
const LONG_ABOUT: &str =
    "Parallel data-management tools for HPC file systems (successor of mpiFileUtils).\n\n\
    Run under an MPI launcher to use many processes (`srun -n 256 mfu-rs walk /lustre/dir`, \
    `mpirun -np 8 mfu-rs ...`); started directly, mfu-rs runs as one process with threads and \
    does not initialise MPI. Exit status: 0 all done, 1 some items failed, 2 usage or setup error.";

/// Names of older mpiFileUtils programs that also reach a tool (scripts still call them), not
/// shown in the help: `dcp1` was dcp without chunking; mfu-rs's cp is its successor.
const HIDDEN_NAMES: &[(&str, &[&str])] = &[("cp", &["dcp1"])];

/// The names other than `tool` that reach it: its mpiFileUtils names, shown and hidden.
pub fn other_names(tool: &str) -> Vec<&'static str> {
    let rows = TOOLS.iter().map(|t| (t.name(), t.old_names()));
    rows.chain(HIDDEN_NAMES.iter().copied())
        .filter(|(name, _)| *name == tool)
        .flat_map(|(_, names)| names.iter().copied())
        .collect()
}

/// The whole command line: `mfu-rs [--ranks N] TOOL ...`, every tool with `--help` and
/// `--version` (whose long form is `version`: see [`crate::cli::version::long_version`]).
pub fn command(version: &str) -> clap::Command {
    let mut cmd = clap::Command::new("mfu-rs")
        .version(env!("CARGO_PKG_VERSION"))
        .long_version(version.to_string())
        .propagate_version(true)
        .about(ABOUT)
        .long_about(LONG_ABOUT)
        .after_help(
            "The mpiFileUtils names work too: `mfu-rs dwalk ...`, or a symlink named dwalk to mfu-rs.",
        )
        .subcommand_required(true)
        .arg_required_else_help(true)
        .arg(
            clap::Arg::new("ranks")
                .long("ranks")
                .global(true)
                .value_name("N")
                .env("MFU_RANKS")
                .help(
                    "Run as N ranks (threads) of this one process instead of asking a launcher \
                     (experiments, tests); N is 1 to 256. Also read from MFU_RANKS",
                )
                .value_parser(
                    clap::builder::RangedU64ValueParser::<usize>::new()
                        .range(1..=steal::local::MAX_RANKS as u64),
                ),
        )
        .subcommands(TOOLS.iter().map(|t| t.command()))
        .subcommand(crate::cli::manuals::man_command())
        .subcommand(crate::cli::manuals::completions_command());
    for (tool, hidden) in HIDDEN_NAMES {
        cmd = cmd.mut_subcommand(*tool, |c| c.aliases(hidden.iter().copied()));
    }
    cmd
}

/// The canonical tool that an executable name stands for: `dwalk`, `walk`, `mfu-dwalk` → `walk`.
pub fn tool_for_program(program: &[u8]) -> Option<&'static str> {
    let stem = program.rsplit(|&b| b == b'/').next().unwrap_or(program);
    let hidden = HIDDEN_NAMES.iter().copied();
    let rows = TOOLS.iter().map(|t| (t.name(), t.old_names()));
    rows.chain(hidden).find_map(|(name, old)| {
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

/// Refuse what no tool can do, before any work and alike on every rank (the command line is
/// the same everywhere): an empty name (`''` names no file; it is not `.`), then the tool's own
/// refusals.
fn check_command_line<T: CliTool>(args: &T::Args) -> Result<(), String> {
    if let Some((what, _)) = T::named_files(args).into_iter().find(|(_, f)| f.is_empty()) {
        return Err(format!("an empty {what} names no file"));
    }
    T::check(args)
}

/// Why the output `file` cannot be created: its directory is missing, not a directory or not
/// writable, or `file` is a directory. Checked before the work, so that a long walk does not end
/// in "cannot create the output".
fn output_location_problem(option: &str, file: &[u8]) -> Option<String> {
    use rustix::fs::{access, Access};
    let shown = flist::path::display(file);
    let dir: &[u8] = match file.iter().rposition(|&b| b == b'/') {
        None => b".",
        Some(0) => b"/",
        Some(i) => &file[..i],
    };
    if std::fs::metadata(flist::path::as_path(file)).is_ok_and(|m| m.is_dir()) {
        return Some(format!("{option} {shown}: is a directory (nothing done)"));
    }
    let cannot = |why: String| {
        Some(format!(
            "{option} {shown}: cannot create it in {}: {why} (nothing done)",
            flist::path::display(dir)
        ))
    };
    match std::fs::metadata(flist::path::as_path(dir)) {
        Err(e) => return cannot(e.to_string()),
        Ok(m) if !m.is_dir() => return cannot("Not a directory".into()),
        Ok(_) => {}
    }
    match access(
        flist::path::as_path(dir),
        Access::WRITE_OK | Access::EXEC_OK,
    ) {
        Ok(()) => None,
        Err(e) => cannot(std::io::Error::from(e).to_string()),
    }
}

/// Rank 0 checks that every output file of the run can be created (see
/// [`output_location_problem`]) and the ranks agree: `Some(Status::Usage)` when not. Collective.
fn refuse_unwritable_outputs(
    comm: &dyn steal::Comm,
    tool: &str,
    files: &[(&str, &[u8])],
) -> Option<Status> {
    let problem = if comm.rank() == 0 {
        files
            .iter()
            .find_map(|(option, f)| output_location_problem(option, f))
    } else {
        None
    };
    if let Some(p) = &problem {
        report_error(tool, p);
    }
    steal::CommExt::any(comm, problem.is_some()).then_some(Status::Usage)
}

/// The signal contract's last line: a SIGINT/SIGTERM caught while the tool was in a phase that
/// no longer takes work (printing, writing its list, directory times) let it finish; the run
/// still exits 1, as every interrupted run does, and says what happened when the tool did not.
fn late_signal(tool: &str, status: Status) -> Status {
    if !steal::signals::stop_flag().load(std::sync::atomic::Ordering::SeqCst) {
        return Status::Ok;
    }
    if status == Status::Ok && !launched_as_other_rank() {
        report_error(
            tool,
            "interrupted by a signal at the end of the run: everything asked for was done",
        );
    }
    Status::ItemsFailed
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

/// Starts a command's ranks (the `--ranks` of the command line already applied) and returns
/// this process's ranks' statuses.
pub type Launcher<'a> = dyn Fn(&(dyn Fn(&dyn steal::Comm) -> Status + Sync)) -> Result<Vec<Status>, steal::LaunchError>
    + 'a;

/// How a command's ranks are started: [`steal::launch::run`] (MPI under a launcher, when built
/// with it) or [`steal::launch::run_local`] (never MPI), given the `--ranks` asked for.
pub type Launch = fn(
    Option<usize>,
    &(dyn Fn(&dyn steal::Comm) -> Status + Sync),
) -> Result<Vec<Status>, steal::LaunchError>;

/// The binary that links MPI, installed next to `mfu-rs` (`cargo install` installs both).
pub const MPI_BINARY: &str = "mfu-rs-mpi";

/// Run the command line `args` (`args[0]` is the program name) and return the exit code:
/// under a launcher with MPI (when built with it), otherwise as thread ranks of this process.
pub fn main_with_args(args: Vec<OsString>) -> i32 {
    let version = crate::cli::version::long_version(&crate::cli::version::mpi_library());
    main_with(
        args,
        |ranks, f| steal::launch::run(ranks, f),
        &version,
        false,
    )
}

/// [`main_with_args`] without MPI: what `mfu-rs` runs when no launcher started it. A binary
/// that calls only this does not link (so does not load) the MPI library.
pub fn main_without_mpi(args: Vec<OsString>) -> i32 {
    let mpi = if cfg!(feature = "mpi") {
        format!("loaded only under a launcher, by {MPI_BINARY} (which could not be asked)")
    } else {
        crate::cli::version::mpi_library()
    };
    let version = crate::cli::version::long_version(&mpi);
    // This binary does not link MPI: the MPI binary says which library it was built with.
    main_with(
        args,
        |ranks, f| steal::launch::run_local(ranks, f),
        &version,
        cfg!(feature = "mpi"),
    )
}

/// Hand this process to [`MPI_BINARY`], found next to the running executable, with the same
/// arguments (`argv[0]` too: `dwalk` still means walk) and environment: what `mfu-rs` does when
/// a launcher started it, so that only runs under a launcher load the MPI library. Returns
/// only when that fails, with the exit code (2, named on stderr).
pub fn exec_mpi_binary() -> i32 {
    let why = exec_mpi_binary_quietly();
    if !launched_as_other_rank() {
        let arg0 = std::env::args_os().next().unwrap_or_default();
        let tool = tool_for_program(arg0.as_bytes()).unwrap_or("");
        report_error(tool, why);
    }
    Status::Usage as i32
}

/// Exec [`MPI_BINARY`] as [`exec_mpi_binary`] does; returns why it could not.
fn exec_mpi_binary_quietly() -> String {
    use std::os::unix::process::CommandExt;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "mfu-rs".into());
    let why = match std::env::current_exe() {
        Ok(exe) => {
            let mpi = exe.with_file_name(MPI_BINARY);
            let err = std::process::Command::new(&mpi)
                .arg0(&arg0)
                .args(args)
                .exec();
            format!(
                "started by a launcher, mfu-rs runs MPI through {}, which could not be started: \
                 {err} (install both binaries: `cargo install --path crates/tools`)",
                mpi.display()
            )
        }
        Err(e) => format!(
            "started by a launcher, mfu-rs runs MPI through {MPI_BINARY} next to itself, but \
             its own location is unknown: {e}"
        ),
    };
    why
}

/// Run `args`: `version` is the long `--version` text; `version_from_mpi_binary`: ask
/// [`MPI_BINARY`] for it instead (it names the MPI library; this binary does not link it).
fn main_with(
    mut args: Vec<OsString>,
    launch: Launch,
    version: &str,
    version_from_mpi_binary: bool,
) -> i32 {
    if let Some(tool) = args.first().and_then(|p| tool_for_program(p.as_bytes())) {
        args.insert(1, tool.into());
        args[0] = "mfu-rs".into();
    }
    let matches = match command(version).try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayVersion && version_from_mpi_binary => {
            // Returns only when the MPI binary can't be started: then say what this one knows.
            let _ = exec_mpi_binary_quietly();
            return clap_error(e);
        }
        Err(e) => return clap_error(e),
    };
    let ranks = matches.get_one::<usize>("ranks").copied();
    let Some((name, sub)) = matches.subcommand() else {
        return Status::Usage as i32;
    };
    if let Some(code) = manuals(name, sub, version) {
        return code;
    }
    let Some(tool) = TOOLS.iter().find(|t| t.name() == name) else {
        return Status::Usage as i32;
    };
    tool.main(sub, &|f| launch(ranks, f))
}

/// `mfu-rs man` and `mfu-rs completions`: their exit code, or `None` for a tool.
fn manuals(name: &str, sub: &ArgMatches, version: &str) -> Option<i32> {
    let mut out = Vec::new();
    let written = match name {
        "man" if sub.get_flag("list") => {
            out = crate::cli::manuals::list();
            Ok(())
        }
        "man" => crate::cli::manuals::man(
            command(version),
            sub.get_one::<String>("tool").map(String::as_str),
            &mut out,
        ),
        "completions" => crate::cli::manuals::completions(
            command(version),
            *sub.get_one::<clap_complete::Shell>("shell")?,
            sub.get_one::<String>("name").map(String::as_str),
            &mut out,
        ),
        _ => return None,
    };
    Some(match written {
        Ok(()) => {
            crate::cli::console::stdout_bytes(&out);
            if crate::cli::console::stdout_failed() {
                Status::ItemsFailed as i32
            } else {
                0
            }
        }
        Err(e) => {
            report_error(name, e);
            Status::Usage as i32
        }
    })
}

/// Print a clap error (or help, or version) and return its exit code: 0 for help and version,
/// 2 for a usage error.
fn clap_error(e: clap::Error) -> i32 {
    let code = if e.use_stderr() {
        Status::Usage as i32
    } else {
        0
    };
    if !launched_as_other_rank() {
        let _ = e.print();
    }
    code
}

/// Run tool `T` with its parsed subcommand `matches` on the ranks `launch` starts: check the
/// command line, build the options, run, render the report on rank 0 (text or `--json`), and
/// return the exit code every rank agreed on.
pub fn main_of<T: CliTool>(matches: &ArgMatches, launch: &Launcher<'_>) -> i32 {
    // Include/exclude rules keep their command-line order across options (rsync semantics),
    // which only the raw matches know.
    let parsed = T::Args::from_arg_matches(matches)
        .and_then(|args| Ok((Rules::from_matches(matches)?, args)));
    let (rules, args) = match parsed {
        Ok(v) => v,
        Err(e) => return clap_error(e),
    };
    let tool = T::NAME;
    let common = T::common(&args);
    let outputs = T::output_files(&args);
    let list_to_stdout = outputs.iter().any(|(_, f)| is_stdout(f));
    let refused = check_command_line::<T>(&args).and_then(|()| {
        if common.json && list_to_stdout {
            Err("--json prints the report on stdout: write the list to a file, not -o -".into())
        } else {
            Ok(())
        }
    });
    if let Err(problem) = refused {
        if !launched_as_other_rank() {
            report_error(tool, problem);
        }
        return Status::Usage as i32;
    }
    let console = Console {
        tool,
        quiet: common.quiet,
        stdout_reserved: list_to_stdout || common.json,
        json: common.json,
        timestamps: common.timestamps,
        last: Default::default(),
    };
    // The binary, not the library, catches SIGINT/SIGTERM; a flag left set by an earlier run in
    // this process does not stop this one.
    steal::signals::install();
    steal::signals::reset();
    let mut context = Context::new(Arc::new(console.clone()));
    context.progress = common.progress_every();
    context.verbose = common.verbose;
    context.stop = steal::signals::shared_stop_flag();
    let json = common.json;
    let options = T::options(&args, rules, context);
    let files: Vec<(&str, &[u8])> = outputs.into_iter().filter(|(_, f)| !is_stdout(f)).collect();
    let started = std::time::Instant::now();
    // Every tool starts with the same checks, on every rank.
    let result = launch(&|comm| {
        if let Some(status) = refuse_unwritable_outputs(comm, tool, &files) {
            return status;
        }
        let status = match T::run(comm, &options) {
            Ok(report) => {
                if comm.rank() == 0 {
                    if json {
                        print_json(tool, &report, started.elapsed().as_secs_f64());
                    } else if !console.quiet {
                        T::render(&report, &console);
                    }
                }
                report.status()
            }
            Err(e) => {
                if comm.rank() == 0 {
                    report_error(tool, e);
                }
                Status::Usage
            }
        };
        status.agree(comm)
    });
    match result {
        // Lost output is a failure of this process (stdout is written by rank 0), even when
        // the tool's own work succeeded.
        Ok(statuses) => {
            crate::cli::runtime_stats::print(tool);
            let status = statuses.into_iter().max().unwrap_or(Status::Ok);
            let lost_output = if crate::cli::console::stdout_failed() {
                Status::ItemsFailed
            } else {
                Status::Ok
            };
            status.max(lost_output).max(late_signal(tool, status)) as i32
        }
        Err(e) => {
            // Under a launcher of another MPI every task is a rank 0 of its own: the launcher's
            // rank variable keeps the message to one.
            if !launched_as_other_rank() {
                report_error(tool, e);
            }
            Status::Usage as i32
        }
    }
}

/// The report of a run as one JSON object on stdout: `tool`, `status`, `seconds`, `items`,
/// `bytes`, `failed`, then the tool's own fields.
fn print_json<R: ToolReport>(tool: &str, report: &R, seconds: f64) {
    let summary = report.summary();
    let mut object = serde_json::Map::new();
    object.insert("tool".into(), tool.into());
    object.insert("status".into(), (report.status() as u8).into());
    let seconds = if summary.seconds > 0.0 {
        summary.seconds
    } else {
        seconds
    };
    object.insert("seconds".into(), seconds.into());
    object.insert("items".into(), summary.items.into());
    object.insert("bytes".into(), summary.bytes.into());
    object.insert("failed".into(), summary.failed.into());
    match serde_json::to_value(report) {
        Ok(serde_json::Value::Object(fields)) => {
            for (k, v) in fields {
                object.entry(k).or_insert(v);
            }
        }
        Ok(other) => {
            object.insert("report".into(), other);
        }
        Err(e) => report_error(
            tool,
            format!("the report could not be written as JSON: {e}"),
        ),
    }
    let mut line = serde_json::Value::Object(object).to_string();
    line.push('\n');
    crate::cli::console::stdout_bytes(line.as_bytes());
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
