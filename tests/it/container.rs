//! In a container runtime: as PID 1, vloer-run waits for the clients it answered to
//! close before it exits, so that the kernel's SIGKILL of everything left in the namespace does
//! not hit a preStop hook still reading its reply.

use crate::harness::{self, Run};
use std::process::Command;

const PID_NS: [&str; 4] = ["unshare", "--pid", "--fork", "--mount-proc"];

/// Starts `vloer-run --control SOCK -- sleep 300` as PID 1 of a new pid namespace; returns it,
/// the socket's path and vloer-run's pid as seen from here.
fn instance_as_pid_1(dir: &std::path::Path) -> (harness::Running, String, i32) {
    let sock = harness::path_str(&dir.join("ctl"));
    let run = Run::via(&PID_NS, ["--control", &sock, "--", "sleep", "300"]).start();
    harness::wait_for_socket(std::path::Path::new(&sock));
    let mut vloer = Vec::new();
    harness::wait_until("vloer-run under unshare", || {
        vloer = harness::children(run.pid());
        !vloer.is_empty()
    });
    (run, sock, vloer[0])
}

#[test]
fn as_pid_1_the_stop_client_inside_the_namespace_always_exits_0() {
    if !harness::works_here(&PID_NS, "unshare --pid --fork --mount-proc") {
        return;
    }
    for i in 0..20 {
        let dir = harness::tempdir();
        let (run, sock, vloer) = instance_as_pid_1(dir.path());
        // Inside the namespace, as `podman exec C vloer-run stop` (a preStop hook) is.
        let out = Command::new("nsenter")
            .args(["-t", &vloer.to_string(), "-p", "--", harness::bin()])
            .args(["stop", "--control", &sock])
            .output()
            .expect("running nsenter");
        assert!(
            out.status.success(),
            "try {i}: the stop client ended with {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        run.finish();
    }
}

#[test]
fn as_pid_1_a_client_still_reading_its_reply_is_not_killed() {
    if !harness::works_here(&PID_NS, "unshare --pid --fork --mount-proc")
        || !harness::works_here(&["socat", "-V"], "socat")
    {
        return;
    }
    let dir = harness::tempdir();
    let (run, sock, vloer) = instance_as_pid_1(dir.path());
    // A client inside the namespace that, like a preStop hook finishing up, holds its connection
    // for half a second after the reply came.
    let script = dir.path().join("client.sh");
    std::fs::write(
        &script,
        "echo '{\"op\":\"stop\"}'; read -r line; echo \"$line\" >&2; sleep 0.5\n",
    )
    .unwrap();
    let out = Command::new("nsenter")
        .args(["-t", &vloer.to_string(), "-p", "--", "socat", "-t", "30"])
        .arg(format!("EXEC:sh {}", harness::path_str(&script)))
        .arg(format!("UNIX-CONNECT:{sock}"))
        .output()
        .expect("running nsenter");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the client was ended with the namespace: {:?}\n{stderr}",
        out.status
    );
    assert!(stderr.contains("\"stopped\":true"), "{stderr}");
    let f = run.finish();
    assert_eq!(f.verdict()["reason"], "control", "{f}");
}
