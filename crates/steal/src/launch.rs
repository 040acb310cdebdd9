//! Launch detection: was this process started by an MPI launcher, and with how many tasks?
//!
//! MPI start-up costs about 0.35 s per command even for one rank (Open MPI's singleton start), so
//! a process that no launcher started never initialises MPI: it runs as one rank (or as
//! `--ranks N` thread ranks), and a single-node command starts as fast as `cp`.

use crate::comm::Comm;
use crate::local;

/// Environment variables that only a launcher sets, one per launcher family.
const LAUNCHER_VARS: [&str; 6] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
    "SLURM_STEP_ID",
];

/// Variables holding the number of tasks a launcher started.
const TASK_COUNT_VARS: [&str; 3] = ["SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"];

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
    /// MPI could not be initialised.
    #[error("MPI could not be initialised (was it initialised already?)")]
    MpiInit,
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
        let tasks = TASK_COUNT_VARS
            .into_iter()
            .filter_map(|v| {
                get(v)
                    .and_then(|s| s.trim().parse::<usize>().ok())
                    .map(|n| (v, n))
            })
            .max_by_key(|&(_, n)| n);
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
            return Ok(Backend::Local { ranks: n.max(1) });
        }
        if mpi_built && self.launcher_var.is_some() {
            Ok(Backend::Mpi)
        } else {
            Ok(Backend::Local { ranks: 1 })
        }
    }
}

/// Run `f` as every rank of this process, on the backend the environment calls for, and return
/// the results of this process's ranks (one under MPI, `ranks` for the local backend).
pub fn run<R, F>(forced_ranks: Option<usize>, f: F) -> Result<Vec<R>, LaunchError>
where
    R: Send,
    F: Fn(&dyn Comm) -> R + Sync,
{
    match Launcher::from_env().backend(forced_ranks, cfg!(feature = "mpi"))? {
        Backend::Local { ranks } => Ok(local::run(ranks, f)),
        #[cfg(feature = "mpi")]
        Backend::Mpi => {
            let comm = crate::mpi_comm::MpiComm::init().ok_or(LaunchError::MpiInit)?;
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
        for var in ["SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"] {
            let err = env(&[(var, "4")]).backend(None, false).unwrap_err();
            assert!(err.to_string().contains(&format!("{var}=4")), "{err}");
        }
        assert_eq!(
            env(&[("SLURM_NTASKS", "1")]).backend(None, false).unwrap(),
            Backend::Local { ranks: 1 }
        );
        assert_eq!(
            env(&[("OMPI_COMM_WORLD_SIZE", "1")])
                .backend(None, false)
                .unwrap(),
            Backend::Local { ranks: 1 }
        );
    }
}
