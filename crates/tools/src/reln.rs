//! `mfu-rs reln` (dreln): Rewrite symlink targets after a tree moved. Placeholder while issue 6 is in progress.

use crate::cli::{report_error, Common};
use crate::status::Status;
use clap::Args;
use steal::Comm;

/// Options of `mfu-rs reln` (dreln).
#[derive(Args, Clone, Debug)]
pub struct RelnArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Run `reln` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, _args: &RelnArgs) -> Status {
    if comm.rank() == 0 {
        report_error("reln", "not implemented yet");
    }
    Status::Usage.agree(comm)
}
