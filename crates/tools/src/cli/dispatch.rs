//! The multi-call command line: `mfu-rs TOOL ...`, `mfu-rs dwalk ...`, or a symlink named
//! after a tool (`dwalk`, `mfu-dwalk`, `walk`).

use crate::cli::console::report_error;
use crate::cli::run_tool::{clap_error, launched_as_other_rank, row, Row};
use crate::engine::status::Status;
use clap::ArgMatches;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// Every tool, in the order of `mfu-rs --help`. Adding a tool is one row here (and its
/// [`crate::cli::tool::CliTool`] in `cli/`).
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
    row::<crate::cli::du::Du>(),
    row::<crate::cli::filemaker::Filemaker>(),
    row::<crate::cli::reln::Reln>(),
    row::<crate::cli::bcast::Bcast>(),
    row::<crate::cli::bz2::Bz2>(),
    row::<crate::cli::grep::Grep>(),
    row::<crate::cli::parallel::Parallel>(),
    row::<crate::cli::sh::Sh>(),
    row::<crate::cli::pfa::Pfa>(),
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

/// `man --list`: each tool's canonical name, then the other names that reach it.
pub fn list() -> Vec<u8> {
    let mut out = String::new();
    for row in TOOLS {
        out.push_str(row.name());
        for n in other_names(row.name()) {
            out.push(' ');
            out.push_str(n);
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// The whole command line: `mfu-rs [--ranks N] TOOL ...`, every tool with `--help` and
/// `--version` (whose long form is `version`: see `crate::cli::version::long_version`).
pub fn command(version: &str) -> clap::Command {
    command_with(version, None)
}

/// [`command`], with only the tool named `only` among its subcommands when given: a command
/// line that names its tool first needs no other tool's arguments, and building all of them is
/// a part of every start.
fn command_with(version: &str, only: Option<&dyn Row>) -> clap::Command {
    let cmd = clap::Command::new("mfu-rs")
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
        );
    if let Some(tool) = only {
        return cmd.subcommand(tool.command());
    }
    let mut cmd = cmd
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

/// Hand this process to `MPI_BINARY`, found next to the running executable, with the same
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
    // `mfu-rs walk ...` (or `dwalk ...`): only walk's arguments are built.
    let named = args
        .get(1)
        .and_then(|a| a.to_str())
        .and_then(|a| TOOLS.iter().find(|t| t.name() == a))
        .copied();
    let matches = match command_with(version, named).try_get_matches_from(&args) {
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
    // In the binaries, a complete checkpoint stays until the report is out and MPI is left
    // (see `Checkpoint::finish`): a kill before then costs a rerun nothing. A library caller
    // gets it removed as this returns.
    let at_exit = AT_EXIT.load(std::sync::atomic::Ordering::SeqCst);
    if at_exit {
        remove_checkpoints_at_exit(tool.name());
    }
    // An earlier run of this process (a library caller's) keeps none past this one's start.
    for e in crate::engine::checkpoint::remove_completed() {
        report_error(tool.name(), e);
    }
    crate::engine::checkpoint::remove_at_exit(true);
    let code = tool.main(sub, &|f| launch(ranks, f));
    crate::engine::checkpoint::remove_at_exit(false);
    if std::env::var_os("MFU_RS_TEST_CHECKPOINT_STOP_AT_EXIT").is_some() {
        // The test knob: a SIGTERM as the run ends, after its report.
        steal::signals::stop_flag().store(true, std::sync::atomic::Ordering::SeqCst);
    }
    // A signal during the run, its last phase included. One that comes later, as the process
    // exits, is not a time limit's reason to run again: `mpirun` sends one to every rank still
    // finishing when another rank exits with a non-zero status (a `cmp` that found
    // differences), and the work is done.
    SIGNALLED_IN_RUN.store(
        steal::signals::stop_flag().load(std::sync::atomic::Ordering::SeqCst),
        std::sync::atomic::Ordering::SeqCst,
    );
    if at_exit {
        return code;
    }
    let left = crate::engine::checkpoint::remove_completed();
    for e in &left {
        report_error(tool.name(), e);
    }
    if left.is_empty() {
        code
    } else {
        code.max(Status::ItemsFailed as i32)
    }
}

/// Set by the binaries (see [`remove_at_exit_in_binaries`]).
static AT_EXIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What the `mfu-rs` binaries call first: the complete checkpoints of their runs are removed as
/// the process exits, after MPI's finalize, not as the run returns (what a library caller of
/// [`main_with_args`] gets, whose temporary directories may be gone by its exit).
pub fn remove_at_exit_in_binaries() {
    AT_EXIT.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// A stop signal came before the tool returned (see [`remove_completed_at_exit`]).
static SIGNALLED_IN_RUN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The tool whose complete checkpoints [`remove_completed_at_exit`] removes (for its errors).
static EXITING_TOOL: std::sync::Mutex<&str> = std::sync::Mutex::new("");

/// Remove the complete checkpoints of this process's runs when it exits (`atexit`), or when
/// it starts another run: MPI is finalized at exit too, by a handler registered when MPI
/// starts, which is after this one, so it runs before this one. Registered once per process.
fn remove_checkpoints_at_exit(tool: &'static str) {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    *EXITING_TOOL.lock().unwrap_or_else(|p| p.into_inner()) = tool;
    REGISTERED.call_once(|| {
        // SAFETY: atexit(3) with a function that takes no arguments and never unwinds.
        unsafe { libc::atexit(remove_completed_at_exit) };
    });
}

/// The `atexit` handler of [`remove_checkpoints_at_exit`]. After a signal that came as the run
/// ended (before the tool returned: a stop before then keeps the checkpoint anyway) the
/// complete checkpoints are kept, named, and the exit status becomes 1; otherwise they are
/// removed. A checkpoint it
/// cannot remove is named, and the exit status becomes 1 (`_exit`: the status of `exit`
/// can't be changed otherwise; Rust's stdout was flushed before `exit` ran the handlers).
extern "C" fn remove_completed_at_exit() {
    if std::env::var_os("MFU_RS_TEST_CHECKPOINT_STOP_IN_EXIT").is_some() {
        // The test knob: a SIGTERM as the process exits (what `mpirun` sends).
        steal::signals::stop_flag().store(true, std::sync::atomic::Ordering::SeqCst);
    }
    if SIGNALLED_IN_RUN.load(std::sync::atomic::Ordering::SeqCst) {
        // A signal came as the run ended (a time limit): the run exits 1, and a launcher
        // signalled too fails the job, so the same command will run again. Kept whole, the
        // checkpoint makes that rerun find its work done.
        let kept =
            std::panic::catch_unwind(crate::engine::checkpoint::keep_completed).unwrap_or_default();
        let tool = *EXITING_TOOL.lock().unwrap_or_else(|p| p.into_inner());
        for path in &kept {
            report_error(
                tool,
                format_args!(
                    "interrupted by a signal as the run ended: its complete checkpoint {} is \
                     kept, so that the same command run again finds its work done",
                    flist::path::display(path)
                ),
            );
        }
        if !kept.is_empty() {
            // As every interrupted run: exit 1 (the rerun asked for is cheap).
            // SAFETY: _exit(2) ends the process at once, as intended.
            unsafe { libc::_exit(Status::ItemsFailed as i32) };
        }
        return;
    }
    let left =
        std::panic::catch_unwind(crate::engine::checkpoint::remove_completed).unwrap_or_default();
    if left.is_empty() {
        return;
    }
    let tool = *EXITING_TOOL.lock().unwrap_or_else(|p| p.into_inner());
    for e in &left {
        report_error(tool, e);
    }
    // SAFETY: _exit(2) ends the process at once, as intended.
    unsafe { libc::_exit(Status::ItemsFailed as i32) };
}

/// `mfu-rs man` and `mfu-rs completions`: their exit code, or `None` for a tool.
fn manuals(name: &str, sub: &ArgMatches, version: &str) -> Option<i32> {
    let mut out = Vec::new();
    let written = match name {
        "man" if sub.get_flag("list") => {
            out = list();
            Ok(())
        }
        "man" => crate::cli::manuals::man(
            command(version),
            sub.get_one::<String>("tool").map(String::as_str),
            |name| tool_for_program(name.as_bytes()),
            &mut out,
        ),
        "completions" => crate::cli::manuals::completions(
            command(version),
            *sub.get_one::<clap_complete::Shell>("shell")?,
            sub.get_one::<String>("name").map(String::as_str),
            |name| tool_for_program(name.as_bytes()),
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

    /// A command line that names its tool first is parsed by a command holding that tool
    /// only: its help (and so its arguments) must be the full command's, for every tool.
    #[test]
    fn the_named_tool_alone_parses_as_in_the_full_command() {
        for tool in TOOLS {
            let name = tool.name();
            let mut alone = command_with("v", Some(*tool));
            let mut full = command("v");
            let help = |c: &mut clap::Command| {
                c.build();
                c.find_subcommand_mut(name)
                    .expect("the tool")
                    .render_long_help()
                    .to_string()
            };
            assert_eq!(help(&mut alone), help(&mut full), "{name}");
        }
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
