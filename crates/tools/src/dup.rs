//! `mfu-rs dup` (ddup): Find files with identical contents. Placeholder while issue 6 is in progress.

use crate::cli::{report_error, Common};
use crate::status::Status;
use clap::Args;
use steal::Comm;

/// Options of `mfu-rs dup` (ddup).
#[derive(Args, Clone, Debug)]
pub struct DupArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Run `dup` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, _args: &DupArgs) -> Status {
    if comm.rank() == 0 {
        report_error("dup", "not implemented yet");
    }
    Status::Usage.agree(comm)
}
