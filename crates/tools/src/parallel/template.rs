//! A command template applied to one input (a path): GNU parallel's replacement strings, each
//! value quoted for `/bin/sh` so that names with spaces, quotes or non-UTF-8 bytes stay one
//! word.

/// The replacement strings, longest first (so `{//}` is not read as `{/}` and a stray `}`).
const STRINGS: [&[u8]; 5] = [b"{//}", b"{/.}", b"{}", b"{.}", b"{/}"];

/// True when `words` contain a replacement string (otherwise GNU parallel appends ` {}`).
pub fn has_replacement(words: &[Vec<u8>]) -> bool {
    words
        .iter()
        .any(|w| (0..w.len()).any(|i| STRINGS.iter().any(|s| w[i..].starts_with(s))))
}

/// The shell command for `input`: the words joined by spaces (unquoted, so that `'>'` in a
/// template is a redirection, as in GNU parallel), every replacement string replaced by its
/// value quoted for the shell; ` {}` appended when the template has none.
pub fn expand(words: &[Vec<u8>], input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, w) in words.iter().enumerate() {
        if n > 0 {
            out.push(b' ');
        }
        let mut i = 0;
        while i < w.len() {
            match STRINGS.iter().find(|s| w[i..].starts_with(s)) {
                Some(s) => {
                    out.extend_from_slice(&quote(&value(s, input)));
                    i += s.len();
                }
                None => {
                    out.push(w[i]);
                    i += 1;
                }
            }
        }
    }
    if !has_replacement(words) {
        out.push(b' ');
        out.extend_from_slice(&quote(input));
    }
    out
}

/// The value of replacement string `s` for `input` (GNU parallel's meanings).
fn value(s: &[u8], input: &[u8]) -> Vec<u8> {
    let slash = input.iter().rposition(|&b| b == b'/');
    let base = slash.map_or(input, |i| &input[i + 1..]);
    match s {
        b"{}" => input.to_vec(),
        b"{/}" => base.to_vec(),
        b"{//}" => match slash {
            None => b".".to_vec(),
            Some(0) => b"/".to_vec(),
            Some(i) => input[..i].to_vec(),
        },
        b"{.}" => {
            let keep = input.len() - base.len() + strip_extension(base).len();
            input[..keep].to_vec()
        }
        _ => strip_extension(base).to_vec(), // {/.}
    }
}

/// `name` without its last `.ext` (a name that only starts with `.` has none).
fn strip_extension(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|&b| b == b'.') {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

/// `s` as one shell word (`shlex`'s quoting: as it is when the shell leaves it alone, else in
/// single or double quotes). Any byte survives; a NUL, which no path holds, is quoted too.
pub fn quote(s: &[u8]) -> Vec<u8> {
    shlex::bytes::Quoter::new()
        .allow_nul(true)
        .quote(s)
        .map(std::borrow::Cow::into_owned)
        .expect("with NUL allowed, quoting cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<Vec<u8>> {
        w.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn replacement_strings_mean_what_gnu_parallel_says() {
        let t = words(&["x", "{}", "{.}", "{/}", "{//}", "{/.}", "a{}b"]);
        assert_eq!(
            expand(&t, b"/d.x/f.tar.gz"),
            b"x /d.x/f.tar.gz /d.x/f.tar f.tar.gz /d.x f.tar a/d.x/f.tar.gzb"
        );
        assert_eq!(expand(&t, b"f"), b"x f f f . f afb");
        assert_eq!(
            expand(&t, b"/.hidden"),
            b"x /.hidden /.hidden .hidden / .hidden a/.hiddenb"
        );
    }

    #[test]
    fn without_replacement_the_input_is_appended() {
        assert_eq!(expand(&words(&["gzip", "-9"]), b"a b"), b"gzip -9 'a b'");
        assert!(!has_replacement(&words(&["echo", "{", "}"])));
    }

    /// Whatever the word, `sh` gives it back as one argument, byte for byte.
    #[test]
    fn odd_names_stay_one_word() {
        use std::os::unix::ffi::OsStrExt;
        let odd: [&[u8]; 9] = [
            b"it's a \xff\n",
            b"",
            b"$(rm -rf x)",
            b"`touch x` ; rm -rf / &",
            b"a\"b\\c'd $HOME !x {a,b} *",
            b"-n",
            b"\t\r\x01 tabs and controls",
            b"plain-name_1.txt",
            b"\xc3\xa9t\xc3\xa9 \xe2\x82\xac",
        ];
        for word in odd {
            let script = [b"printf '%s|' ".as_slice(), &quote(word)].concat();
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(std::ffi::OsStr::from_bytes(&script))
                .output()
                .unwrap();
            assert!(out.status.success(), "{word:?}");
            assert_eq!(out.stdout, [word, b"|"].concat(), "{word:?}");
        }
        assert_eq!(quote(b"plain-name_1.txt"), b"plain-name_1.txt");
    }
}
