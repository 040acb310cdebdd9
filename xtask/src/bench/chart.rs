//! The comparison as a chart: one bar per row, mfu-rs's time over the fastest peer's, green
//! where the row meets its target, red where it does not, with the two targets drawn (0.8:
//! extraction of a GNU-made archive, against GNU tar; 1.0: the rest).

use super::report::Row;
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// Ratios above this are drawn cut off at it (their value is written at the bar's end).
const RATIO_AXIS_MAX: f64 = 3.0;

/// Draw the rows that have a ratio into an SVG file at `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<()> {
    let rows: Vec<(&Row, f64)> = rows
        .iter()
        .filter_map(|r| r.ratio.map(|x| (r, x)))
        .collect();
    let n = rows.len().max(1);
    let height = 90 + 22 * n as u32;
    let area = SVGBackend::new(path, (960, height)).into_drawing_area();
    draw(&area, &rows, n).map_err(|e| anyhow!("draw {}: {e}", path.display()))?;
    area.present()
        .map_err(|e| anyhow!("write {}: {e}", path.display()))?;
    Ok(())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw(
    area: &Area,
    rows: &[(&Row, f64)],
    n: usize,
) -> std::result::Result<(), DrawingAreaErrorKind<std::io::Error>> {
    area.fill(&WHITE)?;
    let xmax = rows
        .iter()
        .map(|&(_, x)| x)
        .fold(1.2, f64::max)
        .min(RATIO_AXIS_MAX)
        * 1.08;
    // Row i of the table is drawn at the top: segment n-1-i (the axis also asks for n).
    let row_at = |seg: usize| (n - 1).checked_sub(seg).and_then(|i| rows.get(i));
    let label = |seg: usize| -> String {
        row_at(seg).map_or(String::new(), |(r, _)| {
            format!("{} · {} · {}", r.workload, r.fs, r.op)
        })
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            "mfu-rs time ÷ fastest peer's time (lower is better)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(230)
        .build_cartesian_2d(0f64..xmax, (0..n).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => label(*i),
            SegmentValue::Last => String::new(),
        })
        .x_desc("ratio (1 = as fast as the fastest peer)")
        .label_style(("sans-serif", 12))
        .draw()?;
    let pass = RGBColor(46, 139, 87);
    let fail = RGBColor(200, 55, 45);
    chart.draw_series(
        Histogram::horizontal(&chart)
            .margin(3)
            .style_func(|seg, _| {
                let ok = match seg {
                    SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                        row_at(*i).is_none_or(|(r, _)| r.passes())
                    }
                    SegmentValue::Last => true,
                };
                if ok {
                    pass.filled()
                } else {
                    fail.filled()
                }
            })
            .data(
                rows.iter()
                    .enumerate()
                    .map(|(i, &(_, x))| (n - 1 - i, x.min(RATIO_AXIS_MAX))),
            ),
    )?;
    chart.draw_series(rows.iter().enumerate().map(|(i, &(_, x))| {
        Text::new(
            format!("{x:.2}"),
            (
                x.min(RATIO_AXIS_MAX) + 0.01,
                SegmentValue::CenterOf(n - 1 - i),
            ),
            ("sans-serif", 11).into_font(),
        )
    }))?;
    for (target, color, name) in [
        (0.8, BLUE, "tar-extract target 0.8 (vs GNU tar)"),
        (1.0, BLACK, "target 1.0 (even with the fastest peer)"),
    ] {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (target, SegmentValue::Exact(0)),
                    (target, SegmentValue::Last),
                ],
                color.stroke_width(1),
            )))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::ops::Role;
    use crate::bench::report::Timing;
    use crate::bench::workload::{Kind, Workload};

    #[test]
    fn every_row_with_a_ratio_gets_a_labelled_bar() {
        let w = Workload {
            kind: Kind::Small,
            label: "x".into(),
            src: "/x".into(),
            entries: 1,
            bytes: 1,
            files: 1,
        };
        let t = |name: &str, role, median| Timing {
            name: name.into(),
            role,
            cmd: String::new(),
            runs: vec![median],
            median,
            max_rss_kib: 0,
        };
        let rows = vec![
            Row::new(
                &w,
                "tmpfs",
                "cp",
                vec![t("m", Role::Mfu { np: 1 }, 0.5), t("p", Role::Peer, 1.0)],
                0.8,
                None,
            ),
            Row::new(
                &w,
                "disk",
                "rm",
                vec![t("m", Role::Mfu { np: 1 }, 9.0), t("p", Role::Peer, 1.0)],
                1.0,
                None,
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        svg(&rows, &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..80.min(text.len())]);
        assert!(text.contains("small · tmpfs · cp") && text.contains("small · disk · rm"));
        let texts: Vec<&str> = text.split("<text").skip(1).collect();
        assert!(
            texts
                .iter()
                .any(|t| t.contains(">\n0.50\n") || t.contains(">0.50<")),
            "{text}"
        );
        assert!(
            texts.iter().any(|t| t.contains("9.00")),
            "the cut-off bar shows its value"
        );
        assert!(
            text.contains("#2E8B57") || text.contains("rgb(46,139,87)"),
            "pass colour"
        );
        assert!(
            text.contains("#C8372D") || text.contains("rgb(200,55,45)"),
            "fail colour"
        );
    }
}
