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
    /// The signal that started the stop, forwarded: in step 1 these processes get the forwarded
    /// signal (the second, after `--rewrite`), then `stop_signal` only if it differs from the
    /// received one (the third), so none of them gets one signal twice.
    pub first: Option<(FirstTarget, Sig, Sig)>,
    /// The main child, alive when the stop begins, gets the first word: in the grace phase only
    /// its process group is signalled until `Stop::release` (it has exited). None: all at once.
    pub first_word: Option<FirstWord>,
}

/// The main child and its process group, which hear from the stop before the rest of the scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstWord {
    pub child: Pid,
    pub group: Pid,
}

/// Who already received the signal that started the stop.
#[derive(Clone, Copy, Debug)]
pub enum FirstTarget {
    Group(Pid),
    Process(Pid),
}

impl FirstTarget {
    fn covers(self, p: &Proc) -> bool {
        match self {
            FirstTarget::Group(g) => p.pgid == g,
            FirstTarget::Process(pid) => p.pid == pid,
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
            Phase::Grace => self.grace_signals(self.first.is_some_and(|(t, ..)| t.covers(p))),
            Phase::Kill => Signals::of(Sig::KILL, Sig::NONE),
        }
    }

    /// The grace's signals, for a process the signal that started the stop was forwarded to
    /// (`forwarded_to`) or not.
    fn grace_signals(&self, forwarded_to: bool) -> Signals {
        match self.first {
            Some((_, forwarded, received)) if forwarded_to => {
                let then = self.stop_signal;
                Signals::of(forwarded, if then == received { Sig::NONE } else { then })
            }
            _ => Signals::of(self.stop_signal, Sig::NONE),
        }
    }

    /// The one signal the grace sends to every member of group `pgid` alike, which one call to
    /// the group can then deliver; None when members differ or get two.
    pub(super) fn group_signal(&self, pgid: Pid) -> Option<Sig> {
        let sigs = match self.first {
            None => self.grace_signals(false),
            Some((FirstTarget::Group(g), ..)) => self.grace_signals(g == pgid),
            Some((FirstTarget::Process(_), ..)) => {
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
    pub(super) fn holds(&self, phase: Phase, p: &Proc) -> bool {
        phase == Phase::Grace
            && self
                .first_word
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
            first: None,
            first_word: None,
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
            first: Some((FirstTarget::Group(Pid::from_raw(10)), Sig::TERM, Sig::TERM)),
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
            first: Some((FirstTarget::Group(Pid::from_raw(10)), Sig::QUIT, Sig::TERM)),
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
        let forwarded = |first, stop_signal| StopPlan {
            stop_signal,
            first: Some(first),
            ..plan()
        };
        let to_group = (FirstTarget::Group(g), Sig::QUIT, Sig::TERM);
        assert_eq!(
            forwarded(to_group, Sig::TERM).group_signal(g),
            Some(Sig::QUIT)
        );
        // QUIT then HUP: two signals, one at a time.
        assert_eq!(forwarded(to_group, Sig::HUP).group_signal(g), None);
        // Forwarded to the child alone: the rest of its group gets the stop signal, so the group
        // is one call only when the two agree.
        let to_child = |fwd| (FirstTarget::Process(g), fwd, Sig::TERM);
        assert_eq!(
            forwarded(to_child(Sig::TERM), Sig::TERM).group_signal(g),
            Some(Sig::TERM)
        );
        assert_eq!(
            forwarded(to_child(Sig::QUIT), Sig::TERM).group_signal(g),
            None
        );
        // Forwarded to another group: this one gets the stop signal alone.
        let other = (FirstTarget::Group(Pid::from_raw(11)), Sig::QUIT, Sig::TERM);
        assert_eq!(forwarded(other, Sig::TERM).group_signal(g), Some(Sig::TERM));
    }

    #[test]
    fn the_childs_group_is_first_and_the_rest_waits_only_in_the_grace() {
        let child_first = StopPlan {
            first_word: Some(FirstWord {
                child: Pid::from_raw(10),
                group: Pid::from_raw(10),
            }),
            ..plan()
        };
        assert!(!child_first.holds(Phase::Grace, &proc(10, 10)));
        assert!(!child_first.holds(Phase::Grace, &proc(11, 10)));
        assert!(child_first.holds(Phase::Grace, &proc(12, 12)));
        assert!(!child_first.holds(Phase::Kill, &proc(12, 12)));
        assert!(!plan().holds(Phase::Grace, &proc(12, 12)));
    }
}
