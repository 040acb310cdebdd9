//! The files grep searches, and their order.
//!
//! Each file gets a sort key: the index of the PATH it was found under (4 bytes, big endian),
//! then its path relative to that PATH with every `/` written as a NUL byte. Sorting keys by
//! bytes then gives the order of a depth-first walk that visits PATHs in command-line order and
//! the entries of every directory by name bytes: as a NUL sorts before every byte a name can
//! hold, `a/z` comes before `a.txt`, right after `a`. The keys travel in a [`FileList`] (its
//! paths are opaque bytes to the distributed sort), with the walk's `stat` of the file as its
//! metadata (a list's files: the size only).

use super::{FileGlob, Options};
use crate::engine::checkpoint::{stamp_of_meta, Stamp};
use crate::engine::context::Error;
use crate::engine::input::Listed;
use flist::path::{as_path, basename, normalize};
use flist::restat::{restat, Which};
use flist::sort::{Field, Key};
use flist::walk::{walk, WalkOptions};
use flist::{Detail, FileList, FileType, Meta};
use globset::{GlobBuilder, GlobMatcher};
use steal::{Comm, CommExt};

/// The `--include`/`--exclude` globs, compiled.
pub struct Globs {
    globs: Vec<(bool, GlobMatcher)>,
}

impl Globs {
    /// Compile `globs`; an invalid one is an error naming it.
    pub fn new(globs: &[FileGlob]) -> Result<Globs, Error> {
        let globs = globs
            .iter()
            .map(|g| {
                let text = String::from_utf8_lossy(&g.glob);
                GlobBuilder::new(&text)
                    .backslash_escape(true)
                    .build()
                    .map(|m| (g.include, m.compile_matcher()))
                    .map_err(|e| Error::new(format!("invalid glob '{text}': {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Globs { globs })
    }

    /// True when the file named `name` (last component) is searched: the last glob that
    /// matches decides; when none does, unless the first is an `--include` (GNU grep).
    pub fn admit(&self, name: &[u8]) -> bool {
        let name = as_path(name);
        match self.globs.iter().rev().find(|(_, g)| g.is_match(name)) {
            Some((include, _)) => *include,
            None => self.globs.first().is_none_or(|(include, _)| !include),
        }
    }
}

/// One file to search, as this rank holds it after the sort.
pub struct File {
    /// The path to open.
    pub path: Vec<u8>,
    /// The name printed.
    pub shown: Vec<u8>,
    /// Size in bytes when listed (chunks are planned from it; the last chunk reads to the end).
    pub size: u64,
    /// Its [`Stamp`] when walked (`None` from a list, whose records lack device and inode).
    pub listed: Option<Stamp>,
}

/// Where keys came from: a walked PATH, or the list.
#[derive(Clone, Debug)]
struct Root {
    /// The normalised absolute path (walks), or empty (lists: keys hold the whole path).
    abs: Vec<u8>,
    /// How names under it are printed: the PATH as given without trailing `/`s, or empty for
    /// the implicit `.` (names relative, as grep -r prints them).
    shown: Vec<u8>,
    /// The PATH as given (printed for the PATH itself when it is a file).
    given: Vec<u8>,
    /// False for the implicit `.`.
    explicit: bool,
}

/// This rank's files (keys and sizes), and the roots that turn keys back into paths.
pub struct Files {
    list: FileList,
    roots: Vec<Root>,
}

/// The files of a run on this rank.
pub struct Entries {
    /// This rank's files.
    pub list: Files,
    /// Paths that could not be listed on this rank (reported unless `-s`).
    pub errors: u64,
    /// More than one file may be searched: grep -r prints names then (every rank agrees).
    pub many: bool,
}

fn key(root: usize, rel: &[u8]) -> Vec<u8> {
    let mut k = (root as u32).to_be_bytes().to_vec();
    k.extend(rel.iter().map(|&b| if b == b'/' { 0 } else { b }));
    k
}

fn size_meta(size: u64) -> Meta {
    Meta {
        size,
        ..Meta::default()
    }
}

/// Walk the PATHs (or read the list) and keep the regular files the globs admit. Collective.
pub fn entries(comm: &dyn Comm, options: &Options, globs: &Globs) -> Result<Entries, Error> {
    let context = &options.context;
    let mut list = FileList::new(Detail::Stat);
    let mut errors = 0;
    let report = |e: &dyn std::fmt::Display| {
        if !options.no_messages {
            context.error(e);
        }
    };
    let read = match options
        .input
        .list(comm, |paths| walk_roots(comm, options, globs, paths))?
    {
        Listed::Walked(entries) => return Ok(entries),
        Listed::Read(read) => read,
    };
    let which = if read.detail() == Detail::Lite {
        Which::All
    } else {
        Which::UnknownTypes
    };
    let (read, failed) = restat(read, which, false);
    for e in &failed {
        report(e);
    }
    errors += failed.len() as u64;
    for e in read.iter() {
        if e.kind == FileType::File && globs.admit(basename(e.path)) {
            let size = e.meta.map_or(0, |m| m.size);
            list.push(&key(0, e.path), FileType::File, Some(size_meta(size)));
        }
    }
    let roots = vec![Root {
        abs: Vec::new(),
        shown: Vec::new(),
        given: Vec::new(),
        explicit: true,
    }];
    Ok(Entries {
        list: Files { list, roots },
        errors,
        many: true,
    })
}

/// Walk each PATH (`.` when none is given) and keep the regular files the globs admit.
/// Collective.
fn walk_roots(comm: &dyn Comm, options: &Options, globs: &Globs, paths: &[Vec<u8>]) -> Entries {
    let context = &options.context;
    let mut list = FileList::new(Detail::Stat);
    let mut errors = 0;
    let report = |e: &dyn std::fmt::Display| {
        if !options.no_messages {
            context.error(e);
        }
    };
    let cwd = flist::path::current_dir().unwrap_or_else(|_| b"/".to_vec());
    let explicit = !paths.is_empty();
    let given: Vec<Vec<u8>> = if explicit {
        paths.to_vec()
    } else {
        vec![b".".to_vec()]
    };
    let mut roots = Vec::new();
    let mut below_a_root = false;
    let walk_opts = WalkOptions {
        detail: Detail::Stat,
        seed: 0x93e9,
        noatime: &context.noatime,
        stop: Some(&context.stop),
        id_tables: false,
        dereference: options.dereference,
        ..WalkOptions::default()
    };
    for (r, path) in given.iter().enumerate() {
        let abs = normalize(path, &cwd);
        let trimmed = match path.iter().rposition(|&b| b != b'/') {
            Some(i) => path[..=i].to_vec(),
            None => Vec::new(),
        };
        roots.push(Root {
            abs: abs.clone(),
            shown: trimmed,
            given: path.clone(),
            explicit,
        });
        let walked = walk(comm, std::slice::from_ref(&abs), &walk_opts);
        for e in &walked.errors {
            report(e);
        }
        errors += walked.errors.len() as u64;
        for e in walked.list.iter() {
            let rel = relative(&abs, e.path);
            below_a_root |= !rel.is_empty();
            // The walk's stat travels with the file: the identity before its read.
            let meta = match e.kind {
                FileType::File => e.meta.unwrap_or_default(),
                // A PATH that is a link to a file is searched (grep -r follows links named on
                // the command line only).
                FileType::Symlink if rel.is_empty() => match rustix::fs::stat(as_path(e.path)) {
                    Ok(st) if FileType::from_mode(st.st_mode) == FileType::File => {
                        Meta::from_stat(&st)
                    }
                    _ => continue,
                },
                _ => continue,
            };
            if globs.admit(basename(e.path)) {
                list.push(&key(r, rel), FileType::File, Some(meta));
            }
        }
        if walked.interrupted {
            break;
        }
    }
    let many = given.len() > 1 || comm.any(below_a_root);
    Entries {
        list: Files { list, roots },
        errors,
        many,
    }
}

/// `path` relative to `root` (both normalised): empty for the root itself.
fn relative<'p>(root: &[u8], path: &'p [u8]) -> &'p [u8] {
    let rest = &path[root.len().min(path.len())..];
    rest.strip_prefix(b"/").unwrap_or(rest)
}

/// Sort the files of all ranks by key (see the module). Collective.
pub fn sort(comm: &dyn Comm, files: Files) -> Result<Files, Error> {
    let keys = [Key {
        field: Field::Name,
        descending: false,
    }];
    let list = flist::sort::sort(comm, files.list, &keys).map_err(Error::new)?;
    Ok(Files {
        list,
        roots: files.roots,
    })
}

impl Files {
    /// Files on this rank.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// This rank's files, in order.
    pub fn iter(&self) -> impl Iterator<Item = File> + '_ {
        self.list.iter().map(|e| {
            let root = u32::from_be_bytes(e.path[..4].try_into().expect("a key has a root"));
            let root = &self.roots[root as usize];
            let rel: Vec<u8> = e.path[4..]
                .iter()
                .map(|&b| if b == 0 { b'/' } else { b })
                .collect();
            let join = |base: &[u8]| {
                let mut p = base.to_vec();
                if !p.is_empty() && p.last() != Some(&b'/') {
                    p.push(b'/');
                } else if p.is_empty() && root.explicit && !root.abs.is_empty() {
                    // The PATH `/`.
                    p.push(b'/');
                }
                p.extend_from_slice(&rel);
                p
            };
            let (path, shown) = if root.abs.is_empty() {
                (rel.clone(), rel.clone())
            } else if rel.is_empty() {
                (root.abs.clone(), root.given.clone())
            } else if root.explicit {
                (join(&root.abs), join(&root.shown))
            } else {
                (join(&root.abs), rel.clone())
            };
            File {
                path,
                shown,
                size: e.meta.map_or(0, |m| m.size),
                // A list's records (size only, or a v4 list's: no device nor inode) say
                // nothing of identity.
                listed: e.meta.filter(|m| m.ino != 0).map(|m| stamp_of_meta(&m)),
            }
        })
    }
}

/// A message for a list that cannot be read.
#[cfg(test)]
mod tests {
    use super::*;

    fn globs(list: &[(bool, &str)]) -> Globs {
        let list: Vec<FileGlob> = list
            .iter()
            .map(|&(include, g)| FileGlob {
                include,
                glob: g.as_bytes().to_vec(),
            })
            .collect();
        Globs::new(&list).unwrap()
    }

    #[test]
    fn the_last_matching_glob_decides_and_the_first_sets_the_default() {
        assert!(globs(&[]).admit(b"x"));
        let g = globs(&[(false, "*.txt"), (true, "*.txt")]);
        assert!(g.admit(b"a.txt") && g.admit(b"t"));
        let g = globs(&[(true, "*.txt"), (false, "*.txt")]);
        assert!(!g.admit(b"a.txt") && !g.admit(b"t"));
        let g = globs(&[(true, "x*"), (false, "*.txt"), (true, "*.txt")]);
        assert!(g.admit(b"x.txt") && g.admit(b"a.txt") && !g.admit(b"t"));
        assert!(globs(&[(true, "*")]).admit(b".hidden"));
    }

    #[test]
    fn keys_sort_depth_first() {
        let mut k = [key(0, b"a.txt"), key(0, b"a/z"), key(0, b"a"), key(1, b"0")];
        k.sort();
        assert_eq!(
            k,
            [key(0, b"a"), key(0, b"a/z"), key(0, b"a.txt"), key(1, b"0")]
        );
    }
}
