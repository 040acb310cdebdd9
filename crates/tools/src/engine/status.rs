//! Exit statuses that tell the truth, agreed by every rank.

use steal::{Comm, CommExt};

/// How a tool ended. The process exit code is the number; every rank exits with the same one.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Status {
    /// Everything was done.
    Ok = 0,
    /// Finished, but some items failed (each reported on stderr), or trees differ (`cmp`).
    ItemsFailed = 1,
    /// Usage or setup error: nothing was changed.
    Usage = 2,
}

impl Status {
    /// The status of work the user asked for: anything that did not happen is
    /// [`Status::ItemsFailed`], whether it failed (`failed` items), was skipped for a reason
    /// that is not the item's fault (`skipped` items: no privilege to make a device node, a
    /// hard-linked file not restriped, an entry type not archived) or was cut short by a signal
    /// (`interrupted`). Each such item is named on stderr by the tool. Counts are items, summed
    /// over ranks or not (only zero matters).
    pub fn of_work(failed: u64, skipped: u64, interrupted: bool) -> Status {
        if failed > 0 || skipped > 0 || interrupted {
            Status::ItemsFailed
        } else {
            Status::Ok
        }
    }

    /// The worst status over all ranks. Collective.
    pub fn agree(self, comm: &dyn Comm) -> Status {
        match comm.max(self as u64) {
            0 => Status::Ok,
            1 => Status::ItemsFailed,
            _ => Status::Usage,
        }
    }

    /// The worse of two statuses.
    pub fn worst(self, other: Status) -> Status {
        self.max(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_or_interrupted_work_is_not_success() {
        assert_eq!(Status::of_work(0, 0, false), Status::Ok);
        assert_eq!(Status::of_work(1, 0, false), Status::ItemsFailed);
        assert_eq!(Status::of_work(0, 3, false), Status::ItemsFailed);
        assert_eq!(Status::of_work(0, 0, true), Status::ItemsFailed);
    }
}
