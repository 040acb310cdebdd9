//! `cargo xtask gen-list --records N --out FILE [--seed S]`: a synthetic list in mpiFileUtils'
//! cache format v4, written straight, with no tree behind it: the input of the out-of-core sort's
//! bench row (issue 34), where 10^8 records are wanted and no file system holds 10^8 files.
//!
//! Every record is a regular file with a 60-byte path `/synthetic/dDDDDDD/fHHHHHHHHHHHHHHHH-xx`,
//! its hex part a bijective hash of the record's index (so every path is different and the file
//! is in no useful order), and made-up sizes and times from the same hash. One user and one
//! group (`root`, 0).

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;

/// Bytes of every path.
pub const PATH_BYTES: usize = 60;

/// SplitMix64: a bijection of `u64`, so distinct indices give distinct paths.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Write `records` made-up records as a v4 list at `out` (replacing it).
pub fn write_list(out: &Path, records: u64, seed: u64) -> Result<()> {
    // The path field: the path, a NUL, rounded up to 8 (as mpiFileUtils writes it).
    let fc = (PATH_BYTES as u64 + 1).div_ceil(8) * 8;
    let (uc, gc) = (8u64, 8u64);
    let file = std::fs::File::create(out).with_context(|| format!("create {}", out.display()))?;
    let mut w = std::io::BufWriter::with_capacity(8 << 20, file);
    let mut head = Vec::new();
    for v in [4, 1, uc, 1, gc, records, fc] {
        head.extend_from_slice(&v.to_be_bytes());
    }
    for _table in 0..2 {
        let mut name = b"root".to_vec();
        name.resize(uc as usize, 0);
        head.extend_from_slice(&name);
        head.extend_from_slice(&0u64.to_be_bytes());
    }
    w.write_all(&head)?;
    let mut rec = Vec::with_capacity(fc as usize + 80);
    for i in 0..records {
        let h = mix(i ^ seed.rotate_left(17));
        let g = mix(h);
        rec.clear();
        write!(rec, "/synthetic/d{:06}/f{h:016x}-", g % 1_000_000)?;
        rec.resize(PATH_BYTES, b'x');
        rec.resize(fc as usize, 0);
        let (t, ns) = (
            1_600_000_000 + (g >> 40) as i64 % 100_000_000,
            g % 1_000_000_000,
        );
        let nums = [
            0o100644,
            0,
            0,
            t as u64,
            ns,
            (t - (h % 1000) as i64) as u64,
            ns / 2,
            t as u64,
            ns,
            h % (1 << 30),
        ];
        for v in nums {
            rec.extend_from_slice(&v.to_be_bytes());
        }
        w.write_all(&rec)?;
    }
    w.flush()
        .with_context(|| format!("write {}", out.display()))?;
    Ok(())
}

/// `cargo xtask gen-list ...`.
pub fn run(args: &[String]) -> Result<()> {
    let usage = "usage: cargo xtask gen-list --records N --out FILE [--seed S]";
    let (mut records, mut out, mut seed) = (None, None, 0u64);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .with_context(|| format!("{a} needs a value\n{usage}"))
        };
        match a.as_str() {
            "--records" => records = Some(value()?.parse::<u64>().context("--records")?),
            "--out" => out = Some(value()?.clone()),
            "--seed" => seed = value()?.parse().context("--seed")?,
            "-h" | "--help" => {
                println!("{usage}");
                return Ok(());
            }
            x => bail!("unknown option {x:?}\n{usage}"),
        }
    }
    let (Some(records), Some(out)) = (records, out) else {
        bail!("{usage}");
    };
    let t = std::time::Instant::now();
    write_list(Path::new(&out), records, seed)?;
    eprintln!(
        "gen-list: wrote {records} records to {out} in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_the_v4_layout_and_distinct_paths_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.mfu");
        write_list(&path, 1000, 3).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let u = |i: usize| u64::from_be_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
        assert_eq!(
            [u(0), u(1), u(2), u(3), u(4), u(5), u(6)],
            [4, 1, 8, 1, 8, 1000, 64]
        );
        let data = 56 + 2 * 16;
        assert_eq!(bytes.len(), data + 1000 * (64 + 80));
        let paths: Vec<&[u8]> = bytes[data..]
            .chunks_exact(144)
            .map(|r| &r[..PATH_BYTES])
            .collect();
        assert!(paths.iter().all(|p| p.starts_with(b"/synthetic/d")));
        let mut sorted = paths.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 1000, "distinct paths");
        assert_ne!(sorted, paths, "not already in order");
        let mode = u64::from_be_bytes(bytes[data + 64..data + 72].try_into().unwrap());
        assert_eq!(mode, 0o100644);
    }
}
