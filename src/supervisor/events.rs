//! The run's one loop: wait for the next event, hand each to its component, move the stops on.

use super::*;

impl Supervisor {
    pub(super) fn event_loop(&mut self) -> anyhow::Result<()> {
        loop {
            let now = Instant::now();
            // What the reaps since the last turn did. After a full batch this turn reaps on
            // without sleeping, as no new SIGCHLD may come for the children already waiting.
            let reaped = std::mem::take(&mut self.turn_reaped);
            let mut tree_done = false;
            if let State::Stopping(stop) | State::Waiting(stop) = &mut self.state {
                stop.progress(now, reaped);
                tree_done = stop.is_done();
            }
            if tree_done {
                // A watch that found the tree empty on its own: the folders are swept now.
                self.begin_sweep();
            }
            let clients = self.clients();
            if let Some(sweep) = &mut self.sweep {
                sweep.set_clients(clients);
                if tree_done {
                    sweep.tree_done(now);
                }
                sweep.progress(now);
            }
            self.progress_execs(now, reaped);
            // Under `--scope tree` the run's own stop covered every exec's processes, so an exec
            // that only watches them does not hold the run; `conclude` reports it.
            if self.main_done() && self.execs.running.values().all(|e| e.watch_only()) {
                return Ok(());
            }
            if let Some(c) = &mut self.requests.server {
                c.sync();
            }
            let ready = self
                .sources
                .reactor
                .wait(if reaped.more_waiting {
                    Some(now)
                } else {
                    self.deadline()
                })
                .context("waiting for events (epoll)")?;
            let now = Instant::now();
            let mut exited: BTreeMap<u64, Vec<Pid>> = BTreeMap::new();
            let mut got_signals = false;
            let mut control_events = Vec::new();
            for (key, revents) in ready {
                match key {
                    Key::Signals => got_signals = true,
                    Key::Parent => self.on_parent_exit(),
                    Key::Member { owner, pid } => exited.entry(owner).or_default().push(pid),
                    Key::Listener | Key::Conn(_) => {
                        if let Some(c) = &mut self.requests.server {
                            control_events.extend(c.on_ready(key, revents, now));
                        }
                    }
                    Key::Keys | Key::Output => {}
                }
            }
            if got_signals {
                self.on_signals(reaped.more_waiting)?;
            } else if reaped.more_waiting {
                self.reap();
            }
            for (owner, pids) in exited {
                let stop = match owner {
                    RUN => match &mut self.state {
                        State::Stopping(s) | State::Waiting(s) => Some(s),
                        State::Running => None,
                    },
                    id => self.execs.running.get_mut(&id).and_then(|e| e.stop_mut()),
                };
                if let Some(stop) = stop {
                    stop.exited(&pids);
                }
            }
            for event in control_events {
                self.on_control(event);
            }
            if let Some(c) = &mut self.requests.server {
                c.expire(now);
            }
            self.on_deadlines(now);
        }
    }

    /// The earliest moment something must happen without an event.
    fn deadline(&self) -> Option<Instant> {
        let mut deadline = match &self.state {
            State::Running => self.timeout_deadline(),
            State::Waiting(s) => earliest(self.timeout_deadline(), s.deadline()),
            State::Stopping(s) => s.deadline(),
        };
        for e in self.execs.running.values() {
            deadline = earliest(deadline, e.deadline());
        }
        if let Some(s) = &self.sweep {
            deadline = earliest(deadline, s.deadline());
        }
        if let Some(c) = &self.requests.server {
            deadline = earliest(deadline, c.deadline());
        }
        deadline
    }

    fn on_parent_exit(&mut self) {
        // Readable for good from now on: closing it leaves the reactor.
        self.sources.parent = None;
        if !matches!(self.state, State::Stopping(_)) {
            msg::verbose(format_args!("parent process exited"));
            self.begin_stop(Reason::ParentDied, None);
        }
    }

    /// Reads and handles the pending signals, then reaps if SIGCHLD was one of them or `reap`
    /// asks for it.
    fn on_signals(&mut self, reap: bool) -> anyhow::Result<()> {
        let infos =
            sys::read_signals(self.sources.signals.fd()).context("reading signals (signalfd)")?;
        let mut chld = false;
        // Signals first: a SIGCONT must be forwarded before a stale stop report is read.
        for info in infos {
            if info.sig == Sig::CHLD {
                chld = true;
            } else if info.is_own_write_error() {
                // Not even a -v line: stderr may be the closed pipe, and the line would raise
                // the next one.
            } else {
                msg::verbose(format_args!(
                    "received {} from pid {}",
                    info.sig, info.sender
                ));
                self.on_signal(info);
            }
        }
        if chld || reap {
            self.reap();
        }
        Ok(())
    }

    /// Exec timeouts and the run's `--timeout`.
    fn on_deadlines(&mut self, now: Instant) {
        let plan = self.plan(None);
        let reactor = &self.sources.reactor;
        for e in self.execs.running.values_mut() {
            if !e.is_stopping() && e.deadline().is_some_and(|d| now >= d) {
                msg::verbose(format_args!("exec {} timed out", e.pid));
                e.begin_stop(ExecEnd::Timeout, plan, reactor, false);
            }
        }
        if let Some(d) = self.timeout_deadline() {
            if now >= d && matches!(self.state, State::Running | State::Waiting(_)) {
                msg::verbose(format_args!(
                    "timeout after {}",
                    humantime::format_duration(self.config.stop.timeout.unwrap_or_default())
                ));
                self.begin_stop(Reason::Timeout, None);
            }
        }
    }
}
