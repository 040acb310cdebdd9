//! The multi-call command line: `mfu-rs TOOL ...`, `mfu-rs dwalk ...`, or a symlink named
//! after a tool (`dwalk`, `mfu-dwalk`, `walk`).

use crate::cli::report_error;
use crate::status::Status;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::{OsStr, OsString};
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
    /// tests); N is 1 to 256. Also read from MFU_RANKS.
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "MFU_RANKS",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
            .range(1..=steal::local::MAX_RANKS as u64)
    )]
    ranks: Option<usize>,
    #[command(subcommand)]
    tool: Tool,
}

/// A tool's options whose clap arguments are built only when that tool is the one asked for
/// ([`clap::Command::defer`]): building the arguments of all fourteen tools was most of the
/// start-up's work. Help and usage are unchanged: the tool's `about` (its line in `mfu-rs
/// --help`) still wins over the options struct's own.
#[derive(Debug)]
struct Deferred<T>(T);

impl<T> std::ops::Deref for Deferred<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: FromArgMatches> FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }
    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }
    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
    fn update_from_arg_matches_mut(
        &mut self,
        matches: &mut clap::ArgMatches,
    ) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

impl<T: clap::Args> clap::Args for Deferred<T> {
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| keep_about(cmd, T::augment_args))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(|cmd| keep_about(cmd, T::augment_args_for_update))
    }
}

/// `augment(cmd)`, keeping the `about` and `long_about` that `cmd` already had (the tool's, set
/// after the options' when not deferred).
fn keep_about(cmd: clap::Command, augment: fn(clap::Command) -> clap::Command) -> clap::Command {
    let (about, long_about) = (cmd.get_about().cloned(), cmd.get_long_about().cloned());
    let cmd = augment(cmd);
    let cmd = match about {
        Some(a) => cmd.about(a),
        None => cmd.about(None::<&str>),
    };
    match long_about {
        Some(a) => cmd.long_about(a),
        None => cmd.long_about(None::<&str>),
    }
}

#[derive(Subcommand, Debug)]
enum Tool {
    /// Walk trees (or read a list) and summarise, sort, print or save the list (dwalk).
    #[command(visible_alias = "dwalk")]
    Walk(Deferred<crate::walk::WalkArgs>),
    /// Copy files and trees in parallel (dcp).
    #[command(visible_alias = "dcp")]
    Cp(Deferred<crate::cp::CpArgs>),
    /// Make DEST equal to SRC, copying only what differs (dsync).
    #[command(visible_alias = "dsync")]
    Sync(Deferred<crate::sync::SyncArgs>),
    /// Remove files and trees in parallel (drm).
    #[command(visible_alias = "drm")]
    Rm(Deferred<crate::rm::RmArgs>),
    /// Create, extract or list tar archives in parallel, dtar-compatible (dtar).
    #[command(visible_alias = "dtar")]
    Tar(Deferred<crate::tar::TarArgs>),
    /// Restripe files on Lustre in parallel, or report their layouts (dstripe).
    #[command(visible_alias = "dstripe")]
    Stripe(Deferred<crate::stripe::StripeToolArgs>),
    /// Find files by name, time, size, owner or type; print them, save a list or run a command (dfind).
    #[command(visible_alias = "dfind")]
    Find(Deferred<crate::find::FindArgs>),
    /// Compare two trees, fields and contents, and report what differs (dcmp).
    #[command(visible_alias = "dcmp")]
    Cmp(Deferred<crate::cmp::CmpArgs>),
    /// Change owner, group and mode of trees in parallel (dchmod).
    #[command(visible_alias = "dchmod")]
    Chmod(Deferred<crate::chmod::ChmodArgs>),
    /// Find files with identical contents (ddup).
    #[command(visible_alias = "ddup")]
    Dup(Deferred<crate::dup::DupArgs>),
    /// Generate a reproducible random tree of files in parallel (dfilemaker).
    #[command(visible_alias = "dfilemaker")]
    Filemaker(Deferred<crate::filemaker::FilemakerArgs>),
    /// Rewrite symlink targets that start with an old prefix (dreln).
    #[command(visible_alias = "dreln")]
    Reln(Deferred<crate::reln::RelnArgs>),
    /// Copy one file to node-local storage on every node (dbcast).
    #[command(visible_alias = "dbcast")]
    Bcast(Deferred<crate::bcast::BcastArgs>),
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

impl Tool {
    /// The operands and options that name files or directories, with the name users see
    /// (`PATH`, `-o`...). Filters (`--match`, `--name`) and expressions are not names.
    fn named_files(&self) -> Vec<(&'static str, &OsStr)> {
        fn some<'a>(what: &'static str, o: &'a Option<OsString>) -> Vec<(&'static str, &'a OsStr)> {
            o.iter().map(|f| (what, f.as_os_str())).collect()
        }
        fn all<'a>(what: &'static str, v: &'a [OsString]) -> Vec<(&'static str, &'a OsStr)> {
            v.iter().map(|f| (what, f.as_os_str())).collect()
        }
        match self {
            Tool::Walk(a) => [
                all("PATH", &a.paths),
                some("-i", &a.input),
                some("-o", &a.output),
            ]
            .concat(),
            Tool::Cp(a) => [all("SRC/DEST", &a.paths), some("-i", &a.input)].concat(),
            Tool::Sync(a) => vec![("SRC", a.src.as_os_str()), ("DEST", a.dest.as_os_str())]
                .into_iter()
                .chain(some("--link-dest", &a.link_dest))
                .collect(),
            Tool::Rm(a) => [
                all("PATH", &a.paths),
                some("-i", &a.input),
                some("-o", &a.output),
            ]
            .concat(),
            Tool::Tar(a) => [
                vec![("-f", a.file.as_os_str())],
                some("-C", &a.chdir),
                all("PATH", &a.paths),
            ]
            .concat(),
            Tool::Stripe(a) => all("PATH", &a.paths),
            Tool::Find(a) => [
                all("PATH", &a.options.paths),
                some("-i", &a.options.input),
                some("-o", &a.options.output),
            ]
            .concat(),
            Tool::Cmp(a) => vec![("SRC", a.src.as_os_str()), ("DEST", a.dest.as_os_str())],
            Tool::Chmod(a) => [all("PATH", &a.paths), some("-i", &a.input)].concat(),
            Tool::Dup(a) => [
                all("PATH", &a.paths),
                some("-i", &a.input),
                some("-o", &a.output),
            ]
            .concat(),
            Tool::Filemaker(a) => vec![("DIR", a.dir.as_os_str())],
            Tool::Reln(a) => [
                vec![
                    ("OLDPATH", a.oldpath.as_os_str()),
                    ("NEWPATH", a.newpath.as_os_str()),
                ],
                all("PATH", &a.paths),
                some("-i", &a.input),
            ]
            .concat(),
            Tool::Bcast(a) => vec![("SRC", a.src.as_os_str()), ("DEST", a.dest.as_os_str())],
            Tool::Bz2(a) => vec![("FILE", a.file.as_os_str())],
        }
    }

    /// Files this run creates to hold its results (lists, reports, an archive), with the option
    /// that names them; `-` (stdout) is not a file.
    fn output_files(&self) -> Vec<(&'static str, &[u8])> {
        let files: Vec<(&'static str, &[u8])> = match self {
            Tool::Walk(Deferred(crate::walk::WalkArgs { output, .. }))
            | Tool::Rm(Deferred(crate::rm::RmArgs { output, .. }))
            | Tool::Dup(Deferred(crate::dup::DupArgs { output, .. })) => {
                output.iter().map(|o| ("-o", o.as_bytes())).collect()
            }
            Tool::Find(a) => a
                .options
                .output
                .iter()
                .map(|o| ("-o", o.as_bytes()))
                .collect(),
            Tool::Cmp(a) => a.output.iter().map(|o| ("-o", &o.file[..])).collect(),
            Tool::Sync(a) => a.output.iter().map(|o| ("-o", &o.file[..])).collect(),
            Tool::Tar(a) if a.create => vec![("-f", a.file.as_bytes())],
            _ => Vec::new(),
        };
        files
            .into_iter()
            .filter(|(_, f)| !crate::cli::is_stdout(f))
            .collect()
    }
}

/// Refuse what no tool can do, before any work and alike on every rank (the command line is
/// the same everywhere): an empty name (`''` names no file; it is not `.`), and `rm` of `.` or
/// `..` (GNU rm refuses it; here nothing at all is removed, exit 2, as for every usage error).
fn check_command_line(tool: &Tool) -> Result<(), String> {
    if let Some((what, _)) = tool.named_files().into_iter().find(|(_, f)| f.is_empty()) {
        return Err(format!("an empty {what} names no file"));
    }
    if let Tool::Rm(a) = tool {
        for p in &a.paths {
            let p = p.as_bytes();
            let trimmed = match p.iter().rposition(|&b| b != b'/') {
                Some(end) => &p[..=end],
                None => continue, // `/`: rm refuses it itself
            };
            if matches!(flist::path::basename(trimmed), b"." | b"..") {
                return Err(format!(
                    "refusing to remove '.' or '..' directory: '{}' (nothing removed)",
                    flist::path::display(p)
                ));
            }
        }
    }
    Ok(())
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

/// How a command's ranks are started: [`steal::launch::run`] (MPI under a launcher, when built
/// with it) or [`steal::launch::run_local`] (never MPI).
pub type Launch = fn(
    Option<usize>,
    &(dyn Fn(&dyn steal::Comm) -> Status + Sync),
) -> Result<Vec<Status>, steal::LaunchError>;

/// The binary that links MPI, installed next to `mfu-rs` (`cargo install` installs both).
pub const MPI_BINARY: &str = "mfu-rs-mpi";

/// Run the command line `args` (`args[0]` is the program name) and return the exit code:
/// under a launcher with MPI (when built with it), otherwise as thread ranks of this process.
pub fn main_with_args(args: Vec<OsString>) -> i32 {
    main_with(args, |ranks, f| steal::launch::run(ranks, f))
}

/// [`main_with_args`] without MPI: what `mfu-rs` runs when no launcher started it. A binary
/// that calls only this does not link (so does not load) the MPI library.
pub fn main_without_mpi(args: Vec<OsString>) -> i32 {
    main_with(args, |ranks, f| steal::launch::run_local(ranks, f))
}

/// Hand this process to [`MPI_BINARY`], found next to the running executable, with the same
/// arguments (`argv[0]` too: `dwalk` still means walk) and environment: what `mfu-rs` does when
/// a launcher started it, so that only runs under a launcher load the MPI library. Returns
/// only when that fails, with the exit code (2, named on stderr).
pub fn exec_mpi_binary() -> i32 {
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
    if !launched_as_other_rank() {
        let tool = tool_for_program(arg0.as_bytes()).unwrap_or("");
        report_error(tool, why);
    }
    Status::Usage as i32
}

fn main_with(mut args: Vec<OsString>, launch: Launch) -> i32 {
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
    if let Err(problem) = check_command_line(&cli.tool) {
        if !launched_as_other_rank() {
            report_error(&tool_name, problem);
        }
        return Status::Usage as i32;
    }
    let outputs = cli.tool.output_files();
    // Every tool starts with the same checks, on every rank.
    let launch = |run: &(dyn Fn(&dyn steal::Comm) -> Status + Sync)| {
        launch(cli.ranks, &|comm| {
            refuse_unwritable_outputs(comm, &tool_name, &outputs).unwrap_or_else(|| run(comm))
        })
    };
    let result = match &cli.tool {
        Tool::Walk(a) => launch(&|comm| crate::walk::run(comm, a)),
        Tool::Cp(a) => launch(&|comm| crate::cp::run(comm, a, &rules)),
        Tool::Sync(a) => launch(&|comm| crate::sync::run(comm, a, &rules)),
        Tool::Rm(a) => launch(&|comm| crate::rm::run(comm, a)),
        Tool::Tar(a) => launch(&|comm| crate::tar::run(comm, a, &rules)),
        Tool::Stripe(a) => launch(&|comm| crate::stripe::run(comm, a)),
        Tool::Find(a) => launch(&|comm| crate::find::run(comm, a)),
        Tool::Cmp(a) => launch(&|comm| crate::cmp::run(comm, a)),
        Tool::Chmod(a) => launch(&|comm| crate::chmod::run(comm, a)),
        Tool::Dup(a) => launch(&|comm| crate::dup::run(comm, a)),
        Tool::Filemaker(a) => launch(&|comm| crate::filemaker::run(comm, a)),
        Tool::Reln(a) => launch(&|comm| crate::reln::run(comm, a)),
        Tool::Bcast(a) => launch(&|comm| crate::bcast::run(comm, a)),
        Tool::Bz2(a) => launch(&|comm| crate::bz2::run(comm, a)),
    };
    match result {
        // Lost output is a failure of this process (stdout is written by rank 0), even when
        // the tool's own work succeeded.
        Ok(statuses) => {
            crate::runtime_stats::print(&tool_name);
            let status = statuses.into_iter().max().unwrap_or(Status::Ok);
            let lost_output = if crate::cli::stdout_failed() {
                Status::ItemsFailed
            } else {
                Status::Ok
            };
            status.max(lost_output).max(late_signal(&tool_name, status)) as i32
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
