//! `vectree ROOT SEED [--ascii]`: build the tree an interop vector describes under ROOT and
//! print its manifest (what `make_vector_tree.py` did). `cargo run -p vectree -- ROOT SEED`.

use std::ffi::OsString;
use std::path::PathBuf;

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let ascii = args.iter().any(|a| a == "--ascii");
    let rest: Vec<&OsString> = args.iter().filter(|a| *a != "--ascii").collect();
    let (root, seed) = match rest.as_slice() {
        [root, seed] => match seed.to_str().and_then(|s| s.parse::<u32>().ok()) {
            Some(seed) => (PathBuf::from(root), seed),
            None => usage(),
        },
        _ => usage(),
    };
    match vectree::build(&root, seed, ascii) {
        Ok(entries) => print!("{}", vectree::manifest_json(&entries)),
        Err(e) => {
            eprintln!("vectree: {e}");
            std::process::exit(1);
        }
    }
}

fn usage() -> ! {
    eprintln!("usage: vectree ROOT SEED [--ascii]");
    std::process::exit(2);
}
