//! Transparent to its caller: the child gets the first word in a stop, vloer-run ends
//! by the child's signal, Ctrl-C ends loops around it, and an exec from a terminal gets one.

use crate::harness::{self, recorded, Run};
use crate::tty::{self, Pty};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

/// An entrypoint that starts a service in a session of its own (as `pg_ctl` and daemons do) and
/// publishes `ENTRYPOINT SERVICE` in `$D/pids`; `trap` is its TERM trap (`$svc` is the service).
/// The service records every signal and ends on USR1 (`STOP_ON` overrides).
fn entrypoint(flags: &[&str], dir: &Path, trap: &str) -> Run {
    let script = format!(
        r#"setsid "$H" record-until "${{STOP_ON:-USR1}}" "$D/svc" &
svc=$!
trap '{trap}' TERM
echo $$ $svc > "$D/pids"
while :; do wait; done"#
    );
    let args: Vec<&str> = flags
        .iter()
        .copied()
        .chain(["--", "sh", "-c", &script])
        .collect();
    Run::new(args)
        .env("H", harness::helper())
        .env("D", &harness::path_str(dir))
}

/// Starts the entrypoint and waits until its service is ready; returns the service's pid.
fn start_entrypoint(
    flags: &[&str],
    dir: &Path,
    trap: &str,
) -> (harness::Running, i32, harness::Adopted) {
    start_entrypoint_with(entrypoint(flags, dir, trap), dir)
}

fn start_entrypoint_with(run: Run, dir: &Path) -> (harness::Running, i32, harness::Adopted) {
    let (run, pids) = run.start_until_ready(&dir.join("pids"));
    let svc = pids[1];
    harness::wait_until("the service to be ready", || {
        std::fs::read_to_string(dir.join("svc")).is_ok_and(|t| t.starts_with("ready "))
    });
    // Should the stop leave it behind, the test ends it.
    let mut adopted = harness::Adopted::ours(dir);
    adopted.add(svc);
    (run, svc, adopted)
}

#[test]
fn the_entrypoint_stops_its_own_service_and_vloer_run_never_signals_it() {
    let dir = harness::tempdir();
    let (run, svc, _adopted) =
        start_entrypoint(&[], dir.path(), "kill -USR1 $svc; wait $svc; exit 0");
    let f = run.finish_after(libc::SIGTERM);
    let v = f.verdict();
    assert_eq!(
        recorded(&dir.path().join("svc")),
        [libc::SIGUSR1],
        "the service heard from vloer-run: {f}"
    );
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(f.code(), Some(0), "{f}");
    assert!(!harness::alive(svc));
}

#[test]
fn what_the_child_leaves_behind_still_gets_the_stop_signal_then_sigkill() {
    let dir = harness::tempdir();
    let (run, svc, _adopted) = start_entrypoint(&["--grace", "1s"], dir.path(), "exit 0");
    let f = run.finish_after(libc::SIGTERM);
    let v = f.verdict();
    // The service records TERM and goes on (it only ends on USR1): SIGKILL after the grace.
    assert_eq!(recorded(&dir.path().join("svc")), [libc::SIGTERM], "{f}");
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(v["sent"]["SIGKILL"], 1, "{f}");
    assert_eq!(f.code(), Some(0), "{f}");
    assert!(!harness::alive(svc));
}

#[test]
fn stop_order_all_signals_the_whole_tree_at_once() {
    let dir = harness::tempdir();
    // A service that ends on TERM: USR1 is only recorded, whichever comes first.
    let run = entrypoint(
        &["--stop-order", "all"],
        dir.path(),
        "kill -USR1 $svc; wait $svc; exit 0",
    )
    .env("STOP_ON", "TERM");
    let (run, _svc, _adopted) = start_entrypoint_with(run, dir.path());
    let f = run.finish_after(libc::SIGTERM);
    let got = recorded(&dir.path().join("svc"));
    assert!(
        got.contains(&libc::SIGTERM),
        "the service did not get vloer-run's SIGTERM: {got:?}\n{f}"
    );
    assert_eq!(f.verdict()["stopped"], true, "{f}");
}

#[test]
fn vloer_run_ends_by_the_signal_that_killed_the_child_without_a_core_file() {
    for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM] {
        // The child cannot dump core itself; vloer-run is allowed to (an unlimited RLIMIT_CORE)
        // and must not.
        let script = format!("ulimit -c 0; kill -{sig} $$");
        let mut run = Run::new(["--", "sh", "-c", &script]);
        // SAFETY: setrlimit between fork and exec is async-signal-safe and touches no memory of
        // ours but the stack value it reads.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut run.cmd, || {
                let lim = libc::rlimit {
                    rlim_cur: libc::RLIM_INFINITY,
                    rlim_max: libc::RLIM_INFINITY,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &lim);
                Ok(())
            });
        }
        let f = run.finish();
        assert_eq!(f.signal(), Some(sig), "{f}");
        assert!(!f.status.core_dumped(), "vloer-run dumped core: {f}");
        let v = f.verdict();
        assert_eq!(v["exit_code"], 128 + sig, "{f}");
        assert_eq!(v["stopped"], true, "{f}");
    }
}

#[test]
fn a_child_that_handles_term_and_exits_0_gives_0() {
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let script = format!(
        "trap 'exit 0' TERM; echo $$ > {}; while :; do sleep 0.05; done",
        harness::path_str(&ready)
    );
    let (run, _) = Run::new(["--", "sh", "-c", &script]).start_until_ready(&ready);
    let f = run.finish_after(libc::SIGTERM);
    assert_eq!(f.code(), Some(0), "{f}");
    assert_eq!(f.verdict()["stopped"], true, "{f}");
}

#[test]
fn as_pid_1_the_status_is_128_plus_n() {
    let ns = ["unshare", "--pid", "--fork", "--mount-proc"];
    if !harness::works_here(&ns, "unshare --pid --fork --mount-proc") {
        return;
    }
    let f = Run::via(&ns, ["--", "sh", "-c", "kill -INT $$"]).finish();
    // unshare passes on a death by signal as its own; a plain exit as the same code.
    assert_eq!(f.code(), Some(128 + libc::SIGINT), "{f}");
    assert_eq!(f.verdict()["exit_code"], 128 + libc::SIGINT, "{f}");
}

#[test]
fn an_unconfirmed_stop_is_125_even_when_the_child_died_of_a_signal() {
    let Some((dir, copy)) = crate::unconfirmed::setuid_helper() else {
        return;
    };
    let ready = dir.path().join("ready");
    // As uid 65534 the child starts a setuid-root helper it cannot kill, then dies of SIGINT.
    let script =
        r#""$0" --root sleep "$1" & while [ ! -s "$1" ]; do sleep 0.02; done; kill -INT $$"#;
    let args = [
        "--grace",
        "200ms",
        "--kill-timeout",
        "500ms",
        "--",
        "sh",
        "-c",
        script,
        &harness::path_str(&copy),
        &harness::path_str(&ready),
    ];
    let run = Run::via(&harness::AS_NOBODY, args).current_dir(dir.path());
    let f = run.start().finish();
    let mut adopted = harness::Adopted::ours(dir.path());
    for pid in harness::wait_for_pids(&ready) {
        adopted.add(pid);
    }
    let v = f.verdict();
    assert_eq!(v["child"]["signal"], "SIGINT", "{f}");
    assert_eq!(v["stopped"], false, "{f}");
    assert_eq!(f.code(), Some(125), "{f}");
    adopted.end_all();
}

/// An interactive bash on a fresh pty, as a user's terminal; `INNER` is a child that prints its
/// pid, then becomes `sleep 30`.
fn prompt(pty: &mut Pty, env: &[(&str, &str)]) -> harness::Running {
    let mut all = vec![
        ("PS1", "outer$ "),
        ("INNER", r#"echo "pid=$$"; exec sleep 30"#),
    ];
    all.extend_from_slice(env);
    let leader = pty.spawn(
        &["bash", "--norc", "--noprofile", "--noediting", "-i"],
        &all,
    );
    pty.expect("outer$ ");
    leader
}

/// Waits until `pid` runs `sleep` (it has exec'd and waits there for the signal).
fn wait_sleeping(pty: &mut Pty, pid: i32) {
    pty.wait_for("the child to run sleep", |_| harness::runs(pid, "sleep"));
}

/// Ctrl-C, then the prompt's `$?` must be 130 and the loop must not have gone on.
fn ctrl_c_ends_the_loop(pty: &mut Pty, leader: harness::Running) {
    pty.send("\x03");
    pty.expect("outer$ ");
    pty.send("echo \"rc=$?\"\n");
    pty.expect("rc=130\r\n");
    assert_eq!(
        pty.count("next=1"),
        0,
        "the loop went on after Ctrl-C:\n{}",
        pty.text()
    );
    pty.send("exit\n");
    pty.assert_leader_succeeds(leader, "the outer bash");
}

/// Types `command` at a fresh prompt, `$RUN` standing for vloer-run around a child that prints
/// its pid and becomes `sleep 30`; returns the prompt's shell and the child, once it sleeps.
fn start_loop(pty: &mut Pty, command: &str) -> (harness::Running, i32) {
    let run = r#""$VR" --verdict off -- sh -c "$INNER""#;
    let leader = prompt(pty, &[]);
    pty.send(&format!("{}\n", command.replace("$RUN", run)));
    let child = pty.expect_number("pid=");
    wait_sleeping(pty, child);
    (leader, child)
}

#[test]
fn ctrl_c_ends_a_loop_typed_at_the_prompt() {
    let mut pty = Pty::open();
    let (leader, child) = start_loop(&mut pty, r#"for i in 1 2 3; do $RUN; echo "next=$i"; done"#);
    pty.wait_fg(child, "the child's group to get the terminal");
    ctrl_c_ends_the_loop(&mut pty, leader);
}

#[test]
fn ctrl_c_ends_a_loop_inside_a_bash_script() {
    let mut pty = Pty::open();
    let (leader, child) = start_loop(
        &mut pty,
        r#"bash -c 'for i in 1 2 3; do $RUN; echo "next=$i"; done'"#,
    );
    let vr = tty::stat(child).expect("the child's stat").ppid;
    // The script's shell must get the SIGINT too, so the child stays in its job's group.
    let (c, v) = (tty::stat(child).unwrap(), tty::stat(vr).unwrap());
    assert_eq!(c.pgrp, v.pgrp, "the child left the script's group");
    assert_eq!(pty.fg(), c.pgrp, "the script's job lost the terminal");
    ctrl_c_ends_the_loop(&mut pty, leader);
}

#[test]
fn in_a_scripts_group_ctrl_c_reaches_the_child_once_and_nothing_reaches_the_caller() {
    let dir = harness::tempdir();
    let out = dir.path().join("rec");
    let out_s = harness::path_str(&out);
    let mut pty = Pty::open();
    let leader = prompt(&mut pty, &[("H", harness::helper()), ("OUT", &out_s)]);
    // -v: two SIGINTs sent close together may merge into one pending signal, so what vloer-run
    // forwarded is read from its own account too.
    pty.send("bash -c '\"$VR\" -v --verdict off -- \"$H\" record \"$OUT\"; echo \"after=$?\"'\n");
    harness::wait_until("the recorder", || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.starts_with("ready "))
    });
    let rec: i32 = std::fs::read_to_string(&out).unwrap()["ready ".len()..]
        .trim()
        .parse()
        .unwrap();
    let vr = tty::stat(rec).expect("the recorder's stat").ppid;
    assert_eq!(
        tty::stat(rec).unwrap().pgrp,
        tty::stat(vr).unwrap().pgrp,
        "the child did not stay in the script's group"
    );
    pty.send("\x03");
    harness::wait_until("SIGINT recorded", || recorded(&out).contains(&libc::SIGINT));
    // USR1's default action would end the caller's bash: only the run's members get it.
    harness::kill_pid(vr, libc::SIGUSR1);
    harness::wait_until("SIGUSR1 recorded", || {
        recorded(&out).contains(&libc::SIGUSR1)
    });
    harness::kill_pid(vr, libc::SIGTERM);
    pty.expect("after=0");
    assert_eq!(
        recorded(&out),
        [libc::SIGINT, libc::SIGUSR1, libc::SIGTERM],
        "each signal once"
    );
    let text = pty.text();
    assert!(
        !text.contains("forwarded SIGINT") && text.contains("forwarded SIGUSR1"),
        "the terminal's SIGINT was forwarded again:\n{text}"
    );
    pty.expect("outer$ ");
    pty.send("exit\n");
    pty.assert_leader_succeeds(leader, "the outer bash");
}

/// Whether `pid` runs (not stopped) in its terminal's foreground group: stat's state, pgrp and
/// tpgid.
fn running_in_front(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let f: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    f.len() > 5 && f[0] != "T" && f[2] == f[5]
}

/// Waits until `shell` has a child running `sleep`, and returns it.
fn wait_for_sleep_in(pty: &mut Pty, shell: i32) -> i32 {
    let mut sleeper = None;
    pty.wait_for("a sleep in the exec's shell", |_| {
        sleeper = harness::children(shell)
            .into_iter()
            .find(|&c| harness::runs(c, "sleep"));
        sleeper.is_some()
    });
    sleeper.expect("found")
}

/// An instance with a control socket (`$S` at the prompt), and a prompt on a fresh pty.
fn instance_and_prompt() -> (tempfile::TempDir, harness::Running, Pty, harness::Running) {
    let dir = harness::tempdir();
    let sock = harness::path_str(&dir.path().join("ctl"));
    let inst = Run::new(["--control", &sock, "--", "sleep", "300"]).start();
    harness::wait_for_socket(Path::new(&sock));
    let mut pty = Pty::open();
    let leader = prompt(&mut pty, &[("S", &sock)]);
    (dir, inst, pty, leader)
}

#[test]
fn an_exec_from_a_terminal_gets_one_with_job_control_and_the_terminal_comes_back() {
    let (_dir, inst, mut pty, leader) = instance_and_prompt();
    let _watch = harness::ps_on_stall(std::time::Duration::from_secs(20));
    pty.send(
        "\"$VR\" exec --control \"$S\" -- env PS1='exec$ ' bash --norc --noprofile --noediting -i\n",
    );
    pty.expect("exec$ ");
    pty.send("echo \"pid=$$ flags=$-\"\n");
    let shell = pty.expect_number("pid=");
    let line = pty.expect("exec$ ");
    assert!(
        line.split("flags=").nth(1).is_some_and(|f| f.contains('m')),
        "the exec's shell has no job control: {line:?}"
    );
    // Its terminal follows this one's size.
    // The client passes it on when its SIGWINCH arrives, so ask until the answer is there.
    pty.set_size(30, 100);
    let resized = (0..100).any(|_| {
        pty.send("stty size\n");
        pty.expect("exec$ ").contains("30 100")
    });
    assert!(
        resized,
        "the exec's terminal kept its size:\n{}",
        pty.text()
    );
    // One Ctrl-C at a sleep inside returns to that shell's prompt; the shell lives on.
    pty.send("sleep 30; echo \"went-on=$?\"\n");
    wait_for_sleep_in(&mut pty, shell);
    pty.send("\x03");
    pty.expect("exec$ ");
    // The list did not go on: no "went-on=130". (Only the typed line may show "went-on=$?", and
    // not even that when Ctrl-C flushed the inner terminal's output before the relay read the echo.)
    assert!(
        !(0..10).any(|d| pty.text().contains(&format!("went-on={d}"))),
        "the shell went on after Ctrl-C: {}",
        pty.text()
    );
    pty.send("echo \"still=$$\"\n");
    assert_eq!(pty.expect_number("still="), shell);
    // Ctrl-Z stops a job of that shell, which reports it and takes the terminal back.
    pty.expect("exec$ ");
    pty.send("sleep 31\n");
    let sleeper = wait_for_sleep_in(&mut pty, shell);
    pty.send("\x1a");
    pty.expect("Stopped");
    pty.expect("exec$ ");
    // `fg` brings it back to the front (bash names the job before it hands over the terminal and
    // continues it), and Ctrl-C ends it there.
    pty.send("fg\n");
    pty.expect("sleep 31");
    pty.wait_for("the job to run in the foreground of its terminal", |_| {
        running_in_front(sleeper)
    });
    pty.send("\x03");
    pty.expect("exec$ ");
    pty.send("exit 3\n");
    pty.expect("outer$ ");
    // Cooked again: the outer shell's output has its CR LF back.
    pty.send("echo \"rc=$?\"\n");
    pty.expect("rc=3\r\n");
    pty.send("exit\n");
    pty.assert_leader_succeeds(leader, "the outer bash");
    let f = inst.finish_after(libc::SIGTERM);
    assert_eq!(f.verdict()["stopped"], true, "{f}");
}

#[test]
fn no_tty_keeps_the_exec_on_the_callers_descriptors() {
    let (_dir, inst, mut pty, leader) = instance_and_prompt();
    pty.send("\"$VR\" exec -T --control \"$S\" -- sh -c 'echo \"ctty=$(ps -o tty= -p $$)\"'\n");
    pty.expect("ctty=");
    let line = pty.expect("outer$ ");
    assert!(line.contains("ctty=?"), "the exec got a terminal: {line:?}");
    pty.send("exit\n");
    pty.assert_leader_succeeds(leader, "the outer bash");
    inst.finish_after(libc::SIGTERM);
}

#[test]
fn ctrl_c_ends_a_scripts_loop_around_an_exec_without_a_terminal() {
    let (_dir, inst, mut pty, leader) = instance_and_prompt();
    // -T: the client shares the script's group, gets the terminal's SIGINT, and passes it on.
    pty.send(
        "bash -c 'for i in 1 2 3; do \"$VR\" exec -T --control \"$S\" -- sh -c \"$INNER\"; echo \"next=$i\"; done'\n",
    );
    let child = pty.expect_number("pid=");
    wait_sleeping(&mut pty, child);
    ctrl_c_ends_the_loop(&mut pty, leader);
    let f = inst.finish_after(libc::SIGTERM);
    assert_eq!(f.verdict()["stopped"], true, "{f}");
}

/// Signals 32 to 34 (glibc's and musl's own) as ignored or not in `/proc/PID/status` text.
fn libc_signals_ignored(status: &str) -> u64 {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .expect("a SigIgn line");
    u64::from_str_radix(line.trim(), 16).expect("hex") & (0b111 << 31)
}

#[test]
fn the_child_gets_signals_32_to_34_as_vloer_run_got_them() {
    // The musl build ignores them itself while it runs; the child must not inherit that. (A
    // program started by glibc's posix_spawn, as this one is, gets 32 and 33 ignored.)
    let direct = std::process::Command::new("cat")
        .arg("/proc/self/status")
        .output()
        .expect("cat");
    let direct = libc_signals_ignored(&String::from_utf8_lossy(&direct.stdout));
    let via = Run::new(["--verdict", "off", "--", "cat", "/proc/self/status"]).finish();
    assert_eq!(via.code(), Some(0), "{via}");
    assert_eq!(
        libc_signals_ignored(&via.stdout),
        direct,
        "the child's SigIgn for 32-34 differs from a direct child's: {via}"
    );
}
