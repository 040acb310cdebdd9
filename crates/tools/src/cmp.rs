//! `mfu-rs cmp` (dcmp): Compare two trees (fields and contents) and report what differs. Placeholder while issue 6 is in progress.

use crate::cli::{report_error, Common};
use crate::status::Status;
use clap::Args;
use steal::Comm;

/// Options of `mfu-rs cmp` (dcmp).
#[derive(Args, Clone, Debug)]
pub struct CmpArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Run `cmp` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, _args: &CmpArgs) -> Status {
    if comm.rank() == 0 {
        report_error("cmp", "not implemented yet");
    }
    Status::Usage.agree(comm)
}
