//! POSIX basic regular expressions (dfind's `--regex`, GNU find's `-regextype posix-basic`)
//! rewritten into the syntax of the `regex` crate, which matches path bytes.
//!
//! In a basic expression `\(`, `\)`, `\{`, `\}` are the operators and `(`, `)`, `{`, `}`
//! literals; GNU adds `\|`, `\+`, `\?` (alternation and repetitions) while `|`, `+`, `?` stay
//! literal. `*` is literal at the start of the expression or of a group or alternative (after
//! `\(`, `\|` or a leading `^`); `^` is an anchor only there and `$` only at the end of the
//! expression, a group or an alternative, literal elsewhere. A bracket expression keeps its
//! own rules: `]` first (after an optional `^`) is a member, `\` is a member, classes such
//! as `[:alpha:]` work, and a non-ASCII character is its UTF-8 bytes, each a member (the C
//! locale's reading, in which paths are matched). Back-references (`\1`..`\9`) are refused: the engine has none,
//! and dropping them would match other paths silently.
//!
//! ```
//! let re = flist::bre::to_regex(r"/d/\(ab\)*\.c").unwrap();
//! assert_eq!(re, r"/d/(ab)*\.c");
//! assert_eq!(flist::bre::to_regex("a+(b)").unwrap(), r"a\+\(b\)");
//! assert!(flist::bre::to_regex(r"\(a\)\1").is_err());
//! ```

/// Why a basic expression could not be rewritten, with the byte offset where it applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at byte {at}")]
pub struct BreError {
    /// What is wrong.
    pub what: &'static str,
    /// Byte offset in the expression.
    pub at: usize,
}

/// The `regex` crate's form of the POSIX basic expression `bre` (GNU's flavour, with `\|`,
/// `\+`, `\?`, `\<`, `\>`, `\b`, `\w`...). The result is for a byte regex with Unicode off.
pub fn to_regex(bre: &str) -> Result<String, BreError> {
    let s = bre.as_bytes();
    let mut out = String::with_capacity(s.len() * 2);
    // At the start of the expression, a group or an alternative: where `*` is literal and
    // `^` an anchor.
    let mut at_start = true;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let start_here = at_start;
        at_start = false;
        match c {
            b'\\' => {
                let Some(&n) = s.get(i + 1) else {
                    return Err(BreError {
                        what: "trailing backslash",
                        at: i,
                    });
                };
                i += 2;
                match n {
                    b'(' => {
                        out.push('(');
                        at_start = true;
                    }
                    b')' => out.push(')'),
                    b'|' => {
                        out.push('|');
                        at_start = true;
                    }
                    b'{' => i = interval(s, i, &mut out)?,
                    b'}' => {
                        return Err(BreError {
                            what: r"'\}' without '\{'",
                            at: i - 2,
                        })
                    }
                    b'+' | b'?' => out.push(n as char),
                    b'1'..=b'9' => {
                        return Err(BreError {
                            what: "back-references (\\1 to \\9) are not supported",
                            at: i - 2,
                        })
                    }
                    b'<' => out.push_str(r"\b{start}"),
                    b'>' => out.push_str(r"\b{end}"),
                    b'`' => out.push_str(r"\A"),
                    b'\'' => out.push_str(r"\z"),
                    b'w' | b'W' | b's' | b'S' | b'b' | b'B' => {
                        out.push('\\');
                        out.push(n as char);
                    }
                    // Any other escaped character is itself, as in glibc (`\n` is `n`).
                    _ => i = literal(bre, i - 1, &mut out),
                }
                continue;
            }
            b'[' => {
                i = bracket(s, i, &mut out)?;
                continue;
            }
            b'*' if start_here => out.push_str(r"\*"),
            b'^' if start_here => {
                out.push('^');
                at_start = true;
            }
            b'$' if ends_here(s, i + 1) => out.push('$'),
            b'.' | b'*' => out.push(c as char),
            _ => {
                i = literal(bre, i, &mut out);
                continue;
            }
        }
        i += 1;
    }
    Ok(out)
}

/// True when byte `i` ends the expression, a group or an alternative (where `$` anchors).
fn ends_here(s: &[u8], i: usize) -> bool {
    i == s.len() || s[i..].starts_with(br"\)") || s[i..].starts_with(br"\|")
}

/// Push the character starting at byte `i` as a literal; return the byte after it.
fn literal(bre: &str, i: usize, out: &mut String) -> usize {
    let c = bre[i..]
        .chars()
        .next()
        .expect("a character at a char boundary");
    out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
    i + c.len_utf8()
}

/// The interval whose `\{` ends before byte `i`, up to its `\}`: `{m}`, `{m,}`, `{m,n}`
/// (`\{,n\}` is GNU's `{0,n}`). Returns the byte after `\}`.
fn interval(s: &[u8], i: usize, out: &mut String) -> Result<usize, BreError> {
    let unterminated = BreError {
        what: r"'\{' without '\}'",
        at: i - 2,
    };
    let end = s[i..]
        .windows(2)
        .position(|w| w == br"\}")
        .ok_or(unterminated)?;
    let body = &s[i..i + end];
    if body.is_empty() || !body.iter().all(|&b| b.is_ascii_digit() || b == b',') {
        return Err(BreError {
            what: r"an interval '\{...\}' holds digits and one comma",
            at: i,
        });
    }
    out.push('{');
    if body[0] == b',' {
        out.push('0');
    }
    out.push_str(std::str::from_utf8(body).expect("ASCII digits and commas"));
    out.push('}');
    Ok(i + end + 2)
}

/// The bracket expression opening at byte `i`, rewritten member by member (each character
/// escaped, so that the engine's own class syntax, `&&`, `--`, nested `[` and `\`, never
/// applies). Returns the byte after its closing `]`.
fn bracket(s: &[u8], i: usize, out: &mut String) -> Result<usize, BreError> {
    let unterminated = BreError {
        what: "'[' without ']'",
        at: i,
    };
    let mut j = i + 1;
    out.push('[');
    if s.get(j) == Some(&b'^') {
        out.push('^');
        j += 1;
    }
    let mut first = true;
    loop {
        let &c = s.get(j).ok_or(unterminated.clone())?;
        if c == b']' && !first {
            out.push(']');
            return Ok(j + 1);
        }
        first = false;
        if c == b'[' && s.get(j + 1) == Some(&b':') {
            let end = find(s, j + 2, b":]").ok_or(unterminated.clone())?;
            out.push_str(std::str::from_utf8(&s[j..end + 2]).map_err(|_| BreError {
                what: "a character class name is ASCII",
                at: j,
            })?);
            j = end + 2;
            continue;
        }
        let (low, next) = member(s, j, &unterminated)?;
        let at = j;
        j = next;
        push_member(low, out);
        // `-` between two members is a range; first or last it is a member itself.
        if s.get(j) == Some(&b'-') && s.get(j + 1).is_some_and(|&b| b != b']') {
            let (high, next) = member(s, j + 1, &unterminated)?;
            if !low.is_ascii() || !high.is_ascii() {
                // Byte by byte (below), a range between two characters has no single meaning.
                return Err(BreError {
                    what: "a range with a non-ASCII end is not supported",
                    at,
                });
            }
            out.push('-');
            push_member(high, out);
            j = next;
        }
    }
}

/// One member of a bracket expression at byte `j`: a character, or a collating symbol or
/// equivalence class of one character (`[.-.]`, `[=a=]`, as the C locale has them). Returns
/// the character and the byte after it.
fn member(s: &[u8], j: usize, unterminated: &BreError) -> Result<(char, usize), BreError> {
    let (from, to) = match (s[j], s.get(j + 1)) {
        (b'[', Some(&d @ (b'.' | b'='))) => {
            let end = find(s, j + 2, &[d, b']']).ok_or(unterminated.clone())?;
            (j + 2, end)
        }
        _ => (j, j),
    };
    let text = std::str::from_utf8(&s[from..]).map_err(|_| unterminated.clone())?;
    let c = text.chars().next().ok_or(unterminated.clone())?;
    if to == j {
        return Ok((c, j + c.len_utf8()));
    }
    if from + c.len_utf8() != to {
        return Err(BreError {
            what: "collating elements of more than one character are not supported",
            at: j,
        });
    }
    Ok((c, to + 2))
}

/// A bracket member in the engine's syntax: letters and digits as themselves, anything else
/// as hex escapes (no meaning inside the engine's class then). A non-ASCII character is its
/// UTF-8 bytes, each a member, as `regcomp` in the C locale reads it (and the engine, matching
/// bytes, accepts no wider character in a class).
fn push_member(c: char, out: &mut String) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        for b in c.encode_utf8(&mut [0; 4]).bytes() {
            out.push_str(&format!(r"\x{b:02X}"));
        }
    }
}

/// The offset of `needle` in `s` at or after `from`.
fn find(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    s.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(bre: &str) -> String {
        to_regex(bre).unwrap_or_else(|e| panic!("{bre:?}: {e}"))
    }

    /// The expression matches the whole of `path`, as find's `--regex` applies it.
    fn matches(bre: &str, path: &[u8]) -> bool {
        let re = regex::bytes::RegexBuilder::new(&format!(r"\A(?:{})\z", ok(bre)))
            .unicode(false)
            .dot_matches_new_line(true)
            .build()
            .unwrap_or_else(|e| panic!("{bre:?} as {:?}: {e}", ok(bre)));
        re.is_match(path)
    }

    #[test]
    fn escaped_operators_and_bare_literals() {
        assert_eq!(ok(r"\(a\|b\)\{2,3\}"), "(a|b){2,3}");
        assert_eq!(ok(r"a\+b\?"), "a+b?");
        assert_eq!(ok("(a|b){2}+?"), r"\(a\|b\)\{2\}\+\?");
        assert_eq!(ok(r"x\{,4\}y\{2,\}"), "x{0,4}y{2,}");
        assert!(matches(r"/d/\(ab\)\{2\}", b"/d/abab"));
        assert!(!matches(r"/d/\(ab\)\{2\}", b"/d/ab"));
        assert!(matches("/d/a(1)+", b"/d/a(1)+"));
        assert!(!matches("/d/a(1)+", b"/d/a1"));
        assert!(matches(r"/d/\(x\|y\)\.c", b"/d/y.c"));
        assert!(matches("/d/a|b", b"/d/a|b"));
        assert!(!matches("/d/a|b", b"/d/a"));
        // A dot is any byte (a name may be neither UTF-8 nor free of newlines).
        assert!(matches("/d/...", b"/d/\xff\n."));
        // Escaped ordinary characters are themselves, as in glibc.
        assert!(matches(r"\/d\/\n", b"/d/n"));
    }

    #[test]
    fn stars_and_anchors_by_position() {
        assert_eq!(ok("*a"), r"\*a");
        assert_eq!(ok(r"\(*a\)"), r"(\*a)");
        assert_eq!(ok(r"a\|*b"), r"a|\*b");
        assert_eq!(ok("^*a"), r"^\*a");
        assert_eq!(ok("a*"), "a*");
        assert_eq!(ok("a^b$c$"), r"a\^b\$c$");
        assert_eq!(ok(r"\(^a$\)"), "(^a$)");
        assert!(matches("*.c", b"*.c"));
        assert!(!matches("*.c", b"x.c"));
        assert!(matches("/d/a^b$", b"/d/a^b"));
        assert!(matches(".*/x$", b"/d/x"));
    }

    #[test]
    fn brackets_keep_their_own_rules() {
        assert!(matches("/d/[]a]", b"/d/]"));
        assert!(matches("/d/[]a]", b"/d/a"));
        assert!(!matches("/d/[^]a]", b"/d/]"));
        assert!(matches("/d/[^]a]", b"/d/b"));
        assert!(matches("/d/[[:alpha:]][[:digit:]]", b"/d/x7"));
        assert!(!matches("/d/[[:alpha:]]", b"/d/7"));
        // `\` is a member, not an escape.
        assert!(matches(r"/d/[\n]", b"/d/\\"));
        assert!(matches(r"/d/[\n]", b"/d/n"));
        // Ranges, `-` first or last, and what the engine would read as its own syntax.
        assert!(matches("/d/[a-c-]", b"/d/-"));
        assert!(matches("/d/[-a]", b"/d/-"));
        assert!(matches("/d/[a-c]", b"/d/b"));
        assert!(!matches("/d/[a-c]", b"/d/d"));
        assert!(matches("/d/[&&x]", b"/d/&"));
        assert!(matches("/d/[[a]", b"/d/["));
        assert!(matches("/d/[*.()|+?{}]", b"/d/{"));
        assert!(matches("/d/[[.-.]a]", b"/d/-"));
        assert!(matches("/d/[[=e=]]", b"/d/e"));
        assert!(matches("/d/[^/]*", b"/d/x\xffy"));
        assert!(!matches("/d/[^/]*", b"/d/x/y"));
        // A non-ASCII member is its bytes, each one member (the C locale's reading).
        assert!(matches("/d/caf[é][é]", "/d/café".as_bytes()));
        assert!(!matches("/d/caf[é]", "/d/café".as_bytes()));
        assert!(matches("/d/caf[^é]", b"/d/caf\xe9"));
    }

    #[test]
    fn what_cannot_be_rewritten_is_refused() {
        let err = |bre: &str| to_regex(bre).unwrap_err().what;
        assert!(err(r"\(a\)\1").contains("back-references"));
        assert!(err(r"a\9").contains("back-references"));
        assert!(err("a[b").contains("'['"));
        assert!(err("a[]").contains("'['"));
        assert!(err(r"a\{2").contains(r"\{"));
        assert!(err(r"a\{x\}").contains("interval"));
        assert!(err(r"a\}").contains(r"\}"));
        assert!(err("a\\").contains("backslash"));
        assert!(err("[[.ab.]]").contains("collating"));
        assert!(err("[a-é]").contains("non-ASCII"));
        assert_eq!(to_regex(r"\(a\)\1").unwrap_err().at, 5);
    }
}
