//! One rank's entries as extraction keeps them: compact, so that a rank's memory stays near
//! its entries' count times a small fixed record plus their names (issue 17: 10^6 entries in
//! well under 150 MB on one rank).
//!
//! Every entry has a fixed 56-byte record ([`Rec`]) and its cleaned name in one arena; the
//! fields few entries have (link targets, xattrs, sparse maps, device numbers) are kept aside,
//! for those entries only ([`Rare`]). A decoded header (about 256 bytes with its owned strings)
//! lives only while a run of entries is decoded.

use crate::tar::format::{Decoded, Kind, ProjectId, Segment};

/// The fields of an entry that every phase of extraction uses (fixed size: 56 bytes).
#[derive(Clone, Copy, Debug)]
struct Rec {
    /// Offset of the entry's first header block (bytes).
    start: u64,
    /// Data bytes (a sparse file's real size).
    size: u64,
    /// Modification time, seconds since the epoch.
    mtime: i64,
    /// End of the entry's name in the arena (bytes).
    name_end: u64,
    /// Offset of the data from `start` (bytes); `u32::MAX` when it is kept in [`Rare::data`].
    data_from_start: u32,
    /// Nanoseconds of `mtime`.
    mtime_nsec: u32,
    /// Owner and group, as `chown` takes them (`uid_t`/`gid_t`: 32 bits on Linux).
    uid: u32,
    /// See `uid`.
    gid: u32,
    /// Permission and set-id/sticky bits.
    mode: u32,
    kind: Kind,
    /// Its header starts in this rank's part (otherwise only its data tail is ours).
    own: bool,
    /// It has a [`Rare`] record.
    rare: bool,
}

/// What few entries have, kept aside for those only.
#[derive(Debug, Default)]
struct Rare {
    /// Symlink or hard-link target.
    link: Vec<u8>,
    /// Extended attributes (name, value).
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// A sparse file's map (see [`Decoded::sparse`]).
    sparse: Option<Vec<Segment>>,
    /// Device numbers.
    dev_major: u32,
    /// See `dev_major`.
    dev_minor: u32,
    /// Project ID (and a directory's `PROJINHERIT`).
    projid: ProjectId,
    /// Offset of the data (bytes), when it is further than `u32::MAX` bytes from the start.
    data: u64,
    /// The name the entry is extracted under, when not its own (an earlier version of a name
    /// that a hard link keeps: see `superseded`).
    alias: Option<Vec<u8>>,
}

/// One entry, borrowed from [`Entries`]: what extraction needs of its header.
#[derive(Clone, Copy, Debug)]
pub(super) struct Item<'a> {
    /// Cleaned path relative to the target.
    pub rel: &'a [u8],
    /// Offset of the entry's first header block (bytes).
    pub start: u64,
    /// Offset of its data (bytes).
    pub data: u64,
    /// Data bytes (a sparse file's real size).
    pub size: u64,
    /// Modification time, seconds since the epoch, and its nanoseconds.
    pub mtime: i64,
    /// See `mtime`.
    pub mtime_nsec: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Permission and set-id/sticky bits.
    pub mode: u32,
    /// Entry type.
    pub kind: Kind,
    /// Its header starts in this rank's part (otherwise only its data tail is ours).
    pub own: bool,
    /// Symlink or hard-link target (empty otherwise).
    pub link: &'a [u8],
    /// Extended attributes.
    pub xattrs: &'a [(Vec<u8>, Vec<u8>)],
    /// A sparse file's map.
    pub sparse: Option<&'a [Segment]>,
    /// Device numbers.
    pub dev_major: u32,
    /// See `dev_major`.
    pub dev_minor: u32,
    /// Project ID (and a directory's `PROJINHERIT`); none when the archive has no record.
    pub projid: ProjectId,
}

/// A rank's entries, in archive order.
#[derive(Debug, Default)]
pub(super) struct Entries {
    recs: Vec<Rec>,
    /// Every entry's cleaned name, one after another.
    names: Vec<u8>,
    /// The rare fields, by entry index (in increasing order).
    rare: Vec<(usize, Rare)>,
}

impl Entries {
    /// Room for `n` entries.
    pub fn with_capacity(n: usize) -> Entries {
        Entries {
            recs: Vec::with_capacity(n),
            ..Entries::default()
        }
    }

    /// Keep the entry `d` under the cleaned name `rel`; `own` as [`Item::own`].
    pub fn push(&mut self, rel: &[u8], d: &Decoded, own: bool) {
        let h = &d.header;
        self.names.extend_from_slice(rel);
        let from_start = d.data - d.start;
        let far = from_start >= u64::from(u32::MAX);
        let rare = far
            || !h.link.is_empty()
            || !h.xattrs.is_empty()
            || d.sparse.is_some()
            || h.dev_major != 0
            || h.dev_minor != 0
            || !h.projid.is_none();
        if rare {
            self.rare.push((
                self.recs.len(),
                Rare {
                    link: h.link.clone(),
                    xattrs: h.xattrs.clone(),
                    sparse: d.sparse.clone(),
                    dev_major: h.dev_major,
                    dev_minor: h.dev_minor,
                    projid: h.projid,
                    data: d.data,
                    alias: None,
                },
            ));
        }
        self.recs.push(Rec {
            start: d.start,
            size: h.size,
            mtime: h.mtime,
            name_end: self.names.len() as u64,
            data_from_start: if far { u32::MAX } else { from_start as u32 },
            mtime_nsec: h.mtime_nsec,
            // As chown takes them (uid_t is 32 bits).
            uid: h.uid as u32,
            gid: h.gid as u32,
            mode: h.mode,
            kind: h.kind,
            own,
            rare,
        });
    }

    /// Give back the room not used.
    pub fn shrink_to_fit(&mut self) {
        self.recs.shrink_to_fit();
        self.names.shrink_to_fit();
        self.rare.shrink_to_fit();
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.recs.len()
    }

    /// The name of entry `i` (the one it is extracted under: see [`Entries::rename`]).
    pub fn rel(&self, i: usize) -> &[u8] {
        if let Some(alias) = self.rare_of(i).and_then(|x| x.alias.as_deref()) {
            return alias;
        }
        let from = if i == 0 {
            0
        } else {
            self.recs[i - 1].name_end as usize
        };
        &self.names[from..self.recs[i].name_end as usize]
    }

    /// Offset of entry `i`'s first header block (bytes).
    pub fn start(&self, i: usize) -> u64 {
        self.recs[i].start
    }

    /// The entry whose first header block is at `start`, if kept.
    pub fn find(&self, start: u64) -> Option<usize> {
        self.recs.binary_search_by_key(&start, |r| r.start).ok()
    }

    /// Entry `i`'s header starts in this rank's part.
    pub fn own(&self, i: usize) -> bool {
        self.recs[i].own
    }

    /// Entry `i`'s type.
    pub fn kind(&self, i: usize) -> Kind {
        self.recs[i].kind
    }

    /// Entry `i` is no longer this rank's to extract (a later entry of its name replaces it).
    pub fn disown(&mut self, i: usize) {
        self.recs[i].own = false;
    }

    /// The rare record of entry `i`, if it has one.
    fn rare_of(&self, i: usize) -> Option<&Rare> {
        if !self.recs[i].rare {
            return None;
        }
        let at = self
            .rare
            .binary_search_by_key(&i, |(j, _)| *j)
            .expect("a rare record for every entry marked so");
        Some(&self.rare[at].1)
    }

    /// The rare record of entry `i`, made if it has none (rare: a few entries only).
    fn rare_mut(&mut self, i: usize) -> &mut Rare {
        let at = match self.rare.binary_search_by_key(&i, |(j, _)| *j) {
            Ok(at) => at,
            Err(at) => {
                let r = self.recs[i];
                // Only read when `data_from_start` says so; kept true all the same.
                let data = r.start + u64::from(r.data_from_start);
                let rare = Rare {
                    data,
                    ..Rare::default()
                };
                self.rare.insert(at, (i, rare));
                self.recs[i].rare = true;
                at
            }
        };
        &mut self.rare[at].1
    }

    /// Extract entry `i` under the cleaned name `rel` instead of its own.
    pub fn rename(&mut self, i: usize, rel: &[u8]) {
        self.rare_mut(i).alias = Some(rel.to_vec());
    }

    /// Make the hard link `i` refer to the cleaned name `to` instead of its target.
    pub fn relink(&mut self, i: usize, to: &[u8]) {
        self.rare_mut(i).link = to.to_vec();
    }

    /// The entries, in order.
    pub fn iter(&self) -> impl Iterator<Item = Item<'_>> {
        (0..self.len()).map(move |i| self.get(i))
    }

    /// Entry `i`.
    pub fn get(&self, i: usize) -> Item<'_> {
        let r = &self.recs[i];
        let rare = self.rare_of(i);
        let data = match rare {
            Some(x) if r.data_from_start == u32::MAX => x.data,
            _ => r.start + u64::from(r.data_from_start),
        };
        Item {
            rel: self.rel(i),
            start: r.start,
            data,
            size: r.size,
            mtime: r.mtime,
            mtime_nsec: r.mtime_nsec,
            uid: r.uid,
            gid: r.gid,
            mode: r.mode,
            kind: r.kind,
            own: r.own,
            link: rare.map_or(&[][..], |x| &x.link),
            xattrs: rare.map_or(&[][..], |x| &x.xattrs),
            sparse: rare.and_then(|x| x.sparse.as_deref()),
            dev_major: rare.map_or(0, |x| x.dev_major),
            dev_minor: rare.map_or(0, |x| x.dev_minor),
            projid: rare.map_or_else(ProjectId::default, |x| x.projid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar::format::Header;

    fn decoded(path: &str, start: u64, data: u64) -> Decoded {
        Decoded {
            header: Header {
                path: path.as_bytes().to_vec(),
                kind: Kind::File,
                mode: 0o4755,
                uid: 7,
                gid: 8,
                uname: b"u".to_vec(),
                gname: b"g".to_vec(),
                size: 1234,
                mtime: -5,
                mtime_nsec: 999,
                link: Vec::new(),
                dev_major: 0,
                dev_minor: 0,
                xattrs: Vec::new(),
                projid: Default::default(),
            },
            start,
            data,
            next: data + 1536,
            sparse: None,
        }
    }

    #[test]
    fn a_record_is_56_bytes() {
        assert_eq!(std::mem::size_of::<Rec>(), 56);
    }

    #[test]
    fn entries_give_back_what_was_kept_rare_fields_included() {
        let mut e = Entries::with_capacity(4);
        e.push(b"a/plain", &decoded("a/plain", 0, 512), true);
        let mut link = decoded("a/link", 2048, 3584);
        link.header.kind = Kind::Symlink;
        link.header.link = b"../t".to_vec();
        link.header.xattrs = vec![(b"user.x".to_vec(), b"v".to_vec())];
        e.push(b"a/link", &link, false);
        let mut sparse = decoded("s", 4096, 4096 + (5u64 << 32));
        sparse.sparse = Some(vec![Segment { at: 10, len: 20 }]);
        sparse.header.kind = Kind::Char;
        sparse.header.dev_major = 3;
        sparse.header.dev_minor = 4;
        e.push(b"s", &sparse, true);
        e.push(b"", &decoded(".", 1 << 40, (1 << 40) + 512), true);
        e.shrink_to_fit();
        assert_eq!(e.len(), 4);

        let p = e.get(0);
        assert_eq!(
            (p.rel, p.start, p.data, p.size, p.mtime, p.mtime_nsec),
            (&b"a/plain"[..], 0, 512, 1234, -5, 999)
        );
        assert_eq!(
            (p.uid, p.gid, p.mode, p.kind, p.own),
            (7, 8, 0o4755, Kind::File, true)
        );
        assert!(p.link.is_empty() && p.xattrs.is_empty() && p.sparse.is_none());

        let l = e.get(1);
        assert_eq!(
            (l.rel, l.kind, l.own, l.link),
            (&b"a/link"[..], Kind::Symlink, false, &b"../t"[..])
        );
        assert_eq!(l.xattrs, &[(b"user.x".to_vec(), b"v".to_vec())][..]);
        assert_eq!(l.data, 3584);

        let s = e.get(2);
        assert_eq!(
            s.data,
            4096 + (5u64 << 32),
            "a far data offset is kept whole"
        );
        assert_eq!(s.sparse, Some(&[Segment { at: 10, len: 20 }][..]));
        assert_eq!((s.dev_major, s.dev_minor), (3, 4));

        assert_eq!(e.rel(3), b"");
        assert_eq!(e.start(3), 1 << 40);
        e.disown(3);
        assert!(!e.own(3));

        // Renamed (an entry without a rare record, then one with), relinked: the rest holds.
        e.rename(0, b"elsewhere/x");
        e.rename(2, b"t");
        e.relink(1, b"a/plain");
        assert_eq!(
            (e.rel(0), e.rel(1), e.rel(2)),
            (&b"elsewhere/x"[..], &b"a/link"[..], &b"t"[..])
        );
        let p = e.get(0);
        assert_eq!(
            (p.rel, p.start, p.data, p.size),
            (&b"elsewhere/x"[..], 0, 512, 1234)
        );
        assert_eq!(e.get(1).link, b"a/plain");
        assert_eq!(e.get(2).data, 4096 + (5u64 << 32));
        assert_eq!(e.get(2).sparse, Some(&[Segment { at: 10, len: 20 }][..]));
        assert_eq!(e.rel(3), b"");
    }
}
