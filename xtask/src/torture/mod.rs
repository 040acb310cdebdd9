//! `cargo xtask torture [--minutes N] [--seed S] [--fs tmpfs|ext4|xfs|btrfs] [--skip CLASS]...`:
//! a seeded, reproducible harness that does to the data movers what users and the world do to
//! them, and checks each step with an independent oracle.
//!
//! Each iteration (seed S+i of the run's seed S) builds a random tree (tree.rs), picks a
//! scenario class (replay.rs lists them) and runs it (scenario.rs): operations with random
//! options at `--ranks 1..4` or under `mpirun -np 2` (ops.rs), interference (interfere.rs), and
//! after each step the oracle's checks (oracle.rs): the sentinel tree beside the target is
//! unchanged, SRC is unchanged, exit 0 means exactly what the operation promises (compared with
//! SRC, or with GNU tar's extraction of the same archive), counts agree, no file carries its
//! source's size and mtime without a version of its bytes, and a rerun after an interruption
//! converges. A failed iteration prints its seed and a one-line replay command.
//!
//! Known-defect classes can be left out (`--skip CLASS`): the bounded run of `cargo xtask
//! test` ([`bounded`]) skips those still open ([`OPEN_DEFECTS`], none today).

mod interfere;
mod ops;
mod oracle;
mod replay;
mod rng;
mod scenario;
mod tree;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Classes that find defects still open on main (issue 31), left out of the bounded run of
/// `cargo xtask test` until their fixes land; remove a class here in the change that fixes it.
pub const OPEN_DEFECTS: &[&str] = &[];

/// The first seed of the bounded run of `cargo xtask test` (the issue that asked for the net).
const BOUNDED_SEED: u64 = 31_000;

/// The file systems a run can use.
const FILE_SYSTEMS: &[&str] = &["tmpfs", "ext4", "xfs", "btrfs"];

/// What a run is asked.
#[derive(Clone)]
struct Opts {
    minutes: f64,
    seed: u64,
    fs: Vec<String>,
    skip: Vec<String>,
    only: Vec<String>,
    iterations: Option<u64>,
    keep: bool,
    mpi: bool,
    verbose: bool,
}

fn usage() -> &'static str {
    "usage: cargo xtask torture [--minutes N] [--seed S] [--fs tmpfs|ext4|xfs|btrfs]... \
     [--skip CLASS]... [--only CLASS]... [--iterations N] [--keep] [--no-mpi] [--list]\n\
     \n  --minutes N     run for N minutes (fractions allowed; default 2), split over the file systems\
     \n  --seed S        the run's seed (iteration i uses S+i); default: from the clock, printed\
     \n  --fs FS         a file system to run on (repeatable; default tmpfs); ext4/xfs/btrfs are\
     \n                  loop-mounted images (root, mkfs.*); missing ones are reported loudly and skipped\
     \n  --skip CLASS    leave a scenario class out (repeatable; see --list)\
     \n  --only CLASS    run only these classes\
     \n  --iterations N  stop after N iterations per file system\
     \n  --keep          keep a failed iteration's directory (its path is printed)\
     \n  --no-mpi        never start mpirun\
     \n  -v, --verbose   print every iteration's steps, not only a failed one's\
     \n  --list          list the scenario classes\
     \n  --bounded       (alone) the bounded run of `cargo xtask test`\
     \n  The binary is target/debug/mfu-rs (or $MFU_RS_BIN); build it first."
}

fn parse(args: &[String]) -> Result<Option<Opts>> {
    let mut o = Opts {
        minutes: 2.0,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() * 1000 + u64::from(d.subsec_millis())),
        fs: vec![],
        skip: vec![],
        only: vec![],
        iterations: None,
        keep: false,
        mpi: true,
        verbose: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--minutes" => o.minutes = val()?.parse().context("--minutes")?,
            "--seed" => o.seed = val()?.parse().context("--seed")?,
            "--fs" => {
                let f = val()?.clone();
                if !FILE_SYSTEMS.contains(&f.as_str()) {
                    bail!("--fs {f}: one of {}", FILE_SYSTEMS.join(", "));
                }
                o.fs.push(f);
            }
            "--skip" | "--only" => {
                let k = val()?.clone();
                if !replay::CLASSES
                    .iter()
                    .chain(replay::CHECKS)
                    .any(|(c, _)| *c == k)
                {
                    bail!("{a} {k}: not a class (see --list)");
                }
                if a == "--skip" {
                    o.skip.push(k)
                } else {
                    o.only.push(k)
                }
            }
            "--iterations" => o.iterations = Some(val()?.parse().context("--iterations")?),
            "--keep" => o.keep = true,
            "--no-mpi" => o.mpi = false,
            "-v" | "--verbose" => o.verbose = true,
            "--list" => {
                println!("scenario classes (--skip, --only):");
                for (c, what) in replay::CLASSES {
                    println!("  {c:20} {what}");
                }
                println!("check classes (--skip):");
                for (c, what) in replay::CHECKS {
                    println!("  {c:20} {what}");
                }
                return Ok(None);
            }
            "-h" | "--help" => {
                println!("{}", usage());
                return Ok(None);
            }
            other => bail!("torture: unknown argument {other}\n{}", usage()),
        }
    }
    if o.fs.is_empty() {
        o.fs.push("tmpfs".into());
    }
    Ok(Some(o))
}

/// `cargo xtask torture ...`.
pub fn run(args: &[String]) -> Result<()> {
    if args == ["--bounded"] {
        // Exactly the step of `cargo xtask test`.
        return bounded(&binary()?);
    }
    let Some(o) = parse(args)? else { return Ok(()) };
    let bin = binary()?;
    let per_fs = Duration::from_secs_f64(o.minutes * 60.0 / o.fs.len() as f64);
    let mut failed = 0;
    for fs in &o.fs {
        failed += on_fs(&bin, fs, per_fs, &o)?;
    }
    if failed > 0 {
        bail!("torture: {failed} iterations failed (seeds and replay commands above)");
    }
    Ok(())
}

/// The bounded run of `cargo xtask test`: about 2 minutes in all, on tmpfs and on the
/// loop-mounted file systems that can be made here, the classes with open defects left out.
pub fn bounded(bin: &Path) -> Result<()> {
    // The same seeds every run, so that CI is reproducible and a red run is a change's doing,
    // never a rarer seed's: new seeds are for `cargo xtask torture` (the clock's, or --seed).
    let o = Opts {
        minutes: 2.0,
        seed: BOUNDED_SEED,
        fs: FILE_SYSTEMS.iter().map(|s| s.to_string()).collect(),
        skip: OPEN_DEFECTS.iter().map(|s| s.to_string()).collect(),
        only: vec![],
        iterations: None,
        keep: false,
        mpi: true,
        verbose: false,
    };
    let mut failed = 0;
    // About half the time on tmpfs, the rest shared by the disk file systems (about 2 minutes
    // here): a count of iterations, not a time, so that each run draws the same scenarios.
    for fs in &o.fs {
        let n = if fs == "tmpfs" { 300 } else { 100 };
        let o = Opts {
            iterations: Some(n),
            ..o.clone()
        };
        failed += on_fs(bin, fs, Duration::from_secs(600), &o)?;
    }
    if failed > 0 {
        bail!("torture: {failed} iterations failed (seeds and replay commands above)");
    }
    Ok(())
}

fn binary() -> Result<PathBuf> {
    let bin = std::env::var_os("MFU_RS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("target/debug/mfu-rs"));
    if !bin.exists() {
        bail!("{} is missing: cargo build -p mfu-rs --bins", bin.display());
    }
    Ok(bin)
}

fn loud(why: &str) {
    eprintln!("\n**********\ntorture: NOT TESTED: {why}\n**********\n");
}

/// A mounted file system for a run, unmounted (and its image removed) on drop.
struct Mounted {
    dir: PathBuf,
    mounted: bool,
    image: Option<PathBuf>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.dir).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        // The run's directory, once its last file system is gone (fails while others remain).
        if let Some(base) = self.dir.parent().filter(|b| {
            b.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("mfu-torture-"))
        }) {
            let _ = std::fs::remove_dir(base);
        }
        if let Some(i) = &self.image {
            let _ = std::fs::remove_file(i);
        }
    }
}

fn quiet(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Mount `fs` for a run (None, said loudly, when it can't be made here).
fn mount(fs: &str) -> Result<Option<Mounted>> {
    let base = std::env::temp_dir().join(format!("mfu-torture-{}", std::process::id()));
    let dir = base.join(fs);
    std::fs::create_dir_all(&dir)?;
    if fs == "tmpfs" {
        let mounted = quiet(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=1g", "tmpfs"])
                .arg(&dir),
        );
        if mounted {
            return Ok(Some(Mounted {
                dir,
                mounted,
                image: None,
            }));
        }
        // Not root: /dev/shm is a tmpfs too.
        let shm = PathBuf::from(format!("/dev/shm/mfu-torture-{}", std::process::id()));
        std::fs::create_dir_all(&shm)?;
        return Ok(Some(Mounted {
            dir: shm,
            mounted: false,
            image: None,
        }));
    }
    let mkfs = format!("mkfs.{fs}");
    if !crate::setup::have(&mkfs)
        && !Path::new("/usr/sbin").join(&mkfs).exists()
        && !Path::new("/sbin").join(&mkfs).exists()
    {
        loud(&format!(
            "{fs}: {mkfs} is missing (cargo xtask setup installs xfsprogs and btrfs-progs)"
        ));
        return Ok(None);
    }
    if !Path::new("/dev/loop-control").exists() {
        loud(&format!(
            "{fs}: no loop devices here (/dev/loop-control is missing)"
        ));
        return Ok(None);
    }
    // The image on disk (not in a tmpfs), sparse.
    let image = PathBuf::from(format!(
        "/var/tmp/mfu-torture-{}-{fs}.img",
        std::process::id()
    ));
    std::fs::File::create(&image)?.set_len(1 << 30)?;
    let force = if fs == "ext4" { "-F" } else { "-f" };
    if !quiet(Command::new(&mkfs).arg(force).arg(&image)) {
        let _ = std::fs::remove_file(&image);
        loud(&format!("{fs}: {mkfs} failed on {}", image.display()));
        return Ok(None);
    }
    if !quiet(
        Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&dir),
    ) {
        let _ = std::fs::remove_file(&image);
        loud(&format!(
            "{fs}: mount -o loop failed (no loop device free, or not root)"
        ));
        return Ok(None);
    }
    Ok(Some(Mounted {
        dir,
        mounted: true,
        image: Some(image),
    }))
}

/// Iterations on one file system for `time`; returns the number that failed.
fn on_fs(bin: &Path, fs: &str, time: Duration, o: &Opts) -> Result<u64> {
    let Some(m) = mount(fs)? else { return Ok(0) };
    let classes: Vec<&str> = replay::CLASSES
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| {
            !o.skip.iter().any(|s| s == c) && (o.only.is_empty() || o.only.iter().any(|s| s == c))
        })
        .collect();
    if classes.is_empty() {
        bail!("torture: every class is skipped");
    }
    let mpi = o.mpi && crate::setup::have("mpirun");
    let start = Instant::now();
    let (mut done, mut failed) = (0u64, 0u64);
    let mut per_class: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    // A count of iterations, when asked for, is what bounds the run (the time then is not).
    let bound = match o.iterations {
        Some(n) => format!("{n} iterations"),
        None => format!("{:.1} min", time.as_secs_f64() / 60.0),
    };
    eprintln!(
        "torture: {fs} at {}: seed {} for {bound}, classes {}",
        m.dir.display(),
        o.seed,
        classes.join(",")
    );
    loop {
        if o.iterations.is_some_and(|n| done >= n)
            || (o.iterations.is_none() && start.elapsed() >= time)
        {
            break;
        }
        let seed = o.seed.wrapping_add(done);
        let mut rng = rng::Rng::new(seed);
        let class = *rng.pick(&classes);
        let chunk = *rng.pick(&[65536u64, 131072, 262144]);
        let dir = m.dir.join(format!("it-{seed}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut c = scenario::Ctx {
            bin,
            sentinel: dir.join("sentinel"),
            dir: dir.clone(),
            rng,
            chunk,
            skip: &o.skip,
            mpi,
            log: vec![format!("class {class}, chunk {chunk}")],
            found: vec![],
            limit: Duration::from_secs(120),
            traps: false,
        };
        let result = scenario::run(&mut c, class);
        if let Err(e) = result {
            c.found.push(replay::Finding {
                class: "harness",
                what: format!("{e:#}"),
            });
        }
        if o.verbose {
            eprintln!("torture: seed {seed}: {}", c.log.join("\n    "));
        }
        let e = per_class.entry(class).or_default();
        e.0 += 1;
        if c.found.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            failed += 1;
            e.1 += 1;
            eprint!(
                "{}",
                replay::report(seed, fs, (&o.skip, &o.only), &c.log, &c.found)
            );
            if o.keep {
                // Out of the mount, which goes away at the end.
                let kept = std::env::temp_dir().join(format!("mfu-torture-kept-{seed}"));
                let _ = std::fs::remove_dir_all(&kept);
                let _ = Command::new("cp").arg("-a").arg(&dir).arg(&kept).status();
                eprintln!("  kept: {}", kept.display());
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        done += 1;
    }
    let summary: Vec<String> = per_class
        .iter()
        .map(|(c, (n, f))| format!("{c} {n}/{f} failed"))
        .collect();
    eprintln!(
        "torture: {fs}: {done} iterations (seeds {}..{}) in {:.1} min, {failed} failed [{}]",
        o.seed,
        o.seed.wrapping_add(done),
        start.elapsed().as_secs_f64() / 60.0,
        summary.join(", ")
    );
    Ok(failed)
}
