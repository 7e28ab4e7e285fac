//! What the stop covers: descendants left behind by the main child, a double-forked setsid()
//! daemon (`--scope tree` stops it, `--scope group` leaves it), and processes that keep forking
//! while the stop runs.

use crate::harness::{self, Adopted, Run};

#[test]
fn descendants_left_when_the_child_exits_are_stopped() {
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let f = Run::helper(
        &[],
        &["many", "5", &harness::path_str(&ready), "--then-exit"],
    )
    .finish();
    let pids = harness::wait_for_pids(&ready);
    let mut adopted = Adopted::ours(dir.path());
    for &pid in &pids[1..] {
        adopted.add(pid);
    }
    let v = f.verdict();
    assert_eq!(v["reason"], "child_exited", "{f}");
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["sent"]["SIGTERM"], 5, "{f}");
    assert_eq!(v["reaped"], 5, "{f}");
    assert_eq!(f.code(), Some(0), "{f}");
    assert_eq!(adopted.pids(), Vec::<i32>::new(), "left alive: {f}");
}

/// Runs the double-forking daemon helper under `vloer-run FLAGS` until it exits; returns the
/// finished run, the daemon's pid and the guard that ends the daemon if the stop left it.
fn run_daemon(dir: &tempfile::TempDir, flags: &[&str]) -> (harness::Finished, i32, Adopted) {
    let pidfile = harness::tmp_path(dir, "daemon.pid");
    let f = Run::helper(flags, &["daemon", &harness::path_str(&pidfile)]).finish();
    let daemon = harness::wait_for_pids(&pidfile)[0];
    let mut adopted = Adopted::ours(dir.path());
    adopted.add(daemon);
    (f, daemon, adopted)
}

#[test]
fn a_daemon_is_stopped_under_scope_tree() {
    let dir = harness::tempdir();
    let (f, daemon, _adopted) = run_daemon(&dir, &[]);
    let v = f.verdict();
    assert_eq!(v["scope"], "tree", "{f}");
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["sent"]["SIGTERM"], 1, "{f}");
    assert!(
        !harness::alive_ours(daemon, dir.path()),
        "the daemon {daemon} outlived the stop: {f}"
    );
}

#[test]
fn a_daemon_is_left_alone_under_scope_group() {
    let dir = harness::tempdir();
    let (f, daemon, mut adopted) = run_daemon(&dir, &["--scope", "group"]);
    let v = f.verdict();
    assert_eq!(v["scope"], "group", "{f}");
    // The group is empty: that is all --scope group checks.
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["sent"], serde_json::json!({}), "{f}");
    assert!(
        harness::alive_ours(daemon, dir.path()),
        "--scope group stopped the daemon {daemon}, which left the group: {f}"
    );
    adopted.end_all();
}

/// Runs a fork-loop helper and checks that every process it ever made is gone afterwards, and
/// that the verdict says so after at least one SIGKILL; returns the run, its verdict and the pids.
fn forking_during_the_stop(
    extra: &[&str],
    flags: &[&str],
) -> (harness::Finished, serde_json::Value, Vec<i32>) {
    let _storm = harness::storm();
    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let log = harness::tmp_path(&dir, "log");
    let (ready_s, log_s) = (harness::path_str(&ready), harness::path_str(&log));
    let mut run = Run::helper(
        &[&["--grace", "300ms", "--kill-timeout", "20s"], extra].concat(),
        &[&["fork-loop", &ready_s, &log_s], flags].concat(),
    );
    // A file takes every -v line, where a pipe whose reader is behind would see some left out.
    let err = harness::tmp_path(&dir, "stderr");
    run.cmd
        .stderr(std::fs::File::create(&err).expect("stderr file"));
    let mut f = run.finish();
    f.stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let pgid = harness::wait_for_pids(&ready)[0];
    let pids = harness::read_pids(&log);
    let left: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|&p| harness::alive_ours(p, dir.path()))
        .collect();
    if !left.is_empty() {
        // Every generation stays in the helper's group: end them all at once, then fail.
        harness::end_group(pgid);
    }
    assert!(
        left.is_empty(),
        "{} of {} processes outlived the stop: {f}",
        left.len(),
        pids.len()
    );
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert!(v["sent"]["SIGKILL"].as_u64().unwrap_or(0) >= 1, "{f}");
    (f, v, pids)
}

#[test]
fn a_process_that_keeps_forking_is_still_stopped() {
    let (f, v, pids) = forking_during_the_stop(&["--timeout", "300ms"], &[]);
    assert_eq!(v["reason"], "timeout", "{f}");
    assert!(pids.len() > 1, "the helper never forked: {f}");
}

#[test]
fn a_process_that_keeps_changing_its_pid_is_still_stopped() {
    // Each generation forks as fast as it can and exits: whatever pid a scan finds may be gone
    // by the time it is signalled, its child alive.
    let (f, v, pids) = forking_during_the_stop(&[], &["--hop", "--fast"]);
    assert_eq!(v["reason"], "child_exited", "{f}");
    // Later generations were found by rescans during the grace, then killed.
    assert!(v["sent"]["SIGTERM"].as_u64().unwrap_or(0) >= 2, "{f}");
    assert!(pids.len() > 2, "{f}");
}

#[test]
fn a_process_that_keeps_changing_its_pid_is_still_stopped_under_scope_group() {
    // The group scope reads all of /proc, a slower scan: more of the scanned generations are
    // gone by the time they are signalled, and only a rescan finds their children.
    let (f, v, pids) = forking_during_the_stop(&["--scope", "group"], &["--hop", "--fast"]);
    assert_eq!(v["scope"], "group", "{f}");
    assert!(pids.len() > 2, "{f}");
}

#[test]
fn a_tree_larger_than_the_descriptor_limit_is_still_stopped_and_confirmed() {
    let _storm = harness::storm();
    // One pidfd per tracked process: with the soft limit at 64, a 300-process stop only works
    // because vloer-run raises its own limit; the child still gets the 64 it was started with.
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let low = ["prlimit", "--nofile=64:", "--"];
    let f = Run::via(
        &low,
        harness::helper_argv(
            &[],
            &["many", "300", &harness::path_str(&ready), "--then-exit"],
        ),
    )
    .finish();
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["sent"]["SIGTERM"], 300, "{f}");
    for pid in harness::read_pids(&ready) {
        assert!(!harness::alive(pid), "{pid} survived: {f}");
    }
    let f = Run::via(&low, ["--verdict", "off", "--", "sh", "-c", "ulimit -n"]).finish();
    assert_eq!(
        f.stdout.trim(),
        "64",
        "the child's limit is the one vloer-run started with: {f}"
    );
}

/// The hoppers `subreaper-hop` logged in `log` that are still alive (each generation stays in
/// `group`, which is then ended at once), and how many it logged.
fn hoppers_left(dir: &tempfile::TempDir, log: &std::path::Path, group: i32) -> (Vec<i32>, usize) {
    let hoppers = harness::read_pids(log);
    let left: Vec<i32> = hoppers
        .iter()
        .copied()
        .filter(|&p| harness::alive_ours(p, dir.path()))
        .collect();
    if !left.is_empty() {
        harness::end_group(group);
    }
    (left, hoppers.len())
}

#[test]
fn a_member_orphaned_to_an_inner_subreaper_is_never_missed_under_scope_group() {
    let _storm = harness::storm();
    // A subreaper outside the child's group, and below it processes that join the group and keep
    // forking away from their pid: each live one is orphaned to the subreaper, where a walk that
    // re-reads only vloer-run's own children misses it. Only the kernel's word on the group
    // (signal 0) may end the stop before its deadline, and the grace is waited out, then
    // SIGKILL, every time.
    for round in 0..20 {
        let dir = harness::tempdir();
        let ready = harness::tmp_path(&dir, "ready");
        let log = harness::tmp_path(&dir, "log");
        let f = Run::helper(
            &[
                "--scope",
                "group",
                "--grace",
                "300ms",
                "--kill-timeout",
                "20s",
            ],
            &[
                "subreaper-hop",
                &harness::path_str(&ready),
                &harness::path_str(&log),
            ],
        )
        .finish();
        let pids = harness::wait_for_pids(&ready);
        let (group, subreaper) = (pids[0], pids[1]);
        let mut adopted = Adopted::ours(dir.path());
        adopted.add(subreaper);
        let (left, hoppers) = hoppers_left(&dir, &log, group);
        let v = f.verdict();
        assert!(
            left.is_empty(),
            "round {round}: {} of {hoppers} hoppers outlived a stop that said {}: {f}",
            left.len(),
            v["stopped"]
        );
        assert_eq!(v["stopped"], true, "round {round}: {f}");
        // The subreaper left the group: under --scope group it is neither signalled nor checked.
        assert!(
            harness::alive_ours(subreaper, dir.path()),
            "round {round}: {f}"
        );
        let elapsed = v["elapsed_ms"].as_u64().unwrap_or(u64::MAX);
        assert!(
            elapsed < 15_000,
            "round {round}: the stop took {elapsed} ms: {f}"
        );
        adopted.end_all();
    }
}

#[test]
fn an_outsider_that_joins_the_childs_group_hears_only_the_groups_first_signal() {
    // A process of the caller's session (not of the run) moves into the child's group. Step 1's
    // signal to the group reaches it, as under `tini -g`; the SIGKILL that follows never does,
    // and it does not count in the verdict.
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let (run, pids) = Run::helper(
        &["--scope", "group", "--grace", "300ms"],
        &["ignore-term", &harness::path_str(&ready)],
    )
    .start_until_ready(&ready);
    let joined = dir.path().join("joined");
    let mut outsider = std::process::Command::new(harness::helper())
        .args([
            "join-group",
            &pids[0].to_string(),
            &harness::path_str(&joined),
        ])
        .spawn()
        .expect("the outsider");
    let opid = harness::wait_for_pids(&joined)[0];
    let f = run.finish_after(libc::SIGTERM);
    let survived = harness::alive(opid) && harness::state(opid) != Some('Z');
    harness::kill_pid(opid, libc::SIGKILL);
    let _ = outsider.wait();
    assert!(
        survived,
        "the run's stop killed {opid}, which only joined the child's group from outside: {f}"
    );
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["survivors"], serde_json::json!([]), "{f}");
    assert_eq!(v["sent"]["SIGKILL"], 1, "only the child was killed: {f}");
}

#[test]
fn an_outsider_in_the_group_is_no_proof_that_the_runs_members_are_gone() {
    let _storm = harness::storm();
    // Processes orphaned to an inner subreaper keep joining the child's group and forking away,
    // and an outsider from the caller's session holds the group too: that /proc shows only the
    // outsider in it proves nothing while the run has processes elsewhere. The stop waits out the
    // grace, sends SIGKILL, and says true only when no hopper is left.
    for round in 0..5 {
        let dir = harness::tempdir();
        let (ready, log, group, joined) = (
            dir.path().join("ready"),
            dir.path().join("log"),
            dir.path().join("group"),
            dir.path().join("joined"),
        );
        let script = format!(
            "echo $$ > {g}.tmp && mv {g}.tmp {g}; sleep 0.3; exec {h} subreaper-hop {r} {l}",
            g = harness::path_str(&group),
            h = harness::helper(),
            r = harness::path_str(&ready),
            l = harness::path_str(&log),
        );
        let run = Run::new([
            "--scope",
            "group",
            "--grace",
            "1s",
            "--kill-timeout",
            "2s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .start();
        let pgid = harness::wait_for_pids(&group)[0];
        let mut outsider = std::process::Command::new(harness::helper())
            .args(["join-group", &pgid.to_string(), &harness::path_str(&joined)])
            .spawn()
            .expect("the outsider");
        let opid = harness::wait_for_pids(&joined)[0];
        let f = run.finish();
        harness::kill_pid(opid, libc::SIGKILL);
        let _ = outsider.wait();
        let subreaper = harness::wait_for_pids(&ready)[1];
        let mut adopted = Adopted::ours(dir.path());
        adopted.add(subreaper);
        let (left, _) = hoppers_left(&dir, &log, pgid);
        adopted.end_all();
        let v = f.verdict();
        assert!(
            v["stopped"] == false || left.is_empty(),
            "round {round}: stopped:true while {} hoppers lived: {f}",
            left.len()
        );
        assert!(
            v["sent"]["SIGKILL"].as_u64().unwrap_or(0) >= 1,
            "round {round}: the stop ended without its SIGKILL: {f}"
        );
    }
}
