//! `mfu-rs find` (dfind) on the command line: clap declares the options (help, completion, value
//! checks), and the expression is rebuilt from the positions clap recorded, because the order
//! of tests, operators and actions is their meaning.
//!
//! `--exec` takes every word after it (clap has no way to report whether its terminator was
//! present), and the words after the first `;` are parsed again as the rest of the command
//! line. That is how a missing `;` is found and refused, as GNU find refuses it.

use crate::cli::args::{Common, MemoryArgs, NoAtimeArg};
use crate::cli::console::Console;
use crate::cli::list_args::{ListInput, ListOutput, Routed};
use crate::cli::tool::CliTool;
use crate::engine::context::{Context, Error};
use crate::engine::find_expr::lustre::LayoutTest;
use crate::engine::select::Rules;
use crate::find::expr::{self, Expr, Token};
use crate::find::{Options, Primary, Report};
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use flist::filter::{AgeUnit, RegexSyntax, Test, TimeField};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Arc;
use steal::Comm;

/// The options as clap declares and parses them. The tests, operators and actions are kept as
/// raw words here; [`FindArgs`] puts them in order.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Find files by name, time, size, owner or type; print them, save a list or run a command",
    after_help = AFTER_HELP
)]
pub struct FindOptions {
    /// Trees to search (walked in parallel; every path found is absolute). The words `(`,
    /// `)` and `!` here are operators of the expression, not paths (write `./(` for a file
    /// named `(`).
    #[arg(value_name = "PATH")]
    pub paths: Vec<OsString>,
    /// `-i`: read a list instead of walking.
    #[command(flatten, next_help_heading = "Input and output")]
    pub input: ListInput,
    /// `-o`, `-t`: write the list.
    #[command(flatten, next_help_heading = "Input and output")]
    pub output: ListOutput,
    /// Descend at most N directory levels below each PATH (0: the PATHs only). With --input,
    /// levels are counted from the shallowest entry of the list.
    #[arg(long, value_name = "N", help_heading = "Input and output")]
    pub maxdepth: Option<usize>,

    /// Last accessed N minutes ago (see "Numbers" below).
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub amin: Vec<String>,
    /// Status last changed N minutes ago.
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub cmin: Vec<String>,
    /// Data last modified N minutes ago.
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub mmin: Vec<String>,
    /// Last accessed N days ago.
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub atime: Vec<String>,
    /// Status last changed N days ago.
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub ctime: Vec<String>,
    /// Data last modified N days ago.
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub mtime: Vec<String>,
    /// Last accessed more recently than FILE was modified.
    #[arg(
        long,
        value_name = "FILE",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub anewer: Vec<OsString>,
    /// Status changed more recently than FILE was modified.
    #[arg(
        long,
        value_name = "FILE",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub cnewer: Vec<OsString>,
    /// Modified more recently than FILE (FILE itself is not followed if it is a link).
    #[arg(
        long,
        value_name = "FILE",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub newer: Vec<OsString>,
    /// Numeric group id is N (+N, -N: above, below).
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub gid: Vec<String>,
    /// Group is NAME (a number is taken as a gid if no group has that name).
    #[arg(
        long,
        value_name = "NAME",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub group: Vec<OsString>,
    /// Numeric user id is N (+N, -N: above, below).
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub uid: Vec<String>,
    /// Owner is NAME (a number is taken as a uid if no user has that name).
    #[arg(
        long,
        value_name = "NAME",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub user: Vec<OsString>,
    /// Last path component matches the shell pattern GLOB (fnmatch: `*`, `?`, `[...]`; `*`
    /// also matches a leading `.`, as in GNU find; no `{a,b}`).
    #[arg(
        long,
        value_name = "GLOB",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub name: Vec<OsString>,
    /// The whole path matches the shell pattern GLOB (`*` also matches `/`).
    #[arg(
        long,
        value_name = "GLOB",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub path: Vec<OsString>,
    /// The whole path matches the regular expression RE: anchored at both ends, as GNU find's
    /// -regex (dfind's --regex is found anywhere in the path: write `.*RE.*` for that). The
    /// syntax is --regextype's: posix-extended by default, in the Rust regex crate's spelling
    /// (`(a|b)+`, `{2,3}`, `[[:alpha:]]`; unlike POSIX, `\` escapes inside brackets and `\d`,
    /// `\w`, `(?i)` exist; no back-references). `.` and `[^/]` match any byte, newlines too.
    #[arg(
        long,
        value_name = "RE",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub regex: Vec<String>,
    /// The syntax of every --regex of the command line, wherever it stands (GNU find's
    /// -regextype applies to those after it: put it first and both agree). posix-extended:
    /// the default (GNU find's default is emacs). posix-basic: dfind's (POSIX regcomp without
    /// REG_EXTENDED), GNU's flavour: `\(` `\)` `\{` `\}` `\|` `\+` `\?` are the
    /// operators and `(` `)` `{` `}` `|` `+` `?` literals, `*` first is literal;
    /// back-references (`\1`..`\9`) are refused, the engine has none.
    #[arg(long, value_name = "TYPE", value_enum, help_heading = "Tests")]
    pub regextype: Option<RegexType>,
    /// Size is N bytes (+N more, -N less); N takes units KB, MB, GB... (powers of 1024, as
    /// dfind: `--size -1M` is "smaller than 1 MiB", where GNU find's `-size -1M` rounds up to
    /// whole MiB and only matches empty files; GNU's `-size -1048576c` is the equivalent).
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub size: Vec<String>,
    /// Type is C: b block device, c character device, d directory, f regular file, l symbolic
    /// link, p fifo, s socket; several letters with commas (`f,l`) mean any of them.
    #[arg(
        long = "type",
        id = "type",
        value_name = "C",
        allow_hyphen_values = true,
        help_heading = "Tests"
    )]
    pub file_type: Vec<String>,

    /// Has an object on OST N (an index, or a name ending in OSTxxxx, hex); several with
    /// commas mean any of them. Any component of a composite (PFL) layout counts.
    #[arg(
        long,
        value_name = "N,...",
        help_heading = "Lustre tests (as lfs find)"
    )]
    pub ost: Vec<String>,
    /// The inode is on MDT N (an index, or a name ending in MDTxxxx); several with commas mean
    /// any of them.
    #[arg(
        long,
        value_name = "N,...",
        help_heading = "Lustre tests (as lfs find)"
    )]
    pub mdt: Vec<String>,
    /// The layout (or any component of a composite one) names pool NAME.
    #[arg(long, value_name = "NAME", help_heading = "Lustre tests (as lfs find)")]
    pub pool: Vec<String>,
    /// Has N stripes (+N more, -N fewer); a composite layout's last instantiated component
    /// counts (its first when none is).
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Lustre tests (as lfs find)"
    )]
    pub stripe_count: Vec<String>,
    /// Stripe size is N bytes (+N more, -N less); units K, M, G, T (powers of 1024), and
    /// without + or - equal within the unit (`4M`: above 3 MiB, at most 4 MiB). A composite
    /// layout's last instantiated component counts (extension components skipped).
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Lustre tests (as lfs find)"
    )]
    pub stripe_size: Vec<String>,
    /// Layout is KIND: raid0 (striped over OSTs), mdt (data on the MDT), released (HSM
    /// archived, not resident); several with commas mean any of them.
    ///
    /// The Lustre tests read each regular file's layout, and each directory's default layout,
    /// with lgetxattr("lustre.lov"). What has none (symlinks, devices, files not yet written)
    /// fails them. A PATH that is not on Lustre is named once on stderr (a warning, exit status
    /// unchanged) and the Lustre tests are false for everything below it.
    #[arg(
        long,
        value_name = "KIND,...",
        help_heading = "Lustre tests (as lfs find)"
    )]
    pub layout: Vec<String>,

    /// True when the next test (or group) is false. Also spelled `!`.
    #[arg(
        long,
        num_args = 0,
        default_missing_value = "",
        help_heading = "Operators"
    )]
    pub not: Vec<String>,
    /// True when the test before or the test after is true; weaker than the implicit --and
    /// between adjacent tests (`a --or b c` is `a --or ( b c )`).
    #[arg(
        long,
        num_args = 0,
        default_missing_value = "",
        help_heading = "Operators"
    )]
    pub or: Vec<String>,
    /// True when both neighbours are true (what adjacent tests mean anyway).
    #[arg(
        long,
        num_args = 0,
        default_missing_value = "",
        help_heading = "Operators"
    )]
    pub and: Vec<String>,
    /// Start a group (also spelled `(`; quote it for the shell: '(' or \().
    #[arg(
        long,
        num_args = 0,
        default_missing_value = "",
        help_heading = "Operators"
    )]
    pub open: Vec<String>,
    /// End a group (also spelled `)`).
    #[arg(
        long,
        num_args = 0,
        default_missing_value = "",
        help_heading = "Operators"
    )]
    pub close: Vec<String>,

    /// Print the path, one per line, on stdout (the default action when there is no action
    /// and no --output). Output comes in list order.
    #[arg(
        long,
        num_args = 0,
        default_missing_value = "",
        help_heading = "Actions"
    )]
    pub print: Vec<String>,
    /// Print the path followed by a NUL byte (for `xargs -0`).
    #[arg(
        long,
        num_args = 0,
        default_missing_value = "",
        help_heading = "Actions"
    )]
    pub print0: Vec<String>,
    /// Run CMD with its ARGs, every `{}` replaced by the path, for each entry that reaches it;
    /// the words up to a lone `;` (quote it: ';' or \;) are the command. True when the
    /// command exits with 0. Commands run in parallel (each rank runs those of its own
    /// entries, one per core at a time) with stdin from /dev/null; a command that fails or
    /// cannot start is reported with its path and makes the exit status 1.
    #[arg(
        long,
        value_name = "CMD [ARG]... ;",
        num_args = 1..,
        allow_hyphen_values = true,
        help_heading = "Actions"
    )]
    pub exec: Vec<OsString>,

    /// `--checkpoint PATH`, `--no-checkpoint`: where `--exec` commands that ran to their end
    /// are recorded, so that a rerun after a stop does not run them again.
    #[command(flatten)]
    pub checkpoint: crate::cli::args::CheckpointArgs,
    /// `--memory-limit`, `--tmpdir`: a v3/v4 list read with `-i` that outgrows the limit is
    /// searched a piece at a time.
    #[command(flatten, next_help_heading = "Input and output")]
    pub memory: MemoryArgs,
    /// `--noatime`.
    #[command(flatten)]
    pub noatime: NoAtimeArg,
    /// The options every tool has: progress, verbosity, JSON report, timestamps.
    #[command(flatten)]
    pub common: Common,
}

const AFTER_HELP: &str = "\
Expression: tests, actions and operators in command-line order, as in GNU find. Adjacent \
tests are ANDed; --not binds tightest, then --and, then --or; `(` and `)` (or --open, \
--close) group. Evaluation goes left to right and stops as soon as the result is known, so an \
action after a failed test does not run. Without an action (and without -o) every matching \
path is printed.

Numbers: +N more than N, -N less than N, N exactly. Times round as in GNU find: --mmin N is \
N-1 < age <= N minutes, --mmin +N more than N minutes, --mmin -N less; --mtime N is N < age \
<= N+1 days, --mtime +N more than N+1 days (+180: more than 181 days old), --mtime -N less than \
N days (plus one second, as GNU computes it). N may have a fraction (1.5). The current time is \
taken once, on rank 0, before the search.

Examples:
  mpirun -np 16 mfu-rs find /lustre/proj --name '*.tmp' --mtime +30
  mfu-rs find /data --type f --size +1GB --print0 | xargs -0 ls -l
  mfu-rs find /data '(' --name '*.c' --or --name '*.h' ')' --not --user alice
  mfu-rs find /data --name core --exec rm -f '{}' ';'
  mfu-rs walk -o all.mfu /scratch
  mfu-rs find -i all.mfu --atime +180 -o purge.mfu && mfu-rs rm -i purge.mfu

Exit status: 0 done, 1 some entries could not be read or some --exec command failed (each \
reported on stderr), 2 usage error (a malformed expression, an unknown user, a missing \
reference file).";

/// The syntaxes of `--regex`, named as GNU find's `-regextype` names them.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RegexType {
    /// POSIX extended, in the Rust regex crate's spelling.
    #[default]
    #[value(name = "posix-extended")]
    PosixExtended,
    /// POSIX basic, as dfind compiles its --regex.
    #[value(name = "posix-basic")]
    PosixBasic,
}

impl From<RegexType> for RegexSyntax {
    fn from(t: RegexType) -> RegexSyntax {
        match t {
            RegexType::PosixExtended => RegexSyntax::Extended,
            RegexType::PosixBasic => RegexSyntax::Basic,
        }
    }
}

/// Options of `mfu-rs find` (dfind): the plain options, and the expression in order.
#[derive(Clone, Debug)]
pub struct FindArgs {
    /// Paths, input, output and the shared options (the raw expression words are in here too,
    /// but only [`FindArgs::expr`] keeps their order). Boxed: the raw words make it large.
    pub options: Box<FindOptions>,
    /// The expression; `None` when empty (everything matches).
    pub expr: Option<Expr<Primary>>,
}

/// `mfu-rs find`.
pub struct Find;

impl CliTool for Find {
    const NAME: &'static str = "find";
    const OLD_NAMES: &'static [&'static str] = &["dfind"];
    const ABOUT: &'static str =
        "Find files by name, time, size, owner or type; print them, save a list or run a command (dfind)";
    type Args = FindArgs;
    type Options = Options;
    type Report = Report;

    fn common(a: &FindArgs) -> &Common {
        &a.options.common
    }
    fn noatime(a: &FindArgs) -> bool {
        a.options.noatime.noatime
    }
    fn named_files(a: &FindArgs) -> Vec<(&'static str, &OsStr)> {
        let o = &a.options;
        let paths = o.paths.iter().map(|p| ("PATH", p.as_os_str()));
        let input = o.input.named_files();
        let output = o.output.output.iter().map(|f| ("-o", f.as_os_str()));
        paths.chain(input).chain(output).collect()
    }
    fn output_files(a: &FindArgs) -> Vec<(&'static str, &[u8])> {
        a.options.output.output_files()
    }
    fn options(a: &FindArgs, _rules: Rules, mut context: Context) -> Options {
        let o = &a.options;
        // Stdout carries the paths found (or the list): -v's lines go to stderr.
        context.events = Arc::new(Routed {
            inner: context.events,
            output_to_stderr: false,
            info_to_stderr: true,
            quiet: o.common.quiet,
        });
        Options {
            input: o.input.or_paths(&o.paths),
            output: o.output.file(),
            text: o.output.text,
            maxdepth: o.maxdepth,
            expr: a.expr.clone(),
            checkpoint: o.checkpoint.choice(),
            lustre: Default::default(),
            memory_limit: o.memory.memory_limit,
            tmpdir: o.memory.tmpdir(),
            context,
        }
    }
    fn run(comm: &dyn Comm, options: &Options) -> Result<Report, Error> {
        crate::find::run(comm, options)
    }
    /// find prints no summary of its own: the paths are the result, and -v's lines come as
    /// detail while it runs.
    fn render(_: &Report, _: &Console) {}
}

impl Args for FindArgs {
    fn augment_args(cmd: Command) -> Command {
        text_alone(FindOptions::augment_args(cmd))
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        text_alone(FindOptions::augment_args_for_update(cmd))
    }
}

/// `-t` without `-o` is refused once the whole command line is read ([`check_plain_options`]):
/// the `-o` may come after an `--exec ... ;`, so clap must not refuse it in one segment.
fn text_alone(cmd: Command) -> Command {
    cmd.mut_arg("text", |a| a.requires(clap::builder::Resettable::Reset))
}

impl FromArgMatches for FindArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut options = FindOptions::from_arg_matches(m)?;
        // The segments around `--exec ... ;`s first: a --regextype anywhere applies to every
        // --regex, so it must be known before any is compiled.
        let mut segments = vec![m.clone()];
        let mut commands = Vec::new();
        while let Some(words) = exec_words(segments.last().expect("one segment at least")) {
            let (command, rest) = split_exec(words)?;
            commands.push(command);
            if rest.is_empty() {
                break;
            }
            let segment = rest_command().try_get_matches_from(rest)?;
            merge_plain_options(&mut options, &segment)?;
            segments.push(segment);
        }
        let syntax = RegexSyntax::from(options.regextype.unwrap_or_default());
        let mut paths = Vec::new();
        let mut tokens = Vec::new();
        let mut commands = commands.into_iter();
        for segment in &segments {
            tokens_of(segment, syntax, &mut tokens, &mut paths)?;
            // Every segment but the last ends with its --exec; the last may.
            if let Some(command) = commands.next() {
                tokens.push(Token::Leaf(Primary::Exec(command)));
            }
        }
        options.paths = paths;
        check_plain_options(&options)?;
        let expr = expr::parse(tokens).map_err(|e| invalid(format!("bad expression: {e}")))?;
        Ok(FindArgs {
            options: Box::new(options),
            expr,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = FindArgs::from_arg_matches(m)?;
        Ok(())
    }
}

fn invalid(msg: impl std::fmt::Display) -> clap::Error {
    clap::Error::raw(ErrorKind::ValueValidation, format!("{msg}\n"))
}

/// The command that parses the words after an `--exec ... ;`.
fn rest_command() -> Command {
    text_alone(FindOptions::augment_args(
        Command::new("mfu-rs find").no_binary_name(true),
    ))
}

/// The command words of an `--exec` and the words after its `;`.
fn split_exec(words: Vec<OsString>) -> Result<(Vec<OsString>, Vec<OsString>), clap::Error> {
    let Some(end) = words.iter().position(|w| w == ";") else {
        return Err(invalid(
            "--exec needs a ';' after the command (quote it for the shell: ';' or \\;)",
        ));
    };
    let mut command = words;
    let rest = command.split_off(end + 1);
    command.pop();
    if command.is_empty() {
        return Err(invalid("--exec needs a command before its ';'"));
    }
    Ok((command, rest))
}

/// The options after an `--exec ... ;` that are not part of the expression take effect as if
/// given before it.
fn merge_plain_options(options: &mut FindOptions, m: &ArgMatches) -> Result<(), clap::Error> {
    let rest = FindOptions::from_arg_matches(m)?;
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    if given("input") {
        options.input.input = rest.input.input;
    }
    if given("input_format") {
        options.input.format = rest.input.format;
    }
    if given("output") {
        options.output.output = rest.output.output;
    }
    options.output.text |= rest.output.text;
    if given("maxdepth") {
        options.maxdepth = rest.maxdepth;
    }
    if given("regextype") {
        options.regextype = rest.regextype;
    }
    if given("memory_limit") {
        options.memory.memory_limit = rest.memory.memory_limit;
    }
    if given("tmpdir") {
        options.memory.tmpdir = rest.memory.tmpdir;
    }
    if given("progress") {
        options.common.progress = rest.common.progress;
    }
    options.common.verbose |= rest.common.verbose;
    options.common.quiet |= rest.common.quiet;
    Ok(())
}

fn check_plain_options(options: &FindOptions) -> Result<(), clap::Error> {
    let fail = |kind, msg: &str| Err(clap::Error::raw(kind, format!("{msg}\n")));
    if options.paths.is_empty() && options.input.input.is_none() {
        return fail(
            ErrorKind::MissingRequiredArgument,
            "a PATH to search or --input FILE is required",
        );
    }
    if !options.paths.is_empty() && options.input.input.is_some() {
        return fail(
            ErrorKind::ArgumentConflict,
            "PATHs and --input cannot be combined (search one or the other)",
        );
    }
    if options.output.text && options.output.output.is_none() {
        return fail(ErrorKind::MissingRequiredArgument, "--text needs --output");
    }
    if options.common.verbose && options.common.quiet {
        return fail(ErrorKind::ArgumentConflict, "-v and -q cannot be combined");
    }
    Ok(())
}

/// What an expression option makes.
#[derive(Clone, Copy)]
enum Kind {
    Age(TimeField, AgeUnit),
    Newer(TimeField),
    Id { group: bool },
    User,
    Group,
    Name,
    Path,
    Regex,
    Size,
    Type,
    Lustre(fn(&str) -> Result<LayoutTest, String>),
    Op(fn() -> Token<Primary>),
    Print { nul: bool },
}

/// Every expression option by clap id (`exec` and the positional words are handled apart).
const EXPRESSION: &[(&str, Kind)] = &[
    ("amin", Kind::Age(TimeField::Access, AgeUnit::Minutes)),
    ("cmin", Kind::Age(TimeField::Change, AgeUnit::Minutes)),
    ("mmin", Kind::Age(TimeField::Modify, AgeUnit::Minutes)),
    ("atime", Kind::Age(TimeField::Access, AgeUnit::Days)),
    ("ctime", Kind::Age(TimeField::Change, AgeUnit::Days)),
    ("mtime", Kind::Age(TimeField::Modify, AgeUnit::Days)),
    ("anewer", Kind::Newer(TimeField::Access)),
    ("cnewer", Kind::Newer(TimeField::Change)),
    ("newer", Kind::Newer(TimeField::Modify)),
    ("gid", Kind::Id { group: true }),
    ("uid", Kind::Id { group: false }),
    ("group", Kind::Group),
    ("user", Kind::User),
    ("name", Kind::Name),
    ("path", Kind::Path),
    ("regex", Kind::Regex),
    ("size", Kind::Size),
    ("type", Kind::Type),
    ("ost", Kind::Lustre(LayoutTest::ost)),
    ("mdt", Kind::Lustre(LayoutTest::mdt)),
    (
        "pool",
        Kind::Lustre(|name| LayoutTest::pool(name.as_bytes())),
    ),
    ("stripe_count", Kind::Lustre(LayoutTest::stripe_count)),
    ("stripe_size", Kind::Lustre(LayoutTest::stripe_size)),
    ("layout", Kind::Lustre(LayoutTest::layout)),
    ("not", Kind::Op(|| Token::Not)),
    ("or", Kind::Op(|| Token::Or)),
    ("and", Kind::Op(|| Token::And)),
    ("open", Kind::Op(|| Token::Open)),
    ("close", Kind::Op(|| Token::Close)),
    ("print", Kind::Print { nul: false }),
    ("print0", Kind::Print { nul: true }),
];

/// The words after `--exec` if the segment has one (it takes every word after it, so it is
/// the segment's last option).
fn exec_words(m: &ArgMatches) -> Option<Vec<OsString>> {
    m.try_get_raw("exec")
        .ok()
        .flatten()
        .map(|v| v.map(|w| w.to_owned()).collect())
}

/// Append the expression tokens of one parsed segment to `tokens` (in command-line order),
/// its --regex read in `syntax`, and its paths to `paths` (its --exec is left to the caller).
fn tokens_of(
    m: &ArgMatches,
    syntax: RegexSyntax,
    tokens: &mut Vec<Token<Primary>>,
    paths: &mut Vec<OsString>,
) -> Result<(), clap::Error> {
    let mut found: Vec<(usize, Vec<Token<Primary>>)> = Vec::new();
    for &(id, kind) in EXPRESSION {
        let Ok(Some(values)) = m.try_get_raw(id) else {
            continue;
        };
        let indices = m.indices_of(id).into_iter().flatten();
        for (index, value) in indices.zip(values) {
            found.push((index, primary(id, kind, syntax, value.to_owned())?));
        }
    }
    if let Ok(Some(values)) = m.try_get_raw("paths") {
        let indices = m.indices_of("paths").into_iter().flatten();
        for (index, value) in indices.zip(values) {
            let token = match value.as_bytes() {
                b"(" => Token::Open,
                b")" => Token::Close,
                b"!" => Token::Not,
                _ => {
                    paths.push(value.to_owned());
                    continue;
                }
            };
            found.push((index, vec![token]));
        }
    }
    found.sort_by_key(|f| f.0);
    tokens.extend(found.into_iter().flat_map(|f| f.1));
    Ok(())
}

/// The tokens one expression option stands for (`--type f,d` is a group of two); a --regex
/// is read in `syntax`.
fn primary(
    id: &str,
    kind: Kind,
    syntax: RegexSyntax,
    value: OsString,
) -> Result<Vec<Token<Primary>>, clap::Error> {
    let text = || -> Result<String, clap::Error> {
        value
            .to_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(format!("--{id}: the value must be UTF-8")))
    };
    let test = |t: Result<Test, flist::Error>| {
        t.map(|t| vec![Token::Leaf(Primary::Test(t))])
            .map_err(|e| invalid(format!("--{id}: {e}")))
    };
    match kind {
        Kind::Age(field, unit) => {
            let spec = text()?;
            // Checked now, resolved against the clock when the run starts.
            test(Test::age(field, unit, &spec, 0))?;
            Ok(vec![Token::Leaf(Primary::Age { field, unit, spec })])
        }
        Kind::Newer(field) => Ok(vec![Token::Leaf(Primary::Newer { field, file: value })]),
        Kind::Id { group } => test(Test::id(&text()?, group)),
        Kind::User => Ok(vec![Token::Leaf(Primary::User(value))]),
        Kind::Group => Ok(vec![Token::Leaf(Primary::Group(value))]),
        Kind::Name => test(Test::fnmatch_name(&value.into_vec())),
        Kind::Path => test(Test::fnmatch_path(&value.into_vec())),
        Kind::Regex => test(Test::whole_regex_in(syntax, &text()?)),
        Kind::Size => test(Test::size(&text()?)),
        Kind::Type => {
            let letters = text()?;
            let mut types = Vec::new();
            for letter in letters.split(',') {
                types.extend(test(Test::file_type(letter))?);
                types.push(Token::Or);
            }
            types.pop();
            if types.len() > 1 {
                types.insert(0, Token::Open);
                types.push(Token::Close);
            }
            Ok(types)
        }
        Kind::Lustre(parse) => parse(&text()?)
            .map(|t| vec![Token::Leaf(Primary::Lustre(t))])
            .map_err(|e| {
                let option = id.replace('_', "-");
                invalid(format!("--{option}: {e}"))
            }),
        Kind::Op(token) => Ok(vec![token()]),
        Kind::Print { nul } => Ok(vec![Token::Leaf(Primary::Print { nul })]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<FindArgs, clap::Error> {
        let cmd = FindArgs::augment_args(Command::new("find"));
        let m = cmd.try_get_matches_from(std::iter::once("find").chain(args.iter().copied()))?;
        FindArgs::from_arg_matches(&m)
    }

    /// The expression as a string: leaves by their option, operators as symbols.
    fn shape(args: &[&str]) -> String {
        fn show(e: &Expr<Primary>) -> String {
            match e {
                Expr::Leaf(Primary::Test(t)) => match t {
                    Test::Fnmatch { pattern, .. } => pattern.to_string_lossy().into_owned(),
                    Test::Type(t) => format!("{t:?}"),
                    Test::Size { .. } => "size".into(),
                    other => format!("{other:?}")
                        .split([' ', '{', '('])
                        .next()
                        .unwrap()
                        .into(),
                },
                Expr::Leaf(Primary::Age { spec, .. }) => format!("age{spec}"),
                Expr::Leaf(Primary::Exec(w)) => format!(
                    "exec[{}]",
                    w.iter()
                        .map(|w| w.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                Expr::Leaf(Primary::Print { nul }) => {
                    format!("print{}", if *nul { "0" } else { "" })
                }
                Expr::Leaf(other) => format!("{other:?}"),
                Expr::Not(e) => format!("!{}", show(e)),
                Expr::And(v) => format!("({})", v.iter().map(show).collect::<Vec<_>>().join(" & ")),
                Expr::Or(v) => format!("({})", v.iter().map(show).collect::<Vec<_>>().join(" | ")),
            }
        }
        let a = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        a.expr.as_ref().map(show).unwrap_or_default()
    }

    fn error(args: &[&str]) -> (ErrorKind, String) {
        let e = parse(args).expect_err("an error");
        (e.kind(), e.to_string())
    }

    #[test]
    fn order_and_precedence_come_from_the_command_line() {
        assert_eq!(shape(&["/d"]), "");
        assert_eq!(shape(&["/d", "--name", "a", "--name", "b"]), "(a & b)");
        assert_eq!(
            shape(&["/d", "--name", "a", "--or", "--name", "b", "--type", "f"]),
            "(a | (b & File))"
        );
        assert_eq!(
            shape(&["/d", "(", "--name", "a", "--or", "--name", "b", ")", "--type", "f"]),
            "((a | b) & File)"
        );
        assert_eq!(
            shape(&[
                "/d", "--open", "--name", "a", "--or", "--name", "b", "--close", "!", "--mtime",
                "-3"
            ]),
            "((a | b) & !age-3)"
        );
        assert_eq!(
            shape(&["--not", "--name", "a", "/d", "--size", "+1k", "--print0"]),
            "(!a & size & print0)"
        );
        assert_eq!(shape(&["/d", "--type", "f,l"]), "(File | Symlink)");
        assert_eq!(
            shape(&["/d", "--type", "d", "--and", "--uid", "0"]),
            "(Dir & Uid)"
        );
    }

    #[test]
    fn exec_takes_words_up_to_the_semicolon_and_the_rest_is_parsed_again() {
        let a = parse(&[
            "/d",
            "--name",
            "x",
            "--exec",
            "sh",
            "-c",
            "echo \"$1\" --or",
            "sh",
            "{}",
            ";",
            "--or",
            "--print",
            "-o",
            "out.mfu",
            "-v",
            "/e",
        ])
        .unwrap();
        assert_eq!(a.options.paths, ["/d", "/e"]);
        assert_eq!(a.options.output.output.as_deref(), Some("out.mfu".as_ref()));
        assert!(a.options.common.verbose);
        assert_eq!(
            shape(&["/d", "--exec", "a", "{}", ";", "--exec", "b", "-x", ";", "--print"]),
            "(exec[a {}] & exec[b -x] & print)"
        );
        assert_eq!(
            shape(&["/d", "--name", "x", "--exec", "ls", ";", "--or", "(", "--name", "y", ")"]),
            "((x & exec[ls]) | y)"
        );
    }

    #[test]
    fn malformed_command_lines_are_usage_errors() {
        let (kind, msg) = error(&["/d", "--exec", "rm", "{}"]);
        assert_eq!(kind, ErrorKind::ValueValidation);
        assert!(msg.contains("needs a ';'"), "{msg}");
        assert!(error(&["/d", "--exec", ";"]).1.contains("needs a command"));
        assert!(error(&["/d", "(", "--name", "a"])
            .1
            .contains("unbalanced '('"));
        assert!(error(&["/d", "--name", "a", ")"])
            .1
            .contains("unbalanced ')'"));
        assert!(error(&["/d", "--exec", "ls", ";", ")"])
            .1
            .contains("unbalanced ')'"));
        assert!(error(&["/d", "--or", "--name", "a"])
            .1
            .contains("--or needs a test before"));
        assert!(error(&["/d", "--name", "a", "--not"])
            .1
            .contains("--not needs a test after"));
        assert!(error(&["/d", "--size", "4X"]).1.contains("--size"));
        assert!(error(&["/d", "--type", "x"]).1.contains("--type"));
        assert!(error(&["/d", "--mtime", "+x"]).1.contains("--mtime"));
        assert!(error(&["/d", "--regex", "("]).1.contains("--regex"));
        // A basic expression's errors name the option, the expression and its syntax, also
        // when --regextype comes after the --regex or after an --exec.
        for args in [
            &["/d", "--regextype", "posix-basic", "--regex", r"\(a\)\1"][..],
            &["/d", "--regex", r"\(a\)\1", "--regextype", "posix-basic"],
            &[
                "/d",
                "--regex",
                r"\(a\)\1",
                "--exec",
                "ls",
                ";",
                "--regextype",
                "posix-basic",
            ],
        ] {
            let (kind, msg) = error(args);
            assert_eq!(kind, ErrorKind::ValueValidation, "{msg}");
            assert!(
                msg.contains(r"--regex: bad regex '\(a\)\1' (posix-basic)")
                    && msg.contains("back-references"),
                "{args:?}: {msg}"
            );
        }
        // In the default syntax the engine refuses `\1` itself.
        assert!(error(&["/d", "--regex", r"(a)\1"]).1.contains("--regex"));
        assert_eq!(
            error(&["/d", "--regextype", "emacs", "--regex", "a"]).0,
            ErrorKind::InvalidValue
        );
        assert!(error(&["/d", "--uid", "root"]).1.contains("--uid"));
        assert_eq!(error(&[]).0, ErrorKind::MissingRequiredArgument);
        assert_eq!(
            error(&["--name", "a"]).0,
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(error(&["/d", "-i", "l.mfu"]).0, ErrorKind::ArgumentConflict);
        assert_eq!(
            error(&["/d", "--exec", "ls", ";", "-i", "l.mfu"]).0,
            ErrorKind::ArgumentConflict
        );
        assert_eq!(error(&["/d", "-t"]).0, ErrorKind::MissingRequiredArgument);
        // -t and its -o may stand on either side of an --exec.
        let a = parse(&["/d", "-t", "--exec", "ls", ";", "-o", "l.txt"]).unwrap();
        assert!(a.options.output.text);
        let a = parse(&["/d", "-o", "l.txt", "--exec", "ls", ";", "-t"]).unwrap();
        assert!(a.options.output.text);
        // Every one of these exits with 2 (clap errors that go to stderr).
        for args in [&["/d", "--exec", "rm", "{}"][..], &["/d", "("]] {
            assert!(parse(args).unwrap_err().use_stderr());
        }
    }

    #[test]
    fn negative_numbers_are_values() {
        assert_eq!(
            shape(&["/d", "--mmin", "-5", "--size", "-1M"]),
            "(age-5 & size)"
        );
        let a = parse(&["-i", "l", "--uid", "-1000"]).unwrap();
        assert!(a.options.paths.is_empty());
    }
}
