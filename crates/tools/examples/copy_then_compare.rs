//! Copy a tree, then check the copy: two tools through their typed API in one process.
//!
//! `copy_then_compare SRC DST` copies SRC to DST (cp's path rules: DST absent becomes the copy)
//! with metadata kept, then compares SRC and DST (names, types, sizes, times, contents). It
//! exits 0 when the copy is complete and equal, 1 otherwise (what failed or differs is named on
//! stderr), 2 when it could not start. Started directly it runs as one rank; under `mpirun -np
//! N` as N ranks, both tools in the same MPI session.

use mfu::prelude::*;
use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;

/// Prints failed items on stderr as they happen (the reports count them).
struct Stderr;

impl Events for Stderr {
    fn error(&self, message: &str) {
        eprintln!("copy_then_compare: {message}");
    }
    fn progress(&self, _: &str, _: &steal::progress::Report) {}
    fn output(&self, _: &[u8]) {}
    fn info(&self, _: &str) {}
}

/// Copy `src` to `dst`, then compare them; collective. True when the copy is complete and the
/// trees are equal.
fn copy_then_compare(comm: &dyn Comm, src: &OsString, dst: &OsString) -> Result<bool, Error> {
    let context = Context::new(Arc::new(Stderr));
    let mut cp = mfu::cp::Options::new(&[src.as_encoded_bytes()], dst.as_encoded_bytes());
    cp.io.preserve = true;
    cp.context = context.clone();
    let copied = mfu::cp::run(comm, &cp)?;
    let mut cmp = mfu::cmp::Options::new(src.as_encoded_bytes(), dst.as_encoded_bytes());
    cmp.context = context;
    let compared = mfu::cmp::run(comm, &cmp)?;
    if comm.rank() == 0 {
        println!(
            "copied {} files ({} bytes); compared {} paths: {} differ",
            copied.files, copied.bytes, compared.paths, compared.differing
        );
    }
    Ok(copied.status() == mfu::Status::Ok && compared.status() == mfu::Status::Ok)
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let [_, src, dst] = &args[..] else {
        eprintln!("usage: copy_then_compare SRC DST");
        return ExitCode::from(2);
    };
    match launch::run(None, |comm| copy_then_compare(comm, src, dst)) {
        Ok(ranks) if ranks.iter().all(|r| matches!(r, Ok(true))) => ExitCode::SUCCESS,
        Ok(ranks) => match ranks.into_iter().find_map(Result::err) {
            Some(e) => {
                eprintln!("copy_then_compare: {e}");
                ExitCode::from(2)
            }
            None => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("copy_then_compare: {e}");
            ExitCode::from(2)
        }
    }
}
