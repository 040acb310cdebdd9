//! `mfu-rs sh` (dsh): the command line of [`crate::sh`], and where the session's lines come
//! from: `-c SCRIPT`, a terminal (rustyline: line editing, history), or stdin.

use crate::cli::args::{Common, NoAtimeArg};
use crate::cli::console::{stderr_bytes, Console};
use crate::cli::find::FindArgs;
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::find_expr::expr::Expr;
use crate::engine::find_expr::Primary;
use crate::engine::select::Rules;
use crate::sh::{Input, Options, Report};
use clap::{Args, FromArgMatches};
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, IsTerminal};
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;
use steal::Comm;

/// Options of `mfu-rs sh`.
#[derive(Args, Clone, Debug)]
#[command(
    about = "An interactive shell over a file list loaded once: ls, cd, du, find, rm, write",
    after_help = AFTER_HELP,
    mut_arg("input", |a| a.value_name("LIST").help(
        "Load this list (v3/v4 cache, `path|T` text, one path per line, or NUL-separated) \
         instead of walking PATHs"
    ))
)]
pub struct ShArgs {
    /// Trees to walk (in parallel, with stat) and load.
    #[arg(
        value_name = "PATH",
        required_unless_present = "input",
        conflicts_with = "input"
    )]
    pub paths: Vec<OsString>,
    /// `-i`, `--input-format`: the list to load.
    #[command(flatten)]
    pub input: crate::cli::list_args::ListInput,
    /// Run these commands (separated by `;` or newlines) instead of reading them; an `rm`
    /// confirmation reads the next one as its answer.
    #[arg(short = 'c', long = "command", value_name = "COMMANDS")]
    pub script: Option<OsString>,
    /// Answer yes to every `rm` confirmation (scripts).
    #[arg(short, long)]
    pub yes: bool,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

const AFTER_HELP: &str = "\
The list is walked (or read) once; every command then answers from it, on all ranks (rank 0 \
reads the commands). On a terminal the line can be edited and earlier lines recalled (arrows); \
otherwise each line of stdin is a command. Type `help` in the shell for its commands:
  ls [-l] [PATH], cd [DIR], pwd, du [DIR], find [TESTS], sort KEYS, stat PATH,
  rm [-f] [PATH...], write FILE, help, quit

Examples:
  mpirun -np 16 mfu-rs sh /lustre/project
  mfu-rs sh -c 'cd run1; du' /scratch/me
  mfu-rs sh -i project.mfu -c \"find --name '*.tmp' --mtime +30; rm\" --yes

Exit status: 0 every command succeeded, 1 some command failed (each named on stderr) or a \
signal ended the session, 2 usage error (nothing loaded).";

/// `mfu-rs sh` (dsh).
pub struct Sh;

impl CliTool for Sh {
    const NAME: &'static str = "sh";
    const OLD_NAMES: &'static [&'static str] = &["dsh"];
    const ABOUT: &'static str =
        "An interactive shell over a file list loaded once: ls, cd, du, find, rm, write (dsh)";
    type Args = ShArgs;
    type Options = Options;
    type Report = Report;

    fn common(a: &ShArgs) -> &Common {
        &a.common
    }
    fn noatime(a: &ShArgs) -> bool {
        a.noatime.noatime
    }
    fn named_files(a: &ShArgs) -> Vec<(&'static str, &OsStr)> {
        let paths = a.paths.iter().map(|p| ("PATH", p.as_os_str()));
        let input = a.input.named_files();
        paths.chain(input).collect()
    }
    fn options(a: &ShArgs, _rules: Rules, context: Context) -> Options {
        let script: Box<dyn Input> = match &a.script {
            Some(s) => Box::new(Script::new(s.as_bytes())),
            None if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() => {
                Box::new(Terminal::new())
            }
            None => Box::new(Stdin::default()),
        };
        Options {
            input: a.input.or_paths(&a.paths),
            script: Mutex::new(script),
            find_parser: Some(parse_find),
            yes: a.yes,
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::sh::run(comm, options)
    }
    /// The answers were the output, and each failed command was named as it failed.
    fn render(_: &Report, _: &Console) {}
}

/// The words after `find` as the find tool reads them (no PATH: the current directory).
fn parse_find(words: &[OsString]) -> Result<Option<Expr<Primary>>, String> {
    let cmd = FindArgs::augment_args(clap::Command::new("find").no_binary_name(true));
    // The find tool wants something to search: a list named here, never read (the shell
    // evaluates the expression on its own list).
    let words = [OsString::from("--input"), OsString::from("-")]
        .into_iter()
        .chain(words.iter().cloned());
    // clap's first line says what is wrong; the rest is about the find command line.
    let first_line = |e: clap::Error| {
        let text = e.render().to_string();
        let line = text.lines().next().unwrap_or_default();
        line.trim_start_matches("error: ").to_string()
    };
    let matches = cmd.try_get_matches_from(words).map_err(first_line)?;
    let args = FindArgs::from_arg_matches(&matches).map_err(first_line)?;
    if !args.options.paths.is_empty() {
        return Err("searches the current directory: cd there instead of naming a PATH".into());
    }
    Ok(args.expr)
}

/// The commands of `text`, split at newlines and at `;` outside quotes.
pub fn split_commands(text: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut quote = None;
    let mut escaped = false;
    for &b in text {
        match (quote, b) {
            _ if escaped => escaped = false,
            (None | Some(b'"'), b'\\') => escaped = true,
            (None, b'\'' | b'"') => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b';' | b'\n') => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(b);
    }
    out.push(cur);
    out.retain(|c| c.iter().any(|b| !b.is_ascii_whitespace()));
    out
}

/// `-c COMMANDS`.
struct Script {
    lines: VecDeque<Vec<u8>>,
}

impl Script {
    fn new(text: &[u8]) -> Script {
        Script {
            lines: split_commands(text).into(),
        }
    }
}

impl Input for Script {
    fn line(&mut self, _prompt: &str) -> Option<Vec<u8>> {
        self.lines.pop_front()
    }
    fn answer(&mut self, question: &str) -> Option<Vec<u8>> {
        let a = self.lines.pop_front();
        stderr_bytes(
            format!(
                "{question}{}\n",
                a.as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default()
            )
            .as_bytes(),
        );
        a
    }
}

/// Commands from a stdin that is not a terminal: each line (split at `;`).
#[derive(Default)]
struct Stdin {
    queued: VecDeque<Vec<u8>>,
}

impl Stdin {
    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(c) = self.queued.pop_front() {
                return Some(c);
            }
            let mut line = Vec::new();
            match std::io::stdin().lock().read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => self.queued.extend(split_commands(&line)),
            }
        }
    }
}

impl Input for Stdin {
    fn line(&mut self, _prompt: &str) -> Option<Vec<u8>> {
        self.next()
    }
    fn answer(&mut self, question: &str) -> Option<Vec<u8>> {
        // The question goes to stderr, so that a log of the session shows what was asked.
        let a = self.next();
        stderr_bytes(
            format!(
                "{question}{}\n",
                a.as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default()
            )
            .as_bytes(),
        );
        a
    }
}

/// A terminal: rustyline's editor (line editing, history of the session).
struct Terminal {
    editor: Option<rustyline::DefaultEditor>,
    queued: VecDeque<Vec<u8>>,
}

impl Terminal {
    fn new() -> Terminal {
        Terminal {
            editor: rustyline::DefaultEditor::new().ok(),
            queued: VecDeque::new(),
        }
    }

    fn read(&mut self, prompt: &str) -> Option<Vec<u8>> {
        let Some(editor) = &mut self.editor else {
            stderr_bytes(prompt.as_bytes());
            let mut line = Vec::new();
            return match std::io::stdin().lock().read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line),
            };
        };
        match editor.readline(prompt) {
            Ok(line) => {
                let _ = editor.add_history_entry(line.as_str());
                Some(line.into_bytes())
            }
            // Ctrl-C drops the line being typed, as a shell does.
            Err(rustyline::error::ReadlineError::Interrupted) => Some(Vec::new()),
            Err(_) => None,
        }
    }
}

impl Input for Terminal {
    fn line(&mut self, prompt: &str) -> Option<Vec<u8>> {
        loop {
            if let Some(c) = self.queued.pop_front() {
                return Some(c);
            }
            let line = self.read(prompt)?;
            self.queued.extend(split_commands(&line));
        }
    }
    fn answer(&mut self, question: &str) -> Option<Vec<u8>> {
        self.read(question)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_at_semicolons_outside_quotes() {
        let got = split_commands(b"cd x; find --name 'a;b' ;\n du \"c;\\\"d\"\n;;");
        let want: Vec<&[u8]> = vec![b"cd x", b" find --name 'a;b' ", b" du \"c;\\\"d\""];
        assert_eq!(got, want);
    }

    #[test]
    fn find_words_parse_as_the_find_tool_reads_them() {
        let words = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(
            parse_find(&words(&["--name", "*.c", "--or", "--size", "+1k"]))
                .unwrap()
                .is_some()
        );
        assert!(parse_find(&words(&["--bogus"])).is_err());
        assert!(parse_find(&words(&["somewhere"])).is_err());
    }
}
