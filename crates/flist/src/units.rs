//! Byte sizes, read and written: size arguments as users of the C tools write them
//! (mpiFileUtils' `abtoull`: binary units, optional `B`/`iB`, decimals allowed), one parser for
//! every size a tool or a filter takes; and one scale for printing sizes, in the two roundings
//! users see: the tools' own (`1.500 KiB`) and dwalk's (`0.981 MiB`), which scripts parse.

/// The binary units sizes print in, bytes first.
const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// `bytes` scaled into [`UNITS`]: divided by 1024 while `next(value)` says so.
fn scale(bytes: u64, next: impl Fn(f64) -> bool) -> (f64, usize) {
    let (mut v, mut u) = (bytes as f64, 0);
    while next(v) && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    (v, u)
}

/// `1536` → `1.500 KiB`: binary units, the next one from 1024 on, three decimals above bytes.
pub fn human_bytes(bytes: u64) -> String {
    match scale(bytes, |v| v >= 1024.0) {
        (_, 0) => format!("{bytes} B"),
        (v, u) => format!("{v:.3} {}", UNITS[u]),
    }
}

/// Bytes as mpiFileUtils prints them (`mfu_format_bytes`): divided by 1024 while above 1024,
/// and once more when the value is still above 1000 (`1005 KiB` shows as `0.981 MiB`); the
/// value and its unit, for `%7.3f %3s`.
pub fn dwalk_units(bytes: u64) -> (f64, &'static str) {
    let (mut v, mut u) = scale(bytes, |v| v / 1024.0 > 1.0);
    if v > 1000.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    (v, UNITS[u])
}

/// Parse `4MB`, `4MiB`, `4m`, `1.5GB`, `512` into bytes. Units `k m g t p e` are powers of 1024,
/// case-insensitive, optionally followed by `B` or `iB`. Exact integer arithmetic: a fraction of
/// a byte is dropped (`1.5` is 1). Surrounding white space is ignored; white space inside is not.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "invalid size '{text}': expected a number with an optional unit, such as 4MB or 1.5G"
        )
    };
    let t = text.trim();
    let digits_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(digits_end);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(bad());
    }
    let mut unit_chars = unit.chars();
    let scale: u128 = match unit_chars.next().map(|c| c.to_ascii_lowercase()) {
        None => 1,
        Some(c) => {
            let power = "kmgtpe".find(c).ok_or_else(bad)? as u32 + 1;
            match unit_chars.as_str().to_ascii_lowercase().as_str() {
                "" | "b" | "ib" => 1u128 << (10 * power),
                _ => return Err(bad()),
            }
        }
    };
    let parse = |s: &str| {
        if s.is_empty() {
            Ok(0)
        } else {
            s.parse::<u128>().map_err(|_| bad())
        }
    };
    // 30 fractional digits at most: far below a byte at any unit.
    let frac = &frac[..frac.len().min(30)];
    let whole = parse(int)?.checked_mul(scale).ok_or_else(bad)?;
    let part = parse(frac)?.checked_mul(scale).ok_or_else(bad)? / 10u128.pow(frac.len() as u32);
    u64::try_from(whole + part).map_err(|_| format!("invalid size '{text}': larger than 16 EiB"))
}

#[cfg(test)]
mod tests {
    use super::{dwalk_units, human_bytes, parse_size};

    #[test]
    fn binary_units_like_the_c_tools() {
        assert_eq!(parse_size("4MB"), Ok(4 << 20));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("4m"), Ok(4 << 20));
        assert_eq!(parse_size("1.5GB"), Ok(3 << 29));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert_eq!(parse_size("1e"), Ok(1 << 60));
        assert_eq!(parse_size(" 8k "), Ok(8192));
        assert!(parse_size("4XB").is_err());
        assert!(parse_size("MB").is_err());
        assert!(parse_size("4 MB").is_err());
    }

    #[test]
    fn sizes_print_in_both_roundings() {
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.500 KiB");
        assert_eq!(human_bytes(3 << 30), "3.000 GiB");
        assert_eq!(human_bytes(u64::MAX), "16.000 EiB");
        assert_eq!(dwalk_units(0), (0.0, "B"));
        assert_eq!(dwalk_units(1000), (1000.0, "B"));
        assert_eq!(dwalk_units(1024), (1.0, "KiB"));
        assert_eq!(dwalk_units(2048), (2.0, "KiB"));
        let (v, u) = dwalk_units(1005 * 1024);
        assert_eq!(u, "MiB");
        assert!((v - 1005.0 / 1024.0).abs() < 1e-9);
    }
}
