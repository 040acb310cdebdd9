//! Launch detection: was this process started by an MPI launcher, and with how many tasks?
//!
//! MPI start-up costs about 0.35 s per command even for one rank (Open MPI's singleton start), so
//! a process that no launcher started never initialises MPI: it runs as one rank (or as
//! `--ranks N` thread ranks), and a single-node command starts as fast as `cp`.

use crate::comm::Comm;
pub use crate::launch_error::LaunchError;
use crate::local;

/// Environment variables that only a launcher sets, one per launcher family.
const LAUNCHER_VARS: [&str; 7] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
    "SLURM_STEP_ID",
    "SLURM_STEP_NUM_TASKS",
];

/// Variables holding the number of tasks the launcher that started this process started, most
/// specific first: Open MPI's `mpirun` (which itself may run under `srun`, and then inherits the
/// step's count of its daemons), a PMI launcher (MPICH's `mpiexec`, `srun --mpi=pmi2`), then
/// Slurm's step (`srun`, whatever its `--mpi`). Never `SLURM_NTASKS`: the batch shell of
/// `sbatch -n 8` inherits it, and one `mfu-rs` started there is one task.
const TASK_COUNT_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"];

/// Which backend a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `ranks` thread ranks in this one process.
    Local {
        /// Number of ranks (threads).
        ranks: usize,
    },
    /// One rank per process, under an MPI launcher.
    Mpi,
}

/// What the environment says about how this process was started.
#[derive(Clone, Debug, Default)]
pub struct Launcher {
    /// A launcher variable was found (name).
    pub launcher_var: Option<&'static str>,
    /// Tasks the launcher started, and the variable that said so.
    pub tasks: Option<(&'static str, usize)>,
}

impl Launcher {
    /// Read the process environment.
    pub fn from_env() -> Launcher {
        Launcher::from_lookup(|k| std::env::var(k).ok())
    }

    /// Read an environment given as a lookup function (for tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Launcher {
        let launcher_var = LAUNCHER_VARS.into_iter().find(|v| get(v).is_some());
        let tasks = TASK_COUNT_VARS.into_iter().find_map(|v| {
            get(v)
                .and_then(|s| s.trim().parse::<usize>().ok())
                .map(|n| (v, n))
        });
        Launcher {
            launcher_var,
            tasks,
        }
    }

    /// The backend to use. `forced_ranks` (`--ranks N`) picks the local backend with N ranks.
    pub fn backend(
        &self,
        forced_ranks: Option<usize>,
        mpi_built: bool,
    ) -> Result<Backend, LaunchError> {
        let many = self.tasks.filter(|&(_, n)| n > 1);
        if !mpi_built {
            if let Some((var, tasks)) = many {
                return Err(LaunchError::NoMpiButManyTasks { var, tasks });
            }
        }
        if let Some(n) = forced_ranks {
            if let Some((var, tasks)) = many {
                return Err(LaunchError::RanksUnderLauncher { var, tasks });
            }
            return Ok(Backend::Local { ranks: n.max(1) });
        }
        if mpi_built && self.launcher_var.is_some() {
            Ok(Backend::Mpi)
        } else {
            Ok(Backend::Local { ranks: 1 })
        }
    }
}

impl Launcher {
    /// After MPI_Init: refuse when the job MPI made (`size` tasks) is not the one the launcher
    /// announced. `library` names this build's MPI for the message.
    pub fn check_size(&self, size: usize, library: impl Fn() -> String) -> Result<(), LaunchError> {
        match self.tasks {
            Some((var, tasks)) if tasks != size => Err(LaunchError::WrongLauncher {
                var,
                tasks,
                size,
                library: library(),
            }),
            _ => Ok(()),
        }
    }
}

/// True when a launcher started this process (one of its variables is set): the runs that need
/// MPI. A front end that does not link MPI hands such a run to the binary that does.
pub fn launched() -> bool {
    LAUNCHER_VARS.iter().any(|v| std::env::var_os(v).is_some())
}

/// [`run`] without MPI, whatever this build links: the local backend only, deciding as a build
/// without the `mpi` feature does (several launched tasks are refused). It never references
/// the MPI backend, so a binary that only calls this does not load the MPI library.
pub fn run_local<R, F>(forced_ranks: Option<usize>, f: F) -> Result<Vec<R>, LaunchError>
where
    R: Send,
    F: Fn(&dyn Comm) -> R + Sync,
{
    match Launcher::from_env().backend(forced_ranks, false)? {
        Backend::Local { ranks } => Ok(local::run(ranks, f)),
        Backend::Mpi => unreachable!("backend() never picks MPI when told MPI is not built"),
    }
}

/// Run `f` as every rank of this process, on the backend the environment calls for, and return
/// the results of this process's ranks (one under MPI, `ranks` for the local backend).
///
/// Started without a launcher, the run is `forced_ranks` thread ranks (one when `None`) and MPI
/// is not touched. Under a launcher (with the `mpi` feature), MPI is a session of the process:
/// the first run initialises it, later runs reuse it, and it is finalised when the process
/// exits; each run works on its own duplicate of `MPI_COMM_WORLD`. When the host program
/// initialised MPI itself, runs use it and leave its finalisation to the host. Under MPI, call
/// runs from the thread that initialised it (MPI is funneled). Any number of runs per process.
///
/// ```
/// use steal::{launch, CommExt};
/// // No launcher here: two thread ranks, each summing over the group.
/// let sums = launch::run(Some(2), |comm| comm.sum(comm.rank() as u64 + 1)).unwrap();
/// assert_eq!(sums, [3, 3]);
/// // Another run in the same process: one rank (under `mpirun -np N`: this process's rank of N).
/// let sizes = launch::run(None, |comm| comm.size()).unwrap();
/// assert_eq!(sizes, [1]);
/// ```
pub fn run<R, F>(forced_ranks: Option<usize>, f: F) -> Result<Vec<R>, LaunchError>
where
    R: Send,
    F: Fn(&dyn Comm) -> R + Sync,
{
    let launcher = Launcher::from_env();
    match launcher.backend(forced_ranks, cfg!(feature = "mpi"))? {
        Backend::Local { ranks } => Ok(local::run(ranks, f)),
        #[cfg(feature = "mpi")]
        Backend::Mpi => {
            // `launcher` was read before MPI_Init: Open MPI sets its own variables there.
            let comm = crate::mpi_comm::MpiComm::init()?;
            launcher.check_size(comm.size(), crate::mpi_comm::library_version)?;
            let r = f(&comm);
            comm.flush_sends();
            Ok(vec![r])
        }
        #[cfg(not(feature = "mpi"))]
        Backend::Mpi => unreachable!("backend() never picks MPI without the mpi feature"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Launcher {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        Launcher::from_lookup(move |k| pairs.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone()))
    }

    #[test]
    fn no_launcher_means_one_local_rank_without_mpi_init() {
        assert_eq!(
            env(&[]).backend(None, true).unwrap(),
            Backend::Local { ranks: 1 }
        );
        assert_eq!(
            env(&[]).backend(Some(4), true).unwrap(),
            Backend::Local { ranks: 4 }
        );
    }

    #[test]
    fn a_launcher_means_mpi() {
        let l = env(&[("OMPI_COMM_WORLD_SIZE", "1")]);
        assert_eq!(l.backend(None, true).unwrap(), Backend::Mpi);
        let l = env(&[("PMIX_RANK", "0"), ("SLURM_NTASKS", "8")]);
        assert_eq!(l.backend(None, true).unwrap(), Backend::Mpi);
    }

    #[test]
    fn no_mpi_build_refuses_many_tasks_but_runs_one() {
        for var in ["SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"] {
            let err = env(&[(var, "4")]).backend(None, false).unwrap_err();
            assert!(err.to_string().contains(&format!("{var}=4")), "{err}");
        }
        assert_eq!(
            env(&[("SLURM_STEP_NUM_TASKS", "1")])
                .backend(None, false)
                .unwrap(),
            Backend::Local { ranks: 1 }
        );
        assert_eq!(
            env(&[("OMPI_COMM_WORLD_SIZE", "1")])
                .backend(None, false)
                .unwrap(),
            Backend::Local { ranks: 1 }
        );
    }

    #[test]
    fn thread_ranks_in_each_of_several_launched_tasks_are_refused() {
        let err = env(&[("OMPI_COMM_WORLD_SIZE", "2")])
            .backend(Some(4), true)
            .unwrap_err();
        assert!(err.to_string().contains("OMPI_COMM_WORLD_SIZE=2"), "{err}");
        // One launched task may still run thread ranks.
        assert_eq!(
            env(&[("SLURM_STEP_NUM_TASKS", "1")])
                .backend(Some(4), true)
                .unwrap(),
            Backend::Local { ranks: 4 }
        );
    }

    #[test]
    fn a_batch_shell_is_one_task_whatever_the_allocation() {
        // `sbatch -n 8` runs the script once, with the allocation's variables but no step.
        let l = env(&[("SLURM_NTASKS", "8"), ("SLURM_JOB_ID", "42")]);
        assert_eq!(l.backend(None, false).unwrap(), Backend::Local { ranks: 1 });
        assert_eq!(l.backend(None, true).unwrap(), Backend::Local { ranks: 1 });
    }

    #[test]
    fn the_launchers_own_count_wins_over_the_step_of_its_daemons() {
        // Open MPI's mpirun inside a Slurm job starts its daemons with srun (one per node).
        let l = env(&[
            ("OMPI_COMM_WORLD_SIZE", "16"),
            ("SLURM_STEP_NUM_TASKS", "2"),
            ("SLURM_NTASKS", "32"),
        ]);
        assert_eq!(l.tasks, Some(("OMPI_COMM_WORLD_SIZE", 16)));
        assert!(l.check_size(16, String::new).is_ok());
        let l = env(&[("PMI_SIZE", "4"), ("SLURM_STEP_NUM_TASKS", "1")]);
        assert_eq!(l.tasks, Some(("PMI_SIZE", 4)));
    }

    #[test]
    fn an_mpi_job_of_another_size_than_announced_is_refused_naming_both() {
        let lib = || "MPICH Version: 4.0.2".to_string();
        let err = env(&[("PMI_SIZE", "2"), ("PMI_RANK", "0")])
            .check_size(1, lib)
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("PMI_SIZE=2") && msg.contains("one of 1"),
            "{msg}"
        );
        assert!(msg.contains("MPICH Version: 4.0.2"), "{msg}");
        let l = env(&[("SLURM_STEP_NUM_TASKS", "4"), ("PMIX_RANK", "0")]);
        assert!(l.check_size(1, lib).is_err());
        assert!(l.check_size(4, lib).is_ok());
        // No announced count (a singleton, or a launcher that says nothing): nothing to compare.
        assert!(env(&[("PMIX_RANK", "0")]).check_size(1, lib).is_ok());
    }
}
