//! `mfu-rs-mpi`: the tools of `mfu-rs` linked with MPI, one rank per process under a launcher.
//! `mfu-rs` execs it when a launcher started it; started directly, it behaves as `mfu-rs`.

fn main() {
    mfu::unstable::cli::dispatch::remove_at_exit_in_binaries();
    std::process::exit(mfu::main_with_args(std::env::args_os().collect()));
}
