//! Issue 15, in a container runtime: as PID 1, vloer-run waits for the clients it answered to
//! close before it exits, so that the kernel's SIGKILL of everything left in the namespace does
//! not hit a preStop hook still reading its reply.

use crate::harness::{self, Run};
use std::process::Command;

const PID_NS: [&str; 4] = ["unshare", "--pid", "--fork", "--mount-proc"];

#[test]
fn as_pid_1_a_client_still_reading_its_reply_is_not_killed() {
    if !harness::works_here(&PID_NS, "unshare --pid --fork --mount-proc")
        || !harness::works_here(&["socat", "-V"], "socat")
    {
        return;
    }
    let dir = harness::tempdir();
    let sock = harness::path_str(&dir.path().join("ctl"));
    let run = Run::via(&PID_NS, ["--control", &sock, "--", "sleep", "300"]).start();
    harness::wait_for_socket(std::path::Path::new(&sock));
    let mut vloer = Vec::new();
    harness::wait_until("vloer-run under unshare", || {
        vloer = harness::children(run.pid());
        !vloer.is_empty()
    });
    // A client inside the namespace that, like a preStop hook finishing up, holds its connection
    // for half a second after the reply came.
    let script = dir.path().join("client.sh");
    std::fs::write(
        &script,
        "echo '{\"op\":\"stop\"}'; read -r line; echo \"$line\" >&2; sleep 0.5\n",
    )
    .unwrap();
    let out = Command::new("nsenter")
        .args(["-t", &vloer[0].to_string(), "-p", "--", "socat", "-t", "30"])
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
