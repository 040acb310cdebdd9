//! The README's option tables against the clap definitions (issue 19): they cannot drift. Every
//! option a tool's table names exists on that tool, with the short and long names the table pairs
//! (`-k, --chunksize`), and every option the tool has is in its table, except the message group
//! every tool shares (`--json`, `--timestamps`, the live status's `--status-*`, documented once
//! under "Running") and clap's own `--help`/`--version`.

use std::collections::BTreeSet;

/// Options documented once for all tools rather than in each table.
const DOCUMENTED_ONCE: &[&str] = &[
    "--help",
    "--version",
    "--json",
    "--timestamps",
    "--status-listen",
    "--status-file",
    "--status-interval",
];

/// One tool's section of the README: its name and the first cell of every table row.
struct Section {
    tool: String,
    cells: Vec<String>,
}

fn readme() -> String {
    let path = mfu_tests::root().join("README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The sections headed `### \`mfu-rs TOOL ...\`` and the first cells of their option tables.
fn sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut current: Option<Section> = None;
    let mut options_table = false;
    for line in text.lines() {
        if line.starts_with("## ") || line.starts_with("### ") {
            out.extend(current.take());
            if let Some(rest) = line.strip_prefix("### `mfu-rs ") {
                let tool = rest.split([' ', '`']).next().unwrap_or_default();
                current = Some(Section {
                    tool: tool.to_string(),
                    cells: Vec::new(),
                });
            }
            continue;
        }
        let Some(section) = current.as_mut() else {
            continue;
        };
        // Only tables headed `| option | meaning |` list options (sh has a table of commands).
        if line.starts_with("| option |") {
            options_table = true;
        } else if line.starts_with("| ") && !line.starts_with("| `") && !line.starts_with("| |") {
            options_table = false;
        }
        if let Some(row) = line.strip_prefix("| `").filter(|_| options_table) {
            section.cells.push(format!("`{}", first_cell(row)));
        }
    }
    out.extend(current);
    out
}

/// The text of a table row up to its first unescaped `|`.
fn first_cell(row: &str) -> &str {
    let bytes = row.as_bytes();
    let end = (0..bytes.len())
        .find(|&i| bytes[i] == b'|' && (i == 0 || bytes[i - 1] != b'\\'))
        .unwrap_or(bytes.len());
    &row[..end]
}

/// The option names inside the backquoted parts of a cell (`--name`, `-n`), and the pairs
/// written `-n, --name`.
fn options_of(cell: &str) -> (BTreeSet<String>, Vec<(char, String)>) {
    let mut names = BTreeSet::new();
    let mut pairs = Vec::new();
    for (i, code) in cell.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let words: Vec<&str> = code
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | '/' | '[' | ']' | '(' | ')'))
            .filter(|w| !w.is_empty())
            .collect();
        for (j, w) in words.iter().enumerate() {
            if let Some(long) = long_name(w) {
                names.insert(format!("--{long}"));
            } else if let Some(short) = short_name(w) {
                names.insert(format!("-{short}"));
                if let Some(long) = words.get(j + 1).and_then(|n| long_name(n)) {
                    pairs.push((short, long.to_string()));
                }
            }
        }
    }
    (names, pairs)
}

fn long_name(word: &str) -> Option<&str> {
    let name = word.strip_prefix("--")?;
    let name = name.split('=').next().unwrap_or(name);
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    ok.then_some(name)
}

fn short_name(word: &str) -> Option<char> {
    let mut chars = word.strip_prefix('-')?.chars();
    let c = chars.next()?;
    (c.is_ascii_alphabetic() && chars.next().is_none()).then_some(c)
}

/// Every visible option of `tool` as clap defines it: its names, and its short and long pairs.
fn clap_options(tool: &str) -> (BTreeSet<String>, BTreeSet<String>, Vec<(char, String)>) {
    let mut command = mfu::unstable::cli::dispatch::command("test");
    command.build();
    let sub = command
        .find_subcommand(tool)
        .unwrap_or_else(|| panic!("the README documents `mfu-rs {tool}`, which has no subcommand"));
    let mut every = BTreeSet::new();
    let mut wanted = BTreeSet::new();
    let mut pairs = Vec::new();
    // A tool with actions of its own (`pfa ls|cat|unpack|pack`) has its options on them: one
    // table documents them all.
    let args = sub
        .get_arguments()
        .chain(sub.get_subcommands().flat_map(|s| s.get_arguments()));
    for arg in args.filter(|a| !a.is_positional()) {
        let longs = arg
            .get_long()
            .into_iter()
            .chain(arg.get_all_aliases().unwrap_or_default());
        let longs: Vec<String> = longs.map(|l| format!("--{l}")).collect();
        let shorts = arg
            .get_short()
            .into_iter()
            .chain(arg.get_all_short_aliases().unwrap_or_default());
        let shorts: Vec<String> = shorts.map(|s| format!("-{s}")).collect();
        every.extend(longs.iter().cloned());
        every.extend(shorts.iter().cloned());
        let global = arg.is_global_set();
        let once = longs.iter().any(|l| DOCUMENTED_ONCE.contains(&l.as_str()));
        if !arg.is_hide_set() && !global && !once {
            wanted.insert(
                longs
                    .first()
                    .or(shorts.first())
                    .expect("an option has a name")
                    .clone(),
            );
        }
        if let (Some(s), Some(l)) = (arg.get_short(), arg.get_long()) {
            pairs.push((s, l.to_string()));
        }
    }
    (every, wanted, pairs)
}

#[test]
fn the_readme_option_tables_match_the_clap_definitions() {
    let text = readme();
    let sections = sections(&text);
    let tools: BTreeSet<&str> = sections.iter().map(|s| s.tool.as_str()).collect();
    let mut problems = Vec::new();
    for row in mfu::unstable::cli::dispatch::TOOLS {
        if !tools.contains(row.name()) {
            problems.push(format!(
                "{}: no `### `mfu-rs {} ...`` section",
                row.name(),
                row.name()
            ));
        }
    }
    for section in &sections {
        let tool = section.tool.as_str();
        let (every, wanted, clap_pairs) = clap_options(tool);
        let mut named = BTreeSet::new();
        for cell in &section.cells {
            let (names, pairs) = options_of(cell);
            for name in &names {
                if !every.contains(name) {
                    problems.push(format!(
                        "{tool}: the README names {name}, which it does not have"
                    ));
                }
            }
            for (short, long) in pairs {
                if every.contains(&format!("--{long}"))
                    && !clap_pairs.contains(&(short, long.clone()))
                {
                    problems.push(format!(
                        "{tool}: the README pairs -{short} with --{long}, clap does not"
                    ));
                }
            }
            named.extend(names);
        }
        for name in &wanted {
            let pair = clap_pairs.iter().find(|(_, l)| format!("--{l}") == *name);
            let short = pair.map(|(s, _)| format!("-{s}"));
            if !named.contains(name) && short.is_none_or(|s| !named.contains(&s)) {
                problems.push(format!("{tool}: {name} is not in the README's table"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "README option tables vs clap:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_table_reader_sees_options_pairs_and_escaped_bars() {
    let (names, pairs) = options_of("`-k, --chunksize SIZE` / `-X, --xattrs none\\|all`");
    let want: BTreeSet<String> = ["-k", "--chunksize", "-X", "--xattrs"]
        .map(String::from)
        .into();
    assert_eq!(names, want);
    assert_eq!(
        pairs,
        vec![('k', "chunksize".to_string()), ('X', "xattrs".to_string())]
    );
    assert_eq!(first_cell("`-t` \\| text | meaning |"), "`-t` \\| text ");
    let (names, _) = options_of("`--uid --gid [+-]N`, `--type b\\|c`, `(` `)`");
    let want: BTreeSet<String> = ["--uid", "--gid", "--type"].map(String::from).into();
    assert_eq!(names, want);
}

#[test]
fn no_help_heading_lends_itself_to_the_groups_after_it() {
    // The Lustre group once carried the filters and the message options under its heading.
    let mut command = mfu::unstable::cli::dispatch::command("test");
    command.build();
    for sub in command.get_subcommands() {
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let heading = arg.get_help_heading();
            if heading == Some("Lustre") {
                assert!(
                    long.starts_with("stripe-"),
                    "{}: --{long} under Lustre:",
                    sub.get_name()
                );
            }
            if matches!(
                long,
                "exclude" | "include" | "exclude-regex" | "include-regex"
            ) && ["cp", "sync", "tar"].contains(&sub.get_name())
            {
                assert_eq!(heading, Some("Filters"), "{}: --{long}", sub.get_name());
            }
            if matches!(
                long,
                "progress" | "verbose" | "quiet" | "json" | "timestamps"
            ) {
                assert_eq!(heading, Some("Messages"), "{}: --{long}", sub.get_name());
            }
        }
    }
}

#[test]
fn cp_usage_names_sources_then_the_destination() {
    let mut command = mfu::unstable::cli::dispatch::command("test");
    command.build();
    let cp = command.find_subcommand_mut("cp").expect("cp");
    let usage = cp.render_usage().to_string();
    assert!(usage.contains("<SRC>... <DEST>"), "{usage}");
}
