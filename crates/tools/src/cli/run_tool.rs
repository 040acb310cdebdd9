//! The run of one tool from its parsed command line: checks before any work, the context,
//! the launch, the report rendered on rank 0 (text or `--json`), the exit status the ranks agree
//! on; and the object-safe [`Row`] through which the dispatcher's table holds each tool.

use crate::cli::console::{is_stdout, report_error, Console};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, ToolReport};
use crate::engine::select::Rules;
use crate::engine::status::Status;
use clap::{ArgMatches, FromArgMatches};
use flist::noatime::NoAtime;
use std::sync::Arc;

/// A row of the dispatcher's table: a [`CliTool`] behind an object-safe face.
pub trait Row: Sync {
    /// Canonical name.
    fn name(&self) -> &'static str;
    /// mpiFileUtils names.
    fn old_names(&self) -> &'static [&'static str];
    /// The clap subcommand (its arguments built only when it is the one asked for).
    fn command(&self) -> clap::Command;
    /// Parse `matches` (this subcommand's), run on the ranks `launch` starts, render, and
    /// return the exit code.
    fn main(&self, matches: &ArgMatches, launch: &Launcher<'_>) -> i32;
}

/// The row of tool `T`.
pub const fn row<T: CliTool>() -> &'static dyn Row {
    &Entry::<T>(std::marker::PhantomData)
}

struct Entry<T>(std::marker::PhantomData<fn() -> T>);

impl<T: CliTool> Row for Entry<T> {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn old_names(&self) -> &'static [&'static str] {
        T::OLD_NAMES
    }
    fn command(&self) -> clap::Command {
        use clap::Args;
        let cmd = clap::Command::new(T::NAME)
            .visible_aliases(T::OLD_NAMES.iter().copied())
            .about(T::ABOUT);
        // Building the arguments of all fourteen tools was most of the start-up's work: only
        // the tool asked for builds them. The tool's `about` wins over the options' own.
        cmd.defer(|cmd| {
            let long_about = cmd.get_long_about().cloned();
            let cmd = T::Args::augment_args(cmd).about(T::ABOUT);
            match long_about {
                Some(a) => cmd.long_about(a),
                None => cmd.long_about(None::<&str>),
            }
        })
    }
    fn main(&self, matches: &ArgMatches, launch: &Launcher<'_>) -> i32 {
        main_of::<T>(matches, launch)
    }
}

/// Starts a command's ranks (the `--ranks` of the command line already applied) and returns
/// this process's ranks' statuses.
pub type Launcher<'a> = dyn Fn(&(dyn Fn(&dyn steal::Comm) -> Status + Sync)) -> Result<Vec<Status>, steal::LaunchError>
    + 'a;

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

/// Rank 0 starts the live status, if asked for, before any work, and the ranks agree:
/// `Some(Status::Usage)` when it could not (an address that cannot be bound). Collective when
/// a status was asked for.
fn start_live_status(
    comm: &dyn steal::Comm,
    tool: &str,
    status: &Option<crate::engine::context::LiveStatus>,
    listen: Option<&str>,
) -> Option<Status> {
    let status = status.as_ref()?;
    let problem = if comm.rank() == 0 {
        crate::cli::status::start(status, comm.size(), listen).err()
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
pub fn launched_as_other_rank() -> bool {
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

/// Print a clap error (or help, or version) and return its exit code: 0 for help and version,
/// 2 for a usage error.
pub fn clap_error(e: clap::Error) -> i32 {
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
        } else if common.status_file.as_ref().is_some_and(|f| f.is_empty()) {
            Err("an empty --status-file names no file".into())
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
    // Made here, started by rank 0 before any work (and only there: it serves).
    let live_status = crate::cli::status::requested(tool, common);
    context.status = live_status.clone();
    let status_listen = common.status_listen.clone();
    context.noatime = Arc::new(NoAtime::new(T::noatime(&args)));
    let noatime = Arc::clone(&context.noatime);
    let json = common.json;
    let options = T::options(&args, rules, context);
    let mut files: Vec<(&str, &[u8])> =
        outputs.into_iter().filter(|(_, f)| !is_stdout(f)).collect();
    if let Some(f) = &common.status_file {
        use std::os::unix::ffi::OsStrExt;
        files.push(("--status-file", f.as_bytes()));
    }
    let started = std::time::Instant::now();
    // Every tool starts with the same checks, on every rank.
    let result = launch(&|comm| {
        if let Some(status) = refuse_unwritable_outputs(comm, tool, &files) {
            return status;
        }
        if let Some(status) = start_live_status(comm, tool, &live_status, status_listen.as_deref())
        {
            return status;
        }
        let result = T::run(comm, &options);
        // Every rank takes its process's count once its own reads are over (see
        // `NoAtime::take_refused`): the sum counts each file once.
        let refused = noatime
            .asked()
            .then(|| steal::CommExt::sum(comm, noatime.take_refused()));
        let (status, summary, stopped) = match result {
            Ok(report) => {
                if comm.rank() == 0 {
                    if json {
                        print_json(tool, &report, started.elapsed().as_secs_f64(), refused);
                    } else if !console.quiet {
                        T::render(&report, &console);
                    }
                    // Said even with -q and --json: the reads did not all leave atimes alone.
                    if let Some(n) = refused.filter(|&n| n > 0) {
                        report_error(tool, NoAtime::warning(n));
                    }
                    // Said even with -q and --json: the run did not do all it was asked.
                    if let Some(stopped) = report.stopped() {
                        report_error(tool, stopped);
                    }
                }
                (
                    report.status(),
                    Some(report.summary()),
                    report.stopped().is_some(),
                )
            }
            Err(e) => {
                if comm.rank() == 0 {
                    report_error(tool, e);
                }
                (Status::Usage, None, false)
            }
        };
        let status = match (&live_status, comm.rank()) {
            (Some(s), 0) => {
                let stopped = stopped
                    || steal::signals::stop_flag().load(std::sync::atomic::Ordering::SeqCst);
                match crate::cli::status::finish(&s.live, summary, status, stopped) {
                    Ok(()) => status,
                    Err(e) => {
                        report_error(tool, e);
                        status.max(Status::ItemsFailed)
                    }
                }
            }
            _ => status,
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
/// With `--noatime`, `noatime_refused`: the files read without `O_NOATIME`, summed over ranks.
fn print_json<R: ToolReport>(tool: &str, report: &R, seconds: f64, refused: Option<u64>) {
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
    if let Some(n) = refused {
        object.insert("noatime_refused".into(), n.into());
    }
    if let Some(stopped) = report.stopped() {
        object.insert("resumable".into(), true.into());
        if let Ok(v) = serde_json::to_value(stopped) {
            object.insert("stopped".into(), v);
        }
    }
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
