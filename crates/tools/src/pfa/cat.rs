//! `pfa cat AGG NAME`: one stream's bytes, to the output (stdout on the command line).

use super::{display, version_of};
use crate::engine::context::{Context, Error, Summary};
use std::io::Read;
use steal::{Comm, CommExt};

/// Bytes read from the stream and sent to the output at a time.
const PIECE: usize = 1 << 20;

/// What `pfa cat` prints.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The aggregate.
    pub agg: Vec<u8>,
    /// The stream's name.
    pub name: Vec<u8>,
    /// The version to read (the last without it).
    pub version: Option<u64>,
}

/// What `pfa cat` did (the same on every rank).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Bytes sent to the output.
    pub bytes: u64,
    /// The version read.
    pub version: u64,
    /// The stream could not be read whole (named on stderr; what came before the failure was
    /// sent).
    pub failed: bool,
}

impl Report {
    /// Items: the stream (1 when it was read whole); bytes: what was printed.
    pub fn summary(&self) -> Summary {
        Summary {
            items: u64::from(!self.failed),
            bytes: self.bytes,
            failed: u64::from(self.failed),
            seconds: 0.0,
        }
    }
}

/// Run `pfa cat`: rank 0 reads the stream and sends it to the output; every rank returns its
/// report. Collective.
pub fn run(comm: &dyn Comm, o: &Options, context: &Context) -> Result<Report, Error> {
    let mut report = Report::default();
    if comm.rank() == 0 {
        if let Err(message) = print(o, context, &mut report) {
            context.error(message);
            report.failed = true;
        }
    }
    let shared = comm.bcast_from(0, &(report.bytes, report.version, report.failed));
    Ok(Report {
        bytes: shared.0,
        version: shared.1,
        failed: shared.2,
    })
}

/// Read the stream and send it on, counting in `report`.
fn print(o: &Options, context: &Context, report: &mut Report) -> Result<(), String> {
    let index = super::open_index(&o.agg)?;
    report.version = version_of(&index, &o.agg, o.version)?;
    let mut reader = index
        .open_stream(&o.name, report.version)
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; PIECE];
    loop {
        if context.stopped() {
            return Err(format!(
                "{}: {}: interrupted after {} bytes",
                display(&o.agg),
                display(&o.name),
                report.bytes
            ));
        }
        let n = reader.read(&mut buf).map_err(|e| {
            format!(
                "{e} (stream {}: {} bytes were written before)",
                display(&o.name),
                report.bytes
            )
        })?;
        if n == 0 {
            return Ok(());
        }
        context.output(&buf[..n]);
        report.bytes += n as u64;
    }
}
