//! `mfu-rs parallel` end to end: every command runs exactly once (thread ranks and mpirun),
//! `--resume` and `--resume-failed` with a joblog, failures named, each command's output
//! whole, templates over odd names, and a stop by SIGINT.

use mfu_tests::{signal_when, Tool};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How many times each line occurs in `file`.
fn counts(file: &Path) -> BTreeMap<String, usize> {
    let mut c = BTreeMap::new();
    for line in fs::read_to_string(file).unwrap_or_default().lines() {
        *c.entry(line.to_string()).or_insert(0) += 1;
    }
    c
}

/// Commands `echo N >> LOG` for N in `range`, one per line.
fn appenders(log: &Path, range: std::ops::Range<usize>) -> String {
    range
        .map(|n| format!("echo {n} >> '{}'\n", log.display()))
        .collect()
}

#[test]
fn each_command_runs_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let setups = [
        ("1", Tool::new("parallel")),
        ("r2", Tool::new("parallel").ranks(2)),
        ("r4", Tool::new("parallel").ranks(4).arg("-j3")),
        ("mpi2", Tool::new("parallel").mpi(2).arg("-j2")),
    ];
    for (name, tool) in setups {
        // Commands one per line, from a file and from stdin.
        let log = dir.path().join(format!("{name}.log"));
        let cmds = dir.path().join(format!("{name}.cmds"));
        fs::write(&cmds, appenders(&log, 0..60)).unwrap();
        tool.clone().arg("-a").arg(&cmds).expect(0);
        let stdin_log = dir.path().join(format!("{name}.stdin.log"));
        tool.clone().stdin(appenders(&stdin_log, 0..25)).expect(0);
        // A template over a list.
        let list = dir.path().join(format!("{name}.list"));
        let names: String = (0..30)
            .map(|n| format!("/no/such/dir/f{n}.txt\n"))
            .collect();
        fs::write(&list, names).unwrap();
        let tlog = dir.path().join(format!("{name}.tlog"));
        let append = format!(">> '{}'", tlog.display());
        tool.clone()
            .arg("-i")
            .arg(&list)
            .args(["echo", "{/.}", &append])
            .expect(0);
        for (log, n, prefix) in [(&log, 60, ""), (&stdin_log, 25, ""), (&tlog, 30, "f")] {
            let want: BTreeMap<String, usize> =
                (0..n).map(|i| (format!("{prefix}{i}"), 1)).collect();
            assert_eq!(counts(log), want, "{name}: {}", log.display());
        }
    }
}

#[test]
fn resume_skips_what_the_joblog_records() {
    let dir = tempfile::tempdir().unwrap();
    let (log, joblog, flag) = (
        dir.path().join("log"),
        dir.path().join("joblog"),
        dir.path().join("flag"),
    );
    let mut cmds = appenders(&log, 0..10);
    // Command 11 fails until the flag exists.
    cmds.push_str(&format!(
        "echo again >> '{}'; test -e '{}'\n",
        log.display(),
        flag.display()
    ));
    let file = dir.path().join("cmds");
    fs::write(&file, &cmds).unwrap();
    let run = |extra: &[&str], code| {
        Tool::new("parallel")
            .ranks(2)
            .arg("-a")
            .arg(&file)
            .arg("--joblog")
            .arg(&joblog)
            .args(extra)
            .expect(code)
    };
    run(&[], 1);
    let text = fs::read_to_string(&joblog).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.splitn(9, '\t').collect()).collect();
    assert_eq!(rows.len(), 11);
    let failed: Vec<&Vec<&str>> = rows.iter().filter(|r| r[6] != "0").collect();
    assert_eq!(failed.len(), 1);
    assert_eq!((failed[0][0], failed[0][6]), ("11", "1"));
    // Everything is recorded: --resume runs nothing.
    fs::write(&flag, b"").unwrap();
    run(&["--resume"], 0);
    assert_eq!(counts(&log).values().sum::<usize>(), 11);
    // --resume-failed runs the failed one again, and only it.
    run(&["--resume-failed"], 0);
    let c = counts(&log);
    assert_eq!(c["again"], 2);
    assert!((0..10).all(|n| c[&n.to_string()] == 1), "{c:?}");
    // A run without --resume starts the log anew.
    run(&[], 0);
    assert_eq!(fs::read_to_string(&joblog).unwrap().lines().count(), 12);
}

#[test]
fn failing_commands_exit_1_and_are_named() {
    for tool in [Tool::new("parallel"), Tool::new("parallel").mpi(2)] {
        let out = tool
            .stdin("true\nexit 3\nkill -9 $$\necho fine\n/no/such/program\n")
            .expect(1);
        let err = out.stderr_str();
        assert!(err.contains("command exit 3: exit status 3"), "{err}");
        assert!(
            err.contains("command kill -9 $$: killed by signal 9"),
            "{err}"
        );
        assert!(
            err.contains("command /no/such/program: exit status 127"),
            "{err}"
        );
        assert!(
            !err.contains("command true") && !err.contains("command echo"),
            "{err}"
        );
        assert_eq!(out.stdout_str(), "fine\n");
    }
}

#[test]
fn each_commands_output_is_whole() {
    // Each command writes 50 lines with pauses between, so that commands overlap.
    let cmds: String = (0..12)
        .map(|j| format!("for i in $(seq 50); do echo job{j}-$i; if [ $i = 25 ]; then sleep 0.05; fi; done\n"))
        .collect();
    let setups = [
        Tool::new("parallel").ranks(2).arg("-j3"),
        Tool::new("parallel").mpi(2).arg("-j3"),
        Tool::new("parallel").ranks(2).args(["-j3", "--keep-order"]),
    ];
    for (n, tool) in setups.into_iter().enumerate() {
        let out = tool.stdin(cmds.clone()).expect(0).stdout_str();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 12 * 50);
        let mut order = Vec::new();
        for block in lines.chunks(50) {
            let job = block[0].split('-').next().unwrap();
            let want: Vec<String> = (1..=50).map(|i| format!("{job}-{i}")).collect();
            assert_eq!(block, want, "setup {n}: output of {job} not whole");
            order.push(job.to_string());
        }
        if n == 2 {
            let want: Vec<String> = (0..12).map(|j| format!("job{j}")).collect();
            assert_eq!(order, want, "--keep-order");
        }
    }
}

#[test]
fn templates_quote_odd_names() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().as_os_str().as_bytes();
    let names: [&[u8]; 6] = [
        b"a b.txt",
        b"it's.c",
        b"\xff\xfe.x",
        b"$(touch pwned).sh",
        b"x;y",
        b"plain",
    ];
    let mut list = Vec::new();
    for n in names {
        list.extend_from_slice(base);
        list.push(b'/');
        list.extend_from_slice(n);
        list.push(b'\n');
    }
    let file = dir.path().join("list");
    fs::write(&file, &list).unwrap();
    for tool in [Tool::new("parallel").ranks(2), Tool::new("parallel").mpi(2)] {
        let out = tool
            .current_dir(dir.path())
            .arg("--keep-order")
            .arg("-i")
            .arg(&file)
            .args(["printf", "'%s\\0'", "{}", "{/}", "{.}", "{//}", "{/.}"])
            .expect(0);
        let mut want = Vec::new();
        for n in names {
            let path = [base, b"/", n].concat();
            let stem = match n.iter().rposition(|&b| b == b'.') {
                Some(i) if i > 0 => &n[..i],
                _ => n,
            };
            for v in [&path[..], n, &[base, b"/", stem].concat(), base, stem] {
                want.extend_from_slice(v);
                want.push(0);
            }
        }
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&want)
        );
        assert_eq!(out.stdout, want);
        assert!(
            !dir.path().join("pwned").exists(),
            "a name ran as a command"
        );
    }
}

#[test]
fn sigint_stops_handing_out_commands_and_waits_for_running_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (log, joblog) = (dir.path().join("log"), dir.path().join("joblog"));
    let cmds: String = (0..40)
        .map(|n| format!("sleep 0.3; echo {n} >> '{}'\n", log.display()))
        .collect();
    let file = dir.path().join("cmds");
    fs::write(&file, cmds).unwrap();
    let mut cmd = Tool::new("parallel")
        .args(["-j2", "-a"])
        .arg(&file)
        .arg("--joblog")
        .arg(&joblog)
        .command();
    let out = signal_when(&mut cmd, rustix::process::Signal::INT, || log.exists());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("interrupted by a signal"), "{err}");
    let ran = counts(&log);
    assert!(ran.len() < 40 && ran.values().all(|&n| n == 1), "{ran:?}");
    // Every command that started finished and was logged.
    let logged = fs::read_to_string(&joblog).unwrap().lines().count() - 1;
    assert_eq!(logged, ran.len(), "{err}");
}

/// The joblog's rows as (Seq, Starttime, Command), in file order.
fn joblog_rows(joblog: &Path) -> Vec<(u64, f64, String)> {
    fs::read_to_string(joblog)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.splitn(9, '\t').collect();
            (
                f[0].parse().unwrap(),
                f[2].parse().unwrap(),
                f[8].to_string(),
            )
        })
        .collect()
}

#[test]
fn jobs_run_in_input_order_at_j1() {
    let dir = tempfile::tempdir().unwrap();
    // At -j 1 on one rank: strictly one after the other, in input order, so that a command
    // may rely on the one before (cp, then rm of the original).
    let log = dir.path().join("log");
    let mut cmds = format!("echo data > '{}/important'\n", dir.path().display());
    cmds.push_str(&format!(
        "cp '{0}/important' '{0}/backup'\nrm '{0}/important'\n",
        dir.path().display()
    ));
    cmds.push_str(&appenders(&log, 1..13));
    Tool::new("parallel").arg("-j1").stdin(cmds).expect(0);
    assert_eq!(fs::read(dir.path().join("backup")).unwrap(), b"data\n");
    assert!(!dir.path().join("important").exists());
    let order: Vec<String> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let want: Vec<String> = (1..13).map(|n| n.to_string()).collect();
    assert_eq!(order, want, "-j1 ran out of order");
}

#[test]
fn jobs_start_in_input_order_over_ranks() {
    let dir = tempfile::tempdir().unwrap();
    // At -j N over ranks (threads and processes), jobs start in input order: the joblog's
    // start times do not go down as Seq goes up.
    let cmds: String = (0..24).map(|n| format!("sleep 0.0{}\n", n % 5)).collect();
    let setups = [
        ("r3", Tool::new("parallel").ranks(3).arg("-j2")),
        ("mpi2", Tool::new("parallel").mpi(2).arg("-j2")),
    ];
    for (name, tool) in setups {
        let joblog = dir.path().join(format!("{name}.joblog"));
        tool.arg("--joblog")
            .arg(&joblog)
            .stdin(cmds.clone())
            .expect(0);
        let mut rows = joblog_rows(&joblog);
        assert_eq!(rows.len(), 24, "{name}");
        rows.sort_by_key(|r| r.0);
        for w in rows.windows(2) {
            assert!(
                w[0].1 <= w[1].1,
                "{name}: job {} started before job {}",
                w[1].0,
                w[0].0
            );
        }
    }
}

#[test]
fn resume_goes_by_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let (log, joblog) = (dir.path().join("log"), dir.path().join("joblog"));
    let cmd = format!("echo x >> '{}'", log.display());
    let cmds = format!("{cmd}\n").repeat(6);
    // What a run killed (-9) after two of six identical commands leaves.
    let row = |seq| format!("{seq}\t:\t1.000\t0.010\t0\t0\t0\t0\t{cmd}\n");
    let header = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n";
    fs::write(&joblog, format!("{header}{}{}", row(1), row(2))).unwrap();
    let resume = |tool: Tool| {
        tool.arg("--joblog")
            .arg(&joblog)
            .arg("--resume")
            .stdin(cmds.clone())
    };
    resume(Tool::new("parallel").ranks(2)).expect(0);
    assert_eq!(counts(&log).get("x"), Some(&4), "the other four run");
    let mut seqs: Vec<u64> = joblog_rows(&joblog).iter().map(|r| r.0).collect();
    seqs.sort();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    // Everything is logged now: nothing runs again.
    resume(Tool::new("parallel")).expect(0);
    assert_eq!(counts(&log).get("x"), Some(&4));
    // A joblog of another input (Seq 2 was another command) is refused, nothing run.
    fs::write(
        &joblog,
        format!(
            "{header}{}2\t:\t1.000\t0.010\t0\t0\t0\t0\techo other\n",
            row(1)
        ),
    )
    .unwrap();
    let out = resume(Tool::new("parallel")).run();
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr_str().contains("the log is of another input"),
        "{}",
        out.stderr_str()
    );
    assert_eq!(counts(&log).get("x"), Some(&4));
}

#[test]
fn a_second_sigterm_kills_the_running_commands() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // Each command starts a grandchild in the background and waits for it: both must die.
    let needle = format!("sleep 47.{}", std::process::id());
    let cmds: String = (0..6)
        .map(|_| format!("{needle} & echo $! >> '{}'; wait\n", pids.display()))
        .collect();
    let mut cmd = Tool::new("parallel").arg("-j3").command();
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(cmds.as_bytes())
            .unwrap();
    }
    let start = std::time::Instant::now();
    while fs::read_to_string(&pids)
        .unwrap_or_default()
        .lines()
        .count()
        < 3
    {
        assert!(start.elapsed().as_secs() < 60, "the commands did not start");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    // Later than the same stop delivered twice (steal::signals::SAME_STOP_WITHIN).
    std::thread::sleep(std::time::Duration::from_millis(1300));
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SIGKILL is delivered at once, but let the kernel finish the exits.
    let mut left = mfu_tests::processes_mentioning(needle.as_bytes());
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = mfu_tests::processes_mentioning(needle.as_bytes());
    }
    assert!(left.is_empty(), "commands left running: {left:?}");
}

#[test]
fn a_joblog_cut_mid_line_resumes_and_stays_readable() {
    // A crash or a full disk can leave the joblog's last line cut (no newline). --resume does
    // not count it (its command runs again), and its own lines must not continue the cut one:
    // a merged line hid the next command's record and made every later --resume refuse the
    // log as "of another input" (or run commands again).
    let dir = tempfile::tempdir().unwrap();
    let (log, joblog) = (dir.path().join("log"), dir.path().join("joblog"));
    let cmds: String = (1..=4)
        .map(|n| format!("echo {n} >> '{}'\n", log.display()))
        .collect();
    let row = |seq: u64| {
        format!(
            "{seq}\t:\t1.000\t0.010\t0\t0\t0\t0\techo {seq} >> '{}'\n",
            log.display()
        )
    };
    let header = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n";
    let resume = || {
        Tool::new("parallel")
            .arg("-j1")
            .arg("--joblog")
            .arg(&joblog)
            .arg("--resume")
            .stdin(cmds.clone())
    };
    // Cut inside a row (after its start time's first digits), and inside the header.
    for cut in [
        format!("{header}{}2\t:\t1.0", row(1)),
        "Seq\tHo".to_string(),
    ] {
        fs::write(&joblog, &cut).unwrap();
        let _ = fs::remove_file(&log);
        resume().expect(0);
        let ran = counts(&log);
        let first = if cut.starts_with(header) { 2 } else { 1 };
        for n in 1..=4 {
            let want = usize::from(n >= first);
            assert_eq!(
                ran.get(&n.to_string()).copied().unwrap_or(0),
                want,
                "command {n} after a joblog cut as {cut:?}: {ran:?}"
            );
        }
        let text = fs::read_to_string(&joblog).unwrap();
        assert!(text.starts_with(header), "{text:?}");
        let mut seqs: Vec<u64> = joblog_rows(&joblog).iter().map(|r| r.0).collect();
        seqs.sort();
        assert_eq!(seqs, [1, 2, 3, 4], "{text:?}");
        // The log is whole: a second resume reads it and runs nothing again.
        resume().expect(0);
        assert_eq!(counts(&log), ran, "nothing runs twice");
    }
}

/// True while `pid` is a live process (a zombie nobody reaped is not: it runs nothing).
fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold anything.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// With `tool` (`parallel` and how it is launched), start commands that each write their
/// background sleep's pid to a file and wait for it; once `running` of them run, `strike` the
/// run (given the pid of the process started, mpirun or the tool, and the needle naming the
/// ranks); then within a few seconds no sleep lives on. Returns the exit status and stderr,
/// how many commands started, and the joblog's rows.
fn no_command_outlives_its_rank(
    tool: Tool,
    running: usize,
    strike: impl Fn(i32, &[u8]),
) -> (Option<i32>, String, usize, Vec<String>) {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let (pids, file) = (dir.path().join("pids"), dir.path().join("the cmds"));
    let cmds: String = (0..8)
        .map(|n| format!("sleep 300 & echo $! >> '{}'; wait # {n}\n", pids.display()))
        .collect();
    fs::write(&file, cmds).unwrap();
    let mut cmd = tool
        .arg("-a")
        .arg(&file)
        .arg("--joblog")
        .arg(dir.path().join("joblog"))
        .command();
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let read_pids = || -> Vec<i32> {
        fs::read_to_string(&pids)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let start = Instant::now();
    while read_pids().len() < running {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before the commands started"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the commands did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    strike(child.id() as i32, file.as_os_str().as_bytes());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let started = read_pids();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left: Vec<i32> = started.iter().copied().filter(|&p| alive(p)).collect();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left.retain(|&p| alive(p));
    }
    for &p in &left {
        // Do not leave them behind for the other tests, whatever the verdict.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(p).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(
        left.is_empty(),
        "commands outlived their ranks: {left:?} of {started:?}\n{err}"
    );
    let rows = fs::read_to_string(dir.path().join("joblog"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect();
    (out.status.code(), err, started.len(), rows)
}

#[test]
fn sigterm_to_mpirun_leaves_no_command_running() {
    let tool = Tool::new("parallel").mpi(2).arg("-j2");
    let (code, err, started, rows) = no_command_outlives_its_rank(tool, 4, |mpirun, _| {
        let pid = rustix::process::Pid::from_raw(mpirun).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    });
    assert_eq!(code, Some(1), "{err}");
    // Each rank had the second mpirun gives it before SIGKILL (odls_base_sigkill_timeout): it
    // stopped its commands, logged their ends and said so. (Rank 0's summary, which waits for
    // the other rank, is not asserted: on a loaded machine the SIGKILL may come first.)
    assert!(err.contains("under a launcher"), "{err}");
    assert_eq!(rows.len(), started, "{rows:?}\n{err}");
    assert!(
        rows.iter().all(|r| {
            let signal = r.split('\t').nth(7).unwrap_or_default();
            signal == "15" || signal == "9"
        }),
        "{rows:?}"
    );
}

#[test]
fn sigkill_of_one_rank_leaves_no_command_running() {
    let tool = Tool::new("parallel").mpi(2).arg("-j2");
    let (code, err, _, _) = no_command_outlives_its_rank(tool, 4, |mpirun, needle| {
        // The ranks are mpirun's children (each rank's supervisor names the same file).
        let parent = |p: i32| {
            fs::read_to_string(format!("/proc/{p}/status"))
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("PPid:").map(|v| v.trim().parse::<i32>()))
                .and_then(Result::ok)
        };
        let ranks: Vec<i32> = mfu_tests::processes_mentioning(needle)
            .into_iter()
            .filter(|&p| p != mpirun && parent(p) == Some(mpirun))
            .collect();
        assert!(!ranks.is_empty(), "no rank process found");
        let pid = rustix::process::Pid::from_raw(ranks[0]).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    });
    assert_ne!(code, Some(0), "{err}");
}

#[test]
fn sigkill_of_parallel_without_a_launcher_leaves_no_command_running() {
    let tool = Tool::new("parallel").arg("-j3");
    let (code, err, _, _) = no_command_outlives_its_rank(tool, 3, |parallel, _| {
        let pid = rustix::process::Pid::from_raw(parallel).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    });
    assert_eq!(code, None, "killed by a signal: {err}");
}
