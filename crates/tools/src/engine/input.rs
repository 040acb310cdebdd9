//! What a tool acts on: paths to walk, a list file to read (`-i FILE`), or a list already in
//! memory (an embedding program's, such as Python's `FList`), and the one function that turns
//! any of them into the tool's list.

use crate::engine::context::Error;
use flist::io::InputFormat;
use flist::FileList;
use steal::Comm;

/// The entries a tool acts on. Every tool that walks PATHs or reads `-i` takes one, so that a
/// list is read with the same formats and the same errors everywhere.
///
/// ```
/// use mfu::Input;
/// // `mfu-rs rm -i old.list`, from Rust:
/// let mut options = mfu::rm::Options::default();
/// options.input = Input::file(b"old.list");
/// assert!(options.input.is_list() && options.input.walk_paths().is_empty());
/// ```
// A list's records live on the heap; its columns' headers (a few hundred bytes) are inline.
// An Input is made once per run: boxing the list would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Input {
    /// Walk these paths, each with everything below it (the PATHs of the command line).
    Paths(Vec<Vec<u8>>),
    /// Read this list file (`-i FILE`; `-` is standard input): v3/v4 cache, text or
    /// NUL-separated, its lines read as `format` says ([`flist::io::read_as`]).
    File {
        /// The list's path, as bytes.
        path: Vec<u8>,
        /// How the lines of a text list are read (`--input-format`).
        format: InputFormat,
    },
    /// This rank's part of a list already in memory: used as read from a file would be, with
    /// no file written (each rank hands its own part; together they are the whole list).
    List(FileList),
}

impl Default for Input {
    /// No paths: a tool given it refuses to run, as the command line does without PATH or `-i`.
    fn default() -> Input {
        Input::Paths(Vec::new())
    }
}

/// What [`Input::list`] made: the tool's walk of the paths, or a list (read, or in memory).
// Made once per run and taken apart at once: boxing the list would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Listed<W> {
    /// What the tool's walk returned.
    Walked(W),
    /// This rank's part of the list (not stat'ed again: the tool does what its list needs).
    Read(FileList),
}

impl Input {
    /// Walk `paths` (anything that is bytes: `b"dir"`, `Vec<u8>`...).
    pub fn paths<P: AsRef<[u8]>>(paths: &[P]) -> Input {
        Input::Paths(paths.iter().map(|p| p.as_ref().to_vec()).collect())
    }

    /// Read the list file `path`, its lines read as [`InputFormat::Auto`] says.
    pub fn file(path: impl AsRef<[u8]>) -> Input {
        Input::File {
            path: path.as_ref().to_vec(),
            format: InputFormat::Auto,
        }
    }

    /// The paths to walk; none for a list.
    pub fn walk_paths(&self) -> &[Vec<u8>] {
        match self {
            Input::Paths(p) => p,
            Input::File { .. } | Input::List(_) => &[],
        }
    }

    /// True for a list (a file or in memory), false for paths to walk.
    pub fn is_list(&self) -> bool {
        !matches!(self, Input::Paths(_))
    }

    /// The list file's path, for messages; `None` for paths or a list in memory.
    pub fn list_file(&self) -> Option<&[u8]> {
        match self {
            Input::File { path, .. } => Some(path),
            Input::Paths(_) | Input::List(_) => None,
        }
    }

    /// The list the tool acts on: the paths walked by `walk` (the tool's own walk: its detail,
    /// hooks and depth limits), the list file read (each rank its share), or a copy of this
    /// rank's part of the list in memory. An unreadable or damaged list file is `Err` on every
    /// rank, naming the file (`read list FILE: ...`). Collective.
    pub fn list<W>(
        &self,
        comm: &dyn Comm,
        walk: impl FnOnce(&[Vec<u8>]) -> W,
    ) -> Result<Listed<W>, Error> {
        match self {
            Input::Paths(paths) => Ok(Listed::Walked(walk(paths))),
            Input::File { path, format } => flist::io::read_as(comm, path.as_slice(), *format)
                .map(Listed::Read)
                .map_err(|e| Error::new(read_error(path, &e))),
            Input::List(list) => Ok(Listed::Read(list.clone())),
        }
    }
}

/// `e` as the message of an unreadable list: as the reader says it when that names the file
/// (`open list FILE: ...`), else prefixed with `read list FILE: ` (a damaged list's offset
/// alone does not say which list).
fn read_error(path: &[u8], e: &flist::Error) -> String {
    let shown = flist::path::display(path);
    let msg = e.to_string();
    if msg.contains(shown.as_ref()) {
        msg
    } else {
        format!("read list {shown}: {msg}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::{Detail, FileType};

    #[test]
    fn each_variant_gives_its_list_and_a_bad_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("list");
        std::fs::write(&file, b"/a\n/b\n").unwrap();
        let file = file.as_os_str().as_encoded_bytes().to_vec();
        let mut memory = FileList::new(Detail::Lite);
        memory.push(b"/in/memory", FileType::File, None);
        let out = steal::local::run(1, |comm| {
            let walk = |p: &[Vec<u8>]| p.len();
            let walked = match Input::paths(&[b"x", b"y"]).list(comm, walk).unwrap() {
                Listed::Walked(n) => n,
                Listed::Read(_) => panic!("paths are walked"),
            };
            let read = match Input::file(&file).list(comm, walk).unwrap() {
                Listed::Read(l) => l.iter().map(|e| e.path.to_vec()).collect::<Vec<_>>(),
                Listed::Walked(_) => panic!("a file is read"),
            };
            let kept = match Input::List(memory.clone()).list(comm, walk).unwrap() {
                Listed::Read(l) => l.iter().map(|e| e.path.to_vec()).collect::<Vec<_>>(),
                Listed::Walked(_) => panic!("a list is not walked"),
            };
            let missing = Input::file(b"/nonexistent/list")
                .list(comm, walk)
                .unwrap_err();
            (walked, read, kept, missing.to_string())
        });
        let (walked, read, kept, missing) = &out[0];
        assert_eq!(*walked, 2);
        assert_eq!(read, &[b"/a".to_vec(), b"/b".to_vec()]);
        assert_eq!(kept, &[b"/in/memory".to_vec()]);
        assert!(missing.contains("/nonexistent/list"), "{missing}");
    }
}
