//! What a run's result depends on, as named fields: a rerun continues only when every field is
//! equal, and otherwise says which one changed.

use flist::FileList;
use serde::{Deserialize, Serialize};
use steal::{Comm, CommExt};

/// The tool and the named inputs of a run (paths as given, options that change the result, the
/// digest of the list the work is planned from). Compared field by field on a rerun.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Inputs {
    /// The tool (`"tar -c"`, `"walk"`): a checkpoint of another tool is never used.
    pub(super) tool: String,
    /// `(name, encoded value)`, in the order the tool gave them.
    pub(super) fields: Vec<(String, serde_bytes::ByteBuf)>,
    /// The names of the fields given by [`Inputs::state`]: left out of the default
    /// checkpoint's name. Not recorded (a header read back has none): only the run's own
    /// inputs name a checkpoint.
    #[serde(skip)]
    states: Vec<String>,
}

/// Equal when the tool and every field are (what a header records).
impl PartialEq for Inputs {
    fn eq(&self, other: &Inputs) -> bool {
        self.tool == other.tool && self.fields == other.fields
    }
}

impl Eq for Inputs {}

impl Inputs {
    /// The inputs of a run of `tool`, with no field yet.
    pub fn new(tool: &str) -> Inputs {
        Inputs {
            tool: tool.to_string(),
            fields: Vec::new(),
            states: Vec::new(),
        }
    }

    /// Add the field `name` (what a notice calls it: `"the sources"`, `"--blocksize"`) with
    /// `value`, encoded with the typed encoding of rank messages: something that says which
    /// job this is (the paths as given, an option, a command to run), so it is also part of
    /// the default checkpoint's name ([`Plan::output`](super::Plan) `None`): a run with
    /// another value is another job, with a checkpoint of its own, and neither discards the
    /// other's marks.
    #[must_use]
    pub fn field(mut self, name: &str, value: &(impl Serialize + ?Sized)) -> Inputs {
        self.fields.push((
            name.to_string(),
            serde_bytes::ByteBuf::from(steal::typed::encode(value)),
        ));
        self
    }

    /// Add the field `name` with `value`, as [`Inputs::field`], for the state of the inputs
    /// rather than the job: the identity of a source file (device, inode, size, times), the
    /// digest of a listing, a hash of a file's contents. Compared as every field, but not
    /// part of the default checkpoint's name: the same job on inputs that changed finds its
    /// checkpoint, and starts over saying what changed (instead of a new checkpoint, the old
    /// one left behind).
    #[must_use]
    pub fn state(mut self, name: &str, value: &(impl Serialize + ?Sized)) -> Inputs {
        self.states.push(name.to_string());
        self.field(name, value)
    }

    /// Why a checkpoint made for `earlier` cannot continue a run with these inputs (`None`: it
    /// can): the tool, or the first field that differs, is named.
    pub(super) fn differs_from(&self, earlier: &Inputs) -> Option<String> {
        if self.tool != earlier.tool {
            return Some(format!("it was made by '{}'", earlier.tool));
        }
        for (name, value) in &self.fields {
            match earlier.fields.iter().find(|(n, _)| n == name) {
                None => return Some(format!("it does not record {name}")),
                Some((_, v)) if v != value => return Some(format!("{name} changed")),
                Some(_) => {}
            }
        }
        if earlier.fields.len() != self.fields.len() {
            return Some("it records other inputs".to_string());
        }
        None
    }

    /// A short name for the default checkpoint of a run without an output file: the tool and
    /// a digest of the working directory and of every field that names the job (each
    /// [`Inputs::field`], name and value; not those of [`Inputs::state`]), so that two runs on
    /// other paths or with other options or commands (`find --exec A ;`, `find --exec B ;`)
    /// get checkpoints of their own, and a rerun whose inputs changed finds, and replaces,
    /// the same one.
    pub(super) fn short_name(&self, cwd: &[u8]) -> String {
        let mut named = Vec::new();
        named.extend_from_slice(&(cwd.len() as u64).to_le_bytes());
        named.extend_from_slice(cwd);
        for (name, value) in &self.fields {
            if self.states.contains(name) {
                continue;
            }
            // Lengths first: two splits of the same bytes never hash alike.
            for part in [name.as_bytes(), value.as_slice()] {
                named.extend_from_slice(&(part.len() as u64).to_le_bytes());
                named.extend_from_slice(part);
            }
        }
        let digest = xxhash_rust::xxh64::xxh64(&named, 0);
        let tool: String = self
            .tool
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        format!("{tool}-{digest:016x}")
    }
}

/// The digest of a distributed list: every record's path, type, mode, size, mtime and ctime
/// (seconds and nanoseconds), device and inode, summed over records and ranks, so that it is
/// the same whatever the order of the records and however many ranks hold them. 16 bytes.
/// Collective.
pub fn list_digest(comm: &dyn Comm, list: &FileList) -> [u8; 16] {
    digest_of_sums(comm, record_sums(list), list.len() as u64)
}

/// This rank's part of [`list_digest`] for `list`: the sums of its records, to be added
/// (wrapping) to those of the other pieces of a list read a piece at a time.
pub fn record_sums(list: &FileList) -> [u64; 2] {
    let mut sum = [0u64; 2];
    let mut bytes = Vec::new();
    for i in 0..list.len() {
        add_record_sum(&mut sum, list, i, &mut bytes);
    }
    sum
}

/// Add record `i` of `list` to the sums `sum` of [`record_sums`] (`bytes`: a buffer reused
/// from record to record), for records read one at a time (a walk's spilled runs).
pub fn add_record_sum(sum: &mut [u64; 2], list: &FileList, i: usize, bytes: &mut Vec<u8>) {
    bytes.clear();
    let path = list.path(i);
    bytes.extend_from_slice(&(path.len() as u64).to_le_bytes());
    bytes.extend_from_slice(path);
    bytes.push(list.kind(i) as u8);
    if let Some(m) = list.meta(i) {
        for v in [
            u64::from(m.mode),
            m.size,
            m.mtime as u64,
            u64::from(m.mtime_nsec),
            m.ctime as u64,
            u64::from(m.ctime_nsec),
            m.dev,
            m.ino,
        ] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    sum[0] = sum[0].wrapping_add(xxhash_rust::xxh64::xxh64(bytes, 0x6d66_752d_7273_0001));
    sum[1] = sum[1].wrapping_add(xxhash_rust::xxh64::xxh64(bytes, 0x6d66_752d_7273_0002));
}

/// [`list_digest`] from every rank's [`record_sums`] `sum` of its `records`. Collective.
pub fn digest_of_sums(comm: &dyn Comm, sum: [u64; 2], records: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    let count = comm.sum(records);
    let all = comm.all_gather(&sum);
    let total = all.iter().fold([0u64; 2], |a, s| {
        [a[0].wrapping_add(s[0]), a[1].wrapping_add(s[1])]
    });
    out[..8].copy_from_slice(&total[0].wrapping_add(count).to_le_bytes());
    out[8..].copy_from_slice(&total[1].to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::FileType;

    fn meta(size: u64, ctime: i64) -> flist::Meta {
        flist::Meta {
            mode: 0o100644,
            uid: 0,
            gid: 0,
            atime_nsec: 0,
            mtime_nsec: 0,
            ctime_nsec: 0,
            atime: 0,
            mtime: 1,
            ctime,
            size,
            nlink: 1,
            ino: 7,
            dev: 1,
        }
    }

    #[test]
    fn the_digest_ignores_order_and_rank_count_and_sees_every_identity_field() {
        let names: Vec<Vec<u8>> = (0..30).map(|i| format!("/t/f{i}").into_bytes()).collect();
        let one = |ranks: usize, changed: Option<(usize, flist::Meta)>| {
            let names = names.clone();
            let got = steal::local::run(ranks, move |comm| {
                let mut l = FileList::new(flist::Detail::Stat);
                for (i, n) in names.iter().enumerate().rev() {
                    if i % comm.size() == comm.rank() {
                        let m = match changed {
                            Some((j, m)) if j == i => m,
                            _ => meta(i as u64, 5),
                        };
                        l.push(n, FileType::File, Some(m));
                    }
                }
                list_digest(comm, &l)
            });
            assert!(got.windows(2).all(|w| w[0] == w[1]));
            got[0]
        };
        let base = one(1, None);
        assert_eq!(one(3, None), base);
        assert_eq!(one(4, None), base);
        assert_ne!(one(2, Some((4, meta(4, 6)))), base, "a ctime moved");
        assert_ne!(one(2, Some((4, meta(5, 5)))), base, "a size changed");
    }

    /// Defect: the default checkpoint's name hashed the first field only (the paths), so
    /// `find /d --exec A ;` and `find /d --exec B ;` shared one checkpoint and each discarded
    /// the other's marks. Every field that names the job is in the name; the state of the
    /// inputs is not (a changed source is the same job, found and started over with a notice).
    #[test]
    fn the_default_name_depends_on_every_job_field_and_not_on_the_inputs_state() {
        let find = |command: &str, digest: u8| {
            Inputs::new("find --exec")
                .field("paths", &b"/d".to_vec())
                .field("expression", command)
                .state("the listing", &[digest; 16])
                .field("maxdepth", &Some(3u32))
        };
        let a = find("-exec A ;", 1);
        assert_eq!(a.short_name(b"/w"), find("-exec A ;", 1).short_name(b"/w"));
        assert_ne!(a.short_name(b"/w"), find("-exec B ;", 1).short_name(b"/w"));
        assert_ne!(
            a.short_name(b"/w"),
            a.short_name(b"/v"),
            "another directory"
        );
        assert!(a.short_name(b"/w").starts_with("find---exec-"));
        // The inputs changed: the same checkpoint, which tells what changed.
        let changed = find("-exec A ;", 2);
        assert_eq!(a.short_name(b"/w"), changed.short_name(b"/w"));
        assert_eq!(
            changed.differs_from(&a).as_deref(),
            Some("the listing changed")
        );
        // A later field counts as much as the first.
        let deeper = Inputs::new("find --exec")
            .field("paths", &b"/d".to_vec())
            .field("expression", "-exec A ;")
            .state("the listing", &[1u8; 16])
            .field("maxdepth", &Some(4u32));
        assert_ne!(a.short_name(b"/w"), deeper.short_name(b"/w"));
        // A header read back (no record of which fields are states) equals the run's inputs.
        let back: Inputs = steal::typed::decode(&steal::typed::encode(&a)).unwrap();
        assert_eq!(back, a);
        assert_eq!(a.differs_from(&back), None);
    }

    #[test]
    fn a_changed_field_is_named() {
        let a = Inputs::new("cmp")
            .field("the sources", &b"/a".to_vec())
            .field("--chunk", &4u64);
        let b = Inputs::new("cmp")
            .field("the sources", &b"/a".to_vec())
            .field("--chunk", &8u64);
        assert_eq!(a.differs_from(&a.clone()), None);
        assert_eq!(b.differs_from(&a).as_deref(), Some("--chunk changed"));
        let c = Inputs::new("dup")
            .field("the sources", &b"/a".to_vec())
            .field("--chunk", &4u64);
        assert_eq!(c.differs_from(&a).as_deref(), Some("it was made by 'cmp'"));
    }
}
