//! The exit-status table: the child's code, 128+N, 124, 126, 127, --preserve-status and
//! --success-exit. (125 is covered where it arises: bad_input.rs and unconfirmed.rs.)

use crate::harness::{self, Run};

#[test]
fn the_childs_exit_code_is_passed_through() {
    for code in [0, 3, 255] {
        let f = Run::new(["--", "sh", "-c", &format!("exit {code}")]).finish();
        assert_eq!(f.code(), Some(code), "{f}");
        let v = f.verdict();
        assert_eq!(v["stopped"], true, "{f}");
        assert_eq!(v["exit_code"], code, "{f}");
        assert_eq!(v["child"]["exit_code"], code, "{f}");
        assert!(v["child"]["signal"].is_null(), "{f}");
        assert_eq!(v["reason"], "child_exited", "{f}");
    }
}

#[test]
fn a_child_killed_by_signal_n_gives_128_plus_n() {
    for (sig, name) in [(libc::SIGKILL, "SIGKILL"), (libc::SIGUSR1, "SIGUSR1")] {
        let f = Run::new(["--", "sh", "-c", &format!("kill -{sig} $$")]).finish();
        assert_eq!(f.signal(), Some(sig), "{f}");
        let v = f.verdict();
        assert_eq!(v["stopped"], true, "{f}");
        assert_eq!(v["exit_code"], 128 + sig, "{f}");
        assert_eq!(v["child"]["signal"], name, "{f}");
        assert!(v["child"]["exit_code"].is_null(), "{f}");
    }
}

#[test]
fn a_timeout_gives_124() {
    let f = Run::new(["--timeout", "300ms", "--", "sleep", "1000"]).finish();
    assert_eq!(f.code(), Some(124), "{f}");
    let v = f.verdict();
    assert_eq!(v["reason"], "timeout", "{f}");
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["exit_code"], 124, "{f}");
    assert_eq!(v["child"]["signal"], "SIGTERM", "{f}");
    assert!(
        f.elapsed >= std::time::Duration::from_millis(300),
        "ended before the timeout: {f}"
    );
}

#[test]
fn preserve_status_gives_the_childs_status_after_a_timeout() {
    // Killed by the stop's SIGTERM: 128 + 15.
    let f = Run::new([
        "--timeout",
        "300ms",
        "--preserve-status",
        "--",
        "sleep",
        "1000",
    ])
    .finish();
    // After a timeout the child's 128+N is a plain status, never vloer-run's own death.
    assert_eq!(f.code(), Some(143), "{f}");
    assert_eq!(f.verdict()["reason"], "timeout", "{f}");
    // A child that handles SIGTERM and exits with its own code.
    let f = Run::new([
        "--timeout",
        "300ms",
        "--preserve-status",
        "--",
        "sh",
        "-c",
        "trap 'exit 7' TERM; while :; do sleep 0.05; done",
    ])
    .finish();
    assert_eq!(f.code(), Some(7), "{f}");
    assert_eq!(f.verdict()["child"]["exit_code"], 7, "{f}");
}

#[test]
fn success_exit_maps_listed_codes_to_zero() {
    let f = Run::new(["--success-exit", "3", "--", "sh", "-c", "exit 3"]).finish();
    assert_eq!(f.code(), Some(0), "{f}");
    let v = f.verdict();
    assert_eq!(v["exit_code"], 0, "{f}");
    assert_eq!(
        v["child"]["exit_code"], 3,
        "the verdict keeps the child's real code: {f}"
    );
    // Repeatable; codes not listed pass through.
    let f = Run::new([
        "--success-exit",
        "3",
        "--success-exit",
        "143",
        "--",
        "sh",
        "-c",
        "exit 143",
    ])
    .finish();
    assert_eq!(f.code(), Some(0), "{f}");
    let f = Run::new(["--success-exit", "3", "--", "sh", "-c", "exit 4"]).finish();
    assert_eq!(f.code(), Some(4), "{f}");
}

#[test]
fn a_command_that_cannot_be_executed_gives_126() {
    let dir = harness::tempdir();
    let script = harness::tmp_path(&dir, "not-executable");
    harness::write_file(&script, "#!/bin/sh\nexit 0\n", 0o644);
    for target in [harness::path_str(&script), harness::path_str(dir.path())] {
        let f = Run::new(["--", &target]).finish();
        assert_eq!(f.code(), Some(126), "{target}: {f}");
        let v = f.verdict();
        assert_eq!(v["exit_code"], 126, "{f}");
        assert!(v["child"]["pid"].is_null(), "{f}");
        assert!(
            f.messages().iter().any(|l| l.starts_with("vloer-run: ")),
            "no message naming the failure: {f}"
        );
    }
}

#[test]
fn a_script_without_a_shebang_runs_under_sh_as_execvp_runs_it() {
    // glibc's execvp and tini run it with /bin/sh; musl's execvp alone would say ENOEXEC (126).
    let dir = harness::tempdir();
    let script = harness::tmp_path(&dir, "no-shebang");
    harness::write_file(&script, "echo \"ran: $0 $1\"\nexit 3\n", 0o755);
    let path = harness::path_str(&script);
    let f = Run::new(["--", &path, "arg"]).finish();
    assert_eq!(f.code(), Some(3), "{f}");
    assert_eq!(
        f.stdout.lines().next(),
        Some(format!("ran: {path} arg").as_str()),
        "{f}"
    );
    // Found through PATH, the file the search found is what sh runs.
    let f = Run::new(["--", "no-shebang", "arg"])
        .env(
            "PATH",
            &format!("/nonexistent:{}", harness::path_str(dir.path())),
        )
        .finish();
    assert_eq!(f.code(), Some(3), "{f}");
    assert_eq!(
        f.stdout.lines().next(),
        Some(format!("ran: {path} arg").as_str()),
        "{f}"
    );
}

#[test]
fn a_command_that_is_not_found_gives_127() {
    for target in ["vloer-run-test-no-such-command", "/nonexistent-dir/cmd"] {
        let f = Run::new(["--", target]).finish();
        assert_eq!(f.code(), Some(127), "{target}: {f}");
        let v = f.verdict();
        assert_eq!(v["exit_code"], 127, "{f}");
        assert_eq!(v["stopped"], true, "{f}");
        assert!(
            f.messages()
                .iter()
                .any(|l| l.starts_with("vloer-run: ") && l.contains(target)),
            "{f}"
        );
    }
}

#[test]
fn a_child_the_stop_killed_itself_gives_a_plain_128_plus_n_and_no_killed_in_the_shell() {
    // `vloer-run stop` against a child that ignores SIGTERM: the stop's SIGKILL ends it. The
    // server exits 137 as a plain exit, so the shell that started it says nothing of `Killed`.
    let dir = harness::tempdir();
    let sock = harness::path_str(&dir.path().join("ctl"));
    let ready = harness::tmp_path(&dir, "ready");
    let mut args = vec!["--control".to_string(), sock.clone()];
    args.extend(harness::helper_argv(
        &[],
        &["ignore-term", &harness::path_str(&ready)],
    ));
    let shell = ["bash", "-c", r#""$@"; echo "status=$?""#, "bash"];
    let (run, pids) = Run::via(&shell, &args).start_until_ready(&ready);
    let stop = Run::new(["stop", "--control", &sock, "--grace", "500ms"]).finish();
    assert_eq!(stop.code(), Some(0), "{stop}");
    assert_eq!(
        stop.stdout_verdict()["child"]["signal"],
        "SIGKILL",
        "{stop}"
    );
    let f = run.finish();
    assert_eq!(f.stdout.trim(), "status=137", "{f}");
    assert!(
        !f.stderr.contains("Killed"),
        "the shell reported a kill: {f}"
    );
    assert_eq!(f.verdict()["exit_code"], 137, "{f}");
    assert!(!harness::alive_ours(pids[0], dir.path()));
    // Started directly: exited with 137 (WIFEXITED), not killed.
    std::fs::remove_file(&ready).unwrap();
    let inst = Run::new(&args).start();
    let pids = harness::wait_for_pids(&ready);
    let stop = Run::new(["stop", "--control", &sock, "--grace", "500ms"]).finish();
    assert_eq!(stop.code(), Some(0), "{stop}");
    let f = inst.finish();
    assert_eq!((f.code(), f.signal()), (Some(137), None), "{f}");
    assert!(!harness::alive_ours(pids[0], dir.path()));
}

#[test]
fn a_forwarded_signal_is_passed_on_and_the_stops_own_signal_is_not() {
    // A stop that INT started: the child ignores the forwarded INT and dies of the stop's own
    // SIGTERM, a plain 143.
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let script = format!(
        "trap '' INT; echo $$ > {}; while :; do sleep 0.05; done",
        harness::path_str(&ready)
    );
    let (run, _) =
        Run::new(["--stop-on", "INT", "--", "sh", "-c", &script]).start_until_ready(&ready);
    let f = run.finish_after(libc::SIGINT);
    let v = f.verdict();
    assert_eq!(
        (v["reason"].as_str(), v["signal"].as_str()),
        (Some("signal"), Some("SIGINT")),
        "{f}"
    );
    assert_eq!(v["child"]["signal"], "SIGTERM", "{f}");
    assert_eq!((f.code(), f.signal()), (Some(143), None), "{f}");
    // The same stop, with a child that dies of the INT it was passed: vloer-run ends by it.
    std::fs::remove_file(&ready).unwrap();
    let (run, _) = Run::helper(
        &["--stop-on", "INT"],
        &["sleep", &harness::path_str(&ready)],
    )
    .start_until_ready(&ready);
    let f = run.finish_after(libc::SIGINT);
    assert_eq!(f.verdict()["child"]["signal"], "SIGINT", "{f}");
    assert_eq!(f.signal(), Some(libc::SIGINT), "{f}");
}

#[test]
fn a_child_killed_from_outside_still_ends_vloer_run_by_that_signal() {
    // Another process's SIGKILL, even while a stop that sent its own signals is under way.
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let (run, pids) =
        Run::helper(&[], &["sleep", &harness::path_str(&ready)]).start_until_ready(&ready);
    harness::kill_pid(pids[0], libc::SIGKILL);
    let f = run.finish();
    assert_eq!(f.verdict()["child"]["signal"], "SIGKILL", "{f}");
    assert_eq!(f.signal(), Some(libc::SIGKILL), "{f}");
    // A control stop's own SIGTERM is ignored; within its grace, someone else kills the child.
    std::fs::remove_file(&ready).unwrap();
    let sock = harness::path_str(&dir.path().join("ctl"));
    let (run, pids) = Run::helper(
        &["--control", &sock],
        &["ignore-term", &harness::path_str(&ready)],
    )
    .start_until_ready(&ready);
    let stop = Run::new(["stop", "--control", &sock, "--grace", "30s"]).start();
    // The stop sends its SIGTERM as it begins.
    harness::wait_until("the stop", || run_state(&sock) == "stopping");
    harness::kill_pid(pids[0], libc::SIGKILL);
    let f = run.finish();
    assert_eq!(stop.finish().code(), Some(0));
    assert_eq!(f.verdict()["reason"], "control", "{f}");
    assert_eq!(f.verdict()["child"]["signal"], "SIGKILL", "{f}");
    assert_eq!(f.signal(), Some(libc::SIGKILL), "{f}");
}

fn run_state(sock: &str) -> String {
    let out = Run::new(["status", "--control", sock]).finish();
    serde_json::from_str::<serde_json::Value>(out.stdout.trim())
        .map(|v| v["state"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}
