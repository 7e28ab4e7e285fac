//! The stop's steps 1-3: the stop signal, a grace that ends the moment the scope is empty, and
//! SIGKILL for whatever ignores the polite signal.

use crate::harness::{self, Run};
use std::time::{Duration, Instant};

#[test]
fn a_child_that_ignores_term_is_killed_after_the_grace() {
    let dir = harness::tempdir();
    let (f, pid) = harness::stop_a_term_ignorer(&dir, &["--grace", "500ms"]);
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["sent"]["SIGTERM"], 1, "{f}");
    assert_eq!(v["sent"]["SIGKILL"], 1, "{f}");
    assert_eq!(v["child"]["signal"], "SIGKILL", "{f}");
    // The stop's own SIGKILL: a plain 137, not vloer-run killed.
    assert_eq!((f.code(), f.signal()), (Some(137), None), "{f}");
    // SIGKILL only once the grace is over.
    assert!(
        v["elapsed_ms"].as_u64().unwrap() >= 500,
        "killed before the grace ended: {f}"
    );
    assert!(!harness::alive_ours(pid, dir.path()));
}

#[test]
fn a_tree_that_exits_on_term_ends_the_stop_at_once() {
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let (run, pids) = Run::helper(
        &["--grace", "20s"],
        &["many", "3", &harness::path_str(&ready)],
    )
    .start_until_ready(&ready);
    let signalled = Instant::now();
    let f = run.finish_after(libc::SIGTERM);
    let took = signalled.elapsed();
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    // One call to the child's group reached all four.
    assert_eq!(v["sent"]["SIGTERM"], 1, "{f}");
    assert!(v["sent"].get("SIGKILL").is_none(), "{f}");
    // Generous for a loaded machine, and still far below the 20 s grace.
    assert!(
        took < Duration::from_secs(8),
        "the stop took {took:?}: it waited for the grace: {f}"
    );
    assert!(v["elapsed_ms"].as_u64().unwrap() < 8000, "{f}");
    for pid in pids {
        assert!(
            !harness::alive_ours(pid, dir.path()),
            "{pid} outlived the stop"
        );
    }
}

#[test]
fn stop_signal_chooses_the_polite_signal() {
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let f = Run::helper(
        &["--stop-signal", "HUP"],
        &["many", "2", &harness::path_str(&ready), "--then-exit"],
    )
    .finish();
    let v = f.verdict();
    assert_eq!(v["sent"], serde_json::json!({"SIGHUP": 2}), "{f}");
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(f.code(), Some(0), "{f}");
}

#[test]
fn kill_rounds_end_when_the_scope_is_empty() {
    // Nothing here refuses SIGKILL, so the rounds end as soon as the scope is empty, long before
    // a 30 s kill timeout; the grace is what a TERM-ignoring child costs.
    let dir = harness::tempdir();
    let (f, _) = harness::stop_a_term_ignorer(&dir, &["--grace", "200ms", "--kill-timeout", "30s"]);
    assert_eq!(f.verdict()["stopped"], true, "{f}");
    assert!(f.elapsed < Duration::from_secs(15), "{f}");
}
