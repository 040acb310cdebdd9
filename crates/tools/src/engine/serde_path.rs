//! Paths (bytes) in serialised reports (`--json`): as text, bytes that are not UTF-8 written
//! `\xNN` ([`flist::path::display`]), the way messages show them.

use serde::Serializer;

/// Serialise the path `path` as text (for `#[serde(serialize_with = ...)]`).
pub fn text<S: Serializer>(path: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&flist::path::display(path))
}
