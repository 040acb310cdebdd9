//! Why a run could not start: the errors of [`crate::launch`] and of the MPI session.

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A launcher started several tasks but this build has no MPI: they would race each other.
    #[error(
        "this mfu-rs was built without MPI, but the launcher started {tasks} tasks ({var}={tasks}); \
         rebuild with the `mpi` feature or start one task"
    )]
    NoMpiButManyTasks {
        /// Variable that told.
        var: &'static str,
        /// Tasks it named.
        tasks: usize,
    },
    /// `--ranks N` (thread ranks in one process) asked for in each of several launched tasks:
    /// each task would run its own job, racing the others on the same files.
    #[error(
        "--ranks/MFU_RANKS runs thread ranks in one process, but the launcher started {tasks} \
         tasks ({var}={tasks}): each would run alone; drop --ranks (and MFU_RANKS) under a launcher"
    )]
    RanksUnderLauncher {
        /// Variable that told.
        var: &'static str,
        /// Tasks it named.
        tasks: usize,
    },
    /// MPI was finalised already in this process (by whoever initialised it): it cannot start
    /// again.
    #[error("MPI was finalised already in this process: it cannot be used again")]
    MpiFinalized,
    /// A run under MPI called from another thread than the one that initialised MPI (MPI is
    /// initialised funneled: only that thread calls it).
    #[error(
        "MPI runs on the thread that initialised it (funneled): start every run under MPI from \
         that thread"
    )]
    MpiThread,
    /// MPI started, but its job is not the one the launcher announced: the launcher belongs to
    /// another MPI than the one this build links, and the tasks would run as independent jobs,
    /// racing each other on the same files.
    #[error(
        "the launcher started {tasks} tasks ({var}={tasks}) but MPI made this process one of \
         {size} (this mfu-rs links {library}): the launcher belongs to another MPI; start mfu-rs \
         with the launcher of the MPI it was built with"
    )]
    WrongLauncher {
        /// Variable that told the launcher's task count.
        var: &'static str,
        /// Tasks the launcher announced.
        tasks: usize,
        /// Size of the MPI job this process joined.
        size: usize,
        /// The MPI library this build links (its version string, first line).
        library: String,
    },
}
