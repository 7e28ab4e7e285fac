//! Step 1 reaches the main child's process group in one call (its pidfd, or `killpg` while the
//! unreaped child holds the group id): each member hears the stop signal once, the scan that
//! follows does not signal it again, and the call counts once in `sent`.

use crate::harness::{self, Run};
use std::path::Path;

/// What the kernel offers vloer-run, as a seccomp filter makes it look.
#[derive(Clone, Copy)]
enum Kernel {
    /// This kernel as it is: the call goes through the child's pidfd.
    This,
    /// No PIDFD_SIGNAL_PROCESS_GROUP (before 6.9): killpg, the child being unreaped.
    NoGroupSignal,
    /// No pidfds at all (before 5.3): killpg as well.
    NoPidfd,
}

/// `sh` with two recorders in its group, which log every signal and only end on SIGUSR2 (or
/// SIGKILL); stopped by SIGTERM with a 1 s grace. Returns the verdict and each recorder's log.
fn stop_two_recorders(dir: &Path, kernel: Kernel) -> (harness::Finished, Vec<Vec<i32>>) {
    let logs = [dir.join("a"), dir.join("b")];
    let script = r#""$H" record-until USR2 "$D/a" & "$H" record-until USR2 "$D/b" & wait"#;
    let run = Run::new(["--grace", "1s", "--", "sh", "-c", script])
        .env("H", harness::helper())
        .env("D", &harness::path_str(dir));
    let run = match kernel {
        Kernel::This => run,
        Kernel::NoGroupSignal => harness::without_group_signal(run),
        Kernel::NoPidfd => harness::without_pidfds(run),
    };
    let run = run.start();
    for log in &logs {
        harness::wait_until("a recorder to be ready", || {
            std::fs::read_to_string(log).is_ok_and(|t| t.starts_with("ready "))
        });
    }
    let f = run.finish_after(libc::SIGTERM);
    (f, logs.iter().map(|l| harness::recorded(l)).collect())
}

fn each_member_hears_the_stop_signal_once(kernel: Kernel) {
    let dir = harness::tempdir();
    let (f, logs) = stop_two_recorders(dir.path(), kernel);
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    for log in &logs {
        let terms = log.iter().filter(|&&s| s == libc::SIGTERM).count();
        assert_eq!(
            terms, 1,
            "a recorder got SIGTERM {terms} times: {log:?}\n{f}"
        );
    }
    // sh ended on the call; the recorders, which outlived the grace, were killed one by one.
    assert_eq!(
        v["sent"],
        serde_json::json!({"SIGTERM": 1, "SIGKILL": 2}),
        "{f}"
    );
}

#[test]
fn each_member_of_the_childs_group_hears_the_stop_signal_once() {
    each_member_hears_the_stop_signal_once(Kernel::This);
}

#[test]
fn without_the_group_flag_killpg_reaches_each_member_once() {
    each_member_hears_the_stop_signal_once(Kernel::NoGroupSignal);
}

#[test]
fn without_pidfds_each_member_of_the_childs_group_hears_the_stop_signal_once() {
    each_member_hears_the_stop_signal_once(Kernel::NoPidfd);
}

#[test]
fn with_no_grace_a_member_the_call_reached_still_gets_its_sigkill() {
    // The scan after the call comes when the grace (0) is already over: it must kill, not take
    // the member as already signalled.
    let dir = harness::tempdir();
    let (f, pid) = harness::stop_a_term_ignorer(&dir, &["--grace", "0", "--kill-timeout", "5s"]);
    let v = f.verdict();
    assert_eq!(v["stopped"], true, "{f}");
    assert_eq!(
        v["sent"],
        serde_json::json!({"SIGTERM": 1, "SIGKILL": 1}),
        "{f}"
    );
    assert!(!harness::alive_ours(pid, dir.path()), "{f}");
}
