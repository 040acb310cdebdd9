//! The report as one SVG picture (plotters' SVG backend): a title with the totals, the usage
//! per user as bars, the age of the data by modification and by access time as two
//! histograms, and the largest directories below the PATHs as a treemap (area = size).
//!
//! Everything is placed in pixels by this file, so that no label runs over another: each
//! label is written only where it fits, by an estimate of its width (the SVG leaves the font
//! to the viewer).

use super::tally::Usage;
use super::units::human;
use super::{PathUsage, Report};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of the picture, pixels.
const WIDTH: i32 = 1000;
/// Users drawn as bars; the others are one bar.
const USER_BARS: usize = 10;
/// Directories drawn in the treemap; the rest is one cell.
const TREEMAP_CELLS: usize = 24;
/// The colours of bars and cells (Tableau 10).
const PALETTE: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(89, 161, 79),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
    RGBColor(186, 176, 172),
];
const INK: RGBColor = RGBColor(34, 34, 34);
const GREY: RGBColor = RGBColor(110, 110, 110);

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type Drawn = Result<(), String>;

/// The picture of `report`, as SVG text.
pub fn svg(report: &Report) -> String {
    let users = report.users.len().min(USER_BARS + 1);
    let heights = Layout {
        header: 78,
        users: 44 + 26 * users.max(1) as i32 + 10,
        ages: 290,
        treemap: 420,
    };
    let height = heights.header + heights.users + heights.ages + heights.treemap + 10;
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (WIDTH as u32, height as u32)).into_drawing_area();
        if let Err(e) = draw(&root, report, &heights) {
            // A String backend does not fail; should it, the picture says so.
            let _ = root.draw_text(&e, &style(14, INK, false), (10, 10));
        }
        let _ = root.present();
    }
    out
}

struct Layout {
    header: i32,
    users: i32,
    ages: i32,
    treemap: i32,
}

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

fn style(size: u32, color: RGBColor, bold: bool) -> TextStyle<'static> {
    let font = ("sans-serif", size).into_font();
    let font = if bold {
        font.style(FontStyle::Bold)
    } else {
        font
    };
    font.color(&color)
}

/// Estimated width in pixels of `text` drawn at `size` (plotters draws at size ÷ 1.24).
fn text_width(text: &str, size: u32) -> i32 {
    (text.chars().count() as f64 * f64::from(size) / 1.24 * 0.58).ceil() as i32
}

/// `text` cut (with `…`) to fit `width` pixels at `size`; empty when not even that fits.
fn fit(text: &str, size: u32, width: i32) -> String {
    if text_width(text, size) <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().collect();
    while !cut.is_empty() {
        cut.pop();
        let t = format!("{cut}…");
        if text_width(&t, size) <= width {
            return if cut.chars().count() >= 3 {
                t
            } else {
                String::new()
            };
        }
    }
    String::new()
}

/// `1234567` → `1,234,567`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 entry`, `1,234 entries`.
fn entries(n: u64) -> String {
    match n {
        1 => "1 entry".into(),
        n => format!("{} entries", grouped(n)),
    }
}

/// What "size" means in the picture: `allocated` or `apparent`.
fn measure_word(report: &Report) -> &'static str {
    match report.units.measure {
        super::Measure::Allocated => "allocated",
        super::Measure::Apparent => "apparent",
    }
}

fn size_of(report: &Report, u: &Usage) -> u64 {
    u.measured(report.units.measure)
}

fn draw(root: &Area, report: &Report, h: &Layout) -> Drawn {
    root.fill(&WHITE).map_err(err)?;
    let (header, rest) = root.split_vertically(h.header);
    let (users, rest) = rest.split_vertically(h.users);
    let (ages, treemap) = rest.split_vertically(h.ages);
    draw_header(&header, report)?;
    draw_users(&users, report)?;
    let (mtime, atime) = ages.split_horizontally(WIDTH / 2);
    draw_ages(
        &mtime,
        report,
        &report.mtime,
        "Age of data by last modification (mtime)",
        PALETTE[0],
    )?;
    draw_ages(
        &atime,
        report,
        &report.atime,
        "Age of data by last access (atime)",
        PALETTE[1],
    )?;
    draw_treemap(&treemap, report, h.treemap)
}

fn draw_header(area: &Area, report: &Report) -> Drawn {
    let roots: Vec<String> = report
        .roots
        .iter()
        .map(|r| flist::path::display(r).into_owned())
        .collect();
    let title = fit(
        &format!("Disk usage of {}", roots.join(", ")),
        24,
        WIDTH - 40,
    );
    area.draw_text(&title, &style(24, INK, true), (20, 14))
        .map_err(err)?;
    let when = crate::engine::time_text::utc(report.now, "%Y-%m-%d %H:%M UTC").unwrap_or_default();
    let t = &report.total;
    let mut line = format!(
        "{} allocated · {} apparent · {} · ages as of {when}",
        human(t.blocks * 512),
        human(t.bytes),
        entries(t.files),
    );
    if !report.blocks_known {
        line = format!(
            "{} apparent · {} (from a list: no allocation known) · ages as of {when}",
            human(t.bytes),
            entries(t.files)
        );
    }
    area.draw_text(
        &fit(&line, 15, WIDTH - 40),
        &style(15, GREY, false),
        (20, 48),
    )
    .map_err(err)
}

fn section_title(area: &Area, text: &str, x: i32) -> Drawn {
    area.draw_text(text, &style(18, INK, true), (x, 10))
        .map_err(err)
}

/// One bar per user (the largest first), its name on the left, its size, share and entries
/// at its end.
fn draw_users(area: &Area, report: &Report) -> Drawn {
    section_title(
        area,
        &format!("Usage per user ({} size)", measure_word(report)),
        20,
    )?;
    let mut rows: Vec<(String, Usage)> = report
        .users
        .iter()
        .take(USER_BARS)
        .map(|o| (o.name.clone(), o.usage))
        .collect();
    if report.users.len() > USER_BARS {
        let mut rest = Usage::default();
        for o in &report.users[USER_BARS..] {
            rest.add(&o.usage);
        }
        let n = report.users.len() - USER_BARS;
        rows.push((format!("{n} others"), rest));
    }
    if rows.is_empty() {
        return area
            .draw_text("nothing counted", &style(14, GREY, false), (20, 50))
            .map_err(err);
    }
    let total = size_of(report, &report.total).max(1);
    let max = rows
        .iter()
        .map(|(_, u)| size_of(report, u))
        .max()
        .unwrap_or(1)
        .max(1);
    let (label_right, bar_left, bar_max) = (170, 180, 560);
    for (i, (name, u)) in rows.iter().enumerate() {
        let y = 44 + 26 * i as i32;
        let label = fit(name, 14, label_right - 20);
        area.draw_text(
            &label,
            &style(14, INK, false).pos(Pos::new(HPos::Right, VPos::Center)),
            (label_right, y + 10),
        )
        .map_err(err)?;
        let size = size_of(report, u);
        let w = ((size as f64 / max as f64) * f64::from(bar_max)).round() as i32;
        let w = w.max(if size > 0 { 2 } else { 0 });
        area.draw(&Rectangle::new(
            [(bar_left, y), (bar_left + w, y + 20)],
            PALETTE[i % PALETTE.len()].filled(),
        ))
        .map_err(err)?;
        let share = size as f64 * 100.0 / total as f64;
        let value = format!("{}  ({share:.1}%)  {}", human(size), entries(u.files));
        area.draw_text(
            &value,
            &style(13, INK, false).pos(Pos::new(HPos::Left, VPos::Center)),
            (bar_left + w + 8, y + 10),
        )
        .map_err(err)?;
    }
    Ok(())
}

/// Short bucket labels that fit under a bar.
const AGE_LABELS: [&str; 7] = [
    "< 1 day",
    "< 1 week",
    "< 30 days",
    "< 90 days",
    "< 1 year",
    "< 3 years",
    "older",
];

/// One bar per age bucket, youngest on the left: height by size, the size above it, the
/// bucket and the entries below.
fn draw_ages(
    area: &Area,
    report: &Report,
    buckets: &[super::Age],
    title: &str,
    color: RGBColor,
) -> Drawn {
    section_title(area, title, 20)?;
    let (xr, yr) = area.get_pixel_range();
    let (width, height) = (xr.end - xr.start, yr.end - yr.start);
    let (left, right) = (24, width - 16);
    let (top, bottom) = (66, height - 52);
    let slot = (right - left) / buckets.len().max(1) as i32;
    let max = buckets
        .iter()
        .map(|b| size_of(report, &b.usage))
        .max()
        .unwrap_or(0)
        .max(1);
    area.draw(&PathElement::new(
        vec![(left, bottom), (right, bottom)],
        GREY.stroke_width(1),
    ))
    .map_err(err)?;
    area.draw_text(
        &format!("{} size per bucket; entries below", measure_word(report)),
        &style(12, GREY, false),
        (20, 36),
    )
    .map_err(err)?;
    for (i, b) in buckets.iter().enumerate() {
        let size = size_of(report, &b.usage);
        let x = left + slot * i as i32;
        let h = ((size as f64 / max as f64) * f64::from(bottom - top)).round() as i32;
        let h = h.max(if size > 0 { 2 } else { 0 });
        area.draw(&Rectangle::new(
            [(x + 6, bottom - h), (x + slot - 6, bottom)],
            color.filled(),
        ))
        .map_err(err)?;
        let center = x + slot / 2;
        let above = Pos::new(HPos::Center, VPos::Bottom);
        area.draw_text(
            &fit(&human(size), 13, slot),
            &style(13, INK, false).pos(above),
            (center, bottom - h - 4),
        )
        .map_err(err)?;
        let below = Pos::new(HPos::Center, VPos::Top);
        let label = AGE_LABELS.get(i).copied().unwrap_or(b.bucket.as_str());
        area.draw_text(
            &fit(label, 13, slot),
            &style(13, INK, false).pos(below),
            (center, bottom + 6),
        )
        .map_err(err)?;
        area.draw_text(
            &fit(&grouped(b.usage.files), 12, slot),
            &style(12, GREY, false).pos(below),
            (center, bottom + 24),
        )
        .map_err(err)?;
    }
    Ok(())
}

/// The directories right below the PATHs as rectangles of areas proportional to their sizes
/// (squarified), each holding its own largest subdirectories the same way; the files directly in
/// a directory and its smaller subdirectories are one lighter cell.
fn draw_treemap(area: &Area, report: &Report, height: i32) -> Drawn {
    section_title(
        area,
        &format!(
            "Largest directories below {} (area = {} size)",
            if report.roots.len() == 1 {
                flist::path::display(&report.roots[0]).into_owned()
            } else {
                "the paths".into()
            },
            measure_word(report)
        ),
        20,
    )?;
    let top: Vec<&PathUsage> = report.treemap.iter().filter(|d| d.depth == 1).collect();
    let cells = cells_of(
        report,
        &top,
        size_of(report, &report.total),
        "files and smaller directories",
    );
    if cells.is_empty() {
        return area
            .draw_text("nothing counted", &style(14, GREY, false), (20, 50))
            .map_err(err);
    }
    let frame = Rect {
        x: 20.0,
        y: 44.0,
        w: f64::from(WIDTH - 40),
        h: f64::from(height - 60),
    };
    let sizes: Vec<f64> = cells.iter().map(|c| c.size as f64).collect();
    for (i, (rect, cell)) in squarify(&sizes, frame).iter().zip(&cells).enumerate() {
        let color = match cell.path {
            Some(_) => PALETTE[i % PALETTE.len()],
            None => RGBColor(200, 200, 200),
        };
        let (x0, y0, x1, y1) = pixels(rect);
        area.draw(&Rectangle::new([(x0, y0), (x1, y1)], color.filled()))
            .map_err(err)?;
        let (w, h) = (x1 - x0 - 8, y1 - y0);
        let inner = Rect {
            x: rect.x + 3.0,
            y: rect.y + 22.0,
            w: rect.w - 6.0,
            h: rect.h - 25.0,
        };
        let nested = cell.path.filter(|_| inner.w >= 60.0 && inner.h >= 40.0);
        if let Some(path) = nested {
            // One line of label above the subdirectories.
            let label = fit(&format!("{}  {}", cell.name, human(cell.size)), 14, w);
            area.draw_text(&label, &style(14, INK, true), (x0 + 5, y0 + 5))
                .map_err(err)?;
            let children: Vec<&PathUsage> = report
                .treemap
                .iter()
                .filter(|d| d.depth == 2 && flist::path::parent(&d.path) == path)
                .collect();
            let inner_cells = cells_of(report, &children, cell.size, "files");
            let sizes: Vec<f64> = inner_cells.iter().map(|c| c.size as f64).collect();
            for (r, c) in squarify(&sizes, inner).iter().zip(&inner_cells) {
                let shade = if c.path.is_some() { 0.35 } else { 0.7 };
                draw_cell(area, r, c, tint(color, shade), 13)?;
            }
        } else {
            if h >= 22 {
                let name = fit(&cell.name, 14, w);
                area.draw_text(&name, &style(14, INK, true), (x0 + 5, y0 + 5))
                    .map_err(err)?;
            }
            if h >= 40 {
                let value = fit(&human(cell.size), 13, w);
                area.draw_text(&value, &style(13, INK, false), (x0 + 5, y0 + 23))
                    .map_err(err)?;
            }
        }
        area.draw(&Rectangle::new([(x0, y0), (x1, y1)], WHITE.stroke_width(2)))
            .map_err(err)?;
    }
    Ok(())
}

/// One cell of the treemap: a directory (its path) or the rest of its parent (`None`).
struct Cell<'a> {
    name: String,
    size: u64,
    path: Option<&'a [u8]>,
}

/// The cells for the directories `dirs` (largest first, at most [`TREEMAP_CELLS`]) inside a
/// parent of `whole` bytes, and one cell named `rest` for what they leave of it.
fn cells_of<'a>(report: &Report, dirs: &[&'a PathUsage], whole: u64, rest: &str) -> Vec<Cell<'a>> {
    let mut cells: Vec<Cell<'a>> = dirs
        .iter()
        .filter(|d| size_of(report, &d.usage) > 0)
        .take(TREEMAP_CELLS)
        .map(|d| Cell {
            name: format!("{}/", flist::path::display(flist::path::basename(&d.path))),
            size: size_of(report, &d.usage),
            path: Some(&d.path),
        })
        .collect();
    let shown: u64 = cells.iter().map(|c| c.size).sum();
    if whole > shown {
        cells.push(Cell {
            name: rest.to_string(),
            size: whole - shown,
            path: None,
        });
    }
    cells
}

/// A cell of a second level: filled, outlined, its name and size where they fit.
fn draw_cell(area: &Area, rect: &Rect, cell: &Cell<'_>, color: RGBColor, size: u32) -> Drawn {
    let (x0, y0, x1, y1) = pixels(rect);
    area.draw(&Rectangle::new([(x0, y0), (x1, y1)], color.filled()))
        .map_err(err)?;
    area.draw(&Rectangle::new([(x0, y0), (x1, y1)], WHITE.stroke_width(1)))
        .map_err(err)?;
    let (w, h) = (x1 - x0 - 8, y1 - y0);
    if h >= 20 {
        area.draw_text(
            &fit(&cell.name, size, w),
            &style(size, INK, false),
            (x0 + 4, y0 + 4),
        )
        .map_err(err)?;
    }
    if h >= 36 {
        area.draw_text(
            &fit(&human(cell.size), size - 1, w),
            &style(size - 1, INK, false),
            (x0 + 4, y0 + 20),
        )
        .map_err(err)?;
    }
    Ok(())
}

/// `rect` in whole pixels: left, top, right, bottom.
fn pixels(rect: &Rect) -> (i32, i32, i32, i32) {
    (
        rect.x.round() as i32,
        rect.y.round() as i32,
        (rect.x + rect.w).round() as i32,
        (rect.y + rect.h).round() as i32,
    )
}

/// `color` mixed with white: `amount` 0 is the colour, 1 is white.
fn tint(color: RGBColor, amount: f64) -> RGBColor {
    let mix = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * amount).round() as u8;
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

/// A rectangle, in pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

/// The squarified treemap of `sizes` (largest first) in `frame` (Bruls, Huizing and van Wijk):
/// rows of cells laid along the shorter side, each row grown while that keeps its cells
/// closer to squares. One rectangle per size, in order; areas proportional to the sizes.
pub fn squarify(sizes: &[f64], frame: Rect) -> Vec<Rect> {
    let total: f64 = sizes.iter().sum();
    if total <= 0.0 {
        return sizes
            .iter()
            .map(|_| Rect {
                w: 0.0,
                h: 0.0,
                ..frame
            })
            .collect();
    }
    let scale = frame.w * frame.h / total;
    let areas: Vec<f64> = sizes.iter().map(|s| s * scale).collect();
    let mut out = Vec::with_capacity(areas.len());
    let mut free = frame;
    let mut start = 0;
    while start < areas.len() {
        let side = free.w.min(free.h);
        let mut end = start + 1;
        while end < areas.len()
            && worst(&areas[start..=end], side) <= worst(&areas[start..end], side)
        {
            end += 1;
        }
        let row = &areas[start..end];
        let sum: f64 = row.iter().sum();
        if free.w >= free.h {
            // A column on the left.
            let width = if free.h > 0.0 { sum / free.h } else { 0.0 };
            let mut y = free.y;
            for a in row {
                let h = if width > 0.0 { a / width } else { 0.0 };
                out.push(Rect {
                    x: free.x,
                    y,
                    w: width,
                    h,
                });
                y += h;
            }
            free.x += width;
            free.w -= width;
        } else {
            // A row at the top.
            let height = if free.w > 0.0 { sum / free.w } else { 0.0 };
            let mut x = free.x;
            for a in row {
                let w = if height > 0.0 { a / height } else { 0.0 };
                out.push(Rect {
                    x,
                    y: free.y,
                    w,
                    h: height,
                });
                x += w;
            }
            free.y += height;
            free.h -= height;
        }
        start = end;
    }
    out
}

/// The worst aspect ratio of a row of `areas` laid along a side of length `side`.
fn worst(areas: &[f64], side: f64) -> f64 {
    let sum: f64 = areas.iter().sum();
    let (max, min) = areas
        .iter()
        .fold((0f64, f64::MAX), |(mx, mn), &a| (mx.max(a), mn.min(a)));
    if sum <= 0.0 || min <= 0.0 {
        return f64::MAX;
    }
    let s2 = side * side;
    let sum2 = sum * sum;
    (s2 * max / sum2).max(sum2 / (s2 * min))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn treemap_cells_fill_the_frame_in_proportion_without_overlap() {
        let frame = Rect {
            x: 10.0,
            y: 20.0,
            w: 600.0,
            h: 400.0,
        };
        let sizes = [6.0, 6.0, 4.0, 3.0, 2.0, 2.0, 1.0];
        let cells = squarify(&sizes, frame);
        assert_eq!(cells.len(), sizes.len());
        let total: f64 = sizes.iter().sum();
        for (c, s) in cells.iter().zip(sizes) {
            let want = s / total * frame.w * frame.h;
            assert!((c.w * c.h - want).abs() < 1e-6, "{c:?} for {s}");
            assert!(c.x >= frame.x - 1e-9 && c.x + c.w <= frame.x + frame.w + 1e-6);
            assert!(c.y >= frame.y - 1e-9 && c.y + c.h <= frame.y + frame.h + 1e-6);
        }
        for (i, a) in cells.iter().enumerate() {
            for b in &cells[i + 1..] {
                let overlap_w = (a.x + a.w).min(b.x + b.w) - a.x.max(b.x);
                let overlap_h = (a.y + a.h).min(b.y + b.h) - a.y.max(b.y);
                assert!(overlap_w <= 1e-6 || overlap_h <= 1e-6, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn labels_are_cut_to_fit_and_numbers_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(1234567), "1,234,567");
        assert_eq!(fit("short", 14, 200), "short");
        let cut = fit("a rather long directory name indeed", 14, 80);
        assert!(cut.ends_with('…') && text_width(&cut, 14) <= 80, "{cut}");
        assert_eq!(fit("abcdef", 14, 5), "");
    }
}
