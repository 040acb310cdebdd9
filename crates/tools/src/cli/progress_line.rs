//! The progress line of the console: what is done of what there is (items and bytes), the rate
//! over the last interval beside the average, and the time left; optionally prefixed with the
//! time of day as mpiFileUtils prints it (`[2026-11-26T04:12:13]`).

use flist::units::human_bytes;
use std::sync::Mutex;
use std::time::Duration;
use steal::progress::{human_duration, Report};

/// The previous snapshot, for the rate over the last interval.
#[derive(Debug, Default)]
pub struct LastSnapshot(Mutex<Option<(Duration, u64, u64)>>);

/// `verb` and `r` as one line, e.g. `Copied 1.200 GiB of 4.000 GiB (30%), 1200 of 5000 items in
/// 12 s, 120.0 MiB/s now, 102.4 MiB/s average, ETA 28 s`. `last` holds the previous snapshot.
pub fn line(verb: &str, r: &Report, last: &LastSnapshot) -> String {
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let previous = last
        .0
        .lock()
        .map(|mut l| l.replace((r.elapsed, r.items, r.bytes)))
        .unwrap_or_default();
    // Units per second since the previous line (or since the start for the first one).
    let now = |done: u64, which: fn(&(Duration, u64, u64)) -> u64| -> f64 {
        match previous {
            Some(p) if r.elapsed > p.0 => {
                done.saturating_sub(which(&p)) as f64 / (r.elapsed - p.0).as_secs_f64()
            }
            _ => done as f64 / secs,
        }
    };
    let of = |done: String, total: u64, shown: String| {
        if total > 0 {
            format!("{done} of {shown}")
        } else {
            done
        }
    };
    let mut text = String::from(verb);
    let items = of(
        r.items.to_string(),
        r.total_items,
        r.total_items.to_string(),
    );
    if r.total_bytes > 0 || r.bytes > 0 {
        let bytes = of(
            human_bytes(r.bytes),
            r.total_bytes,
            human_bytes(r.total_bytes),
        );
        let pct = percent(r.bytes, r.total_bytes);
        text += &format!(" {bytes}{pct}, {items} items in {}", human_duration(secs));
        let (current, average) = (now(r.bytes, |p| p.2), r.bytes as f64 / secs);
        text += &format!(
            ", {}/s now, {}/s average",
            human_bytes(current as u64),
            human_bytes(average as u64)
        );
        text += &eta(
            r.total_bytes.saturating_sub(r.bytes),
            r.total_bytes,
            average,
        );
    } else {
        let pct = percent(r.items, r.total_items);
        text += &format!(" {items} items{pct} in {}", human_duration(secs));
        let (current, average) = (now(r.items, |p| p.1), r.items as f64 / secs);
        text += &format!(", {current:.0} items/s now, {average:.0} items/s average");
        text += &eta(
            r.total_items.saturating_sub(r.items),
            r.total_items,
            average,
        );
    }
    if r.errors > 0 {
        text += &format!(", {} failed", r.errors);
    }
    text
}

fn percent(done: u64, total: u64) -> String {
    if total > 0 {
        format!(" ({:.0}%)", 100.0 * done as f64 / total as f64)
    } else {
        String::new()
    }
}

/// `, ETA 28 s` for `left` units at `rate` per second; nothing without a total or a rate.
fn eta(left: u64, total: u64, rate: f64) -> String {
    if total > 0 && rate > 0.0 {
        format!(", ETA {}", human_duration(left as f64 / rate))
    } else {
        String::new()
    }
}

/// `[2026-11-26T04:12:13] ` in local time, as mpiFileUtils prefixes its lines.
pub fn timestamp() -> String {
    format!(
        "[{}] ",
        crate::engine::time_text::now_local("%Y-%m-%dT%H:%M:%S")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(items: u64, bytes: u64, total_items: u64, total_bytes: u64, secs: u64) -> Report {
        Report {
            items,
            bytes,
            errors: 0,
            total_items,
            total_bytes,
            elapsed: Duration::from_secs(secs),
        }
    }

    #[test]
    fn lines_show_counts_totals_current_and_average_rates_and_eta() {
        let last = LastSnapshot::default();
        let first = line("Copied", &report(10, 10 << 20, 100, 100 << 20, 10), &last);
        assert_eq!(
            first,
            "Copied 10.000 MiB of 100.000 MiB (10%), 10 of 100 items in 10 s, \
             1.000 MiB/s now, 1.000 MiB/s average, ETA 90 s"
        );
        // 30 MiB in the next 10 s: the current rate is 3 MiB/s, the average 2.
        let second = line("Copied", &report(40, 40 << 20, 100, 100 << 20, 20), &last);
        assert!(second.contains("40 of 100 items"), "{second}");
        assert!(
            second.contains("3.000 MiB/s now, 2.000 MiB/s average"),
            "{second}"
        );
        assert!(second.ends_with("ETA 30 s"), "{second}");
    }

    #[test]
    fn item_only_work_shows_items_and_rates_without_bytes() {
        let last = LastSnapshot::default();
        let l = line("Walked", &report(500, 0, 0, 0, 5), &last);
        assert_eq!(
            l,
            "Walked 500 items in 5.0 s, 100 items/s now, 100 items/s average"
        );
        let l = line("Removed", &report(50, 0, 200, 0, 5), &last);
        assert!(
            l.starts_with("Removed 50 of 200 items (25%) in 5.0 s"),
            "{l}"
        );
        assert!(l.contains("ETA 15 s"), "{l}");
    }

    #[test]
    fn timestamps_look_like_mpifileutils() {
        let t = timestamp();
        assert_eq!(t.len(), "[2026-11-26T04:12:13] ".len(), "{t}");
        assert!(
            t.starts_with("[20") && t.contains('T') && t.ends_with("] "),
            "{t}"
        );
    }
}
