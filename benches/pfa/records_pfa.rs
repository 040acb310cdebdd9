//! The records in one aggregate ([`pfa`]): a stream per rank (`rankN`), each record appended.

use crate::data::{err, Pattern};
use crate::records::RECORD_BYTES;
use std::io::Read;
use std::path::Path;
use steal::Comm;

/// This rank's stream.
fn name(rank: usize) -> String {
    format!("rank{rank}")
}

/// Write this rank's records into a new aggregate at `file` (collective), `O_DIRECT` when
/// `direct`: the seconds of the collective close (index, footer, sync, rename) and the
/// aggregate's report fields.
pub fn write(
    comm: &dyn Comm,
    file: &Path,
    pattern: &Pattern,
    records: u64,
    direct: bool,
) -> Result<(f64, String), String> {
    let options = pfa::Options {
        direct_io: direct,
        ..Default::default()
    };
    let mut agg = pfa::Aggregate::create(comm, file, &options).map_err(|e| e.to_string())?;
    let appended = (|| {
        let mut w = agg
            .stream(name(comm.rank()).as_bytes(), b"")
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        pattern.item(0, RECORD_BYTES, &mut buf);
        for k in 0..records {
            pattern.restamp(k, &mut buf);
            w.append(&buf).map_err(|e| e.to_string())?;
        }
        w.finish().map_err(|e| e.to_string())
    })();
    crate::pfa_close::close(comm, agg, appended)
}

/// Read this rank's records back from the aggregate at `file` and check them.
pub fn read(file: &Path, pattern: &Pattern, records: u64, rank: usize) -> Result<(), String> {
    let index = pfa::Index::open(file).map_err(|e| e.to_string())?;
    let mut r = index
        .open_stream(name(rank).as_bytes(), index.latest())
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0; RECORD_BYTES];
    for k in 0..records {
        r.read_exact(&mut buf).map_err(|e| err("read", file, e))?;
        if !pattern.is_item(k, RECORD_BYTES, &buf) {
            return Err(err(
                "check",
                file,
                format!("record {k} of rank {rank} differs"),
            ));
        }
    }
    if !r.eof() {
        return Err(err(
            "check",
            file,
            format!("stream of rank {rank} is longer"),
        ));
    }
    Ok(())
}
