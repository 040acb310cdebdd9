//! `find --exec`'s checkpoint: a job log of the commands that ran to their end, as GNU
//! parallel's `--joblog` keeps one for `--resume`: a rerun does not run them again, and takes
//! their recorded exit status instead (the expression goes on as it did, failures are counted
//! and reported again). A command killed by a signal, or one the stop caught, is not recorded:
//! it runs again.
//!
//! Key: a hash of the `--exec`'s place in the expression, the entry's path and the command's
//! words (with `{}` replaced). Payload (little endian): version `1`, the place (u32), the exit
//! status (i32), the path and the words (u32 count, then u32 length and bytes each), compared
//! with the command on a rerun. (An entry listed twice, under two nested PATHs, is one command:
//! a rerun runs neither again.)

use crate::engine::checkpoint::{Checkpoint, Prior};
use crate::engine::find_expr::eval::{CommandLog, Ended};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

const VERSION: u8 = 1;

/// The commands earlier runs finished, and where this run records those it runs.
pub struct Commands<'a> {
    /// What earlier runs recorded.
    pub prior: &'a Prior,
    /// Where this run records.
    pub checkpoint: &'a Checkpoint,
}

/// The key of the command `argv` of the `exec`-th `--exec` on the entry `path` (the same at
/// any rank count).
pub fn key(exec: usize, path: &[u8], argv: &[OsString]) -> u64 {
    let mut h = xxhash_rust::xxh64::Xxh64::new(0xf1d_e8ec);
    h.update(&(exec as u64).to_le_bytes());
    h.update(&(path.len() as u64).to_le_bytes());
    h.update(path);
    for w in argv {
        h.update(&(w.len() as u64).to_le_bytes());
        h.update(w.as_bytes());
    }
    h.digest()
}

fn encode(exec: usize, path: &[u8], argv: &[OsString], ended: Ended) -> Vec<u8> {
    let mut out = vec![VERSION];
    out.extend_from_slice(&(exec as u32).to_le_bytes());
    out.extend_from_slice(&ended.exitval.to_le_bytes());
    out.extend_from_slice(&(argv.len() as u32 + 1).to_le_bytes());
    for w in std::iter::once(path).chain(argv.iter().map(|w| w.as_bytes())) {
        out.extend_from_slice(&(w.len() as u32).to_le_bytes());
        out.extend_from_slice(w);
    }
    out
}

/// How the command ended, when `payload` records exactly this command.
fn decode(payload: &[u8], exec: usize, path: &[u8], argv: &[OsString]) -> Option<Ended> {
    let mut at = payload;
    let mut take = |n: usize| -> Option<&[u8]> {
        if at.len() < n {
            return None;
        }
        let (head, rest) = at.split_at(n);
        at = rest;
        Some(head)
    };
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    if take(1)? != [VERSION] || u32_of(take(4)?) as usize != exec {
        return None;
    }
    let exitval = i32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
    if u32_of(take(4)?) as usize != argv.len() + 1 {
        return None;
    }
    for w in std::iter::once(path).chain(argv.iter().map(|w| w.as_bytes())) {
        let n = u32_of(take(4)?) as usize;
        if take(n)? != w {
            return None;
        }
    }
    take(1).is_none().then_some(Ended { exitval })
}

impl CommandLog for Commands<'_> {
    fn finished(&self, exec: usize, path: &[u8], argv: &[OsString]) -> Option<Ended> {
        if self.prior.is_empty() {
            return None;
        }
        decode(self.prior.payload(key(exec, path, argv))?, exec, path, argv)
    }

    fn record(&self, exec: usize, path: &[u8], argv: &[OsString], ended: Ended) {
        self.checkpoint
            .mark(key(exec, path, argv), &encode(exec, path, argv, ended));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_for_one_command_only() {
        let argv: Vec<OsString> = ["sh", "-c", "x", "/a b\n|c"]
            .iter()
            .map(OsString::from)
            .collect();
        let path: &[u8] = b"/a b\n|c";
        let p = encode(1, path, &argv, Ended { exitval: 3 });
        assert_eq!(decode(&p, 1, path, &argv), Some(Ended { exitval: 3 }));
        assert_eq!(decode(&p, 0, path, &argv), None);
        assert_eq!(decode(&p, 1, b"/other", &argv), None);
        assert_eq!(decode(&p, 1, path, &argv[..3]), None);
        let mut other = argv.clone();
        other[3] = OsString::from("/a b\n|d");
        assert_eq!(decode(&p, 1, path, &other), None);
        for n in 0..p.len() {
            assert_eq!(decode(&p[..n], 1, path, &argv), None, "cut at {n}");
        }
        assert_eq!(decode(&[p.clone(), vec![0]].concat(), 1, path, &argv), None);
        assert_ne!(key(0, path, &argv), key(1, path, &argv));
        // A command without `{}`: one per entry.
        assert_ne!(key(0, b"/a", &argv[..1]), key(0, b"/b", &argv[..1]));
    }
}
