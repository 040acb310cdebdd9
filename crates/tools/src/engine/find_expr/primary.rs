//! The tests and actions of an expression as written, before the run resolves them.

use super::lustre::LayoutTest;
use flist::filter::{AgeUnit, Test, TimeField};
use std::ffi::OsString;

/// A test or an action as written on the command line. Tests that need the file system or the
/// clock ([`Primary::Age`], [`Primary::Newer`], [`Primary::User`], [`Primary::Group`]) are
/// resolved when the run starts.
#[derive(Clone, Debug)]
pub enum Primary {
    /// A test complete as written (name, path, regex, size, type, uid, gid).
    Test(Test),
    /// `--amin`... `--mtime`: `spec` relative to the start of the run.
    Age {
        /// The timestamp tested.
        field: TimeField,
        /// Minutes or days.
        unit: AgeUnit,
        /// `[+-]N` as written (checked).
        spec: String,
    },
    /// `--anewer`, `--cnewer`, `--newer`: later than the modification time of `file`.
    Newer {
        /// The timestamp tested.
        field: TimeField,
        /// The reference file.
        file: OsString,
    },
    /// `--user NAME`.
    User(OsString),
    /// `--group NAME`.
    Group(OsString),
    /// `--ost`, `--mdt`, `--pool`, `--stripe-count`, `--stripe-size`, `--layout`: the file's
    /// Lustre layout (read through lustre-sys while the expression is evaluated).
    Lustre(LayoutTest),
    /// `--print` (`nul` false) or `--print0` (`nul` true).
    Print {
        /// End each path with NUL instead of a newline.
        nul: bool,
    },
    /// `--exec`: the command words (with `{}`), without the `;`.
    Exec(Vec<OsString>),
}

impl Primary {
    /// Whether this is an action (an expression without one prints what matches).
    pub fn is_action(&self) -> bool {
        matches!(self, Primary::Print { .. } | Primary::Exec(_))
    }
}
