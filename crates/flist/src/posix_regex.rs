//! POSIX regular expressions as GNU reads them (basic, extended, fixed strings: grep's `-G`,
//! `-E`, `-F`, find's `--regextype posix-basic`, dfind's `--regex`) rewritten as Rust regex
//! syntax, with the meaning they have under `LC_ALL=C`: a pattern is bytes, `.` and bracket
//! expressions match single bytes, `\w` and `-i` know ASCII only.
//!
//! Every byte that is not plain ASCII is written as `\xNN`, which, with Unicode off in the
//! matcher, matches that one byte: a non-UTF-8 pattern works, and `é*` repeats the last byte
//! only, as in GNU grep's C locale.

/// How the pattern text is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Syntax {
    /// POSIX basic regular expressions with GNU's extensions (grep's default, `-G`): `\(`,
    /// `\)`, `\{`, `\}`, `\|`, `\+`, `\?` are operators; the bare characters are literals.
    #[default]
    Basic,
    /// POSIX extended regular expressions (`-E`): `( ) { } | + ?` are operators.
    Extended,
    /// Fixed strings (`-F`): every byte is itself.
    Fixed,
}

/// What a negated bracket expression (`[^a]`) matches besides the bytes it does not name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Negated {
    /// Never a newline: grep matches within lines.
    NoNewline,
    /// Any byte, a newline too: a path may hold one.
    AnyByte,
}

/// Rewrite one GNU pattern as Rust regex syntax. Errors name what is not supported
/// (back-references) or malformed (an unclosed bracket).
pub fn translate(pattern: &[u8], syntax: Syntax, negated: Negated) -> Result<String, String> {
    if syntax == Syntax::Fixed {
        let mut out = String::new();
        for &b in pattern {
            literal(&mut out, b);
        }
        return Ok(out);
    }
    let ere = syntax == Syntax::Extended;
    let mut out = String::new();
    // True where a `*` is a literal and `^` an anchor: at the start of the pattern, of a
    // group or of an alternative.
    let mut at_start = true;
    let mut i = 0;
    while i < pattern.len() {
        let b = pattern[i];
        let start = at_start;
        at_start = false;
        match b {
            b'\\' => {
                let Some(&c) = pattern.get(i + 1) else {
                    return Err("trailing backslash".into());
                };
                i += 1;
                match c {
                    b'(' | b')' | b'{' | b'}' | b'|' | b'+' | b'?' if !ere => {
                        if c == b'{' {
                            i = interval(pattern, i + 1, &mut out, b"\\}")?;
                            continue;
                        }
                        out.push(c as char);
                        at_start = matches!(c, b'(' | b'|');
                    }
                    b'<' => out.push_str(r"\b{start}"),
                    b'>' => out.push_str(r"\b{end}"),
                    b'`' => out.push_str(r"\A"),
                    b'\'' => out.push_str(r"\z"),
                    b'w' | b'W' | b's' | b'S' | b'b' | b'B' => {
                        out.push('\\');
                        out.push(c as char);
                    }
                    b'1'..=b'9' => {
                        return Err("back-references (\\1...\\9) are not supported".into());
                    }
                    _ => literal(&mut out, c),
                }
            }
            b'(' | b'|' if ere => {
                out.push(b as char);
                at_start = true;
            }
            b')' | b'+' | b'?' if ere => {
                if start && b != b')' {
                    literal(&mut out, b);
                } else {
                    out.push(b as char);
                }
            }
            b'{' if ere => {
                if start {
                    literal(&mut out, b);
                } else {
                    i = interval(pattern, i + 1, &mut out, b"}")?;
                    continue;
                }
            }
            b'*' => {
                if start {
                    literal(&mut out, b);
                } else {
                    out.push('*');
                }
            }
            b'^' => {
                if start || ere {
                    out.push('^');
                    // `^*` is a literal star (GNU).
                    at_start = true;
                } else {
                    literal(&mut out, b);
                }
            }
            b'$' => {
                let rest = &pattern[i + 1..];
                let at_end = rest.is_empty()
                    || (!ere && (rest.starts_with(b"\\)") || rest.starts_with(b"\\|")))
                    || (ere && (rest[0] == b')' || rest[0] == b'|'));
                if at_end || ere {
                    out.push('$');
                } else {
                    literal(&mut out, b);
                }
            }
            b'[' => {
                i = bracket(pattern, i + 1, &mut out, negated)?;
                continue;
            }
            b'.' => out.push('.'),
            _ => literal(&mut out, b),
        }
        i += 1;
    }
    Ok(out)
}

/// One byte as a literal.
fn literal(out: &mut String, b: u8) {
    if b.is_ascii_alphanumeric() || b == b' ' || b == b'_' {
        out.push(b as char);
    } else {
        out.push_str(&format!("\\x{b:02X}"));
    }
}

/// An interval `{m,n}` whose text starts at `i` and ends with `close`; returns the index after
/// it. GNU's `{,n}` is `{0,n}`.
fn interval(p: &[u8], i: usize, out: &mut String, close: &[u8]) -> Result<usize, String> {
    let end = p[i..]
        .windows(close.len())
        .position(|w| w == close)
        .ok_or("unmatched \\{ or {")?;
    let body = &p[i..i + end];
    if body.is_empty() || !body.iter().all(|&b| b.is_ascii_digit() || b == b',') {
        return Err("invalid content of \\{\\} or {}".into());
    }
    let body = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    out.push('{');
    if body.starts_with(',') {
        out.push('0');
    }
    out.push_str(body);
    out.push('}');
    Ok(i + end + close.len())
}

/// A bracket expression whose text starts at `i` (after `[`); returns the index after its `]`.
/// Inside brackets a backslash is an ordinary byte (POSIX), `]` first is a literal and
/// `[:class:]` is kept (Rust knows the POSIX classes).
fn bracket(p: &[u8], mut i: usize, out: &mut String, negated: Negated) -> Result<usize, String> {
    out.push_str("(?-u:[");
    if p.get(i) == Some(&b'^') {
        out.push('^');
        if negated == Negated::NoNewline {
            out.push_str("\\n");
        }
        i += 1;
    }
    let first = i;
    loop {
        let Some(&b) = p.get(i) else {
            return Err("unmatched [, [^, [:, [., or [=".into());
        };
        if b == b']' && i > first {
            out.push_str("])");
            return Ok(i + 1);
        }
        if b == b'[' && matches!(p.get(i + 1), Some(b':' | b'=' | b'.')) {
            let kind = p[i + 1];
            let close = [kind, b']'];
            let end = p[i + 2..]
                .windows(2)
                .position(|w| w == close)
                .ok_or("unmatched [, [^, [:, [., or [=")?;
            let name = &p[i + 2..i + 2 + end];
            if kind == b':' {
                let name = std::str::from_utf8(name).map_err(|e| e.to_string())?;
                out.push_str(&format!("[:{name}:]"));
            } else {
                // [=c=] and [.c.] of one byte are that byte in the C locale.
                for &c in name {
                    literal(out, c);
                }
            }
            i += 2 + end + 2;
            continue;
        }
        if b == b'-' && i > first && p.get(i + 1).is_some_and(|&n| n != b']') {
            out.push('-');
        } else {
            literal(out, b);
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(p: &str, s: Syntax) -> String {
        translate(p.as_bytes(), s, Negated::NoNewline).unwrap()
    }

    #[test]
    fn basic_operators_are_escaped_and_bare_ones_literal() {
        assert_eq!(t(r"a\(b\|c\)\{2\}", Syntax::Basic), "a(b|c){2}");
        assert_eq!(t("a+b?(c)|d", Syntax::Basic), r"a\x2Bb\x3F\x28c\x29\x7Cd");
        assert_eq!(t("*a", Syntax::Basic), r"\x2Aa");
        assert_eq!(t("a^b$c$", Syntax::Basic), r"a\x5Eb\x24c$");
        assert_eq!(t(r"\<w\>", Syntax::Basic), r"\b{start}w\b{end}");
    }

    #[test]
    fn extended_and_fixed() {
        assert_eq!(t("a+(b|c){,2}", Syntax::Extended), "a+(b|c){0,2}");
        assert_eq!(t("a.b", Syntax::Fixed), r"a\x2Eb");
        assert_eq!(
            translate(b"\xff", Syntax::Fixed, Negated::NoNewline).unwrap(),
            r"\xFF"
        );
    }

    #[test]
    fn brackets_are_posix() {
        assert_eq!(t(r"[]a\-]", Syntax::Basic), r"(?-u:[\x5Da\x5C\x2D])");
        assert_eq!(
            t("[^[:digit:]x-z]", Syntax::Basic),
            r"(?-u:[^\n[:digit:]x-z])"
        );
        assert!(translate(b"[ab", Syntax::Basic, Negated::NoNewline).is_err());
        assert!(translate(br"\(a\)\1", Syntax::Basic, Negated::NoNewline).is_err());
        // For paths, a negated set matches a newline too.
        assert_eq!(
            translate(b"[^/]", Syntax::Basic, Negated::AnyByte).unwrap(),
            r"(?-u:[^\x2F])"
        );
    }
}
