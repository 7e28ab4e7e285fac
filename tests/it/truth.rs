//! No lie, no silence, no hang: each way the verdict could say true while the run
//! lives, vloer-run could end with no verdict, or never end, reproduced for real.

use crate::harness::{self, recorded, Adopted, Run, AS_NOBODY};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `sh -c SCRIPT` under vloer-run with `flags`; the script sees `$H` (the helper) and `$D`.
fn sh_run(flags: &[&str], dir: &Path, script: &str) -> Run {
    let args: Vec<&str> = flags
        .iter()
        .copied()
        .chain(["--", "sh", "-c", script])
        .collect();
    Run::new(args)
        .env("H", harness::helper())
        .env("D", &harness::path_str(dir))
}

/// Waits for the `record` helper's first line, `ready PID`.
fn wait_recorder(out: &Path) {
    harness::wait_until("the recorder to be ready", || {
        std::fs::read_to_string(out).is_ok_and(|t| t.starts_with("ready "))
    });
}

fn touch(path: &Path) {
    std::fs::write(path, b"").expect("touch");
}

/// A directory uid 65534 may write into (sockets, pid files).
fn open_dir() -> tempfile::TempDir {
    let dir = harness::tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    dir
}

#[test]
fn a_process_whose_main_thread_exited_is_stopped_with_its_children() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let go = dir.path().join("go");
    let run = sh_run(
        &["--grace", "500ms", "--kill-timeout", "5s"],
        dir.path(),
        r#"$H pthread-exit "$D/ready" & while [ ! -e "$D/go" ]; do sleep 0.02; done; exit 0"#,
    )
    .start();
    let pids = harness::wait_for_pids(&ready);
    let (leader, grandchild) = (pids[0], pids[1]);
    let mut adopted = Adopted::ours(dir.path());
    adopted.add(grandchild);
    harness::wait_until(
        "the main thread to exit (state Z with a live thread)",
        || harness::state(leader) == Some('Z'),
    );
    touch(&go);
    let f = run.finish();
    let v = f.verdict();
    assert!(
        !harness::alive(leader) && !harness::alive(grandchild),
        "the process (Z, threads running) or its child outlived the stop: {f}"
    );
    assert_eq!(v["stopped"], true, "{f}");
    assert!(v["sent"]["SIGTERM"].as_u64().unwrap_or(0) >= 1, "{f}");
    assert_eq!(v["sent"]["SIGKILL"], 1, "the child that ignores TERM: {f}");
    adopted.end_all();
}

#[test]
fn a_descendant_hidden_from_proc_is_never_called_gone() {
    // With /proc mounted hidepid=invisible, vloer-run (uid 65534) cannot see a setuid-root
    // grandchild at all once its shell parent is gone; only the kernel's own answer (it still
    // has a child) tells the truth. A grandchild: the main child's /proc files are opened as
    // soon as it starts, possibly before its exec made it root, so vloer-run may still see it.
    hidden_descendant(&[], "does not list");
}

#[test]
fn a_group_member_hidden_from_proc_is_never_called_gone() {
    // The same under --scope group, whose members only /proc can name: a /proc that hides
    // processes proves nothing, and the verdict says why.
    hidden_descendant(&["--scope", "group"], "hidepid");
}

/// Runs a setuid-root grandchild that ignores SIGTERM under vloer-run FLAGS as uid 65534 with
/// /proc mounted hidepid, stops it, and checks that the verdict is false with an error that
/// contains `error`.
fn hidden_descendant(flags: &[&str], error: &str) {
    let Some((dir, copy)) = crate::unconfirmed::setuid_helper() else {
        return;
    };
    let ready = dir.path().join("ready");
    let script = r#"mount -t proc -o hidepid=invisible proc /proc || exit 99
        exec "$@""#;
    let mut args = [
        AS_NOBODY.to_vec(),
        vec![harness::bin_for_others()],
        flags.to_vec(),
    ]
    .concat();
    let copy_s = harness::path_str(&copy);
    let ready_s = harness::path_str(&ready);
    args.extend([
        "--grace",
        "200ms",
        "--kill-timeout",
        "500ms",
        "--",
        "sh",
        "-c",
        "\"$@\" & wait",
        "sh",
        &copy_s,
        "--root",
        "ignore-term",
        &ready_s,
    ]);
    let Some(cmd) = harness::in_mount_ns(script, &args) else {
        return;
    };
    let run = Run::of(cmd).start();
    let pid = harness::wait_for_pids(&ready)[0];
    let mut adopted = Adopted::ours(dir.path());
    assert!(adopted.add(pid));
    let f = run.finish_after(libc::SIGTERM);
    if f.code() == Some(99) {
        harness::skip("cannot mount /proc with hidepid here");
        return;
    }
    let v = f.verdict();
    assert!(harness::alive(pid));
    assert_eq!(v["stopped"], false, "a live child was called gone: {f}");
    assert_eq!(f.code(), Some(125), "{f}");
    assert!(
        v["error"].as_str().unwrap_or_default().contains(error),
        "{f}"
    );
    adopted.end_all();
}

/// Starts `vloer-run FLAGS -- helper record OUT` and waits for the recorder's ready line.
fn recorder(dir: &Path, flags: &[&str]) -> (harness::Running, std::path::PathBuf) {
    let out = dir.join("out");
    let out_s = harness::path_str(&out);
    let run = Run::helper(flags, &["record", &out_s]).start();
    wait_recorder(&out);
    (run, out)
}

/// Sends 32, 33 and 34 to vloer-run around a recorder: each must reach it, and the run must end
/// only on the SIGTERM after them.
fn forwards_32_to_34(run: harness::Running, out: &Path) {
    for sig in [32, 33, 34] {
        // SAFETY: kill with plain integers, to our own unreaped child.
        unsafe { libc::kill(run.pid(), sig) };
        harness::wait_until(&format!("signal {sig} to reach the child"), || {
            recorded(out).contains(&sig)
        });
    }
    let f = run.finish_after(libc::SIGTERM);
    assert_eq!(f.code(), Some(0), "{f}");
    assert_eq!(f.verdict()["reason"], "signal", "{f}");
}

#[test]
fn signals_32_to_34_are_forwarded_and_never_end_vloer_run() {
    // glibc keeps 32 and 33 for itself, musl 32 to 34: neither libc's wrappers will block them.
    let dir = harness::tempdir();
    let (run, out) = recorder(dir.path(), &[]);
    forwards_32_to_34(run, &out);
}

#[test]
fn signals_32_to_34_are_still_forwarded_once_a_status_started_the_reader_thread() {
    // musl's first thread creation unblocks 33 and 34 in vloer-run, where the default action of
    // either would end it with the tree orphaned.
    let dir = harness::tempdir();
    let sock = dir.path().join("ctl");
    let sock_s = harness::path_str(&sock);
    let (run, out) = recorder(dir.path(), &["--control", &sock_s]);
    harness::wait_for_socket(&sock);
    let status = Command::new(harness::bin())
        .args(["status", "--control", &sock_s])
        .output()
        .expect("vloer-run status");
    assert!(status.status.success(), "{status:?}");
    forwards_32_to_34(run, &out);
}

#[test]
fn a_sent_sigpipe_is_forwarded_and_vloer_run_s_own_is_not() {
    let dir = harness::tempdir();
    let out = dir.path().join("out");
    let out_s = harness::path_str(&out);
    // stderr is a pipe whose reader is gone: every -v line vloer-run writes raises its own
    // SIGPIPE, which must not reach the child.
    let mut cmd = Command::new(harness::bin());
    cmd.args([
        "-v",
        "--verdict",
        "off",
        "--",
        harness::helper(),
        "record",
        &out_s,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    drop(child.stderr.take());
    let run = harness::Running::of(child);
    wait_recorder(&out);
    run.signal(libc::SIGUSR1);
    harness::wait_until("USR1 to reach the child", || {
        recorded(&out).contains(&libc::SIGUSR1)
    });
    run.signal(libc::SIGUSR2);
    harness::wait_until("USR2 to reach the child", || {
        recorded(&out).contains(&libc::SIGUSR2)
    });
    assert!(
        !recorded(&out).contains(&libc::SIGPIPE),
        "vloer-run forwarded the SIGPIPE of its own write: {:?}",
        recorded(&out)
    );
    run.signal(libc::SIGPIPE);
    harness::wait_until("a sent PIPE to reach the child", || {
        recorded(&out).contains(&libc::SIGPIPE)
    });
    let f = run.finish_after(libc::SIGTERM);
    assert_eq!(f.code(), Some(0), "{f}");
}

/// A cgroup-v1 freezer group of this test's own, removed (thawed first) on drop.
struct Freezer(std::path::PathBuf);

impl Freezer {
    fn new(name: &str) -> Option<Freezer> {
        let root = Path::new("/sys/fs/cgroup/freezer");
        if !harness::is_root()
            || !root.join("freezer.state").exists() && !root.join("tasks").exists()
        {
            harness::skip("no cgroup-v1 freezer hierarchy (or not root)");
            return None;
        }
        let dir = root.join(format!("{name}-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir) {
            harness::skip(&format!(
                "cannot make a freezer group {}: {e}",
                dir.display()
            ));
            return None;
        }
        Some(Freezer(dir))
    }

    fn freeze(&self, pid: i32) {
        std::fs::write(self.0.join("tasks"), pid.to_string()).expect("moving into the freezer");
        std::fs::write(self.0.join("freezer.state"), "FROZEN").expect("freezing");
        harness::wait_until("the group to freeze", || {
            std::fs::read_to_string(self.0.join("freezer.state"))
                .is_ok_and(|s| s.trim() == "FROZEN")
        });
    }

    fn thaw(&self) {
        let _ = std::fs::write(self.0.join("freezer.state"), "THAWED");
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        self.thaw();
        let deadline = std::time::Instant::now() + harness::LIMIT;
        // The group can only go once the test has ended (and the kernel released) its tasks.
        while std::fs::remove_dir(&self.0).is_err() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn an_exec_that_cannot_die_does_not_keep_the_run_from_ending() {
    let Some(freezer) = Freezer::new("vloer-exec") else {
        return;
    };
    let dir = harness::tempdir();
    let sock = harness::path_str(&dir.path().join("s"));
    let main_ready = dir.path().join("main");
    let exec_ready = dir.path().join("exec");
    let (run, _) = Run::helper(
        &[
            "--control",
            &sock,
            "--grace",
            "300ms",
            "--kill-timeout",
            "700ms",
        ],
        &["sleep", &harness::path_str(&main_ready)],
    )
    .start_until_ready(&main_ready);
    let client = Run::new([
        harness::bin(),
        "exec",
        "--control",
        &sock,
        "--",
        harness::helper(),
        "sleep",
        &harness::path_str(&exec_ready),
    ])
    .start();
    let frozen = harness::wait_for_pids(&exec_ready)[0];
    let mut adopted = Adopted::ours(dir.path());
    adopted.add(frozen);
    freezer.freeze(frozen);
    let f = run.finish_after(libc::SIGTERM);
    freezer.thaw();
    let v = f.verdict();
    assert_eq!(v["stopped"], false, "{f}");
    assert_eq!(f.code(), Some(125), "{f}");
    assert!(
        v["survivors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["pid"] == frozen),
        "the frozen exec is not listed: {f}"
    );
    assert!(f.elapsed < Duration::from_secs(20), "{f}");
    adopted.end_all();
    drop(client.finish());
}

#[test]
fn socat_as_the_readme_shows_it_gets_status_and_the_verdict() {
    if Command::new("socat").arg("-V").output().is_err() {
        harness::skip("socat is not installed");
        return;
    }
    let dir = harness::tempdir();
    let sock = harness::path_str(&dir.path().join("s"));
    let ready = dir.path().join("ready");
    let (run, _) = Run::helper(
        &["--control", &sock],
        &["sleep", &harness::path_str(&ready)],
    )
    .start_until_ready(&ready);
    let socat = |request: &str| {
        let f = Run::of({
            let mut c = Command::new("sh");
            c.args([
                "-c",
                r#"printf '%s\n' "$1" | socat -t 30 - UNIX-CONNECT:"$2""#,
                "sh",
                request,
                &sock,
            ]);
            c
        })
        .finish();
        serde_json::from_str::<serde_json::Value>(f.stdout.trim())
            .unwrap_or_else(|e| panic!("no JSON reply ({e}): {f}"))
    };
    let status = socat(r#"{"op":"status"}"#);
    assert_eq!(status["state"], "running", "{status}");
    let verdict = socat(r#"{"op":"stop","grace_ms":2000}"#);
    assert_eq!(verdict["stopped"], true, "{verdict}");
    assert_eq!(verdict["reason"], "control", "{verdict}");
    let f = run.finish();
    // The control stop's own SIGTERM ended the child: a plain 143.
    assert_eq!((f.code(), f.signal()), (Some(143), None), "{f}");
}

#[test]
fn a_leftover_temporary_file_never_blocks_the_verdict_as_pid_1() {
    if !harness::works_here(
        &["unshare", "--pid", "--fork", "--mount-proc"],
        "a pid namespace",
    ) {
        return;
    }
    let dir = harness::tempdir();
    let verdict = dir.path().join("v.json");
    // What the crash of an earlier PID 1 left: its temporary name, here one that cannot be removed.
    let leftover = dir.path().join(".v.json.vloer-run.1");
    std::fs::create_dir(&leftover).unwrap();
    std::fs::write(leftover.join("x"), b"").unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--pid",
        "--fork",
        "--mount-proc",
        harness::bin(),
        "--verdict",
    ])
    .arg(&verdict)
    .args(["--", "true"]);
    let f = Run::of(cmd).finish();
    assert_eq!(f.code(), Some(0), "{f}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&verdict).expect("no verdict file")).unwrap();
    assert_eq!(v["stopped"], true);
}

#[test]
fn a_non_root_run_writes_its_verdict_into_a_file_in_a_folder_it_cannot_write() {
    if !harness::is_root() {
        harness::skip("making a folder only root may write needs root");
        return;
    }
    // As /dev/termination-log for a non-root pod: the file is writable, its folder is not.
    let dir = harness::tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = dir.path().join("termination-log");
    std::fs::write(&log, "x".repeat(8000)).unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).unwrap();
    let log_s = harness::path_str(&log);
    let f = Run::via(
        &AS_NOBODY,
        [harness::bin_for_others(), "--verdict", &log_s, "--", "true"],
    )
    .finish();
    assert_eq!(f.code(), Some(0), "{f}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 1, "{text:?}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("the whole file is the verdict");
    assert_eq!(v["stopped"], true);
}

#[test]
fn without_pidfds_each_process_gets_the_stop_signal_once() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let run = Run::helper(
        &["--grace", "1s", "--kill-timeout", "2s"],
        &["ignore-term", &harness::path_str(&ready)],
    );
    let (run, _) = harness::without_pidfds(run).start_until_ready(&ready);
    let f = run.finish_after(libc::SIGTERM);
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["sent"]["SIGTERM"], 1, "one process, one SIGTERM: {f}");
    assert_eq!(v["sent"]["SIGKILL"], 1, "{f}");
}

#[test]
fn without_pidfds_a_tree_with_a_setsid_daemon_is_stopped_and_proven() {
    let dir = harness::tempdir();
    let run = sh_run(
        &["--grace", "1s", "--kill-timeout", "2s"],
        dir.path(),
        r#"$H daemon "$D/daemon"; $H ignore-term "$D/ready""#,
    );
    let (run, _) = harness::without_pidfds(run).start_until_ready(&dir.path().join("ready"));
    let daemon = harness::read_pids(&dir.path().join("daemon"))[0];
    let f = run.finish_after(libc::SIGTERM);
    let v = f.verdict();
    assert!(!harness::alive_ours(daemon, dir.path()) || harness::state(daemon) == Some('Z'));
    assert_eq!(v["stopped"], true, "{f}");
    // sh and the TERM-ignorer through one call to their group (killpg, as there is no pidfd),
    // the daemon, outside it, on its own.
    assert_eq!(v["sent"]["SIGTERM"], 2, "{f}");
    assert_eq!(v["sent"]["SIGKILL"], 1, "{f}");
}

#[test]
fn a_different_stop_signal_follows_the_forwarded_one() {
    let dir = harness::tempdir();
    let script = r#"trap '' TERM; trap 'echo usr1 > "$D/usr1"; exit 0' USR1
        echo ready > "$D/ready"; while :; do sleep 0.05; done"#;
    let run = sh_run(
        &["--stop-signal", "USR1", "--grace", "20s"],
        dir.path(),
        script,
    )
    .start();
    harness::wait_for_text(&dir.path().join("ready"), "ready");
    let f = run.finish_after(libc::SIGTERM);
    let v = f.verdict();
    assert!(
        dir.path().join("usr1").exists(),
        "the child never got USR1: {f}"
    );
    assert_eq!(v["stopped"], true, "{f}");
    assert!(v["sent"]["SIGUSR1"].as_u64().unwrap_or(0) >= 1, "{f}");
    assert!(v["sent"].get("SIGKILL").is_none(), "{f}");
    assert!(
        f.elapsed < Duration::from_secs(15),
        "it waited out the grace: {f}"
    );
}

#[test]
fn an_exec_process_whose_environment_cannot_be_read_is_never_proven_gone() {
    if !harness::is_root() || !harness::works_here(&AS_NOBODY, "setpriv") {
        harness::skip("running as another uid needs root and setpriv");
        return;
    }
    let dir = open_dir();
    let sock = harness::path_str(&dir.path().join("s"));
    let main_ready = dir.path().join("main");
    let daemon = dir.path().join("daemon");
    let (run, _) = Run::via(
        &AS_NOBODY,
        [
            harness::bin_for_others(),
            "--control",
            &sock,
            "--",
            harness::helper_for_others(),
            "sleep",
            &harness::path_str(&main_ready),
        ],
    )
    .start_until_ready(&main_ready);
    let client = Run::via(
        &AS_NOBODY,
        [
            harness::bin_for_others(),
            "exec",
            "--control",
            &sock,
            "--",
            harness::helper_for_others(),
            "daemon",
            &harness::path_str(&daemon),
            "--undumpable",
        ],
    )
    .finish();
    let pid = harness::read_pids(&daemon)[0];
    let mut adopted = Adopted::ours(dir.path());
    adopted.add(pid);
    assert_eq!(
        client.code(),
        Some(125),
        "an undecidable exec called stopped: {client}"
    );
    assert!(client.stderr.contains("cannot tell"), "{client}");
    // The run's own stop covers the whole tree, the undumpable daemon included.
    let f = run.finish_after(libc::SIGTERM);
    assert_eq!(f.verdict()["stopped"], true, "{f}");
    assert!(harness::wait_gone(pid, harness::LIMIT));
}

#[test]
fn the_run_leaves_its_working_directory_and_relative_paths_still_work() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let (run, _) = Run::helper(
        &["--control", "s.sock", "--verdict", "v.json"],
        &["sleep", &harness::path_str(&ready)],
    )
    .current_dir(dir.path())
    .start_until_ready(&ready);
    harness::wait_for_socket(&dir.path().join("s.sock"));
    // vloer-run leaves the folder right after the child starts, so the helper's ready file can
    // come first: wait for it (a vloer-run that never leaves fails here).
    let cwd = format!("/proc/{}/cwd", run.pid());
    harness::wait_until("vloer-run to leave the caller's folder", || {
        std::fs::read_link(&cwd).is_ok_and(|c| c == Path::new("/"))
    });
    let f = run.finish_after(libc::SIGTERM);
    assert_eq!(f.signal(), Some(libc::SIGTERM), "{f}");
    assert!(
        !dir.path().join("s.sock").exists(),
        "the socket was left behind"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("v.json")).unwrap()).unwrap();
    assert_eq!(v["stopped"], true);
}

#[test]
fn the_stop_client_fails_when_the_instance_cannot_deliver_its_verdict() {
    let dir = harness::tempdir();
    let sock = harness::path_str(&dir.path().join("s"));
    let ready = dir.path().join("ready");
    let (run, _) = Run::helper(
        &["--control", &sock, "--verdict", "/dev/full"],
        &["sleep", &harness::path_str(&ready)],
    )
    .start_until_ready(&ready);
    let stop = Run::new(["stop", "--control", &sock]).finish();
    let f = run.finish();
    assert_eq!(f.code(), Some(125), "{f}");
    assert_eq!(
        stop.code(),
        Some(125),
        "the stop client called it a clean stop: {stop}"
    );
}

/// Every live process whose environment carries `marker`, read from /proc (as root, every
/// environment is readable): an independent view, made after vloer-run exited.
fn marked_alive(marker: &str) -> Vec<i32> {
    let needle = marker.as_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|e| e == needle))
                && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    let after = s
                        .rsplit_once(')')
                        .map(|(_, r)| r.trim_start())
                        .unwrap_or("");
                    let threads: i64 = after
                        .split(' ')
                        .nth(17)
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(0);
                    !(after.starts_with('X') || after.starts_with('Z') && threads <= 1)
                })
        })
        .collect()
}

#[test]
fn the_whole_zoo_at_once_never_gets_a_true_verdict_while_anything_lives() {
    let _storm = harness::storm();
    let Some(freezer) = Freezer::new("vloer-zoo") else {
        return;
    };
    let Some((dir, copy)) = crate::unconfirmed::setuid_helper() else {
        return;
    };
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = format!("VLOER_ZOO={}", std::process::id());
    let script = r#"$H pthread-exit "$D/leader" &
        $H daemon "$D/daemon" &
        $H fork-loop "$D/loop" "$D/loop.log" &
        $H sleep "$D/frozen" &
        $S --root ignore-term "$D/setuid" &
        while [ ! -e "$D/go" ]; do sleep 0.02; done; exit 0"#;
    let args: Vec<String> = [
        harness::bin_for_others(),
        "--grace",
        "500ms",
        "--kill-timeout",
        "1s",
        "--",
        "sh",
        "-c",
        script,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = Run::via(&AS_NOBODY, &args)
        .current_dir(dir.path())
        .env("H", harness::helper_for_others())
        .env("S", &harness::path_str(&copy))
        .env("D", &harness::path_str(dir.path()))
        .env("VLOER_ZOO", &std::process::id().to_string())
        .start();
    let mut adopted = Adopted::ours(dir.path());
    let leader = harness::wait_for_pids(&dir.path().join("leader"));
    let frozen = harness::wait_for_pids(&dir.path().join("frozen"))[0];
    let setuid = harness::wait_for_pids(&dir.path().join("setuid"))[0];
    harness::wait_for_pids(&dir.path().join("daemon"));
    harness::wait_for_pids(&dir.path().join("loop"));
    for pid in [frozen, setuid, leader[1]] {
        adopted.add(pid);
    }
    harness::wait_until("the leader's main thread to exit", || {
        harness::state(leader[0]) == Some('Z')
    });
    freezer.freeze(frozen);
    touch(&dir.path().join("go"));
    let f = run.finish();
    let left = marked_alive(&marker);
    freezer.thaw();
    let v = f.verdict();
    let listed: Vec<i64> = v["survivors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["pid"].as_i64())
        .collect();
    for pid in &left {
        adopted.add(*pid);
    }
    assert!(
        !left.is_empty(),
        "the frozen and the setuid process must outlive the stop: {f}"
    );
    assert_eq!(v["stopped"], false, "true while {left:?} live: {f}");
    assert_eq!(f.code(), Some(125), "{f}");
    for pid in &left {
        assert!(
            listed.contains(&i64::from(*pid)),
            "survivor {pid} is not listed: {f}"
        );
    }
    assert!(left.contains(&frozen) && left.contains(&setuid), "{left:?}");
    adopted.end_all();
}

#[test]
fn every_stop_has_one_driver_that_sleeps_in_one_place() {
    // After an internal failure, the stop used to be finished by a second driver that slept in
    // 20 ms steps and never noticed exits. Now every stop is driven by the event loop, which
    // sleeps in one poll(2), in src/event_loop.rs; elsewhere only a poll that never waits.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    let mut dirs = vec![src];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains("thread::sleep"),
                "{name}:{}: vloer-run sleeps outside its event loop: {line}",
                n + 1
            );
            if code.contains("poll::poll(") && name != "event_loop.rs" {
                assert!(
                    code.contains("PollTimeout::ZERO"),
                    "{name}:{}: a second place that waits: {line}",
                    n + 1
                );
            }
        }
    }
}
