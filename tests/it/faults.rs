//! Faults and hostile conditions: vloer-run's own output failing, recycled pids, fork
//! storms, stopped, traced and TERM-blocking descendants, long runs, repeated stop signals, and
//! SIGKILL to vloer-run itself. Every case is reproduced for real; huge inputs and the control
//! socket under fuzzing are in huge.rs.

use crate::harness::{
    self, alive, path_str, state, wait_for_pids, wait_for_text, wait_gone, wait_until, Adopted,
    Finished, Run, Running,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Machinery shared by the cases below.

/// `sh -c SCRIPT sh ARGS...`, ended with its whole tree if the test fails.
fn sh(script: &str, args: &[&str]) -> Running {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script, "sh"]).args(args);
    Run::of(cmd).start()
}

/// Whether `unshare` with these namespace flags works here (root, util-linux); prints why not.
fn can_unshare(flags: &[&str]) -> bool {
    if !harness::is_root() {
        return !harness::skip("making namespaces needs root");
    }
    let argv: Vec<&str> = std::iter::once("unshare")
        .chain(flags.iter().copied())
        .collect();
    harness::works_here(&argv, &format!("unshare {flags:?}"))
}

const PID_NS: &[&str] = &["--pid", "--fork", "--mount-proc", "--kill-child"];

/// Runs `script` as pid 1 of a new pid namespace with its own /proc. When the script ends, the
/// kernel kills whatever is left in the namespace, so nothing can escape the test.
fn in_pid_namespace(script: &str, args: &[&str]) -> Running {
    let mut cmd = Command::new("unshare");
    cmd.args(PID_NS).args(["sh", "-c", script, "sh"]).args(args);
    Run::of(cmd).start()
}

/// A temporary folder anyone may write to (for processes that run under another uid).
fn open_tempdir() -> tempfile::TempDir {
    let dir = harness::tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod 777");
    dir
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn verdict_in(path: &Path, context: &dyn std::fmt::Display) -> serde_json::Value {
    harness::parse_verdict(&read(path)).unwrap_or_else(|| {
        panic!(
            "no verdict in {}:\n{}\n{context}",
            path.display(),
            read(path)
        )
    })
}

/// How many verdict lines a stream holds.
fn verdicts(text: &str) -> usize {
    text.lines()
        .filter(|l| harness::parse_verdict(l).is_some())
        .count()
}

/// The tree was stopped, yet the run failed (125) and says why: `error` names `cause`.
fn assert_stopped_but_failed(v: &serde_json::Value, cause: &str, context: &dyn std::fmt::Display) {
    assert_eq!(v["stopped"], true, "{context}");
    assert_eq!(v["exit_code"], 125, "{context}");
    assert!(
        v["error"].as_str().unwrap_or_default().contains(cause),
        "{context}"
    );
}

fn sent(v: &serde_json::Value, sig: &str) -> u64 {
    v["sent"].get(sig).and_then(|n| n.as_u64()).unwrap_or(0)
}

/// A field of /proc/PID/status in kB (VmRSS) or as a number.
fn status_number(pid: i32, field: &str) -> u64 {
    let value = harness::proc_status(pid, field);
    value
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{field} of {pid}: {value:?}"))
}

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or_else(|e| panic!("/proc/{pid}/fd: {e}"))
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill takes plain integers; every pid given here is one this test made and still
    // holds (an unreaped child, or a process it waited for by pidfd or /proc).
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Asserts that every pid is gone (zombies count as gone: vloer-run's children may wait for
/// the caller's init to reap them).
fn assert_all_gone(pids: &[i32], out: &Finished) {
    for pid in pids {
        assert!(!alive(*pid), "pid {pid} outlived the run:\n{out}");
    }
}

// ---------------------------------------------------------------------------------------------
// Its own output fails: the child is still stopped, the stop still confirmed, the failure
// reported where it can be, exit 125.

#[test]
fn closed_stderr_still_stops_the_tree_and_exits_125() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let sock = dir.path().join("ctl");
    let fd2 = dir.path().join("fd2");
    // The child (a shell: a Rust program would reopen fd 2 itself) notes whether it has an fd 2.
    let child = r#"if [ -e /proc/self/fd/2 ]; then echo open; else echo closed; fi > "$0"; exec "$1" many 2 "$2""#;
    let script = r#"exec 2>&-; exec "$1" --control "$2" -- sh -c "$3" "$4" "$5" "$6""#;
    let run = sh(
        script,
        &[
            harness::bin(),
            &path_str(&sock),
            child,
            &path_str(&fd2),
            harness::helper(),
            &path_str(&ready),
        ],
    );
    let pids = wait_for_pids(&ready);
    // The child gets stderr closed, as vloer-run got it (vloer-run keeps /dev/null there).
    assert_eq!(
        read(&fd2).trim(),
        "closed",
        "the child must get fd 2 closed, as it was"
    );
    assert!(
        Path::new(&format!("/proc/{}/fd/2", run.pid())).exists(),
        "vloer-run must keep fd 2 taken (by /dev/null)"
    );
    // The only channels left are a control client and the exit status.
    let client = Run::new(["stop", "--control", &path_str(&sock)]).finish();
    let out = run.finish();
    assert_eq!(out.code(), Some(125), "{out}");
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "nothing may reach a closed stderr or stdout: {out}"
    );
    assert_stopped_but_failed(&client.stdout_verdict(), "stderr was closed", &client);
    assert_all_gone(&pids, &out);
}

#[test]
fn closed_stderr_with_a_verdict_file_loses_nothing() {
    let dir = harness::tempdir();
    let file = dir.path().join("verdict.json");
    let out = sh(
        r#"exec 2>&-; exec "$1" --verdict "$2" -- sh -c 'exit 3'"#,
        &[harness::bin(), &path_str(&file)],
    )
    .finish();
    assert_eq!(out.code(), Some(3), "{out}");
    let v = verdict_in(&file, &out);
    assert_eq!(v["stopped"], true);
    assert!(v.get("error").is_none(), "{v}");
}

#[test]
fn closed_stdout_for_the_verdict_is_reported_and_exits_125() {
    let out = sh(
        r#"exec >&-; exec "$1" --verdict - -- sh -c 'exit 3'"#,
        &[harness::bin()],
    )
    .finish();
    assert_eq!(out.code(), Some(125), "{out}");
    assert!(
        out.messages()
            .iter()
            .any(|m| m.contains("stdout was closed")),
        "{out}"
    );
    let v = out.verdict();
    assert_eq!(v["stopped"], true, "{out}");
    assert_eq!(v["child"]["exit_code"], 3, "{out}");
}

#[test]
fn broken_stdout_pipe_is_reported_not_a_death_by_sigpipe() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let mut run = Run::helper(&["--verdict", "-"], &["many", "2", &path_str(&ready)]).start();
    // The reader goes away before the verdict is written.
    drop(run.child.stdout.take());
    let pids = wait_for_pids(&ready);
    let out = run.finish_after(libc::SIGTERM);
    assert_eq!(
        out.status.code(),
        Some(125),
        "vloer-run must exit 125, not die of SIGPIPE: {out}"
    );
    assert!(
        out.stderr.contains("writing the verdict to stdout"),
        "the failure is reported on stderr: {out}"
    );
    // The verdict itself falls back to stderr, with the failure in it.
    assert_stopped_but_failed(&out.verdict(), "Broken pipe", &out);
    assert_all_gone(&pids, &out);
}

/// vloer-run with `--verdict DIR/verdict.json`, where DIR is a tmpfs made read-only or full
/// (`how`) in a mount namespace of its own: the tree is still stopped, the failure is named in a
/// message (`message`) and in the verdict's error (`in_error`), and the exit is 125.
fn a_verdict_on_a_broken_tmpfs_is_reported(how: &str, message: &str, in_error: &str) {
    if !can_unshare(&["--mount"]) {
        return;
    }
    let dir = harness::tempdir();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let ready = dir.path().join("ready");
    let script = r#"
        set -e
        mnt=$1 how=$2; shift 2
        mount -t tmpfs -o size=4k,nr_inodes=64 vloer-test "$mnt"
        case $how in
            ro) mount -o remount,ro "$mnt" ;;
            full) head -c 65536 /dev/zero > "$mnt/fill" 2>/dev/null || true ;;
        esac
        exec "$@"
    "#;
    let mut args = vec![path_str(&mnt), how.to_string(), harness::bin().to_string()];
    args.extend(harness::helper_argv(
        &["--verdict", &path_str(&mnt.join("verdict.json"))],
        &["many", "2", &path_str(&ready)],
    ));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(cmd) = harness::in_mount_ns(script, &args) else {
        return;
    };
    let (run, pids) = Run::of(cmd).start_until_ready(&ready);
    let out = run.finish_after(libc::SIGTERM);
    assert_eq!(out.code(), Some(125), "{out}");
    assert!(
        out.messages()
            .iter()
            .any(|m| m.contains("verdict.json") && m.contains(message)),
        "{out}"
    );
    assert_stopped_but_failed(&out.verdict(), in_error, &out);
    assert_all_gone(&pids, &out);
}

#[test]
fn read_only_verdict_folder_is_reported_and_exits_125() {
    a_verdict_on_a_broken_tmpfs_is_reported("ro", "Read-only file system", "Read-only file system");
}

#[test]
fn full_verdict_filesystem_is_reported_and_exits_125() {
    a_verdict_on_a_broken_tmpfs_is_reported("full", "No space left on device", "No space left");
}

// ---------------------------------------------------------------------------------------------
// Pid reuse.

/// The shell half of a pid-reuse scene, run by `in_pid_namespace` with the arguments DIR,
/// vloer-run and the helper. `fail MESSAGE` records why the scene could not be set up.
/// `recycle PID` waits until PID is free, then starts the bystander on that very pid (a recorder
/// outside the run, leading a session and group of its own) as $B, and waits until it records.
/// `report` waits for vloer-run ($VR_PID), then records its status and the bystander's state.
const PID_REUSE: &str = r#"
    D=$1 VR=$2 H=$3
    fail() { echo "$*" > "$D/fail"; exit 1; }
    published() { until [ -s "$1" ]; do sleep 0.01; done; cat "$1"; }
    recycle() {
        while [ -e "/proc/$1" ]; do sleep 0.01; done
        # No fork may happen between the next two steps.
        echo $(($1 - 1)) > /proc/sys/kernel/ns_last_pid
        setsid "$H" record "$D/bystander" &
        B=$!
        [ "$B" = "$1" ] || fail "the bystander got pid $B, not the recycled $1"
        until grep -q '^ready' "$D/bystander" 2>/dev/null; do sleep 0.01; done
    }
    report() {
        wait $VR_PID
        echo $? > "$D/status"
        read -r _ _ s _ < "/proc/$B/stat" && echo "$s" > "$D/bystander-state"
        echo "$B" > "$D/bystander-pid"
    }
"#;

/// Runs a pid-reuse scene (`PID_REUSE`, then `script`) in `dir` and checks that it was set up
/// and ran to its end, and that the bystander was never signalled and still lives; returns
/// vloer-run's verdict, its status as `report` recorded it, and the context to print.
fn pid_reuse_scene(dir: &Path, script: &str) -> (serde_json::Value, String, String) {
    let script = [PID_REUSE, script].concat();
    let out = in_pid_namespace(
        &script,
        &[&path_str(dir), harness::bin(), harness::helper()],
    )
    .finish();
    let ctx = format!("{out}\n--- vloer-run's log\n{}", read(&dir.join("log")));
    assert!(
        !dir.join("fail").exists(),
        "{}\n{ctx}",
        read(&dir.join("fail"))
    );
    assert_eq!(out.code(), Some(0), "{ctx}");
    let b = read(&dir.join("bystander-pid")).trim().to_string();
    assert_eq!(
        read(&dir.join("bystander")).trim(),
        format!("ready {b}"),
        "the bystander (pid {b}) was signalled\n{ctx}"
    );
    assert_eq!(
        read(&dir.join("bystander-state")).trim(),
        "S",
        "the bystander must still live\n{ctx}"
    );
    let v = verdict_in(&dir.join("verdict"), &ctx);
    let status = read(&dir.join("status")).trim().to_string();
    (v, status, ctx)
}

/// The main child leaves a TERM-ignoring process behind (in a session of its own) and exits, so
/// the stop sits in its grace period. Its pid, now free, is recycled through `ns_last_pid` into a
/// bystander outside the run that is a process-group leader, exactly where the child's group was.
/// Signals vloer-run receives during the stop are forwarded "to the child's group": none of them
/// may reach the bystander, and neither may anything the stop sends.
#[test]
fn a_recycled_child_pid_never_receives_a_signal() {
    if !can_unshare(PID_NS) {
        return;
    }
    let dir = harness::tempdir();
    let script = r#"
        "$VR" -v --grace 5s --kill-timeout 2s --verdict "$D/verdict" -- sh -c '
            setsid "$0" ignore-term "$1/held" &
            until [ -s "$1/held" ]; do sleep 0.01; done
            echo $$ > "$1/child"' "$H" "$D" 2> "$D/log" &
        VR_PID=$!
        C=$(published "$D/child")
        HELD=$(cat "$D/held")
        # Reaped by vloer-run: the pid is free.
        recycle "$C"
        kill -USR1 $VR_PID; kill -HUP $VR_PID; kill -TERM $VR_PID
        until grep -q 'received SIGTERM' "$D/log"; do sleep 0.01; done
        # Proof that the signals came during the grace period: the held process still lives.
        [ -e "/proc/$HELD" ] || fail "too slow: the grace period was over before the signals came"
        report
    "#;
    let (v, status, ctx) = pid_reuse_scene(dir.path(), script);
    assert_eq!(v["stopped"], true, "{ctx}");
    assert_eq!(v["reason"], "child_exited", "{ctx}");
    assert_eq!(
        sent(&v, "SIGKILL"),
        1,
        "the held process is KILLed after the grace period\n{ctx}"
    );
    assert_eq!(status, "0", "{ctx}");
}

/// An exec leaves a TERM-ignoring process behind and exits; while its stop sits in the grace
/// period, the main child recycles the exec's pid (through `ns_last_pid`) for a process of its
/// own. The exec's stop knows its process by pid and start time: its SIGKILL reaches the
/// exec's leftover, never the main child's process that took the number.
#[test]
fn an_execs_recycled_pid_never_receives_the_execs_kill() {
    if !can_unshare(PID_NS) {
        return;
    }
    let dir = harness::tempdir();
    let script = r#"
        D=$1 VR=$2
        fail() { echo "$*" > "$D/fail"; exit 1; }
        "$VR" -v --grace 2s --control "$D/s" --verdict "$D/verdict" -- sh -c '
            until [ -s "$1/exec" ]; do sleep 0.01; done
            R=$(cat "$1/exec")
            while [ -e "/proc/$R" ]; do sleep 0.01; done
            # No fork may happen between the next two steps.
            echo $((R - 1)) > /proc/sys/kernel/ns_last_pid
            sleep 9131 &
            echo $! > "$1/reused.tmp" && mv "$1/reused.tmp" "$1/reused"
            wait' sh "$D" 2> "$D/log" &
        VR_PID=$!
        until [ -S "$D/s" ]; do sleep 0.01; done
        "$VR" exec --control "$D/s" -- sh -c '
            trap "" TERM
            setsid sleep 9130 &
            echo $$ > "$1/exec.tmp" && mv "$1/exec.tmp" "$1/exec"' sh "$D" > "$D/exec-out" 2>&1
        echo $? > "$D/exec-status"
        until [ -s "$D/reused" ]; do sleep 0.01; done
        [ "$(cat "$D/reused")" = "$(cat "$D/exec")" ] || fail "the main child's sleep got pid $(cat "$D/reused"), not the recycled $(cat "$D/exec")"
        read -r _ _ st _ < "/proc/$(cat "$D/reused")/stat"
        echo "$st" > "$D/reused-state"
        kill -TERM $VR_PID
        wait $VR_PID
    "#;
    let out = in_pid_namespace(script, &[&path_str(dir.path()), harness::bin()]).finish();
    let ctx = format!(
        "{out}\n--- vloer-run's log\n{}\n--- exec\n{}",
        read(&dir.path().join("log")),
        read(&dir.path().join("exec-out"))
    );
    assert!(
        !dir.path().join("fail").exists(),
        "{}\n{ctx}",
        read(&dir.path().join("fail"))
    );
    assert_eq!(
        read(&dir.path().join("reused-state")).trim(),
        "S",
        "the exec's stop killed the main child's process that took its pid\n{ctx}"
    );
    assert_eq!(read(&dir.path().join("exec-status")).trim(), "0", "{ctx}");
}

/// `--scope group`: the group is the child's, and the stop scans it afresh. Here the child exits
/// (`--when-child-exits wait`), the last member leaves the group (setsid), and the child's pid
/// is recycled into a bystander outside the run that leads a group with that very id. The stop
/// that --timeout then starts must not take the bystander for a member.
#[test]
fn group_scope_never_takes_a_recycled_group_for_the_child_s() {
    if !can_unshare(PID_NS) {
        return;
    }
    let dir = harness::tempdir();
    // The main child starts a member of its group and exits; the member waits for `go`, then
    // leaves the group for a session of its own.
    std::fs::write(
        dir.path().join("child.sh"),
        "sh \"$1/member.sh\" \"$1\" \"$2\" &\necho $$ > \"$1/child\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("member.sh"),
        "until [ -e \"$1/go\" ]; do sleep 0.01; done\nexec setsid \"$2\" sleep \"$1/member\"\n",
    )
    .unwrap();
    let script = r#"
        "$VR" -v --scope group --when-child-exits wait --timeout 6s --grace 1s --control "$D/ctl" \
            --verdict "$D/verdict" -- sh "$D/child.sh" "$D" "$H" 2> "$D/log" &
        VR_PID=$!
        C=$(published "$D/child")
        until "$VR" status --control "$D/ctl" 2>/dev/null | grep -q '"state":"waiting"'; do sleep 0.01; done
        touch "$D/go"
        until [ -s "$D/member" ]; do sleep 0.01; done
        recycle "$C"
        grep -q 'stopping' "$D/log" && fail "too slow: the stop began before the bystander was in place"
        report
    "#;
    let (v, status, ctx) = pid_reuse_scene(dir.path(), script);
    assert_eq!(
        (v["stopped"].as_bool(), v["reason"].as_str()),
        (Some(true), Some("timeout")),
        "{ctx}"
    );
    assert!(v["survivors"].as_array().unwrap().is_empty(), "{ctx}");
    assert_eq!(status, "124", "{ctx}");
}

// ---------------------------------------------------------------------------------------------
// Fork storms.

/// A fork storm that ignores SIGTERM, bounded by RLIMIT_NPROC under a uid of its own, inside a
/// pid namespace. The stop must converge, or say stopped:false truthfully, within grace +
/// kill-timeout + 1 s; the namespace's own /proc then says what is really left.
#[test]
fn fork_storm_converges_or_is_reported_truthfully_in_time() {
    let _storm = harness::storm();
    if !can_unshare(PID_NS) {
        return;
    }
    let dir = open_tempdir();
    let d = path_str(dir.path());
    // An unused uid: RLIMIT_NPROC counts the processes of the real uid across the machine.
    let uid = (2_000_000_000 + std::process::id() % 1_000_000).to_string();
    const LIMIT: &str = "48";
    let script = r#"
        D=$1 VR=$2 H=$3 U=$4 N=$5
        "$VR" --timeout 1s --grace 1s --kill-timeout 3s --verdict "$D/verdict" -- \
            prlimit --nproc=$N:$N setpriv --reuid=$U --regid=$U --clear-groups "$H" storm "$D/ready" 2> "$D/log"
        echo $? > "$D/status"
        # What is left of the storm, as this namespace's /proc sees it; zombies do not count.
        left=0
        for f in /proc/[0-9]*/status; do
            s= u=
            { while read -r k v _; do
                case $k in State:) s=$v ;; Uid:) u=$v ;; esac
            done < "$f"; } 2>/dev/null
            if [ "$u" = "$U" ] && [ "$s" != Z ] && [ "$s" != X ]; then left=$((left + 1)); fi
        done
        echo $left > "$D/left"
    "#;
    let out = in_pid_namespace(
        script,
        &[
            &d,
            harness::bin(),
            harness::helper_for_others(),
            &uid,
            LIMIT,
        ],
    )
    .finish();
    let ctx = format!(
        "{out}\n--- vloer-run's stderr\n{}",
        read(&dir.path().join("log"))
    );
    assert!(
        dir.path().join("ready").exists(),
        "the storm never started\n{ctx}"
    );
    let v = verdict_in(&dir.path().join("verdict"), &ctx);
    let left: usize = read(&dir.path().join("left"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no count of what was left\n{ctx}"));
    let status = read(&dir.path().join("status"));
    eprintln!("fork storm: {v}; {left} storm processes left");
    assert_eq!(v["reason"], "timeout", "{ctx}");
    assert!(sent(&v, "SIGKILL") >= 10, "that was no storm: {v}");
    // grace 1 s + kill-timeout 3 s + 1 s
    let elapsed = v["elapsed_ms"].as_u64().unwrap();
    assert!(elapsed <= 5000, "the stop took {elapsed} ms\n{ctx}");
    if v["stopped"] == true {
        assert_eq!(left, 0, "stopped:true, yet storm processes live\n{ctx}");
        assert_eq!(status.trim(), "124", "{ctx}");
    } else {
        assert!(
            left > 0 && !v["survivors"].as_array().unwrap().is_empty(),
            "stopped:false must be true too\n{ctx}"
        );
        assert_eq!(status.trim(), "125", "{ctx}");
    }
}

// ---------------------------------------------------------------------------------------------
// Stopped, traced and TERM-blocking descendants.

#[test]
fn sigstopped_processes_still_end_on_the_stop_signal() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let (run, pids) = Run::helper(&["--grace", "30s"], &["many", "2", &path_str(&ready)])
        .start_until_ready(&ready);
    for pid in &pids {
        kill(*pid, libc::SIGSTOP);
    }
    wait_until("every process stopped", || {
        pids.iter().all(|p| state(*p) == Some('T'))
    });
    let out = run.finish_after(libc::SIGTERM);
    let v = out.verdict();
    assert_eq!(v["stopped"], true, "{out}");
    // They ended on SIGTERM (woken by SIGCONT), not on the SIGKILL 30 s later.
    assert_eq!(sent(&v, "SIGKILL"), 0, "{out}");
    assert!(sent(&v, "SIGCONT") >= 3, "{out}");
    assert_eq!(out.signal(), Some(libc::SIGTERM), "{out}");
    assert!(out.elapsed < Duration::from_secs(20), "{out}");
    assert_all_gone(&pids, &out);
}

fn have_strace() -> bool {
    let ok = Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok || !harness::skip("strace is not installed (.ci/run installs it)")
}

/// `strace -p PID`, once it has attached.
fn attach_strace(pid: i32) -> std::process::Child {
    let tracer = Command::new("strace")
        .args(["-q", "-o", "/dev/null", "-p", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace");
    let tpid = tracer.id().to_string();
    wait_until("strace to attach", || {
        harness::proc_status(pid, "TracerPid") == tpid
    });
    tracer
}

fn end_tracers(tracers: &mut [std::process::Child]) {
    for t in tracers {
        let _ = t.kill();
        let _ = t.wait();
    }
}

/// Traced descendants end: the main child is a tracer (strace) that is itself stopped, like a
/// debugger at a breakpoint, with its tracee; another descendant is traced by a live strace
/// from outside the run, which passes the stop signal on.
#[test]
fn traced_processes_still_end() {
    if !have_strace() {
        return;
    }
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let run = Run::new([
        "--grace",
        "2s",
        "--kill-timeout",
        "3s",
        "--",
        "strace",
        "-q",
        "-o",
        "/dev/null",
        harness::helper(),
        "many",
        "1",
        &path_str(&ready),
    ])
    .start();
    let pids = wait_for_pids(&ready);
    let inner: i32 = harness::proc_status(pids[0], "TracerPid").parse().unwrap();
    assert_ne!(inner, 0, "strace traces the helper");
    let mut outer = [attach_strace(pids[1])];
    kill(inner, libc::SIGSTOP);
    wait_until("the inner strace to stop", || state(inner) == Some('T'));
    let out = run.finish_after(libc::SIGTERM);
    end_tracers(&mut outer);
    let v = out.verdict();
    assert_eq!(v["stopped"], true, "{out}");
    assert!(v["elapsed_ms"].as_u64().unwrap() < 5000, "{out}");
    assert_all_gone(&pids, &out);
    assert!(!alive(inner), "{out}");
}

/// A descendant held by a tracer outside the run that never resumes it cannot be ended: even
/// SIGKILL leaves it in a ptrace stop (the tracer asked to see its exit). vloer-run may not touch
/// the tracer, so the truth is stopped:false with that process listed, in time.
#[test]
fn a_process_held_by_a_frozen_outside_tracer_is_reported_as_a_survivor() {
    if !have_strace() {
        return;
    }
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let (run, pids) = Run::helper(
        &["--grace", "1s", "--kill-timeout", "1s"],
        &["many", "1", &path_str(&ready)],
    )
    .start_until_ready(&ready);
    let mut tracers = [attach_strace(pids[1])];
    let frozen = tracers[0].id() as i32;
    kill(frozen, libc::SIGSTOP);
    wait_until("strace to stop", || state(frozen) == Some('T'));
    let out = run.finish_after(libc::SIGTERM);
    let held_state = state(pids[1]);
    end_tracers(&mut tracers);
    let v = out.verdict();
    assert_eq!(
        pid_states(&v, &out),
        [(pids[1] as i64, "t".to_string())],
        "{out}"
    );
    assert_eq!(held_state, Some('t'), "the survivor really was there");
    assert_eq!(sent(&v, "SIGKILL"), 1, "{out}");
    assert!(
        v["elapsed_ms"].as_u64().unwrap() <= 3000,
        "grace 1 s + kill-timeout 1 s + 1 s: {out}"
    );
    assert!(
        wait_gone(pids[1], harness::LIMIT),
        "it ends once its tracer is gone"
    );
}

/// A stop that was not proven (`stopped` false, exit 125): its survivors' pids and states.
fn pid_states(v: &serde_json::Value, out: &harness::Finished) -> Vec<(i64, String)> {
    assert_eq!(v["stopped"], false, "{out}");
    assert_eq!(out.code(), Some(125), "{out}");
    v["survivors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["pid"].as_i64().unwrap(),
                s["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A descendant that ended while a tracer outside the run holds it is a zombie only that tracer
/// may collect: vloer-run, its reaper, cannot, so the tree cannot be proven empty. The verdict
/// names it as a survivor (state Z), not as a child that /proc does not list.
#[test]
fn a_zombie_held_by_an_outside_tracer_is_listed_as_a_survivor() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let (run, pids) = Run::helper(
        &["--grace", "500ms", "--kill-timeout", "1s"],
        &["many", "1", &path_str(&ready)],
    )
    .start_until_ready(&ready);
    // The tracer never waits: the tracee's stop for SIGTERM and then its exit on SIGKILL stay
    // with it. Dropping it (SIGKILL) lets the zombie go to its reaper.
    let attached = dir.path().join("tracer");
    let mut tracer = Command::new(harness::helper());
    tracer
        .args(["trace", &pids[1].to_string(), &path_str(&attached)])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let mut tracer = Running::of(tracer.spawn().expect("the tracer"));
    wait_until("the tracer to attach or fail", || {
        attached.exists() || tracer.child.try_wait().is_ok_and(|s| s.is_some())
    });
    if !attached.exists() {
        harness::skip("cannot ptrace a process outside the test's own tree here (Yama)");
        return;
    }
    let out = run.finish_after(libc::SIGTERM);
    let held = state(pids[1]);
    drop(tracer);
    let v = out.verdict();
    assert_eq!(
        pid_states(&v, &out),
        [(pids[1] as i64, "Z".to_string())],
        "{out}"
    );
    assert!(v.get("error").is_none(), "{out}");
    assert_eq!(held, Some('Z'), "the survivor really was a zombie: {out}");
}

/// A hard limit on open descriptors below the tree's size: one pidfd per process runs out, and
/// the stop goes on by pid and start time instead of giving up. 600 children that ignore SIGTERM,
/// under `ulimit -n 512` and `ulimit -n 16`: every one killed, the verdict true, and the child
/// started with the limit vloer-run was given.
#[test]
fn a_descriptor_limit_below_the_trees_size_does_not_abandon_the_stop() {
    for limit in ["512", "16"] {
        let dir = harness::tempdir();
        let ready = dir.path().join("ready");
        let args = harness::helper_argv(
            &["--grace", "300ms"],
            &[
                "exec",
                "--ignore",
                "TERM",
                "--",
                harness::helper(),
                "many",
                "600",
                &path_str(&ready),
            ],
        );
        let script = r#"ulimit -n "$1" && shift && exec "$@""#;
        let (run, pids) =
            Run::via(&["sh", "-c", script, "sh", limit], args).start_until_ready(&ready);
        assert_eq!(pids.len(), 601, "limit {limit}");
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", pids[0])).unwrap();
        let files = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap_or_default();
        assert_eq!(
            files.split_whitespace().filter(|w| *w == limit).count(),
            2,
            "the child's own limit: {files}"
        );
        let out = run.finish_after(libc::SIGTERM);
        let v = out.verdict();
        assert_eq!(v["stopped"], true, "limit {limit}: {out}");
        assert!(v.get("error").is_none(), "limit {limit}: {out}");
        assert!(sent(&v, "SIGKILL") >= 600, "limit {limit}: {out}");
        assert_all_gone(&pids, &out);
    }
}

#[test]
fn a_descendant_blocking_sigterm_is_killed_on_time() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    // The main child (a shell) ends on SIGTERM; its child has SIGTERM blocked.
    let script = r#""$0" exec --block TERM -- "$0" sleep "$1" & wait"#;
    let run = Run::new([
        "--grace",
        "2s",
        "--kill-timeout",
        "5s",
        "--",
        "sh",
        "-c",
        script,
        harness::helper(),
        &path_str(&ready),
    ])
    .start();
    let pids = wait_for_pids(&ready);
    let blocked = harness::proc_status(pids[0], "SigBlk");
    assert_ne!(
        u64::from_str_radix(&blocked, 16).unwrap() & (1 << (libc::SIGTERM - 1)),
        0,
        "SIGTERM is not blocked: {blocked}"
    );
    let out = run.finish_after(libc::SIGTERM);
    let v = out.verdict();
    assert_eq!(v["stopped"], true, "{out}");
    assert_eq!(sent(&v, "SIGKILL"), 1, "{out}");
    let elapsed = v["elapsed_ms"].as_u64().unwrap();
    assert!(
        (1900..3000).contains(&elapsed),
        "SIGKILL is due 2 s after SIGTERM, and no later than 1 s after that: {elapsed} ms\n{out}"
    );
    assert_all_gone(&pids, &out);
}

// ---------------------------------------------------------------------------------------------
// Long runs: nothing grows.

/// Allowed growth of vloer-run's resident memory between the two measurements: far below what a
/// leak of even a few bytes per zombie or signal would add up to, far above allocator noise.
const RSS_SLACK_KIB: u64 = 256;

#[test]
fn reaping_100k_zombies_keeps_memory_and_descriptors_flat() {
    let dir = harness::tempdir();
    let run = Run::helper(&[], &["zombies", "100000", "10000", &path_str(dir.path())]).start();
    let vr = run.pid();
    wait_for_pids(&dir.path().join("paused"));
    let (rss0, fds0) = (status_number(vr, "VmRSS"), open_fds(vr));
    std::fs::write(dir.path().join("resume"), "").unwrap();
    let made = wait_for_pids(&dir.path().join("done"));
    let (rss1, fds1) = (status_number(vr, "VmRSS"), open_fds(vr));
    let out = run.finish_after(libc::SIGTERM);
    eprintln!(
        "after 10k zombies: {rss0} kB, {fds0} fds; after {}: {rss1} kB, {fds1} fds; {:?}",
        made[0], out.elapsed
    );
    let v = out.verdict();
    assert_eq!(v["stopped"], true, "{out}");
    assert!(
        v["reaped"].as_u64().unwrap() >= 100_000,
        "the zombies did not reach vloer-run: {out}"
    );
    assert_eq!(fds1, fds0, "open descriptors grew");
    assert!(
        rss1 <= rss0 + RSS_SLACK_KIB,
        "VmRSS grew from {rss0} kB to {rss1} kB over 90,000 reaps"
    );
}

#[test]
fn forwarding_10k_signals_keeps_memory_and_descriptors_flat() {
    let dir = harness::tempdir();
    let log = dir.path().join("log");
    let run = Run::helper(&[], &["record", &path_str(&log)]).start();
    let vr = run.pid();
    wait_until("the recorder", || read(&log).starts_with("ready"));
    // A real-time signal: queued, never merged, so each one sent is one forwarded and recorded.
    let sig = libc::SIGRTMIN() + 2;
    let mut sent_so_far = 0;
    let mut send = |n: usize| {
        for _ in 0..n / 100 {
            for _ in 0..100 {
                kill(vr, sig);
            }
            sent_so_far += 100;
            // Pace by what arrived, so the queues never fill up.
            wait_until("the forwarded signals", || {
                read(&log).lines().filter(|l| *l == sig.to_string()).count() == sent_so_far
            });
        }
    };
    send(1_000);
    let (rss0, fds0) = (status_number(vr, "VmRSS"), open_fds(vr));
    send(9_000);
    let (rss1, fds1) = (status_number(vr, "VmRSS"), open_fds(vr));
    let out = run.finish_after(libc::SIGTERM);
    eprintln!(
        "after 1k signals: {rss0} kB, {fds0} fds; after 10k: {rss1} kB, {fds1} fds; {:?}",
        out.elapsed
    );
    assert_eq!(
        out.code(),
        Some(0),
        "the recorder exits 0 on SIGTERM: {out}"
    );
    assert_eq!(
        read(&log).lines().filter(|l| *l == sig.to_string()).count(),
        10_000
    );
    assert_eq!(fds1, fds0, "open descriptors grew");
    assert!(
        rss1 <= rss0 + RSS_SLACK_KIB,
        "VmRSS grew from {rss0} kB to {rss1} kB over 9,000 signals"
    );
}

// ---------------------------------------------------------------------------------------------
// Stop signals that keep coming, and SIGKILL to vloer-run.

/// An instance with a control socket (to see its state) around a TERM-ignoring process.
fn with_control(extra: &[&str], child: &[&str]) -> (Running, String, tempfile::TempDir) {
    let dir = harness::tempdir();
    let sock = path_str(&dir.path().join("ctl"));
    let mut args: Vec<&str> = vec!["--control", &sock];
    args.extend(extra);
    args.push("--");
    args.extend(child);
    let run = Run::new(&args).start();
    harness::wait_for_socket(Path::new(&sock));
    (run, sock, dir)
}

fn run_state(sock: &str) -> String {
    let out = Run::new(["status", "--control", sock]).finish();
    serde_json::from_str::<serde_json::Value>(out.stdout.trim())
        .map(|v| v["state"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

#[test]
fn sigterm_again_and_again_makes_one_stop_and_one_verdict() {
    let ready = harness::tempdir();
    let ready = ready.path().join("ready");
    let (run, sock, _dir) = with_control(
        &["--grace", "2s"],
        &[harness::helper(), "ignore-term", &path_str(&ready)],
    );
    let pid = wait_for_pids(&ready)[0];
    run.signal(libc::SIGTERM);
    let first = Instant::now();
    wait_until("the stop", || run_state(&sock) == "stopping");
    for _ in 0..5 {
        run.signal(libc::SIGTERM);
    }
    let out = run.finish();
    assert_eq!(verdicts(&out.stderr), 1, "{out}");
    let v = out.verdict();
    assert_eq!(v["stopped"], true, "{out}");
    assert_eq!(
        (v["reason"].as_str(), v["signal"].as_str()),
        (Some("signal"), Some("SIGTERM")),
        "{out}"
    );
    // One stop: one SIGTERM from the stop itself (the others were forwarded), one SIGKILL, and
    // the grace period counted from the first SIGTERM, not restarted by the later ones.
    assert_eq!((sent(&v, "SIGTERM"), sent(&v, "SIGKILL")), (1, 1), "{out}");
    assert!(
        first.elapsed() < Duration::from_millis(3500),
        "{:?}: {out}",
        first.elapsed()
    );
    // Killed by the stop's own SIGKILL: a plain 137.
    assert_eq!(out.code(), Some(137), "{out}");
    assert!(!alive(pid));
}

#[test]
fn sigterm_during_a_stop_keeps_its_reason_and_verdict() {
    let dir = harness::tempdir();
    let held = dir.path().join("held");
    // The main child exits 7 and leaves a TERM-ignoring process in its group.
    let script = r#""$0" ignore-term "$1" & until [ -s "$1" ]; do sleep 0.01; done; exit 7"#;
    let (run, sock, _d) = with_control(
        &["--grace", "2s"],
        &["sh", "-c", script, harness::helper(), &path_str(&held)],
    );
    let pid = wait_for_pids(&held)[0];
    wait_until("the stop", || run_state(&sock) == "stopping");
    run.signal(libc::SIGTERM);
    run.signal(libc::SIGINT);
    let out = run.finish();
    assert_eq!(verdicts(&out.stderr), 1, "{out}");
    let v = out.verdict();
    assert_eq!(v["stopped"], true, "{out}");
    assert_eq!(v["reason"], "child_exited", "{out}");
    assert!(v.get("signal").is_none(), "{out}");
    assert_eq!(out.code(), Some(7), "{out}");
    assert!(!alive(pid));
}

/// SIGKILL to vloer-run (not PID 1) cannot be caught: no stop, no verdict. The kernel sends the
/// main child its parent-death signal (--child-pdeathsig, default KILL); the rest of the tree is
/// orphaned to the next subreaper or init and lives on. This pins down that documented behaviour.
#[test]
fn sigkill_to_vloer_run_sends_the_child_its_parent_death_signal() {
    let mut adopted = Adopted::new();
    let dir = harness::tempdir();
    let (out_log, grand_log) = (dir.path().join("child"), dir.path().join("grandchild"));
    let run = Run::helper(
        &["--child-pdeathsig", "TERM"],
        &["record", &path_str(&out_log), &path_str(&grand_log)],
    )
    .start();
    wait_until("both recorders", || {
        read(&out_log).starts_with("ready") && read(&grand_log).starts_with("ready")
    });
    let pid_of = |log: &Path| {
        read(log)
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("ready "))
            .and_then(|p| p.parse::<i32>().ok())
            .unwrap()
    };
    let (child, grand) = (pid_of(&out_log), pid_of(&grand_log));
    adopted.add(child);
    adopted.add(grand);
    let out = run.finish_after(libc::SIGKILL);
    assert_eq!(
        harness::parse_verdict(&out.stderr),
        None,
        "no verdict can be written after SIGKILL: {out}"
    );
    wait_for_text(&out_log, &libc::SIGTERM.to_string());
    assert!(
        wait_gone(child, harness::LIMIT),
        "the child exits on its parent-death signal"
    );
    assert!(
        alive(grand),
        "the grandchild is orphaned, not stopped (documented)"
    );
    assert_eq!(
        read(&grand_log).lines().count(),
        1,
        "the grandchild got a signal: {}",
        read(&grand_log)
    );
    adopted.end_all();

    // The default is SIGKILL; 0 turns it off.
    for (flag, survives) in [(&[][..], false), (&["--child-pdeathsig", "0"][..], true)] {
        let ready = dir.path().join(format!("ready-{survives}"));
        let (run, pids) =
            Run::helper(flag, &["sleep", &path_str(&ready)]).start_until_ready(&ready);
        let child = pids[0];
        adopted.add(child);
        run.finish_after(libc::SIGKILL);
        if survives {
            assert!(
                alive(child),
                "--child-pdeathsig 0 must leave the child alone"
            );
        } else {
            assert!(
                wait_gone(child, harness::LIMIT),
                "the default parent-death signal (SIGKILL) did not end the child"
            );
        }
        adopted.end_all();
    }
}
