//! `mfu-rs man [TOOL]` and `mfu-rs completions SHELL`: the manual pages and shell completions,
//! generated from the same clap definitions as `--help`, so that `cargo install` users have them
//! too (`cargo xtask dist` installs them).

use clap::Command;
use std::io::{self, Write};

/// The subcommand `man`.
pub fn man_command() -> Command {
    Command::new("man")
        .about("Print a manual page (roff) for mfu-rs or one tool: `mfu-rs man cp | man -l -`")
        .arg(
            clap::Arg::new("tool")
                .value_name("TOOL")
                .help("A tool (cp, dcp...); without it, the page of mfu-rs itself"),
        )
        .arg(
            clap::Arg::new("list")
                .long("list")
                .action(clap::ArgAction::SetTrue)
                .conflicts_with("tool")
                .help(
                    "List the tools instead, one per line: the name, then the other names \
                     that reach it (what `cargo xtask dist` links and documents)",
                ),
        )
}

/// The subcommand `completions`.
pub fn completions_command() -> Command {
    Command::new("completions")
        .about("Print shell completions: `mfu-rs completions bash > /etc/bash_completion.d/mfu-rs`")
        .arg(
            clap::Arg::new("shell")
                .value_name("SHELL")
                .required(true)
                .value_parser(clap::value_parser!(clap_complete::Shell)),
        )
        .arg(clap::Arg::new("name").long("name").value_name("NAME").help(
            "Complete the command NAME instead of mfu-rs: a tool's own name or link \
                     (dcp, dsync...) completes that tool's options",
        ))
}

/// The subcommand `tool` (a canonical name, or `None` when the caller found no tool by that
/// name) of the full command `root`, built.
fn tool_command(root: &Command, tool: Option<&str>) -> Option<Command> {
    let tool = tool?;
    let mut root = root.clone();
    root.build();
    root.find_subcommand(tool).cloned()
}

/// Write the manual page of `tool` (or of mfu-rs) to `out`; `resolve` gives the canonical tool
/// a name stands for (`dcp` → `cp`).
pub fn man(
    root: Command,
    tool: Option<&str>,
    resolve: impl Fn(&str) -> Option<&'static str>,
    out: &mut dyn Write,
) -> Result<(), String> {
    let page = match tool {
        None => clap_mangen::Man::new(root),
        Some(t) => {
            let sub =
                tool_command(&root, resolve(t)).ok_or_else(|| format!("no tool named {t}"))?;
            let name = format!("mfu-rs-{}", sub.get_name());
            let version = root.get_version().unwrap_or_default().to_string();
            clap_mangen::Man::new(sub.name(name.clone()).bin_name(name).version(version))
        }
    };
    page.render(out)
        .map_err(|e| format!("write the manual page: {e}"))
}

/// Write the completions of `shell` for `name` (mfu-rs, or a tool's own name) to `out`;
/// `resolve` gives the canonical tool a name stands for.
pub fn completions(
    root: Command,
    shell: clap_complete::Shell,
    name: Option<&str>,
    resolve: impl Fn(&str) -> Option<&'static str>,
    out: &mut dyn Write,
) -> Result<(), String> {
    let (mut cmd, bin) = match name {
        None | Some("mfu-rs") => (root, "mfu-rs".to_string()),
        Some(n) => {
            let sub =
                tool_command(&root, resolve(n)).ok_or_else(|| format!("no tool named {n}"))?;
            (sub.name(n.to_string()), n.to_string())
        }
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, bin, &mut buf);
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .map_err(|e: io::Error| format!("write the completions: {e}"))
}
