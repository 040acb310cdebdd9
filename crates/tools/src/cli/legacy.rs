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

legacy!(Chmod, "chmod", "dchmod",
    "Change owner, group and mode of trees in parallel (dchmod)",
    crate::chmod::ChmodArgs,
    |a| common: a.common,
    named: [all("PATH", &a.paths), some("-i", &a.input)].concat(),
    outputs: Vec::new(),
    run: |comm, rules| crate::chmod::run(comm, a));
legacy!(Filemaker, "filemaker", "dfilemaker",
    "Generate a reproducible random tree of files in parallel (dfilemaker)",
    crate::filemaker::FilemakerArgs,
    |a| common: a.common,
    named: vec![("DIR", a.dir.as_os_str())],
    outputs: Vec::new(),
    run: |comm, rules| crate::filemaker::run(comm, a));
legacy!(Reln, "reln", "dreln", "Rewrite symlink targets that start with an old prefix (dreln)",
    crate::reln::RelnArgs,
    |a| common: a.common,
    named: [vec![("OLDPATH", a.oldpath.as_os_str()), ("NEWPATH", a.newpath.as_os_str())],
        all("PATH", &a.paths), some("-i", &a.input)].concat(),
    outputs: Vec::new(),
    run: |comm, rules| crate::reln::run(comm, a));
legacy!(Bcast, "bcast", "dbcast", "Copy one file to node-local storage on every node (dbcast)",
    crate::bcast::BcastArgs,
    |a| common: a.common,
    named: vec![("SRC", a.src.as_os_str()), ("DEST", a.dest.as_os_str())],
    outputs: Vec::new(),
    run: |comm, rules| crate::bcast::run(comm, a));
legacy!(Bz2, "bz2", "dbz2",
    "Compress or decompress files with parallel bzip2, compatible with bzip2 (dbz2)",
    crate::bz2::Bz2Args,
    |a| common: a.common,
    named: vec![("FILE", a.file.as_os_str())],
    outputs: Vec::new(),
    run: |comm, rules| crate::bz2::run(comm, a));
