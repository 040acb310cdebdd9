//! Size arguments as users of the C tools write them: binary units, optional `B`, decimals.

/// Parse `4MB`, `4MiB`, `4m`, `1.5GB`, `512` into bytes. Units `k m g t p e` are powers of 1024,
/// case-insensitive, with an optional `B` or `iB` after them.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid size '{text}': expected a number such as 4MB"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(&unit);
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        "e" => 60,
        _ => {
            return Err(format!(
                "invalid size '{text}': unknown unit (use K, M, G, T, P or E)"
            ))
        }
    };
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("invalid size '{text}': out of range"));
    }
    Ok(bytes.round() as u64)
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
        assert!(parse_size("4XB").is_err());
        assert!(parse_size("MB").is_err());
    }
}
