//! Size arguments as users of the C tools write them (mpiFileUtils' `abtoull`): binary units,
//! optional `B`/`iB`, decimals allowed. One parser for every size a tool or a filter takes.

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
    use super::parse_size;

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
}
