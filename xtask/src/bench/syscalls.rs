//! System calls per file: a contestant's run under `strace -f -c`, its summary parsed.

use super::measure::Case;
use super::report::Syscalls;
use anyhow::{ensure, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Count the system calls of one run of `case` (its prep run first, untimed) over `files`
/// files; `scratch` holds strace's summary.
pub fn count(case: &Case, files: u64, scratch: &Path) -> Result<Syscalls> {
    if let Some(prep) = &case.prep {
        prep()?;
    }
    let summary = scratch.join("strace-summary.txt");
    let inner = case.command();
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-c", "-o"])
        .arg(&summary)
        .arg(inner.get_program())
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let status = cmd.status().context("start strace")?;
    ensure!(
        status.success(),
        "strace -f -c {} failed: {status}",
        case.name
    );
    let text =
        std::fs::read_to_string(&summary).with_context(|| format!("read {}", summary.display()))?;
    let (total, mut calls) =
        parse(&text).with_context(|| format!("strace summary of {}", case.name))?;
    calls.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    calls.truncate(6);
    Ok(Syscalls {
        name: case.name.clone(),
        total,
        per_file: total as f64 / files.max(1) as f64,
        top: calls,
    })
}

/// Parse `strace -c` output: the total calls and each call's count. Rows are
/// `% time  seconds  usecs/call  calls  [errors]  syscall`; the last row is `total`.
fn parse(text: &str) -> Result<(u64, Vec<(String, u64)>)> {
    let mut calls = Vec::new();
    let mut total = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[0].starts_with('%') || f[0].starts_with('-') {
            continue;
        }
        let Ok(n) = f[3].parse::<u64>() else { continue };
        let name = f[f.len() - 1];
        if name == "total" {
            total = Some(n);
        } else {
            calls.push((name.to_string(), n));
        }
    }
    let total = total.context("no `total` line")?;
    Ok((total, calls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_summaries_parse_with_and_without_errors() {
        let text = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 41.13    4.588134        1228      3736      3614 futex
 15.98    1.782690          19     92194           sched_yield
  9.05    1.009109          25     40058        41 openat
------ ----------- ----------- --------- --------- ------------------
100.00   11.155000          81    135988      3655 total
";
        let (total, calls) = parse(text).unwrap();
        assert_eq!(total, 135_988);
        assert_eq!(
            calls,
            [
                ("futex".to_string(), 3736),
                ("sched_yield".to_string(), 92_194),
                ("openat".to_string(), 40_058)
            ]
        );
        assert!(parse("nothing here").is_err());
    }
}
