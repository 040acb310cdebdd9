//! Closing an aggregate after every rank wrote its streams, or aborting it when any failed (a
//! rank that returned early would leave the others waiting in the collective close).

use std::time::Instant;
use steal::{Comm, CommExt};

/// Close `agg` when `written` is Ok on every rank (collective), else abort it: the seconds of
/// the close and the report fields of what it wrote.
pub fn close(
    comm: &dyn Comm,
    agg: pfa::Aggregate<'_>,
    written: Result<(), String>,
) -> Result<(f64, String), String> {
    if !comm.all(written.is_ok()) {
        let _ = agg.abort();
        written?;
        return Err("another rank failed (see its message)".into());
    }
    let t = Instant::now();
    let w = agg.close().map_err(|e| e.to_string())?;
    Ok((t.elapsed().as_secs_f64(), fields(&w)))
}

/// `Written`'s fields for the report line (each with a leading space).
pub fn fields(w: &pfa::Written) -> String {
    format!(
        " chunk_size={} direct_io={} index_bytes={} file_len={} chunks_written={} \
         chunks_reused={} written_bytes={} logical_bytes={}",
        w.chunk_size,
        w.direct_io,
        w.index_bytes,
        w.file_len,
        w.chunks_written,
        w.chunks_reused,
        w.bytes_written,
        w.logical_bytes
    )
}
