//! `mfu-rs bcast` (dbcast): Copy one file to node-local storage on every node. Placeholder while issue 6 is in progress.

use crate::cli::{report_error, Common};
use crate::status::Status;
use clap::Args;
use steal::Comm;

/// Options of `mfu-rs bcast` (dbcast).
#[derive(Args, Clone, Debug)]
pub struct BcastArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Run `bcast` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, _args: &BcastArgs) -> Status {
    if comm.rank() == 0 {
        report_error("bcast", "not implemented yet");
    }
    Status::Usage.agree(comm)
}
