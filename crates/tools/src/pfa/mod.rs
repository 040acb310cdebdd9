//! `mfu-rs pfa`: aggregates of the `mfu-pfa` library (many logical files in one shared file)
//! as a tool: list their streams ([`ls`]), print one ([`cat`]), unpack them into a tree in
//! parallel ([`unpack`]), pack a tree of small files into one ([`pack`]), drop the incomplete
//! last version of one cut mid-write ([`recover`]).
//!
//! `pack` and `unpack` agree on what a stream is ([`meta`]): one per regular file (its data),
//! directory (no data) and symbolic link (its target as data), named by its path relative to
//! the packed directory, with its kind, mode, owner and mtime in the stream's meta bytes.
//!
//! Exit statuses as in every tool: 0 done, 1 anything asked for that did not happen (an
//! aggregate refused as cut or damaged, a stream not written, a file not packed), each named
//! on stderr; 2 a usage error, nothing done.

pub mod cat;
pub mod ls;
pub mod meta;
pub mod pack;
pub mod recover;
pub mod unpack;

use crate::engine::context::{Context, Error, Summary, ToolReport};
use crate::engine::status::Status;
use steal::Comm;

/// What `pfa` does: one of its actions, and the run's context.
#[derive(Debug, Clone)]
pub struct Options {
    /// The action and its own options.
    pub action: Action,
    /// Events, progress, verbosity and the stop flag.
    pub context: Context,
}

/// The actions of `pfa`.
#[derive(Debug, Clone)]
pub enum Action {
    /// List the streams of each version.
    Ls(ls::Options),
    /// Write one stream's bytes to the output.
    Cat(cat::Options),
    /// Unpack every stream of a version into a tree.
    Unpack(unpack::Options),
    /// Pack trees into an aggregate.
    Pack(pack::Options),
    /// Drop the incomplete last version of an aggregate cut mid-write.
    Recover(recover::Options),
}

/// What a `pfa` run did: the report of its action (the same on every rank).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum Report {
    /// `pfa ls`.
    Ls(ls::Report),
    /// `pfa cat`.
    Cat(cat::Report),
    /// `pfa unpack`.
    Unpack(unpack::Report),
    /// `pfa pack`.
    Pack(pack::Report),
    /// `pfa recover`.
    Recover(recover::Report),
}

impl ToolReport for Report {
    fn summary(&self) -> Summary {
        match self {
            Report::Ls(r) => r.summary(),
            Report::Cat(r) => r.summary(),
            Report::Unpack(r) => r.summary(),
            Report::Pack(r) => r.summary(),
            Report::Recover(r) => r.summary(),
        }
    }
    fn status(&self) -> Status {
        Status::of_work(self.summary().failed, 0, self.interrupted())
    }
}

impl Report {
    fn interrupted(&self) -> bool {
        match self {
            Report::Unpack(r) => r.interrupted,
            Report::Pack(r) => r.interrupted,
            _ => false,
        }
    }
}

/// Run `pfa` on this rank. Collective; every rank returns the same report (or error).
pub fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
    let context = &options.context;
    match &options.action {
        Action::Ls(o) => ls::run(comm, o, context).map(Report::Ls),
        Action::Cat(o) => cat::run(comm, o, context).map(Report::Cat),
        Action::Unpack(o) => unpack::run(comm, o, context).map(Report::Unpack),
        Action::Pack(o) => pack::run(comm, o, context).map(Report::Pack),
        Action::Recover(o) => recover::run(comm, o, context).map(Report::Recover),
    }
}

/// The version to read of `index`: `asked`, or the last one. `Err` names the aggregate and
/// the versions it has.
fn version_of(index: &::pfa::Index, agg: &[u8], asked: Option<u64>) -> Result<u64, String> {
    let versions: Vec<u64> = index.versions().iter().map(|v| v.version).collect();
    match asked {
        None => versions
            .last()
            .copied()
            .ok_or_else(|| format!("{}: the aggregate holds no version", display(agg))),
        Some(v) if versions.contains(&v) => Ok(v),
        Some(v) => Err(format!(
            "{}: no version {v} (it holds {})",
            display(agg),
            versions
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The aggregate `agg` opened and checked (any rank, any rank count); the error names it.
fn open_index(agg: &[u8]) -> Result<::pfa::Index, String> {
    ::pfa::Index::open(flist::path::as_path(agg)).map_err(|e| e.to_string())
}

/// `path` for messages.
fn display(path: &[u8]) -> std::borrow::Cow<'_, str> {
    flist::path::display(path)
}
