//! Distributed sample sort of a list by dwalk's sort keys (`-s --sort`).
//!
//! The order is total: the keys in turn, then the path bytes ascending, then the type and the
//! remaining metadata, so the result does not depend on the number of ranks nor on where records
//! started. After [`sort`], concatenating the lists of ranks `0..size` gives the globally sorted
//! sequence, and counts are balanced as by [`spread`].
//!
//! ```
//! use flist::sort::{parse_keys, sort};
//! use flist::{Detail, FileList, FileType};
//! let keys = parse_keys("-name").unwrap();
//! let out = steal::local::run(2, |comm| {
//!     let mut list = FileList::new(Detail::Lite);
//!     for p in [&b"/a"[..], b"/c", b"/b"] {
//!         if comm.rank() == 0 {
//!             list.push(p, FileType::File, None);
//!         }
//!     }
//!     let sorted = sort(comm, list, &keys).unwrap();
//!     sorted.iter().map(|e| e.path.to_vec()).collect::<Vec<_>>()
//! });
//! assert_eq!(out, vec![vec![b"/c".to_vec(), b"/b".to_vec()], vec![b"/a".to_vec()]]);
//! ```

use crate::distribute::spread;
use crate::error::{Error, Result};
use crate::ids::IdTable;
use crate::record::{Detail, FileList, Meta};
use rayon::slice::ParallelSliceMut;
use std::cmp::Ordering;
use std::collections::HashMap;
use steal::Comm;

/// A field records can be sorted by: dwalk's `name,user,group,uid,gid,atime,mtime,ctime,size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Path bytes, compared as `memcmp` (like `strcmp` in the C tool).
    Name,
    /// Owner name from the list's user table (the uid as decimal text when the table lacks it).
    User,
    /// Group name from the list's group table (the gid as decimal text when missing).
    Group,
    /// Numeric owner id.
    Uid,
    /// Numeric group id.
    Gid,
    /// Access time (seconds, then nanoseconds).
    Atime,
    /// Modification time (seconds, then nanoseconds).
    Mtime,
    /// Status change time (seconds, then nanoseconds).
    Ctime,
    /// Size in bytes.
    Size,
}

impl Field {
    /// Every field, in dwalk's documented order.
    pub const ALL: [Field; 9] = [
        Field::Name,
        Field::User,
        Field::Group,
        Field::Uid,
        Field::Gid,
        Field::Atime,
        Field::Mtime,
        Field::Ctime,
        Field::Size,
    ];

    /// The field's name in a sort spec (`name`, `size`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Name => "name",
            Field::User => "user",
            Field::Group => "group",
            Field::Uid => "uid",
            Field::Gid => "gid",
            Field::Atime => "atime",
            Field::Mtime => "mtime",
            Field::Ctime => "ctime",
            Field::Size => "size",
        }
    }

    /// True when the field needs stat metadata (everything but `name`).
    pub fn needs_meta(self) -> bool {
        self != Field::Name
    }
}

/// One sort key: a field and its direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// What to compare.
    pub field: Field,
    /// Largest first (`-` prefix in a spec).
    pub descending: bool,
}

/// Parse dwalk's sort spec: a comma list of field names, each optionally prefixed with `-` for
/// descending order (`-size,name`). An empty spec, an empty item or an unknown field is
/// [`Error::Invalid`] naming it.
pub fn parse_keys(spec: &str) -> Result<Vec<Key>> {
    spec.split(',')
        .map(|item| {
            let (descending, name) = match item.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, item),
            };
            if name.is_empty() {
                return Err(Error::Invalid(format!("empty sort field in '{spec}'")));
            }
            let field = Field::ALL
                .into_iter()
                .find(|f| f.as_str() == name)
                .ok_or_else(|| {
                    Error::Invalid(format!(
                    "unknown sort field '{name}' (expected name, user, group, uid, gid, atime, \
                     mtime, ctime or size)"
                ))
                })?;
            Ok(Key { field, descending })
        })
        .collect()
}

/// Samples gathered on every rank, at most (about 50 MB of typical records).
const SAMPLE_BUDGET: usize = 1 << 18;

/// Sort the records of all ranks by `keys` (see the [module](self) for the total order).
/// Collective. Returns [`Error::Invalid`], on every rank and before any communication, when a
/// key needs metadata and the list is lite. The id tables must be the same on every rank (as
/// walks and list reads make them) for `user`/`group` keys.
///
/// Algorithm (sample sort): local parallel sort; `s` regular samples per rank, weighted by the
/// records they stand for (`s = max(size, 256)` capped so that all ranks together send at
/// most 2^18 samples), gathered on every rank; `size - 1` splitters at weighted quantiles;
/// one `alltoallv` of the partitions; a local merge; [`spread`] to even counts.
pub fn sort(comm: &dyn Comm, list: FileList, keys: &[Key]) -> Result<FileList> {
    check_keys(list.detail(), keys)?;
    let (users, groups) = (list.users.clone(), list.groups.clone());
    let order = Order::new(keys, &users, &groups);
    let sorted = local_sort(&list, &order);
    drop(list);
    let size = comm.size();
    if size == 1 {
        return Ok(sorted);
    }
    let me = comm.rank();

    // Regular samples of the sorted local run, each weighted by the records up to the next.
    let per_rank = (SAMPLE_BUDGET / size).clamp(1, size.max(256));
    let s = per_rank.min(sorted.len());
    let pos: Vec<usize> = (0..=s).map(|i| i * sorted.len() / s.max(1)).collect();
    // The weights (steal's typed encoding), then the records (the list's own format).
    let weights: Vec<u64> = pos.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
    let mut mine = steal::typed::encode(&weights);
    for &p in &pos[..s] {
        sorted.encode_record(p, &mut mine);
    }
    let gathered = comm.allgatherv(&mine);
    drop(mine);
    let mut samples = sorted.empty_like();
    let mut weights: Vec<u64> = Vec::new();
    for bytes in &gathered {
        let (w, records) = steal::typed::decode_prefix::<Vec<u64>>(bytes)
            .unwrap_or_else(|e| panic!("sort samples: {e}"));
        weights.extend(w);
        samples.decode_records(records);
    }
    drop(gathered);
    let splitters = splitters(&samples, &weights, &order, size);

    // Bucket b of the local run: records from cuts[b] to cuts[b + 1].
    let mut cuts = Vec::with_capacity(size + 1);
    cuts.push(0);
    for sp in &splitters {
        let from = *cuts.last().expect("cuts start at 0");
        let cut = match sp {
            None => sorted.len(),
            Some(sp) => {
                let pivot = At::new(&samples, *sp);
                lower_bound(from, sorted.len(), |i| {
                    order.cmp(At::new(&sorted, i), pivot) == Ordering::Less
                })
            }
        };
        cuts.push(cut);
    }
    cuts.push(sorted.len());
    drop(samples);

    let mut sends = vec![Vec::new(); size];
    for (b, buf) in sends.iter_mut().enumerate() {
        if b != me {
            for i in cuts[b]..cuts[b + 1] {
                sorted.encode_record(i, buf);
            }
        }
    }
    let got = comm.alltoallv(sends);
    let mut merged = sorted.empty_like();
    for (src, bytes) in got.iter().enumerate() {
        if src == me {
            for i in cuts[me]..cuts[me + 1] {
                merged.push_from(&sorted, i);
            }
        } else {
            merged.decode_records(bytes);
        }
    }
    drop(got);
    drop(sorted);
    // `merged` is `size` sorted runs; the stable merge sort finds and merges them.
    let mut items = items_of(&merged);
    items.par_sort_by(|a, b| order.cmp(a.at(&merged), b.at(&merged)));
    let merged = merged.select(items.iter().map(|it| it.1));
    drop(items);
    Ok(spread(comm, merged))
}

/// The `size - 1` splitters of a sample sort over `size` ranks, as indices into `samples`:
/// `splitters[k - 1]` is the first sample (in `order`) whose weighted rank reaches
/// `k * total / size` (`None`: past the end, the bucket gets nothing). `weights[i]` is the
/// records sample `i` stands for. The same samples give the same splitters on every rank.
pub(crate) fn splitters(
    samples: &FileList,
    weights: &[u64],
    order: &Order<'_>,
    size: usize,
) -> Vec<Option<usize>> {
    // Same input, same deterministic stable sort: every rank gets the same splitters.
    let mut idx: Vec<usize> = (0..samples.len()).collect();
    idx.sort_by(|&a, &b| order.cmp(At::new(samples, a), At::new(samples, b)));
    let total: u128 = weights.iter().map(|&w| w as u128).sum();
    let mut splitters: Vec<Option<usize>> = Vec::with_capacity(size.saturating_sub(1));
    let (mut j, mut before) = (0usize, 0u128);
    for k in 1..size {
        let target = k as u128 * total / size as u128;
        while j < idx.len() && before < target {
            before += weights[idx[j]] as u128;
            j += 1;
        }
        splitters.push(idx.get(j).copied());
    }
    splitters
}

/// [`Error::Invalid`] when a key needs metadata that a list of `detail` lacks.
pub(crate) fn check_keys(detail: Detail, keys: &[Key]) -> Result<()> {
    if detail == Detail::Lite {
        if let Some(k) = keys.iter().find(|k| k.field.needs_meta()) {
            return Err(Error::Invalid(format!(
                "cannot sort by {}: the list has no metadata (lite walk or text list)",
                k.field.as_str()
            )));
        }
    }
    Ok(())
}

/// The first `i` in `lo..hi` for which `below(i)` is false (`below` is true then false).
fn lower_bound(mut lo: usize, mut hi: usize, below: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// This rank's records in sorted order (a new list).
fn local_sort(list: &FileList, order: &Order<'_>) -> FileList {
    let mut items = items_of(list);
    items.par_sort_unstable_by(|a, b| order.cmp(a.at(list), b.at(list)));
    list.select(items.iter().map(|it| it.1))
}

/// What the sorts move: a record's path (read without going through the offsets column on
/// every comparison) and its index.
pub(crate) struct Item<'a>(&'a [u8], usize);

impl<'a> Item<'a> {
    /// The index of the record in its list.
    pub(crate) fn index(&self) -> usize {
        self.1
    }

    pub(crate) fn at(&self, list: &'a FileList) -> At<'a> {
        At {
            path: self.0,
            list,
            i: self.1,
        }
    }
}

pub(crate) fn items_of(list: &FileList) -> Vec<Item<'_>> {
    (0..list.len()).map(|i| Item(list.path(i), i)).collect()
}

/// A record being compared; its type and metadata are read only when a key needs them.
#[derive(Clone, Copy)]
pub(crate) struct At<'a> {
    path: &'a [u8],
    list: &'a FileList,
    i: usize,
}

impl<'a> At<'a> {
    pub(crate) fn new(list: &'a FileList, i: usize) -> At<'a> {
        At {
            path: list.path(i),
            list,
            i,
        }
    }

    fn meta(&self) -> Option<Meta> {
        self.list.meta(self.i)
    }
}

/// The total order of records for a key list.
pub(crate) struct Order<'a> {
    keys: &'a [Key],
    users: HashMap<u64, &'a [u8]>,
    groups: HashMap<u64, &'a [u8]>,
}

/// A user or group name: from the table, or the id as decimal text.
enum Name<'a> {
    Known(&'a [u8]),
    Number([u8; 20], usize),
}

impl Name<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Name::Known(b) => b,
            Name::Number(buf, start) => &buf[*start..],
        }
    }
}

fn lookup<'a>(table: &HashMap<u64, &'a [u8]>, id: u64) -> Name<'a> {
    match table.get(&id) {
        Some(n) => Name::Known(n),
        None => {
            let mut buf = [0u8; 20];
            let mut start = buf.len();
            let mut v = id;
            loop {
                start -= 1;
                buf[start] = b'0' + (v % 10) as u8;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            Name::Number(buf, start)
        }
    }
}

/// Id to name, first entry winning as in [`IdTable::name_of`].
fn name_map(table: &IdTable) -> HashMap<u64, &[u8]> {
    let mut map = HashMap::with_capacity(table.entries.len());
    for (name, id) in &table.entries {
        map.entry(*id).or_insert(name.as_slice());
    }
    map
}

impl<'a> Order<'a> {
    pub(crate) fn new(keys: &'a [Key], users: &'a IdTable, groups: &'a IdTable) -> Order<'a> {
        let needs = |f: Field| keys.iter().any(|k| k.field == f);
        Order {
            keys,
            users: if needs(Field::User) {
                name_map(users)
            } else {
                HashMap::new()
            },
            groups: if needs(Field::Group) {
                name_map(groups)
            } else {
                HashMap::new()
            },
        }
    }

    pub(crate) fn cmp(&self, a: At<'_>, b: At<'_>) -> Ordering {
        for k in self.keys {
            let o = self.cmp_field(k.field, a, b);
            let o = if k.descending { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        a.path
            .cmp(b.path)
            .then_with(|| (a.list.kind(a.i) as u8).cmp(&(b.list.kind(b.i) as u8)))
            .then_with(|| match (a.meta(), b.meta()) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => Ordering::Equal,
            })
    }

    fn cmp_field(&self, f: Field, a: At<'_>, b: At<'_>) -> Ordering {
        if f == Field::Name {
            return a.path.cmp(b.path);
        }
        // `sort` refused lite lists for these fields.
        let (x, y) = (a.meta().expect("stat list"), b.meta().expect("stat list"));
        match f {
            Field::Name => Ordering::Equal,
            Field::User => {
                if x.uid == y.uid {
                    Ordering::Equal
                } else {
                    let (n, m) = (
                        lookup(&self.users, x.uid as u64),
                        lookup(&self.users, y.uid as u64),
                    );
                    n.bytes().cmp(m.bytes())
                }
            }
            Field::Group => {
                if x.gid == y.gid {
                    Ordering::Equal
                } else {
                    let (n, m) = (
                        lookup(&self.groups, x.gid as u64),
                        lookup(&self.groups, y.gid as u64),
                    );
                    n.bytes().cmp(m.bytes())
                }
            }
            Field::Uid => x.uid.cmp(&y.uid),
            Field::Gid => x.gid.cmp(&y.gid),
            Field::Atime => (x.atime, x.atime_nsec).cmp(&(y.atime, y.atime_nsec)),
            Field::Mtime => (x.mtime, x.mtime_nsec).cmp(&(y.mtime, y.mtime_nsec)),
            Field::Ctime => (x.ctime, x.ctime_nsec).cmp(&(y.ctime, y.ctime_nsec)),
            Field::Size => x.size.cmp(&y.size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dwalk_specs() {
        let k = parse_keys("-size,name").unwrap();
        assert_eq!(
            k,
            vec![
                Key {
                    field: Field::Size,
                    descending: true
                },
                Key {
                    field: Field::Name,
                    descending: false
                }
            ]
        );
        for f in Field::ALL {
            assert_eq!(parse_keys(f.as_str()).unwrap()[0].field, f);
        }
        let e = parse_keys("name,bogus").unwrap_err().to_string();
        assert!(e.contains("'bogus'"), "{e}");
        assert!(parse_keys("").is_err());
        assert!(parse_keys("name,").is_err());
        assert!(parse_keys("-").is_err());
        assert!(parse_keys("Size").is_err());
    }

    #[test]
    fn numbers_stand_for_missing_names() {
        let map = HashMap::new();
        assert_eq!(lookup(&map, 0).bytes(), b"0");
        assert_eq!(lookup(&map, 4_294_967_295).bytes(), b"4294967295");
        assert_eq!(lookup(&map, u64::MAX).bytes(), b"18446744073709551615");
    }
}
