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
use std::process::Command;

fn line(sig: i32) -> String {
    sig.to_string()
}

/// Whether the recorder writing `log` has received `sig`.
fn got(log: &Path, sig: i32) -> bool {
    harness::has_line(log, &line(sig))
}

/// /proc/self/status as `cat` sees it when run by `argv`.
fn status_of(argv: &[&str]) -> String {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    let out = Run::of(cmd).finish();
    assert!(out.status.success(), "{argv:?}: {out}");
    out.stdout
}

/// /proc/self/status of `cat` started by `launcher` (a program that execs its arguments) with
/// vloer-run in between, and without it: what vloer-run changes, if anything.
fn status_via_and_direct(launcher: &[&str]) -> (String, String) {
    let cat = ["cat", "/proc/self/status"];
    let vloer_run = [harness::bin(), "--verdict", "off", "--"];
    let via = status_of(&[launcher, &vloer_run, &cat].concat());
    let direct = status_of(&[launcher, &cat].concat());
    (via, direct)
}

fn mask(status: &str, field: &str) -> u64 {
    u64::from_str_radix(harness::status_field(status, field), 16).unwrap()
}

fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

#[test]
fn sigint_ignored_at_start_stays_ignored_in_the_child() {
    let (via, direct) = status_via_and_direct(&["sh", "-c", "trap '' INT; exec \"$@\"", "sh"]);
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
    let (via, direct) = status_via_and_direct(&wrap);
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
    let (plain, baseline) = status_via_and_direct(&[]);
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
    let (out_s, grand_s) = (harness::path_str(&out), harness::path_str(&grand));
    let recorders: &[&str] = if grandchild {
        &["record", &out_s, &grand_s]
    } else {
        &["record", &out_s]
    };
    let argv = harness::helper_argv(args, recorders);
    let run = Run::via(wrapper, &argv).start();
    let ready = |path: &Path| std::fs::read_to_string(path).is_ok_and(|s| s.starts_with("ready "));
    harness::wait_until("the recorder", || ready(&out));
    if grandchild {
        harness::wait_until("the grandchild recorder", || ready(&grand));
    }
    (run, out, grand)
}

/// Ends a run of recorders the polite way: they exit 0 on SIGTERM.
fn end_recorders(run: harness::Running) {
    assert_eq!(run.finish_after(libc::SIGTERM).code(), Some(0));
}

/// Sends `sent` to vloer-run (`vloer-run ARGS -- record`, through `wrapper` if any), in order,
/// waits until `arrived` reached the child and checks that SIGUSR1 did not; `why` says why it
/// must not. A forwarded SIGUSR1 would have been in before `arrived` (see the top of this file).
fn assert_usr1_not_forwarded(
    wrapper: &[&str],
    args: &[&str],
    sent: &[i32],
    arrived: i32,
    why: &str,
) {
    let dir = harness::tempdir();
    let (run, out, _) = start_recorder(dir.path(), wrapper, args, false);
    for &sig in sent {
        run.signal(sig);
    }
    harness::wait_for_text(&out, &line(arrived));
    assert!(!got(&out, libc::SIGUSR1), "{why}");
    end_recorders(run);
}

#[test]
fn a_forwarded_signal_reaches_a_grandchild_in_the_group() {
    let dir = harness::tempdir();
    let (run, out, grand) = start_recorder(dir.path(), &[], &[], true);
    run.signal(libc::SIGUSR1);
    harness::wait_for_text(&grand, &line(libc::SIGUSR1));
    harness::wait_for_text(&out, &line(libc::SIGUSR1));
    let f = run.finish_after(libc::SIGTERM);
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(f.code(), Some(0), "the recorders exit 0 on SIGTERM: {f}");
    assert!(got(&grand, libc::SIGTERM), "{f}");
}

#[test]
fn forward_to_child_spares_the_rest_of_the_group() {
    let dir = harness::tempdir();
    let (run, out, grand) = start_recorder(dir.path(), &[], &["--forward-to", "child"], true);
    run.signal(libc::SIGUSR1);
    harness::wait_for_text(&out, &line(libc::SIGUSR1));
    // The stop reaches the grandchild; a USR1 sent to the group would have come first.
    let f = run.finish_after(libc::SIGTERM);
    assert_eq!(f.verdict()["stopped"], true, "{f}");
    assert!(
        got(&grand, libc::SIGTERM),
        "the stop did not reach the grandchild: {f}"
    );
    assert!(
        !got(&grand, libc::SIGUSR1),
        "USR1 reached the grandchild under --forward-to child"
    );
}

#[test]
fn rewrite_forwards_another_signal() {
    assert_usr1_not_forwarded(
        &[],
        &["--rewrite", "USR1:USR2"],
        &[libc::SIGUSR1],
        libc::SIGUSR2,
        "USR1 was forwarded as itself too",
    );
}

#[test]
fn rewrite_to_zero_drops_the_signal() {
    // The marker USR2: sent after USR1, forwarded after it, received after it.
    assert_usr1_not_forwarded(
        &[],
        &["--rewrite", "USR1:0"],
        &[libc::SIGUSR1, libc::SIGUSR2],
        libc::SIGUSR2,
        "USR1 was forwarded despite USR1:0",
    );
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
    let f = run.finish_after(libc::SIGTERM);
    let v = f.verdict();
    assert_eq!(v["reason"], "signal", "{f}");
    assert_eq!(v["signal"], "SIGTERM", "{f}");
    assert!(got(&out, libc::SIGINT), "the child did not get INT: {f}");
    assert!(
        !got(&out, libc::SIGTERM),
        "the child got TERM despite TERM:INT: {f}"
    );
    // The recorder only leaves on TERM, so the grace ran out.
    assert_eq!(v["sent"]["SIGKILL"], 1, "{f}");
}

#[test]
fn a_signal_ignored_at_start_is_not_forwarded() {
    assert_usr1_not_forwarded(
        &[harness::helper(), "exec", "--ignore", "USR1", "--"],
        &[],
        &[libc::SIGUSR1, libc::SIGUSR2],
        libc::SIGUSR2,
        "USR1 was ignored at start, yet forwarded",
    );
}
