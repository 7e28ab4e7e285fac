//! Every way a stop begins, as the verdict's `reason` names it: child_exited, signal (--stop-on),
//! timeout, parent_died (--parent-death). `control` belongs to control.rs.

use crate::harness::{self, Run, LIMIT};
use std::process::{Command, Stdio};

#[test]
fn child_exited() {
    let f = Run::new(["--", "true"]).finish();
    let v = f.verdict();
    assert_eq!(v["reason"], "child_exited", "{f}");
    assert!(
        v.get("signal").is_none(),
        "signal is only for reason signal: {f}"
    );
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(
        v["sent"],
        serde_json::json!({}),
        "nothing was left to stop: {f}"
    );
    assert_eq!(v["schema"], 1, "{f}");
}

#[test]
fn a_stop_signal_is_forwarded_and_named() {
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let (run, _) =
        Run::helper(&[], &["sleep", &harness::path_str(&ready)]).start_until_ready(&ready);
    let f = run.finish_after(libc::SIGTERM);
    let v = f.verdict();
    assert_eq!(v["reason"], "signal", "{f}");
    assert_eq!(v["signal"], "SIGTERM", "{f}");
    assert_eq!(v["child"]["signal"], "SIGTERM", "{f}");
    assert_eq!(f.signal(), Some(libc::SIGTERM), "{f}");
    assert_eq!(v["stopped"], true, "{f}");
}

#[test]
fn stop_on_adds_stop_signals() {
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let (run, _) = Run::helper(
        &["--stop-on", "USR1"],
        &["sleep", &harness::path_str(&ready)],
    )
    .start_until_ready(&ready);
    let f = run.finish_after(libc::SIGUSR1);
    let v = f.verdict();
    assert_eq!(v["reason"], "signal", "{f}");
    assert_eq!(v["signal"], "SIGUSR1", "{f}");
    // The stop signal itself reaches the group first: USR1's default action ends the helper.
    assert_eq!(v["child"]["signal"], "SIGUSR1", "{f}");
    assert_eq!(f.signal(), Some(libc::SIGUSR1), "{f}");
}

#[test]
fn timeout() {
    let f = Run::new(["--timeout", "200ms", "--", "sleep", "1000"]).finish();
    let v = f.verdict();
    assert_eq!(v["reason"], "timeout", "{f}");
    assert!(v.get("signal").is_none(), "{f}");
    assert_eq!(f.code(), Some(124), "{f}");
}

#[test]
fn parent_died() {
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let verdict = harness::tmp_path(&dir, "verdict.json");
    let vpid = harness::tmp_path(&dir, "vloer-run.pid");
    // The parent: a shell that starts vloer-run in the background, tells us its pid, then
    // becomes `sleep` (same pid) so that the test can end it.
    let script = format!(
        "\"$0\" --parent-death --verdict {} -- {} sleep {} </dev/null & echo $! > {}.tmp && mv {}.tmp {} && exec sleep 1000",
        harness::path_str(&verdict),
        harness::helper(),
        harness::path_str(&ready),
        harness::path_str(&vpid),
        harness::path_str(&vpid),
        harness::path_str(&vpid),
    );
    let mut parent = Command::new("sh")
        .args(["-c", &script, harness::bin()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning the parent shell");
    let mut adopted = harness::Adopted::ours(dir.path());
    let vr = harness::wait_for_pids(&vpid)[0];
    adopted.add(vr);
    // The helper starts only after vloer-run watches its parent.
    let child = harness::wait_for_pids(&ready)[0];
    adopted.add(child);
    assert!(harness::alive(vr));
    parent.kill().expect("ending the parent");
    parent.wait().expect("reaping the parent");
    harness::wait_until("the verdict file", || verdict.exists());
    assert!(harness::wait_gone(vr, LIMIT), "vloer-run outlived the stop");
    let v = harness::parse_verdict(&std::fs::read_to_string(&verdict).unwrap()).expect("a verdict");
    assert_eq!(v["reason"], "parent_died", "{v}");
    assert_eq!(v["stopped"], true, "{v}");
    assert_eq!(v["child"]["signal"], "SIGTERM", "{v}");
    assert!(
        !harness::alive_ours(child, dir.path()),
        "the child outlived the stop"
    );
}
