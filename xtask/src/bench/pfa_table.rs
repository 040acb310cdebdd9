//! The tables of `cargo xtask bench section pfa` (see `pfa.rs`), with issue 36's targets: PFA's
//! write bandwidth ≥ N-N's and ≥ 2× plain N-1's at 8 ranks and more; 10^5 small files written
//! ≥ 3× faster than as files; an incremental store with 5% of its chunks changed writing ≤ 10%
//! of the bytes.

use super::measure::median;
use std::fmt::Write as _;

/// Ranks from which the records target applies.
pub const RECORDS_TARGET_NP: usize = 8;
/// PFA's write bandwidth over N-N's, at least.
pub const TARGET_VS_NN: f64 = 1.0;
/// PFA's write bandwidth over plain N-1's, at least.
pub const TARGET_VS_N1: f64 = 2.0;
/// Small files: files' write time over PFA's, at least.
pub const TARGET_SMALL: f64 = 3.0;
/// Incremental store: bytes written for the new version over the full size, at most.
pub const TARGET_INCREMENTAL: f64 = 0.10;

/// The values of one measure over the runs.
#[derive(Clone, Debug)]
pub struct Spread(Vec<f64>);

impl Spread {
    /// The runs' values.
    pub fn of(v: Vec<f64>) -> Spread {
        assert!(!v.is_empty(), "a spread of no runs");
        Spread(v)
    }

    /// Their median.
    pub fn median(&self) -> f64 {
        median(self.0.clone())
    }
}

/// One row of the records table: one file system, launch and rank count. The vectors are per
/// layout, in the order N-N, N-1, PFA and (on disk) PFA with `O_DIRECT`.
#[derive(Clone, Debug)]
pub struct RecordsRow {
    /// `tmpfs` or `disk`.
    pub fs: &'static str,
    /// `mpirun` or `threads`.
    pub launch: &'static str,
    /// Ranks.
    pub np: usize,
    /// Write bandwidth, MB/s.
    pub write: Vec<Spread>,
    /// Read bandwidth (and check), MB/s.
    pub read: Vec<Spread>,
    /// Seconds of the slowest rank's final sync (N-N, N-1) or of the collective close (PFA),
    /// part of the write time.
    pub finish_s: Vec<Spread>,
    /// Median over rounds of PFA's write bandwidth / N-N's.
    pub pfa_vs_nn: f64,
    /// Median over rounds of PFA's write bandwidth / plain N-1's.
    pub pfa_vs_n1: f64,
    /// With the O_DIRECT layout: whether it did write with O_DIRECT.
    pub direct_io: Option<bool>,
    /// The aggregate's chunk size (bytes).
    pub chunk_size: u64,
}

impl RecordsRow {
    /// Whether the row meets its target; None below [`RECORDS_TARGET_NP`] ranks.
    pub fn on_target(&self) -> Option<bool> {
        (self.np >= RECORDS_TARGET_NP)
            .then_some(self.pfa_vs_nn >= TARGET_VS_NN && self.pfa_vs_n1 >= TARGET_VS_N1)
    }
}

/// One row of the small-files table: one file system and launch, 2 ranks.
#[derive(Clone, Debug)]
pub struct SmallRow {
    /// `tmpfs` or `disk`.
    pub fs: &'static str,
    /// `mpirun` or `threads`.
    pub launch: &'static str,
    /// Logical files.
    pub logical: u64,
    /// Their bytes.
    pub bytes: u64,
    /// As files: write seconds (the syncfs included), its syncfs, read seconds.
    pub files_write_s: Spread,
    /// The slowest rank's `syncfs`, s.
    pub files_sync_s: Spread,
    /// Reading them back and checking them, s.
    pub files_read_s: Spread,
    /// Files and directories made.
    pub files_entries: u64,
    /// As an aggregate: write seconds (the close included).
    pub pfa_write_s: Spread,
    /// The collective close, s.
    pub pfa_close_s: Spread,
    /// Reading the streams back and checking them, s.
    pub pfa_read_s: Spread,
    /// Files made (the aggregate).
    pub pfa_entries: u64,
    /// Median over rounds of the files' write time / PFA's.
    pub speedup: f64,
}

/// One row of the incremental table: one file system.
#[derive(Clone, Debug)]
pub struct IncrementalRow {
    /// `tmpfs` or `disk`.
    pub fs: &'static str,
    /// Bytes of the streams (all ranks).
    pub full_bytes: u64,
    /// Stream bytes the second version wrote.
    pub written_bytes: u64,
    /// Bytes the file grew by for the second version (data, padding, footer, trailer).
    pub growth_bytes: u64,
    /// Pieces the second version wrote.
    pub chunks_written: u64,
    /// Pieces it referenced from the first.
    pub chunks_reused: u64,
    /// Seconds of the first version's store.
    pub write1_s: Spread,
    /// Seconds of the second's.
    pub write2_s: Spread,
}

impl IncrementalRow {
    /// The growth of the file over the full size.
    pub fn ratio(&self) -> f64 {
        self.growth_bytes as f64 / self.full_bytes as f64
    }
}

/// Everything the section measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// One line on how it was run.
    pub context: String,
    /// The records rows.
    pub records: Vec<RecordsRow>,
    /// The small-files rows.
    pub small: Vec<SmallRow>,
    /// The incremental rows.
    pub incremental: Vec<IncrementalRow>,
    /// The tar interop's cases per file system.
    pub tar: Vec<super::pfa_tar::TarRows>,
    /// Why the tar interop was not measured.
    pub tar_note: Option<String>,
}

/// ✓, ✗, or — where no target applies.
pub fn mark(on_target: Option<bool>) -> &'static str {
    match on_target {
        Some(true) => "✓",
        Some(false) => "✗",
        None => "—",
    }
}

fn mbs(s: Option<&Spread>) -> String {
    s.map_or("—".into(), |s| format!("{:.0}", s.median()))
}

/// The report as Markdown tables.
pub fn markdown(r: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## PFA (parallel file aggregation)\n\n{}\n", r.context);
    if !r.records.is_empty() {
        let _ = writeln!(
            md,
            "### records: each rank writes K records of 272,383 bytes, reads them back\n\n\
             MB/s (10^6 bytes a second, all ranks; medians); PFA ÷ N-N and ÷ N-1: medians of \
             the ratios of write bandwidth within a round; target at {RECORDS_TARGET_NP}+ ranks: \
             PFA ≥ {TARGET_VS_NN}× N-N and ≥ {TARGET_VS_N1}× N-1. Sync: the slowest rank's \
             final fsync (N-N, N-1) or the collective close (PFA), seconds, within the write.\n\n\
             | fs | launch | ranks | write N-N | write N-1 | write PFA | write PFA O_DIRECT | \
             PFA ÷ N-N | PFA ÷ N-1 | target | read N-N | read N-1 | read PFA | sync s N-N / N-1 / PFA |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for row in &r.records {
            let direct = match row.direct_io {
                Some(false) => format!("{} (buffered: refused)", mbs(row.write.get(3))),
                _ => mbs(row.write.get(3)),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {direct} | {:.2} | {:.2} | {} | {} | {} | {} | {:.3} / {:.3} / {:.3} |",
                row.fs,
                row.launch,
                row.np,
                mbs(row.write.first()),
                mbs(row.write.get(1)),
                mbs(row.write.get(2)),
                row.pfa_vs_nn,
                row.pfa_vs_n1,
                mark(row.on_target()),
                mbs(row.read.first()),
                mbs(row.read.get(1)),
                mbs(row.read.get(2)),
                row.finish_s[0].median(),
                row.finish_s[1].median(),
                row.finish_s[2].median(),
            );
        }
        let chunks: Vec<String> = r
            .records
            .iter()
            .map(|row| format!("{} {} KiB", row.fs, row.chunk_size >> 10))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let _ = writeln!(
            md,
            "\nPFA's chunk size (its policy): {}.\n",
            chunks.join(", ")
        );
    }
    if !r.small.is_empty() {
        let _ = writeln!(
            md,
            "### small files: logical files of 1-8 KiB from 2 ranks\n\n\
             Seconds (medians). Files: 1,000 a directory, one `syncfs` per rank at the end; PFA: \
             a stream each in one aggregate, closed (synced). Speed-up: the median of files' write \
             time ÷ PFA's within a round; target ≥ {TARGET_SMALL}×.\n\n\
             | fs | launch | logical files | MB | files: write s (syncfs s) | files: entries | \
             PFA: write s (close s) | PFA: files | speed-up | target | read s files / PFA |\n\
             |---|---|---|---|---|---|---|---|---|---|---|"
        );
        for s in &r.small {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.1} | {:.3} ({:.3}) | {} | {:.3} ({:.3}) | {} | {:.2} | {} | {:.3} / {:.3} |",
                s.fs,
                s.launch,
                s.logical,
                s.bytes as f64 / 1e6,
                s.files_write_s.median(),
                s.files_sync_s.median(),
                s.files_entries,
                s.pfa_write_s.median(),
                s.pfa_close_s.median(),
                s.pfa_entries,
                s.speedup,
                mark(Some(s.speedup >= TARGET_SMALL)),
                s.files_read_s.median(),
                s.pfa_read_s.median(),
            );
        }
        md.push('\n');
    }
    if !r.incremental.is_empty() {
        let _ = writeln!(
            md,
            "### incremental store: 2 ranks, 5% of the chunks changed, the next version stored\n\n\
             Growth: what the file grew by for the new version (chunks, padding, footer and \
             trailer) ÷ the streams' full size; target ≤ {TARGET_INCREMENTAL}.\n\n\
             | fs | full MB | stream bytes written | file growth | growth ÷ full | target | \
             pieces written / reused | store s: v1 / v2 |\n\
             |---|---|---|---|---|---|---|---|"
        );
        for i in &r.incremental {
            let _ = writeln!(
                md,
                "| {} | {:.1} | {} | {} | {:.4} | {} | {} / {} | {:.3} / {:.3} |",
                i.fs,
                i.full_bytes as f64 / 1e6,
                i.written_bytes,
                i.growth_bytes,
                i.ratio(),
                mark(Some(i.ratio() <= TARGET_INCREMENTAL)),
                i.chunks_written,
                i.chunks_reused,
                i.write1_s.median(),
                i.write2_s.median(),
            );
        }
    }
    tar_table(&mut md, r);
    md
}

fn tar_table(md: &mut String, r: &Report) {
    let _ = writeln!(
        md,
        "\n### tar interop: an aggregate of small files archived by `pfa unpack`, then `tar -c`\n"
    );
    if let Some(note) = &r.tar_note {
        let _ = writeln!(md, "{note}.");
        return;
    }
    let _ = writeln!(
        md,
        "The small files as a tree of 4 KiB files, packed once (untimed) by `mpirun -np 2 \
         mfu-rs pfa pack`; medians of interleaved runs, seconds, wall time of the whole command \
         (`mpirun` started once a step).\n\n\
         | fs | files | command | median s | time ÷ GNU tar's |\n|---|---|---|---|---|"
    );
    for t in &r.tar {
        let first = t.cases.first().map_or(f64::NAN, |c| c.1);
        for (name, secs) in &t.cases {
            let _ = writeln!(
                md,
                "| {} | {} | {name} | {secs:.3} | {:.2} |",
                t.fs,
                t.files,
                secs / first
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(np: usize, vs_nn: f64, vs_n1: f64) -> RecordsRow {
        let s = |v: f64| Spread::of(vec![v]);
        RecordsRow {
            fs: "tmpfs",
            launch: "threads",
            np,
            write: vec![s(100.0), s(50.0), s(110.0)],
            read: vec![s(1.0), s(2.0), s(3.0)],
            finish_s: vec![s(0.1), s(0.2), s(0.3)],
            pfa_vs_nn: vs_nn,
            pfa_vs_n1: vs_n1,
            direct_io: None,
            chunk_size: 1 << 20,
        }
    }

    #[test]
    fn the_records_target_applies_from_eight_ranks_and_needs_both_ratios() {
        assert_eq!(row(4, 0.5, 0.5).on_target(), None);
        assert_eq!(row(8, 1.1, 2.2).on_target(), Some(true));
        assert_eq!(row(16, 0.9, 2.2).on_target(), Some(false));
        assert_eq!(row(16, 1.1, 1.9).on_target(), Some(false));
    }

    #[test]
    fn the_tables_mark_each_target() {
        let s = |v: f64| Spread::of(vec![v, v + 1.0, v - 1.0]);
        let md = markdown(&Report {
            context: "ctx".into(),
            records: vec![row(4, 1.1, 2.2), row(8, 1.1, 2.2), row(16, 0.8, 2.2)],
            small: vec![SmallRow {
                fs: "disk",
                launch: "mpirun",
                logical: 100_000,
                bytes: 460_000_000,
                files_write_s: s(6.0),
                files_sync_s: s(2.0),
                files_read_s: s(3.0),
                files_entries: 100_101,
                pfa_write_s: s(1.5),
                pfa_close_s: s(0.5),
                pfa_read_s: s(1.0),
                pfa_entries: 1,
                speedup: 4.0,
            }],
            incremental: vec![IncrementalRow {
                fs: "tmpfs",
                full_bytes: 80 << 20,
                written_bytes: 4 << 20,
                growth_bytes: 10 << 20,
                chunks_written: 4,
                chunks_reused: 76,
                write1_s: s(1.0),
                write2_s: s(0.5),
            }],
            tar: Vec::new(),
            tar_note: Some("no pfa command".into()),
        });
        let lines: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert!(
            lines[1].contains("| 4 |") && lines[1].contains("| — |"),
            "{md}"
        );
        assert!(lines[2].contains("| ✓ |"), "{md}");
        assert!(lines[3].contains("| ✗ |"), "{md}");
        // The median of 6, 7 and 5 s.
        assert!(
            lines[5].contains("| 6.000 (2.000) |") && lines[5].contains("| ✓ |"),
            "{md}"
        );
        // 10 MiB of 80: 0.125 > 0.10.
        assert!(lines[7].contains("| 0.1250 | ✗ |"), "{md}");
        assert!(md.ends_with("no pfa command.\n"), "{md}");
    }
}
