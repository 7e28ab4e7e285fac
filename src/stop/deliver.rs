//! Signalling one process through its handle, then tracking it until its pidfd says it exited.

use super::*;

impl Stop {
    /// Tracks a signalled process, or remembers why it could not be signalled.
    pub(super) fn record(&mut self, pid: Pid, result: Result<Option<Tracked>, String>) {
        match result {
            Ok(Some(mut t)) => {
                self.room.note(t.handle.pidfd().is_some());
                if let Some(fd) = t.handle.pidfd() {
                    let key = Key::Member {
                        owner: self.wake.owner,
                        pid,
                    };
                    match self.wake.reactor.register(fd, key, EpollFlags::EPOLLIN) {
                        Ok(r) => t.wake = Some(r),
                        Err(e) => {
                            // Its exit would wake nobody: the stop cannot be proven.
                            self.errors.push(format!("could not watch pid {pid}: {e}"));
                        }
                    }
                }
                self.tracked.insert(pid, t);
            }
            Ok(None) => {}
            Err(e) => {
                self.errors.push(e);
            }
        }
    }

    /// Opens a handle (which re-reads the process to prove the pid still names a live member),
    /// then signals it. `Ok(None)`: it is gone, or no longer a member.
    pub(super) fn open_and_signal(
        &mut self,
        p: &Proc,
        known: &HashSet<Pid>,
        sigs: Signals,
    ) -> Result<Option<Tracked>, String> {
        let scope = self.plan.scope;
        let still = |f: &Proc| f.is_live() && scope.belongs(f, known);
        let room = self.room.may_open();
        match Handle::open(p, still)? {
            Some((handle, fresh)) => {
                let mut tracked = self.deliver(&fresh, handle, sigs);
                if let (false, Ok(Some(t))) = (room, &mut tracked) {
                    // Past the stop's room: signalled through a pidfd all the same, which is
                    // then let go, so that descriptors remain for reading /proc.
                    t.handle.release_pidfd();
                }
                tracked
            }
            None => Ok(None),
        }
    }

    /// Signals `p` through `handle` (unless its group's call reached it already, see
    /// `reached_by_call`) and returns what to track. `Ok(None)`: it is gone.
    pub(super) fn deliver(
        &mut self,
        p: &Proc,
        handle: Handle,
        sigs: Signals,
    ) -> Result<Option<Tracked>, String> {
        let reached = self.reached_by_call(p);
        let mut unkillable = false;
        for sig in sigs.iter() {
            let sent = if reached {
                wake_if_stopped(&handle, p, sig, &mut self.sent);
                Ok(())
            } else {
                send(&handle, p, sig, &mut self.sent, "")
            };
            match sent {
                Ok(()) => {
                    if self.plan.main_child == Some(p.pid) {
                        self.note_sent_to_child(p.pgid, sig);
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
                Err(e) => {
                    self.errors.push(format!(
                        "could not send {sig} to pid {} ({}): {e}",
                        p.pid, p.comm
                    ));
                    unkillable = sig == Sig::KILL;
                }
            }
        }
        Ok(Some(Tracked {
            wake: None,
            handle,
            unkillable,
        }))
    }

    /// Notes that `sig` reached the main child (in group `pgid`), if it was the stop's own.
    pub(super) fn note_sent_to_child(&mut self, pgid: Pid, sig: Sig) {
        let Some(child) = self.plan.main_child else {
            return;
        };
        if self.plan.on_own_account(self.phase, child, pgid, sig)
            && !self.sent_to_child.contains(&sig)
        {
            self.sent_to_child.push(sig);
        }
    }
}

/// Sends `sig` to `p` through `handle`, counts it in `sent` and tells it under `-v` (`why` ends
/// the line); a stopped process is continued too.
pub(super) fn send(
    handle: &Handle,
    p: &Proc,
    sig: Sig,
    sent: &mut BTreeMap<Sig, u64>,
    why: &str,
) -> std::io::Result<()> {
    handle.signal(sig)?;
    *sent.entry(sig).or_default() += 1;
    crate::msg::verbose(format_args!("sent {sig} to {} ({}){why}", p.pid, p.comm));
    wake_if_stopped(handle, p, sig, sent);
    Ok(())
}

/// A stopped process would hold a polite signal pending until continued: SIGCONT follows it.
fn wake_if_stopped(handle: &Handle, p: &Proc, sig: Sig, sent: &mut BTreeMap<Sig, u64>) {
    if p.state == "T" && sig != Sig::KILL && sig != Sig::CONT && handle.signal(Sig::CONT).is_ok() {
        *sent.entry(Sig::CONT).or_default() += 1;
    }
}
