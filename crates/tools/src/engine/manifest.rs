//! Checksum manifests: one line per regular file, `HASH  PATH`, as `b3sum` (BLAKE3, the
//! default) or `sha256sum` (SHA-256) write them, so `b3sum --check` / `sha256sum -c` (run in
//! the directory the paths are relative to) and `mfu-rs cmp --manifest` verify a tree.
//!
//! The digests are the source's bytes, never the copy's (a copy damaged after its write must
//! fail the check): they come from the bytes read during the operation
//! ([`crate::engine::hashing`]), each file's on the rank its path hashes to, BLAKE3 assembled
//! from the pieces of its ranges wherever they were copied. What this run did not read, or
//! read in pieces SHA-256 cannot be assembled from, is read from the source once more on
//! that rank, sequentially: a file cp or sync resumed (its journaled chunks were read by an
//! earlier run), and with SHA-256 a file copied in several chunks (one more read of its
//! source; files of one chunk cost nothing more). A source that changed since it was listed
//! (size, mtime, ctime) is not hashed: its file is an error.
//!
//! The manifest is sorted by path (a distributed sample sort), each rank writes its lines at
//! their offset in a temporary file beside FILE, and rank 0 renames it to FILE once every
//! rank's part is written and the operation succeeded. A failed operation leaves no manifest
//! (nor a temporary file).
//!
//! Names are escaped as the two tools do: a line whose path holds a backslash or a newline
//! (for `sha256sum`, also a carriage return) starts with `\` and the path has them as `\\`,
//! `\n` (`\r`). Other bytes are written as they are, including bytes that are not UTF-8
//! (`sha256sum -c` and `cmp --manifest` read them; `b3sum --check` refuses such paths).

use crate::engine::context::Context;
use crate::engine::digest::{assemble_blake3, hex, parse_hex, HashKind, Piece, RangeDigest};
use crate::engine::hashing::{hash_file, Record, Source};
use flist::atomic::{Output, Replace};
use flist::distribute::hash_path;
use flist::{Detail, FileList, FileType, ItemError};
use rustix::fd::{AsFd, OwnedFd};
use serde_bytes::Bytes;
use std::collections::HashMap;
use std::io;
use steal::typed;
use steal::{Comm, CommExt};

/// What a manifest is and where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestOptions {
    /// The manifest file (written under a temporary name beside it, renamed when complete).
    pub path: Vec<u8>,
    /// The hash it holds.
    pub kind: HashKind,
    /// `sync --manifest-all`: every regular file of the tree, not only those copied.
    pub all: bool,
    /// The directory the manifest's paths are relative to (set by the tool: its destination);
    /// empty: the paths kept are already relative (tar's).
    pub base: Vec<u8>,
}

impl ManifestOptions {
    /// A manifest of `kind` at `path` (paths relative to `base`, set later by the tool).
    pub fn new(path: impl AsRef<[u8]>, kind: HashKind) -> ManifestOptions {
        ManifestOptions {
            path: path.as_ref().to_vec(),
            kind,
            all: false,
            base: Vec::new(),
        }
    }
}

/// A manifest line's content: the path (relative to the manifest's base) and its digest.
pub type Entry = (Vec<u8>, [u8; 32]);

/// What a run says about its manifest in its report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    /// The manifest file, as shown.
    pub path: String,
    /// The hash it holds.
    pub hash: HashKind,
    /// Lines (regular files) in it.
    pub files: u64,
    /// It was written (false: the operation or the writing failed; no file was left).
    pub written: bool,
}

/// The line of `path` with `digest`, as `b3sum` (`kind` BLAKE3) or `sha256sum` write it.
pub fn line(kind: HashKind, digest: &[u8; 32], path: &[u8]) -> Vec<u8> {
    let special = |b: u8| b == b'\\' || b == b'\n' || (b == b'\r' && kind == HashKind::Sha256);
    let escaped = path.iter().any(|&b| special(b));
    let mut out = Vec::with_capacity(path.len() + 68);
    if escaped {
        out.push(b'\\');
    }
    out.extend_from_slice(hex(digest).as_bytes());
    out.extend_from_slice(b"  ");
    for &b in path {
        match b {
            b'\\' if escaped => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' if escaped && kind == HashKind::Sha256 => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
    out.push(b'\n');
    out
}

/// A manifest line (without its newline) as (digest, path): either tool's format, escaped or
/// not, with one or two spaces (or ` *`, binary mode) between; `None` when it is not one.
pub fn parse_line(text: &[u8]) -> Option<([u8; 32], Vec<u8>)> {
    let (escaped, text) = match text.strip_prefix(b"\\") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digest = parse_hex(text.get(..64)?)?;
    let rest = text.get(64..)?;
    let name = rest
        .strip_prefix(b"  ")
        .or_else(|| rest.strip_prefix(b" *"))
        .or_else(|| rest.strip_prefix(b" "))?;
    if name.is_empty() {
        return None;
    }
    if !escaped {
        return Some((digest, name.to_vec()));
    }
    let mut path = Vec::with_capacity(name.len());
    let mut it = name.iter();
    while let Some(&b) = it.next() {
        if b != b'\\' {
            path.push(b);
            continue;
        }
        match it.next()? {
            b'\\' => path.push(b'\\'),
            b'n' => path.push(b'\n'),
            b'r' => path.push(b'\r'),
            _ => return None,
        }
    }
    Some((digest, path))
}

/// `path` relative to `base` (`None` when it is not beneath it).
fn relative<'a>(base: &[u8], path: &'a [u8]) -> Option<&'a [u8]> {
    if base.is_empty() {
        return Some(path);
    }
    if base == b"/" {
        return path.strip_prefix(b"/");
    }
    let rest = path.strip_prefix(base)?;
    rest.strip_prefix(b"/")
}

fn home(path: &[u8], size: usize) -> usize {
    (hash_path(path) % size as u64) as usize
}

/// The manifest entries of a run, (path relative to `o.base`, digest), each on the rank its
/// destination path hashes to: files from every rank's `records` (whole digests, or the pieces
/// of files copied in several ranges, assembled here), then the hard links `links` (first
/// member's destination, member's destination) with their first member's digest. A file with
/// a record to read again ([`Record::reread`]) is hashed from that source, opened through
/// `reopen`, whatever its other records hold; a SHA-256 file copied in several ranges without
/// one is read again through `reopen` of its record's path (tar's callers map it to what to
/// read). Returns the entries and the files that could not be hashed. Collective.
pub fn entries(
    comm: &dyn Comm,
    o: &ManifestOptions,
    records: Vec<Record>,
    links: &[(Vec<u8>, Vec<u8>)],
    reopen: impl Fn(&[u8]) -> io::Result<OwnedFd> + Sync,
) -> (Vec<Entry>, Vec<ItemError>) {
    let size = comm.size();
    let mut sends = vec![Vec::new(); size];
    for r in records {
        typed::encode_into(&r, &mut sends[home(&r.path, size)]);
    }
    let got = comm.alltoallv(sends);
    let mut whole: HashMap<Vec<u8>, [u8; 32]> = HashMap::new();
    let mut parts: HashMap<Vec<u8>, (u64, Vec<Piece>)> = HashMap::new();
    let mut rereads: HashMap<Vec<u8>, Source> = HashMap::new();
    for bytes in &got {
        for r in typed::each::<Record>(bytes) {
            let r = typed::sent(r);
            if let Some(source) = r.reread {
                rereads.insert(r.path, source);
                continue;
            }
            match r.digest {
                RangeDigest::Whole(d) => {
                    whole.insert(r.path, d);
                }
                RangeDigest::Pieces(pieces) => {
                    let entry = parts.entry(r.path).or_insert((r.file_size, Vec::new()));
                    entry.1.extend(pieces);
                }
            }
        }
    }
    drop(got);
    // What this run read of a file read again from its source does not count.
    for path in rereads.keys() {
        whole.remove(path);
        parts.remove(path);
    }
    let mut errors = Vec::new();
    {
        use rayon::prelude::*;
        type Assembled = Result<Option<[u8; 32]>, ItemError>;
        let again: Vec<(Vec<u8>, Assembled)> = rereads
            .into_par_iter()
            .map(|(path, source)| {
                let digest = reread(o.kind, &source, &reopen).map(Some);
                (path, digest)
            })
            .collect();
        let assembled: Vec<(Vec<u8>, Assembled)> = parts
            .into_par_iter()
            .map(|(path, (file_size, pieces))| {
                let covered: u64 = pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Subtree { len, .. } => *len,
                        Piece::Raw { bytes, .. } => bytes.len() as u64,
                    })
                    .sum();
                let digest = match o.kind {
                    HashKind::Blake3 => Ok(assemble_blake3(file_size, pieces)),
                    // Ranges of a failed file are missing: that failure is reported already.
                    HashKind::Sha256 if covered != file_size => Ok(None),
                    HashKind::Sha256 => reopen(&path)
                        .and_then(|fd| hash_file(fd.as_fd(), file_size, HashKind::Sha256))
                        .map(Some)
                        .map_err(|e| ItemError::new(&path, "read (to hash for the manifest)", e)),
                };
                (path, digest)
            })
            .collect();
        for (path, d) in assembled.into_iter().chain(again) {
            match d {
                Ok(Some(d)) => {
                    whole.insert(path, d);
                }
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
    }
    // Hard links: the digest of their first member, known on its home rank.
    let mut sends = vec![Vec::new(); size];
    for (first, member) in links {
        let link = (Bytes::new(first), Bytes::new(member));
        typed::encode_into(&link, &mut sends[home(first, size)]);
    }
    let mut linked = Vec::new();
    for bytes in comm.alltoallv(sends) {
        for link in typed::each::<(&Bytes, &Bytes)>(&bytes) {
            let (first, member) = typed::sent(link);
            if let Some(d) = whole.get(&first[..]) {
                linked.push((member.to_vec(), *d));
            }
        }
    }
    let mut out: Vec<Entry> = whole
        .into_iter()
        .chain(linked)
        .filter_map(|(path, d)| relative(&o.base, &path).map(|rel| (rel.to_vec(), d)))
        .collect();
    out.shrink_to_fit();
    (out, errors)
}

/// The digest (`kind`) of the source `s`, read again (opened through `reopen`) from its start
/// in order. A source whose size, mtime or ctime is not what the listing saw, before or after
/// the read, is not the file copied: an error, never a digest of other bytes.
fn reread(
    kind: HashKind,
    s: &Source,
    reopen: &(impl Fn(&[u8]) -> io::Result<OwnedFd> + Sync),
) -> Result<[u8; 32], ItemError> {
    let fail = |e: io::Error| ItemError::new(&s.path, "read (to hash for the manifest)", e);
    let fd = reopen(&s.path).map_err(fail)?;
    let key = |m: &flist::Meta| (m.size, m.mtime, m.mtime_nsec, m.ctime, m.ctime_nsec);
    let unchanged = || -> Result<(), ItemError> {
        let st = rustix::fs::fstat(&fd).map_err(|e| fail(e.into()))?;
        if key(&flist::Meta::from_stat(&st)) == key(&s.meta) {
            return Ok(());
        }
        Err(fail(io::Error::other(
            "it changed since it was listed (size, mtime or ctime): the bytes copied can't be \
             read again to hash them",
        )))
    };
    unchanged()?;
    let digest = hash_file(fd.as_fd(), s.meta.size, kind).map_err(fail)?;
    unchanged()?;
    Ok(digest)
}

/// Write `entries` (this rank's part) as the manifest `o.path`, sorted by path, when `ok`
/// (every rank agrees: the operation succeeded); otherwise name it as not written. Returns
/// the summary (the same on every rank). Collective.
pub fn publish(
    comm: &dyn Comm,
    context: &Context,
    o: &ManifestOptions,
    entries: Vec<Entry>,
    ok: bool,
) -> Summary {
    let rank0 = comm.rank() == 0;
    let show = flist::path::display(&o.path).to_string();
    let files = comm.sum(entries.len() as u64);
    let mut summary = Summary {
        path: show.clone(),
        hash: o.kind,
        files,
        written: false,
    };
    if !comm.all(ok) {
        if rank0 {
            context.error(format_args!(
                "manifest {show}: not written (the operation failed; a manifest lists a \
                 complete run only)"
            ));
        }
        return summary;
    }
    match write(comm, context, o, entries) {
        Ok(()) => summary.written = true,
        Err(e) => {
            if rank0 {
                context.error(format_args!("manifest {show}: not written ({e})"));
            }
        }
    }
    summary
}

/// Sort `entries` over all ranks and write them to a temporary file renamed to `o.path`.
/// Collective; the same result on every rank.
pub(crate) fn write(
    comm: &dyn Comm,
    context: &Context,
    o: &ManifestOptions,
    entries: Vec<Entry>,
) -> Result<(), String> {
    // Sorted as list records whose "path" is PATH NUL DIGEST: a path holds no NUL, so the
    // order is the paths' (bytes, like `sort` in the C locale).
    let mut list = FileList::new(Detail::Lite);
    for (rel, d) in &entries {
        let mut key = Vec::with_capacity(rel.len() + 33);
        key.extend_from_slice(rel);
        key.push(0);
        key.extend_from_slice(d);
        list.push(&key, FileType::File, None);
    }
    drop(entries);
    let keys = flist::sort::parse_keys("name").expect("a valid sort key");
    let sorted = flist::sort::sort(comm, list, &keys).map_err(|e| e.to_string())?;
    let mut text = Vec::new();
    for i in 0..sorted.len() {
        let key = sorted.path(i);
        let (rel, d) = key.split_at(key.len() - 33);
        let d: [u8; 32] = d[1..].try_into().expect("32 bytes");
        text.extend_from_slice(&line(o.kind, &d, rel));
    }
    drop(sorted);
    let (offset, _) = comm.offset_and_total(text.len() as u64);
    let mut output = None;
    let (tmp, id) = shared_temp(comm, context, &o.path, "temporary manifest", &mut output)?;
    let mine = write_part(&tmp, id, offset, &text);
    let failed = comm.any(mine.is_err());
    comm.bcast_with(0, || match (failed, output.take()) {
        (false, Some(out)) => out.publish(Replace::Overwrite).map_err(|e| e.to_string()),
        _ => Err(mine
            .err()
            .unwrap_or_else(|| "another rank's part could not be written".into())),
    })
}

/// Rank 0 makes the temporary file of the output `path` (an [`Output`]: new, never through a
/// symlink; a killed earlier run's temporary of this output, a `what`, removed first and
/// named) and keeps it in `output`; every rank gets its path and identity, to write its part
/// with [`write_part`]. Rank 0 publishes `output` (or drops it, which removes it). Collective.
pub(crate) fn shared_temp(
    comm: &dyn Comm,
    context: &Context,
    path: &[u8],
    what: &str,
    output: &mut Option<Output>,
) -> Result<(Vec<u8>, (u64, u64)), String> {
    comm.bcast_with(0, || {
        let (out, stale) = Output::beside(path, 0o666).map_err(|e| e.to_string())?;
        for s in stale {
            // A removal is no failure of this run; one that failed is.
            let note = crate::engine::outputs::stale_note(&s, what);
            match s.removed {
                Ok(()) => context.events.error(&note),
                Err(_) => context.error(note),
            }
        }
        let id = out
            .identity()
            .map_err(|e| format!("stat {}: {e}", flist::path::display(out.path())))?;
        let shared = (out.path().to_vec(), id);
        *output = Some(out);
        Ok(shared)
    })
}

/// Write this rank's part of an output into rank 0's temporary `tmp` (which must still be
/// the file `id`), at `offset`, and sync it.
pub(crate) fn write_part(
    tmp: &[u8],
    id: (u64, u64),
    offset: u64,
    text: &[u8],
) -> Result<(), String> {
    let show = || flist::path::display(tmp).to_string();
    let file = flist::atomic::join(tmp, rustix::fs::OFlags::WRONLY, Some(id))
        .map_err(|e| e.to_string())?;
    std::os::unix::fs::FileExt::write_all_at(&file, text, offset)
        .map_err(|e| format!("write {}: {e}", show()))?;
    file.sync_data()
        .map_err(|e| format!("fdatasync {}: {e}", show()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries_of(names: &[&[u8]]) -> Vec<Entry> {
        names.iter().map(|n| (n.to_vec(), [7u8; 32])).collect()
    }

    /// The temporary name is predictable: a hard link planted there to someone's file is
    /// refused, and that file is neither truncated nor written (nor is the manifest made).
    #[test]
    fn a_file_planted_at_the_temporary_name_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        use std::os::unix::ffi::OsStrExt;
        let path = [dir.path().as_os_str().as_bytes(), b"/m.b3"].concat();
        let tmp = flist::atomic::temp_path(&path);
        std::fs::hard_link(&victim, flist::path::as_path(&tmp)).unwrap();
        let o = ManifestOptions::new(&path, HashKind::Blake3);
        let context = Context::default();
        let got = steal::local::run(2, |comm: &dyn Comm| {
            write(comm, &context, &o, entries_of(&[b"a"]))
        });
        for e in got {
            let e = e.expect_err("refused");
            assert!(e.contains("create ") && e.contains("File exists"), "{e}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!flist::path::as_path(&path).exists());
    }

    /// A killed earlier run's temporary manifest (on this host, its process gone) is removed
    /// and named; the manifest is written whole from both ranks' parts.
    #[test]
    fn a_killed_run_temporary_manifest_is_removed_and_named() {
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::ffi::OsStrExt;
        let path = [dir.path().as_os_str().as_bytes(), b"/m.b3"].concat();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = flist::atomic::temp_name_of(b"m.b3", &flist::atomic::host(), dead);
        let stale = dir.path().join(flist::path::as_path(&stale));
        std::fs::write(&stale, b"half a manifest").unwrap();
        let o = ManifestOptions::new(&path, HashKind::Blake3);
        struct Said(std::sync::Mutex<Vec<String>>);
        impl crate::engine::context::Events for Said {
            fn error(&self, m: &str) {
                self.0.lock().unwrap().push(m.to_string());
            }
            fn progress(&self, _: &str, _: &steal::progress::Report) {}
            fn output(&self, _: &[u8]) {}
            fn info(&self, _: &str) {}
        }
        let said = std::sync::Arc::new(Said(Default::default()));
        let context = Context::new(said.clone());
        steal::local::run(2, |comm: &dyn Comm| {
            let mine: &[&[u8]] = if comm.rank() == 0 { &[b"b"] } else { &[b"a"] };
            write(comm, &context, &o, entries_of(mine)).unwrap()
        });
        assert!(!stale.exists());
        let said = said.0.lock().unwrap().clone();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with("removed ") && said[0].contains("killed"),
            "{said:?}"
        );
        assert!(context.failures().is_empty(), "a removal is no failure");
        let h = hex(&[7u8; 32]);
        assert_eq!(
            std::fs::read(flist::path::as_path(&path)).unwrap(),
            format!("{h}  a\n{h}  b\n").as_bytes()
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "the manifest alone");
    }

    #[test]
    fn lines_escape_names_as_the_tools_do_and_read_back() {
        let d = [0x5au8; 32];
        let h = hex(&d);
        assert_eq!(
            line(HashKind::Blake3, &d, b"a b"),
            format!("{h}  a b\n").as_bytes()
        );
        assert_eq!(
            line(HashKind::Blake3, &d, b"a\\b"),
            format!("\\{h}  a\\\\b\n").as_bytes()
        );
        assert_eq!(
            line(HashKind::Blake3, &d, b"n\nl"),
            format!("\\{h}  n\\nl\n").as_bytes()
        );
        // b3sum leaves a carriage return as it is; sha256sum escapes it.
        assert_eq!(
            line(HashKind::Blake3, &d, b"c\rr"),
            format!("{h}  c\rr\n").as_bytes()
        );
        assert_eq!(
            line(HashKind::Sha256, &d, b"c\rr"),
            format!("\\{h}  c\\rr\n").as_bytes()
        );
        assert_eq!(
            line(HashKind::Sha256, &d, b"x\xffy"),
            [format!("{h}  x").as_bytes(), b"\xffy\n"].concat()
        );
        for kind in [HashKind::Blake3, HashKind::Sha256] {
            for name in [&b"a b"[..], b"a\\b", b"n\nl", b"c\rr", b"x\xffy"] {
                let l = line(kind, &d, name);
                assert_eq!(parse_line(&l[..l.len() - 1]), Some((d, name.to_vec())));
            }
        }
        assert_eq!(parse_line(b"nothing"), None);
    }

    /// A source read again for its digest is hashed only while it is what was listed: one
    /// changed since (here its mtime) is an error naming it, never a digest of other bytes.
    #[test]
    fn a_source_changed_since_it_was_listed_is_not_hashed_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("src");
        std::fs::write(&file, b"listed bytes").unwrap();
        use std::os::unix::ffi::OsStrExt;
        let path = file.as_os_str().as_bytes().to_vec();
        let st = rustix::fs::stat(&file).unwrap();
        let source = Source {
            path: path.clone(),
            meta: flist::Meta::from_stat(&st),
        };
        let reopen = |p: &[u8]| -> io::Result<OwnedFd> {
            Ok(std::fs::File::open(flist::path::as_path(p))?.into())
        };
        let d = reread(HashKind::Sha256, &source, &reopen).unwrap();
        assert_eq!(d, HashKind::Sha256.of(b"listed bytes"));
        let mut stale = source.clone();
        stale.meta.mtime -= 10;
        let e = reread(HashKind::Blake3, &stale, &reopen).expect_err("refused");
        assert_eq!(e.path, path);
        assert!(e.source.to_string().contains("changed since it was listed"));
    }

    #[test]
    fn paths_are_relative_to_the_base() {
        assert_eq!(relative(b"/d", b"/d/x/y"), Some(&b"x/y"[..]));
        assert_eq!(relative(b"/d", b"/dx/y"), None);
        assert_eq!(relative(b"/", b"/x"), Some(&b"x"[..]));
        assert_eq!(
            flist::atomic::temp_path(b"m.b3"),
            flist::atomic::temp_name(b"m.b3")
        );
    }
}
