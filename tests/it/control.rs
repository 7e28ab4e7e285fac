//! The control socket: stop, status and exec from outside the run, and a server that keeps
//! serving whatever its clients do.

use crate::harness::{self, alive, path_str, wait_until, Run, Running};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// An instance serving a control socket around a long `sleep`.
struct Instance {
    run: Running,
    sock: PathBuf,
    _dir: tempfile::TempDir,
}

impl Instance {
    fn start(extra: &[&str]) -> Instance {
        let dir = harness::tempdir();
        let sock = dir.path().join("ctl.sock");
        let mut args: Vec<String> = vec!["--control".into(), path_str(&sock)];
        args.extend(extra.iter().map(|s| s.to_string()));
        if !extra.contains(&"--") {
            args.extend(["--".into(), "sleep".into(), "1000".into()]);
        }
        let run = Run::new(&args).start();
        harness::wait_for_socket(&sock);
        Instance {
            run,
            sock,
            _dir: dir,
        }
    }

    fn sock(&self) -> String {
        path_str(&self.sock)
    }

    /// A client of this instance, for `args` = `[OP, ARGS...]`.
    fn client_run(&self, args: &[&str]) -> Run {
        client(&self.sock(), args)
    }

    fn client(&self, args: &[&str]) -> harness::Finished {
        self.client_run(args).finish()
    }

    /// Starts `vloer-run exec` of a shell that publishes its pid in `ready`, then becomes
    /// `sleep 1000`; returns the client and the exec's pid.
    fn exec_sleeper(&self, ready: &Path) -> (Running, i32) {
        let script = format!("echo $$ > {}; exec sleep 1000", path_str(ready));
        let client = self
            .client_run(&["exec", "--", "sh", "-c", &script])
            .start();
        let pid = harness::wait_for_line(ready).parse().unwrap();
        (client, pid)
    }

    fn status(&self) -> serde_json::Value {
        let out = self.client(&["status"]);
        assert_eq!(out.code(), Some(0), "{out}");
        serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("status is not JSON ({e}): {out}"))
    }

    fn stop(self) -> (harness::Finished, harness::Finished) {
        let client = self.client(&["stop", "--grace", "5s"]);
        (client, self.run.finish())
    }
}

/// `vloer-run OP --control SOCK ARGS...` for `args` = `[OP, ARGS...]`.
fn client(sock: &str, args: &[&str]) -> Run {
    let (op, rest) = args.split_first().expect("a client op");
    Run::new([op, "--control", sock].iter().chain(rest))
}

/// One request over a raw connection; returns the reply line.
fn raw(sock: &Path, request: &[u8]) -> String {
    let mut s = UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(harness::LIMIT)).unwrap();
    s.write_all(request).expect("write request");
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).expect("read reply");
    line
}

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn socket_is_private_and_removed_at_exit() {
    let inst = Instance::start(&[]);
    let mode = std::fs::metadata(&inst.sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let sock = inst.sock.clone();
    let (client, run) = inst.stop();
    assert_eq!(client.code(), Some(0), "{client}");
    assert!(!sock.exists(), "the socket outlived the run: {run}");
}

#[test]
fn socket_mode_ignores_a_permissive_umask() {
    let dir = harness::tempdir();
    let sock = dir.path().join("s");
    let script = format!(
        "umask 000; exec {} --control {} -- sleep 1000",
        harness::bin(),
        path_str(&sock)
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]);
    let running = Run::of(cmd).start();
    harness::wait_for_socket(&sock);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o} under umask 000");
    let out = Run::new(["stop", "--control", &path_str(&sock)]).finish();
    assert_eq!(out.code(), Some(0), "{out}");
    running.finish();
}

#[test]
fn a_live_socket_is_refused_and_a_stale_one_replaced() {
    let inst = Instance::start(&[]);
    let second = Run::new(["--control", &inst.sock(), "--", "true"]).finish();
    assert_eq!(second.code(), Some(125), "{second}");
    assert!(second.stderr.contains("another vloer-run"), "{second}");
    assert!(
        harness::parse_verdict(&second.stderr).is_none(),
        "nothing was started, so no verdict: {second}"
    );
    // The first instance still serves.
    assert_eq!(inst.status()["state"], "running");
    inst.stop();

    let dir = harness::tempdir();
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let out = Run::new(["--control", &path_str(&stale), "--", "true"]).finish();
    assert_eq!(out.code(), Some(0), "{out}");
    assert!(!stale.exists());

    let file = dir.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let out = Run::new(["--control", &path_str(&file), "--", "true"]).finish();
    assert_eq!(out.code(), Some(125), "{out}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "x",
        "a non-socket path must never be removed"
    );
}

#[test]
fn stop_reports_the_runs_own_verdict() {
    let inst = Instance::start(&[]);
    let (client, run) = inst.stop();
    assert_eq!(client.code(), Some(0), "{client}");
    let theirs: serde_json::Value =
        serde_json::from_str(client.stdout.trim()).expect("verdict on stdout");
    let ours = run.verdict();
    assert_eq!(theirs, ours, "client and run disagree\n{client}\n{run}");
    assert_eq!(ours["reason"], "control");
    assert_eq!(ours["stopped"], true);
    // sleep dies of the stop's own SIGTERM: a plain exit, not vloer-run's own death by it.
    assert_eq!((run.code(), run.signal()), (Some(143), None), "{run}");
}

#[test]
fn stop_client_exits_1_when_the_stop_is_not_confirmed() {
    if !harness::is_root()
        && harness::skip("needs root to make /proc unreadable in a mount namespace")
    {
        return;
    }
    let dir = harness::tempdir();
    let sock = dir.path().join("s");
    let Some(cmd) = harness::in_mount_ns(
        "mount -t tmpfs none /proc && exec \"$@\"",
        &[
            harness::bin(),
            "--control",
            &path_str(&sock),
            "--",
            "sleep",
            "1000",
        ],
    ) else {
        return;
    };
    let running = Run::of(cmd).start();
    harness::wait_for_socket(&sock);
    let out = Run::new(["stop", "--control", &path_str(&sock), "--grace", "100ms"]).finish();
    assert_eq!(out.code(), Some(1), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["stopped"], false);
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("/proc")),
        "{v}"
    );
    let run = running.finish();
    assert_eq!(run.code(), Some(125), "{run}");
}

#[test]
fn a_proc_mounted_over_after_the_start_changes_nothing() {
    // vloer-run proves /proc once and holds that mount open: what the child mounts over /proc
    // afterwards can neither blind its status nor keep its stop from being proven.
    if !harness::is_root() && harness::skip("needs root to mount over /proc in a mount namespace") {
        return;
    }
    let dir = harness::tempdir();
    let sock = dir.path().join("s");
    let (go, mounted) = (dir.path().join("go"), dir.path().join("mounted"));
    let script = format!(
        "until [ -e {go} ]; do sleep 0.02; done
        if mount -t tmpfs none /proc; then echo ok > {mounted}; else echo failed > {mounted}; fi
        exec sleep 1000",
        go = path_str(&go),
        mounted = path_str(&mounted)
    );
    let args = [
        harness::bin(),
        "--control",
        &path_str(&sock),
        "--",
        "sh",
        "-c",
        &script,
    ];
    let Some(cmd) = harness::in_mount_ns("exec \"$@\"", &args) else {
        return;
    };
    let running = Run::of(cmd).start();
    harness::wait_for_socket(&sock);
    std::fs::write(&go, "").unwrap();
    assert_eq!(
        harness::wait_for_line(&mounted),
        "ok",
        "mounting over /proc"
    );
    let sleeper = |out: &harness::Finished| {
        let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
        v["processes"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["cmdline"] == "sleep 1000"))
    };
    let mut status = client(&path_str(&sock), &["status"]).finish();
    harness::wait_until("the child to exec sleep", || {
        status = client(&path_str(&sock), &["status"]).finish();
        sleeper(&status)
    });
    assert_eq!(status.code(), Some(0), "{status}");
    let out = client(&path_str(&sock), &["stop", "--grace", "5s"]).finish();
    assert_eq!(out.code(), Some(0), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["stopped"], true, "{out}");
    let run = running.finish();
    assert!(run.verdict()["stopped"] == true, "{run}");
}

#[test]
fn stop_client_cannot_reach_a_missing_instance() {
    let dir = harness::tempdir();
    let nobody = path_str(&dir.path().join("nobody"));
    for args in [&["stop"][..], &["status"], &["exec", "--", "true"]] {
        let out = client(&nobody, args).finish();
        assert_eq!(out.code(), Some(125), "{out}");
        assert!(out.stderr.starts_with("vloer-run: "), "{out}");
        assert!(out.stdout.is_empty(), "{out}");
    }
}

#[test]
fn status_gives_each_process_its_own_command_line() {
    // Every process's cmdline is read in one batch by the reader thread: each must land on its
    // own pid. Four sleepers with four different arguments, the child last.
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let script = format!(
        "sleep 1001 & sleep 1002 & sleep 1003 & echo $$ > {}; exec sleep 1000",
        path_str(&ready)
    );
    let inst = Instance::start(&["--", "sh", "-c", &script]);
    let child: i32 = harness::wait_for_line(&ready).parse().unwrap();
    let mut st = serde_json::Value::Null;
    harness::wait_until("four sleepers in the status", || {
        st = inst.status();
        let procs = st["processes"].as_array().unwrap();
        procs.len() == 4 && procs.iter().all(|p| p["comm"] == "sleep")
    });
    let procs = st["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 4, "{st}");
    let mut seen = Vec::new();
    for p in procs {
        let pid = p["pid"].as_i64().unwrap();
        let own = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let own: Vec<String> = own
            .split(|c| *c == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(p["cmdline"], own.join(" "), "{st}");
        seen.push(p["cmdline"].as_str().unwrap().to_string());
    }
    seen.sort();
    assert_eq!(
        seen,
        ["sleep 1000", "sleep 1001", "sleep 1002", "sleep 1003"],
        "{st}"
    );
    assert!(
        procs
            .iter()
            .any(|p| p["pid"] == child && p["cmdline"] == "sleep 1000"),
        "{st}"
    );
    let _ = inst.stop();
}

#[test]
fn a_run_that_answered_a_status_still_ends_by_its_child_s_signal() {
    // The status started the /proc reader thread, which inherits vloer-run's mask (every signal
    // blocked): ending by the child's signal must not wait on it.
    let inst = Instance::start(&[]);
    let child = inst.status()["child"]["pid"].as_i64().unwrap() as i32;
    // SAFETY: kill with plain integers, to the child vloer-run has not reaped.
    unsafe { libc::kill(child, libc::SIGTERM) };
    let f = inst.run.finish();
    assert_eq!(f.signal(), Some(libc::SIGTERM), "{f}");
}

#[test]
fn status_keys_come_in_the_documented_order() {
    let inst = Instance::start(&[]);
    let dir = harness::tempdir();
    let (exec, _) = inst.exec_sleeper(&dir.path().join("ready"));
    let out = inst.client(&["status"]);
    let line = out.stdout.trim();
    // The manual's order: pid, child, processes, execs; and each part's own keys likewise.
    let keys = [
        r#"{"pid":"#,
        r#","child":{"pid":"#,
        r#","processes":[{"pid":"#,
        r#","execs":[{"pid":"#,
        r#","scope":"#,
    ];
    let at: Vec<Option<usize>> = keys.iter().map(|k| line.find(k)).collect();
    assert_eq!(at[0], Some(0), "{out}");
    assert!(
        at.windows(2)
            .all(|w| matches!(w, [Some(a), Some(b)] if a < b)),
        "the keys are not in the order {keys:?}: {out}"
    );
    let (_, run) = inst.stop();
    drop(exec.finish());
    assert_eq!(run.verdict()["stopped"], true, "{run}");
}

#[test]
fn status_lists_the_child_and_running_execs() {
    let inst = Instance::start(&[]);
    let dir = harness::tempdir();
    let (exec, exec_pid) = inst.exec_sleeper(&dir.path().join("ready"));
    let st = inst.status();
    assert_eq!(st["pid"], inst.run.pid());
    let child = st["child"]["pid"].as_i64().unwrap() as i32;
    assert_eq!(st["child"]["alive"], true);
    let procs = st["processes"].as_array().unwrap();
    assert!(
        procs
            .iter()
            .any(|p| p["pid"] == child && p["cmdline"] == "sleep 1000"),
        "{st}"
    );
    assert!(
        procs.iter().any(|p| p["pid"] == exec_pid),
        "exec not among processes: {st}"
    );
    let execs = st["execs"].as_array().unwrap();
    assert_eq!(execs.len(), 1, "{st}");
    assert_eq!(execs[0]["pid"], exec_pid);
    assert_eq!(execs[0]["argv"][0], "sh");
    let (_, run) = inst.stop();
    let exec = exec.finish();
    // The client ends as its command did, by SIGTERM.
    assert_eq!(
        exec.signal(),
        Some(libc::SIGTERM),
        "the exec was stopped with the run: {exec}"
    );
    assert!(!alive(exec_pid));
    assert_eq!(run.verdict()["stopped"], true);
}

#[test]
fn an_exec_of_a_script_without_a_shebang_runs_under_sh() {
    // The client's PATH finds it; its stdio reaches the script, started a second time by sh.
    let inst = Instance::start(&[]);
    let dir = harness::tempdir();
    let script = dir.path().join("no-shebang");
    harness::write_file(
        &script,
        "echo \"ran: $0 $1\"; echo err >&2; exit 5\n",
        0o755,
    );
    let out = inst
        .client_run(&["exec", "--", "no-shebang", "arg"])
        .env("PATH", &format!("/nonexistent:{}", path_str(dir.path())))
        .finish();
    assert_eq!(out.code(), Some(5), "{out}");
    assert_eq!(
        out.stdout.trim(),
        format!("ran: {} arg", path_str(&script)),
        "{out}"
    );
    assert!(out.stderr.contains("err"), "{out}");
    inst.stop();
}

#[test]
fn exec_output_status_and_parentage() {
    let inst = Instance::start(&[]);
    let dir = harness::tempdir();
    let out = inst
        .client_run(&[
            "exec",
            "--",
            "sh",
            "-c",
            "echo out:$PPID; echo err >&2; pwd; echo env:$VLOER_TEST_MARK; exit 7",
        ])
        .env("VLOER_TEST_MARK", "marked")
        .current_dir(dir.path())
        .finish();
    assert_eq!(out.code(), Some(7), "{out}");
    assert!(
        out.stdout.contains(&format!("out:{}", inst.run.pid())),
        "the exec's parent is the instance: {out}"
    );
    assert!(out.stderr.contains("err"), "{out}");
    assert!(
        out.stdout
            .contains(&path_str(&dir.path().canonicalize().unwrap())),
        "cwd passed: {out}"
    );
    assert!(
        out.stdout.contains("env:marked"),
        "environment passed: {out}"
    );
    let signalled = inst.client(&["exec", "--", "sh", "-c", "kill -USR1 $$"]);
    assert_eq!(signalled.signal(), Some(libc::SIGUSR1), "{signalled}");
    let missing = inst.client(&["exec", "--", "/nonexistent/cmd"]);
    assert_eq!(missing.code(), Some(127), "{missing}");
    inst.stop();
}

#[test]
fn an_exec_whose_descendant_drops_the_exec_marker_is_never_called_stopped() {
    // Anything that clears the environment (env -i, sudo) takes the marker away; the orphan
    // that vloer-run then adopts cannot be told from any other, so the exec is not stopped and
    // its stop neither signals it nor says stopped. The run's own stop ends it.
    for round in 0..10 {
        let inst = Instance::start(&[]);
        let dir = harness::tempdir();
        let pidfile = dir.path().join("orphan");
        // Dropped, or changed to another exec's: neither tells where the orphan came from.
        let env = match round % 2 {
            0 => "env -u VLOER_EXEC_ID",
            _ => r#"env VLOER_EXEC_ID="${VLOER_EXEC_ID%:*}:999""#,
        };
        let script = format!(
            r#"{env} setsid sh -c 'sleep 9003 & echo $! > {p}; exit 0'; sleep 0.2"#,
            p = path_str(&pidfile)
        );
        let out = inst.client(&["exec", "--", "sh", "-c", &script]);
        let orphan: i32 = harness::wait_for_line(&pidfile).parse().unwrap();
        let alive_then = alive(orphan);
        let again = inst.client(&["exec", "--", "true"]);
        let (_, run) = inst.stop();
        assert!(
            alive_then,
            "round {round}: the orphan died before the check: {out}"
        );
        assert_eq!(
            out.code(),
            Some(125),
            "round {round}: an exec whose orphan runs on was called stopped: {out}"
        );
        assert!(out.stderr.contains("cannot tell"), "round {round}: {out}");
        assert_ne!(
            again.code(),
            Some(0),
            "round {round}: a new exec was accepted: {again}"
        );
        // The run's verdict carries the exec's unconfirmed stop; its own stop ends the orphan.
        assert_eq!(
            run.verdict()["survivors"],
            serde_json::json!([]),
            "round {round}: {run}"
        );
        assert!(
            harness::wait_gone(orphan, harness::LIMIT),
            "round {round}: the run's stop left {orphan}"
        );
    }
}

#[test]
fn exec_timeout_gives_124_and_its_tree_is_gone() {
    let inst = Instance::start(&[]);
    let dir = harness::tempdir();
    let pids = dir.path().join("pids");
    let script = format!("trap '' TERM; sleep 1000 & echo $! > {p}.1; (setsid sleep 1000 & echo $! > {p}.2); echo $$ > {p}; wait", p = path_str(&pids));
    let started = Instant::now();
    let out = inst.client(&["exec", "--timeout", "1s", "--", "sh", "-c", &script]);
    assert_eq!(out.code(), Some(124), "{out}");
    for suffix in ["", ".1", ".2"] {
        let pid: i32 = std::fs::read_to_string(format!("{}{suffix}", path_str(&pids)))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            !alive(pid),
            "pid {pid} of the exec's tree outlived its timeout"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    // The run itself is untouched.
    assert_eq!(inst.status()["state"], "running");
    let (_, run) = inst.stop();
    assert!(
        run.verdict()["sent"]["SIGKILL"].as_u64().unwrap_or(0) >= 1,
        "the exec's TERM-ignoring shell was killed: {run}"
    );
}

#[test]
fn killing_the_exec_client_stops_the_exec() {
    let inst = Instance::start(&[]);
    let _watch = harness::ps_on_stall(Duration::from_secs(20));
    for sig in [libc::SIGKILL, libc::SIGINT, libc::SIGTERM] {
        let dir = harness::tempdir();
        let (client, pid) = inst.exec_sleeper(&dir.path().join("ready"));
        assert!(alive(pid));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(client.pid()),
            nix::sys::signal::Signal::try_from(sig).unwrap(),
        )
        .unwrap();
        let out = client.finish();
        wait_until(
            &format!("exec {pid} to go after signal {sig} to its client"),
            || !alive(pid),
        );
        if sig != libc::SIGKILL {
            // The exec got the client's signal first (then the stop's TERM), died of it, and the
            // client ends the same way.
            assert_eq!(
                out.signal(),
                Some(sig),
                "the client reports the exec's end: {out}"
            );
        }
        assert!(inst.status()["execs"].as_array().unwrap().is_empty());
    }
    inst.stop();
}

#[test]
fn an_exec_whose_client_cannot_read_its_reply_still_ends_with_the_client() {
    // The client stops reading before the exec's first reply is written (as a client killed
    // at that moment does): the write fails, and the client's hang-up must still stop the exec.
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    use std::os::fd::{AsRawFd, OwnedFd};
    let inst = Instance::start(&[]);
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let script = format!("echo $$ > {}; exec sleep 1000", path_str(&ready));
    let request = serde_json::json!({
        "op": "exec",
        "argv": ["sh", "-c", script],
        "cwd": "/",
        "env": [["PATH", std::env::var("PATH").unwrap_or_default()]],
    })
    .to_string()
        + "\n";
    let devnull: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    let fds = [devnull.as_raw_fd(); 3];
    let client = UnixStream::connect(&inst.sock).expect("connect");
    client.shutdown(std::net::Shutdown::Read).expect("shutdown");
    sendmsg::<()>(
        client.as_raw_fd(),
        &[std::io::IoSlice::new(request.as_bytes())],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .expect("sendmsg");
    let pid: i32 = harness::wait_for_line(&ready).parse().unwrap();
    drop(client);
    wait_until(&format!("exec {pid} to go with its client"), || !alive(pid));
    assert!(inst.status()["execs"].as_array().unwrap().is_empty());
    inst.stop();
}

#[test]
fn the_main_childs_exit_stops_a_running_exec() {
    let dir = harness::tempdir();
    let go = dir.path().join("go");
    let ready = dir.path().join("ready");
    let main_script = format!("while [ ! -e {} ]; do sleep 0.05; done", path_str(&go));
    let inst = Instance::start(&["--", "sh", "-c", &main_script]);
    let (client, pid) = inst.exec_sleeper(&ready);
    std::fs::write(&go, "").unwrap();
    let out = client.finish();
    assert_eq!(out.signal(), Some(libc::SIGTERM), "{out}");
    assert!(!alive(pid));
    let run = inst.run.finish();
    assert_eq!(run.code(), Some(0), "{run}");
    assert_eq!(run.verdict()["stopped"], true);
    assert_eq!(run.verdict()["reason"], "child_exited");
}

#[test]
fn a_peer_with_another_uid_is_refused() {
    if !harness::is_root() && harness::skip("needs root to run a client as another uid (setpriv)") {
        return;
    }
    if which("setpriv").is_none() && harness::skip("setpriv is not installed") {
        return;
    }
    let inst = Instance::start(&[]);
    // Open the path so that the uid check itself, not the file mode, is what refuses.
    std::fs::set_permissions(inst._dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&inst.sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let as_nobody =
        |op: &str| Run::via(&harness::AS_NOBODY, [op, "--control", &inst.sock()]).finish();
    let out = as_nobody("status");
    assert_eq!(out.code(), Some(125), "{out}");
    assert!(out.stderr.contains("forbidden"), "{out}");
    assert!(out.stdout.is_empty(), "{out}");
    let out = as_nobody("stop");
    assert_eq!(out.code(), Some(125), "{out}");
    assert_eq!(
        inst.status()["state"],
        "running",
        "a refused stop changed nothing"
    );
    let (_, run) = inst.stop();
    assert!(
        run.stderr.contains("refused a client with uid 65534"),
        "a log line names the refused peer: {run}"
    );
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

#[test]
fn bad_clients_get_errors_while_others_are_served() {
    let inst = Instance::start(&[]);
    let sock = inst.sock.clone();
    // A silent client holds a connection open for the whole test.
    let silent = UnixStream::connect(&sock).unwrap();
    silent.set_read_timeout(Some(harness::LIMIT)).unwrap();
    let malformed = raw(&sock, b"{not json\n");
    assert!(
        malformed.contains("\"code\":\"bad_request\""),
        "{malformed}"
    );
    let unknown = raw(&sock, b"{\"op\":\"reboot\"}\n");
    assert!(unknown.contains("\"code\":\"unknown_op\""), "{unknown}");
    let mut big = vec![b'x'; 1024 * 1024];
    big.push(b'\n');
    let huge = {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.set_read_timeout(Some(harness::LIMIT)).unwrap();
        // The server may close before reading it all; what counts is the reply.
        let _ = s.write_all(&big);
        let mut line = String::new();
        let _ = BufReader::new(s).read_line(&mut line);
        line
    };
    assert!(huge.contains("\"code\":\"too_large\""), "{huge}");
    // While the silent client waits, status still answers.
    assert_eq!(inst.status()["state"], "running");
    let started = Instant::now();
    let mut reply = String::new();
    BufReader::new(&silent).read_line(&mut reply).unwrap();
    assert!(reply.contains("\"code\":\"timeout\""), "{reply}");
    assert!(started.elapsed() < Duration::from_secs(30));
    inst.stop();
}

#[test]
fn a_hundred_concurrent_status_requests_all_answer() {
    let inst = Instance::start(&[]);
    let pid = inst.run.pid();
    // One answered request proves start-up (child spawned, its pidfd open) is over.
    inst.status();
    let before = open_fds(pid);
    let sock = inst.sock.clone();
    let threads: Vec<_> = (0..100)
        .map(|_| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(&sock).expect("connect");
                s.set_read_timeout(Some(harness::LIMIT)).unwrap();
                s.write_all(b"{\"op\":\"status\"}\n").unwrap();
                let mut reply = String::new();
                s.read_to_string(&mut reply).unwrap();
                reply
            })
        })
        .collect();
    for t in threads {
        let reply = t.join().unwrap();
        let v: serde_json::Value =
            serde_json::from_str(reply.trim()).unwrap_or_else(|e| panic!("{e}: {reply}"));
        assert_eq!(v["pid"], pid);
    }
    wait_until(
        "vloer-run's descriptors to return to where they were",
        || open_fds(pid) == before,
    );
    inst.stop();
}

#[test]
fn new_execs_are_refused_while_stopping() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let script = format!(
        "trap 'echo term' TERM; echo $$ > {}; while :; do sleep 0.05; done",
        path_str(&ready)
    );
    let inst = Instance::start(&["--grace", "30s", "--", "sh", "-c", &script]);
    let pid: i32 = harness::wait_for_line(&ready).parse().unwrap();
    let stopper = inst.client_run(&["stop"]).start();
    wait_until("the stop to begin", || inst.status()["state"] == "stopping");
    let refused = inst.client(&["exec", "--", "true"]);
    assert_eq!(refused.code(), Some(125), "{refused}");
    assert!(refused.stderr.contains("stopping"), "{refused}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let out = stopper.finish();
    assert_eq!(out.code(), Some(0), "{out}");
    inst.run.finish();
}
