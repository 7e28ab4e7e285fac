//! A caller that stops reading vloer-run's stderr: -v lines are left out and counted, and the
//! run, its reaping and its verdict go on at their own pace.

use crate::harness::{self, Run};
use std::io::Read;

#[test]
fn a_caller_that_stops_reading_stderr_never_holds_the_stop_back() {
    let _storm = harness::storm();
    // With -v, each signal and each reap is a line. Written at the reader's pace, they held the
    // reaper back: on a busy machine a forking tree filled the pid space with zombies meanwhile.
    // The child leaves 2000 processes behind, which the stop signals one by one and reaps: 4000
    // lines, three times what a pipe holds.
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let verdict = dir.path().join("verdict.json");
    let mut run = Run::helper(
        &["-v", "--verdict", &harness::path_str(&verdict)],
        &["many", "2000", &harness::path_str(&ready), "--then-exit"],
    )
    .start();
    let mut stderr = run.child.stderr.take().expect("stderr");
    let pids = harness::wait_for_pids(&ready);
    // Nobody reads stderr until the verdict is there: a vloer-run that waits for its reader
    // never gets that far (and the test ends it when `run` is dropped).
    harness::wait_until("the verdict, with nobody reading stderr", || {
        verdict.exists()
    });
    let mut err = String::new();
    // Every process of the run ends, so the pipe ends once drained.
    let _ = stderr.read_to_string(&mut err);
    let status = run.child.wait().expect("wait");
    let text = std::fs::read_to_string(&verdict).unwrap_or_default();
    let v = harness::parse_verdict(&text).unwrap_or_else(|| panic!("no verdict: {text:?}"));
    assert_eq!(v["stopped"], true, "{v}");
    assert_eq!(v["reason"], "child_exited", "{v}");
    assert_eq!(status.code(), Some(0), "{v}");
    for pid in pids {
        assert!(!harness::alive(pid), "{pid} survived: {v}");
    }
    // Once the reader is back, it learns what it missed.
    let missed = err
        .lines()
        .find_map(|l| l.strip_suffix(" -v messages left out: stderr was not read fast enough"))
        .and_then(|l| l.strip_prefix("vloer-run: "))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no line says what was left out:\n{err}"));
    let lines = err.lines().filter(|l| l.starts_with("vloer-run: ")).count();
    assert!(
        missed > 0 && lines + missed >= 4000,
        "{missed} left out and {lines} lines: {err}"
    );
}
