//! Words of messages that engines and the console share, so that each is right once.

/// `1 rank`, `2 ranks`: a count with its noun in the right number.
pub fn ranks(n: usize) -> String {
    if n == 1 {
        "1 rank".to_string()
    } else {
        format!("{n} ranks")
    }
}

/// `1 entry`, `2 entries` (archive members).
pub fn entries(n: u64) -> String {
    if n == 1 {
        "1 entry".to_string()
    } else {
        format!("{n} entries")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_rank_is_singular_and_others_plural() {
        assert_eq!(super::ranks(1), "1 rank");
        assert_eq!(super::ranks(2), "2 ranks");
        assert_eq!(super::ranks(0), "0 ranks");
    }

    #[test]
    fn one_entry_is_singular_and_others_plural() {
        assert_eq!(super::entries(0), "0 entries");
        assert_eq!(super::entries(1), "1 entry");
        assert_eq!(super::entries(9121), "9121 entries");
    }
}
