//! The k-way merge of sorted runs: the smallest current record of any run, in the total order
//! of [`crate::sort`], one after the other.

use super::dir::SpillFile;
use super::run::RunCursor;
use crate::error::Result;
use crate::record::FileList;
use crate::sort::{At, Order};
use std::cmp::Ordering;

/// How a [`Merge`] orders records.
#[derive(Clone, Copy)]
enum By<'a> {
    /// The sort keys of [`crate::sort`].
    Keys(&'a Order<'a>),
    /// The path bytes alone (runs of keyed records: [`super::keyed`]).
    PathBytes,
}

/// Merges sorted runs read from one spill file. Runs tie on equal records by their index
/// (equal records are the same bytes, so the order of the output does not depend on it).
pub(crate) struct Merge<'a> {
    file: &'a SpillFile,
    by: By<'a>,
    cursors: Vec<RunCursor>,
    /// A binary min-heap of the indices of the cursors that have a record.
    heap: Vec<usize>,
}

impl<'a> Merge<'a> {
    /// Start merging `cursors` (each at its run's start) from `file`.
    pub(crate) fn new(
        file: &'a SpillFile,
        order: &'a Order<'a>,
        cursors: Vec<RunCursor>,
    ) -> Result<Merge<'a>> {
        Merge::start(file, By::Keys(order), cursors)
    }

    /// Start merging `cursors` of runs sorted by path bytes.
    pub(crate) fn by_path_bytes(file: &'a SpillFile, cursors: Vec<RunCursor>) -> Result<Merge<'a>> {
        Merge::start(file, By::PathBytes, cursors)
    }

    fn start(file: &'a SpillFile, by: By<'a>, mut cursors: Vec<RunCursor>) -> Result<Merge<'a>> {
        for c in &mut cursors {
            c.load(file)?;
        }
        let mut m = Merge {
            file,
            by,
            heap: (0..cursors.len())
                .filter(|&i| cursors[i].current().is_some())
                .collect(),
            cursors,
        };
        for i in (0..m.heap.len() / 2).rev() {
            m.sift_down(i);
        }
        Ok(m)
    }

    /// The smallest record not yet taken (`None`: every run is done).
    pub(crate) fn peek(&self) -> Option<(&FileList, usize)> {
        self.heap.first().and_then(|&c| self.cursors[c].current())
    }

    /// Take the record [`Merge::peek`] shows.
    pub(crate) fn advance(&mut self) -> Result<()> {
        let Some(&top) = self.heap.first() else {
            return Ok(());
        };
        self.cursors[top].advance(self.file)?;
        if self.cursors[top].current().is_none() {
            let last = self.heap.pop().expect("not empty");
            if self.heap.is_empty() {
                return Ok(());
            }
            self.heap[0] = last;
        }
        self.sift_down(0);
        Ok(())
    }

    fn less(&self, a: usize, b: usize) -> bool {
        let (x, y) = (
            self.cursors[a].current().expect("in the heap"),
            self.cursors[b].current().expect("in the heap"),
        );
        let by = match self.by {
            By::Keys(order) => order.cmp(At::new(x.0, x.1), At::new(y.0, y.1)),
            By::PathBytes => x.0.path(x.1).cmp(y.0.path(y.1)),
        };
        by.then(a.cmp(&b)) == Ordering::Less
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.less(self.heap[l], self.heap[m]) {
                m = l;
            }
            if r < n && self.less(self.heap[r], self.heap[m]) {
                m = r;
            }
            if m == i {
                return;
            }
            self.heap.swap(i, m);
            i = m;
        }
    }
}
