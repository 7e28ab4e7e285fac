//! No proof, no true: a survivor vloer-run genuinely cannot kill, 300 of them (the verdict still
//! fits in 4096 bytes), and a /proc that cannot be read. Each gives `"stopped":false` and 125.
//!
//! The survivors are real: vloer-run runs as uid 65534 (setpriv), its child is a setuid-root copy
//! of the helper that calls setresuid(0, 0, 0), so every signal vloer-run sends it fails with
//! EPERM. The test, as root, ends them itself.

use crate::harness::{self, Adopted, Run};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const SETPRIV: [&str; 6] = [
    "setpriv",
    "--reuid",
    "65534",
    "--regid",
    "65534",
    "--clear-groups",
];

/// A temporary directory that uid 65534 can enter, holding a setuid-root copy of the helper that
/// is proven to work (not on a nosuid mount, setpriv present); None, with the reason printed,
/// where that cannot be had.
fn setuid_helper() -> Option<(tempfile::TempDir, PathBuf)> {
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
        Command::new(SETPRIV[0])
            .args(&SETPRIV[1..])
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
    };
    for args in [
        vec![harness::path_str(&copy), "--root".into(), "check".into()],
        vec![harness::bin().into(), "--version".into()],
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
    let ready = dir.path().join("ready");
    let run = Run::via(
        &SETPRIV,
        [
            "--grace",
            "200ms",
            "--kill-timeout",
            "500ms",
            "--verdict",
            "-",
            "--",
            &harness::path_str(&copy),
            "--root",
            "sleep",
            &harness::path_str(&ready),
        ],
    )
    .current_dir(dir.path())
    .start();
    let pid = harness::wait_for_pids(&ready)[0];
    let mut adopted = Adopted::ours(dir.path());
    assert!(adopted.add(pid));
    run.signal(libc::SIGTERM);
    let f = run.finish();
    let v = stdout_line(&f);
    assert_eq!(v["stopped"], false, "{f}");
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
    let ready = dir.path().join("ready");
    let run = Run::via(
        &SETPRIV,
        [
            "--grace",
            "200ms",
            "--kill-timeout",
            "500ms",
            "--verdict",
            "-",
            "--",
            &harness::path_str(&copy),
            "--root",
            "many",
            &N.to_string(),
            &harness::path_str(&ready),
        ],
    )
    .current_dir(dir.path())
    .start();
    let pids = harness::wait_for_pids(&ready);
    let mut adopted = Adopted::ours(dir.path());
    for &pid in &pids {
        assert!(adopted.add(pid), "{pid} is not a live helper");
    }
    assert_eq!(pids.len(), N + 1);
    run.signal(libc::SIGTERM);
    let f = run.finish();
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
    let ready = dir.path().join("ready");
    let instance = Run::via(
        &SETPRIV,
        [
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
    .current_dir(dir.path())
    .start();
    harness::wait_until("the control socket", || sock.exists());
    let exec = Run::via(
        &SETPRIV,
        [
            "exec",
            "--control",
            &sock_s,
            "--timeout",
            "300ms",
            "--",
            &harness::path_str(&copy),
            "--root",
            "sleep",
            &harness::path_str(&ready),
        ],
    )
    .current_dir(dir.path())
    .start();
    let pid = harness::wait_for_pids(&ready)[0];
    let mut adopted = Adopted::ours(dir.path());
    assert!(adopted.add(pid));
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

    let refused = Run::via(&SETPRIV, ["exec", "--control", &sock_s, "--", "true"])
        .current_dir(dir.path())
        .finish();
    assert_eq!(refused.code(), Some(125), "{refused}");
    assert!(refused.stderr.contains("stop_unconfirmed"), "{refused}");

    let stop = Run::via(&SETPRIV, ["stop", "--control", &sock_s])
        .current_dir(dir.path())
        .finish();
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
