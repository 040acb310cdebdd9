//! Whether a list file given with `-i` is read whole or a piece at a time (issue 34): the one
//! decision of every tool that reads its list in bounded pieces beyond `--memory-limit`
//! (`find -i`, `rm -i`).

use crate::engine::context::Error;
use crate::engine::input::Input;
use flist::io::{self, CacheShare};
use flist::path::display;
use flist::spill::MemoryLimit;
use steal::{Comm, CommExt};

/// What [`plan`] decided.
pub enum Plan {
    /// Not a list file that can be read in pieces (no list, a text list, stdin), or it fits:
    /// the in-memory run, with the limit's description when there is one (for the report).
    InMemory(Option<String>),
    /// Beyond the limit: read it piece by piece from this share, within this limit.
    Stream(Box<CacheShare>, MemoryLimit),
}

/// Whether the list `input` outgrows `memory_limit` (None: the default): a v3/v4 list file
/// one of whose ranks' shares takes more than half the limit in memory. An unreadable list is
/// the error, naming it. Collective.
pub fn plan(comm: &dyn Comm, input: &Input, memory_limit: Option<u64>) -> Result<Plan, Error> {
    let Input::File { path, .. } = input else {
        return Ok(Plan::InMemory(None));
    };
    let share = io::open_cache_share(comm, path.as_slice()).map_err(|e| {
        let shown = display(path);
        let msg = e.to_string();
        Error::new(if msg.contains(shown.as_ref()) {
            msg
        } else {
            format!("read list {shown}: {msg}")
        })
    })?;
    let limit = MemoryLimit::resolve(comm, memory_limit);
    let Some(share) = share else {
        return Ok(Plan::InMemory(Some(format!(
            "{} (a text list is read whole)",
            limit.describe()
        ))));
    };
    let bytes = share.remaining() * share.record_bytes();
    if !comm.any(bytes > limit.bytes / 2) {
        return Ok(Plan::InMemory(Some(limit.describe())));
    }
    Ok(Plan::Stream(Box::new(share), limit))
}
