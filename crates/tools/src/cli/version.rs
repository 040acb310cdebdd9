//! `--version`: the version, the commit it was built from, the MPI library and the features.

/// The features this build has, by name.
pub fn features() -> Vec<&'static str> {
    let mut f = Vec::new();
    if cfg!(feature = "mpi") {
        f.push("mpi");
    }
    f
}

/// The long version text: `0.1.0` then lines for the commit, the MPI library (`mpi`, e.g. the
/// first line of `MPI_Get_library_version`) and the features.
pub fn long_version(mpi: &str) -> String {
    let commit = match env!("MFU_RS_COMMIT") {
        "" => "unknown (not built from a git checkout)",
        c => c,
    };
    let features = match features() {
        f if f.is_empty() => "none".to_string(),
        f => f.join(", "),
    };
    format!(
        "{}\ncommit: {commit}\nMPI: {mpi}\nfeatures: {features}",
        env!("CARGO_PKG_VERSION")
    )
}

/// What a binary that links MPI says of it: the library's own version line.
#[cfg(feature = "mpi")]
pub fn mpi_library() -> String {
    steal::mpi_comm::library_version()
}

/// What a binary that links MPI says of it: this build has none.
#[cfg(not(feature = "mpi"))]
pub fn mpi_library() -> String {
    "none (built without the mpi feature: one process, ranks as threads)".to_string()
}
