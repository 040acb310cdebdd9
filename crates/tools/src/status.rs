//! Exit statuses that tell the truth, agreed by every rank.

use steal::{Comm, CommExt};

/// How a tool ended. The process exit code is the number; every rank exits with the same one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Everything was done.
    Ok = 0,
    /// Finished, but some items failed (each reported on stderr), or trees differ (`cmp`).
    ItemsFailed = 1,
    /// Usage or setup error: nothing was changed.
    Usage = 2,
}

impl Status {
    /// The worst status over all ranks. Collective.
    pub fn agree(self, comm: &dyn Comm) -> Status {
        match comm.max(self as u64) {
            0 => Status::Ok,
            1 => Status::ItemsFailed,
            _ => Status::Usage,
        }
    }

    /// A usage or setup error: rank 0 reports `message` as `mfu-rs TOOL: ...`, and every rank
    /// returns [`Status::Usage`]. Collective (every rank calls it, as after a failed check
    /// that all ranks made alike).
    pub fn usage(comm: &dyn Comm, tool: &str, message: impl std::fmt::Display) -> Status {
        if comm.rank() == 0 {
            crate::cli::report_error(tool, message);
        }
        Status::Usage.agree(comm)
    }

    /// The worse of two statuses.
    pub fn worst(self, other: Status) -> Status {
        self.max(other)
    }
}
