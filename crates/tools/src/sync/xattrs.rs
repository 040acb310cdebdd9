//! `sync -X`: entries whose data and times are equal but whose extended attributes (ACLs among
//! them) differ from their source's get their attributes fixed, without a copy of their data,
//! as `rsync -X` does: the source's are set, and those the destination has beyond them are
//! removed. Files, directories and symlinks alike (Linux allows only `trusted.` and `security.`
//! attributes on symlinks; they are compared and fixed with the `l*xattr` calls, never
//! followed).
//!
//! Only with `-X POLICY` (not `none`), and only the attributes that POLICY copies: a plain sync
//! copies attributes with new data but does not compare them, so it costs no `listxattr`.
//! Compared, a pair costs a `listxattr` on each side (and a `getxattr` per attribute found);
//! the pairs are compared in parallel on each rank.

use crate::engine::copy::drive::IoOptions;
use crate::engine::copy::meta::{read_xattrs, MetaOptions, XattrPolicy};
use flist::record::Entry;
use flist::FileList;
use rayon::prelude::*;

/// How the attributes are compared, when they are: with `-X POLICY` other than `none`.
pub fn compared(io: &IoOptions) -> Option<MetaOptions> {
    match io.xattrs {
        Some(policy) if policy != XattrPolicy::None => Some(MetaOptions::new(true, policy)),
        _ => None,
    }
}

/// For each record of `list`, whether its attributes differ from those of its destination,
/// which `paired` gives for the records worth comparing (`None`: not compared, `false`).
/// Empty when `opts` is `None` (nothing compared). In parallel.
pub fn differing(
    list: &FileList,
    opts: Option<&MetaOptions>,
    paired: impl Fn(Entry<'_>) -> Option<Vec<u8>> + Sync,
) -> Vec<bool> {
    let Some(opts) = opts else {
        return Vec::new();
    };
    (0..list.len())
        .into_par_iter()
        .map(|i| {
            let e = list.entry(i);
            paired(e).is_some_and(|dst| differ(e.path, &dst, opts))
        })
        .collect()
}

/// Whether the attributes `opts` selects differ between `src` and `dst` (neither followed):
/// names and values, in any order. When either side can't be read they are taken to differ:
/// the fix then tries again and names what fails.
pub fn differ(src: &[u8], dst: &[u8], opts: &MetaOptions) -> bool {
    match (read_xattrs(src, opts), read_xattrs(dst, opts)) {
        (Ok(mut a), Ok(mut b)) => {
            a.sort_unstable();
            b.sort_unstable();
            a != b
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(path: &std::path::Path, name: &str, value: &[u8]) {
        rustix::fs::lsetxattr(path, name, value, rustix::fs::XattrFlags::empty()).unwrap();
    }

    #[test]
    fn attributes_differ_by_name_or_value_not_by_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"").unwrap();
        std::fs::write(&b, b"").unwrap();
        let opts = MetaOptions::new(true, XattrPolicy::All);
        let bytes = |p: &std::path::Path| p.as_os_str().as_encoded_bytes().to_vec();
        let (pa, pb) = (bytes(&a), bytes(&b));
        assert!(!differ(&pa, &pb, &opts), "none on either side");
        set(&a, "user.x", b"1");
        set(&a, "user.y", b"2");
        assert!(differ(&pa, &pb, &opts), "added on the source");
        set(&b, "user.y", b"2");
        set(&b, "user.x", b"1");
        assert!(!differ(&pa, &pb, &opts), "the same, set in another order");
        set(&b, "user.x", b"one");
        assert!(differ(&pa, &pb, &opts), "another value");
        set(&b, "user.x", b"1");
        set(&b, "user.z", b"");
        assert!(differ(&pa, &pb, &opts), "one more on the destination");
        let none = MetaOptions::new(true, XattrPolicy::None);
        assert!(
            !differ(&pa, &pb, &none),
            "a policy that copies none compares none"
        );
        assert!(differ(&pa, b"/nonexistent/x", &opts), "unreadable: differs");
    }
}
