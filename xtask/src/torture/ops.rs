//! Running the tools: the launcher (`--ranks 1..4` or `mpirun -np 2`), a bounded wait, and
//! the kill at a moment (`kill -9` or SIGTERM to the whole process group, then to any rank that
//! left it, found by a token in its environment).

use super::rng::Rng;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How the tool is started.
#[derive(Clone, Copy, Debug)]
pub enum Launch {
    /// `--ranks N` (threads of one process).
    Ranks(u32),
    /// `mpirun -np N`.
    Mpirun(u32),
}

impl Launch {
    /// Random: mostly thread ranks (cheap), sometimes mpirun (`mpi`: allowed at all).
    pub fn random(rng: &mut Rng, mpi: bool) -> Self {
        if mpi && rng.chance(15) {
            Launch::Mpirun(2)
        } else {
            Launch::Ranks(rng.between(1, 4) as u32)
        }
    }
}

/// An interruption of a run.
#[derive(Clone, Debug)]
pub enum Kill {
    None,
    /// This signal to the process group after this long.
    After(Duration, i32),
    /// The test seam: the tool kills itself with SIGKILL after N journal marks.
    Marks(u64),
}

/// One tool invocation.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub tool: &'static str,
    pub args: Vec<OsString>,
    pub launch: Launch,
    pub kill: Kill,
    /// Files of at least this many bytes keep a journal (the test knob).
    pub journal_min: u64,
    /// More environment for the tool (`SOURCE_DATE_EPOCH`, ...), passed through mpirun too.
    pub env: Vec<(&'static str, String)>,
}

/// What a run did.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stderr: Vec<u8>,
    /// The `--json` report, when one was printed.
    pub json: Option<serde_json::Value>,
    /// The run had to be killed after the time limit.
    pub hung: bool,
}

impl Outcome {
    /// Exit 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// A number of the `--json` report.
    pub fn count(&self, key: &str) -> Option<u64> {
        self.json.as_ref()?.get(key)?.as_u64()
    }

    /// The last lines of stderr, for a finding.
    pub fn tail(&self) -> String {
        let s = String::from_utf8_lossy(&self.stderr);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(6)..].join(" | ")
    }
}

impl Invocation {
    /// The command line, printable (for findings and the log).
    pub fn line(&self) -> String {
        let mut s = match self.launch {
            Launch::Ranks(n) => format!("mfu-rs {} --ranks {n}", self.tool),
            Launch::Mpirun(n) => format!("mpirun -np {n} mfu-rs {}", self.tool),
        };
        for a in &self.args {
            s.push(' ');
            s.push_str(&super::oracle::show(a.as_bytes()));
        }
        match self.kill {
            Kill::None => {}
            Kill::After(d, sig) => {
                s.push_str(&format!("  [signal {sig} after {} ms]", d.as_millis()))
            }
            Kill::Marks(n) => s.push_str(&format!("  [MFU_RS_TEST_KILL_AFTER_MARKS={n}]")),
        }
        for (k, v) in &self.env {
            s.push_str(&format!("  [{k}={v}]"));
        }
        s
    }

    /// Run it (at most `limit`), in `cwd`.
    pub fn run(&self, bin: &Path, cwd: &Path, limit: Duration) -> Outcome {
        let token = format!(
            "{}-{}",
            std::process::id(),
            TOKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut cmd = match self.launch {
            Launch::Ranks(n) => {
                let mut c = Command::new(bin);
                c.arg(self.tool).arg("--ranks").arg(n.to_string());
                c
            }
            Launch::Mpirun(n) => {
                let mut c = Command::new("mpirun");
                crate::mpi_env(&mut c);
                c.args([
                    "-np",
                    &n.to_string(),
                    "-x",
                    "MFU_TORTURE_TOKEN",
                    "-x",
                    "MFU_RS_TEST_JOURNAL_MIN_BYTES",
                ]);
                if matches!(self.kill, Kill::Marks(_)) {
                    c.args(["-x", "MFU_RS_TEST_KILL_AFTER_MARKS"]);
                }
                for (k, _) in &self.env {
                    c.args(["-x", k]);
                }
                c.arg(bin).arg(self.tool);
                c
            }
        };
        cmd.args(&self.args)
            .current_dir(cwd)
            .env("MFU_TORTURE_TOKEN", &token)
            .env(
                "MFU_RS_TEST_JOURNAL_MIN_BYTES",
                self.journal_min.to_string(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Kill::Marks(n) = self.kill {
            cmd.env("MFU_RS_TEST_KILL_AFTER_MARKS", n.to_string());
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Outcome {
                    code: Some(127),
                    stderr: format!("torture: start: {e}").into_bytes(),
                    json: None,
                    hung: false,
                }
            }
        };
        let pgid = child.id() as i32;
        // Drain the pipes in threads: a full pipe must not stall the tool.
        let mut so = child.stdout.take().expect("piped");
        let mut se = child.stderr.take().expect("piped");
        let to = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut so, &mut v);
            v
        });
        let te = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut se, &mut v);
            v
        });
        let start = Instant::now();
        let mut signalled = false;
        let mut hung = false;
        let status = loop {
            if let Ok(Some(st)) = child.try_wait() {
                break st;
            }
            let t = start.elapsed();
            if let Kill::After(d, sig) = self.kill {
                if !signalled && t >= d {
                    signalled = true;
                    // SAFETY: kill(2) on our own child's process group.
                    unsafe { libc::kill(-pgid, sig) };
                }
            }
            if t >= limit {
                hung = true;
                // SAFETY: as above.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        if signalled || hung || !status.success() {
            // Ranks that left the group (mpirun's): by the token in their environment.
            reap(
                &token,
                signalled && matches!(self.kill, Kill::After(_, libc::SIGTERM)),
            );
        }
        let stdout = to.join().unwrap_or_default();
        let stderr = te.join().unwrap_or_default();
        let json = std::str::from_utf8(&stdout)
            .ok()
            .and_then(|s| s.lines().rev().find(|l| l.starts_with('{')))
            .and_then(|l| serde_json::from_str(l).ok());
        Outcome {
            code: status.code(),
            stderr,
            json,
            hung,
        }
    }
}

static TOKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Kill (by pid) every process whose environment holds our token: ranks a launcher started
/// outside the group. After a SIGTERM they get a moment to stop by themselves.
fn reap(token: &str, gentle: bool) {
    let needle = format!("MFU_TORTURE_TOKEN={token}\0");
    let deadline = Instant::now() + Duration::from_secs(if gentle { 10 } else { 0 });
    loop {
        let pids = with_token(needle.as_bytes());
        if pids.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for p in pids {
                // SAFETY: kill(2) of a process we started (it carries our token).
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(50));
            if with_token(needle.as_bytes()).is_empty() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn with_token(needle: &[u8]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| p != me)
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle))
                // A zombie has no environment left to read; a state Z is gone already.
                && !std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
        })
        .collect()
}

/// `path` as an argument.
pub fn arg(path: &Path) -> OsString {
    path.as_os_str().to_owned()
}

/// `dir/` (a trailing slash: into this existing directory).
pub fn into(dir: &Path) -> OsString {
    let mut s = dir.as_os_str().to_owned();
    s.push("/");
    s
}
