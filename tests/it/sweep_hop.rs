//! The folder sweep against holders that move where a scan has already looked: a file table
//! that lives only in a thread newer than any listing of the process's threads, and processes
//! that keep taking pid numbers the scan has already read. Neither may ever be called gone.

use crate::harness::{self, Run};
use std::process::Command;
use std::time::Duration;

#[test]
fn a_table_that_hops_from_thread_to_thread_is_never_called_gone() {
    let _storm = harness::storm();
    // One thread unshared its file table (or working directory) and holds the folder with it;
    // each thread sharing it starts the next and exits, so a single listing of the process's
    // threads never shows one alive by the time it is read. It ignores SIGTERM: the sweep scans
    // again and again until the grace ends, each scan a chance to say gone. The verdict is false
    // while it lives, or the sweep found it and it is gone.
    for round in 0..2 {
        for (how, what) in [("files", "fd"), ("fs", "cwd")] {
            let dir = harness::tempdir();
            let folder = dir.path().join("w");
            std::fs::create_dir(&folder).unwrap();
            let ready = dir.path().join("ready");
            let folder_s = harness::path_str(&folder);
            let run = Run::new([
                "--sweep",
                &folder_s,
                "--grace",
                "1500ms",
                "--kill-timeout",
                "500ms",
                "--",
                "sleep",
                "0.4",
            ])
            .start();
            // A clock tick (10 ms) or more into the run: it started during the run.
            std::thread::sleep(Duration::from_millis(100));
            let mut hopper = Command::new(harness::helper())
                .args(["thread-hop", how])
                .arg(harness::path_str(&ready))
                .env("HELPER_DIR", &folder)
                .current_dir("/")
                .spawn()
                .expect("the helper");
            let pid = harness::wait_for_pids(&ready)[0];
            let f = run.finish();
            let alive = harness::state(pid).is_some_and(|s| s != 'Z');
            let _ = hopper.kill();
            let _ = hopper.wait();
            let v = f.verdict();
            assert!(
                !alive || v["stopped"] == false,
                "round {round}, {how}: stopped:true while {pid} holds the folder: {f}"
            );
            if alive {
                assert_eq!(f.code(), Some(125), "{f}");
                assert!(v["error"].is_string(), "{f}");
            } else {
                assert!(
                    harness::sweep_lists(&v, pid, Some(what)),
                    "round {round}, {how}: gone, yet not found by its threads' {what}: {f}"
                );
            }
        }
    }
}

/// As pid 1 of a pid namespace of its own (with its own /proc): a process whose descendants
/// keep taking the same few pid numbers in turn (root sets `ns_last_pid`), each working in the
/// folder, and vloer-run sweeping it. Writes the verdict to `v`, vloer-run's status to `s`, and
/// `alive` when the descendants still hopped after the run.
const CYCLE: &str = r#"
    D=$1 VR=$2 H=$3
    cd /
    HELPER_DIR="$D/w" "$H" pid-cycle 3 "$D/ready" &
    R=$!
    while [ ! -s "$D/ready" ]; do sleep 0.01; done
    "$VR" --sweep "$D/w" --grace 1500ms --kill-timeout 500ms --verdict "$D/v" -- sleep 0.3
    echo $? > "$D/s"
    # The subreaper exits once no descendant is left.
    if kill -0 "$R"; then echo alive > "$D/alive"; fi
    kill -9 "$R"
"#;

#[test]
fn processes_that_take_pid_numbers_the_scan_already_read_are_never_called_gone() {
    let _storm = harness::storm();
    // Each generation lives for microseconds on a number a listing showed before, as another
    // process: a scan that knew entries by number alone never read one, and said true. They
    // ignore SIGTERM, so the sweep scans again and again until the grace ends. The last
    // generation dies with pid 1 of its namespace when the script ends.
    if !harness::is_root() {
        harness::skip("setting ns_last_pid in a pid namespace needs root");
        return;
    }
    let ns = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"];
    if !harness::works_here(&ns, "unshare --pid") {
        return;
    }
    for round in 0..3 {
        let dir = harness::tempdir();
        std::fs::create_dir(dir.path().join("w")).unwrap();
        let mut cmd = Command::new(ns[0]);
        cmd.args(&ns[1..])
            .args(["sh", "-c", CYCLE, "sh"])
            .arg(dir.path())
            .arg(harness::bin())
            .arg(harness::helper());
        let f = Run::of(cmd).finish();
        let text = std::fs::read_to_string(dir.path().join("v")).unwrap_or_default();
        let v = harness::parse_verdict(&text).unwrap_or_else(|| panic!("no verdict: {f}"));
        let status = std::fs::read_to_string(dir.path().join("s")).unwrap_or_default();
        if dir.path().join("alive").exists() {
            assert_eq!(
                v["stopped"], false,
                "round {round}: stopped:true while the generations hop on: {v}\n{f}"
            );
            assert_eq!(status.trim(), "125", "{v}");
            assert!(v["error"].is_string(), "{v}");
        } else {
            assert!(
                v["sweep"]["holders"]
                    .as_array()
                    .is_some_and(|h| !h.is_empty()),
                "round {round}: the generations ended, yet none was found: {v}\n{f}"
            );
        }
    }
}
