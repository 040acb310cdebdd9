//! The size distribution (`-d`) and histogram (`-f`) of a walk: bins of sizes, each counting
//! regular files and, as dwalk does, every item.

use flist::units::{human_bytes, parse_size};
use flist::{FileList, FileType};
use steal::{Comm, ReduceOp};

/// One bin of a size distribution or histogram, with two counts.
///
/// dwalk counts every item of the list by its `st_size` (a directory's size is whatever its
/// file system reports, a link's the length of its target), so its bins add up to the items
/// walked; a table titled by file sizes reads as regular files only. Both are kept, each
/// labelled, rather than one: a dwalk user checks `items` against dwalk's numbers, anyone
/// else reads `files`, and neither is surprised by a count that quietly means the other.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Bin {
    /// The sizes it holds, in bytes, as printed: `(512, 1048576]`, `[4.000 KiB, 8.000 KiB)`,
    /// `0 B`.
    pub range: String,
    /// Regular files in it, over all ranks.
    pub files: u64,
    /// Items of any type in it (directories, links and the rest included, each at its own
    /// size), over all ranks: what dwalk counts. Only items with a known size are counted, so
    /// a lite list (no sizes) counts none, where dwalk would put them all at 0 bytes.
    pub items: u64,
}

/// `size:0,4k,1M` → `[0, 4096, 1048576]` (ascending, deduplicated).
pub(super) fn parse_distribution(spec: &str) -> Result<Vec<u64>, String> {
    let seps = spec.strip_prefix("size:").ok_or_else(|| {
        format!("invalid --distribution '{spec}': expected size:SEP,SEP,... (e.g. size:0,4k,1M)")
    })?;
    let mut v = seps
        .split(',')
        .map(parse_size)
        .collect::<Result<Vec<u64>, String>>()?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// The size of every item whose size is known, in bytes, and whether it is a regular file.
fn sizes<'a>(list: &'a FileList) -> impl Iterator<Item = (u64, bool)> + 'a {
    list.iter()
        .filter_map(|e| e.meta.map(|m| (m.size, e.kind == FileType::File)))
}

/// Count the items of `list` into `bins` bins, `bin_of` naming the bin of a size in bytes:
/// regular files and all items, each summed over all ranks. Collective.
fn count_bins(
    comm: &dyn Comm,
    list: &FileList,
    bins: usize,
    bin_of: impl Fn(u64) -> usize,
) -> (Vec<u64>, Vec<u64>) {
    // Files then items in one vector: one reduction instead of two.
    let mut counts = vec![0u64; 2 * bins];
    for (size, file) in sizes(list) {
        let b = bin_of(size);
        if file {
            counts[b] += 1;
        }
        counts[bins + b] += 1;
    }
    comm.allreduce(&mut counts, ReduceOp::Sum);
    let items = counts.split_off(bins);
    (counts, items)
}

/// Regular files and all items counted over the bins `[0, seps[0]], (seps[0], seps[1]], ...,
/// (seps[n], inf)` (bytes), over all ranks. Collective.
pub(super) fn distribution(comm: &dyn Comm, list: &FileList, seps: &[u64]) -> Vec<Bin> {
    // Bin i holds (seps[i-1], seps[i]]; bin 0 holds [0, seps[0]].
    let (files, items) = count_bins(comm, list, seps.len() + 1, |size| {
        seps.partition_point(|&s| s < size)
    });
    files
        .iter()
        .zip(&items)
        .enumerate()
        .map(|(i, (&files, &items))| {
            let range = match i {
                0 => format!("[0, {}]", seps[0]),
                i if i == seps.len() => format!("({}, inf)", seps[i - 1]),
                i => format!("({}, {}]", seps[i - 1], seps[i]),
            };
            Bin {
                range,
                files,
                items,
            }
        })
        .collect()
}

/// Regular files and all items counted in power-of-two bins (those holding any item), over
/// all ranks. Collective.
pub(super) fn histogram(comm: &dyn Comm, list: &FileList) -> Vec<Bin> {
    // Bin b holds sizes in [2^(b-1), 2^b); bin 0 holds empty items.
    let (files, items) = count_bins(comm, list, 65, |size| (64 - size.leading_zeros()) as usize);
    files
        .iter()
        .zip(&items)
        .enumerate()
        .filter(|&(_, (_, &items))| items > 0)
        .map(|(b, (&files, &items))| {
            let range = if b == 0 {
                "0 B".to_string()
            } else {
                let hi = if b == 64 {
                    "16.000 EiB".to_string()
                } else {
                    human_bytes(1u64 << b)
                };
                format!("[{}, {})", human_bytes(1u64 << (b - 1)), hi)
            };
            Bin {
                range,
                files,
                items,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_specs() {
        assert_eq!(
            parse_distribution("size:1M,0,4k"),
            Ok(vec![0, 4096, 1 << 20])
        );
        assert!(parse_distribution("mtime:0").is_err());
        assert!(parse_distribution("size:4q").is_err());
    }

    /// Each rank holds one directory (4096 bytes), one link (5 bytes) and one file of
    /// 10 bytes times its rank plus one.
    fn rank_list(rank: usize) -> FileList {
        let mut list = FileList::new(flist::Detail::Stat);
        let meta = |size| flist::Meta {
            size,
            ..Default::default()
        };
        list.push(
            format!("/t/d{rank}").as_bytes(),
            FileType::Dir,
            Some(meta(4096)),
        );
        list.push(
            format!("/t/l{rank}").as_bytes(),
            FileType::Symlink,
            Some(meta(5)),
        );
        let size = 10 * (rank as u64 + 1);
        list.push(
            format!("/t/f{rank}").as_bytes(),
            FileType::File,
            Some(meta(size)),
        );
        list
    }

    #[test]
    fn bins_count_files_and_every_item_over_all_ranks() {
        let counts =
            |bins: &[Bin]| -> Vec<(u64, u64)> { bins.iter().map(|b| (b.files, b.items)).collect() };
        let reports = steal::local::run(3, |comm| {
            let list = rank_list(comm.rank());
            (
                distribution(comm, &list, &[8, 20, 4096]),
                histogram(comm, &list),
            )
        });
        for (dist, hist) in &reports {
            // Files of 10, 20, 30 bytes; links of 5; directories of 4096.
            assert_eq!(counts(dist), [(0, 3), (2, 2), (1, 4), (0, 0)]);
            assert_eq!(dist[3].range, "(4096, inf)");
            // [4, 8): the links; [8, 16): 10; [16, 32): 20 and 30; [4096, 8192): the dirs.
            // A bin with directories and no file is shown: its items count.
            assert_eq!(counts(hist), [(0, 3), (1, 1), (2, 2), (0, 3)]);
            assert_eq!(hist[3].range, "[4.000 KiB, 8.000 KiB)");
        }
    }

    #[test]
    fn a_lite_list_has_no_sizes_to_count() {
        let mut list = FileList::new(flist::Detail::Lite);
        list.push(b"/t/a", FileType::File, None);
        list.push(b"/t", FileType::Dir, None);
        let (hist, dist) = steal::local::run(1, |comm| {
            (histogram(comm, &list), distribution(comm, &list, &[0]))
        })
        .remove(0);
        assert!(hist.is_empty());
        assert!(dist.iter().all(|b| b.files == 0 && b.items == 0));
    }
}
