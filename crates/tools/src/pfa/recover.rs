//! `pfa recover AGG`: drop the incomplete last version of an aggregate cut mid-write (a run
//! killed before its close), so that every complete version reads again. Explicit only: a
//! reader never does it on its own, and a damaged (not cut) end is refused, unchanged.

use crate::engine::context::{Context, Error, Summary};
use steal::{Comm, ReduceOp};

/// What `pfa recover` works on.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The aggregate.
    pub agg: Vec<u8>,
}

/// What `pfa recover` did (the same on every rank).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The last complete version, now the file's last (0 when recovery failed).
    pub version: u64,
    /// The file's length before, in bytes.
    pub len_before: u64,
    /// Bytes dropped from its end (0: it ended with a complete version already).
    pub dropped: u64,
    /// Recovery failed (named on stderr); the file is unchanged.
    pub failed: bool,
}

impl Report {
    /// Items: 1 when bytes were dropped; failed: 1 when recovery failed.
    pub fn summary(&self) -> Summary {
        Summary {
            items: u64::from(self.dropped > 0),
            bytes: self.dropped,
            failed: u64::from(self.failed),
            seconds: 0.0,
        }
    }
}

/// Run `pfa recover`: rank 0 alone truncates (one process changes the file), then every rank
/// gets its report. Collective.
pub fn run(comm: &dyn Comm, o: &Options, context: &Context) -> Result<Report, Error> {
    let mut fields = [0u64; 4];
    if comm.rank() == 0 {
        match ::pfa::recover(flist::path::as_path(&o.agg)) {
            Ok(r) => fields = [r.version, r.len_before, r.dropped(), 0],
            Err(e) => {
                context.error(format!("recover: {e}; nothing changed"));
                fields[3] = 1;
            }
        }
    }
    // Every rank learns rank 0's outcome (the others hold zeros): one reduction.
    comm.allreduce(&mut fields, ReduceOp::Max);
    Ok(Report {
        version: fields[0],
        len_before: fields[1],
        dropped: fields[2],
        failed: fields[3] != 0,
    })
}
