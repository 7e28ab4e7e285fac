//! What a received signal does: a pure decision (`decide`), then the delivery to the child's
//! group or the child, never to a process outside the run.

use crate::proctable::{self, Handle, Proc};
use crate::scope::Scope;
use crate::signal::{Rewrite, Sig};
use crate::{msg, sys};
use nix::unistd::Pid;
use std::os::fd::BorrowedFd;

/// What the run knows when a signal arrives.
#[derive(Clone, Copy, Debug, Default)]
pub struct View<'a> {
    /// The caller started vloer-run with the signal ignored.
    pub ignored_at_start: bool,
    /// The terminal sent it to the whole group the child shares with vloer-run.
    pub from_terminal_to_shared_group: bool,
    pub stopping: bool,
    /// It is one of `--stop-on`.
    pub stops_the_run: bool,
    pub rewrite: &'a [Rewrite],
    /// `--session`: the child's group is orphaned, where the kernel drops job-control signals.
    pub session: bool,
    pub pid1: bool,
    /// vloer-run's own process group is orphaned (vloer-run leads a terminal's session, as under
    /// `script -c`, `ssh -t` or `docker exec -it`): the kernel discards a job-control stop for
    /// such a group, and no shell could continue vloer-run if it stopped itself.
    pub orphaned: bool,
}

/// The decision for one received signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Ignored at start: neither forwarded nor a reason to stop.
    Ignore,
    /// Start the stop; the stop sends `forwarded` first (none: dropped by `--rewrite`, or, with
    /// `delivered`, the terminal gave it to the child's group already).
    BeginStop { forwarded: Sig, delivered: bool },
    /// Forward `sig` (none: nothing to send); then, for job control, stop vloer-run itself too.
    Forward { sig: Sig, stop_self: bool },
}

/// Decides what `sig` does.
pub fn decide(sig: Sig, view: View<'_>) -> Action {
    if view.ignored_at_start {
        return Action::Ignore;
    }
    let out = if view.from_terminal_to_shared_group {
        Sig::NONE
    } else {
        // A job-control signal turned into SIGSTOP would stop the child for good where nobody
        // can continue the run; as the kernel does for the bare command, it is left to be
        // discarded.
        translate(sig, view.rewrite, view.session && !view.orphaned)
    };
    if view.stops_the_run && !view.stopping {
        return Action::BeginStop {
            forwarded: out,
            delivered: view.from_terminal_to_shared_group,
        };
    }
    Action::Forward {
        sig: out,
        stop_self: sig.is_job_control() && !view.pid1 && !view.orphaned,
    }
}

/// Applies `--rewrite`; in a new session the job-control signals become SIGSTOP, since the
/// kernel discards them for an orphaned process group.
fn translate(sig: Sig, rewrite: &[Rewrite], session: bool) -> Sig {
    if let Some(r) = rewrite.iter().find(|r| r.from == sig) {
        return r.to;
    }
    if session && sig.is_job_control() {
        return Sig::STOP;
    }
    sig
}

/// Where a forwarded signal goes.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// The group of the unreaped main child: it holds the group's number, so no other process
    /// can have made a group with it, and killpg reaches that group and nothing else.
    ChildGroup(Pid),
    /// The run's members of a group whose number vloer-run cannot vouch for (the reaped child's,
    /// or the caller's group the child shares), one process at a time.
    GroupInTree(Pid),
    /// The main child alone, through its pidfd where there is one.
    Child(Pid, Option<BorrowedFd<'a>>),
}

/// Sends `sig` to `target`, saying so with `-v`.
pub fn deliver(target: Target<'_>, sig: Sig) {
    if sig.is_none() {
        msg::verbose(format_args!(
            "not forwarded (rewritten to 0, or delivered already)"
        ));
        return;
    }
    let (result, what, pid) = match target {
        Target::ChildGroup(pgid) => (sys::killpg(pgid, sig), "group", pgid),
        Target::GroupInTree(pgid) => return forward_to_group_in_tree(pgid, sig),
        Target::Child(pid, Some(fd)) => (sys::pidfd_send_signal(fd, sig), "pid", pid),
        Target::Child(pid, None) => (sys::kill(pid, sig), "pid", pid),
    };
    match result {
        Ok(()) => msg::verbose(format_args!("forwarded {sig} to {what} {pid}")),
        Err(e) => msg::verbose(format_args!("could not forward {sig}: {e}")),
    }
}

/// Forwards `sig` to the members of group `pgid` inside the tree, one process at a time through
/// a pidfd, after re-reading it: neither a recycled pid nor a recycled group id is ever hit, nor
/// a process outside the run.
fn forward_to_group_in_tree(pgid: Pid, sig: Sig) {
    let procs = match proctable::tree() {
        Ok(procs) => procs,
        Err(e) => {
            msg::verbose(format_args!("could not forward {sig}: {e}"));
            return;
        }
    };
    let tree: std::collections::HashSet<Pid> = procs.iter().map(|p| p.pid).collect();
    let mut sent = 0;
    for p in procs.iter().filter(|p| p.pgid == pgid && p.is_live()) {
        let still = |f: &Proc| f.pgid == pgid && f.is_live() && Scope::Tree.belongs(f, &tree);
        if let Ok(Some((handle, _))) = Handle::open(p, still) {
            if handle.signal(sig).is_ok() {
                sent += 1;
            }
        }
    }
    msg::verbose(format_args!(
        "forwarded {sig} to {sent} process(es) of the run in group {pgid}"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> View<'static> {
        View::default()
    }

    #[test]
    fn a_signal_is_forwarded_as_received() {
        let a = decide(Sig::HUP, view());
        assert_eq!(
            a,
            Action::Forward {
                sig: Sig::HUP,
                stop_self: false
            }
        );
    }

    #[test]
    fn ignored_at_start_is_neither_forwarded_nor_a_stop() {
        let v = View {
            ignored_at_start: true,
            stops_the_run: true,
            ..view()
        };
        assert_eq!(decide(Sig::TERM, v), Action::Ignore);
    }

    #[test]
    fn a_stop_signal_starts_the_stop_once() {
        let v = View {
            stops_the_run: true,
            ..view()
        };
        assert_eq!(
            decide(Sig::TERM, v),
            Action::BeginStop {
                forwarded: Sig::TERM,
                delivered: false
            }
        );
        let again = View {
            stopping: true,
            ..v
        };
        assert_eq!(
            decide(Sig::TERM, again),
            Action::Forward {
                sig: Sig::TERM,
                stop_self: false
            }
        );
    }

    #[test]
    fn rewrites_apply_and_zero_drops() {
        let rules = [
            Rewrite::parse("TERM:QUIT").unwrap(),
            Rewrite::parse("WINCH:0").unwrap(),
        ];
        let v = View {
            rewrite: &rules,
            ..view()
        };
        assert_eq!(
            decide(Sig::TERM, v),
            Action::Forward {
                sig: Sig::QUIT,
                stop_self: false
            }
        );
        assert_eq!(
            decide(Sig::WINCH, v),
            Action::Forward {
                sig: Sig::NONE,
                stop_self: false
            }
        );
    }

    #[test]
    fn job_control_stops_vloer_run_too_unless_pid_1_and_becomes_sigstop_in_a_session() {
        assert_eq!(
            decide(Sig::TSTP, view()),
            Action::Forward {
                sig: Sig::TSTP,
                stop_self: true
            }
        );
        let pid1 = View {
            pid1: true,
            ..view()
        };
        assert_eq!(
            decide(Sig::TSTP, pid1),
            Action::Forward {
                sig: Sig::TSTP,
                stop_self: false
            }
        );
        let session = View {
            session: true,
            ..view()
        };
        assert_eq!(
            decide(Sig::TSTP, session),
            Action::Forward {
                sig: Sig::STOP,
                stop_self: true
            }
        );
    }

    #[test]
    fn job_control_never_stops_vloer_run_in_an_orphaned_group() {
        for session in [false, true] {
            let v = View {
                orphaned: true,
                session,
                ..view()
            };
            assert_eq!(
                decide(Sig::TSTP, v),
                Action::Forward {
                    sig: Sig::TSTP,
                    stop_self: false
                },
                "session {session}"
            );
        }
    }

    #[test]
    fn what_the_terminal_sent_the_shared_group_is_not_sent_again() {
        let v = View {
            from_terminal_to_shared_group: true,
            ..view()
        };
        assert_eq!(
            decide(Sig::INT, v),
            Action::Forward {
                sig: Sig::NONE,
                stop_self: false
            }
        );
        let stop = View {
            stops_the_run: true,
            ..v
        };
        assert_eq!(
            decide(Sig::INT, stop),
            Action::BeginStop {
                forwarded: Sig::NONE,
                delivered: true
            }
        );
    }
}
