//! pax global headers (`g`): the records that apply to every later entry, folded as POSIX
//! says, and carried between ranks (each rank meets the ones of its stretch of the archive).
//! Kept from the crate: its `Archive` applies no global header and has no notion of ranks.

use serde::{Deserialize, Serialize};

/// One pax record: keyword and value (bytes).
pub type Record = (Vec<u8>, Vec<u8>);

/// The records of one pax global header (`g`) that apply to the entries after it, and the
/// offset (bytes) from which they apply: the block after the header's data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Global {
    /// Offset of the first block after the global header (bytes).
    pub from: u64,
    /// Its records that apply to later entries ([`global_records`]).
    pub records: Vec<Record>,
}

/// Keep the records of a global header that apply to the entries after it: owner, group,
/// their names, mtime and xattrs (`SCHILY.xattr.*`). `path`, `linkpath`, `size` and
/// `GNU.sparse.*` describe one entry (its name, its place in the stream), never every entry,
/// and are dropped: a global `size` would make the chain of headers depend on state that
/// a decoder started at an arbitrary offset cannot see, and a global `path` would give every
/// entry the same name. (GNU tar and Python's tarfile apply those too; no archiver writes
/// them.)
pub fn global_records(records: Vec<Record>) -> Vec<Record> {
    records
        .into_iter()
        .filter(|(k, _)| {
            matches!(&k[..], b"uid" | b"gid" | b"uname" | b"gname" | b"mtime")
                || k.starts_with(b"SCHILY.xattr.")
        })
        .collect()
}

/// Fold the records of a later global header into `state` (POSIX: a record replaces the one
/// of the same keyword, the others stay; an empty value is kept and removes the value when
/// applied).
pub(super) fn fold_globals(state: &mut Vec<Record>, records: &[Record]) {
    for (k, v) in records {
        match state.iter_mut().find(|(sk, _)| sk == k) {
            Some(slot) => slot.1 = v.clone(),
            None => state.push((k.clone(), v.clone())),
        }
    }
}

/// The pax global headers of an archive as the entries see them: the records in effect from
/// each global header on, each state the fold of every global header before it (POSIX; GNU
/// tar 1.34 lets each global header replace the records of the ones before instead, bsdtar
/// ignores them). Small: one state per global header, and archives have one at most, at
/// their start (GNU tar's `--pax-option`, Python's `pax_headers=`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Globals {
    /// `(from, records in effect from there)`, by increasing `from`.
    states: Vec<(u64, Vec<Record>)>,
}

impl Globals {
    /// Add the global header `g`, which lies after every one added before.
    pub fn push(&mut self, g: Global) {
        let mut state = self.states.last().map(|s| s.1.clone()).unwrap_or_default();
        fold_globals(&mut state, &g.records);
        self.states.push((g.from, state));
    }

    /// The globals of a list of global headers in any order, duplicates (the same header
    /// seen twice) once.
    pub fn from_list(mut list: Vec<Global>) -> Globals {
        list.sort_by_key(|g| g.from);
        list.dedup_by_key(|g| g.from);
        let mut globals = Globals::default();
        for g in list {
            globals.push(g);
        }
        globals
    }

    /// The records in effect for an entry whose first header block is at `offset` (bytes).
    pub fn at(&self, offset: u64) -> &[Record] {
        match self.states.partition_point(|s| s.0 <= offset) {
            0 => &[],
            i => &self.states[i - 1].1,
        }
    }

    /// Append to `out` in the form [`Globals::decode`] reads (a typed rank message).
    pub fn encode(&self, out: &mut Vec<u8>) {
        steal::typed::encode_into(self, out);
    }

    /// What [`Globals::encode`] wrote (bytes from another rank of this program: anything
    /// else is a bug and panics).
    pub fn decode(bytes: &[u8]) -> Globals {
        steal::typed::sent(steal::typed::decode(bytes))
    }
}

/// Append `(from, records)` pairs to `out` as [`decode_list`] reads them (one typed rank
/// message: a list of [`Global`]).
pub fn encode_list<'a>(list: impl Iterator<Item = (u64, &'a [Record])>, out: &mut Vec<u8>) {
    // A `Global` borrowed: the same encoding as `Global` (postcard encodes a struct as the
    // tuple of its fields).
    #[derive(Serialize)]
    struct GlobalRef<'a> {
        from: u64,
        records: &'a [Record],
    }
    let list: Vec<GlobalRef<'_>> = list
        .map(|(from, records)| GlobalRef { from, records })
        .collect();
    steal::typed::encode_into(&list, out);
}

/// The global headers [`encode_list`] wrote (bytes from another rank of this program:
/// anything else is a bug and panics).
pub fn decode_list(bytes: &[u8]) -> Vec<Global> {
    steal::typed::sent(steal::typed::decode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The global headers travel between ranks as typed messages: every list round-trips
    /// (binary keys and values, empty records, several ranks' lists one after another), and
    /// garbage or a cut message is an error of the decoder, never a panic.
    #[test]
    fn global_lists_round_trip_and_garbage_is_an_error() {
        let lists: Vec<Vec<Global>> = vec![
            Vec::new(),
            vec![Global {
                from: 1536,
                records: vec![(b"uid".to_vec(), b"42".to_vec())],
            }],
            vec![
                Global {
                    from: 0,
                    records: Vec::new(),
                },
                Global {
                    from: u64::MAX,
                    records: vec![
                        (b"SCHILY.xattr.user.\xff".to_vec(), b"\0\n=\xfe".to_vec()),
                        (b"uname".to_vec(), Vec::new()),
                    ],
                },
            ],
        ];
        for list in &lists {
            let mut bytes = Vec::new();
            encode_list(list.iter().map(|g| (g.from, &g.records[..])), &mut bytes);
            assert_eq!(&decode_list(&bytes), list);
            let globals = Globals::from_list(list.clone());
            let mut wire = Vec::new();
            globals.encode(&mut wire);
            assert_eq!(Globals::decode(&wire), globals);
            for cut in 0..bytes.len() {
                assert!(steal::typed::decode::<Vec<Global>>(&bytes[..cut]).is_err());
            }
        }
        for garbage in [
            &b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"[..],
            b"\x05\x01",
            b"\x01",
        ] {
            assert!(steal::typed::decode::<Vec<Global>>(garbage).is_err());
            assert!(steal::typed::decode::<Globals>(garbage).is_err());
        }
    }
}
