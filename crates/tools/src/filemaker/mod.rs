//! `mfu-rs filemaker` (dfilemaker): Generate a reproducible random tree of files. Placeholder while issue 6 is in progress.

use crate::cli::{report_error, Common};
use crate::status::Status;
use clap::Args;
use steal::Comm;

/// Options of `mfu-rs filemaker` (dfilemaker).
#[derive(Args, Clone, Debug)]
pub struct FilemakerArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Run `filemaker` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, _args: &FilemakerArgs) -> Status {
    if comm.rank() == 0 {
        report_error("filemaker", "not implemented yet");
    }
    Status::Usage.agree(comm)
}
