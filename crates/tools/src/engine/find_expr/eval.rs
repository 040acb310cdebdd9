//! Evaluating the expression on this rank's entries: in parallel on rayon workers, each entry
//! from left to right with short-circuits, `--exec` commands run where their entry is (one per
//! worker at a time), printed paths kept in list order.

use super::expr::Expr;
use super::resolve::Node;
use crate::engine::context::Context;
use crate::engine::lustre::LustreHandle;
use flist::path::display;
use flist::record::Entry;
use flist::FileList;
use lustre_sys::Layout;
use rayon::prelude::*;
use rustix::fs::{Mode, OFlags};
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries per rayon task without `--exec` (tests take nanoseconds: amortise the task).
const BATCH: usize = 512;

/// What evaluating this rank's entries gave.
#[derive(Debug, Default)]
pub struct Evaluated {
    /// Indices of the entries for which the whole expression is true, ascending.
    pub matched: Vec<usize>,
    /// The bytes `--print`/`--print0` wrote, in list order.
    pub printed: Vec<u8>,
}

/// How a `--exec` command ended, as a job log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// Its exit status.
    pub exitval: i32,
}

/// Where `--exec` commands that ran to their end are recorded, and looked up so that a rerun
/// does not run them again (`find --exec` continuing from a checkpoint). A command is named by
/// its `--exec`'s place in the expression (0 first), the entry's path (a command without `{}`
/// runs once per entry too) and its words with `{}` replaced.
pub trait CommandLog: Sync {
    /// How the command ended in an earlier run, when it ran to its end there.
    fn finished(&self, exec: usize, path: &[u8], argv: &[OsString]) -> Option<Ended>;
    /// The command ran to its end now (it exited: one killed by a signal is not recorded, and
    /// runs again on a rerun).
    fn record(&self, exec: usize, path: &[u8], argv: &[OsString], ended: Ended);
}

/// Evaluates one expression; its counters are read by the progress reports.
pub struct Evaluator<'a> {
    expr: Option<&'a Expr<Node>>,
    has_exec: bool,
    /// Addresses of the `--exec` leaves of `expr`, in expression order (a leaf's place names
    /// its commands in `log`; addresses are only compared).
    execs: Vec<usize>,
    /// Where commands are recorded and looked up.
    log: Option<&'a dyn CommandLog>,
    /// Send the commands' stdout to stderr (stdout carries a list).
    commands_to_stderr: bool,
    /// Where failed commands are reported; its stop flag skips the entries left.
    context: &'a Context,
    /// Entries evaluated on this rank.
    pub examined: AtomicU64,
    /// Entries matched on this rank.
    pub matched: AtomicU64,
    /// Commands that failed or could not start on this rank (each reported).
    pub failed: AtomicU64,
    /// Commands not run again on this rank: an earlier run's log says they ran to their end.
    pub recorded: AtomicU64,
    /// Where the Lustre tests read layouts (`None`: no PATH is on Lustre, the tests are false).
    lustre: Option<LustreHandle>,
    /// Entries whose layout or MDT index could not be read on this rank (each reported; their
    /// Lustre tests are false).
    pub unreadable: AtomicU64,
}

impl<'a> Evaluator<'a> {
    /// An evaluator of `expr` (`None` matches everything). With `commands_to_stderr` the
    /// `--exec` commands write their stdout to stderr. Failed commands are reported to
    /// `context`; entries are skipped once its stop flag is set.
    pub fn new(
        expr: Option<&'a Expr<Node>>,
        commands_to_stderr: bool,
        context: &'a Context,
    ) -> Evaluator<'a> {
        let has_exec = expr.is_some_and(|e| e.any_leaf(&|n| matches!(n, Node::Exec(_))));
        let execs = std::cell::RefCell::new(Vec::new());
        if let Some(e) = expr {
            e.any_leaf(&|n| {
                if matches!(n, Node::Exec(_)) {
                    execs.borrow_mut().push(n as *const Node as usize);
                }
                false
            });
        }
        Evaluator {
            expr,
            has_exec,
            execs: execs.into_inner(),
            log: None,
            commands_to_stderr,
            context,
            examined: AtomicU64::new(0),
            matched: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            lustre: None,
            unreadable: AtomicU64::new(0),
        }
    }

    /// Read layouts for the Lustre tests through `api`; without it they are false for every
    /// entry (no PATH is on Lustre) and no call is made.
    pub fn with_lustre(mut self, api: Option<LustreHandle>) -> Evaluator<'a> {
        self.lustre = api;
        self
    }

    /// Record the commands that run to their end in `log`, and skip those it says an earlier
    /// run finished (their recorded exit status decides the `--exec`).
    pub fn with_log(mut self, log: &'a dyn CommandLog) -> Evaluator<'a> {
        self.log = Some(log);
        self
    }

    /// Evaluate every entry of `list` (local, parallel).
    pub fn run(&self, list: &FileList) -> Evaluated {
        // With commands, one entry per task, so that commands run side by side.
        let batch = if self.has_exec { 1 } else { BATCH };
        let parts: Vec<Evaluated> = (0..list.len().div_ceil(batch))
            .into_par_iter()
            .map(|b| {
                let mut part = Evaluated::default();
                for i in b * batch..((b + 1) * batch).min(list.len()) {
                    if self.context.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if self.entry(list.entry(i), &mut part.printed) {
                        part.matched.push(i);
                        self.matched.fetch_add(1, Ordering::Relaxed);
                    }
                    self.examined.fetch_add(1, Ordering::Relaxed);
                }
                part
            })
            .collect();
        let mut all = Evaluated::default();
        for p in parts {
            all.matched.extend(p.matched);
            all.printed.extend(p.printed);
        }
        all
    }

    /// Whether the expression is true for `e`, running its actions on the way.
    fn entry(&self, e: Entry<'_>, printed: &mut Vec<u8>) -> bool {
        let Some(expr) = self.expr else { return true };
        // Read once per entry, whatever the number of Lustre tests.
        let mut layout: Option<Option<Layout>> = None;
        let mut mdt: Option<Option<u32>> = None;
        expr.eval(&mut |node| match node {
            Node::Test(t) => t.matches(e),
            Node::Lustre(t) if t.needs_mdt() => {
                let mdt = mdt.get_or_insert_with(|| self.mdt_of(e));
                t.matches(None, *mdt)
            }
            Node::Lustre(t) => {
                let layout = layout.get_or_insert_with(|| self.layout_of(e));
                t.matches(layout.as_ref(), None)
            }
            Node::Print { nul } => {
                printed.extend_from_slice(e.path);
                printed.push(if *nul { 0 } else { b'\n' });
                true
            }
            Node::Exec(words) => match self.exec(node, words, e.path) {
                Ok(()) => true,
                Err(why) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    self.context.error(format!(
                        "--exec {} on {}: {why}",
                        display(words[0].as_bytes()),
                        display(e.path)
                    ));
                    false
                }
            },
        })
    }
}

impl Evaluator<'_> {
    /// The layout of `e` (a directory's default layout), or `None`: no Lustre PATH, not a
    /// regular file or directory, no layout, or unreadable (reported).
    fn layout_of(&self, e: Entry<'_>) -> Option<Layout> {
        let api = self.lustre.as_ref()?;
        if !may_have_layout(e) {
            return None;
        }
        match api.layout_at(flist::path::as_path(e.path)) {
            Ok(l) => l,
            Err(err) => {
                self.lustre_failed(e.path, "read the layout of", &err);
                None
            }
        }
    }

    /// The MDT index of `e`'s inode, or `None`: no Lustre PATH, not a regular file or
    /// directory (opening a device or a FIFO could act on it), or unreadable (reported).
    fn mdt_of(&self, e: Entry<'_>) -> Option<u32> {
        let api = self.lustre.as_ref()?;
        let path = flist::path::as_path(e.path);
        let openable = match e.kind {
            flist::FileType::File | flist::FileType::Dir => true,
            flist::FileType::Unknown => rustix::fs::lstat(path).is_ok_and(|st| {
                let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
                kind.is_file() || kind.is_dir()
            }),
            _ => false,
        };
        if !openable {
            return None;
        }
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let opened = rustix::fs::open(path, flags, Mode::empty()).map_err(std::io::Error::from);
        match opened.and_then(|fd| api.mdt_index(fd.as_fd())) {
            Ok(mdt) => Some(mdt),
            Err(err) if lustre_sys::os_errno(&err) == Some(libc::ENOTTY) => None,
            Err(err) => {
                self.lustre_failed(e.path, "get the MDT index of", &err);
                None
            }
        }
    }

    fn lustre_failed(&self, path: &[u8], what: &str, err: &std::io::Error) {
        self.unreadable.fetch_add(1, Ordering::Relaxed);
        self.context
            .error(format!("{what} {}: {err}", display(path)));
    }

    /// Run the command of the `--exec` leaf `node` for `path` (or take how it ended from the
    /// log of an earlier run): `Err` says why it failed.
    fn exec(&self, node: &Node, words: &[OsString], path: &[u8]) -> Result<(), String> {
        let Some(log) = self.log else {
            return run_command(&command_line(words, path), self.commands_to_stderr).map_err(|f| {
                match f {
                    Failure::Exit(_, why) | Failure::Other(why) => why,
                }
            });
        };
        let exec = self
            .execs
            .iter()
            .position(|&n| n == node as *const Node as usize)
            .expect("an --exec leaf of the expression");
        let argv = command_line(words, path);
        if let Some(ended) = log.finished(exec, path, &argv) {
            self.recorded.fetch_add(1, Ordering::Relaxed);
            return match ended.exitval {
                0 => Ok(()),
                code => Err(format!("exit status {code} (in an earlier run)")),
            };
        }
        let ran = run_command(&argv, self.commands_to_stderr);
        match &ran {
            Ok(()) => log.record(exec, path, &argv, Ended { exitval: 0 }),
            Err(Failure::Exit(code, _)) => log.record(exec, path, &argv, Ended { exitval: *code }),
            Err(_) => {}
        }
        ran.map_err(|f| match f {
            Failure::Exit(_, why) | Failure::Other(why) => why,
        })
    }
}

/// Whether `e` can have a Lustre layout: a regular file or a directory (default layout), or
/// an entry of unknown type (asked by path, which opens nothing).
fn may_have_layout(e: Entry<'_>) -> bool {
    matches!(
        e.kind,
        flist::FileType::File | flist::FileType::Dir | flist::FileType::Unknown
    )
}

/// Why a command failed: it exited with a status (which a log records), or it did not run to
/// its end (killed by a signal, could not start).
enum Failure {
    Exit(i32, String),
    Other(String),
}

/// `words` with every `{}` replaced by `path` (inside words too, as GNU find does).
pub fn command_line(words: &[OsString], path: &[u8]) -> Vec<OsString> {
    words
        .iter()
        .map(|w| {
            let w = w.as_bytes();
            let mut out = Vec::with_capacity(w.len() + path.len());
            let mut rest = w;
            while let Some(at) = rest.windows(2).position(|p| p == b"{}") {
                out.extend_from_slice(&rest[..at]);
                out.extend_from_slice(path);
                rest = &rest[at + 2..];
            }
            out.extend_from_slice(rest);
            OsString::from_vec(out)
        })
        .collect()
}

/// Run the command `argv` and wait for it: `Err` says why it failed.
fn run_command(argv: &[OsString], to_stderr: bool) -> Result<(), Failure> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    if to_stderr {
        let err = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Failure::Other(format!("duplicate stderr: {e}")))?;
        cmd.stdout(Stdio::from(err));
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(match (s.code(), s.signal()) {
            (Some(code), _) => Failure::Exit(code, format!("exit status {code}")),
            (None, Some(sig)) => Failure::Other(format!("killed by signal {sig}")),
            _ => Failure::Other(format!("{s}")),
        }),
        Err(e) => Err(Failure::Other(format!("cannot run: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flist::filter::Test;
    use flist::{Detail, FileType};

    #[test]
    fn braces_become_the_path_wherever_they_are() {
        let words: Vec<OsString> = ["cp", "{}", "{}.bak", "x{}y{}", "{", "}"]
            .iter()
            .map(OsString::from)
            .collect();
        let got = command_line(&words, b"/d/a\xff b");
        let want: Vec<&[u8]> = vec![
            b"cp",
            b"/d/a\xff b",
            b"/d/a\xff b.bak",
            b"x/d/a\xff by/d/a\xff b",
            b"{",
            b"}",
        ];
        assert_eq!(got.iter().map(|w| w.as_bytes()).collect::<Vec<_>>(), want);
    }

    fn list(names: &[&str]) -> FileList {
        let mut l = FileList::new(Detail::Lite);
        for n in names {
            l.push(n.as_bytes(), FileType::File, None);
        }
        l
    }

    #[test]
    fn prints_in_order_and_commands_decide() {
        let context = Context::default();
        let l = list(&["/a.c", "/b.h", "/c.c", "/d.c"]);
        let c = Node::Test(Test::fnmatch_name(b"*.c").unwrap());
        // `*.c` and `true` succeeds, then print; `false` fails and stops the And.
        let exec = |w: &[&str]| Node::Exec(w.iter().map(OsString::from).collect());
        let expr = Expr::Or(vec![
            Expr::And(vec![
                Expr::Leaf(c),
                Expr::Leaf(exec(&["test", "{}", "!=", "/c.c"])),
                Expr::Leaf(Node::Print { nul: false }),
            ]),
            Expr::Leaf(Node::Print { nul: true }),
        ]);
        let ev = Evaluator::new(Some(&expr), true, &context);
        let out = ev.run(&l);
        assert_eq!(out.printed, b"/a.c\n/b.h\0/c.c\0/d.c\n");
        assert_eq!(out.matched, [0, 1, 2, 3]);
        assert_eq!(ev.examined.load(Ordering::Relaxed), 4);
        // `test` failing is a failed command.
        assert_eq!(ev.failed.load(Ordering::Relaxed), 1);
        let missing = Expr::Leaf(exec(&["/no/such/command", "{}"]));
        let ev = Evaluator::new(Some(&missing), true, &context);
        assert!(ev.run(&l).matched.is_empty());
        assert_eq!(ev.failed.load(Ordering::Relaxed), 4);
        let ev = Evaluator::new(None, false, &context);
        assert_eq!(ev.run(&l).matched, [0, 1, 2, 3]);
    }
}
