//! The commands of `sh`, each run by every rank on its part of the list (collective), the
//! answer written by rank 0.

use super::format::{long_columns, stat_block};
use super::Options;
use crate::engine::remove::{add_ancestors, remove, Remover, Wording};
use crate::engine::wording::entries;
use flist::beneath::{list_tops, Roots};
use flist::path::{basename, display, is_prefix, normalize, parent};
use flist::sort::{parse_keys, Field, Key};
use flist::{FileList, FileType};
use serde_bytes::Bytes;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::sync::Arc;
use steal::ordered::in_rank_order;
use steal::progress::human_bytes;
use steal::typed;
use steal::{Comm, CommExt};

/// What the session does after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Read the next command.
    Go,
    /// End the session (`quit`).
    Quit,
}

/// The help text.
pub const HELP: &str = "\
Commands (PATH: relative to the current directory, or absolute):
  ls [-l] [PATH]    entries in the directory (or the entry itself), in the sort order
  cd [DIR]          change directory (no DIR: where the session started)
  pwd               print the current directory
  du [DIR]          bytes and entries of each subdirectory (itself included), biggest first,
                    then the total below DIR
  find [TESTS]      entries at and below the current directory that pass the find tool's tests
                    (--name, --size, --mtime, --type, --not, --or, ...); they become the selection
  sort KEYS         order of ls: name, size, mtime, atime, ctime, uid, gid (-KEY: descending)
  stat PATH         the entry's metadata
  rm [-f] [PATH...] remove PATHs (with everything beneath them), or without PATH the selection
                    of the last find; asks first, with the count and bytes (-f: does not ask)
  write FILE        write the selection (or, with none, everything below the current
                    directory) as a list
  help              this text
  quit, exit        end the session
";

/// A command's arguments split into its options and the rest.
type Split<'w> = (Vec<&'w [u8]>, Vec<&'w Vec<u8>>);

/// The state of a session on one rank.
pub struct Shell<'a> {
    comm: &'a dyn Comm,
    options: &'a Options,
    /// This rank's part of the list.
    list: FileList,
    /// The current directory.
    cwd: Vec<u8>,
    /// Where the session started.
    home: Vec<u8>,
    /// The order of `ls`.
    keys: Vec<Key>,
    /// The last `find`'s matches (indices into `list`), until the list changes.
    selection: Option<Vec<usize>>,
    /// Entries removed in the session (over all ranks).
    pub removed: u64,
}

impl<'a> Shell<'a> {
    /// A session on `list` (normalised paths). Collective: the start directory is the list's
    /// single topmost directory, or `/`.
    pub fn new(comm: &'a dyn Comm, options: &'a Options, list: FileList) -> Shell<'a> {
        let tops = list_tops(comm, list.iter().map(|e| e.path));
        let home = match &tops[..] {
            [one] => one.clone(),
            _ => b"/".to_vec(),
        };
        Shell {
            comm,
            options,
            list,
            cwd: home.clone(),
            home,
            keys: vec![Key {
                field: Field::Name,
                descending: false,
            }],
            selection: None,
            removed: 0,
        }
    }

    /// The prompt: `mfu-rs sh:/current/dir> `.
    pub fn prompt(&self) -> String {
        format!("mfu-rs sh:{}> ", display(&self.cwd))
    }

    /// Run one command (its words). Collective; `Err` (the same on every rank) says why it
    /// failed.
    pub fn execute(&mut self, words: &[Vec<u8>]) -> Result<Next, String> {
        let args = &words[1..];
        let flags = |allowed: &[&[u8]]| -> Result<Split<'_>, String> {
            let mut f = Vec::new();
            let mut rest = Vec::new();
            for a in args {
                if a.starts_with(b"-") && a.len() > 1 {
                    if !allowed.contains(&&a[..]) {
                        return Err(format!(
                            "{}: unknown option {}",
                            display(&words[0]),
                            display(a)
                        ));
                    }
                    f.push(&a[..]);
                } else {
                    rest.push(a);
                }
            }
            Ok((f, rest))
        };
        match &words[0][..] {
            b"help" | b"?" => self.say(HELP.as_bytes()),
            b"quit" | b"exit" => return Ok(Next::Quit),
            b"pwd" => {
                let mut line = self.cwd.clone();
                line.push(b'\n');
                self.say(&line);
            }
            b"cd" => {
                let target = match args {
                    [] => self.home.clone(),
                    [dir] => self.resolve(dir),
                    _ => return Err("cd: one directory at most".into()),
                };
                if !self.is_dir(&target) {
                    return Err(format!(
                        "cd {}: no such directory in the list",
                        display(&target)
                    ));
                }
                self.cwd = target;
            }
            b"ls" => {
                let (f, rest) = flags(&[b"-l"])?;
                let long = !f.is_empty();
                let targets: Vec<Vec<u8>> = if rest.is_empty() {
                    vec![self.cwd.clone()]
                } else {
                    rest.iter().map(|p| self.resolve(p)).collect()
                };
                for t in targets {
                    self.ls(&t, long)?;
                }
            }
            b"du" => {
                let target = match args {
                    [] => self.cwd.clone(),
                    [dir] => self.resolve(dir),
                    _ => return Err("du: one directory at most".into()),
                };
                self.du(&target)?;
            }
            b"find" => self.find(args)?,
            b"sort" => {
                let [spec] = args else {
                    return Err("sort: give the keys, e.g. `sort -size,name`".into());
                };
                self.keys =
                    parse_keys(&String::from_utf8_lossy(spec)).map_err(|e| format!("sort: {e}"))?;
            }
            b"stat" => {
                if args.is_empty() {
                    return Err("stat: give a PATH".into());
                }
                for p in args {
                    let path = self.resolve(p);
                    self.stat(&path)?;
                }
            }
            b"rm" => {
                let (f, rest) = flags(&[b"-f", b"-r", b"-rf", b"-fr"])?;
                let force = f.iter().any(|f| f.contains(&b'f'));
                // Refused before `..` is resolved away, as rm(1) refuses it: `rm ..` would
                // remove the directory holding the current one.
                if let Some(dot) = rest.iter().find(|p| names_dot(p)) {
                    return Err(format!(
                        "rm: refusing to remove '.' or '..' directory: '{}' (nothing removed)",
                        display(dot)
                    ));
                }
                // An empty name would resolve to the current directory: as rm(1), it names
                // nothing.
                if rest.iter().any(|p| p.is_empty()) {
                    return Err("rm '': No such file or directory (nothing removed)".into());
                }
                let paths: Vec<Vec<u8>> = rest.iter().map(|p| self.resolve(p)).collect();
                self.rm(&paths, force)?;
            }
            b"write" => {
                let [file] = args else {
                    return Err("write: give the FILE to write the list to".into());
                };
                self.write(file)?;
            }
            other => return Err(format!("{}: unknown command (try help)", display(other))),
        }
        Ok(Next::Go)
    }

    /// Output from rank 0.
    fn say(&self, bytes: &[u8]) {
        if self.comm.rank() == 0 {
            self.options.context.output(bytes);
        }
    }

    /// `p` made absolute from the current directory, normalised.
    fn resolve(&self, p: &[u8]) -> Vec<u8> {
        normalize(p, &self.cwd)
    }

    /// True when `path` is a directory of the list, or holds entries of it. Collective.
    fn is_dir(&self, path: &[u8]) -> bool {
        self.comm.any(self.list.iter().any(|e| {
            (e.path == path && e.kind == FileType::Dir)
                || (e.path != path && is_prefix(path, e.path))
        }))
    }

    /// The entries of every rank for which `keep` holds, on rank 0 (empty elsewhere).
    /// Collective.
    fn gather(&self, keep: impl Fn(usize) -> bool) -> FileList {
        let mut mine = Vec::new();
        for i in (0..self.list.len()).filter(|&i| keep(i)) {
            self.list.encode_record(i, &mut mine);
        }
        let mut all = self.list.empty_like();
        in_rank_order(self.comm, mine, |part| all.decode_records(part));
        all
    }

    fn ls(&self, target: &[u8], long: bool) -> Result<(), String> {
        let is_dir = self.is_dir(target);
        let found = self.gather(|i| {
            let p = self.list.path(i);
            if is_dir {
                p != target && parent(p) == target
            } else {
                p == target
            }
        });
        if !is_dir && !self.comm.any(!found.is_empty()) {
            return Err(format!("ls {}: not in the list", display(target)));
        }
        if self.comm.rank() != 0 {
            return Ok(());
        }
        let mut order: Vec<usize> = (0..found.len()).collect();
        order.sort_by(|&a, &b| self.compare(&found, a, b));
        let mut out = Vec::new();
        for i in order {
            let e = found.entry(i);
            if long {
                out.extend_from_slice(long_columns(e.kind, e.meta.as_ref()).as_bytes());
                out.push(b' ');
            }
            out.extend_from_slice(if is_dir { basename(e.path) } else { e.path });
            if e.kind == FileType::Dir {
                out.push(b'/');
            }
            out.push(b'\n');
        }
        self.say(&out);
        Ok(())
    }

    /// The order of the sort keys, then the name.
    fn compare(&self, list: &FileList, a: usize, b: usize) -> Ordering {
        let (ea, eb) = (list.entry(a), list.entry(b));
        for k in &self.keys {
            let field = |e: &flist::Entry<'_>| -> u64 {
                let Some(m) = e.meta else { return 0 };
                match k.field {
                    Field::Size => m.size,
                    Field::Mtime => m.mtime as u64,
                    Field::Atime => m.atime as u64,
                    Field::Ctime => m.ctime as u64,
                    Field::Uid | Field::User => u64::from(m.uid),
                    Field::Gid | Field::Group => u64::from(m.gid),
                    Field::Name => 0,
                }
            };
            let o = if k.field == Field::Name {
                basename(ea.path).cmp(basename(eb.path))
            } else {
                field(&ea).cmp(&field(&eb))
            };
            let o = if k.descending { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        ea.path.cmp(eb.path)
    }

    fn du(&self, target: &[u8]) -> Result<(), String> {
        if !self.is_dir(target) {
            return Err(format!(
                "du {}: no such directory in the list",
                display(target)
            ));
        }
        // Per child of the target: (bytes, entries, is a directory); the total.
        let mut mine: BTreeMap<Vec<u8>, (u64, u64, bool)> = BTreeMap::new();
        let mut total = (0u64, 0u64);
        let under = if target == b"/" { 1 } else { target.len() + 1 };
        for e in self.list.iter() {
            if e.path == target || !is_prefix(target, e.path) {
                continue;
            }
            let size = match (e.kind, e.meta) {
                (FileType::Dir, _) | (_, None) => 0,
                (_, Some(m)) => m.size,
            };
            total.0 += size;
            total.1 += 1;
            let rest = &e.path[under..];
            let (child, deeper) = match rest.iter().position(|&b| b == b'/') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            let slot = mine.entry(child.to_vec()).or_insert((0, 0, false));
            slot.0 += size;
            slot.1 += 1;
            slot.2 |= deeper || e.kind == FileType::Dir;
        }
        // One (name, bytes, entries, is a directory) after another.
        let mut bytes = Vec::new();
        for (name, (b, n, dir)) in &mine {
            typed::encode_into(&(Bytes::new(name), b, n, dir), &mut bytes);
        }
        let mut all: BTreeMap<Vec<u8>, (u64, u64, bool)> = BTreeMap::new();
        in_rank_order(self.comm, bytes, |part| {
            for row in typed::each::<(&Bytes, u64, u64, bool)>(part) {
                let (name, b, n, dir) = typed::sent(row);
                let slot = all.entry(name.to_vec()).or_insert((0, 0, false));
                slot.0 += b;
                slot.1 += n;
                slot.2 |= dir;
            }
        });
        let (bytes, entries) = (self.comm.sum(total.0), self.comm.sum(total.1));
        let mut rows: Vec<_> = all.into_iter().filter(|(_, v)| v.2).collect();
        rows.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
        let mut out = Vec::new();
        for (name, (b, n, _)) in rows {
            out.extend_from_slice(format!("{:>12} {b:>15} {n:>10}  ", human_bytes(b)).as_bytes());
            out.extend_from_slice(&name);
            out.extend_from_slice(b"/\n");
        }
        out.extend_from_slice(
            format!(
                "{:>12} {bytes:>15} {entries:>10}  total\n",
                human_bytes(bytes)
            )
            .as_bytes(),
        );
        self.say(&out);
        Ok(())
    }

    fn find(&mut self, args: &[Vec<u8>]) -> Result<(), String> {
        let words: Vec<OsString> = args.iter().map(|w| OsString::from_vec(w.clone())).collect();
        let expr = match (self.options.find_parser, words.is_empty()) {
            (_, true) => None,
            (Some(parse), false) => parse(&words).map_err(|e| format!("find: {e}"))?,
            (None, false) => return Err("find: no parser for tests here".into()),
        };
        let cwd = self.cwd.clone();
        let here: Vec<usize> = (0..self.list.len())
            .filter(|&i| is_prefix(&cwd, self.list.path(i)))
            .collect();
        let candidates = self.list.select(here.iter().copied());
        let matched = crate::find::select(self.comm, &candidates, expr, &self.options.context)
            .map_err(|e| format!("find: {e}"))?;
        let selection: Vec<usize> = matched.into_iter().map(|i| here[i]).collect();
        let found = self.gather(|i| selection.binary_search(&i).is_ok());
        if self.comm.rank() == 0 {
            let mut paths: Vec<&[u8]> = found.iter().map(|e| e.path).collect();
            paths.sort_unstable();
            let mut out = Vec::new();
            for p in paths {
                out.extend_from_slice(p);
                out.push(b'\n');
            }
            self.say(&out);
        }
        self.selection = Some(selection);
        Ok(())
    }

    fn stat(&self, path: &[u8]) -> Result<(), String> {
        let found = self.gather(|i| self.list.path(i) == path);
        if !self.comm.any(!found.is_empty()) {
            return Err(format!("stat {}: not in the list", display(path)));
        }
        if let Some(e) = found.iter().next() {
            self.say(stat_block(&display(e.path), e.kind, e.meta.as_ref()).as_bytes());
        }
        Ok(())
    }

    /// The indices of the entries that `paths` name, with everything beneath them; without
    /// paths, the last find's selection.
    fn targets(&self, what: &str, paths: &[Vec<u8>]) -> Result<Vec<usize>, String> {
        if paths.is_empty() {
            return self.selection.clone().ok_or_else(|| {
                format!("{what}: nothing selected: run find first, or name the paths")
            });
        }
        for p in paths {
            let here = self.list.iter().any(|e| is_prefix(p, e.path));
            if !self.comm.any(here) {
                return Err(format!("{what} {}: not in the list", display(p)));
            }
        }
        Ok((0..self.list.len())
            .filter(|&i| paths.iter().any(|p| is_prefix(p, self.list.path(i))))
            .collect())
    }

    /// The directories (of every rank) above an entry of the list that `chosen` (this
    /// rank's selected indices) leaves out: those a removal of the selection must keep.
    /// Collective.
    fn holding_unselected(&self, chosen: &[usize]) -> HashSet<Vec<u8>> {
        let chosen: HashSet<usize> = chosen.iter().copied().collect();
        let mut mine = HashSet::new();
        for i in (0..self.list.len()).filter(|i| !chosen.contains(i)) {
            add_ancestors(&mut mine, self.list.path(i));
        }
        let mine = typed::ByteStrings(mine.into_iter().collect());
        self.comm
            .all_gather(&mine)
            .into_iter()
            .flat_map(|p| p.0)
            .collect()
    }

    fn rm(&mut self, paths: &[Vec<u8>], force: bool) -> Result<(), String> {
        let chosen = self.targets("rm", paths)?;
        let selected = self.list.select(chosen.iter().copied());
        let bytes: u64 = selected
            .iter()
            .filter(|e| e.kind != FileType::Dir)
            .filter_map(|e| e.meta.map(|m| m.size))
            .sum();
        let (count, bytes) = (self.comm.sum(selected.len() as u64), self.comm.sum(bytes));
        if count == 0 {
            self.say(b"rm: nothing to remove\n");
            return Ok(());
        }
        let question = format!(
            "rm: remove {} ({}, {bytes} bytes)? [y/N] ",
            entries(count),
            human_bytes(bytes)
        );
        if !(force || self.options.yes || super::confirm(self.comm, self.options, &question)) {
            self.say(b"rm: nothing removed\n");
            return Ok(());
        }
        let tops = list_tops(self.comm, self.list.iter().map(|e| e.path));
        let mut remover = Remover::new(Arc::new(Roots::of_list_tops(&tops)), Wording::Explained);
        // With PATHs everything listed beneath them goes: a directory that is not empty then
        // holds entries created since the list was loaded, a failure ("Directory not empty",
        // named, exit 1, as the rm tool). A selection of find's may leave listed entries
        // beneath a selected directory: that one stays, counted in the summary; any other
        // selected directory that is not empty fails as with PATHs.
        if paths.is_empty() {
            remover.keep_nonempty = true;
            remover.keep_only = Some(self.holding_unselected(&chosen));
        }
        let interrupted = remove(self.comm, &selected, &remover, &self.options.context.stop);
        for e in remover.take_errors() {
            self.options.context.error(e);
        }
        let totals = remover.totals(self.comm);
        // What is gone leaves the list (checked where each entry is listed).
        let gone: Vec<usize> = chosen
            .into_iter()
            .filter(|&i| {
                std::fs::symlink_metadata(flist::path::as_path(self.list.path(i))).is_err()
            })
            .collect();
        let mut index = 0;
        self.list.retain(|_| {
            let keep = gone.binary_search(&index).is_err();
            index += 1;
            keep
        });
        self.selection = None;
        let went = totals.files + totals.dirs;
        self.removed += went;
        let mut said = format!(
            "Removed {} ({} files, {} directories)\n",
            entries(went),
            totals.files,
            totals.dirs
        );
        if totals.kept > 0 {
            said.push_str(&format!(
                "Kept {} that still {} entries not selected\n",
                directories(totals.kept),
                if totals.kept == 1 { "holds" } else { "hold" }
            ));
        }
        self.say(said.as_bytes());
        if totals.failed > 0 || interrupted {
            let held = match totals.held {
                0 => String::new(),
                1 => ", nor the directory that holds them".to_string(),
                n => format!(", nor the {n} directories that hold them"),
            };
            return Err(format!(
                "rm: {} could not be removed (named above){held}{}",
                entries(totals.failed),
                if interrupted { " (interrupted)" } else { "" }
            ));
        }
        Ok(())
    }

    fn write(&self, file: &[u8]) -> Result<(), String> {
        let cwd = &self.cwd;
        let list = match &self.selection {
            Some(s) => self.list.select(s.iter().copied()),
            None => self
                .list
                .select((0..self.list.len()).filter(|&i| is_prefix(cwd, self.list.path(i)))),
        };
        let format = flist::io::default_format(&list);
        flist::io::write(self.comm, &list, file, format)
            .map_err(|e| format!("write {}: {e}", display(file)))?;
        let n = self.comm.sum(list.len() as u64);
        let mut line = format!("Wrote {} to ", entries(n)).into_bytes();
        line.extend_from_slice(file);
        line.push(b'\n');
        self.say(&line);
        Ok(())
    }
}

/// True when `p` names `.` or `..` (trailing slashes aside), which `rm` refuses.
fn names_dot(p: &[u8]) -> bool {
    match p.iter().rposition(|&b| b != b'/') {
        Some(end) => matches!(basename(&p[..=end]), b"." | b".."),
        None => false,
    }
}

/// `1 directory`, `2 directories`.
fn directories(n: u64) -> String {
    if n == 1 {
        "1 directory".to_string()
    } else {
        format!("{n} directories")
    }
}
