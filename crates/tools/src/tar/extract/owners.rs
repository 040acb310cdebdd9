//! Owners of extracted entries, by name as GNU tar gives them: an entry's user (group) name,
//! when this system knows it, gives its uid (gid); an empty or unknown name, or
//! `--numeric-owner`, leaves the archived number. Each name is looked up once per rank
//! (`getpwnam_r`/`getgrnam_r`); archives hold few distinct names.

use crate::engine::ids::{group_id, user_id};
use crate::tar::format::Header;
use std::collections::HashMap;
use std::ffi::CString;

/// The names looked up so far on this rank, and what they gave.
#[derive(Debug, Default)]
pub(super) struct Owners {
    users: HashMap<Vec<u8>, Option<u32>>,
    groups: HashMap<Vec<u8>, Option<u32>>,
}

impl Owners {
    /// Replace `h`'s uid and gid by those its uname and gname have here, where they have one.
    pub fn resolve(&mut self, h: &mut Header) {
        if let Some(uid) = look_up(&mut self.users, &h.uname, user_id) {
            h.uid = u64::from(uid);
        }
        if let Some(gid) = look_up(&mut self.groups, &h.gname, group_id) {
            h.gid = u64::from(gid);
        }
    }
}

/// The id of `name` in `cache`, asking `ask` the first time; `None` for an empty name, one
/// this system does not know, or a failed look-up (the archived number is used, as GNU tar
/// does).
fn look_up(
    cache: &mut HashMap<Vec<u8>, Option<u32>>,
    name: &[u8],
    ask: fn(&std::ffi::CStr) -> std::io::Result<Option<u32>>,
) -> Option<u32> {
    if name.is_empty() {
        return None;
    }
    if let Some(&id) = cache.get(name) {
        return id;
    }
    let id = CString::new(name).ok().and_then(|c| ask(&c).ok().flatten());
    cache.insert(name.to_vec(), id);
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::format::Kind;

    #[test]
    fn known_names_give_their_ids_unknown_and_empty_ones_keep_the_numbers() {
        let mut h = Header {
            path: b"f".to_vec(),
            kind: Kind::File,
            mode: 0o644,
            uid: 4321,
            gid: 4322,
            uname: b"root".to_vec(),
            gname: b"no-such-group-mfu-test".to_vec(),
            size: 0,
            mtime: 0,
            mtime_nsec: 0,
            link: Vec::new(),
            dev_major: 0,
            dev_minor: 0,
            xattrs: Vec::new(),
            projid: Default::default(),
        };
        let mut owners = Owners::default();
        owners.resolve(&mut h);
        assert_eq!((h.uid, h.gid), (0, 4322));
        h.uname.clear();
        h.uid = 77;
        owners.resolve(&mut h);
        assert_eq!(h.uid, 77, "an empty name keeps the number");
        assert_eq!(owners.users.len(), 1, "asked once for root");
    }
}
