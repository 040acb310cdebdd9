//! `--status-listen`, `--status-file`: the live status of a run as text — one JSON object
//! (`GET /status`, the status file) or Prometheus's text exposition format (`GET /metrics`) —
//! and its start and end around a tool's run on rank 0. The status itself (counters, server,
//! file) is [`steal::status`].

use crate::cli::args::Common;
use crate::engine::context::LiveStatus;
use std::fmt::Write;
use std::sync::Arc;
use steal::status::{Format, Live, Snapshot, State};

/// The live status `common` asks for (not started), for a run of `tool`.
pub fn requested(tool: &str, common: &Common) -> Option<LiveStatus> {
    let every = common.status_every()?;
    let file = common.status_file.as_ref().map(|f| {
        use std::os::unix::ffi::OsStrExt;
        f.as_bytes().to_vec()
    });
    Some(LiveStatus {
        every,
        live: Live::new(tool, every, file, Box::new(render)),
    })
}

/// Rank 0, before any work: start serving `status` for a run of `ranks` ranks, printing the
/// address chosen for port 0. `Err` names the address that could not be bound.
pub fn start(status: &LiveStatus, ranks: usize, listen: Option<&str>) -> Result<(), String> {
    let bound = status
        .live
        .start(ranks, listen)
        .map_err(|e| format!("--status-listen: {e} (nothing done)"))?;
    if let (Some(addr), Some(asked)) = (bound, listen) {
        if asked.ends_with(":0") {
            crate::cli::console::stderr_bytes(
                format!("mfu-rs: status at http://{addr}/\n").as_bytes(),
            );
        }
    }
    Ok(())
}

/// Rank 0, after the run: the status's last state, from the tool's report (its totals) or its
/// error; a failure to write the status file, naming it.
pub fn finish(
    live: &Arc<Live>,
    summary: Option<crate::engine::context::Summary>,
    status: crate::engine::status::Status,
    stopped: bool,
) -> Result<(), String> {
    let state = if stopped {
        State::Stopped
    } else if status == crate::engine::status::Status::Ok {
        State::Done
    } else {
        State::Failed
    };
    let s = summary.unwrap_or_default();
    live.finish(state, s.items, s.bytes, s.failed)
        .map_err(|e| format!("--status-file: {e}"))
}

/// `s` as `format`.
pub fn render(s: &Snapshot, format: Format) -> String {
    match format {
        Format::Json => json(s),
        Format::Prometheus => prometheus(s),
    }
}

/// `s` as one JSON object with a newline: counts, rates per second, seconds; totals and the
/// ETA `null` when unknown.
pub fn json(s: &Snapshot) -> String {
    let known = |n: u64| (n > 0).then_some(n);
    let value = serde_json::json!({
        "tool": s.tool,
        "state": s.state.as_str(),
        "phase": s.phase,
        "ranks": s.ranks,
        "elapsed_seconds": s.elapsed.as_secs_f64(),
        "phase_elapsed_seconds": s.phase_elapsed.as_secs_f64(),
        "items": s.items,
        "items_total": known(s.total_items),
        "bytes": s.bytes,
        "bytes_total": known(s.total_bytes),
        "failed": s.failed,
        "items_per_second": s.items_per_second,
        "items_per_second_average": s.items_per_second_average,
        "bytes_per_second": s.bytes_per_second,
        "bytes_per_second_average": s.bytes_per_second_average,
        "eta_seconds": s.eta.map(|d| d.as_secs_f64()),
        "idle_seconds": s.idle.iter().map(|d| d.as_secs_f64()).collect::<Vec<_>>(),
    });
    let mut text = value.to_string();
    text.push('\n');
    text
}

/// A Prometheus label value: `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `s` in Prometheus's text exposition format (0.0.4): one `# HELP` and `# TYPE` per metric,
/// every metric named `mfu_rs_...` and labelled with the tool; the totals and the ETA only
/// when known.
pub fn prometheus(s: &Snapshot) -> String {
    let tool = format!("tool=\"{}\"", label(&s.tool));
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        if samples.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP mfu_rs_{name} {help}");
        let _ = writeln!(out, "# TYPE mfu_rs_{name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(out, "mfu_rs_{name}{{{tool}{labels}}} {v}");
        }
    };
    let one = |v: f64| vec![(String::new(), v)];
    let known = |n: u64| {
        if n > 0 {
            one(n as f64)
        } else {
            Vec::new()
        }
    };
    let info = format!(
        ",phase=\"{}\",state=\"{}\"",
        label(&s.phase),
        s.state.as_str()
    );
    metric(
        "info",
        "gauge",
        "The run: its phase and state in labels (value 1).",
        &[(info, 1.0)],
    );
    metric(
        "running",
        "gauge",
        "1 while the run is under way, 0 once it ended.",
        &one(f64::from(u8::from(s.state == State::Running))),
    );
    metric("ranks", "gauge", "Ranks of the run.", &one(s.ranks as f64));
    metric(
        "elapsed_seconds",
        "gauge",
        "Seconds since the run started.",
        &one(s.elapsed.as_secs_f64()),
    );
    metric(
        "phase_elapsed_seconds",
        "gauge",
        "Seconds since the current phase started.",
        &one(s.phase_elapsed.as_secs_f64()),
    );
    metric(
        "items",
        "gauge",
        "Items done in the current phase, summed over ranks.",
        &one(s.items as f64),
    );
    metric(
        "items_expected",
        "gauge",
        "Items the current phase has in all (absent while unknown).",
        &known(s.total_items),
    );
    metric(
        "bytes",
        "gauge",
        "Bytes done in the current phase, summed over ranks.",
        &one(s.bytes as f64),
    );
    metric(
        "bytes_expected",
        "gauge",
        "Bytes the current phase has in all (absent while unknown).",
        &known(s.total_bytes),
    );
    metric(
        "failed_items",
        "gauge",
        "Items that failed in the current phase.",
        &one(s.failed as f64),
    );
    let rate = |now: f64, average: f64| {
        vec![
            (",window=\"last_interval\"".to_string(), now),
            (",window=\"average\"".to_string(), average),
        ]
    };
    metric(
        "items_per_second",
        "gauge",
        "Items per second over the last interval and since the phase started.",
        &rate(s.items_per_second, s.items_per_second_average),
    );
    metric(
        "bytes_per_second",
        "gauge",
        "Bytes per second over the last interval and since the phase started.",
        &rate(s.bytes_per_second, s.bytes_per_second_average),
    );
    metric(
        "eta_seconds",
        "gauge",
        "Seconds left at the average rate (absent while unknown).",
        &s.eta.map(|d| one(d.as_secs_f64())).unwrap_or_default(),
    );
    let idle: Vec<(String, f64)> = s
        .idle
        .iter()
        .enumerate()
        .map(|(rank, d)| (format!(",rank=\"{rank}\""), d.as_secs_f64()))
        .collect();
    metric(
        "rank_idle_seconds_total",
        "counter",
        "Seconds each rank spent without work in the run's work queues.",
        &idle,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn snapshot() -> Snapshot {
        Snapshot {
            tool: "cp".into(),
            state: State::Running,
            phase: "Cop\"ied\\\n".into(),
            ranks: 2,
            elapsed: Duration::from_secs(3),
            phase_elapsed: Duration::from_secs(2),
            items: 10,
            total_items: 40,
            bytes: 1000,
            total_bytes: 0,
            failed: 1,
            items_per_second: 6.0,
            bytes_per_second: 600.0,
            items_per_second_average: 5.0,
            bytes_per_second_average: 500.0,
            eta: Some(Duration::from_secs(6)),
            idle: vec![Duration::from_millis(250), Duration::ZERO],
        }
    }

    /// A sample line: metric name, labels, value.
    type Sample = (String, String, f64);

    /// Every sample line, and the names of the HELP and of the TYPE lines.
    fn parse(text: &str) -> (Vec<Sample>, Vec<String>, Vec<String>) {
        let (mut samples, mut help, mut kind) = (Vec::new(), Vec::new(), Vec::new());
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                help.push(rest.split(' ').next().unwrap().to_string());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut w = rest.split(' ');
                let name = w.next().unwrap().to_string();
                assert!(matches!(w.next(), Some("gauge" | "counter")), "{line}");
                kind.push(name);
            } else {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let (name, labels) = series.split_once('{').unwrap();
                assert!(labels.ends_with('}'), "{line}");
                samples.push((name.to_string(), labels.to_string(), value.parse().unwrap()));
            }
        }
        (samples, help, kind)
    }

    #[test]
    fn every_metric_is_named_mfu_rs_and_has_its_help_and_type_before_its_samples() {
        let text = prometheus(&snapshot());
        let (samples, help, kind) = parse(&text);
        assert_eq!(help, kind);
        for (name, labels, _) in &samples {
            assert!(name.starts_with("mfu_rs_"), "{name}");
            assert!(help.contains(name), "{name} has no HELP line:\n{text}");
            assert!(labels.starts_with("tool=\"cp\""), "{labels}");
            let at = text.find(&format!("\n{name}{{")).unwrap();
            assert!(text.find(&format!("# TYPE {name} ")).unwrap() < at);
        }
        let value = |name: &str, label: &str| {
            samples
                .iter()
                .find(|(n, l, _)| n == name && l.contains(label))
                .unwrap_or_else(|| panic!("no {name} {label} in:\n{text}"))
                .2
        };
        assert_eq!(value("mfu_rs_items", ""), 10.0);
        assert_eq!(value("mfu_rs_items_expected", ""), 40.0);
        assert_eq!(value("mfu_rs_ranks", ""), 2.0);
        assert_eq!(value("mfu_rs_items_per_second", "last_interval"), 6.0);
        assert_eq!(value("mfu_rs_items_per_second", "\"average\""), 5.0);
        assert_eq!(value("mfu_rs_rank_idle_seconds_total", "rank=\"0\""), 0.25);
        assert_eq!(value("mfu_rs_rank_idle_seconds_total", "rank=\"1\""), 0.0);
        assert_eq!(value("mfu_rs_eta_seconds", ""), 6.0);
        assert!(text.contains("# TYPE mfu_rs_rank_idle_seconds_total counter\n"));
        // An unknown total is left out, not reported as 0.
        assert!(!text.contains("mfu_rs_bytes_expected"), "{text}");
    }

    #[test]
    fn label_values_escape_backslashes_quotes_and_newlines() {
        assert_eq!(label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        let text = prometheus(&snapshot());
        assert!(
            text.contains(
                "mfu_rs_info{tool=\"cp\",phase=\"Cop\\\"ied\\\\\\n\",state=\"running\"} 1\n"
            ),
            "{text}"
        );
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("mfu_rs_info"))
                .count(),
            1
        );
    }

    #[test]
    fn the_json_has_every_field_and_null_for_what_is_unknown() {
        let v: serde_json::Value = serde_json::from_str(&json(&snapshot())).unwrap();
        assert_eq!(v["tool"], "cp");
        assert_eq!(v["state"], "running");
        assert_eq!(v["ranks"], 2);
        assert_eq!(v["items"], 10);
        assert_eq!(v["items_total"], 40);
        assert!(v["bytes_total"].is_null());
        assert_eq!(v["failed"], 1);
        assert_eq!(v["eta_seconds"], 6.0);
        assert_eq!(v["idle_seconds"], serde_json::json!([0.25, 0.0]));
        assert_eq!(v["items_per_second"], 6.0);
        assert_eq!(v["bytes_per_second_average"], 500.0);
    }
}
