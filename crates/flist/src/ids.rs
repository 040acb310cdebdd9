//! User and group tables: names for numeric ids, as v4 lists carry them.

use serde::{Deserialize, Serialize};
use std::ffi::CStr;
use std::sync::Mutex;

/// getpwent/getgrent keep one cursor per process: thread ranks must take turns.
static NSS_LOCK: Mutex<()> = Mutex::new(());

/// `(name, id)` pairs in the order of their source (the passwd/group database or a list file).
/// Travels between ranks with steal's typed collectives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdTable {
    /// The entries, in source order (v4 files are written in this order).
    #[serde(with = "steal::typed::byte_pairs")]
    pub entries: Vec<(Vec<u8>, u64)>,
}

impl IdTable {
    /// The name of `id`, if the table has it.
    pub fn name_of(&self, id: u64) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(_, i)| *i == id)
            .map(|(n, _)| n.as_slice())
    }

    /// The id named `name`, if the table has it.
    pub fn id_of(&self, name: &[u8]) -> Option<u64> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, i)| *i)
    }

    /// Every user of this machine's passwd database (through NSS), as mpiFileUtils writes them.
    /// Calls from several threads take turns (the libc cursor is process-wide).
    pub fn system_users() -> IdTable {
        let _guard = NSS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut entries = Vec::new();
        // SAFETY: setpwent/getpwent/endpwent are called in sequence on one thread; each record
        // is copied out before the next call.
        unsafe {
            libc::setpwent();
            loop {
                let p = libc::getpwent();
                if p.is_null() {
                    break;
                }
                entries.push((
                    CStr::from_ptr((*p).pw_name).to_bytes().to_vec(),
                    (*p).pw_uid as u64,
                ));
            }
            libc::endpwent();
        }
        IdTable { entries }
    }

    /// Every group of this machine's group database.
    pub fn system_groups() -> IdTable {
        let _guard = NSS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut entries = Vec::new();
        // SAFETY: as in `system_users`.
        unsafe {
            libc::setgrent();
            loop {
                let g = libc::getgrent();
                if g.is_null() {
                    break;
                }
                entries.push((
                    CStr::from_ptr((*g).gr_name).to_bytes().to_vec(),
                    (*g).gr_gid as u64,
                ));
            }
            libc::endgrent();
        }
        IdTable { entries }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_round_trip() {
        let t = IdTable {
            entries: vec![(b"a\xff".to_vec(), 7), (Vec::new(), 0)],
        };
        let b = steal::typed::encode(&t);
        assert_eq!(steal::decode::<IdTable>(&b).unwrap(), t);
        // Names as one length and a copy.
        assert_eq!(&b[..5], &[2, 2, b'a', 0xff, 7]);
        for n in 0..b.len() {
            assert!(steal::decode::<IdTable>(&b[..n]).is_err());
        }
    }

    #[test]
    fn system_tables_know_root() {
        assert_eq!(IdTable::system_users().name_of(0), Some(&b"root"[..]));
        assert_eq!(IdTable::system_groups().id_of(b"root"), Some(0));
    }
}
