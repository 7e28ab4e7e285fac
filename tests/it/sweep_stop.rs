//! The folder sweep within the stop: a worker that a stand-in daemon (started before the run,
//! outside its tree) starts in the folder is stopped on every way the run ends, a forking one to
//! a fixed point; a holder from before the run is listed, never signalled.

use crate::harness::{self, Adopted, Run};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A stand-in for a container daemon: started before the run, outside its tree, it waits for a
/// line on its FIFO and then starts a worker in the folder, which appends to a file there. Its own
/// working directory and command line say nothing of the folder.
struct Daemon {
    shell: Child,
    fifo: PathBuf,
    worker_pid: PathBuf,
    folder: PathBuf,
}

const DAEMON: &str = r#"read x < "$FIFO"
case "$KIND" in
fork) (cd "$W" && trap '' TERM && while :; do sleep 100 & sleep 0.002; done) & ;;
leave) (cd "$W" && trap 'cd /' TERM && while :; do sleep 0.01; [ "$PWD" = / ] && sleep 1 && cd "$W"; done) & ;;
*) (cd "$W" && trap '' TERM && while :; do echo x >> f; sleep 0.01; done) & ;;
esac
echo $! > "$P.tmp" && mv "$P.tmp" "$P"
wait"#;

impl Daemon {
    fn start(dir: &Path, kind: &str) -> Daemon {
        let folder = dir.join("w");
        std::fs::create_dir_all(&folder).unwrap();
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let worker_pid = dir.join("worker.pid");
        let shell = Command::new("sh")
            .args(["-c", DAEMON])
            .env("FIFO", &fifo)
            .env("W", &folder)
            .env("P", &worker_pid)
            .env("KIND", kind)
            .current_dir(dir)
            .stdin(Stdio::null())
            .spawn()
            .expect("the daemon");
        Daemon {
            shell,
            fifo,
            worker_pid,
            folder,
        }
    }

    /// A child script that asks the daemon for its worker, then runs `then`.
    fn child(&self, then: &str) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            // A clock tick (10 ms) or more into the run: a process started in the run's own
            // tick counts as started before it.
            format!("sleep 0.05; echo go > \"$1\"; {then}"),
            "sh".into(),
            harness::path_str(&self.fifo),
        ]
    }

    fn worker(&self) -> i32 {
        harness::wait_for_pids(&self.worker_pid)[0]
    }

    fn folder(&self) -> String {
        harness::path_str(&self.folder)
    }
}

impl Daemon {
    /// A run of `sleep 0.3` (grace 300ms) that sweeps the folder while the daemon's worker,
    /// started beside it, works there; the worker is adopted, to be ended by pid.
    fn swept_run(&self) -> (harness::Finished, i32, Adopted) {
        let f = Run::new(args(&["--grace", "300ms"], self, self.child("sleep 0.3"))).finish();
        let worker = self.worker();
        let mut adopted = Adopted::new();
        adopted.add(worker);
        (f, worker, adopted)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

fn args(flags: &[&str], daemon: &Daemon, child: Vec<String>) -> Vec<String> {
    let mut a: Vec<String> = vec!["--sweep".into(), daemon.folder()];
    a.extend(flags.iter().map(|s| s.to_string()));
    a.push("--".into());
    a.extend(child);
    a
}

/// The verdict lists `worker` among the holders, started during the run, and says true.
fn swept(v: &serde_json::Value, worker: i32, f: &harness::Finished) {
    assert_eq!(v["stopped"], true, "{f}");
    let holders = v["sweep"]["holders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        holders
            .iter()
            .any(|h| h["pid"] == worker && h["started"] == "during"),
        "the worker {worker} is not among the holders: {f}"
    );
    assert!(v["sent"]["SIGTERM"].as_u64().unwrap_or(0) >= 1, "{f}");
}

#[test]
fn a_worker_started_outside_the_tree_is_stopped_when_the_child_exits_and_not_without_sweep() {
    let _quiet = harness::quiet();
    let dir = harness::tempdir();
    let daemon = Daemon::start(dir.path(), "write");
    let (f, worker, _adopted) = daemon.swept_run();
    let v = f.verdict();
    assert!(
        harness::wait_gone(worker, Duration::from_secs(10)),
        "the worker outlived the sweep: {f}"
    );
    swept(&v, worker, &f);
    // It ignores SIGTERM: the sweep waited the grace out and killed it.
    assert!(v["sent"]["SIGKILL"].as_u64().unwrap_or(0) >= 1, "{f}");
    assert_eq!(f.code(), Some(0), "{f}");

    // The gap, shown: without --sweep the same run says true and the worker writes on.
    let dir = harness::tempdir();
    let daemon = Daemon::start(dir.path(), "write");
    let mut plain: Vec<String> = vec!["--grace".into(), "300ms".into(), "--".into()];
    plain.extend(daemon.child("sleep 0.3"));
    let f = Run::new(plain).finish();
    let worker = daemon.worker();
    let mut adopted = Adopted::new();
    adopted.add(worker);
    assert_eq!(f.verdict()["stopped"], true, "{f}");
    let file = daemon.folder.join("f");
    let size = || std::fs::metadata(&file).map_or(0, |m| m.len());
    let before = size();
    harness::wait_until("the worker to write on", || size() > before);
    assert!(harness::alive(worker));
    adopted.end_all();
}

#[test]
fn a_signalled_worker_that_leaves_the_folder_for_a_while_is_still_stopped() {
    let _quiet = harness::quiet();
    // On SIGTERM the worker leaves the folder for a second, then comes back: the scans in
    // between find nothing, but a process the sweep signalled is not gone while it lives.
    let dir = harness::tempdir();
    let daemon = Daemon::start(dir.path(), "leave");
    let (f, worker, _adopted) = daemon.swept_run();
    let v = f.verdict();
    // Gone before the verdict was written: only its zombie may wait for the daemon to reap it.
    assert!(
        harness::wait_gone(worker, Duration::from_secs(2)),
        "the worker outlived a verdict that said {}: {f}",
        v["stopped"]
    );
    swept(&v, worker, &f);
    assert!(v["sent"]["SIGKILL"].as_u64().unwrap_or(0) >= 1, "{f}");
}

/// The live processes whose working directory is `folder`.
fn working_in(folder: &Path) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == folder)
                && harness::state(*pid).is_some_and(|s| s != 'Z')
        })
        .collect()
}

#[test]
fn a_worker_that_forks_in_a_loop_outside_the_tree_is_stopped_to_a_fixed_point() {
    let _quiet = harness::quiet();
    // The worker forks a sleeper every few milliseconds, each working in the folder and deaf to
    // SIGTERM: each scan finds new ones until SIGKILL has reached the worker itself, and the
    // sweep goes on until two scans in a row find none.
    let dir = harness::tempdir();
    let daemon = Daemon::start(dir.path(), "fork");
    let f = Run::new(args(
        &["--grace", "300ms", "--kill-timeout", "20s"],
        &daemon,
        daemon.child("sleep 0.3"),
    ))
    .finish();
    let worker = daemon.worker();
    let left = working_in(&daemon.folder);
    for &pid in &left {
        harness::kill_pid(pid, libc::SIGKILL);
    }
    assert!(left.is_empty(), "{} outlived the sweep: {f}", left.len());
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert!(!harness::alive(worker), "{f}");
    let holders = v["sweep"]["holders"].as_array().map_or(0, Vec::len);
    assert!(holders > 2, "the worker forked no more than {holders}: {f}");
    assert!(v["sent"]["SIGKILL"].as_u64().unwrap_or(0) >= 2, "{f}");
}

#[test]
fn a_holder_from_before_the_run_is_listed_never_signalled_and_the_verdict_is_false() {
    let _quiet = harness::quiet();
    let dir = harness::tempdir();
    let folder = dir.path().join("w");
    std::fs::create_dir(&folder).unwrap();
    let mut old = Command::new("sleep")
        .arg("100")
        .current_dir(&folder)
        .spawn()
        .expect("sleep");
    let old_pid = old.id() as i32;
    // A clock tick (10 ms) or more apart, so that its start time is earlier than the run's.
    std::thread::sleep(Duration::from_millis(50));
    // The caller's own shell works in the folder: vloer-run's ancestors never match.
    let script = r#"cd "$1" && exec "$0" --sweep "$1" --grace 200ms -- true"#;
    let f = Run::of({
        let mut c = Command::new("sh");
        c.args(["-c", script, harness::bin(), &harness::path_str(&folder)]);
        c
    })
    .finish();
    let alive = harness::alive(old_pid);
    let _ = old.kill();
    let _ = old.wait();
    assert!(alive, "a process from before the run was signalled: {f}");
    let v = f.verdict();
    assert_eq!(v["stopped"], false, "{f}");
    assert_eq!(f.code(), Some(125), "{f}");
    let holders = v["sweep"]["holders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(holders.len(), 1, "only the old sleep: {f}");
    assert_eq!(holders[0]["pid"], old_pid, "{f}");
    assert_eq!(holders[0]["started"], "before", "{f}");
    assert_eq!(v["sent"], serde_json::json!({}), "{f}");
    assert_eq!(v["survivors"][0]["pid"], old_pid, "{f}");
}

#[test]
fn every_way_the_run_ends_sweeps() {
    let _quiet = harness::quiet();
    // The child exits (above), a stop signal, the timeout, a control stop, the parent's death,
    // and a child that dies of a signal vloer-run passes on by ending with it.
    for way in ["signal", "timeout", "control", "parent", "raise"] {
        let dir = harness::tempdir();
        let daemon = Daemon::start(dir.path(), "write");
        let sock = harness::path_str(&dir.path().join("s"));
        let verdict = dir.path().join("verdict");
        let mut flags = vec!["--grace", "300ms", "--verdict"];
        let verdict_s = harness::path_str(&verdict);
        flags.push(&verdict_s);
        let then = match way {
            "raise" => "sleep 0.3; kill -USR1 $$",
            _ => "exec sleep 100",
        };
        match way {
            "timeout" => flags.extend(["--timeout", "1s"]),
            "control" => flags.extend(["--control", &sock]),
            "parent" => flags.push("--parent-death"),
            _ => {}
        }
        let run_args = args(&flags, &daemon, daemon.child(then));
        let mut parent = None;
        let run = if way == "parent" {
            // vloer-run under a shell that the test then kills.
            let mut c = Command::new("sh");
            c.args([
                "-c",
                "\"$@\" </dev/null & exec sleep 1000",
                "sh",
                harness::bin(),
            ])
            .args(&run_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            parent = Some(c.spawn().expect("the parent shell"));
            None
        } else {
            Some(Run::new(&run_args).start())
        };
        let worker = daemon.worker();
        let mut adopted = Adopted::new();
        adopted.add(worker);
        let started = Instant::now();
        match (way, &run) {
            ("signal", Some(r)) => r.signal(libc::SIGTERM),
            ("control", Some(_)) => {
                harness::wait_for_socket(Path::new(&sock));
                let _ = Run::new(["stop", "--control", &sock]).finish();
            }
            _ => {}
        }
        if let Some(mut p) = parent {
            p.kill().unwrap();
            p.wait().unwrap();
        }
        if let Some(r) = run {
            r.finish();
        }
        harness::wait_until("the verdict file", || verdict.exists());
        let text = std::fs::read_to_string(&verdict).unwrap();
        let v = harness::parse_verdict(&text).expect("a verdict");
        assert!(
            harness::wait_gone(worker, Duration::from_secs(10)),
            "{way}: the worker outlived the sweep: {v}"
        );
        assert_eq!(v["stopped"], true, "{way}: {v}");
        let holders = v["sweep"]["holders"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            holders.iter().any(|h| h["pid"] == worker),
            "{way}: the worker is not listed: {v}"
        );
        assert!(started.elapsed() < harness::LIMIT, "{way}");
    }
}

/// Runs `script` (sh, with DIR and the binary as $1 and $2) as pid 1 of a new pid namespace with
/// its own /proc: only the test's own processes are there to be swept. None where it cannot.
fn in_own_pid_namespace(script: &str, dir: &Path) -> Option<harness::Finished> {
    in_own_pid_namespace_with(script, dir, &[])
}

/// `in_own_pid_namespace`, with `more` arguments after the binary.
fn in_own_pid_namespace_with(script: &str, dir: &Path, more: &[&str]) -> Option<harness::Finished> {
    if !harness::is_root() {
        harness::skip("a pid namespace and another uid need root");
        return None;
    }
    let ns = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"];
    if !harness::works_here(&ns, "unshare --pid")
        || !harness::works_here(&harness::AS_NOBODY, "setpriv")
    {
        return None;
    }
    let mut cmd = Command::new(ns[0]);
    cmd.args(&ns[1..])
        .args(["sh", "-c", script, "sh"])
        .arg(dir)
        .arg(harness::bin_for_others())
        .args(more);
    Some(Run::of(cmd).finish())
}

fn verdict_at(path: &Path, f: &harness::Finished) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    harness::parse_verdict(&text).unwrap_or_else(|| panic!("no verdict in {}: {f}", path.display()))
}

#[test]
fn a_non_root_run_cannot_look_at_roots_processes_and_says_so() {
    let _quiet = harness::quiet();
    // As uid 65534, root's processes cannot be looked at. One from before the run is listed as
    // unverified without failing the proof (unless --sweep-strict); one that started during the
    // run might be writing in the folder: the verdict is false.
    let dir = harness::tempdir();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = r#"
        D=$1 VR=$2
        mkdir -m 777 "$D/w"
        (cd "$D/w" && exec sleep 100) &
        OLD=$!
        sleep 0.05
        AS="setpriv --reuid 65534 --regid 65534 --clear-groups"
        cd /
        $AS "$VR" --sweep "$D/w" --verdict "$D/v1" -- true; echo $? > "$D/s1"
        $AS "$VR" --sweep "$D/w" --sweep-strict --verdict "$D/v2" -- true; echo $? > "$D/s2"
        $AS "$VR" --sweep "$D/w" --verdict "$D/v3" -- sleep 0.5 &
        VR3=$!
        sleep 0.2
        (cd "$D/w" && exec sleep 101) &
        NEW=$!
        wait $VR3; echo $? > "$D/s3"
        echo "$OLD $NEW" > "$D/pids"
        kill $OLD $NEW
    "#;
    let Some(f) = in_own_pid_namespace(script, dir.path()) else {
        return;
    };
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap_or_default();
    let pids: Vec<String> = read("pids").split_whitespace().map(String::from).collect();
    assert_eq!(pids.len(), 2, "{f}");
    let (old, new) = (
        pids[0].parse::<i64>().unwrap(),
        pids[1].parse::<i64>().unwrap(),
    );
    let unverified = |v: &serde_json::Value, pid: i64| {
        v["sweep"]["unverified"]
            .as_array()
            .and_then(|a| a.iter().find(|u| u["pid"] == pid).cloned())
    };

    let v1 = verdict_at(&dir.path().join("v1"), &f);
    assert_eq!(v1["stopped"], true, "{f}\n{v1}");
    assert_eq!(read("s1").trim(), "0", "{v1}");
    let u = unverified(&v1, old).unwrap_or_else(|| panic!("root's old sleep is not listed: {v1}"));
    assert_eq!(u["started"], "before", "{v1}");

    let v2 = verdict_at(&dir.path().join("v2"), &f);
    assert_eq!(v2["stopped"], false, "--sweep-strict: {v2}");
    assert_eq!(read("s2").trim(), "125", "{v2}");

    let v3 = verdict_at(&dir.path().join("v3"), &f);
    assert_eq!(
        v3["stopped"], false,
        "a root process started during the run: {v3}"
    );
    assert_eq!(read("s3").trim(), "125", "{v3}");
    let u =
        unverified(&v3, new).unwrap_or_else(|| panic!("the new root sleep is not listed: {v3}"));
    assert_eq!(u["started"], "during", "{v3}");
}

#[test]
fn a_proc_that_hides_processes_proves_nothing() {
    let _quiet = harness::quiet();
    let dir = harness::tempdir();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let folder = dir.path().join("w");
    std::fs::create_dir(&folder).unwrap();
    let verdict = dir.path().join("v");
    let script = r#"mount -t proc -o hidepid=2 proc /proc || exit 99
        exec "$@""#;
    let mut args: Vec<&str> = harness::AS_NOBODY.to_vec();
    let (folder_s, verdict_s) = (harness::path_str(&folder), harness::path_str(&verdict));
    args.extend([
        harness::bin_for_others(),
        "--sweep",
        &folder_s,
        "--verdict",
        &verdict_s,
        "--",
        "true",
    ]);
    if !harness::is_root() {
        harness::skip("mounting /proc with hidepid needs root");
        return;
    }
    let Some(cmd) = harness::in_mount_ns(script, &args) else {
        return;
    };
    let f = Run::of(cmd).finish();
    if f.code() == Some(99) {
        harness::skip("cannot mount /proc with hidepid here");
        return;
    }
    let v = verdict_at(&verdict, &f);
    assert_eq!(v["stopped"], false, "{f}\n{v}");
    assert_eq!(f.code(), Some(125), "{f}");
    assert!(
        v["error"].as_str().unwrap_or_default().contains("hidepid"),
        "{v}"
    );
}

#[test]
fn a_worker_started_while_the_tree_still_stops_is_found_by_the_proof_after_it() {
    let _quiet = harness::quiet();
    // The child's TERM trap takes a while to end; the folder, swept clean at the stop's start,
    // gets a new worker meanwhile. The proof is made after the tree's own stop, and finds it.
    // (The trap's `sleep` ignores TERM, inherited: the stop signals every process of the tree,
    // and a `sleep` that started after the first signal would get one too.)
    let dir = harness::tempdir();
    let folder = dir.path().join("w");
    std::fs::create_dir(&folder).unwrap();
    let ready = dir.path().join("ready");
    let folder_s = harness::path_str(&folder);
    let script = format!(
        "trap 'trap \"\" TERM; sleep 2; exit 0' TERM; echo $$ > {r}.tmp && mv {r}.tmp {r}; \
         sleep 30 & wait",
        r = harness::path_str(&ready)
    );
    let run = Run::new(["--sweep", &folder_s, "--", "sh", "-c", &script]).start();
    harness::wait_for_pids(&ready);
    run.signal(libc::SIGTERM);
    // The stop has begun and swept the folder clean; the trap runs for two seconds more.
    std::thread::sleep(Duration::from_millis(300));
    let mut worker = Command::new("sleep")
        .arg("30")
        .current_dir(&folder)
        .spawn()
        .expect("sleep");
    let wpid = worker.id() as i32;
    let f = run.finish();
    let alive = harness::alive(wpid) && harness::state(wpid) != Some('Z');
    let _ = worker.kill();
    let _ = worker.wait();
    let v = f.verdict();
    assert!(
        f.elapsed > Duration::from_millis(1500),
        "the trap did not hold the stop: {f}"
    );
    assert!(
        !alive || v["stopped"] == false,
        "stopped:true while {wpid} worked in the folder: {f}"
    );
    let holders = v["sweep"]["holders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(holders.iter().any(|h| h["pid"] == wpid), "{f}");
    assert_eq!(v["stopped"], true, "the worker was stopped: {f}");
}

#[test]
fn vloer_runs_own_clients_are_never_matches() {
    let _quiet = harness::quiet();
    // `vloer-run stop` names the control socket, which lies in the swept folder: it is the
    // caller waiting for the verdict, not a process working in the folder.
    let dir = harness::tempdir();
    let folder = dir.path().join("w");
    std::fs::create_dir(&folder).unwrap();
    let (folder_s, sock) = (
        harness::path_str(&folder),
        harness::path_str(&folder.join("ctl")),
    );
    let run = Run::new([
        "--sweep",
        &folder_s,
        "--control",
        &sock,
        "--",
        "sleep",
        "30",
    ])
    .start();
    harness::wait_for_socket(Path::new(&sock));
    let client = Run::new(["stop", "--control", &sock]).finish();
    let f = run.finish();
    assert_eq!(
        client.code(),
        Some(0),
        "the stop's own client: {client}\n{f}"
    );
    assert_eq!(client.stdout_verdict()["stopped"], true, "{client}");
    assert_eq!(
        f.verdict()["sweep"]["holders"],
        serde_json::json!([]),
        "{f}"
    );
}

/// A run with a control socket in its swept folder, and the client a shell in the folder starts
/// with `script` (`$1` the folder, `$2` vloer-run): the run's verdict and the shell's pid.
fn stopped_by_a_shell_in_the_folder(script: &str) -> (harness::Finished, i32) {
    let dir = harness::tempdir();
    let folder = dir.path().join("w");
    std::fs::create_dir(&folder).unwrap();
    let (folder_s, sock) = (
        harness::path_str(&folder),
        harness::path_str(&folder.join("ctl")),
    );
    let run = controlled_sweep(&folder_s, &sock);
    let mut shell = Command::new("sh")
        .args(["-c", script, "sh", &folder_s, harness::bin()])
        .stdout(Stdio::null())
        .spawn()
        .expect("sh");
    let pid = shell.id() as i32;
    let f = run.finish();
    let _ = shell.kill();
    let _ = shell.wait();
    (f, pid)
}

#[test]
fn only_the_callers_that_wait_for_a_client_are_exempt() {
    let _quiet = harness::quiet();
    // Waits for `vloer-run stop`, in the folder: the caller of the stop, never a match.
    let (f, shell) = stopped_by_a_shell_in_the_folder(
        r#"cd "$1" && "$2" stop --control ctl; echo "$?" > /dev/null"#,
    );
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["sweep"]["holders"], serde_json::json!([]), "{f}");
    assert!(
        v["sent"]["SIGTERM"] == 1,
        "the child's SIGTERM and no more: the waiting shell {shell} was signalled: {f}"
    );

    // Starts the client in the background and goes on writing in the folder: a worker like any
    // other, stopped (it ignores SIGTERM), listed, and gone before the verdict says true.
    let (f, shell) = stopped_by_a_shell_in_the_folder(
        r#"cd "$1" && trap '' TERM && { "$2" stop --control ctl & } && while :; do echo x >> f; sleep 0.01; done"#,
    );
    let v = f.verdict();
    let holders = v["sweep"]["holders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        holders
            .iter()
            .any(|h| h["pid"] == shell && h["started"] == "during"),
        "the shell {shell} that works on in the folder is not among the holders: {f}"
    );
    assert_eq!(v["stopped"], true, "{f}");
    assert!(v["sent"]["SIGKILL"].as_u64().unwrap_or(0) >= 1, "{f}");
}

#[test]
fn a_folder_renamed_during_the_run_is_still_swept_where_it_went() {
    let _quiet = harness::quiet();
    // Identity, not spelling: the folder moved, and a worker in it is still found; a new folder
    // that took the old name is not the swept one.
    let (dir, folder, run) = sweeping_a_folder();
    let moved = dir.path().join("w.moved");
    std::fs::rename(&folder, &moved).unwrap();
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    // In a folder below it: the moved folder's own identity is not enough to find it.
    let inside = sleeper_in(&moved.join("sub"));
    let other = sleeper_in(&folder.join("sub"));
    the_worker_is_stopped_and_the_namesake_is_not(run, inside, other, "moved");
}

/// A run of `sleep 0.6` that sweeps a folder `w` (with `w/sub`) in a folder of its own, started
/// a moment ago.
fn sweeping_a_folder() -> (tempfile::TempDir, PathBuf, harness::Running) {
    let dir = harness::tempdir();
    let folder = dir.path().join("w");
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    let folder_s = harness::path_str(&folder);
    let run = Run::new(["--sweep", &folder_s, "--", "sleep", "0.6"]).start();
    std::thread::sleep(Duration::from_millis(200));
    (dir, folder, run)
}

/// A process working in `dir`, outside the run's tree.
fn sleeper_in(dir: &Path) -> Child {
    Command::new("sleep")
        .arg("30")
        .current_dir(dir)
        .spawn()
        .expect("sleep")
}

/// Once `run` ends: the worker `inside` the swept folder (which was `how`) was listed and
/// stopped, the one in the new folder of the old name (`other`) was neither, and the verdict is
/// true. Both are ended and reaped.
fn the_worker_is_stopped_and_the_namesake_is_not(
    run: harness::Running,
    mut inside: Child,
    mut other: Child,
    how: &str,
) {
    let (inside_pid, other_pid) = (inside.id() as i32, other.id() as i32);
    let f = run.finish();
    let inside_alive = harness::state(inside_pid).is_some_and(|s| s != 'Z');
    let other_alive = harness::state(other_pid).is_some_and(|s| s != 'Z');
    for c in [&mut inside, &mut other] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let v = f.verdict();
    assert!(
        !inside_alive,
        "the worker in the {how} folder outlived the sweep: {f}"
    );
    assert!(
        other_alive,
        "a process in the new folder of the old name was stopped: {f}"
    );
    assert!(harness::sweep_lists(&v, inside_pid, None), "{f}");
    assert!(!harness::sweep_lists(&v, other_pid, None), "{f}");
    assert_eq!(v["stopped"], true, "{f}");
}

#[test]
fn a_thread_that_works_in_the_folder_is_found() {
    let _quiet = harness::quiet();
    // A thread with a working directory of its own, and a process whose main thread exited
    // while another works on in the folder: neither shows the folder in /proc/PID/cwd.
    for how in ["unshare", "leader"] {
        thread_in_the_folder_is_stopped(&["thread-cwd", how], "cwd", |run| run);
    }
}

/// A process started beside the run, outside its tree, in `folder`, that forks away from its pid
/// as fast as it can (each generation logs its pid in `log`, then forks and exits).
fn hopper(folder: &Path, log: &Path) -> Child {
    let ready = log.with_extension("ready");
    let child = Command::new("setsid")
        .arg(harness::helper())
        .args(["fork-loop", &harness::path_str(&ready)])
        .arg(log)
        .args(["--hop", "--fast"])
        .current_dir(folder)
        .stdin(Stdio::null())
        .spawn()
        .expect("setsid");
    harness::wait_for_pids(&ready);
    child
}

/// Whether the hopper logging to `log` still forks: its log grows.
fn hops_on(log: &Path) -> bool {
    let before = harness::read_pids(log).len();
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        if harness::read_pids(log).len() > before {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Ends the hopper: its generations stay in the group `setsid` made for the first, which one
/// SIGKILL reaches all at once (it cannot be chased pid by pid).
fn end_hopper(log: &Path, mut first: Child) {
    let group = first.id() as i32;
    for _ in 0..20 {
        harness::end_group(group);
        if !hops_on(log) {
            let _ = first.wait();
            return;
        }
    }
    panic!("the hopper logging to {} could not be ended", log.display());
}

#[test]
fn a_process_that_forks_away_from_its_pid_outside_the_tree_is_never_called_gone() {
    let _storm = harness::storm();
    // Each generation lives for microseconds: a scan may read none of them. A scan counts only
    // when a listing of /proc made after it read every process shows none it had not read, and
    // the kernel's pid counter did not come round meanwhile; such a hopper never lets that
    // happen, so the verdict is false unless one of the stop's signals ended it.
    for round in 0..4 {
        let dir = harness::tempdir();
        let folder = dir.path().join("w");
        std::fs::create_dir(&folder).unwrap();
        let log = dir.path().join("hops");
        let first = hopper(&folder, &log);
        let f = Run::new([
            "--sweep",
            &harness::path_str(&folder),
            "--grace",
            "200ms",
            "--kill-timeout",
            "800ms",
            "--",
            "sleep",
            "0.3",
        ])
        .finish();
        let alive = hops_on(&log);
        end_hopper(&log, first);
        let v = f.verdict();
        if alive {
            assert_eq!(
                v["stopped"], false,
                "round {round}: the hopper lives on: {f}"
            );
            assert_eq!(f.code(), Some(125), "{f}");
            assert!(v["error"].is_string(), "{f}");
        }
    }
}

#[test]
fn a_thread_with_a_file_table_of_its_own_is_found() {
    let _quiet = harness::quiet();
    // Its open file is in no table /proc/PID/fd shows; with 300 threads it is the last one's.
    for threads in ["1", "300"] {
        thread_in_the_folder_is_stopped(&["thread-files", threads], "fd", |run| run);
    }
    // Where kcmp is refused (a container's seccomp profile), every thread is read.
    thread_in_the_folder_is_stopped(&["thread-files", "300"], "fd", harness::without_kcmp);
}

#[test]
fn a_thread_s_own_file_table_proves_what_a_doubted_descriptor_of_the_main_one_does_not() {
    let _quiet = harness::quiet();
    // Every table has a removed file of the folder (only doubted: see `Targets::doubts`); the
    // last thread's also has a file in it. That proves it: the process is stopped (the doubted
    // match kept the thread's table from being read, and it was never signalled).
    helper_in_the_folder_is_stopped(&["thread-files", "2"], "fd", |run| run, Some("doomed"));
}

#[test]
fn a_file_registered_with_an_io_uring_ring_is_found() {
    let _quiet = harness::quiet();
    // The process closed its descriptor of the file: only the ring's fdinfo names it.
    if harness::io_uring_refused() {
        return;
    }
    thread_in_the_folder_is_stopped(&["uring-file"], "fd", |run| run);
}

/// Starts the helper (`args`, then its READY file) outside the tree during a run with `--sweep`
/// (made through `wrap`), after which the run ends: the helper is stopped and listed, holding the
/// folder by `what`.
fn thread_in_the_folder_is_stopped(args: &[&str], what: &str, wrap: fn(Run) -> Run) {
    helper_in_the_folder_is_stopped(args, what, wrap, None);
}

/// `thread_in_the_folder_is_stopped`, the helper holding `doomed` (a file of the folder, removed
/// once it is ready) on descriptor 3 of every file table it has.
fn helper_in_the_folder_is_stopped(
    args: &[&str],
    what: &str,
    wrap: fn(Run) -> Run,
    doomed: Option<&str>,
) {
    let how = args.join(" ");
    let dir = harness::tempdir();
    let folder = dir.path().join("w");
    std::fs::create_dir(&folder).unwrap();
    let ready = dir.path().join("ready");
    let folder_s = harness::path_str(&folder);
    let run = wrap(Run::new(["--sweep", &folder_s, "--", "sleep", "0.5"])).start();
    std::thread::sleep(Duration::from_millis(100));
    let doomed = doomed.map(|name| folder.join(name));
    let mut worker = match &doomed {
        None => Command::new(harness::helper()),
        Some(file) => {
            std::fs::write(file, "data").unwrap();
            let mut sh = Command::new("sh");
            sh.args(["-c", "exec 3<\"$F\"; exec \"$0\" \"$@\"", harness::helper()])
                .env("F", file);
            sh
        }
    }
    .args(args)
    .arg(harness::path_str(&ready))
    .env("HELPER_DIR", &folder)
    .current_dir("/")
    .spawn()
    .expect("the helper");
    let pid = harness::wait_for_pids(&ready)[0];
    if let Some(file) = &doomed {
        std::fs::remove_file(file).unwrap();
    }
    let f = run.finish();
    // Alive while a thread is: a main thread that exited shows Z. A killed thread leaves the
    // task list a moment after its group is gone (which is what vloer-run waits for): a few
    // looks, until it has.
    let alive_now = || {
        let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
        harness::state(pid).is_some_and(|s| s != 'Z' || threads > 1)
    };
    let alive = (0..50).all(|_| {
        let now = alive_now();
        if now {
            std::thread::sleep(Duration::from_millis(20));
        }
        now
    });
    let _ = worker.kill();
    let _ = worker.wait();
    let v = f.verdict();
    assert!(
        !alive || v["stopped"] == false,
        "{how}: stopped:true while {pid} works on: {f}"
    );
    assert!(
        harness::sweep_lists(&v, pid, Some(what)),
        "{how}: not found by its thread's {what}: {f}"
    );
    assert!(!alive, "{how}: {f}");
    assert_eq!(v["stopped"], true, "{how}: {f}");
}

#[test]
fn a_folder_deleted_during_the_run_is_swept_and_a_new_one_of_its_name_is_not() {
    let _quiet = harness::quiet();
    // Identity, not spelling: the folder was deleted with a worker in it, which is still found;
    // a new folder created under its name is another folder, and its process is left alone.
    let (_dir, folder, run) = sweeping_a_folder();
    let inside = sleeper_in(&folder.join("sub"));
    std::fs::remove_dir_all(&folder).unwrap();
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    let other = sleeper_in(&folder.join("sub"));
    the_worker_is_stopped_and_the_namesake_is_not(run, inside, other, "deleted");
}

/// A run of `sleep 0.5` sweeping a folder `w` with `--grace GRACE`, and beside it a worker
/// started during the run outside its tree: `sh -c SCRIPT` in a mount namespace of its own,
/// with `W` the folder, `V` an empty folder beside it, `R` a file to publish its pid in and `D`
/// one it may create. Returns the run's end, the worker's pid, whether it was still alive
/// then, and whether `D` exists; None where a mount namespace cannot be made.
fn a_worker_beside_a_run(
    grace: &str,
    script: &str,
) -> Option<(harness::Finished, i32, bool, bool)> {
    let dir = harness::tempdir();
    let folder = dir.path().join("w");
    std::fs::create_dir(&folder).unwrap();
    let view = dir.path().join("view");
    std::fs::create_dir(&view).unwrap();
    let ready = dir.path().join("ready");
    let marked = dir.path().join("marked");
    let folder_s = harness::path_str(&folder);
    let run = Run::new(["--sweep", &folder_s, "--grace", grace, "--", "sleep", "0.5"]).start();
    std::thread::sleep(Duration::from_millis(100));
    let mut worker = harness::in_mount_ns(script, &[])?
        .env("W", &folder)
        .env("V", &view)
        .env("R", &ready)
        .env("D", &marked)
        .current_dir("/")
        .stdin(Stdio::null())
        .spawn()
        .expect("unshare");
    let pid = harness::wait_for_pids(&ready)[0];
    let mut adopted = Adopted::new();
    adopted.add(pid);
    let f = run.finish();
    let alive = harness::state(pid).is_some_and(|s| s != 'Z');
    let _ = worker.kill();
    let _ = worker.wait();
    Some((f, pid, alive, marked.exists()))
}

#[test]
fn a_worker_on_a_detached_bind_mount_of_the_folder_is_stopped() {
    let _alone = harness::alone();
    // The worker writes to a file through a bind mount of the folder, and detaches the mount
    // (umount -l) when told to stop, then writes on. Its links now read as paths from the
    // detached mount's root, which name other files, and later scans cannot prove where they
    // lie: the first scan found it, and the stop follows that process (its pidfd) to SIGKILL.
    if !harness::is_root() {
        harness::skip("mount --bind in a mount namespace needs root");
        return;
    }
    // The paths come in the environment: a command line naming the folder would match alone.
    let script = r#"mount --bind "$W" "$V" || exit 1
        trap 'umount -l "$V" && touch "$D"' TERM
        exec 3>>"$V/f"
        echo $$ > "$R.tmp" && mv "$R.tmp" "$R"
        while :; do echo x >&3; sleep 0.01; done"#;
    let Some((f, pid, alive, detached)) = a_worker_beside_a_run("500ms", script) else {
        return;
    };
    let v = f.verdict();
    assert!(detached, "the worker never detached its mount: {f}");
    assert!(
        !alive || v["stopped"] == false,
        "stopped:true while {pid} writes to the folder: {f}"
    );
    let holders = v["sweep"]["holders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        holders
            .iter()
            .any(|h| h["pid"] == pid && h["started"] == "during"),
        "{f}"
    );
    assert!(!alive, "the worker outlived the sweep: {f}");
    assert!(v["sent"]["SIGKILL"].as_u64().unwrap_or(0) >= 1, "{f}");
    assert_eq!(v["stopped"], true, "{f}");
}

#[test]
fn a_worker_that_detached_its_mount_of_the_folder_before_the_stop_makes_the_verdict_false() {
    let _alone = harness::alone();
    // As above, but the worker detaches its bind mount at once, before the stop's first scan:
    // no scan ever saw the mount, and its descriptor reads `/f`. Only the mount id gives it
    // away; where it lies cannot be proven, so it is never signalled and the verdict is false.
    if !harness::is_root() {
        harness::skip("mount --bind in a mount namespace needs root");
        return;
    }
    let script = r#"mount --bind "$W" "$V" || exit 1
        exec 3>>"$V/f"
        umount -l "$V" || exit 1
        echo $$ > "$R.tmp" && mv "$R.tmp" "$R"
        while :; do echo x >&3; sleep 0.01; done"#;
    let Some((f, pid, alive, _)) = a_worker_beside_a_run("200ms", script) else {
        return;
    };
    let v = f.verdict();
    assert!(alive, "the worker was signalled: {f}");
    assert_eq!(v["stopped"], false, "{f}");
    let unverified = v["sweep"]["unverified"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        unverified
            .iter()
            .any(|u| u["pid"] == pid && u["started"] == "during"),
        "{f}"
    );
}

#[test]
fn a_folder_moved_out_of_the_mount_it_was_given_through_is_never_guessed() {
    let _quiet = harness::quiet();
    // DIR is given through a bind mount of its parent (`b` shows `t/a`), then moved elsewhere
    // on its filesystem, out of what that mount shows. The kernel then writes vloer-run's own
    // link to it as `/` on that mount, which names the mount's folder, not DIR: taken at its
    // word, the whole machine would match and a bystander started during the run would be
    // signalled. Where DIR is cannot be told: the verdict is false, and no one is signalled.
    if !harness::is_root() {
        harness::skip("mounting a tmpfs needs root");
        return;
    }
    let dir = harness::tempdir();
    let (t, b, by) = (
        dir.path().join("t"),
        dir.path().join("b"),
        dir.path().join("by"),
    );
    for d in [&t, &b, &by] {
        std::fs::create_dir(d).unwrap();
    }
    let mount = |args: &[&str]| {
        Command::new("mount")
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(mount(&["-t", "tmpfs", "none", &harness::path_str(&t)]));
    let _t = harness::Mounted(t.clone());
    std::fs::create_dir_all(t.join("a/work")).unwrap();
    std::fs::create_dir(t.join("elsewhere")).unwrap();
    assert!(mount(&[
        "--bind",
        &harness::path_str(&t.join("a")),
        &harness::path_str(&b)
    ]));
    let _b = harness::Mounted(b.clone());
    let sock = harness::path_str(&dir.path().join("s"));
    let swept = harness::path_str(&b.join("work"));
    let run = controlled_sweep(&swept, &sock);
    let mut bystander = Command::new("sleep")
        .arg("30")
        .current_dir(&by)
        .spawn()
        .expect("sleep");
    let pid = bystander.id() as i32;
    std::fs::rename(t.join("a/work"), t.join("elsewhere/work")).unwrap();
    let _ = Run::new(["stop", "--control", &sock]).finish();
    let f = run.finish();
    let alive = harness::state(pid).is_some_and(|s| s != 'Z');
    let _ = bystander.kill();
    let _ = bystander.wait();
    let v = f.verdict();
    assert!(alive, "a bystander was signalled: {f}");
    assert_eq!(v["stopped"], false, "{f}");
    let error = v["error"].as_str().unwrap_or_default();
    assert!(error.contains("cannot be told"), "{f}");
    assert!(!harness::sweep_lists(&v, pid, None), "{f}");
}

/// A run of `sleep 30` (grace 300ms) that sweeps `swept` and serves `sock`, a clock tick or more
/// old: what the test starts from now on started during it.
fn controlled_sweep(swept: &str, sock: &str) -> harness::Running {
    let run = Run::new([
        "--sweep",
        swept,
        "--control",
        sock,
        "--grace",
        "300ms",
        "--",
        "sleep",
        "30",
    ])
    .start();
    harness::wait_for_socket(Path::new(sock));
    std::thread::sleep(Duration::from_millis(30));
    run
}

#[test]
fn a_non_root_run_places_its_own_users_maps_by_the_files_at_their_paths() {
    let _quiet = harness::quiet();
    // As uid 65534, map_files cannot be opened: a mapped file is placed by the mount at its
    // path when the file there is the mapped one. A process of the same user that maps a file
    // in the folder is found and stopped; one that maps a file beside it, and its libraries,
    // is neither a holder nor unverified.
    let dir = harness::tempdir();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let script = r#"
        D=$1 VR=$2 H=$3
        mkdir -m 777 "$D/w"
        head -c 4096 /dev/zero > "$D/w/mapped"; head -c 4096 /dev/zero > "$D/beside"
        chmod 666 "$D/w/mapped" "$D/beside"
        AS="setpriv --reuid 65534 --regid 65534 --clear-groups"
        cd /
        $AS "$VR" --sweep "$D/w" --verdict "$D/v" -- sh -c \
            'until [ -s "$0/r1" ] && [ -s "$0/r2" ]; do sleep 0.05; done' "$D" &
        VR1=$!
        sleep 0.2
        $AS "$H" map "$D/w/mapped" "$D/r1" &
        M=$!
        $AS "$H" map "$D/beside" "$D/r2" &
        B=$!
        wait $VR1; echo $? > "$D/s"
        echo "$M $B" > "$D/pids"
        kill $M $B 2>/dev/null
        wait
    "#;
    let Some(f) = in_own_pid_namespace_with(script, dir.path(), &[harness::helper_for_others()])
    else {
        return;
    };
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap_or_default();
    let pids: Vec<i64> = read("pids")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{f}");
    let v = verdict_at(&dir.path().join("v"), &f);
    let listed = |key: &str, pid: i64| {
        v["sweep"][key]
            .as_array()
            .and_then(|a| a.iter().find(|u| u["pid"] == pid).cloned())
    };
    let mapper = listed("holders", pids[0]).unwrap_or_else(|| panic!("{f}\n{v}"));
    // (Its argument names the file too.)
    assert_eq!(mapper["what"], serde_json::json!(["map", "argv"]), "{v}");
    assert_eq!(listed("holders", pids[1]), None, "{v}");
    assert_eq!(listed("unverified", pids[1]), None, "{v}");
    assert_eq!(v["stopped"], true, "{f}\n{v}");
    assert_eq!(read("s").trim(), "0", "{v}");
}

#[test]
fn a_process_that_holds_only_a_deleted_file_below_the_folder_s_path_is_listed_never_signalled() {
    let _quiet = harness::quiet();
    // A deleted file's link reads the same whether it was removed from the folder or from
    // another that had the folder's path at some time (one it replaced by a rename, one made
    // under its name while it was away): a holder, so the verdict is false while it lives, but
    // no proof to signal it on.
    let (_dir, folder, run) = sweeping_a_folder();
    let file = folder.join("f");
    std::fs::write(&file, "data").unwrap();
    let mut holder = Command::new("sh")
        .args(["-c", "exec 3<\"$F\"; exec sleep 30"])
        .env("F", &file)
        .current_dir("/")
        .spawn()
        .expect("sh");
    let pid = holder.id() as i32;
    harness::wait_until("the holder to run sleep", || harness::runs(pid, "sleep"));
    std::fs::remove_file(&file).unwrap();
    let f = run.finish();
    let alive = harness::state(pid).is_some_and(|s| s != 'Z');
    let _ = holder.kill();
    let _ = holder.wait();
    let v = f.verdict();
    assert!(alive, "a doubted holder was signalled: {f}");
    assert!(harness::sweep_lists(&v, pid, Some("fd")), "{f}");
    assert_eq!(v["stopped"], false, "{f}");
}

#[test]
fn a_process_in_a_removed_namesake_shown_by_a_bind_mount_is_listed_never_signalled() {
    let _quiet = harness::quiet();
    // While the folder is away (renamed), a namesake is made with a subfolder, which is bound
    // elsewhere; a process works in a folder of it; all of that is removed and the folder comes
    // back. The bind mount shows a removed folder whose old path lies below the folder's: the
    // process's way up ends at that mount, and whose folder it was cannot be told. It is
    // listed, the verdict is false, and it is never signalled (it was taken for the folder's
    // by the mount's path, and stopped).
    if !harness::is_root() {
        harness::skip("a bind mount needs root");
        return;
    }
    let dir = harness::tempdir();
    let folder = dir.path().join("w");
    let (away, view) = (dir.path().join("away"), dir.path().join("view"));
    std::fs::create_dir(&folder).unwrap();
    std::fs::create_dir(&view).unwrap();
    let sock = harness::path_str(&dir.path().join("s"));
    let run = controlled_sweep(&harness::path_str(&folder), &sock);
    std::fs::rename(&folder, &away).unwrap();
    std::fs::create_dir_all(folder.join("sub/t")).unwrap();
    let bound = Command::new("mount")
        .args(["--bind", &harness::path_str(&folder.join("sub"))])
        .arg(&view)
        .status()
        .is_ok_and(|s| s.success());
    assert!(bound, "mount --bind");
    let _view = harness::Mounted(view.clone());
    let mut bystander = sleeper_in(&view.join("t"));
    let pid = bystander.id() as i32;
    harness::wait_until("the bystander to run", || harness::runs(pid, "sleep"));
    std::fs::remove_dir(view.join("t")).unwrap();
    std::fs::remove_dir(folder.join("sub")).unwrap();
    std::fs::remove_dir(&folder).unwrap();
    std::fs::rename(&away, &folder).unwrap();
    let _ = Run::new(["stop", "--control", &sock]).finish();
    let f = run.finish();
    let alive = harness::state(pid).is_some_and(|s| s != 'Z');
    let _ = bystander.kill();
    let _ = bystander.wait();
    let v = f.verdict();
    assert!(
        alive,
        "a process whose folder cannot be told was signalled: {f}"
    );
    assert!(harness::sweep_lists(&v, pid, Some("cwd")), "{f}");
    assert_eq!(v["stopped"], false, "{f}");
}
