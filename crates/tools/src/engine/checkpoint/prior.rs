//! What earlier runs recorded: the keys of the units they finished, each with its payload.

use serde::{Deserialize, Serialize};

/// The units earlier runs of the same command finished, by key, each with the payload the tool
/// recorded with it (a result, a record). The same on every rank. Keys are sorted and unique
/// (a unit marked by two runs keeps the later run's payload).
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Prior {
    keys: Vec<u64>,
    /// `ends[i]`: the end of key `i`'s payload in `bytes` (its start is `ends[i - 1]`, or 0).
    ends: Vec<u64>,
    #[serde(with = "serde_bytes")]
    bytes: Vec<u8>,
}

impl Prior {
    /// The prior work from marks in the order they were read (earlier runs first).
    pub(super) fn from_marks(mut marks: Vec<(u64, Vec<u8>)>) -> Prior {
        // Stable: of the marks of one key, the last read stays last.
        marks.sort_by_key(|(k, _)| *k);
        let mut prior = Prior::default();
        for (i, (key, payload)) in marks.iter().enumerate() {
            if marks.get(i + 1).is_some_and(|(next, _)| next == key) {
                continue;
            }
            prior.keys.push(*key);
            prior.bytes.extend_from_slice(payload);
            prior.ends.push(prior.bytes.len() as u64);
        }
        prior
    }

    /// No unit recorded.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Units recorded.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    fn index(&self, key: u64) -> Option<usize> {
        self.keys.binary_search(&key).ok()
    }

    fn payload_at(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.bytes[start..self.ends[i] as usize]
    }

    /// Whether unit `key` was finished by an earlier run.
    pub fn done(&self, key: u64) -> bool {
        self.index(key).is_some()
    }

    /// The payload recorded with unit `key`, if it was finished.
    pub fn payload(&self, key: u64) -> Option<&[u8]> {
        self.index(key).map(|i| self.payload_at(i))
    }

    /// Every recorded unit, by increasing key, with its payload.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        (0..self.keys.len()).map(move |i| (self.keys[i], self.payload_at(i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_and_the_last_mark_of_a_key_wins() {
        let p = Prior::from_marks(vec![
            (9, b"nine".to_vec()),
            (2, b"".to_vec()),
            (9, b"nine again".to_vec()),
            (5, b"five".to_vec()),
        ]);
        assert_eq!(p.len(), 3);
        assert!(p.done(2) && p.done(5) && p.done(9) && !p.done(3));
        assert_eq!(p.payload(9), Some(&b"nine again"[..]));
        assert_eq!(p.payload(2), Some(&b""[..]));
        assert_eq!(p.payload(4), None);
        let keys: Vec<u64> = p.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, [2, 5, 9]);
        let back: Prior = steal::typed::decode(&steal::typed::encode(&p)).unwrap();
        assert_eq!(back, p);
    }
}
