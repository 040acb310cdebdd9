//! `mfu-rs`: one binary for every tool; also answers to the mpiFileUtils names through `argv[0]`.

fn main() {
    std::process::exit(mfu::main_with_args(std::env::args_os().collect()));
}
