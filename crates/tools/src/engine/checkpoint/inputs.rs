//! What a run's result depends on, as named fields: a rerun continues only when every field is
//! equal, and otherwise says which one changed.

use flist::FileList;
use serde::{Deserialize, Serialize};
use steal::{Comm, CommExt};

/// The tool and the named inputs of a run (paths as given, options that change the result, the
/// digest of the list the work is planned from). Compared field by field on a rerun.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inputs {
    /// The tool (`"tar -c"`, `"walk"`): a checkpoint of another tool is never used.
    pub(super) tool: String,
    /// `(name, encoded value)`, in the order the tool gave them.
    pub(super) fields: Vec<(String, serde_bytes::ByteBuf)>,
}

impl Inputs {
    /// The inputs of a run of `tool`, with no field yet.
    pub fn new(tool: &str) -> Inputs {
        Inputs {
            tool: tool.to_string(),
            fields: Vec::new(),
        }
    }

    /// Add the field `name` (what a notice calls it: `"the sources"`, `"--blocksize"`) with
    /// `value`, encoded with the typed encoding of rank messages.
    #[must_use]
    pub fn field(mut self, name: &str, value: &(impl Serialize + ?Sized)) -> Inputs {
        self.fields.push((
            name.to_string(),
            serde_bytes::ByteBuf::from(steal::typed::encode(value)),
        ));
        self
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

    /// A short name for the default checkpoint of a run without an output file: the tool and a
    /// digest of its first field (the paths it works on), so that a run on other paths gets
    /// another checkpoint and a changed option finds, and replaces, the same one.
    pub(super) fn short_name(&self, cwd: &[u8]) -> String {
        let first = self
            .fields
            .first()
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[]);
        let digest = xxhash_rust::xxh64::xxh64(&[cwd, b"\0", first].concat(), 0);
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
    let mut sum = [0u64; 2];
    let mut bytes = Vec::new();
    for i in 0..list.len() {
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
        sum[0] = sum[0].wrapping_add(xxhash_rust::xxh64::xxh64(&bytes, 0x6d66_752d_7273_0001));
        sum[1] = sum[1].wrapping_add(xxhash_rust::xxh64::xxh64(&bytes, 0x6d66_752d_7273_0002));
    }
    let mut out = [0u8; 16];
    let count = comm.sum(list.len() as u64);
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
