//! What `cmp` counts while it compares, and the report it prints: dcmp's lines per output
//! expression (`Number of items that ...: N (Src: S Dest: D)`), then a table of every field
//! and the verdict.

use crate::engine::compare_expr::{self, describe, Field, Output, State, States, FIELDS};

/// dcmp's default expressions, in the order it prints them.
pub const DEFAULT_EXPRS: [&str; 6] = [
    "EXIST=COMMON",
    "EXIST=DIFFER",
    "EXIST=COMMON@TYPE=COMMON",
    "EXIST=COMMON@TYPE=DIFFER",
    "EXIST=COMMON@CONTENT=COMMON",
    "EXIST=COMMON@CONTENT=DIFFER",
];

/// The fields whose difference makes the trees differ (exit status 1). Access and change
/// times are counted but not judged: reading a file changes its atime, and no copy can set a
/// ctime.
pub const JUDGED: [Field; 9] = [
    Field::Exist,
    Field::Type,
    Field::Size,
    Field::Uid,
    Field::Gid,
    Field::Mtime,
    Field::Perm,
    Field::Acl,
    Field::Content,
];

/// Which side of a comparison an entry was seen on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// A pair present on both sides (counted on both, as dcmp does).
    Both,
    /// A source entry without a destination.
    OnlySrc,
    /// A destination entry without a source.
    OnlyDest,
}

/// Counts of one rank, summed over ranks with one all-reduce.
///
/// Layout: `[both, only_src, only_dest, differing, failures, lists_failed]`, then per field (but EXIST)
/// `[common, differ]`, then per expression and conjunction `[src, dest]`, then per expression
/// `[src, dest]` totals.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    counts: Vec<u64>,
    /// (conjunction counts, where its first `[src, dest]` pair is) for each expression.
    exprs: Vec<(usize, usize)>,
    totals_at: usize,
}

const BOTH: usize = 0;
const ONLY_SRC: usize = 1;
const ONLY_DEST: usize = 2;
const DIFFERING: usize = 3;
const FAILURES: usize = 4;
const LISTS_FAILED: usize = 5;
const FIELDS_AT: usize = 6;

impl Tally {
    /// Zero counts for the expressions `exprs` (defaults and `-o` outputs, in report order).
    pub fn new(exprs: &[&Output]) -> Tally {
        let mut at = FIELDS_AT + 2 * (FIELDS.len() - 1);
        let mut spans = Vec::new();
        for o in exprs {
            spans.push((o.any_of.len(), at));
            at += 2 * o.any_of.len();
        }
        let totals_at = at;
        at += 2 * exprs.len();
        Tally {
            counts: vec![0; at],
            exprs: spans,
            totals_at,
        }
    }

    /// Count one path (`states` as compared) against every field and expression.
    pub fn count(&mut self, side: Side, states: &States, exprs: &[&Output]) {
        match side {
            Side::Both => {
                self.counts[BOTH] += 1;
                for (i, &f) in FIELDS[1..].iter().enumerate() {
                    let differ = states.get(f) == State::Differ;
                    self.counts[FIELDS_AT + 2 * i + usize::from(differ)] += 1;
                }
            }
            Side::OnlySrc => self.counts[ONLY_SRC] += 1,
            Side::OnlyDest => self.counts[ONLY_DEST] += 1,
        }
        if differs(states) {
            self.counts[DIFFERING] += 1;
        }
        for (e, o) in exprs.iter().enumerate() {
            if let Some(c) = o.first_match(states) {
                let (_, at) = self.exprs[e];
                let t = self.totals_at + 2 * e;
                if side != Side::OnlyDest {
                    self.counts[at + 2 * c] += 1;
                    self.counts[t] += 1;
                }
                if side != Side::OnlySrc {
                    self.counts[at + 2 * c + 1] += 1;
                    self.counts[t + 1] += 1;
                }
            }
        }
    }

    /// Count one failure (reported on stderr where it happened).
    pub fn fail(&mut self) {
        self.fail_items(1);
    }

    /// Count `n` failures (reported on stderr where they happened).
    pub fn fail_items(&mut self, n: u64) {
        self.counts[FAILURES] += n;
    }

    /// Count one `-o` list that could not be written. Every rank gets the same error from the
    /// collective write: count it on one rank only, so that the sum is one per list.
    pub fn fail_list(&mut self) {
        self.counts[LISTS_FAILED] += 1;
    }

    /// The counts, to be summed over ranks in place.
    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        &mut self.counts
    }

    /// Paths that differ in a judged field, or exist on one side only.
    pub fn differing(&self) -> u64 {
        self.counts[DIFFERING]
    }

    /// Failures counted (items not compared: walk and read errors).
    pub fn failures(&self) -> u64 {
        self.counts[FAILURES]
    }

    /// `-o` lists that could not be written.
    pub fn lists_failed(&self) -> u64 {
        self.counts[LISTS_FAILED]
    }

    /// Paths both sides have.
    pub fn both(&self) -> u64 {
        self.counts[BOTH]
    }

    /// Paths only the source has.
    pub fn only_src(&self) -> u64 {
        self.counts[ONLY_SRC]
    }

    /// Paths only the destination has.
    pub fn only_dest(&self) -> u64 {
        self.counts[ONLY_DEST]
    }

    /// Paths compared: pairs plus one-sided paths.
    pub fn paths(&self) -> u64 {
        self.counts[BOTH] + self.counts[ONLY_SRC] + self.counts[ONLY_DEST]
    }

    /// dcmp's line for expression `e` (`Number of items that ...`), without the file part.
    pub fn expr_line(&self, e: usize, o: &Output) -> String {
        const PREFIX: &str = "Number of items that ";
        let (n, at) = self.exprs[e];
        let mut line = String::from(PREFIX);
        for (c, all) in o.any_of.iter().enumerate() {
            let (s, d) = (self.counts[at + 2 * c], self.counts[at + 2 * c + 1]);
            line.push_str(&describe(all));
            if s == d {
                line.push_str(&format!(": {s} (Src: {s} Dest: {d})"));
            } else {
                line.push_str(&format!(": N/A (Src: {s} Dest: {d})"));
            }
            if c + 1 < n {
                line.push_str(", or\n");
                line.push_str(&" ".repeat(PREFIX.len()));
            }
        }
        if n > 1 {
            let t = self.totals_at + 2 * e;
            line.push_str(&format!(
                ", total number: {}/{}",
                self.counts[t],
                self.counts[t + 1]
            ));
        }
        line
    }

    /// The table of fields and the one-sided counts.
    pub fn table(&self, src: &str, dest: &str) -> String {
        let mut out = format!(
            "Compared {} paths: {} in both, {} only in {src}, {} only in {dest}\n",
            self.paths(),
            self.counts[BOTH],
            self.counts[ONLY_SRC],
            self.counts[ONLY_DEST]
        );
        out.push_str(&format!(
            "  {:<30}{:>10}{:>10}\n",
            "Field (pairs)", "same", "different"
        ));
        for (i, &f) in FIELDS[1..].iter().enumerate() {
            let note = if JUDGED.contains(&f) {
                ""
            } else {
                "  (not judged)"
            };
            out.push_str(&format!(
                "  {:<30}{:>10}{:>10}{note}\n",
                format!("{} ({})", f.name(), f.words()),
                self.counts[FIELDS_AT + 2 * i],
                self.counts[FIELDS_AT + 2 * i + 1]
            ));
        }
        out
    }

    /// The verdict line, and a line for `-o` lists not written.
    pub fn verdict(&self) -> String {
        let judged: Vec<&str> = JUDGED[1..].iter().map(|f| f.name()).collect();
        let mut out = match (self.differing(), self.failures()) {
            (0, 0) => format!(
                "Result: equal ({} paths on both sides, the same in {})\n",
                self.paths(),
                judged.join(" ")
            ),
            (0, f) => format!(
                "Result: no difference found, but {f} items could not be compared (see above)\n"
            ),
            (d, 0) => format!("Result: different ({d} of {} paths differ)\n", self.paths()),
            (d, f) => format!(
                "Result: different ({d} of {} paths differ; {f} items could not be compared)\n",
                self.paths()
            ),
        };
        match self.lists_failed() {
            0 => {}
            1 => out.push_str("1 output list could not be written (see above)\n"),
            n => out.push_str(&format!(
                "{n} output lists could not be written (see above)\n"
            )),
        }
        out
    }
}

/// True when a path differs in a judged field, or exists on one side only.
pub fn differs(states: &States) -> bool {
    JUDGED.iter().any(|&f| {
        matches!(
            states.get(f),
            State::Differ | State::OnlySrc | State::OnlyDest
        )
    })
}

/// The default expressions as outputs without files.
pub fn default_outputs() -> Vec<Output> {
    DEFAULT_EXPRS
        .iter()
        .map(|e| Output {
            any_of: compare_expr::parse_expr(e).expect("the defaults parse"),
            file: Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_dcmps() {
        let defaults = default_outputs();
        assert_eq!(defaults[1].any_of.len(), 1);
        let user = Output::parse("TYPE=COMMON@CONTENT=DIFFER,EXIST=ONLY_SRC:x.txt").unwrap();
        let mut exprs: Vec<&Output> = defaults.iter().collect();
        exprs.push(&user);
        let mut t = Tally::new(&exprs);
        let mut changed = States::both_common();
        changed.set(Field::Content, State::Differ);
        t.count(Side::Both, &States::both_common(), &exprs);
        t.count(Side::Both, &changed, &exprs);
        t.count(Side::OnlySrc, &States::only(State::OnlySrc), &exprs);
        t.count(Side::OnlyDest, &States::only(State::OnlyDest), &exprs);
        assert_eq!(
            t.expr_line(0, exprs[0]),
            "Number of items that exist in both directories: 2 (Src: 2 Dest: 2)"
        );
        assert_eq!(
            t.expr_line(1, exprs[1]),
            "Number of items that exist only in one directory: 1 (Src: 1 Dest: 1)"
        );
        assert_eq!(
            t.expr_line(5, exprs[5]),
            "Number of items that exist in both directories and have different contents: 1 (Src: 1 Dest: 1)"
        );
        assert_eq!(
            t.expr_line(6, exprs[6]),
            "Number of items that have the same type and have different contents: 1 (Src: 1 Dest: 1), or\n                     exist only in source directory: N/A (Src: 1 Dest: 0), total number: 2/1"
        );
        assert_eq!(t.differing(), 3);
        assert!(t.verdict().starts_with("Result: different (3 of 4 paths"));
        assert!(t.table("/a", "/b").contains("CONTENT (content)"));
        t.fail_list();
        assert_eq!(t.failures(), 0, "a list is not an item");
        assert!(t
            .verdict()
            .ends_with("paths differ)\n1 output list could not be written (see above)\n"));
    }
}
