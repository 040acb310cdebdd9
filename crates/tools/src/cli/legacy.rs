//! Tools not yet moved to typed options and reports: their clap options are the options and
//! their exit status is the report. Each row goes once its tool has its own `CliTool`.

use crate::cli::args::Common;
use crate::cli::console::Console;
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::select::Rules;
use crate::engine::status::Status;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use steal::Comm;

/// The exit status a not-yet-typed tool returned.
#[derive(Debug, serde::Serialize)]
pub struct LegacyReport {
    #[serde(skip)]
    status: Status,
}

impl ToolReport for LegacyReport {
    fn summary(&self) -> Summary {
        Summary::default()
    }
    fn status(&self) -> Status {
        self.status
    }
}

fn some<'a>(what: &'static str, o: &'a Option<OsString>) -> Vec<(&'static str, &'a OsStr)> {
    o.iter().map(|f| (what, f.as_os_str())).collect()
}
fn all<'a>(what: &'static str, v: &'a [OsString]) -> Vec<(&'static str, &'a OsStr)> {
    v.iter().map(|f| (what, f.as_os_str())).collect()
}

macro_rules! legacy {
    ($ty:ident, $name:literal, $old:literal, $about:literal, $args:ty,
     |$a:ident| common: $common:expr, named: $named:expr, outputs: $outputs:expr,
     $(check: $check:expr,)?
     run: |$comm:ident, $rules:ident| $run:expr) => {
        #[doc = concat!("`mfu-rs ", $name, "` as it was before typed options.")]
        pub struct $ty;
        impl CliTool for $ty {
            const NAME: &'static str = $name;
            const OLD_NAMES: &'static [&'static str] = &[$old];
            const ABOUT: &'static str = $about;
            type Args = $args;
            type Options = ($args, Rules);
            type Report = LegacyReport;
            fn common($a: &$args) -> &Common {
                &$common
            }
            #[allow(unused_imports)]
            fn named_files($a: &$args) -> Vec<(&'static str, &OsStr)> {
                $named
            }
            #[allow(unused_variables)]
            fn output_files($a: &$args) -> Vec<(&'static str, &[u8])> {
                $outputs
            }
            $(fn check($a: &$args) -> Result<(), String> {
                $check
            })?
            fn options(args: &$args, rules: Rules, _context: Context) -> ($args, Rules) {
                (args.clone(), rules)
            }
            fn run(comm: &dyn Comm, o: &($args, Rules)) -> Result<LegacyReport, Error> {
                let ($a, $rules) = (&o.0, &o.1);
                let $comm = comm;
                let _ = $rules;
                Ok(LegacyReport { status: $run })
            }
            fn render(_: &LegacyReport, _: &Console) {}
        }
    };
}

legacy!(Walk, "walk", "dwalk",
    "Walk trees (or read a list) and summarise, sort, print or save the list (dwalk)",
    crate::walk::WalkArgs,
    |a| common: a.common,
    named: [all("PATH", &a.paths), some("-i", &a.input), some("-o", &a.output)].concat(),
    outputs: a.output.iter().map(|o| ("-o", o.as_bytes())).collect(),
    run: |comm, rules| crate::walk::run(comm, a));
legacy!(Cp, "cp", "dcp", "Copy files and trees in parallel (dcp)", crate::cp::CpArgs,
    |a| common: a.common,
    named: [all("SRC/DEST", &a.paths), some("-i", &a.input)].concat(),
    outputs: Vec::new(),
    run: |comm, rules| crate::cp::run(comm, a, rules));
legacy!(Sync, "sync", "dsync", "Make DEST equal to SRC, copying only what differs (dsync)",
    crate::sync::SyncArgs,
    |a| common: a.common,
    named: vec![("SRC", a.src.as_os_str()), ("DEST", a.dest.as_os_str())]
        .into_iter()
        .chain(some("--link-dest", &a.link_dest))
        .collect(),
    outputs: a.output.iter().map(|o| ("-o", &o.file[..])).collect(),
    run: |comm, rules| crate::sync::run(comm, a, rules));
legacy!(Rm, "rm", "drm", "Remove files and trees in parallel (drm)", crate::rm::RmArgs,
    |a| common: a.common,
    named: [all("PATH", &a.paths), some("-i", &a.input), some("-o", &a.output)].concat(),
    outputs: a.output.iter().map(|o| ("-o", o.as_bytes())).collect(),
    check: refuse_dot(&a.paths),
    run: |comm, rules| crate::rm::run(comm, a));
legacy!(Tar, "tar", "dtar",
    "Create, extract or list tar archives in parallel, dtar-compatible (dtar)",
    crate::tar::TarArgs,
    |a| common: a.common,
    named: [vec![("-f", a.file.as_os_str())], some("-C", &a.chdir), all("PATH", &a.paths)].concat(),
    outputs: if a.create { vec![("-f", a.file.as_bytes())] } else { Vec::new() },
    run: |comm, rules| crate::tar::run(comm, a, rules));
legacy!(Stripe, "stripe", "dstripe",
    "Restripe files on Lustre in parallel, or report their layouts (dstripe)",
    crate::stripe::StripeToolArgs,
    |a| common: a.common,
    named: all("PATH", &a.paths),
    outputs: Vec::new(),
    run: |comm, rules| crate::stripe::run(comm, a));
legacy!(Find, "find", "dfind",
    "Find files by name, time, size, owner or type; print them, save a list or run a command (dfind)",
    crate::find::FindArgs,
    |a| common: a.options.common,
    named: [all("PATH", &a.options.paths), some("-i", &a.options.input), some("-o", &a.options.output)].concat(),
    outputs: a.options.output.iter().map(|o| ("-o", o.as_bytes())).collect(),
    run: |comm, rules| crate::find::run(comm, a));
legacy!(Cmp, "cmp", "dcmp",
    "Compare two trees, fields and contents, and report what differs (dcmp)",
    crate::cmp::CmpArgs,
    |a| common: a.common,
    named: vec![("SRC", a.src.as_os_str()), ("DEST", a.dest.as_os_str())],
    outputs: a.output.iter().map(|o| ("-o", &o.file[..])).collect(),
    run: |comm, rules| crate::cmp::run(comm, a));
legacy!(Dup, "dup", "ddup", "Find files with identical contents (ddup)", crate::dup::DupArgs,
    |a| common: a.common,
    named: [all("PATH", &a.paths), some("-i", &a.input), some("-o", &a.output)].concat(),
    outputs: a.output.iter().map(|o| ("-o", o.as_bytes())).collect(),
    run: |comm, rules| crate::dup::run(comm, a));
/// `rm` of `.` or `..` is refused (GNU rm refuses it; here nothing at all is removed, exit 2, as
/// for every usage error).
fn refuse_dot(paths: &[OsString]) -> Result<(), String> {
    for p in paths {
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
    Ok(())
}
