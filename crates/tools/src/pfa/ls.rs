//! `pfa ls AGG`: the streams of each version of an aggregate (name, size, chunks, kind).

use super::meta::{kind_of, Kind};
use super::version_of;
use crate::engine::context::{Context, Error, Summary};
use steal::Comm;

/// What `pfa ls` lists.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The aggregate.
    pub agg: Vec<u8>,
    /// Only this version (all versions without it).
    pub version: Option<u64>,
    /// Send the listing to the context's output (the command line turns it off for `--json`,
    /// whose report holds it).
    pub print: bool,
}

/// One stream of a version.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Stream {
    /// Its name (bytes that are not UTF-8 written `\xNN` in JSON).
    #[serde(serialize_with = "crate::engine::serde_path::text")]
    pub name: Vec<u8>,
    /// Bytes of data.
    pub size: u64,
    /// Chunks its data is stored in.
    pub chunks: u64,
    /// What `pack` recorded it as (a stream not written by `pack` is a file): `file`, `dir`
    /// or `symlink` in JSON.
    pub kind: Kind,
}

/// One version of the aggregate.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Version {
    /// The version number (1 for the first store).
    pub version: u64,
    /// Its streams, by name.
    pub streams: Vec<Stream>,
}

/// What `pfa ls` found (the same on every rank).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// The versions listed.
    pub versions: Vec<Version>,
    /// The aggregate could not be read (named on stderr).
    pub failed: bool,
}

impl Report {
    /// Items: the streams listed; bytes: their sizes.
    pub fn summary(&self) -> Summary {
        let streams = self.versions.iter().flat_map(|v| &v.streams);
        Summary {
            items: streams.clone().count() as u64,
            bytes: streams.map(|s| s.size).sum(),
            failed: u64::from(self.failed),
            seconds: 0.0,
        }
    }
}

/// Run `pfa ls`: every rank reads the index (a footer read: the same report everywhere),
/// rank 0 prints. Collective only in that every rank must call it.
pub fn run(comm: &dyn Comm, o: &Options, context: &Context) -> Result<Report, Error> {
    let report = match list(o) {
        Ok(r) => r,
        Err(message) => {
            if comm.rank() == 0 {
                context.error(message);
            }
            Report {
                versions: Vec::new(),
                failed: true,
            }
        }
    };
    if comm.rank() == 0 && o.print {
        for v in &report.versions {
            context.output(&text(v));
        }
    }
    Ok(report)
}

/// The versions `o` asks for, read from the index.
fn list(o: &Options) -> Result<Report, String> {
    let index = super::open_index(&o.agg)?;
    let versions = match o.version {
        Some(_) => vec![version_of(&index, &o.agg, o.version)?],
        None => index.versions().iter().map(|v| v.version).collect(),
    };
    let mut out = Vec::new();
    for version in versions {
        let mut streams: Vec<Stream> = index
            .streams(version)
            .map_err(|e| e.to_string())?
            .map(|s| Stream {
                kind: kind_of(s.meta),
                name: s.name.to_vec(),
                size: s.size,
                chunks: s.chunks,
            })
            .collect();
        streams.sort_by(|a, b| a.name.cmp(&b.name));
        out.push(Version { version, streams });
    }
    Ok(Report {
        versions: out,
        failed: false,
    })
}

/// `version V: N streams, B bytes` then one line per stream: `KIND SIZE CHUNKS NAME` (kind
/// `f`, `d` or `l`; the name as bytes, as stored).
fn text(v: &Version) -> Vec<u8> {
    let bytes: u64 = v.streams.iter().map(|s| s.size).sum();
    let mut out = format!(
        "version {}: {} streams, {bytes} bytes\n",
        v.version,
        v.streams.len()
    )
    .into_bytes();
    for s in &v.streams {
        let kind = s.kind.letter();
        out.extend_from_slice(format!("{kind} {:>12} {:>6} ", s.size, s.chunks).as_bytes());
        out.extend_from_slice(&s.name);
        out.push(b'\n');
    }
    out
}
