//! Many small logical files from every rank: as files in directories, or as the streams of one
//! aggregate ([`Store`]), written, then read back and checked.

use crate::data::{drop_cache, err, remove, Pattern};
use crate::phase::{agree, timed};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;
use steal::{Comm, CommExt};

/// Logical files a directory in [`Store::Files`].
const PER_DIR: u64 = 1_000;
/// Bytes of the largest logical file.
pub const MAX_BYTES: usize = 8 << 10;

/// How the logical files are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    /// A file each, `DIR/files/dNNN/fNNNNNN` (1,000 a directory; each rank makes the
    /// directories of its own files), and one `syncfs` per rank at the end: the cheapest way
    /// to make them all durable.
    Files,
    /// A stream each (named as the file would be) in one aggregate, `DIR/small.pfa`.
    Pfa,
}

impl Store {
    /// The store named `files` or `pfa`.
    pub fn parse(name: &str) -> Option<Store> {
        match name {
            "files" => Some(Store::Files),
            "pfa" => Some(Store::Pfa),
            _ => None,
        }
    }
}

/// Bytes of logical file `i`: 1 to 8 KiB, spread by a multiplicative hash (mean about 4.5 KiB).
pub fn len(i: u64) -> usize {
    1024 + (i.wrapping_mul(2_654_435_761) % (MAX_BYTES as u64 - 1023)) as usize
}

/// The name of logical file `i` (relative to the tree, or the stream's name).
pub fn name(i: u64) -> String {
    format!("d{:03}/f{i:06}", i / PER_DIR)
}

/// The logical files of `rank` among `size`: `rank`, `rank + size`, ... below `total`.
pub fn mine(rank: usize, size: usize, total: u64) -> impl Iterator<Item = u64> {
    (rank as u64..total).step_by(size)
}

/// Write `total` logical files spread over the ranks into `store` under `dir`, read them back
/// and check them (and remove them unless `keep`): the report's fields.
pub fn run(
    comm: &dyn Comm,
    store: Store,
    dir: &Path,
    total: u64,
    keep: bool,
) -> Result<String, String> {
    let (rank, size) = (comm.rank(), comm.size());
    let pattern = Pattern::new(rank, MAX_BYTES);
    let target = match store {
        Store::Files => dir.join("files"),
        Store::Pfa => dir.join("small.pfa"),
    };
    agree(comm, if rank == 0 { remove(&target) } else { Ok(()) })?;
    let ((finish_s, written), write_s) = timed(comm, || match store {
        Store::Files => write_files(&target, &pattern, mine(rank, size, total)),
        Store::Pfa => crate::small_pfa::write(comm, &target, &pattern, mine(rank, size, total)),
    })?;
    // The slowest rank's syncfs (files) or collective close (pfa), within write_s.
    let finish_s = comm.max((finish_s * 1e9) as u64) as f64 / 1e9;
    if store == Store::Pfa {
        agree(comm, drop_cache(&target))?;
    }
    let ((), read_s) = timed(comm, || match store {
        Store::Files => read_files(&target, &pattern, mine(rank, size, total)),
        Store::Pfa => crate::small_pfa::read(&target, &pattern, mine(rank, size, total)),
    })?;
    // Files (and directories) the store made, counted before they go.
    let files = agree(comm, if rank == 0 { count(&target) } else { Ok(0) })?;
    agree(
        comm,
        if rank == 0 && !keep {
            remove(&target)
        } else {
            Ok(())
        },
    )?;
    let bytes: u64 = (0..total).map(|i| len(i) as u64).sum();
    Ok(format!(
        "workload=small store={} logical={total} bytes={bytes} files={files} \
         write_s={write_s:.6} finish_s={finish_s:.6} read_s={read_s:.6}{written}",
        match store {
            Store::Files => "files",
            Store::Pfa => "pfa",
        }
    ))
}

fn write_files(
    tree: &Path,
    pattern: &Pattern,
    mine: impl Iterator<Item = u64>,
) -> Result<(f64, String), String> {
    let mut buf = Vec::new();
    let mut made_dir = None;
    let mut last: Option<File> = None;
    for i in mine {
        let path = tree.join(name(i));
        let d = i / PER_DIR;
        if made_dir != Some(d) {
            let parent = path.parent().expect("a file in a directory");
            std::fs::create_dir_all(parent).map_err(|e| err("mkdir", parent, e))?;
            made_dir = Some(d);
        }
        pattern.item(i, len(i), &mut buf);
        let mut f = File::create(&path).map_err(|e| err("create", &path, e))?;
        f.write_all(&buf).map_err(|e| err("write", &path, e))?;
        last = Some(f);
    }
    // One syncfs per rank writes back every file of the file system: the whole tree.
    let t = Instant::now();
    if let Some(f) = last {
        rustix::fs::syncfs(&f).map_err(|e| err("syncfs", tree, e))?;
    }
    Ok((t.elapsed().as_secs_f64(), String::new()))
}

fn read_files(
    tree: &Path,
    pattern: &Pattern,
    mine: impl Iterator<Item = u64>,
) -> Result<(), String> {
    let mut buf = Vec::with_capacity(MAX_BYTES);
    for i in mine {
        let path = tree.join(name(i));
        buf.clear();
        File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut buf))
            .map_err(|e| err("read", &path, e))?;
        if !pattern.is_item(i, len(i), &buf) {
            return Err(err("check", &path, "its bytes differ"));
        }
    }
    Ok(())
}

/// Entries under `path` (files and directories, `path` itself included): 1 for a file.
fn count(path: &Path) -> Result<u64, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| err("stat", path, e))?;
    if !meta.is_dir() {
        return Ok(1);
    }
    let mut n = 1;
    let mut stack: Vec<PathBuf> = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| err("readdir", &d, e))? {
            let e = e.map_err(|e| err("readdir", &d, e))?;
            n += 1;
            if e.file_type()
                .map_err(|x| err("stat", &e.path(), x))?
                .is_dir()
            {
                stack.push(e.path());
            }
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_files_are_a_few_kib_and_split_among_the_ranks_once_each() {
        assert!((0..10_000).all(|i| (1024..=MAX_BYTES).contains(&len(i))));
        let mean = (0..10_000).map(|i| len(i) as u64).sum::<u64>() / 10_000;
        assert!((4000..5200).contains(&mean), "{mean}");
        let mut all: Vec<u64> = (0..3).flat_map(|r| mine(r, 3, 10)).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(name(1234), "d001/f001234");
    }
}
