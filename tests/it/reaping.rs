//! Orphaned zombies are reaped while the run goes on: as a subreaper, and as PID 1 of a new pid
//! namespace (`unshare --pid --fork --mount-proc`).

use crate::harness::{self, Run};
use std::path::Path;
use std::time::Duration;

const ORPHANS: usize = 5;

/// How long zombies may wait for their reaper here: far more than "promptly", and far less
/// than the run, which only ends when the test ends it.
const PROMPTLY: Duration = Duration::from_secs(10);

/// Waits until `reaper` has no zombie children; false if some are still there after PROMPTLY.
fn zombies_reaped(reaper: i32) -> bool {
    let deadline = std::time::Instant::now() + PROMPTLY;
    loop {
        let zombies: Vec<i32> = harness::children_states(reaper)
            .into_iter()
            .filter(|(_, s)| *s == 'Z')
            .map(|(p, _)| p)
            .collect();
        if zombies.is_empty() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            eprintln!("unreaped zombie children of {reaper}: {zombies:?}");
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// vloer-run as PID 1 of a new pid namespace, with the namespace's own /proc.
const PID_NS: [&str; 4] = ["unshare", "--pid", "--fork", "--mount-proc"];

/// Starts vloer-run (through `wrapper`, if any) around a helper making ORPHANS orphans, and waits
/// for their pids, the main child's first; they are published only once every orphan has exited,
/// after its parent did.
fn start_orphans(wrapper: &[&str], ready: &Path) -> (harness::Running, Vec<i32>) {
    let argv = harness::helper_argv(
        &[],
        &["orphans", &ORPHANS.to_string(), &harness::path_str(ready)],
    );
    let (run, pids) = Run::via(wrapper, argv).start_until_ready(ready);
    assert_eq!(pids.len(), 1 + ORPHANS);
    (run, pids)
}

/// The zombies went while the run went on (`reaped`, by `reaper`), and the verdict counts every
/// orphan; returns the verdict.
fn assert_orphans_reaped(reaped: bool, reaper: &str, f: &harness::Finished) -> serde_json::Value {
    assert!(
        reaped,
        "orphaned zombies were not reaped by {reaper} while the run went on: {f}"
    );
    let v = f.verdict();
    assert_eq!(v["reaped"], ORPHANS, "{f}");
    assert_eq!(v["stopped"], true, "{f}");
    v
}

#[test]
fn orphaned_zombies_are_reaped_by_the_subreaper() {
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let (run, pids) = start_orphans(&[], &ready);
    let reaped = zombies_reaped(run.pid());
    // The main child is alive, so nothing but the reaper's own work can have removed them.
    assert!(harness::alive(pids[0]), "the main child ended early");
    let f = run.finish_after(libc::SIGTERM);
    assert_orphans_reaped(reaped, "the subreaper", &f);
}

#[test]
fn orphaned_zombies_are_reaped_by_pid_1() {
    if !harness::is_root() {
        harness::skip("a new pid namespace needs root");
        return;
    }
    if !harness::works_here(&PID_NS, "unshare --pid --fork --mount-proc") {
        return;
    }
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    // The pids in the file are the namespace's; from out here, vloer-run is unshare's child.
    let (run, pids) = start_orphans(&PID_NS, &ready);
    let mut vloer = Vec::new();
    harness::wait_until("vloer-run under unshare", || {
        vloer = harness::children_states(run.pid());
        !vloer.is_empty()
    });
    let vloer = vloer[0].0;
    let status = std::fs::read_to_string(format!("/proc/{vloer}/status")).unwrap_or_default();
    assert!(
        status_nspid_ends_with_1(&status),
        "vloer-run is not PID 1 of its namespace:\n{status}"
    );
    let reaped = zombies_reaped(vloer);
    harness::kill_pid(vloer, libc::SIGTERM);
    let f = run.finish();
    let v = assert_orphans_reaped(reaped, "PID 1", &f);
    assert_eq!(v["reason"], "signal", "{f}");
    assert_eq!(v["child"]["pid"], pids[0], "{f}");
}

/// `NSpid:` lists the pid in every namespace from the outermost in; the last is vloer-run's own.
fn status_nspid_ends_with_1(status: &str) -> bool {
    harness::status_field(status, "NSpid")
        .split_whitespace()
        .last()
        == Some("1")
}
