//! `mfu-rs find` (dfind): Find files by name, time, size, owner or type, and print, list or run a command on them. Placeholder while issue 6 is in progress.

use crate::cli::{report_error, Common};
use crate::status::Status;
use clap::Args;
use steal::Comm;

/// Options of `mfu-rs find` (dfind).
#[derive(Args, Clone, Debug)]
pub struct FindArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Run `find` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, _args: &FindArgs) -> Status {
    if comm.rank() == 0 {
        report_error("find", "not implemented yet");
    }
    Status::Usage.agree(comm)
}
