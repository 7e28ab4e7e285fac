//! Who called a control client: the processes waiting for its answer, which the sweep never
//! takes for processes working in the folder (`vloer-run stop` names the socket, and the shell
//! that runs it may sit in the folder).

use nix::unistd::Pid;

/// A control client and the ancestors that wait for it: its parent, blocked waiting for it as
/// its only child, that parent's own parent waiting for it the same way, and so on. An ancestor
/// that goes on working while the client runs (one that started `vloer-run stop` in the
/// background and writes on, or waits for another child) is a process like any other.
pub(super) fn of(client: Pid) -> Vec<Pid> {
    let line = super::sweep::line_up(client).0;
    let waiting = line
        .windows(2)
        .take_while(|pair| waits_for(pair[1], pair[0]))
        .count();
    line.into_iter().take(1 + waiting).collect()
}

/// Whether `parent` can do nothing but wait for `child`: it has one thread, that thread sleeps
/// in a wait for a child (wait4, waitid) or for a signal (sigsuspend, as dash's `wait` does),
/// and `child` is its only child. Anything unreadable: it is not.
fn waits_for(parent: Pid, child: Pid) -> bool {
    let read = |name: &str| std::fs::read_to_string(format!("/proc/{parent}/{name}")).ok();
    let one_thread = read("status").is_some_and(|s| s.lines().any(|l| l == "Threads:\t1"));
    let asleep = read("wchan").is_some_and(|w| w == "do_wait" || w.starts_with("sigsuspend"));
    let children = read(&format!("task/{parent}/children"));
    let only = children.is_some_and(|c| c.split_whitespace().eq([child.to_string().as_str()]));
    one_thread && asleep && only
}
