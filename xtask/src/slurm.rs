//! A one-node Slurm on localhost (munge, slurmctld, slurmd from Debian, configured in a private
//! directory through `SLURM_CONF`), and the runs users make with it: `srun -n 2 mfu-rs walk|cp|
//! sync|tar` with Open MPI (`--mpi=pmix`) and MPICH (`--mpi=pmi2`), each checked for its result
//! and for having run as 2 ranks.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The daemons of a private one-node cluster; stopped on drop.
pub struct Cluster {
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// Why a local Slurm can't run here, or `None` when it can (Debian's packages and root).
pub fn unavailable() -> Option<String> {
    let missing: Vec<&str> = ["munged", "slurmctld", "slurmd", "srun", "sinfo"]
        .into_iter()
        .filter(|p| !crate::setup::have(p) && !Path::new("/usr/sbin").join(p).exists())
        .collect();
    if !missing.is_empty() {
        return Some(format!("not installed: {}", missing.join(", ")));
    }
    if !crate::setup::is_root() {
        return Some("slurmd must run as root to start jobs".into());
    }
    None
}

/// Start munge (if not running), slurmctld and slurmd with a configuration in `dir`; wait until
/// the node is idle.
pub fn start(dir: &Path) -> Result<Cluster> {
    for sub in ["state", "spool", "log"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let d = dir.display();
    let conf = dir.join("slurm.conf");
    std::fs::write(
        &conf,
        format!(
            "ClusterName=mfu\nSlurmctldHost=localhost\nSlurmUser=root\nSlurmdUser=root\n\
             AuthType=auth/munge\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\nSchedulerType=sched/builtin\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nReturnToService=2\n\
             MpiDefault=none\nSlurmctldPort=16817\nSlurmdPort=16818\n\
             NodeName=localhost CPUs={cpus} State=UNKNOWN\n\
             PartitionName=mfu Nodes=localhost Default=YES MaxTime=INFINITE State=UP \
             OverSubscribe=FORCE:8\n"
        ),
    )?;
    let munged = Command::new("pgrep").arg("-x").arg("munged").output()?;
    if !munged.status.success() {
        // munged refuses to run as root: as its own user, with its directories.
        let _ = Command::new("sh")
            .args([
                "-c",
                "mkdir -p /run/munge && chown munge:munge /run/munge /var/lib/munge /var/log/munge",
            ])
            .status();
        let started = Command::new("su")
            .args(["-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"])
            .status()
            .context("start munged")?;
        if !started.success() {
            bail!("munged did not start ({started})");
        }
    }
    let mut cluster = Cluster {
        conf: conf.clone(),
        daemons: Vec::new(),
    };
    for daemon in ["slurmctld", "slurmd"] {
        // -D: in the foreground, so that the guard owns it; -c: no state from an earlier run.
        let child = Command::new(daemon)
            .args(["-D", "-c"])
            .env("SLURM_CONF", &conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("start {daemon}"))?;
        cluster.daemons.push(child);
        std::thread::sleep(Duration::from_millis(500));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = cluster.command("sinfo").args(["-h", "-o", "%t"]).output()?;
        let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if state == "idle" || state == "mix" {
            return Ok(cluster);
        }
        if Instant::now() > deadline {
            bail!(
                "the local node did not become idle in 60 s (sinfo: {state:?}); see {}/log",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

impl Cluster {
    /// A Slurm client command talking to this cluster.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", &self.conf);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().to_string();
            if k.starts_with("OMPI_COMM_WORLD") || k.starts_with("PMI") || k == "MFU_RANKS" {
                cmd.env_remove(k);
            }
        }
        cmd
    }

    /// `srun -n 2 --mpi=PLUGIN BIN ARGS` with the queue statistics on, checked: exit 0, and a
    /// statistics line saying 2 ranks (so the run really was one MPI job of two tasks). A run
    /// without a work queue (`tar -x` of an indexed archive) prints no statistics: its exit 0
    /// says as much, since mfu-rs refuses (exit 2) tasks whose MPI size differs from the
    /// launcher's task count.
    pub fn srun2(
        &self,
        plugin: &str,
        bin: &Path,
        args: &[&std::ffi::OsStr],
        queue: bool,
    ) -> Result<Output> {
        let mut cmd = self.command("srun");
        cmd.args(["-n", "2", "--kill-on-bad-exit=1", "-t", "5"])
            .arg(format!("--mpi={plugin}"))
            .arg(bin)
            .args(args)
            .env("MFU_RS_STATS", "1");
        // Slurm's PMIx server chooses the security mode (munge, with this cluster's munged).
        crate::mpi_env(&mut cmd).env_remove("PMIX_MCA_psec");
        let line = format!("{cmd:?}");
        eprintln!("+ {line}");
        let out = cmd.output().with_context(|| format!("start {line}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            bail!("{line} failed ({}):\n{stderr}", out.status);
        }
        if (queue || stderr.contains("stats: queue:")) && !stderr.contains("ranks=2 ") {
            bail!("{line} did not run as 2 ranks (no `ranks=2` statistics line):\n{stderr}");
        }
        Ok(out)
    }
}

/// walk, cp, sync and tar -c/-x under `srun -n 2 --mpi=PLUGIN` with `bin`, on a small tree in
/// `dir`, each result checked.
pub fn check_tools(cluster: &Cluster, plugin: &str, bin: &Path, dir: &Path) -> Result<()> {
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(dir);
    for i in 0..20 {
        let sub = src.join(format!("d{}", i % 4));
        std::fs::create_dir_all(&sub)?;
        std::fs::write(sub.join(format!("f{i}")), vec![i as u8; 1000 * i])?;
    }
    let (copy, archive, out) = (dir.join("copy"), dir.join("a.tar"), dir.join("out"));
    let srun = |args: &[&Path], queue: bool| {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        cluster.srun2(plugin, bin, &args, queue)
    };
    let p = Path::new;
    let walked = srun(&[p("walk"), &src], true)?;
    let text = String::from_utf8_lossy(&walked.stdout);
    if !text.contains("Items: 25") {
        bail!("walk under srun --mpi={plugin}: expected 25 items:\n{text}");
    }
    srun(&[p("cp"), p("-p"), &src, &copy], true)?;
    same_tree(&src, &copy)?;
    std::fs::write(src.join("d1/f1"), b"changed")?;
    std::fs::remove_file(src.join("d2/f2"))?;
    srun(&[p("sync"), p("-D"), &src, &copy], true)?;
    same_tree(&src, &copy)?;
    srun(
        &[p("tar"), p("-c"), p("-f"), &archive, p("-C"), dir, p("src")],
        true,
    )?;
    std::fs::create_dir_all(&out)?;
    // An indexed archive is extracted without a work queue: no statistics line.
    srun(
        &[p("tar"), p("-x"), p("-f"), &archive, p("-C"), &out],
        false,
    )?;
    same_tree(&src, &out.join("src"))?;
    eprintln!("slurm: walk, cp, sync and tar under srun -n 2 --mpi={plugin}: results checked");
    Ok(())
}

/// `diff -r`: the two trees hold the same names and contents.
fn same_tree(a: &Path, b: &Path) -> Result<()> {
    let out = Command::new("diff").arg("-r").arg(a).arg(b).output()?;
    if !out.status.success() {
        bail!(
            "{} and {} differ:\n{}",
            a.display(),
            b.display(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    Ok(())
}

/// The Slurm recipe (`packaging/slurm/mfu-rs.sbatch`) run for real: a `tar -c` job of 2 tasks
/// with a two-minute time limit whose signal comes early, each member made slow by a test knob
/// so that the limit reaches the run mid-way. The job must stop, requeue itself, continue from
/// its checkpoint, and end with an archive byte-identical to an uninterrupted run's.
pub fn check_requeue(cluster: &Cluster, root: &Path, bin: &Path, dir: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let src = dir.join("src");
    std::fs::create_dir_all(&src)?;
    // 8 files of 4 MiB in chunks of 256 KiB: 128 units of work, each marked (and slowed).
    for i in 0..8u64 {
        let data: Vec<u8> = (0..4u64 << 20)
            .map(|b| (b.wrapping_mul(2654435761).wrapping_add(i * 97) >> 7) as u8)
            .collect();
        std::fs::write(src.join(format!("f{i}")), data)?;
    }
    // The same name in two directories: the index member is named after the archive.
    let (whole, resumed) = (dir.join("whole/a.tar"), dir.join("resumed/a.tar"));
    std::fs::create_dir_all(dir.join("whole"))?;
    std::fs::create_dir_all(dir.join("resumed"))?;
    let p = Path::new;
    let args = |archive: &Path| -> Vec<std::ffi::OsString> {
        [
            p("tar"),
            p("-c"),
            p("-k"),
            p("256K"),
            p("-f"),
            archive,
            p("-C"),
            dir,
            p("src"),
        ]
        .iter()
        .map(|a| a.as_os_str().to_owned())
        .collect()
    };
    let whole_args = args(&whole);
    let whole_args: Vec<&std::ffi::OsStr> = whole_args.iter().map(|a| a.as_os_str()).collect();
    // The index member's time: the same in both runs (a rerun keeps its first run's, which an
    // uninterrupted run made at another moment would not share).
    std::env::set_var("SOURCE_DATE_EPOCH", "1700000000");
    let whole_run = cluster.srun2("pmix", bin, &whole_args, true);
    std::env::remove_var("SOURCE_DATE_EPOCH");
    whole_run?;
    let log = dir.join("job.log");
    let mut cmd = cluster.command("sbatch");
    // Two minutes, the signal asked for 90 s before the end: slurmctld looks at time limits
    // every 30 s or so, so it comes 30 to 60 s into a run of about 80 s (and again into the
    // requeued runs until one completes).
    cmd.args(["--parsable", "-n", "2", "-t", "2", "--signal=B:TERM@90"])
        .arg(format!("--output={}", log.display()))
        .arg(root.join("packaging/slurm/mfu-rs.sbatch"))
        .args(args(&resumed))
        .env("MFU_RS", bin)
        .env("SRUN_ARGS", "--mpi=pmix")
        .env("MFU_MAX_REQUEUES", "8")
        .env("SOURCE_DATE_EPOCH", "1700000000")
        // About 80 s of work for an uninterrupted run.
        .env("MFU_RS_TEST_CHECKPOINT_SLOW_MS", "2000");
    crate::mpi_env(&mut cmd).env_remove("PMIX_MCA_psec");
    let out = cmd.output().context("sbatch the recipe")?;
    if !out.status.success() {
        bail!("sbatch failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let job = String::from_utf8_lossy(&out.stdout).trim().to_string();
    eprintln!("slurm: recipe job {job} submitted (tar -c, time limit 2 min, requeued until done)");
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let q = cluster
            .command("squeue")
            .args(["-h", "-j", &job, "-o", "%T"])
            .output()?;
        let state = String::from_utf8_lossy(&q.stdout).trim().to_string();
        if state.is_empty() {
            break;
        }
        if state == "PENDING" {
            // Slurm holds a requeued job for two minutes or more (its begin time): the suite
            // does not wait for that (the recipe itself does nothing about it).
            let _ = cluster
                .command("scontrol")
                .args(["update", &format!("JobId={job}"), "StartTime=now"])
                .output();
        }
        if started.elapsed() > Duration::from_secs(600) {
            let _ = cluster.command("scancel").arg(&job).status();
            bail!("the recipe job {job} did not end in 10 minutes (state {state})");
        }
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let runs = text.matches("mfu-rs.sbatch: job").count();
    if !text.contains("completed after") || runs < 2 {
        bail!("the recipe job {job} should have stopped at its time limit, requeued and completed (runs: {runs}):\n{text}");
    }
    let (a, b) = (std::fs::read(&whole)?, std::fs::read(&resumed)?);
    if a != b {
        bail!("the requeued job's archive differs from an uninterrupted run's:\n{text}");
    }
    eprintln!("slurm: the recipe stopped at the time limit, requeued and completed in {runs} runs; archive identical");
    Ok(())
}
