//! Reaping: every child that changed state, routed to its owner (the main child or an exec).

use super::*;

/// The most children one call reaps. Children that exit faster than they are reaped (forks on
/// many cores) would otherwise keep the loop here, past every deadline of the run.
const REAP_BATCH: usize = 1024;

impl Supervisor {
    /// Reaps the children that have changed state, at most `REAP_BATCH`; the main child's end
    /// may start the stop. Says how many ended and whether the batch was full, so that more may
    /// be waiting; the loop's next turn hears it too, with every other reap since its last.
    pub(super) fn reap(&mut self) -> Reaped {
        let done = self.reap_batch();
        self.turn_reaped = self.turn_reaped.then(done);
        done
    }

    fn reap_batch(&mut self) -> Reaped {
        // Stop reports are only acted on for the main child; one ask per batch is enough, since
        // a report queued after it comes with its own SIGCHLD.
        let mut job = self.child.pid().filter(|_| self.child.alive());
        let mut done = Reaped::default();
        for _ in 0..REAP_BATCH {
            // Under -v, the command of what is about to be reaped, while /proc still has it.
            let ending = msg::is_verbose()
                .then(|| sys::next_to_reap(job))
                .flatten()
                .and_then(|pid| crate::proctable::read(pid).ok().flatten())
                .map(|p| (p.pid, p.comm));
            let (pid, state) = match sys::wait_any(job.take()) {
                Ok(Waited::Child(pid, state)) => (pid, state),
                Ok(Waited::NoneReady) => return done,
                Ok(Waited::NoChildren) => {
                    done.none_left = true;
                    return done;
                }
                Err(e) => {
                    self.record.errors.push(format!("waitpid: {e}"));
                    return done;
                }
            };
            if matches!(state, ChildState::Exited(_) | ChildState::Signaled(_)) {
                done.ended += 1;
                crate::scope::reaped(pid);
            }
            let is_main = Some(pid) == self.child.pid();
            let name = Named {
                pid,
                comm: ending
                    .as_ref()
                    .filter(|(p, _)| *p == pid)
                    .map(|(_, comm)| comm.as_str()),
            };
            let plan = self.plan(None);
            if let Some(e) = self.execs.running.values_mut().find(|e| e.pid == pid) {
                if matches!(state, ChildState::Exited(_) | ChildState::Signaled(_)) {
                    self.record.reaped += 1;
                    e.status = Some(state);
                    msg::verbose(format_args!("exec {name} ended: {state}"));
                    e.begin_stop(ExecEnd::Exited, plan, &self.sources.reactor, false);
                }
                continue;
            }
            match state {
                ChildState::Exited(_) | ChildState::Signaled(_) if is_main => {
                    // Its pid is free from now on: the files kept open on it must go first.
                    crate::proctable::files::unpin(pid);
                    msg::verbose(format_args!("child {name} ended: {state}"));
                    self.child.ended(state);
                    if let State::Stopping(s) = &mut self.state {
                        s.main_child_exited();
                    }
                    // A reason means a stop already ran: `conclude` puts the state back to Running
                    // and reaps once more, and a child whose exit is only collected then (its
                    // pidfd told the stop before SIGCHLD was read) must not start a second stop
                    // that renames the first one's reason (timeout or signal became child_exited).
                    if matches!(self.state, State::Running) && self.record.reason.is_none() {
                        match self.config.stop.when_child_exits {
                            WhenChildExits::Stop => self.begin_stop(Reason::ChildExited, None),
                            WhenChildExits::Wait => {
                                self.record.reason = Some(Reason::ChildExited);
                                self.state = State::Waiting(Stop::watch(
                                    self.plan(None),
                                    self.wake(),
                                    Instant::now(),
                                ));
                                self.stop_execs();
                            }
                        }
                    }
                }
                ChildState::Exited(_) | ChildState::Signaled(_) => {
                    self.record.reaped += 1;
                    msg::verbose(format_args!("reaped {name}: {state}"));
                }
                ChildState::Stopped(sig) if is_main && sig.is_job_control() && !self.pid1 => {
                    // Only stop along if the child is still stopped: a SIGCONT may have been
                    // forwarded since this report was queued.
                    let still = crate::proctable::read(pid)
                        .ok()
                        .flatten()
                        .filter(|p| p.state == "T");
                    if let (Some(p), State::Running) = (still, &self.state) {
                        // Stopped for reading or setting the terminal while our group has it: a
                        // job brought to the front by `fg` while it ran (no SIGCONT then). It only
                        // lacked the terminal, so hand it over and continue its group (the kernel
                        // stopped all of it) instead of stopping the job.
                        if sig != Sig::TSTP && self.give_terminal_to(p.pgid) {
                            msg::verbose(format_args!("child stopped by {sig} while vloer-run has the terminal; handing it over"));
                            let _ = sys::killpg(p.pgid, Sig::CONT);
                            continue;
                        }
                        if crate::terminal::own_group_orphaned() {
                            // As the kernel discards a terminal's stop for an orphaned group (the
                            // bare command would have ignored it), and nobody could continue
                            // vloer-run: the child goes on.
                            msg::verbose(format_args!("child stopped by {sig}; vloer-run leads an orphaned group that nobody could resume, so continuing it"));
                            let _ = sys::killpg(p.pgid, Sig::CONT);
                            continue;
                        }
                        msg::verbose(format_args!(
                            "child stopped by {sig}; stopping vloer-run too"
                        ));
                        sys::stop_self(sig);
                    }
                }
                ChildState::Stopped(sig)
                    if is_main && sig.is_job_control() && self.pid1 && self.terminal.handing() =>
                {
                    // As PID 1 there is no shell to `fg` the job: a Ctrl-Z would hang the
                    // terminal for good (dumb-init#184), so the child is continued at once.
                    msg::verbose(format_args!(
                        "child stopped by {sig}; as PID 1 nobody could resume it, so continuing it"
                    ));
                    if let Some(pgid) = crate::proctable::read(pid).ok().flatten().map(|p| p.pgid) {
                        let _ = sys::killpg(pgid, Sig::CONT);
                    }
                }
                ChildState::Stopped(_) | ChildState::Continued => {}
            }
        }
        done.more_waiting = true;
        done
    }
}

/// A reaped child in a -v line: its pid, and its command when it was read before the reap
/// (`4711 (sleep)`).
struct Named<'a> {
    pid: Pid,
    comm: Option<&'a str>,
}

impl std::fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.comm {
            Some(comm) => write!(f, "{} ({comm})", self.pid),
            None => write!(f, "{}", self.pid),
        }
    }
}
