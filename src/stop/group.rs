//! The main child's process group, reached in one call: the grace's signal at the start of the
//! stop, so every member hears it at once instead of one by one as the walk finds them. Only that
//! signal goes to the group as a whole (a process that joined it from outside the run hears it
//! too, as under `tini -g`); every later one goes to a member of the scope on its own.

use super::*;

/// The main child's process group, handed to the run's stop.
pub struct ChildGroup {
    pub pgid: Pid,
    /// The child's pidfd (a copy: the run keeps its own), where the kernel has them: it names
    /// the group even after the child was reaped and its number reused.
    pub pidfd: Option<OwnedFd>,
    /// The child is not reaped yet, so its number still holds the group id for `killpg`.
    pub leader_unreaped: bool,
}

pub(super) struct Group {
    pgid: Pid,
    pidfd: Option<OwnedFd>,
    leader_unreaped: bool,
    /// The grace's signal went to the whole group at this moment, in start-time ticks (a member
    /// that started later missed it); until the first scan after it, which tracks the members
    /// it reached without signalling them again.
    called_at: Option<u64>,
    /// The CPU time the call took: the kernel signals and wakes each member in it, so a large
    /// group shows in its length (see `Stop::group_dying`). CPU time, as the members it wakes
    /// may run before it returns, and that time is not the call's.
    pub(super) call_cpu: Duration,
}

impl Group {
    pub(super) fn new(g: ChildGroup) -> Group {
        Group {
            pgid: g.pgid,
            pidfd: g.pidfd,
            leader_unreaped: g.leader_unreaped,
            called_at: None,
            call_cpu: Duration::ZERO,
        }
    }
}

impl Stop {
    /// Step 1's signal to the child's group in one call, when every member gets the same one
    /// and the child is unreaped: through its pidfd, or `killpg` while its number still holds
    /// the group id. Counted once in `sent`: the kernel does not say how many it reached, and
    /// members that reap each other leave no trace to count them by.
    pub(super) fn call_group(&mut self) {
        let Some(g) = self.group.as_mut().filter(|g| g.leader_unreaped) else {
            return;
        };
        let (Some(sig), Some(tick)) = (self.plan.group_signal(g.pgid), sys::boot_ticks()) else {
            return;
        };
        let start = sys::thread_cpu_time();
        let through_pidfd = g
            .pidfd
            .as_ref()
            .map(|fd| sys::pidfd_signal_group(fd.as_fd(), sig));
        let called = match through_pidfd {
            Some(Ok(())) => true,
            Some(Err(e)) if e.kind() != std::io::ErrorKind::Unsupported => false,
            _ => sys::killpg(g.pgid, sig).is_ok(),
        };
        // Otherwise the scan signals each member on its own, as without the call.
        if !called {
            return;
        }
        g.called_at = Some(tick);
        g.call_cpu = sys::thread_cpu_time().saturating_sub(start);
        let pgid = g.pgid;
        *self.sent.entry(sig).or_default() += 1;
        crate::msg::verbose(format_args!(
            "sent {sig} to the child's process group {pgid}"
        ));
        // The unreaped child still leads the group it was started in, so the call reached it.
        self.note_sent_to_child(pgid, sig);
    }

    /// Between the call and the first scan after it. The run reaps first: most of a group that
    /// ends on the signal is gone by then, and a zombie reaped costs less than one read first.
    pub fn scan_due(&self) -> bool {
        self.group.as_ref().is_some_and(|g| g.called_at.is_some())
    }

    /// Whether the call already delivered `p`'s grace signal (the plan's, as the call is only
    /// made when the group's members all get that one): this is the first scan after it and
    /// `p` was in the group then, so it is tracked, not signalled again. A member that started
    /// within the call's tick counts as reached (the tick is all `/proc` tells). Only in the
    /// grace: a scan that comes after it (`--grace 0`) owes every member its SIGKILL.
    pub(super) fn reached_by_call(&self, p: &Proc) -> bool {
        self.phase == Phase::Grace
            && self.group.as_ref().is_some_and(|g| {
                g.called_at
                    .is_some_and(|tick| p.pgid == g.pgid && p.starttime <= tick)
            })
    }

    /// Ends what the call covers, after its first scan: whoever joins the group later (a
    /// member's child forked after the call) is signalled on its own.
    pub(super) fn close_call(&mut self) {
        if let Some(g) = self.group.as_mut() {
            g.called_at = None;
        }
    }
}
