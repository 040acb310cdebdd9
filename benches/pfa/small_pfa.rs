//! Small logical files in one aggregate. Filled in once the crate lands.

use crate::data::Pattern;
use std::path::Path;
use steal::Comm;

pub fn write(_comm: &dyn Comm, _file: &Path, _p: &Pattern, _mine: impl Iterator<Item = u64>) -> Result<String, String> {
    Err("pfa: not yet".into())
}

pub fn read(_file: &Path, _p: &Pattern, _mine: impl Iterator<Item = u64>) -> Result<(), String> {
    Err("pfa: not yet".into())
}
