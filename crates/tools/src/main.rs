//! `mfu-rs`: one binary for every tool; also answers to the mpiFileUtils names through `argv[0]`.
//!
//! This binary does not link MPI: started directly it runs as thread ranks of one process and
//! never loads the MPI library (its dynamic loading alone costs about a millisecond). Started
//! by a launcher (`mpirun`, `srun`...), it execs `mfu-rs-mpi`, the same tools linked with MPI,
//! installed next to it.

fn main() {
    #[cfg(feature = "mpi")]
    if steal::launch::launched() {
        std::process::exit(mfu::unstable::cli::dispatch::exec_mpi_binary());
    }
    mfu::unstable::cli::dispatch::remove_at_exit_in_binaries();
    std::process::exit(mfu::unstable::cli::dispatch::main_without_mpi(
        std::env::args_os().collect(),
    ));
}
