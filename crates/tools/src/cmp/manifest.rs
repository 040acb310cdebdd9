//! `cmp --manifest FILE DIR`: check a tree against a checksum manifest (as `b3sum --check` or
//! `sha256sum -c` would, run in DIR), the files hashed in parallel over ranks and threads.
//!
//! Both formats are `HASH  PATH` lines with 64 hexadecimal digits, so the hash cannot be told
//! from the file: unless it is given, each file is hashed both ways in one read and the hash
//! that matches more lines over all ranks is the manifest's (at the cost of SHA-256's CPU time
//! on top of BLAKE3's).

use super::Report;
use crate::engine::context::{Context, Error};
use crate::engine::digest::HashKind;
use crate::engine::manifest::parse_line;
use crate::engine::setup::agree_setup;
use flist::path::display;
use rayon::prelude::*;
use sha2::Digest as _;
use std::io::Read;
use std::time::Instant;
use steal::{Comm, ReduceOp};

/// What a check against a manifest found (over all ranks).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Checked {
    /// The manifest, as shown.
    pub manifest: String,
    /// The hash its lines were checked as.
    pub hash: HashKind,
    /// The hash was found by hashing both ways (not given).
    pub detected: bool,
    /// Files listed.
    pub listed: u64,
    /// Files whose content matches.
    pub matched: u64,
    /// Files whose content differs (each named).
    pub differ: u64,
    /// Files listed but missing (each named).
    pub missing: u64,
    /// Files that could not be read, and lines that are not manifest lines (each named).
    pub unreadable: u64,
}

/// What hashing one listed file gave.
enum Found {
    /// Its digests (BLAKE3, SHA-256 when asked) and bytes.
    Hashed([u8; 32], Option<[u8; 32]>, u64),
    Missing(std::io::Error),
    Unreadable(std::io::Error),
}

/// Hash the file at `path` as BLAKE3 and, with `sha`, SHA-256, in one read.
fn hash(path: &[u8], sha: bool) -> Found {
    let mut f = match std::fs::File::open(flist::path::as_path(path)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Missing(e),
        Err(e) => return Found::Unreadable(e),
    };
    let mut b3 = blake3::Hasher::new();
    let mut s2 = sha.then(sha2::Sha256::new);
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0;
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                b3.update(&buf[..n]);
                if let Some(s) = &mut s2 {
                    s.update(&buf[..n]);
                }
                bytes += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Found::Unreadable(e),
        }
    }
    Found::Hashed(
        *b3.finalize().as_bytes(),
        s2.map(|s| s.finalize().into()),
        bytes,
    )
}

/// Check `dir` against the manifest `file` (`kind`: its hash, `None`: find out). Collective.
pub fn run(
    comm: &dyn Comm,
    context: &Context,
    file: &[u8],
    dir: &[u8],
    kind: Option<HashKind>,
) -> Result<Report, Error> {
    let read = std::fs::read(flist::path::as_path(file))
        .map_err(|e| format!("read manifest {}: {e}", display(file)));
    let text = agree_setup(comm, read)?;
    let is_dir = crate::engine::setup::is_dir(dir);
    agree_setup(
        comm,
        if is_dir {
            Ok(())
        } else {
            Err(format!("{}: not a directory", display(dir)))
        },
    )?;
    let started = Instant::now();
    let (rank, size) = (comm.rank(), comm.size());
    // Every rank takes every size-th line (the file is read by all; hashing is the work).
    let mut bad = 0u64;
    let mut mine = Vec::new();
    for (n, l) in text
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
    {
        if n % size != rank {
            continue;
        }
        match parse_line(l) {
            Some((digest, rel)) => mine.push((digest, rel)),
            None => {
                bad += 1;
                context.error(format_args!(
                    "{} line {}: not a manifest line (HASH  PATH)",
                    display(file),
                    n + 1
                ));
            }
        }
    }
    drop(text);
    let both = kind.is_none();
    let sha = kind != Some(HashKind::Blake3);
    let found: Vec<Found> = mine
        .par_iter()
        .map(|(_, rel)| {
            let path = [dir, b"/", rel].concat();
            hash(&path, sha)
        })
        .collect();
    // Which hash: given, or the one more lines match.
    let kind = kind.unwrap_or_else(|| {
        let mut votes = [0u64; 2];
        for ((want, _), f) in mine.iter().zip(&found) {
            if let Found::Hashed(b3, s2, _) = f {
                votes[0] += u64::from(b3 == want);
                votes[1] += u64::from(s2.as_ref() == Some(want));
            }
        }
        comm.allreduce(&mut votes, ReduceOp::Sum);
        if votes[1] > votes[0] {
            HashKind::Sha256
        } else {
            HashKind::Blake3
        }
    });
    let mut c = Checked {
        manifest: display(file).into_owned(),
        hash: kind,
        detected: both,
        listed: mine.len() as u64,
        unreadable: bad,
        ..Checked::default()
    };
    let mut bytes_read = 0;
    for ((want, rel), f) in mine.iter().zip(found) {
        let shown = display(rel);
        match f {
            Found::Hashed(b3, s2, n) => {
                bytes_read += n;
                let got = match kind {
                    HashKind::Blake3 => Some(b3),
                    HashKind::Sha256 => s2,
                };
                if got.as_ref() == Some(want) {
                    c.matched += 1;
                } else {
                    c.differ += 1;
                    context.error(format_args!(
                        "{shown}: FAILED: its content differs from the manifest ({})",
                        kind.name()
                    ));
                }
            }
            Found::Missing(e) => {
                c.missing += 1;
                context.error(format_args!("{shown}: missing ({e})"));
            }
            Found::Unreadable(e) => {
                c.unreadable += 1;
                context.error(format_args!("read {shown}: {e}"));
            }
        }
    }
    let mut sums = [
        c.listed,
        c.matched,
        c.differ,
        c.missing,
        c.unreadable,
        bytes_read,
    ];
    comm.allreduce(&mut sums, ReduceOp::Sum);
    [
        c.listed,
        c.matched,
        c.differ,
        c.missing,
        c.unreadable,
        bytes_read,
    ] = sums;
    Ok(Report {
        src: display(dir).into_owned(),
        dest: display(file).into_owned(),
        paths: c.listed,
        differing: c.differ + c.missing,
        not_compared: c.unreadable,
        bytes_read,
        seconds: started.elapsed().as_secs_f64(),
        failures: context.failures(),
        manifest: Some(c),
        ..Report::default()
    })
}

/// The report of a check: `Checked N files against FILE (HASH): M match, D differ, ...`.
pub fn text(c: &Checked) -> String {
    let how = if c.detected {
        format!("{}, found by hashing both ways", c.hash.name())
    } else {
        c.hash.name().to_string()
    };
    let verdict = if c.differ + c.missing + c.unreadable == 0 {
        "the tree matches the manifest"
    } else {
        "the tree does NOT match the manifest"
    };
    format!(
        "Checked {} files against {} ({how}): {} match, {} differ, {} missing, {} unreadable: \
         {verdict}\n",
        c.listed, c.manifest, c.matched, c.differ, c.missing, c.unreadable
    )
}
