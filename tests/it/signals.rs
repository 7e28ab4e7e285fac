//! Signals: the start mask and ignored dispositions reach the child unchanged, a signal ignored at
//! start is not forwarded, forwarded signals reach the whole group (grandchildren too) or the
//! child alone (--forward-to child), and --rewrite FROM:TO and FROM:0.
//!
//! The `record` helper blocks every signal and writes each one it receives (its number) to a
//! file, so a test can wait for a signal to arrive and see which ones never did. Standard
//! signals pending together are taken lowest number first, so a marker signal with a higher
//! number than the one that must not arrive proves the absence.

use crate::harness::{self, Run};
use std::path::Path;
use std::process::{Command, Stdio};

fn line(sig: i32) -> String {
    sig.to_string()
}

/// /proc/self/status as `cat` sees it when run by `argv`.
fn status_of(argv: &[&str]) -> String {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    for (k, _) in std::env::vars_os().filter(|(k, _)| k.to_string_lossy().starts_with("VLOER_")) {
        cmd.env_remove(k);
    }
    let out = cmd.output().expect("running cat");
    assert!(out.status.success(), "{argv:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn mask(status: &str, field: &str) -> u64 {
    u64::from_str_radix(harness::status_field(status, field), 16).unwrap()
}

fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

#[test]
fn sigint_ignored_at_start_stays_ignored_in_the_child() {
    let via = status_of(&[
        "sh",
        "-c",
        "trap '' INT; exec \"$0\" --verdict off -- cat /proc/self/status",
        harness::bin(),
    ]);
    let direct = status_of(&["sh", "-c", "trap '' INT; exec cat /proc/self/status"]);
    assert!(
        mask(&via, "SigIgn") & bit(libc::SIGINT) != 0,
        "SIGINT is not ignored in the child:\n{via}"
    );
    assert_eq!(
        harness::status_field(&via, "SigIgn"),
        harness::status_field(&direct, "SigIgn"),
        "vloer-run changed the ignored set"
    );
    assert_eq!(
        harness::status_field(&via, "SigBlk"),
        harness::status_field(&direct, "SigBlk"),
        "vloer-run changed the mask"
    );
    assert_eq!(
        mask(&via, "SigCgt"),
        0,
        "a handler leaked into the child:\n{via}"
    );
}

#[test]
fn the_start_mask_and_dispositions_are_inherited() {
    let wrap = [
        harness::helper(),
        "exec",
        "--block",
        "USR2",
        "--ignore",
        "INT",
        "--ignore",
        "HUP",
        "--",
    ];
    let mut via_argv = wrap.to_vec();
    via_argv.extend([
        harness::bin(),
        "--verdict",
        "off",
        "--",
        "cat",
        "/proc/self/status",
    ]);
    let mut direct_argv = wrap.to_vec();
    direct_argv.extend(["cat", "/proc/self/status"]);
    let via = status_of(&via_argv);
    let direct = status_of(&direct_argv);
    assert_eq!(
        mask(&via, "SigBlk"),
        bit(libc::SIGUSR2),
        "the child's mask is not the one vloer-run started with:\n{via}"
    );
    assert_eq!(
        mask(&via, "SigIgn"),
        mask(&direct, "SigIgn"),
        "the ignored set differs:\n{via}"
    );
    assert!(
        mask(&via, "SigIgn") & (bit(libc::SIGINT) | bit(libc::SIGHUP))
            == bit(libc::SIGINT) | bit(libc::SIGHUP)
    );
    // And with nothing blocked at start, nothing of vloer-run's own leaks. (The ignored set is
    // compared, not assumed empty: glibc's posix_spawn, which std uses, starts children with its
    // two internal real-time signals ignored.)
    let plain = status_of(&[
        harness::bin(),
        "--verdict",
        "off",
        "--",
        "cat",
        "/proc/self/status",
    ]);
    let baseline = status_of(&["cat", "/proc/self/status"]);
    assert_eq!(
        mask(&plain, "SigBlk"),
        0,
        "vloer-run's blocked set leaked into the child:\n{plain}"
    );
    assert_eq!(mask(&plain, "SigIgn"), mask(&baseline, "SigIgn"), "{plain}");
}

/// Starts `vloer-run ARGS -- record OUT [GRAND]` (through `wrapper`, if any) and waits until the
/// recorders are ready.
fn start_recorder(
    dir: &Path,
    wrapper: &[&str],
    args: &[&str],
    grandchild: bool,
) -> (harness::Running, std::path::PathBuf, std::path::PathBuf) {
    let out = dir.join("child.signals");
    let grand = dir.join("grandchild.signals");
    let mut argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    argv.extend([
        "--".into(),
        harness::helper().into(),
        "record".into(),
        harness::path_str(&out),
    ]);
    if grandchild {
        argv.push(harness::path_str(&grand));
    }
    let run = if wrapper.is_empty() {
        Run::new(&argv)
    } else {
        Run::via(wrapper, &argv)
    }
    .start();
    harness::wait_until("the recorder", || {
        std::fs::read_to_string(&out).is_ok_and(|s| s.starts_with("ready "))
    });
    if grandchild {
        harness::wait_until("the grandchild recorder", || {
            std::fs::read_to_string(&grand).is_ok_and(|s| s.starts_with("ready "))
        });
    }
    (run, out, grand)
}

#[test]
fn a_forwarded_signal_reaches_a_grandchild_in_the_group() {
    let dir = harness::tempdir();
    let (run, out, grand) = start_recorder(dir.path(), &[], &[], true);
    run.signal(libc::SIGUSR1);
    harness::wait_for_text(&grand, &line(libc::SIGUSR1));
    harness::wait_for_text(&out, &line(libc::SIGUSR1));
    run.signal(libc::SIGTERM);
    let f = run.finish();
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(f.code(), Some(0), "the recorders exit 0 on SIGTERM: {f}");
    assert!(harness::has_line(&grand, &line(libc::SIGTERM)), "{f}");
}

#[test]
fn forward_to_child_spares_the_rest_of_the_group() {
    let dir = harness::tempdir();
    let (run, out, grand) = start_recorder(dir.path(), &[], &["--forward-to", "child"], true);
    run.signal(libc::SIGUSR1);
    harness::wait_for_text(&out, &line(libc::SIGUSR1));
    // The stop reaches the grandchild; a USR1 sent to the group would have come first.
    run.signal(libc::SIGTERM);
    let f = run.finish();
    assert_eq!(f.verdict()["stopped"], true, "{f}");
    assert!(
        harness::has_line(&grand, &line(libc::SIGTERM)),
        "the stop did not reach the grandchild: {f}"
    );
    assert!(
        !harness::has_line(&grand, &line(libc::SIGUSR1)),
        "USR1 reached the grandchild under --forward-to child"
    );
}

#[test]
fn rewrite_forwards_another_signal() {
    let dir = harness::tempdir();
    let (run, out, _) = start_recorder(dir.path(), &[], &["--rewrite", "USR1:USR2"], false);
    run.signal(libc::SIGUSR1);
    harness::wait_for_text(&out, &line(libc::SIGUSR2));
    assert!(
        !harness::has_line(&out, &line(libc::SIGUSR1)),
        "USR1 was forwarded as itself too"
    );
    run.signal(libc::SIGTERM);
    assert_eq!(run.finish().code(), Some(0));
}

#[test]
fn rewrite_to_zero_drops_the_signal() {
    let dir = harness::tempdir();
    let (run, out, _) = start_recorder(dir.path(), &[], &["--rewrite", "USR1:0"], false);
    run.signal(libc::SIGUSR1);
    // The marker: sent after USR1, forwarded after it, received after it.
    run.signal(libc::SIGUSR2);
    harness::wait_for_text(&out, &line(libc::SIGUSR2));
    assert!(
        !harness::has_line(&out, &line(libc::SIGUSR1)),
        "USR1 was forwarded despite USR1:0"
    );
    run.signal(libc::SIGTERM);
    assert_eq!(run.finish().code(), Some(0));
}

#[test]
fn rewrite_applies_to_the_stop_signal_that_is_forwarded() {
    let dir = harness::tempdir();
    let (run, out, _) = start_recorder(
        dir.path(),
        &[],
        &["--rewrite", "TERM:INT", "--grace", "300ms"],
        false,
    );
    run.signal(libc::SIGTERM);
    let f = run.finish();
    let v = f.verdict();
    assert_eq!(v["reason"], "signal", "{f}");
    assert_eq!(v["signal"], "SIGTERM", "{f}");
    assert!(
        harness::has_line(&out, &line(libc::SIGINT)),
        "the child did not get INT: {f}"
    );
    assert!(
        !harness::has_line(&out, &line(libc::SIGTERM)),
        "the child got TERM despite TERM:INT: {f}"
    );
    // The recorder only leaves on TERM, so the grace ran out.
    assert_eq!(v["sent"]["SIGKILL"], 1, "{f}");
}

#[test]
fn a_signal_ignored_at_start_is_not_forwarded() {
    let dir = harness::tempdir();
    let wrapper = [harness::helper(), "exec", "--ignore", "USR1", "--"];
    let (run, out, _) = start_recorder(dir.path(), &wrapper, &[], false);
    run.signal(libc::SIGUSR1);
    run.signal(libc::SIGUSR2);
    harness::wait_for_text(&out, &line(libc::SIGUSR2));
    assert!(
        !harness::has_line(&out, &line(libc::SIGUSR1)),
        "USR1 was ignored at start, yet forwarded"
    );
    run.signal(libc::SIGTERM);
    assert_eq!(run.finish().code(), Some(0));
}
