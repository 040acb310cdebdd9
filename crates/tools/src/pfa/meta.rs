//! What `pfa pack` keeps in a stream's meta bytes, so that `pfa unpack` gives each entry back
//! as it was: its kind, permission bits, owner and modification time.
//!
//! Encoding (29 bytes, little-endian), versioned by its first four bytes:
//!
//! | bytes | field                                                        |
//! |-------|--------------------------------------------------------------|
//! | 0..4  | `b"mfu1"`: this encoding, version 1                          |
//! | 4     | kind: `b'f'` regular file, `b'd'` directory, `b'l'` symlink |
//! | 5..9  | `st_mode` (u32, type bits included)                          |
//! | 9..13 | uid (u32)                                                    |
//! | 13..17| gid (u32)                                                    |
//! | 17..25| mtime, seconds since the epoch (i64)                         |
//! | 25..29| mtime, nanoseconds (u32)                                     |
//!
//! A directory is a stream with no data named by its path; a symbolic link's data is its
//! target. Meta bytes that are not this encoding (a stream written by the library or from
//! Python with meta of its own) mean a regular file with no recorded metadata: `unpack`
//! makes it mode 0666 less the umask, with the time of the unpack.

/// The first bytes of pack's meta: this encoding, version 1.
pub const MAGIC: &[u8; 4] = b"mfu1";
/// Bytes of an encoded [`EntryMeta`].
pub const LEN: usize = 29;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A regular file: the stream's data is its content.
    File,
    /// A directory: the stream has no data.
    Dir,
    /// A symbolic link: the stream's data is its target.
    Symlink,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::File => b'f',
            Kind::Dir => b'd',
            Kind::Symlink => b'l',
        }
    }

    /// The letter `pfa ls` shows (`f`, `d`, `l`).
    pub fn letter(self) -> char {
        self.byte() as char
    }
}

/// An entry's kind and metadata as `pack` recorded them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EntryMeta {
    /// What the entry is.
    pub kind: Kind,
    /// `st_mode` (type bits included).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// Modification time, nanoseconds.
    pub mtime_nsec: u32,
}

impl EntryMeta {
    /// The meta of an entry of `kind` with the status `st`.
    pub fn of(kind: Kind, st: &flist::Meta) -> EntryMeta {
        EntryMeta {
            kind,
            mode: st.mode,
            uid: st.uid,
            gid: st.gid,
            mtime: st.mtime,
            mtime_nsec: st.mtime_nsec,
        }
    }

    /// The [`LEN`] bytes of the encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(LEN);
        out.extend_from_slice(MAGIC);
        out.push(self.kind.byte());
        out.extend_from_slice(&self.mode.to_le_bytes());
        out.extend_from_slice(&self.uid.to_le_bytes());
        out.extend_from_slice(&self.gid.to_le_bytes());
        out.extend_from_slice(&self.mtime.to_le_bytes());
        out.extend_from_slice(&self.mtime_nsec.to_le_bytes());
        out
    }

    /// The meta `bytes` encode, or `None` when they are not pack's encoding.
    pub fn decode(bytes: &[u8]) -> Option<EntryMeta> {
        if bytes.len() != LEN || &bytes[..4] != MAGIC {
            return None;
        }
        let kind = match bytes[4] {
            b'f' => Kind::File,
            b'd' => Kind::Dir,
            b'l' => Kind::Symlink,
            _ => return None,
        };
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        Some(EntryMeta {
            kind,
            mode: u32_at(5),
            uid: u32_at(9),
            gid: u32_at(13),
            mtime: i64::from_le_bytes(bytes[17..25].try_into().expect("8 bytes")),
            mtime_nsec: u32_at(25),
        })
    }
}

/// The kind of a stream with meta `bytes`: a regular file unless pack recorded otherwise.
pub fn kind_of(bytes: &[u8]) -> Kind {
    EntryMeta::decode(bytes).map_or(Kind::File, |m| m.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_and_foreign_meta_is_a_plain_file() {
        let m = EntryMeta {
            kind: Kind::Symlink,
            mode: 0o120777,
            uid: 1000,
            gid: 100,
            mtime: -5,
            mtime_nsec: 999_999_999,
        };
        let bytes = m.encode();
        assert_eq!(bytes.len(), LEN);
        assert_eq!(EntryMeta::decode(&bytes), Some(m));
        assert_eq!(kind_of(&bytes), Kind::Symlink);
        assert_eq!(EntryMeta::decode(b""), None);
        assert_eq!(kind_of(b"python's own meta"), Kind::File);
        let mut bad = bytes.clone();
        bad[4] = b'x';
        assert_eq!(EntryMeta::decode(&bad), None);
    }
}
