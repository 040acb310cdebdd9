//! The mpiFileUtils talk's example: list the regular files that have more than one hard link.
//!
//! `hardlinks DIR OUT.mfu` walks DIR, keeps the regular files whose link count is above one,
//! writes them to OUT.mfu (the mpiFileUtils v4 list format, which `mfu-rs walk -i` and the C
//! tools read) and prints a summary on rank 0. Started directly it runs as one rank; under
//! `mpirun -np N` as N ranks, each walking and filtering its share.
//!
//! The whole program is [`hardlinks`]: walk, filter (in parallel), write, count.

use mfu::prelude::*;
use std::ffi::OsString;
use std::process::ExitCode;

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Walk `dir`, keep the regular files with more than one link, write them to `out`; collective.
/// Returns the global counts of the list written. An incomplete walk (a path that could not be
/// read) is an error: a list of linked files missing some is not the answer.
fn hardlinks(comm: &dyn Comm, dir: &OsString, out: &OsString) -> Result<Summary, Failure> {
    let list = walk(comm, &[dir], &WalkOptions::default()).into_result()?;
    let linked =
        list.filter_par(|e| e.kind == FileType::File && e.meta.is_some_and(|m| m.nlink > 1));
    io::write(comm, &linked, out, Format::V4)?;
    Ok(summarize(comm, &linked))
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let [_, dir, out] = &args[..] else {
        eprintln!("usage: hardlinks DIR OUT.mfu");
        return ExitCode::from(2);
    };
    let ranks = launch::run(None, |comm| {
        let result = hardlinks(comm, dir, out);
        if comm.rank() == 0 {
            match &result {
                Ok(sum) => println!(
                    "{} files with more than one link ({} bytes)",
                    sum.files, sum.bytes
                ),
                Err(e) => eprintln!("hardlinks: {e}"),
            }
        }
        result.is_ok()
    });
    match ranks {
        Ok(ok) if ok.iter().all(|&ok| ok) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("hardlinks: {e}");
            ExitCode::from(2)
        }
    }
}
