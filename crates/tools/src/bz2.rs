//! `mfu-rs bz2` (dbz2): Compress or decompress a file with parallel bzip2. Placeholder while issue 6 is in progress.

use crate::cli::{report_error, Common};
use crate::status::Status;
use clap::Args;
use steal::Comm;

/// Options of `mfu-rs bz2` (dbz2).
#[derive(Args, Clone, Debug)]
pub struct Bz2Args {
    #[command(flatten)]
    pub common: Common,
}

/// Run `bz2` on this rank. Collective; returns the status every rank agreed on.
pub fn run(comm: &dyn Comm, _args: &Bz2Args) -> Status {
    if comm.rank() == 0 {
        report_error("bz2", "not implemented yet");
    }
    Status::Usage.agree(comm)
}
