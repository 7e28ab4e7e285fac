//! No proof, no true: a survivor vloer-run genuinely cannot kill, 300 of them (the verdict still
//! fits in 4096 bytes), and a /proc that cannot be read. Each gives `"stopped":false` and 125.
//!
//! The survivors are real: vloer-run runs as uid 65534 (setpriv), its child is a setuid-root copy
//! of the helper that calls setresuid(0, 0, 0), so every signal vloer-run sends it fails with
//! EPERM. The test, as root, ends them itself.

use crate::harness::{self, Adopted, Run, Running, AS_NOBODY};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A temporary directory that uid 65534 can enter, holding a setuid-root copy of the helper that
/// is proven to work (not on a nosuid mount, setpriv present); None, with the reason printed,
/// where that cannot be had.
pub(crate) fn setuid_helper() -> Option<(tempfile::TempDir, PathBuf)> {
    if !harness::is_root() {
        harness::skip("making a setuid-root helper needs root");
        return None;
    }
    let dir = harness::tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod the temp dir");
    let copy = dir.path().join("vloer-test-child-setuid");
    std::fs::copy(harness::helper(), &copy).expect("copying the helper");
    std::os::unix::fs::chown(&copy, Some(0), Some(0)).expect("chown root");
    // After chown, which clears the setuid bit.
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o4755)).expect("chmod 4755");
    let probe = |args: &[&str]| {
        Command::new(AS_NOBODY[0])
            .args(&AS_NOBODY[1..])
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
    };
    for args in [
        vec![harness::path_str(&copy), "--root".into(), "check".into()],
        vec![harness::bin_for_others().into(), "--version".into()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match probe(&args) {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                harness::skip(&format!(
                    "{args:?} as uid 65534 fails (a nosuid mount?): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                return None;
            }
            Err(e) => {
                harness::skip(&format!("setpriv is not available: {e}"));
                return None;
            }
        }
    }
    Some((dir, copy))
}

/// A quick stop (200 ms of grace, then 500 ms of SIGKILL rounds) with its verdict on stdout.
const QUICK_TO_STDOUT: [&str; 6] = [
    "--grace",
    "200ms",
    "--kill-timeout",
    "500ms",
    "--verdict",
    "-",
];

/// vloer-run as uid 65534 in `dir`, the setuid helper's directory, which that uid can enter.
fn as_nobody(dir: &Path, args: &[&str]) -> Run {
    Run::via(&AS_NOBODY, args).current_dir(dir)
}

/// Starts `vloer-run BEFORE... -- COPY --root HELPER_ARGS... DIR/ready` as uid 65534 (`BEFORE`
/// may make it an `exec` client), waits for the setuid-root helper's pids and takes every one in
/// charge, each checked to be a live helper of this test.
fn start_survivors(
    dir: &Path,
    copy: &Path,
    before: &[&str],
    helper_args: &[&str],
) -> (Running, Vec<i32>, Adopted) {
    let ready = dir.join("ready");
    let copy = harness::path_str(copy);
    let ready_s = harness::path_str(&ready);
    let args: Vec<&str> = before
        .iter()
        .copied()
        .chain(["--", &copy, "--root"])
        .chain(helper_args.iter().copied())
        .chain([ready_s.as_str()])
        .collect();
    let (run, pids) = as_nobody(dir, &args).start_until_ready(&ready);
    let mut adopted = Adopted::ours(dir);
    for &pid in &pids {
        assert!(adopted.add(pid), "{pid} is not a live helper");
    }
    (run, pids, adopted)
}

/// The one line on stdout (`--verdict -`), checked to be a whole line within 4096 bytes.
fn stdout_line(f: &harness::Finished) -> serde_json::Value {
    assert!(
        f.stdout.ends_with('\n') && f.stdout.lines().count() == 1,
        "stdout is not one line: {f}"
    );
    assert!(
        f.stdout.len() <= 4096,
        "the verdict line is {} bytes, over 4096 with its newline",
        f.stdout.len()
    );
    f.stdout_verdict()
}

#[test]
fn a_survivor_that_cannot_be_killed_gives_stopped_false_and_125() {
    let Some((dir, copy)) = setuid_helper() else {
        return;
    };
    let args: Vec<&str> = ["-v"].into_iter().chain(QUICK_TO_STDOUT).collect();
    let (run, pids, mut adopted) = start_survivors(dir.path(), &copy, &args, &["sleep"]);
    let pid = pids[0];
    let f = run.finish_after(libc::SIGTERM);
    let v = stdout_line(&f);
    assert_eq!(v["stopped"], false, "{f}");
    // -v tells why: SIGKILL after the grace, refused, and the stop not confirmed.
    let lines = f.own_lines();
    for start in [
        "the grace of 200ms ran out with 1 process left: SIGKILL",
        "stop not confirmed after ",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(start)),
            "no {start:?}: {f}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("stop not confirmed after ")
                && l.contains(": 1 process survived; could not send SIG")),
        "{f}"
    );
    assert_eq!(f.code(), Some(125), "{f}");
    assert_eq!(v["exit_code"], 125, "{f}");
    let survivors: Vec<i64> = v["survivors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["pid"].as_i64().unwrap())
        .collect();
    assert_eq!(survivors, [pid as i64], "{f}");
    let s = &v["survivors"][0];
    for field in ["ppid", "pgid", "sid", "state", "comm"] {
        assert!(s.get(field).is_some(), "survivor without {field}: {f}");
    }
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains(&pid.to_string())),
        "no error naming the pid: {f}"
    );
    assert!(
        harness::alive_ours(pid, dir.path()),
        "the helper is gone, so this proved nothing: {f}"
    );
    adopted.end_all();
}

#[test]
fn three_hundred_survivors_fit_in_4096_bytes() {
    const N: usize = 300;
    let Some((dir, copy)) = setuid_helper() else {
        return;
    };
    let (run, pids, mut adopted) = start_survivors(
        dir.path(),
        &copy,
        &QUICK_TO_STDOUT,
        &["many", &N.to_string()],
    );
    assert_eq!(pids.len(), N + 1);
    let f = run.finish_after(libc::SIGTERM);
    let v = stdout_line(&f);
    assert_eq!(v["stopped"], false, "{f}");
    assert_eq!(f.code(), Some(125), "{f}");
    let listed = v["survivors"].as_array().unwrap();
    let omitted = v["survivors_omitted"]
        .as_u64()
        .unwrap_or_else(|| panic!("no survivors_omitted: {f}")) as usize;
    assert!(omitted > 0, "{f}");
    assert!(
        !listed.is_empty(),
        "room was left, yet no survivor is listed: {f}"
    );
    assert_eq!(listed.len() + omitted, N + 1, "{f}");
    for s in listed {
        assert!(
            pids.contains(&(s["pid"].as_i64().unwrap() as i32)),
            "{s} is not one of the helpers"
        );
    }
    adopted.end_all();
}

#[test]
fn an_unreadable_proc_gives_stopped_false_with_an_error() {
    if !harness::is_root() {
        harness::skip("a mount namespace needs root");
        return;
    }
    // unshare makes the new namespace's mounts private: the empty /proc never leaks out.
    let wrapper = [
        "unshare",
        "--mount",
        "sh",
        "-c",
        "mount -t tmpfs none /proc && exec \"$0\" \"$@\"",
    ];
    if !harness::works_here(&wrapper, "a tmpfs over /proc in a new mount namespace") {
        return;
    }
    let f = Run::via(&wrapper, ["--", "true"]).finish();
    let v = f.verdict();
    assert_eq!(v["stopped"], false, "{f}");
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("/proc")),
        "no error about /proc: {f}"
    );
    assert_eq!(v["exit_code"], 125, "{f}");
    assert_eq!(f.code(), Some(125), "{f}");
    // The child itself was fine: only the proof is missing.
    assert_eq!(v["child"]["exit_code"], 0, "{f}");
}

#[test]
fn an_unconfirmed_exec_stop_refuses_new_execs() {
    let Some((dir, copy)) = setuid_helper() else {
        return;
    };
    // The unprivileged instance needs a folder of its own for its socket.
    let sockdir = dir.path().join("sock");
    std::fs::create_dir(&sockdir).unwrap();
    std::os::unix::fs::chown(&sockdir, Some(65534), Some(65534)).unwrap();
    let sock = sockdir.join("ctl.sock");
    let sock_s = harness::path_str(&sock);
    let instance = as_nobody(
        dir.path(),
        &[
            "--grace",
            "200ms",
            "--kill-timeout",
            "500ms",
            "--control",
            &sock_s,
            "--",
            "sleep",
            "1000",
        ],
    )
    .start();
    harness::wait_for_socket(&sock);
    let (exec, pids, mut adopted) = start_survivors(
        dir.path(),
        &copy,
        &["exec", "--control", &sock_s, "--timeout", "300ms"],
        &["sleep"],
    );
    let pid = pids[0];
    let exec = exec.finish();
    assert_eq!(
        exec.code(),
        Some(125),
        "an exec whose stop was not confirmed: {exec}"
    );
    assert!(exec.stderr.contains("not confirmed"), "{exec}");
    assert!(
        harness::alive_ours(pid, dir.path()),
        "the survivor is gone, so this proved nothing"
    );

    let refused = as_nobody(dir.path(), &["exec", "--control", &sock_s, "--", "true"]).finish();
    assert_eq!(refused.code(), Some(125), "{refused}");
    assert!(refused.stderr.contains("stop_unconfirmed"), "{refused}");

    let stop = as_nobody(dir.path(), &["stop", "--control", &sock_s]).finish();
    assert_eq!(
        stop.code(),
        Some(1),
        "the run's verdict is stopped:false: {stop}"
    );
    let f = instance.finish();
    let v = f.verdict();
    assert_eq!(v["stopped"], false, "{f}");
    assert!(
        v["survivors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["pid"] == pid),
        "the exec's survivor is listed: {f}"
    );
    assert_eq!(f.code(), Some(125), "{f}");
    adopted.end_all();
}
