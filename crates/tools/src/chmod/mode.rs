//! Mode strings as GNU `chmod` reads them, and the mode they give a file.
//!
//! Two forms:
//! - octal, `[0-7]{1,4}` or more digits up to `7777`: sets the 12 permission bits, except that
//!   a directory keeps its set-user-ID and set-group-ID bits unless the number names them
//!   (`2775` sets set-group-ID; `755` keeps it; only 5 or more digits, `00755`, clear both);
//! - symbolic, comma-separated clauses `[ugoa]*([-+=]([rwxXst]*|[ugo]))+`: `X` is execute
//!   only for directories or files where someone already has execute, `g=u` copies the owner's
//!   bits to the group, and a clause without `ugoa` applies to all classes but leaves the bits
//!   of the umask alone (`+x` with umask 022 is `a+x`, `+w` is `u+w`).
//!
//! Bits are those of `st_mode & 0o7777`; the result never has type bits.

/// Set-user-ID.
const SUID: u32 = 0o4000;
/// Set-group-ID.
const SGID: u32 = 0o2000;
/// Sticky (restricted deletion).
const SVTX: u32 = 0o1000;
/// Every bit `chmod` can set.
const ALL: u32 = 0o7777;
const READ: u32 = 0o444;
const WRITE: u32 = 0o222;
const EXEC: u32 = 0o111;

/// How a clause combines its bits with the file's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `=`: the affected bits become the value.
    Set,
    /// `+`.
    Add,
    /// `-`.
    Remove,
}

/// Where a clause's bits come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The letters `rwxst`.
    Letters,
    /// The letters plus `X`: execute for all classes if the file is a directory or already
    /// has an execute bit (as the mode stands after the clauses before).
    LettersAndX,
    /// `u`, `g` or `o` after the operator: the current bits of that class (its `rwx` spread
    /// over the three classes, in `value`).
    Copy,
}

/// One operator of a clause with its operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Action {
    op: Op,
    source: Source,
    /// Bits the `ugoa` letters select; 0 when none were given (then the umask limits).
    who: u32,
    /// Bits of the operand (for [`Source::Copy`], the class to copy).
    value: u32,
    /// Bits the clause names explicitly: a directory keeps set-user/group-ID bits not named.
    named: u32,
}

/// A parsed mode string: apply it with [`ModeChange::apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModeChange {
    actions: Vec<Action>,
}

impl ModeChange {
    /// Parse an octal or symbolic mode string; `Err` says why it is not one.
    pub fn parse(text: &str) -> Result<ModeChange, String> {
        let invalid = || format!("invalid mode: '{text}'");
        let bytes = text.as_bytes();
        if bytes.first().is_some_and(|b| (b'0'..=b'7').contains(b)) {
            return octal(bytes).ok_or_else(invalid);
        }
        symbolic(bytes).ok_or_else(invalid)
    }

    /// The permission bits (`& 0o7777`) a file of mode `old` gets, `dir` when it is a
    /// directory, `umask` the process's file creation mask (used by clauses without `ugoa`).
    pub fn apply(&self, old: u32, dir: bool, umask: u32) -> u32 {
        let mut mode = old & ALL;
        for a in &self.actions {
            // Directories keep set-user/group-ID bits the clause does not name.
            let keep = if dir { (SUID | SGID) & !a.named } else { 0 };
            let mut value = a.value;
            match a.source {
                Source::Letters => {}
                Source::LettersAndX => {
                    if dir || mode & EXEC != 0 {
                        value |= EXEC;
                    }
                }
                Source::Copy => {
                    let bits = value & mode;
                    value = bits | spread(bits, READ) | spread(bits, WRITE) | spread(bits, EXEC);
                }
            }
            let limit = if a.who != 0 { a.who } else { !umask };
            value &= limit & !keep;
            mode = match a.op {
                Op::Set => {
                    let preserved = if a.who != 0 { !a.who } else { 0 } | keep;
                    (mode & preserved) | value
                }
                Op::Add => mode | value,
                Op::Remove => mode & !value,
            };
        }
        mode & ALL
    }
}

/// All of `class` (`READ`, `WRITE` or `EXEC`) when `bits` has any of it.
fn spread(bits: u32, class: u32) -> u32 {
    if bits & class != 0 {
        class
    } else {
        0
    }
}

fn octal(bytes: &[u8]) -> Option<ModeChange> {
    let mut value: u32 = 0;
    for &b in bytes {
        if !(b'0'..=b'7').contains(&b) {
            return None;
        }
        value = value * 8 + u32::from(b - b'0');
        if value > ALL {
            return None;
        }
    }
    // Up to 4 digits name the set-user/group-ID bits only when set (so `755` on a directory
    // keeps them); 5 or more digits name everything.
    let named = if bytes.len() < 5 {
        (value & (SUID | SGID)) | SVTX | 0o777
    } else {
        ALL
    };
    Some(ModeChange {
        actions: vec![Action {
            op: Op::Set,
            source: Source::Letters,
            who: ALL,
            value,
            named,
        }],
    })
}

fn symbolic(bytes: &[u8]) -> Option<ModeChange> {
    let mut actions = Vec::new();
    let mut i = 0;
    loop {
        // One clause: who letters, then one or more operators with their operands.
        let mut who = 0;
        loop {
            who |= match bytes.get(i)? {
                b'u' => SUID | 0o700,
                b'g' => SGID | 0o070,
                b'o' => SVTX | 0o007,
                b'a' => ALL,
                b'=' | b'+' | b'-' => break,
                _ => return None,
            };
            i += 1;
        }
        while let Some(&op) = bytes.get(i) {
            let op = match op {
                b'=' => Op::Set,
                b'+' => Op::Add,
                b'-' => Op::Remove,
                _ => break,
            };
            i += 1;
            let copied = match bytes.get(i) {
                Some(b'u') => Some(0o700),
                Some(b'g') => Some(0o070),
                Some(b'o') => Some(0o007),
                _ => None,
            };
            let (source, value) = match copied {
                Some(class) => {
                    i += 1;
                    (Source::Copy, class)
                }
                None => {
                    let mut source = Source::Letters;
                    let mut value = 0;
                    while let Some(&c) = bytes.get(i) {
                        value |= match c {
                            b'r' => READ,
                            b'w' => WRITE,
                            b'x' => EXEC,
                            b'X' => {
                                source = Source::LettersAndX;
                                0
                            }
                            b's' => SUID | SGID,
                            b't' => SVTX,
                            _ => break,
                        };
                        i += 1;
                    }
                    (source, value)
                }
            };
            actions.push(Action {
                op,
                source,
                who,
                value,
                named: if who != 0 { who & value } else { value },
            });
        }
        match bytes.get(i) {
            None => return Some(ModeChange { actions }),
            Some(b',') => i += 1,
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GNU chmod's results (coreutils `mode_adjust`), checked by hand and against `chmod` on
    /// Linux: (mode, old bits, directory, umask, new bits).
    const TABLE: &[(&str, u32, bool, u32, u32)] = &[
        // Octal: files take the number; directories keep set-ID bits it does not name.
        ("755", 0o644, false, 0o022, 0o755),
        ("0640", 0o777, false, 0o022, 0o640),
        ("755", 0o4755, false, 0o022, 0o755),
        ("755", 0o2700, true, 0o022, 0o2755),
        ("755", 0o6700, true, 0o022, 0o6755),
        ("2775", 0o700, true, 0o022, 0o2775),
        ("2775", 0o4700, true, 0o022, 0o6775),
        ("2775", 0o4700, false, 0o022, 0o2775),
        ("00755", 0o6700, true, 0o022, 0o755),
        ("1777", 0o755, true, 0o022, 0o1777),
        ("0", 0o777, false, 0o022, 0),
        ("7777", 0, false, 0o022, 0o7777),
        // Symbolic with classes.
        ("u+rwX,go-w", 0o600, false, 0o022, 0o600),
        ("u+rwX,go-w", 0o666, false, 0o022, 0o644),
        ("u+rwX,go-w", 0o000, true, 0o022, 0o700),
        ("u+rwX,go-w", 0o070, false, 0o022, 0o750),
        ("u+rwX,go-w", 0o071, false, 0o022, 0o751),
        ("a+X", 0o644, false, 0o022, 0o644),
        ("a+X", 0o744, false, 0o022, 0o755),
        ("a+X", 0o600, true, 0o022, 0o711),
        ("a+X", 0o604, false, 0o022, 0o604),
        ("g+X", 0o610, false, 0o022, 0o610),
        ("g=u", 0o750, false, 0o022, 0o770),
        ("g=u", 0o2640, false, 0o022, 0o660),
        ("g=u", 0o2640, true, 0o022, 0o2660),
        ("o=u", 0o751, false, 0o022, 0o757),
        ("u=g", 0o470, false, 0o022, 0o770),
        ("go=u", 0o700, false, 0o022, 0o777),
        ("g=u-w", 0o700, false, 0o022, 0o750),
        ("o=", 0o777, false, 0o022, 0o770),
        ("o=", 0o1777, true, 0o022, 0o770),
        ("u-x", 0o755, true, 0o022, 0o655),
        ("u=rwx,g=rx,o=", 0o4000, false, 0o022, 0o750),
        ("u=rwx,g=rx,o=", 0o6000, true, 0o022, 0o6750),
        ("a=r", 0o777, false, 0o022, 0o444),
        ("a-rwx", 0o7777, false, 0o022, 0o7000),
        ("ug+s", 0o755, false, 0o022, 0o6755),
        ("u-s", 0o6755, true, 0o022, 0o2755),
        ("g-s", 0o6755, false, 0o022, 0o4755),
        ("o+s", 0o755, false, 0o022, 0o755),
        ("+t", 0o777, true, 0o022, 0o1777),
        ("o+t", 0o777, true, 0o022, 0o1777),
        ("a+t", 0o777, true, 0o022, 0o1777),
        ("u+", 0o640, false, 0o022, 0o640),
        ("u+x-w", 0o640, false, 0o022, 0o540),
        ("u+r,g+w,o+x", 0, false, 0o022, 0o421),
        ("ug=rw,o=r", 0o7777, false, 0o022, 0o664),
        ("uo=r", 0o7777, false, 0o022, 0o2474),
        // Without ugoa the umask limits: +x with umask 027 gives no execute to others.
        ("+x", 0o600, false, 0o022, 0o711),
        ("+x", 0o600, false, 0o027, 0o710),
        ("+w", 0o444, false, 0o022, 0o644),
        ("-w", 0o666, false, 0o022, 0o466),
        ("-w", 0o666, false, 0o077, 0o466),
        ("=r", 0o777, false, 0o022, 0o444),
        ("=rw", 0o777, false, 0o027, 0o640),
        ("=", 0o4777, false, 0o022, 0),
        ("=", 0o4777, true, 0o022, 0o4000),
        ("+X", 0o100, false, 0o077, 0o100),
        ("+X", 0o644, true, 0o002, 0o755),
        ("+s", 0o755, false, 0o022, 0o6755),
        // X sees the mode as the clauses before left it.
        ("u+x,g+X", 0o600, false, 0o022, 0o710),
        ("u-x,g+X", 0o700, false, 0o022, 0o600),
    ];

    #[test]
    fn modes_give_gnu_results() {
        for &(text, old, dir, umask, want) in TABLE {
            let m = ModeChange::parse(text).unwrap_or_else(|e| panic!("{e}"));
            let got = m.apply(old, dir, umask);
            assert_eq!(
                got, want,
                "{text} on {old:o} (dir {dir}, umask {umask:o}): got {got:o}, want {want:o}"
            );
        }
    }

    #[test]
    fn type_bits_are_ignored_and_never_returned() {
        let m = ModeChange::parse("u+x").unwrap();
        assert_eq!(m.apply(0o100644, false, 0o022), 0o744);
        assert_eq!(m.apply(0o040600, true, 0o022), 0o700);
    }

    #[test]
    fn malformed_modes_are_refused() {
        for bad in [
            "", "8", "75a", "7778", "17777", "u", "u+r,", ",u+r", "x+r", "u+rz", "g=ur", "ugx",
            "u*r", "+ r", "rwx", "a=b", "0x7", "u+r,,g+w",
        ] {
            let err = ModeChange::parse(bad).expect_err(bad);
            assert!(err.contains("invalid mode"), "{err}");
        }
        // Operators may follow each other and need no letters (GNU accepts these too).
        for odd in ["g=u+", "u=o=g=x+", "-", "a-+="] {
            assert!(ModeChange::parse(odd).is_ok(), "{odd}");
        }
    }
}
