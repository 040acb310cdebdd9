//! `mfu-rs sync`.

use crate::select::Rules;
use crate::status::Status;
use clap::Args;
use std::ffi::OsString;
use steal::Comm;

/// Options of `mfu-rs sync`.
#[derive(Args, Clone, Debug)]
pub struct SyncArgs {
    /// Paths.
    #[arg(value_name = "PATH")]
    pub paths: Vec<OsString>,
    #[command(flatten)]
    pub common: crate::cli::Common,
}

/// Run on this rank. Collective.
pub fn run(comm: &dyn Comm, _args: &SyncArgs, _rules: &Rules) -> Status {
    Status::Usage.agree(comm)
}
