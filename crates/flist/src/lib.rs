//! flist
