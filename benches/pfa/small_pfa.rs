//! Small logical files as the streams of one aggregate, each named as its file would be.

use crate::data::{err, Pattern};
use crate::small::{len, name};
use std::path::Path;
use steal::Comm;

/// Write this rank's logical files `mine` as streams of a new aggregate at `file` (collective):
/// the seconds of the close and the aggregate's report fields.
pub fn write(
    comm: &dyn Comm,
    file: &Path,
    pattern: &Pattern,
    mut mine: impl Iterator<Item = u64>,
) -> Result<(f64, String), String> {
    let mut agg =
        pfa::Aggregate::create(comm, file, &pfa::Options::default()).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let written = mine.try_for_each(|i| {
        pattern.item(i, len(i), &mut buf);
        agg.write_stream(name(i).as_bytes(), b"", &buf)
            .map_err(|e| e.to_string())
    });
    crate::pfa_close::close(comm, agg, written)
}

/// Read this rank's logical files back from the aggregate at `file` and check them.
pub fn read(file: &Path, pattern: &Pattern, mine: impl Iterator<Item = u64>) -> Result<(), String> {
    let index = pfa::Index::open(file).map_err(|e| e.to_string())?;
    let version = index.latest();
    for i in mine {
        let got = index
            .read_stream(name(i).as_bytes(), version)
            .map_err(|e| e.to_string())?;
        if !pattern.is_item(i, len(i), &got) {
            return Err(err("check", file, format!("stream {} differs", name(i))));
        }
    }
    Ok(())
}
