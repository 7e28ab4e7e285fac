//! What one stop sends to whom, and when: its plan, as pure decisions over a scanned process.

use crate::proctable::Proc;
use crate::scope::Scope;
use crate::signal::Sig;
use nix::unistd::Pid;
use std::time::Duration;

/// The knobs of one stop.
#[derive(Clone, Copy, Debug)]
pub struct StopPlan {
    pub scope: Scope,
    pub stop_signal: Sig,
    pub grace: Duration,
    pub kill_timeout: Duration,
    /// The signal that started the stop, when it is forwarded: in step 1 the processes it goes
    /// to get it, then `stop_signal` only if that differs from the received one, so none of them
    /// gets one signal twice.
    pub forwarded: Option<Forwarded>,
    /// The main child, alive when the stop begins, hears the stop first: in the grace phase only
    /// its process group is signalled until `Stop::main_child_exited`. None: all at once.
    pub child_first: Option<ChildFirst>,
    /// The run's main child, alive when the stop begins: the stop notes which of its own signals
    /// reached it (see `Outcome::sent_to_child`).
    pub main_child: Option<Pid>,
}

/// The signal that started the stop, forwarded: to whom, and as what.
#[derive(Clone, Copy, Debug)]
pub struct Forwarded {
    pub to: ForwardedTo,
    /// What it was forwarded as (after `--rewrite`; none when dropped or delivered already).
    pub sig: Sig,
    /// What vloer-run received.
    pub received: Sig,
}

/// The main child and its process group, which hear from the stop before the rest of the scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildFirst {
    pub child: Pid,
    pub group: Pid,
}

/// Where a forwarded signal went: the main child's group, or one process.
#[derive(Clone, Copy, Debug)]
pub enum ForwardedTo {
    Group(Pid),
    Process(Pid),
}

impl ForwardedTo {
    fn covers(self, pid: Pid, pgid: Pid) -> bool {
        match self {
            ForwardedTo::Group(g) => pgid == g,
            ForwardedTo::Process(p) => pid == p,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Only watching for the scope to empty by itself (`--when-child-exits wait`).
    Watch,
    Grace,
    Kill,
    Done,
}

/// The signals one process gets in one phase of a stop, in order: at most two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Signals([Option<Sig>; 2]);

impl Signals {
    /// `first`, then `then` unless it is the same signal or none.
    pub(super) fn of(first: Sig, then: Sig) -> Signals {
        let then = (then != first && !then.is_none()).then_some(then);
        Signals([(!first.is_none()).then_some(first), then])
    }

    pub(super) fn iter(self) -> impl Iterator<Item = Sig> {
        self.0.into_iter().flatten()
    }
}

impl StopPlan {
    /// What `phase` sends to `p`: in the grace phase `--stop-signal`, preceded by the signal that
    /// started the stop for those it was forwarded to (sent once: not again when it is the stop
    /// signal itself); SIGKILL in the kill phase; nothing while watching.
    pub(super) fn signals_for(&self, phase: Phase, p: &Proc) -> Signals {
        match phase {
            Phase::Watch | Phase::Done => Signals::default(),
            Phase::Grace => self.grace_signals(self.forwarded_to(p.pid, p.pgid)),
            Phase::Kill => Signals::of(Sig::KILL, Sig::NONE),
        }
    }

    /// Whether the signal that started the stop was forwarded to the process `pid` in `pgid`.
    fn forwarded_to(&self, pid: Pid, pgid: Pid) -> bool {
        self.forwarded.is_some_and(|f| f.to.covers(pid, pgid))
    }

    /// The grace's signals, for a process the signal that started the stop was forwarded to
    /// (`forwarded_to`) or not.
    fn grace_signals(&self, forwarded_to: bool) -> Signals {
        match self.forwarded {
            Some(f) if forwarded_to => {
                let then = self.stop_signal;
                Signals::of(f.sig, if then == f.received { Sig::NONE } else { then })
            }
            _ => Signals::of(self.stop_signal, Sig::NONE),
        }
    }

    /// Whether `sig`, sent in `phase` to the process `pid` in `pgid`, is the stop's own doing
    /// rather than the passing on of a signal from outside (the one that started the stop).
    pub(super) fn on_own_account(&self, phase: Phase, pid: Pid, pgid: Pid, sig: Sig) -> bool {
        match phase {
            Phase::Grace => {
                !(self.forwarded_to(pid, pgid) && self.forwarded.is_some_and(|f| f.sig == sig))
            }
            Phase::Kill => true,
            Phase::Watch | Phase::Done => false,
        }
    }

    /// The one signal the grace sends to every member of group `pgid` alike, which one call to
    /// the group can then deliver; None when members differ or get two.
    pub(super) fn group_signal(&self, pgid: Pid) -> Option<Sig> {
        let sigs = match self.forwarded.map(|f| f.to) {
            None => self.grace_signals(false),
            Some(ForwardedTo::Group(g)) => self.grace_signals(g == pgid),
            Some(ForwardedTo::Process(_)) => {
                let child = self.grace_signals(true);
                (child == self.grace_signals(false)).then_some(child)?
            }
        };
        match sigs.0 {
            [Some(sig), None] => Some(sig),
            _ => None,
        }
    }

    /// Whether, in `phase`, `p` waits for the main child's exit before it is signalled.
    pub(super) fn waits_for_child(&self, phase: Phase, p: &Proc) -> bool {
        phase == Phase::Grace
            && self
                .child_first
                .is_some_and(|w| p.pgid != w.group && p.pid != w.child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, pgid: i32) -> Proc {
        let mut p = crate::proctable::read(nix::unistd::getpid())
            .unwrap()
            .expect("this process");
        p.pid = Pid::from_raw(pid);
        p.pgid = Pid::from_raw(pgid);
        p
    }

    fn plan() -> StopPlan {
        StopPlan {
            scope: Scope::Tree,
            stop_signal: Sig::TERM,
            grace: Duration::from_secs(5),
            kill_timeout: Duration::from_secs(2),
            forwarded: None,
            child_first: None,
            main_child: None,
        }
    }

    /// A received SIGTERM forwarded to `to` as `sig`.
    fn forwarded(to: ForwardedTo, sig: Sig) -> Forwarded {
        Forwarded {
            to,
            sig,
            received: Sig::TERM,
        }
    }

    fn sigs(s: Signals) -> Vec<Sig> {
        s.iter().collect()
    }

    #[test]
    fn grace_sends_the_stop_signal_and_kill_sends_sigkill() {
        let p = proc(10, 10);
        assert_eq!(sigs(plan().signals_for(Phase::Grace, &p)), [Sig::TERM]);
        assert_eq!(sigs(plan().signals_for(Phase::Kill, &p)), [Sig::KILL]);
        assert!(sigs(plan().signals_for(Phase::Watch, &p)).is_empty());
    }

    #[test]
    fn the_signal_that_started_the_stop_is_not_sent_twice() {
        let received_term = StopPlan {
            forwarded: Some(forwarded(ForwardedTo::Group(Pid::from_raw(10)), Sig::TERM)),
            ..plan()
        };
        assert_eq!(
            sigs(received_term.signals_for(Phase::Grace, &proc(11, 10))),
            [Sig::TERM]
        );
        // Outside the group it was forwarded to: the stop signal alone.
        assert_eq!(
            sigs(received_term.signals_for(Phase::Grace, &proc(12, 12))),
            [Sig::TERM]
        );
        // Rewritten to QUIT on the way, then --stop-signal HUP differs from TERM: both.
        let rewritten = StopPlan {
            stop_signal: Sig::HUP,
            forwarded: Some(forwarded(ForwardedTo::Group(Pid::from_raw(10)), Sig::QUIT)),
            ..plan()
        };
        assert_eq!(
            sigs(rewritten.signals_for(Phase::Grace, &proc(11, 10))),
            [Sig::QUIT, Sig::HUP]
        );
    }

    #[test]
    fn one_call_reaches_the_group_only_when_every_member_gets_the_same_one_signal() {
        let g = Pid::from_raw(10);
        assert_eq!(plan().group_signal(g), Some(Sig::TERM));
        // Forwarded to the group: what it was rewritten to, and no second signal.
        let with = |f, stop_signal| StopPlan {
            stop_signal,
            forwarded: Some(f),
            ..plan()
        };
        let to_group = forwarded(ForwardedTo::Group(g), Sig::QUIT);
        assert_eq!(with(to_group, Sig::TERM).group_signal(g), Some(Sig::QUIT));
        // QUIT then HUP: two signals, one at a time.
        assert_eq!(with(to_group, Sig::HUP).group_signal(g), None);
        // Forwarded to the child alone: the rest of its group gets the stop signal, so the group
        // is one call only when the two agree.
        let to_child = |sig| forwarded(ForwardedTo::Process(g), sig);
        assert_eq!(
            with(to_child(Sig::TERM), Sig::TERM).group_signal(g),
            Some(Sig::TERM)
        );
        assert_eq!(with(to_child(Sig::QUIT), Sig::TERM).group_signal(g), None);
        // Forwarded to another group: this one gets the stop signal alone.
        let other = forwarded(ForwardedTo::Group(Pid::from_raw(11)), Sig::QUIT);
        assert_eq!(with(other, Sig::TERM).group_signal(g), Some(Sig::TERM));
    }

    #[test]
    fn only_the_forwarded_signal_is_not_the_stops_own() {
        let child = Pid::from_raw(10);
        let received_int = StopPlan {
            forwarded: Some(Forwarded {
                to: ForwardedTo::Group(child),
                sig: Sig::INT,
                received: Sig::INT,
            }),
            ..plan()
        };
        assert!(!received_int.on_own_account(Phase::Grace, child, child, Sig::INT));
        // --stop-signal TERM after the forwarded INT, and SIGKILL: the stop's own.
        assert!(received_int.on_own_account(Phase::Grace, child, child, Sig::TERM));
        assert!(received_int.on_own_account(Phase::Kill, child, child, Sig::KILL));
        // INT to a process it was not forwarded to is the stop's own too.
        let other = Pid::from_raw(12);
        assert!(received_int.on_own_account(Phase::Grace, other, other, Sig::INT));
        assert!(plan().on_own_account(Phase::Grace, child, child, Sig::TERM));
    }

    #[test]
    fn the_childs_group_is_first_and_the_rest_waits_only_in_the_grace() {
        let child_first = StopPlan {
            child_first: Some(ChildFirst {
                child: Pid::from_raw(10),
                group: Pid::from_raw(10),
            }),
            ..plan()
        };
        assert!(!child_first.waits_for_child(Phase::Grace, &proc(10, 10)));
        assert!(!child_first.waits_for_child(Phase::Grace, &proc(11, 10)));
        assert!(child_first.waits_for_child(Phase::Grace, &proc(12, 12)));
        assert!(!child_first.waits_for_child(Phase::Kill, &proc(12, 12)));
        assert!(!plan().waits_for_child(Phase::Grace, &proc(12, 12)));
    }
}
