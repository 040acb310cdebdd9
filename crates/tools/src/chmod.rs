//! `mfu-rs chmod` (dchmod): Change owner, group and mode of trees in parallel. Placeholder while issue 6 is in progress.

use crate::cli::{report_error, Common};
use crate::status::Status;
use clap::Args;
use steal::Comm;

/// Options of `mfu-rs chmod` (dchmod).
#[derive(Args, Clone, Debug)]
pub struct ChmodArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Run `chmod` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, _args: &ChmodArgs) -> Status {
    if comm.rank() == 0 {
        report_error("chmod", "not implemented yet");
    }
    Status::Usage.agree(comm)
}
