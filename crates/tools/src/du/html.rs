//! The report as one self-contained HTML page: the chart (the SVG of [`super::chart`], inline)
//! and every table of the text report, sizes in the run's units with the exact bytes beside.

use super::chart::grouped;
use super::units::human;
use super::{Age, Owner, PathUsage, Report, Usage};
use std::fmt::Write;

/// `text` safe inside HTML text and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The cells of one usage: size (in the report's units), apparent bytes, allocated bytes,
/// entries.
fn usage_cells(report: &Report, u: &Usage) -> String {
    let allocated = if report.blocks_known {
        human(u.blocks * 512)
    } else {
        "–".into()
    };
    format!(
        "<td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>",
        escape(&report.units.text(u)),
        human(u.bytes),
        allocated,
        grouped(u.files)
    )
}

fn table_head(first: &str, report: &Report) -> String {
    format!(
        "<table><tr><th>{}</th><th>{}</th><th>apparent</th><th>allocated</th><th>entries</th></tr>\n",
        escape(first),
        escape(&report.units.heading())
    )
}

fn owners(out: &mut String, title: &str, what: &str, rows: &[Owner], report: &Report) {
    let _ = writeln!(out, "<h2>{}</h2>", escape(title));
    out.push_str(&table_head(what, report));
    for o in rows {
        let _ = writeln!(
            out,
            "<tr><td>{} <span class=id>({})</span></td>{}</tr>",
            escape(&o.name),
            o.id,
            usage_cells(report, &o.usage)
        );
    }
    out.push_str("</table>\n");
}

fn paths(out: &mut String, title: &str, what: &str, rows: &[PathUsage], report: &Report) {
    let _ = writeln!(out, "<h2>{}</h2>", escape(title));
    out.push_str(&table_head(what, report));
    for r in rows {
        let _ = writeln!(
            out,
            "<tr><td class=p>{}</td>{}</tr>",
            escape(&flist::path::display(&r.path)),
            usage_cells(report, &r.usage)
        );
    }
    out.push_str("</table>\n");
}

fn ages(out: &mut String, title: &str, rows: &[Age], report: &Report) {
    let _ = writeln!(out, "<h2>{}</h2>", escape(title));
    out.push_str(&table_head("age", report));
    for a in rows {
        let _ = writeln!(
            out,
            "<tr><td>{}</td>{}</tr>",
            escape(&a.bucket),
            usage_cells(report, &a.usage)
        );
    }
    out.push_str("</table>\n");
}

/// The page: a title, the chart `svg`, then the tables.
pub fn page(report: &Report, svg: &str) -> String {
    let roots: Vec<String> = report
        .roots
        .iter()
        .map(|r| flist::path::display(r).into_owned())
        .collect();
    let title = format!("Disk usage of {}", roots.join(", "));
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=en>\n<head>\n<meta charset=utf-8>\n<title>{t}</title>\n\
         <style>\nbody {{ font-family: sans-serif; margin: 2em; color: #222; }}\n\
         table {{ border-collapse: collapse; margin-bottom: 1.5em; }}\n\
         th, td {{ padding: 0.2em 0.8em; border-bottom: 1px solid #ddd; text-align: left; }}\n\
         td.n {{ text-align: right; font-variant-numeric: tabular-nums; }}\n\
         td.p {{ font-family: monospace; }}\n.id {{ color: #777; }}\n</style>\n</head>\n<body>\n\
         <h1>{t}</h1>\n",
        t = escape(&title)
    );
    let when = crate::engine::time_text::utc(report.now, "%Y-%m-%d %H:%M UTC").unwrap_or_default();
    let _ = writeln!(
        out,
        "<p>{} entries; {} apparent{}; ages as of {}. Sizes in the SIZE column: {} ({} size). \
         A hard-linked file is counted once.</p>",
        grouped(report.total.files),
        human(report.total.bytes),
        if report.blocks_known {
            format!(", {} allocated", human(report.total.blocks * 512))
        } else {
            " (read from a list, which holds no allocation)".into()
        },
        escape(&when),
        escape(&report.units.heading()),
        match report.units.measure {
            super::Measure::Allocated => "allocated",
            super::Measure::Apparent => "apparent",
        }
    );
    let _ = writeln!(out, "<div class=chart>\n{svg}\n</div>");
    owners(&mut out, "Usage per user", "user", &report.users, report);
    owners(&mut out, "Usage per group", "group", &report.groups, report);
    paths(
        &mut out,
        &format!("Directories to depth {}", report.depth),
        "directory",
        &report.dirs,
        report,
    );
    paths(
        &mut out,
        "Largest directories (whole subtrees)",
        "directory",
        &report.largest_dirs,
        report,
    );
    paths(
        &mut out,
        "Largest files",
        "file",
        &report.largest_files,
        report,
    );
    ages(
        &mut out,
        "Age by last modification (mtime), directories excluded",
        &report.mtime,
        report,
    );
    ages(
        &mut out,
        "Age by last access (atime), directories excluded",
        &report.atime,
        report,
    );
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped() {
        assert_eq!(escape("<a & 'b'>"), "&lt;a &amp; &#39;b&#39;&gt;");
        let report = Report {
            roots: vec![b"/d<x>".to_vec()],
            largest_files: vec![PathUsage {
                path: b"/d<x>/f&g\xff".to_vec(),
                depth: 0,
                usage: Usage::one(5, 8),
            }],
            blocks_known: true,
            ..Report::default()
        };
        let page = page(&report, "<svg></svg>");
        assert!(
            page.contains("<h1>Disk usage of /d&lt;x&gt;</h1>"),
            "{page}"
        );
        assert!(page.contains("/d&lt;x&gt;/f&amp;g\\xff"), "{page}");
        assert!(page.contains("<svg></svg>"));
    }
}
